#define G_LOG_DOMAIN "planner-plan-json"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-json.h"
#include "planner-model-private.h"
#include "planner-model.h"
#include "planner-plan-json.h"
#include "planner-pin.h"
#include "planner-pipeline.h"
#include "planner-plan-private.h"

/* ---- plan -> JSON ---- */

/* Factors are named by the rule; a name the rule repeats (need-replication "ri" per dim of a
 * Reshape) is written "name#index" so that reading it back is exact. */
static char *
factor_key (const PlannerOpRule *rule, guint f)
{
  for (guint g = 0; g < rule->n_factors; g++)
    if (g != f && strcmp (rule->factors[g].name, rule->factors[f].name) == 0)
      return g_strdup_printf ("%s#%u", rule->factors[f].name, f);
  return g_strdup (rule->factors[f].name);
}

static void
add_axes (JsonBuilder *b, const char *member, const guint8 *axes, guint n, const PlannerMesh *mesh)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    json_builder_add_string_value (b, mesh->names[axes[i]]);
  json_builder_end_array (b);
}

static void
add_axis_mask (JsonBuilder *b, const char *member, guint32 mask, const PlannerMesh *mesh)
{
  guint8 axes[PLANNER_MAX_AXES];
  guint n = 0;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (mask & (1u << a))
      axes[n++] = (guint8)a;
  add_axes (b, member, axes, n, mesh);
}

static void
add_layout (JsonBuilder *b, const char *member, const PlannerLayout *layout,
            const PlannerMesh *mesh)
{
  g_autofree char *text = planner_layout_to_string (layout, mesh);
  planner_json_add_string (b, member, text);
}

static char *
layouts_to_string (const PlannerLayout *layouts, guint n, const PlannerMesh *mesh)
{
  GString *s = g_string_new (NULL);
  for (guint k = 0; k < n; k++)
    {
      g_autofree char *text = planner_layout_to_string (&layouts[k], mesh);
      g_string_append_printf (s, "%s%s", k ? "," : "", text);
    }
  return g_string_free (s, FALSE);
}

static void
add_strategy (JsonBuilder *b, const char *member, const PlannerStrategy *s, const PlannerOp *op,
              const PlannerMesh *mesh)
{
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  planner_strategy_layouts (s, &op->rule, mesh, in, out);
  g_autofree char *inputs = layouts_to_string (in, op->n_inputs, mesh);
  g_autofree char *outputs = layouts_to_string (out, op->n_outputs, mesh);

  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  planner_json_add_string (b, "inputs", inputs);
  planner_json_add_string (b, "outputs", outputs);
  json_builder_set_member_name (b, "factors");
  json_builder_begin_object (b);
  for (guint f = 0; f < op->rule.n_factors; f++)
    if (s->n_axes[f])
      {
        g_autofree char *key = factor_key (&op->rule, f);
        add_axes (b, key, s->axes[f], s->n_axes[f], mesh);
      }
  json_builder_end_object (b);
  if (s->partial)
    {
      add_axis_mask (b, "partial", s->partial, mesh);
      planner_json_add_int (b, "partial_input", s->partial_input);
    }
  json_builder_end_object (b);
}

/* -1 (none) as null. */
static void
add_pipeline_constants (JsonBuilder *b, const PlannerCostConstants *c)
{
  if (c->schedule == PLANNER_SCHEDULE_1F1B && c->micro_batches == 0 && c->virtual_stages <= 1
      && c->stages[0] == '\0')
    return;
  json_builder_set_member_name (b, "pipeline");
  json_builder_begin_object (b);
  planner_json_add_string (b, "schedule", planner_schedule_to_string (c->schedule));
  planner_json_add_int (b, "micro_batches", c->micro_batches);
  planner_json_add_int (b, "virtual_stages", MAX (c->virtual_stages, 1));
  planner_json_add_string (b, "stages", c->stages);
  json_builder_end_object (b);
}

static void
add_index (JsonBuilder *b, const char *member, int value)
{
  if (value >= 0)
    planner_json_add_int (b, member, value);
  else
    planner_json_add_string (b, member, NULL);
}

/* Fields [@first, @end) of planner_total_fields. */
static void
add_total_fields (JsonBuilder *b, const PlannerPlanTotals *t, guint first, guint end)
{
  for (guint i = first; i < end; i++)
    {
      const PlannerTotalField *f = &planner_total_fields[i];
      if (f->kind == PLANNER_TOTAL_COUNT)
        planner_json_add_int (b, f->name, PLANNER_TOTAL (t, f, const guint));
      else if (f->kind == PLANNER_TOTAL_BYTES)
        planner_json_add_int (b, f->name, (gint64)PLANNER_TOTAL (t, f, const guint64));
      else
        planner_json_add_double (b, f->name, PLANNER_TOTAL (t, f, const double));
    }
}

void
planner_plan_json_add_memory (JsonBuilder *b, const PlannerMemory *m)
{
  json_builder_set_member_name (b, "memory");
  json_builder_begin_object (b);
  planner_json_add_int (b, "parameters", (gint64)m->parameters);
  planner_json_add_int (b, "gradients", (gint64)m->gradients);
  planner_json_add_int (b, "optimizer", (gint64)m->optimizer);
  planner_json_add_int (b, "activations", (gint64)m->activations);
  planner_json_add_int (b, "loss", (gint64)m->loss);
  planner_json_add_int (b, "buffers", (gint64)m->buffers);
  planner_json_add_int (b, "total", (gint64)m->total);
  planner_json_add_int (b, "allocator", (gint64)m->allocator);
  planner_json_add_int (b, "allocator_activations", (gint64)m->allocator_activations);
  planner_json_add_int (b, "cuda_context", (gint64)m->cuda_context);
  planner_json_add_int (b, "cublas_workspace", (gint64)m->cublas_workspace);
  planner_json_add_int (b, "nccl_buffers", (gint64)m->nccl_buffers);
  planner_json_add_int (b, "runtime", (gint64)m->runtime);
  planner_json_add_int (b, "reserved_total", (gint64)m->reserved_total);
  json_builder_end_object (b);
}

/* The training model's figures: "memory" (bytes per device) and the step breakdown in
 * seconds x @scale under @breakdown_name, then the micro-batch counts. */
static void
add_training (JsonBuilder *b, const PlannerPlanTotals *t, double scale, const char *breakdown_name)
{
  const PlannerMemory *m = &t->memory;
  const PlannerStepBreakdown *s = &t->breakdown;

  planner_plan_json_add_memory (b, m);
  json_builder_set_member_name (b, breakdown_name);
  json_builder_begin_object (b);
  planner_json_add_double (b, "forward", s->forward * scale);
  planner_json_add_double (b, "backward", s->backward * scale);
  planner_json_add_double (b, "recompute", s->recompute * scale);
  planner_json_add_double (b, "tp_comm_exposed", s->tp_comm_exposed * scale);
  planner_json_add_double (b, "dp_sync_exposed", s->dp_sync_exposed * scale);
  planner_json_add_double (b, "dp_sync_hidden", s->dp_sync_hidden * scale);
  planner_json_add_double (b, "overhead", s->overhead * scale);
  /* Pipeline terms only where there is a pipeline, so other plans read as before. */
  if (s->pipeline_bubble != 0 || s->pipeline_comm != 0)
    {
      planner_json_add_double (b, "pipeline_bubble", s->pipeline_bubble * scale);
      planner_json_add_double (b, "pipeline_comm", s->pipeline_comm * scale);
    }
  json_builder_end_object (b);
  planner_json_add_int (b, "micro_batches", t->micro_batches);
  planner_json_add_int (b, "local_batch", t->local_batch);
}

static const char *
op_name_or_null (PlannerGraph *graph, int op)
{
  return op >= 0 ? planner_graph_get_op (graph, (guint)op)->name : NULL;
}

JsonNode *
planner_plan_summary_to_json (PlannerPlan *plan)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);

  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  add_total_fields (b, t, 0, PLANNER_N_TOTAL_COUNTS);
  json_builder_set_member_name (b, "collectives");
  json_builder_begin_object (b);
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    planner_json_add_int (b, planner_step_kind_to_string (k), t->coll_count[k]);
  json_builder_end_object (b);
  planner_json_add_int (b, "comm_bytes", (gint64)t->comm_bytes);
  planner_json_add_double (b, "comm_time_us", t->comm_time_s * 1e6);
  planner_json_add_double (b, "compute_time_us", t->compute_time_s * 1e6);
  planner_json_add_double (b, "step_time_us", t->step_time_s * 1e6);
  planner_json_add_int (b, "memory_per_device_bytes", (gint64)t->memory_per_device_bytes);
  planner_json_add_int (b, "memory_capacity_bytes",
                        (gint64)planner_hardware_memory_bytes (planner_plan_get_hardware (plan)));
  add_training (b, t, 1e6, "step_breakdown_us");
  /* What the device really holds, the tensors and what the runtime and the allocator take
   * beside them, against its memory (issue 12): a plan whose tensors fit but whose reserved
   * total does not is shown as not fitting. */
  json_builder_set_member_name (b, "fits");
  json_builder_add_boolean_value (
      b, t->memory.reserved_total
             <= planner_hardware_memory_bytes (planner_plan_get_hardware (plan)));
  planner_pipeline_add_json (plan, b);
  planner_json_add_double (b, "propagate_ms", planner_plan_get_propagate_ms (plan));
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

