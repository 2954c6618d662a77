#define G_LOG_DOMAIN "test-store"

#include "config.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "planner-error.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-store-private.h"
#include "test-util.h"

/* The plan store: plans saved and loaded equal field for field, migration of a version-1
 * file, refusals that leave the file byte for byte as it was, a process killed while saving,
 * two processes saving at once, and names no SQL or shell quoting may break. */

static const char *self_exe;
static char *tmp_dir;

/* Quotes, newlines, SQL and Python metacharacters, non-ASCII. */
static const char *const hostile_names[] = {
  "it's \"quoted\"",
  "line one\nline two\r\n\ttabbed",
  "x'); DROP TABLE plans; --",
  "'''\"\"\" triple \\ backslash \\' \\n",
  "__import__('os').system('echo pwned') # ; DROP TABLE pins",
  "unicode: 张量并行 ✓ \u00e9",
};

static char *
temp_db (const char *name)
{
  return g_build_filename (tmp_dir, name, NULL);
}

static gboolean
side_files_exist (const char *path)
{
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  g_autofree char *shm = g_strconcat (path, "-shm", NULL);
  g_autofree char *journal = g_strconcat (path, "-journal", NULL);
  return g_file_test (wal, G_FILE_TEST_EXISTS) || g_file_test (shm, G_FILE_TEST_EXISTS)
         || g_file_test (journal, G_FILE_TEST_EXISTS);
}

static PlannerStore *
open_store (const char *path)
{
  g_autoptr (GError) error = NULL;
  PlannerStore *store = planner_store_open (path, &error);
  g_assert_no_error (error);
  return store;
}

/* One integer from raw SQL on the file, outside the store. */
static gint64
sql_int (const char *path, const char *sql)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *s = NULL;
  gint64 value;

  g_assert_cmpint (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READWRITE, NULL), ==, SQLITE_OK);
  sqlite3_busy_timeout (db, 30000);
  g_assert_cmpint (sqlite3_prepare_v2 (db, sql, -1, &s, NULL), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_step (s), ==, SQLITE_ROW);
  value = sqlite3_column_int64 (s, 0);
  sqlite3_finalize (s);
  sqlite3_close (db);
  return value;
}

static void
assert_integrity_ok (const char *path)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *s = NULL;

  g_assert_cmpint (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READONLY, NULL), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_prepare_v2 (db, "PRAGMA integrity_check", -1, &s, NULL), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_step (s), ==, SQLITE_ROW);
  g_assert_cmpstr ((const char *)sqlite3_column_text (s, 0), ==, "ok");
  sqlite3_finalize (s);
  g_assert_cmpint (sqlite3_prepare_v2 (db, "PRAGMA foreign_key_check", -1, &s, NULL), ==,
                   SQLITE_OK);
  g_assert_cmpint (sqlite3_step (s), ==, SQLITE_DONE);
  sqlite3_finalize (s);
  sqlite3_close (db);
}

static void
assert_roundtrip (PlannerStore *store, PlannerPlan *plan, const char *name)
{
  g_autoptr (GError) error = NULL;
  gint64 id = planner_store_save_plan (store, plan, name, 0, &error);

  g_assert_no_error (error);
  g_assert_cmpint (id, >, 0);
  g_assert_cmpstr (planner_plan_get_name (plan), ==, name);

  g_autoptr (PlannerPlan) by_id = planner_store_load_plan (store, id, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, by_id));
  g_assert_cmpfloat (planner_plan_get_propagate_ms (by_id), ==,
                     planner_plan_get_propagate_ms (plan));
  g_autoptr (PlannerPlan) by_name = planner_store_load_plan_by_name (store, name, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, by_name));
  g_assert_cmpint (planner_store_lookup (store, name, &error), ==, id);
  g_assert_no_error (error);
}

/* ---- save and load ---- */

static void
test_roundtrip (gconstpointer data)
{
  const char *const *args = data; /* model, mesh, policy, extra pin */
  const char *extra[] = { args[3], NULL };
  g_autofree char *path = temp_db ("roundtrip.db");
  g_autoptr (PlannerPlan) plan = NULL;
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;
  gboolean has_out = FALSE;

  test_util_remove_db (path);
  plan = test_util_model_plan (args[0], args[1], args[2], extra);
  for (guint i = 0; i < planner_graph_get_n_ops (planner_plan_get_graph (plan)); i++)
    has_out |= planner_plan_get_op (plan, i)->has_out_layouts;
  /* The plan exercises every kind of row: redistributions with steps, trace, conflicts. */
  g_assert_cmpuint (planner_plan_get_n_redistributions (plan), >, 0);
  g_assert_cmpuint (planner_plan_get_n_trace_steps (plan), >, 0);
  g_assert_true (args[3] == NULL || has_out);

  store = open_store (path);
  assert_roundtrip (store, plan, "first");

  /* The listing carries what the plan says. */
  g_autoptr (GPtrArray) entries = planner_store_list_plans (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (entries->len, ==, 1);
  PlannerStoreEntry *e = g_ptr_array_index (entries, 0);
  g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (plan));
  g_assert_cmpstr (e->name, ==, "first");
  g_assert_cmpstr (e->model_source, ==, planner_graph_get_source (planner_plan_get_graph (plan)));
  g_assert_cmpstr (e->mesh, ==, mesh);
  g_assert_cmpstr (e->hardware, ==, "h100-sxm");
  g_assert_cmpstr (e->policy, ==, args[2]);
  g_assert_cmpint (e->parent_id, ==, 0);
  g_assert_null (e->parent_name);
  g_assert_cmpuint (e->n_pins, ==, planner_plan_get_pins (plan)->len);
  g_assert_cmpint (llabs (e->created - g_get_real_time ()), <, 600 * G_USEC_PER_SEC);
  /* The listing reads the totals' columns; the training figures after them (memory, step
   * breakdown) are derived when a plan is loaded, not listed. */
  gsize columns = G_STRUCT_OFFSET (PlannerPlanTotals, memory);
  g_assert_cmpmem (&e->totals, columns, planner_plan_get_totals (plan), columns);

  /* A second plan of the same model shares its model, mesh and profile rows. */
  assert_roundtrip (store, plan, "second");
  planner_store_close (store);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM models"), ==, 1);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM meshes"), ==, 1);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM hardware"), ==, 1);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM plans"), ==, 2);
  g_assert_cmpint (sql_int (path, "PRAGMA user_version"), ==, PLANNER_STORE_SCHEMA_VERSION);
  g_assert_cmpint (sql_int (path, "PRAGMA application_id"), ==, PLANNER_STORE_APPLICATION_ID);
  assert_integrity_ok (path);

  /* A closed store refuses politely. */
  planner_store_load_plan (store, 1, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  test_util_remove_db (path);
}

