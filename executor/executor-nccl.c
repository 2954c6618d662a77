#define G_LOG_DOMAIN "executor-nccl"

#include "config.h"

#include <nccl.h>
#include <string.h>

#ifdef SHARDSCOPE_HAVE_MPI
#include <mpi.h>
#endif

#include "executor-cuda-private.h"
#include "executor-error.h"

/* The nccl backend: one device per GPU, each driven by its own host thread; buffers, copies
 * and kernels are the cuda backend's, collectives are NCCL's on one communicator per
 * (mesh axis, coordinates on the other axes) group, split from a world communicator
 * (ncclCommInitAll in one process; ncclCommInitRank with the unique id from MPI_Bcast
 * across processes started by mpirun).
 *
 * Group communicators are non-blocking, so no host thread ever sits inside NCCL: a call
 * returns at once and the device polls its stream and ncclCommGetAsyncError until the work
 * is done, another device failed, or the timeout passed; then it aborts its communicators
 * (ncclCommAbort) and the run ends with EXECUTOR_ERROR naming the collective. An aborted
 * backend refuses further runs: NCCL cannot reuse an aborted communicator. */

typedef struct
{
  ExecutorCudaDevice cuda;
  ncclComm_t world;
  ncclComm_t axis[PLANNER_MAX_AXES];
} NcclDevice;

typedef struct
{
  ExecutorCudaBackend cuda;
  int broken; /* atomic: communicators were aborted */
  gint64 timeout_us;
  int mpi_rank;
  int mpi_size;
  guint local_first; /* the mesh devices of this process: [local_first, + n_local) */
  guint n_local;
} NcclBackend;

static const char *
nccl_status (ncclResult_t r)
{
  return ncclGetErrorString (r);
}

static gboolean
nccl_failed (ExecutorDevice *device, ncclResult_t r, const char *what, GError **error)
{
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
               "device %u (GPU %d): NCCL %s failed: %s%s%s", device ? device->index : 0,
               device ? ((ExecutorCudaDevice *)device)->ordinal : -1, what, nccl_status (r),
               ncclGetLastError (NULL)[0] ? ": " : "", ncclGetLastError (NULL));
  return FALSE;
}

static void
abort_device (NcclBackend *self, NcclDevice *d)
{
  g_atomic_int_set (&self->broken, 1);
  for (guint a = 0; a < PLANNER_MAX_AXES; a++)
    if (d->axis[a])
      {
        ncclCommAbort (d->axis[a]);
        d->axis[a] = NULL;
      }
  if (d->world)
    {
      ncclCommAbort (d->world);
      d->world = NULL;
    }
}

/* Polls until @comm's pending calls are issued and @stream is idle. */
static gboolean
nccl_wait (NcclBackend *self, NcclDevice *d, ncclComm_t comm, const char *what, GError **error)
{
  ExecutorDevice *dev = &d->cuda.base;
  gint64 start = g_get_monotonic_time ();
  for (guint spin = 0;; spin++)
    {
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError (comm, &state);
      if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress))
        {
          nccl_failed (dev, r != ncclSuccess ? r : state, what, error);
          abort_device (self, d);
          return FALSE;
        }
      if (state == ncclSuccess)
        {
          cudaError_t s = cudaStreamQuery (d->cuda.stream);
          if (s == cudaSuccess)
            return TRUE;
          if (s != cudaErrorNotReady)
            {
              executor_cuda_ok (s, dev, what, error);
              abort_device (self, d);
              return FALSE;
            }
        }
      if (executor_spmd_is_aborted (&self->cuda.spmd))
        {
          abort_device (self, d);
          return executor_spmd_aborted_error (error);
        }
      gint64 waited = g_get_monotonic_time () - start;
      if (waited > self->timeout_us)
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                       "device %u (GPU %d): NCCL %s did not finish in %.0f s (a peer that "
                       "never joined, or a hung link); the communicators were aborted. "
                       "SHARDSCOPE_NCCL_TIMEOUT sets the limit in seconds",
                       dev->index, d->cuda.ordinal, what, (double)self->timeout_us / 1e6);
          abort_device (self, d);
          return FALSE;
        }
      /* Spin first so short collectives are timed without a sleep in them. */
      if (waited < 2000)
        g_thread_yield ();
      else
        g_usleep (50);
    }
}

static ncclDataType_t
nccl_type (PlannerDType dtype)
{
  return dtype == PLANNER_DTYPE_I64 ? ncclInt64 : ncclFloat32;
}

