#define G_LOG_DOMAIN "graphview-renderer"

#include "config.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <gio/gio.h>
#include <glib/gi18n-lib.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <string.h>

#include "graphview-private.h"
#include "graphview-renderer.h"

#define N_COST_BUCKETS 8
#define N_CATEGORIES 7
#define BADGE_FONT_SIZE 9.0

typedef GraphviewRgb Rgb;

struct _GraphviewRenderer
{
  GObject parent_instance;

  GraphviewModel *model;
  PlannerGraph *graph;
  GraphviewLayout *layout;
  /* What is drawn of the plan, the comparison, the step, the trial and the search:
   * graphview-view-model.h. The renderer only draws it. */
  GraphviewViewModel *vm;
  int hover;
  int selected;
  gboolean legend;
  const GraphviewPalette *palette;
  /* Text is set with Pango from this font map (the widget's, or Pango's default), so that
   * fontconfig's fallback finds glyphs the first font lacks, as in GTK labels. */
  PangoFontMap *font_map;
  PangoLanguage *language;
  guint missing_glyphs;
  guint n_ops;

  /* The title files get (NULL: none). */
  char *title;

  /* The plan's pipeline stages (NULL without a pp axis), drawn as bands when shown. */
  GraphviewStages *stages;
  gboolean stages_pending; /* the plan's own pipeline is still to be made */
  gboolean show_stages;
};

G_DEFINE_FINAL_TYPE (GraphviewRenderer, graphview_renderer, G_TYPE_OBJECT)

/* Colours ---------------------------------------------------------------------------------- */

static void
set_rgb (cairo_t *cr, Rgb c)
{
  cairo_set_source_rgb (cr, c.r, c.g, c.b);
}

static Rgb
mix (Rgb a, Rgb b, double t)
{
  return (Rgb){ a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t };
}

static Rgb
cost_colour (const GraphviewPalette *pal, double t)
{
  return t < 0.5 ? mix (pal->cost_low, pal->cost_mid, t * 2)
                 : mix (pal->cost_mid, pal->cost_high, (t - 0.5) * 2);
}

/* Device pixels. */
static double
cost_width (double t)
{
  return 1.8 + 4.0 * t;
}

static Rgb
split_colour (const GraphviewPalette *pal, guint splits)
{
  if (splits <= 1)
    return pal->splits[0];
  double level = MIN (log2 ((double)splits), 4.0);
  guint lo = (guint)floor (level);
  if (lo >= 4)
    return pal->splits[4];
  return mix (pal->splits[lo], pal->splits[lo + 1], level - lo);
}

static guint
op_category (PlannerOpType type)
{
  switch (type)
    {
    case PLANNER_OP_MATMUL:
    case PLANNER_OP_BATCH_MATMUL:
    case PLANNER_OP_EINSUM:
    case PLANNER_OP_CONV2D:
      return 0;
    case PLANNER_OP_SDPA:
    case PLANNER_OP_SOFTMAX:
    case PLANNER_OP_ROTARY_EMBEDDING:
      return 1;
    case PLANNER_OP_LAYER_NORM:
    case PLANNER_OP_RMS_NORM:
      return 2;
    case PLANNER_OP_ADD:
    case PLANNER_OP_SUB:
    case PLANNER_OP_MUL:
    case PLANNER_OP_DIV:
    case PLANNER_OP_RELU:
    case PLANNER_OP_GELU:
    case PLANNER_OP_SILU:
    case PLANNER_OP_TANH:
    case PLANNER_OP_EXP:
    case PLANNER_OP_NEG:
    case PLANNER_OP_CAST:
    case PLANNER_OP_DROPOUT:
      return 3;
    case PLANNER_OP_RESHAPE:
    case PLANNER_OP_TRANSPOSE:
    case PLANNER_OP_CONCAT:
    case PLANNER_OP_SPLIT:
    case PLANNER_OP_SLICE:
      return 4;
    case PLANNER_OP_EMBEDDING:
    case PLANNER_OP_CROSS_ENTROPY:
      return 5;
    default:
      return 6;
    }
}

/* The plan's state, through the view model ------------------------------------------------- */

static PlannerPlan *
plan_of (GraphviewRenderer *self)
{
  return graphview_view_model_get_plan (self->vm);
}

/* 0..1 on a log scale between the plan's cheapest and dearest redistribution. */
static double
cost_level (GraphviewRenderer *self, double cost)
{
  return graphview_view_model_cost_level (self->vm, cost);
}

/* The object ------------------------------------------------------------------------------- */

static void
graphview_renderer_finalize (GObject *object)
{
  GraphviewRenderer *self = GRAPHVIEW_RENDERER (object);
  g_clear_pointer (&self->title, g_free);
  g_clear_pointer (&self->stages, graphview_stages_free);
  g_clear_pointer (&self->layout, graphview_layout_unref);
  g_clear_object (&self->vm);
  g_clear_object (&self->model);
  g_clear_object (&self->font_map);
  G_OBJECT_CLASS (graphview_renderer_parent_class)->finalize (object);
}

static void
graphview_renderer_class_init (GraphviewRendererClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = graphview_renderer_finalize;
}

static void
graphview_renderer_init (GraphviewRenderer *self)
{
  self->hover = -1;
  self->selected = -1;
  self->legend = TRUE;
  self->show_stages = TRUE;
  self->palette = graphview_palette_get (FALSE);
}

GraphviewRenderer *
graphview_renderer_new (GraphviewModel *model)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (model), NULL);
  GraphviewRenderer *self = g_object_new (GRAPHVIEW_TYPE_RENDERER, NULL);
  self->model = g_object_ref (model);
  self->graph = graphview_model_get_graph (model);
  self->n_ops = planner_graph_get_n_ops (self->graph);
  self->vm = graphview_view_model_new (model);
  return self;
}

GraphviewViewModel *
graphview_renderer_get_view_model (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return self->vm;
}

GraphviewModel *
graphview_renderer_get_model (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return self->model;
}

void
graphview_renderer_set_layout (GraphviewRenderer *self, GraphviewLayout *layout)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  if (layout)
    graphview_layout_ref (layout);
  g_clear_pointer (&self->layout, graphview_layout_unref);
  self->layout = layout;
}

GraphviewLayout *
graphview_renderer_get_layout (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return self->layout;
}

gboolean
graphview_renderer_is_ready (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), FALSE);
  return self->layout != NULL
         && graphview_layout_get_serial (self->layout) == graphview_model_get_serial (self->model)
         && graphview_layout_get_n_items (self->layout)
                == graphview_model_get_n_items (self->model);
}

void
graphview_renderer_set_plan (GraphviewRenderer *self, PlannerPlan *plan)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_return_if_fail (plan == NULL || PLANNER_IS_PLAN (plan));
  g_return_if_fail (plan == NULL
                    || planner_graph_get_n_ops (planner_plan_get_graph (plan)) == self->n_ops);
  graphview_view_model_set_plan (self->vm, plan);
  graphview_renderer_set_pipeline (self, NULL);
}

/* The plan's own pipeline is made when first needed: a caller that has it hands it over
 * before, and nothing is computed twice. */
static void
ensure_stages (GraphviewRenderer *self)
{
  if (!self->stages_pending)
    return;
  self->stages_pending = FALSE;
  /* A finished plan always has its pipeline (or none without a pp axis). */
  g_autoptr (PlannerPipeline) own = planner_pipeline_new (plan_of (self), FALSE, NULL);
  if (own != NULL)
    self->stages = graphview_stages_new (plan_of (self), own);
}

void
graphview_renderer_set_pipeline (GraphviewRenderer *self, const PlannerPipeline *pipeline)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_clear_pointer (&self->stages, graphview_stages_free);
  PlannerPlan *plan = plan_of (self);
  self->stages_pending = plan != NULL && pipeline == NULL;
  if (plan != NULL && pipeline != NULL)
    self->stages = graphview_stages_new (plan, pipeline);
}

GraphviewStages *
graphview_renderer_get_stages (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  ensure_stages (self);
  if (self->stages && graphview_renderer_is_ready (self))
    graphview_stages_place (self->stages, self->model, self->layout);
  return self->stages;
}

