/* fuzz-mesh.c: mesh strings ("dp=4,mp=2"), as --mesh and the mesh editor give them.
 * A mesh taken is printed and parsed again to an equal mesh, and device ids and coordinates
 * map back and forth at both ends of the device range. */
#include "fuzz-harness.h"

#include "planner-mesh.h"

gboolean
fuzz_mesh (const guint8 *data, gsize size, GError **error)
{
  g_autofree char *text = fuzz_text (data, size);
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (text, error);
  if (mesh == NULL)
    return FALSE;

  g_autofree char *printed = planner_mesh_to_string (mesh);
  g_autoptr (GError) local = NULL;
  g_autoptr (PlannerMesh) again = planner_mesh_parse (printed, &local);
  if (again == NULL || !planner_mesh_equal (mesh, again))
    fuzz_fail ("mesh \"%s\" printed as \"%s\" does not parse back: %s", text, printed,
               local ? local->message : "a different mesh");

  guint64 n = planner_mesh_n_devices (mesh);
  if (n == 0)
    fuzz_fail ("mesh \"%s\" has no device", text);
  guint64 ends[2] = { 0, n - 1 };
  for (guint i = 0; i < G_N_ELEMENTS (ends); i++)
    {
      guint coords[PLANNER_MAX_AXES] = { 0 };
      planner_mesh_device_coords (mesh, ends[i], coords);
      for (guint a = 0; a < mesh->n_axes; a++)
        if (coords[a] >= mesh->sizes[a])
          fuzz_fail ("mesh \"%s\": device %" G_GUINT64_FORMAT
                     " has coordinate %u on axis %s of size %u",
                     text, ends[i], coords[a], mesh->names[a], mesh->sizes[a]);
      if (planner_mesh_device_id (mesh, coords) != ends[i])
        fuzz_fail ("mesh \"%s\": device %" G_GUINT64_FORMAT
                   " does not map back from its coordinates",
                   text, ends[i]);
    }
  return TRUE;
}

FUZZ_TARGET (fuzz_mesh)
