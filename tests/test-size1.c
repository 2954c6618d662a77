#define G_LOG_DOMAIN "test-size1"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-export.h"
#include "planner-plan-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-redistribute.h"
#include "test-util.h"

/* Mesh axes of size 1 (semantics.md 2, issue 11): such an axis is a no-op everywhere, so a
 * mesh with it plans exactly as the mesh without it: the same strategies, layouts,
 * redistributions, trace, costs and exports, for every built-in policy. The reference of each
 * comparison is the plan of the smaller mesh, which never sees the axis; the mesh with every
 * axis of size 1 is checked against what one device must do (nothing moves, nothing is
 * split), and costs against the formulas of costs.md worked out by hand. */

/* ---- layouts: one placement, one layout ---- */

static void
test_layout_text (void)
{
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=1,mp=4");
  static const struct
  {
    const char *text, *canonical, *placements;
    guint rank;
  } cases[] = {
    { "[dp,_,mp]", "[_,_,mp]", "(R, S(2))", 3 },
    { "[dp,_]", "[_,_]", "(R, R)", 2 },
    { "[mp+dp,_]", "[mp,_]", "(R, S(0))", 2 },
    { "[dp+mp,_]", "[mp,_]", "(R, S(0))", 2 },
    { "[_,_] partial(dp)", "[_,_]", "(R, R)", 2 },
    { "[_,dp] partial(mp)", "[_,_] partial(mp)", "(R, P)", 2 },
    { "(S(0), S(2))", "[_,_,mp]", "(R, S(2))", 3 },
    { "(P, S(1))", "[_,mp]", "(R, S(1))", 2 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      PlannerLayout l, c;
      gboolean bracket = cases[i].text[0] == '[';
      if (bracket)
        g_assert_true (planner_layout_parse (cases[i].text, m, &l, &error));
      else
        g_assert_true (
            planner_layout_parse_placements (cases[i].text, m, cases[i].rank, &l, &error));
      g_assert_no_error (error);
      g_autofree char *t = planner_layout_to_string (&l, m);
      g_autofree char *p = planner_layout_to_placements (&l, m);
      g_assert_cmpstr (t, ==, cases[i].canonical);
      g_assert_cmpstr (p, ==, cases[i].placements);
      /* The same object as the canonical text gives: one placement, one layout. */
      g_assert_true (planner_layout_parse (cases[i].canonical, m, &c, NULL));
      g_assert_true (planner_layout_equal (&l, &c));
      g_assert_cmpuint (planner_layout_hash (&l), ==, planner_layout_hash (&c));
    }

  /* Naming a size-1 axis is accepted, but the usual mistakes are still refused. */
  PlannerLayout l;
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  g_assert_false (planner_layout_parse ("[dp,dp]", m, &l, &e1));
  test_util_assert_error (e1, PLANNER_ERROR_AXIS_REUSED, "dp is used twice");
  g_assert_false (planner_layout_parse ("[pp,_]", m, &l, &e2));
  test_util_assert_error (e2, PLANNER_ERROR_UNKNOWN_AXIS, "'pp' is not in the mesh");
}

/* A layout made in code that still names the axis is the same placement to the search: no
 * step between the two forms, and the same path to anything else. */
static void
test_redistribute_equivalence (void)
{
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=1,mp=2");
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerRedistributor) r = planner_redistributor_new (m, hw);
  const gint64 shape[] = { 8, 128, 64 };
  PlannerLayout raw, whole, split;

  planner_layout_init_replicated (&raw, 3);
  raw.axes[0][raw.n_axes[0]++] = 0; /* [dp,_,_] */
  raw.partial = 1u << 0;            /* partial(dp) */
  planner_layout_init_replicated (&whole, 3);
  g_assert_true (planner_layout_parse ("[_,_,mp]", m, &split, NULL));

  const PlannerRedistPath *none
      = planner_redistributor_find (r, &raw, &whole, shape, 3, PLANNER_DTYPE_F32);
  g_assert_true (none->reachable);
  g_assert_cmpuint (none->n_steps, ==, 0);
  g_assert_cmpfloat (none->time_s, ==, 0);

  /* [_,_,mp] -> [_,_,_] is one AllGather over mp, from either form of the target, p = 2,
   * n_out = 8*128*64*4 bytes: NCCL's LL protocol is the fastest at this size, 6.6 + 0.6 us +
   * (p-1)/p n_out / 141 GB/s = 8.129589 us (the Simple ring: 8.4 + 3.4 + 0.354 = 12.15 us). */
  double expected = (6.6 + 0.6) * 1e-6 + 0.5 * 262144.0 / 141e9;
  const PlannerRedistPath *a
      = planner_redistributor_find (r, &split, &raw, shape, 3, PLANNER_DTYPE_F32);
  const PlannerRedistPath *b
      = planner_redistributor_find (r, &split, &whole, shape, 3, PLANNER_DTYPE_F32);
  g_assert_true (a->reachable && b->reachable);
  g_assert_cmpuint (a->n_steps, ==, 1);
  g_assert_cmpuint (b->n_steps, ==, 1);
  g_assert_cmpint (a->steps[0].kind, ==, PLANNER_STEP_ALL_GATHER);
  g_assert_cmpuint (a->steps[0].axis, ==, 1);
  g_assert_cmpfloat_with_epsilon (a->time_s, expected, 1e-15);
  g_assert_cmpfloat (a->time_s, ==, b->time_s);
}

