/* Whole models under the built-in policies and under conflicting pins: the sharded run
 * equals the reference (issue 4, tests). */
#include "config.h"

#include <string.h>

#include "executor-error.h"
#include "executor-test-backend.h"
#include "executor-trial.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-redistribute.h"

static PlannerGraph *
load (const char *name)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  /* Small enough for two cores, large enough that every dim splits over 2x2. */
  options.batch = 4;
  options.seq = 16;
  PlannerGraph *g = planner_zoo_build (name, &options, &error);
  g_assert_no_error (error);
  return g;
}

static PlannerPlan *
propagate (PlannerGraph *g, const char *mesh_text, const char *policy,
           const char *const *pin_texts, guint n_pins)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("cpu-local", &error);
  g_assert_no_error (error);
  g_autoptr (GPtrArray) pins = NULL;
  if (policy)
    {
      pins = planner_policy_expand (policy, g, mesh, NULL, &error);
      g_assert_no_error (error);
    }
  else
    pins = g_ptr_array_new_with_free_func ((GDestroyNotify) planner_pin_free);
  for (guint i = 0; i < n_pins; i++)
    {
      PlannerPin *pin = planner_pin_parse (pin_texts[i], mesh, &error);
      g_assert_no_error (error);
      pin->priority = 1;
      g_ptr_array_add (pins, pin);
    }
  PlannerPropagateOptions options;
  planner_propagate_options_init (&options);
  options.allow_tied_redistribution = TRUE;
  PlannerPlan *plan = planner_propagate (g, mesh, hw, pins, &options, &error);
  g_assert_no_error (error);
  return plan;
}

static void
count_steps (PlannerPlan *plan, guint *kinds)
{
  memset (kinds, 0, sizeof (guint) * PLANNER_N_STEP_KINDS);
  for (guint r = 0; r < planner_plan_get_n_redistributions (plan); r++)
    {
      const PlannerRedistribution *rd = planner_plan_get_redistribution (plan, r);
      for (guint s = 0; s < rd->n_steps; s++)
        kinds[rd->steps[s].kind]++;
    }
}

static ExecutorTrialResult *
check_plan (PlannerPlan *plan, const char *what)
{
  g_autoptr (GError) error = NULL;
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = 1;
  options.warmup = 0;
  options.seed = 11;
  ExecutorTrialResult *res = executor_trial_run_named (plan, test_backend (), &options, NULL,
                                                       &error);
  if (test_backend_skips (error))
    return NULL;
  g_assert_no_error (error);
  guint kinds[PLANNER_N_STEP_KINDS];
  count_steps (plan, kinds);
  g_test_message ("%s: %u redistributions (%u AllReduce, %u AllGather, %u ReduceScatter, "
                  "%u AllToAll, %u Slice), max rel error %.3g, %s",
                  what, planner_plan_get_n_redistributions (plan), kinds[0], kinds[1], kinds[2],
                  kinds[3], kinds[4], res->max_rel_error, res->mismatch ? res->mismatch : "ok");
  g_assert_true (res->passed);
  g_assert_cmpfloat (res->max_rel_error, <=, 1e-5);
  g_assert_cmpuint (res->outputs->len, ==, planner_graph_get_outputs (planner_plan_get_graph (plan))->len);
  return res;
}

typedef struct
{
  const char *model;
  const char *policy;
} PolicyCase;

static void
test_policy (gconstpointer data)
{
  const PolicyCase *c = data;
  g_autoptr (PlannerGraph) g = load (c->model);
  g_autoptr (PlannerPlan) plan = propagate (g, "dp=2,mp=2", c->policy, NULL, 0);
  g_autofree char *what = g_strdup_printf ("%s / %s", c->model, c->policy);
  g_autoptr (ExecutorTrialResult) res = check_plan (plan, what);
  if (res == NULL)
    return;
  /* Every op was timed once. */
  g_assert_cmpuint (res->ops->len, ==, planner_graph_get_n_ops (g));
  if (g_str_equal (c->policy, "megatron"))
    g_assert_cmpuint (planner_plan_get_n_redistributions (plan), >, 0);
}

