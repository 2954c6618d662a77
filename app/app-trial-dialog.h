/* app-trial-dialog.h: runs the document's plan on an executor backend off the GTK thread, with
 * progress and cancel. Emits "finished" (an ExecutorTrialResult pointer, borrowed) when a
 * run ends with a result. */
#pragma once

#include <adwaita.h>

#include "app-document.h"

G_BEGIN_DECLS

#define APP_TYPE_TRIAL_DIALOG (app_trial_dialog_get_type ())
G_DECLARE_FINAL_TYPE (AppTrialDialog, app_trial_dialog, APP, TRIAL_DIALOG, AdwWindow)

GtkWidget *app_trial_dialog_new (GtkWindow *parent, PlannerPlan *plan);
/* Starts the run with the chosen backend, device count and repeats. */
void app_trial_dialog_start (AppTrialDialog *self);
void app_trial_dialog_cancel (AppTrialDialog *self);
void app_trial_dialog_set_repeat (AppTrialDialog *self, guint repeat);

G_END_DECLS
