#define G_LOG_DOMAIN "executor-cpu-backward"

#include "config.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "executor-backward.h"
#include "executor-cpu-private.h"
#include "executor-error.h"
#include "executor-op-util.h"

/* The backward of every op type in f32 on the CPU, derived from each forward kernel's
 * definition (executor-cpu-kernels.c); sums in double where the forward's are. Unsharded:
 * factor offsets are read where the forward reads them, but no kernel here has been run on
 * a shard yet. */

typedef const ExecutorBackwardCall BCall;
typedef const ExecutorOpCall Call;

static float *
gin (BCall *b, guint i)
{
  return b->grad_inputs[i].buffer ? (float *)b->grad_inputs[i].buffer->data : NULL;
}

static const float *
gout (BCall *b, guint i)
{
  return (const float *)b->grad_outputs[i].buffer->data;
}

static const float *
fin (BCall *b, guint i)
{
  return executor_in_f32 (b->fwd, i);
}

static const float *
fout (BCall *b, guint i)
{
  return executor_out_f32 (b->fwd, i);
}

static void
zero_grads (BCall *b)
{
  for (guint i = 0; i < b->fwd->n_inputs; i++)
    if (gin (b, i))
      memset (gin (b, i), 0, (gsize)executor_numel (&b->fwd->inputs[i]) * sizeof (float));
}

/* C[m,n] += op(A) op(B), op(A) [m,k], op(B) [k,n]; A stored [k,m] when @ta, B [n,k] when
 * @tb. */
static void
gemm_acc (gboolean ta, gboolean tb, gint64 m, gint64 n, gint64 k, const float *a, const float *b,
          float *c)
{
  if (m == 0 || n == 0 || k == 0)
    return;
  cblas_sgemm (CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
               (blasint)m, (blasint)n, (blasint)k, 1.0f, a, (blasint)(ta ? m : k), b,
               (blasint)(tb ? k : n), 1.0f, c, (blasint)n);
}

/* Sum of @g [rows, n] over its rows into @db [n]. */
static void
bias_grad (const float *g, gint64 rows, gint64 n, float *db)
{
  for (gint64 j = 0; j < n; j++)
    {
      double s = 0;
      for (gint64 r = 0; r < rows; r++)
        s += g[r * n + j];
      db[j] = (float)s;
    }
}

/* ---- contractions ---- */

static gboolean
b_matmul (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  gint64 m, n, k;
  if (!executor_matmul_dims (c, &m, &n, &k, error))
    return FALSE;
  gboolean tb = c->op->attrs.transpose_b;
  zero_grads (b);
  /* y = x W: dx = g W^T, dW = x^T g (W [n,k] when transpose_b: dx = g W, dW = g^T x). */
  if (gin (b, 0))
    gemm_acc (FALSE, !tb, m, k, n, gout (b, 0), fin (b, 1), gin (b, 0));
  if (gin (b, 1))
    {
      if (tb)
        gemm_acc (TRUE, FALSE, n, k, m, gout (b, 0), fin (b, 0), gin (b, 1));
      else
        gemm_acc (TRUE, FALSE, k, n, m, fin (b, 0), gout (b, 0), gin (b, 1));
    }
  /* The bias was added on one member of a partial group only, so only its gradient counts. */
  if (c->n_inputs == 3 && gin (b, 2))
    {
      bias_grad (gout (b, 0), m, n, gin (b, 2));
      if (!c->add_bias)
        memset (gin (b, 2), 0, (gsize)n * sizeof (float));
    }
  return TRUE;
}

