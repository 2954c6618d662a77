#define G_LOG_DOMAIN "bench-gpu"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-util.h"
#include "executor-cuda-private.h"
#include "executor-error.h"
#include "executor-trial.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"

/* The GPU executor's figures (issue 8). Usage:
 *   bench-gpu gemm MODEL MESH POLICY [BATCH SEQ LAYERS]   the backend's GEMM at each local
 *       shape of the plan against the best cuBLAS algorithm at that shape (f32, bf16, f16)
 *   bench-gpu collectives [DEVICES [MAX_MIB]]             bus bandwidth between virtual devices
 *   bench-gpu trial MODEL MESH POLICY [BATCH SEQ LAYERS REPEAT]   numeric error, ms per step
 * Without a CUDA device it says why and exits 77 (skipped). Prints figures; asserts nothing
 * about time. */

#define ITERS 20

static ExecutorBackend *
cuda_backend (const char *mesh_text)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &error);
  ExecutorBackend *backend = mesh ? executor_backend_new ("cuda", mesh, &error) : NULL;
  if (backend == NULL)
    {
      gboolean skip = g_error_matches (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE)
                      || g_error_matches (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NOT_BUILT);
      printf ("bench-gpu: %s%s\n", skip ? "SKIP: " : "", error->message);
      exit (skip ? 77 : 1);
    }
  return backend;
}

static PlannerPlan *
load_plan (int argc, char **argv, PlannerGraph **graph)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions mo;
  planner_model_options_init (&mo);
  mo.batch = argc > 5 ? atoi (argv[5]) : 0;
  mo.seq = argc > 6 ? atoi (argv[6]) : 0;
  mo.layers = argc > 7 ? atoi (argv[7]) : 0;
  const char *model = argc > 2 ? argv[2] : "gpt2", *mesh_text = argc > 3 ? argv[3] : "dp=2,mp=4";
  const char *policy = argc > 4 ? argv[4] : "megatron";
  g_autoptr (PlannerGraph) g = planner_model_load (model, &mo, &error);
  g_autoptr (PlannerMesh) mesh = g ? planner_mesh_parse (mesh_text, &error) : NULL;
  g_autoptr (PlannerHardware) hw = mesh ? planner_hardware_new_builtin ("h100-sxm", &error) : NULL;
  g_autoptr (GPtrArray) pins = hw ? planner_policy_expand (policy, g, mesh, NULL, &error) : NULL;
  PlannerPlan *plan = pins ? planner_propagate (g, mesh, hw, pins, NULL, &error) : NULL;
  if (plan == NULL)
    {
      printf ("bench-gpu: %s\n", error->message);
      exit (1);
    }
  printf ("model %s, mesh %s, policy %s: %u ops, %u redistributions\n", model, mesh_text, policy,
          planner_graph_get_n_ops (g), planner_plan_get_n_redistributions (plan));
  *graph = g_steal_pointer (&g);
  return plan;
}

/* ---- GEMM at the plan's shapes ---- */

/* Local GEMM dims (m, n, k) of a MatMul or Einsum op under its strategy: reduction factors
 * are k, factors only in the weight are n, the rest m; each divided by its mesh axes. */
static gboolean
local_gemm_dims (const PlannerOp *op, const PlannerStrategy *s, const PlannerMesh *mesh,
                 gint64 dims[3])
{
  if ((op->type != PLANNER_OP_MATMUL && op->type != PLANNER_OP_EINSUM) || op->n_inputs < 2)
    return FALSE;
  dims[0] = dims[1] = dims[2] = 1;
  const PlannerOperandMap *x = &op->rule.inputs[0];
  for (guint f = 0; f < op->rule.n_factors; f++)
    {
      gint64 size = op->rule.factors[f].size;
      for (guint j = 0; j < s->n_axes[f]; j++)
        size /= mesh->sizes[s->axes[f][j]];
      gboolean in_x = FALSE;
      for (guint d = 0; d < x->rank; d++)
        for (guint q = 0; q < x->n[d]; q++)
          in_x |= x->f[d][q] == f;
      dims[op->rule.factors[f].kind == PLANNER_FACTOR_REDUCTION ? 2 : in_x ? 0 : 1] *= size;
    }
  return TRUE;
}

typedef struct
{
  gint64 d[3]; /* m, n, k */
} Shape;

