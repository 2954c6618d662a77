#define G_LOG_DOMAIN "test-graphview-view-model"

#include "config.h"

#include <string.h>

#include "graphview-view-model.h"
#include "planner-redistribute.h"
#include "test-util.h"

/* The view model: what the renderer draws of a plan, read without Cairo or a display. Every
 * figure is worked out here from the plan itself (its trace, decisions, strategies and
 * redistributions), not from the view model's own tables. */

typedef struct
{
  PlannerGraph *graph;
  PlannerPlan *megatron;
  PlannerPlan *dp;
  GraphviewModel *model;
  GraphviewViewModel *vm;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->graph = test_util_model ("gpt2-tiny", NULL);
  f->megatron = test_util_plan (f->graph, "dp=2,mp=2", NULL, "megatron", NULL);
  f->dp = test_util_plan (f->graph, "dp=2,mp=2", NULL, "dp", NULL);
  f->model = graphview_model_new (f->graph);
  f->vm = graphview_view_model_new (f->model);
  graphview_view_model_set_plan (f->vm, f->megatron);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  g_object_unref (f->vm);
  g_object_unref (f->model);
  g_object_unref (f->dp);
  g_object_unref (f->megatron);
  g_object_unref (f->graph);
}

/* The first block node of the folded model. */
static guint
first_block_item (Fixture *f)
{
  for (guint i = 0; i < graphview_model_get_n_items (f->model); i++)
    if (graphview_model_get_item (f->model, i)->kind == GRAPHVIEW_ITEM_BLOCK)
      return i;
  g_assert_not_reached ();
}

/* At step k an op is pending when the trace reaches it after k (defaulted ops after every
 * step), current when the trace's step k is it, else decided; counted from the trace. */
static void
test_step_states (Fixture *f, gconstpointer data)
{
  guint n_ops = planner_graph_get_n_ops (f->graph);
  guint n_steps = planner_plan_get_n_trace_steps (f->megatron);
  g_assert_cmpuint (n_steps, >, 10);
  int *reached = g_new (int, n_ops);
  for (guint op = 0; op < n_ops; op++)
    reached[op] = -1;
  for (guint i = 0; i < n_steps; i++)
    {
      const PlannerTraceStep *step = planner_plan_get_trace_step (f->megatron, i);
      g_assert_cmpint (reached[step->op], ==, -1); /* each op reached once */
      reached[step->op] = (int)i;
    }
  guint n_defaulted = 0, n_pinned = 0;
  for (guint op = 0; op < n_ops; op++)
    {
      PlannerDecision d = planner_plan_get_op (f->megatron, op)->decision;
      n_defaulted += d == PLANNER_DECIDED_DEFAULTED;
      n_pinned += d == PLANNER_DECIDED_PINNED;
      /* Only propagated ops are in the trace. */
      g_assert_cmpint (reached[op] >= 0, ==, d == PLANNER_DECIDED_PROPAGATED);
    }
  g_assert_cmpuint (n_pinned, >, 0);

  /* No step: everything drawn as decided. */
  for (guint op = 0; op < n_ops; op++)
    g_assert_cmpint (graphview_view_model_get_step_state (f->vm, op), ==, GRAPHVIEW_STEP_DECIDED);

  const guint ks[] = { 0, n_steps / 2, n_steps - 1 };
  for (guint t = 0; t < G_N_ELEMENTS (ks); t++)
    {
      guint k = ks[t];
      graphview_view_model_set_step (f->vm, (int)k);
      g_assert_cmpint (graphview_view_model_get_step (f->vm), ==, (int)k);
      guint pending = 0, current = 0, decided = 0;
      for (guint op = 0; op < n_ops; op++)
        {
          PlannerDecision d = planner_plan_get_op (f->megatron, op)->decision;
          GraphviewStepState want = d == PLANNER_DECIDED_PINNED      ? GRAPHVIEW_STEP_DECIDED
                                    : d == PLANNER_DECIDED_DEFAULTED ? GRAPHVIEW_STEP_PENDING
                                    : reached[op] > (int)k           ? GRAPHVIEW_STEP_PENDING
                                    : reached[op] == (int)k          ? GRAPHVIEW_STEP_CURRENT
                                                                     : GRAPHVIEW_STEP_DECIDED;
          GraphviewStepState got = graphview_view_model_get_step_state (f->vm, op);
          if (got != want)
            g_error ("op %u (%s) at step %u: state %d, the trace gives %d", op,
                     planner_graph_get_op (f->graph, op)->name, k, got, want);
          pending += got == GRAPHVIEW_STEP_PENDING;
          current += got == GRAPHVIEW_STEP_CURRENT;
          decided += got == GRAPHVIEW_STEP_DECIDED;
        }
      /* The counts by hand: the steps after k and the defaulted ops are pending, the pins
       * and the steps up to k decided, the op of step k current. */
      g_assert_cmpuint (pending, ==, (n_steps - 1 - k) + n_defaulted);
      g_assert_cmpuint (current, ==, 1);
      g_assert_cmpuint (decided, ==, n_pinned + k);
      guint op_k = planner_plan_get_trace_step (f->megatron, k)->op;
      g_assert_cmpint (graphview_view_model_get_step_state (f->vm, op_k), ==,
                       GRAPHVIEW_STEP_CURRENT);

      /* The whole graph's summary agrees. */
      GraphviewSummary all;
      graphview_view_model_summarize_ops (f->vm, 0, n_ops, &all);
      g_assert_cmpuint (all.pending, ==, pending);
      g_assert_true (all.has_current);
    }
  graphview_view_model_set_step (f->vm, -1);
  g_assert_cmpint (graphview_view_model_get_step_state (f->vm, 0), ==, GRAPHVIEW_STEP_DECIDED);
  g_free (reached);
}

