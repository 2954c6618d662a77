/* planner-store.h: the plan store, one SQLite file (architecture.md, "Store").
 *
 * Models (source, config, graph hash), meshes, hardware profiles, plans and everything a plan
 * holds (pins, op strategies, tensor layouts, redistributions with their steps, the trace,
 * conflicts, totals), and trial runs with their measurements, in relational tables. A plan
 * saved and loaded again is equal to the original field for field (planner_plan_equal); its
 * graph is rebuilt from the model's source and checked against the stored hash.
 *
 * The file is in WAL mode with foreign keys on; every save is one transaction, so a process
 * killed in the middle leaves the old state. The schema is versioned by PRAGMA user_version
 * and migrated forward on open; a file that is not a store, is truncated or is newer than this
 * code is refused with PLANNER_ERROR_STORE and left untouched. Calls on one store are
 * serialized by a lock, so a worker thread may save while another thread lists.
 */
#pragma once

#include <glib-object.h>

#include "planner-plan.h"

G_BEGIN_DECLS

/* The schema this code writes; older files are migrated to it when opened. */
#define PLANNER_STORE_SCHEMA_VERSION 3

/* One row of a plan listing. */
typedef struct
{
  gint64 id;
  char *name;
  char *model;        /* the graph's name ("LlamaForCausalLM") */
  char *model_source; /* planner_graph_get_source() */
  char *mesh;         /* "dp=8,mp=8" */
  char *hardware;     /* the profile's name */
  char *policy;       /* NULL when none */
  gint64 created;     /* microseconds since the Unix epoch, UTC */
  gint64 parent_id;   /* 0: not derived from a stored plan */
  char *parent_name;  /* NULL when none or the parent was deleted */
  guint n_pins;
  guint n_trial_runs;
  PlannerPlanTotals totals;
} PlannerStoreEntry;

void planner_store_entry_free (PlannerStoreEntry *entry);

typedef enum
{
  PLANNER_MEASUREMENT_OP,
  PLANNER_MEASUREMENT_REDISTRIBUTION,
} PlannerMeasurementKind;

/* "op", "redistribution". */
const char *planner_measurement_kind_to_string (PlannerMeasurementKind kind);
gboolean planner_measurement_kind_from_string (const char *text, PlannerMeasurementKind *kind);

/* One measurement of a trial run: an op (named by the op) or a redistribution (named by
 * planner_store_redistribution_name()), its estimated and measured time in microseconds. */
typedef struct
{
  PlannerMeasurementKind kind;
  const char *name;
  double estimated_us;
  double measured_us;
} PlannerTrialMeasurement;

/* The name a redistribution's measurement carries: "TENSOR -> CONSUMER:SLOT", with
 * "(output)" as the consumer of a graph output's final reduction and "(out_strategy)" after a
 * producer-side conversion. */
char *planner_store_redistribution_name (PlannerPlan *plan, guint redistribution);

typedef struct
{
  gint64 id;
  gint64 plan_id;
  char *backend; /* "cpu", "cuda", "nccl" */
  guint devices;
  gint64 created;       /* microseconds since the Unix epoch, UTC */
  double max_abs_error; /* over every graph output, against the unsharded reference */
  double max_rel_error;
  GArray *measurements; /* PlannerTrialMeasurement; names owned by the run */
  GStringChunk *names;
} PlannerTrialRun;

void planner_trial_run_free (PlannerTrialRun *run);
/* The measurement of @kind named @name, or NULL. */
const PlannerTrialMeasurement *
planner_trial_run_find (const PlannerTrialRun *run, PlannerMeasurementKind kind, const char *name);

#define PLANNER_TYPE_STORE (planner_store_get_type ())
G_DECLARE_FINAL_TYPE (PlannerStore, planner_store, PLANNER, STORE, GObject)

/* $SHARDSCOPE_DB when set and not empty, else $XDG_DATA_HOME/shardscope/plans.db. */
char *planner_store_default_path (void);

/* Opens (creating it and its folder if missing) and migrates the store at @path, or the
 * default path when NULL. Refused, with the file left as it was: not SQLite, truncated, an
 * SQLite file of another application, a schema newer than PLANNER_STORE_SCHEMA_VERSION. */
PlannerStore *planner_store_open (const char *path, GError **error);
/* Closes the file; later calls fail with PLANNER_ERROR_STORE. Unref also closes. */
void planner_store_close (PlannerStore *self);
const char *planner_store_get_path (PlannerStore *self);

/* Whether @name can name a stored plan: UTF-8, not empty or only white space, not starting
 * with "db:". PLANNER_ERROR_STORE saying what would work, else TRUE. Saving and renaming check
 * it (and that the name is free); callers may check first, before opening a store. */
gboolean planner_store_check_name (const char *name, GError **error);

/* Saves @plan under @name (NULL: the plan's own name; the plan takes the name it is saved
 * under) with @parent_id the stored plan it was derived from (0: none). One transaction.
 * Returns the new id, or 0 with @error set (the name is taken, the parent does not exist, the
 * file is busy longer than the timeout or cannot be written). */
gint64 planner_store_save_plan (PlannerStore *self, PlannerPlan *plan, const char *name,
                                gint64 parent_id, GError **error);
/* Rebuilds the plan: its graph from the model's source (or the stored config when the source
 * no longer builds it), checked against the stored hash, then every field as saved. */
PlannerPlan *planner_store_load_plan (PlannerStore *self, gint64 id, GError **error);
PlannerPlan *planner_store_load_plan_by_name (PlannerStore *self, const char *name, GError **error);
/* A stored plan is named by "NAME", "ID", "db:NAME" or "db:ID": one "db:" in front is dropped,
 * then a plan of that name comes first, else the plan of that id. Names never start with
 * "db:" (planner_store_check_name()), so the prefix never hides part of a name; in a store
 * written before that rule, a spec that is a plan's whole name while the rest names another
 * plan is refused as ambiguous. Returns the id, or 0 with @error set. */
gint64 planner_store_lookup (PlannerStore *self, const char *name_or_id, GError **error);

/* Every plan, in the order they were saved (PlannerStoreEntry*). */
GPtrArray *planner_store_list_plans (PlannerStore *self, GError **error);
PlannerStoreEntry *planner_store_get_entry (PlannerStore *self, gint64 id, GError **error);
/* The pins of a stored plan, in order (char*). */
GPtrArray *planner_store_get_pins (PlannerStore *self, gint64 id, GError **error);
/* Deletes a plan with its trial runs; plans derived from it keep their rows and lose their
 * parent. Models, meshes and profiles no plan uses any more go too. */
gboolean planner_store_delete_plan (PlannerStore *self, gint64 id, GError **error);
gboolean planner_store_rename_plan (PlannerStore *self, gint64 id, const char *name,
                                    GError **error);

/* Records a trial run of stored plan @plan_id (dated now). Returns its id, or 0. */
gint64 planner_store_add_trial_run (PlannerStore *self, gint64 plan_id, const char *backend,
                                    guint devices, double max_abs_error, double max_rel_error,
                                    const PlannerTrialMeasurement *measurements,
                                    guint n_measurements, GError **error);
/* The trial runs of a plan, newest first (PlannerTrialRun*). */
GPtrArray *planner_store_list_trial_runs (PlannerStore *self, gint64 plan_id, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerStoreEntry, planner_store_entry_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerTrialRun, planner_trial_run_free)

G_END_DECLS