/* ---- strategies: no duplicates that differ by a size-1 axis ---- */

static char **
describe_all (PlannerGraph *g, guint op, const char *mesh_text)
{
  g_autoptr (PlannerMesh) m = test_util_mesh (mesh_text);
  const PlannerOp *o = planner_graph_get_op (g, op);
  g_autoptr (GArray) list = planner_op_rule_enumerate (&o->rule, m);
  char **out = g_new0 (char *, list->len + 1);
  for (guint i = 0; i < list->len; i++)
    out[i] = planner_strategy_describe (&g_array_index (list, PlannerStrategy, i), &o->rule, m);
  return out;
}

static void
test_strategies (void)
{
  static const char *const pairs[][2] = {
    { "dp=1,mp=2", "mp=2" },
    { "dp=2,x=1,mp=2", "dp=2,mp=2" },
    { "x=1,y=1", NULL },
  };
  g_autoptr (PlannerGraph) g = test_util_model ("gpt2-tiny", NULL);
  for (guint p = 0; p < G_N_ELEMENTS (pairs); p++)
    for (guint op = 0; op < planner_graph_get_n_ops (g); op++)
      {
        g_auto (GStrv) with = describe_all (g, op, pairs[p][0]);
        if (pairs[p][1] == NULL)
          {
            /* One device: the only strategy is to split nothing. */
            g_assert_cmpuint (g_strv_length (with), ==, 1);
            g_assert_cmpstr (with[0], ==, "replicated");
            continue;
          }
        g_auto (GStrv) without = describe_all (g, op, pairs[p][1]);
        g_assert_cmpstrv (with, without);
      }
}

/* Input layouts made in code may name the axis; the strategy they imply does not. */
static void
test_strategy_from_layouts (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("gpt2-tiny", NULL);
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=1,mp=2");
  const PlannerOp *op = NULL;
  for (guint o = 0; o < planner_graph_get_n_ops (g) && op == NULL; o++)
    if (g_str_equal (planner_graph_get_op (g, o)->name, "transformer.h.0.mlp.c_fc"))
      op = planner_graph_get_op (g, o);
  g_assert_nonnull (op);
  PlannerLayout in[2];
  planner_layout_init_replicated (&in[0], 3);
  in[0].axes[0][in[0].n_axes[0]++] = 0; /* x [dp,_,_] */
  planner_layout_init_replicated (&in[1], 2);
  in[1].axes[1][in[1].n_axes[1]++] = 1; /* weight [in, out] = [_,mp] */
  PlannerStrategy s;
  g_autoptr (GError) error = NULL;
  g_assert_true (planner_strategy_from_layouts (&op->rule, m, in, 2, op->name, NULL, &s, &error));
  g_assert_no_error (error);
  g_assert_cmphex (planner_strategy_axis_mask (&s), ==, 1u << 1);
  g_autofree char *text = planner_strategy_to_string (&s, &op->rule, m);
  g_assert_cmpstr (text, ==, "[_,_,_],[_,mp],[mp]");
}

