#define G_LOG_DOMAIN "graphview-view-model"

#include "config.h"

#include <glib/gi18n-lib.h>
#include <math.h>
#include <string.h>

#include "graphview-private.h"
#include "graphview-view-model.h"
#include "planner-compare.h"

#define MATRIX_CELLS (GRAPHVIEW_MATRIX_MAX_ROWS * GRAPHVIEW_MATRIX_MAX_COLS)

struct _GraphviewViewModel
{
  GObject parent_instance;

  GraphviewModel *model;
  PlannerGraph *graph;
  PlannerPlan *plan;
  PlannerPlan *other;
  int step;

  /* Derived from the plan, per op. */
  guint n_ops;
  guint8 *decision; /* PlannerDecision, or G_MAXUINT8 without a plan */
  int *decided_at;  /* trace step; pinned -1; defaulted after the last step */
  guint16 *splits;  /* MATRIX_CELLS per op: split count of each input dim */
  guint8 *differs;
  guint *slot_base; /* first input slot of each op in slot_redist */
  int *slot_redist; /* redistribution into that input slot, or -1 */
  double *op_extra; /* producer-side conversions and final reductions, at the producer */
  double min_cost, max_cost;

  /* Against the comparison plan (NULL without one): per redistribution of the plan, whether
   * the comparison lacks it; per input slot, the comparison's redistribution into it (-1
   * none) and whether the plan lacks that one. */
  guint8 *removed;
  int *other_slot_redist;
  guint8 *other_added;
  guint n_added, n_removed;
  /* Made when first asked for: matching takes 15-20 ms on LLaMA-2-70B, and nothing draws it
   * yet. */
  gboolean redist_diff_valid;

  /* A trial run's per-op results (NULL without one): 3 doubles an op, measured and
   * estimated seconds and the relative error of its result. */
  double *trial;
  double trial_tolerance;

  /* Search matches, one flag per op (NULL: none). */
  guint8 *highlighted;

  /* Per visible edge, for one state of the model (its serial). */
  guint edge_serial;
  gboolean edges_valid;
  double *edge_cost;
  guint64 *edge_bytes;
};

G_DEFINE_FINAL_TYPE (GraphviewViewModel, graphview_view_model, G_TYPE_OBJECT)

/* Plan-derived state ----------------------------------------------------------------------- */

static void
clear_plan_state (GraphviewViewModel *self)
{
  g_clear_pointer (&self->decision, g_free);
  g_clear_pointer (&self->decided_at, g_free);
  g_clear_pointer (&self->splits, g_free);
  g_clear_pointer (&self->differs, g_free);
  g_clear_pointer (&self->slot_base, g_free);
  g_clear_pointer (&self->slot_redist, g_free);
  g_clear_pointer (&self->op_extra, g_free);
  self->edges_valid = FALSE;
}

static void
clear_redist_diff (GraphviewViewModel *self)
{
  g_clear_pointer (&self->removed, g_free);
  g_clear_pointer (&self->other_slot_redist, g_free);
  g_clear_pointer (&self->other_added, g_free);
  self->n_added = self->n_removed = 0;
  self->redist_diff_valid = FALSE;
}

/* Redistributions only one plan has, as planner_compare_new() matches them (tensor, consumer,
 * slot, side and both layouts), placed on the input slots they go into. */
