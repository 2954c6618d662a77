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

static gboolean
launched (ExecutorDevice *dev, Call *c, GError **error)
{
  return executor_cuda_launched (dev, c->op->name, error);
}

/* dst dim i = src dim perm[i]. */
static gboolean
permute_copy (ExecutorDevice *dev, const void *src, const gint64 *src_shape, guint rank,
              const guint *perm, guint es, void *dst, GError **error)
{
  ExecutorWalk w;
  if (executor_permute_walk (src_shape, rank, perm, &w))
    return executor_cuda_copy (dev, dst, src, (gsize)executor_walk_numel (&w) * es, error);
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
  gint64 m, n, k;
  if (!executor_matmul_dims (c, &m, &n, &k, error)
      || !executor_cuda_gemm (dev, c->op->attrs.transpose_b, m, n, k, executor_in_f32 (c, 0),
                              executor_in_f32 (c, 1), executor_out_f32 (c, 0), 1, 0, 0, 0, error))
    return FALSE;
  if (c->n_inputs == 3 && c->add_bias)
    return add_bias_rows (dev, c, executor_out_f32 (c, 0), m, executor_in_f32 (c, 2), n, error);
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
  /* The innermost batch dim is one strided-batched call; the outer ones loop. */
  for (gint64 o = 0; o < bg.n_outer; o++)
    {
      gint64 ia, ib;
      executor_batch_gemm_offsets (&bg, o, &ia, &ib);
      if (!executor_cuda_gemm (dev, FALSE, bg.m, bg.n, bg.k, pa + ia, pb + ib,
                               po + o * bg.n_inner * bg.m * bg.n, bg.n_inner, bg.stride_a,
                               bg.stride_b, bg.m * bg.n, error))
        return FALSE;
    }
  return TRUE;
}

/* Any einsum, one output element per thread: the fallback for shapes the GEMM path does
 * not cover. */
static gboolean
einsum_naive (ExecutorDevice *dev, Call *c, const ExecutorEquation *eq, float *out, GError **error)
{
  ExecutorEinsumIndex ix;
  executor_einsum_index (c, eq, &ix);
  if (eq->n_ops > EXECUTOR_CUDA_MAX_EINSUM_OPS || ix.n_letters > EXECUTOR_CUDA_MAX_EINSUM_LETTERS)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "%s (Einsum): the cuda backend sums at most %d operands over %d letters",
                   c->op->name, EXECUTOR_CUDA_MAX_EINSUM_OPS, EXECUTOR_CUDA_MAX_EINSUM_LETTERS);
      return FALSE;
    }
  ExecutorCudaEinsum e;
  memset (&e, 0, sizeof e);
  e.n_ops = (int)eq->n_ops;
  e.n_free = (int)ix.n_free;
  e.n_letters = (int)ix.n_letters;
  gint64 n_total = 1;
  for (guint l = 0; l < ix.n_letters; l++)
    {
      e.size[l] = ix.size[l];
      e.out_stride[l] = ix.out_stride[l];
      for (guint i = 0; i < eq->n_ops; i++)
        e.stride[i][l] = ix.stride[i][l];
      if (l < ix.n_free)
        n_total *= ix.size[l];
    }
  for (guint i = 0; i < eq->n_ops; i++)
    e.ops[i] = executor_in_f32 (c, i);
  executor_cuda_launch_einsum (stream_of (dev), &e, out, n_total);
  return launched (dev, c, error);
}

static gboolean
einsum_gemm (ExecutorDevice *dev, Call *c, const ExecutorEinsumGemm *plan, float *out,
             GError **error)
{
  const float *pa = executor_in_f32 (c, 0), *pb = executor_in_f32 (c, 1);
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
  float *out = executor_out_f32 (c, 0);
  gboolean ok = executor_einsum_gemm_plan (&eq, &plan) ? einsum_gemm (dev, c, &plan, out, error)
                                                       : einsum_naive (dev, c, &eq, out, error);
  if (ok && c->n_inputs == eq.n_ops + 1 && c->add_bias)
    {
      gint64 nb = executor_numel (&c->inputs[eq.n_ops]);
      ok = add_bias_rows (dev, c, out, executor_numel (&c->outputs[0]) / MAX (nb, 1),
                          executor_in_f32 (c, eq.n_ops), nb, error);
    }
  return ok;
}

static gboolean
k_conv2d (ExecutorDevice *dev, Call *c, GError **error)
{
  ExecutorConv2d conv;
  if (!executor_conv2d_dims (c, &conv, error))
    return FALSE;
  executor_cuda_launch_conv2d (stream_of (dev), executor_in_f32 (c, 0), executor_in_f32 (c, 1),
                               c->n_inputs == 3 && c->add_bias ? executor_in_f32 (c, 2) : NULL,
                               executor_out_f32 (c, 0), &conv);
  return launched (dev, c, error);
}

/* ---- elementwise ---- */

static gboolean
k_binary (ExecutorDevice *dev, Call *c, GError **error)
{
  ExecutorWalk wa, wb;
  if (!executor_broadcast_walk (&c->inputs[0], &c->outputs[0], &wa)
      || !executor_broadcast_walk (&c->inputs[1], &c->outputs[0], &wb))
    return executor_kernel_error (error, c, "local shapes do not broadcast");
  executor_cuda_launch_binary (stream_of (dev), executor_binary_of (c->op), executor_in_f32 (c, 0),
                               &wa, executor_in_f32 (c, 1), &wb, executor_out_f32 (c, 0));
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
        return executor_cuda_copy (dev, o->buffer->data, in->buffer->data, (gsize)n * 8, error);
      executor_cuda_launch_convert (
          s, in->dtype == PLANNER_DTYPE_I64 ? EXECUTOR_CUDA_I64_TO_F32 : EXECUTOR_CUDA_F32_TO_I64,
          in->buffer->data, o->buffer->data, n);
      return launched (dev, c, error);
    }
  ExecutorUnary op = executor_unary_of (c->op);
  if (op == EXECUTOR_UNARY_COPY)
    return executor_cuda_copy (dev, executor_out_f32 (c, 0), executor_in_f32 (c, 0),
                               (gsize)n * sizeof (float), error);
  executor_cuda_launch_unary (s, op, executor_in_f32 (c, 0), executor_out_f32 (c, 0), n);
  return launched (dev, c, error);
}

