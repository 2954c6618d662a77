#define G_LOG_DOMAIN "executor-cpu"

#include "config.h"

#include <cblas.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "executor-cpu-private.h"
#include "executor-error.h"
#include "executor-spmd.h"
#include "planner-redistribute.h"

/* The CPU backend: every virtual device is a thread, memory is host memory, and collectives
 * go through shared memory: each rank publishes its buffer, a barrier, each rank reads what
 * it needs, a barrier (so no rank reuses a buffer another still reads). */

typedef struct
{
  ExecutorDevice base;
  gint64 timer_start_ns;
} CpuDevice;

typedef struct
{
  ExecutorBackend base;
  ExecutorSpmd spmd; /* threads, barriers an abort opens, the first error, the axis groups */
  ExecutorBarrier *world;
} CpuBackend;

static void
cpu_finalize (ExecutorBackend *backend)
{
  CpuBackend *self = (CpuBackend *)backend;
  executor_backend_clear (backend);
  executor_spmd_clear (&self->spmd);
  g_free (self);
}

static gboolean
cpu_run (ExecutorBackend *backend, ExecutorDeviceFunc func, gpointer user_data, GError **error)
{
  CpuBackend *self = (CpuBackend *)backend;
  return executor_spmd_run (&self->spmd, backend->devices, backend->n_devices, func, user_data,
                            error);
}

static ExecutorBuffer *
cpu_buffer_new (ExecutorDevice *device, gsize bytes, GError **error)
{
  ExecutorBuffer *b = g_new0 (ExecutorBuffer, 1);
  b->bytes = bytes;
  /* 64-byte rows suit the BLAS kernels; g_aligned_alloc0 aborts rather than fail, so large
   * requests are tried with the non-aborting allocator first. */
  gsize n = MAX (bytes, 1);
  b->data = g_try_malloc0 (n);
  if (b->data == NULL)
    {
      g_free (b);
      g_autofree char *size = planner_format_bytes (bytes);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_OUT_OF_MEMORY,
                   "device %u: cannot allocate %s of host memory", device->index, size);
      return NULL;
    }
  return b;
}

static void
cpu_buffer_free (ExecutorDevice *device, ExecutorBuffer *buffer)
{
  g_free (buffer->data);
  g_free (buffer);
}

static gboolean
cpu_upload (ExecutorDevice *device, ExecutorBuffer *dst, gsize offset, const void *src, gsize bytes,
            GError **error)
{
  memcpy (dst->data + offset, src, bytes);
  return TRUE;
}

static gboolean
cpu_download (ExecutorDevice *device, ExecutorBuffer *src, gsize offset, void *dst, gsize bytes,
              GError **error)
{
  memcpy (dst, src->data + offset, bytes);
  return TRUE;
}

static gboolean
cpu_copy_2d (ExecutorDevice *device, ExecutorBuffer *dst, gsize dst_offset, gsize dst_pitch,
             ExecutorBuffer *src, gsize src_offset, gsize src_pitch, gsize width, gsize height,
             GError **error)
{
  for (gsize r = 0; r < height; r++)
    memcpy (dst->data + dst_offset + r * dst_pitch, src->data + src_offset + r * src_pitch, width);
  return TRUE;
}

/* Shared memory: every rank reads the others' buffers directly. */

static gboolean
cpu_sync (ExecutorDevice *device, ExecutorSpmdGroup *group, ExecutorSpmdStage stage, GError **error)
{
  ExecutorSpmd *spmd = &((CpuBackend *)device->backend)->spmd;
  if (stage == EXECUTOR_SPMD_DONE)
    {
      executor_spmd_barrier_wait_all (spmd, group->barrier[stage]);
      return TRUE;
    }
  return executor_spmd_barrier_wait (spmd, group->barrier[stage], error);
}

static gboolean
cpu_copy (ExecutorDevice *device, void *dst, const void *src, gsize bytes, GError **error)
{
  memcpy (dst, src, bytes);
  return TRUE;
}

