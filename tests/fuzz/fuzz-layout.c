/* fuzz-layout.c: layout text in both notations, as the pin field, --pin and plan files give
 * it. The input is a mesh line, then the layout: "dp=2,mp=4\n[dp,_,mp]" (bracket notation)
 * or "dp=2,mp=4\n(S(0), P)" (per-axis placements, read for a rank-4 tensor). A layout taken
 * is well formed, and prints and parses back to an equal layout in both notations. */
#include "fuzz-harness.h"

#include <string.h>

#include "planner-layout.h"

/* The rank placements are read for: high enough for every dim index the seeds use. */
#define PLACEMENTS_RANK 4

static void
check_roundtrip (const PlannerLayout *layout, const PlannerMesh *mesh, const char *text)
{
  g_autoptr (GError) error = NULL;
  PlannerLayout again;

  if (!planner_layout_is_well_formed (layout, mesh))
    fuzz_fail ("layout \"%s\" was taken but is not well formed", text);

  g_autofree char *bracket = planner_layout_to_string (layout, mesh);
  if (!planner_layout_parse (bracket, mesh, &again, &error)
      || !planner_layout_equal (layout, &again))
    fuzz_fail ("layout \"%s\" printed as \"%s\" does not parse back: %s", text, bracket,
               error ? error->message : "a different layout");

  g_autofree char *placements = planner_layout_to_placements (layout, mesh);
  if (!planner_layout_parse_placements (placements, mesh, layout->rank, &again, &error)
      || !planner_layout_equal (layout, &again))
    fuzz_fail ("layout \"%s\" printed as \"%s\" does not parse back: %s", text, placements,
               error ? error->message : "a different layout");
}

gboolean
fuzz_layout (const guint8 *data, gsize size, GError **error)
{
  g_autofree char *text = fuzz_text (data, size);
  char *newline = strchr (text, '\n');
  if (newline == NULL)
    newline = text + strlen (text);
  g_autofree char *mesh_text = g_strndup (text, newline - text);
  const char *layout_text = *newline ? newline + 1 : newline;

  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, error);
  if (mesh == NULL)
    return FALSE;

  PlannerLayout layout;
  gboolean ok;
  if (layout_text[0] == '(')
    ok = planner_layout_parse_placements (layout_text, mesh, PLACEMENTS_RANK, &layout, error);
  else
    ok = planner_layout_parse (layout_text, mesh, &layout, error);
  if (ok)
    check_roundtrip (&layout, mesh, layout_text);
  return ok;
}

FUZZ_TARGET (fuzz_layout)
