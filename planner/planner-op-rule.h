/* planner-op-rule.h: op types and their sharding rules as factor tables (semantics.md 4).
 *
 * Each op type declares its rule once, einsum-style: named factors (loop dimensions) with a
 * size and a kind, and for every input and output dim the factors it maps to (several for a
 * compound dim, major first). One table drives strategy enumeration, validation, the layouts
 * of a strategy, local shapes, FLOPs, the executor's kernels and the exports.
 */
#pragma once

#include <glib.h>

#include "planner-layout.h"
#include "planner-mesh.h"

G_BEGIN_DECLS

#define PLANNER_MAX_FACTORS 16
#define PLANNER_MAX_OPERANDS 16
#define PLANNER_MAX_COMPOUND 4

typedef enum
{
  PLANNER_DTYPE_F32,
  PLANNER_DTYPE_BF16,
  PLANNER_DTYPE_F16,
  PLANNER_DTYPE_I64,
} PlannerDType;

typedef enum
{
  PLANNER_OP_MATMUL,       /* Linear: x[..., K] @ W[K, N] (or W[N, K]) (+ bias[N]) */
  PLANNER_OP_BATCH_MATMUL, /* a[..., M, K] @ b[..., K, N], batch dims broadcast */
  PLANNER_OP_EINSUM,       /* attrs.equation, e.g. "bsh,hqnd->bsqnd" (+ bias on output tail) */
  PLANNER_OP_ADD,
  PLANNER_OP_SUB,
  PLANNER_OP_MUL,
  PLANNER_OP_DIV,
  PLANNER_OP_RELU,
  PLANNER_OP_GELU,          /* attrs.variant: 0 erf, 1 tanh approximation (gelu_new) */
  PLANNER_OP_SILU,
  PLANNER_OP_TANH,
  PLANNER_OP_EXP,
  PLANNER_OP_NEG,
  PLANNER_OP_CAST,          /* attrs.dtype */
  PLANNER_OP_DROPOUT,       /* identity in a forward trial */
  PLANNER_OP_SOFTMAX,       /* attrs.axis */
  PLANNER_OP_LAYER_NORM,    /* x, gamma, beta over the last dim; attrs.eps */
  PLANNER_OP_RMS_NORM,      /* x, gamma over the last dim; attrs.eps */
  PLANNER_OP_EMBEDDING,     /* ids[...], table[V, H] -> [..., H] */
  PLANNER_OP_RESHAPE,       /* attrs.ints: target shape (one -1 allowed) */
  PLANNER_OP_TRANSPOSE,     /* attrs.ints: permutation */
  PLANNER_OP_REDUCE_SUM,    /* attrs.ints: axes; attrs.keepdims */
  PLANNER_OP_REDUCE_MEAN,
  PLANNER_OP_CONCAT,        /* attrs.axis */
  PLANNER_OP_SPLIT,         /* attrs.axis, attrs.ints: sizes of the outputs */
  PLANNER_OP_SLICE,         /* attrs.axis, attrs.start, attrs.end */
  PLANNER_OP_ROTARY_EMBEDDING, /* x[B, H, S, D]; attrs.theta; positions are the global S index;
                                * attrs.variant 1: llama3 frequency scaling (attrs.rope_*) */
  PLANNER_OP_SDPA,          /* q[B, H, Sq, D], k[B, Hkv, Sk, D], v[B, Hkv, Sk, Dv]; attrs.causal;
                             * attrs.variant 1: ALiBi (BLOOM); optional input 3: a bias on the
                             * scaled scores [B or 1, H or 1, Sq, Sk] (T5) */
  PLANNER_OP_CROSS_ENTROPY, /* logits[..., V], labels[...] i64 -> mean loss [] */
  PLANNER_OP_CONV2D,        /* x[N, C, H, W], w[O, C, kh, kw] (+ bias[O]); attrs.ints: stride, pad */
  /* Mixture of experts (planner/README.md, "Mixture of experts"). */
  PLANNER_OP_SIGMOID,
  PLANNER_OP_MOE_ROUTER,   /* logits[B, S, E] -> gates[B, S, E]: softmax, top attrs.ints[0]
                            * kept, renormalized when attrs.variant is 1, the rest 0 */
  PLANNER_OP_MOE_DISPATCH, /* x[B, S, H], gates[B, S, E] -> [B, E, C, H], C = attrs.ints[0] */
  PLANNER_OP_MOE_COMBINE,  /* y[B, E, C, H], gates[B, S, E] -> [B, S, H] */
  /* Model zoo (issue 16). */
  PLANNER_OP_REPEAT_INTERLEAVE, /* each slice of dim attrs.axis attrs.ints[0] times (repeat_kv) */
  PLANNER_OP_SCALE,             /* x * attrs.scale (Gemma's embedding times sqrt (hidden)) */
  /* ids[B, S] -> i64 [S, S]: T5's bucket of key j - query i; attrs.ints: buckets,
   * max distance, bidirectional (1) or causal (0). Reads only the shape of its input. */
  PLANNER_OP_RELATIVE_POSITION_BUCKET,
  PLANNER_N_OP_TYPES
} PlannerOpType;

