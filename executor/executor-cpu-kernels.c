#define G_LOG_DOMAIN "executor-cpu-kernels"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-cpu-private.h"
#include "executor-error.h"
#include "executor-op-util.h"

/* The reference kernel of every op type, in f32. A kernel sees local shards only: shapes
 * come from the strategy's layouts, global positions from the factor offsets, so the same
 * code runs the unsharded reference (one device, offsets 0) and every shard of a plan. */

typedef const ExecutorOpCall Call;

/* Mutation testing (issue 13). Compiled with SHARDSCOPE_KERNEL_MUTATIONS, which only the
 * test-only tests/golden-run-mutant defines, the kernel of the op type named by
 * $SHARDSCOPE_KERNEL_MUTATION (planner_op_type_to_string's names) is broken on purpose, one
 * plausible bug per op type (tests/README.md lists them), so tests/test-mutations.py can
 * prove the golden test catches each. Every other build compiles MUTATED() to FALSE. */
#ifdef SHARDSCOPE_KERNEL_MUTATIONS
static int
mutated_type (void)
{
  static gsize once = 0;
  static int type = -1;
  if (g_once_init_enter (&once))
    {
      const char *name = g_getenv ("SHARDSCOPE_KERNEL_MUTATION");
      PlannerOpType t;
      if (name && *name && planner_op_type_from_string (name, &t))
        type = (int)t;
      else if (name && *name)
        g_error ("SHARDSCOPE_KERNEL_MUTATION=%s names no op type", name);
      g_once_init_leave (&once, 1);
    }
  return type;
}
#define MUTATED(c) (mutated_type () == (int)(c)->op->type)
#else
#define MUTATED(c) FALSE
#endif

/* dst dim i = src dim perm[i]; elements of @es bytes. */
static void
permute_copy (const guint8 *src, const gint64 *src_shape, guint rank, const guint *perm, gsize es,
              guint8 *dst)
{
  ExecutorWalk w;
  gboolean plain = executor_permute_walk (src_shape, rank, perm, &w);
  gint64 idx[PLANNER_MAX_RANK] = { 0 }, total = executor_walk_numel (&w);
  if (plain)
    {
      memcpy (dst, src, (gsize)total * es);
      return;
    }
  gint64 off = 0;
  for (gint64 i = 0; i < total; i++)
    {
      /* Typed moves for the two storage sizes: a memcpy call per element is slow. */
      if (es == 4)
        ((guint32 *)dst)[i] = ((const guint32 *)src)[off];
      else if (es == 8)
        ((guint64 *)dst)[i] = ((const guint64 *)src)[off];
      else
        memcpy (dst + (gsize)i * es, src + (gsize)off * es, es);
      for (int d = (int)rank - 1; d >= 0; d--)
        {
          off += w.stride[d];
          if (++idx[d] < w.shape[d])
            break;
          off -= w.stride[d] * w.shape[d];
          idx[d] = 0;
        }
    }
}

static void
add_bias_rows (float *out, gint64 rows, const float *bias, gint64 n)
{
  for (gint64 r = 0; r < rows; r++)
    for (gint64 j = 0; j < n; j++)
      out[r * n + j] += bias[j];
}

/* ---- contractions ---- */

static gboolean
k_matmul (ExecutorDevice *dev, Call *c, GError **error)
{
  gint64 m, n, k;
  if (!executor_matmul_dims (c, &m, &n, &k, error))
    return FALSE;
  executor_cpu_gemm (c->op->attrs.transpose_b, m, n, k, executor_in_f32 (c, 0),
                     executor_in_f32 (c, 1), executor_out_f32 (c, 0));
  if (c->n_inputs == 3 && c->add_bias && !MUTATED (c))
    add_bias_rows (executor_out_f32 (c, 0), m, executor_in_f32 (c, 2), n);
  return TRUE;
}

