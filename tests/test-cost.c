#define G_LOG_DOMAIN "test-cost"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-cost.h"
#include "planner-error.h"
#include "test-util.h"

#define MiB (G_GUINT64_CONSTANT (1) << 20)

/* Relative comparison: the hand arithmetic below is rounded to 7 digits. */
static void
assert_close (double got, double want, double rel)
{
  if (fabs (got - want) > rel * fabs (want))
    g_error ("got %.12g, want %.12g (relative tolerance %g)", got, want, rel);
}

/* One collective over one mesh axis: its time, worked out by hand in the comment, and the
 * bytes it sends per device in a group of @group. */
typedef struct
{
  const char *path;
  const char *hardware;
  const char *mesh;
  PlannerStepKind kind;
  guint axis;
  guint64 n_in, n_out;
  double time_s;
  guint group;
  guint64 bytes;
} CollectiveCase;

static const CollectiveCase collective_cases[] = {
  /* AllReduce of 64 MiB over mp=8 on h100-sxm, intra-node: NVLink SHARP (NVLS) beats the ring
   * (35 + 117440512 / 370e9 = 352.4068 us). NVLS by chunks: 16 channels x 8 heads = 128 chunks
   * a round; 64 MiB < 64 x 128 x 128 KiB (1 GiB) halves the 128 KiB chunk to 64 KiB, and 64 MiB
   * is not below 8 x 128 x 64 KiB (64 MiB), so 64 KiB: 67108864 / (128 x 65536) = 8 rounds.
   *   seconds per byte  1.75 / 480e9 - 4.6e-6 / (128 x 131072) = 3.371652e-12
   *   one round         4.6 us + 128 x 65536 x 3.371652e-12 = 4.6 + 28.28346 = 32.88346 us
   *   total             9.5 us + (8 + 1.9) x 32.88346 us = 335.0463 us
   * (nccl-tests on one DGX H100 node, the curve the chunk constants come from: 324.7 us) */
  { "/planner/cost/all-reduce", "h100-sxm", "mp=8", PLANNER_STEP_ALL_REDUCE, 0, 64 * MiB, 64 * MiB,
    335.0463e-6, 8, 117440512 },
  /* The same over mp=4: NCCL rings groups of 4 or fewer (no NVLS), 370 GB/s, at NCCL's
   * Simple-ring latencies (8.4 us once, 3.4 us a step):
   *   latency   8.4 + 2 * 3 * 3.4 us = 28.8 us
   *   bandwidth 1.5 * 67108864 / 370e9 = 100663296 / 370e9 = 272.0630 us
   *   total     300.8630 us (LL128: 25.4 + 100663296 / 340.4e9 = 321.1206 us) */
  { "/planner/cost/all-reduce-ring", "h100-sxm", "mp=4", PLANNER_STEP_ALL_REDUCE, 0, 64 * MiB,
    64 * MiB, 300.8630e-6, 4, 100663296 },
  /* a100-sxm has no NVLink SHARP: 8 GPUs ring at 225 GB/s:
   *   8.4 + 14 * 3.4 = 56 us + 117440512 / 225e9 = 56 + 521.9578 = 577.9578 us
   *   (LL128: 40.6 + 117440512 / 207e9 = 607.9455 us) */
  { "/planner/cost/all-reduce-a100", "a100-sxm", "mp=8", PLANNER_STEP_ALL_REDUCE, 0, 64 * MiB,
    64 * MiB, 577.9578e-6, 8, 117440512 },
  /* AllGather on dp of dp=4,mp=8 on h100-sxm: dp crosses nodes (NDR IB: 47 GB/s, 8 us/step),
   * n_in 4 MiB -> n_out 16 MiB:
   *   latency   (p-1) alpha = 3 * 8 us = 24 us
   *   bandwidth (p-1)/p n_out / B = 0.75 * 16777216 / 47e9 = 12582912 / 47e9 = 267.7215 us
   *   total     291.7215 us */
  { "/planner/cost/all-gather", "h100-sxm", "dp=4,mp=8", PLANNER_STEP_ALL_GATHER, 0, 4 * MiB,
    16 * MiB, 291.7215e-6, 4, 12582912 },
  /* ReduceScatter on mp of dp=4,mp=8 on h100-sxm, intra, n_in 8 MiB -> n_out 1 MiB; NCCL's
   * LL128 is the fastest:
   *   latency   14 + 7 * 1.9 us = 27.3 us
   *   bandwidth 0.875 * 8388608 / (0.92 * 370e9) = 7340032 / 340.4e9 = 21.56296 us
   *   total     48.86296 us (the Simple ring: 8.4 + 7 * 3.4 + 19.83792 = 52.03792 us) */
  { "/planner/cost/reduce-scatter", "h100-sxm", "dp=4,mp=8", PLANNER_STEP_REDUCE_SCATTER, 1,
    8 * MiB, MiB, 48.86296e-6, 8, 7340032 },
  /* AllToAll on mp=4 on a100-sxm, intra (NVLink 3: 225 GB/s, 2.5 us/step), 4 MiB local:
   *   latency   3 * 2.5 us = 7.5 us
   *   bandwidth 0.75 * 4194304 / 225e9 = 3145728 / 225e9 = 13.98101 us
   *   total     21.48101 us */
  { "/planner/cost/all-to-all", "a100-sxm", "mp=4", PLANNER_STEP_ALL_TO_ALL, 0, 4 * MiB, 4 * MiB,
    21.48101e-6, 4, 3145728 },
};

static void
test_collective (gconstpointer data)
{
  const CollectiveCase *c = data;
  g_autoptr (PlannerHardware) hw = test_util_hardware (c->hardware);
  g_autoptr (PlannerMesh) m = test_util_mesh (c->mesh);

  assert_close (planner_cost_step_time (hw, m, c->kind, c->axis, c->n_in, c->n_out), c->time_s,
                1e-6);
  g_assert_cmpuint (planner_cost_step_bytes (c->kind, c->group, c->n_in, c->n_out), ==, c->bytes);
}