/* A folded block node's counts, redistributions and time, and the whole graph's, from the
 * plan's ops and redistributions. */
static void
test_block_summary (Fixture *f, gconstpointer data)
{
  guint item = first_block_item (f);
  const GraphviewItem *it = graphview_model_get_item (f->model, item);
  g_assert_cmpuint (it->n_blocks, >, 1);
  guint lo = it->first_op, hi = it->first_op + it->n_ops;

  guint counts[3] = { 0 };
  for (guint op = lo; op < hi; op++)
    counts[planner_plan_get_op (f->megatron, op)->decision]++;
  guint redistributions = 0;
  double cost = 0;
  for (guint i = 0; i < planner_plan_get_n_redistributions (f->megatron); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (f->megatron, i);
      if (r->consumer >= 0 && !r->producer_side)
        {
          if ((guint)r->consumer >= lo && (guint)r->consumer < hi)
            {
              redistributions++;
              cost += r->time_s;
            }
        }
      else
        {
          /* At the producer: conversions of its output, final reductions. */
          int producer = planner_graph_get_tensor (f->graph, r->tensor)->producer;
          if (producer >= (int)lo && producer < (int)hi)
            cost += r->time_s;
        }
    }

  GraphviewSummary s;
  graphview_view_model_summarize_item (f->vm, item, &s);
  g_assert_cmpuint (s.n_ops, ==, it->n_ops);
  g_assert_cmpuint (s.counts[PLANNER_DECIDED_PINNED], ==, counts[PLANNER_DECIDED_PINNED]);
  g_assert_cmpuint (s.counts[PLANNER_DECIDED_PROPAGATED], ==, counts[PLANNER_DECIDED_PROPAGATED]);
  g_assert_cmpuint (s.counts[PLANNER_DECIDED_DEFAULTED], ==, counts[PLANNER_DECIDED_DEFAULTED]);
  g_assert_cmpuint (s.counts[0] + s.counts[1] + s.counts[2], ==, it->n_ops);
  g_assert_cmpuint (counts[PLANNER_DECIDED_PINNED], >, 0);
  g_assert_cmpuint (s.redistributions, ==, redistributions);
  g_assert_cmpuint (redistributions, >, 0);
  g_assert_cmpfloat_with_epsilon (s.cost, cost, 1e-12 + 1e-9 * cost);
  g_assert_cmpuint (s.differs, ==, 0);

  /* The whole graph against the plan's totals. */
  const PlannerPlanTotals *totals = planner_plan_get_totals (f->megatron);
  GraphviewSummary all;
  graphview_view_model_summarize_ops (f->vm, 0, planner_graph_get_n_ops (f->graph), &all);
  g_assert_cmpuint (all.counts[0], ==, totals->n_pinned);
  g_assert_cmpuint (all.counts[1], ==, totals->n_propagated);
  g_assert_cmpuint (all.counts[2], ==, totals->n_defaulted);

  /* The tooltip says the same. */
  g_autofree char *text = graphview_view_model_dup_item_summary (f->vm, item);
  g_autofree char *line = g_strdup_printf ("pinned %u, propagated %u, defaulted %u",
                                           counts[0], counts[1], counts[2]);
  g_assert_nonnull (strstr (text, line));

  /* Without a plan nothing is summed. */
  graphview_view_model_set_plan (f->vm, NULL);
  graphview_view_model_summarize_item (f->vm, item, &s);
  g_assert_cmpuint (s.counts[0] + s.counts[1] + s.counts[2] + s.redistributions, ==, 0);
  g_assert_cmpint (graphview_view_model_get_decision (f->vm, lo), ==, -1);
}

