#define G_LOG_DOMAIN "executor-backend"

#include "config.h"

#include <string.h>

#include "executor-backend-private.h"
#include "executor-error.h"

typedef ExecutorBackend *(*BackendNew) (const PlannerMesh *mesh, GError **error);

typedef struct
{
  const char *name;
  BackendNew new_func; /* NULL: not built; @option says how to build it */
  const char *option;
} BackendEntry;

/* The GPU backends are in this table when their Meson option built them. */
static const BackendEntry backends[] = {
  { "cpu", executor_cpu_backend_new, NULL },
#ifdef SHARDSCOPE_HAVE_CUDA
  { "cuda", executor_cuda_backend_new, NULL },
#else
  { "cuda", NULL, "-Dcuda=enabled" },
#endif
#ifdef SHARDSCOPE_HAVE_NCCL
  { "nccl", executor_nccl_backend_new, NULL },
#else
  { "nccl", NULL, "-Dnccl=enabled" },
#endif
};

const char *const *
executor_backend_names (void)
{
  static const char *names[G_N_ELEMENTS (backends) + 1];
  guint n = 0;
  for (guint i = 0; i < G_N_ELEMENTS (backends); i++)
    if (backends[i].new_func)
      names[n++] = backends[i].name;
  names[n] = NULL;
  return names;
}

ExecutorBackend *
executor_backend_new (const char *name, const PlannerMesh *mesh, GError **error)
{
  g_return_val_if_fail (name != NULL && mesh != NULL, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (backends); i++)
    {
      if (g_ascii_strcasecmp (name, backends[i].name) != 0)
        continue;
      if (backends[i].new_func == NULL)
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NOT_BUILT,
                       "backend %s is not built into this shardscope; configure with %s "
                       "(needs its toolkit), or use --backend cpu",
                       backends[i].name, backends[i].option);
          return NULL;
        }
      return backends[i].new_func (mesh, error);
    }
  g_autofree char *known = g_strjoinv (", ", (char **)executor_backend_names ());
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNKNOWN_BACKEND,
               "unknown backend '%s'; this build has: %s", name, known);
  return NULL;
}

void
executor_backend_free (ExecutorBackend *self)
{
  if (self == NULL)
    return;
  self->klass->finalize (self);
}

const char *
executor_backend_get_name (ExecutorBackend *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return self->klass->name;
}

const PlannerMesh *
executor_backend_get_mesh (ExecutorBackend *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  return &self->mesh;
}

guint
executor_backend_get_n_devices (ExecutorBackend *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->n_devices;
}

ExecutorDevice *
executor_backend_get_device (ExecutorBackend *self, guint index)
{
  g_return_val_if_fail (self != NULL && index < self->n_devices, NULL);
  return self->devices[index];
}

gboolean
executor_backend_calibrates_links (ExecutorBackend *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->klass->calibrates_links;
}

gboolean
executor_backend_uses_host_memory (ExecutorBackend *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->klass->host_memory;
}

guint64
executor_backend_memory_available (ExecutorBackend *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->klass->memory_available ? self->klass->memory_available (self) : 0;
}

gboolean
executor_backend_run (ExecutorBackend *self, ExecutorDeviceFunc func, gpointer user_data,
                      GError **error)
{
  g_return_val_if_fail (self != NULL && func != NULL, FALSE);
  return self->klass->run (self, func, user_data, error);
}

PlannerDType
executor_storage_dtype (PlannerDType dtype)
{
  return dtype == PLANNER_DTYPE_I64 ? PLANNER_DTYPE_I64 : PLANNER_DTYPE_F32;
}

guint
executor_storage_size (PlannerDType dtype)
{
  return dtype == PLANNER_DTYPE_I64 ? 8 : 4;
}

ExecutorBuffer *
executor_device_buffer_new (ExecutorDevice *device, gsize bytes, GError **error)
{
  return device->backend->klass->buffer_new (device, bytes, error);
}

void
executor_device_buffer_free (ExecutorDevice *device, ExecutorBuffer *buffer)
{
  if (buffer != NULL)
    device->backend->klass->buffer_free (device, buffer);
}

/* The wrappers check what every backend would: a backend's functions only move memory. */
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

gboolean
executor_device_upload (ExecutorDevice *device, ExecutorBuffer *dst, const void *src, gsize bytes,
                        GError **error)
{
  return check_range (device, dst, 0, bytes, "upload", error)
         && device->backend->klass->upload (device, dst, 0, src, bytes, error);
}

