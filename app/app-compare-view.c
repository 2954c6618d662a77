#define G_LOG_DOMAIN "app-compare-view"
#include "config.h"

#include "app-compare-view.h"

#include <glib/gi18n.h>
#include <math.h>

#include "app-window.h"
#include "graphview-widget.h"

/* The two panes and the separator between them. A GtkBox would give one pane the odd pixel;
 * panes of exactly one width have one fit zoom and one clamp, so a viewport copied from
 * one to the other is the same viewport, pixel for pixel. */
#define APP_TYPE_COMPARE_PANES (app_compare_panes_get_type ())
G_DECLARE_FINAL_TYPE (AppComparePanes, app_compare_panes, APP, COMPARE_PANES, GtkWidget)

struct _AppComparePanes
{
  GtkWidget parent_instance;
};

G_DEFINE_FINAL_TYPE (AppComparePanes, app_compare_panes, GTK_TYPE_WIDGET)

static void
app_compare_panes_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                           int *minimum, int *natural, int *minimum_baseline,
                           int *natural_baseline)
{
  int n_panes = 0, sep_min = 0, sep_nat = 0, pane_min = 0, pane_nat = 0;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    if (GTK_IS_SEPARATOR (c))
      gtk_widget_measure (c, GTK_ORIENTATION_HORIZONTAL, -1, &sep_min, &sep_nat, NULL, NULL);
    else
      n_panes++;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    {
      int child_for = -1;
      if (orientation == GTK_ORIENTATION_VERTICAL && for_size >= 0 && !GTK_IS_SEPARATOR (c))
        child_for = MAX (0, (for_size - sep_nat) / MAX (n_panes, 1));
      int m, n;
      gtk_widget_measure (c, orientation, child_for, &m, &n, NULL, NULL);
      if (orientation == GTK_ORIENTATION_VERTICAL || !GTK_IS_SEPARATOR (c))
        {
          pane_min = MAX (pane_min, m);
          pane_nat = MAX (pane_nat, n);
        }
    }
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      *minimum = n_panes * pane_min + sep_min;
      *natural = n_panes * pane_nat + sep_nat;
    }
  else
    {
      *minimum = pane_min;
      *natural = pane_nat;
    }
}

static void
app_compare_panes_size_allocate (GtkWidget *widget, int width, int height, int baseline)
{
  int n_panes = 0, sep = 0;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    if (GTK_IS_SEPARATOR (c))
      gtk_widget_measure (c, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &sep, NULL, NULL);
    else
      n_panes++;
  int pane = n_panes ? (width - sep) / n_panes : 0;
  /* The odd pixel goes to the separator. */
  int sep_width = width - n_panes * pane, x = 0;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    {
      int w = GTK_IS_SEPARATOR (c) ? sep_width : pane;
      gtk_widget_size_allocate (c, &(GtkAllocation){ x, 0, w, height }, -1);
      x += w;
    }
}

static void
app_compare_panes_dispose (GObject *object)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (object))))
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (app_compare_panes_parent_class)->dispose (object);
}

static void
app_compare_panes_class_init (AppComparePanesClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = app_compare_panes_dispose;
  GTK_WIDGET_CLASS (klass)->measure = app_compare_panes_measure;
  GTK_WIDGET_CLASS (klass)->size_allocate = app_compare_panes_size_allocate;
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "comparepanes");
}

static void
app_compare_panes_init (AppComparePanes *self)
{
}

/* The legends of both panes (each its own plan's cost range), under the graphs rather than
 * over them. Half a window at 1280 pixels is narrower than a legend: then the two are
 * stacked across both panes, each tagged with its side, instead of being cut off (and only
 * scaled down where even that is too narrow); where a legend fits under its pane, each sits
 * under its own. */
#define APP_TYPE_COMPARE_LEGENDS (app_compare_legends_get_type ())
G_DECLARE_FINAL_TYPE (AppCompareLegends, app_compare_legends, APP, COMPARE_LEGENDS, GtkWidget)

struct _AppCompareLegends
{
  GtkWidget parent_instance;
  GraphviewWidget *views[2]; /* the panes (the view holds them) */
  graphene_rect_t drawn[2];  /* where each legend was last drawn */
};

G_DEFINE_FINAL_TYPE (AppCompareLegends, app_compare_legends, GTK_TYPE_WIDGET)

#define LEGEND_PAD 4
#define LEGEND_GAP 4

