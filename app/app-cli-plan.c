#define G_LOG_DOMAIN "app-cli-plan"

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "app-cli.h"
#include "app-file.h"
#include "planner-compare.h"
#include "planner-error.h"
#include "planner-export.h"
#include "planner-moe.h"
#include "planner-pipeline.h"
#include "planner-plan-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-request.h"
#include "planner-solve.h"

/* shardscope-cli propagate | compare | export: making plans, and what comes out of them. */

#define MAX_CONFLICTS_SHOWN 10

PlannerPlan *
app_cli_load_plan (const char *spec, GError **error)
{
  g_return_val_if_fail (spec != NULL, NULL);

  /* db:ID and db:NAME name plans in the store (app-cli-db.c). */
  if (g_str_has_prefix (spec, "db:"))
    return app_cli_db_load_plan (spec + 3, error);
  return planner_plan_load_json (spec, error);
}

/* ---- propagate ---- */

/* The policy's pins (tier 0), then the user's (tier 1, so they win on an op both match), as
 * the planner's request object expands them. The policy's notes (optional rules it left out)
 * go to stderr. */
static GPtrArray *
collect_pins (const char *policy, char **user_pins, PlannerGraph *graph, const PlannerMesh *mesh,
              GError **error)
{
  g_autoptr (PlannerRequest) request = planner_request_new ();
  planner_request_set_policy (request, policy);
  for (guint i = 0; user_pins && user_pins[i]; i++)
    planner_request_add_pin (request, user_pins[i], PLANNER_PIN_TIER_USER);
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  GPtrArray *pins = planner_request_expand (request, graph, mesh, notes, error);
  for (guint i = 0; i < notes->len; i++)
    fprintf (stderr, "shardscope-cli: %s\n", (const char *)g_ptr_array_index (notes, i));
  return pins;
}

static char *
op_strategy_text (PlannerPlan *plan, guint op, const PlannerStrategy *strategy)
{
  const PlannerOp *o = planner_graph_get_op (planner_plan_get_graph (plan), op);
  return planner_strategy_to_string (strategy, &o->rule, planner_plan_get_mesh (plan));
}

/* The pipeline's terms and its stages (issue 18): nothing without a pp axis. */
static void
print_pipeline (PlannerPlan *plan)
{
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, NULL);
  if (pl == NULL)
    return;
  const PlannerStepBreakdown *b = &planner_plan_get_totals (plan)->breakdown;
  g_autofree char *bubble = app_cli_format_seconds (b->pipeline_bubble);
  g_autofree char *comm = app_cli_format_seconds (b->pipeline_comm);
  printf ("  %-32s %s (schedule %s, pp=%u, %u micro-batches, %u virtual stage%s: bubble "
          "fraction %.4f)\n",
          "pipeline bubble", bubble, planner_schedule_to_string (pl->schedule), pl->p, pl->m, pl->v,
          pl->v == 1 ? "" : "s", pl->bubble_fraction);
  printf ("  %-32s %s\n", "pipeline sends and receives", comm);
  printf ("Pipeline stages (the step waits for stage %u):\n", pl->bottleneck);
  for (guint s = 0; s < pl->n_stages; s++)
    {
      const PlannerPipelineStage *st = &pl->stages[s];
      g_autofree char *layers = planner_pipeline_stage_layers (pl, s);
      g_autofree char *memory = app_cli_format_bytes (st->memory.reserved_total);
      g_autofree char *micro = app_cli_format_seconds (st->micro_batch_s);
      printf ("  stage %u: layers %s, %" G_GUINT64_FORMAT " devices, %g micro-batches in flight, "
              "reserved memory %s, %s per micro-batch\n",
              s, layers, st->n_devices, st->in_flight, memory, micro);
    }
  for (guint k = 0; k < pl->n_sends; k++)
    {
      const PlannerPipelineSend *send = &pl->sends[k];
      g_autofree char *bytes = app_cli_format_bytes (send->bytes);
      g_autofree char *time = app_cli_format_seconds (send->time_s);
      printf ("  send chunk %u -> %u (stage %u -> %u): %s per micro-batch, %s on %s%s\n", k, k + 1,
              send->from_stage, send->to_stage, bytes, time,
              planner_link_kind_to_string (send->link),
              send->scatter > 1 ? " (scattered, gathered on arrival)" : "");
    }
}

