#define G_LOG_DOMAIN "test-plan-cli"

#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "planner-plan-json.h"
#include "test-util.h"

/* shardscope-cli propagate | compare | export, as scripts use them: the built binary
 * ($SHARDSCOPE_CLI), its JSON, the plan files it writes, and its exit statuses (0 done,
 * 1 refused, 2 bad usage). */

static char *dir;

static char *
plan_path (const char *name)
{
  return g_build_filename (dir, name, NULL);
}

/* The acceptance line: Megatron on LLaMA-2-7B over dp=2,mp=4 is 65 AllReduces (2 per
 * layer x 32 + the vocab-parallel embedding) and nothing else. */
static void
test_propagate_llama (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *path = plan_path ("llama-megatron.json");
  const char *args[] = { "propagate", "llama",  "--mesh", "dp=2,mp=4", "--policy",
                         "megatron",  "--json", "-o",     path,        NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (args, &out, &err), ==, 0);
  g_assert_cmpstr (err, ==, "");

  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  JsonObject *coll = json_object_get_object_member (o, "collectives");
  g_assert_cmpint (json_object_get_int_member (coll, "AllReduce"), ==, 65);
  const char *others[] = { "AllGather", "ReduceScatter", "AllToAll", "Slice" };
  for (guint i = 0; i < G_N_ELEMENTS (others); i++)
    g_assert_cmpint (json_object_get_int_member (coll, others[i]), ==, 0);
  g_assert_cmpint (json_object_get_int_member (o, "redistributions"), ==, 65);
  g_assert_cmpint (json_object_get_int_member (o, "ops"), ==,
                   json_object_get_int_member (o, "pinned")
                       + json_object_get_int_member (o, "propagated")
                       + json_object_get_int_member (o, "defaulted"));
  g_assert_cmpint (json_object_get_int_member (o, "defaulted"), ==, 0);
  const char *members[] = {
    "comm_bytes",  "comm_time_us", "compute_time_us", "step_time_us", "memory_per_device_bytes",
    "propagate_ms"
  };
  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    g_assert_true (json_object_has_member (o, members[i]));
  g_assert_cmpint (json_object_get_int_member (o, "comm_bytes"), >, 0);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "conflicts")), ==, 0);
  g_assert_false (json_object_has_member (o, "trace"));
  g_assert_cmpstr (json_object_get_string_member (o, "policy"), ==, "megatron");

  /* The plan file holds the same plan. */
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = planner_plan_load_json (path, &error);
  g_assert_no_error (error);
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  g_assert_cmpuint (t->coll_count[PLANNER_STEP_ALL_REDUCE], ==, 65);
  g_assert_cmpint (t->comm_bytes, ==, json_object_get_int_member (o, "comm_bytes"));
  g_assert_cmpint (t->n_pinned, ==, json_object_get_int_member (o, "pinned"));
  g_assert_cmpstr (planner_plan_get_policy (plan), ==, "megatron");
}

