/* app-new-plan-dialog.h: a new plan from a model source (the zoo, a config.json, a graph
 * JSON or an ONNX model), a mesh, a hardware profile and a policy. Emits "create" (model, mesh, hardware,
 * policy or NULL) and closes. */
#pragma once

#include <adwaita.h>

#include "app-document.h"

G_BEGIN_DECLS

#define APP_TYPE_NEW_PLAN_DIALOG (app_new_plan_dialog_get_type ())
G_DECLARE_FINAL_TYPE (AppNewPlanDialog, app_new_plan_dialog, APP, NEW_PLAN_DIALOG, AdwWindow)

AppNewPlanDialog *app_new_plan_dialog_new (GtkWindow *parent);
/* The file chooser's filter of model sources: *.json (config.json, graph JSON) and *.onnx,
 * named for all three. */
GtkFileFilter *app_new_plan_dialog_new_model_filter (void);

G_END_DECLS
