/* graphview-view-model.h: what the graph view shows of a plan, without drawing it.
 *
 * The renderer draws; this object holds what it draws from: per op, its decision and the
 * trace step it was decided at, the split count of each input dim, whether the comparison
 * plan's strategy differs, the redistributions into each input slot and at the producer;
 * per visible edge of the model, the summed redistribution time and bytes, the badge text
 * and the redistributions only one of the two plans has; per item, the summary a block node shows, the trial run's badge and the search
 * marks. No Cairo, Pango or GTK here, so all of it can be tested headless.
 */
#pragma once

#include <glib-object.h>

#include "graphview-model.h"
#include "planner-plan.h"

G_BEGIN_DECLS

/* How an op looks under the step overlay. */
typedef enum
{
  GRAPHVIEW_STEP_DECIDED, /* decided at or before the step (or no overlay) */
  GRAPHVIEW_STEP_CURRENT, /* the op of the step */
  GRAPHVIEW_STEP_PENDING, /* decided after the step: grey */
} GraphviewStepState;

/* What a run of ops (a block node, an unfolded block's card, an op node) sums up; all zero
 * without a plan. */
typedef struct
{
  guint n_ops;
  guint counts[3];       /* by PlannerDecision: pinned, propagated, defaulted */
  guint redistributions; /* into the ops' input slots */
  double cost;           /* their time, with the conversions at the ops' outputs */
  guint differs;         /* ops whose strategy differs in the comparison plan */
  guint pending;         /* ops decided after the step */
  gboolean has_current;  /* the op of the step is among them */
} GraphviewSummary;

#define GRAPHVIEW_TYPE_VIEW_MODEL (graphview_view_model_get_type ())
G_DECLARE_FINAL_TYPE (GraphviewViewModel, graphview_view_model, GRAPHVIEW, VIEW_MODEL, GObject)

GraphviewViewModel *graphview_view_model_new (GraphviewModel *model);
GraphviewModel *graphview_view_model_get_model (GraphviewViewModel *self);

/* A plan of the model's graph (NULL: the graph alone); recomputes the per-op state. */
void graphview_view_model_set_plan (GraphviewViewModel *self, PlannerPlan *plan);
PlannerPlan *graphview_view_model_get_plan (GraphviewViewModel *self);
/* A plan of the same graph and mesh to compare with (NULL: none). */
void graphview_view_model_set_compare_plan (GraphviewViewModel *self, PlannerPlan *other);
PlannerPlan *graphview_view_model_get_compare_plan (GraphviewViewModel *self);
/* Trace step @step; -1: no step. */
void graphview_view_model_set_step (GraphviewViewModel *self, int step);
int graphview_view_model_get_step (GraphviewViewModel *self);

/* The op's PlannerDecision, -1 without a plan. */
int graphview_view_model_get_decision (GraphviewViewModel *self, guint op);
/* The trace step @op was decided at: pinned ops -1, defaulted ops the number of steps
 * (after the last one), propagated ops their step; 0 without a plan. */
int graphview_view_model_get_decided_at (GraphviewViewModel *self, guint op);
GraphviewStepState graphview_view_model_get_step_state (GraphviewViewModel *self, guint op);
/* The split count of dim @col of input @row as the plan lays it out (1 without a plan, and
 * past GRAPHVIEW_MATRIX_MAX_ROWS x GRAPHVIEW_MATRIX_MAX_COLS). */
guint graphview_view_model_get_splits (GraphviewViewModel *self, guint op, guint row, guint col);
gboolean graphview_view_model_op_differs (GraphviewViewModel *self, guint op);
/* The redistribution (index into the plan's) into input @slot of @op, -1 if none. */
int graphview_view_model_get_slot_redistribution (GraphviewViewModel *self, guint op, guint slot);
/* The time of the conversions at @op's outputs and of their final reductions. */
double graphview_view_model_get_op_extra (GraphviewViewModel *self, guint op);

/* The plan's cheapest and dearest redistribution time (both 0 when none costs anything). */
void graphview_view_model_get_cost_range (GraphviewViewModel *self, double *min_cost,
                                          double *max_cost);
/* 0..1 on a log scale between them: what colours and widens edges and badges. */
double graphview_view_model_cost_level (GraphviewViewModel *self, double cost);
/* Summed time and bytes of the redistributions on a visible edge of the model's current
 * state. */
double graphview_view_model_get_edge_cost (GraphviewViewModel *self, guint edge, guint64 *bytes);
/* "AllGather(mp) 12.0 MiB 0.80 ms", NULL when the edge moves nothing. */
char *graphview_view_model_dup_edge_badge (GraphviewViewModel *self, guint edge);

/* Redistributions only one plan has (as `shardscope-cli compare` matches them): @added those
 * the comparison plan has and the plan lacks, @removed the plan's that the comparison lacks;
 * both 0 without a comparison. Not drawn yet. */
void graphview_view_model_get_n_redistribution_changes (GraphviewViewModel *self, guint *added,
                                                        guint *removed);
/* The same for the input slots a visible edge goes into. */
void graphview_view_model_get_edge_changes (GraphviewViewModel *self, guint edge, guint *added,
                                            guint *removed);

void graphview_view_model_summarize_ops (GraphviewViewModel *self, guint first_op, guint n_ops,
                                         GraphviewSummary *summary);
void graphview_view_model_summarize_item (GraphviewViewModel *self, guint item,
                                          GraphviewSummary *summary);
/* Several lines: what a block node sums up, or an op's type, shapes, strategy, decision. */
char *graphview_view_model_dup_item_summary (GraphviewViewModel *self, guint item);

/* "[2,1024,768]": a tensor's shape as nodes and summaries show it. */
char *graphview_dup_shape_text (const PlannerTensor *t);

/* A trial run's results, per op of the graph: measured and estimated seconds (0: not timed)
 * and the relative error of its result. NULL arrays clear them. */
void graphview_view_model_set_trial (GraphviewViewModel *self, const double *measured_s,
                                     const double *estimated_s, const double *rel_error,
                                     double tolerance);
gboolean graphview_view_model_has_trial (GraphviewViewModel *self);
/* FALSE without a trial. */
gboolean graphview_view_model_get_op_trial (GraphviewViewModel *self, guint op,
                                            double *measured_s, double *estimated_s,
                                            double *rel_error);
double graphview_view_model_get_trial_tolerance (GraphviewViewModel *self);
/* "1.20 ms / 800 us ×1.5 err 2.0e-07" for an item (sums over a block node's ops), NULL
 * without a trial; @ok: every op's error within the tolerance. */
char *graphview_view_model_dup_trial_badge (GraphviewViewModel *self, guint item, gboolean *ok);

/* Search matches (NULL clears). */
void graphview_view_model_set_highlighted_ops (GraphviewViewModel *self, const guint *ops,
                                               guint n_ops);
gboolean graphview_view_model_has_highlights (GraphviewViewModel *self);
gboolean graphview_view_model_op_is_highlighted (GraphviewViewModel *self, guint op);
gboolean graphview_view_model_item_is_highlighted (GraphviewViewModel *self, guint item);

G_END_DECLS
