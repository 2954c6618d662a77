#define G_LOG_DOMAIN "executor-calibrate"

#include "config.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "executor-calibrate.h"
#include "executor-error.h"
#include "planner-cost.h"
#include "planner-redistribute.h"

/* The ring link's figures from the measured AllReduce curve of @p devices: busbw =
 * 2(p-1)/p n / t, the latency per ring step from the alpha-beta fit's intercept. */
void
executor_calibrate_link (const PlannerHardware *hw, guint p, PlannerLink *link)
{
  g_return_if_fail (hw != NULL && p >= 2 && link != NULL);

  double alpha = 0, beta = 0;
  gboolean fitted = planner_cost_measurement_fit (hw, PLANNER_STEP_ALL_REDUCE,
                                                  PLANNER_LINK_INTRA, p, &alpha, &beta)
                     && beta > 0;
  double ring = 2.0 * (p - 1); /* latency steps of the ring AllReduce */
  double moved = ring / p;     /* bytes each device moves, per byte of the buffer */
  if (fitted)
    {
      link->bandwidth_GBps = moved / beta / 1e9;
      link->latency_us = MAX (alpha, 0) / ring * 1e6;
    }
  /* The largest message's bus bandwidth is a lower bound of the link's (its time includes
   * the latency). A fit far above it comes from noise on curves whose times hardly grow
   * with the size (shared memory on a loaded machine gave 2.8e14 GB/s once): then the link
   * is that bus bandwidth, and the latency what the smallest message leaves over. */
  guint n_points = 0;
  const PlannerMeasuredPoint *points = planner_hardware_get_measurement (
      hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, p, &n_points);
  const PlannerMeasuredPoint *small = NULL, *large = NULL;
  for (guint i = 0; i < n_points; i++)
    {
      if (points[i].seconds <= 0)
        continue;
      if (small == NULL || points[i].bytes < small->bytes)
        small = &points[i];
      if (large == NULL || points[i].bytes > large->bytes)
        large = &points[i];
    }
  if (large != NULL && large->bytes > 0)
    {
      double busbw = moved * (double) large->bytes / large->seconds / 1e9;
      if (!fitted || link->bandwidth_GBps > 4 * busbw)
        {
          link->bandwidth_GBps = busbw;
          double left = small->seconds - moved * (double) small->bytes / (busbw * 1e9);
          link->latency_us = MAX (left, 0) / ring * 1e6;
        }
    }
}

void
executor_calibrate_options_init (ExecutorCalibrateOptions *options)
{
  memset (options, 0, sizeof *options);
  options->max_devices = 4;
  options->min_bytes = 8;
  options->max_bytes = 16u << 20;
  options->warmup = 2;
  options->iterations = 20;
  options->gemm_size = 512;
}

static const PlannerStepKind kinds[] = {
  PLANNER_STEP_ALL_REDUCE,
  PLANNER_STEP_ALL_GATHER,
  PLANNER_STEP_REDUCE_SCATTER,
  PLANNER_STEP_ALL_TO_ALL,
};

typedef struct
{
  const ExecutorCalibrateOptions *options;
  GCancellable *cancellable;
  guint n_sizes;
  guint64 *sizes;  /* the buffer each point is keyed by (planner_cost_step_buffer) */
  double *times;   /* [kind][size][iteration][device] */
  guint n_dev;
  double progress_base, progress_span;
  /* compute figures, per device */
  double *gemm_s;
  double *gemm_curve_s; /* [device][size index]: the GEMM sweep of the efficiency table */
  double *copy_s;
  gsize copy_bytes;
  guint axis;
} Sweep;

static gsize
count_for (PlannerStepKind kind, guint p, guint64 buffer)
{
  /* Elements per rank chunk such that the buffer the formula names has @buffer bytes. */
  guint64 elems = MAX (buffer / 4, 1);
  return kind == PLANNER_STEP_ALL_REDUCE ? elems : MAX (elems / p, 1);
}

