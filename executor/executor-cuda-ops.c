#define G_LOG_DOMAIN "executor-cuda-ops"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-cuda-private.h"
#include "executor-error.h"
#include "executor-op-util.h"

/* The kernel of every op type on a CUDA device: the same reading of the rule tables as the
 * reference kernels (executor-cpu-kernels.c, through executor-op-util.h), GEMMs on cuBLAS,
 * everything else on the device kernels of executor-cuda-kernels.cu. */

typedef const ExecutorOpCall Call;

static cudaStream_t
stream_of (ExecutorDevice *dev)
{
  return ((ExecutorCudaDevice *)dev)->stream;
}

static float *
in_f32 (Call *c, guint i)
{
  return (float *)c->inputs[i].buffer->data;
}

static float *
out_f32 (Call *c, guint i)
{
  return (float *)c->outputs[i].buffer->data;
}

static gboolean
launched (ExecutorDevice *dev, Call *c, GError **error)
{
  return executor_cuda_launched (dev, c->op->name, error);
}

static gboolean
copy_bytes (ExecutorDevice *dev, void *dst, const void *src, gsize bytes, GError **error)
{
  return executor_cuda_ok (
      cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDeviceToDevice, stream_of (dev)), dev,
      "a device-to-device copy", error);
}

/* dst dim i = src dim perm[i]. */
static gboolean
permute_copy (ExecutorDevice *dev, const void *src, const gint64 *src_shape, guint rank,
              const guint *perm, guint es, void *dst, GError **error)
{
  gint64 strides[PLANNER_MAX_RANK], total = 1;
  gboolean identity = TRUE;
  ExecutorCudaWalk w = { (int)rank };
  executor_row_strides (src_shape, rank, strides);
  for (guint i = 0; i < rank; i++)
    {
      w.shape[i] = src_shape[perm[i]];
      w.stride[i] = strides[perm[i]];
      total *= w.shape[i];
      identity &= perm[i] == i;
    }
  if (identity || rank == 0)
    return copy_bytes (dev, dst, src, (gsize)total * es, error);
  executor_cuda_launch_gather (stream_of (dev), dst, src, es, &w);
  return executor_cuda_launched (dev, "a permutation", error);
}

static gboolean
add_bias_rows (ExecutorDevice *dev, Call *c, float *out, gint64 rows, const float *bias, gint64 n,
               GError **error)
{
  executor_cuda_launch_add_rows (stream_of (dev), out, rows, bias, n);
  return launched (dev, c, error);
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
  if (!executor_cuda_gemm (dev, tb, m, n, k, in_f32 (c, 0), in_f32 (c, 1), out_f32 (c, 0), 1, 0, 0,
                           0, error))
    return FALSE;
  if (c->n_inputs == 3 && c->add_bias)
    return add_bias_rows (dev, c, out_f32 (c, 0), m, in_f32 (c, 2), n, error);
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
  /* The innermost batch dim is one strided-batched call; the outer ones loop. */
  int inner = (int)ro - 3;
  gint64 n_inner = inner >= 0 ? o->shape[inner] : 1;
  gint64 ia = 0, ib = 0;
  for (gint64 i = 0; i < batch; i += n_inner)
    {
      if (!executor_cuda_gemm (dev, FALSE, m, n, k, pa + ia * m * k, pb + ib * k * n,
                               po + i * m * n, n_inner, inner >= 0 ? sa[inner] * m * k : 0,
                               inner >= 0 ? sb[inner] * k * n : 0, m * n, error))
        return FALSE;
      for (int d = inner - 1; d >= 0; d--)
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

/* Any einsum, one output element per thread: the fallback for shapes the GEMM path does
 * not cover. */
static gboolean
einsum_naive (ExecutorDevice *dev, Call *c, const ExecutorEquation *eq, float *out, GError **error)
{
  char letters[128];
  int pos[128];
  guint n_letters = 0, n_out = strlen (eq->out);
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
  if (eq->n_ops > EXECUTOR_CUDA_MAX_EINSUM_OPS || n_letters > EXECUTOR_CUDA_MAX_EINSUM_LETTERS)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "%s (Einsum): the cuda backend sums at most %d operands over %d letters",
                   c->op->name, EXECUTOR_CUDA_MAX_EINSUM_OPS, EXECUTOR_CUDA_MAX_EINSUM_LETTERS);
      return FALSE;
    }
  ExecutorCudaEinsum e;
  memset (&e, 0, sizeof e);
  e.n_ops = (int)eq->n_ops;
  e.n_free = (int)n_free;
  e.n_letters = (int)n_letters;
  for (guint l = 0; l < n_letters; l++)
    e.size[l] = eq->size[(guchar)letters[l]];
  for (guint i = 0; i < eq->n_ops; i++)
    {
      gint64 s[PLANNER_MAX_RANK];
      executor_row_strides (c->inputs[i].shape, c->inputs[i].rank, s);
      for (guint d = 0; eq->ops[i][d]; d++)
        e.stride[i][pos[(guchar)eq->ops[i][d]]] += s[d];
      e.ops[i] = in_f32 (c, i);
    }
  gint64 s = 1, n_total = 1;
  for (int d = (int)n_out - 1; d >= 0; d--)
    {
      e.out_stride[pos[(guchar)eq->out[d]]] += s;
      s *= eq->size[(guchar)eq->out[d]];
    }
  for (guint l = 0; l < n_free; l++)
    n_total *= e.size[l];
  executor_cuda_launch_einsum (stream_of (dev), &e, out, n_total);
  return launched (dev, c, error);
}

