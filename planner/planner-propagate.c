#define G_LOG_DOMAIN "planner-propagate"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-propagate.h"

/* A tied parameter used in two layouts is an error by default, so propagation treats such a
 * choice as far worse than any real redistribution. */
#define TIED_PENALTY_S 1e3

typedef struct
{
  PlannerGraph *graph;
  PlannerPlan *plan;
  const PlannerMesh *mesh;
  const PlannerHardware *hw;
  PlannerRedistributor *redist;
  guint n_ops;
  gboolean *decided;
  gboolean *pinned;
  /* Layout of each tensor as the decided ops see it; valid where known[t]. */
  PlannerLayout *layouts;
  gboolean *known;
  GHashTable *enumerations; /* PlannerOpRule bytes -> Candidates */
  GArray *needs;            /* Need: scratch of the decision in progress */
} Propagation;

void
planner_propagate_options_init (PlannerPropagateOptions *options)
{
  memset (options, 0, sizeof *options);
}

static guint
rule_hash (gconstpointer p)
{
  return planner_hash_bytes (p, sizeof (PlannerOpRule));
}

static gboolean
rule_equal (gconstpointer a, gconstpointer b)
{
  return memcmp (a, b, sizeof (PlannerOpRule)) == 0;
}

/* Every legal strategy of one rule, with what scoring needs of each precomputed: identical
 * layers have identical rules, so each distinct rule is enumerated once. */
typedef struct
{
  GArray *strategies;       /* PlannerStrategy */
  guint32 *used;            /* axes each strategy assigns */
  guint64 *parts;           /* devices its work is split over */
  PlannerLayout *layouts;   /* per strategy: n_inputs input layouts, then the outputs */
  guint stride;
} Candidates;

static void
candidates_free (gpointer data)
{
  Candidates *c = data;
  g_array_unref (c->strategies);
  g_free (c->used);
  g_free (c->parts);
  g_free (c->layouts);
  g_free (c);
}

static const Candidates *
candidates_of (Propagation *p, const PlannerOp *op)
{
  Candidates *c = g_hash_table_lookup (p->enumerations, &op->rule);
  if (c == NULL)
    {
      c = g_new0 (Candidates, 1);
      c->strategies = planner_op_rule_enumerate (&op->rule, p->mesh);
      c->stride = op->rule.n_inputs + op->rule.n_outputs;
      c->used = g_new (guint32, c->strategies->len);
      c->parts = g_new (guint64, c->strategies->len);
      c->layouts = g_new (PlannerLayout, (gsize) c->strategies->len * c->stride);
      for (guint i = 0; i < c->strategies->len; i++)
        {
          const PlannerStrategy *s = &g_array_index (c->strategies, PlannerStrategy, i);
          PlannerLayout *l = &c->layouts[(gsize) i * c->stride];
          c->used[i] = planner_strategy_axis_mask (s);
          c->parts[i] = planner_mesh_mask_size (p->mesh, c->used[i]);
          planner_strategy_layouts (s, &op->rule, p->mesh, l, l + op->rule.n_inputs);
        }
      g_hash_table_insert (p->enumerations, (gpointer) &op->rule, c);
    }
  return c;
}

void
planner_default_strategy (const PlannerOpRule *rule, const PlannerMesh *mesh,
                          PlannerStrategy *strategy)
{
  planner_strategy_init (strategy);
  if (rule->n_outputs == 0 || rule->outputs[0].rank == 0 || rule->outputs[0].n[0] == 0)
    return;
  guint f = rule->outputs[0].f[0][0];
  if (!rule->factors[f].splittable)
    return;
  gint64 parts = 1;
  guint32 unit = planner_mesh_unit_axes (mesh);
  for (guint a = 0; a < mesh->n_axes; a++)
    if (!(unit & (1u << a)) && rule->factors[f].size % (parts * mesh->sizes[a]) == 0)
      {
        strategy->axes[f][strategy->n_axes[f]++] = (guint8) a;
        parts *= mesh->sizes[a];
      }
}

/* The layouts an op's decided consumers need of its outputs, gathered once per decision into
 * p->needs (one array reused by every decision). */
typedef struct
{
  guint output;
  PlannerLayout layout;
} Need;

