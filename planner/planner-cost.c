#define G_LOG_DOMAIN "planner-cost"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-cost.h"

guint64
planner_cost_step_buffer (PlannerStepKind kind, guint64 n_in, guint64 n_out)
{
  g_return_val_if_fail (kind < PLANNER_N_STEP_KINDS, 0);
  return kind == PLANNER_STEP_ALL_GATHER || kind == PLANNER_STEP_SLICE ? n_out : n_in;
}

/* (p-1)/p of @n, exact in integers and without overflowing n * (p-1). */
static guint64
ring_share (guint p, guint64 n)
{
  return n / p * (p - 1) + n % p * (p - 1) / p;
}

guint64
planner_cost_step_bytes (PlannerStepKind kind, guint p, guint64 n_in, guint64 n_out)
{
  guint64 share;

  g_return_val_if_fail (kind < PLANNER_N_STEP_KINDS, 0);

  if (p <= 1 || kind == PLANNER_STEP_SLICE)
    return 0;
  share = ring_share (p, planner_cost_step_buffer (kind, n_in, n_out));
  return kind == PLANNER_STEP_ALL_REDUCE ? 2 * share : share;
}

/* Measured curves.
 *
 * Calibration stores raw medians; the shaping below happens at evaluation so that the file
 * keeps what was measured. */

typedef struct
{
  guint n;
  double *bytes;
  double *seconds;
} Shaped;

static void
shaped_clear (Shaped *shaped)
{
  g_free (shaped->bytes);
  g_free (shaped->seconds);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Shaped, shaped_clear)

/* Bandwidth is made non-decreasing with size by pool-adjacent-violators (the least-squares
 * monotone fit: a dip between protocol switches is averaged with its neighbours rather than
 * trusted or ignored), then time is made non-decreasing too. Raising a time to the one before
 * it keeps bandwidth monotone, since the bytes grew. A monotone bandwidth at the points also
 * makes it monotone along each linear segment between them. */
static void
shape_curve (const PlannerMeasuredPoint *points, guint n, Shaped *shaped)
{
  g_autofree double *level = g_new (double, n);
  g_autofree guint *count = g_new (guint, n);
  guint blocks = 0, k = 0;

  g_assert (n > 0);
  shaped->n = n;
  shaped->bytes = g_new (double, n);
  shaped->seconds = g_new (double, n);

  for (guint i = 0; i < n; i++)
    {
      level[blocks] = points[i].bytes / points[i].seconds;
      count[blocks] = 1;
      blocks++;
      while (blocks > 1 && level[blocks - 2] > level[blocks - 1])
        {
          guint c = count[blocks - 2] + count[blocks - 1];

          level[blocks - 2]
              = (level[blocks - 2] * count[blocks - 2] + level[blocks - 1] * count[blocks - 1]) / c;
          count[blocks - 2] = c;
          blocks--;
        }
    }

  for (guint b = 0; b < blocks; b++)
    for (guint j = 0; j < count[b]; j++, k++)
      {
        shaped->bytes[k] = points[k].bytes;
        shaped->seconds[k] = shaped->bytes[k] / level[b];
        if (k > 0 && shaped->seconds[k] < shaped->seconds[k - 1])
          shaped->seconds[k] = shaped->seconds[k - 1];
      }
}

/* t = alpha + beta n, least squares on relative error (weights 1/t^2), so latency-bound and
 * bandwidth-bound points count alike, as in the accuracy targets of costs.md. Both are kept
 * >= 0: a negative fitted latency is refitted through the origin. */
static void
fit_alpha_beta (const Shaped *shaped, double *alpha, double *beta)
{
  double s = 0, sx = 0, sxx = 0, st = 0, sxt = 0, det;

  if (shaped->n == 1)
    {
      /* One point cannot separate latency from bandwidth: call it all bandwidth. */
      *alpha = 0;
      *beta = shaped->seconds[0] / shaped->bytes[0];
      return;
    }

  for (guint i = 0; i < shaped->n; i++)
    {
      double x = shaped->bytes[i], t = shaped->seconds[i], w = 1 / (t * t);

      s += w;
      sx += w * x;
      sxx += w * x * x;
      st += w * t;
      sxt += w * x * t;
    }
  det = s * sxx - sx * sx;
  *alpha = (sxx * st - sx * sxt) / det;
  *beta = (s * sxt - sx * st) / det;
  if (*alpha < 0)
    {
      *alpha = 0;
      *beta = sxt / sxx;
    }
  else if (*beta < 0)
    {
      *alpha = st / s;
      *beta = 0;
    }
}

static double
curve_time (const PlannerMeasuredPoint *points, guint n_points, guint64 n)
{
  g_auto (Shaped) shaped = { 0 };
  double x = n, alpha, beta;
  guint lo, hi;

  shape_curve (points, n_points, &shaped);

  if (x <= shaped.bytes[0] || x >= shaped.bytes[n_points - 1])
    {
      /* Continue from the nearest end with the fitted per-byte cost: the fit's own intercept
       * would jump away from the measured end point. */
      guint end = x <= shaped.bytes[0] ? 0 : n_points - 1;
      guint last = n_points - 1;

      fit_alpha_beta (&shaped, &alpha, &beta);
      /* No steeper than the largest point's seconds per byte, so that bandwidth stays
       * non-decreasing past both ends as well. */
      beta = MIN (beta, shaped.seconds[last] / shaped.bytes[last]);
      return MAX (0.0, shaped.seconds[end] + beta * (x - shaped.bytes[end]));
    }

  lo = 0;
  hi = n_points - 1;
  while (hi - lo > 1)
    {
      guint mid = (lo + hi) / 2;

      if (shaped.bytes[mid] <= x)
        lo = mid;
      else
        hi = mid;
    }
  return shaped.seconds[lo]
         + (shaped.seconds[hi] - shaped.seconds[lo]) * (x - shaped.bytes[lo])
               / (shaped.bytes[hi] - shaped.bytes[lo]);
}

