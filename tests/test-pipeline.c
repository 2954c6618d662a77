#define G_LOG_DOMAIN "test-pipeline"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-export.h"
#include "planner-pipeline.h"
#include "planner-plan-json.h"
#include "planner-plan.h"
#include "test-util.h"

/* Pipeline parallelism (issue 18) against hand-computed values.
 *
 * LLaMA-2-70B (80 layers, hidden 8192, 64 heads of 128, 8 kv heads, MLP 28672, vocabulary
 * 32000, bf16) on pp=4,dp=2,mp=8 with Megatron's pins, sequence 1024, 8 micro-batches of one
 * sequence per data-parallel replica (batch 16):
 * - the schedule's bubble fraction (p - 1) / (m + p - 1) = 3 / 11; interleaved over v = 2,
 *   (p - 1) / (v m + p - 1) = 3 / 19;
 * - micro-batches in flight: 1F1B p - s = 4, 3, 2, 1; GPipe m = 8 on every stage;
 *   interleaved (Megatron-LM's warm-up 2 (p - s - 1) + (v - 1) p, plus one, in chunks of 1/v
 *   of the stage): (2 * 3 + 4 + 1) / 2 = 5.5 on stage 0 (= p + (p - 1) / v, Korthikanti et
 *   al. 2022), (0 + 4 + 1) / 2 = 2.5 on stage 3;
 * - one send between stages: the residual stream of one sequence, 1024 x 8192 x 2 bytes =
 *   16 MiB per device and micro-batch (dp splits the batch, mp holds partial sums of the
 *   whole hidden state), over InfiniBand (pp crosses nodes), an eighth of it from each mp
 *   member (scatter/gather): latency + bytes / 8 / bandwidth;
 * - parameters of a middle stage (20 layers): per layer q and o 8192^2, k and v 8192 x 1024,
 *   MLP 3 x 8192 x 28672 split over mp = 8, and two norms of 8192 replicated:
 *   (2 * 8192^2 + 2 * 8192 * 1024 + 3 * 8192 * 28672) / 8 + 2 * 8192 = 106971136 per layer,
 *   2139422720 for 20, 2 bytes each in bf16. */

#define SEQ 1024
#define HIDDEN 8192
#define LAYER_PARAMS_PER_DEVICE 106971136.0

