#define G_LOG_DOMAIN "app-cli-graph"

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "app-cli.h"
#include "planner-cost.h"
#include "planner-error.h"
#include "planner-hardware.h"

/* shardscope-cli models | graph | strategies: what a model is, before any plan. */

static const char *
tensor_kind_name (PlannerTensorKind kind)
{
  switch (kind)
    {
    case PLANNER_TENSOR_PARAMETER:
      return "parameter";
    case PLANNER_TENSOR_INPUT:
      return "input";
    case PLANNER_TENSOR_ACTIVATION:
    default:
      return "activation";
    }
}

static const char *
factor_kind_name (PlannerFactorKind kind)
{
  switch (kind)
    {
    case PLANNER_FACTOR_REDUCTION:
      return "reduction";
    case PLANNER_FACTOR_NEED_REPLICATION:
      return "need-replication";
    case PLANNER_FACTOR_PASS:
    default:
      return "pass";
    }
}

/* "[8,1024,768] f32" */
static char *
describe_tensor (const PlannerTensor *t)
{
  g_autofree char *shape = app_cli_format_shape (t->shape, t->rank);
  return g_strdup_printf ("%s %s", shape, planner_dtype_to_string (t->dtype));
}

static void
json_add_tensor (JsonBuilder *b, const PlannerTensor *t)
{
  json_builder_begin_object (b);
  app_cli_json_add_string (b, "name", t->name);
  app_cli_json_add_string (b, "kind", tensor_kind_name (t->kind));
  app_cli_json_add_shape (b, "shape", t->shape, t->rank);
  app_cli_json_add_string (b, "dtype", planner_dtype_to_string (t->dtype));
  json_builder_end_object (b);
}

/* @member: an array of the tensors @ids of @graph. */
static void
json_add_tensors (JsonBuilder *b, const char *member, PlannerGraph *graph, const guint *ids,
                  guint n)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    json_add_tensor (b, planner_graph_get_tensor (graph, ids[i]));
  json_builder_end_array (b);
}

/* ---- models ---- */

/* planner_zoo_describe() starts with "NAME: "; the name has its own column or member. */
static char *
zoo_description (const char *name)
{
  g_autofree char *description = planner_zoo_describe (name);
  const char *rest = description ? description : "";
  if (g_str_has_prefix (rest, name) && rest[strlen (name)] == ':')
    rest += strlen (name) + 1;
  return g_strstrip (g_strdup (rest));
}

int
app_cli_models (const AppCliCommand *command, int argc, char **argv)
{
  gboolean json = FALSE;
  g_autoptr (GOptionContext) context = app_cli_options_new (command, NULL, NULL, FALSE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 0, 0);
  if (status >= 0)
    return status;

  const char *const *names = planner_zoo_names ();
  const char *const *types = planner_hf_model_types ();

  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "zoo");
      json_builder_begin_array (b);
      for (guint i = 0; names[i]; i++)
        {
          g_autofree char *description = zoo_description (names[i]);
          json_builder_begin_object (b);
          app_cli_json_add_string (b, "name", names[i]);
          app_cli_json_add_string (b, "description", description);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
      json_builder_set_member_name (b, "hf_model_types");
      json_builder_begin_array (b);
      for (guint i = 0; types[i]; i++)
        json_builder_add_string_value (b, types[i]);
      json_builder_end_array (b);
      json_builder_end_object (b);
      app_cli_json_print_builder (b);
      return APP_CLI_EXIT_OK;
    }

  printf ("Zoo models (use the name as MODEL):\n");
  for (guint i = 0; names[i]; i++)
    {
      g_autofree char *description = zoo_description (names[i]);
      printf ("  %-12s %s\n", names[i], description);
    }
  g_autofree char *joined = g_strjoinv (", ", (char **)types);
  printf ("\nHugging Face config.json files with model_type: %s\n"
          "Graph JSON files (\"shardscope_graph\") are read as well.\n",
          joined);
  return APP_CLI_EXIT_OK;
}

/* ---- graph ---- */

