/* The model zoo of issue 16, the dense families: each family's hub config imports with the
 * Hugging Face model's exact parameter count, in both key spellings; megatron plans it on
 * dp=2,mp=4; a 2-layer random-weight version runs sharded == unsharded, forward and one
 * training step (T5 labelled with its decoder's next tokens, ViT's image b with class b mod 6).
 * Plus --kv-replicas (grouped-query attention on more tp ranks than kv heads) and --pad-vocab.
 *
 * The parameter counts were computed with transformers 5 (the venv's
 * .venv-frameworks/torch/bin/python): the config in tests/data/zoo/ read with
 * AutoConfig.for_model (model_type, **fields), AutoModelForCausalLM.from_config under
 * torch.device ("meta"), sum (p.numel () for p in model.parameters ()); a tied weight counts
 * once. */
#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "executor-test-backend.h"
#include "executor-train.h"
#include "executor-trial.h"
#include "planner-error.h"
#include "planner-export.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"

typedef struct
{
  const char *name;
  const char *file;  /* tests/data/zoo/ */
  guint64 hf_params; /* transformers' count, see above */
  /* Members that shrink it to a model two cores run in a test (2 layers): JSON. */
  const char *shrink;
  const char *run_mesh;
  gint64 kv_replicas;     /* for the run: 0 none */
  gint64 kv_replicas_mp4; /* for megatron on mp=4: 0 none */
  /* The other spelling, where it is not LLaMA's (rope_theta -> rope_parameters): members
   * set (JSON) and members removed (comma-separated). */
  const char *respell;
  const char *unset;
  const char *respell_wrong; /* a respelling with another value: another graph */
  gboolean fixed_seq;        /* the model sets its sequence (ViT: patches + 1) */
} ZooCase;

/* The sequence a test asks for: the model's own where it fixes it. */
static gint64
seq_of (const ZooCase *c, gint64 seq)
{
  return c->fixed_seq ? 0 : seq;
}

