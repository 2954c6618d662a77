#define G_LOG_DOMAIN "test-graphview-cli"

#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "test-util.h"

/* shardscope-cli render, as CI runs it: the gpt2 and LLaMA-2-70B-shaped megatron plans to PNG
 * and SVG, and its exit statuses (0 done, 1 refused, 2 bad usage). */

static char *dir;

static void
assert_file_starts (const char *path, const char *magic, gsize magic_length)
{
  g_autofree char *text = NULL;
  gsize length = 0;
  g_assert_true (g_file_get_contents (path, &text, &length, NULL));
  g_assert_cmpuint (length, >, 1000);
  g_assert_cmpmem (text, magic_length, magic, magic_length);
}

static void
test_render (gconstpointer data)
{
  if (test_util_skip_without_cli ())
    return;
  const char *model = data;
  g_autofree char *png = g_strdup_printf ("%s/%s.png", dir, model);
  g_autofree char *svg = g_strdup_printf ("%s/%s.svg", dir, model);
  const char *args[] = { "render", model, "--mesh", "dp=2,mp=4", "--policy", "megatron",
                         "--png",  png,   "--svg",  svg,         NULL };
  g_autofree char *err = NULL;
  g_assert_cmpint (test_util_run_cli (args, NULL, &err), ==, 0);
  assert_file_starts (png, "\x89PNG", 4);
  assert_file_starts (svg, "<?xml", 5);
  g_unlink (png);
  g_unlink (svg);
}

static void
test_statuses (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *png = g_strdup_printf ("%s/x.png", dir);
  const char *no_output[] = { "render", "gpt2", NULL };
  const char *bad_expand[] = { "render", "gpt2", "--expand", "no.such.block", "--png", png, NULL };
  const char *step_without_plan[] = { "render", "gpt2", "--step", "3", "--png", png, NULL };
  g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL;
  g_assert_cmpint (test_util_run_cli (no_output, NULL, &e1), ==, 2);
  g_assert_nonnull (strstr (e1, "--png"));
  g_assert_cmpint (test_util_run_cli (bad_expand, NULL, &e2), ==, 1);
  g_assert_nonnull (strstr (e2, "transformer.h.0-11"));
  g_assert_cmpint (test_util_run_cli (step_without_plan, NULL, &e3), ==, 2);
  g_assert_false (g_file_test (png, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dir = test_util_tmp_dir_new ("graphview-cli-XXXXXX");
  g_test_add_data_func ("/graphview/cli/render-gpt2", "gpt2", test_render);
  g_test_add_data_func ("/graphview/cli/render-llama-70b", "llama-70b", test_render);
  g_test_add_func ("/graphview/cli/statuses", test_statuses);
  int status = g_test_run ();
  test_util_tmp_dir_remove (dir);
  g_free (dir);
  return status;
}
