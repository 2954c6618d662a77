/* test-onnx-import.c: ONNX files as MODEL (planner-onnx-import.c).
 *
 * Fixtures in data/onnx/ are made by data/onnx/make-fixtures.py (the onnx package's helpers;
 * llama-2l.onnx is torch.onnx.export of transformers' LlamaForCausalLM of llama-2l.json), so
 * this test needs no Python. The references are not Shardscope's: parameter counts by hand
 * from the shapes the script writes, torch's own count for the llama, and the plan of the same
 * llama built from its config.json by the Hugging Face importer. */
#include <string.h>

#include "planner-error.h"
#include "planner-model.h"
#include "planner-onnx-import.h"
#include "planner-plan.h"
#include "test-util.h"

static char *
fixture (const char *name)
{
  return g_test_build_filename (G_TEST_DIST, "data", "onnx", name, NULL);
}

static gboolean
skip_without_onnx (void)
{
  if (planner_onnx_supported ())
    return FALSE;
  g_test_skip ("this build reads no ONNX files (-Donnx=disabled or no protobuf-c)");
  return TRUE;
}

static PlannerGraph *
load (const char *name, gint64 batch, gint64 seq, GError **error)
{
  g_autofree char *path = fixture (name);
  PlannerModelOptions options;

  planner_model_options_init (&options);
  options.batch = batch;
  options.seq = seq;
  return planner_model_load (path, &options, error);
}

static const PlannerOp *
op_named (PlannerGraph *graph, const char *name)
{
  int i = planner_graph_find_op (graph, name);

  if (i < 0)
    g_error ("no op %s", name);
  return planner_graph_get_op (graph, i);
}

static const PlannerTensor *
input_tensor (PlannerGraph *graph, const PlannerOp *op, guint slot)
{
  return planner_graph_get_tensor (graph, op->inputs[slot]);
}

/* The Done-when of issue 16's ONNX part: the torch export of a 2-layer llama plans under
 * megatron on dp=2,mp=4 exactly as the config it was made from. */