typedef struct
{
  int axis;
  guint n_ints;
  gint64 ints[PLANNER_MAX_OPERANDS];
  gint64 start, end;
  gint64 heads;        /* MatMul: output features are heads x head_dim, heads-major */
  gboolean transpose_b;
  gboolean causal;
  gboolean keepdims;
  int variant;
  PlannerDType dtype;
  double eps;
  double theta;
  double scale;        /* SDPA: 0 means 1/sqrt(D); Scale: the factor */
  char equation[64];
  /* RotaryEmbedding variant 1 (issue 16): Llama 3.1's frequency scaling ("rope_type":
   * "llama3"): factor, low_freq_factor, high_freq_factor, original_max_position_embeddings.
   * 0 when unused (and then left out of the graph JSON and the hash). */
  double rope_factor, rope_low_freq, rope_high_freq;
  gint64 rope_original_max;
} PlannerOpAttrs;

typedef enum
{
  PLANNER_FACTOR_PASS,             /* in inputs and outputs */
  PLANNER_FACTOR_REDUCTION,        /* inputs only: splitting it makes outputs partial */
  PLANNER_FACTOR_NEED_REPLICATION, /* never split */
} PlannerFactorKind;

typedef struct
{
  char name[12];
  gint64 size;
  PlannerFactorKind kind;
  /* Derived: not need-replication, and major-most in every compound dim it appears in. */
  gboolean splittable;
} PlannerFactor;

/* How one operand's dims map to factors. A dim of size 1 may map to no factor (broadcast). */
typedef struct
{
  guint8 rank;
  guint8 n[PLANNER_MAX_RANK];
  guint8 f[PLANNER_MAX_RANK][PLANNER_MAX_COMPOUND];
} PlannerOperandMap;

typedef struct
{
  PlannerOpType type;
  guint n_factors;
  PlannerFactor factors[PLANNER_MAX_FACTORS];
  guint n_inputs;
  guint n_outputs;
  PlannerOperandMap inputs[PLANNER_MAX_OPERANDS];
  PlannerOperandMap outputs[PLANNER_MAX_OPERANDS];
  /* Inputs in which the op is linear, so a partial(a) input may pass through to the
   * outputs. With linear_all, only when every one of them is partial alike (Add, Sub). */
  guint32 linear_inputs;
  gboolean linear_all;
  /* Inputs that are added once, not per partial shard (a Linear's bias): the executor adds
   * them only on coordinate 0 of the reduction axes. */
  guint32 bias_inputs;
  double flops;        /* forward FLOPs of the whole (unsharded) op */
} PlannerOpRule;

/* A strategy assigns each mesh axis to at most one splittable factor (semantics.md 4). */
typedef struct
{
  guint8 n_axes[PLANNER_MAX_FACTORS];
  guint8 axes[PLANNER_MAX_FACTORS][PLANNER_MAX_AXES];
  /* Axes on which linear inputs arrive partial and the outputs stay partial. */
  guint32 partial;
  /* The input that carries @partial when the rule is not linear_all. */
  guint8 partial_input;
} PlannerStrategy;

