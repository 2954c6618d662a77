/* test-search.c: the plan request, the block of an op, the exact solve (against brute force
 * written here, against greedy propagation and the built-in policies) and the search. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-model.h"
#include "planner-plan-private.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-request.h"
#include "planner-search.h"
#include "planner-solve.h"
#include "test-util.h"

/* ---- the objective, written from the plan's own fields (planner-solve.h) ---- */

/* What a device sends for a parameter's gradient: its share of 25 MiB buckets, each bucket one
 * AllReduce per sync axis; the Adam step reads and writes 28 bytes per local element. */
static double
reference_objective (PlannerPlan *plan)
{
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  PlannerGraph *g = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerHardware *hw = planner_plan_get_hardware (plan);
  const PlannerCostConstants *c = planner_plan_get_constants (plan);
  double bucket = c->dp_bucket_MiB * 1048576.0;
  double total
      = t->breakdown.forward + t->breakdown.backward + t->comm_time_s + t->backward_comm_time_s;
  g_assert_cmpuint (c->zero, ==, 0);
  g_assert_cmpint (c->optimizer, ==, PLANNER_OPTIMIZER_ADAM);
  for (guint i = 0; i < planner_graph_get_n_tensors (g); i++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (g, i);
      if (x->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      const PlannerLayout *l = planner_plan_get_tensor_layout (plan, i);
      gint64 local[PLANNER_MAX_RANK];
      planner_layout_local_shape (l, mesh, x->shape, local);
      double numel = 1;
      for (guint d = 0; d < x->rank; d++)
        numel *= (double)local[d];
      double bytes = numel * planner_dtype_size (x->dtype);
      guint32 split = 0, users = 0;
      for (guint d = 0; d < l->rank; d++)
        for (guint k = 0; k < l->n_axes[d]; k++)
          split |= 1u << l->axes[d][k];
      for (guint u = 0; u < x->consumers->len; u++)
        {
          const PlannerStrategy *s
              = &planner_plan_get_op (plan, g_array_index (x->consumers, PlannerUse, u).op)
                     ->strategy;
          for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
            for (guint k = 0; k < s->n_axes[f]; k++)
              users |= 1u << s->axes[f][k];
        }
      for (guint a = 0; a < mesh->n_axes; a++)
        if ((users & ~split & ~l->partial) & (1u << a))
          total += planner_cost_step_time (hw, mesh, PLANNER_STEP_ALL_REDUCE, a, (guint64)bucket,
                                           (guint64)bucket)
                   * bytes / bucket;
      total += numel * 28.0
               / (planner_hardware_memory_bandwidth (hw)
                  * planner_hardware_get_efficiency (hw)->memory_bound);
    }
  return total;
}

static void
assert_close (double a, double b)
{
  g_assert_cmpfloat (fabs (a - b), <=, 1e-9 * MAX (fabs (a), fabs (b)) + 1e-15);
}

/* ---- brute force ---- */

/* Every strategy of every op: the legal ones, and for an op linear in some input every
 * variant that keeps partial sums over any non-empty set of free axes (a superset of what
 * the solver considers; the impossible ones fail to finish). */
static GArray *
all_values (const PlannerOp *op, const PlannerMesh *mesh)
{
  GArray *base = planner_op_rule_enumerate (&op->rule, mesh);
  GArray *values = g_array_new (FALSE, FALSE, sizeof (PlannerStrategy));
  guint32 all = 0;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (mesh->sizes[a] > 1)
      all |= 1u << a;
  for (guint i = 0; i < base->len; i++)
    {
      PlannerStrategy s = g_array_index (base, PlannerStrategy, i);
      g_array_append_val (values, s);
      guint32 used = 0;
      for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
        for (guint k = 0; k < s.n_axes[f]; k++)
          used |= 1u << s.axes[f][k];
      guint32 free_axes = all & ~used;
      for (guint k = 0; k < op->n_inputs; k++)
        {
          if (!((op->rule.linear_inputs >> k) & 1))
            continue;
          for (guint32 p = 1; p <= free_axes; p++)
            {
              if ((p & ~free_axes) != 0)
                continue;
              PlannerStrategy v = s;
              v.partial = p;
              v.partial_input = op->rule.linear_all ? 0 : (guint8)k;
              g_array_append_val (values, v);
            }
          if (op->rule.linear_all)
            break;
        }
    }
  g_array_unref (base);
  return values;
}

/* The least objective over every assignment of strategies (ops pinned in @seed keep theirs),
 * each built as a plan and finished. */
static double
brute_force (PlannerPlan *seed, guint64 *n_plans)
{
  PlannerGraph *g = planner_plan_get_graph (seed);
  const PlannerMesh *mesh = planner_plan_get_mesh (seed);
  guint n = planner_graph_get_n_ops (g);
  g_autoptr (GPtrArray) values = g_ptr_array_new_with_free_func ((GDestroyNotify)g_array_unref);
  for (guint o = 0; o < n; o++)
    {
      const PlannerOpPlan *p = planner_plan_get_op (seed, o);
      GArray *v;
      if (p->decision == PLANNER_DECIDED_PINNED)
        {
          v = g_array_new (FALSE, FALSE, sizeof (PlannerStrategy));
          g_array_append_val (v, p->strategy);
        }
      else
        v = all_values (planner_graph_get_op (g, o), mesh);
      g_ptr_array_add (values, v);
    }
  g_autofree guint *at = g_new0 (guint, n);
  double best = INFINITY;
  *n_plans = 0;
  for (;;)
    {
      g_autoptr (PlannerPlan) plan = planner_plan_new (g, mesh, planner_plan_get_hardware (seed));
      for (guint o = 0; o < n; o++)
        {
          PlannerOpPlan *p = planner_plan_get_op (plan, o);
          const PlannerOpPlan *s = planner_plan_get_op (seed, o);
          if (s->decision == PLANNER_DECIDED_PINNED)
            *p = *s;
          else
            p->strategy
                = g_array_index ((GArray *)g_ptr_array_index (values, o), PlannerStrategy, at[o]);
        }
      if (planner_plan_finish (plan, FALSE, NULL))
        {
          best = MIN (best, reference_objective (plan));
          (*n_plans)++;
        }
      guint o = 0;
      while (o < n && ++at[o] == ((GArray *)g_ptr_array_index (values, o))->len)
        at[o++] = 0;
      if (o == n)
        break;
    }
  return best;
}

static guint
add_op (PlannerGraph *g, const char *name, PlannerOpType type, const guint *inputs, guint n)
{
  g_autoptr (GError) error = NULL;
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  int op = planner_graph_add_op (g, name, type, &attrs, inputs, n, 1, NULL, &error);
  g_assert_no_error (error);
  return planner_graph_op_output (g, (guint)op, 0);
}

static guint
add_param (PlannerGraph *g, const char *name, gint64 rows, gint64 cols)
{
  g_autoptr (GError) error = NULL;
  gint64 shape[2] = { rows, cols };
  int t = planner_graph_add_parameter (g, name, PLANNER_DTYPE_BF16, 2, shape, &error);
  g_assert_no_error (error);
  return (guint)t;
}

/* x -> fc1 -> relu -> fc2 -> (+ x) -> out: a residual diamond whose input has two users. */
static PlannerGraph *
diamond_graph (gint64 batch, gint64 hidden)
{
  PlannerGraph *g = planner_graph_new ();
  g_autoptr (GError) error = NULL;
  gint64 shape[2] = { batch, hidden };
  guint x = (guint)planner_graph_add_input (g, "x", PLANNER_DTYPE_BF16, 2, shape, &error);
  g_assert_no_error (error);
  guint in1[2] = { x, add_param (g, "w1", hidden, 4 * hidden) };
  guint h = add_op (g, "fc1", PLANNER_OP_MATMUL, in1, 2);
  guint a = add_op (g, "act", PLANNER_OP_RELU, &h, 1);
  guint in2[2] = { a, add_param (g, "w2", 4 * hidden, hidden) };
  guint y = add_op (g, "fc2", PLANNER_OP_MATMUL, in2, 2);
  guint in3[2] = { y, x };
  guint r = add_op (g, "res", PLANNER_OP_ADD, in3, 2);
  guint in4[2] = { r, add_param (g, "w3", hidden, hidden) };
  guint out = add_op (g, "out", PLANNER_OP_MATMUL, in4, 2);
  planner_graph_mark_output (g, out);
  return g;
}

/* fc1 -> reshape -> reshape -> fc2: partial sums may pass through the views. */
static PlannerGraph *
views_graph (void)
{
  PlannerGraph *g = planner_graph_new ();
  g_autoptr (GError) error = NULL;
  gint64 shape[2] = { 64, 512 };
  guint x = (guint)planner_graph_add_input (g, "x", PLANNER_DTYPE_BF16, 2, shape, &error);
  guint in1[2] = { x, add_param (g, "w1", 512, 512) };
  guint h = add_op (g, "fc1", PLANNER_OP_MATMUL, in1, 2);
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  attrs.n_ints = 3;
  attrs.ints[0] = 64;
  attrs.ints[1] = 8;
  attrs.ints[2] = 64;
  int v1 = planner_graph_add_op (g, "view", PLANNER_OP_RESHAPE, &attrs, &h, 1, 1, NULL, &error);
  g_assert_no_error (error);
  guint t1 = planner_graph_op_output (g, (guint)v1, 0);
  attrs.n_ints = 2;
  attrs.ints[0] = 64;
  attrs.ints[1] = 512;
  int v2 = planner_graph_add_op (g, "unview", PLANNER_OP_RESHAPE, &attrs, &t1, 1, 1, NULL, &error);
  g_assert_no_error (error);
  guint t2 = planner_graph_op_output (g, (guint)v2, 0);
  guint in2[2] = { t2, add_param (g, "w2", 512, 512) };
  guint out = add_op (g, "fc2", PLANNER_OP_MATMUL, in2, 2);
  planner_graph_mark_output (g, out);
  return g;
}

static PlannerPlan *
greedy (PlannerGraph *g, const char *mesh_text, const char *policy, const char *const *pins)
{
  return test_util_plan (g, mesh_text, NULL, policy, pins);
}

static void
check_against_brute_force (PlannerGraph *g, const char *mesh, const char *const *pins,
                           guint64 min_plans)
{
  g_autoptr (PlannerPlan) seed = greedy (g, mesh, NULL, pins);
  g_autoptr (GError) error = NULL;
  PlannerSolveReport report;
  g_autoptr (PlannerPlan) solved = planner_solve (seed, NULL, &report, &error);
  g_assert_no_error (error);
  guint64 n_plans;
  double brute = brute_force (seed, &n_plans);
  g_test_message ("%s on %s: %" G_GUINT64_FORMAT " plans, brute force %.9g s, solver %.9g s, "
                  "greedy %.9g s",
                  planner_graph_get_name (g) ? planner_graph_get_name (g) : "graph", mesh, n_plans,
                  brute, report.objective_s, reference_objective (seed));
  g_assert_cmpuint (n_plans, >=, min_plans);
  assert_close (report.objective_s, brute);
  assert_close (reference_objective (solved), brute);
  g_assert_true (report.optimal);
  g_assert_cmpfloat (report.gap, ==, 0);
  assert_close (report.bound_s, brute);
  g_assert_cmpfloat (report.objective_s, <=, reference_objective (seed) * (1 + 1e-12));
}

static void
test_brute_diamond_one_axis (void)
{
  g_autoptr (PlannerGraph) g = diamond_graph (64, 256);
  check_against_brute_force (g, "mp=4", NULL, 100);
}

static void
test_brute_diamond_two_axes_pinned (void)
{
  /* Two axes: fc1 pinned column-parallel and out batch-parallel, the other three chosen. */
  g_autoptr (PlannerGraph) g = diamond_graph (64, 256);
  const char *const pins[] = { "fc1=[dp,_],[_,mp]", "out=[dp,_],[_,_]", NULL };
  check_against_brute_force (g, "dp=2,mp=2", pins, 500);
}

static void
test_brute_views (void)
{
  g_autoptr (PlannerGraph) g = views_graph ();
  check_against_brute_force (g, "mp=2", NULL, 50);
}

static void
test_brute_mlp_zoo (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("mlp", NULL);
  check_against_brute_force (g, "dp=2,mp=2", NULL, 1000);
}

/* ---- against greedy and the policies ---- */

static void
check_not_worse (PlannerGraph *g, const char *mesh, const char *policy, const char *const *pins)
{
  g_autoptr (PlannerPlan) seed = greedy (g, mesh, policy, pins);
  g_autoptr (GError) error = NULL;
  PlannerSolveReport report;
  g_autoptr (PlannerPlan) solved = planner_solve (seed, NULL, &report, &error);
  g_assert_no_error (error);
  double before = reference_objective (seed), after = reference_objective (solved);
  assert_close (after, report.objective_s);
  assert_close (before, report.seed_objective_s);
  g_assert_cmpfloat (after, <=, before * (1 + 1e-12));
  g_assert_true (report.optimal);
  /* Each chosen op's trace step: changing it alone to its runner-up costs no less (the plan
   * is optimal, so no single change improves it), and the step is the op's. */
  for (guint i = 0; i < planner_plan_get_n_trace_steps (solved); i++)
    {
      const PlannerTraceStep *st = planner_plan_get_trace_step (solved, i);
      g_assert_cmpint (planner_plan_get_op (solved, st->op)->trace_step, ==, (int)i);
      if (st->has_runner_up)
        g_assert_cmpfloat (st->runner_up_cost_s, >=, st->edge_cost_s * (1 - 1e-12) - 1e-15);
    }
  /* Pins are hard: every pinned op keeps its strategy. */
  for (guint o = 0; o < planner_graph_get_n_ops (g); o++)
    if (planner_plan_get_op (seed, o)->decision == PLANNER_DECIDED_PINNED)
      g_assert_true (planner_strategy_equal (&planner_plan_get_op (seed, o)->strategy,
                                             &planner_plan_get_op (solved, o)->strategy));
}

static void
test_not_worse_than_policies (void)
{
  /* megatron-sp (the zoo test below has the others), and a one-axis mesh. */
  const char *const models[] = { "gpt2-tiny", "llama-tiny" };
  for (guint m = 0; m < G_N_ELEMENTS (models); m++)
    {
      g_autoptr (PlannerGraph) g = test_util_model (models[m], NULL);
      check_not_worse (g, "dp=2,mp=2", "megatron-sp", NULL);
      check_not_worse (g, "mp=4", NULL, NULL);
    }
}

/* Every model of the zoo, two layers and short sequences, under megatron where it applies
 * and under no pins (greedy then defaults every op: batch split, as the dp policy). */
static void
test_not_worse_zoo (void)
{
  const char *const *names = planner_zoo_names ();
  const char *const policies[] = { NULL, "megatron" };
  for (guint m = 0; names[m]; m++)
    {
      PlannerModelOptions options;
      planner_model_options_init (&options);
      options.layers = 2;
      options.seq = 32;
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerGraph) g = planner_model_load (names[m], &options, &error);
      if (g == NULL)
        {
          /* A graph JSON model (mlp) has no layers to set. */
          g_clear_error (&error);
          g = planner_model_load (names[m], NULL, &error);
        }
      g_assert_no_error (error);
      for (guint p = 0; p < G_N_ELEMENTS (policies); p++)
        {
          /* BERT without pins takes seconds (its hidden state has four users per layer,
           * one table over all of them): megatron only. */
          if (policies[p] == NULL && strcmp (names[m], "bert") == 0)
            continue;
          /* The zoo's mixtures of experts without pins took about 75 s each on two shared
           * cores (the whole test: 158 s against 5.5 s without them): megatron only. */
          if (policies[p] == NULL
              && (strcmp (names[m], "mixtral") == 0 || strcmp (names[m], "qwen2-moe") == 0))
            continue;
          g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2,mp=2");
          g_autoptr (GPtrArray) pins = NULL;
          if (policies[p])
            {
              pins = planner_policy_expand (policies[p], g, mesh, NULL, &error);
              if (pins == NULL)
                {
                  g_test_message ("%s: no %s: %s", names[m], policies[p], error->message);
                  g_clear_error (&error);
                  continue;
                }
              g_ptr_array_set_free_func (pins, (GDestroyNotify)planner_pin_free);
            }
          g_test_message ("%s under %s", names[m], policies[p] ? policies[p] : "no pins");
          check_not_worse (g, "dp=2,mp=2", policies[p], NULL);
        }
    }
}