/* Slice on mp=8 on h100-sxm, 8 MiB -> 1 MiB: a local copy of n_out at HBM speed,
 * 1048576 / 3350e9 = 313.0078 ns, whatever the link; nothing crosses a link. */
static void
test_slice (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=4,mp=8");

  assert_close (planner_cost_step_time (hw, m, PLANNER_STEP_SLICE, 1, 8 * MiB, MiB), 313.0078e-9,
                1e-6);
  assert_close (planner_cost_step_time (hw, m, PLANNER_STEP_SLICE, 0, 4 * MiB, MiB), 313.0078e-9,
                1e-6);
  g_assert_cmpuint (planner_cost_step_bytes (PLANNER_STEP_SLICE, 8, 8 * MiB, MiB), ==, 0);
}

static void
test_p1_is_free (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=1,mp=8");

  for (PlannerStepKind kind = 0; kind < PLANNER_N_STEP_KINDS; kind++)
    {
      g_assert_cmpfloat (planner_cost_step_time (hw, m, kind, 0, 64 * MiB, 64 * MiB), ==, 0.0);
      g_assert_cmpuint (planner_cost_step_bytes (kind, 1, 64 * MiB, 64 * MiB), ==, 0);
      /* Not even a measured curve makes a group of one cost something. */
      g_assert_cmpfloat (planner_cost_collective_time (hw, kind, PLANNER_LINK_INTRA, 1, MiB), ==,
                         0.0);
    }
  g_assert_cmpfloat (planner_cost_step_time (hw, m, PLANNER_STEP_ALL_REDUCE, 1, MiB, MiB), >, 0.0);
}

static void
test_step_bytes (void)
{
  guint64 big = G_GUINT64_CONSTANT (1) << 62;

  /* Integer (p-1)/p, rounded down: 10 * 2/3 = 6.67. */
  g_assert_cmpuint (planner_cost_step_bytes (PLANNER_STEP_ALL_TO_ALL, 3, 10, 10), ==, 6);
  g_assert_cmpuint (planner_cost_step_bytes (PLANNER_STEP_ALL_REDUCE, 3, 10, 10), ==, 12);
  /* No overflow of n * (p-1) for huge buffers. */
  g_assert_cmpuint (planner_cost_step_bytes (PLANNER_STEP_REDUCE_SCATTER, 8, big, big / 8), ==,
                    big / 8 * 7);
  /* The buffer a step names: n_out for AllGather and Slice, n_in for the rest. */
  g_assert_cmpuint (planner_cost_step_buffer (PLANNER_STEP_ALL_GATHER, 1, 2), ==, 2);
  g_assert_cmpuint (planner_cost_step_buffer (PLANNER_STEP_SLICE, 2, 1), ==, 1);
  g_assert_cmpuint (planner_cost_step_buffer (PLANNER_STEP_REDUCE_SCATTER, 2, 1), ==, 2);
  g_assert_cmpuint (planner_cost_step_buffer (PLANNER_STEP_ALL_REDUCE, 2, 2), ==, 2);
  g_assert_cmpuint (planner_cost_step_buffer (PLANNER_STEP_ALL_TO_ALL, 2, 2), ==, 2);
}

/* The mesh picks the link: the same AllReduce is slower across nodes. */
static void
test_link_choice (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=8,mp=8");
  double dp = planner_cost_step_time (hw, m, PLANNER_STEP_ALL_REDUCE, 0, MiB, MiB);
  double mp = planner_cost_step_time (hw, m, PLANNER_STEP_ALL_REDUCE, 1, MiB, MiB);

  g_assert_cmpfloat (
      dp, ==,
      planner_cost_collective_time (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTER, 8, MiB));
  g_assert_cmpfloat (
      mp, ==,
      planner_cost_collective_time (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, MiB));
  /* Across nodes NCCL's tree AllReduce takes 2 ceil(log2 8) = 6 latency steps, not the
   * ring's 14: 6 * 8 us + 1.75 * 1048576 / 47e9 = 48 + 39.04272 us (the ring-only model gave
   * 112 + 39.04272). */
  assert_close (dp, 87.04272e-6, 1e-6);
  g_assert_cmpfloat (dp, >, mp);

  /* Edited constants are used at once. */
  {
    PlannerLink link = *planner_hardware_get_link (hw, PLANNER_LINK_INTRA);

    link.bandwidth_GBps = 185;
    link.latency_us = 0;
    planner_hardware_set_link (hw, PLANNER_LINK_INTRA, &link);
    /* With NVLink SHARP off the ring is what runs, at NCCL's own latencies (ring_*, not the
     * link's): 56 us + 1.75 * 67108864 / 185e9 = 56 + 634.8135 = 690.8135 us */
    PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
    e.nvls_bandwidth_GBps = 0;
    planner_hardware_set_efficiency (hw, &e);
    assert_close (planner_cost_step_time (hw, m, PLANNER_STEP_ALL_REDUCE, 1, 64 * MiB, 64 * MiB),
                  690.8135e-6, 1e-6);
  }
}

/* NCCL's LL protocol (tuning.cc: 6.6 us + 0.6 us per ring step, half the busbw, capped by
 * llMaxBw) wins for small messages inside a node. */
