#define G_LOG_DOMAIN "app-window-actions"
#include "config.h"

#include <glib/gi18n.h>

#include "app-export.h"
#include "app-hardware-dialog.h"
#include "app-new-plan-dialog.h"
#include "app-suggest-dialog.h"
#include "app-trial-dialog.h"
#include "app-trial-store.h"
#include "app-window-private.h"

/* ---- search ----------------------------------------------------------------------- */

/* Every op whose name or type @text matches (a caseless regular expression), in graph order;
 * NULL with the reason in @error when @text is no expression. */
static GArray *
search_matches (AppWindow *self, const char *text, GError **error)
{
  g_autoptr (GRegex) regex = g_regex_new (text, G_REGEX_CASELESS | G_REGEX_OPTIMIZE, 0, error);
  if (regex == NULL)
    return NULL;
  PlannerGraph *graph = app_document_get_graph (self->document);
  guint n_ops = planner_graph_get_n_ops (graph);
  GArray *matches = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      if (g_regex_match (regex, op->name, 0, NULL)
          || g_regex_match (regex, planner_op_type_to_string (op->type), 0, NULL))
        g_array_append_val (matches, i);
    }
  return matches;
}

/* Rings every match in the graph while the search bar is open; @matches NULL clears. */
static void
show_matches (AppWindow *self, GArray *matches)
{
  gboolean open = gtk_search_bar_get_search_mode (self->search_bar);
  if (matches && matches->len > 0 && open)
    graphview_widget_set_highlighted_ops (self->graph, (const guint *) matches->data,
                                          matches->len);
  else
    graphview_widget_set_highlighted_ops (self->graph, NULL, 0);
}

/* Selects the next (@direction 1), previous (-1) or first from the selection on (0) match,
 * and says which it is of how many ("3 of 12"). */
static void
search_step (AppWindow *self, int direction)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (self->search_entry));
  gtk_widget_remove_css_class (GTK_WIDGET (self->search_entry), "error");
  if (self->document == NULL || *text == '\0')
    {
      gtk_label_set_text (self->search_status, "");
      show_matches (self, NULL);
      return;
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) matches = search_matches (self, text, &error);
  if (matches == NULL)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->search_entry), "error");
      gtk_label_set_text (self->search_status, _("Invalid expression"));
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->search_entry), error->message);
      show_matches (self, NULL);
      return;
    }
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->search_entry), NULL);
  show_matches (self, matches);
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

void
app_window_update_search_matches (AppWindow *self)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (self->search_entry));
  g_autoptr (GArray) matches
      = self->document && *text ? search_matches (self, text, NULL) : NULL;
  show_matches (self, matches);
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
  app_window_ask_before_discarding (self,
                         app_window_proceed_new (new_plan_proceed, n, (GDestroyNotify) new_plan_free));
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
  app_window_ask_before_discarding (self, app_window_proceed_new (open_file_proceed, g_object_ref (file),
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
    app_window_show_error (self, path, error);
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
  g_autofree char *uri = user_data;
  g_autoptr (GFile) file = g_file_new_for_uri (uri);
  g_autofree char *path = g_file_get_parse_name (file);
  if (!app_window_export_finish (self, result, &error))
    app_window_show_error (self, _("Export failed"), error);
  else
    {
      /* Toasts take markup. */
      g_autofree char *escaped = g_markup_escape_text (path, -1);
      g_autofree char *text = g_strdup_printf (_("Exported to %s"), escaped);
      app_window_show_toast (self, text);
    }
}

/* The picture sizes the chooser offers: the whole picture magnified (2: twice the pixels a
 * side). */
static const char *const picture_scales[] = { "1", "2", "3", "4", NULL };

static gboolean
is_picture_format (const char *format)
{
  GraphviewFormat gformat;
  const AppExportFormat *fmt = app_export_format_lookup (format);
  return fmt && graphview_format_from_path (fmt->extension, &gformat);
}

void
app_window_export_file (AppWindow *self, const char *format, GFile *file, double scale)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (format != NULL && G_IS_FILE (file));
  if (is_picture_format (format))
    app_window_export_picture_async (self, format, file, scale, export_done,
                                     g_file_get_uri (file));
  else
    app_window_export_async (self, format, file, export_done, g_file_get_uri (file));
}