static void
ensure_redist_diff (GraphviewViewModel *self)
{
  if (self->redist_diff_valid)
    return;
  clear_redist_diff (self);
  self->redist_diff_valid = TRUE;
  if (self->plan == NULL || self->other == NULL)
    return;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerCompare) cmp = planner_compare_new (self->plan, self->other, &error);
  if (cmp == NULL)
    {
      /* Same op count but another model: the strategies still show, the redistributions
       * cannot be matched. */
      g_warning ("cannot compare the redistributions of the two plans: %s", error->message);
      return;
    }
  self->removed = g_new0 (guint8, MAX (planner_plan_get_n_redistributions (self->plan), 1));
  guint n_other = planner_plan_get_n_redistributions (self->other);
  self->other_added = g_new0 (guint8, MAX (n_other, 1));
  for (guint i = 0; i < cmp->removed->len; i++)
    self->removed[g_array_index (cmp->removed, guint, i)] = 1;
  for (guint i = 0; i < cmp->added->len; i++)
    self->other_added[g_array_index (cmp->added, guint, i)] = 1;
  self->n_removed = cmp->removed->len;
  self->n_added = cmp->added->len;
  guint n_slots = self->slot_base[self->n_ops];
  self->other_slot_redist = g_new (int, MAX (n_slots, 1));
  for (guint s = 0; s < n_slots; s++)
    self->other_slot_redist[s] = -1;
  for (guint i = 0; i < n_other; i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (self->other, i);
      if (r->consumer >= 0 && !r->producer_side && (guint)r->consumer < self->n_ops
          && r->slot < planner_graph_get_op (self->graph, r->consumer)->n_inputs)
        self->other_slot_redist[self->slot_base[r->consumer] + r->slot] = (int)i;
    }
}

static void
compute_differs (GraphviewViewModel *self)
{
  memset (self->differs, 0, MAX (self->n_ops, 1));
  clear_redist_diff (self);
  if (self->plan == NULL || self->other == NULL)
    return;
  for (guint op = 0; op < self->n_ops; op++)
    self->differs[op] = !planner_strategy_equal (&planner_plan_get_op (self->plan, op)->strategy,
                                                 &planner_plan_get_op (self->other, op)->strategy);
}