static void
add_totals (JsonBuilder *b, const PlannerPlanTotals *t, const PlannerMesh *mesh)
{
  json_builder_set_member_name (b, "totals");
  json_builder_begin_object (b);
  add_total_fields (b, t, 0, PLANNER_N_TOTAL_COUNTS);
  json_builder_set_member_name (b, "collectives");
  json_builder_begin_object (b);
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      json_builder_set_member_name (b, planner_step_kind_to_string (k));
      json_builder_begin_object (b);
      planner_json_add_int (b, "count", t->coll_count[k]);
      planner_json_add_int (b, "bytes", (gint64)t->coll_bytes[k]);
      planner_json_add_double (b, "time_s", t->coll_time_s[k]);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "axes");
  json_builder_begin_object (b);
  for (guint a = 0; a < mesh->n_axes; a++)
    {
      json_builder_set_member_name (b, mesh->names[a]);
      json_builder_begin_object (b);
      planner_json_add_int (b, "bytes", (gint64)t->axis_bytes[a]);
      planner_json_add_double (b, "time_s", t->axis_time_s[a]);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  add_total_fields (b, t, PLANNER_N_TOTAL_COUNTS, PLANNER_N_TOTAL_FIELDS);
  add_training (b, t, 1.0, "step_breakdown_s");
  json_builder_end_object (b);
}

static void
add_step (JsonBuilder *b, const PlannerRedistStep *st, const PlannerMesh *mesh)
{
  json_builder_begin_object (b);
  planner_json_add_string (b, "kind", planner_step_kind_to_string (st->kind));
  planner_json_add_string (b, "axis", mesh->names[st->axis]);
  add_index (b, "dim", st->dim);
  add_index (b, "dim_to", st->dim_to);
  add_layout (b, "before", &st->before, mesh);
  add_layout (b, "after", &st->after, mesh);
  planner_json_add_int (b, "n_in", (gint64)st->n_in);
  planner_json_add_int (b, "n_out", (gint64)st->n_out);
  planner_json_add_int (b, "bytes", (gint64)st->bytes);
  planner_json_add_double (b, "time_s", st->time_s);
  json_builder_end_object (b);
}

static void
add_redistribution (JsonBuilder *b, PlannerGraph *graph, const PlannerRedistribution *r,
                    const PlannerMesh *mesh)
{
  PlannerRedistPath path = { TRUE, r->n_steps, r->steps, r->bytes, r->time_s };
  g_autofree char *describe = planner_redist_path_describe (&path, mesh);

  json_builder_begin_object (b);
  planner_json_add_string (b, "tensor", planner_graph_get_tensor (graph, r->tensor)->name);
  planner_json_add_string (b, "consumer", op_name_or_null (graph, r->consumer));
  planner_json_add_int (b, "slot", r->slot);
  json_builder_set_member_name (b, "producer_side");
  json_builder_add_boolean_value (b, r->producer_side);
  add_layout (b, "from", &r->from, mesh);
  add_layout (b, "to", &r->to, mesh);
  planner_json_add_int (b, "bytes", (gint64)r->bytes);
  planner_json_add_double (b, "time_s", r->time_s);
  planner_json_add_string (b, "describe", describe);
  json_builder_set_member_name (b, "steps");
  json_builder_begin_array (b);
  for (guint s = 0; s < r->n_steps; s++)
    add_step (b, &r->steps[s], mesh);
  json_builder_end_array (b);
  json_builder_end_object (b);
}

JsonNode *
planner_plan_redistribution_to_json (PlannerPlan *plan, guint i)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_return_val_if_fail (i < planner_plan_get_n_redistributions (plan), NULL);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  add_redistribution (b, planner_plan_get_graph (plan), planner_plan_get_redistribution (plan, i),
                      planner_plan_get_mesh (plan));
  return json_builder_get_root (b);
}

static void
add_op (JsonBuilder *b, PlannerPlan *plan, guint i)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerOp *op = planner_graph_get_op (graph, i);
  const PlannerOpPlan *p = planner_plan_get_op (plan, i);

  json_builder_begin_object (b);
  planner_json_add_string (b, "name", op->name);
  planner_json_add_string (b, "type", planner_op_type_to_string (op->type));
  planner_json_add_string (b, "decision", planner_decision_to_string (p->decision));
  add_index (b, "trace_step", p->trace_step);
  add_index (b, "pin", p->pin);
  add_strategy (b, "strategy", &p->strategy, op, mesh);
  if (p->has_out_layouts)
    {
      json_builder_set_member_name (b, "out_layouts");
      json_builder_begin_array (b);
      for (guint k = 0; k < op->n_outputs; k++)
        add_layout (b, NULL, &p->out_layouts[k], mesh);
      json_builder_end_array (b);
    }
  planner_json_add_double (b, "compute_time_s", p->compute_time_s);
  planner_json_add_double (b, "flops", p->flops);
  json_builder_end_object (b);
}

static void
add_trace_step (JsonBuilder *b, PlannerPlan *plan, const PlannerTraceStep *st)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerOp *op = planner_graph_get_op (graph, st->op);

  json_builder_begin_object (b);
  planner_json_add_int (b, "step", st->index);
  planner_json_add_string (b, "op", op->name);
  add_strategy (b, "strategy", &st->strategy, op, mesh);
  planner_json_add_string (b, "from", op_name_or_null (graph, st->from_op));
  planner_json_add_string (b, "direction", st->forward ? "forward" : "backward");
  planner_json_add_double (b, "edge_cost_s", st->edge_cost_s);
  planner_json_add_int (b, "candidates", st->n_candidates);
  if (st->has_runner_up)
    {
      add_strategy (b, "runner_up", &st->runner_up, op, mesh);
      planner_json_add_double (b, "runner_up_cost_s", st->runner_up_cost_s);
    }
  else
    {
      planner_json_add_string (b, "runner_up", NULL);
    }
  json_builder_end_object (b);
}

static JsonNode *
plan_to_node (PlannerPlan *plan)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerCostConstants *constants = planner_plan_get_constants (plan);
  g_autofree char *hash = planner_graph_hash (graph);
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);
  g_autofree char *hw_text = planner_hardware_to_json (planner_plan_get_hardware (plan));
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) hw_node = planner_json_parse (hw_text, -1, "hardware profile", &error);
  g_assert_no_error (error);
  g_autoptr (JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  planner_json_add_int (b, "shardscope_plan", PLANNER_PLAN_JSON_VERSION);
  planner_json_add_string (b, "name", planner_plan_get_name (plan));
  planner_json_add_string (b, "policy", planner_plan_get_policy (plan));
  json_builder_set_member_name (b, "pins");
  json_builder_begin_array (b);
  const GPtrArray *pins = planner_plan_get_pins (plan);
  for (guint i = 0; i < pins->len; i++)
    json_builder_add_string_value (b, g_ptr_array_index (pins, i));
  json_builder_end_array (b);
  planner_json_add_double (b, "propagate_ms", planner_plan_get_propagate_ms (plan));

  json_builder_set_member_name (b, "model");
  json_builder_begin_object (b);
  planner_json_add_string (b, "name", planner_graph_get_name (graph));
  planner_json_add_string (b, "source", planner_graph_get_source (graph));
  planner_json_add_string (b, "hash", hash);
  planner_json_add_int (b, "ops", planner_graph_get_n_ops (graph));
  planner_json_add_int (b, "tensors", planner_graph_get_n_tensors (graph));
  json_builder_end_object (b);

  planner_json_add_string (b, "mesh", mesh_text);
  planner_json_add_int (b, "devices", (gint64)planner_mesh_n_devices (mesh));
  json_builder_set_member_name (b, "hardware");
  json_builder_add_value (b, g_steal_pointer (&hw_node));
  json_builder_set_member_name (b, "constants");
  json_builder_begin_object (b);
  planner_json_add_double (b, "weight_copies", constants->weight_copies);
  planner_json_add_double (b, "grad_copies", constants->grad_copies);
  planner_json_add_double (b, "optimizer_states", constants->optimizer_states);
  planner_json_add_double (b, "backward_factor", constants->backward_factor);
  planner_json_add_string (b, "optimizer", planner_optimizer_to_string (constants->optimizer));
  planner_json_add_int (b, "zero", constants->zero);
  planner_json_add_string (b, "recompute", planner_recompute_to_string (constants->recompute));
  planner_json_add_string (b, "attention",
                           planner_attention_kernel_to_string (constants->attention));
  planner_json_add_int (b, "micro_batch", constants->micro_batch);
  planner_json_add_double (b, "dp_bucket_MiB", constants->dp_bucket_MiB);
  json_builder_set_member_name (b, "dp_overlap");
  json_builder_add_boolean_value (b, constants->dp_overlap);
  json_builder_set_member_name (b, "no_dropout");
  json_builder_add_boolean_value (b, constants->no_dropout);
  planner_json_add_string (b, "grad_reduce",
                           planner_grad_reduce_to_string (constants->grad_reduce));
  planner_json_add_string (b, "backward_prefetch",
                           planner_backward_prefetch_to_string (constants->backward_prefetch));
  /* The memory options of issue 12, only where one differs from its default, so a plan file
   * without them reads and writes as before. */
  if (constants->loss != PLANNER_LOSS_UNFUSED || constants->rms_norm != PLANNER_NORM_UNFUSED
      || constants->zero_bucket_elements != PLANNER_ZERO_BUCKET_ELEMENTS_DEFAULT)
    {
      planner_json_add_string (b, "loss", planner_loss_kernel_to_string (constants->loss));
      planner_json_add_string (b, "rms_norm", planner_norm_kernel_to_string (constants->rms_norm));
      planner_json_add_double (b, "zero_bucket_elements", constants->zero_bucket_elements);
    }
  add_pipeline_constants (b, constants);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "summary");
  json_builder_add_value (b, planner_plan_summary_to_json (plan));
  add_totals (b, planner_plan_get_totals (plan), mesh);

  json_builder_set_member_name (b, "conflicts");
  json_builder_begin_array (b);
  for (guint i = 0; i < planner_plan_get_n_conflicts (plan); i++)
    {
      const PlannerConflict *c = planner_plan_get_conflict (plan, i);
      json_builder_begin_object (b);
      planner_json_add_string (b, "message", c->message);
      planner_json_add_int (b, "redistribution", c->redistribution);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "ops");
  json_builder_begin_array (b);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    add_op (b, plan, i);
  json_builder_end_array (b);

  json_builder_set_member_name (b, "tensors");
  json_builder_begin_object (b);
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    add_layout (b, planner_graph_get_tensor (graph, t)->name,
                planner_plan_get_tensor_layout (plan, t), mesh);
  json_builder_end_object (b);

  json_builder_set_member_name (b, "redistributions");
  json_builder_begin_array (b);
  for (guint r = 0; r < planner_plan_get_n_redistributions (plan); r++)
    add_redistribution (b, graph, planner_plan_get_redistribution (plan, r), mesh);
  json_builder_end_array (b);

  json_builder_set_member_name (b, "trace");
  json_builder_begin_array (b);
  for (guint i = 0; i < planner_plan_get_n_trace_steps (plan); i++)
    add_trace_step (b, plan, planner_plan_get_trace_step (plan, i));
  json_builder_end_array (b);

  json_builder_end_object (b);
  return json_builder_get_root (b);
}