static void
test_ll (void)
{
  g_autoptr (PlannerHardware) h100 = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerHardware) a100 = test_util_hardware ("a100-sxm");

  /* AllReduce of 1 MiB over 8 H100s: LL 6.6 + 14 x 0.6 = 15 us + 1.75 x 1048576 / min(185, 141)
   * GB/s = 15 + 1835008 / 141e9 = 28.01424 us; the Simple ring 56 + 1835008 / 370e9 = 60.95954 us,
   * NVLS (16 KiB chunks, half a round) 9.5 + 2.4 x (4.6 + 7.070866) = 37.51008 us. */
  assert_close (
      planner_cost_collective_time (h100, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, MiB),
      28.01424e-6, 1e-6);
  /* ReduceScatter of 64 KiB over 8 A100s: LL's busbw is min(225 / 2, 87.7) = 87.7 GB/s:
   * 6.6 + 7 x 0.6 = 10.8 us + 0.875 x 65536 / 87.7e9 = 10.8 + 0.6538655 = 11.45387 us (the
   * ring: 17.5 + 57344 / 225e9 = 17.75486 us). */
  assert_close (planner_cost_collective_time (a100, PLANNER_STEP_REDUCE_SCATTER, PLANNER_LINK_INTRA,
                                              8, 64 * 1024),
                11.45387e-6, 1e-6);
  /* Large messages stay on the ring: 64 MiB AllGather over 8 A100s, 8.4 + 7 x 3.4 = 32.2 us +
   * 58720256 / 225e9 = 293.1789 us (LL: 10.8 + 58720256 / 87.7e9 = 680.3622 us). */
  assert_close (
      planner_cost_collective_time (a100, PLANNER_STEP_ALL_GATHER, PLANNER_LINK_INTRA, 8, 64 * MiB),
      293.1789e-6, 1e-6);
  /* Not across nodes (NCCL's network latencies differ), nor for AllToAll (point to point):
   * with LL off nothing changes there. */
  {
    PlannerEfficiency e = *planner_hardware_get_efficiency (a100);
    double inter = planner_cost_collective_time (a100, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTER,
                                                 8, 64 * 1024);
    double a2a = planner_cost_collective_time (a100, PLANNER_STEP_ALL_TO_ALL, PLANNER_LINK_INTRA, 8,
                                               64 * 1024);
    e.ll_bandwidth_factor = 0;
    planner_hardware_set_efficiency (a100, &e);
    g_assert_cmpfloat (planner_cost_collective_time (a100, PLANNER_STEP_ALL_REDUCE,
                                                     PLANNER_LINK_INTER, 8, 64 * 1024),
                       ==, inter);
    g_assert_cmpfloat (planner_cost_collective_time (a100, PLANNER_STEP_ALL_TO_ALL,
                                                     PLANNER_LINK_INTRA, 8, 64 * 1024),
                       ==, a2a);
    /* ... and inside the node LL128 is next: 27.3 + 57344 / 207e9 = 27.57702 us (the Simple
     * ring: 32.2 + 57344 / 225e9 = 32.45486 us). */
    assert_close (planner_cost_collective_time (a100, PLANNER_STEP_REDUCE_SCATTER,
                                                PLANNER_LINK_INTRA, 8, 64 * 1024),
                  27.57702e-6, 1e-6);
  }
}

/* NVLS by chunk size, NCCL's halving rule (enqueue.cc, calcCollChunking) in each regime. The
 * ring is slowed to 100 GB/s so that NVLS is what runs; 128 chunks a round, seconds per byte
 * 1.75 / 480e9 - 4.6e-6 / (128 x 131072) = 3.371652e-12. */
static void
test_nvls_chunks (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  PlannerLink link = *planner_hardware_get_link (hw, PLANNER_LINK_INTRA);
  static const struct
  {
    guint64 n;
    double time_s;
  } cases[] = {
    /* 4 MiB < 2 x 128 x 32 KiB: 16 KiB chunks, 2 rounds of 4.6 + 7.070866 us:
     * 9.5 + 3.9 x 11.67087 = 55.01638 us */
    { 4 * MiB, 55.01638e-6 },
    /* 16 MiB < 8 x 128 x 64 KiB: 32 KiB, 4 rounds of 4.6 + 14.14173 us:
     * 9.5 + 5.9 x 18.74173 = 120.0762 us */
    { 16 * MiB, 120.0762e-6 },
    /* 32 MiB, still below 64 MiB: 32 KiB, 8 rounds: 9.5 + 9.9 x 18.74173 = 195.0432 us */
    { 32 * MiB, 195.0432e-6 },
    /* 1 GiB is not below 64 x 128 x 128 KiB: 128 KiB, 64 rounds of 4.6 + 56.56692 us:
     * 9.5 + 65.9 x 61.16692 = 4040.401 us */
    { 1024 * MiB, 4040.401e-6 },
  };

  link.bandwidth_GBps = 100;
  planner_hardware_set_link (hw, PLANNER_LINK_INTRA, &link);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    assert_close (planner_cost_collective_time (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8,
                                                cases[i].n),
                  cases[i].time_s, 1e-6);

  /* Without the chunk model (no channels), NVLS is the ring formula at its busbw, as before:
   * 35 + 1.75 x 67108864 / 480e9 = 279.6677 us. */
  {
    PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
    e.nvls_channels = 0;
    planner_hardware_set_efficiency (hw, &e);
    assert_close (
        planner_cost_collective_time (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, 64 * MiB),
        279.6677e-6, 1e-6);
  }
}

/* The collective model's members round-trip through the profile JSON, and a bad one is refused
 * by its path. */
