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

struct _ExecutorCudaGroup
{
  ExecutorBarrier *barrier;
  guint p;
  ExecutorCudaDevice **members; /* by rank */
  guint8 **send;
  guint8 **recv;
};

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
check_range (ExecutorDevice *device, ExecutorBuffer *b, gsize offset, gsize bytes, const char *what,
             GError **error)
{
  if (offset > b->bytes || bytes > b->bytes - offset)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                   "device %u: %s of %" G_GSIZE_FORMAT " bytes at %" G_GSIZE_FORMAT
                   " is outside a buffer of %" G_GSIZE_FORMAT,
                   device->index, what, bytes, offset, b->bytes);
      return FALSE;
    }
  return TRUE;
}

static gboolean
cuda_upload (ExecutorDevice *device, ExecutorBuffer *dst, gsize offset, const void *src,
             gsize bytes, GError **error)
{
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  if (!check_range (device, dst, offset, bytes, "upload", error))
    return FALSE;
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
  if (!check_range (device, src, offset, bytes, "download", error))
    return FALSE;
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
  if (height == 0 || width == 0)
    return TRUE;
  gsize dst_span = (height - 1) * dst_pitch + width, src_span = (height - 1) * src_pitch + width;
  if (!check_range (device, dst, dst_offset, dst_span, "2-D copy (destination)", error)
      || !check_range (device, src, src_offset, src_span, "2-D copy (source)", error))
    return FALSE;
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

static gboolean
wait_peers (ExecutorCudaDevice *d, ExecutorCudaGroup *g, gsize event_offset, GError **error)
{
  for (guint q = 0; q < g->p; q++)
    {
      ExecutorCudaDevice *peer = g->members[q];
      if (peer == d)
        continue;
      cudaEvent_t ev = *(cudaEvent_t *)((guint8 *)peer + event_offset);
      if (!executor_cuda_ok (cudaStreamWaitEvent (d->stream, ev, 0), &d->base,
                             "waiting for a peer's event", error))
        return FALSE;
    }
  return TRUE;
}

/* Records @ev, waits for the group, and makes the stream wait for every peer's @ev. */
static gboolean
group_sync (ExecutorCudaBackend *self, ExecutorCudaDevice *d, ExecutorCudaGroup *g, cudaEvent_t ev,
            gsize event_offset, GError **error)
{
  return executor_cuda_ok (cudaEventRecord (ev, d->stream), &d->base, "recording an event", error)
         && executor_spmd_barrier_wait (&self->spmd, g->barrier, error)
         && wait_peers (d, g, event_offset, error);
}

static gboolean
copy_d2d (ExecutorCudaDevice *d, void *dst, const void *src, gsize bytes, GError **error)
{
  return executor_cuda_ok (cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDeviceToDevice, d->stream),
                           &d->base, "a device-to-device copy", error);
}

/* Sums ranks' chunks in rank order into @dst (as the cpu backend, so every replica is
 * bit-identical). */
static gboolean
sum_ranks (ExecutorCudaDevice *d, ExecutorCudaGroup *g, float *dst, gsize first, gsize count,
           GError **error)
{
  for (guint q = 0; q < g->p; q++)
    executor_cuda_launch_accumulate (d->stream, dst, (const float *)g->send[q] + first,
                                     (gint64)count, q == 0);
  return executor_cuda_launched (&d->base, "a reduction kernel", error);
}

static gboolean
cuda_collective (ExecutorDevice *device, PlannerStepKind kind, guint axis, ExecutorBuffer *send,
                 ExecutorBuffer *recv, gsize count, PlannerDType dtype, GError **error)
{
  ExecutorCudaBackend *self = (ExecutorCudaBackend *)device->backend;
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)device;
  ExecutorCudaGroup *g = d->groups[axis];
  guint p = g->p, rank = device->coords[axis];
  gsize es = executor_storage_size (dtype), chunk = count * es;
  gsize send_bytes = chunk, recv_bytes = chunk;

  switch (kind)
    {
    case PLANNER_STEP_ALL_GATHER:
      recv_bytes = p * chunk;
      break;
    case PLANNER_STEP_REDUCE_SCATTER:
      send_bytes = p * chunk;
      break;
    case PLANNER_STEP_ALL_TO_ALL:
      send_bytes = recv_bytes = p * chunk;
      break;
    case PLANNER_STEP_ALL_REDUCE:
      break;
    default:
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED, "%s is not a collective",
                   planner_step_kind_to_string (kind));
      return FALSE;
    }
  if ((kind == PLANNER_STEP_ALL_REDUCE || kind == PLANNER_STEP_REDUCE_SCATTER)
      && dtype != PLANNER_DTYPE_F32)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "%s sums f32 buffers only, not %s", planner_step_kind_to_string (kind),
                   planner_dtype_to_string (dtype));
      return FALSE;
    }
  if (!check_range (device, send, 0, send_bytes, "collective send", error)
      || !check_range (device, recv, 0, recv_bytes, "collective receive", error))
    return FALSE;

  g->send[rank] = send->data;
  g->recv[rank] = recv->data;
  if (!group_sync (self, d, g, d->ready, G_STRUCT_OFFSET (ExecutorCudaDevice, ready), error))
    return FALSE;

  gboolean ok = TRUE;
  switch (kind)
    {
    case PLANNER_STEP_ALL_GATHER:
      for (guint q = 0; ok && q < p; q++)
        ok = copy_d2d (d, recv->data + q * chunk, g->send[q], chunk, error);
      break;
    case PLANNER_STEP_ALL_TO_ALL:
      for (guint q = 0; ok && q < p; q++)
        ok = copy_d2d (d, recv->data + q * chunk, g->send[q] + rank * chunk, chunk, error);
      break;
    case PLANNER_STEP_REDUCE_SCATTER:
      ok = sum_ranks (d, g, (float *)recv->data, rank * count, count, error);
      break;
    case PLANNER_STEP_ALL_REDUCE:
      {
        /* Each rank sums one range into its own result, then copies the others' ranges:
         * ranges are disjoint, so send == recv is safe. */
        gsize lo = count * rank / p, hi = count * (rank + 1) / p;
        float *tmp = executor_cuda_scratch (device, (hi - lo) * sizeof (float), error);
        ok = tmp != NULL && sum_ranks (d, g, tmp, lo, hi - lo, error)
             && copy_d2d (d, (float *)recv->data + lo, tmp, (hi - lo) * sizeof (float), error);
        executor_cuda_scratch_free (device, tmp);
        ok = ok
             && group_sync (self, d, g, d->mid, G_STRUCT_OFFSET (ExecutorCudaDevice, mid), error);
        for (guint q = 0; ok && q < p; q++)
          if (q != rank)
            {
              gsize qlo = count * q / p, qhi = count * (q + 1) / p;
              ok = copy_d2d (d, (float *)recv->data + qlo, (const float *)g->recv[q] + qlo,
                             (qhi - qlo) * sizeof (float), error);
            }
      }
      break;
    default:
      g_assert_not_reached ();
    }
  /* Nobody reuses a buffer a peer still reads. */
  return ok && group_sync (self, d, g, d->done, G_STRUCT_OFFSET (ExecutorCudaDevice, done), error);
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

