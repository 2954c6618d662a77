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

/* The devices of one group of a mesh axis (executor_group_leader), which meet in its
 * collectives. By rank, the coordinate on the axis: the members, and the buffers each
 * publishes for the current collective of a shared-memory backend. */
typedef enum
{
  EXECUTOR_SPMD_READY,
  EXECUTOR_SPMD_MID,
  EXECUTOR_SPMD_DONE,
  EXECUTOR_SPMD_N_STAGES,
} ExecutorSpmdStage;

typedef struct
{
  /* One barrier a stage: an arrival counted at one stage never completes another's meeting
   * (a member that left MID on an abort and went on to DONE made a peer still waiting at
   * MID see its meeting done, and that peer then waited at DONE for good). */
  ExecutorBarrier *barrier[EXECUTOR_SPMD_N_STAGES];
  guint p;
  ExecutorDevice **members;
  guint8 **send;
  guint8 **recv;
} ExecutorSpmdGroup;

typedef struct
{
  int aborted; /* atomic */
  GMutex error_mutex;
  GError *first_error;
  GPtrArray *barriers;          /* ExecutorBarrier, owned */
  GPtrArray *groups;            /* ExecutorSpmdGroup, owned */
  ExecutorSpmdGroup **group_of; /* [device index * PLANNER_MAX_AXES + axis] */
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
/* Waits for all @n even after an abort: for the meeting after which a member may free what
 * its peers read, where every member is sure to arrive (executor_spmd_collective's DONE). */
void executor_spmd_barrier_wait_all (ExecutorSpmd *self, ExecutorBarrier *barrier);
gboolean executor_spmd_is_aborted (ExecutorSpmd *self);
gboolean executor_spmd_aborted_error (GError **error);
/* Sets the flag and opens every barrier. */
void executor_spmd_abort (ExecutorSpmd *self);
/* One group per (axis, coordinates on the other axes) of @backend's mesh, each with a barrier
 * of its members. */
void executor_spmd_groups_init (ExecutorSpmd *self, ExecutorBackend *backend);
ExecutorSpmdGroup *executor_spmd_group (ExecutorSpmd *self, ExecutorDevice *device, guint axis);

/* A collective through memory every member reads (cpu: host memory; cuda: virtual devices on
 * one GPU). Members publish their buffers, meet (READY), and each reads what it needs; an
 * AllReduce sums one range per rank, in rank order so replicas are bit-identical, meets
 * again (MID) and copies the others' ranges; a last meeting (DONE) keeps a buffer from
 * being reused while a peer still reads it. */
/* (ExecutorSpmdStage: above ExecutorSpmdGroup, whose barriers it indexes.) */

/* How a backend moves memory for executor_spmd_collective. */
typedef struct
{
  /* Waits for every member of @group to reach @stage. */
  gboolean (*sync) (ExecutorDevice *device, ExecutorSpmdGroup *group, ExecutorSpmdStage stage,
                    GError **error);
  gboolean (*copy) (ExecutorDevice *device, void *dst, const void *src, gsize bytes,
                    GError **error);
  /* dst[i] = the sum over ranks, in rank order, of their send[first + i], i < @count (f32). */
  gboolean (*sum) (ExecutorDevice *device, ExecutorSpmdGroup *group, float *dst, gsize first,
                   gsize count, GError **error);
  void *(*scratch) (ExecutorDevice *device, gsize bytes, GError **error);
  void (*scratch_free) (ExecutorDevice *device, void *ptr);
} ExecutorSpmdMemory;

/* A backend's ExecutorBackendClass.collective on @mem (the wrapper checked the arguments). */
gboolean executor_spmd_collective (ExecutorSpmd *self, const ExecutorSpmdMemory *mem,
                                   ExecutorDevice *device, PlannerStepKind kind, guint axis,
                                   ExecutorBuffer *send, ExecutorBuffer *recv, gsize count,
                                   PlannerDType dtype, GError **error);

/* Calls @func on each of @devices in its own thread and waits for them all. */
gboolean executor_spmd_run (ExecutorSpmd *self, ExecutorDevice **devices, guint n_devices,
                            ExecutorDeviceFunc func, gpointer user_data, GError **error);

G_END_DECLS