static void
gather_needs (Propagation *p, guint op_index, const PlannerOp *op)
{
  GArray *needs = p->needs;
  g_array_set_size (needs, 0);
  for (guint k = 0; k < op->n_outputs; k++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (p->graph, op->outputs[k]);
      for (guint c = 0; c < tensor->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (tensor->consumers, PlannerUse, c);
          if (!p->decided[use->op] || use->op == op_index)
            continue;
          PlannerLayout need[PLANNER_MAX_OPERANDS];
          gboolean seen = FALSE;
          planner_plan_op_layouts (p->plan, use->op, need, NULL);
          /* One redistribution serves every consumer that needs the same layout. */
          for (guint i = 0; i < needs->len && !seen; i++)
            {
              const Need *n = &g_array_index (needs, Need, i);
              seen = n->output == k && planner_layout_equal (&n->layout, &need[use->slot]);
            }
          if (!seen)
            g_array_append_val (needs, ((Need){ k, need[use->slot] }));
        }
    }
}

/* Adds one edge's redistribution to the running cost; FALSE when it cannot be done. */
static gboolean
add_edge (Propagation *p, const PlannerTensor *tensor, const PlannerLayout *from,
          const PlannerLayout *to, double *cost, guint *steps)
{
  if (planner_layout_equal (from, to))
    return TRUE;
  const PlannerRedistPath *path = planner_redistributor_find (p->redist, from, to, tensor->shape,
                                                              tensor->rank, tensor->dtype);
  if (!path->reachable)
    return FALSE;
  *cost += path->time_s;
  *steps += path->n_steps;
  return TRUE;
}

/* Sum of the redistribution costs between a candidate and every decided neighbour. */
static double
edge_cost (Propagation *p, const PlannerOp *op, const PlannerLayout *in,
           const PlannerLayout *out, guint *steps)
{
  double total = 0;

  *steps = 0;
  for (guint k = 0; k < op->n_inputs; k++)
    {
      guint t = op->inputs[k];
      if (!p->known[t])
        continue;
      const PlannerTensor *tensor = planner_graph_get_tensor (p->graph, t);
      if (planner_layout_equal (&p->layouts[t], &in[k]))
        continue;
      if (!add_edge (p, tensor, &p->layouts[t], &in[k], &total, steps))
        return G_MAXDOUBLE;
      if (tensor->kind == PLANNER_TENSOR_PARAMETER)
        total += TIED_PENALTY_S;
    }
  for (guint i = 0; i < p->needs->len; i++)
    {
      const Need *n = &g_array_index (p->needs, Need, i);
      const PlannerTensor *tensor = planner_graph_get_tensor (p->graph, op->outputs[n->output]);
      if (!add_edge (p, tensor, &out[n->output], &n->layout, &total, steps))
        return G_MAXDOUBLE;
    }
  return total;
}

typedef struct
{
  PlannerStrategy strategy;
  double cost;
  guint steps;
  double compute;
  guint64 parts;
  guint index;
} Scored;

/* Costs summed in a different order differ in the last bits; closer than this they tie. */
static gboolean
same_cost (double a, double b)
{
  return fabs (a - b) <= 1e-9 * MAX (fabs (a), fabs (b));
}

/* semantics.md 9.3: zero communication first, then lower edge cost, lower compute, more
 * devices used, then the first strategy in enumeration order. Between equal edge costs, fewer
 * collective steps win first: an AllReduce and a ReduceScatter + AllGather pair cost the same
 * in the alpha-beta model, but each step is one more launch and synchronisation that the
 * model does not charge. */
static gboolean
better (const Scored *a, const Scored *b)
{
  gboolean za = a->cost == 0, zb = b->cost == 0;
  if (za != zb)
    return za;
  if (!same_cost (a->cost, b->cost))
    return a->cost < b->cost;
  if (a->steps != b->steps)
    return a->steps < b->steps;
  if (!same_cost (a->compute, b->compute))
    return a->compute < b->compute;
  if (a->parts != b->parts)
    return a->parts > b->parts;
  return a->index < b->index;
}

/* Every factor enters an op's work as a product, so @parts devices each do 1/parts of it. */
static double
compute_cost (Propagation *p, const PlannerOp *op, guint64 parts)
{
  const PlannerTensor *out = planner_graph_get_tensor (p->graph, op->outputs[0]);
  return planner_cost_compute_time (p->hw, out->dtype, op->rule.flops / (double) parts,
                                    (double) planner_tensor_bytes (out) / (double) parts);
}

