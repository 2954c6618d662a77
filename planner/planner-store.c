#define G_LOG_DOMAIN "planner-store"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "planner-error.h"
#include "planner-model-private.h"
#include "planner-plan-private.h"
#include "planner-store-private.h"

/* How long a save waits for another process's transaction before giving up. */
#define BUSY_TIMEOUT_MS 30000

/* ---- schema ----
 *
 * migrations[v] takes a file from user_version v to v + 1, inside one transaction. A new file
 * runs them all, so version 1 is created the way it always was and every step is exercised.
 * Only constants appear in this SQL; values are always bound. */

static const char *const migrations[] = {
  /* 0 -> 1: models, meshes, profiles, plans and everything a plan holds. */
  "PRAGMA application_id = 1399346019;" /* PLANNER_STORE_APPLICATION_ID */
  "CREATE TABLE models ("
  "  id INTEGER PRIMARY KEY,"
  "  name TEXT NOT NULL,"
  "  source TEXT NOT NULL,"
  "  config TEXT," /* the file the source names, as it was when saved; NULL for the zoo */
  "  graph_hash TEXT NOT NULL,"
  "  n_ops INTEGER NOT NULL,"
  "  n_tensors INTEGER NOT NULL,"
  "  UNIQUE (source, graph_hash));"
  "CREATE TABLE meshes ("
  "  id INTEGER PRIMARY KEY,"
  "  spec TEXT NOT NULL UNIQUE,"
  "  n_devices INTEGER NOT NULL);"
  "CREATE TABLE hardware ("
  "  id INTEGER PRIMARY KEY,"
  "  name TEXT NOT NULL,"
  "  profile TEXT NOT NULL UNIQUE);" /* the profile JSON */
  "CREATE TABLE plans ("
  "  id INTEGER PRIMARY KEY,"
  "  name TEXT NOT NULL UNIQUE,"
  "  model_id INTEGER NOT NULL REFERENCES models (id),"
  "  mesh_id INTEGER NOT NULL REFERENCES meshes (id),"
  "  hardware_id INTEGER NOT NULL REFERENCES hardware (id),"
  "  created INTEGER NOT NULL," /* microseconds since the epoch, UTC */
  "  policy TEXT,"
  "  propagate_ms REAL,"
  "  weight_copies REAL, grad_copies REAL, optimizer_states REAL, backward_factor REAL,"
  "  n_ops INTEGER NOT NULL, n_pinned INTEGER NOT NULL, n_propagated INTEGER NOT NULL,"
  "  n_defaulted INTEGER NOT NULL, n_redistributions INTEGER NOT NULL,"
  "  comm_bytes INTEGER NOT NULL, comm_time_s REAL, compute_time_s REAL,"
  "  backward_comm_time_s REAL, grad_sync_time_s REAL, step_time_s REAL,"
  "  param_bytes_per_device INTEGER NOT NULL, activation_bytes_per_device INTEGER NOT NULL,"
  "  memory_per_device_bytes INTEGER NOT NULL);"
  "CREATE INDEX plans_model ON plans (model_id);"
  "CREATE TABLE plan_collectives ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  kind TEXT NOT NULL, count INTEGER NOT NULL, bytes INTEGER NOT NULL, time_s REAL,"
  "  PRIMARY KEY (plan_id, kind)) WITHOUT ROWID;"
  "CREATE TABLE plan_axes ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  axis INTEGER NOT NULL, bytes INTEGER NOT NULL, time_s REAL,"
  "  PRIMARY KEY (plan_id, axis)) WITHOUT ROWID;"
  "CREATE TABLE pins ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  position INTEGER NOT NULL, text TEXT NOT NULL,"
  "  PRIMARY KEY (plan_id, position)) WITHOUT ROWID;"
  "CREATE TABLE op_strategies ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  op_index INTEGER NOT NULL, op_name TEXT NOT NULL,"
  "  strategy TEXT NOT NULL," /* "FACTOR=AXIS.AXIS,...;p=MASK@INPUT", indices */
  "  decision TEXT NOT NULL"
  "    CHECK (decision = 'pinned' OR decision = 'propagated' OR decision = 'defaulted'),"
  "  trace_step INTEGER NOT NULL, pin INTEGER NOT NULL,"
  "  out_layouts TEXT," /* "LAYOUT;LAYOUT", NULL without an out_strategy */
  "  compute_time_s REAL, flops REAL,"
  "  PRIMARY KEY (plan_id, op_index)) WITHOUT ROWID;"
  "CREATE TABLE tensor_layouts ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  tensor_index INTEGER NOT NULL, tensor_name TEXT NOT NULL, layout TEXT NOT NULL,"
  "  PRIMARY KEY (plan_id, tensor_index)) WITHOUT ROWID;"
  "CREATE TABLE redistributions ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  position INTEGER NOT NULL, tensor_index INTEGER NOT NULL, tensor_name TEXT NOT NULL,"
  "  consumer INTEGER NOT NULL, slot INTEGER NOT NULL, producer_side INTEGER NOT NULL,"
  "  from_layout TEXT NOT NULL, to_layout TEXT NOT NULL, n_steps INTEGER NOT NULL,"
  "  steps TEXT NOT NULL," /* "AllReduce(mp) 12 MiB 0.8 ms; ...", for people */
  "  bytes INTEGER NOT NULL, time_s REAL,"
  "  PRIMARY KEY (plan_id, position)) WITHOUT ROWID;"
  "CREATE TABLE redistribution_steps ("
  "  plan_id INTEGER NOT NULL, redistribution INTEGER NOT NULL, position INTEGER NOT NULL,"
  "  kind TEXT NOT NULL, axis INTEGER NOT NULL, dim INTEGER NOT NULL, dim_to INTEGER NOT NULL,"
  "  before_layout TEXT NOT NULL, after_layout TEXT NOT NULL,"
  "  n_in INTEGER NOT NULL, n_out INTEGER NOT NULL, bytes INTEGER NOT NULL, time_s REAL,"
  "  PRIMARY KEY (plan_id, redistribution, position),"
  "  FOREIGN KEY (plan_id, redistribution) REFERENCES redistributions (plan_id, position)"
  "    ON DELETE CASCADE) WITHOUT ROWID;"
  "CREATE TABLE trace_steps ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  position INTEGER NOT NULL, step_index INTEGER NOT NULL, op_index INTEGER NOT NULL,"
  "  strategy TEXT NOT NULL, from_op INTEGER NOT NULL, forward INTEGER NOT NULL,"
  "  edge_cost_s REAL, n_candidates INTEGER NOT NULL,"
  "  runner_up TEXT, runner_up_cost_s REAL," /* NULL without a runner-up */
  "  PRIMARY KEY (plan_id, position)) WITHOUT ROWID;"
  "CREATE TABLE conflicts ("
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  position INTEGER NOT NULL, redistribution INTEGER NOT NULL, message TEXT NOT NULL,"
  "  PRIMARY KEY (plan_id, position)) WITHOUT ROWID;"
  "PRAGMA user_version = 1;",

  /* 1 -> 2: derived plans know their parent; trial runs and their measurements. */
  "ALTER TABLE plans ADD COLUMN parent_id INTEGER REFERENCES plans (id) ON DELETE SET NULL;"
  "CREATE INDEX plans_parent ON plans (parent_id);"
  "CREATE TABLE trial_runs ("
  "  id INTEGER PRIMARY KEY,"
  "  plan_id INTEGER NOT NULL REFERENCES plans (id) ON DELETE CASCADE,"
  "  backend TEXT NOT NULL, devices INTEGER NOT NULL, created INTEGER NOT NULL,"
  "  max_abs_error REAL, max_rel_error REAL);"
  "CREATE INDEX trial_runs_plan ON trial_runs (plan_id);"
  "CREATE TABLE trial_measurements ("
  "  run_id INTEGER NOT NULL REFERENCES trial_runs (id) ON DELETE CASCADE,"
  "  position INTEGER NOT NULL,"
  "  kind TEXT NOT NULL CHECK (kind = 'op' OR kind = 'redistribution'),"
  "  name TEXT NOT NULL, estimated_us REAL, measured_us REAL,"
  "  PRIMARY KEY (run_id, position)) WITHOUT ROWID;"
  "PRAGMA user_version = 2;",

  /* 2 -> 3: the training options (planner_cost_training_to_string); NULL: the defaults. */
  ("ALTER TABLE plans ADD COLUMN training TEXT;"
   "PRAGMA user_version = 3;"),
};

