/* Propagation from pins to a full plan (semantics.md 5, 9): Megatron and sequence-parallel
 * plans of real graphs, order independence, conflicts, errors. */
#define G_LOG_DOMAIN "test-propagate"

#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <unistd.h>
#include <string.h>

#include "planner-error.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

/* Layer index of an op name ("model.layers.12.mlp" -> 12), -1 outside the layers. */
static int
layer_of (const char *name)
{
  const char *p = strstr (name, "layers.");
  if (p)
    p += strlen ("layers.");
  else if ((p = strstr (name, ".h.")) != NULL)
    p += strlen (".h.");
  return p && g_ascii_isdigit (*p) ? atoi (p) : -1;
}

static const char *
consumer_name (PlannerPlan *plan, const PlannerRedistribution *r)
{
  return r->consumer >= 0 ? planner_graph_get_op (planner_plan_get_graph (plan), r->consumer)->name
                          : "(graph output)";
}

static void
test_megatron_llama (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama", NULL);
  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,mp=4", NULL, "megatron", NULL);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  guint per_layer[32] = { 0 };
  guint outside = 0;

  g_assert_cmpuint (t->n_defaulted, ==, 0);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_REDUCE], ==, 2 * 32 + 1);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_GATHER], ==, 0);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_TO_ALL], ==, 0);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_REDUCE_SCATTER], ==, 0);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_SLICE], ==, 0);
  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      const char *consumer = consumer_name (plan, r);
      g_assert_cmpuint (r->n_steps, ==, 1);
      g_assert_cmpint (r->steps[0].kind, ==, PLANNER_STEP_ALL_REDUCE);
      g_assert_cmpuint (r->steps[0].axis, ==, 1); /* mp */
      /* Column- and row-parallel partners meet with no redistribution: every AllReduce
       * feeds a norm, none sits inside attention or the MLP. */
      g_assert_true (g_str_has_suffix (consumer, "layernorm") || g_str_equal (consumer, "model.norm"));
      int layer = layer_of (consumer);
      if (layer >= 0)
        per_layer[layer]++;
      else
        outside++;
    }
  /* The first norm of layer 0 gets the vocab-parallel embedding's AllReduce. */
  for (guint l = 0; l < 32; l++)
    g_assert_cmpuint (per_layer[l], ==, 2);
  g_assert_cmpuint (outside, ==, 1);
}

static void
test_megatron_gpt2 (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("gpt2", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("dp=2,mp=4", NULL);
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) pins = planner_policy_expand ("megatron", g, mesh, notes, &error);
  g_assert_no_error (error);
  g_assert_nonnull (pins);
  /* GPT-2's vocabulary (50257) is not divisible by 4: the vocab-parallel rules are left out,
   * and the expansion says so. */
  g_assert_cmpuint (notes->len, ==, 2);
  g_assert_nonnull (strstr (g_ptr_array_index (notes, 0), "50257"));

  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,mp=4", NULL, "megatron", NULL);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  guint per_layer[12] = { 0 };
  g_assert_cmpuint (t->n_defaulted, ==, 0);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_REDUCE], ==, 2 * 12);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_GATHER], ==, 0);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_TO_ALL], ==, 0);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_REDUCE_SCATTER], ==, 0);
  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      const char *consumer = consumer_name (plan, r);
      g_assert_cmpint (r->steps[0].kind, ==, PLANNER_STEP_ALL_REDUCE);
      /* Row-parallel outputs are reduced right after the row-parallel c_proj, as Megatron
       * does, never between c_attn/c_fc and their c_proj. */
      const PlannerTensor *tensor = planner_graph_get_tensor (g, r->tensor);
      g_assert_cmpint (tensor->producer, >=, 0);
      g_assert_true (g_str_has_suffix (planner_graph_get_op (g, tensor->producer)->name, ".c_proj"));
      g_assert_true (g_str_has_suffix (consumer, "dropout"));
      per_layer[layer_of (consumer) >= 0 ? layer_of (consumer) : 0]++;
    }
  for (guint l = 0; l < 12; l++)
    g_assert_cmpuint (per_layer[l], ==, 2);
}

