/* executor-train-private.h: what executor-train.c shares with the pipelined training step
 * (executor-pipeline-train.c): the labels, the conversions along a redistribution path and
 * the host block copies. Not installed, not API. */
#pragma once

#include "executor-backend.h"
#include "executor-tensors.h"
#include "executor-train.h"
#include "planner-plan.h"
#include "planner-redistribute.h"

G_BEGIN_DECLS

/* One op of the sharded training step, lowered: the layouts its strategy needs, what its
 * inputs contribute to the backward pass, and the redistribution paths between them and the
 * plan's stored layouts. */
typedef struct
{
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  PlannerLayout contrib[PLANNER_MAX_OPERANDS];
  const PlannerRedistPath *fwd_in[PLANNER_MAX_OPERANDS];  /* stored -> in */
  const PlannerRedistPath *fwd_out[PLANNER_MAX_OPERANDS]; /* out -> stored */
  const PlannerRedistPath *bwd_in[PLANNER_MAX_OPERANDS];  /* contrib -> grad layout */
  guint32 out_partial;
} ExecutorTrainOpLower;

/* The graph's logits output (@logits) and the label of each of its rows (a new array), as
 * executor-train.h describes them; NULL with @error. */
gint64 *executor_train_find_labels (PlannerGraph *graph, ExecutorTensors *sources,
                                    const ExecutorHostTensor *given, int *logits, GError **error);
/* A new host copy of @bytes of @buf; NULL with @error. */
gpointer executor_train_download (ExecutorDevice *dev, ExecutorBuffer *buf, gsize bytes,
                                  GError **error);
/* Cross-entropy of @rows rows of @v logits against @labels (EXECUTOR_TRAIN_IGNORE rows left
 * out), as torch's cross_entropy with ignore_index -100: returns the sum over the labelled
 * rows, and @dlogits is the gradient of that sum divided by @count, the labelled rows of the
 * whole batch (the mean's gradient; a micro-batch divides by the batch's count, not its own). */
double executor_train_cross_entropy (const float *logits, float *dlogits, const gint64 *labels,
                                     gint64 rows, gint64 v, gint64 count);
/* Bytes of @t's local shard under @l. */
gsize executor_train_local_bytes (const PlannerLayout *l, const PlannerMesh *mesh,
                                  const PlannerTensor *t);
/* @a: @t's local shard under @l in @buf. */
void executor_train_local_arg (ExecutorTensorArg *a, const PlannerLayout *l,
                               const PlannerMesh *mesh, const PlannerTensor *t,
                               ExecutorBuffer *buf);
/* A new buffer holding @in (laid out as @from) converted along @path. */
ExecutorBuffer *executor_train_convert (ExecutorDevice *dev, const PlannerRedistPath *path,
                                        const PlannerLayout *from, const PlannerMesh *mesh,
                                        const PlannerTensor *t, ExecutorBuffer *in,
                                        GError **error);
/* @acc += @add, f32, @bytes. */
gboolean executor_train_add_into (ExecutorDevice *dev, ExecutorBuffer *acc, ExecutorBuffer *add,
                                  gsize bytes, GError **error);
/* The redistributor's path for @t from @from to @to; NULL with @error naming @what. */
const PlannerRedistPath *executor_train_find_path (PlannerRedistributor *r,
                                                   const PlannerLayout *from,
                                                   const PlannerLayout *to,
                                                   const PlannerTensor *t, const char *what,
                                                   GError **error);
/* A table of per-device local shards, [tensor][device], every entry NULL, and its release
 * with whatever shards the step left in it. */
float ***executor_train_shards_new (guint n_tensors, guint n_devices);
void executor_train_shards_free (float ***shards, guint n_tensors, guint n_devices);
/* Lowers every op of @plan (executor-train.c says how), on the shapes of @tensors (NULL: the
 * graph's); FALSE with @error naming the op whose path the redistributor cannot make. */
gboolean executor_train_lower_ops (PlannerPlan *plan, PlannerRedistributor *r,
                                   const PlannerTensor *tensors, double sync_scale,
                                   ExecutorTrainOpLower *ops, const PlannerLayout *stored,
                                   PlannerLayout *grad_layout, ExecutorTrainTimes *times,
                                   GError **error);
/* The block at @offset of @local shape out of a row-major global array, or into it
 * (@to_global). */
void executor_train_block_copy (guint8 *global, const gint64 *gshape, guint rank,
                                const gint64 *offset, const gint64 *local, gsize es,
                                guint8 *block, gboolean to_global);

G_END_DECLS
