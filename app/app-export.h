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

/* The largest picture scale the window offers (pixels per point). */
#define APP_EXPORT_MAX_SCALE 8.0

/* Text formats are made on the GTK thread (fast) and written off it; pictures are drawn as
 * app_export_picture_async() draws them, at scale 1 without a title. */
void app_export_async (GObject *source, PlannerPlan *plan, GraphviewRenderer *renderer,
                       const char *format, GFile *file, GCancellable *cancellable,
                       GAsyncReadyCallback callback, gpointer user_data);
gboolean app_export_finish (GAsyncResult *result, GError **error);

/* A picture ("png", "svg", "pdf") of what @renderer shows, as shardscope-cli render draws it
 * at scale 1, the whole of it magnified @scale times (2: twice the pixels or points a side),
 * with @title in a band above the legend (NULL: none): the GTK thread
 * only takes a snapshot of the renderer (graphview_renderer_snapshot()); drawing, encoding
 * and writing run on a worker thread. Finished with app_export_finish(). */
void app_export_picture_async (GObject *source, GraphviewRenderer *renderer, const char *format,
                               double scale, const char *title, GFile *file,
                               GCancellable *cancellable, GAsyncReadyCallback callback,
                               gpointer user_data);
/* Whether the picture of @result was drawn on another thread than the one that asked. */
gboolean app_export_picture_drawn_off_thread (GAsyncResult *result);

G_END_DECLS