static void
print_text (PlannerPlan *plan, gboolean trace, const char *output,
            const PlannerSolveReport *solve)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerHardware *hw = planner_plan_get_hardware (plan);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  const PlannerCostConstants *constants = planner_plan_get_constants (plan);
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);

  printf ("Model:     %s (%s)\n", planner_graph_get_name (graph), planner_graph_get_source (graph));
  printf ("Mesh:      %s (%" G_GUINT64_FORMAT " devices), hardware %s\n", mesh_text,
          planner_mesh_n_devices (mesh), planner_hardware_get_name (hw));
  printf ("Pins:      %u (policy %s)\n", planner_plan_get_pins (plan)->len,
          planner_plan_get_policy (plan) ? planner_plan_get_policy (plan) : "none");
  printf ("Ops:       %u: %u pinned, %u propagated, %u defaulted\n", t->n_ops, t->n_pinned,
          t->n_propagated, t->n_defaulted);

  printf ("Redistributions: %u", t->n_redistributions);
  const char *sep = ": ";
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    if (t->coll_count[k])
      {
        printf ("%s%u %s", sep, t->coll_count[k], planner_step_kind_to_string (k));
        sep = ", ";
      }
  printf ("\n");
  for (guint a = 0; a < mesh->n_axes; a++)
    if (t->axis_bytes[a] || t->axis_time_s[a] > 0)
      {
        g_autofree char *bytes = app_cli_format_bytes (t->axis_bytes[a]);
        g_autofree char *time = app_cli_format_seconds (t->axis_time_s[a]);
        printf ("  over %s: %s, %s\n", mesh->names[a], bytes, time);
      }

  g_auto (AppCliTotalsText) text = { 0 };
  app_cli_totals_text_init (&text, t);
  printf ("Per device, forward: communication %s in %s, compute %s\n", text.comm_bytes, text.comm,
          text.compute);
  printf ("Training step:   %s (%u micro-batch%s of %u of the %u sequences per device; "
          "%s, ZeRO %u, recompute %s, %s attention)\n",
          text.step, t->micro_batches, t->micro_batches == 1 ? "" : "es",
          t->local_batch / MAX (t->micro_batches, 1), t->local_batch,
          planner_optimizer_to_string (constants->optimizer), constants->zero,
          planner_recompute_to_string (constants->recompute),
          planner_attention_kernel_to_string (constants->attention));
  const PlannerStepBreakdown *b = &t->breakdown;
  const struct
  {
    const char *name;
    double s;
  } parts[] = {
    { "forward", b->forward },
    { "backward", b->backward },
    { "recompute", b->recompute },
    { "tensor-parallel comm", b->tp_comm_exposed },
    { "gradient sync, exposed", b->dp_sync_exposed },
    { "overhead (launches, optimizer)", b->overhead },
  };
  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    {
      g_autofree char *v = app_cli_format_seconds (parts[i].s);
      printf ("  %-32s %s\n", parts[i].name, v);
    }
  g_autofree char *hidden = app_cli_format_seconds (b->dp_sync_hidden);
  printf ("  %-32s %s (overlapped with the backward pass, not added)\n", "gradient sync, hidden",
          hidden);
  print_pipeline (plan);

  guint64 capacity = planner_hardware_memory_bytes (hw);
  g_autofree char *capacity_text = app_cli_format_bytes (capacity);
  printf ("Memory/device:   %s of %s = %g GB (%.1f%%), the tensors\n", text.memory, capacity_text,
          planner_hardware_get_memory_GB (hw),
          capacity ? 100.0 * (double)t->memory.total / (double)capacity : 0.0);
  const struct
  {
    const char *name;
    guint64 bytes;
  } mem[] = {
    { "parameters", t->memory.parameters },
    { "gradients", t->memory.gradients },
    { "optimizer states", t->memory.optimizer },
    { t->breakdown.pipeline_bubble > 0 ? "activations (micro-batches in flight)"
                                       : "activations (one micro-batch)",
      t->memory.activations },
    { "loss (fp32 temporaries, peak)", t->memory.loss },
    { "ZeRO bucket buffers", t->memory.buffers },
  };
  for (guint i = 0; i < G_N_ELEMENTS (mem); i++)
    {
      /* The issue-12 lines only where they hold something. */
      if (i >= 4 && mem[i].bytes == 0)
        continue;
      g_autofree char *v = app_cli_format_bytes (mem[i].bytes);
      printf ("  %-32s %s\n", mem[i].name, v);
    }
  /* What the device holds beside the tensors (issue 12), and the fit check on the sum. */
  const struct
  {
    const char *name;
    guint64 bytes;
  } reserved[] = {
    { "caching allocator (rounding)", t->memory.allocator },
    { "CUDA context", t->memory.cuda_context },
    { "cuBLAS workspace", t->memory.cublas_workspace },
    { "NCCL buffers", t->memory.nccl_buffers },
  };
  for (guint i = 0; i < G_N_ELEMENTS (reserved); i++)
    if (reserved[i].bytes > 0)
      {
        g_autofree char *v = app_cli_format_bytes (reserved[i].bytes);
        printf ("  %-32s %s\n", reserved[i].name, v);
      }
  g_autofree char *reserved_text = app_cli_format_bytes (t->memory.reserved_total);
  printf ("Reserved/device: %s of %s (%.1f%%, as nvidia-smi counts it)%s\n", reserved_text,
          capacity_text,
          capacity ? 100.0 * (double)t->memory.reserved_total / (double)capacity : 0.0,
          t->memory.reserved_total > capacity ? ": DOES NOT FIT" : "");
  printf ("Propagation:     %.3f ms\n", planner_plan_get_propagate_ms (plan));
  if (solve)
    {
      g_autofree char *obj = app_cli_format_seconds (solve->objective_s);
      g_autofree char *greedy = app_cli_format_seconds (solve->seed_objective_s);
      printf ("Exact solve:     objective %s against greedy %s under the same pins; %s; %u ops "
              "chosen, %u blocks in %u kind%s\n",
              obj, greedy, solve->optimal ? "optimal (proven)" : "not proven", solve->n_vars,
              solve->n_blocks, solve->n_block_kinds, solve->n_block_kinds == 1 ? "" : "s");
      if (!solve->optimal)
        printf ("                 gap %.3g%% to the lower bound %g s\n", 100 * solve->gap,
                solve->bound_s);
    }

  guint n_conflicts = planner_plan_get_n_conflicts (plan);
  printf ("Conflicts:       %u\n", n_conflicts);
  for (guint i = 0; i < n_conflicts && i < MAX_CONFLICTS_SHOWN; i++)
    printf ("  %s\n", planner_plan_get_conflict (plan, i)->message);
  if (n_conflicts > MAX_CONFLICTS_SHOWN)
    printf ("  ... and %u more (--json lists them all)\n", n_conflicts - MAX_CONFLICTS_SHOWN);
  g_autofree char *moe = planner_moe_describe (plan); /* mixture of experts */
  if (moe)
    fputs (moe, stdout);

  if (trace)
    {
      printf ("\nTrace (%u steps): step, op, strategy, reached from, edge cost, candidates, "
              "runner-up\n",
              planner_plan_get_n_trace_steps (plan));
      for (guint i = 0; i < planner_plan_get_n_trace_steps (plan); i++)
        {
          const PlannerTraceStep *st = planner_plan_get_trace_step (plan, i);
          g_autofree char *chosen = op_strategy_text (plan, st->op, &st->strategy);
          g_autofree char *cost = app_cli_format_seconds (st->edge_cost_s);
          printf ("  %4u  %s  %s  %s %s  %s  %u", st->index,
                  planner_graph_get_op (graph, st->op)->name, chosen, st->forward ? "<-" : "->",
                  st->from_op >= 0 ? planner_graph_get_op (graph, st->from_op)->name : "?", cost,
                  st->n_candidates);
          if (st->has_runner_up)
            {
              g_autofree char *runner_up = op_strategy_text (plan, st->op, &st->runner_up);
              g_autofree char *runner_up_cost = app_cli_format_seconds (st->runner_up_cost_s);
              printf ("  %s %s", runner_up, runner_up_cost);
            }
          printf ("\n");
        }
    }
  if (output)
    printf ("\nPlan written to %s\n", output);
}

