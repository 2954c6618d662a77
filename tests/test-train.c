#define G_LOG_DOMAIN "test-train"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-plan-json.h"
#include "planner-plan.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

/* The training model of whole plans against hand-computed values.
 *
 * Activation memory per transformer layer, from Korthikanti et al. 2022, "Reducing Activation
 * Recomputation in Large Transformer Models", section 4 (16-bit activations, dropout, s
 * sequence, b batch, h hidden, a heads, t tensor-parallel size):
 *   no parallelism                      s b h (34 + 5 a s / h)          (eq. 1)
 *   tensor parallel                     s b h (10 + 24/t + 5 a s / (h t)) (eq. 2)
 *   tensor + sequence parallel          s b h / t (34 + 5 a s / h)      (eq. 4)
 *   + selective recompute               34 s b h / t                    (eq. 6)
 *   full recompute                      2 s b h per layer (sect. 5)
 * Flash attention keeps no s x s scores: 34 s b h plus its fp32 logsumexp, 4 b a s.
 * The layer's share is the difference between a 2-layer and a 1-layer model, so the
 * embedding, the final norm and the logits cancel. */

#define S 128
#define B 2
#define H 64
#define A 4

static const char *const gpt2_config
    = "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 512,"
      " \"n_positions\": 128, \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4,"
      " \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-05}";

/* The tiny GPT-2 at batch B, sequence S, bf16, with @layers layers (0: the config's 2). */
static PlannerGraph *
tiny_gpt2 (gint64 layers)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = B;
  options.seq = S;
  options.layers = layers;
  options.dtype_set = TRUE;
  options.dtype = PLANNER_DTYPE_BF16;
  PlannerGraph *graph = planner_hf_import_json (gpt2_config, &options, &error);
  g_assert_no_error (error);
  return graph;
}

static PlannerPlan *
plan_with (gint64 layers, const char *mesh, const char *policy, PlannerRecompute recompute,
           PlannerAttentionKernel attention, gboolean no_dropout)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = tiny_gpt2 (layers);
  PlannerPlan *plan = test_util_plan (graph, mesh, NULL, policy, NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.recompute = recompute;
  c.attention = attention;
  c.no_dropout = no_dropout;
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  return plan;
}

static gint64
layer_activations (const char *mesh, const char *policy, PlannerRecompute recompute,
                   PlannerAttentionKernel attention, gboolean no_dropout)
{
  g_autoptr (PlannerPlan) one = plan_with (1, mesh, policy, recompute, attention, no_dropout);
  g_autoptr (PlannerPlan) two = plan_with (2, mesh, policy, recompute, attention, no_dropout);
  return (gint64)planner_plan_get_totals (two)->memory.activations
         - (gint64)planner_plan_get_totals (one)->memory.activations;
}

typedef struct
{
  const char *path;
  const char *mesh;
  const char *policy;
  PlannerRecompute recompute;
  PlannerAttentionKernel attention;
  gint64 bytes;
  gboolean no_dropout;
} ActivationCase;