static void
consider (Propagation *p, const PlannerOp *op, const PlannerStrategy *s,
          const PlannerLayout *layouts, guint64 parts, guint index, Scored *best, Scored *second,
          guint *n_considered)
{
  Scored c = { *s, 0, 0, 0, parts, index };
  c.cost = edge_cost (p, op, layouts, layouts + op->rule.n_inputs, &c.steps);
  if (c.cost >= G_MAXDOUBLE)
    return;
  c.compute = compute_cost (p, op, parts);
  (*n_considered)++;
  if (*n_considered == 1 || better (&c, best))
    {
      *second = *best;
      *best = c;
    }
  else if (*n_considered == 2 || better (&c, second))
    *second = c;
}

/* Layouts of the op's outputs (and of parameters it is the first to use) become known. */
static void
publish (Propagation *p, guint op_index)
{
  const PlannerOp *op = planner_graph_get_op (p->graph, op_index);
  const PlannerOpPlan *plan = planner_plan_get_op (p->plan, op_index);
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  planner_strategy_layouts (&plan->strategy, &op->rule, p->mesh, in, out);
  for (guint k = 0; k < op->n_outputs; k++)
    {
      p->layouts[op->outputs[k]] = plan->has_out_layouts ? plan->out_layouts[k] : out[k];
      p->known[op->outputs[k]] = TRUE;
    }
  for (guint k = 0; k < op->n_inputs; k++)
    {
      guint t = op->inputs[k];
      if (!p->known[t] && planner_graph_get_tensor (p->graph, t)->kind != PLANNER_TENSOR_ACTIVATION)
        {
          p->layouts[t] = in[k];
          p->known[t] = TRUE;
        }
    }
}

/* Whether tensor @t, not decided yet, can arrive partial over (at least) @axes: its producer
 * has a strategy whose output is partial there (a reduction split), or is linear in an input
 * that is already partial there. Extra partial axes are fine, an AllReduce removes them. */
static gboolean
may_arrive_partial (Propagation *p, guint t, guint32 axes)
{
  const PlannerTensor *tensor = planner_graph_get_tensor (p->graph, t);
  if (tensor->producer < 0)
    return FALSE; /* weights and graph inputs hold whole values, never partial sums */
  const PlannerOp *op = planner_graph_get_op (p->graph, (guint)tensor->producer);
  guint slot = 0;
  while (slot < op->n_outputs && op->outputs[slot] != t)
    slot++;
  g_assert (slot < op->n_outputs);

  const Candidates *list = candidates_of (p, op);
  for (guint i = 0; i < list->strategies->len; i++)
    {
      const PlannerLayout *out = &list->layouts[(gsize)i * list->stride + op->rule.n_inputs];
      if ((out[slot].partial & axes) == axes)
        return TRUE;
    }
  for (guint k = 0; k < op->n_inputs; k++)
    if (((op->rule.linear_inputs >> k) & 1) && p->known[op->inputs[k]]
        && (p->layouts[op->inputs[k]].partial & axes) == axes)
      return TRUE;
  return FALSE;
}

