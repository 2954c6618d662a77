#define G_LOG_DOMAIN "planner-hf-import"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-hf-moe-private.h"
#include "planner-model-private.h"

/* Hugging Face config.json -> PlannerGraph.
 *
 * Op names are the HF module paths and parameter names are "<module>.weight"/".bias", so
 * pins, policies and exports can address ops the way PyTorch code does. Ops are added in
 * forward order, which is the graph's topological order. */

typedef enum
{
  FAMILY_GPT2,
  FAMILY_LLAMA,
  FAMILY_BERT,
  /* The model zoo (issue 16). */
  FAMILY_PHI3,
  FAMILY_NEOX,
  FAMILY_OPT,
  FAMILY_FALCON,
  FAMILY_BLOOM,
  FAMILY_VIT,
  FAMILY_T5,
} Family;

typedef struct
{
  const char *model_type;
  Family family;
  /* The first one is assumed when the config has no "architectures". */
  const char *architectures[3];
} ModelType;

static const ModelType model_types[] = {
  { "gpt2", FAMILY_GPT2, { "GPT2LMHeadModel" } },
  { "llama", FAMILY_LLAMA, { "LlamaForCausalLM" } },
  { "mistral", FAMILY_LLAMA, { "MistralForCausalLM" } },
  { "qwen2", FAMILY_LLAMA, { "Qwen2ForCausalLM" } },
  /* Mixture of experts: LLaMA's attention, planner-hf-moe.c's MLP. */
  { "mixtral", FAMILY_LLAMA, { "MixtralForCausalLM" } },
  { "qwen2_moe", FAMILY_LLAMA, { "Qwen2MoeForCausalLM" } },
  { "bert", FAMILY_BERT, { "BertForMaskedLM", "BertModel" } },
  /* The model zoo (issue 16): families read by parse_FAMILY and built by build_FAMILY in
   * their own functions below. */
  { "gemma", FAMILY_LLAMA, { "GemmaForCausalLM" } },
  { "phi3", FAMILY_PHI3, { "Phi3ForCausalLM" } },
  { "gpt_neox", FAMILY_NEOX, { "GPTNeoXForCausalLM" } },
  { "opt", FAMILY_OPT, { "OPTForCausalLM" } },
  { "falcon", FAMILY_FALCON, { "FalconForCausalLM" } },
  { "bloom", FAMILY_BLOOM, { "BloomForCausalLM" } },
  { "vit", FAMILY_VIT, { "ViTForImageClassification" } },
  { "t5", FAMILY_T5, { "T5ForConditionalGeneration" } },
};

static const struct
{
  const char *name;
  PlannerOpType type;
  int variant;
} activations[] = {
  { "gelu", PLANNER_OP_GELU, 0 },
  { "gelu_new", PLANNER_OP_GELU, 1 },
  { "gelu_pytorch_tanh", PLANNER_OP_GELU, 1 },
  { "silu", PLANNER_OP_SILU, 0 },
  { "swish", PLANNER_OP_SILU, 0 },
  { "relu", PLANNER_OP_RELU, 0 },
};

static const struct
{
  const char *name;
  PlannerDType dtype;
} torch_dtypes[] = {
  { "float32", PLANNER_DTYPE_F32 },
  { "float16", PLANNER_DTYPE_F16 },
  { "bfloat16", PLANNER_DTYPE_BF16 },
};

#define DEFAULT_BATCH 8
#define DEFAULT_SEQ 1024
/* Bounds that keep element counts inside 64 bits and a graph inside memory; real models
 * are far below them. */
#define MAX_SIZE G_MAXINT32
#define MAX_LAYERS 4096
#define MAX_NUMEL (G_GINT64_CONSTANT (1) << 62)

typedef struct
{
  const ModelType *type;
  const char *architecture; /* from model_types, not from the config */
  gint64 vocab;             /* padded when --pad-vocab asks */
  gint64 checkpoint_vocab;  /* the config's vocab_size */
  gint64 hidden;
  gint64 layers;
  gint64 heads;
  gint64 kv_heads;
  gint64 head_dim;
  gint64 intermediate;
  gint64 max_positions;
  gint64 type_vocab;
  double eps;
  double rope_theta;
  gboolean has_dtype;
  PlannerDType dtype;
  gboolean tie;
  gboolean qkv_bias;
  gboolean o_bias;
  gboolean mlp_bias;
  /* Sliding-window attention (Mistral, Qwen2): the window, 0 for none, and the first layer
   * that uses it (G_MAXINT64 for none). */
  gint64 sliding_window;
  gint64 sliding_from;
  PlannerOpType act;
  int act_variant;
  /* Gemma: the embedding times sqrt (hidden), norms scale by (1 + weight). */
  gboolean gemma;
  /* Position embeddings that limit the sequence (GPT-2, BERT, OPT), not rotary ones. */
  gboolean learned_positions;
  /* The leading head dims that rotate (GPT-NeoX's partial rotary); 0: all of them. */
  gint64 rotary_dim;
  /* Attention and MLP read the same input and add to it together (GPT-NeoX, Falcon). */
  gboolean parallel_residual;
  /* OPT: the embedding's width (project_in/out when it is not hidden_size) and whether
   * the norms come before attention and MLP (else after the residual add). */
  gint64 embed_dim;
  gboolean norm_before;
  /* Falcon: how query_key_value packs q, k and v (FalconAttention._split_heads), and two
   * norms (ln_attn, ln_mlp) instead of one. */
  enum
  {
    QKV_PER_HEAD,    /* [heads, 3, head_dim] */
    QKV_MULTI_QUERY, /* [heads + 2, head_dim]: every query head, then one k and one v */
    QKV_GROUPED,     /* [kv heads, group + 2, head_dim] */
  } qkv_layout;
  gboolean two_norms;
  /* ViT: image side, patch side, channels; the classes (vocab holds them too, for the
   * sizes checks). */
  gint64 image_size, patch_size, channels, labels;
  /* Llama 3.1's rope_type "llama3": factor, low and high frequency factors, original
   * context (factor 0: plain rotary). */
  double rope_factor, rope_low_freq, rope_high_freq;
  gint64 rope_original_max;
  /* T5: decoder layers, relative position buckets and their reach, a gated feed-forward
   * (wi_0, wi_1), the decoder's output times d_model^-0.5 before the tied lm_head. */
  gint64 decoder_layers, buckets, max_distance;
  gboolean gated, scale_decoder;
  /* Field names as this family spells them, for messages. */
  const char *max_positions_field;
  PlannerHfMoe moe; /* mixtral, qwen2_moe */
} HfConfig;

void
planner_model_options_init (PlannerModelOptions *options)
{
  g_return_if_fail (options != NULL);

  memset (options, 0, sizeof *options);
  options->dtype = PLANNER_DTYPE_F32;
}

gboolean
planner_model_options_check (const PlannerModelOptions *options, GError **error)
{
  const struct
  {
    const char *name;
    gint64 value;
  } fields[] = {
    { "batch", options->batch },
    { "seq", options->seq },
    { "layers", options->layers },
    { "pad_vocab", options->pad_vocab },
    { "kv_replicas", options->kv_replicas },
  };

  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    if (fields[i].value < 0 || fields[i].value > MAX_SIZE)
      {
        g_set_error (
            error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
            "%s must be >= 1 and < 2^31 (or 0 for the model's default), got %" G_GINT64_FORMAT,
            fields[i].name, fields[i].value);
        return FALSE;
      }
  if (options->dtype_set && options->dtype == PLANNER_DTYPE_I64)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "dtype i64 cannot hold weights; use f32, bf16 or f16");
      return FALSE;
    }
  return TRUE;
}

gboolean
planner_model_options_is_default (const PlannerModelOptions *options)
{
  return options->batch == 0 && options->seq == 0 && options->layers == 0 && !options->dtype_set
         && options->pad_vocab == 0 && options->kv_replicas == 0;
}

const char *const *
planner_hf_model_types (void)
{
  static const char *names[G_N_ELEMENTS (model_types) + 1];
  static gsize initialized = 0;

  if (g_once_init_enter (&initialized))
    {
      for (guint i = 0; i < G_N_ELEMENTS (model_types); i++)
        names[i] = model_types[i].model_type;
      g_once_init_leave (&initialized, 1);
    }
  return names;
}

/* ---- Reading config fields: the first error sticks, later reads return their fallback. */

#define REQUIRED G_MININT64

typedef struct
{
  JsonObject *object;
  const char *what;
  GError *error;
} Reader;

/* The member @field, else @alias (HF configs accept both spellings); NULL when absent or null. */
static JsonNode *
reader_lookup (Reader *r, const char *field, const char *alias)
{
  JsonNode *node = json_object_get_member (r->object, field);

  if ((node == NULL || JSON_NODE_HOLDS_NULL (node)) && alias != NULL)
    node = json_object_get_member (r->object, alias);
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return NULL;
  return node;
}

static gboolean
reader_missing (Reader *r, const char *field)
{
  g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s: missing field \"%s\"",
               r->what, field);
  return FALSE;
}

static void
reader_wrong_type (Reader *r, const char *field, const char *expected)
{
  g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
               "%s: field \"%s\" must be %s", r->what, field, expected);
}

static GType
node_value_type (JsonNode *node)
{
  return JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node) : G_TYPE_INVALID;
}

/* A size: every integer field of a config is one, so it must be >= 1. */
static gint64
reader_size (Reader *r, const char *field, const char *alias, gint64 fallback)
{
  JsonNode *node;
  gint64 value;

  if (r->error != NULL)
    return 1;
  node = reader_lookup (r, field, alias);
  if (node == NULL)
    {
      if (fallback == REQUIRED)
        return reader_missing (r, field), 1;
      return fallback;
    }
  if (node_value_type (node) == G_TYPE_INT64)
    value = json_node_get_int (node);
  else if (node_value_type (node) == G_TYPE_DOUBLE
           && json_node_get_double (node) == floor (json_node_get_double (node))
           && fabs (json_node_get_double (node)) < 1e15)
    value = (gint64)json_node_get_double (node);
  else
    return reader_wrong_type (r, field, "an integer"), 1;
  if (value < 1 || value > MAX_SIZE)
    {
      g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "%s: field \"%s\" must be >= 1 and < 2^31, got %" G_GINT64_FORMAT, r->what,
                   field, value);
      return 1;
    }
  return value;
}

/* A positive real (epsilons, rope theta). */
static double
reader_positive (Reader *r, const char *field, double fallback)
{
  JsonNode *node;
  double value;

  if (r->error != NULL)
    return fallback;
  node = reader_lookup (r, field, NULL);
  if (node == NULL)
    return fallback;
  if (node_value_type (node) == G_TYPE_INT64)
    value = json_node_get_int (node);
  else if (node_value_type (node) == G_TYPE_DOUBLE)
    value = json_node_get_double (node);
  else
    return reader_wrong_type (r, field, "a number"), fallback;
  if (!(value > 0 && isfinite (value)))
    {
      g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "%s: field \"%s\" must be a positive number, got %g", r->what, field, value);
      return fallback;
    }
  return value;
}

static gboolean
reader_bool (Reader *r, const char *field, gboolean fallback)
{
  JsonNode *node;

  if (r->error != NULL)
    return fallback;
  node = reader_lookup (r, field, NULL);
  if (node == NULL)
    return fallback;
  if (node_value_type (node) != G_TYPE_BOOLEAN)
    return reader_wrong_type (r, field, "true or false"), fallback;
  return json_node_get_boolean (node);
}

/* @fallback NULL: the field is required. */
static const char *
reader_string (Reader *r, const char *field, const char *alias, const char *fallback)
{
  JsonNode *node;

  if (r->error != NULL)
    return fallback != NULL ? fallback : "";
  node = reader_lookup (r, field, alias);
  if (node == NULL)
    {
      if (fallback == NULL)
        return reader_missing (r, field), "";
      return fallback;
    }
  if (node_value_type (node) != G_TYPE_STRING)
    return reader_wrong_type (r, field, "a string"), "";
  return json_node_get_string (node);
}

static char *
join_strings (const char *const *strings, guint n)
{
  g_autoptr (GString) out = g_string_new (NULL);

  for (guint i = 0; i < n && strings[i] != NULL; i++)
    g_string_append_printf (out, "%s%s", i > 0 ? ", " : "", strings[i]);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static const ModelType *
lookup_model_type (Reader *r)
{
  const char *model_type = reader_string (r, "model_type", NULL, NULL);
  g_autofree char *supported = NULL;

  if (r->error != NULL)
    return NULL;
  for (guint i = 0; i < G_N_ELEMENTS (model_types); i++)
    if (g_strcmp0 (model_types[i].model_type, model_type) == 0)
      return &model_types[i];
  supported = join_strings (planner_hf_model_types (), G_MAXUINT);
  g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL,
               "%s: unknown model_type \"%s\"; supported model types: %s", r->what, model_type,
               supported);
  return NULL;
}

static const char *
lookup_architecture (Reader *r, const ModelType *type)
{
  JsonNode *node = reader_lookup (r, "architectures", NULL);
  const char *name;
  g_autofree char *supported = NULL;

  if (node == NULL)
    return type->architectures[0];
  if (!JSON_NODE_HOLDS_ARRAY (node) || json_array_get_length (json_node_get_array (node)) == 0
      || node_value_type (json_array_get_element (json_node_get_array (node), 0)) != G_TYPE_STRING)
    return reader_wrong_type (r, "architectures", "a list of class names"), NULL;

  name = json_array_get_string_element (json_node_get_array (node), 0);
  for (guint i = 0; i < G_N_ELEMENTS (type->architectures) && type->architectures[i]; i++)
    if (g_str_equal (type->architectures[i], name))
      return type->architectures[i];
  supported = join_strings (type->architectures, G_N_ELEMENTS (type->architectures));
  g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL,
               "%s: unsupported architecture \"%s\" for model_type \"%s\"; supported: %s", r->what,
               name, type->model_type, supported);
  return NULL;
}

static void
read_activation (Reader *r, HfConfig *c, const char *field, const char *fallback)
{
  const char *name = reader_string (r, field, NULL, fallback);
  g_autoptr (GString) supported = g_string_new (NULL);

  if (r->error != NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (activations); i++)
    {
      if (g_str_equal (activations[i].name, name))
        {
          c->act = activations[i].type;
          c->act_variant = activations[i].variant;
          return;
        }
      g_string_append_printf (supported, "%s%s", i > 0 ? ", " : "", activations[i].name);
    }
  g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_OP_TYPE,
               "%s: %s \"%s\" is not supported; supported: %s", r->what, field, name,
               supported->str);
}

