#define G_LOG_DOMAIN "planner-moe"

#include "config.h"

#include <string.h>

#include "planner-moe.h"
#include "planner-redistribute.h"

void
planner_moe_summary_clear (PlannerMoeSummary *summary)
{
  g_clear_pointer (&summary->dispatch.first, g_free);
  g_clear_pointer (&summary->combine.first, g_free);
  memset (summary, 0, sizeof *summary);
}

/* Every redistribution of @tensor, whichever side and consumer. */
static void
add_traffic (PlannerPlan *plan, guint tensor, PlannerMoeTraffic *traffic)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  gboolean first = traffic->first == NULL;
  GString *text = first ? g_string_new (NULL) : NULL;

  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      if (r->tensor != tensor)
        continue;
      traffic->bytes += r->bytes;
      traffic->time_s += r->time_s;
      traffic->n_steps += r->n_steps;
      for (guint k = 0; k < r->n_steps; k++)
        {
          traffic->n_all_to_all += r->steps[k].kind == PLANNER_STEP_ALL_TO_ALL;
          if (text)
            {
              g_autofree char *d = planner_redist_step_describe (&r->steps[k], mesh);
              g_string_append_printf (text, "%s%s", text->len ? " + " : "", d);
            }
        }
    }
  if (text)
    traffic->first = g_string_free (text, FALSE);
}

gboolean
planner_moe_summarize (PlannerPlan *plan, PlannerMoeSummary *summary)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan) && summary != NULL, FALSE);

  PlannerGraph *graph = planner_plan_get_graph (plan);
  memset (summary, 0, sizeof *summary);
  for (guint o = 0; o < planner_graph_get_n_ops (graph); o++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, o);
      if (strstr (op->name, "mlp.experts.") != NULL)
        summary->expert_compute_s += planner_plan_get_op (plan, o)->compute_time_s;
      if (op->type == PLANNER_OP_MOE_COMBINE)
        add_traffic (plan, op->inputs[0], &summary->combine);
      if (op->type != PLANNER_OP_MOE_DISPATCH)
        continue;
      if (summary->n_layers++ == 0)
        {
          const PlannerTensor *gates = planner_graph_get_tensor (graph, op->inputs[1]);
          const PlannerOp *router
              = gates->producer >= 0 ? planner_graph_get_op (graph, gates->producer) : NULL;
          const PlannerTensor *x = planner_graph_get_tensor (graph, op->inputs[0]);
          gint64 top_k
              = router != NULL && router->type == PLANNER_OP_MOE_ROUTER ? router->attrs.ints[0] : 1;
          planner_cost_moe (gates->shape[2], top_k, x->shape[1], op->attrs.ints[0], &summary->cost);
        }
      add_traffic (plan, op->outputs[0], &summary->dispatch);
    }
  if (summary->n_layers == 0)
    planner_moe_summary_clear (summary);
  return summary->n_layers > 0;
}

static void
describe_traffic (GString *s, const char *what, guint n_layers, const PlannerMoeTraffic *t)
{
  g_autofree char *bytes = planner_format_bytes (t->bytes);
  g_autofree char *time = planner_format_time (t->time_s);

  if (t->n_steps == 0)
    {
      g_string_append_printf (s, "  %-14s no communication (the experts' layout is the tokens')\n",
                              what);
      return;
    }
  g_string_append_printf (s,
                          "  %-14s %u steps (%u AllToAll) in %u layers, %s, %s per device; "
                          "layer 0: %s\n",
                          what, t->n_steps, t->n_all_to_all, n_layers, bytes, time, t->first);
}

char *
planner_moe_describe (PlannerPlan *plan)
{
  PlannerMoeSummary m;

  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  if (!planner_moe_summarize (plan, &m))
    return NULL;

  const PlannerCostMoe *c = &m.cost;
  GString *s = g_string_new (NULL);
  g_autofree char *compute = planner_format_time (m.expert_compute_s);
  g_string_append_printf (s,
                          "Experts:         %u MoE layers, %" G_GINT64_FORMAT
                          " experts, top %" G_GINT64_FORMAT "; capacity %" G_GINT64_FORMAT
                          " slots per expert and sequence of %" G_GINT64_FORMAT
                          " tokens = capacity factor %.4g x the %.4g an expert gets at "
                          "perfect balance\n",
                          m.n_layers, c->experts, c->top_k, c->capacity, c->tokens,
                          c->capacity_factor, c->balanced_load);
  if (c->capacity >= c->tokens) /* a slot for every token: nothing can drop */
    g_string_append_printf (s,
                            "  %-14s dropless (a slot for every token of the sequence): every "
                            "slot is sent and computed, used or not, %.1f%% empty at perfect "
                            "balance; no imbalance drops a token\n",
                            "load balance", 100.0 * c->padding);
  else
    g_string_append_printf (s,
                            "  %-14s every slot is sent and computed, used or not: %.1f%% empty "
                            "at perfect balance; an expert sent more than %.4gx its share drops "
                            "the rest (2x: %.1f%%, 4x: %.1f%% of its tokens)\n",
                            "load balance", 100.0 * c->padding, c->capacity_factor,
                            100.0 * planner_cost_moe_dropped (c, 2.0),
                            100.0 * planner_cost_moe_dropped (c, 4.0));
  describe_traffic (s, "dispatch", m.n_layers, &m.dispatch);
  describe_traffic (s, "combine", m.n_layers, &m.combine);
  g_string_append_printf (s, "  %-14s %s per device, forward\n", "expert compute", compute);
  planner_moe_summary_clear (&m);
  return g_string_free (s, FALSE);
}

static JsonNode *
traffic_json (const PlannerMoeTraffic *t)
{
  JsonObject *o = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_int_member (o, "steps", t->n_steps);
  json_object_set_int_member (o, "all_to_all", t->n_all_to_all);
  json_object_set_int_member (o, "bytes", (gint64)t->bytes);
  json_object_set_double_member (o, "time_us", t->time_s * 1e6);
  json_object_set_string_member (o, "layer0", t->first ? t->first : "");
  json_node_take_object (node, o);
  return node;
}

JsonNode *
planner_moe_to_json (PlannerPlan *plan)
{
  PlannerMoeSummary m;

  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  if (!planner_moe_summarize (plan, &m))
    return NULL;

  JsonObject *o = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);
  json_object_set_int_member (o, "layers", m.n_layers);
  json_object_set_int_member (o, "experts", m.cost.experts);
  json_object_set_int_member (o, "top_k", m.cost.top_k);
  json_object_set_int_member (o, "tokens_per_group", m.cost.tokens);
  json_object_set_int_member (o, "capacity", m.cost.capacity);
  json_object_set_double_member (o, "capacity_factor", m.cost.capacity_factor);
  json_object_set_double_member (o, "balanced_load", m.cost.balanced_load);
  json_object_set_double_member (o, "padding", m.cost.padding);
  json_object_set_double_member (o, "dropped_at_2x", planner_cost_moe_dropped (&m.cost, 2.0));
  json_object_set_member (o, "dispatch", traffic_json (&m.dispatch));
  json_object_set_member (o, "combine", traffic_json (&m.combine));
  json_object_set_double_member (o, "expert_compute_us", m.expert_compute_s * 1e6);
  json_node_take_object (node, o);
  planner_moe_summary_clear (&m);
  return node;
}
