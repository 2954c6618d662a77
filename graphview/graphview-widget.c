#define G_LOG_DOMAIN "graphview-widget"

#include "config.h"

#include <math.h>
#include <string.h>

#include "graphview-layouter.h"
#include "graphview-widget.h"

/* Kinetic panning: velocity decays as exp(-FRICTION t) and stops below MIN_SPEED px/s. */
#define FRICTION 4.0
#define MIN_SPEED 15.0
#define KEY_PAN 60.0

struct _GraphviewWidget
{
  GtkWidget parent_instance;

  GraphviewModel *model;
  gulong changed_id;
  GraphviewLayouter *layouter;
  GraphviewRenderer *renderer;
  GCancellable *cancellable;
  gboolean fitted; /* the view has been fitted once the first layout arrived */
  int focus_op;    /* after a fold change from the canvas, the op to select, or -1 */
  /* Where the toggled item's top-centre was then, in world x and widget coordinates: the
   * group that shows focus_op afterwards goes under that point. */
  double anchor_wx, anchor_sx, anchor_sy;

  double scale; /* device pixels per world point */
  double x, y;  /* world point at the widget's top-left */

  /* The static layer for one view. */
  GdkTexture *cache;
  double cache_scale, cache_x, cache_y;
  int cache_width, cache_height;
  guint static_serial, cache_serial;

  /* Widgets drawn over the graph (minimap, buttons, cards), Overlay each: fitting and
   * centring keep the graph out from under them, as from under the legend, and each steps
   * aside while nodes lie under it (update_asides()). */
  GArray *overlays;
  GArray *asides_key; /* asides_key() when last checked */
  gboolean show_legend;
  double legend_width, legend_height;
  gboolean legend_aside;
  gboolean dark; /* the style's: light text on a dark theme */

  double pointer_x, pointer_y;
  int hover;
  int selected;

  /* Drag and kinetic motion. */
  double drag_x, drag_y; /* origin at drag begin */
  double last_dx, last_dy;
  gint64 last_time;
  double vx, vy; /* px/s */
  guint kinetic_id;
  gint64 kinetic_time;
  double pinch_scale;

  /* The view last announced with "viewport-changed". */
  double told_scale, told_x, told_y;
};

/* One widget over the graph. */
typedef struct
{
  GtkWidget *widget;              /* owned */
  GtkEventController *motion;     /* on the widget: is the pointer on it? */
  gboolean aside;
  guint holds;                    /* graphview_widget_hold_overlay() */
} Overlay;

G_DEFINE_FINAL_TYPE (GraphviewWidget, graphview_widget, GTK_TYPE_WIDGET)

enum
{
  SIGNAL_ITEM_HOVERED,
  SIGNAL_SELECTION_CHANGED,
  SIGNAL_ITEM_ACTIVATED,
  SIGNAL_LAYOUT_READY,
  SIGNAL_VIEWPORT_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void request_layout (GraphviewWidget *self);
static void center_on_item (GraphviewWidget *self, guint item);
static void apply_style (GraphviewWidget *self);

/* View ------------------------------------------------------------------------------------- */

static void
static_changed (GraphviewWidget *self)
{
  self->static_serial++;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

#define LEGEND_X 4
#define LEGEND_BOTTOM 62

/* The rectangles, in widget coordinates, that overlays cover: each shown overlay widget and
 * the legend. Returns how many it filled (at most @max). */
static guint
covered_rects (GraphviewWidget *self, graphene_rect_t *rects, guint max)
{
  guint n = 0;
  int height = gtk_widget_get_height (GTK_WIDGET (self));
  for (guint i = 0; self->overlays && i < self->overlays->len && n < max; i++)
    {
      GtkWidget *w = g_array_index (self->overlays, Overlay, i).widget;
      graphene_rect_t r;
      if (gtk_widget_get_mapped (w) && gtk_widget_compute_bounds (w, GTK_WIDGET (self), &r)
          && r.size.width > 0 && r.size.height > 0)
        rects[n++] = r;
    }
  if (self->show_legend && self->legend_width > 0 && n < max)
    rects[n++] = GRAPHENE_RECT_INIT (LEGEND_X, height - LEGEND_BOTTOM, self->legend_width + 4,
                                     self->legend_height + 4);
  return n;
}

#define MAX_COVERED 8

void
graphview_widget_get_free_area (GraphviewWidget *self, graphene_rect_t *area)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  int width = gtk_widget_get_width (GTK_WIDGET (self));
  int height = gtk_widget_get_height (GTK_WIDGET (self));
  *area = GRAPHENE_RECT_INIT (0, 0, MAX (width, 1), MAX (height, 1));
  graphene_rect_t covered[MAX_COVERED];
  guint n = covered_rects (self, covered, MAX_COVERED);
  GraphviewLayout *layout = self->renderer ? graphview_renderer_get_layout (self->renderer) : NULL;
  if (n == 0 || layout == NULL || width <= 0 || height <= 0)
    return;
  double w, h;
  graphview_renderer_get_bounds (self->renderer, &w, &h);
  /* Each overlay sits at an edge or a corner: the free area leaves it out by giving up the
   * band beside it or the band above/below it. Of the 2^n choices, the one where the graph
   * fits largest wins. */
  double best = -1;
  for (guint mask = 0; mask < (1u << n); mask++)
    {
      double x0 = 0, y0 = 0, x1 = width, y1 = height;
      for (guint i = 0; i < n; i++)
        {
          const graphene_rect_t *r = &covered[i];
          double cx = r->origin.x + r->size.width / 2, cy = r->origin.y + r->size.height / 2;
          if (mask & (1u << i))
            {
              if (cx > width / 2.0)
                x1 = MIN (x1, r->origin.x);
              else
                x0 = MAX (x0, r->origin.x + r->size.width);
            }
          else if (cy > height / 2.0)
            y1 = MIN (y1, r->origin.y);
          else
            y0 = MAX (y0, r->origin.y + r->size.height);
        }
      if (x1 - x0 < 16 || y1 - y0 < 16)
        continue;
      double zoom = MIN ((x1 - x0) / w, (y1 - y0) / h);
      if (zoom > best)
        {
          best = zoom;
          *area = GRAPHENE_RECT_INIT (x0, y0, x1 - x0, y1 - y0);
        }
    }
}

double
graphview_widget_get_fit_zoom (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), 1);
  GraphviewLayout *layout = self->renderer ? graphview_renderer_get_layout (self->renderer) : NULL;
  int width = gtk_widget_get_width (GTK_WIDGET (self));
  int height = gtk_widget_get_height (GTK_WIDGET (self));
  if (layout == NULL || width <= 0 || height <= 0)
    return 1;
  double w, h;
  graphview_renderer_get_bounds (self->renderer, &w, &h);
  graphene_rect_t free;
  graphview_widget_get_free_area (self, &free);
  return MIN (MIN (free.size.width / w, free.size.height / h), GRAPHVIEW_WIDGET_MAX_ZOOM);
}