static void
read_dtype (Reader *r, HfConfig *c)
{
  /* Newer transformers write "dtype". */
  const char *name = reader_string (r, "torch_dtype", "dtype", "");

  if (r->error != NULL || *name == '\0')
    return;
  for (guint i = 0; i < G_N_ELEMENTS (torch_dtypes); i++)
    if (g_str_equal (torch_dtypes[i].name, name))
      {
        c->has_dtype = TRUE;
        c->dtype = torch_dtypes[i].dtype;
        return;
      }
  g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
               "%s: torch_dtype \"%s\" is not supported; use float32, float16 or bfloat16", r->what,
               name);
}

/* A config switch whose other value changes the math in a way the graph does not model:
 * refused, so a trial run never compares against a different model than the checkpoint's. */
static void
reader_require_bool (Reader *r, const char *field, gboolean fallback, const char *why)
{
  gboolean value = reader_bool (r, field, fallback);

  if (r->error == NULL && value != fallback)
    g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                 "%s: %s %s is not supported: %s; only %s %s is modelled", r->what, field,
                 value ? "true" : "false", why, field, fallback ? "true" : "false");
}

/* Which layers attend through a sliding window: transformers 5 lists "layer_types"
 * ("sliding_attention" or "full_attention" per layer); before it, Mistral slid in every layer
 * when "sliding_window" is set and Qwen2 from layer "max_window_layers" on when
 * "use_sliding_window" is true. */
static void
read_sliding_window (Reader *r, HfConfig *c)
{
  JsonNode *types = reader_lookup (r, "layer_types", NULL);
  JsonNode *window = reader_lookup (r, "sliding_window", NULL);

  /* Qwen2MoeConfig writes 0 for "no window" when use_sliding_window is false. */
  if (window != NULL && node_value_type (window) == G_TYPE_INT64 && json_node_get_int (window) == 0)
    return;
  c->sliding_window = reader_size (r, "sliding_window", NULL, 0);
  c->sliding_from = G_MAXINT64;
  if (r->error != NULL || c->sliding_window == 0)
    return;
  if (types != NULL)
    {
      JsonArray *list;

      if (!JSON_NODE_HOLDS_ARRAY (types))
        {
          reader_wrong_type (r, "layer_types", "a list of attention kinds");
          return;
        }
      list = json_node_get_array (types);
      for (guint i = 0; i < json_array_get_length (list); i++)
        if (node_value_type (json_array_get_element (list, i)) == G_TYPE_STRING
            && g_str_equal (json_array_get_string_element (list, i), "sliding_attention"))
          {
            c->sliding_from = i;
            break;
          }
    }
  else if (g_str_equal (c->type->model_type, "mistral"))
    c->sliding_from = 0;
  else if (g_str_equal (c->type->model_type, "qwen2")
           && reader_bool (r, "use_sliding_window", FALSE))
    c->sliding_from = reader_size (r, "max_window_layers", NULL, 28);
}

/* The rotary base. transformers 5 writes it inside "rope_parameters" (with "rope_type") and
 * no longer at the top, where transformers 4 put it beside "rope_scaling"; reading only the
 * top would silently give 10000 to a Qwen2 checkpoint trained with 1e6. Only the plain
 * rotary embedding is modelled: a scaled one (linear, dynamic, yarn, llama3, ...) changes
 * every position's angles and is refused rather than approximated. */
static double read_rope_theta_from (Reader *r, double theta, HfConfig *llama3);

static double
read_rope_theta (Reader *r)
{
  return read_rope_theta_from (r, reader_positive (r, "rope_theta", 10000.0), NULL);
}

/* Llama 3.1's rope_type "llama3" (issue 16): its four numbers into @c. */
static void
read_rope_llama3 (Reader *sub, HfConfig *c)
{
  c->rope_factor = reader_positive (sub, "factor", 8.0);
  c->rope_low_freq = reader_positive (sub, "low_freq_factor", 1.0);
  c->rope_high_freq = reader_positive (sub, "high_freq_factor", 4.0);
  c->rope_original_max = reader_size (sub, "original_max_position_embeddings", NULL, 8192);
  if (sub->error == NULL && !(c->rope_high_freq > c->rope_low_freq))
    g_set_error (&sub->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                 "%s: high_freq_factor %g must be above low_freq_factor %g", sub->what,
                 c->rope_high_freq, c->rope_low_freq);
}

/* As read_rope_theta, from @theta when neither object gives one; with @llama3, rope_type
 * "llama3" is read into it rather than refused. */
static double
read_rope_theta_from (Reader *r, double theta, HfConfig *llama3)
{
  const char *const fields[] = { "rope_parameters", "rope_scaling" };

  for (guint i = 0; i < G_N_ELEMENTS (fields) && r->error == NULL; i++)
    {
      JsonNode *node = reader_lookup (r, fields[i], NULL);
      g_autofree char *what = NULL;
      const char *type;

      if (node == NULL)
        continue;
      if (!JSON_NODE_HOLDS_OBJECT (node))
        {
          reader_wrong_type (r, fields[i], "an object");
          break;
        }
      what = g_strdup_printf ("%s: %s", r->what, fields[i]);
      Reader sub = { json_node_get_object (node), what, NULL };
      type = reader_string (&sub, "rope_type", "type", "default");
      if (sub.error == NULL && llama3 != NULL && g_str_equal (type, "llama3"))
        read_rope_llama3 (&sub, llama3);
      else if (sub.error == NULL && !g_str_equal (type, "default"))
        g_set_error (&sub.error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                     "%s: rope_type \"%s\" is not supported: only the default rotary "
                     "embedding is modelled (rope_type \"default\", or no %s)",
                     what, type, fields[i]);
      theta = reader_positive (&sub, "rope_theta", theta);
      if (sub.error != NULL)
        {
          r->error = sub.error;
          break;
        }
    }
  return theta;
}

/* ---- The model zoo's families (issue 16): what each reads beyond its base family. */

/* Gemma is LLaMA's graph with three changes: the embedding is multiplied by sqrt (hidden),
 * each RMSNorm scales by (1 + weight), and the MLP's gate is GeLU's tanh form. transformers
 * 4 read the activation from "hidden_activation" (tanh when absent) and ignored
 * "hidden_act"; transformers 5 reads "hidden_act" and takes its legacy "gelu" for the tanh
 * form. The embedding is tied to lm_head unless the config says otherwise. */
static void
parse_gemma (Reader *r, HfConfig *c)
{
  c->gemma = TRUE;
  c->tie = reader_bool (r, "tie_word_embeddings", TRUE);
  if (reader_lookup (r, "hidden_activation", NULL) != NULL)
    read_activation (r, c, "hidden_activation", NULL);
  else if (g_str_equal (reader_string (r, "hidden_act", NULL, "gelu_pytorch_tanh"), "gelu"))
    read_activation (r, c, "hidden_activation", "gelu_pytorch_tanh");
  else
    read_activation (r, c, "hidden_act", "gelu_pytorch_tanh");
  reader_require_bool (r, "use_bidirectional_attention", FALSE,
                       "Gemma's bidirectional variant does not attend causally");
}

/* Phi-3: LLaMA's sizes and names, with q, k and v in one qkv_proj and gate and up in one
 * gate_up_proj; a sliding window in every layer when "sliding_window" is set. */
static void
parse_phi3 (Reader *r, HfConfig *c)
{
  c->vocab = reader_size (r, "vocab_size", NULL, REQUIRED);
  c->hidden = reader_size (r, "hidden_size", NULL, REQUIRED);
  c->intermediate = reader_size (r, "intermediate_size", NULL, REQUIRED);
  c->layers = reader_size (r, "num_hidden_layers", NULL, REQUIRED);
  c->heads = reader_size (r, "num_attention_heads", NULL, REQUIRED);
  c->kv_heads = reader_size (r, "num_key_value_heads", NULL, c->heads);
  c->head_dim = reader_size (r, "head_dim", NULL, 0);
  c->max_positions = reader_size (r, "max_position_embeddings", NULL, 4096);
  c->max_positions_field = "max_position_embeddings";
  c->eps = reader_positive (r, "rms_norm_eps", 1e-5);
  c->rope_theta = read_rope_theta (r);
  c->tie = reader_bool (r, "tie_word_embeddings", FALSE);
  reader_require_bool (r, "attention_bias", FALSE, "qkv_proj and o_proj would have biases");
  if (r->error == NULL && reader_lookup (r, "partial_rotary_factor", NULL) != NULL
      && reader_positive (r, "partial_rotary_factor", 1.0) != 1.0)
    g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                 "%s: partial_rotary_factor other than 1 is not supported for phi3", r->what);
  read_activation (r, c, "hidden_act", "silu");
  c->sliding_window = reader_size (r, "sliding_window", NULL, 0);
  c->sliding_from = c->sliding_window > 0 ? 0 : G_MAXINT64;
}

/* GPT-NeoX (Pythia): q, k and v fused per head in query_key_value, a rotary embedding on the
 * first rotary_pct of each head (transformers 4: "rotary_pct", "rotary_emb_base";
 * transformers 5: "partial_rotary_factor" and "rope_theta" in "rope_parameters"), LayerNorms
 * and biases, and attention and MLP in parallel when "use_parallel_residual". */
static void
parse_neox (Reader *r, HfConfig *c)
{
  double factor = reader_positive (r, "rotary_pct", 0.25);
  JsonNode *rope = reader_lookup (r, "rope_parameters", NULL);

  c->vocab = reader_size (r, "vocab_size", NULL, REQUIRED);
  c->hidden = reader_size (r, "hidden_size", NULL, REQUIRED);
  c->intermediate = reader_size (r, "intermediate_size", NULL, REQUIRED);
  c->layers = reader_size (r, "num_hidden_layers", NULL, REQUIRED);
  c->heads = reader_size (r, "num_attention_heads", NULL, REQUIRED);
  c->kv_heads = c->heads;
  c->max_positions = reader_size (r, "max_position_embeddings", NULL, 2048);
  c->max_positions_field = "max_position_embeddings";
  c->eps = reader_positive (r, "layer_norm_eps", 1e-5);
  c->rope_theta = read_rope_theta_from (
      r, reader_positive (r, "rotary_emb_base", reader_positive (r, "rope_theta", 10000.0)), NULL);
  if (r->error == NULL && rope != NULL && JSON_NODE_HOLDS_OBJECT (rope))
    {
      g_autofree char *what = g_strdup_printf ("%s: rope_parameters", r->what);
      Reader sub = { json_node_get_object (rope), what, NULL };
      factor = reader_positive (&sub, "partial_rotary_factor", factor);
      if (sub.error != NULL)
        r->error = sub.error;
    }
  c->tie = reader_bool (r, "tie_word_embeddings", FALSE);
  c->qkv_bias = c->o_bias = reader_bool (r, "attention_bias", TRUE);
  c->mlp_bias = TRUE;
  c->parallel_residual = reader_bool (r, "use_parallel_residual", TRUE);
  read_activation (r, c, "hidden_act", "gelu");
  if (r->error == NULL && c->hidden % c->heads == 0)
    {
      /* transformers: int (head_size * factor) */
      c->rotary_dim = (gint64)((double)(c->hidden / c->heads) * factor);
      if (factor > 1 || c->rotary_dim % 2 != 0)
        g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                     "%s: rotary_pct %g makes %" G_GINT64_FORMAT
                     " rotary dims of a head of %" G_GINT64_FORMAT
                     "; they must be even and at most the head",
                     r->what, factor, c->rotary_dim, c->hidden / c->heads);
    }
}

/* OPT: learned positions offset by 2 rows, biases everywhere, ReLU; an embedding narrower
 * than the model (word_embed_proj_dim, opt-350m) goes through project_in and project_out;
 * do_layer_norm_before false puts the norms after the residual adds (and drops the final
 * one). */
static void
parse_opt (Reader *r, HfConfig *c)
{
  c->vocab = reader_size (r, "vocab_size", NULL, REQUIRED);
  c->hidden = reader_size (r, "hidden_size", NULL, REQUIRED);
  c->intermediate = reader_size (r, "ffn_dim", NULL, REQUIRED);
  c->layers = reader_size (r, "num_hidden_layers", NULL, REQUIRED);
  c->heads = reader_size (r, "num_attention_heads", NULL, REQUIRED);
  c->kv_heads = c->heads;
  c->max_positions = reader_size (r, "max_position_embeddings", NULL, 2048);
  c->max_positions_field = "max_position_embeddings";
  c->learned_positions = TRUE;
  c->embed_dim = reader_size (r, "word_embed_proj_dim", NULL, c->hidden);
  c->eps = 1e-5; /* nn.LayerNorm's default: OPT has no field for it */
  c->tie = reader_bool (r, "tie_word_embeddings", TRUE);
  c->qkv_bias = c->o_bias = c->mlp_bias = reader_bool (r, "enable_bias", TRUE);
  c->norm_before = reader_bool (r, "do_layer_norm_before", TRUE);
  read_activation (r, c, "activation_function", "relu");
  reader_require_bool (r, "layer_norm_elementwise_affine", TRUE,
                       "the norms would have no weight and bias");
  reader_require_bool (r, "_remove_final_layer_norm", FALSE,
                       "checkpoints from before transformers 4.20.1 drop the final norm");
}

/* Falcon: query_key_value packed one of three ways (new_decoder_architecture: grouped by
 * kv head; multi_query: every query head then one k and one v; else per head), rotary
 * positions, attention and MLP in parallel (parallel_attn), tied embedding. */