static gboolean
cpu_sum (ExecutorDevice *device, ExecutorSpmdGroup *group, float *dst, gsize first, gsize count,
         GError **error)
{
  for (gsize i = 0; i < count; i++)
    {
      float s = 0;
      for (guint q = 0; q < group->p; q++)
        s += ((const float *)group->send[q])[first + i];
      dst[i] = s;
    }
  return TRUE;
}

static void *
cpu_scratch (ExecutorDevice *device, gsize bytes, GError **error)
{
  return g_malloc (MAX (bytes, 1));
}

static void
cpu_scratch_free (ExecutorDevice *device, void *ptr)
{
  g_free (ptr);
}

static const ExecutorSpmdMemory cpu_memory = {
  cpu_sync, cpu_copy, cpu_sum, cpu_scratch, cpu_scratch_free,
};

static gboolean
cpu_collective (ExecutorDevice *device, PlannerStepKind kind, guint axis, ExecutorBuffer *send,
                ExecutorBuffer *recv, gsize count, PlannerDType dtype, GError **error)
{
  return executor_spmd_collective (&((CpuBackend *)device->backend)->spmd, &cpu_memory, device,
                                   kind, axis, send, recv, count, dtype, error);
}

static gboolean
cpu_barrier (ExecutorDevice *device, GError **error)
{
  CpuBackend *self = (CpuBackend *)device->backend;
  return executor_spmd_barrier_wait (&self->spmd, self->world, error);
}

static gint64
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
cpu_timer_begin (ExecutorDevice *device)
{
  ((CpuDevice *)device)->timer_start_ns = now_ns ();
}

static double
cpu_timer_end (ExecutorDevice *device)
{
  return (double)(now_ns () - ((CpuDevice *)device)->timer_start_ns) * 1e-9;
}

static guint64
cpu_memory_available (ExecutorBackend *backend)
{
  /* Host memory is shared by every virtual device: report a per-device share. */
  guint64 pages = (guint64)sysconf (_SC_AVPHYS_PAGES), page = (guint64)sysconf (_SC_PAGESIZE);
  return pages * page / MAX (backend->n_devices, 1);
}

void
executor_cpu_gemm (gboolean trans_b, gint64 m, gint64 n, gint64 k, const float *a, const float *b,
                   float *c)
{
  if (m == 0 || n == 0)
    return;
  if (k == 0)
    {
      memset (c, 0, (gsize)(m * n) * sizeof (float));
      return;
    }
  cblas_sgemm (CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint)m,
               (blasint)n, (blasint)k, 1.0f, a, (blasint)k, b, (blasint)(trans_b ? k : n), 0.0f, c,
               (blasint)n);
}

static ExecutorBackendClass cpu_class = {
  .name = "cpu",
  .calibrates_links = TRUE,
  .host_memory = TRUE,
  .finalize = cpu_finalize,
  .run = cpu_run,
  .memory_available = cpu_memory_available,
  .buffer_new = cpu_buffer_new,
  .buffer_free = cpu_buffer_free,
  .upload = cpu_upload,
  .download = cpu_download,
  .copy_2d = cpu_copy_2d,
  .collective = cpu_collective,
  .barrier = cpu_barrier,
  .timer_begin = cpu_timer_begin,
  .timer_end = cpu_timer_end,
};

ExecutorBackend *
executor_cpu_backend_new (const PlannerMesh *mesh, GError **error)
{
  g_return_val_if_fail (mesh != NULL, NULL);

  static gsize class_init = 0;
  if (g_once_init_enter (&class_init))
    {
      memcpy (cpu_class.kernels, executor_cpu_kernels, sizeof cpu_class.kernels);
      /* Devices are threads already: a BLAS thread pool per call would make them fight
       * over the same cores. */
      openblas_set_num_threads (1);
      g_once_init_leave (&class_init, 1);
    }

  if (!executor_backend_check_size (cpu_class.name, mesh, 4096, error))
    return NULL;

  CpuBackend *self = g_new0 (CpuBackend, 1);
  executor_backend_init (&self->base, &cpu_class, mesh, sizeof (CpuDevice));
  executor_spmd_init (&self->spmd);
  self->world = executor_spmd_barrier_new (&self->spmd, self->base.n_devices);
  executor_spmd_groups_init (&self->spmd, &self->base);
  return &self->base;
}
