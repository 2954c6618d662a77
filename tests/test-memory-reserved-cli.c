/* The reserved estimate through shardscope-cli (issue 12): a plan whose tensors fit on the
 * device but whose reserved total does not is reported as not fitting, in the JSON (`fits`,
 * the memory object's members) and in the text (the tensors' line without "DOES NOT FIT", the
 * Reserved/device line with it).
 *
 * The graph of test-memory-reserved.c: x [1024, 1024] f32 -> MatMul (w [1024, 2048] f32) -> y.
 * By hand (PyTorch's caching allocator and h100-sxm's runtime constants, as there): 40 MiB of
 * tensors (41943040 B), 40 MiB the caching allocator holds beyond them over the step's
 * allocations and frees, 400 MiB of CUDA context and 32 MiB of cuBLAS workspace: 512 MiB
 * reserved (536870912 B). On a profile of 0.3 GB (300000000 B) the
 * tensors fit and the reserved total does not. */

#include "config.h"

#include <string.h>

#include "planner-hardware.h"
#include "test-util.h"

#define MiB ((gint64)1 << 20)

static const char *const graph_text
    = "{\"shardscope_graph\": 1, \"name\": \"gemm\", \"source\": \"gemm\", \"tensors\": ["
      "{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [1024, 1024]},"
      "{\"name\": \"w\", \"dtype\": \"f32\", \"kind\": \"parameter\", \"shape\": [1024, 2048]}],"
      "\"ops\": [{\"name\": \"mm\", \"type\": \"MatMul\", \"inputs\": [\"x\", \"w\"], "
      "\"outputs\": [\"y\"]}],"
      "\"outputs\": [\"y\"]}";

static void
test_tensors_fit_reserved_does_not (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = test_util_tmp_dir_new ("memory-reserved-XXXXXX");
  g_autofree char *graph = g_build_filename (dir, "gemm.graph.json", NULL);
  g_assert_true (g_file_set_contents (graph, graph_text, -1, &error));
  g_assert_no_error (error);
  g_autoptr (PlannerHardware) small = test_util_hardware ("h100-sxm");
  planner_hardware_set_name (small, "h100-300mb");
  planner_hardware_set_memory_GB (small, 0.3);
  g_autofree char *profile = g_build_filename (dir, "h100-300mb.json", NULL);
  g_assert_true (planner_hardware_save_file (small, profile, &error));
  g_assert_no_error (error);

  const char *json_args[]
      = { "propagate", graph, "--mesh", "dp=1", "--hardware", profile, "--json", NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (json_args, &out, &err), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  JsonObject *mem = json_object_get_object_member (o, "memory");
  g_assert_cmpint (json_object_get_int_member (mem, "total"), ==, 40 * MiB);
  g_assert_cmpint (json_object_get_int_member (mem, "allocator"), ==, 40 * MiB);
  g_assert_cmpint (json_object_get_int_member (mem, "cuda_context"), ==, 400 * MiB);
  g_assert_cmpint (json_object_get_int_member (mem, "cublas_workspace"), ==, 32 * MiB);
  g_assert_cmpint (json_object_get_int_member (mem, "nccl_buffers"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (mem, "runtime"), ==, 432 * MiB);
  g_assert_cmpint (json_object_get_int_member (mem, "reserved_total"), ==, 512 * MiB);
  g_assert_cmpint (json_object_get_int_member (o, "memory_capacity_bytes"), ==, 300000000);
  g_assert_false (json_object_get_boolean_member (o, "fits"));

  const char *text_args[]
      = { "propagate", graph, "--mesh", "dp=1", "--hardware", profile, NULL };
  g_autofree char *text = NULL, *text_err = NULL;
  g_assert_cmpint (test_util_run_cli (text_args, &text, &text_err), ==, 0);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  gboolean memory_line = FALSE, reserved_line = FALSE;
  for (guint i = 0; lines[i] != NULL; i++)
    {
      if (g_str_has_prefix (lines[i], "Memory/device:"))
        {
          memory_line = TRUE;
          g_assert_null (strstr (lines[i], "DOES NOT FIT"));
        }
      if (g_str_has_prefix (lines[i], "Reserved/device:"))
        {
          reserved_line = TRUE;
          g_assert_nonnull (strstr (lines[i], "512.0 MiB"));
          g_assert_nonnull (strstr (lines[i], "DOES NOT FIT"));
        }
    }
  g_assert_true (memory_line && reserved_line);
  g_assert_nonnull (strstr (text, "CUDA context"));
  g_assert_nonnull (strstr (text, "cuBLAS workspace"));
  test_util_tmp_dir_remove (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/memory-reserved-cli/tensors-fit-reserved-does-not",
                   test_tensors_fit_reserved_does_not);
  return g_test_run ();
}