static void
compute_plan_state (GraphviewViewModel *self)
{
  clear_plan_state (self);
  guint n = self->n_ops;
  self->decision = g_new (guint8, MAX (n, 1));
  self->decided_at = g_new0 (int, MAX (n, 1));
  self->splits = g_new (guint16, MAX (n, 1) * MATRIX_CELLS);
  self->differs = g_new0 (guint8, MAX (n, 1));
  self->slot_base = g_new0 (guint, MAX (n, 1) + 1);
  self->op_extra = g_new0 (double, MAX (n, 1));
  for (guint i = 0; i < n * MATRIX_CELLS; i++)
    self->splits[i] = 1;
  for (guint op = 0; op < n; op++)
    self->slot_base[op + 1]
        = self->slot_base[op] + planner_graph_get_op (self->graph, op)->n_inputs;
  self->slot_redist = g_new (int, MAX (self->slot_base[n], 1));
  for (guint s = 0; s < self->slot_base[n]; s++)
    self->slot_redist[s] = -1;
  self->min_cost = self->max_cost = 0;

  if (self->plan == NULL)
    {
      memset (self->decision, G_MAXUINT8, MAX (n, 1));
      return;
    }

  const PlannerMesh *mesh = planner_plan_get_mesh (self->plan);
  guint n_steps = planner_plan_get_n_trace_steps (self->plan);
  for (guint op = 0; op < n; op++)
    {
      const PlannerOpPlan *p = planner_plan_get_op (self->plan, op);
      self->decision[op] = p->decision;
      self->decided_at[op] = p->decision == PLANNER_DECIDED_PINNED      ? -1
                             : p->decision == PLANNER_DECIDED_DEFAULTED ? (int)n_steps
                                                                        : p->trace_step;
      PlannerLayout inputs[PLANNER_MAX_OPERANDS], outputs[PLANNER_MAX_OPERANDS];
      planner_plan_op_layouts (self->plan, op, inputs, outputs);
      const PlannerOp *o = planner_graph_get_op (self->graph, op);
      guint rows = MIN (o->n_inputs, GRAPHVIEW_MATRIX_MAX_ROWS);
      for (guint r = 0; r < rows; r++)
        for (guint d = 0; d < MIN (inputs[r].rank, GRAPHVIEW_MATRIX_MAX_COLS); d++)
          self->splits[op * MATRIX_CELLS + r * GRAPHVIEW_MATRIX_MAX_COLS + d]
              = (guint16)MIN (planner_layout_dim_splits (&inputs[r], mesh, d), G_MAXUINT16);
    }

  double min_cost = G_MAXDOUBLE, max_cost = 0;
  for (guint i = 0; i < planner_plan_get_n_redistributions (self->plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (self->plan, i);
      if (r->consumer >= 0 && !r->producer_side && (guint)r->consumer < n)
        {
          const PlannerOp *o = planner_graph_get_op (self->graph, r->consumer);
          if (r->slot < o->n_inputs)
            self->slot_redist[self->slot_base[r->consumer] + r->slot] = (int)i;
        }
      else
        {
          int producer = planner_graph_get_tensor (self->graph, r->tensor)->producer;
          if (producer >= 0)
            self->op_extra[producer] += r->time_s;
        }
      if (r->time_s > 0)
        {
          min_cost = MIN (min_cost, r->time_s);
          max_cost = MAX (max_cost, r->time_s);
        }
    }
  if (max_cost > 0)
    {
      self->min_cost = min_cost;
      self->max_cost = max_cost;
    }
  compute_differs (self);
}

/* The edges are those of the model's current folding: recomputed when its serial moves. */
static void
ensure_edges (GraphviewViewModel *self)
{
  guint serial = graphview_model_get_serial (self->model);
  if (self->edges_valid && self->edge_serial == serial)
    return;
  guint n = graphview_model_get_n_edges (self->model);
  g_free (self->edge_cost);
  g_free (self->edge_bytes);
  self->edge_cost = g_new0 (double, MAX (n, 1));
  self->edge_bytes = g_new0 (guint64, MAX (n, 1));
  if (self->plan != NULL)
    for (guint e = 0; e < n; e++)
      {
        const GraphviewEdge *edge = graphview_model_get_edge (self->model, e);
        for (guint k = 0; k < edge->n_refs; k++)
          {
            const GraphviewEdgeRef *ref
                = graphview_model_get_ref (self->model, edge->first_ref + k);
            int r = self->slot_redist[self->slot_base[ref->consumer] + ref->slot];
            if (r < 0)
              continue;
            const PlannerRedistribution *redist = planner_plan_get_redistribution (self->plan, r);
            self->edge_cost[e] += redist->time_s;
            self->edge_bytes[e] += redist->bytes;
          }
      }
  self->edge_serial = serial;
  self->edges_valid = TRUE;
}

/* The object ------------------------------------------------------------------------------- */

static void
graphview_view_model_finalize (GObject *object)
{
  GraphviewViewModel *self = GRAPHVIEW_VIEW_MODEL (object);
  clear_plan_state (self);
  clear_redist_diff (self);
  g_clear_pointer (&self->trial, g_free);
  g_clear_pointer (&self->highlighted, g_free);
  g_clear_pointer (&self->edge_cost, g_free);
  g_clear_pointer (&self->edge_bytes, g_free);
  g_clear_object (&self->plan);
  g_clear_object (&self->other);
  g_clear_object (&self->model);
  G_OBJECT_CLASS (graphview_view_model_parent_class)->finalize (object);
}

static void
graphview_view_model_class_init (GraphviewViewModelClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = graphview_view_model_finalize;
}

static void
graphview_view_model_init (GraphviewViewModel *self)
{
  self->step = -1;
}

GraphviewViewModel *
graphview_view_model_new (GraphviewModel *model)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (model), NULL);
  GraphviewViewModel *self = g_object_new (GRAPHVIEW_TYPE_VIEW_MODEL, NULL);
  self->model = g_object_ref (model);
  self->graph = graphview_model_get_graph (model);
  self->n_ops = planner_graph_get_n_ops (self->graph);
  compute_plan_state (self);
  return self;
}

GraphviewModel *
graphview_view_model_get_model (GraphviewViewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), NULL);
  return self->model;
}

static gboolean
plan_fits (GraphviewViewModel *self, PlannerPlan *plan)
{
  return plan == NULL || planner_graph_get_n_ops (planner_plan_get_graph (plan)) == self->n_ops;
}

void
graphview_view_model_set_plan (GraphviewViewModel *self, PlannerPlan *plan)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  g_return_if_fail (plan == NULL || PLANNER_IS_PLAN (plan));
  g_return_if_fail (plan_fits (self, plan));
  g_set_object (&self->plan, plan);
  compute_plan_state (self);
}

