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

static float *
in_f32 (Call *c, guint i)
{
  return executor_cpu_f32 (c->inputs[i].buffer);
}

static float *
out_f32 (Call *c, guint i)
{
  return executor_cpu_f32 (c->outputs[i].buffer);
}

/* dst dim i = src dim perm[i]; elements of @es bytes. */
static void
permute_copy (const guint8 *src, const gint64 *src_shape, guint rank, const guint *perm, gsize es,
              guint8 *dst)
{
  gint64 src_strides[PLANNER_MAX_RANK], dst_shape[PLANNER_MAX_RANK], stride[PLANNER_MAX_RANK];
  gint64 idx[PLANNER_MAX_RANK] = { 0 }, total = 1;
  gboolean identity = TRUE;

  executor_row_strides (src_shape, rank, src_strides);
  for (guint i = 0; i < rank; i++)
    {
      dst_shape[i] = src_shape[perm[i]];
      stride[i] = src_strides[perm[i]];
      total *= dst_shape[i];
      identity &= perm[i] == i;
    }
  if (identity || rank == 0)
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
          off += stride[d];
          if (++idx[d] < dst_shape[d])
            break;
          off -= stride[d] * dst_shape[d];
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
  const ExecutorTensorArg *x = &c->inputs[0], *w = &c->inputs[1], *o = &c->outputs[0];
  gboolean tb = c->op->attrs.transpose_b;
  gint64 k = x->shape[x->rank - 1], n = w->shape[tb ? 0 : 1], m = executor_numel (x) / MAX (k, 1);
  if (w->shape[tb ? 1 : 0] != k || executor_numel (o) != m * n)
    return executor_kernel_error (error, c,
                                  "local shapes of x, the weight and the output disagree");
  executor_cpu_gemm (tb, m, n, k, in_f32 (c, 0), in_f32 (c, 1), out_f32 (c, 0));
  if (c->n_inputs == 3 && c->add_bias)
    add_bias_rows (out_f32 (c, 0), m, in_f32 (c, 2), n);
  return TRUE;
}

static gboolean
k_batch_matmul (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *a = &c->inputs[0], *b = &c->inputs[1], *o = &c->outputs[0];
  guint ra = a->rank, rb = b->rank, ro = o->rank;
  gint64 m = a->shape[ra - 2], k = a->shape[ra - 1], n = b->shape[rb - 1];
  gint64 batch = 1, sa[PLANNER_MAX_RANK], sb[PLANNER_MAX_RANK], idx[PLANNER_MAX_RANK] = { 0 };

  if (b->shape[rb - 2] != k)
    return executor_kernel_error (error, c, "local contracting dims disagree");
  /* Batch strides in matrices, 0 where an operand broadcasts. */
  gint64 acc_a = 1, acc_b = 1;
  for (int d = (int)ro - 3; d >= 0; d--)
    {
      int da = d - (int)(ro - ra), db = d - (int)(ro - rb);
      gint64 size_a = da >= 0 ? a->shape[da] : 1, size_b = db >= 0 ? b->shape[db] : 1;
      sa[d] = size_a == 1 ? 0 : acc_a;
      sb[d] = size_b == 1 ? 0 : acc_b;
      acc_a *= size_a;
      acc_b *= size_b;
      batch *= o->shape[d];
    }
  const float *pa = in_f32 (c, 0), *pb = in_f32 (c, 1);
  float *po = out_f32 (c, 0);
  gint64 ia = 0, ib = 0;
  for (gint64 i = 0; i < batch; i++)
    {
      executor_cpu_gemm (FALSE, m, n, k, pa + ia * m * k, pb + ib * k * n, po + i * m * n);
      for (int d = (int)ro - 3; d >= 0; d--)
        {
          ia += sa[d];
          ib += sb[d];
          if (++idx[d] < o->shape[d])
            break;
          ia -= sa[d] * o->shape[d];
          ib -= sb[d] * o->shape[d];
          idx[d] = 0;
        }
    }
  return TRUE;
}

/* Any einsum, one output element at a time: the fallback for shapes the GEMM path does not
 * cover (one operand, three or more, letters summed inside one operand). */