static void
test_collective_profile_json (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autofree char *text = planner_hardware_to_json (hw);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) back = planner_hardware_from_json (text, &error);
  const PlannerEfficiency *e;

  g_assert_no_error (error);
  e = planner_hardware_get_efficiency (back);
  g_assert_cmpfloat (e->ll_base_us, ==, 6.6);
  g_assert_cmpfloat (e->ll_step_us, ==, 0.6);
  g_assert_cmpfloat (e->ll_bandwidth_factor, ==, 0.5);
  g_assert_cmpfloat (e->ll_bandwidth_GBps, ==, 141);
  g_assert_cmpfloat (e->nvls_latency_us, ==, 9.5);
  g_assert_cmpfloat (e->nvls_chunk_us, ==, 4.6);
  g_assert_cmpfloat (e->nvls_fill_chunks, ==, 1.9);
  g_assert_cmpfloat (e->nvls_channels, ==, 16);
  g_assert_cmpfloat (e->nvls_max_chunk_KiB, ==, 128);
  {
    g_autofree char *again = planner_hardware_to_json (back);
    g_assert_cmpstr (again, ==, text);
  }

  {
    GString *bad = g_string_new (text);
    g_autoptr (PlannerHardware) none = NULL;
    g_assert_cmpint (g_string_replace (bad, "\"nvls_chunk_us\": 4.6", "\"nvls_chunk_us\": -1", 1),
                     ==, 1);
    none = planner_hardware_from_json (bad->str, &error);
    g_string_free (bad, TRUE);
    g_assert_null (none);
    g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
    g_assert_nonnull (strstr (error->message, "efficiency.nvls_chunk_us"));
  }
}

static void
test_compute (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");

  /* Compute-bound: 989e12 FLOPs in bf16 is one second; in f32 (67 TFLOP/s) 14.76 s. */
  assert_close (planner_cost_compute_time (hw, PLANNER_DTYPE_BF16, 989e12, 1e6), 1.0, 1e-12);
  assert_close (planner_cost_compute_time (hw, PLANNER_DTYPE_F32, 989e12, 1e6), 989.0 / 67, 1e-12);
  /* Memory-bound: 3.35 GB at 3.35 TB/s is 1 ms, more than 1e6 FLOPs take. */
  assert_close (planner_cost_compute_time (hw, PLANNER_DTYPE_BF16, 1e6, 3.35e9), 1e-3, 1e-12);
  g_assert_cmpfloat (planner_cost_compute_time (hw, PLANNER_DTYPE_BF16, 0, 0), ==, 0);
}

static PlannerHardware *
with_points (const guint64 *bytes, const double *seconds, guint n)
{
  PlannerHardware *hw = test_util_hardware ("h100-sxm");

  for (guint i = 0; i < n; i++)
    planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, bytes[i],
                                      seconds[i]);
  return hw;
}

static double
measured (const PlannerHardware *hw, guint64 n)
{
  return planner_cost_collective_time (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, n);
}

static void
test_interpolation (void)
{
  static const guint64 bytes[] = { MiB, 2 * MiB, 4 * MiB };
  static const double seconds[] = { 20e-6, 30e-6, 40e-6 };
  g_autoptr (PlannerHardware) hw = with_points (bytes, seconds, G_N_ELEMENTS (bytes));
  g_autoptr (PlannerMesh) m8 = test_util_mesh ("mp=8");
  g_autoptr (PlannerMesh) m4 = test_util_mesh ("mp=4");
  g_autoptr (PlannerMesh) dp = test_util_mesh ("dp=2,mp=8");

  /* At the points, and linearly between them. */
  assert_close (measured (hw, MiB), 20e-6, 1e-12);
  assert_close (measured (hw, 2 * MiB), 30e-6, 1e-12);
  assert_close (measured (hw, 3 * MiB / 2), 25e-6, 1e-12);
  assert_close (measured (hw, 3 * MiB), 35e-6, 1e-12);
  assert_close (measured (hw, 4 * MiB), 40e-6, 1e-12);
  /* Through the mesh: AllReduce names n_in. */
  assert_close (planner_cost_step_time (hw, m8, PLANNER_STEP_ALL_REDUCE, 0, 3 * MiB, 3 * MiB),
                35e-6, 1e-12);
  assert_close (planner_cost_step_time (hw, dp, PLANNER_STEP_ALL_REDUCE, 1, 3 * MiB, 3 * MiB),
                35e-6, 1e-12);
  /* Another p, another link or another step has no curve: the model, here LL128
   * (14 + 6 * 1.9 us + 1.5 * 3145728 / 340.4e9 = 25.4 + 13.86190 us). */
  assert_close (planner_cost_step_time (hw, m4, PLANNER_STEP_ALL_REDUCE, 0, 3 * MiB, 3 * MiB),
                39.26190e-6, 1e-6);
  g_assert_cmpfloat (
      planner_cost_step_time (hw, dp, PLANNER_STEP_ALL_REDUCE, 0, 3 * MiB, 3 * MiB), ==,
      planner_cost_collective_time (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTER, 2, 3 * MiB));
  g_assert_cmpfloat (
      planner_cost_collective_time (hw, PLANNER_STEP_ALL_GATHER, PLANNER_LINK_INTRA, 8, 3 * MiB),
      !=, 35e-6);
}

/* Points exactly on t = 10 us + n / 100 GB/s, 1 KiB to 1 MiB: the fit finds the line, and
 * beyond the range the curve continues along it. */
static void
test_extrapolation (void)
{
  guint64 bytes[11];
  double seconds[11], alpha, beta;
  g_autoptr (PlannerHardware) hw = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (bytes); i++)
    {
      bytes[i] = G_GUINT64_CONSTANT (1024) << i;
      seconds[i] = 10e-6 + bytes[i] / 100e9;
    }
  hw = with_points (bytes, seconds, G_N_ELEMENTS (bytes));

  g_assert_true (planner_cost_measurement_fit (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8,
                                               &alpha, &beta));
  assert_close (alpha, 10e-6, 1e-9);
  assert_close (beta, 1 / 100e9, 1e-9);
  g_assert_false (planner_cost_measurement_fit (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 4,
                                                &alpha, &beta));

  /* Above: 4 MiB -> 10 us + 4194304 / 100e9 = 51.94304 us; 1 GiB -> 10 us + 10.73742 ms. */
  assert_close (measured (hw, 4 * MiB), 51.94304e-6, 1e-6);
  assert_close (measured (hw, 1024 * MiB), 10e-6 + 1073741824 / 100e9, 1e-9);
  /* Below: 256 B -> 10.00256 us; 0 B -> the latency. */
  assert_close (measured (hw, 256), 10.00256e-6, 1e-9);
  assert_close (measured (hw, 0), 10e-6, 1e-9);
}