static void
print_op_list (PlannerGraph *graph)
{
  guint n_ops = planner_graph_get_n_ops (graph);
  int name_width = 2, type_width = 4, index_width = 1;

  for (guint n = n_ops; n >= 10; n /= 10)
    index_width++;
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      name_width = MAX (name_width, (int)strlen (op->name));
      type_width = MAX (type_width, (int)strlen (planner_op_type_to_string (op->type)));
    }
  printf ("%*s  %-*s  %-*s  %s\n", index_width, "#", name_width, "op", type_width, "type",
          "inputs -> outputs");
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      g_autoptr (GString) io = g_string_new (NULL);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          g_autofree char *t = describe_tensor (planner_graph_get_tensor (graph, op->inputs[k]));
          g_string_append_printf (io, "%s%s", k ? ", " : "", t);
        }
      g_string_append (io, " -> ");
      for (guint k = 0; k < op->n_outputs; k++)
        {
          g_autofree char *t = describe_tensor (planner_graph_get_tensor (graph, op->outputs[k]));
          g_string_append_printf (io, "%s%s", k ? ", " : "", t);
        }
      printf ("%*u  %-*s  %-*s  %s\n", index_width, i, name_width, op->name, type_width,
              planner_op_type_to_string (op->type), io->str);
    }
}

static void
json_add_op_list (JsonBuilder *b, PlannerGraph *graph)
{
  json_builder_set_member_name (b, "op_list");
  json_builder_begin_array (b);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      json_builder_begin_object (b);
      app_cli_json_add_int (b, "index", i);
      app_cli_json_add_string (b, "name", op->name);
      app_cli_json_add_string (b, "type", planner_op_type_to_string (op->type));
      app_cli_json_add_number (b, "flops", op->rule.flops);
      json_add_tensors (b, "inputs", graph, op->inputs, op->n_inputs);
      json_add_tensors (b, "outputs", graph, op->outputs, op->n_outputs);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

int
app_cli_graph (const AppCliCommand *command, int argc, char **argv)
{
  gboolean json = FALSE, ops = FALSE;
  g_auto (AppCliModelArgs) model_args = { 0 };
  const GOptionEntry entries[] = {
    { "ops", 0, 0, G_OPTION_ARG_NONE, &ops,
      "List every op with its type and input and output shapes", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context
      = app_cli_options_new (command, entries, &model_args, FALSE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 1, 1);
  if (status >= 0)
    return status;

  g_autoptr (PlannerGraph) graph = app_cli_load_model (command, argv[1], &model_args, &status);
  if (graph == NULL)
    return status;

  guint n_ops = planner_graph_get_n_ops (graph), n_tensors = planner_graph_get_n_tensors (graph);
  guint per_kind[3] = { 0 };
  guint per_type[PLANNER_N_OP_TYPES] = { 0 };
  for (guint i = 0; i < n_tensors; i++)
    per_kind[planner_graph_get_tensor (graph, i)->kind]++;
  for (guint i = 0; i < n_ops; i++)
    per_type[planner_graph_get_op (graph, i)->type]++;
  guint64 params = planner_graph_get_parameter_count (graph);
  guint64 param_bytes = planner_graph_get_parameter_bytes (graph);
  double flops = planner_graph_get_flops (graph);
  const GArray *outputs = planner_graph_get_outputs (graph);

  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      app_cli_json_add_string (b, "name", planner_graph_get_name (graph));
      app_cli_json_add_string (b, "source", planner_graph_get_source (graph));
      app_cli_json_add_int (b, "ops", n_ops);
      app_cli_json_add_int (b, "tensors", n_tensors);
      app_cli_json_add_int (b, "parameters", (gint64)params);
      app_cli_json_add_int (b, "parameter_bytes", (gint64)param_bytes);
      app_cli_json_add_number (b, "flops", flops);
      json_builder_set_member_name (b, "op_types");
      json_builder_begin_object (b);
      for (guint t = 0; t < PLANNER_N_OP_TYPES; t++)
        if (per_type[t])
          app_cli_json_add_int (b, planner_op_type_to_string (t), per_type[t]);
      json_builder_end_object (b);
      json_builder_set_member_name (b, "inputs");
      json_builder_begin_array (b);
      for (guint i = 0; i < n_tensors; i++)
        if (planner_graph_get_tensor (graph, i)->kind == PLANNER_TENSOR_INPUT)
          json_add_tensor (b, planner_graph_get_tensor (graph, i));
      json_builder_end_array (b);
      json_add_tensors (b, "outputs", graph, (const guint *)outputs->data, outputs->len);
      if (ops)
        json_add_op_list (b, graph);
      json_builder_end_object (b);
      app_cli_json_print_builder (b);
      return APP_CLI_EXIT_OK;
    }

  g_autofree char *params_h = app_cli_format_count (params);
  g_autofree char *bytes_h = app_cli_format_bytes (param_bytes);
  g_autofree char *flops_h = app_cli_format_flops (flops);
  printf ("model            %s\n", planner_graph_get_name (graph));
  printf ("source           %s\n", planner_graph_get_source (graph));
  printf ("ops              %u\n", n_ops);
  printf ("tensors          %u (%u inputs, %u parameters, %u activations)\n", n_tensors,
          per_kind[PLANNER_TENSOR_INPUT], per_kind[PLANNER_TENSOR_PARAMETER],
          per_kind[PLANNER_TENSOR_ACTIVATION]);
  printf ("parameters       %" G_GUINT64_FORMAT " (%s)\n", params, params_h);
  printf ("parameter bytes  %" G_GUINT64_FORMAT " (%s)\n", param_bytes, bytes_h);
  printf ("forward FLOPs    %.0f (%s)\n", flops, flops_h);
  for (guint i = 0; i < n_tensors; i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, i);
      if (t->kind != PLANNER_TENSOR_INPUT)
        continue;
      g_autofree char *d = describe_tensor (t);
      printf ("input            %s %s\n", t->name, d);
    }
  for (guint i = 0; i < outputs->len; i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, g_array_index (outputs, guint, i));
      g_autofree char *d = describe_tensor (t);
      printf ("output           %s %s\n", t->name, d);
    }
  printf ("op types        ");
  for (guint t = 0; t < PLANNER_N_OP_TYPES; t++)
    if (per_type[t])
      printf (" %s %u", planner_op_type_to_string (t), per_type[t]);
  printf ("\n");
  if (ops)
    {
      printf ("\n");
      print_op_list (graph);
    }
  return APP_CLI_EXIT_OK;
}