static gboolean
k_batch_matmul (ExecutorDevice *dev, Call *c, GError **error)
{
  ExecutorBatchGemm bg;
  if (!executor_batch_matmul_plan (c, &bg, error))
    return FALSE;
  const float *pa = executor_in_f32 (c, 0), *pb = executor_in_f32 (c, 1);
  float *po = executor_out_f32 (c, 0);
  for (gint64 o = 0; o < bg.n_outer; o++)
    {
      gint64 ia, ib;
      executor_batch_gemm_offsets (&bg, o, &ia, &ib);
      if (MUTATED (c))
        ia = bg.stride_a = 0;
      for (gint64 j = 0; j < bg.n_inner; j++)
        executor_cpu_gemm (FALSE, bg.m, bg.n, bg.k, pa + ia + j * bg.stride_a,
                           pb + ib + j * bg.stride_b, po + (o * bg.n_inner + j) * bg.m * bg.n);
    }
  return TRUE;
}

/* Any einsum, one output element at a time: the fallback for shapes the GEMM path does not
 * cover (one operand, three or more, letters summed inside one operand). */
static void
einsum_naive (Call *c, const ExecutorEquation *eq, float *out)
{
  ExecutorEinsumIndex ix;
  executor_einsum_index (c, eq, &ix);
  gint64 idx[128] = { 0 }, n_outer = 1, n_inner = 1;
  for (guint l = 0; l < ix.n_free; l++)
    n_outer *= ix.size[l];
  for (guint l = ix.n_free; l < ix.n_letters; l++)
    n_inner *= ix.size[l];
  for (gint64 o = 0; o < n_outer; o++)
    {
      double acc = 0;
      for (gint64 r = 0; r < n_inner; r++)
        {
          double prod = 1;
          for (guint i = 0; i < eq->n_ops; i++)
            {
              gint64 off = 0;
              for (guint l = 0; l < ix.n_letters; l++)
                off += idx[l] * ix.stride[i][l];
              prod *= executor_in_f32 (c, i)[off];
            }
          acc += prod;
          for (int l = (int)ix.n_letters - 1; l >= (int)ix.n_free; l--)
            {
              if (++idx[l] < ix.size[l])
                break;
              idx[l] = 0;
            }
        }
      gint64 off = 0;
      for (guint l = 0; l < ix.n_free; l++)
        off += idx[l] * ix.out_stride[l];
      out[off] = (float)(MUTATED (c) ? 0.5 * acc : acc);
      for (int l = (int)ix.n_free - 1; l >= 0; l--)
        {
          if (++idx[l] < ix.size[l])
            break;
          idx[l] = 0;
        }
    }
}

/* Two operands as batched GEMMs (executor_einsum_gemm_plan): copies are skipped when an
 * operand is already in [batch, m, k] / [batch, k, n] order, as in GPT-2's fused c_attn. */
static void
einsum_gemm (Call *c, const ExecutorEinsumGemm *plan, float *out)
{
  gint64 nb = plan->batch, m = plan->m, n = plan->n, k = plan->k;
  const float *pa = executor_in_f32 (c, 0), *pb = executor_in_f32 (c, 1);
  g_autofree float *ta = NULL, *tb = NULL, *to = NULL;
  if (plan->permute_a)
    {
      ta = g_new (float, MAX (nb * m * k, 1));
      permute_copy ((const guint8 *)pa, c->inputs[0].shape, plan->rank_a, plan->perm_a, 4,
                    (guint8 *)ta);
      pa = ta;
    }
  if (plan->permute_b)
    {
      tb = g_new (float, MAX (nb * k * n, 1));
      permute_copy ((const guint8 *)pb, c->inputs[1].shape, plan->rank_b, plan->perm_b, 4,
                    (guint8 *)tb);
      pb = tb;
    }
  float *po = out;
  if (plan->permute_out)
    po = to = g_new (float, MAX (nb * m * n, 1));
  for (gint64 i = 0; i < nb; i++)
    executor_cpu_gemm (FALSE, m, n, k, pa + i * m * k, pb + i * k * n, po + i * m * n);
  if (to && MUTATED (c))
    memcpy (out, to, (gsize)(nb * m * n) * sizeof (float));
  else if (to)
    permute_copy ((const guint8 *)to, plan->shape_bmn, plan->rank_out, plan->perm_out, 4,
                  (guint8 *)out);
}

