/* test-ui-overlays.c: nothing that floats over the graph hides its nodes (issue 15 item 3),
 * under Xvfb.
 *
 * LLaMA-2-70B with layer 37 unfolded in a 1280x720 window, with the overlays the app's window
 * has where it has them, each registered with graphview_widget_add_overlay(): the op-types
 * legend card (top left), the zoom buttons (top right), a trial-result card (bottom left),
 * the minimap (bottom right), and the legend the graph view draws itself (bottom left).
 * After Fit no node lies under any of them (counted here from the layout's boxes and the view,
 * not by the widget) and none has stepped aside. Then, one overlay after the other, the view
 * is zoomed to 2 with a node's centre brought under the overlay's centre, as panning there
 * does: that overlay steps aside (style class "aside", no target), so a click at its centre
 * reaches the graph, whose item there is that node, and with the app's stylesheet loaded
 * nothing of it is drawn over the graph any more (the window's picture equals the graph
 * view's own in its rectangle; after Fit thousands of its pixels differ), the legend is not
 * drawn; panned so that no node lies under it, it is back and takes clicks again. Pictures of
 * each aside state go to overlays-*-aside-N.png in the build's tests folder, to look at.
 *
 * /ui/overlays/window does the same in the app's own window at 1280x720 (sidebar folded, a
 * trial's results shown, layer 37 unfolded), whose graph is 929x387 between the inspector,
 * the timeline and the totals: its overlays as app-window.ui places them, registered and
 * styled as the app does (the zoom buttons fade through their "graph-buttons" class). Held (the minimap's drag), an overlay stays while nodes
 * come under it and steps aside when let go.
 */
#include "config.h"

#include <string.h>

#include "app-application.h"
#include "app-minimap.h"
#include "app-trial-results.h"
#include "app-type-legend.h"
#include "app-window.h"
#include "graphview-widget.h"

#include "test-util.h"
#include "test-ui-util.h"

static guint ready;

static void
on_ready (GraphviewWidget *view, gpointer data)
{
  ready++;
}

static gboolean
is_ready (gpointer data)
{
  return ready >= GPOINTER_TO_UINT (data);
}

typedef struct
{
  const char *name;
  GtkWidget *widget; /* NULL: the legend the view draws */
} Over;

static gboolean
place (GraphviewWidget *view, const Over *o, graphene_rect_t *rect)
{
  if (o->widget == NULL)
    return graphview_widget_get_legend_rect (view, rect);
  return gtk_widget_get_mapped (o->widget)
         && gtk_widget_compute_bounds (o->widget, GTK_WIDGET (view), rect);
}

static gboolean
aside (GraphviewWidget *view, const Over *o)
{
  if (o->widget == NULL)
    return graphview_widget_get_legend_aside (view);
  gboolean a = graphview_widget_get_overlay_aside (view, o->widget);
  /* The class the CSS fades it with, and no target, go with it. */
  g_assert_cmpint (gtk_widget_has_css_class (o->widget, "aside"), ==, a);
  g_assert_cmpint (gtk_widget_get_can_target (o->widget), ==, !a);
  return a;
}

/* What a click at (@x, @y) of the graph's overlay reaches: the overlay @o (or a child of it),
 * or the view. */
static gboolean
click_reaches (GtkWidget *stack, GtkWidget *target, double x, double y)
{
  GtkWidget *picked = gtk_widget_pick (stack, x, y, GTK_PICK_DEFAULT);
  return picked == target || (picked != NULL && gtk_widget_is_ancestor (picked, target));
}

/* How many pixels of @area the overlay stack shows otherwise than the graph view alone:
 * what the overlays draw there. */
