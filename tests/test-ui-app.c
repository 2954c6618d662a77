/* test-ui-app.c: the Shardscope window in-process, under Xvfb (suite ui).
 *
 * One window goes through what a user does: the example loads, an op is selected through an
 * action, a pin changes the totals, the timeline steps, the plan is saved to a temporary
 * store (SHARDSCOPE_DB) and reopened from it, two plans are compared, every format is
 * exported, and the window is photographed (into the build folder; tools/screenshot.sh
 * points SHARDSCOPE_SCREENSHOT at docs/screenshot.png to refresh the README's). The cases
 * run in order and share the window; each asserts the state it changed.
 */
#include "config.h"

#include <glib/gstdio.h>

#include "app-application.h"
#include "app-autosave.h"
#include "app-compare-view.h"
#include "app-cost-chart.h"
#include "app-inspector.h"
#include "app-new-plan-dialog.h"
#include "graphview-layouter.h"
#include "app-sidebar.h"
#include "app-timeline.h"
#include "app-totals-bar.h"
#include "app-trial-dialog.h"
#include "executor-train.h"
#include "executor-trial.h"
#include "planner-redistribute.h"

#include <math.h>
#include "app-window.h"
#include "planner-plan-json.h"

#include "test-util.h"
#include "test-ui-util.h"

static AppApplication *app;
static AppWindow *window;
static char *tmpdir;
static gint64 saved_id;
static PlannerPlan *saved_plan;

#define EXAMPLE_OP "transformer.h.0.mlp.c_fc"



static gboolean
plan_ready (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return doc && app_document_get_plan (doc) && !app_document_get_busy (doc)
         && graphview_widget_is_ready (app_window_get_graph (window));
}

static gboolean
plan_differs (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return doc && !app_document_get_busy (doc) && app_document_get_plan (doc) != data;
}


/* Answers the question the window shows with @response, after checking its heading; for a
 * name, types @name first. */
static void
answer_in (AppWindow *w, const char *heading, const char *name, const char *response)
{
  AdwMessageDialog *prompt = app_window_get_prompt (w);
  if (prompt == NULL)
    g_error ("no question where “%s” was expected", heading);
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (prompt)));
  if (!g_str_has_prefix (adw_message_dialog_get_heading (prompt), heading))
    g_error ("the question is “%s”, not “%s”", adw_message_dialog_get_heading (prompt), heading);
  if (name)
    gtk_editable_set_text (GTK_EDITABLE (adw_message_dialog_get_extra_child (prompt)), name);
  /* As a click on the response's button: the response, and the dialog goes (which
   * adw_message_dialog_response() alone leaves open). */
  g_object_ref (prompt);
  adw_message_dialog_response (prompt, response);
  gtk_window_destroy (GTK_WINDOW (prompt));
  g_object_unref (prompt);
  /* Answered: gone, or followed by the next question (a name after Save). */
  g_assert_true (app_window_get_prompt (w) != prompt);
}

static void
answer (const char *heading, const char *name, const char *response)
{
  answer_in (window, heading, name, response);
}

static AppDocument *
doc (void)
{
  return app_window_get_document (window);
}

static PlannerPlan *
plan (void)
{
  return app_document_get_plan (doc ());
}


static void
test_start (void)
{
  app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  GtkWindow *active = gtk_application_get_active_window (GTK_APPLICATION (app));
  g_assert_true (APP_IS_WINDOW (active));
  window = APP_WINDOW (active);
  gtk_window_set_default_size (GTK_WINDOW (window), 1600, 1000);
  g_assert_nonnull (app_window_get_store (window));
  g_assert_cmpstr (planner_store_get_path (app_window_get_store (window)), ==,
                   g_getenv ("SHARDSCOPE_DB"));
}

static gboolean
filter_matches (GtkFileFilter *filter, const char *name)
{
  g_autoptr (GFileInfo) info = g_file_info_new ();
  g_file_info_set_display_name (info, name);
  return gtk_filter_match (GTK_FILTER (filter), info);
}

/* The new-plan dialog's files: config.json, graph JSON and ONNX, and a name that says so. */
static void
test_model_filter (void)
{
  g_autoptr (GtkFileFilter) filter = app_new_plan_dialog_new_model_filter ();
  g_assert_nonnull (strstr (gtk_file_filter_get_name (filter), "ONNX"));
  g_assert_nonnull (strstr (gtk_file_filter_get_name (filter), "JSON"));
  g_assert_true (filter_matches (filter, "config.json"));
  g_assert_true (filter_matches (filter, "llama-2layer.onnx"));
  g_assert_false (filter_matches (filter, "plans.db"));
}

static void
test_load_example (void)
{
  test_ui_wait_for (plan_ready, NULL, 120, "the example's plan and layout");
  g_assert_cmpstr (app_window_get_mode (window), ==, "plan");
  PlannerPlan *p = plan ();
  g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (p));
  g_assert_cmpstr (mesh, ==, "dp=2,mp=4");
  g_assert_cmpstr (app_document_get_policy (doc ()), ==, "megatron");
  g_assert_cmpstr (planner_graph_get_name (planner_plan_get_graph (p)), ==, "gpt2");
  const PlannerPlanTotals *t = planner_plan_get_totals (p);
  g_assert_cmpuint (t->n_ops, >, 100);
  /* megatron pins QKV, attention out and both MLP projections of 12 layers. */
  g_assert_cmpuint (t->n_pinned, >=, 48);
  g_assert_cmpfloat (t->step_time_s, >, 0);
  g_assert_nonnull (app_totals_bar_get_step_text (APP_TOTALS_BAR (app_window_get_part (window, "totals_bar"))));
  g_assert_cmpuint (app_cost_chart_get_n_layers (APP_COST_CHART (app_window_get_part (window, "cost_chart"))), >=, 12);
}

static gboolean
graph_selected (gpointer data)
{
  return graphview_widget_get_selected (data) >= 0;
}

static void
test_select_op (void)
{
  int op = planner_graph_find_op (planner_plan_get_graph (plan ()), EXAMPLE_OP);
  g_assert_cmpint (op, >=, 0);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-op", "s", EXAMPLE_OP));
  g_assert_cmpint (app_document_get_selected_op (doc ()), ==, op);

  /* The graph unfolds layer 0 and selects the op's node once the new layout is in. */
  GraphviewWidget *graph = app_window_get_graph (window);
  test_ui_wait_for (graph_selected, graph, 60, "the op's node to be selected");
  GraphviewModel *model = graphview_widget_get_model (graph);
  int item = graphview_widget_get_selected (graph);
  g_assert_cmpint (item, >=, 0);
  const GraphviewItem *it = graphview_model_get_item (model, item);
  g_assert_cmpint (it->kind, ==, GRAPHVIEW_ITEM_OP);
  g_assert_cmpuint (it->first_op, ==, op);

  /* The inspector lists every strategy of a MatMul on 2 axes and marks the pinned one. */
  AppInspector *inspector = APP_INSPECTOR (app_window_get_part (window, "inspector"));
  g_assert_cmpuint (app_inspector_get_n_candidates (inspector), >, 4);
  g_assert_cmpint (app_inspector_get_chosen_candidate (inspector), >=, 0);
  g_assert_nonnull (strstr (app_inspector_get_why (inspector), "megatron"));
  g_assert_cmpstr (gtk_editable_get_text (app_inspector_get_pin_entry (inspector)), ==,
                   "[dp,_,_],[_,mp],[mp]");
}