static void
add_string_or_null (JsonObject *object, const char *member, const char *value)
{
  if (value)
    json_object_set_string_member (object, member, value);
  else
    json_object_set_null_member (object, member);
}

static void
print_json (PlannerPlan *plan, gboolean trace, const char *output,
            const PlannerSolveReport *solve)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (plan));
  g_autoptr (JsonNode) summary = planner_plan_summary_to_json (plan);
  g_autoptr (JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  JsonObject *o = json_object_new ();
  json_node_take_object (root, o);

  json_object_set_string_member (o, "model", planner_graph_get_source (graph));
  json_object_set_string_member (o, "mesh", mesh);
  json_object_set_string_member (o, "hardware",
                                 planner_hardware_get_name (planner_plan_get_hardware (plan)));
  add_string_or_null (o, "policy", planner_plan_get_policy (plan));
  add_string_or_null (o, "plan", output);
  JsonObjectIter iter;
  const char *name;
  JsonNode *member;
  json_object_iter_init_ordered (&iter, json_node_get_object (summary));
  while (json_object_iter_next_ordered (&iter, &name, &member))
    json_object_set_member (o, name, json_node_copy (member));

  JsonArray *conflicts = json_array_new ();
  for (guint i = 0; i < planner_plan_get_n_conflicts (plan); i++)
    json_array_add_string_element (conflicts, planner_plan_get_conflict (plan, i)->message);
  json_object_set_array_member (o, "conflicts", conflicts);
  JsonNode *moe = planner_moe_to_json (plan); /* mixture of experts */
  if (moe)
    json_object_set_member (o, "moe", moe);
  if (solve)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      app_cli_json_add_solve_report (b, solve);
      json_builder_end_object (b);
      json_object_set_member (o, "solve", json_builder_get_root (b));
    }

  if (trace)
    {
      JsonArray *steps = json_array_new ();
      for (guint i = 0; i < planner_plan_get_n_trace_steps (plan); i++)
        {
          const PlannerTraceStep *st = planner_plan_get_trace_step (plan, i);
          g_autofree char *chosen = op_strategy_text (plan, st->op, &st->strategy);
          JsonObject *s = json_object_new ();
          json_object_set_int_member (s, "step", st->index);
          json_object_set_string_member (s, "op", planner_graph_get_op (graph, st->op)->name);
          json_object_set_string_member (s, "strategy", chosen);
          add_string_or_null (
              s, "from", st->from_op >= 0 ? planner_graph_get_op (graph, st->from_op)->name : NULL);
          json_object_set_string_member (s, "direction", st->forward ? "forward" : "backward");
          json_object_set_double_member (s, "edge_cost_us", st->edge_cost_s * 1e6);
          json_object_set_int_member (s, "candidates", st->n_candidates);
          if (st->has_runner_up)
            {
              g_autofree char *runner_up = op_strategy_text (plan, st->op, &st->runner_up);
              json_object_set_string_member (s, "runner_up", runner_up);
              json_object_set_double_member (s, "runner_up_cost_us", st->runner_up_cost_s * 1e6);
            }
          else
            {
              json_object_set_null_member (s, "runner_up");
              json_object_set_null_member (s, "runner_up_cost_us");
            }
          json_array_add_object_element (steps, s);
        }
      json_object_set_array_member (o, "trace", steps);
    }
  app_cli_json_print (root);
}