static void
einsum_naive (Call *c, const ExecutorEquation *eq, float *out)
{
  char letters[128];
  guint n_letters = 0, n_out = strlen (eq->out);
  int pos[128];
  for (guint i = 0; i < 128; i++)
    pos[i] = -1;
  for (guint d = 0; d < n_out; d++)
    if (pos[(guchar)eq->out[d]] < 0)
      {
        pos[(guchar)eq->out[d]] = (int)n_letters;
        letters[n_letters++] = eq->out[d];
      }
  guint n_free = n_letters;
  for (guint i = 0; i < eq->n_ops; i++)
    for (guint d = 0; eq->ops[i][d]; d++)
      if (pos[(guchar)eq->ops[i][d]] < 0)
        {
          pos[(guchar)eq->ops[i][d]] = (int)n_letters;
          letters[n_letters++] = eq->ops[i][d];
        }
  gint64 strides[PLANNER_MAX_OPERANDS][128];
  for (guint i = 0; i < eq->n_ops; i++)
    {
      gint64 s[PLANNER_MAX_RANK];
      executor_row_strides (c->inputs[i].shape, c->inputs[i].rank, s);
      for (guint l = 0; l < n_letters; l++)
        strides[i][l] = 0;
      for (guint d = 0; eq->ops[i][d]; d++)
        strides[i][pos[(guchar)eq->ops[i][d]]] += s[d];
    }
  gint64 idx[128] = { 0 }, n_outer = 1, n_inner = 1;
  for (guint l = 0; l < n_free; l++)
    n_outer *= eq->size[(guchar)letters[l]];
  for (guint l = n_free; l < n_letters; l++)
    n_inner *= eq->size[(guchar)letters[l]];
  for (gint64 o = 0; o < n_outer; o++)
    {
      double acc = 0;
      for (gint64 r = 0; r < n_inner; r++)
        {
          double prod = 1;
          for (guint i = 0; i < eq->n_ops; i++)
            {
              gint64 off = 0;
              for (guint l = 0; l < n_letters; l++)
                off += idx[l] * strides[i][l];
              prod *= in_f32 (c, i)[off];
            }
          acc += prod;
          for (int l = (int)n_letters - 1; l >= (int)n_free; l--)
            {
              if (++idx[l] < eq->size[(guchar)letters[l]])
                break;
              idx[l] = 0;
            }
        }
      /* The output is in the order of eq->out, whose letters are letters[0..n_free). */
      gint64 off = 0, s = 1;
      for (int d = (int)n_out - 1; d >= 0; d--)
        {
          off += idx[pos[(guchar)eq->out[d]]] * s;
          s *= eq->size[(guchar)eq->out[d]];
        }
      out[off] = (float)acc;
      for (int l = (int)n_free - 1; l >= 0; l--)
        {
          if (++idx[l] < eq->size[(guchar)letters[l]])
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
  const float *pa = in_f32 (c, 0), *pb = in_f32 (c, 1);
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
  if (to)
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
  float *out = out_f32 (c, 0);
  if (executor_einsum_gemm_plan (&eq, &plan))
    einsum_gemm (c, &plan, out);
  else
    einsum_naive (c, &eq, out);
  if (c->n_inputs == eq.n_ops + 1 && c->add_bias)
    {
      gint64 nb = executor_numel (&c->inputs[eq.n_ops]);
      add_bias_rows (out, executor_numel (&c->outputs[0]) / MAX (nb, 1), in_f32 (c, eq.n_ops), nb);
    }
  return TRUE;
}

static gboolean
k_conv2d (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *x = c->inputs[0].shape, *w = c->inputs[1].shape, *o = c->outputs[0].shape;
  const PlannerOpAttrs *at = &c->op->attrs;
  gint64 sh = at->n_ints >= 2 ? at->ints[0] : 1, sw = at->n_ints >= 2 ? at->ints[1] : 1;
  gint64 ph = at->n_ints >= 4 ? at->ints[2] : 0, pw = at->n_ints >= 4 ? at->ints[3] : 0;
  const float *px = in_f32 (c, 0), *pk = in_f32 (c, 1);
  const float *bias = c->n_inputs == 3 && c->add_bias ? in_f32 (c, 2) : NULL;
  float *po = out_f32 (c, 0);

  if (x[1] != w[1])
    return executor_kernel_error (error, c, "local input channels of x and the kernel disagree");
  for (gint64 n = 0; n < o[0]; n++)
    for (gint64 oc = 0; oc < o[1]; oc++)
      for (gint64 i = 0; i < o[2]; i++)
        for (gint64 j = 0; j < o[3]; j++)
          {
            double acc = bias ? bias[oc] : 0;
            for (gint64 ic = 0; ic < x[1]; ic++)
              for (gint64 u = 0; u < w[2]; u++)
                {
                  gint64 yi = i * sh - ph + u;
                  if (yi < 0 || yi >= x[2])
                    continue;
                  for (gint64 v = 0; v < w[3]; v++)
                    {
                      gint64 xj = j * sw - pw + v;
                      if (xj < 0 || xj >= x[3])
                        continue;
                      acc += (double)px[((n * x[1] + ic) * x[2] + yi) * x[3] + xj]
                             * pk[((oc * w[1] + ic) * w[2] + u) * w[3] + v];
                    }
                }
            po[((n * o[1] + oc) * o[2] + i) * o[3] + j] = (float)acc;
          }
  return TRUE;
}

/* ---- elementwise ---- */

static gboolean
k_binary (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *o = &c->outputs[0];
  guint ro = o->rank;
  gint64 st[2][PLANNER_MAX_RANK], idx[PLANNER_MAX_RANK] = { 0 }, total = executor_numel (o);
  for (guint i = 0; i < 2; i++)
    {
      const ExecutorTensorArg *t = &c->inputs[i];
      gint64 acc = 1;
      for (int d = (int)ro - 1; d >= 0; d--)
        {
          int di = d - (int)(ro - t->rank);
          gint64 size = di >= 0 ? t->shape[di] : 1;
          if (size != 1 && size != o->shape[d])
            return executor_kernel_error (error, c, "local shapes do not broadcast");
          st[i][d] = size == 1 ? 0 : acc;
          acc *= size;
        }
    }
  const float *a = in_f32 (c, 0), *b = in_f32 (c, 1);
  float *out = out_f32 (c, 0);
  PlannerOpType type = c->op->type;
  gint64 ia = 0, ib = 0;
  for (gint64 i = 0; i < total; i++)
    {
      float x = a[ia], y = b[ib];
      out[i] = type == PLANNER_OP_ADD   ? x + y
               : type == PLANNER_OP_SUB ? x - y
               : type == PLANNER_OP_MUL ? x * y
                                        : x / y;
      for (int d = (int)ro - 1; d >= 0; d--)
        {
          ia += st[0][d];
          ib += st[1][d];
          if (++idx[d] < o->shape[d])
            break;
          ia -= st[0][d] * o->shape[d];
          ib -= st[1][d] * o->shape[d];
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
          out_f32 (c, 0)[i] = (float)executor_cpu_i64 (in->buffer)[i];
      else
        for (gint64 i = 0; i < n; i++)
          executor_cpu_i64 (o->buffer)[i] = (gint64)in_f32 (c, 0)[i];
      return TRUE;
    }

  const float *x = in_f32 (c, 0);
  float *y = out_f32 (c, 0);
  switch (c->op->type)
    {
    case PLANNER_OP_RELU:
      for (gint64 i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
      break;
    case PLANNER_OP_GELU:
      if (c->op->attrs.variant == 1)
        for (gint64 i = 0; i < n; i++)
          y[i] = 0.5f * x[i]
                 * (1.0f + tanhf (0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
      else
        for (gint64 i = 0; i < n; i++)
          y[i] = 0.5f * x[i] * (1.0f + erff (x[i] * 0.7071067811865476f));
      break;
    case PLANNER_OP_SILU:
      for (gint64 i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + expf (-x[i]));
      break;
    case PLANNER_OP_TANH:
      for (gint64 i = 0; i < n; i++)
        y[i] = tanhf (x[i]);
      break;
    case PLANNER_OP_EXP:
      for (gint64 i = 0; i < n; i++)
        y[i] = expf (x[i]);
      break;
    case PLANNER_OP_NEG:
      for (gint64 i = 0; i < n; i++)
        y[i] = -x[i];
      break;
    default: /* Cast between float dtypes, Dropout (identity in a forward trial) */
      memcpy (y, x, (gsize)n * sizeof (float));
      break;
    }
  return TRUE;
}

static gboolean
k_softmax (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, t->rank);
  gint64 outer = 1, inner = 1, n = t->shape[axis];
  for (int d = 0; d < axis; d++)
    outer *= t->shape[d];
  for (guint d = axis + 1; d < t->rank; d++)
    inner *= t->shape[d];
  const float *x = in_f32 (c, 0);
  float *y = out_f32 (c, 0);
  for (gint64 o = 0; o < outer; o++)
    for (gint64 i = 0; i < inner; i++)
      {
        const float *px = x + o * n * inner + i;
        float *py = y + o * n * inner + i;
        float mx = -INFINITY;
        for (gint64 j = 0; j < n; j++)
          mx = MAX (mx, px[j * inner]);
        double sum = 0;
        for (gint64 j = 0; j < n; j++)
          sum += py[j * inner] = expf (px[j * inner] - mx);
        for (gint64 j = 0; j < n; j++)
          py[j * inner] = (float)(py[j * inner] / sum);
      }
  return TRUE;
}

static gboolean
k_norm (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  gint64 h = t->shape[t->rank - 1], rows = executor_numel (t) / MAX (h, 1);
  gboolean layer = c->op->type == PLANNER_OP_LAYER_NORM;
  const float *x = in_f32 (c, 0);
  const float *gamma = c->n_inputs > 1 ? in_f32 (c, 1) : NULL;
  const float *beta = c->n_inputs > 2 ? in_f32 (c, 2) : NULL;
  float *y = out_f32 (c, 0);
  double eps = c->op->attrs.eps;
  for (gint64 r = 0; r < rows; r++)
    {
      const float *px = x + r * h;
      float *py = y + r * h;
      double mean = 0, sq = 0;
      if (layer)
        {
          for (gint64 j = 0; j < h; j++)
            mean += px[j];
          mean /= (double)h;
        }
      for (gint64 j = 0; j < h; j++)
        sq += (px[j] - mean) * (px[j] - mean);
      double inv = 1.0 / sqrt (sq / (double)h + eps);
      for (gint64 j = 0; j < h; j++)
        {
          double v = (px[j] - mean) * inv;
          if (gamma)
            v *= gamma[j];
          if (beta)
            v += beta[j];
          py[j] = (float)v;
        }
    }
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
  const float *pt = in_f32 (c, 1);
  float *out = out_f32 (c, 0);
  if (ids->dtype != PLANNER_DTYPE_I64)
    return executor_kernel_error (error, c, "ids must be i64");
  for (gint64 i = 0; i < n; i++)
    {
      gint64 row = pid[i] - first;
      if (row >= 0 && row < v_local)
        memcpy (out + i * h, pt + row * h, (gsize)h * sizeof (float));
      else
        memset (out + i * h, 0, (gsize)h * sizeof (float));
    }
  return TRUE;
}

static gboolean
k_reshape (ExecutorDevice *dev, Call *c, GError **error)
{
  /* Only the major-most factor of a merged dim may be split, so a shard keeps its elements
   * in the same order under the new shape. */
  gint64 n = executor_numel (&c->inputs[0]);
  if (n != executor_numel (&c->outputs[0]))
    return executor_kernel_error (error, c, "local input and output sizes differ");
  memcpy (c->outputs[0].buffer->data, c->inputs[0].buffer->data,
          (gsize)n * executor_storage_size (c->inputs[0].dtype));
  return TRUE;
}

static gboolean
k_transpose (ExecutorDevice *dev, Call *c, GError **error)
{
  guint perm[PLANNER_MAX_RANK];
  for (guint d = 0; d < c->inputs[0].rank; d++)
    perm[d] = (guint)c->op->attrs.ints[d];
  permute_copy (c->inputs[0].buffer->data, c->inputs[0].shape, c->inputs[0].rank, perm,
                executor_storage_size (c->inputs[0].dtype), c->outputs[0].buffer->data);
  return TRUE;
}

static gboolean
k_reduce (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  guint32 reduced = 0;
  for (guint i = 0; i < c->op->attrs.n_ints; i++)
    reduced |= 1u << executor_norm_axis ((int)c->op->attrs.ints[i], t->rank);
  if (c->op->attrs.n_ints == 0)
    reduced = (1u << t->rank) - 1;
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
  const float *x = in_f32 (c, 0);
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
  double scale = c->op->type == PLANNER_OP_REDUCE_MEAN ? 1.0 / executor_reduction_count (c) : 1.0;
  for (gint64 i = 0; i < n_out; i++)
    out_f32 (c, 0)[i] = (float)(sum[i] * scale);
  return TRUE;
}

/* Concat and Split move [outer][size_i * inner] blocks along one axis. */
static void
axis_blocks (const ExecutorTensorArg *t, int axis, gint64 *outer, gint64 *inner)
{
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < axis; d++)
    *outer *= t->shape[d];
  for (guint d = axis + 1; d < t->rank; d++)
    *inner *= t->shape[d];
}

static gboolean
k_concat (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *o = &c->outputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, o->rank);
  gsize es = executor_storage_size (o->dtype);
  gint64 outer, inner, at = 0;
  axis_blocks (o, axis, &outer, &inner);
  for (guint i = 0; i < c->n_inputs; i++)
    {
      gint64 len = c->inputs[i].shape[axis] * inner;
      for (gint64 r = 0; r < outer; r++)
        memcpy (o->buffer->data + (gsize)(r * o->shape[axis] * inner + at) * es,
                c->inputs[i].buffer->data + (gsize)(r * len) * es, (gsize)len * es);
      at += len;
    }
  return TRUE;
}

static gboolean
k_split (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, t->rank);
  gsize es = executor_storage_size (t->dtype);
  gint64 outer, inner;
  gint64 at = c->op->type == PLANNER_OP_SLICE ? c->op->attrs.start : 0;
  axis_blocks (t, axis, &outer, &inner);
  at *= inner;
  for (guint i = 0; i < c->n_outputs; i++)
    {
      gint64 len = c->outputs[i].shape[axis] * inner;
      for (gint64 r = 0; r < outer; r++)
        memcpy (c->outputs[i].buffer->data + (gsize)(r * len) * es,
                t->buffer->data + (gsize)(r * t->shape[axis] * inner + at) * es, (gsize)len * es);
      at += len;
    }
  return TRUE;
}

/* ---- attention ---- */

static gboolean
k_rotary (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *s = c->inputs[0].shape;
  gint64 half = s[3] / 2, first = executor_dim_offset (c, 0, 2);
  const float *x = in_f32 (c, 0);
  float *y = out_f32 (c, 0);
  /* Hugging Face's rotate_half: pairs (i, i + D/2), angle position * theta^(-2i/D); the
   * position is the global sequence index. */
  for (gint64 b = 0; b < s[0] * s[1]; b++)
    for (gint64 p = 0; p < s[2]; p++)
      {
        const float *px = x + (b * s[2] + p) * s[3];
        float *py = y + (b * s[2] + p) * s[3];
        double pos = (double)(first + p);
        for (gint64 i = 0; i < half; i++)
          {
            double angle = pos * pow (c->op->attrs.theta, -2.0 * (double)i / (double)s[3]);
            double cs = cos (angle), sn = sin (angle);
            py[i] = (float)(px[i] * cs - px[i + half] * sn);
            py[i + half] = (float)(px[i + half] * cs + px[i] * sn);
          }
      }
  return TRUE;
}

static gboolean
k_sdpa (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *q = c->inputs[0].shape, *k = c->inputs[1].shape, *v = c->inputs[2].shape;
  gint64 sq = q[2], sk = k[2], d = q[3], dv = v[3];
  if (k[1] == 0 || q[1] % k[1] != 0 || k[3] != d)
    return executor_kernel_error (error, c, "local heads or head dims of q, k and v disagree");
  gint64 group = q[1] / k[1];
  gint64 q_first = executor_factor_offset (c, "sq");
  double scale = c->op->attrs.scale > 0 ? c->op->attrs.scale : 1.0 / sqrt ((double)d);
  g_autofree float *scores = g_new (float, MAX (sq * sk, 1));
  const float *pq = in_f32 (c, 0), *pk = in_f32 (c, 1), *pv = in_f32 (c, 2);
  float *po = out_f32 (c, 0);

  for (gint64 b = 0; b < q[0]; b++)
    for (gint64 h = 0; h < q[1]; h++)
      {
        /* Query heads are kv-head major (HF repeat_kv), locally as globally. */
        gint64 kvh = h / group;
        const float *qh = pq + (b * q[1] + h) * sq * d;
        const float *kh = pk + (b * k[1] + kvh) * sk * d;
        const float *vh = pv + (b * k[1] + kvh) * sk * dv;
        executor_cpu_gemm (TRUE, sq, sk, d, qh, kh, scores);
        for (gint64 i = 0; i < sq; i++)
          {
            float *row = scores + i * sk;
            /* Causal, aligned top-left as PyTorch's is_causal: key j sees query i when j is
             * not after i, in global positions (the keys are never split). */
            gint64 last = c->op->attrs.causal ? MIN (q_first + i, sk - 1) : sk - 1;
            float mx = -INFINITY;
            for (gint64 j = 0; j <= last; j++)
              mx = MAX (mx, row[j] * (float)scale);
            double sum = 0;
            for (gint64 j = 0; j <= last; j++)
              sum += row[j] = expf (row[j] * (float)scale - mx);
            for (gint64 j = 0; j < sk; j++)
              row[j] = j <= last ? (float)(row[j] / sum) : 0.0f;
          }
        executor_cpu_gemm (FALSE, sq, dv, sk, scores, vh, po + (b * q[1] + h) * sq * dv);
      }
  return TRUE;
}

static gboolean
k_cross_entropy (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *logits = &c->inputs[0], *labels = &c->inputs[1];
  gint64 v = logits->shape[logits->rank - 1], rows = executor_numel (labels);
  const float *x = in_f32 (c, 0);
  const gint64 *y = executor_cpu_i64 (labels->buffer);
  if (labels->dtype != PLANNER_DTYPE_I64)
    return executor_kernel_error (error, c, "labels must be i64");
  double total = 0;
  for (gint64 r = 0; r < rows; r++)
    {
      const float *row = x + r * v;
      if (y[r] < 0 || y[r] >= v)
        {
          g_autofree char *msg = g_strdup_printf (
              "label %" G_GINT64_FORMAT " is outside the %" G_GINT64_FORMAT " classes", y[r], v);
          return executor_kernel_error (error, c, msg);
        }
      float mx = -INFINITY;
      for (gint64 j = 0; j < v; j++)
        mx = MAX (mx, row[j]);
      double sum = 0;
      for (gint64 j = 0; j < v; j++)
        sum += exp ((double)(row[j] - mx));
      total += log (sum) + mx - row[y[r]];
    }
  /* A mean over the global rows: a shard of the rows gives its share of the mean. */
  out_f32 (c, 0)[0] = (float)(total / executor_reduction_count (c));
  return TRUE;
}

const ExecutorKernelFunc executor_cpu_kernels[PLANNER_N_OP_TYPES] = {
  [PLANNER_OP_MATMUL] = k_matmul,
  [PLANNER_OP_BATCH_MATMUL] = k_batch_matmul,
  [PLANNER_OP_EINSUM] = k_einsum,
  [PLANNER_OP_ADD] = k_binary,
  [PLANNER_OP_SUB] = k_binary,
  [PLANNER_OP_MUL] = k_binary,
  [PLANNER_OP_DIV] = k_binary,
  [PLANNER_OP_RELU] = k_unary,
  [PLANNER_OP_GELU] = k_unary,
  [PLANNER_OP_SILU] = k_unary,
  [PLANNER_OP_TANH] = k_unary,
  [PLANNER_OP_EXP] = k_unary,
  [PLANNER_OP_NEG] = k_unary,
  [PLANNER_OP_CAST] = k_unary,
  [PLANNER_OP_DROPOUT] = k_unary,
  [PLANNER_OP_SOFTMAX] = k_softmax,
  [PLANNER_OP_LAYER_NORM] = k_norm,
  [PLANNER_OP_RMS_NORM] = k_norm,
  [PLANNER_OP_EMBEDDING] = k_embedding,
  [PLANNER_OP_RESHAPE] = k_reshape,
  [PLANNER_OP_TRANSPOSE] = k_transpose,
  [PLANNER_OP_REDUCE_SUM] = k_reduce,
  [PLANNER_OP_REDUCE_MEAN] = k_reduce,
  [PLANNER_OP_CONCAT] = k_concat,
  [PLANNER_OP_SPLIT] = k_split,
  [PLANNER_OP_SLICE] = k_split,
  [PLANNER_OP_ROTARY_EMBEDDING] = k_rotary,
  [PLANNER_OP_SDPA] = k_sdpa,
  [PLANNER_OP_CROSS_ENTROPY] = k_cross_entropy,
  [PLANNER_OP_CONV2D] = k_conv2d,
};
