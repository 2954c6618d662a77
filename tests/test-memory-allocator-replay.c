/* The caching allocator replayed over a sequence of allocations and frees (issue 12), and the
 * training step's own sequence, against figures worked out by hand from PyTorch's rules
 * (c10/cuda/CUDACachingAllocator.cpp as data/hardware/h100-sxm.json gives its constants:
 * requests rounded to 512 B; up to 1 MiB from 2 MiB segments, under 10 MiB from 20 MiB ones,
 * larger ones a segment of their size rounded to 2 MiB; the smallest free block that holds a
 * request, split when more than 1 MiB remains; a freed block merges with free neighbours and
 * stays cached, no segment is given back).
 *
 * The step (planner/README.md, "Reserved memory"): the graph x [1024, 1024] f32 (an input)
 * -> MatMul (w1 [1024, 1024]) -> h -> Gelu -> g -> MatMul (w2 [1024, 1024]) -> y, the output.
 * Every tensor is 4 MiB. Gelu keeps h, the second MatMul keeps g, the loss keeps y; Adam in
 * fp32: 8 MiB of weights, 8 of gradients, 16 of Adam states, 12 of activations: 44 MiB.
 * By hand, S1.. the 20 MiB segments, | between blocks, "f" a free block:
 *   init    w1, w2 -> S1 [w1 | w2 | 12f]
 *   step 1  forward: h, g, y fill S1 [w1 | w2 | h | g | y]; y's gradient -> S2 [gy | 16f];
 *           backward of the second MatMul: g's gradient, w2's .grad -> S2 [gy | gg | gw2 | 8f];
 *           then gy, g and y freed (S2 [4f | gg | gw2 | 8f], S1 [w1 | w2 | h | 8f]); Gelu: h's
 *           gradient takes S2's 4 MiB (best fit), gg and h freed (S1 [w1 | w2 | 12f]); the
 *           first MatMul: w1's .grad takes S2's 4 again, gh freed; the optimizer: m1 the 4,
 *           v1 S2's 8 (4 left), m2 that 4, v2 S1's 12 (8 left), each fp32 denominator in a free
 *           block and freed: 40 MiB reserved;
 *   step 2  forward: h and g take S1's 8, y fits nowhere (no free block): S3, 60 MiB; the rest
 *           of the step (gradients, the weights' gradient temporaries added into .grad) fits
 *           in S3 and the freed blocks, and step 3 repeats step 2.
 * High-water mark 60 MiB; alive at most 56 MiB (the 32 MiB of states, h, g, y, gy, gg and w2's
 * gradient temporary); allocator = 60 - 44 = 16 MiB. */

#include "config.h"

#include "planner-plan.h"
#include "test-util.h"

#define MiB ((guint64)1 << 20)

static const PlannerEfficiency *
h100 (void)
{
  static PlannerHardware *hw = NULL;
  if (hw == NULL)
    hw = test_util_hardware ("h100-sxm");
  return planner_hardware_get_efficiency (hw);
}

/* A 12 MiB block freed in a 20 MiB segment does not hold a later 14 MiB request: a segment of
 * its own (14 MiB: requests of 10 MiB and more get their size rounded to 2 MiB). */
static void
test_freed_block_too_small (void)
{
  PlannerAllocSim *sim = planner_alloc_sim_new (h100 ());
  int a = planner_alloc_sim_malloc (sim, 8 * MiB);  /* S1 (20 MiB) [a 8 | 12f] */
  int b = planner_alloc_sim_malloc (sim, 12 * MiB); /* S1's rest: [a | b 12] */
  g_assert_cmpuint (planner_alloc_sim_reserved (sim), ==, 20 * MiB);
  planner_alloc_sim_release (sim, b);               /* [a | 12f] cached */
  int c = planner_alloc_sim_malloc (sim, 14 * MiB); /* fits no free block: S2 (14 MiB) */
  g_assert_cmpuint (planner_alloc_sim_reserved (sim), ==, 34 * MiB);
  g_assert_cmpuint (planner_alloc_sim_live_peak (sim), ==, 22 * MiB);
  /* A 6 MiB request reuses the cached 12 (best fit), split: 6 MiB stay free. */
  int d = planner_alloc_sim_malloc (sim, 6 * MiB);
  g_assert_cmpuint (planner_alloc_sim_reserved (sim), ==, 34 * MiB);
  /* ... and a second 6 MiB the rest of it. */
  int e = planner_alloc_sim_malloc (sim, 6 * MiB);
  g_assert_cmpuint (planner_alloc_sim_reserved_peak (sim), ==, 34 * MiB);
  g_assert_cmpuint (planner_alloc_sim_live_peak (sim), ==, 34 * MiB);
  (void)a, (void)c, (void)d, (void)e;
  planner_alloc_sim_free (sim);
}

