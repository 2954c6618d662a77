/* planner-redistribute.h: the cheapest step sequence between two layouts (semantics.md 6).
 *
 * Dijkstra over layouts, each edge one step on one mesh axis (AllReduce, ReduceScatter,
 * AllGather, AllToAll, Slice), weighted by the cost model of planner-cost.h. Results are
 * cached by (source, target, global shape, dtype); the mesh and hardware are fixed per
 * redistributor. The cost of a path is the sum of exactly the steps it returns.
 */
#pragma once

#include <glib.h>

#include "planner-cost.h"
#include "planner-layout.h"

G_BEGIN_DECLS

typedef struct
{
  PlannerStepKind kind;
  guint8 axis;
  gint8 dim;      /* gathered/scattered/sliced dim; AllToAll: the source dim; -1: AllReduce */
  gint8 dim_to;   /* AllToAll: the target dim; else -1 */
  PlannerLayout before;
  PlannerLayout after;
  guint64 n_in;   /* local bytes before the step */
  guint64 n_out;  /* local bytes after */
  guint64 bytes;  /* bytes a device sends over the link (planner_cost_step_bytes) */
  double time_s;
} PlannerRedistStep;

typedef struct
{
  gboolean reachable;    /* FALSE: no step sequence exists (e.g. to a partial layout) */
  guint n_steps;
  PlannerRedistStep *steps;
  guint64 bytes;
  double time_s;
} PlannerRedistPath;

typedef struct _PlannerRedistributor PlannerRedistributor;

/* Both are copied. */
PlannerRedistributor *planner_redistributor_new (const PlannerMesh *mesh,
                                                 const PlannerHardware *hw);
void planner_redistributor_free (PlannerRedistributor *self);
const PlannerMesh *planner_redistributor_get_mesh (PlannerRedistributor *self);
const PlannerHardware *planner_redistributor_get_hardware (PlannerRedistributor *self);

/* The cheapest path; borrowed from the cache, valid until the redistributor is freed. An
 * equal source and target give an empty, reachable path. */
const PlannerRedistPath *planner_redistributor_find (PlannerRedistributor *self,
                                                     const PlannerLayout *from,
                                                     const PlannerLayout *to,
                                                     const gint64 *shape, guint rank,
                                                     PlannerDType dtype);
/* Time of that path, G_MAXDOUBLE when unreachable. */
double planner_redistributor_cost (PlannerRedistributor *self, const PlannerLayout *from,
                                   const PlannerLayout *to, const gint64 *shape, guint rank,
                                   PlannerDType dtype);
/* One line: "AllReduce(mp) 12 MiB 0.8 ms; AllGather(dp, dim 0) ..." */
char *planner_redist_path_describe (const PlannerRedistPath *path, const PlannerMesh *mesh);
char *planner_redist_step_describe (const PlannerRedistStep *step, const PlannerMesh *mesh);
/* Applies one step to a layout, as the search does: FALSE when the step does not apply. */
gboolean planner_redist_step_apply (PlannerStepKind kind, guint axis, int dim, int dim_to,
                                    const PlannerLayout *before, PlannerLayout *after);

/* A fast hash of plain bytes (cache keys that are zeroed structs). */
guint planner_hash_bytes (gconstpointer data, gsize size);

/* "12.0 MiB", "840 B"; "0.80 ms", "35 us": shared by every front end. */
char *planner_format_bytes (guint64 bytes);
char *planner_format_time (double seconds);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerRedistributor, planner_redistributor_free)

G_END_DECLS
