#define G_LOG_DOMAIN "app-window"
#include "config.h"

#include "app-window.h"

#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "app-autosave.h"
#include "app-compare-view.h"
#include "app-cost-chart.h"
#include "app-export.h"
#include "app-inspector.h"
#include "app-minimap.h"
#include "app-new-plan-dialog.h"
#include "app-sidebar.h"
#include "app-timeline.h"
#include "app-totals-bar.h"
#include "app-trial-dialog.h"
#include "app-trial-results.h"
#include "app-trial-store.h"
#include "planner-model.h"
#include "planner-plan-json.h"

struct _AppWindow
{
  AdwApplicationWindow parent_instance;

  AdwWindowTitle *window_title;
  GtkRevealer *error_revealer;
  GtkLabel *error_label;
  AdwToastOverlay *toast_overlay;
  AdwFlap *flap;
  AppSidebar *sidebar;
  GtkStack *mode_stack;
  GtkSearchBar *search_bar;
  GtkSearchEntry *search_entry;
  GtkLabel *search_status;
  GraphviewWidget *graph;
  AppMinimap *minimap;
  GtkWidget *graph_buttons;
  GtkSpinner *spinner;
  AppTrialResults *trial_results;
  AppTimeline *timeline;
  AppTotalsBar *totals_bar;
  AppCostChart *cost_chart;
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
  GtkRevealer *recovery_revealer;
  GtkLabel *recovery_label;
};

G_DEFINE_FINAL_TYPE (AppWindow, app_window, ADW_TYPE_APPLICATION_WINDOW)

enum
{
  PROP_0,
  PROP_DOCUMENT,
  PROP_STORE,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

/* libadwaita 1.2's overlay frees a toast when its hide animation ends even if its show
 * animation still runs (REPLACE_DURATION, 500 ms, while another toast hides): that
 * animation's end then writes into the freed toast. So a toast is never dismissed by us
 * while it may still be appearing; queued ones are withdrawn at once, without animation. */
#define TOAST_SHOW_US (600 * G_TIME_SPAN_MILLISECOND)

static void
toast_gone (AdwToast *toast, AppWindow *self)
{
  if (self->toasts == NULL)
    return;
  guint index = 0;
  if (!g_ptr_array_find (self->toasts, toast, &index))
    return;
  g_ptr_array_remove_index (self->toasts, index);
  /* Toasts are shown in the order they came: the next one appears now. */
  if (index == 0)
    self->toast_shown_at = g_get_monotonic_time ();
}

/* Toasts still shown or queued are kept so they can all be dismissed at once. */
static void
add_toast (AppWindow *self, AdwToast *toast)
{
  if (self->toasts->len == 0)
    self->toast_shown_at = g_get_monotonic_time ();
  g_ptr_array_add (self->toasts, g_object_ref (toast));
  g_signal_connect_object (toast, "dismissed", G_CALLBACK (toast_gone), self, G_CONNECT_DEFAULT);
  adw_toast_overlay_add_toast (self->toast_overlay, toast);
}

static gboolean
dismiss_shown_toast (gpointer data)
{
  AppWindow *self = data;
  self->toast_timeout = 0;
  app_window_dismiss_toasts (self);
  return G_SOURCE_REMOVE;
}

void
app_window_dismiss_toasts (AppWindow *self)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  if (self->toasts == NULL)
    return;
  /* The queued ones, newest first: none of them has a widget or an animation yet. */
  while (self->toasts->len > 1)
    {
      g_autoptr (AdwToast) toast
          = g_object_ref (g_ptr_array_index (self->toasts, self->toasts->len - 1));
      g_ptr_array_remove_index (self->toasts, self->toasts->len - 1);
      adw_toast_dismiss (toast);
    }
  if (self->toasts->len == 0)
    return;
  gint64 shown_for = g_get_monotonic_time () - self->toast_shown_at;
  if (shown_for < TOAST_SHOW_US)
    {
      /* Still appearing: dismissed once it has appeared. */
      if (self->toast_timeout == 0)
        self->toast_timeout = g_timeout_add ((TOAST_SHOW_US - shown_for) / 1000 + 1,
                                             dismiss_shown_toast, self);
      return;
    }
  g_autoptr (AdwToast) toast = g_object_ref (g_ptr_array_index (self->toasts, 0));
  g_ptr_array_remove_index (self->toasts, 0);
  adw_toast_dismiss (toast);
}

guint
app_window_get_n_toasts (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), 0);
  return self->toasts ? self->toasts->len : 0;
}

static void
add_text_toast (AppWindow *self, const char *text, guint timeout)
{
  AdwToast *toast = adw_toast_new (text);
  adw_toast_set_timeout (toast, timeout);
  add_toast (self, toast);
}

void
app_window_show_toast (AppWindow *self, const char *text)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  add_text_toast (self, text, 4);
}

static void
show_error (AppWindow *self, const char *what, const GError *error)
{
  g_autofree char *text = g_strdup_printf ("%s: %s", what, error->message);
  g_message ("%s", text);
  add_text_toast (self, text, 8);
}

static void
set_action_enabled (AppWindow *self, const char *name, gboolean enabled)
{
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self), name);
  if (action)
    g_simple_action_set_enabled (G_SIMPLE_ACTION (action), enabled);
}

static void
update_actions (AppWindow *self)
{
  AppDocument *doc = self->document;
  PlannerPlan *plan = doc ? app_document_get_plan (doc) : NULL;
  const char *op_name = doc ? app_document_get_selected_op_name (doc) : NULL;
  gboolean has_op = op_name != NULL;
  set_action_enabled (self, "undo", doc && app_document_get_can_undo (doc));
  set_action_enabled (self, "redo", doc && app_document_get_can_redo (doc));
  set_action_enabled (self, "save", plan != NULL && self->store != NULL);
  set_action_enabled (self, "save-as", plan != NULL);
  set_action_enabled (self, "export", plan != NULL);
  set_action_enabled (self, "trial-run", plan != NULL);
  set_action_enabled (self, "compare", plan != NULL);
  set_action_enabled (self, "pin", has_op && plan != NULL);
  set_action_enabled (self, "edit-pin", has_op && plan != NULL);
  set_action_enabled (self, "unpin", has_op && app_document_get_op_pin (doc, op_name) != NULL);
}

static void
update_title (AppWindow *self)
{
  AppDocument *doc = self->document;
  if (doc == NULL)
    {
      adw_window_title_set_title (self->window_title, "Shardscope");
      adw_window_title_set_subtitle (self->window_title, NULL);
      return;
    }
  g_autofree char *title = g_strdup_printf ("%s%s", app_document_get_modified (doc) ? "• " : "",
                                            app_document_get_name (doc));
  adw_window_title_set_title (self->window_title, title);
  g_autofree char *mesh = planner_mesh_to_string (app_document_get_mesh (doc));
  const char *policy = app_document_get_policy (doc);
  g_autofree char *subtitle = g_strdup_printf (
      "%s · %s · %s · %s", planner_graph_get_name (app_document_get_graph (doc)), mesh,
      planner_hardware_get_name (app_document_get_hardware (doc)),
      policy ? policy : _("no policy"));
  adw_window_title_set_subtitle (self->window_title, subtitle);
}

/* Shows @op in the graph: unfolds the block it is in and selects its node. */
static void
reveal_op (AppWindow *self, int op)
{
  if (self->graph_model == NULL)
    return;
  self->syncing_selection = TRUE;
  if (op < 0)
    graphview_widget_set_selected (self->graph, -1);
  else
    {
      PlannerGraph *graph = graphview_model_get_graph (self->graph_model);
      const char *name = planner_graph_get_op (graph, op)->name;
      guint item = graphview_model_get_item_of_op (self->graph_model, op);
      const GraphviewItem *it = graphview_model_get_item (self->graph_model, item);
      if (it->kind != GRAPHVIEW_ITEM_OP)
        {
          /* Names hold no glob characters, so the glob is the name itself. */
          graphview_model_expand_matching (self->graph_model, name);
          item = graphview_model_get_item_of_op (self->graph_model, op);
        }
      graphview_widget_set_selected (self->graph, (int) item);
      /* Navigation from elsewhere (chart, compare, search, the timeline) centres the op. */
      graphview_widget_center_on_item (self->graph, item);
    }
  self->syncing_selection = FALSE;
}

static void update_autosave (AppWindow *self);
static void show_trial_on_nodes (AppWindow *self, const ExecutorTrialResult *result);
static void set_autosave_path (AppWindow *self, const char *store_path);