static void
parse_falcon (Reader *r, HfConfig *c)
{
  gboolean new_arch, multi_query;

  c->vocab = reader_size (r, "vocab_size", NULL, REQUIRED);
  c->hidden = reader_size (r, "hidden_size", NULL, REQUIRED);
  c->layers = reader_size (r, "num_hidden_layers", NULL, REQUIRED);
  c->heads = reader_size (r, "num_attention_heads", NULL, REQUIRED);
  c->intermediate = reader_size (r, "ffn_hidden_size", NULL, 4 * c->hidden);
  c->max_positions = reader_size (r, "max_position_embeddings", NULL, 2048);
  c->max_positions_field = "max_position_embeddings";
  c->eps = reader_positive (r, "layer_norm_epsilon", 1e-5);
  c->rope_theta = read_rope_theta (r);
  c->tie = reader_bool (r, "tie_word_embeddings", TRUE);
  c->qkv_bias = c->o_bias = c->mlp_bias = reader_bool (r, "bias", FALSE);
  c->parallel_residual = reader_bool (r, "parallel_attn", TRUE);
  new_arch = reader_bool (r, "new_decoder_architecture", FALSE);
  multi_query = reader_bool (r, "multi_query", TRUE);
  if (new_arch)
    {
      c->qkv_layout = QKV_GROUPED;
      c->kv_heads = reader_size (r, "num_kv_heads", NULL, c->heads);
      c->two_norms = reader_size (r, "num_ln_in_parallel_attn", NULL, 2) == 2;
    }
  else
    {
      c->qkv_layout = multi_query ? QKV_MULTI_QUERY : QKV_PER_HEAD;
      c->kv_heads = multi_query ? 1 : c->heads;
    }
  read_activation (r, c, "activation", "gelu");
  reader_require_bool (r, "alibi", FALSE, "Falcon's ALiBi variant (falcon-rw) is not modelled");
  reader_require_bool (r, "apply_residual_connection_post_layernorm", FALSE,
                       "the residual would start from the norm's output");
  if (r->error == NULL && new_arch && !c->parallel_residual)
    g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                 "%s: new_decoder_architecture without parallel_attn is not supported", r->what);
}

/* BLOOM: ALiBi instead of position embeddings, a LayerNorm right after the embedding,
 * query_key_value per head as GPT-NeoX's, GeLU's tanh form, biases, tied embedding. */
static void
parse_bloom (Reader *r, HfConfig *c)
{
  c->vocab = reader_size (r, "vocab_size", NULL, REQUIRED);
  c->hidden = reader_size (r, "hidden_size", "n_embed", REQUIRED);
  c->layers = reader_size (r, "n_layer", "num_hidden_layers", REQUIRED);
  c->heads = reader_size (r, "n_head", "num_attention_heads", REQUIRED);
  c->kv_heads = c->heads;
  c->intermediate = 4 * c->hidden;
  c->max_positions = G_MAXINT32; /* ALiBi has no table */
  c->max_positions_field = "n_positions";
  c->eps = reader_positive (r, "layer_norm_epsilon", 1e-5);
  c->tie = reader_bool (r, "tie_word_embeddings", TRUE);
  c->qkv_bias = c->o_bias = c->mlp_bias = TRUE;
  c->act = PLANNER_OP_GELU;
  c->act_variant = 1;
  reader_require_bool (r, "apply_residual_connection_post_layernorm", FALSE,
                       "the residual would start from the norm's output");
  reader_require_bool (r, "slow_but_exact", FALSE,
                       "it emulates a pretraining_tp split of the dense layers' sums");
}

/* ViT for image classification: patches by a Conv2D (kernel = stride = patch_size), the
 * class token before them, learned positions, BERT's encoder with the norms before attention
 * and MLP, the class token's state through the classifier. The classes are id2label's
 * entries (else "num_labels", else transformers' default of 2). */
static void
parse_vit (Reader *r, HfConfig *c)
{
  JsonNode *labels = reader_lookup (r, "id2label", NULL);

  c->hidden = reader_size (r, "hidden_size", NULL, REQUIRED);
  c->layers = reader_size (r, "num_hidden_layers", NULL, REQUIRED);
  c->heads = reader_size (r, "num_attention_heads", NULL, REQUIRED);
  c->kv_heads = c->heads;
  c->intermediate = reader_size (r, "intermediate_size", NULL, REQUIRED);
  c->image_size = reader_size (r, "image_size", NULL, 224);
  c->patch_size = reader_size (r, "patch_size", NULL, 16);
  c->channels = reader_size (r, "num_channels", NULL, 3);
  c->eps = reader_positive (r, "layer_norm_eps", 1e-12);
  c->qkv_bias = reader_bool (r, "qkv_bias", TRUE);
  c->o_bias = c->mlp_bias = TRUE;
  read_activation (r, c, "hidden_act", "gelu");
  if (labels != NULL && JSON_NODE_HOLDS_OBJECT (labels))
    c->labels = json_object_get_size (json_node_get_object (labels));
  else
    c->labels = reader_size (r, "num_labels", NULL, 2);
  if (r->error == NULL && (c->labels < 1 || c->image_size % c->patch_size != 0))
    g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                 "%s: image_size %" G_GINT64_FORMAT
                 " is not a whole number of patches of %" G_GINT64_FORMAT " (or id2label is empty)",
                 r->what, c->image_size, c->patch_size);
  /* The sequence is the patches and the class token, fixed by the image. */
  c->max_positions = (c->image_size / c->patch_size) * (c->image_size / c->patch_size) + 1;
  c->max_positions_field = "(image_size / patch_size)^2 + 1";
  c->learned_positions = TRUE;
  c->vocab = c->labels;
}

/* T5: an encoder and a decoder of RMSNorms (T5LayerNorm), attention without the 1/sqrt(d)
 * scale whose scores take a learned bias by relative position bucket (one table each, in
 * block 0, shared by the blocks), cross-attention, ReLU or gated feed-forwards, one shared
 * embedding that lm_head reuses (transformers 5 always ties it; the decoder's output is
 * scaled by d_model^-0.5 unless scale_decoder_outputs, or before transformers 5
 * tie_word_embeddings, is false, as in T5 v1.1). */
static void
parse_t5 (Reader *r, HfConfig *c)
{
  const char *ff;

  c->vocab = reader_size (r, "vocab_size", NULL, REQUIRED);
  c->hidden = reader_size (r, "d_model", NULL, REQUIRED);
  c->head_dim = reader_size (r, "d_kv", NULL, REQUIRED);
  c->intermediate = reader_size (r, "d_ff", NULL, REQUIRED);
  c->layers = reader_size (r, "num_layers", NULL, REQUIRED);
  c->decoder_layers = reader_size (r, "num_decoder_layers", NULL, c->layers);
  c->heads = reader_size (r, "num_heads", NULL, REQUIRED);
  c->kv_heads = c->heads;
  c->buckets = reader_size (r, "relative_attention_num_buckets", NULL, 32);
  c->max_distance = reader_size (r, "relative_attention_max_distance", NULL, 128);
  c->eps = reader_positive (r, "layer_norm_epsilon", 1e-6);
  c->tie = TRUE;
  /* transformers 5 writes scale_decoder_outputs (and tie_word_embeddings true); before it,
   * tie_word_embeddings false meant no scaling. */
  c->scale_decoder
      = reader_bool (r, "scale_decoder_outputs", reader_bool (r, "tie_word_embeddings", TRUE));
  c->max_positions = G_MAXINT32; /* relative positions have no table */
  c->max_positions_field = "n_positions";
  ff = reader_string (r, "feed_forward_proj", NULL, "relu");
  if (r->error == NULL)
    {
      c->gated = g_str_has_prefix (ff, "gated-");
      if (g_str_equal (ff, "gated-gelu"))
        read_activation (r, c, "feed_forward_proj.gelu", "gelu_new");
      else
        read_activation (r, c, "feed_forward_proj.act", c->gated ? ff + 6 : ff);
    }
  if (r->error == NULL && c->buckets < 4)
    g_set_error (&r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                 "%s: relative_attention_num_buckets must be at least 4", r->what);
}

static gboolean
hf_config_parse (JsonObject *object, const char *what, HfConfig *c, GError **error)
{
  Reader r = { object, what, NULL };
  const char *hidden_field = "hidden_size", *heads_field = "num_attention_heads";

  memset (c, 0, sizeof *c);
  c->sliding_from = G_MAXINT64; /* no sliding window unless the family reads one */
  c->type = lookup_model_type (&r);
  if (c->type != NULL)
    c->architecture = lookup_architecture (&r, c->type);
  if (r.error != NULL)
    {
      g_propagate_error (error, r.error);
      return FALSE;
    }

  switch (c->type->family)
    {
    case FAMILY_GPT2:
      /* GPT-2 configs spell the sizes n_*; GPT2Config maps the usual names onto them. */
      hidden_field = "n_embd";
      heads_field = "n_head";
      c->vocab = reader_size (&r, "vocab_size", NULL, REQUIRED);
      c->max_positions = reader_size (&r, "n_positions", "max_position_embeddings", REQUIRED);
      c->max_positions_field = "n_positions";
      c->learned_positions = TRUE;
      c->hidden = reader_size (&r, "n_embd", "hidden_size", REQUIRED);
      c->layers = reader_size (&r, "n_layer", "num_hidden_layers", REQUIRED);
      c->heads = reader_size (&r, "n_head", "num_attention_heads", REQUIRED);
      c->kv_heads = c->heads;
      c->intermediate = reader_size (&r, "n_inner", NULL, 4 * c->hidden);
      c->eps = reader_positive (&r, "layer_norm_epsilon", 1e-5);
      c->tie = reader_bool (&r, "tie_word_embeddings", TRUE);
      c->qkv_bias = c->o_bias = c->mlp_bias = TRUE;
      read_activation (&r, c, "activation_function", "gelu_new");
      reader_require_bool (&r, "scale_attn_weights", TRUE,
                           "the attention scores would not be divided by sqrt (head size)");
      reader_require_bool (&r, "scale_attn_by_inverse_layer_idx", FALSE,
                           "layer i's scores would also be divided by i + 1");
      break;

    case FAMILY_LLAMA:
      {
        gboolean attention_bias;

        c->vocab = reader_size (&r, "vocab_size", NULL, REQUIRED);
        c->hidden = reader_size (&r, "hidden_size", NULL, REQUIRED);
        c->intermediate = reader_size (&r, "intermediate_size", NULL, REQUIRED);
        c->layers = reader_size (&r, "num_hidden_layers", NULL, REQUIRED);
        c->heads = reader_size (&r, "num_attention_heads", NULL, REQUIRED);
        c->kv_heads = reader_size (&r, "num_key_value_heads", NULL, c->heads);
        /* 0: hidden_size / num_attention_heads, checked below. */
        c->head_dim = reader_size (&r, "head_dim", NULL, 0);
        c->max_positions = reader_size (&r, "max_position_embeddings", NULL, REQUIRED);
        c->max_positions_field = "max_position_embeddings";
        c->eps = reader_positive (&r, "rms_norm_eps", 1e-6);
        c->rope_theta = read_rope_theta_from (&r, reader_positive (&r, "rope_theta", 10000.0), c);
        c->tie = reader_bool (&r, "tie_word_embeddings", FALSE);
        attention_bias = reader_bool (&r, "attention_bias", FALSE);
        /* Qwen2 always has q/k/v biases and never an o_proj bias; LLaMA's attention_bias
         * covers all four projections. */
        c->qkv_bias = attention_bias || g_str_equal (c->type->model_type, "qwen2");
        c->o_bias = attention_bias;
        c->mlp_bias = reader_bool (&r, "mlp_bias", FALSE);
        if (g_str_equal (c->type->model_type, "gemma"))
          parse_gemma (&r, c);
        else
          read_activation (&r, c, "hidden_act", "silu");
        read_sliding_window (&r, c);
      }
      break;

    case FAMILY_BERT:
      c->vocab = reader_size (&r, "vocab_size", NULL, REQUIRED);
      c->hidden = reader_size (&r, "hidden_size", NULL, REQUIRED);
      c->layers = reader_size (&r, "num_hidden_layers", NULL, REQUIRED);
      c->heads = reader_size (&r, "num_attention_heads", NULL, REQUIRED);
      c->kv_heads = c->heads;
      c->intermediate = reader_size (&r, "intermediate_size", NULL, REQUIRED);
      c->max_positions = reader_size (&r, "max_position_embeddings", NULL, 512);
      c->max_positions_field = "max_position_embeddings";
      c->learned_positions = TRUE;
      c->type_vocab = reader_size (&r, "type_vocab_size", NULL, 2);
      c->eps = reader_positive (&r, "layer_norm_eps", 1e-12);
      c->tie = reader_bool (&r, "tie_word_embeddings", TRUE);
      c->qkv_bias = c->o_bias = c->mlp_bias = TRUE;
      read_activation (&r, c, "hidden_act", "gelu");
      reader_require_bool (&r, "is_decoder", FALSE,
                           "a decoder BERT attends causally, this graph bidirectionally");
      break;

    case FAMILY_PHI3:
      parse_phi3 (&r, c);
      break;

    case FAMILY_NEOX:
      parse_neox (&r, c);
      break;

    case FAMILY_OPT:
      parse_opt (&r, c);
      break;

    case FAMILY_FALCON:
      parse_falcon (&r, c);
      break;

    case FAMILY_BLOOM:
      parse_bloom (&r, c);
      break;

    case FAMILY_VIT:
      parse_vit (&r, c);
      break;

    case FAMILY_T5:
      parse_t5 (&r, c);
      break;

    default:
      g_assert_not_reached ();
    }
  if (r.error == NULL && planner_hf_moe_parse (object, what, c->type->model_type, &c->moe, &r.error))
    c->qkv_bias = c->qkv_bias || c->moe.qkv_bias;
  read_dtype (&r, c);
  if (r.error != NULL)
    {
      g_propagate_error (error, r.error);
      return FALSE;
    }

  if (c->head_dim == 0)
    {
      if (c->hidden % c->heads != 0)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                       "%s: %s %" G_GINT64_FORMAT " is not divisible by %s %" G_GINT64_FORMAT
                       ", so the heads cannot have one head size",
                       what, hidden_field, c->hidden, heads_field, c->heads);
          return FALSE;
        }
      c->head_dim = c->hidden / c->heads;
    }
  if (c->heads % c->kv_heads != 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s: num_attention_heads %" G_GINT64_FORMAT
                   " is not divisible by num_key_value_heads %" G_GINT64_FORMAT
                   " (each key/value head serves a whole group of query heads)",
                   what, c->heads, c->kv_heads);
      return FALSE;
    }
  return TRUE;
}

