#define G_LOG_DOMAIN "planner-policy"

#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-resources.h"

static const char *const builtin_names[] = { "megatron", "megatron-sp", "dp", NULL };

const char *const *
planner_policy_builtin_names (void)
{
  return builtin_names;
}

static gboolean
is_builtin (const char *name)
{
  return g_strv_contains (builtin_names, name);
}

/* @name of @object is absent or a JSON value of @type (G_TYPE_STRING, G_TYPE_BOOLEAN,
 * G_TYPE_INT64). */
static gboolean
member_is (JsonObject *object, const char *name, GType type)
{
  JsonNode *node = json_object_get_member (object, name);
  return node == NULL || (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == type);
}

/* Every element of @name of @object, when there, is a string. */
static gboolean
member_is_string_array (JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);
  if (node == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return FALSE;
  JsonArray *array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      JsonNode *element = json_array_get_element (array, i);
      if (!JSON_NODE_HOLDS_VALUE (element) || json_node_get_value_type (element) != G_TYPE_STRING)
        return FALSE;
    }
  return TRUE;
}

/* Every member the expansion reads has the type it reads it as: json-glib's getters log a
 * critical (and give nothing useful) on a member of another type. */
static gboolean
check_policy_types (JsonObject *obj, const char *what, GError **error)
{
  if (!member_is (obj, "shardscope_policy", G_TYPE_INT64) || !member_is (obj, "name", G_TYPE_STRING)
      || !member_is (obj, "description", G_TYPE_STRING))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "policy %s: \"shardscope_policy\" must be a number, \"name\" and "
                   "\"description\" strings",
                   what);
      return FALSE;
    }
  JsonNode *families = json_object_get_member (obj, "families");
  if (families == NULL || !JSON_NODE_HOLDS_ARRAY (families))
    return TRUE; /* planner_policy_expand says what "families" must be */
  JsonArray *family_array = json_node_get_array (families);
  for (guint i = 0; i < json_array_get_length (family_array); i++)
    {
      JsonNode *fn = json_array_get_element (family_array, i);
      if (!JSON_NODE_HOLDS_OBJECT (fn))
        continue;
      JsonObject *family = json_node_get_object (fn);
      if (!member_is (family, "family", G_TYPE_STRING)
          || !member_is (family, "detect", G_TYPE_STRING))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                       "policy %s: families[%u]: \"family\" must be a string and \"detect\" a "
                       "glob over op names such as \"*.c_attn\"",
                       what, i);
          return FALSE;
        }
      JsonNode *rules = json_object_get_member (family, "rules");
      if (rules == NULL || !JSON_NODE_HOLDS_ARRAY (rules))
        continue;
      JsonArray *rule_array = json_node_get_array (rules);
      for (guint r = 0; r < json_array_get_length (rule_array); r++)
        {
          JsonNode *rn = json_array_get_element (rule_array, r);
          if (!JSON_NODE_HOLDS_OBJECT (rn))
            continue;
          JsonObject *rule = json_node_get_object (rn);
          if (!member_is (rule, "ops", G_TYPE_STRING) || !member_is (rule, "pin", G_TYPE_STRING)
              || !member_is (rule, "batch", G_TYPE_STRING)
              || !member_is (rule, "optional", G_TYPE_BOOLEAN)
              || !member_is_string_array (rule, "types"))
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                           "policy %s: families[%u].rules[%u]: \"ops\", \"pin\" and \"batch\" "
                           "must be strings, \"optional\" true or false, \"types\" an array "
                           "of op type names such as [\"MatMul\"]",
                           what, i, r);
              return FALSE;
            }
        }
    }
  return TRUE;
}

static JsonNode *
load_policy (const char *name_or_path, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) local = NULL;

  if (is_builtin (name_or_path))
    {
      g_autofree char *path = g_strdup_printf ("policies/%s.json", name_or_path);
      g_autoptr (GBytes) bytes = planner_resources_lookup (path, error);
      if (bytes == NULL)
        return NULL;
      gsize size;
      const char *data = g_bytes_get_data (bytes, &size);
      if (!json_parser_load_from_data (parser, data, (gssize) size, error))
        return NULL;
    }
  else if (g_file_test (name_or_path, G_FILE_TEST_IS_REGULAR))
    {
      if (!json_parser_load_from_file (parser, name_or_path, &local))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                       "policy file %s is not valid JSON: %s", name_or_path, local->message);
          return NULL;
        }
      if (json_parser_get_root (parser) != NULL
          && !planner_json_check_utf8 (json_parser_get_root (parser), name_or_path, error))
        return NULL;
    }
  else
    {
      g_autofree char *names = g_strjoinv (", ", (char **) builtin_names);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_POLICY,
                   "unknown policy '%s': not a built-in (%s) and not a file", name_or_path,
                   names);
      return NULL;
    }
  JsonNode *root = json_parser_get_root (parser);
  if (root != NULL && JSON_NODE_HOLDS_OBJECT (root)
      && !check_policy_types (json_node_get_object (root), name_or_path, error))
    return NULL;
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)
      || json_object_get_int_member_with_default (json_node_get_object (root),
                                                  "shardscope_policy", 0)
           != 1)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "policy %s: expected an object with \"shardscope_policy\": 1", name_or_path);
      return NULL;
    }
  return json_node_copy (root);
}

