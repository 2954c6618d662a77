/* graphview-layout.h: positions of a model's visible items and the routes of its edges.
 *
 * An immutable, reference-counted result of GraphviewLayouter, safe to share between threads.
 * World coordinates are points, y down, the origin at the top-left of the bounds. A layout
 * belongs to one state of one model (graphview_layout_get_serial()); a plan never changes it,
 * so positions stay put while strategies, costs and overlays change.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct
{
  double x, y; /* top-left */
  double width, height;
} GraphviewRect;

/* The frame around an expanded block, titled with its name. */
typedef struct
{
  GraphviewRect rect;
  int run;
  guint block;
} GraphviewFrame;

typedef struct _GraphviewLayout GraphviewLayout;

GraphviewLayout *graphview_layout_ref (GraphviewLayout *self);
void graphview_layout_unref (GraphviewLayout *self);

guint graphview_layout_get_serial (GraphviewLayout *self);
void graphview_layout_get_bounds (GraphviewLayout *self, double *width, double *height);

guint graphview_layout_get_n_items (GraphviewLayout *self);
const GraphviewRect *graphview_layout_get_item_rect (GraphviewLayout *self, guint item);
/* The topmost item whose box contains the point, or -1. */
int graphview_layout_item_at (GraphviewLayout *self, double x, double y);

guint graphview_layout_get_n_edges (GraphviewLayout *self);
/* A chain of cubic Bezier segments: 3k + 1 points as x, y pairs, from source to target. */
const double *graphview_layout_get_edge_points (GraphviewLayout *self, guint edge, guint *n_points);
const GraphviewRect *graphview_layout_get_edge_bounds (GraphviewLayout *self, guint edge);
/* The point halfway along the chain (where the cost badge goes). */
void graphview_layout_get_edge_midpoint (GraphviewLayout *self, guint edge, double *x, double *y);

guint graphview_layout_get_n_frames (GraphviewLayout *self);
const GraphviewFrame *graphview_layout_get_frame (GraphviewLayout *self, guint frame);

/* TRUE when the layouter placed this layout from the one shown before it (stable expansion:
 * the groups the change did not touch kept their places), FALSE when dot placed every group. */
gboolean graphview_layout_is_stable (GraphviewLayout *self);

/* Rectangles intersect (touching edges do not count). */
gboolean graphview_rect_intersects (const GraphviewRect *a, const GraphviewRect *b);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (GraphviewLayout, graphview_layout_unref)

G_END_DECLS