static void
on_plan_changed (AppWindow *self)
{
  PlannerPlan *plan = app_document_get_plan (self->document);
  graphview_widget_set_plan (self->graph, plan);
  /* A trial's figures belong to the plan it ran. */
  show_trial_on_nodes (self, NULL);
  graphview_widget_set_step (self->graph, app_document_get_step (self->document));
  if (plan && g_strcmp0 (gtk_stack_get_visible_child_name (self->mode_stack), "empty") == 0)
    gtk_stack_set_visible_child_name (self->mode_stack, "plan");
  update_actions (self);
  update_title (self);
}

static void
on_step_changed (AppWindow *self)
{
  int step = app_document_get_step (self->document);
  graphview_widget_set_step (self->graph, step);
  PlannerPlan *plan = app_document_get_plan (self->document);
  /* The graph follows the step's op, folded or not: playing never unfolds blocks. */
  if (plan && step >= 0 && (guint) step < planner_plan_get_n_trace_steps (plan)
      && self->graph_model && graphview_widget_is_ready (self->graph))
    graphview_widget_center_on_item (
        self->graph, graphview_model_get_item_of_op (self->graph_model,
                                                     planner_plan_get_trace_step (plan, step)->op));
}

static void
on_selected_op_changed (AppWindow *self)
{
  if (!self->syncing_selection)
    reveal_op (self, app_document_get_selected_op (self->document));
  update_actions (self);
}

static void
on_error_changed (AppWindow *self)
{
  const char *error = app_document_get_error (self->document);
  if (error)
    {
      g_autofree char *text = g_strdup_printf (_("Propagation refused the pins: %s"), error);
      gtk_label_set_text (self->error_label, text);
    }
  gtk_revealer_set_reveal_child (self->error_revealer, error != NULL);
}

static void
on_busy_changed (AppWindow *self)
{
  gboolean busy = app_document_get_busy (self->document);
  gtk_spinner_set_spinning (self->spinner, busy);
  gtk_widget_set_visible (GTK_WIDGET (self->spinner), busy);
}

static void
on_graph_selection_changed (AppWindow *self, int item)
{
  if (self->syncing_selection || self->document == NULL || self->graph_model == NULL)
    return;
  /* Folding renumbers the items and drops the widget's selection; the op stays selected
   * and is shown again when the new layout arrives (on_layout_ready). */
  if (item < 0 && !graphview_widget_is_ready (self->graph))
    return;
  int op = -1;
  if (item >= 0)
    {
      const GraphviewItem *it = graphview_model_get_item (self->graph_model, item);
      if (it->kind == GRAPHVIEW_ITEM_OP)
        op = (int) it->first_op;
    }
  self->syncing_selection = TRUE;
  app_document_set_selected_op (self->document, op);
  self->syncing_selection = FALSE;
}

static void
on_layout_ready (AppWindow *self)
{
  /* The selected node may have moved in the new layout: scroll to it again. */
  if (self->document && app_document_get_selected_op (self->document) >= 0)
    reveal_op (self, app_document_get_selected_op (self->document));
}

AppDocument *
app_window_get_document (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->document;
}

void
app_window_set_document (AppWindow *self, AppDocument *document)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (document == NULL || APP_IS_DOCUMENT (document));
  if (self->document == document)
    return;
  PlannerGraph *old_graph = self->document ? app_document_get_graph (self->document) : NULL;
  g_set_object (&self->document, document);
  g_signal_group_set_target (self->document_signals, document);

  if (document == NULL)
    {
      graphview_widget_set_plan (self->graph, NULL);
      gtk_stack_set_visible_child_name (self->mode_stack, "empty");
    }
  else
    {
      PlannerGraph *graph = app_document_get_graph (document);
      if (graph != old_graph || self->graph_model == NULL)
        {
          g_clear_object (&self->graph_model);
          self->graph_model = graphview_model_new (graph);
          graphview_widget_set_model (self->graph, self->graph_model);
        }
      on_plan_changed (self);
      on_error_changed (self);
      on_busy_changed (self);
      app_sidebar_set_current_id (self->sidebar, app_document_get_store_id (document));
    }
  app_trial_results_set_result (self->trial_results, NULL, NULL);
  show_trial_on_nodes (self, NULL);
  self->search_index = -1;
  update_autosave (self);
  update_actions (self);
  update_title (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_DOCUMENT]);
}

PlannerStore *
app_window_get_store (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->store;
}

void
app_window_set_store (AppWindow *self, PlannerStore *store)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  if (!g_set_object (&self->store, store))
    return;
  app_sidebar_set_store (self->sidebar, store);
  set_autosave_path (self, store ? planner_store_get_path (store) : NULL);
  update_actions (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STORE]);
}

/* ---- autosave ------------------------------------------------------------------------ */

/* A left-over of a session that did not end is moved here while it is offered back. */
static char *
recovered_path (AppWindow *self)
{
  return g_strconcat (self->autosave_path, ".recovered", NULL);
}

static void
update_autosave (AppWindow *self)
{
  if (self->autosave_path == NULL)
    return;
  AppDocument *doc = self->document;
  PlannerPlan *plan = doc ? app_document_get_plan (doc) : NULL;
  if (doc && plan && app_document_get_modified (doc))
    {
      app_autosave_write (self->autosave_path, plan, app_document_get_store_id (doc));
      self->autosaved = TRUE;
    }
  else if (self->autosaved && (doc == NULL || !app_document_get_modified (doc)))
    {
      app_autosave_remove (self->autosave_path);
      self->autosaved = FALSE;
    }
}

static void
set_autosave_path (AppWindow *self, const char *store_path)
{
  if (self->autosave_path)
    {
      if (self->autosaved)
        app_autosave_remove (self->autosave_path);
      app_autosave_claim (self->autosave_path, FALSE);
      g_clear_pointer (&self->autosave_path, g_free);
      self->autosaved = FALSE;
    }
  self->autosave_path = app_autosave_path_for_store (store_path);
  /* A file nobody in this process writes is what a session that did not end left. */
  if (!app_autosave_is_claimed (self->autosave_path))
    {
      g_autofree char *recovered = recovered_path (self);
      if (g_file_test (self->autosave_path, G_FILE_TEST_IS_REGULAR))
        g_rename (self->autosave_path, recovered);
      if (g_file_test (recovered, G_FILE_TEST_IS_REGULAR))
        gtk_revealer_set_reveal_child (self->recovery_revealer, TRUE);
    }
  app_autosave_claim (self->autosave_path, TRUE);
  update_autosave (self);
}

const char *
app_window_get_autosave_path (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->autosave_path;
}

gboolean
app_window_get_offers_recovery (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), FALSE);
  return gtk_revealer_get_reveal_child (self->recovery_revealer);
}

/* ---- asking before discarding ---------------------------------------------------------- */

/* What to do once the user agreed (or had nothing to lose). */
typedef void (*ProceedFunc) (AppWindow *self, gpointer data);

typedef struct
{
  ProceedFunc proceed;
  gpointer data;
  GDestroyNotify destroy;
} Proceed;

static Proceed *
proceed_new (ProceedFunc func, gpointer data, GDestroyNotify destroy)
{
  Proceed *p = g_new0 (Proceed, 1);
  p->proceed = func;
  p->data = data;
  p->destroy = destroy;
  return p;
}

static void
proceed_free (Proceed *p)
{
  if (p == NULL)
    return;
  if (p->destroy)
    p->destroy (p->data);
  g_free (p);
}

static void
proceed_run (AppWindow *self, Proceed *p)
{
  if (p == NULL)
    return;
  p->proceed (self, p->data);
  proceed_free (p);
}

typedef struct
{
  AppWindow *self;
  Proceed *then;
} Deferred;

static gboolean
run_deferred (gpointer data)
{
  Deferred *d = data;
  proceed_run (d->self, d->then);
  g_object_unref (d->self);
  g_free (d);
  return G_SOURCE_REMOVE;
}

/* From a dialog's response: what goes on may close the window, and with it the dialog that
 * is still emitting (a transient dialog dies with its parent), so it runs once the
 * emission is over. */
static void
proceed_later (AppWindow *self, Proceed *then)
{
  Deferred *d = g_new0 (Deferred, 1);
  d->self = g_object_ref (self);
  d->then = then;
  g_idle_add (run_deferred, d);
}

static void save_then (AppWindow *self, Proceed *then);

static AdwMessageDialog *
prompt_new (AppWindow *self, const char *heading, const char *body)
{
  AdwMessageDialog *dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (GTK_WINDOW (self),
                                                                         heading, body));
  self->prompt = dialog;
  g_object_add_weak_pointer (G_OBJECT (dialog), (gpointer *) &self->prompt);
  return dialog;
}

/* The question is answered: the next one may come (a name after Save). */
static AppWindow *
prompt_answered (AdwMessageDialog *dialog)
{
  AppWindow *self = APP_WINDOW (gtk_window_get_transient_for (GTK_WINDOW (dialog)));
  if (self->prompt == dialog)
    {
      g_object_remove_weak_pointer (G_OBJECT (dialog), (gpointer *) &self->prompt);
      self->prompt = NULL;
    }
  return self;
}

