#define G_LOG_DOMAIN "planner-redistribute"

#include "config.h"

#include <string.h>

#include "planner-redistribute.h"

struct _PlannerRedistributor
{
  PlannerMesh mesh;
  PlannerHardware *hw;
  GHashTable *cache;   /* CacheKey* -> PlannerRedistPath* */
};

/* Zeroed before filling, so memcmp and hashing over the whole struct are exact. Layouts are
 * packed into one byte per mesh axis: keys stay small on the propagation's hot path. */
typedef struct
{
  guint64 from;
  guint64 to;
  gint64 shape[PLANNER_MAX_RANK];
  guint32 rank;
  guint32 dtype;
} CacheKey;

/* Per axis: 0 replicated, 0xff partial, else 1 + dim + 16 * position in the dim's list. */
static guint64
layout_code (const PlannerLayout *l)
{
  guint64 code = 0;
  for (guint d = 0; d < l->rank; d++)
    for (guint i = 0; i < l->n_axes[d]; i++)
      code |= (guint64) (1 + d + 16 * i) << (8 * l->axes[d][i]);
  for (guint32 m = l->partial; m != 0; m &= m - 1)
    code |= (guint64) 0xff << (8 * (guint) __builtin_ctz (m));
  return code;
}

static void
canonical_layout (PlannerLayout *out, const PlannerLayout *in)
{
  memset (out, 0, sizeof *out);
  out->rank = in->rank;
  out->partial = in->partial;
  for (guint d = 0; d < in->rank; d++)
    {
      out->n_axes[d] = in->n_axes[d];
      memcpy (out->axes[d], in->axes[d], in->n_axes[d]);
    }
}

static guint
cache_key_hash (gconstpointer data)
{
  return planner_hash_bytes (data, sizeof (CacheKey));
}

static gboolean
cache_key_equal (gconstpointer a, gconstpointer b)
{
  return memcmp (a, b, sizeof (CacheKey)) == 0;
}

