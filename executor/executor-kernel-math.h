/* executor-kernel-math.h: what the cpu reference kernels (executor-cpu-kernels.c) and the
 * cuda device kernels (executor-cuda-kernels.cu) share, compiled by cc and by nvcc alike: a
 * strided walk over a tensor, the element-wise op codes, a Conv2d's shapes, and the
 * arithmetic of one element or one row of an op. Written once, so a shard on the GPU rounds
 * as the CPU reference does: float maxima, sums in double, the same expressions in the same
 * order.
 *
 * Plain C on <stdint.h> and <math.h>: no GLib, whose printf attributes nvcc's C++ warns
 * about.
 */
#pragma once

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define EXECUTOR_MATH_FN static __host__ __device__ inline
#else
#define EXECUTOR_MATH_FN static inline
#endif

#define EXECUTOR_MAX_RANK 8 /* PLANNER_MAX_RANK */

#ifdef __cplusplus
extern "C"
{
#endif

  /* A strided walk: element i of a dense tensor of @shape sits at sum idx[d] * stride[d] of
   * the source. */
  typedef struct
  {
    int rank;
    int64_t shape[EXECUTOR_MAX_RANK];
    int64_t stride[EXECUTOR_MAX_RANK];
  } ExecutorWalk;

  /* Element-wise ops; COPY is Cast between float dtypes and Dropout (identity in a forward
   * trial). */
  typedef enum
  {
    EXECUTOR_UNARY_COPY,
    EXECUTOR_UNARY_RELU,
    EXECUTOR_UNARY_GELU_ERF,
    EXECUTOR_UNARY_GELU_TANH,
    EXECUTOR_UNARY_SILU,
    EXECUTOR_UNARY_TANH,
    EXECUTOR_UNARY_EXP,
    EXECUTOR_UNARY_NEG,
  } ExecutorUnary;

  typedef enum
  {
    EXECUTOR_BINARY_ADD,
    EXECUTOR_BINARY_SUB,
    EXECUTOR_BINARY_MUL,
    EXECUTOR_BINARY_DIV,
  } ExecutorBinary;

  /* Conv2d, NCHW: x [n, c, h, w], kernel [oc, c, kh, kw], y [n, oc, oh, ow]. */
  typedef struct
  {
    int64_t x[4], w[4], y[4];
    int64_t sh, sw, ph, pw; /* strides and paddings */
  } ExecutorConv2d;

  EXECUTOR_MATH_FN float
  executor_math_unary (ExecutorUnary op, float v)
  {
    switch (op)
      {
      case EXECUTOR_UNARY_RELU:
        return v > 0 ? v : 0;
      case EXECUTOR_UNARY_GELU_ERF:
        return 0.5f * v * (1.0f + erff (v * 0.7071067811865476f));
      case EXECUTOR_UNARY_GELU_TANH:
        return 0.5f * v * (1.0f + tanhf (0.7978845608028654f * (v + 0.044715f * v * v * v)));
      case EXECUTOR_UNARY_SILU:
        return v / (1.0f + expf (-v));
      case EXECUTOR_UNARY_TANH:
        return tanhf (v);
      case EXECUTOR_UNARY_EXP:
        return expf (v);
      case EXECUTOR_UNARY_NEG:
        return -v;
      default:
        return v;
      }
  }

  EXECUTOR_MATH_FN float
  executor_math_binary (ExecutorBinary op, float x, float y)
  {
    return op == EXECUTOR_BINARY_ADD   ? x + y
           : op == EXECUTOR_BINARY_SUB ? x - y
           : op == EXECUTOR_BINARY_MUL ? x * y
                                       : x / y;
  }

  /* Softmax of @n elements @stride apart. */
  EXECUTOR_MATH_FN void
  executor_math_softmax (const float *px, float *py, int64_t n, int64_t stride)
  {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++)
      mx = mx > px[j * stride] ? mx : px[j * stride];
    double sum = 0;
    for (int64_t j = 0; j < n; j++)
      sum += py[j * stride] = expf (px[j * stride] - mx);
    for (int64_t j = 0; j < n; j++)
      py[j * stride] = (float)(py[j * stride] / sum);
  }

  /* One row of @sk attention scores, in place: scaled, causally masked (aligned top-left as
   * PyTorch's is_causal: the query at global position @q_pos sees keys j <= q_pos; the keys
   * are never split), softmax. */
  EXECUTOR_MATH_FN void
  executor_math_attention_row (float *row, int64_t sk, float scale, int causal, int64_t q_pos)
  {
    int64_t last = causal && q_pos < sk - 1 ? q_pos : sk - 1;
    float mx = -INFINITY;
    for (int64_t j = 0; j <= last; j++)
      mx = mx > row[j] * scale ? mx : row[j] * scale;
    double sum = 0;
    for (int64_t j = 0; j <= last; j++)
      sum += row[j] = expf (row[j] * scale - mx);
    for (int64_t j = 0; j < sk; j++)
      row[j] = j <= last ? (float)(row[j] / sum) : 0.0f;
  }

  /* LayerNorm (@layer) or RMSNorm of one row of @h; @gamma and @beta may be NULL. */
  EXECUTOR_MATH_FN void
  executor_math_norm_row (const float *px, float *py, int64_t h, const float *gamma,
                          const float *beta, double eps, int layer)
  {
    double mean = 0, sq = 0;
    if (layer)
      {
        for (int64_t j = 0; j < h; j++)
          mean += px[j];
        mean /= (double)h;
      }
    for (int64_t j = 0; j < h; j++)
      sq += (px[j] - mean) * (px[j] - mean);
    double inv = 1.0 / sqrt (sq / (double)h + eps);
    for (int64_t j = 0; j < h; j++)
      {
        double v = (px[j] - mean) * inv;
        if (gamma)
          v *= gamma[j];
        if (beta)
          v += beta[j];
        py[j] = (float)v;
      }
  }

  /* Hugging Face's rotate_half on the pair (i, i + d/2) of a row of @d at global sequence
   * position @pos: angle pos * theta^(-2i/d). */
  EXECUTOR_MATH_FN void
  executor_math_rotary_pair (const float *px, float *py, int64_t i, int64_t d, double pos,
                             double theta)
  {
    int64_t half = d / 2;
    double angle = pos * pow (theta, -2.0 * (double)i / (double)d);
    double cs = cos (angle), sn = sin (angle);
    py[i] = (float)(px[i] * cs - px[i + half] * sn);
    py[i + half] = (float)(px[i + half] * cs + px[i] * sn);
  }

  /* -log softmax(row)[label] of a row of @v logits. */
  EXECUTOR_MATH_FN double
  executor_math_cross_entropy_row (const float *row, int64_t v, int64_t label)
  {
    float mx = -INFINITY;
    for (int64_t j = 0; j < v; j++)
      mx = mx > row[j] ? mx : row[j];
    double sum = 0;
    for (int64_t j = 0; j < v; j++)
      sum += exp ((double)(row[j] - mx));
    return log (sum) + mx - row[label];
  }

  /* Output element @e (row-major over c->y) of a Conv2d; @bias may be NULL. */
  EXECUTOR_MATH_FN float
  executor_math_conv2d_at (const float *px, const float *pk, const float *bias,
                           const ExecutorConv2d *c, int64_t e)
  {
    int64_t j = e % c->y[3], i = (e / c->y[3]) % c->y[2], oc = (e / (c->y[3] * c->y[2])) % c->y[1],
            n = e / (c->y[3] * c->y[2] * c->y[1]);
    double acc = bias ? bias[oc] : 0;
    for (int64_t ic = 0; ic < c->x[1]; ic++)
      for (int64_t u = 0; u < c->w[2]; u++)
        {
          int64_t yi = i * c->sh - c->ph + u;
          if (yi < 0 || yi >= c->x[2])
            continue;
          for (int64_t v = 0; v < c->w[3]; v++)
            {
              int64_t xj = j * c->sw - c->pw + v;
              if (xj < 0 || xj >= c->x[3])
                continue;
              acc += (double)px[((n * c->x[1] + ic) * c->x[2] + yi) * c->x[3] + xj]
                     * pk[((oc * c->w[1] + ic) * c->w[2] + u) * c->w[3] + v];
            }
        }
    return (float)acc;
  }

#ifdef __cplusplus
}
#endif
