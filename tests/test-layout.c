#define G_LOG_DOMAIN "test-layout"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-layout.h"
#include "test-util.h"

/* Layouts (semantics.md 3): both text notations are one object, parse and print are exact
 * inverses, and validation names the tensor, the dim, the sizes and the axes. */

#define N_RANDOM 3000

/* A random mesh of 1-5 axes, sizes 1-6 (size-1 axes and non-powers of two included). */
static PlannerMesh *
random_mesh (void)
{
  static const char *const pool[] = { "dp", "mp", "tp", "sp", "pp", "ep", "x", "node_2" };
  const char *names[G_N_ELEMENTS (pool)];
  guint n = (guint)g_test_rand_int_range (1, 6);
  PlannerMesh *m = planner_mesh_new ();

  memcpy (names, pool, sizeof pool);
  for (guint i = 0; i < n; i++)
    {
      guint j = (guint)g_test_rand_int_range ((gint32)i, G_N_ELEMENTS (pool));
      const char *t = names[i];
      names[i] = names[j];
      names[j] = t;
      g_assert_true (
          planner_mesh_add_axis (m, names[i], (guint)g_test_rand_int_range (1, 7), NULL));
    }
  return m;
}

/* Every mesh axis, in random order, goes nowhere, to partial, or to the end of a random dim's
 * list, so dims get axis lists that are not in mesh order too. */
static void
random_layout (const PlannerMesh *m, guint rank, PlannerLayout *layout)
{
  guint order[PLANNER_MAX_AXES];
  for (guint a = 0; a < m->n_axes; a++)
    order[a] = a;
  for (guint a = 0; a < m->n_axes; a++)
    {
      guint j = (guint)g_test_rand_int_range ((gint32)a, (gint32)m->n_axes);
      guint t = order[a];
      order[a] = order[j];
      order[j] = t;
    }
  planner_layout_init_replicated (layout, rank);
  for (guint i = 0; i < m->n_axes; i++)
    {
      guint a = order[i];
      gint32 where = g_test_rand_int_range (0, (gint32)rank + 2);
      if (where == 1)
        layout->partial |= 1u << a;
      else if (where >= 2)
        {
          guint d = (guint)where - 2;
          layout->axes[d][layout->n_axes[d]++] = (guint8)a;
        }
    }
}

static void
test_roundtrip_random (void)
{
  for (guint iter = 0; iter < N_RANDOM; iter++)
    {
      g_autoptr (PlannerMesh) m = random_mesh ();
      guint rank = (guint)g_test_rand_int_range (0, 7);
      PlannerLayout layout, back;
      g_autoptr (GError) error = NULL;

      random_layout (m, rank, &layout);
      g_assert_true (planner_layout_is_well_formed (&layout, m));

      /* Text naming an axis of size 1 reads as the canonical layout without it, in both
       * notations (semantics.md 2); the round trips below are of canonical layouts. */
      PlannerLayout raw = layout;
      planner_layout_normalize (&layout, m);
      g_autofree char *raw_text = planner_layout_to_string (&raw, m);
      g_assert_true (planner_layout_parse (raw_text, m, &back, &error));
      g_assert_no_error (error);
      g_assert_true (planner_layout_equal (&layout, &back));
      g_autofree char *raw_placements = planner_layout_to_placements (&raw, m);
      g_assert_true (planner_layout_parse_placements (raw_placements, m, rank, &back, &error));
      g_assert_no_error (error);
      g_assert_true (planner_layout_equal (&layout, &back));
      for (guint a = 0; a < m->n_axes; a++)
        if (m->sizes[a] == 1)
          {
            g_assert_cmpint (planner_layout_dim_of_axis (&layout, a), ==, -1);
            g_assert_false (layout.partial & (1u << a));
          }

      /* layout -> bracket text -> layout, and the text is stable. */
      g_autofree char *text = planner_layout_to_string (&layout, m);
      g_assert_true (planner_layout_parse (text, m, &back, &error));
      g_assert_no_error (error);
      if (!planner_layout_equal (&layout, &back))
        g_error ("bracket round trip lost '%s'", text);
      g_assert_cmpuint (planner_layout_hash (&layout), ==, planner_layout_hash (&back));
      g_autofree char *text2 = planner_layout_to_string (&back, m);
      g_assert_cmpstr (text, ==, text2);

      /* layout -> placements -> layout, and the text is stable. */
      g_autofree char *placements = planner_layout_to_placements (&layout, m);
      g_assert_true (planner_layout_parse_placements (placements, m, rank, &back, &error));
      g_assert_no_error (error);
      if (!planner_layout_equal (&layout, &back))
        {
          g_autofree char *mt = planner_mesh_to_string (m);
          g_error ("placements round trip lost %s (%s) on %s", placements, text, mt);
        }
      g_autofree char *placements2 = planner_layout_to_placements (&back, m);
      g_assert_cmpstr (placements, ==, placements2);

      /* Across notations: bracket text -> placements -> bracket text. */
      PlannerLayout via;
      g_assert_true (planner_layout_parse (text, m, &via, NULL));
      g_autofree char *p = planner_layout_to_placements (&via, m);
      g_assert_true (planner_layout_parse_placements (p, m, rank, &via, NULL));
      g_autofree char *t = planner_layout_to_string (&via, m);
      g_assert_cmpstr (t, ==, text);
    }
}

