#define G_LOG_DOMAIN "planner-json"

#include "config.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-json.h"

/* ---- reading ---- */

/* What json-glib 1.6 does not refuse by itself, found in one pass over the bytes before it
 * parses them: nesting deeper than PLANNER_JSON_MAX_DEPTH (its parser recurses once per level
 * and overflows the stack near 100,000), a second value after the first ("{}{}" reads as
 * "{}"), integers outside gint64 (2^64 reads as -1), numbers outside the doubles (1e400
 * reads as inf) and a member name twice in one object (the last one wins). Syntax is
 * json-glib's to judge; this only skips what it does not understand. */

typedef struct
{
  const char *what;
  const char *text;
  const char *line_start;
  guint line;
  GError **error;
} Scan;

static gboolean scan_fail (Scan *scan, const char *at, const char *format, ...)
    G_GNUC_PRINTF (3, 4);

static gboolean
scan_fail (Scan *scan, const char *at, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  /* The line:column form of json-glib's own messages. */
  g_set_error (scan->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s:%u:%u: %s", scan->what,
               scan->line, (guint)(at - scan->line_start) + 1, message);
  return FALSE;
}

static gboolean
scan_number (Scan *scan, const char *start, const char *end)
{
  g_autofree char *token = g_strndup (start, end - start);
  gboolean integer = strpbrk (token, ".eE") == NULL;

  if (integer)
    {
      char *rest;
      errno = 0;
      g_ascii_strtoll (token, &rest, 10);
      if (errno == ERANGE)
        return scan_fail (
            scan, start,
            "the integer %s is out of range; integers here are between %" G_GINT64_FORMAT
            " and %" G_GINT64_FORMAT,
            token, G_MININT64, G_MAXINT64);
      return TRUE;
    }
  if (!isfinite (g_ascii_strtod (token, NULL)))
    return scan_fail (scan, start,
                      "the number %s is out of range; numbers here are finite doubles (below "
                      "1.8e308 in magnitude)",
                      token);
  return TRUE;
}

/* One open container: an object's member names so far, and whether a name comes next. */
typedef struct
{
  gboolean object;
  gboolean expect_name;
  GHashTable *names; /* created at the second member */
  const char *first; /* the first member's name, quotes included, until then */
  gsize first_length;
} Level;

static void
levels_free (Level *levels)
{
  for (guint i = 0; i <= PLANNER_JSON_MAX_DEPTH; i++)
    g_clear_pointer (&levels[i].names, g_hash_table_unref);
  g_free (levels);
}

/* A member name (quotes included, as written) of the object @level, refused when it repeats:
 * json-glib keeps the last of two, silently. */
static gboolean
scan_name (Scan *scan, Level *level, const char *start, const char *end)
{
  gsize length = end - start;

  if (level->first == NULL)
    {
      level->first = start;
      level->first_length = length;
      return TRUE;
    }
  if (level->names == NULL)
    {
      level->names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_hash_table_add (level->names, g_strndup (level->first, level->first_length));
    }
  char *name = g_strndup (start, length);
  if (!g_hash_table_add (level->names, name))
    return scan_fail (scan, start, "the member %s appears twice in one object; keep one", name);
  return TRUE;
}

