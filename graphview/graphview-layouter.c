#define G_LOG_DOMAIN "graphview-layouter"

#include "config.h"

#include <gvc.h>
#include <math.h>
#include <string.h>

#include "graphview-layouter.h"
#include "graphview-private.h"

/* Margins of the frame around an expanded block (its title sits in the top one) and around
 * the whole drawing, in points. */
#define FRAME_SIDE 10.0
#define FRAME_TOP 24.0
#define FRAME_BOTTOM 10.0
#define OUTER_MARGIN 24.0
/* The gap between groups stacked by a stable expansion: dot's ranksep (0.5 in), the gap the
 * skeleton leaves between a chain's ranks. */
#define STACK_GAP 36.0

/* Snapshot of a model for the worker ------------------------------------------------------- */

typedef struct
{
  guint source, target; /* local node indices */
  guint edge;           /* model edge */
} UnitEdge;

/* A group: the contiguous items [first_item, first_item + n_nodes). */
typedef struct
{
  char *key; /* cache key; NULL for a single node */
  guint first_item;
  guint n_nodes;
  double *sizes; /* width, height per node */
  GArray *edges; /* UnitEdge */
  gboolean framed;
  int run;
  guint block;
} Unit;

typedef struct
{
  guint serial;
  guint n_items;
  guint n_edges;
  GPtrArray *units;
  guint *item_unit;
  guint *edge_source; /* items */
  guint *edge_target;
  GArray *cross;      /* model edges between units */
  GArray *skeleton;   /* pairs of unit indices, each once */
  PlannerGraph *flat; /* set for graphview_layouter_time_flat() jobs only */
  GraphviewItem *items;      /* the model's items, for the result and for stable expansion */
  GraphviewLayout *previous; /* stable expansion: the layout to keep the places of, or NULL */
} Request;

static void
unit_free (gpointer data)
{
  Unit *unit = data;
  g_free (unit->key);
  g_free (unit->sizes);
  g_array_unref (unit->edges);
  g_free (unit);
}

static void
request_free (gpointer data)
{
  Request *request = data;
  g_clear_pointer (&request->units, g_ptr_array_unref);
  g_free (request->item_unit);
  g_free (request->edge_source);
  g_free (request->edge_target);
  g_clear_pointer (&request->cross, g_array_unref);
  g_clear_pointer (&request->skeleton, g_array_unref);
  g_clear_object (&request->flat);
  g_free (request->items);
  g_clear_pointer (&request->previous, graphview_layout_unref);
  g_free (request);
}

static Unit *
unit_new (guint first_item)
{
  Unit *unit = g_new0 (Unit, 1);
  unit->first_item = first_item;
  unit->edges = g_array_new (FALSE, FALSE, sizeof (UnitEdge));
  unit->run = -1;
  return unit;
}

