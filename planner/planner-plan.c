#define G_LOG_DOMAIN "planner-plan"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-plan-private.h"

struct _PlannerPlan
{
  GObject parent_instance;

  PlannerGraph *graph;
  PlannerMesh mesh;
  PlannerHardware *hw;
  PlannerRedistributor *redistributor;
  PlannerCostConstants constants;

  char *name;
  char *policy;
  GPtrArray *pins;          /* char* */
  double propagate_ms;

  GArray *ops;              /* PlannerOpPlan, one per graph op */
  GArray *tensor_layouts;   /* PlannerLayout, one per tensor */
  GArray *redistributions;  /* PlannerRedistribution */
  /* Redistributions by tensor, for planner_plan_find_redistribution: the first index per
   * tensor (+1, 0 = none) and a chain; rebuilt when the count changes. */
  guint *redist_first;
  GArray *redist_next;      /* int */
  guint redist_indexed;
  GArray *trace;            /* PlannerTraceStep */
  GArray *conflicts;        /* PlannerConflict */
  PlannerPlanTotals totals;
};

G_DEFINE_FINAL_TYPE (PlannerPlan, planner_plan, G_TYPE_OBJECT)

static const char *const decision_names[] = { "pinned", "propagated", "defaulted" };

const char *
planner_decision_to_string (PlannerDecision decision)
{
  g_return_val_if_fail (decision <= PLANNER_DECIDED_DEFAULTED, "?");
  return decision_names[decision];
}

gboolean
planner_decision_from_string (const char *text, PlannerDecision *decision)
{
  for (guint i = 0; i < G_N_ELEMENTS (decision_names); i++)
    if (g_strcmp0 (text, decision_names[i]) == 0)
      {
        *decision = (PlannerDecision) i;
        return TRUE;
      }
  return FALSE;
}

static void
clear_redistribution (gpointer data)
{
  PlannerRedistribution *r = data;
  g_free (r->steps);
}

static void
clear_conflict (gpointer data)
{
  PlannerConflict *c = data;
  g_free (c->message);
}

static void
planner_plan_finalize (GObject *object)
{
  PlannerPlan *self = PLANNER_PLAN (object);

  g_clear_object (&self->graph);
  planner_hardware_free (self->hw);
  planner_redistributor_free (self->redistributor);
  g_free (self->name);
  g_free (self->policy);
  g_ptr_array_unref (self->pins);
  g_array_unref (self->ops);
  g_array_unref (self->tensor_layouts);
  g_array_unref (self->redistributions);
  g_free (self->redist_first);
  g_array_unref (self->redist_next);
  g_array_unref (self->trace);
  g_array_unref (self->conflicts);

  G_OBJECT_CLASS (planner_plan_parent_class)->finalize (object);
}

static void
planner_plan_class_init (PlannerPlanClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = planner_plan_finalize;
}

static void
planner_plan_init (PlannerPlan *self)
{
  self->pins = g_ptr_array_new_with_free_func (g_free);
  self->ops = g_array_new (FALSE, TRUE, sizeof (PlannerOpPlan));
  self->tensor_layouts = g_array_new (FALSE, TRUE, sizeof (PlannerLayout));
  self->redistributions = g_array_new (FALSE, TRUE, sizeof (PlannerRedistribution));
  g_array_set_clear_func (self->redistributions, clear_redistribution);
  self->redist_next = g_array_new (FALSE, FALSE, sizeof (int));
  self->trace = g_array_new (FALSE, TRUE, sizeof (PlannerTraceStep));
  self->conflicts = g_array_new (FALSE, TRUE, sizeof (PlannerConflict));
  g_array_set_clear_func (self->conflicts, clear_conflict);
  planner_cost_constants_init (&self->constants);
}

PlannerPlan *
planner_plan_new (PlannerGraph *graph, const PlannerMesh *mesh, const PlannerHardware *hw)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), NULL);
  g_return_val_if_fail (mesh != NULL && hw != NULL, NULL);

  PlannerPlan *self = g_object_new (PLANNER_TYPE_PLAN, NULL);
  self->graph = g_object_ref (graph);
  self->mesh = *mesh;
  self->hw = planner_hardware_copy (hw);
  self->redistributor = planner_redistributor_new (mesh, hw);

  guint n_ops = planner_graph_get_n_ops (graph);
  g_array_set_size (self->ops, n_ops);
  for (guint i = 0; i < n_ops; i++)
    {
      PlannerOpPlan *op = &g_array_index (self->ops, PlannerOpPlan, i);
      op->decision = PLANNER_DECIDED_DEFAULTED;
      op->trace_step = -1;
      op->pin = -1;
    }
  g_array_set_size (self->tensor_layouts, planner_graph_get_n_tensors (graph));
  for (guint t = 0; t < self->tensor_layouts->len; t++)
    planner_layout_init_replicated (&g_array_index (self->tensor_layouts, PlannerLayout, t),
                                    planner_graph_get_tensor (graph, t)->rank);
  return self;
}

