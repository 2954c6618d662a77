/* Trial runs on meshes with axes of size 1 (issue 11): the executor gets the plan of the mesh
 * without the axis, runs it on the same devices and matches the unsharded reference; on a
 * mesh of one device the run is the reference's own arithmetic, error 0. */
#include "config.h"

#include <string.h>

#include "executor-error.h"
#include "executor-test-backend.h"
#include "executor-trial.h"
#include "planner-error.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"

static PlannerGraph *
load (const char *name)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = 4;
  options.seq = 16;
  PlannerGraph *g = planner_zoo_build (name, &options, &error);
  g_assert_no_error (error);
  return g;
}

/* @policy's pins on @mesh_text; where the mesh has no tp axis for it, @pin_texts instead. */
static PlannerPlan *
propagate (PlannerGraph *g, const char *mesh_text, const char *policy, const GPtrArray *pin_texts)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("cpu-local", &error);
  g_assert_no_error (error);
  g_autoptr (GPtrArray) pins = planner_policy_expand (policy, g, mesh, NULL, &error);
  if (pins == NULL)
    {
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS);
      g_assert_nonnull (pin_texts);
      g_clear_error (&error);
      pins = g_ptr_array_new_with_free_func ((GDestroyNotify)planner_pin_free);
      for (guint i = 0; i < pin_texts->len; i++)
        {
          PlannerPin *pin = planner_pin_parse (g_ptr_array_index (pin_texts, i), mesh, &error);
          g_assert_no_error (error);
          g_ptr_array_add (pins, pin);
        }
    }
  PlannerPropagateOptions options;
  planner_propagate_options_init (&options);
  options.allow_tied_redistribution = TRUE;
  PlannerPlan *plan = planner_propagate (g, mesh, hw, pins, &options, &error);
  g_assert_no_error (error);
  return plan;
}

static ExecutorTrialResult *
run (PlannerPlan *plan)
{
  g_autoptr (GError) error = NULL;
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = 0;
  options.warmup = 0;
  options.seed = 7;
  ExecutorTrialResult *res
      = executor_trial_run_named (plan, test_backend (), &options, NULL, &error);
  if (test_backend_skips (error))
    return NULL;
  g_assert_no_error (error);
  g_assert_true (res->passed);
  g_assert_cmpfloat (res->max_rel_error, <=, 1e-5);
  return res;
}

typedef struct
{
  const char *model, *policy, *with, *without;
} Case;

static const Case cases[] = {
  { "gpt2-tiny", "megatron", "dp=1,mp=2", "mp=2" },
  { "gpt2-tiny", "megatron-sp", "dp=2,mp=1", "dp=2" },
  { "gpt2-tiny", "megatron-sp", "dp=2,x=1,mp=2", "dp=2,mp=2" },
  { "llama-tiny", "megatron-sp", "dp=1,mp=2", "mp=2" },
  { "llama-tiny", "megatron", "dp=2,mp=1,sp=1", "dp=2" },
  { "llama-tiny", "dp", "dp=2,x=1,mp=2", "dp=2,mp=2" },
};

/* The same devices do the same work: the run on the size-1 mesh has the same device count,
 * the same redistributions, step by step, and the same errors to the last bit. */
static void
test_against_smaller_mesh (gconstpointer data)
{
  const Case *c = data;
  g_autoptr (PlannerGraph) g = load (c->model);
  g_autoptr (PlannerPlan) with = propagate (g, c->with, c->policy, NULL);
  g_autoptr (PlannerPlan) without
      = propagate (g, c->without, c->policy, planner_plan_get_pins (with));
  g_autoptr (ExecutorTrialResult) a = run (with);
  if (a == NULL)
    return;
  g_autoptr (ExecutorTrialResult) b = run (without);
  g_test_message ("%s %s on %s: %u devices, %u redistributions, max abs error %.3g", c->model,
                  c->policy, c->with, a->n_devices, a->redistributions->len, a->max_abs_error);
  g_assert_cmpuint (a->n_devices, ==, b->n_devices);
  g_assert_cmpfloat (a->max_abs_error, ==, b->max_abs_error);
  g_assert_cmpfloat (a->max_rel_error, ==, b->max_rel_error);
  g_assert_cmpuint (a->redistributions->len, ==, b->redistributions->len);
  for (guint i = 0; i < a->redistributions->len; i++)
    {
      const ExecutorTiming *ta = &g_array_index (a->redistributions, ExecutorTiming, i);
      const ExecutorTiming *tb = &g_array_index (b->redistributions, ExecutorTiming, i);
      g_assert_cmpstr (ta->name, ==, tb->name);
      g_assert_cmpstr (ta->what, ==, tb->what);
    }
}

/* dp=1,mp=1 is one device: nothing is split or moved, and each op runs the reference's
 * kernel on the whole tensors, so the outputs equal the reference exactly. */
static void
test_one_device (gconstpointer data)
{
  const char *model = data;
  static const char *const policies[] = { "megatron", "megatron-sp", "dp" };
  g_autoptr (PlannerGraph) g = load (model);
  for (guint p = 0; p < G_N_ELEMENTS (policies); p++)
    {
      g_autoptr (PlannerPlan) plan = propagate (g, "dp=1,mp=1", policies[p], NULL);
      g_assert_cmpuint (planner_plan_get_n_redistributions (plan), ==, 0);
      g_autoptr (ExecutorTrialResult) res = run (plan);
      if (res == NULL)
        return;
      g_assert_cmpuint (res->n_devices, ==, 1);
      g_assert_cmpuint (res->redistributions->len, ==, 0);
      g_assert_cmpfloat (res->max_abs_error, ==, 0);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/executor/size1/%s/%s/%s", cases[i].model,
                                               cases[i].policy, cases[i].with);
      g_test_add_data_func (path, &cases[i], test_against_smaller_mesh);
    }
  g_test_add_data_func ("/executor/size1/one-device/gpt2-tiny", "gpt2-tiny", test_one_device);
  g_test_add_data_func ("/executor/size1/one-device/llama-tiny", "llama-tiny", test_one_device);
  return g_test_run ();
}
