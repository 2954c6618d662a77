#define G_LOG_DOMAIN "app-timeline"
#include "config.h"

#include "app-timeline.h"

#include <glib/gi18n.h>

/* The speeds the dropdown offers, steps per second. */
static const double speeds[] = { 1, 4, 16, 64, 512 };
/* Timer ticks per second at most; faster speeds take several steps a tick. */
#define MAX_TICKS_PER_S 60.0
#define MAX_SPEED 512

struct _AppTimeline
{
  AppDocumentView parent_instance;

  GtkToggleButton *play_button;
  GtkScale *scale;
  GtkAdjustment *adjustment;
  GtkDropDown *speed_dropdown;
  GtkLabel *description_label;

  double speed;
  guint timeout_id;
  gboolean updating;
  /* What app-timeline.ui binds: the whole timeline is sensitive while the plan has steps;
   * the label shows the description (markup). */
  gboolean has_steps;
  /* The play button's state ("playing"), kept here: the template's bindings read it while
   * the template is built, before the button is bound to play_button. */
  gboolean playing;
  char *description;
};

G_DEFINE_FINAL_TYPE (AppTimeline, app_timeline, APP_TYPE_DOCUMENT_VIEW)

enum
{
  PROP_0,
  PROP_PLAYING,
  PROP_SPEED,
  PROP_HAS_STEPS,
  PROP_DESCRIPTION,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

static AppDocument *
get_document (AppTimeline *self)
{
  return app_document_view_get_document (APP_DOCUMENT_VIEW (self));
}

static guint
n_steps (AppTimeline *self)
{
  PlannerPlan *plan = app_document_view_get_plan (APP_DOCUMENT_VIEW (self));
  return plan ? planner_plan_get_n_trace_steps (plan) : 0;
}

/* The document's trace step, -1 (the whole plan) without a document. */
static int
current_step (AppTimeline *self)
{
  AppDocument *doc = get_document (self);
  return doc ? app_document_get_step (doc) : -1;
}

/* The current step's description, markup: the whole plan's counts, or the step's op, its
 * strategy and costs; "" without a plan. */
static char *
dup_description (AppTimeline *self)
{
  PlannerPlan *plan = app_document_view_get_plan (APP_DOCUMENT_VIEW (self));
  int step = current_step (self);
  if (plan == NULL)
    return g_strdup ("");
  const PlannerPlanTotals *totals = planner_plan_get_totals (plan);
  if (step < 0)
    return g_markup_printf_escaped (
        _("<b>Whole plan</b>: %u steps · %u pinned, %u propagated, %u defaulted · %u redistributions"),
        planner_plan_get_n_trace_steps (plan), totals->n_pinned, totals->n_propagated,
        totals->n_defaulted, totals->n_redistributions);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerTraceStep *t = planner_plan_get_trace_step (plan, step);
  const PlannerOp *op = planner_graph_get_op (graph, t->op);
  g_autofree char *strategy = planner_strategy_to_string (&t->strategy, &op->rule, mesh);
  g_autofree char *cost = planner_format_time (t->edge_cost_s);
  const char *from = t->from_op >= 0 ? planner_graph_get_op (graph, t->from_op)->name : "?";
  return g_markup_printf_escaped (
      t->forward ? _("<b>Step %u/%u</b> %s ← %s (forward): <tt>%s</tt>, edges %s, %u candidates")
                 : _("<b>Step %u/%u</b> %s ← %s (backward): <tt>%s</tt>, edges %s, %u candidates"),
      step + 1, planner_plan_get_n_trace_steps (plan), op->name, from, strategy, cost,
      t->n_candidates);
}

/* The slider runs 0..n: value k < n is trace step k, n is the whole plan. Its value and
 * bounds are set here together (gtk_adjustment_configure()), not bound: a value is clamped
 * to the bounds it finds, so separate bindings of value and upper would depend on the order
 * they run in. */
static void
sync_from_document (AppTimeline *self)
{
  guint n = n_steps (self);
  int step = current_step (self);
  self->updating = TRUE;
  gtk_adjustment_configure (self->adjustment, step < 0 ? n : (double) step, 0, MAX (n, 1), 1, 10,
                            0);
  self->updating = FALSE;
  if (self->has_steps != (n > 0))
    {
      self->has_steps = n > 0;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_HAS_STEPS]);
    }
  g_autofree char *description = dup_description (self);
  if (g_strcmp0 (description, self->description) != 0)
    {
      g_free (self->description);
      self->description = g_steal_pointer (&description);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_DESCRIPTION]);
    }
}

