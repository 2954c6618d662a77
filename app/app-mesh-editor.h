/* app-mesh-editor.h: named mesh axes with sizes, and the device count they make. */
#pragma once

#include <adwaita.h>

#include "app-document.h"

G_BEGIN_DECLS

#define APP_TYPE_MESH_EDITOR (app_mesh_editor_get_type ())
G_DECLARE_FINAL_TYPE (AppMeshEditor, app_mesh_editor, APP, MESH_EDITOR, GtkWidget)

GtkWidget *app_mesh_editor_new (void);
/* "dp=2,mp=4" ("mesh" property); setting it rebuilds the rows. */
char *app_mesh_editor_dup_mesh (AppMeshEditor *self);
void app_mesh_editor_set_mesh (AppMeshEditor *self, const char *mesh);
/* 0 when the axes do not make a mesh (the error shows under them). */
guint64 app_mesh_editor_get_n_devices (AppMeshEditor *self);

G_END_DECLS
