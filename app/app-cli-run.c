#define G_LOG_DOMAIN "app-cli-run"

#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <json-glib/json-glib.h>

#include "app-cli.h"
#include "app-file.h"
#include "app-trial-store.h"
#include "app-trial-train.h"
#include <unistd.h>

#include "executor-calibrate.h"
#include "executor-error.h"
#include "executor-moe.h"
#include "executor-pipeline.h"
#include "executor-train.h"
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

/* max |a - b| / max |b| over two f32 tensors of the same size; infinity when one is missing. */
static double
logits_rel_error (const ExecutorHostTensor *a, const ExecutorHostTensor *b)
{
  if (a == NULL || b == NULL || executor_host_tensor_numel (a) != executor_host_tensor_numel (b))
    return INFINITY;
  const float *x = a->data, *y = b->data;
  double diff = 0, scale = 0;
  for (gint64 i = 0; i < executor_host_tensor_numel (b); i++)
    {
      diff = MAX (diff, fabs ((double)x[i] - y[i]));
      scale = MAX (scale, fabs ((double)y[i]));
    }
  return scale > 0 ? diff / scale : diff;
}

/* The "pipeline" member of --train's JSON: the schedule as it ran. */
static void
add_pipeline_json (JsonBuilder *b, const ExecutorPipelineRun *run, double logits_err)
{
  json_builder_set_member_name (b, "pipeline");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "schedule");
  json_builder_add_string_value (b, planner_schedule_to_string (run->schedule));
  const char *names[] = { "pp", "virtual_stages", "micro_batches", "sends", "transfers" };
  guint values[] = { run->p, run->v, run->m, run->sends, run->transfers };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      json_builder_set_member_name (b, names[i]);
      json_builder_add_int_value (b, values[i]);
    }
  json_builder_set_member_name (b, "logits_max_rel_error");
  json_builder_add_double_value (b, isfinite (logits_err) ? logits_err : -1);
  const char *times[] = { "wall_us", "busy_us", "overlap_us" };
  double t[] = { run->wall_s, run->busy_s, run->overlap_s };
  for (guint i = 0; i < G_N_ELEMENTS (times); i++)
    {
      json_builder_set_member_name (b, times[i]);
      json_builder_add_double_value (b, t[i] * 1e6);
    }
  json_builder_set_member_name (b, "stages");
  json_builder_begin_array (b);
  for (guint s = 0; s < run->p; s++)
    {
      g_autofree char *order = executor_pipeline_run_order (run, s);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "stage");
      json_builder_add_int_value (b, s);
      json_builder_set_member_name (b, "order");
      json_builder_add_string_value (b, order);
      json_builder_set_member_name (b, "events");
      json_builder_begin_array (b);
      for (guint i = 0; i < run->events->len; i++)
        {
          const ExecutorPipelineEvent *e = &g_array_index (run->events, ExecutorPipelineEvent, i);
          if (e->stage != s)
            continue;
          json_builder_begin_object (b);
          json_builder_set_member_name (b, "pass");
          json_builder_add_string_value (b, e->backward ? "backward" : "forward");
          json_builder_set_member_name (b, "micro_batch");
          json_builder_add_int_value (b, e->micro_batch);
          json_builder_set_member_name (b, "chunk");
          json_builder_add_int_value (b, e->chunk);
          json_builder_set_member_name (b, "start_us");
          json_builder_add_double_value (b, e->start_s * 1e6);
          json_builder_set_member_name (b, "end_us");
          json_builder_add_double_value (b, e->end_s * 1e6);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}

static void
add_pipeline_text (GString *tx, const ExecutorPipelineRun *run, double logits_err)
{
  g_autofree char *wall = app_cli_format_seconds (run->wall_s);
  g_autofree char *busy = app_cli_format_seconds (run->busy_s);
  g_autofree char *overlap = app_cli_format_seconds (run->overlap_s);
  g_string_append_printf (tx, "  pipeline: %s over pp=%u", planner_schedule_to_string (run->schedule),
                          run->p);
  if (run->v > 1)
    g_string_append_printf (tx, " (%u virtual stages)", run->v);
  g_string_append_printf (tx, ", %u micro-batches: %u sends a pipeline (%u in all), logits "
                              "from the micro-batches: max rel error %.3g\n",
                          run->m, run->sends, run->transfers, logits_err);
  for (guint s = 0; s < run->p; s++)
    {
      g_autofree char *order = executor_pipeline_run_order (run, s);
      g_string_append_printf (tx, "    stage %u: %s\n", s, order);
    }
  g_string_append_printf (tx, "  stages computed %s in %s, two or more at once for %s\n", busy,
                          wall, overlap);
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
  /* This forward pass runs the stages one after another on the whole batch; the schedule is
   * the training step's. */
  if (res->pipeline_sends > 0)
    printf ("pipeline: the forward pass above ran stage after stage on the whole batch "
            "(activation sends: %u); --train runs the plan's micro-batch schedule\n",
            res->pipeline_sends);
}

