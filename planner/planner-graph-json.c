#define G_LOG_DOMAIN "planner-graph-json"

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-model-private.h"

/* Graph JSON, version 1 (planner/README.md). One tensor or op per line so that people can
 * read, diff and write these files by hand; the reader trusts nothing in them. */

typedef enum
{
  ATTR_INT,    /* int */
  ATTR_INT64,  /* gint64 */
  ATTR_BOOL,   /* gboolean */
  ATTR_DOUBLE, /* double */
  ATTR_DTYPE,  /* PlannerDType, written as its name */
  ATTR_STRING, /* char[] */
  ATTR_INTS,   /* n_ints + ints[] */
} AttrKind;

/* Every field of PlannerOpAttrs, once: the writer and the reader both walk this table. */
static const struct
{
  const char *name;
  AttrKind kind;
  gsize offset;
} attr_fields[] = {
  { "axis", ATTR_INT, G_STRUCT_OFFSET (PlannerOpAttrs, axis) },
  { "ints", ATTR_INTS, G_STRUCT_OFFSET (PlannerOpAttrs, ints) },
  { "start", ATTR_INT64, G_STRUCT_OFFSET (PlannerOpAttrs, start) },
  { "end", ATTR_INT64, G_STRUCT_OFFSET (PlannerOpAttrs, end) },
  { "heads", ATTR_INT64, G_STRUCT_OFFSET (PlannerOpAttrs, heads) },
  { "transpose_b", ATTR_BOOL, G_STRUCT_OFFSET (PlannerOpAttrs, transpose_b) },
  { "causal", ATTR_BOOL, G_STRUCT_OFFSET (PlannerOpAttrs, causal) },
  { "keepdims", ATTR_BOOL, G_STRUCT_OFFSET (PlannerOpAttrs, keepdims) },
  { "variant", ATTR_INT, G_STRUCT_OFFSET (PlannerOpAttrs, variant) },
  { "dtype", ATTR_DTYPE, G_STRUCT_OFFSET (PlannerOpAttrs, dtype) },
  { "eps", ATTR_DOUBLE, G_STRUCT_OFFSET (PlannerOpAttrs, eps) },
  { "theta", ATTR_DOUBLE, G_STRUCT_OFFSET (PlannerOpAttrs, theta) },
  { "scale", ATTR_DOUBLE, G_STRUCT_OFFSET (PlannerOpAttrs, scale) },
  { "equation", ATTR_STRING, G_STRUCT_OFFSET (PlannerOpAttrs, equation) },
  { "rope_factor", ATTR_DOUBLE, G_STRUCT_OFFSET (PlannerOpAttrs, rope_factor) },
  { "rope_low_freq", ATTR_DOUBLE, G_STRUCT_OFFSET (PlannerOpAttrs, rope_low_freq) },
  { "rope_high_freq", ATTR_DOUBLE, G_STRUCT_OFFSET (PlannerOpAttrs, rope_high_freq) },
  { "rope_original_max", ATTR_INT64, G_STRUCT_OFFSET (PlannerOpAttrs, rope_original_max) },
};

#define FIELD(attrs, i, type) ((type *)((guint8 *)(attrs) + attr_fields[i].offset))
#define CFIELD(attrs, i, type) ((const type *)((const guint8 *)(attrs) + attr_fields[i].offset))

static const char *const tensor_kinds[] = {
  [PLANNER_TENSOR_ACTIVATION] = "activation",
  [PLANNER_TENSOR_PARAMETER] = "parameter",
  [PLANNER_TENSOR_INPUT] = "input",
};

