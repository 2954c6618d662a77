#define G_LOG_DOMAIN "test-graphview-widget"

#include "config.h"

#include "graphview-widget.h"
#include "planner-hardware.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

/* GraphviewWidget under Xvfb: asynchronous layout, fit, zoom anchored at the pointer and
 * clamped, selection and hit testing, folding, and a snapshot of both layers. */

typedef struct
{
  GtkWidget *window;
  GraphviewWidget *view;
  GraphviewModel *model;
  PlannerGraph *graph;
  PlannerPlan *plan;
  int selected;
  guint ready;
} Fixture;

static void
on_ready (GraphviewWidget *view, Fixture *f)
{
  f->ready++;
}

static void
on_selection (GraphviewWidget *view, int item, Fixture *f)
{
  f->selected = item;
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
  guint id = g_timeout_add_seconds (20, timeout, NULL);
  while (f->ready < count)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (id);
  g_assert_true (graphview_widget_is_ready (f->view));
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->graph = test_util_model ("gpt2", NULL);
  f->plan = test_util_plan (f->graph, "dp=2,mp=4", NULL, "megatron", NULL);
  f->model = graphview_model_new (f->graph);

  f->window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (f->window), 800, 600);
  f->view = GRAPHVIEW_WIDGET (graphview_widget_new ());
  gtk_window_set_child (GTK_WINDOW (f->window), GTK_WIDGET (f->view));
  g_signal_connect (f->view, "layout-ready", G_CALLBACK (on_ready), f);
  g_signal_connect (f->view, "selection-changed", G_CALLBACK (on_selection), f);
  gtk_window_present (GTK_WINDOW (f->window));
  /* Let the window get its size before the first layout fits the view. */
  while (gtk_widget_get_width (GTK_WIDGET (f->view)) == 0)
    g_main_context_iteration (NULL, TRUE);
  graphview_widget_set_model (f->view, f->model);
  graphview_widget_set_plan (f->view, f->plan);
  wait_ready (f, 1);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  gtk_window_destroy (GTK_WINDOW (f->window));
  g_object_unref (f->model);
  g_object_unref (f->plan);
  g_object_unref (f->graph);
}

static void
test_fit_and_zoom (Fixture *f, gconstpointer data)
{
  double fit = graphview_widget_get_fit_zoom (f->view);
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (f->view), fit, 1e-9);

  /* A wheel notch at the pointer: the world point under it stays under it (once the graph
   * is bigger than the view; a smaller one stays centred). */
  graphview_widget_zoom_at (f->view, 3, 400, 300);
  fit *= 3;
  double wx0, wy0, wx1, wy1;
  graphview_widget_to_world (f->view, 300, 200, &wx0, &wy0);
  graphview_widget_zoom_at (f->view, GRAPHVIEW_WIDGET_ZOOM_STEP, 300, 200);
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (f->view),
                                  fit * GRAPHVIEW_WIDGET_ZOOM_STEP, 1e-9);
  graphview_widget_to_world (f->view, 300, 200, &wx1, &wy1);
  g_assert_cmpfloat_with_epsilon (wx0, wx1, 1e-6);
  g_assert_cmpfloat_with_epsilon (wy0, wy1, 1e-6);

  /* Clamped between fit and 10x. */
  graphview_widget_zoom_at (f->view, 1e6, 300, 200);
  g_assert_cmpfloat (graphview_widget_get_zoom (f->view), ==, GRAPHVIEW_WIDGET_MAX_ZOOM);
  graphview_widget_zoom_at (f->view, 1e-6, 300, 200);
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (f->view),
                                  graphview_widget_get_fit_zoom (f->view), 1e-9);

  /* Panning moves the origin by the drag over the zoom. */
  graphview_widget_zoom_at (f->view, 4, 400, 300);
  double x0, y0, x1, y1;
  graphview_widget_get_origin (f->view, &x0, &y0);
  graphview_widget_pan (f->view, 0, -40);
  graphview_widget_get_origin (f->view, &x1, &y1);
  g_assert_cmpfloat_with_epsilon (y1 - y0, 40 / graphview_widget_get_zoom (f->view), 1e-6);

  /* Both layers draw. */
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  GTK_WIDGET_GET_CLASS (f->view)->snapshot (GTK_WIDGET (f->view), snapshot);
  GskRenderNode *node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  /* The cached static layer (a texture) under the overlays (Cairo). */
  g_assert_cmpint (gsk_render_node_get_node_type (node), ==, GSK_CONTAINER_NODE);
  g_assert_cmpuint (gsk_container_node_get_n_children (node), >=, 2);
  g_assert_cmpint (gsk_render_node_get_node_type (gsk_container_node_get_child (node, 0)), ==,
                   GSK_TEXTURE_NODE);
  gsk_render_node_unref (node);
}

static void
test_select_and_fold (Fixture *f, gconstpointer data)
{
  GraphviewRenderer *renderer = graphview_widget_get_renderer (f->view);
  GraphviewLayout *layout = graphview_renderer_get_layout (renderer);
  guint n = graphview_model_get_n_items (f->model);
  int block = -1;
  for (guint i = 0; i < n; i++)
    {
      /* Hit testing at the middle of each item, in widget coordinates. */
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      double x0, y0;
      graphview_widget_get_origin (f->view, &x0, &y0);
      double zoom = graphview_widget_get_zoom (f->view);
      double x = (r->x + r->width / 2 - x0) * zoom, y = (r->y + r->height / 2 - y0) * zoom;
      g_assert_cmpint (graphview_widget_item_at (f->view, x, y), ==, (int)i);
      if (graphview_model_get_item (f->model, i)->kind == GRAPHVIEW_ITEM_BLOCK)
        block = (int)i;
    }
  g_assert_cmpint (block, >=, 0);

  graphview_widget_set_selected (f->view, block);
  g_assert_cmpint (f->selected, ==, block);
  g_assert_cmpint (graphview_widget_get_selected (f->view), ==, block);

  /* Unfolding relayouts in the background; the selection follows the unfolded ops. */
  graphview_model_toggle_item (f->model, block);
  g_assert_cmpint (f->selected, ==, -1);
  wait_ready (f, 2);
  g_assert_cmpuint (graphview_model_get_n_items (f->model), >, n);
  g_assert_cmpuint (graphview_layout_get_n_items (graphview_renderer_get_layout (renderer)), ==,
                    graphview_model_get_n_items (f->model));
  graphview_widget_set_step (f->view, 3);
  g_assert_cmpint (graphview_renderer_get_step (renderer), ==, 3);
}

static void
skip_no_display (void)
{
  g_test_skip ("no display: run under xvfb-run");
}

int
main (int argc, char **argv)
{
  /* No session bus or GL under Xvfb in CI: no accessibility bus, the Cairo renderer. */
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_setenv ("GSK_RENDERER", "cairo", FALSE);
  g_test_init (&argc, &argv, NULL);
  if (!gtk_init_check ())
    {
      g_test_add_func ("/graphview/widget/no-display", skip_no_display);
      return g_test_run ();
    }
  g_test_add ("/graphview/widget/fit-and-zoom", Fixture, NULL, fixture_setup, test_fit_and_zoom,
              fixture_teardown);
  g_test_add ("/graphview/widget/select-and-fold", Fixture, NULL, fixture_setup,
              test_select_and_fold, fixture_teardown);
  return g_test_run ();
}