static void
decide (Propagation *p, guint op_index, guint from_op, gboolean forward)
{
  const PlannerOp *op = planner_graph_get_op (p->graph, op_index);
  const Candidates *list = candidates_of (p, op);
  Scored best = { 0 }, second = { 0 };
  guint n = 0;
  gather_needs (p, op_index, op);

  /* Partial inputs that may pass through a linear op: one variant per such input. */
  guint32 partial_in[PLANNER_MAX_OPERANDS] = { 0 };
  gboolean any_partial = FALSE;
  for (guint k = 0; k < op->n_inputs; k++)
    if (((op->rule.linear_inputs >> k) & 1) && p->known[op->inputs[k]]
        && p->layouts[op->inputs[k]].partial)
      {
        partial_in[k] = p->layouts[op->inputs[k]].partial;
        any_partial = TRUE;
      }
  /* An op linear in all its inputs together (Add, Sub) passes partial sums only when every
   * one of them arrives partial alike. An input not decided yet must be one its producer
   * can make partial; otherwise the variant would ask for partial sums that nothing makes
   * (GPT-2's residual add_attn after a pinned sdpa, whose other input comes from a Dropout
   * of whole embeddings) and the plan would be refused. */
  if (any_partial && op->rule.linear_all)
    {
      guint32 axes = 0;
      for (guint k = 0; k < op->n_inputs && !axes; k++)
        axes = partial_in[k];
      for (guint k = 0; k < op->n_inputs; k++)
        if (((op->rule.linear_inputs >> k) & 1) && !p->known[op->inputs[k]]
            && !may_arrive_partial (p, op->inputs[k], axes))
          any_partial = FALSE;
    }

  for (guint i = 0; i < list->strategies->len; i++)
    {
      const PlannerStrategy *s = &g_array_index (list->strategies, PlannerStrategy, i);
      const PlannerLayout *layouts = &list->layouts[(gsize) i * list->stride];
      consider (p, op, s, layouts, list->parts[i], i * (PLANNER_MAX_OPERANDS + 1), &best,
                &second, &n);
      if (!any_partial)
        continue;
      for (guint k = 0; k < op->n_inputs; k++)
        {
          if (!partial_in[k] || (partial_in[k] & list->used[i]))
            continue;
          PlannerStrategy v = *s;
          PlannerLayout vl[2 * PLANNER_MAX_OPERANDS];
          v.partial = partial_in[k];
          v.partial_input = op->rule.linear_all ? 0 : (guint8) k;
          planner_strategy_layouts (&v, &op->rule, p->mesh, vl, vl + op->n_inputs);
          consider (p, op, &v, vl, list->parts[i], i * (PLANNER_MAX_OPERANDS + 1) + k + 1,
                    &best, &second, &n);
          if (op->rule.linear_all)
            break;
        }
    }

  PlannerOpPlan *plan = planner_plan_get_op (p->plan, op_index);
  if (n == 0)
    {
      /* Nothing reachable (every candidate needs partial sums that nobody makes): keep the
       * default, which the plan's redistributions will then resolve or refuse. */
      planner_default_strategy (&op->rule, p->mesh, &best.strategy);
    }
  plan->strategy = best.strategy;
  plan->decision = PLANNER_DECIDED_PROPAGATED;
  plan->trace_step = (int) planner_plan_get_n_trace_steps (p->plan);

  PlannerTraceStep step = { 0 };
  step.index = (guint) plan->trace_step;
  step.op = op_index;
  step.strategy = best.strategy;
  step.from_op = (int) from_op;
  step.forward = forward;
  step.edge_cost_s = n ? best.cost : 0;
  step.n_candidates = n;
  step.has_runner_up = n > 1;
  if (n > 1)
    {
      step.runner_up = second.strategy;
      step.runner_up_cost_s = second.cost;
    }
  planner_plan_append_trace_step (p->plan, &step);
  p->decided[op_index] = TRUE;
  publish (p, op_index);
}

static void
bfs (Propagation *p, guint seed, gboolean *visited)
{
  g_autoptr (GQueue) queue = g_queue_new ();
  g_queue_push_tail (queue, GUINT_TO_POINTER (seed));

  while (!g_queue_is_empty (queue))
    {
      guint o = GPOINTER_TO_UINT (g_queue_pop_head (queue));
      const PlannerOp *op = planner_graph_get_op (p->graph, o);

      for (guint k = 0; k < op->n_outputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (p->graph, op->outputs[k]);
          for (guint c = 0; c < t->consumers->len; c++)
            {
              guint next = g_array_index (t->consumers, PlannerUse, c).op;
              if (visited[next])
                continue;
              visited[next] = TRUE;
              decide (p, next, o, TRUE);
              g_queue_push_tail (queue, GUINT_TO_POINTER (next));
            }
        }
      for (guint k = 0; k < op->n_inputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (p->graph, op->inputs[k]);
          if (t->producer < 0 || visited[t->producer])
            continue;
          guint next = (guint) t->producer;
          visited[next] = TRUE;
          decide (p, next, o, FALSE);
          g_queue_push_tail (queue, GUINT_TO_POINTER (next));
        }
    }
}

static const char *const *
input_names_of (PlannerGraph *graph, const PlannerOp *op, const char **names)
{
  for (guint k = 0; k < op->n_inputs; k++)
    names[k] = planner_graph_get_tensor (graph, op->inputs[k])->name;
  names[op->n_inputs] = NULL;
  return names;
}

