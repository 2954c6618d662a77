/* planner-propagate.h: from pins to a full plan (semantics.md 9).
 *
 * MindSpore's sharding propagation, made deterministic and explainable: pinned seeds in
 * topological order, FIFO BFS forward and backward (never through another pinned op), each
 * reached op taking the strategy of least redistribution cost to its decided neighbours,
 * with the tie-break order of semantics.md, and every decision recorded as a trace step.
 */
#pragma once

#include "planner-pin.h"
#include "planner-plan.h"

G_BEGIN_DECLS

typedef struct
{
  /* Tied parameters whose users want different layouts: FALSE refuses the plan. */
  gboolean allow_tied_redistribution;
} PlannerPropagateOptions;

void planner_propagate_options_init (PlannerPropagateOptions *options);

/* @pins: PlannerPin*, in any order (the plan does not depend on it). */
PlannerPlan *planner_propagate (PlannerGraph *graph, const PlannerMesh *mesh,
                                const PlannerHardware *hw, GPtrArray *pins,
                                const PlannerPropagateOptions *options, GError **error);

/* The strategy an unreached op gets: its batch factor (dim 0 of its first output) over every
 * axis that divides it, else replicated. */
void planner_default_strategy (const PlannerOpRule *rule, const PlannerMesh *mesh,
                               PlannerStrategy *strategy);

G_END_DECLS