/* Random pins: a few ops pinned to random legal strategies, greedy from them, then the solve
 * under the same pins is never worse. */
static void
test_not_worse_random_pins (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2,mp=2");
  g_autoptr (GRand) rand = g_rand_new_with_seed (17);
  guint n_ops = planner_graph_get_n_ops (g);
  for (guint trial = 0; trial < 6; trial++)
    {
      g_autoptr (GPtrArray) texts = g_ptr_array_new_with_free_func (g_free);
      for (guint k = 0; k < 3; k++)
        {
          const PlannerOp *op = planner_graph_get_op (g, g_rand_int_range (rand, 0, (int)n_ops));
          g_autoptr (GArray) s = planner_op_rule_enumerate (&op->rule, mesh);
          const PlannerStrategy *pick
              = &g_array_index (s, PlannerStrategy, g_rand_int_range (rand, 0, (int)s->len));
          g_autofree char *layouts = planner_strategy_to_string (pick, &op->rule, mesh);
          gboolean dup = FALSE;
          for (guint i = 0; i < texts->len; i++)
            dup |= g_str_has_prefix (g_ptr_array_index (texts, i), op->name);
          if (!dup)
            g_ptr_array_add (texts, g_strdup_printf ("%s=%s", op->name, layouts));
        }
      g_ptr_array_add (texts, NULL);
      g_test_message ("trial %u: %s", trial, (char *)g_ptr_array_index (texts, 0));
      check_not_worse (g, "dp=2,mp=2", NULL, (const char *const *)texts->pdata);
    }
}

