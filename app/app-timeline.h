/* app-timeline.h: the propagation timeline under the graph: step slider, play/pause, speed and
 * the current step's description. Drives the document's "step". Its "has-steps" (the
 * controls' sensitivity), "description" (markup: the label and its tooltip) and "playing"
 * (the play icon) are bound in app-timeline.ui. */
#pragma once

#include <adwaita.h>

#include "app-document-view.h"

G_BEGIN_DECLS

#define APP_TYPE_TIMELINE (app_timeline_get_type ())
G_DECLARE_FINAL_TYPE (AppTimeline, app_timeline, APP, TIMELINE, AppDocumentView)

GtkWidget *app_timeline_new (void);
gboolean app_timeline_get_playing (AppTimeline *self);
void app_timeline_set_playing (AppTimeline *self, gboolean playing);
/* Steps per second while playing ("speed" property). */
double app_timeline_get_speed (AppTimeline *self);
void app_timeline_set_speed (AppTimeline *self, double speed);
/* One step forward (@delta 1) or back; past the last step the whole plan is shown. */
void app_timeline_step (AppTimeline *self, int delta);
/* The description shown for the current step. */
const char *app_timeline_get_description (AppTimeline *self);

G_END_DECLS
