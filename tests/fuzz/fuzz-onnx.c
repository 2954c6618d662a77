/* fuzz-onnx.c: ONNX model files, as MODEL and the new-plan dialog give them. The bytes go
 * through the same reader as a file on disk (the schema walk that bounds nesting and counts,
 * protobuf-c, the op mapping and folding), with the default symbolic dims (batch 8, sequence
 * 1024) and no folder, so external data is refused. A graph taken passes planner_graph_check and
 * survives graph JSON: written and read back, it is equal. In a build without ONNX every
 * input is refused, saying so. */
#include "fuzz-harness.h"

#include "planner-model.h"
#include "planner-onnx-import.h"

gboolean
fuzz_onnx (const guint8 *data, gsize size, GError **error)
{
  g_autoptr (PlannerGraph) graph
      = planner_onnx_import_data (data, size, "fuzz.onnx", NULL, NULL, error);
  if (graph == NULL)
    return FALSE;

  g_autoptr (GError) local = NULL;
  if (!planner_graph_check (graph, &local))
    fuzz_fail ("an ONNX file built a graph that fails its check: %s", local->message);
  g_autofree char *json = planner_graph_to_json (graph);
  g_autoptr (PlannerGraph) again = planner_graph_from_json (json, &local);
  if (again == NULL || !planner_graph_equal (graph, again))
    fuzz_fail ("the graph of an ONNX file does not survive graph JSON: %s",
               local ? local->message : "a different graph");
  return TRUE;
}

FUZZ_TARGET (fuzz_onnx)
