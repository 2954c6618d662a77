#define G_LOG_DOMAIN "app-suggest-dialog"
#include "config.h"

#include "app-suggest-dialog.h"

#include <glib/gi18n.h>

#include "planner-redistribute.h"

struct _AppSuggestDialog
{
  AdwWindow parent_instance;

  GtkButton *cancel_button;
  GtkButton *search_button;
  GtkSpinButton *devices_spin;
  GtkProgressBar *progress;
  GtkLabel *status;
  GtkListBox *list;

  PlannerGraph *graph;
  PlannerHardware *hw;
  /* The search in flight; NULL when none is, or once it was cancelled. */
  GCancellable *cancellable;
  PlannerSearchResult *result;
  /* Candidate indices, in list order. */
  GArray *rows;
  int best_row;
  /* "running" (update_sensitivity()). */
  gboolean running;
};

G_DEFINE_FINAL_TYPE (AppSuggestDialog, app_suggest_dialog, ADW_TYPE_WINDOW)

/* The dialog's state, bound in its template: the controls are insensitive while
 * "running" (a search runs), the cancel button says Cancel or Close. */
enum
{
  PROP_0,
  PROP_RUNNING,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

/* Takes a boolean field of the dialog to @value, notifying @prop once if it changed. */
static void
set_state (GObject *self, gboolean *field, gboolean value, guint prop)
{
  if (*field == !!value)
    return;
  *field = !!value;
  g_object_notify_by_pspec (self, properties[prop]);
}

/* The cancel button's label in the template, from "running". */
static char *
cancel_label (gpointer this_object, gboolean running)
{
  return g_strdup (running ? _("_Cancel") : _("_Close"));
}

enum
{
  SIGNAL_OPEN_PLAN,
  SIGNAL_SAVE_PLAN,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

typedef struct
{
  PlannerGraph *graph;
  PlannerHardware *hw;
  guint n_devices;
  GWeakRef dialog;
  GCancellable *cancellable;
} SearchData;

typedef struct
{
  GWeakRef dialog;
  GCancellable *cancellable; /* the search it belongs to */
  guint done, total;
  char *what;
} Progress;

static void
search_data_free (SearchData *data)
{
  g_object_unref (data->graph);
  planner_hardware_free (data->hw);
  g_weak_ref_clear (&data->dialog);
  g_clear_object (&data->cancellable);
  g_free (data);
}

static gboolean
show_progress (gpointer user_data)
{
  Progress *p = user_data;
  g_autoptr (AppSuggestDialog) self = g_weak_ref_get (&p->dialog);
  /* Only the search in flight draws: a cancelled one's late calls are dropped. */
  if (self && self->cancellable && self->cancellable == p->cancellable)
    {
      gtk_progress_bar_set_fraction (self->progress, p->total ? (double)p->done / p->total : 0);
      g_autofree char *text = g_strdup_printf (_ ("%u of %u: %s"), p->done, p->total, p->what);
      gtk_progress_bar_set_text (self->progress, text);
    }
  g_weak_ref_clear (&p->dialog);
  g_clear_object (&p->cancellable);
  g_free (p->what);
  g_free (p);
  return G_SOURCE_REMOVE;
}

/* Called on the search's thread: hand it to the GTK thread. */
static void
on_progress (guint done, guint total, const char *what, gpointer user_data)
{
  SearchData *data = user_data;
  Progress *p = g_new0 (Progress, 1);
  g_autoptr (GObject) dialog = g_weak_ref_get (&data->dialog);
  g_weak_ref_init (&p->dialog, dialog);
  p->cancellable = g_object_ref (data->cancellable);
  p->done = done;
  p->total = total;
  p->what = g_strdup (what ? what : "");
  g_main_context_invoke (NULL, show_progress, p);
}

static void
search_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  SearchData *data = task_data;
  g_autoptr (PlannerRequest) request = planner_request_new ();
  PlannerSearchOptions options;
  planner_search_options_init (&options);
  options.n_devices = data->n_devices;
  options.request = request;
  options.cancellable = cancellable;
  options.progress = on_progress;
  options.progress_data = data;
  GError *error = NULL;
  PlannerSearchResult *result = planner_search (data->graph, data->hw, &options, &error);
  if (result == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, result, (GDestroyNotify)planner_search_result_free);
}

static void
update_sensitivity (AppSuggestDialog *self)
{
  set_state (G_OBJECT (self), &self->running, self->cancellable != NULL, PROP_RUNNING);
}

static char *
candidate_title (const PlannerSearchCandidate *c)
{
  return g_strdup_printf ("%s · %s", c->mesh, c->solved ? _ ("solved") : c->policy);
}

static void
on_open_clicked (GtkButton *button, AppSuggestDialog *self)
{
  guint row = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (button), "row"));
  app_suggest_dialog_open_row (self, row);
}