/* --pad-vocab and --kv-replicas (issue 16), checked against the config. */
static gboolean
hf_apply_zoo_options (HfConfig *c, const PlannerModelOptions *options, const char *what,
                      GError **error)
{
  c->checkpoint_vocab = c->vocab;
  if (options->pad_vocab > 0)
    c->vocab = (c->vocab + options->pad_vocab - 1) / options->pad_vocab * options->pad_vocab;
  if (options->kv_replicas <= 1)
    return TRUE;
  if (c->type->family != FAMILY_LLAMA
      && !(c->type->family == FAMILY_FALCON && c->qkv_layout == QKV_MULTI_QUERY))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s: kv_replicas %" G_GINT64_FORMAT " needs grouped key/value heads; "
                   "%s (%s) has none to repeat",
                   what, options->kv_replicas, c->type->model_type, c->architecture);
      return FALSE;
    }
  if (c->heads % (c->kv_heads * options->kv_replicas) != 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s: kv_replicas %" G_GINT64_FORMAT ": %" G_GINT64_FORMAT
                   " kv heads x %" G_GINT64_FORMAT " copies do not divide the %" G_GINT64_FORMAT
                   " query heads; use a kv_replicas that divides %" G_GINT64_FORMAT,
                   what, options->kv_replicas, c->kv_heads, options->kv_replicas, c->heads,
                   c->heads / c->kv_heads);
      return FALSE;
    }
  return TRUE;
}

gboolean
planner_hf_summary (JsonObject *config, const char *what, const char **model_type,
                    const char **architecture, gint64 *layers, gint64 *hidden, GError **error)
{
  HfConfig c;

  if (!hf_config_parse (config, what, &c, error))
    return FALSE;
  *model_type = c.type->model_type;
  *architecture = c.architecture;
  *layers = c.layers;
  *hidden = c.hidden;
  return TRUE;
}

/* ---- Building: helpers that name ops "<prefix><rest>" and keep the first error. */

typedef struct
{
  PlannerGraph *graph;
  PlannerDType dtype;
  gint64 batch;
  gint64 seq;
  gint64 kv_replicas; /* >= 1 */
  char prefix[128];
  PlannerOpAttrs attrs;
  GError *error;
} Builder;

#define DIMS(...)                                                                                  \
  G_N_ELEMENTS (((const gint64[]){ __VA_ARGS__ })), ((const gint64[]){ __VA_ARGS__ })
#define IDS(...) ((const int[]){ __VA_ARGS__ }), G_N_ELEMENTS (((const int[]){ __VA_ARGS__ }))

G_GNUC_PRINTF (2, 3)
static void
b_prefix (Builder *b, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_vsnprintf (b->prefix, sizeof b->prefix, format, args);
  va_end (args);
}

static const char *
b_name (Builder *b, char *buffer, gsize size, const char *rest, const char *suffix)
{
  gsize n = g_snprintf (buffer, size, "%s%s%s", b->prefix, rest, suffix);

  g_assert (n < size);
  return buffer;
}

/* Default attributes, for the caller to adjust before the next op. */
static PlannerOpAttrs *
b_attrs (Builder *b)
{
  planner_op_attrs_init (&b->attrs);
  return &b->attrs;
}

static int
b_input (Builder *b, const char *name, guint rank, const gint64 *shape)
{
  if (b->error != NULL)
    return -1;
  return planner_graph_add_input (b->graph, name, PLANNER_DTYPE_I64, rank, shape, &b->error);
}

static int
b_param (Builder *b, const char *rest, const char *suffix, guint rank, const gint64 *shape)
{
  char name[256];

  if (b->error != NULL)
    return -1;
  b_name (b, name, sizeof name, rest, suffix);
  return planner_graph_add_parameter (b->graph, name, b->dtype, rank, shape, &b->error);
}

/* Returns the op index. @output_name NULL: the graph's default tensor names. */
static int
b_op_n (Builder *b, const char *rest, PlannerOpType type, const PlannerOpAttrs *attrs,
        const int *inputs, guint n_inputs, guint n_outputs, const char *output_name)
{
  char name[256];
  guint ids[PLANNER_MAX_OPERANDS];
  const char *output_names[] = { output_name, NULL };

  if (b->error != NULL)
    return -1;
  g_assert (n_inputs <= G_N_ELEMENTS (ids));
  for (guint i = 0; i < n_inputs; i++)
    {
      g_assert (inputs[i] >= 0);
      ids[i] = inputs[i];
    }
  g_assert (output_name == NULL || n_outputs == 1);
  b_name (b, name, sizeof name, rest, "");
  return planner_graph_add_op (b->graph, name, type, attrs != NULL ? attrs : b_attrs (b), ids,
                               n_inputs, n_outputs, output_name != NULL ? output_names : NULL,
                               &b->error);
}

/* A single-output op; returns its output tensor. */
static int
b_op (Builder *b, const char *rest, PlannerOpType type, const PlannerOpAttrs *attrs,
      const int *inputs, guint n_inputs, const char *output_name)
{
  int op = b_op_n (b, rest, type, attrs, inputs, n_inputs, 1, output_name);

  return op < 0 ? -1 : (int)planner_graph_op_output (b->graph, op, 0);
}

static int
b_unary (Builder *b, const char *rest, PlannerOpType type, int x)
{
  return b_op (b, rest, type, NULL, IDS (x), NULL);
}

static int
b_binary (Builder *b, const char *rest, PlannerOpType type, int x, int y)
{
  return b_op (b, rest, type, NULL, IDS (x, y), NULL);
}

static int
b_activation (Builder *b, const char *rest, const HfConfig *c, int x)
{
  PlannerOpAttrs *attrs = b_attrs (b);

  attrs->variant = c->act_variant;
  return b_op (b, rest, c->act, attrs, IDS (x), NULL);
}

/* x @ w (+ bias); w is [N, K] with @transpose_b (nn.Linear), else [K, N] (GPT-2's Conv1D). */
static int
b_matmul (Builder *b, const char *rest, int x, int w, int bias, gboolean transpose_b, gint64 heads,
          const char *output_name)
{
  PlannerOpAttrs *attrs = b_attrs (b);

  attrs->transpose_b = transpose_b;
  attrs->heads = heads;
  if (bias < 0)
    return b_op (b, rest, PLANNER_OP_MATMUL, attrs, IDS (x, w), output_name);
  return b_op (b, rest, PLANNER_OP_MATMUL, attrs, IDS (x, w, bias), output_name);
}

/* A Linear module "<rest>" with its "<rest>.weight" (and "<rest>.bias"). */
static int
b_linear (Builder *b, const char *rest, int x, gint64 in, gint64 out, gboolean transpose_b,
          gboolean bias, gint64 heads)
{
  int w = transpose_b ? b_param (b, rest, ".weight", DIMS (out, in))
                      : b_param (b, rest, ".weight", DIMS (in, out));
  int bias_id = bias ? b_param (b, rest, ".bias", DIMS (out)) : -1;

  if (b->error != NULL)
    return -1;
  return b_matmul (b, rest, x, w, bias_id, transpose_b, heads, NULL);
}

static int
b_layer_norm (Builder *b, const char *rest, int x, gint64 hidden, double eps,
              const char *output_name)
{
  PlannerOpAttrs *attrs;
  int w = b_param (b, rest, ".weight", DIMS (hidden));
  int bias = b_param (b, rest, ".bias", DIMS (hidden));

  if (b->error != NULL)
    return -1;
  attrs = b_attrs (b);
  attrs->eps = eps;
  return b_op (b, rest, PLANNER_OP_LAYER_NORM, attrs, IDS (x, w, bias), output_name);
}

static int
b_rms_norm (Builder *b, const char *rest, int x, gint64 hidden, double eps)
{
  PlannerOpAttrs *attrs;
  int w = b_param (b, rest, ".weight", DIMS (hidden));

  if (b->error != NULL)
    return -1;
  attrs = b_attrs (b);
  attrs->eps = eps;
  return b_op (b, rest, PLANNER_OP_RMS_NORM, attrs, IDS (x, w), NULL);
}

static int
b_embedding (Builder *b, const char *rest, int ids, int table)
{
  return b_op (b, rest, PLANNER_OP_EMBEDDING, NULL, IDS (ids, table), NULL);
}

static int
b_reshape (Builder *b, const char *rest, int x, guint rank, const gint64 *shape)
{
  PlannerOpAttrs *attrs = b_attrs (b);

  g_assert (rank <= G_N_ELEMENTS (attrs->ints));
  attrs->n_ints = rank;
  memcpy (attrs->ints, shape, rank * sizeof *shape);
  return b_op (b, rest, PLANNER_OP_RESHAPE, attrs, IDS (x), NULL);
}

/* [B, S, H, D] <-> [B, H, S, D] */
static int
b_swap_seq_heads (Builder *b, const char *rest, int x)
{
  PlannerOpAttrs *attrs = b_attrs (b);
  const gint64 perm[] = { 0, 2, 1, 3 };

  attrs->n_ints = G_N_ELEMENTS (perm);
  memcpy (attrs->ints, perm, sizeof perm);
  return b_op (b, rest, PLANNER_OP_TRANSPOSE, attrs, IDS (x), NULL);
}

/* "<attn>.<which>_view" [B, S, heads, hd] and "<attn>.<which>_heads" [B, heads, S, hd]. */
static int
b_split_heads (Builder *b, const char *attn, const char *which, int x, gint64 heads,
               gint64 head_dim)
{
  char rest[128];

  g_snprintf (rest, sizeof rest, "%s.%s_view", attn, which);
  x = b_reshape (b, rest, x, DIMS (b->batch, b->seq, heads, head_dim));
  g_snprintf (rest, sizeof rest, "%s.%s_heads", attn, which);
  return b_swap_seq_heads (b, rest, x);
}

/* "<attn>.merge_heads" [B, S, heads, hd] and "<attn>.merge_view" [B, S, heads * hd]. */
static int
b_merge_heads (Builder *b, const char *attn, int x, gint64 heads, gint64 head_dim)
{
  char rest[128];

  g_snprintf (rest, sizeof rest, "%s.merge_heads", attn);
  x = b_swap_seq_heads (b, rest, x);
  g_snprintf (rest, sizeof rest, "%s.merge_view", attn);
  return b_reshape (b, rest, x, DIMS (b->batch, b->seq, heads * head_dim));
}

static int
b_sdpa (Builder *b, const char *rest, int q, int k, int v, gboolean causal)
{
  PlannerOpAttrs *attrs = b_attrs (b);

  attrs->causal = causal;
  return b_op (b, rest, PLANNER_OP_SDPA, attrs, IDS (q, k, v), NULL);
}

static int
b_rotary (Builder *b, const char *rest, int x, double theta)
{
  PlannerOpAttrs *attrs = b_attrs (b);

  attrs->theta = theta;
  return b_op (b, rest, PLANNER_OP_ROTARY_EMBEDDING, attrs, IDS (x), NULL);
}

/* A key or value projection "<rest>" of the kv heads, [B, S, kv_heads * head_dim]; with
 * kv_replicas R > 1, [B, S, kv_heads * R * head_dim]: the checkpoint's weight (viewed as
 * [kv heads, head_dim, hidden]) goes through "<rest>.repeat_kv", which repeats each head R
 * times, so the projection's heads split over R times more ranks, each computing only its
 * copy (Megatron-LM's replication of kv heads). The weight's gradient sums its copies'. */
static int
b_kv_linear (Builder *b, const char *rest, int x, const HfConfig *c)
{
  const gint64 H = c->hidden, kv = c->kv_heads, hd = c->head_dim, r = b->kv_replicas;
  char name[128];
  int w, bias = -1;

  if (r <= 1)
    return b_linear (b, rest, x, H, kv * hd, TRUE, c->qkv_bias, kv);
  for (guint i = 0; i < (c->qkv_bias ? 2u : 1u); i++)
    {
      PlannerOpAttrs *attrs;
      int t = i == 0 ? b_param (b, rest, ".weight", DIMS (kv, hd, H))
                     : b_param (b, rest, ".bias", DIMS (kv, hd));

      if (b->error != NULL)
        return -1;
      attrs = b_attrs (b);
      attrs->axis = 0;
      attrs->n_ints = 1;
      attrs->ints[0] = r;
      g_snprintf (name, sizeof name, "%s.repeat_kv%s", rest, i == 0 ? "" : "_bias");
      t = b_op (b, name, PLANNER_OP_REPEAT_INTERLEAVE, attrs, IDS (t), NULL);
      g_snprintf (name, sizeof name, "%s.repeat_view%s", rest, i == 0 ? "" : "_bias");
      if (i == 0)
        w = b_reshape (b, name, t, DIMS (kv * r * hd, H));
      else
        bias = b_reshape (b, name, t, DIMS (kv * r * hd));
    }
  if (b->error != NULL)
    return -1;
  return b_matmul (b, rest, x, w, bias, TRUE, kv * r, NULL);
}

/* ---- The families. */

