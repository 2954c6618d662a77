#define G_LOG_DOMAIN "executor-cpu-moe"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-cpu-private.h"
#include "executor-error.h"
#include "executor-moe.h"
#include "executor-op-util.h"

/* Mixture of experts on the CPU, forward and backward, in f32 with sums in double.
 *
 * The slot of token s of batch row b at expert e is the number of earlier tokens of the row
 * whose gate for e is non-zero (routed there); a token whose slot is >= the capacity C is
 * dropped by that expert. Only the column gates[b, :, e] decides it, so a shard of the
 * experts computes its slots alone, and dispatch and combine agree on them. */

typedef const ExecutorOpCall Call;
typedef const ExecutorBackwardCall BCall;

static float *
gin (BCall *b, guint i)
{
  return b->grad_inputs[i].buffer ? (float *)b->grad_inputs[i].buffer->data : NULL;
}

static const float *
gout (BCall *b, guint i)
{
  return (const float *)b->grad_outputs[i].buffer->data;
}

/* Slots of one row: slot[s * E + e], -1 where token s does not reach expert e. */
static void
row_slots (const float *gates, gint64 S, gint64 E, gint64 C, gint64 *slot)
{
  for (gint64 e = 0; e < E; e++)
    {
      gint64 next = 0;
      for (gint64 s = 0; s < S; s++)
        {
          gint64 *at = &slot[s * E + e];
          *at = -1;
          if (gates[s * E + e] != 0.0f)
            *at = next < C ? next : -1, next++;
        }
    }
}

gboolean
executor_cpu_sigmoid (ExecutorDevice *dev, Call *c, GError **error)
{
  const float *x = executor_in_f32 (c, 0);
  float *y = executor_out_f32 (c, 0);

  for (gint64 i = 0; i < executor_numel (&c->inputs[0]); i++)
    y[i] = (float)(1.0 / (1.0 + exp (-(double)x[i])));
  return TRUE;
}

/* Softmax over the row's experts, in double; @p gets the probabilities. */
static void
row_softmax (const float *x, gint64 E, double *p)
{
  double mx = -INFINITY, sum = 0;

  for (gint64 e = 0; e < E; e++)
    mx = MAX (mx, (double)x[e]);
  for (gint64 e = 0; e < E; e++)
    sum += (p[e] = exp ((double)x[e] - mx));
  for (gint64 e = 0; e < E; e++)
    p[e] /= sum;
}

/* The top @k of @p: @chosen[e] TRUE for them (ties to the lower index), their sum returned. */
static double
row_top_k (const double *p, gint64 E, gint64 k, gboolean *chosen)
{
  double total = 0;

  memset (chosen, 0, (gsize)E * sizeof *chosen);
  for (gint64 j = 0; j < k; j++)
    {
      gint64 best = -1;
      for (gint64 e = 0; e < E; e++)
        if (!chosen[e] && (best < 0 || p[e] > p[best]))
          best = e;
      chosen[best] = TRUE;
      total += p[best];
    }
  return total;
}

static gboolean
router_dims (Call *c, gint64 *rows, gint64 *E, GError **error)
{
  *E = c->inputs[0].shape[2];
  *rows = c->inputs[0].shape[0] * c->inputs[0].shape[1];
  /* The rule keeps the experts whole; a shard without all of them cannot pick the top k. */
  if (*E != c->rule->factors[planner_op_rule_factor_index (c->rule, "e")].size)
    return executor_kernel_error (error, c, "the router needs every expert of a token");
  return TRUE;
}

gboolean
executor_cpu_moe_router (ExecutorDevice *dev, Call *c, GError **error)
{
  gint64 rows, E, k = c->op->attrs.ints[0];
  if (!router_dims (c, &rows, &E, error))
    return FALSE;
  g_autofree double *p = g_new (double, E);
  g_autofree gboolean *chosen = g_new (gboolean, E);
  const float *x = executor_in_f32 (c, 0);
  float *y = executor_out_f32 (c, 0);

  for (gint64 r = 0; r < rows; r++)
    {
      double total;

      row_softmax (x + r * E, E, p);
      total = row_top_k (p, E, k, chosen);
      for (gint64 e = 0; e < E; e++)
        y[r * E + e] = chosen[e] ? (float)(c->op->attrs.variant == 1 ? p[e] / total : p[e]) : 0.0f;
    }
  return TRUE;
}

