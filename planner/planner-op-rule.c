#define G_LOG_DOMAIN "planner-op-rule"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-op-rule.h"

/* ---- names ---- */

static const char *const dtype_names[] = { "f32", "bf16", "f16", "i64" };
static const guint dtype_sizes[] = { 4, 2, 2, 8 };

const char *
planner_dtype_to_string (PlannerDType dtype)
{
  g_return_val_if_fail (dtype <= PLANNER_DTYPE_I64, "?");
  return dtype_names[dtype];
}

gboolean
planner_dtype_from_string (const char *text, PlannerDType *dtype)
{
  static const struct { const char *alias; PlannerDType dtype; } aliases[] = {
    { "float32", PLANNER_DTYPE_F32 },  { "float", PLANNER_DTYPE_F32 },
    { "bfloat16", PLANNER_DTYPE_BF16 }, { "float16", PLANNER_DTYPE_F16 },
    { "half", PLANNER_DTYPE_F16 },     { "int64", PLANNER_DTYPE_I64 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (dtype_names); i++)
    if (g_ascii_strcasecmp (text, dtype_names[i]) == 0)
      {
        *dtype = (PlannerDType) i;
        return TRUE;
      }
  for (guint i = 0; i < G_N_ELEMENTS (aliases); i++)
    if (g_ascii_strcasecmp (text, aliases[i].alias) == 0)
      {
        *dtype = aliases[i].dtype;
        return TRUE;
      }
  return FALSE;
}

guint
planner_dtype_size (PlannerDType dtype)
{
  g_return_val_if_fail (dtype <= PLANNER_DTYPE_I64, 4);
  return dtype_sizes[dtype];
}

typedef struct
{
  const char *name;
  guint min_inputs, max_inputs;
} OpTypeInfo;

static const OpTypeInfo op_types[PLANNER_N_OP_TYPES] = {
  [PLANNER_OP_MATMUL] = { "MatMul", 2, 3 },
  [PLANNER_OP_BATCH_MATMUL] = { "BatchMatMul", 2, 2 },
  [PLANNER_OP_EINSUM] = { "Einsum", 1, PLANNER_MAX_OPERANDS },
  [PLANNER_OP_ADD] = { "Add", 2, 2 },
  [PLANNER_OP_SUB] = { "Sub", 2, 2 },
  [PLANNER_OP_MUL] = { "Mul", 2, 2 },
  [PLANNER_OP_DIV] = { "Div", 2, 2 },
  [PLANNER_OP_RELU] = { "ReLU", 1, 1 },
  [PLANNER_OP_GELU] = { "GeLU", 1, 1 },
  [PLANNER_OP_SILU] = { "SiLU", 1, 1 },
  [PLANNER_OP_TANH] = { "Tanh", 1, 1 },
  [PLANNER_OP_EXP] = { "Exp", 1, 1 },
  [PLANNER_OP_NEG] = { "Neg", 1, 1 },
  [PLANNER_OP_CAST] = { "Cast", 1, 1 },
  [PLANNER_OP_DROPOUT] = { "Dropout", 1, 1 },
  [PLANNER_OP_SOFTMAX] = { "Softmax", 1, 1 },
  [PLANNER_OP_LAYER_NORM] = { "LayerNorm", 1, 3 },
  [PLANNER_OP_RMS_NORM] = { "RMSNorm", 1, 2 },
  [PLANNER_OP_EMBEDDING] = { "Embedding", 2, 2 },
  [PLANNER_OP_RESHAPE] = { "Reshape", 1, 1 },
  [PLANNER_OP_TRANSPOSE] = { "Transpose", 1, 1 },
  [PLANNER_OP_REDUCE_SUM] = { "ReduceSum", 1, 1 },
  [PLANNER_OP_REDUCE_MEAN] = { "ReduceMean", 1, 1 },
  [PLANNER_OP_CONCAT] = { "Concat", 1, PLANNER_MAX_OPERANDS },
  [PLANNER_OP_SPLIT] = { "Split", 1, 1 },
  [PLANNER_OP_SLICE] = { "Slice", 1, 1 },
  [PLANNER_OP_ROTARY_EMBEDDING] = { "RotaryEmbedding", 1, 1 },
  [PLANNER_OP_SDPA] = { "ScaledDotProductAttention", 3, 4 },
  [PLANNER_OP_CROSS_ENTROPY] = { "CrossEntropyLoss", 2, 2 },
  [PLANNER_OP_CONV2D] = { "Conv2D", 2, 3 },
  [PLANNER_OP_SIGMOID] = { "Sigmoid", 1, 1 },
  [PLANNER_OP_MOE_ROUTER] = { "MoERouter", 1, 1 },
  [PLANNER_OP_MOE_DISPATCH] = { "MoEDispatch", 2, 2 },
  [PLANNER_OP_MOE_COMBINE] = { "MoECombine", 2, 2 },
  [PLANNER_OP_REPEAT_INTERLEAVE] = { "RepeatInterleave", 1, 1 },
  [PLANNER_OP_SCALE] = { "Scale", 1, 1 },
  [PLANNER_OP_RELATIVE_POSITION_BUCKET] = { "RelativePositionBucket", 1, 1 },
};

const char *
planner_op_type_to_string (PlannerOpType type)
{
  g_return_val_if_fail (type < PLANNER_N_OP_TYPES, "?");
  return op_types[type].name;
}

gboolean
planner_op_type_from_string (const char *text, PlannerOpType *type)
{
  for (guint i = 0; i < PLANNER_N_OP_TYPES; i++)
    if (g_ascii_strcasecmp (text, op_types[i].name) == 0)
      {
        *type = (PlannerOpType) i;
        return TRUE;
      }
  /* Common aliases from other frameworks. */
  if (g_ascii_strcasecmp (text, "Linear") == 0)
    *type = PLANNER_OP_MATMUL;
  else if (g_ascii_strcasecmp (text, "SDPA") == 0)
    *type = PLANNER_OP_SDPA;
  else
    return FALSE;
  return TRUE;
}

void
planner_op_type_arity (PlannerOpType type, guint *min_inputs, guint *max_inputs)
{
  g_return_if_fail (type < PLANNER_N_OP_TYPES);
  *min_inputs = op_types[type].min_inputs;
  *max_inputs = op_types[type].max_inputs;
}

void
planner_op_attrs_init (PlannerOpAttrs *attrs)
{
  memset (attrs, 0, sizeof *attrs);
  attrs->axis = -1;
  attrs->eps = 1e-5;
  attrs->theta = 10000.0;
}

/* ---- building rules ---- */

typedef struct
{
  PlannerOpRule *rule;
  const char *op_name;
  guint n_inputs;
  const guint *ranks;
  const gint64 *const *shapes;
  GError **error;
} Builder;

static int
add_factor (Builder *b, const char *name, gint64 size, PlannerFactorKind kind)
{
  PlannerOpRule *r = b->rule;
  g_assert (r->n_factors < PLANNER_MAX_FACTORS);
  PlannerFactor *f = &r->factors[r->n_factors];
  g_strlcpy (f->name, name, sizeof f->name);
  f->size = size;
  f->kind = kind;
  return (int) r->n_factors++;
}

static void
map_dim (PlannerOperandMap *m, guint dim, int factor)
{
  g_assert (dim < PLANNER_MAX_RANK && m->n[dim] < PLANNER_MAX_COMPOUND);
  if (dim >= m->rank)
    m->rank = dim + 1;
  m->f[dim][m->n[dim]++] = (guint8) factor;
}

static PlannerOperandMap *
input_map (Builder *b, guint i, guint rank)
{
  PlannerOperandMap *m = &b->rule->inputs[i];
  m->rank = rank;
  return m;
}

static PlannerOperandMap *
output_map (Builder *b, guint i, guint rank)
{
  PlannerOperandMap *m = &b->rule->outputs[i];
  m->rank = rank;
  return m;
}

const char *
planner_operand_label (guint i)
{
  static const char *const labels[] = { "input 0", "input 1", "input 2", "input 3" };
  return i < G_N_ELEMENTS (labels) ? labels[i] : "input";
}

static gboolean
fail (Builder *b, PlannerError code, const char *format, ...) G_GNUC_PRINTF (3, 4);

static gboolean
fail (Builder *b, PlannerError code, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  g_autofree char *msg = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (b->error, PLANNER_ERROR, code, "%s (%s): %s", b->op_name,
               planner_op_type_to_string (b->rule->type), msg);
  return FALSE;
}

static gboolean
need_rank (Builder *b, guint input, guint min_rank, guint max_rank)
{
  guint r = b->ranks[input];
  if (r < min_rank || r > max_rank)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "%s has rank %u; this op needs rank %u%s%u",
                 planner_operand_label (input), r, min_rank, max_rank > min_rank ? "-" : "",
                 max_rank > min_rank ? max_rank : min_rank);
  return TRUE;
}

