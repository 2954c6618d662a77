/* app-sidebar.h: the plans of the store, grouped by model, with search. Activating a row
 * emits "plan-activated" with the plan's id; rename, duplicate and delete are the window's
 * actions (win.rename-plan, win.duplicate-plan, win.delete-plan) with the id as target. */
#pragma once

#include <adwaita.h>

#include "app-document.h"
#include "planner-store.h"

G_BEGIN_DECLS

#define APP_TYPE_SIDEBAR (app_sidebar_get_type ())
G_DECLARE_FINAL_TYPE (AppSidebar, app_sidebar, APP, SIDEBAR, GtkWidget)


GtkWidget *app_sidebar_new (void);
PlannerStore *app_sidebar_get_store (AppSidebar *self);
void app_sidebar_set_store (AppSidebar *self, PlannerStore *store);
/* Lists the store again, off the GTK thread. */
void app_sidebar_reload (AppSidebar *self);
/* Plans hidden until their deletion is final (the undo toast). */
void app_sidebar_set_hidden (AppSidebar *self, gint64 id, gboolean hidden);
/* The id of the current plan, marked in the list ("current-id"). */
void app_sidebar_set_current_id (AppSidebar *self, gint64 id);
/* Rows listed (after search and hiding), and the entry of row @i. */
guint app_sidebar_get_n_visible (AppSidebar *self);
const PlannerStoreEntry *app_sidebar_get_entry (AppSidebar *self, gint64 id);
/* Every listed entry (PlannerStoreEntry*), borrowed. */
GPtrArray *app_sidebar_get_entries (AppSidebar *self);
void app_sidebar_set_search (AppSidebar *self, const char *text);

G_END_DECLS