static gboolean
k_softmax (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  int axis = executor_norm_axis (c->op->attrs.axis, t->rank);
  gint64 outer, inner;
  executor_axis_blocks (t, axis, &outer, &inner);
  executor_cuda_launch_softmax (stream_of (dev), executor_in_f32 (c, 0), executor_out_f32 (c, 0),
                                outer, t->shape[axis], inner);
  return launched (dev, c, error);
}

static gboolean
k_norm (ExecutorDevice *dev, Call *c, GError **error)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  gint64 h = t->shape[t->rank - 1], rows = executor_numel (t) / MAX (h, 1);
  executor_cuda_launch_norm (
      stream_of (dev), executor_in_f32 (c, 0), c->n_inputs > 1 ? executor_in_f32 (c, 1) : NULL,
      c->n_inputs > 2 ? executor_in_f32 (c, 2) : NULL, executor_out_f32 (c, 0), rows, h,
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
  executor_cuda_launch_embedding (stream_of (dev), (const gint64 *)ids->buffer->data,
                                  executor_in_f32 (c, 1), executor_out_f32 (c, 0),
                                  executor_numel (ids), table->shape[0], table->shape[1],
                                  executor_factor_offset (c, "vocab"));
  return launched (dev, c, error);
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
  guint32 reduced = executor_reduced_dims (c);
  gint64 strides[PLANNER_MAX_RANK];
  executor_row_strides (t->shape, t->rank, strides);
  ExecutorWalk kept = { 0 }, red = { 0 };
  for (guint d = 0; d < t->rank; d++)
    {
      ExecutorWalk *w = (reduced >> d) & 1 ? &red : &kept;
      w->shape[w->rank] = t->shape[d];
      w->stride[w->rank++] = strides[d];
    }
  double scale = c->op->type == PLANNER_OP_REDUCE_MEAN ? 1.0 / executor_reduction_count (c) : 1.0;
  executor_cuda_launch_reduce (stream_of (dev), executor_in_f32 (c, 0), executor_out_f32 (c, 0),
                               &kept, &red, scale);
  return launched (dev, c, error);
}

/* ---- attention ---- */

static gboolean
k_rotary (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *s = c->inputs[0].shape;
  if (c->op->attrs.variant == 1)
    return executor_kernel_error (error, c,
                                  "Llama 3's scaled rotary frequencies (rope_type llama3) have a "
                                  "CPU kernel only; use the cpu backend");
  /* The position is the global sequence index. */
  executor_cuda_launch_rotary (stream_of (dev), executor_in_f32 (c, 0), executor_out_f32 (c, 0),
                               s[0] * s[1], s[2], s[3], executor_dim_offset (c, 0, 2),
                               c->op->attrs.theta);
  return launched (dev, c, error);
}

static gboolean
k_sdpa (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 *q = c->inputs[0].shape, *k = c->inputs[1].shape;
  ExecutorSdpa s;
  if (!executor_sdpa_dims (c, &s, error))
    return FALSE;
  if (c->n_inputs == 4)
    return executor_kernel_error (error, c,
                                  "a score bias (T5's relative positions) has a CPU kernel only; "
                                  "use the cpu backend");
  if (s.alibi)
    return executor_kernel_error (error, c,
                                  "ALiBi attention (BLOOM) has a CPU kernel only; use the cpu "
                                  "backend");
  gint64 sq = s.sq, sk = s.sk, d = s.d, dv = s.dv, group = s.group, heads = q[0] * q[1];
  float *scores = executor_cuda_scratch (dev, (gsize)MAX (heads * sq * sk, 1) * 4, error);
  if (scores == NULL)
    return FALSE;
  const float *pq = executor_in_f32 (c, 0), *pk = executor_in_f32 (c, 1),
              *pv = executor_in_f32 (c, 2);
  float *po = executor_out_f32 (c, 0);
  gboolean ok = TRUE;
  /* The @group query heads of one kv head are one strided batch against that head's keys
   * and values. */
  for (gint64 kvh = 0; ok && kvh < q[0] * k[1]; kvh++)
    ok = executor_cuda_gemm (dev, TRUE, sq, sk, d, pq + kvh * group * sq * d, pk + kvh * sk * d,
                             scores + kvh * group * sq * sk, group, sq * d, 0, sq * sk, error);
  if (ok)
    {
      executor_cuda_launch_attention_softmax (stream_of (dev), scores, heads * sq, sq, sk, s.scale,
                                              c->op->attrs.causal, s.q_first);
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
          d->stream, executor_in_f32 (c, 0), (const gint64 *)labels->buffer->data, row_loss,
          executor_out_f32 (c, 0), rows, v, executor_reduction_count (c), d->flag);
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

/* Mixture of experts: no CUDA kernels yet; such a plan is refused by op name. */
#define k_sigmoid executor_kernel_not_on_backend
#define k_moe_router executor_kernel_not_on_backend
#define k_moe_dispatch executor_kernel_not_on_backend
#define k_moe_combine executor_kernel_not_on_backend

const ExecutorKernelFunc executor_cuda_kernels[PLANNER_N_OP_TYPES] = EXECUTOR_KERNEL_TABLE;
