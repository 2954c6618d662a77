/* executor-cuda-kernels.cu: the device kernels of the cuda and nccl backends.
 *
 * Each kernel mirrors one reference kernel of executor-cpu-kernels.c, down to where it
 * accumulates in double, so a shard on the GPU rounds as the CPU reference does: the
 * arithmetic of an element or a row is the reference's own (executor-kernel-math.h). What to
 * compute (local shapes, strides, factor offsets) comes from executor-cuda-ops.c; these
 * only walk memory. config.h is included as in every source file; it is plain #defines and
 * compiles under nvcc.
 */
#include "config.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "executor-cuda-kernels.h"

namespace
{

const int kThreads = 256;

unsigned int
blocks_for (int64_t n)
{
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned int) (b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

/* Grid-stride loop over [0, n). */
#define FOR_EACH(i, n)                                                                        \
  for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < (n);                   \
       i += (int64_t) gridDim.x * blockDim.x)

__device__ int64_t
walk_offset (const ExecutorWalk &w, int64_t i)
{
  int64_t off = 0;
  for (int d = w.rank - 1; d >= 0; d--)
    {
      int64_t idx = i % w.shape[d];
      i /= w.shape[d];
      off += idx * w.stride[d];
    }
  return off;
}

template <typename T>
__global__ void
gather_kernel (T *dst, const T *src, ExecutorWalk walk, int64_t n)
{
  FOR_EACH (i, n)
    dst[i] = src[walk_offset (walk, i)];
}

__global__ void
unary_kernel (ExecutorUnary op, const float *x, float *y, int64_t n)
{
  FOR_EACH (i, n)
    y[i] = executor_math_unary (op, x[i]);
}

__global__ void
convert_kernel (ExecutorCudaConvert kind, const void *x, void *y, int64_t n)
{
  FOR_EACH (i, n)
    switch (kind)
      {
      case EXECUTOR_CUDA_I64_TO_F32: ((float *) y)[i] = (float) ((const int64_t *) x)[i]; break;
      case EXECUTOR_CUDA_F32_TO_I64: ((int64_t *) y)[i] = (int64_t) ((const float *) x)[i]; break;
      case EXECUTOR_CUDA_F32_TO_BF16:
        ((__nv_bfloat16 *) y)[i] = __float2bfloat16 (((const float *) x)[i]);
        break;
      case EXECUTOR_CUDA_F32_TO_F16:
        ((__half *) y)[i] = __float2half (((const float *) x)[i]);
        break;
      }
}

__global__ void
binary_kernel (ExecutorBinary op, const float *a, ExecutorWalk wa, const float *b,
               ExecutorWalk wb, float *out, int64_t n)
{
  FOR_EACH (i, n)
    out[i] = executor_math_binary (op, a[walk_offset (wa, i)], b[walk_offset (wb, i)]);
}

/* One thread per softmax row, as the reference. */
__global__ void
softmax_kernel (const float *x, float *y, int64_t outer, int64_t n, int64_t inner)
{
  FOR_EACH (r, outer * inner)
    {
      int64_t o = r / inner, i = r % inner;
      executor_math_softmax (x + o * n * inner + i, y + o * n * inner + i, n, inner);
    }
}

__global__ void
attention_softmax_kernel (float *scores, int64_t rows, int64_t rows_per_head, int64_t sk,
                          float scale, bool causal, int64_t q_first)
{
  FOR_EACH (r, rows)
    executor_math_attention_row (scores + r * sk, sk, scale, causal, q_first + r % rows_per_head);
}

__global__ void
norm_kernel (const float *x, const float *gamma, const float *beta, float *y, int64_t rows,
             int64_t h, double eps, bool layer)
{
  FOR_EACH (r, rows)
    executor_math_norm_row (x + r * h, y + r * h, h, gamma, beta, eps, layer);
}

__global__ void
embedding_kernel (const int64_t *ids, const float *table, float *out, int64_t n, int64_t v_local,
                  int64_t h, int64_t first)
{
  FOR_EACH (e, n * h)
    {
      int64_t i = e / h, j = e % h, row = ids[i] - first;
      out[e] = row >= 0 && row < v_local ? table[row * h + j] : 0.0f;
    }
}

__global__ void
reduce_kernel (const float *x, float *out, ExecutorWalk kept, ExecutorWalk reduced,
               int64_t n_out, int64_t n_red, double scale)
{
  FOR_EACH (o, n_out)
    {
      int64_t base = walk_offset (kept, o);
      double sum = 0;
      for (int64_t r = 0; r < n_red; r++)
        sum += x[base + walk_offset (reduced, r)];
      out[o] = (float) (sum * scale);
    }
}

__global__ void
rotary_kernel (const float *x, float *y, int64_t bh, int64_t s, int64_t d, int64_t first,
               double theta)
{
  int64_t half = d / 2;
  FOR_EACH (e, bh * s * half)
    {
      int64_t i = e % half, row = e / half, p = row % s;
      executor_math_rotary_pair (x + row * d, y + row * d, i, d, (double) (first + p), theta);
    }
}

__global__ void
cross_entropy_rows_kernel (const float *logits, const int64_t *labels, double *row_loss,
                           int64_t rows, int64_t v, int *bad)
{
  FOR_EACH (r, rows)
    {
      if (labels[r] < 0 || labels[r] >= v)
        {
          *bad = 1;
          row_loss[r] = 0;
          continue;
        }
      row_loss[r] = executor_math_cross_entropy_row (logits + r * v, v, labels[r]);
    }
}

/* One thread: the rows in order, as the reference sums them. */
__global__ void
cross_entropy_total_kernel (const double *row_loss, float *out, int64_t rows, double divisor)
{
  double total = 0;
  for (int64_t r = 0; r < rows; r++)
    total += row_loss[r];
  out[0] = (float) (total / divisor);
}

__global__ void
conv2d_kernel (const float *px, const float *pk, const float *bias, float *po, ExecutorConv2d c)
{
  FOR_EACH (e, c.y[0] * c.y[1] * c.y[2] * c.y[3])
    po[e] = executor_math_conv2d_at (px, pk, bias, &c, e);
}

__global__ void
einsum_kernel (ExecutorCudaEinsum e, float *out, int64_t n_out)
{
  FOR_EACH (o, n_out)
    {
      int64_t idx[EXECUTOR_CUDA_MAX_EINSUM_LETTERS];
      int64_t rest = o, n_inner = 1, out_off = 0;
      for (int l = e.n_free - 1; l >= 0; l--)
        {
          idx[l] = rest % e.size[l];
          rest /= e.size[l];
          out_off += idx[l] * e.out_stride[l];
        }
      for (int l = e.n_free; l < e.n_letters; l++)
        {
          idx[l] = 0;
          n_inner *= e.size[l];
        }
      double acc = 0;
      for (int64_t r = 0; r < n_inner; r++)
        {
          double prod = 1;
          for (int i = 0; i < e.n_ops; i++)
            {
              int64_t off = 0;
              for (int l = 0; l < e.n_letters; l++)
                off += idx[l] * e.stride[i][l];
              prod *= e.ops[i][off];
            }
          acc += prod;
          for (int l = e.n_letters - 1; l >= e.n_free; l--)
            {
              if (++idx[l] < e.size[l])
                break;
              idx[l] = 0;
            }
        }
      out[out_off] = (float) acc;
    }
}

__global__ void
add_rows_kernel (float *out, int64_t rows, const float *bias, int64_t n)
{
  FOR_EACH (e, rows * n)
    out[e] += bias[e % n];
}

__global__ void
accumulate_kernel (float *dst, const float *src, int64_t n, bool first)
{
  FOR_EACH (i, n)
    dst[i] = first ? 0.0f + src[i] : dst[i] + src[i];
}

} // namespace