static void
on_save_clicked (GtkButton *button, AppSuggestDialog *self)
{
  guint row = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (button), "row"));
  app_suggest_dialog_save_row (self, row);
}

static GtkWidget *
candidate_row (AppSuggestDialog *self, guint row, const PlannerSearchCandidate *c, gboolean best)
{
  GtkWidget *w = adw_action_row_new ();
  g_autofree char *title = candidate_title (c);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (w), title);
  g_autofree char *subtitle = NULL;
  if (c->plan == NULL)
    subtitle = g_strdup (c->error ? c->error : _ ("No plan"));
  else
    {
      g_autofree char *t = planner_format_time (c->step_time_s);
      g_autofree char *m = planner_format_bytes (c->memory_per_device_bytes);
      subtitle = g_strdup_printf (_ ("Step %s · %s per device · %s"), t, m,
                                  c->fits ? _ ("fits") : _ ("does not fit"));
    }
  adw_action_row_set_subtitle (ADW_ACTION_ROW (w), subtitle);
  if (best)
    {
      GtkWidget *mark = gtk_label_new (_ ("Best"));
      gtk_widget_set_valign (mark, GTK_ALIGN_CENTER);
      gtk_widget_add_css_class (mark, "success");
      gtk_widget_add_css_class (mark, "heading");
      adw_action_row_add_suffix (ADW_ACTION_ROW (w), mark);
    }
  if (c->plan)
    {
      GtkWidget *open = gtk_button_new_with_mnemonic (_ ("_Open"));
      gtk_widget_set_valign (open, GTK_ALIGN_CENTER);
      if (best)
        gtk_widget_add_css_class (open, "suggested-action");
      g_object_set_data (G_OBJECT (open), "row", GUINT_TO_POINTER (row));
      g_signal_connect (open, "clicked", G_CALLBACK (on_open_clicked), self);
      GtkWidget *save = gtk_button_new_with_mnemonic (_ ("_Save"));
      gtk_widget_set_valign (save, GTK_ALIGN_CENTER);
      gtk_widget_add_css_class (save, "flat");
      g_object_set_data (G_OBJECT (save), "row", GUINT_TO_POINTER (row));
      g_signal_connect (save, "clicked", G_CALLBACK (on_save_clicked), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (w), save);
      adw_action_row_add_suffix (ADW_ACTION_ROW (w), open);
      adw_action_row_set_activatable_widget (ADW_ACTION_ROW (w), open);
    }
  else
    gtk_widget_add_css_class (w, "dim-label");
  return w;
}

static void
clear_list (AppSuggestDialog *self)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->list))))
    gtk_list_box_remove (self->list, child);
  g_array_set_size (self->rows, 0);
  self->best_row = -1;
}

/* Fastest first, the fitting ones before the rest, then the candidates without a plan. */
static void
fill_list (AppSuggestDialog *self)
{
  clear_list (self);
  g_autoptr (GArray) ranking = planner_search_ranking (self->result);
  g_array_append_vals (self->rows, ranking->data, ranking->len);
  for (guint i = 0; i < self->result->candidates->len; i++)
    {
      PlannerSearchCandidate *c = g_ptr_array_index (self->result->candidates, i);
      if (c->plan == NULL)
        g_array_append_val (self->rows, i);
    }
  for (guint r = 0; r < self->rows->len; r++)
    {
      guint i = g_array_index (self->rows, guint, r);
      gboolean best = self->result->best >= 0 && (guint)self->result->best == i;
      if (best)
        self->best_row = (int)r;
      gtk_list_box_append (
          self->list,
          candidate_row (self, r, g_ptr_array_index (self->result->candidates, i), best));
    }
}

static void
search_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (AppSuggestDialog) self = user_data;
  SearchData *data = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  PlannerSearchResult *res = g_task_propagate_pointer (G_TASK (result), &error);
  if (self->cancellable != data->cancellable)
    {
      /* A cancelled search has returned: its result is dropped. */
      g_clear_pointer (&res, planner_search_result_free);
      return;
    }
  g_clear_object (&self->cancellable);
  update_sensitivity (self);
  if (res == NULL)
    {
      gtk_progress_bar_set_fraction (self->progress, 0);
      gtk_progress_bar_set_text (self->progress, NULL);
      gtk_label_set_text (self->status, g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
                                            ? _ ("Cancelled.")
                                            : error->message);
      return;
    }
  g_clear_pointer (&self->result, planner_search_result_free);
  self->result = res;
  fill_list (self);
  gtk_progress_bar_set_fraction (self->progress, 1);
  gtk_progress_bar_set_text (self->progress, _ ("Done"));
  g_autofree char *limit = planner_format_bytes (res->memory_limit);
  g_autofree char *text = NULL;
  if (res->best >= 0)
    {
      PlannerSearchCandidate *best = g_ptr_array_index (res->candidates, res->best);
      g_autofree char *title = candidate_title (best);
      text = g_strdup_printf (_ ("%u candidates in %.0f ms; the best is %s (the fastest "
                                 "within %s per device)."),
                              res->candidates->len, res->search_ms, title, limit);
    }
  else
    text = g_strdup_printf (_ ("%u candidates in %.0f ms; none fits in %s per device. Try "
                               "more devices, or a smaller batch or sequence."),
                            res->candidates->len, res->search_ms, limit);
  gtk_label_set_text (self->status, text);
}