PlannerGraph *
planner_plan_get_graph (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return self->graph;
}

const PlannerMesh *
planner_plan_get_mesh (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return &self->mesh;
}

const PlannerHardware *
planner_plan_get_hardware (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return self->hw;
}

PlannerRedistributor *
planner_plan_get_redistributor (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return self->redistributor;
}

const PlannerCostConstants *
planner_plan_get_constants (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return &self->constants;
}

void
planner_plan_set_constants (PlannerPlan *self, const PlannerCostConstants *constants)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  self->constants = *constants;
}

const char *
planner_plan_get_name (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return self->name;
}

void
planner_plan_set_name (PlannerPlan *self, const char *name)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_free (self->name);
  self->name = g_strdup (name);
}

const GPtrArray *
planner_plan_get_pins (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return self->pins;
}

void
planner_plan_add_pin_text (PlannerPlan *self, const char *pin)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_ptr_array_add (self->pins, g_strdup (pin));
}

const char *
planner_plan_get_policy (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return self->policy;
}

void
planner_plan_set_policy (PlannerPlan *self, const char *policy)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_free (self->policy);
  self->policy = g_strdup (policy);
}

double
planner_plan_get_propagate_ms (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), 0);
  return self->propagate_ms;
}

void
planner_plan_set_propagate_ms (PlannerPlan *self, double ms)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  self->propagate_ms = ms;
}

PlannerOpPlan *
planner_plan_get_op (PlannerPlan *self, guint op)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  g_return_val_if_fail (op < self->ops->len, NULL);
  return &g_array_index (self->ops, PlannerOpPlan, op);
}

void
planner_plan_op_layouts (PlannerPlan *self, guint op, PlannerLayout *inputs,
                         PlannerLayout *outputs)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_return_if_fail (op < self->ops->len);
  const PlannerOp *gop = planner_graph_get_op (self->graph, op);
  planner_strategy_layouts (&g_array_index (self->ops, PlannerOpPlan, op).strategy, &gop->rule,
                            &self->mesh, inputs, outputs);
}

const PlannerLayout *
planner_plan_get_tensor_layout (PlannerPlan *self, guint tensor)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  g_return_val_if_fail (tensor < self->tensor_layouts->len, NULL);
  return &g_array_index (self->tensor_layouts, PlannerLayout, tensor);
}

guint
planner_plan_get_n_redistributions (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), 0);
  return self->redistributions->len;
}

const PlannerRedistribution *
planner_plan_get_redistribution (PlannerPlan *self, guint i)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  g_return_val_if_fail (i < self->redistributions->len, NULL);
  return &g_array_index (self->redistributions, PlannerRedistribution, i);
}

guint
planner_plan_get_n_trace_steps (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), 0);
  return self->trace->len;
}

const PlannerTraceStep *
planner_plan_get_trace_step (PlannerPlan *self, guint i)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  g_return_val_if_fail (i < self->trace->len, NULL);
  return &g_array_index (self->trace, PlannerTraceStep, i);
}

void
planner_plan_append_trace_step (PlannerPlan *self, const PlannerTraceStep *step)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_array_append_val (self->trace, *step);
}

guint
planner_plan_get_n_conflicts (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), 0);
  return self->conflicts->len;
}

const PlannerConflict *
planner_plan_get_conflict (PlannerPlan *self, guint i)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  g_return_val_if_fail (i < self->conflicts->len, NULL);
  return &g_array_index (self->conflicts, PlannerConflict, i);
}

const PlannerPlanTotals *
planner_plan_get_totals (PlannerPlan *self)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), NULL);
  return &self->totals;
}

