#define G_LOG_DOMAIN "app-application"
#include "config.h"

#include "app-application.h"

#define G_SETTINGS_ENABLE_BACKEND
#include <gio/gsettingsbackend.h>
#include <glib/gi18n.h>

#include "app-resources.h"
#include "app-window.h"
#include "planner-store.h"

/* The example the README's run command opens. */
#define EXAMPLE_MODEL "gpt2"
#define EXAMPLE_MESH "dp=2,mp=4"
#define EXAMPLE_POLICY "megatron"
#define EXAMPLE_HARDWARE "h100-sxm"

struct _AppApplication
{
  AdwApplication parent_instance;
  GSettings *settings;
  char *model;
  char *mesh;
  char *policy;
  char *hardware;
  char *db;
  char *plan;
  /* Why the style switch cannot do all it should here (no session bus, no portal), shown
   * to the user; NULL when it can. */
  char *style_notice;
  gboolean notice_shown; /* the first window has shown it */
};

G_DEFINE_FINAL_TYPE (AppApplication, app_application, ADW_TYPE_APPLICATION)

/* Whether a data dir holds the installed schema (GSettings reads the same dirs). */
static gboolean
schema_installed (void)
{
  g_autofree char *user = g_build_filename (g_get_user_data_dir (), "glib-2.0", "schemas",
                                            APP_ID ".gschema.xml", NULL);
  if (g_file_test (user, G_FILE_TEST_EXISTS))
    return TRUE;
  const char *const *dirs = g_get_system_data_dirs ();
  for (guint i = 0; dirs[i]; i++)
    {
      g_autofree char *path = g_build_filename (dirs[i], "glib-2.0", "schemas",
                                                APP_ID ".gschema.xml", NULL);
      if (g_file_test (path, G_FILE_TEST_EXISTS))
        return TRUE;
    }
  return FALSE;
}

void
app_application_init_environment (void)
{
  static gsize done = 0;
  if (!g_once_init_enter (&done))
    return;
  app_register_resource ();
  g_autofree char *compiled = g_build_filename (APP_BUILD_SCHEMA_DIR, "gschemas.compiled", NULL);
  /* Running from the build tree: use the schema compiled there (before GSettings first
   * reads its sources). Without either, the app runs on its defaults and remembers nothing. */
  if (g_getenv ("GSETTINGS_SCHEMA_DIR") == NULL && !schema_installed ()
      && g_file_test (compiled, G_FILE_TEST_EXISTS))
    g_setenv ("GSETTINGS_SCHEMA_DIR", APP_BUILD_SCHEMA_DIR, TRUE);
  g_once_init_leave (&done, 1);
}

/* The catalogues: $SHARDSCOPE_LOCALEDIR (tools/run.sh sets it to the build's), else the
 * installed ones, else, when no installed catalogue matches the user's languages but the
 * build tree has one (running from the build tree), the build's. */
const char *
app_application_get_locale_dir (void)
{
  const char *env = g_getenv ("SHARDSCOPE_LOCALEDIR");
  if (env && *env)
    return env;
  const char *const *languages = g_get_language_names ();
  for (guint i = 0; languages[i]; i++)
    {
      g_autofree char *installed = g_build_filename (LOCALEDIR, languages[i], "LC_MESSAGES",
                                                     GETTEXT_PACKAGE ".mo", NULL);
      if (g_file_test (installed, G_FILE_TEST_EXISTS))
        return LOCALEDIR;
    }
  for (guint i = 0; languages[i]; i++)
    {
      g_autofree char *built = g_build_filename (APP_BUILD_LOCALE_DIR, languages[i],
                                                 "LC_MESSAGES", GETTEXT_PACKAGE ".mo", NULL);
      if (g_file_test (built, G_FILE_TEST_EXISTS))
        return APP_BUILD_LOCALE_DIR;
    }
  return LOCALEDIR;
}

void
app_application_bind_text_domain (void)
{
  bindtextdomain (GETTEXT_PACKAGE, app_application_get_locale_dir ());
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
}

/* The backend of the app's settings; NULL: GSettings' default. */
static GSettingsBackend *settings_backend;

GSettings *
app_application_new_settings (void)
{
  GSettingsSchemaSource *source = g_settings_schema_source_get_default ();
  g_autoptr (GSettingsSchema) schema
      = source ? g_settings_schema_source_lookup (source, APP_ID, TRUE) : NULL;
  return schema ? g_settings_new_full (schema, settings_backend, NULL) : NULL;
}

