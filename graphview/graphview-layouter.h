/* graphview-layouter.h: lays out a GraphviewModel with Graphviz dot, off the calling thread.
 *
 * Graphviz is not thread-safe, so one worker thread for the whole process makes every
 * Graphviz call; layouters queue jobs to it. A job is a snapshot of the model taken on the
 * calling thread, so the model may change while its layout runs (the result carries the
 * serial it was made for).
 *
 * The layout is hierarchical, because flat dot is superlinear (5k nodes take over a minute):
 * the visible items are cut into groups (loose ops between blocks, each expanded block, each
 * block node), groups over GRAPHVIEW_MAX_GROUP ops are split, each group is laid out alone,
 * and a skeleton graph of the groups places them. Groups with the same structure (every layer
 * of a transformer) are laid out once per layouter and reused, translated.
 */
#pragma once

#include <gio/gio.h>

#include "graphview-layout.h"
#include "graphview-model.h"

G_BEGIN_DECLS

#define GRAPHVIEW_TYPE_LAYOUTER (graphview_layouter_get_type ())
G_DECLARE_FINAL_TYPE (GraphviewLayouter, graphview_layouter, GRAPHVIEW, LAYOUTER, GObject)

GraphviewLayouter *graphview_layouter_new (void);

void graphview_layouter_layout_async (GraphviewLayouter *self, GraphviewModel *model,
                                      GCancellable *cancellable, GAsyncReadyCallback callback,
                                      gpointer user_data);
GraphviewLayout *graphview_layouter_layout_finish (GraphviewLayouter *self, GAsyncResult *result,
                                                   GError **error);
/* Waits for the worker (for the CLI and tests; never on the GTK thread). */
GraphviewLayout *graphview_layouter_layout (GraphviewLayouter *self, GraphviewModel *model,
                                            GCancellable *cancellable, GError **error);

/* Stable expansion (README "Stable expansion"): lays out @model's current folding keeping the
 * places @previous (a layout of an earlier folding of the same model, or NULL) gave the items
 * the change left alone: those before the changed groups keep their boxes, those after keep
 * their x and move by one shift that makes room for what was unfolded; no skeleton dot run.
 * Only for a change of one block (a click, Return, a named block): Expand All, Collapse All
 * and globs get the plain layout (graphview_layout_is_stable() FALSE), the one the CLI draws,
 * as do a NULL @previous, one of other items, and a change whose groups would overlap a group
 * that keeps its place. */
void graphview_layouter_layout_stable_async (GraphviewLayouter *self, GraphviewModel *model,
                                             GraphviewLayout *previous, GCancellable *cancellable,
                                             GAsyncReadyCallback callback, gpointer user_data);
GraphviewLayout *graphview_layouter_layout_stable (GraphviewLayouter *self, GraphviewModel *model,
                                                   GraphviewLayout *previous,
                                                   GCancellable *cancellable, GError **error);

/* How many times this layouter ran dot (groups and skeletons), and how many group layouts it
 * holds for reuse. */
guint graphview_layouter_get_n_dot_runs (GraphviewLayouter *self);
guint graphview_layouter_get_n_cached (GraphviewLayouter *self);

/* For benchmarks: plain dot over every op of @graph as one flat graph, with the same node
 * sizes and default settings, on the worker. Returns the seconds dot took, or a negative
 * value with @error set. */
double graphview_layouter_time_flat (GraphviewLayouter *self, PlannerGraph *graph,
                                     GCancellable *cancellable, GError **error);

G_END_DECLS