static const ZooCase cases[] = {
  { "llama-3", "llama-3-8b.json", 8030261248u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 48, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 2, "
    "\"max_position_embeddings\": 64}",
    "dp=2,mp=2", 0 },
  /* Llama 3.1: rope_type llama3 (frequencies slowed past the original context, blended in
   * between: original context 64 makes pair 1 of 4 blend and pairs 2 and 3 slow). The
   * respelling moves rope_scaling into rope_parameters, transformers 5's spelling. */
  { "llama-3.1", "llama-3.1-8b.json", 8030261248u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 48, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
    "\"max_position_embeddings\": 64, \"rope_theta\": 10000.0, \"rope_scaling\": "
    "{\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
    "\"original_max_position_embeddings\": 64, \"rope_type\": \"llama3\"}}",
    "dp=2,mp=2", 0, 0,
    "{\"rope_parameters\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, "
    "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192, "
    "\"rope_type\": \"llama3\", \"rope_theta\": 500000.0}}",
    "rope_scaling,rope_theta",
    "{\"rope_parameters\": {\"factor\": 4.0, \"low_freq_factor\": 1.0, "
    "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192, "
    "\"rope_type\": \"llama3\", \"rope_theta\": 500000.0}}" },
  /* Multi-query (one kv head) with head_dim 16 set apart from hidden / heads = 8: on mp=2
   * the kv head is repeated twice. */
  { "gemma-2b", "gemma-2b.json", 2506172416u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 48, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, "
    "\"head_dim\": 16, \"max_position_embeddings\": 64}",
    "dp=2,mp=2", 2, 4 },
  { "gemma-7b", "gemma-7b.json", 8537680896u,
    "{\"vocab_size\": 96, \"hidden_size\": 24, \"intermediate_size\": 40, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 4, "
    "\"head_dim\": 8, \"max_position_embeddings\": 64}",
    "dp=2,mp=2", 0 },
  /* Fused qkv_proj and gate_up_proj, split by heads and by intermediate features. */
  { "phi-3", "phi-3-mini-4k.json", 3821079552u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 48, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 4, "
    "\"max_position_embeddings\": 64, \"sliding_window\": 63}",
    "dp=2,mp=2", 0, 0 },
  /* Grouped kv heads (40 and 10): the fused weight cut into q, k and v rows, the query's
   * projection split by heads. */
  { "phi-3-medium", "phi-3-medium-4k.json", 13960238080u,
    "{\"vocab_size\": 96, \"hidden_size\": 64, \"intermediate_size\": 48, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 2, "
    "\"max_position_embeddings\": 64, \"sliding_window\": 63}",
    "dp=2,mp=2" },
  /* Partial rotary (a quarter of each head), fused per-head qkv, parallel residual. */
  { "pythia", "pythia-160m.json", 162322944u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 48, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"max_position_embeddings\": 64}",
    "dp=2,mp=2", 0, 0,
    "{\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000, "
    "\"partial_rotary_factor\": 0.25}}",
    "rotary_pct,rotary_emb_base",
    "{\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000, "
    "\"partial_rotary_factor\": 0.5}}" },
  /* Learned positions offset by two rows, tied embedding, ReLU, biases. */
  { "opt-125m", "opt-125m.json", 125239296u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"ffn_dim\": 48, \"word_embed_proj_dim\": 32, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"max_position_embeddings\": 64}",
    "dp=2,mp=2" },
  /* Norms after the residual adds, a 512-wide embedding projected in and out. */
  { "opt-350m", "opt-350m.json", 331196416u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"ffn_dim\": 48, \"word_embed_proj_dim\": 16, "
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"max_position_embeddings\": 64}",
    "dp=2,mp=2" },
  /* Multi-query (one kv head, repeated twice on mp=2), attention and MLP in parallel. */
  { "falcon-7b", "falcon-7b.json", 6921720704u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 4}",
    "dp=2,mp=2", 2 },
  /* Grouped query_key_value [kv, group + 2, hd, hidden], ln_attn and ln_mlp. */
  { "falcon-40b", "falcon-40b.json", 41303293952u,
    "{\"vocab_size\": 96, \"hidden_size\": 32, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 8, \"num_kv_heads\": 2}",
    "dp=2,mp=2" },
  /* ALiBi (6 heads: 4 of the power of two and 2 more, each needing its global index on a
   * shard), the embedding's own LayerNorm. */
  { "bloom-560m", "bloom-560m.json", 559214592u,
    "{\"vocab_size\": 96, \"hidden_size\": 48, \"n_layer\": 2, \"n_head\": 6}", "dp=2,mp=2", 0, 0,
    "{\"n_embed\": 1024, \"num_attention_heads\": 16}", "hidden_size,n_head" },
  /* Patches by a strided Conv2D, the class token repeated over the batch before them,
   * learned positions, the class token's state classified. */
  { "vit", "vit-base-patch16-224.json", 86567656u,
    "{\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 4, \"image_size\": 8, \"patch_size\": 2, "
    "\"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\", \"3\": \"d\", "
    "\"4\": \"e\", \"5\": \"f\"}}",
    "dp=2,mp=2", .fixed_seq = TRUE },
  /* Encoder-decoder: relative position buckets (bidirectional, causal), unscaled attention
   * with a score bias, cross-attention, the shared embedding read three times. */
  { "t5-small", "t5-small.json", 60506624u,
    "{\"vocab_size\": 96, \"d_model\": 32, \"d_kv\": 8, \"d_ff\": 48, \"num_layers\": 2, "
    "\"num_heads\": 4, \"relative_attention_num_buckets\": 8, "
    "\"relative_attention_max_distance\": 6}",
    "dp=2,mp=2" },
};

static char *
zoo_path (const char *file)
{
  return g_test_build_filename (G_TEST_DIST, "data", "zoo", file, NULL);
}