static gboolean
k_einsum (ExecutorDevice *dev, Call *c, GError **error)
{
  ExecutorEquation eq;
  ExecutorEinsumGemm plan;
  if (!executor_equation_parse (c, &eq, error))
    return FALSE;
  float *out = executor_out_f32 (c, 0);
  if (executor_einsum_gemm_plan (&eq, &plan))
    einsum_gemm (c, &plan, out);
  else
    einsum_naive (c, &eq, out);
  if (c->n_inputs == eq.n_ops + 1 && c->add_bias)
    {
      gint64 nb = executor_numel (&c->inputs[eq.n_ops]);
      add_bias_rows (out, executor_numel (&c->outputs[0]) / MAX (nb, 1),
                     executor_in_f32 (c, eq.n_ops), nb);
    }
  return TRUE;
}

static gboolean
k_conv2d (ExecutorDevice *dev, Call *c, GError **error)
{
  ExecutorConv2d conv;
  if (!executor_conv2d_dims (c, &conv, error))
    return FALSE;
  const float *bias
      = c->n_inputs == 3 && c->add_bias && !MUTATED (c) ? executor_in_f32 (c, 2) : NULL;
  float *po = executor_out_f32 (c, 0);
  gint64 total = executor_numel (&c->outputs[0]);
  for (gint64 e = 0; e < total; e++)
    po[e]
        = executor_math_conv2d_at (executor_in_f32 (c, 0), executor_in_f32 (c, 1), bias, &conv, e);
  return TRUE;
}

/* ---- elementwise ---- */

static gboolean
k_binary (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *o = &c->outputs[0];
  ExecutorWalk wa, wb;
  if (!executor_broadcast_walk (&c->inputs[0], o, &wa)
      || !executor_broadcast_walk (&c->inputs[1], o, &wb))
    return executor_kernel_error (error, c, "local shapes do not broadcast");
  const float *a = executor_in_f32 (c, 0), *b = executor_in_f32 (c, 1);
  float *out = executor_out_f32 (c, 0);
  ExecutorBinary op = executor_binary_of (c->op);
  gint64 idx[PLANNER_MAX_RANK] = { 0 }, total = executor_numel (o), ia = 0, ib = 0;
  for (gint64 i = 0; i < total; i++)
    {
      out[i] = executor_math_binary (op, a[ia], b[ib]);
      if (MUTATED (c)) /* the neighbouring op: Add as Sub, Sub as Add, Mul as Add, Div as Mul */
        out[i] = executor_math_binary (op == EXECUTOR_BINARY_ADD   ? EXECUTOR_BINARY_SUB
                                       : op == EXECUTOR_BINARY_DIV ? EXECUTOR_BINARY_MUL
                                                                   : EXECUTOR_BINARY_ADD,
                                       a[ia], b[ib]);
      for (int d = (int)o->rank - 1; d >= 0; d--)
        {
          ia += wa.stride[d];
          ib += wb.stride[d];
          if (++idx[d] < o->shape[d])
            break;
          ia -= wa.stride[d] * o->shape[d];
          ib -= wb.stride[d] * o->shape[d];
          idx[d] = 0;
        }
    }
  return TRUE;
}

