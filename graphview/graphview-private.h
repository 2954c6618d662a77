/* graphview-private.h: what the model, the layouter and the renderer share.
 *
 * Node sizes are a pure function of what a node shows, so the layouter (which sizes the
 * Graphviz boxes) and the renderer (which fills them) agree without measuring text: widths
 * come from character counts at a fixed average advance, and the renderer shrinks a label that
 * would overflow. That also keeps layouts identical on machines with different fonts.
 */
#pragma once

#include "planner-graph.h"

G_BEGIN_DECLS

/* World units are points (1/72 in), y down. */
#define GRAPHVIEW_FONT_SIZE 10.0
#define GRAPHVIEW_TITLE_FONT_SIZE 11.0
#define GRAPHVIEW_CHAR_ADVANCE 0.6 /* of the font size, the average of a sans font */
#define GRAPHVIEW_PAD 6.0
#define GRAPHVIEW_LINE 13.0
#define GRAPHVIEW_CELL 8.0 /* one strategy-matrix cell */
#define GRAPHVIEW_MATRIX_MAX_ROWS 4
#define GRAPHVIEW_MATRIX_MAX_COLS 5
#define GRAPHVIEW_MIN_NODE_WIDTH 96.0
#define GRAPHVIEW_BLOCK_WIDTH 260.0
#define GRAPHVIEW_BLOCK_HEIGHT 92.0

/* Level of detail: text is drawn only when it is at least this many device pixels tall, a
 * strategy matrix only when its cells are at least this wide. */
#define GRAPHVIEW_MIN_TEXT_PX 7.0
#define GRAPHVIEW_MIN_CELL_PX 6.0

/* Groups larger than this are laid out in chunks: dot is superlinear in the node count. */
#define GRAPHVIEW_MAX_GROUP 500
/* Groups at least this big get Graphviz's speed settings. */
#define GRAPHVIEW_BIG_GROUP 150

/* Rows and columns of an op's strategy matrix (inputs x dims, clamped). */
void graphview_op_matrix_size (const PlannerOp *op, PlannerGraph *graph, guint *rows, guint *cols);
/* Box of an op node whose label is @label (the name as shown: relative inside a block). */
void graphview_op_node_size (PlannerGraph *graph, guint op, const char *label, double *width,
                             double *height);

/* Structure key of the ops [first, first + n): names relative to their first @prefix_len
 * characters, types, shapes and edges relative to the range. Two ranges with equal keys draw
 * and lay out identically up to a translation. */
char *graphview_signature (PlannerGraph *graph, guint first, guint n, gsize prefix_len);

G_END_DECLS

#include "graphview-model.h"

G_BEGIN_DECLS

/* The folding of a model (one flag per block of each run) and its serial: what a copy on
 * another thread needs to show the same items, so that layouts made for the original fit it. */
typedef struct _GraphviewFolding GraphviewFolding;
GraphviewFolding *graphview_model_dup_folding (GraphviewModel *self);
void graphview_folding_free (GraphviewFolding *folding);
/* A new model of @graph folded as @folding says, with its serial; any thread. */
GraphviewModel *graphview_model_new_folded (PlannerGraph *graph, const GraphviewFolding *folding);

G_END_DECLS

#include "graphview-layout.h"

G_BEGIN_DECLS

/* Built by the layouter. */
GraphviewLayout *graphview_layout_new (guint serial, guint n_items, guint n_edges);
void graphview_layout_set_bounds (GraphviewLayout *self, double width, double height);
GraphviewRect *graphview_layout_peek_item_rect (GraphviewLayout *self, guint item);
/* Takes @points (n_points x, y pairs). */
void graphview_layout_take_edge_points (GraphviewLayout *self, guint edge, double *points,
                                        guint n_points);
void graphview_layout_add_frame (GraphviewLayout *self, const GraphviewFrame *frame);

/* What a later layout of the same model needs to keep this one's places (stable expansion,
 * README "Stable expansion"): the items it was made for, and its groups (the layouter's
 * units: a run of items laid out together) with their boxes and the x they are centred on. */
typedef struct
{
  guint first_item;
  guint n_items;
  GraphviewRect box; /* the frame of an expanded block, the group's own box otherwise */
  double axis;       /* the x the box is centred on, before keeping it inside the margin */
} GraphviewGroup;

void graphview_layout_set_items (GraphviewLayout *self, const GraphviewItem *items);
const GraphviewItem *graphview_layout_peek_items (GraphviewLayout *self);
void graphview_layout_add_group (GraphviewLayout *self, const GraphviewGroup *group);
guint graphview_layout_get_n_groups (GraphviewLayout *self);
const GraphviewGroup *graphview_layout_get_group (GraphviewLayout *self, guint group);
/* The width dot gave the layout this one was derived from: a stable layout is never narrower,
 * and is exactly as wide once what it unfolded is folded again. */
void graphview_layout_set_base_width (GraphviewLayout *self, double width);
double graphview_layout_get_base_width (GraphviewLayout *self);
void graphview_layout_set_stable (GraphviewLayout *self, gboolean stable);

G_END_DECLS
