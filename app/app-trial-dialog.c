#define G_LOG_DOMAIN "app-trial-dialog"
#include "config.h"

#include "app-trial-dialog.h"

#include <glib/gi18n.h>

#include "executor-backend.h"
#include "executor-trial.h"
#include "planner-redistribute.h"

struct _AppTrialDialog
{
  AdwWindow parent_instance;

  GtkButton *cancel_button;
  GtkButton *run_button;
  AdwComboRow *backend_row;
  GtkSpinButton *devices_spin;
  GtkSpinButton *repeat_spin;
  GtkProgressBar *progress;
  GtkLabel *status;

  PlannerPlan *plan;
  GCancellable *cancellable;
};

G_DEFINE_FINAL_TYPE (AppTrialDialog, app_trial_dialog, ADW_TYPE_WINDOW)

enum
{
  SIGNAL_FINISHED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

typedef struct
{
  PlannerPlan *plan;
  char *backend;
  guint repeat;
  GWeakRef dialog;
} TrialData;

typedef struct
{
  GWeakRef dialog;
  double fraction;
  char *what;
} Progress;

static void
trial_data_free (TrialData *data)
{
  g_object_unref (data->plan);
  g_free (data->backend);
  g_weak_ref_clear (&data->dialog);
  g_free (data);
}

static gboolean
show_progress (gpointer user_data)
{
  Progress *p = user_data;
  g_autoptr (AppTrialDialog) self = g_weak_ref_get (&p->dialog);
  if (self && self->cancellable)
    {
      gtk_progress_bar_set_fraction (self->progress, p->fraction);
      gtk_progress_bar_set_text (self->progress, p->what);
    }
  g_weak_ref_clear (&p->dialog);
  g_free (p->what);
  g_free (p);
  return G_SOURCE_REMOVE;
}

/* Called on device 0's thread: hand it to the GTK thread. */
static void
on_progress (double fraction, const char *what, gpointer user_data)
{
  TrialData *data = user_data;
  Progress *p = g_new0 (Progress, 1);
  g_autoptr (GObject) dialog = g_weak_ref_get (&data->dialog);
  g_weak_ref_init (&p->dialog, dialog);
  p->fraction = fraction;
  p->what = g_strdup (what);
  g_main_context_invoke (NULL, show_progress, p);
}

static void
trial_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  TrialData *data = task_data;
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = data->repeat;
  options.warmup = data->repeat ? 1 : 0;
  options.progress = on_progress;
  options.progress_data = data;
  GError *error = NULL;
  ExecutorTrialResult *result = executor_trial_run_named (data->plan, data->backend, &options,
                                                          cancellable, &error);
  if (result)
    g_task_return_pointer (task, result, (GDestroyNotify) executor_trial_result_free);
  else
    g_task_return_error (task, error);
}

static void
set_running (AppTrialDialog *self, gboolean running)
{
  gtk_widget_set_sensitive (GTK_WIDGET (self->run_button), !running);
  gtk_widget_set_sensitive (GTK_WIDGET (self->backend_row), !running);
  gtk_widget_set_sensitive (GTK_WIDGET (self->devices_spin), !running);
  gtk_widget_set_sensitive (GTK_WIDGET (self->repeat_spin), !running);
  gtk_button_set_label (self->cancel_button, running ? _("_Cancel") : _("_Close"));
}

static void
trial_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (AppTrialDialog) self = user_data;
  g_autoptr (GError) error = NULL;
  g_autoptr (ExecutorTrialResult) res = g_task_propagate_pointer (G_TASK (result), &error);
  g_clear_object (&self->cancellable);
  set_running (self, FALSE);
  if (res == NULL)
    {
      gtk_progress_bar_set_fraction (self->progress, 0);
      gtk_progress_bar_set_text (self->progress, NULL);
      gtk_label_set_text (self->status, g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
                                            ? _("Cancelled.")
                                            : error->message);
      return;
    }
  gtk_progress_bar_set_fraction (self->progress, 1);
  g_autofree char *est = planner_format_time (res->estimated_step_s);
  g_autofree char *meas = planner_format_time (res->measured_step_s);
  g_autofree char *text = g_strdup_printf (
      _("%s: max error %.3g absolute, %.3g relative; forward estimated %s, measured %s."),
      res->passed ? _("Matches the reference") : _("Differs from the reference"),
      res->max_abs_error, res->max_rel_error, est, meas);
  gtk_label_set_text (self->status, text);
  g_signal_emit (self, signals[SIGNAL_FINISHED], 0, res);
}