/* Hugging Face's defaults for the graph inputs other than the tokens, as its models fill
 * them when not given: position_ids 0..S-1, token_type_ids 0. A run on real weights needs
 * them; random ones would read arbitrary position rows. */
static void
add_default_inputs (PlannerGraph *g, ExecutorTensors *sources)
{
  for (guint i = 0; i < planner_graph_get_n_tensors (g); i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (g, i);
      gboolean pos = g_str_equal (t->name, "position_ids");
      if (t->kind != PLANNER_TENSOR_INPUT || t->rank == 0
          || !(pos || g_str_equal (t->name, "token_type_ids")))
        continue;
      gint64 n = 1, s = t->shape[t->rank - 1];
      for (guint d = 0; d < t->rank; d++)
        n *= t->shape[d];
      gint64 *ids = g_new0 (gint64, MAX (n, 1));
      for (gint64 k = 0; pos && k < n; k++)
        ids[k] = k % s;
      executor_tensors_add (sources, t->name, PLANNER_DTYPE_I64, t->rank, t->shape, ids);
    }
}

/* The tokens against the graph's input_ids: its shape, and ids within every embedding
 * table that reads them. */
static gboolean
check_tokens (PlannerGraph *g, const ExecutorHostTensor *tokens, const char *path, GError **error)
{
  int id = -1;
  for (guint i = 0; i < planner_graph_get_n_tensors (g); i++)
    if (planner_graph_get_tensor (g, i)->kind == PLANNER_TENSOR_INPUT
        && g_str_equal (planner_graph_get_tensor (g, i)->name, "input_ids"))
      id = (int)i;
  if (id < 0)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
                   "--tokens %s: the plan's graph has no input_ids input; --tokens is for "
                   "Hugging Face language models",
                   path);
      return FALSE;
    }
  const PlannerTensor *t = planner_graph_get_tensor (g, (guint)id);
  if (tokens->rank != t->rank || memcmp (tokens->shape, t->shape, t->rank * sizeof (gint64)))
    {
      g_autoptr (GString) have = g_string_new ("[");
      for (guint d = 0; d < tokens->rank; d++)
        g_string_append_printf (have, "%s%" G_GINT64_FORMAT, d ? ", " : "", tokens->shape[d]);
      g_string_append_c (have, ']');
      g_set_error (
          error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
          "--tokens %s: the ids are %s but the plan was made for input_ids [%" G_GINT64_FORMAT
          ", %" G_GINT64_FORMAT "] (batch, seq); make the plan with --batch and "
          "--seq of the tokens' shape",
          path, have->str, t->shape[0], t->rank > 1 ? t->shape[1] : 1);
      return FALSE;
    }
  gint64 vocab = G_MAXINT64;
  for (guint i = 0; i < planner_graph_get_n_ops (g); i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      if (op->type == PLANNER_OP_EMBEDDING && op->inputs[0] == (guint)id)
        vocab = MIN (vocab, planner_graph_get_tensor (g, op->inputs[1])->shape[0]);
    }
  const gint64 *ids = tokens->data;
  for (gint64 k = 0; k < executor_host_tensor_numel (tokens); k++)
    if (ids[k] < 0 || ids[k] >= vocab)
      {
        g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
                     "--tokens %s: id %" G_GINT64_FORMAT " at position %" G_GINT64_FORMAT
                     " is outside the vocabulary of %" G_GINT64_FORMAT,
                     path, ids[k], k, vocab);
        return FALSE;
      }
  return TRUE;
}

