/* test-ui-expand-view.c: in the app's window, unfolding and folding one instance from the
 * canvas keeps the view (issue 15 item 4), under Xvfb (suite ui).
 *
 * LLaMA-2-70B on dp=2,mp=8 under megatron at 1280x720 (plans' sidebar folded away, as the
 * screenshots have it), layer 37 unfolded with win.expand-block as test-ui-app's
 * /ui/app/one-instance does, zoom 1 with "model.layers.38-79 x42" off the middle. A double
 * click on that node (graphview_widget_activate_item()) unfolds layer 38: once the layout
 * has arrived and the window has reacted to it (it follows the new selection into the
 * inspector), zoom and origin are what they were, layer 37's frame is under the same pixels
 * and layer 38's frame starts where the node's top was. Folding layer 38 again from its
 * mlp.down_proj puts the node back where it was in the world, its top where the op's was on
 * screen. The window used to centre the selected op after every layout; that is the jump this
 * test fails on.
 */
#include "config.h"

#include <adwaita.h>

#include "app-application.h"
#include "app-window.h"
#include "graphview-widget.h"

#include "test-util.h"
#include "test-ui-util.h"

static AppApplication *app;
static AppWindow *window;

static gboolean
plan_ready (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return doc && app_document_get_plan (doc) && !app_document_get_busy (doc)
         && graphview_widget_is_ready (app_window_get_graph (window));
}

typedef struct
{
  guint block;
  gboolean expanded;
} Folding;

static gboolean
folded_as (gpointer data)
{
  const Folding *f = data;
  GraphviewWidget *graph = app_window_get_graph (window);
  GraphviewModel *model = graphview_widget_get_model (graph);
  return graphview_model_get_expanded (model, 0, f->block) == f->expanded
         && graphview_widget_is_ready (graph);
}

static void
to_widget (GraphviewWidget *graph, double wx, double wy, double *x, double *y)
{
  double ox, oy;
  graphview_widget_get_origin (graph, &ox, &oy);
  double zoom = graphview_widget_get_zoom (graph);
  *x = (wx - ox) * zoom;
  *y = (wy - oy) * zoom;
}

static const GraphviewRect *
frame_of (GraphviewLayout *layout, guint block)
{
  for (guint i = 0; i < graphview_layout_get_n_frames (layout); i++)
    if (graphview_layout_get_frame (layout, i)->block == block)
      return &graphview_layout_get_frame (layout, i)->rect;
  g_error ("no frame for block %u", block);
  return NULL;
}

static void
resize (int width, int height)
{
  gtk_widget_set_visible (GTK_WIDGET (window), FALSE);
  gtk_window_set_default_size (GTK_WINDOW (window), width, height);
  gtk_window_present (GTK_WINDOW (window));
  test_ui_pump (700);
}