G_STATIC_ASSERT (G_N_ELEMENTS (migrations) == PLANNER_STORE_SCHEMA_VERSION);

/* ---- statements, prepared once per store ---- */

#define TOTALS_COLUMNS                                                                             \
  "n_ops, n_pinned, n_propagated, n_defaulted, n_redistributions, comm_bytes, comm_time_s, "       \
  "compute_time_s, backward_comm_time_s, grad_sync_time_s, step_time_s, "                          \
  "param_bytes_per_device, activation_bytes_per_device, memory_per_device_bytes"
#define P_TOTALS_COLUMNS                                                                           \
  "p.n_ops, p.n_pinned, p.n_propagated, p.n_defaulted, p.n_redistributions, p.comm_bytes, "        \
  "p.comm_time_s, p.compute_time_s, p.backward_comm_time_s, p.grad_sync_time_s, "                  \
  "p.step_time_s, p.param_bytes_per_device, p.activation_bytes_per_device, "                       \
  "p.memory_per_device_bytes"

G_STATIC_ASSERT (N_TOTALS_COLUMNS == PLANNER_N_TOTAL_FIELDS);

#define ENTRY_SELECT                                                                               \
  "SELECT p.id, p.name, m.name, m.source, me.spec, h.name, p.policy, p.created, p.parent_id, "     \
  "pp.name, (SELECT count(*) FROM pins WHERE plan_id = p.id), "                                    \
  "(SELECT count(*) FROM trial_runs WHERE plan_id = p.id), " P_TOTALS_COLUMNS                      \
  " FROM plans p JOIN models m ON m.id = p.model_id JOIN meshes me ON me.id = p.mesh_id "          \
  "JOIN hardware h ON h.id = p.hardware_id LEFT JOIN plans pp ON pp.id = p.parent_id "
/* The column of ENTRY_SELECT where the totals start. */
#define ENTRY_TOTALS_COLUMN 12

static const char *const stmt_sql[N_STMTS] = {
  [STMT_BEGIN] = "BEGIN IMMEDIATE",
  [STMT_COMMIT] = "COMMIT",
  [STMT_ROLLBACK] = "ROLLBACK",
  [STMT_FIND_MODEL] = "SELECT id FROM models WHERE source = ?1 AND graph_hash = ?2",
  [STMT_INSERT_MODEL] = "INSERT INTO models (name, source, config, graph_hash, n_ops, n_tensors) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
  [STMT_FIND_MESH] = "SELECT id FROM meshes WHERE spec = ?1",
  [STMT_INSERT_MESH] = "INSERT INTO meshes (spec, n_devices) VALUES (?1, ?2)",
  [STMT_FIND_HARDWARE] = "SELECT id FROM hardware WHERE profile = ?1",
  [STMT_INSERT_HARDWARE] = "INSERT INTO hardware (name, profile) VALUES (?1, ?2)",
  [STMT_FIND_PLAN_BY_NAME] = "SELECT id FROM plans WHERE name = ?1",
  [STMT_PLAN_NAME] = "SELECT name FROM plans WHERE id = ?1",
  [STMT_INSERT_PLAN]
  = "INSERT INTO plans (name, model_id, mesh_id, hardware_id, parent_id, created, policy, "
    "propagate_ms, weight_copies, grad_copies, optimizer_states, backward_factor, " TOTALS_COLUMNS
    ", training) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
    "?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
  [STMT_INSERT_COLLECTIVE] = "INSERT INTO plan_collectives (plan_id, kind, count, bytes, time_s) "
                             "VALUES (?1, ?2, ?3, ?4, ?5)",
  [STMT_INSERT_AXIS]
  = "INSERT INTO plan_axes (plan_id, axis, bytes, time_s) VALUES (?1, ?2, ?3, ?4)",
  [STMT_INSERT_PIN] = "INSERT INTO pins (plan_id, position, text) VALUES (?1, ?2, ?3)",
  [STMT_INSERT_OP]
  = "INSERT INTO op_strategies (plan_id, op_index, op_name, strategy, decision, trace_step, "
    "pin, out_layouts, compute_time_s, flops) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
  [STMT_INSERT_TENSOR] = "INSERT INTO tensor_layouts (plan_id, tensor_index, tensor_name, layout) "
                         "VALUES (?1, ?2, ?3, ?4)",
  [STMT_INSERT_REDISTRIBUTION]
  = "INSERT INTO redistributions (plan_id, position, tensor_index, tensor_name, consumer, slot, "
    "producer_side, from_layout, to_layout, n_steps, steps, bytes, time_s) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
  [STMT_INSERT_STEP]
  = "INSERT INTO redistribution_steps (plan_id, redistribution, position, kind, axis, dim, "
    "dim_to, before_layout, after_layout, n_in, n_out, bytes, time_s) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
  [STMT_INSERT_TRACE]
  = "INSERT INTO trace_steps (plan_id, position, step_index, op_index, strategy, from_op, "
    "forward, edge_cost_s, n_candidates, runner_up, runner_up_cost_s) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
  [STMT_INSERT_CONFLICT] = "INSERT INTO conflicts (plan_id, position, redistribution, message) "
                           "VALUES (?1, ?2, ?3, ?4)",
  [STMT_SELECT_PLAN]
  = "SELECT p.name, p.policy, p.propagate_ms, p.weight_copies, p.grad_copies, "
    "p.optimizer_states, p.backward_factor, m.source, m.config, m.graph_hash, m.name, me.spec, "
    "h.profile, " P_TOTALS_COLUMNS ", me.n_devices, p.training FROM plans p JOIN models m ON m.id = p.model_id "
    "JOIN meshes me ON me.id = p.mesh_id JOIN hardware h ON h.id = p.hardware_id "
    "WHERE p.id = ?1",
  [STMT_SELECT_COLLECTIVES]
  = "SELECT kind, count, bytes, time_s FROM plan_collectives WHERE plan_id = ?1",
  [STMT_SELECT_AXES] = "SELECT axis, bytes, time_s FROM plan_axes WHERE plan_id = ?1",
  [STMT_SELECT_PINS] = "SELECT text FROM pins WHERE plan_id = ?1 ORDER BY position",
  [STMT_SELECT_OPS] = "SELECT op_index, op_name, strategy, decision, trace_step, pin, "
                      "out_layouts, compute_time_s, flops FROM op_strategies "
                      "WHERE plan_id = ?1 ORDER BY op_index",
  [STMT_SELECT_TENSORS] = "SELECT tensor_index, layout FROM tensor_layouts "
                          "WHERE plan_id = ?1 ORDER BY tensor_index",
  [STMT_SELECT_REDISTRIBUTIONS]
  = "SELECT position, tensor_index, consumer, slot, producer_side, from_layout, to_layout, "
    "n_steps, bytes, time_s FROM redistributions WHERE plan_id = ?1 ORDER BY position",
  [STMT_SELECT_STEPS]
  = "SELECT redistribution, position, kind, axis, dim, dim_to, before_layout, after_layout, "
    "n_in, n_out, bytes, time_s FROM redistribution_steps WHERE plan_id = ?1 "
    "ORDER BY redistribution, position",
  [STMT_SELECT_TRACE] = "SELECT position, step_index, op_index, strategy, from_op, forward, "
                        "edge_cost_s, n_candidates, runner_up, runner_up_cost_s FROM trace_steps "
                        "WHERE plan_id = ?1 ORDER BY position",
  [STMT_SELECT_CONFLICTS] = "SELECT position, redistribution, message FROM conflicts "
                            "WHERE plan_id = ?1 ORDER BY position",
  [STMT_LIST_PLANS] = ENTRY_SELECT "ORDER BY p.id",
  [STMT_GET_ENTRY] = ENTRY_SELECT "WHERE p.id = ?1",
  [STMT_DELETE_PLAN] = "DELETE FROM plans WHERE id = ?1",
  [STMT_GC_MODELS] = "DELETE FROM models WHERE id NOT IN (SELECT model_id FROM plans)",
  [STMT_GC_MESHES] = "DELETE FROM meshes WHERE id NOT IN (SELECT mesh_id FROM plans)",
  [STMT_GC_HARDWARE] = "DELETE FROM hardware WHERE id NOT IN (SELECT hardware_id FROM plans)",
  [STMT_RENAME_PLAN] = "UPDATE plans SET name = ?2 WHERE id = ?1",
  [STMT_INSERT_RUN] = "INSERT INTO trial_runs (plan_id, backend, devices, created, "
                      "max_abs_error, max_rel_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
  [STMT_INSERT_MEASUREMENT]
  = "INSERT INTO trial_measurements (run_id, position, kind, name, estimated_us, measured_us) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
  [STMT_SELECT_RUNS] = "SELECT id, backend, devices, created, max_abs_error, max_rel_error "
                       "FROM trial_runs WHERE plan_id = ?1 ORDER BY created DESC, id DESC",
  [STMT_SELECT_MEASUREMENTS] = "SELECT kind, name, estimated_us, measured_us "
                               "FROM trial_measurements WHERE run_id = ?1 ORDER BY position",
};