/* One point cannot separate latency and bandwidth: beyond it, constant bandwidth. */
static void
test_extrapolation_one_point (void)
{
  static const guint64 bytes[] = { MiB };
  static const double seconds[] = { 10e-6 };
  g_autoptr (PlannerHardware) hw = with_points (bytes, seconds, 1);

  assert_close (measured (hw, MiB), 10e-6, 1e-12);
  assert_close (measured (hw, 2 * MiB), 20e-6, 1e-12);
  assert_close (measured (hw, MiB / 2), 5e-6, 1e-12);
}

static void
assert_monotone (const PlannerHardware *hw, guint64 from, guint64 to)
{
  double last_time = 0, last_bandwidth = 0;

  for (guint64 n = from; n <= to; n += (to - from) / 997)
    {
      double t = measured (hw, n);

      g_assert_cmpfloat (t, >=, last_time);
      g_assert_cmpfloat (n / t, >=, last_bandwidth * (1 - 1e-12));
      last_time = t;
      last_bandwidth = n / t;
    }
}

/* A bandwidth dip (100, 50, 100 GB/s at 1, 2, 4 MB) is pooled with its neighbour by the
 * monotone fit: 1 and 2 MB both run at (100 + 50) / 2 = 75 GB/s, i.e. 13.333 and 26.667 us. */
static void
test_monotone_bandwidth (void)
{
  static const guint64 bytes[] = { 1000000, 2000000, 4000000 };
  static const double seconds[] = { 10e-6, 40e-6, 40e-6 };
  g_autoptr (PlannerHardware) hw = with_points (bytes, seconds, G_N_ELEMENTS (bytes));

  assert_close (measured (hw, 1000000), 1e6 / 75e9, 1e-12);
  assert_close (measured (hw, 2000000), 2e6 / 75e9, 1e-12);
  assert_close (measured (hw, 4000000), 40e-6, 1e-12);
  assert_close (measured (hw, 1500000), 1.5e6 / 75e9, 1e-12);
  assert_monotone (hw, 500000, 8000000);
}

/* A faster larger message (noise at latency-bound sizes) does not make it cheaper: 2 KB takes
 * the 10 us that 1 KB took. */
static void
test_monotone_time (void)
{
  static const guint64 bytes[] = { 1000, 2000, 1000000 };
  static const double seconds[] = { 10e-6, 8e-6, 30e-6 };
  g_autoptr (PlannerHardware) hw = with_points (bytes, seconds, G_N_ELEMENTS (bytes));

  assert_close (measured (hw, 2000), 10e-6, 1e-12);
  assert_close (measured (hw, 1500), 10e-6, 1e-12);
  assert_monotone (hw, 100, 2000000);
}

/* A realistic sweep, 8 B to 256 MiB in x2 steps, made from the formula with noise: the
 * calibrated curve stays monotone everywhere and near the points. */
static void
test_sweep (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (GRand) rand = g_rand_new_with_seed (42);

  /* The formula of h100-sxm intra at p = 8: 2 * 7 * 2.5 us + 1.75 n / 370 GB/s. */
  for (guint64 n = 8; n <= 256 * MiB; n *= 2)
    planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, n,
                                      (35e-6 + 1.75 * n / 370e9)
                                          * g_rand_double_range (rand, 0.9, 1.1));
  assert_monotone (hw, 8, 1024 * MiB);
  assert_monotone (hw, 8, 64 * 1024);
  for (guint64 n = 8; n <= 256 * MiB; n *= 2)
    assert_close (measured (hw, n), 35e-6 + 1.75 * n / 370e9, 0.1);
  /* Beyond: the slope is the fitted one, near 1.75 / 370 GB/s. */
  assert_close (measured (hw, 512 * MiB) - measured (hw, 256 * MiB), 1.75 * 256 * MiB / 370e9,
                0.15);
}

static void
test_backward (void)
{
  PlannerStepKind back;

  g_assert_true (planner_step_kind_backward (PLANNER_STEP_ALL_GATHER, &back));
  g_assert_cmpint (back, ==, PLANNER_STEP_REDUCE_SCATTER);
  g_assert_true (planner_step_kind_backward (PLANNER_STEP_REDUCE_SCATTER, &back));
  g_assert_cmpint (back, ==, PLANNER_STEP_ALL_GATHER);
  g_assert_true (planner_step_kind_backward (PLANNER_STEP_ALL_TO_ALL, &back));
  g_assert_cmpint (back, ==, PLANNER_STEP_ALL_TO_ALL);
  g_assert_true (planner_step_kind_backward (PLANNER_STEP_SLICE, &back));
  g_assert_cmpint (back, ==, PLANNER_STEP_ALL_GATHER);
  g_assert_false (planner_step_kind_backward (PLANNER_STEP_ALL_REDUCE, &back));
}

/* Model states, by hand (the old model counted bf16 Adam as 2 x (1 + 1 + 2) = 8 bytes a
 * parameter, half the real 16): 1e9 bf16 parameters, Adam, mixed precision:
 *   weights 2e9, gradients 2e9, optimizer 4e9 master + 8e9 m and v = 12e9; 16e9 in all. */
