#define G_LOG_DOMAIN "test-hf-import"

#include "config.h"

#include <string.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "planner-error.h"
#include "planner-model.h"
#include "test-util.h"

/* The Hugging Face importer and the zoo: parameter counts against the published figures,
 * op names and shapes per family, overrides, sources, and refusals. */

static char *
shared_model_path (const char *file)
{
  const char *dir = g_getenv ("SHARDSCOPE_SHARED_MODELS");

  if (dir == NULL)
    return NULL;
  return g_build_filename (dir, file, NULL);
}

static PlannerGraph *
load_shared (const char *file, const PlannerModelOptions *options)
{
  g_autofree char *path = shared_model_path (file);
  g_autoptr (GError) error = NULL;
  PlannerGraph *graph;

  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_test_skip ("SHARDSCOPE_SHARED_MODELS does not hold the shared configs");
      return NULL;
    }
  graph = planner_hf_import_file (path, options, &error);
  g_assert_no_error (error);
  g_assert_nonnull (graph);
  return graph;
}

static const PlannerTensor *
tensor (PlannerGraph *graph, const char *name)
{
  int id = planner_graph_find_tensor (graph, name);

  if (id < 0)
    g_error ("no tensor %s", name);
  return planner_graph_get_tensor (graph, id);
}

static const PlannerOp *
op (PlannerGraph *graph, const char *name)
{
  int index = planner_graph_find_op (graph, name);

  if (index < 0)
    g_error ("no op %s", name);
  return planner_graph_get_op (graph, index);
}

static void
assert_shape (const PlannerTensor *t, guint rank, const gint64 *shape)
{
  g_assert_cmpuint (t->rank, ==, rank);
  for (guint i = 0; i < rank; i++)
    {
      if (t->shape[i] != shape[i])
        g_error ("%s: dim %u is %" G_GINT64_FORMAT ", expected %" G_GINT64_FORMAT, t->name, i,
                 t->shape[i], shape[i]);
    }
}

#define ASSERT_SHAPE(t, ...)                                                                       \
  assert_shape ((t), G_N_ELEMENTS (((const gint64[]){ __VA_ARGS__ })),                             \
                ((const gint64[]){ __VA_ARGS__ }))

/* The tensor at input @slot of op @name. */
static const PlannerTensor *
op_input (PlannerGraph *graph, const char *name, guint slot)
{
  const PlannerOp *o = op (graph, name);

  g_assert_cmpuint (slot, <, o->n_inputs);
  return planner_graph_get_tensor (graph, o->inputs[slot]);
}

static const PlannerTensor *
op_output (PlannerGraph *graph, const char *name)
{
  const PlannerOp *o = op (graph, name);

  return planner_graph_get_tensor (graph, o->outputs[0]);
}

/* ---- Parameter counts (public figures) */

typedef struct
{
  const char *file;
  guint64 params;
} SharedCount;

static const SharedCount shared_counts[] = {
  { "gpt2.json", 124439808 },
  { "llama-2-7b.json", 6738415616 },
  { "bert-base-uncased.json", 109514298 },
};

static void
test_shared_params (gconstpointer data)
{
  const SharedCount *expected = data;
  g_autoptr (PlannerGraph) graph = load_shared (expected->file, NULL);

  if (graph == NULL)
    return;
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, expected->params);
  g_assert_true (planner_graph_check (graph, NULL));
}

static void
test_zoo_params (void)
{
  const struct
  {
    const char *name;
    guint64 params;
    guint n_ops;
  } expected[] = {
    { "gpt2", 124439808, 6 + 21 * 12 },
    { "llama", 6738415616, 3 + 24 * 32 },
    { "bert", 109514298, 7 + 22 * 12 + 4 },
    { "llama-70b", 68976648192, 3 + 24 * 80 },
    { "mistral", 7241732096, 3 + 24 * 32 },
    { "qwen2", 494032768, 3 + 24 * 24 },
    /* wte 512x64 + wpe 128x64 + 2 x 49,984 per layer + ln_f 128 */
    { "gpt2-tiny", 141056, 6 + 21 * 2 },
    /* embed + lm_head 2 x 512x64 + 2 x (12,288 attention + 36,864 MLP + 128 norms) + 64 */
    { "llama-tiny", 164160, 3 + 24 * 2 },
    /* 1024x4096 + 4096 + 4096x1024 + 1024 */
    { "mlp", 8393728, 3 },
    /* The mixtures of experts: transformers' counts (tests/test-zoo.c says how). */
    { "mixtral", G_GUINT64_CONSTANT (46702792704), 3 + 28 * 32 },
    { "qwen2-moe", G_GUINT64_CONSTANT (14315784192), 3 + 37 * 24 },
  };
  const char *const *names = planner_zoo_names ();

  g_assert_cmpuint (g_strv_length ((char **)names), ==, G_N_ELEMENTS (expected));
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      g_autoptr (PlannerGraph) graph = test_util_model (expected[i].name, NULL);

      g_test_message ("%s: %" G_GUINT64_FORMAT " parameters, %u ops", expected[i].name,
                      planner_graph_get_parameter_count (graph), planner_graph_get_n_ops (graph));
      g_assert_true (g_strv_contains (names, expected[i].name));
      g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, expected[i].params);
      g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, expected[i].n_ops);
      g_assert_cmpstr (planner_graph_get_name (graph), ==, expected[i].name);
      g_assert_true (planner_graph_check (graph, NULL));
    }
}

