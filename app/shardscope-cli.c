#define G_LOG_DOMAIN "shardscope-cli"

#include "config.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app-cli.h"
#include "planner-error.h"
#include "planner-json.h"

/* shardscope-cli: the headless front end. Each subcommand is one row of this table; the
 * handlers live in app-cli-*.c and share the helpers below. */
static const AppCliCommand commands[] = {
  { "models", "", "list the zoo and the Hugging Face model types it reads", app_cli_models },
  { "graph", "MODEL", "ops, tensors, parameters, parameter bytes, forward FLOPs", app_cli_graph },
  { "strategies", "MODEL --mesh M --op NAME",
    "the legal strategies of one op, 50 at a time: layouts, local shapes, FLOPs",
    app_cli_strategies },
  { "propagate", "MODEL --mesh M [--pin OP=LAYOUTS]... [--policy NAME|FILE]",
    "a full plan from pins and a policy: strategies, redistributions, costs", app_cli_propagate },
  { "search", "MODEL --devices N [--pin OP=LAYOUTS]... [--top K] [--save PREFIX]",
    "the fastest plans on every mesh of N devices: built-in policies and the exact solve",
    app_cli_search },
  { "compare", "PLAN PLAN", "per-op differences, redistributions added/removed, cost deltas",
    app_cli_compare },
  { "export", "PLAN --format FORMAT [-o FILE]",
    "write a plan in another format (json, dtensor, mindspore, mindspore-shard, jax, csv)", app_cli_export },
  { "render", "MODEL|PLAN --png|--svg|--pdf FILE",
    "draw the graph and plan: strategies, redistributions, propagation steps", app_cli_render },
  { "run", "PLAN --backend cpu|cuda|nccl",
    "run a plan sharded against the unsharded reference: errors, measured vs estimated times",
    app_cli_run },
  { "calibrate", "--backend cpu -o FILE",
    "measure collectives and GEMM throughput into a hardware profile", app_cli_calibrate },
  { "db", "list|show|delete|rename ... [--db FILE]",
    "the plan store: list, show, delete and rename stored plans", app_cli_db },
};

#define PROGRAM "shardscope-cli"

/* Calls longer than this get their summary on the next line, so one long call does not push
 * every summary off an 80-column terminal. */
#define USAGE_CALL_WIDTH 36

static void
print_usage (FILE *out)
{
  int width = 0;
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      int w = (int) (strlen (commands[i].name) + 1 + strlen (commands[i].args));
      if (w <= USAGE_CALL_WIDTH)
        width = MAX (width, w);
    }

  fprintf (out, "Usage: " PROGRAM " COMMAND [OPTION...] [ARG...]\n\n"
                "Plans how a neural network's tensors are sharded over a device mesh.\n\n"
                "Commands:\n");
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_autofree char *call = g_strdup_printf ("%s %s", commands[i].name, commands[i].args);
      g_strchomp (call);
      if ((int) strlen (call) <= width)
        fprintf (out, "  %-*s  %s\n", width, call, commands[i].summary);
      else
        fprintf (out, "  %s\n  %-*s  %s\n", call, width, "", commands[i].summary);
    }
  fprintf (out, "\nMODEL is a zoo name (see 'models'), a Hugging Face config.json or a graph JSON "
                "file;\nM is a mesh such as dp=4,mp=2. Every command takes --json.\n"
                "Run '" PROGRAM " COMMAND --help' for the options of a command.\n");
}

