/* Executing a planned redistribution turns the local shards of S into exactly the local
 * shards of D (issue 4, tests). */
#include "config.h"

#include <string.h>

#include "executor-error.h"
#include "executor-test-backend.h"
#include "executor-redistribute.h"

static const gint64 shape[] = { 12, 8, 4 };
#define RANK 3
#define NUMEL (12 * 8 * 4)

/* A random layout: each axis unused, partial (when allowed) or appended to a random dim. */
static void
random_layout (GRand *r, const PlannerMesh *mesh, gboolean allow_partial, PlannerLayout *l)
{
  for (;;)
    {
      planner_layout_init_replicated (l, RANK);
      guint order[PLANNER_MAX_AXES];
      for (guint a = 0; a < mesh->n_axes; a++)
        order[a] = a;
      /* Axes in random order, so a dim may be split minor-first too. */
      for (guint a = mesh->n_axes; a > 1; a--)
        {
          guint j = (guint)g_rand_int_range (r, 0, (gint32)a);
          guint t = order[a - 1];
          order[a - 1] = order[j];
          order[j] = t;
        }
      for (guint i = 0; i < mesh->n_axes; i++)
        {
          guint a = order[i];
          int pick = g_rand_int_range (r, allow_partial ? -2 : -1, RANK);
          if (pick == -2)
            l->partial |= 1u << a;
          else if (pick >= 0)
            l->axes[pick][l->n_axes[pick]++] = (guint8)a;
        }
      if (planner_layout_validate (l, mesh, shape, RANK, "t", NULL))
        return;
    }
}

typedef struct
{
  const PlannerMesh *mesh;
  const PlannerLayout *from;
  const PlannerLayout *to;
  const PlannerRedistPath *path;
  const float *global;
  float **results; /* per device */
} Job;

/* The local shard of @layout on @coords: integers, so partial shares sum exactly. */
static void
local_shard (const PlannerMesh *mesh, const PlannerLayout *layout, const guint *coords,
             const float *global, float *out, gint64 *local)
{
  gint64 off[RANK];
  planner_layout_local_shape (layout, mesh, shape, local);
  planner_layout_local_offset (layout, mesh, shape, coords, off);
  guint n, m = executor_partial_member (mesh, layout->partial, coords, &n);
  gint64 k = 0;
  for (gint64 i = 0; i < local[0]; i++)
    for (gint64 j = 0; j < local[1]; j++)
      for (gint64 l = 0; l < local[2]; l++)
        {
          float v = global[((off[0] + i) * shape[1] + off[1] + j) * shape[2] + off[2] + l];
          /* Member 0 keeps the rest, the others hold small integers. */
          float rest = 0;
          for (guint q = 1; q < n; q++)
            rest += (float)(((i * 7 + j * 3 + l + q) % 5) - 2);
          out[k++] = m == 0 ? v - rest : (float)(((i * 7 + j * 3 + l + m) % 5) - 2);
        }
}

static gboolean
run_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  Job *job = data;
  gint64 local[RANK];
  float host[NUMEL];
  local_shard (job->mesh, job->from, dev->coords, job->global, host, local);
  gsize bytes = (gsize)(local[0] * local[1] * local[2]) * 4;
  ExecutorBuffer *cur = executor_device_buffer_new (dev, NUMEL * 4, error);
  gboolean ok = cur && executor_device_upload (dev, cur, host, bytes, error);
  PlannerLayout before = *job->from;
  for (guint s = 0; ok && s < job->path->n_steps; s++)
    {
      const PlannerRedistStep *step = &job->path->steps[s];
      PlannerLayout after;
      ExecutorBuffer *out = NULL, *sa = NULL, *sb = NULL;
      ok = executor_redist_step_check (step, &before, job->mesh, "test", &after, error)
           && (out = executor_device_buffer_new (dev, NUMEL * 4, error))
           && (sa = executor_device_buffer_new (dev, NUMEL * 4, error))
           && (sb = executor_device_buffer_new (dev, NUMEL * 4, error))
           && executor_redist_step_run (dev, step, &before, shape, RANK, PLANNER_DTYPE_F32, cur,
                                        out, sa, sb, error);
      executor_device_buffer_free (dev, sa);
      executor_device_buffer_free (dev, sb);
      executor_device_buffer_free (dev, cur);
      cur = out;
      before = after;
    }
  if (ok)
    {
      planner_layout_local_shape (&before, job->mesh, shape, local);
      bytes = (gsize)(local[0] * local[1] * local[2]) * 4;
      job->results[dev->index] = g_malloc (bytes);
      ok = executor_device_download (dev, cur, job->results[dev->index], bytes, error);
    }
  executor_device_buffer_free (dev, cur);
  return ok;
}

