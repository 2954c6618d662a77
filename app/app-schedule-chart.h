/* app-schedule-chart.h: the pipeline schedule as a time x stage chart (issue 18).
 *
 * Shown while the plan's mesh has a pipeline axis pp: one row per stage (stage 0 on top), time
 * to the right, a box per forward (blue) and backward (green) pass of a micro-batch, numbered
 * from 1, where planner_pipeline_schedule() puts it; the gaps are the bubble. Above it the
 * schedule, micro-batches and virtual stages the plan is made with (changing one re-plans the
 * document) and a summary: the schedule's length, the training step and the bubble fraction
 * (p - 1) / (v m + p - 1).
 */
#pragma once

#include <adwaita.h>

#include "app-document-view.h"

G_BEGIN_DECLS

#define APP_TYPE_SCHEDULE_CHART (app_schedule_chart_get_type ())
G_DECLARE_FINAL_TYPE (AppScheduleChart, app_schedule_chart, APP, SCHEDULE_CHART, AppDocumentView)

/* One box, in the drawing area's coordinates (app_schedule_chart_get_area()). */
typedef struct
{
  guint stage, micro_batch, chunk; /* micro_batch from 0; the box shows micro_batch + 1 */
  gboolean backward;
  double start_s, end_s; /* from planner_pipeline_schedule() */
  double x, y, width, height;
} AppScheduleBox;

GtkWidget *app_schedule_chart_new (void);
/* Boxes stage by stage, each stage's in the order it runs them; 0 without a pipeline. */
guint app_schedule_chart_get_n_boxes (AppScheduleChart *self);
/* Box @i placed for the area's current size. */
void app_schedule_chart_get_box (AppScheduleChart *self, guint i, AppScheduleBox *box);
/* The summary shown: "1F1B · 4 stages × 8 micro-batches · 1.20 s, step 1.31 s · bubble 27.3%". */
const char *app_schedule_chart_get_summary (AppScheduleChart *self);
GtkWidget *app_schedule_chart_get_area (AppScheduleChart *self);
/* What the controls do: the document's training options with this schedule, micro-batch
 * count or virtual stage count, re-planned. */
void app_schedule_chart_set_schedule (AppScheduleChart *self, PlannerSchedule schedule);
void app_schedule_chart_set_micro_batches (AppScheduleChart *self, guint micro_batches);
void app_schedule_chart_set_virtual_stages (AppScheduleChart *self, guint virtual_stages);

G_END_DECLS