static void
legend_size (GraphviewWidget *view, double *width, double *height)
{
  *width = *height = 0;
  if (view == NULL || graphview_widget_get_renderer (view) == NULL)
    return; /* no model yet */
  cairo_surface_t *surface = cairo_recording_surface_create (CAIRO_CONTENT_COLOR_ALPHA, NULL);
  cairo_t *cr = cairo_create (surface);
  graphview_renderer_draw_legend (graphview_widget_get_renderer (view), cr, 0, 0, width, height);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
}

static const char *
side_tag (guint pane)
{
  return pane ? _("Right") : _("Left");
}

typedef struct
{
  double lw[2], lh[2];
  gboolean stacked;
  double tag_width; /* stacked: room for the tags before the legends */
  double scale;
} LegendsLayout;

static void
legends_layout (AppCompareLegends *self, int width, LegendsLayout *l)
{
  for (guint i = 0; i < 2; i++)
    legend_size (self->views[i], &l->lw[i], &l->lh[i]);
  double widest = MAX (l->lw[0], l->lw[1]);
  double pane = (width - 1) / 2.0;
  l->stacked = widest + 2 * LEGEND_PAD > pane;
  l->tag_width = 0;
  l->scale = 1;
  if (!l->stacked || widest <= 0)
    return;
  for (guint i = 0; i < 2; i++)
    {
      PangoLayout *layout = gtk_widget_create_pango_layout (GTK_WIDGET (self), side_tag (i));
      int tw;
      pango_layout_get_pixel_size (layout, &tw, NULL);
      g_object_unref (layout);
      l->tag_width = MAX (l->tag_width, tw + 8);
    }
  l->scale = MIN (1.0, (width - 2 * LEGEND_PAD - l->tag_width) / widest);
  l->scale = MAX (l->scale, 0.05);
}

static void
app_compare_legends_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                             int *minimum, int *natural, int *minimum_baseline,
                             int *natural_baseline)
{
  AppCompareLegends *self = APP_COMPARE_LEGENDS (widget);
  LegendsLayout l;
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      legends_layout (self, 0, &l);
      *minimum = 1;
      *natural = (int) ceil (2 * (MAX (l.lw[0], l.lw[1]) + 2 * LEGEND_PAD)) + 1;
      return;
    }
  if (for_size < 0)
    {
      legends_layout (self, 0, &l);
      for_size = (int) ceil (2 * (MAX (l.lw[0], l.lw[1]) + 2 * LEGEND_PAD)) + 1;
    }
  legends_layout (self, for_size, &l);
  double h = l.stacked ? l.scale * (l.lh[0] + l.lh[1]) + LEGEND_GAP : MAX (l.lh[0], l.lh[1]);
  *minimum = *natural = h > 0 ? (int) ceil (h) + 2 * LEGEND_PAD : 0;
}

static GtkSizeRequestMode
app_compare_legends_get_request_mode (GtkWidget *widget)
{
  return GTK_SIZE_REQUEST_HEIGHT_FOR_WIDTH;
}

static void
app_compare_legends_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  AppCompareLegends *self = APP_COMPARE_LEGENDS (widget);
  int width = gtk_widget_get_width (widget), height = gtk_widget_get_height (widget);
  self->drawn[0] = self->drawn[1] = GRAPHENE_RECT_INIT (0, 0, 0, 0);
  if (width <= 0 || height <= 0)
    return;
  LegendsLayout l;
  legends_layout (self, width, &l);
  cairo_t *cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, width, height));
  double y = LEGEND_PAD;
  for (guint i = 0; i < 2; i++)
    {
      if (l.lw[i] <= 0)
        continue;
      double x = LEGEND_PAD;
      if (l.stacked)
        {
          /* The tag, in the theme's text colour, before its legend. */
          PangoLayout *layout = gtk_widget_create_pango_layout (widget, side_tag (i));
          GdkRGBA fg;
          G_GNUC_BEGIN_IGNORE_DEPRECATIONS
          gtk_style_context_get_color (gtk_widget_get_style_context (widget), &fg);
          G_GNUC_END_IGNORE_DEPRECATIONS
          int th;
          pango_layout_get_pixel_size (layout, NULL, &th);
          gdk_cairo_set_source_rgba (cr, &fg);
          cairo_move_to (cr, x, y + (l.lh[i] * l.scale - th) / 2);
          pango_cairo_show_layout (cr, layout);
          g_object_unref (layout);
          x += l.tag_width;
        }
      else
        {
          graphene_rect_t pane;
          if (gtk_widget_compute_bounds (GTK_WIDGET (self->views[i]), widget, &pane))
            x = pane.origin.x + LEGEND_PAD;
        }
      double w = l.lw[i] * l.scale, h = l.lh[i] * l.scale;
      /* The card the graph view draws its own legend on. */
      cairo_rectangle (cr, x - 2, y - 2, w + 4, h + 4);
      cairo_set_source_rgba (cr, 1, 1, 1, 0.85);
      cairo_fill (cr);
      cairo_save (cr);
      cairo_translate (cr, x, y);
      cairo_scale (cr, l.scale, l.scale);
      graphview_renderer_draw_legend (graphview_widget_get_renderer (self->views[i]), cr, 0, 0,
                                      NULL, NULL);
      cairo_restore (cr);
      self->drawn[i] = GRAPHENE_RECT_INIT (x, y, w, h);
      if (l.stacked)
        y += h + LEGEND_GAP;
    }
  cairo_destroy (cr);
}

