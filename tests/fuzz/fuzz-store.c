/* fuzz-store.c: plan store files (SQLite), as --db and the app open them. The bytes become
 * the store file (with no WAL beside it); it is opened, its plans listed, and each plan's
 * entry, pins and trial runs read and the plan loaded, as `db list`, `db show` and --plan
 * db:NAME do. */
#include "fuzz-harness.h"

#include <glib/gstdio.h>

#include "planner-store.h"

static gboolean
read_store (const char *path, GError **error)
{
  g_autoptr (PlannerStore) store = planner_store_open (path, error);
  if (store == NULL)
    return FALSE;
  g_autoptr (GPtrArray) entries = planner_store_list_plans (store, error);
  if (entries == NULL)
    return FALSE;
  for (guint i = 0; i < entries->len; i++)
    {
      const PlannerStoreEntry *listed = g_ptr_array_index (entries, i);
      g_autoptr (PlannerStoreEntry) entry = planner_store_get_entry (store, listed->id, error);
      if (entry == NULL)
        return FALSE;
      g_autoptr (GPtrArray) pins = planner_store_get_pins (store, listed->id, error);
      if (pins == NULL)
        return FALSE;
      g_autoptr (GPtrArray) runs = planner_store_list_trial_runs (store, listed->id, error);
      if (runs == NULL)
        return FALSE;
      g_autoptr (PlannerPlan) plan = planner_store_load_plan (store, listed->id, error);
      if (plan == NULL)
        return FALSE;
    }
  return TRUE;
}

gboolean
fuzz_store (const guint8 *data, gsize size, GError **error)
{
  const char *path = fuzz_tmp_path ("store.db");
  g_autofree char *wal = g_strconcat (path, "-wal", NULL);
  g_autofree char *shm = g_strconcat (path, "-shm", NULL);
  fuzz_write_file (path, data, size);
  gboolean ok = read_store (path, error);
  /* The store is closed: nothing of this input is left for the next (or in the tmp dir). */
  g_unlink (path);
  g_unlink (wal);
  g_unlink (shm);
  return ok;
}

FUZZ_TARGET (fuzz_store)