/* s b h = 128 * 2 * 64 = 16384; a s^2 b = 4 * 16384 * 2 = 131072; t = 2. */
static const ActivationCase activation_cases[] = {
  /* 34 * 16384 + 5 * 131072 = 557056 + 655360 */
  { "/planner/train/activations/unfused", "dp=1", NULL, PLANNER_RECOMPUTE_NONE,
    PLANNER_ATTENTION_UNFUSED, 1212416 },
  /* 10 * 16384 + 24 * 16384 / 2 + 5 * 131072 / 2 = 163840 + 196608 + 327680 */
  { "/planner/train/activations/tensor-parallel", "mp=2", "megatron", PLANNER_RECOMPUTE_NONE,
    PLANNER_ATTENTION_UNFUSED, 688128 },
  /* 34 * 16384 / 2 + 5 * 131072 / 2 = 278528 + 327680 */
  { "/planner/train/activations/sequence-parallel", "mp=2", "megatron-sp", PLANNER_RECOMPUTE_NONE,
    PLANNER_ATTENTION_UNFUSED, 606208 },
  /* 34 * 16384 / 2 */
  { "/planner/train/activations/selective", "mp=2", "megatron-sp", PLANNER_RECOMPUTE_SELECTIVE,
    PLANNER_ATTENTION_UNFUSED, 278528 },
  /* 34 * 16384 + 4 * 2 * 4 * 128 = 557056 + 4096 */
  { "/planner/train/activations/flash", "dp=1", NULL, PLANNER_RECOMPUTE_NONE,
    PLANNER_ATTENTION_FLASH, 561152 },
  /* 2 * 16384 */
  { "/planner/train/activations/full", "dp=1", NULL, PLANNER_RECOMPUTE_FULL,
    PLANNER_ATTENTION_UNFUSED, 32768 },
  /* 2 * 16384 / 2: the layer input is stored split on the sequence */
  { "/planner/train/activations/full-sp", "mp=2", "megatron-sp", PLANNER_RECOMPUTE_FULL,
    PLANNER_ATTENTION_FLASH, 16384 },
  /* Dropout with p = 0 keeps no masks: 34 - 2 = 32 s b h, plus the logsumexp:
   * 32 * 16384 + 4096 */
  { "/planner/train/activations/no-dropout", "dp=1", NULL, PLANNER_RECOMPUTE_NONE,
    PLANNER_ATTENTION_FLASH, 528384, TRUE },
  /* Unfused without dropout: 32 s b h + 2 a s^2 b (the softmax output only):
   * 524288 + 262144 */
  { "/planner/train/activations/unfused-no-dropout", "dp=1", NULL, PLANNER_RECOMPUTE_NONE,
    PLANNER_ATTENTION_UNFUSED, 786432, TRUE },
};

static void
test_activations (gconstpointer data)
{
  const ActivationCase *c = data;
  g_assert_cmpint (
      layer_activations (c->mesh, c->policy, c->recompute, c->attention, c->no_dropout), ==,
      c->bytes);
}

static void
assert_close (double got, double want, double rel)
{
  if (fabs (got - want) > rel * fabs (want))
    g_error ("got %.12g, want %.12g (relative tolerance %g)", got, want, rel);
}

/* A profile with round figures: f32 peak 100 TFLOP/s, 1000 GB/s, GEMMs at 50% of peak,
 * memory-bound kernels at 50% of the bandwidth, 10 us a kernel. */
static PlannerHardware *
round_profile (void)
{
  PlannerHardware *hw = planner_hardware_new ("round");
  PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
  planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_F32, 100);
  planner_hardware_set_memory_bandwidth_GBps (hw, 1000);
  planner_hardware_set_memory_GB (hw, 80);
  e.n_gemm = 1;
  e.gemm_size[0] = 1024;
  e.gemm_efficiency[0] = 0.5;
  e.memory_bound = 0.5;
  e.kernel_launch_us = 10;
  planner_hardware_set_efficiency (hw, &e);
  return hw;
}

static PlannerPlan *
mlp_plan (guint micro_batch, GError **error)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("mlp", NULL);
  g_autoptr (PlannerHardware) hw = round_profile ();
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=1", hw, NULL, NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.micro_batch = micro_batch;
  planner_plan_set_constants (plan, &c);
  if (!planner_plan_finish (plan, FALSE, error))
    return NULL;
  return g_steal_pointer (&plan);
}

/* The MLP (x [8, 1024] f32 -> fc1 1024x4096 -> ReLU -> fc2 4096x1024) on the round profile,
 * one device, by hand:
 *   fc1  2*8*1024*4096 = 67108864 FLOP: 1.342 us at 50 TFLOP/s; its bytes x 32768 + W
 *        16777216 + bias 16384 + out 131072 = 16957440 at 500 GB/s: 33.91488 us (slower)
 *   act  in + out 262144 bytes: 0.524288 us
 *   fc2  act 131072 + W 16777216 + bias 4096 + out 32768 = 16945152 bytes: 33.890304 us
 *   forward 68.329472 us, backward 2x = 136.658944 us
 *   overhead 8 kernels (3 + 2 + 3) x 10 us = 80 us, plus Adam's step over 8393728 f32
 *   parameters x 28 bytes = 235024384 bytes at 500 GB/s = 470.048768 us: 550.048768 us
 *   step 755.037184 us
 * Memory: 8393728 x (4 + 4 + 8) bytes; activations: fc1's output (kept by ReLU) 131072, the
 * ReLU output (kept by fc2) 131072, the logits (kept for the loss) 32768 = 294912. */
