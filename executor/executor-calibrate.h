/* executor-calibrate.h: a measured hardware profile from a backend (costs.md, "Calibration").
 *
 * Each collective is timed over a size sweep on groups of 2, 4, ... devices (warm-up, then the
 * median of the iterations, each the slowest device), and GEMM throughput and copy bandwidth
 * on every device at once; the result is a PlannerHardware with the curves as measurements,
 * which propagation then uses instead of the formula.
 */
#pragma once

#include <gio/gio.h>

#include "executor-trial.h"
#include "planner-hardware.h"

G_BEGIN_DECLS

typedef struct
{
  guint max_devices;   /* largest group measured (4); groups are 2, 4, ... up to it */
  guint64 min_bytes;   /* 8 */
  guint64 max_bytes;   /* 16 MiB on the CPU; costs.md asks >= 256 MiB on GPUs */
  guint warmup;        /* 2 */
  guint iterations;    /* 20 */
  gint64 gemm_size;    /* square GEMM edge for the FLOP/s figure (512) */
  ExecutorProgressFunc progress;
  gpointer progress_data;
} ExecutorCalibrateOptions;

void executor_calibrate_options_init (ExecutorCalibrateOptions *options);

/* Sets @link's bandwidth and latency from @hw's measured AllReduce curve of @p devices (intra
 * node): the alpha-beta fit, unless it puts the bandwidth above 4x the largest message's bus
 * bandwidth (a noisy, flat curve), where that bus bandwidth is taken. Unchanged without a
 * curve. */
void executor_calibrate_link (const PlannerHardware *hw, guint p, PlannerLink *link);

/* Refuses a backend whose collectives measure no real link (cuda virtual devices) with
 * EXECUTOR_ERROR_UNSUPPORTED. */
PlannerHardware *executor_calibrate (const char *backend_name,
                                     const ExecutorCalibrateOptions *options,
                                     GCancellable *cancellable, GError **error);

G_END_DECLS