static gboolean
same_size (Builder *b, guint in_a, guint dim_a, guint in_b, guint dim_b, const char *why)
{
  gint64 x = b->shapes[in_a][dim_a], y = b->shapes[in_b][dim_b];
  if (x != y)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "dim %u of %s (size %" G_GINT64_FORMAT ") does not match dim %u of %s (size %"
                 G_GINT64_FORMAT "): %s must be equal",
                 dim_a, planner_operand_label (in_a), x, dim_b, planner_operand_label (in_b), y, why);
  return TRUE;
}

static int
normalize_axis (int axis, guint rank)
{
  return axis < 0 ? axis + (int) rank : axis;
}

static gboolean
valid_axis (Builder *b, int axis, guint rank, int *out)
{
  int a = normalize_axis (axis, rank);
  if (a < 0 || a >= (int) rank)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "axis %d is out of range for rank %u", axis,
                 rank);
  *out = a;
  return TRUE;
}

static guint64
numel (const gint64 *shape, guint rank)
{
  guint64 n = 1;
  for (guint i = 0; i < rank; i++)
    n *= (guint64) shape[i];
  return n;
}

/* Names of per-dim factors: d<i> is the loop over dim i. */
static const char *const batch_names[] = { "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7" };

/* One pass-through factor per leading dim of input @in (the first @n dims), mapped on the
 * input and on output 0 at the same positions. */
static void
leading_pass_factors (Builder *b, guint in, guint n, PlannerOperandMap *im,
                      PlannerOperandMap *om)
{
  for (guint d = 0; d < n; d++)
    {
      gint64 size = b->shapes[in][d];
      if (size == 1)
        continue;
      int f = add_factor (b, n == 1 ? "b" : batch_names[d], size, PLANNER_FACTOR_PASS);
      map_dim (im, d, f);
      map_dim (om, d, f);
    }
}

/* Elementwise ops with numpy broadcasting over trailing-aligned dims. */
static gboolean
build_elementwise (Builder *b)
{
  guint out_rank = 0;
  for (guint i = 0; i < b->n_inputs; i++)
    out_rank = MAX (out_rank, b->ranks[i]);
  PlannerOperandMap *om = output_map (b, 0, out_rank);
  for (guint i = 0; i < b->n_inputs; i++)
    input_map (b, i, b->ranks[i]);

  for (guint d = 0; d < out_rank; d++)
    {
      gint64 size = 1;
      for (guint i = 0; i < b->n_inputs; i++)
        {
          int id = (int) d - (int) (out_rank - b->ranks[i]);
          if (id < 0)
            continue;
          gint64 s = b->shapes[i][id];
          if (s != 1 && size != 1 && s != size)
            return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                         "dim %d of %s (size %" G_GINT64_FORMAT
                         ") does not broadcast against size %" G_GINT64_FORMAT
                         "; sizes must be equal or 1",
                         id, planner_operand_label (i), s, size);
          if (s != 1)
            size = s;
        }
      if (size == 1)
        continue;
      int f = add_factor (b, batch_names[d], size, PLANNER_FACTOR_PASS);
      map_dim (om, d, f);
      for (guint i = 0; i < b->n_inputs; i++)
        {
          int id = (int) d - (int) (out_rank - b->ranks[i]);
          if (id >= 0 && b->shapes[i][id] != 1)
            map_dim (&b->rule->inputs[i], id, f);
        }
    }
  return TRUE;
}

/* Same shape in and out, one factor per dim; @special_dim (or -1) gets @special_kind. */
static gboolean
build_per_dim (Builder *b, int special_dim, PlannerFactorKind special_kind)
{
  guint rank = b->ranks[0];
  PlannerOperandMap *im = input_map (b, 0, rank);
  PlannerOperandMap *om = output_map (b, 0, rank);
  for (guint d = 0; d < rank; d++)
    {
      gint64 size = b->shapes[0][d];
      gboolean special = (int) d == special_dim;
      if (size == 1 && !special)
        continue;
      int f = add_factor (b, special ? "r" : batch_names[d], size,
                          special ? special_kind : PLANNER_FACTOR_PASS);
      map_dim (im, d, f);
      map_dim (om, d, f);
    }
  return TRUE;
}

static gboolean
build_norm (Builder *b)
{
  guint rank = b->ranks[0];
  if (!need_rank (b, 0, 1, PLANNER_MAX_RANK))
    return FALSE;
  build_per_dim (b, (int) rank - 1, PLANNER_FACTOR_NEED_REPLICATION);
  int hidden = b->rule->inputs[0].f[rank - 1][0];
  for (guint i = 1; i < b->n_inputs; i++)
    {
      if (b->ranks[i] != 1 || b->shapes[i][0] != b->shapes[0][rank - 1])
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "%s must have shape [%" G_GINT64_FORMAT
                     "] (the normalized dim of input 0)",
                     planner_operand_label (i), b->shapes[0][rank - 1]);
      map_dim (input_map (b, i, 1), 0, hidden);
    }
  return TRUE;
}

static gboolean
build_matmul (Builder *b, const PlannerOpAttrs *attrs)
{
  if (!need_rank (b, 0, 1, PLANNER_MAX_RANK) || !need_rank (b, 1, 2, 2))
    return FALSE;
  guint rank = b->ranks[0];
  guint kdim_w = attrs->transpose_b ? 1 : 0, ndim_w = attrs->transpose_b ? 0 : 1;
  if (!same_size (b, 0, rank - 1, 1, kdim_w, "the contracting dims"))
    return FALSE;
  gint64 k = b->shapes[1][kdim_w], n = b->shapes[1][ndim_w];

  PlannerOperandMap *xm = input_map (b, 0, rank);
  PlannerOperandMap *wm = input_map (b, 1, 2);
  PlannerOperandMap *om = output_map (b, 0, rank);
  leading_pass_factors (b, 0, rank - 1, xm, om);
  int fk = add_factor (b, "k", k, PLANNER_FACTOR_REDUCTION);
  map_dim (xm, rank - 1, fk);
  map_dim (wm, kdim_w, fk);
  int fn[2];
  guint n_fn = 0;
  if (attrs->heads > 0)
    {
      if (n % attrs->heads != 0)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "%" G_GINT64_FORMAT " output features are not a whole number of %"
                     G_GINT64_FORMAT " heads",
                     n, attrs->heads);
      fn[n_fn++] = add_factor (b, "heads", attrs->heads, PLANNER_FACTOR_PASS);
      fn[n_fn++] = add_factor (b, "head_dim", n / attrs->heads, PLANNER_FACTOR_PASS);
    }
  else
    fn[n_fn++] = add_factor (b, "n", n, PLANNER_FACTOR_PASS);
  for (guint i = 0; i < n_fn; i++)
    {
      map_dim (wm, ndim_w, fn[i]);
      map_dim (om, rank - 1, fn[i]);
    }
  if (b->n_inputs == 3)
    {
      if (b->ranks[2] != 1 || b->shapes[2][0] != n)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "the bias (input 2) must have shape [%" G_GINT64_FORMAT "]", n);
      PlannerOperandMap *bm = input_map (b, 2, 1);
      for (guint i = 0; i < n_fn; i++)
        map_dim (bm, 0, fn[i]);
      b->rule->bias_inputs = 1u << 2;
    }
  b->rule->linear_inputs = 0x3;
  b->rule->flops = 2.0 * (double) numel (b->shapes[0], rank) * (double) n;
  return TRUE;
}