static void
index_redistributions (PlannerPlan *self)
{
  guint n_tensors = planner_graph_get_n_tensors (self->graph);
  if (self->redist_first != NULL && self->redist_indexed == self->redistributions->len)
    return;
  if (self->redist_first != NULL && self->redist_indexed + 1 == self->redistributions->len)
    {
      guint i = self->redist_indexed, t = g_array_index (self->redistributions,
                                                        PlannerRedistribution, i).tensor;
      int next = (int) self->redist_first[t] - 1;
      g_array_append_val (self->redist_next, next);
      self->redist_first[t] = i + 1;
      self->redist_indexed++;
      return;
    }
  if (self->redist_first == NULL)
    self->redist_first = g_new0 (guint, n_tensors);
  else
    memset (self->redist_first, 0, n_tensors * sizeof (guint));
  g_array_set_size (self->redist_next, self->redistributions->len);
  /* Backwards, so each chain runs in plan order. */
  for (guint i = self->redistributions->len; i-- > 0;)
    {
      guint t = g_array_index (self->redistributions, PlannerRedistribution, i).tensor;
      g_array_index (self->redist_next, int, i) = (int) self->redist_first[t] - 1;
      self->redist_first[t] = i + 1;
    }
  self->redist_indexed = self->redistributions->len;
}

int
planner_plan_find_redistribution (PlannerPlan *self, guint tensor, const PlannerLayout *to)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), -1);
  g_return_val_if_fail (tensor < planner_graph_get_n_tensors (self->graph), -1);
  index_redistributions (self);
  for (int i = (int) self->redist_first[tensor] - 1; i >= 0;
       i = g_array_index (self->redist_next, int, i))
    {
      const PlannerRedistribution *r
        = &g_array_index (self->redistributions, PlannerRedistribution, i);
      if (!r->producer_side && r->consumer >= 0 && planner_layout_equal (&r->to, to))
        return i;
    }
  return -1;
}

/* ---- finishing: layouts, redistributions, conflicts, totals ---- */

static guint64
local_bytes (PlannerPlan *self, const PlannerTensor *t, const PlannerLayout *layout)
{
  gint64 local[PLANNER_MAX_RANK];
  guint64 n = planner_dtype_size (t->dtype);
  planner_layout_local_shape (layout, &self->mesh, t->shape, local);
  for (guint d = 0; d < t->rank; d++)
    n *= (guint64) local[d];
  return n;
}

static void
add_redistribution (PlannerPlan *self, guint tensor, int consumer, guint slot,
                    gboolean producer_side, const PlannerLayout *from, const PlannerLayout *to,
                    const PlannerRedistPath *path)
{
  PlannerRedistribution r = { 0 };
  r.tensor = tensor;
  r.consumer = consumer;
  r.slot = slot;
  r.producer_side = producer_side;
  r.from = *from;
  r.to = *to;
  r.n_steps = path->n_steps;
  r.steps = g_memdup2 (path->steps, path->n_steps * sizeof (PlannerRedistStep));
  r.bytes = path->bytes;
  r.time_s = path->time_s;
  g_array_append_val (self->redistributions, r);
  /* Keep the by-tensor index current rather than rebuilding it on the next lookup. */
  index_redistributions (self);
}

static gboolean
unreachable_error (PlannerPlan *self, const PlannerTensor *t, const char *consumer,
                   const PlannerLayout *from, const PlannerLayout *to, GError **error)
{
  g_autofree char *f = planner_layout_to_string (from, &self->mesh);
  g_autofree char *d = planner_layout_to_string (to, &self->mesh);
  guint32 missing = to->partial & ~from->partial;
  if (missing)
    {
      g_autoptr (GString) axes = g_string_new (NULL);
      for (guint a = 0; a < self->mesh.n_axes; a++)
        if (missing & (1u << a))
          g_string_append_printf (axes, "%s%s", axes->len ? "," : "", self->mesh.names[a]);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT,
                   "%s: tensor %s arrives as %s but %s is required; no redistribution "
                   "creates partial sums over %s, so pin the consumer without partial(%s) "
                   "or make the producer partial over %s",
                   consumer, t->name, f, d, axes->str, axes->str, axes->str);
    }
  else
    /* Every non-partial layout reaches every other: this is a planner bug, said as one. */
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT,
                 "%s: tensor %s arrives as %s but %s is required, and the redistribution "
                 "search found no path between them; please report this with the command",
                 consumer, t->name, f, d);
  return FALSE;
}

/* Inputs that receive a redistribution, as (op << 8 | slot); built before conflicts are
 * looked for. */
static gboolean
edge_redistributed (GHashTable *edges, guint op, guint slot)
{
  return g_hash_table_contains (edges, GUINT_TO_POINTER ((op << 8) | slot));
}

/* For every op, the nearest pinned op whose layouts reach it unchanged: a breadth-first
 * search from all pinned ops at once (in topological order, so ties are deterministic)
 * along edges without a redistribution: towards consumers, it finds each op's pin upstream;
 * towards producers, its pin downstream. */