enum
{
  PROP_0,
  PROP_PATH,
  N_PROPS
};

enum
{
  CHANGED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE (PlannerStore, planner_store, G_TYPE_OBJECT)

/* ---- small structs ---- */

void
planner_store_entry_free (PlannerStoreEntry *entry)
{
  if (entry == NULL)
    return;
  g_free (entry->name);
  g_free (entry->model);
  g_free (entry->model_source);
  g_free (entry->mesh);
  g_free (entry->hardware);
  g_free (entry->policy);
  g_free (entry->parent_name);
  g_free (entry);
}

static const char *const measurement_kind_names[] = { "op", "redistribution" };

const char *
planner_measurement_kind_to_string (PlannerMeasurementKind kind)
{
  g_return_val_if_fail (kind <= PLANNER_MEASUREMENT_REDISTRIBUTION, "?");
  return measurement_kind_names[kind];
}

gboolean
planner_measurement_kind_from_string (const char *text, PlannerMeasurementKind *kind)
{
  for (guint i = 0; i < G_N_ELEMENTS (measurement_kind_names); i++)
    if (g_strcmp0 (text, measurement_kind_names[i]) == 0)
      {
        *kind = (PlannerMeasurementKind)i;
        return TRUE;
      }
  return FALSE;
}

void
planner_trial_run_free (PlannerTrialRun *run)
{
  if (run == NULL)
    return;
  g_free (run->backend);
  g_clear_pointer (&run->measurements, g_array_unref);
  g_clear_pointer (&run->names, g_string_chunk_free);
  g_free (run);
}

const PlannerTrialMeasurement *
planner_trial_run_find (const PlannerTrialRun *run, PlannerMeasurementKind kind, const char *name)
{
  g_return_val_if_fail (run != NULL && name != NULL, NULL);
  for (guint i = 0; i < run->measurements->len; i++)
    {
      const PlannerTrialMeasurement *m
          = &g_array_index (run->measurements, PlannerTrialMeasurement, i);
      if (m->kind == kind && strcmp (m->name, name) == 0)
        return m;
    }
  return NULL;
}

char *
planner_store_redistribution_name (PlannerPlan *plan, guint redistribution)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_return_val_if_fail (redistribution < planner_plan_get_n_redistributions (plan), NULL);

  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerRedistribution *r = planner_plan_get_redistribution (plan, redistribution);
  const char *tensor = planner_graph_get_tensor (graph, r->tensor)->name;

  if (r->consumer < 0)
    return g_strdup_printf ("%s -> (output)", tensor);
  const char *consumer = planner_graph_get_op (graph, r->consumer)->name;
  if (r->producer_side)
    return g_strdup_printf ("%s -> %s:%u (out_strategy)", tensor, consumer, r->slot);
  return g_strdup_printf ("%s -> %s:%u", tensor, consumer, r->slot);
}

/* ---- errors and statement helpers ---- */

static gboolean
store_error (PlannerStore *self, GError **error, const char *what)
{
  int code = self->db != NULL ? sqlite3_errcode (self->db) : SQLITE_MISUSE;
  const char *message = self->db != NULL ? sqlite3_errmsg (self->db) : "the store is closed";

  switch (code & 0xff)
    {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: %s: another process kept the store busy for more than %d s; try again",
                   self->path, what, BUSY_TIMEOUT_MS / 1000);
      break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: %s: the file is damaged (%s); restore it from a copy", self->path, what,
                   message);
      break;
    case SQLITE_FULL:
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: %s: the disk is full; nothing was written", self->path, what);
      break;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: %s: the file cannot be written (%s)", self->path, what, message);
      break;
    default:
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE, "%s: %s: %s", self->path, what,
                   message);
      break;
    }
  return FALSE;
}

gboolean
planner_store_check_open (PlannerStore *self, GError **error)
{
  if (self->db != NULL)
    return TRUE;
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE, "%s: the store is closed", self->path);
  return FALSE;
}

/* The statement, reset and with its bindings cleared, ready to bind. */
sqlite3_stmt *
planner_store_stmt (PlannerStore *self, PlannerStoreStmtId id, GError **error)
{
  sqlite3_stmt *s = self->stmts[id];

  if (s == NULL)
    {
      if (sqlite3_prepare_v3 (self->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s, NULL)
          != SQLITE_OK)
        {
          store_error (self, error, "preparing a statement");
          return NULL;
        }
      self->stmts[id] = s;
      return s;
    }
  sqlite3_reset (s);
  sqlite3_clear_bindings (s);
  return s;
}

/* Every bound string outlives the step that reads it, and stmt() clears the bindings before
 * the next use, so SQLite need not copy them. */
void
planner_store_bind_text (sqlite3_stmt *s, int i, const char *text)
{
  if (text == NULL)
    sqlite3_bind_null (s, i);
  else
    sqlite3_bind_text (s, i, text, -1, SQLITE_STATIC);
}

void
planner_store_bind_int (sqlite3_stmt *s, int i, gint64 value)
{
  sqlite3_bind_int64 (s, i, value);
}

