/* graphview-widget.h: the graph view as a GTK 4 widget.
 *
 * Lays out its model off the GTK thread (GraphviewLayouter), draws with GraphviewRenderer:
 * the static layer is rendered once per view into a texture and the overlays (hover,
 * selection, propagation step, comparison) are drawn over it each frame. Zoom with the wheel
 * at the pointer (x1.15 a notch, between fit-to-view and 10x) or by pinching; drag to pan,
 * with kinetic motion; keys: arrows pan, + and - zoom, 0 or Home fit, Tab and Shift+Tab walk
 * the items, Return folds or unfolds the selected block, Escape clears the selection.
 */
#pragma once

#include <gtk/gtk.h>

#include "graphview-model.h"
#include "graphview-renderer.h"

G_BEGIN_DECLS

#define GRAPHVIEW_WIDGET_ZOOM_STEP 1.15
#define GRAPHVIEW_WIDGET_MAX_ZOOM 10.0

#define GRAPHVIEW_TYPE_WIDGET (graphview_widget_get_type ())
G_DECLARE_FINAL_TYPE (GraphviewWidget, graphview_widget, GRAPHVIEW, WIDGET, GtkWidget)

GtkWidget *graphview_widget_new (void);

/* Starts laying out @model; the view fits it when the first layout arrives. */
void graphview_widget_set_model (GraphviewWidget *self, GraphviewModel *model);
GraphviewModel *graphview_widget_get_model (GraphviewWidget *self);
/* The renderer, for the plan and the overlays; call graphview_widget_redraw() after changing
 * the plan, or use the setters below which do. */
GraphviewRenderer *graphview_widget_get_renderer (GraphviewWidget *self);
void graphview_widget_set_plan (GraphviewWidget *self, PlannerPlan *plan);
/* The plan's pipeline, made already (graphview_renderer_set_pipeline()): its stages are drawn
 * as bands. */
void graphview_widget_set_pipeline (GraphviewWidget *self, const PlannerPipeline *pipeline);
void graphview_widget_set_compare_plan (GraphviewWidget *self, PlannerPlan *other);
void graphview_widget_set_step (GraphviewWidget *self, int step);
/* Rings every item showing one of @ops (search matches); NULL clears. */
void graphview_widget_set_highlighted_ops (GraphviewWidget *self, const guint *ops, guint n_ops);
/* The static layer changed (a new plan set through the renderer). */
void graphview_widget_redraw (GraphviewWidget *self);

/* Whether the widget draws in the dark palette (its style's text is light). */
gboolean graphview_widget_get_dark (GraphviewWidget *self);

/* TRUE once a layout of the model's current state is shown. */
gboolean graphview_widget_is_ready (GraphviewWidget *self);

/* Device pixels per world point, and the world point at the widget's top-left. */
double graphview_widget_get_zoom (GraphviewWidget *self);
void graphview_widget_get_origin (GraphviewWidget *self, double *x, double *y);
/* Widgets over the graph (a minimap, buttons, a card): while shown, Fit, the least zoom and
 * centring keep the graph in the free area beside them, as beside the legend. While nodes of
 * the view lie under one all the same (zoomed in, panned), it steps aside: it gets the style
 * class "aside" (the app's CSS fades it out) and no target, so clicks there reach the graph;
 * it comes back once none does. Not while the pointer is on it (in use), nor while held. */
void graphview_widget_add_overlay (GraphviewWidget *self, GtkWidget *overlay);
/* TRUE while @overlay (one added above) has stepped aside. */
gboolean graphview_widget_get_overlay_aside (GraphviewWidget *self, GtkWidget *overlay);
/* While held (@hold TRUE, undone by as many FALSE), @overlay does not step aside: a drag
 * that starts in it and moves the view (the minimap's) keeps its target. Nothing for a
 * widget never added. */
void graphview_widget_hold_overlay (GraphviewWidget *self, GtkWidget *overlay, gboolean hold);
/* The widget's part no overlay or legend covers (widget coordinates). */
void graphview_widget_get_free_area (GraphviewWidget *self, graphene_rect_t *area);
/* The legend (op families and marks), bottom left; "show-legend". */
gboolean graphview_widget_get_show_legend (GraphviewWidget *self);
void graphview_widget_set_show_legend (GraphviewWidget *self, gboolean show);
/* Where the legend is drawn; FALSE when hidden or not drawn yet. */
gboolean graphview_widget_get_legend_rect (GraphviewWidget *self, graphene_rect_t *rect);
/* TRUE while the legend steps aside (is not drawn) because nodes lie under its rectangle, as
 * the overlays above do; it still takes its room for Fit. */
gboolean graphview_widget_get_legend_aside (GraphviewWidget *self);
/* The zoom at which the whole graph fits in the free area (the least zoom allowed). */
double graphview_widget_get_fit_zoom (GraphviewWidget *self);
void graphview_widget_zoom_to_fit (GraphviewWidget *self);
/* Multiplies the zoom by @factor (clamped), keeping the world point under widget point
 * (@x, @y) where it is. */
void graphview_widget_zoom_at (GraphviewWidget *self, double factor, double x, double y);
void graphview_widget_pan (GraphviewWidget *self, double dx, double dy);
/* Sets the zoom and the world point at the top-left at once, clamped as the user's zoom and
 * pan are: another view's viewport, to keep two views in step. Every change of the viewport,
 * this one included, emits "viewport-changed". */
void graphview_widget_set_viewport (GraphviewWidget *self, double zoom, double x, double y);
/* Widget coordinates to world and back. */
void graphview_widget_to_world (GraphviewWidget *self, double x, double y, double *wx, double *wy);
int graphview_widget_item_at (GraphviewWidget *self, double x, double y);
/* How many nodes (items) of the layout shown lie at least partly under @area (widget
 * coordinates) at the current view: what an overlay there would cover. */
guint graphview_widget_count_items_in (GraphviewWidget *self, const graphene_rect_t *area);

/* Folds or unfolds @item as a double click or Return does (a block node unfolds its first
 * block, an op folds its block), and once the new layout is shown selects the item showing the
 * same op, with its group's top-centre under the widget point the item's top-centre was: the
 * view does not jump. */
void graphview_widget_activate_item (GraphviewWidget *self, guint item);

int graphview_widget_get_selected (GraphviewWidget *self);
/* Selects @item (-1: none) and scrolls it into view; emits "selection-changed". */
void graphview_widget_set_selected (GraphviewWidget *self, int item);
/* Scrolls so that @item is in the middle of the free area (as far as the graph's edges
 * allow). */
void graphview_widget_center_on_item (GraphviewWidget *self, guint item);

G_END_DECLS
