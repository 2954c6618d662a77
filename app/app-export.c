#define G_LOG_DOMAIN "app-export"
#include "config.h"

#include "app-export.h"

#include <glib/gi18n.h>

#include "planner-error.h"
#include "planner-plan-json.h"
#include "planner-export.h"

static const AppExportFormat formats[] = {
  { "json", N_("Plan JSON"), ".json" },
  { "dtensor", N_("PyTorch DTensor script"), ".py" },
  { "mindspore", N_("MindSpore strategy JSON"), ".json" },
  { "csv", N_("CSV table"), ".csv" },
  { "png", N_("PNG image"), ".png" },
  { "svg", N_("SVG drawing"), ".svg" },
  { "pdf", N_("PDF document"), ".pdf" },
  { NULL, NULL, NULL },
};

const AppExportFormat *
app_export_formats (void)
{
  return formats;
}

const AppExportFormat *
app_export_format_lookup (const char *id)
{
  for (guint i = 0; id && formats[i].id; i++)
    if (g_str_equal (formats[i].id, id))
      return &formats[i];
  return NULL;
}

/* The text of a text format, or NULL with @error set. */
static char *
export_text (PlannerPlan *plan, const char *format, GError **error)
{
  if (g_str_equal (format, "json"))
    return planner_plan_to_json (plan);
  return planner_export_to_string (plan, format, error);
}

static void
replace_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GTask) task = user_data;
  GError *error = NULL;
  if (g_file_replace_contents_finish (G_FILE (source), result, NULL, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

void
app_export_async (GObject *source, PlannerPlan *plan, GraphviewRenderer *renderer,
                  const char *format, GFile *file, GCancellable *cancellable,
                  GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (format != NULL && G_IS_FILE (file));
  g_autoptr (GTask) task = g_task_new (source, cancellable, callback, user_data);
  g_task_set_source_tag (task, app_export_async);
  const AppExportFormat *fmt = app_export_format_lookup (format);
  if (fmt == NULL || plan == NULL)
    {
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                               plan ? _("Unknown export format %s") : _("There is no plan to export"),
                               format);
      return;
    }
  GError *error = NULL;
  if (g_str_equal (format, "png") || g_str_equal (format, "svg") || g_str_equal (format, "pdf"))
    {
      /* The renderer holds the widget's layout and folding; it is not thread-safe, so the
       * picture is drawn here. */
      g_autofree char *path = g_file_get_path (file);
      GraphviewFormat gformat = GRAPHVIEW_FORMAT_PNG;
      graphview_format_from_path (fmt->extension, &gformat);
      if (renderer == NULL || !graphview_renderer_is_ready (renderer))
        g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_PENDING,
                                 _("The graph is still being laid out; try again in a moment"));
      else if (path == NULL)
        g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                                 _("Pictures are written to local files only"));
      else if (!graphview_renderer_save (renderer, path, gformat, 1.0, &error))
        g_task_return_error (task, error);
      else
        g_task_return_boolean (task, TRUE);
      return;
    }
  char *text = export_text (plan, format, &error);
  if (text == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  g_autoptr (GBytes) bytes = g_bytes_new_take (text, strlen (text));
  g_file_replace_contents_bytes_async (file, bytes, NULL, FALSE, G_FILE_CREATE_REPLACE_DESTINATION,
                                       cancellable, replace_done, g_steal_pointer (&task));
}

gboolean
app_export_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (G_IS_TASK (result), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