/* An overlay must not hide the graph it floats over: while any node of the view lies under
 * one, it steps aside (the style class "aside", which the app's CSS fades out, and no target,
 * so that clicks reach the nodes), and it comes back as soon as none does. The legend, drawn
 * here, is left out of the drawing the same way (clicks reach the nodes under it anyway). An
 * aside overlay still counts as covered space (covered_rects()), so Fit, which keeps nodes out
 * from under every overlay, brings them all back, and stepping aside never changes the least
 * zoom. One in use stays: while the pointer is on it (a second click on Zoom In must not land
 * on the node the first brought under the button) or while it holds itself (the minimap's
 * drag); it steps aside once let go. Checked once a frame against the view, the layout and
 * every overlay's place, since any of them may change (a card gets longer, the window
 * narrower). */
static void
update_asides (GraphviewWidget *self)
{
  for (guint i = 0; self->overlays && i < self->overlays->len; i++)
    {
      Overlay *o = &g_array_index (self->overlays, Overlay, i);
      gboolean aside = FALSE;
      graphene_rect_t r;
      if (gtk_widget_get_mapped (o->widget)
          && gtk_widget_compute_bounds (o->widget, GTK_WIDGET (self), &r))
        aside = graphview_widget_count_items_in (self, &r) > 0;
      if (aside && !o->aside
          && (o->holds > 0
              || gtk_event_controller_motion_contains_pointer (
                  GTK_EVENT_CONTROLLER_MOTION (o->motion))))
        aside = FALSE;
      if (aside == o->aside)
        continue;
      o->aside = aside;
      gtk_widget_set_can_target (o->widget, !aside);
      if (aside)
        gtk_widget_add_css_class (o->widget, "aside");
      else
        gtk_widget_remove_css_class (o->widget, "aside");
    }
  graphene_rect_t legend;
  gboolean aside = graphview_widget_get_legend_rect (self, &legend)
                   && graphview_widget_count_items_in (self, &legend) > 0;
  if (aside != self->legend_aside)
    {
      self->legend_aside = aside;
      gtk_widget_queue_draw (GTK_WIDGET (self));
    }
}

/* What the asides depend on, as numbers: counting nodes only when one of them changed keeps
 * the frame's check to a few comparisons. */
static GArray *
asides_key (GraphviewWidget *self)
{
  GArray *key = g_array_new (FALSE, FALSE, sizeof (double));
  GraphviewLayout *layout = self->renderer ? graphview_renderer_get_layout (self->renderer) : NULL;
  double view[] = { self->scale, self->x, self->y, gtk_widget_get_width (GTK_WIDGET (self)),
                    gtk_widget_get_height (GTK_WIDGET (self)), (double) (guintptr) layout,
                    graphview_widget_is_ready (self), self->static_serial, self->show_legend,
                    self->legend_width, self->legend_height };
  g_array_append_vals (key, view, G_N_ELEMENTS (view));
  for (guint i = 0; i < self->overlays->len; i++)
    {
      Overlay *o = &g_array_index (self->overlays, Overlay, i);
      graphene_rect_t r = GRAPHENE_RECT_INIT (0, 0, 0, 0);
      gboolean mapped = gtk_widget_get_mapped (o->widget)
                        && gtk_widget_compute_bounds (o->widget, GTK_WIDGET (self), &r);
      double of[] = { mapped, r.origin.x, r.origin.y, r.size.width, r.size.height, o->holds,
                      gtk_event_controller_motion_contains_pointer (
                          GTK_EVENT_CONTROLLER_MOTION (o->motion)) };
      g_array_append_vals (key, of, G_N_ELEMENTS (of));
    }
  return key;
}

static gboolean
asides_tick (GtkWidget *widget, GdkFrameClock *clock, gpointer data)
{
  GraphviewWidget *self = GRAPHVIEW_WIDGET (widget);
  if (self->overlays == NULL) /* disposed */
    return G_SOURCE_REMOVE;
  GArray *key = asides_key (self);
  if (self->asides_key == NULL || self->asides_key->len != key->len
      || memcmp (self->asides_key->data, key->data, key->len * sizeof (double)) != 0)
    update_asides (self);
  g_clear_pointer (&self->asides_key, g_array_unref);
  self->asides_key = key;
  return G_SOURCE_CONTINUE;
}

static void
clear_overlay (gpointer data)
{
  Overlay *o = data;
  if (gtk_event_controller_get_widget (o->motion) == o->widget)
    gtk_widget_remove_controller (o->widget, o->motion);
  g_object_unref (o->widget);
}

