/* executor-cuda-kernels.h: plain C entry points into executor-cuda-kernels.cu.
 *
 * They queue work on @stream and never synchronize. Shapes and strides arrive precomputed
 * from the rule tables (executor-cuda-ops.c), so the device code holds no planner logic.
 * No GLib here: nvcc compiles this header as C++ and GLib's printf attributes only make it
 * warn.
 */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "executor-kernel-math.h"

#define EXECUTOR_CUDA_MAX_EINSUM_OPS 4
#define EXECUTOR_CUDA_MAX_EINSUM_LETTERS 24

#ifdef __cplusplus
extern "C"
{
#endif

  typedef enum
  {
    EXECUTOR_CUDA_I64_TO_F32,
    EXECUTOR_CUDA_F32_TO_I64,
    EXECUTOR_CUDA_F32_TO_BF16,
    EXECUTOR_CUDA_F32_TO_F16,
  } ExecutorCudaConvert;

  /* One einsum output element per thread: letters [0, n_free) are the output's, in order,
   * the rest are summed; stride[op][letter] walks each operand. */
  typedef struct
  {
    int n_ops;
    int n_free;
    int n_letters;
    int64_t size[EXECUTOR_CUDA_MAX_EINSUM_LETTERS];
    int64_t stride[EXECUTOR_CUDA_MAX_EINSUM_OPS][EXECUTOR_CUDA_MAX_EINSUM_LETTERS];
    int64_t out_stride[EXECUTOR_CUDA_MAX_EINSUM_LETTERS]; /* 0 for summed letters */
    const float *ops[EXECUTOR_CUDA_MAX_EINSUM_OPS];
  } ExecutorCudaEinsum;

  void executor_cuda_launch_gather (cudaStream_t stream, void *dst, const void *src,
                                    unsigned elem_size, const ExecutorWalk *walk);
  void executor_cuda_launch_unary (cudaStream_t stream, ExecutorUnary op, const float *x, float *y,
                                   int64_t n);
  void executor_cuda_launch_convert (cudaStream_t stream, ExecutorCudaConvert kind, const void *x,
                                     void *y, int64_t n);
  /* @a and @b walk the output's shape with their broadcast strides (0 where they broadcast). */
  void executor_cuda_launch_binary (cudaStream_t stream, ExecutorBinary op, const float *a,
                                    const ExecutorWalk *walk_a, const float *b,
                                    const ExecutorWalk *walk_b, float *out);
  void executor_cuda_launch_softmax (cudaStream_t stream, const float *x, float *y, int64_t outer,
                                     int64_t n, int64_t inner);
  /* Rows of @sk scores, @rows_per_head rows a head: scaled, causally masked (query row i sees
   * keys j <= q_first + i), softmax in place. */
  void executor_cuda_launch_attention_softmax (cudaStream_t stream, float *scores, int64_t rows,
                                               int64_t rows_per_head, int64_t sk, double scale,
                                               int causal, int64_t q_first);
  void executor_cuda_launch_norm (cudaStream_t stream, const float *x, const float *gamma,
                                  const float *beta, float *y, int64_t rows, int64_t h, double eps,
                                  int layer);
  void executor_cuda_launch_embedding (cudaStream_t stream, const int64_t *ids, const float *table,
                                       float *out, int64_t n, int64_t v_local, int64_t h,
                                       int64_t first);
  /* out[o] = scale * sum over @reduced of x[kept(o) + reduced(r)]. */
  void executor_cuda_launch_reduce (cudaStream_t stream, const float *x, float *out,
                                    const ExecutorWalk *kept, const ExecutorWalk *reduced,
                                    double scale);
  void executor_cuda_launch_rotary (cudaStream_t stream, const float *x, float *y, int64_t bh,
                                    int64_t s, int64_t d, int64_t first, double theta);
  /* @row_loss: @rows doubles of scratch; @bad: one int set to 1 when a label is out of range. */
  void executor_cuda_launch_cross_entropy (cudaStream_t stream, const float *logits,
                                           const int64_t *labels, double *row_loss, float *out,
                                           int64_t rows, int64_t v, double divisor, int *bad);
  void executor_cuda_launch_conv2d (cudaStream_t stream, const float *x, const float *w,
                                    const float *bias, float *y, const ExecutorConv2d *conv);
  void executor_cuda_launch_einsum (cudaStream_t stream, const ExecutorCudaEinsum *e, float *out,
                                    int64_t n_out);
  void executor_cuda_launch_add_rows (cudaStream_t stream, float *out, int64_t rows,
                                      const float *bias, int64_t n);
  /* dst = src (@first) or dst + src: a sum over ranks in rank order, as the cpu backend. */
  void executor_cuda_launch_accumulate (cudaStream_t stream, float *dst, const float *src,
                                        int64_t n, int first);

#ifdef __cplusplus
}
#endif