/* The leading dim of the first graph input (the token ids): the global batch. */
static gint64
graph_batch (PlannerGraph *graph)
{
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (graph, t);
      if (x->kind == PLANNER_TENSOR_INPUT && x->rank > 0)
        return x->shape[0];
    }
  return 1;
}

/* --micro-batches M without --batch: one sequence per micro-batch per data-parallel replica,
 * M x the data-parallel size, which a plan of the default batch tells (batch / local batch). */
static gint64
pipeline_batch (PlannerGraph *graph, const PlannerMesh *mesh, const PlannerHardware *hw,
                const char *policy, char **user_pins, gboolean allow_tied, guint micro_batches,
                GError **error)
{
  g_autoptr (GPtrArray) pins = collect_pins (policy, user_pins, graph, mesh, error);
  if (pins == NULL)
    return 0;
  PlannerPropagateOptions options;
  planner_propagate_options_init (&options);
  options.allow_tied_redistribution = allow_tied;
  g_autoptr (PlannerPlan) probe = planner_propagate (graph, mesh, hw, pins, &options, error);
  if (probe == NULL || !planner_plan_finish (probe, allow_tied, error))
    return 0;
  guint local = MAX (planner_plan_get_totals (probe)->local_batch, 1);
  return (gint64)micro_batches * MAX (graph_batch (graph) / local, 1);
}

/* --from makes MODEL optional; it is known before the options are parsed. */
static gboolean
from_given (int argc, char **argv)
{
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--from") == 0 || g_str_has_prefix (argv[i], "--from="))
      return TRUE;
  return FALSE;
}

