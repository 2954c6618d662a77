#define G_LOG_DOMAIN "test-compare"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-compare.h"
#include "planner-error.h"
#include "planner-model.h"
#include "planner-plan-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

/* Forward steps of @kind in the listed redistributions of @plan. */
static void
sum_steps (PlannerPlan *plan, GArray *list, PlannerStepKind kind, int *count, gint64 *bytes,
           double *time_s)
{
  for (guint i = 0; i < list->len; i++)
    {
      const PlannerRedistribution *r
          = planner_plan_get_redistribution (plan, g_array_index (list, guint, i));
      for (guint s = 0; s < r->n_steps; s++)
        if (r->steps[s].kind == kind)
          {
            (*count)++;
            *bytes += (gint64)r->steps[s].bytes;
            *time_s += r->steps[s].time_s;
          }
    }
}

static gboolean
close_to (double a, double b)
{
  return fabs (a - b) <= 1e-12 + 1e-9 * MAX (fabs (a), fabs (b));
}

/* The deltas per kind add up to the totals' deltas; on one mesh and profile (@same_costs),
 * where a redistribution in both plans costs the same in both, they are what the added
 * redistributions bring minus what the removed ones took away. */
static void
assert_deltas_add_up (const PlannerCompare *c, gboolean same_costs)
{
  const PlannerPlanTotals *ta = planner_plan_get_totals (c->a);
  const PlannerPlanTotals *tb = planner_plan_get_totals (c->b);
  gint64 bytes_sum = 0;
  double time_sum = 0;

  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      int added = 0, removed = 0;
      gint64 added_bytes = 0, removed_bytes = 0;
      double added_time = 0, removed_time = 0;
      sum_steps (c->b, c->added, k, &added, &added_bytes, &added_time);
      sum_steps (c->a, c->removed, k, &removed, &removed_bytes, &removed_time);
      g_assert_cmpint (c->kinds[k].count, ==, added - removed);
      if (same_costs)
        {
          g_assert_cmpint (c->kinds[k].bytes, ==, added_bytes - removed_bytes);
          g_assert_true (close_to (c->kinds[k].time_s, added_time - removed_time));
        }
      g_assert_cmpint (c->kinds[k].count, ==, (int)tb->coll_count[k] - (int)ta->coll_count[k]);
      bytes_sum += c->kinds[k].bytes;
      time_sum += c->kinds[k].time_s;
    }
  g_assert_cmpint (c->comm_bytes, ==, bytes_sum);
  g_assert_true (close_to (c->comm_time_s, time_sum));
  g_assert_true (c->step_time_s == tb->step_time_s - ta->step_time_s);
  g_assert_true (c->compute_time_s == tb->compute_time_s - ta->compute_time_s);
  g_assert_cmpint (c->memory_per_device_bytes, ==,
                   (gint64)tb->memory_per_device_bytes - (gint64)ta->memory_per_device_bytes);
}

static gboolean
is_norm (const char *name)
{
  return g_str_has_suffix (name, "_layernorm") || strcmp (name, "model.norm") == 0;
}

/* megatron -> megatron-sp on llama-tiny (2 layers): the five norms become sequence-split
 * and pinned, nothing else changes strategy; each of the 5 AllReduces (2 per layer and the
 * vocab-parallel embedding's) becomes a ReduceScatter into the norm and an AllGather after
 * it, moving the same bytes in total. */