gboolean
planner_cost_measurement_fit (const PlannerHardware *hw, PlannerStepKind kind, PlannerLinkKind link,
                              guint p, double *alpha, double *beta)
{
  g_auto (Shaped) shaped = { 0 };
  const PlannerMeasuredPoint *points;
  guint n_points;
  double a, b;

  g_return_val_if_fail (hw != NULL, FALSE);

  points = planner_hardware_get_measurement (hw, kind, link, p, &n_points);
  if (points == NULL)
    return FALSE;
  shape_curve (points, n_points, &shaped);
  fit_alpha_beta (&shaped, &a, &b);
  if (alpha)
    *alpha = a;
  if (beta)
    *beta = b;
  return TRUE;
}

/* NCCL picks NVLS for an intra-node AllReduce from 5 devices up (measured on 8x H200 with
 * nccl-tests: Ring at 4 GPUs, NVLS at 5 to 8; ml-engineering, network/README.md, "SHARP"). */
#define NVLS_MIN_DEVICES 4

/* The formula of semantics.md 7: AllReduce is a ReduceScatter then an AllGather, hence the 2.
 * Across nodes NCCL also has its double binary tree for AllReduce, which moves the same bytes
 * per device in 2 ceil(log2 p) latency steps instead of the ring's 2 (p-1), and picks
 * whichever is faster: the latency term takes the smaller count there. */
static double
formula_time (const PlannerLink *link, PlannerStepKind kind, guint p, guint64 n, gboolean tree)
{
  double steps = kind == PLANNER_STEP_ALL_REDUCE ? 2.0 * (p - 1) : p - 1;
  double latency_steps = steps;

  if (tree && kind == PLANNER_STEP_ALL_REDUCE)
    latency_steps = MIN (steps, 2.0 * ceil (log2 (p)));
  return latency_steps * link->latency_us * 1e-6 + steps / p * n / (link->bandwidth_GBps * 1e9);
}

/* One of NCCL's protocols on the intra-node ring (src/graph/tuning.cc, ncclTopoTuneModel):
 * a base latency once, a latency per ring step, and the ring's bytes at a fraction of the
 * link's busbw, capped. */
static double
protocol_time (const PlannerLink *link, PlannerStepKind kind, guint p, guint64 n, double base_us,
               double step_us, double factor, double cap_GBps)
{
  double steps = kind == PLANNER_STEP_ALL_REDUCE ? 2.0 * (p - 1) : p - 1;
  double busbw = link->bandwidth_GBps * factor;

  if (cap_GBps > 0)
    busbw = MIN (busbw, cap_GBps);
  return (base_us + steps * step_us) * 1e-6 + steps / p * n / (busbw * 1e9);
}

/* The chunk NCCL's NVLS AllReduce moves per channel and head (src/enqueue.cc,
 * calcCollChunking): the largest, halved down to 64, 32 and 16 KiB while the message is
 * smaller than 64, 8 and 2 rounds of @concurrent chunks. */
static double
nvls_chunk (double n, double concurrent, double largest)
{
  double c = largest;

  if (n < 64 * concurrent * c && c > 65536)
    c = 65536;
  if (n < 8 * concurrent * c && c > 32768)
    c = 32768;
  if (n < 2 * concurrent * c && c > 16384)
    c = 16384;
  return c;
}

/* NVLS AllReduce over @p devices of a node: rounds of channels x p chunks (a node's NVLS has
 * one head per GPU), each round a fixed cost plus its bytes at the rate that makes the largest
 * chunk reach nvls_bandwidth_GBps busbw, and the rounds the pipeline takes to fill. */
static double
nvls_time (const PlannerEfficiency *e, guint p, guint64 n)
{
  double steps = 2.0 * (p - 1);
  double concurrent = e->nvls_channels * p;
  double largest = e->nvls_max_chunk_KiB * 1024;
  double chunk = nvls_chunk (n, concurrent, largest);
  double round_s = e->nvls_chunk_us * 1e-6;
  /* Seconds per byte of a round, beyond its fixed cost. */
  double per_byte
      = MAX (0.0, steps / p / (e->nvls_bandwidth_GBps * 1e9) - round_s / (concurrent * largest));

  return e->nvls_latency_us * 1e-6
         + (n / (concurrent * chunk) + e->nvls_fill_chunks)
               * (round_s + concurrent * chunk * per_byte);
}