void
app_trial_dialog_start (AppTrialDialog *self)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  if (self->cancellable)
    return;
  guint64 need = planner_mesh_n_devices (planner_plan_get_mesh (self->plan));
  guint devices = (guint) gtk_spin_button_get_value_as_int (self->devices_spin);
  if (devices != need)
    {
      g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (self->plan));
      g_autofree char *text = g_strdup_printf (
          _("The plan's mesh %s has %u devices; plan for a mesh of %u devices to run on %u"),
          mesh, (guint) need, devices, devices);
      gtk_label_set_text (self->status, text);
      return;
    }
  GObject *item = adw_combo_row_get_selected_item (self->backend_row);
  TrialData *data = g_new0 (TrialData, 1);
  data->plan = g_object_ref (self->plan);
  data->backend = g_strdup (item ? gtk_string_object_get_string (GTK_STRING_OBJECT (item)) : "cpu");
  data->repeat = (guint) gtk_spin_button_get_value_as_int (self->repeat_spin);
  g_weak_ref_init (&data->dialog, self);
  self->cancellable = g_cancellable_new ();
  gtk_label_set_text (self->status, "");
  set_running (self, TRUE);
  g_autoptr (GTask) task = g_task_new (NULL, self->cancellable, trial_done, g_object_ref (self));
  g_task_set_source_tag (task, app_trial_dialog_start);
  g_task_set_task_data (task, data, (GDestroyNotify) trial_data_free);
  g_task_run_in_thread (task, trial_thread);
}

void
app_trial_dialog_cancel (AppTrialDialog *self)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  g_cancellable_cancel (self->cancellable);
}

void
app_trial_dialog_set_repeat (AppTrialDialog *self, guint repeat)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  gtk_spin_button_set_value (self->repeat_spin, repeat);
}

static void
on_cancel (AppTrialDialog *self)
{
  if (self->cancellable)
    app_trial_dialog_cancel (self);
  else
    gtk_window_destroy (GTK_WINDOW (self));
}

GtkWidget *
app_trial_dialog_new (GtkWindow *parent, PlannerPlan *plan)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  AppTrialDialog *self = g_object_new (APP_TYPE_TRIAL_DIALOG, "transient-for", parent, NULL);
  self->plan = g_object_ref (plan);
  gtk_spin_button_set_value (self->devices_spin,
                             (double) planner_mesh_n_devices (planner_plan_get_mesh (plan)));
  /* What a run will hold, said before it starts (a run that does not fit is refused). */
  ExecutorTrialMemory memory;
  guint64 have = executor_host_memory_available ();
  if (have > 0 && executor_trial_estimate_memory (plan, &memory, NULL))
    {
      g_autofree char *need
          = planner_format_bytes (executor_trial_memory_host_bytes (&memory, TRUE));
      g_autofree char *free_text = planner_format_bytes (have);
      g_autofree char *text = g_strdup_printf (
          _("A run on the cpu backend needs about %s of memory; %s is available"), need,
          free_text);
      gtk_label_set_text (self->status, text);
    }
  return GTK_WIDGET (self);
}

static gboolean
app_trial_dialog_close_request (GtkWindow *window)
{
  /* Closing cancels; the run ends on its own thread and its result is dropped. */
  app_trial_dialog_cancel (APP_TRIAL_DIALOG (window));
  return GTK_WINDOW_CLASS (app_trial_dialog_parent_class)->close_request (window);
}

static void
app_trial_dialog_dispose (GObject *object)
{
  AppTrialDialog *self = APP_TRIAL_DIALOG (object);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_object (&self->plan);
  G_OBJECT_CLASS (app_trial_dialog_parent_class)->dispose (object);
}

static void
app_trial_dialog_class_init (AppTrialDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_trial_dialog_dispose;
  GTK_WINDOW_CLASS (klass)->close_request = app_trial_dialog_close_request;
  /* An ExecutorTrialResult*, borrowed for the emission. */
  signals[SIGNAL_FINISHED] = g_signal_new ("finished", G_TYPE_FROM_CLASS (klass),
                                           G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE,
                                           1, G_TYPE_POINTER);
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-trial-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, cancel_button);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, run_button);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, backend_row);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, devices_spin);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, repeat_spin);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, progress);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, status);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
app_trial_dialog_init (AppTrialDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  g_autoptr (GtkStringList) backends
      = gtk_string_list_new ((const char *const *) executor_backend_names ());
  adw_combo_row_set_model (self->backend_row, G_LIST_MODEL (backends));
  g_signal_connect_swapped (self->run_button, "clicked", G_CALLBACK (app_trial_dialog_start), self);
  g_signal_connect_swapped (self->cancel_button, "clicked", G_CALLBACK (on_cancel), self);
}
