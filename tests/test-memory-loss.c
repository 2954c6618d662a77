/* The memory beyond the stored activations (issue 12): the loss path over the logits, an
 * unfused RMSNorm's fp32 copy and ZeRO's gradient bucket buffers, against figures computed by
 * hand from what PyTorch keeps (data/validation/checks/llama-loss-memory.py measures the same
 * rules on transformers' Llama: 12.00 bytes a logit for the loss, 6.01 bytes an element for a
 * LlamaRMSNorm, its bf16 input not kept).
 *
 * The graph: x [2, 4, 8] bf16 (an input) -> RMSNorm (weight [8]) -> h -> MatMul (w [8, 16]) ->
 * the output, named "logits" or not. 136 parameters; 64 elements of h, 128 logits.
 *   parameters 2 x 136 = 272, gradients 272, optimizer (4 + 4 + 4) x 136 = 1632
 *   activations, unfused norm: its fp32 copy of x 4 x 64 + its bf16 normalized output 2 x 64
 *     = 384 (x itself is not kept), the MatMul's input h 2 x 64 = 128, the logits 2 x 128 = 256:
 *     768
 *   loss, unfused: 12 x 128 = 1536 (log_softmax's fp32 output, nll_loss's fp32 gradient of it,
 *     log_softmax's fp32 input gradient)
 *   total 272 + 272 + 1632 + 768 + 1536 = 4480 */

#include "config.h"

#include <string.h>

#include "planner-model.h"
#include "planner-plan-json.h"
#include "planner-plan.h"
#include "test-util.h"

static const char *const graph_text
    = "{\"shardscope_graph\": 1, \"name\": \"norm-head\", \"source\": \"norm-head\", \"tensors\": ["
      "{\"name\": \"x\", \"dtype\": \"bf16\", \"kind\": \"input\", \"shape\": [2, 4, 8]},"
      "{\"name\": \"g\", \"dtype\": \"bf16\", \"kind\": \"parameter\", \"shape\": [8]},"
      "{\"name\": \"w\", \"dtype\": \"bf16\", \"kind\": \"parameter\", \"shape\": [8, 16]}],"
      "\"ops\": ["
      "{\"name\": \"norm\", \"type\": \"RMSNorm\", \"inputs\": [\"x\", \"g\"], \"outputs\": "
      "[\"h\"]},"
      "{\"name\": \"head\", \"type\": \"MatMul\", \"inputs\": [\"h\", \"w\"], \"outputs\": "
      "[\"%s\"]}],"
      "\"outputs\": [\"%s\"]}";

static PlannerPlan *
plan_of (const char *output, const char *mesh, const PlannerCostConstants *c)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = g_strdup_printf (graph_text, output, output);
  g_autoptr (PlannerGraph) graph = planner_graph_from_json (text, &error);
  g_assert_no_error (error);
  PlannerPlan *plan = test_util_plan (graph, mesh, NULL, NULL, NULL);
  planner_plan_set_constants (plan, c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  return plan;
}

static PlannerCostConstants
defaults (void)
{
  PlannerCostConstants c;
  planner_cost_constants_init (&c);
  return c;
}

static void
test_unfused (void)
{
  PlannerCostConstants c = defaults ();
  g_autoptr (PlannerPlan) plan = plan_of ("logits", "dp=1", &c);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->parameters, ==, 272);
  g_assert_cmpuint (m->gradients, ==, 272);
  g_assert_cmpuint (m->optimizer, ==, 1632);
  g_assert_cmpuint (m->activations, ==, 768);
  g_assert_cmpuint (m->loss, ==, 1536);
  g_assert_cmpuint (m->buffers, ==, 0);
  g_assert_cmpuint (m->total, ==, 4480);
}

/* Fused: the norm keeps its input (a graph input: not counted), the fused cross-entropy never
 * holds the logits: activations are h alone, 128; no loss temporaries. */
static void
test_fused (void)
{
  PlannerCostConstants c = defaults ();
  c.loss = PLANNER_LOSS_FUSED;
  c.rms_norm = PLANNER_NORM_FUSED;
  g_autoptr (PlannerPlan) plan = plan_of ("logits", "dp=1", &c);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->activations, ==, 128);
  g_assert_cmpuint (m->loss, ==, 0);
  g_assert_cmpuint (m->total, ==, 272 + 272 + 1632 + 128);
}

/* An output not named "logits" (a graph JSON's, an encoder's hidden states) has no loss path:
 * it is kept (256) and nothing more. */
static void
test_other_output (void)
{
  PlannerCostConstants c = defaults ();
  g_autoptr (PlannerPlan) plan = plan_of ("y", "dp=1", &c);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->activations, ==, 768);
  g_assert_cmpuint (m->loss, ==, 0);
}