static void
test_pin (void)
{
  AppInspector *inspector = APP_INSPECTOR (app_window_get_part (window, "inspector"));
  AppTotalsBar *bar = APP_TOTALS_BAR (app_window_get_part (window, "totals_bar"));
  GtkEditable *entry = app_inspector_get_pin_entry (inspector);
  PlannerPlan *before = g_object_ref (plan ());
  PlannerPlanTotals t0 = *planner_plan_get_totals (before);
  g_autofree char *text0 = app_totals_bar_dup_text (bar);

  /* A refused pin shows its error inline and changes nothing. */
  gtk_editable_set_text (entry, "[dp,_,_],[mp,mp]");
  g_signal_emit_by_name (entry, "activate");
  g_assert_nonnull (app_inspector_get_pin_error (inspector));
  g_assert_false (app_document_get_busy (doc ()));
  g_assert_false (app_document_get_can_undo (doc ()));

  /* Data parallel only: c_fc's weight is replicated, so memory per device grows. */
  gtk_editable_set_text (entry, "[dp,_,_],[_,_]");
  g_signal_emit_by_name (entry, "activate");
  g_assert_null (app_inspector_get_pin_error (inspector));
  g_assert_true (app_document_get_busy (doc ()));
  test_ui_wait_for (plan_differs, before, 60, "the plan after the pin");
  /* A copy: the document drops this plan on undo. */
  const PlannerPlanTotals t1_copy = *planner_plan_get_totals (plan ()), *t1 = &t1_copy;
  g_assert_cmpuint (t1->memory_per_device_bytes, >, t0.memory_per_device_bytes);
  g_assert_cmpfloat (t1->step_time_s, !=, t0.step_time_s);
  g_autofree char *text1 = app_totals_bar_dup_text (bar);
  g_assert_cmpstr (text1, !=, text0);
  int op = app_document_get_selected_op (doc ());
  const PlannerOpPlan *op_plan = planner_plan_get_op (plan (), op);
  g_assert_cmpint (op_plan->decision, ==, PLANNER_DECIDED_PINNED);
  g_assert_cmpstr (app_document_get_op_pin (doc (), EXAMPLE_OP), ==, EXAMPLE_OP "=[dp,_,_],[_,_]");
  g_assert_true (app_document_get_can_undo (doc ()));
  g_assert_nonnull (strstr (app_inspector_get_why (inspector), "you"));

  /* Undo restores the policy's plan, redo the pin. */
  PlannerPlan *pinned = plan ();
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.undo", NULL));
  test_ui_wait_for (plan_differs, pinned, 60, "the plan after undo");
  g_assert_true (planner_plan_equal (plan (), before));
  g_assert_true (app_document_get_can_redo (doc ()));
  PlannerPlan *undone = plan ();
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.redo", NULL));
  test_ui_wait_for (plan_differs, undone, 60, "the plan after redo");
  g_assert_cmpuint (planner_plan_get_totals (plan ())->memory_per_device_bytes, ==,
                    t1->memory_per_device_bytes);
  g_object_unref (before);
}

static gboolean
stepped_past_one (gpointer data)
{
  return app_document_get_step (doc ()) > 1;
}

static void
test_timeline (void)
{
  AppTimeline *timeline = APP_TIMELINE (app_window_get_part (window, "timeline"));
  GraphviewRenderer *renderer = graphview_widget_get_renderer (app_window_get_graph (window));
  g_assert_cmpuint (planner_plan_get_n_trace_steps (plan ()), >, 2);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.step-first", NULL));
  g_assert_cmpint (app_document_get_step (doc ()), ==, 0);
  g_assert_true (g_str_has_prefix (app_timeline_get_description (timeline), "Step 1/"));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.step-next", NULL));
  g_assert_cmpint (app_document_get_step (doc ()), ==, 1);
  g_assert_cmpint (graphview_renderer_get_step (renderer), ==, 1);
  const PlannerTraceStep *step = planner_plan_get_trace_step (plan (), 1);
  g_assert_cmpint (graphview_renderer_get_step_state (renderer, step->op), ==,
                   GRAPHVIEW_STEP_CURRENT);
  g_assert_true (g_str_has_prefix (app_timeline_get_description (timeline), "Step 2/"));
  g_assert_nonnull (strstr (app_timeline_get_description (timeline),
                            planner_graph_get_op (planner_plan_get_graph (plan ()), step->op)->name));
  /* Playing advances on its own. */
  app_timeline_set_speed (timeline, 16);
  app_timeline_set_playing (timeline, TRUE);
  g_assert_true (app_timeline_get_playing (timeline));
  test_ui_wait_for (stepped_past_one, NULL, 20, "the timeline to play");
  app_timeline_set_playing (timeline, FALSE);
  g_assert_cmpint (app_document_get_step (doc ()), >, 1);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.step-last", NULL));
  g_assert_cmpint (app_document_get_step (doc ()), ==, -1);
  g_assert_cmpint (graphview_renderer_get_step (renderer), ==, -1);
}

static gboolean
rects_overlap (const graphene_rect_t *a, const graphene_rect_t *b)
{
  return a->origin.x < b->origin.x + b->size.width && b->origin.x < a->origin.x + a->size.width
         && a->origin.y < b->origin.y + b->size.height
         && b->origin.y < a->origin.y + a->size.height;
}

/* An item's rectangle in the graph widget's coordinates. */
static graphene_rect_t
item_rect (GraphviewWidget *graph, guint item)
{
  GraphviewLayout *layout = graphview_renderer_get_layout (graphview_widget_get_renderer (graph));
  const GraphviewRect *r = graphview_layout_get_item_rect (layout, item);
  double zoom = graphview_widget_get_zoom (graph), ox, oy;
  graphview_widget_get_origin (graph, &ox, &oy);
  return GRAPHENE_RECT_INIT ((r->x - ox) * zoom, (r->y - oy) * zoom, r->width * zoom,
                             r->height * zoom);
}

/* How many items something drawn over the graph covers. */
static guint
n_covered (GraphviewWidget *graph, const graphene_rect_t *cover)
{
  guint n = 0;
  GraphviewModel *model = graphview_widget_get_model (graph);
  for (guint i = 0; i < graphview_model_get_n_items (model); i++)
    {
      graphene_rect_t r = item_rect (graph, i);
      n += rects_overlap (&r, cover);
    }
  return n;
}

static gboolean
graph_ready (gpointer data)
{
  return graphview_widget_is_ready (app_window_get_graph (window));
}

/* Fit fits the free area: no node under the minimap, the buttons or the legend, at
 * 1280x720 as at 1600x1000. The zoom buttons and accelerators zoom by 1.25; a chart bar
 * centres the graph on its op; the inspector starts a new op at its top; the timeline plays
 * up to 512 steps a second. */
