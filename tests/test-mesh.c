#define G_LOG_DOMAIN "test-mesh"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-mesh.h"
#include "test-util.h"

/* Meshes are named axes with sizes, major first, any sizes >= 1 (semantics.md 2). */

static void
test_parse_print (void)
{
  static const char *const texts[] = {
    "dp=4,mp=2", "a=2,b=2,c=2", "x=3,y=5", "tp=1", "node=2,dp=3,mp=7,sp=1",
  };
  for (guint i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerMesh) mesh = planner_mesh_parse (texts[i], &error);
      g_assert_no_error (error);
      g_autofree char *back = planner_mesh_to_string (mesh);
      g_assert_cmpstr (back, ==, texts[i]);
    }

  /* Spaces around names and sizes are accepted and not printed. */
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (" dp = 4 , mp=2 ", &error);
  g_assert_no_error (error);
  g_autofree char *text = planner_mesh_to_string (mesh);
  g_assert_cmpstr (text, ==, "dp=4,mp=2");
  g_assert_cmpuint (mesh->n_axes, ==, 2);
  g_assert_cmpstr (mesh->names[0], ==, "dp");
  g_assert_cmpuint (mesh->sizes[0], ==, 4);
  g_assert_cmpstr (mesh->names[1], ==, "mp");
  g_assert_cmpuint (mesh->sizes[1], ==, 2);
}

static void
test_queries (void)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("dp=3,mp=5,sp=2", NULL);
  g_assert_nonnull (mesh);
  g_assert_cmpint (planner_mesh_axis_index (mesh, "dp"), ==, 0);
  g_assert_cmpint (planner_mesh_axis_index (mesh, "sp"), ==, 2);
  g_assert_cmpint (planner_mesh_axis_index (mesh, "tp"), ==, -1);
  /* Non-powers of two are fine: 3 x 5 x 2. */
  g_assert_cmpuint (planner_mesh_n_devices (mesh), ==, 30);
  g_assert_cmpuint (planner_mesh_mask_size (mesh, 0), ==, 1);
  g_assert_cmpuint (planner_mesh_mask_size (mesh, 0x1 | 0x4), ==, 6);
  g_assert_cmpuint (planner_mesh_mask_size (mesh, 0x2), ==, 5);

  g_autoptr (PlannerMesh) copy = planner_mesh_copy (mesh);
  g_assert_true (planner_mesh_equal (mesh, copy));
  copy->sizes[1] = 4;
  g_assert_false (planner_mesh_equal (mesh, copy));
  g_autoptr (PlannerMesh) renamed = planner_mesh_parse ("dp=3,tp=5,sp=2", NULL);
  g_assert_false (planner_mesh_equal (mesh, renamed));
}

static void
test_device_ids (void)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse ("dp=3,mp=5,sp=2", NULL);
  guint coords[PLANNER_MAX_AXES];

  /* Row-major: the last axis varies fastest. */
  planner_mesh_device_coords (mesh, 1, coords);
  g_assert_cmpuint (coords[0], ==, 0);
  g_assert_cmpuint (coords[1], ==, 0);
  g_assert_cmpuint (coords[2], ==, 1);
  planner_mesh_device_coords (mesh, 2, coords);
  g_assert_cmpuint (coords[1], ==, 1);
  g_assert_cmpuint (coords[2], ==, 0);
  /* 23 = 2 * (5 * 2) + 1 * 2 + 1 */
  planner_mesh_device_coords (mesh, 23, coords);
  g_assert_cmpuint (coords[0], ==, 2);
  g_assert_cmpuint (coords[1], ==, 1);
  g_assert_cmpuint (coords[2], ==, 1);

  for (guint64 d = 0; d < planner_mesh_n_devices (mesh); d++)
    {
      planner_mesh_device_coords (mesh, d, coords);
      for (guint a = 0; a < mesh->n_axes; a++)
        g_assert_cmpuint (coords[a], <, mesh->sizes[a]);
      g_assert_cmpuint (planner_mesh_device_id (mesh, coords), ==, d);
    }
}

