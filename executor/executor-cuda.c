#define G_LOG_DOMAIN "executor-cuda"

#include "config.h"

#include <string.h>

#include "executor-cuda-private.h"
#include "executor-error.h"
#include "planner-redistribute.h"

/* The cuda backend: N virtual devices on one GPU, each a stream with its own allocation pool
 * and cuBLAS handle, driven by its own host thread. Collectives between virtual devices are
 * device-to-device copies and reduction kernels on the receiving device's stream, ordered
 * by events: a rank records "ready" when its send buffer is complete, the others' streams
 * wait for it before reading, and nobody touches a buffer again before every reader has
 * recorded "done". Nothing waits on the host but the barriers, so the GPU overlaps the
 * devices as it would overlap real ones. Their times measure HBM, not links: the backend
 * never calibrates a profile. */

static const char *
gemm_type_name (ExecutorCudaGemmType type)
{
  return type == EXECUTOR_CUDA_GEMM_BF16 ? "bf16" : type == EXECUTOR_CUDA_GEMM_F16 ? "f16" : "f32";
}

gboolean
executor_cuda_ok (cudaError_t status, ExecutorDevice *device, const char *what, GError **error)
{
  if (status == cudaSuccess)
    return TRUE;
  int ordinal = device ? ((ExecutorCudaDevice *)device)->ordinal : -1;
  g_set_error (error, EXECUTOR_ERROR,
               status == cudaErrorMemoryAllocation ? EXECUTOR_ERROR_OUT_OF_MEMORY
                                                   : EXECUTOR_ERROR_FAILED,
               "device %u (GPU %d): %s failed: %s (%s)", device ? device->index : 0, ordinal, what,
               cudaGetErrorString (status), cudaGetErrorName (status));
  return FALSE;
}

static gboolean
blas_ok (cublasStatus_t status, ExecutorDevice *device, const char *what, GError **error)
{
  if (status == CUBLAS_STATUS_SUCCESS)
    return TRUE;
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
               "device %u (GPU %d): cuBLAS %s failed: %s", device->index,
               ((ExecutorCudaDevice *)device)->ordinal, what, cublasGetStatusString (status));
  return FALSE;
}

gboolean
executor_cuda_launched (ExecutorDevice *device, const char *what, GError **error)
{
  return executor_cuda_ok (cudaGetLastError (), device, what, error);
}

gboolean
executor_cuda_sync (ExecutorDevice *device, GError **error)
{
  return executor_cuda_ok (cudaStreamSynchronize (((ExecutorCudaDevice *)device)->stream), device,
                           "synchronizing its stream", error);
}

int
executor_cuda_device_count (GError **error)
{
  int n = 0;
  cudaError_t status = cudaGetDeviceCount (&n);
  if (status != cudaSuccess || n == 0)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE, "no CUDA device: %s",
                   status != cudaSuccess ? cudaGetErrorString (status) : "the driver lists no GPU");
      return 0;
    }
  return n;
}

void *
executor_cuda_scratch (ExecutorDevice *device, gsize bytes, GError **error)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  void *ptr = NULL;
  if (!executor_cuda_ok (cudaMallocFromPoolAsync (&ptr, MAX (bytes, 1), d->pool, d->stream), device,
                         "allocating scratch memory", error))
    return NULL;
  return ptr;
}

void
executor_cuda_scratch_free (ExecutorDevice *device, void *ptr)
{
  if (ptr)
    cudaFreeAsync (ptr, ((ExecutorCudaDevice *)device)->stream);
}

/* ---- buffers and copies ---- */

