/* planner-export-private.h: what the export formats share (planner-export.c): ASCII text
 * and Python literals, block patterns over repeated module names, the notes of what a format
 * cannot express, and factor look-ups on a plan's strategies. */
#pragma once

#include "planner-plan.h"

G_BEGIN_DECLS

/* Every character outside printable ASCII as an escape; with @quoting, backslashes and single
 * quotes too (a Python string literal body). Never a line break. */
void planner_export_append_escaped (GString *out, const char *text, gboolean quoting);
void planner_export_append_python_string (GString *out, const char *text);

/* "model.layers.12.mlp.up_proj" -> "model.layers.*.mlp.up_proj" (NULL: no all-digit part). */
char *planner_export_block_pattern (const char *name, gboolean fnmatch_escape);
/* An op name as an fnmatch key that matches only itself. */
char *planner_export_literal_key (const char *name);
gboolean planner_export_under_pattern (const char *name, char **pattern_parts,
                                       const char *const *literal_parts);

typedef struct
{
  GPtrArray *names;   /* char*: an op or redistribution name */
  GPtrArray *reasons; /* char* */
} PlannerExportNotes;

void planner_export_notes_init (PlannerExportNotes *n);
void planner_export_notes_clear (PlannerExportNotes *n);
/* Takes @reason. */
void planner_export_note (PlannerExportNotes *n, const char *name, char *reason);
/* One line per (block pattern, reason): "NAME: REASON". */
GPtrArray *planner_export_notes_collapse (PlannerExportNotes *n);
void planner_export_notes_publish (GPtrArray *lines, GPtrArray *notes);

int planner_export_factor_of_axis (const PlannerStrategy *s, guint axis);
int planner_export_operand_dim_of_factor (const PlannerOperandMap *map, guint f);
int planner_export_batch_factor (const PlannerOpRule *rule);
gboolean planner_export_has_parameter_input (PlannerGraph *graph, const PlannerOp *op);

/* The DTensor script's pipeline part (planner-export-dtensor-pipeline.c): "PP_DIM = None", or
 * with a pp axis the plan's stage split, schedule and build_pipeline(); FALSE with @error when
 * the script cannot run the plan's pipeline. */
gboolean planner_export_dtensor_pipeline (GString *out, PlannerPlan *plan, GError **error);

G_END_DECLS
