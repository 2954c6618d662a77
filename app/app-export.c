#define G_LOG_DOMAIN "app-export"
#include "config.h"

#include "app-export.h"
#include "app-file.h"

#include <glib/gi18n.h>

#include "planner-error.h"
#include "planner-plan-json.h"
#include "planner-export.h"

static const AppExportFormat formats[] = {
  { "json", N_("Plan JSON"), ".json" },
  { "dtensor", N_("PyTorch DTensor script"), ".py" },
  { "mindspore", N_("MindSpore strategy JSON"), ".json" },
  { "mindspore-shard", N_("MindSpore shard() calls"), ".py" },
  { "jax", N_("JAX PartitionSpecs module"), ".py" },
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

/* A local file is written as shardscope-cli writes it (app_file_write()), off the GTK
 * thread. */
static void
write_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  GFile *file = g_object_get_data (G_OBJECT (task), "file");
  g_autofree char *path = g_file_get_path (file);
  GError *error = NULL;
  if (app_file_write_bytes (path, task_data, &error))
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

static void
write_bytes (GTask *task, GFile *file, GBytes *bytes, GCancellable *cancellable)
{
  if (!g_file_is_native (file))
    {
      g_file_replace_contents_bytes_async (file, bytes, NULL, FALSE,
                                           G_FILE_CREATE_REPLACE_DESTINATION, cancellable,
                                           replace_done, g_object_ref (task));
      return;
    }
  g_object_set_data_full (G_OBJECT (task), "file", g_object_ref (file), g_object_unref);
  g_task_set_task_data (task, g_bytes_ref (bytes), (GDestroyNotify)g_bytes_unref);
  g_task_run_in_thread (task, write_thread);
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
  g_autoptr (GBytes) bytes = NULL;
  if (g_str_equal (format, "png") || g_str_equal (format, "svg") || g_str_equal (format, "pdf"))
    {
      /* The renderer holds the widget's layout and folding; it is not thread-safe, so the
       * picture is drawn here. */
      GraphviewFormat gformat = GRAPHVIEW_FORMAT_PNG;
      graphview_format_from_path (fmt->extension, &gformat);
      if (renderer == NULL || !graphview_renderer_is_ready (renderer))
        {
          g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_PENDING,
                                   _("The graph is still being laid out; try again in a moment"));
          return;
        }
      bytes = graphview_renderer_render_file (renderer, gformat, 1.0, &error);
    }
  else
    {
      char *text = export_text (plan, format, &error);
      if (text != NULL)
        bytes = g_bytes_new_take (text, strlen (text));
    }
  if (bytes == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  write_bytes (task, file, bytes, cancellable);
}

gboolean
app_export_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (G_IS_TASK (result), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