/* The ops whose strategies read differently in @a and @b, one flag an op; the count. */
static guint
strategies_differ (Fixture *f, PlannerPlan *a, PlannerPlan *b, guint8 *differ)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (a);
  guint n = 0;
  for (guint op = 0; op < planner_graph_get_n_ops (f->graph); op++)
    {
      const PlannerOpRule *rule = &planner_graph_get_op (f->graph, op)->rule;
      g_autofree char *sa = planner_strategy_to_string (&planner_plan_get_op (a, op)->strategy,
                                                        rule, mesh);
      g_autofree char *sb = planner_strategy_to_string (&planner_plan_get_op (b, op)->strategy,
                                                        rule, mesh);
      differ[op] = g_strcmp0 (sa, sb) != 0;
      n += differ[op];
    }
  return n;
}

/* Against another plan exactly the ops whose strategies read differently are marked:
 * against dp (which splits the batch over dp+mp) all 48, as `shardscope-cli compare` says
 * ("48 of 48"), against megatron-sp 14 of 48. */
static void
test_diff (Fixture *f, gconstpointer data)
{
  guint n_ops = planner_graph_get_n_ops (f->graph);
  g_assert_cmpuint (n_ops, ==, 48);
  g_autoptr (PlannerPlan) sp = test_util_plan (f->graph, "dp=2,mp=2", NULL, "megatron-sp", NULL);
  PlannerPlan *others[] = { f->dp, sp };
  const guint n_want[] = { 48, 14 };
  guint8 *want = g_new0 (guint8, n_ops);
  for (guint k = 0; k < G_N_ELEMENTS (others); k++)
    {
      graphview_view_model_set_compare_plan (f->vm, others[k]);
      g_assert_true (graphview_view_model_get_compare_plan (f->vm) == others[k]);
      g_assert_cmpuint (strategies_differ (f, f->megatron, others[k], want), ==, n_want[k]);
      guint marked = 0;
      for (guint op = 0; op < n_ops; op++)
        {
          gboolean got = graphview_view_model_op_differs (f->vm, op);
          if (got != want[op])
            g_error ("op %u (%s) against %s: marked %d, the strategies say %d", op,
                     planner_graph_get_op (f->graph, op)->name,
                     planner_plan_get_policy (others[k]), got, want[op]);
          marked += got;
        }
      g_assert_cmpuint (marked, ==, n_want[k]);

      /* A block node counts its own. */
      guint item = first_block_item (f);
      const GraphviewItem *it = graphview_model_get_item (f->model, item);
      guint in_block = 0;
      for (guint op = it->first_op; op < it->first_op + it->n_ops; op++)
        in_block += want[op];
      GraphviewSummary s;
      graphview_view_model_summarize_item (f->vm, item, &s);
      g_assert_cmpuint (s.differs, ==, in_block);
      g_assert_cmpuint (in_block, >, 0);
    }

  /* Redistributions: megatron's 5 AllReduces are gone in megatron-sp, which has 5
   * ReduceScatters and 5 AllGathers instead, none in both (`shardscope-cli compare`:
   * "5 removed, 10 added, 0 in both"). Unfolded, each sits on the edge into its slot. */
  g_assert_cmpuint (planner_plan_get_n_redistributions (f->megatron), ==, 5);
  g_assert_cmpuint (planner_plan_get_n_redistributions (sp), ==, 10);
  guint added = 0, removed = 0;
  graphview_view_model_get_n_redistribution_changes (f->vm, &added, &removed);
  g_assert_cmpuint (added, ==, 10);
  g_assert_cmpuint (removed, ==, 5);
  graphview_model_expand_all (f->model);
  guint sum_added = 0, sum_removed = 0;
  for (guint e = 0; e < graphview_model_get_n_edges (f->model); e++)
    {
      const GraphviewEdge *edge = graphview_model_get_edge (f->model, e);
      const GraphviewEdgeRef *ref = graphview_model_get_ref (f->model, edge->first_ref);
      gboolean in_a = FALSE, in_b = FALSE;
      for (guint i = 0; i < planner_plan_get_n_redistributions (f->megatron); i++)
        {
          const PlannerRedistribution *r = planner_plan_get_redistribution (f->megatron, i);
          in_a |= r->consumer == (int)ref->consumer && r->slot == ref->slot;
        }
      for (guint i = 0; i < planner_plan_get_n_redistributions (sp); i++)
        {
          const PlannerRedistribution *r = planner_plan_get_redistribution (sp, i);
          in_b |= r->consumer == (int)ref->consumer && r->slot == ref->slot;
        }
      graphview_view_model_get_edge_changes (f->vm, e, &added, &removed);
      g_assert_cmpuint (removed, ==, in_a);
      g_assert_cmpuint (added, ==, in_b);
      sum_added += added;
      sum_removed += removed;
    }
  g_assert_cmpuint (sum_added, ==, 10);
  g_assert_cmpuint (sum_removed, ==, 5);
  graphview_model_collapse_all (f->model);

  /* Against itself nothing differs; no comparison, nothing marked. */
  graphview_view_model_set_compare_plan (f->vm, f->megatron);
  for (guint op = 0; op < n_ops; op++)
    g_assert_false (graphview_view_model_op_differs (f->vm, op));
  graphview_view_model_get_n_redistribution_changes (f->vm, &added, &removed);
  g_assert_cmpuint (added + removed, ==, 0);
  graphview_view_model_set_compare_plan (f->vm, f->dp);
  graphview_view_model_set_compare_plan (f->vm, NULL);
  for (guint op = 0; op < n_ops; op++)
    g_assert_false (graphview_view_model_op_differs (f->vm, op));
  g_free (want);
}

