#define G_LOG_DOMAIN "test-collective-protocols"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-cost.h"
#include "planner-error.h"
#include "test-util.h"

/* NCCL's protocols on the intra-node ring (planner/README.md, "Collectives by message size"):
 * the Simple ring at NCCL's own latencies (ring_base_us, ring_step_us), LL and LL128, and the
 * fastest taken. Every expected time is worked out by hand from the built-in profiles'
 * constants (NVIDIA/nccl src/graph/tuning.cc) in the comment above it. */

#define MiB (G_GUINT64_CONSTANT (1) << 20)

static void
assert_close (double got, double want, double rel)
{
  if (fabs (got - want) > rel * fabs (want))
    g_error ("got %.12g, want %.12g (relative tolerance %g)", got, want, rel);
}

static double
intra (const PlannerHardware *hw, PlannerStepKind kind, guint p, guint64 n)
{
  return planner_cost_collective_time (hw, kind, PLANNER_LINK_INTRA, p, n);
}

/* a100-sxm, AllReduce over 8 GPUs (no NVLS): one regime per protocol. */
static void
test_a100_all_reduce (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("a100-sxm");

  /* 1 MiB: LL. 14 steps; ring bytes 1.75 x 1048576 = 1835008.
   *   LL      6.6 + 14 x 0.6 = 15 us, + 1835008 / min(0.5 x 225, 87.7)e9 = 20.92369 us: 35.92369
   *   LL128   14 + 14 x 1.9 = 40.6 us, + 1835008 / 207e9 = 8.864773 us: 49.46477
   *   Simple  8.4 + 14 x 3.4 = 56 us, + 1835008 / 225e9 = 8.155591 us: 64.15559 */
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 8, MiB), 35.92369e-6, 1e-6);
  /* 16 MiB: LL128. Ring bytes 29360128.
   *   LL128   40.6 + 29360128 / 207e9 = 40.6 + 141.8364 = 182.4364 us
   *   Simple  56 + 29360128 / 225e9 = 56 + 130.4895 = 186.4895 us
   *   LL      15 + 29360128 / 87.7e9 = 15 + 334.7791 = 349.7791 us */
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 8, 16 * MiB), 182.4364e-6, 1e-6);
  /* 256 MiB: Simple. Ring bytes 469762048.
   *   Simple  56 + 469762048 / 225e9 = 56 + 2087.831 = 2143.831 us
   *   LL128   40.6 + 469762048 / 207e9 = 40.6 + 2269.382 = 2309.982 us */
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 8, 256 * MiB), 2143.831e-6, 1e-6);
}

/* AllGather and ReduceScatter take p - 1 steps; on h200-sxm NVLS is for AllReduce only, so
 * LL128 shows there. */
static void
test_all_gather_reduce_scatter (void)
{
  g_autoptr (PlannerHardware) h200 = test_util_hardware ("h200-sxm");
  g_autoptr (PlannerHardware) a100 = test_util_hardware ("a100-sxm");

  /* h200-sxm AllGather to 16 MiB over 8: 7 steps, 7/8 x 16777216 = 14680064 bytes sent.
   *   LL128   14 + 7 x 1.9 = 27.3 us, + 14680064 / (0.92 x 370)e9 = 43.12592 us: 70.42592
   *   Simple  8.4 + 7 x 3.4 = 32.2 us, + 14680064 / 370e9 = 39.67585 us: 71.87585
   *   LL      6.6 + 7 x 0.6 = 10.8 us, + 14680064 / 141e9 = 104.1139 us: 114.9139 */
  assert_close (intra (h200, PLANNER_STEP_ALL_GATHER, 8, 16 * MiB), 70.42592e-6, 1e-6);
  /* The same bytes as a ReduceScatter (n is its input): the same 70.42592 us. */
  assert_close (intra (h200, PLANNER_STEP_REDUCE_SCATTER, 8, 16 * MiB), 70.42592e-6, 1e-6);
  /* a100-sxm AllGather to 64 MiB: 58720256 bytes sent.
   *   Simple  32.2 + 58720256 / 225e9 = 32.2 + 260.9789 = 293.1789 us
   *   LL128   27.3 + 58720256 / 207e9 = 27.3 + 283.6727 = 310.9727 us */
  assert_close (intra (a100, PLANNER_STEP_ALL_GATHER, 8, 64 * MiB), 293.1789e-6, 1e-6);
}

/* h200-sxm AllReduce over 8: NVLS from 4 MiB; below it LL; at 4 GPUs (no NVLS) LL128 and the
 * Simple ring. */