static Request *
request_new (GraphviewModel *model)
{
  PlannerGraph *graph = graphview_model_get_graph (model);
  Request *request = g_new0 (Request, 1);
  request->serial = graphview_model_get_serial (model);
  request->n_items = graphview_model_get_n_items (model);
  request->n_edges = graphview_model_get_n_edges (model);
  request->units = g_ptr_array_new_with_free_func (unit_free);
  request->item_unit = g_new0 (guint, MAX (request->n_items, 1));
  request->edge_source = g_new0 (guint, MAX (request->n_edges, 1));
  request->edge_target = g_new0 (guint, MAX (request->n_edges, 1));
  request->cross = g_array_new (FALSE, FALSE, sizeof (guint));
  request->skeleton = g_array_new (FALSE, FALSE, sizeof (guint) * 2);
  request->items = g_new (GraphviewItem, MAX (request->n_items, 1));

  Unit *current = NULL;
  for (guint i = 0; i < request->n_items; i++)
    {
      const GraphviewItem *item = graphview_model_get_item (model, i);
      request->items[i] = *item;
      gboolean in_block = item->kind == GRAPHVIEW_ITEM_OP && item->run >= 0;
      gboolean joins
          = current != NULL && item->kind == GRAPHVIEW_ITEM_OP && current->key != NULL
            && current->n_nodes < GRAPHVIEW_MAX_GROUP && current->framed == in_block
            && (!in_block || (current->run == item->run && current->block == item->first_block));
      if (!joins)
        {
          current = unit_new (i);
          current->framed = in_block;
          current->run = in_block ? item->run : -1;
          current->block = in_block ? item->first_block : 0;
          /* A provisional key marks groups that take more ops; replaced below. */
          current->key = item->kind == GRAPHVIEW_ITEM_OP ? g_strdup ("") : NULL;
          g_ptr_array_add (request->units, current);
        }
      current->n_nodes++;
      request->item_unit[i] = request->units->len - 1;
    }

  for (guint u = 0; u < request->units->len; u++)
    {
      Unit *unit = g_ptr_array_index (request->units, u);
      unit->sizes = g_new (double, 2 * unit->n_nodes);
      const GraphviewItem *first = graphview_model_get_item (model, unit->first_item);
      if (first->kind == GRAPHVIEW_ITEM_BLOCK)
        {
          unit->sizes[0] = GRAPHVIEW_BLOCK_WIDTH;
          unit->sizes[1] = GRAPHVIEW_BLOCK_HEIGHT;
        }
      else
        for (guint k = 0; k < unit->n_nodes; k++)
          {
            guint op = first->first_op + k;
            graphview_op_node_size (graph, op, graphview_model_get_op_label (model, op),
                                    &unit->sizes[2 * k], &unit->sizes[2 * k + 1]);
          }
      g_clear_pointer (&unit->key, g_free);
      if (unit->n_nodes > 1)
        {
          const char *name = planner_graph_get_op (graph, first->first_op)->name;
          const char *label = graphview_model_get_op_label (model, first->first_op);
          g_autofree char *sig
              = graphview_signature (graph, first->first_op, unit->n_nodes, label - name);
          unit->key = g_strdup_printf ("%c\n%s", unit->framed ? 'B' : 'L', sig);
        }
    }

  /* Edges: inside one group (dot routes them) or across groups (the skeleton places the
   * groups, and we draw the curve). */
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  for (guint e = 0; e < request->n_edges; e++)
    {
      const GraphviewEdge *edge = graphview_model_get_edge (model, e);
      request->edge_source[e] = edge->source;
      request->edge_target[e] = edge->target;
      guint us = request->item_unit[edge->source];
      guint ut = request->item_unit[edge->target];
      if (us == ut)
        {
          Unit *unit = g_ptr_array_index (request->units, us);
          UnitEdge ue = { edge->source - unit->first_item, edge->target - unit->first_item, e };
          g_array_append_val (unit->edges, ue);
          continue;
        }
      g_array_append_val (request->cross, e);
      guint64 key = ((guint64)us << 32) | ut;
      if (g_hash_table_contains (seen, &key))
        continue;
      g_hash_table_add (seen, g_memdup2 (&key, sizeof key));
      guint pair[2] = { us, ut };
      g_array_append_val (request->skeleton, pair);
    }
  return request;
}

/* Results of one group, cached by key ---------------------------------------------------- */

typedef struct
{
  double width, height;
  double *centers; /* x, y per node */
  guint n_edges;
  double **points; /* per unit edge */
  guint *n_points;
} UnitLayout;

static void
unit_layout_free (gpointer data)
{
  UnitLayout *ul = data;
  for (guint e = 0; e < ul->n_edges; e++)
    g_free (ul->points[e]);
  g_free (ul->points);
  g_free (ul->n_points);
  g_free (ul->centers);
  g_free (ul);
}

/* The worker ------------------------------------------------------------------------------- */

typedef struct
{
  Request *request;  /* owned unless task is set (then the task data) */
  GHashTable *cache; /* a reference to the layouter's */
  gint *dot_runs;    /* the layouter's counter */
  GObject *owner;    /* keeps the counter alive */
  GCancellable *cancellable;
  GTask *task; /* async jobs */
  /* Synchronous jobs: the caller waits on @cond. */
  GMutex mutex;
  GCond cond;
  gboolean done;
  GraphviewLayout *result;
  double seconds;
  GError *error;
} Job;

static GAsyncQueue *jobs;

static char *
inches (double points)
{
  char buffer[G_ASCII_DTOSTR_BUF_SIZE];
  return g_strdup (g_ascii_formatd (buffer, sizeof buffer, "%.4f", points / 72.0));
}

/* Nodes are boxes of the size add_nodes() gives them, edges plain lines. */
static void
set_node_and_edge_defaults (Agraph_t *g)
{
  agattr (g, AGNODE, (char *)"shape", (char *)"box");
  agattr (g, AGNODE, (char *)"fixedsize", (char *)"true");
  /* We draw our own labels; an empty one keeps dot from measuring text. */
  agattr (g, AGNODE, (char *)"label", (char *)"");
  agattr (g, AGNODE, (char *)"width", (char *)"1");
  agattr (g, AGNODE, (char *)"height", (char *)"0.5");
  agattr (g, AGEDGE, (char *)"arrowhead", (char *)"none");
}

