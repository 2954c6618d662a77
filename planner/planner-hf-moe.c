#define G_LOG_DOMAIN "planner-hf-moe"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-hf-moe-private.h"

/* Mixtral and Qwen2-MoE as transformers 5 builds them: the router "mlp.gate" (a Linear to one
 * logit per expert), the experts' weights as 3-D parameters "mlp.experts.gate_up_proj"
 * [E, 2I, H] and "mlp.experts.down_proj" [E, H, I], and for Qwen2-MoE a dense
 * "mlp.shared_expert" scaled by sigmoid ("mlp.shared_expert_gate"). Hugging Face runs the
 * experts dropless on the tokens each one was given; a plan needs fixed shapes, so the graph
 * dispatches each batch row into C slots per expert (GShard's capacity, planner/README.md
 * "Mixture of experts") and combines them back. With capacity_factor >= experts / top_k every
 * token finds its slot and the graph computes exactly what Hugging Face does. */

typedef struct
{
  JsonObject *object;
  const char *what;
  GError **error;
} Fields;

static JsonNode *
field (Fields *f, const char *name)
{
  JsonNode *node = json_object_get_member (f->object, name);
  return node == NULL || JSON_NODE_HOLDS_NULL (node) ? NULL : node;
}

static GType
value_type (JsonNode *node)
{
  return JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node) : G_TYPE_INVALID;
}

static gboolean
wrong (Fields *f, const char *name, const char *expected)
{
  g_set_error (f->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s: field \"%s\" must be %s",
               f->what, name, expected);
  return FALSE;
}

/* A size >= 1 (@fallback when absent; G_MININT64: required). */
static gboolean
size_field (Fields *f, const char *name, gint64 fallback, gint64 *out)
{
  JsonNode *node = field (f, name);
  double d;

  if (node == NULL)
    {
      if (fallback == G_MININT64)
        {
          g_set_error (f->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                       "%s: missing field \"%s\"", f->what, name);
          return FALSE;
        }
      *out = fallback;
      return TRUE;
    }
  if (value_type (node) == G_TYPE_INT64)
    d = (double)json_node_get_int (node);
  else if (value_type (node) == G_TYPE_DOUBLE)
    d = json_node_get_double (node);
  else
    return wrong (f, name, "an integer");
  if (d != floor (d) || d < 1 || d > G_MAXINT32)
    return wrong (f, name, "an integer >= 1 and < 2^31");
  *out = (gint64)d;
  return TRUE;
}

static gboolean
bool_field (Fields *f, const char *name, gboolean fallback, gboolean *out)
{
  JsonNode *node = field (f, name);

  *out = fallback;
  if (node == NULL)
    return TRUE;
  if (value_type (node) != G_TYPE_BOOLEAN)
    return wrong (f, name, "true or false");
  *out = json_node_get_boolean (node);
  return TRUE;
}

static gboolean
positive_field (Fields *f, const char *name, double fallback, double *out)
{
  JsonNode *node = field (f, name);

  *out = fallback;
  if (node == NULL)
    return TRUE;
  if (value_type (node) == G_TYPE_INT64)
    *out = (double)json_node_get_int (node);
  else if (value_type (node) == G_TYPE_DOUBLE)
    *out = json_node_get_double (node);
  else
    return wrong (f, name, "a number");
  if (!(*out > 0 && *out < 1e6))
    return wrong (f, name, "a number > 0 and < 1e6");
  return TRUE;
}

/* qwen2_moe: a layer i is dense when listed in mlp_only_layers or when (i + 1) is not a
 * multiple of decoder_sparse_step, as Qwen2MoeDecoderLayer decides. */
