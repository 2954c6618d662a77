/* shardscope-cli run and calibrate (issue 4, "Done when"). */
#include "config.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "executor-backend.h"
#include "planner-hardware.h"
#include "planner-model.h"
#include "planner-plan-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"

static const char *
cli (void)
{
  const char *path = g_getenv ("SHARDSCOPE_CLI");
  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_EXECUTABLE))
    return NULL;
  return path;
}

/* TRUE, with the test skipped, when there is no built shardscope-cli to run. */
static gboolean
skip_without_cli (void)
{
  if (cli () != NULL)
    return FALSE;
  g_test_skip ("shardscope-cli is not built");
  return TRUE;
}

static int
run_cli (const char *const *args, char **out, char **err)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (char *) cli ());
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add (argv, (char *) args[i]);
  g_ptr_array_add (argv, NULL);
  int status = 0;
  g_autoptr (GError) error = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               out, err, &status, &error));
  g_assert_no_error (error);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/* The plan `propagate gpt2-tiny --mesh dp=2,mp=2 --policy megatron -o p.json` writes. */
static char *
write_plan (const char *dir)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) g = planner_zoo_build ("gpt2-tiny", NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("dp=2,mp=2", &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("cpu-local", &error);
  g_autoptr (GPtrArray) pins = planner_policy_expand ("megatron", g, mesh, NULL, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) plan = planner_propagate (g, mesh, hw, pins, NULL, &error);
  g_assert_no_error (error);
  char *path = g_build_filename (dir, "p.json", NULL);
  g_assert_true (planner_plan_save_json (plan, path, &error));
  return path;
}

static void
test_run_json (void)
{
  if (skip_without_cli ())
    return;
  g_autofree char *dir = g_dir_make_tmp ("executor-cli-XXXXXX", NULL);
  g_autofree char *plan = write_plan (dir);
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "run", plan, "--backend", "cpu", "--json", "--repeat", "2", NULL };
  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);

  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) root = json_from_string (out, &error);
  g_assert_no_error (error);
  JsonObject *o = json_node_get_object (root);
  g_assert_true (json_object_get_boolean_member (o, "passed"));
  g_assert_cmpfloat (json_object_get_double_member (o, "max_rel_error"), <=, 1e-5);
  g_assert_cmpint (json_object_get_int_member (o, "devices"), ==, 4);
  JsonArray *outputs = json_object_get_array_member (o, "outputs");
  g_assert_cmpuint (json_array_get_length (outputs), ==, 1);
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (outputs, 0),
                                                  "name"),
                   ==, "logits");
  JsonArray *ops = json_object_get_array_member (o, "ops");
  g_assert_cmpuint (json_array_get_length (ops), >, 10);
  JsonObject *op0 = json_array_get_object_element (ops, 0);
  g_assert_true (json_object_has_member (op0, "estimated_us"));
  g_assert_cmpfloat (json_object_get_double_member (op0, "measured_us"), >, 0);
  JsonArray *rd = json_object_get_array_member (o, "redistributions");
  g_assert_cmpuint (json_array_get_length (rd), >, 0);
  g_assert_true (json_object_has_member (json_array_get_object_element (rd, 0), "name"));

  g_unlink (plan);
  g_rmdir (dir);
}

static void
test_run_refusals (void)
{
  if (skip_without_cli ())
    return;
  g_autofree char *dir = g_dir_make_tmp ("executor-cli-XXXXXX", NULL);
  g_autofree char *plan = write_plan (dir);
  struct
  {
    const char *args[8];
    int status;
    const char *says;
  } cases[] = {
    { { "run", plan, "--devices", "8", NULL }, 1, "has 4 devices" },
    { { "run", plan, "--backend", "tpu", NULL }, 1, "unknown backend 'tpu'" },
    { { "run", plan, "--backend", "cuda", NULL }, 1, "-Dcuda=enabled" },
    { { "run", "/nonexistent/p.json", NULL }, 1, "p.json" },
    { { "run", NULL }, 2, "missing argument" },
    { { "calibrate", "--backend", "cpu", NULL }, 2, "-o FILE" },
  };
  /* A build with the cuda backend (-Dcuda) answers for it: with a GPU it runs. */
  gboolean cuda_built = g_strv_contains (executor_backend_names (), "cuda");
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      if (cuda_built && g_str_equal (cases[i].says, "-Dcuda=enabled"))
        continue;
      int status = run_cli (cases[i].args, &out, &err);
      g_test_message ("%s %s -> %d: %s", cases[i].args[0], cases[i].args[1] ? cases[i].args[1] : "",
                      status, err);
      g_assert_cmpint (status, ==, cases[i].status);
      g_assert_nonnull (strstr (err, cases[i].says));
    }
  g_unlink (plan);
  g_rmdir (dir);
}

static void
test_calibrate (void)
{
  if (skip_without_cli ())
    return;
  g_autofree char *dir = g_dir_make_tmp ("executor-cli-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "profile.json", NULL);
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "calibrate", "--backend", "cpu", "-o", path, "--devices", "2",
                         "--max-bytes", "4096", "--iterations", "3", NULL };
  g_assert_cmpint (run_cli (args, &out, &err), ==, 0);

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw = planner_hardware_load_file (path, &error);
  g_assert_no_error (error);
  /* Every collective, group of 2, 8 B .. 4 KiB. */
  static const PlannerStepKind kinds[] = { PLANNER_STEP_ALL_REDUCE, PLANNER_STEP_ALL_GATHER,
                                           PLANNER_STEP_REDUCE_SCATTER, PLANNER_STEP_ALL_TO_ALL };
  for (guint k = 0; k < G_N_ELEMENTS (kinds); k++)
    {
      guint n = 0;
      const PlannerMeasuredPoint *pts = planner_hardware_get_measurement (hw, kinds[k],
                                                                          PLANNER_LINK_INTRA, 2,
                                                                          &n);
      g_assert_cmpuint (n, >=, 9);
      g_assert_cmpfloat (pts[0].seconds, >, 0);
    }
  g_assert_cmpfloat (planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_F32), >, 0);
  g_assert_cmpfloat (planner_hardware_get_memory_bandwidth_GBps (hw), >, 0);
  /* The GEMM efficiency table, measured: square sizes 32 .. 512 (the calibration GEMM), each
   * size's throughput as a fraction of the best one, which is the f32 peak. */
  const PlannerEfficiency *e = planner_hardware_get_efficiency (hw);
  g_assert_cmpuint (e->n_gemm, ==, 5);
  double best = 0;
  for (guint k = 0; k < e->n_gemm; k++)
    {
      g_assert_cmpfloat (e->gemm_size[k], ==, 32 << k);
      g_assert_cmpfloat (e->gemm_efficiency[k], >, 0);
      g_assert_cmpfloat (e->gemm_efficiency[k], <=, 1);
      best = MAX (best, e->gemm_efficiency[k]);
    }
  g_assert_cmpfloat (best, ==, 1);
  g_assert_cmpfloat (e->memory_bound, ==, 1);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/executor/cli/run-json", test_run_json);
  g_test_add_func ("/executor/cli/run-refusals", test_run_refusals);
  g_test_add_func ("/executor/cli/calibrate", test_calibrate);
  return g_test_run ();
}
