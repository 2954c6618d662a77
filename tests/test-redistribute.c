/* The redistribution search (semantics.md 6): shortest step sequences between layouts. */
#define G_LOG_DOMAIN "test-redistribute"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-redistribute.h"
#include "test-util.h"

static PlannerLayout
parse (const char *text, const PlannerMesh *mesh)
{
  g_autoptr (GError) error = NULL;
  PlannerLayout l;
  g_assert_true (planner_layout_parse (text, mesh, &l, &error));
  g_assert_no_error (error);
  return l;
}

static char *
describe (PlannerRedistributor *r, const char *from, const char *to, const gint64 *shape,
          guint rank)
{
  const PlannerMesh *mesh = planner_redistributor_get_mesh (r);
  PlannerLayout a = parse (from, mesh), b = parse (to, mesh);
  const PlannerRedistPath *path = planner_redistributor_find (r, &a, &b, shape, rank,
                                                              PLANNER_DTYPE_F32);
  GString *s = g_string_new (NULL);
  if (!path->reachable)
    g_string_append (s, "unreachable");
  for (guint i = 0; i < path->n_steps; i++)
    g_string_append_printf (s, "%s%s(%s,%d)", i ? " " : "",
                            planner_step_kind_to_string (path->steps[i].kind),
                            mesh->names[path->steps[i].axis], path->steps[i].dim);
  return g_string_free (s, FALSE);
}

static void
test_paths (void)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("dp=2,mp=4", NULL);
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerRedistributor) r = planner_redistributor_new (mesh, hw);
  const gint64 shape[] = { 64, 256, 1024 };
  struct { const char *from, *to, *steps; } cases[] = {
    { "[dp,_,_]", "[dp,_,_]", "" },
    { "[dp,_,_] partial(mp)", "[dp,_,_]", "AllReduce(mp,-1)" },
    { "[dp,_,_] partial(mp)", "[dp,mp,_]", "ReduceScatter(mp,1)" },
    /* With dp free, reducing half the data per dp rank and gathering it back over dp beats
     * a plain AllReduce. n = 64 MiB, NCCL's Simple ring on h100-sxm (8.4 us a call, 3.4 us a
     * step, 370 GB/s), the Slice at 3.35 TB/s:
     *   AllReduce(mp)                         28.8 + 1.5 n/B = 300.86 us
     *   Slice, AllReduce(mp) of n/2, AllGather(dp)
     *                                         10.02 + (28.8 + 136.03) + (11.8 + 90.69) = 277.34 us
     *   Slice, ReduceScatter(mp), AllGather(dp), AllGather(mp)
     *                                         10.02 + 86.62 + 34.47 + 154.63 = 285.74 us
     * (one call fewer wins; with the bare 2.5 us a step the four-call path won). */
    { "[_,_,_] partial(mp)", "[_,_,_]", "Slice(dp,0) AllReduce(mp,-1) AllGather(dp,0)" },
    { "[dp,_,mp]", "[dp,_,_]", "AllGather(mp,2)" },
    { "[dp,_,mp]", "[dp,mp,_]", "AllToAll(mp,2)" },
    { "[dp,_,_]", "[dp,_,mp]", "Slice(mp,2)" },
    /* Only the minor-most axis of a dim may be gathered: dp+mp -> mp needs the mp gather
     * first, then dp, then mp slices back. */
    { "[dp+mp,_,_]", "[_,_,_]", "AllGather(mp,0) AllGather(dp,0)" },
    /* No step makes partial sums. */
    { "[_,_,_]", "[_,_,_] partial(mp)", "unreachable" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *got = describe (r, cases[i].from, cases[i].to, shape, 3);
      g_assert_cmpstr (got, ==, cases[i].steps);
    }
}

/* Costs by hand (h100-sxm inside a node: NVLink 4 370 GB/s; NCCL's Simple ring, 8.4 us a call
 * and 3.4 us a step, for the ring collectives; 2.5 us a step for AllToAll). */