PlannerPlan *
graphview_view_model_get_plan (GraphviewViewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), NULL);
  return self->plan;
}

void
graphview_view_model_set_compare_plan (GraphviewViewModel *self, PlannerPlan *other)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  g_return_if_fail (other == NULL || PLANNER_IS_PLAN (other));
  g_return_if_fail (plan_fits (self, other));
  g_set_object (&self->other, other);
  compute_differs (self);
}

PlannerPlan *
graphview_view_model_get_compare_plan (GraphviewViewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), NULL);
  return self->other;
}

void
graphview_view_model_set_step (GraphviewViewModel *self, int step)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  self->step = MAX (step, -1);
}

int
graphview_view_model_get_step (GraphviewViewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), -1);
  return self->step;
}

/* Per op ----------------------------------------------------------------------------------- */

int
graphview_view_model_get_decision (GraphviewViewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), -1);
  g_return_val_if_fail (op < self->n_ops, -1);
  return self->decision[op] == G_MAXUINT8 ? -1 : self->decision[op];
}

int
graphview_view_model_get_decided_at (GraphviewViewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), 0);
  g_return_val_if_fail (op < self->n_ops, 0);
  return self->decided_at[op];
}

GraphviewStepState
graphview_view_model_get_step_state (GraphviewViewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), GRAPHVIEW_STEP_DECIDED);
  g_return_val_if_fail (op < self->n_ops, GRAPHVIEW_STEP_DECIDED);
  if (self->plan == NULL || self->step < 0)
    return GRAPHVIEW_STEP_DECIDED;
  if (self->decided_at[op] > self->step)
    return GRAPHVIEW_STEP_PENDING;
  if (self->decided_at[op] == self->step && self->decision[op] == PLANNER_DECIDED_PROPAGATED)
    return GRAPHVIEW_STEP_CURRENT;
  return GRAPHVIEW_STEP_DECIDED;
}

guint
graphview_view_model_get_splits (GraphviewViewModel *self, guint op, guint row, guint col)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), 1);
  g_return_val_if_fail (op < self->n_ops, 1);
  if (row >= GRAPHVIEW_MATRIX_MAX_ROWS || col >= GRAPHVIEW_MATRIX_MAX_COLS)
    return 1;
  return self->splits[op * MATRIX_CELLS + row * GRAPHVIEW_MATRIX_MAX_COLS + col];
}

gboolean
graphview_view_model_op_differs (GraphviewViewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), FALSE);
  g_return_val_if_fail (op < self->n_ops, FALSE);
  return self->differs[op] != 0;
}

int
graphview_view_model_get_slot_redistribution (GraphviewViewModel *self, guint op, guint slot)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), -1);
  g_return_val_if_fail (op < self->n_ops, -1);
  if (self->slot_base[op] + slot >= self->slot_base[op + 1])
    return -1;
  return self->slot_redist[self->slot_base[op] + slot];
}

double
graphview_view_model_get_op_extra (GraphviewViewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), 0);
  g_return_val_if_fail (op < self->n_ops, 0);
  return self->op_extra[op];
}

/* Costs and edges -------------------------------------------------------------------------- */

void
graphview_view_model_get_cost_range (GraphviewViewModel *self, double *min_cost,
                                     double *max_cost)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  if (min_cost)
    *min_cost = self->min_cost;
  if (max_cost)
    *max_cost = self->max_cost;
}

double
graphview_view_model_cost_level (GraphviewViewModel *self, double cost)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), 0);
  if (cost <= 0 || self->max_cost <= 0)
    return 0;
  if (self->max_cost <= self->min_cost * 1.0001)
    return 1;
  double t = log (cost / self->min_cost) / log (self->max_cost / self->min_cost);
  return CLAMP (t, 0.0, 1.0);
}

double
graphview_view_model_get_edge_cost (GraphviewViewModel *self, guint edge, guint64 *bytes)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), 0);
  g_return_val_if_fail (edge < graphview_model_get_n_edges (self->model), 0);
  ensure_edges (self);
  if (bytes)
    *bytes = self->edge_bytes[edge];
  return self->edge_cost[edge];
}