/* dconf writes through its service on the session bus: without a bus every write is lost,
 * dconf puts the old value back (the style switches back) and says so only on stderr. Then
 * the app's settings go to a key file of GLib's format instead, and the user is told. (Only
 * ours: what libadwaita reads of the desktop's settings stays with the default backend.) */
static void
choose_settings_backend (AppApplication *self)
{
  if (settings_backend != NULL
      || g_application_get_dbus_connection (G_APPLICATION (self)) != NULL
      || g_getenv ("GSETTINGS_BACKEND") != NULL)
    return;
  g_autofree char *path
      = g_build_filename (g_get_user_config_dir (), "shardscope", "settings.ini", NULL);
  /* The schema's path as the key file's root: its keys land in one group, [shardscope]. */
  settings_backend
      = g_keyfile_settings_backend_new (path, "/io/github/shardscope/Shardscope/", "shardscope");
  self->style_notice = g_strdup_printf (
      _("No session bus: the light or dark style cannot follow the system, and settings "
        "are kept in %s. Choose Light or Dark with Ctrl+Alt+L or Ctrl+Shift+L."),
      path);
}

const char *
app_application_get_style_notice (AppApplication *self)
{
  g_return_val_if_fail (APP_IS_APPLICATION (self), NULL);
  return self->style_notice;
}

static void
show_notice (AppApplication *self, const char *text)
{
  g_message ("%s", text);
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (self));
  if (window && APP_IS_WINDOW (window))
    app_window_show_toast (APP_WINDOW (window), text);
}

/* @chosen: the user just chose it (not the start-up's setting). */
static void
apply_color_scheme (AppApplication *self, gboolean chosen)
{
  g_autofree char *scheme = NULL;
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self), "color-scheme");
  g_autoptr (GVariant) state = action ? g_action_get_state (action) : NULL;
  scheme = state ? g_variant_dup_string (state, NULL) : g_strdup ("default");
  AdwColorScheme cs = g_str_equal (scheme, "dark")    ? ADW_COLOR_SCHEME_FORCE_DARK
                      : g_str_equal (scheme, "light") ? ADW_COLOR_SCHEME_FORCE_LIGHT
                                                      : ADW_COLOR_SCHEME_DEFAULT;
  AdwStyleManager *manager = adw_style_manager_get_default ();
  adw_style_manager_set_color_scheme (manager, cs);
  /* Following the system needs the settings portal; without it libadwaita quietly stays
   * light: a message at start-up, and a toast too when the user asks to follow it. */
  if (cs == ADW_COLOR_SCHEME_DEFAULT
      && !adw_style_manager_get_system_supports_color_schemes (manager))
    {
      const char *text
          = _("The system's light or dark style cannot be followed here (no settings portal): "
              "the light style is used. Choose Dark with Ctrl+Shift+L.");
      if (chosen)
        show_notice (self, text);
      else
        g_message ("%s", text);
    }
}

static void
on_color_scheme_setting (AppApplication *self)
{
  apply_color_scheme (self, TRUE);
}

static void
color_scheme_changed (GSimpleAction *action, GVariant *value, gpointer user_data)
{
  g_simple_action_set_state (action, value);
  apply_color_scheme (APP_APPLICATION (user_data), TRUE);
}

static void
action_quit (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  GtkApplication *app = GTK_APPLICATION (user_data);
  /* Close windows first so pending deletions are made final; a window with unsaved edits
   * asks first and stays open until it is answered, and the application with it. */
  GList *windows = g_list_copy (gtk_application_get_windows (app));
  for (GList *l = windows; l; l = l->next)
    gtk_window_close (l->data);
  g_list_free (windows);
  if (gtk_application_get_windows (app) == NULL)
    g_application_quit (G_APPLICATION (app));
}

static void
action_about (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (user_data));
  const char *developers[] = { _("The Shardscope developers"), NULL };
  GtkWidget *about = g_object_new (
      ADW_TYPE_ABOUT_WINDOW, "transient-for", parent, "application-name", "Shardscope",
      "application-icon", APP_ID, "version", PACKAGE_VERSION, "developer-name",
      _("The Shardscope developers"), "developers", developers, "license-type",
      GTK_LICENSE_GPL_3_0, "comments",
      _("Plan how a neural network is sharded over a device mesh"),
      "website", "https://github.com/shardscope/shardscope",
      /* Translators: your names, one per line. */
      "translator-credits", _("translator-credits"), NULL);
  gtk_window_present (GTK_WINDOW (about));
}

