#define G_LOG_DOMAIN "executor-cpu"

#include "config.h"

#include <cblas.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "executor-cpu-private.h"
#include "executor-error.h"
#include "planner-redistribute.h"

/* The CPU backend: every virtual device is a thread, memory is host memory, and collectives
 * go through shared memory: each rank publishes its buffer, a barrier, each rank reads what
 * it needs, a barrier (so no rank reuses a buffer another still reads). */

typedef struct _CpuBackend CpuBackend;

/* A barrier that an abort opens: a failed device must not leave the others waiting. */
typedef struct
{
  GMutex mutex;
  GCond cond;
  guint n;
  guint waiting;
  guint generation;
} CpuBarrier;

typedef struct
{
  CpuBarrier barrier;
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
  CpuBarrier world;
  GPtrArray *groups; /* CpuGroup, every axis */
  int aborted;       /* atomic */
  GMutex error_mutex;
  GError *first_error;
};

static void
cpu_barrier_init (CpuBarrier *b, guint n)
{
  g_mutex_init (&b->mutex);
  g_cond_init (&b->cond);
  b->n = n;
  b->waiting = 0;
  b->generation = 0;
}

static void
cpu_barrier_clear (CpuBarrier *b)
{
  g_mutex_clear (&b->mutex);
  g_cond_clear (&b->cond);
}

static gboolean
aborted_error (GError **error)
{
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_ABORTED,
               "another device of the run failed first");
  return FALSE;
}

static gboolean
cpu_barrier_wait (CpuBackend *self, CpuBarrier *b, GError **error)
{
  gboolean ok = TRUE;
  g_mutex_lock (&b->mutex);
  if (g_atomic_int_get (&self->aborted))
    ok = FALSE;
  else
    {
      guint generation = b->generation;
      if (++b->waiting == b->n)
        {
          b->waiting = 0;
          b->generation++;
          g_cond_broadcast (&b->cond);
        }
      else
        {
          while (generation == b->generation && !g_atomic_int_get (&self->aborted))
            g_cond_wait (&b->cond, &b->mutex);
          ok = generation != b->generation;
        }
    }
  g_mutex_unlock (&b->mutex);
  return ok ? TRUE : aborted_error (error);
}

/* Opens every barrier: waiters see the flag when they wake. */
static void
cpu_abort (CpuBackend *self)
{
  g_atomic_int_set (&self->aborted, 1);
  CpuBarrier *all[1] = { &self->world };
  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    {
      g_mutex_lock (&all[i]->mutex);
      g_cond_broadcast (&all[i]->cond);
      g_mutex_unlock (&all[i]->mutex);
    }
  for (guint i = 0; i < self->groups->len; i++)
    {
      CpuGroup *g = g_ptr_array_index (self->groups, i);
      g_mutex_lock (&g->barrier.mutex);
      g_cond_broadcast (&g->barrier.cond);
      g_mutex_unlock (&g->barrier.mutex);
    }
}

static void
cpu_reset_barrier (CpuBarrier *b)
{
  g_mutex_lock (&b->mutex);
  b->waiting = 0;
  b->generation++;
  g_mutex_unlock (&b->mutex);
}

static void
cpu_group_free (gpointer data)
{
  CpuGroup *g = data;
  cpu_barrier_clear (&g->barrier);
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
  cpu_barrier_clear (&self->world);
  g_mutex_clear (&self->error_mutex);
  g_clear_error (&self->first_error);
  g_free (self);
}

typedef struct
{
  CpuBackend *backend;
  ExecutorDevice *device;
  ExecutorDeviceFunc func;
  gpointer user_data;
} CpuThread;

static gpointer
cpu_thread_main (gpointer data)
{
  CpuThread *t = data;
  GError *error = NULL;
  if (!t->func (t->device, t->user_data, &error))
    {
      CpuBackend *self = t->backend;
      g_mutex_lock (&self->error_mutex);
      /* The device that failed first says why; the others only saw the abort. */
      if (self->first_error == NULL
          || (g_error_matches (self->first_error, EXECUTOR_ERROR, EXECUTOR_ERROR_ABORTED)
              && !g_error_matches (error, EXECUTOR_ERROR, EXECUTOR_ERROR_ABORTED)))
        {
          g_clear_error (&self->first_error);
          self->first_error = g_steal_pointer (&error);
        }
      g_mutex_unlock (&self->error_mutex);
      g_clear_error (&error);
      cpu_abort (self);
    }
  return NULL;
}

static gboolean
cpu_run (ExecutorBackend *backend, ExecutorDeviceFunc func, gpointer user_data, GError **error)
{
  CpuBackend *self = (CpuBackend *) backend;
  guint n = backend->n_devices;
  g_autofree CpuThread *threads = g_new0 (CpuThread, n);
  g_autofree GThread **handles = g_new0 (GThread *, n);

  g_atomic_int_set (&self->aborted, 0);
  g_clear_error (&self->first_error);
  for (guint i = 0; i < n; i++)
    {
      GError *local = NULL;
      threads[i] = (CpuThread){ self, backend->devices[i], func, user_data };
      g_autofree char *name = g_strdup_printf ("shardscope-dev%u", i);
      handles[i] = g_thread_try_new (name, cpu_thread_main, &threads[i], &local);
      if (handles[i] == NULL)
        {
          g_mutex_lock (&self->error_mutex);
          g_clear_error (&self->first_error);
          g_set_error (&self->first_error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                       "cannot start the thread of device %u: %s", i, local->message);
          g_mutex_unlock (&self->error_mutex);
          g_error_free (local);
          cpu_abort (self);
          break;
        }
    }
  for (guint i = 0; i < n; i++)
    if (handles[i])
      g_thread_join (handles[i]);

  /* Barriers left half-way by an abort start clean for the next run. */
  cpu_reset_barrier (&self->world);
  for (guint i = 0; i < self->groups->len; i++)
    cpu_reset_barrier (&((CpuGroup *) g_ptr_array_index (self->groups, i))->barrier);
  g_atomic_int_set (&self->aborted, 0);

  if (self->first_error)
    {
      g_propagate_error (error, g_steal_pointer (&self->first_error));
      return FALSE;
    }
  return TRUE;
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
  if (!cpu_barrier_wait (self, &g->barrier, error))
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
        if (!cpu_barrier_wait (self, &g->barrier, error))
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
  return cpu_barrier_wait (self, &g->barrier, error);
}

static gboolean
cpu_barrier (ExecutorDevice *device, GError **error)
{
  CpuBackend *self = (CpuBackend *) device->backend;
  return cpu_barrier_wait (self, &self->world, error);
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
  cpu_barrier_init (&self->world, (guint) n);
  g_mutex_init (&self->error_mutex);
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
            cpu_barrier_init (&g->barrier, g->p);
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
