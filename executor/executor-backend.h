/* executor-backend.h: what a backend gives the executor (architecture.md, "Executor").
 *
 * A backend owns the devices of one mesh. Work runs SPMD: executor_backend_run() calls one
 * function once per device, concurrently (the CPU backend: one thread per virtual device;
 * a CUDA backend: one host thread per virtual device, each with its stream and allocation
 * pool; an NCCL backend: one host thread per local GPU, or one rank per process under MPI).
 * Inside that function the device calls the backend through the executor_device_*()
 * wrappers below: buffers, the local kernel of each op type, 2-D copies, and the collectives
 * over the group of devices that share every mesh coordinate but one axis. As with NCCL,
 * every device of a group calls the same collectives in the same order.
 *
 * Collectives are flat, NCCL-shaped: ranks in a group are the devices' coordinates on the
 * axis, chunks are contiguous and in rank order. The executor turns a redistribution step on
 * dim d into a pack (2-D copy), a flat collective and an unpack (executor-redistribute.c), so
 * a backend never sees layouts.
 *
 * Tensors are stored as f32 (f32, bf16 and f16 tensors alike: the CPU computes in f32) or
 * i64 (ids, labels); see executor_storage_dtype().
 */
#pragma once

#include <glib.h>

#include "planner-graph.h"
#include "planner-hardware.h"

G_BEGIN_DECLS

typedef struct _ExecutorBackend ExecutorBackend;
typedef struct _ExecutorBackendClass ExecutorBackendClass;
typedef struct _ExecutorDevice ExecutorDevice;
/* Device memory; what it holds is the backend's business (a host pointer, a device pointer
 * from a pool). */
typedef struct _ExecutorBuffer ExecutorBuffer;

/* One device of the mesh, as the function run on it sees it. Backends embed this first in
 * their own device struct. */
struct _ExecutorDevice
{
  ExecutorBackend *backend;
  guint index; /* row-major device id on the mesh */
  guint coords[PLANNER_MAX_AXES];
};

/* A local tensor as a kernel sees it: the shard's shape, never the global one. */
typedef struct
{
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  PlannerDType dtype; /* as stored: PLANNER_DTYPE_F32 or PLANNER_DTYPE_I64 */
  ExecutorBuffer *buffer;
} ExecutorTensorArg;

/* One op on one device. Everything a kernel needs to run on a shard comes from the rule
 * tables: local shapes from the strategy's layouts, and where a kernel needs global
 * positions (causal masks, rotary positions, vocab ranges), each factor's global offset. */
typedef struct
{
  const PlannerOp *op;           /* name, type and attrs (global attrs) */
  const PlannerOpRule *rule;     /* factor sizes are global */
  const PlannerStrategy *strategy;
  guint n_inputs;
  guint n_outputs;
  ExecutorTensorArg inputs[PLANNER_MAX_OPERANDS];
  ExecutorTensorArg outputs[PLANNER_MAX_OPERANDS];
  gint64 factor_offsets[PLANNER_MAX_FACTORS];
  /* The rule's bias inputs are added once, not once per partial shard: only on the device
   * at coordinate 0 of every axis over which the outputs are partial. */
  gboolean add_bias;
} ExecutorOpCall;

typedef gboolean (*ExecutorKernelFunc) (ExecutorDevice *device, const ExecutorOpCall *call,
                                        GError **error);
typedef gboolean (*ExecutorDeviceFunc) (ExecutorDevice *device, gpointer user_data,
                                        GError **error);

struct _ExecutorBackendClass
{
  const char *name;
  /* Whether its collective times measure the links of a real machine, so a calibration may
   * write them into a profile (cpu: shared memory, yes; cuda virtual devices: no). */
  gboolean calibrates_links;
  /* Whether its buffers are host memory (cpu), so a trial's host memory holds them too. */
  gboolean host_memory;

  void (*finalize) (ExecutorBackend *self);
  /* Calls @func on every device concurrently and waits. On the first failure the backend
   * aborts the others (their pending collectives fail with EXECUTOR_ERROR_ABORTED) and
   * returns that first error. */
  gboolean (*run) (ExecutorBackend *self, ExecutorDeviceFunc func, gpointer user_data,
                   GError **error);
  /* Bytes one device may still allocate, 0 when unknown. */
  guint64 (*memory_available) (ExecutorBackend *self);

