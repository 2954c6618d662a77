/* app-compare-view.h: two plans side by side in synced panes with changed ops marked, and the
 * list of differences (ops, redistributions added and removed, cost deltas). */
#pragma once

#include <adwaita.h>

#include "app-document.h"
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

G_END_DECLS