void
graphview_renderer_set_show_stages (GraphviewRenderer *self, gboolean show)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  self->show_stages = show;
}

void
graphview_renderer_get_bounds (GraphviewRenderer *self, double *width, double *height)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  double w = 0, h = 0;
  if (self->layout)
    graphview_layout_get_bounds (self->layout, &w, &h);
  if (self->show_stages && graphview_renderer_get_stages (self))
    w += graphview_stages_get_gutter (self->stages);
  if (width)
    *width = w;
  if (height)
    *height = h;
}

PlannerPlan *
graphview_renderer_get_plan (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return plan_of (self);
}

void
graphview_renderer_set_compare_plan (GraphviewRenderer *self, PlannerPlan *other)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  graphview_view_model_set_compare_plan (self->vm, other);
}

void
graphview_renderer_set_trial (GraphviewRenderer *self, const double *measured_s,
                              const double *estimated_s, const double *rel_error,
                              double tolerance)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  graphview_view_model_set_trial (self->vm, measured_s, estimated_s, rel_error, tolerance);
}

char *
graphview_renderer_dup_trial_badge (GraphviewRenderer *self, guint item, gboolean *ok)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return graphview_view_model_dup_trial_badge (self->vm, item, ok);
}

void
graphview_renderer_set_step (GraphviewRenderer *self, int step)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  graphview_view_model_set_step (self->vm, step);
}

int
graphview_renderer_get_step (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), -1);
  return graphview_view_model_get_step (self->vm);
}

void
graphview_renderer_set_hover (GraphviewRenderer *self, int item)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  self->hover = item;
}

void
graphview_renderer_set_dark (GraphviewRenderer *self, gboolean dark)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  self->palette = graphview_palette_get (dark);
}

const GraphviewPalette *
graphview_renderer_get_palette (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return self->palette;
}

void
graphview_renderer_set_pango_context (GraphviewRenderer *self, PangoContext *context)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_return_if_fail (context == NULL || PANGO_IS_CONTEXT (context));
  PangoFontMap *map = context ? pango_context_get_font_map (context) : NULL;
  g_set_object (&self->font_map, map);
  self->language = context ? pango_context_get_language (context) : NULL;
}

guint
graphview_renderer_take_missing_glyphs (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), 0);
  guint n = self->missing_glyphs;
  self->missing_glyphs = 0;
  return n;
}

void
graphview_renderer_set_selected (GraphviewRenderer *self, int item)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  self->selected = item;
}

void
graphview_renderer_set_show_legend (GraphviewRenderer *self, gboolean show)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  self->legend = show;
}

void
graphview_renderer_get_op_type_fill (GraphviewRenderer *self, PlannerOpType type, double rgb[3])
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_return_if_fail (rgb != NULL);
  /* The colour draw_op_nodes() fills the op's node with. */
  Rgb c = self->palette->category_fill[op_category (type)];
  rgb[0] = c.r;
  rgb[1] = c.g;
  rgb[2] = c.b;
}

static int
compare_types (gconstpointer a, gconstpointer b)
{
  PlannerOpType ta = *(const PlannerOpType *)a, tb = *(const PlannerOpType *)b;
  guint ca = op_category (ta), cb = op_category (tb);
  if (ca != cb)
    return ca < cb ? -1 : 1;
  return g_strcmp0 (planner_op_type_to_string (ta), planner_op_type_to_string (tb));
}

GArray *
graphview_renderer_dup_op_types (GraphviewRenderer *self, GArray **counts)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  g_autoptr (GHashTable) seen = g_hash_table_new (NULL, NULL);
  for (guint op = 0; op < self->n_ops; op++)
    {
      gpointer key = GINT_TO_POINTER (planner_graph_get_op (self->graph, op)->type);
      g_hash_table_insert (seen, key,
                           GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (seen, key)) + 1));
    }
  GArray *types = g_array_new (FALSE, FALSE, sizeof (PlannerOpType));
  GHashTableIter iter;
  gpointer key;
  g_hash_table_iter_init (&iter, seen);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      PlannerOpType type = GPOINTER_TO_INT (key);
      g_array_append_val (types, type);
    }
  /* Grouped by the colour they share, then by name. */
  g_array_sort (types, compare_types);
  if (counts)
    {
      *counts = g_array_sized_new (FALSE, FALSE, sizeof (guint), types->len);
      for (guint i = 0; i < types->len; i++)
        {
          guint n = GPOINTER_TO_UINT (g_hash_table_lookup (
              seen, GINT_TO_POINTER (g_array_index (types, PlannerOpType, i))));
          g_array_append_val (*counts, n);
        }
    }
  return types;
}

void
graphview_renderer_set_highlighted_ops (GraphviewRenderer *self, const guint *ops, guint n_ops)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  graphview_view_model_set_highlighted_ops (self->vm, ops, n_ops);
}

gboolean
graphview_renderer_op_is_highlighted (GraphviewRenderer *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), FALSE);
  return graphview_view_model_op_is_highlighted (self->vm, op);
}

gboolean
graphview_renderer_item_is_highlighted (GraphviewRenderer *self, guint item)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), FALSE);
  return graphview_view_model_item_is_highlighted (self->vm, item);
}

void
graphview_renderer_set_title (GraphviewRenderer *self, const char *title)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_free (self->title);
  self->title = title && *title ? g_strdup (title) : NULL;
}

const char *
graphview_renderer_get_title (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return self->title;
}

GraphviewStepState
graphview_renderer_get_step_state (GraphviewRenderer *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), GRAPHVIEW_STEP_DECIDED);
  return graphview_view_model_get_step_state (self->vm, op);
}

gboolean
graphview_renderer_op_differs (GraphviewRenderer *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), FALSE);
  return graphview_view_model_op_differs (self->vm, op);
}

double
graphview_renderer_get_edge_cost (GraphviewRenderer *self, guint edge, guint64 *bytes)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), 0);
  return graphview_view_model_get_edge_cost (self->vm, edge, bytes);
}

char *
graphview_renderer_dup_edge_badge (GraphviewRenderer *self, guint edge)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return graphview_view_model_dup_edge_badge (self->vm, edge);
}

char *
graphview_renderer_dup_item_summary (GraphviewRenderer *self, guint item)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  return graphview_view_model_dup_item_summary (self->vm, item);
}

/* Text ------------------------------------------------------------------------------------- */

/* One Pango layout for the text of a draw call, made on its first text (zoomed out, none is
 * drawn) in the user space @cr has then, which all the call's text shares. */
typedef struct
{
  GraphviewRenderer *self;
  cairo_t *cr;
  PangoLayout *layout;
  PangoFontDescription *font;
} Pen;

static void
pen_init (Pen *p, GraphviewRenderer *self, cairo_t *cr)
{
  p->self = self;
  p->cr = cr;
  p->layout = NULL;
  p->font = NULL;
}

static void
pen_ensure (Pen *p)
{
  if (p->layout)
    return;
  GraphviewRenderer *self = p->self;
  cairo_t *cr = p->cr;
  PangoFontMap *map = self->font_map ? self->font_map : pango_cairo_font_map_get_default ();
  PangoContext *context = pango_font_map_create_context (map);
  if (self->language)
    pango_context_set_language (context, self->language);
  /* Unhinted metrics and free glyph positions: labels keep their width at every zoom. */
  cairo_font_options_t *options = cairo_font_options_create ();
  cairo_font_options_set_hint_metrics (options, CAIRO_HINT_METRICS_OFF);
  pango_cairo_context_set_font_options (context, options);
  cairo_font_options_destroy (options);
  pango_context_set_round_glyph_positions (context, FALSE);
  pango_cairo_update_context (cr, context);
  p->layout = pango_layout_new (context);
  g_object_unref (context);
  p->font = pango_font_description_from_string ("Sans");
}

static void
pen_clear (Pen *p)
{
  g_clear_object (&p->layout);
  g_clear_pointer (&p->font, pango_font_description_free);
}

/* Sets @text at @size user units; returns its advance width, and through @baseline how far
 * its baseline is below its top. */
