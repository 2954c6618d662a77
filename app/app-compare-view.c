#define G_LOG_DOMAIN "app-compare-view"
#include "config.h"

#include "app-compare-view.h"

#include <glib/gi18n.h>

#include "graphview-widget.h"

struct _AppCompareView
{
  GtkWidget parent_instance;

  GtkLabel *a_label;
  GtkLabel *b_label;
  GraphviewWidget *a_view;
  GraphviewWidget *b_view;
  GtkLabel *summary;
  GtkListBox *differences;

  PlannerCompare *compare;
  GraphviewModel *model;
  guint n_rows;
  gboolean syncing;
  /* Last viewport seen of each pane: the one that moved leads. */
  double a_zoom, a_x, a_y, b_zoom, b_x, b_y;
};

G_DEFINE_FINAL_TYPE (AppCompareView, app_compare_view, GTK_TYPE_WIDGET)

static void
select_in (AppCompareView *self, GraphviewWidget *view, int op)
{
  if (op < 0)
    {
      graphview_widget_set_selected (view, -1);
      return;
    }
  guint item = graphview_model_get_item_of_op (self->model, op);
  if (graphview_model_get_item (self->model, item)->kind != GRAPHVIEW_ITEM_OP)
    {
      PlannerGraph *graph = graphview_model_get_graph (self->model);
      graphview_model_expand_matching (self->model, planner_graph_get_op (graph, op)->name);
      item = graphview_model_get_item_of_op (self->model, op);
    }
  graphview_widget_set_selected (view, (int) item);
}

void
app_compare_view_select_op (AppCompareView *self, int op)
{
  g_return_if_fail (APP_IS_COMPARE_VIEW (self));
  if (self->model == NULL)
    return;
  self->syncing = TRUE;
  select_in (self, self->a_view, op);
  select_in (self, self->b_view, op);
  self->syncing = FALSE;
}

/* Selecting in one pane selects the same item in the other (one model, one set of items). */
static void
on_selection_changed (GraphviewWidget *view, int item, AppCompareView *self)
{
  if (self->syncing)
    return;
  self->syncing = TRUE;
  graphview_widget_set_selected (view == self->a_view ? self->b_view : self->a_view, item);
  self->syncing = FALSE;
}

static void
copy_viewport (GraphviewWidget *from, GraphviewWidget *to)
{
  double zf = graphview_widget_get_zoom (from), zt = graphview_widget_get_zoom (to);
  if (zt > 0 && zf != zt)
    graphview_widget_zoom_at (to, zf / zt, 0, 0);
  double fx, fy, tx, ty;
  graphview_widget_get_origin (from, &fx, &fy);
  graphview_widget_get_origin (to, &tx, &ty);
  double z = graphview_widget_get_zoom (to);
  graphview_widget_pan (to, (tx - fx) * z, (ty - fy) * z);
}

/* The widget has no viewport signal; a tick callback notices which pane moved and makes the
 * other follow, so zoom and pan stay in step. */
static gboolean
sync_tick (GtkWidget *widget, GdkFrameClock *clock, gpointer data)
{
  AppCompareView *self = APP_COMPARE_VIEW (widget);
  if (self->model == NULL || !gtk_widget_get_mapped (widget))
    return G_SOURCE_CONTINUE;
  double az = graphview_widget_get_zoom (self->a_view), ax, ay;
  double bz = graphview_widget_get_zoom (self->b_view), bx, by;
  graphview_widget_get_origin (self->a_view, &ax, &ay);
  graphview_widget_get_origin (self->b_view, &bx, &by);
  gboolean a_moved = az != self->a_zoom || ax != self->a_x || ay != self->a_y;
  gboolean b_moved = bz != self->b_zoom || bx != self->b_x || by != self->b_y;
  if (a_moved && !b_moved)
    copy_viewport (self->a_view, self->b_view);
  else if (b_moved && !a_moved)
    copy_viewport (self->b_view, self->a_view);
  self->a_zoom = graphview_widget_get_zoom (self->a_view);
  graphview_widget_get_origin (self->a_view, &self->a_x, &self->a_y);
  self->b_zoom = graphview_widget_get_zoom (self->b_view);
  graphview_widget_get_origin (self->b_view, &self->b_x, &self->b_y);
  return G_SOURCE_CONTINUE;
}