static gboolean
k_unary (ExecutorDevice *dev, Call *c, GError **error)
{
  gint64 n = executor_numel (&c->outputs[0]);
  const ExecutorTensorArg *in = &c->inputs[0], *o = &c->outputs[0];
  if (executor_numel (in) != n)
    return executor_kernel_error (error, c, "local input and output sizes differ");

  /* Cast moves between the two storage types; every float dtype is stored as f32. */
  if (in->dtype == PLANNER_DTYPE_I64 || o->dtype == PLANNER_DTYPE_I64)
    {
      if (in->dtype == o->dtype)
        memcpy (o->buffer->data, in->buffer->data, (gsize)n * 8);
      else if (in->dtype == PLANNER_DTYPE_I64)
        for (gint64 i = 0; i < n; i++)
          executor_out_f32 (c, 0)[i] = (float)executor_cpu_i64 (in->buffer)[i];
      else
        for (gint64 i = 0; i < n; i++)
          executor_cpu_i64 (o->buffer)[i] = MUTATED (c)
                                                ? (gint64)lroundf (executor_in_f32 (c, 0)[i])
                                                : (gint64)executor_in_f32 (c, 0)[i];
      return TRUE;
    }

  const float *x = executor_in_f32 (c, 0);
  float *y = executor_out_f32 (c, 0);
  ExecutorUnary op = executor_unary_of (c->op);
  if (op == EXECUTOR_UNARY_COPY)
    memcpy (y, x, (gsize)n * sizeof (float));
  else
    for (gint64 i = 0; i < n; i++)
      y[i] = executor_math_unary (op, x[i]);
  if (MUTATED (c))
    for (gint64 i = 0; i < n; i++)
      switch (c->op->type)
        {
        case PLANNER_OP_RELU: /* leaky */
          y[i] = x[i] > 0 ? x[i] : 0.1f * x[i];
          break;
        case PLANNER_OP_GELU: /* the review's: scaled by 0.3 */
          y[i] *= 0.3f;
          break;
        case PLANNER_OP_SILU: /* the review's: returns its input */
        case PLANNER_OP_TANH:
        case PLANNER_OP_NEG:
          y[i] = x[i];
          break;
        case PLANNER_OP_EXP:
          y[i] = expm1f (x[i]);
          break;
        case PLANNER_OP_DROPOUT: /* dropping in a forward (eval) trial */
          y[i] = i % 2 ? 0 : x[i];
          break;
        default: /* Cast between float dtypes has no plausible bug of its own */
          break;
        }
  return TRUE;
}

static gboolean
k_softmax (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, t->rank);
  gint64 outer, inner, n = t->shape[axis];
  executor_axis_blocks (t, axis, &outer, &inner);
  for (gint64 o = 0; o < outer; o++)
    for (gint64 i = 0; i < inner; i++)
      executor_math_softmax (executor_in_f32 (c, 0) + o * n * inner + i,
                             executor_out_f32 (c, 0) + o * n * inner + i, n, inner);
  if (MUTATED (c)) /* the review's: not normalised, exp (x - max) */
    for (gint64 o = 0; o < outer; o++)
      for (gint64 i = 0; i < inner; i++)
        {
          const float *px = executor_in_f32 (c, 0) + o * n * inner + i;
          float *py = executor_out_f32 (c, 0) + o * n * inner + i, mx = -INFINITY;
          for (gint64 j = 0; j < n; j++)
            mx = MAX (mx, px[j * inner]);
          for (gint64 j = 0; j < n; j++)
            py[j * inner] = expf (px[j * inner] - mx);
        }
  return TRUE;
}

static gboolean
k_norm (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  gint64 h = t->shape[t->rank - 1], rows = executor_numel (t) / MAX (h, 1);
  const float *gamma = c->n_inputs > 1 ? executor_in_f32 (c, 1) : NULL;
  const float *beta = c->n_inputs > 2 ? executor_in_f32 (c, 2) : NULL;
  for (gint64 r = 0; r < rows; r++)
    executor_math_norm_row (executor_in_f32 (c, 0) + r * h, executor_out_f32 (c, 0) + r * h, h,
                            gamma, beta, c->op->attrs.eps,
                            (c->op->type == PLANNER_OP_LAYER_NORM) != MUTATED (c));
  return TRUE;
}

/* ---- lookups, views, data movement ---- */