static gboolean
read_dense_layers (Fields *f, PlannerHfMoe *moe)
{
  JsonNode *node = field (f, "mlp_only_layers");
  gint64 step;

  if (!size_field (f, "decoder_sparse_step", 1, &step))
    return FALSE;
  for (gint64 i = 0; i < PLANNER_HF_MOE_MAX_LAYERS; i++)
    if ((i + 1) % step != 0)
      moe->dense[i / 8] |= 1u << (i % 8);
  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return wrong (f, "mlp_only_layers", "a list of layer indices");
  JsonArray *list = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (list); i++)
    {
      JsonNode *e = json_array_get_element (list, i);
      gint64 layer;

      if (value_type (e) != G_TYPE_INT64 || (layer = json_node_get_int (e)) < 0
          || layer >= PLANNER_HF_MOE_MAX_LAYERS)
        return wrong (f, "mlp_only_layers", "a list of layer indices from 0 to 4095");
      moe->dense[layer / 8] |= 1u << (layer % 8);
    }
  return TRUE;
}

gboolean
planner_hf_moe_parse (JsonObject *config, const char *what, const char *model_type,
                      PlannerHfMoe *moe, GError **error)
{
  Fields f = { config, what, error };
  gboolean mixtral = g_strcmp0 (model_type, "mixtral") == 0;

  memset (moe, 0, sizeof *moe);
  if (!mixtral && g_strcmp0 (model_type, "qwen2_moe") != 0)
    return TRUE;
  moe->enabled = TRUE;
  gboolean router_logits;
  if (!bool_field (&f, "output_router_logits", FALSE, &router_logits))
    return FALSE;
  if (router_logits)
    {
      /* The loss would add router_aux_loss_coef x the load-balancing loss. */
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "%s: output_router_logits true is not supported: the training loss would add "
                   "the router's load-balancing loss, which the graph does not compute; only "
                   "output_router_logits false is modelled",
                   what);
      return FALSE;
    }
  if (!positive_field (&f, "capacity_factor", PLANNER_HF_MOE_DEFAULT_CAPACITY_FACTOR,
                       &moe->capacity_factor))
    return FALSE;
  if (mixtral)
    {
      /* MixtralConfig's defaults are Mixtral-8x7B's. */
      if (!size_field (&f, "num_local_experts", 8, &moe->experts)
          || !size_field (&f, "num_experts_per_tok", 2, &moe->top_k)
          || !size_field (&f, "intermediate_size", G_MININT64, &moe->expert_intermediate)
          || !size_field (&f, "sliding_window", 0, &moe->sliding_window))
        return FALSE;
      moe->norm_topk = TRUE;
    }
  else
    {
      gboolean sliding;

      /* Qwen2MoeConfig's defaults are Qwen1.5-MoE-A2.7B's. */
      if (!size_field (&f, "num_experts", 60, &moe->experts)
          || !size_field (&f, "num_experts_per_tok", 4, &moe->top_k)
          || !size_field (&f, "moe_intermediate_size", 1408, &moe->expert_intermediate)
          || !size_field (&f, "shared_expert_intermediate_size", 5632, &moe->shared_intermediate)
          || !bool_field (&f, "norm_topk_prob", FALSE, &moe->norm_topk)
          || !bool_field (&f, "qkv_bias", TRUE, &moe->qkv_bias)
          || !bool_field (&f, "use_sliding_window", FALSE, &sliding)
          || !read_dense_layers (&f, moe))
        return FALSE;
      /* Layer 0 slides whenever the window is on (Qwen2MoeConfig's layer_types). */
      if (sliding && !size_field (&f, "sliding_window", 4096, &moe->sliding_window))
        return FALSE;
    }
  if (moe->top_k > moe->experts)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s: num_experts_per_tok %" G_GINT64_FORMAT " exceeds the %" G_GINT64_FORMAT
                   " experts; a token picks at most every expert once",
                   what, moe->top_k, moe->experts);
      return FALSE;
    }
  return TRUE;
}

gboolean
planner_hf_moe_is_sparse (const PlannerHfMoe *moe, gint64 layer)
{
  if (!moe->enabled)
    return FALSE;
  g_assert (layer >= 0 && layer < PLANNER_HF_MOE_MAX_LAYERS);
  return !(moe->dense[layer / 8] & (1u << (layer % 8)));
}

gint64
planner_hf_moe_capacity (const PlannerHfMoe *moe, gint64 seq)
{
  double c = ceil (moe->capacity_factor * (double)moe->top_k * (double)seq / (double)moe->experts);

  return (gint64)CLAMP (c, 1.0, (double)seq);
}

