#define G_LOG_DOMAIN "executor-pipeline"

#include "config.h"

#include <string.h>

#include "executor-pipeline.h"
#include "planner-pipeline.h"

gboolean
executor_pipeline_stages (PlannerPlan *plan, ExecutorPipelineStages *stages, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan) && stages != NULL, FALSE);

  memset (stages, 0, sizeof *stages);
  stages->axis = -1;
  g_autoptr (GError) local = NULL;
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, &local);
  if (pl == NULL)
    {
      if (local == NULL)
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  PlannerGraph *graph = planner_plan_get_graph (plan);
  guint n_ops = planner_graph_get_n_ops (graph);
  guint n_redists = planner_plan_get_n_redistributions (plan);
  stages->axis = (int)pl->axis;
  stages->p = pl->p;
  stages->op_stage = g_new (int, MAX (n_ops, 1));
  stages->redist_stage = g_new (int, MAX (n_redists, 1));
  for (guint i = 0; i < n_ops; i++)
    stages->op_stage[i] = pl->op_chunk[i] % (int)pl->p;
  for (guint r = 0; r < n_redists; r++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (plan, r);
      int op = red->consumer >= 0 ? red->consumer
                                  : planner_graph_get_tensor (graph, red->tensor)->producer;
      stages->redist_stage[r] = op >= 0 ? stages->op_stage[op] : 0;
    }
  return TRUE;
}

void
executor_pipeline_stages_clear (ExecutorPipelineStages *stages)
{
  g_clear_pointer (&stages->op_stage, g_free);
  g_clear_pointer (&stages->redist_stage, g_free);
  stages->axis = -1;
}

gboolean
executor_pipeline_send (ExecutorDevice *device, const ExecutorPipelineStages *stages, guint from,
                        ExecutorBuffer *value, ExecutorBuffer *scratch, gsize count,
                        PlannerDType dtype, GError **error)
{
  g_return_val_if_fail (stages->axis >= 0 && from < stages->p, FALSE);

  if (count == 0)
    return TRUE;
  if (!executor_device_collective (device, PLANNER_STEP_ALL_GATHER, (guint)stages->axis, value,
                                   scratch, count, dtype, error))
    return FALSE;
  if (device->coords[stages->axis] == from)
    return TRUE;
  gsize bytes = count * executor_storage_size (dtype);
  return executor_device_copy_2d (device, value, 0, bytes, scratch, from * bytes, bytes, bytes, 1,
                                  error);
}
