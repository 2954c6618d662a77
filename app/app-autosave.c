#define G_LOG_DOMAIN "app-autosave"
#include "config.h"

#include "app-autosave.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "planner-error.h"
#include "planner-plan-json.h"

typedef struct
{
  char *path;
  PlannerPlan *plan; /* NULL: remove */
  gint64 store_id;
} Job;

static GMutex lock;
static GCond idle;
static GThreadPool *pool;
static guint pending;
static GHashTable *claimed;

static void
job_free (Job *job)
{
  g_free (job->path);
  g_clear_object (&job->plan);
  g_free (job);
}

static void
run_job (gpointer data, gpointer user_data)
{
  Job *job = data;
  if (job->plan == NULL)
    g_unlink (job->path);
  else
    {
      g_autofree char *plan = planner_plan_to_json (job->plan);
      g_autofree char *text = g_strdup_printf (
          "{\"shardscope_autosave\": 1, \"store_id\": %" G_GINT64_FORMAT ", \"plan\": %s}\n",
          job->store_id, plan);
      g_autofree char *dir = g_path_get_dirname (job->path);
      g_autoptr (GError) error = NULL;
      if (g_mkdir_with_parents (dir, 0700) != 0
          || !g_file_set_contents_full (job->path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT,
                                        0600, &error))
        g_message ("autosave %s: %s", job->path, error ? error->message : g_strerror (errno));
    }
  job_free (job);
  g_mutex_lock (&lock);
  if (--pending == 0)
    g_cond_broadcast (&idle);
  g_mutex_unlock (&lock);
}

static void
push (const char *path, PlannerPlan *plan, gint64 store_id)
{
  g_mutex_lock (&lock);
  /* One thread: the jobs run in the order they were pushed. */
  if (pool == NULL)
    pool = g_thread_pool_new (run_job, NULL, 1, FALSE, NULL);
  pending++;
  g_mutex_unlock (&lock);
  Job *job = g_new0 (Job, 1);
  job->path = g_strdup (path);
  job->plan = plan ? g_object_ref (plan) : NULL;
  job->store_id = store_id;
  g_thread_pool_push (pool, job, NULL);
}

char *
app_autosave_path_for_store (const char *store_path)
{
  if (store_path && *store_path)
    return g_strconcat (store_path, ".autosave.json", NULL);
  return g_build_filename (g_get_user_data_dir (), "shardscope", "autosave.json", NULL);
}

void
app_autosave_write (const char *path, PlannerPlan *plan, gint64 store_id)
{
  g_return_if_fail (path != NULL);
  g_return_if_fail (PLANNER_IS_PLAN (plan));
  push (path, plan, store_id);
}

void
app_autosave_remove (const char *path)
{
  g_return_if_fail (path != NULL);
  push (path, NULL, 0);
}

void
app_autosave_flush (void)
{
  g_mutex_lock (&lock);
  while (pending > 0)
    g_cond_wait (&idle, &lock);
  g_mutex_unlock (&lock);
}

PlannerPlan *
app_autosave_read (const char *path, gint64 *store_id, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_file (parser, path, error))
    return NULL;
  JsonNode *root = json_parser_get_root (parser);
  JsonObject *o = JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  JsonNode *plan = o ? json_object_get_member (o, "plan") : NULL;
  if (o == NULL || json_object_get_int_member_with_default (o, "shardscope_autosave", 0) != 1
      || plan == NULL || !JSON_NODE_HOLDS_OBJECT (plan))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "%s is no Shardscope autosave (it needs \"shardscope_autosave\": 1 and a "
                   "\"plan\" object)",
                   path);
      return NULL;
    }
  if (store_id)
    *store_id = json_object_get_int_member_with_default (o, "store_id", 0);
  g_autofree char *text = json_to_string (plan, FALSE);
  return planner_plan_from_json (text, error);
}

void
app_autosave_claim (const char *path, gboolean claim)
{
  g_return_if_fail (path != NULL);
  if (claimed == NULL)
    claimed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (claim)
    g_hash_table_add (claimed, g_strdup (path));
  else
    g_hash_table_remove (claimed, path);
}

gboolean
app_autosave_is_claimed (const char *path)
{
  return claimed && path && g_hash_table_contains (claimed, path);
}
