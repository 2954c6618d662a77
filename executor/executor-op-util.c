#define G_LOG_DOMAIN "executor-op-util"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-error.h"
#include "executor-op-util.h"

gint64
executor_shape_numel (const gint64 *shape, guint rank)
{
  gint64 n = 1;
  for (guint d = 0; d < rank; d++)
    n *= shape[d];
  return n;
}

gint64
executor_numel (const ExecutorTensorArg *t)
{
  return executor_shape_numel (t->shape, t->rank);
}

void
executor_row_strides (const gint64 *shape, guint rank, gint64 *strides)
{
  gint64 s = 1;
  for (int d = (int)rank - 1; d >= 0; d--)
    {
      strides[d] = s;
      s *= shape[d];
    }
}

double
executor_reduction_count (const ExecutorOpCall *c)
{
  double n = 1;
  for (guint f = 0; f < c->rule->n_factors; f++)
    if (c->rule->factors[f].kind == PLANNER_FACTOR_REDUCTION)
      n *= (double)c->rule->factors[f].size;
  return n;
}

gint64
executor_dim_offset (const ExecutorOpCall *c, guint input, guint dim)
{
  const PlannerOperandMap *m = &c->rule->inputs[input];
  if (dim >= m->rank || m->n[dim] == 0)
    return 0;
  return c->factor_offsets[m->f[dim][0]];
}

gint64
executor_factor_offset (const ExecutorOpCall *c, const char *name)
{
  int f = planner_op_rule_factor_index (c->rule, name);
  return f >= 0 ? c->factor_offsets[f] : 0;
}

int
executor_norm_axis (int axis, guint rank)
{
  return axis < 0 ? axis + (int)rank : axis;
}

void
executor_axis_blocks (const ExecutorTensorArg *t, int axis, gint64 *outer, gint64 *inner)
{
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < axis; d++)
    *outer *= t->shape[d];
  for (guint d = axis + 1; d < t->rank; d++)
    *inner *= t->shape[d];
}

guint32
executor_reduced_dims (const ExecutorOpCall *c)
{
  const ExecutorTensorArg *t = &c->inputs[0];
  guint32 reduced = 0;
  for (guint i = 0; i < c->op->attrs.n_ints; i++)
    reduced |= 1u << executor_norm_axis ((int)c->op->attrs.ints[i], t->rank);
  return c->op->attrs.n_ints == 0 ? (1u << t->rank) - 1 : reduced;
}

gboolean
executor_kernel_error (GError **error, const ExecutorOpCall *c, const char *message)
{
  g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_FAILED, "%s (%s): %s", c->op->name,
               planner_op_type_to_string (c->op->type), message);
  return FALSE;
}

gboolean
executor_equation_parse (const ExecutorOpCall *c, ExecutorEquation *eq, GError **error)
{
  const char *text = c->op->attrs.equation, *arrow = strstr (text, "->");
  memset (eq, 0, sizeof *eq);
  if (arrow == NULL)
    return executor_kernel_error (error, c, "the equation has no '->'");
  g_autofree char *lhs = g_strndup (text, arrow - text);
  g_auto (GStrv) parts = g_strsplit (lhs, ",", -1);
  eq->n_ops = g_strv_length (parts);
  if (eq->n_ops > PLANNER_MAX_OPERANDS || strlen (arrow + 2) > PLANNER_MAX_RANK)
    return executor_kernel_error (error, c, "the equation is too large");
  g_strlcpy (eq->out, arrow + 2, sizeof eq->out);
  for (guint i = 0; i < eq->n_ops; i++)
    {
      if (strlen (parts[i]) != c->inputs[i].rank)
        return executor_kernel_error (error, c, "an operand's letters do not match its rank");
      g_strlcpy (eq->ops[i], parts[i], sizeof eq->ops[i]);
      for (guint d = 0; parts[i][d]; d++)
        eq->size[(guchar)parts[i][d] & 127] = c->inputs[i].shape[d];
    }
  return TRUE;
}