static void
test_costs (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  const gint64 shape[] = { 64, 256, 1024 };       /* f32: 64 MiB whole */
  const double a = 2.5e-6, base = 8.4e-6, s = 3.4e-6, B = 370e9, n = 64.0 * 256 * 1024 * 4;
  struct { const char *mesh, *from, *to; double seconds; guint64 bytes; } cases[] = {
    /* AllReduce over mp=4 of the whole 64 MiB: base + 2*3*s + 2*3/4*n/B. */
    { "mp=4", "[_,_,_] partial(mp)", "[_,_,_]", base + 6 * s + 1.5 * n / B, (guint64) (1.5 * n) },
    /* ReduceScatter over mp: base + 3*s + 3/4*n_in/B, n_in the whole. */
    { "mp=4", "[_,_,_] partial(mp)", "[_,mp,_]", base + 3 * s + 0.75 * n / B,
      (guint64) (0.75 * n) },
    /* AllGather over mp from quarters: base + 3*s + 3/4*n_out/B, n_out the whole. */
    { "mp=4", "[_,_,mp]", "[_,_,_]", base + 3 * s + 0.75 * n / B, (guint64) (0.75 * n) },
    /* AllToAll over mp of a quarter (point to point, not a ring): 3*a + 3/4*(n/4)/B. */
    { "mp=4", "[_,_,mp]", "[_,mp,_]", 3 * a + 0.75 * (n / 4) / B, (guint64) (0.75 * n / 4) },
    /* AllGather over dp=2 of halves: base + 1*s + 1/2*n/B. */
    { "dp=2", "[dp,_,_]", "[_,_,_]", base + s + 0.5 * n / B, (guint64) (0.5 * n) },
    /* Slice: a local copy of the quarter kept, n_out / memory bandwidth (3.35 TB/s). */
    { "mp=4", "[_,_,_]", "[_,_,mp]", (n / 4) / 3.35e12, 0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (PlannerMesh) mesh = planner_mesh_parse (cases[i].mesh, NULL);
      g_autoptr (PlannerRedistributor) r = planner_redistributor_new (mesh, hw);
      PlannerLayout x = parse (cases[i].from, mesh), y = parse (cases[i].to, mesh);
      const PlannerRedistPath *path = planner_redistributor_find (r, &x, &y, shape, 3,
                                                                  PLANNER_DTYPE_F32);
      g_assert_true (path->reachable);
      g_assert_cmpuint (path->n_steps, ==, 1);
      g_assert_cmpfloat_with_epsilon (path->time_s, cases[i].seconds, 1e-6 * cases[i].seconds);
      g_assert_cmpuint (path->bytes, ==, cases[i].bytes);
    }
}

/* A random layout of @shape: each axis replicated, partial (when allowed) or appended to a
 * random dim it divides. */
static PlannerLayout
random_layout (const PlannerMesh *mesh, const gint64 *shape, guint rank, guint32 partial_allowed)
{
  PlannerLayout l;
  planner_layout_init_replicated (&l, rank);
  for (guint a = 0; a < mesh->n_axes; a++)
    {
      int choice = g_test_rand_int_range (0, (gint32) rank + 2);
      if (choice == (int) rank)
        continue;
      if (choice == (int) rank + 1)
        {
          if (partial_allowed & (1u << a))
            l.partial |= 1u << a;
          continue;
        }
      guint d = (guint) choice;
      guint64 parts = planner_layout_dim_splits (&l, mesh, d) * mesh->sizes[a];
      if (shape[d] % (gint64) parts == 0)
        l.axes[d][l.n_axes[d]++] = (guint8) a;
    }
  return l;
}

static void
check_path (const PlannerMesh *mesh, const PlannerRedistPath *path, const PlannerLayout *from,
            const PlannerLayout *to, const gint64 *shape, guint rank)
{
  PlannerLayout at = *from;
  double sum = 0;
  g_assert_true (path->reachable);
  for (guint i = 0; i < path->n_steps; i++)
    {
      const PlannerRedistStep *s = &path->steps[i];
      PlannerLayout next;
      g_assert_true (planner_layout_equal (&s->before, &at));
      g_assert_true (planner_redist_step_apply (s->kind, s->axis, s->dim, s->dim_to, &at, &next));
      g_assert_true (planner_layout_equal (&next, &s->after));
      /* Every intermediate layout is a real one. */
      g_assert_true (planner_layout_is_well_formed (&next, mesh));
      g_assert_true (planner_layout_validate (&next, mesh, shape, rank, "step", NULL));
      sum += s->time_s;
      at = next;
    }
  g_assert_true (planner_layout_equal (&at, to));
  /* The cost shown is the sum over exactly the steps kept. */
  g_assert_cmpfloat (path->time_s, ==, sum);
}

static void
test_random (gconstpointer data)
{
  const char *mesh_text = data;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, NULL);
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerRedistributor) r = planner_redistributor_new (mesh, hw);
  static const gint64 sizes[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 64 };
  guint all = (1u << mesh->n_axes) - 1;

  for (guint round = 0; round < 300; round++)
    {
      guint rank = (guint) g_test_rand_int_range (1, 5);
      gint64 shape[PLANNER_MAX_RANK];
      for (guint d = 0; d < rank; d++)
        shape[d] = sizes[g_test_rand_int_range (0, G_N_ELEMENTS (sizes))];
      PlannerDType dtype = (PlannerDType) g_test_rand_int_range (0, 3);

      /* S may be partial anywhere, X only where S is, D only where X is: every pair is then
       * reachable, and the triangle inequality must hold. */
      PlannerLayout s = random_layout (mesh, shape, rank, all);
      PlannerLayout x = random_layout (mesh, shape, rank, s.partial);
      PlannerLayout d = random_layout (mesh, shape, rank, x.partial);
      const PlannerRedistPath *sd = planner_redistributor_find (r, &s, &d, shape, rank, dtype);
      const PlannerRedistPath *sx = planner_redistributor_find (r, &s, &x, shape, rank, dtype);
      const PlannerRedistPath *xd = planner_redistributor_find (r, &x, &d, shape, rank, dtype);
      check_path (mesh, sd, &s, &d, shape, rank);
      check_path (mesh, sx, &s, &x, shape, rank);
      check_path (mesh, xd, &x, &d, shape, rank);
      g_assert_cmpfloat (sd->time_s, <=, (sx->time_s + xd->time_s) * (1 + 1e-12));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/redistribute/paths", test_paths);
  g_test_add_func ("/planner/redistribute/costs", test_costs);
  g_test_add_data_func ("/planner/redistribute/random-2-axes", "dp=2,mp=4", test_random);
  g_test_add_data_func ("/planner/redistribute/random-3-axes", "a=2,b=3,c=2", test_random);
  return g_test_run ();
}
