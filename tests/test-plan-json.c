#define G_LOG_DOMAIN "test-plan-json"

#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-json.h"
#include "planner-model.h"
#include "planner-plan-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

/* Saved and read back: equal field for field, and written again, the same text. */
static PlannerPlan *
assert_roundtrip (PlannerPlan *plan)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = planner_plan_to_json (plan);
  g_assert_true (g_str_has_prefix (text, "{\n  \"shardscope_plan\": 1,\n"));
  PlannerPlan *loaded = planner_plan_from_json (text, &error);
  g_assert_no_error (error);
  g_assert_nonnull (loaded);
  g_assert_true (planner_plan_equal (plan, loaded));
  g_assert_true (planner_plan_equal (loaded, plan));
  g_assert_true (planner_graph_get_n_ops (planner_plan_get_graph (loaded))
                 == planner_graph_get_n_ops (planner_plan_get_graph (plan)));
  g_autofree char *again = planner_plan_to_json (loaded);
  g_assert_cmpstr (again, ==, text);
  return loaded;
}

typedef struct
{
  const char *model;
  const char *policy;
  guint all_reduce, reduce_scatter, all_gather;
} RoundtripCase;

static void
test_roundtrip (gconstpointer data)
{
  const RoundtripCase *c = data;
  g_autoptr (PlannerPlan) plan = test_util_model_plan (c->model, "dp=2,mp=2", c->policy, NULL);
  planner_plan_set_name (plan, "round \"trip\"\n");
  g_autoptr (PlannerPlan) loaded = assert_roundtrip (plan);

  const PlannerPlanTotals *t = planner_plan_get_totals (loaded);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_REDUCE], ==, c->all_reduce);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_REDUCE_SCATTER], ==, c->reduce_scatter);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_GATHER], ==, c->all_gather);
  g_assert_cmpstr (planner_plan_get_policy (loaded), ==, c->policy);
  g_assert_cmpstr (planner_plan_get_name (loaded), ==, "round \"trip\"\n");
  g_assert_cmpuint (planner_plan_get_n_trace_steps (loaded), >, 0);
  g_assert_cmpuint (planner_plan_get_pins (loaded)->len, >, 0);

  /* A change anywhere is seen by planner_plan_equal: the test above is not vacuous. */
  planner_plan_get_op (loaded, 3)->compute_time_s *= 2;
  g_assert_false (planner_plan_equal (plan, loaded));
}

/* User pins over the policy, one with out_strategy layouts: a producer-side
 * redistribution, conflicts between pins, and pin indices all come back. */
static void
test_roundtrip_pins (void)
{
  const char *const pins[] = {
    "model.layers.0.mlp.down_proj=[dp,_,mp],[_,mp]->[dp,mp,_]",
    NULL,
  };
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron", pins);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  int down = planner_graph_find_op (graph, "model.layers.0.mlp.down_proj");
  g_assert_cmpint (down, >=, 0);
  const PlannerOpPlan *op = planner_plan_get_op (plan, (guint)down);
  g_assert_true (op->has_out_layouts);
  g_assert_cmpint (op->decision, ==, PLANNER_DECIDED_PINNED);
  g_assert_cmpint (op->pin, >=, 0);
  g_assert_cmpuint (planner_plan_get_n_conflicts (plan), >, 0);
  g_assert_true (planner_plan_get_redistribution (plan, 0)->producer_side);

  g_autoptr (PlannerPlan) loaded = assert_roundtrip (plan);
  const PlannerOpPlan *back = planner_plan_get_op (loaded, (guint)down);
  g_assert_true (back->has_out_layouts);
  g_autofree char *out
      = planner_layout_to_string (&back->out_layouts[0], planner_plan_get_mesh (loaded));
  g_assert_cmpstr (out, ==, "[dp,mp,_]");
  g_assert_cmpstr (g_ptr_array_index (planner_plan_get_pins (loaded), back->pin), ==, pins[0]);
  g_assert_cmpstr (planner_plan_get_conflict (loaded, 0)->message, ==,
                   planner_plan_get_conflict (plan, 0)->message);
}

/* Shortest text that reads back to the same double, including those json-glib 1.6 writes
 * wrongly ("1e-05.0"). */
