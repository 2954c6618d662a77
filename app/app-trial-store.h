/* app-trial-store.h: a trial run kept with its plan in the store, one measurement per op and
 * per redistribution (the window's trial runs and `shardscope-cli run db:ID` alike). */
#pragma once

#include "executor-trial.h"
#include "planner-store.h"

G_BEGIN_DECLS

/* Stores @result, a trial run of @plan, the stored plan @plan_id; redistributions by their
 * index in @plan, named as the store names them. Returns the run's id, 0 on error. */
gint64 app_trial_store_add (PlannerStore *store, gint64 plan_id, PlannerPlan *plan,
                            const ExecutorTrialResult *result, GError **error);

G_END_DECLS