static PlannerPlan *
llama70b_plan (PlannerSchedule schedule, guint micro_batches, guint virtual_stages,
               const char *stages, GError **error)
{
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = 2 * (gint64)micro_batches;
  options.seq = SEQ;
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", &options);
  PlannerPlan *plan = test_util_plan (graph, "pp=4,dp=2,mp=8", NULL, "megatron", NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.schedule = schedule;
  c.micro_batches = micro_batches;
  c.virtual_stages = virtual_stages;
  if (stages)
    g_strlcpy (c.stages, stages, sizeof c.stages);
  planner_plan_set_constants (plan, &c);
  if (!planner_plan_finish (plan, FALSE, error))
    g_clear_object (&plan);
  return plan;
}

static PlannerPipeline *
pipeline_of (PlannerPlan *plan)
{
  g_autoptr (GError) error = NULL;
  PlannerPipeline *pl = planner_pipeline_new (plan, FALSE, &error);
  g_assert_no_error (error);
  g_assert_nonnull (pl);
  return pl;
}

static void
test_llama70b_1f1b (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPipeline) pl = pipeline_of (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerHardware *hw = planner_plan_get_hardware (plan);

  g_assert_cmpuint (pl->p, ==, 4);
  g_assert_cmpuint (pl->m, ==, 8);
  g_assert_cmpuint (pl->n_stages, ==, 4);
  g_assert_cmpfloat_with_epsilon (pl->bubble_fraction, 3.0 / 11.0, 1e-15);
  for (guint s = 0; s < 4; s++)
    {
      const PlannerPipelineStage *st = &pl->stages[s];
      g_autofree char *layers = planner_pipeline_stage_layers (pl, s);
      g_autofree char *expected = g_strdup_printf ("%u-%u", 20 * s, 20 * s + 19);
      g_assert_cmpstr (layers, ==, expected);
      g_assert_cmpuint (st->n_layers, ==, 20);
      /* pp is the major axis: stage s is devices 16 s .. 16 s + 15. */
      guint64 n = 0;
      g_autofree guint64 *devices = planner_pipeline_stage_devices (pl, mesh, s, &n);
      g_assert_cmpuint (n, ==, 16);
      for (guint64 d = 0; d < n; d++)
        g_assert_cmpuint (devices[d], ==, 16 * s + d);
      g_assert_cmpfloat (st->in_flight, ==, 4.0 - s);
    }
  /* The middle stages hold exactly 20 layers' parameters (the first adds the embedding, the
   * last the final norm and the head). */
  g_assert_cmpuint (pl->stages[1].memory.parameters, ==,
                    (guint64)(20 * LAYER_PARAMS_PER_DEVICE * 2));
  g_assert_cmpuint (pl->stages[2].memory.parameters, ==,
                    (guint64)(20 * LAYER_PARAMS_PER_DEVICE * 2));
  /* Mixed-precision Adam: 16 bytes a parameter. */
  g_assert_cmpuint (pl->stages[1].memory.parameters + pl->stages[1].memory.gradients
                        + pl->stages[1].memory.optimizer,
                    ==, (guint64)(20 * LAYER_PARAMS_PER_DEVICE * 16));
  /* 1F1B: the activations of stage s are (p - s) micro-batches' worth. */
  for (guint s = 1; s < 3; s++)
    g_assert_cmpfloat_with_epsilon ((double)pl->stages[s].memory.activations
                                        / (double)pl->stages[2].memory.activations,
                                    (4.0 - s) / 2.0, 1e-9);

  /* Three sends, each one sequence's hidden state per device. */
  const PlannerLink *ib = planner_hardware_axis_link (hw, mesh, 0);
  g_assert_cmpint (planner_hardware_axis_link_kind (hw, mesh, 0), ==, PLANNER_LINK_INTER);
  g_assert_cmpuint (pl->n_sends, ==, 3);
  for (guint k = 0; k < 3; k++)
    {
      const PlannerPipelineSend *send = &pl->sends[k];
      g_assert_cmpuint (send->from_stage, ==, k);
      g_assert_cmpuint (send->to_stage, ==, k + 1);
      g_assert_cmpuint (send->n_tensors, ==, 1);
      g_assert_cmpuint (send->bytes, ==, (guint64)SEQ * HIDDEN * 2);
      g_assert_cmpint (send->link, ==, PLANNER_LINK_INTER);
      /* Partial sums over mp (NVLink): reduce-scattered over the 8 before the send, gathered
       * after it (the AllReduce the plan charges anyway), so one eighth crosses InfiniBand. */
      g_assert_cmpuint (send->scatter, ==, 8);
      g_assert_cmpfloat_with_epsilon (
          send->time_s, ib->latency_us * 1e-6 + SEQ * HIDDEN * 2.0 / 8 / (ib->bandwidth_GBps * 1e9),
          1e-12);
    }
  /* A middle stage sends activations forward and gradients back: two sends a micro-batch. */
  g_assert_cmpfloat_with_epsilon (pl->stages[1].comm_s, 2 * pl->sends[0].time_s, 1e-15);
  g_assert_cmpfloat_with_epsilon (pl->stages[0].comm_s, pl->sends[0].time_s, 1e-15);

  /* The step: the bottleneck's work, its sends and the bubble, (sum - max) / v of the
   * stages' micro-batch times, which is (p - 1) micro-batches on balanced stages. */
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  double sum = 0, largest = 0;
  for (guint s = 0; s < 4; s++)
    {
      sum += pl->stages[s].micro_batch_s;
      largest = MAX (largest, pl->stages[s].micro_batch_s);
    }
  g_assert_cmpfloat_with_epsilon (t->breakdown.pipeline_bubble, sum - largest, 1e-12);
  g_assert_cmpfloat (t->breakdown.pipeline_bubble, >, 2.9 * largest);
  g_assert_cmpfloat (t->breakdown.pipeline_bubble, <=, 3.0 * largest);
  g_assert_cmpfloat_with_epsilon (t->breakdown.pipeline_comm, 8 * pl->stages[pl->bottleneck].comm_s,
                                  1e-12);
  /* The schedule run slot by slot takes what the closed form says, m micro-batches of the
   * slowest stage plus the bubble, to within the stages' imbalance. */
  double run = planner_pipeline_schedule (pl, NULL);
  g_test_message ("1F1B run slot by slot: %.6f s, closed form %.6f s", run,
                  8 * largest + t->breakdown.pipeline_bubble);
  g_assert_cmpfloat (fabs (run / (8 * largest + t->breakdown.pipeline_bubble) - 1), <, 0.01);
  g_assert_cmpfloat_with_epsilon (t->step_time_s, planner_step_breakdown_total (&t->breakdown),
                                  1e-12);
  g_assert_cmpuint (t->micro_batches, ==, 8);
  g_assert_cmpuint (t->memory.total, ==, pl->stages[0].memory.total);

  /* Where torch.distributed.pipelining would split the model. */
  g_auto (GStrv) split = planner_pipeline_split_modules (pl, planner_plan_get_graph (plan));
  g_assert_cmpuint (g_strv_length (split), ==, 3);
  g_assert_cmpstr (split[0], ==, "model.layers.20");
  g_assert_cmpstr (split[1], ==, "model.layers.40");
  g_assert_cmpstr (split[2], ==, "model.layers.60");
  g_assert_cmpint (planner_pipeline_op_stage (pl, 0), ==, 0);
  g_assert_cmpint (
      planner_pipeline_op_stage (pl, planner_graph_get_n_ops (planner_plan_get_graph (plan)) - 1),
      ==, 3);
}

static void
test_gpipe_in_flight (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) gpipe = llama70b_plan (PLANNER_SCHEDULE_GPIPE, 8, 1, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) f1b1 = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPipeline) a = pipeline_of (gpipe);
  g_autoptr (PlannerPipeline) b = pipeline_of (f1b1);
  for (guint s = 0; s < 4; s++)
    {
      g_assert_cmpfloat (a->stages[s].in_flight, ==, 8);
      /* The same per micro-batch, 8 against 4 - s of them in flight. */
      g_assert_cmpfloat_with_epsilon ((double)a->stages[s].memory.activations
                                          / (double)b->stages[s].memory.activations,
                                      8.0 / (4.0 - s), 1e-9);
      g_assert_cmpuint (a->stages[s].memory.parameters, ==, b->stages[s].memory.parameters);
    }
  /* The same bubble: the schedules differ in memory only. */
  g_assert_cmpfloat (a->bubble_fraction, ==, b->bubble_fraction);
  g_assert_cmpfloat_with_epsilon (planner_plan_get_totals (gpipe)->step_time_s,
                                  planner_plan_get_totals (f1b1)->step_time_s, 1e-12);
}

