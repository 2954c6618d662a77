#define G_LOG_DOMAIN "app-cli-db"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app-cli.h"
#include "planner-error.h"
#include "planner-pin.h"
#include "planner-policy.h"

/* shardscope-cli db list|show|delete|rename, and the store behind db:ID and db:NAME. */

static char *db_path;       /* --db FILE */
static PlannerStore *store; /* opened on first use, closed at exit (which checkpoints the WAL) */

#define PLAN_ID_KEY "app-cli-db-plan-id"

static void
close_store (void)
{
  g_clear_object (&store);
}

void
app_cli_add_db_option (GOptionContext *context)
{
  const GOptionEntry entries[] = {
    { "db", 0, 0, G_OPTION_ARG_FILENAME, &db_path,
      "Plan store (default: $SHARDSCOPE_DB, else $XDG_DATA_HOME/shardscope/plans.db)", "FILE" },
    { NULL },
  };
  g_option_context_add_main_entries (context, entries, NULL);
}

PlannerStore *
app_cli_get_store (gboolean create, GError **error)
{
  g_autofree char *path = NULL;

  if (store != NULL)
    return store;
  /* Reading creates nothing: a store that does not exist holds no plan. */
  path = db_path != NULL ? g_strdup (db_path) : planner_store_default_path ();
  if (!create && !g_file_test (path, G_FILE_TEST_EXISTS))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: no plan store here yet; 'shardscope-cli propagate MODEL --mesh M --save "
                   "NAME' creates it, or --db FILE names another",
                   path);
      return NULL;
    }
  store = planner_store_open (path, error);
  if (store != NULL)
    atexit (close_store);
  return store;
}

gint64
app_cli_db_plan_id (PlannerPlan *plan)
{
  const gint64 *id = g_object_get_data (G_OBJECT (plan), PLAN_ID_KEY);
  return id != NULL ? *id : 0;
}

PlannerPlan *
app_cli_db_load_plan (const char *name_or_id, GError **error)
{
  PlannerStore *s = app_cli_get_store (FALSE, error);
  gint64 id;
  PlannerPlan *plan;

  if (s == NULL || (id = planner_store_lookup (s, name_or_id, error)) == 0
      || (plan = planner_store_load_plan (s, id, error)) == NULL)
    {
      g_prefix_error (error, "db:%s: ", name_or_id);
      return NULL;
    }
  g_object_set_data_full (G_OBJECT (plan), PLAN_ID_KEY, g_memdup2 (&id, sizeof id), g_free);
  return plan;
}

PlannerTrialRun *
app_cli_db_latest_trial_run (PlannerPlan *plan)
{
  gint64 id = app_cli_db_plan_id (plan);
  g_autoptr (GPtrArray) runs = NULL;

  if (id == 0 || store == NULL || (runs = planner_store_list_trial_runs (store, id, NULL)) == NULL
      || runs->len == 0)
    return NULL;
  return g_ptr_array_steal_index (runs, 0);
}

/* ---- derived plans ---- */

static gboolean
text_in (GPtrArray *texts, const char *text)
{
  for (guint i = 0; texts != NULL && i < texts->len; i++)
    if (strcmp (g_ptr_array_index (texts, i), text) == 0)
      return TRUE;
  return FALSE;
}

gboolean
app_cli_derive_pins (PlannerPlan *parent, GPtrArray *pins, const PlannerMesh *mesh, GError **error)
{
  const char *policy = planner_plan_get_policy (parent);
  const GPtrArray *parent_pins = planner_plan_get_pins (parent);
  g_autoptr (GPtrArray) policy_texts = g_ptr_array_new_with_free_func (g_free);

  /* Which of the parent's pins its policy gave: those follow the policy this plan uses. */
  if (policy != NULL)
    {
      g_autoptr (GError) local_error = NULL;
      g_autoptr (GPtrArray) expanded
          = planner_policy_expand (policy, planner_plan_get_graph (parent),
                                   planner_plan_get_mesh (parent), NULL, &local_error);
      if (expanded == NULL)
        fprintf (stderr,
                 "shardscope-cli: the parent's policy %s no longer expands (%s); all its pins "
                 "are kept as pins of their own\n",
                 policy, local_error->message);
      for (guint i = 0; expanded != NULL && i < expanded->len; i++)
        g_ptr_array_add (policy_texts,
                         g_strdup (((PlannerPin *)g_ptr_array_index (expanded, i))->text));
    }
  /* The new --pin pins override the parent's own. */
  for (guint i = 0; i < pins->len; i++)
    {
      PlannerPin *pin = g_ptr_array_index (pins, i);
      if (pin->priority > 0)
        pin->priority = 2;
    }
  for (guint i = 0; i < parent_pins->len; i++)
    {
      const char *text = g_ptr_array_index (parent_pins, i);
      if (text_in (policy_texts, text))
        continue;
      PlannerPin *pin = planner_pin_parse (text, mesh, error);
      if (pin == NULL)
        {
          g_prefix_error (error, "the parent plan's pin: ");
          return FALSE;
        }
      pin->priority = 1;
      g_ptr_array_add (pins, pin);
    }
  return TRUE;
}