static Agraph_t *
new_graph (guint n_nodes, gboolean routed)
{
  Agraph_t *g = agopen ((char *)"g", Agdirected, NULL);
  agattr (g, AGRAPH, (char *)"rankdir", (char *)"TB");
  agattr (g, AGRAPH, (char *)"nodesep", (char *)"0.25");
  agattr (g, AGRAPH, (char *)"ranksep", (char *)"0.5");
  if (n_nodes >= GRAPHVIEW_BIG_GROUP)
    {
      /* Fewer network-simplex and crossing-minimisation passes: big groups would take
       * seconds otherwise, and the result is only slightly less tidy. */
      agattr (g, AGRAPH, (char *)"nslimit", (char *)"2");
      agattr (g, AGRAPH, (char *)"nslimit1", (char *)"2");
      agattr (g, AGRAPH, (char *)"mclimit", (char *)"0.5");
      agattr (g, AGRAPH, (char *)"searchsize", (char *)"30");
      agattr (g, AGRAPH, (char *)"splines", (char *)"line");
    }
  else
    agattr (g, AGRAPH, (char *)"splines", (char *)(routed ? "spline" : "line"));
  set_node_and_edge_defaults (g);
  return g;
}

static Agnode_t **
add_nodes (Agraph_t *g, guint n_nodes, const double *sizes)
{
  Agsym_t *width = agattr (g, AGNODE, (char *)"width", NULL);
  Agsym_t *height = agattr (g, AGNODE, (char *)"height", NULL);
  Agnode_t **nodes = g_new (Agnode_t *, n_nodes);
  for (guint k = 0; k < n_nodes; k++)
    {
      char name[16];
      g_snprintf (name, sizeof name, "n%u", k);
      nodes[k] = agnode (g, name, TRUE);
      g_autofree char *w = inches (sizes[2 * k]);
      g_autofree char *h = inches (sizes[2 * k + 1]);
      agxset (nodes[k], width, w);
      agxset (nodes[k], height, h);
    }
  return nodes;
}

static void
straight_route (double x0, double y0, double x1, double y1, double **points, guint *n_points)
{
  double dy = MAX (24.0, (y1 - y0) / 2);
  double *p = g_new (double, 8);
  p[0] = x0, p[1] = y0;
  p[2] = x0, p[3] = y0 + dy;
  p[4] = x1, p[5] = y1 - dy;
  p[6] = x1, p[7] = y1;
  *points = p;
  *n_points = 4;
}

static UnitLayout *
layout_unit (GVC_t *gvc, const Unit *unit)
{
  UnitLayout *ul = g_new0 (UnitLayout, 1);
  ul->centers = g_new (double, 2 * unit->n_nodes);
  ul->n_edges = unit->edges->len;
  ul->points = g_new0 (double *, MAX (ul->n_edges, 1));
  ul->n_points = g_new0 (guint, MAX (ul->n_edges, 1));

  Agraph_t *g = new_graph (unit->n_nodes, TRUE);
  g_autofree Agnode_t **nodes = add_nodes (g, unit->n_nodes, unit->sizes);
  g_autofree Agedge_t **edges = g_new (Agedge_t *, MAX (ul->n_edges, 1));
  for (guint e = 0; e < ul->n_edges; e++)
    {
      const UnitEdge *ue = &g_array_index (unit->edges, UnitEdge, e);
      edges[e] = agedge (g, nodes[ue->source], nodes[ue->target], NULL, TRUE);
    }
  gvLayout (gvc, g, "dot");

  boxf bb = GD_bb (g);
  ul->width = bb.UR.x - bb.LL.x;
  ul->height = bb.UR.y - bb.LL.y;
  for (guint k = 0; k < unit->n_nodes; k++)
    {
      pointf c = ND_coord (nodes[k]);
      ul->centers[2 * k] = c.x - bb.LL.x;
      ul->centers[2 * k + 1] = bb.UR.y - c.y;
    }
  for (guint e = 0; e < ul->n_edges; e++)
    {
      splines *spl = ED_spl (edges[e]);
      if (spl != NULL && spl->size > 0 && spl->list[0].size >= 4)
        {
          const bezier *bz = &spl->list[0];
          ul->n_points[e] = bz->size;
          ul->points[e] = g_new (double, 2 * bz->size);
          for (guint i = 0; i < (guint)bz->size; i++)
            {
              ul->points[e][2 * i] = bz->list[i].x - bb.LL.x;
              ul->points[e][2 * i + 1] = bb.UR.y - bz->list[i].y;
            }
        }
      else
        {
          const UnitEdge *ue = &g_array_index (unit->edges, UnitEdge, e);
          straight_route (ul->centers[2 * ue->source],
                          ul->centers[2 * ue->source + 1] + unit->sizes[2 * ue->source + 1] / 2,
                          ul->centers[2 * ue->target],
                          ul->centers[2 * ue->target + 1] - unit->sizes[2 * ue->target + 1] / 2,
                          &ul->points[e], &ul->n_points[e]);
        }
    }
  gvFreeLayout (gvc, g);
  agclose (g);
  return ul;
}

