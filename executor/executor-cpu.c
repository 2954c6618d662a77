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

typedef struct _CpuBackend CpuBackend;

typedef struct
{
  ExecutorBarrier *barrier;
  guint p;
  guint8 **send; /* per rank, published for the current collective */
  guint8 **recv;
} CpuGroup;

typedef struct
{
  ExecutorDevice base;
  CpuGroup *groups[PLANNER_MAX_AXES];
  gint64 timer_start_ns;
} CpuDevice;

struct _CpuBackend
{
  ExecutorBackend base;
  ExecutorSpmd spmd; /* threads, barriers an abort opens, the first error */
  ExecutorBarrier *world;
  GPtrArray *groups; /* CpuGroup, every axis */
};

static void
cpu_group_free (gpointer data)
{
  CpuGroup *g = data;
  g_free (g->send);
  g_free (g->recv);
  g_free (g);
}

static void
cpu_finalize (ExecutorBackend *backend)
{
  CpuBackend *self = (CpuBackend *) backend;
  for (guint i = 0; i < backend->n_devices; i++)
    g_free (backend->devices[i]);
  g_free (backend->devices);
  g_ptr_array_unref (self->groups);
  executor_spmd_clear (&self->spmd);
  g_free (self);
}

static gboolean
cpu_run (ExecutorBackend *backend, ExecutorDeviceFunc func, gpointer user_data, GError **error)
{
  CpuBackend *self = (CpuBackend *) backend;
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
check_range (ExecutorDevice *device, ExecutorBuffer *b, gsize offset, gsize bytes,
             const char *what, GError **error)
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
cpu_upload (ExecutorDevice *device, ExecutorBuffer *dst, gsize offset, const void *src,
            gsize bytes, GError **error)
{
  if (!check_range (device, dst, offset, bytes, "upload", error))
    return FALSE;
  memcpy (dst->data + offset, src, bytes);
  return TRUE;
}

static gboolean
cpu_download (ExecutorDevice *device, ExecutorBuffer *src, gsize offset, void *dst, gsize bytes,
              GError **error)
{
  if (!check_range (device, src, offset, bytes, "download", error))
    return FALSE;
  memcpy (dst, src->data + offset, bytes);
  return TRUE;
}

static gboolean
cpu_copy_2d (ExecutorDevice *device, ExecutorBuffer *dst, gsize dst_offset, gsize dst_pitch,
             ExecutorBuffer *src, gsize src_offset, gsize src_pitch, gsize width, gsize height,
             GError **error)
{
  if (height == 0 || width == 0)
    return TRUE;
  gsize dst_span = (height - 1) * dst_pitch + width, src_span = (height - 1) * src_pitch + width;
  if (!check_range (device, dst, dst_offset, dst_span, "2-D copy (destination)", error)
      || !check_range (device, src, src_offset, src_span, "2-D copy (source)", error))
    return FALSE;
  for (gsize r = 0; r < height; r++)
    memcpy (dst->data + dst_offset + r * dst_pitch, src->data + src_offset + r * src_pitch,
            width);
  return TRUE;
}

static void
sum_f32 (float *out, guint8 *const *srcs, guint p, gsize first, gsize count)
{
  for (gsize i = 0; i < count; i++)
    {
      /* Ranks in order, so every replica of the result is bit-identical. */
      float s = 0;
      for (guint q = 0; q < p; q++)
        s += ((const float *) srcs[q])[first + i];
      out[i] = s;
    }
}

static gboolean
cpu_collective (ExecutorDevice *device, PlannerStepKind kind, guint axis, ExecutorBuffer *send,
                ExecutorBuffer *recv, gsize count, PlannerDType dtype, GError **error)
{
  CpuBackend *self = (CpuBackend *) device->backend;
  CpuDevice *dev = (CpuDevice *) device;
  CpuGroup *g = dev->groups[axis];
  guint p = g->p, rank = device->coords[axis];
  gsize es = executor_storage_size (dtype), chunk = count * es;
  gsize send_bytes = chunk, recv_bytes = chunk;

  switch (kind)
    {
    case PLANNER_STEP_ALL_GATHER: recv_bytes = p * chunk; break;
    case PLANNER_STEP_REDUCE_SCATTER: send_bytes = p * chunk; break;
    case PLANNER_STEP_ALL_TO_ALL: send_bytes = recv_bytes = p * chunk; break;
    case PLANNER_STEP_ALL_REDUCE: break;
    default:
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "%s is not a collective", planner_step_kind_to_string (kind));
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
  if (!executor_spmd_barrier_wait (&self->spmd, g->barrier, error))
    return FALSE;

  switch (kind)
    {
    case PLANNER_STEP_ALL_GATHER:
      for (guint q = 0; q < p; q++)
        memcpy (recv->data + q * chunk, g->send[q], chunk);
      break;
    case PLANNER_STEP_ALL_TO_ALL:
      for (guint q = 0; q < p; q++)
        memcpy (recv->data + q * chunk, g->send[q] + rank * chunk, chunk);
      break;
    case PLANNER_STEP_REDUCE_SCATTER:
      sum_f32 ((float *) recv->data, g->send, p, rank * count, count);
      break;
    case PLANNER_STEP_ALL_REDUCE:
      {
        /* Each rank sums one range into its own result, then copies the others' ranges:
         * ranges are disjoint, so send == recv is safe. */
        gsize lo = count * rank / p, hi = count * (rank + 1) / p;
        g_autofree float *tmp = g_new (float, MAX (hi - lo, 1));
        sum_f32 (tmp, g->send, p, lo, hi - lo);
        memcpy ((float *) recv->data + lo, tmp, (hi - lo) * sizeof (float));
        if (!executor_spmd_barrier_wait (&self->spmd, g->barrier, error))
          return FALSE;
        for (guint q = 0; q < p; q++)
          if (q != rank)
            {
              gsize qlo = count * q / p, qhi = count * (q + 1) / p;
              memcpy ((float *) recv->data + qlo, (const float *) g->recv[q] + qlo,
                      (qhi - qlo) * sizeof (float));
            }
      }
      break;
    default: g_assert_not_reached ();
    }
  return executor_spmd_barrier_wait (&self->spmd, g->barrier, error);
}

static gboolean
cpu_barrier (ExecutorDevice *device, GError **error)
{
  CpuBackend *self = (CpuBackend *) device->backend;
  return executor_spmd_barrier_wait (&self->spmd, self->world, error);
}

static gint64
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (gint64) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
cpu_timer_begin (ExecutorDevice *device)
{
  ((CpuDevice *) device)->timer_start_ns = now_ns ();
}

static double
cpu_timer_end (ExecutorDevice *device)
{
  return (double) (now_ns () - ((CpuDevice *) device)->timer_start_ns) * 1e-9;
}

static guint64
cpu_memory_available (ExecutorBackend *backend)
{
  /* Host memory is shared by every virtual device: report a per-device share. */
  guint64 pages = (guint64) sysconf (_SC_AVPHYS_PAGES), page = (guint64) sysconf (_SC_PAGESIZE);
  return pages * page / MAX (backend->n_devices, 1);
}

void
executor_cpu_gemm (gboolean trans_b, gint64 m, gint64 n, gint64 k, const float *a,
                   const float *b, float *c)
{
  if (m == 0 || n == 0)
    return;
  if (k == 0)
    {
      memset (c, 0, (gsize) (m * n) * sizeof (float));
      return;
    }
  cblas_sgemm (CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint) m,
               (blasint) n, (blasint) k, 1.0f, a, (blasint) k, b,
               (blasint) (trans_b ? k : n), 0.0f, c, (blasint) n);
}

