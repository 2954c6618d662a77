#define G_LOG_DOMAIN "planner-strategy"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-op-rule.h"

/* Strategies of an op under its factor table (semantics.md 4): enumeration, validation,
 * layouts, pins to strategies, printing. The tables themselves are in planner-op-rule.c. */

void
planner_strategy_init (PlannerStrategy *strategy)
{
  memset (strategy, 0, sizeof *strategy);
}

gboolean
planner_strategy_equal (const PlannerStrategy *a, const PlannerStrategy *b)
{
  if (a->partial != b->partial || (a->partial && a->partial_input != b->partial_input))
    return FALSE;
  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    if (a->n_axes[f] != b->n_axes[f] || memcmp (a->axes[f], b->axes[f], a->n_axes[f]) != 0)
      return FALSE;
  return TRUE;
}

void
planner_strategy_normalize (PlannerStrategy *strategy, const PlannerMesh *mesh)
{
  g_return_if_fail (strategy != NULL && mesh != NULL);
  guint32 unit = planner_mesh_unit_axes (mesh);
  if (unit == 0)
    return;
  strategy->partial &= ~unit;
  if (strategy->partial == 0)
    strategy->partial_input = 0;
  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    {
      guint n = 0;
      for (guint i = 0; i < strategy->n_axes[f]; i++)
        {
          guint a = strategy->axes[f][i];
          if (a < PLANNER_MAX_AXES && (unit & (1u << a)))
            continue;
          strategy->axes[f][n++] = (guint8)a;
        }
      for (guint i = n; i < strategy->n_axes[f]; i++)
        strategy->axes[f][i] = 0;
      strategy->n_axes[f] = (guint8)n;
    }
}

guint32
planner_strategy_axis_mask (const PlannerStrategy *strategy)
{
  guint32 mask = 0;
  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    for (guint i = 0; i < strategy->n_axes[f]; i++)
      mask |= 1u << strategy->axes[f][i];
  return mask;
}

guint64
planner_strategy_parts (const PlannerStrategy *strategy, const PlannerMesh *mesh)
{
  return planner_mesh_mask_size (mesh, planner_strategy_axis_mask (strategy));
}

static guint64
factor_parts (const PlannerStrategy *s, guint f, const PlannerMesh *mesh)
{
  guint64 n = 1;
  for (guint i = 0; i < s->n_axes[f]; i++)
    n *= mesh->sizes[s->axes[f][i]];
  return n;
}

GArray *
planner_op_rule_enumerate (const PlannerOpRule *rule, const PlannerMesh *mesh)
{
  g_return_val_if_fail (rule != NULL && mesh != NULL, NULL);

  GArray *out = g_array_new (FALSE, FALSE, sizeof (PlannerStrategy));
  int candidates[PLANNER_MAX_FACTORS + 1];
  guint n_candidates = 0;
  candidates[n_candidates++] = -1;
  for (guint f = 0; f < rule->n_factors; f++)
    if (rule->factors[f].splittable)
      candidates[n_candidates++] = (int) f;

  /* Axes of size 1 split nothing: they stay unassigned, so no duplicates; nor does the
   * pipeline axis, which splits layers. */
  guint active[PLANNER_MAX_AXES], n_active = 0;
  guint32 unit = planner_mesh_unit_axes (mesh);
  for (guint a = 0; a < mesh->n_axes; a++)
    if (!(unit & (1u << a)))
      active[n_active++] = a;

  guint choice[PLANNER_MAX_AXES] = { 0 };
  for (;;)
    {
      PlannerStrategy s;
      gboolean ok = TRUE;
      planner_strategy_init (&s);
      for (guint i = 0; i < n_active; i++)
        {
          int f = candidates[choice[i]];
          if (f >= 0)
            s.axes[f][s.n_axes[f]++] = (guint8) active[i];
        }
      for (guint f = 0; f < rule->n_factors && ok; f++)
        if (s.n_axes[f] && rule->factors[f].size % (gint64) factor_parts (&s, f, mesh) != 0)
          ok = FALSE;
      if (ok)
        g_array_append_val (out, s);

      /* Next combination, the last axis varying fastest. */
      int i = (int) n_active - 1;
      while (i >= 0 && ++choice[i] == n_candidates)
        choice[i--] = 0;
      if (i < 0)
        break;
    }
  return out;
}