static gboolean
nccl_collective (ExecutorDevice *device, PlannerStepKind kind, guint axis, ExecutorBuffer *send,
                 ExecutorBuffer *recv, gsize count, PlannerDType dtype, GError **error)
{
  NcclBackend *self = (NcclBackend *)device->backend;
  NcclDevice *d = (NcclDevice *)device;
  ncclComm_t comm = d->axis[axis];
  cudaStream_t stream = d->cuda.stream;
  ncclResult_t r;

  if (comm == NULL)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                   "device %u: the NCCL communicators were aborted by an earlier failure; "
                   "make a new backend",
                   device->index);
      return FALSE;
    }
  /* The wrapper checked the kind, the dtype and the buffers. */
  switch (kind)
    {
    case PLANNER_STEP_ALL_GATHER:
      r = ncclAllGather (send->data, recv->data, count, nccl_type (dtype), comm, stream);
      break;
    case PLANNER_STEP_REDUCE_SCATTER:
      r = ncclReduceScatter (send->data, recv->data, count, ncclFloat32, ncclSum, comm, stream);
      break;
    case PLANNER_STEP_ALL_REDUCE:
      r = ncclAllReduce (send->data, recv->data, count, ncclFloat32, ncclSum, comm, stream);
      break;
    default:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
      r = ncclAlltoAll (send->data, recv->data, count, nccl_type (dtype), comm, stream);
#else
      {
        /* Before ncclAlltoAll: grouped point-to-point, chunk q to and from rank q. */
        guint p = device->backend->mesh.sizes[axis];
        gsize es = executor_storage_size (dtype);
        r = ncclGroupStart ();
        for (guint q = 0; q < p && (r == ncclSuccess || r == ncclInProgress); q++)
          {
            r = ncclSend (send->data + q * count * es, count, nccl_type (dtype), (int)q, comm,
                          stream);
            if (r == ncclSuccess || r == ncclInProgress)
              r = ncclRecv (recv->data + q * count * es, count, nccl_type (dtype), (int)q, comm,
                            stream);
          }
        ncclResult_t end = ncclGroupEnd ();
        if (r == ncclSuccess || r == ncclInProgress)
          r = end;
      }
#endif
      break;
    }
  const char *what = planner_step_kind_to_string (kind);
  if (r != ncclSuccess && r != ncclInProgress)
    {
      nccl_failed (device, r, what, error);
      abort_device (self, d);
      return FALSE;
    }
  return nccl_wait (self, d, comm, what, error);
}

static gboolean
nccl_barrier (ExecutorDevice *device, GError **error)
{
  NcclBackend *self = (NcclBackend *)device->backend;
  if (!executor_cuda_sync (device, error)
      || !executor_spmd_barrier_wait (&self->cuda.spmd, self->cuda.world, error))
    return FALSE;
  if (self->mpi_size <= 1)
    return TRUE;
  /* Across processes: a one-element AllReduce over the mesh's first axis would not reach
   * every rank; the world communicator does. */
  NcclDevice *d = (NcclDevice *)device;
  float *one = executor_cuda_scratch (device, sizeof (float), error);
  if (one == NULL)
    return FALSE;
  ncclResult_t r = ncclAllReduce (one, one, 1, ncclFloat32, ncclSum, d->world, d->cuda.stream);
  gboolean ok
      = (r == ncclSuccess || r == ncclInProgress || nccl_failed (device, r, "barrier", error))
        && nccl_wait (self, d, d->world, "barrier", error);
  executor_cuda_scratch_free (device, one);
  return ok && executor_cuda_sync (device, error);
}

static gboolean
nccl_run (ExecutorBackend *backend, ExecutorDeviceFunc func, gpointer user_data, GError **error)
{
  NcclBackend *self = (NcclBackend *)backend;
  if (g_atomic_int_get (&self->broken))
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                   "the NCCL communicators of this backend were aborted by an earlier "
                   "failure; make a new backend");
      return FALSE;
    }
  return executor_cuda_backend_run_local (&self->cuda, func, user_data, error);
}

static void
nccl_finalize (ExecutorBackend *backend)
{
  NcclBackend *self = (NcclBackend *)backend;
  for (guint i = 0; backend->devices && i < backend->n_devices; i++)
    {
      NcclDevice *d = (NcclDevice *)backend->devices[i];
      if (d == NULL || d->cuda.ordinal < 0)
        continue;
      cudaSetDevice (d->cuda.ordinal);
      for (guint a = 0; a < PLANNER_MAX_AXES; a++)
        if (d->axis[a])
          ncclCommDestroy (d->axis[a]);
      if (d->world)
        ncclCommDestroy (d->world);
    }
  executor_cuda_backend_teardown (&self->cuda);
  g_free (self);
}

