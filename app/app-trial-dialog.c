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
  AdwActionRow *devices_row;
  GtkLabel *devices_label;
  GtkSpinButton *repeat_spin;
  GtkSwitch *train_switch;
  AdwComboRow *optimizer_row;
  GtkLabel *estimate;
  GtkProgressBar *progress;
  GtkLabel *status;

  PlannerPlan *plan;
  /* The run in flight; NULL when none is, or once it was cancelled. */
  GCancellable *cancellable;
  /* A cancelled run whose thread has not returned yet: it still holds its memory, so no
   * new run starts until it has. */
  gboolean draining;
  gint64 started_at;
  /* 0: the host's MemAvailable (tests set less). */
  guint64 memory_available;
  guint64 memory_needed;
  gboolean refused;
  AppTrialTrain *train;
  /* "running" and "can-run" (update_sensitivity()). */
  gboolean running;
  gboolean can_run;
};

G_DEFINE_FINAL_TYPE (AppTrialDialog, app_trial_dialog, ADW_TYPE_WINDOW)

/* The dialog's state, bound in its template: the controls are insensitive while
 * "running" and Run while no run may start (one runs, a cancelled one still holds its
 * memory, or it would not fit: "can-run"), the cancel button says Cancel or Close. */
enum
{
  PROP_0,
  PROP_RUNNING,
  PROP_CAN_RUN,
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
  SIGNAL_FINISHED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

/* Passes over the forward graph: the reference once, the plan 1 + warm-up + repeats; the
 * training step is about three forward passes (forward, then twice the FLOPs backward), in
 * each of the two runs. */
static double
forward_passes (guint repeat)
{
  guint warmup = repeat ? 1 : 0;
  return 1 + 1 + warmup + repeat;
}

#define TRAIN_PASSES 6.0

typedef struct
{
  PlannerPlan *plan;
  char *backend;
  guint repeat;
  gboolean train;
  ExecutorTrainOptions train_options;
  double trial_share; /* of the whole run's progress bar */
  GWeakRef dialog;
  GCancellable *cancellable;
} TrialData;

typedef struct
{
  ExecutorTrialResult *result;
  AppTrialTrain *train;
} TrialOutcome;

typedef struct
{
  GWeakRef dialog;
  GCancellable *cancellable; /* the run it belongs to */
  double fraction;
  char *what;
} Progress;

static void
trial_data_free (TrialData *data)
{
  g_object_unref (data->plan);
  g_free (data->backend);
  g_weak_ref_clear (&data->dialog);
  g_clear_object (&data->cancellable);
  g_free (data);
}

static void
trial_outcome_free (TrialOutcome *outcome)
{
  g_clear_pointer (&outcome->result, executor_trial_result_free);
  g_clear_pointer (&outcome->train, app_trial_train_free);
  g_free (outcome);
}

static char *
format_left (double seconds)
{
  if (seconds < 60)
    return g_strdup_printf (_("%.0f s left"), MAX (seconds, 1));
  if (seconds < 3600)
    return g_strdup_printf (_("%.0f min left"), seconds / 60);
  return g_strdup_printf (_("%.1f h left"), seconds / 3600);
}

static gboolean
show_progress (gpointer user_data)
{
  Progress *p = user_data;
  g_autoptr (AppTrialDialog) self = g_weak_ref_get (&p->dialog);
  /* Only the run in flight draws: a cancelled one's late calls are dropped. */
  if (self && self->cancellable && self->cancellable == p->cancellable)
    {
      gtk_progress_bar_set_fraction (self->progress, p->fraction);
      double elapsed = (g_get_monotonic_time () - self->started_at) / (double) G_USEC_PER_SEC;
      g_autofree char *left = NULL;
      /* The rate is only a guess before a few percent are done. */
      if (p->fraction >= 0.02 && elapsed > 0.5)
        left = format_left (elapsed * (1 - p->fraction) / p->fraction);
      g_autofree char *text
          = left ? g_strdup_printf ("%s — %s", p->what, left) : g_strdup (p->what);
      gtk_progress_bar_set_text (self->progress, text);
    }
  g_weak_ref_clear (&p->dialog);
  g_clear_object (&p->cancellable);
  g_free (p->what);
  g_free (p);
  return G_SOURCE_REMOVE;
}

static void
post_progress (TrialData *data, double fraction, const char *what)
{
  Progress *p = g_new0 (Progress, 1);
  g_autoptr (GObject) dialog = g_weak_ref_get (&data->dialog);
  g_weak_ref_init (&p->dialog, dialog);
  p->cancellable = g_object_ref (data->cancellable);
  p->fraction = fraction;
  p->what = g_strdup (what);
  g_main_context_invoke (NULL, show_progress, p);
}

/* Called on device 0's thread: hand it to the GTK thread. */
static void
on_progress (double fraction, const char *what, gpointer user_data)
{
  TrialData *data = user_data;
  post_progress (data, fraction * data->trial_share, what);
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
  post_progress (data, 0, _("Preparing the inputs and buffers"));
  g_autoptr (ExecutorTrialResult) result = executor_trial_run_named (
      data->plan, data->backend, &options, cancellable, &error);
  if (result == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  g_autoptr (AppTrialTrain) train = NULL;
  if (data->train)
    {
      post_progress (data, data->trial_share, _("Training step: reference and sharded"));
      train = app_trial_train_run (data->plan, options.seed, &data->train_options,
                                   options.tolerance, cancellable, &error);
      if (train == NULL)
        {
          g_task_return_error (task, error);
          return;
        }
    }
  TrialOutcome *outcome = g_new0 (TrialOutcome, 1);
  outcome->result = g_steal_pointer (&result);
  outcome->train = g_steal_pointer (&train);
  g_task_return_pointer (task, outcome, (GDestroyNotify) trial_outcome_free);
}

static const char *
selected_backend (AppTrialDialog *self)
{
  GObject *item = adw_combo_row_get_selected_item (self->backend_row);
  return item ? gtk_string_object_get_string (GTK_STRING_OBJECT (item)) : "cpu";
}

static void
update_sensitivity (AppTrialDialog *self)
{
  gboolean running = self->cancellable != NULL;
  g_object_freeze_notify (G_OBJECT (self));
  set_state (G_OBJECT (self), &self->running, running, PROP_RUNNING);
  set_state (G_OBJECT (self), &self->can_run, !running && !self->draining && !self->refused,
             PROP_CAN_RUN);
  g_object_thaw_notify (G_OBJECT (self));
}

/* What the run will hold and take, said before it starts; a run that cannot fit in the
 * host's memory is refused here, with the figures. */
static void
update_estimate (AppTrialDialog *self)
{
  if (self->plan == NULL)
    return;
  const char *backend = selected_backend (self);
  gboolean on_host = g_str_equal (backend, "cpu");
  guint repeat = (guint) gtk_spin_button_get_value_as_int (self->repeat_spin);
  gboolean train = gtk_switch_get_active (self->train_switch);
  g_autoptr (GString) s = g_string_new (NULL);
  self->refused = FALSE;
  gtk_widget_remove_css_class (GTK_WIDGET (self->estimate), "error");

  ExecutorTrialMemory memory;
  g_autoptr (GError) error = NULL;
  if (!executor_trial_estimate_memory (self->plan, &memory, &error))
    {
      self->refused = TRUE;
      g_string_append (s, error->message);
    }
  else
    {
      guint64 have = self->memory_available ? self->memory_available
                                            : executor_host_memory_available ();
      self->memory_needed = executor_trial_memory_host_bytes (&memory, on_host);
      g_autofree char *need = planner_format_bytes (self->memory_needed);
      g_autofree char *per_device = planner_format_bytes (memory.device_bytes);
      g_autofree char *free_text = have ? planner_format_bytes (have) : g_strdup (_("unknown"));
      if (have > 0 && self->memory_needed > have)
        {
          self->refused = TRUE;
          g_string_append_printf (
              s,
              _("Refused: the run needs about %s of host memory (%s per device on %u "
                "devices) and %s is available. Plan a smaller batch, sequence or fewer "
                "layers, or a mesh with fewer devices."),
              need, per_device, memory.n_devices, free_text);
        }
      else
        g_string_append_printf (s, _("Memory: about %s on the host (%s per device); %s is "
                                     "available."),
                                need, per_device, free_text);
      if (train)
        g_string_append (s, _(" The training step holds the gradients and activations too."));
    }

  /* Time: the cpu backend at the cpu-local profile's f32 rate (its devices share this
   * machine's cores), a GPU at the plan's own estimate per pass. */
  double passes = forward_passes (repeat) + (train ? TRAIN_PASSES : 0);
  double seconds = 0;
  PlannerGraph *graph = planner_plan_get_graph (self->plan);
  if (on_host)
    {
      g_autoptr (PlannerHardware) cpu = planner_hardware_lookup ("cpu-local", NULL);
      double rate = cpu ? planner_hardware_peak_flops (cpu, PLANNER_DTYPE_F32) : 0;
      if (rate > 0)
        seconds = planner_graph_get_flops (graph) * passes / rate;
    }
  else
    seconds = planner_plan_get_totals (self->plan)->step_time_s / 3 * passes;
  if (seconds > 0 && !self->refused)
    {
      g_autofree char *t = planner_format_time (seconds);
      g_string_append_printf (s, _("\nTime: about %s (%.0f passes over the forward graph)."),
                              t, passes);
    }
  if (train && !on_host)
    {
      self->refused = TRUE;
      g_string_append (s, _("\nThe training step runs on the cpu backend only (its backward "
                            "kernels are CPU ones)."));
    }
  if (self->refused)
    gtk_widget_add_css_class (GTK_WIDGET (self->estimate), "error");
  gtk_label_set_text (self->estimate, s->str);
  update_sensitivity (self);
}

static void
trial_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (AppTrialDialog) self = user_data;
  TrialData *data = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  TrialOutcome *outcome = g_task_propagate_pointer (G_TASK (result), &error);
  gboolean current = self->cancellable == data->cancellable;
  if (!current)
    {
      /* A cancelled run has returned: its memory is free, a new run may start. */
      g_clear_pointer (&outcome, trial_outcome_free);
      self->draining = FALSE;
      update_sensitivity (self);
      return;
    }
  g_clear_object (&self->cancellable);
  update_sensitivity (self);
  if (outcome == NULL)
    {
      gtk_progress_bar_set_fraction (self->progress, 0);
      gtk_progress_bar_set_text (self->progress, NULL);
      gtk_label_set_text (self->status, g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
                                            ? _("Cancelled.")
                                            : error->message);
      return;
    }
  ExecutorTrialResult *res = outcome->result;
  gtk_progress_bar_set_fraction (self->progress, 1);
  gtk_progress_bar_set_text (self->progress, _("Done"));
  g_autofree char *est = planner_format_time (res->estimated_step_s);
  g_autofree char *meas = planner_format_time (res->measured_step_s);
  g_autoptr (GString) text = g_string_new (NULL);
  g_string_append_printf (
      text, _("%s: max error %.3g absolute, %.3g relative; forward estimated %s, measured %s."),
      res->passed ? _("Matches the reference") : _("Differs from the reference"),
      res->max_abs_error, res->max_rel_error, est, meas);
  g_clear_pointer (&self->train, app_trial_train_free);
  self->train = g_steal_pointer (&outcome->train);
  if (self->train)
    {
      g_autofree char *summary = app_trial_train_dup_summary (self->train);
      g_string_append_printf (text, "\n%s", summary);
    }
  gtk_label_set_text (self->status, text->str);
  g_signal_emit (self, signals[SIGNAL_FINISHED], 0, res, self->train);
  trial_outcome_free (outcome);
}

void
app_trial_dialog_start (AppTrialDialog *self)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  if (self->cancellable || self->draining)
    return;
  update_estimate (self);
  if (self->refused)
    {
      gtk_label_set_text (self->status, gtk_label_get_text (self->estimate));
      return;
    }
  TrialData *data = g_new0 (TrialData, 1);
  data->plan = g_object_ref (self->plan);
  data->backend = g_strdup (selected_backend (self));
  data->repeat = (guint) gtk_spin_button_get_value_as_int (self->repeat_spin);
  data->train = gtk_switch_get_active (self->train_switch);
  executor_train_options_init (&data->train_options);
  if (adw_combo_row_get_selected (self->optimizer_row) == 1)
    data->train_options.optimizer = EXECUTOR_OPTIMIZER_ADAM;
  double trial = forward_passes (data->repeat);
  data->trial_share = data->train ? trial / (trial + TRAIN_PASSES) : 1;
  g_weak_ref_init (&data->dialog, self);
  self->cancellable = g_cancellable_new ();
  data->cancellable = g_object_ref (self->cancellable);
  self->started_at = g_get_monotonic_time ();
  g_clear_pointer (&self->train, app_trial_train_free);
  gtk_label_set_text (self->status, "");
  gtk_progress_bar_set_fraction (self->progress, 0);
  update_sensitivity (self);
  g_autoptr (GTask) task = g_task_new (NULL, self->cancellable, trial_done, g_object_ref (self));
  g_task_set_source_tag (task, app_trial_dialog_start);
  g_task_set_task_data (task, data, (GDestroyNotify) trial_data_free);
  g_task_run_in_thread (task, trial_thread);
}

