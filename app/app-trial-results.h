/* app-trial-results.h: a trial run's results over the graph: passed or not, numeric error,
 * measured against estimated step time, and the ops and redistributions that differ most.
 * The window gives it to graphview_widget_add_overlay(): Fit leaves its band free, and it
 * steps aside while nodes lie under it. */
#pragma once

#include <adwaita.h>

#include "app-document.h"
#include "app-trial-train.h"
#include "executor-trial.h"

G_BEGIN_DECLS

#define APP_TYPE_TRIAL_RESULTS (app_trial_results_get_type ())
G_DECLARE_FINAL_TYPE (AppTrialResults, app_trial_results, APP, TRIAL_RESULTS, GtkWidget)


GtkWidget *app_trial_results_new (void);
/* @result (and the training step @train, may be NULL) is copied into the view's rows; NULL
 * empties them. Whether the card shows is its "visible" property (the window binds it to
 * its "show-trial-results"); its close button hides it. */
void app_trial_results_set_result (AppTrialResults *self, const ExecutorTrialResult *result,
                                   const AppTrialTrain *train);

G_END_DECLS
