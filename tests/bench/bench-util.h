/* bench-util.h: what every benchmark shares: medians of repeated timings. Benchmarks print
 * figures (median of repeats, and the size of the work); they never assert a time. */
#pragma once

#include <glib.h>
#include <stdlib.h>

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