static void
test_llama_plans_like_config (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *config = fixture ("llama-2l.json");
  PlannerModelOptions options;

  if (skip_without_onnx ())
    return;
  planner_model_options_init (&options);
  options.batch = 8;
  options.seq = 128;
  g_autoptr (PlannerGraph) from_config = test_util_model (config, &options);
  g_autoptr (PlannerGraph) from_onnx = load ("llama-2l.onnx", 8, 128, &error);
  g_assert_no_error (error);

  /* torch: sum(p.numel() for p in model.parameters()) = 90432 (make-fixtures.py prints it);
   * by hand: 2 x 128 x 64 (embedding, lm_head) + 5 x 64 (norms) + 2 x (64 x 64 x 2 (q, o)
   * + 32 x 64 x 2 (k, v) + 128 x 64 x 3 (gate, up, down)) = 16384 + 320 + 73728. */
  g_assert_cmpuint (planner_graph_get_parameter_count (from_onnx), ==, 90432);
  g_assert_cmpuint (planner_graph_get_parameter_count (from_config), ==, 90432);
  g_assert_cmpuint (planner_graph_get_n_ops (from_onnx), ==, planner_graph_get_n_ops (from_config));
  g_assert_cmpfloat (planner_graph_get_flops (from_onnx), ==,
                     planner_graph_get_flops (from_config));

  /* Every op of the config's graph has an op of the same type, shapes and attributes in the
   * ONNX graph (the policy's ops by the same name). */
  guint matched = 0;
  for (guint i = 0; i < planner_graph_get_n_ops (from_config); i++)
    {
      const PlannerOp *c = planner_graph_get_op (from_config, i);
      int k = planner_graph_find_op (from_onnx, c->name);

      if (c->type == PLANNER_OP_MATMUL || c->type == PLANNER_OP_EMBEDDING
          || c->type == PLANNER_OP_RMS_NORM || c->type == PLANNER_OP_SILU
          || g_str_has_suffix (c->name, ".sdpa"))
        {
          g_assert_cmpint (k, >=, 0);
          const PlannerOp *o = planner_graph_get_op (from_onnx, k);
          g_assert_cmpint (o->type, ==, c->type);
          g_assert_cmpuint (o->n_inputs, ==, c->n_inputs);
          g_assert_cmpint (o->attrs.transpose_b, ==, c->attrs.transpose_b);
          g_assert_cmpint (o->attrs.heads, ==, c->attrs.heads);
          g_assert_cmpint (o->attrs.causal, ==, c->attrs.causal);
          g_assert_cmpfloat (o->attrs.scale, ==, c->attrs.scale);
          g_assert_cmpfloat_with_epsilon (o->attrs.eps, c->attrs.eps, 1e-12);
          for (guint s = 0; s < c->n_inputs; s++)
            {
              const PlannerTensor *tc = input_tensor (from_config, c, s),
                                  *to = input_tensor (from_onnx, o, s);
              g_assert_cmpuint (to->rank, ==, tc->rank);
              for (guint d = 0; d < tc->rank; d++)
                g_assert_cmpint (to->shape[d], ==, tc->shape[d]);
              if (tc->kind == PLANNER_TENSOR_PARAMETER)
                g_assert_cmpstr (to->name, ==, tc->name);
            }
          matched++;
        }
    }
  /* 15 Linears (7 x 2 + lm_head), 1 embedding, 5 norms, 2 SiLU, 2 attentions. */
  g_assert_cmpuint (matched, ==, 25);
  /* The rotary base from the file's frequency table: rope_theta 10000. */
  const PlannerOp *rotary = op_named (from_onnx, "model.layers.1.self_attn.rotary");
  g_assert_cmpint (rotary->type, ==, PLANNER_OP_ROTARY_EMBEDDING);
  g_assert_cmpfloat_with_epsilon (rotary->attrs.theta, 10000, 1e-6);

  g_autoptr (PlannerPlan) a = test_util_plan (from_config, "dp=2,mp=4", NULL, "megatron", NULL);
  g_autoptr (PlannerPlan) b = test_util_plan (from_onnx, "dp=2,mp=4", NULL, "megatron", NULL);
  const PlannerPlanTotals *ta = planner_plan_get_totals (a), *tb = planner_plan_get_totals (b);

  g_assert_cmpuint (tb->n_pinned, ==, ta->n_pinned);
  g_assert_cmpuint (tb->n_pinned, ==, 16);
  g_assert_cmpuint (tb->n_defaulted, ==, 0);
  g_assert_cmpuint (tb->n_redistributions, ==, ta->n_redistributions);
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      g_assert_cmpuint (tb->coll_count[k], ==, ta->coll_count[k]);
      g_assert_cmpuint (tb->coll_bytes[k], ==, ta->coll_bytes[k]);
      g_assert_cmpfloat (tb->coll_time_s[k], ==, ta->coll_time_s[k]);
    }
  /* Megatron on a llama: one AllReduce after each row-parallel Linear (o_proj, down_proj) and
   * one for the vocab-parallel embedding: 5, each of [4, 128, 64] f32 local activations over
   * mp=4: 2 x 3/4 x 131072 bytes = 196608 bytes sent per device. */
  g_assert_cmpuint (tb->coll_count[PLANNER_STEP_ALL_REDUCE], ==, 5);
  g_assert_cmpuint (tb->coll_bytes[PLANNER_STEP_ALL_REDUCE], ==, 5 * 196608);
  g_assert_cmpuint (tb->comm_bytes, ==, ta->comm_bytes);
  g_assert_cmpfloat (tb->comm_time_s, ==, ta->comm_time_s);
  g_assert_cmpfloat (tb->compute_time_s, ==, ta->compute_time_s);
  g_assert_cmpfloat (tb->step_time_s, ==, ta->step_time_s);
  g_assert_cmpuint (tb->memory_per_device_bytes, ==, ta->memory_per_device_bytes);
}

/* Names and layouts as torch writes them: the weights stored [in, out] by constant folding
 * ("onnx::MatMul_N") are nn.Linear's [out, in] under their module's name. */