static gboolean
einsum_gemm (ExecutorDevice *dev, Call *c, const ExecutorEinsumGemm *plan, float *out,
             GError **error)
{
  const float *pa = in_f32 (c, 0), *pb = in_f32 (c, 1);
  float *ta = NULL, *tb = NULL, *to = NULL;
  gboolean ok = TRUE;
  gint64 nb = plan->batch, m = plan->m, n = plan->n, k = plan->k;
  if (plan->permute_a)
    {
      ok = (ta = executor_cuda_scratch (dev, (gsize)MAX (nb * m * k, 1) * 4, error)) != NULL
           && permute_copy (dev, pa, c->inputs[0].shape, plan->rank_a, plan->perm_a, 4, ta, error);
      pa = ta;
    }
  if (ok && plan->permute_b)
    {
      ok = (tb = executor_cuda_scratch (dev, (gsize)MAX (nb * k * n, 1) * 4, error)) != NULL
           && permute_copy (dev, pb, c->inputs[1].shape, plan->rank_b, plan->perm_b, 4, tb, error);
      pb = tb;
    }
  float *po = out;
  if (ok && plan->permute_out)
    ok = (po = to = executor_cuda_scratch (dev, (gsize)MAX (nb * m * n, 1) * 4, error)) != NULL;
  ok = ok && executor_cuda_gemm (dev, FALSE, m, n, k, pa, pb, po, nb, m * k, k * n, m * n, error);
  if (ok && to)
    ok = permute_copy (dev, to, plan->shape_bmn, plan->rank_out, plan->perm_out, 4, out, error);
  executor_cuda_scratch_free (dev, ta);
  executor_cuda_scratch_free (dev, tb);
  executor_cuda_scratch_free (dev, to);
  return ok;
}

static gboolean
k_einsum (ExecutorDevice *dev, Call *c, GError **error)
{
  ExecutorEquation eq;
  ExecutorEinsumGemm plan;
  if (!executor_equation_parse (c, &eq, error))
    return FALSE;
  float *out = out_f32 (c, 0);
  gboolean ok = executor_einsum_gemm_plan (&eq, &plan) ? einsum_gemm (dev, c, &plan, out, error)
                                                       : einsum_naive (dev, c, &eq, out, error);
  if (ok && c->n_inputs == eq.n_ops + 1 && c->add_bias)
    {
      gint64 nb = executor_numel (&c->inputs[eq.n_ops]);
      ok = add_bias_rows (dev, c, out, executor_numel (&c->outputs[0]) / MAX (nb, 1),
                          in_f32 (c, eq.n_ops), nb, error);
    }
  return ok;
}