static ExecutorBackendClass cpu_class = {
  .name = "cpu",
  .calibrates_links = TRUE,
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

  guint64 n = planner_mesh_n_devices (mesh);
  if (n == 0 || n > 4096)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
                   "the cpu backend runs 1 to 4096 virtual devices; the mesh has %"
                   G_GUINT64_FORMAT, n);
      return NULL;
    }

  CpuBackend *self = g_new0 (CpuBackend, 1);
  ExecutorBackend *base = &self->base;
  base->klass = &cpu_class;
  base->mesh = *mesh;
  base->n_devices = (guint) n;
  base->devices = g_new0 (ExecutorDevice *, n);
  executor_spmd_init (&self->spmd);
  self->world = executor_spmd_barrier_new (&self->spmd, (guint) n);
  self->groups = g_ptr_array_new_with_free_func (cpu_group_free);

  for (guint i = 0; i < n; i++)
    {
      CpuDevice *d = g_new0 (CpuDevice, 1);
      d->base.backend = base;
      d->base.index = i;
      planner_mesh_device_coords (mesh, i, d->base.coords);
      base->devices[i] = &d->base;
    }
  /* One group per (axis, coordinates on the other axes): the device with coordinate 0 on
   * the axis creates it, the others find it there. */
  for (guint a = 0; a < mesh->n_axes; a++)
    for (guint i = 0; i < n; i++)
      {
        CpuDevice *d = (CpuDevice *) base->devices[i];
        guint coords[PLANNER_MAX_AXES];
        memcpy (coords, d->base.coords, sizeof coords);
        coords[a] = 0;
        CpuDevice *leader = (CpuDevice *) base->devices[planner_mesh_device_id (mesh, coords)];
        if (leader == d)
          {
            CpuGroup *g = g_new0 (CpuGroup, 1);
            g->p = mesh->sizes[a];
            g->barrier = executor_spmd_barrier_new (&self->spmd, g->p);
            g->send = g_new0 (guint8 *, g->p);
            g->recv = g_new0 (guint8 *, g->p);
            g_ptr_array_add (self->groups, g);
            d->groups[a] = g;
          }
        else
          d->groups[a] = leader->groups[a];
      }
  return base;
}