static ExecutorBuffer *
cuda_buffer_new (ExecutorDevice *device, gsize bytes, GError **error)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  g_autofree ExecutorBuffer *b = g_new0 (ExecutorBuffer, 1);
  b->bytes = bytes;
  cudaError_t status
      = cudaMallocFromPoolAsync ((void **)&b->data, MAX (bytes, 1), d->pool, d->stream);
  if (status == cudaErrorMemoryAllocation)
    {
      cudaGetLastError ();
      size_t free_bytes = 0, total = 0;
      cudaMemGetInfo (&free_bytes, &total);
      g_autofree char *want = planner_format_bytes (bytes);
      g_autofree char *have = planner_format_bytes (free_bytes);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_OUT_OF_MEMORY,
                   "device %u (GPU %d): cannot allocate %s; %s of the GPU is free", device->index,
                   d->ordinal, want, have);
      return NULL;
    }
  if (!executor_cuda_ok (status, device, "allocating a buffer", error))
    return NULL;
  /* Fresh memory reads as zeros, as on the cpu backend. */
  if (!executor_cuda_ok (cudaMemsetAsync (b->data, 0, MAX (bytes, 1), d->stream), device,
                         "clearing a buffer", error))
    {
      cudaFreeAsync (b->data, d->stream);
      return NULL;
    }
  return g_steal_pointer (&b);
}

static void
cuda_buffer_free (ExecutorDevice *device, ExecutorBuffer *buffer)
{
  cudaFreeAsync (buffer->data, ((ExecutorCudaDevice *)device)->stream);
  g_free (buffer);
}

static gboolean
cuda_upload (ExecutorDevice *device, ExecutorBuffer *dst, gsize offset, const void *src,
             gsize bytes, GError **error)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  /* The caller may free @src on return: wait for the copy. */
  return executor_cuda_ok (
             cudaMemcpyAsync (dst->data + offset, src, bytes, cudaMemcpyHostToDevice, d->stream),
             device, "uploading", error)
         && executor_cuda_sync (device, error);
}

static gboolean
cuda_download (ExecutorDevice *device, ExecutorBuffer *src, gsize offset, void *dst, gsize bytes,
               GError **error)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  return executor_cuda_ok (
             cudaMemcpyAsync (dst, src->data + offset, bytes, cudaMemcpyDeviceToHost, d->stream),
             device, "downloading", error)
         && executor_cuda_sync (device, error);
}

static gboolean
cuda_copy_2d (ExecutorDevice *device, ExecutorBuffer *dst, gsize dst_offset, gsize dst_pitch,
              ExecutorBuffer *src, gsize src_offset, gsize src_pitch, gsize width, gsize height,
              GError **error)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  cudaError_t status
      = height == 1
            ? cudaMemcpyAsync (dst->data + dst_offset, src->data + src_offset, width,
                               cudaMemcpyDeviceToDevice, d->stream)
            : cudaMemcpy2DAsync (dst->data + dst_offset, dst_pitch, src->data + src_offset,
                                 src_pitch, width, height, cudaMemcpyDeviceToDevice, d->stream);
  return executor_cuda_ok (status, device, "a 2-D copy", error);
}

/* ---- GEMM ---- */