typedef struct
{
  GArray *shapes; /* Shape, each distinct local shape once */
} GemmJob;

static double
time_events (cudaStream_t stream, cudaEvent_t a, cudaEvent_t b)
{
  float ms = 0;
  cudaEventRecord (b, stream);
  cudaEventSynchronize (b);
  cudaEventElapsedTime (&ms, a, b);
  return ms * 1e-3;
}

/* The best cuBLAS algorithm at the shape (the default heuristic and every listed algo). */
static double
cublas_best_s (ExecutorCudaDevice *d, cudaDataType_t type, gint64 m, gint64 n, gint64 k,
               const void *a, const void *b, float *c, cudaEvent_t e0, cudaEvent_t e1)
{
  const float alpha = 1, beta = 0;
  double best = G_MAXDOUBLE;
  for (int algo = CUBLAS_GEMM_DEFAULT; algo <= CUBLAS_GEMM_ALGO23; algo++)
    {
      double t[ITERS];
      guint ok = 0;
      for (guint it = 0; it < ITERS + 2; it++)
        {
          cudaEventRecord (e0, d->stream);
          cublasStatus_t st
              = cublasGemmEx (d->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, b,
                              type, (int)n, a, type, (int)k, &beta, c, CUDA_R_32F, (int)n,
                              CUBLAS_COMPUTE_32F, (cublasGemmAlgo_t)algo);
          double s = time_events (d->stream, e0, e1);
          if (st != CUBLAS_STATUS_SUCCESS)
            break;
          if (it >= 2)
            t[ok++] = s;
        }
      if (ok == ITERS)
        best = MIN (best, bench_median (t, ITERS));
      if (algo == CUBLAS_GEMM_DEFAULT)
        algo = CUBLAS_GEMM_ALGO0 - 1;
    }
  return best;
}

static gboolean
gemm_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  GemmJob *job = data;
  ExecutorCudaDevice *d = (ExecutorCudaDevice *)dev;
  static const struct
  {
    ExecutorCudaGemmType type;
    cudaDataType_t cuda;
    const char *name;
    ExecutorCudaConvert conv;
  } types[] = {
    { EXECUTOR_CUDA_GEMM_F32, CUDA_R_32F, "f32", 0 },
    { EXECUTOR_CUDA_GEMM_BF16, CUDA_R_16BF, "bf16", EXECUTOR_CUDA_F32_TO_BF16 },
    { EXECUTOR_CUDA_GEMM_F16, CUDA_R_16F, "f16", EXECUTOR_CUDA_F32_TO_F16 },
  };
  cudaEvent_t e0, e1;
  cudaEventCreate (&e0);
  cudaEventCreate (&e1);
  for (guint ty = 0; ty < G_N_ELEMENTS (types); ty++)
    {
      double flops = 0, ours = 0, best = 0;
      for (guint i = 0; i < job->shapes->len; i++)
        {
          const gint64 *s = g_array_index (job->shapes, Shape, i).d;
          gint64 m = s[0], n = s[1], k = s[2];
          float *a = executor_cuda_scratch (dev, (gsize)(m * k) * 4, error);
          float *b = executor_cuda_scratch (dev, (gsize)(k * n) * 4, error);
          float *c = executor_cuda_scratch (dev, (gsize)(m * n) * 4, error);
          void *ha = executor_cuda_scratch (dev, (gsize)(m * k) * 2, error);
          void *hb = executor_cuda_scratch (dev, (gsize)(k * n) * 2, error);
          if (!a || !b || !c || !ha || !hb)
            return FALSE;
          cudaMemsetAsync (a, 0, (gsize)(m * k) * 4, d->stream);
          cudaMemsetAsync (b, 0, (gsize)(k * n) * 4, d->stream);
          double t[ITERS];
          for (guint it = 0; it < ITERS + 2; it++)
            {
              cudaEventRecord (e0, d->stream);
              if (!executor_cuda_gemm_typed (dev, types[ty].type, FALSE, m, n, k, a, b, c, 1, 0, 0,
                                             0, error))
                return FALSE;
              double sec = time_events (d->stream, e0, e1);
              if (it >= 2)
                t[it - 2] = sec;
            }
          double mine = bench_median (t, ITERS), theirs;
          if (types[ty].type == EXECUTOR_CUDA_GEMM_F32)
            theirs = cublas_best_s (d, CUDA_R_32F, m, n, k, a, b, c, e0, e1);
          else
            {
              /* cuBLAS on inputs already in 16 bits; ours converts f32 storage first. */
              executor_cuda_launch_convert (d->stream, types[ty].conv, a, ha, m * k);
              executor_cuda_launch_convert (d->stream, types[ty].conv, b, hb, k * n);
              theirs = cublas_best_s (d, types[ty].cuda, m, n, k, ha, hb, c, e0, e1);
            }
          double fl = 2.0 * (double)m * (double)n * (double)k;
          printf ("  %-4s %6" G_GINT64_FORMAT " x %6" G_GINT64_FORMAT " x %6" G_GINT64_FORMAT
                  ": backend %8.3f us = %7.2f TFLOP/s, cuBLAS best %8.3f us = %7.2f TFLOP/s, "
                  "share %5.1f%%\n",
                  types[ty].name, m, n, k, mine * 1e6, fl / mine / 1e12, theirs * 1e6,
                  fl / theirs / 1e12, 100 * theirs / mine);
          flops += fl;
          ours += mine;
          best += theirs;
          executor_cuda_scratch_free (dev, a);
          executor_cuda_scratch_free (dev, b);
          executor_cuda_scratch_free (dev, c);
          executor_cuda_scratch_free (dev, ha);
          executor_cuda_scratch_free (dev, hb);
        }
      printf ("GEMM %s at the plan's shapes: backend %.2f TFLOP/s, cuBLAS best %.2f TFLOP/s, "
              "share of best %.1f%% (%u shapes)\n",
              types[ty].name, flops / ours / 1e12, flops / best / 1e12, 100 * best / ours,
              job->shapes->len);
    }
  cudaEventDestroy (e0);
  cudaEventDestroy (e1);
  return TRUE;
}