static double
pen_set (Pen *p, const char *text, double size, gboolean bold, double *baseline)
{
  pen_ensure (p);
  pango_font_description_set_weight (p->font, bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
  pango_font_description_set_absolute_size (p->font, size * PANGO_SCALE);
  pango_layout_set_font_description (p->layout, p->font);
  pango_layout_set_text (p->layout, text, -1);
  PangoRectangle logical;
  pango_layout_get_extents (p->layout, NULL, &logical);
  if (baseline)
    *baseline = (double)pango_layout_get_baseline (p->layout) / PANGO_SCALE;
  return (double)logical.width / PANGO_SCALE;
}

/* Draws the text set last with its baseline at (x, y), in the current source colour. */
static void
pen_show (Pen *p, double x, double y, double baseline)
{
  /* Characters no font on the system has are drawn as hex boxes; counted for the caller
   * (graphview_renderer_take_missing_glyphs). */
  p->self->missing_glyphs += pango_layout_get_unknown_glyphs_count (p->layout);
  cairo_move_to (p->cr, x, y - baseline);
  pango_cairo_show_layout (p->cr, p->layout);
}

/* @text at baseline (x, y) in the current source colour; returns its advance width. */
static double
pen_draw (Pen *p, const char *text, double x, double y, double size, gboolean bold)
{
  double baseline;
  double w = pen_set (p, text, size, bold, &baseline);
  pen_show (p, x, y, baseline);
  return w;
}

/* Drawing helpers -------------------------------------------------------------------------- */

typedef struct
{
  GraphviewRenderer *self;
  cairo_t *cr;
  const GraphviewPalette *pal;
  Pen pen;
  double scale;
  GraphviewRect visible; /* world */
  gboolean text;
  gboolean matrices;
  gboolean shapes;
} Frame;

static void
frame_init (Frame *f, GraphviewRenderer *self, cairo_t *cr, const GraphviewViewport *vp)
{
  f->self = self;
  f->cr = cr;
  f->pal = self->palette;
  pen_init (&f->pen, self, cr);
  f->scale = vp->scale;
  /* A margin so that strokes and badges at the border are not cut. */
  double margin = 40 / vp->scale;
  f->visible = (GraphviewRect){ vp->x - margin, vp->y - margin, vp->width / vp->scale + 2 * margin,
                                vp->height / vp->scale + 2 * margin };
  f->text = GRAPHVIEW_FONT_SIZE * vp->scale >= GRAPHVIEW_MIN_TEXT_PX;
  f->matrices = GRAPHVIEW_CELL * vp->scale >= GRAPHVIEW_MIN_CELL_PX;
  f->shapes = f->text && vp->scale >= 1.25;
}

/* Saves @cr and draws in world coordinates from here on; FALSE (and nothing saved) before
 * the layout arrives. */
static gboolean
frame_begin (Frame *f, GraphviewRenderer *self, cairo_t *cr, const GraphviewViewport *vp)
{
  if (!graphview_renderer_is_ready (self))
    return FALSE;
  cairo_save (cr);
  cairo_scale (cr, vp->scale, vp->scale);
  cairo_translate (cr, -vp->x, -vp->y);
  frame_init (f, self, cr, vp);
  return TRUE;
}

static void
frame_end (Frame *f)
{
  pen_clear (&f->pen);
  cairo_restore (f->cr);
}

static void
rounded_rect (cairo_t *cr, double x, double y, double w, double h, double r)
{
  r = MIN (r, MIN (w, h) / 2);
  cairo_new_sub_path (cr);
  cairo_arc (cr, x + w - r, y + r, r, -G_PI / 2, 0);
  cairo_arc (cr, x + w - r, y + h - r, r, 0, G_PI / 2);
  cairo_arc (cr, x + r, y + h - r, r, G_PI / 2, G_PI);
  cairo_arc (cr, x + r, y + r, r, G_PI, 3 * G_PI / 2);
  cairo_close_path (cr);
}

/* Text at baseline (x, y) in at most @max_w world units: shrunk, then cut. */
static void
show_text_fit (Pen *p, const char *text, double x, double y, double max_w, double size,
               gboolean bold)
{
  cairo_t *cr = p->cr;
  double baseline;
  double advance = pen_set (p, text, size, bold, &baseline);
  gboolean clip = FALSE;
  if (advance > max_w && max_w > 0)
    {
      double shrink = MAX (max_w / advance, 0.7);
      pen_set (p, text, size * shrink, bold, &baseline);
      clip = advance * shrink > max_w;
    }
  if (clip)
    {
      cairo_save (cr);
      cairo_rectangle (cr, x, y - size * 1.2, max_w, size * 1.6);
      cairo_clip (cr);
    }
  pen_show (p, x, y, baseline);
  if (clip)
    cairo_restore (cr);
}

static const GraphviewRect *
item_rect (Frame *f, guint item)
{
  return graphview_layout_get_item_rect (f->self->layout, item);
}

static gboolean
item_visible (Frame *f, guint item)
{
  return graphview_rect_intersects (item_rect (f, item), &f->visible);
}

/* Moves @i to the first item from @i on that the frame shows; FALSE when none is left. */
static gboolean
seek_visible_item (Frame *f, guint *i)
{
  guint n = graphview_model_get_n_items (f->self->model);
  for (; *i < n; (*i)++)
    if (item_visible (f, *i))
      return TRUE;
  return FALSE;
}

/* @straight: a line from end to end, for zoom levels where curves cannot be told apart. */
static void
edge_path (cairo_t *cr, GraphviewLayout *layout, guint edge, gboolean straight)
{
  guint n = 0;
  const double *p = graphview_layout_get_edge_points (layout, edge, &n);
  if (p == NULL || n < 2)
    return;
  cairo_move_to (cr, p[0], p[1]);
  if (straight)
    {
      cairo_line_to (cr, p[2 * (n - 1)], p[2 * (n - 1) + 1]);
      return;
    }
  for (guint i = 1; i + 2 < n; i += 3)
    cairo_curve_to (cr, p[2 * i], p[2 * i + 1], p[2 * i + 2], p[2 * i + 3], p[2 * i + 4],
                    p[2 * i + 5]);
}

static void
arrow_path (cairo_t *cr, GraphviewLayout *layout, guint edge, double size)
{
  guint n = 0;
  const double *p = graphview_layout_get_edge_points (layout, edge, &n);
  if (p == NULL || n < 2)
    return;
  double x = p[2 * (n - 1)], y = p[2 * (n - 1) + 1];
  double dx = x - p[2 * (n - 2)], dy = y - p[2 * (n - 2) + 1];
  double len = hypot (dx, dy);
  if (len < 1e-6)
    dx = 0, dy = 1, len = 1;
  dx /= len, dy /= len;
  cairo_move_to (cr, x, y);
  cairo_line_to (cr, x - size * dx + size * 0.5 * dy, y - size * dy - size * 0.5 * dx);
  cairo_line_to (cr, x - size * dx - size * 0.5 * dy, y - size * dy + size * 0.5 * dx);
  cairo_close_path (cr);
}

static void
draw_badge (Frame *f, const char *text, double cx, double cy, Rgb colour)
{
  cairo_t *cr = f->cr;
  double baseline;
  double w = pen_set (&f->pen, text, BADGE_FONT_SIZE, FALSE, &baseline) + 8;
  double h = BADGE_FONT_SIZE + 6;
  rounded_rect (cr, cx - w / 2, cy - h / 2, w, h, 4);
  cairo_set_source_rgba (cr, f->pal->badge_fill.r, f->pal->badge_fill.g, f->pal->badge_fill.b,
                         0.95);
  cairo_fill_preserve (cr);
  set_rgb (cr, colour);
  cairo_set_line_width (cr, 1.2 / f->scale);
  cairo_stroke (cr);
  set_rgb (cr, f->pal->text);
  pen_show (&f->pen, cx - w / 2 + 4, cy + BADGE_FONT_SIZE * 0.35, baseline);
}

/* The static layer ------------------------------------------------------------------------- */

static void
draw_frames (Frame *f)
{
  cairo_t *cr = f->cr;
  GraphviewLayout *layout = f->self->layout;
  for (guint i = 0; i < graphview_layout_get_n_frames (layout); i++)
    {
      const GraphviewFrame *frame = graphview_layout_get_frame (layout, i);
      if (!graphview_rect_intersects (&frame->rect, &f->visible))
        continue;
      const GraphviewRect *r = &frame->rect;
      rounded_rect (cr, r->x, r->y, r->width, r->height, 8);
      set_rgb (cr, f->pal->frame_fill);
      cairo_fill_preserve (cr);
      set_rgb (cr, f->pal->frame_line);
      cairo_set_line_width (cr, 1.0 / f->scale);
      cairo_stroke (cr);
      if (f->text && frame->run >= 0)
        {
          g_autofree char *name
              = graphview_model_dup_block_name (f->self->model, frame->run, frame->block);
          set_rgb (cr, f->pal->border);
          show_text_fit (&f->pen, name, r->x + 8, r->y + 16, r->width - 16, GRAPHVIEW_FONT_SIZE,
                         TRUE);
        }
    }
}

static void
draw_edges (Frame *f)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  GraphviewLayout *layout = self->layout;
  guint n = graphview_model_get_n_edges (self->model);

  /* Batched by colour: one stroke per bucket keeps a frame of thousands of edges cheap. */
  GArray *buckets[N_COST_BUCKETS + 1];
  for (guint b = 0; b <= N_COST_BUCKETS; b++)
    buckets[b] = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint e = 0; e < n; e++)
    {
      const GraphviewRect *bounds = graphview_layout_get_edge_bounds (layout, e);
      if (!graphview_rect_intersects (bounds, &f->visible))
        continue;
      /* Shorter than a pixel: hidden by the nodes it joins anyway. */
      if (bounds->width * f->scale < 1 && bounds->height * f->scale < 1)
        continue;
      guint b = 0;
      double cost = graphview_view_model_get_edge_cost (self->vm, e, NULL);
      if (cost > 0)
        b = 1
            + (guint)MIN (cost_level (self, cost) * N_COST_BUCKETS,
                          N_COST_BUCKETS - 1);
      g_array_append_val (buckets[b], e);
    }
  gboolean arrows = f->scale >= 0.3;
  for (guint b = 0; b <= N_COST_BUCKETS; b++)
    {
      if (buckets[b]->len == 0)
        continue;
      double t = b == 0 ? 0 : (b - 0.5) / N_COST_BUCKETS;
      Rgb colour = b == 0 ? f->pal->no_cost : cost_colour (f->pal, t);
      double width = b == 0 ? 1.0 : cost_width (t);
      cairo_new_path (cr);
      for (guint i = 0; i < buckets[b]->len; i++)
        edge_path (cr, layout, g_array_index (buckets[b], guint, i), f->scale < 0.25);
      set_rgb (cr, colour);
      cairo_set_line_width (cr, MAX (width, 0.5) / f->scale);
      cairo_stroke (cr);
      if (arrows)
        {
          double size = MIN ((4.0 + width) / f->scale, 10.0);
          for (guint i = 0; i < buckets[b]->len; i++)
            arrow_path (cr, layout, g_array_index (buckets[b], guint, i), size);
          cairo_fill (cr);
        }
    }

  for (guint b = 1; f->text && plan_of (self) != NULL && b <= N_COST_BUCKETS; b++)
    for (guint i = 0; i < buckets[b]->len; i++)
      {
        guint e = g_array_index (buckets[b], guint, i);
        g_autofree char *text = graphview_renderer_dup_edge_badge (self, e);
        if (text == NULL)
          continue;
        double x, y;
        graphview_layout_get_edge_midpoint (layout, e, &x, &y);
        draw_badge (f, text, x, y, cost_colour (f->pal, (b - 0.5) / N_COST_BUCKETS));
      }
  for (guint b = 0; b <= N_COST_BUCKETS; b++)
    g_array_unref (buckets[b]);
}