double
planner_cost_collective_time (const PlannerHardware *hw, PlannerStepKind kind, PlannerLinkKind link,
                              guint p, guint64 n)
{
  const PlannerMeasuredPoint *points;
  guint n_points;

  g_return_val_if_fail (hw != NULL, 0.0);
  g_return_val_if_fail (kind < PLANNER_N_STEP_KINDS, 0.0);
  g_return_val_if_fail (link < PLANNER_N_LINKS, 0.0);

  if (p <= 1)
    return 0.0;
  if (kind == PLANNER_STEP_SLICE)
    return n / planner_hardware_memory_bandwidth (hw);

  points = planner_hardware_get_measurement (hw, kind, link, p, &n_points);
  if (points != NULL)
    return curve_time (points, n_points, n);
  const PlannerEfficiency *e = planner_hardware_get_efficiency (hw);
  const PlannerLink *l_hw = planner_hardware_get_link (hw, link);
  gboolean ring_protocols = link == PLANNER_LINK_INTRA && kind != PLANNER_STEP_ALL_TO_ALL;
  double t;

  /* NCCL's Simple ring inside a node costs its own base latency once plus one per ring step
   * (tuning.cc: 8.4 us and 3.4 us on NVLink), not the profile's bare latency a step: that
   * latency is what keeps a ring of a few MiB from its asymptotic busbw. */
  if (ring_protocols && (e->ring_base_us > 0 || e->ring_step_us > 0))
    t = protocol_time (l_hw, kind, p, n, e->ring_base_us, e->ring_step_us, 1, 0);
  else
    t = formula_time (l_hw, kind, p, n, link == PLANNER_LINK_INTER);
  /* NVLink SHARP: inside a node with NVSwitch, NCCL reduces in the switch (algorithm NVLS) for
   * AllReduce over more than 4 devices, at a busbw above the ring's; the faster is taken. (With
   * NCCL's own ring latencies NVLS is the faster from 4 MiB up on h100-sxm and h200-sxm.) */
  if (kind == PLANNER_STEP_ALL_REDUCE && link == PLANNER_LINK_INTRA && p > NVLS_MIN_DEVICES
      && e->nvls_bandwidth_GBps > 0)
    {
      if (e->nvls_channels > 0 && e->nvls_max_chunk_KiB > 0)
        t = MIN (t, nvls_time (e, p, n));
      else
        {
          PlannerLink l = *planner_hardware_get_link (hw, link);
          l.bandwidth_GBps = e->nvls_bandwidth_GBps;
          t = MIN (t, formula_time (&l, kind, p, n, FALSE));
        }
    }
  /* Inside a node NCCL also has the LL and LL128 protocols for its ring collectives; it takes
   * the fastest. */
  if (ring_protocols && e->ll_bandwidth_factor > 0)
    t = MIN (t, protocol_time (l_hw, kind, p, n, e->ll_base_us, e->ll_step_us,
                               e->ll_bandwidth_factor, e->ll_bandwidth_GBps));
  if (ring_protocols && e->ll128_bandwidth_factor > 0)
    t = MIN (t, protocol_time (l_hw, kind, p, n, e->ll128_base_us, e->ll128_step_us,
                               e->ll128_bandwidth_factor, e->ll128_bandwidth_GBps));
  return t;
}

double
planner_cost_step_time (const PlannerHardware *hw, const PlannerMesh *mesh, PlannerStepKind kind,
                        guint axis, guint64 n_in, guint64 n_out)
{
  g_return_val_if_fail (hw != NULL, 0.0);
  g_return_val_if_fail (mesh != NULL, 0.0);
  g_return_val_if_fail (axis < mesh->n_axes, 0.0);
  g_return_val_if_fail (kind < PLANNER_N_STEP_KINDS, 0.0);

  PlannerLinkKind link = planner_hardware_axis_link_kind (hw, mesh, axis);
  guint p = mesh->sizes[axis];
  guint64 n = planner_cost_step_buffer (kind, n_in, n_out);
  const PlannerEfficiency *e = planner_hardware_get_efficiency (hw);
  guint node = planner_hardware_get_node_size (hw);
  guint64 minor = 1;

  for (guint a = axis + 1; a < mesh->n_axes; a++)
    minor *= mesh->sizes[a];
  /* Several NICs per node: a group that has k members in each node drives k x (NICs per
   * device) NICs from that node, as NCCL's rings and trees spread their channels over every
   * NIC; the hops inside the node ride NVLink, which caps the rate. Without a measured curve
   * only, and only when the profile says how many NICs a node has. */
  if (link == PLANNER_LINK_INTER && kind != PLANNER_STEP_SLICE && p > 1 && e->nics_per_node > 0
      && minor < node && node % minor == 0
      && planner_hardware_get_measurement (hw, kind, link, p, NULL) == NULL)
    {
      guint k = MIN (p, (guint)(node / minor));
      PlannerLink l = *planner_hardware_get_link (hw, PLANNER_LINK_INTER);
      double share = (double)e->nics_per_node * k / node;

      l.bandwidth_GBps *= MAX (1.0, share);
      if (k > 1)
        l.bandwidth_GBps = MIN (l.bandwidth_GBps,
                                planner_hardware_get_link (hw, PLANNER_LINK_INTRA)->bandwidth_GBps);
      return formula_time (&l, kind, p, n, TRUE);
    }
  return planner_cost_collective_time (hw, kind, link, p, n);
}

gboolean
planner_step_kind_backward (PlannerStepKind kind, PlannerStepKind *backward)
{
  static const int transpose[PLANNER_N_STEP_KINDS] = {
    [PLANNER_STEP_ALL_REDUCE] = -1,
    [PLANNER_STEP_ALL_GATHER] = PLANNER_STEP_REDUCE_SCATTER,
    [PLANNER_STEP_REDUCE_SCATTER] = PLANNER_STEP_ALL_GATHER,
    [PLANNER_STEP_ALL_TO_ALL] = PLANNER_STEP_ALL_TO_ALL,
    [PLANNER_STEP_SLICE] = PLANNER_STEP_ALL_GATHER,
  };

  g_return_val_if_fail (kind < PLANNER_N_STEP_KINDS, FALSE);

  if (transpose[kind] < 0)
    return FALSE;
  if (backward)
    *backward = transpose[kind];
  return TRUE;
}

double
planner_cost_compute_time (const PlannerHardware *hw, PlannerDType dtype, double flops,
                           double bytes)
{
  g_return_val_if_fail (hw != NULL, 0.0);
  g_return_val_if_fail (flops >= 0 && bytes >= 0, 0.0);

  return MAX (flops / planner_hardware_peak_flops (hw, dtype),
              bytes / planner_hardware_memory_bandwidth (hw));
}

