/* planner-plan.h: a full sharding plan (semantics.md 5-7, 9).
 *
 * What propagation produces and everything else consumes: per-op strategy and how it was
 * decided, per-tensor layout, per-edge redistribution steps, the propagation trace, and the
 * totals of the cost model. A plan holds its graph, mesh and hardware profile.
 */
#pragma once

#include <glib-object.h>

#include "planner-graph.h"
#include "planner-hardware.h"
#include "planner-cost.h"
#include "planner-redistribute.h"

G_BEGIN_DECLS

typedef enum
{
  PLANNER_DECIDED_PINNED,
  PLANNER_DECIDED_PROPAGATED,
  PLANNER_DECIDED_DEFAULTED,
} PlannerDecision;

const char *planner_decision_to_string (PlannerDecision decision);
gboolean planner_decision_from_string (const char *text, PlannerDecision *decision);

typedef struct
{
  PlannerStrategy strategy;
  PlannerDecision decision;
  int trace_step;          /* index into the trace, -1 for pinned and defaulted ops */
  int pin;                 /* index of the pin that fixed it, -1 otherwise */
  /* A pin's output layouts (out_strategy): the outputs are redistributed to these right
   * after the op. has_out_layouts FALSE: the strategy's own output layouts. */
  gboolean has_out_layouts;
  PlannerLayout out_layouts[PLANNER_MAX_OPERANDS];
  double compute_time_s;   /* forward, per device */
  double flops;            /* forward, per device */
} PlannerOpPlan;

/* One redistribution: tensor @tensor from @from (its layout as produced or stored) to @to
 * (what the consumer needs); it also serves later consumers that need the same @to
 * (planner_plan_find_redistribution). consumer -1: a graph output's final reduction; producer_side:
 * an out_strategy conversion at the producer (consumer is then the producer op). */
typedef struct
{
  guint tensor;
  int consumer;
  guint slot;
  gboolean producer_side;
  PlannerLayout from;
  PlannerLayout to;
  guint n_steps;
  PlannerRedistStep *steps;
  guint64 bytes;
  double time_s;
} PlannerRedistribution;

typedef struct
{
  guint index;
  guint op;
  PlannerStrategy strategy;
  int from_op;             /* the neighbour it was reached from */
  gboolean forward;        /* reached along an output edge of from_op */
  double edge_cost_s;      /* sum of its decided neighbours' edge costs for this choice */
  guint n_candidates;
  gboolean has_runner_up;
  PlannerStrategy runner_up;
  double runner_up_cost_s;
} PlannerTraceStep;

/* A conflict between pins: an edge between two pinned ops (or a tied parameter) that needs
 * communication. */
typedef struct
{
  char *message;           /* names the pins, the edge, the steps and the cost */
  guint redistribution;    /* index into the redistributions */
} PlannerConflict;

typedef struct
{
  guint n_ops, n_pinned, n_propagated, n_defaulted;
  guint n_redistributions;
  guint coll_count[PLANNER_N_STEP_KINDS];
  guint64 coll_bytes[PLANNER_N_STEP_KINDS];
  double coll_time_s[PLANNER_N_STEP_KINDS];
  guint64 axis_bytes[PLANNER_MAX_AXES];
  double axis_time_s[PLANNER_MAX_AXES];
  guint64 comm_bytes;      /* forward redistributions, bytes sent per device */
  double comm_time_s;      /* forward redistributions */
  double compute_time_s;   /* forward compute */
  double backward_comm_time_s;
  double grad_sync_time_s; /* parameter gradient AllReduces */
  double step_time_s;      /* training step: forward + backward + gradient sync */
  guint64 param_bytes_per_device;
  guint64 activation_bytes_per_device;
  guint64 memory_per_device_bytes; /* memory.total */
  /* The training model (planner-plan-train.c); not store columns: recomputed on loading. */
  PlannerMemory memory;            /* per device, per micro-batch */
  PlannerStepBreakdown breakdown;  /* per global step; its total is step_time_s */
  guint micro_batches;             /* gradient accumulation steps per global step */
  guint local_batch;               /* sequences per device per global step */
} PlannerPlanTotals;

#define PLANNER_TYPE_PLAN (planner_plan_get_type ())
G_DECLARE_FINAL_TYPE (PlannerPlan, planner_plan, PLANNER, PLAN, GObject)

/* An empty plan: every op replicated and defaulted. Propagation fills it. */
PlannerPlan *planner_plan_new (PlannerGraph *graph, const PlannerMesh *mesh,
                               const PlannerHardware *hw);

PlannerGraph *planner_plan_get_graph (PlannerPlan *self);
const PlannerMesh *planner_plan_get_mesh (PlannerPlan *self);
const PlannerHardware *planner_plan_get_hardware (PlannerPlan *self);
PlannerRedistributor *planner_plan_get_redistributor (PlannerPlan *self);
const PlannerCostConstants *planner_plan_get_constants (PlannerPlan *self);
void planner_plan_set_constants (PlannerPlan *self, const PlannerCostConstants *constants);

const char *planner_plan_get_name (PlannerPlan *self);
void planner_plan_set_name (PlannerPlan *self, const char *name);
/* The pins and the policy it was made from, as text ("GLOB=LAYOUTS"), for the store,
 * exports and derived plans. */
const GPtrArray *planner_plan_get_pins (PlannerPlan *self);
void planner_plan_add_pin_text (PlannerPlan *self, const char *pin);
const char *planner_plan_get_policy (PlannerPlan *self);
void planner_plan_set_policy (PlannerPlan *self, const char *policy);
double planner_plan_get_propagate_ms (PlannerPlan *self);
void planner_plan_set_propagate_ms (PlannerPlan *self, double ms);

PlannerOpPlan *planner_plan_get_op (PlannerPlan *self, guint op);
/* Layout of each input / output of @op under its strategy. */
void planner_plan_op_layouts (PlannerPlan *self, guint op, PlannerLayout *inputs,
                              PlannerLayout *outputs);
/* The layout a tensor has as produced (after any out_strategy conversion) or stored. */
const PlannerLayout *planner_plan_get_tensor_layout (PlannerPlan *self, guint tensor);

guint planner_plan_get_n_redistributions (PlannerPlan *self);
const PlannerRedistribution *planner_plan_get_redistribution (PlannerPlan *self, guint i);
/* One redistribution serves every consumer of @tensor that needs layout @to: the index of the
 * one consumers of that layout share, or -1. */
int planner_plan_find_redistribution (PlannerPlan *self, guint tensor, const PlannerLayout *to);
guint planner_plan_get_n_trace_steps (PlannerPlan *self);
const PlannerTraceStep *planner_plan_get_trace_step (PlannerPlan *self, guint i);
void planner_plan_append_trace_step (PlannerPlan *self, const PlannerTraceStep *step);
guint planner_plan_get_n_conflicts (PlannerPlan *self);
const PlannerConflict *planner_plan_get_conflict (PlannerPlan *self, guint i);
const PlannerPlanTotals *planner_plan_get_totals (PlannerPlan *self);

/* After the strategies are set: tensor layouts, every redistribution, conflicts and totals.
 * Fails on a tied parameter whose users need different layouts (unless allowed). */
gboolean planner_plan_finish (PlannerPlan *self, gboolean allow_tied_redistribution,
                              GError **error);

/* Field-for-field equality (strategies, decisions, layouts, redistributions, trace, totals). */
gboolean planner_plan_equal (PlannerPlan *a, PlannerPlan *b);

G_END_DECLS