static const char *
decision_name (PlannerDecision d)
{
  switch (d)
    {
    case PLANNER_DECIDED_PINNED: return _("pinned");
    case PLANNER_DECIDED_PROPAGATED: return _("propagated");
    case PLANNER_DECIDED_DEFAULTED:
    default: return _("defaulted");
    }
}

static void
add_row (AppCompareView *self, const char *markup, int op)
{
  GtkWidget *label = gtk_label_new (NULL);
  gtk_label_set_markup (GTK_LABEL (label), markup);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  GtkWidget *row = gtk_list_box_row_new ();
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), label);
  g_object_set_data (G_OBJECT (row), "op", GINT_TO_POINTER (op + 1));
  gtk_list_box_append (self->differences, row);
  self->n_rows++;
}

static void
add_redistribution_row (AppCompareView *self, PlannerPlan *plan, guint index, gboolean added)
{
  const PlannerRedistribution *r = planner_plan_get_redistribution (plan, index);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  PlannerRedistPath path = { TRUE, r->n_steps, r->steps, r->bytes, r->time_s };
  g_autofree char *describe = planner_redist_path_describe (&path, planner_plan_get_mesh (plan));
  const char *tensor = planner_graph_get_tensor (graph, r->tensor)->name;
  const char *consumer = r->consumer >= 0 ? planner_graph_get_op (graph, r->consumer)->name
                                          : _("(output)");
  g_autofree char *markup = g_markup_printf_escaped (
      "<span foreground=\"%s\">%s</span> <tt>%s</tt> → %s\n<small>%s</small>",
      added ? "#e66100" : "#2ec27e", added ? _("added") : _("removed"), tensor, consumer,
      describe);
  add_row (self, markup, r->consumer);
}

static char *
delta_time (double s)
{
  g_autofree char *t = planner_format_time (fabs (s));
  return g_strdup_printf ("%s%s", s < 0 ? "−" : "+", t);
}

static char *
delta_bytes (gint64 b)
{
  g_autofree char *t = planner_format_bytes ((guint64) ABS (b));
  return g_strdup_printf ("%s%s", b < 0 ? "−" : "+", t);
}

static void
fill (AppCompareView *self)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->differences))))
    gtk_list_box_remove (self->differences, child);
  self->n_rows = 0;
  const PlannerCompare *c = self->compare;
  PlannerGraph *graph = planner_plan_get_graph (c->a);

  g_autofree char *step = delta_time (c->step_time_s);
  g_autofree char *comm = delta_time (c->comm_time_s);
  g_autofree char *bytes = delta_bytes (c->comm_bytes);
  g_autofree char *compute = delta_time (c->compute_time_s);
  g_autofree char *memory = delta_bytes (c->memory_per_device_bytes);
  g_autoptr (GString) s = g_string_new (NULL);
  g_autofree char *head = g_markup_printf_escaped (
      _("<b>%u ops changed</b>, %u redistributions added, %u removed, %u in common\n"
        "Training step %s · communication %s (%s) · compute %s · memory per device %s"),
      c->ops->len, c->added->len, c->removed->len, c->n_common, step, comm, bytes, compute,
      memory);
  g_string_append (s, head);
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      const PlannerCompareDelta *d = &c->kinds[k];
      if (d->count == 0 && d->bytes == 0)
        continue;
      g_autofree char *t = delta_time (d->time_s);
      g_autofree char *b = delta_bytes (d->bytes);
      g_string_append_printf (s, "\n%s %+d · %s · %s", planner_step_kind_to_string (k), d->count,
                              b, t);
    }
  gtk_label_set_markup (self->summary, s->str);

  for (guint i = 0; i < c->ops->len; i++)
    {
      const PlannerCompareOp *o = &g_array_index (c->ops, PlannerCompareOp, i);
      g_autofree char *markup = g_markup_printf_escaped (
          "<b>%s</b>\n<small><tt>%s</tt> (%s)\n→ <tt>%s</tt> (%s)</small>",
          planner_graph_get_op (graph, o->op)->name, o->a, decision_name (o->a_decision), o->b,
          decision_name (o->b_decision));
      add_row (self, markup, (int) o->op);
    }
  for (guint i = 0; i < c->added->len; i++)
    add_redistribution_row (self, c->b, g_array_index (c->added, guint, i), TRUE);
  for (guint i = 0; i < c->removed->len; i++)
    add_redistribution_row (self, c->a, g_array_index (c->removed, guint, i), FALSE);
}