static void
count_changes (PlannerStore *store, guint *count)
{
  (*count)++;
}

static void
test_derived_rename_delete (void)
{
  g_autofree char *path = temp_db ("derived.db");
  g_autoptr (PlannerPlan) a = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerPlan) b = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron-sp", NULL);
  g_autoptr (PlannerPlan) other = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "dp", NULL);
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;
  gint64 ia, ib, io;
  guint changes = 0;

  test_util_remove_db (path);
  store = open_store (path);
  g_signal_connect (store, "changed", G_CALLBACK (count_changes), &changes);
  ia = planner_store_save_plan (store, a, "A", 0, &error);
  g_assert_no_error (error);
  ib = planner_store_save_plan (store, b, "B", ia, &error);
  g_assert_no_error (error);
  io = planner_store_save_plan (store, other, "other", 0, &error);
  g_assert_no_error (error);

  /* A taken name, an empty name and a missing parent are refused, and nothing is written. */
  g_assert_cmpint (planner_store_save_plan (store, b, "A", 0, &error), ==, 0);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_assert_nonnull (strstr (error->message, "already exists"));
  g_clear_error (&error);
  g_assert_cmpint (planner_store_save_plan (store, b, "", 0, &error), ==, 0);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_clear_error (&error);
  g_assert_cmpint (planner_store_save_plan (store, b, "C", 999, &error), ==, 0);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_clear_error (&error);
  planner_plan_set_name (b, "B");

  g_autoptr (PlannerStoreEntry) eb = planner_store_get_entry (store, ib, &error);
  g_assert_no_error (error);
  g_assert_cmpint (eb->parent_id, ==, ia);
  g_assert_cmpstr (eb->parent_name, ==, "A");
  g_assert_cmpstr (eb->policy, ==, "megatron-sp");

  /* Lookup: a name first, else an id. */
  g_autofree char *id_text = g_strdup_printf ("%" G_GINT64_FORMAT, io);
  g_assert_cmpint (planner_store_lookup (store, id_text, &error), ==, io);
  g_assert_no_error (error);
  g_assert_cmpint (planner_store_lookup (store, "no such plan", &error), ==, 0);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_clear_error (&error);

  /* Rename: to a free name works (and to itself), to a taken one is refused. */
  g_assert_true (planner_store_rename_plan (store, ia, "A2", &error));
  g_assert_no_error (error);
  g_assert_true (planner_store_rename_plan (store, ia, "A2", &error));
  g_assert_false (planner_store_rename_plan (store, ia, "B", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_clear_error (&error);
  g_clear_pointer (&eb, planner_store_entry_free);
  eb = planner_store_get_entry (store, ib, &error);
  g_assert_cmpstr (eb->parent_name, ==, "A2");
  g_autoptr (PlannerPlan) renamed = planner_store_load_plan_by_name (store, "A2", &error);
  g_assert_no_error (error);
  planner_plan_set_name (a, "A2");
  g_assert_true (planner_plan_equal (a, renamed));

  /* Delete: the child keeps its rows and loses its parent; unused models go. */
  g_assert_true (planner_store_delete_plan (store, ia, &error));
  g_assert_no_error (error);
  g_assert_false (planner_store_delete_plan (store, ia, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_clear_error (&error);
  g_clear_pointer (&eb, planner_store_entry_free);
  eb = planner_store_get_entry (store, ib, &error);
  g_assert_no_error (error);
  g_assert_cmpint (eb->parent_id, ==, 0);
  g_assert_null (eb->parent_name);
  g_autoptr (PlannerPlan) child = planner_store_load_plan (store, ib, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (b, child));
  g_assert_true (planner_store_delete_plan (store, io, &error));
  /* Three saves, two renames, two deletes; refusals change nothing. */
  g_assert_cmpuint (changes, ==, 7);
  planner_store_close (store);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM models"), ==, 1);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM op_strategies WHERE plan_id <> 2"), ==, 0);
  assert_integrity_ok (path);
  test_util_remove_db (path);
}

/* ---- trial runs ---- */

static void
test_trial_runs (void)
{
  g_autofree char *path = temp_db ("trials.db");
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *redist = planner_store_redistribution_name (plan, 0);
  PlannerTrialMeasurement first[] = {
    { PLANNER_MEASUREMENT_OP, "transformer.h.0.attn.c_attn", 12.5, 14.25 },
    { PLANNER_MEASUREMENT_REDISTRIBUTION, redist, 3.0, 4.5 },
  };
  PlannerTrialMeasurement second[] = {
    { PLANNER_MEASUREMENT_OP, "transformer.h.0.attn.c_attn", 12.5, 13.0 },
  };
  gint64 id, run1, run2;

  test_util_remove_db (path);
  g_assert_nonnull (strstr (redist, " -> "));
  store = open_store (path);
  id = planner_store_save_plan (store, plan, "traced", 0, &error);
  g_assert_no_error (error);
  run1 = planner_store_add_trial_run (store, id, "cpu", 4, 1.5e-6, NAN, first, G_N_ELEMENTS (first),
                                      &error);
  g_assert_no_error (error);
  run2 = planner_store_add_trial_run (store, id, "cuda", 4, 0.0, 2e-7, second,
                                      G_N_ELEMENTS (second), &error);
  g_assert_no_error (error);
  g_assert_cmpint (run2, >, run1);
  g_assert_cmpint (planner_store_add_trial_run (store, 999, "cpu", 1, 0, 0, NULL, 0, &error), ==,
                   0);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_clear_error (&error);

  g_autoptr (GPtrArray) runs = planner_store_list_trial_runs (store, id, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (runs->len, ==, 2);
  /* Newest first. */
  PlannerTrialRun *latest = g_ptr_array_index (runs, 0), *older = g_ptr_array_index (runs, 1);
  g_assert_cmpint (latest->id, ==, run2);
  g_assert_cmpstr (latest->backend, ==, "cuda");
  g_assert_cmpfloat (latest->max_rel_error, ==, 2e-7);
  g_assert_cmpuint (latest->measurements->len, ==, 1);
  g_assert_cmpstr (older->backend, ==, "cpu");
  g_assert_cmpuint (older->devices, ==, 4);
  g_assert_cmpfloat (older->max_abs_error, ==, 1.5e-6);
  g_assert_true (isnan (older->max_rel_error));
  g_assert_cmpuint (older->measurements->len, ==, 2);
  const PlannerTrialMeasurement *m
      = planner_trial_run_find (older, PLANNER_MEASUREMENT_REDISTRIBUTION, redist);
  g_assert_nonnull (m);
  g_assert_cmpfloat (m->estimated_us, ==, 3.0);
  g_assert_cmpfloat (m->measured_us, ==, 4.5);
  g_assert_null (planner_trial_run_find (older, PLANNER_MEASUREMENT_OP, redist));

  g_autoptr (PlannerStoreEntry) entry = planner_store_get_entry (store, id, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (entry->n_trial_runs, ==, 2);

  /* Deleting the plan deletes its runs and their measurements. */
  g_assert_true (planner_store_delete_plan (store, id, &error));
  planner_store_close (store);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM trial_runs"), ==, 0);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM trial_measurements"), ==, 0);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM models"), ==, 0);
  test_util_remove_db (path);
}

/* ---- migration ---- */

static void
exec_bound (const char *path, const char *sql, const char *attach)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *s = NULL;

  g_assert_cmpint (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                   ==, SQLITE_OK);
  if (attach != NULL)
    {
      g_assert_cmpint (sqlite3_prepare_v2 (db, "ATTACH ?1 AS cur", -1, &s, NULL), ==, SQLITE_OK);
      sqlite3_bind_text (s, 1, attach, -1, SQLITE_STATIC);
      g_assert_cmpint (sqlite3_step (s), ==, SQLITE_DONE);
      sqlite3_finalize (s);
    }
  char *message = NULL;
  if (sqlite3_exec (db, sql, NULL, NULL, &message) != SQLITE_OK)
    g_error ("%s: %s", sql, message);
  sqlite3_close (db);
}