static void
test_trace (void)
{
  if (test_util_skip_without_cli ())
    return;
  const char *args[] = { "propagate", "llama-tiny", "--mesh", "dp=2,mp=2", "--policy",
                         "megatron",  "--trace",    "--json", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (args, &out, &err), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  JsonArray *trace = json_object_get_array_member (o, "trace");
  g_assert_cmpint (json_array_get_length (trace), ==, json_object_get_int_member (o, "propagated"));
  JsonObject *first = json_array_get_object_element (trace, 0);
  g_assert_cmpint (json_object_get_int_member (first, "step"), ==, 0);
  g_assert_cmpstr (json_object_get_string_member (first, "op"), ==,
                   "model.layers.0.input_layernorm");
  g_assert_cmpstr (json_object_get_string_member (first, "strategy"), ==, "[dp,_,_],[_]");
  g_assert_cmpstr (json_object_get_string_member (first, "from"), ==, "model.embed_tokens");
  g_assert_cmpstr (json_object_get_string_member (first, "direction"), ==, "forward");
  g_assert_cmpfloat (json_object_get_double_member (first, "edge_cost_us"), >, 0);
  g_assert_cmpint (json_object_get_int_member (first, "candidates"), >, 1);
  g_assert_true (json_object_has_member (first, "runner_up"));
  g_assert_true (json_object_has_member (first, "runner_up_cost_us"));

  /* Text: the summary, then one line per step. */
  const char *text_args[] = { "propagate", "llama-tiny", "--mesh",  "dp=2,mp=2",
                              "--policy",  "megatron",   "--trace", NULL };
  g_autofree char *text = NULL, *text_err = NULL;
  g_assert_cmpint (test_util_run_cli (text_args, &text, &text_err), ==, 0);
  g_assert_nonnull (strstr (text, "Redistributions: 5: 5 AllReduce\n"));
  g_assert_nonnull (strstr (text, "Trace (35 steps)"));
  g_assert_nonnull (strstr (text, "     0  model.layers.0.input_layernorm  [dp,_,_],[_]  <- "
                                  "model.embed_tokens"));
}

/* A user's pin overrides the policy's on the op both match. */
static void
test_user_pin (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *path = plan_path ("llama-tiny-pinned.json");
  const char *pin = "model.layers.0.mlp.down_proj=[dp,_,mp],[_,mp]->[dp,mp,_]";
  const char *args[] = { "propagate", "llama-tiny", "--mesh", "dp=2,mp=2", "--policy", "megatron",
                         "--pin",     pin,          "--json", "-o",        path,       NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (args, &out, &err), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  JsonObject *coll = json_object_get_object_member (o, "collectives");
  g_assert_cmpint (json_object_get_int_member (coll, "ReduceScatter"), >, 0);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "conflicts")), >, 0);

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = planner_plan_load_json (path, &error);
  g_assert_no_error (error);
  int down = planner_graph_find_op (planner_plan_get_graph (plan), "model.layers.0.mlp.down_proj");
  const PlannerOpPlan *op = planner_plan_get_op (plan, (guint)down);
  g_assert_true (op->has_out_layouts);
  g_assert_cmpstr (g_ptr_array_index (planner_plan_get_pins (plan), op->pin), ==, pin);
}

static void
test_compare (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *a = plan_path ("tiny-megatron.json");
  g_autofree char *b = plan_path ("tiny-megatron-sp.json");
  const char *make_a[]
      = { "propagate", "llama-tiny", "--mesh", "dp=2,mp=2", "--policy", "megatron", "-o", a, NULL };
  const char *make_b[] = { "propagate",   "llama-tiny", "--mesh", "dp=2,mp=2", "--policy",
                           "megatron-sp", "-o",         b,        NULL };
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL;
  g_assert_cmpint (test_util_run_cli (make_a, &o1, &e1), ==, 0);
  g_assert_cmpint (test_util_run_cli (make_b, &o2, &e2), ==, 0);
  g_assert_nonnull (strstr (o1, "Plan written to "));

  const char *json_args[] = { "compare", a, b, "--json", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (json_args, &out, &err), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (o, "ops")), ==, 5);
  JsonObject *reds = json_object_get_object_member (o, "redistributions");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (reds, "removed")), ==, 5);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (reds, "added")), ==, 10);
  JsonObject *ar = json_object_get_object_member (
      json_object_get_object_member (json_object_get_object_member (o, "collectives"), "AllReduce"),
      "count");
  g_assert_cmpint (json_object_get_int_member (ar, "delta"), ==, -5);

  const char *text_args[] = { "compare", a, b, NULL };
  g_autofree char *text = NULL, *text_err = NULL;
  g_assert_cmpint (test_util_run_cli (text_args, &text, &text_err), ==, 0);
  g_assert_nonnull (strstr (text, "Ops whose strategy differs: 5 of 51\n"));
  g_assert_nonnull (strstr (text, "Redistributions: 5 removed, 10 added, 0 in both\n"));
}

static void
test_export (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *plan = plan_path ("export-source.json");
  g_autofree char *copy = plan_path ("export-copy.json");
  const char *make[] = { "propagate", "gpt2-tiny", "--mesh", "dp=2,mp=2", "--policy",
                         "megatron",  "-o",        plan,     NULL };
  g_autofree char *o1 = NULL, *e1 = NULL;
  g_assert_cmpint (test_util_run_cli (make, &o1, &e1), ==, 0);

  const char *to_file[] = { "export", plan, "--format", "json", "-o", copy, NULL };
  g_autofree char *o2 = NULL, *e2 = NULL;
  g_assert_cmpint (test_util_run_cli (to_file, &o2, &e2), ==, 0);
  g_assert_cmpstr (o2, ==, "");
  const char *to_stdout[] = { "export", plan, "--format", "json", NULL };
  g_autofree char *o3 = NULL, *e3 = NULL;
  g_assert_cmpint (test_util_run_cli (to_stdout, &o3, &e3), ==, 0);

  g_autofree char *original = NULL, *exported = NULL;
  g_assert_true (g_file_get_contents (plan, &original, NULL, NULL));
  g_assert_true (g_file_get_contents (copy, &exported, NULL, NULL));
  g_assert_cmpstr (exported, ==, original);
  g_assert_cmpstr (o3, ==, original);
}

