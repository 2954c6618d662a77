#define G_LOG_DOMAIN "graphview-stages"

#include "config.h"

#include <math.h>
#include <pango/pangocairo.h>

#include "graphview-private.h"
#include "graphview-stages.h"

/* Pipeline stages as bands behind the graph (graphview-stages.h). */

struct _GraphviewStages
{
  guint p, n_chunks, n_ops;
  guint *op_chunk;
  char **labels; /* per chunk */
  double gutter;

  /* The placement, for one layout. */
  GraphviewLayout *layout;
  GraphviewStageBand *bands; /* per chunk */
};

/* Space between the layout and the labels, and around them. */
#define GUTTER_PAD 12.0
/* Above the first band's items and below the last's. */
#define BAND_PAD 8.0
/* At most this many device ranges in a label; more are counted. */
#define MAX_RANGES 4

/* GNOME's palette, one hue a stage (repeating): tints at low alpha read on light and dark
 * backgrounds alike. */
static const double stage_colours[][3] = {
  { 0.21, 0.52, 0.89 }, { 0.18, 0.76, 0.49 }, { 0.96, 0.47, 0.00 }, { 0.57, 0.25, 0.68 },
  { 0.75, 0.11, 0.16 }, { 0.13, 0.63, 0.67 }, { 0.80, 0.62, 0.00 }, { 0.53, 0.39, 0.25 },
};

char *
graphview_stages_format_devices (const guint64 *ids, guint64 n)
{
  g_return_val_if_fail (ids != NULL || n == 0, NULL);
  GString *s = g_string_new (NULL);
  guint ranges = 0;
  for (guint64 i = 0; i < n;)
    {
      guint64 j = i;
      while (j + 1 < n && ids[j + 1] == ids[j] + 1)
        j++;
      if (++ranges > MAX_RANGES)
        {
          g_string_append_printf (s, ",… (%" G_GUINT64_FORMAT ")", n);
          break;
        }
      if (s->len)
        g_string_append_c (s, ',');
      if (j > i)
        g_string_append_printf (s, "%" G_GUINT64_FORMAT "-%" G_GUINT64_FORMAT, ids[i], ids[j]);
      else
        g_string_append_printf (s, "%" G_GUINT64_FORMAT, ids[i]);
      i = j + 1;
    }
  return g_string_free (s, FALSE);
}

GraphviewStages *
graphview_stages_new (PlannerPlan *plan, const PlannerPipeline *pipeline)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_return_val_if_fail (pipeline != NULL && pipeline->n_chunks > 0, NULL);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  GraphviewStages *self = g_new0 (GraphviewStages, 1);
  self->p = pipeline->p;
  self->n_chunks = pipeline->n_chunks;
  self->n_ops = planner_graph_get_n_ops (planner_plan_get_graph (plan));
  self->op_chunk = g_new (guint, MAX (self->n_ops, 1));
  for (guint i = 0; i < self->n_ops; i++)
    self->op_chunk[i] = (guint)pipeline->op_chunk[i];
  self->labels = g_new0 (char *, self->n_chunks + 1);
  self->bands = g_new0 (GraphviewStageBand, self->n_chunks);
  glong longest = 0;
  for (guint c = 0; c < self->n_chunks; c++)
    {
      guint stage = c % self->p;
      guint64 n = 0;
      g_autofree guint64 *ids = planner_pipeline_stage_devices (pipeline, mesh, stage, &n);
      g_autofree char *devices = graphview_stages_format_devices (ids, n);
      int first = pipeline->chunk_first[c], last = pipeline->chunk_last[c];
      g_autofree char *layers = first == last ? g_strdup_printf ("layer %d", first)
                                              : g_strdup_printf ("layers %d-%d", first, last);
      self->labels[c] = g_strdup_printf ("stage %u · %s · devices %s", stage, layers, devices);
      longest = MAX (longest, g_utf8_strlen (self->labels[c], -1));
      self->bands[c].chunk = c;
      self->bands[c].stage = stage;
      self->bands[c].label = self->labels[c];
    }
  self->gutter = 2 * GUTTER_PAD + longest * GRAPHVIEW_FONT_SIZE * GRAPHVIEW_CHAR_ADVANCE;
  return self;
}

void
graphview_stages_free (GraphviewStages *self)
{
  if (self == NULL)
    return;
  g_clear_pointer (&self->layout, graphview_layout_unref);
  g_strfreev (self->labels);
  g_free (self->op_chunk);
  g_free (self->bands);
  g_free (self);
}

guint
graphview_stages_get_n_stages (GraphviewStages *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->p;
}

guint
graphview_stages_get_n_chunks (GraphviewStages *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->n_chunks;
}

guint
graphview_stages_get_op_chunk (GraphviewStages *self, guint op)
{
  g_return_val_if_fail (self != NULL && op < self->n_ops, 0);
  return self->op_chunk[op];
}

