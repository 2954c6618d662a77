/* planner-plan-private.h: what rebuilds a plan without recomputing it.
 *
 * planner_plan_finish() derives tensor layouts, redistributions, conflicts and totals from the
 * strategies with today's cost model. A plan read back from a file or the store must instead
 * hold exactly what was saved (its times were estimated with the profile it embeds), so its
 * readers set those fields directly. They are checked by the reader, not here.
 */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-plan.h"

G_BEGIN_DECLS

void planner_plan_set_tensor_layout (PlannerPlan *self, guint tensor, const PlannerLayout *layout);
/* Copies @redistribution and its steps; returns its index. */
guint planner_plan_append_redistribution (PlannerPlan *self,
                                          const PlannerRedistribution *redistribution);
void planner_plan_append_conflict (PlannerPlan *self, const char *message, guint redistribution);
void planner_plan_set_totals (PlannerPlan *self, const PlannerPlanTotals *totals);
/* Why @totals' counts and byte sums are not what the ops and redistributions of @plan give
 * (a file or row edited in one place only), or NULL when they are: "count 'pinned' is 3 but
 * the plan has 5". planner-plan-json.c. */
char *planner_plan_check_totals (PlannerPlan *plan, const PlannerPlanTotals *totals);

/* The training model (planner-plan-train.c) on a plan whose layouts and redistributions are
 * set: fills @totals' memory, breakdown, micro_batches and local_batch, and with @set_totals
 * also step_time_s, grad_sync_time_s, activation_bytes_per_device and
 * memory_per_device_bytes. FALSE when the micro-batch does not divide the local batch. */
gboolean planner_plan_compute_training (PlannerPlan *self, PlannerPlanTotals *totals,
                                        gboolean set_totals, GError **error);
/* The training model over a part of the plan (a pipeline stage, planner-pipeline.c): the ops
 * with @ops[i] TRUE, the parameters they use, the redistributions into them (a graph output's
 * final reduction with its producer). Sets activations_once: the bytes of @totals' activations
 * that are held once rather than per micro-batch in flight (full recompute's layer being
 * recomputed). @scope NULL: the whole plan, without a pipeline. */
typedef struct
{
  const gboolean *ops;
  double activations_once;
} PlannerTrainingScope;

gboolean planner_plan_compute_training_scope (PlannerPlan *self, PlannerTrainingScope *scope,
                                              PlannerPlanTotals *totals, gboolean set_totals,
                                              GError **error);
/* The gradient AllReduces of activations replicated while their users split the work (part of
 * backward_comm_time_s), counting only the users with @ops[i] TRUE (NULL: all). */
double planner_plan_activation_gradient_sync (PlannerPlan *self, const gboolean *ops);
/* planner-pipeline.c: the training model of a plan whose mesh has a pipeline axis of size > 1. */
gboolean planner_pipeline_compute_training (PlannerPlan *self, PlannerPlanTotals *totals,
                                            gboolean set_totals, GError **error);

/* A plan read back without the training figures (an old plan file, a store row): recompute
 * them, leaving the saved totals as they are. */
void planner_plan_refresh_training (PlannerPlan *self);
/* One op's forward and backward compute in the training model, under the strategy the plan
 * holds for it now, for the whole local batch (no micro-batches); @dropout: the graph's
 * dropout ops have p > 0. For the exact solver, which costs each candidate strategy. */
void planner_plan_op_train_time (PlannerPlan *self, guint op, gboolean dropout, double *forward,
                                 double *backward);
/* The optimizer step's time for @numel parameters a device updates (the training model's
 * overhead beyond kernel launches). */
double planner_plan_optimizer_step_time (PlannerPlan *self, double numel);

/* The one-number figures of PlannerPlanTotals, in the order plan files and the store keep them:
 * the counts (guint) first, then bytes (guint64) and seconds (double). Plan files name them as
 * here; the store's columns prefix the counts with "n_". */
typedef enum
{
  PLANNER_TOTAL_COUNT,
  PLANNER_TOTAL_BYTES,
  PLANNER_TOTAL_SECONDS,
} PlannerTotalKind;

typedef struct
{
  const char *name;
  PlannerTotalKind kind;
  gsize offset; /* in PlannerPlanTotals */
} PlannerTotalField;

#define PLANNER_N_TOTAL_FIELDS 14
#define PLANNER_N_TOTAL_COUNTS 5
extern const PlannerTotalField planner_total_fields[PLANNER_N_TOTAL_FIELDS];

/* The member of totals @t that field @f describes, as an lvalue of @type. */
#define PLANNER_TOTAL(t, f, type) (*(type *)((guint8 *)(t) + (f)->offset))

/* The "memory" object of `propagate --json`, the plan file and each pipeline stage
 * (planner-plan-json.c): the tensors' parts and total, then allocator, cuda_context,
 * cublas_workspace, nccl_buffers, runtime and reserved_total (planner/README.md). */
void planner_plan_json_add_memory (JsonBuilder *b, const PlannerMemory *memory);

G_END_DECLS