/* SQLite keeps a NaN as NULL; col_double turns it back. */
void
planner_store_bind_double (sqlite3_stmt *s, int i, double value)
{
  if (isnan (value))
    sqlite3_bind_null (s, i);
  else
    sqlite3_bind_double (s, i, value);
}

double
planner_store_col_double (sqlite3_stmt *s, int i)
{
  if (sqlite3_column_type (s, i) == SQLITE_NULL)
    return NAN;
  return sqlite3_column_double (s, i);
}

const char *
planner_store_col_text (sqlite3_stmt *s, int i)
{
  return (const char *)sqlite3_column_text (s, i);
}

const char *
planner_store_col_str (sqlite3_stmt *s, int i)
{
  const char *text = (const char *)sqlite3_column_text (s, i);
  return text != NULL ? text : "";
}

gint64
planner_store_col_int (sqlite3_stmt *s, int i)
{
  return sqlite3_column_int64 (s, i);
}

/* Binds @values to ?FIRST, ?FIRST+1...; a null is left unbound (stmt() cleared them). */
void
planner_store_bind_values (sqlite3_stmt *s, int first, const PlannerStoreValue *values, guint n)
{
  for (guint i = 0; i < n; i++)
    switch (values[i].type)
      {
      case VALUE_NULL:
        break;
      case VALUE_INT:
        planner_store_bind_int (s, first + (int)i, values[i].u.i);
        break;
      case VALUE_DOUBLE:
        planner_store_bind_double (s, first + (int)i, values[i].u.d);
        break;
      case VALUE_TEXT:
        planner_store_bind_text (s, first + (int)i, values[i].u.t);
        break;
      default:
        g_assert_not_reached ();
      }
}

/* Runs a statement that returns no rows. */
gboolean
planner_store_run (PlannerStore *self, sqlite3_stmt *s, const char *what, GError **error)
{
  gboolean ok = sqlite3_step (s) == SQLITE_DONE;

  if (!ok)
    store_error (self, error, what);
  sqlite3_reset (s);
  return ok;
}

/* Steps a query: 1 a row came, 0 the end, -1 an error (@error set, @s reset). */
int
planner_store_next_row (PlannerStore *self, sqlite3_stmt *s, const char *what, GError **error)
{
  int rc = sqlite3_step (s);

  if (rc == SQLITE_ROW)
    return 1;
  if (rc == SQLITE_DONE)
    return 0;
  store_error (self, error, what);
  sqlite3_reset (s);
  return -1;
}

/* Runs statement @id, which returns no rows, with @values bound to ?1, ?2... */
gboolean
planner_store_run_with (PlannerStore *self, PlannerStoreStmtId id, const char *what, GError **error,
                        const PlannerStoreValue *values, guint n)
{
  sqlite3_stmt *s = planner_store_stmt (self, id, error);

  if (s == NULL)
    return FALSE;
  planner_store_bind_values (s, 1, values, n);
  return planner_store_run (self, s, what, error);
}

/* Runs INSERT @id with @values; *@row is the id of the row it added. */
gboolean
planner_store_insert_row (PlannerStore *self, PlannerStoreStmtId id, const char *what, gint64 *row,
                          GError **error, const PlannerStoreValue *values, guint n)
{
  if (!planner_store_run_with (self, id, what, error, values, n))
    return FALSE;
  *row = sqlite3_last_insert_rowid (self->db);
  return TRUE;
}

/* Query @id with @key bound to ?1, ready for next_row(). */
sqlite3_stmt *
planner_store_query (PlannerStore *self, PlannerStoreStmtId id, gint64 key, GError **error)
{
  sqlite3_stmt *s = planner_store_stmt (self, id, error);

  if (s != NULL)
    planner_store_bind_int (s, 1, key);
  return s;
}

static gboolean
exec (PlannerStore *self, const char *sql, const char *what, GError **error)
{
  if (sqlite3_exec (self->db, sql, NULL, NULL, NULL) != SQLITE_OK)
    return store_error (self, error, what);
  return TRUE;
}

static gboolean
begin (PlannerStore *self, GError **error)
{
  sqlite3_stmt *s = planner_store_stmt (self, STMT_BEGIN, error);
  return s != NULL && planner_store_run (self, s, "starting a transaction", error);
}

static gboolean
commit (PlannerStore *self, GError **error)
{
  sqlite3_stmt *s = planner_store_stmt (self, STMT_COMMIT, error);
  return s != NULL && planner_store_run (self, s, "committing", error);
}

static void
rollback (PlannerStore *self)
{
  if (sqlite3_get_autocommit (self->db))
    return; /* SQLite already rolled back (an I/O error, a full disk) */
  /* Statements still stepping would hold the transaction open. */
  for (guint i = 0; i < N_STMTS; i++)
    if (self->stmts[i] != NULL)
      sqlite3_reset (self->stmts[i]);
  sqlite3_exec (self->db, "ROLLBACK", NULL, NULL, NULL);
}

gint64
planner_store_change (PlannerStore *self, PlannerStoreChangeFunc func, gconstpointer data,
                      GError **error)
{
  gint64 result = 0;

  g_mutex_lock (&self->lock);
  if (self->read_only && self->db != NULL)
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                 "%s: the store is read-only here (this user cannot write the file or its "
                 "folder); it can be listed and its plans loaded, but changes need write "
                 "permission, or a copy with --db",
                 self->path);
  else if (planner_store_check_open (self, error) && begin (self, error))
    {
      result = func (self, data, error);
      if (result == 0 || !commit (self, error))
        {
          rollback (self);
          result = 0;
        }
    }
  g_mutex_unlock (&self->lock);
  return result;
}

gpointer
planner_store_read_snapshot (PlannerStore *self, PlannerStoreReadFunc func, gint64 id,
                             const char *name, GError **error)
{
  gpointer result = NULL;

  g_mutex_lock (&self->lock);
  if (planner_store_check_open (self, error) && exec (self, "BEGIN", "starting a read", error))
    {
      result = func (self, id, name, error);
      rollback (self);
    }
  g_mutex_unlock (&self->lock);
  return result;
}

/* ---- opening ---- */

static guint32
be32 (const guint8 *p)
{
  return ((guint32)p[0] << 24) | ((guint32)p[1] << 16) | ((guint32)p[2] << 8) | p[3];
}

/* Reads the 100-byte SQLite header without SQLite, so that a file we refuse is never opened
 * by it (an SQLite open may create -wal and -shm files or roll back a journal). */