static void
group_free (gpointer data)
{
  ExecutorCudaGroup *g = data;
  g_free (g->members);
  g_free (g->send);
  g_free (g->recv);
  g_free (g);
}

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
  cudaEvent_t *sync_events[] = { &d->ready, &d->mid, &d->done };
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
  for (guint i = 0; i < G_N_ELEMENTS (sync_events); i++)
    if (!executor_cuda_ok (cudaEventCreateWithFlags (sync_events[i], cudaEventDisableTiming), dev,
                           "creating an event", error))
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
  cudaEvent_t events[] = { d->timer_start, d->timer_stop, d->ready, d->mid, d->done };
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
  guint64 n = planner_mesh_n_devices (mesh);
  base->klass = klass;
  base->mesh = *mesh;
  base->n_devices = (guint)n;
  base->devices = g_new0 (ExecutorDevice *, MAX (n, 1));
  executor_spmd_init (&self->spmd);
  self->groups = g_ptr_array_new_with_free_func (group_free);
  self->gemm_type = gemm_type_from_env ();
  self->virtual_devices = virtual_devices;

  guint n_local = 0;
  for (guint i = 0; i < n; i++)
    {
      ExecutorCudaDevice *d = g_malloc0 (MAX (device_size, sizeof (ExecutorCudaDevice)));
      d->base.backend = base;
      d->base.index = i;
      planner_mesh_device_coords (mesh, i, d->base.coords);
      gboolean local = is_local == NULL || is_local (i, data);
      d->ordinal = !local ? -1 : virtual_devices ? gpu : (int)n_local;
      n_local += local;
      base->devices[i] = &d->base;
    }
  self->world = executor_spmd_barrier_new (&self->spmd, n_local);
  for (guint i = 0; i < n; i++)
    {
      ExecutorCudaDevice *d = (ExecutorCudaDevice *)base->devices[i];
      if (d->ordinal >= 0 && !device_setup (d, error))
        return FALSE;
    }
  /* One group per (axis, coordinates on the other axes), as on the cpu backend: the device
   * with coordinate 0 on the axis creates it, the others find it there. */
  for (guint a = 0; a < mesh->n_axes; a++)
    for (guint i = 0; i < n; i++)
      {
        ExecutorCudaDevice *d = (ExecutorCudaDevice *)base->devices[i];
        guint coords[PLANNER_MAX_AXES];
        memcpy (coords, d->base.coords, sizeof coords);
        coords[a] = 0;
        ExecutorCudaDevice *leader
            = (ExecutorCudaDevice *)base->devices[planner_mesh_device_id (mesh, coords)];
        if (leader == d)
          {
            ExecutorCudaGroup *g = g_new0 (ExecutorCudaGroup, 1);
            g->p = mesh->sizes[a];
            g->barrier = executor_spmd_barrier_new (&self->spmd, g->p);
            g->members = g_new0 (ExecutorCudaDevice *, g->p);
            g->send = g_new0 (guint8 *, g->p);
            g->recv = g_new0 (guint8 *, g->p);
            g_ptr_array_add (self->groups, g);
            d->groups[a] = g;
          }
        else
          d->groups[a] = leader->groups[a];
        d->groups[a]->members[d->base.coords[a]] = d;
      }
  return TRUE;
}

void
executor_cuda_backend_teardown (ExecutorCudaBackend *self)
{
  ExecutorBackend *base = &self->base;
  for (guint i = 0; i < base->n_devices; i++)
    if (base->devices[i])
      {
        device_teardown ((ExecutorCudaDevice *)base->devices[i]);
        g_free (base->devices[i]);
      }
  g_free (base->devices);
  g_clear_pointer (&self->groups, g_ptr_array_unref);
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
  guint64 n = planner_mesh_n_devices (mesh);
  if (n == 0 || n > 1024)
    {
      g_set_error (
          error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
          "the cuda backend runs 1 to 1024 virtual devices; the mesh has %" G_GUINT64_FORMAT, n);
      return NULL;
    }
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
