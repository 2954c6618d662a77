#define G_LOG_DOMAIN "bench-store"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib/gstdio.h>

#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-store.h"

#include "bench-util.h"
#include "test-util.h"

/* How long the store takes to save and to load a big plan: the 80-layer LLaMA-2-70B shape with
 * the megatron policy on dp=8,mp=8 (target <= 100 ms each). Prints figures; asserts nothing
 * about time.
 *
 * save (cold): the graph's hash is not known yet, as when the CLI saves the plan it has just
 * made; save (warm): a second plan of a graph already hashed, as the GUI saves them; load: the
 * graph rebuilt from its source and checked against the stored hash, then every row read. */

int
main (int argc, char *argv[])
{
  const char *model = "llama-70b", *mesh_text = "dp=8,mp=8";
  guint repeats = 7;
  g_autoptr (PlannerMesh) mesh = bench_model_args (argc, argv, &model, &mesh_text, &repeats);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autoptr (PlannerHardware) hw = NULL;
  g_autoptr (GPtrArray) pins = NULL;
  g_autoptr (PlannerPlan) plan = NULL;
  g_autoptr (PlannerStore) store = NULL;
  g_autofree char *dir = NULL, *path = NULL;
  g_autofree double *cold = NULL, *warm = NULL, *load = NULL;
  gboolean equal = TRUE;
  struct stat st;

  if (mesh == NULL)
    return 2;
  if ((graph = planner_model_load (model, NULL, &error)) == NULL
      || (hw = planner_hardware_new_builtin ("h100-sxm", &error)) == NULL
      || (pins = planner_policy_expand ("megatron", graph, mesh, NULL, &error)) == NULL
      || (plan = planner_propagate (graph, mesh, hw, pins, NULL, &error)) == NULL)
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  planner_plan_set_policy (plan, "megatron");

  dir = g_dir_make_tmp ("bench-store-XXXXXX", &error);
  path = g_build_filename (dir, "plans.db", NULL);
  if ((store = planner_store_open (path, &error)) == NULL)
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  cold = g_new (double, repeats);
  warm = g_new (double, repeats);
  load = g_new (double, repeats);

  for (guint r = 0; r < 2 * repeats; r++)
    {
      g_autofree char *name = g_strdup_printf ("plan-%u", r);
      /* Cold: forget the hash the store keeps on the graph. */
      if (r < repeats)
        g_object_set_data (G_OBJECT (graph), "planner-store-graph-hash", NULL);
      gint64 start = g_get_monotonic_time ();
      if (planner_store_save_plan (store, plan, name, 0, &error) == 0)
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
      double ms = (g_get_monotonic_time () - start) / 1e3;
      if (r < repeats)
        cold[r] = ms;
      else
        warm[r - repeats] = ms;
    }
  for (guint r = 0; r < repeats; r++)
    {
      gint64 start = g_get_monotonic_time ();
      g_autoptr (PlannerPlan) loaded = planner_store_load_plan (store, 1 + r, &error);
      load[r] = (g_get_monotonic_time () - start) / 1e3;
      if (loaded == NULL)
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
      planner_plan_set_name (plan, planner_plan_get_name (loaded));
      equal &= planner_plan_equal (plan, loaded);
    }
  g_clear_object (&store);

  printf ("model %s, mesh %s, policy megatron: %u ops, %u tensors, %u redistributions, %u trace "
          "steps, %u pins\n",
          model, mesh_text, planner_graph_get_n_ops (graph), planner_graph_get_n_tensors (graph),
          planner_plan_get_n_redistributions (plan), planner_plan_get_n_trace_steps (plan),
          planner_plan_get_pins (plan)->len);
  printf ("save (cold, hashes the graph): median %.1f ms of %u\n", bench_median (cold, repeats),
          repeats);
  printf ("save (warm, graph hashed):     median %.1f ms of %u\n", bench_median (warm, repeats),
          repeats);
  printf ("load (rebuild + hash check):   median %.1f ms of %u\n", bench_median (load, repeats),
          repeats);
  if (g_stat (path, &st) == 0)
    printf ("store file: %u plans, %.1f MiB (%.0f KiB per plan)\n", 2 * repeats,
            st.st_size / 1048576.0, st.st_size / 1024.0 / (2 * repeats));
  printf ("loaded plans equal to the saved one: %s\n", equal ? "yes" : "NO");
  test_util_remove_db (path);
  g_rmdir (dir);
  return equal ? 0 : 1;
}