static void
test_fit_and_navigation (void)
{
  GraphviewWidget *graph = app_window_get_graph (window);
  GtkWidget *minimap = app_window_get_part (window, "minimap");
  GtkWidget *buttons = app_window_get_part (window, "graph_buttons");
  gtk_widget_set_visible (minimap, TRUE);
  g_assert_true (graphview_widget_get_show_legend (graph));
  int sizes[][2] = { { 1280, 720 }, { 1600, 1000 } };
  for (guint k = 0; k < G_N_ELEMENTS (sizes); k++)
    {
      /* A mapped window keeps its size: the new one applies when it is shown again. */
      gtk_widget_set_visible (GTK_WIDGET (window), FALSE);
      gtk_window_set_default_size (GTK_WINDOW (window), sizes[k][0], sizes[k][1]);
      gtk_window_present (GTK_WINDOW (window));
      test_ui_pump (600);
      g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-fit", NULL));
      test_ui_pump (200);
      /* Again: the legend's size is known once it was drawn. */
      g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-fit", NULL));
      test_ui_pump (200);
      graphene_rect_t covers[3];
      g_assert_true (gtk_widget_compute_bounds (minimap, GTK_WIDGET (graph), &covers[0]));
      g_assert_true (gtk_widget_compute_bounds (buttons, GTK_WIDGET (graph), &covers[1]));
      g_assert_true (graphview_widget_get_legend_rect (graph, &covers[2]));
      for (guint c = 0; c < G_N_ELEMENTS (covers); c++)
        {
          g_assert_cmpfloat (covers[c].size.width, >, 10);
          guint n = n_covered (graph, &covers[c]);
          if (n > 0)
            g_error ("at %dx%d, overlay %u covers %u nodes after Fit", sizes[k][0], sizes[k][1],
                     c, n);
        }
    }
  /* Hiding the legend gives its room back. */
  double with_legend = graphview_widget_get_fit_zoom (graph);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.show-legend", NULL));
  g_assert_false (graphview_widget_get_show_legend (graph));
  g_assert_cmpfloat (graphview_widget_get_fit_zoom (graph), >=, with_legend);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.show-legend", NULL));

  /* Zoom buttons (and Ctrl+plus / Ctrl+minus). */
  double fit = graphview_widget_get_zoom (graph);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-in", NULL));
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (graph), fit * 1.25, fit * 1e-9);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-out", NULL));
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (graph), fit, fit * 1e-9);
  g_auto (GStrv) in = gtk_application_get_accels_for_action (GTK_APPLICATION (app), "win.zoom-in");
  g_auto (GStrv) out = gtk_application_get_accels_for_action (GTK_APPLICATION (app), "win.zoom-out");
  g_assert_true (g_strv_contains ((const char *const *) in, "<Control>plus"));
  g_assert_true (g_strv_contains ((const char *const *) out, "<Control>minus"));

  /* A chart bar in the middle of the model, at a zoom where centring is possible: its op
   * lands in the middle of the free area. */
  for (guint i = 0; i < 8; i++)
    gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-in", NULL);
  AppCostChart *chart = APP_COST_CHART (app_window_get_part (window, "cost_chart"));
  guint first_op = 0;
  g_assert_nonnull (app_cost_chart_get_layer (chart, 6, &first_op, NULL, NULL));
  app_cost_chart_activate_layer (chart, 6);
  g_assert_cmpint (app_document_get_selected_op (doc ()), ==, first_op);
  test_ui_wait_for (graph_ready, NULL, 60, "the layout with layer 6 unfolded");
  test_ui_wait_for (graph_selected, graph, 60, "the op's node");
  test_ui_pump (100);
  int item = graphview_widget_get_selected (graph);
  g_assert_cmpuint (graphview_model_get_item (graphview_widget_get_model (graph), item)->first_op,
                    ==, first_op);
  graphene_rect_t r = item_rect (graph, item), free;
  graphview_widget_get_free_area (graph, &free);
  g_assert_cmpfloat (fabs (r.origin.x + r.size.width / 2 - (free.origin.x + free.size.width / 2)),
                     <, 1.5);
  g_assert_cmpfloat (fabs (r.origin.y + r.size.height / 2 - (free.origin.y + free.size.height / 2)),
                     <, 1.5);
  /* The next op is in view already, and is centred all the same. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-next-op", NULL));
  item = graphview_widget_get_selected (graph);
  g_assert_cmpuint (graphview_model_get_item (graphview_widget_get_model (graph), item)->first_op,
                    ==, first_op + 1);
  r = item_rect (graph, item);
  g_assert_cmpfloat (fabs (r.origin.y + r.size.height / 2 - (free.origin.y + free.size.height / 2)),
                     <, 1.5);

  /* The inspector starts another op at its top. */
  AppInspector *inspector = APP_INSPECTOR (app_window_get_part (window, "inspector"));
  GtkAdjustment *v = gtk_scrolled_window_get_vadjustment (app_inspector_get_scroller (inspector));
  test_ui_pump (100);
  gtk_adjustment_set_value (v, gtk_adjustment_get_upper (v));
  if (gtk_adjustment_get_upper (v) - gtk_adjustment_get_page_size (v) > 1)
    g_assert_cmpfloat (gtk_adjustment_get_value (v), >, 0);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-op", "s", EXAMPLE_OP));
  g_assert_cmpfloat (gtk_adjustment_get_value (v), ==, 0);

  /* Whole-plan speed. */
  AppTimeline *timeline = APP_TIMELINE (app_window_get_part (window, "timeline"));
  app_timeline_set_speed (timeline, 512);
  g_assert_cmpfloat (app_timeline_get_speed (timeline), ==, 512);
  app_timeline_set_speed (timeline, 4);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-fit", NULL));
  gtk_window_set_default_size (GTK_WINDOW (window), 1600, 1000);
}

static int
find_block_item (GraphviewModel *model)
{
  for (guint i = 0; i < graphview_model_get_n_items (model); i++)
    if (graphview_model_get_item (model, i)->kind == GRAPHVIEW_ITEM_BLOCK)
      return (int) i;
  return -1;
}

/* A deep model unfolds one instance at a time: a click on LLaMA-2-70B's folded 80 layers
 * unfolds one layer, layer 37 unfolds alone between two folded runs, and the window's
 * win.expand-block does the same for gpt2's layer 9. */