static char *
describe_dim (const PlannerOpRule *rule, const PlannerOperandMap *m, guint d, gint64 size)
{
  if (m->n[d] <= 1)
    return g_strdup_printf ("size %" G_GINT64_FORMAT, size);
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "size %" G_GINT64_FORMAT " = ", size);
  for (guint k = 0; k < m->n[d]; k++)
    {
      const PlannerFactor *f = &rule->factors[m->f[d][k]];
      if (k == 0)
        g_string_append_printf (s, "%" G_GINT64_FORMAT " %s", f->size, f->name);
      else
        g_string_append_printf (s, " x %" G_GINT64_FORMAT, f->size);
    }
  return g_string_free (s, FALSE);
}

/* Where factor @f first appears on an input, for messages. */
static gboolean
find_factor_dim (const PlannerOpRule *rule, guint f, guint *input, guint *dim)
{
  for (guint i = 0; i < rule->n_inputs; i++)
    for (guint d = 0; d < rule->inputs[i].rank; d++)
      for (guint k = 0; k < rule->inputs[i].n[d]; k++)
        if (rule->inputs[i].f[d][k] == f)
          {
            *input = i;
            *dim = d;
            return TRUE;
          }
  return FALSE;
}

static const char *
input_name (const char *const *names, guint i)
{
  return names && names[i] ? names[i] : planner_operand_label (i);
}

static void
append_axes (GString *s, const PlannerStrategy *st, guint f, const PlannerMesh *mesh)
{
  for (guint i = 0; i < st->n_axes[f]; i++)
    g_string_append_printf (s, "%s%s=%u", i ? "+" : "", mesh->names[st->axes[f][i]],
                            mesh->sizes[st->axes[f][i]]);
}