gboolean
executor_cpu_moe_dispatch (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 B = c->inputs[0].shape[0], S = c->inputs[0].shape[1], H = c->inputs[0].shape[2];
  const gint64 E = c->inputs[1].shape[2], C = c->outputs[0].shape[2];
  g_autofree gint64 *slot = g_new (gint64, S * E);
  const float *x = executor_in_f32 (c, 0), *gates = executor_in_f32 (c, 1);
  float *out = executor_out_f32 (c, 0);

  /* Empty slots are zeros: the experts map them to zeros-in, and combine never reads them. */
  memset (out, 0, (gsize)executor_numel (&c->outputs[0]) * sizeof (float));
  for (gint64 b = 0; b < B; b++)
    {
      row_slots (gates + b * S * E, S, E, C, slot);
      for (gint64 s = 0; s < S; s++)
        for (gint64 e = 0; e < E; e++)
          if (slot[s * E + e] >= 0)
            memcpy (out + ((b * E + e) * C + slot[s * E + e]) * H, x + (b * S + s) * H,
                    (gsize)H * sizeof (float));
    }
  return TRUE;
}

gboolean
executor_cpu_moe_combine (ExecutorDevice *dev, Call *c, GError **error)
{
  const gint64 B = c->inputs[0].shape[0], E = c->inputs[0].shape[1], C = c->inputs[0].shape[2],
               H = c->inputs[0].shape[3], S = c->inputs[1].shape[1];
  g_autofree gint64 *slot = g_new (gint64, S * E);
  g_autofree double *acc = g_new (double, H);
  const float *y = executor_in_f32 (c, 0), *gates = executor_in_f32 (c, 1);
  float *out = executor_out_f32 (c, 0);

  for (gint64 b = 0; b < B; b++)
    {
      row_slots (gates + b * S * E, S, E, C, slot);
      for (gint64 s = 0; s < S; s++)
        {
          memset (acc, 0, (gsize)H * sizeof *acc);
          for (gint64 e = 0; e < E; e++)
            if (slot[s * E + e] >= 0)
              {
                const float *row = y + ((b * E + e) * C + slot[s * E + e]) * H;
                double g = gates[(b * S + s) * E + e];
                for (gint64 h = 0; h < H; h++)
                  acc[h] += g * row[h];
              }
          for (gint64 h = 0; h < H; h++)
            out[(b * S + s) * H + h] = (float)acc[h];
        }
    }
  return TRUE;
}

/* ---- backward: the selection (top k, slots) is piecewise constant, so gradients flow
 * through the kept probabilities and the copied rows only. */

gboolean
executor_cpu_sigmoid_backward (ExecutorDevice *dev, BCall *b, GError **error)
{
  const float *y = executor_out_f32 (b->fwd, 0), *g = gout (b, 0);
  float *dx = gin (b, 0);

  for (gint64 i = 0; dx && i < executor_numel (&b->fwd->inputs[0]); i++)
    dx[i] = (float)((double)g[i] * y[i] * (1.0 - y[i]));
  return TRUE;
}

