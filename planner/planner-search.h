/* planner-search.h: the best plans for a model and a number of devices (issue 17).
 *
 * Every factorisation of N devices into the named axes dp (major) and mp, times the built-in
 * policies (greedy propagation of their pins) and the exact solve (planner-solve.h) under the
 * request's own pins; each candidate costed by the training model. The best is the fastest
 * candidate that fits the memory limit; the Pareto front is step time against memory per
 * device. */
#pragma once

#include <gio/gio.h>

#include "planner-plan.h"
#include "planner-request.h"
#include "planner-solve.h"

G_BEGIN_DECLS

typedef struct
{
  char *mesh;   /* "dp=8,mp=8" */
  char *policy; /* the built-in policy, NULL for the exact solve */
  gboolean solved;
  double step_time_s; /* training model */
  guint64 memory_per_device_bytes;
  gboolean fits;
  gboolean pareto;           /* on the front of step time against memory */
  PlannerSolveReport report; /* solved candidates */
  char *error;               /* why there is no plan (a policy the mesh cannot take); else NULL */
  PlannerPlan *plan;         /* NULL with an error */
} PlannerSearchCandidate;

typedef void (*PlannerSearchProgress) (guint done, guint total, const char *what,
                                       gpointer user_data);

typedef struct
{
  guint n_devices;
  guint64 memory_limit;          /* 0: the hardware's memory */
  const PlannerRequest *request; /* pins and training options; its policy is ignored */
  gboolean solve;                /* include the exact solve (default TRUE) */
  gboolean policies;             /* include the built-in policies (default TRUE) */
  GCancellable *cancellable;
  PlannerSearchProgress progress; /* called from the calling thread */
  gpointer progress_data;
} PlannerSearchOptions;

void planner_search_options_init (PlannerSearchOptions *options);

typedef struct
{
  GPtrArray *candidates; /* PlannerSearchCandidate*, by mesh, then policies, then solved */
  int best;              /* index of the fastest that fits, -1 when none does */
  guint64 memory_limit;
  double search_ms;
} PlannerSearchResult;

void planner_search_result_free (PlannerSearchResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerSearchResult, planner_search_result_free)

/* The meshes tried for @n devices: "dp=N,mp=1", ..., "dp=1,mp=N", one per divisor. */
GPtrArray *planner_search_meshes (guint n_devices);

PlannerSearchResult *planner_search (PlannerGraph *graph, const PlannerHardware *hw,
                                     const PlannerSearchOptions *options, GError **error);

/* Candidates in order of step time, fitting ones first: indices into result->candidates. */
GArray *planner_search_ranking (const PlannerSearchResult *result);

G_END_DECLS