static void
test_interleaved (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = llama70b_plan (PLANNER_SCHEDULE_INTERLEAVED, 8, 2, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPipeline) pl = pipeline_of (plan);

  g_assert_cmpuint (pl->n_chunks, ==, 8);
  g_assert_cmpfloat_with_epsilon (pl->bubble_fraction, 3.0 / 19.0, 1e-15);
  const double in_flight[] = { 5.5, 4.5, 3.5, 2.5 };
  const char *const layers[] = { "0-9,40-49", "10-19,50-59", "20-29,60-69", "30-39,70-79" };
  for (guint s = 0; s < 4; s++)
    {
      g_autofree char *text = planner_pipeline_stage_layers (pl, s);
      g_assert_cmpstr (text, ==, layers[s]);
      g_assert_cmpfloat (pl->stages[s].in_flight, ==, in_flight[s]);
    }
  /* Korthikanti et al. 2022: stage 0 holds p (1 + (p - 1) / (p v)) micro-batches. */
  g_assert_cmpfloat (pl->stages[0].in_flight, ==, 4 * (1 + 3.0 / 8));
  /* Seven boundaries; the fourth wraps from the last stage to the first. */
  g_assert_cmpuint (pl->n_sends, ==, 7);
  g_assert_cmpuint (pl->sends[3].from_stage, ==, 3);
  g_assert_cmpuint (pl->sends[3].to_stage, ==, 0);
  /* Each device now sends twice as often: four sends a micro-batch on a middle stage. */
  g_assert_cmpfloat_with_epsilon (pl->stages[1].comm_s, 4 * pl->sends[0].time_s, 1e-15);
  /* Its bubble is (sum - max) / v of the stages' micro-batch times; about half of 1F1B's on
   * the same stages (a little more: twice the sends). */
  double sum = 0, largest = 0;
  for (guint s = 0; s < 4; s++)
    {
      sum += pl->stages[s].micro_batch_s;
      largest = MAX (largest, pl->stages[s].micro_batch_s);
    }
  g_assert_cmpfloat_with_epsilon (planner_plan_get_totals (plan)->breakdown.pipeline_bubble,
                                  (sum - largest) / 2, 1e-12);
  g_autoptr (PlannerPlan) f1b1 = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, NULL, &error);
  g_assert_no_error (error);
  double ratio = planner_plan_get_totals (plan)->breakdown.pipeline_bubble
                 / planner_plan_get_totals (f1b1)->breakdown.pipeline_bubble;
  g_assert_cmpfloat (ratio, >, 0.5);
  g_assert_cmpfloat (ratio, <, 0.53);
}