static void
test_mlp_step (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = mlp_plan (0, &error);
  g_assert_no_error (error);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);

  assert_close (t->breakdown.forward, 68.329472e-6, 1e-6);
  assert_close (t->breakdown.backward, 136.658944e-6, 1e-6);
  g_assert_cmpfloat (t->breakdown.recompute, ==, 0);
  g_assert_cmpfloat (t->breakdown.tp_comm_exposed, ==, 0);
  g_assert_cmpfloat (t->breakdown.dp_sync_exposed, ==, 0);
  assert_close (t->breakdown.overhead, 550.048768e-6, 1e-6);
  assert_close (t->step_time_s, 755.037184e-6, 1e-6);
  g_assert_cmpuint (t->memory.parameters, ==, 33574912);
  g_assert_cmpuint (t->memory.gradients, ==, 33574912);
  g_assert_cmpuint (t->memory.optimizer, ==, 67149824);
  g_assert_cmpuint (t->memory.activations, ==, 294912);
  g_assert_cmpuint (t->memory.total, ==, 134594560);
  g_assert_cmpuint (t->memory_per_device_bytes, ==, t->memory.total);
  g_assert_cmpuint (t->micro_batches, ==, 1);
}

/* Micro-batches of 4 of the local 8: two passes, each keeping half the activations
 * (147456) and reading the weights again:
 *   fc1  16384 + 16777216 + 16384 + 65536 = 16875520 bytes: 33.75104 us, x2
 *   act  131072 bytes: 0.262144 us, x2
 *   fc2  65536 + 16777216 + 4096 + 16384 = 16863232 bytes: 33.726464 us, x2
 *   forward 135.479296 us.  A micro-batch of 3 does not divide 8: refused. */
static void
test_micro_batch (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = mlp_plan (4, &error);
  g_assert_no_error (error);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  g_assert_cmpuint (t->micro_batches, ==, 2);
  g_assert_cmpuint (t->memory.activations, ==, 147456);
  assert_close (t->breakdown.forward, 135.479296e-6, 1e-6);

  g_autoptr (PlannerPlan) bad = mlp_plan (3, &error);
  g_assert_null (bad);
  test_util_assert_error (error, PLANNER_ERROR_NOT_DIVISIBLE, "micro-batch 3 does not divide");
}

/* The data-parallel sync by ZeRO stage, on the MLP over dp=2 of the round profile with a
 * 100 GB/s, zero-latency link and no overlap (so every byte shows), by hand: the parameters
 * are 33574912 f32 bytes in one group, buckets of 25 MiB: 26214400 + 7360512 bytes.
 *   AllReduce per bucket  2 (p-1)/p n / B = n / 1e11: 262.144 + 73.60512 = 335.74912 us
 *   ReduceScatter or AllGather  (p-1)/p n / B: 131.072 + 36.80256 = 167.87456 us
 *   stage 0 and 1: one AllReduce per step                      335.74912 us
 *   stage 2: ReduceScatter per micro-batch + AllGather per step 335.74912 us (one micro-batch)
 *   stage 3: forward AllGather + backward AllGather and ReduceScatter, per micro-batch:
 *            3 x 167.87456 = 503.62368 us (the MLP's ops are in no layer: one ZeRO-3 unit of
 *            all 33574912 bytes, the same bytes as the two buckets); with full recompute the
 *            same (the unit's backward gather serves its recomputed forward too, as FSDP
 *            checkpoints inside the unit)
 *   stage 3 with two micro-batches: 2 x 503.62368 = 1007.24736 us; stage 0: 335.74912 still */