/* ---- Families */

static void
test_gpt2 (void)
{
  g_autoptr (PlannerGraph) graph = load_shared ("gpt2.json", NULL);
  const PlannerTensor *wte;
  const PlannerOp *c_attn, *lm_head, *act;

  if (graph == NULL)
    return;
  g_assert_cmpstr (planner_graph_get_name (graph), ==, "GPT2LMHeadModel");
  g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, 6 + 21 * 12);
  ASSERT_SHAPE (tensor (graph, "input_ids"), 8, 1024);
  g_assert_cmpint (tensor (graph, "input_ids")->dtype, ==, PLANNER_DTYPE_I64);
  g_assert_cmpint (tensor (graph, "input_ids")->kind, ==, PLANNER_TENSOR_INPUT);
  ASSERT_SHAPE (tensor (graph, "position_ids"), 1, 1024);
  g_assert_cmpint (tensor (graph, "transformer.wte.weight")->dtype, ==, PLANNER_DTYPE_F32);

  /* Fused QKV: q, k and v each keep their heads. */
  c_attn = op (graph, "transformer.h.0.attn.c_attn");
  g_assert_cmpint (c_attn->type, ==, PLANNER_OP_EINSUM);
  g_assert_cmpstr (c_attn->attrs.equation, ==, "bsh,hqnd->bsqnd");
  g_assert_cmpuint (c_attn->n_inputs, ==, 3);
  ASSERT_SHAPE (op_input (graph, "transformer.h.0.attn.c_attn", 1), 768, 3, 12, 64);
  g_assert_cmpstr (op_input (graph, "transformer.h.0.attn.c_attn", 1)->name, ==,
                   "transformer.h.0.attn.c_attn.weight");
  ASSERT_SHAPE (op_input (graph, "transformer.h.0.attn.c_attn", 2), 3, 12, 64);
  ASSERT_SHAPE (op_output (graph, "transformer.h.0.attn.c_attn"), 8, 1024, 3, 12, 64);
  g_assert_cmpuint (op (graph, "transformer.h.0.attn.split_qkv")->n_outputs, ==, 3);
  ASSERT_SHAPE (op_output (graph, "transformer.h.0.attn.split_qkv"), 8, 1024, 1, 12, 64);
  ASSERT_SHAPE (op_output (graph, "transformer.h.0.attn.q_view"), 8, 1024, 12, 64);
  ASSERT_SHAPE (op_output (graph, "transformer.h.0.attn.k_heads"), 8, 12, 1024, 64);
  g_assert_true (op (graph, "transformer.h.0.attn.sdpa")->attrs.causal);
  ASSERT_SHAPE (op_output (graph, "transformer.h.0.attn.merge_view"), 8, 1024, 768);
  /* Conv1D weights are [in, out]: not transposed. */
  g_assert_false (op (graph, "transformer.h.11.mlp.c_fc")->attrs.transpose_b);
  ASSERT_SHAPE (op_input (graph, "transformer.h.11.mlp.c_fc", 1), 768, 3072);
  ASSERT_SHAPE (op_input (graph, "transformer.h.11.mlp.c_proj", 1), 3072, 768);
  ASSERT_SHAPE (op_input (graph, "transformer.h.11.mlp.c_proj", 2), 768);
  act = op (graph, "transformer.h.3.mlp.act");
  g_assert_cmpint (act->type, ==, PLANNER_OP_GELU);
  g_assert_cmpint (act->attrs.variant, ==, 1);
  g_assert_cmpint (op (graph, "transformer.h.3.attn.resid_dropout")->type, ==, PLANNER_OP_DROPOUT);

  /* Tied: lm_head reads the embedding table itself, one tensor with two users. */
  lm_head = op (graph, "lm_head");
  wte = tensor (graph, "transformer.wte.weight");
  g_assert_true (lm_head->attrs.transpose_b);
  g_assert_cmpuint (lm_head->inputs[1], ==, planner_graph_find_tensor (graph, wte->name));
  g_assert_cmpuint (wte->consumers->len, ==, 2);
  g_assert_cmpint (g_array_index (wte->consumers, PlannerUse, 0).op, ==,
                   planner_graph_find_op (graph, "transformer.wte"));
  g_assert_cmpint (g_array_index (wte->consumers, PlannerUse, 1).op, ==,
                   planner_graph_find_op (graph, "lm_head"));
  g_assert_cmpint (planner_graph_find_tensor (graph, "lm_head.weight"), ==, -1);

  /* One output, the logits. */
  g_assert_cmpuint (planner_graph_get_outputs (graph)->len, ==, 1);
  g_assert_cmpuint (g_array_index (planner_graph_get_outputs (graph), guint, 0), ==,
                    planner_graph_find_tensor (graph, "logits"));
  ASSERT_SHAPE (tensor (graph, "logits"), 8, 1024, 50257);
  g_assert_cmpint (planner_graph_get_op (graph, planner_graph_get_n_ops (graph) - 1)->type, ==,
                   PLANNER_OP_MATMUL);
}