  ExecutorBuffer *(*buffer_new) (ExecutorDevice *device, gsize bytes, GError **error);
  void (*buffer_free) (ExecutorDevice *device, ExecutorBuffer *buffer);
  gboolean (*upload) (ExecutorDevice *device, ExecutorBuffer *dst, gsize offset,
                      const void *src, gsize bytes, GError **error);
  gboolean (*download) (ExecutorDevice *device, ExecutorBuffer *src, gsize offset, void *dst,
                        gsize bytes, GError **error);
  /* @height rows of @width bytes, rows @src_pitch / @dst_pitch bytes apart
   * (cudaMemcpy2DAsync). */
  gboolean (*copy_2d) (ExecutorDevice *device, ExecutorBuffer *dst, gsize dst_offset,
                       gsize dst_pitch, ExecutorBuffer *src, gsize src_offset, gsize src_pitch,
                       gsize width, gsize height, GError **error);
  /* Over the group of mesh axis @axis that holds @device, p = size of the axis, @count
   * elements of @dtype per rank chunk:
   *   ALL_GATHER      send count      -> recv p * count, chunk r from rank r
   *   REDUCE_SCATTER  send p * count  -> recv count, the sum of chunk (my rank)   (f32 only)
   *   ALL_REDUCE      send count      -> recv count, the sum; send == recv allowed (f32 only)
   *   ALL_TO_ALL      send p * count  -> recv p * count, chunk r of mine goes to rank r
   * PLANNER_STEP_SLICE is no collective and is refused. */
  gboolean (*collective) (ExecutorDevice *device, PlannerStepKind kind, guint axis,
                          ExecutorBuffer *send, ExecutorBuffer *recv, gsize count,
                          PlannerDType dtype, GError **error);
  /* Waits for every device of the mesh (and for their queued work). */
  gboolean (*barrier) (ExecutorDevice *device, GError **error);
  /* Times the device's work between the two calls (host clock; CUDA events on a stream). */
  void (*timer_begin) (ExecutorDevice *device);
  double (*timer_end) (ExecutorDevice *device);

  /* The local kernel of each op type (planner-op-rule.h); every entry is set. */
  ExecutorKernelFunc kernels[PLANNER_N_OP_TYPES];
};

struct _ExecutorBackend
{
  const ExecutorBackendClass *klass;
  PlannerMesh mesh;
  guint n_devices;
  ExecutorDevice **devices; /* n_devices, owned by the backend */
};

/* Backends this build knows: "cpu" always; "cuda" and "nccl" when configured. */
const char *const *executor_backend_names (void);
/* A backend with one device per device of @mesh. An unknown name lists the known ones; a
 * backend this build left out says which option builds it. */
ExecutorBackend *executor_backend_new (const char *name, const PlannerMesh *mesh,
                                       GError **error);
void executor_backend_free (ExecutorBackend *self);
const char *executor_backend_get_name (ExecutorBackend *self);
const PlannerMesh *executor_backend_get_mesh (ExecutorBackend *self);
guint executor_backend_get_n_devices (ExecutorBackend *self);
ExecutorDevice *executor_backend_get_device (ExecutorBackend *self, guint index);
gboolean executor_backend_calibrates_links (ExecutorBackend *self);
gboolean executor_backend_uses_host_memory (ExecutorBackend *self);
guint64 executor_backend_memory_available (ExecutorBackend *self);
/* SPMD: see ExecutorBackendClass.run. */
gboolean executor_backend_run (ExecutorBackend *self, ExecutorDeviceFunc func,
                               gpointer user_data, GError **error);

/* How a tensor of @dtype is stored on every backend of this build. */
PlannerDType executor_storage_dtype (PlannerDType dtype);
guint executor_storage_size (PlannerDType dtype);

/* Calls on one device, from the function running on it. */
ExecutorBuffer *executor_device_buffer_new (ExecutorDevice *device, gsize bytes,
                                            GError **error);
void executor_device_buffer_free (ExecutorDevice *device, ExecutorBuffer *buffer);
gboolean executor_device_upload (ExecutorDevice *device, ExecutorBuffer *dst, const void *src,
                                 gsize bytes, GError **error);
gboolean executor_device_download (ExecutorDevice *device, ExecutorBuffer *src, void *dst,
                                   gsize bytes, GError **error);
gboolean executor_device_copy_2d (ExecutorDevice *device, ExecutorBuffer *dst, gsize dst_offset,
                                  gsize dst_pitch, ExecutorBuffer *src, gsize src_offset,
                                  gsize src_pitch, gsize width, gsize height, GError **error);
gboolean executor_device_collective (ExecutorDevice *device, PlannerStepKind kind, guint axis,
                                     ExecutorBuffer *send, ExecutorBuffer *recv, gsize count,
                                     PlannerDType dtype, GError **error);
gboolean executor_device_run_op (ExecutorDevice *device, const ExecutorOpCall *call,
                                 GError **error);
gboolean executor_device_barrier (ExecutorDevice *device, GError **error);
void executor_device_timer_begin (ExecutorDevice *device);
double executor_device_timer_end (ExecutorDevice *device);

/* The CPU backend (executor-cpu.c): one thread per device, OpenBLAS with one thread each. */
ExecutorBackend *executor_cpu_backend_new (const PlannerMesh *mesh, GError **error);
/* The CUDA backend (executor-cuda.c, -Dcuda): every device a stream on one GPU. */
ExecutorBackend *executor_cuda_backend_new (const PlannerMesh *mesh, GError **error);
/* The NCCL backend (executor-nccl.c, -Dnccl): one device per GPU; under mpirun, this
 * process's share of the mesh. */
ExecutorBackend *executor_nccl_backend_new (const PlannerMesh *mesh, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ExecutorBackend, executor_backend_free)

G_END_DECLS
