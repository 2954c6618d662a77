/* app-application.h: the Shardscope GTK application (libadwaita).
 *
 * Command line: shardscope [MODEL] [--mesh M] [--policy P] [--hardware H] [--db FILE]
 * [--plan db:NAME|PLAN.json]. Without MODEL or --plan it opens the built-in example, gpt2
 * with megatron on dp=2,mp=4. The store is --db, else $SHARDSCOPE_DB, else the last store
 * opened, else the default store (the CLI's).
 */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define APP_TYPE_APPLICATION (app_application_get_type ())
G_DECLARE_FINAL_TYPE (AppApplication, app_application, APP, APPLICATION, AdwApplication)

AppApplication *app_application_new (void);

/* Registers the GResource and, when the schema is not installed, points GSettings at the
 * build directory's compiled schema. Call before anything uses either. */
void app_application_init_environment (void);

G_END_DECLS