/* ---- whole plans against the mesh without the axis ---- */

typedef struct
{
  const char *name; /* test path component */
  const char *model;
  gint64 layers, seq, batch;
} ModelCase;

static const ModelCase models[] = {
  { "gpt2-tiny", "gpt2-tiny", 0, 0, 0 },
  { "llama-tiny", "llama-tiny", 0, 0, 0 },
  { "bert", "bert", 2, 64, 4 },
  { "qwen2", "qwen2", 2, 64, 4 },
};

static const char *const policies[] = { "megatron", "megatron-sp", "dp" };

/* Mesh with axes of size 1 -> the same mesh without them. */
static const char *const mesh_pairs[][2] = {
  { "dp=1,mp=2", "mp=2" },          /* one: pure tensor parallelism */
  { "dp=2,mp=1", "dp=2" },          /* one: tp of size 1 */
  { "dp=2,x=1,mp=2", "dp=2,mp=2" }, /* one, between two real axes */
  { "pp=1,dp=1,mp=2", "mp=2" },     /* two */
  { "dp=2,mp=1,sp=1", "dp=2" },     /* two, tp among them */
};

static PlannerGraph *
model_of (const ModelCase *c)
{
  PlannerModelOptions o;
  planner_model_options_init (&o);
  o.layers = c->layers;
  o.seq = c->seq;
  o.batch = c->batch;
  return test_util_model (c->model, &o);
}

/* The plan file without what names the mesh itself or depends on the clock. */
static char *
plan_text (PlannerPlan *plan, gboolean drop_pins)
{
  g_autofree char *json = planner_plan_to_json (plan);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root = test_util_parse_object (parser, json);
  json_object_remove_member (root, "mesh");
  json_object_remove_member (root, "propagate_ms");
  json_object_remove_member (json_object_get_object_member (root, "summary"), "propagate_ms");
  /* The per-axis totals list every axis of the mesh; a size-1 axis's row must be zero. */
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  JsonObject *axes
      = json_object_get_object_member (json_object_get_object_member (root, "totals"), "axes");
  for (guint a = 0; a < mesh->n_axes; a++)
    if (mesh->sizes[a] == 1)
      {
        JsonObject *row = json_object_get_object_member (axes, mesh->names[a]);
        g_assert_cmpint (json_object_get_int_member (row, "bytes"), ==, 0);
        g_assert_cmpfloat (json_object_get_double_member (row, "time_s"), ==, 0);
        json_object_remove_member (axes, mesh->names[a]);
      }
  if (drop_pins)
    {
      json_object_remove_member (root, "pins");
      JsonArray *ops = json_object_get_array_member (root, "ops");
      for (guint i = 0; i < json_array_get_length (ops); i++)
        json_object_remove_member (json_array_get_object_element (ops, i), "pin");
      /* Conflict messages quote the pins' text; the redistribution they name stays. */
      JsonArray *conflicts = json_object_get_array_member (root, "conflicts");
      for (guint i = 0; i < json_array_get_length (conflicts); i++)
        json_object_remove_member (json_array_get_object_element (conflicts, i), "message");
    }
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  json_generator_set_pretty (gen, TRUE);
  json_generator_set_root (gen, json_parser_get_root (parser));
  return json_generator_to_data (gen, NULL);
}

