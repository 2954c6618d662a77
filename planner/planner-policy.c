#define G_LOG_DOMAIN "planner-policy"

#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-json.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-resources.h"

static const char *const builtin_names[] = { "megatron", "megatron-sp", "dp",
                                             "megatron-ep", /* mixture of experts */
                                             NULL };

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

/* A rule: {"ops": GLOB, "pin": LAYOUTS} or {"ops": GLOB, "types": [...], "batch": AXES}, and
 * "optional": true or false. */
static gboolean
check_rule (PlannerJsonReader *r, JsonObject *rule, guint i, gpointer user_data)
{
  static const char *const known[] = { "ops", "pin", "batch", "types", "optional", NULL };
  const char *text;
  gboolean optional;

  if (!planner_json_check_members (r, rule, known)
      || !planner_json_get_string (r, rule, "ops", FALSE, &text))
    return FALSE;
  if (json_object_has_member (rule, "pin") == json_object_has_member (rule, "batch"))
    return planner_json_fail (r, NULL, "needs one of \"pin\" (layouts) or \"batch\" (axes), not %s",
                              json_object_has_member (rule, "pin") ? "both" : "neither");
  if (!planner_json_get_string (r, rule, json_object_has_member (rule, "pin") ? "pin" : "batch",
                                FALSE, &text))
    return FALSE;
  if (json_object_has_member (rule, "optional")
      && !planner_json_get_bool (r, rule, "optional", &optional))
    return FALSE;
  if (json_object_has_member (rule, "types"))
    {
      JsonArray *types = planner_json_get_array (r, rule, "types");
      if (types == NULL)
        return FALSE;
      gsize mark = planner_json_push (r, "types");
      for (guint t = 0; t < json_array_get_length (types); t++)
        {
          g_autofree char *index = g_strdup_printf ("[%u]", t);
          PlannerOpType type;
          if (!planner_json_read_string (r, json_array_get_element (types, t), index, FALSE, &text))
            return FALSE;
          if (!planner_op_type_from_string (text, &type))
            return planner_json_fail (r, index,
                                      "is not an op type: \"%s\" (e.g. MatMul, "
                                      "Linear, Embedding)",
                                      text);
        }
      planner_json_pop (r, mark);
    }
  return TRUE;
}

/* A family: {"family": NAME, "detect": GLOB, "rules": [...]}. */
static gboolean
check_family (PlannerJsonReader *r, JsonObject *family, guint i, gpointer user_data)
{
  static const char *const known[] = { "family", "detect", "rules", NULL };
  const char *text;
  JsonArray *rules;

  if (!planner_json_check_members (r, family, known)
      || (json_object_has_member (family, "family")
          && !planner_json_get_string (r, family, "family", FALSE, &text))
      || (json_object_has_member (family, "detect")
          && !planner_json_get_string (r, family, "detect", FALSE, &text))
      || (rules = planner_json_get_array (r, family, "rules")) == NULL)
    return FALSE;
  return planner_json_read_elements (r, rules, "rules", check_rule, NULL);
}

/* The whole document is checked before any of it is used, so that expanding reads it with
 * the defaults of json-glib's getters and never meets a value of the wrong type. */
static gboolean
check_policy (JsonNode *root, const char *what, GError **error)
{
  static const char *const known[]
      = { "shardscope_policy", "name", "description", "families", NULL };
  g_auto (PlannerJsonReader) r = { what, NULL, error };
  const char *text;
  gint64 version;
  JsonArray *families;

  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "%s: expected an object with \"shardscope_policy\": 1", what);
      return FALSE;
    }
  JsonObject *object = json_node_get_object (root);
  if (!planner_json_get_int (&r, object, "shardscope_policy", 1, 1, &version)
      || !planner_json_check_members (&r, object, known)
      || (json_object_has_member (object, "name")
          && !planner_json_get_string (&r, object, "name", FALSE, &text))
      || (json_object_has_member (object, "description")
          && !planner_json_get_string (&r, object, "description", FALSE, &text))
      || (families = planner_json_get_array (&r, object, "families")) == NULL)
    return FALSE;
  if (json_array_get_length (families) == 0)
    return planner_json_fail (&r, "families",
                              "is empty; it needs at least one "
                              "{\"family\", \"detect\", \"rules\"}");
  return planner_json_read_elements (&r, families, "families", check_family, NULL);
}

/* The model zoo's families (issue 16) live in policies/zoo/NAME.json, a policy of their own
 * whose families follow the built-in's (so a family there never shadows one here). */