int
app_cli_propagate (const AppCliCommand *command, int argc, char **argv)
{
  gboolean json = FALSE, trace = FALSE, allow_tied = FALSE;
  g_autofree char *mesh_text = NULL, *policy = NULL, *hardware = NULL, *output = NULL;
  g_autofree char *save_name = NULL, *from = NULL;
  g_autofree char *optimizer = NULL, *recompute = NULL, *attention = NULL;
  g_autofree char *grad_reduce = NULL, *prefetch = NULL;
  /* issue 12: memory beyond the stored activations */
  g_autofree char *loss = NULL, *rms_norm = NULL;
  double zero_bucket = -1;
  int zero = -1, micro_batch = -1;
  /* issue 18: pipeline parallelism */
  int micro_batches = -1, virtual_stages = -1;
  g_autofree char *schedule = NULL, *stages = NULL;
  double bucket_MiB = -1;
  gboolean no_overlap = FALSE, no_dropout = FALSE, optimal = FALSE;
  g_auto (GStrv) user_pins = NULL;
  g_auto (AppCliModelArgs) model_args = { 0 };
  const GOptionEntry entries[] = {
    { "mesh", 'm', 0, G_OPTION_ARG_STRING, &mesh_text, "Device mesh, major axis first", "M" },
    { "pin", 0, 0, G_OPTION_ARG_STRING_ARRAY, &user_pins,
      "Pin ops: GLOB=IN_LAYOUTS[->OUT_LAYOUTS], e.g. '*.q_proj=[dp,_,_],[mp,_]'; repeatable; "
      "overrides the policy's pin on the same op",
      "OP=LAYOUTS" },
    { "policy", 0, 0, G_OPTION_ARG_FILENAME, &policy,
      "Pin rules: a built-in (megatron, megatron-sp, dp, megatron-ep) or a policy JSON file",
      "NAME|FILE" },
    { "hardware", 0, 0, G_OPTION_ARG_FILENAME, &hardware,
      "Hardware profile: a built-in name or a profile file (default " APP_CLI_DEFAULT_HARDWARE ")",
      "NAME|FILE" },
    { "trace", 0, 0, G_OPTION_ARG_NONE, &trace,
      "Also print every propagation step: op, strategy, neighbour, cost, runner-up", NULL },
    { "allow-tied", 0, 0, G_OPTION_ARG_NONE, &allow_tied,
      "Let a tied parameter's users need different layouts (a redistribution on one use)", NULL },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Write the plan JSON to this file",
      "PLAN.json" },
    { "save", 0, 0, G_OPTION_ARG_STRING, &save_name, "Save the plan in the store (--db) as NAME",
      "NAME" },
    { "from", 0, 0, G_OPTION_ARG_STRING, &from,
      "Derive from a plan (file, db:ID or db:NAME): its model, mesh, hardware, policy and pins; "
      "--pin adds to them, --mesh, --hardware and --policy replace them; a stored plan becomes "
      "the parent",
      "PLAN" },
    { "zero", 0, 0, G_OPTION_ARG_INT, &zero,
      "ZeRO stage over the data-parallel axes: 0 (default), 1 optimizer states, 2 also "
      "gradients, 3 also weights",
      "0|1|2|3" },
    { "optimizer", 0, 0, G_OPTION_ARG_STRING, &optimizer,
      "Optimizer: adam (default; fp32 m and v) or sgd (no state)", "adam|sgd" },
    { "recompute", 0, 0, G_OPTION_ARG_STRING, &recompute,
      "Activation recomputation: none (default), selective (the attention core) or full "
      "(every layer from its input)",
      "none|selective|full" },
    { "attention", 0, 0, G_OPTION_ARG_STRING, &attention,
      "Attention kernel: flash (default; FlashAttention-2), flash1 (FlashAttention-1 or its "
      "Triton port) or unfused (keeps the s x s scores)",
      "flash|flash1|unfused" },
    { "grad-reduce", 0, 0, G_OPTION_ARG_STRING, &grad_reduce,
      "The dtype the data-parallel gradient sync moves: param (default, the parameters' dtype) "
      "or f32 (FSDP's DEFAULT mixed precision)",
      "param|f32" },
    { "backward-prefetch", 0, 0, G_OPTION_ARG_STRING, &prefetch,
      "ZeRO-3's backward parameter gathers: pre (default, FSDP BACKWARD_PRE, hidden behind the "
      "backward) or post (BACKWARD_POST, exposed)",
      "pre|post" },
    { "loss", 0, 0, G_OPTION_ARG_STRING, &loss,
      "The loss over the logits: unfused (default; Hugging Face's fp32 upcast, log_softmax and "
      "nll_loss: 12 bytes a logit at the peak) or fused (a fused linear cross-entropy, e.g. "
      "Liger-Kernel's: no logits held)",
      "unfused|fused" },
    { "rms-norm", 0, 0, G_OPTION_ARG_STRING, &rms_norm,
      "RMSNorm: unfused (default; Hugging Face's eager LlamaRMSNorm keeps an fp32 copy of its "
      "input and its normalized output) or fused (keeps its input)",
      "unfused|fused" },
    { "zero-bucket-elements", 0, 0, G_OPTION_ARG_DOUBLE, &zero_bucket,
      "ZeRO 2/3 gradient bucket buffers, in elements (default 5e8, DeepSpeed's "
      "reduce_bucket_size; two at ZeRO-2 with overlap); 0 for none (FSDP)",
      "N" },
    { "micro-batch", 0, 0, G_OPTION_ARG_INT, &micro_batch,
      "Sequences per device per micro-batch, with gradient accumulation up to the step "
      "(default: the whole local batch)",
      "N" },
    { "micro-batches", 0, 0, G_OPTION_ARG_INT, &micro_batches,
      "Micro-batches per step (the pipeline's m); without --batch the batch is then one "
      "sequence per micro-batch per data-parallel replica",
      "M" },
    { "schedule", 0, 0, G_OPTION_ARG_STRING, &schedule,
      "Pipeline schedule over the mesh axis pp: 1f1b (default), gpipe or interleaved",
      "1f1b|gpipe|interleaved" },
    { "virtual-stages", 0, 0, G_OPTION_ARG_INT, &virtual_stages,
      "Layer chunks per pipeline stage (interleaved 1F1B; implies --schedule interleaved)", "V" },
    { "stages", 0, 0, G_OPTION_ARG_STRING, &stages,
      "Layer ranges of the pipeline chunks, in order, e.g. 0-19,20-39,40-59,60-79 (default: "
      "balanced by the cost model)",
      "RANGES" },
    { "dp-bucket-mib", 0, 0, G_OPTION_ARG_DOUBLE, &bucket_MiB,
      "Gradient bucket size for the data-parallel sync (default 25, as DDP)", "MIB" },
    { "no-dp-overlap", 0, 0, G_OPTION_ARG_NONE, &no_overlap,
      "Do not overlap the gradient sync with the backward pass", NULL },
    { "no-dropout", 0, 0, G_OPTION_ARG_NONE, &no_dropout,
      "The model's dropout probabilities are 0: its dropout ops keep no mask and cost nothing",
      NULL },
    { "optimal", 0, 0, G_OPTION_ARG_NONE, &optimal,
      "The exact solve instead of greedy propagation: the plan of least training step under the "
      "same pins (pinned ops keep their pins); prints the optimum, its proof and the greedy "
      "plan's figure",
      NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context
      = app_cli_options_new (command, entries, &model_args, TRUE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, from_given (argc, argv) ? 0 : 1, 1);
  if (status >= 0)
    return status;
  if (from != NULL && (argc > 1 || app_cli_model_args_given (&model_args)))
    return app_cli_usage_error (command, "--from takes the model of the plan it starts from; "
                                         "leave out MODEL, --batch, --seq, --layers and --dtype");
  if (mesh_text == NULL && from == NULL)
    return app_cli_usage_error (command, "missing --mesh M (e.g. --mesh dp=2,mp=4)");
  PlannerCostConstants constants;
  planner_cost_constants_init (&constants);
  if (zero != -1 && (zero < 0 || zero > 3))
    return app_cli_usage_error (command, "--zero %d: the ZeRO stage is 0, 1, 2 or 3", zero);
  if (optimizer && !planner_optimizer_from_string (optimizer, &constants.optimizer))
    return app_cli_usage_error (command, "--optimizer '%s': use adam or sgd", optimizer);
  if (recompute && !planner_recompute_from_string (recompute, &constants.recompute))
    return app_cli_usage_error (command, "--recompute '%s': use none, selective or full",
                                recompute);
  if (attention && !planner_attention_kernel_from_string (attention, &constants.attention))
    return app_cli_usage_error (command, "--attention '%s': use flash, flash1 or unfused",
                                attention);
  if (grad_reduce && !planner_grad_reduce_from_string (grad_reduce, &constants.grad_reduce))
    return app_cli_usage_error (command, "--grad-reduce '%s': use param or f32", grad_reduce);
  if (prefetch && !planner_backward_prefetch_from_string (prefetch, &constants.backward_prefetch))
    return app_cli_usage_error (command, "--backward-prefetch '%s': use pre or post", prefetch);
  if (loss && !planner_loss_kernel_from_string (loss, &constants.loss))
    return app_cli_usage_error (command, "--loss '%s': use unfused or fused", loss);
  if (rms_norm && !planner_norm_kernel_from_string (rms_norm, &constants.rms_norm))
    return app_cli_usage_error (command, "--rms-norm '%s': use unfused or fused", rms_norm);
  if (zero_bucket != -1 && !(zero_bucket >= 0 && zero_bucket <= 1e15))
    return app_cli_usage_error (command,
                                "--zero-bucket-elements %g: give 0 (none) to 1e15 elements",
                                zero_bucket);
  if (micro_batch != -1 && micro_batch < 1)
    return app_cli_usage_error (command, "--micro-batch %d: give 1 or more sequences", micro_batch);
  if (micro_batches != -1 && micro_batches < 1)
    return app_cli_usage_error (command, "--micro-batches %d: give 1 or more", micro_batches);
  if (virtual_stages != -1 && virtual_stages < 1)
    return app_cli_usage_error (command, "--virtual-stages %d: give 1 or more", virtual_stages);
  if (schedule && !planner_schedule_from_string (schedule, &constants.schedule))
    return app_cli_usage_error (command, "--schedule '%s': use 1f1b, gpipe or interleaved",
                                schedule);
  if (virtual_stages > 1 && !schedule)
    constants.schedule = PLANNER_SCHEDULE_INTERLEAVED;
  if (stages && strlen (stages) >= sizeof constants.stages)
    return app_cli_usage_error (command, "--stages: at most %d characters",
                                PLANNER_MAX_STAGES_TEXT - 1);
  if (bucket_MiB != -1 && !(bucket_MiB > 0 && bucket_MiB < 1e9))
    return app_cli_usage_error (command, "--dp-bucket-mib %g: give a size > 0", bucket_MiB);

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) parent = from ? app_cli_load_plan (from, &error) : NULL;
  if (from != NULL && parent == NULL)
    return app_cli_refuse (error);
  g_autoptr (PlannerMesh) mesh = mesh_text ? planner_mesh_parse (mesh_text, &error)
                                           : planner_mesh_copy (planner_plan_get_mesh (parent));
  if (mesh == NULL)
    return app_cli_refuse (error);
  if ((schedule || virtual_stages != -1 || stages) && planner_mesh_pipeline_axis (mesh) < 0)
    return app_cli_usage_error (command,
                                "--schedule, --virtual-stages and --stages are for a pipeline: "
                                "name a mesh axis pp (e.g. --mesh pp=4,dp=2,mp=8)");
  g_autoptr (PlannerHardware) hw
      = parent && !hardware
            ? planner_hardware_copy (planner_plan_get_hardware (parent))
            : planner_hardware_lookup (hardware ? hardware : APP_CLI_DEFAULT_HARDWARE, &error);
  if (hw == NULL)
    return app_cli_refuse (error);
  if (parent && !policy && planner_plan_get_policy (parent))
    policy = g_strdup (planner_plan_get_policy (parent));
  g_autoptr (PlannerGraph) graph
      = parent ? g_object_ref (planner_plan_get_graph (parent))
               : app_cli_load_model (command, argv[1], &model_args, &status);
  if (graph == NULL)
    return status;
  if (micro_batches > 0 && parent == NULL && model_args.batch == APP_CLI_UNSET)
    {
      gint64 batch = pipeline_batch (graph, mesh, hw, policy, user_pins, allow_tied,
                                     (guint)micro_batches, &error);
      if (batch == 0)
        return app_cli_refuse (error);
      if (batch != graph_batch (graph))
        {
          model_args.batch = batch;
          g_clear_object (&graph);
          graph = app_cli_load_model (command, argv[1], &model_args, &status);
          if (graph == NULL)
            return status;
        }
    }
  g_autoptr (GPtrArray) pins = collect_pins (policy, user_pins, graph, mesh, &error);
  if (pins == NULL || (parent && !app_cli_derive_pins (parent, pins, mesh, &error)))
    return app_cli_refuse (error);

  PlannerPropagateOptions options;
  planner_propagate_options_init (&options);
  options.allow_tied_redistribution = allow_tied;
  g_autoptr (PlannerPlan) plan = planner_propagate (graph, mesh, hw, pins, &options, &error);
  if (plan == NULL)
    return app_cli_refuse (error);
  /* The training options: a derived plan keeps its parent's unless given again. */
  if (parent)
    {
      PlannerCostConstants given = constants;
      constants = *planner_plan_get_constants (parent);
      if (optimizer)
        constants.optimizer = given.optimizer;
      if (recompute)
        constants.recompute = given.recompute;
      if (attention)
        constants.attention = given.attention;
      if (grad_reduce)
        constants.grad_reduce = given.grad_reduce;
      if (prefetch)
        constants.backward_prefetch = given.backward_prefetch;
      if (loss)
        constants.loss = given.loss;
      if (rms_norm)
        constants.rms_norm = given.rms_norm;
      if (schedule || virtual_stages > 1)
        constants.schedule = given.schedule;
    }
  if (micro_batches != -1)
    constants.micro_batches = (guint)micro_batches;
  if (virtual_stages != -1)
    constants.virtual_stages = (guint)virtual_stages;
  if (stages)
    g_strlcpy (constants.stages, stages, sizeof constants.stages);
  if (zero != -1)
    constants.zero = (guint)zero;
  if (optimizer)
    constants.optimizer_states = constants.optimizer == PLANNER_OPTIMIZER_SGD ? 0 : 2;
  if (micro_batch != -1)
    constants.micro_batch = (guint)micro_batch;
  if (bucket_MiB != -1)
    constants.dp_bucket_MiB = bucket_MiB;
  if (zero_bucket != -1)
    constants.zero_bucket_elements = zero_bucket;
  if (no_overlap)
    constants.dp_overlap = FALSE;
  if (no_dropout)
    constants.no_dropout = TRUE;
  planner_plan_set_constants (plan, &constants);
  if (!planner_plan_finish (plan, allow_tied, &error))
    return app_cli_refuse (error);
  planner_plan_set_policy (plan, policy);
  PlannerSolveReport solve_report;
  if (optimal)
    {
      PlannerPlan *solved = planner_solve (plan, NULL, &solve_report, &error);
      if (solved == NULL)
        return app_cli_refuse (error);
      g_object_unref (plan);
      plan = solved;
    }
  if (save_name)
    planner_plan_set_name (plan, save_name);

  /* A name the store refuses is refused before -o or the store file is written. */
  if (save_name && !planner_store_check_name (save_name, &error))
    return app_cli_refuse (error);
  if (output)
    {
      g_autofree char *text = planner_plan_to_json (plan);
      if (!app_file_write (output, text, strlen (text), &error))
        return app_cli_refuse (error);
    }
  gint64 saved = 0;
  PlannerStore *store = save_name ? app_cli_get_store (TRUE, &error) : NULL;
  if (save_name
      && (store == NULL
          || (saved = planner_store_save_plan (store, plan, save_name,
                                               parent ? app_cli_db_plan_id (parent) : 0, &error))
                 == 0))
    return app_cli_refuse (error);
  if (json)
    print_json (plan, trace, output, optimal ? &solve_report : NULL);
  else
    print_text (plan, trace, output, optimal ? &solve_report : NULL);
  if (saved && !json)
    printf ("saved as db:%" G_GINT64_FORMAT " in %s\n", saved, planner_store_get_path (store));
  return APP_CLI_EXIT_OK;
}

