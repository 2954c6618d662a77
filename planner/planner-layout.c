#define G_LOG_DOMAIN "planner-layout"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-layout.h"

void
planner_layout_init_replicated (PlannerLayout *layout, guint rank)
{
  g_assert (rank <= PLANNER_MAX_RANK);
  memset (layout, 0, sizeof *layout);
  layout->rank = rank;
}

gboolean
planner_layout_equal (const PlannerLayout *a, const PlannerLayout *b)
{
  if (a->rank != b->rank || a->partial != b->partial)
    return FALSE;
  for (guint d = 0; d < a->rank; d++)
    {
      if (a->n_axes[d] != b->n_axes[d])
        return FALSE;
      if (memcmp (a->axes[d], b->axes[d], a->n_axes[d]) != 0)
        return FALSE;
    }
  return TRUE;
}

guint
planner_layout_hash (const PlannerLayout *layout)
{
  guint h = layout->rank * 31u + layout->partial * 2654435761u;
  for (guint d = 0; d < layout->rank; d++)
    {
      h = h * 131u + layout->n_axes[d];
      for (guint i = 0; i < layout->n_axes[d]; i++)
        h = h * 17u + layout->axes[d][i] + 1;
    }
  return h;
}

guint32
planner_layout_split_mask (const PlannerLayout *layout)
{
  guint32 mask = 0;
  for (guint d = 0; d < layout->rank; d++)
    for (guint i = 0; i < layout->n_axes[d]; i++)
      mask |= 1u << layout->axes[d][i];
  return mask;
}

int
planner_layout_dim_of_axis (const PlannerLayout *layout, guint axis)
{
  for (guint d = 0; d < layout->rank; d++)
    for (guint i = 0; i < layout->n_axes[d]; i++)
      if (layout->axes[d][i] == axis)
        return (int) d;
  return -1;
}

guint64
planner_layout_dim_splits (const PlannerLayout *layout, const PlannerMesh *mesh, guint dim)
{
  guint64 n = 1;
  for (guint i = 0; i < layout->n_axes[dim]; i++)
    n *= mesh->sizes[layout->axes[dim][i]];
  return n;
}

void
planner_layout_normalize (PlannerLayout *layout, const PlannerMesh *mesh)
{
  guint32 unit = planner_mesh_unit_axes (mesh);
  if (unit == 0)
    return;
  layout->partial &= ~unit;
  for (guint d = 0; d < layout->rank; d++)
    {
      guint n = 0;
      for (guint i = 0; i < layout->n_axes[d]; i++)
        {
          guint a = layout->axes[d][i];
          /* Out-of-range axes are left for validation to name. */
          if (a < PLANNER_MAX_AXES && (unit & (1u << a)))
            continue;
          layout->axes[d][n++] = (guint8)a;
        }
      for (guint i = n; i < layout->n_axes[d]; i++)
        layout->axes[d][i] = 0;
      layout->n_axes[d] = (guint8)n;
    }
}

gboolean
planner_layout_is_well_formed (const PlannerLayout *layout, const PlannerMesh *mesh)
{
  guint32 seen = layout->partial;
  if (layout->rank > PLANNER_MAX_RANK || (layout->partial >> mesh->n_axes) != 0)
    return FALSE;
  for (guint d = 0; d < layout->rank; d++)
    for (guint i = 0; i < layout->n_axes[d]; i++)
      {
        guint a = layout->axes[d][i];
        if (a >= mesh->n_axes || (seen & (1u << a)))
          return FALSE;
        seen |= 1u << a;
      }
  return TRUE;
}

static void
append_dim_axes (GString *s, const PlannerLayout *layout, const PlannerMesh *mesh, guint d)
{
  for (guint i = 0; i < layout->n_axes[d]; i++)
    g_string_append_printf (s, "%s%s", i ? "+" : "", mesh->names[layout->axes[d][i]]);
}