/* ---- repeated blocks ---- */

static void
test_blocks_solved_once (void)
{
  g_autoptr (PlannerGraph) g = test_util_model_sized ("llama-tiny", 6, 0);
  g_autoptr (PlannerPlan) seed = greedy (g, "dp=2,mp=2", "megatron", NULL);
  PlannerSolveOptions options;
  planner_solve_options_init (&options);
  PlannerSolveReport once, whole;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) a = planner_solve (seed, &options, &once, &error);
  g_assert_no_error (error);
  g_assert_nonnull (a);
  options.reuse_blocks = FALSE;
  g_autoptr (PlannerPlan) b = planner_solve (seed, &options, &whole, &error);
  g_assert_no_error (error);
  g_assert_nonnull (b);
  g_assert_cmpuint (once.n_blocks, ==, 6);
  /* Two kinds: the first layer reads the embeddings, the others the layer before. */
  g_assert_cmpuint (once.n_block_kinds, ==, 2);
  assert_close (once.objective_s, whole.objective_s);
  /* Four of the six layers reuse the second one's tables. */
  g_assert_cmpuint (once.table_cells, <, whole.table_cells);
}

static void
test_op_block (void)
{
  gsize len;
  g_assert_cmpint (planner_op_block ("model.layers.12.mlp.up_proj", &len), ==, 12);
  g_assert_cmpuint (len, ==, strlen ("model.layers.12"));
  g_assert_cmpint (planner_op_block ("transformer.h.3.attn.c_attn", &len), ==, 3);
  g_assert_cmpuint (len, ==, strlen ("transformer.h.3"));
  g_assert_cmpint (planner_op_block ("lm_head", &len), ==, -1);
  g_assert_cmpuint (len, ==, 0);
  /* A trailing number is the op, not a block; a leading one is no block either. */
  g_assert_cmpint (planner_op_block ("model.norm.0", NULL), ==, -1);
  g_assert_cmpint (planner_op_block ("3.fc", NULL), ==, -1);
}