static gboolean
b_batch_matmul (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  ExecutorBatchGemm bg;
  if (!executor_batch_matmul_plan (c, &bg, error))
    return FALSE;
  zero_grads (b);
  /* Broadcast operands (stride 0) gather the gradient of every batch they served. */
  for (gint64 o = 0; o < bg.n_outer; o++)
    {
      gint64 ia, ib;
      executor_batch_gemm_offsets (&bg, o, &ia, &ib);
      for (gint64 j = 0; j < bg.n_inner; j++)
        {
          const float *g = gout (b, 0) + (o * bg.n_inner + j) * bg.m * bg.n;
          gint64 oa = ia + j * bg.stride_a, ob = ib + j * bg.stride_b;
          if (gin (b, 0))
            gemm_acc (FALSE, TRUE, bg.m, bg.k, bg.n, g, fin (b, 1) + ob, gin (b, 0) + oa);
          if (gin (b, 1))
            gemm_acc (TRUE, FALSE, bg.k, bg.n, bg.m, fin (b, 0) + oa, g, gin (b, 1) + ob);
        }
    }
  return TRUE;
}

/* Any einsum, one term of the full index space at a time: each operand's gradient gathers g
 * times the other operands. Slow but general; the GEMM path is still to come. */
static gboolean
b_einsum (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  ExecutorEquation eq;
  if (!executor_equation_parse (c, &eq, error))
    return FALSE;
  ExecutorEinsumIndex ix;
  executor_einsum_index (c, &eq, &ix);
  zero_grads (b);
  gint64 idx[128] = { 0 }, total = 1;
  for (guint l = 0; l < ix.n_letters; l++)
    total *= ix.size[l];
  const float *g = gout (b, 0);
  for (gint64 e = 0; e < total; e++)
    {
      gint64 off[PLANNER_MAX_OPERANDS] = { 0 }, oo = 0;
      for (guint l = 0; l < ix.n_letters; l++)
        {
          for (guint i = 0; i < eq.n_ops; i++)
            off[i] += idx[l] * ix.stride[i][l];
          if (l < ix.n_free)
            oo += idx[l] * ix.out_stride[l];
        }
      for (guint i = 0; i < eq.n_ops; i++)
        if (gin (b, i))
          {
            double prod = g[oo];
            for (guint j = 0; j < eq.n_ops; j++)
              if (j != i)
                prod *= fin (b, j)[off[j]];
            gin (b, i)[off[i]] += (float)prod;
          }
      for (int l = (int)ix.n_letters - 1; l >= 0; l--)
        {
          if (++idx[l] < ix.size[l])
            break;
          idx[l] = 0;
        }
    }
  if (c->n_inputs == eq.n_ops + 1 && gin (b, eq.n_ops))
    {
      gint64 nb = executor_numel (&c->inputs[eq.n_ops]);
      bias_grad (g, executor_numel (&c->outputs[0]) / MAX (nb, 1), nb, gin (b, eq.n_ops));
      if (!c->add_bias)
        memset (gin (b, eq.n_ops), 0, (gsize)nb * sizeof (float));
    }
  return TRUE;
}

static gboolean
b_conv2d (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  ExecutorConv2d cv;
  if (!executor_conv2d_dims (c, &cv, error))
    return FALSE;
  zero_grads (b);
  const float *g = gout (b, 0), *x = fin (b, 0), *w = fin (b, 1);
  float *dx = gin (b, 0), *dw = gin (b, 1), *db = c->n_inputs == 3 ? gin (b, 2) : NULL;
  gint64 total = cv.y[0] * cv.y[1] * cv.y[2] * cv.y[3];
  for (gint64 e = 0; e < total; e++)
    {
      gint64 j = e % cv.y[3], i = (e / cv.y[3]) % cv.y[2], oc = (e / (cv.y[3] * cv.y[2])) % cv.y[1],
             n = e / (cv.y[3] * cv.y[2] * cv.y[1]);
      if (db && c->add_bias)
        db[oc] += g[e];
      for (gint64 ic = 0; ic < cv.x[1]; ic++)
        for (gint64 u = 0; u < cv.w[2]; u++)
          {
            gint64 yi = i * cv.sh - cv.ph + u;
            if (yi < 0 || yi >= cv.x[2])
              continue;
            for (gint64 v = 0; v < cv.w[3]; v++)
              {
                gint64 xj = j * cv.sw - cv.pw + v;
                if (xj < 0 || xj >= cv.x[3])
                  continue;
                gint64 xo = ((n * cv.x[1] + ic) * cv.x[2] + yi) * cv.x[3] + xj;
                gint64 wo = ((oc * cv.w[1] + ic) * cv.w[2] + u) * cv.w[3] + v;
                if (dx)
                  dx[xo] += g[e] * w[wo];
                if (dw)
                  dw[wo] += g[e] * x[xo];
              }
          }
    }
  return TRUE;
}

