#define G_LOG_DOMAIN "planner-compare"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-compare.h"
#include "planner-error.h"
#include "planner-json.h"
#include "planner-plan-json.h"

static void
compare_op_clear (gpointer data)
{
  PlannerCompareOp *op = data;
  g_free (op->a);
  g_free (op->b);
  g_free (op->a_outputs);
  g_free (op->b_outputs);
}

void
planner_compare_free (PlannerCompare *self)
{
  if (self == NULL)
    return;
  g_clear_object (&self->a);
  g_clear_object (&self->b);
  g_clear_pointer (&self->ops, g_array_unref);
  g_clear_pointer (&self->removed, g_array_unref);
  g_clear_pointer (&self->added, g_array_unref);
  g_free (self);
}

static char *
output_layouts (PlannerPlan *plan, const PlannerOp *op)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  GString *s = g_string_new (NULL);
  for (guint k = 0; k < op->n_outputs; k++)
    {
      g_autofree char *text
          = planner_layout_to_string (planner_plan_get_tensor_layout (plan, op->outputs[k]), mesh);
      g_string_append_printf (s, "%s%s", k ? "," : "", text);
    }
  return g_string_free (s, FALSE);
}

/* What makes two redistributions the same, as text so that plans on meshes with the same axis
 * names but other sizes still match. */
static char *
redistribution_key (PlannerPlan *plan, guint i)
{
  const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autofree char *from = planner_layout_to_string (&r->from, mesh);
  g_autofree char *to = planner_layout_to_string (&r->to, mesh);
  return g_strdup_printf ("%u %d %u %d %s %s", r->tensor, r->consumer, r->slot, r->producer_side,
                          from, to);
}

/* Redistributions of @plan whose key is not in @other_keys. */
static GArray *
unmatched (PlannerPlan *plan, GHashTable *other_keys)
{
  GArray *list = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      g_autofree char *key = redistribution_key (plan, i);
      if (!g_hash_table_contains (other_keys, key))
        g_array_append_val (list, i);
    }
  return list;
}

static GHashTable *
keys_of (PlannerPlan *plan)
{
  GHashTable *keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    g_hash_table_add (keys, redistribution_key (plan, i));
  return keys;
}

PlannerCompare *
planner_compare_new (PlannerPlan *a, PlannerPlan *b, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (a) && PLANNER_IS_PLAN (b), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  PlannerGraph *graph = planner_plan_get_graph (a);
  PlannerGraph *graph_b = planner_plan_get_graph (b);
  if (graph != graph_b)
    {
      g_autofree char *hash_a = planner_graph_hash (graph);
      g_autofree char *hash_b = planner_graph_hash (graph_b);
      if (strcmp (hash_a, hash_b) != 0)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT,
                       "cannot compare plans of different models: the first is of \"%s\" "
                       "(graph hash %.12s...), the second of \"%s\" (%.12s...); compare plans "
                       "made for the same model, shapes and dtype",
                       planner_graph_get_source (graph), hash_a, planner_graph_get_source (graph_b),
                       hash_b);
          return NULL;
        }
    }

  PlannerCompare *self = g_new0 (PlannerCompare, 1);
  self->a = g_object_ref (a);
  self->b = g_object_ref (b);
  self->ops = g_array_new (FALSE, TRUE, sizeof (PlannerCompareOp));
  g_array_set_clear_func (self->ops, compare_op_clear);

  const PlannerMesh *mesh_a = planner_plan_get_mesh (a);
  const PlannerMesh *mesh_b = planner_plan_get_mesh (b);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      const PlannerOpPlan *pa = planner_plan_get_op (a, i);
      const PlannerOpPlan *pb = planner_plan_get_op (b, i);
      PlannerCompareOp d = { i };
      d.a = planner_strategy_to_string (&pa->strategy, &op->rule, mesh_a);
      d.b = planner_strategy_to_string (&pb->strategy, &op->rule, mesh_b);
      d.a_outputs = output_layouts (a, op);
      d.b_outputs = output_layouts (b, op);
      d.a_decision = pa->decision;
      d.b_decision = pb->decision;
      if (strcmp (d.a, d.b) == 0 && strcmp (d.a_outputs, d.b_outputs) == 0)
        compare_op_clear (&d);
      else
        g_array_append_val (self->ops, d);
    }

  g_autoptr (GHashTable) keys_a = keys_of (a);
  g_autoptr (GHashTable) keys_b = keys_of (b);
  self->removed = unmatched (a, keys_b);
  self->added = unmatched (b, keys_a);
  self->n_common = planner_plan_get_n_redistributions (a) - self->removed->len;

  const PlannerPlanTotals *ta = planner_plan_get_totals (a);
  const PlannerPlanTotals *tb = planner_plan_get_totals (b);
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      self->kinds[k].count = (int)tb->coll_count[k] - (int)ta->coll_count[k];
      self->kinds[k].bytes = (gint64)tb->coll_bytes[k] - (gint64)ta->coll_bytes[k];
      self->kinds[k].time_s = tb->coll_time_s[k] - ta->coll_time_s[k];
    }
  self->comm_bytes = (gint64)tb->comm_bytes - (gint64)ta->comm_bytes;
  self->comm_time_s = tb->comm_time_s - ta->comm_time_s;
  self->compute_time_s = tb->compute_time_s - ta->compute_time_s;
  self->step_time_s = tb->step_time_s - ta->step_time_s;
  self->memory_per_device_bytes
      = (gint64)tb->memory_per_device_bytes - (gint64)ta->memory_per_device_bytes;
  return self;
}

