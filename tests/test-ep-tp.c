/* megatron-ep on meshes with an ep and a tp/mp axis (issue 16).
 *
 * Megatron-LM's MoE layer takes the tokens of the attention block's layout: with tensor
 * parallelism each tp rank holds the same tokens (or, under sequence parallelism, its
 * sequence slice) and the router and the token dispatcher work on those, the AllToAll
 * over ep sending them to the experts' ranks. The policy's norm and router rules keep the
 * residual stream batch-split over {dp} only (whole on tp), so the dispatch pin's input
 * layout is met without a redistribution. Expected counts are by hand: one AllReduce per
 * row-parallel linear (o_proj, qwen2_moe's shared expert down_proj) and one for the
 * vocab-parallel embedding, two AllToAlls per MoE layer, nothing else; the policy's plan is
 * the one of the three pins tests/frameworks/test-export-dtensor-moe.py used to need. */
#include "config.h"

#include <string.h>

#include "planner-policy.h"
#include "test-util.h"

static char *
data_model (const char *file)
{
  char *path = g_test_build_filename (G_TEST_DIST, "data", "models", file, NULL);
  if (g_file_test (path, G_FILE_TEST_EXISTS))
    return path;
  g_free (path);
  return g_test_build_filename (G_TEST_DIST, "..", "data", "models", file, NULL);
}

static PlannerGraph *
load (const char *file, gint64 layers)
{
  g_autofree char *path = data_model (file);
  PlannerModelOptions options;

  planner_model_options_init (&options);
  options.layers = layers;
  options.batch = 8;
  options.seq = 256;
  return test_util_model (path, &options);
}

static char *
layout_of (PlannerPlan *plan, const char *tensor)
{
  PlannerGraph *g = planner_plan_get_graph (plan);
  for (guint t = 0; t < planner_graph_get_n_tensors (g); t++)
    if (g_str_equal (planner_graph_get_tensor (g, t)->name, tensor))
      return planner_layout_to_string (planner_plan_get_tensor_layout (plan, t),
                                       planner_plan_get_mesh (plan));
  g_error ("no tensor %s in the plan", tensor);
  return NULL;
}

typedef struct
{
  const char *file;
  guint shared; /* row-parallel linears a layer besides o_proj: qwen2_moe's shared expert */
} Model;

static const Model mixtral = { "mixtral-8x7b-v0.1.json", 0 };
static const Model qwen2_moe = { "qwen1.5-moe-a2.7b.json", 1 };

/* ep=2,mp=2: the residual stream, the norms and the router batch-split over ep and whole on
 * mp; the experts on ep; attention tensor-parallel on mp; no conflict. */
static void
test_ep_mp_layouts (gconstpointer data)
{
  const Model *m = data;
  const guint layers = 2;
  g_autoptr (PlannerGraph) g = load (m->file, layers);
  g_autoptr (PlannerPlan) plan = test_util_plan (g, "ep=2,mp=2", NULL, "megatron-ep", NULL);
  const struct
  {
    const char *tensor, *layout;
  } expect[] = {
    { "model.layers.0.input_layernorm", "[ep,_,_]" },
    /* o_proj's partial sum and the vocab-parallel embedding's added before their one
     * AllReduce over mp (the sum of partial sums is one) */
    { "model.layers.0.add_attn", "[ep,_,_] partial(mp)" },
    { "model.layers.0.post_attention_layernorm", "[ep,_,_]" },
    { "model.layers.0.mlp.gate", "[ep,_,_]" },
    { "model.layers.0.mlp.gate.weight", "[_,_]" },
    { "model.layers.0.mlp.dispatch", "[_,ep,_,_]" },
    { "model.layers.0.mlp.experts.gate_up_proj", "[ep,_,_,_]" },
    { "model.layers.0.add_mlp", "[ep,_,_]" },
    { "model.layers.1.add_mlp", "[ep,_,_]" },
    { "model.norm", "[ep,_,_]" },
    { "model.layers.1.self_attn.q_proj.weight", "[mp,_]" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (expect); i++)
    {
      g_autofree char *l = layout_of (plan, expect[i].tensor);
      if (g_strcmp0 (l, expect[i].layout) != 0)
        g_error ("%s: %s, expected %s", expect[i].tensor, l, expect[i].layout);
    }
  g_assert_cmpuint (planner_plan_get_n_conflicts (plan), ==, 0);
  const PlannerPlanTotals *tot = planner_plan_get_totals (plan);
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_ALL_TO_ALL], ==, 2 * layers);
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_ALL_REDUCE], ==, layers * (1 + m->shared) + 1);
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_ALL_GATHER], ==, 0);
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_REDUCE_SCATTER], ==, 0);
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_SLICE], ==, 0);
}

