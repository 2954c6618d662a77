/* planner-search.h: the best plans for a model and a number of devices (issue 17).
 *
 * Every factorisation of N devices into the named axes dp (major) and mp, and, for a model of
 * L >= 2 layers, into pp x dp x mp with a pipeline of pp = 2 .. L stages (planner-pipeline.h,
 * 1F1B over options->micro_batches), times the built-in policies (greedy propagation of their
 * pins) and, on the two-axis meshes only, the exact solve (planner-solve.h) under the
 * request's own pins; each candidate costed by the training model (pipelined on pp > 1).
 * The best is the fastest candidate that fits the memory limit; the Pareto front is step
 * time against memory per device. */
#pragma once

#include <gio/gio.h>

#include "planner-plan.h"
#include "planner-request.h"
#include "planner-solve.h"

G_BEGIN_DECLS

typedef struct
{
  char *mesh;   /* "dp=8,mp=8", "pp=4,dp=2,mp=8" */
  char *policy; /* the built-in policy, NULL for the exact solve */
  gboolean solved;
  double step_time_s; /* training model */
  guint64 memory_per_device_bytes;
  gboolean fits;
  gboolean pareto;           /* on the front of step time against memory */
  PlannerSolveReport report; /* solved candidates */
  char *error;               /* why there is no plan (a policy the mesh cannot take); else NULL */
  PlannerPlan *plan;         /* NULL with an error */
  /* A pipeline (pp > 1; else pp = 1 and the rest 0), as the plan's totals ran it. */
  guint pp;               /* stages */
  guint micro_batches;    /* asked for (also set when the plan was refused) */
  double bubble_fraction; /* (p - 1) / (m + p - 1) under 1F1B */
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
  gboolean pipelines;            /* include pp > 1 meshes (default TRUE) */
  guint micro_batches;           /* per step on pp > 1 meshes; 0: 4 x pp */
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

/* The meshes tried for @n devices and a model of @n_layers layers (planner_search_layers):
 * "dp=N,mp=1", ..., "dp=1,mp=N", one per divisor of N; then, when @n_layers >= 2, for every
 * divisor P of N with 2 <= P <= @n_layers in increasing order, "pp=P,dp=N/P,mp=1", ...,
 * "pp=P,dp=1,mp=N/P". */
GPtrArray *planner_search_meshes (guint n_devices, guint n_layers);
/* The layers a pipeline can split @graph into: 1 + the largest planner_op_block of its ops
 * (0 without any). */
guint planner_search_layers (PlannerGraph *graph);

PlannerSearchResult *planner_search (PlannerGraph *graph, const PlannerHardware *hw,
                                     const PlannerSearchOptions *options, GError **error);

/* Candidates in order of step time, fitting ones first: indices into result->candidates. */
GArray *planner_search_ranking (const PlannerSearchResult *result);

G_END_DECLS
