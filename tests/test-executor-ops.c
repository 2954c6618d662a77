/* Every op type x every legal strategy, sharded == reference (issue 4, tests). */
#include "config.h"

#include <string.h>

#include "executor-error.h"
#include "executor-test-backend.h"
#include "executor-trial.h"
#include "planner-error.h"

typedef struct
{
  const char *name;
  PlannerOpType type;
  /* Inputs: "p" parameter or "i" input, then dtype, then dims: "p:f32:8,4". */
  const char *inputs[4];
  guint n_outputs;
  void (*attrs) (PlannerOpAttrs *attrs);
} OpCase;

static void attrs_none (PlannerOpAttrs *a) { (void) a; }
static void attrs_matmul_t (PlannerOpAttrs *a) { a->transpose_b = TRUE; a->heads = 4; }
static void attrs_einsum_qkv (PlannerOpAttrs *a) { g_strlcpy (a->equation, "bsh,hqnd->bsqnd", sizeof a->equation); }
static void attrs_einsum_scores (PlannerOpAttrs *a) { g_strlcpy (a->equation, "bhqd,bhkd->bhqk", sizeof a->equation); }
static void attrs_einsum_sum (PlannerOpAttrs *a) { g_strlcpy (a->equation, "ij->i", sizeof a->equation); }
static void attrs_gelu_tanh (PlannerOpAttrs *a) { a->variant = 1; }
static void attrs_cast (PlannerOpAttrs *a) { a->dtype = PLANNER_DTYPE_F32; }
static void attrs_last (PlannerOpAttrs *a) { a->axis = -1; }
static void attrs_axis1 (PlannerOpAttrs *a) { a->axis = 1; }
static void attrs_reshape_split (PlannerOpAttrs *a)
{
  a->n_ints = 4; a->ints[0] = 4; a->ints[1] = 2; a->ints[2] = 4; a->ints[3] = 4;
}
static void attrs_reshape_merge (PlannerOpAttrs *a)
{
  a->n_ints = 2; a->ints[0] = -1; a->ints[1] = 4;
}
static void attrs_transpose (PlannerOpAttrs *a)
{
  a->n_ints = 3; a->ints[0] = 2; a->ints[1] = 0; a->ints[2] = 1;
}
static void attrs_reduce1 (PlannerOpAttrs *a) { a->n_ints = 1; a->ints[0] = 1; }
static void attrs_reduce02 (PlannerOpAttrs *a)
{
  a->n_ints = 2; a->ints[0] = 0; a->ints[1] = 2; a->keepdims = TRUE;
}
static void attrs_split (PlannerOpAttrs *a)
{
  a->axis = 1; a->n_ints = 2; a->ints[0] = 2; a->ints[1] = 6;
}
static void attrs_slice (PlannerOpAttrs *a) { a->axis = 1; a->start = 2; a->end = 6; }
static void attrs_rotary (PlannerOpAttrs *a) { a->theta = 10000; }
static void attrs_causal (PlannerOpAttrs *a) { a->causal = TRUE; }
static void attrs_conv (PlannerOpAttrs *a)
{
  a->n_ints = 4; a->ints[0] = 1; a->ints[1] = 1; a->ints[2] = 1; a->ints[3] = 1;
}

