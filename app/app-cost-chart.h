/* app-cost-chart.h: per-layer cost as a Cairo bar chart (compute and communication stacked);
 * clicking a bar selects that layer's first op in the document.
 *
 * A layer is a run of consecutive ops that share the name prefix up to the first all-digit
 * component ("transformer.h.3"), or, outside repeated blocks, the first component. */
#pragma once

#include <adwaita.h>

#include "app-document-view.h"

G_BEGIN_DECLS

#define APP_TYPE_COST_CHART (app_cost_chart_get_type ())
G_DECLARE_FINAL_TYPE (AppCostChart, app_cost_chart, APP, COST_CHART, AppDocumentView)

GtkWidget *app_cost_chart_new (void);
guint app_cost_chart_get_n_layers (AppCostChart *self);
/* Name, first op and costs of layer @i. */
const char *app_cost_chart_get_layer (AppCostChart *self, guint i, guint *first_op,
                                      double *compute_s, double *comm_s);
/* What a click on bar @i does. */
void app_cost_chart_activate_layer (AppCostChart *self, guint i);
/* The bar under widget point (@x, @y), or -1. */
int app_cost_chart_layer_at (AppCostChart *self, double x, double y);

G_END_DECLS