/* ---- elementwise ---- */

static gboolean
b_binary (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *o = &c->outputs[0];
  ExecutorWalk wa, wb;
  if (!executor_broadcast_walk (&c->inputs[0], o, &wa)
      || !executor_broadcast_walk (&c->inputs[1], o, &wb))
    return executor_kernel_error (error, c, "local shapes do not broadcast");
  zero_grads (b);
  const float *x = fin (b, 0), *y = fin (b, 1), *g = gout (b, 0);
  float *dx = gin (b, 0), *dy = gin (b, 1);
  ExecutorBinary op = executor_binary_of (c->op);
  gint64 idx[PLANNER_MAX_RANK] = { 0 }, total = executor_numel (o), ia = 0, ib = 0;
  for (gint64 i = 0; i < total; i++)
    {
      /* A broadcast operand sums the gradient of every element it served. */
      float a = x[ia], bv = y[ib];
      if (dx)
        dx[ia] += op == EXECUTOR_BINARY_MUL   ? g[i] * bv
                  : op == EXECUTOR_BINARY_DIV ? g[i] / bv
                                              : g[i];
      if (dy)
        dy[ib] += op == EXECUTOR_BINARY_ADD   ? g[i]
                  : op == EXECUTOR_BINARY_SUB ? -g[i]
                  : op == EXECUTOR_BINARY_MUL ? g[i] * a
                                              : -g[i] * a / (bv * bv);
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
b_unary (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  float *dx = gin (b, 0);
  if (dx == NULL || c->inputs[0].dtype == PLANNER_DTYPE_I64)
    return TRUE; /* no gradient through integers */
  gint64 n = executor_numel (&c->outputs[0]);
  const float *x = fin (b, 0), *g = gout (b, 0);
  if (c->outputs[0].dtype == PLANNER_DTYPE_I64)
    {
      memset (dx, 0, (gsize)n * sizeof (float));
      return TRUE;
    }
  const float *y = fout (b, 0);
  ExecutorUnary op = executor_unary_of (c->op);
  for (gint64 i = 0; i < n; i++)
    {
      double v = x[i], d;
      switch (op)
        {
        case EXECUTOR_UNARY_RELU:
          d = v > 0 ? 1 : 0;
          break;
        case EXECUTOR_UNARY_GELU_ERF:
          d = 0.5 * (1 + erf (v * M_SQRT1_2)) + v * exp (-0.5 * v * v) / sqrt (2 * G_PI);
          break;
        case EXECUTOR_UNARY_GELU_TANH:
          {
            double k = 0.7978845608028654, u = k * (v + 0.044715 * v * v * v), t = tanh (u);
            d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
            break;
          }
        case EXECUTOR_UNARY_SILU:
          {
            double s = 1 / (1 + exp (-v));
            d = s * (1 + v * (1 - s));
            break;
          }
        case EXECUTOR_UNARY_TANH:
          d = 1 - (double)y[i] * y[i];
          break;
        case EXECUTOR_UNARY_EXP:
          d = y[i];
          break;
        case EXECUTOR_UNARY_NEG:
          d = -1;
          break;
        default: /* Cast between float dtypes, Dropout (identity in a trial) */
          d = 1;
          break;
        }
      dx[i] = (float)(g[i] * d);
    }
  return TRUE;
}

static gboolean
b_softmax (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *t = &c->inputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, t->rank);
  gint64 outer, inner, n = t->shape[axis];
  executor_axis_blocks (t, axis, &outer, &inner);
  if (gin (b, 0) == NULL)
    return TRUE;
  /* dx = y (g - sum (g y)) along the axis. */
  for (gint64 o = 0; o < outer; o++)
    for (gint64 i = 0; i < inner; i++)
      {
        gint64 base = o * n * inner + i;
        const float *y = fout (b, 0) + base, *g = gout (b, 0) + base;
        float *dx = gin (b, 0) + base;
        double dot = 0;
        for (gint64 j = 0; j < n; j++)
          dot += (double)g[j * inner] * y[j * inner];
        for (gint64 j = 0; j < n; j++)
          dx[j * inner] = (float)(y[j * inner] * (g[j * inner] - dot));
      }
  return TRUE;
}

static gboolean
b_norm (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *t = &c->inputs[0];
  gboolean layer = c->op->type == PLANNER_OP_LAYER_NORM;
  gint64 h = t->shape[t->rank - 1], rows = executor_numel (t) / MAX (h, 1);
  const float *gamma = c->n_inputs > 1 ? fin (b, 1) : NULL;
  float *dx = gin (b, 0), *dgamma = c->n_inputs > 1 ? gin (b, 1) : NULL,
        *dbeta = c->n_inputs > 2 ? gin (b, 2) : NULL;
  g_autofree double *sg = g_new0 (double, MAX (h, 1)), *sb = g_new0 (double, MAX (h, 1));
  for (gint64 r = 0; r < rows; r++)
    {
      const float *x = fin (b, 0) + r * h, *g = gout (b, 0) + r * h;
      double mean = 0, sq = 0;
      if (layer)
        {
          for (gint64 j = 0; j < h; j++)
            mean += x[j];
          mean /= (double)h;
        }
      for (gint64 j = 0; j < h; j++)
        sq += (x[j] - mean) * (x[j] - mean);
      double inv = 1.0 / sqrt (sq / (double)h + c->op->attrs.eps);
      /* xhat = (x - mean) inv; with dxhat = g gamma:
       * dx = inv (dxhat - mean (dxhat) [LayerNorm] - xhat mean (dxhat xhat)). */
      double m1 = 0, m2 = 0;
      for (gint64 j = 0; j < h; j++)
        {
          double xh = (x[j] - mean) * inv, dxh = g[j] * (gamma ? gamma[j] : 1.0);
          m1 += dxh;
          m2 += dxh * xh;
          sg[j] += g[j] * xh;
          sb[j] += g[j];
        }
      m1 /= (double)h;
      m2 /= (double)h;
      if (dx)
        for (gint64 j = 0; j < h; j++)
          {
            double xh = (x[j] - mean) * inv, dxh = g[j] * (gamma ? gamma[j] : 1.0);
            dx[r * h + j] = (float)(inv * (dxh - (layer ? m1 : 0) - xh * m2));
          }
    }
  for (gint64 j = 0; j < h; j++)
    {
      if (dgamma)
        dgamma[j] = (float)sg[j];
      if (dbeta)
        dbeta[j] = (float)sb[j];
    }
  return TRUE;
}

/* ---- lookups, views, data movement ---- */

static gboolean
b_embedding (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *ids = &c->inputs[0], *table = &c->inputs[1];
  gint64 n = executor_numel (ids), v_local = table->shape[0], h = table->shape[1];
  gint64 first = executor_factor_offset (c, "vocab");
  const gint64 *pid = executor_cpu_i64 (ids->buffer);
  float *dt = gin (b, 1);
  if (dt == NULL)
    return TRUE;
  memset (dt, 0, (gsize)executor_numel (table) * sizeof (float));
  for (gint64 i = 0; i < n; i++)
    {
      gint64 row = pid[i] - first;
      if (row >= 0 && row < v_local)
        for (gint64 j = 0; j < h; j++)
          dt[row * h + j] += gout (b, 0)[i * h + j];
    }
  return TRUE;
}

static gboolean
b_reshape (ExecutorDevice *dev, BCall *b, GError **error)
{
  if (gin (b, 0))
    memcpy (gin (b, 0), gout (b, 0), (gsize)executor_numel (&b->fwd->inputs[0]) * sizeof (float));
  return TRUE;
}

static gboolean
b_transpose (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *t = &c->inputs[0];
  if (gin (b, 0) == NULL)
    return TRUE;
  /* Output dim i is input dim perm[i]: scatter each output element back. */
  gint64 in_stride[PLANNER_MAX_RANK], idx[PLANNER_MAX_RANK] = { 0 };
  executor_row_strides (t->shape, t->rank, in_stride);
  const ExecutorTensorArg *o = &c->outputs[0];
  gint64 total = executor_numel (o), off = 0;
  for (gint64 i = 0; i < total; i++)
    {
      gin (b, 0)[off] = gout (b, 0)[i];
      for (int d = (int)o->rank - 1; d >= 0; d--)
        {
          gint64 s = in_stride[c->op->attrs.ints[d]];
          off += s;
          if (++idx[d] < o->shape[d])
            break;
          off -= s * o->shape[d];
          idx[d] = 0;
        }
    }
  return TRUE;
}

static gboolean
b_reduce (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *t = &c->inputs[0];
  if (gin (b, 0) == NULL)
    return TRUE;
  guint32 reduced = executor_reduced_dims (c);
  gint64 ost[PLANNER_MAX_RANK], acc = 1, idx[PLANNER_MAX_RANK] = { 0 }, total = executor_numel (t);
  for (int d = (int)t->rank - 1; d >= 0; d--)
    {
      ost[d] = (reduced >> d) & 1 ? 0 : acc;
      if (!((reduced >> d) & 1))
        acc *= t->shape[d];
    }
  double scale = c->op->type == PLANNER_OP_REDUCE_MEAN ? 1.0 / executor_reduction_count (c) : 1.0;
  gint64 o = 0;
  for (gint64 i = 0; i < total; i++)
    {
      gin (b, 0)[i] = (float)(gout (b, 0)[o] * scale);
      for (int d = (int)t->rank - 1; d >= 0; d--)
        {
          o += ost[d];
          if (++idx[d] < t->shape[d])
            break;
          o -= ost[d] * t->shape[d];
          idx[d] = 0;
        }
    }
  return TRUE;
}

/* Concat, Split and Slice: the pieces of one axis, moved the other way. */
static gboolean
b_concat_split (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  gboolean concat = c->op->type == PLANNER_OP_CONCAT;
  const ExecutorTensorArg *whole = concat ? &c->outputs[0] : &c->inputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, whole->rank);
  gint64 outer, inner;
  executor_axis_blocks (whole, axis, &outer, &inner);
  gint64 n_whole = whole->shape[axis];
  if (!concat && gin (b, 0) == NULL)
    return TRUE;
  if (!concat)
    memset (gin (b, 0), 0, (gsize)executor_numel (whole) * sizeof (float));
  guint n_parts = concat ? c->n_inputs : c->n_outputs;
  gint64 start = c->op->type == PLANNER_OP_SLICE ? c->op->attrs.start : 0;
  for (guint p = 0; p < n_parts; p++)
    {
      const ExecutorTensorArg *part = concat ? &c->inputs[p] : &c->outputs[p];
      gint64 np = part->shape[axis];
      float *dpart = concat ? gin (b, p) : NULL;
      const float *gpart = concat ? NULL : gout (b, p);
      for (gint64 o = 0; o < outer; o++)
        for (gint64 j = 0; j < np * inner; j++)
          {
            gint64 wi = (o * n_whole + start) * inner + j, pi = o * np * inner + j;
            if (concat && dpart)
              dpart[pi] = gout (b, 0)[wi];
            else if (!concat)
              gin (b, 0)[wi] = gpart[pi];
          }
      start += np;
    }
  return TRUE;
}