/* ---- compare ---- */

int
app_cli_compare (const AppCliCommand *command, int argc, char **argv)
{
  gboolean json = FALSE;
  g_autoptr (GOptionContext) context = app_cli_options_new (command, NULL, NULL, TRUE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 2, 2);
  if (status >= 0)
    return status;

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) a = app_cli_load_plan (argv[1], &error);
  if (a == NULL)
    return app_cli_refuse (error);
  g_autoptr (PlannerPlan) b = app_cli_load_plan (argv[2], &error);
  if (b == NULL)
    return app_cli_refuse (error);
  g_autoptr (PlannerCompare) compare = planner_compare_new (a, b, &error);
  if (compare == NULL)
    return app_cli_refuse (error);

  if (json)
    {
      g_autoptr (JsonNode) root = planner_compare_to_json (compare);
      app_cli_json_print (root);
    }
  else
    {
      g_autofree char *text = planner_compare_to_text (compare);
      fputs (text, stdout);
    }
  return APP_CLI_EXIT_OK;
}

/* ---- export ---- */

/* One row per format: its name for --format, a line for --help, and the text it writes. */
typedef struct
{
  const char *name;
  const char *description;
  char *(*write) (PlannerPlan *plan, GError **error);
} ExportFormat;

static char *
export_json (PlannerPlan *plan, GError **error)
{
  return planner_plan_to_json (plan);
}