static gboolean
check_file (const char *path, gboolean *exists, GError **error)
{
  guint8 header[100];
  struct stat st;
  int fd;
  gssize n;

  *exists = FALSE;
  fd = g_open (path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    {
      int saved = errno;
      if (saved == ENOENT)
        return TRUE;
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE, "%s: cannot open the plan store: %s",
                   path, g_strerror (saved));
      return FALSE;
    }
  *exists = TRUE;
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: not a regular file, so not a plan store", path);
      return FALSE;
    }
  /* An empty file is an empty database to SQLite: it becomes a new store. */
  if (st.st_size == 0)
    {
      close (fd);
      return TRUE;
    }
  n = read (fd, header, sizeof header);
  close (fd);
  if (n < (gssize)sizeof header || memcmp (header, "SQLite format 3", 16) != 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: not an SQLite database (%s), so not a plan store; the file was left "
                   "as it is: pass another file with --db",
                   path,
                   n < (gssize)sizeof header ? "shorter than the 100-byte SQLite header"
                                             : "no \"SQLite format 3\" header");
      return FALSE;
    }

  guint32 page_size = ((guint32)header[16] << 8) | header[17];
  if (page_size == 1)
    page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: damaged SQLite header (page size %u); the file was left as it is", path,
                   page_size);
      return FALSE;
    }
  /* With a hot WAL (a process died before its checkpoint finished) the WAL holds the pages the
   * file lacks, and the header may count them already: SQLite recovers that, it is no
   * truncation. */
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  GStatBuf wal_st;
  gboolean hot_wal = g_stat (wal, &wal_st) == 0 && wal_st.st_size > 0;
  guint32 change_counter = be32 (header + 24);
  guint32 n_pages = be32 (header + 28);
  guint32 valid_for = be32 (header + 92);
  guint64 expected = (guint64)n_pages * page_size;
  if (!hot_wal
      && ((guint64)st.st_size % page_size != 0
          || (n_pages > 0 && change_counter == valid_for && (guint64)st.st_size < expected)))
    {
      g_set_error (
          error, PLANNER_ERROR, PLANNER_ERROR_STORE,
          "%s: truncated: the SQLite header counts %u pages of %u bytes (%" G_GUINT64_FORMAT
          " bytes) but the file holds %" G_GINT64_FORMAT
          " bytes; the file was left as it is: restore it from a copy",
          path, n_pages, page_size, expected, (gint64)st.st_size);
      return FALSE;
    }
  guint32 user_version = be32 (header + 60);
  guint32 application_id = be32 (header + 68);
  if (application_id != 0 && application_id != PLANNER_STORE_APPLICATION_ID)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: an SQLite database of another application (application_id 0x%08x), not "
                   "a plan store; the file was left as it is",
                   path, application_id);
      return FALSE;
    }
  if (user_version > PLANNER_STORE_SCHEMA_VERSION)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: written by a newer Shardscope (store schema version %u; this one reads "
                   "versions up to %d); the file was left as it is: open it with that version",
                   path, user_version, PLANNER_STORE_SCHEMA_VERSION);
      return FALSE;
    }
  return TRUE;
}

static gboolean
query_int (PlannerStore *self, const char *sql, gint64 *value, GError **error)
{
  sqlite3_stmt *s = NULL;
  gboolean ok;

  if (sqlite3_prepare_v2 (self->db, sql, -1, &s, NULL) != SQLITE_OK)
    return store_error (self, error, "reading the schema");
  int rc = sqlite3_step (s);
  ok = rc == SQLITE_ROW;
  if (ok)
    *value = sqlite3_column_int64 (s, 0);
  else
    store_error (self, error, "reading the schema");
  sqlite3_finalize (s);
  return ok;
}

/* What SQLite itself says, now that the file is open: the header may be older than the WAL. */
static gboolean
check_schema (PlannerStore *self, gint64 *version, GError **error)
{
  gint64 application_id = 0, n_tables = 0;
  sqlite3_stmt *s = NULL;

  /* One statement, one snapshot: another process creating the store commits its tables and
   * its version together. */
  if (sqlite3_prepare_v2 (self->db,
                          "SELECT (SELECT user_version FROM pragma_user_version), "
                          "(SELECT application_id FROM pragma_application_id), "
                          "(SELECT count(*) FROM sqlite_schema)",
                          -1, &s, NULL)
      != SQLITE_OK)
    return store_error (self, error, "reading the schema");
  if (sqlite3_step (s) != SQLITE_ROW)
    {
      store_error (self, error, "reading the schema");
      sqlite3_finalize (s);
      return FALSE;
    }
  *version = sqlite3_column_int64 (s, 0);
  application_id = sqlite3_column_int64 (s, 1);
  n_tables = sqlite3_column_int64 (s, 2);
  sqlite3_finalize (s);
  if (*version > PLANNER_STORE_SCHEMA_VERSION)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: written by a newer Shardscope (store schema version %" G_GINT64_FORMAT
                   "; this one reads versions up to %d); the file was left as it is",
                   self->path, *version, PLANNER_STORE_SCHEMA_VERSION);
      return FALSE;
    }
  if ((application_id != 0 && application_id != PLANNER_STORE_APPLICATION_ID)
      || (*version == 0 && n_tables > 0))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: an SQLite database of something else (%" G_GINT64_FORMAT
                   " schema objects, no store schema version), not a plan store; the file was "
                   "left as it is: pass another file with --db",
                   self->path, n_tables);
      return FALSE;
    }
  return TRUE;
}

static gboolean
migrate (PlannerStore *self, guint target, GError **error)
{
  gint64 version = 0;

  if (!query_int (self, "PRAGMA user_version", &version, error))
    return FALSE;
  if (version >= target)
    return TRUE;
  if (!begin (self, error))
    return FALSE;
  /* Another process may have migrated while we waited for the lock. */
  if (!query_int (self, "PRAGMA user_version", &version, error))
    {
      rollback (self);
      return FALSE;
    }
  for (guint v = (guint)version; v < target; v++)
    {
      g_autofree char *what
          = g_strdup_printf ("migrating the schema from version %u to %u", v, v + 1);
      if (!exec (self, migrations[v], what, error))
        {
          rollback (self);
          return FALSE;
        }
    }
  if (!commit (self, error))
    {
      rollback (self);
      return FALSE;
    }
  return TRUE;
}

/* Changing the journal mode takes an exclusive lock and does not wait in the busy handler, so
 * two processes creating the store at once retry here. */