void
graphview_widget_add_overlay (GraphviewWidget *self, GtkWidget *overlay)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (GTK_IS_WIDGET (overlay));
  if (self->overlays == NULL)
    {
      self->overlays = g_array_new (FALSE, TRUE, sizeof (Overlay));
      g_array_set_clear_func (self->overlays, clear_overlay);
      gtk_widget_add_tick_callback (GTK_WIDGET (self), asides_tick, NULL, NULL);
    }
  Overlay o = { g_object_ref (overlay), gtk_event_controller_motion_new (), FALSE, 0 };
  gtk_widget_add_controller (overlay, o.motion);
  g_array_append_val (self->overlays, o);
}

static Overlay *
find_overlay (GraphviewWidget *self, GtkWidget *overlay)
{
  for (guint i = 0; self->overlays && i < self->overlays->len; i++)
    if (g_array_index (self->overlays, Overlay, i).widget == overlay)
      return &g_array_index (self->overlays, Overlay, i);
  return NULL;
}

gboolean
graphview_widget_get_overlay_aside (GraphviewWidget *self, GtkWidget *overlay)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), FALSE);
  Overlay *o = find_overlay (self, overlay);
  return o != NULL && o->aside;
}

void
graphview_widget_hold_overlay (GraphviewWidget *self, GtkWidget *overlay, gboolean hold)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  Overlay *o = find_overlay (self, overlay);
  if (o == NULL) /* not over this view: nothing to hold */
    return;
  g_return_if_fail (hold || o->holds > 0);
  /* The next frame's check sees the change. */
  o->holds += hold ? 1 : -1;
}

gboolean
graphview_widget_get_legend_aside (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), FALSE);
  return self->legend_aside;
}

gboolean
graphview_widget_get_show_legend (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), FALSE);
  return self->show_legend;
}

void
graphview_widget_set_show_legend (GraphviewWidget *self, gboolean show)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  show = !!show;
  if (self->show_legend == show)
    return;
  self->show_legend = show;
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_object_notify (G_OBJECT (self), "show-legend");
}

gboolean
graphview_widget_get_legend_rect (GraphviewWidget *self, graphene_rect_t *rect)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), FALSE);
  if (!self->show_legend || self->legend_width <= 0)
    return FALSE;
  int height = gtk_widget_get_height (GTK_WIDGET (self));
  *rect = GRAPHENE_RECT_INIT (LEGEND_X, height - LEGEND_BOTTOM, self->legend_width + 4,
                              self->legend_height + 4);
  return TRUE;
}

/* Every change of zoom or origin ends in clamp_view(): it says so once per change, so that
 * another view can follow (the compare panes). */
static void
tell_viewport (GraphviewWidget *self)
{
  if (self->scale == self->told_scale && self->x == self->told_x && self->y == self->told_y)
    return;
  self->told_scale = self->scale;
  self->told_x = self->x;
  self->told_y = self->y;
  g_signal_emit (self, signals[SIGNAL_VIEWPORT_CHANGED], 0);
}

static void clamp_view_only (GraphviewWidget *self);

/* Keeps some of the graph in view: the origin may not leave the bounds by more than the
 * view itself. */
static void
clamp_view (GraphviewWidget *self)
{
  clamp_view_only (self);
  tell_viewport (self);
}

static void
clamp_view_only (GraphviewWidget *self)
{
  double fit = graphview_widget_get_fit_zoom (self);
  self->scale = CLAMP (self->scale, fit, GRAPHVIEW_WIDGET_MAX_ZOOM);
  GraphviewLayout *layout = self->renderer ? graphview_renderer_get_layout (self->renderer) : NULL;
  if (layout == NULL)
    return;
  double w, h;
  graphview_renderer_get_bounds (self->renderer, &w, &h);
  double vw = gtk_widget_get_width (GTK_WIDGET (self)) / self->scale;
  double vh = gtk_widget_get_height (GTK_WIDGET (self)) / self->scale;
  graphene_rect_t free;
  graphview_widget_get_free_area (self, &free);
  double fx = free.origin.x / self->scale, fy = free.origin.y / self->scale;
  double fw = free.size.width / self->scale, fh = free.size.height / self->scale;
  /* A graph smaller than the free area is centred in it. */
  if (w <= fw)
    self->x = (w - fw) / 2 - fx;
  else
    self->x = CLAMP (self->x, -vw / 2, w - vw / 2);
  if (h <= fh)
    self->y = (h - fh) / 2 - fy;
  else
    self->y = CLAMP (self->y, -vh / 2, h - vh / 2);
}

void
graphview_widget_zoom_to_fit (GraphviewWidget *self)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  self->scale = graphview_widget_get_fit_zoom (self);
  self->x = self->y = 0;
  clamp_view (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
graphview_widget_zoom_at (GraphviewWidget *self, double factor, double x, double y)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (factor > 0);
  double wx = self->x + x / self->scale, wy = self->y + y / self->scale;
  double fit = graphview_widget_get_fit_zoom (self);
  self->scale = CLAMP (self->scale * factor, fit, GRAPHVIEW_WIDGET_MAX_ZOOM);
  self->x = wx - x / self->scale;
  self->y = wy - y / self->scale;
  clamp_view (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
graphview_widget_set_viewport (GraphviewWidget *self, double zoom, double x, double y)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (zoom > 0);
  self->scale = zoom;
  self->x = x;
  self->y = y;
  clamp_view (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
graphview_widget_pan (GraphviewWidget *self, double dx, double dy)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  self->x -= dx / self->scale;
  self->y -= dy / self->scale;
  clamp_view (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

double
graphview_widget_get_zoom (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), 1);
  return self->scale;
}

void
graphview_widget_get_origin (GraphviewWidget *self, double *x, double *y)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  *x = self->x;
  *y = self->y;
}

void
graphview_widget_to_world (GraphviewWidget *self, double x, double y, double *wx, double *wy)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  *wx = self->x + x / self->scale;
  *wy = self->y + y / self->scale;
}

int
graphview_widget_item_at (GraphviewWidget *self, double x, double y)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), -1);
  if (!graphview_widget_is_ready (self))
    return -1;
  double wx, wy;
  graphview_widget_to_world (self, x, y, &wx, &wy);
  return graphview_layout_item_at (graphview_renderer_get_layout (self->renderer), wx, wy);
}