/* Equal texts, or a failure at the first line that differs. */
static void
assert_same_text (const char *what, const char *a, const char *b)
{
  if (g_strcmp0 (a, b) == 0)
    return;
  g_auto (GStrv) la = g_strsplit (a, "\n", -1);
  g_auto (GStrv) lb = g_strsplit (b, "\n", -1);
  guint i = 0;
  while (la[i] && lb[i] && g_str_equal (la[i], lb[i]))
    i++;
  g_error ("%s: line %u differs:\n  with the size-1 axis: %s\n  without it:          %s", what,
           i + 1, la[i] ? la[i] : "(end)", lb[i] ? lb[i] : "(end)");
}

/* Lines of an export, less those that spell out the mesh (its shape and axis names, which
 * include the size-1 axis by design) and, for MindSpore, the device matrix the tensor maps
 * count in; the split of every op's inputs must be the same. */
static char *
export_text (PlannerPlan *plan, const char *format)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = planner_export_to_string (plan, format, &error);
  /* A DTensor export refuses what it cannot run: the same refusal on both meshes. */
  if (text == NULL && strcmp (format, "dtensor") == 0)
    {
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY);
      text = g_strdup (error->message);
      g_clear_error (&error);
    }
  g_assert_no_error (error);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  GString *out = g_string_new (NULL);
  gboolean layouts = FALSE;
  for (guint i = 0; lines[i]; i++)
    {
      const char *l = lines[i];
      if (g_str_has_prefix (l, "# Model:") || g_str_has_prefix (l, "MESH_SHAPE")
          || g_str_has_prefix (l, "MESH_DIM_NAMES"))
        continue;
      if (strstr (l, "\"parallel_layout_item\""))
        layouts = TRUE;
      if (layouts && (strstr (l, "\"dev_matrix\"") || strstr (l, "\"tensor_map\"")))
        continue;
      g_string_append_printf (out, "%s\n", l);
    }
  return g_string_free (out, FALSE);
}

static char **
pin_texts (PlannerPlan *plan)
{
  const GPtrArray *pins = planner_plan_get_pins (plan);
  char **out = g_new0 (char *, pins->len + 1);
  for (guint i = 0; i < pins->len; i++)
    out[i] = g_strdup (g_ptr_array_index (pins, i));
  return out;
}

/* The reference: the policy on the mesh without the axes. Where that mesh has no tp axis for
 * the policy (mp=1 removed), the size-1 plan's own pins, which name no size-1 axis, are
 * given as pins instead: they are what the policy asks of that mesh. */
static PlannerPlan *
reference_plan (PlannerGraph *g, const char *mesh_text, const char *policy, PlannerPlan *with)
{
  g_autoptr (PlannerMesh) m = test_util_mesh (mesh_text);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) expanded = planner_policy_expand (policy, g, m, NULL, &error);
  if (expanded != NULL)
    return test_util_plan (g, mesh_text, NULL, policy, NULL);
  test_util_assert_error (error, PLANNER_ERROR_UNKNOWN_AXIS, "named tp or mp");
  g_auto (GStrv) pins = pin_texts (with);
  PlannerPlan *plan = test_util_plan (g, mesh_text, NULL, NULL, (const char *const *)pins);
  planner_plan_set_policy (plan, policy);
  return plan;
}

typedef struct
{
  const ModelCase *model;
  const char *policy;
} PlanCase;