/* ---- JSON ---- */

static void
add_plan_info (JsonBuilder *b, const char *member, PlannerPlan *plan)
{
  g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (plan));
  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  planner_json_add_string (b, "name", planner_plan_get_name (plan));
  planner_json_add_string (b, "policy", planner_plan_get_policy (plan));
  planner_json_add_string (b, "mesh", mesh);
  planner_json_add_string (b, "hardware",
                           planner_hardware_get_name (planner_plan_get_hardware (plan)));
  json_builder_end_object (b);
}

static void
add_redistributions (JsonBuilder *b, const char *member, PlannerPlan *plan, GArray *list)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < list->len; i++)
    json_builder_add_value (
        b, planner_plan_redistribution_to_json (plan, g_array_index (list, guint, i)));
  json_builder_end_array (b);
}

/* {"a": .., "b": .., "delta": ..} */
static void
add_int_triple (JsonBuilder *b, const char *member, gint64 a, gint64 bv)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  planner_json_add_int (b, "a", a);
  planner_json_add_int (b, "b", bv);
  planner_json_add_int (b, "delta", bv - a);
  json_builder_end_object (b);
}

static void
add_us_triple (JsonBuilder *b, const char *member, double a_s, double b_s)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  planner_json_add_double (b, "a", a_s * 1e6);
  planner_json_add_double (b, "b", b_s * 1e6);
  planner_json_add_double (b, "delta", (b_s - a_s) * 1e6);
  json_builder_end_object (b);
}

