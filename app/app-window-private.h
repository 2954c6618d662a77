/* app-window-private.h: what the window's three files share. app-window.c is the window:
 * its parts, the document's signals, toasts, the object. app-window-document.c is the
 * document's lifecycle: loading, saving (a name the first time), asking before unsaved
 * edits are discarded, the autosave and its recovery. app-window-actions.c holds the win.*
 * actions, their accelerators, search, the store actions and trial runs. */
#pragma once

#include "app-window.h"

#include "app-compare-view.h"
#include "app-cost-chart.h"
#include "app-inspector.h"
#include "app-minimap.h"
#include "app-schedule-chart.h"
#include "app-sidebar.h"
#include "app-timeline.h"
#include "app-totals-bar.h"
#include "app-trial-results.h"
#include "app-type-legend.h"
#include "executor-trial.h"

G_BEGIN_DECLS

struct _AppWindow
{
  AdwApplicationWindow parent_instance;

  AdwToastOverlay *toast_overlay;
  AdwFlap *flap;
  AppSidebar *sidebar;
  GtkSearchBar *search_bar;
  GtkSearchEntry *search_entry;
  GtkLabel *search_status;
  GraphviewWidget *graph;
  AppMinimap *minimap;
  GtkWidget *graph_buttons;
  AppTrialResults *trial_results;
  AppTypeLegend *type_legend;
  AppTimeline *timeline;
  AppTotalsBar *totals_bar;
  AppCostChart *cost_chart;
  AppScheduleChart *schedule_chart;
  AppInspector *inspector;
  AppCompareView *compare_view;

  GSettings *settings;
  PlannerStore *store;
  AppDocument *document;
  GraphviewModel *graph_model;
  GSignalGroup *document_signals;
  GCancellable *cancellable;
  /* Guards the graph <-> document selection echo. */
  gboolean syncing_selection;
  int search_index;
  /* Plans deleted but still undoable: id -> the toast. */
  GHashTable *pending_deletes;
  GPtrArray *toasts;
  gint64 toast_shown_at;
  guint toast_timeout;

  /* The question shown (save before discarding, a name), at most one. */
  AdwMessageDialog *prompt;
  /* The document's unsaved edits are copied here (app-autosave.h). */
  char *autosave_path;
  gboolean autosaved;
  gboolean close_confirmed;

  /* The state app-window.ui binds its widgets to (the window's properties, README.md),
   * derived from the document and the store by app_window_sync_state(). */
  gboolean has_document;
  gboolean has_plan;
  gboolean can_save;
  gboolean can_undo;
  gboolean can_redo;
  gboolean can_pin;
  gboolean can_unpin;
  char *display_title;
  char *display_subtitle;
  gboolean has_error;
  char *error_text;
  /* "empty", "plan" or "compare" (static strings). */
  const char *mode;
  gboolean offers_recovery;
  gboolean show_trial_results;
};

/* app-window.c */
void app_window_show_error (AppWindow *self, const char *what, const GError *error);
/* Kept until shown and gone, so that app_window_dismiss_toasts() reaches them all. */
void app_window_add_toast (AppWindow *self, AdwToast *toast);
/* Derives the bound state from the document and the store again, and notifies each property
 * that changed, once. */
void app_window_sync_state (AppWindow *self);
/* "empty", "plan" or "compare": the "mode" property, which the mode stack follows. */
void app_window_set_mode (AppWindow *self, const char *mode);
/* The recovery bar ("offers-recovery"). */
void app_window_set_offers_recovery (AppWindow *self, gboolean offers);
/* The trial results card ("show-trial-results"). */
void app_window_set_show_trial_results (AppWindow *self, gboolean show);

/* app-window-document.c */
/* What to do once the user agreed (or had nothing to lose). */
typedef void (*AppWindowProceedFunc) (AppWindow *self, gpointer data);
typedef struct _AppWindowProceed AppWindowProceed;
AppWindowProceed *app_window_proceed_new (AppWindowProceedFunc func, gpointer data,
                                          GDestroyNotify destroy);
/* Runs @then now when the document has no unsaved edits; else asks Save / Discard / Cancel
 * first and runs it after a save or a discard. Takes @then. */
void app_window_ask_before_discarding (AppWindow *self, AppWindowProceed *then);
/* Writes or removes the autosave as the document's state says. */
void app_window_update_autosave (AppWindow *self);
/* The autosave of documents of that store; offers back a left-over. */
void app_window_set_autosave_path (AppWindow *self, const char *store_path);
/* win.restore-autosave and win.discard-autosave. */
void app_window_action_restore_autosave (GtkWidget *widget, const char *name, GVariant *param);
void app_window_action_discard_autosave (GtkWidget *widget, const char *name, GVariant *param);
/* A name no stored plan in @entries has: @base, else "BASE 2", ... */
char *app_window_free_plan_name (GPtrArray *entries, const char *base);

/* app-window-actions.c */
void app_window_class_init_actions (GtkWidgetClass *widget_class);
/* The actions, their enabled state bound to the window's properties, and the search and
 * sidebar signals. */
void app_window_init_actions (AppWindow *self);
/* Each node shows its op's measured against estimated time and error; NULL clears. */
void app_window_show_trial_on_nodes (AppWindow *self, const ExecutorTrialResult *result);
/* Deletions still undoable become final (the window closes). */
void app_window_finish_pending_deletes (AppWindow *self);
/* Rings the search's matches in the graph again (a new graph, the bar shown or hidden). */
void app_window_update_search_matches (AppWindow *self);

G_END_DECLS