static double
zero_sync (guint zero, guint micro_batch, PlannerRecompute recompute)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = test_util_model ("mlp", NULL);
  g_autoptr (PlannerHardware) hw = round_profile ();
  PlannerLink link = *planner_hardware_get_link (hw, PLANNER_LINK_INTRA);
  link.bandwidth_GBps = 100;
  link.latency_us = 0;
  planner_hardware_set_link (hw, PLANNER_LINK_INTRA, &link);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=2", hw, NULL, NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.zero = zero;
  c.micro_batch = micro_batch;
  c.recompute = recompute;
  c.dp_overlap = FALSE;
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  g_assert_cmpfloat (t->breakdown.dp_sync_hidden, ==, 0);
  g_assert_cmpfloat (t->grad_sync_time_s, ==, t->breakdown.dp_sync_exposed);
  return t->breakdown.dp_sync_exposed;
}

static void
test_zero_sync (void)
{
  assert_close (zero_sync (0, 0, PLANNER_RECOMPUTE_NONE), 335.74912e-6, 1e-6);
  assert_close (zero_sync (1, 0, PLANNER_RECOMPUTE_NONE), 335.74912e-6, 1e-6);
  assert_close (zero_sync (2, 0, PLANNER_RECOMPUTE_NONE), 335.74912e-6, 1e-6);
  assert_close (zero_sync (3, 0, PLANNER_RECOMPUTE_NONE), 503.62368e-6, 1e-6);
  assert_close (zero_sync (3, 0, PLANNER_RECOMPUTE_FULL), 503.62368e-6, 1e-6);
  assert_close (zero_sync (3, 2, PLANNER_RECOMPUTE_NONE), 1007.24736e-6, 1e-6);
  assert_close (zero_sync (0, 2, PLANNER_RECOMPUTE_NONE), 335.74912e-6, 1e-6);
  /* Stage 2 with two micro-batches: 2 x 167.87456 + 167.87456 */
  assert_close (zero_sync (2, 2, PLANNER_RECOMPUTE_NONE), 503.62368e-6, 1e-6);
}

/* LLaMA-2-7B on one H100 with Adam: 6738415616 parameters x 16 bytes = 107.8 GB of model
 * states alone, over the 80 GB: the plan does not fit (the old model counted 8 bytes a
 * 16-bit parameter, 53.9 GB, and showed it fitting). ZeRO-3 over dp=8 brings the states to
 * 16/8 bytes a parameter. */
static void
test_llama_does_not_fit (void)
{
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("llama", "dp=1", NULL, NULL);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  guint64 states = t->memory.parameters + t->memory.gradients + t->memory.optimizer;
  g_assert_cmpuint (states, ==, G_GUINT64_CONSTANT (6738415616) * 16);
  g_assert_cmpuint (t->memory.total, >,
                    planner_hardware_memory_bytes (planner_plan_get_hardware (plan)));

  g_autoptr (PlannerPlan) sharded = test_util_model_plan ("llama", "dp=8", NULL, NULL);
  PlannerCostConstants c = *planner_plan_get_constants (sharded);
  c.zero = 3;
  planner_plan_set_constants (sharded, &c);
  g_autoptr (GError) error = NULL;
  g_assert_true (planner_plan_finish (sharded, FALSE, &error));
  t = planner_plan_get_totals (sharded);
  states = t->memory.parameters + t->memory.gradients + t->memory.optimizer;
  g_assert_cmpuint (states, ==, G_GUINT64_CONSTANT (6738415616) * 2);
}

/* A plan file written before the training model (no training options in "constants", no
 * "memory" or "step_breakdown_s" in "totals") still reads, and gets the figures recomputed
 * from its layouts with the default options; a new one reads back equal. */
