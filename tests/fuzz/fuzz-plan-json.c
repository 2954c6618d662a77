/* fuzz-plan-json.c: plan JSON files ("shardscope_plan"), as compare, export, run and --plan
 * give them: the graph is rebuilt from the file's model source (zoo name or path) and checked
 * against its hash, then every field read. A plan taken is written and read back equal. */
#include "fuzz-harness.h"

#include "planner-plan-json.h"

gboolean
fuzz_plan_json (const guint8 *data, gsize size, GError **error)
{
  g_autofree char *text = fuzz_text (data, size);
  g_autoptr (PlannerPlan) plan = planner_plan_from_json (text, error);
  if (plan == NULL)
    return FALSE;

  g_autoptr (GError) local = NULL;
  g_autofree char *json = planner_plan_to_json (plan);
  g_autoptr (PlannerPlan) again
      = planner_plan_from_json_with_graph (json, planner_plan_get_graph (plan), &local);
  if (again == NULL || !planner_plan_equal (plan, again))
    fuzz_fail ("plan JSON does not read back equal: %s",
               local ? local->message : "a different plan");
  return TRUE;
}

FUZZ_TARGET (fuzz_plan_json)
