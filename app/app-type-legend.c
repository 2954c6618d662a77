#define G_LOG_DOMAIN "app-type-legend"
#include "config.h"

#include "app-type-legend.h"

#include <glib/gi18n.h>

struct _AppTypeLegend
{
  GtkBox parent_instance;

  GraphviewRenderer *renderer;
  GtkWidget *rows; /* a GtkGrid: swatch, type, count */
  GArray *types;   /* PlannerOpType per row */
  GArray *counts;  /* guint per row */
  GPtrArray *swatches;
};

G_DEFINE_FINAL_TYPE (AppTypeLegend, app_type_legend, GTK_TYPE_BOX)

static void
draw_swatch (GtkDrawingArea *area, cairo_t *cr, int width, int height, gpointer data)
{
  AppTypeLegend *self = data;
  guint row = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (area), "row"));
  if (self->renderer == NULL || row >= self->types->len)
    return;
  double rgb[3];
  app_type_legend_get_colour (self, row, rgb);
  cairo_rectangle (cr, 0.5, 0.5, width - 1, height - 1);
  cairo_set_source_rgb (cr, rgb[0], rgb[1], rgb[2]);
  cairo_fill_preserve (cr);
  /* The nodes' own plain border. */
  cairo_set_source_rgb (cr, 0.373, 0.388, 0.408);
  cairo_set_line_width (cr, 1);
  cairo_stroke (cr);
}

static void
clear_rows (AppTypeLegend *self)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (self->rows)))
    gtk_grid_remove (GTK_GRID (self->rows), child);
  g_ptr_array_set_size (self->swatches, 0);
  g_array_set_size (self->types, 0);
  g_array_set_size (self->counts, 0);
}

void
app_type_legend_set_renderer (AppTypeLegend *self, GraphviewRenderer *renderer)
{
  g_return_if_fail (APP_IS_TYPE_LEGEND (self));
  g_return_if_fail (renderer == NULL || GRAPHVIEW_IS_RENDERER (renderer));
  g_set_object (&self->renderer, renderer);
  clear_rows (self);
  if (renderer == NULL)
    return;
  g_autoptr (GArray) counts = NULL;
  g_autoptr (GArray) types = graphview_renderer_dup_op_types (renderer, &counts);
  g_array_append_vals (self->types, types->data, types->len);
  g_array_append_vals (self->counts, counts->data, counts->len);
  for (guint i = 0; i < types->len; i++)
    {
      GtkWidget *swatch = gtk_drawing_area_new ();
      gtk_drawing_area_set_content_width (GTK_DRAWING_AREA (swatch), 16);
      gtk_drawing_area_set_content_height (GTK_DRAWING_AREA (swatch), 11);
      gtk_widget_set_valign (swatch, GTK_ALIGN_CENTER);
      g_object_set_data (G_OBJECT (swatch), "row", GUINT_TO_POINTER (i));
      gtk_drawing_area_set_draw_func (GTK_DRAWING_AREA (swatch), draw_swatch, self, NULL);
      g_ptr_array_add (self->swatches, swatch);
      GtkWidget *name
          = gtk_label_new (planner_op_type_to_string (g_array_index (types, PlannerOpType, i)));
      gtk_label_set_xalign (GTK_LABEL (name), 0);
      g_autofree char *n = g_strdup_printf ("%u", g_array_index (counts, guint, i));
      GtkWidget *count = gtk_label_new (n);
      gtk_label_set_xalign (GTK_LABEL (count), 1);
      gtk_widget_add_css_class (count, "dim-label");
      gtk_widget_add_css_class (count, "numeric");
      gtk_grid_attach (GTK_GRID (self->rows), swatch, 0, (int)i, 1, 1);
      gtk_grid_attach (GTK_GRID (self->rows), name, 1, (int)i, 1, 1);
      gtk_grid_attach (GTK_GRID (self->rows), count, 2, (int)i, 1, 1);
    }
}

guint
app_type_legend_get_n_types (AppTypeLegend *self)
{
  g_return_val_if_fail (APP_IS_TYPE_LEGEND (self), 0);
  return self->types->len;
}

PlannerOpType
app_type_legend_get_op_type (AppTypeLegend *self, guint row, guint *n_ops)
{
  g_return_val_if_fail (APP_IS_TYPE_LEGEND (self), 0);
  g_return_val_if_fail (row < self->types->len, 0);
  if (n_ops)
    *n_ops = g_array_index (self->counts, guint, row);
  return g_array_index (self->types, PlannerOpType, row);
}

GtkWidget *
app_type_legend_get_swatch (AppTypeLegend *self, guint row)
{
  g_return_val_if_fail (APP_IS_TYPE_LEGEND (self), NULL);
  g_return_val_if_fail (row < self->swatches->len, NULL);
  return g_ptr_array_index (self->swatches, row);
}

void
app_type_legend_get_colour (AppTypeLegend *self, guint row, double rgb[3])
{
  g_return_if_fail (APP_IS_TYPE_LEGEND (self));
  g_return_if_fail (row < self->types->len && self->renderer != NULL);
  graphview_renderer_get_op_type_fill (self->renderer,
                                       g_array_index (self->types, PlannerOpType, row), rgb);
}

static void
app_type_legend_dispose (GObject *object)
{
  AppTypeLegend *self = APP_TYPE_LEGEND (object);
  g_clear_object (&self->renderer);
  G_OBJECT_CLASS (app_type_legend_parent_class)->dispose (object);
}

static void
app_type_legend_finalize (GObject *object)
{
  AppTypeLegend *self = APP_TYPE_LEGEND (object);
  g_array_unref (self->types);
  g_array_unref (self->counts);
  g_ptr_array_unref (self->swatches);
  G_OBJECT_CLASS (app_type_legend_parent_class)->finalize (object);
}

static void
app_type_legend_class_init (AppTypeLegendClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = app_type_legend_dispose;
  G_OBJECT_CLASS (klass)->finalize = app_type_legend_finalize;
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "typelegend");
}

static void
app_type_legend_init (AppTypeLegend *self)
{
  self->types = g_array_new (FALSE, FALSE, sizeof (PlannerOpType));
  self->counts = g_array_new (FALSE, FALSE, sizeof (guint));
  self->swatches = g_ptr_array_new ();
  gtk_orientable_set_orientation (GTK_ORIENTABLE (self), GTK_ORIENTATION_VERTICAL);
  gtk_box_set_spacing (GTK_BOX (self), 4);
  gtk_widget_add_css_class (GTK_WIDGET (self), "card");
  GtkWidget *title = gtk_label_new (_ ("Op types"));
  gtk_label_set_xalign (GTK_LABEL (title), 0);
  gtk_widget_add_css_class (title, "heading");
  gtk_box_append (GTK_BOX (self), title);
  self->rows = gtk_grid_new ();
  gtk_grid_set_column_spacing (GTK_GRID (self->rows), 6);
  gtk_grid_set_row_spacing (GTK_GRID (self->rows), 2);
  gtk_box_append (GTK_BOX (self), self->rows);
  gtk_widget_set_margin_start (GTK_WIDGET (self), 0);
}

GtkWidget *
app_type_legend_new (void)
{
  return g_object_new (APP_TYPE_TYPE_LEGEND, NULL);
}