/* A version-1 file holding a plan, written the way version 1 wrote it, opens as version 2 and
 * the plan loads equal. */
static void
test_migrate_v1 (void)
{
  g_autofree char *current = temp_db ("migrate-current.db");
  g_autofree char *old = temp_db ("migrate-v1.db");
  g_autoptr (PlannerPlan) plan
      = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron-sp", NULL);
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;
  gint64 id;

  test_util_remove_db (current);
  test_util_remove_db (old);
  store = open_store (current);
  id = planner_store_save_plan (store, plan, "from version 1", 0, &error);
  g_assert_no_error (error);
  g_clear_object (&store);

  store = planner_store_open_at_version (old, 1, &error);
  g_assert_no_error (error);
  g_clear_object (&store);
  g_assert_cmpint (sql_int (old, "PRAGMA user_version"), ==, 1);
  g_assert_cmpint (sql_int (old, "SELECT count(*) FROM sqlite_schema WHERE name IN ('trial_runs', "
                                 "'trial_measurements')"),
                   ==, 0);
  g_assert_cmpint (sql_int (old, "SELECT count(*) FROM pragma_table_info('plans') "
                                 "WHERE name = 'parent_id'"),
                   ==, 0);

  exec_bound (old,
              "BEGIN;"
              "INSERT INTO main.models SELECT * FROM cur.models;"
              "INSERT INTO main.meshes SELECT * FROM cur.meshes;"
              "INSERT INTO main.hardware SELECT * FROM cur.hardware;"
              "INSERT INTO main.plans SELECT id, name, model_id, mesh_id, hardware_id, created, "
              "policy, propagate_ms, weight_copies, grad_copies, optimizer_states, "
              "backward_factor, n_ops, n_pinned, n_propagated, n_defaulted, n_redistributions, "
              "comm_bytes, comm_time_s, compute_time_s, backward_comm_time_s, grad_sync_time_s, "
              "step_time_s, param_bytes_per_device, activation_bytes_per_device, "
              "memory_per_device_bytes FROM cur.plans;"
              "INSERT INTO main.plan_collectives SELECT * FROM cur.plan_collectives;"
              "INSERT INTO main.plan_axes SELECT * FROM cur.plan_axes;"
              "INSERT INTO main.pins SELECT * FROM cur.pins;"
              "INSERT INTO main.op_strategies SELECT * FROM cur.op_strategies;"
              "INSERT INTO main.tensor_layouts SELECT * FROM cur.tensor_layouts;"
              "INSERT INTO main.redistributions SELECT * FROM cur.redistributions;"
              "INSERT INTO main.redistribution_steps SELECT * FROM cur.redistribution_steps;"
              "INSERT INTO main.trace_steps SELECT * FROM cur.trace_steps;"
              "INSERT INTO main.conflicts SELECT * FROM cur.conflicts;"
              "COMMIT;",
              current);
  g_assert_cmpint (sql_int (old, "PRAGMA user_version"), ==, 1);

  store = open_store (old);
  g_assert_cmpint (sql_int (old, "PRAGMA user_version"), ==, PLANNER_STORE_SCHEMA_VERSION);
  g_autoptr (PlannerPlan) loaded
      = planner_store_load_plan_by_name (store, "from version 1", &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, loaded));
  g_autoptr (PlannerStoreEntry) entry = planner_store_get_entry (store, id, &error);
  g_assert_no_error (error);
  g_assert_cmpint (entry->parent_id, ==, 0);
  g_assert_cmpuint (entry->n_trial_runs, ==, 0);
  /* What version 2 added works on the migrated file. */
  g_assert_cmpint (planner_store_add_trial_run (store, id, "cpu", 4, 0, 0, NULL, 0, &error), >, 0);
  g_assert_no_error (error);
  g_assert_cmpint (planner_store_save_plan (store, loaded, "child", id, &error), >, 0);
  g_assert_no_error (error);
  g_clear_object (&store);
  assert_integrity_ok (old);
  /* Opening again migrates nothing more. */
  store = open_store (old);
  g_clear_object (&store);
  g_assert_cmpint (sql_int (old, "SELECT count(*) FROM plans"), ==, 2);
  test_util_remove_db (current);
  test_util_remove_db (old);
}