/* Places the groups: their boxes as nodes of one more dot graph. */
static void
layout_skeleton (GVC_t *gvc, Request *request, const double *sizes, double *centers, double *width,
                 double *height)
{
  guint n = request->units->len;
  Agraph_t *g = new_graph (n, FALSE);
  g_autofree Agnode_t **nodes = add_nodes (g, n, sizes);
  for (guint i = 0; i < request->skeleton->len; i++)
    {
      const guint *pair = &g_array_index (request->skeleton, guint, 2 * i);
      agedge (g, nodes[pair[0]], nodes[pair[1]], NULL, TRUE);
    }
  gvLayout (gvc, g, "dot");
  boxf bb = GD_bb (g);
  *width = bb.UR.x - bb.LL.x;
  *height = bb.UR.y - bb.LL.y;
  for (guint k = 0; k < n; k++)
    {
      pointf c = ND_coord (nodes[k]);
      centers[2 * k] = c.x - bb.LL.x;
      centers[2 * k + 1] = bb.UR.y - c.y;
    }
  gvFreeLayout (gvc, g);
  agclose (g);
}

static gboolean
same_item (const GraphviewItem *a, const GraphviewItem *b)
{
  return a->kind == b->kind && a->first_op == b->first_op && a->n_ops == b->n_ops
         && a->run == b->run && a->first_block == b->first_block && a->n_blocks == b->n_blocks;
}

/* The unfolded blocks of @n items, in order, as run << 32 | block, each once. */
static GArray *
unfolded_blocks (const GraphviewItem *items, guint n)
{
  GArray *keys = g_array_new (FALSE, FALSE, sizeof (guint64));
  for (guint i = 0; i < n; i++)
    if (items[i].kind == GRAPHVIEW_ITEM_OP && items[i].run >= 0)
      {
        guint64 key = ((guint64)items[i].run << 32) | items[i].first_block;
        if (keys->len == 0 || g_array_index (keys, guint64, keys->len - 1) != key)
          g_array_append_val (keys, key);
      }
  return keys;
}

/* How many blocks are unfolded in one range of items and not in the other: the blocks a
 * change folded or unfolded. Both lists are in op order, so a merge counts them. */
static guint
changed_blocks (const GraphviewItem *a, guint na, const GraphviewItem *b, guint nb)
{
  g_autoptr (GArray) ka = unfolded_blocks (a, na);
  g_autoptr (GArray) kb = unfolded_blocks (b, nb);
  guint i = 0, j = 0, n = 0;
  while (i < ka->len || j < kb->len)
    {
      guint64 x = i < ka->len ? g_array_index (ka, guint64, i) : G_MAXUINT64;
      guint64 y = j < kb->len ? g_array_index (kb, guint64, j) : G_MAXUINT64;
      if (x == y)
        i++, j++;
      else if (x < y)
        i++, n++;
      else
        j++, n++;
    }
  return n;
}

/* Stable expansion (README "Stable expansion"): places the groups from the previous layout
 * instead of the skeleton. The items the change left alone at the start (P) keep their
 * groups' boxes, those at the end (Q) keep their x and move by one whole-point shift, and the
 * groups in between (Y, which replace the old groups X) are stacked from X's top, STACK_GAP
 * apart, centred on the x the first group of X was centred on (kept inside the margin).
 * Folding Y back stacks X again from the same top on the same axis, with the opposite shift,
 * so collapsing restores the places exactly. Returns FALSE (dot places everything) when the
 * previous layout is of other items, the change folds or unfolds more than one block, or Y
 * would overlap a group that keeps its place. */
