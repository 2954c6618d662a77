#define G_LOG_DOMAIN "test-policy"

#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "planner-error.h"
#include "planner-policy.h"
#include "test-util.h"

/* Policy files: every member checked, with its type, before any rule is used. */

typedef struct
{
  char *dir;
  char *path;
  PlannerGraph *graph;
  PlannerMesh *mesh;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  f->dir = test_util_tmp_dir_new ("policy-XXXXXX");
  f->path = g_build_filename (f->dir, "policy.json", NULL);
  f->graph = test_util_model ("gpt2-tiny", NULL);
  f->mesh = test_util_mesh ("dp=2,mp=2");
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  test_util_tmp_dir_remove (f->dir);
  g_free (f->dir);
  g_free (f->path);
  g_object_unref (f->graph);
  planner_mesh_free (f->mesh);
}

static GPtrArray *
expand (Fixture *f, const char *text, GPtrArray *notes, GError **error)
{
  g_assert_true (g_file_set_contents (f->path, text, -1, NULL));
  return planner_policy_expand (f->path, f->graph, f->mesh, notes, error);
}

#define HEAD "{\"shardscope_policy\": 1, \"name\": \"t\", \"families\": [{\"family\": \"gpt2\", " \
             "\"detect\": \"*.mlp.c_fc\", \"rules\": ["
#define TAIL "]}]}"
#define FC "\"ops\": \"transformer.h.*.mlp.c_fc\""

/* A file that uses every member: the pins it gives, by hand. */
static void
test_valid (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) pins = expand (
      f,
      "{\"shardscope_policy\": 1, \"name\": \"t\", \"description\": \"d\", \"families\": [{"
      "\"family\": \"llama\", \"detect\": \"model.*\", \"rules\": []}, {\"family\": \"gpt2\", "
      "\"detect\": \"*.mlp.c_fc\", \"rules\": [{" FC ", \"pin\": \"[{dp},_,_],[_,{tp}]\", "
      "\"optional\": false}, {\"ops\": \"transformer.wpe\", \"pin\": \"[{tp},_],[_,_]\", "
      "\"optional\": true}, {\"ops\": \"*\", \"types\": [\"LayerNorm\"], \"batch\": \"{dp}\"}]}]}",
      notes, &error);

  g_assert_no_error (error);
  /* The c_fc rule; the wpe rule left out (its input position_ids is [1,128]: 1 % 2 != 0), and
   * a note says so; the batch rule pins
   * each of gpt2-tiny's 5 LayerNorms (2 layers x 2, and ln_f) over dp. */
  g_assert_cmpuint (pins->len, ==, 6);
  g_assert_cmpstr (((PlannerPin *)g_ptr_array_index (pins, 0))->text, ==,
                   "transformer.h.*.mlp.c_fc=[dp,_,_],[_,mp]");
  g_assert_cmpstr (((PlannerPin *)g_ptr_array_index (pins, 1))->text, ==,
                   "transformer.h.0.ln_1=[dp,_,_],[_],[_]");
  g_assert_cmpuint (notes->len, ==, 1);
  g_assert_nonnull (strstr (g_ptr_array_index (notes, 0), "left out optional rule 'transformer.wpe=[mp,_],[_,_]'"));
}

typedef struct
{
  const char *text;
  const char *fragment;
} BadCase;

static const BadCase bad_cases[] = {
  /* A string where a boolean belongs was a GLib CRITICAL and an unrelated message. */
  { HEAD "{" FC ", \"pin\": \"[{dp},_,_],[_,{tp}]\", \"optional\": \"yes\"}" TAIL,
    "field 'families[0].rules[0].optional' must be true or false" },
  { HEAD "{" FC ", \"pin\": \"[_,_,_],[_,_]\", \"optinal\": true}" TAIL,
    "field 'families[0].rules[0].optinal' is not known here (known: ops, pin, batch, types, "
    "optional)" },
  { HEAD "{" FC ", \"types\": \"Linear\", \"batch\": \"{dp}\"}" TAIL,
    "field 'families[0].rules[0].types' must be an array" },
  { HEAD "{" FC ", \"types\": [\"Conv9d\"], \"batch\": \"{dp}\"}" TAIL,
    "field 'families[0].rules[0].types[0]' is not an op type: \"Conv9d\"" },
  { HEAD "{\"ops\": 3, \"pin\": \"[_,_,_],[_,_]\"}" TAIL,
    "field 'families[0].rules[0].ops' must be a string" },
  { HEAD "{" FC ", \"pin\": [\"[_,_,_]\"]}" TAIL, "field 'families[0].rules[0].pin' must be a string" },
  { HEAD "{" FC ", \"pin\": \"[_,_,_],[_,_]\", \"batch\": \"{dp}\"}" TAIL,
    "field 'families[0].rules[0]' needs one of \"pin\" (layouts) or \"batch\" (axes), not both" },
  { HEAD "{" FC "}" TAIL, "not neither" },
  { HEAD "\"c_fc\"" TAIL, "field 'families[0].rules[0]' must be an object" },
  { "{\"shardscope_policy\": 1, \"families\": [{\"detect\": 7, \"rules\": []}]}",
    "field 'families[0].detect' must be a string" },
  { "{\"shardscope_policy\": 1, \"families\": [{\"detect\": \"*\"}]}",
    "field 'families[0].rules' is missing" },
  { "{\"shardscope_policy\": 1, \"families\": []}", "field 'families' is empty" },
  { "{\"shardscope_policy\": 1, \"families\": {}}", "field 'families' must be an array" },
  { "{\"shardscope_policy\": 1, \"name\": [], \"families\": []}", "field 'name' must be a string" },
  { "{\"shardscope_policy\": 1, \"familes\": []}", "field 'familes' is not known here" },
  { "{\"shardscope_policy\": 2, \"families\": []}", "field 'shardscope_policy' must be in [1, 1]" },
  { "{\"families\": []}", "field 'shardscope_policy' is missing" },
  { "[]", "expected an object with \"shardscope_policy\": 1" },
  { "{\"shardscope_policy\": 1, \"families\": []} {}", ":1:42: more text after the end" },
};

static void
test_refused (Fixture *f, gconstpointer data)
{
  const BadCase *c = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) pins = expand (f, c->text, NULL, &error);

  g_assert_null (pins);
  g_test_message ("%s", error->message);
  test_util_assert_error (error, PLANNER_ERROR_MALFORMED_FILE, c->fragment);
  g_assert_true (g_str_has_prefix (error->message, "policy "));
}

/* The built-ins pass the same checks. */
static void
test_builtins (Fixture *f, gconstpointer data)
{
  for (const char *const *name = planner_policy_builtin_names (); *name; name++)
    {
      g_autoptr (GError) error = NULL;
      if (g_str_equal (*name, "megatron-ep")) /* experts only: tests/test-moe.c */
        continue;
      g_autoptr (GPtrArray) pins
          = planner_policy_expand (*name, f->graph, f->mesh, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (pins->len, >, 0);
    }
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add ("/planner/policy/valid", Fixture, NULL, fixture_set_up, test_valid,
              fixture_tear_down);
  g_test_add ("/planner/policy/builtins", Fixture, NULL, fixture_set_up, test_builtins,
              fixture_tear_down);
  for (guint i = 0; i < G_N_ELEMENTS (bad_cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/planner/policy/refused/%u", i);
      g_test_add (path, Fixture, &bad_cases[i], fixture_set_up, test_refused, fixture_tear_down);
    }
  return g_test_run ();
}