/* ---- refusals ---- */

static void
assert_refused (const char *path, const char *what)
{
  g_autofree char *before = NULL, *after = NULL;
  gsize n_before, n_after;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerStore) store = NULL;

  g_assert_false (side_files_exist (path));
  g_assert_true (g_file_get_contents (path, &before, &n_before, NULL));
  store = planner_store_open (path, &error);
  g_assert_null (store);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_test_message ("refused: %s", error->message);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_nonnull (strstr (error->message, what));
  g_assert_true (g_file_get_contents (path, &after, &n_after, NULL));
  g_assert_cmpmem (before, n_before, after, n_after);
  g_assert_false (side_files_exist (path));
}

static char *
make_store_file (const char *name)
{
  char *path = temp_db (name);
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;

  test_util_remove_db (path);
  store = open_store (path);
  planner_store_save_plan (store, plan, "p", 0, &error);
  g_assert_no_error (error);
  g_clear_object (&store);
  /* The last connection checkpoints and removes the WAL. */
  g_assert_false (side_files_exist (path));
  return path;
}

static void
test_refuse_not_sqlite (void)
{
  g_autofree char *path = temp_db ("not-sqlite.db");
  g_autoptr (GString) text = g_string_new (NULL);

  for (guint i = 0; i < 200; i++)
    g_string_append (text, "this is a plan, honest\n");
  g_assert_true (g_file_set_contents (path, text->str, text->len, NULL));
  assert_refused (path, "not an SQLite database");
  g_assert_true (g_file_set_contents (path, "SQLite", 6, NULL));
  assert_refused (path, "not an SQLite database");
  test_util_remove_db (path);
}

static void
truncate_copy (const char *path, const char *data, gsize length)
{
  g_assert_true (g_file_set_contents (path, data, length, NULL));
}

static void
test_refuse_truncated (void)
{
  g_autofree char *path = make_store_file ("truncated.db");
  g_autofree char *data = NULL;
  gsize length;
  guint page_size;

  g_assert_true (g_file_get_contents (path, &data, &length, NULL));
  page_size = ((guint8)data[16] << 8) | (guint8)data[17];
  g_assert_cmpuint (length, >, 4 * page_size);
  /* Cut mid-page, and cut on a page boundary. */
  truncate_copy (path, data, length / 2 + 100);
  assert_refused (path, "truncated");
  truncate_copy (path, data, (length / 2 / page_size) * page_size);
  assert_refused (path, "truncated");
  test_util_remove_db (path);
}

static void
test_refuse_newer (void)
{
  g_autofree char *path = make_store_file ("newer.db");

  exec_bound (path, "PRAGMA user_version = 99", NULL);
  assert_refused (path, "newer");
  test_util_remove_db (path);
}

static void
test_refuse_foreign (void)
{
  g_autofree char *path = temp_db ("foreign.db");

  test_util_remove_db (path);
  exec_bound (path, "CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('x')", NULL);
  assert_refused (path, "not a plan store");
  test_util_remove_db (path);
  exec_bound (path, "PRAGMA application_id = 42; CREATE TABLE t (x)", NULL);
  assert_refused (path, "another application");
  test_util_remove_db (path);
  /* In WAL mode SQLite reading the schema creates -wal and -shm files, which stayed beside
   * the refused file: it is judged on a connection that writes nothing. */
  exec_bound (path, "PRAGMA journal_mode = WAL; CREATE TABLE songs (title TEXT)", NULL);
  g_assert_cmpint (sql_int (path, "PRAGMA journal_mode = WAL"), ==, 0);
  assert_refused (path, "not a plan store");
  test_util_remove_db (path);
}

/* An empty file, as `touch plans.db` leaves, becomes a store. */
static void
test_empty_file (void)
{
  g_autofree char *path = temp_db ("empty.db");
  g_autoptr (PlannerStore) store = NULL;

  test_util_remove_db (path);
  g_assert_true (g_file_set_contents (path, "", 0, NULL));
  store = open_store (path);
  g_clear_object (&store);
  g_assert_cmpint (sql_int (path, "PRAGMA user_version"), ==, PLANNER_STORE_SCHEMA_VERSION);
  test_util_remove_db (path);
}

static void
test_default_path (void)
{
  g_autofree char *expected
      = g_build_filename (g_get_user_data_dir (), "shardscope", "plans.db", NULL);
  g_autofree char *path = NULL;
  g_autofree char *env_path = NULL;
  g_autoptr (PlannerStore) store = NULL;

  g_unsetenv ("SHARDSCOPE_DB");
  path = planner_store_default_path ();
  g_assert_cmpstr (path, ==, expected);
  /* The folder is created on first use. */
  store = open_store (NULL);
  g_assert_cmpstr (planner_store_get_path (store), ==, expected);
  g_assert_true (g_file_test (expected, G_FILE_TEST_IS_REGULAR));
  g_clear_object (&store);

  env_path = temp_db ("from-env.db");
  g_setenv ("SHARDSCOPE_DB", env_path, TRUE);
  g_clear_pointer (&path, g_free);
  path = planner_store_default_path ();
  g_assert_cmpstr (path, ==, env_path);
  g_unsetenv ("SHARDSCOPE_DB");
}

/* ---- hostile names ---- */

static void
test_hostile_names (void)
{
  g_autofree char *path = temp_db ("hostile.db");
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);

  test_util_remove_db (path);
  store = open_store (path);
  for (guint i = 0; i < G_N_ELEMENTS (hostile_names); i++)
    planner_plan_add_pin_text (plan, hostile_names[i]);
  for (guint i = 0; i < G_N_ELEMENTS (hostile_names); i++)
    assert_roundtrip (store, plan, hostile_names[i]);

  g_autoptr (GPtrArray) entries = planner_store_list_plans (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (entries->len, ==, G_N_ELEMENTS (hostile_names));
  for (guint i = 0; i < entries->len; i++)
    g_assert_cmpstr (((PlannerStoreEntry *)g_ptr_array_index (entries, i))->name, ==,
                     hostile_names[i]);
  g_autoptr (GPtrArray) pins = planner_store_get_pins (store, 1, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g_ptr_array_index (pins, pins->len - 1), ==,
                   hostile_names[G_N_ELEMENTS (hostile_names) - 1]);

  g_assert_true (planner_store_rename_plan (store, 1, "Robert'); DROP TABLE plans;--", &error));
  g_assert_no_error (error);
  g_assert_cmpint (planner_store_lookup (store, "Robert'); DROP TABLE plans;--", &error), ==, 1);
  g_clear_object (&store);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM plans"), ==, G_N_ELEMENTS (hostile_names));
  assert_integrity_ok (path);
  test_util_remove_db (path);
}

