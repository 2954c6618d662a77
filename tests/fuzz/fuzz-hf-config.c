/* fuzz-hf-config.c: Hugging Face config.json files, as MODEL and the new-plan dialog give
 * them. The graph is built with 2 layers, batch 2 and sequence 32 (every field of the file
 * is still read and checked; the sizes only keep one input fast). A graph built passes
 * planner_graph_check and survives graph JSON: written and read back, it is equal. */
#include "fuzz-harness.h"

#include "planner-model.h"

gboolean
fuzz_hf_config (const guint8 *data, gsize size, GError **error)
{
  g_autofree char *text = fuzz_text (data, size);
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.layers = 2;
  options.batch = 2;
  options.seq = 32;

  g_autoptr (PlannerGraph) graph = planner_hf_import_json (text, &options, error);
  if (graph == NULL)
    return FALSE;

  g_autoptr (GError) local = NULL;
  if (!planner_graph_check (graph, &local))
    fuzz_fail ("config.json built a graph that fails its check: %s", local->message);
  g_autofree char *json = planner_graph_to_json (graph);
  g_autoptr (PlannerGraph) again = planner_graph_from_json (json, &local);
  if (again == NULL || !planner_graph_equal (graph, again))
    fuzz_fail ("the graph of a config.json does not survive graph JSON: %s",
               local ? local->message : "a different graph");
  return TRUE;
}

FUZZ_TARGET (fuzz_hf_config)
