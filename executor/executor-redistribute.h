/* executor-redistribute.h: one redistribution step, run on a device (semantics.md 6).
 *
 * A step on dim d becomes a pack (2-D copies that bring the chunks of d to the front), one
 * flat collective of the backend, and an unpack, so backends only implement NCCL-shaped
 * collectives. Every device of the mesh calls it for the same step (SPMD).
 */
#pragma once

#include "executor-backend.h"
#include "planner-redistribute.h"

G_BEGIN_DECLS

/* Which member a device at @coords is of the group that holds partial sums of one value
 * (the mesh axes set in @partial): mixed radix over those axes in axis order. @n: how many
 * members the group has. */
guint executor_partial_member (const PlannerMesh *mesh, guint32 partial, const guint *coords,
                               guint *n);

/* The layout after @step applied to @before, checked against what the step says it gives.
 * Refuses (EXECUTOR_ERROR_INVALID_PLAN, naming @what) a step that does not apply. */
gboolean executor_redist_step_check (const PlannerRedistStep *step, const PlannerLayout *before,
                                     const PlannerMesh *mesh, const char *what,
                                     PlannerLayout *after, GError **error);

/* Bytes each of the two scratch buffers of the step needs (0: none). */
gsize executor_redist_step_scratch_bytes (const PlannerRedistStep *step,
                                          const PlannerLayout *before, const PlannerMesh *mesh,
                                          const gint64 *shape, guint rank, PlannerDType dtype);

/* @in holds this device's shard in @before, @out receives it in the step's after layout.
 * @shape is the global shape; @dtype the storage dtype. */
gboolean executor_redist_step_run (ExecutorDevice *device, const PlannerRedistStep *step,
                                   const PlannerLayout *before, const gint64 *shape, guint rank,
                                   PlannerDType dtype, ExecutorBuffer *in, ExecutorBuffer *out,
                                   ExecutorBuffer *scratch_a, ExecutorBuffer *scratch_b,
                                   GError **error);

G_END_DECLS
