#define G_LOG_DOMAIN "bench-executor"

#include "config.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "executor-trial.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"

/* The CPU executor's figures: GEMM throughput at a plan's shapes against one plain OpenBLAS
 * call of the same total work (same run), and trial-run time per forward step. Usage:
 * bench-executor MODEL MESH POLICY [BATCH SEQ LAYERS REPEAT]. Prints figures; asserts
 * nothing about time. */

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* One OpenBLAS call per op with the whole (unsharded) shape, all cores, median of 5. */
static double
plain_gemm_s (gint64 m, gint64 n, gint64 k)
{
  float *a = g_new0 (float, m * k), *b = g_new0 (float, k * n), *c = g_new0 (float, m * n);
  double t[5];
  for (guint i = 0; i < 5; i++)
    {
      double t0 = now_s ();
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint) m, (blasint) n,
                   (blasint) k, 1.0f, a, (blasint) k, b, (blasint) n, 0.0f, c, (blasint) n);
      t[i] = now_s () - t0;
    }
  qsort (t, 5, sizeof (double), cmp_double);
  g_free (a);
  g_free (b);
  g_free (c);
  return t[2];
}

/* GEMM dims (m, n, k) of a MatMul or Einsum op, from its rule: reduction factors are k,
 * factors only in the weight (input 1) are n, the rest m. */
static gboolean
gemm_dims (const PlannerOp *op, gint64 *m, gint64 *n, gint64 *k)
{
  if (op->type != PLANNER_OP_MATMUL && op->type != PLANNER_OP_EINSUM)
    return FALSE;
  if (op->n_inputs < 2)
    return FALSE;
  *m = *n = *k = 1;
  for (guint f = 0; f < op->rule.n_factors; f++)
    {
      const PlannerFactor *fa = &op->rule.factors[f];
      gboolean in_x = FALSE;
      const PlannerOperandMap *x = &op->rule.inputs[0];
      for (guint d = 0; d < x->rank; d++)
        for (guint q = 0; q < x->n[d]; q++)
          in_x |= x->f[d][q] == f;
      if (fa->kind == PLANNER_FACTOR_REDUCTION)
        *k *= fa->size;
      else if (in_x)
        *m *= fa->size;
      else
        *n *= fa->size;
    }
  return TRUE;
}

int
main (int argc, char *argv[])
{
  const char *model = argc > 1 ? argv[1] : "gpt2-tiny";
  const char *mesh_text = argc > 2 ? argv[2] : "dp=2,mp=2";
  const char *policy = argc > 3 ? argv[3] : "megatron";
  PlannerModelOptions mo;
  planner_model_options_init (&mo);
  mo.batch = argc > 4 ? atoi (argv[4]) : 0;
  mo.seq = argc > 5 ? atoi (argv[5]) : 0;
  mo.layers = argc > 6 ? atoi (argv[6]) : 0;
  guint repeat = argc > 7 ? (guint) atoi (argv[7]) : 5;
  g_autoptr (GError) error = NULL;

  g_autoptr (PlannerGraph) g = planner_model_load (model, &mo, &error);
  g_autoptr (PlannerMesh) mesh = g ? planner_mesh_parse (mesh_text, &error) : NULL;
  g_autoptr (PlannerHardware) hw = mesh ? planner_hardware_new_builtin ("cpu-local", &error)
                                        : NULL;
  g_autoptr (GPtrArray) pins = hw ? planner_policy_expand (policy, g, mesh, NULL, &error) : NULL;
  g_autoptr (PlannerPlan) plan = pins ? planner_propagate (g, mesh, hw, pins, NULL, &error)
                                      : NULL;
  if (plan == NULL)
    {
      fprintf (stderr, "bench-executor: %s\n", error->message);
      return 1;
    }

  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = repeat;
  options.warmup = 1;
  double t0 = now_s ();
  g_autoptr (ExecutorTrialResult) res = executor_trial_run_named (plan, "cpu", &options, NULL,
                                                                  &error);
  double wall = now_s () - t0;
  if (res == NULL)
    {
      fprintf (stderr, "bench-executor: %s\n", error->message);
      return 1;
    }

  /* The executor pins OpenBLAS to one thread per device; the plain call gets every core. */
  long cores = sysconf (_SC_NPROCESSORS_ONLN);
  openblas_set_num_threads ((int) cores);
  double backend_s = 0, plain_s = 0, plain1_s = 0, flops = 0;
  guint n_gemm = 0;
  for (guint i = 0; i < planner_graph_get_n_ops (g); i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      gint64 m, n, k;
      if (!gemm_dims (op, &m, &n, &k))
        continue;
      backend_s += g_array_index (res->ops, ExecutorTiming, i).measured_s;
      plain_s += plain_gemm_s (m, n, k);
      openblas_set_num_threads (1);
      plain1_s += plain_gemm_s (m, n, k);
      openblas_set_num_threads ((int) cores);
      flops += 2.0 * (double) m * (double) n * (double) k;
      n_gemm++;
    }
  openblas_set_num_threads (1);

  printf ("model %s (batch %" G_GINT64_FORMAT ", seq %" G_GINT64_FORMAT "), mesh %s, policy %s, "
          "%u ops, %u redistributions, %ld cores\n",
          model, planner_graph_get_tensor (g, 0)->shape[0],
          planner_graph_get_tensor (g, 0)->rank > 1 ? planner_graph_get_tensor (g, 0)->shape[1] : 1,
          mesh_text, policy, planner_graph_get_n_ops (g), planner_plan_get_n_redistributions (plan),
          cores);
  printf ("numerics: max rel error %.3g (%s)\n", res->max_rel_error,
          res->passed ? "match" : "MISMATCH");
  printf ("GEMM: %u ops, %.3f GFLOP per step; backend %.3f ms = %.2f GFLOP/s, plain OpenBLAS "
          "(%ld threads, unsharded) %.3f ms = %.2f GFLOP/s; ratio backend/plain %.2f\n",
          n_gemm, flops / 1e9, backend_s * 1e3, flops / backend_s / 1e9, cores, plain_s * 1e3,
          flops / plain_s / 1e9, plain_s / backend_s);
  printf ("GEMM: plain OpenBLAS on one thread %.3f ms = %.2f GFLOP/s\n", plain1_s * 1e3,
          flops / plain1_s / 1e9);
  printf ("trial: %.3f ms per forward step (median of %u, every op and redistribution, "
          "devices synchronised per step); estimated %.3f ms; whole trial %.2f s\n",
          res->measured_step_s * 1e3, repeat, res->estimated_step_s * 1e3, wall);
  return res->passed ? 0 : 1;
}