/* Pins that disagree (batch split here, sequence split there, replicated at the end) make
 * the plan move data with AllToAll and AllGather; the run still equals the reference. */
static void
test_conflicting_pins (gconstpointer data)
{
  const char *model = data;
  g_autoptr (PlannerGraph) g = load (model);
  gboolean llama = g_str_has_prefix (model, "llama");
  const char *const llama_pins[] = {
    "model.layers.0.input_layernorm=[dp,_,_]",
    "model.layers.1.input_layernorm=[_,dp,_]",
    "model.layers.1.mlp.down_proj=[_,dp,mp],[_,mp]",
    "model.norm=[_,_,_]",
  };
  const char *const gpt2_pins[] = {
    "transformer.h.0.ln_1=[dp,_,_]",
    "transformer.h.1.ln_1=[_,dp,_]",
    "transformer.h.1.mlp.c_proj=[_,dp,mp],[mp,_]",
    "transformer.ln_f=[_,_,_]",
  };
  g_autoptr (PlannerPlan) plan = propagate (g, "dp=2,mp=2", NULL, llama ? llama_pins : gpt2_pins,
                                            4);
  guint kinds[PLANNER_N_STEP_KINDS];
  count_steps (plan, kinds);
  g_assert_cmpuint (kinds[PLANNER_STEP_ALL_TO_ALL], >, 0);
  g_assert_cmpuint (kinds[PLANNER_STEP_ALL_GATHER], >, 0);
  g_autofree char *what = g_strdup_printf ("%s / conflicting pins", model);
  /* check_plan asserts the result; NULL when the backend skips (no CUDA device). */
  g_autoptr (ExecutorTrialResult) res = check_plan (plan, what);
  (void) res;
}

/* A corrupted step of a real plan is refused, naming the redistribution. */
static void
test_corrupted_plan (void)
{
  g_autoptr (PlannerGraph) g = load ("gpt2-tiny");
  g_autoptr (PlannerPlan) plan = propagate (g, "dp=2,mp=2", "megatron-sp", NULL, 0);
  g_autoptr (GError) error = NULL;
  PlannerRedistribution *victim = NULL;
  for (guint r = 0; r < planner_plan_get_n_redistributions (plan) && !victim; r++)
    {
      PlannerRedistribution *rd = (PlannerRedistribution *) planner_plan_get_redistribution (plan, r);
      if (rd->n_steps > 0 && rd->steps[0].dim >= 0)
        victim = rd;
    }
  g_assert_nonnull (victim);
  /* Test-only corruption: the step works on the wrong dim. */
  victim->steps[0].dim = (gint8) ((victim->steps[0].dim + 1) % victim->from.rank);
  g_autoptr (ExecutorTrialResult) res
    = executor_trial_run_named (plan, test_backend (), NULL, NULL, &error);
  if (test_backend_skips (error))
    return;
  g_assert_null (res);
  g_assert_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN);
  const PlannerTensor *t = planner_graph_get_tensor (g, victim->tensor);
  g_assert_nonnull (strstr (error->message, t->name));
  g_test_message ("%s", error->message);
}

typedef struct
{
  GCancellable *cancellable;
  guint calls;
  double last;
  gboolean monotonic;
} Progress;

static void
on_progress (double fraction, const char *what, gpointer data)
{
  Progress *p = data;
  p->monotonic &= fraction >= p->last && fraction <= 1.0 && what != NULL;
  p->last = fraction;
  /* Cancel in the middle of the sharded passes: every device must stop, none may hang. */
  if (++p->calls == 150)
    g_cancellable_cancel (p->cancellable);
}