static int *
nearest_pins (PlannerPlan *self, GHashTable *edges, gboolean towards_producers)
{
  PlannerGraph *g = self->graph;
  guint n_ops = planner_graph_get_n_ops (g);
  int *label = g_new (int, n_ops);
  g_autoptr (GQueue) queue = g_queue_new ();

  for (guint o = 0; o < n_ops; o++)
    {
      label[o] = -1;
      if (g_array_index (self->ops, PlannerOpPlan, o).decision == PLANNER_DECIDED_PINNED)
        {
          label[o] = (int) o;
          g_queue_push_tail (queue, GUINT_TO_POINTER (o));
        }
    }
  while (!g_queue_is_empty (queue))
    {
      guint o = GPOINTER_TO_UINT (g_queue_pop_head (queue));
      const PlannerOp *op = planner_graph_get_op (g, o);
      if (towards_producers)
        for (guint k = 0; k < op->n_inputs; k++)
          {
            int p = planner_graph_get_tensor (g, op->inputs[k])->producer;
            if (p < 0 || label[p] >= 0 || edge_redistributed (edges, o, k))
              continue;
            label[p] = label[o];
            g_queue_push_tail (queue, GINT_TO_POINTER (p));
          }
      else
        for (guint k = 0; k < op->n_outputs; k++)
          {
            const PlannerTensor *t = planner_graph_get_tensor (g, op->outputs[k]);
            for (guint c = 0; c < t->consumers->len; c++)
              {
                const PlannerUse *use = &g_array_index (t->consumers, PlannerUse, c);
                if (label[use->op] >= 0 || edge_redistributed (edges, use->op, use->slot))
                  continue;
                label[use->op] = label[o];
                g_queue_push_tail (queue, GUINT_TO_POINTER (use->op));
              }
          }
    }
  return label;
}

static const char *
pin_text (PlannerPlan *self, int op)
{
  int pin = g_array_index (self->ops, PlannerOpPlan, op).pin;
  if (pin >= 0 && (guint) pin < self->pins->len)
    return g_ptr_array_index (self->pins, pin);
  return "?";
}

/* A redistribution is a conflict between pins when it does more than reduce partial sums
 * (a row-parallel output meeting a norm is the pin's own doing) and the layouts on its two
 * sides come, unchanged, from two different pins. */
static void
find_conflicts (PlannerPlan *self)
{
  g_autoptr (GHashTable) edges = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < self->redistributions->len; i++)
    {
      const PlannerRedistribution *r
        = &g_array_index (self->redistributions, PlannerRedistribution, i);
      if (r->consumer >= 0 && !r->producer_side)
        g_hash_table_add (edges, GUINT_TO_POINTER (((guint) r->consumer << 8) | r->slot));
    }
  g_autofree int *upstream = nearest_pins (self, edges, FALSE);
  g_autofree int *downstream = nearest_pins (self, edges, TRUE);
  for (guint i = 0; i < self->redistributions->len; i++)
    {
      const PlannerRedistribution *r
        = &g_array_index (self->redistributions, PlannerRedistribution, i);
      if (r->consumer < 0 || r->n_steps == 0 || r->producer_side)
        continue;
      PlannerLayout reduced = r->from;
      reduced.partial = 0;
      if (planner_layout_equal (&reduced, &r->to))
        continue;
      const PlannerTensor *t = planner_graph_get_tensor (self->graph, r->tensor);
      int a = t->producer >= 0 ? upstream[t->producer] : -1;
      int b = downstream[r->consumer];
      if (a < 0 || b < 0 || a == b)
        continue;

      PlannerRedistPath path = { TRUE, r->n_steps, r->steps, r->bytes, r->time_s };
      g_autofree char *steps = planner_redist_path_describe (&path, &self->mesh);
      g_autofree char *cost = planner_format_time (r->time_s);
      PlannerConflict c;
      c.message = g_strdup_printf (
        "pins on %s (%s) and %s (%s) meet at %s -> %s (tensor %s): %s, %s",
        planner_graph_get_op (self->graph, a)->name, pin_text (self, a),
        planner_graph_get_op (self->graph, b)->name, pin_text (self, b),
        t->producer >= 0 ? planner_graph_get_op (self->graph, t->producer)->name : t->name,
        planner_graph_get_op (self->graph, r->consumer)->name, t->name, steps, cost);
      c.redistribution = i;
      g_array_append_val (self->conflicts, c);
    }
}

