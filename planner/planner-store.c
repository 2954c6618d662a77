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
};

G_STATIC_ASSERT (G_N_ELEMENTS (migrations) == PLANNER_STORE_SCHEMA_VERSION);

/* ---- statements, prepared once per store ---- */

typedef enum
{
  STMT_BEGIN,
  STMT_COMMIT,
  STMT_ROLLBACK,
  STMT_FIND_MODEL,
  STMT_INSERT_MODEL,
  STMT_FIND_MESH,
  STMT_INSERT_MESH,
  STMT_FIND_HARDWARE,
  STMT_INSERT_HARDWARE,
  STMT_FIND_PLAN_BY_NAME,
  STMT_PLAN_NAME,
  STMT_INSERT_PLAN,
  STMT_INSERT_COLLECTIVE,
  STMT_INSERT_AXIS,
  STMT_INSERT_PIN,
  STMT_INSERT_OP,
  STMT_INSERT_TENSOR,
  STMT_INSERT_REDISTRIBUTION,
  STMT_INSERT_STEP,
  STMT_INSERT_TRACE,
  STMT_INSERT_CONFLICT,
  STMT_SELECT_PLAN,
  STMT_SELECT_COLLECTIVES,
  STMT_SELECT_AXES,
  STMT_SELECT_PINS,
  STMT_SELECT_OPS,
  STMT_SELECT_TENSORS,
  STMT_SELECT_REDISTRIBUTIONS,
  STMT_SELECT_STEPS,
  STMT_SELECT_TRACE,
  STMT_SELECT_CONFLICTS,
  STMT_LIST_PLANS,
  STMT_GET_ENTRY,
  STMT_DELETE_PLAN,
  STMT_GC_MODELS,
  STMT_GC_MESHES,
  STMT_GC_HARDWARE,
  STMT_RENAME_PLAN,
  STMT_INSERT_RUN,
  STMT_INSERT_MEASUREMENT,
  STMT_SELECT_RUNS,
  STMT_SELECT_MEASUREMENTS,
  N_STMTS
} StmtId;

#define TOTALS_COLUMNS                                                                             \
  "n_ops, n_pinned, n_propagated, n_defaulted, n_redistributions, comm_bytes, comm_time_s, "       \
  "compute_time_s, backward_comm_time_s, grad_sync_time_s, step_time_s, "                          \
  "param_bytes_per_device, activation_bytes_per_device, memory_per_device_bytes"
#define P_TOTALS_COLUMNS                                                                           \
  "p.n_ops, p.n_pinned, p.n_propagated, p.n_defaulted, p.n_redistributions, p.comm_bytes, "        \
  "p.comm_time_s, p.compute_time_s, p.backward_comm_time_s, p.grad_sync_time_s, "                  \
  "p.step_time_s, p.param_bytes_per_device, p.activation_bytes_per_device, "                       \
  "p.memory_per_device_bytes"
#define N_TOTALS_COLUMNS 14
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
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
    "?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
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
    "h.profile, " P_TOTALS_COLUMNS " FROM plans p JOIN models m ON m.id = p.model_id "
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

struct _PlannerStore
{
  GObject parent_instance;

  GMutex lock;
  char *path;
  sqlite3 *db;
  sqlite3_stmt *stmts[N_STMTS];
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

static gboolean
check_open (PlannerStore *self, GError **error)
{
  if (self->db != NULL)
    return TRUE;
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE, "%s: the store is closed", self->path);
  return FALSE;
}

/* The statement, reset and with its bindings cleared, ready to bind. */
static sqlite3_stmt *
stmt (PlannerStore *self, StmtId id, GError **error)
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
static void
bind_text (sqlite3_stmt *s, int i, const char *text)
{
  if (text == NULL)
    sqlite3_bind_null (s, i);
  else
    sqlite3_bind_text (s, i, text, -1, SQLITE_STATIC);
}

static void
bind_int (sqlite3_stmt *s, int i, gint64 value)
{
  sqlite3_bind_int64 (s, i, value);
}

/* SQLite keeps a NaN as NULL; col_double turns it back. */
static void
bind_double (sqlite3_stmt *s, int i, double value)
{
  if (isnan (value))
    sqlite3_bind_null (s, i);
  else
    sqlite3_bind_double (s, i, value);
}

static double
col_double (sqlite3_stmt *s, int i)
{
  if (sqlite3_column_type (s, i) == SQLITE_NULL)
    return NAN;
  return sqlite3_column_double (s, i);
}

static const char *
col_text (sqlite3_stmt *s, int i)
{
  return (const char *)sqlite3_column_text (s, i);
}

static gint64
col_int (sqlite3_stmt *s, int i)
{
  return sqlite3_column_int64 (s, i);
}

/* One value to bind, so that a statement's values are one list: VALUES (V_INT (id), ...). */
typedef struct
{
  enum
  {
    VALUE_NULL,
    VALUE_INT,
    VALUE_DOUBLE,
    VALUE_TEXT,
  } type;
  union
  {
    gint64 i;
    double d;
    const char *t;
  } u;
} Value;

#define V_NULL ((Value){ VALUE_NULL, { 0 } })
#define V_INT(v) ((Value){ VALUE_INT, { .i = (gint64)(v) } })
#define V_DOUBLE(v) ((Value){ VALUE_DOUBLE, { .d = (v) } })
#define V_TEXT(v) ((Value){ VALUE_TEXT, { .t = (v) } })
/* The values and their count, as bind_values() and run_with() take them. */
#define VALUES(...)                                                                                \
  ((const Value[]){ __VA_ARGS__ }), G_N_ELEMENTS (((const Value[]){ __VA_ARGS__ }))

/* Binds @values to ?FIRST, ?FIRST+1...; a null is left unbound (stmt() cleared them). */
static void
bind_values (sqlite3_stmt *s, int first, const Value *values, guint n)
{
  for (guint i = 0; i < n; i++)
    switch (values[i].type)
      {
      case VALUE_NULL:
        break;
      case VALUE_INT:
        bind_int (s, first + (int)i, values[i].u.i);
        break;
      case VALUE_DOUBLE:
        bind_double (s, first + (int)i, values[i].u.d);
        break;
      case VALUE_TEXT:
        bind_text (s, first + (int)i, values[i].u.t);
        break;
      default:
        g_assert_not_reached ();
      }
}

/* Runs a statement that returns no rows. */
static gboolean
run (PlannerStore *self, sqlite3_stmt *s, const char *what, GError **error)
{
  gboolean ok = sqlite3_step (s) == SQLITE_DONE;

  if (!ok)
    store_error (self, error, what);
  sqlite3_reset (s);
  return ok;
}