/* Names that are blank or start with "db:" are refused when saving and renaming, and leave
 * the store as it was. */
static void
test_refused_names (void)
{
  g_autofree char *path = make_store_file ("names.db");
  g_autoptr (PlannerStore) store = open_store (path);
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2", NULL, NULL);
  static const struct
  {
    const char *name;
    const char *fragment;
  } cases[] = {
    { "", "a stored plan needs a name that is not empty or only spaces" },
    { " ", "not empty or only spaces" },
    { "\t\n \r", "not empty or only spaces" },
    { "\u3000", "not empty or only spaces" }, /* the ideographic space */
    { "db:1", "a plan name cannot start with \"db:\" (\"db:1\"), which marks a stored plan on the "
              "command line; use \"1\"" },
    { "db:p", "cannot start with \"db:\"" },
    { "\xff\xfe", "a plan name must be UTF-8 text" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_assert_cmpint (planner_store_save_plan (store, plan, cases[i].name, 0, &error), ==, 0);
      test_util_assert_error (error, PLANNER_ERROR_STORE, cases[i].fragment);
      g_assert_nonnull (strstr (error->message, path));
      g_clear_error (&error);
      g_assert_false (planner_store_rename_plan (store, 1, cases[i].name, &error));
      test_util_assert_error (error, PLANNER_ERROR_STORE, cases[i].fragment);
      g_clear_error (&error);
      g_assert_false (planner_store_check_name (cases[i].name, &error));
      test_util_assert_error (error, PLANNER_ERROR_STORE, cases[i].fragment);
    }
  /* Spaces inside or around a name are a name. */
  g_assert_true (planner_store_check_name (" a b ", NULL));
  g_assert_true (planner_store_check_name ("db", NULL));
  g_assert_true (planner_store_check_name ("my db:1", NULL));
  g_clear_object (&store);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM plans"), ==, 1);
  g_assert_cmpint (sql_int (path, "SELECT count(*) FROM plans WHERE name = 'p'"), ==, 1);
  test_util_remove_db (path);
}

/* "db:" is dropped, then a name comes before an id; a plan named "db:1" in an old store is
 * never taken for plan 1, nor plan 1 for it. */
static void
test_lookup (void)
{
  g_autofree char *path = temp_db ("lookup.db");
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2", NULL, NULL);
  g_autoptr (GError) error = NULL;

  test_util_remove_db (path);
  g_autoptr (PlannerStore) store = open_store (path);
  g_assert_cmpint (planner_store_save_plan (store, plan, "first", 0, &error), ==, 1);
  g_assert_cmpint (planner_store_save_plan (store, plan, "second", 0, &error), ==, 2);
  g_assert_cmpint (planner_store_save_plan (store, plan, "1", 0, &error), ==, 3);
  g_assert_no_error (error);
  g_clear_object (&store);

  static const struct
  {
    const char *spec;
    gint64 id;
  } found[] = {
    { "first", 1 },
    { "db:first", 1 },
    { "2", 2 },
    { "db:2", 2 },
    /* The name "1" before the id 1. */
    { "1", 3 },
    { "db:1", 3 },
    { "3", 3 },
  };
  store = open_store (path);
  for (guint i = 0; i < G_N_ELEMENTS (found); i++)
    {
      g_assert_cmpint (planner_store_lookup (store, found[i].spec, &error), ==, found[i].id);
      g_assert_no_error (error);
    }
  g_assert_cmpint (planner_store_lookup (store, "db:db:first", &error), ==, 0);
  test_util_assert_error (error, PLANNER_ERROR_STORE, "no plan named \"db:first\"");
  g_clear_error (&error);
  g_assert_cmpint (planner_store_lookup (store, "db:9", &error), ==, 0);
  test_util_assert_error (error, PLANNER_ERROR_STORE,
                          "no plan named \"9\" and no plan with that id");
  g_clear_error (&error);
  g_clear_object (&store);

  /* Names from before "db:" was refused, put there by hand as an old version could. */
  exec_bound (path,
              "UPDATE plans SET name = 'db:2' WHERE id = 3; "
              "UPDATE plans SET name = 'db:7' WHERE id = 1",
              NULL);
  store = open_store (path);
  g_assert_cmpint (planner_store_lookup (store, "db:2", &error), ==, 0);
  test_util_assert_error (error, PLANNER_ERROR_STORE,
                          "\"db:2\" is ambiguous: the plan named \"db:2\" (id 3) or \"2\" (id 2); "
                          "give the id alone");
  g_clear_error (&error);
  g_assert_cmpint (planner_store_lookup (store, "db:7", &error), ==, 1);
  g_assert_cmpint (planner_store_lookup (store, "2", &error), ==, 2);
  g_assert_cmpint (planner_store_lookup (store, "3", &error), ==, 3);
  g_assert_no_error (error);
  /* Renaming it to a name of its own is how out; keeping its name is not a change. */
  g_assert_true (planner_store_rename_plan (store, 3, "db:2", &error));
  g_assert_true (planner_store_rename_plan (store, 3, "third", &error));
  g_assert_no_error (error);
  g_assert_cmpint (planner_store_lookup (store, "db:2", &error), ==, 2);
  g_clear_object (&store);
  test_util_remove_db (path);
}

/* ---- models that moved or changed ---- */

static void
test_model_moved (void)
{
  g_autofree char *path = temp_db ("moved.db");
  g_autofree char *config = temp_db ("moved-config.json");
  g_autofree char *graph_json = temp_db ("moved-graph.json");
  const char *zoo_config
      = g_test_get_filename (G_TEST_DIST, "..", "data", "models", "gpt2-tiny.json", NULL);
  g_autofree char *text = NULL;
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) llama = planner_model_load ("llama-tiny", NULL, &error);

  test_util_remove_db (path);
  g_assert_true (g_file_get_contents (zoo_config, &text, NULL, NULL));
  g_assert_true (g_file_set_contents (config, text, -1, NULL));
  g_assert_true (planner_graph_save_json (llama, graph_json, &error));
  g_assert_no_error (error);

  g_autoptr (PlannerPlan) from_config
      = test_util_model_plan (config, "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerPlan) from_graph
      = test_util_model_plan (graph_json, "dp=2,mp=2", "megatron", NULL);
  g_assert_nonnull (strchr (planner_graph_get_source (planner_plan_get_graph (from_config)), '?'));
  store = open_store (path);
  gint64 a = planner_store_save_plan (store, from_config, "config", 0, &error);
  g_assert_no_error (error);
  gint64 b = planner_store_save_plan (store, from_graph, "graph", 0, &error);
  g_assert_no_error (error);

  /* Both files gone: the texts kept with the models rebuild the graphs. */
  g_remove (config);
  g_remove (graph_json);
  g_autoptr (PlannerPlan) la = planner_store_load_plan (store, a, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (from_config, la));
  g_assert_cmpstr (planner_graph_get_source (planner_plan_get_graph (la)), ==,
                   planner_graph_get_source (planner_plan_get_graph (from_config)));
  /* A different graph at the old path: still the kept one, checked by its hash. */
  g_assert_true (
      planner_graph_save_json (planner_plan_get_graph (from_config), graph_json, &error));
  g_autoptr (PlannerPlan) lb = planner_store_load_plan (store, b, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (from_graph, lb));
  g_clear_object (&store);

  /* Without the kept text, the plan cannot be rebuilt, and says why. */
  exec_bound (path, "UPDATE models SET config = NULL", NULL);
  store = open_store (path);
  g_autoptr (PlannerPlan) gone = planner_store_load_plan (store, b, &error);
  g_assert_null (gone);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_assert_nonnull (strstr (error->message, "different graph"));
  g_clear_error (&error);
  g_autoptr (PlannerPlan) gone_too = planner_store_load_plan (store, a, &error);
  g_assert_null (gone_too);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE);
  g_assert_nonnull (strstr (error->message, "no longer loads"));
  g_clear_object (&store);
  g_remove (graph_json);
  test_util_remove_db (path);
}

