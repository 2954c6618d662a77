/* planner-pin.h: pins, hard strategy choices on ops (semantics.md 5).
 *
 * Text form: GLOB=IN_LAYOUTS[->OUT_LAYOUTS], e.g. "*.q_proj=[dp,_,_],[mp,_]" (input layouts
 * in order, as MindSpore's in_strategy; trailing parameter inputs may be left out) and
 * "*.down_proj=[dp,_,mp],[_,mp]->[dp,mp,_]" (ask for a ReduceScatter instead of an
 * AllReduce, MindSpore's out_strategy).
 */
#pragma once

#include <glib.h>

#include "planner-layout.h"
#include "planner-op-rule.h"

G_BEGIN_DECLS

typedef struct
{
  char *text;
  char *glob;
  GPatternSpec *pattern;
  guint priority;          /* a policy's pins are 0; the user's override them at 1 */
  guint n_inputs;
  PlannerLayout inputs[PLANNER_MAX_OPERANDS];
  guint n_outputs;         /* 0: the strategy's own output layouts */
  PlannerLayout outputs[PLANNER_MAX_OPERANDS];
} PlannerPin;

PlannerPin *planner_pin_parse (const char *text, const PlannerMesh *mesh, GError **error);
PlannerPin *planner_pin_copy (const PlannerPin *pin);
void planner_pin_free (PlannerPin *pin);
gboolean planner_pin_matches (const PlannerPin *pin, const char *op_name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerPin, planner_pin_free)

G_END_DECLS