static void
test_old_plan_file (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autofree char *text = planner_plan_to_json (plan);
  g_autoptr (PlannerPlan) again = planner_plan_from_json (text, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, again));

  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root = test_util_parse_object (parser, text);
  JsonObject *constants = json_object_get_object_member (root, "constants");
  const char *added[]
      = { "optimizer",     "zero",       "recompute",  "attention",   "micro_batch",
          "dp_bucket_MiB", "dp_overlap", "no_dropout", "grad_reduce", "backward_prefetch" };
  for (guint i = 0; i < G_N_ELEMENTS (added); i++)
    json_object_remove_member (constants, added[i]);
  JsonObject *totals = json_object_get_object_member (root, "totals");
  const char *figures[] = { "memory", "step_breakdown_s", "micro_batches", "local_batch" };
  for (guint i = 0; i < G_N_ELEMENTS (figures); i++)
    json_object_remove_member (totals, figures[i]);
  /* ... nor in its summary. */
  JsonObject *summary = json_object_get_object_member (root, "summary");
  const char *summarized[]
      = { "memory", "step_breakdown_us", "micro_batches", "local_batch", "fits" };
  for (guint i = 0; i < G_N_ELEMENTS (summarized); i++)
    json_object_remove_member (summary, summarized[i]);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  json_generator_set_root (gen, json_parser_get_root (parser));
  g_autofree char *old = json_generator_to_data (gen, NULL);
  g_assert_null (strstr (old, "step_breakdown_s"));

  g_autoptr (PlannerPlan) loaded = planner_plan_from_json (old, &error);
  g_assert_no_error (error);
  const PlannerPlanTotals *a = planner_plan_get_totals (plan);
  const PlannerPlanTotals *b = planner_plan_get_totals (loaded);
  g_assert_cmpmem (&a->memory, sizeof a->memory, &b->memory, sizeof b->memory);
  g_assert_cmpuint (b->memory.total, >, 0);
  g_assert_cmpfloat (b->breakdown.forward, ==, a->breakdown.forward);
  g_assert_cmpuint (planner_plan_get_constants (loaded)->zero, ==, 0);
  g_assert_cmpint (planner_plan_get_constants (loaded)->grad_reduce, ==, PLANNER_GRAD_REDUCE_PARAM);
  g_assert_cmpint (planner_plan_get_constants (loaded)->backward_prefetch, ==,
                   PLANNER_PREFETCH_PRE);

  /* The options added with FSDP's behaviours and flash1 are written and read back. */
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.grad_reduce = PLANNER_GRAD_REDUCE_F32;
  c.backward_prefetch = PLANNER_PREFETCH_POST;
  c.attention = PLANNER_ATTENTION_FLASH1;
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_autofree char *fsdp = planner_plan_to_json (plan);
  g_assert_nonnull (strstr (fsdp, "\"backward_prefetch\": \"post\""));
  g_autoptr (PlannerPlan) fsdp_back = planner_plan_from_json (fsdp, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, fsdp_back));
}

/* Selective recompute redoes the unfused attention core, by hand, on the 2-layer tiny GPT-2
 * (b 2, a 4, s 128, head 16, bf16) on the round profile with a bf16 peak of 100 TFLOP/s:
 *   per layer, the two batched GEMMs: 2 x (2*4*128*128) x (16 + 16) = 8388608 FLOP at the
 *   table's 50% (per-head size (128*128*16)^(1/3) = 64): 0.16777216 us;
 *   the 131072 scores through the fused softmax (read + write, 2 bytes each) and dropout
 *   (read + write + 1-byte mask): 131072 x 9 = 1179648 bytes at 500 GB/s: 2.359296 us;
 *   2 layers: 2 x 2.52706816 = 5.05413632 us. Flash attention has nothing to redo. */
static void
test_selective_recompute (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = tiny_gpt2 (2);
  g_autoptr (PlannerHardware) hw = round_profile ();
  planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_BF16, 100);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=1", hw, NULL, NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.recompute = PLANNER_RECOMPUTE_SELECTIVE;
  c.attention = PLANNER_ATTENTION_UNFUSED;
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  assert_close (planner_plan_get_totals (plan)->breakdown.recompute, 5.05413632e-6, 1e-6);

  c.attention = PLANNER_ATTENTION_FLASH;
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_cmpfloat (planner_plan_get_totals (plan)->breakdown.recompute, ==, 0);
}

/* The tiny GPT-2 (2 layers, bf16) over dp=2 with ZeRO @zero, on a profile whose compute takes
 * no time (1e9 TFLOP/s, 1e9 GB/s, no launches) and whose link has @bandwidth_GBps and
 * @latency_us per step, so that dp_sync_exposed is the sync alone. Its 141056 parameters:
 * wte 512 x 64 = 32768 and ln_f 128 outside the layers, wpe 128 x 64 = 8192 (its users run
 * replicated on dp: not in the sync), and per layer ln_1 128 + c_attn 64 x 192 + 192 + c_proj
 * 64 x 64 + 64 + ln_2 128 + c_fc 64 x 256 + 256 + c_proj 256 x 64 + 64 = 49984. */