static gboolean
k_conv2d (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *x = c->inputs[0].shape, *w = c->inputs[1].shape;
  const PlannerOpAttrs *at = &c->op->attrs;
  gint64 sh = at->n_ints >= 2 ? at->ints[0] : 1, sw = at->n_ints >= 2 ? at->ints[1] : 1;
  gint64 ph = at->n_ints >= 4 ? at->ints[2] : 0, pw = at->n_ints >= 4 ? at->ints[3] : 0;
  if (x[1] != w[1])
    return executor_kernel_error (error, c, "local input channels of x and the kernel disagree");
  executor_cuda_launch_conv2d (stream_of (dev), in_f32 (c, 0), in_f32 (c, 1),
                               c->n_inputs == 3 && c->add_bias ? in_f32 (c, 2) : NULL,
                               out_f32 (c, 0), x, w, c->outputs[0].shape, sh, sw, ph, pw);
  return launched (dev, c, error);
}

/* ---- elementwise ---- */

/* @t walks the output's shape, broadcasting from its trailing dims. */
static void
broadcast_walk (const ExecutorTensorArg *t, const ExecutorTensorArg *o, ExecutorCudaWalk *w)
{
  gint64 acc = 1;
  w->rank = (int)o->rank;
  for (int d = (int)o->rank - 1; d >= 0; d--)
    {
      int di = d - (int)(o->rank - t->rank);
      gint64 size = di >= 0 ? t->shape[di] : 1;
      w->shape[d] = o->shape[d];
      w->stride[d] = size == 1 ? 0 : acc;
      acc *= size;
    }
}

static gboolean
k_binary (ExecutorDevice *dev, Call *c, GError **error)
{
  ExecutorCudaWalk wa, wb;
  broadcast_walk (&c->inputs[0], &c->outputs[0], &wa);
  broadcast_walk (&c->inputs[1], &c->outputs[0], &wb);
  PlannerOpType type = c->op->type;
  ExecutorCudaBinary op = type == PLANNER_OP_ADD   ? EXECUTOR_CUDA_ADD
                          : type == PLANNER_OP_SUB ? EXECUTOR_CUDA_SUB
                          : type == PLANNER_OP_MUL ? EXECUTOR_CUDA_MUL
                                                   : EXECUTOR_CUDA_DIV;
  executor_cuda_launch_binary (stream_of (dev), op, in_f32 (c, 0), &wa, in_f32 (c, 1), &wb,
                               out_f32 (c, 0));
  return launched (dev, c, error);
}

static gboolean
k_unary (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *in = &c->inputs[0], *o = &c->outputs[0];
  gint64 n = executor_numel (o);
  if (executor_numel (in) != n)
    return executor_kernel_error (error, c, "local input and output sizes differ");
  cudaStream_t s = stream_of (dev);

  /* Cast moves between the two storage types; every float dtype is stored as f32. */
  if (in->dtype == PLANNER_DTYPE_I64 || o->dtype == PLANNER_DTYPE_I64)
    {
      if (in->dtype == o->dtype)
        return copy_bytes (dev, o->buffer->data, in->buffer->data, (gsize)n * 8, error);
      executor_cuda_launch_convert (
          s, in->dtype == PLANNER_DTYPE_I64 ? EXECUTOR_CUDA_I64_TO_F32 : EXECUTOR_CUDA_F32_TO_I64,
          in->buffer->data, o->buffer->data, n);
      return launched (dev, c, error);
    }
  ExecutorCudaUnary op;
  switch (c->op->type)
    {
    case PLANNER_OP_RELU:
      op = EXECUTOR_CUDA_RELU;
      break;
    case PLANNER_OP_GELU:
      op = c->op->attrs.variant == 1 ? EXECUTOR_CUDA_GELU_TANH : EXECUTOR_CUDA_GELU_ERF;
      break;
    case PLANNER_OP_SILU:
      op = EXECUTOR_CUDA_SILU;
      break;
    case PLANNER_OP_TANH:
      op = EXECUTOR_CUDA_TANH;
      break;
    case PLANNER_OP_EXP:
      op = EXECUTOR_CUDA_EXP;
      break;
    case PLANNER_OP_NEG:
      op = EXECUTOR_CUDA_NEG;
      break;
    default: /* Cast between float dtypes, Dropout (identity in a forward trial) */
      return copy_bytes (dev, out_f32 (c, 0), in_f32 (c, 0), (gsize)n * sizeof (float), error);
    }
  executor_cuda_launch_unary (s, op, in_f32 (c, 0), out_f32 (c, 0), n);
  return launched (dev, c, error);
}