static void
test_llama (void)
{
  g_autoptr (PlannerGraph) graph = load_shared ("llama-2-7b.json", NULL);
  const PlannerOp *q_proj;

  if (graph == NULL)
    return;
  g_assert_cmpstr (planner_graph_get_name (graph), ==, "LlamaForCausalLM");
  /* torch_dtype float16 */
  g_assert_cmpint (tensor (graph, "model.embed_tokens.weight")->dtype, ==, PLANNER_DTYPE_F16);
  g_assert_cmpint (tensor (graph, "model.layers.0.self_attn.q_proj")->dtype, ==, PLANNER_DTYPE_F16);
  /* Rotary positions are the sequence index: no position_ids input. */
  g_assert_cmpint (planner_graph_find_tensor (graph, "position_ids"), ==, -1);

  q_proj = op (graph, "model.layers.0.self_attn.q_proj");
  g_assert_cmpint (q_proj->type, ==, PLANNER_OP_MATMUL);
  g_assert_true (q_proj->attrs.transpose_b);
  g_assert_cmpint (q_proj->attrs.heads, ==, 32);
  g_assert_cmpuint (q_proj->n_inputs, ==, 2);
  ASSERT_SHAPE (op_output (graph, "model.layers.0.self_attn.q_proj"), 8, 1024, 4096);
  ASSERT_SHAPE (tensor (graph, "model.layers.0.self_attn.q_proj.weight"), 4096, 4096);
  g_assert_cmpint (planner_graph_find_tensor (graph, "model.layers.0.self_attn.q_proj.bias"), ==,
                   -1);
  ASSERT_SHAPE (op_output (graph, "model.layers.31.self_attn.k_proj"), 8, 1024, 4096);
  ASSERT_SHAPE (op_output (graph, "model.layers.0.self_attn.q_heads"), 8, 32, 1024, 128);
  g_assert_cmpint (op (graph, "model.layers.0.self_attn.rotary_q")->type, ==,
                   PLANNER_OP_ROTARY_EMBEDDING);
  g_assert_cmpfloat (op (graph, "model.layers.0.self_attn.rotary_k")->attrs.theta, ==, 10000.0);
  g_assert_cmpint (planner_graph_find_op (graph, "model.layers.0.self_attn.rotary_v"), ==, -1);
  g_assert_true (op (graph, "model.layers.0.self_attn.sdpa")->attrs.causal);
  /* The SDPA reads the rotated q and k and the plain v heads. */
  g_assert_cmpstr (op_input (graph, "model.layers.0.self_attn.sdpa", 0)->name, ==,
                   "model.layers.0.self_attn.rotary_q");
  g_assert_cmpstr (op_input (graph, "model.layers.0.self_attn.sdpa", 2)->name, ==,
                   "model.layers.0.self_attn.v_heads");
  ASSERT_SHAPE (op_output (graph, "model.layers.0.self_attn.merge_view"), 8, 1024, 4096);
  g_assert_cmpint (op (graph, "model.layers.0.mlp.act_fn")->type, ==, PLANNER_OP_SILU);
  g_assert_cmpint (op (graph, "model.layers.0.mlp.mul")->type, ==, PLANNER_OP_MUL);
  ASSERT_SHAPE (op_output (graph, "model.layers.0.mlp.up_proj"), 8, 1024, 11008);
  ASSERT_SHAPE (tensor (graph, "model.layers.0.mlp.down_proj.weight"), 4096, 11008);
  g_assert_cmpint (op (graph, "model.layers.0.input_layernorm")->type, ==, PLANNER_OP_RMS_NORM);
  g_assert_cmpfloat (op (graph, "model.norm")->attrs.eps, ==, 1e-5);

  /* Untied: lm_head has its own weight. */
  ASSERT_SHAPE (tensor (graph, "lm_head.weight"), 32000, 4096);
  g_assert_cmpuint (tensor (graph, "model.embed_tokens.weight")->consumers->len, ==, 1);
  ASSERT_SHAPE (tensor (graph, "logits"), 8, 1024, 32000);
}

static void
test_gqa (void)
{
  g_autoptr (PlannerGraph) llama70 = test_util_model_sized ("llama-70b", 2, 0);
  g_autoptr (PlannerGraph) mistral = test_util_model_sized ("mistral", 1, 0);

  /* 8 kv heads of 128: k and v are 1024 wide while q is 8192. */
  g_assert_cmpint (op (llama70, "model.layers.1.self_attn.q_proj")->attrs.heads, ==, 64);
  g_assert_cmpint (op (llama70, "model.layers.1.self_attn.k_proj")->attrs.heads, ==, 8);
  g_assert_cmpint (op (llama70, "model.layers.1.self_attn.v_proj")->attrs.heads, ==, 8);
  ASSERT_SHAPE (op_output (llama70, "model.layers.1.self_attn.q_proj"), 8, 1024, 8192);
  ASSERT_SHAPE (op_output (llama70, "model.layers.1.self_attn.k_proj"), 8, 1024, 1024);
  ASSERT_SHAPE (tensor (llama70, "model.layers.1.self_attn.k_proj.weight"), 1024, 8192);
  ASSERT_SHAPE (op_output (llama70, "model.layers.1.self_attn.rotary_k"), 8, 8, 1024, 128);
  ASSERT_SHAPE (op_output (llama70, "model.layers.1.self_attn.v_heads"), 8, 8, 1024, 128);
  ASSERT_SHAPE (op_output (llama70, "model.layers.1.self_attn.sdpa"), 8, 64, 1024, 128);
  ASSERT_SHAPE (op_output (llama70, "model.layers.1.mlp.gate_proj"), 8, 1024, 28672);
  g_assert_cmpint (tensor (llama70, "lm_head.weight")->dtype, ==, PLANNER_DTYPE_F16);

  ASSERT_SHAPE (tensor (mistral, "model.layers.0.self_attn.v_proj.weight"), 1024, 4096);
  ASSERT_SHAPE (op_output (mistral, "model.layers.0.mlp.down_proj"), 8, 1024, 4096);
  g_assert_cmpint (tensor (mistral, "model.embed_tokens.weight")->dtype, ==, PLANNER_DTYPE_BF16);
  g_assert_cmpstr (planner_graph_get_source (mistral), ==,
                   "mistral?batch=8&seq=1024&layers=1&dtype=bf16");
}