static void
discard_response (AdwMessageDialog *dialog, const char *response, gpointer data)
{
  AppWindow *self = prompt_answered (dialog);
  Proceed *then = g_object_steal_data (G_OBJECT (dialog), "proceed");
  if (g_str_equal (response, "save"))
    save_then (self, then);
  else if (g_str_equal (response, "discard"))
    proceed_later (self, then);
  else
    proceed_free (then);
}

/* Runs @then now when the document has no unsaved edits; else asks Save / Discard / Cancel
 * first, as GNOME applications do, and runs it after a save or a discard. */
static void
ask_before_discarding (AppWindow *self, Proceed *then)
{
  AppDocument *doc = self->document;
  if (doc == NULL || !app_document_get_modified (doc))
    {
      proceed_run (self, then);
      return;
    }
  if (self->prompt)
    {
      /* One question at a time: the one shown is answered first. */
      proceed_free (then);
      gtk_window_present (GTK_WINDOW (self->prompt));
      return;
    }
  g_autofree char *heading = g_strdup_printf (_("Save Changes to “%s”?"),
                                              app_document_get_name (doc));
  AdwMessageDialog *dialog
      = prompt_new (self, heading, _("The pin edits since the last save are lost if you "
                                     "discard them."));
  adw_message_dialog_add_responses (dialog, "cancel", _("_Cancel"), "discard", _("_Discard"),
                                    "save", _("_Save"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "discard", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_response_appearance (dialog, "save", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (dialog, "save");
  adw_message_dialog_set_close_response (dialog, "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "proceed", then, (GDestroyNotify) proceed_free);
  g_signal_connect (dialog, "response", G_CALLBACK (discard_response), NULL);
  gtk_window_present (GTK_WINDOW (dialog));
}

AdwMessageDialog *
app_window_get_prompt (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->prompt;
}

/* ---- loading ---------------------------------------------------------------------- */

typedef struct
{
  char *model;
  char *mesh;
  char *hardware;
  char *policy;
  char *path;  /* a plan file */
  gint64 id;   /* a stored plan */
  char *autosave; /* a recovered autosave */
  PlannerStore *store;
} LoadRequest;

typedef struct
{
  PlannerGraph *graph;
  PlannerMesh *mesh;
  PlannerHardware *hw;
  PlannerPlan *plan;
  gint64 store_id; /* of a recovered autosave */
} LoadResult;

static void
load_request_free (LoadRequest *req)
{
  g_free (req->model);
  g_free (req->mesh);
  g_free (req->hardware);
  g_free (req->policy);
  g_free (req->path);
  g_free (req->autosave);
  g_clear_object (&req->store);
  g_free (req);
}

static void
load_result_free (LoadResult *res)
{
  g_clear_object (&res->graph);
  g_clear_pointer (&res->mesh, planner_mesh_free);
  g_clear_pointer (&res->hw, planner_hardware_free);
  g_clear_object (&res->plan);
  g_free (res);
}

static void
load_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  LoadRequest *req = task_data;
  GError *error = NULL;
  LoadResult *res = g_new0 (LoadResult, 1);
  if (req->autosave)
    {
      res->plan = app_autosave_read (req->autosave, &res->store_id, &error);
      if (res->plan)
        g_unlink (req->autosave);
    }
  else if (req->id > 0)
    res->plan = planner_store_load_plan (req->store, req->id, &error);
  else if (req->path)
    res->plan = planner_plan_load_json (req->path, &error);
  else
    {
      res->mesh = planner_mesh_parse (req->mesh, &error);
      if (res->mesh)
        res->hw = planner_hardware_lookup (req->hardware, &error);
      if (res->hw)
        res->graph = planner_model_load (req->model, NULL, &error);
    }
  if (error)
    {
      load_result_free (res);
      g_task_return_error (task, error);
    }
  else
    g_task_return_pointer (task, res, (GDestroyNotify) load_result_free);
}

static void
load_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AppWindow *self = APP_WINDOW (source);
  LoadRequest *req = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  LoadResult *res = g_task_propagate_pointer (G_TASK (result), &error);
  if (res == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        show_error (self, req->model      ? req->model
                          : req->path     ? req->path
                          : req->autosave ? req->autosave
                                          : _("Plan store"),
                    error);
      return;
    }
  g_autoptr (AppDocument) doc = NULL;
  if (res->plan && req->autosave)
    {
      /* The recovered edits are unsaved edits again. */
      doc = app_document_new_for_plan (res->plan, res->store_id);
      app_document_mark_modified (doc);
    }
  else if (res->plan)
    doc = app_document_new_for_plan (res->plan, req->id);
  else
    {
      doc = app_document_new (res->graph, res->mesh, res->hw, req->policy);
      app_document_replan (doc);
    }
  app_window_set_document (self, doc);
  load_result_free (res);
}

static void
start_load (AppWindow *self, LoadRequest *req)
{
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();
  g_autoptr (GTask) task = g_task_new (self, self->cancellable, load_done, NULL);
  g_task_set_source_tag (task, start_load);
  g_task_set_task_data (task, req, (GDestroyNotify) load_request_free);
  g_task_run_in_thread (task, load_thread);
}

void
app_window_load_model (AppWindow *self, const char *model, const char *mesh,
                       const char *hardware, const char *policy)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (model != NULL && mesh != NULL && hardware != NULL);
  LoadRequest *req = g_new0 (LoadRequest, 1);
  req->model = g_strdup (model);
  req->mesh = g_strdup (mesh);
  req->hardware = g_strdup (hardware);
  req->policy = policy && *policy ? g_strdup (policy) : NULL;
  start_load (self, req);
}

static char *
settings_string (AppWindow *self, const char *key, const char *fallback)
{
  if (self->settings)
    return g_settings_get_string (self->settings, key);
  return g_strdup (fallback);
}

void
app_window_open_file (AppWindow *self, GFile *file)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (G_IS_FILE (file));
  g_autofree char *path = g_file_get_path (file);
  if (path == NULL)
    return;
  /* A plan file names itself in its first bytes; anything else is a model source. */
  g_autofree char *head = NULL;
  gsize length = 0;
  g_autoptr (GFileInputStream) in = g_file_read (file, NULL, NULL);
  if (in)
    {
      head = g_malloc0 (4097);
      length = 0;
      g_input_stream_read_all (G_INPUT_STREAM (in), head, 4096, &length, NULL, NULL);
    }
  LoadRequest *req = g_new0 (LoadRequest, 1);
  if (head && strstr (head, "\"shardscope_plan\""))
    req->path = g_steal_pointer (&path);
  else
    {
      req->model = g_steal_pointer (&path);
      req->mesh = settings_string (self, "default-mesh", "dp=2,mp=4");
      req->hardware = settings_string (self, "default-hardware", "h100-sxm");
      req->policy = settings_string (self, "default-policy", "megatron");
      if (*req->policy == '\0')
        g_clear_pointer (&req->policy, g_free);
    }
  start_load (self, req);
}

void
app_window_open_stored (AppWindow *self, gint64 id)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (self->store != NULL);
  LoadRequest *req = g_new0 (LoadRequest, 1);
  req->id = id;
  req->store = g_object_ref (self->store);
  start_load (self, req);
}

/* ---- saving ----------------------------------------------------------------------- */

/* A name no stored plan has: @base, else "BASE 2", "BASE 3", ... (@base when @entries is
 * NULL). */
static char *
free_plan_name (GPtrArray *entries, const char *base)
{
  char *name = g_strdup (base);
  for (guint n = 2; entries; n++)
    {
      gboolean taken = FALSE;
      for (guint i = 0; i < entries->len && !taken; i++)
        taken = g_strcmp0 (((PlannerStoreEntry *) g_ptr_array_index (entries, i))->name, name)
                == 0;
      if (!taken)
        break;
      g_free (name);
      name = g_strdup_printf ("%s %u", base, n);
    }
  return name;
}

typedef struct
{
  PlannerStore *store;
  PlannerPlan *plan;
  AppDocument *document;
  char *name;
  gint64 parent;
  Proceed *then; /* after a successful save */
} SaveRequest;

static void
save_request_free (SaveRequest *req)
{
  g_object_unref (req->store);
  g_object_unref (req->plan);
  g_object_unref (req->document);
  g_free (req->name);
  proceed_free (req->then);
  g_free (req);
}

static void
save_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  SaveRequest *req = task_data;
  GError *error = NULL;
  g_autoptr (GPtrArray) entries = planner_store_list_plans (req->store, &error);
  if (entries == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  /* The plan's own name, unless a stored plan has it. */
  g_autofree char *name = free_plan_name (entries, req->name);
  gint64 id = planner_store_save_plan (req->store, req->plan, name, req->parent, &error);
  if (id == 0)
    g_task_return_error (task, error);
  else
    g_task_return_int (task, id);
}