char *
planner_policy_describe (const char *name)
{
  g_autoptr (JsonNode) root = load_policy (name, NULL);
  if (root == NULL)
    return NULL;
  return g_strdup_printf ("%s: %s", name,
                          json_object_get_string_member_with_default (
                            json_node_get_object (root), "description", ""));
}

typedef struct
{
  char tp[PLANNER_MAX_AXES * PLANNER_MAX_AXIS_NAME];
  char dp[PLANNER_MAX_AXES * PLANNER_MAX_AXIS_NAME];
  char all[PLANNER_MAX_AXES * PLANNER_MAX_AXIS_NAME];
  gboolean has_tp;
} PolicyAxes;

static void
join_axes (char *out, gsize size, const PlannerMesh *mesh, int skip)
{
  out[0] = '\0';
  for (guint a = 0; a < mesh->n_axes; a++)
    if ((int) a != skip)
      {
        if (out[0])
          g_strlcat (out, "+", size);
        g_strlcat (out, mesh->names[a], size);
      }
  if (out[0] == '\0')
    g_strlcpy (out, "_", size);
}

static void
policy_axes_init (PolicyAxes *ph, const PlannerMesh *mesh)
{
  int tp = planner_mesh_axis_index (mesh, "tp");
  if (tp < 0)
    tp = planner_mesh_axis_index (mesh, "mp");
  ph->has_tp = tp >= 0;
  if (ph->has_tp)
    g_strlcpy (ph->tp, mesh->names[tp], sizeof ph->tp);
  join_axes (ph->dp, sizeof ph->dp, mesh, tp);
  join_axes (ph->all, sizeof ph->all, mesh, -1);
}

static char *
substitute (const char *template, const PolicyAxes *ph)
{
  GString *s = g_string_new (NULL);
  for (const char *p = template; *p;)
    {
      if (g_str_has_prefix (p, "{tp}"))
        g_string_append (s, ph->tp), p += 4;
      else if (g_str_has_prefix (p, "{dp}"))
        g_string_append (s, ph->dp), p += 4;
      else if (g_str_has_prefix (p, "{all}"))
        g_string_append (s, ph->all), p += 5;
      else
        g_string_append_c (s, *p++);
    }
  return g_string_free (s, FALSE);
}

static gboolean
type_listed (JsonArray *types, PlannerOpType type)
{
  if (types == NULL)
    return TRUE;
  for (guint i = 0; i < json_array_get_length (types); i++)
    {
      PlannerOpType t;
      if (planner_op_type_from_string (json_array_get_string_element (types, i), &t)
          && t == type)
        return TRUE;
    }
  return FALSE;
}

static gboolean
family_detected (JsonObject *family, PlannerGraph *graph)
{
  const char *detect = json_object_get_string_member_with_default (family, "detect", "*");
  g_autoptr (GPatternSpec) spec = g_pattern_spec_new (detect);
  for (guint o = 0; o < planner_graph_get_n_ops (graph); o++)
    if (g_pattern_spec_match_string (spec, planner_graph_get_op (graph, o)->name))
      return TRUE;
  return FALSE;
}

/* "batch" rules: each matching op's batch factor over the listed axes, as far as it divides. */
static gboolean
expand_batch_rule (JsonObject *rule, const char *axes_text, PlannerGraph *graph,
                   const PlannerMesh *mesh, GPtrArray *pins, GError **error)
{
  g_autoptr (GPatternSpec) spec
    = g_pattern_spec_new (json_object_get_string_member_with_default (rule, "ops", "*"));
  JsonArray *types = json_object_has_member (rule, "types")
                       ? json_object_get_array_member (rule, "types") : NULL;
  PlannerMesh sub = { 0 };
  g_auto (GStrv) names = g_strsplit (axes_text, "+", -1);
  for (guint i = 0; names[i]; i++)
    {
      int a = planner_mesh_axis_index (mesh, names[i]);
      if (a >= 0)
        planner_mesh_add_axis (&sub, mesh->names[a], mesh->sizes[a], NULL);
    }
  for (guint o = 0; o < planner_graph_get_n_ops (graph); o++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, o);
      if (!g_pattern_spec_match_string (spec, op->name) || !type_listed (types, op->type))
        continue;
      PlannerStrategy s, full;
      planner_default_strategy (&op->rule, &sub, &s);
      /* Map the sub-mesh's axes back to the mesh's indices. */
      planner_strategy_init (&full);
      for (guint f = 0; f < op->rule.n_factors; f++)
        for (guint i = 0; i < s.n_axes[f]; i++)
          full.axes[f][full.n_axes[f]++]
            = (guint8) planner_mesh_axis_index (mesh, sub.names[s.axes[f][i]]);
      g_autofree char *layouts = planner_strategy_to_string (&full, &op->rule, mesh);
      g_autofree char *text = g_strdup_printf ("%s=%s", op->name, layouts);
      PlannerPin *pin = planner_pin_parse (text, mesh, error);
      if (pin == NULL)
        return FALSE;
      pin->priority = 0;
      g_ptr_array_add (pins, pin);
    }
  return TRUE;
}

