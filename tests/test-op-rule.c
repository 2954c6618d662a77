#define G_LOG_DOMAIN "test-op-rule"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-op-rule.h"
#include "test-util.h"

/* Op rules as factor tables (semantics.md 4), checked op type by op type against counts
 * derived by hand.
 *
 * How the counts are derived. A strategy maps each mesh axis to "none" or to one splittable
 * factor (pass-through or reduction, size > 1, major-most in every compound dim); it is legal
 * when every factor's size is divisible by the product of its axes' sizes. Every axis of the
 * two test meshes has size 2, so a factor of size s can take at most c = v2(s) axes (the
 * number of times 2 divides s): 8 -> 3, 4 -> 2, 6 -> 1, 3 -> 0. Let m1, m2, m3 be the
 * numbers of splittable factors with c >= 1, c >= 2, c >= 3. Counting maps of labelled axes:
 *
 *   2 axes (a=2,b=2):     1 + 2 m1 + m1 (m1-1) + m2                 = m1^2 + m1 + 1 + m2
 *   3 axes (a=2,b=2,c=2): 1                       nothing split
 *                         + 3 m1                  one axis split
 *                         + 3 (m1 (m1-1) + m2)    two axes: different factors, or one factor
 *                         + m1 (m1-1) (m1-2)      three axes on three factors
 *                         + 3 m2 (m1-1)           two on one factor, one on another
 *                         + m3                    three on one factor
 *
 * When every splittable factor takes every axis this is (s+1)^axes, s splittable factors.
 * Each case below says its factors, their c, and the arithmetic. Factors of size 1 do not
 * exist (a dim of size 1 maps to no factor), need-replication factors never count. */

#define MAX_IO 4

typedef struct
{
  const char *label;
  PlannerOpType type;
  /* attrs: axis is used only with has_axis, the rest when non-zero */
  gboolean has_axis;
  int axis;
  guint n_ints;
  gint64 ints[4];
  gint64 heads;
  gboolean transpose_b;
  gboolean keepdims;
  gint64 start, end;
  const char *equation;
  guint n_inputs;
  guint ranks[MAX_IO];
  gint64 shapes[MAX_IO][6];
  guint n_outputs;
  const char *output_shapes; /* "[4,32]", ';' between outputs */
  guint count_2x2;           /* on a=2,b=2 */
  guint count_2x2x2;         /* on a=2,b=2,c=2 */
  /* One strategy, found by its factor view, and what it implies. */
  const char *pick_mesh;
  const char *pick;
  const char *in_layouts, *out_layouts; /* bracket notation, ';' between operands */
  const char *in_local, *out_local;     /* local shapes, ';' between operands */
} OpCase;