gboolean
executor_device_download (ExecutorDevice *device, ExecutorBuffer *src, void *dst, gsize bytes,
                          GError **error)
{
  return check_range (device, src, 0, bytes, "download", error)
         && device->backend->klass->download (device, src, 0, dst, bytes, error);
}

gboolean
executor_device_copy_2d (ExecutorDevice *device, ExecutorBuffer *dst, gsize dst_offset,
                         gsize dst_pitch, ExecutorBuffer *src, gsize src_offset, gsize src_pitch,
                         gsize width, gsize height, GError **error)
{
  if (height == 0 || width == 0)
    return TRUE;
  gsize dst_span = (height - 1) * dst_pitch + width, src_span = (height - 1) * src_pitch + width;
  return check_range (device, dst, dst_offset, dst_span, "2-D copy (destination)", error)
         && check_range (device, src, src_offset, src_span, "2-D copy (source)", error)
         && device->backend->klass->copy_2d (device, dst, dst_offset, dst_pitch, src, src_offset,
                                             src_pitch, width, height, error);
}

gboolean
executor_device_collective (ExecutorDevice *device, PlannerStepKind kind, guint axis,
                            ExecutorBuffer *send, ExecutorBuffer *recv, gsize count,
                            PlannerDType dtype, GError **error)
{
  g_return_val_if_fail (kind != PLANNER_STEP_SLICE, FALSE);
  g_return_val_if_fail (axis < device->backend->mesh.n_axes, FALSE);

  gsize p = device->backend->mesh.sizes[axis], chunk = count * executor_storage_size (dtype);
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
  return check_range (device, send, 0, send_bytes, "collective send", error)
         && check_range (device, recv, 0, recv_bytes, "collective receive", error)
         && device->backend->klass->collective (device, kind, axis, send, recv, count, dtype,
                                                error);
}

gboolean
executor_device_run_op (ExecutorDevice *device, const ExecutorOpCall *call, GError **error)
{
  ExecutorKernelFunc kernel = device->backend->klass->kernels[call->op->type];
  if (kernel == NULL)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "%s: backend %s has no kernel for %s", call->op->name,
                   device->backend->klass->name, planner_op_type_to_string (call->op->type));
      return FALSE;
    }
  return kernel (device, call, error);
}

gboolean
executor_device_barrier (ExecutorDevice *device, GError **error)
{
  return device->backend->klass->barrier (device, error);
}

void
executor_device_timer_begin (ExecutorDevice *device)
{
  device->backend->klass->timer_begin (device);
}

double
executor_device_timer_end (ExecutorDevice *device)
{
  return device->backend->klass->timer_end (device);
}

gboolean
executor_backend_check_size (const char *name, const PlannerMesh *mesh, guint max, GError **error)
{
  guint64 n = planner_mesh_n_devices (mesh);
  if (n == 0 || n > max)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
                   "the %s backend runs 1 to %u virtual devices; the mesh has %" G_GUINT64_FORMAT,
                   name, max, n);
      return FALSE;
    }
  return TRUE;
}

void
executor_backend_init (ExecutorBackend *self, const ExecutorBackendClass *klass,
                       const PlannerMesh *mesh, gsize device_size)
{
  guint n = (guint)planner_mesh_n_devices (mesh);
  g_assert (device_size >= sizeof (ExecutorDevice));
  self->klass = klass;
  self->mesh = *mesh;
  self->n_devices = n;
  self->devices = g_new0 (ExecutorDevice *, MAX (n, 1));
  for (guint i = 0; i < n; i++)
    {
      ExecutorDevice *d = g_malloc0 (device_size);
      d->backend = self;
      d->index = i;
      planner_mesh_device_coords (mesh, i, d->coords);
      self->devices[i] = d;
    }
}

void
executor_backend_clear (ExecutorBackend *self)
{
  for (guint i = 0; self->devices && i < self->n_devices; i++)
    g_free (self->devices[i]);
  g_clear_pointer (&self->devices, g_free);
}

guint
executor_group_leader (const PlannerMesh *mesh, const ExecutorDevice *device, guint axis)
{
  guint coords[PLANNER_MAX_AXES];
  memcpy (coords, device->coords, sizeof coords);
  coords[axis] = 0;
  return (guint)planner_mesh_device_id (mesh, coords);
}
