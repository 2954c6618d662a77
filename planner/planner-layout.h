/* planner-layout.h: the layout (sharding spec) of one tensor on a mesh (semantics.md 3).
 *
 * A value type: small, copied by assignment, compared with memcmp-free helpers. The
 * redistribution search creates millions of them, so no allocation lives inside.
 */
#pragma once

#include <glib.h>

#include "planner-mesh.h"

G_BEGIN_DECLS

#define PLANNER_MAX_RANK 8

typedef struct
{
  guint8 rank;
  /* dims[i]: mesh axis indices that split dim i, major first; n_axes[i] of them. */
  guint8 n_axes[PLANNER_MAX_RANK];
  guint8 axes[PLANNER_MAX_RANK][PLANNER_MAX_AXES];
  /* Bit a set: the tensor holds partial sums over mesh axis a. */
  guint32 partial;
} PlannerLayout;

/* All dims whole, nothing partial: replicated on every axis. */
void planner_layout_init_replicated (PlannerLayout *layout, guint rank);
gboolean planner_layout_equal (const PlannerLayout *a, const PlannerLayout *b);
guint planner_layout_hash (const PlannerLayout *layout);
/* Bitmask of the axes that split some dim. */
guint32 planner_layout_split_mask (const PlannerLayout *layout);
/* Dim split by axis @axis, or -1 when the axis splits nothing. */
int planner_layout_dim_of_axis (const PlannerLayout *layout, guint axis);
/* Product of the sizes of the axes splitting @dim. */
guint64 planner_layout_dim_splits (const PlannerLayout *layout, const PlannerMesh *mesh, guint dim);
/* An axis of size 1 is a no-op (semantics.md 2): a split over it is no split, a partial over
 * it no partial. The canonical form names no such axis; every layout the planner makes or
 * parses is canonical, so one placement has one layout. Removes them in place. */
void planner_layout_normalize (PlannerLayout *layout, const PlannerMesh *mesh);
/* Each mesh axis appears at most once, partial and split axes disjoint, axes < n_axes. */
gboolean planner_layout_is_well_formed (const PlannerLayout *layout, const PlannerMesh *mesh);

/* Full check against a tensor: rank, every axis known and used once, every dim divisible.
 * @what names the tensor in the message ("model.layers.0.mlp.up_proj: weight"). */
gboolean planner_layout_validate (const PlannerLayout *layout, const PlannerMesh *mesh,
                                  const gint64 *shape, guint rank, const char *what,
                                  GError **error);

/* Local shard shape on every device (all devices have the same, dims being divisible). */
void planner_layout_local_shape (const PlannerLayout *layout, const PlannerMesh *mesh,
                                 const gint64 *shape, gint64 *local_shape);
/* Offset of the local shard along each dim on device @coords. */
void planner_layout_local_offset (const PlannerLayout *layout, const PlannerMesh *mesh,
                                  const gint64 *shape, const guint coords[PLANNER_MAX_AXES],
                                  gint64 *offset);

/* Bracket notation: "[dp,_,mp]", "[dp+mp,_]", "[_,_] partial(mp)", "[]" for a scalar. */
gboolean planner_layout_parse (const char *text, const PlannerMesh *mesh, PlannerLayout *layout,
                               GError **error);
/* Parses one layout from the start of @text and returns the rest in @endp. */
gboolean planner_layout_parse_prefix (const char *text, const PlannerMesh *mesh,
                                      PlannerLayout *layout, const char **endp, GError **error);
char *planner_layout_to_string (const PlannerLayout *layout, const PlannerMesh *mesh);
/* Per-axis (DTensor/OneFlow) notation: one placement per mesh axis, "(S(0), P)", "(R, R)".
 * Several axes on one dim are in mesh order unless written S(d:k), k = position in the dim's
 * axis list, which this printer adds only when the order differs from mesh order.
 * The rank is not in this notation, so the parser needs it. */
gboolean planner_layout_parse_placements (const char *text, const PlannerMesh *mesh, guint rank,
                                          PlannerLayout *layout, GError **error);
char *planner_layout_to_placements (const PlannerLayout *layout, const PlannerMesh *mesh);

G_END_DECLS