static void
on_value_changed (AppTimeline *self)
{
  AppDocument *doc = get_document (self);
  if (self->updating || doc == NULL)
    return;
  guint n = n_steps (self);
  guint v = (guint) (gtk_adjustment_get_value (self->adjustment) + 0.5);
  app_document_set_step (doc, v >= n ? -1 : (int) v);
}

void
app_timeline_step (AppTimeline *self, int delta)
{
  g_return_if_fail (APP_IS_TIMELINE (self));
  AppDocument *doc = get_document (self);
  if (doc == NULL)
    return;
  int n = (int) n_steps (self);
  int step = app_document_get_step (doc);
  int pos = step < 0 ? n : step;
  pos = CLAMP (pos + delta, 0, n);
  app_document_set_step (doc, pos >= n ? -1 : pos);
}

static gboolean
tick (gpointer data)
{
  AppTimeline *self = data;
  app_timeline_step (self, (int) MAX (1, self->speed / MAX_TICKS_PER_S + 0.5));
  if (current_step (self) < 0)
    {
      self->timeout_id = 0;
      app_timeline_set_playing (self, FALSE);
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
restart_timer (AppTimeline *self)
{
  g_clear_handle_id (&self->timeout_id, g_source_remove);
  if (gtk_toggle_button_get_active (self->play_button))
    self->timeout_id
        = g_timeout_add ((guint) (1000.0 / MIN (self->speed, MAX_TICKS_PER_S)), tick, self);
}

gboolean
app_timeline_get_playing (AppTimeline *self)
{
  g_return_val_if_fail (APP_IS_TIMELINE (self), FALSE);
  return self->playing;
}

void
app_timeline_set_playing (AppTimeline *self, gboolean playing)
{
  g_return_if_fail (APP_IS_TIMELINE (self));
  gtk_toggle_button_set_active (self->play_button, playing);
}

static void
on_play_toggled (AppTimeline *self)
{
  gboolean playing = gtk_toggle_button_get_active (self->play_button);
  self->playing = playing;
  /* Playing from the whole plan starts over. */
  AppDocument *doc = get_document (self);
  if (playing && doc && app_document_get_step (doc) < 0)
    app_document_set_step (doc, 0);
  restart_timer (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PLAYING]);
}

double
app_timeline_get_speed (AppTimeline *self)
{
  g_return_val_if_fail (APP_IS_TIMELINE (self), 1);
  return self->speed;
}

void
app_timeline_set_speed (AppTimeline *self, double speed)
{
  g_return_if_fail (APP_IS_TIMELINE (self));
  speed = CLAMP (speed, 0.25, MAX_SPEED);
  if (self->speed == speed)
    return;
  self->speed = speed;
  guint best = 0;
  for (guint i = 0; i < G_N_ELEMENTS (speeds); i++)
    if (fabs (speeds[i] - speed) < fabs (speeds[best] - speed))
      best = i;
  gtk_drop_down_set_selected (self->speed_dropdown, best);
  restart_timer (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SPEED]);
}

static void
on_speed_selected (AppTimeline *self)
{
  guint i = gtk_drop_down_get_selected (self->speed_dropdown);
  if (i < G_N_ELEMENTS (speeds))
    app_timeline_set_speed (self, speeds[i]);
}

const char *
app_timeline_get_description (AppTimeline *self)
{
  g_return_val_if_fail (APP_IS_TIMELINE (self), NULL);
  return gtk_label_get_text (self->description_label);
}

