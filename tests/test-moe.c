#define G_LOG_DOMAIN "test-moe"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-moe.h"
#include "executor-trial.h"
#include "planner-cost.h"
#include "planner-error.h"
#include "planner-moe.h"
#include "planner-plan-json.h"
#include "planner-policy.h"
#include "planner-redistribute.h"
#include "test-util.h"

/* Mixture of experts (issue 16): mixtral and qwen2_moe from their hub configs (the zoo's,
 * data/models/), the megatron-ep policy's AllToAlls, the cost model's capacity and load
 * balance, and the executor's sharded run against its unsharded one. test-hf-reference.py
 * checks the same graphs against transformers itself. */

/* The tiny configs are tests/data/models/ ones; the hub configs are the zoo's (data/models/,
 * the zoo's mixtral and qwen2-moe). */
static char *
data_model (const char *file)
{
  char *path = g_test_build_filename (G_TEST_DIST, "data", "models", file, NULL);
  if (g_file_test (path, G_FILE_TEST_EXISTS))
    return path;
  g_free (path);
  return g_test_build_filename (G_TEST_DIST, "..", "data", "models", file, NULL);
}

static PlannerGraph *
load (const char *file, gint64 layers, gint64 batch, gint64 seq)
{
  g_autofree char *path = data_model (file);
  PlannerModelOptions options;

  planner_model_options_init (&options);
  options.layers = layers;
  options.batch = batch;
  options.seq = seq;
  return test_util_model (path, &options);
}

static guint64
n_params (PlannerGraph *g)
{
  guint64 n = 0;
  for (guint t = 0; t < planner_graph_get_n_tensors (g); t++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (g, t);
      if (tensor->kind == PLANNER_TENSOR_PARAMETER)
        {
          guint64 e = 1;
          for (guint d = 0; d < tensor->rank; d++)
            e *= (guint64)tensor->shape[d];
          n += e;
        }
    }
  return n;
}

static const PlannerTensor *
tensor_named (PlannerGraph *g, const char *name)
{
  for (guint t = 0; t < planner_graph_get_n_tensors (g); t++)
    if (g_str_equal (planner_graph_get_tensor (g, t)->name, name))
      return planner_graph_get_tensor (g, t);
  g_error ("no tensor %s", name);
  return NULL;
}

static void
assert_shape (PlannerGraph *g, const char *name, guint rank, const gint64 *shape)
{
  const PlannerTensor *t = tensor_named (g, name);
  g_assert_cmpuint (t->rank, ==, rank);
  for (guint d = 0; d < rank; d++)
    g_assert_cmpint (t->shape[d], ==, shape[d]);
}

#define SHAPE(...)                                                                                 \
  G_N_ELEMENTS (((const gint64[]){ __VA_ARGS__ })), ((const gint64[]){ __VA_ARGS__ })

/* The counts are sum (p.numel () for p in model.parameters ()) of
 * AutoModelForCausalLM.from_config on the meta device, transformers 5.24 (the framework
 * venv), for the same config files. */
static void
test_mixtral_params (void)
{
  g_autoptr (PlannerGraph) g = load ("mixtral-8x7b-v0.1.json", 0, 0, 0);

  g_assert_cmpuint (n_params (g), ==, G_GUINT64_CONSTANT (46702792704));
  g_assert_cmpstr (planner_graph_get_name (g), ==, "MixtralForCausalLM");
  /* transformers 5's fused 3-D experts; gate_up viewed as [E, 2, I, H]. */
  assert_shape (g, "model.layers.31.mlp.experts.gate_up_proj", SHAPE (8, 2, 14336, 4096));
  assert_shape (g, "model.layers.31.mlp.experts.down_proj", SHAPE (8, 4096, 14336));
  assert_shape (g, "model.layers.0.mlp.gate.weight", SHAPE (8, 4096));
  /* Batch 8 x 1024 tokens, top 2 of 8: 256 tokens an expert at balance, x 1.25 = 320. */
  assert_shape (g, "model.layers.0.mlp.dispatch", SHAPE (8, 8, 320, 4096));
}

