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
/* Where the translations are read from: $SHARDSCOPE_LOCALEDIR, the installed catalogues, or
 * the build tree's when only it has one for the user's languages. */
const char *app_application_get_locale_dir (void);
/* bindtextdomain() on that folder, UTF-8, and our domain as the default. */
void app_application_bind_text_domain (void);
/* The app's settings (NULL without the schema), in the backend chosen at start-up: a key file
 * under the user's config dir where there is no session bus for dconf, else the default. */
GSettings *app_application_new_settings (void);
/* Why the style switch cannot follow the system or remember the choice here (no session
 * bus, no settings portal), also shown as a toast and a message; NULL when it can. */
const char *app_application_get_style_notice (AppApplication *self);

G_END_DECLS