const char *planner_dtype_to_string (PlannerDType dtype);
gboolean planner_dtype_from_string (const char *text, PlannerDType *dtype);
guint planner_dtype_size (PlannerDType dtype);

const char *planner_op_type_to_string (PlannerOpType type);
gboolean planner_op_type_from_string (const char *text, PlannerOpType *type);
/* How many inputs an op type takes: [min, max]; max G_MAXUINT for variadic. */
void planner_op_type_arity (PlannerOpType type, guint *min_inputs, guint *max_inputs);

void planner_op_attrs_init (PlannerOpAttrs *attrs);

/* Builds the rule of one op from its input shapes: this is also the shape inference.
 * Errors name @op_name, the operand, the dim and the sizes. */
gboolean planner_op_rule_build (PlannerOpRule *rule, PlannerOpType type,
                                const PlannerOpAttrs *attrs, guint n_inputs,
                                const guint *input_ranks, const gint64 *const *input_shapes,
                                guint n_outputs, const char *op_name, GError **error);
/* Output shape @i implied by the rule. Returns the rank. */
guint planner_op_rule_output_shape (const PlannerOpRule *rule, guint i, gint64 *shape);
int planner_op_rule_factor_index (const PlannerOpRule *rule, const char *name);
/* "input 0", "input 1", ...: how messages name an operand whose tensor name is unknown. */
const char *planner_operand_label (guint i);

/* ---- strategies (planner-strategy.c) ---- */

void planner_strategy_init (PlannerStrategy *strategy);
gboolean planner_strategy_equal (const PlannerStrategy *a, const PlannerStrategy *b);
/* Drops the mesh's axes of size 1 from every factor and from partial: the canonical form,
 * as planner_layout_normalize does for layouts (semantics.md 2). */
void planner_strategy_normalize (PlannerStrategy *strategy, const PlannerMesh *mesh);
/* Number of devices the work is split over: product of the sizes of assigned axes. */
guint64 planner_strategy_parts (const PlannerStrategy *strategy, const PlannerMesh *mesh);
guint32 planner_strategy_axis_mask (const PlannerStrategy *strategy);
/* Every legal strategy (no partial inputs), exhaustive over the (factors+1)^axes space with
 * axes in mesh order per factor, in a deterministic order (replicated first). */
GArray *planner_op_rule_enumerate (const PlannerOpRule *rule, const PlannerMesh *mesh);
/* Axis use, splittable factors, divisibility; the message names the op and what would work. */
gboolean planner_strategy_validate (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                                    const PlannerMesh *mesh, const char *op_name,
                                    const char *const *input_names, GError **error);
/* Layouts of every input and output under a strategy. */
void planner_strategy_layouts (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                               const PlannerMesh *mesh, PlannerLayout *inputs,
                               PlannerLayout *outputs);
/* The strategy implied by input layouts (a pin). @n_given may be less than the rule's inputs
 * when the rest are parameters; factors they alone carry stay unsplit. Axes of size 1 in
 * @inputs are ignored: the strategy is canonical. */
gboolean planner_strategy_from_layouts (const PlannerOpRule *rule, const PlannerMesh *mesh,
                                        const PlannerLayout *inputs, guint n_given,
                                        const char *op_name, const char *const *input_names,
                                        PlannerStrategy *strategy, GError **error);
/* Input layouts in bracket notation, comma-separated: "[dp,_],[_,mp]". */
char *planner_strategy_to_string (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                                  const PlannerMesh *mesh);
/* Factor view: "b=dp k=mp", "replicated" when nothing is split. */
char *planner_strategy_describe (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                                 const PlannerMesh *mesh);
double planner_strategy_local_flops (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                                     const PlannerMesh *mesh);
/* Start index of each factor's local chunk on the device at @coords (for kernels that need
 * global positions: causal masks, rotary positions, vocab ranges). */
void planner_strategy_factor_offsets (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                                      const PlannerMesh *mesh, const guint coords[PLANNER_MAX_AXES],
                                      gint64 offsets[PLANNER_MAX_FACTORS]);

G_END_DECLS
