/* test-calibrate-link.c: the link figures calibrate derives from a measured AllReduce curve
 * (executor_calibrate_link), on curves written here with their answers by hand.
 *
 * p = 4: the ring moves 2(p-1)/p = 1.5 bytes per byte of the buffer in 2(p-1) = 6 steps.
 */
#include "config.h"

#include <math.h>

#include "executor-calibrate.h"
#include "planner-hardware.h"

static PlannerHardware *
profile (void)
{
  g_autoptr (GError) error = NULL;
  PlannerHardware *hw = planner_hardware_lookup ("cpu-local", &error);
  g_assert_no_error (error);
  return hw;
}

/* A clean alpha-beta curve: t = 60 us + n / 10 GB/s * 1.5, so the link is 10 GB/s with
 * 10 us a step, from the fit. */
static void
test_clean_curve (void)
{
  g_autoptr (PlannerHardware) hw = profile ();
  const guint64 sizes[] = { 1024, 65536, 1 << 20, 16 << 20 };
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 4,
                                      sizes[i], 60e-6 + 1.5 * sizes[i] / 10e9);
  PlannerLink link = { "x", 1, 1 };
  executor_calibrate_link (hw, 4, &link);
  g_assert_cmpfloat_with_epsilon (link.bandwidth_GBps, 10.0, 1e-6);
  g_assert_cmpfloat_with_epsilon (link.latency_us, 10.0, 1e-6);
}

/* A flat curve (the times hardly grow with the size, as shared memory on a loaded machine
 * gives): 100 us at 1 KiB, 100.000001 us at 16 MiB. The fit's slope is next to nothing; the
 * link is the largest message's bus bandwidth, 1.5 * 16 MiB / 100.000001 us = 251.66 GB/s,
 * and the latency what the smallest message leaves: (100 us - 1.5 * 1024 B / 251.66 GB/s) / 6
 * = 16.665 us. */
static void
test_flat_curve (void)
{
  g_autoptr (PlannerHardware) hw = profile ();
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 4, 1024,
                                    100e-6);
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 4,
                                    16 << 20, 100.000001e-6);
  PlannerLink link = { "x", 1, 1 };
  executor_calibrate_link (hw, 4, &link);
  double busbw = 1.5 * (16 << 20) / 100.000001e-6 / 1e9;
  g_assert_cmpfloat_with_epsilon (link.bandwidth_GBps, busbw, 1e-6);
  g_assert_cmpfloat_with_epsilon (busbw, 251.658, 1e-3);
  g_assert_cmpfloat_with_epsilon (link.latency_us, (100e-6 - 1.5 * 1024 / (busbw * 1e9)) / 6 * 1e6,
                                  1e-9);
  /* Within what the profile reader accepts (at most 1e9 GB/s). */
  g_assert_cmpfloat (link.bandwidth_GBps, <, 1e9);
}

/* No curve: the link is left as it was. */
static void
test_no_curve (void)
{
  g_autoptr (PlannerHardware) hw = profile ();
  PlannerLink link = { "x", 3, 7 };
  executor_calibrate_link (hw, 4, &link);
  g_assert_cmpfloat (link.bandwidth_GBps, ==, 3);
  g_assert_cmpfloat (link.latency_us, ==, 7);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/executor/calibrate-link/clean", test_clean_curve);
  g_test_add_func ("/executor/calibrate-link/flat", test_flat_curve);
  g_test_add_func ("/executor/calibrate-link/no-curve", test_no_curve);
  return g_test_run ();
}