static void
test_qwen2_moe_params (void)
{
  g_autoptr (PlannerGraph) g = load ("qwen1.5-moe-a2.7b.json", 0, 0, 0);

  g_assert_cmpuint (n_params (g), ==, G_GUINT64_CONSTANT (14315784192));
  assert_shape (g, "model.layers.0.mlp.shared_expert_gate.weight", SHAPE (1, 2048));
  assert_shape (g, "model.layers.0.mlp.shared_expert.down_proj.weight", SHAPE (2048, 5632));
  assert_shape (g, "model.layers.0.self_attn.q_proj.bias", SHAPE (2048));
  /* top 4 of 60 over 1024 tokens: 68.27 at balance, x 1.25 = 85.33, 86 slots. */
  assert_shape (g, "model.layers.23.mlp.dispatch", SHAPE (8, 60, 86, 2048));
}

/* mlp_only_layers and decoder_sparse_step as Qwen2MoeDecoderLayer reads them; a bad top_k and
 * a bad capacity factor are refused by field. */
static void
test_config_fields (void)
{
  g_autofree char *path = data_model ("qwen1.5-moe-a2.7b.json");
  g_autofree char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  const struct
  {
    const char *from, *to; /* the config's text with @from replaced by @to */
    int code;              /* 0: imports */
    const char *fragment;  /* an error's, or an op the graph must (+) or must not (-) have */
  } cases[] = {
    { "{", "{\"mlp_only_layers\": [1],", 0, "+model.layers.1.mlp.down_proj" },
    { "{", "{\"mlp_only_layers\": [1],", 0, "-model.layers.1.mlp.dispatch" },
    { "{", "{\"mlp_only_layers\": [1],", 0, "+model.layers.0.mlp.dispatch" },
    { "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2", 0,
      "-model.layers.0.mlp.dispatch" },
    { "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2", 0,
      "+model.layers.1.mlp.dispatch" },
    { "\"num_experts_per_tok\": 4", "\"num_experts_per_tok\": 61", PLANNER_ERROR_SHAPE_MISMATCH,
      "num_experts_per_tok 61 exceeds the 60 experts" },
    { "{", "{\"capacity_factor\": -1,", PLANNER_ERROR_MALFORMED_FILE,
      "field \"capacity_factor\" must be a number > 0" },
    { "\"output_router_logits\": false", "\"output_router_logits\": true",
      PLANNER_ERROR_MALFORMED_FILE, "output_router_logits true is not supported" },
    { "{", "{\"mlp_only_layers\": 3,", PLANNER_ERROR_MALFORMED_FILE,
      "field \"mlp_only_layers\" must be a list of layer indices" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_auto (GStrv) parts = g_strsplit (text, cases[i].from, 2);
      g_assert_cmpuint (g_strv_length (parts), ==, 2);
      g_autofree char *json = g_strjoinv (cases[i].to, parts);
      PlannerModelOptions options;
      planner_model_options_init (&options);
      options.layers = 2;
      options.seq = 64;
      g_autoptr (PlannerGraph) g = planner_hf_import_json (json, &options, &error);
      if (cases[i].code != 0)
        {
          g_assert_null (g);
          test_util_assert_error (error, cases[i].code, cases[i].fragment);
          continue;
        }
      g_assert_no_error (error);
      gboolean found = FALSE;
      for (guint o = 0; o < planner_graph_get_n_ops (g); o++)
        found |= g_str_equal (planner_graph_get_op (g, o)->name, cases[i].fragment + 1);
      g_assert_cmpint (found, ==, cases[i].fragment[0] == '+');
    }
}

/* Hand-computed: the capacity and load balance of the cost model. */
static void
test_cost_capacity (void)
{
  PlannerCostMoe m;

  /* Mixtral, 1024 tokens a row: 2 x 1024 / 8 = 256 at balance, 320 slots. */
  planner_cost_moe (8, 2, 1024, 320, &m);
  g_assert_cmpfloat (m.balanced_load, ==, 256.0);
  g_assert_cmpfloat (m.capacity_factor, ==, 1.25);
  g_assert_cmpfloat_with_epsilon (m.padding, 0.2, 1e-12); /* 64 of 320 slots empty */
  g_assert_cmpfloat (planner_cost_moe_dropped (&m, 1.25), ==, 0.0);
  /* 2x: 512 sent, 320 kept: 192 / 512 = 37.5% dropped. */
  g_assert_cmpfloat_with_epsilon (planner_cost_moe_dropped (&m, 2.0), 0.375, 1e-12);
  /* 8x would be 2048, but a token goes to an expert once: at most 1024, 68.75% dropped. */
  g_assert_cmpfloat_with_epsilon (planner_cost_moe_dropped (&m, 8.0), 0.6875, 1e-12);
  /* Dropless (C = S): nothing drops whatever the balance; 3/4 of the slots empty. */
  planner_cost_moe (8, 2, 1024, 1024, &m);
  g_assert_cmpfloat (m.capacity_factor, ==, 4.0);
  g_assert_cmpfloat (planner_cost_moe_dropped (&m, 8.0), ==, 0.0);
  g_assert_cmpfloat_with_epsilon (m.padding, 0.75, 1e-12);
}

/* megatron-ep on dp=2,ep=4 (h100-sxm): per layer one AllToAll over ep into the experts and
 * one back. By hand: the dispatch output is [8, 8, 320, 4096] bf16, [dp+ep,_,_,_]: 1 x 8 x
 * 320 x 4096 x 2 = 20,971,520 bytes a device; an AllToAll over p = 4 sends 3/4 of it,
 * 15,728,640 bytes, in 3 x 2.5 us + 15,728,640 B / 370 GB/s = 50.01 us (NVLink 4). */
static void
test_megatron_ep (void)
{
  g_autoptr (PlannerGraph) g = load ("mixtral-8x7b-v0.1.json", 0, 0, 0);
  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,ep=4", NULL, "megatron-ep", NULL);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  const double per_step = 3 * 2.5e-6 + 15728640.0 / 370e9;

  g_assert_cmpuint (t->n_redistributions, ==, 64);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_TO_ALL], ==, 64);
  g_assert_cmpuint (t->coll_bytes[PLANNER_STEP_ALL_TO_ALL], ==, 64 * G_GUINT64_CONSTANT (15728640));
  g_assert_cmpfloat_with_epsilon (t->coll_time_s[PLANNER_STEP_ALL_TO_ALL], 64 * per_step, 1e-12);
  g_assert_cmpuint (planner_plan_get_n_conflicts (plan), ==, 0);
  for (guint r = 0; r < t->n_redistributions; r++)
    {
      const PlannerRedistribution *rd = planner_plan_get_redistribution (plan, r);
      g_assert_cmpuint (rd->n_steps, ==, 1);
      g_assert_cmpuint (rd->steps[0].kind, ==, PLANNER_STEP_ALL_TO_ALL);
      g_assert_cmpuint (rd->steps[0].axis, ==, 1); /* ep */
    }

  PlannerMoeSummary m;
  g_assert_true (planner_moe_summarize (plan, &m));
  g_assert_cmpuint (m.n_layers, ==, 32);
  g_assert_cmpint (m.cost.capacity, ==, 320);
  g_assert_cmpuint (m.dispatch.n_all_to_all, ==, 32);
  g_assert_cmpuint (m.combine.n_all_to_all, ==, 32);
  g_assert_cmpuint (m.dispatch.bytes, ==, 32 * G_GUINT64_CONSTANT (15728640));
  g_assert_cmpstr (m.dispatch.first, ==, "AllToAll(ep, dim 0->1) 15.0 MiB 50.0 us");
  g_assert_cmpstr (m.combine.first, ==, "AllToAll(ep, dim 1->0) 15.0 MiB 50.0 us");
  planner_moe_summary_clear (&m);
  g_autofree char *text = planner_moe_describe (plan);
  g_assert_nonnull (strstr (text, "capacity factor 1.25 x the 256"));
  g_assert_nonnull (strstr (text, "(2x: 37.5%, 4x: 68.8% of its tokens)"));
}