static gboolean
sweep_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  Sweep *s = data;
  guint p = dev->backend->mesh.sizes[s->axis];
  gsize largest = (gsize) s->sizes[s->n_sizes - 1] + (gsize) p * 4;
  ExecutorBuffer *a = executor_device_buffer_new (dev, largest, error);
  ExecutorBuffer *b = a ? executor_device_buffer_new (dev, largest, error) : NULL;
  gboolean ok = b != NULL;
  guint iters = s->options->warmup + s->options->iterations;

  for (guint k = 0; ok && k < G_N_ELEMENTS (kinds); k++)
    for (guint i = 0; ok && i < s->n_sizes; i++)
      {
        gsize count = count_for (kinds[k], p, s->sizes[i]);
        if (dev->index == 0 && s->options->progress)
          {
            g_autofree char *size = planner_format_bytes (s->sizes[i]);
            g_autofree char *msg = g_strdup_printf ("%s, %u devices, %s",
                                                    planner_step_kind_to_string (kinds[k]), p,
                                                    size);
            s->options->progress (s->progress_base
                                    + s->progress_span * (k * s->n_sizes + i)
                                        / (double) (G_N_ELEMENTS (kinds) * s->n_sizes),
                                  msg, s->options->progress_data);
          }
        for (guint it = 0; ok && it < iters; it++)
          {
            if (g_cancellable_set_error_if_cancelled (s->cancellable, error))
              {
                ok = FALSE;
                break;
              }
            ok = executor_device_barrier (dev, error);
            executor_device_timer_begin (dev);
            ok = ok && executor_device_collective (dev, kinds[k], s->axis, a, b, count,
                                                   PLANNER_DTYPE_F32, error);
            double t = executor_device_timer_end (dev);
            if (it >= s->options->warmup)
              s->times[(((gsize) k * s->n_sizes + i) * s->options->iterations
                        + (it - s->options->warmup))
                         * s->n_dev
                       + dev->index]
                = t;
          }
      }
  executor_device_buffer_free (dev, a);
  executor_device_buffer_free (dev, b);
  return ok;
}

/* The GEMM efficiency sweep: square sizes from GEMM_SWEEP_MIN doubling up to the calibration
 * GEMM's. */
#define GEMM_SWEEP_MIN 32

static guint
gemm_sweep_count (gint64 n)
{
  guint k = 0;
  for (gint64 m = GEMM_SWEEP_MIN; m <= n && k < PLANNER_MAX_EFFICIENCY_POINTS; m *= 2)
    k++;
  return k;
}