/* ---- attention ---- */

static gboolean
b_rotary (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const gint64 *s = c->inputs[0].shape;
  gint64 first = executor_dim_offset (c, 0, 2), half = s[3] / 2;
  if (gin (b, 0) == NULL)
    return TRUE;
  /* A rotation's transpose rotates back. */
  for (gint64 r = 0; r < s[0] * s[1] * s[2]; r++)
    for (gint64 i = 0; i < half; i++)
      {
        double angle = (double)(first + r % s[2])
                       * pow (c->op->attrs.theta, -2.0 * (double)i / (double)s[3])
                       * executor_rotary_position_scale (&c->op->attrs, i, s[3]);
        double cs = cos (angle), sn = sin (angle);
        const float *g = gout (b, 0) + r * s[3];
        float *dx = gin (b, 0) + r * s[3];
        dx[i] = (float)(g[i] * cs + g[i + half] * sn);
        dx[i + half] = (float)(g[i + half] * cs - g[i] * sn);
      }
  return TRUE;
}

static gboolean
b_sdpa (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const gint64 *q = c->inputs[0].shape, *k = c->inputs[1].shape;
  ExecutorSdpa s;
  if (!executor_sdpa_dims (c, &s, error))
    return FALSE;
  zero_grads (b);
  g_autofree float *p = g_new (float, MAX (s.sq * s.sk, 1));
  g_autofree float *dp = g_new (float, MAX (s.sq * s.sk, 1));
  for (gint64 bb = 0; bb < q[0]; bb++)
    for (gint64 h = 0; h < q[1]; h++)
      {
        gint64 kvh = h / s.group, qo = (bb * q[1] + h) * s.sq;
        const float *qh = fin (b, 0) + qo * s.d;
        const float *kh = fin (b, 1) + (bb * k[1] + kvh) * s.sk * s.d;
        const float *vh = fin (b, 2) + (bb * k[1] + kvh) * s.sk * s.dv;
        const float *g = gout (b, 0) + qo * s.dv;
        /* P again, as the forward computed it. */
        memset (p, 0, (gsize)(s.sq * s.sk) * sizeof (float));
        gemm_acc (FALSE, TRUE, s.sq, s.sk, s.d, qh, kh, p);
        const float *bias = executor_sdpa_bias (c, bb, h);
        for (gint64 e = 0; bias && e < s.sq * s.sk; e++)
          p[e] += (float)(bias[e] / s.scale);
        for (gint64 i = 0; s.alibi && i < s.sq; i++)
          executor_sdpa_alibi_row (&s, h, p + i * s.sk);
        for (gint64 i = 0; i < s.sq; i++)
          executor_math_attention_row (p + i * s.sk, s.sk, (float)s.scale, c->op->attrs.causal,
                                       s.q_first + i);
        /* dV += P^T g; dP = g V^T; dS = P (dP - rowsum (dP P)); dQ = scale dS K;
         * dK += scale dS^T Q. */
        if (gin (b, 2))
          gemm_acc (TRUE, FALSE, s.sk, s.dv, s.sq, p, g,
                    gin (b, 2) + (bb * k[1] + kvh) * s.sk * s.dv);
        memset (dp, 0, (gsize)(s.sq * s.sk) * sizeof (float));
        gemm_acc (FALSE, TRUE, s.sq, s.sk, s.dv, g, vh, dp);
        for (gint64 i = 0; i < s.sq; i++)
          {
            double dot = 0;
            for (gint64 j = 0; j < s.sk; j++)
              dot += (double)dp[i * s.sk + j] * p[i * s.sk + j];
            for (gint64 j = 0; j < s.sk; j++)
              dp[i * s.sk + j] = (float)(p[i * s.sk + j] * (dp[i * s.sk + j] - dot) * s.scale);
          }
        /* The bias adds to the scaled scores: its gradient is dS before the scale, summed
         * over what it broadcasts. */
        if (c->n_inputs == 4 && gin (b, 3))
          {
            float *db = gin (b, 3) + executor_sdpa_bias_offset (c, bb, h);
            for (gint64 e = 0; e < s.sq * s.sk; e++)
              db[e] += (float)(dp[e] / s.scale);
          }
        if (gin (b, 0))
          gemm_acc (FALSE, FALSE, s.sq, s.d, s.sk, dp, kh, gin (b, 0) + qo * s.d);
        if (gin (b, 1))
          gemm_acc (TRUE, FALSE, s.sk, s.d, s.sq, dp, qh,
                    gin (b, 1) + (bb * k[1] + kvh) * s.sk * s.d);
      }
  return TRUE;
}