static gboolean
attr_is_default (const PlannerOpAttrs *attrs, const PlannerOpAttrs *defaults, guint i)
{
  switch (attr_fields[i].kind)
    {
    case ATTR_INT:
      return *CFIELD (attrs, i, int) == *CFIELD (defaults, i, int);
    case ATTR_INT64:
      return *CFIELD (attrs, i, gint64) == *CFIELD (defaults, i, gint64);
    case ATTR_BOOL:
      return !*CFIELD (attrs, i, gboolean) == !*CFIELD (defaults, i, gboolean);
    case ATTR_DOUBLE:
      return *CFIELD (attrs, i, double) == *CFIELD (defaults, i, double);
    case ATTR_DTYPE:
      return *CFIELD (attrs, i, PlannerDType) == *CFIELD (defaults, i, PlannerDType);
    case ATTR_STRING:
      return g_strcmp0 (CFIELD (attrs, i, char), CFIELD (defaults, i, char)) == 0;
    case ATTR_INTS:
      return attrs->n_ints == defaults->n_ints
             && memcmp (attrs->ints, defaults->ints, attrs->n_ints * sizeof attrs->ints[0]) == 0;
    default:
      g_assert_not_reached ();
    }
}

/* ---- Writing */

static void
append_ints (GString *out, const gint64 *values, guint n)
{
  g_string_append_c (out, '[');
  for (guint i = 0; i < n; i++)
    g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i > 0 ? ", " : "", values[i]);
  g_string_append_c (out, ']');
}

static void
append_tensor_names (GString *out, PlannerGraph *graph, const guint *ids, guint n)
{
  g_string_append_c (out, '[');
  for (guint i = 0; i < n; i++)
    {
      if (i > 0)
        g_string_append (out, ", ");
      planner_json_append_string (out, planner_graph_get_tensor (graph, ids[i])->name);
    }
  g_string_append_c (out, ']');
}

static void
append_attrs (GString *out, const PlannerOpAttrs *attrs)
{
  PlannerOpAttrs defaults;
  gboolean first = TRUE;

  planner_op_attrs_init (&defaults);
  for (guint i = 0; i < G_N_ELEMENTS (attr_fields); i++)
    {
      if (attr_is_default (attrs, &defaults, i))
        continue;
      g_string_append (out, first ? ", \"attrs\": {" : ", ");
      first = FALSE;
      planner_json_append_string (out, attr_fields[i].name);
      g_string_append (out, ": ");
      switch (attr_fields[i].kind)
        {
        case ATTR_INT:
          g_string_append_printf (out, "%d", *CFIELD (attrs, i, int));
          break;
        case ATTR_INT64:
          g_string_append_printf (out, "%" G_GINT64_FORMAT, *CFIELD (attrs, i, gint64));
          break;
        case ATTR_BOOL:
          g_string_append (out, *CFIELD (attrs, i, gboolean) ? "true" : "false");
          break;
        case ATTR_DOUBLE:
          {
            double value = *CFIELD (attrs, i, double);
            /* JSON has no infinities; no attribute the planner uses can hold one. */
            g_warn_if_fail (isfinite (value));
            planner_json_append_double (out, isfinite (value) ? value : 0);
          }
          break;
        case ATTR_DTYPE:
          planner_json_append_string (out,
                                      planner_dtype_to_string (*CFIELD (attrs, i, PlannerDType)));
          break;
        case ATTR_STRING:
          planner_json_append_string (out, CFIELD (attrs, i, char));
          break;
        case ATTR_INTS:
          append_ints (out, attrs->ints, attrs->n_ints);
          break;
        default:
          g_assert_not_reached ();
        }
    }
  if (!first)
    g_string_append_c (out, '}');
}

/* ', "NAME": "VALUE"' inside a tensor or op line. */
static void
append_string_field (GString *out, const char *name, const char *value)
{
  g_string_append_printf (out, ", \"%s\": ", name);
  planner_json_append_string (out, value);
}

/* Line @i of the tensors or ops: '{"name": NAME, "KEY": VALUE', the rest up to '}' after. */
static void
begin_line (GString *out, guint i, const char *name, const char *key, const char *value)
{
  g_string_append (out, i > 0 ? ",\n    {\"name\": " : "\n    {\"name\": ");
  planner_json_append_string (out, name);
  append_string_field (out, key, value);
}

