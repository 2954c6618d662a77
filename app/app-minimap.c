#define G_LOG_DOMAIN "app-minimap"
#include "config.h"

#include "app-minimap.h"

#include <glib/gi18n.h>

#define MINIMAP_WIDTH 200
#define MINIMAP_HEIGHT 140

struct _AppMinimap
{
  GtkWidget parent_instance;
  GraphviewWidget *view;
  guint tick_id;
  /* The view's state when last drawn: redraw only when it moved. */
  double zoom, x, y;
  int width, height;
  /* A drag in it holds it (graphview_widget_hold_overlay()): it does not step aside under
   * the pointer while it moves the view. */
  gboolean dragging;
};

G_DEFINE_FINAL_TYPE (AppMinimap, app_minimap, GTK_TYPE_WIDGET)

enum
{
  PROP_0,
  PROP_VIEW,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

/* Scale and offset that fit the whole layout into the minimap. */
static gboolean
geometry (AppMinimap *self, double *scale, double *ox, double *oy)
{
  if (self->view == NULL)
    return FALSE;
  GraphviewRenderer *renderer = graphview_widget_get_renderer (self->view);
  if (renderer == NULL || !graphview_renderer_is_ready (renderer))
    return FALSE;
  double w = 0, h = 0;
  graphview_renderer_get_bounds (renderer, &w, &h);
  if (w <= 0 || h <= 0)
    return FALSE;
  double W = gtk_widget_get_width (GTK_WIDGET (self)), H = gtk_widget_get_height (GTK_WIDGET (self));
  *scale = MIN (W / w, H / h);
  *ox = (W - w * *scale) / 2;
  *oy = (H - h * *scale) / 2;
  return TRUE;
}

static void
app_minimap_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  AppMinimap *self = APP_MINIMAP (widget);
  double W = gtk_widget_get_width (widget), H = gtk_widget_get_height (widget);
  cairo_t *cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, W, H));
  double scale, ox, oy;
  if (geometry (self, &scale, &ox, &oy))
    {
      GraphviewRenderer *renderer = graphview_widget_get_renderer (self->view);
      /* The view's palette (it follows the style), its background under the graph. */
      const GraphviewPalette *pal = graphview_renderer_get_palette (renderer);
      cairo_set_source_rgb (cr, pal->background.r, pal->background.g, pal->background.b);
      cairo_paint (cr);
      cairo_save (cr);
      cairo_translate (cr, ox, oy);
      GraphviewViewport vp = { scale, 0, 0, W - 2 * ox, H - 2 * oy };
      graphview_renderer_draw_static (renderer, cr, &vp);
      cairo_restore (cr);

      /* The part of the graph the main view shows. */
      double zoom = graphview_widget_get_zoom (self->view), x, y;
      graphview_widget_get_origin (self->view, &x, &y);
      double vw = gtk_widget_get_width (GTK_WIDGET (self->view)) / zoom;
      double vh = gtk_widget_get_height (GTK_WIDGET (self->view)) / zoom;
      cairo_rectangle (cr, ox + x * scale, oy + y * scale, vw * scale, vh * scale);
      GraphviewRgb c = pal->view_rect;
      cairo_set_source_rgba (cr, c.r, c.g, c.b, 0.15);
      cairo_fill_preserve (cr);
      cairo_set_source_rgba (cr, c.r, c.g, c.b, 0.9);
      cairo_set_line_width (cr, 1.5);
      cairo_stroke (cr);
    }
  cairo_destroy (cr);
}

static void
move_view_to (AppMinimap *self, double mx, double my)
{
  double scale, ox, oy;
  if (!geometry (self, &scale, &ox, &oy))
    return;
  double zoom = graphview_widget_get_zoom (self->view), x, y;
  graphview_widget_get_origin (self->view, &x, &y);
  /* Centre the view on the world point under the pointer. */
  double wx = (mx - ox) / scale, wy = (my - oy) / scale;
  double vw = gtk_widget_get_width (GTK_WIDGET (self->view)) / zoom;
  double vh = gtk_widget_get_height (GTK_WIDGET (self->view)) / zoom;
  double tx = wx - vw / 2, ty = wy - vh / 2;
  graphview_widget_pan (self->view, (x - tx) * zoom, (y - ty) * zoom);
}

/* The view steps the minimap aside while nodes lie under it, as every overlay registered
 * with graphview_widget_add_overlay() (the window does that); a drag in it holds it. */
static void
hold (AppMinimap *self, gboolean dragging)
{
  if (self->dragging == dragging)
    return;
  self->dragging = dragging;
  if (self->view != NULL)
    graphview_widget_hold_overlay (self->view, GTK_WIDGET (self), dragging);
}

