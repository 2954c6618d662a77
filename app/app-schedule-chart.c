#define G_LOG_DOMAIN "app-schedule-chart"
#include "config.h"

#include "app-schedule-chart.h"

#include <glib/gi18n.h>

#include "planner-pipeline.h"

struct _AppScheduleChart
{
  AppDocumentView parent_instance;

  GtkDropDown *schedule_dropdown;
  GtkSpinButton *micro_batches_spin;
  GtkSpinButton *virtual_stages_spin;
  GtkDrawingArea *area;

  /* The plan's schedule: its slots and length, and the pipeline's shape. */
  GArray *slots; /* PlannerPipelineSlot */
  double length_s;
  guint p, v, m;
  char *summary;
  gboolean has_pipeline;
  gboolean syncing; /* the controls are being set from the plan */
};

G_DEFINE_FINAL_TYPE (AppScheduleChart, app_schedule_chart, APP_TYPE_DOCUMENT_VIEW)

/* Bound in the templates: the summary line (app-schedule-chart.ui) and, in app-window.ui,
 * the chart's visibility (a plan with a pipeline). */
enum
{
  PROP_0,
  PROP_SUMMARY,
  PROP_HAS_PIPELINE,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

/* The plot inside the area: stage names on the left, the time axis below. */
#define PAD_LEFT 58.0
#define PAD_RIGHT 8.0
#define PAD_TOP 2.0
#define PAD_BOTTOM 14.0

static const double forward_rgb[3] = { 0.21, 0.52, 0.89 };
static const double backward_rgb[3] = { 0.18, 0.76, 0.49 };

static void
sync_controls (AppScheduleChart *self, const PlannerCostConstants *c)
{
  self->syncing = TRUE;
  gtk_drop_down_set_selected (self->schedule_dropdown, (guint)c->schedule);
  gtk_spin_button_set_value (self->micro_batches_spin, self->m);
  gtk_spin_button_set_value (self->virtual_stages_spin, self->v);
  gtk_widget_set_sensitive (GTK_WIDGET (self->virtual_stages_spin),
                            c->schedule == PLANNER_SCHEDULE_INTERLEAVED);
  self->syncing = FALSE;
}

static void
rebuild (AppDocumentView *view)
{
  AppScheduleChart *self = APP_SCHEDULE_CHART (view);
  g_array_set_size (self->slots, 0);
  g_autofree char *old_summary = g_steal_pointer (&self->summary);
  self->length_s = 0;
  PlannerPlan *plan = app_document_view_get_plan (view);
  AppDocument *doc = app_document_view_get_document (view);
  /* NULL without a pp axis. */
  const PlannerPipeline *pl = plan ? app_document_get_pipeline (doc) : NULL;
  if (pl != NULL)
    {
      self->p = pl->p;
      self->v = pl->v;
      self->m = pl->m;
      self->length_s = planner_pipeline_schedule (pl, self->slots);
      static const char *const names[] = { "1F1B", "GPipe", N_ ("Interleaved 1F1B") };
      g_autofree char *length = planner_format_time (self->length_s);
      g_autofree char *step = planner_format_time (planner_plan_get_totals (plan)->step_time_s);
      g_autofree char *shape
          = pl->v > 1 ? g_strdup_printf (_ ("%u stages × %u chunks × %u micro-batches"), pl->p,
                                         pl->v, pl->m)
                      : g_strdup_printf (_ ("%u stages × %u micro-batches"), pl->p, pl->m);
      self->summary = g_strdup_printf (_ ("%s · %s · schedule %s, step %s · bubble %.1f%%"),
                                       _ (names[MIN (pl->schedule, 2)]), shape, length, step,
                                       100 * pl->bubble_fraction);
      sync_controls (self, planner_plan_get_constants (plan));
    }
  if (g_strcmp0 (old_summary, self->summary) != 0)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SUMMARY]);
  if (self->has_pipeline != (pl != NULL))
    {
      self->has_pipeline = pl != NULL;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_HAS_PIPELINE]);
    }
  gtk_widget_queue_draw (GTK_WIDGET (self->area));
}