static void
draw_matrix (Frame *f, guint op, const GraphviewRect *r)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  const PlannerOp *o = planner_graph_get_op (self->graph, op);
  guint rows, cols;
  graphview_op_matrix_size (o, self->graph, &rows, &cols);
  double cell = GRAPHVIEW_CELL;
  double x0 = r->x + r->width - GRAPHVIEW_PAD - cols * cell;
  double y0 = r->y + (r->height - rows * cell) / 2;
  for (guint row = 0; row < rows; row++)
    {
      guint rank = planner_graph_get_tensor (self->graph, o->inputs[row])->rank;
      for (guint c = 0; c < MIN (MAX (rank, 1), cols); c++)
        {
          guint splits = graphview_view_model_get_splits (self->vm, op, row, c);
          set_rgb (cr, split_colour (f->pal, splits));
          cairo_rectangle (cr, x0 + c * cell, y0 + row * cell, cell, cell);
          cairo_fill_preserve (cr);
          set_rgb (cr, f->pal->matrix_line);
          cairo_set_line_width (cr, 0.5 / f->scale);
          cairo_stroke (cr);
        }
    }
}

static guint
op_fill_kind (GraphviewRenderer *self, guint op)
{
  return op_category (planner_graph_get_op (self->graph, op)->type);
}

/* 0 propagated, 1 pinned, 2 defaulted. */
static guint
op_border_kind (GraphviewRenderer *self, guint op)
{
  int d = graphview_view_model_get_decision (self->vm, op);
  return d == PLANNER_DECIDED_PINNED ? 1 : d == PLANNER_DECIDED_DEFAULTED ? 2 : 0;
}

/* A new path of the nodes of the @ops items whose op @kind_of puts in @kind; FALSE when it
 * is empty. */
static gboolean
path_op_nodes (Frame *f, GArray *ops, guint (*kind_of) (GraphviewRenderer *self, guint op),
               guint kind)
{
  gboolean any = FALSE;
  cairo_new_path (f->cr);
  for (guint i = 0; i < ops->len; i++)
    {
      guint item = g_array_index (ops, guint, i);
      guint op = graphview_model_get_item (f->self->model, item)->first_op;
      if (kind_of (f->self, op) != kind)
        continue;
      const GraphviewRect *r = item_rect (f, item);
      cairo_rectangle (f->cr, r->x, r->y, r->width, r->height);
      any = TRUE;
    }
  return any;
}

static void
draw_op_nodes (Frame *f, GArray *ops)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  gboolean borders = 40 * f->scale >= 4;

  for (guint c = 0; c < N_CATEGORIES; c++)
    if (path_op_nodes (f, ops, op_fill_kind, c))
      {
        set_rgb (cr, f->pal->category_fill[c]);
        cairo_fill (cr);
      }

  /* Borders tell how the op was decided: plain propagated, thick blue pinned, dashed amber
   * defaulted. */
  static const double dash[] = { 4.0 };
  for (guint kind = 0; kind < 4 && borders; kind++)
    {
      if (!path_op_nodes (f, ops, op_border_kind, kind))
        continue;
      set_rgb (cr, kind == 1   ? f->pal->pinned
                   : kind == 2 ? f->pal->defaulted
                               : f->pal->border);
      cairo_set_line_width (cr, (kind == 1 ? 2.5 : kind == 2 ? 1.8 : 1.0) / f->scale);
      if (kind == 2)
        {
          double d = dash[0] / f->scale;
          cairo_set_dash (cr, &d, 1, 0);
        }
      cairo_stroke (cr);
      cairo_set_dash (cr, NULL, 0, 0);
    }

  /* Corner marks, big enough to see once nodes are: a pin head, an amber triangle. */
  if (plan_of (self) != NULL && 20 * f->scale >= 4)
    for (guint i = 0; i < ops->len; i++)
      {
        guint item = g_array_index (ops, guint, i);
        guint op = graphview_model_get_item (self->model, item)->first_op;
        const GraphviewRect *r = item_rect (f, item);
        int decision = graphview_view_model_get_decision (self->vm, op);
        if (decision == PLANNER_DECIDED_PINNED)
          {
            cairo_arc (cr, r->x, r->y, 5, 0, 2 * G_PI);
            set_rgb (cr, f->pal->pinned);
            cairo_fill (cr);
            cairo_arc (cr, r->x, r->y, 2, 0, 2 * G_PI);
            set_rgb (cr, f->pal->on_mark);
            cairo_fill (cr);
          }
        else if (decision == PLANNER_DECIDED_DEFAULTED)
          {
            cairo_move_to (cr, r->x - 1, r->y - 1);
            cairo_line_to (cr, r->x + 11, r->y - 1);
            cairo_line_to (cr, r->x - 1, r->y + 11);
            cairo_close_path (cr);
            set_rgb (cr, f->pal->defaulted);
            cairo_fill (cr);
          }
      }

  if (f->matrices && plan_of (self) != NULL)
    for (guint i = 0; i < ops->len; i++)
      {
        guint item = g_array_index (ops, guint, i);
        draw_matrix (f, graphview_model_get_item (self->model, item)->first_op,
                     item_rect (f, item));
      }

  if (!f->text)
    return;
  for (guint i = 0; i < ops->len; i++)
    {
      guint item = g_array_index (ops, guint, i);
      guint op = graphview_model_get_item (self->model, item)->first_op;
      const PlannerOp *o = planner_graph_get_op (self->graph, op);
      const GraphviewRect *r = item_rect (f, item);
      guint rows, cols;
      graphview_op_matrix_size (o, self->graph, &rows, &cols);
      double matrix_w = plan_of (self) ? cols * GRAPHVIEW_CELL + GRAPHVIEW_PAD : 0;
      double text_w = r->width - 2 * GRAPHVIEW_PAD - matrix_w;
      double x = r->x + GRAPHVIEW_PAD;
      double y = r->y + GRAPHVIEW_PAD + GRAPHVIEW_LINE - 3;
      set_rgb (cr, f->pal->text);
      show_text_fit (&f->pen, planner_op_type_to_string (o->type), x, y, text_w,
                     GRAPHVIEW_TITLE_FONT_SIZE, TRUE);
      show_text_fit (&f->pen, graphview_model_get_op_label (self->model, op), x, y + GRAPHVIEW_LINE,
                     text_w, GRAPHVIEW_FONT_SIZE, FALSE);
      if (f->shapes && o->n_outputs > 0)
        {
          g_autofree char *shape
              = graphview_dup_shape_text (planner_graph_get_tensor (self->graph, o->outputs[0]));
          set_rgb (cr, f->pal->text_muted);
          show_text_fit (&f->pen, shape, x, y + 2 * GRAPHVIEW_LINE, text_w,
                         GRAPHVIEW_FONT_SIZE * 0.9, FALSE);
        }
    }
}

