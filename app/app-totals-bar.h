/* app-totals-bar.h: the plan's totals: communication time and bytes per collective, compute,
 * training-step time and memory per device against the profile's capacity. */
#pragma once

#include <adwaita.h>

#include "app-document-view.h"

G_BEGIN_DECLS

#define APP_TYPE_TOTALS_BAR (app_totals_bar_get_type ())
G_DECLARE_FINAL_TYPE (AppTotalsBar, app_totals_bar, APP, TOTALS_BAR, AppDocumentView)

GtkWidget *app_totals_bar_new (void);
/* The step-time figure as shown ("123 ms"). */
const char *app_totals_bar_get_step_text (AppTotalsBar *self);
/* Everything shown, one line per figure. */
char *app_totals_bar_dup_text (AppTotalsBar *self);
/* The plan needs more memory per device than the profile has: the bar shows it in red
 * ("over-budget" on the memory figure's box and level bar, app-style.css). */
gboolean app_totals_bar_get_over_budget (AppTotalsBar *self);
GtkLevelBar *app_totals_bar_get_memory_bar (AppTotalsBar *self);
/* The memory total's parts as shown ("Parameters 277.2 KiB · gradients …"), and with a
 * pipeline the stages' line (NULL without one). */
const char *app_totals_bar_get_memory_breakdown (AppTotalsBar *self);
const char *app_totals_bar_get_memory_pipeline (AppTotalsBar *self);
/* What the device holds beside the tensors, as nvidia-smi counts it (issue 12): "Reserved
 * 12.2 GiB: allocator … · CUDA context … · cuBLAS … · NCCL …" (NULL when nothing is). */
const char *app_totals_bar_get_memory_reserved (AppTotalsBar *self);

G_END_DECLS
