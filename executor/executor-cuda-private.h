/* executor-cuda-private.h: what the cuda and nccl backends share (executor-cuda.c, the op
 * kernels in executor-cuda-ops.c, executor-nccl.c). CUDA and cuBLAS status codes stay in
 * these files and leave them as EXECUTOR_ERROR (style.md 7).
 *
 * A device is a CUDA stream with its own allocation pool and cuBLAS handle, driven by one
 * host thread; the cuda backend puts every device on one GPU (virtual devices), the nccl
 * backend one device on each GPU.
 */
#pragma once

#include <cublas_v2.h>

#include "executor-backend-private.h"
#include "executor-cuda-kernels.h"
#include "executor-spmd.h"

G_BEGIN_DECLS

/* What cuBLAS multiplies in; tensors are stored as f32 either way and accumulated in f32. */
typedef enum
{
  EXECUTOR_CUDA_GEMM_F32,
  EXECUTOR_CUDA_GEMM_BF16,
  EXECUTOR_CUDA_GEMM_F16,
} ExecutorCudaGemmType;

typedef struct
{
  ExecutorDevice base;
  int ordinal; /* the GPU; -1 for a device another process runs (MPI) */
  cudaStream_t stream;
  cudaMemPool_t pool;
  cublasHandle_t blas;
  cudaEvent_t timer_start, timer_stop;
  /* Collectives between virtual devices: recorded at each stage, peers' streams wait on it. */
  cudaEvent_t stage_events[EXECUTOR_SPMD_N_STAGES];
  int *flag; /* one device int kernels report through */
} ExecutorCudaDevice;

typedef struct
{
  ExecutorBackend base;
  ExecutorSpmd spmd; /* threads, barriers an abort opens, the first error, the axis groups */
  ExecutorBarrier *world;
  ExecutorCudaGemmType gemm_type;
  gboolean virtual_devices; /* every device on one GPU */
} ExecutorCudaBackend;

/* How many GPUs answer; 0 with EXECUTOR_ERROR_NO_DEVICE ("no CUDA device: <reason>"). */
int executor_cuda_device_count (GError **error);

/* Fills what both backends share: buffers, copies, kernels, timers, barrier, run. */
void executor_cuda_class_fill (ExecutorBackendClass *klass);
/* Sets up @self (allocated by the caller, @device_size bytes per device so a backend can
 * extend ExecutorCudaDevice): @virtual_devices puts every device on GPU @gpu, otherwise
 * device i uses GPU i. Devices for which @is_local answers FALSE (another MPI rank's) get
 * no CUDA resources. */
gboolean executor_cuda_backend_setup (ExecutorCudaBackend *self, const ExecutorBackendClass *klass,
                                      const PlannerMesh *mesh, gboolean virtual_devices, int gpu,
                                      gsize device_size,
                                      gboolean (*is_local) (guint index, gpointer data),
                                      gpointer data, GError **error);
void executor_cuda_backend_teardown (ExecutorCudaBackend *self);
/* Runs @func on the local devices. */
gboolean executor_cuda_backend_run_local (ExecutorCudaBackend *self, ExecutorDeviceFunc func,
                                          gpointer user_data, GError **error);

/* FALSE with EXECUTOR_ERROR_FAILED naming the device, the GPU, what failed and why. */
gboolean executor_cuda_ok (cudaError_t status, ExecutorDevice *device, const char *what,
                           GError **error);
/* After a kernel launch: a bad launch configuration is reported here. */
gboolean executor_cuda_launched (ExecutorDevice *device, const char *what, GError **error);
gboolean executor_cuda_sync (ExecutorDevice *device, GError **error);
/* A device-to-device copy on the device's stream. */
gboolean executor_cuda_copy (ExecutorDevice *device, void *dst, const void *src, gsize bytes,
                             GError **error);
/* Stream-ordered scratch from the device's pool; free it with executor_cuda_scratch_free. */
void *executor_cuda_scratch (ExecutorDevice *device, gsize bytes, GError **error);
void executor_cuda_scratch_free (ExecutorDevice *device, void *ptr);

/* C[i] = A[i] @ B[i] for i < @batch, row-major, B given as [n, k] when @trans_b; operands
 * @stride_* elements apart (0: shared by every i). f32 in and out; bf16/f16 (the backend's
 * gemm type) convert A and B and accumulate in f32. */
gboolean executor_cuda_gemm (ExecutorDevice *device, gboolean trans_b, gint64 m, gint64 n, gint64 k,
                             const float *a, const float *b, float *c, gint64 batch,
                             gint64 stride_a, gint64 stride_b, gint64 stride_c, GError **error);
/* The same with an explicit type (benchmarks). */
gboolean executor_cuda_gemm_typed (ExecutorDevice *device, ExecutorCudaGemmType type,
                                   gboolean trans_b, gint64 m, gint64 n, gint64 k, const float *a,
                                   const float *b, float *c, gint64 batch, gint64 stride_a,
                                   gint64 stride_b, gint64 stride_c, GError **error);

/* The kernel of every op type (executor-cuda-ops.c). */
extern const ExecutorKernelFunc executor_cuda_kernels[PLANNER_N_OP_TYPES];

G_END_DECLS