static void
decision_bar (Frame *f, const GraphviewSummary *s, double x, double y, double w, double h)
{
  cairo_t *cr = f->cr;
  guint total = s->counts[0] + s->counts[1] + s->counts[2];
  if (total == 0)
    return;
  const Rgb *colours[] = { &f->pal->pinned, &f->pal->no_cost, &f->pal->defaulted };
  double at = x;
  for (guint k = 0; k < 3; k++)
    {
      double part = w * s->counts[k] / total;
      cairo_rectangle (cr, at, y, part, h);
      set_rgb (cr, *colours[k]);
      cairo_fill (cr);
      at += part;
    }
}

static void
draw_block_node (Frame *f, guint item)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  const GraphviewRect *r = item_rect (f, item);
  const GraphviewItem *it = graphview_model_get_item (self->model, item);

  /* A stack of cards: the block stands for several. */
  double off = it->n_blocks > 1 ? 5 : 0;
  for (int layer = it->n_blocks > 1 ? 2 : 0; layer >= 0; layer--)
    {
      double d = off * layer / 2;
      rounded_rect (cr, r->x + off - d, r->y + d, r->width - off, r->height - off, 6);
      set_rgb (cr, layer == 0 ? f->pal->block_fill : f->pal->block_back);
      cairo_fill_preserve (cr);
      set_rgb (cr, f->pal->border);
      cairo_set_line_width (cr, 1.2 / f->scale);
      cairo_stroke (cr);
    }
  double x = r->x + off + GRAPHVIEW_PAD, w = r->width - 2 * off - 2 * GRAPHVIEW_PAD;
  double y = r->y + off + GRAPHVIEW_PAD;
  GraphviewSummary s;
  graphview_view_model_summarize_ops (self->vm, it->first_op, it->n_ops, &s);
  decision_bar (f, &s, x, r->y + r->height - off - GRAPHVIEW_PAD - 5, w, 5);
  if (!f->text)
    return;

  const GraphviewRun *run = graphview_model_get_run (self->model, it->run);
  g_autofree char *label = graphview_model_dup_item_label (self->model, item);
  g_autofree char *ops
      = g_strdup_printf (_("%u ops, %u per block"), it->n_ops, run->ops_per_block);
  set_rgb (cr, f->pal->text);
  show_text_fit (&f->pen, label, x, y + GRAPHVIEW_LINE - 2, w, GRAPHVIEW_TITLE_FONT_SIZE, TRUE);
  show_text_fit (&f->pen, ops, x, y + 2 * GRAPHVIEW_LINE, w, GRAPHVIEW_FONT_SIZE, FALSE);
  if (plan_of (self) == NULL)
    return;
  g_autofree char *decided = g_strdup_printf (_("pinned %u, propagated %u, defaulted %u"),
                                              s.counts[0], s.counts[1], s.counts[2]);
  g_autofree char *cost = planner_format_time (s.cost);
  g_autofree char *redist = g_strdup_printf (_("%u redistributions, %s"), s.redistributions, cost);
  show_text_fit (&f->pen, decided, x, y + 3 * GRAPHVIEW_LINE, w, GRAPHVIEW_FONT_SIZE, FALSE);
  show_text_fit (&f->pen, redist, x, y + 4 * GRAPHVIEW_LINE, w, GRAPHVIEW_FONT_SIZE, FALSE);
}

/* Device pixels of the overview's labels, whatever the zoom. */
#define OVERVIEW_FONT_PX 11.0

/* A label in screen-size text at the top of @r, when @r is tall enough to hold it. */
static void
overview_label (Frame *f, const GraphviewRect *r, const char *text, const char *detail)
{
  double size = OVERVIEW_FONT_PX / f->scale;
  if (r->height * f->scale < OVERVIEW_FONT_PX + 4 || r->width * f->scale < 24)
    return;
  set_rgb (f->cr, f->pal->text);
  double pad = 4 / f->scale;
  show_text_fit (&f->pen, text, r->x + pad, r->y + pad + size, r->width - 2 * pad, size, TRUE);
  if (detail && r->height * f->scale >= 2 * OVERVIEW_FONT_PX + 10)
    show_text_fit (&f->pen, detail, r->x + pad, r->y + 2 * pad + 2 * size, r->width - 2 * pad,
                   size, FALSE);
}

/* Zoomed out past readable op text: each unfolded block is one card, as a folded block is,
 * with its name and counts in screen-size text, over its nodes and inner edges. */
static void
draw_block_summaries (Frame *f)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  GraphviewLayout *layout = self->layout;
  for (guint i = 0; i < graphview_layout_get_n_frames (layout); i++)
    {
      const GraphviewFrame *frame = graphview_layout_get_frame (layout, i);
      if (!graphview_rect_intersects (&frame->rect, &f->visible))
        continue;
      const GraphviewRect *r = &frame->rect;
      rounded_rect (cr, r->x, r->y, r->width, r->height, 6 / MAX (f->scale, 0.05));
      set_rgb (cr, f->pal->block_fill);
      cairo_fill_preserve (cr);
      set_rgb (cr, f->pal->border);
      cairo_set_line_width (cr, 1.2 / f->scale);
      cairo_stroke (cr);
      if (frame->run < 0)
        continue;
      const GraphviewRun *run = graphview_model_get_run (self->model, frame->run);
      GraphviewItem block = { GRAPHVIEW_ITEM_BLOCK, run->first_op + frame->block * run->ops_per_block,
                              run->ops_per_block, frame->run, frame->block, 1 };
      GraphviewSummary s;
      graphview_view_model_summarize_ops (self->vm, block.first_op, block.n_ops, &s);
      double bar = MIN (5 / f->scale, r->height / 4);
      decision_bar (f, &s, r->x + 2 / f->scale, r->y + r->height - bar - 2 / f->scale,
                    r->width - 4 / f->scale, bar);
      g_autofree char *full = graphview_model_dup_block_name (self->model, frame->run, frame->block);
      /* "layers.37": what tells the cards apart comes first in a narrow one. */
      const char *name = full;
      const char *last = strrchr (full, '.');
      for (const char *p = last ? last - 1 : NULL; p && p > full; p--)
        if (*p == '.')
          {
            name = p + 1;
            break;
          }
      g_autofree char *detail
          = plan_of (self) ? g_strdup_printf (_("%u ops, pinned %u"), block.n_ops, s.counts[0])
                       : g_strdup_printf (_("%u ops"), block.n_ops);
      overview_label (f, r, name, detail);
    }
}