static int
bench_gemm (int argc, char **argv)
{
  g_autoptr (ExecutorBackend) backend = cuda_backend ("x=1");
  g_autoptr (PlannerGraph) g = NULL;
  g_autoptr (PlannerPlan) plan = load_plan (argc, argv, &g);
  g_autoptr (GArray) shapes = g_array_new (FALSE, FALSE, sizeof (Shape));
  for (guint i = 0; i < planner_graph_get_n_ops (g); i++)
    {
      Shape shape;
      if (!local_gemm_dims (planner_graph_get_op (g, i), &planner_plan_get_op (plan, i)->strategy,
                            planner_plan_get_mesh (plan), shape.d))
        continue;
      gboolean seen = FALSE;
      for (guint j = 0; j < shapes->len && !seen; j++)
        seen = memcmp (g_array_index (shapes, Shape, j).d, shape.d, sizeof shape.d) == 0;
      if (!seen)
        g_array_append_val (shapes, shape);
    }
  GemmJob job = { shapes };
  g_autoptr (GError) error = NULL;
  gboolean ok = executor_backend_run (backend, gemm_device, &job, &error);
  if (!ok)
    printf ("bench-gpu: %s\n", error->message);
  return ok ? 0 : 1;
}

/* ---- collectives between virtual devices ---- */

typedef struct
{
  guint64 max_bytes;
  double *times; /* [kind][size][device] */
  guint n_sizes;
  guint n_dev;
} CollJob;

static const PlannerStepKind kinds[] = { PLANNER_STEP_ALL_REDUCE, PLANNER_STEP_ALL_GATHER,
                                         PLANNER_STEP_REDUCE_SCATTER, PLANNER_STEP_ALL_TO_ALL };

static gboolean
coll_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  CollJob *job = data;
  guint p = dev->backend->mesh.sizes[0];
  ExecutorBuffer *a = executor_device_buffer_new (dev, job->max_bytes, error);
  ExecutorBuffer *b = a ? executor_device_buffer_new (dev, job->max_bytes, error) : NULL;
  gboolean ok = b != NULL;
  for (guint k = 0; ok && k < G_N_ELEMENTS (kinds); k++)
    for (guint z = 0; ok && z < job->n_sizes; z++)
      {
        /* nccl-tests' size: the whole buffer (AllGather's output, ReduceScatter's input). */
        guint64 bytes = (guint64)1024 << (2 * z);
        gsize count = kinds[k] == PLANNER_STEP_ALL_REDUCE ? bytes / 4 : bytes / 4 / p;
        double t[ITERS];
        for (guint it = 0; ok && it < ITERS + 2; it++)
          {
            ok = executor_device_barrier (dev, error);
            executor_device_timer_begin (dev);
            ok = ok
                 && executor_device_collective (dev, kinds[k], 0, a, b, count, PLANNER_DTYPE_F32,
                                                error);
            double s = executor_device_timer_end (dev);
            if (it >= 2)
              t[it - 2] = s;
          }
        job->times[((gsize)k * job->n_sizes + z) * job->n_dev + dev->index]
            = bench_median (t, ITERS);
      }
  executor_device_buffer_free (dev, a);
  executor_device_buffer_free (dev, b);
  return ok;
}

