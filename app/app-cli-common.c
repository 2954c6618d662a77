#define G_LOG_DOMAIN "app-cli-common"

#include "config.h"

#include "app-cli.h"

/* The helpers of app-cli.h that the command files share beyond shardscope-cli.c's: one
 * option context with the common options, and the short forms of JSON output. */

GOptionContext *
app_cli_options_new (const AppCliCommand *command, const GOptionEntry *entries,
                     AppCliModelArgs *model_args, gboolean db, gboolean *json)
{
  GOptionContext *context = app_cli_context_new (command);
  if (entries)
    g_option_context_add_main_entries (context, entries, NULL);
  if (model_args)
    app_cli_add_model_options (context, model_args);
  if (db)
    app_cli_add_db_option (context);
  if (json)
    app_cli_add_json_option (context, json);
  return context;
}

void
app_cli_totals_text_init (AppCliTotalsText *text, const PlannerPlanTotals *t)
{
  text->step = app_cli_format_seconds (t->step_time_s);
  text->compute = app_cli_format_seconds (t->compute_time_s);
  text->comm = app_cli_format_seconds (t->comm_time_s);
  text->comm_bytes = app_cli_format_bytes (t->comm_bytes);
  text->backward = app_cli_format_seconds (t->backward_comm_time_s);
  text->sync = app_cli_format_seconds (t->grad_sync_time_s);
  text->memory = app_cli_format_bytes (t->memory_per_device_bytes);
}

void
app_cli_totals_text_clear (AppCliTotalsText *text)
{
  g_clear_pointer (&text->step, g_free);
  g_clear_pointer (&text->compute, g_free);
  g_clear_pointer (&text->comm, g_free);
  g_clear_pointer (&text->comm_bytes, g_free);
  g_clear_pointer (&text->backward, g_free);
  g_clear_pointer (&text->sync, g_free);
  g_clear_pointer (&text->memory, g_free);
}

void
app_cli_json_add_string (JsonBuilder *builder, const char *member, const char *value)
{
  json_builder_set_member_name (builder, member);
  if (value != NULL)
    json_builder_add_string_value (builder, value);
  else
    json_builder_add_null_value (builder);
}

void
app_cli_json_add_int (JsonBuilder *builder, const char *member, gint64 value)
{
  json_builder_set_member_name (builder, member);
  json_builder_add_int_value (builder, value);
}

void
app_cli_json_print_builder (JsonBuilder *builder)
{
  g_autoptr (JsonNode) root = json_builder_get_root (builder);
  app_cli_json_print (root);
}

void
app_cli_json_print_text (const char *json)
{
  g_autoptr (JsonNode) root = json_from_string (json, NULL);
  app_cli_json_print (root);
}
