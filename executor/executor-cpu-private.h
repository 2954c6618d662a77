/* executor-cpu-private.h: what the CPU backend's files share. */
#pragma once

#include "executor-backend-private.h"

G_BEGIN_DECLS

static inline gint64 *
executor_cpu_i64 (ExecutorBuffer *buffer)
{
  return (gint64 *)buffer->data;
}

/* The reference kernel of every op type (executor-cpu-kernels.c). */
extern const ExecutorKernelFunc executor_cpu_kernels[PLANNER_N_OP_TYPES];

/* C = A[m,k] @ B[k,n] (B given as [n,k] when @trans_b), row-major, one BLAS thread. */
void executor_cpu_gemm (gboolean trans_b, gint64 m, gint64 n, gint64 k, const float *a,
                        const float *b, float *c);

G_END_DECLS