/* Freed neighbours merge: with both halves of the segment free, the 14 MiB request fits in it
 * and no segment is added. */
static void
test_freed_blocks_merge (void)
{
  PlannerAllocSim *sim = planner_alloc_sim_new (h100 ());
  int a = planner_alloc_sim_malloc (sim, 8 * MiB);
  int b = planner_alloc_sim_malloc (sim, 12 * MiB);
  planner_alloc_sim_release (sim, a);
  planner_alloc_sim_release (sim, b); /* [20f] */
  planner_alloc_sim_malloc (sim, 14 * MiB);
  g_assert_cmpuint (planner_alloc_sim_reserved_peak (sim), ==, 20 * MiB);
  g_assert_cmpuint (planner_alloc_sim_live_peak (sim), ==, 20 * MiB);
  planner_alloc_sim_free (sim);
}

/* A freed block that holds the request is reused: 10 MiB in the cached 12 (2 MiB left, split
 * off: more than 1 MiB), then 2 MiB in the rest; the reserve stays one segment. */
static void
test_freed_block_reused (void)
{
  PlannerAllocSim *sim = planner_alloc_sim_new (h100 ());
  planner_alloc_sim_malloc (sim, 8 * MiB);
  int b = planner_alloc_sim_malloc (sim, 12 * MiB);
  planner_alloc_sim_release (sim, b);
  planner_alloc_sim_malloc (sim, 10 * MiB);
  g_assert_cmpuint (planner_alloc_sim_reserved (sim), ==, 20 * MiB);
  /* 2 MiB is a large-pool request (over 1 MiB): it takes the 2 MiB left. */
  planner_alloc_sim_malloc (sim, 2 * MiB);
  g_assert_cmpuint (planner_alloc_sim_reserved_peak (sim), ==, 20 * MiB);
  g_assert_cmpuint (planner_alloc_sim_live_peak (sim), ==, 20 * MiB);
  /* Small requests never take a large block: 1 MiB opens a 2 MiB small segment. */
  planner_alloc_sim_malloc (sim, MiB);
  g_assert_cmpuint (planner_alloc_sim_reserved (sim), ==, 22 * MiB);
  planner_alloc_sim_free (sim);
}

static const char *const graph_text
    = "{\"shardscope_graph\": 1, \"name\": \"mlp\", \"source\": \"mlp\", \"tensors\": ["
      "{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [1024, 1024]},"
      "{\"name\": \"w1\", \"dtype\": \"f32\", \"kind\": \"parameter\", \"shape\": [1024, 1024]},"
      "{\"name\": \"w2\", \"dtype\": \"f32\", \"kind\": \"parameter\", \"shape\": [1024, 1024]}],"
      "\"ops\": [{\"name\": \"mm1\", \"type\": \"MatMul\", \"inputs\": [\"x\", \"w1\"], "
      "\"outputs\": [\"h\"]},"
      "{\"name\": \"act\", \"type\": \"Gelu\", \"inputs\": [\"h\"], \"outputs\": [\"g\"]},"
      "{\"name\": \"mm2\", \"type\": \"MatMul\", \"inputs\": [\"g\", \"w2\"], "
      "\"outputs\": [\"y\"]}],"
      "\"outputs\": [\"y\"]}";

static void
test_step_by_hand (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_graph_from_json (graph_text, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=1", NULL, NULL, NULL);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->activations, ==, 12 * MiB);
  g_assert_cmpuint (m->total, ==, 44 * MiB);
  g_assert_cmpuint (m->allocator, ==, 16 * MiB);
  g_assert_cmpuint (m->reserved_total, ==, m->total + m->allocator + m->runtime);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/memory-allocator-replay/freed-block-too-small",
                   test_freed_block_too_small);
  g_test_add_func ("/planner/memory-allocator-replay/freed-blocks-merge", test_freed_blocks_merge);
  g_test_add_func ("/planner/memory-allocator-replay/freed-block-reused", test_freed_block_reused);
  g_test_add_func ("/planner/memory-allocator-replay/step-by-hand", test_step_by_hand);
  return g_test_run ();
}
