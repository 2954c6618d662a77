#define G_LOG_DOMAIN "planner-mesh"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-mesh.h"

PlannerMesh *
planner_mesh_new (void)
{
  return g_new0 (PlannerMesh, 1);
}

PlannerMesh *
planner_mesh_copy (const PlannerMesh *mesh)
{
  g_return_val_if_fail (mesh != NULL, NULL);
  return g_memdup2 (mesh, sizeof *mesh);
}

void
planner_mesh_free (PlannerMesh *mesh)
{
  g_free (mesh);
}

static gboolean
is_identifier (const char *name)
{
  if (name[0] == '\0' || !(g_ascii_isalpha (name[0]) || name[0] == '_'))
    return FALSE;
  for (const char *p = name; *p; p++)
    if (!(g_ascii_isalnum (*p) || *p == '_'))
      return FALSE;
  /* "_" alone means "not split" in layouts, so it cannot name an axis. */
  return strcmp (name, "_") != 0;
}

gboolean
planner_mesh_add_axis (PlannerMesh *mesh, const char *name, guint size, GError **error)
{
  g_return_val_if_fail (mesh != NULL, FALSE);
  g_return_val_if_fail (name != NULL, FALSE);

  if (!is_identifier (name) || strlen (name) >= PLANNER_MAX_AXIS_NAME)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "mesh axis name '%s' is not an identifier of at most %d characters "
                   "(letters, digits, '_'; e.g. dp, mp, tp)",
                   name, PLANNER_MAX_AXIS_NAME - 1);
      return FALSE;
    }
  if (size < 1)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "mesh axis %s has size %u; sizes must be >= 1", name, size);
      return FALSE;
    }
  if (planner_mesh_axis_index (mesh, name) >= 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "mesh axis %s appears twice; each axis needs its own name", name);
      return FALSE;
    }
  if (mesh->n_axes >= PLANNER_MAX_AXES)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "a mesh has at most %d axes", PLANNER_MAX_AXES);
      return FALSE;
    }
  /* The mesh so far holds at most PLANNER_MAX_DEVICES (2^20) and @size is below 2^32: the
   * product fits 64 bits. */
  guint64 devices = planner_mesh_n_devices (mesh) * size;
  if (devices > PLANNER_MAX_DEVICES)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "mesh axis %s=%u makes %" G_GUINT64_FORMAT " devices; a mesh has at most %u "
                   "(2^20) devices: use smaller axis sizes",
                   name, size, devices, PLANNER_MAX_DEVICES);
      return FALSE;
    }
  g_strlcpy (mesh->names[mesh->n_axes], name, PLANNER_MAX_AXIS_NAME);
  mesh->sizes[mesh->n_axes] = size;
  mesh->n_axes++;
  return TRUE;
}

PlannerMesh *
planner_mesh_parse (const char *text, GError **error)
{
  g_return_val_if_fail (text != NULL, NULL);

  g_autoptr (PlannerMesh) mesh = planner_mesh_new ();
  g_auto (GStrv) parts = g_strsplit (text, ",", -1);

  for (guint i = 0; parts[i]; i++)
    {
      g_autofree char *part = g_strstrip (g_strdup (parts[i]));
      const char *eq = strchr (part, '=');
      guint64 size;

      if (eq == NULL)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                       "mesh '%s': '%s' is not NAME=SIZE (write e.g. dp=4,mp=2)", text, part);
          return NULL;
        }
      g_autofree char *name = g_strstrip (g_strndup (part, eq - part));
      g_autofree char *num = g_strstrip (g_strdup (eq + 1));
      if (!g_ascii_string_to_unsigned (num, 10, 1, G_MAXUINT32, &size, NULL))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                       "mesh '%s': size of axis %s is '%s'; sizes are integers >= 1, with at "
                       "most %u (2^20) devices in all",
                       text, name, num, PLANNER_MAX_DEVICES);
          return NULL;
        }
      if (!planner_mesh_add_axis (mesh, name, (guint) size, error))
        {
          g_prefix_error (error, "mesh '%s': ", text);
          return NULL;
        }
    }
  if (mesh->n_axes == 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "empty mesh; write e.g. dp=4,mp=2");
      return NULL;
    }
  return g_steal_pointer (&mesh);
}

char *
planner_mesh_to_string (const PlannerMesh *mesh)
{
  g_return_val_if_fail (mesh != NULL, NULL);

  GString *s = g_string_new (NULL);
  for (guint a = 0; a < mesh->n_axes; a++)
    g_string_append_printf (s, "%s%s=%u", a ? "," : "", mesh->names[a], mesh->sizes[a]);
  return g_string_free (s, FALSE);
}

gboolean
planner_mesh_equal (const PlannerMesh *a, const PlannerMesh *b)
{
  if (a->n_axes != b->n_axes)
    return FALSE;
  for (guint i = 0; i < a->n_axes; i++)
    if (a->sizes[i] != b->sizes[i] || strcmp (a->names[i], b->names[i]) != 0)
      return FALSE;
  return TRUE;
}

int
planner_mesh_axis_index (const PlannerMesh *mesh, const char *name)
{
  for (guint a = 0; a < mesh->n_axes; a++)
    if (strcmp (mesh->names[a], name) == 0)
      return (int) a;
  return -1;
}

guint64
planner_mesh_n_devices (const PlannerMesh *mesh)
{
  return planner_mesh_mask_size (mesh, (1u << mesh->n_axes) - 1);
}

guint64
planner_mesh_mask_size (const PlannerMesh *mesh, guint32 mask)
{
  guint64 n = 1;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (mask & (1u << a))
      n *= mesh->sizes[a];
  return n;
}

void
planner_mesh_device_coords (const PlannerMesh *mesh, guint64 device, guint coords[PLANNER_MAX_AXES])
{
  for (int a = (int) mesh->n_axes - 1; a >= 0; a--)
    {
      coords[a] = device % mesh->sizes[a];
      device /= mesh->sizes[a];
    }
}

guint64
planner_mesh_device_id (const PlannerMesh *mesh, const guint coords[PLANNER_MAX_AXES])
{
  guint64 id = 0;
  for (guint a = 0; a < mesh->n_axes; a++)
    id = id * mesh->sizes[a] + coords[a];
  return id;
}

guint32
planner_mesh_unit_axes (const PlannerMesh *mesh)
{
  g_return_val_if_fail (mesh != NULL, 0);
  guint32 mask = 0;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (mesh->sizes[a] == 1)
      mask |= 1u << a;
  int pp = planner_mesh_pipeline_axis (mesh);
  if (pp >= 0)
    mask |= 1u << pp;
  return mask;
}

int
planner_mesh_pipeline_axis (const PlannerMesh *mesh)
{
  g_return_val_if_fail (mesh != NULL, -1);
  return planner_mesh_axis_index (mesh, "pp");
}