static void
export_chosen (AppWindow *self, GFile *file, const char *format)
{
  GtkFileChooser *chooser = g_object_get_data (G_OBJECT (self), "export-chooser");
  const char *choice = chooser ? gtk_file_chooser_get_choice (chooser, "scale") : NULL;
  double scale = choice ? g_ascii_strtod (choice, NULL) : 1;
  app_window_export_file (self, format, file, scale > 0 ? scale : 1);
}

/* "2× (2,400 × 1,830 px)": what each size gives, from the renderer's file viewport. */
static void
add_scale_choice (AppWindow *self, GtkFileChooser *chooser, const char *format)
{
  GraphviewRenderer *renderer = graphview_widget_get_renderer (self->graph);
  GraphviewFormat gformat = GRAPHVIEW_FORMAT_PNG;
  graphview_format_from_path (app_export_format_lookup (format)->extension, &gformat);
  g_autoptr (GPtrArray) labels = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; picture_scales[i]; i++)
    {
      double scale = g_ascii_strtod (picture_scales[i], NULL);
      GraphviewViewport vp = { 0 };
      if (renderer && graphview_renderer_is_ready (renderer))
        {
          /* The window's pictures have a title: its band comes on top. */
          graphview_renderer_get_file_viewport (renderer, gformat, 1, &vp);
          vp.width *= scale;
          vp.height = (vp.height + (graphview_renderer_get_title (renderer)
                                        ? 0
                                        : GRAPHVIEW_FILE_TITLE_HEIGHT))
                      * scale;
        }
      const char *unit = gformat == GRAPHVIEW_FORMAT_PNG ? _("px") : _("pt");
      g_ptr_array_add (labels, vp.width > 0 ? g_strdup_printf (_("%s× (%.0f × %.0f %s)"),
                                                               picture_scales[i], vp.width,
                                                               vp.height, unit)
                                            : g_strdup_printf ("%s×", picture_scales[i]));
    }
  g_ptr_array_add (labels, NULL);
  gtk_file_chooser_add_choice (chooser, "scale", _("Size"), (const char **)picture_scales,
                               (const char **)labels->pdata);
  gtk_file_chooser_set_choice (chooser, "scale", "1");
}

static void
forget_chooser (AppWindow *self)
{
  g_object_set_data (G_OBJECT (self), "export-chooser", NULL);
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
  if (is_picture_format (format))
    add_scale_choice (self, GTK_FILE_CHOOSER (native), format);
  /* export_chosen() reads the size chosen; the chooser lives until its response is handled. */
  g_object_set_data (G_OBJECT (self), "export-chooser", native);
  g_signal_connect_swapped (native, "response", G_CALLBACK (forget_chooser), self);
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
    app_window_show_error (self, op_name, error);
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
      app_window_show_error (self, _("Cannot compare"), error);
      return;
    }
  app_window_set_mode (self, "compare");
}