static gboolean
append_zoo_families (JsonNode *root, const char *name, const char *what, GError **error)
{
  g_autofree char *path = g_strdup_printf ("policies/zoo/%s.json", name);
  g_autoptr (GBytes) bytes = planner_resources_lookup (path, NULL);
  if (bytes == NULL)
    return TRUE;
  gsize size;
  const char *data = g_bytes_get_data (bytes, &size);
  g_autoptr (JsonNode) zoo = planner_json_parse (data, (gssize)size, what, error);
  if (zoo == NULL || !check_policy (zoo, what, error))
    return FALSE;
  /* The built-in is checked after this; one of the wrong shape is refused there. */
  JsonNode *into_node = JSON_NODE_HOLDS_OBJECT (root)
                            ? json_object_get_member (json_node_get_object (root), "families")
                            : NULL;
  if (into_node == NULL || !JSON_NODE_HOLDS_ARRAY (into_node))
    return TRUE;
  JsonArray *into = json_node_get_array (into_node);
  JsonArray *from = json_object_get_array_member (json_node_get_object (zoo), "families");
  for (guint i = 0; i < json_array_get_length (from); i++)
    json_array_add_element (into, json_node_copy (json_array_get_element (from, i)));
  return TRUE;
}

static JsonNode *
load_policy (const char *name_or_path, GError **error)
{
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *what = g_strdup_printf ("policy %s", name_or_path);

  if (is_builtin (name_or_path))
    {
      g_autofree char *path = g_strdup_printf ("policies/%s.json", name_or_path);
      g_autoptr (GBytes) bytes = planner_resources_lookup (path, error);
      if (bytes == NULL)
        return NULL;
      gsize size;
      const char *data = g_bytes_get_data (bytes, &size);
      root = planner_json_parse (data, (gssize)size, what, error);
      if (root != NULL && !append_zoo_families (root, name_or_path, what, error))
        return NULL;
    }
  else if (g_file_test (name_or_path, G_FILE_TEST_IS_REGULAR))
    {
      g_autofree char *text = NULL;
      gsize length;
      g_autoptr (GError) local = NULL;
      if (!g_file_get_contents (name_or_path, &text, &length, &local))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_IO, "cannot read policy %s: %s",
                       name_or_path, local->message);
          return NULL;
        }
      root = planner_json_parse (text, (gssize)length, what, error);
    }
  else
    {
      g_autofree char *names = g_strjoinv (", ", (char **) builtin_names);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_POLICY,
                   "unknown policy '%s': not a built-in (%s) and not a file", name_or_path,
                   names);
      return NULL;
    }
  if (root == NULL || !check_policy (root, what, error))
    return NULL;
  return g_steal_pointer (&root);
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
  /* Expert parallelism: {ep} the axis named ep, {edp} every axis but tp and ep. */
  char ep[PLANNER_MAX_AXES * PLANNER_MAX_AXIS_NAME];
  char edp[PLANNER_MAX_AXES * PLANNER_MAX_AXIS_NAME];
  gboolean has_ep;
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
policy_axes_init_ep (PolicyAxes *ph, const PlannerMesh *mesh, int tp)
{
  int ep = planner_mesh_axis_index (mesh, "ep");

  ph->has_ep = ep >= 0;
  g_strlcpy (ph->ep, ph->has_ep ? mesh->names[ep] : "_", sizeof ph->ep);
  ph->edp[0] = '\0';
  for (guint a = 0; a < mesh->n_axes; a++)
    if ((int) a != tp && (int) a != ep)
      {
        if (ph->edp[0])
          g_strlcat (ph->edp, "+", sizeof ph->edp);
        g_strlcat (ph->edp, mesh->names[a], sizeof ph->edp);
      }
  if (ph->edp[0] == '\0')
    g_strlcpy (ph->edp, "_", sizeof ph->edp);
}

static void
policy_axes_init (PolicyAxes *ph, const PlannerMesh *mesh)
{
  int tp = planner_mesh_axis_index (mesh, "tp");
  if (tp < 0)
    tp = planner_mesh_axis_index (mesh, "mp");
  /* Axes of size 1 still count, in {tp} as in {dp} and {all}: mp=1 is tensor parallelism
   * over one device. Their names parse (and are dropped, planner_layout_normalize), so a
   * sweep over tp or dp from 1 up needs no special case, and "[{dp}+{tp},_]" still reads. */
  ph->has_tp = tp >= 0;
  if (ph->has_tp)
    g_strlcpy (ph->tp, mesh->names[tp], sizeof ph->tp);
  join_axes (ph->dp, sizeof ph->dp, mesh, tp);
  join_axes (ph->all, sizeof ph->all, mesh, -1);
  policy_axes_init_ep (ph, mesh, tp);
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
      else if (g_str_has_prefix (p, "{ep}"))
        g_string_append (s, ph->ep), p += 4;
      else if (g_str_has_prefix (p, "{edp}"))
        g_string_append (s, ph->edp), p += 5;
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

static void
append_layouts (GString *s, const PlannerLayout *layouts, guint n, const PlannerMesh *mesh)
{
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *l = planner_layout_to_string (&layouts[i], mesh);
      g_string_append_printf (s, "%s%s", i ? "," : "", l);
    }
}

