/* executor-op-util.h: what every backend's kernels read off an ExecutorOpCall the same way
 * (local sizes and shape checks, the global reduction size of a mean, factor offsets, walks,
 * einsum equations, GEMM plans), so the cpu and cuda kernels are driven by one reading of the
 * rule tables. */
#pragma once

#include "executor-backend-private.h"
#include "executor-kernel-math.h"
#include "executor-moe.h"

G_BEGIN_DECLS

/* Input (output) @i of @c as f32: every float dtype is stored as f32. */
static inline float *
executor_in_f32 (const ExecutorOpCall *c, guint i)
{
  return (float *)c->inputs[i].buffer->data;
}

static inline float *
executor_out_f32 (const ExecutorOpCall *c, guint i)
{
  return (float *)c->outputs[i].buffer->data;
}

gint64 executor_shape_numel (const gint64 *shape, guint rank);
gint64 executor_numel (const ExecutorTensorArg *t);
/* Row-major strides of @shape, in elements. */
void executor_row_strides (const gint64 *shape, guint rank, gint64 *strides);
/* Global size of the product of the rule's reduction factors: what a mean divides by, so a
 * shard's partial mean sums to the whole mean. */
double executor_reduction_count (const ExecutorOpCall *c);
/* Global offset of the factor on dim @dim of input @input (0 when the dim has none). */
gint64 executor_dim_offset (const ExecutorOpCall *c, guint input, guint dim);
/* Global offset of the rule's factor called @name (0 when the rule has none). */
gint64 executor_factor_offset (const ExecutorOpCall *c, const char *name);
int executor_norm_axis (int axis, guint rank);
/* The dims before @axis (@outer) and after it (@inner): softmax rows, Concat and Split
 * blocks. */
void executor_axis_blocks (const ExecutorTensorArg *t, int axis, gint64 *outer, gint64 *inner);
/* Bit d set: ReduceSum/ReduceMean reduce input dim d (every dim when the op names none). */
guint32 executor_reduced_dims (const ExecutorOpCall *c);
/* EXECUTOR_ERROR_FAILED naming the op: "NAME (Type): message". */
gboolean executor_kernel_error (GError **error, const ExecutorOpCall *c, const char *message);

typedef struct
{
  guint n_ops;
  char ops[PLANNER_MAX_OPERANDS][PLANNER_MAX_RANK + 1];
  char out[PLANNER_MAX_RANK + 1];
  gint64 size[128]; /* local size of each letter */
} ExecutorEquation;

gboolean executor_equation_parse (const ExecutorOpCall *c, ExecutorEquation *eq, GError **error);

/* Any einsum one output element at a time: letters [0, n_free) are the output's, in its
 * order, the rest are summed; stride[op][letter] walks each operand, out_stride the output
 * (0 for summed letters). */
typedef struct
{
  guint n_free;
  guint n_letters;
  gint64 size[128];
  gint64 stride[PLANNER_MAX_OPERANDS][128];
  gint64 out_stride[128];
} ExecutorEinsumIndex;

void executor_einsum_index (const ExecutorOpCall *c, const ExecutorEquation *eq,
                            ExecutorEinsumIndex *ix);

/* Two operands as batched GEMMs: A permuted to [batch, m, k], B to [batch, k, n], the result
 * [batch, m, n] permuted to the output's letter order. FALSE when the equation has no such
 * form (letters summed inside one operand, repeated letters). */
typedef struct
{
  gint64 batch, m, n, k;
  gboolean permute_a, permute_b, permute_out;
  guint rank_a, rank_b, rank_out;
  guint perm_a[PLANNER_MAX_RANK];     /* [b m k] dim i = A dim perm_a[i] */
  guint perm_b[PLANNER_MAX_RANK];     /* [b k n] dim i = B dim perm_b[i] */
  gint64 shape_bmn[PLANNER_MAX_RANK]; /* the GEMM result's letter shape */
  guint perm_out[PLANNER_MAX_RANK];   /* output dim i = result dim perm_out[i] */
} ExecutorEinsumGemm;

gboolean executor_einsum_gemm_plan (const ExecutorEquation *eq, ExecutorEinsumGemm *plan);

/* MatMul as one GEMM: x [.., k] as m rows against the weight [k, n] ([n, k] when
 * transpose_b). */
gboolean executor_matmul_dims (const ExecutorOpCall *c, gint64 *m, gint64 *n, gint64 *k,
                               GError **error);

/* BatchMatMul as GEMMs: the output's batch dims broadcast A [.., m, k] and B [.., k, n]. The
 * innermost batch dim is a strided batch of n_inner GEMMs (A and B matrices stride_a and
 * stride_b elements apart, 0 where they broadcast), the outer ones n_outer such batches. */
typedef struct
{
  gint64 m, n, k;
  gint64 n_outer, n_inner;
  gint64 stride_a, stride_b;
  int n_outer_dims;
  gint64 outer_shape[PLANNER_MAX_RANK];
  gint64 outer_a[PLANNER_MAX_RANK]; /* element strides of the outer dims, 0 where A broadcasts */
  gint64 outer_b[PLANNER_MAX_RANK];
} ExecutorBatchGemm;

gboolean executor_batch_matmul_plan (const ExecutorOpCall *c, ExecutorBatchGemm *plan,
                                     GError **error);
/* Where outer batch @i starts in A and in B, in elements. */
void executor_batch_gemm_offsets (const ExecutorBatchGemm *plan, gint64 i, gint64 *a, gint64 *b);

/* Scaled dot-product attention on q [b, h, sq, d], k [b, kv, sk, d], v [b, kv, sk, dv]: query
 * heads are kv-head major (HF repeat_kv), @group of them per kv head. */