static void
test_qwen2 (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("qwen2", NULL);
  const PlannerTensor *embed = tensor (graph, "model.embed_tokens.weight");

  /* q/k/v biases, no o_proj bias. */
  ASSERT_SHAPE (tensor (graph, "model.layers.0.self_attn.q_proj.bias"), 896);
  ASSERT_SHAPE (tensor (graph, "model.layers.0.self_attn.k_proj.bias"), 128);
  ASSERT_SHAPE (tensor (graph, "model.layers.23.self_attn.v_proj.bias"), 128);
  g_assert_cmpuint (op (graph, "model.layers.0.self_attn.q_proj")->n_inputs, ==, 3);
  g_assert_cmpint (planner_graph_find_tensor (graph, "model.layers.0.self_attn.o_proj.bias"), ==,
                   -1);
  g_assert_cmpint (op (graph, "model.layers.0.self_attn.k_proj")->attrs.heads, ==, 2);
  g_assert_cmpfloat (op (graph, "model.layers.0.self_attn.rotary_q")->attrs.theta, ==, 1e6);
  g_assert_cmpfloat (op (graph, "model.layers.0.input_layernorm")->attrs.eps, ==, 1e-6);
  /* Tied embeddings: one tensor, two users. */
  g_assert_cmpint (planner_graph_find_tensor (graph, "lm_head.weight"), ==, -1);
  g_assert_cmpuint (embed->consumers->len, ==, 2);
  g_assert_cmpuint (op (graph, "lm_head")->inputs[1], ==,
                    planner_graph_find_tensor (graph, embed->name));
  g_assert_cmpint (embed->dtype, ==, PLANNER_DTYPE_BF16);
  ASSERT_SHAPE (tensor (graph, "logits"), 8, 1024, 151936);
}

/* transformers 5 writes the rotary base inside "rope_parameters" (issue 13: a Qwen2
 * checkpoint saved by save_pretrained came out with theta 10000 instead of 1e6). */
static void
test_rope_parameters (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_hf_import_json (
      "{\"model_type\": \"qwen2\", \"vocab_size\": 64, \"hidden_size\": 16, "
      "\"intermediate_size\": 24, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, "
      "\"num_key_value_heads\": 2, \"max_position_embeddings\": 32, "
      "\"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}, "
      "\"rope_scaling\": null}",
      NULL, &error);

  g_assert_no_error (error);
  g_assert_cmpfloat (op (graph, "model.layers.0.self_attn.rotary_q")->attrs.theta, ==, 1e6);
  g_assert_cmpfloat (op (graph, "model.layers.0.self_attn.rotary_k")->attrs.theta, ==, 1e6);
}

static void
test_bert (void)
{
  g_autoptr (PlannerGraph) graph = load_shared ("bert-base-uncased.json", NULL);
  const PlannerTensor *words;

  if (graph == NULL)
    return;
  g_assert_cmpstr (planner_graph_get_name (graph), ==, "BertForMaskedLM");
  g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, 7 + 22 * 12 + 4);
  /* max_position_embeddings 512 < 1024 */
  ASSERT_SHAPE (tensor (graph, "input_ids"), 8, 512);
  ASSERT_SHAPE (tensor (graph, "token_type_ids"), 8, 512);
  ASSERT_SHAPE (tensor (graph, "position_ids"), 1, 512);
  ASSERT_SHAPE (tensor (graph, "bert.embeddings.position_embeddings.weight"), 512, 768);
  ASSERT_SHAPE (tensor (graph, "bert.embeddings.token_type_embeddings.weight"), 2, 768);
  ASSERT_SHAPE (op_output (graph, "bert.embeddings.add_token_type"), 8, 512, 768);
  g_assert_cmpfloat (op (graph, "bert.embeddings.LayerNorm")->attrs.eps, ==, 1e-12);
  g_assert_cmpint (op (graph, "bert.encoder.layer.0.attention.self.query")->attrs.heads, ==, 12);
  g_assert_cmpuint (op (graph, "bert.encoder.layer.0.attention.self.key")->n_inputs, ==, 3);
  g_assert_false (op (graph, "bert.encoder.layer.0.attention.self.sdpa")->attrs.causal);
  ASSERT_SHAPE (op_output (graph, "bert.encoder.layer.0.attention.self.v_heads"), 8, 12, 512, 64);
  g_assert_cmpint (op (graph, "bert.encoder.layer.11.intermediate.intermediate_act_fn")->type, ==,
                   PLANNER_OP_GELU);
  g_assert_cmpint (
      op (graph, "bert.encoder.layer.11.intermediate.intermediate_act_fn")->attrs.variant, ==, 0);
  ASSERT_SHAPE (op_output (graph, "bert.encoder.layer.11.output.LayerNorm"), 8, 512, 768);
  g_assert_cmpint (planner_graph_find_op (graph, "bert.pooler.dense"), ==, -1);

  /* The decoder reads the word embeddings (tied) with its own bias. */
  words = tensor (graph, "bert.embeddings.word_embeddings.weight");
  g_assert_cmpuint (words->consumers->len, ==, 2);
  g_assert_cmpstr (op_input (graph, "cls.predictions.decoder", 1)->name, ==, words->name);
  g_assert_cmpstr (op_input (graph, "cls.predictions.decoder", 2)->name, ==,
                   "cls.predictions.bias");
  ASSERT_SHAPE (tensor (graph, "cls.predictions.bias"), 30522);
  ASSERT_SHAPE (tensor (graph, "logits"), 8, 512, 30522);
}