static void
test_pairs (gconstpointer data)
{
  const char *mesh_text = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new ("test");
  g_autoptr (PlannerRedistributor) rd = planner_redistributor_new (mesh, hw);
  g_autoptr (ExecutorBackend) backend = executor_backend_new (test_backend (), mesh, &error);
  if (test_backend_skips (error))
    return;
  g_assert_no_error (error);
  GRand *r = g_rand_new_with_seed (42);
  float global[NUMEL];
  for (guint i = 0; i < NUMEL; i++)
    global[i] = (float)g_rand_int_range (r, -50, 50);
  guint n_dev = backend->n_devices, kinds[PLANNER_N_STEP_KINDS] = { 0 }, n_pairs = 0;

  for (guint pair = 0; pair < 150; pair++)
    {
      PlannerLayout from, to;
      random_layout (r, mesh, TRUE, &from);
      random_layout (r, mesh, FALSE, &to);
      const PlannerRedistPath *path
          = planner_redistributor_find (rd, &from, &to, shape, RANK, PLANNER_DTYPE_F32);
      g_assert_true (path->reachable);
      for (guint s = 0; s < path->n_steps; s++)
        kinds[path->steps[s].kind]++;

      g_autofree float **results = g_new0 (float *, n_dev);
      Job job = { mesh, &from, &to, path, global, results };
      g_assert_true (executor_backend_run (backend, run_device, &job, &error));
      g_assert_no_error (error);
      for (guint d = 0; d < n_dev; d++)
        {
          guint coords[PLANNER_MAX_AXES];
          gint64 local[RANK];
          float expect[NUMEL];
          planner_mesh_device_coords (mesh, d, coords);
          local_shard (mesh, &to, coords, global, expect, local);
          gsize n = (gsize)(local[0] * local[1] * local[2]);
          if (memcmp (expect, results[d], n * 4) != 0)
            {
              g_autofree char *a = planner_layout_to_string (&from, mesh);
              g_autofree char *b = planner_layout_to_string (&to, mesh);
              g_autofree char *p = planner_redist_path_describe (path, mesh);
              g_error ("%s -> %s via %s: device %u differs", a, b, p, d);
            }
          g_free (results[d]);
        }
      n_pairs++;
    }
  g_rand_free (r);
  g_test_message ("%u pairs on %s; steps: %u AllReduce, %u AllGather, %u ReduceScatter, "
                  "%u AllToAll, %u Slice",
                  n_pairs, mesh_text, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]);
  /* The random pairs exercise every kind of step. */
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    g_assert_cmpuint (kinds[k], >, 0);
}

/* A corrupted step (the wrong dim) is refused and named, never run silently. */
static void
test_corrupted_step (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("a=2,b=2", &error);
  PlannerLayout from, after;
  g_assert_true (planner_layout_parse ("[a,_,_]", mesh, &from, &error));
  PlannerRedistStep step = { 0 };
  step.kind = PLANNER_STEP_ALL_GATHER;
  step.axis = 0;
  step.dim = 1; /* a splits dim 0, not dim 1 */
  step.dim_to = -1;
  step.before = from;
  planner_layout_init_replicated (&step.after, RANK);
  g_assert_false (executor_redist_step_check (&step, &from, mesh, "x -> y", &after, &error));
  g_assert_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN);
  g_assert_nonnull (strstr (error->message, "x -> y"));
  g_assert_nonnull (strstr (error->message, "does not apply"));
}

/* A device that fails while the others are inside a collective: the run stops with that
 * device's error, and no member frees its buffers while a peer still reads them (each frees
 * its buffers as soon as the collective returns; under the asan setup a read after that is
 * a reported use-after-free, elsewhere a large freed buffer is unmapped and faults).
 * On a=4,b=2 the a-group of b=0 (devices 0, 2, 4, 6: more threads than this machine's
 * cores, so some finish their share while others still read) AllReduces 4 Mi floats;
 * device 1 fails after a delay that moves, case by case, through the time they spend
 * summing; the a-group of b=1 waits for it. */
typedef struct
{
  gulong delay_us;
  gsize count;
  gint ready; /* members of the b=0 group that have their buffers */
} AbortCase;

static gboolean
abort_in_collective (ExecutorDevice *device, gpointer data, GError **error)
{
  AbortCase *c = data;
  if (device->index == 1)
    {
      /* The delay counts from when the group can meet, not from its allocations. */
      while (g_atomic_int_get (&c->ready) < 4)
        g_usleep (50);
      g_usleep (c->delay_us);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED, "device 1 failed on purpose");
      return FALSE;
    }
  gsize bytes = c->count * sizeof (float);
  ExecutorBuffer *send = executor_device_buffer_new (device, bytes, error);
  ExecutorBuffer *recv = send ? executor_device_buffer_new (device, bytes, error) : NULL;
  if (device->coords[1] == 0)
    g_atomic_int_inc (&c->ready);
  gboolean ok = recv != NULL
                && executor_device_collective (device, PLANNER_STEP_ALL_REDUCE, 0, send, recv,
                                               c->count, PLANNER_DTYPE_F32, error);
  if (recv)
    executor_device_buffer_free (device, recv);
  if (send)
    executor_device_buffer_free (device, send);
  return ok;
}

static void
test_abort_in_collective (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("a=4,b=2", &error);
  g_autoptr (ExecutorBackend) backend = executor_backend_new (test_backend (), mesh, &error);
  if (test_backend_skips (error))
    return;
  g_assert_no_error (error);
  for (gulong delay = 0; delay <= 6000; delay += 500)
    {
      AbortCase c = { delay, (gsize)4 << 20, 0 };
      g_assert_false (executor_backend_run (backend, abort_in_collective, &c, &error));
      /* The device that failed says why, not one that only saw the abort. */
      g_assert_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED);
      g_assert_nonnull (strstr (error->message, "device 1 failed on purpose"));
      g_clear_error (&error);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/executor/redistribute/pairs/ab", "a=2,b=2", test_pairs);
  g_test_add_data_func ("/executor/redistribute/pairs/abc", "a=2,b=2,c=2", test_pairs);
  g_test_add_data_func ("/executor/redistribute/pairs/uneven", "a=3,b=2", test_pairs);
  g_test_add_func ("/executor/redistribute/corrupted-step", test_corrupted_step);
  g_test_add_func ("/executor/redistribute/abort-in-collective", test_abort_in_collective);
  return g_test_run ();
}