static void
save_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AppWindow *self = APP_WINDOW (source);
  SaveRequest *req = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  gint64 id = g_task_propagate_int (G_TASK (result), &error);
  if (id == 0)
    {
      show_error (self, _("Saving failed"), error);
      return;
    }
  /* The store names the plan what it was saved as. */
  app_document_set_name (req->document, planner_plan_get_name (req->plan));
  app_document_set_store_id (req->document, id);
  app_sidebar_reload (self->sidebar);
  app_sidebar_set_current_id (self->sidebar, id);
  g_autofree char *text = g_strdup_printf (_("Saved as “%s”"), planner_plan_get_name (req->plan));
  app_window_show_toast (self, text);
  update_title (self);
  proceed_run (self, g_steal_pointer (&req->then));
}

static void
start_save (AppWindow *self, Proceed *then)
{
  AppDocument *doc = self->document;
  if (doc == NULL || app_document_get_plan (doc) == NULL || self->store == NULL)
    {
      proceed_free (then);
      return;
    }
  gint64 id = app_document_get_store_id (doc);
  if (id > 0 && !app_document_get_modified (doc))
    {
      app_window_show_toast (self, _("The plan is saved"));
      proceed_later (self, then);
      return;
    }
  SaveRequest *req = g_new0 (SaveRequest, 1);
  req->store = g_object_ref (self->store);
  req->plan = g_object_ref (app_document_get_plan (doc));
  req->document = g_object_ref (doc);
  req->name = g_strdup (app_document_get_name (doc));
  /* An edited stored plan is saved as a new plan derived from it. */
  req->parent = id;
  req->then = then;
  g_autoptr (GTask) task = g_task_new (self, NULL, save_done, NULL);
  g_task_set_source_tag (task, start_save);
  g_task_set_task_data (task, req, (GDestroyNotify) save_request_free);
  g_task_run_in_thread (task, save_thread);
}

static void
name_response (AdwMessageDialog *dialog, const char *response, gpointer data)
{
  AppWindow *self = prompt_answered (dialog);
  Proceed *then = g_object_steal_data (G_OBJECT (dialog), "proceed");
  if (!g_str_equal (response, "save") || self->document == NULL)
    {
      proceed_free (then);
      return;
    }
  GtkEditable *entry = GTK_EDITABLE (adw_message_dialog_get_extra_child (dialog));
  g_autofree char *name = g_strstrip (g_strdup (gtk_editable_get_text (entry)));
  if (*name)
    app_document_set_name (self->document, name);
  start_save (self, then);
}

/* A plan saved for the first time is named first. */
static void
save_then (AppWindow *self, Proceed *then)
{
  AppDocument *doc = self->document;
  if (doc == NULL || app_document_get_store_id (doc) > 0 || self->store == NULL
      || self->prompt)
    {
      start_save (self, then);
      return;
    }
  AdwMessageDialog *dialog
      = prompt_new (self, _("Save the Plan"), _("The plan store keeps it under this name."));
  GtkWidget *entry = gtk_entry_new ();
  gtk_editable_set_text (GTK_EDITABLE (entry), app_document_get_name (doc));
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  adw_message_dialog_set_extra_child (dialog, entry);
  adw_message_dialog_add_responses (dialog, "cancel", _("_Cancel"), "save", _("_Save"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "save", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (dialog, "save");
  adw_message_dialog_set_close_response (dialog, "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "proceed", then, (GDestroyNotify) proceed_free);
  g_signal_connect (dialog, "response", G_CALLBACK (name_response), NULL);
  gtk_window_present (GTK_WINDOW (dialog));
}

void
app_window_save (AppWindow *self)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  save_then (self, NULL);
}

/* ---- search ----------------------------------------------------------------------- */

static void
search_step (AppWindow *self, int direction)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (self->search_entry));
  gtk_widget_remove_css_class (GTK_WIDGET (self->search_entry), "error");
  if (self->document == NULL || *text == '\0')
    {
      gtk_label_set_text (self->search_status, "");
      return;
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (GRegex) regex = g_regex_new (text, G_REGEX_CASELESS | G_REGEX_OPTIMIZE, 0, &error);
  if (regex == NULL)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->search_entry), "error");
      gtk_label_set_text (self->search_status, _("Invalid expression"));
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->search_entry), error->message);
      return;
    }
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->search_entry), NULL);
  PlannerGraph *graph = app_document_get_graph (self->document);
  guint n_ops = planner_graph_get_n_ops (graph);
  g_autoptr (GArray) matches = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      if (g_regex_match (regex, op->name, 0, NULL)
          || g_regex_match (regex, planner_op_type_to_string (op->type), 0, NULL))
        g_array_append_val (matches, i);
    }
  if (matches->len == 0)
    {
      gtk_label_set_text (self->search_status, _("No match"));
      return;
    }
  int current = app_document_get_selected_op (self->document);
  guint pick = direction >= 0 ? 0 : matches->len - 1;
  for (guint k = 0; k < matches->len; k++)
    {
      guint idx = direction >= 0 ? k : matches->len - 1 - k;
      int op = (int) g_array_index (matches, guint, idx);
      if ((direction > 0 && op > current) || (direction < 0 && op < current)
          || (direction == 0 && op >= current))
        {
          pick = idx;
          break;
        }
    }
  app_document_set_selected_op (self->document, (int) g_array_index (matches, guint, pick));
  g_autofree char *status = g_strdup_printf (_("%u of %u"), pick + 1, matches->len);
  gtk_label_set_text (self->search_status, status);
}

static void
action_find_next_cb (AppWindow *self)
{
  search_step (self, 1);
}

static void
on_search_changed (AppWindow *self)
{
  search_step (self, 0);
}

/* ---- actions ---------------------------------------------------------------------- */

typedef struct
{
  char *model, *mesh, *hardware, *policy;
} NewPlan;

static void
new_plan_free (NewPlan *n)
{
  g_free (n->model);
  g_free (n->mesh);
  g_free (n->hardware);
  g_free (n->policy);
  g_free (n);
}

static void
new_plan_proceed (AppWindow *self, gpointer data)
{
  NewPlan *n = data;
  app_window_load_model (self, n->model, n->mesh, n->hardware, n->policy);
}

void
app_window_create_plan (AppWindow *self, const char *model, const char *mesh,
                        const char *hardware, const char *policy)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (model != NULL && mesh != NULL && hardware != NULL);
  NewPlan *n = g_new0 (NewPlan, 1);
  n->model = g_strdup (model);
  n->mesh = g_strdup (mesh);
  n->hardware = g_strdup (hardware);
  n->policy = g_strdup (policy);
  ask_before_discarding (self,
                         proceed_new (new_plan_proceed, n, (GDestroyNotify) new_plan_free));
}

static void
new_plan_create (AppWindow *self, const char *model, const char *mesh, const char *hardware,
                 const char *policy)
{
  if (self->settings)
    {
      g_settings_set_string (self->settings, "default-mesh", mesh);
      g_settings_set_string (self->settings, "default-hardware", hardware);
      g_settings_set_string (self->settings, "default-policy", policy ? policy : "");
    }
  app_window_create_plan (self, model, mesh, hardware, policy);
}

static void
action_new_plan (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  AppNewPlanDialog *dialog = app_new_plan_dialog_new (GTK_WINDOW (self));
  g_signal_connect_object (dialog, "create", G_CALLBACK (new_plan_create), self,
                           G_CONNECT_SWAPPED);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* What a file chooser does with the file accepted; @format is the chooser's "format". */
typedef void (*FileChosenFunc) (AppWindow *self, GFile *file, const char *format);

static void
file_chooser_response (GtkNativeDialog *native, int response, AppWindow *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr (GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (native));
      FileChosenFunc chosen = g_object_get_data (G_OBJECT (native), "chosen");
      if (file)
        chosen (self, file, g_object_get_data (G_OBJECT (native), "format"));
    }
  g_object_unref (native);
}

/* A chooser of @filter_label files (@pattern, or several split by ';') that hands the one accepted to @chosen; the
 * caller shows it. */
static GtkFileChooserNative *
file_chooser_new (AppWindow *self, GtkFileChooserAction action, const char *title,
                  const char *accept_label, const char *filter_label, const char *pattern,
                  FileChosenFunc chosen)
{
  GtkFileChooserNative *native = gtk_file_chooser_native_new (title, GTK_WINDOW (self), action,
                                                              accept_label, _("_Cancel"));
  g_autoptr (GtkFileFilter) filter = gtk_file_filter_new ();
  gtk_file_filter_set_name (filter, filter_label);
  g_auto (GStrv) patterns = g_strsplit (pattern, ";", -1);
  for (guint i = 0; patterns[i]; i++)
    gtk_file_filter_add_pattern (filter, patterns[i]);
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (native), filter);
  g_object_set_data (G_OBJECT (native), "chosen", chosen);
  g_signal_connect (native, "response", G_CALLBACK (file_chooser_response), self);
  return native;
}