static gboolean
build_batch_matmul (Builder *b)
{
  if (!need_rank (b, 0, 2, PLANNER_MAX_RANK) || !need_rank (b, 1, 2, PLANNER_MAX_RANK))
    return FALSE;
  guint ra = b->ranks[0], rb = b->ranks[1], ro = MAX (ra, rb);
  if (!same_size (b, 0, ra - 1, 1, rb - 2, "the contracting dims"))
    return FALSE;
  PlannerOperandMap *am = input_map (b, 0, ra);
  PlannerOperandMap *bm = input_map (b, 1, rb);
  PlannerOperandMap *om = output_map (b, 0, ro);
  double batch = 1;
  for (guint d = 0; d + 2 < ro; d++)
    {
      int da = (int) d - (int) (ro - ra), db = (int) d - (int) (ro - rb);
      gint64 sa = da >= 0 ? b->shapes[0][da] : 1, sb = db >= 0 ? b->shapes[1][db] : 1;
      if (sa != sb && sa != 1 && sb != 1)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "batch dim %u: sizes %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT
                     " do not broadcast",
                     d, sa, sb);
      gint64 size = MAX (sa, sb);
      batch *= (double) size;
      if (size == 1)
        continue;
      int f = add_factor (b, batch_names[d], size, PLANNER_FACTOR_PASS);
      map_dim (om, d, f);
      if (sa != 1)
        map_dim (am, da, f);
      if (sb != 1)
        map_dim (bm, db, f);
    }
  gint64 m = b->shapes[0][ra - 2], k = b->shapes[0][ra - 1], n = b->shapes[1][rb - 1];
  int fm = add_factor (b, "m", m, PLANNER_FACTOR_PASS);
  int fk = add_factor (b, "k", k, PLANNER_FACTOR_REDUCTION);
  int fn = add_factor (b, "n", n, PLANNER_FACTOR_PASS);
  map_dim (am, ra - 2, fm);
  map_dim (am, ra - 1, fk);
  map_dim (bm, rb - 2, fk);
  map_dim (bm, rb - 1, fn);
  map_dim (om, ro - 2, fm);
  map_dim (om, ro - 1, fn);
  b->rule->linear_inputs = 0x3;
  b->rule->flops = 2.0 * batch * (double) m * (double) k * (double) n;
  return TRUE;
}

/* "bsh,hqnd->bsqnd": a letter is a factor; letters missing from the output are reductions.
 * An input beyond the equation's operands is a bias on the output's trailing dims. */
static gboolean
build_einsum (Builder *b, const PlannerOpAttrs *attrs)
{
  const char *eq = attrs->equation;
  const char *arrow = strstr (eq, "->");
  if (arrow == NULL)
    return fail (b, PLANNER_ERROR_PARSE, "equation '%s' has no '->'; write e.g. bsh,hn->bsn",
                 eq);
  g_autofree char *lhs = g_strndup (eq, arrow - eq);
  const char *rhs = arrow + 2;
  g_auto (GStrv) operands = g_strsplit (lhs, ",", -1);
  guint n_ops = g_strv_length (operands);
  int letter_factor[128];
  gint64 letter_size[128];
  double flops = 2.0;

  if (n_ops > b->n_inputs || b->n_inputs > n_ops + 1)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "equation '%s' has %u operands but the op has %u inputs (one extra input is "
                 "allowed, as a bias on the output)",
                 eq, n_ops, b->n_inputs);
  for (guint c = 0; c < 128; c++)
    letter_factor[c] = -1, letter_size[c] = 0;
  for (guint i = 0; i < n_ops; i++)
    {
      const char *spec = operands[i];
      if (strlen (spec) != b->ranks[i])
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "operand %u of '%s' has %zu letters but input %u has rank %u", i, eq,
                     strlen (spec), i, b->ranks[i]);
      for (guint d = 0; spec[d]; d++)
        {
          guchar c = (guchar) spec[d];
          if (c >= 128 || !g_ascii_isalpha (c))
            return fail (b, PLANNER_ERROR_PARSE, "equation '%s': '%c' is not a letter", eq, c);
          if (letter_size[c] && letter_size[c] != b->shapes[i][d])
            return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                         "letter '%c' of '%s' is %" G_GINT64_FORMAT " in one operand and %"
                         G_GINT64_FORMAT " in input %u",
                         c, eq, letter_size[c], b->shapes[i][d], i);
          letter_size[c] = b->shapes[i][d];
        }
    }
  for (guint d = 0; rhs[d]; d++)
    if ((guchar) rhs[d] >= 128 || letter_size[(guchar) rhs[d]] == 0)
      return fail (b, PLANNER_ERROR_PARSE, "output letter '%c' of '%s' is in no operand",
                   rhs[d], eq);
  for (guint c = 0; c < 128; c++)
    if (letter_size[c])
      {
        char name[2] = { (char) c, 0 };
        letter_factor[c] = add_factor (b, name, letter_size[c],
                                       strchr (rhs, (int) c) ? PLANNER_FACTOR_PASS
                                                             : PLANNER_FACTOR_REDUCTION);
        flops *= (double) letter_size[c];
      }
  for (guint i = 0; i < n_ops; i++)
    {
      PlannerOperandMap *m = input_map (b, i, b->ranks[i]);
      for (guint d = 0; operands[i][d]; d++)
        if (b->shapes[i][d] != 1)
          map_dim (m, d, letter_factor[(guchar) operands[i][d]]);
    }
  guint ro = strlen (rhs);
  PlannerOperandMap *om = output_map (b, 0, ro);
  for (guint d = 0; d < ro; d++)
    if (letter_size[(guchar) rhs[d]] != 1)
      map_dim (om, d, letter_factor[(guchar) rhs[d]]);
  if (b->n_inputs == n_ops + 1)
    {
      guint bi = n_ops, rb = b->ranks[bi];
      PlannerOperandMap *bm = input_map (b, bi, rb);
      if (rb > ro)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "the bias has more dims than the output");
      for (guint d = 0; d < rb; d++)
        {
          guchar c = (guchar) rhs[ro - rb + d];
          if (b->shapes[bi][d] != letter_size[c])
            return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                         "dim %u of the bias (size %" G_GINT64_FORMAT
                         ") must match output letter '%c' (size %" G_GINT64_FORMAT ")",
                         d, b->shapes[bi][d], c, letter_size[c]);
          if (letter_size[c] != 1)
            map_dim (bm, d, letter_factor[c]);
        }
      b->rule->bias_inputs = 1u << bi;
    }
  b->rule->linear_inputs = (1u << n_ops) - 1;
  b->rule->flops = n_ops > 1 ? flops * (double) (n_ops - 1) : flops / 2.0;
  return TRUE;
}