static void
test_plans (gconstpointer data)
{
  const PlanCase *c = data;
  g_autoptr (PlannerGraph) g = model_of (c->model);
  for (guint i = 0; i < G_N_ELEMENTS (mesh_pairs); i++)
    {
      const char *with_text = mesh_pairs[i][0], *without_text = mesh_pairs[i][1];
      g_autoptr (PlannerPlan) with = test_util_plan (g, with_text, NULL, c->policy, NULL);
      g_autoptr (PlannerPlan) without = reference_plan (g, without_text, c->policy, with);
      g_autofree char *what = g_strdup_printf ("%s, %s: %s against %s", c->model->name, c->policy,
                                               with_text, without_text);
      g_test_message ("%s: %u redistributions, step %.6g s", what,
                      planner_plan_get_totals (with)->n_redistributions,
                      planner_plan_get_totals (with)->step_time_s);
      g_autofree char *a = plan_text (with, FALSE);
      g_autofree char *b = plan_text (without, FALSE);
      assert_same_text (what, a, b);
      for (guint f = 0; f < 3; f++)
        {
          static const char *const formats[] = { "dtensor", "mindspore", "csv" };
          g_autofree char *ea = export_text (with, formats[f]);
          g_autofree char *eb = export_text (without, formats[f]);
          g_autofree char *fw = g_strdup_printf ("%s, export %s", what, formats[f]);
          assert_same_text (fw, ea, eb);
        }
      /* Nothing the plan holds names a size-1 axis. */
      guint32 unit = planner_mesh_unit_axes (planner_plan_get_mesh (with));
      for (guint op = 0; op < planner_graph_get_n_ops (g); op++)
        {
          const PlannerStrategy *s = &planner_plan_get_op (with, op)->strategy;
          g_assert_cmphex (planner_strategy_axis_mask (s) & unit, ==, 0);
          g_assert_cmphex (s->partial & unit, ==, 0);
        }
      for (guint r = 0; r < planner_plan_get_n_redistributions (with); r++)
        {
          const PlannerRedistribution *rd = planner_plan_get_redistribution (with, r);
          for (guint k = 0; k < rd->n_steps; k++)
            g_assert_false (unit & (1u << rd->steps[k].axis));
        }
    }
}

/* One device under every policy: nothing is split, nothing moves, the weights are whole on it,
 * and the plan is that of the one-axis mesh mp=1. */
static void
test_all_size1 (gconstpointer data)
{
  const PlanCase *c = data;
  g_autoptr (PlannerGraph) g = model_of (c->model);
  g_autoptr (PlannerPlan) plan = test_util_plan (g, "dp=1,mp=1", NULL, c->policy, NULL);
  g_autoptr (PlannerPlan) one = test_util_plan (g, "mp=1", NULL, c->policy, NULL);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);

  g_assert_cmpuint (t->n_redistributions, ==, 0);
  g_assert_cmpuint (t->comm_bytes, ==, 0);
  g_assert_cmpfloat (t->comm_time_s, ==, 0);
  g_assert_cmpfloat (t->backward_comm_time_s, ==, 0);
  g_assert_cmpfloat (t->grad_sync_time_s, ==, 0);
  g_assert_cmpuint (t->param_bytes_per_device, ==, planner_graph_get_parameter_bytes (g));
  for (guint op = 0; op < planner_graph_get_n_ops (g); op++)
    {
      const PlannerStrategy *s = &planner_plan_get_op (plan, op)->strategy;
      g_assert_cmphex (planner_strategy_axis_mask (s), ==, 0);
      g_assert_cmphex (s->partial, ==, 0);
    }
  for (guint i = 0; i < planner_graph_get_n_tensors (g); i++)
    {
      const PlannerLayout *l = planner_plan_get_tensor_layout (plan, i);
      g_assert_cmphex (planner_layout_split_mask (l) | l->partial, ==, 0);
    }
  g_autofree char *a = plan_text (plan, FALSE);
  g_autofree char *b = plan_text (one, FALSE);
  assert_same_text ("dp=1,mp=1 against mp=1", a, b);
}

/* Hand-worked figures (costs.md, h100-sxm: NVLink 370 GB/s, 2.5 us per step): gpt2-tiny
 * (hidden 64, batch 8, sequence 128, f32) under megatron on dp=1,mp=2 reduces the partial
 * sums of the vocab-parallel embedding and of the two row-parallel projections of each of the
 * two layers: 5 AllReduces over mp of the whole [8,128,64] activation, n = 262144 bytes,
 * each on NCCL's LL protocol (below); and the weights of 141,056 parameters (wte 512x64, wpe
 * 128x64, per layer 2x128 norm + 64x192+192 + 64x64+64 + 64x256+256 + 256x64+64, ln_f 128),
 * f32, the tied lm_head counted once, are whole on each device under dp=2,mp=1. */