gboolean
planner_layout_validate (const PlannerLayout *layout, const PlannerMesh *mesh, const gint64 *shape,
                         guint rank, const char *what, GError **error)
{
  guint32 seen = 0;

  if (layout->rank != rank)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                   "%s has rank %u but the layout gives %u dims; write one entry per dim "
                   "('_' for a dim that is not split)",
                   what, rank, layout->rank);
      return FALSE;
    }
  for (guint a = 0; a < mesh->n_axes; a++)
    if (layout->partial & (1u << a))
      seen |= 1u << a;
  if (layout->partial >> mesh->n_axes)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS,
                   "%s: partial names an axis the mesh does not have", what);
      return FALSE;
    }
  for (guint d = 0; d < rank; d++)
    {
      for (guint i = 0; i < layout->n_axes[d]; i++)
        {
          guint a = layout->axes[d][i];
          if (a >= mesh->n_axes)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS,
                           "%s: dim %u names axis #%u, the mesh has %u axes", what, d, a,
                           mesh->n_axes);
              return FALSE;
            }
          if (seen & (1u << a))
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_AXIS_REUSED,
                           "%s: mesh axis %s is used twice in one layout; each axis may split "
                           "one dim or be partial, once",
                           what, mesh->names[a]);
              return FALSE;
            }
          seen |= 1u << a;
        }
      guint64 parts = planner_layout_dim_splits (layout, mesh, d);
      if (shape[d] % (gint64) parts != 0)
        {
          g_autoptr (GString) axes = g_string_new (NULL);
          append_dim_axes (axes, layout, mesh, d);
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE,
                       "%s: dim %u (size %" G_GINT64_FORMAT ") cannot be split over %s (%" G_GUINT64_FORMAT
                       " parts): %" G_GINT64_FORMAT " %% %" G_GUINT64_FORMAT
                       " != 0; use axes whose product divides %" G_GINT64_FORMAT
                       " or leave the dim whole",
                       what, d, shape[d], axes->str, parts, shape[d], parts, shape[d]);
          return FALSE;
        }
    }
  return TRUE;
}

void
planner_layout_local_shape (const PlannerLayout *layout, const PlannerMesh *mesh,
                            const gint64 *shape, gint64 *local_shape)
{
  for (guint d = 0; d < layout->rank; d++)
    local_shape[d] = shape[d] / (gint64) planner_layout_dim_splits (layout, mesh, d);
}

void
planner_layout_local_offset (const PlannerLayout *layout, const PlannerMesh *mesh,
                             const gint64 *shape, const guint coords[PLANNER_MAX_AXES],
                             gint64 *offset)
{
  for (guint d = 0; d < layout->rank; d++)
    {
      /* Axes are major first: the block index is a mixed-radix number over them. */
      guint64 index = 0, parts = 1;
      for (guint i = 0; i < layout->n_axes[d]; i++)
        {
          guint a = layout->axes[d][i];
          index = index * mesh->sizes[a] + coords[a];
          parts *= mesh->sizes[a];
        }
      offset[d] = (gint64) index * (shape[d] / (gint64) parts);
    }
}

/* ---- bracket notation ---- */

static const char *
skip_space (const char *p)
{
  while (g_ascii_isspace (*p))
    p++;
  return p;
}

static const char *
scan_identifier (const char *p, char *out, gsize out_size)
{
  gsize n = 0;
  while (g_ascii_isalnum (p[n]) || p[n] == '_')
    n++;
  if (n == 0 || n >= out_size)
    return NULL;
  memcpy (out, p, n);
  out[n] = '\0';
  return p + n;
}

static gboolean
lookup_axis (const char *text, const PlannerMesh *mesh, const char *name, guint32 *used,
             guint *axis, GError **error)
{
  int a = planner_mesh_axis_index (mesh, name);
  if (a < 0)
    {
      g_autofree char *m = planner_mesh_to_string (mesh);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS,
                   "layout '%s': axis '%s' is not in the mesh %s; use one of its axis names",
                   text, name, m);
      return FALSE;
    }
  if (*used & (1u << a))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_AXIS_REUSED,
                   "layout '%s': axis %s is used twice; each mesh axis may split one dim or be "
                   "partial, once",
                   text, name);
      return FALSE;
    }
  *used |= 1u << a;
  *axis = (guint) a;
  return TRUE;
}

static gboolean
parse_error (GError **error, const char *text, const char *at, const char *expected)
{
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
               "layout '%s': expected %s at column %d; write e.g. [dp,_,mp] or [_,_] partial(mp)",
               text, expected, (int) (at - text) + 1);
  return FALSE;
}