/* What the CLI prints: the AllToAlls with bytes and time, the capacity and the load balance,
 * and the same under "moe" in --json. */
static void
test_cli (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *path = data_model ("mixtral-8x7b-v0.1.json");
  g_autofree char *out = NULL, *json = NULL;
  const char *const text_args[]
      = { "propagate", path, "--mesh", "dp=2,ep=4", "--policy", "megatron-ep", NULL };
  const char *const json_args[]
      = { "propagate", path, "--mesh", "dp=2,ep=4", "--policy", "megatron-ep", "--json", NULL };

  g_assert_cmpint (test_util_run_cli (text_args, &out, NULL), ==, 0);
  g_assert_nonnull (strstr (out, "Redistributions: 64: 64 AllToAll\n"));
  g_assert_nonnull (strstr (out, "Experts:         32 MoE layers, 8 experts, top 2; capacity 320"));
  g_assert_nonnull (strstr (out, "layer 0: AllToAll(ep, dim 0->1) 15.0 MiB 50.0 us"));
  g_assert_nonnull (strstr (out, "layer 0: AllToAll(ep, dim 1->0) 15.0 MiB 50.0 us"));
  g_assert_nonnull (strstr (out, "20.0% empty at perfect balance"));

  g_assert_cmpint (test_util_run_cli (json_args, &json, NULL), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root = test_util_parse_object (parser, json);
  JsonObject *moe = json_object_get_object_member (root, "moe");
  g_assert_cmpint (json_object_get_int_member (moe, "capacity"), ==, 320);
  g_assert_cmpfloat (json_object_get_double_member (moe, "capacity_factor"), ==, 1.25);
  g_assert_cmpfloat_with_epsilon (json_object_get_double_member (moe, "dropped_at_2x"), 0.375,
                                  1e-12);
  JsonObject *dispatch = json_object_get_object_member (moe, "dispatch");
  g_assert_cmpint (json_object_get_int_member (dispatch, "all_to_all"), ==, 32);
  g_assert_cmpint (json_object_get_int_member (dispatch, "bytes"), ==, 32 * 15728640);
}

/* The experts end on ep, the tokens on dp x ep; with a tp axis the attention is
 * tensor-parallel; without an ep axis the policy is refused by name. */
static void
test_megatron_ep_meshes (void)
{
  g_autoptr (PlannerGraph) g = load ("mixtral-8x7b-v0.1.json", 2, 0, 0);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mp = test_util_mesh ("dp=2,mp=4");
  g_autoptr (GPtrArray) refused = planner_policy_expand ("megatron-ep", g, mp, NULL, &error);

  g_assert_null (refused);
  test_util_assert_error (error, PLANNER_ERROR_UNKNOWN_AXIS,
                          "needs a mesh axis named ep for expert parallelism");

  /* Without tp: the 4 expert-parallel pins and the 4 that keep the norms and the router on
   * the tokens' dp+ep (the rules that matter on ep x mp, tests/test-ep-tp.c), and one note
   * for the tensor-parallel rules. */
  g_autoptr (PlannerMesh) ep = test_util_mesh ("dp=2,ep=4");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_clear_error (&error);
  g_autoptr (GPtrArray) pins = planner_policy_expand ("megatron-ep", g, ep, notes, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (pins->len, ==, 8);
  g_assert_cmpuint (notes->len, ==, 1);
  g_assert_true (g_str_has_prefix (g_ptr_array_index (notes, 0),
                                   "policy megatron-ep: left out the optional tensor-parallel "
                                   "rules of model.embed_tokens, model.layers.*.self_attn.q_proj"));

  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,ep=2,tp=2", NULL, "megatron-ep", NULL);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const struct
  {
    const char *tensor;
    const char *layout;
  } expect[] = {
    { "model.layers.1.mlp.experts.gate_up_proj", "[ep,_,_,_]" },
    { "model.layers.1.mlp.experts.down_proj", "[ep,_,_]" },
    { "model.layers.1.self_attn.q_proj.weight", "[tp,_]" },
    /* as sent to the experts (the pin's out layout) */
    { "model.layers.1.mlp.dispatch", "[dp,ep,_,_]" },
    { "model.layers.1.mlp.experts.gate_up", "[dp,ep,_,_,_]" },
  };
  PlannerGraph *pg = planner_plan_get_graph (plan);
  for (guint i = 0; i < G_N_ELEMENTS (expect); i++)
    for (guint t = 0; t < planner_graph_get_n_tensors (pg); t++)
      if (g_str_equal (planner_graph_get_tensor (pg, t)->name, expect[i].tensor))
        {
          g_autofree char *l
              = planner_layout_to_string (planner_plan_get_tensor_layout (plan, t), mesh);
          g_assert_cmpstr (l, ==, expect[i].layout);
        }
  const PlannerPlanTotals *tot = planner_plan_get_totals (plan);
  /* Two AllToAlls a layer over ep; the tensor-parallel AllReduces over tp. */
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_ALL_TO_ALL], ==, 4);
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_ALL_REDUCE], >, 0);
}

