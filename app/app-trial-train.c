#define G_LOG_DOMAIN "app-trial-train"
#include "config.h"

#include "app-trial-train.h"

#include <glib/gi18n.h>
#include <math.h>

#include "planner-redistribute.h"

void
app_trial_train_free (AppTrialTrain *train)
{
  if (train == NULL)
    return;
  g_free (train->grad_worst);
  g_free (train->updated_worst);
  g_free (train);
}

static double
max_abs (const ExecutorHostTensor *t)
{
  double m = 0;
  for (gint64 e = 0; e < executor_host_tensor_numel (t); e++)
    m = MAX (m, fabs (((const float *) t->data)[e]));
  return m;
}

/* Sharded against the reference: loss, each gradient, each updated weight, each as max
 * |sharded - reference| / max |reference|. A gradient that is zero in exact arithmetic
 * (BERT's key bias: softmax ignores a constant added to every score) is round-off in both
 * runs, so a gradient's scale is at least a thousandth of the largest one. Adam's first step
 * is lr sign (g): where a gradient is round-off the two runs may step opposite ways, so its
 * updated weights are reported, not judged. */
AppTrialTrain *
app_trial_train_compare (ExecutorTensors *reference, ExecutorTensors *sharded,
                         const ExecutorTrainOptions *options, double tolerance)
{
  g_return_val_if_fail (reference != NULL && sharded != NULL && options != NULL, NULL);
  AppTrialTrain *train = g_new0 (AppTrialTrain, 1);
  train->adam = options->optimizer == EXECUTOR_OPTIMIZER_ADAM;
  train->lr = options->lr;
  const ExecutorHostTensor *loss = executor_tensors_lookup (reference, "loss");
  train->loss = loss ? ((const float *) loss->data)[0] : NAN;

  double grad_max = 0;
  for (guint i = 0; i < executor_tensors_get_n (reference); i++)
    {
      const ExecutorHostTensor *r = executor_tensors_get_nth (reference, i);
      if (g_str_has_prefix (r->name, "grad."))
        grad_max = MAX (grad_max, max_abs (r));
    }
  gboolean missing = loss == NULL;
  train->updated_rel_error = 0;
  for (guint i = 0; i < executor_tensors_get_n (reference); i++)
    {
      const ExecutorHostTensor *r = executor_tensors_get_nth (reference, i);
      gboolean is_loss = g_str_equal (r->name, "loss");
      gboolean is_grad = g_str_has_prefix (r->name, "grad.");
      gboolean is_updated = g_str_has_prefix (r->name, "updated.");
      if (!is_loss && !is_grad && !is_updated)
        continue;
      const ExecutorHostTensor *s = executor_tensors_lookup (sharded, r->name);
      if (s == NULL || executor_host_tensor_numel (s) != executor_host_tensor_numel (r))
        {
          /* The sharded step lacks what the reference has: that is a difference. */
          missing = TRUE;
          continue;
        }
      double scale = max_abs (r), diff = 0;
      for (gint64 e = 0; e < executor_host_tensor_numel (r); e++)
        diff = MAX (diff, fabs (((const float *) r->data)[e] - ((const float *) s->data)[e]));
      if (is_grad)
        scale = MAX (scale, 1e-3 * grad_max);
      double rel = scale > 0 ? diff / scale : diff;
      if (is_loss)
        train->loss_rel_error = rel;
      else if (is_grad)
        {
          train->n_parameters++;
          if (train->grad_worst == NULL || rel >= train->grad_rel_error)
            {
              train->grad_rel_error = rel;
              g_free (train->grad_worst);
              train->grad_worst = g_strdup (r->name + strlen ("grad."));
            }
        }
      else if (train->updated_worst == NULL || rel >= train->updated_rel_error)
        {
          train->updated_rel_error = rel;
          g_free (train->updated_worst);
          train->updated_worst = g_strdup (r->name + strlen ("updated."));
        }
    }
  train->passed = !missing && train->loss_rel_error <= tolerance
                  && train->grad_rel_error <= tolerance
                  && (train->adam || train->updated_rel_error <= tolerance);
  return train;
}

AppTrialTrain *
app_trial_train_run (PlannerPlan *plan, guint64 seed, const ExecutorTrainOptions *options,
                     double tolerance, GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_return_val_if_fail (options != NULL, NULL);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  g_autoptr (ExecutorTensors) sources = NULL;
  g_autoptr (ExecutorTensors) reference = executor_tensors_new ();
  g_autoptr (ExecutorTensors) sharded = executor_tensors_new ();
  ExecutorTrainTimes times = { 0 };
  if (g_cancellable_set_error_if_cancelled (cancellable, error)
      || !(sources = executor_trial_sources (graph, seed, NULL, error))
      || g_cancellable_set_error_if_cancelled (cancellable, error)
      || !executor_train_step_reference (graph, sources, options, reference, error)
      || g_cancellable_set_error_if_cancelled (cancellable, error)
      || !executor_train_step_sharded (plan, sources, options, sharded, &times, error)
      || g_cancellable_set_error_if_cancelled (cancellable, error))
    return NULL;
  AppTrialTrain *train = app_trial_train_compare (reference, sharded, options, tolerance);
  train->times = times;
  return train;
}

char *
app_trial_train_dup_summary (const AppTrialTrain *train)
{
  g_return_val_if_fail (train != NULL, NULL);
  g_autofree char *bw = planner_format_time (train->times.backward_s);
  g_autofree char *ebw = planner_format_time (train->times.estimated_backward_s);
  return g_strdup_printf (
      _("Training step (%s, lr %g) %s: loss %.6g, max rel error %.3g; gradients of %u "
        "parameters: max rel error %.3g (%s); updated weights: max rel error %.3g (%s)%s; "
        "backward estimated %s, measured %s."),
      train->adam ? "adam" : "sgd", train->lr,
      train->passed ? _("matches the reference") : _("differs from the reference"),
      train->loss, train->loss_rel_error, train->n_parameters, train->grad_rel_error,
      train->grad_worst ? train->grad_worst : "-", train->updated_rel_error,
      train->updated_worst ? train->updated_worst : "-",
      train->adam ? _(", not judged: Adam's first step is lr sign (g)") : "", ebw, bw);
}