static void
test_numbers (void)
{
  const double values[]
      = { 1e-05, 0.1, 1.0 / 3.0, 2.5e-6, 1e-300, 5e-324, G_MAXDOUBLE, 123456789012345678.0,
          -0.5,  0,   370,       1e17 };
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_array (b);
  for (guint i = 0; i < G_N_ELEMENTS (values); i++)
    json_builder_add_double_value (b, values[i]);
  json_builder_add_double_value (b, INFINITY);
  json_builder_end_array (b);
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  g_autofree char *text = planner_json_to_string (root);
  g_assert_nonnull (strstr (text, "1e-05,"));
  g_assert_nonnull (strstr (text, "0.1,"));
  g_assert_nonnull (strstr (text, "370.0,"));
  g_assert_null (strstr (text, "e-05.0"));

  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
  g_assert_no_error (error);
  JsonArray *array = json_node_get_array (json_parser_get_root (parser));
  for (guint i = 0; i < G_N_ELEMENTS (values); i++)
    g_assert_true (json_array_get_double_element (array, i) == values[i]);
  g_assert_true (json_array_get_null_element (array, G_N_ELEMENTS (values)));
}

/* The file is written atomically and reads back equal; a missing file is an I/O error. */
static void
test_files (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("shardscope-plan-json-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree char *path = g_build_filename (dir, "plan.json", NULL);
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);

  g_assert_true (planner_plan_save_json (plan, path, &error));
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) loaded = planner_plan_load_json (path, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, loaded));
  g_autoptr (GDir) listing = g_dir_open (dir, 0, NULL);
  g_assert_cmpstr (g_dir_read_name (listing), ==, "plan.json");
  g_assert_null (g_dir_read_name (listing));

  g_autofree char *missing = g_build_filename (dir, "missing.json", NULL);
  g_assert_null (planner_plan_load_json (missing, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_IO);
  g_clear_error (&error);

  g_autofree char *nodir = g_build_filename (dir, "no", "such", "dir.json", NULL);
  g_assert_false (planner_plan_save_json (plan, nodir, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_IO);

  g_unlink (path);
  g_rmdir (dir);
}

/* A plan keeps the profile it was estimated with: changing the profile file afterwards does
 * not change the plan read back. Measured curves hold small times such as 1.5e-05 s. */
static void
test_embedded_hardware (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("shardscope-plan-json-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree char *hw_path = g_build_filename (dir, "lab.json", NULL);
  g_autofree char *plan_path = g_build_filename (dir, "plan.json", NULL);

  g_autoptr (PlannerHardware) hw = planner_hardware_lookup ("a100-sxm", &error);
  g_assert_no_error (error);
  planner_hardware_set_name (hw, "lab");
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 2, 4096,
                                    1.5e-05);
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 2, 1 << 20,
                                    3.25e-05);
  g_assert_true (planner_hardware_save_file (hw, hw_path, &error));
  g_autoptr (PlannerHardware) from_file = planner_hardware_lookup (hw_path, &error);
  g_assert_no_error (error);

  g_autoptr (PlannerGraph) graph = planner_model_load ("llama-tiny", NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=2,mp=2", from_file, "megatron", NULL);
  PlannerCostConstants constants = *planner_plan_get_constants (plan);
  constants.optimizer_states = 0.5; /* edited by the user: saved with the plan */
  planner_plan_set_constants (plan, &constants);
  g_assert_true (planner_plan_save_json (plan, plan_path, &error));

  planner_hardware_set_memory_GB (hw, 1);
  planner_hardware_clear_measurements (hw);
  g_assert_true (planner_hardware_save_file (hw, hw_path, &error));

  g_autoptr (PlannerPlan) loaded = planner_plan_load_json (plan_path, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, loaded));
  g_assert_true (planner_hardware_equal (planner_plan_get_hardware (loaded), from_file));
  g_assert_cmpfloat (planner_plan_get_constants (loaded)->optimizer_states, ==, 0.5);
  guint n_points = 0;
  const PlannerMeasuredPoint *points = planner_hardware_get_measurement (
      planner_plan_get_hardware (loaded), PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 2,
      &n_points);
  g_assert_cmpuint (n_points, ==, 2);
  g_assert_true (points[0].seconds == 1.5e-05);

  g_unlink (hw_path);
  g_unlink (plan_path);
  g_rmdir (dir);
}

