/* planner-plan-private.h: what rebuilds a plan without recomputing it.
 *
 * planner_plan_finish() derives tensor layouts, redistributions, conflicts and totals from the
 * strategies with today's cost model. A plan read back from a file or the store must instead
 * hold exactly what was saved (its times were estimated with the profile it embeds), so its
 * readers set those fields directly. They are checked by the reader, not here.
 */
#pragma once

#include "planner-plan.h"

G_BEGIN_DECLS

void planner_plan_set_tensor_layout (PlannerPlan *self, guint tensor, const PlannerLayout *layout);
/* Copies @redistribution and its steps; returns its index. */
guint planner_plan_append_redistribution (PlannerPlan *self,
                                          const PlannerRedistribution *redistribution);
void planner_plan_append_conflict (PlannerPlan *self, const char *message, guint redistribution);
void planner_plan_set_totals (PlannerPlan *self, const PlannerPlanTotals *totals);

G_END_DECLS