guint
app_schedule_chart_get_n_boxes (AppScheduleChart *self)
{
  g_return_val_if_fail (APP_IS_SCHEDULE_CHART (self), 0);
  return self->slots->len;
}

void
app_schedule_chart_get_box (AppScheduleChart *self, guint i, AppScheduleBox *box)
{
  g_return_if_fail (APP_IS_SCHEDULE_CHART (self));
  g_return_if_fail (i < self->slots->len && box != NULL);
  const PlannerPipelineSlot *s = &g_array_index (self->slots, PlannerPipelineSlot, i);
  double width = gtk_widget_get_width (GTK_WIDGET (self->area));
  double height = gtk_widget_get_height (GTK_WIDGET (self->area));
  double plot = MAX (width - PAD_LEFT - PAD_RIGHT, 1);
  double row = MAX (height - PAD_TOP - PAD_BOTTOM, 1) / MAX (self->p, 1);
  double scale = self->length_s > 0 ? plot / self->length_s : 0;
  box->stage = s->stage;
  box->micro_batch = s->micro_batch;
  box->chunk = s->chunk;
  box->backward = s->backward;
  box->start_s = s->start;
  box->end_s = s->end;
  box->x = PAD_LEFT + s->start * scale;
  box->width = (s->end - s->start) * scale;
  box->y = PAD_TOP + s->stage * row + MIN (2.0, row * 0.1);
  box->height = row - 2 * MIN (2.0, row * 0.1);
}

const char *
app_schedule_chart_get_summary (AppScheduleChart *self)
{
  g_return_val_if_fail (APP_IS_SCHEDULE_CHART (self), NULL);
  return self->summary;
}

GtkWidget *
app_schedule_chart_get_area (AppScheduleChart *self)
{
  g_return_val_if_fail (APP_IS_SCHEDULE_CHART (self), NULL);
  return GTK_WIDGET (self->area);
}

/* @text in the widget's font at 10 px, its baseline at (x, y) (NULL @cr: measure only);
 * returns its width. Pango, so a translation's glyphs come from fallback fonts as in a
 * label. */
static double
chart_text (GtkWidget *widget, cairo_t *cr, const char *text, double x, double y)
{
  g_autoptr (PangoLayout) layout = gtk_widget_create_pango_layout (widget, text);
  PangoFontDescription *font = pango_font_description_from_string ("Sans");
  pango_font_description_set_absolute_size (font, 10 * PANGO_SCALE);
  pango_layout_set_font_description (layout, font);
  pango_font_description_free (font);
  PangoRectangle logical;
  pango_layout_get_extents (layout, NULL, &logical);
  if (cr)
    {
      cairo_move_to (cr, x, y - (double)pango_layout_get_baseline (layout) / PANGO_SCALE);
      pango_cairo_show_layout (cr, layout);
    }
  return (double)logical.width / PANGO_SCALE;
}