static ExecutorBackendClass nccl_class = {
  .name = "nccl",
  .calibrates_links = TRUE,
  .finalize = nccl_finalize,
};

static gboolean
is_local (guint index, gpointer data)
{
  NcclBackend *self = data;
  return index >= self->local_first && index < self->local_first + self->n_local;
}

/* Polls every local communicator of @comms (stride @stride in NcclDevice units) until
 * non-blocking creation finished. */
static gboolean
wait_created (NcclBackend *self, ncclComm_t *const *comms, const char *what, GError **error)
{
  ExecutorBackend *base = &self->cuda.base;
  gint64 start = g_get_monotonic_time ();
  for (guint i = 0; i < base->n_devices; i++)
    {
      if (comms[i] == NULL)
        continue;
      ExecutorDevice *dev = base->devices[i];
      for (;;)
        {
          ncclResult_t state = ncclSuccess;
          ncclResult_t r = ncclCommGetAsyncError (*comms[i], &state);
          if (r != ncclSuccess)
            return nccl_failed (dev, r, what, error);
          if (state == ncclSuccess)
            break;
          if (state != ncclInProgress)
            return nccl_failed (dev, state, what, error);
          if (g_get_monotonic_time () - start > self->timeout_us)
            {
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                           "NCCL %s did not finish in %.0f s", what,
                           (double)self->timeout_us / 1e6);
              return FALSE;
            }
          g_usleep (100);
        }
    }
  return TRUE;
}

/* The world communicator: every local GPU in one call, or this process's ranks of a job
 * whose unique id rank 0 broadcast. */
static gboolean
make_world (NcclBackend *self, GError **error)
{
  ExecutorBackend *base = &self->cuda.base;
  NcclDevice *first = (NcclDevice *)base->devices[self->local_first];
  ncclResult_t r;
  if (self->mpi_size <= 1)
    {
      g_autofree ncclComm_t *comms = g_new0 (ncclComm_t, base->n_devices);
      g_autofree int *gpus = g_new0 (int, base->n_devices);
      for (guint i = 0; i < base->n_devices; i++)
        gpus[i] = ((ExecutorCudaDevice *)base->devices[i])->ordinal;
      r = ncclCommInitAll (comms, (int)base->n_devices, gpus);
      if (r != ncclSuccess)
        return nccl_failed (&first->cuda.base, r, "ncclCommInitAll", error);
      for (guint i = 0; i < base->n_devices; i++)
        ((NcclDevice *)base->devices[i])->world = comms[i];
      return TRUE;
    }
#ifdef SHARDSCOPE_HAVE_MPI
  ncclUniqueId id;
  memset (&id, 0, sizeof id);
  if (self->mpi_rank == 0 && (r = ncclGetUniqueId (&id)) != ncclSuccess)
    return nccl_failed (&first->cuda.base, r, "ncclGetUniqueId", error);
  if (MPI_Bcast (&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                   "MPI_Bcast of the NCCL unique id failed on rank %d", self->mpi_rank);
      return FALSE;
    }
  r = ncclGroupStart ();
  for (guint i = self->local_first; i < self->local_first + self->n_local; i++)
    {
      NcclDevice *d = (NcclDevice *)base->devices[i];
      cudaSetDevice (d->cuda.ordinal);
      if (r == ncclSuccess)
        r = ncclCommInitRank (&d->world, (int)base->n_devices, id, (int)i);
    }
  ncclResult_t end = ncclGroupEnd ();
  if (r == ncclSuccess)
    r = end;
  if (r != ncclSuccess)
    return nccl_failed (&first->cuda.base, r, "ncclCommInitRank", error);
  return TRUE;
#else
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NOT_BUILT,
               "started as one of %d processes but this shardscope is built without MPI; "
               "configure with -Dmpi=enabled",
               self->mpi_size);
  return FALSE;
#endif
}

/* One communicator per (axis, other coordinates): color = the group's leader, key = the
 * coordinate on the axis, so NCCL ranks in a group are mesh coordinates as the executor's. */