/* Applies one pin to one op. */
static gboolean
pin_op (Propagation *p, guint op_index, const PlannerPin *pin, guint pin_index, GError **error)
{
  const PlannerOp *op = planner_graph_get_op (p->graph, op_index);
  const char *names[PLANNER_MAX_OPERANDS + 1];
  PlannerOpPlan *plan = planner_plan_get_op (p->plan, op_index);
  PlannerStrategy s;
  g_autoptr (GError) local = NULL;

  /* Trailing inputs left out must be parameters: their layouts follow from the factors. */
  for (guint k = pin->n_inputs; k < op->n_inputs; k++)
    if (planner_graph_get_tensor (p->graph, op->inputs[k])->kind != PLANNER_TENSOR_PARAMETER)
      {
        g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                     "pin '%s' on %s gives %u input layouts; input %u (%s) is not a parameter, "
                     "so give layouts for the first %u inputs",
                     pin->text, op->name, pin->n_inputs, k,
                     planner_graph_get_tensor (p->graph, op->inputs[k])->name, k + 1);
        return FALSE;
      }
  if (!planner_strategy_from_layouts (&op->rule, p->mesh, pin->inputs, pin->n_inputs, op->name,
                                      input_names_of (p->graph, op, names), &s, &local))
    {
      g_set_error (error, PLANNER_ERROR, local->code, "pin '%s': %s", pin->text, local->message);
      return FALSE;
    }
  if (pin->n_outputs)
    {
      if (pin->n_outputs != op->n_outputs)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                       "pin '%s': %s has %u outputs, the pin gives %u output layouts", pin->text,
                       op->name, op->n_outputs, pin->n_outputs);
          return FALSE;
        }
      for (guint k = 0; k < op->n_outputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (p->graph, op->outputs[k]);
          g_autofree char *what = g_strdup_printf ("pin '%s': output %s of %s", pin->text,
                                                   t->name, op->name);
          if (!planner_layout_validate (&pin->outputs[k], p->mesh, t->shape, t->rank, what,
                                        error))
            return FALSE;
        }
      plan->has_out_layouts = TRUE;
      memcpy (plan->out_layouts, pin->outputs, op->n_outputs * sizeof (PlannerLayout));
    }
  plan->strategy = s;
  plan->decision = PLANNER_DECIDED_PINNED;
  plan->pin = (int) pin_index;
  return TRUE;
}

