#define G_LOG_DOMAIN "test-search-cli"

#include "config.h"

#include <math.h>
#include <string.h>

#include "test-util.h"

/* shardscope-cli search and propagate --optimal as scripts use them ($SHARDSCOPE_CLI). */

static char *dir;

static JsonObject *
candidate_at (JsonObject *o, guint i)
{
  return json_array_get_object_element (json_object_get_array_member (o, "candidates"), i);
}

/* search --json: the keys issue 17 names, the best is the fastest that fits and no slower
 * than any built-in policy on any mesh, every exact solve is proven, and --save stores the
 * top candidates. */
static void
test_search_json (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *db = g_build_filename (dir, "search.db", NULL);
  const char *args[] = { "search", "llama-tiny", "--devices", "4",    "--json", "--top",
                         "2",      "--save",     "tiny",      "--db", db,       NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_assert_cmpint (test_util_run_cli (args, &out, &err), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  g_assert_true (json_object_has_member (o, "search_ms"));
  g_assert_cmpfloat (json_object_get_double_member (o, "search_ms"), >, 0);
  JsonArray *candidates = json_object_get_array_member (o, "candidates");
  /* 3 two-axis meshes x (3 policies + solve), 2 pipelines (llama-tiny's 2 layers) x 3. */
  g_assert_cmpuint (json_array_get_length (candidates), ==, 18);
  JsonObject *best = json_object_get_object_member (o, "best");
  g_assert_nonnull (best);
  double best_step = json_object_get_double_member (best, "step_time_us");
  guint n_solved = 0;
  for (guint i = 0; i < json_array_get_length (candidates); i++)
    {
      JsonObject *c = candidate_at (o, i);
      const char *keys[]
          = { "mesh", "policy", "solved", "step_time_us", "memory_per_device_bytes", "fits" };
      for (guint k = 0; k < G_N_ELEMENTS (keys); k++)
        g_assert_true (json_object_has_member (c, keys[k]));
      gboolean solved = json_object_get_boolean_member (c, "solved");
      /* policy or solved: one of them names the plan. */
      g_assert_true (solved == json_object_get_null_member (c, "policy"));
      if (json_object_get_null_member (c, "step_time_us"))
        {
          g_assert_false (solved);
          g_assert_nonnull (json_object_get_string_member (c, "error"));
          continue;
        }
      if (json_object_get_boolean_member (c, "fits"))
        g_assert_cmpfloat (best_step, <=, json_object_get_double_member (c, "step_time_us"));
      if (solved)
        {
          n_solved++;
          JsonObject *s = json_object_get_object_member (c, "solve");
          g_assert_true (json_object_get_boolean_member (s, "optimal"));
          g_assert_cmpfloat (json_object_get_double_member (s, "gap"), ==, 0);
          g_assert_cmpfloat (json_object_get_double_member (s, "objective_us"), <=,
                             json_object_get_double_member (s, "greedy_objective_us")
                                 * (1 + 1e-12));
          g_assert_cmpfloat (json_object_get_double_member (s, "bound_us"), <=,
                             json_object_get_double_member (s, "objective_us") * (1 + 1e-12));
          g_assert_cmpint (json_object_get_int_member (s, "blocks"), ==, 2);
          /* The first layer reads the embeddings, the second the first layer. */
          g_assert_cmpint (json_object_get_int_member (s, "block_kinds"), ==, 2);
        }
    }
  g_assert_cmpuint (n_solved, ==, 3);
  /* The top two were saved and are in the store. */
  JsonArray *top = json_object_get_array_member (o, "top");
  g_assert_cmpuint (json_array_get_length (top), ==, 2);
  for (guint r = 0; r < 2; r++)
    {
      JsonObject *c = candidate_at (o, (guint)json_array_get_int_element (top, r));
      const char *name = json_object_get_string_member (c, "saved");
      g_assert_nonnull (name);
      g_assert_true (g_str_has_prefix (name, "tiny "));
      g_autofree char *spec = g_strdup_printf ("db:%s", name);
      g_autofree char *shown = NULL;
      const char *show[] = { "db", "show", spec, "--db", db, NULL };
      g_assert_cmpint (test_util_run_cli (show, &shown, NULL), ==, 0);
    }
}

/* propagate --optimal: the same pins, a plan no worse than greedy, the report in JSON. */
static void
test_propagate_optimal (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *greedy_path = g_build_filename (dir, "greedy.json", NULL);
  g_autofree char *optimal_path = g_build_filename (dir, "optimal.json", NULL);
  const char *greedy[] = { "propagate", "gpt2-tiny", "--mesh", "dp=2,mp=2", "--policy",
                           "megatron",  "--json",    "-o",     greedy_path, NULL };
  const char *optimal[]
      = { "propagate", "gpt2-tiny", "--mesh", "dp=2,mp=2",  "--policy", "megatron",
          "--optimal", "--json",    "-o",     optimal_path, NULL };
  g_autofree char *a = NULL, *b = NULL;
  g_assert_cmpint (test_util_run_cli (greedy, &a, NULL), ==, 0);
  g_assert_cmpint (test_util_run_cli (optimal, &b, NULL), ==, 0);
  g_autoptr (JsonParser) pa = json_parser_new ();
  g_autoptr (JsonParser) pb = json_parser_new ();
  JsonObject *ga = test_util_parse_object (pa, a);
  JsonObject *gb = test_util_parse_object (pb, b);
  g_assert_false (json_object_has_member (ga, "solve"));
  JsonObject *s = json_object_get_object_member (gb, "solve");
  g_assert_true (json_object_get_boolean_member (s, "optimal"));
  g_assert_cmpfloat (json_object_get_double_member (s, "objective_us"), <=,
                     json_object_get_double_member (s, "greedy_objective_us"));
  g_assert_cmpint (json_object_get_int_member (gb, "pinned"), ==,
                   json_object_get_int_member (ga, "pinned"));
  /* compare shows the two side by side. */
  g_autofree char *c = NULL;
  const char *compare[] = { "compare", greedy_path, optimal_path, "--json", NULL };
  g_assert_cmpint (test_util_run_cli (compare, &c, NULL), ==, 0);
  g_autoptr (JsonParser) pc = json_parser_new ();
  JsonObject *co = test_util_parse_object (pc, c);
  g_assert_true (json_object_has_member (co, "ops"));
}

/* llama-70b on 64 devices with pipelines in the sweep: the best fits and is no slower than any
 * candidate that fits; every pp candidate says its pipeline, and those with a plan have the
 * bubble (p - 1) / (m + p - 1) of 1F1B over --micro-batches. */
static void
test_search_llama70b_pipelines (void)
{
  if (test_util_skip_without_cli ())
    return;
  const char *args[] = { "search",     "llama-70b",       "--batch", "64",     "--devices", "64",
                         "--no-solve", "--micro-batches", "8",       "--json", NULL };
  g_autofree char *out = NULL;
  g_assert_cmpint (test_util_run_cli (args, &out, NULL), ==, 0);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = test_util_parse_object (parser, out);
  JsonArray *candidates = json_object_get_array_member (o, "candidates");
  /* 7 two-axis meshes and 6 + 5 + 4 + 3 + 2 + 1 = 21 with pp = 2 .. 64, 3 policies each. */
  g_assert_cmpuint (json_array_get_length (candidates), ==, 28 * 3);
  JsonObject *best = json_object_get_object_member (o, "best");
  g_assert_nonnull (best);
  g_assert_true (json_object_get_boolean_member (best, "fits"));
  g_assert_cmpfloat (json_object_get_double_member (best, "memory_per_device_bytes"), <=,
                     json_object_get_double_member (o, "memory_limit_bytes"));
  double best_step = json_object_get_double_member (best, "step_time_us");
  guint n_pp = 0;
  for (guint i = 0; i < json_array_get_length (candidates); i++)
    {
      JsonObject *c = candidate_at (o, i);
      const char *mesh = json_object_get_string_member (c, "mesh");
      gboolean has_plan = !json_object_get_null_member (c, "step_time_us");
      if (has_plan && json_object_get_boolean_member (c, "fits"))
        g_assert_cmpfloat (best_step, <=, json_object_get_double_member (c, "step_time_us"));
      if (!g_str_has_prefix (mesh, "pp="))
        {
          g_assert_false (json_object_has_member (c, "pipeline"));
          continue;
        }
      JsonObject *pl = json_object_get_object_member (c, "pipeline");
      g_assert_nonnull (pl);
      gint64 p = g_ascii_strtoll (mesh + 3, NULL, 10);
      g_assert_cmpint (json_object_get_int_member (pl, "stages"), ==, p);
      g_assert_cmpint (json_object_get_int_member (pl, "micro_batches"), ==, 8);
      g_assert_cmpstr (json_object_get_string_member (pl, "schedule"), ==, "1f1b");
      if (!has_plan)
        continue;
      n_pp++;
      g_assert_cmpfloat_with_epsilon (json_object_get_double_member (pl, "bubble_fraction"),
                                      (double)(p - 1) / (double)(8 + p - 1), 1e-12);
    }
  g_assert_cmpuint (n_pp, >, 0);
}

static void
test_search_usage (void)
{
  if (test_util_skip_without_cli ())
    return;
  const char *no_devices[] = { "search", "llama-tiny", NULL };
  g_autofree char *err = NULL;
  g_assert_cmpint (test_util_run_cli (no_devices, NULL, &err), ==, 2);
  g_assert_nonnull (strstr (err, "--devices"));
  const char *zero[] = { "search", "llama-tiny", "--devices", "0", NULL };
  g_assert_cmpint (test_util_run_cli (zero, NULL, NULL), ==, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  dir = test_util_tmp_dir_new ("test-search-cli-XXXXXX");
  g_test_add_func ("/planner/search-cli/json", test_search_json);
  g_test_add_func ("/planner/search-cli/propagate-optimal", test_propagate_optimal);
  g_test_add_func ("/planner/search-cli/usage", test_search_usage);
  g_test_add_func ("/planner/search-cli/llama70b-pipelines", test_search_llama70b_pipelines);
  int status = g_test_run ();
  test_util_tmp_dir_remove (dir);
  g_free (dir);
  return status;
}
