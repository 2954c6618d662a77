/* app-totals-bar.h: the plan's totals: communication time and bytes per collective, compute,
 * training-step time and memory per device against the profile's capacity. */
#pragma once

#include <adwaita.h>

#include "app-document-view.h"

G_BEGIN_DECLS

#define APP_TYPE_TOTALS_BAR (app_totals_bar_get_type ())
G_DECLARE_FINAL_TYPE (AppTotalsBar, app_totals_bar, APP, TOTALS_BAR, AppDocumentView)

GtkWidget *app_totals_bar_new (void);
/* The step-time figure as shown ("123 ms"). */
const char *app_totals_bar_get_step_text (AppTotalsBar *self);
/* Everything shown, one line per figure. */
char *app_totals_bar_dup_text (AppTotalsBar *self);

G_END_DECLS
