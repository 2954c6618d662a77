#define G_LOG_DOMAIN "app-cli-search"

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "app-cli.h"
#include "planner-search.h"

/* shardscope-cli search: every mesh of N devices (dp x mp, and pp x dp x mp pipelines) x the
 * built-in policies x the exact solve (two-axis meshes), ranked by the training step; the best
 * that fits, the Pareto front, the solver's proofs. */

#define DEFAULT_TOP 10

static void
add_solve_report (JsonBuilder *b, const PlannerSolveReport *r)
{
  app_cli_json_add_number (b, "objective_us", r->objective_s * 1e6);
  app_cli_json_add_number (b, "bound_us", r->bound_s * 1e6);
  json_builder_set_member_name (b, "optimal");
  json_builder_add_boolean_value (b, r->optimal);
  app_cli_json_add_number (b, "gap", r->gap);
  app_cli_json_add_number (b, "greedy_objective_us", r->seed_objective_s * 1e6);
  app_cli_json_add_number (b, "solve_ms", r->solve_ms);
  app_cli_json_add_int (b, "vars", r->n_vars);
  app_cli_json_add_int (b, "blocks", r->n_blocks);
  app_cli_json_add_int (b, "block_kinds", r->n_block_kinds);
  app_cli_json_add_int (b, "rounds", r->n_solves);
  app_cli_json_add_number (b, "table_cells", (double)r->table_cells);
}

/* Also what propagate --optimal prints (app-cli-plan.c). */
void
app_cli_json_add_solve_report (JsonBuilder *b, const PlannerSolveReport *r)
{
  add_solve_report (b, r);
}