double
graphview_stages_get_gutter (GraphviewStages *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->gutter;
}

void
graphview_stages_get_item_chunks (GraphviewStages *self, GraphviewModel *model, guint item,
                                  guint *first, guint *last)
{
  g_return_if_fail (self != NULL && GRAPHVIEW_IS_MODEL (model));
  g_return_if_fail (item < graphview_model_get_n_items (model));
  const GraphviewItem *it = graphview_model_get_item (model, item);
  /* Chunks follow the layers, so they never decrease along the ops of a block node. */
  guint a = self->op_chunk[it->first_op], b = a;
  for (guint k = 0; k < it->n_ops; k++)
    {
      a = MIN (a, self->op_chunk[it->first_op + k]);
      b = MAX (b, self->op_chunk[it->first_op + k]);
    }
  if (first)
    *first = a;
  if (last)
    *last = b;
}

void
graphview_stages_get_item_part (GraphviewStages *self, GraphviewModel *model,
                                GraphviewLayout *layout, guint item, guint chunk,
                                GraphviewRect *part)
{
  g_return_if_fail (self != NULL && GRAPHVIEW_IS_MODEL (model) && layout != NULL);
  g_return_if_fail (part != NULL);
  const GraphviewItem *it = graphview_model_get_item (model, item);
  const GraphviewRect *r = graphview_layout_get_item_rect (layout, item);
  guint before = 0, in = 0;
  for (guint k = 0; k < it->n_ops; k++)
    {
      guint c = self->op_chunk[it->first_op + k];
      before += c < chunk;
      in += c == chunk;
    }
  double n = MAX (it->n_ops, 1);
  *part = (GraphviewRect){ r->x, r->y + r->height * before / n, r->width, r->height * in / n };
}

char *
graphview_stages_dup_item_text (GraphviewStages *self, GraphviewModel *model, guint item)
{
  g_return_val_if_fail (self != NULL && GRAPHVIEW_IS_MODEL (model), NULL);
  g_return_val_if_fail (item < graphview_model_get_n_items (model), NULL);
  guint first, last;
  graphview_stages_get_item_chunks (self, model, item, &first, &last);
  GString *s = g_string_new (NULL);
  for (guint c = first; c <= last; c++)
    g_string_append_printf (s, "%s%s", c > first ? "\n" : "", self->labels[c]);
  return g_string_free (s, FALSE);
}

/* Widens chunk @c's extent [top, bottom] to hold @y0 .. @y1. */
static void
extend (double *top, double *bottom, guint c, double y0, double y1)
{
  top[c] = MIN (top[c], y0);
  bottom[c] = MAX (bottom[c], y1);
}

void
graphview_stages_place (GraphviewStages *self, GraphviewModel *model, GraphviewLayout *layout)
{
  g_return_if_fail (self != NULL && GRAPHVIEW_IS_MODEL (model) && layout != NULL);
  if (self->layout == layout)
    return;
  g_clear_pointer (&self->layout, graphview_layout_unref);
  self->layout = graphview_layout_ref (layout);

  guint C = self->n_chunks;
  g_autofree double *top = g_new (double, C);
  g_autofree double *bottom = g_new (double, C);
  for (guint c = 0; c < C; c++)
    {
      top[c] = G_MAXDOUBLE;
      bottom[c] = -G_MAXDOUBLE;
    }
  guint n_items = MIN (graphview_model_get_n_items (model), graphview_layout_get_n_items (layout));
  for (guint i = 0; i < n_items; i++)
    {
      guint first, last;
      graphview_stages_get_item_chunks (self, model, i, &first, &last);
      for (guint c = first; c <= last; c++)
        {
          GraphviewRect part;
          graphview_stages_get_item_part (self, model, layout, i, c, &part);
          if (part.height > 0)
            extend (top, bottom, c, part.y, part.y + part.height);
        }
    }
  /* An unfolded block's frame (and its title) goes with the chunk of its layer. */
  for (guint i = 0; i < graphview_layout_get_n_frames (layout); i++)
    {
      const GraphviewFrame *frame = graphview_layout_get_frame (layout, i);
      if (frame->run < 0 || (guint)frame->run >= graphview_model_get_n_runs (model))
        continue;
      const GraphviewRun *run = graphview_model_get_run (model, (guint)frame->run);
      guint op = run->first_op + frame->block * run->ops_per_block;
      if (op < self->n_ops)
        extend (top, bottom, self->op_chunk[op], frame->rect.y, frame->rect.y + frame->rect.height);
    }

  /* Neighbours meet halfway across the gap between them; bands that overlap (a layout that
   * does not keep the layers in order) keep their extents, so every item stays inside its
   * own band. */
  for (guint c = 0; c + 1 < C; c++)
    if (bottom[c] <= top[c + 1])
      bottom[c] = top[c + 1] = (bottom[c] + top[c + 1]) / 2;
  top[0] -= BAND_PAD;
  bottom[C - 1] += BAND_PAD;

  double width = 0;
  graphview_layout_get_bounds (layout, &width, NULL);
  for (guint c = 0; c < C; c++)
    {
      if (top[c] > bottom[c]) /* a chunk with no item: none in a finished plan */
        top[c] = bottom[c] = 0;
      self->bands[c].rect = (GraphviewRect){ 0, top[c], width + self->gutter, bottom[c] - top[c] };
    }
}