/* Backward reductions no forward step mirrors: an op that splits its work over axis a while
 * an activation input is whole along a (Megatron's column-parallel input, the "f" operator)
 * gets partial gradients for that input, to be all-reduced over a. One AllReduce per tensor
 * and axis however many such users it has (their gradients add up first). Where the forward
 * edge gathered the input over a, the transposed ReduceScatter already reduces it. */
double
planner_plan_activation_gradient_sync (PlannerPlan *self, const gboolean *ops)
{
  PlannerGraph *g = self->graph;
  guint n_tensors = planner_graph_get_n_tensors (g);
  g_autofree guint32 *pending = g_new0 (guint32, n_tensors);
  g_autofree guint64 *bytes = g_new0 (guint64, n_tensors);
  double time = 0;

  for (guint i = 0; i < planner_graph_get_n_ops (g); i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      const PlannerOpPlan *p = &g_array_index (self->ops, PlannerOpPlan, i);
      guint32 used = planner_strategy_axis_mask (&p->strategy);
      PlannerLayout in[PLANNER_MAX_OPERANDS];
      if (used == 0 || (ops && !ops[i]))
        continue;
      planner_strategy_layouts (&p->strategy, &op->rule, &self->mesh, in, NULL);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          guint t = op->inputs[k];
          const PlannerTensor *tensor = planner_graph_get_tensor (g, t);
          if (tensor->kind != PLANNER_TENSOR_ACTIVATION)
            continue;
          guint32 whole = used & ~planner_layout_split_mask (&in[k]) & ~in[k].partial;
          int r = planner_plan_find_redistribution (self, t, &in[k]);
          if (r >= 0)
            {
              const PlannerRedistribution *red
                = &g_array_index (self->redistributions, PlannerRedistribution, r);
              for (guint s = 0; s < red->n_steps; s++)
                if (red->steps[s].kind == PLANNER_STEP_ALL_GATHER)
                  whole &= ~(1u << red->steps[s].axis);
            }
          pending[t] |= whole;
          bytes[t] = MAX (bytes[t], local_bytes (self, tensor, &in[k]));
        }
    }
  for (guint t = 0; t < n_tensors; t++)
    for (guint a = 0; a < self->mesh.n_axes; a++)
      if (pending[t] & (1u << a))
        time += planner_cost_step_time (self->hw, &self->mesh, PLANNER_STEP_ALL_REDUCE, a,
                                        bytes[t], bytes[t]);
  return time;
}

