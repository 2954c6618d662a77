/* executor-spmd.h: one host thread per device, barriers an abort opens, the first error.
 *
 * What every backend's `run` and `barrier` share (cpu, cuda, nccl): a failed or cancelled
 * device never leaves the others waiting, and the error reported is the one of the device
 * that failed first, not the "aborted" of the devices it stopped.
 */
#pragma once

#include "executor-backend.h"

G_BEGIN_DECLS

typedef struct _ExecutorBarrier ExecutorBarrier;

typedef struct
{
  int aborted; /* atomic */
  GMutex error_mutex;
  GError *first_error;
  GPtrArray *barriers; /* ExecutorBarrier, owned */
  /* Called once per failing device, after the abort flag is set and every barrier opened:
   * a backend stops what a barrier cannot (an NCCL communicator, say). */
  void (*on_abort) (gpointer data);
  gpointer on_abort_data;
} ExecutorSpmd;

void executor_spmd_init (ExecutorSpmd *self);
void executor_spmd_clear (ExecutorSpmd *self);
/* A barrier of @n threads, owned by @self. */
ExecutorBarrier *executor_spmd_barrier_new (ExecutorSpmd *self, guint n);
/* FALSE with EXECUTOR_ERROR_ABORTED when another device failed. */
gboolean executor_spmd_barrier_wait (ExecutorSpmd *self, ExecutorBarrier *barrier, GError **error);
gboolean executor_spmd_is_aborted (ExecutorSpmd *self);
gboolean executor_spmd_aborted_error (GError **error);
/* Sets the flag and opens every barrier. */
void executor_spmd_abort (ExecutorSpmd *self);
/* Calls @func on each of @devices in its own thread and waits for them all. */
gboolean executor_spmd_run (ExecutorSpmd *self, ExecutorDevice **devices, guint n_devices,
                            ExecutorDeviceFunc func, gpointer user_data, GError **error);

G_END_DECLS