static const char *const optimizer_names[] = { "adam", "sgd" };
static const char *const recompute_names[] = { "none", "selective", "full" };
static const char *const attention_names[] = { "flash", "unfused", "flash1" };
static const char *const grad_reduce_names[] = { "param", "f32" };
static const char *const prefetch_names[] = { "pre", "post" };
static const char *const schedule_names[] = { "1f1b", "gpipe", "interleaved" };
static const char *const kernel_names[] = { "unfused", "fused" };

static int
index_of (const char *const *names, guint n, const char *text)
{
  for (guint i = 0; i < n; i++)
    if (g_strcmp0 (names[i], text) == 0)
      return (int)i;
  return -1;
}

#define ENUM_STRINGS(type, prefix, names)                                                          \
  const char *planner_##prefix##_to_string (type value)                                            \
  {                                                                                                \
    g_return_val_if_fail ((guint)value < G_N_ELEMENTS (names), NULL);                              \
    return names[value];                                                                           \
  }                                                                                                \
  gboolean planner_##prefix##_from_string (const char *text, type *value)                          \
  {                                                                                                \
    int i = index_of (names, G_N_ELEMENTS (names), text);                                          \
    if (i >= 0 && value)                                                                           \
      *value = (type)i;                                                                            \
    return i >= 0;                                                                                 \
  }

ENUM_STRINGS (PlannerOptimizer, optimizer, optimizer_names)
ENUM_STRINGS (PlannerRecompute, recompute, recompute_names)
ENUM_STRINGS (PlannerAttentionKernel, attention_kernel, attention_names)
ENUM_STRINGS (PlannerGradReduce, grad_reduce, grad_reduce_names)
ENUM_STRINGS (PlannerSchedule, schedule, schedule_names)
ENUM_STRINGS (PlannerBackwardPrefetch, backward_prefetch, prefetch_names)
ENUM_STRINGS (PlannerLossKernel, loss_kernel, kernel_names)
ENUM_STRINGS (PlannerNormKernel, norm_kernel, kernel_names)

void
planner_cost_constants_init (PlannerCostConstants *constants)
{
  g_return_if_fail (constants != NULL);

  memset (constants, 0, sizeof *constants);
  constants->weight_copies = 1;
  constants->grad_copies = 1;
  constants->optimizer_states = 2;
  constants->backward_factor = 2;
  constants->optimizer = PLANNER_OPTIMIZER_ADAM;
  constants->zero = 0;
  constants->recompute = PLANNER_RECOMPUTE_NONE;
  constants->attention = PLANNER_ATTENTION_FLASH;
  constants->micro_batch = 0;
  constants->dp_bucket_MiB = 25;
  constants->dp_overlap = TRUE;
  constants->grad_reduce = PLANNER_GRAD_REDUCE_PARAM;
  constants->backward_prefetch = PLANNER_PREFETCH_PRE;
  constants->loss = PLANNER_LOSS_UNFUSED;
  constants->rms_norm = PLANNER_NORM_UNFUSED;
  constants->zero_bucket_elements = PLANNER_ZERO_BUCKET_ELEMENTS_DEFAULT;
}

static char *
planner_cost_training_to_string_base (const PlannerCostConstants *c)
{
  char bucket[G_ASCII_DTOSTR_BUF_SIZE];

  g_return_val_if_fail (c != NULL, NULL);
  g_ascii_dtostr (bucket, sizeof bucket, c->dp_bucket_MiB);
  return g_strdup_printf ("optimizer=%s;zero=%u;recompute=%s;attention=%s;micro_batch=%u;"
                          "dp_bucket_MiB=%s;dp_overlap=%d;no_dropout=%d;grad_reduce=%s;"
                          "backward_prefetch=%s",
                          planner_optimizer_to_string (c->optimizer), c->zero,
                          planner_recompute_to_string (c->recompute),
                          planner_attention_kernel_to_string (c->attention), c->micro_batch, bucket,
                          c->dp_overlap ? 1 : 0, c->no_dropout ? 1 : 0,
                          planner_grad_reduce_to_string (c->grad_reduce),
                          planner_backward_prefetch_to_string (c->backward_prefetch));
}

/* The pipeline options go after the others, and only when one differs from its default, so
 * the text of a plan without a pipeline is what it was before them. */
static char *
training_to_string (const PlannerCostConstants *c)
{
  g_autofree char *base0 = planner_cost_training_to_string_base (c);
  g_autofree char *base = NULL;
  /* The memory options of issue 12 likewise, only when one differs from its default. */
  if (c->loss != PLANNER_LOSS_UNFUSED || c->rms_norm != PLANNER_NORM_UNFUSED
      || c->zero_bucket_elements != PLANNER_ZERO_BUCKET_ELEMENTS_DEFAULT)
    {
      char bucket[G_ASCII_DTOSTR_BUF_SIZE];
      g_ascii_dtostr (bucket, sizeof bucket, c->zero_bucket_elements);
      base = g_strdup_printf ("%s;loss=%s;rms_norm=%s;zero_bucket_elements=%s", base0,
                              planner_loss_kernel_to_string (c->loss),
                              planner_norm_kernel_to_string (c->rms_norm), bucket);
    }
  else
    base = g_steal_pointer (&base0);
  if (c->schedule == PLANNER_SCHEDULE_1F1B && c->micro_batches == 0 && c->virtual_stages <= 1
      && c->stages[0] == '\0')
    return g_steal_pointer (&base);
  return g_strdup_printf ("%s;schedule=%s;micro_batches=%u;virtual_stages=%u;stages=%s", base,
                          planner_schedule_to_string (c->schedule), c->micro_batches,
                          MAX (c->virtual_stages, 1), c->stages);
}