static const char bert_model_config[] = "{\"model_type\": \"bert\", \"architectures\": "
                                        "[\"BertModel\"], \"vocab_size\": 30522, "
                                        "\"hidden_size\": 768, \"num_hidden_layers\": 12, "
                                        "\"num_attention_heads\": 12, \"intermediate_size\": "
                                        "3072, \"max_position_embeddings\": 512}";

static void
test_bert_model (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_hf_import_json (bert_model_config, NULL, &error);
  const GArray *outputs;

  g_assert_no_error (error);
  /* bert-base-uncased with its pooler, no MLM head. */
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 109482240);
  g_assert_cmpstr (planner_graph_get_name (graph), ==, "BertModel");
  g_assert_cmpint (planner_graph_find_op (graph, "embeddings.word_embeddings"), >=, 0);
  g_assert_cmpint (planner_graph_find_op (graph, "encoder.layer.11.output.LayerNorm"), >=, 0);
  g_assert_cmpint (planner_graph_find_op (graph, "cls.predictions.decoder"), ==, -1);
  g_assert_cmpint (op (graph, "pooler.first_token")->type, ==, PLANNER_OP_SLICE);
  g_assert_cmpint (op (graph, "pooler.activation")->type, ==, PLANNER_OP_TANH);

  outputs = planner_graph_get_outputs (graph);
  g_assert_cmpuint (outputs->len, ==, 2);
  g_assert_cmpstr (planner_graph_get_tensor (graph, g_array_index (outputs, guint, 0))->name, ==,
                   "last_hidden_state");
  g_assert_cmpstr (planner_graph_get_tensor (graph, g_array_index (outputs, guint, 1))->name, ==,
                   "pooler_output");
  ASSERT_SHAPE (tensor (graph, "last_hidden_state"), 8, 512, 768);
  ASSERT_SHAPE (tensor (graph, "pooler_output"), 8, 768);
  /* The last hidden state feeds the pooler and is an output as well. */
  g_assert_cmpuint (tensor (graph, "last_hidden_state")->consumers->len, ==, 1);
}

/* ---- Overrides and sources */

static void
test_overrides (void)
{
  PlannerModelOptions options;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autoptr (PlannerGraph) tiny = test_util_model ("gpt2-tiny", NULL);

  planner_model_options_init (&options);
  options.batch = 2;
  options.seq = 64;
  options.layers = 2;
  options.dtype_set = TRUE;
  options.dtype = PLANNER_DTYPE_BF16;
  graph = planner_model_load ("llama", &options, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, 3 + 24 * 2);
  g_assert_cmpint (planner_graph_find_op (graph, "model.layers.1.add_mlp"), >=, 0);
  g_assert_cmpint (planner_graph_find_op (graph, "model.layers.2.add_mlp"), ==, -1);
  ASSERT_SHAPE (tensor (graph, "input_ids"), 2, 64);
  ASSERT_SHAPE (op_output (graph, "model.layers.1.self_attn.q_proj"), 2, 64, 4096);
  ASSERT_SHAPE (tensor (graph, "logits"), 2, 64, 32000);
  g_assert_cmpint (tensor (graph, "model.layers.1.mlp.up_proj.weight")->dtype, ==,
                   PLANNER_DTYPE_BF16);
  g_assert_cmpint (tensor (graph, "logits")->dtype, ==, PLANNER_DTYPE_BF16);
  /* embeddings + lm_head + norm + 2 layers of 202,383,360 */
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==,
                    2 * 131072000ull + 4096 + 2 * 202383360ull);
  g_assert_cmpstr (planner_graph_get_source (graph), ==,
                   "llama?batch=2&seq=64&layers=2&dtype=bf16");

  /* transformers >= 4.56 writes "dtype" instead of "torch_dtype". */
  {
    g_autoptr (PlannerGraph) bert = planner_hf_import_json (
        "{\"model_type\": \"bert\", \"vocab_size\": 100, \"hidden_size\": 16, "
        "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 32, "
        "\"dtype\": \"bfloat16\"}",
        NULL, &error);

    g_assert_no_error (error);
    g_assert_cmpint (tensor (bert, "bert.embeddings.word_embeddings.weight")->dtype, ==,
                     PLANNER_DTYPE_BF16);
    /* max_position_embeddings defaults to 512 for BERT */
    ASSERT_SHAPE (tensor (bert, "input_ids"), 8, 512);
  }

  /* Defaults: batch 8, the model's 128 positions, f32 when the config names no dtype. */
  ASSERT_SHAPE (tensor (tiny, "input_ids"), 8, 128);
  g_assert_cmpint (tensor (tiny, "transformer.wte.weight")->dtype, ==, PLANNER_DTYPE_F32);
  g_assert_cmpstr (planner_graph_get_source (tiny), ==,
                   "gpt2-tiny?batch=8&seq=128&layers=2&dtype=f32");

  /* More layers than the config has. */
  g_clear_object (&graph);
  planner_model_options_init (&options);
  options.layers = 5;
  graph = planner_zoo_build ("llama-tiny", &options, &error);
  g_assert_no_error (error);
  g_assert_cmpint (planner_graph_find_op (graph, "model.layers.4.mlp.down_proj"), >=, 0);
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 164160 + 3 * 49280);

  /* Learned positions cannot go past their table. */
  g_clear_object (&graph);
  planner_model_options_init (&options);
  options.seq = 129;
  graph = planner_zoo_build ("gpt2-tiny", &options, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH);
  g_assert_nonnull (strstr (error->message, "n_positions 128"));
  g_assert_null (graph);
  g_clear_error (&error);

  /* Rotary positions can. */
  options.seq = 256;
  graph = planner_zoo_build ("llama-tiny", &options, &error);
  g_assert_no_error (error);
  ASSERT_SHAPE (tensor (graph, "input_ids"), 8, 256);
  g_clear_object (&graph);

  /* Shapes too big for 64-bit element counts. */
  options.seq = G_MAXINT32;
  options.batch = G_MAXINT32;
  graph = planner_zoo_build ("llama", &options, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH);
  g_assert_nonnull (strstr (error->message, "2^62"));
  g_assert_null (graph);
  g_clear_error (&error);

  g_clear_object (&graph);
  planner_model_options_init (&options);
  options.batch = -4;
  graph = planner_zoo_build ("llama-tiny", &options, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE);
  g_assert_nonnull (strstr (error->message, "batch"));
  g_assert_null (graph);
}

