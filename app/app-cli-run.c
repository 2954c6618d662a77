#define G_LOG_DOMAIN "app-cli-run"

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "app-cli.h"
#include "app-file.h"
#include "app-trial-store.h"
#include <unistd.h>

#include "executor-calibrate.h"
#include "executor-error.h"
#include "executor-trial.h"
#include "planner-cost.h"
#include "planner-plan-json.h"

/* `run` proves a plan on a backend; `calibrate` measures a hardware profile there. */

/* Bounds of the numeric options: far beyond any use, short of what would run for days or
 * allocate without end. */
#define MAX_REPEAT 10000
#define MAX_DEVICES 4096
#define MAX_COLLECTIVE_BYTES ((gint64)1 << 32)

/* --backend NAME into the string @name: the first option of both commands. */
#define BACKEND_ENTRY(name)                                                                    \
  { "backend", 'b', 0, G_OPTION_ARG_STRING, &(name), "cpu, cuda or nccl (cpu)", "NAME" }

typedef struct
{
  char *key;
  guint count;
  double estimated_s;
  double measured_s;
} Row;

static void
add_row (GArray *rows, const char *key, double est, double meas)
{
  for (guint i = 0; i < rows->len; i++)
    {
      Row *r = &g_array_index (rows, Row, i);
      if (strcmp (r->key, key) == 0)
        {
          r->count++;
          r->estimated_s += est;
          r->measured_s += meas;
          return;
        }
    }
  Row r = { g_strdup (key), 1, est, meas };
  g_array_append_val (rows, r);
}

static void
print_rows (const char *title, GArray *rows)
{
  printf ("\n%-32s %5s %14s %14s %8s\n", title, "count", "estimated", "measured", "ratio");
  for (guint i = 0; i < rows->len; i++)
    {
      Row *r = &g_array_index (rows, Row, i);
      g_autofree char *e = app_cli_format_seconds (r->estimated_s);
      g_autofree char *m = app_cli_format_seconds (r->measured_s);
      printf ("%-32s %5u %14s %14s %8.2f\n", r->key, r->count, e, m,
              r->estimated_s > 0 ? r->measured_s / r->estimated_s : 0.0);
      g_free (r->key);
    }
}

/* The kinds of a redistribution's steps: "AllGather+AllToAll". */
static char *
steps_key (PlannerPlan *plan, guint r)
{
  const PlannerRedistribution *rd = planner_plan_get_redistribution (plan, r);
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < rd->n_steps; i++)
    g_string_append_printf (s, "%s%s", i ? "+" : "", planner_step_kind_to_string (rd->steps[i].kind));
  if (s->len == 0)
    g_string_append (s, "(none)");
  return g_string_free (s, FALSE);
}

static void
print_human (PlannerPlan *plan, const ExecutorTrialResult *res)
{
  printf ("backend %s, %u devices, seed %" G_GUINT64_FORMAT ", %u timed repeats%s\n",
          res->backend, res->n_devices, res->seed, res->repeat,
          res->reduced_precision_as_f32 ? " (bf16/f16 tensors ran as f32)" : "");
  printf ("\n%-40s %14s %14s\n", "output", "max abs error", "max rel error");
  for (guint i = 0; i < res->outputs->len; i++)
    {
      const ExecutorOutputError *e = &g_array_index (res->outputs, ExecutorOutputError, i);
      printf ("%-40s %14.3g %14.3g\n", e->name, e->max_abs_error, e->max_rel_error);
    }
  printf ("%s: max rel error %.3g, tolerance %.3g\n", res->passed ? "match" : "MISMATCH",
          res->max_rel_error, res->tolerance);

  g_autoptr (GArray) ops = g_array_new (FALSE, FALSE, sizeof (Row));
  for (guint i = 0; i < res->ops->len; i++)
    {
      const ExecutorTiming *t = &g_array_index (res->ops, ExecutorTiming, i);
      add_row (ops, t->what, t->estimated_s, t->measured_s);
    }
  print_rows ("op type", ops);
  g_autoptr (GArray) colls = g_array_new (FALSE, FALSE, sizeof (Row));
  for (guint i = 0; i < res->redistributions->len; i++)
    {
      const ExecutorTiming *t = &g_array_index (res->redistributions, ExecutorTiming, i);
      g_autofree char *key = steps_key (plan, i);
      add_row (colls, key, t->estimated_s, t->measured_s);
    }
  if (colls->len)
    print_rows ("collective", colls);
  g_autofree char *e = app_cli_format_seconds (res->estimated_step_s);
  g_autofree char *m = app_cli_format_seconds (res->measured_step_s);
  printf ("\nforward step: estimated %s, measured %s\n", e, m);
}