/* Steps a query: 1 a row came, 0 the end, -1 an error (@error set, @s reset). */
static int
next_row (PlannerStore *self, sqlite3_stmt *s, const char *what, GError **error)
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
static gboolean
run_with (PlannerStore *self, StmtId id, const char *what, GError **error, const Value *values,
          guint n)
{
  sqlite3_stmt *s = stmt (self, id, error);

  if (s == NULL)
    return FALSE;
  bind_values (s, 1, values, n);
  return run (self, s, what, error);
}

/* Runs INSERT @id with @values; *@row is the id of the row it added. */
static gboolean
insert_row (PlannerStore *self, StmtId id, const char *what, gint64 *row, GError **error,
            const Value *values, guint n)
{
  if (!run_with (self, id, what, error, values, n))
    return FALSE;
  *row = sqlite3_last_insert_rowid (self->db);
  return TRUE;
}

/* Query @id with @key bound to ?1, ready for next_row(). */
static sqlite3_stmt *
query (PlannerStore *self, StmtId id, gint64 key, GError **error)
{
  sqlite3_stmt *s = stmt (self, id, error);

  if (s != NULL)
    bind_int (s, 1, key);
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
  sqlite3_stmt *s = stmt (self, STMT_BEGIN, error);
  return s != NULL && run (self, s, "starting a transaction", error);
}