/* Every edge of the unfolded graph carries the bytes and time of the plan's redistribution
 * into its consumer's slot, and its badge names them. */
static void
test_edge_badges (Fixture *f, gconstpointer data)
{
  graphview_model_expand_all (f->model);
  const PlannerMesh *mesh = planner_plan_get_mesh (f->megatron);
  guint n_edges = graphview_model_get_n_edges (f->model);
  guint64 total = 0;
  guint badged = 0;
  for (guint e = 0; e < n_edges; e++)
    {
      const GraphviewEdge *edge = graphview_model_get_edge (f->model, e);
      g_assert_cmpuint (edge->n_refs, ==, 1);
      const GraphviewEdgeRef *ref = graphview_model_get_ref (f->model, edge->first_ref);
      const PlannerRedistribution *found = NULL;
      for (guint i = 0; i < planner_plan_get_n_redistributions (f->megatron); i++)
        {
          const PlannerRedistribution *r = planner_plan_get_redistribution (f->megatron, i);
          if (r->consumer == (int)ref->consumer && r->slot == ref->slot && !r->producer_side)
            found = r;
        }
      guint64 bytes = 0;
      double time = graphview_view_model_get_edge_cost (f->vm, e, &bytes);
      g_assert_cmpuint (bytes, ==, found ? found->bytes : 0);
      g_assert_cmpfloat (time, ==, found ? found->time_s : 0);
      total += bytes;
      g_autofree char *badge = graphview_view_model_dup_edge_badge (f->vm, e);
      if (found == NULL || found->n_steps == 0)
        {
          g_assert_null (badge);
          continue;
        }
      badged++;
      g_autofree char *b = planner_format_bytes (found->bytes);
      g_autofree char *t = planner_format_time (found->time_s);
      g_autofree char *tail = g_strdup_printf (" %s %s", b, t);
      g_assert_true (g_str_has_suffix (badge, tail));
      g_autofree char *first = g_strdup_printf (
          "%s(%s)", planner_step_kind_to_string (found->steps[0].kind),
          mesh->names[found->steps[0].axis]);
      g_assert_true (g_str_has_prefix (badge, first));
    }
  g_assert_cmpuint (badged, >, 0);

  /* All the bytes moved into ops from other ops' outputs (parameters and graph inputs have
   * no producer, so no edge). */
  guint64 want = 0;
  for (guint i = 0; i < planner_plan_get_n_redistributions (f->megatron); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (f->megatron, i);
      if (r->consumer >= 0 && !r->producer_side
          && planner_graph_get_tensor (f->graph, r->tensor)->producer >= 0)
        want += r->bytes;
    }
  g_assert_cmpuint (total, ==, want);
  g_assert_cmpuint (want, >, 0);

  /* Folded again, the edges sum what they carry: the same bytes over fewer edges. */
  graphview_model_collapse_all (f->model);
  guint64 folded = 0;
  for (guint e = 0; e < graphview_model_get_n_edges (f->model); e++)
    {
      guint64 bytes = 0;
      graphview_view_model_get_edge_cost (f->vm, e, &bytes);
      folded += bytes;
    }
  g_assert_cmpuint (graphview_model_get_n_edges (f->model), <, n_edges);
  g_assert_cmpuint (folded, <=, want);
}