/* ---- refusals ---- */

/* The node at a dotted path: "ops.3.strategy.factors" (numbers index arrays). */
static JsonNode *
node_at (JsonNode *root, const char *path)
{
  g_auto (GStrv) parts = g_strsplit (path, ".", -1);
  JsonNode *node = root;
  for (guint i = 0; parts[i] && node; i++)
    {
      if (JSON_NODE_HOLDS_ARRAY (node))
        node = json_array_get_element (json_node_get_array (node),
                                       (guint)g_ascii_strtoull (parts[i], NULL, 10));
      else
        node = json_object_get_member (json_node_get_object (node), parts[i]);
    }
  g_assert_nonnull (node);
  return node;
}

static JsonNode *
parse (const char *text)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_assert_true (json_parser_load_from_data (parser, text, -1, NULL));
  return json_node_copy (json_parser_get_root (parser));
}

static void
set_member (JsonNode *root, const char *path, const char *json_value)
{
  g_autofree char *parent = g_strdup (path);
  char *dot = strrchr (parent, '.');
  const char *name = path;
  JsonNode *container = root;
  if (dot)
    {
      *dot = '\0';
      name = dot + 1;
      container = node_at (root, parent);
    }
  if (json_value == NULL)
    {
      if (JSON_NODE_HOLDS_ARRAY (container))
        json_array_remove_element (json_node_get_array (container),
                                   (guint)g_ascii_strtoull (name, NULL, 10));
      else
        json_object_remove_member (json_node_get_object (container), name);
      return;
    }
  JsonNode *value = parse (json_value);
  if (JSON_NODE_HOLDS_OBJECT (container))
    {
      json_object_set_member (json_node_get_object (container), name, value);
      return;
    }
  JsonArray *array = json_node_get_array (container);
  guint index = (guint)g_ascii_strtoull (name, NULL, 10);
  if (index >= json_array_get_length (array))
    {
      json_array_add_element (array, value);
      return;
    }
  /* json-glib 1.6 cannot replace an element: reset the one there to the new content. */
  JsonNode *element = json_array_get_element (array, index);
  if (JSON_NODE_HOLDS_OBJECT (value))
    json_node_init_object (element, json_node_get_object (value));
  else if (JSON_NODE_HOLDS_ARRAY (value))
    json_node_init_array (element, json_node_get_array (value));
  else if (JSON_NODE_HOLDS_NULL (value))
    json_node_init_null (element);
  else
    {
      g_auto (GValue) v = G_VALUE_INIT;
      json_node_get_value (value, &v);
      g_assert_true (JSON_NODE_HOLDS_VALUE (element));
      json_node_set_value (element, &v);
    }
  json_node_free (value);
}

typedef struct
{
  const char *path;   /* dotted path to change */
  const char *value;  /* new JSON value; NULL removes the member */
  const char *expect; /* in the message */
} BadEdit;