/* The config's text, with @members (JSON, may be NULL) set over its own and @rename (may be
 * NULL) "OLD=NEW" renaming one member. */
static char *
config_text (const char *file, const char *members, const char *rename)
{
  g_autofree char *path = zoo_path (file);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  json_parser_load_from_file (parser, path, &error);
  g_assert_no_error (error);
  JsonObject *config = json_node_get_object (json_parser_get_root (parser));
  if (members != NULL)
    {
      g_autoptr (JsonParser) over = json_parser_new ();
      json_parser_load_from_data (over, members, -1, &error);
      g_assert_no_error (error);
      JsonObject *o = json_node_get_object (json_parser_get_root (over));
      g_autoptr (GList) names = json_object_get_members (o);
      for (GList *l = names; l; l = l->next)
        json_object_set_member (config, l->data,
                                json_node_copy (json_object_get_member (o, l->data)));
    }
  if (rename != NULL)
    {
      g_auto (GStrv) parts = g_strsplit (rename, "=", 2);
      JsonNode *node = json_object_dup_member (config, parts[0]);
      g_assert_nonnull (node);
      json_object_remove_member (config, parts[0]);
      json_object_set_member (config, parts[1], node);
    }
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  json_generator_set_root (gen, json_parser_get_root (parser));
  return json_generator_to_data (gen, NULL);
}

static PlannerGraph *
import (const char *text, gint64 layers, gint64 batch, gint64 seq, gint64 kv_replicas,
        gint64 pad_vocab)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.layers = layers;
  options.batch = batch;
  options.seq = seq;
  options.kv_replicas = kv_replicas;
  options.pad_vocab = pad_vocab;
  PlannerGraph *g = planner_hf_import_json (text, &options, &error);
  g_assert_no_error (error);
  return g;
}

static PlannerPlan *
plan_megatron (PlannerGraph *g, const char *mesh_text, GError **error)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("h100-sxm", NULL);
  g_assert_nonnull (mesh);
  g_autoptr (GPtrArray) pins = planner_policy_expand ("megatron", g, mesh, NULL, error);
  if (pins == NULL)
    return NULL;
  PlannerPropagateOptions options;
  planner_propagate_options_init (&options);
  options.allow_tied_redistribution = TRUE;
  return planner_propagate (g, mesh, hw, pins, &options, error);
}

/* The hub config, whole: Hugging Face's parameter count. */
static void
test_params (gconstpointer data)
{
  const ZooCase *c = data;
  g_autofree char *text = config_text (c->file, NULL, NULL);
  g_autoptr (PlannerGraph) g = import (text, 0, 1, seq_of (c, 16), 0, 0);
  g_assert_cmpuint (planner_graph_get_parameter_count (g), ==, c->hf_params);
}

/* Removes the comma-separated @keys (may be NULL) from the config text in *@text. */
static void
unset_members (char **text, const char *keys)
{
  if (keys == NULL)
    return;
  g_autoptr (JsonParser) p = json_parser_new ();
  g_assert_true (json_parser_load_from_data (p, *text, -1, NULL));
  g_auto (GStrv) names = g_strsplit (keys, ",", -1);
  for (guint i = 0; names[i]; i++)
    json_object_remove_member (json_node_get_object (json_parser_get_root (p)), names[i]);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  json_generator_set_root (gen, json_parser_get_root (p));
  g_free (*text);
  *text = json_generator_to_data (gen, NULL);
}

/* transformers 4 wrote torch_dtype and rope_theta beside rope_scaling; transformers 5
 * writes dtype and rope_parameters {rope_theta, rope_type}: both build one graph. */
