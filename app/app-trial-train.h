/* app-trial-train.h: the training step of a trial run (`shardscope-cli run --train`): one
 * step sharded by the plan against the same step unsharded, from the trial's seeded sources,
 * compared tensor by tensor (loss, every gradient, every updated weight). */
#pragma once

#include "executor-train.h"
#include "executor-trial.h"

G_BEGIN_DECLS

typedef struct
{
  gboolean adam;
  double lr;
  gboolean passed;      /* loss and gradients (and SGD's updated weights) within tolerance */
  double loss;          /* the reference's */
  double loss_rel_error;
  guint n_parameters;
  double grad_rel_error; /* the worst gradient's */
  char *grad_worst;
  double updated_rel_error;
  char *updated_worst;
  ExecutorTrainTimes times;
} AppTrialTrain;

void app_trial_train_free (AppTrialTrain *train);

/* Sharded against @reference: each tensor as max |sharded - reference| / max |reference|,
 * a gradient's scale at least a thousandth of the largest gradient's (a gradient that is zero
 * in exact arithmetic is round-off in both runs). Adam's updated weights are reported, not
 * judged (its first step is lr sign (g)). */
AppTrialTrain *app_trial_train_compare (ExecutorTensors *reference, ExecutorTensors *sharded,
                                        const ExecutorTrainOptions *options, double tolerance);

/* "Training step (sgd, lr 0.001): loss 10.8, max rel error 2e-07; ..." on a few lines. */
char *app_trial_train_dup_summary (const AppTrialTrain *train);

/* Runs both steps for @plan on the cpu backend from the sources of a trial with @seed and
 * compares them. Checks @cancellable between the phases. */
AppTrialTrain *app_trial_train_run (PlannerPlan *plan, guint64 seed,
                                    const ExecutorTrainOptions *options, double tolerance,
                                    GCancellable *cancellable, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (AppTrialTrain, app_trial_train_free)

G_END_DECLS