static gboolean
set_wal (PlannerStore *self, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + BUSY_TIMEOUT_MS * (gint64)1000;

  for (;;)
    {
      sqlite3_stmt *s = NULL;
      int rc = sqlite3_prepare_v2 (self->db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
      if (rc == SQLITE_OK)
        rc = sqlite3_step (s);
      if (rc == SQLITE_ROW)
        {
          /* A file system without shared memory keeps the old mode; the store still works,
           * each save still one transaction. */
          if (g_ascii_strcasecmp ((const char *)sqlite3_column_text (s, 0), "wal") != 0)
            g_warning ("%s: cannot use WAL mode here; using the %s journal", self->path,
                       (const char *)sqlite3_column_text (s, 0));
          sqlite3_finalize (s);
          return TRUE;
        }
      sqlite3_finalize (s);
      if ((rc & 0xff) != SQLITE_BUSY || g_get_monotonic_time () > deadline)
        return store_error (self, error, "switching to WAL");
      g_usleep (5000);
    }
}

static void
close_db (PlannerStore *self)
{
  for (guint i = 0; i < N_STMTS; i++)
    g_clear_pointer (&self->stmts[i], sqlite3_finalize);
  g_clear_pointer (&self->db, sqlite3_close);
}

/* "file:PATH?immutable=1": SQLite reads the file as it is, with no lock, journal, -wal or -shm
 * file, so that a file can be judged, or read in a folder this user cannot write, without
 * leaving anything beside it. Only sound while no -wal file holds pages the file lacks. */
static int
open_immutable (const char *path, sqlite3 **db)
{
  g_autofree char *escaped = g_uri_escape_string (path, "/", FALSE);
  g_autofree char *uri = g_strconcat ("file:", escaped, "?immutable=1", NULL);

  return sqlite3_open_v2 (uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                          NULL);
}

/* Whether this user may change @path and create the journal files beside it. */
static gboolean
writable (const char *path)
{
  g_autofree char *dir = g_path_get_dirname (path);
  return g_access (path, W_OK) == 0 && g_access (dir, W_OK) == 0;
}

static PlannerStore *
open_store (const char *path, guint target, GError **error)
{
  g_autoptr (PlannerStore) self = NULL;
  g_autofree char *default_path = NULL;
  gboolean exists;
  gint64 version = 0;

  if (path == NULL)
    path = default_path = planner_store_default_path ();
  if (!check_file (path, &exists, error))
    return NULL;
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  gboolean hot_wal = g_file_test (wal, G_FILE_TEST_EXISTS);
  if (exists && !hot_wal)
    {
      /* Judge the file without SQLite writing anything: opening a WAL-mode file read-write
       * creates -wal and -shm files, and closing after a refusal would leave them. */
      self = g_object_new (PLANNER_TYPE_STORE, "path", path, NULL);
      if (open_immutable (path, &self->db) != SQLITE_OK)
        {
          store_error (self, error, "opening");
          close_db (self);
          return NULL;
        }
      if (!check_schema (self, &version, error))
        {
          close_db (self);
          return NULL;
        }
      if (!writable (path))
        {
          if (version < target)
            {
              g_set_error (
                  error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                  "%s: written by an older Shardscope (store schema version %" G_GINT64_FORMAT
                  ") and read-only here, so it cannot be brought to version %u; "
                  "open it once where it can be written",
                  path, version, target);
              close_db (self);
              return NULL;
            }
          self->read_only = TRUE;
          return g_steal_pointer (&self);
        }
      close_db (self);
      g_clear_object (&self);
    }
  if (!exists)
    {
      g_autofree char *dir = g_path_get_dirname (path);
      if (g_mkdir_with_parents (dir, 0700) != 0)
        {
          int saved = errno;
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                       "%s: cannot create the folder of the plan store: %s", path,
                       g_strerror (saved));
          return NULL;
        }
    }

  self = g_object_new (PLANNER_TYPE_STORE, "path", path, NULL);
  /* The store's own lock serializes every call, so SQLite's per-call mutex is not needed. With
   * a hot WAL in a folder this user cannot write, reading is all there is. */
  self->read_only = exists && !writable (path);
  if (sqlite3_open_v2 (
          path, &self->db,
          (self->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
              | SQLITE_OPEN_NOMUTEX,
          NULL)
      != SQLITE_OK)
    {
      store_error (self, error, "opening");
      close_db (self);
      return NULL;
    }
  sqlite3_extended_result_codes (self->db, 1);
  sqlite3_busy_timeout (self->db, BUSY_TIMEOUT_MS);
  if (!check_schema (self, &version, error))
    {
      /* Closing would checkpoint a hot WAL into the file we refuse. */
      sqlite3_db_config (self->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
      close_db (self);
      return NULL;
    }
  if (self->read_only)
    {
      if (version < target)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                       "%s: written by an older Shardscope (store schema version %" G_GINT64_FORMAT
                       ") and read-only here; open it once where it can be written",
                       path, version);
          close_db (self);
          return NULL;
        }
      return g_steal_pointer (&self);
    }
  /* Only now that the file is known to be ours (or new) does anything write to it. */
  if (!set_wal (self, error)
      || !exec (self, "PRAGMA synchronous = FULL", "setting synchronous", error)
      || !exec (self, "PRAGMA foreign_keys = ON", "enabling foreign keys", error)
      || !migrate (self, target, error))
    {
      close_db (self);
      return NULL;
    }
  return g_steal_pointer (&self);
}

char *
planner_store_default_path (void)
{
  const char *env = g_getenv ("SHARDSCOPE_DB");

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  return g_build_filename (g_get_user_data_dir (), "shardscope", "plans.db", NULL);
}

PlannerStore *
planner_store_open (const char *path, GError **error)
{
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);
  return open_store (path, PLANNER_STORE_SCHEMA_VERSION, error);
}

PlannerStore *
planner_store_open_at_version (const char *path, guint version, GError **error)
{
  g_return_val_if_fail (version >= 1 && version <= PLANNER_STORE_SCHEMA_VERSION, NULL);
  return open_store (path, version, error);
}

void
planner_store_close (PlannerStore *self)
{
  g_return_if_fail (PLANNER_IS_STORE (self));
  g_mutex_lock (&self->lock);
  close_db (self);
  g_mutex_unlock (&self->lock);
}

const char *
planner_store_get_path (PlannerStore *self)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  return self->path;
}

/* ---- GObject ---- */

static void
planner_store_finalize (GObject *object)
{
  PlannerStore *self = PLANNER_STORE (object);

  close_db (self);
  g_free (self->path);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (planner_store_parent_class)->finalize (object);
}

static void
planner_store_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  PlannerStore *self = PLANNER_STORE (object);

  switch (prop_id)
    {
    case PROP_PATH:
      g_value_set_string (value, self->path);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
planner_store_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  PlannerStore *self = PLANNER_STORE (object);

  switch (prop_id)
    {
    case PROP_PATH:
      g_free (self->path);
      self->path = g_value_dup_string (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
planner_store_class_init (PlannerStoreClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = planner_store_finalize;
  object_class->get_property = planner_store_get_property;
  object_class->set_property = planner_store_set_property;

  properties[PROP_PATH]
      = g_param_spec_string ("path", NULL, NULL, NULL,
                             G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  /* Emitted, in the thread that made the change, after a plan was saved, deleted or renamed
   * or a trial run was added: a plans list reloads. */
  signals[CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                   NULL, NULL, G_TYPE_NONE, 0);
}

static void
planner_store_init (PlannerStore *self)
{
  g_mutex_init (&self->lock);
}

/* ---- plan names ---- */

void
planner_store_emit_changed (PlannerStore *self)
{
  g_signal_emit (self, signals[CHANGED], 0);
}

/* The id of the row that @find finds with @key (and @key2), else 0. */
gboolean
planner_store_find_id (PlannerStore *self, PlannerStoreStmtId find, const char *key,
                       const char *key2, gint64 *id, GError **error)
{
  sqlite3_stmt *s = planner_store_stmt (self, find, error);
  int rc;

  *id = 0;
  if (s == NULL)
    return FALSE;
  planner_store_bind_text (s, 1, key);
  if (key2 != NULL)
    planner_store_bind_text (s, 2, key2);
  if ((rc = planner_store_next_row (self, s, "looking up a row", error)) < 0)
    return FALSE;
  if (rc > 0)
    *id = planner_store_col_int (s, 0);
  sqlite3_reset (s);
  return TRUE;
}

gboolean
planner_store_plan_name (PlannerStore *self, gint64 id, char **name, GError **error)
{
  sqlite3_stmt *s = planner_store_query (self, STMT_PLAN_NAME, id, error);
  int rc;

  *name = NULL;
  if (s == NULL)
    return FALSE;
  if ((rc = planner_store_next_row (self, s, "looking up a plan", error)) < 0)
    return FALSE;
  if (rc > 0)
    *name = g_strdup (planner_store_col_text (s, 0));
  sqlite3_reset (s);
  return TRUE;
}

gboolean
planner_store_no_such_plan (PlannerStore *self, gint64 id, GError **error)
{
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
               "%s: no plan with id %" G_GINT64_FORMAT "; 'shardscope-cli db list' shows the "
               "stored plans",
               self->path, id);
  return FALSE;
}

/* The name of plan @id, or NULL with @error set: no such plan, or SQLite's error. */
static char *
existing_plan_name (PlannerStore *self, gint64 id, GError **error)
{
  char *name;

  if (planner_store_plan_name (self, id, &name, error) && name == NULL)
    planner_store_no_such_plan (self, id, error);
  return name;
}

gboolean
planner_store_check_name (const char *name, GError **error)
{
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (name == NULL || !g_utf8_validate (name, -1, NULL))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "a plan name must be UTF-8 text (e.g. gpt2-megatron)");
      return FALSE;
    }
  gboolean blank = TRUE;
  for (const char *p = name; *p && blank; p = g_utf8_next_char (p))
    blank = g_unichar_isspace (g_utf8_get_char (p));
  if (blank)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "a stored plan needs a name that is not empty or only spaces (e.g. "
                   "gpt2-megatron)");
      return FALSE;
    }
  /* "db:" marks a stored plan on the command line ("db:NAME", "db:ID"): a name that starts
   * with it would read as another plan's reference. */
  if (g_str_has_prefix (name, "db:"))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "a plan name cannot start with \"db:\" (\"%s\"), which marks a stored plan "
                   "on the command line; use \"%s\"",
                   name, name + 3);
      return FALSE;
    }
  return TRUE;
}

