#define G_LOG_DOMAIN "app-new-plan-dialog"
#include "config.h"

#include "app-new-plan-dialog.h"

#include <glib/gi18n.h>

#include "app-application.h"
#include "app-mesh-editor.h"
#include "app-hardware-dialog.h"
#include "planner-hardware.h"
#include "planner-model.h"
#include "planner-policy.h"

struct _AppNewPlanDialog
{
  AdwWindow parent_instance;

  GtkButton *cancel_button;
  GtkButton *create_button;
  AdwComboRow *model_row;
  AdwActionRow *file_row;
  GtkButton *file_button;
  AppMeshEditor *mesh_editor;
  AdwComboRow *hardware_row;
  AdwComboRow *policy_row;

  char *file;
};

G_DEFINE_FINAL_TYPE (AppNewPlanDialog, app_new_plan_dialog, ADW_TYPE_WINDOW)

enum
{
  SIGNAL_CREATE,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static const char *
selected_string (AdwComboRow *row)
{
  GObject *item = adw_combo_row_get_selected_item (row);
  return item ? gtk_string_object_get_string (GTK_STRING_OBJECT (item)) : NULL;
}

static void
update_sensitivity (AppNewPlanDialog *self)
{
  gtk_widget_set_sensitive (GTK_WIDGET (self->create_button),
                            app_mesh_editor_get_n_devices (self->mesh_editor) > 0);
}

static void
on_create (AppNewPlanDialog *self)
{
  g_autofree char *mesh = app_mesh_editor_dup_mesh (self->mesh_editor);
  const char *model = self->file ? self->file : selected_string (self->model_row);
  /* The first policy entry is "none". */
  const char *policy = adw_combo_row_get_selected (self->policy_row) == 0
                           ? NULL
                           : selected_string (self->policy_row);
  g_signal_emit (self, signals[SIGNAL_CREATE], 0, model, mesh, selected_string (self->hardware_row),
                 policy);
  gtk_window_destroy (GTK_WINDOW (self));
}

static void
file_response (GtkNativeDialog *native, int response, AppNewPlanDialog *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr (GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (native));
      g_free (self->file);
      self->file = file ? g_file_get_path (file) : NULL;
      adw_action_row_set_subtitle (self->file_row, self->file ? self->file : "");
    }
  g_object_unref (native);
}

GtkFileFilter *
app_new_plan_dialog_new_model_filter (void)
{
  GtkFileFilter *filter = gtk_file_filter_new ();
  gtk_file_filter_set_name (filter, _("Models (config.json, graph JSON, ONNX)"));
  gtk_file_filter_add_pattern (filter, "*.json");
  gtk_file_filter_add_pattern (filter, "*.onnx");
  return filter;
}

