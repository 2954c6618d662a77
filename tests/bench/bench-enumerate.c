#define G_LOG_DOMAIN "bench-enumerate"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "planner-model.h"

#include "bench-util.h"

/* How long building a big graph and enumerating every op's strategies take: the 80-layer
 * LLaMA-2-70B shape on a 3-axis mesh. Prints figures; asserts nothing about time. */

int
main (int argc, char *argv[])
{
  const char *model = "llama-70b", *mesh_text = "dp=8,mp=4,pp=2";
  guint repeats = 5;
  g_autoptr (PlannerMesh) mesh = bench_model_args (argc, argv, &model, &mesh_text, &repeats);
  g_autoptr (GError) error = NULL;
  g_autofree double *build_ms = NULL;
  g_autofree double *enumerate_ms = NULL;
  guint n_ops = 0;
  guint64 n_strategies = 0, most = 0;
  const char *most_op = NULL;
  g_autoptr (PlannerGraph) graph = NULL;

  if (mesh == NULL)
    return 2;
  build_ms = g_new (double, repeats);
  enumerate_ms = g_new (double, repeats);

  for (guint r = 0; r < repeats; r++)
    {
      gint64 start = g_get_monotonic_time ();

      g_clear_object (&graph);
      graph = planner_model_load (model, NULL, &error);
      if (graph == NULL)
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
      build_ms[r] = (g_get_monotonic_time () - start) / 1e3;
    }

  n_ops = planner_graph_get_n_ops (graph);
  for (guint r = 0; r < repeats; r++)
    {
      gint64 start = g_get_monotonic_time ();
      guint64 total = 0;

      for (guint i = 0; i < n_ops; i++)
        {
          const PlannerOp *op = planner_graph_get_op (graph, i);
          GArray *strategies = planner_op_rule_enumerate (&op->rule, mesh);

          total += strategies->len;
          if (r == 0 && strategies->len > most)
            {
              most = strategies->len;
              most_op = op->name;
            }
          g_array_unref (strategies);
        }
      enumerate_ms[r] = (g_get_monotonic_time () - start) / 1e3;
      n_strategies = total;
    }

  printf ("model %s (%s), mesh %s (%" G_GUINT64_FORMAT " devices)\n", model,
          planner_graph_get_source (graph), mesh_text, planner_mesh_n_devices (mesh));
  printf ("ops %u, tensors %u, parameters %" G_GUINT64_FORMAT "\n", n_ops,
          planner_graph_get_n_tensors (graph), planner_graph_get_parameter_count (graph));
  printf ("strategies %" G_GUINT64_FORMAT " (most: %" G_GUINT64_FORMAT " for %s)\n", n_strategies,
          most, most_op);
  printf ("build     median %.2f ms over %u repeats\n", bench_median (build_ms, repeats), repeats);
  printf ("enumerate median %.2f ms over %u repeats (%.2f us per op)\n",
          bench_median (enumerate_ms, repeats), repeats,
          bench_median (enumerate_ms, repeats) * 1e3 / MAX (n_ops, 1));
  return 0;
}
