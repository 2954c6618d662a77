#define G_LOG_DOMAIN "graphview-layout"

#include "config.h"

#include "graphview-layout.h"
#include "graphview-private.h"

typedef struct
{
  double *points;
  guint n_points;
  GraphviewRect bounds;
} EdgeRoute;

struct _GraphviewLayout
{
  gatomicrefcount ref_count;
  guint serial;
  double width, height;
  guint n_items;
  GraphviewRect *items;
  guint n_edges;
  EdgeRoute *edges;
  GArray *frames;
  GraphviewItem *item_ids; /* the model's items it was made for */
  GArray *groups;          /* GraphviewGroup */
  double base_width;
  gboolean stable;
};

GraphviewLayout *
graphview_layout_new (guint serial, guint n_items, guint n_edges)
{
  GraphviewLayout *self = g_new0 (GraphviewLayout, 1);
  g_atomic_ref_count_init (&self->ref_count);
  self->serial = serial;
  self->n_items = n_items;
  self->items = g_new0 (GraphviewRect, MAX (n_items, 1));
  self->n_edges = n_edges;
  self->edges = g_new0 (EdgeRoute, MAX (n_edges, 1));
  self->frames = g_array_new (FALSE, FALSE, sizeof (GraphviewFrame));
  self->groups = g_array_new (FALSE, FALSE, sizeof (GraphviewGroup));
  return self;
}

GraphviewLayout *
graphview_layout_ref (GraphviewLayout *self)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_atomic_ref_count_inc (&self->ref_count);
  return self;
}

void
graphview_layout_unref (GraphviewLayout *self)
{
  g_return_if_fail (self != NULL);
  if (!g_atomic_ref_count_dec (&self->ref_count))
    return;
  for (guint e = 0; e < self->n_edges; e++)
    g_free (self->edges[e].points);
  g_free (self->edges);
  g_free (self->items);
  g_array_unref (self->frames);
  g_array_unref (self->groups);
  g_free (self->item_ids);
  g_free (self);
}

void
graphview_layout_set_bounds (GraphviewLayout *self, double width, double height)
{
  self->width = width;
  self->height = height;
}

GraphviewRect *
graphview_layout_peek_item_rect (GraphviewLayout *self, guint item)
{
  g_assert (item < self->n_items);
  return &self->items[item];
}

void
graphview_layout_take_edge_points (GraphviewLayout *self, guint edge, double *points,
                                   guint n_points)
{
  g_assert (edge < self->n_edges);
  g_assert (n_points >= 2);
  EdgeRoute *route = &self->edges[edge];
  g_free (route->points);
  route->points = points;
  route->n_points = n_points;
  double x0 = G_MAXDOUBLE, y0 = G_MAXDOUBLE, x1 = -G_MAXDOUBLE, y1 = -G_MAXDOUBLE;
  /* The control polygon contains the curve. */
  for (guint i = 0; i < n_points; i++)
    {
      x0 = MIN (x0, points[2 * i]);
      x1 = MAX (x1, points[2 * i]);
      y0 = MIN (y0, points[2 * i + 1]);
      y1 = MAX (y1, points[2 * i + 1]);
    }
  route->bounds = (GraphviewRect){ x0, y0, x1 - x0, y1 - y0 };
}

void
graphview_layout_add_frame (GraphviewLayout *self, const GraphviewFrame *frame)
{
  g_array_append_val (self->frames, *frame);
}

guint
graphview_layout_get_serial (GraphviewLayout *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->serial;
}

void
graphview_layout_get_bounds (GraphviewLayout *self, double *width, double *height)
{
  g_return_if_fail (self != NULL);
  if (width)
    *width = self->width;
  if (height)
    *height = self->height;
}

guint
graphview_layout_get_n_items (GraphviewLayout *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->n_items;
}

const GraphviewRect *
graphview_layout_get_item_rect (GraphviewLayout *self, guint item)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (item < self->n_items, NULL);
  return &self->items[item];
}

