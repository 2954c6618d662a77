#define G_LOG_DOMAIN "executor-spmd"

#include "config.h"

#include <string.h>

#include "executor-backend-private.h"
#include "executor-error.h"
#include "executor-spmd.h"

struct _ExecutorBarrier
{
  GMutex mutex;
  GCond cond;
  guint n;
  guint waiting;
  guint generation;
};

static void
barrier_free (gpointer data)
{
  ExecutorBarrier *b = data;
  g_mutex_clear (&b->mutex);
  g_cond_clear (&b->cond);
  g_free (b);
}

static void
group_free (gpointer data)
{
  ExecutorSpmdGroup *g = data;
  g_free (g->members);
  g_free (g->send);
  g_free (g->recv);
  g_free (g);
}

void
executor_spmd_init (ExecutorSpmd *self)
{
  memset (self, 0, sizeof *self);
  g_mutex_init (&self->error_mutex);
  self->barriers = g_ptr_array_new_with_free_func (barrier_free);
  self->groups = g_ptr_array_new_with_free_func (group_free);
}

void
executor_spmd_clear (ExecutorSpmd *self)
{
  g_clear_pointer (&self->groups, g_ptr_array_unref);
  g_clear_pointer (&self->group_of, g_free);
  g_clear_pointer (&self->barriers, g_ptr_array_unref);
  g_mutex_clear (&self->error_mutex);
  g_clear_error (&self->first_error);
}

ExecutorBarrier *
executor_spmd_barrier_new (ExecutorSpmd *self, guint n)
{
  ExecutorBarrier *b = g_new0 (ExecutorBarrier, 1);
  g_mutex_init (&b->mutex);
  g_cond_init (&b->cond);
  b->n = n;
  g_ptr_array_add (self->barriers, b);
  return b;
}

gboolean
executor_spmd_is_aborted (ExecutorSpmd *self)
{
  return g_atomic_int_get (&self->aborted) != 0;
}

gboolean
executor_spmd_aborted_error (GError **error)
{
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_ABORTED,
               "another device of the run failed first");
  return FALSE;
}

/* An abort opens an abortable wait; a member that leaves without the meeting taking place
 * takes its arrival back, so the barrier's next meeting (a group's barrier serves one stage
 * of every collective of the group) counts only who is there. */
static gboolean
barrier_meet (ExecutorSpmd *self, ExecutorBarrier *b, gboolean abortable)
{
  gboolean ok = TRUE;
  g_mutex_lock (&b->mutex);
  if (abortable && executor_spmd_is_aborted (self))
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
          while (generation == b->generation && !(abortable && executor_spmd_is_aborted (self)))
            g_cond_wait (&b->cond, &b->mutex);
          ok = generation != b->generation;
          if (!ok)
            b->waiting--;
        }
    }
  g_mutex_unlock (&b->mutex);
  return ok;
}

gboolean
executor_spmd_barrier_wait (ExecutorSpmd *self, ExecutorBarrier *b, GError **error)
{
  return barrier_meet (self, b, TRUE) ? TRUE : executor_spmd_aborted_error (error);
}

void
executor_spmd_barrier_wait_all (ExecutorSpmd *self, ExecutorBarrier *b)
{
  barrier_meet (self, b, FALSE);
}

void
executor_spmd_abort (ExecutorSpmd *self)
{
  g_atomic_int_set (&self->aborted, 1);
  /* Waiters see the flag when they wake. */
  for (guint i = 0; i < self->barriers->len; i++)
    {
      ExecutorBarrier *b = g_ptr_array_index (self->barriers, i);
      g_mutex_lock (&b->mutex);
      g_cond_broadcast (&b->cond);
      g_mutex_unlock (&b->mutex);
    }
}