/* megatron and megatron-sp on dp=2,mp=4: every expert tensor-parallel on its intermediate dim
 * (gate_up column-, down row-parallel), qwen2_moe's shared expert as an MLP. */
static void
test_megatron_tp (void)
{
  const struct
  {
    const char *file, *policy, *tensor, *layout;
  } cases[] = {
    { "mixtral-8x7b-v0.1.json", "megatron", "model.layers.3.mlp.experts.gate_up_proj",
      "[_,_,mp,_]" },
    { "mixtral-8x7b-v0.1.json", "megatron", "model.layers.3.mlp.experts.down_proj", "[_,_,mp]" },
    { "mixtral-8x7b-v0.1.json", "megatron-sp", "model.layers.3.mlp.experts.down_proj", "[_,_,mp]" },
    { "qwen1.5-moe-a2.7b.json", "megatron", "model.layers.3.mlp.shared_expert.up_proj.weight",
      "[mp,_]" },
    { "qwen1.5-moe-a2.7b.json", "megatron-sp", "model.layers.3.mlp.experts.gate_up_proj",
      "[_,_,mp,_]" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (PlannerGraph) g = load (cases[i].file, 4, 0, 0);
      g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,mp=4", NULL, cases[i].policy, NULL);
      PlannerGraph *pg = planner_plan_get_graph (plan);
      for (guint t = 0; t < planner_graph_get_n_tensors (pg); t++)
        if (g_str_equal (planner_graph_get_tensor (pg, t)->name, cases[i].tensor))
          {
            g_autofree char *l = planner_layout_to_string (planner_plan_get_tensor_layout (plan, t),
                                                           planner_plan_get_mesh (plan));
            g_assert_cmpstr (l, ==, cases[i].layout);
          }
    }
}

/* An MoE graph and its megatron-ep plan read back equal: the graph JSON (attrs ints and variant
 * of the new op types), the plan JSON (strategies, out layouts, AllToAll steps). */
/* A dropless capacity says so: tiny mixtral's capacity_factor 4 = experts / top_k. */
static void
test_describe_dropless (void)
{
  g_autoptr (PlannerGraph) g = load ("mixtral-tiny.json", 2, 8, 8);
  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,ep=4", NULL, "megatron-ep", NULL);
  g_autofree char *text = planner_moe_describe (plan);

  g_assert_nonnull (strstr (text, "capacity 8 slots per expert and sequence of 8 tokens = "
                                  "capacity factor 4 x the 2 an expert gets"));
  g_assert_nonnull (strstr (text, "dropless (a slot for every token of the sequence)"));
  g_assert_nonnull (strstr (text, "75.0% empty at perfect balance"));
}

static void
test_roundtrip (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = load ("qwen2-moe-tiny.json", 2, 8, 8);
  g_autofree char *graph_text = planner_graph_to_json (g);
  g_autoptr (PlannerGraph) back = planner_graph_from_json (graph_text, &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_equal (g, back));

  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,ep=4", NULL, "megatron-ep", NULL);
  g_autofree char *plan_text = planner_plan_to_json (plan);
  g_autoptr (PlannerPlan) read = planner_plan_from_json (plan_text, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, read));
}