static gboolean
scan_json (const char *text, gsize length, const char *what, GError **error)
{
  Scan scan = { what, text, text, 1, error };
  const char *end = text + length;
  guint depth = 0;
  gboolean ended = FALSE; /* the top-level container has closed */
  /* levels[d] is the container at depth d (1 the outermost). */
  Level *levels = g_new0 (Level, PLANNER_JSON_MAX_DEPTH + 1);
  gboolean ok = TRUE;

  for (const char *p = text; p < end; p++)
    {
      char c = *p;
      if (c == '\n')
        {
          scan.line++;
          scan.line_start = p + 1;
          continue;
        }
      if (c == ' ' || c == '\t' || c == '\r')
        continue;
      if (ended)
        {
          ok = scan_fail (&scan, p,
                          "more text after the end of the JSON value; a file holds one "
                          "object (remove what follows it)");
          break;
        }
      if (c == '"')
        {
          const char *start = p;
          /* To the closing quote, stepping over escapes; a newline in it is json-glib's
           * error to report. */
          for (p++; p < end && *p != '"' && *p != '\n'; p++)
            if (*p == '\\' && p + 1 < end)
              p++;
          if (p >= end || *p == '\n')
            p--;
          else if (depth > 0 && levels[depth].object && levels[depth].expect_name)
            {
              levels[depth].expect_name = FALSE;
              if (!(ok = scan_name (&scan, &levels[depth], start, p + 1)))
                break;
            }
        }
      else if (c == '[' || c == '{')
        {
          if (++depth > PLANNER_JSON_MAX_DEPTH)
            {
              ok = scan_fail (&scan, p,
                              "nested more than %d levels deep; Shardscope files nest a few "
                              "levels",
                              PLANNER_JSON_MAX_DEPTH);
              break;
            }
          levels[depth] = (Level){ c == '{', c == '{', NULL, NULL, 0 };
        }
      else if (c == ']' || c == '}')
        {
          if (depth > 0)
            {
              g_clear_pointer (&levels[depth].names, g_hash_table_unref);
              if (--depth == 0)
                ended = TRUE;
            }
        }
      else if (c == ',')
        {
          if (depth > 0 && levels[depth].object)
            levels[depth].expect_name = TRUE;
        }
      else if (c == '-' || g_ascii_isdigit (c))
        {
          const char *start = p;
          while (p + 1 < end && (g_ascii_isdigit (p[1]) || strchr ("+-.eE", p[1]) != NULL))
            p++;
          if (!(ok = scan_number (&scan, start, p + 1)))
            break;
        }
    }
  levels_free (levels);
  return ok;
}

/* json-glib takes "\ud800" (a lone surrogate) and hands back a string that is not UTF-8,
 * which GLib's string functions assert on and json-glib itself cannot read back. Returns the
 * first such string (or member name) under @node, or NULL. */
static const char *
find_invalid_utf8 (JsonNode *node)
{
  if (JSON_NODE_HOLDS_OBJECT (node))
    {
      JsonObjectIter iter;
      const char *name;
      JsonNode *member;
      json_object_iter_init (&iter, json_node_get_object (node));
      while (json_object_iter_next (&iter, &name, &member))
        {
          if (!g_utf8_validate (name, -1, NULL))
            return name;
          const char *bad = find_invalid_utf8 (member);
          if (bad != NULL)
            return bad;
        }
    }
  else if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *array = json_node_get_array (node);
      for (guint i = 0; i < json_array_get_length (array); i++)
        {
          const char *bad = find_invalid_utf8 (json_array_get_element (array, i));
          if (bad != NULL)
            return bad;
        }
    }
  else if (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == G_TYPE_STRING)
    {
      const char *text = json_node_get_string (node);
      if (text != NULL && !g_utf8_validate (text, -1, NULL))
        return text;
    }
  return NULL;
}

gboolean
planner_json_check_utf8 (JsonNode *root, const char *what, GError **error)
{
  const char *bad = find_invalid_utf8 (root);
  if (bad == NULL)
    return TRUE;
  g_autofree char *valid = g_utf8_make_valid (bad, -1);
  /* Enough of it to find it in the file. */
  g_autofree char *shown = g_utf8_substring (valid, 0, MIN (g_utf8_strlen (valid, -1), 40));
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
               "%s: the string \"%s\" is not valid UTF-8 (a lone \\uD800-\\uDFFF escape?); "
               "write surrogates in pairs",
               what, shown);
  return FALSE;
}