static void
test_progress_cancel (void)
{
  g_autoptr (PlannerGraph) g = load ("gpt2-tiny");
  g_autoptr (PlannerPlan) plan = propagate (g, "dp=2,mp=2", "megatron", NULL, 0);
  g_autoptr (GCancellable) cancellable = g_cancellable_new ();
  g_autoptr (GError) error = NULL;
  Progress p = { cancellable, 0, 0, TRUE };
  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.repeat = 3;
  options.progress = on_progress;
  options.progress_data = &p;
  g_autoptr (ExecutorTrialResult) res = executor_trial_run_named (plan, test_backend (), &options,
                                                                  cancellable, &error);
  if (test_backend_skips (error))
    return;
  g_assert_null (res);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_true (p.monotonic);
  g_assert_cmpuint (p.calls, >=, 150);
}

/* ---- memory ---- */

/* A "Key:   N kB" line of /proc/self/status, in bytes. */
static guint64
status_bytes (const char *key)
{
  g_autofree char *text = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/status", &text, NULL, NULL));
  const char *at = strstr (text, key);
  g_assert_nonnull (at);
  return g_ascii_strtoull (at + strlen (key), NULL, 10) * 1024;
}

/* The estimate against the real peak: in a fresh process (a subprocess of this test), the
 * resident set before the run and the high-water mark after it (VmHWM, which the kernel
 * keeps) differ by what the run held at once. */
static void
test_memory_estimate (gconstpointer data)
{
  const PolicyCase *c = data;
  const char *mesh = c->model;
  if (!g_str_equal (test_backend (), "cpu"))
    {
      g_test_skip ("the estimate is checked against the host's peak on the cpu backend, whose "
                   "buffers are host memory (suite executor)");
      return;
    }
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifdef UNDER_ASAN
  g_test_skip ("ASan's redzones and quarantine inflate the peak (1.9x measured); the estimate "
               "is checked in the plain build");
  return;
#endif
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0,
                              G_TEST_SUBPROCESS_INHERIT_STDOUT | G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_test_trap_assert_passed ();
      return;
    }
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = 16;
  options.seq = 128;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = planner_zoo_build ("gpt2-tiny", &options, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) plan = propagate (g, mesh, c->policy, NULL, 0);
  ExecutorTrialMemory m;
  g_assert_true (executor_trial_estimate_memory (plan, &m, &error));
  g_assert_no_error (error);
  guint64 estimate = executor_trial_memory_host_bytes (&m, TRUE);

  ExecutorTrialOptions trial;
  executor_trial_options_init (&trial);
  trial.repeat = 1;
  trial.warmup = 0;
  guint64 before = status_bytes ("VmRSS:");
  g_autoptr (ExecutorTrialResult) res
      = executor_trial_run_named (plan, "cpu", &trial, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (res->passed);
  guint64 peak = status_bytes ("VmHWM:") - before;
  /* Measured on gpt2-tiny (batch 16, seq 128): the peak is 4-5 % above the estimate (thread
   * stacks, OpenBLAS's buffer, kernel scratch); 20 % either way is the stated tolerance. */
  double ratio = (double)peak / (double)estimate;
  g_printerr ("%s: estimate %" G_GUINT64_FORMAT " B (sources %" G_GUINT64_FORMAT
              ", reference %" G_GUINT64_FORMAT " + results %" G_GUINT64_FORMAT
              ", %u devices x (%" G_GUINT64_FORMAT " + %" G_GUINT64_FORMAT
              ")), measured peak %" G_GUINT64_FORMAT " B, ratio %.3f\n",
              mesh, estimate, m.sources_bytes, m.reference_bytes, m.reference_results_bytes,
              m.n_devices, m.device_bytes, m.device_results_bytes, peak, ratio);
  g_assert_cmpfloat (ratio, >=, 0.8);
  g_assert_cmpfloat (ratio, <=, 1.2);
}

/* Llama-2-70B's parameters, by hand from its config (hidden 8192, intermediate 28672, 80
 * layers, vocab 32000, 64 heads of 128, 8 KV heads): embeddings and lm_head 2 x 32000 x 8192,
 * per layer q and o 8192^2 each, k and v 8192 x 1024 each, the MLP 3 x 8192 x 28672 and two
 * norms of 8192, plus the final norm: 68,976,648,192 (the published figure). */
#define LLAMA_70B_PARAMETERS G_GUINT64_CONSTANT (68976648192)