static void
test_spellings (gconstpointer data)
{
  const ZooCase *c = data;
  g_autofree char *old_text = config_text (c->file, NULL, NULL);
  g_autoptr (PlannerGraph) old_graph = import (old_text, 2, 1, seq_of (c, 16), 0, 0);
  g_autofree char *path = zoo_path (c->file);
  g_autofree char *raw = NULL;
  g_assert_true (g_file_get_contents (path, &raw, NULL, NULL));
  const char *dtype_rename = strstr (raw, "\"torch_dtype\"") ? "torch_dtype=dtype"
                             : strstr (raw, "\"dtype\"")     ? "dtype=torch_dtype"
                                                             : NULL;
  g_autofree char *members = g_strdup (c->respell);
  if (c->respell == NULL && strstr (raw, "\"rope_theta\""))
    {
      g_autoptr (JsonParser) p = json_parser_new ();
      g_assert_true (json_parser_load_from_data (p, raw, -1, NULL));
      double theta = json_object_get_double_member (json_node_get_object (json_parser_get_root (p)),
                                                    "rope_theta");
      /* A different top-level theta that rope_parameters must override. */
      members = g_strdup_printf ("{\"rope_theta\": 1.0, \"rope_scaling\": null, "
                                 "\"rope_parameters\": {\"rope_type\": \"default\", "
                                 "\"rope_theta\": %.17g}}",
                                 theta);
    }
  g_autofree char *new_text = config_text (c->file, members, dtype_rename);
  unset_members (&new_text, c->unset);
  g_autoptr (PlannerGraph) new_graph = import (new_text, 2, 1, seq_of (c, 16), 0, 0);
  g_assert_true (planner_graph_equal (old_graph, new_graph));
  if (c->respell_wrong != NULL)
    {
      g_autofree char *wrong = config_text (c->file, c->respell_wrong, dtype_rename);
      unset_members (&wrong, c->unset);
      g_autoptr (PlannerGraph) wrong_graph = import (wrong, 2, 1, seq_of (c, 16), 0, 0);
      g_assert_false (planner_graph_equal (old_graph, wrong_graph));
    }
  if (members != NULL && c->respell == NULL)
    {
      /* The check above sees the theta: a wrong one is another graph. */
      g_autofree char *wrong = config_text (
          c->file,
          "{\"rope_scaling\": null, \"rope_parameters\": {\"rope_type\": \"default\", "
          "\"rope_theta\": 12345.0}}",
          dtype_rename);
      g_autoptr (PlannerGraph) wrong_graph = import (wrong, 2, 1, seq_of (c, 16), 0, 0);
      g_assert_false (planner_graph_equal (old_graph, wrong_graph));
    }
}

/* megatron on dp=2,mp=4 (two layers of the real sizes): every weight of a Linear it pins
 * is split four ways, so a device holds about a quarter of the layers' weights. */
static void
test_megatron (gconstpointer data)
{
  const ZooCase *c = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *text = config_text (c->file, NULL, NULL);
  g_autoptr (PlannerGraph) g = import (text, 2, 2, seq_of (c, 64), c->kv_replicas_mp4, 0);
  g_autoptr (PlannerPlan) plan = plan_megatron (g, "dp=2,mp=4", &error);
  g_assert_no_error (error);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  guint64 bytes = planner_graph_get_parameter_bytes (g);
  g_test_message ("%s: %" G_GUINT64_FORMAT " parameter bytes, %" G_GUINT64_FORMAT " per device",
                  c->name, bytes, t->param_bytes_per_device);
  g_assert_cmpuint (t->param_bytes_per_device, <, bytes / 3);
  g_assert_cmpuint (t->param_bytes_per_device, >=, bytes / 4);

  /* It exports: DTensor gets a script whose attention output projection is row-parallel,
   * or, where torch's styles cannot run the plan as planned (a norm's weight split by the
   * policy, the kv heads repeated per rank), a refusal that names the ops; MindSpore gets a
   * strategy per op, the CSV a row per op. */
  g_autofree char *dtensor = planner_export_to_string (plan, "dtensor", &error);
  if (dtensor == NULL)
    {
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY);
      g_assert_nonnull (strstr (error->message, "the DTensor export cannot run this plan"));
      g_assert_nonnull (strstr (error->message, "\n  ")); /* one line an op */
      g_test_message ("%s: DTensor refuses: %s", c->name, error->message);
      g_clear_error (&error);
    }
  else
    g_assert_nonnull (strstr (dtensor, ": RowwiseParallel("));
  g_autofree char *ms = planner_export_to_string (plan, "mindspore", &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (ms, "parallel_strategy_item"));
  g_autofree char *csv = planner_export_to_string (plan, "csv", &error);
  g_assert_no_error (error);
  guint rows = 0;
  for (const char *p = csv; (p = strstr (p, "\r\nop,")) != NULL; p++)
    rows++;
  g_assert_cmpuint (rows, ==, planner_graph_get_n_ops (g));
}