gboolean
executor_cuda_gemm_typed (ExecutorDevice *device, ExecutorCudaGemmType type, gboolean trans_b,
                          gint64 m, gint64 n, gint64 k, const float *a, const float *b, float *c,
                          gint64 batch, gint64 stride_a, gint64 stride_b, gint64 stride_c,
                          GError **error)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  if (m == 0 || n == 0 || batch == 0)
    return TRUE;
  if (k == 0)
    return executor_cuda_ok (
        cudaMemsetAsync (c, 0, (gsize)(stride_c * (batch - 1) + m * n) * 4, d->stream), device,
        "clearing a GEMM result", error);
  if (m > G_MAXINT || n > G_MAXINT || k > G_MAXINT || batch > G_MAXINT)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "device %u: a GEMM of %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                   "x%" G_GINT64_FORMAT " exceeds cuBLAS's 32-bit sizes",
                   device->index, m, n, k);
      return FALSE;
    }

  /* Row-major C[m,n] = A[m,k] B[k,n] is column-major C^T = B^T A^T: cuBLAS sees B first. */
  const void *pa = a, *pb = b;
  void *ta = NULL, *tb = NULL;
  cudaDataType_t in_type = CUDA_R_32F;
  if (type != EXECUTOR_CUDA_GEMM_F32)
    {
      ExecutorCudaConvert conv
          = type == EXECUTOR_CUDA_GEMM_BF16 ? EXECUTOR_CUDA_F32_TO_BF16 : EXECUTOR_CUDA_F32_TO_F16;
      in_type = type == EXECUTOR_CUDA_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_16F;
      gint64 span_a = stride_a * (batch - 1) + m * k, span_b = stride_b * (batch - 1) + k * n;
      if (!(ta = executor_cuda_scratch (device, (gsize)span_a * 2, error)))
        return FALSE;
      if (!(tb = executor_cuda_scratch (device, (gsize)span_b * 2, error)))
        {
          executor_cuda_scratch_free (device, ta);
          return FALSE;
        }
      executor_cuda_launch_convert (d->stream, conv, a, ta, span_a);
      executor_cuda_launch_convert (d->stream, conv, b, tb, span_b);
      pa = ta;
      pb = tb;
    }
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t status = cublasGemmStridedBatchedEx (
      d->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, pb,
      in_type, (int)(trans_b ? k : n), stride_b, pa, in_type, (int)k, stride_a, &beta, c,
      CUDA_R_32F, (int)n, stride_c, (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  executor_cuda_scratch_free (device, ta);
  executor_cuda_scratch_free (device, tb);
  g_autofree char *what = g_strdup_printf ("%s GEMM %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                                           "x%" G_GINT64_FORMAT " (batch %" G_GINT64_FORMAT ")",
                                           gemm_type_name (type), m, n, k, batch);
  return blas_ok (status, device, what, error) && executor_cuda_launched (device, what, error);
}

gboolean
executor_cuda_gemm (ExecutorDevice *device, gboolean trans_b, gint64 m, gint64 n, gint64 k,
                    const float *a, const float *b, float *c, gint64 batch, gint64 stride_a,
                    gint64 stride_b, gint64 stride_c, GError **error)
{
  ExecutorCudaBackend *self = (ExecutorCudaBackend *)device->backend;
  return executor_cuda_gemm_typed (device, self->gemm_type, trans_b, m, n, k, a, b, c, batch,
                                   stride_a, stride_b, stride_c, error);
}

/* ---- collectives between virtual devices ---- */

/* Records the stage's event, waits for the group, and makes the stream wait for every
 * peer's event of that stage. */
static gboolean
cuda_sync (ExecutorDevice *device, ExecutorSpmdGroup *g, ExecutorSpmdStage stage, GError **error)
{
  ExecutorCudaBackend *self = (ExecutorCudaBackend *)device->backend;
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  gboolean recorded = executor_cuda_ok (cudaEventRecord (d->stage_events[stage], d->stream), device,
                                        "recording an event", error);
  /* DONE is met whatever happened (executor_spmd_collective): peers may still read. */
  if (stage == EXECUTOR_SPMD_DONE)
    executor_spmd_barrier_wait_all (&self->spmd, g->barrier[stage]);
  if (!recorded
      || (stage != EXECUTOR_SPMD_DONE
          && !executor_spmd_barrier_wait (&self->spmd, g->barrier[stage], error)))
    return FALSE;
  for (guint q = 0; q < g->p; q++)
    {
      ExecutorCudaDevice *peer = (ExecutorCudaDevice *)g->members[q];
      if (peer != d
          && !executor_cuda_ok (cudaStreamWaitEvent (d->stream, peer->stage_events[stage], 0),
                                device, "waiting for a peer's event", error))
        return FALSE;
    }
  return TRUE;
}

gboolean
executor_cuda_copy (ExecutorDevice *device, void *dst, const void *src, gsize bytes, GError **error)
{
  return executor_cuda_ok (cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDeviceToDevice,
                                            ((ExecutorCudaDevice *)device)->stream),
                           device, "a device-to-device copy", error);
}