/* A rule's {tp}, {dp} and {all} name axes even of size 1, which parsing drops; the pin's text
 * then says what the pin does ("[dp,_],[_,_]" on dp=2,mp=1), as on the mesh without them. */
static void
spell_canonical (PlannerPin *pin, const PlannerMesh *mesh)
{
  GString *s = g_string_new (pin->glob);
  g_string_append_c (s, '=');
  append_layouts (s, pin->inputs, pin->n_inputs, mesh);
  if (pin->n_outputs)
    {
      g_string_append (s, "->");
      append_layouts (s, pin->outputs, pin->n_outputs, mesh);
    }
  g_free (pin->text);
  pin->text = g_string_free (s, FALSE);
}

/* Why some op the pin matches cannot take it, or NULL when all can. An optional rule that
 * matches no op is left out too (a variant of a family without that module: OPT's final
 * norm when its norms follow the residual adds). */
static char *
refusal (const PlannerPin *pin, PlannerGraph *graph, const PlannerMesh *mesh)
{
  gboolean matched = FALSE;
  for (guint o = 0; o < planner_graph_get_n_ops (graph); o++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, o);
      PlannerStrategy s;
      g_autoptr (GError) local = NULL;
      if (!planner_pin_matches (pin, op->name))
        continue;
      matched = TRUE;
      if (!planner_strategy_from_layouts (&op->rule, mesh, pin->inputs, pin->n_inputs, op->name,
                                          NULL, &s, &local))
        return g_strdup (local->message);
    }
  return matched ? NULL : g_strdup_printf ("no op of this model matches '%s'", pin->glob);
}

/* Expert parallelism needs the axis named ep: a rule naming {ep} on a mesh without one is
 * refused. An optional rule naming {tp} on a mesh without tp/mp is left out, its ops added to
 * @no_tp for one note (megatron-ep on dp=2,ep=4 is expert and data parallelism only). 1: use
 * the rule, 0: leave it out, -1: refused (@error set). */
static int
policy_rule_use (JsonObject *rule, const char *text, const PolicyAxes *ph, const char *policy,
                 const PlannerMesh *mesh, GString *no_tp, GError **error)
{
  g_autofree char *m = NULL;

  if (strstr (text, "{ep}") != NULL && !ph->has_ep)
    {
      m = planner_mesh_to_string (mesh);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_AXIS,
                   "policy %s needs a mesh axis named ep for expert parallelism; the mesh is %s "
                   "(write e.g. dp=2,ep=4)",
                   policy, m);
      return -1;
    }
  if (strstr (text, "{tp}") != NULL && !ph->has_tp
      && json_object_get_boolean_member_with_default (rule, "optional", FALSE))
    {
      g_string_append_printf (no_tp, "%s%s", no_tp->len ? ", " : "",
                              json_object_get_string_member_with_default (rule, "ops", "?"));
      return 0;
    }
  return 1;
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
      g_autoptr (GString) no_tp = g_string_new (NULL);
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
          int use = policy_rule_use (rule, pin_t ? pin_t : batch, &ph, policy, mesh, no_tp, error);
          if (use < 0)
            return NULL;
          if (use == 0)
            continue;
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
          if (planner_mesh_unit_axes (mesh) != 0)
            spell_canonical (pin, mesh);
          g_autofree char *why = NULL;
          if (json_object_get_boolean_member_with_default (rule, "optional", FALSE)
              && (why = refusal (pin, graph, mesh)) != NULL)
            {
              if (notes)
                g_ptr_array_add (notes, g_strdup_printf ("policy %s: left out optional rule "
                                                         "'%s': %s",
                                                         policy, pin->text, why));
              planner_pin_free (pin);
              continue;
            }
          g_ptr_array_add (pins, pin);
        }
      if (no_tp->len && notes)
        g_ptr_array_add (notes, g_strdup_printf ("policy %s: left out the optional tensor-parallel "
                                                 "rules of %s: the mesh has no tp or mp axis",
                                                 policy, no_tp->str));
      return g_steal_pointer (&pins);
    }
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_POLICY,
               "policy %s has no rules for this model (%s); it knows the families its "
               "\"detect\" globs find",
               policy, planner_graph_get_name (graph) ? planner_graph_get_name (graph) : "?");
  return NULL;
}