/* The planner's formats (planner-export.h): what they cannot express goes to stderr; csv
 * takes its measured times from the latest trial run of a stored plan. */
static char *
export_planner (PlannerPlan *plan, const char *name, GError **error)
{
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (PlannerTrialRun) run = app_cli_db_latest_trial_run (plan);
  char *text = planner_export_format_lookup (name)->write (plan, run, notes, error);
  /* dtensor's notes are what the script does otherwise with the same values; the other
   * formats' are what they leave out. */
  for (guint i = 0; i < notes->len; i++)
    fprintf (stderr, "shardscope-cli: %s: %s: %s\n", name,
             strcmp (name, "dtensor") == 0 ? "note" : "not expressed",
             (const char *)g_ptr_array_index (notes, i));
  return text;
}

static char *
export_dtensor (PlannerPlan *plan, GError **error)
{
  return export_planner (plan, "dtensor", error);
}

static char *
export_mindspore (PlannerPlan *plan, GError **error)
{
  return export_planner (plan, "mindspore", error);
}

static char *
export_mindspore_shard (PlannerPlan *plan, GError **error)
{
  return export_planner (plan, "mindspore-shard", error);
}

static char *
export_jax (PlannerPlan *plan, GError **error)
{
  return export_planner (plan, "jax", error);
}