static void
open_file_proceed (AppWindow *self, gpointer data)
{
  app_window_open_file (self, G_FILE (data));
}

static void
open_file_chosen (AppWindow *self, GFile *file, const char *format)
{
  ask_before_discarding (self, proceed_new (open_file_proceed, g_object_ref (file),
                                            g_object_unref));
}

static void
action_open_file (GtkWidget *widget, const char *name, GVariant *param)
{
  GtkFileChooserNative *native = file_chooser_new (
      APP_WINDOW (widget), GTK_FILE_CHOOSER_ACTION_OPEN,
      _("Open a Plan, a config.json, a Graph JSON or an ONNX Model"), _("_Open"),
      _("Plans and models (JSON, ONNX)"), "*.json;*.onnx",
      open_file_chosen);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (native));
}

static void
open_store_chosen (AppWindow *self, GFile *file, const char *format)
{
  g_autofree char *path = g_file_get_path (file);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerStore) store = path ? planner_store_open (path, &error) : NULL;
  if (store)
    {
      app_window_set_store (self, store);
      if (self->settings)
        g_settings_set_string (self->settings, "last-store", path);
    }
  else if (error)
    show_error (self, path, error);
}

static void
action_open_store (GtkWidget *widget, const char *name, GVariant *param)
{
  GtkFileChooserNative *native = file_chooser_new (
      APP_WINDOW (widget), GTK_FILE_CHOOSER_ACTION_OPEN, _("Open a Plan Store"), _("_Open"),
      _("Plan stores"), "*.db", open_store_chosen);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (native));
}

static void
action_save (GtkWidget *widget, const char *name, GVariant *param)
{
  app_window_save (APP_WINDOW (widget));
}

static void
export_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AppWindow *self = APP_WINDOW (source);
  g_autoptr (GError) error = NULL;
  g_autofree char *path = user_data;
  if (!app_window_export_finish (self, result, &error))
    show_error (self, _("Export failed"), error);
  else
    {
      g_autofree char *text = g_strdup_printf (_("Exported to %s"), path);
      app_window_show_toast (self, text);
    }
}

static void
export_chosen (AppWindow *self, GFile *file, const char *format)
{
  app_window_export_async (self, format, file, export_done, g_file_get_path (file));
}

static void
choose_export_file (AppWindow *self, const char *format)
{
  const AppExportFormat *fmt = app_export_format_lookup (format);
  if (fmt == NULL || self->document == NULL)
    return;
  g_autofree char *pattern = g_strconcat ("*", fmt->extension, NULL);
  GtkFileChooserNative *native
      = file_chooser_new (self, GTK_FILE_CHOOSER_ACTION_SAVE, _("Export"), _("_Export"),
                          _(fmt->label), pattern, export_chosen);
  g_autofree char *base = g_strdelimit (g_strdup (app_document_get_name (self->document)),
                                        " /=,", '-');
  g_autofree char *suggested = g_strconcat (base, fmt->extension, NULL);
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (native), suggested);
  g_object_set_data_full (G_OBJECT (native), "format", g_strdup (format), g_free);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (native));
}

static void
action_export (GtkWidget *widget, const char *name, GVariant *param)
{
  choose_export_file (APP_WINDOW (widget), g_variant_get_string (param, NULL));
}

static void
action_save_as (GtkWidget *widget, const char *name, GVariant *param)
{
  choose_export_file (APP_WINDOW (widget), "json");
}

static void
action_undo (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->document)
    app_document_undo (self->document);
}

static void
action_redo (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->document)
    app_document_redo (self->document);
}

static void
action_find_next (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  gtk_search_bar_set_search_mode (self->search_bar, TRUE);
  search_step (self, g_str_equal (name, "win.find-previous") ? -1 : 1);
}

static void
action_zoom_fit (GtkWidget *widget, const char *name, GVariant *param)
{
  graphview_widget_zoom_to_fit (APP_WINDOW (widget)->graph);
}

static void
action_zoom (GtkWidget *widget, const char *name, GVariant *param)
{
  GraphviewWidget *graph = APP_WINDOW (widget)->graph;
  double factor = g_str_equal (name, "win.zoom-in") ? APP_WINDOW_ZOOM_STEP : 1 / APP_WINDOW_ZOOM_STEP;
  graphview_widget_zoom_at (graph, factor, gtk_widget_get_width (GTK_WIDGET (graph)) / 2.0,
                            gtk_widget_get_height (GTK_WIDGET (graph)) / 2.0);
}

/* One instance of a repeated block, by its name ("model.layers.37"); the others stay
 * folded. */
static void
action_expand_block (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  const char *block = g_variant_get_string (param, NULL);
  if (self->graph_model == NULL || *block == '\0')
    return;
  /* Block names hold no glob characters: the name matches its block alone. */
  if (graphview_model_expand_matching (self->graph_model, block) == 0)
    {
      g_autofree char *text = g_strdup_printf (_("No repeated block is named %s"), block);
      app_window_show_toast (self, text);
    }
}

static void
action_expand (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->graph_model == NULL)
    return;
  if (g_str_equal (name, "win.expand-all"))
    graphview_model_expand_all (self->graph_model);
  else
    graphview_model_collapse_all (self->graph_model);
}

static void
action_select_op (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->document == NULL)
    return;
  const char *op_name = g_variant_get_string (param, NULL);
  int op = *op_name ? planner_graph_find_op (app_document_get_graph (self->document), op_name)
                    : -1;
  if (op < 0 && *op_name)
    {
      g_autofree char *text = g_strdup_printf (_("No op is named %s"), op_name);
      app_window_show_toast (self, text);
      return;
    }
  app_document_set_selected_op (self->document, op);
}

static void
action_select_adjacent (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->document == NULL)
    return;
  int n = (int) planner_graph_get_n_ops (app_document_get_graph (self->document));
  int op = app_document_get_selected_op (self->document);
  op += g_str_equal (name, "win.select-next-op") ? 1 : -1;
  app_document_set_selected_op (self->document, CLAMP (op, 0, n - 1));
}

static const char *
selected_op_name (AppWindow *self)
{
  return self->document ? app_document_get_selected_op_name (self->document) : NULL;
}

static void
action_pin (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  const char *op_name = selected_op_name (self);
  if (op_name == NULL)
    return;
  g_autoptr (GError) error = NULL;
  if (!app_document_pin (self->document, op_name, g_variant_get_string (param, NULL), &error))
    show_error (self, op_name, error);
}

static void
action_edit_pin (GtkWidget *widget, const char *name, GVariant *param)
{
  app_inspector_focus_pin_entry (APP_WINDOW (widget)->inspector);
}

static void
action_unpin (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  const char *op_name = selected_op_name (self);
  if (op_name)
    app_document_unpin (self->document, op_name);
}

static void
action_timeline (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->document == NULL)
    return;
  if (g_str_equal (name, "win.play"))
    app_timeline_set_playing (self->timeline, !app_timeline_get_playing (self->timeline));
  else if (g_str_equal (name, "win.step-next"))
    app_timeline_step (self->timeline, 1);
  else if (g_str_equal (name, "win.step-previous"))
    app_timeline_step (self->timeline, -1);
  else if (g_str_equal (name, "win.step-first"))
    app_document_set_step (self->document, 0);
  else if (g_str_equal (name, "win.step-last"))
    app_document_set_step (self->document, -1);
}

void
app_window_compare (AppWindow *self, PlannerPlan *a, const char *a_label)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (PLANNER_IS_PLAN (a));
  PlannerPlan *b = self->document ? app_document_get_plan (self->document) : NULL;
  if (b == NULL)
    return;
  g_autoptr (GError) error = NULL;
  if (!app_compare_view_set_plans (self->compare_view, a, a_label, b,
                                   app_document_get_name (self->document), &error))
    {
      show_error (self, _("Cannot compare"), error);
      return;
    }
  gtk_stack_set_visible_child_name (self->mode_stack, "compare");
}

static void
action_compare (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (g_strcmp0 (gtk_stack_get_visible_child_name (self->mode_stack), "compare") == 0)
    {
      gtk_stack_set_visible_child_name (self->mode_stack,
                                        self->document ? "plan" : "empty");
      return;
    }
  if (self->document == NULL)
    return;
  /* The butterfly effect of the last pin edit; before any edit, the stored original. */
  PlannerPlan *previous = app_document_get_previous_plan (self->document);
  if (previous)
    app_window_compare (self, previous, _("Before the last edit"));
  else
    app_window_compare (self, app_document_get_plan (self->document),
                        app_document_get_name (self->document));
}