static gboolean
place_stable (const Request *request, const double *sizes, double *boxes, double *axes,
              double *width, double *height, double *base_width)
{
  GraphviewLayout *prev = request->previous;
  const GraphviewItem *old = graphview_layout_peek_items (prev);
  const GraphviewItem *new = request->items;
  guint n_old = graphview_layout_get_n_items (prev), n_new = request->n_items;
  guint n_groups = graphview_layout_get_n_groups (prev), n_units = request->units->len;
  if (old == NULL || n_old == 0 || n_new == 0 || n_groups == 0 || n_units == 0)
    return FALSE;
  /* Items of the same graph cover the same ops. */
  if (old[0].first_op != new[0].first_op
      || old[n_old - 1].first_op + old[n_old - 1].n_ops
             != new[n_new - 1].first_op + new[n_new - 1].n_ops)
    return FALSE;

  guint p = 0, q = 0;
  while (p < n_old && p < n_new && same_item (&old[p], &new[p]))
    p++;
  while (q < n_old - p && q < n_new - p && same_item (&old[n_old - 1 - q], &new[n_new - 1 - q]))
    q++;

  /* Whole groups inside the common prefix and suffix that were groups before too. */
  guint pu = 0, qu = 0;
  while (pu < n_units && pu < n_groups)
    {
      const Unit *unit = g_ptr_array_index (request->units, pu);
      const GraphviewGroup *g = graphview_layout_get_group (prev, pu);
      if (unit->first_item + unit->n_nodes > p || g->first_item != unit->first_item
          || g->n_items != unit->n_nodes || fabs (g->box.width - sizes[2 * pu]) > 0.5
          || fabs (g->box.height - sizes[2 * pu + 1]) > 0.5)
        break;
      pu++;
    }
  while (qu < n_units - pu && qu < n_groups - pu)
    {
      guint u = n_units - 1 - qu;
      const Unit *unit = g_ptr_array_index (request->units, u);
      const GraphviewGroup *g = graphview_layout_get_group (prev, n_groups - 1 - qu);
      if (unit->first_item < n_new - q || g->first_item + n_new != unit->first_item + n_old
          || g->n_items != unit->n_nodes || fabs (g->box.width - sizes[2 * u]) > 0.5
          || fabs (g->box.height - sizes[2 * u + 1]) > 0.5)
        break;
      qu++;
    }
  guint x_end = n_groups - qu, y_end = n_units - qu;
  if ((pu == x_end) != (pu == y_end))
    return FALSE;
  /* One block folded or unfolded, as a click, Return or a named block does; several at once
   * (Expand All, a glob) get dot's layout, the one shardscope-cli render draws. */
  if (pu < y_end)
    {
      guint x_first = graphview_layout_get_group (prev, pu)->first_item;
      const GraphviewGroup *x_last = graphview_layout_get_group (prev, x_end - 1);
      const Unit *y_first = g_ptr_array_index (request->units, pu);
      const Unit *y_last = g_ptr_array_index (request->units, y_end - 1);
      if (changed_blocks (old + x_first, x_last->first_item + x_last->n_items - x_first,
                          new + y_first->first_item,
                          y_last->first_item + y_last->n_nodes - y_first->first_item)
          > 1)
        return FALSE;
    }

  double shift = 0;
  if (pu < y_end)
    {
      double top = G_MAXDOUBLE, bottom = -G_MAXDOUBLE;
      for (guint g = pu; g < x_end; g++)
        {
          const GraphviewRect *box = &graphview_layout_get_group (prev, g)->box;
          top = MIN (top, box->y);
          bottom = MAX (bottom, box->y + ceil (box->height));
        }
      double axis = graphview_layout_get_group (prev, pu)->axis;
      double y = top;
      for (guint u = pu; u < y_end; u++)
        {
          boxes[2 * u] = MAX (OUTER_MARGIN, round (axis - sizes[2 * u] / 2));
          boxes[2 * u + 1] = y;
          axes[u] = axis;
          y += ceil (sizes[2 * u + 1]) + STACK_GAP;
        }
      shift = (y - STACK_GAP) - bottom;
    }
  for (guint u = 0; u < pu; u++)
    {
      const GraphviewGroup *g = graphview_layout_get_group (prev, u);
      boxes[2 * u] = g->box.x;
      boxes[2 * u + 1] = g->box.y;
      axes[u] = g->axis;
    }
  for (guint u = y_end; u < n_units; u++)
    {
      const GraphviewGroup *g = graphview_layout_get_group (prev, u - y_end + x_end);
      boxes[2 * u] = g->box.x;
      boxes[2 * u + 1] = g->box.y + shift;
      axes[u] = g->axis;
    }

  /* What moved (Y, and Q when the shift is not 0) must not land on what did not. */
  for (guint u = pu; u < n_units; u++)
    {
      if (u >= y_end && shift == 0)
        break;
      GraphviewRect a = { boxes[2 * u], boxes[2 * u + 1], sizes[2 * u], sizes[2 * u + 1] };
      guint others_end = u < y_end ? n_units : pu;
      for (guint v = 0; v < others_end; v++)
        {
          if (v >= pu && v < y_end)
            continue;
          GraphviewRect b = { boxes[2 * v], boxes[2 * v + 1], sizes[2 * v], sizes[2 * v + 1] };
          if (graphview_rect_intersects (&a, &b))
            return FALSE;
        }
    }

  double right = 0, low = 0;
  for (guint u = 0; u < n_units; u++)
    {
      right = MAX (right, boxes[2 * u] + sizes[2 * u]);
      low = MAX (low, boxes[2 * u + 1] + sizes[2 * u + 1]);
    }
  double prev_height;
  graphview_layout_get_bounds (prev, NULL, &prev_height);
  *base_width = graphview_layout_get_base_width (prev);
  *width = MAX (*base_width, right + OUTER_MARGIN);
  *height = MAX (prev_height + shift, low + OUTER_MARGIN);
  return TRUE;
}

