/* app-autosave.h: a copy of the open document's unsaved edits beside its plan store, so that
 * a session that did not end (a crash, a kill) offers them back (issue 15).
 *
 * The file is STORE.autosave.json: {"shardscope_autosave": 1, "store_id": N, "plan": PLAN},
 * PLAN being the plan file's object (planner-plan-json.h). Writes and removals go through one
 * worker thread in the order they were asked for, so the GTK thread never serializes a big
 * plan and a late write never brings back a removed file.
 */
#pragma once

#include "planner-plan.h"

G_BEGIN_DECLS

/* Where the autosave of documents of the store at @store_path lives (NULL: the default
 * store's folder). */
char *app_autosave_path_for_store (const char *store_path);

/* Queues a write of @plan (with the id of the stored plan it was edited from) to @path. */
void app_autosave_write (const char *path, PlannerPlan *plan, gint64 store_id);
/* Queues the removal of @path. */
void app_autosave_remove (const char *path);
/* Waits until every queued write and removal is done (tests, shutdown). */
void app_autosave_flush (void);

/* Reads an autosave back; blocking (call it off the GTK thread). */
PlannerPlan *app_autosave_read (const char *path, gint64 *store_id, GError **error);

/* Whether a live window of this process is writing @path: its file is no left-over of a
 * session that did not end. */
void app_autosave_claim (const char *path, gboolean claim);
gboolean app_autosave_is_claimed (const char *path);

G_END_DECLS
