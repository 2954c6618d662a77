/* The reserved estimate beside the tensors (issue 12): PyTorch's caching allocator's rounding
 * and segment packing, the CUDA context, cuBLAS's workspace and NCCL's buffers, and the fit
 * check on their sum, against figures computed by hand from PyTorch's and NCCL's sources
 * (c10/cuda/CUDACachingAllocator.cpp; aten/src/ATen/cuda/CublasHandlePool.cpp; NCCL's
 * src/init.cc, src/transport/p2p.cc and nvls.cc; data/hardware/h100-sxm.json's description).
 *
 * The graph: x [1024, 1024] f32 (an input, not counted) -> MatMul (w [1024, 2048] f32) -> y,
 * the output (kept for the loss; not named "logits": no loss temporaries). Adam, fp32:
 *   weights 1024 x 2048 x 4 = 8 MiB, gradient 8 MiB, two Adam states 8 MiB each (fp32: no
 *   master copy), y 8 MiB: 40 MiB of tensors, five allocations of 8 MiB.
 * The allocator, with nothing freed (planner_cost_allocator_reserved): a request of 1 to
 * 10 MiB takes a 20 MiB segment, whose 12 MiB rest is split off (more than 1 MiB remains) and
 * takes the second 8 MiB, leaving 4 MiB, too small for the third: the model states alone take
 * two segments (40 MiB for 32).
 * The step replayed (issue 12, planner/README.md "Reserved memory"), segments S1.. of 20 MiB:
 *   init      w -> S1 [w 8 | 12]
 *   step 1    y -> S1 [w | y 8 | 4]; y's gradient (the loss's) -> S2 [gy 8 | 12]; w's gradient
 *             (its .grad) -> S2 [gy | gw 8 | 4]; gy and y freed: S1 [w | 12], S2 [8 | gw | 4];
 *             Adam's m takes S2's 8 (best fit), v S1's 12 (4 left); the fp32 denominator of 8
 *             fits no free block (4, 4): S3, freed again: 60 MiB;
 *   step 2    y -> S3 [y | 12], gy -> S3 [y | gy | 4], w's gradient as a temporary added into
 *             .grad fits none of 4, 4, 4: S4, 80 MiB, the high-water mark.
 * allocator = 80 - 40 = 40 MiB. The activations' part, which a pipeline stage scales with
 * the micro-batches it holds, is y's packing with nothing freed: the five 8 MiB allocations
 * take three segments (60 MiB for 40), the states alone two (40 for 32): 20 - 8 = 12 MiB.
 * Runtime on h100-sxm: 400 MiB of CUDA context, 32 MiB of cuBLAS workspace (Hopper's
 * 4096 x 8 KiB), no NCCL on dp=1: reserved_total 40 + 40 + 432 = 512 MiB. */

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-plan-json.h"
#include "planner-plan.h"
#include "test-util.h"

#define MiB ((guint64)1 << 20)
#define KiB ((guint64)1 << 10)

static const char *const graph_text
    = "{\"shardscope_graph\": 1, \"name\": \"gemm\", \"source\": \"gemm\", \"tensors\": ["
      "{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [1024, 1024]},"
      "{\"name\": \"w\", \"dtype\": \"f32\", \"kind\": \"parameter\", \"shape\": [1024, 2048]}],"
      "\"ops\": [{\"name\": \"mm\", \"type\": \"MatMul\", \"inputs\": [\"x\", \"w\"], "
      "\"outputs\": [\"y\"]}],"
      "\"outputs\": [\"y\"]}";

static PlannerPlan *
plan_of (const char *mesh, const PlannerHardware *hw)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_graph_from_json (graph_text, &error);
  g_assert_no_error (error);
  PlannerPlan *plan = test_util_plan (graph, mesh, hw, NULL, NULL);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  return plan;
}

/* PyTorch's sizes, as data/hardware/h100-sxm.json gives them. */
static const PlannerEfficiency *
h100 (void)
{
  static PlannerHardware *hw = NULL;
  if (hw == NULL)
    hw = test_util_hardware ("h100-sxm");
  return planner_hardware_get_efficiency (hw);
}

static guint64
reserved (const guint64 *sizes, guint n)
{
  return planner_cost_allocator_reserved (h100 (), sizes, n);
}