static PlannerPlan *
tiny_dp_plan (guint zero, double bandwidth_GBps, double latency_us, PlannerGradReduce reduce,
              PlannerBackwardPrefetch prefetch, gboolean overlap)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = tiny_gpt2 (0);
  g_autoptr (PlannerHardware) hw = planner_hardware_new ("instant");
  for (PlannerDType d = PLANNER_DTYPE_F32; d <= PLANNER_DTYPE_I64; d++)
    planner_hardware_set_peak_tflops (hw, d, 1e9);
  planner_hardware_set_memory_bandwidth_GBps (hw, 1e9);
  planner_hardware_set_memory_GB (hw, 80);
  PlannerLink link = { "test", bandwidth_GBps, latency_us };
  planner_hardware_set_link (hw, PLANNER_LINK_INTRA, &link);
  PlannerPlan *plan = test_util_plan (graph, "dp=2", hw, NULL, NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.zero = zero;
  c.grad_reduce = reduce;
  c.backward_prefetch = prefetch;
  c.dp_overlap = overlap;
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  return plan;
}

/* The gradient sync of the tiny GPT-2 by hand: dp_sync_exposed for one configuration. */
typedef struct
{
  const char *path;
  guint zero;
  double bandwidth_GBps, latency_us;
  PlannerGradReduce reduce;
  PlannerBackwardPrefetch prefetch;
  gboolean overlap;
  double exposed_s;
} SyncCase;

static const SyncCase sync_cases[] = {
  /* ZeRO-3 syncs per FSDP unit: wte + ln_f (outside the layers) and each layer, 3 units, each
   * one AllGather forward, one AllGather and one ReduceScatter backward per micro-batch; on a
   * link of 10 us per step (p = 2: one step) and no bandwidth cost that is 9 x 10 = 90 us. (25
   * MiB buckets would hold all 265728 bytes in one: 30 us.) */
  { "/planner/train/sync/zero3-units", 3, 1e9, 10, PLANNER_GRAD_REDUCE_PARAM, PLANNER_PREFETCH_PRE,
    FALSE, 90e-6 },
  /* Gradients reduced in fp32 move 4 bytes a parameter, parameters gathered 2. ZeRO-2 on 1
   * GB/s, no latency, no overlap: a ReduceScatter per micro-batch and an AllGather per step of
   * the 132864 synced parameters, (p-1)/p = 1/2 of each buffer:
   *   bf16 reduce: (265728 + 265728) / 2 / 1e9 = 265.728 us
   *   fp32 reduce: (531456 + 265728) / 2 / 1e9 = 398.592 us */
  { "/planner/train/sync/grad-reduce-param", 2, 1, 0, PLANNER_GRAD_REDUCE_PARAM,
    PLANNER_PREFETCH_PRE, FALSE, 265.728e-6 },
  { "/planner/train/sync/grad-reduce-f32", 2, 1, 0, PLANNER_GRAD_REDUCE_F32, PLANNER_PREFETCH_PRE,
    FALSE, 398.592e-6 },
  /* FSDP's BACKWARD_POST, ZeRO-3, 1 GB/s, no latency, compute taking no time. Units in forward
   * order: wte + ln_f 32896 parameters (65792 bytes), layers 49984 (99968 bytes); a gather or
   * a ReduceScatter moves half: 32.896 and 49.984 us. The only other time is the AllReduce of
   * the position embedding's output gradient (its users split dp, it does not), 16384 bytes:
   * 16.384 us, half of it counted in each pass (8.192 us).
   *   forward: gathers done at 32.896, 82.88, 132.864 us, each followed by a third of the
   *            8.192 us pass: it ends at 135.594667, 127.402667 us after the pass would
   *   backward, post: layer 1's gather 49.984; layer 0's beside layer 1's ReduceScatter
   *            49.984 + 49.984; the first unit's beside layer 0's 32.896 + 32.896; its own
   *            ReduceScatter after the pass 32.896: 248.64 us
   *   376.042667 us. BACKWARD_PRE: gather + ReduceScatter per unit (65.792, 99.968, 99.968
   *   us) ready at 2.730667, 5.461333, 8.192 us, one after another: done at 268.458667,
   *   260.266667 us past the pass; 387.669333 us. */
  { "/planner/train/sync/backward-prefetch-post", 3, 1, 0, PLANNER_GRAD_REDUCE_PARAM,
    PLANNER_PREFETCH_POST, TRUE, 376.042667e-6 },
  { "/planner/train/sync/backward-prefetch-pre", 3, 1, 0, PLANNER_GRAD_REDUCE_PARAM,
    PLANNER_PREFETCH_PRE, TRUE, 387.669333e-6 },
};

