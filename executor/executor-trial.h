/* executor-trial.h: a trial run proves a plan by running it (architecture.md, "Executor").
 *
 * From a seed: random inputs and parameters; the unsharded graph on one device as the
 * reference; the plan on the mesh, each device holding its local shards, running each op's
 * local kernel and each redistribution step by step exactly as the plan lists it. Every op
 * output, redistribution result and graph output is compared with the reference; each op
 * and redistribution is timed (warm-up, then the median of the repeats).
 */
#pragma once

#include <gio/gio.h>

#include "executor-backend.h"
#include "executor-tensors.h"
#include "planner-plan.h"

G_BEGIN_DECLS

/* Called from the thread of device 0 (the GUI marshals it to its main loop): @fraction in
 * [0, 1] and what runs now. */
typedef void (*ExecutorProgressFunc) (double fraction, const char *what, gpointer user_data);

typedef struct
{
  guint64 seed;
  guint warmup;      /* untimed runs before the timed ones (1) */
  guint repeat;      /* timed runs; each time is the median over them (5); 0: check only */
  double tolerance;  /* largest relative error that still matches (1e-5) */
  ExecutorProgressFunc progress;
  gpointer progress_data;
  /* Global values of source tensors (parameters, graph inputs) by tensor name, in place of
   * the seeded random ones; not owned. Each must hold the tensor's elements in its storage
   * dtype (a view as executor_shape_is_view_of() accepts); the rest stay random. */
  ExecutorTensors *sources;
  /* Keep the graph outputs, gathered from the shards, in the result (outputs_sharded,
   * outputs_reference). */
  gboolean keep_outputs;
} ExecutorTrialOptions;

void executor_trial_options_init (ExecutorTrialOptions *options);

typedef struct
{
  char *name;             /* the graph output tensor */
  double max_abs_error;
  double max_rel_error;   /* max |sharded - reference| / max |reference| */
} ExecutorOutputError;

typedef struct
{
  char *name;             /* op name; redistributions: "TENSOR -> CONSUMER" */
  char *what;             /* op type; redistributions: the steps */
  double estimated_s;     /* the plan's cost model */
  double measured_s;      /* median over repeats of the slowest device; 0 without repeats */
  double max_rel_error;   /* of its result against the reference */
} ExecutorTiming;

typedef struct
{
  char *backend;
  guint n_devices;
  guint64 seed;
  guint repeat;
  double tolerance;
  /* bf16/f16 tensors ran as f32 (the CPU backend computes in f32). */
  gboolean reduced_precision_as_f32;

  gboolean passed;
  double max_abs_error;   /* over the graph outputs */
  double max_rel_error;
  GArray *outputs;        /* ExecutorOutputError, graph output order */
  GArray *ops;            /* ExecutorTiming, one per op, topological order */
  GArray *redistributions; /* ExecutorTiming, the plan's order */
  /* The first op (or redistribution) in execution order whose result differs. */
  int first_mismatch_op;
  int first_mismatch_redistribution;
  char *mismatch;         /* NULL when everything matches */

  double estimated_step_s; /* forward: ops + redistributions */
  double measured_step_s;
  /* Pipelined plans (executor-pipeline.h): activations sent between stages per pass. */
  guint pipeline_sends;

  /* With keep_outputs: every graph output by its tensor name, global shape, f32 or i64:
   * the plan's (each shard put in place, partial sums added) and the one-device
   * reference's. NULL otherwise. */
  ExecutorTensors *outputs_sharded;
  ExecutorTensors *outputs_reference;
} ExecutorTrialResult;

void executor_trial_result_free (ExecutorTrialResult *result);
/* The object `shardscope-cli run --json` prints. */
char *executor_trial_result_to_json (const ExecutorTrialResult *result);

/* What a trial run of a plan holds at once, from the plan alone (every value it allocates,
 * shard by shard), before anything is allocated. */
typedef struct
{
  guint n_devices;
  guint64 sources_bytes;           /* the seeded parameters and inputs, whole, on the host */
  guint64 reference_bytes;         /* the reference's buffers: every tensor whole, on one device */
  guint64 reference_results_bytes; /* the reference's results, copied to the host */
  guint64 device_bytes;            /* one sharded device's buffers: shards, redistribution results
                                    * and scratch (the same on every device) */
  guint64 device_results_bytes;    /* one device's results, copied to the host */
} ExecutorTrialMemory;

/* Fills @memory for @plan; FALSE with EXECUTOR_ERROR_INVALID_PLAN for a plan that cannot
 * run (as executor_trial_run() would say). */
gboolean executor_trial_estimate_memory (PlannerPlan *plan, ExecutorTrialMemory *memory,
                                         GError **error);
/* The host's peak during the run: sources, results and, where @buffers_on_host (the cpu
 * backend), the buffers of the reference or of every device, whichever is larger. */
guint64 executor_trial_memory_host_bytes (const ExecutorTrialMemory *memory,
                                          gboolean buffers_on_host);
/* Bytes the host may still allocate: /proc/meminfo's MemAvailable, or what a cgroup's
 * memory.max leaves when that is less; 0 when unknown. */
guint64 executor_host_memory_available (void);

/* Runs @plan on @backend (made for the plan's mesh) and the reference on a one-device
 * backend of the same kind. A numeric mismatch is a result with passed FALSE, not an error;
 * errors are bad plans (EXECUTOR_ERROR_INVALID_PLAN), a run that would not fit in the host's
 * or a device's free memory (EXECUTOR_ERROR_OUT_OF_MEMORY, with the figures, before anything
 * is allocated), backend failures and cancellation (G_IO_ERROR_CANCELLED). */
ExecutorTrialResult *executor_trial_run (PlannerPlan *plan, ExecutorBackend *backend,
                                         const ExecutorTrialOptions *options,
                                         GCancellable *cancellable, GError **error);
/* Creates the backend by name for the plan's mesh. */
ExecutorTrialResult *executor_trial_run_named (PlannerPlan *plan, const char *backend_name,
                                               const ExecutorTrialOptions *options,
                                               GCancellable *cancellable, GError **error);

/* The global value of every source tensor (parameters, graph inputs) a trial with @seed and
 * @given sources (may be NULL) uses: the training step's reference starts from the same. */
ExecutorTensors *executor_trial_sources (PlannerGraph *graph, guint64 seed,
                                         ExecutorTensors *given, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ExecutorTrialResult, executor_trial_result_free)

G_END_DECLS
