/* test-util.h: what the tests share: models, meshes, profiles and plans made as the CLI
 * makes them, PLANNER_ERROR checks, the built shardscope-cli run and its JSON read, and
 * temporary folders and store files.
 *
 * Every maker asserts that it made what it was asked for: a test that gets one back can use
 * it, and a failure ends the test at the helper with the planner's message. */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-model.h"
#include "planner-plan.h"

G_BEGIN_DECLS

PlannerMesh *test_util_mesh (const char *text);
/* A built-in hardware profile. */
PlannerHardware *test_util_hardware (const char *name);

/* A zoo name or a model file, with @options (NULL: the defaults). */
PlannerGraph *test_util_model (const char *model, const PlannerModelOptions *options);
/* The same with only the number of layers and the sequence length set (0: the config's). */
PlannerGraph *test_util_model_sized (const char *model, gint64 layers, gint64 seq);

/* A plan as the CLI makes it: the pins of @policy (NULL: none), then @extra_pins
 * (NULL-terminated, or NULL), propagated on @mesh_text with @hw (NULL: h100-sxm); the plan
 * records @policy. */
PlannerPlan *test_util_plan (PlannerGraph *graph, const char *mesh_text, const PlannerHardware *hw,
                             const char *policy, const char *const *extra_pins);
/* test_util_plan() of test_util_model (@model, NULL) with the h100-sxm profile. */
PlannerPlan *test_util_model_plan (const char *model, const char *mesh_text, const char *policy,
                                   const char *const *extra_pins);

/* Megatron pins of the first layer of a LLaMA graph, by hand rather than by a policy. */
extern const char *const test_util_llama_layer0_pins[7];

/* Adds @func with @data as the test PREFIX/NAME. */
void test_util_add_named (const char *prefix, const char *name, gconstpointer data,
                          GTestDataFunc func);

/* @error is @code of PLANNER_ERROR and its message holds @fragment. */
void test_util_assert_error (const GError *error, int code, const char *fragment);

/* The one skip of every CLI test: TRUE, with the test marked skipped by g_test_skip() and
 * the reason, when $SHARDSCOPE_CLI (meson test sets it) does not name a built CLI. Called
 * first in each test function, so a test run directly reports its tests as skipped rather
 * than passing with none registered. */
gboolean test_util_skip_without_cli (void);
/* Runs $SHARDSCOPE_CLI with @args (NULL-terminated). Its standard output and error go to
 * @out and @err, or are dropped where NULL (never into the test's TAP output). Returns its
 * exit status, -1 when it did not exit. */
int test_util_run_cli (const char *const *args, char **out, char **err);
/* The same in the environment @envp. */
int test_util_run_cli_in (char **envp, const char *const *args, char **out, char **err);
/* The same with @setup run in the child before the CLI starts (resource limits). */
int test_util_run_cli_setup (char **envp, GSpawnChildSetupFunc setup, gpointer setup_data,
                             const char *const *args, char **out, char **err);
/* @text parsed by @parser; its root is an object. */
JsonObject *test_util_parse_object (JsonParser *parser, const char *text);

/* A new folder under the temporary folder; @pattern ends in XXXXXX. */
char *test_util_tmp_dir_new (const char *pattern);
/* Removes @dir and everything in it. */
void test_util_tmp_dir_remove (const char *dir);
/* Removes a store file and the WAL and shared-memory files SQLite keeps next to it. */
void test_util_remove_db (const char *path);

G_END_DECLS