JsonNode *
planner_json_parse (const char *text, gssize length, const char *what, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) local_error = NULL;

  g_return_val_if_fail (text != NULL && what != NULL, NULL);

  if (length < 0)
    length = strlen (text);
  if (!scan_json (text, length, what, error))
    return NULL;
  if (!json_parser_load_from_data (parser, text, length, &local_error))
    {
      /* json-glib says "<data>:LINE:COL: ..."; put the file's name there instead. */
      if (g_str_has_prefix (local_error->message, "<data>:"))
        g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s%s", what,
                     local_error->message + strlen ("<data>"));
      else
        g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s: %s", what,
                     local_error->message);
      return NULL;
    }
  if (json_parser_get_root (parser) == NULL)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s: empty file", what);
      return NULL;
    }
  if (!planner_json_check_utf8 (json_parser_get_root (parser), what, error))
    return NULL;
  return json_parser_steal_root (parser);
}

JsonNode *
planner_json_load_file (const char *path, const char *kind, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local_error = NULL;
  gsize length;

  g_return_val_if_fail (path != NULL, NULL);

  if (!g_file_get_contents (path, &text, &length, &local_error))
    {
      if (kind != NULL)
        g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_IO, "cannot read %s %s: %s", kind, path,
                     local_error->message);
      else
        g_set_error_literal (error, PLANNER_ERROR, PLANNER_ERROR_IO, local_error->message);
      return NULL;
    }
  return planner_json_parse (text, length, path, error);
}

JsonObject *
planner_json_expect_object (JsonNode *root, const char *what, GError **error)
{
  g_return_val_if_fail (root != NULL && what != NULL, NULL);

  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s: expected a JSON object",
                   what);
      return NULL;
    }
  return json_node_get_object (root);
}

/* ---- reading fields ---- */

void
planner_json_reader_clear (PlannerJsonReader *r)
{
  if (r->path != NULL)
    g_string_free (g_steal_pointer (&r->path), TRUE);
}

gboolean
planner_json_fail (PlannerJsonReader *r, const char *name, const char *format, ...)
{
  const char *path = r->path != NULL ? r->path->str : "";
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  const char *sep = *path && name && name[0] != '[' ? "." : "";
  g_set_error (r->error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE, "%s: field '%s%s%s' %s",
               r->what, path, sep, name ? name : "", message);
  return FALSE;
}

gsize
planner_json_push (PlannerJsonReader *r, const char *format, ...)
{
  g_autofree char *segment = NULL;
  va_list args;

  if (r->path == NULL)
    r->path = g_string_new (NULL);
  gsize mark = r->path->len;
  va_start (args, format);
  segment = g_strdup_vprintf (format, args);
  va_end (args);
  if (r->path->len && segment[0] != '[')
    g_string_append_c (r->path, '.');
  g_string_append (r->path, segment);
  return mark;
}

void
planner_json_pop (PlannerJsonReader *r, gsize mark)
{
  if (r->path != NULL)
    g_string_truncate (r->path, mark);
}

gboolean
planner_json_node_is (JsonNode *node, GType type)
{
  return node != NULL && JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == type;
}

gboolean
planner_json_read_string (PlannerJsonReader *r, JsonNode *node, const char *name, gboolean nullable,
                          const char **out)
{
  *out = NULL;
  if (nullable && JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!planner_json_node_is (node, G_TYPE_STRING))
    return planner_json_fail (r, name, nullable ? "must be a string or null" : "must be a string");
  *out = json_node_get_string (node);
  return TRUE;
}

gboolean
planner_json_read_int (PlannerJsonReader *r, JsonNode *node, const char *name, gint64 min,
                       gint64 max, gint64 *out)
{
  if (!planner_json_node_is (node, G_TYPE_INT64))
    return planner_json_fail (r, name, "must be an integer");
  gint64 value = json_node_get_int (node);
  if (value < min || value > max)
    return planner_json_fail (
        r, name, "must be in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "], got %" G_GINT64_FORMAT,
        min, max, value);
  *out = value;
  return TRUE;
}

gboolean
planner_json_read_number (PlannerJsonReader *r, JsonNode *node, const char *name, double *out)
{
  if (!planner_json_node_is (node, G_TYPE_DOUBLE) && !planner_json_node_is (node, G_TYPE_INT64))
    return planner_json_fail (r, name, "must be a number");
  *out = json_node_get_double (node);
  return TRUE;
}