char *
planner_plan_to_json (PlannerPlan *plan)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_autoptr (JsonNode) root = plan_to_node (plan);
  return planner_json_to_string (root);
}

gboolean
planner_plan_save_json (PlannerPlan *plan, const char *path, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  g_autofree char *text = planner_plan_to_json (plan);
  g_autoptr (GError) local_error = NULL;
  if (!g_file_set_contents (path, text, -1, &local_error))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_IO, "cannot write plan %s: %s", path,
                   local_error->message);
      return FALSE;
    }
  return TRUE;
}

/* ---- JSON -> plan ----
 *
 * Every refusal names the field as a path ("redistributions[3].steps[0].after"). The reader
 * checks what could make a plan inconsistent with its graph or mesh (names, indices, layouts
 * against shapes, strategies against rules, steps that do not lead from one layout to the
 * next); figures are taken as saved. */

typedef struct
{
  PlannerJsonReader json;
  PlannerGraph *graph;
  PlannerMesh mesh;
  PlannerPlan *plan; /* what is read goes into it */
  gboolean has_training; /* totals held the training figures (memory, breakdown) */
} Reader;

static void
reader_clear (Reader *r)
{
  planner_json_reader_clear (&r->json);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Reader, reader_clear)

/* An index below @n, or null for none (-1). */
static gboolean
get_index (Reader *r, JsonObject *object, const char *name, gint64 min, guint n, int *out)
{
  JsonNode *node = planner_json_member (&r->json, object, name);
  gint64 value;

  if (node == NULL)
    return FALSE;
  if (JSON_NODE_HOLDS_NULL (node))
    {
      *out = -1;
      return TRUE;
    }
  if (!planner_json_read_int (&r->json, node, name, min, (gint64)n - 1, &value))
    return FALSE;
  *out = (int)value;
  return TRUE;
}

/* A time, count of FLOPs or constant: never negative. null reads back as what it was written
 * for, a figure too large to be finite. */
static gboolean
get_double (Reader *r, JsonObject *object, const char *name, double *out)
{
  JsonNode *node = planner_json_member (&r->json, object, name);

  if (node != NULL && JSON_NODE_HOLDS_NULL (node))
    {
      *out = INFINITY;
      return TRUE;
    }
  if (node == NULL || !planner_json_read_number (&r->json, node, name, out))
    return FALSE;
  if (*out < 0)
    return planner_json_fail (&r->json, name, "must be >= 0, got %g", *out);
  return TRUE;
}

/* Refuses members of @object other than @known (NULL-terminated). */
static gboolean
known_members (Reader *r, JsonObject *object, const char *const *known)
{
  return planner_json_check_members (&r->json, object, known);
}

static gboolean
layout_node (Reader *r, JsonNode *node, const char *name, const PlannerTensor *t,
             PlannerLayout *out)
{
  const char *text;
  g_autoptr (GError) local = NULL;
  if (!planner_json_read_string (&r->json, node, name, FALSE, &text))
    return FALSE;
  if (!planner_layout_parse (text, &r->mesh, out, &local)
      || !planner_layout_validate (out, &r->mesh, t->shape, t->rank, t->name, &local))
    return planner_json_fail (&r->json, name, "is refused: %s", local->message);
  return TRUE;
}

static gboolean
get_layout (Reader *r, JsonObject *object, const char *name, const PlannerTensor *t,
            PlannerLayout *out)
{
  JsonNode *node = planner_json_member (&r->json, object, name);
  return node && layout_node (r, node, name, t, out);
}

static gboolean
get_op (Reader *r, JsonObject *object, const char *name, gboolean nullable, int *out)
{
  const char *op_name;
  if (!planner_json_get_string (&r->json, object, name, nullable, &op_name))
    return FALSE;
  *out = op_name ? planner_graph_find_op (r->graph, op_name) : -1;
  if (op_name && *out < 0)
    return planner_json_fail (&r->json, name, "names no op of the model: '%s'", op_name);
  return TRUE;
}

static gboolean
axis_node (Reader *r, JsonNode *node, const char *name, guint *axis)
{
  const char *axis_name;
  if (!planner_json_read_string (&r->json, node, name, FALSE, &axis_name))
    return FALSE;
  int a = planner_mesh_axis_index (&r->mesh, axis_name);
  if (a < 0)
    return planner_json_fail (&r->json, name, "names no axis of the mesh: '%s'", axis_name);
  *axis = (guint)a;
  return TRUE;
}

/* A list of axis names, in order. */
static gboolean
get_axes (Reader *r, JsonObject *object, const char *name, guint8 *axes, guint *n)
{
  JsonArray *array = planner_json_get_array (&r->json, object, name);
  if (array == NULL)
    return FALSE;
  guint len = json_array_get_length (array);
  if (len > r->mesh.n_axes)
    return planner_json_fail (&r->json, name, "lists %u axes; the mesh has %u", len,
                              r->mesh.n_axes);
  gsize mark = planner_json_push (&r->json, "%s", name);
  for (guint i = 0; i < len; i++)
    {
      g_autofree char *index = g_strdup_printf ("[%u]", i);
      guint axis;
      if (!axis_node (r, json_array_get_element (array, i), index, &axis))
        return FALSE;
      axes[i] = (guint8)axis;
    }
  planner_json_pop (&r->json, mark);
  *n = len;
  return TRUE;
}

static int
find_factor (const PlannerOpRule *rule, const char *key)
{
  const char *hash = strchr (key, '#');
  if (hash)
    {
      char *end;
      guint64 f = g_ascii_strtoull (hash + 1, &end, 10);
      if (*end || end == hash + 1 || f >= rule->n_factors
          || strncmp (rule->factors[f].name, key, hash - key) != 0
          || rule->factors[f].name[hash - key] != '\0')
        return -1;
      return (int)f;
    }
  int found = -1;
  for (guint f = 0; f < rule->n_factors; f++)
    if (strcmp (rule->factors[f].name, key) == 0)
      {
        if (found >= 0)
          return -1; /* ambiguous: the writer says name#index */
        found = (int)f;
      }
  return found;
}

static gboolean
get_strategy (Reader *r, JsonObject *object, const char *name, guint op_index, PlannerStrategy *s)
{
  const PlannerOp *op = planner_graph_get_op (r->graph, op_index);
  gsize mark, mark_factors;
  static const char *const known[]
      = { "inputs", "outputs", "factors", "partial", "partial_input", NULL };
  JsonObject *o = planner_json_enter_member (&r->json, object, name, &mark);
  if (o == NULL || !known_members (r, o, known))
    return FALSE;
  JsonObject *factors = planner_json_enter_member (&r->json, o, "factors", &mark_factors);
  if (factors == NULL)
    return FALSE;

  planner_strategy_init (s);
  JsonObjectIter iter;
  const char *key;
  JsonNode *value;
  json_object_iter_init_ordered (&iter, factors);
  while (json_object_iter_next_ordered (&iter, &key, &value))
    {
      int f = find_factor (&op->rule, key);
      if (f < 0)
        {
          g_autoptr (GString) known = g_string_new (NULL);
          for (guint g = 0; g < op->rule.n_factors; g++)
            g_string_append_printf (known, "%s%s", g ? ", " : "", op->rule.factors[g].name);
          return planner_json_fail (&r->json, key, "is not a factor of %s (%s: %s)", op->name,
                                    planner_op_type_to_string (op->type), known->str);
        }
      guint n;
      if (!get_axes (r, factors, key, s->axes[f], &n))
        return FALSE;
      s->n_axes[f] = (guint8)n;
    }
  planner_json_pop (&r->json, mark_factors);

  if (json_object_has_member (o, "partial"))
    {
      guint8 axes[PLANNER_MAX_AXES];
      guint n;
      gint64 input;
      if (!get_axes (r, o, "partial", axes, &n)
          || !planner_json_get_int (&r->json, o, "partial_input", 0, (gint64)op->n_inputs - 1,
                                    &input))
        return FALSE;
      for (guint i = 0; i < n; i++)
        s->partial |= 1u << axes[i];
      s->partial_input = (guint8)input;
    }

  const char *names[PLANNER_MAX_OPERANDS + 1];
  for (guint k = 0; k < op->n_inputs; k++)
    names[k] = planner_graph_get_tensor (r->graph, op->inputs[k])->name;
  names[op->n_inputs] = NULL;
  g_autoptr (GError) local = NULL;
  if (!planner_strategy_validate (s, &op->rule, &r->mesh, op->name, names, &local))
    return planner_json_fail (&r->json, NULL, "is refused: %s", local->message);
  /* The layouts are written for people; the factors say the same, and a file where they
   * differ was edited in one place only. A hand-written file may name an axis of size 1 in
   * both (as written, or the canonical form without it); the plan keeps the canonical form. */
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  planner_strategy_layouts (s, &op->rule, &r->mesh, in, out);
  g_autofree char *inputs = layouts_to_string (in, op->n_inputs, &r->mesh);
  g_autofree char *outputs = layouts_to_string (out, op->n_outputs, &r->mesh);
  planner_strategy_normalize (s, &r->mesh);
  planner_strategy_layouts (s, &op->rule, &r->mesh, in, out);
  g_autofree char *canonical_inputs = layouts_to_string (in, op->n_inputs, &r->mesh);
  g_autofree char *canonical_outputs = layouts_to_string (out, op->n_outputs, &r->mesh);
  const char *text;
  if (!planner_json_get_string (&r->json, o, "inputs", FALSE, &text))
    return FALSE;
  if (strcmp (text, inputs) != 0 && strcmp (text, canonical_inputs) != 0)
    return planner_json_fail (&r->json, "inputs",
                              "is \"%s\" but the factors give \"%s\"; edit the factors, the "
                              "layouts follow from them",
                              text, canonical_inputs);
  if (!planner_json_get_string (&r->json, o, "outputs", FALSE, &text))
    return FALSE;
  if (strcmp (text, outputs) != 0 && strcmp (text, canonical_outputs) != 0)
    return planner_json_fail (&r->json, "outputs",
                              "is \"%s\" but the factors give \"%s\"; edit the factors, the "
                              "layouts follow from them",
                              text, canonical_outputs);
  planner_json_pop (&r->json, mark);
  return TRUE;
}

