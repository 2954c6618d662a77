/* planner-pipeline.h: pipeline parallelism over the mesh axis "pp" (issue 18).
 *
 * The pipeline axis splits the layer sequence, not tensors: the plan's layouts and strategies
 * never name it (planner_mesh_unit_axes), so within a stage sharding over the other axes is
 * exactly what it is without a pipeline. The layers (ops grouped by `layers.N.` in their
 * names) are cut into p x v contiguous chunks (p = size of pp, v = virtual stages); chunk c
 * runs on the devices whose pp coordinate is c % p. The ops before the first layer (the
 * embedding) go with the first chunk, the ops after the last (final norm, head) with the last.
 * The chunks are balanced by the training model's time of each layer (the split whose largest
 * chunk is smallest), or given as layer ranges ("0-19,20-39,40-59,60-79").
 *
 * Costs (planner/README.md, "Pipeline parallelism"): each stage is costed by the training
 * model on its own ops and parameters; the activations that cross a chunk boundary are sent
 * point to point over the pp axis's link (and their gradients back); the step is the busiest
 * stage's m micro-batches plus the bubble, (sum of the stages' micro-batch times - the
 * largest) / v, which is (p - 1) / v of a micro-batch on balanced stages: the schedule's
 * bubble fraction (p - 1) / (v m + p - 1). Activations in flight per stage s: GPipe m, 1F1B
 * min (p - s, m), interleaved min (2 (p - s - 1) + (v - 1) p + 1, v m) chunks of 1/v of the
 * stage (Megatron-LM's warm-up count; p + (p - 1) / v on stage 0, as Korthikanti et al. 2022
 * derive it).
 */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-plan.h"

G_BEGIN_DECLS

/* Chunks (p x v) at most. */
#define PLANNER_MAX_PIPELINE_CHUNKS 1024

typedef struct
{
  guint index;    /* the pp coordinate of its devices */
  guint n_chunks; /* v */
  guint *chunks;  /* chunk indices: index, index + p, ... */
  guint n_layers;
  guint n_ops;
  guint64 n_devices;              /* every device with this pp coordinate */
  double flops;                   /* forward FLOPs per device per step */
  double in_flight;               /* micro-batches whose activations it holds at its peak */
  PlannerMemory memory;           /* per device, with the micro-batches in flight */
  PlannerStepBreakdown breakdown; /* its own work per step: no bubble */
  double comm_s;        /* per micro-batch: its sends (activations forward, gradients back) */
  double shared_sync_s; /* per step: AllReduces of the gradients of parameters other stages
                         * also hold (a tied embedding on the first and last stage) */
  double micro_batch_s; /* per micro-batch: forward, backward, recompute, tp comm, sends */
  double busy_s;        /* per step: m micro-batches, the gradient sync and the overhead */
} PlannerPipelineStage;

/* What crosses one chunk boundary (chunk -> chunk + 1), per micro-batch and device. */
typedef struct
{
  guint chunk; /* the sending chunk */
  guint from_stage, to_stage;
  guint n_tensors; /* activations that cross it */
  guint tensor;    /* the first of them */
  guint64 bytes;   /* sent per device, one direction */
  guint scatter;   /* > 1: sent as 1/scatter slices over the replicated intra-node axes
                    * and gathered on the receiving stage (Megatron's scatter/gather) */
  PlannerLinkKind link;
  double time_s; /* one direction */
} PlannerPipelineSend;

typedef struct
{
  guint axis;        /* the pp axis */
  guint p, v, m;     /* stages, virtual stages, micro-batches */
  guint local_batch; /* sequences per device per step */
  PlannerSchedule schedule;
  guint n_layers, n_chunks;
  int *chunk_first, *chunk_last; /* layer range of each chunk */
  int *op_chunk;                 /* per op */
  guint n_stages;
  PlannerPipelineStage *stages;
  guint n_sends;
  PlannerPipelineSend *sends;
  guint bottleneck;                        /* the stage the step waits for */
  double bubble_fraction;                  /* the schedule's: (p - 1) / (v m + p - 1) */
  PlannerStepBreakdown breakdown;          /* the bottleneck's, with the bubble and its sends */
  PlannerMemory memory;                    /* the stage with the most */
  double compute_time_s, grad_sync_time_s; /* the bottleneck's */
} PlannerPipeline;

