/* test-ui-screenshots.c: the app photographed at 1920x1080 and 1280x720, light and dark
 * (issue 15), under Xvfb (suite ui).
 *
 * llama (32 layers, folded) on dp=2,mp=4 under megatron with an attention projection
 * selected (at 1280x720 with the plans' sidebar folded away). Each picture lands in the build folder, or in $SHARDSCOPE_SCREENSHOT_DIR
 * (tools/screenshot.sh points it at docs/screenshots/). What is asserted is what the
 * pictures must show: their size is the window's, and the dark ones are dark where the
 * light ones are light, over the whole window and over the graph canvas alone (the canvas
 * is drawn by Cairo, not by GTK's theme, so it must follow the style itself).
 */
#include "config.h"

#include <adwaita.h>

#include "app-application.h"
#include "app-window.h"
#include "graphview-widget.h"

#include "test-util.h"
#include "test-ui-util.h"

#define SELECTED_OP "model.layers.0.self_attn.q_proj"

static AppApplication *app;
static AppWindow *window;




static gboolean
plan_ready (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return doc && app_document_get_plan (doc) && !app_document_get_busy (doc)
         && graphview_widget_is_ready (app_window_get_graph (window));
}


/* @widget as the screen shows it, as a texture. */
static GdkTexture *
photograph (GtkWidget *widget)
{
  GdkTexture *texture = test_ui_render (widget);
  g_assert_nonnull (texture);
  return texture;
}

/* The mean luminance (0..255) of @texture's pixels. */
static double
mean_luminance (GdkTexture *texture)
{
  int width = gdk_texture_get_width (texture), height = gdk_texture_get_height (texture);
  gsize stride = (gsize)width * 4;
  g_autofree guchar *pixels = g_malloc (stride * height);
  gdk_texture_download (texture, pixels, stride); /* cairo ARGB32: B, G, R, A */
  double sum = 0;
  for (int y = 0; y < height; y++)
    for (int x = 0; x < width; x++)
      {
        const guchar *p = pixels + y * stride + x * 4;
        sum += 0.0722 * p[0] + 0.7152 * p[1] + 0.2126 * p[2];
      }
  return sum / ((double)width * height);
}

static void
set_scheme (const char *scheme)
{
  g_assert_true (g_action_group_has_action (G_ACTION_GROUP (app), "color-scheme"));
  g_action_group_change_action_state (G_ACTION_GROUP (app), "color-scheme",
                                      g_variant_new_string (scheme));
  test_ui_pump (300);
}

static void
resize (int width, int height)
{
  /* A mapped window keeps its size: the new one applies when it is shown again. */
  gtk_widget_set_visible (GTK_WIDGET (window), FALSE);
  gtk_window_set_default_size (GTK_WINDOW (window), width, height);
  gtk_window_present (GTK_WINDOW (window));
  test_ui_pump (700);
}