/* Compute figures with every device busy at once, as in a trial run. */
static gboolean
compute_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  Sweep *s = data;
  gint64 n = s->options->gemm_size;
  gsize bytes = (gsize) (n * n) * 4;
  ExecutorBuffer *a = executor_device_buffer_new (dev, bytes, error);
  ExecutorBuffer *b = a ? executor_device_buffer_new (dev, bytes, error) : NULL;
  ExecutorBuffer *c = b ? executor_device_buffer_new (dev, bytes, error) : NULL;
  ExecutorBuffer *x = c ? executor_device_buffer_new (dev, s->copy_bytes, error) : NULL;
  ExecutorBuffer *y = x ? executor_device_buffer_new (dev, s->copy_bytes, error) : NULL;
  gboolean ok = y != NULL;
  if (ok)
    {
      /* A MatMul op through the backend's own kernel, so the figure is what trials see. */
      PlannerOp op = { 0 };
      op.name = (char *) "calibrate.gemm";
      op.type = PLANNER_OP_MATMUL;
      planner_op_attrs_init (&op.attrs);
      ExecutorOpCall call = { 0 };
      call.op = &op;
      call.n_inputs = 2;
      call.n_outputs = 1;
      ExecutorTensorArg args[3] = { { 2, { n, n }, PLANNER_DTYPE_F32, a },
                                    { 2, { n, n }, PLANNER_DTYPE_F32, b },
                                    { 2, { n, n }, PLANNER_DTYPE_F32, c } };
      call.inputs[0] = args[0];
      call.inputs[1] = args[1];
      call.outputs[0] = args[2];
      double best_gemm = G_MAXDOUBLE, best_copy = G_MAXDOUBLE;
      for (guint it = 0; ok && it < 5; it++)
        {
          ok = executor_device_barrier (dev, error);
          executor_device_timer_begin (dev);
          ok = ok && executor_device_run_op (dev, &call, error);
          best_gemm = MIN (best_gemm, executor_device_timer_end (dev));
          ok = ok && executor_device_barrier (dev, error);
          executor_device_timer_begin (dev);
          ok = ok && executor_device_copy_2d (dev, y, 0, s->copy_bytes, x, 0, s->copy_bytes,
                                              s->copy_bytes, 1, error);
          best_copy = MIN (best_copy, executor_device_timer_end (dev));
        }
      s->gemm_s[dev->index] = best_gemm;
      s->copy_s[dev->index] = best_copy;
      /* The efficiency table: smaller square GEMMs on the same buffers. */
      guint k = 0;
      for (gint64 m = GEMM_SWEEP_MIN; ok && m <= n; m *= 2, k++)
        {
          for (guint j = 0; j < 3; j++)
            args[j].shape[0] = args[j].shape[1] = m;
          call.inputs[0] = args[0];
          call.inputs[1] = args[1];
          call.outputs[0] = args[2];
          double best = G_MAXDOUBLE;
          for (guint it = 0; ok && it < 5; it++)
            {
              ok = executor_device_barrier (dev, error);
              executor_device_timer_begin (dev);
              ok = ok && executor_device_run_op (dev, &call, error);
              best = MIN (best, executor_device_timer_end (dev));
            }
          s->gemm_curve_s[dev->index * gemm_sweep_count (n) + k] = best;
        }
    }
  executor_device_buffer_free (dev, a);
  executor_device_buffer_free (dev, b);
  executor_device_buffer_free (dev, c);
  executor_device_buffer_free (dev, x);
  executor_device_buffer_free (dev, y);
  return ok;
}