static void
check_run (PlannerPlan *plan, const char *what, gboolean train_step)
{
  g_autoptr (GError) error = NULL;
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = 1;
  options.warmup = 0;
  options.seed = 7;
  g_autoptr (ExecutorTrialResult) res
      = executor_trial_run_named (plan, test_backend (), &options, NULL, &error);
  if (test_backend_skips (error))
    return;
  g_assert_no_error (error);
  g_test_message ("%s: forward max rel error %.3g", what, res->max_rel_error);
  g_assert_true (res->passed);
  g_assert_cmpfloat (res->max_rel_error, <=, 1e-5);
  if (!train_step || !g_str_equal (test_backend (), "cpu"))
    return; /* the backward kernels are CPU ones */

  /* One training step, sharded against unsharded: loss and every gradient. */
  PlannerGraph *g = planner_plan_get_graph (plan);
  g_autoptr (ExecutorTensors) sources = executor_trial_sources (g, 7, NULL, &error);
  g_assert_no_error (error);
  ExecutorTrainOptions train;
  executor_train_options_init (&train);
  g_autoptr (ExecutorTensors) ref = executor_tensors_new ();
  g_autoptr (ExecutorTensors) got = executor_tensors_new ();
  ExecutorTrainTimes times;
  g_assert_true (executor_train_step_reference (g, sources, &train, ref, &error));
  g_assert_no_error (error);
  g_assert_true (executor_train_step_sharded (plan, sources, &train, got, &times, &error));
  g_assert_no_error (error);
  double grad_max = 0, worst = 0;
  const char *worst_name = "";
  guint n_grads = 0;
  for (guint i = 0; i < executor_tensors_get_n (ref); i++)
    {
      const ExecutorHostTensor *r = executor_tensors_get_nth (ref, i);
      for (gint64 e = 0; g_str_has_prefix (r->name, "grad.") && e < executor_host_tensor_numel (r);
           e++)
        grad_max = MAX (grad_max, fabs (((float *)r->data)[e]));
    }
  for (guint i = 0; i < executor_tensors_get_n (ref); i++)
    {
      const ExecutorHostTensor *r = executor_tensors_get_nth (ref, i);
      if (!g_str_has_prefix (r->name, "grad.") && !g_str_equal (r->name, "loss"))
        continue;
      const ExecutorHostTensor *s = executor_tensors_lookup (got, r->name);
      g_assert_nonnull (s);
      n_grads += g_str_has_prefix (r->name, "grad.");
      double scale = g_str_equal (r->name, "loss") ? 0 : 1e-3 * grad_max, diff = 0;
      for (gint64 e = 0; e < executor_host_tensor_numel (r); e++)
        {
          scale = MAX (scale, fabs (((float *)r->data)[e]));
          diff = MAX (diff, fabs (((float *)r->data)[e] - ((float *)s->data)[e]));
        }
      if (diff / MAX (scale, 1e-30) > worst)
        worst = diff / MAX (scale, 1e-30), worst_name = r->name;
    }
  g_test_message ("%s: training step, %u gradients, worst rel error %.3g (%s)", what, n_grads,
                  worst, worst_name);
  g_assert_cmpuint (n_grads, ==, planner_graph_get_n_tensors (g) > 0 ? n_grads : 0);
  g_assert_cmpuint (n_grads, >, 0);
  g_assert_cmpfloat (worst, <=, 1e-4);
}

