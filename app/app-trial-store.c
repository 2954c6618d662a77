#define G_LOG_DOMAIN "app-trial-store"
#include "config.h"

#include "app-trial-store.h"

gint64
app_trial_store_add (PlannerStore *store, gint64 plan_id, PlannerPlan *plan,
                     const ExecutorTrialResult *result, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (store), 0);
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), 0);
  g_return_val_if_fail (result != NULL, 0);

  g_autoptr (GArray) rows = g_array_new (FALSE, FALSE, sizeof (PlannerTrialMeasurement));
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < result->ops->len; i++)
    {
      const ExecutorTiming *t = &g_array_index (result->ops, ExecutorTiming, i);
      PlannerTrialMeasurement m
          = { PLANNER_MEASUREMENT_OP, t->name, t->estimated_s * 1e6, t->measured_s * 1e6 };
      g_array_append_val (rows, m);
    }
  for (guint i = 0;
       i < result->redistributions->len && i < planner_plan_get_n_redistributions (plan); i++)
    {
      const ExecutorTiming *t = &g_array_index (result->redistributions, ExecutorTiming, i);
      char *name = planner_store_redistribution_name (plan, i);
      g_ptr_array_add (names, name);
      PlannerTrialMeasurement m
          = { PLANNER_MEASUREMENT_REDISTRIBUTION, name, t->estimated_s * 1e6, t->measured_s * 1e6 };
      g_array_append_val (rows, m);
    }
  return planner_store_add_trial_run (
      store, plan_id, result->backend, result->n_devices, result->max_abs_error,
      result->max_rel_error, (const PlannerTrialMeasurement *)rows->data, rows->len, error);
}
