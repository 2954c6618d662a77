/* planner-cost.h: the cost model (semantics.md 7, costs.md).
 *
 * Times are seconds per device. A redistribution step on mesh axis a, with p = size(a), link
 * bandwidth B (bytes/s) and per-step latency alpha (s), where n_in/n_out are the local bytes
 * before/after the step:
 *
 *   AllGather      (p-1) alpha + (p-1)/p n_out / B
 *   ReduceScatter  (p-1) alpha + (p-1)/p n_in / B
 *   AllReduce     2(p-1) alpha + 2(p-1)/p n / B
 *   AllToAll       (p-1) alpha + (p-1)/p n / B
 *   Slice          n_out / memory bandwidth
 *
 * and p = 1 costs 0. Where the profile holds a measured curve for the step, its link and p,
 * the curve replaces the formula (see planner_cost_collective_time).
 */
#pragma once

#include <glib.h>

#include "planner-hardware.h" /* PlannerStepKind, PlannerHardware */
#include "planner-mesh.h"
#include "planner-op-rule.h"

G_BEGIN_DECLS

/* The buffer a step's formula names, which is also the size a measured curve is keyed by:
 * n_out for AllGather and Slice, n_in for the others. */
guint64 planner_cost_step_buffer (PlannerStepKind kind, guint64 n_in, guint64 n_out);

/* Time of one step of @kind over a group of @p devices on @link, moving the buffer @n (see
 * planner_cost_step_buffer). With measured points for (kind, link, p): piecewise-linear in
 * between, after forcing bandwidth to be non-decreasing with size (least-squares monotone fit)
 * and time non-decreasing; beyond the measured range, the slope of a least-squares alpha-beta
 * fit (relative error) continued from the nearest measured point, so the curve has no jump at
 * its ends. Without points: the formula. Slice ignores @link: it is a local copy. */
double planner_cost_collective_time (const PlannerHardware *hw, PlannerStepKind kind,
                                     PlannerLinkKind link, guint p, guint64 n);

/* Time of one redistribution step on mesh axis @axis (its link from
 * planner_hardware_axis_link_kind). */
double planner_cost_step_time (const PlannerHardware *hw, const PlannerMesh *mesh,
                               PlannerStepKind kind, guint axis, guint64 n_in, guint64 n_out);

/* Bytes a device sends over the link in one step, as shown to the user: (p-1)/p of the buffer,
 * twice that for AllReduce, 0 for Slice and for p = 1. */
guint64 planner_cost_step_bytes (PlannerStepKind kind, guint p, guint64 n_in, guint64 n_out);

/* The alpha-beta fit of a measured curve, for display ("calibrated: 21 us + n / 362 GB/s"):
 * alpha in seconds, beta in seconds per byte. FALSE when the profile has no such curve. */
gboolean planner_cost_measurement_fit (const PlannerHardware *hw, PlannerStepKind kind,
                                       PlannerLinkKind link, guint p, double *alpha, double *beta);

/* The step that a forward step turns into in the backward pass (semantics.md 7): AllGather
 * <-> ReduceScatter, AllToAll reversed (an AllToAll of the same size), Slice -> AllGather (the
 * gradient shards are gathered). FALSE for AllReduce, whose transpose is the identity on the
 * partial side and moves nothing. */
gboolean planner_step_kind_backward (PlannerStepKind kind, PlannerStepKind *backward);

/* Op compute: max(flops / peak FLOP/s of @dtype, bytes touched / memory bandwidth). */
double planner_cost_compute_time (const PlannerHardware *hw, PlannerDType dtype, double flops,
                                  double bytes);

/* The constants of the training-step and memory estimates that are not hardware. Every one is
 * shown to the user and editable. */
typedef struct
{
  double weight_copies;    /* 1: the weights themselves */
  double grad_copies;      /* 1: their gradients */
  double optimizer_states; /* per parameter, in parameter bytes: 2 for Adam (m and v) */
  double backward_factor;  /* backward compute = 2x forward */
} PlannerCostConstants;

void planner_cost_constants_init (PlannerCostConstants *constants);
/* Memory per device: param_bytes x (weights + grads + optimizer states) + activation bytes
 * kept for backward. */
guint64 planner_cost_memory_per_device (const PlannerCostConstants *constants,
                                        guint64 local_param_bytes, guint64 activation_bytes);

G_END_DECLS
