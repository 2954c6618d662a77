#define G_LOG_DOMAIN "test-pipeline-schedule"

#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "executor-pipeline.h"
#include "executor-trial.h"
#include "executor-train.h"
#include "planner-model.h"
#include "planner-pipeline.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

/* The pipelined training step (issue 18): the plan's micro-batch schedule on CPU devices,
 * against the unsharded full-batch step (4-layer llama-tiny; gpt2-tiny for a tied embedding). The orders each stage must run are written here by
 * hand from Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU
 * Clusters Using Megatron-LM", section 2.2, figures 3 and 4), not taken from the planner:
 *
 * 1F1B (PipeDream-Flush), p = 2, m = 4: stage s first runs p - s - 1 forwards (warm-up),
 * then one forward and one backward in turn, then the backwards left (cool-down).
 *   stage 0: warm-up F0; steady F1 B0, F2 B1, F3 B2; cool-down B3
 *   stage 1: no warm-up; F0 B0, F1 B1, F2 B2, F3 B3
 * GPipe: every forward, then every backward, on both stages.
 * Interleaved, p = 2, v = 2, m = 4: stage s holds chunks s and s + 2. Virtual micro-batch f
 * is micro-batch (f / (p v)) p + f % p through the stage's chunk (f / p) % v forwards, the
 * reverse chunk backwards; warm-up 2 (p - s - 1) + (v - 1) p forwards: 4 on stage 0, 2 on
 * stage 1. Forwards by f: 0.c0 1.c0 0.c1 1.c1 2.c0 3.c0 2.c1 3.c1; backwards by b: 0.c1 1.c1
 * 0.c0 1.c0 2.c1 3.c1 2.c0 3.c0. "F0.2" is micro-batch 0 through global chunk 2.
 *   stage 0: F0.0 F1.0 F0.2 F1.2 | F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 | B2.2 B3.2 B2.0 B3.0
 *   stage 1: F0.1 F1.1 | F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 F3.3 B3.3 | B2.1 B3.1
 */

#define M 4

static const char *const order_1f1b[] = { "F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3" };
static const char *const order_gpipe[] = { "F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3" };
static const char *const order_interleaved[] = {
  "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 B2.2 B3.2 B2.0 B3.0",
  "F0.1 F1.1 F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 F3.3 B3.3 B2.1 B3.1",
};

typedef struct
{
  const char *path;
  const char *model;
  const char *mesh;
  const char *policy;
  gint64 batch;
  PlannerSchedule schedule;
  guint virtual_stages;
  const char *const *order; /* per stage */
  guint boundaries;         /* chunk boundaries: p v - 1 */
  guint pipelines;          /* pp groups: devices / p */
} Case;

static const Case cases[] = {
  { "/executor/pipeline-schedule/pp2-mp2-1f1b", "llama-tiny", "pp=2,mp=2", "megatron", 4,
    PLANNER_SCHEDULE_1F1B, 1, order_1f1b, 1, 2 },
  { "/executor/pipeline-schedule/pp2-mp2-gpipe", "llama-tiny", "pp=2,mp=2", "megatron", 4,
    PLANNER_SCHEDULE_GPIPE, 1, order_gpipe, 1, 2 },
  { "/executor/pipeline-schedule/dp2-pp2-1f1b", "llama-tiny", "dp=2,pp=2", "dp", 8, PLANNER_SCHEDULE_1F1B, 1,
    order_1f1b, 1, 2 },
  { "/executor/pipeline-schedule/dp2-pp2-gpipe", "llama-tiny", "dp=2,pp=2", "dp", 8, PLANNER_SCHEDULE_GPIPE, 1,
    order_gpipe, 1, 2 },
  { "/executor/pipeline-schedule/pp2-mp2-interleaved", "llama-tiny", "pp=2,mp=2", "megatron", 4,
    PLANNER_SCHEDULE_INTERLEAVED, 2, order_interleaved, 3, 2 },
  { "/executor/pipeline-schedule/dp2-pp2-interleaved", "llama-tiny", "dp=2,pp=2", "dp", 8,
    PLANNER_SCHEDULE_INTERLEAVED, 2, order_interleaved, 3, 2 },
  /* GPT-2 ties the embedding to the head: wte on the first stage and the last, its gradient
   * the sum of both stages' (an AllReduce over pp after the last backward). */
  { "/executor/pipeline-schedule/gpt2-tied-pp2-mp2-1f1b", "gpt2-tiny", "pp=2,mp=2", "megatron", 4,
    PLANNER_SCHEDULE_1F1B, 1, order_1f1b, 1, 2 },
};