static void
test_megatron_sp (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama", NULL);
  g_autoptr (PlannerPlan) tp = test_util_plan (g, "dp=2,mp=4", NULL, "megatron", NULL);
  g_autoptr (PlannerPlan) sp = test_util_plan (g, "dp=2,mp=4", NULL, "megatron-sp", NULL);
  const PlannerPlanTotals *a = planner_plan_get_totals (tp), *b = planner_plan_get_totals (sp);

  /* Each AllReduce becomes a ReduceScatter and a later AllGather. */
  g_assert_cmpuint (b->coll_count[PLANNER_STEP_ALL_REDUCE], ==, 0);
  g_assert_cmpuint (b->coll_count[PLANNER_STEP_REDUCE_SCATTER], ==, a->coll_count[PLANNER_STEP_ALL_REDUCE]);
  g_assert_cmpuint (b->coll_count[PLANNER_STEP_ALL_GATHER], ==, a->coll_count[PLANNER_STEP_ALL_REDUCE]);
  g_assert_cmpuint (b->coll_count[PLANNER_STEP_ALL_TO_ALL], ==, 0);
  /* A ReduceScatter plus an AllGather move the bytes and take the ring steps of one AllReduce
   * (the alpha-beta model); NCCL's Simple ring also pays its base latency once a call
   * (ring_base_us, 8.4 us on h100-sxm), so the split costs one more base per AllReduce. */
  g_assert_cmpfloat_with_epsilon (b->comm_time_s,
                                  a->comm_time_s + a->coll_count[PLANNER_STEP_ALL_REDUCE] * 8.4e-6,
                                  1e-9 * a->comm_time_s);
  g_assert_cmpuint (b->comm_bytes, ==, a->comm_bytes);
  /* The norms now run on a quarter of the sequence. */
  g_assert_cmpfloat (b->compute_time_s, <, a->compute_time_s);
}

static PlannerPlan *
plan_with_pins (PlannerGraph *g, const char *mesh_text, const char *const *texts, guint n,
                const guint *order, GError **error)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, NULL);
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("h100-sxm", NULL);
  g_autoptr (GPtrArray) pins = g_ptr_array_new_with_free_func ((GDestroyNotify) planner_pin_free);
  for (guint i = 0; i < n; i++)
    {
      PlannerPin *pin = planner_pin_parse (texts[order ? order[i] : i], mesh, error);
      if (pin == NULL)
        return NULL;
      g_ptr_array_add (pins, pin);
    }
  return planner_propagate (g, mesh, hw, pins, NULL, error);
}

static void
test_layer0_order (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  g_autoptr (GError) error = NULL;
  guint n = G_N_ELEMENTS (test_util_llama_layer0_pins);
  g_autoptr (PlannerPlan) first
      = plan_with_pins (g, "dp=2,mp=2", test_util_llama_layer0_pins, n, NULL, &error);
  g_assert_no_error (error);

  /* Propagation reaches every op from pins on layer 0 alone. */
  const PlannerPlanTotals *t = planner_plan_get_totals (first);
  g_assert_cmpuint (t->n_pinned, ==, n);
  g_assert_cmpuint (t->n_defaulted, ==, 0);
  g_assert_cmpuint (t->n_propagated, ==, planner_graph_get_n_ops (g) - n);
  g_assert_cmpuint (planner_plan_get_n_trace_steps (first), ==, t->n_propagated);

  /* Every propagated op has its trace step, and its runner-up costs no less. */
  for (guint i = 0; i < planner_plan_get_n_trace_steps (first); i++)
    {
      const PlannerTraceStep *s = planner_plan_get_trace_step (first, i);
      g_assert_cmpuint (s->index, ==, i);
      g_assert_cmpint (planner_plan_get_op (first, s->op)->trace_step, ==, (int) i);
      g_assert_cmpint (s->from_op, >=, 0);
      if (s->has_runner_up)
        g_assert_cmpfloat (s->runner_up_cost_s, >=, s->edge_cost_s * (1 - 1e-9));
    }

  /* The same plan for every order of the pins. */
  for (guint round = 0; round < 8; round++)
    {
      guint order[G_N_ELEMENTS (test_util_llama_layer0_pins)];
      for (guint i = 0; i < n; i++)
        order[i] = i;
      for (guint i = n - 1; i > 0; i--)
        {
          guint j = (guint) g_test_rand_int_range (0, (gint32) i + 1), tmp = order[i];
          order[i] = order[j];
          order[j] = tmp;
        }
      g_autoptr (PlannerPlan) again
          = plan_with_pins (g, "dp=2,mp=2", test_util_llama_layer0_pins, n, order, &error);
      g_assert_no_error (error);
      g_assert_true (planner_plan_equal (first, again));
    }
}