/* Why some op the pin matches cannot take it, or NULL when all can. */
static char *
refusal (const PlannerPin *pin, PlannerGraph *graph, const PlannerMesh *mesh)
{
  for (guint o = 0; o < planner_graph_get_n_ops (graph); o++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, o);
      PlannerStrategy s;
      g_autoptr (GError) local = NULL;
      if (planner_pin_matches (pin, op->name)
          && !planner_strategy_from_layouts (&op->rule, mesh, pin->inputs, pin->n_inputs,
                                             op->name, NULL, &s, &local))
        return g_strdup (local->message);
    }
  return NULL;
}

GPtrArray *
planner_policy_expand (const char *name_or_path, PlannerGraph *graph, const PlannerMesh *mesh,
                       GPtrArray *notes, GError **error)
{
  g_return_val_if_fail (name_or_path != NULL && PLANNER_IS_GRAPH (graph) && mesh != NULL, NULL);

  g_autoptr (JsonNode) root = load_policy (name_or_path, error);
  if (root == NULL)
    return NULL;
  JsonObject *obj = json_node_get_object (root);
  const char *policy = json_object_get_string_member_with_default (obj, "name", name_or_path);
  JsonNode *families_node = json_object_get_member (obj, "families");
  if (families_node == NULL || !JSON_NODE_HOLDS_ARRAY (families_node))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "policy %s: \"families\" must be an array of {family, detect, rules}",
                   name_or_path);
      return NULL;
    }
  PolicyAxes ph;
  policy_axes_init (&ph, mesh);

  JsonArray *families = json_node_get_array (families_node);
  for (guint i = 0; i < json_array_get_length (families); i++)
    {
      JsonNode *fn = json_array_get_element (families, i);
      if (!JSON_NODE_HOLDS_OBJECT (fn))
        continue;
      JsonObject *family = json_node_get_object (fn);
      if (!family_detected (family, graph))
        continue;
      JsonNode *rules_node = json_object_get_member (family, "rules");
      if (rules_node == NULL || !JSON_NODE_HOLDS_ARRAY (rules_node))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                       "policy %s: family %s has no \"rules\" array", name_or_path,
                       json_object_get_string_member_with_default (family, "family", "?"));
          return NULL;
        }
      g_autoptr (GPtrArray) pins = g_ptr_array_new_with_free_func ((GDestroyNotify) planner_pin_free);
      JsonArray *rules = json_node_get_array (rules_node);
      for (guint r = 0; r < json_array_get_length (rules); r++)
        {
          JsonNode *rn = json_array_get_element (rules, r);
          JsonObject *rule = JSON_NODE_HOLDS_OBJECT (rn) ? json_node_get_object (rn) : NULL;
          const char *ops = rule ? json_object_get_string_member_with_default (rule, "ops", NULL)
                                 : NULL;
          const char *pin_t = rule ? json_object_get_string_member_with_default (rule, "pin", NULL)
                                   : NULL;
          const char *batch = rule ? json_object_get_string_member_with_default (rule, "batch",
                                                                                 NULL)
                                   : NULL;
          if (ops == NULL || (pin_t == NULL) == (batch == NULL))
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                           "policy %s: rule %u needs \"ops\" (a glob) and one of \"pin\" "
                           "(layouts) or \"batch\" (axes)",
                           name_or_path, r);
              return NULL;
            }
          if ((strstr (pin_t ? pin_t : batch, "{tp}") != NULL) && !ph.has_tp)
            {
              g_autofree char *m = planner_mesh_to_string (mesh);
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS,
                           "policy %s needs a mesh axis named tp or mp for tensor parallelism; "
                           "the mesh is %s (write e.g. dp=2,mp=4)",
                           policy, m);
              return NULL;
            }
          if (batch)
            {
              g_autofree char *axes = substitute (batch, &ph);
              if (!expand_batch_rule (rule, axes, graph, mesh, pins, error))
                return NULL;
              continue;
            }
          g_autofree char *layouts = substitute (pin_t, &ph);
          g_autofree char *text = g_strdup_printf ("%s=%s", ops, layouts);
          PlannerPin *pin = planner_pin_parse (text, mesh, error);
          if (pin == NULL)
            return NULL;
          pin->priority = 0;
          g_autofree char *why = NULL;
          if (json_object_get_boolean_member_with_default (rule, "optional", FALSE)
              && (why = refusal (pin, graph, mesh)) != NULL)
            {
              if (notes)
                g_ptr_array_add (notes, g_strdup_printf ("policy %s: left out optional rule "
                                                         "'%s': %s",
                                                         policy, text, why));
              planner_pin_free (pin);
              continue;
            }
          g_ptr_array_add (pins, pin);
        }
      return g_steal_pointer (&pins);
    }
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_POLICY,
               "policy %s has no rules for this model (%s); it knows the families its "
               "\"detect\" globs find",
               policy, planner_graph_get_name (graph) ? planner_graph_get_name (graph) : "?");
  return NULL;
}