static void
test_llama_names (void)
{
  g_autoptr (GError) error = NULL;

  if (skip_without_onnx ())
    return;
  g_autoptr (PlannerGraph) graph = load ("llama-2l.onnx", 2, 16, &error);
  g_assert_no_error (error);
  const PlannerOp *k = op_named (graph, "model.layers.0.self_attn.k_proj");
  g_assert_cmpint (k->type, ==, PLANNER_OP_MATMUL);
  g_assert_true (k->attrs.transpose_b);
  g_assert_cmpint (k->attrs.heads, ==, 4);
  g_assert_cmpstr (input_tensor (graph, k, 1)->name, ==, "model.layers.0.self_attn.k_proj.weight");
  g_assert_cmpint (input_tensor (graph, k, 1)->shape[0], ==, 32);
  g_assert_cmpint (input_tensor (graph, k, 1)->shape[1], ==, 64);
  const PlannerOp *sdpa = op_named (graph, "model.layers.0.self_attn.sdpa");
  g_assert_true (sdpa->attrs.causal);
  g_assert_cmpfloat (sdpa->attrs.scale, ==, 0);
  /* k and v keep their 4 kv heads: repeat_kv is part of the attention. */
  g_assert_cmpint (input_tensor (graph, sdpa, 1)->shape[1], ==, 4);
  g_assert_cmpint (input_tensor (graph, sdpa, 0)->shape[1], ==, 8);
  g_assert_cmpint (op_named (graph, "model.layers.0.mlp.act_fn")->type, ==, PLANNER_OP_SILU);
  g_assert_cmpint (op_named (graph, "lm_head")->type, ==, PLANNER_OP_MATMUL);
  const PlannerTensor *ids
      = planner_graph_get_tensor (graph, planner_graph_find_tensor (graph, "input_ids"));
  g_assert_cmpint (ids->shape[0], ==, 2);
  g_assert_cmpint (ids->shape[1], ==, 16);
  /* attention_mask only feeds the mask, which the attention op models as causal. */
  g_assert_cmpint (planner_graph_find_tensor (graph, "attention_mask"), <, 0);
  g_assert_cmpstr (strrchr (planner_graph_get_source (graph), '?'), ==, "?batch=2&seq=16");
}

static void
test_mlp (void)
{
  g_autoptr (GError) error = NULL;

  if (skip_without_onnx ())
    return;
  g_autoptr (PlannerGraph) graph = load ("mlp.onnx", 3, 0, &error);
  g_assert_no_error (error);
  /* 16 x 32 + 32 + 32 x 4 + 4 */
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 676);
  g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, 3);
  const PlannerOp *fc1 = op_named (graph, "fc1"), *act = op_named (graph, "act"),
                  *fc2 = op_named (graph, "fc2");
  /* Gemm transB=1: nn.Linear's [out, in]; MatMul + Add of a [N] initializer: a Linear with
   * its bias, the file's [in, out] kept. */
  g_assert_true (fc1->type == PLANNER_OP_MATMUL && fc1->attrs.transpose_b && fc1->n_inputs == 3);
  g_assert_cmpint (act->type, ==, PLANNER_OP_RELU);
  g_assert_true (fc2->type == PLANNER_OP_MATMUL && !fc2->attrs.transpose_b && fc2->n_inputs == 3);
  g_assert_cmpint (input_tensor (graph, fc1, 0)->shape[0], ==, 3);

  /* The source rebuilds the same graph. */
  g_autoptr (PlannerGraph) again
      = planner_model_load_source (planner_graph_get_source (graph), &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_equal (graph, again));
}