static gboolean
store_trial_run (PlannerPlan *plan, const ExecutorTrialResult *res, GError **error)
{
  PlannerStore *store = app_cli_get_store (FALSE, error);

  return store != NULL
         && app_trial_store_add (store, app_cli_db_plan_id (plan), plan, res, error) != 0;
}

int
app_cli_run (const AppCliCommand *command, int argc, char **argv)
{
  g_autofree char *backend_name = NULL;
  gint devices = 0, repeat = 5, warmup = 1;
  gint64 seed = 1;
  double tolerance = 1e-5;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    BACKEND_ENTRY (backend_name),
    { "devices", 'n', 0, G_OPTION_ARG_INT, &devices,
      "devices to run on; must match the plan's mesh (default: the mesh's)", "N" },
    { "repeat", 'r', 0, G_OPTION_ARG_INT, &repeat, "timed runs, median (5)", "K" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed runs first (1)", "W" },
    { "seed", 's', 0, G_OPTION_ARG_INT64, &seed, "random inputs and parameters (1)", "S" },
    { "tolerance", 't', 0, G_OPTION_ARG_DOUBLE, &tolerance,
      "largest relative error that matches (1e-5)", "T" },
    { NULL },
  };
  g_autoptr (GOptionContext) context = app_cli_options_new (command, entries, NULL, TRUE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 1, 1);
  if (status >= 0)
    return status;
  const char *backend = backend_name ? backend_name : "cpu";
  if ((status = app_cli_check_int (command, "--repeat", repeat, 1, MAX_REPEAT)) >= 0
      || (status = app_cli_check_int (command, "--warmup", warmup, 0, MAX_REPEAT)) >= 0
      || (status = app_cli_check_int (command, "--devices", devices, 0, MAX_DEVICES)) >= 0
      || (status = app_cli_check_int (command, "--seed", seed, 0, G_MAXINT64)) >= 0
      || (status = app_cli_check_double (command, "--tolerance", tolerance, 0, TRUE, 1)) >= 0)
    return status;

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = app_cli_load_plan (argv[1], &error);
  if (plan == NULL)
    return app_cli_refuse (error);
  guint64 need = planner_mesh_n_devices (planner_plan_get_mesh (plan));
  if (devices > 0 && (guint64) devices != need)
    {
      g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (plan));
      g_set_error (&error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
                   "the plan's mesh %s has %" G_GUINT64_FORMAT " devices, --devices says %d; "
                   "plan for a mesh of %d devices or leave --devices out",
                   mesh, need, devices, devices);
      return app_cli_refuse (error);
    }

  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.seed = (guint64) seed;
  options.repeat = (guint) repeat;
  options.warmup = (guint) warmup;
  options.tolerance = tolerance;
  g_autoptr (ExecutorTrialResult) res = executor_trial_run_named (plan, backend, &options, NULL,
                                                                  &error);
  if (res == NULL)
    return app_cli_refuse (error);
  /* A plan from the store keeps its trial runs (app-cli-db.c). */
  if (app_cli_db_plan_id (plan) != 0 && !store_trial_run (plan, res, &error))
    return app_cli_refuse (error);

  if (json)
    {
      g_autofree char *text = executor_trial_result_to_json (res);
      app_cli_json_print_text (text);
    }
  else
    print_human (plan, res);
  if (!res->passed)
    {
      fprintf (stderr, "shardscope-cli: %s\n",
               res->mismatch ? res->mismatch : "an output differs from the reference");
      return APP_CLI_EXIT_REFUSED;
    }
  return APP_CLI_EXIT_OK;
}

