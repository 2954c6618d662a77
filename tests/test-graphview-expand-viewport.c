#define G_LOG_DOMAIN "test-graphview-expand-viewport"

#include "config.h"

#include "graphview-widget.h"
#include "planner-model.h"
#include "test-util.h"

/* Unfolding and folding one instance from the canvas does not move the view (issue 15 item
 * 4): LLaMA-2-70B in a 1280x720 window with layer 37 unfolded, zoomed to 1 with
 * "model.layers.38-79 x42" right of and below the middle. Activating that node (a double click,
 * Return) unfolds layer 38: the zoom and the origin stay as they were, so every item that kept its
 * place (graphview's stable expansion) is under the same pixels, and layer 38's frame starts where
 * the node's top was. Folding it again from one of its ops puts "38-79 x42" back where it was, its
 * top under the point where that op's top was. */

typedef struct
{
  GraphviewWidget *view;
  guint ready;
} Fixture;

static void
on_ready (GraphviewWidget *view, Fixture *f)
{
  f->ready++;
}

static gboolean
timeout (gpointer data)
{
  g_error ("the layout did not arrive in time");
  return G_SOURCE_REMOVE;
}

static void
wait_ready (Fixture *f, guint count)
{
  guint id = g_timeout_add_seconds (60, timeout, NULL);
  while (f->ready < count)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (id);
  g_assert_true (graphview_widget_is_ready (f->view));
}

/* Widget coordinates of world point (@wx, @wy). */
static void
to_widget (GraphviewWidget *view, double wx, double wy, double *x, double *y)
{
  double ox, oy;
  graphview_widget_get_origin (view, &ox, &oy);
  double zoom = graphview_widget_get_zoom (view);
  *x = (wx - ox) * zoom;
  *y = (wy - oy) * zoom;
}

static const GraphviewFrame *
frame_of (GraphviewLayout *layout, guint block)
{
  for (guint i = 0; i < graphview_layout_get_n_frames (layout); i++)
    if (graphview_layout_get_frame (layout, i)->block == block)
      return graphview_layout_get_frame (layout, i);
  g_error ("no frame for block %u", block);
  return NULL;
}

