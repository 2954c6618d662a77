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

/* A picture: drawn from a snapshot of the renderer on a worker thread, then written there
 * too (or, for a file that is not local, by GIO from the GTK thread). */
typedef struct
{
  GraphviewSnapshot *snapshot;
  GraphviewFormat format;
  double scale;
  GThread *caller;
  gboolean off_thread;
} PictureJob;

static void
picture_job_free (PictureJob *job)
{
  graphview_snapshot_free (job->snapshot);
  g_free (job);
}

static void
picture_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  PictureJob *job = task_data;
  job->off_thread = g_thread_self () != job->caller;
  GError *error = NULL;
  g_autoptr (GBytes) bytes
      = graphview_snapshot_render_file (job->snapshot, job->format, job->scale, &error);
  if (bytes == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  if (g_task_return_error_if_cancelled (task))
    return;
  GFile *file = g_object_get_data (G_OBJECT (task), "file");
  if (g_file_is_native (file))
    {
      g_autofree char *path = g_file_get_path (file);
      /* NULL without an error: written. */
      if (app_file_write_bytes (path, bytes, &error))
        g_task_return_pointer (task, NULL, NULL);
      else
        g_task_return_error (task, error);
      return;
    }
  /* Not local: GIO writes it, from the thread that started the export. */
  g_task_return_pointer (task, g_steal_pointer (&bytes), (GDestroyNotify)g_bytes_unref);
}

static void
picture_drawn (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GTask) outer = user_data;
  GError *error = NULL;
  PictureJob *job = g_task_get_task_data (G_TASK (result));
  g_object_set_data (G_OBJECT (outer), "off-thread", GINT_TO_POINTER (job->off_thread));
  /* NULL (written) or the bytes of a file that is not local. */
  g_autoptr (GBytes) bytes = g_task_propagate_pointer (G_TASK (result), &error);
  if (error)
    g_task_return_error (outer, error);
  else if (bytes == NULL)
    g_task_return_boolean (outer, TRUE);
  else
    {
      GFile *file = g_object_get_data (G_OBJECT (outer), "file");
      g_file_replace_contents_bytes_async (file, bytes, NULL, FALSE,
                                           G_FILE_CREATE_REPLACE_DESTINATION,
                                           g_task_get_cancellable (outer), replace_done,
                                           g_object_ref (outer));
    }
}

void
app_export_picture_async (GObject *source, GraphviewRenderer *renderer, const char *format,
                          double scale, const char *title, GFile *file,
                          GCancellable *cancellable, GAsyncReadyCallback callback,
                          gpointer user_data)
{
  g_return_if_fail (format != NULL && G_IS_FILE (file));
  g_return_if_fail (renderer == NULL || GRAPHVIEW_IS_RENDERER (renderer));
  g_autoptr (GTask) task = g_task_new (source, cancellable, callback, user_data);
  g_task_set_source_tag (task, app_export_picture_async);
  g_object_set_data_full (G_OBJECT (task), "file", g_object_ref (file), g_object_unref);
  const AppExportFormat *fmt = app_export_format_lookup (format);
  GraphviewFormat gformat = GRAPHVIEW_FORMAT_PNG;
  if (fmt == NULL || !graphview_format_from_path (fmt->extension, &gformat))
    {
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                               _("%s is not a picture format; png, svg and pdf are"), format);
      return;
    }
  if (scale <= 0 || scale > APP_EXPORT_MAX_SCALE)
    {
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                               _("A picture's scale is between 0 and %g, not %g"),
                               APP_EXPORT_MAX_SCALE, scale);
      return;
    }
  if (renderer == NULL || !graphview_renderer_is_ready (renderer))
    {
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_PENDING,
                               _("The graph is still being laid out; try again in a moment"));
      return;
    }
  /* The renderer belongs to the widget and changes with it; the worker draws a copy. */
  PictureJob *job = g_new0 (PictureJob, 1);
  job->snapshot = graphview_renderer_snapshot (renderer);
  graphview_snapshot_set_title (job->snapshot, title);
  job->format = gformat;
  job->scale = scale;
  job->caller = g_thread_self ();
  GTask *inner = g_task_new (source, cancellable, picture_drawn, g_steal_pointer (&task));
  g_object_set_data_full (G_OBJECT (inner), "file", g_object_ref (file), g_object_unref);
  g_task_set_task_data (inner, job, (GDestroyNotify)picture_job_free);
  g_task_run_in_thread (inner, picture_thread);
  g_object_unref (inner);
}

gboolean
app_export_picture_drawn_off_thread (GAsyncResult *result)
{
  g_return_val_if_fail (G_IS_TASK (result), FALSE);
  return GPOINTER_TO_INT (g_object_get_data (G_OBJECT (result), "off-thread"));
}

void
app_export_async (GObject *source, PlannerPlan *plan, GraphviewRenderer *renderer,
                  const char *format, GFile *file, GCancellable *cancellable,
                  GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (format != NULL && G_IS_FILE (file));
  const AppExportFormat *fmt = app_export_format_lookup (format);
  GraphviewFormat gformat;
  if (fmt != NULL && plan != NULL && graphview_format_from_path (fmt->extension, &gformat))
    {
      app_export_picture_async (source, renderer, format, 1.0, NULL, file, cancellable,
                                callback, user_data);
      return;
    }
  g_autoptr (GTask) task = g_task_new (source, cancellable, callback, user_data);
  g_task_set_source_tag (task, app_export_async);
  if (fmt == NULL || plan == NULL)
    {
      g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                               plan ? _("Unknown export format %s") : _("There is no plan to export"),
                               format);
      return;
    }
  GError *error = NULL;
  g_autofree char *text = export_text (plan, format, &error);
  if (text == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  gsize length = strlen (text);
  g_autoptr (GBytes) bytes = g_bytes_new_take (g_steal_pointer (&text), length);
  write_bytes (task, file, bytes, cancellable);
}

gboolean
app_export_finish (GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (G_IS_TASK (result), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}
