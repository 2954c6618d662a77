/* app-compare-view.h: two plans side by side in synced panes with changed ops marked, and the
 * list of differences (ops, redistributions added and removed, cost deltas). */
#pragma once

#include <adwaita.h>

#include "app-document.h"
#include "graphview-widget.h"
#include "planner-compare.h"

G_BEGIN_DECLS

#define APP_TYPE_COMPARE_VIEW (app_compare_view_get_type ())
G_DECLARE_FINAL_TYPE (AppCompareView, app_compare_view, APP, COMPARE_VIEW, GtkWidget)


GtkWidget *app_compare_view_new (void);
/* Shows @a (left) against @b (right); both are plans of one model. FALSE with @error when
 * they are not. */
gboolean app_compare_view_set_plans (AppCompareView *self, PlannerPlan *a, const char *a_label,
                                     PlannerPlan *b, const char *b_label, GError **error);
const PlannerCompare *app_compare_view_get_compare (AppCompareView *self);
/* Rows in the list of differences. */
guint app_compare_view_get_n_differences (AppCompareView *self);
/* Selects op @op in both panes. */
void app_compare_view_select_op (AppCompareView *self, int op);

/* The panes share one viewport: zooming, scrolling or selecting in one moves the other.
 * Escape anywhere in the view and its close button emit "close" (the window leaves compare
 * mode). Parts, for the tests: pane 0 (left, @a) or 1; the legends, under the graphs (each
 * under its pane where it fits, else both stacked across the panes), and where pane @pane's
 * was last drawn in that widget; the close button and the controller that holds Escape. */
GraphviewWidget *app_compare_view_get_pane (AppCompareView *self, guint pane);
GtkWidget *app_compare_view_get_legends (AppCompareView *self);
gboolean app_compare_view_get_legend_rect (AppCompareView *self, guint pane,
                                           graphene_rect_t *rect);
GtkWidget *app_compare_view_get_close_button (AppCompareView *self);
GtkEventController *app_compare_view_get_shortcuts (AppCompareView *self);

G_END_DECLS