static guint
pixels_drawn_over (GtkWidget *stack, GraphviewWidget *view, const graphene_rect_t *area)
{
  g_autoptr (GdkTexture) all = test_ui_render (stack);
  g_autoptr (GdkTexture) graph = test_ui_render (GTK_WIDGET (view));
  g_assert_nonnull (all);
  g_assert_nonnull (graph);
  int w = gdk_texture_get_width (all), h = gdk_texture_get_height (all);
  g_assert_cmpint (gdk_texture_get_width (graph), ==, w);
  g_assert_cmpint (gdk_texture_get_height (graph), ==, h);
  g_autofree guchar *a = g_malloc ((gsize) w * h * 4);
  g_autofree guchar *b = g_malloc ((gsize) w * h * 4);
  gdk_texture_download (all, a, w * 4);
  gdk_texture_download (graph, b, w * 4);
  guint n = 0;
  for (int y = MAX (0, (int) area->origin.y); y < MIN (h, (int) (area->origin.y + area->size.height)); y++)
    for (int x = MAX (0, (int) area->origin.x); x < MIN (w, (int) (area->origin.x + area->size.width)); x++)
      n += memcmp (a + ((gsize) y * w + x) * 4, b + ((gsize) y * w + x) * 4, 4) != 0;
  return n;
}

static GtkWidget *
corner (GtkWidget *w, GtkAlign h, GtkAlign v)
{
  gtk_widget_set_halign (w, h);
  gtk_widget_set_valign (w, v);
  gtk_widget_set_margin_start (w, 12);
  gtk_widget_set_margin_end (w, 12);
  gtk_widget_set_margin_top (w, 12);
  gtk_widget_set_margin_bottom (w, 12);
  return w;
}

/* The node (layer 37's) nearest the middle of the graph: far enough from every edge that
 * the view, clamped, can put it under any corner at zoom 2. */
static guint
middle_node (GraphviewWidget *view)
{
  GraphviewLayout *layout = graphview_renderer_get_layout (graphview_widget_get_renderer (view));
  double w, h;
  graphview_renderer_get_bounds (graphview_widget_get_renderer (view), &w, &h);
  guint best = 0;
  double best_d = G_MAXDOUBLE;
  for (guint i = 0; i < graphview_layout_get_n_items (layout); i++)
    {
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      double dx = r->x + r->width / 2 - w / 2, dy = r->y + r->height / 2 - h / 2;
      if (dx * dx + dy * dy < best_d)
        best_d = dx * dx + dy * dy, best = i;
    }
  return best;
}

/* What each of @overs does at Fit, with a node brought under it at zoom 2, and panned clear
 * (the file's header); @stack is the GtkOverlay holding @view and them. */