static void
test_one_instance (void)
{
  g_autoptr (PlannerGraph) llama = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (llama);
  const GraphviewRun *run = graphview_model_get_run (model, 0);
  g_assert_cmpuint (run->n_blocks, ==, 80);
  guint folded = graphview_model_get_n_items (model);
  int block = find_block_item (model);
  g_assert_cmpint (block, >=, 0);
  g_assert_true (graphview_model_toggle_item (model, block));
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, folded + run->ops_per_block);
  g_autofree char *rest = graphview_model_dup_item_label (model, find_block_item (model));
  g_assert_cmpstr (rest, ==, "model.layers.1-79 x79");
  graphview_model_collapse_all (model);
  g_assert_cmpuint (graphview_model_expand_matching (model, "model.layers.37"), ==, 1);
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, folded + 1 + run->ops_per_block);
  guint q = planner_graph_find_op (llama, "model.layers.37.self_attn.q_proj");
  const GraphviewItem *it = graphview_model_get_item (model, graphview_model_get_item_of_op (model, q));
  g_assert_cmpint (it->kind, ==, GRAPHVIEW_ITEM_OP);
  guint before = planner_graph_find_op (llama, "model.layers.36.self_attn.q_proj");
  guint after = planner_graph_find_op (llama, "model.layers.38.self_attn.q_proj");
  g_autofree char *a = graphview_model_dup_item_label (model, graphview_model_get_item_of_op (model, before));
  g_autofree char *b = graphview_model_dup_item_label (model, graphview_model_get_item_of_op (model, after));
  g_assert_cmpstr (a, ==, "model.layers.0-36 x37");
  g_assert_cmpstr (b, ==, "model.layers.38-79 x42");

  GraphviewModel *shown = graphview_widget_get_model (app_window_get_graph (window));
  g_assert_false (graphview_model_get_expanded (shown, 0, 9));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.expand-block", "s",
                                             "transformer.h.9"));
  g_assert_true (graphview_model_get_expanded (shown, 0, 9));
  g_assert_false (graphview_model_get_expanded (shown, 0, 8));
  g_assert_false (graphview_model_get_expanded (shown, 0, 10));
  test_ui_wait_for (graph_ready, NULL, 60, "the layout with layer 9 unfolded");
  PlannerGraph *g = planner_plan_get_graph (plan ());
  guint in9 = graphview_model_get_item_of_op (shown, planner_graph_find_op (g, "transformer.h.9.attn.c_attn"));
  guint in10 = graphview_model_get_item_of_op (shown, planner_graph_find_op (g, "transformer.h.10.attn.c_attn"));
  g_assert_cmpint (graphview_model_get_item (shown, in9)->kind, ==, GRAPHVIEW_ITEM_OP);
  g_assert_cmpint (graphview_model_get_item (shown, in10)->kind, ==, GRAPHVIEW_ITEM_BLOCK);
}

/* Pixels in @r (world) of @surface drawn at @vp whose colour is within 2/255 of @rgb. */
static guint
count_colour (cairo_surface_t *surface, const GraphviewViewport *vp, const GraphviewRect *r,
              const double rgb[3])
{
  cairo_surface_flush (surface);
  const guint8 *data = cairo_image_surface_get_data (surface);
  int stride = cairo_image_surface_get_stride (surface);
  int w = cairo_image_surface_get_width (surface), h = cairo_image_surface_get_height (surface);
  int x0 = MAX (0, (int) ((r->x - vp->x) * vp->scale) + 2);
  int x1 = MIN (w, (int) ((r->x + r->width - vp->x) * vp->scale) - 2);
  int y0 = MAX (0, (int) ((r->y - vp->y) * vp->scale) + 2);
  int y1 = MIN (h, (int) ((r->y + r->height - vp->y) * vp->scale) - 2);
  guint n = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++)
      {
        guint32 px = *(const guint32 *) (data + y * stride + 4 * x);
        int cr = (px >> 16) & 0xff, cg = (px >> 8) & 0xff, cb = px & 0xff;
        n += abs (cr - (int) (rgb[0] * 255 + 0.5)) <= 2 && abs (cg - (int) (rgb[1] * 255 + 0.5)) <= 2
             && abs (cb - (int) (rgb[2] * 255 + 0.5)) <= 2;
      }
  return n;
}

/* Zoomed out past readable text, an unfolded layer is one card with its name, not a heap of
 * tiny nodes: at 0.1 no pixel inside layer 37's frame has a MatMul node's fill, at zoom 1
 * thousands have. */
static void
test_overview (void)
{
  g_autoptr (PlannerGraph) llama = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (llama);
  g_assert_cmpuint (graphview_model_expand_matching (model, "model.layers.37"), ==, 1);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (GraphviewLayout) layout = graphview_layouter_layout (layouter, model, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
  graphview_renderer_set_layout (renderer, layout);
  g_assert_cmpuint (graphview_layout_get_n_frames (layout), ==, 1);
  const GraphviewRect *frame = &graphview_layout_get_frame (layout, 0)->rect;
  static const double matmul_fill[3] = { 0.859, 0.910, 0.984 };
  double scales[] = { 0.1, 1.0 };
  guint found[2];
  for (guint k = 0; k < 2; k++)
    {
      GraphviewViewport vp = { scales[k], frame->x - 10, frame->y - 10,
                               (frame->width + 20) * scales[k], (frame->height + 20) * scales[k] };
      cairo_surface_t *surface
          = cairo_image_surface_create (CAIRO_FORMAT_RGB24, (int) vp.width, (int) vp.height);
      cairo_t *cr = cairo_create (surface);
      cairo_set_source_rgb (cr, 1, 1, 1);
      cairo_paint (cr);
      graphview_renderer_draw_static (renderer, cr, &vp);
      cairo_destroy (cr);
      found[k] = count_colour (surface, &vp, frame, matmul_fill);
      cairo_surface_destroy (surface);
    }
  g_assert_true (graphview_renderer_is_overview (0.1));
  g_assert_false (graphview_renderer_is_overview (1.0));
  g_assert_cmpuint (found[0], ==, 0);
  g_assert_cmpuint (found[1], >, 1000);
}

static gboolean
stored (gpointer data)
{
  return app_document_get_store_id (doc ()) > 0;
}

static gboolean
sidebar_lists (gpointer data)
{
  AppSidebar *sidebar = APP_SIDEBAR (app_window_get_part (window, "sidebar"));
  GPtrArray *entries = app_sidebar_get_entries (sidebar);
  return entries && entries->len == GPOINTER_TO_UINT (data);
}

static gboolean
file_exists (gpointer data)
{
  return g_file_test (data, G_FILE_TEST_EXISTS);
}

static gboolean
file_gone (gpointer data)
{
  return !g_file_test (data, G_FILE_TEST_EXISTS);
}

static void
test_save (void)
{
  g_assert_true (app_document_get_modified (doc ()));
  /* The unsaved edits are kept beside the store while they are unsaved. */
  const char *autosave = app_window_get_autosave_path (window);
  g_autofree char *expected = g_strconcat (g_getenv ("SHARDSCOPE_DB"), ".autosave.json", NULL);
  g_assert_cmpstr (autosave, ==, expected);
  test_ui_wait_for (file_exists, (gpointer) autosave, 30, "the autosave");
  /* The first save asks for a name; Cancel saves nothing. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.save", NULL));
  answer ("Save the Plan", NULL, "cancel");
  test_ui_pump (200);
  g_assert_cmpint (app_document_get_store_id (doc ()), ==, 0);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.save", NULL));
  answer ("Save the Plan", "gpt2 data-parallel c_fc", "save");
  test_ui_wait_for (stored, NULL, 60, "the save");
  g_assert_cmpstr (app_document_get_name (doc ()), ==, "gpt2 data-parallel c_fc");
  test_ui_wait_for (file_gone, (gpointer) autosave, 30, "the autosave's removal after the save");
  saved_id = app_document_get_store_id (doc ());
  saved_plan = g_object_ref (plan ());
  g_assert_false (app_document_get_modified (doc ()));
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) entries = planner_store_list_plans (app_window_get_store (window), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (entries->len, ==, 1);
  PlannerStoreEntry *e = g_ptr_array_index (entries, 0);
  g_assert_cmpint (e->id, ==, saved_id);
  g_assert_cmpstr (e->name, ==, app_document_get_name (doc ()));
  g_assert_cmpstr (e->policy, ==, "megatron");
  test_ui_wait_for (sidebar_lists, GUINT_TO_POINTER (1), 30, "the sidebar's listing");
  g_assert_cmpuint (app_sidebar_get_n_visible (APP_SIDEBAR (app_window_get_part (window, "sidebar"))), ==, 1);
}

static gboolean
reopened (gpointer data)
{
  AppDocument *d = doc ();
  return d && d != data && app_document_get_plan (d) && app_document_get_store_id (d) == saved_id;
}

static void
test_reopen (void)
{
  AppDocument *old = g_object_ref (doc ());
  app_window_set_document (window, NULL);
  g_assert_cmpstr (app_window_get_mode (window), ==, "empty");
  app_window_open_stored (window, saved_id);
  test_ui_wait_for (reopened, old, 60, "the stored plan");
  g_assert_true (planner_plan_equal (plan (), saved_plan));
  /* The user's pin came back as the user's, apart from the policy's. */
  GPtrArray *pins = app_document_get_pins (doc ());
  g_assert_cmpuint (pins->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (pins, 0), ==, EXAMPLE_OP "=[dp,_,_],[_,_]");
  g_assert_cmpstr (app_document_get_policy (doc ()), ==, "megatron");
  g_assert_cmpstr (app_window_get_mode (window), ==, "plan");
  test_ui_wait_for (plan_ready, NULL, 60, "the layout of the reopened plan");
  g_object_unref (old);
}

static void
test_compare (void)
{
  /* Unpinning c_fc again: its butterfly effect is what compare shows. */
  PlannerPlan *before = plan ();
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-op", "s", EXAMPLE_OP));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.unpin", NULL));
  test_ui_wait_for (plan_differs, before, 60, "the plan after unpinning");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.compare", NULL));
  g_assert_cmpstr (app_window_get_mode (window), ==, "compare");
  AppCompareView *view = APP_COMPARE_VIEW (app_window_get_part (window, "compare_view"));
  const PlannerCompare *c = app_compare_view_get_compare (view);
  g_assert_nonnull (c);
  g_assert_true (c->a == saved_plan || planner_plan_equal (c->a, saved_plan));
  g_assert_true (c->b == plan ());
  int op = planner_graph_find_op (planner_plan_get_graph (plan ()), EXAMPLE_OP);
  gboolean listed = FALSE;
  for (guint i = 0; i < c->ops->len; i++)
    listed |= g_array_index (c->ops, PlannerCompareOp, i).op == (guint) op;
  g_assert_true (listed);
  g_assert_cmpuint (app_compare_view_get_n_differences (view), >=, c->ops->len);
  g_assert_cmpfloat (c->memory_per_device_bytes, <, 0);

  /* A stored plan against the current one, through the sidebar's action. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.compare-stored", "x", saved_id));
  g_assert_cmpstr (app_window_get_mode (window), ==, "compare");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.compare", NULL));
  g_assert_cmpstr (app_window_get_mode (window), ==, "plan");
}

static gboolean
new_document (gpointer data)
{
  AppDocument *d = doc ();
  return d && d != data && app_document_get_plan (d) && !app_document_get_busy (d);
}

static gboolean
window_gone (gpointer data)
{
  return !g_list_find (gtk_application_get_windows (GTK_APPLICATION (app)), data);
}

static gboolean
window_has_plan (gpointer data)
{
  AppDocument *d = app_window_get_document (data);
  return d && app_document_get_plan (d) && !app_document_get_busy (d);
}

/* Unsaved edits are never lost without a question: closing, quitting, a new plan; and what a
 * session that did not end had is offered back. */