static void
test_conflict (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  g_autoptr (GError) error = NULL;
  /* Layer 0 splits the MLP's hidden dim on mp (its down_proj leaves partial sums); layer 1
   * wants its input split on the batch over mp. */
  const char *const texts[] = {
    "model.layers.0.mlp.gate_proj=[_,_,_],[mp,_]",
    "model.layers.0.mlp.up_proj=[_,_,_],[mp,_]",
    "model.layers.0.mlp.down_proj=[_,_,mp],[_,mp]",
    "model.layers.1.input_layernorm=[mp,_,_]",
  };
  g_autoptr (PlannerPlan) plan = plan_with_pins (g, "mp=4", texts, G_N_ELEMENTS (texts), NULL,
                                                 &error);
  g_assert_no_error (error);

  /* The cheapest way from partial sums to a batch split is one ReduceScatter, and it is
   * reported as the meeting of the two pins. */
  g_assert_cmpuint (planner_plan_get_n_conflicts (plan), >=, 1);
  const PlannerConflict *c = NULL;
  for (guint i = 0; i < planner_plan_get_n_conflicts (plan); i++)
    if (strstr (planner_plan_get_conflict (plan, i)->message, "model.layers.1.input_layernorm"))
      c = planner_plan_get_conflict (plan, i);
  g_assert_nonnull (c);
  g_assert_nonnull (strstr (c->message, "model.layers.0.mlp.down_proj"));
  const PlannerRedistribution *r = planner_plan_get_redistribution (plan, c->redistribution);
  g_assert_cmpuint (r->n_steps, ==, 1);
  g_assert_cmpint (r->steps[0].kind, ==, PLANNER_STEP_REDUCE_SCATTER);
  g_assert_cmpint (r->steps[0].dim, ==, 0);

  /* By hand: the residual [8, 128, 64] f32 is 262144 bytes on each device before the step;
   * over mp=4 on NVLink 4, NCCL's LL protocol is the fastest (141 GB/s, 6.6 us + 0.6 us a
   * step): 6.6 + 3 * 0.6 us + 3/4 * 262144 B / 141e9 B/s = 8.4 + 1.394383 = 9.794383 us (the
   * Simple ring: 8.4 + 3 * 3.4 + 0.531373 = 19.13137 us). */
  g_assert_cmpuint (r->steps[0].n_in, ==, 262144);
  g_assert_cmpuint (r->steps[0].n_out, ==, 65536);
  g_assert_cmpfloat_with_epsilon (r->time_s, 8.4e-6 + 0.75 * 262144 / 141e9, 1e-12);
  g_assert_cmpuint (r->bytes, ==, 196608);
}

static void
expect_error (const char *model, const char *mesh, const char *pin, PlannerError code,
              const char *fragment)
{
  g_autoptr (PlannerGraph) g = test_util_model (model, NULL);
  g_autoptr (GError) error = NULL;
  const char *texts[] = { pin };
  g_autoptr (PlannerPlan) plan = plan_with_pins (g, mesh, texts, 1, NULL, &error);
  g_assert_null (plan);
  g_assert_error (error, PLANNER_ERROR, (gint) code);
  if (strstr (error->message, fragment) == NULL)
    g_error ("'%s' lacks '%s'", error->message, fragment);
}

