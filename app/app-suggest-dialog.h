/* app-suggest-dialog.h: "Suggest Plans…" (issue 17): runs planner_search() for the document's
 * model and hardware on a device count the user enters, off the GTK thread with progress and
 * Cancel, and lists the candidates fastest first (mesh, policy or solved, step time, memory
 * per device, whether it fits) with the best one marked. Opening a candidate emits
 * "open-plan" (a PlannerPlan pointer, borrowed); the window makes it the current plan. Saving
 * one emits "save-plan" (the same); the window puts it in the store.
 *
 * The search starts from the model alone: the document's own pins name its mesh's axes and
 * are not carried over to the meshes searched. */
#pragma once

#include <adwaita.h>

#include "app-document.h"
#include "planner-search.h"

G_BEGIN_DECLS

#define APP_TYPE_SUGGEST_DIALOG (app_suggest_dialog_get_type ())
G_DECLARE_FINAL_TYPE (AppSuggestDialog, app_suggest_dialog, APP, SUGGEST_DIALOG, AdwWindow)

/* The device count starts at the document's mesh's. */
GtkWidget *app_suggest_dialog_new (GtkWindow *parent, AppDocument *document);
void app_suggest_dialog_set_devices (AppSuggestDialog *self, guint n_devices);
guint app_suggest_dialog_get_devices (AppSuggestDialog *self);
/* Starts the search (no-op while one runs). */
void app_suggest_dialog_start (AppSuggestDialog *self);
void app_suggest_dialog_cancel (AppSuggestDialog *self);
gboolean app_suggest_dialog_get_running (AppSuggestDialog *self);
const char *app_suggest_dialog_get_status (AppSuggestDialog *self);

/* The last finished search, or NULL. */
const PlannerSearchResult *app_suggest_dialog_get_result (AppSuggestDialog *self);
/* The rows listed: candidate indices into the result, in list order. */
guint app_suggest_dialog_get_n_rows (AppSuggestDialog *self);
guint app_suggest_dialog_get_row_candidate (AppSuggestDialog *self, guint row);
/* The row marked best, -1 when no candidate fits. */
int app_suggest_dialog_get_best_row (AppSuggestDialog *self);
/* Emits "open-plan" with the row's plan; FALSE when the row has none (its error is shown). */
gboolean app_suggest_dialog_open_row (AppSuggestDialog *self, guint row);
/* Emits "save-plan" with the row's plan; FALSE when the row has none. */
gboolean app_suggest_dialog_save_row (AppSuggestDialog *self, guint row);

G_END_DECLS