/* A reduction kernel per rank on the receiving device's stream. */
static gboolean
cuda_sum (ExecutorDevice *device, ExecutorSpmdGroup *g, float *dst, gsize first, gsize count,
          GError **error)
{
  for (guint q = 0; q < g->p; q++)
    executor_cuda_launch_accumulate (((ExecutorCudaDevice *)device)->stream, dst,
                                     (const float *)g->send[q] + first, (gint64)count, q == 0);
  return executor_cuda_launched (device, "a reduction kernel", error);
}

static const ExecutorSpmdMemory cuda_memory = {
  cuda_sync, executor_cuda_copy, cuda_sum, executor_cuda_scratch, executor_cuda_scratch_free,
};

static gboolean
cuda_collective (ExecutorDevice *device, PlannerStepKind kind, guint axis, ExecutorBuffer *send,
                 ExecutorBuffer *recv, gsize count, PlannerDType dtype, GError **error)
{
  return executor_spmd_collective (&((ExecutorCudaBackend *)device->backend)->spmd, &cuda_memory,
                                   device, kind, axis, send, recv, count, dtype, error);
}

/* ---- run, barrier, timers ---- */

static gboolean
cuda_barrier (ExecutorDevice *device, GError **error)
{
  ExecutorCudaBackend *self = (ExecutorCudaBackend *)device->backend;
  return executor_cuda_sync (device, error)
         && executor_spmd_barrier_wait (&self->spmd, self->world, error);
}

static void
cuda_timer_begin (ExecutorDevice *device)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  cudaEventRecord (d->timer_start, d->stream);
}

static double
cuda_timer_end (ExecutorDevice *device)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  float ms = 0;
  if (cudaEventRecord (d->timer_stop, d->stream) != cudaSuccess
      || cudaEventSynchronize (d->timer_stop) != cudaSuccess
      || cudaEventElapsedTime (&ms, d->timer_start, d->timer_stop) != cudaSuccess)
    {
      /* A failed kernel shows in the next checked call; the time is lost. */
      return 0;
    }
  return ms * 1e-3;
}

typedef struct
{
  ExecutorDeviceFunc func;
  gpointer user_data;
} CudaRun;

static gboolean
cuda_device_main (ExecutorDevice *device, gpointer data, GError **error)
{
  CudaRun *run = data;
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  if (!executor_cuda_ok (cudaSetDevice (d->ordinal), device, "selecting the GPU", error))
    return FALSE;
  gboolean ok = run->func (device, run->user_data, error);
  /* Work still queued (frees, a last kernel) finishes here, and its errors count. */
  if (!executor_cuda_sync (device, ok ? error : NULL))
    ok = FALSE;
  return ok;
}

gboolean
executor_cuda_backend_run_local (ExecutorCudaBackend *self, ExecutorDeviceFunc func,
                                 gpointer user_data, GError **error)
{
  ExecutorBackend *base = &self->base;
  g_autofree ExecutorDevice **local = g_new0 (ExecutorDevice *, MAX (base->n_devices, 1));
  guint n = 0;
  for (guint i = 0; i < base->n_devices; i++)
    if (((ExecutorCudaDevice *)base->devices[i])->ordinal >= 0)
      local[n++] = base->devices[i];
  CudaRun run = { func, user_data };
  return executor_spmd_run (&self->spmd, local, n, cuda_device_main, &run, error);
}

static gboolean
cuda_run (ExecutorBackend *backend, ExecutorDeviceFunc func, gpointer user_data, GError **error)
{
  return executor_cuda_backend_run_local ((ExecutorCudaBackend *)backend, func, user_data, error);
}