JsonObject *
planner_json_read_object (PlannerJsonReader *r, JsonNode *node, const char *name)
{
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return planner_json_fail (r, name, "must be an object"), NULL;
  return json_node_get_object (node);
}

JsonArray *
planner_json_read_array (PlannerJsonReader *r, JsonNode *node, const char *name)
{
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return planner_json_fail (r, name, "must be an array"), NULL;
  return json_node_get_array (node);
}

JsonNode *
planner_json_member (PlannerJsonReader *r, JsonObject *object, const char *name)
{
  JsonNode *node = json_object_get_member (object, name);
  if (node == NULL)
    planner_json_fail (r, name, "is missing");
  return node;
}

gboolean
planner_json_get_string (PlannerJsonReader *r, JsonObject *object, const char *name,
                         gboolean nullable, const char **out)
{
  JsonNode *node = planner_json_member (r, object, name);
  return node && planner_json_read_string (r, node, name, nullable, out);
}

gboolean
planner_json_get_int (PlannerJsonReader *r, JsonObject *object, const char *name, gint64 min,
                      gint64 max, gint64 *out)
{
  JsonNode *node = planner_json_member (r, object, name);
  return node && planner_json_read_int (r, node, name, min, max, out);
}

gboolean
planner_json_get_uint64 (PlannerJsonReader *r, JsonObject *object, const char *name, guint64 *out)
{
  return planner_json_get_int (r, object, name, 0, G_MAXINT64, (gint64 *)out);
}

gboolean
planner_json_get_uint (PlannerJsonReader *r, JsonObject *object, const char *name, guint *out)
{
  gint64 value;
  gboolean ok = planner_json_get_int (r, object, name, 0, G_MAXUINT, &value);
  if (ok)
    *out = (guint)value;
  return ok;
}

gboolean
planner_json_get_number (PlannerJsonReader *r, JsonObject *object, const char *name, double *out)
{
  JsonNode *node = planner_json_member (r, object, name);
  return node && planner_json_read_number (r, node, name, out);
}

gboolean
planner_json_get_bool (PlannerJsonReader *r, JsonObject *object, const char *name, gboolean *out)
{
  JsonNode *node = planner_json_member (r, object, name);
  if (node == NULL)
    return FALSE;
  if (!planner_json_node_is (node, G_TYPE_BOOLEAN))
    return planner_json_fail (r, name, "must be true or false");
  *out = json_node_get_boolean (node);
  return TRUE;
}

JsonObject *
planner_json_get_object (PlannerJsonReader *r, JsonObject *object, const char *name)
{
  JsonNode *node = planner_json_member (r, object, name);
  return node ? planner_json_read_object (r, node, name) : NULL;
}

JsonArray *
planner_json_get_array (PlannerJsonReader *r, JsonObject *object, const char *name)
{
  JsonNode *node = planner_json_member (r, object, name);
  return node ? planner_json_read_array (r, node, name) : NULL;
}

JsonObject *
planner_json_enter_member (PlannerJsonReader *r, JsonObject *object, const char *name, gsize *mark)
{
  JsonObject *member = planner_json_get_object (r, object, name);
  *mark = member != NULL ? planner_json_push (r, "%s", name) : 0;
  return member;
}

JsonObject *
planner_json_enter_element (PlannerJsonReader *r, JsonArray *array, const char *name, guint i,
                            gsize *mark)
{
  *mark = planner_json_push (r, "%s[%u]", name, i);
  return planner_json_read_object (r, json_array_get_element (array, i), NULL);
}

gboolean
planner_json_read_elements (PlannerJsonReader *r, JsonArray *array, const char *name,
                            PlannerJsonElementFunc read, gpointer user_data)
{
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      gsize mark;
      JsonObject *element = planner_json_enter_element (r, array, name, i, &mark);
      if (element == NULL || !read (r, element, i, user_data))
        return FALSE;
      planner_json_pop (r, mark);
    }
  return TRUE;
}