/* A 2-layer random-weight version under megatron: sharded == unsharded. */
static void
test_run (gconstpointer data)
{
  const ZooCase *c = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *text = config_text (c->file, c->shrink, NULL);
  g_autoptr (PlannerGraph) g = import (text, 0, 2, seq_of (c, 8), c->kv_replicas, 0);
  g_autoptr (PlannerPlan) plan = plan_megatron (g, c->run_mesh, &error);
  g_assert_no_error (error);
  g_autofree char *what = g_strdup_printf ("%s on %s", c->name, c->run_mesh);
  check_run (plan, what, TRUE);
}

/* ---- the mixtures of experts in the built-in zoo ---- */

/* `shardscope-cli models` lists mixtral and qwen2-moe, built from the hub configs compiled
 * in (data/models/), with transformers' parameter counts: 5.24 in the framework venv,
 * AutoConfig.for_model (model_type, **fields) of data/models/mixtral-8x7b-v0.1.json and
 * qwen1.5-moe-a2.7b.json, AutoModelForCausalLM.from_config under torch.device ("meta"),
 * sum (p.numel () for p in model.parameters ()): MixtralForCausalLM 46702792704,
 * Qwen2MoeForCausalLM 14315784192. */
static void
test_zoo_moe (void)
{
  static const struct
  {
    const char *name, *architecture, *shown;
    guint64 hf_params;
  } moe[] = {
    { "mixtral", "MixtralForCausalLM", "46.70B parameters", G_GUINT64_CONSTANT (46702792704) },
    { "qwen2-moe", "Qwen2MoeForCausalLM", "14.32B parameters", G_GUINT64_CONSTANT (14315784192) },
  };
  const char *const *names = planner_zoo_names ();
  for (guint i = 0; i < G_N_ELEMENTS (moe); i++)
    {
      g_autoptr (GError) error = NULL;
      g_assert_true (g_strv_contains (names, moe[i].name));
      PlannerModelOptions options;
      planner_model_options_init (&options);
      options.batch = 1;
      options.seq = 16;
      g_autoptr (PlannerGraph) g = planner_zoo_build (moe[i].name, &options, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (planner_graph_get_parameter_count (g), ==, moe[i].hf_params);
      g_autofree char *text = planner_zoo_describe (moe[i].name);
      g_test_message ("%s", text);
      g_assert_nonnull (strstr (text, moe[i].architecture));
      g_assert_nonnull (strstr (text, moe[i].shown));
      /* A MoE graph: the experts' 3-D weights are there. */
      g_assert_cmpint (planner_graph_find_tensor (g, "model.layers.0.mlp.experts.down_proj"), >=,
                       0);
    }
}

/* ---- grouped-query attention on more tp ranks than kv heads ---- */

/* llama-3-8b has 8 kv heads: mp=16 is refused, naming the head count; with --kv-replicas 2
 * each kv head is repeated, the checkpoint's parameters stay as they are, and megatron
 * gives every rank one kv head of 128 (two query heads of its group). */
static void
test_kv_replicas_llama3 (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = config_text ("llama-3-8b.json", NULL, NULL);
  g_autoptr (PlannerGraph) plain = import (text, 2, 2, 64, 0, 0);
  g_autoptr (PlannerPlan) refused = plan_megatron (plain, "dp=2,mp=16", &error);
  g_assert_null (refused);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "8 heads % 16 != 0"));
  g_assert_nonnull (strstr (error->message, "or repeat each kv head with --kv-replicas 2"));
  g_clear_error (&error);

  g_autoptr (PlannerGraph) g = import (text, 2, 2, 64, 2, 0);
  g_autoptr (PlannerGraph) whole = import (text, 0, 1, 16, 2, 0);
  g_assert_cmpuint (planner_graph_get_parameter_count (whole), ==, 8030261248u);
  g_autoptr (PlannerPlan) plan = plan_megatron (g, "dp=2,mp=16", &error);
  g_assert_no_error (error);
  int sdpa = planner_graph_find_op (g, "model.layers.0.self_attn.sdpa");
  g_assert_cmpint (sdpa, >=, 0);
  const PlannerOp *op = planner_graph_get_op (g, sdpa);
  /* k arrives [B, 16 kv heads, S, 128], split over mp: one head per rank. */
  const PlannerTensor *k = planner_graph_get_tensor (g, op->inputs[1]);
  g_assert_cmpint (k->shape[1], ==, 16);
  const PlannerLayout *kl = planner_plan_get_tensor_layout (plan, op->inputs[1]);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autofree char *ks = planner_layout_to_string (kl, mesh);
  g_assert_cmpstr (ks, ==, "[dp,mp,_,_]");
  /* The checkpoint's weight is whole on each rank (its head's copy is cut from it there). */
  int w = planner_graph_find_tensor (g, "model.layers.0.self_attn.k_proj.weight");
  g_autofree char *ws = planner_layout_to_string (planner_plan_get_tensor_layout (plan, w), mesh);
  g_assert_cmpstr (ws, ==, "[_,_,_]");
}

