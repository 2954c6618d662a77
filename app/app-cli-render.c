#define G_LOG_DOMAIN "app-cli-render"

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "app-cli.h"
#include "app-file.h"
#include "graphview-layouter.h"
#include "graphview-renderer.h"
#include "planner-error.h"
#include "planner-hardware.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-request.h"

/* shardscope-cli render MODEL|PLAN --png|--svg|--pdf FILE [--expand all|none|GLOB]
 *                [--step K] [--compare PLAN]
 * A MODEL is drawn alone, or with the plan that --mesh (and --policy) propagate on the spot. */

static gboolean
is_plan_file (const char *arg)
{
  if (g_str_has_prefix (arg, "db:"))
    return TRUE; /* a plan in the store */
  if (!g_str_has_suffix (arg, ".json") || !g_file_test (arg, G_FILE_TEST_IS_REGULAR))
    return FALSE;
  g_autofree char *text = NULL;
  gsize length = 0;
  if (!g_file_get_contents (arg, &text, &length, NULL))
    return FALSE;
  /* The marker sits at the top of every plan file; look only at the head. */
  if (length > 4096)
    text[4096] = '\0';
  return strstr (text, "\"shardscope_plan\"") != NULL;
}

static PlannerPlan *
propagate (PlannerGraph *graph, const char *mesh_text, const char *policy, const char *hardware,
           GError **error)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, error);
  if (mesh == NULL)
    return NULL;
  g_autoptr (PlannerHardware) hw
      = planner_hardware_lookup (hardware ? hardware : APP_CLI_DEFAULT_HARDWARE, error);
  if (hw == NULL)
    return NULL;
  g_autoptr (PlannerRequest) request = planner_request_new ();
  planner_request_set_policy (request, policy);
  return planner_request_propagate (request, graph, mesh, hw, NULL, NULL, error);
}

typedef struct
{
  const char *path;
  GraphviewFormat format;
} Output;