static gboolean
b_cross_entropy (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *logits = &c->inputs[0], *labels = &c->inputs[1];
  gint64 v = logits->shape[logits->rank - 1], rows = executor_numel (labels);
  const gint64 *y = executor_cpu_i64 (labels->buffer);
  float *dz = gin (b, 0);
  if (dz == NULL)
    return TRUE;
  /* d mean (lse - z[y]) / dz = (softmax (z) - onehot (y)) / count, times the upstream. */
  double scale = gout (b, 0)[0] / executor_reduction_count (c);
  for (gint64 r = 0; r < rows; r++)
    {
      const float *z = fin (b, 0) + r * v;
      float mx = -INFINITY;
      for (gint64 j = 0; j < v; j++)
        mx = MAX (mx, z[j]);
      double sum = 0;
      for (gint64 j = 0; j < v; j++)
        sum += exp ((double)(z[j] - mx));
      for (gint64 j = 0; j < v; j++)
        dz[r * v + j] = (float)(scale * (exp ((double)(z[j] - mx)) / sum - (j == y[r] ? 1 : 0)));
    }
  return TRUE;
}

/* ---- model zoo (issue 16) ---- */

/* The transpose of the forward's copy: each input slice sums the gradients of its copies
 * that this shard holds. */
static gboolean
b_repeat_interleave (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const ExecutorTensorArg *in = &c->inputs[0], *o = &c->outputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, in->rank);
  gint64 r = c->op->attrs.ints[0], first = executor_factor_offset (c, "rep");
  gint64 outer, inner, n_in = in->shape[axis], n_out = o->shape[axis];
  float *dx = gin (b, 0);
  const float *dy = gout (b, 0);
  if (dx == NULL)
    return TRUE;
  zero_grads (b);
  executor_axis_blocks (in, axis, &outer, &inner);
  for (gint64 k = 0; k < outer; k++)
    for (gint64 j = 0; j < n_out; j++)
      {
        gint64 src = (first + j) / r;
        if (src >= n_in)
          return executor_kernel_error (error, c, "output slice beyond the repeated input");
        for (gint64 i = 0; i < inner; i++)
          dx[(k * n_in + src) * inner + i] += dy[(k * n_out + j) * inner + i];
      }
  return TRUE;
}