PlannerPlan *
planner_propagate (PlannerGraph *graph, const PlannerMesh *mesh, const PlannerHardware *hw,
                   GPtrArray *pins, const PlannerPropagateOptions *options, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), NULL);
  g_return_val_if_fail (mesh != NULL && hw != NULL, NULL);

  gint64 start = g_get_monotonic_time ();
  PlannerPropagateOptions defaults;
  if (options == NULL)
    {
      planner_propagate_options_init (&defaults);
      options = &defaults;
    }

  g_autoptr (PlannerPlan) plan = planner_plan_new (graph, mesh, hw);
  Propagation p = { graph, plan, planner_plan_get_mesh (plan), planner_plan_get_hardware (plan),
                    planner_plan_get_redistributor (plan), planner_graph_get_n_ops (graph) };
  guint n_tensors = planner_graph_get_n_tensors (graph);
  g_autofree gboolean *decided = g_new0 (gboolean, p.n_ops);
  g_autofree gboolean *pinned = g_new0 (gboolean, p.n_ops);
  g_autofree gboolean *visited = g_new0 (gboolean, p.n_ops);
  g_autofree int *pinned_by = g_new (int, p.n_ops);
  g_autofree PlannerLayout *layouts = g_new0 (PlannerLayout, n_tensors);
  g_autofree gboolean *known = g_new0 (gboolean, n_tensors);
  p.decided = decided;
  p.pinned = pinned;
  p.layouts = layouts;
  p.known = known;
  g_autoptr (GHashTable) enumerations
    = g_hash_table_new_full (rule_hash, rule_equal, NULL, candidates_free);
  g_autoptr (GArray) needs = g_array_new (FALSE, FALSE, sizeof (Need));
  p.enumerations = enumerations;
  p.needs = needs;

  /* Pins: sorted by text so the plan does not depend on the order they were given in; a
   * user's pin overrides a policy's, two different pins of one tier on one op conflict. */
  g_autoptr (GPtrArray) sorted = g_ptr_array_new ();
  for (guint i = 0; pins && i < pins->len; i++)
    g_ptr_array_add (sorted, g_ptr_array_index (pins, i));
  for (guint i = 1; i < sorted->len; i++)
    for (guint j = i; j > 0; j--)
      {
        PlannerPin *a = g_ptr_array_index (sorted, j - 1), *b = g_ptr_array_index (sorted, j);
        int c = a->priority != b->priority ? (int) a->priority - (int) b->priority
                                           : strcmp (a->text, b->text);
        if (c <= 0)
          break;
        sorted->pdata[j - 1] = b;
        sorted->pdata[j] = a;
      }
  /* Reversed names once: GPatternSpec wants them for leading-'*' globs. */
  g_autoptr (GPtrArray) reversed_names = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < p.n_ops; i++)
    {
      pinned_by[i] = -1;
      g_ptr_array_add (reversed_names, g_utf8_strreverse (planner_graph_get_op (graph, i)->name, -1));
    }
  char **reversed = (char **) reversed_names->pdata;
  for (guint i = 0; i < sorted->len; i++)
    {
      const PlannerPin *pin = g_ptr_array_index (sorted, i);
      gboolean matched = FALSE;
      planner_plan_add_pin_text (plan, pin->text);
      for (guint o = 0; o < p.n_ops; o++)
        {
          const PlannerOp *op = planner_graph_get_op (graph, o);
          if (!g_pattern_spec_match (pin->pattern, strlen (op->name), op->name,
                                     reversed[o]))
            continue;
          matched = TRUE;
          if (pinned_by[o] >= 0)
            {
              const PlannerPin *prev = g_ptr_array_index (sorted, pinned_by[o]);
              PlannerOpPlan before = *planner_plan_get_op (plan, o);
              if (!pin_op (&p, o, pin, i, error))
                {
                  return NULL;
                }
              PlannerOpPlan *after = planner_plan_get_op (plan, o);
              gboolean same = planner_strategy_equal (&before.strategy, &after->strategy)
                              && before.has_out_layouts == after->has_out_layouts
                              && (!before.has_out_layouts
                                  || memcmp (before.out_layouts, after->out_layouts,
                                             sizeof before.out_layouts) == 0);
              /* Overlapping globs that ask for the same strategy agree; the first stays. */
              if (same && prev->priority == pin->priority)
                {
                  *after = before;
                  continue;
                }
              if (prev->priority == pin->priority)
                {
                  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT,
                               "%s is matched by two pins, '%s' and '%s'; make the globs "
                               "disjoint",
                               op->name, prev->text, pin->text);
                  return NULL;
                }
            }
          if (!pin_op (&p, o, pin, i, error))
            {
              return NULL;
            }
          pinned_by[o] = (int) i;
          pinned[o] = decided[o] = visited[o] = TRUE;
        }
      if (!matched)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_OP,
                       "pin '%s': no op matches '%s'; op names look like %s (globs such as "
                       "'*.q_proj' work)",
                       pin->text, pin->glob,
                       p.n_ops > 1 ? planner_graph_get_op (graph, p.n_ops / 2)->name : "?");
          return NULL;
        }
    }

  /* Seeds publish their layouts first, so every BFS sees every pin. */
  for (guint o = 0; o < p.n_ops; o++)
    if (pinned[o])
      publish (&p, o);
  for (guint o = 0; o < p.n_ops; o++)
    if (pinned[o])
      bfs (&p, o, visited);

  for (guint o = 0; o < p.n_ops; o++)
    if (!decided[o])
      {
        PlannerOpPlan *op_plan = planner_plan_get_op (plan, o);
        planner_default_strategy (&planner_graph_get_op (graph, o)->rule, p.mesh,
                                  &op_plan->strategy);
        op_plan->decision = PLANNER_DECIDED_DEFAULTED;
      }

  if (!planner_plan_finish (plan, options->allow_tied_redistribution, error))
    return NULL;
  planner_plan_set_propagate_ms (plan, (double) (g_get_monotonic_time () - start) / 1000.0);
  return g_steal_pointer (&plan);
}