static void
test_memory (void)
{
  PlannerCostConstants c;
  PlannerMemory m = { 0 };

  planner_cost_constants_init (&c);
  g_assert_cmpfloat (c.weight_copies, ==, 1);
  g_assert_cmpfloat (c.grad_copies, ==, 1);
  g_assert_cmpfloat (c.optimizer_states, ==, 2);
  g_assert_cmpfloat (c.backward_factor, ==, 2);
  g_assert_cmpuint (c.zero, ==, 0);
  g_assert_cmpint (c.recompute, ==, PLANNER_RECOMPUTE_NONE);
  g_assert_cmpfloat (c.dp_bucket_MiB, ==, 25);

  planner_cost_model_states (&c, 1000000000, PLANNER_DTYPE_BF16, 8, &m);
  g_assert_cmpuint (m.parameters, ==, 2000000000);
  g_assert_cmpuint (m.gradients, ==, 2000000000);
  g_assert_cmpuint (m.optimizer, ==, 12000000000);

  /* fp32 Adam: 4 + 4 + 8 = 16 bytes too, no master copy. */
  memset (&m, 0, sizeof m);
  planner_cost_model_states (&c, 1000000000, PLANNER_DTYPE_F32, 1, &m);
  g_assert_cmpuint (m.parameters + m.gradients + m.optimizer, ==, 16000000000);
  g_assert_cmpuint (m.optimizer, ==, 8000000000);

  /* ZeRO over dp = 8 (Rajbhandari et al. 2020, fig. 1: 2 + 2 + 12/Nd, 2 + (2 + 12)/Nd,
   * (2 + 2 + 12)/Nd bytes a parameter). */
  static const guint64 zero_bytes[] = { 16000000000, 5500000000, 3750000000, 2000000000 };
  for (guint z = 0; z <= 3; z++)
    {
      memset (&m, 0, sizeof m);
      c.zero = z;
      planner_cost_model_states (&c, 1000000000, PLANNER_DTYPE_BF16, 8, &m);
      g_assert_cmpuint (m.parameters + m.gradients + m.optimizer, ==, zero_bytes[z]);
    }

  /* SGD without momentum keeps no state: bf16 2 + 2 + 4 (master) = 8 bytes. */
  planner_cost_constants_init (&c);
  c.optimizer = PLANNER_OPTIMIZER_SGD;
  c.optimizer_states = 0;
  memset (&m, 0, sizeof m);
  planner_cost_model_states (&c, 1000000000, PLANNER_DTYPE_BF16, 1, &m);
  g_assert_cmpuint (m.parameters + m.gradients + m.optimizer, ==, 8000000000);
}

/* GEMM efficiency: linear in log2 of the size between the profile's points, flat outside. */
static void
test_gemm_efficiency (void)
{
  g_autoptr (PlannerHardware) hw = planner_hardware_new ("t");
  PlannerEfficiency e;
  planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_BF16, 100);
  planner_hardware_set_memory_bandwidth_GBps (hw, 1000);
  e = *planner_hardware_get_efficiency (hw);
  /* No points: datasheet peak. */
  assert_close (planner_cost_gemm_efficiency (hw, 4096), 1.0, 1e-12);
  e.n_gemm = 2;
  e.gemm_size[0] = 256;
  e.gemm_efficiency[0] = 0.4;
  e.gemm_size[1] = 4096;
  e.gemm_efficiency[1] = 0.8;
  e.memory_bound = 0.5;
  planner_hardware_set_efficiency (hw, &e);
  assert_close (planner_cost_gemm_efficiency (hw, 128), 0.4, 1e-12);
  assert_close (planner_cost_gemm_efficiency (hw, 8192), 0.8, 1e-12);
  /* 1024 is 2 of the 4 doublings from 256 to 4096: 0.4 + 0.5 * 0.4 = 0.6. */
  assert_close (planner_cost_gemm_efficiency (hw, 1024), 0.6, 1e-12);
  /* A 1024^3 GEMM: 2 * 2^30 FLOP / (100e12 * 0.6) = 35.79139 us; its 6 MiB of traffic at
   * 500 GB/s (12.58 us) is faster. */
  assert_close (planner_cost_gemm_time (hw, PLANNER_DTYPE_BF16, 2.0 * 1073741824.0, 6291456),
                35.79139e-6, 1e-6);
  /* Memory-bound: 1e6 bytes at 1000 GB/s x 0.5 = 2 us. */
  assert_close (planner_cost_memory_bound_time (hw, PLANNER_DTYPE_BF16, 1e3, 1e6), 2e-6, 1e-12);
}

/* @hw's attention efficiency for the kernel, masking, head dim and sequence is @want. */
static void
assert_attention (const PlannerHardware *hw, PlannerAttentionKernel kernel, gboolean causal,
                  double head_dim, double seq, double want, double rel)
{
  double eff = 0;
  g_assert_true (planner_cost_attention_efficiency (hw, kernel, causal, head_dim, seq, &eff));
  assert_close (eff, want, rel);
}

/* Attention throughput curves: the curve of the kernel with the same masking, nearest in head
 * dimension (in doublings), linear in log2 of the sequence between points, flat beyond. */