/* ---- strategies ---- */

/* Refuses an op name the graph lacks, suggesting ops whose names contain it. */
static void
set_unknown_op (PlannerGraph *graph, const char *name, GError **error)
{
  g_autoptr (GString) near = g_string_new (NULL);
  guint found = 0;
  for (guint i = 0; i < planner_graph_get_n_ops (graph) && found < 5; i++)
    {
      const char *op = planner_graph_get_op (graph, i)->name;
      if (strstr (op, name))
        g_string_append_printf (near, "%s%s", found++ ? ", " : "", op);
    }
  if (found)
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_OP,
                 "%s has no op named '%s'; did you mean %s%s?", planner_graph_get_name (graph),
                 name, near->str, found == 5 ? ", ..." : "");
  else
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_OP,
                 "%s has no op named '%s'; 'shardscope-cli graph MODEL --ops' lists them",
                 planner_graph_get_name (graph), name);
}

typedef struct
{
  char *layout;
  char *placements;
  guint rank;
  gint64 local[PLANNER_MAX_RANK];
} OperandView;

static void
operand_view_clear (OperandView *v)
{
  g_free (v->layout);
  g_free (v->placements);
}

/* One strategy, computed once for both output forms. */
typedef struct
{
  char *factors;
  char *pin;
  guint64 parts;
  double local_flops;
  double seconds;
  guint n_in, n_out;
  OperandView in[PLANNER_MAX_OPERANDS];
  OperandView out[PLANNER_MAX_OPERANDS];
} StrategyView;

static void
strategy_view_clear (StrategyView *v)
{
  g_free (v->factors);
  g_free (v->pin);
  for (guint i = 0; i < v->n_in; i++)
    operand_view_clear (&v->in[i]);
  for (guint i = 0; i < v->n_out; i++)
    operand_view_clear (&v->out[i]);
}