char *
planner_cost_training_to_string (const PlannerCostConstants *c)
{
  g_return_val_if_fail (c != NULL, NULL);
  return training_to_string (c);
}

static gboolean
parse_uint (const char *text, guint max, guint *out)
{
  guint64 v;
  if (!g_ascii_string_to_unsigned (text, 10, 0, max, &v, NULL))
    return FALSE;
  *out = (guint)v;
  return TRUE;
}

gboolean
planner_cost_training_from_string (const char *text, PlannerCostConstants *constants)
{
  g_return_val_if_fail (text != NULL && constants != NULL, FALSE);

  PlannerCostConstants c = *constants;
  g_auto (GStrv) items = g_strsplit (text, ";", -1);
  for (guint i = 0; items[i]; i++)
    {
      if (items[i][0] == '\0')
        continue;
      char *value = strchr (items[i], '=');
      guint flag = 0;
      if (value == NULL)
        return FALSE;
      *value++ = '\0';
      const char *key = items[i];
      gboolean ok;
      if (strcmp (key, "optimizer") == 0)
        ok = planner_optimizer_from_string (value, &c.optimizer);
      else if (strcmp (key, "zero") == 0)
        ok = parse_uint (value, 3, &c.zero);
      else if (strcmp (key, "recompute") == 0)
        ok = planner_recompute_from_string (value, &c.recompute);
      else if (strcmp (key, "attention") == 0)
        ok = planner_attention_kernel_from_string (value, &c.attention);
      else if (strcmp (key, "micro_batch") == 0)
        ok = parse_uint (value, G_MAXINT, &c.micro_batch);
      else if (strcmp (key, "dp_bucket_MiB") == 0)
        {
          char *end;
          c.dp_bucket_MiB = g_ascii_strtod (value, &end);
          ok = *value != '\0' && *end == '\0' && isfinite (c.dp_bucket_MiB) && c.dp_bucket_MiB > 0;
        }
      else if (strcmp (key, "dp_overlap") == 0)
        {
          ok = parse_uint (value, 1, &flag);
          c.dp_overlap = flag;
        }
      else if (strcmp (key, "no_dropout") == 0)
        {
          ok = parse_uint (value, 1, &flag);
          c.no_dropout = flag;
        }
      else if (strcmp (key, "grad_reduce") == 0)
        ok = planner_grad_reduce_from_string (value, &c.grad_reduce);
      else if (strcmp (key, "backward_prefetch") == 0)
        ok = planner_backward_prefetch_from_string (value, &c.backward_prefetch);
      else if (strcmp (key, "loss") == 0)
        ok = planner_loss_kernel_from_string (value, &c.loss);
      else if (strcmp (key, "rms_norm") == 0)
        ok = planner_norm_kernel_from_string (value, &c.rms_norm);
      else if (strcmp (key, "zero_bucket_elements") == 0)
        {
          char *end;
          c.zero_bucket_elements = g_ascii_strtod (value, &end);
          ok = *value != '\0' && *end == '\0' && isfinite (c.zero_bucket_elements)
               && c.zero_bucket_elements >= 0 && c.zero_bucket_elements <= 1e15;
        }
      else if (strcmp (key, "schedule") == 0)
        ok = planner_schedule_from_string (value, &c.schedule);
      else if (strcmp (key, "micro_batches") == 0)
        ok = parse_uint (value, G_MAXINT, &c.micro_batches);
      else if (strcmp (key, "virtual_stages") == 0)
        ok = parse_uint (value, G_MAXINT, &c.virtual_stages);
      else if (strcmp (key, "stages") == 0)
        ok = g_strlcpy (c.stages, value, sizeof c.stages) < sizeof c.stages;
      else
        ok = FALSE;
      if (!ok)
        return FALSE;
    }
  *constants = c;
  return TRUE;
}

void
planner_cost_model_states (const PlannerCostConstants *constants, guint64 n_params,
                           PlannerDType dtype, guint dp, PlannerMemory *memory)
{
  g_return_if_fail (constants != NULL && memory != NULL);

  double size = planner_dtype_size (dtype);
  /* 16-bit training updates an fp32 master copy; fp32 training updates the weights. */
  double master = size < 4 ? 4 : 0;
  double shard = MAX (dp, 1u);
  double weights = n_params * size * constants->weight_copies;
  double grads = n_params * size * constants->grad_copies;
  double optimizer = n_params * (master + 4 * constants->optimizer_states);

  if (constants->zero >= 1)
    optimizer /= shard;
  if (constants->zero >= 2)
    grads /= shard;
  if (constants->zero >= 3)
    weights /= shard;
  memory->parameters += (guint64)llround (weights);
  memory->gradients += (guint64)llround (grads);
  memory->optimizer += (guint64)llround (optimizer);
}

double
planner_step_breakdown_total (const PlannerStepBreakdown *b)
{
  g_return_val_if_fail (b != NULL, 0.0);
  return b->forward + b->backward + b->recompute + b->tp_comm_exposed + b->dp_sync_exposed
         + b->overhead + b->pipeline_bubble + b->pipeline_comm;
}

/* The value of the table (@x increasing, @n >= 1) at @at: linear in log2(x) between points, as
 * sizes and sequence lengths span decades and efficiency rises with their doublings; flat
 * beyond the ends. */
static double
table_log2 (const double *x, const double *y, guint n, double at)
{
  if (at <= x[0])
    return y[0];
  if (at >= x[n - 1])
    return y[n - 1];
  guint i = 1;
  while (x[i] < at)
    i++;
  double x0 = log2 (x[i - 1]), x1 = log2 (x[i]);
  double w = (log2 (at) - x0) / (x1 - x0);
  return y[i - 1] + w * (y[i] - y[i - 1]);
}

