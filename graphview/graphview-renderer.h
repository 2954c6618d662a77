/* graphview-renderer.h: draws a laid-out model and a plan with Cairo.
 *
 * The same code draws the widget and the files. Drawing is in two layers: the static one
 * (block frames, edges coloured and widened by redistribution cost with their badges, op
 * nodes with type, name, shape and strategy matrix, folded blocks with their summary) and the
 * overlays (propagation step, comparison, hover, selection), so the widget can cache the
 * first and repaint only the second. Only what intersects the viewport is drawn, and detail
 * follows the zoom: no text below GRAPHVIEW_MIN_TEXT_PX, no matrix below GRAPHVIEW_MIN_CELL_PX.
 * What is drawn of the plan (decisions, steps, differences, costs, badges, summaries) comes
 * from the renderer's GraphviewViewModel; the renderer only draws.
 */
#pragma once

#include <cairo.h>
#include <glib-object.h>
#include <pango/pango.h>

#include "graphview-layout.h"
#include "graphview-model.h"
#include "graphview-stages.h"
#include "graphview-palette.h"
#include "graphview-view-model.h"
#include "planner-plan.h"

G_BEGIN_DECLS

/* Device pixels per world point, and the world point at the device origin. */
typedef struct
{
  double scale;
  double x, y;
  double width, height; /* device size */
} GraphviewViewport;

typedef enum
{
  GRAPHVIEW_FORMAT_PNG,
  GRAPHVIEW_FORMAT_SVG,
  GRAPHVIEW_FORMAT_PDF,
} GraphviewFormat;

/* Height of the legend band above the drawing in files, and their least width, in device
 * units (pixels, or points for SVG and PDF) whatever the scale. */
#define GRAPHVIEW_FILE_LEGEND_HEIGHT 64.0
/* The title band above it, when the renderer has a title. */
#define GRAPHVIEW_FILE_TITLE_HEIGHT 30.0
#define GRAPHVIEW_FILE_MIN_WIDTH 560.0
/* Files larger than this many pixels a side are drawn at a smaller scale. */
#define GRAPHVIEW_MAX_PNG_SIDE 30000

#define GRAPHVIEW_TYPE_RENDERER (graphview_renderer_get_type ())
G_DECLARE_FINAL_TYPE (GraphviewRenderer, graphview_renderer, GRAPHVIEW, RENDERER, GObject)

GraphviewRenderer *graphview_renderer_new (GraphviewModel *model);
GraphviewModel *graphview_renderer_get_model (GraphviewRenderer *self);
/* What the renderer draws of the plan, the comparison, the step, the trial and the search
 * (graphview-view-model.h); the setters below forward to it. */
GraphviewViewModel *graphview_renderer_get_view_model (GraphviewRenderer *self);

/* Nothing is drawn until a layout of the model's current state is set. */
void graphview_renderer_set_layout (GraphviewRenderer *self, GraphviewLayout *layout);
GraphviewLayout *graphview_renderer_get_layout (GraphviewRenderer *self);
/* FALSE when the layout is missing or was made for another state of the model. */
gboolean graphview_renderer_is_ready (GraphviewRenderer *self);

/* A plan of the model's graph (NULL: the graph alone). */
void graphview_renderer_set_plan (GraphviewRenderer *self, PlannerPlan *plan);
PlannerPlan *graphview_renderer_get_plan (GraphviewRenderer *self);
/* The pipeline stages drawn as bands behind the graph (graphview-stages.h). Setting a plan
 * takes its own pipeline (planner_pipeline_new, made when first drawn; none without a pp
 * axis); a caller that has made it already (off the GTK thread) hands it here after the plan
 * instead (what it needs is copied; NULL: the plan's own). */
void graphview_renderer_set_pipeline (GraphviewRenderer *self, const PlannerPipeline *pipeline);
/* NULL without a pipeline; placed over the current layout when it is ready. */
GraphviewStages *graphview_renderer_get_stages (GraphviewRenderer *self);
/* Bands on (the default) or off. */
void graphview_renderer_set_show_stages (GraphviewRenderer *self, gboolean show);
/* What the drawing covers in world points: the layout's bounds, and right of them the stage
 * labels' gutter when stages are shown. Fit, the minimap and files use it. */
void graphview_renderer_get_bounds (GraphviewRenderer *self, double *width, double *height);
/* Marks the ops whose strategy differs in @other (a plan of the same graph and mesh). */
void graphview_renderer_set_compare_plan (GraphviewRenderer *self, PlannerPlan *other);
/* A trial run's results, per op of the graph: measured and estimated seconds (0: not timed)
 * and the relative error of its result; drawn under each node (block nodes sum their ops).
 * NULL arrays clear them. */
void graphview_renderer_set_trial (GraphviewRenderer *self, const double *measured_s,
                                   const double *estimated_s, const double *rel_error,
                                   double tolerance);
/* "1.20 ms / 800 us ×1.5 err 2.0e-07" for an item (sums over a block node's ops), NULL
 * without a trial; @ok: every op's error within the tolerance. */
