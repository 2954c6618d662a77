#define G_LOG_DOMAIN "app-cost-chart"
#include "config.h"

#include "app-cost-chart.h"

#include <string.h>

#include "graphview-palette.h"
#include "planner-request.h"

#include <glib/gi18n.h>

typedef struct
{
  char *name;
  guint first_op;
  guint n_ops;
  double compute_s;
  double comm_s;
} Layer;

struct _AppCostChart
{
  AppDocumentView parent_instance;
  GArray *layers; /* Layer */
};

G_DEFINE_FINAL_TYPE (AppCostChart, app_cost_chart, APP_TYPE_DOCUMENT_VIEW)

#define PAD_X 8.0
#define PAD_TOP 16.0
#define PAD_BOTTOM 4.0

static void
layer_clear (gpointer data)
{
  g_free (((Layer *) data)->name);
}

/* "transformer.h.3.mlp.c_fc" -> "transformer.h.3"; "lm_head" -> "lm_head": the block an op
 * belongs to (planner_op_block), else its first path component. */
static char *
layer_key (const char *name)
{
  gsize len;
  if (planner_op_block (name, &len) >= 0)
    return g_strndup (name, len);
  const char *dot = strchr (name, '.');
  return dot ? g_strndup (name, (gsize)(dot - name)) : g_strdup (name);
}

static void
rebuild (AppDocumentView *view)
{
  AppCostChart *self = APP_COST_CHART (view);
  g_array_set_size (self->layers, 0);
  PlannerPlan *plan = app_document_view_get_plan (view);
  if (plan)
    {
      PlannerGraph *graph = planner_plan_get_graph (plan);
      guint n_ops = planner_graph_get_n_ops (graph);
      g_autofree guint *layer_of = g_new0 (guint, n_ops);
      for (guint i = 0; i < n_ops; i++)
        {
          g_autofree char *key = layer_key (planner_graph_get_op (graph, i)->name);
          Layer *last = self->layers->len
                            ? &g_array_index (self->layers, Layer, self->layers->len - 1)
                            : NULL;
          if (last == NULL || !g_str_equal (last->name, key))
            {
              Layer layer = { g_steal_pointer (&key), i, 0, 0, 0 };
              g_array_append_val (self->layers, layer);
              last = &g_array_index (self->layers, Layer, self->layers->len - 1);
            }
          last->n_ops++;
          last->compute_s += planner_plan_get_op (plan, i)->compute_time_s;
          layer_of[i] = self->layers->len - 1;
        }
      /* A redistribution is charged to the layer of the op that waits for it. */
      guint n = planner_plan_get_n_redistributions (plan);
      for (guint r = 0; r < n; r++)
        {
          const PlannerRedistribution *red = planner_plan_get_redistribution (plan, r);
          int op = red->consumer >= 0 ? red->consumer
                                      : planner_graph_get_tensor (graph, red->tensor)->producer;
          if (op >= 0)
            g_array_index (self->layers, Layer, layer_of[op]).comm_s += red->time_s;
        }
    }
  /* Shown while there is a plan: app-window.ui binds "visible" to the window's "has-plan". */
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
bar_geometry (AppCostChart *self, guint i, double *x, double *w)
{
  double width = gtk_widget_get_width (GTK_WIDGET (self)) - 2 * PAD_X;
  double slot = width / MAX (self->layers->len, 1);
  *x = PAD_X + i * slot + MIN (2.0, slot * 0.15);
  *w = MAX (slot - 2 * MIN (2.0, slot * 0.15), 1.0);
}

int
app_cost_chart_layer_at (AppCostChart *self, double x, double y)
{
  g_return_val_if_fail (APP_IS_COST_CHART (self), -1);
  double width = gtk_widget_get_width (GTK_WIDGET (self)) - 2 * PAD_X;
  if (self->layers->len == 0 || x < PAD_X || x >= PAD_X + width)
    return -1;
  return (int) MIN ((x - PAD_X) / (width / self->layers->len), self->layers->len - 1);
}

static void
app_cost_chart_snapshot (GtkWidget *widget, GtkSnapshot *snapshot)
{
  AppCostChart *self = APP_COST_CHART (widget);
  double width = gtk_widget_get_width (widget), height = gtk_widget_get_height (widget);
  if (self->layers->len == 0 || width <= 0 || height <= 0)
    return;
  cairo_t *cr = gtk_snapshot_append_cairo (snapshot, &GRAPHENE_RECT_INIT (0, 0, width, height));
  double max = 0;
  for (guint i = 0; i < self->layers->len; i++)
    {
      const Layer *l = &g_array_index (self->layers, Layer, i);
      max = MAX (max, l->compute_s + l->comm_s);
    }
  AppDocument *doc = app_document_view_get_document (APP_DOCUMENT_VIEW (self));
  int selected_op = doc ? app_document_get_selected_op (doc) : -1;
  GdkRGBA fg;
  gtk_style_context_get_color (gtk_widget_get_style_context (widget), &fg);
  gboolean dark = graphview_palette_is_dark_foreground (fg.red, fg.green, fg.blue);
  /* The graph's palette: its bars keep their contrast on the dark style's background. */
  const GraphviewPalette *pal = graphview_palette_get (dark);
  GraphviewRgb compute = pal->chart_compute, comm = pal->chart_comm;
  double plot = height - PAD_TOP - PAD_BOTTOM;
  for (guint i = 0; i < self->layers->len && max > 0; i++)
    {
      const Layer *l = &g_array_index (self->layers, Layer, i);
      double x, w;
      bar_geometry (self, i, &x, &w);
      double hc = plot * l->compute_s / max, hm = plot * l->comm_s / max;
      double base = height - PAD_BOTTOM;
      gboolean sel = selected_op >= (int) l->first_op && selected_op < (int) (l->first_op + l->n_ops);
      /* Compute in blue, communication stacked on top in orange (GNOME palette). */
      cairo_rectangle (cr, x, base - hc, w, hc);
      cairo_set_source_rgba (cr, compute.r, compute.g, compute.b, sel ? 1.0 : 0.75);
      cairo_fill (cr);
      cairo_rectangle (cr, x, base - hc - hm, w, hm);
      cairo_set_source_rgba (cr, comm.r, comm.g, comm.b, sel ? 1.0 : 0.8);
      cairo_fill (cr);
      if (sel)
        {
          cairo_rectangle (cr, x - 1, PAD_TOP - 2, w + 2, plot + 2);
          cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, 0.6);
          cairo_set_line_width (cr, 1);
          cairo_stroke (cr);
        }
    }
  /* Legend and scale in the top band. */
  g_autofree char *top = planner_format_time (max);
  g_autofree char *legend = g_strdup_printf (_("Per layer: compute (blue) and communication (orange); tallest %s. Click a bar to select its layer."), top);
  cairo_set_source_rgba (cr, fg.red, fg.green, fg.blue, dark ? 0.7 : 0.6);
  /* Set by Pango in the widget's font, so a translation's glyphs come from fallback fonts as
   * in a label. */
  g_autoptr (PangoLayout) layout = gtk_widget_create_pango_layout (widget, legend);
  g_autoptr (PangoFontDescription) font = pango_font_description_from_string ("Sans");
  pango_font_description_set_absolute_size (font, 10 * PANGO_SCALE);
  pango_layout_set_font_description (layout, font);
  pango_layout_set_width (layout, (int) ((width - 2 * PAD_X) * PANGO_SCALE));
  pango_layout_set_ellipsize (layout, PANGO_ELLIPSIZE_END);
  cairo_move_to (cr, PAD_X, 11 - pango_layout_get_baseline (layout) / (double) PANGO_SCALE);
  pango_cairo_show_layout (cr, layout);
  cairo_destroy (cr);
}

