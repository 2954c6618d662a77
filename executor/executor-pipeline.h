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

G_END_DECLS