static gboolean
compute_totals (PlannerPlan *self, GError **error)
{
  PlannerPlanTotals *tot = &self->totals;
  PlannerGraph *g = self->graph;
  guint n_ops = planner_graph_get_n_ops (g);
  double backward_comm = 0;

  memset (tot, 0, sizeof *tot);
  tot->n_ops = n_ops;
  for (guint i = 0; i < n_ops; i++)
    {
      PlannerOpPlan *p = &g_array_index (self->ops, PlannerOpPlan, i);
      const PlannerOp *op = planner_graph_get_op (g, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
      double bytes = 0;

      switch (p->decision)
        {
        case PLANNER_DECIDED_PINNED: tot->n_pinned++; break;
        case PLANNER_DECIDED_PROPAGATED: tot->n_propagated++; break;
        case PLANNER_DECIDED_DEFAULTED: tot->n_defaulted++; break;
        }
      planner_strategy_layouts (&p->strategy, &op->rule, &self->mesh, in, out);
      for (guint k = 0; k < op->n_inputs; k++)
        bytes += (double) local_bytes (self, planner_graph_get_tensor (g, op->inputs[k]), &in[k]);
      for (guint k = 0; k < op->n_outputs; k++)
        bytes
          += (double) local_bytes (self, planner_graph_get_tensor (g, op->outputs[k]), &out[k]);
      p->flops = planner_strategy_local_flops (&p->strategy, &op->rule, &self->mesh);
      PlannerDType dtype = planner_graph_get_tensor (g, op->outputs[0])->dtype;
      p->compute_time_s = planner_cost_compute_time (self->hw, dtype, p->flops, bytes);
      tot->compute_time_s += p->compute_time_s;
    }

  tot->n_redistributions = self->redistributions->len;
  for (guint r = 0; r < self->redistributions->len; r++)
    {
      const PlannerRedistribution *red
        = &g_array_index (self->redistributions, PlannerRedistribution, r);
      for (guint s = 0; s < red->n_steps; s++)
        {
          const PlannerRedistStep *st = &red->steps[s];
          PlannerStepKind back;
          tot->coll_count[st->kind]++;
          tot->coll_bytes[st->kind] += st->bytes;
          tot->coll_time_s[st->kind] += st->time_s;
          tot->axis_bytes[st->axis] += st->bytes;
          tot->axis_time_s[st->axis] += st->time_s;
          tot->comm_bytes += st->bytes;
          tot->comm_time_s += st->time_s;
          /* Backward: the transpose of each step, with the buffers swapped. */
          if (planner_step_kind_backward (st->kind, &back))
            backward_comm += planner_cost_step_time (self->hw, &self->mesh, back, st->axis,
                                                     st->n_out, st->n_in);
        }
    }
  tot->backward_comm_time_s = backward_comm + planner_plan_activation_gradient_sync (self, NULL);

  /* Parameters: memory, and a gradient AllReduce over every axis on which the parameter is
   * replicated while its users split their work. */
  guint n_tensors = planner_graph_get_n_tensors (g);
  for (guint t = 0; t < n_tensors; t++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (g, t);
      const PlannerLayout *layout = &g_array_index (self->tensor_layouts, PlannerLayout, t);
      guint64 bytes = local_bytes (self, tensor, layout);
      if (tensor->kind == PLANNER_TENSOR_ACTIVATION)
        {
          tot->activation_bytes_per_device += bytes;
          continue;
        }
      if (tensor->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      tot->param_bytes_per_device += bytes;
      guint32 users = 0;
      for (guint c = 0; c < tensor->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (tensor->consumers, PlannerUse, c);
          users |= planner_strategy_axis_mask (
            &g_array_index (self->ops, PlannerOpPlan, use->op).strategy);
        }
      guint32 sync = users & ~planner_layout_split_mask (layout) & ~layout->partial;
      for (guint a = 0; a < self->mesh.n_axes; a++)
        if (sync & (1u << a))
          tot->grad_sync_time_s += planner_cost_step_time (
            self->hw, &self->mesh, PLANNER_STEP_ALL_REDUCE, a, bytes, bytes);
    }
  /* The training model replaces the step, memory and per-op compute figures
   * (planner-plan-train.c). */
  return planner_plan_compute_training (self, tot, TRUE, error);
}

gboolean
planner_plan_finish (PlannerPlan *self, gboolean allow_tied_redistribution, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), FALSE);

  PlannerGraph *g = self->graph;
  guint n_ops = planner_graph_get_n_ops (g);
  guint n_tensors = planner_graph_get_n_tensors (g);
  g_autofree gboolean *stored = g_new0 (gboolean, n_tensors);

  g_array_set_size (self->redistributions, 0);
  g_array_set_size (self->conflicts, 0);

  /* Tensor layouts: activations as their producer leaves them (after an out_strategy
   * conversion); parameters and graph inputs as their first user needs them. */
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      PlannerOpPlan *p = &g_array_index (self->ops, PlannerOpPlan, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
      planner_strategy_layouts (&p->strategy, &op->rule, &self->mesh, in, out);
      for (guint k = 0; k < op->n_inputs; k++)
        if (planner_graph_get_tensor (g, op->inputs[k])->kind != PLANNER_TENSOR_ACTIVATION
            && !stored[op->inputs[k]])
          {
            g_array_index (self->tensor_layouts, PlannerLayout, op->inputs[k]) = in[k];
            stored[op->inputs[k]] = TRUE;
          }
      for (guint k = 0; k < op->n_outputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (g, op->outputs[k]);
          PlannerLayout *final = &g_array_index (self->tensor_layouts, PlannerLayout,
                                                 op->outputs[k]);
          *final = p->has_out_layouts ? p->out_layouts[k] : out[k];
          if (p->has_out_layouts && !planner_layout_equal (&out[k], final))
            {
              const PlannerRedistPath *path = planner_redistributor_find (
                self->redistributor, &out[k], final, t->shape, t->rank, t->dtype);
              if (!path->reachable)
                return unreachable_error (self, t, op->name, &out[k], final, error);
              add_redistribution (self, op->outputs[k], (int) i, k, TRUE, &out[k], final, path);
            }
        }
    }

  /* Every edge whose layouts differ gets its redistribution. */
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS];
      planner_plan_op_layouts (self, i, in, NULL);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (g, op->inputs[k]);
          const PlannerLayout *have = &g_array_index (self->tensor_layouts, PlannerLayout,
                                                      op->inputs[k]);
          if (planner_layout_equal (have, &in[k]))
            continue;
          if (t->kind == PLANNER_TENSOR_PARAMETER && !allow_tied_redistribution)
            {
              const PlannerUse *first = &g_array_index (t->consumers, PlannerUse, 0);
              g_autofree char *a = planner_layout_to_string (have, &self->mesh);
              g_autofree char *b = planner_layout_to_string (&in[k], &self->mesh);
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT,
                           "tied parameter %s: %s uses it as %s but %s as %s; give both users "
                           "the same layout, or allow a redistribution on one use",
                           t->name, planner_graph_get_op (g, first->op)->name, a, op->name, b);
              return FALSE;
            }
          if (planner_plan_find_redistribution (self, op->inputs[k], &in[k]) >= 0)
            continue;
          const PlannerRedistPath *path = planner_redistributor_find (
            self->redistributor, have, &in[k], t->shape, t->rank, t->dtype);
          if (!path->reachable)
            return unreachable_error (self, t, op->name, have, &in[k], error);
          add_redistribution (self, op->inputs[k], (int) i, k, FALSE, have, &in[k], path);
        }
    }

  /* Graph outputs leave fully reduced. */
  const GArray *outputs = planner_graph_get_outputs (g);
  for (guint o = 0; o < outputs->len; o++)
    {
      guint tensor = g_array_index (outputs, guint, o);
      const PlannerTensor *t = planner_graph_get_tensor (g, tensor);
      const PlannerLayout *have = &g_array_index (self->tensor_layouts, PlannerLayout, tensor);
      if (!have->partial)
        continue;
      PlannerLayout reduced = *have;
      reduced.partial = 0;
      const PlannerRedistPath *path = planner_redistributor_find (
        self->redistributor, have, &reduced, t->shape, t->rank, t->dtype);
      add_redistribution (self, tensor, -1, o, FALSE, have, &reduced, path);
    }

  find_conflicts (self);
  return compute_totals (self, error);
}

