/* app-minimap.h: the whole graph in small with the visible part framed; click or drag to move
 * the view there. It steps aside (fades out, lets clicks through) while nodes of the view lie
 * under it. */
#pragma once

#include <adwaita.h>

#include "app-document.h"
#include "graphview-widget.h"

G_BEGIN_DECLS

#define APP_TYPE_MINIMAP (app_minimap_get_type ())
G_DECLARE_FINAL_TYPE (AppMinimap, app_minimap, APP, MINIMAP, GtkWidget)


GtkWidget *app_minimap_new (void);
GraphviewWidget *app_minimap_get_view (AppMinimap *self);
void app_minimap_set_view (AppMinimap *self, GraphviewWidget *view);
/* TRUE while it has stepped aside (transparent, clicks pass through) because nodes of the
 * view lie under it. */
gboolean app_minimap_get_aside (AppMinimap *self);

G_END_DECLS