void
executor_einsum_index (const ExecutorOpCall *c, const ExecutorEquation *eq, ExecutorEinsumIndex *ix)
{
  int pos[128];
  memset (ix, 0, sizeof *ix);
  for (guint i = 0; i < 128; i++)
    pos[i] = -1;
  /* The output's letters first, then the summed ones in operand order. */
  for (guint i = 0; i <= eq->n_ops; i++)
    {
      const char *letters = i == 0 ? eq->out : eq->ops[i - 1];
      for (guint d = 0; letters[d]; d++)
        if (pos[(guchar)letters[d]] < 0)
          {
            pos[(guchar)letters[d]] = (int)ix->n_letters;
            ix->size[ix->n_letters++] = eq->size[(guchar)letters[d]];
          }
      if (i == 0)
        ix->n_free = ix->n_letters;
    }
  for (guint i = 0; i < eq->n_ops; i++)
    {
      gint64 s[PLANNER_MAX_RANK];
      executor_row_strides (c->inputs[i].shape, c->inputs[i].rank, s);
      for (guint d = 0; eq->ops[i][d]; d++)
        ix->stride[i][pos[(guchar)eq->ops[i][d]]] += s[d];
    }
  gint64 s = 1;
  for (int d = (int)strlen (eq->out) - 1; d >= 0; d--)
    {
      ix->out_stride[pos[(guchar)eq->out[d]]] += s;
      s *= eq->size[(guchar)eq->out[d]];
    }
}

static void
append_letter (char *s, char c)
{
  gsize n = strlen (s);
  s[n] = c;
  s[n + 1] = 0;
}

static gint64
letters_size (const ExecutorEquation *eq, const char *letters)
{
  gint64 n = 1;
  for (const char *p = letters; *p; p++)
    n *= eq->size[(guchar)*p];
  return n;
}

/* perm[i] = position in @from of letter @to[i]; TRUE when that is not the identity. */
static gboolean
letter_perm (const char *from, const char *to, guint *perm)
{
  gboolean moved = FALSE;
  for (guint i = 0; to[i]; i++)
    {
      perm[i] = (guint)(strchr (from, to[i]) - from);
      moved |= perm[i] != i;
    }
  return moved;
}

gboolean
executor_einsum_gemm_plan (const ExecutorEquation *eq, ExecutorEinsumGemm *plan)
{
  if (eq->n_ops != 2)
    return FALSE;
  const char *A = eq->ops[0], *B = eq->ops[1], *O = eq->out;
  char order_a[PLANNER_MAX_RANK + 1] = "", order_b[PLANNER_MAX_RANK + 1] = "",
                                  order_o[PLANNER_MAX_RANK + 1] = "";
  char bl[PLANNER_MAX_RANK + 1] = "", ml[PLANNER_MAX_RANK + 1] = "", nl[PLANNER_MAX_RANK + 1] = "",
                             kl[PLANNER_MAX_RANK + 1] = "";
  for (guint d = 0; A[d]; d++)
    {
      gboolean in_b = strchr (B, A[d]) != NULL, in_o = strchr (O, A[d]) != NULL;
      char *dst = in_b && in_o ? bl : in_o ? ml : in_b ? kl : NULL;
      if (dst == NULL || strchr (A + d + 1, A[d]))
        return FALSE;
      append_letter (dst, A[d]);
    }
  for (guint d = 0; B[d]; d++)
    {
      gboolean in_a = strchr (A, B[d]) != NULL, in_o = strchr (O, B[d]) != NULL;
      if ((!in_a && !in_o) || strchr (B + d + 1, B[d]))
        return FALSE;
      if (!in_a)
        append_letter (nl, B[d]);
    }
  if (strlen (O) != strlen (bl) + strlen (ml) + strlen (nl))
    return FALSE;
  g_snprintf (order_a, sizeof order_a, "%s%s%s", bl, ml, kl);
  g_snprintf (order_b, sizeof order_b, "%s%s%s", bl, kl, nl);
  g_snprintf (order_o, sizeof order_o, "%s%s%s", bl, ml, nl);

  memset (plan, 0, sizeof *plan);
  plan->batch = letters_size (eq, bl);
  plan->m = letters_size (eq, ml);
  plan->n = letters_size (eq, nl);
  plan->k = letters_size (eq, kl);
  plan->rank_a = strlen (A);
  plan->rank_b = strlen (B);
  plan->rank_out = strlen (O);
  plan->permute_a = letter_perm (A, order_a, plan->perm_a);
  plan->permute_b = letter_perm (B, order_b, plan->perm_b);
  plan->permute_out = letter_perm (order_o, O, plan->perm_out);
  for (guint i = 0; order_o[i]; i++)
    plan->shape_bmn[i] = eq->size[(guchar)order_o[i]];
  return TRUE;
}