guint
graphview_widget_count_items_in (GraphviewWidget *self, const graphene_rect_t *area)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), 0);
  g_return_val_if_fail (area != NULL, 0);
  if (!graphview_widget_is_ready (self))
    return 0;
  GraphviewLayout *layout = graphview_renderer_get_layout (self->renderer);
  /* @area in world coordinates, against every item's box. */
  GraphviewRect world
      = { self->x + area->origin.x / self->scale, self->y + area->origin.y / self->scale,
          area->size.width / self->scale, area->size.height / self->scale };
  guint n = 0;
  for (guint i = 0; i < graphview_layout_get_n_items (layout); i++)
    n += graphview_rect_intersects (graphview_layout_get_item_rect (layout, i), &world);
  return n;
}

void
graphview_widget_center_on_item (GraphviewWidget *self, guint item)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  if (!graphview_widget_is_ready (self) || item >= graphview_model_get_n_items (self->model))
    return;
  center_on_item (self, item);
}

static void
center_on_item (GraphviewWidget *self, guint item)
{
  const GraphviewRect *r
      = graphview_layout_get_item_rect (graphview_renderer_get_layout (self->renderer), item);
  graphene_rect_t free;
  graphview_widget_get_free_area (self, &free);
  double cx = (free.origin.x + free.size.width / 2) / self->scale;
  double cy = (free.origin.y + free.size.height / 2) / self->scale;
  self->x = r->x + r->width / 2 - cx;
  self->y = r->y + r->height / 2 - cy;
  clamp_view (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
scroll_into_view (GraphviewWidget *self, guint item)
{
  const GraphviewRect *r
      = graphview_layout_get_item_rect (graphview_renderer_get_layout (self->renderer), item);
  double vw = gtk_widget_get_width (GTK_WIDGET (self)) / self->scale;
  double vh = gtk_widget_get_height (GTK_WIDGET (self)) / self->scale;
  if (r->x < self->x || r->x + r->width > self->x + vw || r->y < self->y
      || r->y + r->height > self->y + vh)
    center_on_item (self, item);
}

/* Selection and hover ---------------------------------------------------------------------- */

int
graphview_widget_get_selected (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), -1);
  return self->selected;
}

void
graphview_widget_set_selected (GraphviewWidget *self, int item)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  if (!graphview_widget_is_ready (self))
    item = -1;
  else if (item >= (int)graphview_model_get_n_items (self->model))
    item = -1;
  if (item < -1)
    item = -1;
  if (item == self->selected)
    return;
  self->selected = item;
  graphview_renderer_set_selected (self->renderer, item);
  if (item >= 0)
    scroll_into_view (self, item);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[SIGNAL_SELECTION_CHANGED], 0, item);
}

static void
set_hover (GraphviewWidget *self, int item)
{
  if (item == self->hover)
    return;
  self->hover = item;
  if (self->renderer)
    graphview_renderer_set_hover (self->renderer, item);
  gtk_widget_queue_draw (GTK_WIDGET (self));
  g_signal_emit (self, signals[SIGNAL_ITEM_HOVERED], 0, item);
}

/* The box of what @item belongs to: the frame of the unfolded block an op node is in, else the
 * item's own box. */
static GraphviewRect
group_rect (GraphviewModel *model, GraphviewLayout *layout, guint item)
{
  const GraphviewItem *it = graphview_model_get_item (model, item);
  if (it->kind == GRAPHVIEW_ITEM_OP && it->run >= 0)
    for (guint f = 0; f < graphview_layout_get_n_frames (layout); f++)
      {
        const GraphviewFrame *frame = graphview_layout_get_frame (layout, f);
        if (frame->run == it->run && frame->block == it->first_block)
          return frame->rect;
      }
  return *graphview_layout_get_item_rect (layout, item);
}

static void
activate_item (GraphviewWidget *self, int item)
{
  if (item < 0 || !graphview_widget_is_ready (self))
    return;
  g_signal_emit (self, signals[SIGNAL_ITEM_ACTIVATED], 0, item);
  const GraphviewItem *it = graphview_model_get_item (self->model, item);
  if (it->run < 0)
    return; /* a loose op neither folds nor unfolds */
  self->focus_op = it->first_op;
  /* The toggled item's top-centre stays under the same widget point: unfolding a block node
   * grows its frame down from where the node was, folding puts the node where the op was. */
  const GraphviewRect *r
      = graphview_layout_get_item_rect (graphview_renderer_get_layout (self->renderer), item);
  self->anchor_wx = r->x + r->width / 2;
  self->anchor_sx = (self->anchor_wx - self->x) * self->scale;
  self->anchor_sy = (r->y - self->y) * self->scale;
  /* Folding changes the items: the model emits "changed" and a new layout follows. */
  graphview_model_toggle_item (self->model, item);
}

void
graphview_widget_activate_item (GraphviewWidget *self, guint item)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  if (self->model == NULL || item >= graphview_model_get_n_items (self->model))
    return;
  activate_item (self, (int)item);
}

/* Layout ----------------------------------------------------------------------------------- */