/* A damaged row is reported, never a crash or a half-built plan. */
static void
test_damaged_rows (void)
{
  g_autofree char *path = make_store_file ("damaged.db");
  g_autoptr (PlannerStore) store = NULL;
  g_autoptr (GError) error = NULL;
  /* The plan is gpt2-tiny, megatron on dp=2,mp=2 (4 devices, batch 8, position_ids [1,128]). */
  static const struct
  {
    const char *sql;
    const char *fragment;
  } damage[] = {
    { "UPDATE op_strategies SET strategy = '99=0' WHERE op_index = 3", "does not decode" },
    { "UPDATE op_strategies SET strategy = '0=0.0' WHERE op_index = 3", "does not decode" },
    { "DELETE FROM op_strategies WHERE op_index = 7",
      "its op strategies do not match the model's ops" },
    { "UPDATE tensor_layouts SET layout = '[nope]' WHERE tensor_index = 2",
      "a tensor layout does not decode" },
    { "UPDATE redistribution_steps SET kind = 'Teleport'",
      "a redistribution step does not decode" },
    { "UPDATE trace_steps SET op_index = 100000", "a trace step names no op of the model" },
    { "UPDATE meshes SET spec = 'dp=0'", "sizes are integers >= 1" },
    /* Rows that decode but describe an impossible plan loaded, and exported. */
    { "UPDATE meshes SET spec = 'dp=3,mp=2'",
      "its mesh dp=3,mp=2 has 6 devices but the row says 4" },
    { "UPDATE meshes SET spec = 'dp=3,mp=2', n_devices = 6",
      "the strategy of op transformer.wte does not decode or does not fit its shapes on mesh "
      "dp=3,mp=2" },
    { "UPDATE meshes SET spec = 'dp=2000000', n_devices = 2000000", "at most 1048576 (2^20)" },
    { "UPDATE tensor_layouts SET layout = '[dp,_]' WHERE tensor_name = 'position_ids'",
      "a tensor layout does not decode" },
    { "UPDATE redistribution_steps SET after_layout = before_layout",
      "a redistribution step does not decode" },
    /* Counts read as guint from any integer: 2^31 and -1 overflowed compare. */
    { "UPDATE plans SET n_pinned = 2147483648", "count 'pinned' is 2147483648 but the plan has " },
    { "UPDATE plan_collectives SET count = -1 WHERE kind = 'AllReduce'",
      "collectives.AllReduce is 4294967295 steps of " },
    { "UPDATE plans SET comm_bytes = comm_bytes + 1", "comm_bytes is " },
    { "UPDATE op_strategies SET compute_time_s = -1 WHERE op_index = 0",
      "a time, FLOP count or constant is negative" },
    { "UPDATE plans SET backward_factor = -2", "a time, FLOP count or constant is negative" },
    { "UPDATE op_strategies SET pin = -1 WHERE op_index = 0",
      "op transformer.wte's trace step or pin does not match its decision" },
    { "UPDATE trace_steps SET step_index = step_index + 1", "trace step 0 is numbered 1" },

  };

  for (guint i = 0; i < G_N_ELEMENTS (damage); i++)
    {
      g_autofree char *copy = temp_db ("damaged-copy.db");
      g_autofree char *data = NULL;
      gsize length;

      test_util_remove_db (copy);
      g_assert_true (g_file_get_contents (path, &data, &length, NULL));
      g_assert_true (g_file_set_contents (copy, data, length, NULL));
      exec_bound (copy, damage[i].sql, NULL);
      store = open_store (copy);
      g_autoptr (PlannerPlan) plan = planner_store_load_plan (store, 1, &error);
      g_test_message ("%s: %s", damage[i].sql, error ? error->message : "(loaded)");
      g_assert_null (plan);
      test_util_assert_error (error, PLANNER_ERROR_STORE, damage[i].fragment);
      g_clear_error (&error);
      g_clear_object (&store);
      test_util_remove_db (copy);
    }
  test_util_remove_db (path);
}

/* ---- processes: killed while saving, and two saving at once ---- */

/* Child mode: --child-save DB MODEL MESH POLICY PREFIX COUNT (COUNT < 0: until killed). Prints
 * "ready" before the first save and "saved NAME" after each. */