/* The play button's icon in app-timeline.ui, from "playing". */
static char *
play_icon_name (gpointer this_object, gboolean playing)
{
  return g_strdup (playing ? "media-playback-pause-symbolic" : "media-playback-start-symbolic");
}

GtkWidget *
app_timeline_new (void)
{
  return g_object_new (APP_TYPE_TIMELINE, NULL);
}

static void
document_changed (AppDocumentView *view)
{
  AppTimeline *self = APP_TIMELINE (view);
  app_timeline_set_playing (self, FALSE);
  sync_from_document (self);
}

static void
app_timeline_dispose (GObject *object)
{
  AppTimeline *self = APP_TIMELINE (object);
  g_clear_handle_id (&self->timeout_id, g_source_remove);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_TIMELINE);
  g_clear_pointer (&self->description, g_free);
  G_OBJECT_CLASS (app_timeline_parent_class)->dispose (object);
}

static void
app_timeline_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppTimeline *self = APP_TIMELINE (object);
  switch (prop_id)
    {
    case PROP_PLAYING: g_value_set_boolean (value, app_timeline_get_playing (self)); break;
    case PROP_SPEED: g_value_set_double (value, self->speed); break;
    case PROP_HAS_STEPS: g_value_set_boolean (value, self->has_steps); break;
    case PROP_DESCRIPTION: g_value_set_string (value, self->description); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_timeline_set_property (GObject *object, guint prop_id, const GValue *value,
                           GParamSpec *pspec)
{
  AppTimeline *self = APP_TIMELINE (object);
  switch (prop_id)
    {
    case PROP_PLAYING: app_timeline_set_playing (self, g_value_get_boolean (value)); break;
    case PROP_SPEED: app_timeline_set_speed (self, g_value_get_double (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_timeline_class_init (AppTimelineClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_timeline_dispose;
  object_class->get_property = app_timeline_get_property;
  object_class->set_property = app_timeline_set_property;
  APP_DOCUMENT_VIEW_CLASS (klass)->document_changed = document_changed;
  GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  properties[PROP_PLAYING] = g_param_spec_boolean ("playing", NULL, NULL, FALSE, rw);
  properties[PROP_SPEED] = g_param_spec_double ("speed", NULL, NULL, 0.25, MAX_SPEED, 4, rw);
  GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  /* The plan has trace steps to walk. */
  properties[PROP_HAS_STEPS] = g_param_spec_boolean ("has-steps", NULL, NULL, FALSE, ro);
  /* The current step's description, Pango markup. */
  properties[PROP_DESCRIPTION] = g_param_spec_string ("description", NULL, NULL, "", ro);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "timeline");
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-timeline.ui");
  gtk_widget_class_bind_template_child (widget_class, AppTimeline, play_button);
  gtk_widget_class_bind_template_child (widget_class, AppTimeline, scale);
  gtk_widget_class_bind_template_child (widget_class, AppTimeline, adjustment);
  gtk_widget_class_bind_template_child (widget_class, AppTimeline, speed_dropdown);
  gtk_widget_class_bind_template_child_full (widget_class, "description", FALSE,
                                             G_STRUCT_OFFSET (AppTimeline, description_label));
  gtk_widget_class_bind_template_callback (widget_class, play_icon_name);
}

static void
app_timeline_init (AppTimeline *self)
{
  self->description = g_strdup ("");
  gtk_widget_init_template (GTK_WIDGET (self));
  self->speed = 4;
  gtk_drop_down_set_selected (self->speed_dropdown, 1);
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::plan",
                            G_CALLBACK (sync_from_document));
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::step",
                            G_CALLBACK (sync_from_document));
  g_signal_connect_swapped (self->adjustment, "value-changed", G_CALLBACK (on_value_changed),
                            self);
  g_signal_connect_swapped (self->play_button, "toggled", G_CALLBACK (on_play_toggled), self);
  g_signal_connect_swapped (self->speed_dropdown, "notify::selected",
                            G_CALLBACK (on_speed_selected), self);
}