static void
layout_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GraphviewWidget) self = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GraphviewLayout) layout
      = graphview_layouter_layout_finish (GRAPHVIEW_LAYOUTER (source), result, &error);
  if (layout == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_warning ("graph layout failed: %s", error->message);
      return;
    }
  if (self->model == NULL
      || graphview_layout_get_serial (layout) != graphview_model_get_serial (self->model))
    return; /* a newer request is on its way */

  graphview_renderer_set_layout (self->renderer, layout);
  self->hover = -1;
  graphview_renderer_set_hover (self->renderer, -1);
  if (!self->fitted)
    {
      self->fitted = TRUE;
      graphview_widget_zoom_to_fit (self);
    }
  else if (self->focus_op < 0)
    clamp_view (self);
  if (self->focus_op >= 0)
    {
      guint item = graphview_model_get_item_of_op (self->model, self->focus_op);
      self->focus_op = -1;
      clamp_view_only (self); /* the zoom first: folding may raise the fit zoom */
      /* The group now showing the op goes under the anchor: its top at the anchor's height,
       * and horizontally the same world x if the group spans it (then, with a stable layout,
       * the view does not move at all), else its nearest side. No centring: the view stays
       * where the user was looking. */
      GraphviewRect g = group_rect (self->model, layout, item);
      double wx = CLAMP (self->anchor_wx, g.x, g.x + g.width);
      self->x = wx - self->anchor_sx / self->scale;
      self->y = g.y - self->anchor_sy / self->scale;
      clamp_view (self);
      self->selected = (int)item;
      graphview_renderer_set_selected (self->renderer, (int)item);
      g_signal_emit (self, signals[SIGNAL_SELECTION_CHANGED], 0, (int)item);
    }
  static_changed (self);
  g_signal_emit (self, signals[SIGNAL_LAYOUT_READY], 0);
}

static void
request_layout (GraphviewWidget *self)
{
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->model == NULL)
    return;
  self->cancellable = g_cancellable_new ();
  /* From the layout shown, so that a fold change keeps what it did not touch in place. */
  GraphviewLayout *shown = self->renderer ? graphview_renderer_get_layout (self->renderer) : NULL;
  graphview_layouter_layout_stable_async (self->layouter, self->model, shown, self->cancellable,
                                          layout_done, g_object_ref (self));
}

static void
model_changed (GraphviewModel *model, GraphviewWidget *self)
{
  /* Items are renumbered: the old selection means nothing now. */
  if (self->selected >= 0)
    {
      self->selected = -1;
      graphview_renderer_set_selected (self->renderer, -1);
      g_signal_emit (self, signals[SIGNAL_SELECTION_CHANGED], 0, -1);
    }
  request_layout (self);
  static_changed (self);
}

gboolean
graphview_widget_is_ready (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), FALSE);
  return self->renderer != NULL && graphview_renderer_is_ready (self->renderer);
}

void
graphview_widget_set_model (GraphviewWidget *self, GraphviewModel *model)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (model == NULL || GRAPHVIEW_IS_MODEL (model));
  if (self->model == model)
    return;
  if (self->model)
    g_clear_signal_handler (&self->changed_id, self->model);
  g_set_object (&self->model, model);
  g_clear_object (&self->renderer);
  self->fitted = FALSE;
  self->selected = self->hover = self->focus_op = -1;
  if (model)
    {
      self->renderer = graphview_renderer_new (model);
      graphview_renderer_set_show_legend (self->renderer, TRUE);
      apply_style (self);
      self->changed_id = g_signal_connect (model, "changed", G_CALLBACK (model_changed), self);
    }
  request_layout (self);
  static_changed (self);
}

GraphviewModel *
graphview_widget_get_model (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), NULL);
  return self->model;
}

GraphviewRenderer *
graphview_widget_get_renderer (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), NULL);
  return self->renderer;
}

void
graphview_widget_set_plan (GraphviewWidget *self, PlannerPlan *plan)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (self->renderer != NULL);
  graphview_renderer_set_plan (self->renderer, plan);
  static_changed (self);
}

void
graphview_widget_set_pipeline (GraphviewWidget *self, const PlannerPipeline *pipeline)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (self->renderer != NULL);
  graphview_renderer_set_pipeline (self->renderer, pipeline);
  static_changed (self);
}

void
graphview_widget_set_compare_plan (GraphviewWidget *self, PlannerPlan *other)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (self->renderer != NULL);
  graphview_renderer_set_compare_plan (self->renderer, other);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
graphview_widget_set_step (GraphviewWidget *self, int step)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  g_return_if_fail (self->renderer != NULL);
  /* An overlay: the cached static layer stays. */
  graphview_renderer_set_step (self->renderer, step);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
graphview_widget_set_highlighted_ops (GraphviewWidget *self, const guint *ops, guint n_ops)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  if (self->renderer == NULL)
    return;
  /* An overlay, as the step. */
  graphview_renderer_set_highlighted_ops (self->renderer, ops, n_ops);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
graphview_widget_redraw (GraphviewWidget *self)
{
  g_return_if_fail (GRAPHVIEW_IS_WIDGET (self));
  static_changed (self);
}

/* Drawing ---------------------------------------------------------------------------------- */

/* The palette follows the style: light text (the CSS colour the theme gives the widget) means
 * a dark style, whichever of AdwStyleManager or GTK's prefer-dark setting chose it. Text gets
 * the widget's font map and language. */
static void
apply_style (GraphviewWidget *self)
{
  GdkRGBA fg;
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_get_color (gtk_widget_get_style_context (GTK_WIDGET (self)), &fg);
  G_GNUC_END_IGNORE_DEPRECATIONS
  self->dark = graphview_palette_is_dark_foreground (fg.red, fg.green, fg.blue);
  if (self->renderer)
    {
      graphview_renderer_set_dark (self->renderer, self->dark);
      graphview_renderer_set_pango_context (self->renderer,
                                            gtk_widget_get_pango_context (GTK_WIDGET (self)));
    }
}

static void
graphview_widget_css_changed (GtkWidget *widget, GtkCssStyleChange *change)
{
  GraphviewWidget *self = GRAPHVIEW_WIDGET (widget);
  GTK_WIDGET_CLASS (graphview_widget_parent_class)->css_changed (widget, change);
  gboolean was_dark = self->dark;
  apply_style (self);
  if (self->dark != was_dark)
    static_changed (self);
}

gboolean
graphview_widget_get_dark (GraphviewWidget *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_WIDGET (self), FALSE);
  return self->dark;
}