static void
test_megatron_vs_sp (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) a = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerPlan) b = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron-sp", NULL);
  g_autoptr (PlannerCompare) c = planner_compare_new (a, b, &error);
  g_assert_no_error (error);
  PlannerGraph *graph = planner_plan_get_graph (a);

  guint n_norms = 0;
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    n_norms += is_norm (planner_graph_get_op (graph, i)->name);
  g_assert_cmpuint (n_norms, ==, 5);
  g_assert_cmpuint (c->ops->len, ==, n_norms);
  for (guint i = 0; i < c->ops->len; i++)
    {
      const PlannerCompareOp *d = &g_array_index (c->ops, PlannerCompareOp, i);
      const char *name = planner_graph_get_op (graph, d->op)->name;
      g_assert_true (is_norm (name));
      g_assert_cmpstr (d->a, ==, "[dp,_,_],[_]");
      g_assert_cmpstr (d->b, ==, "[dp,mp,_],[_]");
      g_assert_cmpstr (d->a_outputs, ==, "[dp,_,_]");
      g_assert_cmpstr (d->b_outputs, ==, "[dp,mp,_]");
      g_assert_cmpint (d->a_decision, ==, PLANNER_DECIDED_PROPAGATED);
      g_assert_cmpint (d->b_decision, ==, PLANNER_DECIDED_PINNED);
      if (i > 0)
        g_assert_cmpuint (d->op, >, g_array_index (c->ops, PlannerCompareOp, i - 1).op);
    }

  /* Removed: every AllReduce, each into a norm. Added: a ReduceScatter into each norm and an
   * AllGather out of it. */
  g_assert_cmpuint (c->removed->len, ==, 5);
  g_assert_cmpuint (c->added->len, ==, 10);
  g_assert_cmpuint (c->n_common, ==, 0);
  for (guint i = 0; i < c->removed->len; i++)
    {
      const PlannerRedistribution *r
          = planner_plan_get_redistribution (a, g_array_index (c->removed, guint, i));
      g_assert_cmpuint (r->n_steps, ==, 1);
      g_assert_cmpint (r->steps[0].kind, ==, PLANNER_STEP_ALL_REDUCE);
      g_assert_true (is_norm (planner_graph_get_op (graph, r->consumer)->name));
    }
  guint n_rs = 0, n_ag = 0;
  for (guint i = 0; i < c->added->len; i++)
    {
      const PlannerRedistribution *r
          = planner_plan_get_redistribution (b, g_array_index (c->added, guint, i));
      const PlannerTensor *t = planner_graph_get_tensor (graph, r->tensor);
      g_assert_cmpuint (r->n_steps, ==, 1);
      if (r->steps[0].kind == PLANNER_STEP_REDUCE_SCATTER)
        {
          n_rs++;
          g_assert_true (is_norm (planner_graph_get_op (graph, r->consumer)->name));
        }
      else
        {
          g_assert_cmpint (r->steps[0].kind, ==, PLANNER_STEP_ALL_GATHER);
          n_ag++;
          g_assert_true (is_norm (planner_graph_get_op (graph, t->producer)->name));
        }
    }
  g_assert_cmpuint (n_rs, ==, 5);
  g_assert_cmpuint (n_ag, ==, 5);

  g_assert_cmpint (c->kinds[PLANNER_STEP_ALL_REDUCE].count, ==, -5);
  g_assert_cmpint (c->kinds[PLANNER_STEP_REDUCE_SCATTER].count, ==, 5);
  g_assert_cmpint (c->kinds[PLANNER_STEP_ALL_GATHER].count, ==, 5);
  g_assert_cmpint (c->kinds[PLANNER_STEP_ALL_TO_ALL].count, ==, 0);
  g_assert_cmpint (c->kinds[PLANNER_STEP_SLICE].count, ==, 0);
  /* An AllReduce sends 2(p-1)/p n; a ReduceScatter and an AllGather (p-1)/p n each. */
  g_assert_cmpint (c->comm_bytes, ==, 0);
  g_assert_cmpint (c->kinds[PLANNER_STEP_REDUCE_SCATTER].bytes, ==,
                   -c->kinds[PLANNER_STEP_ALL_REDUCE].bytes / 2);
  /* Norm outputs split over mp: fewer activation bytes kept per device. */
  g_assert_cmpint (c->memory_per_device_bytes, <, 0);
  assert_deltas_add_up (c, TRUE);

  /* The other way round: everything mirrored. */
  g_autoptr (PlannerCompare) back = planner_compare_new (b, a, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->ops->len, ==, 5);
  g_assert_cmpuint (back->removed->len, ==, 10);
  g_assert_cmpuint (back->added->len, ==, 5);
  g_assert_cmpint (back->kinds[PLANNER_STEP_ALL_REDUCE].count, ==, 5);
  assert_deltas_add_up (back, TRUE);
}

