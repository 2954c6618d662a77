/* executor-train.h: one training step of a model's graph on one CPU device, the reference a
 * sharded training step is to be compared with (issue 13, part 3).
 *
 * Forward, the loss Hugging Face computes (mean cross-entropy over the labelled rows of the
 * logits; the labels given, or by the graph's kind: a causal LM's input_ids shifted left, the
 * last position ignored; a masked LM's own ids, for a graph without a causal attention; an
 * encoder-decoder's decoder_input_ids shifted left; a classifier's row b labelled b mod
 * classes), the backward of every op
 * (executor-backward.h), a gradient per parameter (a tied weight once, with the gradient of
 * all its uses) and one optimizer step; executor_train_step_sharded(), the same step under a
 * plan.
 */
#pragma once

#include "executor-tensors.h"
#include "planner-plan.h"

G_BEGIN_DECLS

typedef enum
{
  EXECUTOR_OPTIMIZER_SGD,  /* w -= lr g */
  EXECUTOR_OPTIMIZER_ADAM, /* first step from zero moments: w -= lr mhat / (sqrt (vhat) + eps) */
} ExecutorOptimizer;

/* A label that leaves its row out of the loss (torch's ignore_index). */
#define EXECUTOR_TRAIN_IGNORE (-100)

/* A pipelined step's schedule as it ran (executor-pipeline.h). */
typedef struct _ExecutorPipelineRun ExecutorPipelineRun;

typedef struct
{
  /* One class index (i64) per row of the logits, in their order ([batch, seq] for a language
   * model, [batch] for a classifier), EXECUTOR_TRAIN_IGNORE to leave a row out; NULL: the
   * default labels of the graph's kind (above). Not owned. */
  const ExecutorHostTensor *labels;
  ExecutorOptimizer optimizer;
  double lr;                /* 1e-3 */
  double beta1, beta2, eps; /* Adam: 0.9, 0.999, 1e-8 */
  /* NULL, or where a pipelined plan's sharded step records its schedule as it ran (not
   * owned; the caller clears it with executor_pipeline_run_clear()). */
  ExecutorPipelineRun *pipeline_run;
} ExecutorTrainOptions;

void executor_train_options_init (ExecutorTrainOptions *options);

/* @sources: the global value of every parameter and graph input (input_ids included), by
 * name. Adds to @out: "loss" (f32 scalar), "grad.NAME" and "updated.NAME" for every
 * parameter, and every graph output (logits). */
gboolean executor_train_step_reference (PlannerGraph *graph, ExecutorTensors *sources,
                                        const ExecutorTrainOptions *options, ExecutorTensors *out,
                                        GError **error);

typedef struct
{
  double backward_s;  /* the backward pass, slowest device */
  double grad_sync_s; /* of which the gradients' redistributions (collectives) */
  /* The cost model's: backward compute as twice each op's forward estimate (the usual
   * rule: one GEMM for each of the two operands' gradients), plus the gradient
   * redistributions' own estimates. */
  double estimated_backward_s;
  double estimated_grad_sync_s;
} ExecutorTrainTimes;

/* The same step sharded by @plan on the CPU backend (one thread per device): every op's
 * forward and backward on its local shards, gradients converted between layouts with the
 * collectives the plan's layouts imply, the optimizer on the shards. A plan with a pipeline
 * axis runs its schedule (executor_pipeline_train_step(): micro-batches, stages concurrent,
 * activations and gradients sent between them, gradients accumulated). Adds what
 * executor_train_step_reference() adds, gathered from the shards (not the graph outputs). */
gboolean executor_train_step_sharded (PlannerPlan *plan, ExecutorTensors *sources,
                                      const ExecutorTrainOptions *options, ExecutorTensors *out,
                                      ExecutorTrainTimes *times, GError **error);

G_END_DECLS