int
app_cli_render (const AppCliCommand *command, int argc, char **argv)
{
  g_auto (AppCliModelArgs) model_args = { 0 };
  g_autofree char *png = NULL, *svg = NULL, *pdf = NULL, *expand = NULL, *compare = NULL;
  g_autofree char *mesh = NULL, *policy = NULL, *hardware = NULL, *title = NULL;
  gint64 step = APP_CLI_UNSET;
  double scale = 1.0;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    { "png", 0, 0, G_OPTION_ARG_FILENAME, &png, "Write a PNG image", "FILE" },
    { "svg", 0, 0, G_OPTION_ARG_FILENAME, &svg, "Write an SVG drawing", "FILE" },
    { "pdf", 0, 0, G_OPTION_ARG_FILENAME, &pdf, "Write a PDF page", "FILE" },
    { "expand", 0, 0, G_OPTION_ARG_STRING, &expand,
      "Unfold repeated blocks: all, none (default) or a glob on block or op names", "WHAT" },
    { "step", 0, 0, G_OPTION_ARG_INT64, &step,
      "Propagation overlay at trace step K: later decisions grey", "K" },
    { "compare", 0, 0, G_OPTION_ARG_FILENAME, &compare,
      "Mark the ops whose strategy differs in this plan", "PLAN" },
    { "scale", 0, 0, G_OPTION_ARG_DOUBLE, &scale, "Pixels per point (default 1)", "S" },
    { "title", 0, 0, G_OPTION_ARG_STRING, &title,
      "A title in a band of its own above the legend, as the window's pictures have", "TEXT" },
    { "mesh", 0, 0, G_OPTION_ARG_STRING, &mesh, "With a MODEL: propagate on this mesh", "M" },
    { "policy", 0, 0, G_OPTION_ARG_STRING, &policy, "With --mesh: pins from this policy",
      "NAME|FILE" },
    { "hardware", 0, 0, G_OPTION_ARG_STRING, &hardware,
      "With --mesh: hardware profile (default " APP_CLI_DEFAULT_HARDWARE ")", "NAME|FILE" },
    { NULL },
  };
  g_autoptr (GOptionContext) context
      = app_cli_options_new (command, entries, &model_args, TRUE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 1, 1);
  if (status >= 0)
    return status;

  Output outputs[3];
  guint n_outputs = 0;
  if (png)
    outputs[n_outputs++] = (Output){ png, GRAPHVIEW_FORMAT_PNG };
  if (svg)
    outputs[n_outputs++] = (Output){ svg, GRAPHVIEW_FORMAT_SVG };
  if (pdf)
    outputs[n_outputs++] = (Output){ pdf, GRAPHVIEW_FORMAT_PDF };
  if (n_outputs == 0)
    return app_cli_usage_error (command, "say where to draw: --png, --svg or --pdf FILE");
  if ((status = app_cli_check_double (command, "--scale", scale, 0, TRUE, 20)) >= 0
      || (step != APP_CLI_UNSET
          && (status = app_cli_check_int (command, "--step", step, 0, G_MAXINT)) >= 0))
    return status;
  if (policy && !mesh)
    return app_cli_usage_error (command, "--policy needs --mesh");

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  if (is_plan_file (argv[1]))
    {
      if (mesh)
        return app_cli_usage_error (command, "%s is a plan: it has its mesh already", argv[1]);
      if (app_cli_model_args_given (&model_args))
        return app_cli_usage_error (command,
                                    "%s is a plan: it has its shapes already; leave out --batch, "
                                    "--seq, --layers and --dtype",
                                    argv[1]);
      plan = app_cli_load_plan (argv[1], &error);
      if (plan == NULL)
        return app_cli_refuse (error);
      graph = g_object_ref (planner_plan_get_graph (plan));
    }
  else
    {
      graph = app_cli_load_model (command, argv[1], &model_args, &status);
      if (graph == NULL)
        return status;
      if (mesh)
        {
          plan = propagate (graph, mesh, policy, hardware, &error);
          if (plan == NULL)
            return app_cli_refuse (error);
        }
    }

  g_autoptr (PlannerPlan) other = NULL;
  if (compare)
    {
      if (plan == NULL)
        return app_cli_usage_error (command, "--compare needs a plan to compare with");
      other = app_cli_load_plan (compare, &error);
      if (other == NULL)
        return app_cli_refuse (error);
      if (planner_graph_get_n_ops (planner_plan_get_graph (other))
          != planner_graph_get_n_ops (graph))
        {
          g_set_error (&error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL,
                       "%s: a plan of another model (%u ops, this one has %u)", compare,
                       planner_graph_get_n_ops (planner_plan_get_graph (other)),
                       planner_graph_get_n_ops (graph));
          return app_cli_refuse (error);
        }
    }
  if (step == APP_CLI_UNSET)
    step = -1; /* no propagation overlay */
  else
    {
      if (plan == NULL)
        return app_cli_usage_error (command, "--step needs a plan (a PLAN file, or --mesh)");
      guint n_steps = planner_plan_get_n_trace_steps (plan);
      if (step >= n_steps)
        return app_cli_usage_error (
            command, "--step %" G_GINT64_FORMAT " is past the trace: this plan has steps 0 to %d",
            step, (int)n_steps - 1);
    }

  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  if (expand == NULL || g_str_equal (expand, "none"))
    ;
  else if (g_str_equal (expand, "all"))
    graphview_model_expand_all (model);
  else if (graphview_model_expand_matching (model, expand) == 0)
    {
      g_autoptr (GString) names = g_string_new (NULL);
      for (guint r = 0; r < graphview_model_get_n_runs (model); r++)
        {
          const GraphviewRun *run = graphview_model_get_run (model, r);
          g_string_append_printf (names, "%s%s.%u-%u", r ? ", " : "", run->prefix, run->first_label,
                                  run->first_label + run->n_blocks - 1);
        }
      g_set_error (&error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_OP,
                   "--expand '%s' matches no folded block (blocks: %s); use all, none or a "
                   "glob such as '%s'",
                   expand, names->len ? names->str : "none", "model.layers.3");
      return app_cli_refuse (error);
    }

  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  gint64 start = g_get_monotonic_time ();
  g_autoptr (GraphviewLayout) layout = graphview_layouter_layout (layouter, model, NULL, &error);
  if (layout == NULL)
    return app_cli_refuse (error);
  double layout_ms = (g_get_monotonic_time () - start) / 1e3;

  g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
  graphview_renderer_set_layout (renderer, layout);
  graphview_renderer_set_plan (renderer, plan);
  graphview_renderer_set_compare_plan (renderer, other);
  graphview_renderer_set_step (renderer, (int)step);
  graphview_renderer_set_title (renderer, title);

  g_autoptr (JsonBuilder) builder = json_builder_new ();
  json_builder_begin_object (builder);
  app_cli_json_add_int (builder, "items", graphview_model_get_n_items (model));
  app_cli_json_add_number (builder, "layout_ms", layout_ms);
  json_builder_set_member_name (builder, "files");
  json_builder_begin_array (builder);
  for (guint i = 0; i < n_outputs; i++)
    {
      GraphviewViewport vp;
      graphview_renderer_get_file_viewport (renderer, outputs[i].format, scale, &vp);
      g_autoptr (GBytes) bytes
          = graphview_renderer_render_file (renderer, outputs[i].format, scale, &error);
      if (bytes == NULL || !app_file_write_bytes (outputs[i].path, bytes, &error))
        return app_cli_refuse (error);
      static const char *const names[] = { "png", "svg", "pdf" };
      json_builder_begin_object (builder);
      app_cli_json_add_string (builder, "path", outputs[i].path);
      app_cli_json_add_string (builder, "format", names[outputs[i].format]);
      app_cli_json_add_number (builder, "width", vp.width);
      app_cli_json_add_number (builder, "height", vp.height);
      app_cli_json_add_number (builder, "scale", vp.scale);
      json_builder_end_object (builder);
      if (!json)
        printf ("%s: %s %.0f x %.0f %s, %u items\n", outputs[i].path, names[outputs[i].format],
                vp.width, vp.height, outputs[i].format == GRAPHVIEW_FORMAT_PNG ? "px" : "pt",
                graphview_model_get_n_items (model));
    }
  json_builder_end_array (builder);
  json_builder_end_object (builder);
  if (json)
    app_cli_json_print_builder (builder);
  return APP_CLI_EXIT_OK;
}