gboolean
planner_strategy_validate (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                           const PlannerMesh *mesh, const char *op_name,
                           const char *const *input_names, GError **error)
{
  g_return_val_if_fail (strategy != NULL && rule != NULL && mesh != NULL, FALSE);
  guint32 seen = 0;

  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    {
      if (strategy->n_axes[f] == 0)
        continue;
      if (f >= rule->n_factors)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                       "%s: the strategy splits factor #%u, the op has %u factors", op_name, f,
                       rule->n_factors);
          return FALSE;
        }
      const PlannerFactor *factor = &rule->factors[f];
      guint input = 0, dim = 0;
      gboolean located = find_factor_dim (rule, f, &input, &dim);
      for (guint i = 0; i < strategy->n_axes[f]; i++)
        {
          guint a = strategy->axes[f][i];
          if (a >= mesh->n_axes)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS,
                           "%s: the strategy names axis #%u; the mesh has %u axes", op_name, a,
                           mesh->n_axes);
              return FALSE;
            }
          if ((seen | strategy->partial) & (1u << a))
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_AXIS_REUSED,
                           "%s: mesh axis %s is used twice; a strategy assigns each axis to "
                           "one factor at most",
                           op_name, mesh->names[a]);
              return FALSE;
            }
          seen |= 1u << a;
        }
      if (!factor->splittable)
        {
          const char *why = factor->kind == PLANNER_FACTOR_NEED_REPLICATION
                                ? "it must stay whole for this op (need-replication)"
                                : "only the major-most factor of a merged dim may be split";
          if (located)
            g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                         "%s: dim %u of %s (factor %s, size %" G_GINT64_FORMAT
                         ") cannot be split: %s; leave it whole",
                         op_name, dim, input_name (input_names, input), factor->name,
                         factor->size, why);
          else
            g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                         "%s: factor %s cannot be split: %s", op_name, factor->name, why);
          return FALSE;
        }
      guint64 parts = factor_parts (strategy, f, mesh);
      if (factor->size % (gint64) parts != 0)
        {
          g_autoptr (GString) axes = g_string_new (NULL);
          append_axes (axes, strategy, f, mesh);
          const PlannerOperandMap *m = located ? &rule->inputs[input] : NULL;
          gint64 dim_size = 1;
          if (m)
            for (guint k = 0; k < m->n[dim]; k++)
              dim_size *= rule->factors[m->f[dim][k]].size;
          g_autofree char *dim_desc = m ? describe_dim (rule, m, dim, dim_size) : NULL;
          g_autofree char *also = NULL;
          if (m && m->n[dim] > 1 && dim_size % (gint64) parts == 0)
            also = g_strdup_printf ("%" G_GINT64_FORMAT " %% %" G_GUINT64_FORMAT " == 0 but ",
                                    dim_size, parts);
          /* The largest product of mesh axes that would divide the factor. */
          guint64 best = 1;
          for (guint64 p = parts; p > 1; p--)
            if (factor->size % (gint64) p == 0 && parts % p == 0)
              {
                best = p;
                break;
              }
          /* What would work: a smaller split that divides, or none at all. */
          g_autofree char *advice
            = best > 1 ? g_strdup_printf ("use %s <= %" G_GUINT64_FORMAT " or replicate %s",
                                          strategy->n_axes[f] == 1
                                            ? mesh->names[strategy->axes[f][0]]
                                            : "axes whose product is",
                                          best, op_name)
                       : g_strdup_printf ("no split of these axes divides %" G_GINT64_FORMAT
                                          "; replicate %s along them",
                                          factor->size, op_name);
          /* More ranks than key/value heads (issue 16): the model option that repeats them. */
          g_autofree char *kv = NULL;
          if (g_str_equal (factor->name, "heads") && (gint64) parts > factor->size
              && (gint64) parts % factor->size == 0
              && (g_str_has_suffix (op_name, "k_proj") || g_str_has_suffix (op_name, "v_proj")))
            kv = g_strdup_printf ("; or repeat each kv head with --kv-replicas %" G_GINT64_FORMAT,
                                  (gint64) parts / factor->size);
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE,
                       "%s: dim %u of %s (%s) cannot be split over %s: %s%" G_GINT64_FORMAT
                       " %s %% %" G_GUINT64_FORMAT " != 0; %s%s",
                       op_name, dim, input_name (input_names, input),
                       dim_desc ? dim_desc : "?", axes->str, also ? also : "", factor->size,
                       factor->name, parts, advice, kv ? kv : "");
          return FALSE;
        }
    }
  if (strategy->partial & seen)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_AXIS_REUSED,
                   "%s: an axis is both partial and split", op_name);
      return FALSE;
    }
  if (strategy->partial)
    {
      gboolean ok = rule->linear_all ? rule->linear_inputs != 0
                                     : (rule->linear_inputs >> strategy->partial_input) & 1;
      if (!ok)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                       "%s: %s cannot take %s partial; it is not linear in it, so the "
                       "input needs an AllReduce or ReduceScatter first",
                       op_name, planner_op_type_to_string (rule->type),
                       input_name (input_names, strategy->partial_input));
          return FALSE;
        }
    }
  return TRUE;
}

static void
operand_layout (const PlannerStrategy *s, const PlannerOperandMap *m, PlannerLayout *layout)
{
  planner_layout_init_replicated (layout, m->rank);
  for (guint d = 0; d < m->rank; d++)
    for (guint k = 0; k < m->n[d]; k++)
      {
        guint f = m->f[d][k];
        for (guint i = 0; i < s->n_axes[f]; i++)
          layout->axes[d][layout->n_axes[d]++] = s->axes[f][i];
      }
}