static PlannerPlan *
tiny_plan (const Case *c)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.layers = 4;
  options.seq = 16;
  options.batch = c->batch;
  g_autoptr (PlannerGraph) graph = planner_model_load (c->model, &options, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (c->mesh, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerHardware) hw = planner_hardware_lookup ("cpu-local", &error);
  g_assert_no_error (error);
  g_autoptr (GPtrArray) pins = planner_policy_expand (c->policy, graph, mesh, NULL, &error);
  g_assert_no_error (error);
  PlannerPropagateOptions popts;
  planner_propagate_options_init (&popts);
  PlannerPlan *plan = planner_propagate (graph, mesh, hw, pins, &popts, &error);
  g_assert_no_error (error);
  PlannerCostConstants k = *planner_plan_get_constants (plan);
  k.micro_batches = M;
  k.schedule = c->schedule;
  k.virtual_stages = c->virtual_stages;
  planner_plan_set_constants (plan, &k);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  return plan;
}

/* max |a - b| / max (max |b|, @floor). */
static double
rel_error (const ExecutorHostTensor *a, const ExecutorHostTensor *b, double floor)
{
  g_assert_nonnull (a);
  g_assert_nonnull (b);
  gint64 n = executor_host_tensor_numel (b);
  g_assert_cmpint (executor_host_tensor_numel (a), ==, n);
  const float *x = a->data, *y = b->data;
  double diff = 0, scale = floor;
  for (gint64 i = 0; i < n; i++)
    {
      diff = MAX (diff, fabs ((double)x[i] - y[i]));
      scale = MAX (scale, fabs ((double)y[i]));
    }
  return scale > 0 ? diff / scale : diff;
}

/* Stage 0 began a later micro-batch's forward before stage 1 ended an earlier one's, and
 * two stages computed at once for some time. */
static gboolean
ran_ahead (const ExecutorPipelineRun *run)
{
  if (run->overlap_s <= 0)
    return FALSE;
  for (guint i = 0; i < run->events->len; i++)
    for (guint j = 0; j < run->events->len; j++)
      {
        const ExecutorPipelineEvent *a = &g_array_index (run->events, ExecutorPipelineEvent, i);
        const ExecutorPipelineEvent *b = &g_array_index (run->events, ExecutorPipelineEvent, j);
        if (a->stage == 0 && b->stage == 1 && !a->backward && !b->backward
            && a->micro_batch > b->micro_batch && a->start_s < b->end_s)
          return TRUE;
      }
  return FALSE;
}

static void
test_schedule (gconstpointer data)
{
  const Case *c = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = tiny_plan (c);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (pl->m, ==, M);
  g_assert_cmpuint (pl->n_chunks, ==, 2 * c->virtual_stages);

  g_autoptr (ExecutorTensors) sources = executor_trial_sources (graph, 11, NULL, &error);
  g_assert_no_error (error);
  ExecutorTrainOptions options;
  executor_train_options_init (&options);
  options.lr = 0.1;
  g_autoptr (ExecutorTensors) ref = executor_tensors_new ();
  g_assert_true (executor_train_step_reference (graph, sources, &options, ref, &error));
  g_assert_no_error (error);

  g_autoptr (ExecutorTensors) sharded = executor_tensors_new ();
  ExecutorPipelineRun run = { 0 };
  ExecutorTrainTimes times;
  options.pipeline_run = &run;
  g_assert_true (executor_train_step_sharded (plan, sources, &options, sharded, &times, &error));
  g_assert_no_error (error);

  /* Loss, logits and every parameter's gradient and updated weight: the full-batch step's.
   * A gradient's scale is at least a thousandth of the largest (as run --train judges). */
  double loss_err = rel_error (executor_tensors_lookup (sharded, "loss"),
                               executor_tensors_lookup (ref, "loss"), 0);
  double logits_err = rel_error (executor_tensors_lookup (run.outputs, "logits"),
                                 executor_tensors_lookup (ref, "logits"), 0);
  double largest = 0, grad_err = 0, updated_err = 0;
  guint n_params = 0;
  for (guint i = 0; i < executor_tensors_get_n (ref); i++)
    {
      const ExecutorHostTensor *t = executor_tensors_get_nth (ref, i);
      if (g_str_has_prefix (t->name, "grad."))
        for (gint64 e = 0; e < executor_host_tensor_numel (t); e++)
          largest = MAX (largest, fabs (((const float *)t->data)[e]));
    }
  g_assert_cmpfloat (largest, >, 0);
  for (guint i = 0; i < executor_tensors_get_n (ref); i++)
    {
      const ExecutorHostTensor *t = executor_tensors_get_nth (ref, i);
      const ExecutorHostTensor *s = executor_tensors_lookup (sharded, t->name);
      if (g_str_has_prefix (t->name, "grad."))
        {
          n_params++;
          grad_err = MAX (grad_err, rel_error (s, t, 1e-3 * largest));
        }
      else if (g_str_has_prefix (t->name, "updated."))
        updated_err = MAX (updated_err, rel_error (s, t, 0));
    }
  g_autofree char *o0 = executor_pipeline_run_order (&run, 0);
  g_autofree char *o1 = executor_pipeline_run_order (&run, 1);
  g_test_message ("%s, %s on %s, %u micro-batches: loss %.6g (max rel error %.3g), logits %.3g, "
                  "gradients of %u parameters %.3g, updated weights %.3g; %u sends a pipeline, "
                  "%u in all; stages busy %.2f ms in %.2f ms, two at once %.2f ms",
                  c->model, planner_schedule_to_string (c->schedule), c->mesh, M,
                  *(const float *)executor_tensors_lookup (ref, "loss")->data, loss_err,
                  logits_err, n_params, grad_err, updated_err, run.sends, run.transfers,
                  run.busy_s * 1e3, run.wall_s * 1e3, run.overlap_s * 1e3);
  g_test_message ("stage 0: %s", o0);
  g_test_message ("stage 1: %s", o1);
  g_assert_cmpuint (n_params, >, 0);
  g_assert_cmpfloat (loss_err, <=, 1e-5);
  g_assert_cmpfloat (logits_err, <=, 1e-5);
  g_assert_cmpfloat (grad_err, <=, 1e-5);
  g_assert_cmpfloat (updated_err, <=, 1e-5);

  /* Each stage ran the textbook order. */
  g_assert_cmpuint (run.p, ==, 2);
  g_assert_cmpuint (run.m, ==, M);
  g_assert_cmpstr (o0, ==, c->order[0]);
  g_assert_cmpstr (o1, ==, c->order[1]);

  /* One activation forward and its gradient back per boundary and micro-batch, in each
   * pipeline: 2 M (p v - 1); every device of a stage sends its own shard. */
  g_assert_cmpuint (run.sends, ==, 2 * M * c->boundaries);
  g_assert_cmpuint (run.transfers, ==, 2 * M * c->boundaries * c->pipelines);

  /* The stages ran at once: stage 0 on a later micro-batch while stage 1 works on an
   * earlier one (no barrier between them, only the messages). Whether a given step shows it
   * depends on the threads' scheduling: on a loaded machine stage 0's thread may sleep
   * through all of stage 1's short forward. Up to 8 steps are run for it; with stages in
   * lockstep none ever shows it. */
  gboolean ahead = ran_ahead (&run);
  for (guint again = 0; again < 8 && !ahead; again++)
    {
      ExecutorPipelineRun other = { 0 };
      g_autoptr (ExecutorTensors) out = executor_tensors_new ();
      options.pipeline_run = &other;
      g_assert_true (executor_train_step_sharded (plan, sources, &options, out, &times, &error));
      ahead = ran_ahead (&other);
      g_test_message ("step %u again: stage 0 ran ahead %s", again + 1, ahead ? "yes" : "no");
      executor_pipeline_run_clear (&other);
    }
  g_assert_true (ahead);
  executor_pipeline_run_clear (&run);
}