static void
app_compare_legends_class_init (AppCompareLegendsClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  widget_class->measure = app_compare_legends_measure;
  widget_class->get_request_mode = app_compare_legends_get_request_mode;
  widget_class->snapshot = app_compare_legends_snapshot;
  gtk_widget_class_set_css_name (widget_class, "comparelegends");
}

static void
app_compare_legends_init (AppCompareLegends *self)
{
}

struct _AppCompareView
{
  GtkWidget parent_instance;

  GtkLabel *title;
  GtkWidget *close_button;
  GtkWidget *panes;
  GtkLabel *a_label;
  GtkLabel *b_label;
  GraphviewWidget *a_view;
  GraphviewWidget *b_view;
  AppCompareLegends *legends;
  GtkLabel *summary;
  GtkListBox *differences;
  GtkEventController *shortcuts;

  PlannerCompare *compare;
  GraphviewModel *model;
  guint n_rows;
  gboolean syncing;
};

G_DEFINE_FINAL_TYPE (AppCompareView, app_compare_view, GTK_TYPE_WIDGET)

enum
{
  SIGNAL_CLOSE,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

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

/* Zooming or scrolling one pane moves the other to the same viewport (the panes are one
 * width, so it is the same view of the graph). */
static void
on_viewport_changed (GraphviewWidget *view, AppCompareView *self)
{
  if (self->syncing || !graphview_widget_is_ready (view))
    return;
  GraphviewWidget *other = view == self->a_view ? self->b_view : self->a_view;
  if (!graphview_widget_is_ready (other))
    return;
  double x, y;
  graphview_widget_get_origin (view, &x, &y);
  self->syncing = TRUE;
  graphview_widget_set_viewport (other, graphview_widget_get_zoom (view), x, y);
  self->syncing = FALSE;
}

/* The second pane's first layout arrives after the first pane was moved: it takes the
 * first pane's view rather than its own fit. */
static void
on_layout_ready (GraphviewWidget *view, AppCompareView *self)
{
  GraphviewWidget *other = view == self->a_view ? self->b_view : self->a_view;
  if (graphview_widget_is_ready (other))
    on_viewport_changed (other, self);
}

gboolean
app_compare_view_get_legend_rect (AppCompareView *self, guint pane, graphene_rect_t *rect)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), FALSE);
  g_return_val_if_fail (pane < 2, FALSE);
  *rect = self->legends->drawn[pane];
  return rect->size.width > 0;
}

GtkWidget *
app_compare_view_get_legends (AppCompareView *self)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), NULL);
  return GTK_WIDGET (self->legends);
}

GraphviewWidget *
app_compare_view_get_pane (AppCompareView *self, guint pane)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), NULL);
  g_return_val_if_fail (pane < 2, NULL);
  return pane ? self->b_view : self->a_view;
}

GtkWidget *
app_compare_view_get_close_button (AppCompareView *self)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), NULL);
  return self->close_button;
}

GtkEventController *
app_compare_view_get_shortcuts (AppCompareView *self)
{
  g_return_val_if_fail (APP_IS_COMPARE_VIEW (self), NULL);
  return self->shortcuts;
}

/* Actions ----------------------------------------------------------------------------------- */

static void
action_close (GtkWidget *widget, const char *name, GVariant *param)
{
  g_signal_emit (widget, signals[SIGNAL_CLOSE], 0);
}