static void
test_block (void)
{
  g_autoptr (GError) error = NULL;
  static const PlannerOpType types[] = {
    PLANNER_OP_LAYER_NORM, PLANNER_OP_MATMUL,      PLANNER_OP_GELU,  PLANNER_OP_SOFTMAX,
    PLANNER_OP_RESHAPE,    PLANNER_OP_TRANSPOSE,   PLANNER_OP_SPLIT, PLANNER_OP_CONCAT,
    PLANNER_OP_SLICE,      PLANNER_OP_REDUCE_MEAN, PLANNER_OP_NEG,   PLANNER_OP_EXP,
    PLANNER_OP_TANH,       PLANNER_OP_SUB,         PLANNER_OP_DIV,
  };

  if (skip_without_onnx ())
    return;
  g_autoptr (PlannerGraph) graph = load ("block.onnx", 0, 0, &error);
  g_assert_no_error (error);
  /* ln 16 + 16, fc 16 x 32, and the divisor 4.0 (a 1-element parameter); sqrt 2, 1 and 0.5
   * are the GeLU's. Cast to float of a float, Dropout and Identity are no ops. */
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 545);
  g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, G_N_ELEMENTS (types));
  for (guint i = 0; i < G_N_ELEMENTS (types); i++)
    g_assert_cmpstr (planner_op_type_to_string (planner_graph_get_op (graph, i)->type), ==,
                     planner_op_type_to_string (types[i]));
  const PlannerOp *ln = op_named (graph, "ln"), *gelu = op_named (graph, "act");
  g_assert_cmpfloat_with_epsilon (ln->attrs.eps, 1e-6, 1e-12);
  g_assert_cmpint (gelu->attrs.variant, ==, 0);
  /* Reshape [0, 8, 4, -1] of [2, 8, 32]: [2, 8, 4, 8]. */
  const PlannerOp *view = op_named (graph, "view.Reshape");
  g_assert_cmpuint (view->attrs.n_ints, ==, 4);
  g_assert_cmpint (view->attrs.ints[0], ==, 2);
  g_assert_cmpint (view->attrs.ints[3], ==, 8);
  const PlannerOp *split = op_named (graph, "view.Split");
  g_assert_true (split->attrs.n_ints == 2 && split->attrs.ints[0] == 1
                 && split->attrs.ints[1] == 3);
  const PlannerOp *slice = op_named (graph, "view.Slice");
  g_assert_true (slice->attrs.axis == 2 && slice->attrs.start == 1 && slice->attrs.end == 4);
  const PlannerTensor *y = planner_graph_get_tensor (
      graph, g_array_index (planner_graph_get_outputs (graph), guint, 0));
  g_assert_cmpstr (y->name, ==, "y");
  g_assert_true (y->rank == 3 && y->shape[0] == 2 && y->shape[1] == 4 && y->shape[2] == 3);
}

/* Opset 23's Attention, RMSNormalization and tanh Gelu; a Conv and the tanh GeLU subgraph. */
static void
test_newer_ops (void)
{
  g_autoptr (GError) error = NULL;

  if (skip_without_onnx ())
    return;
  g_autoptr (PlannerGraph) graph = load ("opset23.onnx", 0, 0, &error);
  g_assert_no_error (error);
  const PlannerOp *attn = op_named (graph, "attn.Attention"), *norm = op_named (graph, "norm"),
                  *act = op_named (graph, "act");
  g_assert_cmpint (attn->type, ==, PLANNER_OP_SDPA);
  g_assert_true (attn->attrs.causal);
  g_assert_cmpfloat (attn->attrs.scale, ==, 0);
  g_assert_cmpint (norm->type, ==, PLANNER_OP_RMS_NORM);
  g_assert_cmpfloat_with_epsilon (norm->attrs.eps, 1e-6, 1e-12);
  g_assert_true (act->type == PLANNER_OP_GELU && act->attrs.variant == 1);
  /* norm.weight [16] */
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 16);

  g_clear_object (&graph);
  graph = load ("conv.onnx", 2, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, 2);
  const PlannerOp *conv = op_named (graph, "conv");
  g_assert_cmpint (conv->type, ==, PLANNER_OP_CONV2D);
  /* stride 2, pad 1 */
  g_assert_true (conv->attrs.n_ints == 4 && conv->attrs.ints[0] == 2 && conv->attrs.ints[2] == 1);
  g_assert_true (op_named (graph, "act")->type == PLANNER_OP_GELU
                 && op_named (graph, "act")->attrs.variant == 1);
  /* 4 x 3 x 3 x 3 + 4; the GeLU's five constants are not parameters. */
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 112);
  /* (8 + 2 - 3) / 2 + 1 = 4 */
  const PlannerTensor *y = planner_graph_get_tensor (
      graph, g_array_index (planner_graph_get_outputs (graph), guint, 0));
  g_assert_true (y->rank == 4 && y->shape[0] == 2 && y->shape[1] == 4 && y->shape[2] == 4
                 && y->shape[3] == 4);
}