double
planner_cost_gemm_efficiency (const PlannerHardware *hw, double size)
{
  g_return_val_if_fail (hw != NULL, 1.0);

  const PlannerEfficiency *e = planner_hardware_get_efficiency (hw);
  if (e->n_gemm == 0)
    return 1.0;
  return table_log2 (e->gemm_size, e->gemm_efficiency, e->n_gemm, size);
}

gboolean
planner_cost_attention_efficiency (const PlannerHardware *hw, PlannerAttentionKernel kernel,
                                   gboolean causal, double head_dim, double seq, double *efficiency)
{
  g_return_val_if_fail (hw != NULL && efficiency != NULL, FALSE);

  const PlannerEfficiency *e = planner_hardware_get_efficiency (hw);
  const PlannerAttentionCurve *best = NULL;
  double best_score = G_MAXDOUBLE;
  for (guint i = 0; i < e->n_attention; i++)
    {
      const PlannerAttentionCurve *c = &e->attention[i];
      if (c->kernel != kernel)
        continue;
      /* The same masking first (causal kernels skip tiles, which changes their efficiency),
       * then the nearest head dimension in doublings. */
      double score = fabs (log2 (MAX (head_dim, 1.0)) - log2 (c->head_dim))
                     + ((c->causal != 0) != (causal != 0) ? 1e6 : 0);
      if (score < best_score)
        {
          best = c;
          best_score = score;
        }
    }
  if (best == NULL)
    return FALSE;
  *efficiency = table_log2 (best->seq, best->efficiency, best->n, seq);
  return TRUE;
}

double
planner_cost_gemm_time (const PlannerHardware *hw, PlannerDType dtype, double flops, double bytes)
{
  g_return_val_if_fail (hw != NULL, 0.0);
  g_return_val_if_fail (flops >= 0 && bytes >= 0, 0.0);

  if (flops == 0 && bytes == 0)
    return 0.0;
  double eff = planner_cost_gemm_efficiency (hw, cbrt (flops / 2));
  return MAX (flops / (planner_hardware_peak_flops (hw, dtype) * eff),
              bytes
                  / (planner_hardware_memory_bandwidth (hw)
                     * planner_hardware_get_efficiency (hw)->memory_bound));
}

double
planner_cost_memory_bound_time (const PlannerHardware *hw, PlannerDType dtype, double flops,
                                double bytes)
{
  g_return_val_if_fail (hw != NULL, 0.0);
  g_return_val_if_fail (flops >= 0 && bytes >= 0, 0.0);

  return MAX (flops / planner_hardware_peak_flops (hw, dtype),
              bytes
                  / (planner_hardware_memory_bandwidth (hw)
                     * planner_hardware_get_efficiency (hw)->memory_bound));
}

double
planner_cost_bucket_exposed (const double *times, guint n, double backward, gboolean overlap)
{
  double done = 0, total = 0;

  g_return_val_if_fail (n == 0 || times != NULL, 0.0);

  for (guint k = 0; k < n; k++)
    total += times[k];
  if (!overlap || n == 0)
    return total;
  for (guint k = 0; k < n; k++)
    {
      double ready = backward * (k + 1) / n;
      done = MAX (done, ready) + times[k];
    }
  return MAX (0.0, done - backward);
}

double
planner_cost_prefetch_exposed (const double *times, guint n, double compute, gboolean overlap)
{
  double gathered = 0, now = 0, total = 0;

  g_return_val_if_fail (n == 0 || times != NULL, 0.0);

  for (guint k = 0; k < n; k++)
    total += times[k];
  if (!overlap || n == 0)
    return total;
  for (guint k = 0; k < n; k++)
    {
      gathered += times[k];
      now = MAX (now, gathered) + compute / n;
    }
  return MAX (0.0, now - compute);
}

double
planner_cost_post_prefetch_exposed (const double *gathers, const double *reduces, guint n)
{
  double exposed = 0;

  g_return_val_if_fail (n == 0 || (gathers != NULL && reduces != NULL), 0.0);

  if (n == 0)
    return 0.0;
  /* Backward order: unit n-1 first. Its gather starts the pass; each later gather waits for
   * the unit after it, then runs beside that unit's ReduceScatter. */
  for (guint k = n; k-- > 0;)
    exposed += gathers[k] + (k + 1 < n ? MIN (gathers[k], reduces[k + 1]) : 0);
  /* The first unit's ReduceScatter follows the last compute of the pass. */
  return exposed + reduces[0];
}

/* ---- mixture of experts ---- */

void
planner_cost_moe (gint64 experts, gint64 top_k, gint64 tokens, gint64 capacity,
                  PlannerCostMoe *moe)
{
  g_return_if_fail (moe != NULL && experts > 0 && top_k > 0 && tokens > 0 && capacity > 0);

  moe->experts = experts;
  moe->top_k = top_k;
  moe->tokens = tokens;
  moe->capacity = capacity;
  moe->balanced_load = (double)top_k * (double)tokens / (double)experts;
  moe->capacity_factor = (double)capacity / moe->balanced_load;
  moe->padding = MAX (0.0, 1.0 - moe->balanced_load / (double)capacity);
}

double
planner_cost_moe_dropped (const PlannerCostMoe *moe, double imbalance)
{
  g_return_val_if_fail (moe != NULL && imbalance >= 1.0, 0.0);

  /* A token never goes to one expert twice, so no expert receives more than @tokens. */
  double load = MIN (imbalance * moe->balanced_load, (double)moe->tokens);
  return load <= (double)moe->capacity ? 0.0 : 1.0 - (double)moe->capacity / load;
}

