/* executor-op-util.h: what every backend's kernels read off an ExecutorOpCall the same way
 * (local sizes, the global reduction size of a mean, factor offsets, einsum equations), so
 * the cpu and cuda kernels are driven by one reading of the rule tables. */
#pragma once

#include "executor-backend.h"

G_BEGIN_DECLS

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

G_END_DECLS