static void
test_errors (void)
{
  expect_error ("llama-tiny", "dp=2,mp=2", "model.layers.9.q_proj=[dp,_,_],[mp,_]",
                PLANNER_ERROR_UNKNOWN_OP, "no op matches");
  expect_error ("llama-tiny", "dp=2,mp=2", "*.q_proj=[dp,_,_,[mp,_]", PLANNER_ERROR_PARSE,
                "expected");
  expect_error ("llama-tiny", "dp=2,mp=2", "*.q_proj=[xp,_,_],[mp,_]", PLANNER_ERROR_UNKNOWN_AXIS,
                "xp");
  /* LLaMA-2-70B-shaped k_proj: 8 kv heads x 128 cannot be split 16 ways. */
  {
    g_autoptr (GError) error = NULL;
    PlannerModelOptions o;
    planner_model_options_init (&o);
    o.layers = 1;
    o.seq = 128;
    g_autoptr (PlannerGraph) g = planner_model_load ("llama-70b", &o, &error);
    g_assert_no_error (error);
    const char *texts[] = { "model.layers.0.self_attn.k_proj=[_,_,_],[mp,_]" };
    g_autoptr (PlannerPlan) plan = plan_with_pins (g, "mp=16", texts, 1, NULL, &error);
    g_assert_null (plan);
    g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE);
    g_assert_nonnull (strstr (error->message, "size 1024 = 8 heads x 128"));
    g_assert_nonnull (strstr (error->message, "8 heads % 16 != 0"));
    g_assert_nonnull (strstr (error->message, "mp <= 8"));
  }
  /* Unknown and malformed policies. */
  {
    g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
    g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("dp=2,mp=2", NULL);
    g_autoptr (GError) error = NULL;
    g_autoptr (GPtrArray) pins = planner_policy_expand ("zigzag", g, mesh, NULL, &error);
    g_assert_null (pins);
    g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_POLICY);
    g_assert_nonnull (strstr (error->message, "megatron"));
    g_clear_error (&error);

    g_autofree char *path = NULL;
    int fd = g_file_open_tmp ("policy-XXXXXX.json", &path, &error);
    g_assert_no_error (error);
    close (fd);
    const char *bad[] = { "{ not json", "{\"shardscope_policy\": 1, \"families\": 3}",
                          ("{\"shardscope_policy\": 1, \"families\": [{\"detect\": \"*\", "
                           "\"rules\": [{\"pin\": \"[_]\"}]}]}") };
    for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
      {
        g_assert_true (g_file_set_contents (path, bad[i], -1, NULL));
        pins = planner_policy_expand (path, g, mesh, NULL, &error);
        g_assert_null (pins);
        g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
        g_clear_error (&error);
      }
    /* A policy that needs a tensor-parallel axis on a mesh without one. */
    g_autoptr (PlannerMesh) dp_only = planner_mesh_parse ("dp=4", NULL);
    pins = planner_policy_expand ("megatron", g, dp_only, NULL, &error);
    g_assert_null (pins);
    g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS);
    g_assert_nonnull (strstr (error->message, "tp or mp"));
    g_unlink (path);
  }
}

/* An Add whose inputs are decided one at a time (issue 11, item 8): with only GPT-2's first
 * sdpa pinned, layer 0's row-parallel c_proj leaves partial sums over mp while the residual
 * comes from a Dropout of whole embeddings, which can never be partial. The Add must not take
 * its partial variant then; it used to, and the plan was refused at add_attn ("arrives as
 * [dp+mp,_,_] but [dp,_,_] partial(mp) is required"), as was a lone row-parallel pin.
 * Figures by hand, costs.md on h100-sxm: the c_proj output is [8,1024,768] f32 over dp=2,
 * n_in = 12582912 bytes; ReduceScatter over mp=4 sends 3/4 of it on NCCL's Simple ring,
 * 8.4 + 3 x 3.4 us + 9437184 / 370 GB/s; the residual is sliced to a quarter, 3145728 bytes / 3350 GB/s. */