static GraphviewLayout *
run_layout (GVC_t *gvc, Job *job, GError **error)
{
  Request *request = job->request;
  guint n_units = request->units->len;
  g_autoptr (GPtrArray) layouts = g_ptr_array_new ();
  g_autofree double *sizes = g_new (double, 2 * MAX (n_units, 1));
  g_autofree double *offsets = g_new (double, 2 * MAX (n_units, 1));

  for (guint u = 0; u < n_units; u++)
    {
      if (g_cancellable_set_error_if_cancelled (job->cancellable, error))
        return NULL;
      Unit *unit = g_ptr_array_index (request->units, u);
      UnitLayout *ul = NULL;
      if (unit->key != NULL)
        {
          ul = g_hash_table_lookup (job->cache, unit->key);
          if (ul == NULL)
            {
              ul = layout_unit (gvc, unit);
              g_atomic_int_inc (job->dot_runs);
              g_hash_table_insert (job->cache, g_strdup (unit->key), ul);
            }
          sizes[2 * u] = ul->width;
          sizes[2 * u + 1] = ul->height;
        }
      else
        {
          sizes[2 * u] = unit->sizes[0];
          sizes[2 * u + 1] = unit->sizes[1];
        }
      offsets[2 * u] = offsets[2 * u + 1] = 0;
      if (unit->framed)
        {
          sizes[2 * u] += 2 * FRAME_SIDE;
          sizes[2 * u + 1] += FRAME_TOP + FRAME_BOTTOM;
          offsets[2 * u] = FRAME_SIDE;
          offsets[2 * u + 1] = FRAME_TOP;
        }
      g_ptr_array_add (layouts, ul);
    }
  if (g_cancellable_set_error_if_cancelled (job->cancellable, error))
    return NULL;

  /* Each group's box (top-left, whole points) and the x it is centred on. */
  g_autofree double *boxes = g_new (double, 2 * MAX (n_units, 1));
  g_autofree double *axes = g_new (double, MAX (n_units, 1));
  double width = 0, height = 0, base_width = 0;
  gboolean stable = request->previous != NULL
                    && place_stable (request, sizes, boxes, axes, &width, &height, &base_width);
  if (!stable)
    {
      g_autofree double *centers = g_new (double, 2 * MAX (n_units, 1));
      if (n_units > 1)
        {
          layout_skeleton (gvc, request, sizes, centers, &width, &height);
          g_atomic_int_inc (job->dot_runs);
        }
      else if (n_units == 1)
        {
          width = sizes[0];
          height = sizes[1];
          centers[0] = width / 2;
          centers[1] = height / 2;
        }
      width += 2 * OUTER_MARGIN;
      height += 2 * OUTER_MARGIN;
      for (guint u = 0; u < n_units; u++)
        {
          /* Whole points, so that every copy of a group is the same picture moved. */
          boxes[2 * u] = round (OUTER_MARGIN + centers[2 * u] - sizes[2 * u] / 2);
          boxes[2 * u + 1] = round (OUTER_MARGIN + centers[2 * u + 1] - sizes[2 * u + 1] / 2);
          axes[u] = OUTER_MARGIN + centers[2 * u];
          /* Rounding may move a box half a point past dot's bounding box. */
          width = MAX (width, boxes[2 * u] + sizes[2 * u] + OUTER_MARGIN);
          height = MAX (height, boxes[2 * u + 1] + sizes[2 * u + 1] + OUTER_MARGIN);
        }
      base_width = width;
    }

  GraphviewLayout *layout
      = graphview_layout_new (request->serial, request->n_items, request->n_edges);
  graphview_layout_set_bounds (layout, width, height);
  graphview_layout_set_items (layout, request->items);
  graphview_layout_set_base_width (layout, base_width);
  graphview_layout_set_stable (layout, stable);
  for (guint u = 0; u < n_units; u++)
    {
      Unit *unit = g_ptr_array_index (request->units, u);
      UnitLayout *ul = g_ptr_array_index (layouts, u);
      double x0 = boxes[2 * u], y0 = boxes[2 * u + 1];
      GraphviewGroup group = {
        unit->first_item, unit->n_nodes, { x0, y0, sizes[2 * u], sizes[2 * u + 1] }, axes[u]
      };
      graphview_layout_add_group (layout, &group);
      if (unit->framed)
        {
          GraphviewFrame frame
              = { { x0, y0, sizes[2 * u], sizes[2 * u + 1] }, unit->run, unit->block };
          graphview_layout_add_frame (layout, &frame);
        }
      double ox = x0 + offsets[2 * u], oy = y0 + offsets[2 * u + 1];
      for (guint k = 0; k < unit->n_nodes; k++)
        {
          GraphviewRect *r = graphview_layout_peek_item_rect (layout, unit->first_item + k);
          double cx = ul ? ul->centers[2 * k] : unit->sizes[0] / 2;
          double cy = ul ? ul->centers[2 * k + 1] : unit->sizes[1] / 2;
          r->width = unit->sizes[2 * k];
          r->height = unit->sizes[2 * k + 1];
          r->x = ox + cx - r->width / 2;
          r->y = oy + cy - r->height / 2;
        }
      for (guint e = 0; ul && e < ul->n_edges; e++)
        {
          const UnitEdge *ue = &g_array_index (unit->edges, UnitEdge, e);
          double *points = g_memdup2 (ul->points[e], sizeof (double) * 2 * ul->n_points[e]);
          for (guint i = 0; i < ul->n_points[e]; i++)
            {
              points[2 * i] += ox;
              points[2 * i + 1] += oy;
            }
          graphview_layout_take_edge_points (layout, ue->edge, points, ul->n_points[e]);
        }
    }
  for (guint i = 0; i < request->cross->len; i++)
    {
      guint e = g_array_index (request->cross, guint, i);
      const GraphviewRect *a = graphview_layout_get_item_rect (layout, request->edge_source[e]);
      const GraphviewRect *b = graphview_layout_get_item_rect (layout, request->edge_target[e]);
      double *points;
      guint n_points;
      straight_route (a->x + a->width / 2, a->y + a->height, b->x + b->width / 2, b->y, &points,
                      &n_points);
      graphview_layout_take_edge_points (layout, e, points, n_points);
    }
  return layout;
}

