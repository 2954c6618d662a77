/* planner-hf-moe-private.h: the mixture-of-experts families of the Hugging Face importer
 * (mixtral, qwen2_moe). planner-hf-import.c reads the attention and everything else as for
 * LLaMA and hands each sparse layer's MLP to planner_hf_moe_block(). */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-graph.h"

G_BEGIN_DECLS

#define PLANNER_HF_MOE_MAX_LAYERS 4096

/* Tokens an expert takes from one batch row when the config names no "capacity_factor":
 * 1.25 x its share at perfect balance (GShard's and Switch's training value). */
#define PLANNER_HF_MOE_DEFAULT_CAPACITY_FACTOR 1.25

typedef struct
{
  gboolean enabled; /* FALSE for every dense model type */
  gint64 experts;
  gint64 top_k;
  gint64 expert_intermediate;
  gint64 shared_intermediate; /* 0: no shared expert (mixtral) */
  gboolean norm_topk;         /* renormalize the top-k probabilities to sum to 1 */
  gboolean qkv_bias;          /* q/k/v projections have biases (qwen2_moe) */
  double capacity_factor;
  gint64 sliding_window; /* mixtral: every layer slides when set; 0 for none */
  /* qwen2_moe's decoder_sparse_step and mlp_only_layers: layers with a dense MLP. */
  guint8 dense[PLANNER_HF_MOE_MAX_LAYERS / 8];
} PlannerHfMoe;

/* Reads the MoE fields of a config whose model_type is @model_type; for other model types
 * clears @moe (enabled FALSE) and returns TRUE. Errors name @what and the field. */
gboolean planner_hf_moe_parse (JsonObject *config, const char *what, const char *model_type,
                               PlannerHfMoe *moe, GError **error);
/* Whether layer @layer's MLP is a sparse MoE block. */
gboolean planner_hf_moe_is_sparse (const PlannerHfMoe *moe, gint64 layer);
/* Experts' slots per batch row: ceil (capacity_factor x top_k x seq / experts), at most seq. */
gint64 planner_hf_moe_capacity (const PlannerHfMoe *moe, gint64 seq);

/* Adds the sparse MoE block of one layer on @x ([batch, seq, hidden]), its ops named
 * "@prefix mlp.*" as Hugging Face's modules are; returns the block's output tensor ([batch, seq,
 * hidden], before the residual add), or -1 with @error set. @act is the experts' activation. */
int planner_hf_moe_block (PlannerGraph *graph, const char *prefix, PlannerDType dtype,
                          const PlannerHfMoe *moe, gint64 batch, gint64 seq, gint64 hidden,
                          PlannerOpType act, int act_variant, int x, GError **error);

G_END_DECLS