static void
action_new_window (GSimpleAction *action, GVariant *param, gpointer user_data)
{
  AppApplication *self = APP_APPLICATION (user_data);
  AppWindow *window = app_window_new (GTK_APPLICATION (self));
  GtkWindow *active = gtk_application_get_active_window (GTK_APPLICATION (self));
  if (active && APP_IS_WINDOW (active))
    app_window_set_store (window, app_window_get_store (APP_WINDOW (active)));
  gtk_window_present (GTK_WINDOW (window));
}

static const GActionEntry app_entries[] = {
  { "quit", action_quit, NULL, NULL, NULL },
  { "about", action_about, NULL, NULL, NULL },
  { "new-window", action_new_window, NULL, NULL, NULL },
};

static void
app_application_startup (GApplication *application)
{
  AppApplication *self = APP_APPLICATION (application);
  choose_settings_backend (self);
  G_APPLICATION_CLASS (app_application_parent_class)->startup (application);
  g_action_map_add_action_entries (G_ACTION_MAP (self), app_entries, G_N_ELEMENTS (app_entries),
                                   self);
  self->settings = app_application_new_settings ();
  if (self->settings)
    {
      g_autoptr (GAction) scheme = g_settings_create_action (self->settings, "color-scheme");
      g_action_map_add_action (G_ACTION_MAP (self), scheme);
      g_signal_connect_swapped (self->settings, "changed::color-scheme",
                                G_CALLBACK (on_color_scheme_setting), self);
    }
  else
    {
      g_autoptr (GSimpleAction) scheme = g_simple_action_new_stateful (
          "color-scheme", G_VARIANT_TYPE_STRING, g_variant_new_string ("default"));
      g_signal_connect (scheme, "change-state", G_CALLBACK (color_scheme_changed), self);
      g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (scheme));
    }
  apply_color_scheme (self, FALSE);

  const char *quit[] = { "<Control>q", NULL };
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.quit", quit);
  const char *new_window[] = { "<Control><Shift>n", NULL };
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.new-window", new_window);
  const char *about[] = { "F1", NULL };
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.about", about);
  const char *dark[] = { "<Control><Shift>l", NULL };
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.color-scheme('dark')",
                                         dark);
  const char *light[] = { "<Control><Alt>l", NULL };
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.color-scheme('light')",
                                         light);
  const char *system[] = { "<Control><Alt><Shift>l", NULL };
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.color-scheme('default')",
                                         system);
  const char *close[] = { "<Control>w", NULL };
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "window.close", close);
  app_window_add_accels (GTK_APPLICATION (self));
}

static PlannerStore *
open_store (AppApplication *self, GError **error)
{
  g_autofree char *last = self->settings ? g_settings_get_string (self->settings, "last-store")
                                         : NULL;
  const char *path = self->db;
  const char *env = g_getenv ("SHARDSCOPE_DB");
  if (path == NULL && (env == NULL || *env == '\0') && last && *last
      && g_file_test (last, G_FILE_TEST_EXISTS))
    path = last;
  /* NULL: $SHARDSCOPE_DB or the default store, as the CLI. */
  return planner_store_open (path, error);
}