void
app_trial_dialog_cancel (AppTrialDialog *self)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  if (self->cancellable == NULL)
    return;
  /* The run stops at its next check (every instruction of a pass, every phase); the dialog
   * lets go of it now, whatever it is doing (allocating, seeding, the reference run). */
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  self->draining = TRUE;
  gtk_progress_bar_set_fraction (self->progress, 0);
  gtk_progress_bar_set_text (self->progress, NULL);
  gtk_label_set_text (self->status, _("Cancelled."));
  update_sensitivity (self);
}

void
app_trial_dialog_set_repeat (AppTrialDialog *self, guint repeat)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  gtk_spin_button_set_value (self->repeat_spin, repeat);
}

void
app_trial_dialog_set_train (AppTrialDialog *self, gboolean train, gboolean adam)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  gtk_switch_set_active (self->train_switch, train);
  adw_combo_row_set_selected (self->optimizer_row, adam ? 1 : 0);
}

void
app_trial_dialog_set_memory_available (AppTrialDialog *self, guint64 bytes)
{
  g_return_if_fail (APP_IS_TRIAL_DIALOG (self));
  self->memory_available = bytes;
  update_estimate (self);
}

gboolean
app_trial_dialog_get_running (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), FALSE);
  return self->cancellable != NULL;
}