static void
check_overlays (GtkWidget *stack, GraphviewWidget *view, const Over *overs, guint n_overs,
                const char *tag)
{
  double width = gtk_widget_get_width (GTK_WIDGET (view));
  double height = gtk_widget_get_height (GTK_WIDGET (view));
  /* Fit: the graph beside all of them, none aside, each taking its clicks. */
  graphview_widget_zoom_to_fit (view);
  test_ui_pump (200);
  for (guint i = 0; i < n_overs; i++)
    {
      const Over *o = &overs[i];
      graphene_rect_t r;
      g_assert_true (place (view, o, &r));
      g_test_message ("%s at %.0f,%.0f %.0fx%.0f", o->name, r.origin.x, r.origin.y,
                      r.size.width, r.size.height);
      g_assert_cmpuint (test_ui_nodes_under (view, &r), ==, 0);
      g_assert_false (aside (view, o));
      if (o->widget)
        {
          g_assert_true (click_reaches (stack, o->widget, r.origin.x + r.size.width / 2,
                                        r.origin.y + r.size.height / 2));
          /* Drawn: what the check below, aside, sees as nothing. */
          guint drawn = pixels_drawn_over (stack, view, &r);
          g_test_message ("%s: %u pixels drawn over the graph", o->name, drawn);
          g_assert_cmpuint (drawn, >, 100);
        }
    }

  GraphviewLayout *layout = graphview_renderer_get_layout (graphview_widget_get_renderer (view));
  guint node = middle_node (view);
  const GraphviewRect *box = graphview_layout_get_item_rect (layout, node);
  for (guint i = 0; i < n_overs; i++)
    {
      const Over *o = &overs[i];
      graphene_rect_t r;
      g_assert_true (place (view, o, &r));
      double cx = r.origin.x + r.size.width / 2, cy = r.origin.y + r.size.height / 2;
      /* Zoom 2, the node's centre under the overlay's. */
      graphview_widget_set_viewport (view, 2.0, box->x + box->width / 2 - cx / 2,
                                     box->y + box->height / 2 - cy / 2);
      test_ui_pump (100);
      guint covered = test_ui_nodes_under (view, &r);
      g_test_message ("zoom 2: %u nodes under the %s", covered, o->name);
      g_assert_cmpuint (covered, >, 0);
      g_assert_cmpint (graphview_widget_item_at (view, cx, cy), ==, node);
      g_assert_true (aside (view, o));
      g_assert_true (click_reaches (stack, GTK_WIDGET (view), cx, cy));
      if (o->widget)
        {
          /* Faded out (the app's CSS, 150 ms): nothing of it drawn over the node. */
          test_ui_pump (300);
          g_assert_cmpuint (pixels_drawn_over (stack, view, &r), ==, 0);
        }
      g_autofree char *file = g_strdup_printf ("overlays-%s-aside-%u.png", tag, i);
      test_ui_photograph (stack, file);

      /* Panned as far as the view goes towards its corner (the origin half a view past the
       * graph's edge), so that the quarter of the view it sits in shows no graph: it is
       * back. */
      g_assert_true (r.origin.y + r.size.height < height / 2 || r.origin.y > height / 2
                     || r.origin.x + r.size.width < width / 2 || r.origin.x > width / 2);
      graphview_widget_set_viewport (view, 2.0, cx < width / 2 ? -1e6 : 1e6,
                                     cy < height / 2 ? -1e6 : 1e6);
      test_ui_pump (100);
      g_assert_cmpuint (test_ui_nodes_under (view, &r), ==, 0);
      g_assert_false (aside (view, o));
      if (o->widget)
        g_assert_true (click_reaches (stack, o->widget, cx, cy));
    }
}