static void
test_expand_keeps_view (void)
{
  g_action_group_change_action_state (G_ACTION_GROUP (window), "show-sidebar",
                                      g_variant_new_boolean (FALSE));
  resize (1280, 720);
  GraphviewWidget *graph = app_window_get_graph (window);
  GraphviewModel *model = graphview_widget_get_model (graph);
  GraphviewRenderer *renderer = graphview_widget_get_renderer (graph);
  AppDocument *doc = app_window_get_document (window);
  PlannerGraph *g = graphview_model_get_graph (model);

  g_assert_true (
      gtk_widget_activate_action (GTK_WIDGET (window), "win.expand-block", "s", "model.layers.37"));
  Folding open37 = { 37, TRUE };
  test_ui_wait_for (folded_as, &open37, 60, "the layout with layer 37 unfolded");
  test_ui_pump (300);

  guint in38 = planner_graph_find_op (g, "model.layers.38.self_attn.q_proj");
  guint rest = graphview_model_get_item_of_op (model, in38);
  g_assert_cmpint (graphview_model_get_item (model, rest)->kind, ==, GRAPHVIEW_ITEM_BLOCK);
  graphview_widget_set_viewport (graph, 1.0, 0, 0);
  graphview_widget_center_on_item (graph, rest);
  graphview_widget_pan (graph, 120, 90);
  test_ui_pump (200);
  GraphviewLayout *layout = graphview_renderer_get_layout (renderer);
  GraphviewRect rest_rect = *graphview_layout_get_item_rect (layout, rest);
  double zoom = graphview_widget_get_zoom (graph), ox, oy;
  graphview_widget_get_origin (graph, &ox, &oy);
  double ax, ay, f37x, f37y;
  to_widget (graph, rest_rect.x + rest_rect.width / 2, rest_rect.y, &ax, &ay);
  const GraphviewRect *f37 = frame_of (layout, 37);
  to_widget (graph, f37->x, f37->y, &f37x, &f37y);
  g_assert_cmpfloat (ay, >, 0);
  g_assert_cmpfloat (ay, <, gtk_widget_get_height (GTK_WIDGET (graph)));

  /* Unfold 38 from the canvas. */
  graphview_widget_activate_item (graph, rest);
  Folding open38 = { 38, TRUE };
  test_ui_wait_for (folded_as, &open38, 60, "the layout with layer 38 unfolded");
  test_ui_pump (500);
  layout = graphview_renderer_get_layout (renderer);
  g_assert_true (graphview_layout_is_stable (layout));
  double ox1, oy1;
  graphview_widget_get_origin (graph, &ox1, &oy1);
  g_test_message ("origin before (%g, %g), after (%g, %g)", ox, oy, ox1, oy1);
  g_assert_cmpfloat (graphview_widget_get_zoom (graph), ==, zoom);
  g_assert_cmpfloat_with_epsilon (ox1, ox, 1e-9);
  g_assert_cmpfloat_with_epsilon (oy1, oy, 1e-9);
  double fx, fy, gx, gy;
  const GraphviewRect *f38 = frame_of (layout, 38);
  to_widget (graph, f38->x, f38->y, &fx, &fy);
  g_assert_cmpfloat_with_epsilon (fy, ay, 1e-6);
  g_assert_cmpfloat (fx, <=, ax);
  g_assert_cmpfloat (fx + f38->width * zoom, >=, ax);
  f37 = frame_of (layout, 37);
  to_widget (graph, f37->x, f37->y, &gx, &gy);
  g_assert_cmpfloat_with_epsilon (gx, f37x, 1e-6);
  g_assert_cmpfloat_with_epsilon (gy, f37y, 1e-6);
  /* The window follows the canvas's selection: layer 38's first op. */
  const GraphviewRun *run = graphview_model_get_run (model, 0);
  g_assert_cmpint (app_document_get_selected_op (doc), ==,
                   (int)(run->first_op + 38 * run->ops_per_block));

  /* Fold it again from one of its ops. */
  guint down = graphview_model_get_item_of_op (
      model, planner_graph_find_op (g, "model.layers.38.mlp.down_proj"));
  const GraphviewRect *d = graphview_layout_get_item_rect (layout, down);
  double dx, dy;
  to_widget (graph, d->x + d->width / 2, d->y, &dx, &dy);
  graphview_widget_activate_item (graph, down);
  Folding closed38 = { 38, FALSE };
  test_ui_wait_for (folded_as, &closed38, 60, "the layout with layer 38 folded");
  test_ui_pump (500);
  layout = graphview_renderer_get_layout (renderer);
  g_assert_cmpfloat (graphview_widget_get_zoom (graph), ==, zoom);
  guint back = graphview_model_get_item_of_op (model, in38);
  const GraphviewRect *r = graphview_layout_get_item_rect (layout, back);
  g_assert_cmpfloat (r->x, ==, rest_rect.x);
  g_assert_cmpfloat (r->y, ==, rest_rect.y);
  double bx, by;
  to_widget (graph, r->x, r->y, &bx, &by);
  g_assert_cmpfloat_with_epsilon (by, dy, 1e-6);
  g_assert_cmpfloat (bx, <=, dx + 1e-6);
  g_assert_cmpfloat (bx + r->width * zoom, >=, dx - 1e-6);
}

int
main (int argc, char **argv)
{
  g_autofree char *tmpdir = g_dir_make_tmp ("shardscope-ui-expand-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  static const char *const harmless[] = { "portal", NULL };
  g_test_log_set_fatal_handler (test_ui_log_fatal, (gpointer)harmless);
  app_application_init_environment ();

  app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  window = APP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_true (APP_IS_WINDOW (window));
  app_window_load_model (window, "llama-70b", "dp=2,mp=8", "h100-sxm", "megatron");
  test_ui_wait_for (plan_ready, NULL, 120, "llama-70b's plan");

  g_test_add_func ("/ui/expand-view/keeps-view", test_expand_keeps_view);
  int status = g_test_run ();
  gtk_window_destroy (GTK_WINDOW (window));
  g_object_unref (app);
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