static void
test_attention_efficiency (void)
{
  g_autoptr (PlannerHardware) hw = planner_hardware_new ("attention");
  PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
  double eff = 0;

  /* No curve for a kernel: FALSE, and the caller keeps attention_flash's fractions. */
  g_assert_false (
      planner_cost_attention_efficiency (hw, PLANNER_ATTENTION_FLASH, TRUE, 128, 2048, &eff));
  e.attention[0] = (PlannerAttentionCurve){ PLANNER_ATTENTION_FLASH, TRUE,        128, 2,
                                            { 1024, 4096 },          { 0.2, 0.4 } };
  e.attention[1]
      = (PlannerAttentionCurve){ PLANNER_ATTENTION_FLASH, FALSE, 128, 1, { 1024 }, { 0.5 } };
  e.attention[2]
      = (PlannerAttentionCurve){ PLANNER_ATTENTION_FLASH, TRUE, 64, 1, { 1024 }, { 0.1 } };
  e.n_attention = 3;
  planner_hardware_set_efficiency (hw, &e);
  /* 2048 is halfway between 1024 and 4096 in log2: (0.2 + 0.4) / 2 */
  assert_attention (hw, PLANNER_ATTENTION_FLASH, TRUE, 128, 2048, 0.3, 1e-12);
  /* Flat beyond the ends. */
  assert_attention (hw, PLANNER_ATTENTION_FLASH, TRUE, 128, 512, 0.2, 1e-12);
  assert_attention (hw, PLANNER_ATTENTION_FLASH, TRUE, 128, 65536, 0.4, 1e-12);
  /* Head dim 96: log2 96 = 6.585 is 0.415 doublings from 128 and 0.585 from 64: the d128
   * curve; 80 (6.322) is nearer 64. */
  assert_attention (hw, PLANNER_ATTENTION_FLASH, TRUE, 96, 1024, 0.2, 1e-12);
  assert_attention (hw, PLANNER_ATTENTION_FLASH, TRUE, 80, 1024, 0.1, 1e-12);
  /* The masking comes before the head dimension: non-causal d64 takes the non-causal d128. */
  assert_attention (hw, PLANNER_ATTENTION_FLASH, FALSE, 64, 1024, 0.5, 1e-12);
  /* Another kernel has no curve. */
  g_assert_false (
      planner_cost_attention_efficiency (hw, PLANNER_ATTENTION_FLASH1, TRUE, 128, 1024, &eff));

  /* The built-in profiles hold the published figures: FlashAttention-2's release benchmark
   * (causal, head dim 128, forward + backward), A100 155 TFLOP/s at 2k of 312, H100
   * FlashAttention 1 108 TFLOP/s at 2k of 989. */
  g_autoptr (PlannerHardware) a100 = test_util_hardware ("a100-sxm");
  g_autoptr (PlannerHardware) h100 = test_util_hardware ("h100-sxm");
  assert_attention (a100, PLANNER_ATTENTION_FLASH, TRUE, 128, 2048, 155.0 / 312, 1e-3);
  assert_attention (h100, PLANNER_ATTENTION_FLASH1, TRUE, 128, 2048, 108.0 / 989, 1e-3);
}

/* ZeRO-3's backward with BACKWARD_POST, units 0..2 (backward runs 2, 1, 0), by hand:
 *   gathers 1 ms, reduces 2 ms: unit 2's gather 1; unit 1's beside unit 2's ReduceScatter
 *   1 + min(1, 2) = 2; unit 0's 2; unit 0's ReduceScatter after the pass 2: 7 ms.
 *   reduces 0.5 ms: 1 + 1.5 + 1.5 + 0.5 = 4.5 ms. */
static void
test_post_prefetch (void)
{
  const double gathers[] = { 1e-3, 1e-3, 1e-3 };
  const double slow[] = { 2e-3, 2e-3, 2e-3 };
  const double fast[] = { 0.5e-3, 0.5e-3, 0.5e-3 };

  assert_close (planner_cost_post_prefetch_exposed (gathers, slow, 3), 7e-3, 1e-9);
  assert_close (planner_cost_post_prefetch_exposed (gathers, fast, 3), 4.5e-3, 1e-9);
  g_assert_cmpfloat (planner_cost_post_prefetch_exposed (NULL, NULL, 0), ==, 0.0);
}

/* Bucketed gradient sync against a 10 ms backward pass, by hand:
 * 4 buckets of 1 ms ready at 2.5, 5, 7.5, 10 ms: the last ends at 11 ms, 1 ms exposed;
 * 4 buckets of 4 ms: they end at 2.5 + 16 = 18.5 ms, 8.5 ms exposed; no overlap: all of it. */
static void
test_buckets (void)
{
  const double small[] = { 1e-3, 1e-3, 1e-3, 1e-3 };
  const double large[] = { 4e-3, 4e-3, 4e-3, 4e-3 };

  assert_close (planner_cost_bucket_exposed (small, 4, 10e-3, TRUE), 1e-3, 1e-9);
  assert_close (planner_cost_bucket_exposed (large, 4, 10e-3, TRUE), 8.5e-3, 1e-9);
  assert_close (planner_cost_bucket_exposed (large, 4, 10e-3, FALSE), 16e-3, 1e-9);
  g_assert_cmpfloat (planner_cost_bucket_exposed (NULL, 0, 10e-3, TRUE), ==, 0.0);
}

/* Prefetched parameter gathers ahead of a 10 ms pass in 4 segments, by hand: gathers of 1 ms
 * are done at 1, 2, 3, 4 ms and segment k waits for gather k: segments run 1-3.5, 3.5-6,
 * 6-8.5, 8.5-11 ms: 1 ms exposed (the first gather); of 4 ms: done at 4, 8, 12, 16 ms,
 * segments 4-6.5, 8-10.5, 12-14.5, 16-18.5: 8.5 ms exposed. */
static void
test_prefetch (void)
{
  const double small[] = { 1e-3, 1e-3, 1e-3, 1e-3 };
  const double large[] = { 4e-3, 4e-3, 4e-3, 4e-3 };

  assert_close (planner_cost_prefetch_exposed (small, 4, 10e-3, TRUE), 1e-3, 1e-9);
  assert_close (planner_cost_prefetch_exposed (large, 4, 10e-3, TRUE), 8.5e-3, 1e-9);
  assert_close (planner_cost_prefetch_exposed (large, 4, 10e-3, FALSE), 16e-3, 1e-9);
}