void
app_suggest_dialog_start (AppSuggestDialog *self)
{
  g_return_if_fail (APP_IS_SUGGEST_DIALOG (self));
  if (self->cancellable)
    return;
  SearchData *data = g_new0 (SearchData, 1);
  data->graph = g_object_ref (self->graph);
  data->hw = planner_hardware_copy (self->hw);
  data->n_devices = app_suggest_dialog_get_devices (self);
  g_weak_ref_init (&data->dialog, self);
  self->cancellable = g_cancellable_new ();
  data->cancellable = g_object_ref (self->cancellable);
  g_clear_pointer (&self->result, planner_search_result_free);
  clear_list (self);
  gtk_label_set_text (self->status, "");
  gtk_progress_bar_set_fraction (self->progress, 0);
  gtk_progress_bar_set_text (self->progress, _ ("Starting the search"));
  update_sensitivity (self);
  g_autoptr (GTask) task = g_task_new (NULL, self->cancellable, search_done, g_object_ref (self));
  g_task_set_source_tag (task, app_suggest_dialog_start);
  g_task_set_task_data (task, data, (GDestroyNotify)search_data_free);
  g_task_run_in_thread (task, search_thread);
}

void
app_suggest_dialog_cancel (AppSuggestDialog *self)
{
  g_return_if_fail (APP_IS_SUGGEST_DIALOG (self));
  if (self->cancellable == NULL)
    return;
  /* The search stops at its next check; the dialog lets go of it now. */
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  gtk_progress_bar_set_fraction (self->progress, 0);
  gtk_progress_bar_set_text (self->progress, NULL);
  gtk_label_set_text (self->status, _ ("Cancelled."));
  update_sensitivity (self);
}

void
app_suggest_dialog_set_devices (AppSuggestDialog *self, guint n_devices)
{
  g_return_if_fail (APP_IS_SUGGEST_DIALOG (self));
  gtk_spin_button_set_value (self->devices_spin, n_devices);
}

guint
app_suggest_dialog_get_devices (AppSuggestDialog *self)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), 0);
  return (guint)gtk_spin_button_get_value_as_int (self->devices_spin);
}

gboolean
app_suggest_dialog_get_running (AppSuggestDialog *self)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), FALSE);
  return self->cancellable != NULL;
}

const char *
app_suggest_dialog_get_status (AppSuggestDialog *self)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), NULL);
  return gtk_label_get_text (self->status);
}

const PlannerSearchResult *
app_suggest_dialog_get_result (AppSuggestDialog *self)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), NULL);
  return self->result;
}

guint
app_suggest_dialog_get_n_rows (AppSuggestDialog *self)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), 0);
  return self->rows->len;
}

guint
app_suggest_dialog_get_row_candidate (AppSuggestDialog *self, guint row)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), 0);
  g_return_val_if_fail (row < self->rows->len, 0);
  return g_array_index (self->rows, guint, row);
}

int
app_suggest_dialog_get_best_row (AppSuggestDialog *self)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), -1);
  return self->best_row;
}

/* The row's plan, named after the model, mesh and policy; NULL (its error shown) without. */
static PlannerPlan *
row_plan (AppSuggestDialog *self, guint row)
{
  if (self->result == NULL || row >= self->rows->len)
    return NULL;
  PlannerSearchCandidate *c
      = g_ptr_array_index (self->result->candidates, g_array_index (self->rows, guint, row));
  if (c->plan == NULL)
    {
      gtk_label_set_text (self->status, c->error ? c->error : _ ("No plan"));
      return NULL;
    }
  g_autofree char *title = candidate_title (c);
  /* The model's short name: "gpt2-tiny?batch=8&…" or a config's path without the rest. */
  const char *source = planner_graph_get_source (self->graph);
  g_autofree char *model = g_strndup (source, strcspn (source, "?"));
  g_autofree char *base = g_path_get_basename (model);
  g_autofree char *name = g_strdup_printf ("%s %s", base, title);
  planner_plan_set_name (c->plan, name);
  return c->plan;
}