static void
test_explicit_stages (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan
      = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, "0-9,10-39,40-59,60-79", &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPipeline) pl = pipeline_of (plan);
  const guint n[] = { 10, 30, 20, 20 };
  for (guint s = 0; s < 4; s++)
    g_assert_cmpuint (pl->stages[s].n_layers, ==, n[s]);
  g_assert_cmpuint (pl->stages[1].memory.parameters, ==,
                    (guint64)(30 * LAYER_PARAMS_PER_DEVICE * 2));
  /* The 30-layer stage is the bottleneck. */
  g_assert_cmpuint (pl->bottleneck, ==, 1);

  g_autoptr (PlannerPlan) gap
      = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, "0-9,11-39,40-59,60-79", &error);
  test_util_assert_error (error, PLANNER_ERROR_PARSE, "range 1 '11-39' must start at layer 10");
  g_assert_null (gap);
  g_clear_error (&error);
  g_autoptr (PlannerPlan) three
      = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, "0-39,40-59,60-79", &error);
  test_util_assert_error (error, PLANNER_ERROR_PARSE, "gives 3 layer ranges, the pipeline has 4");
  g_assert_null (three);
  g_clear_error (&error);
  g_autoptr (PlannerPlan) short_
      = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, "0-9,10-39,40-59,60-78", &error);
  test_util_assert_error (error, PLANNER_ERROR_PARSE, "ends at layer 78");
  g_assert_null (short_);
}

static void
test_refusals (void)
{
  g_autoptr (GError) error = NULL;
  /* 6 micro-batches in groups of 4. */
  g_autoptr (PlannerPlan) a = llama70b_plan (PLANNER_SCHEDULE_INTERLEAVED, 6, 2, NULL, &error);
  test_util_assert_error (error, PLANNER_ERROR_NOT_DIVISIBLE,
                          "6 micro-batches is not a multiple of 4");
  g_assert_null (a);
  g_clear_error (&error);
  g_autoptr (PlannerPlan) b = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 2, NULL, &error);
  test_util_assert_error (error, PLANNER_ERROR_INVALID_MESH, "need the interleaved schedule");
  g_assert_null (b);
  g_clear_error (&error);
  /* 80 layers cannot fill 4 x 32 chunks. */
  g_autoptr (PlannerPlan) c = llama70b_plan (PLANNER_SCHEDULE_INTERLEAVED, 8, 32, NULL, &error);
  test_util_assert_error (error, PLANNER_ERROR_INVALID_MESH, "fewer than the 128 pipeline chunks");
  g_assert_null (c);
}