gboolean
executor_matmul_dims (const ExecutorOpCall *c, gint64 *m, gint64 *n, gint64 *k, GError **error)
{
  const ExecutorTensorArg *x = &c->inputs[0], *w = &c->inputs[1], *o = &c->outputs[0];
  gboolean tb = c->op->attrs.transpose_b;
  *k = x->shape[x->rank - 1];
  *n = w->shape[tb ? 0 : 1];
  *m = executor_numel (x) / MAX (*k, 1);
  if (w->shape[tb ? 1 : 0] != *k || executor_numel (o) != *m * *n)
    return executor_kernel_error (error, c,
                                  "local shapes of x, the weight and the output disagree");
  return TRUE;
}

gboolean
executor_batch_matmul_plan (const ExecutorOpCall *c, ExecutorBatchGemm *plan, GError **error)
{
  const ExecutorTensorArg *a = &c->inputs[0], *b = &c->inputs[1], *o = &c->outputs[0];
  guint ra = a->rank, rb = b->rank, ro = o->rank;
  memset (plan, 0, sizeof *plan);
  plan->m = a->shape[ra - 2];
  plan->k = a->shape[ra - 1];
  plan->n = b->shape[rb - 1];
  if (b->shape[rb - 2] != plan->k)
    return executor_kernel_error (error, c, "local contracting dims disagree");
  /* Batch strides in matrices, 0 where an operand broadcasts. */
  gint64 sa[PLANNER_MAX_RANK], sb[PLANNER_MAX_RANK], acc_a = 1, acc_b = 1;
  for (int d = (int)ro - 3; d >= 0; d--)
    {
      int da = d - (int)(ro - ra), db = d - (int)(ro - rb);
      gint64 size_a = da >= 0 ? a->shape[da] : 1, size_b = db >= 0 ? b->shape[db] : 1;
      sa[d] = size_a == 1 ? 0 : acc_a;
      sb[d] = size_b == 1 ? 0 : acc_b;
      acc_a *= size_a;
      acc_b *= size_b;
    }
  gint64 mat_a = plan->m * plan->k, mat_b = plan->k * plan->n;
  int inner = (int)ro - 3;
  plan->n_inner = inner >= 0 ? o->shape[inner] : 1;
  plan->stride_a = inner >= 0 ? sa[inner] * mat_a : 0;
  plan->stride_b = inner >= 0 ? sb[inner] * mat_b : 0;
  plan->n_outer = 1;
  plan->n_outer_dims = MAX (inner, 0);
  for (int d = 0; d < inner; d++)
    {
      plan->outer_shape[d] = o->shape[d];
      plan->outer_a[d] = sa[d] * mat_a;
      plan->outer_b[d] = sb[d] * mat_b;
      plan->n_outer *= o->shape[d];
    }
  return TRUE;
}

void
executor_batch_gemm_offsets (const ExecutorBatchGemm *plan, gint64 i, gint64 *a, gint64 *b)
{
  *a = 0;
  *b = 0;
  for (int d = plan->n_outer_dims - 1; d >= 0; d--)
    {
      gint64 idx = i % plan->outer_shape[d];
      i /= plan->outer_shape[d];
      *a += idx * plan->outer_a[d];
      *b += idx * plan->outer_b[d];
    }
}

gboolean
executor_sdpa_dims (const ExecutorOpCall *c, ExecutorSdpa *s, GError **error)
{
  const gint64 *q = c->inputs[0].shape, *k = c->inputs[1].shape, *v = c->inputs[2].shape;
  s->sq = q[2];
  s->sk = k[2];
  s->d = q[3];
  s->dv = v[3];
  if (k[1] == 0 || q[1] % k[1] != 0 || k[3] != s->d)
    return executor_kernel_error (error, c, "local heads or head dims of q, k and v disagree");
  s->group = q[1] / k[1];
  s->scale = c->op->attrs.scale > 0 ? c->op->attrs.scale : 1.0 / sqrt ((double)s->d);
  s->q_first = executor_factor_offset (c, "sq");
  s->alibi = c->op->attrs.variant == 1;
  if (s->alibi)
    {
      int fkv = planner_op_rule_factor_index (&c->op->rule, "kv_heads");
      int fg = planner_op_rule_factor_index (&c->op->rule, "group");
      s->group_total = fg >= 0 ? c->op->rule.factors[fg].size : 1;
      s->n_heads = (fkv >= 0 ? c->op->rule.factors[fkv].size : 1) * s->group_total;
      s->kv_first = executor_factor_offset (c, "kv_heads");
      s->group_first = executor_factor_offset (c, "group");
    }
  return TRUE;
}

