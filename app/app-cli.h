/* app-cli.h: what the subcommands of shardscope-cli share (architecture.md, "CLI contract").
 *
 * A subcommand is one entry of the table in shardscope-cli.c: a name, its arguments, a
 * one-line summary and a handler. The handler parses its own options with a GOptionContext
 * made by app_cli_context_new(), adds the common groups it needs, and returns an exit status:
 * 0 done, 1 refused input (the GError on stderr), 2 bad usage (a usage line on stderr).
 */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-graph.h"
#include "planner-model.h"
#include "planner-plan.h"
#include "planner-solve.h"
#include "planner-store.h"

G_BEGIN_DECLS

enum
{
  APP_CLI_EXIT_OK = 0,
  APP_CLI_EXIT_REFUSED = 1,
  APP_CLI_EXIT_USAGE = 2,
};

/* The hardware profile that estimates use unless --hardware says otherwise. */
#define APP_CLI_DEFAULT_HARDWARE "h100-sxm"

typedef struct _AppCliCommand AppCliCommand;

struct _AppCliCommand
{
  const char *name;
  const char *args;    /* "MODEL --mesh M --op NAME", for usage lines */
  const char *summary; /* one line, for --help */
  int (*run) (const AppCliCommand *command, int argc, char **argv);
};

/* An integer option not given on the command line (set before parsing). */
#define APP_CLI_UNSET G_MININT64

/* Options every command that loads a model takes: --batch, --seq, --layers, --dtype.
 * app_cli_add_model_options() sets the numbers to APP_CLI_UNSET. */
typedef struct
{
  gint64 batch;
  gint64 seq;
  gint64 layers;
  char *dtype;
  /* --pad-vocab, --kv-replicas (issue 16) */
  gint64 pad_vocab;
  gint64 kv_replicas;
} AppCliModelArgs;

void app_cli_model_args_clear (AppCliModelArgs *args);
/* Whether any of --batch, --seq, --layers, --dtype was given. */
gboolean app_cli_model_args_given (const AppCliModelArgs *args);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (AppCliModelArgs, app_cli_model_args_clear)

/* A context named after @command, with --help listing its arguments and summary. */
GOptionContext *app_cli_context_new (const AppCliCommand *command);
void app_cli_add_model_options (GOptionContext *context, AppCliModelArgs *args);
void app_cli_add_json_option (GOptionContext *context, gboolean *json);

/* app_cli_context_new() with the command's own @entries (NULL for none), then the common
 * options it takes: --batch, --seq, --layers and --dtype into @model_args, --db where @db,
 * --json into @json (a NULL or FALSE leaves one out). */
GOptionContext *app_cli_options_new (const AppCliCommand *command, const GOptionEntry *entries,
                                     AppCliModelArgs *model_args, gboolean db, gboolean *json);

/* Parses the options and checks that between @min_args and @max_args positional arguments
 * remain (argv[0] is the command). Returns -1 to go on, else the exit status to return. */
int app_cli_parse (const AppCliCommand *command, GOptionContext *context, int *argc,
                   char ***argv, int min_args, int max_args);

/* Prints "shardscope-cli COMMAND: MESSAGE" and the usage line on stderr; returns 2. */
int app_cli_usage_error (const AppCliCommand *command, const char *format, ...)
  G_GNUC_PRINTF (2, 3);
/* The range checks of numeric options, after app_cli_parse(): -1 when @value is a number in
 * range, else 2 after a usage line naming @option, the value and the range. Doubles must be
 * finite (no nan, inf); @min_open excludes @min itself. */
int app_cli_check_int (const AppCliCommand *command, const char *option, gint64 value, gint64 min,
                       gint64 max);
int app_cli_check_double (const AppCliCommand *command, const char *option, double value,
                          double min, gboolean min_open, double max);

/* Prints "shardscope-cli: MESSAGE" on stderr; returns 1. */
int app_cli_refuse (const GError *error);

/* Loads MODEL (zoo name, config.json or graph JSON) with the common options. An unknown
 * --dtype or a --batch, --seq or --layers out of range is bad usage: *@status is then 2
 * (else 1 on a refusal). */
PlannerGraph *app_cli_load_model (const AppCliCommand *command, const char *model,
                                  const AppCliModelArgs *args, int *status);

/* ---- output ---- */

