/* planner-store-private.h: what the store's tests need beyond the public API, and what
 * planner-store.c and planner-store-plan.c share. */
#pragma once

#include <sqlite3.h>

#include "planner-store.h"

G_BEGIN_DECLS

/* The application_id a store file carries in its header. */
#define PLANNER_STORE_APPLICATION_ID 0x53685363 /* "ShSc" */

/* Opens @path migrating it only up to @version (1 <= @version <= current): how a test makes a
 * file of an older schema to migrate. Saving into an old schema is not supported. */
PlannerStore *planner_store_open_at_version (const char *path, guint version, GError **error);

/* ---- internal: shared by planner-store.c (the store) and planner-store-plan.c (a plan's rows)
 * ---- */

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
} PlannerStoreStmtId;

#define N_TOTALS_COLUMNS 14

struct _PlannerStore
{
  GObject parent_instance;

  GMutex lock;
  char *path;
  sqlite3 *db;
  sqlite3_stmt *stmts[N_STMTS];
  gboolean read_only; /* the file or its folder cannot be written: listing and loading only */
};

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
} PlannerStoreValue;

#define V_NULL ((PlannerStoreValue){ VALUE_NULL, { 0 } })
#define V_INT(v) ((PlannerStoreValue){ VALUE_INT, { .i = (gint64)(v) } })
#define V_DOUBLE(v) ((PlannerStoreValue){ VALUE_DOUBLE, { .d = (v) } })
#define V_TEXT(v) ((PlannerStoreValue){ VALUE_TEXT, { .t = (v) } })
/* The values and their count, as bind_values() and run_with() take them. */
#define VALUES(...)                                                                                \
  ((const PlannerStoreValue[]){ __VA_ARGS__ }),                                                    \
      G_N_ELEMENTS (((const PlannerStoreValue[]){ __VA_ARGS__ }))

/* Changes the store under its lock in one transaction, which a failure of @func (0) rolls
 * back; returns what @func returns (a new row's id, or TRUE). */
typedef gint64 (*PlannerStoreChangeFunc) (PlannerStore *self, gconstpointer data, GError **error);

/* Reads under the store's lock in one read transaction, so that every row comes from one
 * snapshot and a concurrent save or delete is seen whole or not at all. @func returns what it
 * read (plan @id, or the one named @name), or NULL with @error set. */
typedef gpointer (*PlannerStoreReadFunc) (PlannerStore *self, gint64 id, const char *name,
                                          GError **error);

gboolean planner_store_check_open (PlannerStore *self, GError **error);

/* The statement, reset and with its bindings cleared, ready to bind. */
sqlite3_stmt *planner_store_stmt (PlannerStore *self, PlannerStoreStmtId id, GError **error);

/* Every bound string outlives the step that reads it, and stmt() clears the bindings before
 * the next use, so SQLite need not copy them. */
void planner_store_bind_text (sqlite3_stmt *s, int i, const char *text);

void planner_store_bind_int (sqlite3_stmt *s, int i, gint64 value);

/* SQLite keeps a NaN as NULL; col_double turns it back. */
void planner_store_bind_double (sqlite3_stmt *s, int i, double value);

double planner_store_col_double (sqlite3_stmt *s, int i);

const char *planner_store_col_text (sqlite3_stmt *s, int i);
/* A text column the store always writes: "" where an edited or damaged row holds NULL, so
 * the reader refuses the value by its parser instead of meeting NULL. */
const char *planner_store_col_str (sqlite3_stmt *s, int i);

gint64 planner_store_col_int (sqlite3_stmt *s, int i);

/* Binds @values to ?FIRST, ?FIRST+1...; a null is left unbound (stmt() cleared them). */
void planner_store_bind_values (sqlite3_stmt *s, int first, const PlannerStoreValue *values,
                                guint n);

/* Runs a statement that returns no rows. */
gboolean planner_store_run (PlannerStore *self, sqlite3_stmt *s, const char *what, GError **error);

/* Steps a query: 1 a row came, 0 the end, -1 an error (@error set, @s reset). */
int planner_store_next_row (PlannerStore *self, sqlite3_stmt *s, const char *what, GError **error);

/* Runs statement @id, which returns no rows, with @values bound to ?1, ?2... */
gboolean planner_store_run_with (PlannerStore *self, PlannerStoreStmtId id, const char *what,
                                 GError **error, const PlannerStoreValue *values, guint n);

/* Runs INSERT @id with @values; *@row is the id of the row it added. */
gboolean planner_store_insert_row (PlannerStore *self, PlannerStoreStmtId id, const char *what,
                                   gint64 *row, GError **error, const PlannerStoreValue *values,
                                   guint n);

/* Query @id with @key bound to ?1, ready for next_row(). */
sqlite3_stmt *planner_store_query (PlannerStore *self, PlannerStoreStmtId id, gint64 key,
                                   GError **error);

gint64 planner_store_change (PlannerStore *self, PlannerStoreChangeFunc func, gconstpointer data,
                             GError **error);

gpointer planner_store_read_snapshot (PlannerStore *self, PlannerStoreReadFunc func, gint64 id,
                                      const char *name, GError **error);

/* The id of the row that @find finds with @key (and @key2), else 0. */
gboolean planner_store_find_id (PlannerStore *self, PlannerStoreStmtId find, const char *key,
                                const char *key2, gint64 *id, GError **error);

gboolean planner_store_plan_name (PlannerStore *self, gint64 id, char **name, GError **error);

gboolean planner_store_no_such_plan (PlannerStore *self, gint64 id, GError **error);

gboolean planner_store_check_new_name (PlannerStore *self, const char *name, GError **error);

/* Column @first onwards, in TOTALS_COLUMNS order (0-based columns). */
void planner_store_read_totals (sqlite3_stmt *s, int first, PlannerPlanTotals *t);

gboolean planner_store_load_totals (PlannerStore *self, gint64 id, const char *name,
                                    PlannerPlanTotals *t, guint n_axes, GError **error);

/* The pins of plan @id, in order. */
GPtrArray *planner_store_pin_texts (PlannerStore *self, gint64 id, GError **error);

/* Emits PlannerStore::changed. */
void planner_store_emit_changed (PlannerStore *self);

G_END_DECLS