/* The op rules refuse what cannot route, naming the op and the sizes. */
static void
test_rule_errors (void)
{
  PlannerOpRule rule;
  PlannerOpAttrs attrs;
  const gint64 logits[] = { 2, 4, 8 }, x[] = { 2, 4, 16 };
  const guint ranks[] = { 3, 3 };
  g_autoptr (GError) e1 = NULL, e2 = NULL;

  planner_op_attrs_init (&attrs);
  attrs.n_ints = 1;
  attrs.ints[0] = 9;
  g_assert_false (planner_op_rule_build (&rule, PLANNER_OP_MOE_ROUTER, &attrs, 1, ranks,
                                         (const gint64 *const[]){ logits }, 1, "router", &e1));
  test_util_assert_error (e1, PLANNER_ERROR_SHAPE_MISMATCH,
                          "router (MoERouter): ints must be [top_k] with 1 <= top_k <= 8 experts");
  attrs.ints[0] = 5; /* 5 slots for 4 tokens a row */
  g_assert_false (planner_op_rule_build (&rule, PLANNER_OP_MOE_DISPATCH, &attrs, 2, ranks,
                                         (const gint64 *const[]){ x, logits }, 1, "dispatch", &e2));
  test_util_assert_error (e2, PLANNER_ERROR_SHAPE_MISMATCH, "1 <= capacity <= 4 tokens per row");
}

