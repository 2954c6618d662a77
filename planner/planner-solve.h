/* planner-solve.h: the exact minimum-cost plan under the same pins (semantics.md 9, last
 * paragraph; issue 17).
 *
 * The objective is the training step as semantics.md 7 composes it, op by op and edge by
 * edge (planner_solve_objective): forward and backward compute of every op (the training
 * model's kernel times), every redistribution and its transpose, the AllReduces of
 * activation gradients, and the parameter-gradient AllReduces (times sync_weight). Every op
 * not pinned may take any legal strategy (plus the variants that keep partial sums through
 * an op linear in an input that can arrive partial); pinned ops keep their pin.
 *
 * The solve is exact: variable elimination (dynamic programming over the op graph in an
 * elimination order of small tables, which is the chain and series-parallel DP where the graph
 * has that shape) gives the minimum and one plan that reaches it. Repeated blocks (layers with
 * the same ops, shapes and pins) are solved once: the first block of each kind is eliminated
 * down to its boundary ops, and every other block of that kind reuses the resulting table and
 * its choices. A memory limit is a hard constraint through a Lagrangian multiplier on a lower
 * bound of the memory per device: the result is then optimal (proven) or comes with its gap
 * to the dual bound. See docs/search.md.
 */
#pragma once

#include <gio/gio.h>

#include "planner-plan.h"

G_BEGIN_DECLS

typedef struct
{
  /* Weight of the parameter-gradient AllReduces in the objective (1: as semantics.md 7;
   * less where the training model overlaps them with the backward pass). */
  double sync_weight;
  /* Memory per device as the training model computes it; 0: no limit. */
  guint64 memory_limit;
  /* Solve each kind of repeated block once (FALSE: the whole graph as one problem). */
  gboolean reuse_blocks;
  /* Largest table one elimination step may build, in cells; beyond it the solve fails. */
  guint64 max_table_cells;
  /* Give up (G_IO_ERROR_CANCELLED) when cancelled. */
  GCancellable *cancellable;
} PlannerSolveOptions;

void planner_solve_options_init (PlannerSolveOptions *options);

typedef struct
{
  double objective_s;      /* of the returned plan, planner_solve_objective() */
  double bound_s;          /* proven lower bound of the objective over every legal plan */
  gboolean optimal;        /* objective_s == bound_s (up to rounding) */
  double gap;              /* (objective - bound) / objective, 0 when optimal */
  double seed_objective_s; /* of the plan the solve started from (greedy) */
  double solve_ms;
  guint n_vars;        /* ops with a choice (not pinned) */
  guint n_blocks;      /* repeated blocks found */
  guint n_block_kinds; /* distinct ones, each solved once */
  guint n_solves;      /* Lagrangian rounds (1 without a memory limit) */
  guint64 table_cells; /* cells of every table built */
  gboolean fits;       /* the plan's memory per device is within the limit (TRUE without one) */
} PlannerSolveReport;

/* The optimal plan with the pins of @seed (a finished plan, e.g. greedy propagation: its
 * pinned ops stay, everything else is chosen), the same graph, mesh, hardware, training
 * options, pins and policy. Decisions of chosen ops are PLANNER_DECIDED_PROPAGATED, each with a
 * trace step in op order that names its candidates and no neighbour (from_op -1), with, as
 * its edge cost, the cost of the terms the op takes part in (its own, and each tensor it
 * produces or reads) with every other op as solved, and the best other strategy there as the
 * runner-up with that cost: why the op has its strategy. */
PlannerPlan *planner_solve (PlannerPlan *seed, const PlannerSolveOptions *options,
                            PlannerSolveReport *report, GError **error);

/* The solver's objective of any finished plan: forward + backward compute and forward and
 * backward communication (from its totals), sync_weight x the parameter-gradient AllReduces
 * (one per parameter) and the optimizer step over each device's parameters (sharded by ZeRO
 * over their sync axes). The training step less its constant kernel-launch overhead and with
 * the gradient sync neither bucketed nor overlapped. */
double planner_solve_objective (PlannerPlan *plan, double sync_weight);

G_END_DECLS