static guint64
operand_view_fill (OperandView *v, const PlannerLayout *layout, const PlannerMesh *mesh,
                   const PlannerTensor *t)
{
  guint64 n = 1;
  planner_layout_local_shape (layout, mesh, t->shape, v->local);
  v->rank = t->rank;
  for (guint d = 0; d < t->rank; d++)
    n *= (guint64)v->local[d];
  v->layout = planner_layout_to_string (layout, mesh);
  v->placements = planner_layout_to_placements (layout, mesh);
  return n * planner_dtype_size (t->dtype);
}

static void
strategy_view_fill (StrategyView *v, const PlannerStrategy *s, PlannerGraph *graph,
                    const PlannerOp *op, const PlannerMesh *mesh, const PlannerHardware *hw)
{
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  guint64 bytes = 0;

  planner_strategy_layouts (s, &op->rule, mesh, in, out);
  v->factors = planner_strategy_describe (s, &op->rule, mesh);
  v->pin = planner_strategy_to_string (s, &op->rule, mesh);
  v->parts = planner_strategy_parts (s, mesh);
  v->local_flops = planner_strategy_local_flops (s, &op->rule, mesh);
  v->n_in = op->n_inputs;
  v->n_out = op->n_outputs;
  for (guint i = 0; i < op->n_inputs; i++)
    bytes += operand_view_fill (&v->in[i], &in[i], mesh,
                                planner_graph_get_tensor (graph, op->inputs[i]));
  for (guint i = 0; i < op->n_outputs; i++)
    bytes += operand_view_fill (&v->out[i], &out[i], mesh,
                                planner_graph_get_tensor (graph, op->outputs[i]));
  PlannerDType dtype = planner_graph_get_tensor (graph, op->outputs[0])->dtype;
  v->seconds = planner_cost_compute_time (hw, dtype, v->local_flops, (double)bytes);
}

static void
json_add_operand_views (JsonBuilder *b, const char *member, const OperandView *views, guint n)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    {
      json_builder_begin_object (b);
      app_cli_json_add_string (b, "layout", views[i].layout);
      app_cli_json_add_string (b, "placements", views[i].placements);
      app_cli_json_add_shape (b, "local_shape", views[i].local, views[i].rank);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

static void
print_strategies_json (PlannerGraph *graph, const PlannerOp *op, const PlannerMesh *mesh,
                       const PlannerHardware *hw, const StrategyView *views, guint n, guint count,
                       gint64 limit)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);

  json_builder_begin_object (b);
  app_cli_json_add_string (b, "op", op->name);
  app_cli_json_add_string (b, "type", planner_op_type_to_string (op->type));
  app_cli_json_add_string (b, "mesh", mesh_text);
  app_cli_json_add_int (b, "devices", (gint64)planner_mesh_n_devices (mesh));
  app_cli_json_add_string (b, "hardware", planner_hardware_get_name (hw));
  json_add_tensors (b, "inputs", graph, op->inputs, op->n_inputs);
  json_add_tensors (b, "outputs", graph, op->outputs, op->n_outputs);
  json_builder_set_member_name (b, "factors");
  json_builder_begin_array (b);
  for (guint f = 0; f < op->rule.n_factors; f++)
    {
      const PlannerFactor *factor = &op->rule.factors[f];
      json_builder_begin_object (b);
      app_cli_json_add_string (b, "name", factor->name);
      app_cli_json_add_int (b, "size", factor->size);
      app_cli_json_add_string (b, "kind", factor_kind_name (factor->kind));
      json_builder_set_member_name (b, "splittable");
      json_builder_add_boolean_value (b, factor->splittable);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  app_cli_json_add_number (b, "flops", op->rule.flops);
  /* Every legal strategy is counted; the list holds the first @n, at most @limit (null with
   * --all). */
  app_cli_json_add_int (b, "count", count);
  json_builder_set_member_name (b, "limit");
  if (limit < 0)
    json_builder_add_null_value (b);
  else
    json_builder_add_int_value (b, limit);
  json_builder_set_member_name (b, "strategies");
  json_builder_begin_array (b);
  for (guint s = 0; s < n; s++)
    {
      const StrategyView *v = &views[s];
      json_builder_begin_object (b);
      app_cli_json_add_int (b, "index", s);
      app_cli_json_add_string (b, "factors", v->factors);
      app_cli_json_add_string (b, "pin", v->pin);
      app_cli_json_add_int (b, "parts", (gint64)v->parts);
      app_cli_json_add_number (b, "local_flops", v->local_flops);
      app_cli_json_add_number (b, "compute_seconds", v->seconds);
      json_add_operand_views (b, "inputs", v->in, v->n_in);
      json_add_operand_views (b, "outputs", v->out, v->n_out);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  app_cli_json_print_builder (b);
}

/* Widens the columns to fit the layouts and placements of @views. */
static void
fit_operand_columns (const OperandView *views, guint n, int *layout_width, int *placements_width)
{
  for (guint i = 0; i < n; i++)
    {
      *layout_width = MAX (*layout_width, (int)strlen (views[i].layout));
      *placements_width = MAX (*placements_width, (int)strlen (views[i].placements));
    }
}

static void
print_operand_rows (const char *label, const OperandView *views, guint n, int layout_width,
                    int placements_width)
{
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *local = app_cli_format_shape (views[i].local, views[i].rank);
      printf ("    %-3s %u  %-*s  %-*s  local %s\n", i ? "" : label, i, layout_width,
              views[i].layout, placements_width, views[i].placements, local);
    }
}