/* "[8,1024,768]" */
char *app_cli_format_shape (const gint64 *shape, guint rank);
/* "124,439,808" */
char *app_cli_format_count (guint64 count);
/* "2.34 TFLOP", "474.7 MiB": human scale next to the exact figure. */
char *app_cli_format_flops (double flops);
char *app_cli_format_bytes (guint64 bytes);
char *app_cli_format_seconds (double seconds);

/* A plan's totals as text output shows them: times by app_cli_format_seconds(), sizes by
 * app_cli_format_bytes(). */
typedef struct
{
  char *step;       /* training step */
  char *compute;    /* forward compute */
  char *comm;       /* forward communication time */
  char *comm_bytes; /* forward communication bytes */
  char *backward;   /* backward communication */
  char *sync;       /* gradient sync */
  char *memory;     /* memory per device */
} AppCliTotalsText;

void app_cli_totals_text_init (AppCliTotalsText *text, const PlannerPlanTotals *totals);
void app_cli_totals_text_clear (AppCliTotalsText *text);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (AppCliTotalsText, app_cli_totals_text_clear)

/* JSON helpers: numbers that are whole are written as integers. */
void app_cli_json_add_number (JsonBuilder *builder, const char *member, double value);
void app_cli_json_add_shape (JsonBuilder *builder, const char *member, const gint64 *shape,
                             guint rank);
/* @value, or null when it is NULL. */
void app_cli_json_add_string (JsonBuilder *builder, const char *member, const char *value);
void app_cli_json_add_int (JsonBuilder *builder, const char *member, gint64 value);
/* Writes @root to stdout, two-space indented, "key": value, one trailing newline. */
void app_cli_json_print (JsonNode *root);
/* The same for what @builder built, and for JSON text made elsewhere. */
void app_cli_json_print_builder (JsonBuilder *builder);
void app_cli_json_print_text (const char *json);

/* ---- commands (app-cli-graph.c) ---- */

int app_cli_models (const AppCliCommand *command, int argc, char **argv);
int app_cli_graph (const AppCliCommand *command, int argc, char **argv);
int app_cli_strategies (const AppCliCommand *command, int argc, char **argv);

/* ---- commands (app-cli-plan.c) ---- */

int app_cli_propagate (const AppCliCommand *command, int argc, char **argv);
int app_cli_compare (const AppCliCommand *command, int argc, char **argv);
int app_cli_export (const AppCliCommand *command, int argc, char **argv);

/* PLAN as commands take it: a plan JSON file, or db:ID / db:NAME, a plan in the store. */
PlannerPlan *app_cli_load_plan (const char *spec, GError **error);

/* ---- the plan store (app-cli-db.c) ---- */

int app_cli_db (const AppCliCommand *command, int argc, char **argv);
/* --db FILE: the store db:ID and db:NAME read and --save writes (default: $SHARDSCOPE_DB, else
 * $XDG_DATA_HOME/shardscope/plans.db). */
void app_cli_add_db_option (GOptionContext *context);
/* That store, opened on first use and closed at exit; borrowed. Unless @create, a store file
 * that does not exist is an error rather than a new store. */
PlannerStore *app_cli_get_store (gboolean create, GError **error);
/* A stored plan by name or id (what follows "db:"); it remembers its id. */
PlannerPlan *app_cli_db_load_plan (const char *name_or_id, GError **error);
/* The store id of a plan that app_cli_db_load_plan() loaded, else 0. */
gint64 app_cli_db_plan_id (PlannerPlan *plan);
/* The latest trial run of such a plan, or NULL. */
PlannerTrialRun *app_cli_db_latest_trial_run (PlannerPlan *plan);
/* Pins of a plan derived from @parent: @pins holds the policy's (priority 0) and the new
 * --pin ones, which this raises to 2 so they override the parent's own pins, added at 1. */
gboolean app_cli_derive_pins (PlannerPlan *parent, GPtrArray *pins, const PlannerMesh *mesh,
                              GError **error);

/* ---- commands (app-cli-search.c) ---- */

int app_cli_search (const AppCliCommand *command, int argc, char **argv);
/* An exact solve's report as JSON members (optimum, bound, proof, gap, times). */
void app_cli_json_add_solve_report (JsonBuilder *builder, const PlannerSolveReport *report);

/* ---- commands (app-cli-render.c) ---- */

int app_cli_render (const AppCliCommand *command, int argc, char **argv);

/* ---- commands (app-cli-run.c) ---- */

int app_cli_run (const AppCliCommand *command, int argc, char **argv);
int app_cli_calibrate (const AppCliCommand *command, int argc, char **argv);

G_END_DECLS