static gboolean
build_embedding (Builder *b)
{
  if (!need_rank (b, 1, 2, 2))
    return FALSE;
  guint rank = b->ranks[0];
  PlannerOperandMap *im = input_map (b, 0, rank);
  PlannerOperandMap *tm = input_map (b, 1, 2);
  PlannerOperandMap *om = output_map (b, 0, rank + 1);
  leading_pass_factors (b, 0, rank, im, om);
  /* Vocab-parallel lookup: each shard answers the ids in its range, zeros elsewhere, and the
   * outputs are partial sums over the vocab axes. */
  int fv = add_factor (b, "vocab", b->shapes[1][0], PLANNER_FACTOR_REDUCTION);
  int fh = add_factor (b, "h", b->shapes[1][1], PLANNER_FACTOR_PASS);
  map_dim (tm, 0, fv);
  map_dim (tm, 1, fh);
  map_dim (om, rank, fh);
  b->rule->flops = 0;
  return TRUE;
}

/* Reshape: dims are grouped where prefix products meet; inside a group the factors are the
 * common refinement of the input and output dims, so a merged dim is a compound of factors
 * whose major-most one alone may be split. */
static gboolean
build_reshape (Builder *b, const PlannerOpAttrs *attrs)
{
  guint ri = b->ranks[0], ro = attrs->n_ints;
  const gint64 *in = b->shapes[0];
  gint64 out[PLANNER_MAX_RANK];
  guint64 total = numel (in, ri), known = 1;
  int infer = -1;

  if (ro > PLANNER_MAX_RANK)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "target rank %u is over %d", ro,
                 PLANNER_MAX_RANK);
  for (guint d = 0; d < ro; d++)
    {
      out[d] = attrs->ints[d];
      if (out[d] == -1 && infer < 0)
        infer = (int) d;
      else if (out[d] <= 0)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "target dim %u is %" G_GINT64_FORMAT "; dims are > 0 (one may be -1)", d,
                     out[d]);
      else
        known *= (guint64) out[d];
    }
  if (infer >= 0)
    {
      if (known == 0 || total % known != 0)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "cannot infer the -1 dim");
      out[infer] = (gint64) (total / known);
      known = total;
    }
  if (known != total)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "%" G_GUINT64_FORMAT " elements cannot be viewed as %" G_GUINT64_FORMAT, total,
                 known);

  PlannerOperandMap *im = input_map (b, 0, ri);
  PlannerOperandMap *om = output_map (b, 0, ro);
  guint i = 0, o = 0;
  while (i < ri || o < ro)
    {
      /* Skip unit dims: they map to no factor. */
      if (i < ri && in[i] == 1)
        {
          i++;
          continue;
        }
      if (o < ro && out[o] == 1)
        {
          o++;
          continue;
        }
      /* Grow one group until both sides' products meet. */
      guint i0 = i, o0 = o;
      guint64 pi = (guint64) in[i++], po = (guint64) out[o++];
      while (pi != po)
        {
          if (pi < po)
            pi *= (guint64) in[i++];
          else
            po *= (guint64) out[o++];
        }
      /* Boundaries of both sides; a refinement exists if they form a divisor chain. */
      guint64 bounds[2 * PLANNER_MAX_RANK];
      guint nb = 0;
      guint64 acc = 1;
      for (guint d = i0; d < i; d++)
        bounds[nb++] = acc *= (guint64) in[d];
      acc = 1;
      for (guint d = o0; d < o; d++)
        {
          acc *= (guint64) out[d];
          gboolean dup = FALSE;
          for (guint q = 0; q < nb; q++)
            dup |= bounds[q] == acc;
          if (!dup)
            bounds[nb++] = acc;
        }
      for (guint x = 1; x < nb; x++)
        for (guint y = x; y > 0 && bounds[y - 1] > bounds[y]; y--)
          {
            guint64 t = bounds[y];
            bounds[y] = bounds[y - 1];
            bounds[y - 1] = t;
          }
      gboolean chain = TRUE;
      for (guint q = 1; q < nb; q++)
        chain &= bounds[q] % bounds[q - 1] == 0;
      if (!chain)
        {
          for (guint d = i0; d < i; d++)
            map_dim (im, d, add_factor (b, "ri", in[d], PLANNER_FACTOR_NEED_REPLICATION));
          for (guint d = o0; d < o; d++)
            map_dim (om, d, add_factor (b, "ro", out[d], PLANNER_FACTOR_NEED_REPLICATION));
          continue;
        }
      int factors[2 * PLANNER_MAX_RANK];
      guint64 prev = 1;
      for (guint q = 0; q < nb; q++)
        {
          factors[q] = add_factor (b, batch_names[MIN (b->rule->n_factors, 7)],
                                   (gint64) (bounds[q] / prev), PLANNER_FACTOR_PASS);
          prev = bounds[q];
        }
      /* Map each dim to the factors between its boundaries. */
      acc = 1;
      guint q = 0;
      for (guint d = i0; d < i; d++)
        {
          acc *= (guint64) in[d];
          while (q < nb && bounds[q] <= acc)
            map_dim (im, d, factors[q++]);
        }
      acc = 1;
      q = 0;
      for (guint d = o0; d < o; d++)
        {
          acc *= (guint64) out[d];
          while (q < nb && bounds[q] <= acc)
            map_dim (om, d, factors[q++]);
        }
    }
  im->rank = ri;
  om->rank = ro;
  b->rule->linear_inputs = 0x1;
  return TRUE;
}

static gboolean
build_transpose (Builder *b, const PlannerOpAttrs *attrs)
{
  guint rank = b->ranks[0];
  guint32 seen = 0;
  if (attrs->n_ints != rank)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "the permutation has %u entries for a rank-%u input", attrs->n_ints, rank);
  for (guint d = 0; d < rank; d++)
    {
      gint64 p = attrs->ints[d];
      if (p < 0 || p >= rank || (seen & (1u << p)))
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "the permutation must hold 0..%u once each", rank - 1);
      seen |= 1u << p;
    }
  PlannerOperandMap *im = input_map (b, 0, rank);
  PlannerOperandMap *om = output_map (b, 0, rank);
  int factor_of[PLANNER_MAX_RANK];
  for (guint d = 0; d < rank; d++)
    {
      factor_of[d] = -1;
      if (b->shapes[0][d] != 1)
        {
          factor_of[d] = add_factor (b, batch_names[d], b->shapes[0][d], PLANNER_FACTOR_PASS);
          map_dim (im, d, factor_of[d]);
        }
    }
  for (guint d = 0; d < rank; d++)
    if (factor_of[attrs->ints[d]] >= 0)
      map_dim (om, d, factor_of[attrs->ints[d]]);
  b->rule->linear_inputs = 0x1;
  return TRUE;
}

static gboolean
build_reduce (Builder *b, const PlannerOpAttrs *attrs)
{
  guint rank = b->ranks[0];
  guint32 reduced = 0;
  for (guint i = 0; i < attrs->n_ints; i++)
    {
      int a = 0;
      if (!valid_axis (b, (int) attrs->ints[i], rank, &a))
        return FALSE;
      reduced |= 1u << a;
    }
  if (attrs->n_ints == 0)
    reduced = (1u << rank) - 1;
  PlannerOperandMap *im = input_map (b, 0, rank);
  guint ro = 0;
  for (guint d = 0; d < rank; d++)
    if (!(reduced & (1u << d)) || attrs->keepdims)
      ro++;
  PlannerOperandMap *om = output_map (b, 0, ro);
  guint od = 0;
  for (guint d = 0; d < rank; d++)
    {
      gboolean r = (reduced & (1u << d)) != 0;
      int f = -1;
      if (b->shapes[0][d] != 1)
        {
          f = add_factor (b, batch_names[d], b->shapes[0][d],
                          r ? PLANNER_FACTOR_REDUCTION : PLANNER_FACTOR_PASS);
          map_dim (im, d, f);
        }
      if (!r && f >= 0)
        map_dim (om, od, f);
      if (!r || attrs->keepdims)
        od++;
    }
  om->rank = ro;
  b->rule->linear_inputs = 0x1;
  b->rule->flops = (double) numel (b->shapes[0], rank);
  return TRUE;
}