static double
run_flat (GVC_t *gvc, PlannerGraph *graph)
{
  guint n = planner_graph_get_n_ops (graph);
  g_autofree double *sizes = g_new (double, 2 * MAX (n, 1));
  for (guint k = 0; k < n; k++)
    graphview_op_node_size (graph, k, planner_graph_get_op (graph, k)->name, &sizes[2 * k],
                            &sizes[2 * k + 1]);
  gint64 start = g_get_monotonic_time ();
  Agraph_t *g = agopen ((char *)"flat", Agdirected, NULL);
  set_node_and_edge_defaults (g);
  g_autofree Agnode_t **nodes = add_nodes (g, n, sizes);
  for (guint k = 0; k < n; k++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, k);
      for (guint i = 0; i < op->n_inputs; i++)
        {
          int p = planner_graph_get_tensor (graph, op->inputs[i])->producer;
          if (p >= 0)
            agedge (g, nodes[p], nodes[k], NULL, TRUE);
        }
    }
  gvLayout (gvc, g, "dot");
  gvFreeLayout (gvc, g);
  agclose (g);
  return (g_get_monotonic_time () - start) / 1e6;
}

static void
job_finish_sync (Job *job)
{
  g_mutex_lock (&job->mutex);
  job->done = TRUE;
  g_cond_signal (&job->cond);
  g_mutex_unlock (&job->mutex);
}

static gpointer
worker_main (gpointer data)
{
  /* The only Graphviz context of the process, and the only thread that touches Graphviz. */
  GVC_t *gvc = gvContext ();
  for (;;)
    {
      Job *job = g_async_queue_pop (jobs);
      GError *error = NULL;
      if (job->request->flat != NULL)
        {
          if (!g_cancellable_set_error_if_cancelled (job->cancellable, &error))
            job->seconds = run_flat (gvc, job->request->flat);
          job->error = error;
          job_finish_sync (job);
          continue;
        }
      GraphviewLayout *layout = run_layout (gvc, job, &error);
      if (job->task != NULL)
        {
          GTask *task = job->task;
          if (layout != NULL)
            g_task_return_pointer (task, layout, (GDestroyNotify)graphview_layout_unref);
          else
            g_task_return_error (task, error);
          g_hash_table_unref (job->cache);
          g_object_unref (job->owner);
          g_clear_object (&job->cancellable);
          g_free (job);
          g_object_unref (task);
        }
      else
        {
          job->result = layout;
          job->error = error;
          job_finish_sync (job);
        }
    }
  return NULL;
}

static void
push_job (Job *job)
{
  static gsize started = 0;
  if (g_once_init_enter (&started))
    {
      jobs = g_async_queue_new ();
      /* Lives as long as the process: Graphviz keeps global state anyway. */
      g_thread_unref (g_thread_new ("graphview-layout", worker_main, NULL));
      g_once_init_leave (&started, 1);
    }
  g_async_queue_push (jobs, job);
}

/* The object ------------------------------------------------------------------------------- */

struct _GraphviewLayouter
{
  GObject parent_instance;
  GHashTable *cache; /* key -> UnitLayout, touched by the worker only */
  gint dot_runs;
};

G_DEFINE_FINAL_TYPE (GraphviewLayouter, graphview_layouter, G_TYPE_OBJECT)

static void
graphview_layouter_finalize (GObject *object)
{
  GraphviewLayouter *self = GRAPHVIEW_LAYOUTER (object);
  g_clear_pointer (&self->cache, g_hash_table_unref);
  G_OBJECT_CLASS (graphview_layouter_parent_class)->finalize (object);
}