static const AppCliCommand *
find_command (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

/* Output that did not reach standard output (a full disk, `> /dev/full`) is a refusal,
 * not a success: stdio only says so when it is flushed and closed. */
static int
finish_stdout (int status)
{
  /* A write that failed earlier left only the error flag; the last flush and the close say
   * why when they fail themselves. */
  gboolean lost = ferror (stdout) != 0;
  int saved = 0;
  if (fflush (stdout) != 0)
    saved = errno;
  if (fclose (stdout) != 0 && saved == 0)
    saved = errno;
  if (!lost && saved == 0)
    return status;
  fprintf (stderr,
           PROGRAM ": cannot write standard output: %s; free space there or send the "
                   "output elsewhere\n",
           saved ? g_strerror (saved) : "part of the output was lost (is the disk full?)");
  return status == APP_CLI_EXIT_OK ? APP_CLI_EXIT_REFUSED : status;
}

int
main (int argc, char *argv[])
{
  setlocale (LC_ALL, "");
  /* Numbers in text and JSON output are the same on every machine. */
  setlocale (LC_NUMERIC, "C");

  if (argc < 2)
    {
      print_usage (stderr);
      return APP_CLI_EXIT_USAGE;
    }
  const char *name = argv[1];
  if (strcmp (name, "--help") == 0 || strcmp (name, "-h") == 0 || strcmp (name, "help") == 0)
    {
      if (strcmp (name, "help") == 0 && argc > 2 && find_command (argv[2]))
        {
          char *help_argv[] = { argv[2], (char *) "--help", NULL };
          const AppCliCommand *command = find_command (argv[2]);
          g_autofree char *prgname = g_strdup_printf (PROGRAM " %s", command->name);
          g_set_prgname (prgname);
          return command->run (command, 2, help_argv);
        }
      print_usage (stdout);
      return finish_stdout (APP_CLI_EXIT_OK);
    }
  if (strcmp (name, "--version") == 0)
    {
      printf (PROGRAM " %s\n", PACKAGE_VERSION);
      return finish_stdout (APP_CLI_EXIT_OK);
    }

  const AppCliCommand *command = find_command (name);
  if (command == NULL)
    {
      if (name[0] == '-')
        fprintf (stderr, PROGRAM ": unknown option '%s'; options follow the command\n", name);
      else
        fprintf (stderr, PROGRAM ": unknown command '%s'\n", name);
      print_usage (stderr);
      return APP_CLI_EXIT_USAGE;
    }

  /* GOption's --help prints "Usage: PRGNAME [OPTION...] ARGS". */
  g_autofree char *prgname = g_strdup_printf (PROGRAM " %s", command->name);
  g_set_prgname (prgname);
  int status = command->run (command, argc - 1, argv + 1);
  return finish_stdout (status);
}

/* ---- options ---- */

void
app_cli_model_args_clear (AppCliModelArgs *args)
{
  g_clear_pointer (&args->dtype, g_free);
}

gboolean
app_cli_model_args_given (const AppCliModelArgs *args)
{
  return args->batch != APP_CLI_UNSET || args->seq != APP_CLI_UNSET || args->layers != APP_CLI_UNSET
         || args->dtype != NULL || args->pad_vocab != APP_CLI_UNSET
         || args->kv_replicas != APP_CLI_UNSET;
}

/* The largest shapes the model options take: far beyond any model, and small enough that
 * batch x seq x hidden x vocab stays inside 64-bit sizes. */
#define MAX_BATCH (1 << 20)
#define MAX_SEQ (1 << 24)
#define MAX_LAYERS 4096

GOptionContext *
app_cli_context_new (const AppCliCommand *command)
{
  GOptionContext *context = g_option_context_new (command->args);
  g_option_context_set_summary (context, command->summary);
  return context;
}

void
app_cli_add_model_options (GOptionContext *context, AppCliModelArgs *args)
{
  args->batch = args->seq = args->layers = APP_CLI_UNSET;
  args->pad_vocab = args->kv_replicas = APP_CLI_UNSET;
  const GOptionEntry entries[] = {
    { "batch", 0, 0, G_OPTION_ARG_INT64, &args->batch, "Batch size (default 8)", "N" },
    { "seq", 0, 0, G_OPTION_ARG_INT64, &args->seq,
      "Sequence length (default 1024, or the model's maximum positions if smaller)", "N" },
    { "layers", 0, 0, G_OPTION_ARG_INT64, &args->layers,
      "Number of layers (default: the config's)", "N" },
    { "dtype", 0, 0, G_OPTION_ARG_STRING, &args->dtype,
      "Parameter and activation dtype: f32, bf16, f16 (default: the config's torch_dtype, else "
      "f32)",
      "DTYPE" },
    { "pad-vocab", 0, 0, G_OPTION_ARG_INT64, &args->pad_vocab,
      "Pad the vocabulary to a multiple of N, as Megatron-LM does, so that tensor parallelism "
      "splits the embedding and lm_head (adds the padding rows to the parameters)",
      "N" },
    { "kv-replicas", 0, 0, G_OPTION_ARG_INT64, &args->kv_replicas,
      "Repeat each key/value head R times (grouped-query attention on more tensor-parallel "
      "ranks than kv heads: each rank computes its copy of its group's head, as Megatron-LM "
      "replicates them)",
      "R" },
    { NULL },
  };
  /* In the main group, so that plain --help shows them. */
  g_option_context_add_main_entries (context, entries, NULL);
}

void
app_cli_add_json_option (GOptionContext *context, gboolean *json)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, json, "Print one JSON object instead of text", NULL },
    { NULL },
  };
  g_option_context_add_main_entries (context, entries, NULL);
}