static GdkTexture *
render_static (GraphviewWidget *self, int width, int height, int factor)
{
  cairo_surface_t *surface
      = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, width * factor, height * factor);
  cairo_t *cr = cairo_create (surface);
  const GraphviewPalette *pal = graphview_renderer_get_palette (self->renderer);
  cairo_set_source_rgb (cr, pal->background.r, pal->background.g, pal->background.b);
  cairo_paint (cr);
  GraphviewViewport vp
      = { self->scale * factor, self->x, self->y, width * factor, height * factor };
  graphview_renderer_draw_static (self->renderer, cr, &vp);
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  int stride = cairo_image_surface_get_stride (surface);
  /* Cairo's ARGB32 is GDK's default memory format (premultiplied, native-endian). */
  g_autoptr (GBytes) bytes
      = g_bytes_new (cairo_image_surface_get_data (surface), (gsize)stride * height * factor);
  GdkTexture *texture
      = gdk_memory_texture_new (width * factor, height * factor, GDK_MEMORY_DEFAULT, bytes, stride);
  cairo_surface_destroy (surface);
  return texture;
}

static void
graphview_widget_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  GraphviewWidget *self = GRAPHVIEW_WIDGET (widget);
  int width = gtk_widget_get_width (widget), height = gtk_widget_get_height (widget);
  if (width <= 0 || height <= 0)
    return;
  graphene_rect_t bounds = GRAPHENE_RECT_INIT (0, 0, width, height);
  if (!graphview_widget_is_ready (self))
    {
      const GraphviewRgb bg = graphview_palette_get (self->dark)->background;
      gtk_snapshot_append_color (snapshot, &(GdkRGBA){ bg.r, bg.g, bg.b, 1 }, &bounds);
      return;
    }

  int factor = gtk_widget_get_scale_factor (widget);
  if (self->cache == NULL || self->cache_serial != self->static_serial
      || self->cache_scale != self->scale || self->cache_x != self->x || self->cache_y != self->y
      || self->cache_width != width * factor || self->cache_height != height * factor)
    {
      g_clear_object (&self->cache);
      self->cache = render_static (self, width, height, factor);
      self->cache_serial = self->static_serial;
      self->cache_scale = self->scale;
      self->cache_x = self->x;
      self->cache_y = self->y;
      self->cache_width = width * factor;
      self->cache_height = height * factor;
    }
  gtk_snapshot_append_texture (snapshot, self->cache, &bounds);

  cairo_t *cr = gtk_snapshot_append_cairo (snapshot, &bounds);
  GraphviewViewport vp = { self->scale, self->x, self->y, width, height };
  graphview_renderer_draw_overlays (self->renderer, cr, &vp);
  /* The legend in the bottom-left corner, on a translucent card; fitting keeps nodes out
   * from under it, and while nodes lie under it all the same (zoomed in) it steps aside as the
   * overlay widgets do: its size is still taken, for Fit and to know when to come back. */
  if (self->show_legend)
    {
      double lw, lh;
      cairo_push_group (cr);
      graphview_renderer_draw_legend (self->renderer, cr, LEGEND_X + 4, height - LEGEND_BOTTOM + 2,
                                      &lw, &lh);
      cairo_pattern_t *legend = cairo_pop_group (cr);
      if (!self->legend_aside)
        {
          cairo_rectangle (cr, LEGEND_X, height - LEGEND_BOTTOM, lw + 4, lh + 4);
          const GraphviewPalette *pal = graphview_renderer_get_palette (self->renderer);
          cairo_set_source_rgba (cr, pal->card.r, pal->card.g, pal->card.b, pal->card_alpha);
          cairo_fill (cr);
          cairo_set_source (cr, legend);
          cairo_paint (cr);
        }
      cairo_pattern_destroy (legend);
      if (lw != self->legend_width || lh != self->legend_height)
        {
          /* Known once drawn: the next fit leaves its room. */
          self->legend_width = lw;
          self->legend_height = lh;
        }
    }
  cairo_destroy (cr);
}

static void
graphview_widget_size_allocate (GtkWidget *widget, int width, int height, int baseline)
{
  GraphviewWidget *self = GRAPHVIEW_WIDGET (widget);
  if (graphview_widget_is_ready (self))
    clamp_view (self);
}

static void
graphview_widget_measure (GtkWidget *widget, GtkOrientation orientation, int for_size, int *minimum,
                          int *natural, int *minimum_baseline, int *natural_baseline)
{
  *minimum = 100;
  *natural = 600;
}

/* Input ------------------------------------------------------------------------------------ */

static gboolean
on_scroll (GtkEventControllerScroll *controller, double dx, double dy, GraphviewWidget *self)
{
  if (!graphview_widget_is_ready (self) || dy == 0)
    return FALSE;
  graphview_widget_zoom_at (self, pow (GRAPHVIEW_WIDGET_ZOOM_STEP, -dy), self->pointer_x,
                            self->pointer_y);
  return TRUE;
}

static void
on_motion (GtkEventControllerMotion *controller, double x, double y, GraphviewWidget *self)
{
  self->pointer_x = x;
  self->pointer_y = y;
  set_hover (self, graphview_widget_item_at (self, x, y));
}

static void
on_leave (GtkEventControllerMotion *controller, GraphviewWidget *self)
{
  set_hover (self, -1);
}

static void
stop_kinetic (GraphviewWidget *self)
{
  if (self->kinetic_id)
    gtk_widget_remove_tick_callback (GTK_WIDGET (self), self->kinetic_id);
  self->kinetic_id = 0;
}

static void
on_drag_begin (GtkGestureDrag *gesture, double x, double y, GraphviewWidget *self)
{
  stop_kinetic (self);
  self->drag_x = self->x;
  self->drag_y = self->y;
  self->last_dx = self->last_dy = 0;
  self->last_time = g_get_monotonic_time ();
  self->vx = self->vy = 0;
}