/* A plan against itself and against its saved copy: nothing differs. */
static void
test_same (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) a = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autofree char *text = planner_plan_to_json (a);
  g_autoptr (PlannerPlan) b = planner_plan_from_json (text, &error);
  g_assert_no_error (error);

  PlannerPlan *others[] = { a, b };
  for (guint i = 0; i < G_N_ELEMENTS (others); i++)
    {
      g_autoptr (PlannerCompare) c = planner_compare_new (a, others[i], &error);
      g_assert_no_error (error);
      g_assert_cmpuint (c->ops->len, ==, 0);
      g_assert_cmpuint (c->removed->len, ==, 0);
      g_assert_cmpuint (c->added->len, ==, 0);
      g_assert_cmpuint (c->n_common, ==, planner_plan_get_n_redistributions (a));
      g_assert_cmpuint (c->n_common, >, 0);
      for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
        {
          g_assert_cmpint (c->kinds[k].count, ==, 0);
          g_assert_cmpint (c->kinds[k].bytes, ==, 0);
          g_assert_cmpfloat (c->kinds[k].time_s, ==, 0);
        }
      g_assert_cmpfloat (c->step_time_s, ==, 0);
      g_assert_cmpint (c->memory_per_device_bytes, ==, 0);
    }
}

/* Plans of different models, or of one model with other shapes, are refused. */
static void
test_different_models (void)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = 4;
  g_autoptr (PlannerPlan) llama
      = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerPlan) gpt2 = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerGraph) small_graph = test_util_model ("llama-tiny", &options);
  g_autoptr (PlannerPlan) small = test_util_plan (small_graph, "dp=2,mp=2", NULL, "megatron", NULL);

  g_assert_null (planner_compare_new (llama, gpt2, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT);
  g_assert_nonnull (strstr (error->message, "cannot compare plans of different models"));
  g_assert_nonnull (strstr (error->message, "llama-tiny?batch=8"));
  g_assert_nonnull (strstr (error->message, "gpt2-tiny?batch=8"));
  g_clear_error (&error);

  g_assert_null (planner_compare_new (llama, small, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT);
  g_assert_nonnull (strstr (error->message, "llama-tiny?batch=4"));
}

/* One model on two meshes: layouts compare by axis name; deltas still add up. */
static void
test_other_mesh (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) a = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerPlan) b = test_util_model_plan ("llama-tiny", "dp=4,mp=2", "megatron", NULL);
  g_autoptr (PlannerCompare) c = planner_compare_new (a, b, &error);
  g_assert_no_error (error);
  /* Same axis names and the same policy: the same layouts everywhere. */
  g_assert_cmpuint (c->ops->len, ==, 0);
  g_assert_cmpuint (c->added->len, ==, 0);
  g_assert_cmpuint (c->removed->len, ==, 0);
  /* The batch is split 4 ways instead of 2: each AllReduce moves half the bytes. */
  g_assert_cmpint (c->kinds[PLANNER_STEP_ALL_REDUCE].count, ==, 0);
  g_assert_cmpint (c->kinds[PLANNER_STEP_ALL_REDUCE].bytes, ==,
                   -(gint64)planner_plan_get_totals (a)->coll_bytes[PLANNER_STEP_ALL_REDUCE] / 2);
  assert_deltas_add_up (c, FALSE);
}