/* The policy alone gives every op the strategy it had under the three pins that made the
 * plan exportable before the rules existed. */
static void
test_ep_mp_same_as_pins (gconstpointer data)
{
  const Model *m = data;
  g_autoptr (PlannerGraph) g = load (m->file, 2);
  static const char *const pins[] = { "*layernorm=[ep,_,_]", "model.norm=[ep,_,_]",
                                      "*.mlp.gate=[ep,_,_],[_,_]", NULL };
  g_autoptr (PlannerPlan) policy = test_util_plan (g, "ep=2,mp=2", NULL, "megatron-ep", NULL);
  g_autoptr (PlannerPlan) pinned = test_util_plan (g, "ep=2,mp=2", NULL, "megatron-ep", pins);
  const PlannerMesh *mesh = planner_plan_get_mesh (policy);

  for (guint t = 0; t < planner_graph_get_n_tensors (g); t++)
    {
      g_autofree char *a
          = planner_layout_to_string (planner_plan_get_tensor_layout (policy, t), mesh);
      g_autofree char *b
          = planner_layout_to_string (planner_plan_get_tensor_layout (pinned, t), mesh);
      if (!g_str_equal (a, b))
        g_error ("%s: %s under the policy, %s under the pins",
                 planner_graph_get_tensor (g, t)->name, a, b);
    }
  g_assert_cmpfloat (planner_plan_get_totals (policy)->step_time_s, ==,
                     planner_plan_get_totals (pinned)->step_time_s);
}

/* Without a tp axis the rules still apply, with {dp} every axis: the norms and the router on
 * dp+ep, which is where the dispatch pin wants the tokens anyway (no redistribution but the
 * AllToAlls). */
static void
test_dp_ep_rules (void)
{
  g_autoptr (PlannerGraph) g = load (mixtral.file, 2);
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2,ep=4");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pins = planner_policy_expand ("megatron-ep", g, mesh, notes, &error);
  const char *const want[] = { "model.layers.*.input_layernorm=[dp+ep,_,_]",
                               "model.layers.*.post_attention_layernorm=[dp+ep,_,_]",
                               "model.norm=[dp+ep,_,_]",
                               "model.layers.*.mlp.gate=[dp+ep,_,_],[_,_]" };

  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      gboolean found = FALSE;
      for (guint p = 0; p < pins->len; p++)
        found |= g_str_equal (((PlannerPin *) g_ptr_array_index (pins, p))->text, want[i]);
      if (!found)
        g_error ("no pin %s", want[i]);
    }
  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,ep=4", NULL, "megatron-ep", NULL);
  const PlannerPlanTotals *tot = planner_plan_get_totals (plan);
  g_assert_cmpuint (tot->n_redistributions, ==, 4);
  g_assert_cmpuint (tot->coll_count[PLANNER_STEP_ALL_TO_ALL], ==, 4);
  g_assert_cmpuint (planner_plan_get_n_conflicts (plan), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/planner/ep-tp/layouts/mixtral", &mixtral, test_ep_mp_layouts);
  g_test_add_data_func ("/planner/ep-tp/layouts/qwen2-moe", &qwen2_moe, test_ep_mp_layouts);
  g_test_add_data_func ("/planner/ep-tp/same-as-pins/mixtral", &mixtral,
                        test_ep_mp_same_as_pins);
  g_test_add_data_func ("/planner/ep-tp/same-as-pins/qwen2-moe", &qwen2_moe,
                        test_ep_mp_same_as_pins);
  g_test_add_func ("/planner/ep-tp/dp-ep", test_dp_ep_rules);
  return g_test_run ();
}