static void
assert_source_rebuilds (PlannerGraph *graph)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) again = NULL;

  g_assert_nonnull (planner_graph_get_source (graph));
  again = planner_model_load_source (planner_graph_get_source (graph), &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_equal (graph, again));
  g_assert_cmpstr (planner_graph_get_source (again), ==, planner_graph_get_source (graph));
  g_assert_cmpstr (planner_graph_get_name (again), ==, planner_graph_get_name (graph));
}

static void
test_source_roundtrip (void)
{
  const char *const *names = planner_zoo_names ();
  g_autofree char *path = shared_model_path ("gpt2.json");
  PlannerModelOptions options;
  g_autoptr (GError) error = NULL;

  for (guint i = 0; names[i] != NULL; i++)
    {
      g_autoptr (PlannerGraph) graph = test_util_model (names[i], NULL);

      /* Zoo sources name the zoo entry, not a path. */
      g_assert_true (g_str_has_prefix (planner_graph_get_source (graph), names[i]));
      assert_source_rebuilds (graph);
    }

  /* A config file: the source is its absolute path with the options. */
  planner_model_options_init (&options);
  options.layers = 1;
  options.seq = 16;
  if (path != NULL && g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_autoptr (PlannerGraph) graph = planner_model_load (path, &options, &error);
      g_autofree char *absolute = g_canonicalize_filename (path, NULL);
      g_autofree char *expected
          = g_strconcat (absolute, "?batch=8&seq=16&layers=1&dtype=f32", NULL);

      g_assert_no_error (error);
      g_assert_cmpstr (planner_graph_get_source (graph), ==, expected);
      assert_source_rebuilds (graph);
    }

  /* A config given as text carries itself in its source. */
  {
    g_autoptr (PlannerGraph) graph = planner_hf_import_json (bert_model_config, &options, &error);

    g_assert_no_error (error);
    g_assert_true (g_str_has_prefix (planner_graph_get_source (graph), "hf-config:"));
    assert_source_rebuilds (graph);
  }

  /* Bad option lists are refused, with the key named. */
  {
    g_autoptr (PlannerGraph) graph = planner_model_load_source ("gpt2?batch=8&colour=red", &error);

    g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE);
    g_assert_nonnull (strstr (error->message, "colour"));
    g_assert_null (graph);
    g_clear_error (&error);
    graph = planner_model_load_source ("gpt2?batch=zero", &error);
    g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE);
    g_assert_null (graph);
  }
}