static void
on_drag_begin (GtkGestureDrag *drag, double x, double y, AppMinimap *self)
{
  hold (self, TRUE);
  move_view_to (self, x, y);
}

static void
on_drag_end (GtkGestureDrag *drag, double dx, double dy, AppMinimap *self)
{
  hold (self, FALSE);
}

gboolean
app_minimap_get_aside (AppMinimap *self)
{
  g_return_val_if_fail (APP_IS_MINIMAP (self), FALSE);
  return self->view != NULL && graphview_widget_get_overlay_aside (self->view, GTK_WIDGET (self));
}

static void
on_drag_update (GtkGestureDrag *drag, double dx, double dy, AppMinimap *self)
{
  double x, y;
  gtk_gesture_drag_get_start_point (drag, &x, &y);
  move_view_to (self, x + dx, y + dy);
}

static gboolean
tick (GtkWidget *widget, GdkFrameClock *clock, gpointer data)
{
  AppMinimap *self = APP_MINIMAP (widget);
  if (self->view == NULL)
    return G_SOURCE_CONTINUE;
  double zoom = graphview_widget_get_zoom (self->view), x, y;
  graphview_widget_get_origin (self->view, &x, &y);
  int w = gtk_widget_get_width (GTK_WIDGET (self->view));
  int h = gtk_widget_get_height (GTK_WIDGET (self->view));
  if (zoom != self->zoom || x != self->x || y != self->y || w != self->width || h != self->height)
    {
      self->zoom = zoom, self->x = x, self->y = y, self->width = w, self->height = h;
      gtk_widget_queue_draw (widget);
    }
  return G_SOURCE_CONTINUE;
}

static void
on_view_changed (AppMinimap *self)
{
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

GtkWidget *
app_minimap_new (void)
{
  return g_object_new (APP_TYPE_MINIMAP, NULL);
}

GraphviewWidget *
app_minimap_get_view (AppMinimap *self)
{
  g_return_val_if_fail (APP_IS_MINIMAP (self), NULL);
  return self->view;
}

void
app_minimap_set_view (AppMinimap *self, GraphviewWidget *view)
{
  g_return_if_fail (APP_IS_MINIMAP (self));
  hold (self, FALSE);
  if (self->view)
    g_signal_handlers_disconnect_by_data (self->view, self);
  g_set_object (&self->view, view);
  if (view)
    g_signal_connect_swapped (view, "layout-ready", G_CALLBACK (on_view_changed), self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_VIEW]);
}

static void
app_minimap_dispose (GObject *object)
{
  AppMinimap *self = APP_MINIMAP (object);
  if (self->view)
    g_signal_handlers_disconnect_by_data (self->view, self);
  g_clear_object (&self->view);
  G_OBJECT_CLASS (app_minimap_parent_class)->dispose (object);
}

static void
app_minimap_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  switch (prop_id)
    {
    case PROP_VIEW: g_value_set_object (value, APP_MINIMAP (object)->view); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_minimap_set_property (GObject *object, guint prop_id, const GValue *value,
                          GParamSpec *pspec)
{
  switch (prop_id)
    {
    case PROP_VIEW: app_minimap_set_view (APP_MINIMAP (object), g_value_get_object (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_minimap_measure (GtkWidget *widget, GtkOrientation orientation, int for_size, int *minimum,
                     int *natural, int *minimum_baseline, int *natural_baseline)
{
  *minimum = *natural = orientation == GTK_ORIENTATION_HORIZONTAL ? MINIMAP_WIDTH : MINIMAP_HEIGHT;
}

static void
app_minimap_class_init (AppMinimapClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_minimap_dispose;
  object_class->get_property = app_minimap_get_property;
  object_class->set_property = app_minimap_set_property;
  widget_class->snapshot = app_minimap_snapshot;
  widget_class->measure = app_minimap_measure;
  properties[PROP_VIEW] = g_param_spec_object ("view", NULL, NULL, GRAPHVIEW_TYPE_WIDGET,
                                               G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
                                                   | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  gtk_widget_class_set_css_name (widget_class, "minimap");
}

static void
app_minimap_init (AppMinimap *self)
{
  gtk_widget_add_css_class (GTK_WIDGET (self), "card");
  gtk_widget_set_overflow (GTK_WIDGET (self), GTK_OVERFLOW_HIDDEN);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self), _("Click or drag to move the view"));
  GtkGesture *drag = gtk_gesture_drag_new ();
  g_signal_connect (drag, "drag-begin", G_CALLBACK (on_drag_begin), self);
  g_signal_connect (drag, "drag-update", G_CALLBACK (on_drag_update), self);
  g_signal_connect (drag, "drag-end", G_CALLBACK (on_drag_end), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drag));
  self->tick_id = gtk_widget_add_tick_callback (GTK_WIDGET (self), tick, NULL, NULL);
}