/* A trial's badge sums a block node's ops; one op over the tolerance turns it red. */
static void
test_trial_and_search (Fixture *f, gconstpointer data)
{
  guint n_ops = planner_graph_get_n_ops (f->graph);
  guint item = first_block_item (f);
  const GraphviewItem *it = graphview_model_get_item (f->model, item);
  g_assert_null (graphview_view_model_dup_trial_badge (f->vm, item, NULL));
  double *measured = g_new (double, n_ops), *estimated = g_new (double, n_ops),
         *error = g_new (double, n_ops);
  for (guint op = 0; op < n_ops; op++)
    {
      measured[op] = 1e-4;
      estimated[op] = 2e-4;
      error[op] = 1e-7;
    }
  error[it->first_op + 1] = 1e-2;
  graphview_view_model_set_trial (f->vm, measured, estimated, error, 1e-3);
  gboolean ok = TRUE;
  g_autofree char *badge = graphview_view_model_dup_trial_badge (f->vm, item, &ok);
  g_assert_false (ok);
  /* n ops of 100 us measured and 200 us estimated: n x 100 us / n x 200 us, ratio 0.5. */
  g_autofree char *m = planner_format_time (it->n_ops * 1e-4);
  g_autofree char *e = planner_format_time (it->n_ops * 2e-4);
  g_autofree char *want = g_strdup_printf ("%s / %s \xc3\x97%s err %s", m, e, "0.5", "1.0e-02");
  g_assert_cmpstr (badge, ==, want);
  /* The item before the block is an op alone, within the tolerance. */
  g_assert_cmpuint (item, >, 0);
  g_autofree char *one = graphview_view_model_dup_trial_badge (f->vm, item - 1, &ok);
  g_assert_true (ok);
  g_assert_cmpstr (one, ==, "100.0 us / 200.0 us \xc3\x97" "0.5 err 1.0e-07");
  graphview_view_model_set_trial (f->vm, NULL, NULL, NULL, 0);
  g_assert_false (graphview_view_model_has_trial (f->vm));

  /* Search: the block node holding the match is marked, the rest not. */
  guint match = it->first_op + it->n_ops - 1;
  graphview_view_model_set_highlighted_ops (f->vm, &match, 1);
  for (guint i = 0; i < graphview_model_get_n_items (f->model); i++)
    g_assert_cmpint (graphview_view_model_item_is_highlighted (f->vm, i), ==, i == item);
  g_assert_true (graphview_view_model_op_is_highlighted (f->vm, match));
  g_assert_false (graphview_view_model_op_is_highlighted (f->vm, it->first_op));
  g_free (measured);
  g_free (estimated);
  g_free (error);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/graphview-view-model/step-states", Fixture, NULL, fixture_setup, test_step_states,
              fixture_teardown);
  g_test_add ("/graphview-view-model/block-summary", Fixture, NULL, fixture_setup,
              test_block_summary, fixture_teardown);
  g_test_add ("/graphview-view-model/diff", Fixture, NULL, fixture_setup, test_diff,
              fixture_teardown);
  g_test_add ("/graphview-view-model/edge-badges", Fixture, NULL, fixture_setup,
              test_edge_badges, fixture_teardown);
  g_test_add ("/graphview-view-model/trial-and-search", Fixture, NULL, fixture_setup,
              test_trial_and_search, fixture_teardown);
  return g_test_run ();
}