void
planner_memory_finish (PlannerMemory *memory)
{
  g_return_if_fail (memory != NULL);
  memory->total = memory->parameters + memory->gradients + memory->optimizer
                  + memory->activations + memory->loss + memory->buffers;
  memory->runtime = memory->cuda_context + memory->cublas_workspace + memory->nccl_buffers;
  memory->reserved_total = memory->total + memory->allocator + memory->runtime;
}

/* ---- PyTorch's caching allocator, replayed ---- */

/* One block of a segment: c10/cuda/CUDACachingAllocator.cpp's Block, with its neighbours in
 * the segment (prev / next, -1 at the ends) so that a free merges it with them. */
typedef struct
{
  guint64 size;
  guint64 offset;  /* inside its segment, for the pools' (size, address) order */
  guint segment;
  int prev, next;
  guint64 bytes;   /* the request it holds (0: free) */
  guint8 pool;     /* 0 small (<= kSmallSize), 1 large */
} SimBlock;

struct _PlannerAllocSim
{
  guint64 min_block, small_size, small_segment, large_segment, min_large, round_large;
  GArray *blocks;    /* SimBlock, indexed by handle */
  GArray *spare;     /* int: indices of merged-away blocks, reused */
  GArray *free[2];   /* int: free blocks of each pool, by (size, segment, offset) */
  guint segments;
  guint64 reserved, reserved_peak, live, live_peak;
};

static SimBlock *
sim_block (PlannerAllocSim *sim, int b)
{
  return &g_array_index (sim->blocks, SimBlock, b);
}

/* BlockComparatorSize: size, then address; a segment's index stands for its address. */
static gboolean
sim_before (PlannerAllocSim *sim, int a, guint64 size, guint segment, guint64 offset)
{
  const SimBlock *x = sim_block (sim, a);
  if (x->size != size)
    return x->size < size;
  if (x->segment != segment)
    return x->segment < segment;
  return x->offset < offset;
}