/* ---- building */

typedef struct
{
  PlannerGraph *graph;
  const char *prefix;
  PlannerDType dtype;
  GError **error;
  gboolean failed;
} Block;

#define SHAPE(...)                                                                                 \
  G_N_ELEMENTS (((const gint64[]){ __VA_ARGS__ })), ((const gint64[]){ __VA_ARGS__ })

static int
param (Block *k, const char *rest, guint rank, const gint64 *shape)
{
  g_autofree char *name = g_strconcat (k->prefix, rest, NULL);
  int id;

  if (k->failed)
    return -1;
  id = planner_graph_add_parameter (k->graph, name, k->dtype, rank, shape, k->error);
  k->failed = id < 0;
  return id;
}

/* One op; returns its op index. */
static int
op_n (Block *k, const char *rest, PlannerOpType type, const PlannerOpAttrs *attrs,
      const int *inputs, guint n_inputs, guint n_outputs)
{
  g_autofree char *name = g_strconcat (k->prefix, rest, NULL);
  PlannerOpAttrs defaults;
  guint ids[4];
  int op;

  if (k->failed)
    return -1;
  g_assert (n_inputs <= G_N_ELEMENTS (ids));
  for (guint i = 0; i < n_inputs; i++)
    {
      g_assert (inputs[i] >= 0);
      ids[i] = (guint)inputs[i];
    }
  if (attrs == NULL)
    {
      planner_op_attrs_init (&defaults);
      attrs = &defaults;
    }
  op = planner_graph_add_op (k->graph, name, type, attrs, ids, n_inputs, n_outputs, NULL, k->error);
  k->failed = op < 0;
  return op;
}

#define IN(...) ((const int[]){ __VA_ARGS__ }), G_N_ELEMENTS (((const int[]){ __VA_ARGS__ }))

static int
op (Block *k, const char *rest, PlannerOpType type, const PlannerOpAttrs *attrs, const int *inputs,
    guint n_inputs)
{
  int o = op_n (k, rest, type, attrs, inputs, n_inputs, 1);
  return o < 0 ? -1 : (int)planner_graph_op_output (k->graph, o, 0);
}

static int
activation (Block *k, const char *rest, PlannerOpType act, int variant, int x)
{
  PlannerOpAttrs attrs;

  planner_op_attrs_init (&attrs);
  attrs.variant = variant;
  return op (k, rest, act, &attrs, IN (x));
}

/* nn.Linear without bias: "<rest>" with "<rest>.weight" [out, in]. */
static int
linear (Block *k, const char *rest, int x, gint64 in, gint64 out)
{
  g_autofree char *weight = g_strconcat (rest, ".weight", NULL);
  PlannerOpAttrs attrs;
  int w = param (k, weight, SHAPE (out, in));

  if (k->failed)
    return -1;
  planner_op_attrs_init (&attrs);
  attrs.transpose_b = TRUE;
  return op (k, rest, PLANNER_OP_MATMUL, &attrs, IN (x, w));
}

static int
einsum (Block *k, const char *rest, const char *equation, int a, int b)
{
  PlannerOpAttrs attrs;

  planner_op_attrs_init (&attrs);
  g_strlcpy (attrs.equation, equation, sizeof attrs.equation);
  return op (k, rest, PLANNER_OP_EINSUM, &attrs, IN (a, b));
}