static void
test_allocator_rules (void)
{
  /* 100 B: rounded to 512, in a 2 MiB small segment. */
  guint64 tiny[] = { 100 };
  g_assert_cmpuint (reserved (tiny, 1), ==, 2 * MiB);
  /* Three 8 MiB: 20 MiB segments hold two each (12 MiB split off, then 4 MiB left). */
  guint64 three[] = { 8 * MiB, 8 * MiB, 8 * MiB };
  g_assert_cmpuint (reserved (three, 3), ==, 40 * MiB);
  /* 8 MiB and two 2 MiB share one segment: the rest is split twice (12 -> 10 -> 8 MiB). */
  guint64 mixed[] = { 8 * MiB, 2 * MiB, 2 * MiB };
  g_assert_cmpuint (reserved (mixed, 3), ==, 20 * MiB);
  /* 11 MiB: a segment rounded up to 2 MiB, 12 MiB; the 1 MiB rest is not split off
   * (remaining > kSmallSize only), so a 1 MiB + 1 B request after it needs a segment of its
   * own, 20 MiB. */
  guint64 large[] = { 11 * MiB, MiB + 1 };
  g_assert_cmpuint (reserved (large, 2), ==, 32 * MiB);
  /* 1 MiB exactly is still small (<= kSmallSize): 2 MiB segments. */
  guint64 one[] = { MiB, MiB, MiB };
  g_assert_cmpuint (reserved (one, 3), ==, 4 * MiB);
  /* 600 KiB blocks: three fit one 2 MiB segment (2048 - 3 x 600 = 248 KiB left), the fourth
   * takes a second. */
  guint64 small[] = { 600 * KiB, 600 * KiB, 600 * KiB, 600 * KiB };
  g_assert_cmpuint (reserved (small, 4), ==, 4 * MiB);
  /* No allocator in the profile (cpu-local): nothing. */
  PlannerEfficiency none = *h100 ();
  none.allocator_min_block_B = 0;
  g_assert_cmpuint (planner_cost_allocator_reserved (&none, three, 3), ==, 0);
}

static void
test_nccl_buffers (void)
{
  /* A ring channel's buffers: LL 512 KiB + LL128 4800 KiB + Simple 4096 KiB = 9408 KiB; 16
   * channels on Hopper: 154140672 B. NVLS on 8 GPUs of a node: 16 channels x 2 x 128 KiB x 8
   * steps x 8 heads = 256 MiB. */
  g_assert_cmpuint (planner_cost_nccl_buffers (h100 (), 1, 1), ==, 0);
  g_assert_cmpuint (planner_cost_nccl_buffers (h100 (), 8, 1), ==, 16 * 9408 * KiB);
  g_assert_cmpuint (planner_cost_nccl_buffers (h100 (), 8, 8), ==, 16 * 9408 * KiB + 256 * MiB);
  /* A100: 24 channels, no NVLS. */
  g_autoptr (PlannerHardware) a100 = test_util_hardware ("a100-sxm");
  g_assert_cmpuint (planner_cost_nccl_buffers (planner_hardware_get_efficiency (a100), 8, 8), ==,
                    24 * 9408 * KiB);
}

static void
test_plan_one_device (void)
{
  g_autoptr (PlannerPlan) plan = plan_of ("dp=1", NULL);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->total, ==, 40 * MiB);
  g_assert_cmpuint (m->allocator, ==, 40 * MiB);
  g_assert_cmpuint (m->allocator_activations, ==, 12 * MiB);
  g_assert_cmpuint (m->cuda_context, ==, 400 * MiB);
  g_assert_cmpuint (m->cublas_workspace, ==, 32 * MiB);
  g_assert_cmpuint (m->nccl_buffers, ==, 0);
  g_assert_cmpuint (m->runtime, ==, 432 * MiB);
  g_assert_cmpuint (m->reserved_total, ==, 512 * MiB);

  /* The same figures in `propagate --json`'s memory object. */
  g_autoptr (JsonNode) summary = planner_plan_summary_to_json (plan);
  JsonObject *mem = json_object_get_object_member (json_node_get_object (summary), "memory");
  g_assert_cmpint (json_object_get_int_member (mem, "allocator"), ==, 40 * MiB);
  g_assert_cmpint (json_object_get_int_member (mem, "runtime"), ==, 432 * MiB);
  g_assert_cmpint (json_object_get_int_member (mem, "reserved_total"), ==, 512 * MiB);
}