void
executor_spmd_groups_init (ExecutorSpmd *self, ExecutorBackend *backend)
{
  const PlannerMesh *mesh = &backend->mesh;
  self->group_of = g_new0 (ExecutorSpmdGroup *, MAX (backend->n_devices, 1) * PLANNER_MAX_AXES);
  /* The leader, the group's lowest device id, creates it; the others find it there. */
  for (guint a = 0; a < mesh->n_axes; a++)
    for (guint i = 0; i < backend->n_devices; i++)
      {
        ExecutorDevice *d = backend->devices[i];
        guint leader = executor_group_leader (mesh, d, a);
        ExecutorSpmdGroup *g = self->group_of[leader * PLANNER_MAX_AXES + a];
        if (leader == i)
          {
            g = g_new0 (ExecutorSpmdGroup, 1);
            g->p = mesh->sizes[a];
            for (guint k = 0; k < EXECUTOR_SPMD_N_STAGES; k++)
              g->barrier[k] = executor_spmd_barrier_new (self, g->p);
            g->members = g_new0 (ExecutorDevice *, g->p);
            g->send = g_new0 (guint8 *, g->p);
            g->recv = g_new0 (guint8 *, g->p);
            g_ptr_array_add (self->groups, g);
          }
        g->members[d->coords[a]] = d;
        self->group_of[i * PLANNER_MAX_AXES + a] = g;
      }
}

ExecutorSpmdGroup *
executor_spmd_group (ExecutorSpmd *self, ExecutorDevice *device, guint axis)
{
  return self->group_of[device->index * PLANNER_MAX_AXES + axis];
}

gboolean
executor_spmd_collective (ExecutorSpmd *self, const ExecutorSpmdMemory *mem, ExecutorDevice *device,
                          PlannerStepKind kind, guint axis, ExecutorBuffer *send,
                          ExecutorBuffer *recv, gsize count, PlannerDType dtype, GError **error)
{
  ExecutorSpmdGroup *g = executor_spmd_group (self, device, axis);
  guint p = g->p, rank = device->coords[axis];
  gsize chunk = count * executor_storage_size (dtype);

  g->send[rank] = send->data;
  g->recv[rank] = recv->data;
  if (!mem->sync (device, g, EXECUTOR_SPMD_READY, error))
    return FALSE;

  gboolean ok = TRUE;
  switch (kind)
    {
    case PLANNER_STEP_ALL_GATHER:
      for (guint q = 0; ok && q < p; q++)
        ok = mem->copy (device, recv->data + q * chunk, g->send[q], chunk, error);
      break;
    case PLANNER_STEP_ALL_TO_ALL:
      for (guint q = 0; ok && q < p; q++)
        ok = mem->copy (device, recv->data + q * chunk, g->send[q] + rank * chunk, chunk, error);
      break;
    case PLANNER_STEP_REDUCE_SCATTER:
      ok = mem->sum (device, g, (float *)recv->data, rank * count, count, error);
      break;
    case PLANNER_STEP_ALL_REDUCE:
      {
        /* Each rank sums one range into its own result, then copies the others' ranges:
         * ranges are disjoint, so send == recv is safe. */
        gsize lo = count * rank / p, hi = count * (rank + 1) / p;
        float *tmp = mem->scratch (device, (hi - lo) * sizeof (float), error);
        ok = tmp != NULL && mem->sum (device, g, tmp, lo, hi - lo, error)
             && mem->copy (device, (float *)recv->data + lo, tmp, (hi - lo) * sizeof (float),
                           error);
        mem->scratch_free (device, tmp);
        /* Every member that met at READY goes through MID too, failed or not: the barrier
         * counts arrivals, so one that went on to DONE would complete its peers' MID meeting
         * and leave them waiting at DONE for it. */
        gboolean mid = mem->sync (device, g, EXECUTOR_SPMD_MID, ok ? error : NULL);
        ok = ok && mid;
        for (guint q = 0; ok && q < p; q++)
          if (q != rank)
            {
              gsize qlo = count * q / p, qhi = count * (q + 1) / p;
              ok = mem->copy (device, (float *)recv->data + qlo, (const float *)g->recv[q] + qlo,
                              (qhi - qlo) * sizeof (float), error);
            }
      }
      break;
    default:
      g_assert_not_reached ();
    }
  /* Nobody reuses a buffer a peer still reads: every member that met at READY meets here,
   * even when this one failed or another device aborted the run (the DONE meeting ignores
   * the abort), so none returns and frees its buffers while a peer is still reading them. */
  gboolean done = mem->sync (device, g, EXECUTOR_SPMD_DONE, ok ? error : NULL);
  return ok && done;
}