static void
add_candidate (JsonBuilder *b, const PlannerSearchCandidate *c, const char *saved)
{
  json_builder_begin_object (b);
  app_cli_json_add_string (b, "mesh", c->mesh);
  app_cli_json_add_string (b, "policy", c->policy);
  json_builder_set_member_name (b, "solved");
  json_builder_add_boolean_value (b, c->solved);
  if (c->plan)
    {
      app_cli_json_add_number (b, "step_time_us", c->step_time_s * 1e6);
      app_cli_json_add_number (b, "memory_per_device_bytes", (double)c->memory_per_device_bytes);
    }
  else
    {
      json_builder_set_member_name (b, "step_time_us");
      json_builder_add_null_value (b);
      json_builder_set_member_name (b, "memory_per_device_bytes");
      json_builder_add_null_value (b);
    }
  json_builder_set_member_name (b, "fits");
  json_builder_add_boolean_value (b, c->plan && c->fits);
  json_builder_set_member_name (b, "pareto");
  json_builder_add_boolean_value (b, c->plan && c->pareto);
  app_cli_json_add_string (b, "error", c->error);
  app_cli_json_add_string (b, "saved", saved);
  if (c->pp > 1)
    {
      json_builder_set_member_name (b, "pipeline");
      json_builder_begin_object (b);
      app_cli_json_add_int (b, "stages", c->pp);
      app_cli_json_add_int (b, "micro_batches", c->micro_batches);
      app_cli_json_add_string (b, "schedule", "1f1b");
      if (c->plan)
        app_cli_json_add_number (b, "bubble_fraction", c->bubble_fraction);
      else
        {
          json_builder_set_member_name (b, "bubble_fraction");
          json_builder_add_null_value (b);
        }
      json_builder_end_object (b);
    }
  if (c->solved && c->plan)
    {
      json_builder_set_member_name (b, "solve");
      json_builder_begin_object (b);
      add_solve_report (b, &c->report);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
}

static char *
candidate_label (const PlannerSearchCandidate *c)
{
  return g_strdup_printf ("%s %s", c->mesh, c->solved ? "optimal" : c->policy);
}

int
app_cli_search (const AppCliCommand *command, int argc, char **argv)
{
  gboolean json = FALSE, no_solve = FALSE;
  gint64 devices = APP_CLI_UNSET, top = APP_CLI_UNSET, memory_limit = APP_CLI_UNSET;
  gint64 micro_batches = APP_CLI_UNSET;
  g_autofree char *hardware = NULL, *save_prefix = NULL;
  g_auto (GStrv) user_pins = NULL;
  g_auto (AppCliModelArgs) model_args = { 0 };
  const GOptionEntry entries[] = {
    { "devices", 'n', 0, G_OPTION_ARG_INT64, &devices,
      "Number of devices: every mesh dp=A,mp=B with A x B = N is tried, and pp=P,dp=A,mp=B "
      "with P x A x B = N for 2 <= P <= the model's layers",
      "N" },
    { "micro-batches", 0, 0, G_OPTION_ARG_INT64, &micro_batches,
      "Micro-batches per step on the pp meshes, 1F1B (default 4 x pp); they must divide the "
      "sequences each device gets (raise --batch)",
      "M" },
    { "hardware", 0, 0, G_OPTION_ARG_FILENAME, &hardware,
      "Hardware profile: a built-in name or a profile file (default " APP_CLI_DEFAULT_HARDWARE ")",
      "NAME|FILE" },
    { "memory-limit", 0, 0, G_OPTION_ARG_INT64, &memory_limit,
      "Memory per device a plan may use (default: the hardware's memory)", "BYTES" },
    { "pin", 0, 0, G_OPTION_ARG_STRING_ARRAY, &user_pins,
      "Pin ops on every mesh tried (GLOB=IN_LAYOUTS[->OUT_LAYOUTS]; axes dp and mp); "
      "repeatable; they override a policy's pin on the same op and bind the exact solve",
      "OP=LAYOUTS" },
    { "top", 0, 0, G_OPTION_ARG_INT64, &top,
      "Show (and with --save, save) the K fastest candidates (default 10)", "K" },
    { "save", 0, 0, G_OPTION_ARG_STRING, &save_prefix,
      "Save the top candidates in the store (--db) as 'PREFIX MESH POLICY|optimal'", "PREFIX" },
    { "no-solve", 0, 0, G_OPTION_ARG_NONE, &no_solve, "Only the built-in policies, no exact solve",
      NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context
      = app_cli_options_new (command, entries, &model_args, TRUE, &json);
  int status = app_cli_parse (command, context, &argc, &argv, 1, 1);
  if (status >= 0)
    return status;
  if (devices == APP_CLI_UNSET)
    return app_cli_usage_error (command, "missing --devices N (e.g. --devices 64)");
  if ((status = app_cli_check_int (command, "--devices", devices, 1, 1 << 20)) >= 0)
    return status;
  if (top == APP_CLI_UNSET)
    top = DEFAULT_TOP;
  if ((status = app_cli_check_int (command, "--top", top, 1, 100000)) >= 0)
    return status;
  if (micro_batches != APP_CLI_UNSET
      && (status = app_cli_check_int (command, "--micro-batches", micro_batches, 1, 1 << 20)) >= 0)
    return status;
  if (memory_limit != APP_CLI_UNSET
      && (status = app_cli_check_int (command, "--memory-limit", memory_limit, 1, G_MAXINT64)) >= 0)
    return status;

  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw
      = planner_hardware_lookup (hardware ? hardware : APP_CLI_DEFAULT_HARDWARE, &error);
  if (hw == NULL)
    return app_cli_refuse (error);
  g_autoptr (PlannerGraph) graph = app_cli_load_model (command, argv[1], &model_args, &status);
  if (graph == NULL)
    return status;
  g_autoptr (PlannerRequest) request = planner_request_new ();
  for (guint i = 0; user_pins && user_pins[i]; i++)
    planner_request_add_pin (request, user_pins[i], PLANNER_PIN_TIER_USER);

  PlannerSearchOptions options;
  planner_search_options_init (&options);
  options.n_devices = (guint)devices;
  options.memory_limit = memory_limit == APP_CLI_UNSET ? 0 : (guint64)memory_limit;
  options.request = request;
  options.solve = !no_solve;
  options.micro_batches = micro_batches == APP_CLI_UNSET ? 0 : (guint)micro_batches;
  g_autoptr (PlannerSearchResult) result = planner_search (graph, hw, &options, &error);
  if (result == NULL)
    return app_cli_refuse (error);
  g_autoptr (GArray) ranking = planner_search_ranking (result);
  guint shown = MIN ((guint)top, ranking->len);

  /* Saving: the top candidates, named by the prefix, their mesh and policy. */
  g_autoptr (GPtrArray) saved_names = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < result->candidates->len; i++)
    g_ptr_array_add (saved_names, NULL);
  if (save_prefix)
    {
      PlannerStore *store = app_cli_get_store (TRUE, &error);
      if (store == NULL)
        return app_cli_refuse (error);
      for (guint r = 0; r < shown; r++)
        {
          guint i = g_array_index (ranking, guint, r);
          PlannerSearchCandidate *c = g_ptr_array_index (result->candidates, i);
          g_autofree char *label = candidate_label (c);
          g_autofree char *name = g_strdup_printf ("%s %s", save_prefix, label);
          planner_plan_set_name (c->plan, name);
          if (!planner_store_check_name (name, &error)
              || planner_store_save_plan (store, c->plan, name, 0, &error) == 0)
            return app_cli_refuse (error);
          g_ptr_array_index (saved_names, i) = g_steal_pointer (&name);
        }
    }

  if (json)
    {
      g_autoptr (JsonBuilder) b = json_builder_new ();
      json_builder_begin_object (b);
      app_cli_json_add_string (b, "model", planner_graph_get_source (graph));
      app_cli_json_add_int (b, "devices", devices);
      app_cli_json_add_string (b, "hardware", planner_hardware_get_name (hw));
      app_cli_json_add_number (b, "memory_limit_bytes", (double)result->memory_limit);
      json_builder_set_member_name (b, "candidates");
      json_builder_begin_array (b);
      for (guint i = 0; i < result->candidates->len; i++)
        add_candidate (b, g_ptr_array_index (result->candidates, i),
                       g_ptr_array_index (saved_names, i));
      json_builder_end_array (b);
      json_builder_set_member_name (b, "best");
      if (result->best >= 0)
        add_candidate (b, g_ptr_array_index (result->candidates, result->best),
                       g_ptr_array_index (saved_names, result->best));
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "top");
      json_builder_begin_array (b);
      for (guint r = 0; r < shown; r++)
        json_builder_add_int_value (b, g_array_index (ranking, guint, r));
      json_builder_end_array (b);
      app_cli_json_add_number (b, "search_ms", result->search_ms);
      json_builder_end_object (b);
      app_cli_json_print_builder (b);
      return APP_CLI_EXIT_OK;
    }

  g_autofree char *limit = app_cli_format_bytes (result->memory_limit);
  printf ("Model:    %s\n", planner_graph_get_source (graph));
  g_autoptr (GPtrArray) meshes
      = planner_search_meshes ((guint)devices, planner_search_layers (graph));
  printf ("Devices:  %" G_GINT64_FORMAT " (%u meshes), hardware %s, memory limit %s per device\n",
          devices, meshes->len, planner_hardware_get_name (hw), limit);
  printf ("\n  %-4s %-16s %-12s %14s %14s  %s\n", "rank", "mesh", "plan", "step", "memory", "");
  for (guint r = 0; r < shown; r++)
    {
      guint i = g_array_index (ranking, guint, r);
      const PlannerSearchCandidate *c = g_ptr_array_index (result->candidates, i);
      g_autofree char *step = app_cli_format_seconds (c->step_time_s);
      g_autofree char *mem = app_cli_format_bytes (c->memory_per_device_bytes);
      g_autofree char *pipe = c->pp > 1 ? g_strdup_printf ("1f1b m=%u bubble %.3f ",
                                                           c->micro_batches, c->bubble_fraction)
                                        : g_strdup ("");
      printf ("  %-4u %-16s %-12s %14s %14s  %s%s%s%s%s\n", r + 1, c->mesh,
              c->solved ? "optimal" : c->policy, step, mem, pipe,
              (int)i == result->best ? "best " : "", c->pareto ? "pareto " : "",
              c->fits ? "" : "DOES NOT FIT ", g_ptr_array_index (saved_names, i) ? "saved" : "");
    }
  printf ("\nExact solves (what the objective counts: docs/search.md):\n");
  for (guint i = 0; i < result->candidates->len; i++)
    {
      const PlannerSearchCandidate *c = g_ptr_array_index (result->candidates, i);
      if (!c->solved)
        continue;
      if (c->plan == NULL)
        {
          printf ("  %-16s not solved: %s\n", c->mesh, c->error);
          continue;
        }
      g_autofree char *obj = app_cli_format_seconds (c->report.objective_s);
      g_autofree char *greedy = app_cli_format_seconds (c->report.seed_objective_s);
      printf ("  %-16s objective %s (greedy %s), %s, %.1f ms, %u blocks in %u kind%s\n", c->mesh,
              obj, greedy, c->report.optimal ? "optimal (proven)" : "gap", c->report.solve_ms,
              c->report.n_blocks, c->report.n_block_kinds, c->report.n_block_kinds == 1 ? "" : "s");
      if (!c->report.optimal)
        printf ("  %-16s gap %.3g%% to the bound %g s\n", "", 100 * c->report.gap,
                c->report.bound_s);
    }
  for (guint i = 0; i < result->candidates->len; i++)
    {
      const PlannerSearchCandidate *c = g_ptr_array_index (result->candidates, i);
      if (!c->solved && c->plan == NULL)
        printf ("  %s %s: no plan: %s\n", c->mesh, c->policy, c->error);
    }
  if (result->best >= 0)
    {
      const PlannerSearchCandidate *c = g_ptr_array_index (result->candidates, result->best);
      g_autofree char *step = app_cli_format_seconds (c->step_time_s);
      printf ("\nBest: %s %s, step %s\n", c->mesh, c->solved ? "optimal" : c->policy, step);
    }
  else
    printf ("\nBest: none fits in %s per device\n", limit);
  printf ("Search:   %.1f ms\n", result->search_ms);
  return APP_CLI_EXIT_OK;
}