/* Refusals name the sizes and what would work. */
static void
test_kv_replicas_refused (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = config_text ("llama-3-8b.json", NULL, NULL);
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.kv_replicas = 3;
  g_autoptr (PlannerGraph) g = planner_hf_import_json (text, &options, &error);
  g_assert_null (g);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH);
  g_assert_nonnull (strstr (error->message, "8 kv heads x 3 copies do not divide the 32 query "
                                            "heads; use a kv_replicas that divides 4"));
}

/* A small GQA model (8 query heads, 2 kv heads) on mp=4 with 2 replicas: the run equals the
 * unsharded one, forward and training step (the repeated weight's gradient sums its
 * copies' over the ranks). */
static void
test_kv_replicas_run (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = config_text ("llama-3-8b.json", cases[0].shrink, NULL);
  g_autoptr (PlannerGraph) g = import (text, 0, 2, 8, 2, 0);
  g_autoptr (PlannerPlan) plan = plan_megatron (g, "mp=4", &error);
  g_assert_no_error (error);
  check_run (plan, "llama-3 small, kv_replicas 2, mp=4", TRUE);
}

/* ---- --pad-vocab ---- */

/* GPT-2's 50257 padded to a multiple of 128 is 50304, Megatron-LM's figure: 47 rows of 768
 * more (the embedding is tied to lm_head, so once), and megatron splits both over mp=4. */
