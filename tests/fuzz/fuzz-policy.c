/* fuzz-policy.c: policy files (data/policies/ files, --policy FILE). The file is expanded for
 * gpt2-tiny and llama-tiny (2 layers, sequence 64) on dp=2,mp=2, as propagate does; every pin
 * it gives parses again from its own text. */
#include "fuzz-harness.h"

#include <glib/gstdio.h>

#include "planner-model.h"
#include "planner-pin.h"
#include "planner-policy.h"

static PlannerGraph *
tiny_graph (const char *name)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.seq = 64;
  PlannerGraph *graph = planner_zoo_build (name, &options, &error);
  if (graph == NULL)
    fuzz_fail ("fuzz_policy: %s", error->message);
  return graph;
}

gboolean
fuzz_policy (const guint8 *data, gsize size, GError **error)
{
  static PlannerGraph *graphs[2];
  static PlannerMesh *mesh;
  if (mesh == NULL)
    {
      graphs[0] = tiny_graph ("gpt2-tiny");
      graphs[1] = tiny_graph ("llama-tiny");
      mesh = planner_mesh_parse ("dp=2,mp=2", NULL);
    }

  const char *path = fuzz_tmp_path ("policy.json");
  fuzz_write_file (path, data, size);
  for (guint g = 0; g < G_N_ELEMENTS (graphs); g++)
    {
      g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
      g_autoptr (GPtrArray) pins = planner_policy_expand (path, graphs[g], mesh, notes, error);
      if (pins == NULL)
        {
          g_unlink (path);
          return FALSE;
        }
      for (guint i = 0; i < pins->len; i++)
        {
          const PlannerPin *pin = g_ptr_array_index (pins, i);
          g_autoptr (GError) local = NULL;
          g_autoptr (PlannerPin) again = planner_pin_parse (pin->text, mesh, &local);
          if (again == NULL)
            fuzz_fail ("policy pin \"%s\" does not parse again: %s", pin->text, local->message);
        }
    }
  g_unlink (path);
  return TRUE;
}

FUZZ_TARGET (fuzz_policy)