gboolean
app_trial_dialog_get_can_run (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), FALSE);
  return gtk_widget_get_sensitive (GTK_WIDGET (self->run_button));
}

guint64
app_trial_dialog_get_memory_needed (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), 0);
  return self->memory_needed;
}

const char *
app_trial_dialog_get_estimate (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), NULL);
  return gtk_label_get_text (self->estimate);
}

const char *
app_trial_dialog_get_status (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), NULL);
  return gtk_label_get_text (self->status);
}

const char *
app_trial_dialog_get_progress_text (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), NULL);
  return gtk_progress_bar_get_text (self->progress);
}

GtkWidget *
app_trial_dialog_get_devices_row (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), NULL);
  return GTK_WIDGET (self->devices_row);
}

const AppTrialTrain *
app_trial_dialog_get_train (AppTrialDialog *self)
{
  g_return_val_if_fail (APP_IS_TRIAL_DIALOG (self), NULL);
  return self->train;
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
  /* A trial runs the plan on its own mesh: the device count is the mesh's, not a choice. */
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autofree char *count = g_strdup_printf ("%u", (guint) planner_mesh_n_devices (mesh));
  gtk_label_set_text (self->devices_label, count);
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);
  g_autofree char *subtitle = g_strdup_printf (_("The plan's mesh %s; plan another mesh to "
                                                 "run on another count"),
                                               mesh_text);
  adw_action_row_set_subtitle (self->devices_row, subtitle);
  update_estimate (self);
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
  g_clear_pointer (&self->train, app_trial_train_free);
  G_OBJECT_CLASS (app_trial_dialog_parent_class)->dispose (object);
}