char *
planner_graph_to_json (PlannerGraph *graph)
{
  g_autoptr (GString) out = g_string_new (NULL);
  const GArray *outputs;
  guint n_tensors, n_ops;

  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), NULL);

  n_tensors = planner_graph_get_n_tensors (graph);
  n_ops = planner_graph_get_n_ops (graph);

  g_string_append_printf (
      out, "{\n  \"shardscope_graph\": %d,\n  \"name\": ", PLANNER_GRAPH_JSON_VERSION);
  planner_json_append_string (out, planner_graph_get_name (graph));
  g_string_append (out, ",\n  \"source\": ");
  planner_json_append_string (out, planner_graph_get_source (graph));

  /* Tensors in id order: the reader adds them in this order, so ids survive the trip. */
  g_string_append (out, ",\n  \"tensors\": [");
  for (guint i = 0; i < n_tensors; i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, i);

      begin_line (out, i, t->name, "dtype", planner_dtype_to_string (t->dtype));
      append_string_field (out, "kind", tensor_kinds[t->kind]);
      g_string_append (out, ", \"shape\": ");
      append_ints (out, t->shape, t->rank);
      g_string_append_c (out, '}');
    }
  g_string_append (out, n_tensors > 0 ? "\n  ],\n  \"ops\": [" : "],\n  \"ops\": [");
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);

      begin_line (out, i, op->name, "type", planner_op_type_to_string (op->type));
      append_attrs (out, &op->attrs);
      g_string_append (out, ", \"inputs\": ");
      append_tensor_names (out, graph, op->inputs, op->n_inputs);
      g_string_append (out, ", \"outputs\": ");
      append_tensor_names (out, graph, op->outputs, op->n_outputs);
      g_string_append_c (out, '}');
    }
  g_string_append (out, n_ops > 0 ? "\n  ],\n  \"outputs\": " : "],\n  \"outputs\": ");
  outputs = planner_graph_get_outputs (graph);
  append_tensor_names (out, graph, (const guint *)outputs->data, outputs->len);
  g_string_append (out, "\n}\n");
  return g_string_free (g_steal_pointer (&out), FALSE);
}

gboolean
planner_graph_save_json (PlannerGraph *graph, const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local_error = NULL;

  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  text = planner_graph_to_json (graph);
  /* g_file_set_contents() writes a temporary file and renames it: never a half-written
   * graph on disk. */
  if (!g_file_set_contents (path, text, -1, &local_error))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_IO, "%s", local_error->message);
      return FALSE;
    }
  return TRUE;
}

/* ---- Reading */

typedef struct
{
  const char *name;
  PlannerTensorKind kind;
  PlannerDType dtype;
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  guint index; /* in the file, for messages */
} TensorDecl;

typedef struct
{
  const char *name;
  PlannerOpType type;
  PlannerOpAttrs attrs;
  JsonArray *inputs;
  JsonArray *outputs;
  guint index;
} OpDecl;

typedef struct
{
  GHashTable *tensors; /* name -> TensorDecl* */
  TensorDecl *tensor_decls;
  guint n_tensor_decls;
  OpDecl *op_decls;
  guint n_op_decls;
  PlannerGraph *graph;
} Reader;

static void
reader_clear (Reader *r)
{
  g_clear_pointer (&r->tensors, g_hash_table_unref);
  g_clear_pointer (&r->tensor_decls, g_free);
  g_clear_pointer (&r->op_decls, g_free);
  g_clear_object (&r->graph);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Reader, reader_clear)