/* ---- the request ---- */

static void
test_request_tiers (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2,mp=2");
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerRequest) r = planner_request_new ();
  planner_request_set_policy (r, "megatron");
  planner_request_add_pin (r, "model.layers.0.self_attn.q_proj=[dp,_,_],[_,_]",
                           PLANNER_PIN_TIER_USER);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pins = planner_request_expand (r, g, mesh, NULL, &error);
  g_assert_no_error (error);
  const PlannerPin *last = g_ptr_array_index (pins, pins->len - 1);
  g_assert_cmpuint (last->priority, ==, 1);
  g_assert_cmpuint (((PlannerPin *)g_ptr_array_index (pins, 0))->priority, ==, 0);
  g_autoptr (PlannerPlan) plan = planner_request_propagate (r, g, mesh, hw, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (planner_plan_get_policy (plan), ==, "megatron");
  /* The user's pin overrides the policy's column-parallel q_proj: its weight is whole. */
  int q = planner_graph_find_op (g, "model.layers.0.self_attn.q_proj");
  PlannerLayout in[PLANNER_MAX_OPERANDS];
  planner_plan_op_layouts (plan, (guint)q, in, NULL);
  g_assert_cmpuint (planner_layout_split_mask (&in[1]), ==, 0);
  g_autoptr (PlannerPlan) reference = test_util_plan (
      g, "dp=2,mp=2", hw, "megatron",
      (const char *const[]){ "model.layers.0.self_attn.q_proj=[dp,_,_],[_,_]", NULL });
  /* The same plan as the CLI's way of making it (test-util.c: expand, parse, propagate). */
  g_assert_true (planner_plan_equal (plan, reference));
}