static const BadEdit bad_edits[] = {
  { "ops", NULL, "field 'ops' is missing" },
  { "ops.0.name", "\"nope\"", "field 'ops[0].name' is 'nope' but op 0 of the model is" },
  { "ops.1.decision", "\"guessed\"", "field 'ops[1].decision' must be pinned, propagated or" },
  { "ops.1.strategy.factors", "{\"zz\": [\"dp\"]}",
    "field 'ops[1].strategy.factors.zz' is not a factor of" },
  { "ops.1.strategy.factors", "{\"d0\": [\"xx\"]}",
    "field 'ops[1].strategy.factors.d0[0]' names no axis of the mesh: 'xx'" },
  { "ops.1.strategy.factors", "{\"d0\": [\"dp\", \"dp\"]}",
    "field 'ops[1].strategy' is refused: " },
  { "ops.1.strategy.factors", "[]", "field 'ops[1].strategy.factors' must be an object" },
  { "ops.1.trace_step", "100000", "field 'ops[1].trace_step' must be in [0, " },
  { "ops.1.pin", "\"x\"", "field 'ops[1].pin' must be an integer" },
  { "ops.0.out_layouts", "[\"[dp,_,_]\", \"[dp,_,_]\"]",
    "field 'ops[0].out_layouts' gives 2 layouts" },
  { "ops.50", NULL, "field 'ops' holds 50 ops; the model has 51" },
  { "tensors.input_ids", "\"[dp\"", "field 'tensors.input_ids' is refused: " },
  { "tensors.input_ids", "\"[dp,_,_]\"", "field 'tensors.input_ids' is refused: " },
  { "tensors.input_ids", NULL, "field 'tensors.input_ids' is missing" },
  { "redistributions.0.steps.0.kind", "\"AllGather\"",
    "field 'redistributions[0].steps[0]' AllGather on axis mp does not turn" },
  { "redistributions.0.steps.0.kind", "\"Scatter\"",
    "field 'redistributions[0].steps[0].kind' must be AllReduce, AllGather" },
  { "redistributions.0.to", "\"[_,_,_]\"",
    "field 'redistributions[0].steps' do not end at the layout of 'to'" },
  { "redistributions.0.slot", "1", "field 'redistributions[0].slot' is 1, but input 1 of" },
  { "redistributions.0.consumer", "null",
    "field 'redistributions[0].consumer' is null, which only" },
  { "redistributions.0.tensor", "\"nope\"",
    "field 'redistributions[0].tensor' names no tensor of the model: 'nope'" },
  { "trace.0.op", "\"nope\"", "field 'trace[0].op' names no op of the model: 'nope'" },
  { "trace.0.direction", "\"sideways\"",
    "field 'trace[0].direction' must be \"forward\" or \"backward\"" },
  { "conflicts.0", "{\"message\": \"x\", \"redistribution\": 999}",
    "field 'conflicts[0].redistribution' must be in [0, " },
  { "totals.collectives.AllReduce", NULL, "field 'totals.collectives.AllReduce' is missing" },
  { "totals.axes.mp.time_s", "\"fast\"", "field 'totals.axes.mp.time_s' must be a number" },
  { "hardware.memory_GB", "-1",
    "field 'hardware' is refused: hardware profile: field 'memory_GB' must be > 0" },
  { "mesh", "\"dp=2,,mp=2\"", "field 'mesh' is refused: " },
  { "mesh", "\"dp=2,tp=2\"", "field 'pins[0]' is refused: pin '" },
  { "constants.backward_factor", NULL, "field 'constants.backward_factor' is missing" },
  { "name", "3", "field 'name' must be a string or null" },
  { "pins.0", "7", "field 'pins[0]' must be a string" },
  { "model.source", "\"no-such-model\"",
    "cannot rebuild the plan's model from its source \"no-such-model\"" },
  /* Fields that were read and dropped, or not read at all, and written back as the plan
   * says: a hand edit there was silently undone. */
  { "devices", "9", "field 'devices' is 9 but the mesh dp=2,mp=2 has 4" },
  /* json-glib reads 2^64 as -1. */
  { "devices", "18446744073709551616", "field 'devices' must be in [1, 1048576], got -1" },
  { "model.name", "\"GPT\"", "field 'model.name' is \"GPT\" but the model is \"llama-tiny\"" },
  { "model.ops", "52", "field 'model' counts 52 ops and " },
  { "model.tensors", "1", " tensors but the model has 51 and " },
  { "model.layers", "2", "field 'model.layers' is not known here" },
  { "ops.1.type", "\"Softmax\"", "field 'ops[1].type' is 'Softmax' but op " },
  { "ops.1.strategy.inputs", "\"[_]\"",
    "field 'ops[1].strategy.inputs' is \"[_]\" but the factors give \"" },
  { "ops.1.strategy.outputs", "\"[_]\"", "field 'ops[1].strategy.outputs' is \"[_]\" but" },
  { "ops.1.strategy.split", "[]", "field 'ops[1].strategy.split' is not known here" },
  { "ops.1.decided", "\"pinned\"", "field 'ops[1].decided' is not known here" },
  { "redistributions.0.describe", "\"x\"",
    "field 'redistributions[0].describe' is \"x\" but the steps say \"" },
  { "redistributions.0.steps.0.cost", "1",
    "field 'redistributions[0].steps[0].cost' is not known" },
  { "trace.0.why", "\"x\"", "field 'trace[0].why' is not known here" },
  { "conflicts.0", "{\"message\": \"x\", \"redistribution\": 0, \"ops\": []}",
    "field 'conflicts[0].ops' is not known here" },
  { "hash", "\"x\"", "field 'hash' is not known here" },
  { "constants.dropout", "0", "field 'constants.dropout' is not known here" },
  /* Negative times and figures. */
  { "ops.1.compute_time_s", "-1", "field 'ops[1].compute_time_s' must be >= 0, got -1" },
  { "ops.1.flops", "-3.5", "field 'ops[1].flops' must be >= 0, got -3.5" },
  { "redistributions.0.time_s", "-0.5", "field 'redistributions[0].time_s' must be >= 0" },
  { "redistributions.0.steps.0.time_s", "-1e-6",
    "field 'redistributions[0].steps[0].time_s' must be" },
  { "trace.0.edge_cost_s", "-2", "field 'trace[0].edge_cost_s' must be >= 0" },
  { "constants.weight_copies", "-1", "field 'constants.weight_copies' must be >= 0" },
  { "propagate_ms", "-1", "field 'propagate_ms' must be >= 0, got -1" },
  { "totals.step_time_s", "-1", "field 'totals.step_time_s' must be >= 0" },
  /* Counts and byte sums that do not follow from the ops and redistributions (2^31 made
   * compare overflow an int). */
  { "totals.collectives.AllReduce.count", "2147483648",
    "field 'totals' collectives.AllReduce is 2147483648 steps of " },
  { "totals.collectives.AllReduce.bytes", "1", "collectives.AllReduce is 5 steps of 1 bytes" },
  { "totals.redistributions", "7",
    "field 'totals' count 'redistributions' is 7 but the plan has " },
  { "totals.ops", "50", "count 'ops' is 50 but the plan has 51" },
  { "totals.pinned", "0", "count 'pinned' is 0 but the plan has " },
  { "totals.comm_bytes", "1", "field 'totals' comm_bytes is 1 but the redistributions send " },
  { "totals.axes.mp.bytes", "0", "field 'totals' axes.mp.bytes is 0 but the redistributions " },
  { "totals.axes.pp", "{\"bytes\": 0, \"time_s\": 0}", "field 'totals.axes.pp' is not known" },
  { "totals.collectives.Broadcast", "{}", "field 'totals.collectives.Broadcast' is not known" },
  { "summary.step_time_us", "1", "field 'summary' does not match the plan's totals" },
  { "summary.memory_capacity_bytes", "1", "field 'summary' does not match" },
  { "summary.extra", "1", "field 'summary' does not match" },
  { "summary", NULL, "field 'summary' is missing" },
  /* Pin texts were kept unread; indices that disagree with the decision. */
  { "pins.0", "\"nope\"", "field 'pins[0]' is refused: " },
  { "trace.0.step", "5", "field 'trace[0].step' is 5 but this is step 0 of the trace" },
  { "ops.0.pin", "null", "field 'ops[0].pin' must be the index of the pin that fixed " },
  { "ops.0.decision", "\"defaulted\"", "field 'ops[0].pin' must be the index of the pin" },
  { "ops.0.trace_step", "0", "field 'ops[0].trace_step' must be the trace step that decided " },
};