gboolean
graphview_renderer_is_overview (double scale)
{
  return GRAPHVIEW_FONT_SIZE * scale < GRAPHVIEW_MIN_TEXT_PX;
}

void
graphview_renderer_draw_static (GraphviewRenderer *self, cairo_t *cr,
                                const GraphviewViewport *viewport)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_return_if_fail (cr != NULL && viewport != NULL && viewport->scale > 0);
  Frame f;
  if (!frame_begin (&f, self, cr, viewport))
    return;
  gboolean overview = graphview_renderer_is_overview (f.scale);
  if (!overview)
    draw_frames (&f);
  if (self->show_stages && graphview_renderer_get_stages (self))
    {
      pen_ensure (&f.pen);
      graphview_stages_draw (self->stages, cr, f.scale, &f.visible, f.pen.layout, f.pal->dark);
    }
  draw_edges (&f);
  if (overview)
    draw_block_summaries (&f);

  g_autoptr (GArray) ops = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; seek_visible_item (&f, &i); i++)
    {
      const GraphviewItem *it = graphview_model_get_item (self->model, i);
      if (it->kind == GRAPHVIEW_ITEM_BLOCK)
        {
          draw_block_node (&f, i);
          if (overview)
            {
              g_autofree char *label = graphview_model_dup_item_label (self->model, i);
              overview_label (&f, item_rect (&f, i), label, NULL);
            }
        }
      /* In the overview an unfolded block's card stands for its ops. */
      else if (!overview || it->run < 0)
        g_array_append_val (ops, i);
    }
  draw_op_nodes (&f, ops);

  /* Conversions at the producer and final reductions of outputs, under the node. */
  if (f.text && plan_of (self) != NULL)
    for (guint i = 0; i < ops->len; i++)
      {
        guint item = g_array_index (ops, guint, i);
        guint op = graphview_model_get_item (self->model, item)->first_op;
        double extra = graphview_view_model_get_op_extra (self->vm, op);
        if (extra <= 0)
          continue;
        const GraphviewRect *r = item_rect (&f, item);
        g_autofree char *time = planner_format_time (extra);
        /* Translators: a badge under a node: the time of the conversions of its output. */
        g_autofree char *text = g_strdup_printf (_("out %s"), time);
        draw_badge (&f, text, r->x + r->width / 2, r->y + r->height + 2,
                    cost_colour (f.pal, cost_level (self, extra)));
      }
  frame_end (&f);
}

/* Overlays --------------------------------------------------------------------------------- */

static void
outline (Frame *f, const GraphviewRect *r, Rgb colour, double px, gboolean dashed)
{
  cairo_t *cr = f->cr;
  double pad = (px / 2 + 1) / f->scale;
  cairo_rectangle (f->cr, r->x - pad, r->y - pad, r->width + 2 * pad, r->height + 2 * pad);
  set_rgb (cr, colour);
  cairo_set_line_width (cr, px / f->scale);
  if (dashed)
    {
      double d = 6 / f->scale;
      cairo_set_dash (cr, &d, 1, 0);
    }
  cairo_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);
}

static void
draw_step_overlay (Frame *f)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  PlannerPlan *plan = plan_of (self);
  int step_index = graphview_view_model_get_step (self->vm);
  if (plan == NULL || step_index < 0)
    return;
  for (guint i = 0; seek_visible_item (f, &i); i++)
    {
      const GraphviewItem *it = graphview_model_get_item (self->model, i);
      const GraphviewRect *r = item_rect (f, i);
      GraphviewSummary s;
      graphview_view_model_summarize_ops (self->vm, it->first_op, it->n_ops, &s);
      if (s.pending > 0)
        {
          /* Grey over the part of the node not decided yet (all of an op node). */
          double part = (double)s.pending / it->n_ops;
          cairo_rectangle (cr, r->x, r->y + r->height * (1 - part), r->width, r->height * part);
          cairo_set_source_rgba (cr, f->pal->pending.r, f->pal->pending.g, f->pal->pending.b,
                                 f->pal->pending_alpha);
          cairo_fill (cr);
        }
    }

  if ((guint)step_index >= planner_plan_get_n_trace_steps (plan))
    return;
  const PlannerTraceStep *step = planner_plan_get_trace_step (plan, step_index);
  guint item = graphview_model_get_item_of_op (self->model, step->op);
  if (step->from_op >= 0)
    {
      guint from = graphview_model_get_item_of_op (self->model, step->from_op);
      int edge = step->forward ? graphview_model_find_edge (self->model, from, item)
                               : graphview_model_find_edge (self->model, item, from);
      if (edge >= 0)
        {
          cairo_new_path (cr);
          edge_path (cr, self->layout, edge, FALSE);
          cairo_set_source_rgba (cr, f->pal->step.r, f->pal->step.g, f->pal->step.b, 0.85);
          cairo_set_line_width (cr, 5 / f->scale);
          cairo_stroke (cr);
        }
      outline (f, item_rect (f, from), f->pal->step, 2, TRUE);
    }
  outline (f, item_rect (f, item), f->pal->step, 4, FALSE);
}

static void
draw_compare_overlay (Frame *f)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  if (plan_of (self) == NULL || graphview_view_model_get_compare_plan (self->vm) == NULL)
    return;
  for (guint i = 0; seek_visible_item (f, &i); i++)
    {
      const GraphviewItem *it = graphview_model_get_item (self->model, i);
      guint differs = 0;
      for (guint op = it->first_op; op < it->first_op + it->n_ops; op++)
        differs += graphview_view_model_op_differs (self->vm, op);
      if (differs == 0)
        continue;
      const GraphviewRect *r = item_rect (f, i);
      outline (f, r, f->pal->differs, 3, TRUE);
      /* A "not equal" badge at the top-right corner, with the count on block nodes. */
      g_autofree char *text = it->kind == GRAPHVIEW_ITEM_BLOCK ? g_strdup_printf ("%u", differs)
                                                               : g_strdup ("\xe2\x89\xa0");
      double baseline;
      double advance = pen_set (&f->pen, text, 9, TRUE, &baseline);
      double radius = 7 / MAX (f->scale, 0.5);
      double half = f->text ? MAX (advance / 2 + 2 - radius, 0) : 0;
      double cx = r->x + r->width - half;
      cairo_new_sub_path (cr);
      cairo_arc (cr, cx + half, r->y, radius, -G_PI / 2, G_PI / 2);
      cairo_arc (cr, cx - half, r->y, radius, G_PI / 2, 3 * G_PI / 2);
      cairo_close_path (cr);
      set_rgb (cr, f->pal->differs);
      cairo_fill (cr);
      if (f->text)
        {
          set_rgb (cr, f->pal->on_mark);
          pen_show (&f->pen, cx - advance / 2, r->y + 3.2, baseline);
        }
    }
}

/* A trial run's result under each node: measured / estimated, their ratio and the error,
 * green within the tolerance and red beyond it; a coloured bar alone when text is too
 * small to read. */
static void
draw_trial_overlay (Frame *f)
{
  GraphviewRenderer *self = f->self;
  cairo_t *cr = f->cr;
  if (!graphview_view_model_has_trial (self->vm))
    return;
  Rgb good = f->pal->good, bad = f->pal->bad;
  for (guint i = 0; seek_visible_item (f, &i); i++)
    {
      gboolean ok = TRUE;
      g_autofree char *text = graphview_renderer_dup_trial_badge (self, i, &ok);
      if (text == NULL)
        continue;
      const GraphviewRect *r = item_rect (f, i);
      double h = 12 / MAX (f->scale, 0.5);
      if (!f->text)
        {
          cairo_rectangle (cr, r->x, r->y + r->height - h / 3, r->width, h / 3);
          set_rgb (cr, ok ? good : bad);
          cairo_fill (cr);
          continue;
        }
      double baseline;
      double w = pen_set (&f->pen, text, 8, TRUE, &baseline) + 6;
      double x = r->x + (r->width - w) / 2, y = r->y + r->height - 5;
      cairo_rectangle (cr, x, y, w, 10);
      set_rgb (cr, ok ? good : bad);
      cairo_fill (cr);
      set_rgb (cr, f->pal->on_mark);
      pen_show (&f->pen, x + 3, y + 7.5, baseline);
    }
}