char *
graphview_view_model_dup_edge_badge (GraphviewViewModel *self, guint edge)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), NULL);
  g_return_val_if_fail (edge < graphview_model_get_n_edges (self->model), NULL);
  if (self->plan == NULL)
    return NULL;
  ensure_edges (self);
  const PlannerMesh *mesh = planner_plan_get_mesh (self->plan);
  const GraphviewEdge *e = graphview_model_get_edge (self->model, edge);
  g_autoptr (GString) steps = g_string_new (NULL);
  guint n_steps = 0;
  for (guint k = 0; k < e->n_refs; k++)
    {
      const GraphviewEdgeRef *ref = graphview_model_get_ref (self->model, e->first_ref + k);
      int r = self->slot_redist[self->slot_base[ref->consumer] + ref->slot];
      if (r < 0)
        continue;
      const PlannerRedistribution *redist = planner_plan_get_redistribution (self->plan, r);
      for (guint s = 0; s < redist->n_steps; s++, n_steps++)
        {
          const PlannerRedistStep *step = &redist->steps[s];
          char item[96];
          g_snprintf (item, sizeof item, "%s(%s)", planner_step_kind_to_string (step->kind),
                      mesh->names[step->axis]);
          /* A folded edge can carry many: name the first few, count the rest. */
          if (n_steps < 3)
            g_string_append_printf (steps, "%s%s", n_steps ? "+" : "", item);
        }
    }
  if (n_steps == 0)
    return NULL;
  if (n_steps > 3)
    g_string_append_printf (steps, "+%u more", n_steps - 3);
  g_autofree char *bytes = planner_format_bytes (self->edge_bytes[edge]);
  g_autofree char *time = planner_format_time (self->edge_cost[edge]);
  return g_strdup_printf ("%s %s %s", steps->str, bytes, time);
}

void
graphview_view_model_get_n_redistribution_changes (GraphviewViewModel *self, guint *added,
                                                   guint *removed)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  ensure_redist_diff (self);
  if (added)
    *added = self->n_added;
  if (removed)
    *removed = self->n_removed;
}

void
graphview_view_model_get_edge_changes (GraphviewViewModel *self, guint edge, guint *added,
                                       guint *removed)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  g_return_if_fail (edge < graphview_model_get_n_edges (self->model));
  ensure_redist_diff (self);
  guint n_added = 0, n_removed = 0;
  if (self->removed != NULL)
    {
      const GraphviewEdge *e = graphview_model_get_edge (self->model, edge);
      for (guint k = 0; k < e->n_refs; k++)
        {
          const GraphviewEdgeRef *ref = graphview_model_get_ref (self->model, e->first_ref + k);
          guint slot = self->slot_base[ref->consumer] + ref->slot;
          if (self->slot_redist[slot] >= 0)
            n_removed += self->removed[self->slot_redist[slot]];
          if (self->other_slot_redist[slot] >= 0)
            n_added += self->other_added[self->other_slot_redist[slot]];
        }
    }
  if (added)
    *added = n_added;
  if (removed)
    *removed = n_removed;
}

/* Summaries -------------------------------------------------------------------------------- */

void
graphview_view_model_summarize_ops (GraphviewViewModel *self, guint first_op, guint n_ops,
                                    GraphviewSummary *s)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  g_return_if_fail (s != NULL);
  memset (s, 0, sizeof *s);
  s->n_ops = n_ops;
  if (self->plan == NULL)
    return;
  for (guint op = first_op; op < first_op + n_ops && op < self->n_ops; op++)
    {
      if (self->decision[op] < 3)
        s->counts[self->decision[op]]++;
      s->differs += self->differs[op];
      GraphviewStepState state = graphview_view_model_get_step_state (self, op);
      s->pending += state == GRAPHVIEW_STEP_PENDING;
      s->has_current |= state == GRAPHVIEW_STEP_CURRENT;
      s->cost += self->op_extra[op];
      for (guint slot = self->slot_base[op]; slot < self->slot_base[op + 1]; slot++)
        if (self->slot_redist[slot] >= 0)
          {
            const PlannerRedistribution *r
                = planner_plan_get_redistribution (self->plan, self->slot_redist[slot]);
            s->redistributions++;
            s->cost += r->time_s;
          }
    }
}