/* Each node shows its op's measured against estimated time and error. */
static void
show_trial_on_nodes (AppWindow *self, const ExecutorTrialResult *result)
{
  GraphviewRenderer *renderer = graphview_widget_get_renderer (self->graph);
  PlannerPlan *plan = self->document ? app_document_get_plan (self->document) : NULL;
  guint n_ops = plan ? planner_graph_get_n_ops (planner_plan_get_graph (plan)) : 0;
  if (renderer == NULL || result == NULL || result->ops->len != n_ops || n_ops == 0)
    {
      if (renderer)
        graphview_renderer_set_trial (renderer, NULL, NULL, NULL, 0);
      gtk_widget_queue_draw (GTK_WIDGET (self->graph));
      return;
    }
  g_autofree double *measured = g_new (double, n_ops);
  g_autofree double *estimated = g_new (double, n_ops);
  g_autofree double *error = g_new (double, n_ops);
  for (guint i = 0; i < n_ops; i++)
    {
      const ExecutorTiming *t = &g_array_index (result->ops, ExecutorTiming, i);
      measured[i] = t->measured_s;
      estimated[i] = t->estimated_s;
      error[i] = t->max_rel_error;
    }
  graphview_renderer_set_trial (renderer, measured, estimated, error, result->tolerance);
  gtk_widget_queue_draw (GTK_WIDGET (self->graph));
}

static void
trial_finished (AppWindow *self, gpointer result_ptr, gpointer train_ptr)
{
  const ExecutorTrialResult *result = result_ptr;
  app_trial_results_set_result (self->trial_results, result, train_ptr);
  show_trial_on_nodes (self, result);
  gtk_widget_set_visible (GTK_WIDGET (self->trial_results), TRUE);
  AppDocument *doc = self->document;
  if (doc == NULL || self->store == NULL || app_document_get_store_id (doc) == 0)
    {
      app_window_show_toast (self, _("Save the plan to keep its trial runs"));
      return;
    }
  /* Stored with the plan: one measurement per op and per redistribution. */
  g_autoptr (GError) error = NULL;
  if (app_trial_store_add (self->store, app_document_get_store_id (doc),
                           app_document_get_plan (doc), result, &error)
      == 0)
    show_error (self, _("The trial run was not stored"), error);
  else
    app_sidebar_reload (self->sidebar);
}

void
app_window_connect_trial_dialog (AppWindow *self, GtkWidget *dialog)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_signal_connect_object (dialog, "finished", G_CALLBACK (trial_finished), self,
                           G_CONNECT_SWAPPED);
}

static void
action_trial_run (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  PlannerPlan *plan = self->document ? app_document_get_plan (self->document) : NULL;
  if (plan == NULL)
    return;
  GtkWidget *dialog = app_trial_dialog_new (GTK_WINDOW (self), plan);
  app_window_connect_trial_dialog (self, dialog);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* ---- store actions (target: the plan id) ----------------------------------------- */

static void
action_rename_plan (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  const char *new_name = NULL;
  gint64 id = 0;
  g_variant_get (param, "(x&s)", &id, &new_name);
  g_autoptr (GError) error = NULL;
  if (self->store == NULL || *new_name == '\0')
    return;
  if (!planner_store_rename_plan (self->store, id, new_name, &error))
    {
      show_error (self, _("Renaming failed"), error);
      return;
    }
  if (self->document && app_document_get_store_id (self->document) == id)
    app_document_set_name (self->document, new_name);
  app_sidebar_reload (self->sidebar);
  update_title (self);
}

static void
duplicate_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  PlannerStore *store = source;
  gint64 id = *(gint64 *) task_data;
  GError *error = NULL;
  g_autoptr (PlannerPlan) plan = planner_store_load_plan (store, id, &error);
  if (plan == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  g_autoptr (GPtrArray) entries = planner_store_list_plans (store, NULL);
  g_autofree char *base = g_strdup_printf (_("%s (copy)"), planner_plan_get_name (plan));
  g_autofree char *name = free_plan_name (entries, base);
  gint64 new_id = planner_store_save_plan (store, plan, name, id, &error);
  if (new_id == 0)
    g_task_return_error (task, error);
  else
    g_task_return_int (task, new_id);
}

static void
duplicate_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AppWindow *self = APP_WINDOW (user_data);
  g_autoptr (GError) error = NULL;
  if (g_task_propagate_int (G_TASK (result), &error) == 0)
    show_error (self, _("Duplicating failed"), error);
  app_sidebar_reload (self->sidebar);
  g_object_unref (self);
}

static void
action_duplicate_plan (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->store == NULL)
    return;
  gint64 *id = g_new (gint64, 1);
  *id = g_variant_get_int64 (param);
  g_autoptr (GTask) task = g_task_new (self->store, NULL, duplicate_done, g_object_ref (self));
  g_task_set_task_data (task, id, g_free);
  g_task_run_in_thread (task, duplicate_thread);
}

static void
delete_undo (AdwToast *toast, AppWindow *self)
{
  gint64 id = GPOINTER_TO_SIZE (g_object_get_data (G_OBJECT (toast), "plan-id"));
  g_object_set_data (G_OBJECT (toast), "undone", GINT_TO_POINTER (TRUE));
  app_sidebar_set_hidden (self->sidebar, id, FALSE);
}

static void
delete_now (AppWindow *self, gint64 id)
{
  g_autoptr (GError) error = NULL;
  if (!planner_store_delete_plan (self->store, id, &error))
    show_error (self, _("Deleting failed"), error);
  if (self->document && app_document_get_store_id (self->document) == id)
    app_document_set_store_id (self->document, 0);
  app_sidebar_reload (self->sidebar);
}

/* Deletion is final when the toast goes without its Undo being pressed. */
static void
delete_dismissed (AdwToast *toast, AppWindow *self)
{
  gint64 id = GPOINTER_TO_SIZE (g_object_get_data (G_OBJECT (toast), "plan-id"));
  /* Not pending: made final already (the window closed) or undone. */
  if (self->pending_deletes == NULL || !g_hash_table_remove (self->pending_deletes, &id))
    return;
  if (!g_object_get_data (G_OBJECT (toast), "undone") && self->store)
    delete_now (self, id);
}

/* Deletions still undoable become final (the window closes). */
static void
finish_pending_deletes (AppWindow *self)
{
  g_autoptr (GList) toasts = g_hash_table_get_values (self->pending_deletes);
  for (GList *l = toasts; l; l = l->next)
    {
      AdwToast *toast = l->data;
      gint64 id = GPOINTER_TO_SIZE (g_object_get_data (G_OBJECT (toast), "plan-id"));
      gboolean undone = g_object_get_data (G_OBJECT (toast), "undone") != NULL;
      g_hash_table_remove (self->pending_deletes, &id);
      if (!undone && self->store)
        delete_now (self, id);
    }
}

static void
action_delete_plan (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  gint64 id = g_variant_get_int64 (param);
  const PlannerStoreEntry *entry = app_sidebar_get_entry (self->sidebar, id);
  if (entry == NULL)
    return;
  g_autofree char *text = g_strdup_printf (_("“%s” deleted"), entry->name);
  AdwToast *toast = adw_toast_new (text);
  adw_toast_set_button_label (toast, _("_Undo"));
  adw_toast_set_timeout (toast, 6);
  g_object_set_data (G_OBJECT (toast), "plan-id", GSIZE_TO_POINTER ((gsize) id));
  g_signal_connect (toast, "button-clicked", G_CALLBACK (delete_undo), self);
  g_signal_connect (toast, "dismissed", G_CALLBACK (delete_dismissed), self);
  gint64 *key = g_new (gint64, 1);
  *key = id;
  g_hash_table_insert (self->pending_deletes, key, g_object_ref (toast));
  app_sidebar_set_hidden (self->sidebar, id, TRUE);
  add_toast (self, toast);
}

static void
action_compare_stored (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->store == NULL)
    return;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan
      = planner_store_load_plan (self->store, g_variant_get_int64 (param), &error);
  if (plan == NULL)
    show_error (self, _("Cannot compare"), error);
  else
    app_window_compare (self, plan, planner_plan_get_name (plan));
}

static void
open_stored_proceed (AppWindow *self, gpointer data)
{
  app_window_open_stored (self, *(gint64 *) data);
}

static void
on_plan_activated (AppWindow *self, gint64 id)
{
  if (self->document && app_document_get_store_id (self->document) == id)
    return;
  gint64 *data = g_new (gint64, 1);
  *data = id;
  ask_before_discarding (self, proceed_new (open_stored_proceed, data, g_free));
}