JsonNode *
planner_compare_to_json (const PlannerCompare *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  PlannerGraph *graph = planner_plan_get_graph (self->a);
  const PlannerPlanTotals *ta = planner_plan_get_totals (self->a);
  const PlannerPlanTotals *tb = planner_plan_get_totals (self->b);
  g_autoptr (JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  planner_json_add_string (b, "model", planner_graph_get_source (graph));
  add_plan_info (b, "a", self->a);
  add_plan_info (b, "b", self->b);

  json_builder_set_member_name (b, "ops");
  json_builder_begin_array (b);
  for (guint i = 0; i < self->ops->len; i++)
    {
      const PlannerCompareOp *d = &g_array_index (self->ops, PlannerCompareOp, i);
      json_builder_begin_object (b);
      planner_json_add_string (b, "op", planner_graph_get_op (graph, d->op)->name);
      planner_json_add_string (b, "a", d->a);
      planner_json_add_string (b, "b", d->b);
      planner_json_add_string (b, "a_outputs", d->a_outputs);
      planner_json_add_string (b, "b_outputs", d->b_outputs);
      planner_json_add_string (b, "a_decision", planner_decision_to_string (d->a_decision));
      planner_json_add_string (b, "b_decision", planner_decision_to_string (d->b_decision));
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "redistributions");
  json_builder_begin_object (b);
  planner_json_add_int (b, "common", self->n_common);
  add_redistributions (b, "removed", self->a, self->removed);
  add_redistributions (b, "added", self->b, self->added);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "collectives");
  json_builder_begin_object (b);
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      json_builder_set_member_name (b, planner_step_kind_to_string (k));
      json_builder_begin_object (b);
      add_int_triple (b, "count", ta->coll_count[k], tb->coll_count[k]);
      add_int_triple (b, "bytes", (gint64)ta->coll_bytes[k], (gint64)tb->coll_bytes[k]);
      add_us_triple (b, "time_us", ta->coll_time_s[k], tb->coll_time_s[k]);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);

  json_builder_set_member_name (b, "totals");
  json_builder_begin_object (b);
  add_int_triple (b, "redistributions", ta->n_redistributions, tb->n_redistributions);
  add_int_triple (b, "comm_bytes", (gint64)ta->comm_bytes, (gint64)tb->comm_bytes);
  add_us_triple (b, "comm_time_us", ta->comm_time_s, tb->comm_time_s);
  add_us_triple (b, "compute_time_us", ta->compute_time_s, tb->compute_time_s);
  add_us_triple (b, "step_time_us", ta->step_time_s, tb->step_time_s);
  add_int_triple (b, "memory_per_device_bytes", (gint64)ta->memory_per_device_bytes,
                  (gint64)tb->memory_per_device_bytes);
  json_builder_end_object (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* ---- text ---- */

static char *
plan_label (PlannerPlan *plan)
{
  g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (plan));
  const char *name = planner_plan_get_name (plan);
  const char *policy = planner_plan_get_policy (plan);
  return g_strdup_printf ("%s%s%s on %s, %s, %u pins", name ? name : "",
                          name && policy ? ", policy "
                          : policy       ? "policy "
                                         : "",
                          policy ? policy : (name ? "" : "(unnamed)"), mesh,
                          planner_hardware_get_name (planner_plan_get_hardware (plan)),
                          planner_plan_get_pins (plan)->len);
}

static char *
signed_bytes (gint64 delta)
{
  g_autofree char *text = planner_format_bytes ((guint64)ABS (delta));
  return g_strdup_printf ("%s%s", delta < 0 ? "-" : delta > 0 ? "+" : "", text);
}

/* Sums taken in another order differ in their last bits: closer than that is no change. */
static char *
signed_time (double a, double b)
{
  double delta = b - a;
  if (fabs (delta) <= 1e-9 * MAX (fabs (a), fabs (b)))
    delta = 0;
  g_autofree char *text = planner_format_time (fabs (delta));
  return g_strdup_printf ("%s%s", delta < 0 ? "-" : delta > 0 ? "+" : "", text);
}

static void
append_redistribution (GString *out, char sign, PlannerPlan *plan, guint i)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
  const PlannerTensor *t = planner_graph_get_tensor (graph, r->tensor);
  PlannerRedistPath path = { TRUE, r->n_steps, r->steps, r->bytes, r->time_s };
  g_autofree char *steps = planner_redist_path_describe (&path, mesh);
  g_autofree char *from = planner_layout_to_string (&r->from, mesh);
  g_autofree char *to = planner_layout_to_string (&r->to, mesh);
  const char *consumer
      = r->consumer >= 0 ? planner_graph_get_op (graph, r->consumer)->name : "(graph output)";

  g_string_append_printf (out, "  %c %s -> %s%s: %s -> %s: %s\n", sign, t->name, consumer,
                          r->producer_side ? " (out layout)" : "", from, to, steps);
}

static void
append_cost_row (GString *out, const char *what, const char *a, const char *b, const char *delta)
{
  g_string_append_printf (out, "  %-20s %14s %14s %14s\n", what, a, b, delta);
}