static gboolean malformed (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
malformed (GError **error, const char *format, ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error_literal (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, message);
  return FALSE;
}

/* Refuses a member of @object not in @known: a typo ("atrs") is not silently a default. */
static gboolean
check_members (JsonObject *object, const char *const *known, const char *where, GError **error)
{
  g_autoptr (GList) members = json_object_get_members (object);

  for (GList *l = members; l != NULL; l = l->next)
    if (!g_strv_contains (known, l->data))
      {
        g_autofree char *list = g_strjoinv (", ", (char **)known);
        return malformed (error, "%s: unknown field \"%s\" (known: %s)", where,
                          (const char *)l->data, list);
      }
  return TRUE;
}

static GType
value_type (JsonNode *node)
{
  return node != NULL && JSON_NODE_HOLDS_VALUE (node) ? json_node_get_value_type (node)
                                                      : G_TYPE_INVALID;
}

/* The member @name of @object as a string; @required FALSE: NULL when absent or null. */
static gboolean
get_string (JsonObject *object, const char *name, gboolean required, const char *where,
            const char **value, GError **error)
{
  JsonNode *node = json_object_get_member (object, name);

  *value = NULL;
  if ((node == NULL || JSON_NODE_HOLDS_NULL (node)) && !required)
    return TRUE;
  if (node == NULL)
    return malformed (error, "%s: missing field \"%s\"", where, name);
  if (value_type (node) != G_TYPE_STRING)
    return malformed (error, "%s: field \"%s\" must be a string", where, name);
  *value = json_node_get_string (node);
  return TRUE;
}

static JsonArray *
get_array (JsonObject *object, const char *name, const char *where, GError **error)
{
  JsonNode *node = json_object_get_member (object, name);

  if (node == NULL)
    return malformed (error, "%s: missing field \"%s\"", where, name), NULL;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return malformed (error, "%s: field \"%s\" must be a list", where, name), NULL;
  return json_node_get_array (node);
}

static gboolean
get_int (JsonNode *node, const char *where, const char *name, gint64 *value, GError **error)
{
  if (value_type (node) != G_TYPE_INT64)
    return malformed (error, "%s: \"%s\" must be an integer", where, name);
  *value = json_node_get_int (node);
  return TRUE;
}

static gboolean
get_ints (JsonNode *node, const char *where, const char *name, guint max, gint64 *values, guint *n,
          GError **error)
{
  JsonArray *array;

  if (!JSON_NODE_HOLDS_ARRAY (node))
    return malformed (error, "%s: \"%s\" must be a list of integers", where, name);
  array = json_node_get_array (node);
  if (json_array_get_length (array) > max)
    return malformed (error, "%s: \"%s\" has %u entries, at most %u are allowed", where, name,
                      json_array_get_length (array), max);
  *n = json_array_get_length (array);
  for (guint i = 0; i < *n; i++)
    if (!get_int (json_array_get_element (array, i), where, name, &values[i], error))
      return FALSE;
  return TRUE;
}

static gboolean
parse_dtype (JsonNode *node, const char *where, PlannerDType *dtype, GError **error)
{
  if (value_type (node) != G_TYPE_STRING
      || !planner_dtype_from_string (json_node_get_string (node), dtype))
    return malformed (error, "%s: dtype must be one of f32, bf16, f16, i64", where);
  return TRUE;
}

/* Declaration @index of the tensors or ops (@what): an object with a name, by which messages
 * (@where) name it from then on. */
static JsonObject *
parse_decl (JsonNode *node, const char *what, guint index, const char **name, char **where,
            GError **error)
{
  g_autofree char *numbered = g_strdup_printf ("%s %u", what, index);

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return malformed (error, "%s: expected an object", numbered), NULL;
  if (!get_string (json_node_get_object (node), "name", TRUE, numbered, name, error))
    return NULL;
  *where = g_strdup_printf ("%s \"%s\"", what, *name);
  return json_node_get_object (node);
}

static gboolean
parse_tensor (JsonNode *node, guint index, TensorDecl *decl, GError **error)
{
  static const char *const known[] = { "name", "dtype", "kind", "shape", NULL };
  g_autofree char *where = NULL;
  JsonObject *object = parse_decl (node, "tensor", index, &decl->name, &where, error);
  JsonNode *shape;
  const char *kind;
  double numel;
  guint i;

  if (object == NULL || !check_members (object, known, where, error))
    return FALSE;
  decl->index = index;

  if (!get_string (object, "kind", TRUE, where, &kind, error))
    return FALSE;
  for (i = 0; i < G_N_ELEMENTS (tensor_kinds); i++)
    if (g_str_equal (kind, tensor_kinds[i]))
      break;
  if (i == G_N_ELEMENTS (tensor_kinds))
    return malformed (error, "%s: kind \"%s\" is not one of input, parameter, activation", where,
                      kind);
  decl->kind = i;

  if (!json_object_has_member (object, "dtype"))
    return malformed (error, "%s: missing field \"dtype\"", where);
  if (!parse_dtype (json_object_get_member (object, "dtype"), where, &decl->dtype, error))
    return FALSE;

  shape = json_object_get_member (object, "shape");
  if (shape == NULL)
    return malformed (error, "%s: missing field \"shape\"", where);
  if (!get_ints (shape, where, "shape", PLANNER_MAX_RANK, decl->shape, &decl->rank, error))
    return FALSE;
  for (i = 0, numel = 1; i < decl->rank; i++)
    if (decl->shape[i] < 1 || decl->shape[i] > (G_GINT64_CONSTANT (1) << 48)
        || (numel *= decl->shape[i]) > (double)(G_GINT64_CONSTANT (1) << 62))
      {
        g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                     "%s: dim %u has size %" G_GINT64_FORMAT
                     "; sizes must be >= 1 and < 2^48, and tensors hold at most 2^62 "
                     "elements",
                     where, i, decl->shape[i]);
        return FALSE;
      }
  return TRUE;
}