int
graphview_layout_item_at (GraphviewLayout *self, double x, double y)
{
  g_return_val_if_fail (self != NULL, -1);
  for (guint i = self->n_items; i-- > 0;)
    {
      const GraphviewRect *r = &self->items[i];
      if (x >= r->x && x <= r->x + r->width && y >= r->y && y <= r->y + r->height)
        return (int)i;
    }
  return -1;
}

guint
graphview_layout_get_n_edges (GraphviewLayout *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->n_edges;
}

const double *
graphview_layout_get_edge_points (GraphviewLayout *self, guint edge, guint *n_points)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (edge < self->n_edges, NULL);
  *n_points = self->edges[edge].n_points;
  return self->edges[edge].points;
}

const GraphviewRect *
graphview_layout_get_edge_bounds (GraphviewLayout *self, guint edge)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (edge < self->n_edges, NULL);
  return &self->edges[edge].bounds;
}

void
graphview_layout_get_edge_midpoint (GraphviewLayout *self, guint edge, double *x, double *y)
{
  g_return_if_fail (self != NULL);
  g_return_if_fail (edge < self->n_edges);
  const EdgeRoute *route = &self->edges[edge];
  guint n_segments = (route->n_points - 1) / 3;
  if (n_segments == 0)
    {
      *x = (route->points[0] + route->points[2 * (route->n_points - 1)]) / 2;
      *y = (route->points[1] + route->points[2 * (route->n_points - 1) + 1]) / 2;
      return;
    }
  /* The middle of the middle segment (t = 0.5), or the joint between the two middle ones. */
  const double *p = route->points + 2 * 3 * (n_segments / 2);
  if (n_segments % 2 == 0)
    {
      *x = p[0];
      *y = p[1];
      return;
    }
  *x = 0.125 * p[0] + 0.375 * p[2] + 0.375 * p[4] + 0.125 * p[6];
  *y = 0.125 * p[1] + 0.375 * p[3] + 0.375 * p[5] + 0.125 * p[7];
}

guint
graphview_layout_get_n_frames (GraphviewLayout *self)
{
  g_return_val_if_fail (self != NULL, 0);
  return self->frames->len;
}

const GraphviewFrame *
graphview_layout_get_frame (GraphviewLayout *self, guint frame)
{
  g_return_val_if_fail (self != NULL, NULL);
  g_return_val_if_fail (frame < self->frames->len, NULL);
  return &g_array_index (self->frames, GraphviewFrame, frame);
}

gboolean
graphview_rect_intersects (const GraphviewRect *a, const GraphviewRect *b)
{
  return a->x < b->x + b->width && b->x < a->x + a->width && a->y < b->y + b->height
         && b->y < a->y + a->height;
}

void
graphview_layout_set_items (GraphviewLayout *self, const GraphviewItem *items)
{
  g_free (self->item_ids);
  self->item_ids = g_memdup2 (items, sizeof (GraphviewItem) * MAX (self->n_items, 1));
}

const GraphviewItem *
graphview_layout_peek_items (GraphviewLayout *self)
{
  return self->item_ids;
}

void
graphview_layout_add_group (GraphviewLayout *self, const GraphviewGroup *group)
{
  g_array_append_val (self->groups, *group);
}

guint
graphview_layout_get_n_groups (GraphviewLayout *self)
{
  return self->groups->len;
}

const GraphviewGroup *
graphview_layout_get_group (GraphviewLayout *self, guint group)
{
  g_assert (group < self->groups->len);
  return &g_array_index (self->groups, GraphviewGroup, group);
}

void
graphview_layout_set_base_width (GraphviewLayout *self, double width)
{
  self->base_width = width;
}

double
graphview_layout_get_base_width (GraphviewLayout *self)
{
  return self->base_width;
}

void
graphview_layout_set_stable (GraphviewLayout *self, gboolean stable)
{
  self->stable = stable;
}

gboolean
graphview_layout_is_stable (GraphviewLayout *self)
{
  g_return_val_if_fail (self != NULL, FALSE);
  return self->stable;
}