static void
test_h200_all_reduce (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h200-sxm");

  /* 16 MiB over 8: NVLS by chunks (16 channels x 8 heads = 128 chunks a round; 16 MiB < 8 x
   * 128 x 64 KiB gives 32 KiB chunks, 4 rounds):
   *   seconds per byte  1.75 / 480e9 - 4.6e-6 / (128 x 131072) = 3.371652e-12
   *   one round         4.6 + 128 x 32768 x 3.371652e-12 s = 4.6 + 14.14173 = 18.74173 us
   *   NVLS              9.5 + (4 + 1.9) x 18.74173 = 120.0762 us
   *   LL128             40.6 + 29360128 / 340.4e9 = 40.6 + 86.25184 = 126.8518 us
   *   Simple            56 + 29360128 / 370e9 = 56 + 79.35170 = 135.3517 us */
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 8, 16 * MiB), 120.0762e-6, 1e-6);
  /* 16 MiB over 4 GPUs (NCCL rings groups of 4 or fewer): 6 steps, 1.5 x 16 MiB = 25165824.
   *   LL128   14 + 6 x 1.9 = 25.4 us, + 25165824 / 340.4e9 = 73.93015 us: 99.33015
   *   Simple  8.4 + 6 x 3.4 = 28.8 us, + 25165824 / 370e9 = 68.01574 us: 96.81574 */
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 4, 16 * MiB), 96.81574e-6, 1e-6);
  /* 4 MiB over 4: 6291456 bytes.
   *   LL128   25.4 + 6291456 / 340.4e9 = 25.4 + 18.48254 = 43.88254 us
   *   Simple  28.8 + 6291456 / 370e9 = 28.8 + 17.00393 = 45.80393 us
   *   LL      6.6 + 6 x 0.6 = 10.2 us, + 6291456 / 141e9 = 44.62025 us: 54.82025 */
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 4, 4 * MiB), 43.88254e-6, 1e-6);
}

/* What the new members leave alone: AllToAll keeps links.intra.latency_us a step, the
 * inter-node link its own formula, and a profile without ring_* or ll128_* computes as before. */
static void
test_unchanged (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("a100-sxm");
  PlannerEfficiency e = *planner_hardware_get_efficiency (hw);

  /* AllToAll of 64 MiB over 8 intra: 7 x 2.5 = 17.5 us + 58720256 / 225e9 = 260.9789 us:
   * 278.4789 us. */
  assert_close (intra (hw, PLANNER_STEP_ALL_TO_ALL, 8, 64 * MiB), 278.4789e-6, 1e-6);
  /* Inter-node AllGather to 64 MiB over 4 nodes (HDR IB 23 GB/s, 8 us a step; one NIC per
   * device in this call): 3 x 8 = 24 us + 0.75 x 67108864 / 23e9 = 2188.333 us: 2212.333 us. */
  assert_close (planner_cost_collective_time (hw, PLANNER_STEP_ALL_GATHER, PLANNER_LINK_INTER, 4,
                                              64 * MiB),
                2212.333e-6, 1e-6);
  /* Without ring_* and ll128_*: the ring at 2.5 us a step, 16 MiB over 8:
   *   35 + 130.4895 = 165.4895 us (LL 349.8 us is slower). */
  e.ring_base_us = e.ring_step_us = 0;
  e.ll128_bandwidth_factor = 0;
  planner_hardware_set_efficiency (hw, &e);
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 8, 16 * MiB), 165.4895e-6, 1e-6);
  /* ring_* alone (no LL128): the Simple ring at NCCL's latencies, 186.4895 us. */
  e.ring_base_us = 8.4;
  e.ring_step_us = 3.4;
  planner_hardware_set_efficiency (hw, &e);
  assert_close (intra (hw, PLANNER_STEP_ALL_REDUCE, 8, 16 * MiB), 186.4895e-6, 1e-6);
}

/* The members round-trip through the profile JSON and a bad one is refused by its path. */
static void
test_profile_json (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("a100-sxm");
  g_autofree char *text = planner_hardware_to_json (hw);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) back = planner_hardware_from_json (text, &error);
  const PlannerEfficiency *e;

  g_assert_no_error (error);
  e = planner_hardware_get_efficiency (back);
  g_assert_cmpfloat (e->ll128_base_us, ==, 14);
  g_assert_cmpfloat (e->ll128_step_us, ==, 1.9);
  g_assert_cmpfloat (e->ll128_bandwidth_factor, ==, 0.92);
  g_assert_cmpfloat (e->ll128_bandwidth_GBps, ==, 0);
  g_assert_cmpfloat (e->ring_base_us, ==, 8.4);
  g_assert_cmpfloat (e->ring_step_us, ==, 3.4);
  {
    g_autofree char *again = planner_hardware_to_json (back);
    g_assert_cmpstr (again, ==, text);
  }
  {
    GString *bad = g_string_new (text);
    g_autoptr (PlannerHardware) none = NULL;

    g_assert_cmpint (g_string_replace (bad, "\"ll128_bandwidth_factor\": 0.92",
                                       "\"ll128_bandwidth_factor\": 1.5", 1),
                     ==, 1);
    none = planner_hardware_from_json (bad->str, &error);
    g_string_free (bad, TRUE);
    g_assert_null (none);
    g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
    g_assert_nonnull (strstr (error->message, "efficiency.ll128_bandwidth_factor"));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/collective-protocols/a100-all-reduce", test_a100_all_reduce);
  g_test_add_func ("/planner/collective-protocols/all-gather-reduce-scatter",
                   test_all_gather_reduce_scatter);
  g_test_add_func ("/planner/collective-protocols/h200-all-reduce", test_h200_all_reduce);
  g_test_add_func ("/planner/collective-protocols/unchanged", test_unchanged);
  g_test_add_func ("/planner/collective-protocols/profile-json", test_profile_json);
  return g_test_run ();
}