static void
draw (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  AppScheduleChart *self = data;
  if (self->slots->len == 0)
    return;
  GdkRGBA fg;
  gtk_style_context_get_color (gtk_widget_get_style_context (GTK_WIDGET (area)), &fg);
  GtkWidget *widget = GTK_WIDGET (area);
  double row = (height - PAD_TOP - PAD_BOTTOM) / MAX (self->p, 1);

  /* Stage rows, each with its name and a faint track: what stays bare is the bubble. */
  for (guint s = 0; s < self->p; s++)
    {
      double y = PAD_TOP + s * row;
      cairo_rectangle (cr, PAD_LEFT, y + 1, width - PAD_LEFT - PAD_RIGHT, row - 2);
      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.05);
      cairo_fill (cr);
      g_autofree char *name = g_strdup_printf (_ ("stage %u"), s);
      cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.75);
      chart_text (widget, cr, name, 4, y + row / 2 + 3.5);
    }

  for (guint i = 0; i < self->slots->len; i++)
    {
      AppScheduleBox b;
      app_schedule_chart_get_box (self, i, &b);
      const double *rgb = b.backward ? backward_rgb : forward_rgb;
      /* Later chunks of an interleaved stage lighter. */
      double t = self->v > 1 ? 0.45 * b.chunk / (self->v - 1) : 0;
      cairo_rectangle (cr, b.x + 0.5, b.y, MAX (b.width - 1, 0.5), b.height);
      cairo_set_source_rgb (cr, rgb[0] + (1 - rgb[0]) * t, rgb[1] + (1 - rgb[1]) * t,
                            rgb[2] + (1 - rgb[2]) * t);
      cairo_fill (cr);
      g_autofree char *number = g_strdup_printf ("%u", b.micro_batch + 1);
      double advance = chart_text (widget, NULL, number, 0, 0);
      if (advance + 2 <= b.width && b.height >= 10)
        {
          cairo_set_source_rgb (cr, 1, 1, 1);
          chart_text (widget, cr, number, b.x + (b.width - advance) / 2, b.y + b.height / 2 + 3.5);
        }
    }

  /* The time axis: 0 and the schedule's length. */
  g_autofree char *end = planner_format_time (self->length_s);
  double advance = chart_text (widget, NULL, end, 0, 0);
  cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.6);
  chart_text (widget, cr, "0", PAD_LEFT, height - 3);
  chart_text (widget, cr, end, width - PAD_RIGHT - advance, height - 3);
}

static gboolean
on_query_tooltip (GtkWidget *widget, int x, int y, gboolean keyboard, GtkTooltip *tooltip,
                  AppScheduleChart *self)
{
  for (guint i = 0; i < self->slots->len; i++)
    {
      AppScheduleBox b;
      app_schedule_chart_get_box (self, i, &b);
      if (x < b.x || x >= b.x + b.width || y < b.y || y >= b.y + b.height)
        continue;
      g_autofree char *start = planner_format_time (b.start_s);
      g_autofree char *end = planner_format_time (b.end_s);
      g_autofree char *text = g_strdup_printf (
          b.backward ? _ ("Stage %u, micro-batch %u backward (chunk %u): %s – %s")
                     : _ ("Stage %u, micro-batch %u forward (chunk %u): %s – %s"),
          b.stage, b.micro_batch + 1, b.chunk, start, end);
      gtk_tooltip_set_text (tooltip, text);
      return TRUE;
    }
  return FALSE;
}

/* The document's options with one change, re-planned. */
static void
change (AppScheduleChart *self, int schedule, int micro_batches, int virtual_stages)
{
  AppDocument *doc = app_document_view_get_document (APP_DOCUMENT_VIEW (self));
  if (self->syncing || doc == NULL)
    return;
  PlannerCostConstants c = *app_document_get_constants (doc);
  if (schedule >= 0)
    {
      c.schedule = (PlannerSchedule)schedule;
      /* Virtual stages are the interleaved schedule's. */
      if (c.schedule != PLANNER_SCHEDULE_INTERLEAVED)
        c.virtual_stages = 1;
    }
  if (micro_batches > 0)
    {
      c.micro_batches = (guint)micro_batches;
      c.micro_batch = 0;
    }
  if (virtual_stages > 0)
    {
      c.virtual_stages = (guint)virtual_stages;
      if (virtual_stages > 1)
        c.schedule = PLANNER_SCHEDULE_INTERLEAVED;
    }
  gtk_widget_set_sensitive (GTK_WIDGET (self->virtual_stages_spin),
                            c.schedule == PLANNER_SCHEDULE_INTERLEAVED);
  app_document_set_constants (doc, &c);
}

static void
on_schedule_selected (AppScheduleChart *self)
{
  guint selected = gtk_drop_down_get_selected (self->schedule_dropdown);
  if (selected != GTK_INVALID_LIST_POSITION)
    change (self, (int)selected, 0, 0);
}

static void
on_micro_batches_changed (AppScheduleChart *self)
{
  change (self, -1, gtk_spin_button_get_value_as_int (self->micro_batches_spin), 0);
}

static void
on_virtual_stages_changed (AppScheduleChart *self)
{
  change (self, -1, 0, gtk_spin_button_get_value_as_int (self->virtual_stages_spin));
}