static void
action_compare (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (g_str_equal (self->mode, "compare"))
    {
      app_window_set_mode (self, self->document ? "plan" : "empty");
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

/* Escape or the close button in compare mode. */
static void
on_compare_close (AppWindow *self)
{
  if (g_str_equal (self->mode, "compare"))
    app_window_set_mode (self, self->document ? "plan" : "empty");
}

/* Each node shows its op's measured against estimated time and error. */
void
app_window_show_trial_on_nodes (AppWindow *self, const ExecutorTrialResult *result)
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
  app_window_show_trial_on_nodes (self, result);
  app_window_set_show_trial_results (self, TRUE);
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
    app_window_show_error (self, _("The trial run was not stored"), error);
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

/* ---- suggest plans (issue 17) ------------------------------------------------------ */

static void
suggest_open_proceed (AppWindow *self, gpointer data)
{
  g_autoptr (AppDocument) doc = app_document_new_for_plan (PLANNER_PLAN (data), 0);
  app_window_set_document (self, doc);
}

static void
suggest_open_plan (AppWindow *self, PlannerPlan *plan)
{
  app_window_ask_before_discarding (
      self, app_window_proceed_new (suggest_open_proceed, g_object_ref (plan), g_object_unref));
}

static void
suggest_save_plan (AppWindow *self, PlannerPlan *plan)
{
  g_autoptr (GError) error = NULL;
  if (self->store == NULL)
    return;
  g_autoptr (GPtrArray) entries = planner_store_list_plans (self->store, &error);
  g_autofree char *name
      = entries ? app_window_free_plan_name (entries, planner_plan_get_name (plan)) : NULL;
  if (name == NULL || planner_store_save_plan (self->store, plan, name, 0, &error) == 0)
    {
      app_window_show_error (self, _ ("The suggested plan was not saved"), error);
      return;
    }
  app_sidebar_reload (self->sidebar);
  /* Toasts take markup. */
  g_autofree char *escaped = g_markup_escape_text (name, -1);
  g_autofree char *text = g_strdup_printf (_ ("Saved as “%s”"), escaped);
  app_window_show_toast (self, text);
}

void
app_window_connect_suggest_dialog (AppWindow *self, GtkWidget *dialog)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_signal_connect_object (dialog, "open-plan", G_CALLBACK (suggest_open_plan), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (dialog, "save-plan", G_CALLBACK (suggest_save_plan), self,
                           G_CONNECT_SWAPPED);
}

static void
action_suggest_plans (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->document == NULL)
    return;
  GtkWidget *dialog = app_suggest_dialog_new (GTK_WINDOW (self), self->document);
  app_window_connect_suggest_dialog (self, dialog);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* The profile's figures, edited and saved, re-cost the open plan. */
static void
hardware_saved (AppWindow *self, const PlannerHardware *hw, const char *path)
{
  if (self->document == NULL)
    return;
  app_document_set_hardware (self->document, hw);
  g_autofree char *escaped = g_markup_escape_text (path, -1);
  g_autofree char *text = g_strdup_printf (_("Profile saved to %s; the plan is re-costed with it"),
                                           escaped);
  app_window_show_toast (self, text);
}

static void
action_edit_hardware (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->document == NULL)
    return;
  GtkWidget *dialog
      = app_hardware_dialog_new (GTK_WINDOW (self), app_document_get_hardware (self->document));
  g_signal_connect_object (dialog, "saved", G_CALLBACK (hardware_saved), self,
                           G_CONNECT_SWAPPED);
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
      app_window_show_error (self, _("Renaming failed"), error);
      return;
    }
  if (self->document && app_document_get_store_id (self->document) == id)
    app_document_set_name (self->document, new_name);
  app_sidebar_reload (self->sidebar);
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
  g_autofree char *name = app_window_free_plan_name (entries, base);
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
    app_window_show_error (self, _("Duplicating failed"), error);
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
    app_window_show_error (self, _("Deleting failed"), error);
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
void
app_window_finish_pending_deletes (AppWindow *self)
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
  app_window_add_toast (self, toast);
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
    app_window_show_error (self, _("Cannot compare"), error);
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
  app_window_ask_before_discarding (self, app_window_proceed_new (open_stored_proceed, data, g_free));
}

/* ---- export ----------------------------------------------------------------------- */

void
app_window_export_async (AppWindow *self, const char *format, GFile *file,
                         GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  PlannerPlan *plan = self->document ? app_document_get_plan (self->document) : NULL;
  if (plan && is_picture_format (format))
    app_window_export_picture_async (self, format, file, 1, callback, user_data);
  else
    app_export_async (G_OBJECT (self), plan, graphview_widget_get_renderer (self->graph),
                      format, file, NULL, callback, user_data);
}

char *
app_window_dup_picture_title (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  AppDocument *doc = self->document;
  if (doc == NULL)
    return NULL;
  g_autofree char *mesh = planner_mesh_to_string (app_document_get_mesh (doc));
  const char *policy = app_document_get_policy (doc);
  return g_strdup_printf ("%s · %s · %s · %s", planner_graph_get_name (app_document_get_graph (doc)),
                          mesh, policy ? policy : _("no policy"),
                          planner_hardware_get_name (app_document_get_hardware (doc)));
}

void
app_window_export_picture_async (AppWindow *self, const char *format, GFile *file, double scale,
                                 GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_autofree char *title = app_window_dup_picture_title (self);
  app_export_picture_async (G_OBJECT (self), graphview_widget_get_renderer (self->graph), format,
                            scale, title, file, NULL, callback, user_data);
}