static gboolean
operand_has_factor (const PlannerOperandMap *m, guint f)
{
  for (guint d = 0; d < m->rank; d++)
    for (guint k = 0; k < m->n[d]; k++)
      if (m->f[d][k] == f)
        return TRUE;
  return FALSE;
}

static gboolean
input_carries_partial (const PlannerStrategy *s, const PlannerOpRule *rule, guint i)
{
  if (!s->partial || !((rule->linear_inputs >> i) & 1))
    return FALSE;
  return rule->linear_all || s->partial_input == i;
}

void
planner_strategy_layouts (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                          const PlannerMesh *mesh, PlannerLayout *inputs, PlannerLayout *outputs)
{
  g_return_if_fail (strategy != NULL && rule != NULL);

  if (inputs)
    for (guint i = 0; i < rule->n_inputs; i++)
      {
        operand_layout (strategy, &rule->inputs[i], &inputs[i]);
        if (input_carries_partial (strategy, rule, i))
          inputs[i].partial = strategy->partial;
      }
  if (outputs)
    for (guint o = 0; o < rule->n_outputs; o++)
      {
        operand_layout (strategy, &rule->outputs[o], &outputs[o]);
        outputs[o].partial = strategy->partial;
        for (guint f = 0; f < rule->n_factors; f++)
          if (strategy->n_axes[f] && rule->factors[f].kind == PLANNER_FACTOR_REDUCTION
              && !operand_has_factor (&rule->outputs[o], f))
            for (guint i = 0; i < strategy->n_axes[f]; i++)
              outputs[o].partial |= 1u << strategy->axes[f][i];
      }
}

gboolean
planner_strategy_from_layouts (const PlannerOpRule *rule, const PlannerMesh *mesh,
                               const PlannerLayout *inputs, guint n_given, const char *op_name,
                               const char *const *input_names, PlannerStrategy *strategy,
                               GError **error)
{
  g_return_val_if_fail (rule != NULL && mesh != NULL && strategy != NULL, FALSE);
  int from_input[PLANNER_MAX_FACTORS];
  guint from_dim[PLANNER_MAX_FACTORS];

  planner_strategy_init (strategy);
  if (n_given > rule->n_inputs)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                   "%s: %u input layouts given, the op has %u inputs", op_name, n_given,
                   rule->n_inputs);
      return FALSE;
    }
  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    from_input[f] = -1;

  /* Layouts made in code may still name axes of size 1; a pin's parsed ones do not. */
  PlannerLayout given[PLANNER_MAX_OPERANDS];
  for (guint i = 0; i < n_given; i++)
    {
      given[i] = inputs[i];
      planner_layout_normalize (&given[i], mesh);
    }
  inputs = given;

  for (guint i = 0; i < n_given; i++)
    {
      const PlannerLayout *l = &inputs[i];
      const PlannerOperandMap *m = &rule->inputs[i];
      const char *name = input_name (input_names, i);
      if (l->rank != m->rank)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_LAYOUT,
                       "%s: %s has rank %u but its layout has %u dims", op_name, name, m->rank,
                       l->rank);
          return FALSE;
        }
      for (guint d = 0; d < l->rank; d++)
        {
          if (l->n_axes[d] == 0)
            continue;
          if (m->n[d] == 0)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE,
                           "%s: dim %u of %s has size 1 and cannot be split", op_name, d, name);
              return FALSE;
            }
          guint f = m->f[d][0];
          if (from_input[f] >= 0)
            {
              gboolean same = strategy->n_axes[f] == l->n_axes[d]
                              && memcmp (strategy->axes[f], l->axes[d], l->n_axes[d]) == 0;
              if (!same)
                {
                  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                               "%s: dim %u of %s and dim %u of %s are the same loop dim (%s) "
                               "but are split differently; split them on the same axes",
                               op_name, from_dim[f], input_name (input_names, from_input[f]), d,
                               name, rule->factors[f].name);
                  return FALSE;
                }
              continue;
            }
          from_input[f] = (int) i;
          from_dim[f] = d;
          strategy->n_axes[f] = l->n_axes[d];
          memcpy (strategy->axes[f], l->axes[d], l->n_axes[d]);
        }
      if (l->partial)
        {
          if (strategy->partial && strategy->partial != l->partial)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                           "%s: inputs are partial over different axes", op_name);
              return FALSE;
            }
          if (strategy->partial && !rule->linear_all)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                           "%s: %s is linear in one input at a time; only one input may be "
                           "partial",
                           op_name, planner_op_type_to_string (rule->type));
              return FALSE;
            }
          strategy->partial = l->partial;
          strategy->partial_input = (guint8) i;
        }
    }
  if (strategy->partial && rule->linear_all)
    {
      strategy->partial_input = 0;
      for (guint i = 0; i < n_given; i++)
        if (((rule->linear_inputs >> i) & 1) && inputs[i].partial != strategy->partial)
          {
            g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                         "%s: %s takes partial inputs only when all of them are partial alike",
                         op_name, planner_op_type_to_string (rule->type));
            return FALSE;
          }
    }
  return planner_strategy_validate (strategy, rule, mesh, op_name, input_names, error);
}