/* ---- the memory limit ---- */

static void
test_memory_limit (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  g_autoptr (PlannerPlan) seed = greedy (g, "dp=2,mp=2", NULL, NULL);
  g_autoptr (PlannerPlan) sp = greedy (g, "dp=2,mp=2", "megatron-sp", NULL);
  g_autoptr (GError) error = NULL;
  PlannerSolveReport free_report, limited;
  g_autoptr (PlannerPlan) unlimited = planner_solve (seed, NULL, &free_report, &error);
  g_assert_no_error (error);
  guint64 need = planner_plan_get_totals (unlimited)->memory_per_device_bytes;
  PlannerSolveOptions options;
  planner_solve_options_init (&options);
  /* Between what the unconstrained optimum needs (it replicates the weights) and what
   * megatron-sp needs: some plan fits, the unconstrained optimum does not. */
  guint64 small = planner_plan_get_totals (sp)->memory_per_device_bytes;
  g_assert_cmpuint (small, <, need);
  options.memory_limit = (small + need) / 2;
  g_autoptr (PlannerPlan) plan = planner_solve (seed, &options, &limited, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (planner_plan_get_totals (plan)->memory_per_device_bytes, <=,
                    options.memory_limit);
  g_assert_cmpuint (limited.n_solves, >, 1);
  g_assert_cmpfloat (limited.objective_s, >=, free_report.objective_s);
  g_assert_cmpfloat (limited.bound_s, <=, limited.objective_s);
  g_assert_cmpfloat (limited.bound_s, >=, free_report.objective_s * (1 - 1e-12));
  g_test_message ("limit %" G_GUINT64_FORMAT ": objective %g, bound %g, gap %g, %u rounds",
                  options.memory_limit, limited.objective_s, limited.bound_s, limited.gap,
                  limited.n_solves);
  /* A limit nothing meets is refused, naming it. */
  options.memory_limit = 1000;
  g_autoptr (PlannerPlan) none = planner_solve (seed, &options, NULL, &error);
  g_assert_null (none);
  test_util_assert_error (error, PLANNER_ERROR_CONFLICT, "memory limit of 1000 bytes");
}

/* ---- search ---- */

static void
test_search_small (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  PlannerSearchOptions options;
  planner_search_options_init (&options);
  options.n_devices = 4;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerSearchResult) r = planner_search (g, hw, &options, &error);
  g_assert_no_error (error);
  /* dp=4,mp=1, dp=2,mp=2, dp=1,mp=4, each with three policies and the solve; llama-tiny's
   * two layers make a pipeline of two stages: pp=2,dp=2,mp=1 and pp=2,dp=1,mp=2 with the
   * policies only. */
  g_assert_cmpuint (r->candidates->len, ==, 18);
  g_assert_cmpint (r->best, >=, 0);
  const PlannerSearchCandidate *best = g_ptr_array_index (r->candidates, r->best);
  for (guint i = 0; i < r->candidates->len; i++)
    {
      const PlannerSearchCandidate *c = g_ptr_array_index (r->candidates, i);
      if (c->plan && c->fits)
        g_assert_cmpfloat (best->step_time_s, <=, c->step_time_s);
      if (c->solved)
        {
          g_assert_nonnull (c->plan);
          g_assert_true (c->report.optimal);
        }
    }
}