static void
print_progress (double fraction, const char *what, gpointer user_data)
{
  if (isatty (fileno (stderr)))
    fprintf (stderr, "\r%3.0f%% %-60.60s", fraction * 100, what);
}

int
app_cli_calibrate (const AppCliCommand *command, int argc, char **argv)
{
  g_autofree char *output = NULL, *backend_name = NULL;
  gint devices = 4, iterations = 20;
  gint64 max_bytes = 16 << 20;
  gboolean json = FALSE;
  GOptionEntry entries[] = {
    BACKEND_ENTRY (backend_name),
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "profile file to write", "FILE" },
    { "devices", 'n', 0, G_OPTION_ARG_INT, &devices,
      "largest group measured; groups of 2, 4, ... up to it (4)", "N" },
    { "max-bytes", 0, 0, G_OPTION_ARG_INT64, &max_bytes,
      "largest collective buffer (16777216)", "BYTES" },
    { "iterations", 0, 0, G_OPTION_ARG_INT, &iterations, "timed iterations, median (20)", "I" },
    { NULL },
  };
  g_autoptr (GOptionContext) context
      = app_cli_options_new (command, entries, NULL, FALSE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 0, 0);
  if (status >= 0)
    return status;
  const char *backend = backend_name ? backend_name : "cpu";
  if (output == NULL)
    return app_cli_usage_error (command, "-o FILE is required");
  if ((status = app_cli_check_int (command, "--devices", devices, 2, MAX_DEVICES)) >= 0
      || (status = app_cli_check_int (command, "--iterations", iterations, 1, MAX_REPEAT)) >= 0
      || (status = app_cli_check_int (command, "--max-bytes", max_bytes, 8, MAX_COLLECTIVE_BYTES))
             >= 0)
    return status;

  ExecutorCalibrateOptions options;
  executor_calibrate_options_init (&options);
  options.max_devices = (guint) devices;
  options.iterations = (guint) iterations;
  options.max_bytes = (guint64) max_bytes;
  options.progress = print_progress;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw = executor_calibrate (backend, &options, NULL, &error);
  if (isatty (fileno (stderr)))
    fprintf (stderr, "\r%70s\r", "");
  if (hw == NULL)
    return app_cli_refuse (error);
  g_autofree char *profile = planner_hardware_to_json (hw);
  if (!app_file_write (output, profile, strlen (profile), &error))
    return app_cli_refuse (error);

  if (json)
    {
      app_cli_json_print_text (profile);
      return APP_CLI_EXIT_OK;
    }
  printf ("wrote %s\n", output);
  printf ("GEMM %.1f GFLOP/s per device, copy %.2f GB/s per device\n",
          planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_F32) * 1e3,
          planner_hardware_get_memory_bandwidth_GBps (hw));
  const PlannerLink *link = planner_hardware_get_link (hw, PLANNER_LINK_INTRA);
  printf ("link (AllReduce fit): %.2f GB/s bus bandwidth, %.1f us per step\n",
          link->bandwidth_GBps, link->latency_us);
  for (guint i = 0; i < planner_hardware_get_n_measurements (hw); i++)
    {
      PlannerStepKind kind;
      PlannerLinkKind lk;
      guint p, n;
      planner_hardware_get_nth_measurement (hw, i, &kind, &lk, &p, &n);
      double alpha, beta;
      if (lk != PLANNER_LINK_INTRA || !planner_cost_measurement_fit (hw, kind, lk, p, &alpha, &beta))
        continue;
      printf ("  %-14s p=%u: %3u points, fit %.1f us + n / %.2f GB/s\n",
              planner_step_kind_to_string (kind), p, n, alpha * 1e6,
              beta > 0 ? 1e-9 / beta : 0.0);
    }
  return APP_CLI_EXIT_OK;
}