static void
print_strategies_text (PlannerGraph *graph, const PlannerOp *op, const PlannerMesh *mesh,
                       const PlannerHardware *hw, const StrategyView *views, guint n, guint count)
{
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);
  g_autofree char *flops_h = app_cli_format_flops (op->rule.flops);

  printf ("op        %s (%s)\n", op->name, planner_op_type_to_string (op->type));
  printf ("mesh      %s (%" G_GUINT64_FORMAT " devices)\n", mesh_text,
          planner_mesh_n_devices (mesh));
  for (guint i = 0; i < op->n_inputs; i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, op->inputs[i]);
      g_autofree char *d = describe_tensor (t);
      printf ("%-9s %u %s %s%s\n", i ? "" : "inputs", i, t->name, d,
              t->kind == PLANNER_TENSOR_PARAMETER ? " (parameter)" : "");
    }
  for (guint i = 0; i < op->n_outputs; i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, op->outputs[i]);
      g_autofree char *d = describe_tensor (t);
      printf ("%-9s %u %s %s\n", i ? "" : "outputs", i, t->name, d);
    }
  printf ("factors  ");
  for (guint f = 0; f < op->rule.n_factors; f++)
    {
      const PlannerFactor *factor = &op->rule.factors[f];
      printf ("%s %s=%" G_GINT64_FORMAT " %s%s", f ? "," : "", factor->name, factor->size,
              factor_kind_name (factor->kind),
              factor->splittable || factor->kind == PLANNER_FACTOR_NEED_REPLICATION
                  ? ""
                  : " (not splittable)");
    }
  printf ("\nFLOPs     %.0f (%s)\n", op->rule.flops, flops_h);
  if (n < count)
    printf ("\n%u legal strategies (compute time on %s); the first %u:\n", count,
            planner_hardware_get_name (hw), n);
  else
    printf ("\n%u legal strategies (compute time on %s):\n", count, planner_hardware_get_name (hw));

  int layout_width = 0, placements_width = 0;
  for (guint s = 0; s < n; s++)
    {
      fit_operand_columns (views[s].in, views[s].n_in, &layout_width, &placements_width);
      fit_operand_columns (views[s].out, views[s].n_out, &layout_width, &placements_width);
    }
  for (guint s = 0; s < n; s++)
    {
      const StrategyView *v = &views[s];
      g_autofree char *local_h = app_cli_format_flops (v->local_flops);
      g_autofree char *time_h = app_cli_format_seconds (v->seconds);
      printf ("\n#%-3u %s\n", s, v->factors);
      print_operand_rows ("in", v->in, v->n_in, layout_width, placements_width);
      print_operand_rows ("out", v->out, v->n_out, layout_width, placements_width);
      printf ("    local FLOPs %.0f (%s) on %" G_GUINT64_FORMAT " part%s, compute %s\n",
              v->local_flops, local_h, v->parts, v->parts == 1 ? "" : "s", time_h);
    }
  if (n < count)
    printf ("\n%u more not shown: --limit N shows the first N, --all every one\n", count - n);
}

