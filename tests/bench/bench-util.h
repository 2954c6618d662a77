/* bench-util.h: what every benchmark shares: medians of repeated timings. Benchmarks print
 * figures (median of repeats, and the size of the work); they never assert a time. */
#pragma once

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

#include "planner-mesh.h"

static inline int
bench_compare_doubles (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

/* Sorts @values in place. */
static inline double
bench_median (double *values, guint n)
{
  qsort (values, n, sizeof *values, bench_compare_doubles);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static inline double
bench_ms_since (gint64 start_us)
{
  return (double) (g_get_monotonic_time () - start_us) / 1000.0;
}

/* The planner benchmarks' arguments, MODEL [MESH [REPEATS]], over the defaults in *@model,
 * *@mesh_text and *@repeats. Returns the mesh, or NULL after the usage line on stderr. */
static inline PlannerMesh *
bench_model_args (int argc, char **argv, const char **model, const char **mesh_text, guint *repeats)
{
  g_autoptr (GError) error = NULL;
  PlannerMesh *mesh;

  if (argc > 1)
    *model = argv[1];
  if (argc > 2)
    *mesh_text = argv[2];
  if (argc > 3)
    *repeats = (guint)atoi (argv[3]);
  mesh = planner_mesh_parse (*mesh_text, &error);
  if (mesh == NULL || *repeats == 0)
    {
      fprintf (stderr, "usage: %s [MODEL [MESH [REPEATS]]]: %s\n", argv[0],
               error != NULL ? error->message : "repeats must be >= 1");
      g_clear_pointer (&mesh, planner_mesh_free);
    }
  return mesh;
}