static guint
sim_lower_bound (PlannerAllocSim *sim, GArray *pool, guint64 size, guint segment, guint64 offset)
{
  guint lo = 0, hi = pool->len;
  while (lo < hi)
    {
      guint mid = (lo + hi) / 2;
      if (sim_before (sim, g_array_index (pool, int, mid), size, segment, offset))
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static void
sim_pool_insert (PlannerAllocSim *sim, int b)
{
  SimBlock *x = sim_block (sim, b);
  GArray *pool = sim->free[x->pool];
  guint at = sim_lower_bound (sim, pool, x->size, x->segment, x->offset);
  g_array_insert_val (pool, at, b);
}

static void
sim_pool_remove (PlannerAllocSim *sim, int b)
{
  SimBlock *x = sim_block (sim, b);
  GArray *pool = sim->free[x->pool];
  guint at = sim_lower_bound (sim, pool, x->size, x->segment, x->offset);
  g_assert (at < pool->len && g_array_index (pool, int, at) == b);
  g_array_remove_index (pool, at);
}

static int
sim_new_block (PlannerAllocSim *sim, const SimBlock *init)
{
  int b;
  if (sim->spare->len > 0)
    {
      b = g_array_index (sim->spare, int, sim->spare->len - 1);
      g_array_set_size (sim->spare, sim->spare->len - 1);
      *sim_block (sim, b) = *init;
    }
  else
    {
      b = (int)sim->blocks->len;
      g_array_append_val (sim->blocks, *init);
    }
  return b;
}

PlannerAllocSim *
planner_alloc_sim_new (const PlannerEfficiency *e)
{
  g_return_val_if_fail (e != NULL, NULL);
  PlannerAllocSim *sim = g_new0 (PlannerAllocSim, 1);
  sim->min_block = (guint64)MAX (e->allocator_min_block_B, 0);
  sim->small_size = (guint64)(e->allocator_small_size_KiB * 1024);
  sim->small_segment = (guint64)(e->allocator_small_segment_KiB * 1024);
  sim->large_segment = (guint64)(e->allocator_large_segment_KiB * 1024);
  sim->min_large = (guint64)(e->allocator_min_large_alloc_KiB * 1024);
  sim->round_large = (guint64)(e->allocator_round_large_KiB * 1024);
  sim->blocks = g_array_new (FALSE, FALSE, sizeof (SimBlock));
  sim->spare = g_array_new (FALSE, FALSE, sizeof (int));
  sim->free[0] = g_array_new (FALSE, FALSE, sizeof (int));
  sim->free[1] = g_array_new (FALSE, FALSE, sizeof (int));
  return sim;
}

void
planner_alloc_sim_free (PlannerAllocSim *sim)
{
  if (sim == NULL)
    return;
  g_array_unref (sim->blocks);
  g_array_unref (sim->spare);
  g_array_unref (sim->free[0]);
  g_array_unref (sim->free[1]);
  g_free (sim);
}

int
planner_alloc_sim_malloc (PlannerAllocSim *sim, guint64 bytes)
{
  g_return_val_if_fail (sim != NULL, -1);
  if (bytes == 0)
    return -1;
  sim->live += bytes;
  sim->live_peak = MAX (sim->live_peak, sim->live);
  if (sim->min_block == 0)
    {
      /* No allocator modelled: every tensor its own bytes. */
      SimBlock x = { bytes, 0, sim->segments++, -1, -1, bytes, 1 };
      sim->reserved += bytes;
      sim->reserved_peak = MAX (sim->reserved_peak, sim->reserved);
      return sim_new_block (sim, &x);
    }
  /* round_size, then get_free_block's lower_bound: the smallest free block that holds it (the
   * default max_split_size takes no oversize rule into play). */
  guint64 size = bytes < sim->min_block
                     ? sim->min_block
                     : (bytes + sim->min_block - 1) / sim->min_block * sim->min_block;
  guint8 pool = size <= sim->small_size ? 0 : 1;
  GArray *free = sim->free[pool];
  guint at = sim_lower_bound (sim, free, size, 0, 0);
  int b;
  if (at < free->len)
    {
      b = g_array_index (free, int, at);
      g_array_remove_index (free, at);
    }
  else
    {
      /* alloc_block: get_allocation_size, one cudaMalloc; never given back within the step
       * (no empty_cache). */
      guint64 segment = size <= sim->small_size ? sim->small_segment
                        : size < sim->min_large
                            ? sim->large_segment
                            : (size + sim->round_large - 1) / sim->round_large * sim->round_large;
      segment = MAX (segment, size);
      SimBlock x = { segment, 0, sim->segments++, -1, -1, 0, pool };
      b = sim_new_block (sim, &x);
      sim->reserved += segment;
      sim->reserved_peak = MAX (sim->reserved_peak, sim->reserved);
    }
  SimBlock *x = sim_block (sim, b);
  guint64 rest = x->size - size;
  /* should_split: at least kMinBlockSize left in the small pool, more than kSmallSize in the
   * large one. */
  if (pool == 0 ? rest >= sim->min_block : rest > sim->small_size)
    {
      SimBlock r = { rest, x->offset + size, x->segment, b, x->next, 0, pool };
      int nb = sim_new_block (sim, &r);
      x = sim_block (sim, b); /* the array may have moved */
      if (x->next >= 0)
        sim_block (sim, x->next)->prev = nb;
      x->next = nb;
      x->size = size;
      sim_pool_insert (sim, nb);
    }
  sim_block (sim, b)->bytes = bytes;
  return b;
}

void
planner_alloc_sim_release (PlannerAllocSim *sim, int handle)
{
  g_return_if_fail (sim != NULL);
  if (handle < 0)
    return;
  g_return_if_fail ((guint)handle < sim->blocks->len && sim_block (sim, handle)->bytes > 0);
  SimBlock *x = sim_block (sim, handle);
  sim->live -= x->bytes;
  x->bytes = 0;
  if (sim->min_block == 0)
    {
      sim->reserved -= x->size; /* nothing cached: what is freed goes back */
      g_array_append_val (sim->spare, handle);
      return;
    }
  /* free_block: merge with a free neighbour on either side (try_merge_blocks), then back to
   * the pool; the segment stays reserved. */
  int b = handle;
  for (int side = 0; side < 2; side++)
    {
      x = sim_block (sim, b);
      int o = side == 0 ? x->prev : x->next;
      if (o < 0 || sim_block (sim, o)->bytes > 0)
        continue;
      sim_pool_remove (sim, o);
      /* Keep the lower block, as PyTorch keeps the merged block at the lower address. */
      int lo = side == 0 ? o : b, hi = side == 0 ? b : o;
      SimBlock *l = sim_block (sim, lo), *h = sim_block (sim, hi);
      l->size += h->size;
      l->next = h->next;
      if (h->next >= 0)
        sim_block (sim, h->next)->prev = lo;
      g_array_append_val (sim->spare, hi);
      b = lo;
    }
  sim_pool_insert (sim, b);
}

guint64
planner_alloc_sim_reserved_peak (const PlannerAllocSim *sim)
{
  g_return_val_if_fail (sim != NULL, 0);
  return sim->reserved_peak;
}

guint64
planner_alloc_sim_live_peak (const PlannerAllocSim *sim)
{
  g_return_val_if_fail (sim != NULL, 0);
  return sim->live_peak;
}

guint64
planner_alloc_sim_reserved (const PlannerAllocSim *sim)
{
  g_return_val_if_fail (sim != NULL, 0);
  return sim->reserved;
}

guint64
planner_cost_allocator_reserved (const PlannerEfficiency *e, const guint64 *sizes, guint n)
{
  g_return_val_if_fail (e != NULL && (sizes != NULL || n == 0), 0);
  if (e->allocator_min_block_B <= 0)
    return 0;
  /* The replay below with every block alive (nothing freed): what the tensors of one moment
   * take in segments. */
  PlannerAllocSim *sim = planner_alloc_sim_new (e);
  for (guint i = 0; i < n; i++)
    planner_alloc_sim_malloc (sim, sizes[i]);
  guint64 reserved = planner_alloc_sim_reserved (sim);
  planner_alloc_sim_free (sim);
  return reserved;
}

/* NCCL_STEPS (src/include/device.h): the slots of each connection's buffer. */
#define NCCL_STEPS 8

guint64
planner_cost_nccl_buffers (const PlannerEfficiency *e, guint ranks, guint node_ranks)
{
  g_return_val_if_fail (e != NULL, 0);
  if (ranks < 2)
    return 0;
  /* A ring channel connects each rank to its next: one connection's buffers (LL, LL128 and
   * Simple, src/transport/p2p.cc; on the receiver, or Simple on the sender with P2P read)
   * per channel and device. */
  double bytes = e->nccl_channels * e->nccl_buffer_KiB * 1024;
  /* NVLS (src/transport/nvls.cc, ncclNvlsBufferSetup): nChannels x 2 x (chunk x NCCL_STEPS)
   * per head, one head per GPU of the node. */
  if (e->nvls_bandwidth_GBps > 0 && node_ranks >= 2)
    bytes += e->nvls_channels * 2 * e->nvls_max_chunk_KiB * 1024 * NCCL_STEPS * node_ranks;
  return (guint64)llround (bytes);
}