static void
test_sync (gconstpointer data)
{
  const SyncCase *c = data;
  g_autoptr (PlannerPlan) plan = tiny_dp_plan (c->zero, c->bandwidth_GBps, c->latency_us, c->reduce,
                                               c->prefetch, c->overlap);
  assert_close (planner_plan_get_totals (plan)->breakdown.dp_sync_exposed, c->exposed_s, 1e-6);
}

/* ZeRO shards every parameter over the data-parallel axis, the position table too (its users
 * run replicated on dp): ZeRO-1 over dp=2 keeps 141056 x 12 / 2 = 846336 optimizer bytes (the
 * fp32 master, m and v), the weights and gradients whole, 141056 x 2 = 282112 each. */
static void
test_zero_shards_every_parameter (void)
{
  g_autoptr (PlannerPlan) plan
      = tiny_dp_plan (1, 1, 0, PLANNER_GRAD_REDUCE_PARAM, PLANNER_PREFETCH_PRE, TRUE);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->optimizer, ==, 846336);
  g_assert_cmpuint (m->parameters, ==, 282112);
  g_assert_cmpuint (m->gradients, ==, 282112);
}

/* The slowdown of compute under an overlapped sync, by hand, on the MLP over dp=2 of the
 * round profile with a 100 GB/s link and no latency: two AllReduce buckets (26214400 and
 * 7360512 bytes: 262.144 and 73.60512 us) behind a backward pass of the local batch of 4,
 * 135.479296 us (test_micro_batch's forward of 4, twice): bucket 1 ready at 67.739648 us ends
 * at 329.883648, bucket 2 at 403.488768: 268.009472 us exposed, 67.739648 hidden. At an
 * overlap_slowdown of 0.5 the hidden part costs half its time: 268.009472 + 33.869824 =
 * 301.879296 us. */
static void
test_overlap_slowdown (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = test_util_model ("mlp", NULL);
  g_autoptr (PlannerHardware) hw = round_profile ();
  PlannerLink link = { "test", 100, 0 };
  planner_hardware_set_link (hw, PLANNER_LINK_INTRA, &link);
  PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
  e.overlap_slowdown = 0.5;
  planner_hardware_set_efficiency (hw, &e);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=2", hw, NULL, NULL);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  assert_close (t->breakdown.backward, 135.479296e-6, 1e-6);
  assert_close (t->breakdown.dp_sync_hidden, 67.739648e-6, 1e-6);
  assert_close (t->breakdown.dp_sync_exposed, 301.879296e-6, 1e-6);
  g_assert_no_error (error);
}

/* A fused attention kernel at its curve's throughput, by hand, on the tiny GPT-2 (b 2, a 4,
 * s 128, head 16) on the round profile with a bf16 peak of 100 TFLOP/s: per layer the causal
 * kernel does half of 4 b a s^2 d = 8388608 FLOP forward, 4194304, and 2.5x that backward.
 * Without a curve flash1 runs at attention_flash's fractions (1 here): 0.04194304 us
 * forward; with the curve [[128, 0.25]]: 0.16777216 us. Two layers: forward +0.25165824 us,
 * backward +0.6291456 us. */
