#define G_LOG_DOMAIN "bench-search"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "planner-model.h"
#include "planner-request.h"
#include "planner-search.h"
#include "planner-solve.h"

#include "bench-util.h"
#include "test-util.h"

/* The exact solve and the search on the 80-layer LLaMA-2-70B shape (issue 17's targets: one
 * mesh <= 1 s, the sweep over 64 devices <= 10 s). Prints medians of repeats; asserts nothing
 * about time. Arguments: MODEL MESH REPEATS DEVICES.
 *
 * solve: planner_solve() from the greedy plan of no pins on MESH (the seed's propagation not
 * counted), with repeated blocks solved once and, for comparison, as one whole problem;
 * search: planner_search() over every dp x mp mesh of DEVICES devices, the built-in policies
 * and the exact solve on each. */

/* This process's CPU time: on a machine shared with other builds the wall clock also counts
 * waiting for a core. */
static double
cpu_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int
main (int argc, char *argv[])
{
  const char *model = "llama-70b", *mesh_text = "dp=8,mp=8";
  guint repeats = 5;
  g_autoptr (PlannerMesh) mesh = bench_model_args (argc, argv, &model, &mesh_text, &repeats);
  if (mesh == NULL)
    return 2;
  guint devices = argc > 4 ? (guint)atoi (argv[4]) : 64;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_model_load (model, NULL, &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_lookup ("h100-sxm", &error);
  if (graph == NULL || hw == NULL)
    {
      fprintf (stderr, "bench-search: %s\n", error->message);
      return 1;
    }
  g_autoptr (PlannerRequest) request = planner_request_new ();
  g_autoptr (PlannerPlan) seed
      = planner_request_propagate (request, graph, mesh, hw, NULL, NULL, &error);
  g_assert_no_error (error);

  g_autofree double *once = g_new (double, repeats);
  g_autofree double *whole = g_new (double, repeats);
  g_autofree double *sweep = g_new (double, repeats);
  g_autofree double *once_cpu = g_new (double, repeats);
  g_autofree double *sweep_cpu = g_new (double, repeats);
  PlannerSolveReport report = { 0 }, whole_report = { 0 };
  for (guint r = 0; r < repeats; r++)
    {
      PlannerSolveOptions options;
      planner_solve_options_init (&options);
      gint64 start = g_get_monotonic_time ();
      double cpu = cpu_ms ();
      g_autoptr (PlannerPlan) a = planner_solve (seed, &options, &report, &error);
      once[r] = bench_ms_since (start);
      once_cpu[r] = cpu_ms () - cpu;
      g_assert_no_error (error);
      g_assert_nonnull (a);
    }
  /* The whole graph as one problem takes 20x as long: once. */
  {
    PlannerSolveOptions options;
    planner_solve_options_init (&options);
    options.reuse_blocks = FALSE;
    gint64 start = g_get_monotonic_time ();
    g_autoptr (PlannerPlan) b = planner_solve (seed, &options, &whole_report, &error);
    whole[0] = bench_ms_since (start);
    g_assert_no_error (error);
    g_assert_nonnull (b);
  }
  printf ("model %s, %u ops; mesh %s: %u ops chosen, %u blocks in %u kind(s)\n", model,
          planner_graph_get_n_ops (graph), mesh_text, report.n_vars, report.n_blocks,
          report.n_block_kinds);
  printf ("solve, blocks once:   median %.1f ms (CPU %.1f ms) of %u, %" G_GUINT64_FORMAT
          " table cells, objective %.6g s (greedy %.6g s), %s\n",
          bench_median (once, repeats), bench_median (once_cpu, repeats), repeats,
          report.table_cells, report.objective_s, report.seed_objective_s,
          report.optimal ? "optimal" : "not proven");
  printf ("solve, whole graph:   %.1f ms (once), %" G_GUINT64_FORMAT " table cells, "
          "objective %.6g s\n",
          whole[0], whole_report.table_cells, whole_report.objective_s);

  guint n_candidates = 0;
  double best = 0;
  g_autofree char *best_name = NULL;
  for (guint r = 0; r < repeats; r++)
    {
      PlannerSearchOptions options;
      planner_search_options_init (&options);
      options.n_devices = devices;
      gint64 start = g_get_monotonic_time ();
      double cpu = cpu_ms ();
      g_autoptr (PlannerSearchResult) result = planner_search (graph, hw, &options, &error);
      sweep[r] = bench_ms_since (start);
      sweep_cpu[r] = cpu_ms () - cpu;
      g_assert_no_error (error);
      n_candidates = result->candidates->len;
      if (result->best >= 0)
        {
          const PlannerSearchCandidate *c = g_ptr_array_index (result->candidates, result->best);
          best = c->step_time_s;
          g_free (best_name);
          best_name = g_strdup_printf ("%s %s", c->mesh, c->solved ? "optimal" : c->policy);
        }
    }
  printf ("search, %u devices:   median %.1f ms (CPU %.1f ms) of %u, %u candidates, best %s at "
          "%.6g s\n",
          devices, bench_median (sweep, repeats), bench_median (sweep_cpu, repeats), repeats,
          n_candidates, best_name ? best_name : "(none fits)", best);
  return 0;
}
