/* app-type-legend.h: which colour is which op type, over the graph.
 *
 * A small card listing the op types of the graph shown, each with the fill its nodes get
 * (the renderer's own colour, asked at every draw) and how many ops it has. It floats over
 * the graph as the minimap does, so the window gives it to graphview_widget_add_overlay():
 * Fit leaves its band free, and zoomed in it steps aside while nodes lie under it;
 * win.show-type-legend (Ctrl+T) hides it.
 */
#pragma once

#include <adwaita.h>

#include "graphview-renderer.h"

G_BEGIN_DECLS

#define APP_TYPE_TYPE_LEGEND (app_type_legend_get_type ())
G_DECLARE_FINAL_TYPE (AppTypeLegend, app_type_legend, APP, TYPE_LEGEND, GtkBox)

GtkWidget *app_type_legend_new (void);
/* Lists the op types of @renderer's graph (NULL: none). */
void app_type_legend_set_renderer (AppTypeLegend *self, GraphviewRenderer *renderer);

/* The rows, for the tests: the type, its op count, the swatch widget and its colour. */
guint app_type_legend_get_n_types (AppTypeLegend *self);
PlannerOpType app_type_legend_get_op_type (AppTypeLegend *self, guint row, guint *n_ops);
GtkWidget *app_type_legend_get_swatch (AppTypeLegend *self, guint row);
void app_type_legend_get_colour (AppTypeLegend *self, guint row, double rgb[3]);

G_END_DECLS
