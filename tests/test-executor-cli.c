/* shardscope-cli run and calibrate (issue 4, "Done when"). */
#include "config.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "executor-backend.h"
#include "planner-hardware.h"
#include "planner-model.h"
#include "planner-plan-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

static int
run_cli (const char *const *args, char **out, char **err)
{
  return test_util_run_cli (args, out, err);
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
  if (test_util_skip_without_cli ())
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
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *dir = g_dir_make_tmp ("executor-cli-XXXXXX", NULL);
  g_autofree char *plan = write_plan (dir);
  /* gpt2-tiny at batch 65536: 148 GiB for the reference's tensors alone, refused before
   * anything is allocated. */
  g_autofree char *big = g_build_filename (dir, "big.json", NULL);
  const char *make_big[]
      = { "propagate", "gpt2-tiny", "--batch", "65536", "--mesh", "dp=2", "-o", big, NULL };
  g_assert_cmpint (run_cli (make_big, NULL, NULL), ==, 0);
  struct
  {
    const char *args[8];
    int status;
    const char *says;
  } cases[] = {
    { { "run", big, NULL }, 1, "GiB of host memory (parameters and inputs" },
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
  g_unlink (big);
  g_rmdir (dir);
}

/* GFLOP/s of one single-threaded cblas_sgemm of @n^3 (OPENBLAS_NUM_THREADS=1 in the
 * executor suite), the best of ten: on a machine shared with other work the best run is the
 * one least disturbed, as the calibration's own figure is. */
static double
plain_gemm_gflops (int n)
{
  g_autofree float *a = g_new (float, (gsize)n *n), *b = g_new (float, (gsize)n *n),
                   *c = g_new0 (float, (gsize)n *n);
  for (gsize i = 0; i < (gsize)n * n; i++)
    a[i] = b[i] = (float)(i % 7) * 0.25f;
  double best = G_MAXDOUBLE;
  for (int r = 0; r < 10; r++)
    {
      gint64 t0 = g_get_monotonic_time ();
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                   n);
      best = MIN (best, (double)(g_get_monotonic_time () - t0) * 1e-6);
    }
  return 2.0 * n * n * (double)n / best / 1e9;
}

/* GB/s of a memcpy of @bytes, read plus write, the best of three. */
static double
plain_copy_GBps (gsize bytes)
{
  g_autofree guint8 *x = g_malloc (bytes), *y = g_malloc (bytes);
  memset (x, 1, bytes);
  memset (y, 2, bytes);
  double best = G_MAXDOUBLE;
  for (int r = 0; r < 3; r++)
    {
      gint64 t0 = g_get_monotonic_time ();
      memcpy (y, x, bytes);
      /* The buffers never escape, so without this barrier the compiler may move the copy past
       * the clock reads (clang under ASan did: a time of zero, infinite bandwidth). */
      __asm__ volatile ("" : : "r"(x), "r"(y) : "memory");
      best = MIN (best, (double)MAX (g_get_monotonic_time () - t0, 1) * 1e-6);
    }
  g_assert_cmpint (y[bytes - 1], ==, 1);
  return 2.0 * (double)bytes / best / 1e9;
}

static void
test_calibrate (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *dir = g_dir_make_tmp ("executor-cli-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "profile.json", NULL);
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "calibrate", "--backend", "cpu", "-o", path, "--devices", "2",
                         "--max-bytes", "4096", "--iterations", "3", NULL };
  /* The plain figures are taken before and after the calibration, the better of each kept,
   * so that a burst of other work during one of them does not decide the comparison. */
  double gemm_before = plain_gemm_gflops (512), copy_before = plain_copy_GBps (32 << 20);
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

  /* The measured figures replaced the starting profile's (cpu-local: 50 GFLOP/s, half that
   * for bf16/f16, 10 GB/s, all written by hand), every float dtype at the f32 figure. */
  g_autoptr (PlannerHardware) start = planner_hardware_lookup ("cpu-local", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (planner_hardware_get_name (hw), ==, "cpu-measured");
  double peak = planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_F32);
  double bandwidth = planner_hardware_get_memory_bandwidth_GBps (hw);
  g_assert_cmpfloat (peak, !=, planner_hardware_get_peak_tflops (start, PLANNER_DTYPE_F32));
  g_assert_cmpfloat (bandwidth, !=, planner_hardware_get_memory_bandwidth_GBps (start));
  g_assert_cmpfloat (planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_BF16), ==, peak);
  g_assert_cmpfloat (planner_hardware_get_peak_tflops (start, PLANNER_DTYPE_BF16), !=, peak);
  /* Memory per device: this machine's, shared by the 2 devices. */
  double memory = (double)sysconf (_SC_PHYS_PAGES) * (double)sysconf (_SC_PAGESIZE) / 2 / 1e9;
  g_assert_cmpfloat_with_epsilon (planner_hardware_get_memory_GB (hw), memory, 1e-6 * memory);

  /* Plausible for this machine: within a factor of 8 of a plain OpenBLAS GEMM and a memcpy
   * timed here, the same work the calibration times (512^3, a 32 MiB copy counted as read
   * plus write). The factor leaves room for two devices sharing the cores with other work;
   * a profile that kept its starting figures, or a unit slip (GFLOP/s for TFLOP/s), is
   * outside it. */
  double gemm_gflops = MAX (gemm_before, plain_gemm_gflops (512));
  double copy_GBps = MAX (copy_before, plain_copy_GBps (32 << 20));
  g_test_message ("calibrated %.1f GFLOP/s, %.1f GB/s; plain OpenBLAS %.1f GFLOP/s, memcpy "
                  "%.1f GB/s",
                  peak * 1e3, bandwidth, gemm_gflops, copy_GBps);
  g_assert_cmpfloat (peak * 1e3, >, gemm_gflops / 8);
  g_assert_cmpfloat (peak * 1e3, <, gemm_gflops * 8);
  g_assert_cmpfloat (bandwidth, >, copy_GBps / 8);
  g_assert_cmpfloat (bandwidth, <, copy_GBps * 8);
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