/* ---- equality ---- */

static gboolean
steps_equal (const PlannerRedistStep *a, const PlannerRedistStep *b)
{
  return a->kind == b->kind && a->axis == b->axis && a->dim == b->dim && a->dim_to == b->dim_to
         && planner_layout_equal (&a->before, &b->before)
         && planner_layout_equal (&a->after, &b->after) && a->n_in == b->n_in
         && a->n_out == b->n_out && a->bytes == b->bytes && a->time_s == b->time_s;
}

gboolean
planner_plan_equal (PlannerPlan *a, PlannerPlan *b)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (a) && PLANNER_IS_PLAN (b), FALSE);

  if (!planner_graph_equal (a->graph, b->graph) || !planner_mesh_equal (&a->mesh, &b->mesh)
      || !planner_hardware_equal (a->hw, b->hw) || g_strcmp0 (a->name, b->name) != 0
      || g_strcmp0 (a->policy, b->policy) != 0 || a->pins->len != b->pins->len
      || a->ops->len != b->ops->len || a->redistributions->len != b->redistributions->len
      || a->trace->len != b->trace->len || a->conflicts->len != b->conflicts->len)
    return FALSE;
  if (memcmp (&a->constants, &b->constants, sizeof a->constants) != 0)
    return FALSE;
  for (guint i = 0; i < a->pins->len; i++)
    if (g_strcmp0 (g_ptr_array_index (a->pins, i), g_ptr_array_index (b->pins, i)) != 0)
      return FALSE;
  for (guint i = 0; i < a->ops->len; i++)
    {
      const PlannerOpPlan *x = &g_array_index (a->ops, PlannerOpPlan, i);
      const PlannerOpPlan *y = &g_array_index (b->ops, PlannerOpPlan, i);
      if (!planner_strategy_equal (&x->strategy, &y->strategy) || x->decision != y->decision
          || x->trace_step != y->trace_step || x->pin != y->pin
          || x->has_out_layouts != y->has_out_layouts || x->compute_time_s != y->compute_time_s
          || x->flops != y->flops)
        return FALSE;
      if (x->has_out_layouts)
        for (guint k = 0; k < planner_graph_get_op (a->graph, i)->n_outputs; k++)
          if (!planner_layout_equal (&x->out_layouts[k], &y->out_layouts[k]))
            return FALSE;
    }
  for (guint t = 0; t < a->tensor_layouts->len; t++)
    if (!planner_layout_equal (&g_array_index (a->tensor_layouts, PlannerLayout, t),
                               &g_array_index (b->tensor_layouts, PlannerLayout, t)))
      return FALSE;
  for (guint r = 0; r < a->redistributions->len; r++)
    {
      const PlannerRedistribution *x
        = &g_array_index (a->redistributions, PlannerRedistribution, r);
      const PlannerRedistribution *y
        = &g_array_index (b->redistributions, PlannerRedistribution, r);
      if (x->tensor != y->tensor || x->consumer != y->consumer || x->slot != y->slot
          || x->producer_side != y->producer_side || !planner_layout_equal (&x->from, &y->from)
          || !planner_layout_equal (&x->to, &y->to) || x->n_steps != y->n_steps
          || x->bytes != y->bytes || x->time_s != y->time_s)
        return FALSE;
      for (guint s = 0; s < x->n_steps; s++)
        if (!steps_equal (&x->steps[s], &y->steps[s]))
          return FALSE;
    }
  for (guint i = 0; i < a->trace->len; i++)
    {
      const PlannerTraceStep *x = &g_array_index (a->trace, PlannerTraceStep, i);
      const PlannerTraceStep *y = &g_array_index (b->trace, PlannerTraceStep, i);
      if (x->index != y->index || x->op != y->op
          || !planner_strategy_equal (&x->strategy, &y->strategy) || x->from_op != y->from_op
          || x->forward != y->forward || x->edge_cost_s != y->edge_cost_s
          || x->n_candidates != y->n_candidates || x->has_runner_up != y->has_runner_up
          || (x->has_runner_up && (!planner_strategy_equal (&x->runner_up, &y->runner_up)
                                   || x->runner_up_cost_s != y->runner_up_cost_s)))
        return FALSE;
    }
  for (guint i = 0; i < a->conflicts->len; i++)
    if (g_strcmp0 (g_array_index (a->conflicts, PlannerConflict, i).message,
                   g_array_index (b->conflicts, PlannerConflict, i).message)
        != 0)
      return FALSE;
  return memcmp (&a->totals, &b->totals, sizeof a->totals) == 0;
}