/* The zoom buttons act on the first pane; the second follows it. */
static void
action_zoom (GtkWidget *widget, const char *name, GVariant *param)
{
  AppCompareView *self = APP_COMPARE_VIEW (widget);
  GraphviewWidget *view = self->a_view;
  if (!graphview_widget_is_ready (view))
    return;
  if (g_str_equal (name, "compare.zoom-fit"))
    {
      graphview_widget_zoom_to_fit (view);
      return;
    }
  double factor = g_str_equal (name, "compare.zoom-in") ? APP_WINDOW_ZOOM_STEP
                                                        : 1 / APP_WINDOW_ZOOM_STEP;
  graphview_widget_zoom_at (view, factor, gtk_widget_get_width (GTK_WIDGET (view)) / 2.0,
                            gtk_widget_get_height (GTK_WIDGET (view)) / 2.0);
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
  /* Translators: the two plans compared, left and right. */
  g_autofree char *title = g_strdup_printf (_("%s → %s"), a_label, b_label);
  gtk_label_set_text (self->title, title);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->title), title);
  gtk_widget_queue_resize (GTK_WIDGET (self->legends));
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
  /* A pane's layout may still finish after the view is gone (the window closed while it
   * ran): its signals must not reach a view whose panes are cleared. */
  if (self->a_view)
    g_signal_handlers_disconnect_by_data (self->a_view, self);
  if (self->b_view)
    g_signal_handlers_disconnect_by_data (self->b_view, self);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_COMPARE_VIEW);
  /* The template's root is no bound child, so disposing the template leaves it parented. */
  GtkWidget *root;
  while ((root = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (root);
  g_clear_pointer (&self->compare, planner_compare_free);
  g_clear_object (&self->model);
  G_OBJECT_CLASS (app_compare_view_parent_class)->dispose (object);
}

/* Escape leaves compare mode from anywhere in it, so the focus goes into the view when it
 * is shown (the header's toggle that opened it is outside). */
static void
app_compare_view_map (GtkWidget *widget)
{
  AppCompareView *self = APP_COMPARE_VIEW (widget);
  GTK_WIDGET_CLASS (app_compare_view_parent_class)->map (widget);
  GtkRoot *root = gtk_widget_get_root (widget);
  GtkWidget *focus = root ? gtk_root_get_focus (root) : NULL;
  if (focus == NULL || !gtk_widget_is_ancestor (focus, widget))
    gtk_widget_grab_focus (GTK_WIDGET (self->a_view));
}

static void
app_compare_view_class_init (AppCompareViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_compare_view_dispose;
  widget_class->map = app_compare_view_map;
  g_type_ensure (GRAPHVIEW_TYPE_WIDGET);
  g_type_ensure (APP_TYPE_COMPARE_PANES);
  g_type_ensure (APP_TYPE_COMPARE_LEGENDS);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "compareview");
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-compare-view.ui");
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, title);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, close_button);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, panes);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, a_label);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, b_label);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, a_view);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, b_view);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, legends);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, summary);
  gtk_widget_class_bind_template_child (widget_class, AppCompareView, differences);
  gtk_widget_class_install_action (widget_class, "compare.close", NULL, action_close);
  gtk_widget_class_install_action (widget_class, "compare.zoom-in", NULL, action_zoom);
  gtk_widget_class_install_action (widget_class, "compare.zoom-out", NULL, action_zoom);
  gtk_widget_class_install_action (widget_class, "compare.zoom-fit", NULL, action_zoom);

  /* Asks to leave compare mode (Escape, the close button); the window goes back to the plan. */
  signals[SIGNAL_CLOSE] = g_signal_new ("close", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0,
                                        NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
app_compare_view_init (AppCompareView *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  g_signal_connect (self->a_view, "selection-changed", G_CALLBACK (on_selection_changed), self);
  g_signal_connect (self->b_view, "selection-changed", G_CALLBACK (on_selection_changed), self);
  g_signal_connect (self->a_view, "viewport-changed", G_CALLBACK (on_viewport_changed), self);
  g_signal_connect (self->b_view, "viewport-changed", G_CALLBACK (on_viewport_changed), self);
  g_signal_connect (self->a_view, "layout-ready", G_CALLBACK (on_layout_ready), self);
  g_signal_connect (self->b_view, "layout-ready", G_CALLBACK (on_layout_ready), self);
  g_signal_connect_swapped (self->differences, "row-activated", G_CALLBACK (on_row_activated),
                            self);
  self->legends->views[0] = self->a_view;
  self->legends->views[1] = self->b_view;
  /* Captured before the panes see it: a graph view takes Escape for clearing its selection. */
  GtkEventController *shortcuts = gtk_shortcut_controller_new ();
  gtk_event_controller_set_propagation_phase (shortcuts, GTK_PHASE_CAPTURE);
  gtk_shortcut_controller_add_shortcut (
      GTK_SHORTCUT_CONTROLLER (shortcuts),
      gtk_shortcut_new (gtk_keyval_trigger_new (GDK_KEY_Escape, 0),
                        gtk_named_action_new ("compare.close")));
  gtk_widget_add_controller (GTK_WIDGET (self), shortcuts);
  self->shortcuts = shortcuts;
}