static char *
small_plan_text (void)
{
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron", NULL);
  return planner_plan_to_json (plan);
}

static void
test_bad_edit (gconstpointer data)
{
  const BadEdit *edit = data;
  g_autofree char *text = small_plan_text ();
  g_autoptr (JsonNode) root = parse (text);
  g_autoptr (GError) error = NULL;

  /* The edits assume the plan's shape: its first redistribution an AllReduce over mp into
   * the first norm, and no conflicts (conflicts.0 adds one). */
  g_assert_cmpstr (json_node_get_string (node_at (root, "redistributions.0.steps.0.kind")), ==,
                   "AllReduce");
  set_member (root, edit->path, edit->value);
  g_autofree char *damaged = planner_json_to_string (root);
  g_autoptr (PlannerPlan) plan = planner_plan_from_json (damaged, &error);
  g_assert_null (plan);
  g_assert_nonnull (error);
  g_assert_true (error->domain == PLANNER_ERROR);
  if (strstr (edit->expect, "cannot rebuild") == NULL)
    g_assert_cmpint (error->code, ==, PLANNER_ERROR_MALFORMED_FILE);
  if (strstr (error->message, edit->expect) == NULL)
    g_error ("expected \"%s\" in \"%s\"", edit->expect, error->message);
}

static void
test_version (void)
{
  g_autofree char *text = small_plan_text ();
  g_autoptr (GError) error = NULL;
  static const struct
  {
    const char *value;
    const char *expect;
  } cases[] = {
    { "2", "plan JSON: format version 2 is newer than this Shardscope reads (1)" },
    { "0", "field 'shardscope_plan' must be the format version" },
    { "\"1\"", "field 'shardscope_plan' must be the format version" },
    { NULL, "not a Shardscope plan (no \"shardscope_plan\" member)" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (JsonNode) root = parse (text);
      set_member (root, "shardscope_plan", cases[i].value);
      g_autofree char *changed = planner_json_to_string (root);
      g_assert_null (planner_plan_from_json (changed, &error));
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
      if (strstr (error->message, cases[i].expect) == NULL)
        g_error ("expected \"%s\" in \"%s\"", cases[i].expect, error->message);
      g_clear_error (&error);
    }

  /* Not JSON, or JSON of something else. */
  const char *not_plans[] = { "", "{", "[1, 2]", "{\"shardscope_graph\": 1}", "null" };
  for (guint i = 0; i < G_N_ELEMENTS (not_plans); i++)
    {
      g_assert_null (planner_plan_from_json (not_plans[i], &error));
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
      g_clear_error (&error);
    }

  /* Cut anywhere: refused, never a crash or a half plan. */
  gsize len = strlen (text);
  for (gsize cut = 0; cut < len; cut += len / 97 + 1)
    {
      g_autofree char *part = g_strndup (text, cut);
      g_assert_null (planner_plan_from_json (part, &error));
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
      g_clear_error (&error);
    }
}

/* A plan made from a graph file whose model is then changed is refused, naming the source;
 * with the old graph back it loads again. A tampered hash is refused the same way. */
static void
test_model_changed (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("shardscope-plan-json-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree char *graph_path = g_build_filename (dir, "model.graph.json", NULL);
  g_autofree char *plan_path = g_build_filename (dir, "plan.json", NULL);
  PlannerModelOptions options;

  planner_model_options_init (&options);
  options.batch = 2;
  g_autoptr (PlannerGraph) original = planner_model_load ("llama-tiny", &options, &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_save_json (original, graph_path, &error));
  g_autoptr (PlannerGraph) graph = planner_model_load (graph_path, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (planner_graph_get_source (graph), ==, graph_path);
  g_autoptr (PlannerHardware) hw = planner_hardware_lookup ("h100-sxm", &error);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=2,mp=2", hw, "megatron", NULL);
  g_assert_true (planner_plan_save_json (plan, plan_path, &error));
  g_autoptr (PlannerPlan) same = planner_plan_load_json (plan_path, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, same));

  options.batch = 4;
  g_autoptr (PlannerGraph) changed = planner_model_load ("llama-tiny", &options, &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_save_json (changed, graph_path, &error));
  g_assert_null (planner_plan_load_json (plan_path, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL);
  g_assert_nonnull (strstr (error->message, "has changed since the plan was made"));
  g_assert_nonnull (strstr (error->message, graph_path));
  g_clear_error (&error);

  /* The graph at hand is checked the same way. */
  g_autofree char *text = NULL;
  g_assert_true (g_file_get_contents (plan_path, &text, NULL, NULL));
  g_assert_null (planner_plan_from_json_with_graph (text, changed, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL);
  g_clear_error (&error);
  g_autoptr (PlannerPlan) with_graph = planner_plan_from_json_with_graph (text, original, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, with_graph));

  g_autoptr (JsonNode) root = parse (text);
  set_member (root, "model.hash", "\"0123456789abcdef\"");
  g_autofree char *tampered = planner_json_to_string (root);
  g_assert_true (planner_graph_save_json (original, graph_path, &error));
  g_assert_null (planner_plan_from_json (tampered, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL);
  g_clear_error (&error);

  /* Model gone: says which source could not be rebuilt. */
  g_unlink (graph_path);
  g_assert_null (planner_plan_load_json (plan_path, &error));
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "cannot rebuild the plan's model from its source"));

  g_unlink (plan_path);
  g_rmdir (dir);
}

static void
test_summary (void)
{
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (JsonNode) summary = planner_plan_summary_to_json (plan);
  JsonObject *o = json_node_get_object (summary);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  g_assert_cmpint (json_object_get_int_member (o, "ops"), ==, t->n_ops);
  g_assert_cmpint (json_object_get_int_member (o, "pinned")
                       + json_object_get_int_member (o, "propagated")
                       + json_object_get_int_member (o, "defaulted"),
                   ==, t->n_ops);
  JsonObject *coll = json_object_get_object_member (o, "collectives");
  /* llama-tiny has 2 layers: 2 AllReduce each plus the vocab-parallel embedding's. */
  g_assert_cmpint (json_object_get_int_member (coll, "AllReduce"), ==, 5);
  g_assert_cmpint (json_object_get_int_member (coll, "AllGather"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (coll, "Slice"), ==, 0);
  g_assert_cmpfloat (json_object_get_double_member (o, "comm_time_us"), ==, t->comm_time_s * 1e6);
  g_assert_cmpint (json_object_get_int_member (o, "memory_capacity_bytes"), ==, 80000000000);
}

/* ---- what every reader of user JSON refuses before json-glib parses it ---- */

/* @n of @open, then @middle, then the closing brackets. */
static char *
nested (guint n, char open, const char *middle)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append (s, open == '[' ? "[" : "{\"a\": ");
  g_string_append (s, middle);
  for (guint i = 0; i < n; i++)
    g_string_append_c (s, open == '[' ? ']' : '}');
  return g_string_free (s, FALSE);
}

typedef GObject *(*ReadFunc) (const char *text, GError **error);

static GObject *
read_plan (const char *text, GError **error)
{
  return (GObject *)planner_plan_from_json (text, error);
}

static GObject *
read_graph (const char *text, GError **error)
{
  return (GObject *)planner_graph_from_json (text, error);
}

static GObject *
read_config (const char *text, GError **error)
{
  return (GObject *)planner_hf_import_json (text, NULL, error);
}

/* Not a GObject, but only its NULL-ness is looked at. */
static GObject *
read_hardware (const char *text, GError **error)
{
  PlannerHardware *hw = planner_hardware_from_json (text, error);
  g_assert_null (hw);
  return NULL;
}

static GObject *
read_policy (const char *text, GError **error)
{
  g_autofree char *dir = test_util_tmp_dir_new ("policy-XXXXXX");
  g_autofree char *path = g_build_filename (dir, "policy.json", NULL);
  g_autoptr (PlannerGraph) graph = test_util_model ("gpt2-tiny", NULL);
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2");
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  GPtrArray *pins = planner_policy_expand (path, graph, mesh, NULL, error);
  test_util_tmp_dir_remove (dir);
  g_assert_null (pins);
  return NULL;
}

static void
test_json_limits (void)
{
  static const struct
  {
    const char *name;
    ReadFunc read;
  } readers[] = {
    { "plan", read_plan },         { "graph", read_graph },   { "config", read_config },
    { "hardware", read_hardware }, { "policy", read_policy },
  };
  /* 100,000 levels overflowed json-glib's recursive parser (a crash, not a refusal). */
  g_autofree char *deep_arrays = nested (100000, '[', "1");
  g_autofree char *deep_objects = nested (100000, '{', "1");
  g_autofree char *just_too_deep = nested (PLANNER_JSON_MAX_DEPTH + 1, '[', "1");
  const struct
  {
    const char *text;
    const char *fragment;
  } documents[] = {
    { deep_arrays, ":1:513: nested more than 512 levels deep" },
    { deep_objects, ":1:3073: nested more than 512 levels deep" },
    { just_too_deep, "nested more than 512 levels deep" },
    /* json-glib reads only the first of two objects. */
    { "{\"shardscope_plan\": 1}\n{\"model_type\": \"gpt2\"}", ":2:1: more text after the end" },
    { "{}{}", ":1:3: more text after the end of the JSON value" },
    /* json-glib reads 2^64 as -1 and 2^63 as -2^63. */
    { "{\"n_layer\": 18446744073709551616}",
      "the integer 18446744073709551616 is out of range; integers here are between "
      "-9223372036854775808 and 9223372036854775807" },
    { "{\"x\": [9223372036854775808]}", "the integer 9223372036854775808 is out of range" },
    { "{\"x\": -9223372036854775809}", "the integer -9223372036854775809 is out of range" },
    /* ... and 1e400 as inf. */
    { "{\"memory_GB\": 1e400}", "the number 1e400 is out of range" },
    { "{\"memory_GB\": -1.5E+309}", "the number -1.5E+309 is out of range" },
    /* json-glib keeps the last of two members of one name. */
    { "{\"a\": 1, \"b\": {\"a\": 2, \"a\": 3}}",
      ":1:24: the member \"a\" appears twice in one object; keep one" },
    { "{\"memory_GB\": 80,\n \"memory_GB\": 1}", ":2:2: the member \"memory_GB\" appears twice" },
  };

  for (guint d = 0; d < G_N_ELEMENTS (documents); d++)
    for (guint i = 0; i < G_N_ELEMENTS (readers); i++)
      {
        g_autoptr (GError) error = NULL;
        g_autoptr (GObject) object = readers[i].read (documents[d].text, &error);
        g_test_message ("%s reader, document %u: %s", readers[i].name, d,
                        error ? error->message : "(accepted)");
        g_assert_null (object);
        test_util_assert_error (error, PLANNER_ERROR_MALFORMED_FILE, documents[d].fragment);
      }

  /* At the limit, and with brackets, numbers and a second "value" inside strings, the text
   * parses: only the structure counts. */
  g_autofree char *at_limit
      = nested (PLANNER_JSON_MAX_DEPTH, '[', "\"[[{{ 1e999 } 99999999999999999999\"");
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) root = planner_json_parse (at_limit, -1, "test", &error);
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_ARRAY (root));
  /* One name in sibling and nested objects, and names that differ only by an escape, are
   * no repeats. */
  g_autoptr (JsonNode) names = planner_json_parse (
      "{\"a\": {\"a\": [{\"a\": 1}, {\"a\": 2}]}, \"x\\\"\": 1, \"x\\\\\": 2, \"b\": \"a\", \"c\": "
      "\"a\"}",
      -1, "test", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (json_object_get_size (json_node_get_object (names)), ==, 5);
  g_autoptr (JsonNode) edge = planner_json_parse (
      "{\"a\": \"\\\"}{\", \"b\": [-9223372036854775808, 9223372036854775807, "
      "1.7e308]}\n\n",
      -1, "test", &error);
  g_assert_no_error (error);
  JsonObject *o = json_node_get_object (edge);
  g_assert_cmpstr (json_object_get_string_member (o, "a"), ==, "\"}{");
  JsonArray *b = json_object_get_array_member (o, "b");
  g_assert_cmpint (json_array_get_int_element (b, 0), ==, G_MININT64);
  g_assert_cmpint (json_array_get_int_element (b, 1), ==, G_MAXINT64);
  g_assert_cmpfloat (json_array_get_double_element (b, 2), ==, 1.7e308);
}

int
main (int argc, char *argv[])
{
  static const RoundtripCase cases[] = {
    { "gpt2-tiny", "megatron", 5, 0, 0 },
    { "llama-tiny", "megatron-sp", 0, 5, 5 },
  };

  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/planner/plan-json/roundtrip/gpt2-tiny-megatron", &cases[0],
                        test_roundtrip);
  g_test_add_data_func ("/planner/plan-json/roundtrip/llama-tiny-megatron-sp", &cases[1],
                        test_roundtrip);
  g_test_add_func ("/planner/plan-json/roundtrip/pins-out-layouts", test_roundtrip_pins);
  g_test_add_func ("/planner/plan-json/numbers", test_numbers);
  g_test_add_func ("/planner/plan-json/files", test_files);
  g_test_add_func ("/planner/plan-json/embedded-hardware", test_embedded_hardware);
  g_test_add_func ("/planner/plan-json/summary", test_summary);
  g_test_add_func ("/planner/plan-json/version", test_version);
  g_test_add_func ("/planner/plan-json/model-changed", test_model_changed);
  g_test_add_func ("/planner/plan-json/json-limits", test_json_limits);
  for (guint i = 0; i < G_N_ELEMENTS (bad_edits); i++)
    {
      g_autofree char *path = g_strdup_printf ("/planner/plan-json/refused/%u", i);
      g_test_add_data_func (path, &bad_edits[i], test_bad_edit);
    }
  return g_test_run ();
}
