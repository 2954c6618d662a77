/* planner-json.h: JSON text in and out, for every file format of the planner (graph JSON,
 * plan JSON, hardware profiles, exports) and the CLI's --json output.
 *
 * Reading is json-glib's; these helpers make its refusals PLANNER_ERROR_MALFORMED_FILE
 * messages that name the file and the line. Writing is by hand because json-glib 1.6's
 * generator writes 1e-05 as the invalid "1e-05.0", and plan times and calibrated figures are
 * such numbers: numbers here are the shortest text that reads back to the same double, and
 * strings are escaped exactly as json-glib escapes them.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* ---- reading ---- */

/* Every string and member name under @root is UTF-8: json-glib takes lone surrogate escapes
 * ("\ud800") and gives strings that are not, which GLib asserts on. planner_json_parse and
 * planner_json_load_file check it; readers with their own JsonParser call it. */
gboolean planner_json_check_utf8 (JsonNode *root, const char *what, GError **error);
/* Every file input nests far less: deeper is refused before json-glib, which recurses once per
 * level, could run out of stack. */
#define PLANNER_JSON_MAX_DEPTH 512

/* Parses JSON text; a syntax error is PLANNER_ERROR_MALFORMED_FILE "WHAT:LINE:COL: ...". Every
 * reader of user input goes through here, so it also refuses what json-glib would accept
 * wrongly: nesting deeper than PLANNER_JSON_MAX_DEPTH, more text after the first value,
 * integers beyond gint64, numbers beyond the doubles and a member name twice in one object. */
JsonNode *planner_json_parse (const char *text, gssize length, const char *what, GError **error);
/* Reads and parses @path, which names the file in syntax errors. A file that cannot be read is
 * PLANNER_ERROR_IO: "cannot read KIND PATH: ..." with @kind ("plan"), else GLib's message. */
JsonNode *planner_json_load_file (const char *path, const char *kind, GError **error);
/* The object @root holds, else PLANNER_ERROR_MALFORMED_FILE "WHAT: expected a JSON object". */
JsonObject *planner_json_expect_object (JsonNode *root, const char *what, GError **error);

/* ---- reading fields ----
 *
 * A reader names the field it refuses as a path from the top of the document:
 * "WHAT: field 'ops[3].strategy.factors' PROBLEM", PLANNER_ERROR_MALFORMED_FILE. Plan files and
 * hardware profiles are read this way. Start one as { "plan JSON", NULL, error } (the path
 * is allocated on the first push) under g_auto(). Every reader below takes the @name of what
 * it reads relative to the current path: a member name, "[3]" for an element, or NULL for the
 * current path itself; it fails with @r's error set and returns FALSE or NULL. */

typedef struct
{
  const char *what; /* the document, for messages: "plan JSON", "hardware profile" */
  GString *path;    /* where the reader is: "redistributions[3].steps" */
  GError **error;
} PlannerJsonReader;

void planner_json_reader_clear (PlannerJsonReader *r);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (PlannerJsonReader, planner_json_reader_clear)

/* Sets "WHAT: field 'PATH.NAME' MESSAGE"; returns FALSE. */
gboolean planner_json_fail (PlannerJsonReader *r, const char *name, const char *format, ...)
    G_GNUC_PRINTF (3, 4);
/* Enters a member ("steps") or element ("[3]", "steps[3]") for the messages of what is read
 * inside it; planner_json_pop() with the mark returned leaves it. */
gsize planner_json_push (PlannerJsonReader *r, const char *format, ...) G_GNUC_PRINTF (2, 3);
void planner_json_pop (PlannerJsonReader *r, gsize mark);

/* Whether @node (which may be NULL) is a value of @type (G_TYPE_INT64, G_TYPE_STRING...). */
gboolean planner_json_node_is (JsonNode *node, GType type);

/* The value of one node: a string (null gives NULL when @nullable), an integer in
 * [@min, @max], a number (integer or not), an object, an array. */
gboolean planner_json_read_string (PlannerJsonReader *r, JsonNode *node, const char *name,
                                   gboolean nullable, const char **out);
gboolean planner_json_read_int (PlannerJsonReader *r, JsonNode *node, const char *name, gint64 min,
                                gint64 max, gint64 *out);