static char *
export_csv (PlannerPlan *plan, GError **error)
{
  return export_planner (plan, "csv", error);
}

static const ExportFormat export_formats[] = {
  { "json", "the plan file itself (planner/README.md, \"Plan JSON\")", export_json },
  { "dtensor", "a PyTorch script: tensor parallelism (DTensor) + FSDP2, with a self-check",
    export_dtensor },
  { "mindspore", "a MindSpore strategy file (JSON; the name must end in .json)", export_mindspore },
  { "mindspore-shard", "MindSpore .shard() calls for the ops the strategy file cannot carry",
    export_mindspore_shard },
  { "jax", "a JAX module: Mesh, PartitionSpecs, sharding constraints", export_jax },
  { "csv", "one row per op and redistribution: layouts, bytes, estimated and measured us",
    export_csv },
};

static char *
export_format_names (void)
{
  GString *names = g_string_new (NULL);
  for (guint i = 0; i < G_N_ELEMENTS (export_formats); i++)
    g_string_append_printf (names, "%s%s", i ? ", " : "", export_formats[i].name);
  return g_string_free (names, FALSE);
}

int
app_cli_export (const AppCliCommand *command, int argc, char **argv)
{
  g_autofree char *format = NULL, *output = NULL;
  g_autofree char *names = export_format_names ();
  g_autofree char *format_help = g_strdup_printf ("Export format: %s", names);
  const GOptionEntry entries[] = {
    { "format", 'f', 0, G_OPTION_ARG_STRING, &format, format_help, "FORMAT" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
      "Write to this file (default: standard output)", "FILE" },
    { NULL },
  };
  g_autoptr (GOptionContext) context = app_cli_options_new (command, entries, NULL, TRUE, NULL);
  GString *description = g_string_new ("Formats:\n");
  for (guint i = 0; i < G_N_ELEMENTS (export_formats); i++)
    g_string_append_printf (description, "  %-16s %s\n", export_formats[i].name,
                            export_formats[i].description);
  g_option_context_set_description (context, description->str);
  g_string_free (description, TRUE);
  int status = app_cli_parse (command, context, &argc, &argv, 1, 1);
  if (status >= 0)
    return status;
  if (format == NULL)
    return app_cli_usage_error (command, "missing --format FORMAT (one of: %s)", names);
  const ExportFormat *chosen = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (export_formats); i++)
    if (strcmp (export_formats[i].name, format) == 0)
      chosen = &export_formats[i];
  if (chosen == NULL)
    return app_cli_usage_error (command, "unknown --format '%s' (one of: %s)", format, names);

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = app_cli_load_plan (argv[1], &error);
  if (plan == NULL)
    return app_cli_refuse (error);
  g_autofree char *text = chosen->write (plan, &error);
  if (text == NULL)
    return app_cli_refuse (error);
  if (output == NULL)
    {
      fputs (text, stdout);
      return APP_CLI_EXIT_OK;
    }
  if (!app_file_write (output, text, strlen (text), &error))
    return app_cli_refuse (error);
  return APP_CLI_EXIT_OK;
}