/* transformers' default attention (F.scaled_dot_product_attention) exports other nodes than
 * the eager one: q and k^T each scaled by sqrt(scale), a NaN guard after the softmax, Shape
 * nodes reading repeat_kv's output. Both give the same graph, up to one node's name. */
static void
test_sdpa_export (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *eager_path
      = g_test_build_filename (G_TEST_DIST, "fuzz", "onnx", "seeds", "llama-1l-h16.onnx", NULL);
  PlannerModelOptions options;

  if (skip_without_onnx ())
    return;
  planner_model_options_init (&options);
  options.batch = 2;
  options.seq = 16;
  g_autoptr (PlannerGraph) eager = planner_model_load (eager_path, &options, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerGraph) sdpa = load ("llama-1l-h16-sdpa.onnx", 2, 16, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (planner_graph_get_n_ops (sdpa), ==, planner_graph_get_n_ops (eager));
  for (guint i = 0; i < planner_graph_get_n_ops (eager); i++)
    {
      const PlannerOp *a = planner_graph_get_op (eager, i), *b = planner_graph_get_op (sdpa, i);

      g_assert_cmpint (a->type, ==, b->type);
      g_assert_true (memcmp (&a->attrs, &b->attrs, sizeof a->attrs) == 0);
      if (a->type != PLANNER_OP_RESHAPE)
        g_assert_cmpstr (a->name, ==, b->name);
    }
  g_assert_true (op_named (sdpa, "model.layers.0.self_attn.sdpa")->attrs.causal);
}

static const struct
{
  const char *file;
  int code;
  const char *fragment;
} refusals[] = {
  { "sigmoid-alone.onnx", PLANNER_ERROR_UNKNOWN_OP_TYPE,
    "ONNX op Sigmoid (domain ai.onnx, opset 17) has no Shardscope op type: only x * Sigmoid(x) "
    "(SiLU) is mapped" },
  { "unmapped-topk.onnx", PLANNER_ERROR_UNKNOWN_OP_TYPE,
    "node /head/TopK: ONNX op TopK (domain ai.onnx, opset 17) has no" },
  { "unknown-dim.onnx", PLANNER_ERROR_SHAPE_MISMATCH,
    "dim 1 of graph input x is the symbol \"past_len\"" },
  { "external-outside.onnx", PLANNER_ERROR_MALFORMED_FILE,
    "\"../secret.bin\" leads outside the model's folder" },
  { "llama-2l.json", -1, NULL },
};

static void
test_refusals (void)
{
  if (skip_without_onnx ())
    return;
  for (guint i = 0; refusals[i].fragment != NULL; i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerGraph) graph = load (refusals[i].file, 0, 0, &error);

      g_assert_null (graph);
      test_util_assert_error (error, refusals[i].code, refusals[i].fragment);
    }
  {
    /* --seq on a file whose only symbolic dim is the batch; --layers on any. */
    g_autoptr (GError) error = NULL;
    g_autoptr (PlannerGraph) graph = load ("mlp.onnx", 0, 64, &error);
    test_util_assert_error (error, PLANNER_ERROR_PARSE, "--seq applies to no dim");
    g_assert_null (graph);
  }
  {
    g_autoptr (GError) error = NULL;
    g_autofree char *path = fixture ("mlp.onnx");
    PlannerModelOptions options;

    planner_model_options_init (&options);
    options.layers = 1;
    g_assert_null (planner_model_load (path, &options, &error));
    test_util_assert_error (error, PLANNER_ERROR_PARSE, "--layers and --dtype do not apply");
  }
}

/* Hostile bytes: garbage, a cut file, messages nested past the bound. */
static GByteArray *
wrap (GByteArray *inner, guint field)
{
  GByteArray *out = g_byte_array_new ();
  guint8 tag = (guint8)(field << 3 | 2);
  guint64 n = inner->len;

  g_byte_array_append (out, &tag, 1);
  do
    {
      guint8 b = (n & 0x7f) | (n > 0x7f ? 0x80 : 0);
      g_byte_array_append (out, &b, 1);
      n >>= 7;
    }
  while (n > 0);
  g_byte_array_append (out, inner->data, inner->len);
  g_byte_array_unref (inner);
  return out;
}