gboolean
planner_store_check_new_name (PlannerStore *self, const char *name, GError **error)
{
  gint64 existing;

  if (!planner_store_check_name (name, error))
    {
      g_prefix_error (error, "%s: ", self->path);
      return FALSE;
    }
  if (!planner_store_find_id (self, STMT_FIND_PLAN_BY_NAME, name, NULL, &existing, error))
    return FALSE;
  if (existing != 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: a plan named \"%s\" already exists (id %" G_GINT64_FORMAT
                   "); choose another name, or delete or rename that one",
                   self->path, name, existing);
      return FALSE;
    }
  return TRUE;
}

/* NAME first, else ID; 0 with no error when neither names a plan. */
static gboolean
resolve (PlannerStore *self, const char *name_or_id, gint64 *id, GError **error)
{
  g_autofree char *name = NULL;
  guint64 number;

  if (!planner_store_find_id (self, STMT_FIND_PLAN_BY_NAME, name_or_id, NULL, id, error))
    return FALSE;
  if (*id != 0)
    return TRUE;
  if (g_ascii_string_to_unsigned (name_or_id, 10, 1, G_MAXINT64, &number, NULL))
    {
      if (!planner_store_plan_name (self, (gint64)number, &name, error))
        return FALSE;
      if (name != NULL)
        *id = (gint64)number;
    }
  return TRUE;
}

static gint64
lookup_locked (PlannerStore *self, const char *spec, GError **error)
{
  const char *name_or_id = g_str_has_prefix (spec, "db:") ? spec + 3 : spec;
  gint64 id, legacy = 0;

  if (!planner_store_check_open (self, error) || !resolve (self, name_or_id, &id, error))
    return 0;
  /* A store from before names were kept off "db:" may hold a plan named "db:1": never take
   * plan 1 for it, or it, silently. */
  if (name_or_id != spec
      && !planner_store_find_id (self, STMT_FIND_PLAN_BY_NAME, spec, NULL, &legacy, error))
    return 0;
  if (legacy != 0 && id != 0 && legacy != id)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: \"%s\" is ambiguous: the plan named \"%s\" (id %" G_GINT64_FORMAT
                   ") or \"%s\" (id %" G_GINT64_FORMAT "); give the id alone, and rename the "
                   "first (names may not start with \"db:\")",
                   self->path, spec, spec, legacy, name_or_id, id);
      return 0;
    }
  if (legacy != 0)
    return legacy;
  if (id != 0)
    return id;
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
               "%s: no plan named \"%s\"%s; 'shardscope-cli db list' shows the stored plans",
               self->path, name_or_id,
               g_ascii_string_to_unsigned (name_or_id, 10, 1, G_MAXINT64, NULL, NULL)
                   ? " and no plan with that id"
                   : "");
  return 0;
}

gint64
planner_store_lookup (PlannerStore *self, const char *name_or_id, GError **error)
{
  gint64 id;

  g_return_val_if_fail (PLANNER_IS_STORE (self), 0);
  g_return_val_if_fail (name_or_id != NULL, 0);
  g_return_val_if_fail (error == NULL || *error == NULL, 0);

  g_mutex_lock (&self->lock);
  id = lookup_locked (self, name_or_id, error);
  g_mutex_unlock (&self->lock);
  return id;
}

/* ---- listing ---- */

static PlannerStoreEntry *
read_entry (sqlite3_stmt *s)
{
  PlannerStoreEntry *e = g_new0 (PlannerStoreEntry, 1);

  e->id = planner_store_col_int (s, 0);
  e->name = g_strdup (planner_store_col_text (s, 1));
  e->model = g_strdup (planner_store_col_text (s, 2));
  e->model_source = g_strdup (planner_store_col_text (s, 3));
  e->mesh = g_strdup (planner_store_col_text (s, 4));
  e->hardware = g_strdup (planner_store_col_text (s, 5));
  e->policy = g_strdup (planner_store_col_text (s, 6));
  e->created = planner_store_col_int (s, 7);
  e->parent_id = planner_store_col_int (s, 8);
  e->parent_name = g_strdup (planner_store_col_text (s, 9));
  e->n_pins = (guint)planner_store_col_int (s, 10);
  e->n_trial_runs = (guint)planner_store_col_int (s, 11);
  planner_store_read_totals (s, ENTRY_TOTALS_COLUMN, &e->totals);
  return e;
}

/* The per-kind and per-axis totals of the entries (their rows are in other tables). */
static gboolean
fill_entry_totals (PlannerStore *self, PlannerStoreEntry *e, GError **error)
{
  /* A row edited to a NULL or unreadable mesh still lists (loading it is refused with the
   * reason); its totals are read for every axis the store can hold. */
  g_autoptr (PlannerMesh) mesh = e->mesh != NULL ? planner_mesh_parse (e->mesh, NULL) : NULL;

  return planner_store_load_totals (self, e->id, e->name, &e->totals,
                                    mesh != NULL ? mesh->n_axes : PLANNER_MAX_AXES, error);
}

static gpointer
read_plan_list (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  g_autoptr (GPtrArray) entries
      = g_ptr_array_new_with_free_func ((GDestroyNotify)planner_store_entry_free);
  sqlite3_stmt *s = planner_store_stmt (self, STMT_LIST_PLANS, error);
  int rc;

  if (s == NULL)
    return NULL;
  while ((rc = planner_store_next_row (self, s, "listing the plans", error)) > 0)
    g_ptr_array_add (entries, read_entry (s));
  sqlite3_reset (s);
  if (rc < 0)
    return NULL;
  for (guint i = 0; i < entries->len; i++)
    if (!fill_entry_totals (self, g_ptr_array_index (entries, i), error))
      return NULL;
  return g_steal_pointer (&entries);
}

GPtrArray *
planner_store_list_plans (PlannerStore *self, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return planner_store_read_snapshot (self, read_plan_list, 0, NULL, error);
}
static gpointer
read_plan_entry (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  g_autoptr (PlannerStoreEntry) entry = NULL;
  sqlite3_stmt *s = planner_store_query (self, STMT_GET_ENTRY, id, error);
  int rc;

  if (s == NULL || (rc = planner_store_next_row (self, s, "reading the plan", error)) < 0)
    return NULL;
  if (rc > 0)
    entry = read_entry (s);
  sqlite3_reset (s);
  if (entry == NULL)
    return planner_store_no_such_plan (self, id, error), NULL;
  return fill_entry_totals (self, entry, error) ? g_steal_pointer (&entry) : NULL;
}

PlannerStoreEntry *
planner_store_get_entry (PlannerStore *self, gint64 id, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return planner_store_read_snapshot (self, read_plan_entry, id, NULL, error);
}
static gpointer
read_plan_pins (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  g_autofree char *plan = existing_plan_name (self, id, error);

  return plan != NULL ? planner_store_pin_texts (self, id, error) : NULL;
}

