/* app-export.h: writing a plan in every export format (plan JSON, the planner's exports, and
 * the graph view's pictures), for the window's file chooser and the tests. */
#pragma once

#include <gio/gio.h>

#include "graphview-renderer.h"
#include "planner-plan.h"

G_BEGIN_DECLS

typedef struct
{
  const char *id;        /* "json", "dtensor", "mindspore", "csv", "png", "svg", "pdf" */
  const char *label;     /* translatable, for the chooser's filter */
  const char *extension; /* ".json" */
} AppExportFormat;

/* Every format, NULL-terminated by id. */
const AppExportFormat *app_export_formats (void);
const AppExportFormat *app_export_format_lookup (const char *id);

/* Text formats are made on the GTK thread (fast) and written off it; pictures are drawn by
 * @renderer (which holds the layout) on the GTK thread, encoded and written off it. */
void app_export_async (GObject *source, PlannerPlan *plan, GraphviewRenderer *renderer,
                       const char *format, GFile *file, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data);
gboolean app_export_finish (GAsyncResult *result, GError **error);

G_END_DECLS