static void
test_notations (void)
{
  static const struct
  {
    const char *mesh, *bracket, *placements;
    guint rank;
  } cases[] = {
    { "dp=4,mp=2", "[dp,_,mp]", "(S(0), S(2))", 3 },
    { "dp=4,mp=2", "[dp+mp,_]", "(S(0), S(0))", 2 },
    { "dp=4,mp=2", "[mp+dp,_]", "(S(0:1), S(0:0))", 2 },
    { "dp=4,mp=2", "[_,_] partial(mp)", "(R, P)", 2 },
    { "dp=4,mp=2", "[_,mp] partial(dp)", "(P, S(1))", 2 },
    { "dp=4,mp=2", "[_,_]", "(R, R)", 2 },
    { "dp=4,mp=2", "[]", "(R, R)", 0 },
    { "dp=4,mp=2", "[] partial(dp,mp)", "(P, P)", 0 },
    { "x=2,y=3,z=5", "[z+x,y]", "(S(0:1), S(1), S(0:0))", 2 },
    { "x=2,y=3,z=5", "[_,x+y+z,_,_]", "(S(1), S(1), S(1))", 4 },
    { "x=2,y=3,z=5", "[_,y+z+x]", "(S(1:2), S(1:0), S(1:1))", 2 },
    { "x=2,y=3,z=5", "[y] partial(x,z)", "(P, S(0), P)", 1 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (PlannerMesh) m = test_util_mesh (cases[i].mesh);
      g_autoptr (GError) error = NULL;
      PlannerLayout a, b;

      g_assert_true (planner_layout_parse (cases[i].bracket, m, &a, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (a.rank, ==, cases[i].rank);
      g_autofree char *p = planner_layout_to_placements (&a, m);
      g_assert_cmpstr (p, ==, cases[i].placements);

      g_assert_true (
          planner_layout_parse_placements (cases[i].placements, m, cases[i].rank, &b, &error));
      g_assert_no_error (error);
      g_assert_true (planner_layout_equal (&a, &b));
      g_autofree char *t = planner_layout_to_string (&b, m);
      g_assert_cmpstr (t, ==, cases[i].bracket);
    }

  /* Spacing is free on input, canonical on output. */
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=4,mp=2");
  PlannerLayout l;
  g_assert_false (planner_layout_parse ("  [ dp + mp , _ ]   partial( ) ", m, &l, NULL));
  g_assert_true (planner_layout_parse ("  [ dp , _ ]   partial( mp ) ", m, &l, NULL));
  g_autofree char *t = planner_layout_to_string (&l, m);
  g_assert_cmpstr (t, ==, "[dp,_] partial(mp)");
  g_assert_true (planner_layout_parse_placements ("( S(1) ,R )", m, 2, &l, NULL));
  g_autofree char *t2 = planner_layout_to_string (&l, m);
  g_assert_cmpstr (t2, ==, "[_,dp]");

  /* parse_prefix stops after one layout, for pins like "[dp,_],[_,mp]". */
  const char *end = NULL;
  g_assert_true (planner_layout_parse_prefix ("[dp,_],[_,mp]", m, &l, &end, NULL));
  g_assert_cmpstr (end, ==, ",[_,mp]");
  g_assert_true (planner_layout_parse_prefix (end + 1, m, &l, &end, NULL));
  g_assert_cmpstr (end, ==, "");
  g_autofree char *t3 = planner_layout_to_string (&l, m);
  g_assert_cmpstr (t3, ==, "[_,mp]");
}

static void
test_queries (void)
{
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=2,mp=3,sp=5");
  PlannerLayout l;
  g_assert_true (planner_layout_parse ("[sp+dp,_,_] partial(mp)", m, &l, NULL));
  g_assert_cmphex (planner_layout_split_mask (&l), ==, 0x5);
  g_assert_cmpint (planner_layout_dim_of_axis (&l, 0), ==, 0);
  g_assert_cmpint (planner_layout_dim_of_axis (&l, 2), ==, 0);
  g_assert_cmpint (planner_layout_dim_of_axis (&l, 1), ==, -1);
  g_assert_cmpuint (planner_layout_dim_splits (&l, m, 0), ==, 10);
  g_assert_cmpuint (planner_layout_dim_splits (&l, m, 1), ==, 1);

  PlannerLayout r;
  planner_layout_init_replicated (&r, 3);
  g_assert_false (planner_layout_equal (&l, &r));
  g_autofree char *rt = planner_layout_to_string (&r, m);
  g_assert_cmpstr (rt, ==, "[_,_,_]");
  g_autofree char *rp = planner_layout_to_placements (&r, m);
  g_assert_cmpstr (rp, ==, "(R, R, R)");

  /* Order within a dim matters: dp then mp is another layout than mp then dp. */
  PlannerLayout x, y;
  g_assert_true (planner_layout_parse ("[dp+mp]", m, &x, NULL));
  g_assert_true (planner_layout_parse ("[mp+dp]", m, &y, NULL));
  g_assert_false (planner_layout_equal (&x, &y));
}

static void
test_local_shape (void)
{
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=2,mp=3");
  const gint64 shape[] = { 12, 5, 6 };
  gint64 local[3], offset[3];
  guint coords[PLANNER_MAX_AXES] = { 1, 0 };
  PlannerLayout l;

  g_assert_true (planner_layout_parse ("[dp+mp,_,_]", m, &l, NULL));
  planner_layout_local_shape (&l, m, shape, local);
  g_assert_cmpint (local[0], ==, 2);
  g_assert_cmpint (local[1], ==, 5);
  g_assert_cmpint (local[2], ==, 6);
  /* Major first: block index dp * 3 + mp = 3, so rows 6..7. */
  planner_layout_local_offset (&l, m, shape, coords, offset);
  g_assert_cmpint (offset[0], ==, 6);
  g_assert_cmpint (offset[1], ==, 0);

  g_assert_true (planner_layout_parse ("[mp+dp,_,_]", m, &l, NULL));
  /* Block index mp * 2 + dp = 1, so rows 2..3. */
  planner_layout_local_offset (&l, m, shape, coords, offset);
  g_assert_cmpint (offset[0], ==, 2);

  g_assert_true (planner_layout_parse ("[_,_,mp] partial(dp)", m, &l, NULL));
  planner_layout_local_shape (&l, m, shape, local);
  g_assert_cmpint (local[0], ==, 12);
  g_assert_cmpint (local[2], ==, 2);
}

/* On random divisible layouts, the devices' blocks tile the tensor: every block offset is hit
 * by exactly (devices / blocks) devices, the replication factor. */
static void
test_local_tiling_random (void)
{
  for (guint iter = 0; iter < 300; iter++)
    {
      g_autoptr (PlannerMesh) m = random_mesh ();
      guint rank = (guint)g_test_rand_int_range (1, 4);
      PlannerLayout l;
      gint64 shape[PLANNER_MAX_RANK], local[PLANNER_MAX_RANK];

      random_layout (m, rank, &l);
      l.partial = 0;
      for (guint d = 0; d < rank; d++)
        shape[d] = (gint64)planner_layout_dim_splits (&l, m, d) * g_test_rand_int_range (1, 4);
      g_assert_true (planner_layout_validate (&l, m, shape, rank, "t", NULL));
      planner_layout_local_shape (&l, m, shape, local);

      guint64 blocks = 1;
      for (guint d = 0; d < rank; d++)
        blocks *= (guint64)planner_layout_dim_splits (&l, m, d);
      guint64 devices = planner_mesh_n_devices (m);
      g_autoptr (GHashTable) hits = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      for (guint64 dev = 0; dev < devices; dev++)
        {
          guint coords[PLANNER_MAX_AXES];
          gint64 offset[PLANNER_MAX_RANK];
          planner_mesh_device_coords (m, dev, coords);
          planner_layout_local_offset (&l, m, shape, coords, offset);
          GString *key = g_string_new (NULL);
          for (guint d = 0; d < rank; d++)
            {
              g_assert_cmpint (offset[d] % local[d], ==, 0);
              g_assert_cmpint (offset[d] + local[d], <=, shape[d]);
              g_string_append_printf (key, "%" G_GINT64_FORMAT ",", offset[d]);
            }
          char *k = g_string_free (key, FALSE);
          guint n = GPOINTER_TO_UINT (g_hash_table_lookup (hits, k));
          g_hash_table_insert (hits, k, GUINT_TO_POINTER (n + 1));
        }
      g_assert_cmpuint (g_hash_table_size (hits), ==, blocks);
      GHashTableIter it;
      gpointer value;
      g_hash_table_iter_init (&it, hits);
      while (g_hash_table_iter_next (&it, NULL, &value))
        g_assert_cmpuint (GPOINTER_TO_UINT (value), ==, devices / blocks);
    }
}

static void
test_validate (void)
{
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=4,mp=2");
  g_autoptr (GError) error = NULL;
  const gint64 shape[] = { 6, 8 };
  PlannerLayout l;

  g_assert_true (planner_layout_parse ("[mp,dp]", m, &l, NULL));
  g_assert_true (planner_layout_validate (&l, m, shape, 2, "fc1: weight", &error));
  g_assert_no_error (error);

  /* Not divisible: 6 rows over dp=4. */
  g_assert_true (planner_layout_parse ("[dp,mp]", m, &l, NULL));
  g_assert_false (planner_layout_validate (&l, m, shape, 2, "fc1: weight", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE);
  g_assert_nonnull (strstr (error->message, "fc1: weight"));
  g_assert_nonnull (strstr (error->message, "dim 0 (size 6)"));
  g_assert_nonnull (strstr (error->message, "over dp (4 parts)"));
  g_clear_error (&error);

  /* Compound split: 8 over dp+mp = 8 parts divides, 6 does not. */
  g_assert_true (planner_layout_parse ("[_,dp+mp]", m, &l, NULL));
  g_assert_true (planner_layout_validate (&l, m, shape, 2, "x", NULL));
  g_assert_true (planner_layout_parse ("[dp+mp,_]", m, &l, NULL));
  g_assert_false (planner_layout_validate (&l, m, shape, 2, "x", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE);
  g_assert_nonnull (strstr (error->message, "dp+mp (8 parts)"));
  g_clear_error (&error);

  /* Rank mismatch. */
  g_assert_true (planner_layout_parse ("[_,_,_]", m, &l, NULL));
  g_assert_false (planner_layout_validate (&l, m, shape, 2, "x", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT);
  g_assert_nonnull (strstr (error->message, "rank 2"));
  g_clear_error (&error);

  /* Built by hand (not parsed): an axis twice, an axis the mesh lacks. */
  planner_layout_init_replicated (&l, 2);
  l.n_axes[0] = 1;
  l.axes[0][0] = 1;
  l.n_axes[1] = 1;
  l.axes[1][0] = 1;
  g_assert_false (planner_layout_is_well_formed (&l, m));
  g_assert_false (planner_layout_validate (&l, m, shape, 2, "x", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_AXIS_REUSED);
  g_assert_nonnull (strstr (error->message, "mp is used twice"));
  g_clear_error (&error);

  planner_layout_init_replicated (&l, 2);
  l.partial = 1u << 0;
  l.n_axes[1] = 1;
  l.axes[1][0] = 0;
  g_assert_false (planner_layout_validate (&l, m, shape, 2, "x", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_AXIS_REUSED);
  g_clear_error (&error);

  planner_layout_init_replicated (&l, 2);
  l.n_axes[0] = 1;
  l.axes[0][0] = 5;
  g_assert_false (planner_layout_is_well_formed (&l, m));
  g_assert_false (planner_layout_validate (&l, m, shape, 2, "x", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS);
  g_clear_error (&error);

  planner_layout_init_replicated (&l, 2);
  l.partial = 1u << 4;
  g_assert_false (planner_layout_validate (&l, m, shape, 2, "x", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS);
}

static void
test_parse_errors (void)
{
  static const struct
  {
    const char *text;
    int code;
    const char *fragment;
  } bracket[] = {
    { "[dp,zz]", PLANNER_ERROR_UNKNOWN_AXIS, "axis 'zz' is not in the mesh dp=4,mp=2" },
    { "[_,_] partial(tp)", PLANNER_ERROR_UNKNOWN_AXIS, "axis 'tp' is not in the mesh" },
    { "[dp,dp]", PLANNER_ERROR_AXIS_REUSED, "axis dp is used twice" },
    { "[dp+dp,_]", PLANNER_ERROR_AXIS_REUSED, "axis dp is used twice" },
    { "[dp,_] partial(dp)", PLANNER_ERROR_AXIS_REUSED, "axis dp is used twice" },
    { "[_,_] partial(mp,mp)", PLANNER_ERROR_AXIS_REUSED, "axis mp is used twice" },
    { "dp,_", PLANNER_ERROR_PARSE, "expected '[' at column 1" },
    { "", PLANNER_ERROR_PARSE, "expected '['" },
    { "[dp,_", PLANNER_ERROR_PARSE, "expected ',' or ']'" },
    { "[dp,,mp]", PLANNER_ERROR_PARSE, "expected an axis name or '_' at column 5" },
    { "[dp+,mp]", PLANNER_ERROR_PARSE, "an axis name" },
    { "[dp] junk", PLANNER_ERROR_PARSE, "the end of the layout" },
    { "[dp] partial(", PLANNER_ERROR_PARSE, "partial(...)" },
    { "[dp] partial(mp", PLANNER_ERROR_PARSE, "',' or ')'" },
    { "[_,_,_,_,_,_,_,_,_]", PLANNER_ERROR_INVALID_LAYOUT, "more than 8 dims" },
  };
  static const struct
  {
    const char *text;
    guint rank;
    int code;
    const char *fragment;
  } placements[] = {
    { "(S(0), Q)", 2, PLANNER_ERROR_PARSE, "R, P or S(dim)" },
    { "S(0), R", 2, PLANNER_ERROR_PARSE, "'('" },
    { "(S(2), R)", 2, PLANNER_ERROR_INVALID_LAYOUT, "names no dim of a rank-2 tensor" },
    { "(S(-1), R)", 2, PLANNER_ERROR_INVALID_LAYOUT, "names no dim" },
    { "(R)", 2, PLANNER_ERROR_INVALID_LAYOUT, "the mesh has 2 axes" },
    { "(R, R, R)", 2, PLANNER_ERROR_INVALID_LAYOUT, "more entries than the 2 mesh axes" },
    { "(S(0:0), S(0:0))", 2, PLANNER_ERROR_INVALID_LAYOUT, "must be 0..1, each once" },
    { "(S(0:0), S(0))", 2, PLANNER_ERROR_INVALID_LAYOUT, "must be 0..1, each once" },
    { "(S(0:2), S(0:0))", 2, PLANNER_ERROR_INVALID_LAYOUT, "must be 0..1, each once" },
    { "(S(0), R) x", 2, PLANNER_ERROR_PARSE, "the end of the placements" },
    { "(S(0, R)", 2, PLANNER_ERROR_PARSE, "')'" },
  };
  g_autoptr (PlannerMesh) m = test_util_mesh ("dp=4,mp=2");

  for (guint i = 0; i < G_N_ELEMENTS (bracket); i++)
    {
      g_autoptr (GError) error = NULL;
      PlannerLayout l;
      g_assert_false (planner_layout_parse (bracket[i].text, m, &l, &error));
      g_test_message ("'%s': %s", bracket[i].text, error->message);
      g_assert_error (error, PLANNER_ERROR, bracket[i].code);
      g_assert_nonnull (strstr (error->message, bracket[i].fragment));
    }
  for (guint i = 0; i < G_N_ELEMENTS (placements); i++)
    {
      g_autoptr (GError) error = NULL;
      PlannerLayout l;
      g_assert_false (
          planner_layout_parse_placements (placements[i].text, m, placements[i].rank, &l, &error));
      g_test_message ("'%s': %s", placements[i].text, error->message);
      g_assert_error (error, PLANNER_ERROR, placements[i].code);
      g_assert_nonnull (strstr (error->message, placements[i].fragment));
    }
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/planner/layout/parse-roundtrip", test_roundtrip_random);
  g_test_add_func ("/planner/layout/notations", test_notations);
  g_test_add_func ("/planner/layout/queries", test_queries);
  g_test_add_func ("/planner/layout/local-shape", test_local_shape);
  g_test_add_func ("/planner/layout/local-tiling", test_local_tiling_random);
  g_test_add_func ("/planner/layout/validate", test_validate);
  g_test_add_func ("/planner/layout/parse-errors", test_parse_errors);

  return g_test_run ();
}