/* Two micro-batches of one sequence: one micro-batch's loss at a time, 1536 / 2. */
static void
test_micro_batch (void)
{
  PlannerCostConstants c = defaults ();
  c.micro_batch = 1;
  g_autoptr (PlannerPlan) plan = plan_of ("logits", "dp=1", &c);
  const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
  g_assert_cmpuint (m->activations, ==, 384);
  g_assert_cmpuint (m->loss, ==, 768);
}

/* ZeRO's buckets on dp=2 (the gradients sync there): 5e8 elements of the 2-byte gradients,
 * two buffers at ZeRO-2 with overlap (2e9 bytes), one without overlap or at ZeRO-3 (1e9),
 * 4-byte elements when gradients are reduced in fp32 (4e9), none at ZeRO-1 or with 0
 * elements. The batch is split: the loss is 1536 / 2. */
static void
test_buckets (void)
{
  struct
  {
    guint zero;
    gboolean overlap;
    PlannerGradReduce reduce;
    double elements;
    guint64 buffers;
  } cases[] = {
    { 2, TRUE, PLANNER_GRAD_REDUCE_PARAM, 5e8, 2000000000 },
    { 2, FALSE, PLANNER_GRAD_REDUCE_PARAM, 5e8, 1000000000 },
    { 3, TRUE, PLANNER_GRAD_REDUCE_PARAM, 5e8, 1000000000 },
    { 2, TRUE, PLANNER_GRAD_REDUCE_F32, 5e8, 4000000000 },
    { 1, TRUE, PLANNER_GRAD_REDUCE_PARAM, 5e8, 0 },
    { 2, TRUE, PLANNER_GRAD_REDUCE_PARAM, 0, 0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      PlannerCostConstants c = defaults ();
      c.zero = cases[i].zero;
      c.dp_overlap = cases[i].overlap;
      c.grad_reduce = cases[i].reduce;
      c.zero_bucket_elements = cases[i].elements;
      g_autoptr (PlannerPlan) plan = plan_of ("logits", "dp=2", &c);
      const PlannerMemory *m = &planner_plan_get_totals (plan)->memory;
      g_assert_cmpuint (m->buffers, ==, cases[i].buffers);
      g_assert_cmpuint (m->loss, ==, 768);
      g_assert_cmpuint (m->total, ==,
                        m->parameters + m->gradients + m->optimizer + m->activations + m->loss
                            + m->buffers);
    }
}

/* The options travel in the store's training text and the plan file, only when one differs
 * from its default. */
static void
test_round_trip (void)
{
  PlannerCostConstants c = defaults ();
  g_autofree char *plain = planner_cost_training_to_string (&c);
  g_assert_null (strstr (plain, "loss="));
  c.loss = PLANNER_LOSS_FUSED;
  c.zero_bucket_elements = 2.5e8;
  g_autofree char *text = planner_cost_training_to_string (&c);
  g_assert_nonnull (strstr (text, ";loss=fused;rms_norm=unfused;zero_bucket_elements=250000000"));
  PlannerCostConstants back = defaults ();
  g_assert_true (planner_cost_training_from_string (text, &back));
  g_assert_cmpint (back.loss, ==, PLANNER_LOSS_FUSED);
  g_assert_cmpint (back.rms_norm, ==, PLANNER_NORM_UNFUSED);
  g_assert_cmpfloat (back.zero_bucket_elements, ==, 2.5e8);
  g_assert_false (planner_cost_training_from_string ("loss=chunked", &back));
  g_assert_false (planner_cost_training_from_string ("zero_bucket_elements=-1", &back));

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = plan_of ("logits", "dp=1", &c);
  g_autofree char *json = planner_plan_to_json (plan);
  g_assert_nonnull (strstr (json, "\"zero_bucket_elements\""));
  g_autoptr (PlannerPlan) read
      = planner_plan_from_json_with_graph (json, planner_plan_get_graph (plan), &error);
  g_assert_no_error (error);
  const PlannerCostConstants *rc = planner_plan_get_constants (read);
  g_assert_cmpint (rc->loss, ==, PLANNER_LOSS_FUSED);
  g_assert_cmpfloat (rc->zero_bucket_elements, ==, 2.5e8);
  g_assert_cmpuint (planner_plan_get_totals (read)->memory.loss, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/memory-loss/unfused", test_unfused);
  g_test_add_func ("/planner/memory-loss/fused", test_fused);
  g_test_add_func ("/planner/memory-loss/other-output", test_other_output);
  g_test_add_func ("/planner/memory-loss/micro-batch", test_micro_batch);
  g_test_add_func ("/planner/memory-loss/buckets", test_buckets);
  g_test_add_func ("/planner/memory-loss/round-trip", test_round_trip);
  return g_test_run ();
}