static void
test_hostile_bytes (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *path = fixture ("mlp.onnx");
  g_autofree char *contents = NULL;
  gsize length;

  if (skip_without_onnx ())
    return;
  g_assert_null (
      planner_onnx_import_data ((const guint8 *)"\xff\xff\xff", 3, "junk", NULL, NULL, &error));
  test_util_assert_error (error, PLANNER_ERROR_MALFORMED_FILE, "junk: not an ONNX model file");
  g_clear_error (&error);

  g_assert_true (g_file_get_contents (path, &contents, &length, NULL));
  g_assert_null (
      planner_onnx_import_data ((const guint8 *)contents, length / 2, "half", NULL, NULL, &error));
  test_util_assert_error (error, PLANNER_ERROR_MALFORMED_FILE, "half: not an ONNX model file");
  g_clear_error (&error);

  /* ModelProto.graph (7) > GraphProto.node (1) > NodeProto.attribute (5) > AttributeProto.g
   * (6) > ..., 40 times: 121 levels, which protobuf-c would recurse into. */
  GByteArray *bytes = g_byte_array_new ();
  for (guint level = 0; level < 40; level++)
    bytes = wrap (wrap (wrap (bytes, 6), 5), 1);
  bytes = wrap (bytes, 7);
  g_assert_null (planner_onnx_import_data (bytes->data, bytes->len, "deep", NULL, NULL, &error));
  test_util_assert_error (error, PLANNER_ERROR_MALFORMED_FILE, "messages nest too deep");
  g_byte_array_unref (bytes);
}

/* `run` on the ONNX plan: the sharded forward on 8 CPU devices against the one-device run of
 * the same graph (the CLI's own reference), as for the config's plan. */
static void
test_run_sharded (void)
{
  g_autofree char *path = fixture ("llama-2l.onnx");
  g_autofree char *dir = NULL;
  g_autofree char *plan = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();

  if (test_util_skip_without_cli () || skip_without_onnx ())
    return;
  dir = test_util_tmp_dir_new ("onnx-run-XXXXXX");
  plan = g_build_filename (dir, "plan.json", NULL);
  const char *propagate[]
      = { "propagate", path,    "--mesh", "dp=2,mp=4", "--policy", "megatron", "--batch",
          "4",         "--seq", "32",     "-o",        plan,       NULL };
  g_assert_cmpint (test_util_run_cli (propagate, NULL, &err), ==, 0);
  const char *run[] = { "run", plan, "--repeat", "1", "--json", NULL };
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (test_util_run_cli (run, &out, &err), ==, 0);
  JsonObject *result = test_util_parse_object (parser, out);
  g_assert_true (json_object_get_boolean_member (result, "passed"));
  g_assert_cmpint (json_object_get_int_member (result, "devices"), ==, 8);
  /* Measured: 6.3e-07 (float32 sums in another order across 4 tensor-parallel shards). */
  g_assert_cmpfloat (json_object_get_double_member (result, "max_rel_error"), <, 1e-5);
  test_util_tmp_dir_remove (dir);
}

static void
test_unsupported_build (void)
{
  g_autoptr (GError) error = NULL;

  if (planner_onnx_supported ())
    {
      g_test_skip ("this build reads ONNX files");
      return;
    }
  g_assert_null (load ("mlp.onnx", 0, 0, &error));
  test_util_assert_error (error, PLANNER_ERROR_UNKNOWN_MODEL, "built without protobuf-c");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/onnx-import/llama-plans-like-config", test_llama_plans_like_config);
  g_test_add_func ("/planner/onnx-import/llama-names", test_llama_names);
  g_test_add_func ("/planner/onnx-import/mlp", test_mlp);
  g_test_add_func ("/planner/onnx-import/block", test_block);
  g_test_add_func ("/planner/onnx-import/newer-ops", test_newer_ops);
  g_test_add_func ("/planner/onnx-import/sdpa-export", test_sdpa_export);
  g_test_add_func ("/planner/onnx-import/refusals", test_refusals);
  g_test_add_func ("/planner/onnx-import/hostile-bytes", test_hostile_bytes);
  g_test_add_func ("/planner/onnx-import/run-sharded", test_run_sharded);
  g_test_add_func ("/planner/onnx-import/unsupported-build", test_unsupported_build);
  return g_test_run ();
}