int
planner_hf_moe_block (PlannerGraph *graph, const char *prefix, PlannerDType dtype,
                      const PlannerHfMoe *moe, gint64 batch, gint64 seq, gint64 hidden,
                      PlannerOpType act, int act_variant, int x, GError **error)
{
  Block k = { graph, prefix, dtype, error, FALSE };
  const gint64 E = moe->experts, I = moe->expert_intermediate, H = hidden;
  const gint64 C = planner_hf_moe_capacity (moe, seq);
  PlannerOpAttrs attrs;
  int logits, gates, slots, up, gate, y, split, out;

  g_return_val_if_fail (moe->enabled && x >= 0, -1);

  if (moe->sliding_window > 0 && seq > moe->sliding_window)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%smlp: the layers attend through a sliding window of %" G_GINT64_FORMAT
                   " tokens (sliding_window), shorter than the sequence of %" G_GINT64_FORMAT
                   ", and the graph models full causal attention; use a sequence of at most "
                   "%" G_GINT64_FORMAT,
                   prefix, moe->sliding_window, seq, moe->sliding_window);
      return -1;
    }
  /* The widest tensor is the experts' [B, E, C, 2, I]. */
  if ((double)batch * (double)E * (double)C * 2.0 * (double)MAX (I, H)
      > (double)(G_GINT64_CONSTANT (1) << 62))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%smlp: batch %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                   " experts x %" G_GINT64_FORMAT " slots makes tensors of more than 2^62 elements",
                   prefix, batch, E, C);
      return -1;
    }

  /* Router: Hugging Face's MixtralTopKRouter / Qwen2MoeTopKRouter. */
  logits = linear (&k, "mlp.gate", x, H, E);
  planner_op_attrs_init (&attrs);
  attrs.n_ints = 1;
  attrs.ints[0] = moe->top_k;
  attrs.variant = moe->norm_topk ? 1 : 0;
  gates = op (&k, "mlp.router", PLANNER_OP_MOE_ROUTER, &attrs, IN (logits));

  planner_op_attrs_init (&attrs);
  attrs.n_ints = 1;
  attrs.ints[0] = C;
  slots = op (&k, "mlp.dispatch", PLANNER_OP_MOE_DISPATCH, &attrs, IN (x, gates));

  /* The experts: gate_up_proj [E, 2I, H] viewed as [E, 2, I, H] (same numbers) so that the
   * intermediate dim stays one factor, then chunk (2) as Hugging Face does. */
  up = param (&k, "mlp.experts.gate_up_proj", SHAPE (E, 2, I, H));
  up = einsum (&k, "mlp.experts.gate_up", "bech,eqih->becqi", slots, up);
  planner_op_attrs_init (&attrs);
  attrs.axis = 3;
  attrs.n_ints = 2;
  attrs.ints[0] = attrs.ints[1] = 1;
  split = op_n (&k, "mlp.experts.chunk", PLANNER_OP_SPLIT, &attrs, IN (up), 2);
  if (k.failed)
    return -1;
  gate = activation (&k, "mlp.experts.act_fn", act, act_variant,
                     (int)planner_graph_op_output (graph, split, 0));
  y = op (&k, "mlp.experts.mul", PLANNER_OP_MUL, NULL,
          IN (gate, (int)planner_graph_op_output (graph, split, 1)));
  y = einsum (&k, "mlp.experts.down", "becqi,ehi->bech", y,
              param (&k, "mlp.experts.down_proj", SHAPE (E, H, I)));
  out = op (&k, "mlp.combine", PLANNER_OP_MOE_COMBINE, NULL, IN (y, gates));

  if (moe->shared_intermediate > 0)
    {
      const gint64 S = moe->shared_intermediate;
      int g = linear (&k, "mlp.shared_expert.gate_proj", x, H, S);
      int u = linear (&k, "mlp.shared_expert.up_proj", x, H, S);
      int shared, scale;

      g = activation (&k, "mlp.shared_expert.act_fn", act, act_variant, g);
      shared = op (&k, "mlp.shared_expert.mul", PLANNER_OP_MUL, NULL, IN (g, u));
      shared = linear (&k, "mlp.shared_expert.down_proj", shared, S, H);
      scale = linear (&k, "mlp.shared_expert_gate", x, H, 1);
      scale = op (&k, "mlp.shared_expert_sigmoid", PLANNER_OP_SIGMOID, NULL, IN (scale));
      shared = op (&k, "mlp.shared_expert_scale", PLANNER_OP_MUL, NULL, IN (scale, shared));
      out = op (&k, "mlp.add_shared", PLANNER_OP_ADD, NULL, IN (out, shared));
    }
  return k.failed ? -1 : out;
}