static gboolean
b_scale (ExecutorDevice *dev, BCall *b, GError **error)
{
  float *dx = gin (b, 0);
  const float *dy = gout (b, 0);
  if (dx != NULL)
    for (gint64 i = 0; i < executor_numel (&b->fwd->inputs[0]); i++)
      dx[i] = (float)(dy[i] * b->fwd->op->attrs.scale);
  return TRUE;
}

/* Positions only: nothing flows back to the ids. */
static gboolean
b_no_gradient (ExecutorDevice *dev, BCall *b, GError **error)
{
  return TRUE;
}

/* Every op type's backward. */
#define BACKWARD_TABLE                                                                             \
  {                                                                                                \
    [PLANNER_OP_MATMUL] = b_matmul, [PLANNER_OP_BATCH_MATMUL] = b_batch_matmul,                    \
    [PLANNER_OP_EINSUM] = b_einsum, [PLANNER_OP_ADD] = b_binary, [PLANNER_OP_SUB] = b_binary,      \
    [PLANNER_OP_MUL] = b_binary, [PLANNER_OP_DIV] = b_binary, [PLANNER_OP_RELU] = b_unary,         \
    [PLANNER_OP_GELU] = b_unary, [PLANNER_OP_SILU] = b_unary, [PLANNER_OP_TANH] = b_unary,         \
    [PLANNER_OP_EXP] = b_unary, [PLANNER_OP_NEG] = b_unary, [PLANNER_OP_CAST] = b_unary,           \
    [PLANNER_OP_DROPOUT] = b_unary, [PLANNER_OP_SOFTMAX] = b_softmax,                              \
    [PLANNER_OP_LAYER_NORM] = b_norm, [PLANNER_OP_RMS_NORM] = b_norm,                              \
    [PLANNER_OP_EMBEDDING] = b_embedding, [PLANNER_OP_RESHAPE] = b_reshape,                        \
    [PLANNER_OP_TRANSPOSE] = b_transpose, [PLANNER_OP_REDUCE_SUM] = b_reduce,                      \
    [PLANNER_OP_REDUCE_MEAN] = b_reduce, [PLANNER_OP_CONCAT] = b_concat_split,                     \
    [PLANNER_OP_SPLIT] = b_concat_split, [PLANNER_OP_SLICE] = b_concat_split,                      \
    [PLANNER_OP_ROTARY_EMBEDDING] = b_rotary, [PLANNER_OP_SDPA] = b_sdpa,                          \
    [PLANNER_OP_CROSS_ENTROPY] = b_cross_entropy, [PLANNER_OP_CONV2D] = b_conv2d,                  \
    EXECUTOR_MOE_BACKWARD_ENTRIES                                                                  \
    [PLANNER_OP_REPEAT_INTERLEAVE] = b_repeat_interleave, [PLANNER_OP_SCALE] = b_scale,            \
    [PLANNER_OP_RELATIVE_POSITION_BUCKET] = b_no_gradient,                                         \
  }