static void
test_model_load (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autofree char *dir = g_dir_make_tmp ("shardscope-hf-XXXXXX", NULL);
  g_autofree char *neither = g_build_filename (dir, "neither.json", NULL);
  g_autofree char *graph_path = g_build_filename (dir, "mlp.json", NULL);
  PlannerModelOptions options;

  graph = planner_model_load ("no-such-model", NULL, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL);
  g_assert_nonnull (strstr (error->message, "no-such-model"));
  g_assert_nonnull (strstr (error->message, "llama-70b"));
  g_clear_error (&error);

  g_assert_true (g_file_set_contents (neither, "{\"hello\": 1}", -1, NULL));
  graph = planner_model_load (neither, NULL, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
  g_assert_nonnull (strstr (error->message, "model_type"));
  g_clear_error (&error);

  /* A graph JSON path: fixed shapes, so overrides are refused. */
  graph = planner_zoo_build ("mlp", NULL, &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_save_json (graph, graph_path, &error));
  g_assert_no_error (error);
  g_clear_object (&graph);
  graph = planner_model_load (graph_path, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (planner_graph_get_source (graph), ==, graph_path);
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 8393728);
  assert_source_rebuilds (graph);
  g_clear_object (&graph);
  planner_model_options_init (&options);
  options.batch = 16;
  graph = planner_model_load (graph_path, &options, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE);
  g_assert_nonnull (strstr (error->message, "fixed shapes"));
  g_assert_null (graph);

  g_unlink (neither);
  g_unlink (graph_path);
  g_rmdir (dir);
}

static void
test_zoo_listing (void)
{
  const char *const *types = planner_hf_model_types ();
  const char *const expected_types[]
      = { "gpt2", "llama", "mistral", "qwen2", "mixtral", "qwen2_moe", "bert", NULL };
  g_autofree char *gpt2 = planner_zoo_describe ("gpt2");
  g_autofree char *llama70 = planner_zoo_describe ("llama-70b");
  g_autofree char *mlp = planner_zoo_describe ("mlp");
  g_autoptr (GBytes) bytes = NULL;

  /* The model zoo's families (issue 16, tests/test-zoo.c) follow these. */
  for (guint i = 0; expected_types[i] != NULL; i++)
    g_assert_cmpstr (types[i], ==, expected_types[i]);
  g_assert_cmpstr (gpt2, ==,
                   "gpt2: gpt2 (GPT2LMHeadModel), 12 layers, hidden 768, 124.4M "
                   "parameters");
  g_assert_cmpstr (llama70, ==,
                   "llama-70b: llama (LlamaForCausalLM), 80 layers, hidden 8192, "
                   "68.98B parameters");
  g_assert_cmpstr (mlp, ==, "mlp: graph JSON, 3 ops, 8.4M parameters");
  g_assert_null (planner_zoo_describe ("gpt5"));

  /* The planner's GResource is registered globally too (its constructor ran), so other
   * modules can use g_resources_lookup_data(). */
  bytes = g_resources_lookup_data ("/io/github/shardscope/planner/models/gpt2.json",
                                   G_RESOURCE_LOOKUP_FLAGS_NONE, NULL);
  g_assert_nonnull (bytes);
  g_assert_cmpuint (g_bytes_get_size (bytes), >, 100);
}

/* ---- Refusals */

typedef struct
{
  const char *name;
  const char *config;
  int code;
  const char *fragment;
} BadConfig;

static const BadConfig bad_configs[] = {
  { "not-json", "{\"model_type\": \"llama\",\n \"hidden_size\": }", PLANNER_ERROR_MALFORMED_FILE,
    "config:2:" },
  { "not-object", "[1, 2]", PLANNER_ERROR_MALFORMED_FILE, "object" },
  { "no-model-type", "{\"hidden_size\": 64}", PLANNER_ERROR_MALFORMED_FILE, "\"model_type\"" },
  { "unknown-model-type", "{\"model_type\": \"xlnet\"}", PLANNER_ERROR_UNKNOWN_MODEL,
    "\"xlnet\"; supported model types: gpt2, llama, mistral, qwen2, mixtral, qwen2_moe, bert" },
  { "unknown-architecture",
    "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForSequenceClassification\"]}",
    PLANNER_ERROR_UNKNOWN_MODEL, "LlamaForSequenceClassification" },
  { "missing-field",
    "{\"model_type\": \"llama\", \"vocab_size\": 512, \"intermediate_size\": 128, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"max_position_embeddings\": 64}",
    PLANNER_ERROR_MALFORMED_FILE, "missing field \"hidden_size\"" },
  { "zero-layers",
    "{\"model_type\": \"llama\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 0, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64}",
    PLANNER_ERROR_MALFORMED_FILE, "\"num_hidden_layers\" must be >= 1 and < 2^31, got 0" },
  { "huge-layers",
    "{\"model_type\": \"llama\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 1000000, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64}",
    PLANNER_ERROR_SHAPE_MISMATCH, "1000000 layers; at most 4096" },
  { "huge-vocab",
    "{\"model_type\": \"llama\", \"vocab_size\": 4294967296, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64}",
    PLANNER_ERROR_MALFORMED_FILE, "\"vocab_size\" must be >= 1 and < 2^31, got 4294967296" },
  { "negative-hidden",
    "{\"model_type\": \"gpt2\", \"vocab_size\": 512, \"n_positions\": 64, \"n_embd\": -64, "
    "\"n_layer\": 2, \"n_head\": 4}",
    PLANNER_ERROR_MALFORMED_FILE, "\"n_embd\" must be >= 1 and < 2^31, got -64" },
  { "wrong-type",
    "{\"model_type\": \"bert\", \"vocab_size\": \"many\", \"hidden_size\": 64, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 128}",
    PLANNER_ERROR_MALFORMED_FILE, "\"vocab_size\" must be an integer" },
  { "heads-not-dividing",
    "{\"model_type\": \"gpt2\", \"vocab_size\": 512, \"n_positions\": 64, \"n_embd\": 100, "
    "\"n_layer\": 2, \"n_head\": 3}",
    PLANNER_ERROR_SHAPE_MISMATCH, "n_embd 100 is not divisible by n_head 3" },
  { "kv-heads-not-dividing",
    "{\"model_type\": \"mistral\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 3, \"max_position_embeddings\": 64}",
    PLANNER_ERROR_SHAPE_MISMATCH,
    "num_attention_heads 4 is not divisible by num_key_value_heads 3" },
  { "unknown-activation",
    "{\"model_type\": \"llama\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64, \"hidden_act\": \"mish\"}",
    PLANNER_ERROR_UNKNOWN_OP_TYPE, "hidden_act \"mish\"" },
  /* 2^31 x 2^31 f32 is 2^64 bytes, which wrapped: parameter bytes printed as 1.8e19. */
  { "exabyte",
    "{\"model_type\": \"gpt2\", \"vocab_size\": 2147483647, \"n_positions\": 64, "
    "\"n_embd\": 2147483520, \"n_layer\": 2, \"n_head\": 4}",
    PLANNER_ERROR_SHAPE_MISMATCH,
    "tensor transformer.wte.weight [2147483647,2147483520] takes the graph's tensors past 2^60 "
    "bytes" },
  /* A scaled rotary embedding changes every angle: refused, not run as the plain one. */
  /* (Llama 3.1's "llama3" is modelled since issue 16: tests/test-zoo.c.) */
  { "rope-scaling-dynamic",
    "{\"model_type\": \"llama\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64, \"rope_theta\": 500000.0, "
    "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 8.0}}",
    PLANNER_ERROR_MALFORMED_FILE, "rope_scaling: rope_type \"dynamic\" is not supported" },
  { "rope-parameters-yarn",
    "{\"model_type\": \"qwen2\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64, "
    "\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e6, \"factor\": 4.0}}",
    PLANNER_ERROR_MALFORMED_FILE, "rope_parameters: rope_type \"yarn\" is not supported" },
  { "rope-parameters-theta",
    "{\"model_type\": \"mistral\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64, \"rope_parameters\": {\"rope_theta\": -1}}",
    PLANNER_ERROR_MALFORMED_FILE, "rope_parameters: field \"rope_theta\" must be a positive" },
  /* Attention the graph does not model: refused, not compared against a different model. */
  { "sliding-window-mistral",
    "{\"model_type\": \"mistral\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64, \"sliding_window\": 16}",
    PLANNER_ERROR_SHAPE_MISMATCH,
    "layer 0 attends through a sliding window of 16 tokens (sliding_window), shorter than the "
    "sequence of 64" },
  { "sliding-window-layer-types",
    "{\"model_type\": \"qwen2\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64, \"sliding_window\": 8, "
    "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
    PLANNER_ERROR_SHAPE_MISMATCH, "layer 1 attends through a sliding window of 8 tokens" },
  { "gpt2-unscaled-attention",
    "{\"model_type\": \"gpt2\", \"vocab_size\": 512, \"n_embd\": 64, \"n_layer\": 2, "
    "\"n_head\": 4, \"n_positions\": 64, \"scale_attn_weights\": false}",
    PLANNER_ERROR_MALFORMED_FILE, "scale_attn_weights false is not supported" },
  { "unknown-dtype",
    "{\"model_type\": \"llama\", \"vocab_size\": 512, \"hidden_size\": 64, "
    "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"max_position_embeddings\": 64, \"torch_dtype\": \"float8\"}",
    PLANNER_ERROR_MALFORMED_FILE, "torch_dtype \"float8\"" },
};

static void
test_bad_config (gconstpointer data)
{
  const BadConfig *bad = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_hf_import_json (bad->config, NULL, &error);

  g_assert_null (graph);
  test_util_assert_error (error, bad->code, bad->fragment);
}

static void
test_bad_file (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autofree char *dir = g_dir_make_tmp ("shardscope-hf-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "config.json", NULL);
  g_autofree char *expected = g_strconcat (path, ":3:", NULL);

  graph = planner_hf_import_file ("/nonexistent/config.json", NULL, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_IO);
  g_clear_error (&error);

  /* The parser's line and column, after the file's name. */
  g_assert_true (
      g_file_set_contents (path, "{\n  \"model_type\": \"gpt2\",\n  \"n_embd\" 64\n}", -1, NULL));
  graph = planner_hf_import_file (path, NULL, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
  g_assert_true (g_str_has_prefix (error->message, expected));
  g_assert_null (graph);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (shared_counts); i++)
    {
      g_autofree char *stem
          = g_strndup (shared_counts[i].file, strlen (shared_counts[i].file) - strlen (".json"));
      g_autofree char *path = g_strdup_printf ("/planner/hf-import/%s-params", stem);

      g_test_add_data_func (path, &shared_counts[i], test_shared_params);
    }
  g_test_add_func ("/planner/hf-import/zoo-params", test_zoo_params);
  g_test_add_func ("/planner/hf-import/gpt2", test_gpt2);
  g_test_add_func ("/planner/hf-import/llama", test_llama);
  g_test_add_func ("/planner/hf-import/gqa", test_gqa);
  g_test_add_func ("/planner/hf-import/qwen2", test_qwen2);
  g_test_add_func ("/planner/hf-import/rope-parameters", test_rope_parameters);
  g_test_add_func ("/planner/hf-import/bert", test_bert);
  g_test_add_func ("/planner/hf-import/bert-model", test_bert_model);
  g_test_add_func ("/planner/hf-import/overrides", test_overrides);
  g_test_add_func ("/planner/hf-import/source-roundtrip", test_source_roundtrip);
  g_test_add_func ("/planner/hf-import/model-load", test_model_load);
  g_test_add_func ("/planner/hf-import/zoo-listing", test_zoo_listing);
  for (guint i = 0; i < G_N_ELEMENTS (bad_configs); i++)
    test_util_add_named ("/planner/hf-import/bad", bad_configs[i].name, &bad_configs[i],
                         test_bad_config);
  g_test_add_func ("/planner/hf-import/bad/file", test_bad_file);
  return g_test_run ();
}