static void
restore_proceed (AppWindow *self, gpointer data)
{
  gtk_revealer_set_reveal_child (self->recovery_revealer, FALSE);
  LoadRequest *req = g_new0 (LoadRequest, 1);
  req->autosave = recovered_path (self);
  start_load (self, req);
}

static void
action_restore_autosave (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->autosave_path == NULL)
    return;
  ask_before_discarding (self, proceed_new (restore_proceed, NULL, NULL));
}

static void
action_discard_autosave (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  gtk_revealer_set_reveal_child (self->recovery_revealer, FALSE);
  if (self->autosave_path)
    {
      g_autofree char *recovered = recovered_path (self);
      g_unlink (recovered);
    }
}

/* ---- export ----------------------------------------------------------------------- */

void
app_window_export_async (AppWindow *self, const char *format, GFile *file,
                         GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  PlannerPlan *plan = self->document ? app_document_get_plan (self->document) : NULL;
  app_export_async (G_OBJECT (self), plan, graphview_widget_get_renderer (self->graph), format,
                    file, NULL, callback, user_data);
}

gboolean
app_window_export_finish (AppWindow *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), FALSE);
  return app_export_finish (result, error);
}

/* ---- parts ------------------------------------------------------------------------ */

GraphviewWidget *
app_window_get_graph (AppWindow *self)
{
  return self->graph;
}

GtkWidget *
app_window_get_part (AppWindow *self, const char *name)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);
  GObject *part = gtk_widget_get_template_child (GTK_WIDGET (self), APP_TYPE_WINDOW, name);
  g_return_val_if_fail (GTK_IS_WIDGET (part), NULL);
  return GTK_WIDGET (part);
}

const char *
app_window_get_mode (AppWindow *self)
{
  return gtk_stack_get_visible_child_name (self->mode_stack);
}

/* ---- object ----------------------------------------------------------------------- */

static void
close_proceed (AppWindow *self, gpointer data)
{
  self->close_confirmed = TRUE;
  gtk_window_close (GTK_WINDOW (self));
}

static gboolean
app_window_close_request (GtkWindow *window)
{
  AppWindow *self = APP_WINDOW (window);
  if (!self->close_confirmed && self->document && app_document_get_modified (self->document))
    {
      ask_before_discarding (self, proceed_new (close_proceed, NULL, NULL));
      return TRUE;
    }
  /* Closed on purpose: nothing is left to recover. */
  if (self->autosave_path)
    {
      app_autosave_remove (self->autosave_path);
      app_autosave_flush ();
      app_autosave_claim (self->autosave_path, FALSE);
      self->autosaved = FALSE;
    }
  if (self->settings)
    {
      int width = 0, height = 0;
      gtk_window_get_default_size (window, &width, &height);
      g_settings_set_int (self->settings, "window-width", width);
      g_settings_set_int (self->settings, "window-height", height);
      g_settings_set_boolean (self->settings, "window-maximized",
                              gtk_window_is_maximized (window));
    }
  /* Deletions still undoable become final now. */
  finish_pending_deletes (self);
  return GTK_WINDOW_CLASS (app_window_parent_class)->close_request (window);
}

static void
app_window_dispose (GObject *object)
{
  AppWindow *self = APP_WINDOW (object);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->document_signals)
    g_signal_group_set_target (self->document_signals, NULL);
  g_clear_object (&self->document_signals);
  g_clear_object (&self->document);
  g_clear_object (&self->graph_model);
  g_clear_object (&self->store);
  g_clear_object (&self->settings);
  g_clear_pointer (&self->pending_deletes, g_hash_table_unref);
  g_clear_pointer (&self->toasts, g_ptr_array_unref);
  g_clear_handle_id (&self->toast_timeout, g_source_remove);
  if (self->autosave_path)
    app_autosave_claim (self->autosave_path, FALSE);
  g_clear_pointer (&self->autosave_path, g_free);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_WINDOW);
  G_OBJECT_CLASS (app_window_parent_class)->dispose (object);
}

static void
app_window_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppWindow *self = APP_WINDOW (object);
  switch (prop_id)
    {
    case PROP_DOCUMENT: g_value_set_object (value, self->document); break;
    case PROP_STORE: g_value_set_object (value, self->store); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_window_set_property (GObject *object, guint prop_id, const GValue *value,
                         GParamSpec *pspec)
{
  AppWindow *self = APP_WINDOW (object);
  switch (prop_id)
    {
    case PROP_DOCUMENT: app_window_set_document (self, g_value_get_object (value)); break;
    case PROP_STORE: app_window_set_store (self, g_value_get_object (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static const struct
{
  const char *action;
  const char *accels[4];
} accels[] = {
  { "win.new-plan", { "<Control>n" } },
  { "win.open-file", { "<Control>o" } },
  { "win.open-store", { "<Control><Shift>o" } },
  { "win.save", { "<Control>s" } },
  { "win.save-as", { "<Control><Shift>s" } },
  { "win.undo", { "<Control>z" } },
  { "win.redo", { "<Control><Shift>z", "<Control>y" } },
  { "win.find", { "<Control>f" } },
  { "win.find-next", { "<Control>g" } },
  { "win.find-previous", { "<Control><Shift>g" } },
  { "win.zoom-fit", { "<Control>0" } },
  { "win.zoom-in", { "<Control>plus", "<Control>equal", "<Control>KP_Add" } },
  { "win.zoom-out", { "<Control>minus", "<Control>KP_Subtract" } },
  { "win.expand-all", { "<Control>e" } },
  { "win.collapse-all", { "<Control><Shift>e" } },
  { "win.show-sidebar", { "F9" } },
  { "win.show-minimap", { "<Control>m" } },
  { "win.show-legend", { "<Control>l" } },
  { "win.select-next-op", { "<Alt>Down" } },
  { "win.select-previous-op", { "<Alt>Up" } },
  { "win.edit-pin", { "<Control>p" } },
  { "win.unpin", { "<Control>u" } },
  { "win.play", { "<Control>space" } },
  { "win.step-next", { "<Alt>Right" } },
  { "win.step-previous", { "<Alt>Left" } },
  { "win.step-first", { "<Alt>Home" } },
  { "win.step-last", { "<Alt>End" } },
  { "win.compare", { "<Control>d" } },
  { "win.trial-run", { "<Control>r" } },
  { "win.export('json')", { "<Control><Shift>x" } },
  { "win.export('png')", { "<Control><Shift>p" } },
};

/* Called once by the application at startup. */
void
app_window_add_accels (GtkApplication *app)
{
  for (guint i = 0; i < G_N_ELEMENTS (accels); i++)
    gtk_application_set_accels_for_action (app, accels[i].action, accels[i].accels);
}

static void
app_window_class_init (AppWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  GtkWindowClass *window_class = GTK_WINDOW_CLASS (klass);
  object_class->dispose = app_window_dispose;
  object_class->get_property = app_window_get_property;
  object_class->set_property = app_window_set_property;
  window_class->close_request = app_window_close_request;

  properties[PROP_DOCUMENT] = g_param_spec_object ("document", NULL, NULL, APP_TYPE_DOCUMENT,
                                                   G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
                                                       | G_PARAM_EXPLICIT_NOTIFY);
  properties[PROP_STORE] = g_param_spec_object ("store", NULL, NULL, PLANNER_TYPE_STORE,
                                                G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
                                                    | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  g_type_ensure (GRAPHVIEW_TYPE_WIDGET);
  g_type_ensure (APP_TYPE_SIDEBAR);
  g_type_ensure (APP_TYPE_INSPECTOR);
  g_type_ensure (APP_TYPE_TIMELINE);
  g_type_ensure (APP_TYPE_TOTALS_BAR);
  g_type_ensure (APP_TYPE_COST_CHART);
  g_type_ensure (APP_TYPE_MINIMAP);
  g_type_ensure (APP_TYPE_COMPARE_VIEW);
  g_type_ensure (APP_TYPE_TRIAL_RESULTS);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/shardscope/Shardscope/app-window.ui");
  gtk_widget_class_bind_template_child (widget_class, AppWindow, window_title);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, error_revealer);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, error_label);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, flap);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, sidebar);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, mode_stack);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, search_bar);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, search_entry);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, search_status);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, graph);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, minimap);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, graph_buttons);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, spinner);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, trial_results);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, timeline);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, totals_bar);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, cost_chart);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, inspector);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, compare_view);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, recovery_revealer);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, recovery_label);

  gtk_widget_class_install_action (widget_class, "win.new-plan", NULL, action_new_plan);
  gtk_widget_class_install_action (widget_class, "win.open-file", NULL, action_open_file);
  gtk_widget_class_install_action (widget_class, "win.open-store", NULL, action_open_store);
  gtk_widget_class_install_action (widget_class, "win.find-next", NULL, action_find_next);
  gtk_widget_class_install_action (widget_class, "win.find-previous", NULL, action_find_next);
  gtk_widget_class_install_action (widget_class, "win.zoom-fit", NULL, action_zoom_fit);
  gtk_widget_class_install_action (widget_class, "win.zoom-in", NULL, action_zoom);
  gtk_widget_class_install_action (widget_class, "win.zoom-out", NULL, action_zoom);
  gtk_widget_class_install_action (widget_class, "win.expand-all", NULL, action_expand);
  gtk_widget_class_install_action (widget_class, "win.expand-block", "s", action_expand_block);
  gtk_widget_class_install_action (widget_class, "win.collapse-all", NULL, action_expand);
  gtk_widget_class_install_action (widget_class, "win.select-op", "s", action_select_op);
  gtk_widget_class_install_action (widget_class, "win.select-next-op", NULL,
                                   action_select_adjacent);
  gtk_widget_class_install_action (widget_class, "win.select-previous-op", NULL,
                                   action_select_adjacent);
  gtk_widget_class_install_action (widget_class, "win.play", NULL, action_timeline);
  gtk_widget_class_install_action (widget_class, "win.step-next", NULL, action_timeline);
  gtk_widget_class_install_action (widget_class, "win.step-previous", NULL, action_timeline);
  gtk_widget_class_install_action (widget_class, "win.step-first", NULL, action_timeline);
  gtk_widget_class_install_action (widget_class, "win.step-last", NULL, action_timeline);
  gtk_widget_class_install_action (widget_class, "win.rename-plan", "(xs)", action_rename_plan);
  gtk_widget_class_install_action (widget_class, "win.duplicate-plan", "x",
                                   action_duplicate_plan);
  gtk_widget_class_install_action (widget_class, "win.delete-plan", "x", action_delete_plan);
  gtk_widget_class_install_action (widget_class, "win.compare-stored", "x",
                                   action_compare_stored);
  gtk_widget_class_install_action (widget_class, "win.edit-pin", NULL, action_edit_pin);
  gtk_widget_class_install_action (widget_class, "win.restore-autosave", NULL,
                                   action_restore_autosave);
  gtk_widget_class_install_action (widget_class, "win.discard-autosave", NULL,
                                   action_discard_autosave);
}

