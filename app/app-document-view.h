/* app-document-view.h: the base of the window's parts that show one document (inspector,
 * timeline, totals bar, cost chart).
 *
 * It holds the "document" property the window binds, and the connections to whichever
 * document is shown: a part connects its handlers once, with app_document_view_follow(),
 * and redraws itself in its document_changed() when the document is replaced.
 */
#pragma once

#include <adwaita.h>

#include "app-document.h"

G_BEGIN_DECLS

#define APP_TYPE_DOCUMENT_VIEW (app_document_view_get_type ())
G_DECLARE_DERIVABLE_TYPE (AppDocumentView, app_document_view, APP, DOCUMENT_VIEW, GtkWidget)

struct _AppDocumentViewClass
{
  GtkWidgetClass parent_class;

  /* The document was replaced (the followed signals already come from the new one). */
  void (*document_changed) (AppDocumentView *self);
};

AppDocument *app_document_view_get_document (AppDocumentView *self);
void app_document_view_set_document (AppDocumentView *self, AppDocument *document);
/* The document's plan, NULL without a document or before its first propagation. */
PlannerPlan *app_document_view_get_plan (AppDocumentView *self);
/* Connects @callback, swapped (it gets the view), to @detailed_signal of the document shown,
 * whichever it is now or later. */
void app_document_view_follow (AppDocumentView *self, const char *detailed_signal,
                               GCallback callback);

G_END_DECLS