static const OpCase cases[] = {
  { "MatMul", PLANNER_OP_MATMUL, { "i:f32:4,2,8", "p:f32:8,4", "p:f32:4" }, 1, attrs_none },
  { "MatMul-t-heads", PLANNER_OP_MATMUL, { "i:f32:4,8", "p:f32:8,8" }, 1, attrs_matmul_t },
  { "BatchMatMul", PLANNER_OP_BATCH_MATMUL, { "i:f32:2,2,4,8", "i:f32:2,8,4" }, 1, attrs_none },
  { "Einsum-qkv", PLANNER_OP_EINSUM, { "i:f32:2,4,8", "p:f32:8,3,4,2", "p:f32:3,4,2" }, 1, attrs_einsum_qkv },
  { "Einsum-scores", PLANNER_OP_EINSUM, { "i:f32:2,4,4,2", "i:f32:2,4,8,2" }, 1, attrs_einsum_scores },
  { "Einsum-sum", PLANNER_OP_EINSUM, { "i:f32:4,8" }, 1, attrs_einsum_sum },
  { "Add", PLANNER_OP_ADD, { "i:f32:4,8", "i:f32:8" }, 1, attrs_none },
  { "Sub", PLANNER_OP_SUB, { "i:f32:4,8", "i:f32:4,8" }, 1, attrs_none },
  { "Mul", PLANNER_OP_MUL, { "i:f32:4,1,8", "i:f32:4,8" }, 1, attrs_none },
  { "Div", PLANNER_OP_DIV, { "i:f32:4,8", "p:f32:8" }, 1, attrs_none },
  { "ReLU", PLANNER_OP_RELU, { "i:f32:4,8" }, 1, attrs_none },
  { "GeLU", PLANNER_OP_GELU, { "i:f32:4,8" }, 1, attrs_none },
  { "GeLU-tanh", PLANNER_OP_GELU, { "i:f32:4,8" }, 1, attrs_gelu_tanh },
  { "SiLU", PLANNER_OP_SILU, { "i:f32:4,8" }, 1, attrs_none },
  { "Tanh", PLANNER_OP_TANH, { "i:f32:4,8" }, 1, attrs_none },
  { "Exp", PLANNER_OP_EXP, { "i:f32:4,8" }, 1, attrs_none },
  { "Neg", PLANNER_OP_NEG, { "i:f32:4,8" }, 1, attrs_none },
  { "Cast", PLANNER_OP_CAST, { "i:bf16:4,8" }, 1, attrs_cast },
  { "Dropout", PLANNER_OP_DROPOUT, { "i:f32:4,8" }, 1, attrs_none },
  { "Softmax", PLANNER_OP_SOFTMAX, { "i:f32:4,4,8" }, 1, attrs_last },
  { "LayerNorm", PLANNER_OP_LAYER_NORM, { "i:f32:4,4,8", "p:f32:8", "p:f32:8" }, 1, attrs_none },
  { "RMSNorm", PLANNER_OP_RMS_NORM, { "i:f32:4,4,8", "p:f32:8" }, 1, attrs_none },
  { "Embedding", PLANNER_OP_EMBEDDING, { "i:i64:4,4", "p:f32:16,8" }, 1, attrs_none },
  { "Reshape-split", PLANNER_OP_RESHAPE, { "i:f32:4,8,4" }, 1, attrs_reshape_split },
  { "Reshape-merge", PLANNER_OP_RESHAPE, { "i:f32:4,8,4" }, 1, attrs_reshape_merge },
  { "Transpose", PLANNER_OP_TRANSPOSE, { "i:f32:4,2,8" }, 1, attrs_transpose },
  { "ReduceSum", PLANNER_OP_REDUCE_SUM, { "i:f32:4,8,4" }, 1, attrs_reduce1 },
  { "ReduceMean", PLANNER_OP_REDUCE_MEAN, { "i:f32:4,8,4" }, 1, attrs_reduce02 },
  { "Concat", PLANNER_OP_CONCAT, { "i:f32:4,2,8", "i:f32:4,4,8" }, 1, attrs_axis1 },
  { "Split", PLANNER_OP_SPLIT, { "i:f32:4,8,4" }, 2, attrs_split },
  { "Slice", PLANNER_OP_SLICE, { "i:f32:4,8,4" }, 1, attrs_slice },
  { "RotaryEmbedding", PLANNER_OP_ROTARY_EMBEDDING, { "i:f32:2,4,8,8" }, 1, attrs_rotary },
  { "SDPA", PLANNER_OP_SDPA, { "i:f32:2,4,8,4", "i:f32:2,2,8,4", "i:f32:2,2,8,4" }, 1, attrs_causal },
  { "SDPA-full", PLANNER_OP_SDPA, { "i:f32:2,4,4,4", "i:f32:2,4,8,4", "i:f32:2,4,8,2" }, 1, attrs_none },
  { "CrossEntropy", PLANNER_OP_CROSS_ENTROPY, { "i:f32:4,8,16", "i:i64:4,8" }, 1, attrs_none },
  { "Conv2D", PLANNER_OP_CONV2D, { "i:f32:4,4,5,5", "p:f32:4,4,3,3", "p:f32:4" }, 1, attrs_conv },
};