/* The sweep's meshes, written out by hand: every pp x dp x mp of 8 devices, pp up to the
 * layers. */
static void
test_search_meshes (void)
{
  const char *const eight[] = { "dp=8,mp=1",
                                "dp=4,mp=2",
                                "dp=2,mp=4",
                                "dp=1,mp=8",
                                "pp=2,dp=4,mp=1",
                                "pp=2,dp=2,mp=2",
                                "pp=2,dp=1,mp=4",
                                "pp=4,dp=2,mp=1",
                                "pp=4,dp=1,mp=2",
                                "pp=8,dp=1,mp=1",
                                NULL };
  struct
  {
    guint layers, n; /* the first n of eight[] */
  } cases[] = { { 80, 10 }, { 8, 10 }, { 7, 9 }, { 4, 9 }, { 3, 7 }, { 2, 7 }, { 1, 4 }, { 0, 4 } };
  for (guint k = 0; k < G_N_ELEMENTS (cases); k++)
    {
      g_autoptr (GPtrArray) m = planner_search_meshes (8, cases[k].layers);
      g_assert_cmpuint (m->len, ==, cases[k].n);
      for (guint i = 0; i < m->len; i++)
        g_assert_cmpstr (g_ptr_array_index (m, i), ==, eight[i]);
    }
  /* 12 devices, 3 layers: pp=3 divides, pp=4 and 6 are more stages than layers. */
  g_autoptr (GPtrArray) twelve = planner_search_meshes (12, 3);
  const char *const expect12[]
      = { "dp=12,mp=1",     "dp=6,mp=2",      "dp=4,mp=3",      "dp=3,mp=4",      "dp=2,mp=6",
          "dp=1,mp=12",     "pp=2,dp=6,mp=1", "pp=2,dp=3,mp=2", "pp=2,dp=2,mp=3", "pp=2,dp=1,mp=6",
          "pp=3,dp=4,mp=1", "pp=3,dp=2,mp=2", "pp=3,dp=1,mp=4" };
  g_assert_cmpuint (twelve->len, ==, G_N_ELEMENTS (expect12));
  for (guint i = 0; i < twelve->len; i++)
    g_assert_cmpstr (g_ptr_array_index (twelve, i), ==, expect12[i]);
  /* The layers the pipeline counts. */
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  g_assert_cmpuint (planner_search_layers (g), ==, 2);
}