static void
app_application_activate (GApplication *application)
{
  AppApplication *self = APP_APPLICATION (application);
  GtkWindow *active = gtk_application_get_active_window (GTK_APPLICATION (self));
  if (active)
    {
      gtk_window_present (active);
      return;
    }
  AppWindow *window = app_window_new (GTK_APPLICATION (self));
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerStore) store = open_store (self, &error);
  if (store)
    app_window_set_store (window, store);
  else
    {
      g_autofree char *text = g_strdup_printf (_("The plan store could not be opened: %s"),
                                               error->message);
      app_window_show_toast (window, text);
    }

  if (self->plan && g_str_has_prefix (self->plan, "db:") && store)
    {
      g_autoptr (GError) lookup_error = NULL;
      gint64 id = planner_store_lookup (store, self->plan + 3, &lookup_error);
      if (id > 0)
        app_window_open_stored (window, id);
      else
        app_window_show_toast (window, lookup_error->message);
    }
  else if (self->plan)
    {
      g_autoptr (GFile) file = g_file_new_for_commandline_arg (self->plan);
      app_window_open_file (window, file);
    }
  else
    {
      const char *model = self->model ? self->model : EXAMPLE_MODEL;
      const char *policy = self->policy ? self->policy : self->model ? NULL : EXAMPLE_POLICY;
      if (policy && (g_str_equal (policy, "none") || *policy == '\0'))
        policy = NULL;
      app_window_load_model (window, model, self->mesh ? self->mesh : EXAMPLE_MESH,
                             self->hardware ? self->hardware : EXAMPLE_HARDWARE, policy);
    }
  gtk_window_present (GTK_WINDOW (window));
  if (self->style_notice && !self->notice_shown)
    show_notice (self, self->style_notice);
  self->notice_shown = TRUE;
}

static int
app_application_handle_local_options (GApplication *application, GVariantDict *options)
{
  AppApplication *self = APP_APPLICATION (application);
  g_variant_dict_lookup (options, "mesh", "s", &self->mesh);
  g_variant_dict_lookup (options, "policy", "s", &self->policy);
  g_variant_dict_lookup (options, "hardware", "s", &self->hardware);
  g_variant_dict_lookup (options, "db", "^ay", &self->db);
  g_variant_dict_lookup (options, "plan", "^ay", &self->plan);
  g_autofree char **rest = NULL;
  if (g_variant_dict_lookup (options, G_OPTION_REMAINING, "^a&ay", &rest) && rest && rest[0])
    self->model = g_strdup (rest[0]);
  if (g_variant_dict_contains (options, "version"))
    {
      g_print ("shardscope %s\n", PACKAGE_VERSION);
      return 0;
    }
  return -1;
}

static void
app_application_finalize (GObject *object)
{
  AppApplication *self = APP_APPLICATION (object);
  g_clear_object (&self->settings);
  g_free (self->model);
  g_free (self->mesh);
  g_free (self->policy);
  g_free (self->hardware);
  g_free (self->db);
  g_free (self->plan);
  g_free (self->style_notice);
  G_OBJECT_CLASS (app_application_parent_class)->finalize (object);
}

static void
app_application_class_init (AppApplicationClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);
  object_class->finalize = app_application_finalize;
  app_class->startup = app_application_startup;
  app_class->activate = app_application_activate;
  app_class->handle_local_options = app_application_handle_local_options;
}

static void
app_application_init (AppApplication *self)
{
  const GOptionEntry entries[] = {
    { "mesh", 'm', 0, G_OPTION_ARG_STRING, NULL, N_("Device mesh (default dp=2,mp=4)"), "M" },
    { "policy", 'p', 0, G_OPTION_ARG_STRING, NULL, N_("Policy name or file, or none"), "NAME|FILE" },
    { "hardware", 0, 0, G_OPTION_ARG_STRING, NULL, N_("Hardware profile (default h100-sxm)"),
      "NAME|FILE" },
    { "db", 0, 0, G_OPTION_ARG_FILENAME, NULL, N_("Plan store (default: $SHARDSCOPE_DB or the user's store)"),
      "FILE" },
    { "plan", 0, 0, G_OPTION_ARG_FILENAME, NULL, N_("Open a plan: db:NAME or a plan JSON file"),
      "PLAN" },
    { "version", 0, 0, G_OPTION_ARG_NONE, NULL, N_("Print the version"), NULL },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, NULL, NULL, N_("[MODEL]") },
    { NULL },
  };
  g_application_add_main_option_entries (G_APPLICATION (self), entries);
  g_application_set_option_context_parameter_string (G_APPLICATION (self), _("[MODEL]"));
  g_application_set_option_context_summary (
      G_APPLICATION (self),
      _("MODEL is a zoo name (gpt2, llama, ...), a Hugging Face config.json or a graph JSON."));
}

AppApplication *
app_application_new (void)
{
  app_application_init_environment ();
  return g_object_new (APP_TYPE_APPLICATION, "application-id", APP_ID, "flags",
                       G_APPLICATION_NON_UNIQUE, "resource-base-path",
                       "/io/github/shardscope/Shardscope", NULL);
}
