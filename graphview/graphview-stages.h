/* graphview-stages.h: a plan's pipeline stages over the graph view (issue 18).
 *
 * Each pipeline chunk (a stage, or with interleaving one of its v layer ranges) is a band
 * behind the nodes: as wide as the layout plus a gutter on its right for the label
 * ("stage 2 · layers 20-39 · devices 32-47"), as tall as the items of its ops. A folded block
 * node whose layers lie in several chunks is cut across in proportion to its ops in each,
 * and each part belongs to its chunk's band, so the node spans the bands of its stages.
 * Consecutive bands meet halfway between their items. The split comes from
 * planner_pipeline_new(); the geometry from a layout, recomputed when the layout changes.
 */
#pragma once

#include <cairo.h>
#include <pango/pango.h>

#include "graphview-layout.h"
#include "graphview-model.h"
#include "planner-pipeline.h"

G_BEGIN_DECLS

typedef struct
{
  guint chunk;        /* the pipeline chunk; bands are in chunk order */
  guint stage;        /* chunk % p: the pp coordinate of its devices */
  GraphviewRect rect; /* world points: the band, gutter included */
  const char *label;  /* "stage 2 · layers 20-39 · devices 32-47" */
} GraphviewStageBand;

typedef struct _GraphviewStages GraphviewStages;

/* The stages of @pipeline, a pipeline of @plan (planner_pipeline_new). */
GraphviewStages *graphview_stages_new (PlannerPlan *plan, const PlannerPipeline *pipeline);
void graphview_stages_free (GraphviewStages *self);

guint graphview_stages_get_n_stages (GraphviewStages *self);
guint graphview_stages_get_n_chunks (GraphviewStages *self);
/* The chunk that runs @op. */
guint graphview_stages_get_op_chunk (GraphviewStages *self, guint op);
/* "0-3,8-11": device ids as ranges (at most a few, then the count). */
char *graphview_stages_format_devices (const guint64 *ids, guint64 n);

/* Places the bands over @layout, a layout of @model's current state (nothing happens when it
 * is the layout last placed). */
void graphview_stages_place (GraphviewStages *self, GraphviewModel *model, GraphviewLayout *layout);
/* World points the labels take right of the layout. */
double graphview_stages_get_gutter (GraphviewStages *self);
/* One band per chunk, after graphview_stages_place(). */
guint graphview_stages_get_n_bands (GraphviewStages *self);
const GraphviewStageBand *graphview_stages_get_band (GraphviewStages *self, guint band);
/* The chunks item @item stands for, [@first, @last] (a folded block node may span several),
 * and, for @chunk among them, the part of its box that stands for that chunk. */
void graphview_stages_get_item_chunks (GraphviewStages *self, GraphviewModel *model, guint item,
                                       guint *first, guint *last);
void graphview_stages_get_item_part (GraphviewStages *self, GraphviewModel *model,
                                     GraphviewLayout *layout, guint item, guint chunk,
                                     GraphviewRect *part);

/* The labels of the chunks item @item stands for, one a line (for its tooltip). */
char *graphview_stages_dup_item_text (GraphviewStages *self, GraphviewModel *model, guint item);

/* Draws the bands that meet @visible (world) in world coordinates at @scale device pixels a
 * point, behind the nodes: tints, the borders between stages, the labels in the gutter, set
 * with @layout (the renderer's Pango layout for @cr), darkened on the light palette and
 * lightened on the dark one. */
void graphview_stages_draw (GraphviewStages *self, cairo_t *cr, double scale,
                            const GraphviewRect *visible, PangoLayout *layout, gboolean dark);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (GraphviewStages, graphview_stages_free)

G_END_DECLS
