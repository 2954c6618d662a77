#define G_LOG_DOMAIN "test-util"

#include "config.h"

#include "test-util.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>

#include "planner-error.h"
#include "planner-policy.h"
#include "planner-propagate.h"

PlannerMesh *
test_util_mesh (const char *text)
{
  g_autoptr (GError) error = NULL;
  PlannerMesh *mesh = planner_mesh_parse (text, &error);
  g_assert_no_error (error);
  g_assert_nonnull (mesh);
  return mesh;
}

PlannerHardware *
test_util_hardware (const char *name)
{
  g_autoptr (GError) error = NULL;
  PlannerHardware *hw = planner_hardware_new_builtin (name, &error);
  g_assert_no_error (error);
  g_assert_nonnull (hw);
  return hw;
}

PlannerGraph *
test_util_model (const char *model, const PlannerModelOptions *options)
{
  g_autoptr (GError) error = NULL;
  PlannerGraph *graph = planner_model_load (model, options, &error);
  g_assert_no_error (error);
  g_assert_nonnull (graph);
  return graph;
}

PlannerGraph *
test_util_model_sized (const char *model, gint64 layers, gint64 seq)
{
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.layers = layers;
  options.seq = seq;
  return test_util_model (model, &options);
}

PlannerPlan *
test_util_plan (PlannerGraph *graph, const char *mesh_text, const PlannerHardware *hw,
                const char *policy, const char *const *extra_pins)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = test_util_mesh (mesh_text);
  g_autoptr (PlannerHardware) h100 = hw ? NULL : test_util_hardware ("h100-sxm");
  g_autoptr (GPtrArray) pins = NULL;
  if (policy != NULL)
    pins = planner_policy_expand (policy, graph, mesh, NULL, &error);
  else
    pins = g_ptr_array_new_with_free_func ((GDestroyNotify)planner_pin_free);
  g_assert_no_error (error);
  for (guint i = 0; extra_pins != NULL && extra_pins[i] != NULL; i++)
    {
      PlannerPin *pin = planner_pin_parse (extra_pins[i], mesh, &error);
      g_assert_no_error (error);
      g_ptr_array_add (pins, pin);
    }
  PlannerPlan *plan = planner_propagate (graph, mesh, hw ? hw : h100, pins, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (plan);
  planner_plan_set_policy (plan, policy);
  return plan;
}

PlannerPlan *
test_util_model_plan (const char *model, const char *mesh_text, const char *policy,
                      const char *const *extra_pins)
{
  g_autoptr (PlannerGraph) graph = test_util_model (model, NULL);
  return test_util_plan (graph, mesh_text, NULL, policy, extra_pins);
}

const char *const test_util_llama_layer0_pins[7] = {
  "model.layers.0.self_attn.q_proj=[dp,_,_],[mp,_]",
  "model.layers.0.self_attn.k_proj=[dp,_,_],[mp,_]",
  "model.layers.0.self_attn.v_proj=[dp,_,_],[mp,_]",
  "model.layers.0.self_attn.o_proj=[dp,_,mp],[_,mp]",
  "model.layers.0.mlp.gate_proj=[dp,_,_],[mp,_]",
  "model.layers.0.mlp.up_proj=[dp,_,_],[mp,_]",
  "model.layers.0.mlp.down_proj=[dp,_,mp],[_,mp]",
};

void
test_util_add_named (const char *prefix, const char *name, gconstpointer data, GTestDataFunc func)
{
  g_autofree char *path = g_strdup_printf ("%s/%s", prefix, name);
  g_test_add_data_func (path, data, func);
}

void
test_util_assert_error (const GError *error, int code, const char *fragment)
{
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_assert_error (error, PLANNER_ERROR, code);
  if (strstr (error->message, fragment) == NULL)
    g_error ("message '%s' lacks '%s'", error->message, fragment);
}

gboolean
test_util_skip_without_cli (void)
{
  const char *cli = g_getenv ("SHARDSCOPE_CLI");
  if (cli != NULL && g_file_test (cli, G_FILE_TEST_IS_EXECUTABLE))
    return FALSE;
  if (cli == NULL)
    g_test_skip ("SHARDSCOPE_CLI is not set: run the CLI tests through meson test, or set it to "
                 "the built shardscope-cli");
  else
    g_test_skip_printf ("SHARDSCOPE_CLI=%s is not an executable: build shardscope-cli", cli);
  return TRUE;
}

int
test_util_run_cli (const char *const *args, char **out, char **err)
{
  return test_util_run_cli_in (NULL, args, out, err);
}

int
test_util_run_cli_in (char **envp, const char *const *args, char **out, char **err)
{
  return test_util_run_cli_setup (envp, NULL, NULL, args, out, err);
}

int
test_util_run_cli_setup (char **envp, GSpawnChildSetupFunc setup, gpointer setup_data,
                         const char *const *args, char **out, char **err)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *dropped_out = NULL, *dropped_err = NULL;
  int status = 0;

  g_assert_nonnull (g_getenv ("SHARDSCOPE_CLI"));
  g_ptr_array_add (argv, (gpointer)g_getenv ("SHARDSCOPE_CLI"));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer)args[i]);
  g_ptr_array_add (argv, NULL);
  g_assert_true (g_spawn_sync (NULL, (char **)argv->pdata, envp, G_SPAWN_DEFAULT, setup, setup_data,
                               out ? out : &dropped_out, err ? err : &dropped_err, &status,
                               &error));
  g_assert_no_error (error);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

JsonObject *
test_util_parse_object (JsonParser *parser, const char *text)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
  g_assert_no_error (error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)));
  return json_node_get_object (json_parser_get_root (parser));
}

char *
test_util_tmp_dir_new (const char *pattern)
{
  g_autoptr (GError) error = NULL;
  char *dir = g_dir_make_tmp (pattern, &error);
  g_assert_no_error (error);
  g_assert_nonnull (dir);
  return dir;
}

void
test_util_tmp_dir_remove (const char *dir)
{
  /* Depth first: tools the tests run leave folders too (python3's __pycache__). */
  g_autoptr (GDir) listing = g_dir_open (dir, 0, NULL);
  const char *name;
  while (listing && (name = g_dir_read_name (listing)))
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        test_util_tmp_dir_remove (path);
      else
        g_unlink (path);
    }
  g_rmdir (dir);
}

void
test_util_remove_db (const char *path)
{
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  g_autofree char *shm = g_strconcat (path, "-shm", NULL);
  g_remove (path);
  g_remove (wal);
  g_remove (shm);
}