static gboolean
parse_attr (JsonNode *node, guint i, const char *where, PlannerOpAttrs *attrs, GError **error)
{
  const char *name = attr_fields[i].name;
  gint64 value = 0;

  switch (attr_fields[i].kind)
    {
    case ATTR_INT:
      if (!get_int (node, where, name, &value, error))
        return FALSE;
      if (value < G_MININT || value > G_MAXINT)
        return malformed (error, "%s: \"%s\" is out of range", where, name);
      *FIELD (attrs, i, int) = value;
      return TRUE;
    case ATTR_INT64:
      return get_int (node, where, name, FIELD (attrs, i, gint64), error);
    case ATTR_BOOL:
      if (value_type (node) != G_TYPE_BOOLEAN)
        return malformed (error, "%s: \"%s\" must be true or false", where, name);
      *FIELD (attrs, i, gboolean) = json_node_get_boolean (node);
      return TRUE;
    case ATTR_DOUBLE:
      if (value_type (node) == G_TYPE_INT64)
        *FIELD (attrs, i, double) = json_node_get_int (node);
      else if (value_type (node) == G_TYPE_DOUBLE)
        *FIELD (attrs, i, double) = json_node_get_double (node);
      else
        return malformed (error, "%s: \"%s\" must be a number", where, name);
      return TRUE;
    case ATTR_DTYPE:
      return parse_dtype (node, where, FIELD (attrs, i, PlannerDType), error);
    case ATTR_STRING:
      if (value_type (node) != G_TYPE_STRING)
        return malformed (error, "%s: \"%s\" must be a string", where, name);
      if (strlen (json_node_get_string (node)) >= sizeof attrs->equation)
        return malformed (error, "%s: \"%s\" is longer than %zu characters", where, name,
                          sizeof attrs->equation - 1);
      g_strlcpy (FIELD (attrs, i, char), json_node_get_string (node), sizeof attrs->equation);
      return TRUE;
    case ATTR_INTS:
      return get_ints (node, where, name, G_N_ELEMENTS (attrs->ints), attrs->ints, &attrs->n_ints,
                       error);
    default:
      g_assert_not_reached ();
    }
}