static gboolean
k_embedding (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *ids = &c->inputs[0], *table = &c->inputs[1];
  gint64 n = executor_numel (ids), v_local = table->shape[0], h = table->shape[1];
  /* A vocab-parallel shard answers the ids in its range and zeros elsewhere: the outputs
   * are partial sums over the vocab axes. */
  gint64 first = executor_factor_offset (c, "vocab");
  const gint64 *pid = executor_cpu_i64 (ids->buffer);
  const float *pt = executor_in_f32 (c, 1);
  float *out = executor_out_f32 (c, 0);
  if (ids->dtype != PLANNER_DTYPE_I64)
    return executor_kernel_error (error, c, "ids must be i64");
  for (gint64 i = 0; i < n; i++)
    {
      gint64 row = pid[i] - first + (MUTATED (c) ? 1 : 0);
      if (row >= 0 && row < v_local)
        memcpy (out + i * h, pt + row * h, (gsize)h * sizeof (float));
      else
        memset (out + i * h, 0, (gsize)h * sizeof (float));
    }
  return TRUE;
}

static gboolean
k_transpose (ExecutorDevice *dev, Call *c, GError **error)
{
  guint perm[PLANNER_MAX_RANK];
  for (guint d = 0; d < c->inputs[0].rank; d++)
    perm[d] = MUTATED (c) ? d : (guint)c->op->attrs.ints[d];
  permute_copy (c->inputs[0].buffer->data, c->inputs[0].shape, c->inputs[0].rank, perm,
                executor_storage_size (c->inputs[0].dtype), c->outputs[0].buffer->data);
  return TRUE;
}

static gboolean
k_reduce (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  guint32 reduced = executor_reduced_dims (c);
  /* Output stride of each input dim: 0 on reduced dims. */
  gint64 ost[PLANNER_MAX_RANK], acc = 1, idx[PLANNER_MAX_RANK] = { 0 }, total = executor_numel (t);
  for (int d = (int)t->rank - 1; d >= 0; d--)
    {
      ost[d] = (reduced >> d) & 1 ? 0 : acc;
      if (!((reduced >> d) & 1))
        acc *= t->shape[d];
    }
  gint64 n_out = executor_numel (&c->outputs[0]);
  g_autofree double *sum = g_new0 (double, MAX (n_out, 1));
  const float *x = executor_in_f32 (c, 0);
  gint64 o = 0;
  for (gint64 i = 0; i < total; i++)
    {
      sum[o] += x[i];
      for (int d = (int)t->rank - 1; d >= 0; d--)
        {
          o += ost[d];
          if (++idx[d] < t->shape[d])
            break;
          o -= ost[d] * t->shape[d];
          idx[d] = 0;
        }
    }
  double scale = (c->op->type == PLANNER_OP_REDUCE_MEAN) != MUTATED (c)
                     ? 1.0 / executor_reduction_count (c)
                     : 1.0;
  for (gint64 i = 0; i < n_out; i++)
    executor_out_f32 (c, 0)[i] = (float)(sum[i] * scale);
  return TRUE;
}

/* ---- attention ---- */

static gboolean
k_rotary (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *s = c->inputs[0].shape;
  gint64 first = executor_dim_offset (c, 0, 2);
  /* The position is the global sequence index. */
  if (MUTATED (c)) /* GPT-J's interleaved pairs (2i, 2i + 1) instead of HF's halves */
    {
      for (gint64 r = 0; r < s[0] * s[1] * s[2]; r++)
        for (gint64 i = 0; i < s[3] / 2; i++)
          {
            const float *px = executor_in_f32 (c, 0) + r * s[3];
            float *py = executor_out_f32 (c, 0) + r * s[3];
            double angle = (double)(first + r % s[2])
                           * pow (c->op->attrs.theta, -2.0 * (double)i / (double)s[3]);
            py[2 * i] = (float)(px[2 * i] * cos (angle) - px[2 * i + 1] * sin (angle));
            py[2 * i + 1] = (float)(px[2 * i + 1] * cos (angle) + px[2 * i] * sin (angle));
          }
      return TRUE;
    }
  for (gint64 b = 0; b < s[0] * s[1]; b++)
    for (gint64 p = 0; p < s[2]; p++)
      for (gint64 i = 0; i < s[3] / 2; i++)
        executor_math_rotary_pair (executor_in_f32 (c, 0) + (b * s[2] + p) * s[3],
                                   executor_out_f32 (c, 0) + (b * s[2] + p) * s[3], i, s[3],
                                   (double)(first + p)
                                       * executor_rotary_position_scale (&c->op->attrs, i, s[3]),
                                   c->op->attrs.theta);
  return TRUE;
}