/* dp=8 splits x's rows: y is [128, 2048] f32, 1 MiB, a small allocation. Replayed: w -> S1
 * [w 8 | 12]; y -> a 2 MiB small segment [y 1 | 1], gy its other half; w's gradient -> S1
 * [w | gw | 4]; y and gy freed (the small segment free, 2 MiB); m fits no large free block (4):
 * S3 [m | v | 4]; the denominator S4 (20), freed. Step 2 reuses: y and gy the small segment, the
 * gradient temporary and the denominator S4. 20 + 2 + 20 + 20 = 62 MiB reserved for 33 of
 * tensors (8 + 8 + 16 + 1): allocator 29 MiB; the activations' part y's 2 MiB small segment with
 * nothing freed, 1 MiB beyond it. The dp communicator
 * spans the node: 16 ring channels and NVLS, 154140672 + 268435456 B. */
static void
test_plan_data_parallel (void)
{
  g_autoptr (PlannerPlan) plan = plan_of ("dp=8", NULL);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->activations, ==, MiB);
  g_assert_cmpuint (m->allocator, ==, 29 * MiB);
  g_assert_cmpuint (m->allocator_activations, ==, MiB);
  g_assert_cmpuint (m->nccl_buffers, ==, 16 * 9408 * KiB + 256 * MiB);
  g_assert_cmpuint (m->runtime, ==, 432 * MiB + 16 * 9408 * KiB + 256 * MiB);
  g_assert_cmpuint (m->reserved_total, ==, m->total + m->allocator + m->runtime);
}

/* A device of 0.3 GB holds the 40 MiB of tensors (41943040 B) but not the 512 MiB
 * (536870912 B) they take with the runtime: `fits` is the reserved total's (issue 12). */
static void
test_fits_reserved (void)
{
  g_autoptr (PlannerHardware) small = test_util_hardware ("h100-sxm");
  planner_hardware_set_memory_GB (small, 0.3);
  g_autoptr (PlannerPlan) plan = plan_of ("dp=1", small);
  g_autoptr (JsonNode) summary = planner_plan_summary_to_json (plan);
  g_assert_false (json_object_get_boolean_member (json_node_get_object (summary), "fits"));
  planner_hardware_set_memory_GB (small, 0.6);
  g_autoptr (PlannerPlan) roomy = plan_of ("dp=1", small);
  g_autoptr (JsonNode) fits = planner_plan_summary_to_json (roomy);
  g_assert_true (json_object_get_boolean_member (json_node_get_object (fits), "fits"));
}

/* The profile's runtime_memory object reads back as written, and refuses an allocator without
 * its segment sizes and an unknown member by name. */
static void
test_profile_json (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autofree char *text = planner_hardware_to_json (hw);
  g_assert_nonnull (strstr (text, "\"runtime_memory\""));
  g_autoptr (PlannerHardware) back = planner_hardware_from_json (text, &error);
  g_assert_no_error (error);
  g_assert_true (planner_hardware_equal (hw, back));
  g_assert_cmpfloat (planner_hardware_get_efficiency (back)->cublas_workspace_KiB, ==, 32768);

#define PROFILE(runtime)                                                                    \
  "{\"shardscope_hardware\": 1, \"name\": \"t\", \"peak_tflops\": "                              \
  "{\"f32\": 1, \"bf16\": 1, \"f16\": 1}, \"memory_bandwidth_GBps\": 1, \"memory_GB\": 1, "        \
  "\"links\": {\"intra\": {\"bandwidth_GBps\": 1, \"latency_us\": 1}, \"inter\": "                \
  "{\"bandwidth_GBps\": 1, \"latency_us\": 1}}, \"runtime_memory\": " runtime "}"
  g_assert_null (planner_hardware_from_json (PROFILE ("{\"allocator_min_block_B\": 512}"), &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
  g_assert_nonnull (strstr (error->message, "runtime_memory.allocator_min_block_B"));
  g_clear_error (&error);
  g_assert_null (planner_hardware_from_json (PROFILE ("{\"cuda_context_mib\": 400}"), &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
  g_assert_nonnull (strstr (error->message, "cuda_context_mib"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/memory-reserved/allocator-rules", test_allocator_rules);
  g_test_add_func ("/planner/memory-reserved/nccl-buffers", test_nccl_buffers);
  g_test_add_func ("/planner/memory-reserved/plan-one-device", test_plan_one_device);
  g_test_add_func ("/planner/memory-reserved/plan-data-parallel", test_plan_data_parallel);
  g_test_add_func ("/planner/memory-reserved/fits-reserved", test_fits_reserved);
  g_test_add_func ("/planner/memory-reserved/profile-json", test_profile_json);
  return g_test_run ();
}