void
graphview_view_model_summarize_item (GraphviewViewModel *self, guint item, GraphviewSummary *s)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  g_return_if_fail (item < graphview_model_get_n_items (self->model));
  const GraphviewItem *it = graphview_model_get_item (self->model, item);
  graphview_view_model_summarize_ops (self, it->first_op, it->n_ops, s);
}

char *
graphview_dup_shape_text (const PlannerTensor *t)
{
  GString *s = g_string_new ("[");
  for (guint d = 0; d < t->rank; d++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? "," : "", t->shape[d]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

char *
graphview_view_model_dup_item_summary (GraphviewViewModel *self, guint item)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), NULL);
  g_return_val_if_fail (item < graphview_model_get_n_items (self->model), NULL);
  const GraphviewItem *it = graphview_model_get_item (self->model, item);
  g_autofree char *label = graphview_model_dup_item_label (self->model, item);
  GString *s = g_string_new (NULL);
  if (it->kind == GRAPHVIEW_ITEM_BLOCK)
    {
      const GraphviewRun *run = graphview_model_get_run (self->model, it->run);
      g_string_append_printf (s, "%s\n", label);
      g_string_append_printf (s, _("%u ops, %u per block"), it->n_ops, run->ops_per_block);
    }
  else
    {
      const PlannerOp *op = planner_graph_get_op (self->graph, it->first_op);
      g_string_append_printf (s, "%s %s", planner_op_type_to_string (op->type), label);
      for (guint i = 0; i < op->n_inputs; i++)
        {
          g_autofree char *shape
              = graphview_dup_shape_text (planner_graph_get_tensor (self->graph, op->inputs[i]));
          g_string_append_printf (s, "%s%s", i ? " x " : "\nin ", shape);
        }
      for (guint o = 0; o < op->n_outputs; o++)
        {
          g_autofree char *shape
              = graphview_dup_shape_text (planner_graph_get_tensor (self->graph, op->outputs[o]));
          g_string_append_printf (s, "%s%s", o ? ", " : "\nout ", shape);
        }
      if (self->plan != NULL)
        {
          const PlannerOpPlan *p = planner_plan_get_op (self->plan, it->first_op);
          const PlannerMesh *mesh = planner_plan_get_mesh (self->plan);
          g_autofree char *layouts = planner_strategy_to_string (&p->strategy, &op->rule, mesh);
          g_autofree char *factors = planner_strategy_describe (&p->strategy, &op->rule, mesh);
          g_string_append_printf (s, "\nstrategy %s (%s)\n%s", layouts, factors,
                                  planner_decision_to_string (p->decision));
          if (p->decision == PLANNER_DECIDED_PROPAGATED)
            g_string_append_printf (s, " at step %d", p->trace_step);
        }
    }
  if (self->plan != NULL)
    {
      GraphviewSummary sum;
      graphview_view_model_summarize_ops (self, it->first_op, it->n_ops, &sum);
      g_autofree char *cost = planner_format_time (sum.cost);
      if (it->kind == GRAPHVIEW_ITEM_BLOCK)
        {
          g_string_append_c (s, '\n');
          g_string_append_printf (s, _("pinned %u, propagated %u, defaulted %u"), sum.counts[0],
                                  sum.counts[1], sum.counts[2]);
        }
      g_string_append_c (s, '\n');
      g_string_append_printf (s, _("%u redistributions in, %s"), sum.redistributions, cost);
      if (self->other != NULL && sum.differs > 0)
        {
          g_string_append_c (s, '\n');
          g_string_append_printf (s, _("%u ops differ from %s"), sum.differs,
                                  planner_plan_get_name (self->other)
                                      ? planner_plan_get_name (self->other)
                                      : _("the other plan"));
        }
    }
  return g_string_free (s, FALSE);
}

/* Trial ------------------------------------------------------------------------------------ */