/* A mesh of many axes gives an op hundreds of thousands of strategies (8 axes of 2:
 * 368,640 for a GPT-2 MLP, 200 MB of text): a page by default. */
#define STRATEGIES_DEFAULT_LIMIT 50

int
app_cli_strategies (const AppCliCommand *command, int argc, char **argv)
{
  gboolean json = FALSE, all = FALSE;
  gint64 limit = APP_CLI_UNSET;
  g_autofree char *mesh_text = NULL, *op_name = NULL, *hardware = NULL;
  g_auto (AppCliModelArgs) model_args = { 0 };
  const GOptionEntry entries[] = {
    { "mesh", 'm', 0, G_OPTION_ARG_STRING, &mesh_text, "Device mesh, major axis first", "M" },
    { "op", 0, 0, G_OPTION_ARG_STRING, &op_name, "The op, by name (see graph --ops)", "NAME" },
    { "hardware", 0, 0, G_OPTION_ARG_FILENAME, &hardware,
      "Hardware profile for compute times: a built-in name or a profile file "
      "(default " APP_CLI_DEFAULT_HARDWARE ")",
      "NAME|FILE" },
    { "limit", 0, 0, G_OPTION_ARG_INT64, &limit,
      "Show the first N strategies (default " G_STRINGIFY (STRATEGIES_DEFAULT_LIMIT) ")", "N" },
    { "all", 0, 0, G_OPTION_ARG_NONE, &all, "Show every strategy, however many", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context
      = app_cli_options_new (command, entries, &model_args, FALSE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 1, 1);
  if (status >= 0)
    return status;
  if (all && limit != APP_CLI_UNSET)
    return app_cli_usage_error (command, "give --limit N or --all, not both");
  if (limit == APP_CLI_UNSET)
    limit = STRATEGIES_DEFAULT_LIMIT;
  else if ((status = app_cli_check_int (command, "--limit", limit, 1, G_MAXUINT)) >= 0)
    return status;
  if (mesh_text == NULL)
    return app_cli_usage_error (command, "missing --mesh M (e.g. --mesh dp=2,mp=4)");
  if (op_name == NULL)
    return app_cli_usage_error (command, "missing --op NAME");

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &error);
  if (mesh == NULL)
    return app_cli_refuse (error);
  g_autoptr (PlannerHardware) hw
      = planner_hardware_lookup (hardware ? hardware : APP_CLI_DEFAULT_HARDWARE, &error);
  if (hw == NULL)
    return app_cli_refuse (error);
  g_autoptr (PlannerGraph) graph = app_cli_load_model (command, argv[1], &model_args, &status);
  if (graph == NULL)
    return status;
  int index = planner_graph_find_op (graph, op_name);
  if (index < 0)
    {
      set_unknown_op (graph, op_name, &error);
      return app_cli_refuse (error);
    }

  const PlannerOp *op = planner_graph_get_op (graph, (guint)index);
  g_autoptr (GArray) strategies = planner_op_rule_enumerate (&op->rule, mesh);
  guint count = strategies->len;
  guint n = all ? count : (guint)MIN ((gint64)count, limit);
  StrategyView *views = g_new0 (StrategyView, MAX (n, 1));
  for (guint s = 0; s < n; s++)
    strategy_view_fill (&views[s], &g_array_index (strategies, PlannerStrategy, s), graph, op, mesh,
                        hw);
  if (json)
    print_strategies_json (graph, op, mesh, hw, views, n, count, all ? -1 : limit);
  else
    print_strategies_text (graph, op, mesh, hw, views, n, count);
  for (guint s = 0; s < n; s++)
    strategy_view_clear (&views[s]);
  g_free (views);
  return APP_CLI_EXIT_OK;
}
