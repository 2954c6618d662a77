/* planner-request.h: what a plan is asked for, in one object (issue 17).
 *
 * A request is a policy (built-in name or file, or none), pins in priority tiers (a
 * policy's rules are tier 0; the user's are 1 and override them; 2 overrides a parent
 * plan's pins, which a derived plan adds at 1), the training options and whether a tied
 * parameter may be redistributed. The CLI, the app, search and the tests all turn a request
 * into pins and a plan here, so none of them rebuilds that sequence. */
#pragma once

#include "planner-cost.h"
#include "planner-graph.h"
#include "planner-pin.h"
#include "planner-plan.h"

G_BEGIN_DECLS

#define PLANNER_PIN_TIER_POLICY 0
#define PLANNER_PIN_TIER_USER 1
#define PLANNER_PIN_TIER_OVERRIDE 2

typedef struct _PlannerRequest PlannerRequest;

PlannerRequest *planner_request_new (void);
PlannerRequest *planner_request_copy (const PlannerRequest *self);
void planner_request_free (PlannerRequest *self);

/* NULL: no policy. */
void planner_request_set_policy (PlannerRequest *self, const char *policy);
const char *planner_request_get_policy (const PlannerRequest *self);
/* A pin as text ("GLOB=LAYOUTS"), parsed against the mesh when the request is expanded. */
void planner_request_add_pin (PlannerRequest *self, const char *text, guint tier);
guint planner_request_get_n_pins (const PlannerRequest *self);
const char *planner_request_get_pin (const PlannerRequest *self, guint i, guint *tier);
void planner_request_set_constants (PlannerRequest *self, const PlannerCostConstants *constants);
const PlannerCostConstants *planner_request_get_constants (const PlannerRequest *self);
void planner_request_set_allow_tied (PlannerRequest *self, gboolean allow);
gboolean planner_request_get_allow_tied (const PlannerRequest *self);

/* The policy's pins (tier 0) for this graph and mesh, then the request's own, as
 * PlannerPin* with their tier as priority. @notes (char*, may be NULL) gets the policy's
 * notes (optional rules left out). */
GPtrArray *planner_request_expand (const PlannerRequest *self, PlannerGraph *graph,
                                   const PlannerMesh *mesh, GPtrArray *notes, GError **error);

/* Greedy propagation (planner-propagate.h) of the request's pins, finished with its training
 * options, its policy recorded: the plan the CLI and the app show. @extra_pins (PlannerPin*,
 * may be NULL) are added as they are (a parent plan's, already tiered). */
PlannerPlan *planner_request_propagate (const PlannerRequest *self, PlannerGraph *graph,
                                        const PlannerMesh *mesh, const PlannerHardware *hw,
                                        GPtrArray *extra_pins, GPtrArray *notes, GError **error);

/* The repeated block an op belongs to: "model.layers.12.mlp.up_proj" is in block 12, whose
 * name is "model.layers.12" (*@prefix_len = 15 characters). The block index is the first
 * path component that is all digits and is not the last component (a trailing number names
 * the op itself). -1 outside every block (and *@prefix_len 0). @prefix_len may be NULL. */
int planner_op_block (const char *name, gsize *prefix_len);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerRequest, planner_request_free)

G_END_DECLS