/* constants.pipeline (issue 18): written only when an option differs from its default. */
static gboolean
read_pipeline_constants (Reader *r, JsonObject *constants, PlannerCostConstants *c)
{
  gsize mark;
  static const char *const known[]
      = { "schedule", "micro_batches", "virtual_stages", "stages", NULL };
  JsonObject *o = planner_json_enter_member (&r->json, constants, "pipeline", &mark);
  const char *text;
  gint64 value;
  if (o == NULL || !known_members (r, o, known))
    return FALSE;
  if (!planner_json_get_string (&r->json, o, "schedule", FALSE, &text))
    return FALSE;
  if (!planner_schedule_from_string (text, &c->schedule))
    return planner_json_fail (&r->json, "schedule",
                              "must be \"1f1b\", \"gpipe\" or \"interleaved\"");
  if (!planner_json_get_int (&r->json, o, "micro_batches", 0, G_MAXINT, &value))
    return FALSE;
  c->micro_batches = (guint)value;
  if (!planner_json_get_int (&r->json, o, "virtual_stages", 1, G_MAXINT, &value))
    return FALSE;
  c->virtual_stages = (guint)value;
  if (!planner_json_get_string (&r->json, o, "stages", FALSE, &text))
    return FALSE;
  if (g_strlcpy (c->stages, text, sizeof c->stages) >= sizeof c->stages)
    return planner_json_fail (&r->json, "stages", "is longer than %d characters",
                              PLANNER_MAX_STAGES_TEXT - 1);
  planner_json_pop (&r->json, mark);
  return TRUE;
}

static gboolean
read_constants (Reader *r, JsonObject *root, PlannerCostConstants *c)
{
  gsize mark;
  static const char *const known[] = { "weight_copies",
                                       "grad_copies",
                                       "optimizer_states",
                                       "backward_factor",
                                       "optimizer",
                                       "zero",
                                       "recompute",
                                       "attention",
                                       "micro_batch",
                                       "dp_bucket_MiB",
                                       "dp_overlap",
                                       "no_dropout",
                                       "grad_reduce",
                                       "backward_prefetch",
                                       "pipeline",
                                       "loss",
                                       "rms_norm",
                                       "zero_bucket_elements",
                                       NULL };
  JsonObject *o = planner_json_enter_member (&r->json, root, "constants", &mark);
  if (o == NULL || !known_members (r, o, known)
      || !get_double (r, o, "weight_copies", &c->weight_copies)
      || !get_double (r, o, "grad_copies", &c->grad_copies)
      || !get_double (r, o, "optimizer_states", &c->optimizer_states)
      || !get_double (r, o, "backward_factor", &c->backward_factor))
    return FALSE;
  /* The training options came later: a plan file without them has the defaults. */
  const char *text;
  gint64 value;
  if (json_object_has_member (o, "optimizer"))
    {
      if (!planner_json_get_string (&r->json, o, "optimizer", FALSE, &text))
        return FALSE;
      if (!planner_optimizer_from_string (text, &c->optimizer))
        return planner_json_fail (&r->json, "optimizer", "must be \"adam\" or \"sgd\"");
    }
  if (json_object_has_member (o, "zero"))
    {
      if (!planner_json_get_int (&r->json, o, "zero", 0, 3, &value))
        return FALSE;
      c->zero = (guint)value;
    }
  if (json_object_has_member (o, "recompute"))
    {
      if (!planner_json_get_string (&r->json, o, "recompute", FALSE, &text))
        return FALSE;
      if (!planner_recompute_from_string (text, &c->recompute))
        return planner_json_fail (&r->json, "recompute",
                                  "must be \"none\", \"selective\" or \"full\"");
    }
  if (json_object_has_member (o, "attention"))
    {
      if (!planner_json_get_string (&r->json, o, "attention", FALSE, &text))
        return FALSE;
      if (!planner_attention_kernel_from_string (text, &c->attention))
        return planner_json_fail (&r->json, "attention",
                                  "must be \"flash\", \"flash1\" or \"unfused\"");
    }
  if (json_object_has_member (o, "micro_batch"))
    {
      if (!planner_json_get_int (&r->json, o, "micro_batch", 0, G_MAXINT, &value))
        return FALSE;
      c->micro_batch = (guint)value;
    }
  if (json_object_has_member (o, "dp_bucket_MiB"))
    {
      if (!get_double (r, o, "dp_bucket_MiB", &c->dp_bucket_MiB))
        return FALSE;
      if (!(c->dp_bucket_MiB > 0) || !isfinite (c->dp_bucket_MiB))
        return planner_json_fail (&r->json, "dp_bucket_MiB", "must be > 0");
    }
  if (json_object_has_member (o, "dp_overlap"))
    {
      JsonNode *node = json_object_get_member (o, "dp_overlap");
      if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
        return planner_json_fail (&r->json, "dp_overlap", "must be true or false");
      c->dp_overlap = json_node_get_boolean (node);
    }
  if (json_object_has_member (o, "no_dropout"))
    {
      JsonNode *node = json_object_get_member (o, "no_dropout");
      if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
        return planner_json_fail (&r->json, "no_dropout", "must be true or false");
      c->no_dropout = json_node_get_boolean (node);
    }
  if (json_object_has_member (o, "grad_reduce"))
    {
      if (!planner_json_get_string (&r->json, o, "grad_reduce", FALSE, &text))
        return FALSE;
      if (!planner_grad_reduce_from_string (text, &c->grad_reduce))
        return planner_json_fail (&r->json, "grad_reduce", "must be \"param\" or \"f32\"");
    }
  if (json_object_has_member (o, "backward_prefetch"))
    {
      if (!planner_json_get_string (&r->json, o, "backward_prefetch", FALSE, &text))
        return FALSE;
      if (!planner_backward_prefetch_from_string (text, &c->backward_prefetch))
        return planner_json_fail (&r->json, "backward_prefetch", "must be \"pre\" or \"post\"");
    }
  if (json_object_has_member (o, "loss"))
    {
      if (!planner_json_get_string (&r->json, o, "loss", FALSE, &text))
        return FALSE;
      if (!planner_loss_kernel_from_string (text, &c->loss))
        return planner_json_fail (&r->json, "loss", "must be \"unfused\" or \"fused\"");
    }
  if (json_object_has_member (o, "rms_norm"))
    {
      if (!planner_json_get_string (&r->json, o, "rms_norm", FALSE, &text))
        return FALSE;
      if (!planner_norm_kernel_from_string (text, &c->rms_norm))
        return planner_json_fail (&r->json, "rms_norm", "must be \"unfused\" or \"fused\"");
    }
  if (json_object_has_member (o, "zero_bucket_elements"))
    {
      if (!get_double (r, o, "zero_bucket_elements", &c->zero_bucket_elements))
        return FALSE;
      if (!(c->zero_bucket_elements >= 0) || !(c->zero_bucket_elements <= 1e15))
        return planner_json_fail (&r->json, "zero_bucket_elements", "must be in [0, 1e15]");
    }
  if (json_object_has_member (o, "pipeline") && !read_pipeline_constants (r, o, c))
    return FALSE;
  planner_json_pop (&r->json, mark);
  return TRUE;
}

static gboolean
get_u64_member (Reader *r, JsonObject *o, const char *name, guint64 *out)
{
  return planner_json_get_uint64 (&r->json, o, name, out);
}