/* The pp axis splits no tensor: a plan on pp=2,mp=2 has the layouts of the same plan on mp=2. */
static void
test_layouts_as_without_pp (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model_sized ("llama-tiny", 4, 64);
  g_autoptr (PlannerPlan) with = test_util_plan (graph, "pp=2,mp=2", NULL, "megatron", NULL);
  g_autoptr (PlannerPlan) without = test_util_plan (graph, "mp=2", NULL, "megatron", NULL);
  g_autoptr (GError) error = NULL;
  g_assert_true (planner_plan_finish (with, FALSE, &error));
  g_assert_no_error (error);
  g_assert_true (planner_plan_finish (without, FALSE, &error));
  const PlannerMesh *m1 = planner_plan_get_mesh (with), *m2 = planner_plan_get_mesh (without);
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      g_autofree char *a = planner_layout_to_string (planner_plan_get_tensor_layout (with, t), m1);
      g_autofree char *b
          = planner_layout_to_string (planner_plan_get_tensor_layout (without, t), m2);
      g_assert_cmpstr (a, ==, b);
    }
  g_assert_cmpuint (planner_plan_get_n_redistributions (with), ==,
                    planner_plan_get_n_redistributions (without));
}

/* A tied embedding (GPT-2's wte: the lookup on stage 0, the head on stage 1) is held by both
 * stages, whose gradients are summed once per step: an AllReduce of 2 over the pp link,
 * 2 alpha + 2 (1/2) n / B, n = 512 x 64 x 2 bytes. */
static void
test_tied_embedding (void)
{
  static const char *const config
      = "{\"model_type\": \"gpt2\", \"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 512,"
        " \"n_positions\": 128, \"n_embd\": 64, \"n_layer\": 4, \"n_head\": 4,"
        " \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-05}";
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = 4;
  options.seq = 128;
  options.dtype_set = TRUE;
  options.dtype = PLANNER_DTYPE_BF16;
  g_autoptr (PlannerGraph) graph = planner_hf_import_json (config, &options, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "pp=2", NULL, NULL, NULL);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  g_autoptr (PlannerPipeline) pl = pipeline_of (plan);
  const PlannerLink *link = planner_hardware_axis_link (planner_plan_get_hardware (plan),
                                                        planner_plan_get_mesh (plan), 0);
  double expected = 2 * link->latency_us * 1e-6 + 512.0 * 64 * 2 / (link->bandwidth_GBps * 1e9);
  for (guint s = 0; s < 2; s++)
    g_assert_cmpfloat_with_epsilon (pl->stages[s].shared_sync_s, expected, 1e-15);
  /* Both stages hold the table's model states. */
  g_assert_cmpuint (pl->stages[0].memory.parameters, >=, 512 * 64 * 2);
  g_assert_cmpuint (pl->stages[1].memory.parameters, >=, 512 * 64 * 2);
}

/* MindSpore's strategy file of a pipelined plan: each op's stage, and the device matrix of a
 * stage (mp=2 of pp=2,mp=2: [2], not [2, 2]). */
static void
test_mindspore_stages (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = test_util_model_sized ("llama-tiny", 4, 64);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "pp=2,mp=2", NULL, "megatron", NULL);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *text = planner_export_mindspore (plan, notes);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *root = test_util_parse_object (parser, text);
  JsonObject *items = json_object_get_object_member (root, "parallel_strategy_item");
  g_assert_cmpint (
      json_object_get_int_member (
          json_object_get_object_member (items, "MatMul_model.layers.1.mlp.down_proj.weight"), "stage"),
      ==, 0);
  g_assert_cmpint (
      json_object_get_int_member (
          json_object_get_object_member (items, "MatMul_model.layers.2.self_attn.q_proj.weight"), "stage"),
      ==, 1);
  g_assert_cmpint (
      json_object_get_int_member (json_object_get_object_member (items, "MatMul_lm_head.weight"), "stage"), ==,
      1);
  JsonObject *layouts = json_object_get_object_member (root, "parallel_layout_item");
  JsonArray *dev = json_object_get_array_member (
      json_object_get_object_member (layouts, "model.layers.2.self_attn.q_proj.weight"),
      "dev_matrix");
  g_assert_cmpuint (json_array_get_length (dev), ==, 1);
  g_assert_cmpint (json_array_get_int_element (dev, 0), ==, 2);
}

