/* planner-plan-json.h: the plan file format, {"shardscope_plan": 1, ...} (planner/README.md,
 * "Plan JSON").
 *
 * A plan file holds everything a PlannerPlan holds: the model's source and hash, the mesh, the
 * whole hardware profile and the cost constants the estimates were made with, every op's
 * strategy and how it was decided, every tensor layout, every redistribution with its steps,
 * the propagation trace, the conflicts and the totals. Reading it back rebuilds the graph from
 * its source, refuses a model that changed since, and gives a plan equal to the saved one by
 * planner_plan_equal(), whatever the profile files on disk say today.
 */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-json.h"
#include "planner-plan.h"

G_BEGIN_DECLS

#define PLANNER_PLAN_JSON_VERSION 1

char *planner_plan_to_json (PlannerPlan *plan);
/* Atomic: a temporary file renamed over @path, never a half-written plan. */
gboolean planner_plan_save_json (PlannerPlan *plan, const char *path, GError **error);

/* Malformed or inconsistent input is PLANNER_ERROR_MALFORMED_FILE naming the field
 * ("ops[12].strategy.factors"); a model whose graph no longer has the saved hash is
 * PLANNER_ERROR_UNKNOWN_MODEL. */
PlannerPlan *planner_plan_from_json (const char *text, GError **error);
PlannerPlan *planner_plan_load_json (const char *path, GError **error);
/* As planner_plan_from_json() with the graph already at hand (the store keeps its models):
 * @graph must have the plan's hash. */
PlannerPlan *planner_plan_from_json_with_graph (const char *text, PlannerGraph *graph,
                                                GError **error);

/* The figures people and scripts look at first, as one object: ops, pinned, propagated,
 * defaulted, redistributions, collectives {kind: count}, comm_bytes, comm_time_us,
 * compute_time_us, step_time_us, memory_per_device_bytes, memory_capacity_bytes,
 * propagate_ms. It is the plan file's "summary" and the base of `propagate --json`. */
JsonNode *planner_plan_summary_to_json (PlannerPlan *plan);

/* One redistribution as the plan file writes it: tensor, consumer, slot, producer_side, from,
 * to, bytes, time_s, describe and its steps. */
JsonNode *planner_plan_redistribution_to_json (PlannerPlan *plan, guint i);

/* planner_json_to_string() (planner-json.h) writes plan files. */

G_END_DECLS