static gboolean
parse_op (JsonNode *node, guint index, OpDecl *decl, GError **error)
{
  static const char *const known[] = { "name", "type", "attrs", "inputs", "outputs", NULL };
  g_autofree char *where = NULL;
  JsonObject *object = parse_decl (node, "op", index, &decl->name, &where, error);
  JsonNode *attrs;
  const char *type;

  if (object == NULL || !check_members (object, known, where, error))
    return FALSE;
  decl->index = index;

  if (!get_string (object, "type", TRUE, where, &type, error))
    return FALSE;
  if (!planner_op_type_from_string (type, &decl->type))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_OP_TYPE,
                   "%s: unknown op type \"%s\"", where, type);
      return FALSE;
    }

  planner_op_attrs_init (&decl->attrs);
  attrs = json_object_get_member (object, "attrs");
  if (attrs != NULL && !JSON_NODE_HOLDS_OBJECT (attrs))
    return malformed (error, "%s: \"attrs\" must be an object", where);
  if (attrs != NULL)
    {
      g_autoptr (GList) members = json_object_get_members (json_node_get_object (attrs));

      for (GList *l = members; l != NULL; l = l->next)
        {
          guint i;

          for (i = 0; i < G_N_ELEMENTS (attr_fields); i++)
            if (g_str_equal (attr_fields[i].name, l->data))
              break;
          if (i == G_N_ELEMENTS (attr_fields))
            return malformed (error, "%s: unknown attribute \"%s\"", where, (const char *)l->data);
          if (!parse_attr (json_object_get_member (json_node_get_object (attrs), l->data), i, where,
                           &decl->attrs, error))
            return FALSE;
        }
    }

  decl->inputs = get_array (object, "inputs", where, error);
  if (decl->inputs == NULL)
    return FALSE;
  decl->outputs = get_array (object, "outputs", where, error);
  if (decl->outputs == NULL)
    return FALSE;
  if (json_array_get_length (decl->inputs) > PLANNER_MAX_OPERANDS
      || json_array_get_length (decl->outputs) > PLANNER_MAX_OPERANDS
      || json_array_get_length (decl->outputs) == 0)
    return malformed (error, "%s: ops take 0 to %d inputs and 1 to %d outputs", where,
                      PLANNER_MAX_OPERANDS, PLANNER_MAX_OPERANDS);
  for (guint i = 0; i < json_array_get_length (decl->inputs); i++)
    if (value_type (json_array_get_element (decl->inputs, i)) != G_TYPE_STRING)
      return malformed (error, "%s: input %u must be a tensor name", where, i);
  for (guint i = 0; i < json_array_get_length (decl->outputs); i++)
    if (value_type (json_array_get_element (decl->outputs, i)) != G_TYPE_STRING)
      return malformed (error, "%s: output %u must be a tensor name", where, i);
  return TRUE;
}

/* Adds a declared input or parameter to the graph. */
static gboolean
add_leaf (Reader *r, const TensorDecl *decl, GError **error)
{
  int id;

  if (decl->kind == PLANNER_TENSOR_INPUT)
    id = planner_graph_add_input (r->graph, decl->name, decl->dtype, decl->rank, decl->shape,
                                  error);
  else
    id = planner_graph_add_parameter (r->graph, decl->name, decl->dtype, decl->rank, decl->shape,
                                      error);
  return id >= 0;
}