gboolean
planner_json_check_members (PlannerJsonReader *r, JsonObject *object, const char *const *known)
{
  g_autoptr (GList) members = json_object_get_members (object);

  for (GList *l = members; l; l = l->next)
    if (!g_strv_contains (known, l->data))
      {
        g_autofree char *list = g_strjoinv (", ", (char **)known);
        return planner_json_fail (r, l->data, "is not known here (known: %s)", list);
      }
  return TRUE;
}

/* ---- building ---- */

static void
set_member (JsonBuilder *b, const char *member)
{
  if (member != NULL)
    json_builder_set_member_name (b, member);
}

void
planner_json_add_int (JsonBuilder *b, const char *member, gint64 value)
{
  set_member (b, member);
  json_builder_add_int_value (b, value);
}

void
planner_json_add_double (JsonBuilder *b, const char *member, double value)
{
  set_member (b, member);
  if (isfinite (value))
    json_builder_add_double_value (b, value);
  else
    json_builder_add_null_value (b);
}

void
planner_json_add_string (JsonBuilder *b, const char *member, const char *value)
{
  set_member (b, member);
  if (value != NULL)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

void
planner_json_add_ints (JsonBuilder *b, const char *member, const gint64 *values, guint n)
{
  set_member (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    json_builder_add_int_value (b, values[i]);
  json_builder_end_array (b);
}

/* ---- writing scalars ---- */

static gboolean
needs_escape (const char *text)
{
  for (const char *p = text; *p != '\0'; p++)
    if (*p == '"' || *p == '\\' || (guchar)*p < 0x20 || *p == 0x7f)
      return TRUE;
  return FALSE;
}

void
planner_json_append_string (GString *out, const char *text)
{
  g_return_if_fail (out != NULL);

  if (text == NULL)
    {
      g_string_append (out, "null");
      return;
    }
  /* Names and layouts need no escaping; the rest goes through json-glib's own escaping, so a
   * string reads the same in every file and output we write. */
  if (!needs_escape (text))
    {
      g_string_append_c (out, '"');
      g_string_append (out, text);
      g_string_append_c (out, '"');
      return;
    }
  g_autoptr (JsonNode) node = json_node_init_string (json_node_alloc (), text);
  g_autofree char *quoted = json_to_string (node, FALSE);
  g_string_append (out, quoted);
}

void
planner_json_append_number (GString *out, double value)
{
  static const char *const formats[] = { "%.15g", "%.16g", "%.17g" };
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  g_return_if_fail (out != NULL);

  /* %.15g's digits are the shortest whenever 15 are enough (trailing zeros go), and %.17g
   * always reads back. Exponents only below 1e-4 and from 1e15 on: 370, not 3.7e+02. */
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++)
    {
      g_ascii_formatd (buf, sizeof buf, formats[i], value);
      if (g_ascii_strtod (buf, NULL) == value)
        break;
    }
  g_string_append (out, buf);
}

void
planner_json_append_double (GString *out, double value)
{
  g_return_if_fail (out != NULL);

  if (!isfinite (value))
    {
      g_string_append (out, "null");
      return;
    }
  gsize start = out->len;
  planner_json_append_number (out, value);
  /* Keep it a double for readers that type numbers by their text. */
  if (strpbrk (out->str + start, ".eE") == NULL)
    g_string_append (out, ".0");
}

void
planner_json_append_scalar (GString *out, JsonNode *node)
{
  g_return_if_fail (out != NULL && node != NULL);

  if (JSON_NODE_HOLDS_NULL (node))
    {
      g_string_append (out, "null");
      return;
    }
  g_return_if_fail (JSON_NODE_HOLDS_VALUE (node));
  switch (json_node_get_value_type (node))
    {
    case G_TYPE_INT64:
      g_string_append_printf (out, "%" G_GINT64_FORMAT, json_node_get_int (node));
      break;
    case G_TYPE_DOUBLE:
      planner_json_append_double (out, json_node_get_double (node));
      break;
    case G_TYPE_BOOLEAN:
      g_string_append (out, json_node_get_boolean (node) ? "true" : "false");
      break;
    case G_TYPE_STRING:
      planner_json_append_string (out, json_node_get_string (node));
      break;
    default:
      g_return_if_reached ();
    }
}

/* ---- writing documents ---- */

static gboolean
is_container (JsonNode *node)
{
  return JSON_NODE_HOLDS_OBJECT (node) || JSON_NODE_HOLDS_ARRAY (node);
}

/* Scalars, or arrays/objects of scalars one level deep: candidates for one line. */
static gboolean
is_flat (JsonNode *node, guint depth)
{
  if (!is_container (node))
    return TRUE;
  if (depth > 1)
    return FALSE;
  if (JSON_NODE_HOLDS_ARRAY (node))
    {
      JsonArray *array = json_node_get_array (node);
      for (guint i = 0; i < json_array_get_length (array); i++)
        if (!is_flat (json_array_get_element (array, i), depth + 1))
          return FALSE;
      return TRUE;
    }
  JsonObjectIter iter;
  const char *name;
  JsonNode *member;
  json_object_iter_init_ordered (&iter, json_node_get_object (node));
  while (json_object_iter_next_ordered (&iter, &name, &member))
    if (!is_flat (member, depth + 1))
      return FALSE;
  return TRUE;
}

/* Lines up to this long hold a whole flat array or object. */
#define LINE_WIDTH 100

static void write_node (GString *out, JsonNode *node, guint indent, gboolean compact);

/* One element or member: separated from the one before it, on its own line unless @compact. */
static void
begin_item (GString *out, guint i, guint indent, gboolean compact)
{
  if (i > 0)
    g_string_append (out, compact ? ", " : ",\n");
  if (!compact)
    g_string_append_printf (out, "%*s", indent + 2, "");
}

static void
write_container (GString *out, JsonNode *node, guint indent, gboolean compact)
{
  gboolean object = JSON_NODE_HOLDS_OBJECT (node);
  guint n = object ? json_object_get_size (json_node_get_object (node))
                   : json_array_get_length (json_node_get_array (node));

  if (n == 0)
    {
      g_string_append (out, object ? "{}" : "[]");
      return;
    }
  g_string_append_c (out, object ? '{' : '[');
  if (!compact)
    g_string_append_c (out, '\n');
  if (object)
    {
      JsonObjectIter iter;
      const char *name;
      JsonNode *member;
      guint i = 0;
      json_object_iter_init_ordered (&iter, json_node_get_object (node));
      while (json_object_iter_next_ordered (&iter, &name, &member))
        {
          begin_item (out, i++, indent, compact);
          planner_json_append_string (out, name);
          g_string_append (out, ": ");
          write_node (out, member, indent + 2, compact);
        }
    }
  else
    for (guint i = 0; i < n; i++)
      {
        begin_item (out, i, indent, compact);
        write_node (out, json_array_get_element (json_node_get_array (node), i), indent + 2,
                    compact);
      }
  if (!compact)
    g_string_append_printf (out, "\n%*s", indent, "");
  g_string_append_c (out, object ? '}' : ']');
}

static void
write_node (GString *out, JsonNode *node, guint indent, gboolean compact)
{
  if (!is_container (node))
    {
      planner_json_append_scalar (out, node);
      return;
    }
  if (!compact && is_flat (node, 0))
    {
      gsize start = out->len;
      write_node (out, node, indent, TRUE);
      gsize line = start;
      while (line > 0 && out->str[line - 1] != '\n')
        line--;
      if (out->len - line <= LINE_WIDTH)
        return;
      g_string_truncate (out, start);
    }
  write_container (out, node, indent, compact);
}

char *
planner_json_to_string (JsonNode *node)
{
  g_return_val_if_fail (node != NULL, NULL);
  GString *out = g_string_new (NULL);
  write_node (out, node, 0, FALSE);
  g_string_append_c (out, '\n');
  return g_string_free (out, FALSE);
}
