/* test-ui-util.h: what the in-process GTK tests (suite ui) share: waiting on the main loop
 * for a condition, running it for a while, the log filter that lets Xvfb's missing session
 * bus pass, a widget's picture, and the nodes under an area of the graph view. */
#pragma once

#include <gtk/gtk.h>

#include "graphview-widget.h"

G_BEGIN_DECLS

typedef gboolean (*TestUiCondition) (gpointer data);

/* Iterates the main loop until @cond (@data) holds; fails the test, naming @what, after
 * @seconds. */
void test_ui_wait_for (TestUiCondition cond, gpointer data, guint seconds, const char *what);
/* Iterates the main loop for @ms milliseconds without blocking. */
void test_ui_pump (guint ms);
/* A GTestLogFatalFunc: warnings about the session bus (none under Xvfb) are not fatal, nor
 * those holding one of @data's strings (a NULL-terminated array, or NULL); the rest are. */
gboolean test_ui_log_fatal (const char *domain, GLogLevelFlags level, const char *message,
                            gpointer data);

/* @widget as the screen shows it, or NULL when it has no size or draws nothing. */
GdkTexture *test_ui_render (GtkWidget *widget);
/* After a few main-loop iterations, @widget into $G_TEST_BUILDDIR/@file as PNG, to look at
 * (nothing is compared); a widget without a picture is only said. */
void test_ui_photograph (GtkWidget *widget, const char *file);

/* Nodes of @view's layout whose box, at the view's zoom and origin, meets @area (widget
 * coordinates): counted from the layout's boxes, not by the widget under test. */
guint test_ui_nodes_under (GraphviewWidget *view, const graphene_rect_t *area);

G_END_DECLS