static void
test_overlays (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_assert_cmpuint (graphview_model_expand_matching (model, "model.layers.37"), ==, 1);

  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 1280, 720);
  GtkWidget *stack = gtk_overlay_new ();
  GraphviewWidget *view = GRAPHVIEW_WIDGET (graphview_widget_new ());
  gtk_overlay_set_child (GTK_OVERLAY (stack), GTK_WIDGET (view));

  AppMinimap *minimap = APP_MINIMAP (app_minimap_new ());
  app_minimap_set_view (minimap, view);
  GtkWidget *buttons = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_widget_add_css_class (buttons, "graph-buttons");
  static const char *const icons[]
      = { "zoom-out-symbolic", "zoom-in-symbolic", "zoom-fit-best-symbolic" };
  for (guint i = 0; i < G_N_ELEMENTS (icons); i++)
    {
      GtkWidget *b = gtk_button_new_from_icon_name (icons[i]);
      gtk_widget_add_css_class (b, "osd");
      gtk_widget_add_css_class (b, "circular");
      gtk_box_append (GTK_BOX (buttons), b);
    }
  AppTypeLegend *types = APP_TYPE_LEGEND (app_type_legend_new ());
  AppTrialResults *trial = APP_TRIAL_RESULTS (app_trial_results_new ());
  /* A card's worth of text, typed here: only its size matters to this test. */
  g_autoptr (GArray) no_timings = g_array_new (FALSE, TRUE, sizeof (ExecutorTiming));
  ExecutorTrialResult result = { .backend = (char *) "cpu", .n_devices = 8, .passed = TRUE,
                                 .max_abs_error = 1e-6, .max_rel_error = 1e-5,
                                 .ops = no_timings, .redistributions = no_timings,
                                 .estimated_step_s = 0.012, .measured_step_s = 0.014 };
  app_trial_results_set_result (trial, &result, NULL);

  gtk_overlay_add_overlay (GTK_OVERLAY (stack),
                           corner (GTK_WIDGET (minimap), GTK_ALIGN_END, GTK_ALIGN_END));
  gtk_overlay_add_overlay (GTK_OVERLAY (stack), corner (buttons, GTK_ALIGN_END, GTK_ALIGN_START));
  gtk_overlay_add_overlay (GTK_OVERLAY (stack),
                           corner (GTK_WIDGET (types), GTK_ALIGN_START, GTK_ALIGN_START));
  gtk_overlay_add_overlay (GTK_OVERLAY (stack),
                           corner (GTK_WIDGET (trial), GTK_ALIGN_START, GTK_ALIGN_END));
  Over overs[] = { { "minimap", GTK_WIDGET (minimap) },
                   { "zoom buttons", buttons },
                   { "op-types legend", GTK_WIDGET (types) },
                   { "trial-result card", GTK_WIDGET (trial) },
                   { "legend", NULL } };
  for (guint i = 0; i < G_N_ELEMENTS (overs); i++)
    if (overs[i].widget)
      graphview_widget_add_overlay (view, overs[i].widget);
  gtk_window_set_child (GTK_WINDOW (window), stack);
  g_signal_connect (view, "layout-ready", G_CALLBACK (on_ready), NULL);
  gtk_window_present (GTK_WINDOW (window));
  while (gtk_widget_get_width (GTK_WIDGET (view)) == 0)
    g_main_context_iteration (NULL, TRUE);
  graphview_widget_set_model (view, model);
  test_ui_wait_for (is_ready, GUINT_TO_POINTER (1), 60, "the first layout");
  app_type_legend_set_renderer (types, graphview_widget_get_renderer (view));
  test_ui_pump (200);
  g_assert_cmpuint (app_type_legend_get_n_types (types), >, 3);
  g_assert_cmpfloat (gtk_widget_get_width (GTK_WIDGET (view)), ==, 1280);

  check_overlays (stack, view, overs, G_N_ELEMENTS (overs), "widgets");

  /* Held (a drag in it), the minimap stays while a node comes under it; let go, it steps
   * aside. */
  GraphviewLayout *layout = graphview_renderer_get_layout (graphview_widget_get_renderer (view));
  const GraphviewRect *box = graphview_layout_get_item_rect (layout, middle_node (view));
  graphene_rect_t r;
  g_assert_true (place (view, &overs[0], &r));
  double cx = r.origin.x + r.size.width / 2, cy = r.origin.y + r.size.height / 2;
  graphview_widget_hold_overlay (view, overs[0].widget, TRUE);
  graphview_widget_set_viewport (view, 2.0, box->x + box->width / 2 - cx / 2,
                                 box->y + box->height / 2 - cy / 2);
  test_ui_pump (100);
  g_assert_cmpuint (test_ui_nodes_under (view, &r), >, 0);
  g_assert_false (aside (view, &overs[0]));
  graphview_widget_hold_overlay (view, overs[0].widget, FALSE);
  test_ui_pump (100);
  g_assert_true (aside (view, &overs[0]));
  g_assert_true (app_minimap_get_aside (minimap));

  /* Fit again: all back. */
  graphview_widget_zoom_to_fit (view);
  test_ui_pump (100);
  for (guint i = 0; i < G_N_ELEMENTS (overs); i++)
    g_assert_false (aside (view, &overs[i]));

  gtk_window_destroy (GTK_WINDOW (window));
}

static AppWindow *window;

static gboolean
plan_ready (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return doc && app_document_get_plan (doc) && !app_document_get_busy (doc)
         && graphview_widget_is_ready (app_window_get_graph (window));
}

static gboolean
unfolded (gpointer data)
{
  GraphviewWidget *graph = app_window_get_graph (window);
  return graphview_model_get_expanded (graphview_widget_get_model (graph), 0, 37)
         && graphview_widget_is_ready (graph);
}