/* ---- Llama 3.1's rotary frequencies (issue 16) ---- */

double
executor_rotary_position_scale (const PlannerOpAttrs *a, gint64 i, gint64 d)
{
  /* Wavelengths shorter than original / high_freq_factor keep their frequency, longer than
   * original / low_freq_factor are slowed by factor, and those between blend the two
   * linearly in original / wavelength. */
  if (a->variant != 1 || a->rope_factor <= 0)
    return 1.0;
  double inv = pow (a->theta, -2.0 * (double)i / (double)d), wavelen = 2.0 * G_PI / inv;
  double original = (double)a->rope_original_max;
  double low_wavelen = original / a->rope_low_freq, high_wavelen = original / a->rope_high_freq;
  if (wavelen < high_wavelen)
    return 1.0;
  if (wavelen > low_wavelen)
    return 1.0 / a->rope_factor;
  double smooth = (original / wavelen - a->rope_low_freq) / (a->rope_high_freq - a->rope_low_freq);
  return (1.0 - smooth) / a->rope_factor + smooth;
}

/* ---- SDPA's score bias (issue 16) ---- */

gint64
executor_sdpa_bias_offset (const ExecutorOpCall *c, gint64 b, gint64 h)
{
  const gint64 *m = c->inputs[3].shape;
  return ((m[0] == 1 ? 0 : b) * m[1] + (m[1] == 1 ? 0 : h)) * m[2] * m[3];
}

const float *
executor_sdpa_bias (const ExecutorOpCall *c, gint64 b, gint64 h)
{
  if (c->n_inputs < 4)
    return NULL;
  return executor_in_f32 (c, 3) + executor_sdpa_bias_offset (c, b, h);
}

/* ---- ALiBi (issue 16) ---- */

double
executor_alibi_slope (gint64 n, gint64 h)
{
  /* The slopes of the largest power of two p <= n, 2^(-8 (i + 1) / p); the rest of the
   * heads take every other slope of 2p's. */
  gint64 p = 1;
  while (p * 2 <= n)
    p *= 2;
  if (h < p)
    return pow (2.0, -8.0 * (double)(h + 1) / (double)p);
  return pow (2.0, -8.0 * (double)(2 * (h - p) + 1) / (double)(2 * p));
}

void
executor_sdpa_alibi_row (const ExecutorSdpa *s, gint64 h_local, float *row)
{
  gint64 head
      = (s->kv_first + h_local / s->group) * s->group_total + s->group_first + h_local % s->group;
  double slope = executor_alibi_slope (s->n_heads, head) / s->scale;
  for (gint64 j = 0; j < s->sk; j++)
    row[j] += (float)(slope * (double)j);
}

gboolean
executor_conv2d_dims (const ExecutorOpCall *c, ExecutorConv2d *conv, GError **error)
{
  const PlannerOpAttrs *at = &c->op->attrs;
  for (guint i = 0; i < 4; i++)
    {
      conv->x[i] = c->inputs[0].shape[i];
      conv->w[i] = c->inputs[1].shape[i];
      conv->y[i] = c->outputs[0].shape[i];
    }
  conv->sh = at->n_ints >= 2 ? at->ints[0] : 1;
  conv->sw = at->n_ints >= 2 ? at->ints[1] : 1;
  conv->ph = at->n_ints >= 4 ? at->ints[2] : 0;
  conv->pw = at->n_ints >= 4 ? at->ints[3] : 0;
  if (conv->x[1] != conv->w[1])
    return executor_kernel_error (error, c, "local input channels of x and the kernel disagree");
  return TRUE;
}

G_STATIC_ASSERT (EXECUTOR_MAX_RANK == PLANNER_MAX_RANK);

gint64
executor_walk_numel (const ExecutorWalk *w)
{
  return executor_shape_numel (w->shape, (guint)w->rank);
}

gboolean
executor_permute_walk (const gint64 *src_shape, guint rank, const guint *perm, ExecutorWalk *w)
{
  gint64 strides[PLANNER_MAX_RANK];
  gboolean identity = TRUE;
  executor_row_strides (src_shape, rank, strides);
  w->rank = (int)rank;
  for (guint i = 0; i < rank; i++)
    {
      w->shape[i] = src_shape[perm[i]];
      w->stride[i] = strides[perm[i]];
      identity &= perm[i] == i;
    }
  return identity || rank == 0;
}