/* A pp candidate is the pipelined plan: the same step and memory as the plan made by hand with
 * the same mesh, policy and 1F1B over the same micro-batches, and the schedule's bubble. */
static void
test_search_pipeline (void)
{
  PlannerModelOptions mo = { 0 };
  mo.batch = 16;
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", &mo);
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  PlannerSearchOptions options;
  planner_search_options_init (&options);
  options.n_devices = 4;
  options.micro_batches = 4;
  options.solve = FALSE;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerSearchResult) r = planner_search (g, hw, &options, &error);
  g_assert_no_error (error);
  guint n_pp = 0;
  for (guint i = 0; i < r->candidates->len; i++)
    {
      const PlannerSearchCandidate *c = g_ptr_array_index (r->candidates, i);
      if (!g_str_has_prefix (c->mesh, "pp="))
        {
          g_assert_cmpuint (c->pp, ==, 1);
          continue;
        }
      g_assert_cmpuint (c->pp, ==, 2);
      g_assert_cmpuint (c->micro_batches, ==, 4);
      if (c->plan == NULL)
        continue;
      n_pp++;
      g_autoptr (PlannerPlan) hand = test_util_plan (g, c->mesh, hw, c->policy, NULL);
      PlannerCostConstants k = *planner_plan_get_constants (hand);
      k.micro_batches = 4;
      k.schedule = PLANNER_SCHEDULE_1F1B;
      planner_plan_set_constants (hand, &k);
      g_assert_true (planner_plan_finish (hand, FALSE, &error));
      g_assert_no_error (error);
      const PlannerPlanTotals *t = planner_plan_get_totals (hand);
      g_assert_cmpfloat (t->breakdown.pipeline_bubble, >, 0);
      g_assert_cmpfloat_with_epsilon (c->step_time_s, t->step_time_s, 1e-12 * t->step_time_s);
      g_assert_cmpuint (c->memory_per_device_bytes, ==, t->memory_per_device_bytes);
      /* (p - 1) / (m + p - 1) = 1 / 5 */
      g_assert_cmpfloat_with_epsilon (c->bubble_fraction, 0.2, 1e-12);
    }
  /* pp=2,dp=2,mp=1 and pp=2,dp=1,mp=2 under megatron, megatron-sp and dp. */
  g_assert_cmpuint (n_pp, ==, 6);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/search/op-block", test_op_block);
  g_test_add_func ("/planner/search/request-tiers", test_request_tiers);
  g_test_add_func ("/planner/solve/brute-force/diamond-one-axis", test_brute_diamond_one_axis);
  g_test_add_func ("/planner/solve/brute-force/diamond-two-axes-pinned",
                   test_brute_diamond_two_axes_pinned);
  g_test_add_func ("/planner/solve/brute-force/views", test_brute_views);
  g_test_add_func ("/planner/solve/brute-force/mlp", test_brute_mlp_zoo);
  g_test_add_func ("/planner/solve/not-worse-than-policies", test_not_worse_than_policies);
  g_test_add_func ("/planner/solve/not-worse-random-pins", test_not_worse_random_pins);
  g_test_add_func ("/planner/solve/not-worse-zoo", test_not_worse_zoo);
  g_test_add_func ("/planner/solve/blocks-solved-once", test_blocks_solved_once);
  g_test_add_func ("/planner/solve/memory-limit", test_memory_limit);
  g_test_add_func ("/planner/search/small", test_search_small);
  g_test_add_func ("/planner/search/meshes", test_search_meshes);
  g_test_add_func ("/planner/search/pipeline", test_search_pipeline);
  return g_test_run ();
}