/* ---- output ---- */

/* Names may hold anything: control characters shown escaped in text output. */
static char *
printable (const char *text)
{
  return text != NULL ? g_strescape (text, "\"'\\") : g_strdup ("-");
}

static char *
format_date (gint64 microseconds)
{
  g_autoptr (GDateTime) t = g_date_time_new_from_unix_utc (microseconds / G_USEC_PER_SEC);
  return t != NULL ? g_date_time_format (t, "%Y-%m-%dT%H:%M:%SZ") : g_strdup ("?");
}

static void
add_entry_json (JsonBuilder *b, const PlannerStoreEntry *e)
{
  const PlannerPlanTotals *t = &e->totals;
  g_autofree char *created = format_date (e->created);

  app_cli_json_add_int (b, "id", e->id);
  app_cli_json_add_string (b, "name", e->name);
  app_cli_json_add_string (b, "model", e->model);
  app_cli_json_add_string (b, "source", e->model_source);
  app_cli_json_add_string (b, "mesh", e->mesh);
  app_cli_json_add_string (b, "hardware", e->hardware);
  app_cli_json_add_string (b, "policy", e->policy);
  app_cli_json_add_string (b, "created", created);
  json_builder_set_member_name (b, "parent_id");
  if (e->parent_id > 0)
    json_builder_add_int_value (b, e->parent_id);
  else
    json_builder_add_null_value (b);
  app_cli_json_add_string (b, "parent", e->parent_name);
  app_cli_json_add_int (b, "pins", e->n_pins);
  app_cli_json_add_int (b, "trial_runs", e->n_trial_runs);
  app_cli_json_add_int (b, "ops", t->n_ops);
  app_cli_json_add_int (b, "pinned", t->n_pinned);
  app_cli_json_add_int (b, "propagated", t->n_propagated);
  app_cli_json_add_int (b, "defaulted", t->n_defaulted);
  app_cli_json_add_int (b, "redistributions", t->n_redistributions);
  app_cli_json_add_int (b, "comm_bytes", (gint64)t->comm_bytes);
  app_cli_json_add_number (b, "comm_time_us", t->comm_time_s * 1e6);
  app_cli_json_add_number (b, "compute_time_us", t->compute_time_s * 1e6);
  app_cli_json_add_number (b, "step_time_us", t->step_time_s * 1e6);
  app_cli_json_add_int (b, "memory_per_device_bytes", (gint64)t->memory_per_device_bytes);
}

static void
add_run_json (JsonBuilder *b, const PlannerTrialRun *run, gboolean measurements)
{
  g_autofree char *created = format_date (run->created);

  json_builder_begin_object (b);
  app_cli_json_add_int (b, "id", run->id);
  app_cli_json_add_string (b, "backend", run->backend);
  app_cli_json_add_int (b, "devices", run->devices);
  app_cli_json_add_string (b, "date", created);
  app_cli_json_add_number (b, "max_abs_error", run->max_abs_error);
  app_cli_json_add_number (b, "max_rel_error", run->max_rel_error);
  if (measurements)
    {
      json_builder_set_member_name (b, "measurements");
      json_builder_begin_array (b);
      for (guint i = 0; i < run->measurements->len; i++)
        {
          const PlannerTrialMeasurement *m
              = &g_array_index (run->measurements, PlannerTrialMeasurement, i);
          json_builder_begin_object (b);
          app_cli_json_add_string (b, "kind", planner_measurement_kind_to_string (m->kind));
          app_cli_json_add_string (b, "name", m->name);
          app_cli_json_add_number (b, "estimated_us", m->estimated_us);
          app_cli_json_add_number (b, "measured_us", m->measured_us);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
    }
  json_builder_end_object (b);
}

/* ---- subcommands ---- */

/* "db:NAME", "db:ID", "NAME" or "ID": the store drops the "db:" itself, so that it can tell a
 * plan named "db:1" in an old store from plan 1. */
static gint64
lookup (PlannerStore *s, const char *spec, GError **error)
{
  return planner_store_lookup (s, spec, error);
}

/* The plans of the store at @path (PlannerStoreEntry). */
static int
print_list (const char *path, GPtrArray *entries, gboolean json)
{
  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      app_cli_json_add_string (b, "db", path);
      json_builder_set_member_name (b, "plans");
      json_builder_begin_array (b);
      for (guint i = 0; i < entries->len; i++)
        {
          json_builder_begin_object (b);
          add_entry_json (b, g_ptr_array_index (entries, i));
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
      json_builder_end_object (b);
      app_cli_json_print_builder (b);
      return APP_CLI_EXIT_OK;
    }

  printf ("%s: %u plan%s\n", path, entries->len, entries->len == 1 ? "" : "s");
  if (entries->len == 0)
    return APP_CLI_EXIT_OK;
  printf ("%5s  %-24s %-20s %-12s %-12s %-20s %12s %10s  %s\n", "id", "name", "model", "mesh",
          "policy", "created", "step", "memory", "parent");
  for (guint i = 0; i < entries->len; i++)
    {
      const PlannerStoreEntry *e = g_ptr_array_index (entries, i);
      g_autofree char *name = printable (e->name);
      g_autofree char *policy = printable (e->policy);
      g_autofree char *parent = e->parent_name != NULL ? printable (e->parent_name) : NULL;
      g_autofree char *created = format_date (e->created);
      g_autofree char *step = app_cli_format_seconds (e->totals.step_time_s);
      g_autofree char *memory = app_cli_format_bytes (e->totals.memory_per_device_bytes);
      printf ("%5" G_GINT64_FORMAT "  %-24s %-20s %-12s %-12s %-20s %12s %10s  %s\n", e->id, name,
              e->model, e->mesh, policy, created, step, memory, parent != NULL ? parent : "-");
    }
  return APP_CLI_EXIT_OK;
}

static int
db_list (PlannerStore *s, gboolean json)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) entries = planner_store_list_plans (s, &error);

  if (entries == NULL)
    return app_cli_refuse (error);
  return print_list (planner_store_get_path (s), entries, json);
}

