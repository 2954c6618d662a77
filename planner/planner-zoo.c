#define G_LOG_DOMAIN "planner-zoo"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-model-private.h"
#include "planner-onnx-import.h"
#include "planner-resources.h"

/* The zoo: model configs compiled into the planner (data/models/), and MODEL resolution
 * for the CLI and the GUI (zoo name, config.json path or graph JSON path). */

typedef struct
{
  const char *name;
  const char *resource; /* planner_resources_lookup() path */
} ZooEntry;

static const ZooEntry zoo[] = {
  { "gpt2", "models/gpt2.json" },
  { "gpt2-tiny", "models/gpt2-tiny.json" },
  { "llama", "models/llama-2-7b.json" },
  { "llama-tiny", "models/llama-tiny.json" },
  { "llama-70b", "models/llama-2-70b.json" },
  { "mistral", "models/mistral-7b-v0.1.json" },
  { "qwen2", "models/qwen2-0.5b.json" },
  { "bert", "models/bert-base-uncased.json" },
  { "mlp", "models/mlp.graph.json" },
  /* Mixtures of experts (issue 16). */
  { "mixtral", "models/mixtral-8x7b-v0.1.json" },
  { "qwen2-moe", "models/qwen1.5-moe-a2.7b.json" },
};

const char *const *
planner_zoo_names (void)
{
  static const char *names[G_N_ELEMENTS (zoo) + 1];
  static gsize initialized = 0;

  if (g_once_init_enter (&initialized))
    {
      for (guint i = 0; i < G_N_ELEMENTS (zoo); i++)
        names[i] = zoo[i].name;
      g_once_init_leave (&initialized, 1);
    }
  return names;
}

static const ZooEntry *
zoo_lookup (const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS (zoo); i++)
    if (g_str_equal (zoo[i].name, name))
      return &zoo[i];
  return NULL;
}

static JsonNode *
zoo_load (const ZooEntry *entry, GError **error)
{
  g_autoptr (GBytes) bytes = planner_resources_lookup (entry->resource, error);
  gsize length;
  const char *text;

  if (bytes == NULL)
    {
      g_prefix_error (error, "zoo model %s: ", entry->name);
      return NULL;
    }
  text = g_bytes_get_data (bytes, &length);
  return planner_json_parse (text, length, entry->resource, error);
}

static gboolean
is_graph_json (JsonNode *root)
{
  return json_object_has_member (json_node_get_object (root), "shardscope_graph");
}

/* A graph JSON as a model: its shapes are fixed, so overrides are refused rather than
 * silently ignored. */
static PlannerGraph *
graph_json_model (JsonNode *root, const PlannerModelOptions *options, const char *what,
                  const char *source, const char *name, GError **error)
{
  g_autoptr (PlannerGraph) graph = NULL;
  g_autoptr (GError) local_error = NULL;

  if (options != NULL && !planner_model_options_is_default (options))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "%s: a graph JSON has fixed shapes; batch, seq, layers and dtype overrides "
                   "do not apply to it",
                   what);
      return NULL;
    }
  graph = planner_graph_from_json_node (root, &local_error);
  if (graph == NULL)
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&local_error), "%s: ", what);
      return NULL;
    }
  planner_graph_set_source (graph, source);
  if (name != NULL)
    planner_graph_set_name (graph, name);
  else if (planner_graph_get_name (graph) == NULL || *planner_graph_get_name (graph) == '\0')
    {
      g_autofree char *basename = g_path_get_basename (what);

      planner_graph_set_name (graph, basename);
    }
  return g_steal_pointer (&graph);
}

static char *
zoo_names_joined (void)
{
  return g_strjoinv (", ", (char **)planner_zoo_names ());
}

PlannerGraph *
planner_zoo_build (const char *name, const PlannerModelOptions *options, GError **error)
{
  const ZooEntry *entry;
  g_autoptr (JsonNode) root = NULL;

  g_return_val_if_fail (name != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  entry = zoo_lookup (name);
  if (entry == NULL)
    {
      g_autofree char *names = zoo_names_joined ();

      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL,
                   "unknown zoo model \"%s\"; the zoo has: %s", name, names);
      return NULL;
    }
  root = zoo_load (entry, error);
  if (root == NULL)
    return NULL;
  if (is_graph_json (root))
    return graph_json_model (root, options, name, name, name, error);
  return planner_hf_build (json_node_get_object (root), options, name, name, name, error);
}

static char *
format_count (guint64 count)
{
  if (count >= 1000000000)
    return g_strdup_printf ("%.2fB", count / 1e9);
  if (count >= 1000000)
    return g_strdup_printf ("%.1fM", count / 1e6);
  if (count >= 1000)
    return g_strdup_printf ("%.1fK", count / 1e3);
  return g_strdup_printf ("%" G_GUINT64_FORMAT, count);
}