static guint64
cuda_memory_available (ExecutorBackend *backend)
{
  ExecutorCudaBackend *self = (ExecutorCudaBackend *)backend;
  int ordinal = -1;
  for (guint i = 0; i < backend->n_devices && ordinal < 0; i++)
    ordinal = ((ExecutorCudaDevice *)backend->devices[i])->ordinal;
  size_t free_bytes = 0, total = 0;
  if (ordinal < 0 || cudaSetDevice (ordinal) != cudaSuccess
      || cudaMemGetInfo (&free_bytes, &total) != cudaSuccess)
    return 0;
  /* Virtual devices share the GPU: each may have its share. */
  return self->virtual_devices ? free_bytes / MAX (backend->n_devices, 1) : free_bytes;
}

/* ---- setup ---- */

static ExecutorCudaGemmType
gemm_type_from_env (void)
{
  const char *v = g_getenv ("SHARDSCOPE_CUDA_GEMM");
  if (v && g_ascii_strcasecmp (v, "bf16") == 0)
    return EXECUTOR_CUDA_GEMM_BF16;
  if (v && g_ascii_strcasecmp (v, "f16") == 0)
    return EXECUTOR_CUDA_GEMM_F16;
  return EXECUTOR_CUDA_GEMM_F32;
}

static gboolean
device_setup (ExecutorCudaDevice *d, GError **error)
{
  ExecutorDevice *dev = &d->base;
  struct cudaMemPoolProps props;
  memset (&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = d->ordinal;
  if (!executor_cuda_ok (cudaSetDevice (d->ordinal), dev, "selecting the GPU", error)
      || !executor_cuda_ok (cudaStreamCreateWithFlags (&d->stream, cudaStreamNonBlocking), dev,
                            "creating a stream", error)
      || !executor_cuda_ok (cudaMemPoolCreate (&d->pool, &props), dev, "creating a memory pool",
                            error)
      || !executor_cuda_ok (cudaEventCreate (&d->timer_start), dev, "creating an event", error)
      || !executor_cuda_ok (cudaEventCreate (&d->timer_stop), dev, "creating an event", error)
      || !executor_cuda_ok (cudaMalloc ((void **)&d->flag, sizeof (int)), dev, "allocating a flag",
                            error))
    return FALSE;
  for (guint i = 0; i < EXECUTOR_SPMD_N_STAGES; i++)
    if (!executor_cuda_ok (cudaEventCreateWithFlags (&d->stage_events[i], cudaEventDisableTiming),
                           dev, "creating an event", error))
      return FALSE;
  /* Freed memory stays in the pool between trials instead of going back to the driver. */
  guint64 keep = G_MAXUINT64;
  cudaMemPoolSetAttribute (d->pool, cudaMemPoolAttrReleaseThreshold, &keep);
  if (!blas_ok (cublasCreate (&d->blas), dev, "creating a handle", error)
      || !blas_ok (cublasSetStream (d->blas, d->stream), dev, "setting the stream", error)
      /* No TF32: f32 GEMMs must match the reference to 1e-5. */
      || !blas_ok (cublasSetMathMode (d->blas, CUBLAS_PEDANTIC_MATH), dev, "setting the math mode",
                   error))
    return FALSE;
  return TRUE;
}

static void
device_teardown (ExecutorCudaDevice *d)
{
  if (d->ordinal < 0 || cudaSetDevice (d->ordinal) != cudaSuccess)
    return;
  if (d->stream)
    cudaStreamSynchronize (d->stream);
  if (d->blas)
    cublasDestroy (d->blas);
  cudaEvent_t events[2 + EXECUTOR_SPMD_N_STAGES] = { d->timer_start, d->timer_stop };
  memcpy (events + 2, d->stage_events, sizeof d->stage_events);
  for (guint i = 0; i < G_N_ELEMENTS (events); i++)
    if (events[i])
      cudaEventDestroy (events[i]);
  if (d->flag)
    cudaFree (d->flag);
  if (d->pool)
    cudaMemPoolDestroy (d->pool);
  if (d->stream)
    cudaStreamDestroy (d->stream);
}

gboolean
executor_cuda_backend_setup (ExecutorCudaBackend *self, const ExecutorBackendClass *klass,
                             const PlannerMesh *mesh, gboolean virtual_devices, int gpu,
                             gsize device_size, gboolean (*is_local) (guint index, gpointer data),
                             gpointer data, GError **error)
{
  ExecutorBackend *base = &self->base;
  executor_backend_init (base, klass, mesh, MAX (device_size, sizeof (ExecutorCudaDevice)));
  executor_spmd_init (&self->spmd);
  self->gemm_type = gemm_type_from_env ();
  self->virtual_devices = virtual_devices;

  guint n_local = 0;
  for (guint i = 0; i < base->n_devices; i++)
    {
      ExecutorCudaDevice *d = (ExecutorCudaDevice *)base->devices[i];
      gboolean local = is_local == NULL || is_local (i, data);
      d->ordinal = !local ? -1 : virtual_devices ? gpu : (int)n_local;
      n_local += local;
    }
  self->world = executor_spmd_barrier_new (&self->spmd, n_local);
  for (guint i = 0; i < base->n_devices; i++)
    {
      ExecutorCudaDevice *d = (ExecutorCudaDevice *)base->devices[i];
      if (d->ordinal >= 0 && !device_setup (d, error))
        return FALSE;
    }
  executor_spmd_groups_init (&self->spmd, base);
  return TRUE;
}

void
executor_cuda_backend_teardown (ExecutorCudaBackend *self)
{
  ExecutorBackend *base = &self->base;
  for (guint i = 0; base->devices && i < base->n_devices; i++)
    device_teardown ((ExecutorCudaDevice *)base->devices[i]);
  executor_backend_clear (base);
  executor_spmd_clear (&self->spmd);
}

void
executor_cuda_class_fill (ExecutorBackendClass *klass)
{
  klass->run = cuda_run;
  klass->memory_available = cuda_memory_available;
  klass->buffer_new = cuda_buffer_new;
  klass->buffer_free = cuda_buffer_free;
  klass->upload = cuda_upload;
  klass->download = cuda_download;
  klass->copy_2d = cuda_copy_2d;
  klass->collective = cuda_collective;
  klass->barrier = cuda_barrier;
  klass->timer_begin = cuda_timer_begin;
  klass->timer_end = cuda_timer_end;
  memcpy (klass->kernels, executor_cuda_kernels, sizeof klass->kernels);
}

static void
cuda_finalize (ExecutorBackend *backend)
{
  executor_cuda_backend_teardown ((ExecutorCudaBackend *)backend);
  g_free (backend);
}

static ExecutorBackendClass cuda_class = {
  .name = "cuda",
  /* Virtual devices share one GPU: collectives measure HBM, never a link. */
  .calibrates_links = FALSE,
  .finalize = cuda_finalize,
};

ExecutorBackend *
executor_cuda_backend_new (const PlannerMesh *mesh, GError **error)
{
  g_return_val_if_fail (mesh != NULL, NULL);

  static gsize class_init = 0;
  if (g_once_init_enter (&class_init))
    {
      executor_cuda_class_fill (&cuda_class);
      g_once_init_leave (&class_init, 1);
    }
  if (!executor_backend_check_size (cuda_class.name, mesh, 1024, error))
    return NULL;
  int n_gpus = executor_cuda_device_count (error);
  if (n_gpus == 0)
    return NULL;
  int gpu = 0;
  const char *env = g_getenv ("SHARDSCOPE_CUDA_DEVICE");
  if (env)
    gpu = (int)g_ascii_strtoll (env, NULL, 10);
  if (gpu < 0 || gpu >= n_gpus)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
                   "SHARDSCOPE_CUDA_DEVICE=%s but GPUs 0 to %d answer", env, n_gpus - 1);
      return NULL;
    }
  ExecutorCudaBackend *self = g_new0 (ExecutorCudaBackend, 1);
  if (!executor_cuda_backend_setup (self, &cuda_class, mesh, TRUE, gpu, sizeof (ExecutorCudaDevice),
                                    NULL, NULL, error))
    {
      cuda_finalize (&self->base);
      return NULL;
    }
  return &self->base;
}