guint
graphview_stages_get_n_bands (GraphviewStages *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->layout ? self->n_chunks : 0;
}

const GraphviewStageBand *
graphview_stages_get_band (GraphviewStages *self, guint band)
{
  g_return_val_if_fail (self != NULL && self->layout != NULL && band < self->n_chunks, NULL);
  return &self->bands[band];
}

void
graphview_stages_draw (GraphviewStages *self, cairo_t *cr, double scale,
                       const GraphviewRect *visible, PangoLayout *layout, gboolean dark)
{
  g_return_if_fail (self != NULL && cr != NULL && scale > 0 && visible != NULL);
  g_return_if_fail (PANGO_IS_LAYOUT (layout));
  if (self->layout == NULL)
    return;
  double width = 0;
  graphview_layout_get_bounds (self->layout, &width, NULL);
  /* World-size text while op text is readable, else screen-size (as the overview's). */
  double size
      = GRAPHVIEW_FONT_SIZE * scale >= GRAPHVIEW_MIN_TEXT_PX ? GRAPHVIEW_FONT_SIZE : 9.0 / scale;
  cairo_save (cr);
  for (guint c = 0; c < self->n_chunks; c++)
    {
      const GraphviewStageBand *band = &self->bands[c];
      const GraphviewRect *r = &band->rect;
      if (r->height <= 0 || !graphview_rect_intersects (r, visible))
        continue;
      const double *rgb = stage_colours[band->stage % G_N_ELEMENTS (stage_colours)];
      cairo_rectangle (cr, r->x, r->y, r->width, r->height);
      cairo_set_source_rgba (cr, rgb[0], rgb[1], rgb[2], 0.10);
      cairo_fill (cr);
      /* The gutter a little stronger, and a bar at its edge: the label's column. */
      cairo_rectangle (cr, width, r->y, r->width - width, r->height);
      cairo_set_source_rgba (cr, rgb[0], rgb[1], rgb[2], 0.10);
      cairo_fill (cr);
      cairo_rectangle (cr, width, r->y, MAX (3.0, 3.0 / scale), r->height);
      cairo_set_source_rgba (cr, rgb[0], rgb[1], rgb[2], 0.85);
      cairo_fill (cr);
      if (c > 0)
        {
          double dash = 6.0 / scale;
          cairo_set_dash (cr, &dash, 1, 0);
          cairo_set_line_width (cr, 1.0 / scale);
          cairo_move_to (cr, r->x, r->y);
          cairo_line_to (cr, r->x + r->width, r->y);
          cairo_set_source_rgba (cr, rgb[0], rgb[1], rgb[2], 0.7);
          cairo_stroke (cr);
          cairo_set_dash (cr, NULL, 0, 0);
        }
      if (r->height < size * 1.3)
        continue;
      /* At the band's top, or its middle when it is shorter than two lines. */
      double baseline = r->height >= 2.5 * size ? r->y + 4.0 / scale + size
                                                : r->y + r->height / 2 + size * 0.35;
      g_autoptr (PangoFontDescription) font = pango_font_description_from_string ("Sans Bold");
      pango_font_description_set_absolute_size (font, size * PANGO_SCALE);
      pango_layout_set_font_description (layout, font);
      pango_layout_set_text (layout, band->label, -1);
      /* Layout sizes come from character counts: a label wider than its estimate shrinks. */
      PangoRectangle ext;
      pango_layout_get_extents (layout, NULL, &ext);
      double advance = (double)ext.width / PANGO_SCALE;
      double room = self->gutter - 2 * GUTTER_PAD;
      if (size == GRAPHVIEW_FONT_SIZE && advance > room)
        {
          pango_font_description_set_absolute_size (font, size * room / advance * PANGO_SCALE);
          pango_layout_set_font_description (layout, font);
        }
      if (dark)
        cairo_set_source_rgb (cr, 0.5 + rgb[0] * 0.5, 0.5 + rgb[1] * 0.5, 0.5 + rgb[2] * 0.5);
      else
        cairo_set_source_rgb (cr, rgb[0] * 0.6, rgb[1] * 0.6, rgb[2] * 0.6);
      cairo_move_to (cr, width + GUTTER_PAD,
                     baseline - (double)pango_layout_get_baseline (layout) / PANGO_SCALE);
      pango_cairo_show_layout (cr, layout);
    }
  cairo_restore (cr);
}