static gboolean
k_sdpa (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *q = c->inputs[0].shape, *k = c->inputs[1].shape;
  ExecutorSdpa s;
  if (!executor_sdpa_dims (c, &s, error))
    return FALSE;
  g_autofree float *scores = g_new (float, MAX (s.sq * s.sk, 1));
  const float *pq = executor_in_f32 (c, 0), *pk = executor_in_f32 (c, 1),
              *pv = executor_in_f32 (c, 2);
  float *po = executor_out_f32 (c, 0);

  for (gint64 b = 0; b < q[0]; b++)
    for (gint64 h = 0; h < q[1]; h++)
      {
        gint64 kvh = h / s.group;
        const float *qh = pq + (b * q[1] + h) * s.sq * s.d;
        const float *kh = pk + (b * k[1] + kvh) * s.sk * s.d;
        const float *vh = pv + (b * k[1] + kvh) * s.sk * s.dv;
        executor_cpu_gemm (TRUE, s.sq, s.sk, s.d, qh, kh, scores);
        const float *bias = executor_sdpa_bias (c, b, h);
        /* The bias adds to the scaled scores; attention_row scales what it is given. */
        for (gint64 e = 0; bias && e < s.sq * s.sk; e++)
          scores[e] += (float)(bias[e] / s.scale);
        for (gint64 i = 0; s.alibi && i < s.sq; i++)
          executor_sdpa_alibi_row (&s, h, scores + i * s.sk);
        for (gint64 i = 0; i < s.sq; i++)
          executor_math_attention_row (scores + i * s.sk, s.sk, (float)s.scale, c->op->attrs.causal,
                                       s.q_first + i + (MUTATED (c) ? 1 : 0));
        executor_cpu_gemm (FALSE, s.sq, s.dv, s.sk, scores, vh, po + (b * q[1] + h) * s.sq * s.dv);
      }
  return TRUE;
}

static gboolean
k_cross_entropy (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *logits = &c->inputs[0], *labels = &c->inputs[1];
  gint64 v = logits->shape[logits->rank - 1], rows = executor_numel (labels);
  const gint64 *y = executor_cpu_i64 (labels->buffer);
  if (labels->dtype != PLANNER_DTYPE_I64)
    return executor_kernel_error (error, c, "labels must be i64");
  double total = 0;
  for (gint64 r = 0; r < rows; r++)
    {
      if (y[r] < 0 || y[r] >= v)
        {
          g_autofree char *msg = g_strdup_printf (
              "label %" G_GINT64_FORMAT " is outside the %" G_GINT64_FORMAT " classes", y[r], v);
          return executor_kernel_error (error, c, msg);
        }
      total += executor_math_cross_entropy_row (executor_in_f32 (c, 0) + r * v, v, y[r]);
    }
  /* A mean over the global rows: a shard of the rows gives its share of the mean. */
  executor_out_f32 (c, 0)[0] = (float)(MUTATED (c) ? total : total / executor_reduction_count (c));
  return TRUE;
}

#ifdef SHARDSCOPE_KERNEL_MUTATIONS
/* Reshape, Concat, Split and Slice are shared kernels on copy_2d (executor-op-util.c); the
 * mutant build wraps them here: every output's last dim comes out reversed. */
