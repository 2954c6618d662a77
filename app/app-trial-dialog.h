/* app-trial-dialog.h: runs the document's plan on an executor backend off the GTK thread, with
 * the estimated memory and time before Run (a run that cannot fit is refused with the
 * figures), progress with the time left, and Cancel in every phase; optionally the training
 * step (app-trial-train.h). Emits "finished" (an ExecutorTrialResult pointer and an
 * AppTrialTrain pointer or NULL, borrowed) when a run ends with a result. */
#pragma once

#include <adwaita.h>

#include "app-document.h"
#include "app-trial-train.h"

G_BEGIN_DECLS

#define APP_TYPE_TRIAL_DIALOG (app_trial_dialog_get_type ())
G_DECLARE_FINAL_TYPE (AppTrialDialog, app_trial_dialog, APP, TRIAL_DIALOG, AdwWindow)

GtkWidget *app_trial_dialog_new (GtkWindow *parent, PlannerPlan *plan);
/* Starts the run with the chosen backend, device count and repeats. */
void app_trial_dialog_start (AppTrialDialog *self);
void app_trial_dialog_cancel (AppTrialDialog *self);
void app_trial_dialog_set_repeat (AppTrialDialog *self, guint repeat);
void app_trial_dialog_set_train (AppTrialDialog *self, gboolean train, gboolean adam);
/* Pretends the host has @bytes free (0: ask the host), as a smaller machine would. */
void app_trial_dialog_set_memory_available (AppTrialDialog *self, guint64 bytes);

gboolean app_trial_dialog_get_running (AppTrialDialog *self);
/* Whether Run is offered: no run in flight or still draining, nothing refused (the Run
 * button's sensitivity, which app-trial-dialog.ui binds to "can-run"; "running" makes the
 * other controls insensitive and the cancel button say Cancel). */
gboolean app_trial_dialog_get_can_run (AppTrialDialog *self);
/* The host memory the run needs, as the estimate says. */
guint64 app_trial_dialog_get_memory_needed (AppTrialDialog *self);
const char *app_trial_dialog_get_estimate (AppTrialDialog *self);
const char *app_trial_dialog_get_status (AppTrialDialog *self);
const char *app_trial_dialog_get_progress_text (AppTrialDialog *self);
GtkWidget *app_trial_dialog_get_devices_row (AppTrialDialog *self);
/* The last run's training step, or NULL. */
const AppTrialTrain *app_trial_dialog_get_train (AppTrialDialog *self);

G_END_DECLS