/* The command: `run PLAN --train` on a 1F1B plan prints the schedule as it ran. */
static void
test_cli (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *dir = test_util_tmp_dir_new ("pipeline-schedule-XXXXXX");
  g_autofree char *plan = g_build_filename (dir, "plan.json", NULL);
  const char *const propagate[] = { "propagate", "llama-tiny", "--mesh", "pp=2,mp=2", "--policy",
                                    "megatron", "--layers", "4", "--seq", "16", "--batch", "4",
                                    "--micro-batches", "4", "--schedule", "1f1b", "-o", plan,
                                    NULL };
  g_assert_cmpint (test_util_run_cli (propagate, NULL, NULL), ==, 0);
  const char *const run[] = { "run", plan, "--train", "--lr", "0.1", "--repeat", "1", "--json",
                              NULL };
  g_autofree char *out = NULL, *err = NULL;
  int status = test_util_run_cli (run, &out, &err);
  g_assert_cmpint (status, ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  JsonObject *train = json_object_get_object_member (o, "train");
  g_assert_true (json_object_get_boolean_member (train, "passed"));
  JsonObject *pl = json_object_get_object_member (train, "pipeline");
  g_assert_cmpstr (json_object_get_string_member (pl, "schedule"), ==, "1f1b");
  g_assert_cmpint (json_object_get_int_member (pl, "micro_batches"), ==, M);
  g_assert_cmpint (json_object_get_int_member (pl, "sends"), ==, 2 * M);
  g_assert_cmpint (json_object_get_int_member (pl, "transfers"), ==, 4 * M);
  g_assert_cmpfloat (json_object_get_double_member (pl, "logits_max_rel_error"), <=, 1e-5);
  g_assert_cmpfloat (json_object_get_double_member (train, "grad_max_rel_error"), <=, 1e-5);
  JsonArray *stages = json_object_get_array_member (pl, "stages");
  g_assert_cmpuint (json_array_get_length (stages), ==, 2);
  for (guint s = 0; s < 2; s++)
    {
      JsonObject *st = json_array_get_object_element (stages, s);
      g_assert_cmpstr (json_object_get_string_member (st, "order"), ==, order_1f1b[s]);
      g_assert_cmpuint (json_array_get_length (json_object_get_array_member (st, "events")), ==,
                        2 * M);
    }
  test_util_tmp_dir_remove (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_test_add_data_func (cases[i].path, &cases[i], test_schedule);
  g_test_add_func ("/executor/pipeline-schedule/cli", test_cli);
  return g_test_run ();
}