static int
db_show (PlannerStore *s, const char *spec, gboolean json)
{
  g_autoptr (GError) error = NULL;
  gint64 id = lookup (s, spec, &error);
  g_autoptr (PlannerStoreEntry) e = NULL;
  g_autoptr (GPtrArray) pins = NULL;
  g_autoptr (GPtrArray) runs = NULL;

  if (id == 0 || (e = planner_store_get_entry (s, id, &error)) == NULL
      || (pins = planner_store_get_pins (s, id, &error)) == NULL
      || (runs = planner_store_list_trial_runs (s, id, &error)) == NULL)
    return app_cli_refuse (error);

  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      app_cli_json_add_string (b, "db", planner_store_get_path (s));
      add_entry_json (b, e);
      json_builder_set_member_name (b, "pin_rules");
      json_builder_begin_array (b);
      for (guint i = 0; i < pins->len; i++)
        json_builder_add_string_value (b, g_ptr_array_index (pins, i));
      json_builder_end_array (b);
      json_builder_set_member_name (b, "runs");
      json_builder_begin_array (b);
      for (guint i = 0; i < runs->len; i++)
        add_run_json (b, g_ptr_array_index (runs, i), TRUE);
      json_builder_end_array (b);
      json_builder_end_object (b);
      app_cli_json_print_builder (b);
      return APP_CLI_EXIT_OK;
    }

  const PlannerPlanTotals *t = &e->totals;
  g_autofree char *name = printable (e->name);
  g_autofree char *created = format_date (e->created);
  g_auto (AppCliTotalsText) text = { 0 };
  app_cli_totals_text_init (&text, t);
  printf ("plan %s (db:%" G_GINT64_FORMAT ") in %s\n", name, e->id, planner_store_get_path (s));
  printf ("  model      %s (%s)\n", e->model, e->model_source);
  printf ("  mesh       %s, hardware %s, policy %s\n", e->mesh, e->hardware,
          e->policy != NULL ? e->policy : "none");
  printf ("  created    %s\n", created);
  if (e->parent_id > 0)
    {
      g_autofree char *parent = printable (e->parent_name);
      printf ("  parent     %s (db:%" G_GINT64_FORMAT ")\n", parent, e->parent_id);
    }
  printf ("  ops        %u: %u pinned, %u propagated, %u defaulted\n", t->n_ops, t->n_pinned,
          t->n_propagated, t->n_defaulted);
  printf ("  redistributions %u: %s sent, %s forward\n", t->n_redistributions, text.comm_bytes,
          text.comm);
  printf ("  step       %s (forward compute %s), memory %s per device\n", text.step,
          text.compute, text.memory);
  printf ("pins (%u):\n", pins->len);
  for (guint i = 0; i < pins->len; i++)
    {
      g_autofree char *pin = printable (g_ptr_array_index (pins, i));
      printf ("  %s\n", pin);
    }
  printf ("trial runs (%u):\n", runs->len);
  for (guint i = 0; i < runs->len; i++)
    {
      const PlannerTrialRun *r = g_ptr_array_index (runs, i);
      g_autofree char *date = format_date (r->created);
      printf ("  #%" G_GINT64_FORMAT "  %s  %s on %u devices: max abs error %.3g, max rel error "
              "%.3g, %u measurements\n",
              r->id, date, r->backend, r->devices, r->max_abs_error, r->max_rel_error,
              r->measurements->len);
    }
  return APP_CLI_EXIT_OK;
}