typedef struct
{
  gint64 sq, sk, d, dv, group;
  double scale;
  gint64 q_first; /* global position of the first local query (causal masks) */
  /* ALiBi (attrs.variant 1, BLOOM; issue 16): the global query heads, and where this
   * shard's kv heads and groups start in them. */
  gboolean alibi;
  gint64 n_heads, group_total, kv_first, group_first;
} ExecutorSdpa;

/* RotaryEmbedding's pair @i of @d rotates by position x this x theta^(-2i/d): 1, or Llama
 * 3.1's frequency scaling (attrs.variant 1, issue 16). */
double executor_rotary_position_scale (const PlannerOpAttrs *attrs, gint64 i, gint64 d);

/* The score bias (SDPA's input 3, T5; issue 16) of local batch @b and query head @h, scores
 * [Sq, Sk]: its rows, or NULL without one. */
const float *executor_sdpa_bias (const ExecutorOpCall *c, gint64 b, gint64 h);
/* Offset of those rows in the bias, for its gradient. */
gint64 executor_sdpa_bias_offset (const ExecutorOpCall *c, gint64 b, gint64 h);

/* ALiBi's slope of global query head @h of @n (Press et al., as BLOOM builds them). */
double executor_alibi_slope (gint64 n, gint64 h);
/* Adds local query head @h_local's ALiBi bias, slope x key position, to one row of raw
 * scores (before the scale that executor_math_attention_row applies). */
void executor_sdpa_alibi_row (const ExecutorSdpa *s, gint64 h_local, float *row);

gboolean executor_sdpa_dims (const ExecutorOpCall *c, ExecutorSdpa *s, GError **error);
gboolean executor_conv2d_dims (const ExecutorOpCall *c, ExecutorConv2d *conv, GError **error);

/* dst dim i = src dim perm[i]: the walk of the destination over the source. TRUE when @perm
 * is the identity (a plain copy). */
gboolean executor_permute_walk (const gint64 *src_shape, guint rank, const guint *perm,
                                ExecutorWalk *w);
/* @t read along the output @o's shape, broadcasting from its trailing dims; FALSE when its
 * local shape does not broadcast to the output's. */
gboolean executor_broadcast_walk (const ExecutorTensorArg *t, const ExecutorTensorArg *o,
                                  ExecutorWalk *w);
gint64 executor_walk_numel (const ExecutorWalk *w);
/* The element-wise op of a Relu, Gelu, ... (COPY for Cast and Dropout); of an Add, Sub, ... */
ExecutorUnary executor_unary_of (const PlannerOp *op);
ExecutorBinary executor_binary_of (const PlannerOp *op);

/* Kernels that only move memory, through the backend's copy_2d, serve every backend. */
gboolean executor_kernel_reshape (ExecutorDevice *dev, const ExecutorOpCall *c, GError **error);
/* Concat, Split and Slice. */
gboolean executor_kernel_concat_split (ExecutorDevice *dev, const ExecutorOpCall *c,
                                       GError **error);

/* Every backend's kernel table: op types whose logic is the same share a kernel, so a
 * backend defines static k_matmul, k_batch_matmul, k_einsum, k_binary, k_unary, k_softmax,
 * k_norm, k_embedding, k_transpose, k_reduce, k_rotary, k_sdpa, k_cross_entropy and
 * k_conv2d, and sets its table to this. */
#define EXECUTOR_KERNEL_TABLE { EXECUTOR_KERNEL_ENTRIES }
/* The model zoo's op types (issue 16) have CPU kernels only; the CPU table adds them to
 * these, and other backends refuse them by name (executor_device_run_op). */
#define EXECUTOR_KERNEL_ENTRIES                                                                    \
    [PLANNER_OP_MATMUL] = k_matmul, [PLANNER_OP_BATCH_MATMUL] = k_batch_matmul,                    \
    [PLANNER_OP_EINSUM] = k_einsum, [PLANNER_OP_ADD] = k_binary, [PLANNER_OP_SUB] = k_binary,      \
    [PLANNER_OP_MUL] = k_binary, [PLANNER_OP_DIV] = k_binary, [PLANNER_OP_RELU] = k_unary,         \
    [PLANNER_OP_GELU] = k_unary, [PLANNER_OP_SILU] = k_unary, [PLANNER_OP_TANH] = k_unary,         \
    [PLANNER_OP_EXP] = k_unary, [PLANNER_OP_NEG] = k_unary, [PLANNER_OP_CAST] = k_unary,           \
    [PLANNER_OP_DROPOUT] = k_unary, [PLANNER_OP_SOFTMAX] = k_softmax,                              \
    [PLANNER_OP_LAYER_NORM] = k_norm, [PLANNER_OP_RMS_NORM] = k_norm,                              \
    [PLANNER_OP_EMBEDDING] = k_embedding, [PLANNER_OP_RESHAPE] = executor_kernel_reshape,          \
    [PLANNER_OP_TRANSPOSE] = k_transpose, [PLANNER_OP_REDUCE_SUM] = k_reduce,                      \
    [PLANNER_OP_REDUCE_MEAN] = k_reduce, [PLANNER_OP_CONCAT] = executor_kernel_concat_split,       \
    [PLANNER_OP_SPLIT] = executor_kernel_concat_split,                                             \
    [PLANNER_OP_SLICE] = executor_kernel_concat_split, [PLANNER_OP_ROTARY_EMBEDDING] = k_rotary,   \
    [PLANNER_OP_SDPA] = k_sdpa, [PLANNER_OP_CROSS_ENTROPY] = k_cross_entropy,                      \
    [PLANNER_OP_CONV2D] = k_conv2d,                                                                \
    EXECUTOR_MOE_KERNEL_ENTRIES

G_END_DECLS