static gboolean
k_move_mutant (ExecutorDevice *dev, Call *c, GError **error)
{
  gboolean ok = c->op->type == PLANNER_OP_RESHAPE ? executor_kernel_reshape (dev, c, error)
                                                  : executor_kernel_concat_split (dev, c, error);
  if (ok && MUTATED (c))
    for (guint k = 0; k < c->n_outputs; k++)
      {
        const ExecutorTensorArg *o = &c->outputs[k];
        gint64 w = o->rank ? o->shape[o->rank - 1] : 1, rows = executor_numel (o) / MAX (w, 1);
        float *y = executor_out_f32 (c, k);
        for (gint64 r = 0; r < rows; r++)
          for (gint64 j = 0; j < w / 2; j++)
            {
              float t = y[r * w + j];
              y[r * w + j] = y[r * w + w - 1 - j];
              y[r * w + w - 1 - j] = t;
            }
      }
  return ok;
}
#define executor_kernel_reshape k_move_mutant
#define executor_kernel_concat_split k_move_mutant
#endif

/* Mixture of experts: executor-cpu-moe.c. */
#define k_sigmoid executor_cpu_sigmoid
#define k_moe_router executor_cpu_moe_router
#define k_moe_dispatch executor_cpu_moe_dispatch
#define k_moe_combine executor_cpu_moe_combine

/* ---- model zoo (issue 16) ---- */

/* Output slice j of the repeated dim is input slice j / r; the input is whole along it, the
 * output may be a shard starting at the "rep" factor's offset. */
static gboolean
k_repeat_interleave (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *in = &c->inputs[0], *o = &c->outputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, in->rank);
  gint64 r = c->op->attrs.ints[0], first = executor_factor_offset (c, "rep");
  gint64 outer, inner, n_in = in->shape[axis], n_out = o->shape[axis];
  executor_axis_blocks (in, axis, &outer, &inner);
  const float *x = executor_in_f32 (c, 0);
  float *y = executor_out_f32 (c, 0);
  for (gint64 b = 0; b < outer; b++)
    for (gint64 j = 0; j < n_out; j++)
      {
        gint64 src = (first + j) / r;
        if (src >= n_in)
          return executor_kernel_error (error, c, "output slice beyond the repeated input");
        memcpy (y + (b * n_out + j) * inner, x + (b * n_in + src) * inner,
                (gsize)inner * sizeof (float));
      }
  return TRUE;
}

static gboolean
k_scale (ExecutorDevice *dev, Call *c, GError **error)
{
  gint64 n = executor_numel (&c->outputs[0]);
  const float *x = executor_in_f32 (c, 0);
  float *y = executor_out_f32 (c, 0);
  for (gint64 i = 0; i < n; i++)
    y[i] = (float)(x[i] * c->op->attrs.scale);
  return TRUE;
}

/* transformers' T5Attention._relative_position_bucket, with its float32 logarithms. */
static gboolean
k_relative_position_bucket (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *a = c->op->attrs.ints;
  gint64 s = c->outputs[0].shape[0], sk = c->outputs[0].shape[1];
  gint64 buckets = a[0], max_distance = a[1];
  gboolean bidirectional = a[2] != 0;
  gint64 *out = executor_cpu_i64 (c->outputs[0].buffer);
  if (bidirectional)
    buckets /= 2;
  gint64 exact = buckets / 2;
  float denominator = (float)log ((double)max_distance / (double)exact);
  for (gint64 i = 0; i < s; i++)
    for (gint64 j = 0; j < sk; j++)
      {
        gint64 rel = j - i, bucket = 0;
        if (bidirectional)
          {
            bucket = rel > 0 ? buckets : 0;
            rel = rel < 0 ? -rel : rel;
          }
        else
          rel = rel < 0 ? -rel : 0;
        if (rel < exact)
          bucket += rel;
        else
          {
            gint64 large = exact
                           + (gint64)(logf ((float)rel / (float)exact) / denominator
                                      * (float)(buckets - exact));
            bucket += MIN (large, buckets - 1);
          }
        out[i * sk + j] = bucket;
      }
  return TRUE;
}

const ExecutorKernelFunc executor_cpu_kernels[PLANNER_N_OP_TYPES] = {
  EXECUTOR_KERNEL_ENTRIES
  [PLANNER_OP_REPEAT_INTERLEAVE] = k_repeat_interleave,
  [PLANNER_OP_SCALE] = k_scale,
  [PLANNER_OP_RELATIVE_POSITION_BUCKET] = k_relative_position_bucket,
};