static void
test_json_and_text (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) a = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerPlan) b = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron-sp", NULL);
  g_autoptr (PlannerCompare) c = planner_compare_new (a, b, &error);
  g_assert_no_error (error);

  g_autoptr (JsonNode) root = planner_compare_to_json (c);
  JsonObject *o = json_node_get_object (root);
  g_assert_cmpstr (json_object_get_string_member (o, "model"), ==,
                   "llama-tiny?batch=8&seq=128&layers=2&dtype=f32");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (o, "a"), "policy"),
                   ==, "megatron");
  JsonArray *ops = json_object_get_array_member (o, "ops");
  g_assert_cmpuint (json_array_get_length (ops), ==, 5);
  JsonObject *first = json_array_get_object_element (ops, 0);
  g_assert_cmpstr (json_object_get_string_member (first, "op"), ==,
                   "model.layers.0.input_layernorm");
  g_assert_cmpstr (json_object_get_string_member (first, "b"), ==, "[dp,mp,_],[_]");
  JsonObject *reds = json_object_get_object_member (o, "redistributions");
  g_assert_cmpint (json_object_get_int_member (reds, "common"), ==, 0);
  JsonArray *removed = json_object_get_array_member (reds, "removed");
  g_assert_cmpuint (json_array_get_length (removed), ==, 5);
  JsonObject *r0 = json_array_get_object_element (removed, 0);
  g_assert_cmpstr (json_object_get_string_member (r0, "tensor"), ==, "model.embed_tokens");
  g_assert_cmpstr (json_object_get_string_member (r0, "from"), ==, "[dp,_,_] partial(mp)");
  JsonObject *step0 = json_array_get_object_element (json_object_get_array_member (r0, "steps"), 0);
  g_assert_cmpstr (json_object_get_string_member (step0, "kind"), ==, "AllReduce");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (reds, "added")), ==, 10);
  JsonObject *ar = json_object_get_object_member (
      json_object_get_object_member (json_object_get_object_member (o, "collectives"), "AllReduce"),
      "count");
  g_assert_cmpint (json_object_get_int_member (ar, "a"), ==, 5);
  g_assert_cmpint (json_object_get_int_member (ar, "b"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (ar, "delta"), ==, -5);
  JsonObject *step
      = json_object_get_object_member (json_object_get_object_member (o, "totals"), "step_time_us");
  g_assert_cmpfloat (json_object_get_double_member (step, "delta"), ==, c->step_time_s * 1e6);
  /* The writer of plan files writes it too. */
  g_autofree char *json_text = planner_json_to_string (root);
  g_assert_nonnull (strstr (json_text, "\"removed\": ["));

  g_autofree char *text = planner_compare_to_text (c);
  const char *expect[] = {
    "Ops whose strategy differs: 5 of 51\n",
    "  model.layers.0.input_layernorm           A [dp,_,_],[_] -> [dp,_,_] (propagated)\n",
    "Redistributions: 5 removed, 10 added, 0 in both\n",
    "  - model.embed_tokens -> model.layers.0.input_layernorm: [dp,_,_] partial(mp) -> "
    "[dp,_,_]: AllReduce(mp)",
    "  + model.layers.0.input_layernorm -> model.layers.0.self_attn.q_proj: [dp,mp,_] -> "
    "[dp,_,_]: AllGather(mp, dim 1)",
    "AllReduce count",
  };
  for (guint i = 0; i < G_N_ELEMENTS (expect); i++)
    if (strstr (text, expect[i]) == NULL)
      g_error ("expected \"%s\" in:\n%s", expect[i], text);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/compare/megatron-vs-sp", test_megatron_vs_sp);
  g_test_add_func ("/planner/compare/same", test_same);
  g_test_add_func ("/planner/compare/different-models", test_different_models);
  g_test_add_func ("/planner/compare/other-mesh", test_other_mesh);
  g_test_add_func ("/planner/compare/json-and-text", test_json_and_text);
  return g_test_run ();
}