/* Several NICs per node: a group with 4 members in each 8-GPU node drives
 * 4 x (8 NICs / 8 GPUs) = 4 NICs: 4 x 47 = 188 GB/s (below NVLink's 370). */
static void
test_multi_nic (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=4,mp=2");

  g_assert_cmpuint (planner_hardware_get_efficiency (hw)->nics_per_node, ==, 8);
  g_autoptr (PlannerMesh) wide = test_util_mesh ("dp=16,mp=2");
  /* dp=16 of dp=16,mp=2: 4 members per node, 4 NICs, 188 GB/s; the tree's 2 ceil(log2 16) = 8
   * latency steps of 8 us:
   *   64 us + 2 * 15/16 * 67108864 / 188e9 = 64 + 669.3045 = 733.3045 us
   * and an AllGather of 64 MiB (ring only): 15 * 8 us + 15/16 * 67108864 / 188e9
   *   = 120 + 334.65225 = 454.65225 us */
  assert_close (planner_cost_step_time (hw, wide, PLANNER_STEP_ALL_REDUCE, 0, 64 * MiB, 64 * MiB),
                733.3045e-6, 1e-6);
  assert_close (planner_cost_step_time (hw, wide, PLANNER_STEP_ALL_GATHER, 0, 4 * MiB, 64 * MiB),
                454.65225e-6, 1e-6);
  /* Inside one node the axis is intra as before. */
  g_assert_true (planner_hardware_axis_is_intra (hw, m, 0));
}

/* The training options as the store keeps them: written, read back equal; unknown keys and
 * bad values refused, leaving the constants as they were. */
static void
test_training_text (void)
{
  PlannerCostConstants c, d;
  planner_cost_constants_init (&c);
  c.optimizer = PLANNER_OPTIMIZER_SGD;
  c.zero = 2;
  c.recompute = PLANNER_RECOMPUTE_SELECTIVE;
  c.attention = PLANNER_ATTENTION_UNFUSED;
  c.micro_batch = 3;
  c.dp_bucket_MiB = 12.5;
  c.dp_overlap = FALSE;
  c.no_dropout = TRUE;
  c.grad_reduce = PLANNER_GRAD_REDUCE_F32;
  c.backward_prefetch = PLANNER_PREFETCH_POST;
  g_autofree char *text = planner_cost_training_to_string (&c);
  g_assert_cmpstr (text, ==,
                   "optimizer=sgd;zero=2;recompute=selective;attention=unfused;micro_batch=3;"
                   "dp_bucket_MiB=12.5;dp_overlap=0;no_dropout=1;grad_reduce=f32;"
                   "backward_prefetch=post");
  planner_cost_constants_init (&d);
  d.optimizer_states = c.optimizer_states;
  g_assert_true (planner_cost_training_from_string (text, &d));
  g_assert_cmpmem (&c, sizeof c, &d, sizeof d);

  /* A row stored before grad_reduce and backward_prefetch reads with their defaults. */
  planner_cost_constants_init (&d);
  g_assert_true (planner_cost_training_from_string ("attention=flash1;zero=3", &d));
  g_assert_cmpint (d.attention, ==, PLANNER_ATTENTION_FLASH1);
  g_assert_cmpint (d.grad_reduce, ==, PLANNER_GRAD_REDUCE_PARAM);
  g_assert_cmpint (d.backward_prefetch, ==, PLANNER_PREFETCH_PRE);

  const char *bad[] = { "zero=4", "recompute=some",  "colour=blue",      "dp_bucket_MiB=0",
                        "zero",   "grad_reduce=f16", "attention=flash3", "backward_prefetch=none" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      planner_cost_constants_init (&d);
      g_assert_false (planner_cost_training_from_string (bad[i], &d));
      g_assert_cmpuint (d.zero, ==, 0);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (collective_cases); i++)
    g_test_add_data_func (collective_cases[i].path, &collective_cases[i], test_collective);
  g_test_add_func ("/planner/cost/slice", test_slice);
  g_test_add_func ("/planner/cost/p1-is-free", test_p1_is_free);
  g_test_add_func ("/planner/cost/step-bytes", test_step_bytes);
  g_test_add_func ("/planner/cost/link-choice", test_link_choice);
  g_test_add_func ("/planner/cost/ll", test_ll);
  g_test_add_func ("/planner/cost/nvls-chunks", test_nvls_chunks);
  g_test_add_func ("/planner/cost/collective-profile-json", test_collective_profile_json);
  g_test_add_func ("/planner/cost/compute", test_compute);
  g_test_add_func ("/planner/cost/interpolation", test_interpolation);
  g_test_add_func ("/planner/cost/extrapolation", test_extrapolation);
  g_test_add_func ("/planner/cost/extrapolation-one-point", test_extrapolation_one_point);
  g_test_add_func ("/planner/cost/monotone-bandwidth", test_monotone_bandwidth);
  g_test_add_func ("/planner/cost/monotone-time", test_monotone_time);
  g_test_add_func ("/planner/cost/sweep", test_sweep);
  g_test_add_func ("/planner/cost/backward", test_backward);
  g_test_add_func ("/planner/cost/memory", test_memory);
  g_test_add_func ("/planner/cost/gemm-efficiency", test_gemm_efficiency);
  g_test_add_func ("/planner/cost/attention-efficiency", test_attention_efficiency);
  g_test_add_func ("/planner/cost/post-prefetch", test_post_prefetch);
  g_test_add_func ("/planner/cost/buckets", test_buckets);
  g_test_add_func ("/planner/cost/prefetch", test_prefetch);
  g_test_add_func ("/planner/cost/training-text", test_training_text);
  g_test_add_func ("/planner/cost/multi-nic", test_multi_nic);

  return g_test_run ();
}
