/* app-hardware-dialog.h: the hardware profile's cost figures, shown and edited.
 *
 * Lists every figure of a PlannerHardware (planner-hardware.h) the cost model reads: peak
 * TFLOP/s per dtype, HBM bandwidth and capacity, devices per node, both links (name, busbw,
 * latency per ring step), and the efficiency tables and constants (GEMM efficiency by size,
 * attention kernels, memory-bound fraction, kernel launch, NVLS and LL protocol figures,
 * overlap slowdown), each row keyed by its place in the profile JSON
 * ("links.intra.bandwidth_GBps"). Save writes the edited profile, under a name of its own,
 * to app_hardware_user_dir() in the format shardscope-cli --hardware reads, and emits
 * "saved": the window re-costs the open plan with it, and the new-plan dialog offers it
 * from then on. Measured collective curves are kept as they are.
 */
#pragma once

#include <adwaita.h>

#include "planner-hardware.h"

G_BEGIN_DECLS

/* $XDG_DATA_HOME/shardscope/hardware: where the user's profiles live (NAME.json). */
char *app_hardware_user_dir (void);
/* The built-in profiles, then the user's (by name, sorted), without repeats. */
GStrv app_hardware_list_names (void);
/* A user's profile by name, else what planner_hardware_lookup() finds (a built-in, a path). */
PlannerHardware *app_hardware_lookup (const char *name, GError **error);

#define APP_TYPE_HARDWARE_DIALOG (app_hardware_dialog_get_type ())
G_DECLARE_FINAL_TYPE (AppHardwareDialog, app_hardware_dialog, APP, HARDWARE_DIALOG, AdwWindow)

/* Shows a copy of @hw. Signal "saved" (const PlannerHardware *hw, const char *path). */
GtkWidget *app_hardware_dialog_new (GtkWindow *parent, const PlannerHardware *hw);

/* The rows' keys, in the order shown. */
GStrv app_hardware_dialog_dup_keys (AppHardwareDialog *self);
/* A row's text, as shown ("370"), NULL for an unknown key. */
const char *app_hardware_dialog_get_text (AppHardwareDialog *self, const char *key);
/* Types @text into the row of @key, as the user does; FALSE for an unknown key. */
gboolean app_hardware_dialog_set_text (AppHardwareDialog *self, const char *key, const char *text);
/* The profile as the rows say, or NULL with the first refused row's reason. */
PlannerHardware *app_hardware_dialog_dup_hardware (AppHardwareDialog *self, GError **error);
/* What Save does: writes the profile to app_hardware_user_dir()/NAME.json and emits
 * "saved"; returns the path, or NULL with the reason (shown in the dialog too). */
char *app_hardware_dialog_save (AppHardwareDialog *self, GError **error);

G_END_DECLS