/* A plan far beyond the machine is refused at once, with the figures, before its 276 GB of
 * parameters are made: the process stays small. */
static void
test_memory_refused (void)
{
  if (!g_str_equal (test_backend (), "cpu"))
    {
      /* The host's check comes first on every backend; the cpu suite runs it. */
      g_test_skip ("the refusal is checked on the cpu backend (suite executor), in a fresh "
                   "process whose high-water mark shows nothing was allocated");
      return;
    }
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_test_trap_assert_passed ();
      return;
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = planner_zoo_build ("llama-70b", NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) plan = propagate (g, "dp=8,mp=8", "megatron", NULL, 0);
  ExecutorTrialMemory m;
  g_assert_true (executor_trial_estimate_memory (plan, &m, &error));
  /* Every parameter as f32 (the storage of f16 on every backend) and input_ids [8,1024] i64. */
  g_assert_cmpuint (m.sources_bytes, ==, LLAMA_70B_PARAMETERS * 4 + 8 * 1024 * 8);
  g_assert_cmpuint (m.n_devices, ==, 64);
  guint64 need = executor_trial_memory_host_bytes (&m, TRUE);
  guint64 have = executor_host_memory_available ();
  g_assert_cmpuint (have, >, 0);
  if (need <= have)
    {
      g_test_skip_printf ("this machine has %" G_GUINT64_FORMAT " bytes free, enough for the "
                          "%" G_GUINT64_FORMAT " the plan needs",
                          have, need);
      return;
    }
  guint64 before = status_bytes ("VmHWM:");
  ExecutorTrialOptions trial;
  executor_trial_options_init (&trial);
  g_autoptr (ExecutorTrialResult) res
      = executor_trial_run_named (plan, "cpu", &trial, NULL, &error);
  g_assert_null (res);
  g_assert_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_OUT_OF_MEMORY);
  g_autofree char *need_text = planner_format_bytes (need);
  g_autofree char *expect
      = g_strdup_printf ("the trial run needs about %s of host memory", need_text);
  if (strstr (error->message, expect) == NULL || strstr (error->message, "available") == NULL)
    g_error ("'%s' lacks '%s'", error->message, expect);
  /* Nothing of the plan's size was allocated: the high-water mark grew by less than 64 MiB. */
  g_assert_cmpuint (status_bytes ("VmHWM:") - before, <, 64 << 20);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  static const char *models[] = { "gpt2-tiny", "llama-tiny" };
  static const char *policies[] = { "megatron", "megatron-sp", "dp" };
  static PolicyCase cases[G_N_ELEMENTS (models) * G_N_ELEMENTS (policies)];
  guint n = 0;
  for (guint m = 0; m < G_N_ELEMENTS (models); m++)
    {
      for (guint p = 0; p < G_N_ELEMENTS (policies); p++)
        {
          cases[n] = (PolicyCase){ models[m], policies[p] };
          g_autofree char *path = g_strdup_printf ("/executor/models/%s/%s", models[m],
                                                   policies[p]);
          g_test_add_data_func (path, &cases[n++], test_policy);
        }
      g_autofree char *path = g_strdup_printf ("/executor/models/%s/conflicting-pins", models[m]);
      g_test_add_data_func (path, models[m], test_conflicting_pins);
    }
  g_test_add_func ("/executor/models/corrupted-step-is-named", test_corrupted_plan);
  g_test_add_func ("/executor/models/progress-and-cancel", test_progress_cancel);
  g_test_add_func ("/executor/models/memory-refused", test_memory_refused);
  /* (mesh, policy) */
  static const PolicyCase memory_cases[] = { { "dp=2,mp=2", "megatron" }, { "dp=4", "dp" } };
  for (guint i = 0; i < G_N_ELEMENTS (memory_cases); i++)
    {
      g_autofree char *path
          = g_strdup_printf ("/executor/models/memory-estimate/%s", memory_cases[i].model);
      g_test_add_data_func (path, &memory_cases[i], test_memory_estimate);
    }
  return g_test_run ();
}