static void
test_attention_curve (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = tiny_gpt2 (0);
  double forward[2], backward[2];
  for (guint with_curve = 0; with_curve < 2; with_curve++)
    {
      g_autoptr (PlannerHardware) hw = round_profile ();
      planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_BF16, 100);
      if (with_curve)
        {
          PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
          e.attention[0]
              = (PlannerAttentionCurve){ PLANNER_ATTENTION_FLASH1, TRUE, 16, 1, { 128 }, { 0.25 } };
          e.n_attention = 1;
          planner_hardware_set_efficiency (hw, &e);
        }
      g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=1", hw, NULL, NULL);
      PlannerCostConstants c = *planner_plan_get_constants (plan);
      c.attention = PLANNER_ATTENTION_FLASH1;
      planner_plan_set_constants (plan, &c);
      g_assert_true (planner_plan_finish (plan, FALSE, &error));
      forward[with_curve] = planner_plan_get_totals (plan)->breakdown.forward;
      backward[with_curve] = planner_plan_get_totals (plan)->breakdown.backward;
    }
  assert_close (forward[1] - forward[0], 0.25165824e-6, 1e-6);
  assert_close (backward[1] - backward[0], 0.6291456e-6, 1e-6);
}

/* The ZeRO paper's Figure 1 (Rajbhandari et al. 2020): a 7.5B model with mixed-precision Adam
 * needs (2 + 2 + 12) x 7.5e9 = 120 GB of model states a device without ZeRO, 31.4 GB with the
 * optimizer states sharded over 64 devices. Megatron's 7.5B (hidden 4096, 36 layers,
 * vocabulary 51200, 2048 positions, 7467663360 parameters) on 80 GB: not fitting without ZeRO,
 * fitting with ZeRO-1 over dp=64, as the summary says. */
static void
test_zero_paper_fit (void)
{
  static const char *const config
      = "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], "
        "\"vocab_size\": 51200, \"n_positions\": 2048, \"n_embd\": 4096, \"n_layer\": 36, "
        "\"n_head\": 32, \"activation_function\": \"gelu\"}";
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = 64;
  options.seq = 2048;
  options.dtype_set = TRUE;
  options.dtype = PLANNER_DTYPE_F16;
  g_autoptr (PlannerGraph) graph = planner_hf_import_json (config, &options, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerHardware) hw = test_util_hardware ("a100-sxm");
  static const struct
  {
    guint zero;
    double published_GB;
    gboolean fits;
  } cases[] = { { 0, 120, FALSE }, { 1, 31.4, TRUE } };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=64", hw, NULL, NULL);
      PlannerCostConstants c = *planner_plan_get_constants (plan);
      c.zero = cases[i].zero;
      planner_plan_set_constants (plan, &c);
      g_assert_true (planner_plan_finish (plan, FALSE, &error));
      const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
      double states = (double)(m->parameters + m->gradients + m->optimizer);
      /* Within 1% of the published figure: the configuration has 7.468B parameters, not 7.5. */
      assert_close (states, cases[i].published_GB * 1e9, 0.01);
      g_autoptr (JsonNode) summary = planner_plan_summary_to_json (plan);
      g_assert_cmpint (json_object_get_boolean_member (json_node_get_object (summary), "fits"), ==,
                       cases[i].fits);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (activation_cases); i++)
    g_test_add_data_func (activation_cases[i].path, &activation_cases[i], test_activations);
  g_test_add_func ("/planner/train/mlp-step", test_mlp_step);
  g_test_add_func ("/planner/train/micro-batch", test_micro_batch);
  g_test_add_func ("/planner/train/zero-sync", test_zero_sync);
  g_test_add_func ("/planner/train/selective-recompute", test_selective_recompute);
  g_test_add_func ("/planner/train/llama-does-not-fit", test_llama_does_not_fit);
  g_test_add_func ("/planner/train/old-plan-file", test_old_plan_file);
  for (guint i = 0; i < G_N_ELEMENTS (sync_cases); i++)
    g_test_add_data_func (sync_cases[i].path, &sync_cases[i], test_sync);
  g_test_add_func ("/planner/train/zero-shards-every-parameter", test_zero_shards_every_parameter);
  g_test_add_func ("/planner/train/overlap-slowdown", test_overlap_slowdown);
  g_test_add_func ("/planner/train/attention-curve", test_attention_curve);
  g_test_add_func ("/planner/train/zero-paper-fit", test_zero_paper_fit);
  return g_test_run ();
}