typedef struct
{
  ExecutorSpmd *spmd;
  ExecutorDevice *device;
  ExecutorDeviceFunc func;
  gpointer user_data;
} SpmdThread;

static void
keep_first_error (ExecutorSpmd *self, GError *error)
{
  g_mutex_lock (&self->error_mutex);
  /* The device that failed first says why; the others only saw the abort. */
  if (self->first_error == NULL
      || (g_error_matches (self->first_error, EXECUTOR_ERROR, EXECUTOR_ERROR_ABORTED)
          && !g_error_matches (error, EXECUTOR_ERROR, EXECUTOR_ERROR_ABORTED)))
    {
      g_clear_error (&self->first_error);
      self->first_error = error;
    }
  else
    g_error_free (error);
  g_mutex_unlock (&self->error_mutex);
}

static gpointer
spmd_thread_main (gpointer data)
{
  SpmdThread *t = data;
  GError *error = NULL;
  if (!t->func (t->device, t->user_data, &error))
    {
      if (error == NULL)
        g_set_error (&error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                     "device %u failed without saying why", t->device->index);
      keep_first_error (t->spmd, error);
      executor_spmd_abort (t->spmd);
      if (t->spmd->on_abort)
        t->spmd->on_abort (t->spmd->on_abort_data);
    }
  return NULL;
}

gboolean
executor_spmd_run (ExecutorSpmd *self, ExecutorDevice **devices, guint n, ExecutorDeviceFunc func,
                   gpointer user_data, GError **error)
{
  g_autofree SpmdThread *threads = g_new0 (SpmdThread, MAX (n, 1));
  g_autofree GThread **handles = g_new0 (GThread *, MAX (n, 1));

  g_atomic_int_set (&self->aborted, 0);
  g_clear_error (&self->first_error);
  for (guint i = 0; i < n; i++)
    {
      GError *local = NULL;
      threads[i] = (SpmdThread){ self, devices[i], func, user_data };
      g_autofree char *name = g_strdup_printf ("shardscope-dev%u", devices[i]->index);
      handles[i] = g_thread_try_new (name, spmd_thread_main, &threads[i], &local);
      if (handles[i] == NULL)
        {
          GError *e = g_error_new (EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED,
                                   "cannot start the thread of device %u: %s", devices[i]->index,
                                   local->message);
          g_error_free (local);
          g_mutex_lock (&self->error_mutex);
          g_clear_error (&self->first_error);
          self->first_error = e;
          g_mutex_unlock (&self->error_mutex);
          executor_spmd_abort (self);
          break;
        }
    }
  for (guint i = 0; i < n; i++)
    if (handles[i])
      g_thread_join (handles[i]);

  /* Barriers left half-way by an abort start clean for the next run. */
  for (guint i = 0; i < self->barriers->len; i++)
    {
      ExecutorBarrier *b = g_ptr_array_index (self->barriers, i);
      g_mutex_lock (&b->mutex);
      b->waiting = 0;
      b->generation++;
      g_mutex_unlock (&b->mutex);
    }
  g_atomic_int_set (&self->aborted, 0);

  if (self->first_error)
    {
      g_propagate_error (error, g_steal_pointer (&self->first_error));
      return FALSE;
    }
  return TRUE;
}