/* Tiny mixtral and qwen2_moe (2 layers, 8 experts; qwen2_moe's layer 1 dense) on dp=2,ep=4
 * under megatron-ep: every op and every AllToAll of the sharded run against the unsharded
 * reference run. */
typedef struct
{
  const char *file;
  guint all_to_all; /* two per sparse layer */
  /* Pins instead of the policy: the experts split inside dispatch and combine (each shard
   * fills only its experts' slots, and combine's sum over them is partial). */
  const char *const *pins;
} ShardedCase;

static void
test_executor_sharded (gconstpointer data)
{
  const ShardedCase *c = data;
  const char *file = c->file;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = load (file, 2, 8, 8);
  g_autoptr (PlannerHardware) hw = test_util_hardware ("cpu-local");
  g_autoptr (PlannerPlan) plan
      = test_util_plan (g, "dp=2,ep=4", hw, c->pins ? NULL : "megatron-ep", c->pins);
  ExecutorTrialOptions options;

  if (c->pins == NULL)
    g_assert_cmpuint (planner_plan_get_totals (plan)->coll_count[PLANNER_STEP_ALL_TO_ALL], ==,
                      c->all_to_all);
  else /* combine's partial sums over ep are reduced */
    g_assert_cmpuint (planner_plan_get_totals (plan)->coll_count[PLANNER_STEP_REDUCE_SCATTER]
                          + planner_plan_get_totals (plan)->coll_count[PLANNER_STEP_ALL_REDUCE],
                      >, 0);
  executor_trial_options_init (&options);
  options.repeat = 1;
  options.warmup = 0;
  options.seed = 7;
  g_autoptr (ExecutorTrialResult) res
      = executor_trial_run_named (plan, "cpu", &options, NULL, &error);
  g_assert_no_error (error);
  g_test_message ("%s: max rel error %.3g, %s", file, res->max_rel_error,
                  res->mismatch ? res->mismatch : "ok");
  g_assert_true (res->passed);
  g_assert_cmpfloat (res->max_rel_error, <=, 1e-5);
}

/* Mixtral's hub layout (one matrix per expert) into the graph's 3-D parameters, element by
 * element: expert e's w1 (gate) then w3 (up) rows in gate_up_proj [E, 2I, H], w2 in
 * down_proj [E, H, I], block_sparse_moe.gate into mlp.gate; nothing left over. */