static void
build_gpt2 (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim;
  int ids, positions, wte, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  positions = b_input (b, "position_ids", DIMS (1, b->seq));

  b_prefix (b, "transformer.");
  wte = b_param (b, "wte", ".weight", DIMS (c->vocab, H));
  x = b_embedding (b, "wte", ids, wte);
  x = b_binary (
      b, "embed_add", PLANNER_OP_ADD, x,
      b_embedding (b, "wpe", positions, b_param (b, "wpe", ".weight", DIMS (c->max_positions, H))));
  x = b_unary (b, "drop", PLANNER_OP_DROPOUT, x);

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      PlannerOpAttrs *attrs;
      int h, w, bias, split, q, k, v, a;

      b_prefix (b, "transformer.h.%" G_GINT64_FORMAT ".", i);
      h = b_layer_norm (b, "ln_1", x, H, c->eps, NULL);
      /* HF stores c_attn as [H, 3H]; viewing it as [H, 3, heads, hd] keeps q, k and v
       * splittable by heads (semantics.md 4, "Fused projections"). Same numel. */
      w = b_param (b, "attn.c_attn", ".weight", DIMS (H, 3, n, hd));
      bias = b_param (b, "attn.c_attn", ".bias", DIMS (3, n, hd));
      if (b->error != NULL)
        break;
      attrs = b_attrs (b);
      g_strlcpy (attrs->equation, "bsh,hqnd->bsqnd", sizeof attrs->equation);
      h = b_op (b, "attn.c_attn", PLANNER_OP_EINSUM, attrs, IDS (h, w, bias), NULL);
      if (b->error != NULL)
        break;

      attrs = b_attrs (b);
      attrs->axis = 2;
      attrs->n_ints = 3;
      attrs->ints[0] = attrs->ints[1] = attrs->ints[2] = 1;
      split = b_op_n (b, "attn.split_qkv", PLANNER_OP_SPLIT, attrs, IDS (h), 3, NULL);
      if (split < 0)
        break;
      q = b_split_heads (b, "attn", "q", planner_graph_op_output (b->graph, split, 0), n, hd);
      k = b_split_heads (b, "attn", "k", planner_graph_op_output (b->graph, split, 1), n, hd);
      v = b_split_heads (b, "attn", "v", planner_graph_op_output (b->graph, split, 2), n, hd);
      a = b_sdpa (b, "attn.sdpa", q, k, v, TRUE);
      a = b_merge_heads (b, "attn", a, n, hd);
      a = b_linear (b, "attn.c_proj", a, n * hd, H, FALSE, TRUE, 0);
      a = b_unary (b, "attn.resid_dropout", PLANNER_OP_DROPOUT, a);
      x = b_binary (b, "add_attn", PLANNER_OP_ADD, x, a);

      h = b_layer_norm (b, "ln_2", x, H, c->eps, NULL);
      h = b_linear (b, "mlp.c_fc", h, H, c->intermediate, FALSE, TRUE, 0);
      h = b_activation (b, "mlp.act", c, h);
      h = b_linear (b, "mlp.c_proj", h, c->intermediate, H, FALSE, TRUE, 0);
      h = b_unary (b, "mlp.dropout", PLANNER_OP_DROPOUT, h);
      x = b_binary (b, "add_mlp", PLANNER_OP_ADD, x, h);
    }

  b_prefix (b, "transformer.");
  x = b_layer_norm (b, "ln_f", x, H, c->eps, NULL);
  b_prefix (b, "%s", "");
  if (!c->tie)
    wte = b_param (b, "lm_head", ".weight", DIMS (c->vocab, H));
  if (b->error == NULL)
    x = b_matmul (b, "lm_head", x, wte, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* Gemma's RMSNorm "<rest>": x / rms (x) * (1 + weight), as n + n * weight with n the
 * weightless norm, so the checkpoint's weight is used as stored. */
static int
b_gemma_norm (Builder *b, const char *rest, int x, gint64 hidden, double eps)
{
  PlannerOpAttrs *attrs;
  char name[128];
  int w = b_param (b, rest, ".weight", DIMS (hidden)), n, scaled;

  if (b->error != NULL)
    return -1;
  attrs = b_attrs (b);
  attrs->eps = eps;
  n = b_op (b, rest, PLANNER_OP_RMS_NORM, attrs, IDS (x), NULL);
  g_snprintf (name, sizeof name, "%s.mul_weight", rest);
  scaled = b_binary (b, name, PLANNER_OP_MUL, n, w);
  g_snprintf (name, sizeof name, "%s.add_normed", rest);
  return b_binary (b, name, PLANNER_OP_ADD, n, scaled);
}

/* The LLaMA family's rotary embedding: Llama 3.1's scaled frequencies where the config
 * asks for them (RotaryEmbedding variant 1). */
static int
b_llama_rotary (Builder *b, const char *rest, int x, const HfConfig *c)
{
  PlannerOpAttrs *attrs = b_attrs (b);

  attrs->theta = c->rope_theta;
  if (c->rope_factor > 0)
    {
      attrs->variant = 1;
      attrs->rope_factor = c->rope_factor;
      attrs->rope_low_freq = c->rope_low_freq;
      attrs->rope_high_freq = c->rope_high_freq;
      attrs->rope_original_max = c->rope_original_max;
    }
  return b_op (b, rest, PLANNER_OP_ROTARY_EMBEDDING, attrs, IDS (x), NULL);
}

/* The norms of the LLaMA family: Gemma's, else RMSNorm. */
static int
b_llama_norm (Builder *b, const char *rest, int x, const HfConfig *c)
{
  if (c->gemma)
    return b_gemma_norm (b, rest, x, c->hidden, c->eps);
  return b_rms_norm (b, rest, x, c->hidden, c->eps);
}

static void
build_llama (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, kvr = c->kv_heads * b->kv_replicas, hd = c->head_dim;
  int ids, embed, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));

  b_prefix (b, "model.");
  embed = b_param (b, "embed_tokens", ".weight", DIMS (c->vocab, H));
  x = b_embedding (b, "embed_tokens", ids, embed);
  if (c->gemma)
    {
      PlannerOpAttrs *attrs = b_attrs (b);

      attrs->scale = sqrt ((double)H);
      x = b_op (b, "embed_scale", PLANNER_OP_SCALE, attrs, IDS (x), NULL);
    }

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      int h, q, k, v, a, gate, up;

      b_prefix (b, "model.layers.%" G_GINT64_FORMAT ".", i);
      h = b_llama_norm (b, "input_layernorm", x, c);
      q = b_linear (b, "self_attn.q_proj", h, H, n * hd, TRUE, c->qkv_bias, n);
      k = b_kv_linear (b, "self_attn.k_proj", h, c);
      v = b_kv_linear (b, "self_attn.v_proj", h, c);
      q = b_llama_rotary (b, "self_attn.rotary_q", b_split_heads (b, "self_attn", "q", q, n, hd),
                          c);
      k = b_llama_rotary (b, "self_attn.rotary_k", b_split_heads (b, "self_attn", "k", k, kvr, hd),
                          c);
      v = b_split_heads (b, "self_attn", "v", v, kvr, hd);
      /* k and v keep their kv heads: the SDPA rule maps each group of query heads onto
       * one of them (GQA). */
      a = b_sdpa (b, "self_attn.sdpa", q, k, v, TRUE);
      a = b_merge_heads (b, "self_attn", a, n, hd);
      a = b_linear (b, "self_attn.o_proj", a, n * hd, H, TRUE, c->o_bias, 0);
      x = b_binary (b, "add_attn", PLANNER_OP_ADD, x, a);

      h = b_llama_norm (b, "post_attention_layernorm", x, c);
      if (b->error == NULL && planner_hf_moe_is_sparse (&c->moe, i))
        {
          h = planner_hf_moe_block (b->graph, b->prefix, b->dtype, &c->moe, b->batch, b->seq, H,
                                    c->act, c->act_variant, h, &b->error);
          x = b_binary (b, "add_mlp", PLANNER_OP_ADD, x, h);
          continue;
        }
      gate = b_linear (b, "mlp.gate_proj", h, H, c->intermediate, TRUE, c->mlp_bias, 0);
      up = b_linear (b, "mlp.up_proj", h, H, c->intermediate, TRUE, c->mlp_bias, 0);
      gate = b_activation (b, "mlp.act_fn", c, gate);
      h = b_binary (b, "mlp.mul", PLANNER_OP_MUL, gate, up);
      h = b_linear (b, "mlp.down_proj", h, c->intermediate, H, TRUE, c->mlp_bias, 0);
      x = b_binary (b, "add_mlp", PLANNER_OP_ADD, x, h);
    }

  b_prefix (b, "model.");
  x = b_llama_norm (b, "norm", x, c);
  b_prefix (b, "%s", "");
  if (!c->tie)
    embed = b_param (b, "lm_head", ".weight", DIMS (c->vocab, H));
  if (b->error == NULL)
    x = b_matmul (b, "lm_head", x, embed, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* An Einsum projection "<rest>" whose weight "<rest>.weight" is stored [rows, in] and viewed
 * as @w_dims (the same elements); @equation contracts x's last dim with the weight's. */
static int
b_fused_linear (Builder *b, const char *rest, int x, const char *equation, guint rank,
                const gint64 *w_dims)
{
  PlannerOpAttrs *attrs;
  int w = b_param (b, rest, ".weight", rank, w_dims);

  if (b->error != NULL)
    return -1;
  attrs = b_attrs (b);
  g_strlcpy (attrs->equation, equation, sizeof attrs->equation);
  return b_op (b, rest, PLANNER_OP_EINSUM, attrs, IDS (x, w), NULL);
}

/* Splits @x's dim @axis into @n parts of @size; returns the op, whose output i is part i. */
static int
b_chunks (Builder *b, const char *rest, int x, int axis, guint n, const gint64 *sizes)
{
  PlannerOpAttrs *attrs = b_attrs (b);

  attrs->axis = axis;
  attrs->n_ints = n;
  memcpy (attrs->ints, sizes, n * sizeof *sizes);
  return b_op_n (b, rest, PLANNER_OP_SPLIT, attrs, &x, 1, n, NULL);
}

/* A fused q | k | v weight @w [heads + 2 kv, hd, hidden] cut into its query, key and value
 * rows ("<module>.split", kept whole on every rank), then three projections of @h named
 * "<module>" (the query's, split by heads from the whole weight, so without communication),
 * "<module>.k" and "<module>.v"; k and v heads repeated @replicas times (--kv-replicas).
 * Returns q [B, heads, S, hd] and k, v [B, kv x replicas, S, hd] ("<attn>.{q,k,v}_heads"). */
static gboolean
b_cut_qkv (Builder *b, const char *module, const char *attn, int h, int w, gint64 n, gint64 kv,
           gint64 replicas, int *q, int *k, int *v)
{
  const gint64 parts[] = { n, kv, kv };
  char names[3][128], name[160];
  int split, out[3];

  g_snprintf (names[0], sizeof names[0], "%s", module);
  g_snprintf (names[1], sizeof names[1], "%s.k", module);
  g_snprintf (names[2], sizeof names[2], "%s.v", module);
  g_snprintf (name, sizeof name, "%s.split", module);
  split = b_chunks (b, name, w, 0, 3, parts);
  if (split < 0)
    return FALSE;
  for (guint i = 0; i < 3; i++)
    {
      PlannerOpAttrs *attrs;
      int wi = planner_graph_op_output (b->graph, split, i);

      if (i > 0 && replicas > 1)
        {
          attrs = b_attrs (b);
          attrs->axis = 0;
          attrs->n_ints = 1;
          attrs->ints[0] = replicas;
          g_snprintf (name, sizeof name, "%s.repeat_kv", names[i]);
          wi = b_op (b, name, PLANNER_OP_REPEAT_INTERLEAVE, attrs, IDS (wi), NULL);
          if (wi < 0)
            return FALSE;
        }
      attrs = b_attrs (b);
      g_strlcpy (attrs->equation, "bsh,ndh->bsnd", sizeof attrs->equation);
      out[i] = b_op (b, names[i], PLANNER_OP_EINSUM, attrs, IDS (h, wi), NULL);
    }
  for (guint i = 0; i < 3; i++)
    {
      g_snprintf (name, sizeof name, "%s.%c_heads", attn, "qkv"[i]);
      int t = b_swap_seq_heads (b, name, out[i]);
      *(i == 0 ? q : i == 1 ? k : v) = t;
    }
  return b->error == NULL;
}

/* Phi-3. qkv_proj is stored [(heads + 2 kv heads) x head_dim, hidden] as q | k | v; with as
 * many kv heads as query heads it is viewed as [3, heads, head_dim, hidden] so that column
 * parallelism splits each of q, k and v by heads (semantics.md 4, "Fused projections"); with
 * grouped kv heads the three parts have different sizes: it is viewed as
 * [heads + 2 kv heads, head_dim, hidden] and cut into q, k and v rows (b_cut_qkv), whole on
 * every rank, whose projections split by heads. gate_up_proj [2 x intermediate, hidden] is viewed
 * as [2, intermediate, hidden]: gate, then up. */
static void
build_phi3 (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, kv = c->kv_heads, hd = c->head_dim, I = c->intermediate;
  const gboolean fused_heads = kv == n;
  int ids, embed, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  b_prefix (b, "model.");
  embed = b_param (b, "embed_tokens", ".weight", DIMS (c->vocab, H));
  x = b_embedding (b, "embed_tokens", ids, embed);

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      int h, qkv, split, q, k, v, a, gu;

      b_prefix (b, "model.layers.%" G_GINT64_FORMAT ".", i);
      h = b_rms_norm (b, "input_layernorm", x, H, c->eps);
      if (fused_heads)
        {
          const gint64 ones[] = { 1, 1, 1 };

          qkv = b_fused_linear (b, "self_attn.qkv_proj", h, "bsh,qndh->bsqnd", DIMS (3, n, hd, H));
          split = b_chunks (b, "self_attn.split_qkv", qkv, 2, 3, ones);
        }
      else
        {
          int w = b_param (b, "self_attn.qkv_proj", ".weight", DIMS (n + 2 * kv, hd, H));

          if (b->error != NULL
              || !b_cut_qkv (b, "self_attn.qkv_proj", "self_attn", h, w, n, kv, 1, &q, &k, &v))
            break;
          split = -1;
        }
      if (fused_heads)
        {
          if (split < 0)
            break;
          q = b_split_heads (b, "self_attn", "q", planner_graph_op_output (b->graph, split, 0), n,
                             hd);
          k = b_split_heads (b, "self_attn", "k", planner_graph_op_output (b->graph, split, 1), kv,
                             hd);
          v = b_split_heads (b, "self_attn", "v", planner_graph_op_output (b->graph, split, 2), kv,
                             hd);
        }
      q = b_rotary (b, "self_attn.rotary_q", q, c->rope_theta);
      k = b_rotary (b, "self_attn.rotary_k", k, c->rope_theta);
      a = b_sdpa (b, "self_attn.sdpa", q, k, v, TRUE);
      a = b_merge_heads (b, "self_attn", a, n, hd);
      a = b_linear (b, "self_attn.o_proj", a, n * hd, H, TRUE, FALSE, 0);
      x = b_binary (b, "add_attn", PLANNER_OP_ADD, x, a);

      h = b_rms_norm (b, "post_attention_layernorm", x, H, c->eps);
      gu = b_fused_linear (b, "mlp.gate_up_proj", h, "bsh,gih->bsgi", DIMS (2, I, H));
      {
        const gint64 ones[] = { 1, 1 };
        int chunks = b_chunks (b, "mlp.chunk", gu, 2, 2, ones), gate, up;

        if (chunks < 0)
          break;
        gate = b_reshape (b, "mlp.gate_view", planner_graph_op_output (b->graph, chunks, 0),
                          DIMS (b->batch, b->seq, I));
        up = b_reshape (b, "mlp.up_view", planner_graph_op_output (b->graph, chunks, 1),
                        DIMS (b->batch, b->seq, I));
        gate = b_activation (b, "mlp.activation_fn", c, gate);
        h = b_binary (b, "mlp.mul", PLANNER_OP_MUL, up, gate);
      }
      h = b_linear (b, "mlp.down_proj", h, I, H, TRUE, FALSE, 0);
      x = b_binary (b, "add_mlp", PLANNER_OP_ADD, x, h);
    }

  b_prefix (b, "model.");
  x = b_rms_norm (b, "norm", x, H, c->eps);
  b_prefix (b, "%s", "");
  if (!c->tie)
    embed = b_param (b, "lm_head", ".weight", DIMS (c->vocab, H));
  if (b->error == NULL)
    x = b_matmul (b, "lm_head", x, embed, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* The rotary embedding "<rest>" on the first @rotary_dim of x's head dim [B, H, S, D] (all
 * of it when 0 or D), the rest passed through (GPT-NeoX). */
static int
b_partial_rotary (Builder *b, const char *rest, int x, gint64 head_dim, gint64 rotary_dim,
                  double theta)
{
  char name[128];
  const gint64 parts[] = { rotary_dim, head_dim - rotary_dim };
  PlannerOpAttrs *attrs;
  int split, rot;

  if (rotary_dim == 0 || rotary_dim == head_dim)
    return b_rotary (b, rest, x, theta);
  g_snprintf (name, sizeof name, "%s.split", rest);
  split = b_chunks (b, name, x, 3, 2, parts);
  if (split < 0)
    return -1;
  rot = b_rotary (b, rest, planner_graph_op_output (b->graph, split, 0), theta);
  if (b->error != NULL)
    return -1;
  attrs = b_attrs (b);
  attrs->axis = 3;
  g_snprintf (name, sizeof name, "%s.concat", rest);
  return b_op (b, name, PLANNER_OP_CONCAT, attrs,
               IDS (rot, (int)planner_graph_op_output (b->graph, split, 1)), NULL);
}

/* GPT-NeoX. query_key_value is stored [heads x 3 x head_dim, hidden], q, k and v per head,
 * and viewed as [heads, 3, head_dim, hidden]: column parallelism splits the heads. */
static void
build_neox (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim, I = c->intermediate;
  int ids, embed, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  b_prefix (b, "gpt_neox.");
  embed = b_param (b, "embed_in", ".weight", DIMS (c->vocab, H));
  x = b_embedding (b, "embed_in", ids, embed);

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      PlannerOpAttrs *attrs;
      const gint64 ones[] = { 1, 1, 1 };
      int h, w, bias = -1, qkv, split, q, k, v, a;

      b_prefix (b, "gpt_neox.layers.%" G_GINT64_FORMAT ".", i);
      h = b_layer_norm (b, "input_layernorm", x, H, c->eps, NULL);
      w = b_param (b, "attention.query_key_value", ".weight", DIMS (n, 3, hd, H));
      if (c->qkv_bias)
        bias = b_param (b, "attention.query_key_value", ".bias", DIMS (n, 3, hd));
      if (b->error != NULL)
        break;
      attrs = b_attrs (b);
      g_strlcpy (attrs->equation, "bsh,nqdh->bsnqd", sizeof attrs->equation);
      qkv = bias < 0
                ? b_op (b, "attention.query_key_value", PLANNER_OP_EINSUM, attrs, IDS (h, w), NULL)
                : b_op (b, "attention.query_key_value", PLANNER_OP_EINSUM, attrs, IDS (h, w, bias),
                        NULL);
      split = b_chunks (b, "attention.split_qkv", qkv, 3, 3, ones);
      if (split < 0)
        break;
      q = b_split_heads (b, "attention", "q", planner_graph_op_output (b->graph, split, 0), n, hd);
      k = b_split_heads (b, "attention", "k", planner_graph_op_output (b->graph, split, 1), n, hd);
      v = b_split_heads (b, "attention", "v", planner_graph_op_output (b->graph, split, 2), n, hd);
      q = b_partial_rotary (b, "attention.rotary_q", q, hd, c->rotary_dim, c->rope_theta);
      k = b_partial_rotary (b, "attention.rotary_k", k, hd, c->rotary_dim, c->rope_theta);
      a = b_sdpa (b, "attention.sdpa", q, k, v, TRUE);
      a = b_merge_heads (b, "attention", a, n, hd);
      a = b_linear (b, "attention.dense", a, H, H, TRUE, c->o_bias, 0);
      if (!c->parallel_residual)
        x = b_binary (b, "add_attn", PLANNER_OP_ADD, a, x);
      h = b_layer_norm (b, "post_attention_layernorm", x, H, c->eps, NULL);
      h = b_linear (b, "mlp.dense_h_to_4h", h, H, I, TRUE, TRUE, 0);
      h = b_activation (b, "mlp.act", c, h);
      h = b_linear (b, "mlp.dense_4h_to_h", h, I, H, TRUE, TRUE, 0);
      if (c->parallel_residual)
        {
          /* mlp + attn + x, in transformers' order: the two partial sums of tensor
           * parallelism add before one reduction. */
          h = b_binary (b, "add_attn_mlp", PLANNER_OP_ADD, h, a);
          x = b_binary (b, "add_residual", PLANNER_OP_ADD, h, x);
        }
      else
        x = b_binary (b, "add_mlp", PLANNER_OP_ADD, h, x);
    }

  b_prefix (b, "gpt_neox.");
  x = b_layer_norm (b, "final_layer_norm", x, H, c->eps, NULL);
  b_prefix (b, "%s", "");
  if (!c->tie)
    embed = b_param (b, "embed_out", ".weight", DIMS (c->vocab, H));
  if (b->error == NULL)
    x = b_matmul (b, "embed_out", x, embed, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* OPT. The position table has max_position_embeddings + 2 rows and position p reads row
 * p + 2 (transformers' offset): "embed_positions.offset" slices the first two off. */
static void
build_opt (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim, E = c->embed_dim;
  PlannerOpAttrs *attrs;
  int ids, positions, embed, table, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  positions = b_input (b, "position_ids", DIMS (1, b->seq));
  b_prefix (b, "model.decoder.");
  embed = b_param (b, "embed_tokens", ".weight", DIMS (c->vocab, E));
  x = b_embedding (b, "embed_tokens", ids, embed);
  if (E != H)
    x = b_linear (b, "project_in", x, E, H, TRUE, FALSE, 0);
  table = b_param (b, "embed_positions", ".weight", DIMS (c->max_positions + 2, H));
  if (b->error != NULL)
    return;
  attrs = b_attrs (b);
  attrs->axis = 0;
  attrs->start = 2;
  attrs->end = c->max_positions + 2;
  table = b_op (b, "embed_positions.offset", PLANNER_OP_SLICE, attrs, IDS (table), NULL);
  x = b_binary (b, "embed_add", PLANNER_OP_ADD, x,
                b_embedding (b, "embed_positions", positions, table));

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      int h, q, k, v, a;

      b_prefix (b, "model.decoder.layers.%" G_GINT64_FORMAT ".", i);
      h = c->norm_before ? b_layer_norm (b, "self_attn_layer_norm", x, H, c->eps, NULL) : x;
      q = b_linear (b, "self_attn.q_proj", h, H, H, TRUE, c->qkv_bias, n);
      k = b_linear (b, "self_attn.k_proj", h, H, H, TRUE, c->qkv_bias, n);
      v = b_linear (b, "self_attn.v_proj", h, H, H, TRUE, c->qkv_bias, n);
      q = b_split_heads (b, "self_attn", "q", q, n, hd);
      k = b_split_heads (b, "self_attn", "k", k, n, hd);
      v = b_split_heads (b, "self_attn", "v", v, n, hd);
      a = b_sdpa (b, "self_attn.sdpa", q, k, v, TRUE);
      a = b_merge_heads (b, "self_attn", a, n, hd);
      a = b_linear (b, "self_attn.out_proj", a, H, H, TRUE, c->o_bias, 0);
      x = b_binary (b, "add_attn", PLANNER_OP_ADD, x, a);
      if (!c->norm_before)
        x = b_layer_norm (b, "self_attn_layer_norm", x, H, c->eps, NULL);

      h = c->norm_before ? b_layer_norm (b, "final_layer_norm", x, H, c->eps, NULL) : x;
      h = b_linear (b, "fc1", h, H, c->intermediate, TRUE, c->mlp_bias, 0);
      h = b_activation (b, "activation_fn", c, h);
      h = b_linear (b, "fc2", h, c->intermediate, H, TRUE, c->mlp_bias, 0);
      x = b_binary (b, "add_mlp", PLANNER_OP_ADD, x, h);
      if (!c->norm_before)
        x = b_layer_norm (b, "final_layer_norm", x, H, c->eps, NULL);
    }

  b_prefix (b, "model.decoder.");
  if (c->norm_before)
    x = b_layer_norm (b, "final_layer_norm", x, H, c->eps, NULL);
  if (E != H)
    x = b_linear (b, "project_out", x, H, E, TRUE, FALSE, 0);
  b_prefix (b, "%s", "");
  if (!c->tie)
    embed = b_param (b, "lm_head", ".weight", DIMS (c->vocab, E));
  if (b->error == NULL)
    x = b_matmul (b, "lm_head", x, embed, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* Falcon's query_key_value "<attn>.query_key_value" on @h: q [B, heads, S, hd] and k, v
 * [B, kv heads x replicas, S, hd] in *q, *k, *v.
 * - per head: viewed [heads, 3, hd, hidden], split by heads like GPT-NeoX's;
 * - grouped: viewed [kv, group + 2, hd, hidden]: column parallelism splits the kv groups, each
 *   rank keeping its groups' query heads and their k and v;
 * - multi-query: viewed [heads + 2, hd, hidden] and cut into its query, key and value rows
 *   ("query_key_value.split", kept whole on every rank), then three projections: the query's
 *   splits by heads (from the whole weight, so without communication), the single key and
 *   value heads are repeated for --kv-replicas. */
static gboolean
b_falcon_qkv (Builder *b, const HfConfig *c, int h, int *q, int *k, int *v)
{
  const gint64 H = c->hidden, n = c->heads, kv = c->kv_heads, hd = c->head_dim;
  const gint64 r = MAX (b->kv_replicas, 1);
  int out[3];

  if (c->qkv_layout == QKV_PER_HEAD || c->qkv_layout == QKV_GROUPED)
    {
      const gboolean grouped = c->qkv_layout == QKV_GROUPED;
      const gint64 g = n / kv;
      const gint64 per_head[] = { 1, 1, 1 }, per_group[] = { g, 1, 1 };
      int w
          = grouped
                ? b_param (b, "self_attention.query_key_value", ".weight", DIMS (kv, g + 2, hd, H))
                : b_param (b, "self_attention.query_key_value", ".weight", DIMS (n, 3, hd, H));
      int bias = -1, qkv, split;
      PlannerOpAttrs *attrs;

      if (c->qkv_bias)
        bias = grouped
                   ? b_param (b, "self_attention.query_key_value", ".bias", DIMS (kv, g + 2, hd))
                   : b_param (b, "self_attention.query_key_value", ".bias", DIMS (n, 3, hd));
      if (b->error != NULL)
        return FALSE;
      attrs = b_attrs (b);
      g_strlcpy (attrs->equation, "bsh,nqdh->bsnqd", sizeof attrs->equation);
      qkv = bias < 0 ? b_op (b, "self_attention.query_key_value", PLANNER_OP_EINSUM, attrs,
                             IDS (h, w), NULL)
                     : b_op (b, "self_attention.query_key_value", PLANNER_OP_EINSUM, attrs,
                             IDS (h, w, bias), NULL);
      split = b_chunks (b, "self_attention.split_qkv", qkv, 3, 3, grouped ? per_group : per_head);
      if (split < 0)
        return FALSE;
      for (guint i = 0; i < 3; i++)
        out[i] = planner_graph_op_output (b->graph, split, i);
      *q = b_split_heads (b, "self_attention", "q", out[0], n, hd);
      *k = b_split_heads (b, "self_attention", "k", out[1], kv, hd);
      *v = b_split_heads (b, "self_attention", "v", out[2], kv, hd);
      return b->error == NULL;
    }

  {
    int w = b_param (b, "self_attention.query_key_value", ".weight", DIMS (n + 2, hd, H));

    if (c->qkv_bias)
      {
        g_set_error (&b->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                     "multi-query Falcon with bias true is not supported");
        return FALSE;
      }
    return b->error == NULL
           && b_cut_qkv (b, "self_attention.query_key_value", "self_attention", h, w, n, 1, r, q, k,
                         v);
  }
}

static void
build_falcon (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim, I = c->intermediate;
  int ids, embed, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  b_prefix (b, "transformer.");
  embed = b_param (b, "word_embeddings", ".weight", DIMS (c->vocab, H));
  x = b_embedding (b, "word_embeddings", ids, embed);

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      int ln_attn, ln_mlp, q, k, v, a, h;

      b_prefix (b, "transformer.h.%" G_GINT64_FORMAT ".", i);
      if (c->two_norms)
        {
          ln_attn = b_layer_norm (b, "ln_attn", x, H, c->eps, NULL);
          ln_mlp = b_layer_norm (b, "ln_mlp", x, H, c->eps, NULL);
        }
      else
        ln_attn = ln_mlp = b_layer_norm (b, "input_layernorm", x, H, c->eps, NULL);
      if (b->error != NULL || !b_falcon_qkv (b, c, ln_attn, &q, &k, &v))
        break;
      q = b_rotary (b, "self_attention.rotary_q", q, c->rope_theta);
      k = b_rotary (b, "self_attention.rotary_k", k, c->rope_theta);
      a = b_sdpa (b, "self_attention.sdpa", q, k, v, TRUE);
      a = b_merge_heads (b, "self_attention", a, n, hd);
      a = b_linear (b, "self_attention.dense", a, H, H, TRUE, c->o_bias, 0);
      if (!c->parallel_residual)
        {
          x = b_binary (b, "add_attn", PLANNER_OP_ADD, a, x);
          ln_mlp = b_layer_norm (b, "post_attention_layernorm", x, H, c->eps, NULL);
        }
      h = b_linear (b, "mlp.dense_h_to_4h", ln_mlp, H, I, TRUE, c->mlp_bias, 0);
      h = b_activation (b, "mlp.act", c, h);
      h = b_linear (b, "mlp.dense_4h_to_h", h, I, H, TRUE, c->mlp_bias, 0);
      if (c->parallel_residual)
        h = b_binary (b, "add_attn_mlp", PLANNER_OP_ADD, h, a);
      x = b_binary (b, "add_residual", PLANNER_OP_ADD, h, x);
    }

  b_prefix (b, "transformer.");
  x = b_layer_norm (b, "ln_f", x, H, c->eps, NULL);
  b_prefix (b, "%s", "");
  if (!c->tie)
    embed = b_param (b, "lm_head", ".weight", DIMS (c->vocab, H));
  if (b->error == NULL)
    x = b_matmul (b, "lm_head", x, embed, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* BLOOM: scores get ALiBi's slope x key position per head (SDPA variant 1). */
static void
build_bloom (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim, I = c->intermediate;
  int ids, embed, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  b_prefix (b, "transformer.");
  embed = b_param (b, "word_embeddings", ".weight", DIMS (c->vocab, H));
  x = b_embedding (b, "word_embeddings", ids, embed);
  x = b_layer_norm (b, "word_embeddings_layernorm", x, H, c->eps, NULL);

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      PlannerOpAttrs *attrs;
      const gint64 ones[] = { 1, 1, 1 };
      int h, w, bias, qkv, split, q, k, v, a;

      b_prefix (b, "transformer.h.%" G_GINT64_FORMAT ".", i);
      h = b_layer_norm (b, "input_layernorm", x, H, c->eps, NULL);
      w = b_param (b, "self_attention.query_key_value", ".weight", DIMS (n, 3, hd, H));
      bias = b_param (b, "self_attention.query_key_value", ".bias", DIMS (n, 3, hd));
      if (b->error != NULL)
        break;
      attrs = b_attrs (b);
      g_strlcpy (attrs->equation, "bsh,nqdh->bsnqd", sizeof attrs->equation);
      qkv = b_op (b, "self_attention.query_key_value", PLANNER_OP_EINSUM, attrs, IDS (h, w, bias),
                  NULL);
      split = b_chunks (b, "self_attention.split_qkv", qkv, 3, 3, ones);
      if (split < 0)
        break;
      q = b_split_heads (b, "self_attention", "q", planner_graph_op_output (b->graph, split, 0), n,
                         hd);
      k = b_split_heads (b, "self_attention", "k", planner_graph_op_output (b->graph, split, 1), n,
                         hd);
      v = b_split_heads (b, "self_attention", "v", planner_graph_op_output (b->graph, split, 2), n,
                         hd);
      if (b->error != NULL)
        break;
      attrs = b_attrs (b);
      attrs->causal = TRUE;
      attrs->variant = 1;
      a = b_op (b, "self_attention.sdpa", PLANNER_OP_SDPA, attrs, IDS (q, k, v), NULL);
      a = b_merge_heads (b, "self_attention", a, n, hd);
      a = b_linear (b, "self_attention.dense", a, H, H, TRUE, TRUE, 0);
      x = b_binary (b, "add_attn", PLANNER_OP_ADD, x, a);
      h = b_layer_norm (b, "post_attention_layernorm", x, H, c->eps, NULL);
      h = b_linear (b, "mlp.dense_h_to_4h", h, H, I, TRUE, TRUE, 0);
      h = b_activation (b, "mlp.gelu_impl", c, h);
      h = b_linear (b, "mlp.dense_4h_to_h", h, I, H, TRUE, TRUE, 0);
      x = b_binary (b, "add_mlp", PLANNER_OP_ADD, x, h);
    }

  b_prefix (b, "transformer.");
  x = b_layer_norm (b, "ln_f", x, H, c->eps, NULL);
  b_prefix (b, "%s", "");
  if (!c->tie)
    embed = b_param (b, "lm_head", ".weight", DIMS (c->vocab, H));
  if (b->error == NULL)
    x = b_matmul (b, "lm_head", x, embed, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* ViT. Names are the checkpoints' (vit.encoder.layer.N.attention.attention.query, ...), as
 * the hub's files and transformers' save_pretrained write them. The class token [1, 1, H] is
 * repeated over the batch (RepeatInterleave) and put before the patches. */
static void
build_vit (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim, side = c->image_size / c->patch_size,
               N = side * side;
  PlannerOpAttrs *attrs;
  int pixels, w, bias, x, cls;

  if (b->seq != N + 1)
    {
      g_set_error (&b->error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "ViT's sequence is its %" G_GINT64_FORMAT
                   " patches and the class token, %" G_GINT64_FORMAT "; leave --seq out",
                   N, N + 1);
      return;
    }
  b_prefix (b, "%s", "");
  pixels = planner_graph_add_input (b->graph, "pixel_values", b->dtype,
                                    DIMS (b->batch, c->channels, c->image_size, c->image_size),
                                    &b->error);
  b_prefix (b, "vit.embeddings.");
  w = b_param (b, "patch_embeddings.projection", ".weight",
               DIMS (H, c->channels, c->patch_size, c->patch_size));
  bias = b_param (b, "patch_embeddings.projection", ".bias", DIMS (H));
  if (b->error != NULL)
    return;
  attrs = b_attrs (b);
  attrs->n_ints = 4;
  attrs->ints[0] = attrs->ints[1] = c->patch_size;
  attrs->ints[2] = attrs->ints[3] = 0;
  x = b_op (b, "patch_embeddings.projection", PLANNER_OP_CONV2D, attrs, IDS (pixels, w, bias),
            NULL);
  x = b_reshape (b, "patch_embeddings.flatten", x, DIMS (b->batch, H, N));
  if (b->error != NULL)
    return;
  attrs = b_attrs (b);
  attrs->n_ints = 3;
  attrs->ints[0] = 0;
  attrs->ints[1] = 2;
  attrs->ints[2] = 1;
  x = b_op (b, "patch_embeddings.transpose", PLANNER_OP_TRANSPOSE, attrs, IDS (x), NULL);
  cls = b_param (b, "cls_token", "", DIMS (1, 1, H));
  if (b->error != NULL)
    return;
  attrs = b_attrs (b);
  attrs->axis = 0;
  attrs->n_ints = 1;
  attrs->ints[0] = b->batch;
  cls = b_op (b, "cls_expand", PLANNER_OP_REPEAT_INTERLEAVE, attrs, IDS (cls), NULL);
  if (b->error != NULL)
    return;
  attrs = b_attrs (b);
  attrs->axis = 1;
  x = b_op (b, "cat_cls", PLANNER_OP_CONCAT, attrs, IDS (cls, x), NULL);
  x = b_binary (b, "add_positions", PLANNER_OP_ADD, x,
                b_param (b, "position_embeddings", "", DIMS (1, N + 1, H)));

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      int h, q, k, v, a;

      b_prefix (b, "vit.encoder.layer.%" G_GINT64_FORMAT ".", i);
      h = b_layer_norm (b, "layernorm_before", x, H, c->eps, NULL);
      q = b_linear (b, "attention.attention.query", h, H, H, TRUE, c->qkv_bias, n);
      k = b_linear (b, "attention.attention.key", h, H, H, TRUE, c->qkv_bias, n);
      v = b_linear (b, "attention.attention.value", h, H, H, TRUE, c->qkv_bias, n);
      q = b_split_heads (b, "attention.attention", "q", q, n, hd);
      k = b_split_heads (b, "attention.attention", "k", k, n, hd);
      v = b_split_heads (b, "attention.attention", "v", v, n, hd);
      a = b_sdpa (b, "attention.attention.sdpa", q, k, v, FALSE);
      a = b_merge_heads (b, "attention.attention", a, n, hd);
      a = b_linear (b, "attention.output.dense", a, H, H, TRUE, TRUE, 0);
      x = b_binary (b, "add_attn", PLANNER_OP_ADD, a, x);
      h = b_layer_norm (b, "layernorm_after", x, H, c->eps, NULL);
      h = b_linear (b, "intermediate.dense", h, H, c->intermediate, TRUE, TRUE, 0);
      h = b_activation (b, "intermediate.intermediate_act_fn", c, h);
      h = b_linear (b, "output.dense", h, c->intermediate, H, TRUE, TRUE, 0);
      x = b_binary (b, "add_mlp", PLANNER_OP_ADD, h, x);
    }

  b_prefix (b, "vit.");
  x = b_layer_norm (b, "layernorm", x, H, c->eps, NULL);
  if (b->error != NULL)
    return;
  attrs = b_attrs (b);
  attrs->axis = 1;
  attrs->start = 0;
  attrs->end = 1;
  x = b_op (b, "class_token", PLANNER_OP_SLICE, attrs, IDS (x), NULL);
  x = b_reshape (b, "class_token_view", x, DIMS (b->batch, H));
  b_prefix (b, "%s", "");
  {
    int cw = b_param (b, "classifier", ".weight", DIMS (c->labels, H));
    int cb = b_param (b, "classifier", ".bias", DIMS (c->labels));

    if (b->error == NULL)
      x = b_matmul (b, "classifier", x, cw, cb, TRUE, 0, "logits");
  }
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, x);
}

/* T5's position bias of one stack "<stack>." [1, heads, S, S]: buckets from @ids' length, the
 * block-0 table looked up, heads first. */
static int
b_t5_position_bias (Builder *b, const HfConfig *c, const char *stack, int ids,
                    gboolean bidirectional)
{
  PlannerOpAttrs *attrs;
  int buckets, table, bias;

  b_prefix (b, "%s.", stack);
  attrs = b_attrs (b);
  attrs->n_ints = 3;
  attrs->ints[0] = c->buckets;
  attrs->ints[1] = c->max_distance;
  attrs->ints[2] = bidirectional;
  buckets = b_op (b, "relative_position_bucket", PLANNER_OP_RELATIVE_POSITION_BUCKET, attrs,
                  IDS (ids), NULL);
  table = b_param (b, "block.0.layer.0.SelfAttention.relative_attention_bias", ".weight",
                   DIMS (c->buckets, c->heads));
  if (b->error != NULL)
    return -1;
  bias = b_embedding (b, "block.0.layer.0.SelfAttention.relative_attention_bias", buckets, table);
  if (b->error != NULL)
    return -1;
  attrs = b_attrs (b);
  attrs->n_ints = 3;
  attrs->ints[0] = 2;
  attrs->ints[1] = 0;
  attrs->ints[2] = 1;
  bias = b_op (b, "position_bias_heads", PLANNER_OP_TRANSPOSE, attrs, IDS (bias), NULL);
  return b_reshape (b, "position_bias", bias, DIMS (1, c->heads, b->seq, b->seq));
}

/* One T5 attention "<rest>" (SelfAttention or EncDecAttention): q from @x, k and v from
 * @kv_in, unscaled scores plus @bias (or none), then o. */
static int
b_t5_attention (Builder *b, const HfConfig *c, const char *rest, int x, int kv_in, int bias,
                gboolean causal)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim;
  char name[128];
  PlannerOpAttrs *attrs;
  int q, k, v, a;

#define T5_NAME(what) (g_snprintf (name, sizeof name, "%s.%s", rest, what), name)
  q = b_linear (b, T5_NAME ("q"), x, H, n * hd, TRUE, FALSE, n);
  k = b_linear (b, T5_NAME ("k"), kv_in, H, n * hd, TRUE, FALSE, n);
  v = b_linear (b, T5_NAME ("v"), kv_in, H, n * hd, TRUE, FALSE, n);
  q = b_split_heads (b, rest, "q", q, n, hd);
  k = b_split_heads (b, rest, "k", k, n, hd);
  v = b_split_heads (b, rest, "v", v, n, hd);
  if (b->error != NULL)
    return -1;
  attrs = b_attrs (b);
  attrs->causal = causal;
  attrs->scale = 1.0;
  a = bias < 0 ? b_op (b, T5_NAME ("sdpa"), PLANNER_OP_SDPA, attrs, IDS (q, k, v), NULL)
               : b_op (b, T5_NAME ("sdpa"), PLANNER_OP_SDPA, attrs, IDS (q, k, v, bias), NULL);
  a = b_merge_heads (b, rest, a, n, hd);
  return b_linear (b, T5_NAME ("o"), a, n * hd, H, TRUE, FALSE, 0);
#undef T5_NAME
}

/* T5's feed-forward "<rest>.DenseReluDense" on @x. */
static int
b_t5_feed_forward (Builder *b, const HfConfig *c, const char *rest, int x)
{
  char name[128];
  int h;

  if (c->gated)
    {
      int gate, lin;

      g_snprintf (name, sizeof name, "%s.DenseReluDense.wi_0", rest);
      gate = b_linear (b, name, x, c->hidden, c->intermediate, TRUE, FALSE, 0);
      g_snprintf (name, sizeof name, "%s.DenseReluDense.act", rest);
      gate = b_activation (b, name, c, gate);
      g_snprintf (name, sizeof name, "%s.DenseReluDense.wi_1", rest);
      lin = b_linear (b, name, x, c->hidden, c->intermediate, TRUE, FALSE, 0);
      g_snprintf (name, sizeof name, "%s.DenseReluDense.mul", rest);
      h = b_binary (b, name, PLANNER_OP_MUL, gate, lin);
    }
  else
    {
      g_snprintf (name, sizeof name, "%s.DenseReluDense.wi", rest);
      h = b_linear (b, name, x, c->hidden, c->intermediate, TRUE, FALSE, 0);
      g_snprintf (name, sizeof name, "%s.DenseReluDense.act", rest);
      h = b_activation (b, name, c, h);
    }
  g_snprintf (name, sizeof name, "%s.DenseReluDense.wo", rest);
  return b_linear (b, name, h, c->intermediate, c->hidden, TRUE, FALSE, 0);
}

/* T5. Encoder and decoder read sequences of the same length (--seq): input_ids and
 * decoder_input_ids. --layers sets both stacks' depth. */
static void
build_t5 (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden;
  const gint64 dec_layers = layers == c->layers ? c->decoder_layers : layers;
  int ids, dec_ids, shared, x, y, bias;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  dec_ids = b_input (b, "decoder_input_ids", DIMS (b->batch, b->seq));
  shared = b_param (b, "shared", ".weight", DIMS (c->vocab, H));

  b_prefix (b, "encoder.");
  x = b_embedding (b, "embed_tokens", ids, shared);
  bias = b_t5_position_bias (b, c, "encoder", ids, TRUE);
  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      int h;

      b_prefix (b, "encoder.block.%" G_GINT64_FORMAT ".", i);
      h = b_rms_norm (b, "layer.0.layer_norm", x, H, c->eps);
      h = b_t5_attention (b, c, "layer.0.SelfAttention", h, h, bias, FALSE);
      x = b_binary (b, "layer.0.add", PLANNER_OP_ADD, x, h);
      h = b_rms_norm (b, "layer.1.layer_norm", x, H, c->eps);
      h = b_t5_feed_forward (b, c, "layer.1", h);
      x = b_binary (b, "layer.1.add", PLANNER_OP_ADD, x, h);
    }
  b_prefix (b, "encoder.");
  x = b_rms_norm (b, "final_layer_norm", x, H, c->eps);

  b_prefix (b, "decoder.");
  y = b_embedding (b, "embed_tokens", dec_ids, shared);
  bias = b_t5_position_bias (b, c, "decoder", dec_ids, FALSE);
  for (gint64 i = 0; i < dec_layers && b->error == NULL; i++)
    {
      int h;

      b_prefix (b, "decoder.block.%" G_GINT64_FORMAT ".", i);
      h = b_rms_norm (b, "layer.0.layer_norm", y, H, c->eps);
      h = b_t5_attention (b, c, "layer.0.SelfAttention", h, h, bias, TRUE);
      y = b_binary (b, "layer.0.add", PLANNER_OP_ADD, y, h);
      h = b_rms_norm (b, "layer.1.layer_norm", y, H, c->eps);
      h = b_t5_attention (b, c, "layer.1.EncDecAttention", h, x, -1, FALSE);
      y = b_binary (b, "layer.1.add", PLANNER_OP_ADD, y, h);
      h = b_rms_norm (b, "layer.2.layer_norm", y, H, c->eps);
      h = b_t5_feed_forward (b, c, "layer.2", h);
      y = b_binary (b, "layer.2.add", PLANNER_OP_ADD, y, h);
    }
  b_prefix (b, "decoder.");
  y = b_rms_norm (b, "final_layer_norm", y, H, c->eps);
  if (c->scale_decoder && b->error == NULL)
    {
      PlannerOpAttrs *attrs = b_attrs (b);

      attrs->scale = 1.0 / sqrt ((double)H);
      y = b_op (b, "scale_outputs", PLANNER_OP_SCALE, attrs, IDS (y), NULL);
    }
  b_prefix (b, "%s", "");
  if (b->error == NULL)
    y = b_matmul (b, "lm_head", y, shared, -1, TRUE, 0, "logits");
  if (b->error == NULL)
    planner_graph_mark_output (b->graph, y);
}

static void
build_bert (Builder *b, const HfConfig *c, gint64 layers)
{
  const gint64 H = c->hidden, n = c->heads, hd = c->head_dim;
  const gboolean masked_lm = g_str_equal (c->architecture, "BertForMaskedLM");
  const char *root = masked_lm ? "bert." : "";
  int ids, positions, token_types, words, x;

  b_prefix (b, "%s", "");
  ids = b_input (b, "input_ids", DIMS (b->batch, b->seq));
  positions = b_input (b, "position_ids", DIMS (1, b->seq));
  token_types = b_input (b, "token_type_ids", DIMS (b->batch, b->seq));

  b_prefix (b, "%sembeddings.", root);
  words = b_param (b, "word_embeddings", ".weight", DIMS (c->vocab, H));
  x = b_embedding (b, "word_embeddings", ids, words);
  {
    int pe
        = b_embedding (b, "position_embeddings", positions,
                       b_param (b, "position_embeddings", ".weight", DIMS (c->max_positions, H)));
    int te = b_embedding (b, "token_type_embeddings", token_types,
                          b_param (b, "token_type_embeddings", ".weight", DIMS (c->type_vocab, H)));

    x = b_binary (b, "add_position", PLANNER_OP_ADD, x, pe);
    x = b_binary (b, "add_token_type", PLANNER_OP_ADD, x, te);
  }
  x = b_layer_norm (b, "LayerNorm", x, H, c->eps, NULL);
  x = b_unary (b, "dropout", PLANNER_OP_DROPOUT, x);

  for (gint64 i = 0; i < layers && b->error == NULL; i++)
    {
      int q, k, v, a, h;

      b_prefix (b, "%sencoder.layer.%" G_GINT64_FORMAT ".", root, i);
      q = b_linear (b, "attention.self.query", x, H, H, TRUE, TRUE, n);
      k = b_linear (b, "attention.self.key", x, H, H, TRUE, TRUE, n);
      v = b_linear (b, "attention.self.value", x, H, H, TRUE, TRUE, n);
      q = b_split_heads (b, "attention.self", "q", q, n, hd);
      k = b_split_heads (b, "attention.self", "k", k, n, hd);
      v = b_split_heads (b, "attention.self", "v", v, n, hd);
      a = b_sdpa (b, "attention.self.sdpa", q, k, v, FALSE);
      a = b_merge_heads (b, "attention.self", a, n, hd);
      a = b_linear (b, "attention.output.dense", a, H, H, TRUE, TRUE, 0);
      a = b_unary (b, "attention.output.dropout", PLANNER_OP_DROPOUT, a);
      a = b_binary (b, "attention.add", PLANNER_OP_ADD, x, a);
      x = b_layer_norm (b, "attention.output.LayerNorm", a, H, c->eps, NULL);

      h = b_linear (b, "intermediate.dense", x, H, c->intermediate, TRUE, TRUE, 0);
      h = b_activation (b, "intermediate.intermediate_act_fn", c, h);
      h = b_linear (b, "output.dense", h, c->intermediate, H, TRUE, TRUE, 0);
      h = b_unary (b, "output.dropout", PLANNER_OP_DROPOUT, h);
      h = b_binary (b, "add", PLANNER_OP_ADD, x, h);
      x = b_layer_norm (b, "output.LayerNorm", h, H, c->eps,
                        !masked_lm && i == layers - 1 ? "last_hidden_state" : NULL);
    }

  if (masked_lm)
    {
      int bias, logits;

      b_prefix (b, "cls.predictions.");
      x = b_linear (b, "transform.dense", x, H, H, TRUE, TRUE, 0);
      x = b_activation (b, "transform.transform_act_fn", c, x);
      x = b_layer_norm (b, "transform.LayerNorm", x, H, c->eps, NULL);
      /* The decoder's weight is the word embedding table (tied); its bias lives in
       * cls.predictions. */
      bias = b_param (b, "bias", "", DIMS (c->vocab));
      if (!c->tie)
        words = b_param (b, "decoder", ".weight", DIMS (c->vocab, H));
      if (b->error != NULL)
        return;
      logits = b_matmul (b, "decoder", x, words, bias, TRUE, 0, "logits");
      if (b->error == NULL)
        planner_graph_mark_output (b->graph, logits);
    }
  else
    {
      PlannerOpAttrs *attrs;
      int first, pooled;

      /* BertPooler: the hidden state of token 0 through dense + tanh. */
      b_prefix (b, "pooler.");
      attrs = b_attrs (b);
      attrs->axis = 1;
      attrs->start = 0;
      attrs->end = 1;
      first = b_op (b, "first_token", PLANNER_OP_SLICE, attrs, IDS (x), NULL);
      first = b_reshape (b, "first_token_view", first, DIMS (b->batch, H));
      pooled = b_linear (b, "dense", first, H, H, TRUE, TRUE, 0);
      pooled = b_op (b, "activation", PLANNER_OP_TANH, NULL, IDS (pooled), "pooler_output");
      if (b->error != NULL)
        return;
      planner_graph_mark_output (b->graph, x);
      planner_graph_mark_output (b->graph, pooled);
    }
}

PlannerGraph *
planner_hf_build (JsonObject *config, const PlannerModelOptions *options, const char *what,
                  const char *source_base, const char *name, GError **error)
{
  PlannerModelOptions defaults;
  HfConfig c;
  Builder b = { 0 };
  gint64 layers;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autofree char *source = NULL;

  g_assert (config != NULL && what != NULL && source_base != NULL);

  if (options == NULL)
    {
      planner_model_options_init (&defaults);
      options = &defaults;
    }
  if (!planner_model_options_check (options, error) || !hf_config_parse (config, what, &c, error))
    return NULL;

  if (!hf_apply_zoo_options (&c, options, what, error))
    return NULL;
  b.kv_replicas = MAX (options->kv_replicas, 1);
  b.batch = options->batch > 0 ? options->batch : DEFAULT_BATCH;
  b.seq = options->seq > 0 ? options->seq : MIN (DEFAULT_SEQ, c.max_positions);
  b.dtype = options->dtype_set ? options->dtype : c.has_dtype ? c.dtype : PLANNER_DTYPE_F32;
  layers = options->layers > 0 ? options->layers : c.layers;
  if (layers > MAX_LAYERS)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s: %" G_GINT64_FORMAT " layers; at most %d are supported", what, layers,
                   MAX_LAYERS);
      return NULL;
    }
  {
    /* The widest activation is [B, S, one of these]. */
    const double widths[] = { c.vocab, c.intermediate, 3.0 * c.heads * c.head_dim, c.hidden };
    double widest = 0;

    for (guint i = 0; i < G_N_ELEMENTS (widths); i++)
      widest = MAX (widest, (double)b.batch * (double)b.seq * widths[i]);
    if (widest > (double)MAX_NUMEL)
      {
        g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                     "%s: batch %" G_GINT64_FORMAT " x sequence %" G_GINT64_FORMAT
                     " makes tensors of more than 2^62 elements",
                     what, b.batch, b.seq);
        return NULL;
      }
  }
  if (c.learned_positions && b.seq > c.max_positions)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s: sequence length %" G_GINT64_FORMAT " exceeds %s %" G_GINT64_FORMAT
                   " (learned position embeddings); use a sequence of at most %" G_GINT64_FORMAT,
                   what, b.seq, c.max_positions_field, c.max_positions, c.max_positions);
      return NULL;
    }

  if (c.sliding_from < layers && b.seq > c.sliding_window)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s: layer %" G_GINT64_FORMAT " attends through a sliding window of %"
                   G_GINT64_FORMAT " tokens (sliding_window), shorter than the sequence of %"
                   G_GINT64_FORMAT ", and the graph models full causal attention; use a "
                   "sequence of at most %" G_GINT64_FORMAT,
                   what, c.sliding_from, c.sliding_window, b.seq, c.sliding_window);
      return NULL;
    }

  graph = planner_graph_new ();
  b.graph = graph;
  switch (c.type->family)
    {
    case FAMILY_GPT2:
      build_gpt2 (&b, &c, layers);
      break;
    case FAMILY_LLAMA:
      build_llama (&b, &c, layers);
      break;
    case FAMILY_BERT:
      build_bert (&b, &c, layers);
      break;
    case FAMILY_PHI3:
      build_phi3 (&b, &c, layers);
      break;
    case FAMILY_NEOX:
      build_neox (&b, &c, layers);
      break;
    case FAMILY_OPT:
      build_opt (&b, &c, layers);
      break;
    case FAMILY_FALCON:
      build_falcon (&b, &c, layers);
      break;
    case FAMILY_BLOOM:
      build_bloom (&b, &c, layers);
      break;
    case FAMILY_VIT:
      build_vit (&b, &c, layers);
      break;
    case FAMILY_T5:
      build_t5 (&b, &c, layers);
      break;
    default:
      g_assert_not_reached ();
    }
  if (b.error != NULL)
    {
      g_propagate_prefixed_error (error, b.error, "%s: ", what);
      return NULL;
    }

  source = g_strdup_printf ("%s?batch=%" G_GINT64_FORMAT "&seq=%" G_GINT64_FORMAT
                            "&layers=%" G_GINT64_FORMAT "&dtype=%s",
                            source_base, b.batch, b.seq, layers, planner_dtype_to_string (b.dtype));
  {
    /* Only options that were given, so the sources of earlier plans stay as they were. */
    g_autoptr (GString) full = g_string_new (source);

    if (options->pad_vocab > 0)
      g_string_append_printf (full, "&pad_vocab=%" G_GINT64_FORMAT, options->pad_vocab);
    if (options->kv_replicas > 0)
      g_string_append_printf (full, "&kv_replicas=%" G_GINT64_FORMAT, options->kv_replicas);
    planner_graph_set_source (graph, full->str);
  }
  if (c.vocab != c.checkpoint_vocab)
    {
      /* The padding rows are parameters the checkpoint does not have: say how many. */
      guint64 added
          = (guint64)(c.vocab - c.checkpoint_vocab) * (guint64)c.hidden * (c.tie ? 1u : 2u);
      g_autofree char *padded = g_strdup_printf (
          "%s (vocabulary %" G_GINT64_FORMAT " padded to %" G_GINT64_FORMAT ": +%" G_GUINT64_FORMAT
          " parameters)",
          name != NULL ? name : c.architecture, c.checkpoint_vocab, c.vocab, added);
      planner_graph_set_name (graph, padded);
    }
  else
    planner_graph_set_name (graph, name != NULL ? name : c.architecture);
  return g_steal_pointer (&graph);
}