/* --weights and --tokens as the trial's sources; NULL with neither (all random). */
static ExecutorTensors *
load_sources (PlannerPlan *plan, const char *weights, const char *tokens, GError **error)
{
  if (weights == NULL && tokens == NULL)
    return NULL;
  PlannerGraph *g = planner_plan_get_graph (plan);
  g_autoptr (ExecutorTensors) sources = NULL;
  if (weights)
    {
      sources = executor_safetensors_load (weights, error);
      if (sources != NULL) /* the hub's per-expert tensors of mixture-of-experts models */
        executor_moe_checkpoint_convert (sources, g);
      if (sources == NULL || !executor_tensors_check_parameters (sources, g, error))
        {
          if (error && *error)
            g_prefix_error (error, "--weights: ");
          return NULL;
        }
    }
  else
    sources = executor_tensors_new ();
  add_default_inputs (g, sources);
  if (tokens)
    {
      if (!executor_npy_load_ids (tokens, "input_ids", sources, error))
        return NULL;
      if (!check_tokens (g, executor_tensors_lookup (sources, "input_ids"), tokens, error))
        return NULL;
    }
  return g_steal_pointer (&sources);
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
  g_autofree char *weights = NULL, *tokens = NULL, *outputs = NULL, *outputs_reference = NULL;
  g_autofree char *optimizer = NULL, *labels = NULL;
  gboolean train = FALSE;
  double lr = 1e-3;
  GOptionEntry entries[] = {
    BACKEND_ENTRY (backend_name),
    { "devices", 'n', 0, G_OPTION_ARG_INT, &devices,
      "devices to run on; must match the plan's mesh (default: the mesh's)", "N" },
    { "repeat", 'r', 0, G_OPTION_ARG_INT, &repeat, "timed runs, median (5)", "K" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed runs first (1)", "W" },
    { "seed", 's', 0, G_OPTION_ARG_INT64, &seed, "random inputs and parameters (1)", "S" },
    { "tolerance", 't', 0, G_OPTION_ARG_DOUBLE, &tolerance,
      "largest relative error that matches (1e-5)", "T" },
    { "weights", 0, 0, G_OPTION_ARG_FILENAME, &weights,
      "Hugging Face safetensors checkpoint: a .safetensors file, or a folder with "
      "model.safetensors or model.safetensors.index.json and its shards (default: seeded "
      "random weights)",
      "PATH" },
    { "tokens", 0, 0, G_OPTION_ARG_FILENAME, &tokens,
      "input_ids from a .npy of int32/int64 [batch, seq] (default: random)", "FILE" },
    { "outputs", 0, 0, G_OPTION_ARG_FILENAME, &outputs,
      "write the sharded run's outputs (logits), gathered from the shards, as safetensors",
      "FILE" },
    { "outputs-reference", 0, 0, G_OPTION_ARG_FILENAME, &outputs_reference,
      "write the one-device reference run's outputs as safetensors", "FILE" },
    { "train", 0, 0, G_OPTION_ARG_NONE, &train,
      "also run one training step (loss, backward, optimizer step), sharded by the plan and "
      "unsharded, on the cpu backend",
      NULL },
    { "labels", 0, 0, G_OPTION_ARG_FILENAME, &labels,
      "with --train: the loss's labels from a .npy of int32/int64, one a row of the logits, "
      "unshifted ([batch, seq], or [batch] for a classifier; -100 leaves a row out; default: "
      "the next token, a masked LM's own ids, row b mod classes)",
      "FILE" },
    { "optimizer", 0, 0, G_OPTION_ARG_STRING, &optimizer, "sgd or adam (sgd)", "NAME" },
    { "lr", 0, 0, G_OPTION_ARG_DOUBLE, &lr, "learning rate (1e-3)", "LR" },
    { NULL },
  };
  g_autoptr (GOptionContext) context = app_cli_options_new (command, entries, NULL, TRUE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 1, 1);
  if (status >= 0)
    return status;
  const char *backend = backend_name ? backend_name : "cpu";
  ExecutorTrainOptions train_options;
  executor_train_options_init (&train_options);
  train_options.lr = lr;
  if (optimizer && g_str_equal (optimizer, "adam"))
    train_options.optimizer = EXECUTOR_OPTIMIZER_ADAM;
  else if (optimizer && !g_str_equal (optimizer, "sgd"))
    return app_cli_usage_error (command, "--optimizer is sgd or adam");
  if ((optimizer || lr != 1e-3 || labels) && !train)
    return app_cli_usage_error (command, "--optimizer, --lr and --labels go with --train");
  if ((status = app_cli_check_int (command, "--repeat", repeat, 1, MAX_REPEAT)) >= 0
      || (status = app_cli_check_int (command, "--warmup", warmup, 0, MAX_REPEAT)) >= 0
      || (status = app_cli_check_int (command, "--devices", devices, 0, MAX_DEVICES)) >= 0
      || (status = app_cli_check_int (command, "--seed", seed, 0, G_MAXINT64)) >= 0
      || (status = app_cli_check_double (command, "--tolerance", tolerance, 0, TRUE, 1)) >= 0
      || (status = app_cli_check_double (command, "--lr", lr, 0, TRUE, 1e6)) >= 0)
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
  g_autoptr (ExecutorTensors) sources = load_sources (plan, weights, tokens, &error);
  if (sources == NULL && error != NULL)
    return app_cli_refuse (error);
  options.sources = sources;
  options.keep_outputs = outputs != NULL || outputs_reference != NULL;
  g_autoptr (ExecutorTrialResult) res = executor_trial_run_named (plan, backend, &options, NULL,
                                                                  &error);
  if (res == NULL)
    return app_cli_refuse (error);
  /* The training step, unsharded and sharded: their losses, gradients and updated weights
   * join the reference's and the sharded run's outputs. */
  g_autoptr (ExecutorTensors) all_sources = NULL;
  ExecutorTrainTimes train_times = { 0 };
  /* A pipelined plan's step records its schedule as it ran. */
  g_auto (ExecutorPipelineRun) pipe_run = { 0 };
  train_options.pipeline_run = &pipe_run;
  if (train && res->outputs_reference == NULL)
    res->outputs_reference = executor_tensors_new ();
  if (train && res->outputs_sharded == NULL)
    res->outputs_sharded = executor_tensors_new ();
  if (train && !g_str_equal (backend, "cpu"))
    {
      g_set_error (&error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "--train runs on the cpu backend only (the backward kernels are CPU ones); "
                   "use --backend cpu");
      return app_cli_refuse (error);
    }
  g_autoptr (ExecutorTensors) label_file = executor_tensors_new ();
  if (labels)
    {
      if (!executor_npy_load_ids (labels, "labels", label_file, &error))
        return app_cli_refuse (error);
      train_options.labels = executor_tensors_lookup (label_file, "labels");
    }
  if (train
      && (!(all_sources
            = executor_trial_sources (planner_plan_get_graph (plan), options.seed, sources, &error))
          || !executor_train_step_reference (planner_plan_get_graph (plan), all_sources,
                                             &train_options, res->outputs_reference, &error)
          || !executor_train_step_sharded (plan, all_sources, &train_options, res->outputs_sharded,
                                           &train_times, &error)))
    return app_cli_refuse (error);
  if ((outputs && !executor_safetensors_save (res->outputs_sharded, outputs, &error))
      || (outputs_reference
          && !executor_safetensors_save (res->outputs_reference, outputs_reference, &error)))
    return app_cli_refuse (error);
  /* A plan from the store keeps its trial runs (app-cli-db.c). */
  if (app_cli_db_plan_id (plan) != 0 && !store_trial_run (plan, res, &error))
    return app_cli_refuse (error);

  gboolean train_ok = TRUE;
  g_autoptr (JsonBuilder) train_json = json_builder_new ();
  g_autoptr (GString) train_text = NULL;
  if (train)
    {
      /* Sharded against the reference, as the app's trial dialog compares them. */
      g_autoptr (AppTrialTrain) cmp = app_trial_train_compare (
          res->outputs_reference, res->outputs_sharded, &train_options, tolerance);
      gboolean adam = cmp->adam;
      train_ok = cmp->passed;
      /* The output names the tensors as the outputs file does ("grad.NAME"). */
      g_autofree char *grad_worst
          = cmp->grad_worst ? g_strconcat ("grad.", cmp->grad_worst, NULL) : NULL;
      g_autofree char *updated_worst
          = cmp->updated_worst ? g_strconcat ("updated.", cmp->updated_worst, NULL) : NULL;
      double err[3] = { cmp->loss_rel_error, cmp->grad_rel_error, cmp->updated_rel_error };
      const char *worst[3] = { "loss", grad_worst, updated_worst };
      guint n_params = cmp->n_parameters;
      const char *names[] = { "optimizer", "lr", "passed", "loss", "loss_max_rel_error",
                              "parameters", "grad_max_rel_error", "grad_worst",
                              "updated_max_rel_error", "updated_worst", "backward_estimated_us",
                              "backward_measured_us", "grad_sync_estimated_us",
                              "grad_sync_measured_us" };
      JsonBuilder *b = train_json;
      guint n = 0;
      json_builder_begin_object (b);
      json_builder_set_member_name (b, names[n++]);
      json_builder_add_string_value (b, adam ? "adam" : "sgd");
      json_builder_set_member_name (b, names[n++]);
      json_builder_add_double_value (b, lr);
      json_builder_set_member_name (b, names[n++]);
      json_builder_add_boolean_value (b, train_ok);
      json_builder_set_member_name (b, names[n++]);
      json_builder_add_double_value (b, cmp->loss);
      json_builder_set_member_name (b, names[n++]);
      json_builder_add_double_value (b, err[0]);
      json_builder_set_member_name (b, names[n++]);
      json_builder_add_int_value (b, n_params);
      for (guint k = 1; k < 3; k++)
        {
          json_builder_set_member_name (b, names[n++]);
          json_builder_add_double_value (b, err[k]);
          json_builder_set_member_name (b, names[n++]);
          json_builder_add_string_value (b, worst[k]);
        }
      double t[] = { train_times.estimated_backward_s, train_times.backward_s,
                     train_times.estimated_grad_sync_s, train_times.grad_sync_s };
      for (guint k = 0; k < G_N_ELEMENTS (t); k++)
        {
          json_builder_set_member_name (b, names[n++]);
          json_builder_add_double_value (b, t[k] * 1e6);
        }
      double logits_err = 0;
      if (pipe_run.events != NULL)
        {
          logits_err = logits_rel_error (executor_tensors_lookup (pipe_run.outputs, "logits"),
                                         executor_tensors_lookup (res->outputs_reference,
                                                                  "logits"));
          train_ok &= logits_err <= tolerance;
          add_pipeline_json (b, &pipe_run, logits_err);
        }
      json_builder_end_object (b);
      g_autofree char *bw = app_cli_format_seconds (train_times.backward_s);
      g_autofree char *gs = app_cli_format_seconds (train_times.grad_sync_s);
      g_autofree char *ebw = app_cli_format_seconds (train_times.estimated_backward_s);
      g_autofree char *egs = app_cli_format_seconds (train_times.estimated_grad_sync_s);
      GString *tx = train_text = g_string_new (NULL);
      g_string_append_printf (tx, "\ntraining step (%s, lr %g), sharded against the unsharded "
                                 "reference:\n",
                              adam ? "adam" : "sgd", lr);
      g_string_append_printf (
          tx, "  loss %.6g, max rel error %.3g\n", cmp->loss, err[0]);
      g_string_append_printf (tx, "  gradients of %u parameters: max rel error %.3g (%s)\n",
                              n_params, err[1], worst[1] ? worst[1] : "-");
      g_string_append_printf (tx, "  updated weights: max rel error %.3g (%s)%s\n", err[2],
                              worst[2] ? worst[2] : "-",
                              adam ? " (not judged: Adam's first step is lr sign (g))" : "");
      g_string_append_printf (tx, "  backward: estimated %s, measured %s (one pass, slowest "
                                 "device)\n",
                              ebw, bw);
      g_string_append_printf (tx, "  of which gradient redistributions: estimated %s, measured "
                                 "%s\n",
                              egs, gs);
      if (pipe_run.events != NULL)
        add_pipeline_text (tx, &pipe_run, logits_err);
    }
  if (json)
    {
      /* The trial's object, with the training step's under "train". */
      g_autofree char *text = executor_trial_result_to_json (res);
      g_autoptr (JsonParser) parser = json_parser_new ();
      if (train && json_parser_load_from_data (parser, text, -1, NULL))
        {
          JsonNode *root = json_parser_get_root (parser);
          json_object_set_member (json_node_get_object (root), "train",
                                  json_builder_get_root (train_json));
          g_autoptr (JsonGenerator) gen = json_generator_new ();
          json_generator_set_root (gen, root);
          json_generator_set_pretty (gen, TRUE);
          g_autofree char *with_train = json_generator_to_data (gen, NULL);
          app_cli_json_print_text (with_train);
        }
      else
        app_cli_json_print_text (text);
    }
  else
    print_human (plan, res);
  if (train_text && !json)
    fputs (train_text->str, stdout);
  if (!train_ok)
    {
      fprintf (stderr, "shardscope-cli: the sharded training step differs from the reference "
                       "beyond the tolerance\n");
      return APP_CLI_EXIT_REFUSED;
    }
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
