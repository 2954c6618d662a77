#define G_LOG_DOMAIN "executor-redistribute"

#include "config.h"

#include <string.h>

#include "executor-error.h"
#include "executor-redistribute.h"

gboolean
executor_redist_step_check (const PlannerRedistStep *step, const PlannerLayout *before,
                            const PlannerMesh *mesh, const char *what, PlannerLayout *after,
                            GError **error)
{
  g_autofree char *b = planner_layout_to_string (before, mesh);
  g_autofree char *desc = planner_redist_step_describe (step, mesh);
  if (step->axis >= mesh->n_axes
      || !planner_redist_step_apply (step->kind, step->axis, step->dim, step->dim_to, before,
                                     after))
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                   "%s: step %s does not apply to a tensor laid out as %s", what, desc, b);
      return FALSE;
    }
  if (!planner_layout_equal (after, &step->after))
    {
      g_autofree char *got = planner_layout_to_string (after, mesh);
      g_autofree char *said = planner_layout_to_string (&step->after, mesh);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                   "%s: step %s turns %s into %s, but the plan says %s", what, desc, b, got,
                   said);
      return FALSE;
    }
  return TRUE;
}

static gint64
prod (const gint64 *shape, guint from, guint to)
{
  gint64 n = 1;
  for (guint d = from; d < to; d++)
    n *= shape[d];
  return n;
}

gsize
executor_redist_step_scratch_bytes (const PlannerRedistStep *step, const PlannerLayout *before,
                                    const PlannerMesh *mesh, const gint64 *shape, guint rank,
                                    PlannerDType dtype)
{
  if (step->kind == PLANNER_STEP_SLICE || step->kind == PLANNER_STEP_ALL_REDUCE)
    return 0;
  gint64 local[PLANNER_MAX_RANK];
  planner_layout_local_shape (before, mesh, shape, local);
  gint64 n = prod (local, 0, rank);
  if (step->kind == PLANNER_STEP_ALL_GATHER)
    n *= mesh->sizes[step->axis];
  return (gsize) n * executor_storage_size (dtype);
}

/* [A][P][B] <-> [P][A][B], rows of @b bytes. */
static gboolean
move_parts (ExecutorDevice *device, gboolean to_front, ExecutorBuffer *dst, ExecutorBuffer *src,
            gsize a, gsize p, gsize b, GError **error)
{
  for (gsize q = 0; q < p; q++)
    {
      gboolean ok = to_front ? executor_device_copy_2d (device, dst, q * a * b, b, src, q * b,
                                                        p * b, b, a, error)
                             : executor_device_copy_2d (device, dst, q * b, p * b, src,
                                                        q * a * b, b, b, a, error);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

gboolean
executor_redist_step_run (ExecutorDevice *device, const PlannerRedistStep *step,
                          const PlannerLayout *before, const gint64 *shape, guint rank,
                          PlannerDType dtype, ExecutorBuffer *in, ExecutorBuffer *out,
                          ExecutorBuffer *scratch_a, ExecutorBuffer *scratch_b, GError **error)
{
  const PlannerMesh *mesh = &device->backend->mesh;
  gsize es = executor_storage_size (dtype), p = mesh->sizes[step->axis];
  guint axis = step->axis, c = device->coords[axis];
  gint64 ls[PLANNER_MAX_RANK];
  planner_layout_local_shape (before, mesh, shape, ls);
  gsize n = (gsize) prod (ls, 0, rank);

  switch (step->kind)
    {
    case PLANNER_STEP_ALL_REDUCE:
      return executor_device_collective (device, step->kind, axis, in, out, n, dtype, error);

    case PLANNER_STEP_SLICE:
      {
        /* Keep chunk c of dim d: no communication. */
        gsize a = (gsize) prod (ls, 0, step->dim), b = n / a / p * es;
        return executor_device_copy_2d (device, out, 0, b, in, c * b, p * b, b, a, error);
      }

    case PLANNER_STEP_ALL_GATHER:
      {
        /* Gathered chunks arrive rank-major; dim d is rank-major only after dim 0. */
        gsize a = (gsize) prod (ls, 0, step->dim), b = n / a * es;
        if (a == 1)
          return executor_device_collective (device, step->kind, axis, in, out, n, dtype, error);
        return executor_device_collective (device, step->kind, axis, in, scratch_a, n, dtype,
                                           error)
               && move_parts (device, FALSE, out, scratch_a, a, p, b, error);
      }

    case PLANNER_STEP_REDUCE_SCATTER:
      {
        gsize a = (gsize) prod (ls, 0, step->dim), b = n / a / p * es;
        ExecutorBuffer *send = in;
        if (a > 1)
          {
            if (!move_parts (device, TRUE, scratch_a, in, a, p, b, error))
              return FALSE;
            send = scratch_a;
          }
        return executor_device_collective (device, step->kind, axis, send, out, n / p, dtype,
                                           error);
      }

    case PLANNER_STEP_ALL_TO_ALL:
      {
        /* Send chunk r of dim d2 to rank r; receive rank r's chunk of dim d1 from it. */
        guint d1 = step->dim, d2 = step->dim_to;
        gsize a2 = (gsize) prod (ls, 0, d2), b2 = n / a2 / p * es;
        ExecutorBuffer *send = in;
        if (a2 > 1)
          {
            if (!move_parts (device, TRUE, scratch_a, in, a2, p, b2, error))
              return FALSE;
            send = scratch_a;
          }
        gint64 chunk[PLANNER_MAX_RANK];
        memcpy (chunk, ls, sizeof chunk);
        chunk[d2] /= (gint64) p;
        gsize a1 = (gsize) prod (chunk, 0, d1), b1 = n / p / a1 * es;
        if (a1 == 1)
          return executor_device_collective (device, step->kind, axis, send, out, n / p, dtype,
                                             error);
        return executor_device_collective (device, step->kind, axis, send, scratch_b, n / p,
                                           dtype, error)
               && move_parts (device, FALSE, out, scratch_b, a1, p, b1, error);
      }

    default:
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN, "unknown step kind %d",
                   step->kind);
      return FALSE;
    }
}

guint
executor_partial_member (const PlannerMesh *mesh, guint32 partial, const guint *coords, guint *n)
{
  guint m = 0;
  *n = 1;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (partial & (1u << a))
      {
        m = m * mesh->sizes[a] + coords[a];
        *n *= mesh->sizes[a];
      }
  return m;
}