static gboolean
build_concat (Builder *b, const PlannerOpAttrs *attrs)
{
  guint rank = b->ranks[0];
  int axis = 0;
  if (!valid_axis (b, attrs->axis, rank, &axis))
    return FALSE;
  PlannerOperandMap *om = output_map (b, 0, rank);
  gint64 total = 0;
  for (guint i = 0; i < b->n_inputs; i++)
    {
      if (b->ranks[i] != rank)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "%s has rank %u, input 0 has rank %u",
                     planner_operand_label (i), b->ranks[i], rank);
      for (guint d = 0; d < rank; d++)
        if ((int) d != axis && !same_size (b, i, d, 0, d, "dims off the concat axis"))
          return FALSE;
      total += b->shapes[i][axis];
      input_map (b, i, rank);
    }
  for (guint d = 0; d < rank; d++)
    {
      if ((int) d == axis)
        {
          for (guint i = 0; i < b->n_inputs; i++)
            map_dim (&b->rule->inputs[i], d,
                     add_factor (b, "ci", b->shapes[i][d], PLANNER_FACTOR_NEED_REPLICATION));
          map_dim (om, d, add_factor (b, "c", total, PLANNER_FACTOR_NEED_REPLICATION));
          continue;
        }
      if (b->shapes[0][d] == 1)
        continue;
      int f = add_factor (b, batch_names[d], b->shapes[0][d], PLANNER_FACTOR_PASS);
      for (guint i = 0; i < b->n_inputs; i++)
        map_dim (&b->rule->inputs[i], d, f);
      map_dim (om, d, f);
    }
  b->rule->linear_inputs = (1u << b->n_inputs) - 1;
  b->rule->linear_all = TRUE;
  return TRUE;
}

/* Split and Slice: the cut axis is whole; other dims pass through to every output. */
static gboolean
build_split (Builder *b, const PlannerOpAttrs *attrs, guint n_outputs)
{
  guint rank = b->ranks[0];
  int axis = 0;
  gint64 sizes[PLANNER_MAX_OPERANDS];
  if (!valid_axis (b, attrs->axis, rank, &axis))
    return FALSE;
  gint64 whole = b->shapes[0][axis];
  if (b->rule->type == PLANNER_OP_SLICE)
    {
      gint64 start = attrs->start, end = attrs->end;
      if (start < 0 || end > whole || start >= end)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "slice [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                     ") is not inside dim %d of size %" G_GINT64_FORMAT,
                     start, end, axis, whole);
      sizes[0] = end - start;
      n_outputs = 1;
    }
  else
    {
      gint64 sum = 0;
      if (attrs->n_ints != n_outputs || n_outputs == 0)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "%u split sizes for %u outputs; give one size per output", attrs->n_ints,
                     n_outputs);
      for (guint i = 0; i < n_outputs; i++)
        {
          sizes[i] = attrs->ints[i];
          if (sizes[i] <= 0)
            return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "split size %u is not positive", i);
          sum += sizes[i];
        }
      if (sum != whole)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "split sizes add up to %" G_GINT64_FORMAT ", dim %d has %" G_GINT64_FORMAT,
                     sum, axis, whole);
    }
  PlannerOperandMap *im = input_map (b, 0, rank);
  for (guint o = 0; o < n_outputs; o++)
    output_map (b, o, rank);
  b->rule->n_outputs = n_outputs;
  for (guint d = 0; d < rank; d++)
    {
      if ((int) d == axis)
        {
          if (whole != 1)
            map_dim (im, d, add_factor (b, "c", whole, PLANNER_FACTOR_NEED_REPLICATION));
          for (guint o = 0; o < n_outputs; o++)
            if (sizes[o] != 1)
              map_dim (&b->rule->outputs[o], d,
                       add_factor (b, "co", sizes[o], PLANNER_FACTOR_NEED_REPLICATION));
          continue;
        }
      if (b->shapes[0][d] == 1)
        continue;
      int f = add_factor (b, batch_names[d], b->shapes[0][d], PLANNER_FACTOR_PASS);
      map_dim (im, d, f);
      for (guint o = 0; o < n_outputs; o++)
        map_dim (&b->rule->outputs[o], d, f);
    }
  b->rule->linear_inputs = 0x1;
  return TRUE;
}

static gboolean
build_rotary (Builder *b)
{
  if (!need_rank (b, 0, 4, 4))
    return FALSE;
  if (b->shapes[0][3] % 2 != 0)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "head dim %" G_GINT64_FORMAT " is odd; rotary embedding rotates pairs",
                 b->shapes[0][3]);
  build_per_dim (b, 3, PLANNER_FACTOR_NEED_REPLICATION);
  g_strlcpy (b->rule->factors[b->rule->inputs[0].f[3][0]].name, "d",
             sizeof b->rule->factors[0].name);
  b->rule->linear_inputs = 0x1;
  b->rule->flops = 6.0 * (double) numel (b->shapes[0], 4);
  return TRUE;
}

static gboolean
build_sdpa (Builder *b)
{
  for (guint i = 0; i < 3; i++)
    if (!need_rank (b, i, 4, 4))
      return FALSE;
  const gint64 *q = b->shapes[0], *k = b->shapes[1], *v = b->shapes[2];
  if (!same_size (b, 0, 0, 1, 0, "batch sizes") || !same_size (b, 0, 0, 2, 0, "batch sizes")
      || !same_size (b, 1, 1, 2, 1, "kv heads of k and v")
      || !same_size (b, 1, 2, 2, 2, "key sequence lengths")
      || !same_size (b, 0, 3, 1, 3, "head dims of q and k"))
    return FALSE;
  if (q[1] % k[1] != 0)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "%" G_GINT64_FORMAT " query heads are not a multiple of %" G_GINT64_FORMAT
                 " kv heads",
                 q[1], k[1]);
  PlannerOperandMap *qm = input_map (b, 0, 4), *km = input_map (b, 1, 4),
                    *vm = input_map (b, 2, 4), *om = output_map (b, 0, 4);
  int fb = add_factor (b, "b", q[0], PLANNER_FACTOR_PASS);
  /* Query heads are (kv heads x group), kv-head major as HF's repeat_kv orders them, so a
   * split of the kv heads splits the query heads consistently. */
  int fkv = add_factor (b, "kv_heads", k[1], PLANNER_FACTOR_PASS);
  int fg = add_factor (b, "group", q[1] / k[1], PLANNER_FACTOR_PASS);
  int fsq = add_factor (b, "sq", q[2], PLANNER_FACTOR_PASS);
  int fsk = add_factor (b, "sk", k[2], PLANNER_FACTOR_NEED_REPLICATION);
  int fd = add_factor (b, "d", q[3], PLANNER_FACTOR_NEED_REPLICATION);
  int fdv = add_factor (b, "dv", v[3], PLANNER_FACTOR_PASS);
  PlannerOperandMap *all[] = { qm, km, vm, om };
  for (guint i = 0; i < 4; i++)
    {
      map_dim (all[i], 0, fb);
      map_dim (all[i], 1, fkv);
    }
  map_dim (qm, 1, fg);
  map_dim (om, 1, fg);
  map_dim (qm, 2, fsq);
  map_dim (qm, 3, fd);
  map_dim (km, 2, fsk);
  map_dim (km, 3, fd);
  map_dim (vm, 2, fsk);
  map_dim (vm, 3, fdv);
  map_dim (om, 2, fsq);
  map_dim (om, 3, fdv);
  if (b->n_inputs == 4)
    {
      /* An additive bias on the scaled scores [B or 1, heads or 1, Sq, Sk] (T5's relative
       * positions, issue 16): dims of 1 broadcast. */
      const gint64 *m = b->shapes[3];
      if (b->ranks[3] != 4 || (m[0] != 1 && m[0] != q[0]) || (m[1] != 1 && m[1] != q[1])
          || m[2] != q[2] || m[3] != k[2])
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "the score bias (input 3) must be [1 or %" G_GINT64_FORMAT ", 1 or %"
                     G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                     q[0], q[1], q[2], k[2]);
      PlannerOperandMap *bm = input_map (b, 3, 4);
      if (m[0] != 1)
        map_dim (bm, 0, fb);
      if (m[1] != 1)
        {
          map_dim (bm, 1, fkv);
          map_dim (bm, 1, fg);
        }
      map_dim (bm, 2, fsq);
      map_dim (bm, 3, fsk);
    }
  b->rule->flops = 2.0 * (double) (q[0] * q[1] * q[2] * k[2]) * (double) (q[3] + v[3]);
  return TRUE;
}