/* The DTensor script says how to run the pipeline, and does not take pp for data parallelism. */
static void
test_dtensor_comment (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = llama70b_plan (PLANNER_SCHEDULE_1F1B, 8, 1, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *text = planner_export_dtensor (plan, notes, &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (text,
                            "# Pipeline over pp: 4 stages; with torch.distributed.pipelining, "
                            "split the model at the start of model.layers.20, "
                            "model.layers.40, model.layers.60 (SplitPoint.BEGINNING)"));
  g_assert_nonnull (strstr (text, "run Schedule1F1B with n_microbatches=8."));
  g_assert_null (strstr (text, "pp (DP_DIMS)"));
  g_assert_null (strstr (text, "+pp"));
  g_assert_nonnull (strstr (text, "Data parallelism over dp (DP_DIMS)"));
}

/* The schedules run slot by slot, against the textbook figures for equal stages (forward 1,
 * backward 2 a micro-batch, p = 4, m = 8): GPipe and 1F1B take (m + p - 1)(f + b) = 33;
 * interleaved over v = 2, m (f + b) + (p - 1)(f + b) / v = 24 + 4.5 = 28.5 (Narayanan et al.
 * 2021, 2.2.2). The micro-batches in flight are those in_flight() counts: m, p - s,
 * (2 (p - s - 1) + (v - 1) p + 1) / v. */
static void
test_simulate (void)
{
  const double f[] = { 1, 1, 1, 1 }, b[] = { 2, 2, 2, 2 };
  double held[4];
  g_autoptr (GArray) slots = g_array_new (FALSE, TRUE, sizeof (PlannerPipelineSlot));

  g_assert_cmpfloat (planner_pipeline_simulate (PLANNER_SCHEDULE_GPIPE, 4, 1, 8, f, b, slots, held),
                     ==, 33);
  g_assert_cmpuint (slots->len, ==, 4 * 2 * 8);
  for (guint s = 0; s < 4; s++)
    g_assert_cmpfloat (held[s], ==, 8);

  g_array_set_size (slots, 0);
  g_assert_cmpfloat (planner_pipeline_simulate (PLANNER_SCHEDULE_1F1B, 4, 1, 8, f, b, slots, held),
                     ==, 33);
  for (guint s = 0; s < 4; s++)
    g_assert_cmpfloat (held[s], ==, 4 - s);
  /* Stage 0 starts with p - 1 = 3 forwards, then alternates. */
  const PlannerPipelineSlot *first = &g_array_index (slots, PlannerPipelineSlot, 0);
  g_assert_false (first[2].backward);
  g_assert_false (first[3].backward);
  g_assert_true (first[4].backward);
  g_assert_cmpuint (first[4].micro_batch, ==, 0);
  /* The last stage's first backward follows its first forward at once. */
  const PlannerPipelineSlot *last = &g_array_index (slots, PlannerPipelineSlot, 3 * 16);
  g_assert_false (last[0].backward);
  g_assert_true (last[1].backward);
  g_assert_cmpfloat (last[1].start, ==, 4);

  g_assert_cmpfloat_with_epsilon (
      planner_pipeline_simulate (PLANNER_SCHEDULE_INTERLEAVED, 4, 2, 8, f, b, NULL, held), 28.5,
      1e-12);
  for (guint s = 0; s < 4; s++)
    g_assert_cmpfloat (held[s], ==, (2.0 * (4 - s - 1) + 4 + 1) / 2);
}

/* The largest stage's compute per step (no sends: the split balances the layers' work). */
static double
largest_stage (const char *stages)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = test_util_model_sized ("llama-tiny", 5, 64);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "pp=2", NULL, NULL, NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  g_strlcpy (c.stages, stages, sizeof c.stages);
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  g_autoptr (PlannerPipeline) pl = pipeline_of (plan);
  double largest = 0;
  for (guint s = 0; s < 2; s++)
    {
      const PlannerStepBreakdown *b = &pl->stages[s].breakdown;
      largest = MAX (largest, b->forward + b->backward + b->recompute + b->tp_comm_exposed);
    }
  return largest;
}