static void
print_usage_line (const AppCliCommand *command)
{
  fprintf (stderr, "Usage: " PROGRAM " %s%s%s [OPTION...]\n", command->name,
           command->args[0] ? " " : "", command->args);
  fprintf (stderr, "Run '" PROGRAM " %s --help' for its options.\n", command->name);
}

int
app_cli_usage_error (const AppCliCommand *command, const char *format, ...)
{
  va_list args;
  va_start (args, format);
  g_autofree char *message = g_strdup_vprintf (format, args);
  va_end (args);
  fprintf (stderr, PROGRAM " %s: %s\n", command->name, message);
  print_usage_line (command);
  return APP_CLI_EXIT_USAGE;
}

int
app_cli_check_int (const AppCliCommand *command, const char *option, gint64 value, gint64 min,
                   gint64 max)
{
  if (value >= min && value <= max)
    return -1;
  return app_cli_usage_error (command,
                              "%s %" G_GINT64_FORMAT
                              " is out of range: give a whole number from %" G_GINT64_FORMAT
                              " to %" G_GINT64_FORMAT,
                              option, value, min, max);
}

int
app_cli_check_double (const AppCliCommand *command, const char *option, double value, double min,
                      gboolean min_open, double max)
{
  /* Written so that NaN, which compares false with everything, fails. */
  if (isfinite (value) && (min_open ? value > min : value >= min) && value <= max)
    return -1;
  return app_cli_usage_error (command, "%s %g is out of range: give a number in %s%g, %g]", option,
                              value, min_open ? "(" : "[", min, max);
}

int
app_cli_refuse (const GError *error)
{
  fprintf (stderr, PROGRAM ": %s\n", error->message);
  return APP_CLI_EXIT_REFUSED;
}

int
app_cli_parse (const AppCliCommand *command, GOptionContext *context, int *argc, char ***argv,
               int min_args, int max_args)
{
  g_autoptr (GError) error = NULL;

  if (!g_option_context_parse (context, argc, argv, &error))
    return app_cli_usage_error (command, "%s", error->message);
  int n = *argc - 1;
  if (n < min_args)
    return app_cli_usage_error (command, "missing argument: %s", command->args);
  if (n > max_args)
    return app_cli_usage_error (command, "unexpected argument '%s'", (*argv)[1 + max_args]);
  return -1;
}

PlannerGraph *
app_cli_load_model (const AppCliCommand *command, const char *model, const AppCliModelArgs *args,
                    int *status)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;

  const struct
  {
    const char *option;
    gint64 value, max;
  } sizes[] = {
    { "--batch", args->batch, MAX_BATCH },
    { "--seq", args->seq, MAX_SEQ },
    { "--layers", args->layers, MAX_LAYERS },
    { "--pad-vocab", args->pad_vocab, MAX_BATCH },
    { "--kv-replicas", args->kv_replicas, MAX_LAYERS },
  };
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    if (sizes[i].value != APP_CLI_UNSET
        && (*status = app_cli_check_int (command, sizes[i].option, sizes[i].value, 1, sizes[i].max))
               >= 0)
      return NULL;

  planner_model_options_init (&options);
  /* 0: the model's own. */
  options.batch = args->batch == APP_CLI_UNSET ? 0 : args->batch;
  options.seq = args->seq == APP_CLI_UNSET ? 0 : args->seq;
  options.layers = args->layers == APP_CLI_UNSET ? 0 : args->layers;
  options.pad_vocab = args->pad_vocab == APP_CLI_UNSET ? 0 : args->pad_vocab;
  options.kv_replicas = args->kv_replicas == APP_CLI_UNSET ? 0 : args->kv_replicas;
  if (args->dtype)
    {
      if (!planner_dtype_from_string (args->dtype, &options.dtype)
          || options.dtype == PLANNER_DTYPE_I64)
        {
          *status = app_cli_usage_error (command, "--dtype '%s' is not one of f32, bf16, f16",
                                         args->dtype);
          return NULL;
        }
      options.dtype_set = TRUE;
    }
  PlannerGraph *graph = planner_model_load (model, &options, &error);
  if (graph == NULL)
    *status = app_cli_refuse (error);
  return graph;
}

/* ---- text output ---- */

