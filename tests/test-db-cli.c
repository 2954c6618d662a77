#define G_LOG_DOMAIN "test-db-cli"

#include "config.h"

#include <grp.h>
#include <json-glib/json-glib.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "test-util.h"

/* The store through the built shardscope-cli ($SHARDSCOPE_CLI), as CI uses it: two gpt2 plans
 * saved with --db/--save, `db list --json` shows both, `compare db:A db:B` compares them, the
 * exports of stored plans (dtensor compiles, mindspore parses), a derived plan records its
 * parent, rename/delete/show, exit statuses, and a refused --db file left as it was. */

static char *tmp_dir;
static char *db;

#define CLI(out, err, ...) test_util_run_cli ((const char *const[]){ __VA_ARGS__, NULL }, out, err)

static void
test_workflow (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *py = g_build_filename (tmp_dir, "plan.py", NULL);

  /* Two plans of gpt2, saved. */
  g_assert_cmpint (CLI (&out, &err, "propagate", "gpt2", "--mesh", "dp=2,mp=4", "--policy",
                        "megatron", "--db", db, "--save", "A"),
                   ==, 0);
  g_assert_nonnull (strstr (out, "saved as db:1"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "propagate", "gpt2", "--mesh", "dp=2,mp=4", "--policy",
                        "megatron-sp", "--db", db, "--save", "B", "--json"),
                   ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* db list --json shows both. */
  g_assert_cmpint (CLI (&out, &err, "db", "list", "--db", db, "--json"), ==, 0);
  {
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root = test_util_parse_object (parser, out);
    JsonArray *plans = json_object_get_array_member (root, "plans");
    g_assert_cmpuint (json_array_get_length (plans), ==, 2);
    JsonObject *a = json_array_get_object_element (plans, 0);
    JsonObject *b = json_array_get_object_element (plans, 1);
    g_assert_cmpstr (json_object_get_string_member (a, "name"), ==, "A");
    g_assert_cmpstr (json_object_get_string_member (a, "policy"), ==, "megatron");
    g_assert_cmpstr (json_object_get_string_member (b, "name"), ==, "B");
    g_assert_cmpstr (json_object_get_string_member (b, "policy"), ==, "megatron-sp");
    g_assert_cmpstr (json_object_get_string_member (a, "mesh"), ==, "dp=2,mp=4");
    g_assert_cmpint (json_object_get_int_member (a, "ops"), >, 0);
    g_assert_true (json_object_get_null_member (b, "parent_id"));
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* compare db:A db:B lists their differences. */
  g_assert_cmpint (CLI (&out, &err, "compare", "db:A", "db:B", "--db", db, "--json"), ==, 0);
  {
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root = test_util_parse_object (parser, out);
    g_assert_cmpuint (json_array_get_length (json_object_get_array_member (root, "ops")), >, 0);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* Exports of stored plans. */
  g_assert_cmpint (CLI (&out, &err, "export", "db:B", "--format", "dtensor", "--db", db, "-o", py),
                   ==, 0);
  /* GPT-2's lm_head, split over the sequence (50257 % 4), gathers the logits: on stderr. */
  g_assert_nonnull (strstr (err, "dtensor: note: lm_head"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_autofree char *python = g_find_program_in_path ("python3");
  if (python != NULL)
    {
      const char *argv[] = { python, "-m", "py_compile", py, NULL };
      int status;
      g_assert_true (g_spawn_sync (tmp_dir, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL,
                                   &err, &status, NULL));
      if (!g_spawn_check_wait_status (status, NULL))
        g_error ("py_compile: %s", err);
      g_clear_pointer (&err, g_free);
    }
  g_assert_cmpint (CLI (&out, &err, "export", "db:1", "--format", "mindspore", "--db", db), ==, 0);
  {
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root = test_util_parse_object (parser, out);
    g_assert_true (json_object_has_member (root, "parallel_strategy_item"));
    g_assert_true (json_object_has_member (root, "parallel_layout_item"));
    JsonObject *c_fc = json_object_get_object_member (
        json_object_get_object_member (root, "parallel_layout_item"),
        "transformer.h.0.mlp.c_fc.weight");
    g_assert_nonnull (c_fc);
    g_assert_true (json_object_has_member (c_fc, "dev_matrix"));
    g_assert_true (json_object_has_member (c_fc, "tensor_map"));
    g_assert_true (json_object_has_member (c_fc, "tensor_shape"));
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "export", "db:A", "--format", "csv", "--db", db), ==, 0);
  g_assert_true (g_str_has_prefix (out, "kind,index,name,type,decision,from,to,steps,flops,bytes,"
                                        "estimated_us,measured_us\r\n"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* A derived plan records its parent; show, rename, delete. */
  g_assert_cmpint (CLI (&out, &err, "propagate", "--from", "db:A", "--pin",
                        "transformer.h.0.mlp.c_fc=[dp,_,_],[_,_]", "--db", db, "--save", "C"),
                   ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "show", "C", "--db", db, "--json"), ==, 0);
  {
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root = test_util_parse_object (parser, out);
    g_assert_cmpstr (json_object_get_string_member (root, "parent"), ==, "A");
    g_assert_cmpint (json_object_get_int_member (root, "parent_id"), ==, 1);
    g_assert_cmpstr (json_object_get_string_member (root, "policy"), ==, "megatron");
    JsonArray *pins = json_object_get_array_member (root, "pin_rules");
    gboolean found = FALSE;
    for (guint i = 0; i < json_array_get_length (pins); i++)
      found |= g_strcmp0 (json_array_get_string_element (pins, i),
                          "transformer.h.0.mlp.c_fc=[dp,_,_],[_,_]")
               == 0;
    g_assert_true (found);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "rename", "C", "C'; DROP TABLE plans;--", "--db", db), ==,
                   0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "delete", "db:A", "--db", db), ==, 0);
  g_assert_nonnull (strstr (out, "deleted A (db:1)"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "show", "C'; DROP TABLE plans;--", "--db", db, "--json"),
                   ==, 0);
  {
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root = test_util_parse_object (parser, out);
    g_assert_true (json_object_get_null_member (root, "parent_id"));
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* $SHARDSCOPE_DB names the store when --db does not. */
  g_auto (GStrv) envp = g_environ_setenv (g_get_environ (), "SHARDSCOPE_DB", db, TRUE);
  g_assert_cmpint (
      test_util_run_cli_in (envp, (const char *const[]){ "db", "list", NULL }, &out, &err), ==, 0);
  g_assert_nonnull (strstr (out, "2 plans"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* Exit statuses: refused 1, bad usage 2. */
  g_assert_cmpint (CLI (&out, &err, "db", "show", "nope", "--db", db), ==, 1);
  g_assert_nonnull (strstr (err, "no plan named"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "frob", "--db", db), ==, 2);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "rename", "B", "--db", db), ==, 2);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (
      CLI (&out, &err, "propagate", "gpt2", "--mesh", "dp=2", "--db", db, "--save", "B"), ==, 1);
  g_assert_nonnull (strstr (err, "already exists"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_remove (py);
}

static void
test_refused_file (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *path = g_build_filename (tmp_dir, "notes.txt", NULL);
  g_autofree char *missing = g_build_filename (tmp_dir, "missing.db", NULL);
  const char *text = "not a plan store, just notes\n";
  g_autofree char *after = NULL, *out = NULL, *err = NULL;

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_assert_cmpint (CLI (&out, &err, "db", "list", "--db", path), ==, 1);
  g_assert_nonnull (strstr (err, "not an SQLite database"));
  g_assert_true (g_file_get_contents (path, &after, NULL, NULL));
  g_assert_cmpstr (after, ==, text);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (
      CLI (&out, &err, "propagate", "gpt2-tiny", "--mesh", "dp=2", "--db", path, "--save", "x"), ==,
      1);
  g_clear_pointer (&after, g_free);
  g_assert_true (g_file_get_contents (path, &after, NULL, NULL));
  g_assert_cmpstr (after, ==, text);
  g_remove (path);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* Reading a store that is not there creates nothing. */
  g_assert_cmpint (CLI (&out, &err, "db", "list", "--db", missing), ==, 0);
  g_assert_nonnull (strstr (out, "0 plans"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "export", "db:x", "--format", "csv", "--db", missing), ==, 1);
  g_assert_false (g_file_test (missing, G_FILE_TEST_EXISTS));
}

/* The whole file, or NULL when it is missing. */
static char *
contents (const char *path)
{
  char *text = NULL;
  gsize length;
  return g_file_get_contents (path, &text, &length, NULL) ? text : NULL;
}

static void
sql (const char *path, const char *statement)
{
  sqlite3 *handle = NULL;
  g_assert_cmpint (sqlite3_open (path, &handle), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (handle, statement, NULL, NULL, NULL), ==, SQLITE_OK);
  sqlite3_close (handle);
}

/* Names the store refuses, refused before anything is written; db:NAME and db:ID. */
static void
test_names (void)
{
  g_autofree char *path = g_build_filename (tmp_dir, "names.db", NULL);
  g_autofree char *json = g_build_filename (tmp_dir, "names.json", NULL);
  g_autofree char *out = NULL, *err = NULL;

  test_util_remove_db (path);
  static const char *const refused[][2] = {
    { " ", "a stored plan needs a name that is not empty or only spaces" },
    { "", "not empty or only spaces" },
    { "db:1", "a plan name cannot start with \"db:\" (\"db:1\")" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_assert_cmpint (CLI (&out, &err, "propagate", "gpt2-tiny", "--mesh", "dp=2", "--db", path,
                            "--save", refused[i][0], "-o", json),
                       ==, 1);
      g_assert_true (g_str_has_prefix (err, "shardscope-cli: "));
      g_assert_nonnull (strstr (err, refused[i][1]));
      /* Neither the store nor the -o file was made. */
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      g_assert_false (g_file_test (json, G_FILE_TEST_EXISTS));
      g_clear_pointer (&out, g_free);
      g_clear_pointer (&err, g_free);
    }

  g_assert_cmpint (
      CLI (&out, &err, "propagate", "gpt2-tiny", "--mesh", "dp=2", "--db", path, "--save", "A"), ==,
      0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "propagate", "gpt2-tiny", "--mesh", "dp=2,mp=2", "--db", path,
                        "--save", "B"),
                   ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_autofree char *before = contents (path);
  g_assert_cmpint (CLI (&out, &err, "db", "rename", "A", "db:2", "--db", path), ==, 1);
  g_assert_nonnull (strstr (err, "cannot start with \"db:\""));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "rename", "db:A", "\t", "--db", path), ==, 1);
  g_assert_nonnull (strstr (err, "only spaces"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_autofree char *after = contents (path);
  g_assert_cmpstr (after, ==, before);

  /* A plan named "db:1", as an older version could save it: `db delete db:1` deleted plan 1. */
  sql (path, "UPDATE plans SET name = 'db:1' WHERE id = 2");
  g_clear_pointer (&before, g_free);
  before = contents (path);
  g_assert_cmpint (CLI (&out, &err, "db", "delete", "db:1", "--db", path), ==, 1);
  g_assert_nonnull (strstr (err, "\"db:1\" is ambiguous: the plan named \"db:1\" (id 2) or \"1\" "
                                 "(id 1); give the id alone"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_clear_pointer (&after, g_free);
  after = contents (path);
  g_assert_cmpstr (after, ==, before);
  g_assert_cmpint (CLI (&out, &err, "db", "rename", "2", "B", "--db", path, "--json"), ==, 0);
  g_assert_nonnull (strstr (out, "\"old_name\": \"db:1\""));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "delete", "db:1", "--db", path, "--json"), ==, 0);
  g_assert_nonnull (strstr (out, "\"name\": \"A\""));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "list", "--db", path), ==, 0);
  g_assert_nonnull (strstr (out, ": 1 plan\n"));
  g_assert_nonnull (strstr (out, "    2  B "));
  test_util_remove_db (path);
}

/* Drops root (when the tests run as root, as CI does) so that permissions apply. */
static void
become_nobody (gpointer data)
{
  if (geteuid () != 0)
    return;
  if (setgroups (0, NULL) != 0 || setgid (65534) != 0 || setuid (65534) != 0)
    _exit (125);
}

static int
cli_as_nobody (const char *const *args, char **out, char **err)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  int status = 0;

  g_ptr_array_add (argv, (gpointer)g_getenv ("SHARDSCOPE_CLI"));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer)args[i]);
  g_ptr_array_add (argv, NULL);
  g_assert_true (g_spawn_sync (NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, become_nobody,
                               NULL, out, err, &status, &error));
  g_assert_no_error (error);
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

#define CLI_NOBODY(out, err, ...)                                                                  \
  cli_as_nobody ((const char *const[]){ __VA_ARGS__, NULL }, out, err)

/* A store this user may read but not write, in a folder it cannot write either (a shared,
 * read-only copy): it lists, shows and exports; changes are refused; nothing is created. */
static void
test_read_only (void)
{
  g_autofree char *dir = g_build_filename (tmp_dir, "read-only", NULL);
  g_autofree char *path = g_build_filename (dir, "plans.db", NULL);
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (g_mkdir (dir, 0755), ==, 0);
  g_assert_cmpint (CLI (&out, &err, "propagate", "gpt2-tiny", "--mesh", "dp=2,mp=2", "--policy",
                        "megatron", "--db", path, "--save", "shared"),
                   ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_autofree char *before = contents (path);
  g_assert_cmpint (g_chmod (path, 0444), ==, 0);
  g_assert_cmpint (g_chmod (dir, 0555), ==, 0);
  g_assert_cmpint (g_chmod (tmp_dir, 0755), ==, 0);

  g_assert_cmpint (CLI_NOBODY (&out, &err, "db", "list", "--db", path), ==, 0);
  g_assert_nonnull (strstr (out, ": 1 plan\n"));
  g_assert_nonnull (strstr (out, "    1  shared "));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI_NOBODY (&out, &err, "export", "db:shared", "--format", "csv", "--db", path),
                   ==, 0);
  g_assert_true (g_str_has_prefix (out, "kind,index,name,type,decision,"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI_NOBODY (&out, &err, "db", "delete", "shared", "--db", path), ==, 1);
  g_assert_nonnull (strstr (err, "the store is read-only here"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  g_assert_cmpint (g_chmod (tmp_dir, 0700), ==, 0);
  g_assert_cmpint (g_chmod (dir, 0755), ==, 0);
  g_autofree char *after = contents (path);
  g_assert_cmpstr (after, ==, before);
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  g_autofree char *shm = g_strconcat (path, "-shm", NULL);
  g_assert_false (g_file_test (wal, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (shm, G_FILE_TEST_EXISTS));
  test_util_remove_db (path);
  g_rmdir (dir);
}

/* `run` of a stored plan stores its trial run; the CSV export then has measured times. */
static void
test_trial_run (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *path = g_build_filename (tmp_dir, "trial.db", NULL);
  g_autofree char *out = NULL, *err = NULL;

  g_assert_cmpint (CLI (&out, &err, "propagate", "gpt2-tiny", "--mesh", "dp=2,mp=2", "--policy",
                        "megatron", "--db", path, "--save", "T"),
                   ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (
      CLI (&out, &err, "run", "db:T", "--backend", "cpu", "--repeat", "1", "--db", path), ==, 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "db", "show", "T", "--db", path, "--json"), ==, 0);
  {
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root = test_util_parse_object (parser, out);
    JsonArray *runs = json_object_get_array_member (root, "runs");
    g_assert_cmpuint (json_array_get_length (runs), ==, 1);
    JsonObject *run = json_array_get_object_element (runs, 0);
    g_assert_cmpstr (json_object_get_string_member (run, "backend"), ==, "cpu");
    g_assert_cmpint (json_object_get_int_member (run, "devices"), ==, 4);
    g_assert_cmpuint (json_array_get_length (json_object_get_array_member (run, "measurements")), >,
                      0);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (CLI (&out, &err, "export", "db:T", "--format", "csv", "--db", path), ==, 0);
  /* The first op's row ends with a measured time. */
  g_auto (GStrv) lines = g_strsplit (out, "\r\n", -1);
  g_assert_true (g_str_has_prefix (lines[1], "op,0,"));
  g_assert_false (g_str_has_suffix (lines[1], ","));
  test_util_remove_db (path);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  tmp_dir = test_util_tmp_dir_new ("test-db-cli-XXXXXX");
  db = g_build_filename (tmp_dir, "plans.db", NULL);

  g_test_add_func ("/planner/db-cli/workflow", test_workflow);
  g_test_add_func ("/planner/db-cli/refused-file", test_refused_file);
  g_test_add_func ("/planner/db-cli/trial-run", test_trial_run);
  g_test_add_func ("/planner/db-cli/names", test_names);
  g_test_add_func ("/planner/db-cli/read-only", test_read_only);
  int status = g_test_run ();
  test_util_remove_db (db);
  test_util_tmp_dir_remove (tmp_dir);
  return status;
}