static int
db_delete (PlannerStore *s, char **specs, int n, gboolean json)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "deleted");
  json_builder_begin_array (b);
  for (int i = 0; i < n; i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerStoreEntry) e = NULL;
      gint64 id = lookup (s, specs[i], &error);
      if (id == 0 || (e = planner_store_get_entry (s, id, &error)) == NULL
          || !planner_store_delete_plan (s, id, &error))
        return app_cli_refuse (error);
      if (json)
        {
          json_builder_begin_object (b);
          app_cli_json_add_int (b, "id", id);
          app_cli_json_add_string (b, "name", e->name);
          json_builder_end_object (b);
        }
      else
        {
          g_autofree char *name = printable (e->name);
          printf ("deleted %s (db:%" G_GINT64_FORMAT ")\n", name, id);
        }
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  if (json)
    app_cli_json_print_builder (b);
  return APP_CLI_EXIT_OK;
}

static int
db_rename (PlannerStore *s, const char *spec, const char *new_name, gboolean json)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerStoreEntry) e = NULL;
  gint64 id = lookup (s, spec, &error);

  if (id == 0 || (e = planner_store_get_entry (s, id, &error)) == NULL
      || !planner_store_rename_plan (s, id, new_name, &error))
    return app_cli_refuse (error);
  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      app_cli_json_add_int (b, "id", id);
      app_cli_json_add_string (b, "old_name", e->name);
      app_cli_json_add_string (b, "name", new_name);
      json_builder_end_object (b);
      app_cli_json_print_builder (b);
    }
  else
    {
      g_autofree char *old = printable (e->name);
      g_autofree char *name = printable (new_name);
      printf ("renamed %s (db:%" G_GINT64_FORMAT ") to %s\n", old, id, name);
    }
  return APP_CLI_EXIT_OK;
}

int
app_cli_db (const AppCliCommand *command, int argc, char **argv)
{
  gboolean json = FALSE;
  g_autoptr (GOptionContext) context = app_cli_options_new (command, NULL, NULL, TRUE, &json);

  g_option_context_set_description (context,
                                    "Subcommands:\n"
                                    "  list                 every stored plan\n"
                                    "  show PLAN            a plan's summary, pins and trial runs\n"
                                    "  delete PLAN...       delete plans (and their trial runs)\n"
                                    "  rename PLAN NAME     give a plan another name\n"
                                    "PLAN is a name or an id, with or without 'db:'; a name "
                                    "comes before an id.\n");
  int status = app_cli_parse (command, context, &argc, &argv, 1, G_MAXINT);
  if (status >= 0)
    return status;

  const char *sub = argv[1];
  int n = argc - 2;
  char **args = argv + 2;
  struct
  {
    const char *name;
    int min, max;
    const char *usage;
  } const table[] = {
    { "list", 0, 0, "list" },
    { "show", 1, 1, "show PLAN" },
    { "delete", 1, G_MAXINT, "delete PLAN..." },
    { "rename", 2, 2, "rename PLAN NEW_NAME" },
  };
  guint which = G_N_ELEMENTS (table);
  for (guint i = 0; i < G_N_ELEMENTS (table); i++)
    if (strcmp (table[i].name, sub) == 0)
      which = i;
  if (which == G_N_ELEMENTS (table))
    return app_cli_usage_error (command, "unknown subcommand '%s' (list, show, delete, rename)",
                                sub);
  if (n < table[which].min || n > table[which].max)
    return app_cli_usage_error (command, "usage: db %s", table[which].usage);

  g_autoptr (GError) error = NULL;
  g_autofree char *path = db_path != NULL ? g_strdup (db_path) : planner_store_default_path ();
  if (which == 0 && !g_file_test (path, G_FILE_TEST_EXISTS))
    {
      /* Nothing saved yet: an empty list, and no file created for it. */
      g_autoptr (GPtrArray) none = g_ptr_array_new ();
      return print_list (path, none, json);
    }
  PlannerStore *s = app_cli_get_store (FALSE, &error);
  if (s == NULL)
    return app_cli_refuse (error);
  switch (which)
    {
    case 0:
      return db_list (s, json);
    case 1:
      return db_show (s, args[0], json);
    case 2:
      return db_delete (s, args, n, json);
    default:
      return db_rename (s, args[0], args[1], json);
    }
}
