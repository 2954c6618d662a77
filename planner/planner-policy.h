/* planner-policy.h: named lists of pin rules keyed by model family (semantics.md 5), like
 * ShardFormer's policies. Built-ins (data/policies/): megatron, megatron-sp, dp. A policy
 * file is JSON; see planner/README.md "Policies". */
#pragma once

#include "planner-graph.h"
#include "planner-pin.h"

G_BEGIN_DECLS

const char *const *planner_policy_builtin_names (void);
/* One line per built-in: "megatron: Megatron-LM tensor parallelism ...". */
char *planner_policy_describe (const char *name);

/* The pins a policy (built-in name or JSON file path) gives this graph on this mesh, as
 * PlannerPin* of priority 0 (a user's pins override them). Axis stand-ins in the rules:
 * {tp} the axis named tp or mp, {dp} every other axis ('_' when none), {all} every axis.
 * A rule marked "optional" that some matching op cannot take (a vocabulary the axis does not
 * divide) is left out, and @notes (char*, may be NULL) gets a line saying why. */
GPtrArray *planner_policy_expand (const char *name_or_path, PlannerGraph *graph,
                                  const PlannerMesh *mesh, GPtrArray *notes, GError **error);

G_END_DECLS