/* One case per block, grouped by meaning rather than by column. */
/* clang-format off */
static const OpCase cases[] = {
  /* x[8,16] @ W[16,32]: factors b=8 (c 3), k=16 (c 4, reduction), n=32 (c 5). All take every
   * axis: s = 3, (3+1)^2 = 16, (3+1)^3 = 64. */
  { "MatMul", PLANNER_OP_MATMUL, .n_inputs = 2, .ranks = { 2, 2 },
    .shapes = { { 8, 16 }, { 16, 32 } }, .n_outputs = 1, .output_shapes = "[8,32]",
    .count_2x2 = 16, .count_2x2x2 = 64, .pick_mesh = "a=2,b=2", .pick = "b=a k=b",
    .in_layouts = "[a,b];[b,_]", .out_layouts = "[a,_] partial(b)",
    .in_local = "[4,8];[8,32]", .out_local = "[4,32]" },
  /* x[2,8,64] @ W[96,64]^T + bias[96], heads=3: factors d0=2 (c 1), d1=8 (c 3), k=64 (c 6),
   * heads=3 (c 0), head_dim=32 (minor in the compound output dim: not splittable).
   * m1 = 3 (d0,d1,k), m2 = 2 (d1,k), m3 = 2 (d1,k).
   * 2 axes: 9 + 3 + 1 + 2 = 15. 3 axes: 1 + 9 + 3(6+2) + 6 + 3*2*2 + 2 = 54. */
  { "MatMul-heads-bias", PLANNER_OP_MATMUL, .heads = 3, .transpose_b = TRUE, .n_inputs = 3,
    .ranks = { 3, 2, 1 }, .shapes = { { 2, 8, 64 }, { 96, 64 }, { 96 } }, .n_outputs = 1,
    .output_shapes = "[2,8,96]", .count_2x2 = 15, .count_2x2x2 = 54, .pick_mesh = "a=2,b=2,c=2",
    .pick = "d0=a d1=b k=c", .in_layouts = "[a,b,c];[_,c];[_]",
    .out_layouts = "[a,b,_] partial(c)", .in_local = "[1,4,32];[96,32];[96]",
    .out_local = "[1,4,96]" },
  /* a[4,6,8] @ b[4,8,10]: d0=4 (c 2), m=6 (c 1), k=8 (c 3), n=10 (c 1). m1 = 4, m2 = 2,
   * m3 = 1. 2 axes: 16 + 4 + 1 + 2 = 23. 3 axes: 1 + 12 + 3(12+2) + 24 + 3*2*3 + 1 = 98. */
  { "BatchMatMul", PLANNER_OP_BATCH_MATMUL, .n_inputs = 2, .ranks = { 3, 3 },
    .shapes = { { 4, 6, 8 }, { 4, 8, 10 } }, .n_outputs = 1, .output_shapes = "[4,6,10]",
    .count_2x2 = 23, .count_2x2x2 = 98, .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a+b m=c",
    .in_layouts = "[a+b,c,_];[a+b,_,_]", .out_layouts = "[a+b,c,_]",
    .in_local = "[1,3,8];[1,8,10]", .out_local = "[1,3,10]" },
  /* a[2,4,6,8] @ b[8,10], b broadcast over the batch dims: d0=2 (c 1), d1=4 (c 2), m=6 (c 1),
   * k=8 (c 3), n=10 (c 1). m1 = 5, m2 = 2, m3 = 1. 2 axes: 25 + 5 + 1 + 2 = 33.
   * 3 axes: 1 + 15 + 3(20+2) + 60 + 3*2*4 + 1 = 167. */
  { "BatchMatMul-broadcast", PLANNER_OP_BATCH_MATMUL, .n_inputs = 2, .ranks = { 4, 2 },
    .shapes = { { 2, 4, 6, 8 }, { 8, 10 } }, .n_outputs = 1, .output_shapes = "[2,4,6,10]",
    .count_2x2 = 33, .count_2x2x2 = 167, .pick_mesh = "a=2,b=2", .pick = "d1=a n=b",
    .in_layouts = "[_,a,_,_];[_,b]", .out_layouts = "[_,a,_,b]",
    .in_local = "[2,2,6,8];[8,5]", .out_local = "[2,2,6,5]" },
  /* GPT-2's fused c_attn, "bsh,hqnd->bsqnd", x[2,4,8], w[8,3,2,4]: one factor per letter,
   * h is a reduction (not in the output). b=2 (c 1), d=4 (c 2), h=8 (c 3), n=2 (c 1),
   * q=3 (c 0), s=4 (c 2). m1 = 5, m2 = 3, m3 = 1. 2 axes: 25 + 5 + 1 + 3 = 34.
   * 3 axes: 1 + 15 + 3(20+3) + 60 + 3*3*4 + 1 = 182. */
  { "Einsum", PLANNER_OP_EINSUM, .equation = "bsh,hqnd->bsqnd", .n_inputs = 2,
    .ranks = { 3, 4 }, .shapes = { { 2, 4, 8 }, { 8, 3, 2, 4 } }, .n_outputs = 1,
    .output_shapes = "[2,4,3,2,4]", .count_2x2 = 34, .count_2x2x2 = 182, .pick_mesh = "a=2,b=2",
    .pick = "h=a n=b", .in_layouts = "[_,_,a];[a,_,b,_]", .out_layouts = "[_,_,_,b,_] partial(a)",
    .in_local = "[2,4,4];[4,3,1,4]", .out_local = "[2,4,3,1,4]" },
  /* x[4,6] + y[6] (broadcast): d0=4 (c 2), d1=6 (c 1). m1 = 2, m2 = 1, m3 = 0.
   * 2 axes: 4 + 2 + 1 + 1 = 8. 3 axes: 1 + 6 + 3(2+1) + 0 + 3*1*1 + 0 = 19. */
  { "Add", PLANNER_OP_ADD, .n_inputs = 2, .ranks = { 2, 1 }, .shapes = { { 4, 6 }, { 6 } },
    .n_outputs = 1, .output_shapes = "[4,6]", .count_2x2 = 8, .count_2x2x2 = 19,
    .pick_mesh = "a=2,b=2", .pick = "d0=a d1=b", .in_layouts = "[a,b];[b]",
    .out_layouts = "[a,b]", .in_local = "[2,3];[3]", .out_local = "[2,3]" },
  /* x[4,6] - y[4,6]: same factors as Add: 8 and 19. */
  { "Sub", PLANNER_OP_SUB, .n_inputs = 2, .ranks = { 2, 2 }, .shapes = { { 4, 6 }, { 4, 6 } },
    .n_outputs = 1, .output_shapes = "[4,6]", .count_2x2 = 8, .count_2x2x2 = 19,
    .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a+b d1=c", .in_layouts = "[a+b,c];[a+b,c]",
    .out_layouts = "[a+b,c]", .in_local = "[1,3];[1,3]", .out_local = "[1,3]" },
  /* x[4,1,6] * y[5,6] -> [4,5,6]: d0=4 (c 2), d1=5 (c 0), d2=6 (c 1). m1 = 2, m2 = 1, m3 = 0:
   * 8 and 19. */
  { "Mul", PLANNER_OP_MUL, .n_inputs = 2, .ranks = { 3, 2 }, .shapes = { { 4, 1, 6 }, { 5, 6 } },
    .n_outputs = 1, .output_shapes = "[4,5,6]", .count_2x2 = 8, .count_2x2x2 = 19,
    .pick_mesh = "a=2,b=2", .pick = "d0=a d2=b", .in_layouts = "[a,_,b];[_,b]",
    .out_layouts = "[a,_,b]", .in_local = "[2,1,3];[5,3]", .out_local = "[2,5,3]" },
  /* x[8,6] / y[8,1]: d0=8 (c 3), d1=6 (c 1). m1 = 2, m2 = 1, m3 = 1.
   * 2 axes: 4 + 2 + 1 + 1 = 8. 3 axes: 1 + 6 + 3(2+1) + 0 + 3*1*1 + 1 = 20. */
  { "Div", PLANNER_OP_DIV, .n_inputs = 2, .ranks = { 2, 2 }, .shapes = { { 8, 6 }, { 8, 1 } },
    .n_outputs = 1, .output_shapes = "[8,6]", .count_2x2 = 8, .count_2x2x2 = 20,
    .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a+b d1=c", .in_layouts = "[a+b,c];[a+b,_]",
    .out_layouts = "[a+b,c]", .in_local = "[2,3];[2,1]", .out_local = "[2,3]" },
  /* Unary elementwise on x[4,6,8]: d0=4 (c 2), d1=6 (c 1), d2=8 (c 3). m1 = 3, m2 = 2,
   * m3 = 1. 2 axes: 9 + 3 + 1 + 2 = 15. 3 axes: 1 + 9 + 3(6+2) + 6 + 3*2*2 + 1 = 53. */
#define UNARY(name, t)                                                                         \
  { name, t, .n_inputs = 1, .ranks = { 3 }, .shapes = { { 4, 6, 8 } }, .n_outputs = 1,         \
    .output_shapes = "[4,6,8]", .count_2x2 = 15, .count_2x2x2 = 53, .pick_mesh = "a=2,b=2",    \
    .pick = "d0=a d2=b", .in_layouts = "[a,_,b]", .out_layouts = "[a,_,b]",                    \
    .in_local = "[2,6,4]", .out_local = "[2,6,4]" }
  UNARY ("ReLU", PLANNER_OP_RELU),
  UNARY ("GeLU", PLANNER_OP_GELU),
  UNARY ("SiLU", PLANNER_OP_SILU),
  UNARY ("Tanh", PLANNER_OP_TANH),
  UNARY ("Neg", PLANNER_OP_NEG),
  UNARY ("Cast", PLANNER_OP_CAST),
  UNARY ("Dropout", PLANNER_OP_DROPOUT),
#undef UNARY
  /* Exp on x[2,3,8]: d0=2 (c 1), d1=3 (c 0), d2=8 (c 3). m1 = 2, m2 = 1, m3 = 1: 8 and 20. */
  { "Exp", PLANNER_OP_EXP, .n_inputs = 1, .ranks = { 3 }, .shapes = { { 2, 3, 8 } },
    .n_outputs = 1, .output_shapes = "[2,3,8]", .count_2x2 = 8, .count_2x2x2 = 20,
    .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a d2=b+c", .in_layouts = "[a,_,b+c]",
    .out_layouts = "[a,_,b+c]", .in_local = "[1,3,2]", .out_local = "[1,3,2]" },
  /* Softmax(axis -1) on x[4,6,8]: d0=4 (c 2), d1=6 (c 1), the axis 8 need-replication.
   * m1 = 2, m2 = 1, m3 = 0: 8 and 19. */
  { "Softmax", PLANNER_OP_SOFTMAX, .has_axis = TRUE, .axis = -1, .n_inputs = 1, .ranks = { 3 },
    .shapes = { { 4, 6, 8 } }, .n_outputs = 1, .output_shapes = "[4,6,8]", .count_2x2 = 8,
    .count_2x2x2 = 19, .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a+b d1=c",
    .in_layouts = "[a+b,c,_]", .out_layouts = "[a+b,c,_]", .in_local = "[1,3,8]",
    .out_local = "[1,3,8]" },
  /* LayerNorm x[4,6,8], gamma[8], beta[8]: the normalized dim need-replication, so as
   * Softmax: 8 and 19. */
  { "LayerNorm", PLANNER_OP_LAYER_NORM, .n_inputs = 3, .ranks = { 3, 1, 1 },
    .shapes = { { 4, 6, 8 }, { 8 }, { 8 } }, .n_outputs = 1, .output_shapes = "[4,6,8]",
    .count_2x2 = 8, .count_2x2x2 = 19, .pick_mesh = "a=2,b=2", .pick = "d0=a d1=b",
    .in_layouts = "[a,b,_];[_];[_]", .out_layouts = "[a,b,_]", .in_local = "[2,3,8];[8];[8]",
    .out_local = "[2,3,8]" },
  /* RMSNorm x[8,16], gamma[16]: d0=8 (c 3) alone. s = 1: 2^2 = 4, 2^3 = 8. */
  { "RMSNorm", PLANNER_OP_RMS_NORM, .n_inputs = 2, .ranks = { 2, 1 },
    .shapes = { { 8, 16 }, { 16 } }, .n_outputs = 1, .output_shapes = "[8,16]", .count_2x2 = 4,
    .count_2x2x2 = 8, .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a+b+c",
    .in_layouts = "[a+b+c,_];[_]", .out_layouts = "[a+b+c,_]", .in_local = "[1,16];[16]",
    .out_local = "[1,16]" },
  /* Embedding ids[4,6], table[10,8]: d0=4 (c 2), d1=6 (c 1), vocab=10 (c 1, reduction),
   * h=8 (c 3). m1 = 4, m2 = 2, m3 = 1: as BatchMatMul, 23 and 98. */
  { "Embedding", PLANNER_OP_EMBEDDING, .n_inputs = 2, .ranks = { 2, 2 },
    .shapes = { { 4, 6 }, { 10, 8 } }, .n_outputs = 1, .output_shapes = "[4,6,8]",
    .count_2x2 = 23, .count_2x2x2 = 98, .pick_mesh = "a=2,b=2", .pick = "vocab=a h=b",
    .in_layouts = "[_,_];[a,b]", .out_layouts = "[_,_,b] partial(a)",
    .in_local = "[4,6];[5,4]", .out_local = "[4,6,4]" },
  /* Reshape x[4,6,8] -> [4,48]: factors 4 (c 2), 6 (c 1), 8; the output dim 48 is the compound
   * (6, 8), so 8 is minor there and not splittable. m1 = 2, m2 = 1, m3 = 0: 8 and 19. */
  { "Reshape", PLANNER_OP_RESHAPE, .n_ints = 2, .ints = { 4, 48 }, .n_inputs = 1,
    .ranks = { 3 }, .shapes = { { 4, 6, 8 } }, .n_outputs = 1, .output_shapes = "[4,48]",
    .count_2x2 = 8, .count_2x2x2 = 19, .pick_mesh = "a=2,b=2", .pick = "d0=a d1=b",
    .in_layouts = "[a,b,_]", .out_layouts = "[a,b]", .in_local = "[2,3,8]",
    .out_local = "[2,24]" },
  /* Reshape x[6,4] -> [4,6] (-1 inferred): the boundaries 4, 6, 24 are no divisor chain, so
   * no contiguous refinement exists and everything is need-replication: 1 and 1. */
  { "Reshape-nochain", PLANNER_OP_RESHAPE, .n_ints = 2, .ints = { 4, -1 }, .n_inputs = 1,
    .ranks = { 2 }, .shapes = { { 6, 4 } }, .n_outputs = 1, .output_shapes = "[4,6]",
    .count_2x2 = 1, .count_2x2x2 = 1, .pick_mesh = "a=2,b=2", .pick = "replicated",
    .in_layouts = "[_,_]", .out_layouts = "[_,_]", .in_local = "[6,4]", .out_local = "[4,6]" },
  /* Transpose x[4,6,8] perm (2,0,1): factors as the unary case: 15 and 53. */
  { "Transpose", PLANNER_OP_TRANSPOSE, .n_ints = 3, .ints = { 2, 0, 1 }, .n_inputs = 1,
    .ranks = { 3 }, .shapes = { { 4, 6, 8 } }, .n_outputs = 1, .output_shapes = "[8,4,6]",
    .count_2x2 = 15, .count_2x2x2 = 53, .pick_mesh = "a=2,b=2", .pick = "d0=a d2=b",
    .in_layouts = "[a,_,b]", .out_layouts = "[b,a,_]", .in_local = "[2,6,4]",
    .out_local = "[4,2,6]" },
  /* ReduceSum axes (1) of x[4,6,8]: d0=4 pass, d1=6 reduction, d2=8 pass, all splittable:
   * 15 and 53. */
  { "ReduceSum", PLANNER_OP_REDUCE_SUM, .n_ints = 1, .ints = { 1 }, .n_inputs = 1,
    .ranks = { 3 }, .shapes = { { 4, 6, 8 } }, .n_outputs = 1, .output_shapes = "[4,8]",
    .count_2x2 = 15, .count_2x2x2 = 53, .pick_mesh = "a=2,b=2", .pick = "d1=a d2=b",
    .in_layouts = "[_,a,b]", .out_layouts = "[_,b] partial(a)", .in_local = "[4,3,4]",
    .out_local = "[4,4]" },
  /* ReduceMean axes (-1), keepdims, of x[4,6,8]: 15 and 53. */
  { "ReduceMean", PLANNER_OP_REDUCE_MEAN, .n_ints = 1, .ints = { -1 }, .keepdims = TRUE,
    .n_inputs = 1, .ranks = { 3 }, .shapes = { { 4, 6, 8 } }, .n_outputs = 1,
    .output_shapes = "[4,6,1]", .count_2x2 = 15, .count_2x2x2 = 53, .pick_mesh = "a=2,b=2,c=2",
    .pick = "d0=a d2=b+c", .in_layouts = "[a,_,b+c]", .out_layouts = "[a,_,_] partial(b,c)",
    .in_local = "[2,6,2]", .out_local = "[2,6,1]" },
  /* Concat(axis 1) of a[4,6], b[4,2]: only d0=4 (c 2) splits, the axis is need-replication.
   * 2 axes: 2^2 = 4. 3 axes: 2^3 minus "all three on d0" = 7. */
  { "Concat", PLANNER_OP_CONCAT, .has_axis = TRUE, .axis = 1, .n_inputs = 2, .ranks = { 2, 2 },
    .shapes = { { 4, 6 }, { 4, 2 } }, .n_outputs = 1, .output_shapes = "[4,8]", .count_2x2 = 4,
    .count_2x2x2 = 7, .pick_mesh = "a=2,b=2", .pick = "d0=a+b", .in_layouts = "[a+b,_];[a+b,_]",
    .out_layouts = "[a+b,_]", .in_local = "[1,6];[1,2]", .out_local = "[1,8]" },
  /* Split(axis 0, sizes 2 and 6) of x[8,6]: only d1=6 (c 1) splits. 2 axes: 4 - 1 = 3.
   * 3 axes: 1 + 3 = 4 (at most one axis on d1). */
  { "Split", PLANNER_OP_SPLIT, .has_axis = TRUE, .axis = 0, .n_ints = 2, .ints = { 2, 6 },
    .n_inputs = 1, .ranks = { 2 }, .shapes = { { 8, 6 } }, .n_outputs = 2,
    .output_shapes = "[2,6];[6,6]", .count_2x2 = 3, .count_2x2x2 = 4, .pick_mesh = "a=2,b=2",
    .pick = "d1=a", .in_layouts = "[_,a]", .out_layouts = "[_,a];[_,a]", .in_local = "[8,3]",
    .out_local = "[2,3];[6,3]" },
  /* Slice(axis 1, [2, 6)) of x[4,8]: only d0=4 (c 2): as Concat, 4 and 7. */
  { "Slice", PLANNER_OP_SLICE, .has_axis = TRUE, .axis = 1, .start = 2, .end = 6,
    .n_inputs = 1, .ranks = { 2 }, .shapes = { { 4, 8 } }, .n_outputs = 1,
    .output_shapes = "[4,4]", .count_2x2 = 4, .count_2x2x2 = 7, .pick_mesh = "a=2,b=2,c=2",
    .pick = "d0=a+b", .in_layouts = "[a+b,_]", .out_layouts = "[a+b,_]", .in_local = "[1,8]",
    .out_local = "[1,4]" },
  /* RotaryEmbedding x[2,4,8,16]: d0=2 (c 1), d1=4 (c 2), d2=8 (c 3); the rotated head dim is
   * need-replication. m1 = 3, m2 = 2, m3 = 1: 15 and 53. */
  { "RotaryEmbedding", PLANNER_OP_ROTARY_EMBEDDING, .n_inputs = 1, .ranks = { 4 },
    .shapes = { { 2, 4, 8, 16 } }, .n_outputs = 1, .output_shapes = "[2,4,8,16]",
    .count_2x2 = 15, .count_2x2x2 = 53, .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a d1=b d2=c",
    .in_layouts = "[a,b,c,_]", .out_layouts = "[a,b,c,_]", .in_local = "[1,2,4,16]",
    .out_local = "[1,2,4,16]" },
  /* SDPA q[2,8,16,8], k[2,2,16,8], v[2,2,16,8] (grouped-query, 2 kv heads, groups of 4):
   * b=2 (c 1), kv_heads=2 (c 1), group=4 (minor in q's head dim: not splittable),
   * sq=16 (c 4), sk and d need-replication, dv=8 (c 3). m1 = 4, m2 = 2, m3 = 2.
   * 2 axes: 16 + 4 + 1 + 2 = 23. 3 axes: 1 + 12 + 3(12+2) + 24 + 3*2*3 + 2 = 99. */
  { "ScaledDotProductAttention", PLANNER_OP_SDPA, .n_inputs = 3, .ranks = { 4, 4, 4 },
    .shapes = { { 2, 8, 16, 8 }, { 2, 2, 16, 8 }, { 2, 2, 16, 8 } }, .n_outputs = 1,
    .output_shapes = "[2,8,16,8]", .count_2x2 = 23, .count_2x2x2 = 99,
    .pick_mesh = "a=2,b=2,c=2", .pick = "b=a kv_heads=b sq=c",
    .in_layouts = "[a,b,c,_];[a,b,_,_];[a,b,_,_]", .out_layouts = "[a,b,c,_]",
    .in_local = "[1,4,8,8];[1,1,16,8];[1,1,16,8]", .out_local = "[1,4,8,8]" },
  /* CrossEntropyLoss logits[4,6,10], labels[4,6]: d0=4 (c 2) and d1=6 (c 1) are reductions
   * (the loss is a mean), classes need-replication. m1 = 2, m2 = 1, m3 = 0: 8 and 19. */
  { "CrossEntropyLoss", PLANNER_OP_CROSS_ENTROPY, .n_inputs = 2, .ranks = { 3, 2 },
    .shapes = { { 4, 6, 10 }, { 4, 6 } }, .n_outputs = 1, .output_shapes = "[]",
    .count_2x2 = 8, .count_2x2x2 = 19, .pick_mesh = "a=2,b=2", .pick = "d0=a d1=b",
    .in_layouts = "[a,b,_];[a,b]", .out_layouts = "[] partial(a,b)", .in_local = "[2,3,10];[2,3]",
    .out_local = "[]" },
  /* RepeatInterleave x[2,4,6], dim 1 twice (issue 16): d0=2 (c 1), src=4 need-replication in
   * the input only, rep=8 (c 3) in the output only, d2=6 (c 1). 2 axes: 16 - 2 (both on d0,
   * both on d2) = 14; 3 axes: 64 - 10 - 10 = 44. The output splits where the input cannot. */
  { "RepeatInterleave", PLANNER_OP_REPEAT_INTERLEAVE, .has_axis = TRUE, .axis = 1, .n_ints = 1,
    .ints = { 2 }, .n_inputs = 1, .ranks = { 3 }, .shapes = { { 2, 4, 6 } }, .n_outputs = 1,
    .output_shapes = "[2,8,6]", .count_2x2 = 14, .count_2x2x2 = 44, .pick_mesh = "a=2,b=2",
    .pick = "d0=a rep=b", .in_layouts = "[a,_,_]", .out_layouts = "[a,b,_]",
    .in_local = "[1,4,6]", .out_local = "[1,4,6]" },
  /* Scale x[4,6]: d0=4 (c 2), d1=6 (c 1). 2 axes: 9 - 1 = 8; 3 axes: 27 - 7 - 1 = 19. */
  { "Scale", PLANNER_OP_SCALE, .n_inputs = 1, .ranks = { 2 }, .shapes = { { 4, 6 } },
    .n_outputs = 1, .output_shapes = "[4,6]", .count_2x2 = 8, .count_2x2x2 = 19,
    .pick_mesh = "a=2,b=2", .pick = "d0=a d1=b", .in_layouts = "[a,b]", .out_layouts = "[a,b]",
    .in_local = "[2,3]", .out_local = "[2,3]" },
  /* RelativePositionBucket ids[2,4] -> [4,4] i64: every factor need-replication, so only
   * the replicated strategy: 1 and 1. */
  { "RelativePositionBucket", PLANNER_OP_RELATIVE_POSITION_BUCKET, .n_ints = 3,
    .ints = { 32, 128, 1 }, .n_inputs = 1, .ranks = { 2 }, .shapes = { { 2, 4 } },
    .n_outputs = 1, .output_shapes = "[4,4]", .count_2x2 = 1, .count_2x2x2 = 1,
    .pick_mesh = "a=2,b=2", .pick = "replicated", .in_layouts = "[_,_]", .out_layouts = "[_,_]",
    .in_local = "[2,4]", .out_local = "[4,4]" },
  /* Conv2D x[4,6,8,8], w[10,6,3,3], bias[10]: n=4 (c 2), o=10 (c 1), c=6 (c 1, reduction),
   * spatial dims need-replication. m1 = 3, m2 = 1, m3 = 0.
   * 2 axes: 9 + 3 + 1 + 1 = 14. 3 axes: 1 + 9 + 3(6+1) + 6 + 3*1*2 + 0 = 43. */
  { "Conv2D", PLANNER_OP_CONV2D, .n_inputs = 3, .ranks = { 4, 4, 1 },
    .shapes = { { 4, 6, 8, 8 }, { 10, 6, 3, 3 }, { 10 } }, .n_outputs = 1,
    .output_shapes = "[4,10,6,6]", .count_2x2 = 14, .count_2x2x2 = 43, .pick_mesh = "a=2,b=2",
    .pick = "n=a c=b", .in_layouts = "[a,b,_,_];[_,b,_,_];[_]",
    .out_layouts = "[a,_,_,_] partial(b)", .in_local = "[2,3,8,8];[10,3,3,3];[10]",
    .out_local = "[2,10,6,6]" },
  /* Mixture of experts. Sigmoid on x[2,3,8]: as Exp, 8 and 20. */
  { "Sigmoid", PLANNER_OP_SIGMOID, .n_inputs = 1, .ranks = { 3 }, .shapes = { { 2, 3, 8 } },
    .n_outputs = 1, .output_shapes = "[2,3,8]", .count_2x2 = 8, .count_2x2x2 = 20,
    .pick_mesh = "a=2,b=2,c=2", .pick = "d0=a d2=b+c", .in_layouts = "[a,_,b+c]",
    .out_layouts = "[a,_,b+c]", .in_local = "[1,3,2]", .out_local = "[1,3,2]" },
  /* MoERouter (top 2) on logits[4,6,8]: b=4 (c 2), s=6 (c 1), the experts need-replication
   * (softmax and top-k over all of them). As Softmax: 8 and 19. */
  { "MoERouter", PLANNER_OP_MOE_ROUTER, .n_ints = 1, .ints = { 2 }, .n_inputs = 1,
    .ranks = { 3 }, .shapes = { { 4, 6, 8 } }, .n_outputs = 1, .output_shapes = "[4,6,8]",
    .count_2x2 = 8, .count_2x2x2 = 19, .pick_mesh = "a=2,b=2,c=2", .pick = "b=a+b s=c",
    .in_layouts = "[a+b,c,_]", .out_layouts = "[a+b,c,_]", .in_local = "[1,3,8]",
    .out_local = "[1,3,8]" },
  /* MoEDispatch x[4,6,8], gates[4,6,4], capacity 3 -> [4,4,3,8]: b=4 (c 2), e=4 (c 2),
   * h=8 (c 3); the sequence and the slots need-replication. m1 = 3, m2 = 3, m3 = 1.
   * 2 axes: 9 + 3 + 1 + 3 = 16. 3 axes: 1 + 9 + 3 (6 + 3) + 6 + 3*3*2 + 1 = 62. */
  { "MoEDispatch", PLANNER_OP_MOE_DISPATCH, .n_ints = 1, .ints = { 3 }, .n_inputs = 2,
    .ranks = { 3, 3 }, .shapes = { { 4, 6, 8 }, { 4, 6, 4 } }, .n_outputs = 1,
    .output_shapes = "[4,4,3,8]", .count_2x2 = 16, .count_2x2x2 = 62,
    .pick_mesh = "a=2,b=2,c=2", .pick = "b=a e=b h=c", .in_layouts = "[a,_,c];[a,_,b]",
    .out_layouts = "[a,b,_,c]", .in_local = "[2,6,4];[2,6,2]", .out_local = "[2,2,3,4]" },
  /* MoECombine y[4,4,3,8], gates[4,6,4] -> [4,6,8]: the same factors, the experts now a
   * reduction (summed over): 16 and 62, and a split of them leaves partial sums. */
  { "MoECombine", PLANNER_OP_MOE_COMBINE, .n_inputs = 2, .ranks = { 4, 3 },
    .shapes = { { 4, 4, 3, 8 }, { 4, 6, 4 } }, .n_outputs = 1, .output_shapes = "[4,6,8]",
    .count_2x2 = 16, .count_2x2x2 = 62, .pick_mesh = "a=2,b=2,c=2", .pick = "b=a e=b h=c",
    .in_layouts = "[a,b,_,c];[a,_,b]", .out_layouts = "[a,_,c] partial(b)",
    .in_local = "[2,2,3,4];[2,6,2]", .out_local = "[2,6,4]" },
};
/* clang-format on */