gboolean
app_window_export_finish (AppWindow *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), FALSE);
  return app_export_finish (result, error);
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
  /* Stateful: the header's toggle shows whether compare mode is on, however it was left. */
  { "compare", NULL, NULL, "false", NULL },
  { "pin", NULL, "s", NULL, NULL },
  { "unpin", NULL, NULL, NULL, NULL },
  { "suggest-plans", NULL, NULL, NULL, NULL },
  { "edit-hardware", NULL, NULL, NULL, NULL },
};

typedef void (*WidgetActionFunc) (GtkWidget *, const char *, GVariant *);

static gboolean
boolean_to_variant (GBinding *binding, const GValue *from, GValue *to, gpointer data)
{
  g_value_set_variant (to, g_variant_new_boolean (g_value_get_boolean (from)));
  return TRUE;
}

static void
forward_action (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  WidgetActionFunc func = g_object_get_data (G_OBJECT (action), "func");
  g_autofree char *name = g_strconcat ("win.", g_action_get_name (G_ACTION (action)), NULL);
  func (GTK_WIDGET (user_data), name, param);
}

void
app_window_class_init_actions (GtkWidgetClass *widget_class)
{
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
                                   app_window_action_restore_autosave);
  gtk_widget_class_install_action (widget_class, "win.discard-autosave", NULL,
                                   app_window_action_discard_autosave);
}

void
app_window_init_actions (AppWindow *self)
{
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
    { "suggest-plans", action_suggest_plans },
    { "edit-hardware", action_edit_hardware },
  };
  for (guint i = 0; i < G_N_ELEMENTS (win_entries); i++)
    {
      const GVariantType *type = win_entries[i].parameter_type
                                     ? G_VARIANT_TYPE (win_entries[i].parameter_type)
                                     : NULL;
      g_autoptr (GVariant) state
          = win_entries[i].state ? g_variant_parse (NULL, win_entries[i].state, NULL, NULL, NULL)
                                 : NULL;
      g_autoptr (GSimpleAction) action
          = state ? g_simple_action_new_stateful (win_entries[i].name, type, state)
                  : g_simple_action_new (win_entries[i].name, type);
      g_object_set_data (G_OBJECT (action), "func", funcs[i].func);
      g_signal_connect (action, "activate", G_CALLBACK (forward_action), self);
      g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (action));
    }
  g_signal_connect_swapped (self->search_entry, "search-changed",
                            G_CALLBACK (on_search_changed), self);
  g_signal_connect_swapped (self->search_entry, "activate", G_CALLBACK (action_find_next_cb),
                            self);
  /* The rings go with the search bar and come back with it. */
  g_signal_connect_swapped (self->search_bar, "notify::search-mode-enabled",
                            G_CALLBACK (app_window_update_search_matches), self);
  g_signal_connect_swapped (self->sidebar, "plan-activated", G_CALLBACK (on_plan_activated),
                            self);
  g_signal_connect_swapped (self->compare_view, "close", G_CALLBACK (on_compare_close), self);
  /* Each action is enabled while the window's property says it can run (README.md). */
  static const struct
  {
    const char *action, *property;
  } enabled_by[] = {
    { "undo", "can-undo" },          { "redo", "can-redo" },
    { "save", "can-save" },          { "save-as", "has-plan" },
    { "export", "has-plan" },        { "trial-run", "has-plan" },
    { "compare", "has-plan" },       { "pin", "can-pin" },
    { "unpin", "can-unpin" },        { "suggest-plans", "has-document" },
    { "edit-hardware", "has-document" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (enabled_by); i++)
    g_object_bind_property (self, enabled_by[i].property,
                            g_action_map_lookup_action (G_ACTION_MAP (self), enabled_by[i].action),
                            "enabled", G_BINDING_SYNC_CREATE);
  /* The header's Compare toggle shows the mode however it was left (Escape, Close Compare). */
  g_object_bind_property_full (self, "compare-mode",
                               g_action_map_lookup_action (G_ACTION_MAP (self), "compare"),
                               "state", G_BINDING_SYNC_CREATE, boolean_to_variant, NULL, NULL,
                               NULL);
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
  { "win.show-type-legend", { "<Control>t" } },
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
