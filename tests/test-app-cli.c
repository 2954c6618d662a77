/* shardscope-cli's own contract: every numeric option of every command is checked (a number,
 * finite, in range, else exit 2 with a usage line), and output that grows combinatorially
 * (strategies on a mesh of many axes) comes a page at a time, with the count. */
#include "config.h"

#include <string.h>

#include "test-util.h"

static char *dir;
static char *plan_path;

static char *
path_in (const char *name)
{
  return g_build_filename (dir, name, NULL);
}

/* `propagate gpt2-tiny --mesh dp=2 -o plan.json`, made once. */
static const char *
cli_plan (void)
{
  if (plan_path == NULL)
    {
      plan_path = path_in ("plan.json");
      const char *args[] = { "propagate", "gpt2-tiny", "--mesh", "dp=2", "-o", plan_path, NULL };
      g_assert_cmpint (test_util_run_cli (args, NULL, NULL), ==, 0);
    }
  return plan_path;
}

typedef struct
{
  const char *args[16];
  const char *says; /* in the usage message */
} BadOption;

static void
test_numeric_options (void)
{
  if (test_util_skip_without_cli ())
    return;
  const char *plan = cli_plan ();
  /* A picture that is there already: every refused render leaves it byte for byte. */
  g_autofree char *png = path_in ("kept.png");
  g_assert_true (g_file_set_contents (png, "not a picture\n", -1, NULL));
  g_autofree char *profile = path_in ("profile.json");

  const BadOption cases[] = {
    { { "render", "gpt2-tiny", "--png", png, "--scale", "nan" }, "--scale nan is out of range" },
    { { "render", "gpt2-tiny", "--png", png, "--scale", "inf" }, "--scale inf is out of range" },
    { { "render", "gpt2-tiny", "--png", png, "--scale", "-inf" }, "--scale -inf" },
    { { "render", "gpt2-tiny", "--png", png, "--scale", "0" }, "give a number in (0, 20]" },
    { { "render", "gpt2-tiny", "--png", png, "--scale", "20.5" }, "--scale 20.5" },
    { { "render", plan, "--png", png, "--step", "-3" }, "--step -3 is out of range" },
    { { "render", plan, "--png", png, "--batch", "2" }, "leave out --batch" },
    { { "run", plan, "--tolerance", "nan" }, "--tolerance nan is out of range" },
    { { "run", plan, "--tolerance", "inf" }, "--tolerance inf" },
    { { "run", plan, "--tolerance", "0" }, "give a number in (0, 1]" },
    { { "run", plan, "--tolerance", "-1e-5" }, "--tolerance -1e-05" },
    { { "run", plan, "--repeat", "0" }, "--repeat 0 is out of range: give a whole number from 1" },
    { { "run", plan, "--warmup", "-1" }, "--warmup -1" },
    { { "run", plan, "--devices", "-2" }, "--devices -2" },
    { { "run", plan, "--seed", "-1" }, "--seed -1" },
    { { "calibrate", "-o", profile, "--devices", "1" }, "--devices 1 is out of range" },
    { { "calibrate", "-o", profile, "--iterations", "0" }, "--iterations 0" },
    { { "calibrate", "-o", profile, "--max-bytes", "4" }, "--max-bytes 4" },
    { { "calibrate", "-o", profile, "--max-bytes", "1099511627776" }, "--max-bytes 1099511627776" },
    { { "graph", "gpt2-tiny", "--batch", "0" }, "--batch 0 is out of range" },
    { { "graph", "gpt2-tiny", "--seq", "-1" }, "--seq -1" },
    { { "graph", "gpt2-tiny", "--layers", "100000" }, "--layers 100000" },
    { { "propagate", "gpt2-tiny", "--mesh", "dp=2", "--batch", "-8" }, "--batch -8" },
    { { "strategies", "gpt2-tiny", "--mesh", "dp=2", "--op", "lm_head", "--limit", "0" },
      "--limit 0" },
    { { "strategies", "gpt2-tiny", "--mesh", "dp=2", "--op", "lm_head", "--limit", "3", "--all" },
      "not both" },
    /* Not a number at all: GOption's own refusal, also exit 2. */
    { { "run", plan, "--repeat", "many" }, "--repeat" },
    { { "render", "gpt2-tiny", "--png", png, "--scale", "1e999" }, "--scale" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int status = test_util_run_cli (cases[i].args, &out, &err);
      g_autofree char *line = g_strjoinv (" ", (char **)cases[i].args);
      g_test_message ("%s -> %d: %s", line, status, err);
      if (status != 2 || strstr (err, cases[i].says) == NULL || strstr (err, "Usage:") == NULL)
        g_error ("%s: status %d (expected 2), stderr \"%s\" (expected \"%s\" and a usage line)",
                 line, status, err, cases[i].says);
      g_assert_cmpstr (out, ==, "");
    }
  g_autofree char *kept = NULL;
  g_assert_true (g_file_get_contents (png, &kept, NULL, NULL));
  g_assert_cmpstr (kept, ==, "not a picture\n");
  g_assert_false (g_file_test (profile, G_FILE_TEST_EXISTS));

  /* The ends of each range are taken. */
  const char *scale[] = { "render", "gpt2-tiny", "--svg", png, "--scale", "0.25", NULL };
  const char *run[]
      = { "run", plan, "--repeat", "1", "--warmup", "0", "--tolerance", "1", "--seed", "0", NULL };
  const char *batch[]
      = { "graph", "gpt2-tiny", "--batch", "1", "--seq", "1", "--layers", "1", NULL };
  const char *const *good[] = { scale, run, batch };
  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autofree char *err = NULL;
      int status = test_util_run_cli (good[i], NULL, &err);
      if (status != 0)
        g_error ("%s %s: status %d: %s", good[i][0], good[i][1], status, err);
    }
}