static PlannerGraph *
build_case (const OpCase *c)
{
  g_autoptr (PlannerGraph) g = planner_graph_new ();
  g_autoptr (GError) error = NULL;
  guint ids[4], n = 0;
  for (; n < G_N_ELEMENTS (c->inputs) && c->inputs[n]; n++)
    {
      g_auto (GStrv) parts = g_strsplit (c->inputs[n], ":", 3);
      g_auto (GStrv) dims = g_strsplit (parts[2], ",", -1);
      gint64 shape[PLANNER_MAX_RANK];
      guint rank = g_strv_length (dims);
      PlannerDType dtype;
      g_assert_true (planner_dtype_from_string (parts[1], &dtype));
      for (guint d = 0; d < rank; d++)
        shape[d] = g_ascii_strtoll (dims[d], NULL, 10);
      g_autofree char *name = g_strdup_printf ("in%u", n);
      int id = parts[0][0] == 'p'
                 ? planner_graph_add_parameter (g, name, dtype, rank, shape, &error)
                 : planner_graph_add_input (g, name, dtype, rank, shape, &error);
      g_assert_no_error (error);
      ids[n] = (guint) id;
    }
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  c->attrs (&attrs);
  int op = planner_graph_add_op (g, "op", c->type, &attrs, ids, n, c->n_outputs, NULL, &error);
  g_assert_no_error (error);
  for (guint k = 0; k < c->n_outputs; k++)
    planner_graph_mark_output (g, planner_graph_op_output (g, (guint) op, k));
  return g_steal_pointer (&g);
}

typedef struct
{
  const OpCase *c;
  const char *mesh;
} Fixture;

static guint n_checked;

static void
check_strategy (PlannerGraph *g, const PlannerMesh *mesh, const PlannerHardware *hw,
                ExecutorBackend *backend, const PlannerStrategy *s)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = planner_plan_new (g, mesh, hw);
  planner_plan_get_op (plan, 0)->strategy = *s;
  g_assert_true (planner_plan_finish (plan, TRUE, &error));
  g_assert_no_error (error);

  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = 0;
  options.warmup = 0;
  options.seed = 7 + n_checked;
  g_autoptr (ExecutorTrialResult) res = executor_trial_run (plan, backend, &options, NULL, &error);
  g_assert_no_error (error);
  if (!res->passed)
    {
      const PlannerOp *op = planner_graph_get_op (g, 0);
      g_autofree char *desc = planner_strategy_describe (s, &op->rule, mesh);
      g_test_message ("strategy %s: %s (max rel error %g)", desc,
                      res->mismatch ? res->mismatch : "-", res->max_rel_error);
    }
  g_assert_true (res->passed);
  g_assert_cmpfloat (res->max_rel_error, <=, 1e-5);
  n_checked++;
}

