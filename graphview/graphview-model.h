/* graphview-model.h: what the graph view shows of a planner graph, with folding.
 *
 * The module hierarchy comes from op names (Hugging Face module paths): the first all-digit
 * component marks a repeated block ("model.layers.3"). Consecutive blocks under the same
 * parent with the same structure, each a contiguous range of ops, form a run; collapsed
 * blocks of a run fold into one block node ("model.layers.0-79 x80"). Runs start collapsed.
 *
 * Visible items are in topological order: op nodes, and block nodes that stand for
 * consecutive collapsed blocks. Edges join items; several graph edges between the same pair
 * of items are one visible edge.
 */
#pragma once

#include <glib-object.h>

#include "planner-graph.h"

G_BEGIN_DECLS

typedef enum
{
  GRAPHVIEW_ITEM_OP,
  GRAPHVIEW_ITEM_BLOCK,
} GraphviewItemKind;

typedef struct
{
  char *prefix;      /* "model.layers" */
  char *signature;   /* structure key shared by every block of the run */
  guint first_label; /* the number in the name of block 0 */
  guint n_blocks;
  guint ops_per_block;
  guint first_op; /* block b covers [first_op + b * ops_per_block, + ops_per_block) */
} GraphviewRun;

typedef struct
{
  GraphviewItemKind kind;
  guint first_op; /* ops [first_op, first_op + n_ops) */
  guint n_ops;
  int run;           /* the run of a block node, or of the expanded block an op is in; -1 */
  guint first_block; /* block node: blocks [first_block, first_block + n_blocks) of run */
  guint n_blocks;    /* op node inside an expanded block: that block, n_blocks 1 */
} GraphviewItem;

/* One graph edge: tensor @tensor from op @producer into input @slot of op @consumer. */
typedef struct
{
  guint tensor;
  guint producer;
  guint consumer;
  guint slot;
} GraphviewEdgeRef;

typedef struct
{
  guint source; /* item indices */
  guint target;
  guint first_ref; /* refs [first_ref, first_ref + n_refs) of graphview_model_get_ref() */
  guint n_refs;
} GraphviewEdge;

#define GRAPHVIEW_TYPE_MODEL (graphview_model_get_type ())
G_DECLARE_FINAL_TYPE (GraphviewModel, graphview_model, GRAPHVIEW, MODEL, GObject)

GraphviewModel *graphview_model_new (PlannerGraph *graph);
PlannerGraph *graphview_model_get_graph (GraphviewModel *self);
/* Incremented on every change of the visible items ("changed" is emitted too). */
guint graphview_model_get_serial (GraphviewModel *self);

guint graphview_model_get_n_runs (GraphviewModel *self);
const GraphviewRun *graphview_model_get_run (GraphviewModel *self, guint run);
/* "model.layers.7" */
char *graphview_model_dup_block_name (GraphviewModel *self, guint run, guint block);

gboolean graphview_model_get_expanded (GraphviewModel *self, guint run, guint block);
void graphview_model_set_expanded (GraphviewModel *self, guint run, guint block, gboolean expanded);
void graphview_model_expand_all (GraphviewModel *self);
void graphview_model_collapse_all (GraphviewModel *self);
/* Expands every block whose name, or the name of one of its ops, matches @glob
 * (g_pattern_match_simple). Returns how many blocks it expanded. */
guint graphview_model_expand_matching (GraphviewModel *self, const char *glob);
/* Expands the first block block node @item stands for (the others stay folded), or collapses
 * the expanded block that op node @item is in. FALSE when the item is a loose op. */
gboolean graphview_model_toggle_item (GraphviewModel *self, guint item);

guint graphview_model_get_n_items (GraphviewModel *self);
const GraphviewItem *graphview_model_get_item (GraphviewModel *self, guint item);
/* The visible item that shows @op. */
guint graphview_model_get_item_of_op (GraphviewModel *self, guint op);
/* The name an op node shows: relative to its block inside an expanded block
 * ("self_attn.q_proj"), else the whole name. Borrowed from the graph. */
const char *graphview_model_get_op_label (GraphviewModel *self, guint op);
/* Op name, or "model.layers.0-79 x80" / "model.layers.5" for a block node. */
char *graphview_model_dup_item_label (GraphviewModel *self, guint item);

guint graphview_model_get_n_edges (GraphviewModel *self);
const GraphviewEdge *graphview_model_get_edge (GraphviewModel *self, guint edge);
const GraphviewEdgeRef *graphview_model_get_ref (GraphviewModel *self, guint ref);
/* The visible edge between two items, or -1. */
int graphview_model_find_edge (GraphviewModel *self, guint source, guint target);

G_END_DECLS