static void
test_ask_before_discarding (void)
{
  AppDocument *edited = doc ();
  g_assert_true (app_document_get_modified (edited));
  /* Closing asks; Cancel keeps the window and the edits. */
  gtk_window_close (GTK_WINDOW (window));
  answer ("Save Changes to", NULL, "cancel");
  g_assert_true (g_list_find (gtk_application_get_windows (GTK_APPLICATION (app)), window));
  g_assert_true (doc () == edited);
  g_assert_true (app_document_get_modified (edited));
  /* Ctrl+Q asks the same, and the application stays. */
  g_action_group_activate_action (G_ACTION_GROUP (app), "quit", NULL);
  answer ("Save Changes to", NULL, "cancel");
  g_assert_true (g_list_find (gtk_application_get_windows (GTK_APPLICATION (app)), window));

  /* A crash now leaves the edits beside the store: a window on a store with such a
   * left-over offers it back, and Restore brings the edited plan back, unsaved. */
  const char *autosave = app_window_get_autosave_path (window);
  test_ui_wait_for (file_exists, (gpointer) autosave, 30, "the autosave");
  app_autosave_flush ();
  g_autofree char *contents = NULL;
  gsize length = 0;
  g_assert_true (g_file_get_contents (autosave, &contents, &length, NULL));
  g_autofree char *other_db = g_build_filename (tmpdir, "crashed.db", NULL);
  g_autofree char *left = g_strconcat (other_db, ".autosave.json", NULL);
  g_assert_true (g_file_set_contents (left, contents, length, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerStore) other = planner_store_open (other_db, &error);
  g_assert_no_error (error);
  AppWindow *second = app_window_new (GTK_APPLICATION (app));
  app_window_set_store (second, other);
  gtk_window_present (GTK_WINDOW (second));
  g_assert_true (app_window_get_offers_recovery (second));
  g_assert_false (app_window_get_offers_recovery (window));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (second), "win.restore-autosave", NULL));
  test_ui_wait_for (window_has_plan, second, 60, "the restored plan");
  AppDocument *restored = app_window_get_document (second);
  g_assert_true (app_document_get_modified (restored));
  g_assert_true (planner_plan_equal (app_document_get_plan (restored), plan ()));
  g_assert_false (planner_plan_equal (app_document_get_plan (restored), saved_plan));
  g_assert_false (app_window_get_offers_recovery (second));
  /* Closing that window asks too; Discard closes it and drops its autosave. */
  g_object_ref (second);
  gtk_window_close (GTK_WINDOW (second));
  answer_in (second, "Save Changes to", NULL, "discard");
  test_ui_wait_for (window_gone, second, 10, "the second window to close");
  g_object_unref (second);
  app_autosave_flush ();
  g_assert_false (g_file_test (left, G_FILE_TEST_EXISTS));
  g_autofree char *recovered = g_strconcat (left, ".recovered", NULL);
  g_assert_false (g_file_test (recovered, G_FILE_TEST_EXISTS));

  /* Ctrl+N, Create: Discard replaces the plan, and the edits are gone with their autosave. */
  app_window_create_plan (window, "gpt2", "dp=2,mp=4", "h100-sxm", "megatron");
  g_assert_true (doc () == edited);
  answer ("Save Changes to", NULL, "discard");
  test_ui_wait_for (new_document, edited, 120, "the new plan");
  g_assert_false (app_document_get_modified (doc ()));
  g_assert_cmpint (app_document_get_store_id (doc ()), ==, 0);
  test_ui_wait_for (file_gone, (gpointer) autosave, 30, "the autosave's removal");

  /* Save in the question saves first (naming the new plan), then goes on. */
  AppDocument *fresh = doc ();
  PlannerPlan *before = plan ();
  g_assert_true (app_document_pin (fresh, EXAMPLE_OP, "[dp,_,_],[_,_]", &error));
  test_ui_wait_for (plan_differs, before, 60, "the plan after the pin");
  app_window_create_plan (window, "gpt2", "dp=2,mp=4", "h100-sxm", "megatron");
  answer ("Save Changes to", NULL, "save");
  answer ("Save the Plan", "gpt2 saved before a new plan", "save");
  test_ui_wait_for (new_document, fresh, 120, "the plan after saving");
  g_autoptr (GPtrArray) entries = planner_store_list_plans (app_window_get_store (window), NULL);
  gboolean found = FALSE;
  for (guint i = 0; i < entries->len; i++)
    found |= g_strcmp0 (((PlannerStoreEntry *) g_ptr_array_index (entries, i))->name,
                        "gpt2 saved before a new plan")
             == 0;
  g_assert_true (found);
}