static void
test_partial_add (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("gpt2", NULL);
  const char *const sdpa[]
      = { "transformer.h.0.attn.sdpa=[dp,mp,_,_],[dp,mp,_,_],[dp,mp,_,_]", NULL };
  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=2,mp=4", NULL, NULL, sdpa);
  g_assert_cmpuint (planner_plan_get_n_redistributions (plan), ==, 2);
  guint found = 0;
  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      g_assert_cmpstr (consumer_name (plan, r), ==, "transformer.h.0.add_attn");
      g_assert_cmpuint (r->n_steps, ==, 1);
      g_assert_cmpuint (r->steps[0].axis, ==, 1);
      g_assert_cmpint (r->steps[0].dim, ==, 0);
      if (r->steps[0].kind == PLANNER_STEP_REDUCE_SCATTER)
        {
          g_assert_cmpuint (r->bytes, ==, 9437184);
          g_assert_cmpfloat_with_epsilon (r->time_s, (8.4 + 3 * 3.4) * 1e-6 + 9437184.0 / 370e9,
                                          1e-15);
          found |= 1;
        }
      else
        {
          g_assert_cmpint (r->steps[0].kind, ==, PLANNER_STEP_SLICE);
          g_assert_cmpfloat_with_epsilon (r->time_s, 3145728.0 / 3350e9, 1e-15);
          found |= 2;
        }
    }
  g_assert_cmpuint (found, ==, 3);
  for (guint o = 0; o < planner_graph_get_n_ops (g); o++)
    if (g_str_equal (planner_graph_get_op (g, o)->name, "transformer.h.0.add_attn"))
      g_assert_cmphex (planner_plan_get_op (plan, o)->strategy.partial, ==, 0);

  /* The same with one row-parallel pin on gpt2-tiny: a ReduceScatter into add_mlp (the
   * residual is not partial) and an AllGather into the next c_fc. */
  g_autoptr (PlannerGraph) tiny = test_util_model ("gpt2-tiny", NULL);
  const char *const row[] = { "transformer.h.0.mlp.c_proj=[dp,_,mp],[mp,_]", NULL };
  g_autoptr (PlannerPlan) p2 = test_util_plan (tiny, "dp=2,mp=2", NULL, NULL, row);
  const PlannerPlanTotals *t = planner_plan_get_totals (p2);
  g_assert_cmpuint (t->n_redistributions, ==, 2);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_REDUCE_SCATTER], ==, 1);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_GATHER], ==, 1);
  g_assert_cmpuint (t->coll_bytes[PLANNER_STEP_REDUCE_SCATTER], ==, 65536);
}

static void
test_defaults (void)
{
  /* No pins: every op defaulted, batch over every axis that divides it. */
  g_autoptr (PlannerGraph) g = test_util_model ("gpt2-tiny", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = plan_with_pins (g, "dp=2,mp=2", NULL, 0, NULL, &error);
  g_assert_no_error (error);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  g_assert_cmpuint (t->n_defaulted, ==, planner_graph_get_n_ops (g));
  g_assert_cmpuint (planner_plan_get_n_trace_steps (plan), ==, 0);
  int q = planner_graph_find_op (g, "transformer.h.0.mlp.c_fc");
  g_assert_cmpint (q, >=, 0);
  g_autofree char *s = planner_strategy_to_string (&planner_plan_get_op (plan, q)->strategy,
                                                   &planner_graph_get_op (g, q)->rule,
                                                   planner_plan_get_mesh (plan));
  g_assert_cmpstr (s, ==, "[dp+mp,_,_],[_,_],[_]");
  /* Data parallel: the weights' gradients are all-reduced over both axes. */
  g_assert_cmpfloat (t->grad_sync_time_s, >, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/propagate/megatron-llama", test_megatron_llama);
  g_test_add_func ("/planner/propagate/megatron-gpt2", test_megatron_gpt2);
  g_test_add_func ("/planner/propagate/megatron-sp", test_megatron_sp);
  g_test_add_func ("/planner/propagate/layer0-order", test_layer0_order);
  g_test_add_func ("/planner/propagate/conflict", test_conflict);
  g_test_add_func ("/planner/propagate/errors", test_errors);
  g_test_add_func ("/planner/propagate/defaults", test_defaults);
  g_test_add_func ("/planner/propagate/partial-add", test_partial_add);
  return g_test_run ();
}