static gboolean
commit (PlannerStore *self, GError **error)
{
  sqlite3_stmt *s = stmt (self, STMT_COMMIT, error);
  return s != NULL && run (self, s, "committing", error);
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

/* Changes the store under its lock in one transaction, which a failure of @func (0) rolls
 * back; returns what @func returns (a new row's id, or TRUE). */
typedef gint64 (*ChangeFunc) (PlannerStore *self, gconstpointer data, GError **error);

static gint64
change (PlannerStore *self, ChangeFunc func, gconstpointer data, GError **error)
{
  gint64 result = 0;

  g_mutex_lock (&self->lock);
  if (check_open (self, error) && begin (self, error))
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

/* Reads under the store's lock in one read transaction, so that every row comes from one
 * snapshot and a concurrent save or delete is seen whole or not at all. @func returns what it
 * read (plan @id, or the one named @name), or NULL with @error set. */
typedef gpointer (*ReadFunc) (PlannerStore *self, gint64 id, const char *name, GError **error);

static gpointer
read_snapshot (PlannerStore *self, ReadFunc func, gint64 id, const char *name, GError **error)
{
  gpointer result = NULL;

  g_mutex_lock (&self->lock);
  if (check_open (self, error) && exec (self, "BEGIN", "starting a read", error))
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
  /* The store's own lock serializes every call, so SQLite's per-call mutex is not needed. */
  if (sqlite3_open_v2 (path, &self->db,
                       SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL)
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

/* ---- encoding: strategies as factor and axis indices, layouts as text ---- */

/* "0=0,3=1.2;p=2@1": factor 0 on axis 0, factor 3 on axes 1 then 2, partial over axis 1 arriving
 * on input 1; "" when replicated. Indices, not names, so decoding is exact and fast. */
static void
append_uint (GString *out, guint value)
{
  char digits[12];
  int n = 0;

  do
    digits[n++] = (char)('0' + value % 10);
  while ((value /= 10) > 0);
  while (n > 0)
    g_string_append_c (out, digits[--n]);
}

static void
strategy_encode (GString *out, const PlannerStrategy *s)
{
  g_string_truncate (out, 0);
  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    {
      if (s->n_axes[f] == 0)
        continue;
      if (out->len > 0)
        g_string_append_c (out, ',');
      append_uint (out, f);
      g_string_append_c (out, '=');
      for (guint i = 0; i < s->n_axes[f]; i++)
        {
          if (i > 0)
            g_string_append_c (out, '.');
          append_uint (out, s->axes[f][i]);
        }
    }
  if (s->partial != 0)
    {
      g_string_append (out, ";p=");
      append_uint (out, s->partial);
      g_string_append_c (out, '@');
      append_uint (out, s->partial_input);
    }
}

static gboolean
parse_uint (const char **p, guint limit, guint *value)
{
  char *end;
  guint64 v;

  if (!g_ascii_isdigit (**p))
    return FALSE;
  v = g_ascii_strtoull (*p, &end, 10);
  if (v >= limit)
    return FALSE;
  *value = (guint)v;
  *p = end;
  return TRUE;
}

static gboolean
strategy_decode (const char *text, const PlannerOpRule *rule, const PlannerMesh *mesh,
                 PlannerStrategy *s)
{
  const char *p = text;
  guint32 used = 0;

  planner_strategy_init (s);
  if (text == NULL)
    return FALSE;
  while (*p != '\0' && *p != ';')
    {
      guint f, a;
      if (p != text && *p++ != ',')
        return FALSE;
      if (!parse_uint (&p, rule->n_factors, &f) || *p++ != '=' || s->n_axes[f] != 0)
        return FALSE;
      for (;;)
        {
          if (!parse_uint (&p, mesh->n_axes, &a) || (used & (1u << a)))
            return FALSE;
          used |= 1u << a;
          s->axes[f][s->n_axes[f]++] = (guint8)a;
          if (*p != '.')
            break;
          p++;
        }
    }
  if (*p == ';')
    {
      guint mask, input;
      p++;
      if (*p++ != 'p' || *p++ != '=' || !parse_uint (&p, 1u << mesh->n_axes, &mask) || *p++ != '@'
          || !parse_uint (&p, PLANNER_MAX_OPERANDS, &input) || mask == 0)
        return FALSE;
      s->partial = mask;
      s->partial_input = (guint8)input;
    }
  return *p == '\0';
}

static gboolean
layout_decode (const char *text, const PlannerMesh *mesh, guint rank, PlannerLayout *layout)
{
  return text != NULL && planner_layout_parse (text, mesh, layout, NULL) && layout->rank == rank;
}

/* ---- graph hashes, kept on the graph ----
 *
 * Hashing the 80-layer LLaMA graph takes a third of a save. A graph is complete before a plan
 * is made on it (the plan's arrays are sized by it), so its hash is kept on it, with its op
 * and tensor counts as a guard, and saving a second plan of one model does not hash again. */

typedef struct
{
  guint n_ops;
  guint n_tensors;
  char hash[];
} GraphHash;

static GQuark
graph_hash_quark (void)
{
  static gsize quark;

  if (g_once_init_enter (&quark))
    g_once_init_leave (&quark, g_quark_from_static_string ("planner-store-graph-hash"));
  return (GQuark)quark;
}

static gpointer
dup_graph_hash (gpointer data, gpointer user_data)
{
  const GraphHash *cached = data;
  PlannerGraph *graph = user_data;

  if (cached == NULL || cached->n_ops != planner_graph_get_n_ops (graph)
      || cached->n_tensors != planner_graph_get_n_tensors (graph))
    return NULL;
  return g_strdup (cached->hash);
}

static void
keep_graph_hash (PlannerGraph *graph, const char *hash)
{
  gsize length = strlen (hash) + 1;
  GraphHash *cached = g_malloc (sizeof (GraphHash) + length);

  cached->n_ops = planner_graph_get_n_ops (graph);
  cached->n_tensors = planner_graph_get_n_tensors (graph);
  memcpy (cached->hash, hash, length);
  g_object_set_qdata_full (G_OBJECT (graph), graph_hash_quark (), cached, g_free);
}

static char *
graph_hash (PlannerGraph *graph)
{
  char *hash = g_object_dup_qdata (G_OBJECT (graph), graph_hash_quark (), dup_graph_hash, graph);

  if (hash == NULL)
    {
      hash = planner_graph_hash (graph);
      keep_graph_hash (graph, hash);
    }
  return hash;
}

/* ---- saving ---- */

/* The file a source names (graph JSON or config.json), to keep beside it: a plan then still
 * loads when the file has moved or changed. NULL for zoo names and text sources. */
static char *
source_config (const char *source)
{
  g_autofree char *base = NULL;
  const char *question = strrchr (source, '?');
  char *text = NULL;

  if (g_file_test (source, G_FILE_TEST_IS_REGULAR))
    base = g_strdup (source);
  else if (question != NULL)
    base = g_strndup (source, question - source);
  else
    return NULL;
  if (!g_path_is_absolute (base) || !g_file_get_contents (base, &text, NULL, NULL))
    return NULL;
  return text;
}

/* The id of the row that @find finds with @key (and @key2), else 0. */
static gboolean
find_id (PlannerStore *self, StmtId find, const char *key, const char *key2, gint64 *id,
         GError **error)
{
  sqlite3_stmt *s = stmt (self, find, error);
  int rc;

  *id = 0;
  if (s == NULL)
    return FALSE;
  bind_text (s, 1, key);
  if (key2 != NULL)
    bind_text (s, 2, key2);
  if ((rc = next_row (self, s, "looking up a row", error)) < 0)
    return FALSE;
  if (rc > 0)
    *id = col_int (s, 0);
  sqlite3_reset (s);
  return TRUE;
}

static gboolean
model_id (PlannerStore *self, PlannerGraph *graph, gint64 *id, GError **error)
{
  const char *source = planner_graph_get_source (graph);
  const char *name = planner_graph_get_name (graph);
  g_autofree char *hash = graph_hash (graph);
  g_autofree char *config = NULL;

  if (source == NULL || *source == '\0')
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: the plan's graph %s has no source to rebuild it from; load the model "
                   "with planner_model_load() or save its graph JSON and load that",
                   self->path, name != NULL ? name : "(unnamed)");
      return FALSE;
    }
  if (!find_id (self, STMT_FIND_MODEL, source, hash, id, error))
    return FALSE;
  if (*id != 0)
    return TRUE;
  config = source_config (source);
  return insert_row (self, STMT_INSERT_MODEL, "saving the model", id, error,
                     VALUES (V_TEXT (name != NULL ? name : ""), V_TEXT (source), V_TEXT (config),
                             V_TEXT (hash), V_INT (planner_graph_get_n_ops (graph)),
                             V_INT (planner_graph_get_n_tensors (graph))));
}

static gboolean
mesh_id (PlannerStore *self, const PlannerMesh *mesh, gint64 *id, GError **error)
{
  g_autofree char *spec = planner_mesh_to_string (mesh);

  return find_id (self, STMT_FIND_MESH, spec, NULL, id, error)
         && (*id != 0
             || insert_row (self, STMT_INSERT_MESH, "saving the mesh", id, error,
                            VALUES (V_TEXT (spec), V_INT (planner_mesh_n_devices (mesh)))));
}

static gboolean
hardware_id (PlannerStore *self, const PlannerHardware *hw, gint64 *id, GError **error)
{
  g_autofree char *profile = planner_hardware_to_json (hw);

  return find_id (self, STMT_FIND_HARDWARE, profile, NULL, id, error)
         && (*id != 0
             || insert_row (self, STMT_INSERT_HARDWARE, "saving the hardware profile", id, error,
                            VALUES (V_TEXT (planner_hardware_get_name (hw)), V_TEXT (profile))));
}

/* The figures of planner_total_fields, to ?FIRST onwards in TOTALS_COLUMNS order. */
static void
bind_totals (sqlite3_stmt *s, int first, const PlannerPlanTotals *t)
{
  for (guint i = 0; i < PLANNER_N_TOTAL_FIELDS; i++)
    {
      const PlannerTotalField *f = &planner_total_fields[i];
      if (f->kind == PLANNER_TOTAL_COUNT)
        bind_int (s, first + (int)i, PLANNER_TOTAL (t, f, const guint));
      else if (f->kind == PLANNER_TOTAL_BYTES)
        bind_int (s, first + (int)i, (gint64)PLANNER_TOTAL (t, f, const guint64));
      else
        bind_double (s, first + (int)i, PLANNER_TOTAL (t, f, const double));
    }
}

/* Column @first onwards, in TOTALS_COLUMNS order (0-based columns). */
static void
read_totals (sqlite3_stmt *s, int first, PlannerPlanTotals *t)
{
  for (guint i = 0; i < PLANNER_N_TOTAL_FIELDS; i++)
    {
      const PlannerTotalField *f = &planner_total_fields[i];
      if (f->kind == PLANNER_TOTAL_COUNT)
        PLANNER_TOTAL (t, f, guint) = (guint)col_int (s, first + (int)i);
      else if (f->kind == PLANNER_TOTAL_BYTES)
        PLANNER_TOTAL (t, f, guint64) = (guint64)col_int (s, first + (int)i);
      else
        PLANNER_TOTAL (t, f, double) = col_double (s, first + (int)i);
    }
}

static gboolean
insert_plan_row (PlannerStore *self, PlannerPlan *plan, const char *name, gint64 model, gint64 mesh,
                 gint64 hw, gint64 parent_id, gint64 *plan_id, GError **error)
{
  const PlannerCostConstants *c = planner_plan_get_constants (plan);
  sqlite3_stmt *s = stmt (self, STMT_INSERT_PLAN, error);

  if (s == NULL)
    return FALSE;
  bind_values (s, 1,
               VALUES (V_TEXT (name), V_INT (model), V_INT (mesh), V_INT (hw),
                       parent_id > 0 ? V_INT (parent_id) : V_NULL, V_INT (g_get_real_time ()),
                       V_TEXT (planner_plan_get_policy (plan)),
                       V_DOUBLE (planner_plan_get_propagate_ms (plan)), V_DOUBLE (c->weight_copies),
                       V_DOUBLE (c->grad_copies), V_DOUBLE (c->optimizer_states),
                       V_DOUBLE (c->backward_factor)));
  bind_totals (s, 13, planner_plan_get_totals (plan));
  G_STATIC_ASSERT (12 + N_TOTALS_COLUMNS == 26);
  if (!run (self, s, "saving the plan", error))
    return FALSE;
  *plan_id = sqlite3_last_insert_rowid (self->db);
  return TRUE;
}

static gboolean
insert_totals_detail (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    if (!run_with (self, STMT_INSERT_COLLECTIVE, "saving the totals", error,
                   VALUES (V_INT (plan_id), V_TEXT (planner_step_kind_to_string (k)),
                           V_INT (t->coll_count[k]), V_INT (t->coll_bytes[k]),
                           V_DOUBLE (t->coll_time_s[k]))))
      return FALSE;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (!run_with (self, STMT_INSERT_AXIS, "saving the totals", error,
                   VALUES (V_INT (plan_id), V_INT (a), V_INT (t->axis_bytes[a]),
                           V_DOUBLE (t->axis_time_s[a]))))
      return FALSE;
  return TRUE;
}

static gboolean
insert_pins (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  const GPtrArray *pins = planner_plan_get_pins (plan);

  for (guint i = 0; i < pins->len; i++)
    if (!run_with (self, STMT_INSERT_PIN, "saving a pin", error,
                   VALUES (V_INT (plan_id), V_INT (i), V_TEXT (g_ptr_array_index (pins, i)))))
      return FALSE;
  return TRUE;
}

static char *
out_layouts_text (const PlannerOpPlan *p, const PlannerOp *op, const PlannerMesh *mesh)
{
  GString *out = g_string_new (NULL);

  for (guint k = 0; k < op->n_outputs; k++)
    {
      g_autofree char *text = planner_layout_to_string (&p->out_layouts[k], mesh);
      g_string_append_printf (out, "%s%s", k > 0 ? ";" : "", text);
    }
  return g_string_free (out, FALSE);
}

static gboolean
insert_ops (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autoptr (GString) code = g_string_new (NULL);

  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      const PlannerOpPlan *p = planner_plan_get_op (plan, i);
      g_autofree char *out = p->has_out_layouts ? out_layouts_text (p, op, mesh) : NULL;

      strategy_encode (code, &p->strategy);
      if (!run_with (self, STMT_INSERT_OP, "saving an op strategy", error,
                     VALUES (V_INT (plan_id), V_INT (i), V_TEXT (op->name), V_TEXT (code->str),
                             V_TEXT (planner_decision_to_string (p->decision)),
                             V_INT (p->trace_step), V_INT (p->pin), V_TEXT (out),
                             V_DOUBLE (p->compute_time_s), V_DOUBLE (p->flops))))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_tensors (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      g_autofree char *layout
          = planner_layout_to_string (planner_plan_get_tensor_layout (plan, t), mesh);

      if (!run_with (self, STMT_INSERT_TENSOR, "saving a tensor layout", error,
                     VALUES (V_INT (plan_id), V_INT (t),
                             V_TEXT (planner_graph_get_tensor (graph, t)->name), V_TEXT (layout))))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_steps (PlannerStore *self, const PlannerRedistribution *r, guint position,
              const PlannerMesh *mesh, gint64 plan_id, GError **error)
{
  for (guint i = 0; i < r->n_steps; i++)
    {
      const PlannerRedistStep *st = &r->steps[i];
      g_autofree char *before = planner_layout_to_string (&st->before, mesh);
      g_autofree char *after = planner_layout_to_string (&st->after, mesh);

      if (!run_with (self, STMT_INSERT_STEP, "saving a redistribution step", error,
                     VALUES (V_INT (plan_id), V_INT (position), V_INT (i),
                             V_TEXT (planner_step_kind_to_string (st->kind)), V_INT (st->axis),
                             V_INT (st->dim), V_INT (st->dim_to), V_TEXT (before), V_TEXT (after),
                             V_INT (st->n_in), V_INT (st->n_out), V_INT (st->bytes),
                             V_DOUBLE (st->time_s))))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_redistributions (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      PlannerRedistPath path = { TRUE, r->n_steps, r->steps, r->bytes, r->time_s };
      g_autofree char *from = planner_layout_to_string (&r->from, mesh);
      g_autofree char *to = planner_layout_to_string (&r->to, mesh);
      g_autofree char *steps = planner_redist_path_describe (&path, mesh);

      if (!run_with (self, STMT_INSERT_REDISTRIBUTION, "saving a redistribution", error,
                     VALUES (V_INT (plan_id), V_INT (i), V_INT (r->tensor),
                             V_TEXT (planner_graph_get_tensor (graph, r->tensor)->name),
                             V_INT (r->consumer), V_INT (r->slot), V_INT (r->producer_side ? 1 : 0),
                             V_TEXT (from), V_TEXT (to), V_INT (r->n_steps), V_TEXT (steps),
                             V_INT (r->bytes), V_DOUBLE (r->time_s)))
          || !insert_steps (self, r, i, mesh, plan_id, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_trace (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  g_autoptr (GString) code = g_string_new (NULL);
  g_autoptr (GString) runner_up = g_string_new (NULL);

  for (guint i = 0; i < planner_plan_get_n_trace_steps (plan); i++)
    {
      const PlannerTraceStep *t = planner_plan_get_trace_step (plan, i);

      strategy_encode (code, &t->strategy);
      if (t->has_runner_up)
        strategy_encode (runner_up, &t->runner_up);
      if (!run_with (self, STMT_INSERT_TRACE, "saving a trace step", error,
                     VALUES (V_INT (plan_id), V_INT (i), V_INT (t->index), V_INT (t->op),
                             V_TEXT (code->str), V_INT (t->from_op), V_INT (t->forward ? 1 : 0),
                             V_DOUBLE (t->edge_cost_s), V_INT (t->n_candidates),
                             t->has_runner_up ? V_TEXT (runner_up->str) : V_NULL,
                             t->has_runner_up ? V_DOUBLE (t->runner_up_cost_s) : V_NULL)))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_conflicts (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  for (guint i = 0; i < planner_plan_get_n_conflicts (plan); i++)
    {
      const PlannerConflict *c = planner_plan_get_conflict (plan, i);

      if (!run_with (
              self, STMT_INSERT_CONFLICT, "saving a conflict", error,
              VALUES (V_INT (plan_id), V_INT (i), V_INT (c->redistribution), V_TEXT (c->message))))
        return FALSE;
    }
  return TRUE;
}

static gboolean
plan_name (PlannerStore *self, gint64 id, char **name, GError **error)
{
  sqlite3_stmt *s = query (self, STMT_PLAN_NAME, id, error);
  int rc;

  *name = NULL;
  if (s == NULL)
    return FALSE;
  if ((rc = next_row (self, s, "looking up a plan", error)) < 0)
    return FALSE;
  if (rc > 0)
    *name = g_strdup (col_text (s, 0));
  sqlite3_reset (s);
  return TRUE;
}

static gboolean
no_such_plan (PlannerStore *self, gint64 id, GError **error)
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

  if (plan_name (self, id, &name, error) && name == NULL)
    no_such_plan (self, id, error);
  return name;
}

static gboolean
check_new_name (PlannerStore *self, const char *name, GError **error)
{
  gint64 existing;

  if (name == NULL || *name == '\0')
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: a stored plan needs a name that is not empty", self->path);
      return FALSE;
    }
  if (!g_utf8_validate (name, -1, NULL))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE, "%s: a plan name must be UTF-8 text",
                   self->path);
      return FALSE;
    }
  if (!find_id (self, STMT_FIND_PLAN_BY_NAME, name, NULL, &existing, error))
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

typedef struct
{
  PlannerPlan *plan;
  const char *name;
  gint64 parent_id;
} SaveArgs;

static gint64
save_plan (PlannerStore *self, gconstpointer data, GError **error)
{
  const SaveArgs *args = data;
  PlannerPlan *plan = args->plan;
  gint64 model = 0, mesh = 0, hw = 0, plan_id = 0;
  g_autofree char *parent_name = NULL;

  if (!check_new_name (self, args->name, error)
      || (args->parent_id > 0 && !plan_name (self, args->parent_id, &parent_name, error)))
    return 0;
  if (args->parent_id > 0 && parent_name == NULL)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: the parent plan (id %" G_GINT64_FORMAT ") of \"%s\" is not in the store",
                   self->path, args->parent_id, args->name);
      return 0;
    }
  if (!model_id (self, planner_plan_get_graph (plan), &model, error)
      || !mesh_id (self, planner_plan_get_mesh (plan), &mesh, error)
      || !hardware_id (self, planner_plan_get_hardware (plan), &hw, error)
      || !insert_plan_row (self, plan, args->name, model, mesh, hw, args->parent_id, &plan_id,
                           error)
      || !insert_totals_detail (self, plan, plan_id, error)
      || !insert_pins (self, plan, plan_id, error) || !insert_ops (self, plan, plan_id, error)
      || !insert_tensors (self, plan, plan_id, error)
      || !insert_redistributions (self, plan, plan_id, error)
      || !insert_trace (self, plan, plan_id, error)
      || !insert_conflicts (self, plan, plan_id, error))
    return 0;
  return plan_id;
}
gint64
planner_store_save_plan (PlannerStore *self, PlannerPlan *plan, const char *name, gint64 parent_id,
                         GError **error)
{
  gint64 id;

  g_return_val_if_fail (PLANNER_IS_STORE (self), 0);
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), 0);
  g_return_val_if_fail (parent_id >= 0, 0);
  g_return_val_if_fail (error == NULL || *error == NULL, 0);

  if (name == NULL)
    name = planner_plan_get_name (plan);
  id = change (self, save_plan, &(SaveArgs){ plan, name, parent_id }, error);
  if (id == 0)
    return 0;
  if (g_strcmp0 (planner_plan_get_name (plan), name) != 0)
    planner_plan_set_name (plan, name);
  g_signal_emit (self, signals[CHANGED], 0);
  return id;
}

/* ---- loading ---- */

static gboolean
damaged (PlannerStore *self, const char *plan, const char *what, GError **error)
{
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
               "%s: plan \"%s\" is damaged: %s; delete it and save it again", self->path, plan,
               what);
  return FALSE;
}

/* A row of plan @plan that does not decode: the load stops there, so @s is reset. */
static gboolean
damaged_row (PlannerStore *self, sqlite3_stmt *s, const char *plan, const char *what,
             GError **error)
{
  sqlite3_reset (s);
  return damaged (self, plan, what, error);
}

/* A graph JSON or config.json kept with the model, rebuilt under the options of @source. */
static PlannerGraph *
graph_from_config (const char *source, const char *config, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  const char *question = strrchr (source, '?');
  g_autofree char *encoded = NULL;
  g_autofree char *text_source = NULL;

  if (!json_parser_load_from_data (parser, config, -1, error))
    return NULL;
  JsonNode *root = json_parser_get_root (parser);
  if (JSON_NODE_HOLDS_OBJECT (root)
      && json_object_has_member (json_node_get_object (root), "shardscope_graph"))
    return planner_graph_from_json (config, error);
  encoded = g_base64_encode ((const guchar *)config, strlen (config));
  text_source = g_strconcat (PLANNER_HF_TEXT_SOURCE_SCHEME, encoded,
                             question != NULL ? question : "", NULL);
  return planner_model_load_source (text_source, error);
}

static PlannerGraph *
rebuild_graph (PlannerStore *self, const char *plan, const char *source, const char *config,
               const char *hash, GError **error)
{
  g_autoptr (GError) source_error = NULL;
  g_autoptr (PlannerGraph) graph = planner_model_load_source (source, &source_error);
  g_autofree char *got = NULL;

  if (graph != NULL)
    {
      got = planner_graph_hash (graph);
      if (strcmp (got, hash) == 0)
        {
          keep_graph_hash (graph, hash);
          return g_steal_pointer (&graph);
        }
    }
  /* The file has moved or changed since the plan was saved: its text as it was then. */
  if (config != NULL)
    {
      g_autoptr (PlannerGraph) kept = graph_from_config (source, config, NULL);
      g_autofree char *kept_hash = kept != NULL ? planner_graph_hash (kept) : NULL;
      if (kept_hash != NULL && strcmp (kept_hash, hash) == 0)
        {
          planner_graph_set_source (kept, source);
          keep_graph_hash (kept, hash);
          return g_steal_pointer (&kept);
        }
    }
  if (graph == NULL)
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                 "%s: plan \"%s\": its model %s no longer loads: %s", self->path, plan, source,
                 source_error->message);
  else
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                 "%s: plan \"%s\": its model %s now builds a different graph (hash %.12s, the "
                 "plan was made for %.12s); restore the model file or plan it again",
                 self->path, plan, source, got, hash);
  return NULL;
}

static gboolean
load_totals (PlannerStore *self, gint64 id, const char *name, PlannerPlanTotals *t, guint n_axes,
             GError **error)
{
  sqlite3_stmt *s;
  int rc;

  if ((s = query (self, STMT_SELECT_COLLECTIVES, id, error)) == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the totals", error)) > 0)
    {
      PlannerStepKind kind;
      if (!planner_step_kind_from_string (col_text (s, 0), &kind))
        return damaged_row (self, s, name, "a collective total has an unknown kind", error);
      t->coll_count[kind] = (guint)col_int (s, 1);
      t->coll_bytes[kind] = (guint64)col_int (s, 2);
      t->coll_time_s[kind] = col_double (s, 3);
    }
  if (rc < 0)
    return FALSE;

  if ((s = query (self, STMT_SELECT_AXES, id, error)) == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the totals", error)) > 0)
    {
      gint64 axis = col_int (s, 0);
      if (axis < 0 || axis >= n_axes)
        return damaged_row (self, s, name, "an axis total names no axis of the mesh", error);
      t->axis_bytes[axis] = (guint64)col_int (s, 1);
      t->axis_time_s[axis] = col_double (s, 2);
    }
  return rc == 0;
}

/* The pins of plan @id, in order. */
static GPtrArray *
pin_texts (PlannerStore *self, gint64 id, GError **error)
{
  g_autoptr (GPtrArray) pins = g_ptr_array_new_with_free_func (g_free);
  sqlite3_stmt *s = query (self, STMT_SELECT_PINS, id, error);
  int rc;

  if (s == NULL)
    return NULL;
  while ((rc = next_row (self, s, "reading the pins", error)) > 0)
    g_ptr_array_add (pins, g_strdup (col_text (s, 0)));
  sqlite3_reset (s);
  return rc == 0 ? g_steal_pointer (&pins) : NULL;
}

static gboolean
load_pins (PlannerStore *self, gint64 id, PlannerPlan *plan, GError **error)
{
  g_autoptr (GPtrArray) pins = pin_texts (self, id, error);

  if (pins == NULL)
    return FALSE;
  for (guint i = 0; i < pins->len; i++)
    planner_plan_add_pin_text (plan, g_ptr_array_index (pins, i));
  return TRUE;
}
static gboolean
load_out_layouts (const char *text, const PlannerOp *op, PlannerGraph *graph,
                  const PlannerMesh *mesh, PlannerOpPlan *p)
{
  g_auto (GStrv) parts = g_strsplit (text, ";", -1);

  if (g_strv_length (parts) != op->n_outputs)
    return FALSE;
  for (guint k = 0; k < op->n_outputs; k++)
    if (!layout_decode (parts[k], mesh, planner_graph_get_tensor (graph, op->outputs[k])->rank,
                        &p->out_layouts[k]))
      return FALSE;
  p->has_out_layouts = TRUE;
  return TRUE;
}

static gboolean
load_ops (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_ops = planner_graph_get_n_ops (graph), count = 0;
  sqlite3_stmt *s = query (self, STMT_SELECT_OPS, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the op strategies", error)) > 0)
    {
      gint64 index = col_int (s, 0);
      const char *out = col_text (s, 6);
      const PlannerOp *op;
      PlannerOpPlan *p;

      if (index != count || index >= n_ops
          || g_strcmp0 (col_text (s, 1), (op = planner_graph_get_op (graph, index))->name) != 0)
        return damaged_row (self, s, name, "its op strategies do not match the model's ops", error);
      p = planner_plan_get_op (plan, index);
      if (!strategy_decode (col_text (s, 2), &op->rule, mesh, &p->strategy)
          || !planner_decision_from_string (col_text (s, 3), &p->decision)
          || (out != NULL && !load_out_layouts (out, op, graph, mesh, p)))
        {
          g_autofree char *what
              = g_strdup_printf ("the strategy of op %s does not decode", op->name);
          return damaged_row (self, s, name, what, error);
        }
      p->trace_step = (int)col_int (s, 4);
      p->pin = (int)col_int (s, 5);
      p->compute_time_s = col_double (s, 7);
      p->flops = col_double (s, 8);
      count++;
    }
  if (rc < 0)
    return FALSE;
  if (count != n_ops)
    return damaged (self, name, "some op strategies are missing", error);
  return TRUE;
}

static gboolean
load_tensors (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_tensors = planner_graph_get_n_tensors (graph), count = 0;
  sqlite3_stmt *s = query (self, STMT_SELECT_TENSORS, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the tensor layouts", error)) > 0)
    {
      gint64 index = col_int (s, 0);
      PlannerLayout layout;

      if (index != count || index >= n_tensors
          || !layout_decode (col_text (s, 1), mesh, planner_graph_get_tensor (graph, index)->rank,
                             &layout))
        return damaged_row (self, s, name, "a tensor layout does not decode", error);
      planner_plan_set_tensor_layout (plan, index, &layout);
      count++;
    }
  if (rc < 0)
    return FALSE;
  if (count != n_tensors)
    return damaged (self, name, "some tensor layouts are missing", error);
  return TRUE;
}

/* Every redistribution with its steps; @steps holds them until the plan copies them. */
static gboolean
load_redistributions (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan,
                      GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_ops = planner_graph_get_n_ops (graph), n_tensors = planner_graph_get_n_tensors (graph);
  g_autoptr (GArray) redistributions = g_array_new (FALSE, TRUE, sizeof (PlannerRedistribution));
  g_autoptr (GArray) steps = g_array_new (FALSE, TRUE, sizeof (PlannerRedistStep));
  g_autoptr (GArray) first_step = g_array_new (FALSE, TRUE, sizeof (guint));
  sqlite3_stmt *s;
  int rc;

  if ((s = query (self, STMT_SELECT_REDISTRIBUTIONS, id, error)) == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the redistributions", error)) > 0)
    {
      PlannerRedistribution r = { 0 };
      gint64 tensor = col_int (s, 1), consumer = col_int (s, 2);

      if (col_int (s, 0) != redistributions->len || tensor < 0 || tensor >= n_tensors
          || consumer < -1 || consumer >= n_ops)
        return damaged_row (self, s, name, "a redistribution names no tensor or op of the model",
                            error);
      guint rank = planner_graph_get_tensor (graph, tensor)->rank;
      r.tensor = (guint)tensor;
      r.consumer = (int)consumer;
      r.slot = (guint)col_int (s, 3);
      r.producer_side = col_int (s, 4) != 0;
      r.n_steps = (guint)col_int (s, 7);
      r.bytes = (guint64)col_int (s, 8);
      r.time_s = col_double (s, 9);
      if (!layout_decode (col_text (s, 5), mesh, rank, &r.from)
          || !layout_decode (col_text (s, 6), mesh, rank, &r.to))
        return damaged_row (self, s, name, "a redistribution's layouts do not decode", error);
      g_array_append_val (redistributions, r);
    }
  if (rc < 0)
    return FALSE;

  if ((s = query (self, STMT_SELECT_STEPS, id, error)) == NULL)
    return FALSE;
  g_array_set_size (first_step, redistributions->len + 1);
  while ((rc = next_row (self, s, "reading the redistribution steps", error)) > 0)
    {
      gint64 owner = col_int (s, 0);
      PlannerRedistStep st = { 0 };
      gint64 axis = col_int (s, 3), dim = col_int (s, 4), dim_to = col_int (s, 5);
      const PlannerRedistribution *r;

      if (owner < 0 || owner >= redistributions->len)
        return damaged_row (self, s, name, "a redistribution step belongs to no redistribution",
                            error);
      r = &g_array_index (redistributions, PlannerRedistribution, owner);
      guint rank = planner_graph_get_tensor (graph, r->tensor)->rank;
      if (!planner_step_kind_from_string (col_text (s, 2), &st.kind) || axis < 0
          || axis >= mesh->n_axes || dim < -1 || dim >= (gint64)rank || dim_to < -1
          || dim_to >= (gint64)rank || !layout_decode (col_text (s, 6), mesh, rank, &st.before)
          || !layout_decode (col_text (s, 7), mesh, rank, &st.after))
        return damaged_row (self, s, name, "a redistribution step does not decode", error);
      st.axis = (guint8)axis;
      st.dim = (gint8)dim;
      st.dim_to = (gint8)dim_to;
      st.n_in = (guint64)col_int (s, 8);
      st.n_out = (guint64)col_int (s, 9);
      st.bytes = (guint64)col_int (s, 10);
      st.time_s = col_double (s, 11);
      g_array_append_val (steps, st);
      /* Rows come ordered by redistribution: count them per owner. */
      g_array_index (first_step, guint, owner + 1)++;
    }
  if (rc < 0)
    return FALSE;

  guint start = 0;
  for (guint i = 0; i < redistributions->len; i++)
    {
      PlannerRedistribution *r = &g_array_index (redistributions, PlannerRedistribution, i);
      guint n = g_array_index (first_step, guint, i + 1);
      if (n != r->n_steps)
        return damaged (self, name, "a redistribution has the wrong number of steps", error);
      r->steps = n > 0 ? &g_array_index (steps, PlannerRedistStep, start) : NULL;
      planner_plan_append_redistribution (plan, r);
      start += n;
    }
  return TRUE;
}

static gboolean
load_trace (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_ops = planner_graph_get_n_ops (graph), count = 0;
  sqlite3_stmt *s = query (self, STMT_SELECT_TRACE, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the trace", error)) > 0)
    {
      PlannerTraceStep t = { 0 };
      gint64 op = col_int (s, 2), from_op = col_int (s, 4);
      const char *runner_up = col_text (s, 8);

      if (col_int (s, 0) != count || op < 0 || op >= n_ops || from_op < -1 || from_op >= n_ops)
        return damaged_row (self, s, name, "a trace step names no op of the model", error);
      const PlannerOpRule *rule = &planner_graph_get_op (graph, op)->rule;
      t.index = (guint)col_int (s, 1);
      t.op = (guint)op;
      t.from_op = (int)from_op;
      t.forward = col_int (s, 5) != 0;
      t.edge_cost_s = col_double (s, 6);
      t.n_candidates = (guint)col_int (s, 7);
      t.has_runner_up = runner_up != NULL;
      if (!strategy_decode (col_text (s, 3), rule, mesh, &t.strategy)
          || (runner_up != NULL && !strategy_decode (runner_up, rule, mesh, &t.runner_up)))
        return damaged_row (self, s, name, "a trace step's strategy does not decode", error);
      if (t.has_runner_up)
        t.runner_up_cost_s = col_double (s, 9);
      planner_plan_append_trace_step (plan, &t);
      count++;
    }
  return rc == 0;
}

static gboolean
load_conflicts (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  sqlite3_stmt *s = query (self, STMT_SELECT_CONFLICTS, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the conflicts", error)) > 0)
    {
      gint64 redistribution = col_int (s, 1);
      if (redistribution < 0 || redistribution >= planner_plan_get_n_redistributions (plan))
        return damaged_row (self, s, name, "a conflict names no redistribution", error);
      planner_plan_append_conflict (plan, col_text (s, 2), (guint)redistribution);
    }
  return rc == 0;
}

/* Within one read transaction, so a concurrent save or delete is seen whole or not at all. */
static PlannerPlan *
load_locked (PlannerStore *self, gint64 id, GError **error)
{
  sqlite3_stmt *s;
  int rc;
  g_autofree char *name = NULL, *policy = NULL, *source = NULL, *config = NULL;
  g_autofree char *hash = NULL, *mesh_spec = NULL, *profile = NULL;
  PlannerCostConstants constants;
  PlannerPlanTotals totals = { 0 };
  double propagate_ms;
  g_autoptr (PlannerMesh) mesh = NULL;
  g_autoptr (PlannerHardware) hw = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autoptr (PlannerPlan) plan = NULL;
  g_autoptr (GError) local_error = NULL;

  if ((s = query (self, STMT_SELECT_PLAN, id, error)) == NULL)
    return NULL;
  if ((rc = next_row (self, s, "reading the plan", error)) < 0)
    return NULL;
  if (rc == 0)
    {
      no_such_plan (self, id, error);
      return NULL;
    }
  name = g_strdup (col_text (s, 0));
  policy = g_strdup (col_text (s, 1));
  propagate_ms = col_double (s, 2);
  constants.weight_copies = col_double (s, 3);
  constants.grad_copies = col_double (s, 4);
  constants.optimizer_states = col_double (s, 5);
  constants.backward_factor = col_double (s, 6);
  source = g_strdup (col_text (s, 7));
  config = g_strdup (col_text (s, 8));
  hash = g_strdup (col_text (s, 9));
  mesh_spec = g_strdup (col_text (s, 11));
  profile = g_strdup (col_text (s, 12));
  read_totals (s, 13, &totals);
  sqlite3_reset (s);

  if ((mesh = planner_mesh_parse (mesh_spec, &local_error)) == NULL
      || (hw = planner_hardware_from_json (profile, &local_error)) == NULL)
    {
      damaged (self, name, local_error->message, error);
      return NULL;
    }
  if (!load_totals (self, id, name, &totals, mesh->n_axes, error))
    return NULL;
  if ((graph = rebuild_graph (self, name, source, config, hash, error)) == NULL)
    return NULL;

  plan = planner_plan_new (graph, mesh, hw);
  planner_plan_set_name (plan, name);
  planner_plan_set_policy (plan, policy);
  planner_plan_set_propagate_ms (plan, propagate_ms);
  planner_plan_set_constants (plan, &constants);
  if (!load_pins (self, id, plan, error) || !load_ops (self, id, name, plan, error)
      || !load_tensors (self, id, name, plan, error)
      || !load_redistributions (self, id, name, plan, error)
      || !load_trace (self, id, name, plan, error) || !load_conflicts (self, id, name, plan, error))
    return NULL;
  planner_plan_set_totals (plan, &totals);
  return g_steal_pointer (&plan);
}

/* Plan @id, or the one named @name. */
static gpointer
read_plan (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  if (name != NULL && !find_id (self, STMT_FIND_PLAN_BY_NAME, name, NULL, &id, error))
    return NULL;
  if (name != NULL && id == 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: no plan named \"%s\"; 'shardscope-cli db list' shows the stored plans",
                   self->path, name);
      return NULL;
    }
  return load_locked (self, id, error);
}

PlannerPlan *
planner_store_load_plan (PlannerStore *self, gint64 id, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return read_snapshot (self, read_plan, id, NULL, error);
}

static gint64
lookup_locked (PlannerStore *self, const char *name_or_id, GError **error)
{
  g_autofree char *name = NULL;
  guint64 number;
  gint64 id;

  if (!check_open (self, error)
      || !find_id (self, STMT_FIND_PLAN_BY_NAME, name_or_id, NULL, &id, error))
    return 0;
  if (id != 0)
    return id;
  if (g_ascii_string_to_unsigned (name_or_id, 10, 1, G_MAXINT64, &number, NULL)
      && plan_name (self, (gint64)number, &name, NULL) && name != NULL)
    return (gint64)number;
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

PlannerPlan *
planner_store_load_plan_by_name (PlannerStore *self, const char *name, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return read_snapshot (self, read_plan, 0, name, error);
}
/* ---- listing ---- */

static PlannerStoreEntry *
read_entry (sqlite3_stmt *s)
{
  PlannerStoreEntry *e = g_new0 (PlannerStoreEntry, 1);

  e->id = col_int (s, 0);
  e->name = g_strdup (col_text (s, 1));
  e->model = g_strdup (col_text (s, 2));
  e->model_source = g_strdup (col_text (s, 3));
  e->mesh = g_strdup (col_text (s, 4));
  e->hardware = g_strdup (col_text (s, 5));
  e->policy = g_strdup (col_text (s, 6));
  e->created = col_int (s, 7);
  e->parent_id = col_int (s, 8);
  e->parent_name = g_strdup (col_text (s, 9));
  e->n_pins = (guint)col_int (s, 10);
  e->n_trial_runs = (guint)col_int (s, 11);
  read_totals (s, ENTRY_TOTALS_COLUMN, &e->totals);
  return e;
}

/* The per-kind and per-axis totals of the entries (their rows are in other tables). */
static gboolean
fill_entry_totals (PlannerStore *self, PlannerStoreEntry *e, GError **error)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (e->mesh, NULL);

  return load_totals (self, e->id, e->name, &e->totals,
                      mesh != NULL ? mesh->n_axes : PLANNER_MAX_AXES, error);
}

static gpointer
read_plan_list (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  g_autoptr (GPtrArray) entries
      = g_ptr_array_new_with_free_func ((GDestroyNotify)planner_store_entry_free);
  sqlite3_stmt *s = stmt (self, STMT_LIST_PLANS, error);
  int rc;

  if (s == NULL)
    return NULL;
  while ((rc = next_row (self, s, "listing the plans", error)) > 0)
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

  return read_snapshot (self, read_plan_list, 0, NULL, error);
}
static gpointer
read_plan_entry (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  g_autoptr (PlannerStoreEntry) entry = NULL;
  sqlite3_stmt *s = query (self, STMT_GET_ENTRY, id, error);
  int rc;

  if (s == NULL || (rc = next_row (self, s, "reading the plan", error)) < 0)
    return NULL;
  if (rc > 0)
    entry = read_entry (s);
  sqlite3_reset (s);
  if (entry == NULL)
    return no_such_plan (self, id, error), NULL;
  return fill_entry_totals (self, entry, error) ? g_steal_pointer (&entry) : NULL;
}

PlannerStoreEntry *
planner_store_get_entry (PlannerStore *self, gint64 id, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return read_snapshot (self, read_plan_entry, id, NULL, error);
}
static gpointer
read_plan_pins (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  g_autofree char *plan = existing_plan_name (self, id, error);

  return plan != NULL ? pin_texts (self, id, error) : NULL;
}

GPtrArray *
planner_store_get_pins (PlannerStore *self, gint64 id, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return read_snapshot (self, read_plan_pins, id, NULL, error);
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
  if (!run_with (self, STMT_DELETE_PLAN, "deleting the plan", error, VALUES (V_INT (id))))
    return FALSE;
  for (StmtId gc = STMT_GC_MODELS; gc <= STMT_GC_HARDWARE; gc++)
    if (!run_with (self, gc, "deleting unused rows", error, NULL, 0))
      return FALSE;
  return TRUE;
}
gboolean
planner_store_delete_plan (PlannerStore *self, gint64 id, GError **error)
{
  gboolean ok;

  g_return_val_if_fail (PLANNER_IS_STORE (self), FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  ok = change (self, delete_plan, &id, error) != 0;
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
         && (g_strcmp0 (old, args->name) == 0 || check_new_name (self, args->name, error))
         && run_with (self, STMT_RENAME_PLAN, "renaming the plan", error,
                      VALUES (V_INT (args->id), V_TEXT (args->name)));
}
gboolean
planner_store_rename_plan (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  gboolean ok;

  g_return_val_if_fail (PLANNER_IS_STORE (self), FALSE);
  g_return_val_if_fail (name != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  ok = change (self, rename_plan, &(RenameArgs){ id, name }, error) != 0;
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
      || !insert_row (self, STMT_INSERT_RUN, "saving the trial run", &run_id, error,
                      VALUES (V_INT (args->plan_id), V_TEXT (args->backend), V_INT (args->devices),
                              V_INT (g_get_real_time ()), V_DOUBLE (args->max_abs_error),
                              V_DOUBLE (args->max_rel_error))))
    return 0;
  for (guint i = 0; i < args->n_measurements; i++)
    {
      const PlannerTrialMeasurement *m = &args->measurements[i];
      if (!run_with (self, STMT_INSERT_MEASUREMENT, "saving a measurement", error,
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

  id = change (self, add_run,
               &(RunArgs){ plan_id, backend, devices, max_abs_error, max_rel_error, measurements,
                           n_measurements },
               error);
  if (id != 0)
    g_signal_emit (self, signals[CHANGED], 0);
  return id;
}

static gboolean
load_measurements (PlannerStore *self, PlannerTrialRun *run, GError **error)
{
  sqlite3_stmt *s = query (self, STMT_SELECT_MEASUREMENTS, run->id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = next_row (self, s, "reading the measurements", error)) > 0)
    {
      PlannerTrialMeasurement m;
      if (!planner_measurement_kind_from_string (col_text (s, 0), &m.kind))
        {
          sqlite3_reset (s);
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                       "%s: trial run %" G_GINT64_FORMAT " has a measurement of unknown kind",
                       self->path, run->id);
          return FALSE;
        }
      m.name = g_string_chunk_insert (run->names, col_text (s, 1));
      m.estimated_us = col_double (s, 2);
      m.measured_us = col_double (s, 3);
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

  if (plan == NULL || (s = query (self, STMT_SELECT_RUNS, plan_id, error)) == NULL)
    return NULL;
  while ((rc = next_row (self, s, "reading the trial runs", error)) > 0)
    {
      PlannerTrialRun *r = g_new0 (PlannerTrialRun, 1);
      r->id = col_int (s, 0);
      r->plan_id = plan_id;
      r->backend = g_strdup (col_text (s, 1));
      r->devices = (guint)col_int (s, 2);
      r->created = col_int (s, 3);
      r->max_abs_error = col_double (s, 4);
      r->max_rel_error = col_double (s, 5);
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

  return read_snapshot (self, read_trial_runs, plan_id, NULL, error);
}