static void
test_checkpoint_convert (void)
{
  g_autoptr (PlannerGraph) g = load ("mixtral-tiny.json", 1, 8, 8);
  g_autoptr (ExecutorTensors) w = executor_tensors_new ();
  const gint64 E = 8, I = 24, H = 16, ih[] = { I, H }, hi[] = { H, I }, eh[] = { E, H };
  const char *const leaves[] = { "w1", "w3", "w2" };

  for (int e = 0; e < E; e++)
    for (int k = 0; k < 3; k++)
      {
        float *v = g_new (float, I *H);
        for (gint64 j = 0; j < I * H; j++)
          v[j] = (float)(1000 * e + 100 * k) + (float)j / 1000.0f;
        g_autofree char *name = g_strdup_printf (
            "model.layers.0.block_sparse_moe.experts.%d.%s.weight", e, leaves[k]);
        executor_tensors_add (w, name, PLANNER_DTYPE_F32, 2, k == 2 ? hi : ih, v);
      }
  executor_tensors_add (w, "model.layers.0.block_sparse_moe.gate.weight", PLANNER_DTYPE_F32, 2, eh,
                        g_new0 (float, E *H));
  g_assert_cmpuint (executor_moe_checkpoint_convert (w, g), ==, 2);
  g_assert_cmpuint (executor_tensors_get_n (w), ==, 3);
  const ExecutorHostTensor *gu
      = executor_tensors_lookup (w, "model.layers.0.mlp.experts.gate_up_proj");
  const ExecutorHostTensor *dn
      = executor_tensors_lookup (w, "model.layers.0.mlp.experts.down_proj");
  g_assert_nonnull (executor_tensors_lookup (w, "model.layers.0.mlp.gate.weight"));
  g_assert_cmpuint (gu->rank, ==, 3);
  g_assert_cmpint (gu->shape[1], ==, 2 * I);
  const float *pg = gu->data, *pd = dn->data;
  /* [e=3, row I + 5 (up's row 5), col 7] = w3 of expert 3 at (5, 7). */
  g_assert_cmpfloat (pg[(3 * 2 * I + I + 5) * H + 7], ==, 3100.0f + (float)(5 * H + 7) / 1000.0f);
  g_assert_cmpfloat (pg[(3 * 2 * I + 5) * H + 7], ==, 3000.0f + (float)(5 * H + 7) / 1000.0f);
  g_assert_cmpfloat (pd[(7 * H + 2) * I + 9], ==, 7200.0f + (float)(2 * I + 9) / 1000.0f);

  g_autoptr (GError) error = NULL;
  g_assert_true (executor_tensors_check_parameters (w, g, &error) == FALSE);
  /* Only the layer's other parameters are missing, none of the experts'. */
  g_assert_null (strstr (error->message, "experts"));
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/planner/moe/params/mixtral-8x7b", test_mixtral_params);
  g_test_add_func ("/planner/moe/params/qwen1.5-moe-a2.7b", test_qwen2_moe_params);
  g_test_add_func ("/planner/moe/config-fields", test_config_fields);
  g_test_add_func ("/planner/moe/cost-capacity", test_cost_capacity);
  g_test_add_func ("/planner/moe/megatron-ep", test_megatron_ep);
  g_test_add_func ("/planner/moe/megatron-ep-meshes", test_megatron_ep_meshes);
  g_test_add_func ("/planner/moe/rule-errors", test_rule_errors);
  g_test_add_func ("/planner/moe/megatron-tp", test_megatron_tp);
  g_test_add_func ("/planner/moe/roundtrip", test_roundtrip);
  g_test_add_func ("/planner/moe/describe-dropless", test_describe_dropless);
  g_test_add_func ("/planner/moe/cli", test_cli);
  static const ShardedCase mixtral = { "mixtral-tiny.json", 4 },
                           qwen = { "qwen2-moe-tiny.json", 2 };
  static const char *const split_experts[]
      = { "*.mlp.dispatch=[dp,_,_],[dp,_,ep]", "*.mlp.combine=[dp,ep,_,_],[dp,_,ep]", NULL };
  static const ShardedCase split = { "mixtral-tiny.json", 0, split_experts };
  g_test_add_data_func ("/executor/moe/sharded/mixtral", &mixtral, test_executor_sharded);
  g_test_add_data_func ("/executor/moe/sharded/qwen2-moe", &qwen, test_executor_sharded);
  g_test_add_data_func ("/executor/moe/sharded/experts-split", &split, test_executor_sharded);
  g_test_add_func ("/executor/moe/checkpoint-convert", test_checkpoint_convert);
  return g_test_run ();
}
