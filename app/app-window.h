/* app-window.h: the main window (architecture.md, "GUI").
 *
 * Plans sidebar on the left, the graph in the middle with the timeline, totals and per-layer
 * chart under it, the inspector on the right; compare mode replaces the middle. Everything
 * the window does is a GAction ("win.*") with an accelerator; the functions below are what
 * those actions call, public so the ui tests drive the same paths.
 *
 * What the widgets show of the document is the window's read-only properties, each notified
 * once per change and bound in app-window.ui (app/README.md, "The window's state"):
 * "has-document", "has-plan", "can-save", "can-undo", "can-redo", "can-pin", "can-unpin",
 * "display-title", "display-subtitle", "has-error", "error-text", "mode", "compare-mode",
 * "offers-recovery", and "show-trial-results" (read-write: the trial card's visibility).
 */
#pragma once

#include <adwaita.h>

#include "app-document.h"
#include "graphview-widget.h"
#include "planner-store.h"

G_BEGIN_DECLS

#define APP_TYPE_WINDOW (app_window_get_type ())
G_DECLARE_FINAL_TYPE (AppWindow, app_window, APP, WINDOW, AdwApplicationWindow)

/* What the zoom buttons and Ctrl+plus/minus multiply the zoom by. */
#define APP_WINDOW_ZOOM_STEP 1.25

AppWindow *app_window_new (GtkApplication *application);

/* The document shown, NULL before one is loaded ("document" property). */
AppDocument *app_window_get_document (AppWindow *self);
void app_window_set_document (AppWindow *self, AppDocument *document);
/* The plan store (opened by the application; "store" property). */
PlannerStore *app_window_get_store (AppWindow *self);
void app_window_set_store (AppWindow *self, PlannerStore *store);

/* Builds the model (zoo name, config.json or graph JSON) off the GTK thread and plans it on
 * @mesh with @hardware and @policy (NULL: none). Errors appear as a toast. */
void app_window_load_model (AppWindow *self, const char *model, const char *mesh,
                            const char *hardware, const char *policy);
/* A plan file, or a model file planned with the defaults. */
void app_window_open_file (AppWindow *self, GFile *file);
/* A stored plan, loaded off the GTK thread. */
void app_window_open_stored (AppWindow *self, gint64 id);
/* Saves the document's plan to the store (a new row, derived from the stored one when it
 * was edited); the document's store-id changes when it is done. A plan not stored yet is
 * named first (app_window_get_prompt()). */
void app_window_save (AppWindow *self);
/* As Create in the new-plan dialog: asks Save / Discard / Cancel first when the document has
 * unsaved edits, then loads @model as app_window_load_model() does. Opening a file or a
 * stored plan from the window and closing it ask the same. */
void app_window_create_plan (AppWindow *self, const char *model, const char *mesh,
                             const char *hardware, const char *policy);
/* The question the window shows now (discarding unsaved edits, a plan's name), or NULL;
 * answered with adw_message_dialog_response(). */
AdwMessageDialog *app_window_get_prompt (AppWindow *self);
/* Where the document's unsaved edits are kept while it has them (app-autosave.h). */
const char *app_window_get_autosave_path (AppWindow *self);
/* Whether the window offers back the unsaved edits of a session that did not end
 * (win.restore-autosave, win.discard-autosave). */
gboolean app_window_get_offers_recovery (AppWindow *self);

/* Compare mode: @a against the document's plan. */
void app_window_compare (AppWindow *self, PlannerPlan *a, const char *a_label);

/* Writes the document's plan as @format ("json", "dtensor", "mindspore", "csv", "png",
 * "svg", "pdf") to @file off the GTK thread where the format allows. */
void app_window_export_async (AppWindow *self, const char *format, GFile *file,
                              GAsyncReadyCallback callback, gpointer user_data);
gboolean app_window_export_finish (AppWindow *self, GAsyncResult *result, GError **error);
/* A picture ("png", "svg", "pdf") of the graph as shown, at @scale (2: twice the pixels a
 * side), with the title app_window_dup_picture_title() gives; drawn and written on a worker
 * thread (app_export_picture_async()). Finished with app_window_export_finish(). */
void app_window_export_picture_async (AppWindow *self, const char *format, GFile *file,
                                      double scale, GAsyncReadyCallback callback,
                                      gpointer user_data);
/* What Export does once the file is chosen: @format to @file (pictures at @scale), then a
 * toast says where it went, or why it failed. */
void app_window_export_file (AppWindow *self, const char *format, GFile *file, double scale);
/* "gpt2 · dp=2,mp=4 · megatron · h100-sxm": model, mesh, policy, hardware. */
char *app_window_dup_picture_title (AppWindow *self);

/* The accelerators of the window's actions; the application calls it at startup. */
void app_window_add_accels (GtkApplication *app);

/* Results of @dialog (an AppTrialDialog) show over the graph and are stored with the plan. */
void app_window_connect_trial_dialog (AppWindow *self, GtkWidget *dialog);
/* Opens the plan an AppSuggestDialog's "open-plan" gives as the current plan (asking first
 * when the document has unsaved edits). */
void app_window_connect_suggest_dialog (AppWindow *self, GtkWidget *dialog);

void app_window_show_toast (AppWindow *self, const char *text);
/* Dismisses every toast shown; pending deletions become final. */
/* Withdraws the queued toasts and dismisses the shown one (once it has appeared). */
void app_window_dismiss_toasts (AppWindow *self);
guint app_window_get_n_toasts (AppWindow *self);

/* Parts, for the tests. */
GraphviewWidget *app_window_get_graph (AppWindow *self);
/* The part @name: "inspector", "timeline", "totals_bar", "cost_chart", "sidebar",
 * "compare_view", and those bound to the window's properties: "window_title", "mode_stack",
 * "spinner", "error_revealer", "error_label", "recovery_revealer", "recovery_label" (the
 * template's ids). */
GtkWidget *app_window_get_part (AppWindow *self, const char *name);
/* "empty", "plan" or "compare" (the "mode" property). */
const char *app_window_get_mode (AppWindow *self);

G_END_DECLS