static gboolean
build_cross_entropy (Builder *b)
{
  guint rank = b->ranks[0];
  if (!need_rank (b, 0, 2, PLANNER_MAX_RANK) || b->ranks[1] != rank - 1)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "labels must have the logits' shape without the class dim");
  PlannerOperandMap *lm = input_map (b, 0, rank);
  PlannerOperandMap *ym = input_map (b, 1, rank - 1);
  output_map (b, 0, 0);
  for (guint d = 0; d + 1 < rank; d++)
    {
      if (!same_size (b, 0, d, 1, d, "leading dims of logits and labels"))
        return FALSE;
      if (b->shapes[0][d] == 1)
        continue;
      /* The loss is a mean over these dims: split them and the loss is partial. */
      int f = add_factor (b, batch_names[d], b->shapes[0][d], PLANNER_FACTOR_REDUCTION);
      map_dim (lm, d, f);
      map_dim (ym, d, f);
    }
  map_dim (lm, rank - 1,
           add_factor (b, "classes", b->shapes[0][rank - 1], PLANNER_FACTOR_NEED_REPLICATION));
  b->rule->flops = 5.0 * (double) numel (b->shapes[0], rank);
  return TRUE;
}

static gboolean
build_conv2d (Builder *b, const PlannerOpAttrs *attrs)
{
  if (!need_rank (b, 0, 4, 4) || !need_rank (b, 1, 4, 4))
    return FALSE;
  if (!same_size (b, 0, 1, 1, 1, "input channels"))
    return FALSE;
  const gint64 *x = b->shapes[0], *w = b->shapes[1];
  gint64 stride[2] = { 1, 1 }, pad[2] = { 0, 0 }, out[2];
  if (attrs->n_ints >= 2)
    stride[0] = attrs->ints[0], stride[1] = attrs->ints[1];
  if (attrs->n_ints >= 4)
    pad[0] = attrs->ints[2], pad[1] = attrs->ints[3];
  for (guint i = 0; i < 2; i++)
    {
      if (stride[i] < 1 || pad[i] < 0)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH, "strides must be >= 1 and pads >= 0");
      out[i] = (x[2 + i] + 2 * pad[i] - w[2 + i]) / stride[i] + 1;
      if (out[i] < 1)
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "kernel %" G_GINT64_FORMAT " is larger than the padded input %" G_GINT64_FORMAT,
                     w[2 + i], x[2 + i] + 2 * pad[i]);
    }
  PlannerOperandMap *xm = input_map (b, 0, 4), *wm = input_map (b, 1, 4),
                    *om = output_map (b, 0, 4);
  int fn = add_factor (b, "n", x[0], PLANNER_FACTOR_PASS);
  int fo = add_factor (b, "o", w[0], PLANNER_FACTOR_PASS);
  int fc = add_factor (b, "c", x[1], PLANNER_FACTOR_REDUCTION);
  map_dim (xm, 0, fn);
  map_dim (xm, 1, fc);
  map_dim (wm, 0, fo);
  map_dim (wm, 1, fc);
  map_dim (om, 0, fn);
  map_dim (om, 1, fo);
  static const char *const in_names[] = { "h", "w" }, *const k_names[] = { "kh", "kw" },
                           *const out_names[] = { "oh", "ow" };
  for (guint i = 0; i < 2; i++)
    {
      /* v1: spatial dims whole (no halo exchange). */
      map_dim (xm, 2 + i, add_factor (b, in_names[i], x[2 + i], PLANNER_FACTOR_NEED_REPLICATION));
      map_dim (wm, 2 + i, add_factor (b, k_names[i], w[2 + i], PLANNER_FACTOR_NEED_REPLICATION));
      map_dim (om, 2 + i, add_factor (b, out_names[i], out[i], PLANNER_FACTOR_NEED_REPLICATION));
    }
  if (b->n_inputs == 3)
    {
      if (b->ranks[2] != 1 || b->shapes[2][0] != w[0])
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "the bias must have shape [%" G_GINT64_FORMAT "]", w[0]);
      map_dim (input_map (b, 2, 1), 0, fo);
      b->rule->bias_inputs = 1u << 2;
    }
  b->rule->linear_inputs = 0x3;
  b->rule->flops = 2.0 * (double) (x[0] * w[0] * out[0] * out[1]) * (double) (x[1] * w[2] * w[3]);
  return TRUE;
}

/* ---- mixture of experts (planner/README.md, "Mixture of experts") ----
 *
 * Tokens are routed within their batch row: the row is GShard's group, so splitting the batch
 * splits the groups and each expert's slots of a row are filled in token order. The slot of
 * token s at expert e is the number of earlier tokens of the row routed to e; only gates[.., e]
 * decides it, so the expert dim may be split in all three ops. The sequence may not: a slot
 * depends on every earlier token. */

static gboolean
moe_need_gates (Builder *b, guint input, gint64 batch, gint64 seq)
{
  if (!need_rank (b, input, 3, 3))
    return FALSE;
  if (b->shapes[input][0] != batch || b->shapes[input][1] != seq)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "the gates (%s) are [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ", %"
                 G_GINT64_FORMAT "] but the tokens are %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT
                 "; they need one gate per token and expert",
                 planner_operand_label (input), b->shapes[input][0], b->shapes[input][1],
                 b->shapes[input][2], batch, seq);
  return TRUE;
}