static gboolean
on_query_tooltip (GtkWidget *widget, int x, int y, gboolean keyboard, GtkTooltip *tooltip)
{
  AppCostChart *self = APP_COST_CHART (widget);
  int i = app_cost_chart_layer_at (self, x, y);
  if (i < 0)
    return FALSE;
  const Layer *l = &g_array_index (self->layers, Layer, i);
  g_autofree char *compute = planner_format_time (l->compute_s);
  g_autofree char *comm = planner_format_time (l->comm_s);
  g_autofree char *text = g_strdup_printf (_("%s (%u ops)\ncompute %s, communication %s"),
                                           l->name, l->n_ops, compute, comm);
  gtk_tooltip_set_text (tooltip, text);
  return TRUE;
}

void
app_cost_chart_activate_layer (AppCostChart *self, guint i)
{
  g_return_if_fail (APP_IS_COST_CHART (self));
  AppDocument *doc = app_document_view_get_document (APP_DOCUMENT_VIEW (self));
  if (doc == NULL || i >= self->layers->len)
    return;
  app_document_set_selected_op (doc, (int) g_array_index (self->layers, Layer, i).first_op);
}

static void
on_pressed (GtkGestureClick *gesture, int n_press, double x, double y, AppCostChart *self)
{
  int i = app_cost_chart_layer_at (self, x, y);
  if (i >= 0)
    app_cost_chart_activate_layer (self, (guint) i);
}

guint
app_cost_chart_get_n_layers (AppCostChart *self)
{
  g_return_val_if_fail (APP_IS_COST_CHART (self), 0);
  return self->layers->len;
}

const char *
app_cost_chart_get_layer (AppCostChart *self, guint i, guint *first_op, double *compute_s,
                          double *comm_s)
{
  g_return_val_if_fail (APP_IS_COST_CHART (self), NULL);
  g_return_val_if_fail (i < self->layers->len, NULL);
  const Layer *l = &g_array_index (self->layers, Layer, i);
  if (first_op)
    *first_op = l->first_op;
  if (compute_s)
    *compute_s = l->compute_s;
  if (comm_s)
    *comm_s = l->comm_s;
  return l->name;
}

GtkWidget *
app_cost_chart_new (void)
{
  return g_object_new (APP_TYPE_COST_CHART, NULL);
}

static void
app_cost_chart_dispose (GObject *object)
{
  AppCostChart *self = APP_COST_CHART (object);
  g_clear_pointer (&self->layers, g_array_unref);
  G_OBJECT_CLASS (app_cost_chart_parent_class)->dispose (object);
}

static void
app_cost_chart_class_init (AppCostChartClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_cost_chart_dispose;
  widget_class->snapshot = app_cost_chart_snapshot;
  widget_class->query_tooltip = on_query_tooltip;
  APP_DOCUMENT_VIEW_CLASS (klass)->document_changed = rebuild;
  gtk_widget_class_set_css_name (widget_class, "costchart");
}

static void
app_cost_chart_init (AppCostChart *self)
{
  self->layers = g_array_new (FALSE, TRUE, sizeof (Layer));
  g_array_set_clear_func (self->layers, layer_clear);
  gtk_widget_set_has_tooltip (GTK_WIDGET (self), TRUE);
  GtkGesture *click = gtk_gesture_click_new ();
  g_signal_connect (click, "pressed", G_CALLBACK (on_pressed), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (click));
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::plan", G_CALLBACK (rebuild));
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::selected-op",
                            G_CALLBACK (gtk_widget_queue_draw));
}