/* The pipeline of a finished plan, or NULL with @error on a split that cannot be made (fewer
 * layers than chunks, a --stages text that does not cover the layers in order, interleaving
 * with micro-batches not a multiple of p). NULL and no error when the mesh has no pp axis of
 * size > 1. @set_op_times: also set each op's compute_time_s (as the training model does). */
PlannerPipeline *planner_pipeline_new (PlannerPlan *plan, gboolean set_op_times, GError **error);
void planner_pipeline_free (PlannerPipeline *pipeline);

/* The devices of stage @stage, in id order; @n gets their count. */
guint64 *planner_pipeline_stage_devices (const PlannerPipeline *pipeline, const PlannerMesh *mesh,
                                         guint stage, guint64 *n);
/* "0-19" or "0-4,20-24" (interleaved): the layer ranges of a stage's chunks. */
char *planner_pipeline_stage_layers (const PlannerPipeline *pipeline, guint stage);

/* The stage that runs op @op. */
int planner_pipeline_op_stage (const PlannerPipeline *pipeline, guint op);
/* For the exports (torch.distributed.pipelining's split points, MindSpore's pipeline_stage):
 * the module path of the first layer of each chunk after the first, in order
 * ("model.layers.20", "model.layers.40", "model.layers.60"), NULL-terminated. */
char **planner_pipeline_split_modules (const PlannerPipeline *pipeline, PlannerGraph *graph);

/* For the DTensor script's header: how to run @plan's pipeline with torch.distributed.pipelining
 * (the stage split, the schedule class and its micro-batches, the mesh dim), or NULL without a
 * pipeline. */
char *planner_pipeline_dtensor_comment (PlannerPlan *plan);

/* One slot of a schedule: stage @stage runs the forward (or backward) of micro-batch
 * @micro_batch through its chunk @chunk (0 .. v - 1, in the stage's order) from @start to
 * @end seconds. */
typedef struct
{
  guint stage, micro_batch, chunk;
  gboolean backward;
  double start, end;
} PlannerPipelineSlot;

/* Runs @schedule over @p stages, @v chunks per stage and @m micro-batches, stage s taking
 * @forward[s] / v and @backward[s] / v a chunk, each stage in its schedule's order (GPipe: every
 * forward, then every backward; 1F1B: p - s - 1 forwards, then one forward and one backward in
 * turn, then the remaining backwards; interleaved: Megatron-LM's order over virtual
 * micro-batches, 2 (p - s - 1) + (v - 1) p forwards first), each slot starting when its stage is
 * free and its input is there (the previous chunk's forward, the next chunk's backward). The
 * time x stage chart of the view; appends the slots to @slots (NULL: none) in the order they
 * run on each stage, stage by stage, and returns the step's length. @in_flight (NULL, or p
 * doubles) gets each stage's largest count of micro-batch chunks forwarded and not yet
 * backwarded, divided by v. */
double planner_pipeline_simulate (PlannerSchedule schedule, guint p, guint v, guint m,
                                  const double *forward, const double *backward, GArray *slots,
                                  double *in_flight);
/* The schedule of @pipeline with its stages' own micro-batch times (forward and its share of
 * the sends, backward with recompute and the rest). */
double planner_pipeline_schedule (const PlannerPipeline *pipeline, GArray *slots);

/* Members added to a plan's summary JSON: "pipeline" (schedule, p, v, m, bubble_fraction,
 * sends) and "stages" (a list, each with its layers, devices, costs and memory). */
void planner_pipeline_add_json (PlannerPlan *plan, JsonBuilder *builder);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PlannerPipeline, planner_pipeline_free)

G_END_DECLS