gboolean
app_suggest_dialog_save_row (AppSuggestDialog *self, guint row)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), FALSE);
  PlannerPlan *plan = row_plan (self, row);
  if (plan == NULL)
    return FALSE;
  g_signal_emit (self, signals[SIGNAL_SAVE_PLAN], 0, plan);
  return TRUE;
}

gboolean
app_suggest_dialog_open_row (AppSuggestDialog *self, guint row)
{
  g_return_val_if_fail (APP_IS_SUGGEST_DIALOG (self), FALSE);
  PlannerPlan *row_p = row_plan (self, row);
  if (row_p == NULL)
    return FALSE;
  /* Held across the emission: the handler may close this dialog. */
  g_autoptr (PlannerPlan) plan = g_object_ref (row_p);
  g_object_ref (self);
  g_signal_emit (self, signals[SIGNAL_OPEN_PLAN], 0, plan);
  gtk_window_destroy (GTK_WINDOW (self));
  g_object_unref (self);
  return TRUE;
}

static void
on_cancel (AppSuggestDialog *self)
{
  if (self->cancellable)
    app_suggest_dialog_cancel (self);
  else
    gtk_window_destroy (GTK_WINDOW (self));
}

GtkWidget *
app_suggest_dialog_new (GtkWindow *parent, AppDocument *document)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (document), NULL);
  AppSuggestDialog *self = g_object_new (APP_TYPE_SUGGEST_DIALOG, "transient-for", parent, NULL);
  self->graph = g_object_ref (app_document_get_graph (document));
  self->hw = planner_hardware_copy (app_document_get_hardware (document));
  const PlannerMesh *mesh = app_document_get_mesh (document);
  app_suggest_dialog_set_devices (self, mesh ? (guint)planner_mesh_n_devices (mesh) : 1);
  return GTK_WIDGET (self);
}

static gboolean
app_suggest_dialog_close_request (GtkWindow *window)
{
  /* Closing cancels; the search ends on its own thread and its result is dropped. */
  app_suggest_dialog_cancel (APP_SUGGEST_DIALOG (window));
  return GTK_WINDOW_CLASS (app_suggest_dialog_parent_class)->close_request (window);
}

static void
app_suggest_dialog_dispose (GObject *object)
{
  AppSuggestDialog *self = APP_SUGGEST_DIALOG (object);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_object (&self->graph);
  g_clear_pointer (&self->hw, planner_hardware_free);
  g_clear_pointer (&self->result, planner_search_result_free);
  g_clear_pointer (&self->rows, g_array_unref);
  G_OBJECT_CLASS (app_suggest_dialog_parent_class)->dispose (object);
}

static void
app_suggest_dialog_get_property (GObject *object, guint prop_id, GValue *value,
                                 GParamSpec *pspec)
{
  AppSuggestDialog *self = APP_SUGGEST_DIALOG (object);
  switch (prop_id)
    {
    case PROP_RUNNING: g_value_set_boolean (value, self->running); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_suggest_dialog_class_init (AppSuggestDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_suggest_dialog_dispose;
  object_class->get_property = app_suggest_dialog_get_property;
  properties[PROP_RUNNING] = g_param_spec_boolean (
      "running", NULL, NULL, FALSE,
      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  GTK_WINDOW_CLASS (klass)->close_request = app_suggest_dialog_close_request;
  /* A PlannerPlan*, borrowed for the emission. */
  signals[SIGNAL_OPEN_PLAN]
      = g_signal_new ("open-plan", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                      NULL, G_TYPE_NONE, 1, PLANNER_TYPE_PLAN);
  /* A PlannerPlan*, borrowed: the window stores it, the dialog stays. */
  signals[SIGNAL_SAVE_PLAN]
      = g_signal_new ("save-plan", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                      NULL, G_TYPE_NONE, 1, PLANNER_TYPE_PLAN);
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-suggest-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, AppSuggestDialog, cancel_button);
  gtk_widget_class_bind_template_child (widget_class, AppSuggestDialog, search_button);
  gtk_widget_class_bind_template_child (widget_class, AppSuggestDialog, devices_spin);
  gtk_widget_class_bind_template_child (widget_class, AppSuggestDialog, progress);
  gtk_widget_class_bind_template_child (widget_class, AppSuggestDialog, status);
  gtk_widget_class_bind_template_child (widget_class, AppSuggestDialog, list);
  gtk_widget_class_bind_template_callback (widget_class, cancel_label);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
app_suggest_dialog_init (AppSuggestDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->rows = g_array_new (FALSE, FALSE, sizeof (guint));
  self->best_row = -1;
  g_signal_connect_swapped (self->search_button, "clicked", G_CALLBACK (app_suggest_dialog_start),
                            self);
  g_signal_connect_swapped (self->cancel_button, "clicked", G_CALLBACK (on_cancel), self);
}