static gboolean
build_moe (Builder *b, const PlannerOpAttrs *attrs)
{
  PlannerOpRule *r = b->rule;
  const gint64 *s0 = b->shapes[0];

  if (r->type == PLANNER_OP_MOE_ROUTER)
    {
      if (!need_rank (b, 0, 3, 3))
        return FALSE;
      if (attrs->n_ints != 1 || attrs->ints[0] < 1 || attrs->ints[0] > s0[2])
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "ints must be [top_k] with 1 <= top_k <= %" G_GINT64_FORMAT " experts",
                     s0[2]);
      PlannerOperandMap *im = input_map (b, 0, 3), *om = output_map (b, 0, 3);
      int fb = add_factor (b, "b", s0[0], PLANNER_FACTOR_PASS);
      int fs = add_factor (b, "s", s0[1], PLANNER_FACTOR_PASS);
      /* The softmax and the top-k run over every expert of a token. */
      int fe = add_factor (b, "e", s0[2], PLANNER_FACTOR_NEED_REPLICATION);
      int fs_all[] = { fb, fs, fe };
      for (guint d = 0; d < 3; d++)
        {
          map_dim (im, d, fs_all[d]);
          map_dim (om, d, fs_all[d]);
        }
      r->flops = 6.0 * (double) numel (s0, 3);
      return TRUE;
    }

  if (r->type == PLANNER_OP_MOE_DISPATCH)
    {
      if (!need_rank (b, 0, 3, 3) || !moe_need_gates (b, 1, s0[0], s0[1]))
        return FALSE;
      gint64 capacity = attrs->n_ints == 1 ? attrs->ints[0] : 0;
      if (capacity < 1 || capacity > s0[1])
        return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                     "ints must be [capacity] with 1 <= capacity <= %" G_GINT64_FORMAT
                     " tokens per row (a token goes to an expert at most once)",
                     s0[1]);
      PlannerOperandMap *xm = input_map (b, 0, 3), *gm = input_map (b, 1, 3),
                        *om = output_map (b, 0, 4);
      int fb = add_factor (b, "b", s0[0], PLANNER_FACTOR_PASS);
      int fs = add_factor (b, "s", s0[1], PLANNER_FACTOR_NEED_REPLICATION);
      int fe = add_factor (b, "e", b->shapes[1][2], PLANNER_FACTOR_PASS);
      int fc = add_factor (b, "c", capacity, PLANNER_FACTOR_NEED_REPLICATION);
      int fh = add_factor (b, "h", s0[2], PLANNER_FACTOR_PASS);
      map_dim (xm, 0, fb), map_dim (xm, 1, fs), map_dim (xm, 2, fh);
      map_dim (gm, 0, fb), map_dim (gm, 1, fs), map_dim (gm, 2, fe);
      map_dim (om, 0, fb), map_dim (om, 1, fe), map_dim (om, 2, fc), map_dim (om, 3, fh);
      r->linear_inputs = 0x1;
      r->flops = (double) s0[0] * (double) b->shapes[1][2] * (double) capacity * (double) s0[2];
      return TRUE;
    }

  /* MoECombine: out[b, s] = sum over e of gates[b, s, e] y[b, e, slot(b, s, e)]. */
  if (!need_rank (b, 0, 4, 4) || !moe_need_gates (b, 1, s0[0], b->shapes[1][1]))
    return FALSE;
  if (b->shapes[1][2] != s0[1])
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "the expert outputs (input 0) have %" G_GINT64_FORMAT
                 " experts but the gates (input 1) %" G_GINT64_FORMAT,
                 s0[1], b->shapes[1][2]);
  if (s0[2] > b->shapes[1][1])
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "capacity %" G_GINT64_FORMAT " (dim 2 of input 0) exceeds the %" G_GINT64_FORMAT
                 " tokens per row",
                 s0[2], b->shapes[1][1]);
  PlannerOperandMap *ym = input_map (b, 0, 4), *gm = input_map (b, 1, 3),
                    *om = output_map (b, 0, 3);
  int fb = add_factor (b, "b", s0[0], PLANNER_FACTOR_PASS);
  int fs = add_factor (b, "s", b->shapes[1][1], PLANNER_FACTOR_NEED_REPLICATION);
  /* Summed over: a shard of the experts gives its share of the sum. */
  int fe = add_factor (b, "e", s0[1], PLANNER_FACTOR_REDUCTION);
  int fc = add_factor (b, "c", s0[2], PLANNER_FACTOR_NEED_REPLICATION);
  int fh = add_factor (b, "h", s0[3], PLANNER_FACTOR_PASS);
  map_dim (ym, 0, fb), map_dim (ym, 1, fe), map_dim (ym, 2, fc), map_dim (ym, 3, fh);
  map_dim (gm, 0, fb), map_dim (gm, 1, fs), map_dim (gm, 2, fe);
  map_dim (om, 0, fb), map_dim (om, 1, fs), map_dim (om, 2, fh);
  r->linear_inputs = 0x1;
  r->flops = 2.0 * (double) numel (s0, 4);
  return TRUE;
}

/* ---- model zoo (issue 16) ---- */

/* torch.repeat_interleave (x, r, dim): output slice j of dim attrs.axis is input slice j / r.
 * The repeated dim is one factor of the output only, so the output splits over more ranks
 * than the input has slices (8 kv heads over mp=16: each rank its copy of one head, as
 * Megatron-LM replicates kv heads), while the input stays whole along it. */
static gboolean
build_repeat_interleave (Builder *b, const PlannerOpAttrs *attrs)
{
  guint rank = b->ranks[0];
  int axis = 0;
  if (!need_rank (b, 0, 1, PLANNER_MAX_RANK) || !valid_axis (b, attrs->axis, rank, &axis))
    return FALSE;
  if (attrs->n_ints != 1 || attrs->ints[0] < 1 || attrs->ints[0] > G_MAXINT32)
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "needs the repeat count as its one integer attribute (>= 1)");
  PlannerOperandMap *im = input_map (b, 0, rank), *om = output_map (b, 0, rank);
  for (guint d = 0; d < rank; d++)
    {
      gint64 size = b->shapes[0][d];
      if ((int) d == axis)
        {
          map_dim (im, d, add_factor (b, "src", size, PLANNER_FACTOR_NEED_REPLICATION));
          map_dim (om, d, add_factor (b, "rep", size * attrs->ints[0], PLANNER_FACTOR_PASS));
          continue;
        }
      if (size == 1)
        continue;
      int f = add_factor (b, batch_names[d], size, PLANNER_FACTOR_PASS);
      map_dim (im, d, f);
      map_dim (om, d, f);
    }
  b->rule->linear_inputs = 0x1;
  return TRUE;
}

/* T5's relative position buckets: a function of positions only, computed whole on every
 * device (its input is read for its sequence length). */
static gboolean
build_relative_position_bucket (Builder *b, const PlannerOpAttrs *attrs)
{
  if (!need_rank (b, 0, 2, 2))
    return FALSE;
  if (attrs->n_ints != 3 || attrs->ints[0] < 2 || attrs->ints[1] < 1
      || (attrs->ints[2] != 0 && attrs->ints[2] != 1))
    return fail (b, PLANNER_ERROR_SHAPE_MISMATCH,
                 "needs its buckets (>= 2), max distance (>= 1) and bidirectional (0 or 1) as "
                 "its three integer attributes");
  gint64 s = b->shapes[0][1];
  PlannerOperandMap *im = input_map (b, 0, 2), *om = output_map (b, 0, 2);
  map_dim (im, 0, add_factor (b, "b", b->shapes[0][0], PLANNER_FACTOR_NEED_REPLICATION));
  int fs = add_factor (b, "s", s, PLANNER_FACTOR_NEED_REPLICATION);
  map_dim (im, 1, fs);
  map_dim (om, 0, fs);
  map_dim (om, 1, add_factor (b, "sk", s, PLANNER_FACTOR_NEED_REPLICATION));
  return TRUE;
}

/* Elementwise FLOPs per output element, roughly what the kernels execute. */
static double
elementwise_cost (PlannerOpType type)
{
  switch (type)
    {
    case PLANNER_OP_GELU: return 8;
    case PLANNER_OP_SILU: return 4;
    case PLANNER_OP_TANH: case PLANNER_OP_EXP: return 4;
    case PLANNER_OP_SOFTMAX: return 5;
    case PLANNER_OP_LAYER_NORM: return 8;
    case PLANNER_OP_RMS_NORM: return 5;
    case PLANNER_OP_CAST: case PLANNER_OP_DROPOUT: return 0;
    case PLANNER_OP_REPEAT_INTERLEAVE: return 0;
    default: return 1;
    }
}