gboolean
executor_cpu_moe_router_backward (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  gint64 rows, E, k = c->op->attrs.ints[0];
  if (gin (b, 0) == NULL)
    return TRUE;
  if (!router_dims (c, &rows, &E, error))
    return FALSE;
  g_autofree double *p = g_new (double, E), *dp = g_new (double, E);
  g_autofree gboolean *chosen = g_new (gboolean, E);
  const float *x = executor_in_f32 (c, 0), *y = executor_out_f32 (c, 0), *g = gout (b, 0);
  float *dx = gin (b, 0);

  for (gint64 r = 0; r < rows; r++)
    {
      const float *gr = g + r * E, *yr = y + r * E;
      double total, gy = 0, dot = 0;

      row_softmax (x + r * E, E, p);
      total = row_top_k (p, E, k, chosen);
      /* y = p / total on the kept experts (renormalized), else y = p there. */
      for (gint64 e = 0; e < E; e++)
        if (chosen[e])
          gy += (double)gr[e] * yr[e];
      for (gint64 e = 0; e < E; e++)
        dp[e] = !chosen[e] ? 0.0 : c->op->attrs.variant == 1 ? (gr[e] - gy) / total : gr[e];
      /* Through the softmax: dx = p (dp - sum (dp p)). */
      for (gint64 e = 0; e < E; e++)
        dot += dp[e] * p[e];
      for (gint64 e = 0; e < E; e++)
        dx[r * E + e] = (float)(p[e] * (dp[e] - dot));
    }
  return TRUE;
}

gboolean
executor_cpu_moe_dispatch_backward (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const gint64 B = c->inputs[0].shape[0], S = c->inputs[0].shape[1], H = c->inputs[0].shape[2];
  const gint64 E = c->inputs[1].shape[2], C = c->outputs[0].shape[2];
  g_autofree gint64 *slot = g_new (gint64, S * E);
  const float *gates = executor_in_f32 (c, 1), *g = gout (b, 0);
  float *dx = gin (b, 0);

  /* The gates only choose slots: no gradient reaches them here (combine carries it). */
  if (gin (b, 1))
    memset (gin (b, 1), 0, (gsize)executor_numel (&c->inputs[1]) * sizeof (float));
  if (dx == NULL)
    return TRUE;
  memset (dx, 0, (gsize)executor_numel (&c->inputs[0]) * sizeof (float));
  for (gint64 r = 0; r < B; r++)
    {
      row_slots (gates + r * S * E, S, E, C, slot);
      for (gint64 s = 0; s < S; s++)
        for (gint64 e = 0; e < E; e++)
          if (slot[s * E + e] >= 0)
            {
              const float *row = g + ((r * E + e) * C + slot[s * E + e]) * H;
              for (gint64 h = 0; h < H; h++)
                dx[(r * S + s) * H + h] += row[h];
            }
    }
  return TRUE;
}

gboolean
executor_cpu_moe_combine_backward (ExecutorDevice *dev, BCall *b, GError **error)
{
  Call *c = b->fwd;
  const gint64 B = c->inputs[0].shape[0], E = c->inputs[0].shape[1], C = c->inputs[0].shape[2],
               H = c->inputs[0].shape[3], S = c->inputs[1].shape[1];
  g_autofree gint64 *slot = g_new (gint64, S * E);
  const float *y = executor_in_f32 (c, 0), *gates = executor_in_f32 (c, 1), *g = gout (b, 0);
  float *dy = gin (b, 0), *dg = gin (b, 1);

  if (dy)
    memset (dy, 0, (gsize)executor_numel (&c->inputs[0]) * sizeof (float));
  if (dg)
    memset (dg, 0, (gsize)executor_numel (&c->inputs[1]) * sizeof (float));
  for (gint64 r = 0; r < B; r++)
    {
      row_slots (gates + r * S * E, S, E, C, slot);
      for (gint64 s = 0; s < S; s++)
        for (gint64 e = 0; e < E; e++)
          if (slot[s * E + e] >= 0)
            {
              gint64 at = ((r * E + e) * C + slot[s * E + e]) * H;
              const float *gr = g + (r * S + s) * H;
              float gate = gates[(r * S + s) * E + e];
              double dot = 0;
              for (gint64 h = 0; h < H; h++)
                {
                  if (dy)
                    dy[at + h] = gate * gr[h];
                  dot += (double)gr[h] * y[at + h];
                }
              if (dg)
                dg[(r * S + s) * E + e] = (float)dot;
            }
    }
  return TRUE;
}

gboolean
executor_kernel_not_on_backend (ExecutorDevice *dev, Call *c, GError **error)
{
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
               "%s (%s): this backend has no %s kernel; run the plan with --backend cpu",
               c->op->name, planner_op_type_to_string (c->op->type),
               planner_op_type_to_string (c->op->type));
  return FALSE;
}