gboolean
planner_layout_parse_prefix (const char *text, const PlannerMesh *mesh, PlannerLayout *layout,
                             const char **endp, GError **error)
{
  g_return_val_if_fail (text != NULL, FALSE);
  g_return_val_if_fail (mesh != NULL, FALSE);

  const char *p = skip_space (text);
  guint32 used = 0;
  char name[PLANNER_MAX_AXIS_NAME];

  planner_layout_init_replicated (layout, 0);
  if (*p != '[')
    return parse_error (error, text, p, "'['");
  p = skip_space (p + 1);
  if (*p == ']')
    p++;
  else
    for (;;)
      {
        guint d = layout->rank;
        if (d >= PLANNER_MAX_RANK)
          {
            g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                         "layout '%s' has more than %d dims", text, PLANNER_MAX_RANK);
            return FALSE;
          }
        layout->rank++;
        if (*p == '_' && !(g_ascii_isalnum (p[1]) || p[1] == '_'))
          p = skip_space (p + 1);
        else
          for (;;)
            {
              guint axis;
              const char *q = scan_identifier (p, name, sizeof name);
              if (q == NULL)
                return parse_error (error, text, p, "an axis name or '_'");
              if (!lookup_axis (text, mesh, name, &used, &axis, error))
                return FALSE;
              layout->axes[d][layout->n_axes[d]++] = axis;
              p = skip_space (q);
              if (*p != '+')
                break;
              p = skip_space (p + 1);
            }
        if (*p == ']')
          {
            p++;
            break;
          }
        if (*p != ',')
          return parse_error (error, text, p, "',' or ']'");
        p = skip_space (p + 1);
      }

  const char *after = skip_space (p);
  if (g_str_has_prefix (after, "partial("))
    {
      p = skip_space (after + strlen ("partial("));
      for (;;)
        {
          guint axis;
          const char *q = scan_identifier (p, name, sizeof name);
          if (q == NULL)
            return parse_error (error, text, p, "an axis name in partial(...)");
          if (!lookup_axis (text, mesh, name, &used, &axis, error))
            return FALSE;
          layout->partial |= 1u << axis;
          p = skip_space (q);
          if (*p == ')')
            {
              p++;
              break;
            }
          if (*p != ',')
            return parse_error (error, text, p, "',' or ')'");
          p = skip_space (p + 1);
        }
    }
  /* Names are checked above, so "[dp,_]" on dp=1 is accepted, and means "[_,_]". */
  planner_layout_normalize (layout, mesh);
  if (endp)
    *endp = p;
  return TRUE;
}

gboolean
planner_layout_parse (const char *text, const PlannerMesh *mesh, PlannerLayout *layout,
                      GError **error)
{
  const char *end;
  if (!planner_layout_parse_prefix (text, mesh, layout, &end, error))
    return FALSE;
  end = skip_space (end);
  if (*end != '\0')
    return parse_error (error, text, end, "the end of the layout");
  return TRUE;
}

static void
append_partial (GString *s, guint32 partial, const PlannerMesh *mesh)
{
  gboolean first = TRUE;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (partial & (1u << a))
      {
        g_string_append_printf (s, "%s%s", first ? "" : ",", mesh->names[a]);
        first = FALSE;
      }
}

char *
planner_layout_to_string (const PlannerLayout *layout, const PlannerMesh *mesh)
{
  g_return_val_if_fail (layout != NULL, NULL);
  GString *s = g_string_new ("[");
  for (guint d = 0; d < layout->rank; d++)
    {
      if (d)
        g_string_append_c (s, ',');
      if (layout->n_axes[d] == 0)
        g_string_append_c (s, '_');
      else
        append_dim_axes (s, layout, mesh, d);
    }
  g_string_append_c (s, ']');
  if (layout->partial)
    {
      g_string_append (s, " partial(");
      append_partial (s, layout->partial, mesh);
      g_string_append_c (s, ')');
    }
  return g_string_free (s, FALSE);
}

/* ---- per-axis (placement) notation ---- */

/* Position of axis @a in its dim's list, and whether that list is in mesh order. */
static gboolean
dim_in_mesh_order (const PlannerLayout *layout, guint d)
{
  for (guint i = 1; i < layout->n_axes[d]; i++)
    if (layout->axes[d][i] < layout->axes[d][i - 1])
      return FALSE;
  return TRUE;
}

char *
planner_layout_to_placements (const PlannerLayout *layout, const PlannerMesh *mesh)
{
  g_return_val_if_fail (layout != NULL, NULL);
  GString *s = g_string_new ("(");
  for (guint a = 0; a < mesh->n_axes; a++)
    {
      if (a)
        g_string_append (s, ", ");
      if (layout->partial & (1u << a))
        {
          g_string_append_c (s, 'P');
          continue;
        }
      int d = planner_layout_dim_of_axis (layout, a);
      if (d < 0)
        {
          g_string_append_c (s, 'R');
          continue;
        }
      if (dim_in_mesh_order (layout, d))
        g_string_append_printf (s, "S(%d)", d);
      else
        for (guint i = 0; i < layout->n_axes[d]; i++)
          if (layout->axes[d][i] == a)
            g_string_append_printf (s, "S(%d:%u)", d, i);
    }
  g_string_append_c (s, ')');
  return g_string_free (s, FALSE);
}