static void
on_choose_file (AppNewPlanDialog *self)
{
  GtkFileChooserNative *native = gtk_file_chooser_native_new (
      _("Open a config.json, a Graph JSON or an ONNX Model"), GTK_WINDOW (self),
      GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"), _("_Cancel"));
  g_autoptr (GtkFileFilter) filter = app_new_plan_dialog_new_model_filter ();
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (native), filter);
  g_signal_connect (native, "response", G_CALLBACK (file_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (native));
}

static void
on_model_selected (AppNewPlanDialog *self)
{
  /* Picking from the zoo again forgets a chosen file. */
  g_clear_pointer (&self->file, g_free);
  const char *name = selected_string (self->model_row);
  g_autofree char *describe = name ? planner_zoo_describe (name) : NULL;
  adw_action_row_set_subtitle (ADW_ACTION_ROW (self->model_row), describe ? describe : "");
  adw_action_row_set_subtitle (self->file_row, _("A Hugging Face config.json, a graph JSON or an ONNX model"));
}

static void
select_string (AdwComboRow *row, GtkStringList *list, const char *value)
{
  for (guint i = 0; value && i < g_list_model_get_n_items (G_LIST_MODEL (list)); i++)
    if (g_str_equal (gtk_string_list_get_string (list, i), value))
      adw_combo_row_set_selected (row, i);
}

AppNewPlanDialog *
app_new_plan_dialog_new (GtkWindow *parent)
{
  AppNewPlanDialog *self = g_object_new (APP_TYPE_NEW_PLAN_DIALOG, "transient-for", parent, NULL);
  /* Start from what the last plan was made with. */
  g_autoptr (GSettings) settings = app_application_new_settings ();
  if (settings)
    {
      g_autofree char *mesh = g_settings_get_string (settings, "default-mesh");
      g_autofree char *hw = g_settings_get_string (settings, "default-hardware");
      g_autofree char *policy = g_settings_get_string (settings, "default-policy");
      app_mesh_editor_set_mesh (self->mesh_editor, mesh);
      select_string (self->hardware_row, GTK_STRING_LIST (adw_combo_row_get_model (self->hardware_row)), hw);
      select_string (self->policy_row, GTK_STRING_LIST (adw_combo_row_get_model (self->policy_row)), policy);
    }
  return self;
}

static void
app_new_plan_dialog_finalize (GObject *object)
{
  g_free (APP_NEW_PLAN_DIALOG (object)->file);
  G_OBJECT_CLASS (app_new_plan_dialog_parent_class)->finalize (object);
}

static void
app_new_plan_dialog_class_init (AppNewPlanDialogClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->finalize = app_new_plan_dialog_finalize;
  /* model, mesh, hardware, policy (NULL: none). */
  signals[SIGNAL_CREATE] = g_signal_new ("create", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                         0, NULL, NULL, NULL, G_TYPE_NONE, 4, G_TYPE_STRING,
                                         G_TYPE_STRING, G_TYPE_STRING, G_TYPE_STRING);
  g_type_ensure (APP_TYPE_MESH_EDITOR);
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-new-plan-dialog.ui");
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, cancel_button);
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, create_button);
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, model_row);
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, file_row);
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, file_button);
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, mesh_editor);
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, hardware_row);
  gtk_widget_class_bind_template_child (widget_class, AppNewPlanDialog, policy_row);
  gtk_widget_class_add_binding_action (widget_class, GDK_KEY_Escape, 0, "window.close", NULL);
}

static void
app_new_plan_dialog_init (AppNewPlanDialog *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  g_autoptr (GtkStringList) models = gtk_string_list_new ((const char *const *) planner_zoo_names ());
  adw_combo_row_set_model (self->model_row, G_LIST_MODEL (models));
  select_string (self->model_row, models, "gpt2");
  /* The built-ins and the profiles saved from the hardware dialog. */
  g_auto (GStrv) hardware_names = app_hardware_list_names ();
  g_autoptr (GtkStringList) hardware
      = gtk_string_list_new ((const char *const *) hardware_names);
  adw_combo_row_set_model (self->hardware_row, G_LIST_MODEL (hardware));
  select_string (self->hardware_row, hardware, "h100-sxm");
  g_autoptr (GtkStringList) policies = gtk_string_list_new (NULL);
  gtk_string_list_append (policies, _("none"));
  const char *const *names = planner_policy_builtin_names ();
  for (guint i = 0; names[i]; i++)
    gtk_string_list_append (policies, names[i]);
  adw_combo_row_set_model (self->policy_row, G_LIST_MODEL (policies));
  select_string (self->policy_row, policies, "megatron");
  on_model_selected (self);
  g_signal_connect_swapped (self->model_row, "notify::selected", G_CALLBACK (on_model_selected),
                            self);
  g_signal_connect_swapped (self->file_button, "clicked", G_CALLBACK (on_choose_file), self);
  g_signal_connect_swapped (self->create_button, "clicked", G_CALLBACK (on_create), self);
  g_signal_connect_swapped (self->cancel_button, "clicked", G_CALLBACK (gtk_window_destroy), self);
  g_signal_connect_swapped (self->mesh_editor, "notify::n-devices",
                            G_CALLBACK (update_sensitivity), self);
}