static char *
format_shape (const gint64 *shape, guint rank)
{
  g_autoptr (GString) out = g_string_new (NULL);

  append_ints (out, shape, rank);
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static gboolean
add_op (Reader *r, const OpDecl *decl, GError **error)
{
  guint n_inputs = json_array_get_length (decl->inputs);
  guint n_outputs = json_array_get_length (decl->outputs);
  guint inputs[PLANNER_MAX_OPERANDS];
  const char *output_names[PLANNER_MAX_OPERANDS + 1] = { NULL };
  int op;

  for (guint i = 0; i < n_inputs; i++)
    {
      const char *name = json_array_get_string_element (decl->inputs, i);
      int id = planner_graph_find_tensor (r->graph, name);
      const TensorDecl *tensor = g_hash_table_lookup (r->tensors, name);

      if (id < 0 && tensor != NULL && tensor->kind != PLANNER_TENSOR_ACTIVATION)
        {
          if (!add_leaf (r, tensor, error))
            return FALSE;
          id = planner_graph_find_tensor (r->graph, name);
        }
      if (id < 0 && tensor != NULL)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "op \"%s\": input %u \"%s\" is not produced by an earlier op; list ops "
                       "in topological order",
                       decl->name, i, name);
          return FALSE;
        }
      if (id < 0)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "op \"%s\": input %u \"%s\" is not a tensor of the graph (declare it "
                       "in \"tensors\" or output it from an earlier op)",
                       decl->name, i, name);
          return FALSE;
        }
      inputs[i] = id;
    }

  for (guint i = 0; i < n_outputs; i++)
    {
      const char *name = json_array_get_string_element (decl->outputs, i);
      const TensorDecl *tensor = g_hash_table_lookup (r->tensors, name);

      if (tensor != NULL && tensor->kind != PLANNER_TENSOR_ACTIVATION)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "op \"%s\": output \"%s\" is declared with kind \"%s\"; ops produce "
                       "only activations",
                       decl->name, name, tensor_kinds[tensor->kind]);
          return FALSE;
        }
      output_names[i] = name;
    }

  op = planner_graph_add_op (r->graph, decl->name, decl->type, &decl->attrs, inputs, n_inputs,
                             n_outputs, output_names, error);
  if (op < 0)
    return FALSE;
  if (planner_graph_get_op (r->graph, op)->n_outputs != n_outputs)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "op \"%s\": lists %u outputs, but a %s with these attrs has %u", decl->name,
                   n_outputs, planner_op_type_to_string (decl->type),
                   planner_graph_get_op (r->graph, op)->n_outputs);
      return FALSE;
    }

  /* Declared activations must agree with what the op's rule infers. */
  for (guint i = 0; i < n_outputs; i++)
    {
      const PlannerTensor *t
          = planner_graph_get_tensor (r->graph, planner_graph_op_output (r->graph, op, i));
      const TensorDecl *tensor = g_hash_table_lookup (r->tensors, output_names[i]);

      if (tensor == NULL)
        continue;
      if (tensor->rank != t->rank
          || memcmp (tensor->shape, t->shape, t->rank * sizeof t->shape[0]) != 0)
        {
          g_autofree char *declared = format_shape (tensor->shape, tensor->rank);
          g_autofree char *inferred = format_shape (t->shape, t->rank);

          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                       "tensor \"%s\": declared with shape %s, but op \"%s\" (%s) produces %s",
                       t->name, declared, decl->name, planner_op_type_to_string (decl->type),
                       inferred);
          return FALSE;
        }
      if (tensor->dtype != t->dtype)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                       "tensor \"%s\": declared as %s, but op \"%s\" produces %s", t->name,
                       planner_dtype_to_string (tensor->dtype), decl->name,
                       planner_dtype_to_string (t->dtype));
          return FALSE;
        }
    }
  return TRUE;
}

