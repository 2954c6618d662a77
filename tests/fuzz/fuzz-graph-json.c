/* fuzz-graph-json.c: graph JSON files ("shardscope_graph"), as MODEL gives them. A graph
 * taken passes planner_graph_check, and written and read back it is equal. */
#include "fuzz-harness.h"

#include "planner-model.h"

gboolean
fuzz_graph_json (const guint8 *data, gsize size, GError **error)
{
  g_autofree char *text = fuzz_text (data, size);
  g_autoptr (PlannerGraph) graph = planner_graph_from_json (text, error);
  if (graph == NULL)
    return FALSE;

  g_autoptr (GError) local = NULL;
  if (!planner_graph_check (graph, &local))
    fuzz_fail ("graph JSON taken but failing its check: %s", local->message);
  g_autofree char *json = planner_graph_to_json (graph);
  g_autoptr (PlannerGraph) again = planner_graph_from_json (json, &local);
  if (again == NULL || !planner_graph_equal (graph, again))
    fuzz_fail ("graph JSON does not read back equal: %s",
               local ? local->message : "a different graph");
  return TRUE;
}

FUZZ_TARGET (fuzz_graph_json)