static void
export_done (GObject *source, GAsyncResult *result, gpointer data)
{
  GError **error = data;
  if (!app_window_export_finish (APP_WINDOW (source), result, error) && *error == NULL)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "failed without an error");
  g_object_set_data (source, "export-done", GINT_TO_POINTER (1));
}

static gboolean
export_finished (gpointer data)
{
  return g_object_get_data (G_OBJECT (window), "export-done") != NULL;
}

static void
test_export (void)
{
  static const struct
  {
    const char *format;
    const char *file;
    const char *contains;
  } cases[] = {
    { "json", "plan.json", "\"shardscope_plan\"" },
    { "dtensor", "plan.py", "parallelize" },
    { "mindspore", "strategy.json", "parallel_strategy_item" },
    { "mindspore-shard", "shard.py", ".shard(" },
    { "jax", "plan_jax.py", "PartitionSpec" },
    { "csv", "plan.csv", EXAMPLE_OP },
    { "svg", "plan.svg", "<svg" },
    { "pdf", "plan.pdf", "%PDF" },
    { "png", "plan.png", "PNG" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_build_filename (tmpdir, cases[i].file, NULL);
      g_autoptr (GFile) file = g_file_new_for_path (path);
      g_autoptr (GError) error = NULL;
      g_object_set_data (G_OBJECT (window), "export-done", NULL);
      app_window_export_async (window, cases[i].format, file, export_done, &error);
      test_ui_wait_for (export_finished, NULL, 60, cases[i].format);
      g_assert_no_error (error);
      g_autofree char *contents = NULL;
      gsize length = 0;
      g_assert_true (g_file_get_contents (path, &contents, &length, NULL));
      g_assert_cmpuint (length, >, 100);
      gboolean found = FALSE;
      for (gsize k = 0; k + strlen (cases[i].contains) <= length && !found; k++)
        found = memcmp (contents + k, cases[i].contains, strlen (cases[i].contains)) == 0;
      if (!found)
        g_error ("%s: %s lacks %s", cases[i].format, path, cases[i].contains);
    }
  /* The plan JSON reads back as the plan shown. */
  g_autofree char *json = g_build_filename (tmpdir, "plan.json", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) back = planner_plan_load_json (json, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (back, plan ()));
}

static gboolean
sidebar_renamed (gpointer data)
{
  AppSidebar *sidebar = APP_SIDEBAR (app_window_get_part (window, "sidebar"));
  const PlannerStoreEntry *e = app_sidebar_get_entry (sidebar, saved_id);
  return e && g_strcmp0 (e->name, "gpt2 c_fc data-parallel") == 0;
}

static void
test_chart_and_store_actions (void)
{
  AppCostChart *chart = APP_COST_CHART (app_window_get_part (window, "cost_chart"));
  guint first_op = 0;
  const char *name = app_cost_chart_get_layer (chart, 3, &first_op, NULL, NULL);
  g_assert_nonnull (name);
  app_cost_chart_activate_layer (chart, 3);
  g_assert_cmpint (app_document_get_selected_op (doc ()), ==, first_op);

  /* Rename in the store; delete hides at once and is undoable until the toast goes. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.rename-plan", "(xs)",
                                             saved_id, "gpt2 c_fc data-parallel"));
  g_autoptr (PlannerStoreEntry) e = planner_store_get_entry (app_window_get_store (window), saved_id, NULL);
  g_assert_cmpstr (e->name, ==, "gpt2 c_fc data-parallel");
  test_ui_wait_for (sidebar_renamed, NULL, 30, "the sidebar after renaming");
  AppSidebar *sidebar = APP_SIDEBAR (app_window_get_part (window, "sidebar"));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.duplicate-plan", "x", saved_id));
  /* The saved plan, the one saved before a new plan (ask-before-discarding), the copy. */
  test_ui_wait_for (sidebar_lists, GUINT_TO_POINTER (3), 60, "the duplicate");
  g_assert_cmpuint (app_sidebar_get_n_visible (sidebar), ==, 3);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.delete-plan", "x", saved_id));
  g_assert_cmpuint (app_sidebar_get_n_visible (sidebar), ==, 2);
  /* Still in the store until the toast is dismissed. */
  g_autoptr (GPtrArray) entries = planner_store_list_plans (app_window_get_store (window), NULL);
  g_assert_cmpuint (entries->len, ==, 3);

  /* Dark mode. */
  g_action_group_activate_action (G_ACTION_GROUP (app), "color-scheme", g_variant_new_string ("dark"));
  g_assert_true (adw_style_manager_get_dark (adw_style_manager_get_default ()));
  g_action_group_activate_action (G_ACTION_GROUP (app), "color-scheme", g_variant_new_string ("light"));
  g_assert_false (adw_style_manager_get_dark (adw_style_manager_get_default ()));
}

static gboolean
no_toasts (gpointer data)
{
  return app_window_get_n_toasts (window) == 0;
}

/* libadwaita 1.2 frees a toast whose show animation still runs if it is dismissed then (a
 * toast replacing another appears over 500 ms): dismissing every toast, again and again, at
 * every moment of their animations, never crashes and leaves none. */
static void
test_toasts (void)
{
  for (guint round = 0; round < 12; round++)
    {
      for (guint k = 0; k < 3; k++)
        {
          g_autofree char *text = g_strdup_printf ("toast %u.%u", round, k);
          app_window_show_toast (window, text);
        }
      g_assert_cmpuint (app_window_get_n_toasts (window), >=, 3);
      /* A first dismissal at 0..550 ms into the show animation, another 40 ms later while
       * the next one replaces it. */
      test_ui_pump (50 * round);
      app_window_dismiss_toasts (window);
      g_assert_cmpuint (app_window_get_n_toasts (window), <=, 1);
      test_ui_pump (40);
      app_window_dismiss_toasts (window);
    }
  test_ui_wait_for (no_toasts, NULL, 10, "the toasts to go");
  test_ui_pump (700);
  g_assert_cmpuint (app_window_get_n_toasts (window), ==, 0);
}

static void
test_screenshot (void)
{
  /* The README's picture: the plan with an attention projection selected. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-op", "s",
                                             "transformer.h.0.attn.c_attn"));
  test_ui_wait_for (plan_ready, NULL, 60, "the layout");
  /* The picture shows the app at rest, without the toasts of the earlier cases. */
  app_window_dismiss_toasts (window);
  test_ui_wait_for (no_toasts, NULL, 10, "the toasts to go");
  test_ui_pump (500);
  GtkWidget *widget = GTK_WIDGET (window);
  int width = gtk_widget_get_width (widget), height = gtk_widget_get_height (widget);
  g_assert_cmpint (width, >, 800);
  g_autoptr (GdkPaintable) paintable = gtk_widget_paintable_new (widget);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  g_autoptr (GskRenderNode) node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  GskRenderer *renderer = gtk_native_get_renderer (GTK_NATIVE (window));
  g_autoptr (GdkTexture) texture = gsk_renderer_render_texture (
      renderer, node, &GRAPHENE_RECT_INIT (0, 0, width, height));
  /* Never the tracked docs/screenshot.png unless asked (tools/screenshot.sh). */
  const char *out = g_getenv ("SHARDSCOPE_SCREENSHOT");
  g_autofree char *path
      = out && *out ? g_strdup (out)
                    : g_build_filename (g_getenv ("G_TEST_BUILDDIR"), "screenshot.png", NULL);
  g_assert_true (gdk_texture_save_to_png (texture, path));
  g_autoptr (GError) error = NULL;
  g_autoptr (GdkTexture) back = gdk_texture_new_from_filename (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (gdk_texture_get_width (back), ==, width);
  g_assert_cmpint (gdk_texture_get_height (back), ==, height);
  g_test_message ("wrote %s (%dx%d)", path, width, height);
}

static void
on_trial_finished (GtkWidget *dialog, gpointer result, gpointer train, gpointer data)
{
  const ExecutorTrialResult *r = result;
  *(gboolean *) data = r->passed ? 1 : 2;
}

static gboolean
flag_set (gpointer data)
{
  return *(gboolean *) data != 0;
}

static gboolean
trial_stored (gpointer data)
{
  AppSidebar *sidebar = APP_SIDEBAR (app_window_get_part (window, "sidebar"));
  const PlannerStoreEntry *e = app_sidebar_get_entry (sidebar, app_document_get_store_id (doc ()));
  return e && e->n_trial_runs == 1;
}

static gboolean
has_editable (GtkWidget *widget)
{
  if (GTK_IS_EDITABLE (widget))
    return TRUE;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    if (has_editable (c))
      return TRUE;
  return FALSE;
}

static gboolean
label_says (GtkWidget *widget, const char *text)
{
  if (GTK_IS_LABEL (widget) && g_str_equal (gtk_label_get_text (GTK_LABEL (widget)), text))
    return TRUE;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    if (label_says (c, text))
      return TRUE;
  return FALSE;
}

/* The gpt2 example (dp=2,mp=4) on a host said to have half the memory the run needs: refused
 * before anything starts, with both figures. The device count is the mesh's, shown, not
 * asked. */
static void
test_trial_refused (void)
{
  GtkWidget *dialog = app_trial_dialog_new (GTK_WINDOW (window), plan ());
  AppTrialDialog *d = APP_TRIAL_DIALOG (dialog);
  GtkWidget *devices = app_trial_dialog_get_devices_row (d);
  g_assert_false (has_editable (devices));
  g_assert_true (label_says (devices, "8"));

  ExecutorTrialMemory memory;
  g_assert_true (executor_trial_estimate_memory (plan (), &memory, NULL));
  guint64 need = executor_trial_memory_host_bytes (&memory, TRUE);
  g_assert_cmpuint (app_trial_dialog_get_memory_needed (d), ==, need);
  /* The reference alone holds every tensor whole: at least the parameters and the logits. */
  PlannerGraph *graph = planner_plan_get_graph (plan ());
  g_assert_cmpuint (need, >, 2 * planner_graph_get_parameter_bytes (graph));

  app_trial_dialog_set_memory_available (d, need / 2);
  g_assert_false (app_trial_dialog_get_can_run (d));
  g_autofree char *need_text = planner_format_bytes (need);
  g_autofree char *have_text = planner_format_bytes (need / 2);
  const char *estimate = app_trial_dialog_get_estimate (d);
  g_assert_nonnull (strstr (estimate, "Refused"));
  g_assert_nonnull (strstr (estimate, need_text));
  g_assert_nonnull (strstr (estimate, have_text));
  app_trial_dialog_start (d);
  g_assert_false (app_trial_dialog_get_running (d));
  g_assert_nonnull (strstr (app_trial_dialog_get_status (d), need_text));

  /* With room, Run is offered, with the time: the forward FLOPs over cpu-local's 50 GFLOP/s
   * f32 rate, 1 + 1 + 1 + 3 passes for the default three repeats. */
  app_trial_dialog_set_memory_available (d, need * 2);
  g_assert_true (app_trial_dialog_get_can_run (d));
  double seconds = planner_graph_get_flops (graph) * 6 / 50e9;
  g_autofree char *time_text = planner_format_time (seconds);
  g_assert_nonnull (strstr (app_trial_dialog_get_estimate (d), time_text));
  g_assert_nonnull (strstr (app_trial_dialog_get_estimate (d), "6 passes"));
  g_test_message ("%s", app_trial_dialog_get_estimate (d));
  gtk_window_destroy (GTK_WINDOW (dialog));
}

static gboolean
progress_says (gpointer data)
{
  const char *text = app_trial_dialog_get_progress_text (APP_TRIAL_DIALOG (data));
  return text && strstr (text, g_object_get_data (G_OBJECT (data), "phase"));
}

static gboolean
can_run (gpointer data)
{
  return app_trial_dialog_get_can_run (APP_TRIAL_DIALOG (data));
}

/* Cancel lets go of the run at once in every phase; the run then stops at its next check
 * and no result arrives. */
static void
cancel_in (AppTrialDialog *d, const char *phase)
{
  gboolean finished = FALSE;
  gulong id = g_signal_connect (d, "finished", G_CALLBACK (on_trial_finished), &finished);
  app_trial_dialog_start (d);
  g_assert_true (app_trial_dialog_get_running (d));
  if (phase)
    {
      g_object_set_data (G_OBJECT (d), "phase", (gpointer) phase);
      test_ui_wait_for (progress_says, d, 120, phase);
      /* The time left appears once a few percent are done. */
      if (g_str_equal (phase, "sharded"))
        {
          g_object_set_data (G_OBJECT (d), "phase", (gpointer) "left");
          test_ui_wait_for (progress_says, d, 120, "the time left");
        }
    }
  app_trial_dialog_cancel (d);
  g_assert_false (app_trial_dialog_get_running (d));
  g_assert_cmpstr (app_trial_dialog_get_status (d), ==, "Cancelled.");
  /* Run comes back once the cancelled run has let go of its memory. */
  test_ui_wait_for (can_run, d, 120, "the cancelled run to end");
  test_ui_pump (100);
  g_assert_false (finished);
  g_signal_handler_disconnect (d, id);
}

static void
test_trial_run (void)
{
  /* A small model so the CPU backend runs it in moments. */
  AppDocument *old = doc ();
  app_window_load_model (window, "gpt2-tiny", "dp=2,mp=2", "cpu-local", "megatron");
  test_ui_wait_for (plan_differs, app_document_get_plan (old), 60, "gpt2-tiny");
  test_ui_wait_for (plan_ready, NULL, 60, "gpt2-tiny's plan");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.save", NULL));
  answer ("Save the Plan", NULL, "save");
  test_ui_wait_for (stored, NULL, 60, "the save");
  GtkWidget *dialog = app_trial_dialog_new (GTK_WINDOW (window), plan ());
  AppTrialDialog *d = APP_TRIAL_DIALOG (dialog);
  gtk_window_present (GTK_WINDOW (dialog));

  /* Cancel before the first instruction (seeding, allocating), in the timed passes and in
   * the training step. */
  app_trial_dialog_set_repeat (d, 100);
  cancel_in (d, NULL);
  cancel_in (d, "sharded");
  app_trial_dialog_set_repeat (d, 0);
  app_trial_dialog_set_train (d, TRUE, FALSE);
  cancel_in (d, "Training step");

  gboolean finished = FALSE;
  g_signal_connect (dialog, "finished", G_CALLBACK (on_trial_finished), &finished);
  /* The window stores the run with the plan, as after win.trial-run. */
  app_window_connect_trial_dialog (window, dialog);
  app_trial_dialog_set_repeat (d, 1);
  app_trial_dialog_start (d);
  test_ui_wait_for (flag_set, &finished, 300, "the trial run");
  g_assert_cmpint (finished, ==, 1);
  test_ui_wait_for (trial_stored, NULL, 30, "the stored trial run");
  g_autoptr (GPtrArray) runs = planner_store_list_trial_runs (app_window_get_store (window),
                                                              app_document_get_store_id (doc ()), NULL);
  g_assert_cmpuint (runs->len, ==, 1);
  PlannerTrialRun *run = g_ptr_array_index (runs, 0);
  g_assert_cmpstr (run->backend, ==, "cpu");
  g_assert_cmpuint (run->devices, ==, 4);
  g_assert_cmpuint (run->measurements->len, >=, planner_graph_get_n_ops (planner_plan_get_graph (plan ())));

  /* The training step, sharded against unsharded: GPT-2 with 2 layers has 28 parameters
   * (wte, wpe, ln_f weight and bias, and per layer ln_1, c_attn, attn c_proj, ln_2, c_fc,
   * mlp c_proj, a weight and a bias each). The loss is the unsharded step's own. */
  const AppTrialTrain *train = app_trial_dialog_get_train (d);
  g_assert_nonnull (train);
  g_assert_true (train->passed);
  g_assert_false (train->adam);
  g_assert_cmpuint (train->n_parameters, ==, 28);
  g_assert_cmpfloat (train->grad_rel_error, <=, 1e-5);
  g_assert_cmpfloat (train->loss_rel_error, <=, 1e-5);
  g_autoptr (ExecutorTensors) sources
      = executor_trial_sources (planner_plan_get_graph (plan ()), 1, NULL, NULL);
  g_autoptr (ExecutorTensors) reference = executor_tensors_new ();
  ExecutorTrainOptions options;
  executor_train_options_init (&options);
  g_assert_true (executor_train_step_reference (planner_plan_get_graph (plan ()), sources,
                                                &options, reference, NULL));
  double loss = *(float *) executor_tensors_lookup (reference, "loss")->data;
  g_assert_cmpfloat_with_epsilon (train->loss, loss, 1e-6 * fabs (loss));
  g_assert_nonnull (strstr (app_trial_dialog_get_status (d), "Training step (sgd"));
  g_test_message ("%s", app_trial_dialog_get_status (d));
  /* And the results over the graph say it too, and each node its own figures. */
  GtkWidget *results = app_window_get_part (window, "trial_results");
  g_assert_true (gtk_widget_get_visible (results));
  PlannerGraph *graph = planner_plan_get_graph (plan ());
  GraphviewModel *model = graphview_widget_get_model (app_window_get_graph (window));
  GraphviewRenderer *renderer = graphview_widget_get_renderer (app_window_get_graph (window));
  int op = planner_graph_find_op (graph, "lm_head");
  g_assert_cmpint (op, >=, 0);
  guint item = graphview_model_get_item_of_op (model, op);
  g_assert_cmpint (graphview_model_get_item (model, item)->kind, ==, GRAPHVIEW_ITEM_OP);
  gboolean ok = FALSE;
  g_autofree char *badge = graphview_renderer_dup_trial_badge (renderer, item, &ok);
  g_assert_nonnull (badge);
  g_assert_true (ok);
  g_test_message ("lm_head: %s", badge);
  g_assert_cmpuint (runs->len, ==, 1);
  /* The stored measurement of that op: measured and estimated, as the badge says them. */
  for (guint i = 0; i < run->measurements->len; i++)
    {
      const PlannerTrialMeasurement *m = &g_array_index (run->measurements, PlannerTrialMeasurement, i);
      if (m->kind != PLANNER_MEASUREMENT_OP || g_strcmp0 (m->name, "lm_head") != 0)
        continue;
      g_autofree char *measured = planner_format_time (m->measured_us * 1e-6);
      g_autofree char *estimated = planner_format_time (m->estimated_us * 1e-6);
      g_assert_true (g_str_has_prefix (badge, measured));
      g_assert_nonnull (strstr (badge, estimated));
    }
  gtk_window_destroy (GTK_WINDOW (dialog));
}

static void
test_close (void)
{
  gtk_window_close (GTK_WINDOW (window));
  test_ui_pump (200);
  /* The deletion that was still undoable is final now. */
  g_autoptr (PlannerStore) store = planner_store_open (g_getenv ("SHARDSCOPE_DB"), NULL);
  g_autoptr (GError) error = NULL;
  g_assert_true (planner_store_get_entry (store, saved_id, &error) == NULL);
  g_assert_nonnull (error);
}

int
main (int argc, char *argv[])
{
  tmpdir = g_dir_make_tmp ("shardscope-ui-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (test_ui_log_fatal, NULL);
  app_application_init_environment ();

  g_test_add_func ("/ui/app/start", test_start);
  g_test_add_func ("/ui/app/model-filter", test_model_filter);
  g_test_add_func ("/ui/app/load-example", test_load_example);
  g_test_add_func ("/ui/app/select-op", test_select_op);
  g_test_add_func ("/ui/app/pin", test_pin);
  g_test_add_func ("/ui/app/timeline", test_timeline);
  g_test_add_func ("/ui/app/fit-and-navigation", test_fit_and_navigation);
  g_test_add_func ("/ui/app/one-instance", test_one_instance);
  g_test_add_func ("/ui/app/overview", test_overview);
  g_test_add_func ("/ui/app/save", test_save);
  g_test_add_func ("/ui/app/reopen", test_reopen);
  g_test_add_func ("/ui/app/compare", test_compare);
  g_test_add_func ("/ui/app/ask-before-discarding", test_ask_before_discarding);
  g_test_add_func ("/ui/app/export", test_export);
  g_test_add_func ("/ui/app/chart-and-store-actions", test_chart_and_store_actions);
  g_test_add_func ("/ui/app/toasts", test_toasts);
  g_test_add_func ("/ui/app/screenshot", test_screenshot);
  g_test_add_func ("/ui/app/trial-refused", test_trial_refused);
  g_test_add_func ("/ui/app/trial-run", test_trial_run);
  g_test_add_func ("/ui/app/close", test_close);
  int status = g_test_run ();
  g_clear_object (&saved_plan);
  g_clear_object (&app);
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
