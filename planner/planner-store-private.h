/* planner-store-private.h: what the store's tests need beyond the public API. */
#pragma once

#include "planner-store.h"

G_BEGIN_DECLS

/* The application_id a store file carries in its header. */
#define PLANNER_STORE_APPLICATION_ID 0x53685363 /* "ShSc" */

/* Opens @path migrating it only up to @version (1 <= @version <= current): how a test makes a
 * file of an older schema to migrate. Saving into an old schema is not supported. */
PlannerStore *planner_store_open_at_version (const char *path, guint version, GError **error);

G_END_DECLS