static void
on_row_activated (AppCompareView *self, GtkListBoxRow *row)
{
  int op = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (row), "op")) - 1;
  if (op >= 0)
    app_compare_view_select_op (self, op);
}

gboolean
app_compare_view_set_plans (AppCompareView *self, PlannerPlan *a, const char *a_label,
                            PlannerPlan *b, const char *b_label, GError **error)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), FALSE);
  g_return_val_if_fail (PLANNER_IS_PLAN (a) && PLANNER_IS_PLAN (b), FALSE);
  PlannerCompare *compare = planner_compare_new (a, b, error);
  if (compare == NULL)
    return FALSE;
  g_clear_pointer (&self->compare, planner_compare_free);
  self->compare = compare;
  /* One model for both panes: folding and item indices stay the same on both sides. */
  if (self->model == NULL || graphview_model_get_graph (self->model) != planner_plan_get_graph (b))
    {
      g_clear_object (&self->model);
      self->model = graphview_model_new (planner_plan_get_graph (b));
      graphview_widget_set_model (self->a_view, self->model);
      graphview_widget_set_model (self->b_view, self->model);
    }
  graphview_widget_set_plan (self->a_view, a);
  graphview_widget_set_plan (self->b_view, b);
  graphview_widget_set_compare_plan (self->a_view, b);
  graphview_widget_set_compare_plan (self->b_view, a);
  gtk_label_set_text (self->a_label, a_label);
  gtk_label_set_text (self->b_label, b_label);
  fill (self);
  return TRUE;
}

const PlannerCompare *
app_compare_view_get_compare (AppCompareView *self)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), NULL);
  return self->compare;
}

guint
app_compare_view_get_n_differences (AppCompareView *self)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), 0);
  return self->n_rows;
}

GtkWidget *
app_compare_view_new (void)
{
  return g_object_new (APP_TYPE_COMPARE_VIEW, NULL);
}

static void
app_compare_view_dispose (GObject *object)
{
  AppCompareView *self = APP_COMPARE_VIEW (object);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_COMPARE_VIEW);
  /* The template's root is no bound child, so disposing the template leaves it parented. */
  GtkWidget *root;
  while ((root = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (root);
  g_clear_pointer (&self->compare, planner_compare_free);
  g_clear_object (&self->model);
  G_OBJECT_CLASS (app_compare_view_parent_class)->dispose (object);
}

static void
app_compare_view_class_init (AppCompareViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_compare_view_dispose;
  g_type_ensure (GRAPHVIEW_TYPE_WIDGET);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "compareview");
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-compare-view.ui");
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, a_label);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, b_label);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, a_view);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, b_view);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, summary);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, differences);
}

static void
app_compare_view_init (AppCompareView *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  g_signal_connect (self->a_view, "selection-changed", G_CALLBACK (on_selection_changed), self);
  g_signal_connect (self->b_view, "selection-changed", G_CALLBACK (on_selection_changed), self);
  g_signal_connect_swapped (self->differences, "row-activated", G_CALLBACK (on_row_activated),
                            self);
  gtk_widget_add_tick_callback (GTK_WIDGET (self), sync_tick, NULL, NULL);
}