static void
case_attrs (const OpCase *c, PlannerOpAttrs *attrs)
{
  planner_op_attrs_init (attrs);
  if (c->has_axis)
    attrs->axis = c->axis;
  attrs->n_ints = c->n_ints;
  memcpy (attrs->ints, c->ints, sizeof c->ints);
  attrs->heads = c->heads;
  attrs->transpose_b = c->transpose_b;
  attrs->keepdims = c->keepdims;
  attrs->start = c->start;
  attrs->end = c->end;
  if (c->type == PLANNER_OP_CAST)
    attrs->dtype = PLANNER_DTYPE_BF16;
  if (c->equation)
    g_strlcpy (attrs->equation, c->equation, sizeof attrs->equation);
}

static void
build_case (const OpCase *c, PlannerOpRule *rule)
{
  PlannerOpAttrs attrs;
  const gint64 *shapes[MAX_IO];
  g_autoptr (GError) error = NULL;

  case_attrs (c, &attrs);
  for (guint i = 0; i < c->n_inputs; i++)
    shapes[i] = c->shapes[i];
  g_assert_true (planner_op_rule_build (rule, c->type, &attrs, c->n_inputs, c->ranks, shapes,
                                        c->n_outputs, c->label, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (rule->type, ==, c->type);
  g_assert_cmpuint (rule->n_inputs, ==, c->n_inputs);
  g_assert_cmpuint (rule->n_outputs, ==, c->n_outputs);
}

static char *
format_shape (const gint64 *shape, guint rank)
{
  GString *s = g_string_new ("[");
  for (guint d = 0; d < rank; d++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? "," : "", shape[d]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* Joins per-operand texts with ';' as the case table writes them. */
static void
append_item (GString *s, const char *item)
{
  if (s->len)
    g_string_append_c (s, ';');
  g_string_append (s, item);
}

static void
check_strategies (const OpCase *c, const PlannerOpRule *rule, const PlannerMesh *m, guint expected)
{
  g_autoptr (GArray) all = planner_op_rule_enumerate (rule, m);
  g_autofree char *mt = planner_mesh_to_string (m);

  if (all->len != expected)
    {
      for (guint s = 0; s < all->len; s++)
        {
          g_autofree char *d
              = planner_strategy_describe (&g_array_index (all, PlannerStrategy, s), rule, m);
          g_test_message ("%s on %s: #%u %s", c->label, mt, s, d);
        }
      g_test_message ("%s on %s: %u strategies, hand count %u", c->label, mt, all->len, expected);
    }
  g_assert_cmpuint (all->len, ==, expected);

  /* Replicated first, then every one distinct, legal, and its layouts valid for the shapes. */
  g_autofree char *first
      = planner_strategy_describe (&g_array_index (all, PlannerStrategy, 0), rule, m);
  g_assert_cmpstr (first, ==, "replicated");
  for (guint s = 0; s < all->len; s++)
    {
      const PlannerStrategy *st = &g_array_index (all, PlannerStrategy, s);
      PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
      g_autoptr (GError) error = NULL;

      for (guint t = 0; t < s; t++)
        g_assert_false (planner_strategy_equal (st, &g_array_index (all, PlannerStrategy, t)));
      g_assert_true (planner_strategy_validate (st, rule, m, c->label, NULL, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (st->partial, ==, 0);

      planner_strategy_layouts (st, rule, m, in, out);
      for (guint i = 0; i < c->n_inputs; i++)
        {
          g_assert_true (
              planner_layout_validate (&in[i], m, c->shapes[i], c->ranks[i], c->label, &error));
          g_assert_no_error (error);
        }
      for (guint o = 0; o < rule->n_outputs; o++)
        {
          gint64 shape[PLANNER_MAX_RANK];
          guint rank = planner_op_rule_output_shape (rule, o, shape);
          g_assert_true (planner_layout_validate (&out[o], m, shape, rank, c->label, &error));
          g_assert_no_error (error);
        }

      /* Pinning the strategy's own input layouts gives the strategy back. */
      PlannerStrategy back;
      g_assert_true (
          planner_strategy_from_layouts (rule, m, in, c->n_inputs, c->label, NULL, &back, &error));
      g_assert_no_error (error);
      /* A factor in no input (RepeatInterleave's rep, issue 16) is no input layout's to
       * imply: the strategy comes back without it. */
      PlannerStrategy expected = *st;
      for (guint f = 0; f < rule->n_factors; f++)
        {
          gboolean in_input = FALSE;
          for (guint i = 0; i < rule->n_inputs; i++)
            for (guint d = 0; d < rule->inputs[i].rank; d++)
              for (guint k = 0; k < rule->inputs[i].n[d]; k++)
                in_input |= rule->inputs[i].f[d][k] == f;
          if (!in_input)
            expected.n_axes[f] = 0;
        }
      g_assert_true (planner_strategy_equal (&expected, &back));

      /* Every factor is a product in the work, so local work is the whole over the parts. */
      g_assert_cmpfloat_with_epsilon (planner_strategy_local_flops (st, rule, m),
                                      rule->flops / (double)planner_strategy_parts (st, m),
                                      1e-9 * (rule->flops + 1));
    }
}

static void
test_op_case (gconstpointer data)
{
  const OpCase *c = data;
  PlannerOpRule rule;

  build_case (c, &rule);

  /* Shape inference. */
  g_autoptr (GString) shapes = g_string_new (NULL);
  for (guint o = 0; o < rule.n_outputs; o++)
    {
      gint64 shape[PLANNER_MAX_RANK];
      guint rank = planner_op_rule_output_shape (&rule, o, shape);
      g_autofree char *s = format_shape (shape, rank);
      append_item (shapes, s);
    }
  g_assert_cmpstr (shapes->str, ==, c->output_shapes);
  g_assert_cmpfloat (rule.flops, >=, 0);

  g_autoptr (PlannerMesh) m2 = test_util_mesh ("a=2,b=2");
  g_autoptr (PlannerMesh) m3 = test_util_mesh ("a=2,b=2,c=2");
  check_strategies (c, &rule, m2, c->count_2x2);
  check_strategies (c, &rule, m3, c->count_2x2x2);

  /* The picked strategy: layouts in bracket notation and local shapes. */
  g_autoptr (PlannerMesh) pm = test_util_mesh (c->pick_mesh);
  g_autoptr (GArray) all = planner_op_rule_enumerate (&rule, pm);
  const PlannerStrategy *pick = NULL;
  for (guint s = 0; s < all->len && !pick; s++)
    {
      g_autofree char *d
          = planner_strategy_describe (&g_array_index (all, PlannerStrategy, s), &rule, pm);
      if (strcmp (d, c->pick) == 0)
        pick = &g_array_index (all, PlannerStrategy, s);
    }
  if (pick == NULL)
    g_error ("%s: no strategy '%s' on %s", c->label, c->pick, c->pick_mesh);

  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  planner_strategy_layouts (pick, &rule, pm, in, out);
  g_autoptr (GString) in_layouts = g_string_new (NULL), out_layouts = g_string_new (NULL);
  g_autoptr (GString) in_local = g_string_new (NULL), out_local = g_string_new (NULL);
  for (guint i = 0; i < rule.n_inputs; i++)
    {
      gint64 local[PLANNER_MAX_RANK];
      g_autofree char *l = planner_layout_to_string (&in[i], pm);
      append_item (in_layouts, l);
      planner_layout_local_shape (&in[i], pm, c->shapes[i], local);
      g_autofree char *s = format_shape (local, c->ranks[i]);
      append_item (in_local, s);
    }
  for (guint o = 0; o < rule.n_outputs; o++)
    {
      gint64 shape[PLANNER_MAX_RANK], local[PLANNER_MAX_RANK];
      guint rank = planner_op_rule_output_shape (&rule, o, shape);
      g_autofree char *l = planner_layout_to_string (&out[o], pm);
      append_item (out_layouts, l);
      planner_layout_local_shape (&out[o], pm, shape, local);
      g_autofree char *s = format_shape (local, rank);
      append_item (out_local, s);
    }
  g_assert_cmpstr (in_layouts->str, ==, c->in_layouts);
  g_assert_cmpstr (out_layouts->str, ==, c->out_layouts);
  g_assert_cmpstr (in_local->str, ==, c->in_local);
  g_assert_cmpstr (out_local->str, ==, c->out_local);

  g_autofree char *pins = planner_strategy_to_string (pick, &rule, pm);
  g_autofree char *expected_pins = g_strdelimit (g_strdup (c->in_layouts), ";", ',');
  g_assert_cmpstr (pins, ==, expected_pins);
}

static void
test_every_type_covered (void)
{
  for (guint t = 0; t < PLANNER_N_OP_TYPES; t++)
    {
      gboolean found = FALSE;
      for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
        found |= cases[i].type == t;
      if (!found)
        g_error ("op type %s has no enumeration case", planner_op_type_to_string (t));
    }
}

static void
test_type_names (void)
{
  for (guint t = 0; t < PLANNER_N_OP_TYPES; t++)
    {
      PlannerOpType back;
      const char *name = planner_op_type_to_string (t);
      g_assert_true (planner_op_type_from_string (name, &back));
      g_assert_cmpuint (back, ==, t);
      guint lo, hi;
      planner_op_type_arity (t, &lo, &hi);
      g_assert_cmpuint (lo, >=, 1);
      g_assert_cmpuint (lo, <=, hi);
    }
  PlannerOpType t;
  g_assert_true (planner_op_type_from_string ("Linear", &t));
  g_assert_cmpuint (t, ==, PLANNER_OP_MATMUL);
  g_assert_false (planner_op_type_from_string ("FlashMoE", &t));

  static const struct
  {
    const char *name;
    PlannerDType dtype;
    guint size;
  } dtypes[] = {
    { "f32", PLANNER_DTYPE_F32, 4 },
    { "bf16", PLANNER_DTYPE_BF16, 2 },
    { "f16", PLANNER_DTYPE_F16, 2 },
    { "i64", PLANNER_DTYPE_I64, 8 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (dtypes); i++)
    {
      PlannerDType d;
      g_assert_cmpstr (planner_dtype_to_string (dtypes[i].dtype), ==, dtypes[i].name);
      g_assert_true (planner_dtype_from_string (dtypes[i].name, &d));
      g_assert_cmpuint (d, ==, dtypes[i].dtype);
      g_assert_cmpuint (planner_dtype_size (d), ==, dtypes[i].size);
    }
  PlannerDType d;
  g_assert_true (planner_dtype_from_string ("bfloat16", &d));
  g_assert_cmpuint (d, ==, PLANNER_DTYPE_BF16);
  g_assert_false (planner_dtype_from_string ("f8", &d));
}

static void
test_flops (void)
{
  PlannerOpRule rule;
  g_autoptr (PlannerMesh) m = test_util_mesh ("a=2,b=2");

  /* MatMul x[8,16] @ W[16,32]: 2 * 8 * 16 * 32. */
  build_case (&cases[0], &rule);
  g_assert_cmpfloat (rule.flops, ==, 8192);
  PlannerStrategy s;
  planner_strategy_init (&s);
  g_assert_cmpfloat (planner_strategy_local_flops (&s, &rule, m), ==, 8192);
  s.n_axes[planner_op_rule_factor_index (&rule, "k")] = 1;
  s.axes[planner_op_rule_factor_index (&rule, "k")][0] = 1;
  g_assert_cmpfloat (planner_strategy_local_flops (&s, &rule, m), ==, 4096);

  /* BatchMatMul a[4,6,8] @ b[4,8,10]: 2 * 4 * 6 * 8 * 10. */
  build_case (&cases[2], &rule);
  g_assert_cmpfloat (rule.flops, ==, 3840);
}

/* ---- bad input ---- */

static gboolean
build (PlannerOpRule *rule, PlannerOpType type, const PlannerOpAttrs *attrs, guint n,
       const guint *ranks, const gint64 *const *shapes, GError **error)
{
  PlannerOpAttrs defaults;
  if (attrs == NULL)
    {
      planner_op_attrs_init (&defaults);
      attrs = &defaults;
    }
  return planner_op_rule_build (rule, type, attrs, n, ranks, shapes, 1, "model.layers.0.op", error);
}

static void
test_shape_mismatch (void)
{
  PlannerOpRule rule;
  g_autoptr (GError) error = NULL;
  const guint ranks[] = { 2, 2, 1 };

  /* MatMul K mismatch: x[4,16] @ W[32,8]. */
  const gint64 x[] = { 4, 16 }, w[] = { 32, 8 };
  const gint64 *mm[] = { x, w };
  g_assert_false (build (&rule, PLANNER_OP_MATMUL, NULL, 2, ranks, mm, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH,
                          "dim 1 of input 0 (size 16) does not match dim 0 of input 1 (size 32)");
  g_assert_nonnull (strstr (error->message, "model.layers.0.op (MatMul)"));
  g_clear_error (&error);

  /* A bias of the wrong size. */
  const gint64 w2[] = { 16, 8 }, bias[] = { 16 };
  const gint64 *mmb[] = { x, w2, bias };
  g_assert_false (build (&rule, PLANNER_OP_MATMUL, NULL, 3, ranks, mmb, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH,
                          "bias (input 2) must have shape [8]");
  g_clear_error (&error);

  /* Wrong number of inputs. */
  g_assert_false (build (&rule, PLANNER_OP_MATMUL, NULL, 1, ranks, mm, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH, "takes 2 to 3 inputs, got 1");
  g_clear_error (&error);

  /* Broadcasting that does not fit. */
  const gint64 a[] = { 4, 6 }, b[] = { 4, 5 };
  const gint64 *ab[] = { a, b };
  g_assert_false (build (&rule, PLANNER_OP_ADD, NULL, 2, ranks, ab, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH, "does not broadcast");
  g_clear_error (&error);

  /* Heads that do not divide the output features. */
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  attrs.heads = 3;
  g_assert_false (
      build (&rule, PLANNER_OP_MATMUL, &attrs, 2, ranks, (const gint64 *[]){ x, w2 }, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH, "not a whole number of 3 heads");
  g_clear_error (&error);

  /* SDPA with 6 query heads over 4 kv heads. */
  const guint r4[] = { 4, 4, 4 };
  const gint64 q[] = { 2, 6, 16, 8 }, k[] = { 2, 4, 16, 8 };
  g_assert_false (
      build (&rule, PLANNER_OP_SDPA, NULL, 3, r4, (const gint64 *[]){ q, k, k }, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH, "not a multiple of 4 kv heads");
  g_clear_error (&error);

  /* Reshape to a different element count. */
  planner_op_attrs_init (&attrs);
  attrs.n_ints = 2;
  attrs.ints[0] = 5;
  attrs.ints[1] = 5;
  g_assert_false (build (&rule, PLANNER_OP_RESHAPE, &attrs, 1, ranks, mm, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH,
                          "64 elements cannot be viewed as 25");
  g_clear_error (&error);

  /* Einsum without an arrow is a parse error. */
  planner_op_attrs_init (&attrs);
  g_strlcpy (attrs.equation, "ij,jk", sizeof attrs.equation);
  g_assert_false (
      build (&rule, PLANNER_OP_EINSUM, &attrs, 2, ranks, (const gint64 *[]){ x, w2 }, &error));
  test_util_assert_error (error, PLANNER_ERROR_PARSE, "has no '->'");
  g_clear_error (&error);

  /* Einsum letters that disagree: j is 16 in x and 32 in w. */
  g_strlcpy (attrs.equation, "ij,jk->ik", sizeof attrs.equation);
  g_assert_false (build (&rule, PLANNER_OP_EINSUM, &attrs, 2, ranks, mm, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH, "letter 'j'");
}

static void
test_bad_dims (void)
{
  PlannerOpRule rule;
  const guint ranks[] = { 2, 2 };
  const gint64 zero[] = { 4, 0 }, neg[] = { -3, 16 }, w[] = { 16, 8 };

  g_autoptr (GError) error = NULL;
  g_assert_false (
      build (&rule, PLANNER_OP_RELU, NULL, 1, ranks, (const gint64 *[]){ zero }, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH,
                          "dim 1 of input 0 is 0; dims must be > 0");
  g_clear_error (&error);
  g_assert_false (
      build (&rule, PLANNER_OP_MATMUL, NULL, 2, ranks, (const gint64 *[]){ neg, w }, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH,
                          "dim 0 of input 0 is -3; dims must be > 0");
  g_clear_error (&error);

  /* Negative and zero targets in a Reshape. */
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  attrs.n_ints = 2;
  attrs.ints[0] = 0;
  attrs.ints[1] = -1;
  g_assert_false (
      build (&rule, PLANNER_OP_RESHAPE, &attrs, 1, ranks, (const gint64 *[]){ w }, &error));
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH, "target dim 0 is 0");
}

/* The section-8 example: 8 heads of 128 cannot be split over mp=16 even though 1024 can. */
static void
test_not_divisible_heads (void)
{
  PlannerOpRule rule;
  PlannerOpAttrs attrs;
  const guint ranks[] = { 3, 2 };
  const gint64 x[] = { 2, 16, 4096 }, w[] = { 1024, 4096 };
  g_autoptr (PlannerMesh) m = test_util_mesh ("mp=16");
  g_autoptr (GError) error = NULL;
  const char *const names[] = { "input", "weight" };

  planner_op_attrs_init (&attrs);
  attrs.heads = 8;
  attrs.transpose_b = TRUE;
  g_assert_true (planner_op_rule_build (&rule, PLANNER_OP_MATMUL, &attrs, 2, ranks,
                                        (const gint64 *[]){ x, w }, 1,
                                        "model.layers.0.self_attn.k_proj", &error));
  g_assert_no_error (error);

  PlannerLayout in[2];
  PlannerStrategy s;
  g_assert_true (planner_layout_parse ("[_,_,_]", m, &in[0], NULL));
  g_assert_true (planner_layout_parse ("[mp,_]", m, &in[1], NULL));
  /* The weight's layout alone is valid: 1024 % 16 == 0. The heads make it illegal. */
  g_assert_true (planner_layout_validate (&in[1], m, w, 2, "weight", NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 2, "model.layers.0.self_attn.k_proj",
                                                 names, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_NOT_DIVISIBLE, "8 heads");
  g_assert_nonnull (strstr (error->message, "model.layers.0.self_attn.k_proj: dim 0 of weight"));
  g_assert_nonnull (strstr (error->message, "size 1024 = 8 heads x 128"));
  g_assert_nonnull (strstr (error->message, "cannot be split over mp=16"));
  g_assert_nonnull (strstr (error->message, "1024 % 16 == 0 but 8 heads % 16 != 0"));
  g_assert_nonnull (strstr (error->message, "use mp <= 8"));
  g_clear_error (&error);

  /* No strategy of the enumeration splits the heads over 16. */
  g_autoptr (GArray) all = planner_op_rule_enumerate (&rule, m);
  int heads = planner_op_rule_factor_index (&rule, "heads");
  g_assert_cmpint (heads, >=, 0);
  for (guint i = 0; i < all->len; i++)
    g_assert_cmpuint (g_array_index (all, PlannerStrategy, i).n_axes[heads], ==, 0);
  /* On one axis of 16: replicated, the 16 rows, or K = 4096; batch 2 and 8 heads do not
   * divide. 3 strategies. */
  g_assert_cmpuint (all->len, ==, 3);

  /* On mp=8 the same pin is legal. */
  g_autoptr (PlannerMesh) m8 = test_util_mesh ("mp=8");
  g_assert_true (planner_layout_parse ("[_,_,_]", m8, &in[0], NULL));
  g_assert_true (planner_layout_parse ("[mp,_]", m8, &in[1], NULL));
  g_assert_true (planner_strategy_from_layouts (&rule, m8, in, 2, "k_proj", names, &s, &error));
  g_assert_no_error (error);
  g_autofree char *d = planner_strategy_describe (&s, &rule, m8);
  g_assert_cmpstr (d, ==, "heads=mp");
}

static void
test_bad_strategies (void)
{
  PlannerOpRule rule;
  g_autoptr (PlannerMesh) m = test_util_mesh ("a=2,b=2");
  g_autoptr (GError) error = NULL;
  PlannerStrategy s;
  const char *const names[] = { "x", "weight" };

  build_case (&cases[0], &rule); /* MatMul x[8,16] @ W[16,32] */
  int fb = planner_op_rule_factor_index (&rule, "b"),
      fk = planner_op_rule_factor_index (&rule, "k");

  /* One axis on two factors. */
  planner_strategy_init (&s);
  s.n_axes[fb] = 1;
  s.axes[fb][0] = 0;
  s.n_axes[fk] = 1;
  s.axes[fk][0] = 0;
  g_assert_false (planner_strategy_validate (&s, &rule, m, "fc1", names, &error));
  test_util_assert_error (error, PLANNER_ERROR_AXIS_REUSED, "fc1: mesh axis a is used twice");
  g_clear_error (&error);

  /* One axis twice on one factor. */
  planner_strategy_init (&s);
  s.n_axes[fb] = 2;
  s.axes[fb][0] = 1;
  s.axes[fb][1] = 1;
  g_assert_false (planner_strategy_validate (&s, &rule, m, "fc1", names, &error));
  test_util_assert_error (error, PLANNER_ERROR_AXIS_REUSED, "mesh axis b is used twice");
  g_clear_error (&error);

  /* An axis the mesh does not have. */
  planner_strategy_init (&s);
  s.n_axes[fk] = 1;
  s.axes[fk][0] = 5;
  g_assert_false (planner_strategy_validate (&s, &rule, m, "fc1", names, &error));
  test_util_assert_error (error, PLANNER_ERROR_UNKNOWN_AXIS, "the mesh has 2 axes");
  g_clear_error (&error);

  /* A factor the op does not have. */
  planner_strategy_init (&s);
  s.n_axes[rule.n_factors] = 1;
  g_assert_false (planner_strategy_validate (&s, &rule, m, "fc1", names, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_STRATEGY, "the op has 3 factors");
  g_clear_error (&error);

  /* Not divisible: K = 16 over an axis of 3. */
  g_autoptr (PlannerMesh) m33 = test_util_mesh ("a=3,b=3");
  planner_strategy_init (&s);
  s.n_axes[fk] = 1;
  s.axes[fk][0] = 0;
  g_assert_false (planner_strategy_validate (&s, &rule, m33, "fc1", names, &error));
  test_util_assert_error (error, PLANNER_ERROR_NOT_DIVISIBLE,
                          "fc1: dim 1 of x (size 16) cannot be split over a=3: 16 k % 3 != 0");
  g_clear_error (&error);
  g_autoptr (GArray) none = planner_op_rule_enumerate (&rule, m33);
  g_assert_cmpuint (none->len, ==, 1);

  /* Two inputs that split one factor differently. */
  PlannerLayout in[2];
  g_assert_true (planner_layout_parse ("[_,a]", m, &in[0], NULL));
  g_assert_true (planner_layout_parse ("[b,_]", m, &in[1], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 2, "fc1", names, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_STRATEGY,
                          "dim 1 of x and dim 0 of weight are the same loop dim (k)");
  g_clear_error (&error);

  /* The same axis on two different factors through two inputs. */
  g_assert_true (planner_layout_parse ("[a,_]", m, &in[0], NULL));
  g_assert_true (planner_layout_parse ("[_,a]", m, &in[1], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 2, "fc1", names, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_AXIS_REUSED, "mesh axis a is used twice");
  g_clear_error (&error);

  /* A layout of the wrong rank. */
  g_assert_true (planner_layout_parse ("[a]", m, &in[0], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 1, "fc1", names, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_LAYOUT,
                          "fc1: x has rank 2 but its layout has 1");
  g_clear_error (&error);

  /* Splitting a need-replication factor: a Conv2D's spatial dim (v1 has no halo exchange). */
  build_case (&cases[G_N_ELEMENTS (cases) - 1], &rule); /* Conv2D */
  g_assert_true (planner_layout_parse ("[_,_,a,_]", m, &in[0], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 1, "conv", NULL, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_STRATEGY, "need-replication");
  g_clear_error (&error);

  /* Splitting the minor factor of a compound dim: Reshape [4,48]'s 8 in the output. */
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    if (strcmp (cases[i].label, "Reshape") == 0)
      build_case (&cases[i], &rule);
  g_assert_true (planner_layout_parse ("[_,_,a]", m, &in[0], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 1, "view", NULL, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_STRATEGY,
                          "major-most factor of a merged dim");
}

static void
test_partial_inputs (void)
{
  PlannerOpRule rule;
  g_autoptr (PlannerMesh) m = test_util_mesh ("a=2,b=2");
  g_autoptr (GError) error = NULL;
  PlannerStrategy s;
  PlannerLayout in[3], out[1];

  /* MatMul accepts a partial x while W is not split on that axis; the output stays partial. */
  build_case (&cases[0], &rule);
  g_assert_true (planner_layout_parse ("[a,_] partial(b)", m, &in[0], NULL));
  g_assert_true (planner_layout_parse ("[_,_]", m, &in[1], NULL));
  g_assert_true (planner_strategy_from_layouts (&rule, m, in, 2, "fc", NULL, &s, &error));
  g_assert_no_error (error);
  planner_strategy_layouts (&s, &rule, m, in, out);
  g_autofree char *o = planner_layout_to_string (&out[0], m);
  g_assert_cmpstr (o, ==, "[a,_] partial(b)");
  g_autofree char *d = planner_strategy_describe (&s, &rule, m);
  g_assert_cmpstr (d, ==, "b=a partial(b)");

  /* Partial in both operands of a MatMul is not linear. */
  g_assert_true (planner_layout_parse ("[_,_] partial(b)", m, &in[1], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 2, "fc", NULL, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_STRATEGY, "only one input may be partial");
  g_clear_error (&error);

  /* ReLU is not linear: a partial input needs a reduction first. */
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    if (cases[i].type == PLANNER_OP_RELU)
      build_case (&cases[i], &rule);
  g_assert_true (planner_layout_parse ("[_,_,_] partial(a)", m, &in[0], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 1, "act", NULL, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_STRATEGY, "not linear in it");
  g_clear_error (&error);

  /* Add takes partial inputs only when all of them are partial alike. */
  build_case (&cases[5], &rule); /* Add x[4,6] + y[6] */
  g_assert_cmpuint (rule.type, ==, PLANNER_OP_ADD);
  g_assert_true (planner_layout_parse ("[_,_] partial(a)", m, &in[0], NULL));
  g_assert_true (planner_layout_parse ("[_]", m, &in[1], NULL));
  g_assert_false (planner_strategy_from_layouts (&rule, m, in, 2, "add", NULL, &s, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_STRATEGY, "partial alike");
  g_clear_error (&error);
  g_assert_true (planner_layout_parse ("[_] partial(a)", m, &in[1], NULL));
  g_assert_true (planner_strategy_from_layouts (&rule, m, in, 2, "add", NULL, &s, &error));
  g_assert_no_error (error);
  planner_strategy_layouts (&s, &rule, m, in, out);
  g_autofree char *o2 = planner_layout_to_string (&out[0], m);
  g_assert_cmpstr (o2, ==, "[_,_] partial(a)");
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    test_util_add_named ("/planner/op-rule/enumerate", cases[i].label, &cases[i], test_op_case);
  g_test_add_func ("/planner/op-rule/every-type-covered", test_every_type_covered);
  g_test_add_func ("/planner/op-rule/type-names", test_type_names);
  g_test_add_func ("/planner/op-rule/flops", test_flops);
  g_test_add_func ("/planner/op-rule/shape-mismatch", test_shape_mismatch);
  g_test_add_func ("/planner/op-rule/bad-dims", test_bad_dims);
  g_test_add_func ("/planner/op-rule/not-divisible-heads", test_not_divisible_heads);
  g_test_add_func ("/planner/op-rule/bad-strategies", test_bad_strategies);
  g_test_add_func ("/planner/op-rule/partial-inputs", test_partial_inputs);

  return g_test_run ();
}