/* Search matches: every item showing a matching op gets a thick yellow ring, so that all of
 * them are seen at once, whatever the zoom. */
static void
draw_highlight_overlay (Frame *f)
{
  GraphviewRenderer *self = f->self;
  if (!graphview_view_model_has_highlights (self->vm))
    return;
  for (guint i = 0; seek_visible_item (f, &i); i++)
    if (graphview_renderer_item_is_highlighted (self, i))
      outline (f, item_rect (f, i), f->pal->highlight, 4, FALSE);
}

void
graphview_renderer_draw_overlays (GraphviewRenderer *self, cairo_t *cr,
                                  const GraphviewViewport *viewport)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_return_if_fail (cr != NULL && viewport != NULL && viewport->scale > 0);
  Frame f;
  if (!frame_begin (&f, self, cr, viewport))
    return;
  draw_step_overlay (&f);
  draw_compare_overlay (&f);
  draw_trial_overlay (&f);
  draw_highlight_overlay (&f);
  guint n = graphview_model_get_n_items (self->model);
  if (self->hover >= 0 && (guint)self->hover < n)
    outline (&f, item_rect (&f, self->hover), f.pal->hover, 2, FALSE);
  if (self->selected >= 0 && (guint)self->selected < n)
    outline (&f, item_rect (&f, self->selected), f.pal->pinned, 3, FALSE);
  frame_end (&f);
}

/* The legend ------------------------------------------------------------------------------- */

static double
legend_text (Pen *p, const char *text, double x, double y, gboolean bold)
{
  set_rgb (p->cr, p->self->palette->text);
  return x + pen_draw (p, text, x, y, 11, bold);
}

static double
legend_swatch (cairo_t *cr, double x, double y, Rgb fill, Rgb line, double width, gboolean dashed)
{
  cairo_rectangle (cr, x, y - 9, 16, 11);
  set_rgb (cr, fill);
  cairo_fill_preserve (cr);
  set_rgb (cr, line);
  cairo_set_line_width (cr, width);
  double d = 3;
  cairo_set_dash (cr, &d, dashed ? 1 : 0, 0);
  cairo_stroke (cr);
  cairo_set_dash (cr, NULL, 0, 0);
  return x + 20;
}

void
graphview_renderer_draw_legend (GraphviewRenderer *self, cairo_t *cr, double x, double y,
                                double *width, double *height)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  double row1 = y + 18, row2 = y + 40, at, right = x;
  const GraphviewPalette *pal = self->palette;
  cairo_save (cr);
  Pen pen;
  pen_init (&pen, self, cr);

  at = legend_text (&pen, _("splits per dim"), x + 8, row1, TRUE) + 8;
  static const guint levels[] = { 1, 2, 4, 8, 16 };
  for (guint i = 0; i < G_N_ELEMENTS (levels); i++)
    {
      char label[8];
      g_snprintf (label, sizeof label, i + 1 < G_N_ELEMENTS (levels) ? "%u" : "%u+", levels[i]);
      cairo_rectangle (cr, at, row1 - 10, 12, 12);
      set_rgb (cr, split_colour (pal, levels[i]));
      cairo_fill_preserve (cr);
      set_rgb (cr, pal->matrix_line);
      cairo_set_line_width (cr, 1);
      cairo_stroke (cr);
      at = legend_text (&pen, label, at + 15, row1, FALSE) + 8;
    }
  at += 12;
  at = legend_text (&pen, _("redistribution"), at, row1, TRUE) + 8;
  double min_cost, max_cost;
  graphview_view_model_get_cost_range (self->vm, &min_cost, &max_cost);
  PlannerPlan *plan = plan_of (self);
  int step = graphview_view_model_get_step (self->vm);
  if (max_cost > 0)
    {
      g_autofree char *lo = planner_format_time (min_cost);
      g_autofree char *hi = planner_format_time (max_cost);
      at = legend_text (&pen, lo, at, row1, FALSE) + 6;
      cairo_pattern_t *ramp = cairo_pattern_create_linear (at, 0, at + 90, 0);
      for (guint i = 0; i <= 4; i++)
        {
          Rgb c = cost_colour (pal, i / 4.0);
          cairo_pattern_add_color_stop_rgb (ramp, i / 4.0, c.r, c.g, c.b);
        }
      cairo_move_to (cr, at, row1 - 4);
      cairo_line_to (cr, at + 90, row1 - 7);
      cairo_line_to (cr, at + 90, row1);
      cairo_line_to (cr, at, row1 - 3);
      cairo_close_path (cr);
      cairo_set_source (cr, ramp);
      cairo_fill (cr);
      cairo_pattern_destroy (ramp);
      at = legend_text (&pen, hi, at + 96, row1, FALSE) + 8;
      /* Translators: the cost ramp's scale is logarithmic. */
      at = legend_text (&pen, _("(log)"), at, row1, FALSE);
    }
  else
    at = legend_text (&pen, plan ? _("none") : _("no plan"), at, row1, FALSE);
  right = MAX (right, at);

  at = x + 8;
  at = legend_swatch (cr, at, row2, pal->category_fill[0], pal->pinned, 2.5, FALSE);
  at = legend_text (&pen, _("pinned"), at, row2, FALSE) + 12;
  at = legend_swatch (cr, at, row2, pal->category_fill[0], pal->border, 1, FALSE);
  at = legend_text (&pen, _("propagated"), at, row2, FALSE) + 12;
  at = legend_swatch (cr, at, row2, pal->category_fill[0], pal->defaulted, 1.8, TRUE);
  at = legend_text (&pen, _("defaulted"), at, row2, FALSE) + 12;
  if (plan != NULL && step >= 0)
    {
      at = legend_swatch (cr, at, row2, pal->pending, pal->step, 2.5, FALSE);
      g_autofree char *text = g_strdup_printf (_("step %d (grey: decided later)"), step);
      at = legend_text (&pen, text, at, row2, FALSE) + 12;
    }
  if (plan != NULL && graphview_view_model_get_compare_plan (self->vm) != NULL)
    {
      at = legend_swatch (cr, at, row2, pal->background, pal->differs, 2.5, TRUE);
      at = legend_text (&pen, _("strategy differs"), at, row2, FALSE) + 12;
    }
  right = MAX (right, at);
  pen_clear (&pen);
  cairo_restore (cr);
  if (width)
    *width = right - x + 8;
  if (height)
    *height = 52;
}

void
graphview_renderer_draw (GraphviewRenderer *self, cairo_t *cr, const GraphviewViewport *viewport)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  graphview_renderer_draw_static (self, cr, viewport);
  graphview_renderer_draw_overlays (self, cr, viewport);
}

/* Files ------------------------------------------------------------------------------------ */

gboolean
graphview_format_from_path (const char *path, GraphviewFormat *format)
{
  g_return_val_if_fail (path != NULL && format != NULL, FALSE);
  g_autofree char *lower = g_ascii_strdown (path, -1);
  if (g_str_has_suffix (lower, ".png"))
    *format = GRAPHVIEW_FORMAT_PNG;
  else if (g_str_has_suffix (lower, ".svg"))
    *format = GRAPHVIEW_FORMAT_SVG;
  else if (g_str_has_suffix (lower, ".pdf"))
    *format = GRAPHVIEW_FORMAT_PDF;
  else
    return FALSE;
  return TRUE;
}