static void
test_screenshots (void)
{
  static const int sizes[][2] = { { 1920, 1080 }, { 1280, 720 } };
  static const char *const schemes[] = { "light", "dark" };
  const char *dir = g_getenv ("SHARDSCOPE_SCREENSHOT_DIR");
  g_autofree char *out_dir
      = g_strdup (dir && *dir ? dir : g_getenv ("G_TEST_BUILDDIR"));
  g_assert_cmpint (g_mkdir_with_parents (out_dir, 0755), ==, 0);
  double shot_zoom = 0;

  for (guint k = 0; k < G_N_ELEMENTS (sizes); k++)
    {
      double window_lum[2], canvas_lum[2];
      for (guint s = 0; s < G_N_ELEMENTS (schemes); s++)
        {
          set_scheme (schemes[s]);
          /* At 1280x720 the plans' sidebar is folded away (F9), as one works there, to give
           * the graph room. */
          g_action_group_change_action_state (G_ACTION_GROUP (window), "show-sidebar",
                                              g_variant_new_boolean (sizes[k][0] > 1600));
          resize (sizes[k][0], sizes[k][1]);
          /* The default size counts the client-side decoration's frame as well: ask again
           * for as much more as the window came out smaller. */
          int dw = sizes[k][0] - gtk_widget_get_width (GTK_WIDGET (window));
          int dh = sizes[k][1] - gtk_widget_get_height (GTK_WIDGET (window));
          if (dw != 0 || dh != 0)
            resize (sizes[k][0] + dw, sizes[k][1] + dh);
          g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-fit", NULL));
          test_ui_pump (300);
          g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-op", "s",
                                                     SELECTED_OP));
          /* Selecting an op of a folded block unfolds that instance: a new layout. */
          test_ui_pump (100);
          test_ui_wait_for (plan_ready, NULL, 60, "the layout with the selected op's block open");
          test_ui_pump (300);
          /* Out from the op to its attention block and its neighbours. */
          /* Out from the op to its attention block and its neighbours: the zoom of two steps
           * out at the first size, the same one at the other (the same graph scale in both). */
          GraphviewWidget *graph = app_window_get_graph (window);
          if (shot_zoom == 0)
            {
              for (int z = 0; z < 2; z++)
                g_assert_true (
                    gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-out", NULL));
              test_ui_pump (300);
              shot_zoom = graphview_widget_get_zoom (graph);
            }
          else
            graphview_widget_zoom_at (graph, shot_zoom / graphview_widget_get_zoom (graph), 0, 0);
          test_ui_pump (300);
          /* Selecting it again centres the graph on it at this zoom. */
          g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-op", "s",
                                                     SELECTED_OP));
          test_ui_pump (700);
          GtkWidget *widget = GTK_WIDGET (window);
          g_assert_cmpint (gtk_widget_get_width (widget), ==, sizes[k][0]);
          g_assert_cmpint (gtk_widget_get_height (widget), ==, sizes[k][1]);

          g_autoptr (GdkTexture) shot = photograph (widget);
          g_autoptr (GdkTexture) canvas = photograph (GTK_WIDGET (app_window_get_graph (window)));
          window_lum[s] = mean_luminance (shot);
          canvas_lum[s] = mean_luminance (canvas);

          g_autofree char *name = g_strdup_printf ("app-%dx%d-%s.png", sizes[k][0], sizes[k][1],
                                                   schemes[s]);
          g_autofree char *path = g_build_filename (out_dir, name, NULL);
          g_assert_true (gdk_texture_save_to_png (shot, path));
          g_autoptr (GError) error = NULL;
          g_autoptr (GdkTexture) back = gdk_texture_new_from_filename (path, &error);
          g_assert_no_error (error);
          g_assert_cmpint (gdk_texture_get_width (back), ==, sizes[k][0]);
          g_assert_cmpint (gdk_texture_get_height (back), ==, sizes[k][1]);
          g_test_message ("wrote %s: mean luminance %.0f (window), %.0f (canvas)", path,
                          window_lum[s], canvas_lum[s]);
        }
      /* Light pictures are mostly light, dark ones mostly dark: the window and the canvas. */
      g_assert_cmpfloat (window_lum[0], >, 160);
      g_assert_cmpfloat (window_lum[1], <, 110);
      g_assert_cmpfloat (canvas_lum[0], >, 160);
      g_assert_cmpfloat (canvas_lum[1], <, 110);
    }
  set_scheme ("default");
  g_action_group_change_action_state (G_ACTION_GROUP (window), "show-sidebar",
                                      g_variant_new_boolean (TRUE));
}

int
main (int argc, char **argv)
{
  g_autofree char *tmpdir = g_dir_make_tmp ("shardscope-ui-shots-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  /* No session bus under Xvfb: the portal's settings are missing too, and that is not a
   * failure of the app. */
  static const char *const harmless[] = { "portal", NULL };
  g_test_log_set_fatal_handler (test_ui_log_fatal, (gpointer) harmless);
  app_application_init_environment ();

  app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  window = APP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_true (APP_IS_WINDOW (window));
  app_window_load_model (window, "llama", "dp=2,mp=4", "h100-sxm", "megatron");
  test_ui_wait_for (plan_ready, NULL, 120, "llama's plan");

  g_test_add_func ("/ui/screenshots", test_screenshots);
  int status = g_test_run ();
  gtk_window_destroy (GTK_WINDOW (window));
  g_object_unref (app);
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