void
graphview_view_model_set_trial (GraphviewViewModel *self, const double *measured_s,
                                const double *estimated_s, const double *rel_error,
                                double tolerance)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  g_clear_pointer (&self->trial, g_free);
  if (measured_s == NULL || estimated_s == NULL || rel_error == NULL)
    return;
  self->trial = g_new (double, 3 * (gsize)MAX (self->n_ops, 1));
  for (guint op = 0; op < self->n_ops; op++)
    {
      self->trial[3 * op] = measured_s[op];
      self->trial[3 * op + 1] = estimated_s[op];
      self->trial[3 * op + 2] = rel_error[op];
    }
  self->trial_tolerance = tolerance;
}

gboolean
graphview_view_model_has_trial (GraphviewViewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), FALSE);
  return self->trial != NULL;
}

gboolean
graphview_view_model_get_op_trial (GraphviewViewModel *self, guint op, double *measured_s,
                                   double *estimated_s, double *rel_error)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), FALSE);
  if (self->trial == NULL || op >= self->n_ops)
    return FALSE;
  if (measured_s)
    *measured_s = self->trial[3 * op];
  if (estimated_s)
    *estimated_s = self->trial[3 * op + 1];
  if (rel_error)
    *rel_error = self->trial[3 * op + 2];
  return TRUE;
}

double
graphview_view_model_get_trial_tolerance (GraphviewViewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), 0);
  return self->trial_tolerance;
}

char *
graphview_view_model_dup_trial_badge (GraphviewViewModel *self, guint item, gboolean *ok)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), NULL);
  if (self->trial == NULL || item >= graphview_model_get_n_items (self->model))
    return NULL;
  const GraphviewItem *it = graphview_model_get_item (self->model, item);
  double measured = 0, estimated = 0, error = 0;
  for (guint op = it->first_op; op < it->first_op + it->n_ops && op < self->n_ops; op++)
    {
      measured += self->trial[3 * op];
      estimated += self->trial[3 * op + 1];
      error = MAX (error, self->trial[3 * op + 2]);
    }
  if (ok)
    *ok = error <= self->trial_tolerance;
  g_autofree char *m = planner_format_time (measured);
  g_autofree char *e = planner_format_time (estimated);
  /* Without timed repeats only the error was measured. */
  if (measured <= 0)
    {
      const char *mark = error <= self->trial_tolerance ? "\xe2\x9c\x94" : "\xe2\x9c\x98";
      return g_strdup_printf ("%s err %.1e", mark, error);
    }
  if (estimated <= 0)
    return g_strdup_printf ("%s err %.1e", m, error);
  return g_strdup_printf ("%s / %s \xc3\x97%.2g err %.1e", m, e, measured / estimated, error);
}

/* Search matches --------------------------------------------------------------------------- */

void
graphview_view_model_set_highlighted_ops (GraphviewViewModel *self, const guint *ops,
                                          guint n_ops)
{
  g_return_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self));
  g_clear_pointer (&self->highlighted, g_free);
  if (ops == NULL || n_ops == 0)
    return;
  self->highlighted = g_new0 (guint8, MAX (self->n_ops, 1));
  for (guint i = 0; i < n_ops; i++)
    if (ops[i] < self->n_ops)
      self->highlighted[ops[i]] = 1;
}

gboolean
graphview_view_model_has_highlights (GraphviewViewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), FALSE);
  return self->highlighted != NULL;
}

gboolean
graphview_view_model_op_is_highlighted (GraphviewViewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), FALSE);
  return self->highlighted != NULL && op < self->n_ops && self->highlighted[op];
}

gboolean
graphview_view_model_item_is_highlighted (GraphviewViewModel *self, guint item)
{
  g_return_val_if_fail (GRAPHVIEW_IS_VIEW_MODEL (self), FALSE);
  if (self->highlighted == NULL || item >= graphview_model_get_n_items (self->model))
    return FALSE;
  const GraphviewItem *it = graphview_model_get_item (self->model, item);
  for (guint op = it->first_op; op < it->first_op + it->n_ops && op < self->n_ops; op++)
    if (self->highlighted[op])
      return TRUE;
  return FALSE;
}
