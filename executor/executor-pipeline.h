/* executor-pipeline.h: trial runs of a pipelined plan (issue 18).
 *
 * A plan whose mesh has a pipeline axis (planner-pipeline.h) runs each op only on the devices
 * of its stage (the pp coordinate); an activation that an op of a later stage needs is sent
 * there first, from each device to the device of the receiving stage with the same
 * coordinates on every other axis. The backends have no point-to-point call, so a send is an
 * AllGather over the pp group, from which the receiving stage keeps the sender's chunk: a
 * send in what it computes, not in what it costs (its time is not reported).
 */
#pragma once

#include "executor-backend.h"
#include "executor-tensors.h"
#include "executor-train.h"
#include "planner-cost.h"
#include "planner-plan.h"

G_BEGIN_DECLS

typedef struct
{
  int axis;          /* the pp axis, -1 when the plan has no pipeline */
  guint p;           /* its size */
  int *op_stage;     /* per op */
  int *redist_stage; /* per redistribution: its consumer's stage (a final reduction: the
                      * producer's) */
} ExecutorPipelineStages;

/* The stage of every op and redistribution of @plan; axis -1 (and TRUE) when its mesh has no
 * pipeline axis of size > 1. FALSE with @error when its pipeline cannot be made. */
gboolean executor_pipeline_stages (PlannerPlan *plan, ExecutorPipelineStages *stages,
                                   GError **error);
void executor_pipeline_stages_clear (ExecutorPipelineStages *stages);

/* On every device of the mesh, together: @value (@count elements of @dtype) goes from the
 * device of stage @from to the devices of the other stages with the same other coordinates,
 * through @scratch (p x @count elements). */
gboolean executor_pipeline_send (ExecutorDevice *device, const ExecutorPipelineStages *stages,
                                 guint from, ExecutorBuffer *value, ExecutorBuffer *scratch,
                                 gsize count, PlannerDType dtype, GError **error);

/* ---- the pipelined training step (executor-pipeline-train.c) ----
 *
 * The plan's schedule on the cpu backend: the global batch cut into the plan's m
 * micro-batches (contiguous blocks of rows of every tensor with a batch dim), every device of
 * stage s running, in its own thread and in the order planner_pipeline_simulate() gives
 * stage s, the forward (F) and backward (B) of its chunks on each micro-batch; what crosses a
 * chunk boundary to another stage goes point to point, per micro-batch (the activation
 * forward after F, its gradient back after B), from each device to the device of the other
 * stage with the same other coordinates. Within a stage the plan's sharding runs as in
 * executor_train_step_sharded(). Each parameter's gradient is accumulated over the
 * micro-batches (a parameter held by several stages, a tied embedding, summed over them with
 * an AllReduce over pp) before the optimizer step; the loss is the mean over every labelled
 * row of the whole batch, so loss, logits and gradients are the full-batch step's. */

typedef struct
{
  guint stage;
  guint chunk; /* global chunk index: stage + p x (its chunk on the stage) */
  guint micro_batch;
  gboolean backward;
  double start_s, end_s; /* its compute, after its inputs arrived; from the step's start */
} ExecutorPipelineEvent;

struct _ExecutorPipelineRun
{
  PlannerSchedule schedule;
  guint p, v, m;
  /* Point-to-point sends of one pipeline (the devices of device 0's pp group: one data-
   * parallel replica's, or one tensor-parallel rank's chain): an activation forward or a
   * gradient back, per tensor, boundary and micro-batch. transfers: every device's. */
  guint sends;
  guint transfers;
  /* ExecutorPipelineEvent: each stage's slots in the order its first device ran them,
   * stage after stage. */
  GArray *events;
  double wall_s;    /* first start to last end */
  double busy_s;    /* the stages' compute, summed */
  double overlap_s; /* time during which two or more stages computed at once */
  /* The graph's logits, put together from the micro-batches (global shape, f32). */
  ExecutorTensors *outputs;
};

void executor_pipeline_run_clear (ExecutorPipelineRun *run);
/* "F0 F1 B0 F2 B1 F3 B2 B3": stage @stage's slots as they ran (with v > 1, "F0.2" is
 * micro-batch 0 through chunk 2). */
char *executor_pipeline_run_order (const ExecutorPipelineRun *run, guint stage);

/* executor_train_step_sharded() for a plan with a pipeline axis (cpu backend); @options->
 * pipeline_run, when set, gets the schedule as it ran. Refuses (EXECUTOR_ERROR_UNSUPPORTED) a
 * graph whose batch cannot be cut into the micro-batches (an op that reduces over the batch,
 * a batch not divisible by m and the data-parallel split). */
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ExecutorPipelineRun, executor_pipeline_run_clear)

gboolean executor_pipeline_train_step (PlannerPlan *plan, ExecutorTensors *sources,
                                       const ExecutorTrainOptions *options, ExecutorTensors *out,
                                       ExecutorTrainTimes *times, GError **error);

G_END_DECLS