gboolean
executor_broadcast_walk (const ExecutorTensorArg *t, const ExecutorTensorArg *o, ExecutorWalk *w)
{
  gint64 acc = 1;
  gboolean ok = TRUE;
  w->rank = (int)o->rank;
  for (int d = (int)o->rank - 1; d >= 0; d--)
    {
      int di = d - (int)(o->rank - t->rank);
      gint64 size = di >= 0 ? t->shape[di] : 1;
      ok &= size == 1 || size == o->shape[d];
      w->shape[d] = o->shape[d];
      w->stride[d] = size == 1 ? 0 : acc;
      acc *= size;
    }
  return ok;
}

/* Op types not listed are COPY (Cast between float dtypes, Dropout). */
static const ExecutorUnary unary_ops[PLANNER_N_OP_TYPES] = {
  [PLANNER_OP_RELU] = EXECUTOR_UNARY_RELU, [PLANNER_OP_GELU] = EXECUTOR_UNARY_GELU_ERF,
  [PLANNER_OP_SILU] = EXECUTOR_UNARY_SILU, [PLANNER_OP_TANH] = EXECUTOR_UNARY_TANH,
  [PLANNER_OP_EXP] = EXECUTOR_UNARY_EXP,   [PLANNER_OP_NEG] = EXECUTOR_UNARY_NEG,
};

ExecutorUnary
executor_unary_of (const PlannerOp *op)
{
  if (op->type == PLANNER_OP_GELU && op->attrs.variant == 1)
    return EXECUTOR_UNARY_GELU_TANH;
  return unary_ops[op->type];
}

ExecutorBinary
executor_binary_of (const PlannerOp *op)
{
  return op->type == PLANNER_OP_ADD   ? EXECUTOR_BINARY_ADD
         : op->type == PLANNER_OP_SUB ? EXECUTOR_BINARY_SUB
         : op->type == PLANNER_OP_MUL ? EXECUTOR_BINARY_MUL
                                      : EXECUTOR_BINARY_DIV;
}

/* ---- kernels every backend shares: they only move memory, through its copy_2d ---- */

gboolean
executor_kernel_reshape (ExecutorDevice *dev, const ExecutorOpCall *c, GError **error)
{
  /* Only the major-most factor of a merged dim may be split, so a shard keeps its elements
   * in the same order under the new shape. */
  gint64 n = executor_numel (&c->inputs[0]);
  if (n != executor_numel (&c->outputs[0]))
    return executor_kernel_error (error, c, "local input and output sizes differ");
  gsize bytes = (gsize)n * executor_storage_size (c->inputs[0].dtype);
  return executor_device_copy_2d (dev, c->outputs[0].buffer, 0, bytes, c->inputs[0].buffer, 0,
                                  bytes, bytes, 1, error);
}

gboolean
executor_kernel_concat_split (ExecutorDevice *dev, const ExecutorOpCall *c, GError **error)
{
  /* [outer][size_i * inner] blocks along one axis: one 2-D copy per input of a Concat, per
   * output of a Split or Slice. */
  gboolean concat = c->op->type == PLANNER_OP_CONCAT;
  const ExecutorTensorArg *whole = concat ? &c->outputs[0] : &c->inputs[0];
  const ExecutorTensorArg *parts = concat ? c->inputs : c->outputs;
  guint n_parts = concat ? c->n_inputs : c->n_outputs;
  int axis = executor_norm_axis (c->op->attrs.axis, whole->rank);
  gsize es = executor_storage_size (whole->dtype);
  gint64 outer, inner;
  executor_axis_blocks (whole, axis, &outer, &inner);
  gint64 at = (c->op->type == PLANNER_OP_SLICE ? c->op->attrs.start : 0) * inner;
  gsize whole_pitch = (gsize)(whole->shape[axis] * inner) * es;
  for (guint i = 0; i < n_parts; i++)
    {
      gsize len = (gsize)(parts[i].shape[axis] * inner) * es;
      gboolean ok
          = concat
                ? executor_device_copy_2d (dev, whole->buffer, (gsize)at * es, whole_pitch,
                                           parts[i].buffer, 0, len, len, (gsize)outer, error)
                : executor_device_copy_2d (dev, parts[i].buffer, 0, len, whole->buffer,
                                           (gsize)at * es, whole_pitch, len, (gsize)outer, error);
      if (!ok)
        return FALSE;
      at += parts[i].shape[axis] * inner;
    }
  return TRUE;
}