PlannerGraph *
planner_graph_from_json_node (JsonNode *root, GError **error)
{
  g_auto (Reader) r = { 0 };
  JsonObject *object;
  JsonNode *version;
  JsonArray *tensors, *ops, *outputs;
  const char *name, *source;
  guint next_op = 0;

  if (!JSON_NODE_HOLDS_OBJECT (root))
    return malformed (error, "expected a JSON object"), NULL;
  object = json_node_get_object (root);

  version = json_object_get_member (object, "shardscope_graph");
  if (version == NULL)
    return malformed (error, "not a graph JSON file: no \"shardscope_graph\" version"), NULL;
  if (value_type (version) != G_TYPE_INT64)
    {
      g_autofree char *text = json_to_string (version, FALSE);

      return malformed (error, "\"shardscope_graph\" must be an integer version, got %s", text),
             NULL;
    }
  if (json_node_get_int (version) != PLANNER_GRAPH_JSON_VERSION)
    return malformed (error,
                      "graph JSON version %" G_GINT64_FORMAT
                      " is not supported (this build reads %d)",
                      json_node_get_int (version), PLANNER_GRAPH_JSON_VERSION),
           NULL;
  static const char *const known[]
      = { "shardscope_graph", "name", "source", "tensors", "ops", "outputs", NULL };
  if (!check_members (object, known, "graph", error)
      || !get_string (object, "name", FALSE, "graph", &name, error)
      || !get_string (object, "source", FALSE, "graph", &source, error))
    return NULL;
  if ((tensors = get_array (object, "tensors", "graph", error)) == NULL
      || (ops = get_array (object, "ops", "graph", error)) == NULL
      || (outputs = get_array (object, "outputs", "graph", error)) == NULL)
    return NULL;

  r.tensors = g_hash_table_new (g_str_hash, g_str_equal);
  r.n_tensor_decls = json_array_get_length (tensors);
  r.tensor_decls = g_new0 (TensorDecl, r.n_tensor_decls);
  for (guint i = 0; i < r.n_tensor_decls; i++)
    {
      TensorDecl *decl = &r.tensor_decls[i];

      if (!parse_tensor (json_array_get_element (tensors, i), i, decl, error))
        return NULL;
      if (!g_hash_table_insert (r.tensors, (gpointer)decl->name, decl))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "tensor \"%s\" is declared twice", decl->name);
          return NULL;
        }
    }
  r.n_op_decls = json_array_get_length (ops);
  r.op_decls = g_new0 (OpDecl, r.n_op_decls);
  for (guint i = 0; i < r.n_op_decls; i++)
    if (!parse_op (json_array_get_element (ops, i), i, &r.op_decls[i], error))
      return NULL;

  /* Walk the tensors in file order, adding ops as their outputs come up: a file that
   * planner_graph_to_json() wrote gets every tensor back under its old id. Files written
   * by hand may list tensors in any order, or leave activations out. */
  r.graph = planner_graph_new ();
  for (guint i = 0; i < r.n_tensor_decls; i++)
    {
      const TensorDecl *decl = &r.tensor_decls[i];

      if (planner_graph_find_tensor (r.graph, decl->name) >= 0)
        continue;
      if (decl->kind != PLANNER_TENSOR_ACTIVATION)
        {
          if (!add_leaf (&r, decl, error))
            return NULL;
          continue;
        }
      while (planner_graph_find_tensor (r.graph, decl->name) < 0 && next_op < r.n_op_decls)
        if (!add_op (&r, &r.op_decls[next_op++], error))
          return NULL;
      if (planner_graph_find_tensor (r.graph, decl->name) < 0)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "tensor \"%s\" is declared as an activation but no op outputs it",
                       decl->name);
          return NULL;
        }
    }
  while (next_op < r.n_op_decls)
    if (!add_op (&r, &r.op_decls[next_op++], error))
      return NULL;

  if (json_array_get_length (outputs) == 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                   "graph: \"outputs\" is empty; name at least one output tensor");
      return NULL;
    }
  for (guint i = 0; i < json_array_get_length (outputs); i++)
    {
      JsonNode *node = json_array_get_element (outputs, i);
      int id;

      if (value_type (node) != G_TYPE_STRING)
        return malformed (error, "graph: output %u must be a tensor name", i), NULL;
      id = planner_graph_find_tensor (r.graph, json_node_get_string (node));
      if (id < 0)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "graph: output \"%s\" is not a tensor of the graph",
                       json_node_get_string (node));
          return NULL;
        }
      /* A graph output is one value: named twice, its final reduction would be planned
       * twice. */
      const GArray *marked = planner_graph_get_outputs (r.graph);
      for (guint k = 0; k < marked->len; k++)
        if (g_array_index (marked, guint, k) == (guint)id)
          {
            g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                         "graph: output \"%s\" is listed twice; list each output once",
                         json_node_get_string (node));
            return NULL;
          }
      planner_graph_mark_output (r.graph, id);
    }

  if (!planner_graph_check (r.graph, error))
    return NULL;
  planner_graph_set_name (r.graph, name);
  planner_graph_set_source (r.graph, source);
  return g_steal_pointer (&r.graph);
}

PlannerGraph *
planner_graph_from_json (const char *text, GError **error)
{
  g_autoptr (JsonNode) root = NULL;

  g_return_val_if_fail (text != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  root = planner_json_parse (text, -1, "graph JSON", error);
  if (root == NULL)
    return NULL;
  return planner_graph_from_json_node (root, error);
}

PlannerGraph *
planner_graph_load_json (const char *path, GError **error)
{
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (GError) local_error = NULL;
  PlannerGraph *graph;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  root = planner_json_load_file (path, NULL, error);
  if (root == NULL)
    return NULL;
  graph = planner_graph_from_json_node (root, &local_error);
  if (graph == NULL)
    g_propagate_prefixed_error (error, g_steal_pointer (&local_error), "%s: ", path);
  return graph;
}