void
app_schedule_chart_set_schedule (AppScheduleChart *self, PlannerSchedule schedule)
{
  g_return_if_fail (APP_IS_SCHEDULE_CHART (self));
  gtk_drop_down_set_selected (self->schedule_dropdown, (guint)schedule);
}

void
app_schedule_chart_set_micro_batches (AppScheduleChart *self, guint micro_batches)
{
  g_return_if_fail (APP_IS_SCHEDULE_CHART (self));
  gtk_spin_button_set_value (self->micro_batches_spin, micro_batches);
}

void
app_schedule_chart_set_virtual_stages (AppScheduleChart *self, guint virtual_stages)
{
  g_return_if_fail (APP_IS_SCHEDULE_CHART (self));
  gtk_spin_button_set_value (self->virtual_stages_spin, virtual_stages);
}

GtkWidget *
app_schedule_chart_new (void)
{
  return g_object_new (APP_TYPE_SCHEDULE_CHART, NULL);
}

static void
app_schedule_chart_dispose (GObject *object)
{
  AppScheduleChart *self = APP_SCHEDULE_CHART (object);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_SCHEDULE_CHART);
  G_OBJECT_CLASS (app_schedule_chart_parent_class)->dispose (object);
}

static void
app_schedule_chart_finalize (GObject *object)
{
  AppScheduleChart *self = APP_SCHEDULE_CHART (object);
  g_array_unref (self->slots);
  g_free (self->summary);
  G_OBJECT_CLASS (app_schedule_chart_parent_class)->finalize (object);
}

static void
app_schedule_chart_get_property (GObject *object, guint prop_id, GValue *value,
                                 GParamSpec *pspec)
{
  AppScheduleChart *self = APP_SCHEDULE_CHART (object);
  switch (prop_id)
    {
    case PROP_SUMMARY: g_value_set_string (value, self->summary); break;
    case PROP_HAS_PIPELINE: g_value_set_boolean (value, self->has_pipeline); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_schedule_chart_class_init (AppScheduleChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_schedule_chart_dispose;
  object_class->get_property = app_schedule_chart_get_property;
  GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  /* NULL without a pipeline. */
  properties[PROP_SUMMARY] = g_param_spec_string ("summary", NULL, NULL, NULL, ro);
  properties[PROP_HAS_PIPELINE] = g_param_spec_boolean ("has-pipeline", NULL, NULL, FALSE, ro);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  object_class->finalize = app_schedule_chart_finalize;
  APP_DOCUMENT_VIEW_CLASS (klass)->document_changed = rebuild;
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-schedule-chart.ui");
  gtk_widget_class_bind_template_child (widget_class, AppScheduleChart, schedule_dropdown);
  gtk_widget_class_bind_template_child (widget_class, AppScheduleChart, micro_batches_spin);
  gtk_widget_class_bind_template_child (widget_class, AppScheduleChart, virtual_stages_spin);
  gtk_widget_class_bind_template_child_full (widget_class, "summary_label", FALSE, 0);
  gtk_widget_class_bind_template_child (widget_class, AppScheduleChart, area);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "schedulechart");
}

static void
app_schedule_chart_init (AppScheduleChart *self)
{
  self->slots = g_array_new (FALSE, TRUE, sizeof (PlannerPipelineSlot));
  gtk_widget_init_template (GTK_WIDGET (self));
  gtk_drawing_area_set_draw_func (self->area, draw, self, NULL);
  g_signal_connect (self->area, "query-tooltip", G_CALLBACK (on_query_tooltip), self);
  g_signal_connect_swapped (self->schedule_dropdown, "notify::selected",
                            G_CALLBACK (on_schedule_selected), self);
  g_signal_connect_swapped (self->micro_batches_spin, "value-changed",
                            G_CALLBACK (on_micro_batches_changed), self);
  g_signal_connect_swapped (self->virtual_stages_spin, "value-changed",
                            G_CALLBACK (on_virtual_stages_changed), self);
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::plan", G_CALLBACK (rebuild));
}