static gboolean
k_softmax (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, t->rank);
  gint64 outer = 1, inner = 1;
  for (int d = 0; d < axis; d++)
    outer *= t->shape[d];
  for (guint d = axis + 1; d < t->rank; d++)
    inner *= t->shape[d];
  executor_cuda_launch_softmax (stream_of (dev), in_f32 (c, 0), out_f32 (c, 0), outer,
                                t->shape[axis], inner);
  return launched (dev, c, error);
}

static gboolean
k_norm (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  gint64 h = t->shape[t->rank - 1], rows = executor_numel (t) / MAX (h, 1);
  executor_cuda_launch_norm (stream_of (dev), in_f32 (c, 0), c->n_inputs > 1 ? in_f32 (c, 1) : NULL,
                             c->n_inputs > 2 ? in_f32 (c, 2) : NULL, out_f32 (c, 0), rows, h,
                             c->op->attrs.eps, c->op->type == PLANNER_OP_LAYER_NORM);
  return launched (dev, c, error);
}

/* ---- lookups, views, data movement ---- */

static gboolean
k_embedding (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *ids = &c->inputs[0], *table = &c->inputs[1];
  if (ids->dtype != PLANNER_DTYPE_I64)
    return executor_kernel_error (error, c, "ids must be i64");
  /* A vocab-parallel shard answers the ids in its range and zeros elsewhere. */
  executor_cuda_launch_embedding (stream_of (dev), (const gint64 *)ids->buffer->data, in_f32 (c, 1),
                                  out_f32 (c, 0), executor_numel (ids), table->shape[0],
                                  table->shape[1], executor_factor_offset (c, "vocab"));
  return launched (dev, c, error);
}

static gboolean
k_reshape (ExecutorDevice *dev, Call *c, GError **error)
{
  gint64 n = executor_numel (&c->inputs[0]);
  if (n != executor_numel (&c->outputs[0]))
    return executor_kernel_error (error, c, "local input and output sizes differ");
  return copy_bytes (dev, c->outputs[0].buffer->data, c->inputs[0].buffer->data,
                     (gsize)n * executor_storage_size (c->inputs[0].dtype), error);
}

static gboolean
k_transpose (ExecutorDevice *dev, Call *c, GError **error)
{
  guint perm[PLANNER_MAX_RANK];
  for (guint d = 0; d < c->inputs[0].rank; d++)
    perm[d] = (guint)c->op->attrs.ints[d];
  return permute_copy (dev, c->inputs[0].buffer->data, c->inputs[0].shape, c->inputs[0].rank, perm,
                       executor_storage_size (c->inputs[0].dtype), c->outputs[0].buffer->data,
                       error);
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
  gint64 strides[PLANNER_MAX_RANK];
  executor_row_strides (t->shape, t->rank, strides);
  ExecutorCudaWalk kept = { 0 }, red = { 0 };
  for (guint d = 0; d < t->rank; d++)
    {
      ExecutorCudaWalk *w = (reduced >> d) & 1 ? &red : &kept;
      w->shape[w->rank] = t->shape[d];
      w->stride[w->rank++] = strides[d];
    }
  double scale = c->op->type == PLANNER_OP_REDUCE_MEAN ? 1.0 / executor_reduction_count (c) : 1.0;
  executor_cuda_launch_reduce (stream_of (dev), in_f32 (c, 0), out_f32 (c, 0), &kept, &red, scale);
  return launched (dev, c, error);
}

/* Concat and Split move [outer][size_i * inner] blocks along one axis: 2-D copies. */
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
copy_blocks (ExecutorDevice *dev, guint8 *dst, gsize dst_pitch, const guint8 *src, gsize src_pitch,
             gsize width, gint64 height, GError **error)
{
  if (width == 0 || height == 0)
    return TRUE;
  return executor_cuda_ok (cudaMemcpy2DAsync (dst, dst_pitch, src, src_pitch, width, (gsize)height,
                                              cudaMemcpyDeviceToDevice, stream_of (dev)),
                           dev, "a block copy", error);
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
      if (!copy_blocks (dev, o->buffer->data + (gsize)at * es, (gsize)(o->shape[axis] * inner) * es,
                        c->inputs[i].buffer->data, (gsize)len * es, (gsize)len * es, outer, error))
        return FALSE;
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
      if (!copy_blocks (dev, c->outputs[i].buffer->data, (gsize)len * es,
                        t->buffer->data + (gsize)at * es, (gsize)(t->shape[axis] * inner) * es,
                        (gsize)len * es, outer, error))
        return FALSE;
      at += len;
    }
  return TRUE;
}