/* Actions whose enabled state follows the document live in the window's action map (GTK 4.8
 * class actions cannot be disabled per instance without a property). */
static const GActionEntry win_entries[] = {
  { "save", NULL, NULL, NULL, NULL },
  { "save-as", NULL, NULL, NULL, NULL },
  { "undo", NULL, NULL, NULL, NULL },
  { "redo", NULL, NULL, NULL, NULL },
  { "export", NULL, "s", NULL, NULL },
  { "trial-run", NULL, NULL, NULL, NULL },
  { "compare", NULL, NULL, NULL, NULL },
  { "pin", NULL, "s", NULL, NULL },
  { "unpin", NULL, NULL, NULL, NULL },
};

typedef void (*WidgetActionFunc) (GtkWidget *, const char *, GVariant *);

static void
forward_action (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  WidgetActionFunc func = g_object_get_data (G_OBJECT (action), "func");
  g_autofree char *name = g_strconcat ("win.", g_action_get_name (G_ACTION (action)), NULL);
  func (GTK_WIDGET (user_data), name, param);
}

static void
app_window_init (AppWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->search_index = -1;
  self->toasts = g_ptr_array_new_with_free_func (g_object_unref);
  self->pending_deletes = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free,
                                                 g_object_unref);

  static const struct
  {
    const char *name;
    WidgetActionFunc func;
  } funcs[] = {
    { "save", action_save },       { "save-as", action_save_as },
    { "undo", action_undo },       { "redo", action_redo },
    { "export", action_export },   { "trial-run", action_trial_run },
    { "compare", action_compare }, { "pin", action_pin },
    { "unpin", action_unpin },
  };
  for (guint i = 0; i < G_N_ELEMENTS (win_entries); i++)
    {
      const GVariantType *type = win_entries[i].parameter_type
                                     ? G_VARIANT_TYPE (win_entries[i].parameter_type)
                                     : NULL;
      g_autoptr (GSimpleAction) action = g_simple_action_new (win_entries[i].name, type);
      g_object_set_data (G_OBJECT (action), "func", funcs[i].func);
      g_signal_connect (action, "activate", G_CALLBACK (forward_action), self);
      g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (action));
    }

  /* Settings are optional: without the installed (or build-dir) schema the app still runs. */
  GSettingsSchemaSource *source = g_settings_schema_source_get_default ();
  g_autoptr (GSettingsSchema) schema
      = source ? g_settings_schema_source_lookup (source, APP_ID, TRUE) : NULL;
  if (schema)
    self->settings = g_settings_new (APP_ID);
  if (self->settings)
    {
      gtk_window_set_default_size (GTK_WINDOW (self),
                                   g_settings_get_int (self->settings, "window-width"),
                                   g_settings_get_int (self->settings, "window-height"));
      if (g_settings_get_boolean (self->settings, "window-maximized"))
        gtk_window_maximize (GTK_WINDOW (self));
      g_settings_bind (self->settings, "show-sidebar", self->flap, "reveal-flap",
                       G_SETTINGS_BIND_DEFAULT);
      g_settings_bind (self->settings, "show-minimap", self->minimap, "visible",
                       G_SETTINGS_BIND_DEFAULT);
      g_settings_bind (self->settings, "timeline-speed", self->timeline, "speed",
                       G_SETTINGS_BIND_DEFAULT);
    }
  g_autoptr (GPropertyAction) sidebar_action
      = g_property_action_new ("show-sidebar", self->flap, "reveal-flap");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (sidebar_action));
  g_autoptr (GPropertyAction) minimap_action
      = g_property_action_new ("show-minimap", self->minimap, "visible");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (minimap_action));
  g_autoptr (GPropertyAction) find_action
      = g_property_action_new ("find", self->search_bar, "search-mode-enabled");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (find_action));

  app_minimap_set_view (self->minimap, self->graph);
  /* Fit leaves the graph uncovered by what floats over it. */
  graphview_widget_add_overlay (self->graph, GTK_WIDGET (self->minimap));
  graphview_widget_add_overlay (self->graph, GTK_WIDGET (self->graph_buttons));
  graphview_widget_add_overlay (self->graph, GTK_WIDGET (self->trial_results));
  g_autoptr (GPropertyAction) legend_action
      = g_property_action_new ("show-legend", self->graph, "show-legend");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (legend_action));
  gtk_search_bar_connect_entry (self->search_bar, GTK_EDITABLE (self->search_entry));
  g_signal_connect_swapped (self->search_entry, "search-changed",
                            G_CALLBACK (on_search_changed), self);
  g_signal_connect_swapped (self->search_entry, "activate", G_CALLBACK (action_find_next_cb),
                            self);
  g_signal_connect_swapped (self->graph, "selection-changed",
                            G_CALLBACK (on_graph_selection_changed), self);
  g_signal_connect_swapped (self->graph, "layout-ready", G_CALLBACK (on_layout_ready), self);
  g_signal_connect_swapped (self->sidebar, "plan-activated", G_CALLBACK (on_plan_activated),
                            self);

  /* The parts follow the window's document through bindings, not copies. */
  g_object_bind_property (self, "document", self->inspector, "document", G_BINDING_DEFAULT);
  g_object_bind_property (self, "document", self->timeline, "document", G_BINDING_DEFAULT);
  g_object_bind_property (self, "document", self->totals_bar, "document", G_BINDING_DEFAULT);
  g_object_bind_property (self, "document", self->cost_chart, "document", G_BINDING_DEFAULT);

  self->document_signals = g_signal_group_new (APP_TYPE_DOCUMENT);
  g_signal_group_connect_swapped (self->document_signals, "notify::plan",
                                  G_CALLBACK (on_plan_changed), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::step",
                                  G_CALLBACK (on_step_changed), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::selected-op",
                                  G_CALLBACK (on_selected_op_changed), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::error",
                                  G_CALLBACK (on_error_changed), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::busy",
                                  G_CALLBACK (on_busy_changed), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::can-undo",
                                  G_CALLBACK (update_actions), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::can-redo",
                                  G_CALLBACK (update_actions), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::modified",
                                  G_CALLBACK (update_title), self);
  /* Every plan an edit gives, and every save, updates the autosave. */
  g_signal_group_connect_swapped (self->document_signals, "notify::plan",
                                  G_CALLBACK (update_autosave), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::modified",
                                  G_CALLBACK (update_autosave), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::name",
                                  G_CALLBACK (update_title), self);
  gtk_stack_set_visible_child_name (self->mode_stack, "empty");
  update_actions (self);
}

AppWindow *
app_window_new (GtkApplication *application)
{
  return g_object_new (APP_TYPE_WINDOW, "application", application, NULL);
}