static int
bench_collectives (int argc, char **argv)
{
  guint p = argc > 2 ? (guint)atoi (argv[2]) : 8;
  guint max_mib = argc > 3 ? (guint)atoi (argv[3]) : 256;
  g_autofree char *mesh = g_strdup_printf ("x=%u", p);
  g_autoptr (ExecutorBackend) backend = cuda_backend (mesh);
  CollJob job = { (guint64)max_mib << 20, NULL, 0, p };
  for (guint64 s = 1024; s <= job.max_bytes; s <<= 2)
    job.n_sizes++;
  job.times = g_new0 (double, G_N_ELEMENTS (kinds) * job.n_sizes * p);
  g_autoptr (GError) error = NULL;
  if (!executor_backend_run (backend, coll_device, &job, &error))
    {
      printf ("bench-gpu: %s\n", error->message);
      return 1;
    }
  printf ("collectives on %u virtual devices of one GPU (HBM, not links), median of %d, "
          "slowest device\n%-14s %12s %12s %12s %12s\n",
          p, ITERS, "collective", "bytes", "time us", "algbw GB/s", "busbw GB/s");
  for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
    for (guint z = 0; z < job.n_sizes; z++)
      {
        double t = 0;
        for (guint d = 0; d < p; d++)
          t = MAX (t, job.times[((gsize)k * job.n_sizes + z) * p + d]);
        guint64 bytes = (guint64)1024 << (2 * z);
        /* nccl-tests' bus bandwidth factors. */
        double factor
            = kinds[k] == PLANNER_STEP_ALL_REDUCE ? 2.0 * (p - 1) / p : (double)(p - 1) / p;
        printf ("%-14s %12" G_GUINT64_FORMAT " %12.2f %12.2f %12.2f\n",
                planner_step_kind_to_string (kinds[k]), bytes, t * 1e6, bytes / t / 1e9,
                bytes / t / 1e9 * factor);
      }
  g_free (job.times);
  return 0;
}

/* ---- a trial ---- */

static int
bench_trial (int argc, char **argv)
{
  g_autoptr (ExecutorBackend) probe = cuda_backend ("x=1");
  g_autoptr (PlannerGraph) g = NULL;
  g_autoptr (PlannerPlan) plan = load_plan (argc, argv, &g);
  g_autoptr (GError) error = NULL;
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = argc > 8 ? (guint)atoi (argv[8]) : 5;
  options.warmup = 1;
  gint64 start = g_get_monotonic_time ();
  g_autoptr (ExecutorTrialResult) res
      = executor_trial_run_named (plan, "cuda", &options, NULL, &error);
  if (res == NULL)
    {
      printf ("bench-gpu: %s\n", error->message);
      return 1;
    }
  printf ("trial on %u virtual devices: max abs error %.3g, max rel error %.3g (%s); %.3f ms "
          "per forward step (median of %u; estimated %.3f ms); whole trial %.1f s\n",
          res->n_devices, res->max_abs_error, res->max_rel_error,
          res->passed ? "match" : res->mismatch, res->measured_step_s * 1e3, options.repeat,
          res->estimated_step_s * 1e3, bench_ms_since (start) / 1e3);
  return res->passed ? 0 : 1;
}

int
main (int argc, char **argv)
{
  const char *what = argc > 1 ? argv[1] : "trial";
  if (g_str_equal (what, "gemm"))
    return bench_gemm (argc, argv);
  if (g_str_equal (what, "collectives"))
    return bench_collectives (argc, argv);
  if (g_str_equal (what, "trial"))
    return bench_trial (argc, argv);
  printf ("usage: bench-gpu gemm|collectives|trial ...\n");
  return 2;
}
