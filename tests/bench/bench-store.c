#define G_LOG_DOMAIN "bench-store"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <glib/gstdio.h>

#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-store.h"

/* How long the store takes to save and to load a big plan: the 80-layer LLaMA-2-70B shape with
 * the megatron policy on dp=8,mp=8 (target <= 100 ms each). Prints figures; asserts nothing
 * about time.
 *
 * save (cold): the graph's hash is not known yet, as when the CLI saves the plan it has just
 * made; save (warm): a second plan of a graph already hashed, as the GUI saves them; load: the
 * graph rebuilt from its source and checked against the stored hash, then every row read. */

static int
compare_doubles (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return (x > y) - (x < y);
}

static double
median (double *values, guint n)
{
  qsort (values, n, sizeof *values, compare_doubles);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static void
remove_db (const char *path)
{
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  g_autofree char *shm = g_strconcat (path, "-shm", NULL);
  g_remove (path);
  g_remove (wal);
  g_remove (shm);
}

int
main (int argc, char *argv[])
{
  const char *model = argc > 1 ? argv[1] : "llama-70b";
  const char *mesh_text = argc > 2 ? argv[2] : "dp=8,mp=8";
  const guint repeats = argc > 3 ? (guint)atoi (argv[3]) : 7;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &error);
  g_autoptr (PlannerGraph) graph = NULL;
  g_autoptr (PlannerHardware) hw = NULL;
  g_autoptr (GPtrArray) pins = NULL;
  g_autoptr (PlannerPlan) plan = NULL;
  g_autoptr (PlannerStore) store = NULL;
  g_autofree char *dir = NULL, *path = NULL;
  g_autofree double *cold = NULL, *warm = NULL, *load = NULL;
  gboolean equal = TRUE;
  struct stat st;

  if (mesh == NULL || repeats == 0)
    {
      fprintf (stderr, "usage: %s [MODEL [MESH [REPEATS]]]: %s\n", argv[0],
               error != NULL ? error->message : "repeats must be >= 1");
      return 2;
    }
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
  printf ("save (cold, hashes the graph): median %.1f ms of %u\n", median (cold, repeats), repeats);
  printf ("save (warm, graph hashed):     median %.1f ms of %u\n", median (warm, repeats), repeats);
  printf ("load (rebuild + hash check):   median %.1f ms of %u\n", median (load, repeats), repeats);
  if (g_stat (path, &st) == 0)
    printf ("store file: %u plans, %.1f MiB (%.0f KiB per plan)\n", 2 * repeats,
            st.st_size / 1048576.0, st.st_size / 1024.0 / (2 * repeats));
  printf ("loaded plans equal to the saved one: %s\n", equal ? "yes" : "NO");
  remove_db (path);
  g_rmdir (dir);
  return equal ? 0 : 1;
}