guint
planner_hash_bytes (gconstpointer data, gsize size)
{
  /* Word at a time: this hash sits on the propagation's hot path. */
  const guint8 *p = data;
  guint64 h = 0x9e3779b97f4a7c15ull ^ size;
  gsize i = 0;
  for (; i + 8 <= size; i += 8)
    {
      guint64 w;
      memcpy (&w, p + i, 8);
      h = (h ^ w) * 0xff51afd7ed558ccdull;
      h ^= h >> 32;
    }
  for (; i < size; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return (guint) (h ^ (h >> 29));
}

static void
path_free (gpointer data)
{
  PlannerRedistPath *path = data;
  g_free (path->steps);
  g_free (path);
}

PlannerRedistributor *
planner_redistributor_new (const PlannerMesh *mesh, const PlannerHardware *hw)
{
  g_return_val_if_fail (mesh != NULL && hw != NULL, NULL);
  PlannerRedistributor *self = g_new0 (PlannerRedistributor, 1);
  self->mesh = *mesh;
  self->hw = planner_hardware_copy (hw);
  self->cache = g_hash_table_new_full (cache_key_hash, cache_key_equal, g_free, path_free);
  return self;
}

void
planner_redistributor_free (PlannerRedistributor *self)
{
  if (self == NULL)
    return;
  g_hash_table_unref (self->cache);
  planner_hardware_free (self->hw);
  g_free (self);
}

const PlannerMesh *
planner_redistributor_get_mesh (PlannerRedistributor *self)
{
  return &self->mesh;
}

const PlannerHardware *
planner_redistributor_get_hardware (PlannerRedistributor *self)
{
  return self->hw;
}

static void
remove_last_axis (PlannerLayout *l, guint d)
{
  l->n_axes[d]--;
  l->axes[d][l->n_axes[d]] = 0;
}

gboolean
planner_redist_step_apply (PlannerStepKind kind, guint axis, int dim, int dim_to,
                           const PlannerLayout *before, PlannerLayout *after)
{
  guint32 bit = 1u << axis;
  int owner = planner_layout_dim_of_axis (before, axis);
  gboolean is_last = owner >= 0 && before->axes[owner][before->n_axes[owner] - 1] == axis;

  canonical_layout (after, before);
  switch (kind)
    {
    case PLANNER_STEP_ALL_REDUCE:
      if (!(before->partial & bit))
        return FALSE;
      after->partial &= ~bit;
      return TRUE;
    case PLANNER_STEP_REDUCE_SCATTER:
      if (!(before->partial & bit) || dim < 0 || dim >= before->rank)
        return FALSE;
      after->partial &= ~bit;
      after->axes[dim][after->n_axes[dim]++] = axis;
      return TRUE;
    case PLANNER_STEP_ALL_GATHER:
      if (!is_last || owner != dim)
        return FALSE;
      remove_last_axis (after, dim);
      return TRUE;
    case PLANNER_STEP_ALL_TO_ALL:
      if (!is_last || owner != dim || dim_to < 0 || dim_to >= before->rank || dim_to == dim)
        return FALSE;
      remove_last_axis (after, dim);
      after->axes[dim_to][after->n_axes[dim_to]++] = axis;
      return TRUE;
    case PLANNER_STEP_SLICE:
      if (owner >= 0 || (before->partial & bit) || dim < 0 || dim >= before->rank)
        return FALSE;
      after->axes[dim][after->n_axes[dim]++] = axis;
      return TRUE;
    default:
      return FALSE;
    }
}

/* ---- Dijkstra over layouts ---- */

typedef struct
{
  PlannerLayout layout;
  double dist;
  int prev;               /* node index, -1 at the source */
  PlannerRedistStep step; /* the step from prev to here */
  gboolean done;
} Node;

typedef struct
{
  double dist;
  guint seq;              /* insertion order breaks ties: searches are deterministic */
  guint node;
} HeapItem;

typedef struct
{
  PlannerRedistributor *self;
  const gint64 *shape;
  guint rank;
  guint elem;
  GArray *nodes;
  GHashTable *index;      /* owned PlannerLayout copy -> node index + 1 */
  GArray *heap;
  guint seq;
} Search;

static gboolean
heap_less (const HeapItem *a, const HeapItem *b)
{
  return a->dist < b->dist || (a->dist == b->dist && a->seq < b->seq);
}

static void
heap_push (GArray *heap, HeapItem item)
{
  g_array_append_val (heap, item);
  HeapItem *h = (HeapItem *) heap->data;
  guint i = heap->len - 1;
  while (i > 0)
    {
      guint parent = (i - 1) / 2;
      if (!heap_less (&h[i], &h[parent]))
        break;
      HeapItem t = h[i];
      h[i] = h[parent];
      h[parent] = t;
      i = parent;
    }
}

static HeapItem
heap_pop (GArray *heap)
{
  HeapItem *h = (HeapItem *) heap->data;
  HeapItem top = h[0];
  h[0] = h[heap->len - 1];
  g_array_set_size (heap, heap->len - 1);
  guint i = 0, n = heap->len;
  for (;;)
    {
      guint l = 2 * i + 1, r = l + 1, m = i;
      if (l < n && heap_less (&h[l], &h[m]))
        m = l;
      if (r < n && heap_less (&h[r], &h[m]))
        m = r;
      if (m == i)
        break;
      HeapItem t = h[i];
      h[i] = h[m];
      h[m] = t;
      i = m;
    }
  return top;
}

static guint
layout_hash_cb (gconstpointer p)
{
  return planner_layout_hash (p);
}

static gboolean
layout_equal_cb (gconstpointer a, gconstpointer b)
{
  return planner_layout_equal (a, b);
}

static guint64
local_bytes (Search *s, const PlannerLayout *l)
{
  guint64 n = s->elem;
  for (guint d = 0; d < s->rank; d++)
    n *= (guint64) s->shape[d] / planner_layout_dim_splits (l, &s->self->mesh, d);
  return n;
}

static gboolean
divisible (Search *s, const PlannerLayout *l, guint d)
{
  return s->shape[d] % (gint64) planner_layout_dim_splits (l, &s->self->mesh, d) == 0;
}

static void
relax (Search *s, guint from, PlannerStepKind kind, guint axis, int dim, int dim_to)
{
  Node *src = &g_array_index (s->nodes, Node, from);
  PlannerLayout after;
  if (!planner_redist_step_apply (kind, axis, dim, dim_to, &src->layout, &after))
    return;
  if (dim >= 0 && !divisible (s, &after, dim))
    return;
  if (dim_to >= 0 && !divisible (s, &after, dim_to))
    return;

  PlannerRedistStep step = { 0 };
  step.kind = kind;
  step.axis = (guint8) axis;
  step.dim = (gint8) dim;
  step.dim_to = (gint8) dim_to;
  step.before = src->layout;
  step.after = after;
  step.n_in = local_bytes (s, &src->layout);
  step.n_out = local_bytes (s, &after);
  step.bytes = planner_cost_step_bytes (kind, s->self->mesh.sizes[axis], step.n_in, step.n_out);
  step.time_s = planner_cost_step_time (s->self->hw, &s->self->mesh, kind, axis, step.n_in,
                                        step.n_out);
  double dist = src->dist + step.time_s;

  guint idx = GPOINTER_TO_UINT (g_hash_table_lookup (s->index, &after));
  if (idx == 0)
    {
      Node node = { after, dist, (int) from, step, FALSE };
      g_array_append_val (s->nodes, node);
      idx = s->nodes->len;
      g_hash_table_insert (s->index, g_memdup2 (&after, sizeof after), GUINT_TO_POINTER (idx));
    }
  else
    {
      Node *n = &g_array_index (s->nodes, Node, idx - 1);
      if (n->done || dist >= n->dist)
        return;
      n->dist = dist;
      n->prev = (int) from;
      n->step = step;
    }
  heap_push (s->heap, (HeapItem){ dist, s->seq++, idx - 1 });
}

static void
expand (Search *s, guint from)
{
  const PlannerMesh *mesh = &s->self->mesh;
  PlannerLayout l = g_array_index (s->nodes, Node, from).layout;

  for (guint a = 0; a < mesh->n_axes; a++)
    {
      /* A step over an axis of size 1 moves nothing, and the pipeline axis splits no
       * tensor: neither is in canonical layouts (planner_layout_normalize). */
      if (planner_mesh_unit_axes (mesh) & (1u << a))
        continue;
      if (l.partial & (1u << a))
        {
          relax (s, from, PLANNER_STEP_ALL_REDUCE, a, -1, -1);
          for (guint d = 0; d < l.rank; d++)
            relax (s, from, PLANNER_STEP_REDUCE_SCATTER, a, (int) d, -1);
          continue;
        }
      int owner = planner_layout_dim_of_axis (&l, a);
      if (owner >= 0)
        {
          relax (s, from, PLANNER_STEP_ALL_GATHER, a, owner, -1);
          for (guint d = 0; d < l.rank; d++)
            if ((int) d != owner)
              relax (s, from, PLANNER_STEP_ALL_TO_ALL, a, owner, (int) d);
          continue;
        }
      for (guint d = 0; d < l.rank; d++)
        relax (s, from, PLANNER_STEP_SLICE, a, (int) d, -1);
    }
}

static PlannerRedistPath *
search (PlannerRedistributor *self, const PlannerLayout *from, const PlannerLayout *to,
        const gint64 *shape, guint rank, PlannerDType dtype)
{
  PlannerRedistPath *path = g_new0 (PlannerRedistPath, 1);

  if (planner_layout_equal (from, to))
    {
      path->reachable = TRUE;
      return path;
    }
  /* No step creates partial sums, and every mesh axis must be in range. */
  if ((to->partial & ~from->partial) != 0 || from->rank != to->rank
      || !planner_layout_is_well_formed (from, &self->mesh)
      || !planner_layout_is_well_formed (to, &self->mesh))
    {
      path->time_s = G_MAXDOUBLE;
      return path;
    }

  Search s = { self, shape, rank, planner_dtype_size (dtype) };
  s.nodes = g_array_sized_new (FALSE, FALSE, sizeof (Node), 64);
  s.heap = g_array_new (FALSE, FALSE, sizeof (HeapItem));
  s.index = g_hash_table_new_full (layout_hash_cb, layout_equal_cb, g_free, NULL);

  Node start = { 0 };
  canonical_layout (&start.layout, from);
  start.prev = -1;
  g_array_append_val (s.nodes, start);
  g_hash_table_insert (s.index, g_memdup2 (&start.layout, sizeof start.layout),
                       GUINT_TO_POINTER (1));
  heap_push (s.heap, (HeapItem){ 0, s.seq++, 0 });

  int found = -1;
  while (s.heap->len > 0)
    {
      HeapItem top = heap_pop (s.heap);
      Node *n = &g_array_index (s.nodes, Node, top.node);
      if (n->done || top.dist > n->dist)
        continue;
      n->done = TRUE;
      if (planner_layout_equal (&n->layout, to))
        {
          found = (int) top.node;
          break;
        }
      expand (&s, top.node);
    }

  if (found < 0)
    path->time_s = G_MAXDOUBLE;
  else
    {
      guint n_steps = 0;
      for (int i = found; g_array_index (s.nodes, Node, i).prev >= 0;
           i = g_array_index (s.nodes, Node, i).prev)
        n_steps++;
      path->reachable = TRUE;
      path->n_steps = n_steps;
      path->steps = g_new (PlannerRedistStep, n_steps);
      guint k = n_steps;
      for (int i = found; g_array_index (s.nodes, Node, i).prev >= 0;
           i = g_array_index (s.nodes, Node, i).prev)
        path->steps[--k] = g_array_index (s.nodes, Node, i).step;
      /* The path's cost is the sum over exactly its steps. */
      for (guint i = 0; i < n_steps; i++)
        {
          path->time_s += path->steps[i].time_s;
          path->bytes += path->steps[i].bytes;
        }
    }
  g_hash_table_unref (s.index);
  g_array_unref (s.nodes);
  g_array_unref (s.heap);
  return path;
}

const PlannerRedistPath *
planner_redistributor_find (PlannerRedistributor *self, const PlannerLayout *from,
                            const PlannerLayout *to, const gint64 *shape, guint rank,
                            PlannerDType dtype)
{
  g_return_val_if_fail (self != NULL && from != NULL && to != NULL, NULL);
  g_return_val_if_fail (rank <= PLANNER_MAX_RANK, NULL);

  /* Axes of size 1 are no-ops: a layout naming one is the same placement as without it, and
   * the search, which never steps over such an axis, sees only that canonical form. */
  PlannerLayout a, b;
  canonical_layout (&a, from);
  canonical_layout (&b, to);
  planner_layout_normalize (&a, &self->mesh);
  planner_layout_normalize (&b, &self->mesh);

  CacheKey key;
  memset (&key, 0, sizeof key);
  key.from = layout_code (&a);
  key.to = layout_code (&b);
  memcpy (key.shape, shape, rank * sizeof (gint64));
  key.rank = rank;
  key.dtype = dtype;

  PlannerRedistPath *path = g_hash_table_lookup (self->cache, &key);
  if (path == NULL)
    {
      path = search (self, &a, &b, shape, rank, dtype);
      g_hash_table_insert (self->cache, g_memdup2 (&key, sizeof key), path);
    }
  return path;
}

double
planner_redistributor_cost (PlannerRedistributor *self, const PlannerLayout *from,
                            const PlannerLayout *to, const gint64 *shape, guint rank,
                            PlannerDType dtype)
{
  if (planner_layout_equal (from, to))
    return 0;
  const PlannerRedistPath *path = planner_redistributor_find (self, from, to, shape, rank, dtype);
  return path->reachable ? path->time_s : G_MAXDOUBLE;
}

/* ---- formatting ---- */

char *
planner_format_bytes (guint64 bytes)
{
  static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  double v = (double) bytes;
  guint u = 0;
  if (bytes < 1024)
    return g_strdup_printf ("%" G_GUINT64_FORMAT " B", bytes);
  while (v >= 1024 && u + 1 < G_N_ELEMENTS (units))
    {
      v /= 1024;
      u++;
    }
  return g_strdup_printf (v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
}

char *
planner_format_time (double seconds)
{
  if (seconds >= G_MAXDOUBLE)
    return g_strdup ("unreachable");
  if (seconds >= 1)
    return g_strdup_printf ("%.2f s", seconds);
  if (seconds >= 1e-3)
    return g_strdup_printf ("%.2f ms", seconds * 1e3);
  if (seconds >= 1e-6)
    return g_strdup_printf ("%.1f us", seconds * 1e6);
  return g_strdup_printf ("%.0f ns", seconds * 1e9);
}

char *
planner_redist_step_describe (const PlannerRedistStep *step, const PlannerMesh *mesh)
{
  g_autofree char *bytes = planner_format_bytes (step->bytes);
  g_autofree char *time = planner_format_time (step->time_s);
  const char *kind = planner_step_kind_to_string (step->kind);
  const char *axis = mesh->names[step->axis];

  switch (step->kind)
    {
    case PLANNER_STEP_ALL_REDUCE:
      return g_strdup_printf ("%s(%s) %s %s", kind, axis, bytes, time);
    case PLANNER_STEP_ALL_TO_ALL:
      return g_strdup_printf ("%s(%s, dim %d->%d) %s %s", kind, axis, step->dim, step->dim_to,
                              bytes, time);
    default:
      return g_strdup_printf ("%s(%s, dim %d) %s %s", kind, axis, step->dim, bytes, time);
    }
}

char *
planner_redist_path_describe (const PlannerRedistPath *path, const PlannerMesh *mesh)
{
  if (!path->reachable)
    return g_strdup ("unreachable");
  if (path->n_steps == 0)
    return g_strdup ("none");
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < path->n_steps; i++)
    {
      g_autofree char *d = planner_redist_step_describe (&path->steps[i], mesh);
      g_string_append_printf (s, "%s%s", i ? " + " : "", d);
    }
  return g_string_free (s, FALSE);
}