static void
test_statuses (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *llama = plan_path ("statuses-llama.json");
  g_autofree char *gpt2 = plan_path ("statuses-gpt2.json");
  const char *make_llama[] = { "propagate", "llama-tiny", "--mesh", "dp=2", "-o", llama, NULL };
  const char *make_gpt2[] = { "propagate", "gpt2-tiny", "--mesh", "dp=2", "-o", gpt2, NULL };
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL;
  g_assert_cmpint (test_util_run_cli (make_llama, &o1, &e1), ==, 0);
  g_assert_cmpint (test_util_run_cli (make_gpt2, &o2, &e2), ==, 0);
  g_autofree char *missing = plan_path ("missing.json");
  g_autofree char *never = plan_path ("never-written.json");
  static const struct
  {
    int status;
    const char *expect; /* in stderr */
    const char *args[12];
  } cases[] = {
    { 2, "missing --mesh", { "propagate", "llama-tiny", NULL } },
    { 2, "missing argument", { "propagate", "--mesh", "dp=2", NULL } },
    { 2, "--dtype 'f8'", { "propagate", "llama-tiny", "--mesh", "dp=2", "--dtype", "f8", NULL } },
    { 1,
      "unknown policy 'nope'",
      { "propagate", "llama-tiny", "--mesh", "dp=2,mp=2", "--policy", "nope", NULL } },
    { 1,
      "no op matches 'nope'",
      { "propagate", "llama-tiny", "--mesh", "dp=2,mp=2", "--pin", "nope=[dp,_]", NULL } },
    { 1,
      "layout '[dp'",
      { "propagate", "llama-tiny", "--mesh", "dp=2,mp=2", "--pin", "x=[dp", NULL } },
    { 1,
      "cannot be split over mp=4",
      { "propagate", "llama-tiny", "--mesh", "dp=2,mp=4", "--policy", "megatron", NULL } },
    { 1,
      "unknown hardware 'tpu'",
      { "propagate", "llama-tiny", "--mesh", "dp=2", "--hardware", "tpu", NULL } },
    { 1, "no-such-model", { "propagate", "no-such-model", "--mesh", "dp=2", NULL } },
    { 2, "missing argument", { "compare", "x.json", NULL } },
    { 2, "missing --format", { "export", "x.json", NULL } },
    { 2, "unknown --format 'onnx' (one of: json, dtensor, mindspore, mindspore-shard, jax, csv)",
      { "export", "x.json", "--format", "onnx", NULL } },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int status = test_util_run_cli (cases[i].args, &out, &err);
      if (status != cases[i].status || strstr (err, cases[i].expect) == NULL)
        g_error ("%s %s: status %d (expected %d), stderr \"%s\" (expected \"%s\" in it)",
                 cases[i].args[0], cases[i].args[1], status, cases[i].status, err, cases[i].expect);
      g_assert_cmpstr (out, ==, "");
    }

  /* Paths only known at run time. */
  const char *different[] = { "compare", llama, gpt2, NULL };
  const char *absent[] = { "compare", llama, missing, NULL };
  const char *store[] = { "export", "db:3", "--format", "json", NULL };
  const char *unwritable[]
      = { "propagate", "llama-tiny", "--mesh", "dp=2", "-o", "/nonexistent/dir/plan.json", NULL };
  const char *refused_plan[] = { "propagate", "llama-tiny", "--mesh", "dp=2,mp=4", "--policy",
                                 "megatron",  "-o",         never,    NULL };
  const char *const *refused[] = { different, absent, store, unwritable, refused_plan };
  const char *expect[] = { "cannot compare plans of different models", "cannot read plan", "db:3",
                           ("cannot write /nonexistent/dir/plan.json: No such file or directory; "
                            "create its folder first"),
                           "cannot be split" };
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      g_assert_cmpint (test_util_run_cli (refused[i], &out, &err), ==, 1);
      if (strstr (err, expect[i]) == NULL)
        g_error ("expected \"%s\" in \"%s\"", expect[i], err);
    }
  g_assert_false (g_file_test (never, G_FILE_TEST_EXISTS));
}

