/* app-document.h: one plan being edited in a window.
 *
 * Holds what a plan is made from (graph, mesh, hardware profile, policy and the user's pins)
 * and the plan propagation made of it. Every pin edit re-plans off the GTK thread (a GTask)
 * and is undoable. The window, inspector, timeline, totals and chart bind to its properties
 * ("plan", "selected-op", "step", "busy", "error", "can-undo", "can-redo", "modified",
 * "name", "hardware-name", "pins") instead of keeping copies; each is notified when it changes
 * (can-undo and can-redo too, not at every edit).
 */
#pragma once

#include <gio/gio.h>

#include "planner-pipeline.h"
#include "planner-plan.h"

G_BEGIN_DECLS

#define APP_TYPE_DOCUMENT (app_document_get_type ())
G_DECLARE_FINAL_TYPE (AppDocument, app_document, APP, DOCUMENT, GObject)

/* @policy: a built-in name, a policy file, or NULL for none. Call app_document_replan(). */
AppDocument *app_document_new (PlannerGraph *graph, const PlannerMesh *mesh,
                               const PlannerHardware *hw, const char *policy);
/* A document whose plan is @plan (loaded from a file or the store, @store_id 0 when not
 * stored); the user's pins are the plan's pins that its policy does not give. */
AppDocument *app_document_new_for_plan (PlannerPlan *plan, gint64 store_id);

PlannerGraph *app_document_get_graph (AppDocument *self);
const PlannerMesh *app_document_get_mesh (AppDocument *self);
const PlannerHardware *app_document_get_hardware (AppDocument *self);
const char *app_document_get_policy (AppDocument *self);
/* Re-costs the plan with @hw (a copy is kept): the pins stay, propagation runs again (its
 * choices follow the costs) and the document counts as edited. */
void app_document_set_hardware (AppDocument *self, const PlannerHardware *hw);

const char *app_document_get_name (AppDocument *self);
void app_document_set_name (AppDocument *self, const char *name);
gint64 app_document_get_store_id (AppDocument *self);
void app_document_set_store_id (AppDocument *self, gint64 id);
/* Unsaved pin edits since the last app_document_set_store_id(). */
gboolean app_document_get_modified (AppDocument *self);
/* Marks the document as holding unsaved edits (edits recovered from an autosave). */
void app_document_mark_modified (AppDocument *self);

/* NULL until the first propagation finishes. */
PlannerPlan *app_document_get_plan (AppDocument *self);
/* The plan before the last pin edit (what compare shows the edit against), or NULL. */
PlannerPlan *app_document_get_previous_plan (AppDocument *self);
gboolean app_document_get_busy (AppDocument *self);
/* Why the last propagation was refused, NULL when it was not. */
const char *app_document_get_error (AppDocument *self);

/* The user's pins, "OP=LAYOUTS" (char*). */
GPtrArray *app_document_get_pins (AppDocument *self);
/* The user's pin of exactly this op, or NULL. */
const char *app_document_get_op_pin (AppDocument *self, const char *op_name);
/* Checks @layouts ("[dp,_],[_,mp]", optionally "->OUT") against the op's rule and mesh, then
 * replaces the op's user pin and re-plans. The error names what was wrong. */
gboolean app_document_pin (AppDocument *self, const char *op_name, const char *layouts,
                           GError **error);
/* Removes the op's user pin; FALSE when it had none. */
gboolean app_document_unpin (AppDocument *self, const char *op_name);

gboolean app_document_get_can_undo (AppDocument *self);
gboolean app_document_get_can_redo (AppDocument *self);
void app_document_undo (AppDocument *self);
void app_document_redo (AppDocument *self);

/* The training options the plans are finished with: schedule, micro-batches, virtual
 * stages, ... (a document of a plan starts with the plan's). Setting different ones marks
 * the document modified and re-plans. */
const PlannerCostConstants *app_document_get_constants (AppDocument *self);
void app_document_set_constants (AppDocument *self, const PlannerCostConstants *constants);

/* The plan's pipeline (planner-pipeline.h), made with the plan off the GTK thread; NULL
 * without a plan or a pp axis. Borrowed: valid until the plan changes. */
const PlannerPipeline *app_document_get_pipeline (AppDocument *self);

/* Starts a propagation of the current pins; the plan property changes when it is done. */
void app_document_replan (AppDocument *self);

/* The op shown in the inspector, -1 for none. */
int app_document_get_selected_op (AppDocument *self);
/* The name of the selected op, NULL for none. */
const char *app_document_get_selected_op_name (AppDocument *self);
void app_document_set_selected_op (AppDocument *self, int op);
/* The timeline's trace step, -1 when the whole plan is shown. */
int app_document_get_step (AppDocument *self);
void app_document_set_step (AppDocument *self, int step);

G_END_DECLS