char *
planner_zoo_describe (const char *name)
{
  const ZooEntry *entry;
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *params = NULL;
  PlannerModelOptions options;
  const char *model_type, *architecture;
  gint64 layers, hidden;

  g_return_val_if_fail (name != NULL, NULL);

  entry = zoo_lookup (name);
  if (entry == NULL)
    return NULL;
  root = zoo_load (entry, &error);
  if (root != NULL && is_graph_json (root))
    {
      graph = graph_json_model (root, NULL, name, name, name, &error);
      if (graph == NULL)
        return g_strdup_printf ("%s: %s", name, error->message);
      params = format_count (planner_graph_get_parameter_count (graph));
      return g_strdup_printf ("%s: graph JSON, %u ops, %s parameters", name,
                              planner_graph_get_n_ops (graph), params);
    }

  /* Parameter counts do not depend on batch or sequence: build the smallest shapes. */
  planner_model_options_init (&options);
  options.batch = 1;
  options.seq = 1;
  if (root == NULL
      || !planner_hf_summary (json_node_get_object (root), name, &model_type, &architecture,
                              &layers, &hidden, &error)
      || (graph
          = planner_hf_build (json_node_get_object (root), &options, name, name, name, &error))
             == NULL)
    return g_strdup_printf ("%s: %s", name, error->message);
  params = format_count (planner_graph_get_parameter_count (graph));
  return g_strdup_printf ("%s: %s (%s), %" G_GINT64_FORMAT " layers, hidden %" G_GINT64_FORMAT
                          ", %s parameters",
                          name, model_type, architecture, layers, hidden, params);
}

PlannerGraph *
planner_model_load (const char *model, const PlannerModelOptions *options, GError **error)
{
  g_autofree char *absolute = NULL;
  g_autoptr (JsonNode) root = NULL;
  JsonObject *object;

  g_return_val_if_fail (model != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (zoo_lookup (model) != NULL)
    return planner_zoo_build (model, options, error);
  if (!g_file_test (model, G_FILE_TEST_IS_REGULAR))
    {
      g_autofree char *names = zoo_names_joined ();

      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_MODEL,
                   "\"%s\" is neither a zoo model (%s) nor a file", model, names);
      return NULL;
    }
  if (planner_onnx_is_onnx_path (model))
    return planner_onnx_import_file (model, options, error);
  root = planner_json_load_file (model, NULL, error);
  if (root == NULL || (object = planner_json_expect_object (root, model, error)) == NULL)
    return NULL;
  absolute = g_canonicalize_filename (model, NULL);
  if (json_object_has_member (object, "shardscope_graph"))
    return graph_json_model (root, options, model, absolute, NULL, error);
  if (json_object_has_member (object, "model_type"))
    return planner_hf_build (object, options, model, absolute, NULL, error);
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
               "%s: neither a Hugging Face config.json (no \"model_type\") nor a graph JSON "
               "(no \"shardscope_graph\")",
               model);
  return NULL;
}

/* "batch=8&seq=1024&layers=12&dtype=f32" */
static gboolean
parse_query (const char *query, PlannerModelOptions *options, GError **error)
{
  g_auto (GStrv) pairs = g_strsplit (query, "&", -1);

  for (guint i = 0; pairs[i] != NULL; i++)
    {
      const char *eq = strchr (pairs[i], '=');
      g_autofree char *key = NULL;
      const char *value;
      gint64 *target = NULL;
      guint64 number;

      if (eq == NULL)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE, "\"%s\" is not KEY=VALUE",
                       pairs[i]);
          return FALSE;
        }
      key = g_strndup (pairs[i], eq - pairs[i]);
      value = eq + 1;
      if (g_str_equal (key, "dtype"))
        {
          if (!planner_dtype_from_string (value, &options->dtype))
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                           "dtype \"%s\" is not one of f32, bf16, f16", value);
              return FALSE;
            }
          options->dtype_set = TRUE;
          continue;
        }
      if (g_str_equal (key, "batch"))
        target = &options->batch;
      else if (g_str_equal (key, "seq"))
        target = &options->seq;
      else if (g_str_equal (key, "layers"))
        target = &options->layers;
      else if (g_str_equal (key, "pad_vocab"))
        target = &options->pad_vocab;
      else if (g_str_equal (key, "kv_replicas"))
        target = &options->kv_replicas;
      else
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                       "unknown key \"%s\" (batch, seq, layers, dtype, pad_vocab, kv_replicas)",
                       key);
          return FALSE;
        }
      if (!g_ascii_string_to_unsigned (value, 10, 1, G_MAXINT64, &number, NULL))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                       "%s \"%s\" is not a positive integer", key, value);
          return FALSE;
        }
      *target = number;
    }
  return TRUE;
}

PlannerGraph *
planner_model_load_source (const char *source, GError **error)
{
  PlannerModelOptions options;
  const char *question;
  g_autofree char *base = NULL;
  g_autoptr (GError) query_error = NULL;

  g_return_val_if_fail (source != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  planner_model_options_init (&options);
  /* The options follow the last '?'; a path that itself holds a '?' still loads when the
   * text after it is no option list. */
  question = strrchr (source, '?');
  if (question != NULL && parse_query (question + 1, &options, &query_error))
    base = g_strndup (source, question - source);
  else if (question != NULL && !g_file_test (source, G_FILE_TEST_EXISTS))
    {
      g_propagate_prefixed_error (error, g_steal_pointer (&query_error), "source \"%s\": ", source);
      return NULL;
    }
  else
    {
      planner_model_options_init (&options);
      base = g_strdup (source);
    }

  if (g_str_has_prefix (base, PLANNER_HF_TEXT_SOURCE_SCHEME))
    return planner_hf_import_text_source (base, &options, error);
  return planner_model_load (base, &options, error);
}
