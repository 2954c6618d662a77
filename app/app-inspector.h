/* app-inspector.h: the selected op (its type, name, shapes, factors, layouts in both notations,
 * every candidate strategy with its cost, the pin editor, and why propagation chose what it
 * chose). Bound to a document's "plan" and "selected-op". */
#pragma once

#include <adwaita.h>

#include "app-document-view.h"

G_BEGIN_DECLS

#define APP_TYPE_INSPECTOR (app_inspector_get_type ())
G_DECLARE_FINAL_TYPE (AppInspector, app_inspector, APP, INSPECTOR, AppDocumentView)

GtkWidget *app_inspector_new (void);
/* The pin editor: activating it pins the selected op; a refusal shows under it. */
GtkEditable *app_inspector_get_pin_entry (AppInspector *self);
/* The op page's scrolled window (it starts at its top for each new op). */
GtkScrolledWindow *app_inspector_get_scroller (AppInspector *self);
/* The refusal shown under the pin editor, NULL when none. */
const char *app_inspector_get_pin_error (AppInspector *self);
/* Candidate strategies listed for the selected op, and the index of the chosen one. */
guint app_inspector_get_n_candidates (AppInspector *self);
int app_inspector_get_chosen_candidate (AppInspector *self);
/* Pins the selected op to candidate @i. */
void app_inspector_pin_candidate (AppInspector *self, guint i);
/* The "why" text of the selected op. */
const char *app_inspector_get_why (AppInspector *self);
/* Moves the keyboard focus to the pin editor. */
void app_inspector_focus_pin_entry (AppInspector *self);

G_END_DECLS
