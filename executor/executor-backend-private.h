/* executor-backend-private.h: what the backends (executor-cpu.c, executor-cuda.c,
 * executor-nccl.c) and their kernels share: the buffer, the devices of a backend, and the
 * groups of a mesh axis. */
#pragma once

#include "executor-backend.h"

G_BEGIN_DECLS

/* Every backend's buffer: host memory (cpu) or device memory from the device's pool (cuda,
 * nccl). The executor_device_*() wrappers check ranges against @bytes, so a backend's
 * functions only move memory. */
struct _ExecutorBuffer
{
  gsize bytes;
  guint8 *data;
};

/* FALSE with EXECUTOR_ERROR_NO_DEVICE unless @mesh has 1 to @max devices, which backend
 * @name runs as virtual devices. */
gboolean executor_backend_check_size (const char *name, const PlannerMesh *mesh, guint max,
                                      GError **error);
/* Fills @self for @mesh: @klass, and one zeroed device of @device_size bytes per mesh
 * device (a backend's device struct, ExecutorDevice first) with its index and coordinates. */
void executor_backend_init (ExecutorBackend *self, const ExecutorBackendClass *klass,
                            const PlannerMesh *mesh, gsize device_size);
/* Frees the devices executor_backend_init made. */
void executor_backend_clear (ExecutorBackend *self);
/* The group of mesh axis @axis that holds @device: the devices that share its coordinates
 * on every other axis. Its leader (the id a backend names the group by) is the member at
 * coordinate 0, the group's lowest device id. */
guint executor_group_leader (const PlannerMesh *mesh, const ExecutorDevice *device, guint axis);

G_END_DECLS