/* The same in the app's own window, its overlays where app-window.ui puts them and
 * registered as app-window.c does: the plans' sidebar folded away as the screenshots have
 * it, a trial's results shown. */
static void
test_window (void)
{
  g_autoptr (AppApplication) app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  window = APP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_true (APP_IS_WINDOW (window));
  app_window_load_model (window, "llama-70b", "dp=2,mp=8", "h100-sxm", "megatron");
  test_ui_wait_for (plan_ready, NULL, 120, "llama-70b's plan");
  g_action_group_change_action_state (G_ACTION_GROUP (window), "show-sidebar",
                                      g_variant_new_boolean (FALSE));
  gtk_widget_set_visible (GTK_WIDGET (window), FALSE);
  gtk_window_set_default_size (GTK_WINDOW (window), 1280, 720);
  gtk_window_present (GTK_WINDOW (window));
  g_assert_true (
      gtk_widget_activate_action (GTK_WIDGET (window), "win.expand-block", "s", "model.layers.37"));
  test_ui_wait_for (unfolded, NULL, 60, "the layout with layer 37 unfolded");

  g_autoptr (GArray) no_timings = g_array_new (FALSE, TRUE, sizeof (ExecutorTiming));
  ExecutorTrialResult result = { .backend = (char *) "cpu", .n_devices = 16, .passed = TRUE,
                                 .max_abs_error = 1e-6, .max_rel_error = 1e-5,
                                 .ops = no_timings, .redistributions = no_timings,
                                 .estimated_step_s = 0.012, .measured_step_s = 0.014 };
  app_trial_results_set_result (APP_TRIAL_RESULTS (app_window_get_part (window, "trial_results")),
                                &result, NULL);
  g_object_set (window, "show-trial-results", TRUE, NULL);
  test_ui_pump (700);

  GraphviewWidget *graph = app_window_get_graph (window);
  GtkWidget *stack = gtk_widget_get_parent (GTK_WIDGET (graph));
  g_assert_true (GTK_IS_OVERLAY (stack));
  g_test_message ("the window's graph: %dx%d", gtk_widget_get_width (GTK_WIDGET (graph)),
                  gtk_widget_get_height (GTK_WIDGET (graph)));
  g_assert_cmpint (gtk_widget_get_width (GTK_WIDGET (graph)), >, 800);
  Over overs[] = { { "minimap", app_window_get_part (window, "minimap") },
                   { "zoom buttons", app_window_get_part (window, "graph_buttons") },
                   { "op-types legend", app_window_get_part (window, "type_legend") },
                   { "trial-result card", app_window_get_part (window, "trial_results") },
                   { "legend", NULL } };
  check_overlays (stack, graph, overs, G_N_ELEMENTS (overs), "window");
  gtk_window_destroy (GTK_WINDOW (window));
  window = NULL;
}

int
main (int argc, char **argv)
{
  g_autofree char *tmpdir = g_dir_make_tmp ("shardscope-ui-overlays-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_setenv ("GSK_RENDERER", "cairo", FALSE);
  gtk_test_init (&argc, &argv, NULL);
  static const char *const harmless[] = { "portal", NULL };
  g_test_log_set_fatal_handler (test_ui_log_fatal, (gpointer) harmless);
  /* The app's stylesheet: it is what fades an overlay that steps aside. */
  app_application_init_environment (); /* the app's resources, once */
  g_autoptr (GtkCssProvider) css = gtk_css_provider_new ();
  gtk_css_provider_load_from_resource (css, "/io/github/shardscope/Shardscope/style.css");
  gtk_style_context_add_provider_for_display (gdk_display_get_default (),
                                              GTK_STYLE_PROVIDER (css),
                                              GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  g_test_add_func ("/ui/overlays/step-aside", test_overlays);
  g_test_add_func ("/ui/overlays/window", test_window);
  int status = g_test_run ();
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