char *
app_cli_format_shape (const gint64 *shape, guint rank)
{
  GString *s = g_string_new ("[");
  for (guint d = 0; d < rank; d++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? "," : "", shape[d]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static char *
format_scaled (double value, const char *const *units, guint n_units, double step,
               const char *unit)
{
  guint u = 0;
  while (u + 1 < n_units && fabs (value) >= step)
    {
      value /= step;
      u++;
    }
  if (u == 0)
    return g_strdup_printf ("%.0f %s%s", value, units[u], unit);
  return g_strdup_printf ("%.*f %s%s", fabs (value) < 10 ? 2 : 1, value,
                          units[u], unit);
}

char *
app_cli_format_count (guint64 count)
{
  static const char *const units[] = { "", "K", "M", "B", "T" };
  g_autofree char *s = format_scaled ((double) count, units, G_N_ELEMENTS (units), 1000, "");
  return g_strdup (g_strchomp (s));
}

char *
app_cli_format_flops (double flops)
{
  static const char *const units[] = { "", "K", "M", "G", "T", "P", "E" };
  return format_scaled (flops, units, G_N_ELEMENTS (units), 1000, "FLOP");
}

char *
app_cli_format_bytes (guint64 bytes)
{
  static const char *const units[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi" };
  return format_scaled ((double) bytes, units, G_N_ELEMENTS (units), 1024, "B");
}

char *
app_cli_format_seconds (double seconds)
{
  if (seconds >= 1)
    return g_strdup_printf ("%.3f s", seconds);
  if (seconds >= 1e-3)
    return g_strdup_printf ("%.3f ms", seconds * 1e3);
  return g_strdup_printf ("%.3f us", seconds * 1e6);
}

/* ---- JSON output ---- */

void
app_cli_json_add_number (JsonBuilder *builder, const char *member, double value)
{
  if (member)
    json_builder_set_member_name (builder, member);
  /* FLOP counts are whole numbers: write them as such, exactly, below 2^53. */
  if (value == floor (value) && fabs (value) < 9007199254740992.0)
    json_builder_add_int_value (builder, (gint64) value);
  else
    json_builder_add_double_value (builder, value);
}

void
app_cli_json_add_shape (JsonBuilder *builder, const char *member, const gint64 *shape,
                        guint rank)
{
  if (member)
    json_builder_set_member_name (builder, member);
  json_builder_begin_array (builder);
  for (guint d = 0; d < rank; d++)
    json_builder_add_int_value (builder, shape[d]);
  json_builder_end_array (builder);
}

static gboolean
is_scalar_array (JsonArray *array)
{
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *e = json_array_get_element (array, i);
      if (JSON_NODE_HOLDS_OBJECT (e) || JSON_NODE_HOLDS_ARRAY (e))
        return FALSE;
    }
  return TRUE;
}

/* json-glib's pretty printer writes "key" : value; scripts and people expect the common
 * "key": value with two-space indent (Python's json.dumps(indent=2)), and short arrays of
 * numbers such as shapes on one line. */
static void
write_node (GString *out, JsonNode *node, guint indent)
{
  if (JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObject *object = json_node_get_object (node);
      JsonObjectIter iter;
      const char *name;
      JsonNode *member;
      gboolean first = TRUE;

      if (json_object_get_size (object) == 0)
        {
          g_string_append (out, "{}");
          return;
        }
      g_string_append (out, "{\n");
      json_object_iter_init_ordered (&iter, object);
      while (json_object_iter_next_ordered (&iter, &name, &member))
        {
          if (!first)
            g_string_append (out, ",\n");
          first = FALSE;
          g_string_append_printf (out, "%*s", indent + 2, "");
          planner_json_append_string (out, name);
          g_string_append (out, ": ");
          write_node (out, member, indent + 2);
        }
      g_string_append_printf (out, "\n%*s}", indent, "");
    }
  else if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *array = json_node_get_array (node);
      guint n = json_array_get_length (array);
      if (n == 0)
        {
          g_string_append (out, "[]");
          return;
        }
      if (is_scalar_array (array))
        {
          g_string_append_c (out, '[');
          for (guint i = 0; i < n; i++)
            {
              if (i)
                g_string_append (out, ", ");
              planner_json_append_scalar (out, json_array_get_element (array, i));
            }
          g_string_append_c (out, ']');
          return;
        }
      g_string_append (out, "[\n");
      for (guint i = 0; i < n; i++)
        {
          if (i)
            g_string_append (out, ",\n");
          g_string_append_printf (out, "%*s", indent + 2, "");
          write_node (out, json_array_get_element (array, i), indent + 2);
        }
      g_string_append_printf (out, "\n%*s]", indent, "");
    }
  else
    planner_json_append_scalar (out, node);
}

void
app_cli_json_print (JsonNode *root)
{
  g_autoptr (GString) out = g_string_new (NULL);
  write_node (out, root, 0);
  g_string_append_c (out, '\n');
  fwrite (out->str, 1, out->len, stdout);
}