static void
test_viewport_stays (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  Fixture fixture = { 0 }, *f = &fixture;

  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 1280, 720);
  f->view = GRAPHVIEW_WIDGET (graphview_widget_new ());
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (f->view));
  g_signal_connect (f->view, "layout-ready", G_CALLBACK (on_ready), f);
  gtk_window_present (GTK_WINDOW (window));
  while (gtk_widget_get_width (GTK_WIDGET (f->view)) == 0)
    g_main_context_iteration (NULL, TRUE);
  graphview_widget_set_model (f->view, model);
  wait_ready (f, 1);
  GraphviewRenderer *renderer = graphview_widget_get_renderer (f->view);

  g_assert_cmpuint (graphview_model_expand_matching (model, "model.layers.37"), ==, 1);
  wait_ready (f, 2);
  GraphviewLayout *layout = graphview_renderer_get_layout (renderer);
  g_assert_true (graphview_layout_is_stable (layout));

  guint in38 = planner_graph_find_op (graph, "model.layers.38.self_attn.q_proj");
  guint rest = graphview_model_get_item_of_op (model, in38);
  g_assert_cmpint (graphview_model_get_item (model, rest)->kind, ==, GRAPHVIEW_ITEM_BLOCK);
  GraphviewRect rest_rect = *graphview_layout_get_item_rect (layout, rest);
  graphview_widget_set_viewport (f->view, 1.0, 0, 0);
  graphview_widget_center_on_item (f->view, rest);
  /* Off centre, as a user leaves it: centring on the unfolded ops would move the view. */
  graphview_widget_pan (f->view, 300, 200);
  double zoom = graphview_widget_get_zoom (f->view);
  g_assert_cmpfloat (zoom, ==, 1.0);
  double ox, oy;
  graphview_widget_get_origin (f->view, &ox, &oy);
  double ax, ay;
  to_widget (f->view, rest_rect.x + rest_rect.width / 2, rest_rect.y, &ax, &ay);
  /* Layer 37's frame and the node above it, on screen. */
  GraphviewRect frame37 = frame_of (layout, 37)->rect;
  double f37x, f37y;
  to_widget (f->view, frame37.x, frame37.y, &f37x, &f37y);

  /* Unfold layer 38 from the canvas. */
  graphview_widget_activate_item (f->view, rest);
  wait_ready (f, 3);
  layout = graphview_renderer_get_layout (renderer);
  g_assert_true (graphview_layout_is_stable (layout));
  g_assert_true (graphview_model_get_expanded (model, 0, 38));
  g_assert_cmpfloat (graphview_widget_get_zoom (f->view), ==, zoom);
  double ox1, oy1;
  graphview_widget_get_origin (f->view, &ox1, &oy1);
  g_test_message ("origin before (%g, %g), after (%g, %g)", ox, oy, ox1, oy1);
  g_assert_cmpfloat_with_epsilon (ox1, ox, 1e-9);
  g_assert_cmpfloat_with_epsilon (oy1, oy, 1e-9);
  const GraphviewRect *frame38 = &frame_of (layout, 38)->rect;
  double fx, fy;
  to_widget (f->view, frame38->x, frame38->y, &fx, &fy);
  g_assert_cmpfloat_with_epsilon (fy, ay, 1e-6);
  g_assert_cmpfloat (fx, <=, ax);
  g_assert_cmpfloat (fx + frame38->width * zoom, >=, ax);
  double gx, gy;
  to_widget (f->view, frame_of (layout, 37)->rect.x, frame_of (layout, 37)->rect.y, &gx, &gy);
  g_assert_cmpfloat_with_epsilon (gx, f37x, 1e-6);
  g_assert_cmpfloat_with_epsilon (gy, f37y, 1e-6);
  /* The unfolded layer's first op is selected, without scrolling to it. */
  guint first38 = graphview_model_get_item_of_op (
      model, graphview_model_get_run (model, 0)->first_op
                 + 38 * graphview_model_get_run (model, 0)->ops_per_block);
  g_assert_cmpint (graphview_widget_get_selected (f->view), ==, (int)first38);

  /* Fold it again from one of its ops. */
  guint down38 = graphview_model_get_item_of_op (
      model, planner_graph_find_op (graph, "model.layers.38.mlp.down_proj"));
  const GraphviewRect *down = graphview_layout_get_item_rect (layout, down38);
  double dx, dy;
  to_widget (f->view, down->x + down->width / 2, down->y, &dx, &dy);
  graphview_widget_activate_item (f->view, down38);
  wait_ready (f, 4);
  layout = graphview_renderer_get_layout (renderer);
  g_assert_false (graphview_model_get_expanded (model, 0, 38));
  g_assert_cmpfloat (graphview_widget_get_zoom (f->view), ==, zoom);
  /* Back in its old place in the world, and its top where the op's top was on screen. */
  guint back = graphview_model_get_item_of_op (model, in38);
  g_assert_cmpuint (back, ==, rest);
  const GraphviewRect *r = graphview_layout_get_item_rect (layout, back);
  g_assert_cmpfloat (r->x, ==, rest_rect.x);
  g_assert_cmpfloat (r->y, ==, rest_rect.y);
  double bx, by;
  to_widget (f->view, r->x, r->y, &bx, &by);
  g_assert_cmpfloat_with_epsilon (by, dy, 1e-6);
  g_assert_cmpfloat (bx, <=, dx + 1e-6);
  g_assert_cmpfloat (bx + r->width * zoom, >=, dx - 1e-6);
  g_assert_cmpint (graphview_widget_get_selected (f->view), ==, (int)back);

  gtk_window_destroy (GTK_WINDOW (window));
}

static void
skip_no_display (void)
{
  g_test_skip ("no display: run under xvfb-run");
}

int
main (int argc, char **argv)
{
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_setenv ("GSK_RENDERER", "cairo", FALSE);
  g_test_init (&argc, &argv, NULL);
  if (!gtk_init_check ())
    {
      g_test_add_func ("/graphview/expand-viewport/no-display", skip_no_display);
      return g_test_run ();
    }
  g_test_add_func ("/graphview/expand-viewport/stays", test_viewport_stays);
  return g_test_run ();
}