static int
child_save (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = NULL;
  g_autoptr (PlannerStore) store = NULL;
  int count;

  if (argc != 8)
    return 2;
  count = atoi (argv[7]);
  plan = test_util_model_plan (argv[3], argv[4], argv[5], NULL);
  store = planner_store_open (argv[2], &error);
  if (store == NULL)
    {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
  printf ("ready\n");
  fflush (stdout);
  for (int i = 0; count < 0 || i < count; i++)
    {
      g_autofree char *name = g_strdup_printf ("%s%d", argv[6], i);
      if (planner_store_save_plan (store, plan, name, 0, &error) == 0)
        {
          fprintf (stderr, "%s\n", error->message);
          return 1;
        }
      printf ("saved %s\n", name);
      fflush (stdout);
    }
  return 0;
}

static GPid
spawn_child (const char *db, const char *model, const char *mesh, const char *policy,
             const char *prefix, int count, int *out_fd)
{
  g_autofree char *count_text = g_strdup_printf ("%d", count);
  const char *argv[]
      = { self_exe, "--child-save", db, model, mesh, policy, prefix, count_text, NULL };
  g_autoptr (GError) error = NULL;
  GPid pid;

  g_spawn_async_with_pipes (NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid,
                            NULL, out_fd, NULL, &error);
  g_assert_no_error (error);
  return pid;
}

/* Everything the child wrote to @fd until it closed. */
static char *
read_all (int fd)
{
  GString *out = g_string_new (NULL);
  char buffer[4096];
  gssize n;

  while ((n = read (fd, buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      g_string_append_len (out, buffer, n);
  return g_string_free (out, FALSE);
}

static void
read_line (int fd, char *line, gsize size)
{
  gsize n = 0;
  char c;

  while (n + 1 < size && read (fd, &c, 1) == 1 && c != '\n')
    line[n++] = c;
  line[n] = '\0';
}

/* Every plan has all its rows: none is half there. */
static void
assert_no_half_plan (const char *path, PlannerPlan *reference)
{
  sqlite3 *db = NULL;
  sqlite3_stmt *s = NULL;

  g_assert_cmpint (sqlite3_open_v2 (path, &db, SQLITE_OPEN_READONLY, NULL), ==, SQLITE_OK);
  g_assert_cmpint (
      sqlite3_prepare_v2 (db,
                          "SELECT count(*) FROM plans p WHERE "
                          "(SELECT count(*) FROM op_strategies WHERE plan_id = p.id) <> ?1 "
                          "OR (SELECT count(*) FROM tensor_layouts WHERE plan_id = p.id) <> ?2 "
                          "OR (SELECT count(*) FROM redistributions WHERE plan_id = p.id) <> ?3 "
                          "OR (SELECT count(*) FROM trace_steps WHERE plan_id = p.id) <> ?4 "
                          "OR (SELECT count(*) FROM pins WHERE plan_id = p.id) <> ?5",
                          -1, &s, NULL),
      ==, SQLITE_OK);
  sqlite3_bind_int64 (s, 1, planner_graph_get_n_ops (planner_plan_get_graph (reference)));
  sqlite3_bind_int64 (s, 2, planner_graph_get_n_tensors (planner_plan_get_graph (reference)));
  sqlite3_bind_int64 (s, 3, planner_plan_get_n_redistributions (reference));
  sqlite3_bind_int64 (s, 4, planner_plan_get_n_trace_steps (reference));
  sqlite3_bind_int64 (s, 5, planner_plan_get_pins (reference)->len);
  g_assert_cmpint (sqlite3_step (s), ==, SQLITE_ROW);
  g_assert_cmpint (sqlite3_column_int64 (s, 0), ==, 0);
  sqlite3_finalize (s);
  sqlite3_close (db);
}

static void
test_kill_while_saving (void)
{
  g_autofree char *path = temp_db ("killed.db");
  g_autoptr (PlannerPlan) reference
      = test_util_model_plan ("llama-70b", "dp=8,mp=8", "megatron", NULL);
  guint n_plans = 0;
  guint before_commit = 0;

  test_util_remove_db (path);
  for (guint round = 0; round < 4; round++)
    {
      g_autofree char *prefix = g_strdup_printf ("round%u-", round);
      char line[256];
      int fd = -1, status = 0;
      GPid pid = spawn_child (path, "llama-70b", "dp=8,mp=8", "megatron", prefix, -1, &fd);

      read_line (fd, line, sizeof line);
      g_assert_cmpstr (line, ==, "ready");
      /* Somewhere inside the first few saves (each takes tens of milliseconds). */
      g_usleep (g_test_rand_int_range (1000, 400000));
      g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
      g_autofree char *output = read_all (fd);
      close (fd);
      g_spawn_close_pid (pid);

      /* The file opens (the WAL is recovered), is intact, and holds every save the child
       * reported, each whole, and perhaps the one it had committed but not yet reported. */
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerStore) store = open_store (path);
      g_autoptr (GPtrArray) entries = planner_store_list_plans (store, &error);
      g_assert_no_error (error);
      g_auto (GStrv) lines = g_strsplit (output, "\n", -1);
      guint reported = 0;
      for (guint i = 0; lines[i] != NULL; i++)
        if (g_str_has_prefix (lines[i], "saved "))
          {
            g_assert_cmpint (planner_store_lookup (store, lines[i] + 6, &error), >, 0);
            g_assert_no_error (error);
            reported++;
          }
      g_assert_cmpuint (entries->len, >=, n_plans + reported);
      g_assert_cmpuint (entries->len, <=, n_plans + reported + 1);
      before_commit += entries->len == n_plans + reported;
      g_test_message ("round %u: child reported %u saves, the store holds %u new plans", round,
                      reported, entries->len - n_plans);
      n_plans = entries->len;
      if (n_plans > 0)
        {
          PlannerStoreEntry *last = g_ptr_array_index (entries, n_plans - 1);
          g_autoptr (PlannerPlan) loaded = planner_store_load_plan (store, last->id, &error);
          g_assert_no_error (error);
          planner_plan_set_name (reference, last->name);
          g_assert_true (planner_plan_equal (reference, loaded));
        }
      g_clear_object (&store);
      assert_integrity_ok (path);
      assert_no_half_plan (path, reference);
    }
  g_test_message ("%u of 4 kills came inside a save before its commit, the others between a "
                  "commit and its report",
                  before_commit);
  test_util_remove_db (path);
}

static void
test_two_processes (void)
{
  g_autofree char *path = temp_db ("two-writers.db");
  const guint count = 4;
  int fd_a = -1, fd_b = -1, status = 0;
  GPid a, b;

  test_util_remove_db (path);
  /* Neither exists yet: both create and migrate the same new file. */
  a = spawn_child (path, "gpt2-tiny", "dp=2,mp=2", "megatron", "a-", count, &fd_a);
  b = spawn_child (path, "llama-tiny", "dp=2,mp=2", "megatron-sp", "b-", count, &fd_b);
  g_free (read_all (fd_a));
  g_free (read_all (fd_b));
  close (fd_a);
  close (fd_b);
  g_assert_cmpint (waitpid (a, &status, 0), ==, a);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  g_assert_cmpint (waitpid (b, &status, 0), ==, b);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  g_spawn_close_pid (a);
  g_spawn_close_pid (b);

  g_autoptr (PlannerPlan) ref_a = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  g_autoptr (PlannerPlan) ref_b
      = test_util_model_plan ("llama-tiny", "dp=2,mp=2", "megatron-sp", NULL);
  g_autoptr (PlannerStore) store = open_store (path);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) entries = planner_store_list_plans (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (entries->len, ==, 2 * count);
  for (guint i = 0; i < count; i++)
    for (guint w = 0; w < 2; w++)
      {
        PlannerPlan *ref = w == 0 ? ref_a : ref_b;
        g_autofree char *name = g_strdup_printf ("%s%u", w == 0 ? "a-" : "b-", i);
        g_autoptr (PlannerPlan) loaded = planner_store_load_plan_by_name (store, name, &error);
        g_assert_no_error (error);
        planner_plan_set_name (ref, name);
        g_assert_true (planner_plan_equal (ref, loaded));
      }
  g_clear_object (&store);
  assert_integrity_ok (path);
  test_util_remove_db (path);
}

/* The training options have a column (schema 3): a plan saved with ZeRO-3, full recompute,
 * micro-batches and no dropout loads back with them, and so with the same memory and step
 * breakdown (planner_plan_equal compares constants and totals byte for byte). */
static void
test_training_options (void)
{
  g_autofree char *dir = test_util_tmp_dir_new ("store-XXXXXX");
  g_autofree char *path = g_build_filename (dir, "plans.db", NULL);
  g_autoptr (PlannerPlan) plan = test_util_model_plan ("gpt2-tiny", "dp=2,mp=2", "megatron", NULL);
  PlannerCostConstants c = *planner_plan_get_constants (plan);
  c.zero = 3;
  c.recompute = PLANNER_RECOMPUTE_FULL;
  c.micro_batch = 2;
  c.no_dropout = TRUE;
  c.dp_bucket_MiB = 12.5;
  planner_plan_set_constants (plan, &c);
  g_autoptr (GError) error = NULL;
  g_assert_true (planner_plan_finish (plan, FALSE, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (planner_plan_get_totals (plan)->micro_batches, ==, 2);

  g_autoptr (PlannerStore) store = open_store (path);
  assert_roundtrip (store, plan, "zero3");
  g_autoptr (PlannerPlan) loaded = planner_store_load_plan_by_name (store, "zero3", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (planner_plan_get_constants (loaded)->zero, ==, 3);
  g_assert_cmpuint (planner_plan_get_totals (loaded)->micro_batches, ==, 2);
  planner_store_close (store);
  test_util_remove_db (path);
  test_util_tmp_dir_remove (dir);
}

int
main (int argc, char *argv[])
{
  static const char *gpt2_megatron[] = { "gpt2-tiny", "dp=2,mp=2", "megatron", NULL };
  static const char *llama_sp[] = { "llama-tiny", "dp=2,mp=2", "megatron-sp", NULL };
  /* A pin with out_strategy: output layouts in the store. */
  static const char *llama_out[]
      = { "llama-tiny", "dp=2,mp=2", "megatron", "*.down_proj=[dp,_,mp],[_,mp]->[dp,mp,_]" };

  if (argc > 1 && strcmp (argv[1], "--child-save") == 0)
    return child_save (argc, argv);

  self_exe = g_file_read_link ("/proc/self/exe", NULL);
  if (self_exe == NULL)
    self_exe = argv[0];
  g_test_init (&argc, &argv, G_TEST_OPTION_ISOLATE_DIRS, NULL);
  tmp_dir = g_dir_make_tmp ("test-store-XXXXXX", NULL);
  g_assert_nonnull (tmp_dir);

  g_test_add_data_func ("/planner/store/roundtrip/gpt2-tiny-megatron", gpt2_megatron,
                        test_roundtrip);
  g_test_add_data_func ("/planner/store/roundtrip/llama-tiny-megatron-sp", llama_sp,
                        test_roundtrip);
  g_test_add_data_func ("/planner/store/roundtrip/out-strategy", llama_out, test_roundtrip);
  g_test_add_func ("/planner/store/derived-rename-delete", test_derived_rename_delete);
  g_test_add_func ("/planner/store/trial-runs", test_trial_runs);
  g_test_add_func ("/planner/store/migrate-v1", test_migrate_v1);
  g_test_add_func ("/planner/store/training-options", test_training_options);
  g_test_add_func ("/planner/store/refuse/not-sqlite", test_refuse_not_sqlite);
  g_test_add_func ("/planner/store/refuse/truncated", test_refuse_truncated);
  g_test_add_func ("/planner/store/refuse/newer", test_refuse_newer);
  g_test_add_func ("/planner/store/refuse/foreign", test_refuse_foreign);
  g_test_add_func ("/planner/store/empty-file", test_empty_file);
  g_test_add_func ("/planner/store/default-path", test_default_path);
  g_test_add_func ("/planner/store/hostile-names", test_hostile_names);
  g_test_add_func ("/planner/store/refused-names", test_refused_names);
  g_test_add_func ("/planner/store/lookup", test_lookup);
  g_test_add_func ("/planner/store/model-moved", test_model_moved);
  g_test_add_func ("/planner/store/damaged-rows", test_damaged_rows);
  g_test_add_func ("/planner/store/kill-while-saving", test_kill_while_saving);
  g_test_add_func ("/planner/store/two-processes", test_two_processes);
  int status = g_test_run ();
  g_rmdir (tmp_dir); /* every test removes its files; a failing one leaves them to look at */
  return status;
}