char *graphview_renderer_dup_trial_badge (GraphviewRenderer *self, guint item, gboolean *ok);
/* Propagation overlay at trace step @step; -1 turns it off. */
void graphview_renderer_set_step (GraphviewRenderer *self, int step);
int graphview_renderer_get_step (GraphviewRenderer *self);
void graphview_renderer_set_hover (GraphviewRenderer *self, int item);
void graphview_renderer_set_selected (GraphviewRenderer *self, int item);
void graphview_renderer_set_show_legend (GraphviewRenderer *self, gboolean show);
/* The fill of op nodes of @type (nodes are coloured by op family), red, green, blue in 0..1. */
void graphview_renderer_get_op_type_fill (GraphviewRenderer *self, PlannerOpType type,
                                          double rgb[3]);
/* The op types of the graph (PlannerOpType), grouped by fill, and in @counts (guint, may be
 * NULL) how many ops each has. */
GArray *graphview_renderer_dup_op_types (GraphviewRenderer *self, GArray **counts);
/* Search matches: every item showing one of @ops is ringed (an overlay); NULL clears. */
void graphview_renderer_set_highlighted_ops (GraphviewRenderer *self, const guint *ops,
                                             guint n_ops);
gboolean graphview_renderer_op_is_highlighted (GraphviewRenderer *self, guint op);
gboolean graphview_renderer_item_is_highlighted (GraphviewRenderer *self, guint item);
/* A title drawn over the legend in files ("gpt2 · dp=2,mp=4 · megatron"); NULL: none. */
void graphview_renderer_set_title (GraphviewRenderer *self, const char *title);
const char *graphview_renderer_get_title (GraphviewRenderer *self);
/* The dark palette or the light one (the default); the widget follows its style. Files are
 * drawn in the same palette, background included. */
void graphview_renderer_set_dark (GraphviewRenderer *self, gboolean dark);
const GraphviewPalette *graphview_renderer_get_palette (GraphviewRenderer *self);
/* Text is set with Pango, from @context's font map and language (the widget's), or from
 * Pango's default font map (NULL), so fontconfig's fallback applies as in GTK labels. */
void graphview_renderer_set_pango_context (GraphviewRenderer *self, PangoContext *context);
/* Characters drawn since the last call for which no installed font had a glyph (drawn as
 * boxes); resets the count. */
guint graphview_renderer_take_missing_glyphs (GraphviewRenderer *self);

GraphviewStepState graphview_renderer_get_step_state (GraphviewRenderer *self, guint op);
gboolean graphview_renderer_op_differs (GraphviewRenderer *self, guint op);
/* Summed time and bytes of the redistributions on a visible edge. */
double graphview_renderer_get_edge_cost (GraphviewRenderer *self, guint edge, guint64 *bytes);
/* "AllGather(mp) 12.0 MiB 0.80 ms", NULL when the edge moves nothing. */
char *graphview_renderer_dup_edge_badge (GraphviewRenderer *self, guint edge);
/* Several lines: what a block node sums up, or an op's type, shapes, strategy, decision. */
char *graphview_renderer_dup_item_summary (GraphviewRenderer *self, guint item);

/* Whether @scale draws the overview: op text would be unreadable, so each unfolded block is
 * drawn as one card with its name and counts in screen-size text, folded blocks keep their
 * names, and only ops outside blocks are drawn as nodes. */
gboolean graphview_renderer_is_overview (double scale);
void graphview_renderer_draw_static (GraphviewRenderer *self, cairo_t *cr,
                                     const GraphviewViewport *viewport);
void graphview_renderer_draw_overlays (GraphviewRenderer *self, cairo_t *cr,
                                       const GraphviewViewport *viewport);
/* In device space, at (x, y); returns the size it took through @width/@height. */
void graphview_renderer_draw_legend (GraphviewRenderer *self, cairo_t *cr, double x, double y,
                                     double *width, double *height);
void graphview_renderer_draw (GraphviewRenderer *self, cairo_t *cr,
                              const GraphviewViewport *viewport);

/* The viewport and device size a file at @scale gets (the scale is lowered for huge PNGs). */
void graphview_renderer_get_file_viewport (GraphviewRenderer *self, GraphviewFormat format,
                                           double scale, GraphviewViewport *viewport);
/* The PNG, SVG or PDF file's bytes, drawn in memory; app_file_write() writes them. */
GBytes *graphview_renderer_render_file (GraphviewRenderer *self, GraphviewFormat format,
                                        double scale, GError **error);
/* What a file needs of a renderer (graph, folding, layout, plan, comparison, step, trial,
 * legend, title), taken on its thread, so that the picture can be drawn on another while the
 * renderer goes on changing. Hover, selection and search marks are left out. */
typedef struct _GraphviewSnapshot GraphviewSnapshot;
GraphviewSnapshot *graphview_renderer_snapshot (GraphviewRenderer *self);
void graphview_snapshot_set_title (GraphviewSnapshot *snap, const char *title);
/* The file graphview_renderer_render_file() makes at scale 1, the whole picture (legend and
 * title too) magnified @magnify times: 2 gives twice the pixels (PNG) or points a side, the
 * same drawing sharper. On any thread. */
GBytes *graphview_snapshot_render_file (const GraphviewSnapshot *snap, GraphviewFormat format,
                                        double magnify, GError **error);
void graphview_snapshot_free (GraphviewSnapshot *snap);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (GraphviewSnapshot, graphview_snapshot_free)

/* From a file name's extension. */
gboolean graphview_format_from_path (const char *path, GraphviewFormat *format);

G_END_DECLS