#ifdef SHARDSCOPE_KERNEL_MUTATIONS
/* Mutation testing (issue 13; only tests/golden-run-mutant compiles this):
 * $SHARDSCOPE_BACKWARD_MUTATION=OpType scales every input gradient of that op type by 0.9,
 * so tests/test-mutations.py can prove the golden backward check catches each. */
static const ExecutorBackwardFunc backward_real[PLANNER_N_OP_TYPES] = BACKWARD_TABLE;

static gboolean
b_mutant (ExecutorDevice *dev, BCall *b, GError **error)
{
  static gsize once = 0;
  static int type = -1;
  if (g_once_init_enter (&once))
    {
      const char *name = g_getenv ("SHARDSCOPE_BACKWARD_MUTATION");
      PlannerOpType t;
      if (name && *name && planner_op_type_from_string (name, &t))
        type = (int)t;
      else if (name && *name)
        g_error ("SHARDSCOPE_BACKWARD_MUTATION=%s names no op type", name);
      g_once_init_leave (&once, 1);
    }
  if (!backward_real[b->fwd->op->type](dev, b, error))
    return FALSE;
  if (type == (int)b->fwd->op->type)
    for (guint i = 0; i < b->fwd->n_inputs; i++)
      for (gint64 k = 0; gin (b, i) && k < executor_numel (&b->fwd->inputs[i]); k++)
        gin (b, i)[k] *= 0.9f;
  return TRUE;
}

const ExecutorBackwardFunc executor_cpu_backward_kernels[PLANNER_N_OP_TYPES]
    = { [0 ... PLANNER_N_OP_TYPES - 1] = b_mutant };
#else
const ExecutorBackwardFunc executor_cpu_backward_kernels[PLANNER_N_OP_TYPES] = BACKWARD_TABLE;
#endif
