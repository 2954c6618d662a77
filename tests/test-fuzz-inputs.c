/* test-fuzz-inputs.c: every seed and regression input under tests/fuzz/<harness>/ through the
 * harness's entry point (fuzz/fuzz-harness.h), in every build, so what a fuzzer once crashed
 * on stays fixed where no fuzzer runs (gcc, no sanitizer).
 *
 * Each input must be taken with no error, or refused with a PLANNER_ERROR that has a message.
 * Seeds are real files the program takes, so a seed must be taken. A regression input was a
 * crash; it is refused, unless its name starts with "ok-" (an input that crashed a check
 * after it was taken, and is fine now), and then it must be taken. */
#include <glib.h>
#include <string.h>

#include "fuzz-harness.h"
#include "planner-error.h"
#include "planner-onnx-import.h"

typedef struct
{
  const char *name;
  FuzzEntry entry;
} Harness;

static const Harness harnesses[] = {
  { "mesh", fuzz_mesh },
  { "layout", fuzz_layout },
  { "pin", fuzz_pin },
  { "hf-config", fuzz_hf_config },
  { "graph-json", fuzz_graph_json },
  { "plan-json", fuzz_plan_json },
  { "policy", fuzz_policy },
  { "hardware", fuzz_hardware },
  { "store", fuzz_store },
  { "onnx", fuzz_onnx },
};

typedef struct
{
  const Harness *harness;
  char *path;
  gboolean must_take;
} Input;

static void
input_free (gpointer data)
{
  Input *input = data;
  g_free (input->path);
  g_free (input);
}

static void
replay (gconstpointer data)
{
  const Input *input = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *contents = NULL;
  gsize length = 0;

  g_file_get_contents (input->path, &contents, &length, &error);
  g_assert_no_error (error);
  gboolean ok = input->harness->entry ((const guint8 *)contents, length, &error);
  fuzz_check_outcome (ok, error, input->harness->name);
  if (input->must_take)
    g_assert_no_error (error);
  else
    {
      g_assert_false (ok);
      g_assert_nonnull (error);
      g_test_message ("%s: refused: %s", input->path, error->message);
    }
}

static guint
add_folder (const Harness *harness, const char *kind)
{
  g_autofree char *dir = g_test_build_filename (G_TEST_DIST, "fuzz", harness->name, kind, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  if (d == NULL)
    return 0;
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (d)) != NULL)
    if (name[0] != '.')
      g_ptr_array_add (names, g_strdup (name));
  g_ptr_array_sort (names, (GCompareFunc)g_strcmp0);
  for (guint i = 0; i < names->len; i++)
    {
      const char *file = g_ptr_array_index (names, i);
      Input *input = g_new0 (Input, 1);
      input->harness = harness;
      input->path = g_build_filename (dir, file, NULL);
      input->must_take = strcmp (kind, "seeds") == 0 || g_str_has_prefix (file, "ok-");
      g_autofree char *test_path = g_strdup_printf ("/fuzz/%s/%s/%s", harness->name, kind, file);
      g_test_add_data_func_full (test_path, input, replay, input_free);
    }
  return names->len;
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  fuzz_init ();
  for (guint h = 0; h < G_N_ELEMENTS (harnesses); h++)
    {
      /* A build without ONNX refuses every ONNX file: its seeds cannot be taken. */
      if (g_str_equal (harnesses[h].name, "onnx") && !planner_onnx_supported ())
        continue;
      /* A harness without seeds would replay nothing and pass: that is a mistake. */
      if (add_folder (&harnesses[h], "seeds") == 0)
        g_error ("tests/fuzz/%s/seeds/ is empty or missing", harnesses[h].name);
      add_folder (&harnesses[h], "regressions");
    }
  return g_test_run ();
}