static void
on_drag_update (GtkGestureDrag *gesture, double dx, double dy, GraphviewWidget *self)
{
  gint64 now = g_get_monotonic_time ();
  double dt = (now - self->last_time) / 1e6;
  if (dt > 0.002)
    {
      /* A smoothed velocity, so one jittery event does not fling the view. */
      double vx = (dx - self->last_dx) / dt, vy = (dy - self->last_dy) / dt;
      self->vx = 0.6 * vx + 0.4 * self->vx;
      self->vy = 0.6 * vy + 0.4 * self->vy;
      self->last_dx = dx;
      self->last_dy = dy;
      self->last_time = now;
    }
  self->x = self->drag_x - dx / self->scale;
  self->y = self->drag_y - dy / self->scale;
  clamp_view (self);
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static gboolean
kinetic_tick (GtkWidget *widget, GdkFrameClock *clock, gpointer user_data)
{
  GraphviewWidget *self = GRAPHVIEW_WIDGET (widget);
  gint64 now = gdk_frame_clock_get_frame_time (clock);
  double dt = (now - self->kinetic_time) / 1e6;
  self->kinetic_time = now;
  if (dt <= 0)
    return G_SOURCE_CONTINUE;
  double decay = exp (-FRICTION * dt);
  graphview_widget_pan (self, self->vx * dt, self->vy * dt);
  self->vx *= decay;
  self->vy *= decay;
  if (hypot (self->vx, self->vy) < MIN_SPEED)
    {
      self->kinetic_id = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
on_drag_end (GtkGestureDrag *gesture, double dx, double dy, GraphviewWidget *self)
{
  /* A pause before release means no fling. */
  if ((g_get_monotonic_time () - self->last_time) > 80000
      || hypot (self->vx, self->vy) < MIN_SPEED * 4)
    return;
  GdkFrameClock *clock = gtk_widget_get_frame_clock (GTK_WIDGET (self));
  self->kinetic_time = clock ? gdk_frame_clock_get_frame_time (clock) : g_get_monotonic_time ();
  self->kinetic_id = gtk_widget_add_tick_callback (GTK_WIDGET (self), kinetic_tick, NULL, NULL);
}

static void
on_click (GtkGestureClick *gesture, int n_press, double x, double y, GraphviewWidget *self)
{
  gtk_widget_grab_focus (GTK_WIDGET (self));
  int item = graphview_widget_item_at (self, x, y);
  if (n_press == 2)
    activate_item (self, item);
  else
    graphview_widget_set_selected (self, item);
}

static void
on_pinch_begin (GtkGesture *gesture, GdkEventSequence *sequence, GraphviewWidget *self)
{
  stop_kinetic (self);
  self->pinch_scale = 1;
}

static void
on_pinch (GtkGestureZoom *gesture, double scale, GraphviewWidget *self)
{
  double x, y;
  if (!gtk_gesture_get_bounding_box_center (GTK_GESTURE (gesture), &x, &y))
    return;
  graphview_widget_zoom_at (self, scale / self->pinch_scale, x, y);
  self->pinch_scale = scale;
}

static gboolean
on_key (GtkEventControllerKey *controller, guint keyval, guint keycode, GdkModifierType state,
        GraphviewWidget *self)
{
  if (!graphview_widget_is_ready (self))
    return FALSE;
  int width = gtk_widget_get_width (GTK_WIDGET (self));
  int height = gtk_widget_get_height (GTK_WIDGET (self));
  int n = graphview_model_get_n_items (self->model);
  switch (keyval)
    {
    case GDK_KEY_Left:
      graphview_widget_pan (self, KEY_PAN, 0);
      return TRUE;
    case GDK_KEY_Right:
      graphview_widget_pan (self, -KEY_PAN, 0);
      return TRUE;
    case GDK_KEY_Up:
      graphview_widget_pan (self, 0, KEY_PAN);
      return TRUE;
    case GDK_KEY_Down:
      graphview_widget_pan (self, 0, -KEY_PAN);
      return TRUE;
    case GDK_KEY_plus:
    case GDK_KEY_equal:
    case GDK_KEY_KP_Add:
      graphview_widget_zoom_at (self, GRAPHVIEW_WIDGET_ZOOM_STEP, width / 2.0, height / 2.0);
      return TRUE;
    case GDK_KEY_minus:
    case GDK_KEY_KP_Subtract:
      graphview_widget_zoom_at (self, 1 / GRAPHVIEW_WIDGET_ZOOM_STEP, width / 2.0, height / 2.0);
      return TRUE;
    case GDK_KEY_0:
    case GDK_KEY_Home:
      graphview_widget_zoom_to_fit (self);
      return TRUE;
    case GDK_KEY_Tab:
    case GDK_KEY_ISO_Left_Tab:
      {
        gboolean back = keyval == GDK_KEY_ISO_Left_Tab || (state & GDK_SHIFT_MASK);
        int next
            = self->selected < 0 ? (back ? n - 1 : 0) : (self->selected + (back ? n - 1 : 1)) % n;
        graphview_widget_set_selected (self, next);
        return TRUE;
      }
    case GDK_KEY_Return:
    case GDK_KEY_KP_Enter:
    case GDK_KEY_space:
      activate_item (self, self->selected);
      return TRUE;
    case GDK_KEY_Escape:
      graphview_widget_set_selected (self, -1);
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
on_query_tooltip (GtkWidget *widget, int x, int y, gboolean keyboard, GtkTooltip *tooltip,
                  gpointer user_data)
{
  GraphviewWidget *self = GRAPHVIEW_WIDGET (widget);
  int item = keyboard ? self->selected : graphview_widget_item_at (self, x, y);
  if (item < 0)
    return FALSE;
  g_autofree char *text = graphview_renderer_dup_item_summary (self->renderer, item);
  /* The pipeline stages it runs on: one, or each a folded block spans. */
  GraphviewStages *stages = graphview_renderer_get_stages (self->renderer);
  if (stages && text)
    {
      g_autofree char *where = graphview_stages_dup_item_text (stages, self->model, item);
      g_autofree char *summary = g_steal_pointer (&text);
      text = g_strdup_printf ("%s\n%s", summary, where);
    }
  gtk_tooltip_set_text (tooltip, text);
  return TRUE;
}

/* The object ------------------------------------------------------------------------------- */

static void
graphview_widget_dispose (GObject *object)
{
  GraphviewWidget *self = GRAPHVIEW_WIDGET (object);
  stop_kinetic (self);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->model)
    g_clear_signal_handler (&self->changed_id, self->model);
  g_clear_object (&self->model);
  g_clear_object (&self->renderer);
  g_clear_object (&self->layouter);
  g_clear_object (&self->cache);
  g_clear_pointer (&self->overlays, g_array_unref);
  g_clear_pointer (&self->asides_key, g_array_unref);
  G_OBJECT_CLASS (graphview_widget_parent_class)->dispose (object);
}

enum
{
  PROP_0,
  PROP_SHOW_LEGEND,
  N_PROPS
};

static void
graphview_widget_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  switch (prop_id)
    {
    case PROP_SHOW_LEGEND:
      g_value_set_boolean (value, GRAPHVIEW_WIDGET (object)->show_legend);
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
graphview_widget_set_property (GObject *object, guint prop_id, const GValue *value,
                               GParamSpec *pspec)
{
  switch (prop_id)
    {
    case PROP_SHOW_LEGEND:
      graphview_widget_set_show_legend (GRAPHVIEW_WIDGET (object), g_value_get_boolean (value));
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
graphview_widget_class_init (GraphviewWidgetClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = graphview_widget_dispose;
  object_class->get_property = graphview_widget_get_property;
  object_class->set_property = graphview_widget_set_property;
  g_object_class_install_property (
      object_class, PROP_SHOW_LEGEND,
      g_param_spec_boolean ("show-legend", NULL, NULL, TRUE,
                            G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS));
  widget_class->snapshot = graphview_widget_snapshot;
  widget_class->css_changed = graphview_widget_css_changed;
  widget_class->size_allocate = graphview_widget_size_allocate;
  widget_class->measure = graphview_widget_measure;

  /* The item under the pointer changed (-1: none). */
  signals[SIGNAL_ITEM_HOVERED]
      = g_signal_new ("item-hovered", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                      NULL, G_TYPE_NONE, 1, G_TYPE_INT);
  signals[SIGNAL_SELECTION_CHANGED]
      = g_signal_new ("selection-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                      NULL, NULL, G_TYPE_NONE, 1, G_TYPE_INT);
  /* Double click or Return on an item, before it is folded or unfolded. */
  signals[SIGNAL_ITEM_ACTIVATED]
      = g_signal_new ("item-activated", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                      NULL, G_TYPE_NONE, 1, G_TYPE_INT);
  signals[SIGNAL_LAYOUT_READY]
      = g_signal_new ("layout-ready", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                      NULL, G_TYPE_NONE, 0);
  /* The zoom or the origin changed (wheel, pinch, drag, keys, fit, centring, a resize). */
  signals[SIGNAL_VIEWPORT_CHANGED]
      = g_signal_new ("viewport-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                      NULL, NULL, G_TYPE_NONE, 0);
  gtk_widget_class_set_css_name (widget_class, "graphview");
}

static void
graphview_widget_init (GraphviewWidget *self)
{
  GtkWidget *widget = GTK_WIDGET (self);
  self->layouter = graphview_layouter_new ();
  self->scale = self->told_scale = 1;
  self->hover = self->selected = self->focus_op = -1;
  self->show_legend = TRUE;
  gtk_widget_set_focusable (widget, TRUE);
  gtk_widget_set_overflow (widget, GTK_OVERFLOW_HIDDEN);
  gtk_widget_set_has_tooltip (widget, TRUE);
  g_signal_connect (widget, "query-tooltip", G_CALLBACK (on_query_tooltip), NULL);

  GtkEventController *scroll
      = gtk_event_controller_scroll_new (GTK_EVENT_CONTROLLER_SCROLL_VERTICAL);
  g_signal_connect (scroll, "scroll", G_CALLBACK (on_scroll), self);
  gtk_widget_add_controller (widget, scroll);

  GtkEventController *motion = gtk_event_controller_motion_new ();
  g_signal_connect (motion, "motion", G_CALLBACK (on_motion), self);
  g_signal_connect (motion, "leave", G_CALLBACK (on_leave), self);
  gtk_widget_add_controller (widget, motion);

  GtkGesture *drag = gtk_gesture_drag_new ();
  g_signal_connect (drag, "drag-begin", G_CALLBACK (on_drag_begin), self);
  g_signal_connect (drag, "drag-update", G_CALLBACK (on_drag_update), self);
  g_signal_connect (drag, "drag-end", G_CALLBACK (on_drag_end), self);
  gtk_widget_add_controller (widget, GTK_EVENT_CONTROLLER (drag));

  GtkGesture *click = gtk_gesture_click_new ();
  g_signal_connect (click, "pressed", G_CALLBACK (on_click), self);
  gtk_widget_add_controller (widget, GTK_EVENT_CONTROLLER (click));

  GtkGesture *pinch = gtk_gesture_zoom_new ();
  g_signal_connect (pinch, "begin", G_CALLBACK (on_pinch_begin), self);
  g_signal_connect (pinch, "scale-changed", G_CALLBACK (on_pinch), self);
  gtk_widget_add_controller (widget, GTK_EVENT_CONTROLLER (pinch));

  GtkEventController *keys = gtk_event_controller_key_new ();
  g_signal_connect (keys, "key-pressed", G_CALLBACK (on_key), self);
  gtk_widget_add_controller (widget, keys);
}

GtkWidget *
graphview_widget_new (void)
{
  return g_object_new (GRAPHVIEW_TYPE_WIDGET, NULL);
}