extern "C" {

void
executor_cuda_launch_gather (cudaStream_t stream, void *dst, const void *src, unsigned elem_size,
                             const ExecutorWalk *walk)
{
  int64_t n = 1;
  for (int d = 0; d < walk->rank; d++)
    n *= walk->shape[d];
  if (n == 0)
    return;
  if (elem_size == 8)
    gather_kernel<<<blocks_for (n), kThreads, 0, stream>>> ((int64_t *) dst, (const int64_t *) src,
                                                            *walk, n);
  else
    gather_kernel<<<blocks_for (n), kThreads, 0, stream>>> ((float *) dst, (const float *) src,
                                                            *walk, n);
}

void
executor_cuda_launch_unary (cudaStream_t stream, ExecutorUnary op, const float *x, float *y,
                            int64_t n)
{
  if (n > 0)
    unary_kernel<<<blocks_for (n), kThreads, 0, stream>>> (op, x, y, n);
}

void
executor_cuda_launch_convert (cudaStream_t stream, ExecutorCudaConvert kind, const void *x,
                              void *y, int64_t n)
{
  if (n > 0)
    convert_kernel<<<blocks_for (n), kThreads, 0, stream>>> (kind, x, y, n);
}

void
executor_cuda_launch_binary (cudaStream_t stream, ExecutorBinary op, const float *a,
                             const ExecutorWalk *walk_a, const float *b,
                             const ExecutorWalk *walk_b, float *out)
{
  int64_t n = 1;
  for (int d = 0; d < walk_a->rank; d++)
    n *= walk_a->shape[d];
  if (n > 0)
    binary_kernel<<<blocks_for (n), kThreads, 0, stream>>> (op, a, *walk_a, b, *walk_b, out, n);
}

void
executor_cuda_launch_softmax (cudaStream_t stream, const float *x, float *y, int64_t outer,
                              int64_t n, int64_t inner)
{
  if (outer * inner > 0 && n > 0)
    softmax_kernel<<<blocks_for (outer * inner), kThreads, 0, stream>>> (x, y, outer, n, inner);
}

void
executor_cuda_launch_attention_softmax (cudaStream_t stream, float *scores, int64_t rows,
                                        int64_t rows_per_head, int64_t sk, double scale,
                                        int causal, int64_t q_first)
{
  if (rows > 0 && sk > 0)
    attention_softmax_kernel<<<blocks_for (rows), kThreads, 0, stream>>> (
      scores, rows, rows_per_head, sk, (float) scale, causal != 0, q_first);
}

void
executor_cuda_launch_norm (cudaStream_t stream, const float *x, const float *gamma,
                           const float *beta, float *y, int64_t rows, int64_t h, double eps,
                           int layer)
{
  if (rows > 0 && h > 0)
    norm_kernel<<<blocks_for (rows), kThreads, 0, stream>>> (x, gamma, beta, y, rows, h, eps,
                                                             layer != 0);
}

void
executor_cuda_launch_embedding (cudaStream_t stream, const int64_t *ids, const float *table,
                                float *out, int64_t n, int64_t v_local, int64_t h, int64_t first)
{
  if (n * h > 0)
    embedding_kernel<<<blocks_for (n * h), kThreads, 0, stream>>> (ids, table, out, n, v_local,
                                                                   h, first);
}

void
executor_cuda_launch_reduce (cudaStream_t stream, const float *x, float *out,
                             const ExecutorWalk *kept, const ExecutorWalk *reduced,
                             double scale)
{
  int64_t n_out = 1, n_red = 1;
  for (int d = 0; d < kept->rank; d++)
    n_out *= kept->shape[d];
  for (int d = 0; d < reduced->rank; d++)
    n_red *= reduced->shape[d];
  if (n_out > 0)
    reduce_kernel<<<blocks_for (n_out), kThreads, 0, stream>>> (x, out, *kept, *reduced, n_out,
                                                                n_red, scale);
}

void
executor_cuda_launch_rotary (cudaStream_t stream, const float *x, float *y, int64_t bh, int64_t s,
                             int64_t d, int64_t first, double theta)
{
  int64_t n = bh * s * (d / 2);
  if (n > 0)
    rotary_kernel<<<blocks_for (n), kThreads, 0, stream>>> (x, y, bh, s, d, first, theta);
}

void
executor_cuda_launch_cross_entropy (cudaStream_t stream, const float *logits,
                                    const int64_t *labels, double *row_loss, float *out,
                                    int64_t rows, int64_t v, double divisor, int *bad)
{
  if (rows > 0)
    cross_entropy_rows_kernel<<<blocks_for (rows), kThreads, 0, stream>>> (logits, labels,
                                                                           row_loss, rows, v,
                                                                           bad);
  cross_entropy_total_kernel<<<1, 1, 0, stream>>> (row_loss, out, rows, divisor);
}

void
executor_cuda_launch_conv2d (cudaStream_t stream, const float *x, const float *w,
                             const float *bias, float *y, const ExecutorConv2d *conv)
{
  int64_t n = conv->y[0] * conv->y[1] * conv->y[2] * conv->y[3];
  if (n > 0)
    conv2d_kernel<<<blocks_for (n), kThreads, 0, stream>>> (x, w, bias, y, *conv);
}

void
executor_cuda_launch_einsum (cudaStream_t stream, const ExecutorCudaEinsum *e, float *out,
                             int64_t n_out)
{
  if (n_out > 0)
    einsum_kernel<<<blocks_for (n_out), kThreads, 0, stream>>> (*e, out, n_out);
}

void
executor_cuda_launch_add_rows (cudaStream_t stream, float *out, int64_t rows, const float *bias,
                               int64_t n)
{
  if (rows * n > 0)
    add_rows_kernel<<<blocks_for (rows * n), kThreads, 0, stream>>> (out, rows, bias, n);
}

void
executor_cuda_launch_accumulate (cudaStream_t stream, float *dst, const float *src, int64_t n,
                                 int first)
{
  if (n > 0)
    accumulate_kernel<<<blocks_for (n), kThreads, 0, stream>>> (dst, src, n, first != 0);
}

} // extern "C"