static void
test_hand_figures (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("gpt2-tiny", NULL);
  g_autoptr (PlannerPlan) tp = test_util_plan (g, "dp=1,mp=2", NULL, "megatron", NULL);
  const PlannerPlanTotals *t = planner_plan_get_totals (tp);
  g_assert_cmpuint (t->n_redistributions, ==, 5);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_REDUCE], ==, 5);
  g_assert_cmpuint (t->coll_bytes[PLANNER_STEP_ALL_REDUCE], ==, 5 * 262144);
  /* Each on NCCL's LL, the fastest at 256 KiB: 6.6 + 2 x 0.6 us + 262144 / 141e9 = 9.659149 us
   * (the Simple ring: 8.4 + 2 x 3.4 + 262144 / 370e9 = 15.90849 us). */
  g_assert_cmpfloat_with_epsilon (t->comm_time_s, 5 * ((6.6 + 2 * 0.6) * 1e-6 + 262144.0 / 141e9),
                                  1e-15);
  /* Everything over mp, nothing over dp. */
  g_assert_cmpuint (t->axis_bytes[0], ==, 0);
  g_assert_cmpuint (t->axis_bytes[1], ==, 5 * 262144);

  g_autoptr (PlannerPlan) dp = test_util_plan (g, "dp=2,mp=1", NULL, "megatron", NULL);
  t = planner_plan_get_totals (dp);
  g_assert_cmpuint (t->n_redistributions, ==, 0);
  g_assert_cmpuint (t->param_bytes_per_device, ==, 141056 * 4);
  g_assert_cmpuint (t->axis_bytes[1], ==, 0);
  g_assert_cmpfloat (t->axis_time_s[1], ==, 0);
}

/* The issue's commands, through the library as the CLI runs them: each used to fail with
 * "arrives as [dp,_,_] partial(mp) but [dp,_,_] is required". */
static void
test_issue_commands (void)
{
  static const struct
  {
    const char *model;
    gint64 layers, batch;
    const char *with, *without, *policy;
  } cases[] = {
    { "llama-tiny", 0, 0, "dp=2,mp=1", "dp=2", "megatron" },
    { "gpt2-tiny", 0, 0, "dp=1,mp=2", "mp=2", "megatron" },
    { "llama", 2, 0, "dp=1,mp=4", "mp=4", "megatron-sp" },
    { "llama", 2, 1, "dp=1,mp=8", "mp=8", "megatron" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      PlannerModelOptions o;
      planner_model_options_init (&o);
      o.layers = cases[i].layers;
      o.batch = cases[i].batch;
      /* Shorter than the default for llama (the sizes do not matter, their divisibility
       * does); gpt2-tiny keeps its 128 positions. */
      o.seq = cases[i].layers ? 256 : 0;
      g_autoptr (PlannerGraph) g = test_util_model (cases[i].model, &o);
      g_autoptr (PlannerPlan) with = test_util_plan (g, cases[i].with, NULL, cases[i].policy, NULL);
      g_autoptr (PlannerPlan) without = reference_plan (g, cases[i].without, cases[i].policy, with);
      g_autofree char *a = plan_text (with, FALSE);
      g_autofree char *b = plan_text (without, FALSE);
      assert_same_text (cases[i].with, a, b);
    }
}

/* User pins that name a size-1 axis are accepted and mean the same as without it. */
static void
test_pins_naming_size1 (void)
{
  g_autoptr (PlannerGraph) g = test_util_model ("llama-tiny", NULL);
  const char *const with_pins[] = {
    "model.layers.*.self_attn.q_proj=[dp,_,_],[mp,_]",
    "model.layers.*.mlp.down_proj=[dp,_,mp],[_,mp]->[dp,mp,_]",
    "model.norm=[dp+mp,_,_]",
    NULL,
  };
  const char *const without_pins[] = {
    "model.layers.*.self_attn.q_proj=[_,_,_],[mp,_]",
    "model.layers.*.mlp.down_proj=[_,_,mp],[_,mp]->[_,mp,_]",
    "model.norm=[mp,_,_]",
    NULL,
  };
  g_autoptr (PlannerPlan) with = test_util_plan (g, "dp=1,mp=2", NULL, NULL, with_pins);
  g_autoptr (PlannerPlan) without = test_util_plan (g, "mp=2", NULL, NULL, without_pins);
  g_autofree char *a = plan_text (with, TRUE);
  g_autofree char *b = plan_text (without, TRUE);
  assert_same_text ("pins naming dp=1", a, b);
  /* The pins keep the user's words. */
  const GPtrArray *kept = planner_plan_get_pins (with);
  for (guint i = 0; with_pins[i]; i++)
    {
      gboolean found = FALSE;
      for (guint k = 0; k < kept->len; k++)
        found |= g_str_equal (g_ptr_array_index (kept, k), with_pins[i]);
      g_assert_true (found);
    }

  /* The plan file of such a mesh reads back equal. */
  g_autofree char *json = planner_plan_to_json (with);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) back = planner_plan_from_json (json, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (with, back));
}