/* The default split of 5 layers over 2 stages is the one whose larger stage is smallest, of
 * the 4 there are (the embedding goes with the first stage, the head with the second). */
static void
test_balance (void)
{
  double best = largest_stage ("");
  for (guint k = 1; k < 5; k++)
    {
      g_autofree char *split = g_strdup_printf ("0-%u,%u-4", k - 1, k);
      double v = largest_stage (split);
      g_test_message ("%s: %.3f us", split, v * 1e6);
      g_assert_cmpfloat (best, <=, v);
    }
}

/* The options survive the plan file and the store's training text. */
static void
test_roundtrip (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = llama70b_plan (
      PLANNER_SCHEDULE_INTERLEAVED, 8, 2, "0-9,10-19,20-29,30-39,40-49,50-59,60-69,70-79", &error);
  g_assert_no_error (error);
  g_autofree char *text = planner_plan_to_json (plan);
  g_autoptr (PlannerPlan) back = planner_plan_from_json (text, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, back));
  const PlannerCostConstants *c = planner_plan_get_constants (back);
  g_assert_cmpint (c->schedule, ==, PLANNER_SCHEDULE_INTERLEAVED);
  g_assert_cmpuint (c->micro_batches, ==, 8);
  g_assert_cmpuint (c->virtual_stages, ==, 2);
  g_assert_cmpstr (c->stages, ==, "0-9,10-19,20-29,30-39,40-49,50-59,60-69,70-79");
  g_assert_cmpfloat (planner_plan_get_totals (back)->breakdown.pipeline_bubble, ==,
                     planner_plan_get_totals (plan)->breakdown.pipeline_bubble);

  g_autofree char *training = planner_cost_training_to_string (c);
  PlannerCostConstants read;
  planner_cost_constants_init (&read);
  g_assert_true (planner_cost_training_from_string (training, &read));
  g_assert_cmpint (read.schedule, ==, c->schedule);
  g_assert_cmpuint (read.micro_batches, ==, 8);
  g_assert_cmpuint (read.virtual_stages, ==, 2);
  g_assert_cmpstr (read.stages, ==, c->stages);
  /* Without pipeline options the text is what it was before them. */
  PlannerCostConstants plain;
  planner_cost_constants_init (&plain);
  g_autofree char *plain_text = planner_cost_training_to_string (&plain);
  g_assert_null (strstr (plain_text, "schedule"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/pipeline/llama70b-1f1b", test_llama70b_1f1b);
  g_test_add_func ("/planner/pipeline/gpipe-in-flight", test_gpipe_in_flight);
  g_test_add_func ("/planner/pipeline/interleaved", test_interleaved);
  g_test_add_func ("/planner/pipeline/explicit-stages", test_explicit_stages);
  g_test_add_func ("/planner/pipeline/refusals", test_refusals);
  g_test_add_func ("/planner/pipeline/layouts-as-without-pp", test_layouts_as_without_pp);
  g_test_add_func ("/planner/pipeline/roundtrip", test_roundtrip);
  g_test_add_func ("/planner/pipeline/tied-embedding", test_tied_embedding);
  g_test_add_func ("/planner/pipeline/mindspore-stages", test_mindspore_stages);
  g_test_add_func ("/planner/pipeline/dtensor-comment", test_dtensor_comment);
  g_test_add_func ("/planner/pipeline/simulate", test_simulate);
  g_test_add_func ("/planner/pipeline/balance", test_balance);
  return g_test_run ();
}