/* The training figures of totals; FALSE with *present FALSE when the file predates them. */
static gboolean
read_training (Reader *r, JsonObject *o, PlannerPlanTotals *t, gboolean *present)
{
  static const char *const known_memory[]
      = { "parameters",   "gradients",        "optimizer",    "activations",
          "loss",         "buffers",          "total",        "allocator",
          "allocator_activations", "cuda_context", "cublas_workspace", "nccl_buffers",
          "runtime",      "reserved_total",   NULL };
  static const char *const reserved_parts[]
      = { "allocator", "allocator_activations", "cuda_context", "cublas_workspace",
          "nccl_buffers", NULL };
  static const char *const known_breakdown[]
      = { "forward",         "backward",       "recompute", "tp_comm_exposed",
          "dp_sync_exposed", "dp_sync_hidden", "overhead",  "pipeline_bubble",
          "pipeline_comm",   NULL };
  gsize m;
  *present = json_object_has_member (o, "memory");
  if (!*present)
    return TRUE;
  JsonObject *mem = planner_json_enter_member (&r->json, o, "memory", &m);
  if (mem == NULL || !known_members (r, mem, known_memory) || !get_u64_member (r, mem, "parameters", &t->memory.parameters)
      || !get_u64_member (r, mem, "gradients", &t->memory.gradients)
      || !get_u64_member (r, mem, "optimizer", &t->memory.optimizer)
      || !get_u64_member (r, mem, "activations", &t->memory.activations)
      || !get_u64_member (r, mem, "total", &t->memory.total))
    return FALSE;
  /* Added with issue 12: absent from older files (0). */
  if ((json_object_has_member (mem, "loss") && !get_u64_member (r, mem, "loss", &t->memory.loss))
      || (json_object_has_member (mem, "buffers")
          && !get_u64_member (r, mem, "buffers", &t->memory.buffers)))
    return FALSE;
  /* Added with issue 12's reserved estimate: absent from older files (0). */
  guint64 *parts[] = { &t->memory.allocator, &t->memory.allocator_activations,
                       &t->memory.cuda_context, &t->memory.cublas_workspace,
                       &t->memory.nccl_buffers };
  for (guint k = 0; reserved_parts[k] != NULL; k++)
    if (json_object_has_member (mem, reserved_parts[k])
        && !get_u64_member (r, mem, reserved_parts[k], parts[k]))
      return FALSE;
  t->memory.runtime
      = t->memory.cuda_context + t->memory.cublas_workspace + t->memory.nccl_buffers;
  t->memory.reserved_total = t->memory.total + t->memory.allocator + t->memory.runtime;
  planner_json_pop (&r->json, m);
  JsonObject *s = planner_json_enter_member (&r->json, o, "step_breakdown_s", &m);
  if (s == NULL || !known_members (r, s, known_breakdown) || !get_double (r, s, "forward", &t->breakdown.forward)
      || !get_double (r, s, "backward", &t->breakdown.backward)
      || !get_double (r, s, "recompute", &t->breakdown.recompute)
      || !get_double (r, s, "tp_comm_exposed", &t->breakdown.tp_comm_exposed)
      || !get_double (r, s, "dp_sync_exposed", &t->breakdown.dp_sync_exposed)
      || !get_double (r, s, "dp_sync_hidden", &t->breakdown.dp_sync_hidden)
      || !get_double (r, s, "overhead", &t->breakdown.overhead)
      || (json_object_has_member (s, "pipeline_bubble")
          && !get_double (r, s, "pipeline_bubble", &t->breakdown.pipeline_bubble))
      || (json_object_has_member (s, "pipeline_comm")
          && !get_double (r, s, "pipeline_comm", &t->breakdown.pipeline_comm)))
    return FALSE;
  planner_json_pop (&r->json, m);
  return planner_json_get_uint (&r->json, o, "micro_batches", &t->micro_batches)
         && planner_json_get_uint (&r->json, o, "local_batch", &t->local_batch);
}