static void
graphview_layouter_class_init (GraphviewLayouterClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = graphview_layouter_finalize;
}

static void
graphview_layouter_init (GraphviewLayouter *self)
{
  self->cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, unit_layout_free);
}

GraphviewLayouter *
graphview_layouter_new (void)
{
  return g_object_new (GRAPHVIEW_TYPE_LAYOUTER, NULL);
}

static Job *
job_new (GraphviewLayouter *self, Request *request, GCancellable *cancellable)
{
  Job *job = g_new0 (Job, 1);
  job->request = request;
  job->cache = g_hash_table_ref (self->cache);
  job->dot_runs = &self->dot_runs;
  job->owner = g_object_ref (G_OBJECT (self));
  job->cancellable = cancellable ? g_object_ref (cancellable) : NULL;
  g_mutex_init (&job->mutex);
  g_cond_init (&job->cond);
  return job;
}

static void
job_wait_and_free (Job *job)
{
  g_mutex_lock (&job->mutex);
  while (!job->done)
    g_cond_wait (&job->cond, &job->mutex);
  g_mutex_unlock (&job->mutex);
  g_mutex_clear (&job->mutex);
  g_cond_clear (&job->cond);
  request_free (job->request);
  g_hash_table_unref (job->cache);
  g_object_unref (job->owner);
  g_clear_object (&job->cancellable);
  g_free (job);
}

void
graphview_layouter_layout_async (GraphviewLayouter *self, GraphviewModel *model,
                                 GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  graphview_layouter_layout_stable_async (self, model, NULL, cancellable, callback, user_data);
}

void
graphview_layouter_layout_stable_async (GraphviewLayouter *self, GraphviewModel *model,
                                        GraphviewLayout *previous, GCancellable *cancellable,
                                        GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (GRAPHVIEW_IS_LAYOUTER (self));
  g_return_if_fail (GRAPHVIEW_IS_MODEL (model));
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, graphview_layouter_layout_async);
  Request *request = request_new (model);
  request->previous = previous ? graphview_layout_ref (previous) : NULL;
  g_task_set_task_data (task, request, request_free);
  Job *job = job_new (self, request, cancellable);
  g_mutex_clear (&job->mutex);
  g_cond_clear (&job->cond);
  job->task = task;
  push_job (job);
}

GraphviewLayout *
graphview_layouter_layout_finish (GraphviewLayouter *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (GRAPHVIEW_IS_LAYOUTER (self), NULL);
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

GraphviewLayout *
graphview_layouter_layout (GraphviewLayouter *self, GraphviewModel *model,
                           GCancellable *cancellable, GError **error)
{
  return graphview_layouter_layout_stable (self, model, NULL, cancellable, error);
}

GraphviewLayout *
graphview_layouter_layout_stable (GraphviewLayouter *self, GraphviewModel *model,
                                  GraphviewLayout *previous, GCancellable *cancellable,
                                  GError **error)
{
  g_return_val_if_fail (GRAPHVIEW_IS_LAYOUTER (self), NULL);
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (model), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  Request *request = request_new (model);
  request->previous = previous ? graphview_layout_ref (previous) : NULL;
  Job *job = job_new (self, request, cancellable);
  push_job (job);
  GraphviewLayout *result;
  g_mutex_lock (&job->mutex);
  while (!job->done)
    g_cond_wait (&job->cond, &job->mutex);
  g_mutex_unlock (&job->mutex);
  result = job->result;
  if (job->error)
    g_propagate_error (error, job->error);
  job_wait_and_free (job);
  return result;
}

double
graphview_layouter_time_flat (GraphviewLayouter *self, PlannerGraph *graph,
                              GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail (GRAPHVIEW_IS_LAYOUTER (self), -1);
  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), -1);
  Request *request = g_new0 (Request, 1);
  request->flat = g_object_ref (graph);
  Job *job = job_new (self, request, cancellable);
  push_job (job);
  g_mutex_lock (&job->mutex);
  while (!job->done)
    g_cond_wait (&job->cond, &job->mutex);
  g_mutex_unlock (&job->mutex);
  double seconds = job->seconds;
  if (job->error)
    {
      g_propagate_error (error, job->error);
      seconds = -1;
    }
  job_wait_and_free (job);
  return seconds;
}

guint
graphview_layouter_get_n_dot_runs (GraphviewLayouter *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_LAYOUTER (self), 0);
  return g_atomic_int_get (&self->dot_runs);
}

guint
graphview_layouter_get_n_cached (GraphviewLayouter *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_LAYOUTER (self), 0);
  /* Read on the caller's thread while no job runs: callers ask between layouts. */
  return g_hash_table_size (self->cache);
}