/* MatMul (d0, d1, k, n) on a mesh of three axes of 2: each axis splits one of the four
 * factors or none, 5^3 = 125 strategies (tests/test-op-rule.c derives the same counts);
 * gpt2-tiny's c_fc is [8,128,64] x [64,256], every factor divisible by 8. */
#define C_FC "transformer.h.0.mlp.c_fc"
#define C_FC_ON_2X2X2 125

static guint
count_lines_starting (const char *text, const char *prefix)
{
  guint n = 0;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    n += g_str_has_prefix (lines[i], prefix);
  return n;
}

static void
test_strategies_page (void)
{
  if (test_util_skip_without_cli ())
    return;
  const char *mesh = "a=2,b=2,c=2";
  {
    const char *args[] = { "strategies", "gpt2-tiny", "--mesh", mesh, "--op", C_FC, NULL };
    g_autofree char *out = NULL;
    g_assert_cmpint (test_util_run_cli (args, &out, NULL), ==, 0);
    g_assert_nonnull (
        strstr (out, "125 legal strategies (compute time on h100-sxm); the first 50:"));
    g_assert_nonnull (strstr (out, "75 more not shown: --limit N shows the first N, --all"));
    g_assert_cmpuint (count_lines_starting (out, "#"), ==, 50);
  }
  {
    const char *args[]
        = { "strategies", "gpt2-tiny", "--mesh", mesh, "--op", C_FC, "--limit", "7", NULL };
    g_autofree char *out = NULL;
    g_assert_cmpint (test_util_run_cli (args, &out, NULL), ==, 0);
    g_assert_cmpuint (count_lines_starting (out, "#"), ==, 7);
    g_assert_nonnull (strstr (out, "118 more not shown"));
  }
  {
    const char *args[] = { "strategies", "gpt2-tiny", "--mesh", mesh, "--op", C_FC, "--all", NULL };
    g_autofree char *out = NULL;
    g_assert_cmpint (test_util_run_cli (args, &out, NULL), ==, 0);
    g_assert_cmpuint (count_lines_starting (out, "#"), ==, C_FC_ON_2X2X2);
    g_assert_null (strstr (out, "more not shown"));
    g_assert_nonnull (strstr (out, "125 legal strategies (compute time on h100-sxm):\n"));
  }
  /* JSON: the count of all, the limit, and the bounded list. */
  const struct
  {
    const char *option, *value;
    gint64 limit; /* -1: null */
    guint listed;
  } json_cases[] = {
    { NULL, NULL, 50, 50 },
    { "--limit", "3", 3, 3 },
    { "--limit", "1000", 1000, C_FC_ON_2X2X2 },
    { "--all", NULL, -1, C_FC_ON_2X2X2 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (json_cases); i++)
    {
      const char *args[]
          = { "strategies",         "gpt2-tiny",         "--mesh", mesh, "--op", C_FC, "--json",
              json_cases[i].option, json_cases[i].value, NULL };
      g_autofree char *out = NULL;
      g_assert_cmpint (test_util_run_cli (args, &out, NULL), ==, 0);
      g_autoptr (JsonParser) parser = json_parser_new ();
      JsonObject *o = test_util_parse_object (parser, out);
      g_assert_cmpint (json_object_get_int_member (o, "count"), ==, C_FC_ON_2X2X2);
      if (json_cases[i].limit < 0)
        g_assert_true (json_object_get_null_member (o, "limit"));
      else
        g_assert_cmpint (json_object_get_int_member (o, "limit"), ==, json_cases[i].limit);
      JsonArray *list = json_object_get_array_member (o, "strategies");
      g_assert_cmpuint (json_array_get_length (list), ==, json_cases[i].listed);
      JsonObject *last = json_array_get_object_element (list, json_cases[i].listed - 1);
      g_assert_cmpint (json_object_get_int_member (last, "index"), ==, json_cases[i].listed - 1);
    }

  /* Six axes: 15,360 strategies, 7 MB of text with --all; a page by default. */
  const char *many[]
      = { "strategies", "gpt2-tiny", "--mesh", "a=2,b=2,c=2,d=2,e=2,f=2", "--op", C_FC, NULL };
  g_autofree char *out = NULL;
  g_assert_cmpint (test_util_run_cli (many, &out, NULL), ==, 0);
  g_assert_cmpuint (strlen (out), <, 64 * 1024);
  g_assert_cmpuint (count_lines_starting (out, "#"), ==, 50);
  g_assert_nonnull (strstr (out, "legal strategies (compute time on h100-sxm); the first 50:"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dir = test_util_tmp_dir_new ("app-cli-XXXXXX");
  g_test_add_func ("/app/cli/numeric-options", test_numeric_options);
  g_test_add_func ("/app/cli/strategies-page", test_strategies_page);
  int status = g_test_run ();
  test_util_tmp_dir_remove (dir);
  g_free (dir);
  g_free (plan_path);
  return status;
}
