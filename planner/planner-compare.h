/* planner-compare.h: what changes from one plan of a model to another (`shardscope-cli compare`,
 * the GUI's compare mode).
 *
 * Ops whose strategy differs, redistributions only one plan has, and the cost deltas per
 * collective kind and in total. Plans of different models are refused; the meshes and profiles
 * may differ (layouts are compared in bracket notation, by axis name).
 */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-plan.h"

G_BEGIN_DECLS

typedef struct
{
  guint op;
  char *a; /* input layouts under plan A's strategy, "[dp,_],[_,mp]" */
  char *b;
  char *a_outputs; /* output layouts as produced (after any out_layouts) */
  char *b_outputs;
  PlannerDecision a_decision;
  PlannerDecision b_decision;
} PlannerCompareOp;

typedef struct
{
  int count;
  gint64 bytes;
  double time_s;
} PlannerCompareDelta;

typedef struct
{
  PlannerPlan *a;
  PlannerPlan *b;
  GArray *ops; /* PlannerCompareOp, in topological order */
  /* A redistribution is the same in both plans when its tensor, consumer (and slot, and
   * whether it is producer-side) and both layouts are. */
  GArray *removed; /* guint: indices into A's redistributions that B lacks */
  GArray *added;   /* guint: indices into B's redistributions that A lacks */
  guint n_common;
  /* B - A. */
  PlannerCompareDelta kinds[PLANNER_N_STEP_KINDS];
  gint64 comm_bytes;
  double comm_time_s;
  double compute_time_s;
  double step_time_s;
  gint64 memory_per_device_bytes;
} PlannerCompare;

/* PLANNER_ERROR_CONFLICT when the plans are of different models (graph hashes differ). */
PlannerCompare *planner_compare_new (PlannerPlan *a, PlannerPlan *b, GError **error);
void planner_compare_free (PlannerCompare *self);

/* {"a": {...}, "b": {...}, "ops": [...], "redistributions": {"removed": [...], "added": [...],
 * "common": n}, "collectives": {kind: {count, bytes, time_us}}, "totals": {...}}, deltas B - A;
 * planner/README.md, "Comparing plans". */
JsonNode *planner_compare_to_json (const PlannerCompare *self);
/* The same as tables for people. */
char *planner_compare_to_text (const PlannerCompare *self);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerCompare, planner_compare_free)

G_END_DECLS