char *
planner_compare_to_text (const PlannerCompare *self)
{
  g_return_val_if_fail (self != NULL, NULL);

  PlannerGraph *graph = planner_plan_get_graph (self->a);
  const PlannerPlanTotals *ta = planner_plan_get_totals (self->a);
  const PlannerPlanTotals *tb = planner_plan_get_totals (self->b);
  g_autofree char *label_a = plan_label (self->a);
  g_autofree char *label_b = plan_label (self->b);
  GString *out = g_string_new (NULL);

  g_string_append_printf (out, "Model: %s\nA: %s\nB: %s\n\n", planner_graph_get_source (graph),
                          label_a, label_b);

  g_string_append_printf (out, "Ops whose strategy differs: %u of %u\n", self->ops->len,
                          planner_graph_get_n_ops (graph));
  int width = 2;
  for (guint i = 0; i < self->ops->len; i++)
    {
      const PlannerCompareOp *d = &g_array_index (self->ops, PlannerCompareOp, i);
      width = MAX (width, (int)strlen (planner_graph_get_op (graph, d->op)->name));
    }
  for (guint i = 0; i < self->ops->len; i++)
    {
      const PlannerCompareOp *d = &g_array_index (self->ops, PlannerCompareOp, i);
      g_string_append_printf (out, "  %-*s  A %s -> %s (%s)\n", width,
                              planner_graph_get_op (graph, d->op)->name, d->a, d->a_outputs,
                              planner_decision_to_string (d->a_decision));
      g_string_append_printf (out, "  %-*s  B %s -> %s (%s)\n", width, "", d->b, d->b_outputs,
                              planner_decision_to_string (d->b_decision));
    }

  g_string_append_printf (out, "\nRedistributions: %u removed, %u added, %u in both\n",
                          self->removed->len, self->added->len, self->n_common);
  for (guint i = 0; i < self->removed->len; i++)
    append_redistribution (out, '-', self->a, g_array_index (self->removed, guint, i));
  for (guint i = 0; i < self->added->len; i++)
    append_redistribution (out, '+', self->b, g_array_index (self->added, guint, i));

  g_string_append (out, "\nCosts per device (B - A):\n");
  append_cost_row (out, "", "A", "B", "B - A");
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      if (ta->coll_count[k] == 0 && tb->coll_count[k] == 0)
        continue;
      g_autofree char *what = g_strdup_printf ("%s count", planner_step_kind_to_string (k));
      g_autofree char *ca = g_strdup_printf ("%u", ta->coll_count[k]);
      g_autofree char *cb = g_strdup_printf ("%u", tb->coll_count[k]);
      g_autofree char *cd = g_strdup_printf ("%+d", self->kinds[k].count);
      append_cost_row (out, what, ca, cb, cd);
      g_autofree char *ba = planner_format_bytes (ta->coll_bytes[k]);
      g_autofree char *bb = planner_format_bytes (tb->coll_bytes[k]);
      g_autofree char *bd = signed_bytes (self->kinds[k].bytes);
      append_cost_row (out, "  bytes", ba, bb, bd);
      g_autofree char *xa = planner_format_time (ta->coll_time_s[k]);
      g_autofree char *xb = planner_format_time (tb->coll_time_s[k]);
      g_autofree char *xd = signed_time (ta->coll_time_s[k], tb->coll_time_s[k]);
      append_cost_row (out, "  time", xa, xb, xd);
    }
  {
    g_autofree char *a = planner_format_bytes (ta->comm_bytes);
    g_autofree char *b = planner_format_bytes (tb->comm_bytes);
    g_autofree char *d = signed_bytes (self->comm_bytes);
    append_cost_row (out, "comm bytes", a, b, d);
  }
  const struct
  {
    const char *what;
    double a, b;
  } times[] = {
    { "comm time", ta->comm_time_s, tb->comm_time_s },
    { "compute time", ta->compute_time_s, tb->compute_time_s },
    { "step time", ta->step_time_s, tb->step_time_s },
  };
  for (guint i = 0; i < G_N_ELEMENTS (times); i++)
    {
      g_autofree char *a = planner_format_time (times[i].a);
      g_autofree char *b = planner_format_time (times[i].b);
      g_autofree char *d = signed_time (times[i].a, times[i].b);
      append_cost_row (out, times[i].what, a, b, d);
    }
  {
    g_autofree char *a = planner_format_bytes (ta->memory_per_device_bytes);
    g_autofree char *b = planner_format_bytes (tb->memory_per_device_bytes);
    g_autofree char *d = signed_bytes (self->memory_per_device_bytes);
    append_cost_row (out, "memory/device", a, b, d);
  }
  return g_string_free (out, FALSE);
}