/* A config given as text has no path to come back to, so its source carries the text
 * (PLANNER_HF_TEXT_SOURCE_SCHEME + base64). */

PlannerGraph *
planner_hf_import_json (const char *config_json_text, const PlannerModelOptions *options,
                        GError **error)
{
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *encoded = NULL;
  g_autofree char *source_base = NULL;
  JsonObject *config;

  g_return_val_if_fail (config_json_text != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  root = planner_json_parse (config_json_text, -1, "config", error);
  if (root == NULL || (config = planner_json_expect_object (root, "config", error)) == NULL)
    return NULL;
  encoded = g_base64_encode ((const guchar *)config_json_text, strlen (config_json_text));
  source_base = g_strconcat (PLANNER_HF_TEXT_SOURCE_SCHEME, encoded, NULL);
  return planner_hf_build (config, options, "config", source_base, NULL, error);
}

PlannerGraph *
planner_hf_import_file (const char *path, const PlannerModelOptions *options, GError **error)
{
  g_autofree char *absolute = NULL;
  g_autoptr (JsonNode) root = NULL;
  JsonObject *config;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  root = planner_json_load_file (path, NULL, error);
  if (root == NULL || (config = planner_json_expect_object (root, path, error)) == NULL)
    return NULL;
  absolute = g_canonicalize_filename (path, NULL);
  return planner_hf_build (config, options, path, absolute, NULL, error);
}

PlannerGraph *
planner_hf_import_text_source (const char *base, const PlannerModelOptions *options, GError **error)
{
  g_autofree guchar *text = NULL;
  g_autofree char *terminated = NULL;
  gsize length = 0;

  g_assert (g_str_has_prefix (base, PLANNER_HF_TEXT_SOURCE_SCHEME));
  text = g_base64_decode (base + strlen (PLANNER_HF_TEXT_SOURCE_SCHEME), &length);
  terminated = g_strndup ((const char *)text, length);
  return planner_hf_import_json (terminated, options, error);
}