/* ---- attention ---- */

static gboolean
k_rotary (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *s = c->inputs[0].shape;
  /* The position is the global sequence index. */
  executor_cuda_launch_rotary (stream_of (dev), in_f32 (c, 0), out_f32 (c, 0), s[0] * s[1], s[2],
                               s[3], executor_dim_offset (c, 0, 2), c->op->attrs.theta);
  return launched (dev, c, error);
}

static gboolean
k_sdpa (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *q = c->inputs[0].shape, *k = c->inputs[1].shape, *v = c->inputs[2].shape;
  gint64 sq = q[2], sk = k[2], d = q[3], dv = v[3];
  if (k[1] == 0 || q[1] % k[1] != 0 || k[3] != d)
    return executor_kernel_error (error, c, "local heads or head dims of q, k and v disagree");
  gint64 group = q[1] / k[1], heads = q[0] * q[1];
  double scale = c->op->attrs.scale > 0 ? c->op->attrs.scale : 1.0 / sqrt ((double)d);
  float *scores = executor_cuda_scratch (dev, (gsize)MAX (heads * sq * sk, 1) * 4, error);
  if (scores == NULL)
    return FALSE;
  const float *pq = in_f32 (c, 0), *pk = in_f32 (c, 1), *pv = in_f32 (c, 2);
  float *po = out_f32 (c, 0);
  gboolean ok = TRUE;
  /* Query heads are kv-head major (HF repeat_kv): the @group query heads of one kv head
   * are one strided batch against that head's keys and values. */
  for (gint64 kvh = 0; ok && kvh < q[0] * k[1]; kvh++)
    ok = executor_cuda_gemm (dev, TRUE, sq, sk, d, pq + kvh * group * sq * d, pk + kvh * sk * d,
                             scores + kvh * group * sq * sk, group, sq * d, 0, sq * sk, error);
  if (ok)
    {
      executor_cuda_launch_attention_softmax (stream_of (dev), scores, heads * sq, sq, sk, scale,
                                              c->op->attrs.causal,
                                              executor_factor_offset (c, "sq"));
      ok = launched (dev, c, error);
    }
  for (gint64 kvh = 0; ok && kvh < q[0] * k[1]; kvh++)
    ok = executor_cuda_gemm (dev, FALSE, sq, dv, sk, scores + kvh * group * sq * sk,
                             pv + kvh * sk * dv, po + kvh * group * sq * dv, group, sq * sk, 0,
                             sq * dv, error);
  executor_cuda_scratch_free (dev, scores);
  return ok;
}

static gboolean
k_cross_entropy (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *logits = &c->inputs[0], *labels = &c->inputs[1];
  gint64 v = logits->shape[logits->rank - 1], rows = executor_numel (labels);
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)dev;
  if (labels->dtype != PLANNER_DTYPE_I64)
    return executor_kernel_error (error, c, "labels must be i64");
  double *row_loss = executor_cuda_scratch (dev, (gsize)MAX (rows, 1) * sizeof (double), error);
  if (row_loss == NULL)
    return FALSE;
  int bad = 0;
  gboolean ok = executor_cuda_ok (cudaMemsetAsync (d->flag, 0, sizeof (int), d->stream), dev,
                                  "clearing a flag", error);
  if (ok)
    {
      executor_cuda_launch_cross_entropy (
          d->stream, in_f32 (c, 0), (const gint64 *)labels->buffer->data, row_loss, out_f32 (c, 0),
          rows, v, executor_reduction_count (c), d->flag);
      ok = launched (dev, c, error)
           && executor_cuda_ok (
               cudaMemcpyAsync (&bad, d->flag, sizeof (int), cudaMemcpyDeviceToHost, d->stream),
               dev, "reading a flag", error)
           && executor_cuda_sync (dev, error);
    }
  executor_cuda_scratch_free (dev, row_loss);
  if (ok && bad)
    {
      g_autofree char *msg
          = g_strdup_printf ("a label is outside the %" G_GINT64_FORMAT " classes", v);
      return executor_kernel_error (error, c, msg);
    }
  return ok;
}

const ExecutorKernelFunc executor_cuda_kernels[PLANNER_N_OP_TYPES] = {
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