static void
test_add_axis (void)
{
  g_autoptr (PlannerMesh) mesh = planner_mesh_new ();
  g_autoptr (GError) error = NULL;

  g_assert_true (planner_mesh_add_axis (mesh, "dp", 2, &error));
  g_assert_no_error (error);
  g_assert_true (planner_mesh_add_axis (mesh, "_tp2", 3, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (planner_mesh_n_devices (mesh), ==, 6);

  g_assert_false (planner_mesh_add_axis (mesh, "dp", 2, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH);
  g_assert_nonnull (strstr (error->message, "appears twice"));
  g_clear_error (&error);

  g_assert_false (planner_mesh_add_axis (mesh, "sp", 0, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH);
  g_assert_nonnull (strstr (error->message, ">= 1"));
  g_clear_error (&error);

  /* "_" means "not split" in layouts, so it cannot be an axis name. */
  g_assert_false (planner_mesh_add_axis (mesh, "_", 2, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH);
  g_clear_error (&error);

  for (guint i = mesh->n_axes; i < PLANNER_MAX_AXES; i++)
    {
      g_autofree char *name = g_strdup_printf ("x%u", i);
      g_assert_true (planner_mesh_add_axis (mesh, name, 1, NULL));
    }
  g_assert_false (planner_mesh_add_axis (mesh, "one_too_many", 2, &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH);
  g_assert_nonnull (strstr (error->message, "at most"));
}

static void
test_malformed (void)
{
  static const struct
  {
    const char *text;
    int code;
    const char *fragment;
  } cases[] = {
    { "", PLANNER_ERROR_PARSE, "empty mesh" },
    { "dp4", PLANNER_ERROR_PARSE, "not NAME=SIZE" },
    { "dp=4,", PLANNER_ERROR_PARSE, "not NAME=SIZE" },
    { "dp=4;mp=2", PLANNER_ERROR_INVALID_MESH, "integers >= 1" },
    { "dp=0", PLANNER_ERROR_INVALID_MESH, "integers >= 1" },
    { "dp=-2", PLANNER_ERROR_INVALID_MESH, "integers >= 1" },
    { "dp=two", PLANNER_ERROR_INVALID_MESH, "integers >= 1" },
    { "dp=2.5", PLANNER_ERROR_INVALID_MESH, "integers >= 1" },
    { "dp=2,dp=4", PLANNER_ERROR_INVALID_MESH, "appears twice" },
    { "1dp=2", PLANNER_ERROR_INVALID_MESH, "not an identifier" },
    { "d-p=2", PLANNER_ERROR_INVALID_MESH, "not an identifier" },
    { "=2", PLANNER_ERROR_INVALID_MESH, "not an identifier" },
    { "_=2", PLANNER_ERROR_INVALID_MESH, "not an identifier" },
    { "a_name_that_is_far_too_long_for_an_axis=2", PLANNER_ERROR_INVALID_MESH, "at most" },
    /* 2^16 four times is 2^64 devices, which wraps to 0 in 64 bits: the count is checked
     * axis by axis, at the axis that passes 2^20. */
    { "a=65536,b=65536,c=65536,d=65536", PLANNER_ERROR_INVALID_MESH,
      "mesh axis b=65536 makes 4294967296 devices; a mesh has at most 1048576 (2^20)" },
    { "dp=2147483648,mp=2", PLANNER_ERROR_INVALID_MESH,
      "mesh axis dp=2147483648 makes 2147483648 devices" },
    { "dp=1048577", PLANNER_ERROR_INVALID_MESH, "makes 1048577 devices" },
    { "dp=1024,mp=1025", PLANNER_ERROR_INVALID_MESH, "mesh axis mp=1025 makes 1049600 devices" },
    { "dp=4294967295", PLANNER_ERROR_INVALID_MESH, "makes 4294967295 devices" },
    { "dp=4294967296", PLANNER_ERROR_INVALID_MESH, "integers >= 1" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerMesh) mesh = planner_mesh_parse (cases[i].text, &error);
      g_test_message ("mesh '%s': %s", cases[i].text, error ? error->message : "(accepted)");
      g_assert_null (mesh);
      g_assert_error (error, PLANNER_ERROR, cases[i].code);
      g_assert_nonnull (strstr (error->message, cases[i].fragment));
    }
}

/* The largest meshes allowed: exactly 2^20 devices, in one axis or several. */
static void
test_device_limit (void)
{
  static const char *const meshes[] = { "dp=1048576", "a=1024,b=1024",
                                        ("a=2,b=2,c=2,d=2,e=2,"
                                         "f=2,g=2,h=8192") };
  for (guint i = 0; i < G_N_ELEMENTS (meshes); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerMesh) mesh = planner_mesh_parse (meshes[i], &error);
      g_assert_no_error (error);
      g_assert_cmpuint (planner_mesh_n_devices (mesh), ==, 1048576);
      g_assert_cmpuint (PLANNER_MAX_DEVICES, ==, 1048576);
    }
  /* planner_mesh_add_axis() is the one way in; a refused axis leaves the mesh as it was. */
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=1024,mp=1024");
  g_autoptr (GError) error = NULL;
  g_assert_false (planner_mesh_add_axis (mesh, "pp", 2, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_MESH, "makes 2097152 devices");
  g_assert_cmpuint (mesh->n_axes, ==, 2);
  g_assert_cmpuint (planner_mesh_n_devices (mesh), ==, 1048576);
  g_assert_true (planner_mesh_add_axis (mesh, "pp", 1, NULL));
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/planner/mesh/parse-print", test_parse_print);
  g_test_add_func ("/planner/mesh/queries", test_queries);
  g_test_add_func ("/planner/mesh/device-ids", test_device_ids);
  g_test_add_func ("/planner/mesh/add-axis", test_add_axis);
  g_test_add_func ("/planner/mesh/malformed", test_malformed);
  g_test_add_func ("/planner/mesh/device-limit", test_device_limit);

  return g_test_run ();
}
