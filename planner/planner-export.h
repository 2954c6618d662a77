/* planner-export.h: plans for training frameworks (architecture.md, "Data flow").
 *
 * - dtensor: a Python script for torch.distributed.tensor.parallel: the mesh with the plan's
 *   named axes and a parallelize_module plan whose keys are fnmatch patterns over the Hugging
 *   Face module names, with ColwiseParallel, RowwiseParallel, SequenceParallel and
 *   PrepareModuleInput/Output where the plan needs them.
 * - mindspore: a strategy checkpoint JSON as MindSpore reads it: parallel_strategy_item (op ->
 *   stage and the split count of each input dim) and parallel_layout_item (parameter ->
 *   dev_matrix, tensor_map, tensor_shape).
 * - csv: one row per op and per redistribution, with layouts, bytes, and estimated and
 *   measured times.
 *
 * What a format cannot express is never dropped silently: each such op or redistribution is a
 * line in @notes (and, for dtensor, a comment at the top of the script).
 */
#pragma once

#include "planner-plan.h"
#include "planner-store.h"

G_BEGIN_DECLS

/* @notes: char*, may be NULL. The script is ASCII; any op name, quotes, newlines and all, is
 * written as an escaped string literal or an escaped comment, so the script does nothing but
 * define the plan (MESH_SHAPE, MESH_DIM_NAMES, TP_DIM, PLAN, parallelize()). */
char *planner_export_dtensor (PlannerPlan *plan, GPtrArray *notes, GError **error);
char *planner_export_mindspore (PlannerPlan *plan, GPtrArray *notes);
/* The ops a strategy file cannot carry (no parameter input) as a Python module of MindSpore
 * .shard() calls, SHARDS and apply(net). */
char *planner_export_mindspore_shard (PlannerPlan *plan, GPtrArray *notes, GError **error);
/* A Python module for JAX: the mesh, a PartitionSpec per parameter and input, sharding
 * constraints where the plan redistributes, and the plan's collectives per kind. */
char *planner_export_jax (PlannerPlan *plan, GPtrArray *notes, GError **error);
/* @run: the trial run whose measured times fill the measured_us column (the latest one of a
 * plan from the store), or NULL to leave it empty. */
char *planner_export_csv (PlannerPlan *plan, const PlannerTrialRun *run);

/* The formats as a table, for front ends: name, file extension, one line of description. */
typedef struct
{
  const char *name;
  const char *extension;
  const char *description;
  char *(*write) (PlannerPlan *plan, const PlannerTrialRun *run, GPtrArray *notes, GError **error);
} PlannerExportFormat;

const PlannerExportFormat *planner_export_formats (guint *n_formats);
const PlannerExportFormat *planner_export_format_lookup (const char *name);
/* The text of format @name (no trial run, notes only inside the text), or NULL with
 * PLANNER_ERROR_PARSE for an unknown format. */
char *planner_export_to_string (PlannerPlan *plan, const char *name, GError **error);

/* Python string literal of any text, ASCII only: 'it\'s\n'. */
char *planner_export_python_string (const char *text);
/* One CSV field, quoted when it needs to be (RFC 4180). */
void planner_export_csv_field (GString *out, const char *text);

G_END_DECLS