/* ---- rebuilding a saved plan (planner-plan-private.h) ---- */

#define TOTAL(name, kind, member)                                                                  \
  {                                                                                                \
    name, PLANNER_TOTAL_##kind, G_STRUCT_OFFSET (PlannerPlanTotals, member)                        \
  }

const PlannerTotalField planner_total_fields[PLANNER_N_TOTAL_FIELDS] = {
  TOTAL ("ops", COUNT, n_ops),
  TOTAL ("pinned", COUNT, n_pinned),
  TOTAL ("propagated", COUNT, n_propagated),
  TOTAL ("defaulted", COUNT, n_defaulted),
  TOTAL ("redistributions", COUNT, n_redistributions),
  TOTAL ("comm_bytes", BYTES, comm_bytes),
  TOTAL ("comm_time_s", SECONDS, comm_time_s),
  TOTAL ("compute_time_s", SECONDS, compute_time_s),
  TOTAL ("backward_comm_time_s", SECONDS, backward_comm_time_s),
  TOTAL ("grad_sync_time_s", SECONDS, grad_sync_time_s),
  TOTAL ("step_time_s", SECONDS, step_time_s),
  TOTAL ("param_bytes_per_device", BYTES, param_bytes_per_device),
  TOTAL ("activation_bytes_per_device", BYTES, activation_bytes_per_device),
  TOTAL ("memory_per_device_bytes", BYTES, memory_per_device_bytes),
};

void
planner_plan_set_tensor_layout (PlannerPlan *self, guint tensor, const PlannerLayout *layout)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_return_if_fail (tensor < self->tensor_layouts->len && layout != NULL);
  g_array_index (self->tensor_layouts, PlannerLayout, tensor) = *layout;
}

guint
planner_plan_append_redistribution (PlannerPlan *self, const PlannerRedistribution *redistribution)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), 0);
  g_return_val_if_fail (redistribution != NULL, 0);
  PlannerRedistribution r = *redistribution;
  r.steps = g_memdup2 (redistribution->steps, r.n_steps * sizeof (PlannerRedistStep));
  g_array_append_val (self->redistributions, r);
  return self->redistributions->len - 1;
}

void
planner_plan_append_conflict (PlannerPlan *self, const char *message, guint redistribution)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_return_if_fail (message != NULL);
  PlannerConflict c = { g_strdup (message), redistribution };
  g_array_append_val (self->conflicts, c);
}

void
planner_plan_set_totals (PlannerPlan *self, const PlannerPlanTotals *totals)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));
  g_return_if_fail (totals != NULL);
  self->totals = *totals;
}