void
graphview_renderer_get_file_viewport (GraphviewRenderer *self, GraphviewFormat format, double scale,
                                      GraphviewViewport *viewport)
{
  g_return_if_fail (GRAPHVIEW_IS_RENDERER (self));
  g_return_if_fail (viewport != NULL);
  double w = 100, h = 100;
  if (self->layout)
    graphview_renderer_get_bounds (self, &w, &h);
  if (scale <= 0)
    scale = 1;
  /* The title, when there is one, takes a band of its own above the legend's. */
  double band = GRAPHVIEW_FILE_LEGEND_HEIGHT + (self->title ? GRAPHVIEW_FILE_TITLE_HEIGHT : 0);
  /* Cairo's image surfaces stop at 32767 pixels a side. */
  double side = MAX (w * scale, h * scale + band);
  if (format == GRAPHVIEW_FORMAT_PNG && side > GRAPHVIEW_MAX_PNG_SIDE)
    scale *= (GRAPHVIEW_MAX_PNG_SIDE - band) / side;
  /* The legend band keeps its size in device units, and the page its minimum width, at any
   * scale, so the legend is never cut. */
  viewport->scale = scale;
  viewport->x = 0;
  viewport->y = -band / scale;
  viewport->width = MAX (ceil (w * scale), GRAPHVIEW_FILE_MIN_WIDTH);
  viewport->height = ceil (h * scale + band);
}

/* Cairo's stream surfaces append here. */
static cairo_status_t
append_bytes (void *closure, const unsigned char *data, unsigned int length)
{
  g_byte_array_append (closure, data, length);
  return CAIRO_STATUS_SUCCESS;
}

/* The file at @scale points per world point, the whole of it (legend and title too) then
 * magnified @magnify times. */
static GBytes *
render_file (GraphviewRenderer *self, GraphviewFormat format, double scale, double magnify,
             GError **error)
{
  if (!graphview_renderer_is_ready (self))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_INITIALIZED,
                   "no layout of the graph's current folding to draw; lay it out first");
      return NULL;
    }

  GraphviewViewport vp;
  graphview_renderer_get_file_viewport (self, format, scale, &vp);
  double side = MAX (vp.width, vp.height) * magnify;
  if (format == GRAPHVIEW_FORMAT_PNG && side > GRAPHVIEW_MAX_PNG_SIDE)
    magnify *= GRAPHVIEW_MAX_PNG_SIDE / side;
  double width = ceil (vp.width * magnify), height = ceil (vp.height * magnify);
  /* The drawing is made in memory and written by the caller (app_file_write()), which knows
   * how to replace a file, feed a pipe or a device, and report a full disk. */
  g_autoptr (GByteArray) out = g_byte_array_new ();
  cairo_surface_t *surface;
  switch (format)
    {
    case GRAPHVIEW_FORMAT_SVG:
      surface = cairo_svg_surface_create_for_stream (append_bytes, out, width, height);
      break;
    case GRAPHVIEW_FORMAT_PDF:
      surface = cairo_pdf_surface_create_for_stream (append_bytes, out, width, height);
      break;
    case GRAPHVIEW_FORMAT_PNG:
    default:
      surface = cairo_image_surface_create (CAIRO_FORMAT_RGB24, (int)width, (int)height);
      break;
    }
  cairo_t *cr = cairo_create (surface);
  cairo_scale (cr, magnify, magnify);
  set_rgb (cr, self->palette->background);
  cairo_paint (cr);
  graphview_renderer_draw (self, cr, &vp);
  double legend_y = 4;
  if (self->title)
    {
      /* In device units, as the legend: the same size at every scale. */
      cairo_save (cr);
      Pen pen;
      pen_init (&pen, self, cr);
      set_rgb (cr, self->palette->text);
      pen_draw (&pen, self->title, 8, 21, 15, TRUE);
      pen_clear (&pen);
      cairo_restore (cr);
      legend_y += GRAPHVIEW_FILE_TITLE_HEIGHT;
    }
  if (self->legend)
    graphview_renderer_draw_legend (self, cr, 0, legend_y, NULL, NULL);
  cairo_status_t status = cairo_status (cr);
  cairo_destroy (cr);
  if (status == CAIRO_STATUS_SUCCESS && format == GRAPHVIEW_FORMAT_PNG)
    status = cairo_surface_write_to_png_stream (surface, append_bytes, out);
  cairo_surface_finish (surface);
  if (status == CAIRO_STATUS_SUCCESS)
    status = cairo_surface_status (surface);
  cairo_surface_destroy (surface);

  if (status != CAIRO_STATUS_SUCCESS)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                   "cannot draw the %.0f x %.0f picture: %s; try a smaller --scale", width,
                   height, cairo_status_to_string (status));
      return NULL;
    }
  return g_byte_array_free_to_bytes (g_steal_pointer (&out));
}

GBytes *
graphview_renderer_render_file (GraphviewRenderer *self, GraphviewFormat format, double scale,
                                GError **error)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  return render_file (self, format, scale, 1, error);
}

/* Snapshots -------------------------------------------------------------------------------- */

struct _GraphviewSnapshot
{
  PlannerGraph *graph;
  GraphviewFolding *folding;
  GraphviewLayout *layout;
  PlannerPlan *plan;
  PlannerPlan *other;
  int step;
  /* The trial's per-op measured and estimated seconds and errors (NULL: none). */
  double *measured, *estimated, *error;
  double trial_tolerance;
  gboolean legend;
  char *title;
};

GraphviewSnapshot *
graphview_renderer_snapshot (GraphviewRenderer *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_RENDERER (self), NULL);
  GraphviewSnapshot *snap = g_new0 (GraphviewSnapshot, 1);
  snap->graph = g_object_ref (self->graph);
  snap->folding = graphview_model_dup_folding (self->model);
  snap->layout = self->layout ? graphview_layout_ref (self->layout) : NULL;
  /* Plans are never changed once made (a new plan replaces the old), so a reference is a
   * snapshot. */
  GraphviewViewModel *vm = self->vm;
  PlannerPlan *plan = graphview_view_model_get_plan (vm);
  PlannerPlan *other = graphview_view_model_get_compare_plan (vm);
  snap->plan = plan ? g_object_ref (plan) : NULL;
  snap->other = other ? g_object_ref (other) : NULL;
  snap->step = graphview_view_model_get_step (vm);
  if (graphview_view_model_has_trial (vm))
    {
      snap->measured = g_new (double, MAX (self->n_ops, 1));
      snap->estimated = g_new (double, MAX (self->n_ops, 1));
      snap->error = g_new (double, MAX (self->n_ops, 1));
      for (guint op = 0; op < self->n_ops; op++)
        graphview_view_model_get_op_trial (vm, op, &snap->measured[op], &snap->estimated[op],
                                           &snap->error[op]);
      snap->trial_tolerance = graphview_view_model_get_trial_tolerance (vm);
    }
  snap->legend = self->legend;
  snap->title = g_strdup (self->title);
  return snap;
}

void
graphview_snapshot_free (GraphviewSnapshot *snap)
{
  if (snap == NULL)
    return;
  g_object_unref (snap->graph);
  graphview_folding_free (snap->folding);
  g_clear_pointer (&snap->layout, graphview_layout_unref);
  g_clear_object (&snap->plan);
  g_clear_object (&snap->other);
  g_free (snap->measured);
  g_free (snap->estimated);
  g_free (snap->error);
  g_free (snap->title);
  g_free (snap);
}

void
graphview_snapshot_set_title (GraphviewSnapshot *snap, const char *title)
{
  g_return_if_fail (snap != NULL);
  g_free (snap->title);
  snap->title = title && *title ? g_strdup (title) : NULL;
}

GBytes *
graphview_snapshot_render_file (const GraphviewSnapshot *snap, GraphviewFormat format,
                                double magnify, GError **error)
{
  g_return_val_if_fail (snap != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  /* A model and renderer of this thread's own: nothing is shared with the widget's. */
  g_autoptr (GraphviewModel) model = graphview_model_new_folded (snap->graph, snap->folding);
  g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
  graphview_renderer_set_layout (renderer, snap->layout);
  graphview_renderer_set_plan (renderer, snap->plan);
  graphview_renderer_set_compare_plan (renderer, snap->other);
  graphview_renderer_set_step (renderer, snap->step);
  graphview_renderer_set_trial (renderer, snap->measured, snap->estimated, snap->error,
                                snap->trial_tolerance);
  graphview_renderer_set_show_legend (renderer, snap->legend);
  graphview_renderer_set_title (renderer, snap->title);
  return render_file (renderer, format, 1, magnify > 0 ? magnify : 1, error);
}