static gboolean
split_axes (NcclBackend *self, GError **error)
{
  ExecutorBackend *base = &self->cuda.base;
  const PlannerMesh *mesh = &base->mesh;
  for (guint a = 0; a < mesh->n_axes; a++)
    {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclResult_t r = ncclGroupStart ();
      g_autofree ncclComm_t **made = g_new0 (ncclComm_t *, base->n_devices);
      for (guint i = self->local_first; i < self->local_first + self->n_local; i++)
        {
          NcclDevice *d = (NcclDevice *)base->devices[i];
          int color = (int)executor_group_leader (mesh, &d->cuda.base, a);
          cudaSetDevice (d->cuda.ordinal);
          if (r == ncclSuccess || r == ncclInProgress)
            r = ncclCommSplit (d->world, color, (int)d->cuda.base.coords[a], &d->axis[a], &config);
          made[i] = &d->axis[a];
        }
      ncclResult_t end = ncclGroupEnd ();
      if (r == ncclSuccess || r == ncclInProgress)
        r = end;
      g_autofree char *what = g_strdup_printf ("ncclCommSplit for axis %s", mesh->names[a]);
      if (r != ncclSuccess && r != ncclInProgress)
        return nccl_failed (base->devices[self->local_first], r, what, error);
      if (!wait_created (self, made, what, error))
        return FALSE;
    }
  return TRUE;
}

/* Under mpirun: this process's rank and the number of ranks (1 and 1 otherwise). */
static gboolean
mpi_bootstrap (NcclBackend *self, GError **error)
{
  self->mpi_rank = 0;
  self->mpi_size = 1;
#ifdef SHARDSCOPE_HAVE_MPI
  /* Only when a launcher started us: a plain run never initializes MPI. */
  if (g_getenv ("OMPI_COMM_WORLD_SIZE") == NULL && g_getenv ("PMI_SIZE") == NULL
      && g_getenv ("PMIX_RANK") == NULL)
    return TRUE;
  int initialized = 0;
  MPI_Initialized (&initialized);
  if (!initialized)
    {
      int provided = 0;
      if (MPI_Init_thread (NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED, "MPI_Init_thread failed");
          return FALSE;
        }
    }
  MPI_Comm_rank (MPI_COMM_WORLD, &self->mpi_rank);
  MPI_Comm_size (MPI_COMM_WORLD, &self->mpi_size);
#else
  const char *size = g_getenv ("OMPI_COMM_WORLD_SIZE");
  if (size && g_ascii_strtoll (size, NULL, 10) > 1)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NOT_BUILT,
                   "started by mpirun as one of %s processes, but this shardscope is built "
                   "without MPI; configure with -Dmpi=enabled (needs libopenmpi-dev)",
                   size);
      return FALSE;
    }
#endif
  return TRUE;
}

ExecutorBackend *
executor_nccl_backend_new (const PlannerMesh *mesh, GError **error)
{
  g_return_val_if_fail (mesh != NULL, NULL);

  static gsize class_init = 0;
  if (g_once_init_enter (&class_init))
    {
      executor_cuda_class_fill (&nccl_class);
      nccl_class.run = nccl_run;
      nccl_class.collective = nccl_collective;
      nccl_class.barrier = nccl_barrier;
      g_once_init_leave (&class_init, 1);
    }

  g_autofree NcclBackend *self = g_new0 (NcclBackend, 1);
  if (!mpi_bootstrap (self, error))
    return NULL;
  guint64 n = planner_mesh_n_devices (mesh);
  int n_gpus = executor_cuda_device_count (error);
  if (n_gpus == 0)
    return NULL;
  if (n == 0 || n % (guint64)self->mpi_size != 0)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
                   "the mesh has %" G_GUINT64_FORMAT " devices, which %d processes cannot "
                   "share evenly",
                   n, self->mpi_size);
      return NULL;
    }
  self->n_local = (guint)(n / (guint64)self->mpi_size);
  self->local_first = (guint)self->mpi_rank * self->n_local;
  if (self->n_local > (guint)n_gpus)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
                   "the nccl backend runs one device per GPU: the mesh needs %u GPUs in this "
                   "process but %d answer%s; use --backend cuda for virtual devices on one GPU%s",
                   self->n_local, n_gpus, n_gpus == 1 ? "s" : "",
                   self->mpi_size > 1 ? "" : ", or mpirun across nodes");
      return NULL;
    }
  double timeout_s = 300;
  const char *env = g_getenv ("SHARDSCOPE_NCCL_TIMEOUT");
  if (env && g_ascii_strtod (env, NULL) > 0)
    timeout_s = g_ascii_strtod (env, NULL);
  self->timeout_us = (gint64)(timeout_s * 1e6);

  ExecutorBackend *base = &self->cuda.base;
  if (!executor_cuda_backend_setup (&self->cuda, &nccl_class, mesh, FALSE, 0, sizeof (NcclDevice),
                                    is_local, self, error)
      || !make_world (self, error) || !split_axes (self, error))
    {
      nccl_finalize (base);
      g_steal_pointer (&self);
      return NULL;
    }
  g_steal_pointer (&self);
  return base;
}