static void
test_op (gconstpointer data)
{
  const Fixture *f = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = build_case (f->c);
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (f->mesh, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new ("test");
  g_autoptr (ExecutorBackend) backend = executor_backend_new (test_backend (), mesh, &error);
  if (test_backend_skips (error))
    return;
  g_assert_no_error (error);
  const PlannerOp *op = planner_graph_get_op (g, 0);

  g_autoptr (GArray) all = planner_op_rule_enumerate (&op->rule, mesh);
  guint before = n_checked;
  for (guint i = 0; i < all->len; i++)
    check_strategy (g, mesh, hw, backend, &g_array_index (all, PlannerStrategy, i));

  /* Partial inputs, where the rule takes them: the op is linear in that input, so the
   * outputs stay partial (and a bias is added once). */
  guint n_partial = 0;
  for (guint i = 0; i < all->len; i++)
    for (guint a = 0; a < mesh->n_axes; a++)
      for (guint in = 0; in < op->rule.n_inputs; in++)
        {
          PlannerStrategy s = g_array_index (all, PlannerStrategy, i);
          if (!((op->rule.linear_inputs >> in) & 1) || (planner_strategy_axis_mask (&s) >> a) & 1)
            continue;
          if (op->rule.linear_all && in > 0)
            continue;
          s.partial = 1u << a;
          s.partial_input = (guint8) in;
          if (!planner_strategy_validate (&s, &op->rule, mesh, "op", NULL, NULL))
            continue;
          /* Keep the run short: a few partial strategies per op suffice. */
          if (n_partial++ % 7 != 0)
            continue;
          check_strategy (g, mesh, hw, backend, &s);
        }
  g_test_message ("%s on %s: %u strategies (%u with partial inputs considered)", f->c->name,
                  f->mesh, n_checked - before, n_partial);
  g_assert_cmpuint (n_checked - before, >=, all->len);
}

/* A rule that lies (Softmax's axis declared pass-through) must be caught and named. */
static void
test_wrong_rule (void)
{
  g_autoptr (GError) error = NULL;
  const OpCase *c = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    if (cases[i].type == PLANNER_OP_SOFTMAX)
      c = &cases[i];
  g_autoptr (PlannerGraph) g = build_case (c);
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("a=2,b=2", &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new ("test");
  /* Test-only corruption of the graph's rule: the planner would never build it. */
  PlannerOpRule *rule = (PlannerOpRule *) &planner_graph_get_op (g, 0)->rule;
  int r = rule->inputs[0].f[2][0];
  rule->factors[r].kind = PLANNER_FACTOR_PASS;
  rule->factors[r].splittable = TRUE;

  PlannerStrategy s;
  planner_strategy_init (&s);
  s.axes[r][0] = 1;
  s.n_axes[r] = 1;
  g_autoptr (PlannerPlan) plan = planner_plan_new (g, mesh, hw);
  planner_plan_get_op (plan, 0)->strategy = s;
  g_assert_true (planner_plan_finish (plan, TRUE, &error));
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = 0;
  g_autoptr (ExecutorTrialResult) res = executor_trial_run_named (plan, test_backend (), &options,
                                                                  NULL, &error);
  if (test_backend_skips (error))
    return;
  g_assert_no_error (error);
  g_assert_false (res->passed);
  g_assert_cmpint (res->first_mismatch_op, ==, 0);
  g_assert_nonnull (strstr (res->mismatch, "op (Softmax, strategy r=b)"));
  g_assert_cmpfloat (res->max_rel_error, >, 1e-3);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  static const char *meshes[] = { "a=2,b=2", "a=2,b=2,c=2" };
  static Fixture fixtures[G_N_ELEMENTS (cases) * 2];
  guint n = 0;
  for (guint m = 0; m < G_N_ELEMENTS (meshes); m++)
    for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
      {
        fixtures[n] = (Fixture){ &cases[i], meshes[m] };
        g_autofree char *path = g_strdup_printf ("/executor/ops/%s/%s", m ? "abc" : "ab",
                                                 cases[i].name);
        g_test_add_data_func (path, &fixtures[n++], test_op);
      }
  g_test_add_func ("/executor/ops/wrong-rule-is-named", test_wrong_rule);
  return g_test_run ();
}