char *
planner_strategy_to_string (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                            const PlannerMesh *mesh)
{
  PlannerLayout inputs[PLANNER_MAX_OPERANDS];
  GString *s = g_string_new (NULL);
  planner_strategy_layouts (strategy, rule, mesh, inputs, NULL);
  for (guint i = 0; i < rule->n_inputs; i++)
    {
      g_autofree char *l = planner_layout_to_string (&inputs[i], mesh);
      g_string_append_printf (s, "%s%s", i ? "," : "", l);
    }
  return g_string_free (s, FALSE);
}

char *
planner_strategy_describe (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                           const PlannerMesh *mesh)
{
  GString *s = g_string_new (NULL);
  for (guint f = 0; f < rule->n_factors; f++)
    {
      if (strategy->n_axes[f] == 0)
        continue;
      g_string_append_printf (s, "%s%s=", s->len ? " " : "", rule->factors[f].name);
      for (guint i = 0; i < strategy->n_axes[f]; i++)
        g_string_append_printf (s, "%s%s", i ? "+" : "", mesh->names[strategy->axes[f][i]]);
    }
  if (strategy->partial)
    {
      g_string_append_printf (s, "%spartial(", s->len ? " " : "");
      gboolean first = TRUE;
      for (guint a = 0; a < mesh->n_axes; a++)
        if (strategy->partial & (1u << a))
          {
            g_string_append_printf (s, "%s%s", first ? "" : ",", mesh->names[a]);
            first = FALSE;
          }
      g_string_append_c (s, ')');
    }
  if (s->len == 0)
    g_string_append (s, "replicated");
  return g_string_free (s, FALSE);
}

double
planner_strategy_local_flops (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                              const PlannerMesh *mesh)
{
  /* Every factor enters the work as a product, so splitting any of them over p devices
   * divides each device's work by p. */
  return rule->flops / (double) planner_strategy_parts (strategy, mesh);
}

void
planner_strategy_factor_offsets (const PlannerStrategy *strategy, const PlannerOpRule *rule,
                                 const PlannerMesh *mesh, const guint coords[PLANNER_MAX_AXES],
                                 gint64 offsets[PLANNER_MAX_FACTORS])
{
  for (guint f = 0; f < rule->n_factors; f++)
    {
      guint64 index = 0, parts = 1;
      for (guint i = 0; i < strategy->n_axes[f]; i++)
        {
          guint a = strategy->axes[f][i];
          index = index * mesh->sizes[a] + coords[a];
          parts *= mesh->sizes[a];
        }
      offsets[f] = (gint64) index * (rule->factors[f].size / (gint64) parts);
    }
}
