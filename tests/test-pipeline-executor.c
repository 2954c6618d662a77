#define G_LOG_DOMAIN "test-pipeline-executor"

#include "config.h"

#include <string.h>

#include "executor-test-backend.h"
#include "executor-trial.h"
#include "planner-model.h"
#include "planner-pipeline.h"
#include "planner-policy.h"
#include "planner-propagate.h"

/* Trial runs of pipelined plans (issue 18): each op only on its stage's devices, the
 * activations sent between stages, against the unsharded run of the same graph. */

static PlannerPlan *
tiny_llama_plan (const char *mesh_text, const char *policy, guint micro_batches,
                 PlannerSchedule schedule, guint virtual_stages)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.layers = 4;
  options.seq = 32;
  options.batch = 4;
  g_autoptr (PlannerGraph) graph = planner_model_load ("llama-tiny", &options, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerHardware) hw = planner_hardware_lookup ("cpu-local", &error);
  g_assert_no_error (error);
  g_autoptr (GPtrArray) pins = planner_policy_expand (policy, graph, mesh, NULL, &error);
  g_assert_no_error (error);
  PlannerPropagateOptions popts;
  planner_propagate_options_init (&popts);
  PlannerPlan *plan = planner_propagate (graph, mesh, hw, pins, &popts, &error);
  g_assert_no_error (error);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.micro_batches = micro_batches;
  c.schedule = schedule;
  c.virtual_stages = virtual_stages;
  planner_plan_set_constants (plan, &c);
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  return plan;
}

static ExecutorTrialResult *
trial (PlannerPlan *plan)
{
  g_autoptr (GError) error = NULL;
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = 1;
  options.warmup = 0;
  options.seed = 7;
  ExecutorTrialResult *res
      = executor_trial_run_named (plan, test_backend (), &options, NULL, &error);
  if (test_backend_skips (error))
    return NULL;
  g_assert_no_error (error);
  g_test_message ("max rel error %.3g, %u sends, %s", res->max_rel_error, res->pipeline_sends,
                  res->mismatch ? res->mismatch : "every value matches");
  return res;
}

/* The case: a 4-layer LLaMA on pp=2,mp=2 (layers 0-1 and 2-3), Megatron's tensor
 * parallelism inside each stage. */
static void
test_pp2_mp2 (void)
{
  g_autoptr (PlannerPlan) plan
      = tiny_llama_plan ("pp=2,mp=2", "megatron", 2, PLANNER_SCHEDULE_1F1B, 1);
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, NULL);
  g_assert_nonnull (pl);
  g_autofree char *l0 = planner_pipeline_stage_layers (pl, 0);
  g_autofree char *l1 = planner_pipeline_stage_layers (pl, 1);
  g_assert_cmpstr (l0, ==, "0-1");
  g_assert_cmpstr (l1, ==, "2-3");
  g_autoptr (ExecutorTrialResult) res = trial (plan);
  if (res == NULL)
    return;
  g_assert_null (res->mismatch);
  g_assert_true (res->passed);
  g_assert_cmpfloat (res->max_rel_error, <=, 1e-5);
  /* One boundary, one activation across it (the residual stream after layer 1). */
  g_assert_cmpuint (pl->n_sends, ==, 1);
  g_assert_cmpuint (pl->sends[0].n_tensors, ==, 1);
  g_assert_cmpuint (res->pipeline_sends, ==, 1);
}

/* Interleaved over 2 virtual stages: chunks 0 and 2 on stage 0, 1 and 3 on stage 1, so the
 * activations go 0 -> 1 -> 0 -> 1: three sends. Data parallelism beside it. */
static void
test_interleaved_dp (void)
{
  g_autoptr (PlannerPlan) plan
      = tiny_llama_plan ("dp=2,pp=2", "dp", 2, PLANNER_SCHEDULE_INTERLEAVED, 2);
  g_autoptr (ExecutorTrialResult) res = trial (plan);
  if (res == NULL)
    return;
  g_assert_null (res->mismatch);
  g_assert_true (res->passed);
  g_assert_cmpuint (res->pipeline_sends, ==, 3);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/executor/pipeline/pp2-mp2", test_pp2_mp2);
  g_test_add_func ("/executor/pipeline/interleaved-dp", test_interleaved_dp);
  return g_test_run ();
}
