/* test-ui-minimap.c: the minimap never covers the graph's nodes (issue 15 item 3), under Xvfb.
 *
 * LLaMA-2-70B with layer 37 unfolded in a 1280x720 window, the minimap in the bottom right
 * corner over the graph as the app's window has it (registered with
 * graphview_widget_add_overlay()). After Fit no node lies under it and it shows; zoomed in
 * to 2 with a node of layer 37 under the corner, nodes lie under it (counted here from the layout's
 * boxes and the view, not by the widget) and it steps aside: a click there picks the graph, not the
 * minimap; panned so that the corner shows no node, it is back and takes clicks again. Its
 * shortcut, Ctrl+M, stays the app's own (ui-conventions' unique-accels checks that).
 */
#include "config.h"

#include "app-minimap.h"
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

static void
test_steps_aside (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_assert_cmpuint (graphview_model_expand_matching (model, "model.layers.37"), ==, 1);

  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 1280, 720);
  GtkWidget *overlay = gtk_overlay_new ();
  GraphviewWidget *view = GRAPHVIEW_WIDGET (graphview_widget_new ());
  gtk_overlay_set_child (GTK_OVERLAY (overlay), GTK_WIDGET (view));
  AppMinimap *minimap = APP_MINIMAP (app_minimap_new ());
  gtk_widget_set_halign (GTK_WIDGET (minimap), GTK_ALIGN_END);
  gtk_widget_set_valign (GTK_WIDGET (minimap), GTK_ALIGN_END);
  gtk_widget_set_margin_end (GTK_WIDGET (minimap), 12);
  gtk_widget_set_margin_bottom (GTK_WIDGET (minimap), 12);
  gtk_overlay_add_overlay (GTK_OVERLAY (overlay), GTK_WIDGET (minimap));
  app_minimap_set_view (minimap, view);
  graphview_widget_add_overlay (view, GTK_WIDGET (minimap));
  gtk_window_set_child (GTK_WINDOW (window), overlay);
  g_signal_connect (view, "layout-ready", G_CALLBACK (on_ready), NULL);
  gtk_window_present (GTK_WINDOW (window));
  while (gtk_widget_get_width (GTK_WIDGET (view)) == 0)
    g_main_context_iteration (NULL, TRUE);
  graphview_widget_set_model (view, model);
  test_ui_wait_for (is_ready, GUINT_TO_POINTER (1), 60, "the first layout");
  test_ui_pump (200);

  graphene_rect_t corner;
  g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (minimap), GTK_WIDGET (view), &corner));
  g_assert_cmpfloat (corner.size.width, >, 100);
  double cx = corner.origin.x + corner.size.width / 2,
         cy = corner.origin.y + corner.size.height / 2;

  /* Fit: the graph beside the minimap, which shows and takes clicks. */
  graphview_widget_zoom_to_fit (view);
  test_ui_pump (100);
  g_assert_cmpuint (test_ui_nodes_under (view, &corner), ==, 0);
  g_assert_false (app_minimap_get_aside (minimap));
  g_assert_true (gtk_widget_pick (overlay, cx, cy, GTK_PICK_DEFAULT) == GTK_WIDGET (minimap));

  /* Zoom 2 with the rightmost node of layer 37 brought under the corner, as panning there
   * does: the minimap gets out of its way. */
  GraphviewLayout *layout = graphview_renderer_get_layout (graphview_widget_get_renderer (view));
  g_assert_cmpuint (graphview_layout_get_n_frames (layout), ==, 1);
  const GraphviewRect *frame = &graphview_layout_get_frame (layout, 0)->rect;
  const GraphviewRect *right = NULL;
  for (guint i = 0; i < graphview_layout_get_n_items (layout); i++)
    {
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      if (graphview_rect_intersects (r, frame)
          && (right == NULL || r->x + r->width > right->x + right->width))
        right = r;
    }
  g_assert_nonnull (right);
  graphview_widget_set_viewport (view, 2.0, right->x + right->width / 2 - cx / 2,
                                 right->y + right->height / 2 - cy / 2);
  test_ui_pump (100);
  guint covered = test_ui_nodes_under (view, &corner);
  g_test_message ("zoom 2: %u nodes under the minimap's corner", covered);
  g_assert_cmpuint (covered, >, 0);
  g_assert_true (app_minimap_get_aside (minimap));
  g_assert_true (gtk_widget_has_css_class (GTK_WIDGET (minimap), "aside"));
  g_assert_true (gtk_widget_pick (overlay, cx, cy, GTK_PICK_DEFAULT) == GTK_WIDGET (view));

  /* Panned up past the graph's top: no node in the corner, the minimap back. */
  graphview_widget_set_viewport (view, 2.0, frame->x + frame->width / 2 - 320, -1000);
  test_ui_pump (100);
  g_assert_cmpuint (test_ui_nodes_under (view, &corner), ==, 0);
  g_assert_false (app_minimap_get_aside (minimap));
  g_assert_true (gtk_widget_pick (overlay, cx, cy, GTK_PICK_DEFAULT) == GTK_WIDGET (minimap));

  gtk_window_destroy (GTK_WINDOW (window));
}

int
main (int argc, char **argv)
{
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_setenv ("GSK_RENDERER", "cairo", FALSE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (test_ui_log_fatal, NULL);
  g_test_add_func ("/ui/minimap/steps-aside", test_steps_aside);
  return g_test_run ();
}