GPtrArray *
planner_store_get_pins (PlannerStore *self, gint64 id, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return planner_store_read_snapshot (self, read_plan_pins, id, NULL, error);
}
/* ---- changing ---- */

static gint64
delete_plan (PlannerStore *self, gconstpointer data, GError **error)
{
  gint64 id = *(const gint64 *)data;
  g_autofree char *name = existing_plan_name (self, id, error);

  if (name == NULL)
    return FALSE;
  /* Foreign keys cascade to the plan's rows and trial runs, and unparent its children. */
  if (!planner_store_run_with (self, STMT_DELETE_PLAN, "deleting the plan", error,
                               VALUES (V_INT (id))))
    return FALSE;
  for (PlannerStoreStmtId gc = STMT_GC_MODELS; gc <= STMT_GC_HARDWARE; gc++)
    if (!planner_store_run_with (self, gc, "deleting unused rows", error, NULL, 0))
      return FALSE;
  return TRUE;
}
gboolean
planner_store_delete_plan (PlannerStore *self, gint64 id, GError **error)
{
  gboolean ok;

  g_return_val_if_fail (PLANNER_IS_STORE (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  ok = planner_store_change (self, delete_plan, &id, error) != 0;
  if (ok)
    g_signal_emit (self, signals[CHANGED], 0);
  return ok;
}

typedef struct
{
  gint64 id;
  const char *name;
} RenameArgs;

static gint64
rename_plan (PlannerStore *self, gconstpointer data, GError **error)
{
  const RenameArgs *args = data;
  g_autofree char *old = existing_plan_name (self, args->id, error);

  return old != NULL
         && (g_strcmp0 (old, args->name) == 0
             || planner_store_check_new_name (self, args->name, error))
         && planner_store_run_with (self, STMT_RENAME_PLAN, "renaming the plan", error,
                                    VALUES (V_INT (args->id), V_TEXT (args->name)));
}
gboolean
planner_store_rename_plan (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  gboolean ok;

  g_return_val_if_fail (PLANNER_IS_STORE (self), FALSE);
  g_return_val_if_fail (name != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  ok = planner_store_change (self, rename_plan, &(RenameArgs){ id, name }, error) != 0;
  if (ok)
    g_signal_emit (self, signals[CHANGED], 0);
  return ok;
}

/* ---- trial runs ---- */

typedef struct
{
  gint64 plan_id;
  const char *backend;
  guint devices;
  double max_abs_error, max_rel_error;
  const PlannerTrialMeasurement *measurements;
  guint n_measurements;
} RunArgs;

static gint64
add_run (PlannerStore *self, gconstpointer data, GError **error)
{
  const RunArgs *args = data;
  g_autofree char *name = existing_plan_name (self, args->plan_id, error);
  gint64 run_id;

  if (name == NULL
      || !planner_store_insert_row (self, STMT_INSERT_RUN, "saving the trial run", &run_id, error,
                                    VALUES (V_INT (args->plan_id), V_TEXT (args->backend),
                                            V_INT (args->devices), V_INT (g_get_real_time ()),
                                            V_DOUBLE (args->max_abs_error),
                                            V_DOUBLE (args->max_rel_error))))
    return 0;
  for (guint i = 0; i < args->n_measurements; i++)
    {
      const PlannerTrialMeasurement *m = &args->measurements[i];
      if (!planner_store_run_with (self, STMT_INSERT_MEASUREMENT, "saving a measurement", error,
                                   VALUES (V_INT (run_id), V_INT (i),
                                           V_TEXT (planner_measurement_kind_to_string (m->kind)),
                                           V_TEXT (m->name), V_DOUBLE (m->estimated_us),
                                           V_DOUBLE (m->measured_us))))
        return 0;
    }
  return run_id;
}
gint64
planner_store_add_trial_run (PlannerStore *self, gint64 plan_id, const char *backend, guint devices,
                             double max_abs_error, double max_rel_error,
                             const PlannerTrialMeasurement *measurements, guint n_measurements,
                             GError **error)
{
  gint64 id;

  g_return_val_if_fail (PLANNER_IS_STORE (self), 0);
  g_return_val_if_fail (backend != NULL, 0);
  g_return_val_if_fail (measurements != NULL || n_measurements == 0, 0);
  g_return_val_if_fail (error == NULL || *error == NULL, 0);
  for (guint i = 0; i < n_measurements; i++)
    g_return_val_if_fail (measurements[i].name != NULL
                              && measurements[i].kind <= PLANNER_MEASUREMENT_REDISTRIBUTION,
                          0);

  id = planner_store_change (self, add_run,
                             &(RunArgs){ plan_id, backend, devices, max_abs_error, max_rel_error,
                                         measurements, n_measurements },
                             error);
  if (id != 0)
    g_signal_emit (self, signals[CHANGED], 0);
  return id;
}

static gboolean
load_measurements (PlannerStore *self, PlannerTrialRun *run, GError **error)
{
  sqlite3_stmt *s = planner_store_query (self, STMT_SELECT_MEASUREMENTS, run->id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the measurements", error)) > 0)
    {
      PlannerTrialMeasurement m;
      if (!planner_measurement_kind_from_string (planner_store_col_str (s, 0), &m.kind))
        {
          sqlite3_reset (s);
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                       "%s: trial run %" G_GINT64_FORMAT " has a measurement of unknown kind",
                       self->path, run->id);
          return FALSE;
        }
      m.name = g_string_chunk_insert (run->names, planner_store_col_str (s, 1));
      m.estimated_us = planner_store_col_double (s, 2);
      m.measured_us = planner_store_col_double (s, 3);
      g_array_append_val (run->measurements, m);
    }
  return rc == 0;
}

static gpointer
read_trial_runs (PlannerStore *self, gint64 plan_id, const char *name, GError **error)
{
  g_autoptr (GPtrArray) runs
      = g_ptr_array_new_with_free_func ((GDestroyNotify)planner_trial_run_free);
  g_autofree char *plan = existing_plan_name (self, plan_id, error);
  sqlite3_stmt *s;
  int rc;

  if (plan == NULL || (s = planner_store_query (self, STMT_SELECT_RUNS, plan_id, error)) == NULL)
    return NULL;
  while ((rc = planner_store_next_row (self, s, "reading the trial runs", error)) > 0)
    {
      PlannerTrialRun *r = g_new0 (PlannerTrialRun, 1);
      r->id = planner_store_col_int (s, 0);
      r->plan_id = plan_id;
      r->backend = g_strdup (planner_store_col_str (s, 1));
      r->devices = (guint)planner_store_col_int (s, 2);
      r->created = planner_store_col_int (s, 3);
      r->max_abs_error = planner_store_col_double (s, 4);
      r->max_rel_error = planner_store_col_double (s, 5);
      r->measurements = g_array_new (FALSE, TRUE, sizeof (PlannerTrialMeasurement));
      r->names = g_string_chunk_new (256);
      g_ptr_array_add (runs, r);
    }
  sqlite3_reset (s);
  if (rc < 0)
    return NULL;
  for (guint i = 0; i < runs->len; i++)
    if (!load_measurements (self, g_ptr_array_index (runs, i), error))
      return NULL;
  return g_steal_pointer (&runs);
}

GPtrArray *
planner_store_list_trial_runs (PlannerStore *self, gint64 plan_id, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return planner_store_read_snapshot (self, read_trial_runs, plan_id, NULL, error);
}