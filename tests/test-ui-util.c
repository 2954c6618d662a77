/* test-ui-util.c: see test-ui-util.h. */
#include "config.h"

#include <string.h>

#include "test-ui-util.h"

static gboolean
timed_out (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

void
test_ui_wait_for (TestUiCondition cond, gpointer data, guint seconds, const char *what)
{
  gboolean expired = FALSE;
  guint id = g_timeout_add_seconds (seconds, timed_out, &expired);
  while (!cond (data) && !expired)
    g_main_context_iteration (NULL, TRUE);
  if (!expired)
    g_source_remove (id);
  if (expired && !cond (data))
    g_error ("timed out after %u s waiting for %s", seconds, what);
}

void
test_ui_pump (guint ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;
  while (g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, FALSE);
}

gboolean
test_ui_log_fatal (const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  if (strstr (message, "session bus") || strstr (message, "dbus"))
    return FALSE;
  for (const char *const *also = data; also && *also; also++)
    if (strstr (message, *also))
      return FALSE;
  return TRUE;
}

GdkTexture *
test_ui_render (GtkWidget *widget)
{
  int width = gtk_widget_get_width (widget), height = gtk_widget_get_height (widget);
  if (width <= 0 || height <= 0)
    return NULL;
  g_autoptr (GdkPaintable) paintable = gtk_widget_paintable_new (widget);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  g_autoptr (GskRenderNode) node = gtk_snapshot_free_to_node (snapshot);
  if (node == NULL)
    return NULL;
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (widget));
  return gsk_renderer_render_texture (renderer, node, &GRAPHENE_RECT_INIT (0, 0, width, height));
}

void
test_ui_photograph (GtkWidget *widget, const char *file)
{
  for (int i = 0; i < 100; i++)
    g_main_context_iteration (NULL, FALSE);
  g_autoptr (GdkTexture) texture = test_ui_render (widget);
  if (texture == NULL)
    {
      g_test_message ("%s: nothing to photograph (%dx%d)", file, gtk_widget_get_width (widget),
                      gtk_widget_get_height (widget));
      return;
    }
  g_autofree char *path = g_build_filename (g_getenv ("G_TEST_BUILDDIR"), file, NULL);
  g_assert_true (gdk_texture_save_to_png (texture, path));
  g_test_message ("wrote %s (%dx%d)", path, gdk_texture_get_width (texture),
                  gdk_texture_get_height (texture));
}

guint
test_ui_nodes_under (GraphviewWidget *view, const graphene_rect_t *area)
{
  GraphviewLayout *layout = graphview_renderer_get_layout (graphview_widget_get_renderer (view));
  double zoom = graphview_widget_get_zoom (view), ox, oy;
  graphview_widget_get_origin (view, &ox, &oy);
  guint n = 0;
  for (guint i = 0; i < graphview_layout_get_n_items (layout); i++)
    {
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      graphene_rect_t box = GRAPHENE_RECT_INIT ((r->x - ox) * zoom, (r->y - oy) * zoom,
                                                r->width * zoom, r->height * zoom);
      n += graphene_rect_intersection (&box, area, NULL);
    }
  return n;
}