gboolean
planner_layout_parse_placements (const char *text, const PlannerMesh *mesh, guint rank,
                                 PlannerLayout *layout, GError **error)
{
  g_return_val_if_fail (text != NULL, FALSE);
  const char *p = skip_space (text);
  /* Per dim: which axes, and their explicit position when given (-1 = mesh order). */
  int position[PLANNER_MAX_AXES];
  int dim_of[PLANNER_MAX_AXES];
  guint a = 0;

  if (rank > PLANNER_MAX_RANK)
    return parse_error (error, text, p, "a rank of at most 8");
  planner_layout_init_replicated (layout, rank);
  if (*p != '(')
    return parse_error (error, text, p, "'(' (placements are written (S(0), R, P))");
  p = skip_space (p + 1);
  for (;; a++)
    {
      if (a >= mesh->n_axes)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                       "placements '%s' give more entries than the %u mesh axes", text,
                       mesh->n_axes);
          return FALSE;
        }
      dim_of[a] = -1;
      position[a] = -1;
      if (*p == 'R')
        p++;
      else if (*p == 'P')
        {
          layout->partial |= 1u << a;
          p++;
        }
      else if (p[0] == 'S' && p[1] == '(')
        {
          char *end;
          gint64 d = g_ascii_strtoll (p + 2, &end, 10);
          if (end == p + 2 || d < 0 || d >= (gint64) rank)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                           "placements '%s': S(%s names no dim of a rank-%u tensor", text, p + 2,
                           rank);
              return FALSE;
            }
          p = end;
          if (*p == ':')
            {
              position[a] = (int) g_ascii_strtoll (p + 1, &end, 10);
              if (end == p + 1)
                return parse_error (error, text, p + 1, "a position after ':'");
              p = end;
            }
          if (*p != ')')
            return parse_error (error, text, p, "')'");
          p++;
          dim_of[a] = (int) d;
        }
      else
        return parse_error (error, text, p, "R, P or S(dim)");
      p = skip_space (p);
      if (*p == ')')
        break;
      if (*p != ',')
        return parse_error (error, text, p, "',' or ')'");
      p = skip_space (p + 1);
    }
  if (a + 1 != mesh->n_axes)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                   "placements '%s' give %u entries; the mesh has %u axes", text, a + 1,
                   mesh->n_axes);
      return FALSE;
    }
  if (*skip_space (p + 1) != '\0')
    return parse_error (error, text, skip_space (p + 1), "the end of the placements");

  for (guint d = 0; d < rank; d++)
    {
      guint n = 0;
      gboolean explicit = FALSE;
      for (guint ax = 0; ax < mesh->n_axes; ax++)
        if (dim_of[ax] == (int) d)
          {
            n++;
            explicit |= position[ax] >= 0;
          }
      layout->n_axes[d] = n;
      guint next = 0;
      /* A repeated position would overwrite a slot and leave another holding a stale 0. */
      guint32 filled = 0;
      for (guint ax = 0; ax < mesh->n_axes; ax++)
        {
          if (dim_of[ax] != (int) d)
            continue;
          int pos = explicit ? position[ax] : (int) next++;
          if (pos < 0 || pos >= (int) n || (filled & (1u << pos)))
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                           "placements '%s': positions on dim %u must be 0..%u, each once", text,
                           d, n - 1);
              return FALSE;
            }
          filled |= 1u << pos;
          layout->axes[d][pos] = ax;
        }
      /* Explicit positions must be a permutation: check no axis was dropped. */
      guint32 got = 0, want = 0;
      for (guint i = 0; i < n; i++)
        got |= 1u << layout->axes[d][i];
      for (guint ax = 0; ax < mesh->n_axes; ax++)
        if (dim_of[ax] == (int) d)
          want |= 1u << ax;
      if (got != want)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                       "placements '%s': positions on dim %u must be 0..%u, each once", text, d,
                       n - 1);
          return FALSE;
        }
    }
  planner_layout_normalize (layout, mesh);
  return TRUE;
}
