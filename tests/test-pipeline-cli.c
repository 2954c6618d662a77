#define G_LOG_DOMAIN "test-pipeline-cli"

#include "config.h"

#include <string.h>

#include "test-util.h"

/* shardscope-cli propagate with a pipeline (issue 18): the command, the batch that
 * --micro-batches implies, and the refusals. */

static JsonObject *
propagate_json (JsonParser *parser, const char *const *args)
{
  g_autofree char *out = NULL, *err = NULL;
  int status = test_util_run_cli (args, &out, &err);
  if (status != 0)
    g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 0);
  return test_util_parse_object (parser, out);
}

/* The "done when": 4 stages of 20 layers, each with its devices and costs, and
 * bubble_fraction = (p - 1) / (m + p - 1) = 3 / 11. */
static void
test_llama70b (void)
{
  if (test_util_skip_without_cli ())
    return;
  const char *const args[]
      = { "propagate",       "llama-70b", "--mesh",     "pp=4,dp=2,mp=8", "--policy", "megatron",
          "--micro-batches", "8",         "--schedule", "1f1b",           "--json",   NULL };
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = propagate_json (parser, args);
  g_assert_cmpfloat_with_epsilon (json_object_get_double_member (o, "bubble_fraction"), 3.0 / 11.0,
                                  1e-15);
  JsonArray *stages = json_object_get_array_member (o, "stages");
  g_assert_cmpuint (json_array_get_length (stages), ==, 4);
  for (guint s = 0; s < 4; s++)
    {
      JsonObject *st = json_array_get_object_element (stages, s);
      g_autofree char *layers = g_strdup_printf ("%u-%u", 20 * s, 20 * s + 19);
      g_assert_cmpstr (json_object_get_string_member (st, "layers"), ==, layers);
      g_assert_cmpint (json_object_get_int_member (st, "n_layers"), ==, 20);
      JsonArray *devices = json_object_get_array_member (st, "devices");
      g_assert_cmpuint (json_array_get_length (devices), ==, 16);
      g_assert_cmpint (json_array_get_int_element (devices, 0), ==, 16 * s);
      g_assert_cmpfloat (json_object_get_double_member (st, "in_flight_micro_batches"), ==, 4 - s);
      g_assert_cmpfloat (json_object_get_double_member (st, "micro_batch_us"), >, 0);
      g_assert_true (
          json_object_has_member (json_object_get_object_member (st, "memory"), "total"));
    }
  JsonObject *b = json_object_get_object_member (o, "step_breakdown_us");
  g_assert_cmpfloat (json_object_get_double_member (b, "pipeline_bubble"), >, 0);
  /* No --batch: one sequence per micro-batch per data-parallel replica, 8 x 2. */
  g_assert_cmpint (json_object_get_int_member (o, "micro_batches"), ==, 8);
  g_assert_cmpint (json_object_get_int_member (o, "local_batch"), ==, 8);
  g_assert_nonnull (strstr (json_object_get_string_member (o, "model"), "batch=16"));
}

/* --virtual-stages alone picks the interleaved schedule; --stages sets the split. */
static void
test_options (void)
{
  if (test_util_skip_without_cli ())
    return;
  const char *const interleaved[]
      = { "propagate", "llama-tiny", "--layers",        "4", "--mesh",           "pp=2,mp=2",
          "--policy",  "megatron",   "--micro-batches", "2", "--virtual-stages", "2",
          "--json",    NULL };
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = propagate_json (parser, interleaved);
  JsonObject *pl = json_object_get_object_member (o, "pipeline");
  g_assert_cmpstr (json_object_get_string_member (pl, "schedule"), ==, "interleaved");
  g_assert_cmpint (json_object_get_int_member (pl, "virtual_stages"), ==, 2);
  JsonArray *stages = json_object_get_array_member (o, "stages");
  g_assert_cmpstr (
      json_object_get_string_member (json_array_get_object_element (stages, 0), "layers"), ==,
      "0-0,2-2");
  /* (p - 1) / (v m + p - 1) = 1 / 5 */
  g_assert_cmpfloat_with_epsilon (json_object_get_double_member (o, "bubble_fraction"), 0.2, 1e-15);

  const char *const split[]
      = { "propagate", "llama-tiny", "--layers", "4",          "--mesh", "pp=2,mp=2", "--policy",
          "megatron",  "--stages",   "0-2,3-3",  "--schedule", "gpipe",  "--json",    NULL };
  g_autoptr (JsonParser) parser2 = json_parser_new ();
  o = propagate_json (parser2, split);
  stages = json_object_get_array_member (o, "stages");
  g_assert_cmpint (
      json_object_get_int_member (json_array_get_object_element (stages, 0), "n_layers"), ==, 3);
  g_assert_cmpint (
      json_object_get_int_member (json_array_get_object_element (stages, 1), "n_layers"), ==, 1);
  g_assert_cmpstr (
      json_object_get_string_member (json_object_get_object_member (o, "pipeline"), "schedule"), ==,
      "gpipe");
}

static void
test_refusals (void)
{
  if (test_util_skip_without_cli ())
    return;
  struct
  {
    const char *const args[16];
    int status;
    const char *fragment;
  } cases[] = {
    { { "propagate", "llama-tiny", "--mesh", "dp=2", "--schedule", "gpipe", NULL },
      2,
      "name a mesh axis pp" },
    { { "propagate", "llama-tiny", "--mesh", "pp=2", "--schedule", "zigzag", NULL },
      2,
      "use 1f1b, gpipe or interleaved" },
    { { "propagate", "llama-tiny", "--mesh", "pp=2", "--micro-batches", "0", NULL },
      2,
      "give 1 or more" },
    { { "propagate", "llama-tiny", "--mesh", "pp=2", "--stages", "0-0,2-1", NULL },
      1,
      "range 1 '2-1' must start at layer 1" },
    { { "propagate", "llama-tiny", "--mesh", "pp=2", "--batch", "8", "--micro-batches", "3", NULL },
      1,
      "3 micro-batches do not split the 8 sequences" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      g_assert_cmpint (test_util_run_cli (cases[i].args, &out, &err), ==, cases[i].status);
      g_test_message ("%s", err);
      g_assert_nonnull (strstr (err, cases[i].fragment));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/pipeline-cli/llama70b", test_llama70b);
  g_test_add_func ("/planner/pipeline-cli/options", test_options);
  g_test_add_func ("/planner/pipeline-cli/refusals", test_refusals);
  return g_test_run ();
}