static int
cmp_double (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

PlannerHardware *
executor_calibrate (const char *backend_name, const ExecutorCalibrateOptions *options,
                    GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail (backend_name != NULL, NULL);
  ExecutorCalibrateOptions defaults;
  if (options == NULL)
    {
      executor_calibrate_options_init (&defaults);
      options = &defaults;
    }
  g_return_val_if_fail (options->iterations > 0 && options->min_bytes > 0, NULL);

  /* GPUs (nccl) start from an H100 node's profile: what the sweep does not measure (bf16
   * peak, memory) stays a datasheet figure; costs.md asks sweeps to >= 256 MiB there. */
  gboolean gpu = g_strcmp0 (backend_name, "cpu") != 0;
  g_autoptr (PlannerHardware) hw
    = planner_hardware_new_builtin (gpu ? "h100-sxm" : "cpu-local", error);
  if (hw == NULL)
    return NULL;
  ExecutorCalibrateOptions gpu_options;
  if (gpu && options->max_bytes < (256u << 20))
    {
      gpu_options = *options;
      gpu_options.max_bytes = 256u << 20;
      options = &gpu_options;
    }
  guint64 n_sizes = 0;
  for (guint64 n = options->min_bytes; n <= options->max_bytes; n *= 2)
    n_sizes++;
  g_autofree guint64 *sizes = g_new (guint64, MAX (n_sizes, 1));
  guint i = 0;
  for (guint64 n = options->min_bytes; n <= options->max_bytes; n *= 2)
    sizes[i++] = n;

  guint n_groups = 0;
  for (guint p = 2; p <= MAX (options->max_devices, 2); p *= 2)
    n_groups++;
  guint g = 0;
  double peak = 0, membw = 0;
  double gemm_curve_size[PLANNER_MAX_EFFICIENCY_POINTS], gemm_curve_flops[PLANNER_MAX_EFFICIENCY_POINTS];
  guint gemm_curve_n = 0;
  for (guint p = 2; p <= MAX (options->max_devices, 2); p *= 2, g++)
    {
      /* Groups of p on every device at once (a major axis of max/p groups), as a trial on
       * the full mesh runs them: on a CPU the groups share the cores. */
      g_autoptr (PlannerMesh) mesh = planner_mesh_new ();
      guint groups = MAX (options->max_devices, 2) / p;
      if ((groups > 1 && !planner_mesh_add_axis (mesh, "g", groups, error))
          || !planner_mesh_add_axis (mesh, "x", p, error))
        return NULL;
      guint axis = mesh->n_axes - 1;
      g_autoptr (ExecutorBackend) backend = executor_backend_new (backend_name, mesh, error);
      if (backend == NULL)
        return NULL;
      if (!executor_backend_calibrates_links (backend))
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                       "backend %s times device memory, not links: its collectives never "
                       "calibrate a profile; use the nccl backend",
                       backend_name);
          return NULL;
        }
      guint n_dev = executor_backend_get_n_devices (backend);
      Sweep s = { options, cancellable, (guint) n_sizes, sizes, NULL, n_dev, 0, 0, NULL, NULL, 0,
                  axis };
      s.times = g_new0 (double, G_N_ELEMENTS (kinds) * n_sizes * options->iterations * n_dev);
      s.progress_base = (double) g / n_groups;
      s.progress_span = 1.0 / n_groups;
      s.gemm_s = g_new0 (double, n_dev);
      s.gemm_curve_s = g_new0 (double, (gsize) n_dev * gemm_sweep_count (options->gemm_size));
      s.copy_s = g_new0 (double, n_dev);
      s.copy_bytes = 32u << 20;
      gboolean ok = executor_backend_run (backend, sweep_device, &s, error);
      /* Compute figures with the largest group busy, as trials of that size run. */
      if (ok && p * 2 > MAX (options->max_devices, 2))
        {
          ok = executor_backend_run (backend, compute_device, &s, error);
          if (ok)
            {
              double gemm = 0, copy = 0;
              for (guint d = 0; d < n_dev; d++)
                {
                  gemm = MAX (gemm, s.gemm_s[d]);
                  copy = MAX (copy, s.copy_s[d]);
                }
              double n = (double) options->gemm_size;
              peak = 2 * n * n * n / gemm;
              /* Throughput by size, the slowest device's; the peak is the best of them, and
               * the table is each size's fraction of it. */
              guint nk = gemm_sweep_count (options->gemm_size);
              gemm_curve_n = nk;
              for (guint k = 0; k < nk; k++)
                {
                  double t = 0, m = (double) (GEMM_SWEEP_MIN << k);
                  for (guint d = 0; d < n_dev; d++)
                    t = MAX (t, s.gemm_curve_s[d * nk + k]);
                  gemm_curve_size[k] = m;
                  gemm_curve_flops[k] = 2 * m * m * m / t;
                  /* The calibration GEMM is this size's work timed once more: the better
                   * of the two is the size's figure, so the table's best entry is the peak
                   * itself (efficiency 1) and no entry says a size runs below what it ran. */
                  if (m == n)
                    gemm_curve_flops[k] = MAX (gemm_curve_flops[k], 2 * n * n * n / gemm);
                  peak = MAX (peak, gemm_curve_flops[k]);
                }
              /* A copy reads and writes every byte. */
              membw = 2.0 * (double) s.copy_bytes / copy;
            }
        }
      if (ok)
        for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
          for (guint z = 0; z < n_sizes; z++)
            {
              g_autofree double *per = g_new (double, options->iterations);
              for (guint it = 0; it < options->iterations; it++)
                {
                  double mx = 0;
                  for (guint d = 0; d < n_dev; d++)
                    mx = MAX (mx, s.times[(((gsize) k * n_sizes + z) * options->iterations + it)
                                            * n_dev
                                          + d]);
                  per[it] = mx;
                }
              qsort (per, options->iterations, sizeof (double), cmp_double);
              double med = options->iterations % 2
                             ? per[options->iterations / 2]
                             : 0.5 * (per[options->iterations / 2 - 1]
                                      + per[options->iterations / 2]);
              /* The key is the buffer the formula names; rounding the chunk to whole
               * elements per rank can change it slightly. */
              gsize count = count_for (kinds[k], p, sizes[z]);
              guint64 key = kinds[k] == PLANNER_STEP_ALL_REDUCE ? count * 4 : (guint64) count * p * 4;
              planner_hardware_add_measurement (hw, kinds[k], PLANNER_LINK_INTRA, p, key, med);
              if (!gpu) /* one node: intra only */
                planner_hardware_add_measurement (hw, kinds[k], PLANNER_LINK_INTER, p, key, med);
            }
      g_free (s.times);
      g_free (s.gemm_s);
      g_free (s.gemm_curve_s);
      g_free (s.copy_s);
      if (!ok)
        return NULL;
    }

  /* Link figures for the formula, from the AllReduce curve of the largest group. */
  guint pmax = 2;
  while (pmax * 2 <= MAX (options->max_devices, 2))
    pmax *= 2;
  PlannerLink link = { "shared memory", 5, 2 };
  if (gpu)
    g_strlcpy (link.name, "NCCL (measured)", sizeof link.name);
  executor_calibrate_link (hw, pmax, &link);
  planner_hardware_set_link (hw, PLANNER_LINK_INTRA, &link);
  /* One process's GPUs are one node: the inter-node link stays the profile's unless this
   * is the CPU, where there is no other. */
  if (!gpu)
    planner_hardware_set_link (hw, PLANNER_LINK_INTER, &link);
  /* Every float dtype runs as f32 on the CPU; a GPU's bf16 tensor cores keep the profile's
   * figure (the calibration GEMM is f32). */
  planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_F32, peak / 1e12);
  if (!gpu)
    {
      planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_BF16, peak / 1e12);
      planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_F16, peak / 1e12);
      planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_I64, peak / 1e12);
      double mem = (double) sysconf (_SC_PHYS_PAGES) * (double) sysconf (_SC_PAGESIZE);
      planner_hardware_set_memory_GB (hw, mem / pmax / 1e9);
    }
  planner_hardware_set_memory_bandwidth_GBps (hw, membw / 1e9);
  /* The measured GEMM efficiency table (f32, as the calibration GEMM runs): on a GPU it
   * describes the f32 path only, so the profile's own table (for bf16) is kept there. The
   * copy measured the bandwidth the memory-bound ops reach, so their efficiency is 1. */
  if (!gpu && gemm_curve_n > 0)
    {
      PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
      e.n_gemm = gemm_curve_n;
      for (guint k = 0; k < gemm_curve_n; k++)
        {
          e.gemm_size[k] = gemm_curve_size[k];
          e.gemm_efficiency[k] = MIN (1.0, MAX (gemm_curve_flops[k] / peak, 1e-6));
        }
      e.memory_bound = 1;
      planner_hardware_set_efficiency (hw, &e);
    }
  g_autofree char *hw_name = g_strdup_printf ("%s-measured", backend_name);
  planner_hardware_set_name (hw, hw_name);
  g_autofree char *desc = g_strdup_printf (
    "Measured by 'shardscope-cli calibrate --backend %s' on %ld online cores: collectives "
    "over groups of 2..%u devices (every group of the %u devices at once), %" G_GUINT64_FORMAT " B to %" G_GUINT64_FORMAT
    " B, median of %u iterations after %u warm-up; GEMM %" G_GINT64_FORMAT
    "^3 (and square GEMMs from 32 up, for the efficiency table) and a %u MiB copy with %u "
    "devices busy. %s",
    backend_name, sysconf (_SC_NPROCESSORS_ONLN), pmax, pmax, options->min_bytes, options->max_bytes,
    options->iterations, options->warmup, options->gemm_size, 32, pmax,
    gpu ? "GPUs of one node: bf16 peak, memory and the inter-node link are h100-sxm's."
        : "bf16/f16 run as f32. One machine: the inter link repeats the shared-memory figures.");
  planner_hardware_set_description (hw, desc);
  if (options->progress)
    options->progress (1.0, "done", options->progress_data);
  return g_steal_pointer (&hw);
}
