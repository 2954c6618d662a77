/* planner-mesh.h: a device mesh, named axes with sizes, major first (semantics.md 2). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Axes are few: meshes of real clusters have 2-4. Bitmasks over axes are guint32. */
#define PLANNER_MAX_AXES 8
#define PLANNER_MAX_AXIS_NAME 32
/* 2^20 devices, far beyond any cluster: every product of axis sizes (device ids, group sizes,
 * shard counts times a dim) stays well inside 64 bits, and loops over devices stay short. */
#define PLANNER_MAX_DEVICES (1u << 20)

typedef struct
{
  guint n_axes;
  char names[PLANNER_MAX_AXES][PLANNER_MAX_AXIS_NAME];
  guint sizes[PLANNER_MAX_AXES];
} PlannerMesh;

PlannerMesh *planner_mesh_new (void);
PlannerMesh *planner_mesh_copy (const PlannerMesh *mesh);
void planner_mesh_free (PlannerMesh *mesh);
/* "dp=4,mp=2"; names are C identifiers, sizes >= 1, names unique, at most
 * PLANNER_MAX_DEVICES devices in all. */
PlannerMesh *planner_mesh_parse (const char *text, GError **error);
gboolean planner_mesh_add_axis (PlannerMesh *mesh, const char *name, guint size, GError **error);
char *planner_mesh_to_string (const PlannerMesh *mesh);
gboolean planner_mesh_equal (const PlannerMesh *a, const PlannerMesh *b);
/* Index of the named axis, or -1. */
int planner_mesh_axis_index (const PlannerMesh *mesh, const char *name);
guint64 planner_mesh_n_devices (const PlannerMesh *mesh);
/* Product of the sizes of the axes in @mask. */
guint64 planner_mesh_mask_size (const PlannerMesh *mesh, guint32 mask);
/* Bitmask of the axes that split no tensor: those of size 1, no-ops everywhere (semantics.md 2),
 * and the pipeline axis (below); never named by a canonical layout or strategy. */
guint32 planner_mesh_unit_axes (const PlannerMesh *mesh);
/* The pipeline axis, the one named "pp" (issue 18): it splits the layer sequence into stages
 * (planner-pipeline.h) instead of tensors, so within a stage every layout and strategy is as on
 * the other axes alone. -1 when there is none. */
int planner_mesh_pipeline_axis (const PlannerMesh *mesh);
/* Row-major device id <-> per-axis coordinates (the last axis varies fastest). */
void planner_mesh_device_coords (const PlannerMesh *mesh, guint64 device, guint coords[PLANNER_MAX_AXES]);
guint64 planner_mesh_device_id (const PlannerMesh *mesh, const guint coords[PLANNER_MAX_AXES]);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerMesh, planner_mesh_free)

G_END_DECLS