/* The training model through the CLI: the memory object, the step breakdown that adds up to
 * step_time_us, the fits flag, the options, and a plan file that keeps them. LLaMA-2-7B with
 * Adam on one 80 GB H100 needs 6738415616 x 16 bytes of model states alone: it does not fit. */
static void
test_training (void)
{
  g_autofree char *path = plan_path ("llama-one-gpu.json");
  const char *args[] = { "propagate",     "llama", "--mesh", "dp=1", "--batch", "1", "--seq", "512",
                         "--recompute",   "full",  "--json", "-o",   path,      NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (args, &out, &err), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  JsonObject *mem = json_object_get_object_member (o, "memory");
  g_assert_cmpint (json_object_get_int_member (mem, "parameters")
                       + json_object_get_int_member (mem, "gradients")
                       + json_object_get_int_member (mem, "optimizer"),
                   ==, G_GINT64_CONSTANT (6738415616) * 16);
  g_assert_cmpint (json_object_get_int_member (mem, "total"), ==,
                   json_object_get_int_member (o, "memory_per_device_bytes"));
  g_assert_false (json_object_get_boolean_member (o, "fits"));
  JsonObject *b = json_object_get_object_member (o, "step_breakdown_us");
  const char *parts[] = { "forward", "backward", "recompute", "tp_comm_exposed",
                          "dp_sync_exposed", "overhead" };
  double sum = 0;
  for (guint i = 0; i < G_N_ELEMENTS (parts); i++)
    sum += json_object_get_double_member (b, parts[i]);
  double step = json_object_get_double_member (o, "step_time_us");
  g_assert_cmpfloat (fabs (sum - step), <, 1e-6 * step);
  /* Full recompute redoes every layer's forward. */
  g_assert_cmpfloat (json_object_get_double_member (b, "recompute"), >, 0);

  /* The plan file keeps the options and the figures. */
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = planner_plan_load_json (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (planner_plan_get_constants (plan)->recompute, ==, PLANNER_RECOMPUTE_FULL);
  g_assert_cmpint ((gint64)planner_plan_get_totals (plan)->memory.total, ==,
                   json_object_get_int_member (mem, "total"));

  /* A plan derived with --from keeps its parent's options unless given again. */
  {
    const char *derive[] = { "propagate", "--from", path, "--json", NULL };
    g_autofree char *dout = NULL, *derr = NULL;
    g_assert_cmpint (test_util_run_cli (derive, &dout, &derr), ==, 0);
    g_autoptr (JsonParser) dp = json_parser_new ();
    JsonObject *d = test_util_parse_object (dp, dout);
    g_assert_cmpfloat (json_object_get_double_member (
                           json_object_get_object_member (d, "step_breakdown_us"), "recompute"),
                       >, 0);
    const char *zero3[] = { "propagate", "--from", path, "--zero", "3", "--json", NULL };
    g_autofree char *zout = NULL, *zerr = NULL;
    g_assert_cmpint (test_util_run_cli (zero3, &zout, &zerr), ==, 0);
    g_autoptr (JsonParser) zp = json_parser_new ();
    JsonObject *z = test_util_parse_object (zp, zout);
    /* One device: ZeRO has nothing to shard over, the model states stay 16 bytes a parameter,
     * and full recompute is still there. */
    g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (z, "memory"),
                                                 "optimizer"),
                     ==, json_object_get_int_member (mem, "optimizer"));
    g_assert_cmpfloat (json_object_get_double_member (
                           json_object_get_object_member (z, "step_breakdown_us"), "recompute"),
                       >, 0);
  }

  /* Text output says it does not fit. */
  const char *text_args[] = { "propagate", "llama", "--mesh", "dp=1", "--batch", "1", "--seq",
                              "512",       NULL };
  g_autofree char *text = NULL, *text_err = NULL;
  g_assert_cmpint (test_util_run_cli (text_args, &text, &text_err), ==, 0);
  g_assert_nonnull (strstr (text, "DOES NOT FIT"));
  g_assert_nonnull (strstr (text, "optimizer states"));

  /* Bad options are usage errors. */
  const char *bad[][8] = {
    { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--zero", "4", NULL },
    { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--recompute", "some", NULL },
    { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--optimizer", "lamb", NULL },
    { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--micro-batch", "0", NULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *o2 = NULL, *e2 = NULL;
      g_assert_cmpint (test_util_run_cli (bad[i], &o2, &e2), ==, 2);
      g_assert_nonnull (strstr (e2, bad[i][4]));
    }
}

static double
step_part (const char *const *args, const char *part)
{
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (args, &out, &err), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  return json_object_get_double_member (json_object_get_object_member (o, "step_breakdown_us"),
                                        part);
}

/* FSDP's knobs through the CLI. LLaMA-2-7B in bf16 on dp=8, DDP-style sync (ZeRO 0) with no
 * overlap: the gradient AllReduce moves 6.74e9 parameters x 2 bytes, or x 4 with
 * --grad-reduce f32; at these sizes (13.5 and 27 GB, in 25 MiB buckets) the ring is
 * bandwidth-bound, so the exposed sync is close to twice as long (the per-bucket latency
 * does not double: a little under 2). --backward-prefetch post exposes ZeRO-3's backward
 * gathers, which pre hides. The plan file keeps both; bad values are usage errors. */
static void
test_fsdp_options (void)
{
  const char *base[]
      = { "propagate", "llama", "--mesh",          "dp=8",   "--dtype", "bf16", "--batch", "8",
          "--seq",     "512",   "--no-dp-overlap", "--json", NULL };
  const char *f32[] = { "propagate", "llama",  "--mesh", "dp=8", "--dtype",         "bf16",
                        "--batch",   "8",      "--seq",  "512",  "--no-dp-overlap", "--grad-reduce",
                        "f32",       "--json", NULL };
  double ratio = step_part (f32, "dp_sync_exposed") / step_part (base, "dp_sync_exposed");
  g_assert_cmpfloat (ratio, >, 1.9);
  g_assert_cmpfloat (ratio, <=, 2.0);

  const char *pre[] = { "propagate", "llama", "--layers", "4", "--mesh", "dp=8",
                        "--dtype",   "bf16",  "--zero",   "3", "--json", NULL };
  g_autofree char *path = plan_path ("fsdp-post.json");
  const char *post[] = { "propagate",
                         "llama",
                         "--layers",
                         "4",
                         "--mesh",
                         "dp=8",
                         "--dtype",
                         "bf16",
                         "--zero",
                         "3",
                         "--backward-prefetch",
                         "post",
                         "--grad-reduce",
                         "f32",
                         "--json",
                         "-o",
                         path,
                         NULL };
  g_assert_cmpfloat (step_part (post, "dp_sync_exposed"), >, step_part (pre, "dp_sync_exposed"));
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = planner_plan_load_json (path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (planner_plan_get_constants (plan)->backward_prefetch, ==, PLANNER_PREFETCH_POST);
  g_assert_cmpint (planner_plan_get_constants (plan)->grad_reduce, ==, PLANNER_GRAD_REDUCE_F32);

  const char *bad[][8] = {
    { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--grad-reduce", "f64", NULL },
    { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--backward-prefetch", "never", NULL },
    { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--attention", "flash3", NULL },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *o2 = NULL, *e2 = NULL;
      g_assert_cmpint (test_util_run_cli (bad[i], &o2, &e2), ==, 2);
      g_assert_nonnull (strstr (e2, bad[i][4]));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dir = test_util_tmp_dir_new ("shardscope-plan-cli-XXXXXX");

  g_test_add_func ("/planner/plan-cli/propagate-llama-megatron", test_propagate_llama);
  g_test_add_func ("/planner/plan-cli/trace", test_trace);
  g_test_add_func ("/planner/plan-cli/user-pin", test_user_pin);
  g_test_add_func ("/planner/plan-cli/compare", test_compare);
  g_test_add_func ("/planner/plan-cli/export", test_export);
  g_test_add_func ("/planner/plan-cli/statuses", test_statuses);
  g_test_add_func ("/planner/plan-cli/training", test_training);
  g_test_add_func ("/planner/plan-cli/fsdp-options", test_fsdp_options);
  int status = g_test_run ();
  test_util_tmp_dir_remove (dir);
  g_free (dir);
  return status;
}
