#define G_LOG_DOMAIN "executor-op-util"

#include "config.h"

#include <string.h>

#include "executor-error.h"
#include "executor-op-util.h"

gint64
executor_numel (const ExecutorTensorArg *t)
{
  gint64 n = 1;
  for (guint d = 0; d < t->rank; d++)
    n *= t->shape[d];
  return n;
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