static void
derive_splittable (PlannerOpRule *rule)
{
  for (guint f = 0; f < rule->n_factors; f++)
    rule->factors[f].splittable = rule->factors[f].kind != PLANNER_FACTOR_NEED_REPLICATION
                                  && rule->factors[f].size > 1;
  const PlannerOperandMap *maps[2] = { rule->inputs, rule->outputs };
  guint counts[2] = { rule->n_inputs, rule->n_outputs };
  for (guint side = 0; side < 2; side++)
    for (guint i = 0; i < counts[side]; i++)
      for (guint d = 0; d < maps[side][i].rank; d++)
        for (guint k = 1; k < maps[side][i].n[d]; k++)
          rule->factors[maps[side][i].f[d][k]].splittable = FALSE;
}

gboolean
planner_op_rule_build (PlannerOpRule *rule, PlannerOpType type, const PlannerOpAttrs *attrs,
                       guint n_inputs, const guint *input_ranks,
                       const gint64 *const *input_shapes, guint n_outputs, const char *op_name,
                       GError **error)
{
  g_return_val_if_fail (rule != NULL, FALSE);
  g_return_val_if_fail (type < PLANNER_N_OP_TYPES, FALSE);
  g_return_val_if_fail (attrs != NULL, FALSE);

  Builder b = { rule, op_name ? op_name : "op", n_inputs, input_ranks, input_shapes, error };
  gboolean ok;

  memset (rule, 0, sizeof *rule);
  rule->type = type;
  rule->n_inputs = n_inputs;
  rule->n_outputs = 1;

  if (n_inputs < op_types[type].min_inputs || n_inputs > op_types[type].max_inputs)
    {
      if (op_types[type].min_inputs == op_types[type].max_inputs)
        return fail (&b, PLANNER_ERROR_SHAPE_MISMATCH, "takes %u inputs, got %u",
                     op_types[type].min_inputs, n_inputs);
      return fail (&b, PLANNER_ERROR_SHAPE_MISMATCH, "takes %u to %u inputs, got %u",
                   op_types[type].min_inputs, op_types[type].max_inputs, n_inputs);
    }
  if (type != PLANNER_OP_SPLIT && n_outputs != 1)
    return fail (&b, PLANNER_ERROR_SHAPE_MISMATCH, "has one output, %u were asked", n_outputs);
  for (guint i = 0; i < n_inputs; i++)
    {
      if (input_ranks[i] > PLANNER_MAX_RANK)
        return fail (&b, PLANNER_ERROR_SHAPE_MISMATCH, "%s has rank %u, over %d",
                     planner_operand_label (i), input_ranks[i], PLANNER_MAX_RANK);
      for (guint d = 0; d < input_ranks[i]; d++)
        if (input_shapes[i][d] <= 0)
          return fail (&b, PLANNER_ERROR_SHAPE_MISMATCH,
                       "dim %u of %s is %" G_GINT64_FORMAT "; dims must be > 0", d,
                       planner_operand_label (i), input_shapes[i][d]);
    }

  switch (type)
    {
    case PLANNER_OP_MATMUL: ok = build_matmul (&b, attrs); break;
    case PLANNER_OP_BATCH_MATMUL: ok = build_batch_matmul (&b); break;
    case PLANNER_OP_EINSUM: ok = build_einsum (&b, attrs); break;
    case PLANNER_OP_ADD:
    case PLANNER_OP_SUB:
      ok = build_elementwise (&b);
      rule->linear_inputs = 0x3;
      rule->linear_all = TRUE;
      break;
    case PLANNER_OP_MUL:
      ok = build_elementwise (&b);
      rule->linear_inputs = 0x3;
      break;
    case PLANNER_OP_DIV:
      ok = build_elementwise (&b);
      rule->linear_inputs = 0x1;
      break;
    case PLANNER_OP_NEG:
    case PLANNER_OP_CAST:
    case PLANNER_OP_DROPOUT:
      ok = build_per_dim (&b, -1, PLANNER_FACTOR_PASS);
      rule->linear_inputs = 0x1;
      break;
    case PLANNER_OP_RELU:
    case PLANNER_OP_GELU:
    case PLANNER_OP_SILU:
    case PLANNER_OP_TANH:
    case PLANNER_OP_EXP:
      ok = build_per_dim (&b, -1, PLANNER_FACTOR_PASS);
      break;
    case PLANNER_OP_SOFTMAX:
      {
        int axis = 0;
        ok = valid_axis (&b, attrs->axis, input_ranks[0], &axis)
             && build_per_dim (&b, axis, PLANNER_FACTOR_NEED_REPLICATION);
      }
      break;
    case PLANNER_OP_LAYER_NORM:
    case PLANNER_OP_RMS_NORM: ok = build_norm (&b); break;
    case PLANNER_OP_EMBEDDING: ok = build_embedding (&b); break;
    case PLANNER_OP_RESHAPE: ok = build_reshape (&b, attrs); break;
    case PLANNER_OP_TRANSPOSE: ok = build_transpose (&b, attrs); break;
    case PLANNER_OP_REDUCE_SUM:
    case PLANNER_OP_REDUCE_MEAN: ok = build_reduce (&b, attrs); break;
    case PLANNER_OP_CONCAT: ok = build_concat (&b, attrs); break;
    case PLANNER_OP_SPLIT:
    case PLANNER_OP_SLICE: ok = build_split (&b, attrs, n_outputs); break;
    case PLANNER_OP_ROTARY_EMBEDDING: ok = build_rotary (&b); break;
    case PLANNER_OP_SDPA: ok = build_sdpa (&b); break;
    case PLANNER_OP_CROSS_ENTROPY: ok = build_cross_entropy (&b); break;
    case PLANNER_OP_CONV2D: ok = build_conv2d (&b, attrs); break;
    case PLANNER_OP_SIGMOID: ok = build_per_dim (&b, -1, PLANNER_FACTOR_PASS); break;
    case PLANNER_OP_MOE_ROUTER:
    case PLANNER_OP_MOE_DISPATCH:
    case PLANNER_OP_MOE_COMBINE: ok = build_moe (&b, attrs); break;
    case PLANNER_OP_REPEAT_INTERLEAVE: ok = build_repeat_interleave (&b, attrs); break;
    case PLANNER_OP_SCALE:
      ok = build_per_dim (&b, -1, PLANNER_FACTOR_PASS);
      rule->linear_inputs = 0x1;
      break;
    case PLANNER_OP_RELATIVE_POSITION_BUCKET: ok = build_relative_position_bucket (&b, attrs); break;
    default: g_assert_not_reached ();
    }
  if (!ok)
    return FALSE;
  if (rule->flops == 0 && type != PLANNER_OP_EMBEDDING)
    {
      gint64 shape[PLANNER_MAX_RANK];
      guint rank = planner_op_rule_output_shape (rule, 0, shape);
      rule->flops = elementwise_cost (type) * (double) numel (shape, rank);
    }
  derive_splittable (rule);
  return TRUE;
}

guint
planner_op_rule_output_shape (const PlannerOpRule *rule, guint i, gint64 *shape)
{
  g_return_val_if_fail (i < rule->n_outputs, 0);
  const PlannerOperandMap *m = &rule->outputs[i];
  for (guint d = 0; d < m->rank; d++)
    {
      shape[d] = 1;
      for (guint k = 0; k < m->n[d]; k++)
        shape[d] *= rule->factors[m->f[d][k]].size;
    }
  return m->rank;
}

int
planner_op_rule_factor_index (const PlannerOpRule *rule, const char *name)
{
  for (guint f = 0; f < rule->n_factors; f++)
    if (strcmp (rule->factors[f].name, name) == 0)
      return (int) f;
  return -1;
}