/* A hand-written plan file may name the axis in a strategy and in its layouts: it reads as
 * the canonical plan. */
static void
test_plan_file_naming_size1 (void)
{
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=1,mp=2", "megatron", NULL);
  g_autofree char *json = planner_plan_to_json (plan);
  const char *op = strstr (json, "\"name\": \"transformer.h.0.ln_1\"");
  g_assert_nonnull (op);
  const char *in = strstr (op, "\"inputs\": \"[_,_,_],[_],[_]\"");
  const char *factors = strstr (op, "\"factors\": {}");
  g_assert_true (in != NULL && factors != NULL && in < factors);
  g_autoptr (GString) edited = g_string_new_len (json, in - json);
  g_string_append (edited, "\"inputs\": \"[dp,_,_],[_],[_]\"");
  g_string_append_len (edited, in + strlen ("\"inputs\": \"[_,_,_],[_],[_]\""),
                       factors - in - strlen ("\"inputs\": \"[_,_,_],[_],[_]\""));
  g_string_append (edited, "\"factors\": {\"d0\": [\"dp\"]}");
  g_string_append (edited, factors + strlen ("\"factors\": {}"));

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) back = planner_plan_from_json (edited->str, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, back));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/size1/layout-text", test_layout_text);
  g_test_add_func ("/planner/size1/redistribute", test_redistribute_equivalence);
  g_test_add_func ("/planner/size1/strategies", test_strategies);
  g_test_add_func ("/planner/size1/strategy-from-layouts", test_strategy_from_layouts);
  g_test_add_func ("/planner/size1/hand-figures", test_hand_figures);
  g_test_add_func ("/planner/size1/issue-commands", test_issue_commands);
  g_test_add_func ("/planner/size1/pins", test_pins_naming_size1);
  g_test_add_func ("/planner/size1/plan-file", test_plan_file_naming_size1);
  static PlanCase cases[G_N_ELEMENTS (models) * G_N_ELEMENTS (policies)];
  guint n = 0;
  for (guint m = 0; m < G_N_ELEMENTS (models); m++)
    for (guint p = 0; p < G_N_ELEMENTS (policies); p++)
      {
        cases[n] = (PlanCase){ &models[m], policies[p] };
        g_autofree char *name = g_strdup_printf ("%s/%s", models[m].name, policies[p]);
        test_util_add_named ("/planner/size1/plans", name, &cases[n], test_plans);
        test_util_add_named ("/planner/size1/one-device", name, &cases[n], test_all_size1);
        n++;
      }
  return g_test_run ();
}