/* Fields [@first, @end) of planner_total_fields. */
static gboolean
get_total_fields (Reader *r, JsonObject *o, PlannerPlanTotals *t, guint first, guint end)
{
  for (guint i = first; i < end; i++)
    {
      const PlannerTotalField *f = &planner_total_fields[i];
      gboolean ok;
      if (f->kind == PLANNER_TOTAL_COUNT)
        ok = planner_json_get_uint (&r->json, o, f->name, &PLANNER_TOTAL (t, f, guint));
      else if (f->kind == PLANNER_TOTAL_BYTES)
        ok = planner_json_get_uint64 (&r->json, o, f->name, &PLANNER_TOTAL (t, f, guint64));
      else
        ok = get_double (r, o, f->name, &PLANNER_TOTAL (t, f, double));
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

static gboolean
read_totals (Reader *r, JsonObject *root, PlannerPlanTotals *t)
{
  gsize mark, mark_kinds, mark_axes, m;
  static const char *const known_kind[] = { "count", "bytes", "time_s", NULL };
  static const char *const known_axis[] = { "bytes", "time_s", NULL };
  const char *known[PLANNER_N_TOTAL_FIELDS + 7];
  const char *kind_names[PLANNER_N_STEP_KINDS + 1];
  const char *axis_names[PLANNER_MAX_AXES + 1];
  for (guint i = 0; i < PLANNER_N_TOTAL_FIELDS; i++)
    known[i] = planner_total_fields[i].name;
  known[PLANNER_N_TOTAL_FIELDS] = "collectives";
  known[PLANNER_N_TOTAL_FIELDS + 1] = "axes";
  /* The training figures (read_training()). */
  known[PLANNER_N_TOTAL_FIELDS + 2] = "memory";
  known[PLANNER_N_TOTAL_FIELDS + 3] = "step_breakdown_s";
  known[PLANNER_N_TOTAL_FIELDS + 4] = "micro_batches";
  known[PLANNER_N_TOTAL_FIELDS + 5] = "local_batch";
  known[PLANNER_N_TOTAL_FIELDS + 6] = NULL;
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    kind_names[k] = planner_step_kind_to_string (k);
  kind_names[PLANNER_N_STEP_KINDS] = NULL;
  for (guint a = 0; a < r->mesh.n_axes; a++)
    axis_names[a] = r->mesh.names[a];
  axis_names[r->mesh.n_axes] = NULL;

  JsonObject *o = planner_json_enter_member (&r->json, root, "totals", &mark);
  if (o == NULL || !known_members (r, o, known))
    return FALSE;
  memset (t, 0, sizeof *t);
  if (!get_total_fields (r, o, t, 0, PLANNER_N_TOTAL_COUNTS))
    return FALSE;

  JsonObject *kinds = planner_json_enter_member (&r->json, o, "collectives", &mark_kinds);
  if (kinds == NULL || !known_members (r, kinds, kind_names))
    return FALSE;
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      JsonObject *c
          = planner_json_enter_member (&r->json, kinds, planner_step_kind_to_string (k), &m);
      if (c == NULL || !known_members (r, c, known_kind)
          || !planner_json_get_uint (&r->json, c, "count", &t->coll_count[k])
          || !planner_json_get_uint64 (&r->json, c, "bytes", &t->coll_bytes[k])
          || !get_double (r, c, "time_s", &t->coll_time_s[k]))
        return FALSE;
      planner_json_pop (&r->json, m);
    }
  planner_json_pop (&r->json, mark_kinds);

  JsonObject *axes = planner_json_enter_member (&r->json, o, "axes", &mark_axes);
  if (axes == NULL || !known_members (r, axes, axis_names))
    return FALSE;
  for (guint a = 0; a < r->mesh.n_axes; a++)
    {
      JsonObject *c = planner_json_enter_member (&r->json, axes, r->mesh.names[a], &m);
      if (c == NULL || !known_members (r, c, known_axis)
          || !planner_json_get_uint64 (&r->json, c, "bytes", &t->axis_bytes[a])
          || !get_double (r, c, "time_s", &t->axis_time_s[a]))
        return FALSE;
      planner_json_pop (&r->json, m);
    }
  planner_json_pop (&r->json, mark_axes);

  if (!get_total_fields (r, o, t, PLANNER_N_TOTAL_COUNTS, PLANNER_N_TOTAL_FIELDS)
      || !read_training (r, o, t, &r->has_training))
    return FALSE;
  planner_json_pop (&r->json, mark);
  return TRUE;
}

/* The array member @name of @root, each element read by @read with the Reader as data. */
static gboolean
read_list (Reader *r, JsonObject *root, const char *name, PlannerJsonElementFunc read)
{
  JsonArray *list = planner_json_get_array (&r->json, root, name);
  return list != NULL && planner_json_read_elements (&r->json, list, name, read, r);
}

static gboolean
read_trace_step (PlannerJsonReader *json, JsonObject *o, guint i, gpointer data)
{
  static const char *const known[]
      = { "step",       "op",        "strategy",         "from", "direction", "edge_cost_s",
          "candidates", "runner_up", "runner_up_cost_s", NULL };
  Reader *r = data;
  PlannerTraceStep st = { 0 };
  int op, from;
  const char *direction;
  if (!known_members (r, o, known) || !planner_json_get_uint (&r->json, o, "step", &st.index)
      || !get_op (r, o, "op", FALSE, &op)
      || !get_strategy (r, o, "strategy", (guint)op, &st.strategy)
      || !get_op (r, o, "from", TRUE, &from)
      || !planner_json_get_string (&r->json, o, "direction", FALSE, &direction)
      || !get_double (r, o, "edge_cost_s", &st.edge_cost_s)
      || !planner_json_get_uint (&r->json, o, "candidates", &st.n_candidates))
    return FALSE;
  if (st.index != i)
    return planner_json_fail (&r->json, "step", "is %u but this is step %u of the trace", st.index,
                              i);
  if (strcmp (direction, "forward") != 0 && strcmp (direction, "backward") != 0)
    return planner_json_fail (&r->json, "direction",
                              "must be \"forward\" or \"backward\", got \"%s\"", direction);
  st.op = (guint)op;
  st.from_op = from;
  st.forward = strcmp (direction, "forward") == 0;
  JsonNode *runner_up = planner_json_member (&r->json, o, "runner_up");
  if (runner_up == NULL)
    return FALSE;
  st.has_runner_up = !JSON_NODE_HOLDS_NULL (runner_up);
  if (st.has_runner_up
      && (!get_strategy (r, o, "runner_up", st.op, &st.runner_up)
          || !get_double (r, o, "runner_up_cost_s", &st.runner_up_cost_s)))
    return FALSE;
  planner_plan_append_trace_step (r->plan, &st);
  return TRUE;
}

static gboolean
read_op (PlannerJsonReader *json, JsonObject *o, guint i, gpointer data)
{
  static const char *const known[]
      = { "name",     "type",        "decision",       "trace_step", "pin",
          "strategy", "out_layouts", "compute_time_s", "flops",      NULL };
  Reader *r = data;
  guint n_pins = planner_plan_get_pins (r->plan)->len;
  guint n_trace = planner_plan_get_n_trace_steps (r->plan);
  const PlannerOp *op = planner_graph_get_op (r->graph, i);
  const char *name, *decision, *type;
  PlannerOpPlan p = { 0 };

  if (!known_members (r, o, known) || !planner_json_get_string (&r->json, o, "name", FALSE, &name))
    return FALSE;
  if (strcmp (name, op->name) != 0)
    return planner_json_fail (&r->json, "name", "is '%s' but op %u of the model is '%s'", name, i,
                              op->name);
  if (!planner_json_get_string (&r->json, o, "type", FALSE, &type))
    return FALSE;
  if (strcmp (type, planner_op_type_to_string (op->type)) != 0)
    return planner_json_fail (&r->json, "type", "is '%s' but op %s of the model is a %s", type,
                              op->name, planner_op_type_to_string (op->type));
  if (!planner_json_get_string (&r->json, o, "decision", FALSE, &decision))
    return FALSE;
  if (!planner_decision_from_string (decision, &p.decision))
    return planner_json_fail (&r->json, "decision",
                              "must be pinned, propagated or defaulted, got \"%s\"", decision);
  if (!get_index (r, o, "trace_step", 0, n_trace, &p.trace_step)
      || !get_index (r, o, "pin", 0, n_pins, &p.pin)
      || !get_strategy (r, o, "strategy", i, &p.strategy)
      || !get_double (r, o, "compute_time_s", &p.compute_time_s)
      || !get_double (r, o, "flops", &p.flops))
    return FALSE;
  /* A propagated op has the trace step that decided it, a pinned op the pin; the others
   * neither. */
  if ((p.decision == PLANNER_DECIDED_PROPAGATED) != (p.trace_step >= 0)
      || (p.trace_step >= 0 && planner_plan_get_trace_step (r->plan, (guint)p.trace_step)->op != i))
    return planner_json_fail (&r->json, "trace_step",
                              "must be the trace step that decided %s when it is propagated, "
                              "and null otherwise",
                              op->name);
  if ((p.decision == PLANNER_DECIDED_PINNED) != (p.pin >= 0))
    return planner_json_fail (&r->json, "pin",
                              "must be the index of the pin that fixed %s when it is pinned, and "
                              "null otherwise",
                              op->name);
  if (json_object_has_member (o, "out_layouts"))
    {
      JsonArray *outs = planner_json_get_array (&r->json, o, "out_layouts");
      if (outs == NULL)
        return FALSE;
      if (json_array_get_length (outs) != op->n_outputs)
        return planner_json_fail (&r->json, "out_layouts", "gives %u layouts; %s has %u outputs",
                                  json_array_get_length (outs), op->name, op->n_outputs);
      gsize m = planner_json_push (&r->json, "out_layouts");
      for (guint k = 0; k < op->n_outputs; k++)
        {
          g_autofree char *index = g_strdup_printf ("[%u]", k);
          if (!layout_node (r, json_array_get_element (outs, k), index,
                            planner_graph_get_tensor (r->graph, op->outputs[k]), &p.out_layouts[k]))
            return FALSE;
        }
      planner_json_pop (&r->json, m);
      p.has_out_layouts = TRUE;
    }
  *planner_plan_get_op (r->plan, i) = p;
  return TRUE;
}

static gboolean
read_ops (Reader *r, JsonObject *root)
{
  JsonArray *ops = planner_json_get_array (&r->json, root, "ops");
  if (ops == NULL)
    return FALSE;
  guint n_ops = planner_graph_get_n_ops (r->graph);
  if (json_array_get_length (ops) != n_ops)
    return planner_json_fail (&r->json, "ops", "holds %u ops; the model has %u",
                              json_array_get_length (ops), n_ops);
  return planner_json_read_elements (&r->json, ops, "ops", read_op, r);
}

static gboolean
read_tensors (Reader *r, JsonObject *root)
{
  gsize mark;
  JsonObject *tensors = planner_json_enter_member (&r->json, root, "tensors", &mark);
  if (tensors == NULL)
    return FALSE;
  guint n = planner_graph_get_n_tensors (r->graph);
  for (guint t = 0; t < n; t++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (r->graph, t);
      PlannerLayout layout;
      if (!get_layout (r, tensors, tensor->name, tensor, &layout))
        return FALSE;
      planner_plan_set_tensor_layout (r->plan, t, &layout);
    }
  if (json_object_get_size (tensors) != n)
    return planner_json_fail (&r->json, NULL, "holds %u tensors; the model has %u",
                              json_object_get_size (tensors), n);
  planner_json_pop (&r->json, mark);
  return TRUE;
}

static gboolean
read_step (Reader *r, JsonObject *o, const PlannerTensor *t, PlannerRedistStep *st)
{
  static const char *const known[] = { "kind", "axis",  "dim",   "dim_to", "before", "after",
                                       "n_in", "n_out", "bytes", "time_s", NULL };
  const char *kind;
  guint axis;
  int dim, dim_to;
  JsonNode *axis_json = planner_json_member (&r->json, o, "axis");

  if (axis_json == NULL || !known_members (r, o, known)
      || !planner_json_get_string (&r->json, o, "kind", FALSE, &kind))
    return FALSE;
  if (!planner_step_kind_from_string (kind, &st->kind) || st->kind >= PLANNER_N_STEP_KINDS)
    return planner_json_fail (&r->json, "kind",
                              "must be AllReduce, AllGather, ReduceScatter, AllToAll or Slice, "
                              "got \"%s\"",
                              kind);
  if (!axis_node (r, axis_json, "axis", &axis)
      || !get_index (r, o, "dim", 0, t->rank, &dim)
      || !get_index (r, o, "dim_to", 0, t->rank, &dim_to)
      || !get_layout (r, o, "before", t, &st->before) || !get_layout (r, o, "after", t, &st->after)
      || !planner_json_get_uint64 (&r->json, o, "n_in", &st->n_in)
      || !planner_json_get_uint64 (&r->json, o, "n_out", &st->n_out)
      || !planner_json_get_uint64 (&r->json, o, "bytes", &st->bytes)
      || !get_double (r, o, "time_s", &st->time_s))
    return FALSE;
  st->axis = (guint8)axis;
  st->dim = (gint8)dim;
  st->dim_to = (gint8)dim_to;

  PlannerLayout after;
  if (!planner_redist_step_apply (st->kind, axis, dim, dim_to, &st->before, &after)
      || !planner_layout_equal (&after, &st->after))
    {
      g_autofree char *before_text = planner_layout_to_string (&st->before, &r->mesh);
      g_autofree char *after_text = planner_layout_to_string (&st->after, &r->mesh);
      return planner_json_fail (&r->json, NULL, "%s on axis %s does not turn %s into %s", kind,
                                r->mesh.names[axis], before_text, after_text);
    }
  return TRUE;
}

/* The edge a redistribution sits on: the producer's own output slot (producer_side), a
 * consumer's input slot, or (consumer null) the graph output with that index. */
static gboolean
redistribution_edge_exists (Reader *r, const PlannerRedistribution *red, const PlannerTensor *t)
{
  if (red->consumer < 0)
    {
      const GArray *outputs = planner_graph_get_outputs (r->graph);
      if (red->producer_side || red->slot >= outputs->len
          || g_array_index (outputs, guint, red->slot) != red->tensor)
        return planner_json_fail (&r->json, "consumer",
                                  "is null, which only the final reduction of graph output "
                                  "'slot' has; %s is not graph output %u",
                                  t->name, red->slot);
      return TRUE;
    }
  const PlannerOp *op = planner_graph_get_op (r->graph, (guint)red->consumer);
  if (red->producer_side)
    {
      if (t->producer != red->consumer || t->producer_slot != red->slot)
        return planner_json_fail (&r->json, "consumer",
                                  "must be the producer of %s at output slot %u for a "
                                  "producer-side redistribution, not %s",
                                  t->name, red->slot, op->name);
      return TRUE;
    }
  if (red->slot >= op->n_inputs || op->inputs[red->slot] != red->tensor)
    return planner_json_fail (&r->json, "slot", "is %u, but input %u of %s is not %s", red->slot,
                              red->slot, op->name, t->name);
  return TRUE;
}

static gboolean
read_redistribution (PlannerJsonReader *json, JsonObject *o, guint i, gpointer data)
{
  static const char *const known[]
      = { "tensor", "consumer", "slot",     "producer_side", "from", "to",
          "bytes",  "time_s",   "describe", "steps",         NULL };
  Reader *r = data;
  PlannerRedistribution red = { 0 };
  const char *tensor_name, *describe;

  if (!known_members (r, o, known)
      || !planner_json_get_string (&r->json, o, "tensor", FALSE, &tensor_name))
    return FALSE;
  int tensor = planner_graph_find_tensor (r->graph, tensor_name);
  if (tensor < 0)
    return planner_json_fail (&r->json, "tensor", "names no tensor of the model: '%s'",
                              tensor_name);
  const PlannerTensor *t = planner_graph_get_tensor (r->graph, (guint)tensor);
  red.tensor = (guint)tensor;
  if (!get_op (r, o, "consumer", TRUE, &red.consumer)
      || !planner_json_get_uint (&r->json, o, "slot", &red.slot)
      || !planner_json_get_bool (&r->json, o, "producer_side", &red.producer_side)
      || !get_layout (r, o, "from", t, &red.from) || !get_layout (r, o, "to", t, &red.to)
      || !planner_json_get_uint64 (&r->json, o, "bytes", &red.bytes)
      || !get_double (r, o, "time_s", &red.time_s))
    return FALSE;
  if (!redistribution_edge_exists (r, &red, t))
    return FALSE;

  JsonArray *steps = planner_json_get_array (&r->json, o, "steps");
  if (steps == NULL)
    return FALSE;
  red.n_steps = json_array_get_length (steps);
  g_autofree PlannerRedistStep *buf = g_new0 (PlannerRedistStep, MAX (red.n_steps, 1));
  red.steps = buf;
  const PlannerLayout *at = &red.from;
  for (guint s = 0; s < red.n_steps; s++)
    {
      gsize m;
      JsonObject *step = planner_json_enter_element (&r->json, steps, "steps", s, &m);
      if (step == NULL || !read_step (r, step, t, &buf[s]))
        return FALSE;
      if (!planner_layout_equal (&buf[s].before, at))
        return planner_json_fail (&r->json, "before",
                                  "is not where the previous step left the tensor");
      at = &buf[s].after;
      planner_json_pop (&r->json, m);
    }
  if (!planner_layout_equal (at, &red.to))
    return planner_json_fail (&r->json, "steps", "do not end at the layout of 'to'");
  PlannerRedistPath path = { TRUE, red.n_steps, red.steps, red.bytes, red.time_s };
  g_autofree char *expected = planner_redist_path_describe (&path, &r->mesh);
  if (!planner_json_get_string (&r->json, o, "describe", FALSE, &describe))
    return FALSE;
  if (strcmp (describe, expected) != 0)
    return planner_json_fail (&r->json, "describe",
                              "is \"%s\" but the steps say \"%s\"; edit the steps, the "
                              "description follows from them",
                              describe, expected);
  planner_plan_append_redistribution (r->plan, &red);
  return TRUE;
}

static gboolean
read_conflict (PlannerJsonReader *json, JsonObject *o, guint i, gpointer data)
{
  static const char *const known[] = { "message", "redistribution", NULL };
  Reader *r = data;
  guint n_red = planner_plan_get_n_redistributions (r->plan);
  const char *message;
  int redistribution;
  if (!known_members (r, o, known)
      || !planner_json_get_string (&r->json, o, "message", FALSE, &message)
      || !get_index (r, o, "redistribution", 0, n_red, &redistribution))
    return FALSE;
  if (redistribution < 0)
    return planner_json_fail (&r->json, "redistribution", "must be an index, not null");
  planner_plan_append_conflict (r->plan, message, (guint)redistribution);
  return TRUE;
}

static gboolean
read_pins (Reader *r, JsonObject *root)
{
  JsonArray *pins = planner_json_get_array (&r->json, root, "pins");
  if (pins == NULL)
    return FALSE;
  gsize mark = planner_json_push (&r->json, "pins");
  for (guint i = 0; i < json_array_get_length (pins); i++)
    {
      g_autofree char *index = g_strdup_printf ("[%u]", i);
      const char *text;
      g_autoptr (GError) local = NULL;
      g_autoptr (PlannerPin) pin = NULL;
      if (!planner_json_read_string (&r->json, json_array_get_element (pins, i), index, FALSE,
                                     &text))
        return FALSE;
      if ((pin = planner_pin_parse (text, &r->mesh, &local)) == NULL)
        return planner_json_fail (&r->json, index, "is refused: %s", local->message);
      planner_plan_add_pin_text (r->plan, text);
    }
  planner_json_pop (&r->json, mark);
  return TRUE;
}

/* The version, before anything else: a newer file says so rather than "field x is missing". */
static gboolean
check_version (Reader *r, JsonNode *root)
{
  if (!JSON_NODE_HOLDS_OBJECT (root)
      || !json_object_has_member (json_node_get_object (root), "shardscope_plan"))
    {
      g_set_error (r->json.error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "plan JSON: not a Shardscope plan (no \"shardscope_plan\" member); plan "
                   "files are written by 'shardscope-cli propagate -o PLAN.json'");
      return FALSE;
    }
  JsonNode *version = json_object_get_member (json_node_get_object (root), "shardscope_plan");
  if (!planner_json_node_is (version, G_TYPE_INT64) || json_node_get_int (version) < 1)
    return planner_json_fail (&r->json, "shardscope_plan",
                              "must be the format version, a positive integer");
  if (json_node_get_int (version) > PLANNER_PLAN_JSON_VERSION)
    {
      g_set_error (r->json.error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "plan JSON: format version %" G_GINT64_FORMAT " is newer than this "
                   "Shardscope reads (%d); use a newer Shardscope",
                   json_node_get_int (version), PLANNER_PLAN_JSON_VERSION);
      return FALSE;
    }
  return TRUE;
}

/* The counts and byte sums of the totals follow from the ops and redistributions read: a file
 * where they differ was edited in one place only (a count of 2^31 made compare overflow). */
char *
planner_plan_check_totals (PlannerPlan *plan, const PlannerPlanTotals *t)
{
  PlannerPlanTotals derived = { 0 };
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  derived.n_ops = planner_graph_get_n_ops (graph);
  for (guint i = 0; i < derived.n_ops; i++)
    switch (planner_plan_get_op (plan, i)->decision)
      {
      case PLANNER_DECIDED_PINNED:
        derived.n_pinned++;
        break;
      case PLANNER_DECIDED_PROPAGATED:
        derived.n_propagated++;
        break;
      case PLANNER_DECIDED_DEFAULTED:
        derived.n_defaulted++;
        break;
      }
  derived.n_redistributions = planner_plan_get_n_redistributions (plan);
  for (guint i = 0; i < derived.n_redistributions; i++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (plan, i);
      for (guint s = 0; s < red->n_steps; s++)
        {
          const PlannerRedistStep *st = &red->steps[s];
          /* Each step's bytes are below 2^63; their sum may not be. */
          if (st->bytes > G_MAXINT64 - derived.comm_bytes)
            return g_strdup ("the redistributions send more than 2^63 bytes in all; the byte "
                             "counts of their steps are wrong");
          derived.coll_count[st->kind]++;
          derived.coll_bytes[st->kind] += st->bytes;
          derived.axis_bytes[st->axis] += st->bytes;
          derived.comm_bytes += st->bytes;
        }
    }
  for (guint i = 0; i < PLANNER_N_TOTAL_COUNTS; i++)
    {
      const PlannerTotalField *f = &planner_total_fields[i];
      guint got = PLANNER_TOTAL (t, f, const guint),
            want = PLANNER_TOTAL (&derived, f, const guint);
      if (got != want)
        return g_strdup_printf ("count '%s' is %u but the plan has %u", f->name, got, want);
    }
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    if (t->coll_count[k] != derived.coll_count[k] || t->coll_bytes[k] != derived.coll_bytes[k])
      return g_strdup_printf ("collectives.%s is %u steps of %" G_GUINT64_FORMAT
                              " bytes but the redistributions hold %u of %" G_GUINT64_FORMAT,
                              planner_step_kind_to_string (k), t->coll_count[k], t->coll_bytes[k],
                              derived.coll_count[k], derived.coll_bytes[k]);
  for (guint a = 0; a < mesh->n_axes; a++)
    if (t->axis_bytes[a] != derived.axis_bytes[a])
      return g_strdup_printf ("axes.%s.bytes is %" G_GUINT64_FORMAT
                              " but the redistributions send %" G_GUINT64_FORMAT " over it",
                              mesh->names[a], t->axis_bytes[a], derived.axis_bytes[a]);
  if (t->comm_bytes != derived.comm_bytes)
    return g_strdup_printf ("comm_bytes is %" G_GUINT64_FORMAT
                            " but the redistributions send %" G_GUINT64_FORMAT,
                            t->comm_bytes, derived.comm_bytes);
  return NULL;
}

static gboolean
check_totals (Reader *r, const PlannerPlanTotals *t)
{
  g_autofree char *why = planner_plan_check_totals (r->plan, t);
  return why == NULL || planner_json_fail (&r->json, "totals", "%s", why);
}

/* Whether @a and @b hold the same members and figures (integers and doubles compared as
 * numbers: 5 and 5.0 are the same). */
static gboolean
same_figures (JsonNode *a, JsonNode *b)
{
  if (JSON_NODE_HOLDS_OBJECT (a) && JSON_NODE_HOLDS_OBJECT (b))
    {
      JsonObject *oa = json_node_get_object (a), *ob = json_node_get_object (b);
      if (json_object_get_size (oa) != json_object_get_size (ob))
        return FALSE;
      g_autoptr (GList) names = json_object_get_members (oa);
      for (GList *l = names; l; l = l->next)
        {
          JsonNode *member = json_object_get_member (ob, l->data);
          if (member == NULL || !same_figures (json_object_get_member (oa, l->data), member))
            return FALSE;
        }
      return TRUE;
    }
  if (JSON_NODE_HOLDS_NULL (a) || JSON_NODE_HOLDS_NULL (b))
    return JSON_NODE_HOLDS_NULL (a) && JSON_NODE_HOLDS_NULL (b);
  /* The pipeline's stages and sends (lists, names). */
  if (JSON_NODE_HOLDS_ARRAY (a) || JSON_NODE_HOLDS_ARRAY (b))
    {
      if (!JSON_NODE_HOLDS_ARRAY (a) || !JSON_NODE_HOLDS_ARRAY (b))
        return FALSE;
      JsonArray *xa = json_node_get_array (a), *xb = json_node_get_array (b);
      if (json_array_get_length (xa) != json_array_get_length (xb))
        return FALSE;
      for (guint i = 0; i < json_array_get_length (xa); i++)
        if (!same_figures (json_array_get_element (xa, i), json_array_get_element (xb, i)))
          return FALSE;
      return TRUE;
    }
  if (planner_json_node_is (a, G_TYPE_STRING) || planner_json_node_is (b, G_TYPE_STRING))
    return planner_json_node_is (a, G_TYPE_STRING) && planner_json_node_is (b, G_TYPE_STRING)
           && g_strcmp0 (json_node_get_string (a), json_node_get_string (b)) == 0;
  if (planner_json_node_is (a, G_TYPE_BOOLEAN) || planner_json_node_is (b, G_TYPE_BOOLEAN))
    return planner_json_node_is (a, G_TYPE_BOOLEAN) && planner_json_node_is (b, G_TYPE_BOOLEAN)
           && json_node_get_boolean (a) == json_node_get_boolean (b);
  gboolean int_a = planner_json_node_is (a, G_TYPE_INT64),
           int_b = planner_json_node_is (b, G_TYPE_INT64);
  if (int_a && int_b)
    return json_node_get_int (a) == json_node_get_int (b);
  if ((int_a || planner_json_node_is (a, G_TYPE_DOUBLE))
      && (int_b || planner_json_node_is (b, G_TYPE_DOUBLE)))
    return json_node_get_double (a) == json_node_get_double (b);
  return FALSE;
}

/* Every member of the object @a is in @b with the same figures; @b may have more. */
static gboolean
same_members (JsonNode *a, JsonNode *b)
{
  if (!JSON_NODE_HOLDS_OBJECT (a) || !JSON_NODE_HOLDS_OBJECT (b))
    return FALSE;
  JsonObject *oa = json_node_get_object (a), *ob = json_node_get_object (b);
  g_autoptr (GList) names = json_object_get_members (oa);
  for (GList *l = names; l; l = l->next)
    {
      JsonNode *member = json_object_get_member (ob, l->data);
      if (member == NULL || !same_figures (json_object_get_member (oa, l->data), member))
        return FALSE;
    }
  return TRUE;
}

static PlannerPlan *
plan_from_node (JsonNode *root, PlannerGraph *given_graph, GError **error)
{
  static const char *const known[] = {
    "shardscope_plan", "name",   "policy",    "pins",     "propagate_ms",
    "model",           "mesh",   "devices",   "hardware", "constants",
    "summary",         "totals", "conflicts", "ops",      "tensors",
    "redistributions", "trace",  NULL,
  };
  static const char *const known_model[] = { "name", "source", "hash", "ops", "tensors", NULL };
  g_auto (Reader) r = { { "plan JSON", NULL, error } };

  if (!check_version (&r, root))
    return NULL;
  JsonObject *o = json_node_get_object (root);
  if (!known_members (&r, o, known))
    return NULL;

  /* The model: rebuilt from its source, and refused if it is no longer the same graph. */
  gsize mark;
  JsonObject *model = planner_json_enter_member (&r.json, o, "model", &mark);
  const char *source, *hash, *model_name;
  gint64 model_ops, model_tensors;
  if (model == NULL || !known_members (&r, model, known_model)
      || !planner_json_get_string (&r.json, model, "source", FALSE, &source)
      || !planner_json_get_string (&r.json, model, "hash", FALSE, &hash)
      || !planner_json_get_string (&r.json, model, "name", TRUE, &model_name)
      || !planner_json_get_int (&r.json, model, "ops", 0, G_MAXUINT, &model_ops)
      || !planner_json_get_int (&r.json, model, "tensors", 0, G_MAXUINT, &model_tensors))
    return NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  if (given_graph)
    graph = g_object_ref (given_graph);
  else
    {
      g_autoptr (GError) local = NULL;
      graph = planner_model_load_source (source, &local);
      if (graph == NULL)
        {
          g_set_error (error, PLANNER_ERROR, local->code,
                       "plan JSON: cannot rebuild the plan's model from its source \"%s\": %s",
                       source, local->message);
          return NULL;
        }
    }
  g_autofree char *now = planner_graph_hash (graph);
  if (strcmp (now, hash) != 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL,
                   "plan JSON: the model \"%s\" has changed since the plan was made (graph hash "
                   "%.12s..., now %.12s...); propagate again on the current model, or restore "
                   "the model the plan was made for",
                   source, hash, now);
      return NULL;
    }
  r.graph = graph;
  /* The hash covers the graph; these say the same for people and must agree with it. */
  if (g_strcmp0 (model_name, planner_graph_get_name (graph)) != 0)
    {
      planner_json_fail (&r.json, "name", "is \"%s\" but the model is \"%s\"",
                         model_name ? model_name : "null",
                         planner_graph_get_name (graph) ? planner_graph_get_name (graph) : "null");
      return NULL;
    }
  if (model_ops != planner_graph_get_n_ops (graph)
      || model_tensors != planner_graph_get_n_tensors (graph))
    {
      planner_json_fail (&r.json, NULL,
                         "counts %" G_GINT64_FORMAT " ops and %" G_GINT64_FORMAT
                         " tensors but the model has %u and %u",
                         model_ops, model_tensors, planner_graph_get_n_ops (graph),
                         planner_graph_get_n_tensors (graph));
      return NULL;
    }
  planner_json_pop (&r.json, mark);

  const char *mesh_text;
  g_autoptr (GError) local = NULL;
  if (!planner_json_get_string (&r.json, o, "mesh", FALSE, &mesh_text))
    return NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &local);
  if (mesh == NULL)
    {
      planner_json_fail (&r.json, "mesh", "is refused: %s", local->message);
      return NULL;
    }
  r.mesh = *mesh;
  gint64 devices;
  if (!planner_json_get_int (&r.json, o, "devices", 1, PLANNER_MAX_DEVICES, &devices))
    return NULL;
  if ((guint64)devices != planner_mesh_n_devices (mesh))
    {
      planner_json_fail (&r.json, "devices",
                         "is %" G_GINT64_FORMAT " but the mesh %s has %" G_GUINT64_FORMAT, devices,
                         mesh_text, planner_mesh_n_devices (mesh));
      return NULL;
    }

  JsonNode *hw_node = planner_json_member (&r.json, o, "hardware");
  if (hw_node == NULL)
    return NULL;
  g_autofree char *hw_text = planner_json_to_string (hw_node);
  g_autoptr (PlannerHardware) hw = planner_hardware_from_json (hw_text, &local);
  if (hw == NULL)
    {
      planner_json_fail (&r.json, "hardware", "is refused: %s", local->message);
      return NULL;
    }

  PlannerCostConstants constants;
  planner_cost_constants_init (&constants);
  const char *name, *policy;
  double propagate_ms;
  if (!read_constants (&r, o, &constants)
      || !planner_json_get_string (&r.json, o, "name", TRUE, &name)
      || !planner_json_get_string (&r.json, o, "policy", TRUE, &policy)
      || !get_double (&r, o, "propagate_ms", &propagate_ms))
    return NULL;

  g_autoptr (PlannerPlan) plan = planner_plan_new (graph, mesh, hw);
  planner_plan_set_constants (plan, &constants);
  planner_plan_set_name (plan, name);
  planner_plan_set_policy (plan, policy);
  planner_plan_set_propagate_ms (plan, propagate_ms);

  PlannerPlanTotals totals;
  r.plan = plan;
  if (!read_pins (&r, o) || !read_list (&r, o, "trace", read_trace_step) || !read_ops (&r, o)
      || !read_tensors (&r, o) || !read_list (&r, o, "redistributions", read_redistribution)
      || !read_list (&r, o, "conflicts", read_conflict) || !read_totals (&r, o, &totals)
      || !check_totals (&r, &totals))
    return NULL;
  planner_plan_set_totals (plan, &totals);
  /* The summary repeats the totals for people and scripts: it must say what they say. A file
   * written before the training model has neither its figures in totals nor in the summary:
   * what it has is checked against the totals as read, then the figures are derived. */
  JsonNode *summary = planner_json_member (&r.json, o, "summary");
  if (summary == NULL)
    return NULL;
  g_autoptr (JsonNode) derived = planner_plan_summary_to_json (plan);
  if (!(r.has_training ? same_figures (summary, derived) : same_members (summary, derived)))
    {
      g_autofree char *expected = planner_json_to_string (derived);
      planner_json_fail (&r.json, "summary",
                         "does not match the plan's totals and hardware; it follows from them "
                         "and would read:\n%s",
                         expected);
      return NULL;
    }
  if (!r.has_training)
    planner_plan_refresh_training (plan);
  return g_steal_pointer (&plan);
}

PlannerPlan *
planner_plan_from_json_with_graph (const char *text, PlannerGraph *graph, GError **error)
{
  g_return_val_if_fail (text != NULL, NULL);
  g_return_val_if_fail (graph == NULL || PLANNER_IS_GRAPH (graph), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  g_autoptr (JsonNode) root = planner_json_parse (text, -1, "plan JSON", error);
  if (root == NULL)
    return NULL;
  return plan_from_node (root, graph, error);
}

PlannerPlan *
planner_plan_from_json (const char *text, GError **error)
{
  return planner_plan_from_json_with_graph (text, NULL, error);
}

PlannerPlan *
planner_plan_load_json (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  g_autoptr (JsonNode) root = planner_json_load_file (path, "plan", error);
  if (root == NULL)
    return NULL;
  g_autoptr (GError) local = NULL;
  PlannerPlan *plan = plan_from_node (root, NULL, &local);
  if (plan == NULL)
    g_propagate_prefixed_error (error, g_steal_pointer (&local), "%s: ", path);
  return plan;
}
