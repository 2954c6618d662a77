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

/* Parses JSON text; a syntax error is PLANNER_ERROR_MALFORMED_FILE "WHAT:LINE:COL: ...". */
JsonNode *planner_json_parse (const char *text, gssize length, const char *what, GError **error);
/* Reads and parses @path, which names the file in syntax errors. A file that cannot be read is
 * PLANNER_ERROR_IO: "cannot read KIND PATH: ..." with @kind ("plan"), else GLib's message. */
JsonNode *planner_json_load_file (const char *path, const char *kind, GError **error);
/* The object @root holds, else PLANNER_ERROR_MALFORMED_FILE "WHAT: expected a JSON object". */
JsonObject *planner_json_expect_object (JsonNode *root, const char *what, GError **error);

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