static void
test_pad_vocab (void)
{
  g_autoptr (GError) error = NULL;
  const char *dir = g_getenv ("SHARDSCOPE_SHARED_MODELS");
  g_autofree char *path = g_build_filename (dir ? dir : "", "gpt2.json", NULL);
  g_autofree char *text = NULL;
  if (dir == NULL || !g_file_get_contents (path, &text, NULL, NULL))
    {
      g_test_skip ("SHARDSCOPE_SHARED_MODELS does not hold gpt2.json");
      return;
    }
  g_autoptr (PlannerGraph) plain = import (text, 0, 1, 16, 0, 0);
  g_autoptr (PlannerGraph) padded = import (text, 0, 1, 16, 0, 128);
  /* GPT2LMHeadModel: 124439808 parameters (transformers, as above). */
  g_assert_cmpuint (planner_graph_get_parameter_count (plain), ==, 124439808u);
  g_assert_cmpuint (planner_graph_get_parameter_count (padded), ==, 124439808u + 47u * 768u);
  g_assert_nonnull (strstr (planner_graph_get_name (padded),
                            "vocabulary 50257 padded to 50304: +36096 parameters"));
  g_assert_nonnull (strstr (planner_graph_get_source (padded), "&pad_vocab=128"));

  g_autoptr (PlannerGraph) p2 = import (text, 2, 2, 64, 0, 128);
  g_autoptr (PlannerPlan) plan = plan_megatron (p2, "dp=2,mp=4", &error);
  g_assert_no_error (error);
  int wte = planner_graph_find_tensor (p2, "transformer.wte.weight");
  g_autofree char *l = planner_layout_to_string (planner_plan_get_tensor_layout (plan, wte),
                                                 planner_plan_get_mesh (plan));
  g_assert_cmpstr (l, ==, "[mp,_]");

  /* The padded graph rebuilds from its source. */
  g_autoptr (PlannerGraph) again
      = planner_model_load_source (planner_graph_get_source (p2), &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_equal (again, p2));
}

/* A padded vocabulary runs sharded == unsharded: GPT-2 shrunk to 97 tokens, padded to 100,
 * vocab-parallel over mp=2 (97 would not split). */
static void
test_pad_vocab_run (void)
{
  g_autoptr (GError) error = NULL;
  const char *dir = g_getenv ("SHARDSCOPE_SHARED_MODELS");
  g_autofree char *path = g_build_filename (dir ? dir : "", "gpt2.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (dir == NULL || !json_parser_load_from_file (parser, path, NULL))
    {
      g_test_skip ("SHARDSCOPE_SHARED_MODELS does not hold gpt2.json");
      return;
    }
  JsonObject *o = json_node_get_object (json_parser_get_root (parser));
  json_object_set_int_member (o, "vocab_size", 97);
  json_object_set_int_member (o, "n_embd", 16);
  json_object_set_int_member (o, "n_head", 4);
  json_object_set_int_member (o, "n_layer", 2);
  json_object_set_int_member (o, "n_positions", 32);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  json_generator_set_root (gen, json_parser_get_root (parser));
  g_autofree char *text = json_generator_to_data (gen, NULL);
  g_autoptr (PlannerGraph) g = import (text, 0, 2, 8, 0, 4);
  g_autoptr (PlannerPlan) plan = plan_megatron (g, "dp=2,mp=2", &error);
  g_assert_no_error (error);
  int wte = planner_graph_find_tensor (g, "transformer.wte.weight");
  g_assert_cmpint (planner_graph_get_tensor (g, wte)->shape[0], ==, 100);
  g_autofree char *l = planner_layout_to_string (planner_plan_get_tensor_layout (plan, wte),
                                                 planner_plan_get_mesh (plan));
  g_assert_cmpstr (l, ==, "[mp,_]");
  check_run (plan, "gpt2 small, vocab 97 padded to 100, dp=2,mp=2", TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *kinds[] = { "params", "spellings", "megatron", "run" };
      GTestDataFunc funcs[] = { test_params, test_spellings, test_megatron, test_run };
      for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
        {
          g_autofree char *path = g_strdup_printf ("/zoo/%s/%s", cases[i].name, kinds[k]);
          g_test_add_data_func (path, &cases[i], funcs[k]);
        }
    }
  g_test_add_func ("/zoo/moe/builtin", test_zoo_moe);
  g_test_add_func ("/zoo/kv-replicas/llama-3-mp16", test_kv_replicas_llama3);
  g_test_add_func ("/zoo/kv-replicas/refused", test_kv_replicas_refused);
  g_test_add_func ("/zoo/kv-replicas/run", test_kv_replicas_run);
  g_test_add_func ("/zoo/pad-vocab/gpt2", test_pad_vocab);
  g_test_add_func ("/zoo/pad-vocab/run", test_pad_vocab_run);
  return g_test_run ();
}