static void
app_trial_dialog_get_property (GObject *object, guint prop_id, GValue *value,
                               GParamSpec *pspec)
{
  AppTrialDialog *self = APP_TRIAL_DIALOG (object);
  switch (prop_id)
    {
    case PROP_RUNNING: g_value_set_boolean (value, self->running); break;
    case PROP_CAN_RUN: g_value_set_boolean (value, self->can_run); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_trial_dialog_class_init (AppTrialDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_trial_dialog_dispose;
  object_class->get_property = app_trial_dialog_get_property;
  GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  properties[PROP_RUNNING] = g_param_spec_boolean ("running", NULL, NULL, FALSE, ro);
  properties[PROP_CAN_RUN] = g_param_spec_boolean ("can-run", NULL, NULL, TRUE, ro);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  GTK_WINDOW_CLASS (klass)->close_request = app_trial_dialog_close_request;
  /* An ExecutorTrialResult* and an AppTrialTrain* (NULL without the training step), both
   * borrowed for the emission. */
  signals[SIGNAL_FINISHED] = g_signal_new ("finished", G_TYPE_FROM_CLASS (klass),
                                           G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL, G_TYPE_NONE,
                                           2, G_TYPE_POINTER, G_TYPE_POINTER);
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-trial-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, cancel_button);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, run_button);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, backend_row);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, devices_row);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, devices_label);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, repeat_spin);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, train_switch);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, optimizer_row);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, estimate);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, progress);
  gtk_widget_class_bind_template_child (widget_class, AppTrialDialog, status);
  gtk_widget_class_bind_template_callback (widget_class, cancel_label);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
app_trial_dialog_init (AppTrialDialog *self)
{
  /* What the template's bindings read when they are made: idle, Run offered. */
  self->can_run = TRUE;
  gtk_widget_init_template (GTK_WIDGET (self));
  g_autoptr (GtkStringList) backends
      = gtk_string_list_new ((const char *const *) executor_backend_names ());
  adw_combo_row_set_model (self->backend_row, G_LIST_MODEL (backends));
  g_signal_connect_swapped (self->run_button, "clicked", G_CALLBACK (app_trial_dialog_start), self);
  g_signal_connect_swapped (self->cancel_button, "clicked", G_CALLBACK (on_cancel), self);
  g_signal_connect_swapped (self->backend_row, "notify::selected", G_CALLBACK (update_estimate),
                            self);
  g_signal_connect_swapped (self->repeat_spin, "value-changed", G_CALLBACK (update_estimate),
                            self);
  g_signal_connect_swapped (self->train_switch, "notify::active", G_CALLBACK (update_estimate),
                            self);
}