gboolean planner_json_read_number (PlannerJsonReader *r, JsonNode *node, const char *name,
                                   double *out);
JsonObject *planner_json_read_object (PlannerJsonReader *r, JsonNode *node, const char *name);
JsonArray *planner_json_read_array (PlannerJsonReader *r, JsonNode *node, const char *name);

/* The same for member @name of @object, which "is missing" when absent. */
JsonNode *planner_json_member (PlannerJsonReader *r, JsonObject *object, const char *name);
gboolean planner_json_get_string (PlannerJsonReader *r, JsonObject *object, const char *name,
                                  gboolean nullable, const char **out);
gboolean planner_json_get_int (PlannerJsonReader *r, JsonObject *object, const char *name,
                               gint64 min, gint64 max, gint64 *out);
gboolean planner_json_get_uint (PlannerJsonReader *r, JsonObject *object, const char *name,
                                guint *out);
gboolean planner_json_get_uint64 (PlannerJsonReader *r, JsonObject *object, const char *name,
                                  guint64 *out);
gboolean planner_json_get_number (PlannerJsonReader *r, JsonObject *object, const char *name,
                                  double *out);
gboolean planner_json_get_bool (PlannerJsonReader *r, JsonObject *object, const char *name,
                                gboolean *out);
JsonObject *planner_json_get_object (PlannerJsonReader *r, JsonObject *object, const char *name);
JsonArray *planner_json_get_array (PlannerJsonReader *r, JsonObject *object, const char *name);

/* Member @name of @object, which must be an object, entered as "NAME"; the caller pops @mark. */
JsonObject *planner_json_enter_member (PlannerJsonReader *r, JsonObject *object, const char *name,
                                       gsize *mark);
/* Element @i of @array, which must be an object, entered as "NAME[i]"; the caller pops @mark. */
JsonObject *planner_json_enter_element (PlannerJsonReader *r, JsonArray *array, const char *name,
                                        guint i, gsize *mark);
/* Reads each element of @array, which must be an object, with @read, entered as "NAME[i]". */
typedef gboolean (*PlannerJsonElementFunc) (PlannerJsonReader *r, JsonObject *element, guint i,
                                            gpointer user_data);
gboolean planner_json_read_elements (PlannerJsonReader *r, JsonArray *array, const char *name,
                                     PlannerJsonElementFunc read, gpointer user_data);
/* Refuses a member of @object not in @known, so that a typo is not silently a default:
 * "is not known here (known: a, b)". */
gboolean planner_json_check_members (PlannerJsonReader *r, JsonObject *object,
                                     const char *const *known);

/* ---- building ----
 *
 * Each adds member @member of the object a JsonBuilder is building or, with @member NULL, an
 * element of its array. */

void planner_json_add_int (JsonBuilder *b, const char *member, gint64 value);
/* A non-finite value, which JSON lacks, as null. */
void planner_json_add_double (JsonBuilder *b, const char *member, double value);
/* NULL as null. */
void planner_json_add_string (JsonBuilder *b, const char *member, const char *value);
void planner_json_add_ints (JsonBuilder *b, const char *member, const gint64 *values, guint n);

/* ---- writing ---- */

/* "text" with json-glib's escaping; NULL as null. */
void planner_json_append_string (GString *out, const char *text);
/* A JSON double: the shortest of %.15g, %.16g and %.17g that reads back exactly, with ".0" on
 * whole numbers so that readers that type numbers by their text (json-glib) read a double.
 * Non-finite values, which JSON lacks, are written as null. */
void planner_json_append_double (GString *out, double value);
/* The same digits without ".0", as people write figures (370, 2.5, 1e-05): hardware profiles
 * and CSV. Only finite values make JSON. */
void planner_json_append_number (GString *out, double value);
/* A value node (integer, double, boolean, string) or null. */
void planner_json_append_scalar (GString *out, JsonNode *node);

/* JSON text of @node, two-space indented ("key": value), short scalar arrays and small flat
 * objects on one line, doubles as planner_json_append_double() writes them, and a final
 * newline. */
char *planner_json_to_string (JsonNode *node);

G_END_DECLS
