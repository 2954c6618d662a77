/* test-ui-dark.c: dark mode and language in the graph canvas, under Xvfb (suite ui).
 *
 * Everything is judged on real pixels: the renderer's PNG, and the widgets snapshotted and
 * rendered by the window's GSK renderer. The process runs as a user without a session bus
 * (DBUS_SESSION_BUS_ADDRESS points nowhere, no GSETTINGS_BACKEND) in Chinese (LANGUAGE=zh_CN
 * in a UTF-8 locale), with the catalogue found by the app's own lookup (the build tree's).
 */
#include "config.h"

#include <glib/gi18n-lib.h>
#include <glib/gstdio.h>
#include <locale.h>
#include <math.h>
#include <string.h>

#include "app-application.h"
#include "app-minimap.h"
#include "app-window.h"
#include "graphview-layouter.h"
#include "graphview-palette.h"
#include "graphview-renderer.h"
#include "graphview-widget.h"
#include "test-util.h"
#include "test-ui-util.h"

static char *tmpdir;

/* Pixels ----------------------------------------------------------------------------------- */

typedef struct
{
  int width, height, stride;
  guchar *data; /* cairo's ARGB32 (premultiplied, native-endian), as GDK downloads */
} Pixels;

static void
pixels_clear (Pixels *p)
{
  g_clear_pointer (&p->data, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Pixels, pixels_clear)

static void
pixel_rgb (const Pixels *p, int x, int y, double rgb[3])
{
  guint32 v = *(const guint32 *)(p->data + y * p->stride + 4 * x);
  double a = ((v >> 24) & 0xff) / 255.0;
  rgb[0] = a > 0 ? ((v >> 16) & 0xff) / 255.0 / a : 0;
  rgb[1] = a > 0 ? ((v >> 8) & 0xff) / 255.0 / a : 0;
  rgb[2] = a > 0 ? (v & 0xff) / 255.0 / a : 0;
}

static double
pixel_luma (const Pixels *p, int x, int y)
{
  double c[3];
  pixel_rgb (p, x, y, c);
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
}

/* The most frequent colour of @p: the background of a canvas, whatever nodes cover. */
static guint32
pixels_mode (const Pixels *p)
{
  g_autoptr (GHashTable) counts = g_hash_table_new (g_direct_hash, g_direct_equal);
  guint32 best = 0;
  guint best_n = 0;
  for (int y = 0; y < p->height; y++)
    for (int x = 0; x < p->width; x++)
      {
        guint32 v = *(const guint32 *)(p->data + y * p->stride + 4 * x) | 1;
        guint n = GPOINTER_TO_UINT (g_hash_table_lookup (counts, GUINT_TO_POINTER (v))) + 1;
        g_hash_table_insert (counts, GUINT_TO_POINTER (v), GUINT_TO_POINTER (n));
        if (n > best_n)
          best_n = n, best = v & ~1u;
      }
  return best;
}

static gboolean
colour_near (guint32 v, GraphviewRgb want)
{
  return fabs (((v >> 16) & 0xff) / 255.0 - want.r) <= 2.5 / 255
         && fabs (((v >> 8) & 0xff) / 255.0 - want.g) <= 2.5 / 255
         && fabs ((v & 0xff) / 255.0 - want.b) <= 2.5 / 255;
}

static void
assert_colour (guint32 v, GraphviewRgb want)
{
  double got[3] = { ((v >> 16) & 0xff) / 255.0, ((v >> 8) & 0xff) / 255.0, (v & 0xff) / 255.0 };
  g_test_message ("canvas colour %.3f %.3f %.3f, palette %.3f %.3f %.3f", got[0], got[1], got[2],
                  want.r, want.g, want.b);
  g_assert_cmpfloat_with_epsilon (got[0], want.r, 2.5 / 255);
  g_assert_cmpfloat_with_epsilon (got[1], want.g, 2.5 / 255);
  g_assert_cmpfloat_with_epsilon (got[2], want.b, 2.5 / 255);
}

/* Pixels of colour @want (within 2/255 a channel). */
static guint
count_colour (const Pixels *p, GraphviewRgb want)
{
  guint n = 0;
  for (int y = 0; y < p->height; y++)
    for (int x = 0; x < p->width; x++)
      {
        double c[3];
        pixel_rgb (p, x, y, c);
        n += fabs (c[0] - want.r) <= 2.0 / 255 && fabs (c[1] - want.g) <= 2.0 / 255
             && fabs (c[2] - want.b) <= 2.0 / 255;
      }
  return n;
}

static void
pixels_from_surface (Pixels *p, cairo_surface_t *surface)
{
  cairo_surface_flush (surface);
  p->width = cairo_image_surface_get_width (surface);
  p->height = cairo_image_surface_get_height (surface);
  p->stride = cairo_image_surface_get_stride (surface);
  p->data = g_memdup2 (cairo_image_surface_get_data (surface), (gsize)p->stride * p->height);
}

/* @widget as its window draws it: snapshotted and rendered by the window's GSK renderer. */
static void
pixels_from_widget (Pixels *p, GtkWidget *widget)
{
  int width = gtk_widget_get_width (widget), height = gtk_widget_get_height (widget);
  g_assert_cmpint (width, >, 20);
  g_assert_cmpint (height, >, 20);
  g_autoptr (GdkPaintable) paintable = gtk_widget_paintable_new (widget);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  g_autoptr (GskRenderNode) node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (widget));
  g_autoptr (GdkTexture) texture
      = gsk_renderer_render_texture (renderer, node, &GRAPHENE_RECT_INIT (0, 0, width, height));
  p->width = gdk_texture_get_width (texture);
  p->height = gdk_texture_get_height (texture);
  p->stride = 4 * p->width;
  p->data = g_malloc ((gsize)p->stride * p->height);
  gdk_texture_download (texture, p->data, p->stride);
}

/* Main loop -------------------------------------------------------------------------------- */

static gboolean
timed_out (gpointer data)
{
  *(gboolean *)data = TRUE;
  return G_SOURCE_REMOVE;
}


static void
pump (guint ms)
{
  gboolean done = FALSE;
  g_timeout_add (ms, timed_out, &done);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
}

static gboolean
widget_ready (gpointer data)
{
  return graphview_widget_is_ready (data) && gtk_widget_get_mapped (data)
         && gtk_widget_get_width (data) > 100;
}

/* The style reaches a widget when GTK restyles it, on a later frame (slow on a loaded machine). */
static gboolean want_dark;

static gboolean
style_reached (gpointer data)
{
  return graphview_widget_get_dark (data) == want_dark;
}

static void
wait_for_style (GraphviewWidget *view, gboolean dark)
{
  want_dark = dark;
  test_ui_wait_for (style_reached, view, 20, dark ? "the dark palette" : "the light palette");
}

/* The palettes ----------------------------------------------------------------------------- */

/* Text keeps WCAG's 4.5:1 over the canvas and every fill it is drawn on, in both palettes;
 * marks keep 3:1 against the fills they sit on. */
static void
test_contrast (void)
{
  for (int d = 0; d < 2; d++)
    {
      const GraphviewPalette *pal = graphview_palette_get (d);
      g_assert_cmpint (pal->dark, ==, d);
      const GraphviewRgb *under[]
          = { &pal->background, &pal->block_fill, &pal->frame_fill, &pal->badge_fill, &pal->card };
      for (guint i = 0; i < G_N_ELEMENTS (under); i++)
        g_assert_cmpfloat (graphview_palette_contrast (pal->text, *under[i]), >=,
                           GRAPHVIEW_PALETTE_MIN_CONTRAST);
      for (guint c = 0; c < GRAPHVIEW_PALETTE_N_CATEGORIES; c++)
        {
          g_assert_cmpfloat (graphview_palette_contrast (pal->text, pal->category_fill[c]), >=,
                             GRAPHVIEW_PALETTE_MIN_CONTRAST);
          g_assert_cmpfloat (graphview_palette_contrast (pal->text_muted, pal->category_fill[c]),
                             >=, GRAPHVIEW_PALETTE_MIN_CONTRAST);
          g_assert_cmpfloat (graphview_palette_contrast (pal->pinned, pal->category_fill[c]), >=,
                             3.0);
        }
      g_assert_cmpfloat (graphview_palette_contrast (pal->border, pal->background), >=, 3.0);
      g_assert_cmpfloat (graphview_palette_contrast (pal->on_mark, pal->differs), >=, 3.0);
    }
  /* The dark background is dark, the light one light (relative luminance against black). */
  GraphviewRgb black = { 0, 0, 0 };
  g_assert_cmpfloat (graphview_palette_contrast (graphview_palette_get (TRUE)->background, black),
                     <, 2.0);
  g_assert_cmpfloat (graphview_palette_contrast (graphview_palette_get (FALSE)->background, black),
                     >, 18.0);
}

/* The renderer's file: the page and the nodes follow the palette ---------------------------- */

static cairo_status_t
read_bytes (void *closure, unsigned char *data, unsigned int length)
{
  GInputStream *in = closure;
  gsize n = 0;
  return g_input_stream_read_all (in, data, length, &n, NULL, NULL) && n == length
             ? CAIRO_STATUS_SUCCESS
             : CAIRO_STATUS_READ_ERROR;
}

/* Also writes the PNG into the build folder as @name, to look at. */
static void
render_png (GraphviewRenderer *renderer, double scale, const char *name, Pixels *p)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) png
      = graphview_renderer_render_file (renderer, GRAPHVIEW_FORMAT_PNG, scale, &error);
  g_assert_no_error (error);
  g_autofree char *path = g_build_filename (g_getenv ("G_TEST_BUILDDIR"), name, NULL);
  g_assert_true (
      g_file_set_contents (path, g_bytes_get_data (png, NULL), g_bytes_get_size (png), NULL));
  g_autoptr (GInputStream) in = g_memory_input_stream_new_from_bytes (png);
  cairo_surface_t *surface = cairo_image_surface_create_from_png_stream (read_bytes, in);
  g_assert_cmpint (cairo_surface_status (surface), ==, CAIRO_STATUS_SUCCESS);
  pixels_from_surface (p, surface);
  cairo_surface_destroy (surface);
}

static void
test_renderer_palette (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("gpt2", NULL);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=2,mp=4", NULL, "megatron", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
  graphview_renderer_set_plan (renderer, plan);
  g_autoptr (GError) error = NULL;
  g_autoptr (GraphviewLayout) layout = graphview_layouter_layout (layouter, model, NULL, &error);
  g_assert_no_error (error);
  graphview_renderer_set_layout (renderer, layout);

  /* The first op node (an Embedding: category 5) at its centre-left, away from its text. */
  const GraphviewRect *r = graphview_layout_get_item_rect (layout, 0);
  for (int d = 0; d < 2; d++)
    {
      graphview_renderer_set_dark (renderer, d);
      const GraphviewPalette *pal = graphview_renderer_get_palette (renderer);
      g_auto (Pixels) p = { 0 };
      render_png (renderer, 1.0, d ? "ui-dark-gpt2-dark.png" : "ui-dark-gpt2-light.png", &p);
      assert_colour (pixels_mode (&p), pal->background);
      GraphviewViewport vp;
      graphview_renderer_get_file_viewport (renderer, GRAPHVIEW_FORMAT_PNG, 1.0, &vp);
      int x = (int)((r->x + 3 - vp.x) * vp.scale),
          y = (int)((r->y + r->height - 3 - vp.y) * vp.scale);
      double rgb[3];
      pixel_rgb (&p, x, y, rgb);
      g_assert_cmpfloat_with_epsilon (rgb[0], pal->category_fill[5].r, 3.0 / 255);
      g_assert_cmpfloat_with_epsilon (rgb[2], pal->category_fill[5].b, 3.0 / 255);
      /* Light text on dark fills, dark on light: the extreme luma inside the node's text. */
      double extreme = d ? 0 : 1;
      for (int yy = (int)((r->y - vp.y) * vp.scale); yy < y; yy++)
        for (int xx = x; xx < (int)((r->x + r->width / 2 - vp.x) * vp.scale); xx++)
          extreme
              = d ? MAX (extreme, pixel_luma (&p, xx, yy)) : MIN (extreme, pixel_luma (&p, xx, yy));
      g_test_message ("%s: text luma %.2f", d ? "dark" : "light", extreme);
      if (d)
        g_assert_cmpfloat (extreme, >, 0.75);
      else
        g_assert_cmpfloat (extreme, <, 0.25);
    }
}

/* Chinese in the canvas --------------------------------------------------------------------- */

/* Two ops whose names are Chinese, of the same length and different characters. */
static PlannerGraph *
chinese_graph (void)
{
  g_autoptr (GError) error = NULL;
  PlannerGraph *graph = planner_graph_new ();
  gint64 shape[] = { 8, 64 };
  int x = planner_graph_add_input (graph, "x", PLANNER_DTYPE_F32, 2, shape, &error);
  g_assert_no_error (error);
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  const char *names[] = { "注意力层", "前馈网络" };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      guint input = (guint)x;
      int op = planner_graph_add_op (graph, names[i], PLANNER_OP_RELU, &attrs, &input, 1, 1, NULL,
                                     &error);
      g_assert_no_error (error);
      x = (int)planner_graph_op_output (graph, op, 0);
    }
  planner_graph_mark_output (graph, (guint)x);
  return graph;
}

/* Ink (pixels darker than the fill) in the name line of item @item's node, as a bitmap. */
static GByteArray *
label_ink (const Pixels *p, GraphviewLayout *layout, guint item, const GraphviewViewport *vp,
           guint *n_ink)
{
  const GraphviewRect *r = graphview_layout_get_item_rect (layout, item);
  /* The name is the second line: from the pad plus one line down, one line tall. */
  int x0 = (int)((r->x + 4 - vp->x) * vp->scale),
      x1 = (int)((r->x + r->width - 4 - vp->x) * vp->scale);
  int y0 = (int)((r->y + 18 - vp->y) * vp->scale), y1 = (int)((r->y + 33 - vp->y) * vp->scale);
  GByteArray *bits = g_byte_array_new ();
  *n_ink = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++)
      {
        guint8 ink = pixel_luma (p, x, y) < 0.5;
        *n_ink += ink;
        g_byte_array_append (bits, &ink, 1);
      }
  return bits;
}

static gboolean
have_cjk_font (void)
{
  PangoFontMap *map = pango_cairo_font_map_get_default ();
  PangoContext *context = pango_font_map_create_context (map);
  PangoLayout *layout = pango_layout_new (context);
  pango_layout_set_text (layout, "注意力", -1);
  gboolean found = pango_layout_get_unknown_glyphs_count (layout) == 0;
  g_object_unref (layout);
  g_object_unref (context);
  return found;
}

static void
test_chinese_text (void)
{
  if (!have_cjk_font ())
    g_error ("no installed font has Chinese glyphs: install fonts-wqy-zenhei or fonts-noto-cjk "
             "(tools/common.sh lists it)");
  /* The catalogue the app's lookup found is the build tree's, and it is in force. */
  g_assert_cmpstr (app_application_get_locale_dir (), ==, g_getenv ("G_TEST_BUILDDIR_PO"));
  g_assert_cmpstr (_ ("pinned"), ==, "已固定");
  g_assert_cmpstr (_ ("splits per dim"), ==, "每维切分数");

  g_autoptr (PlannerGraph) graph = chinese_graph ();
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=2", NULL, NULL, NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
  graphview_renderer_set_plan (renderer, plan);
  g_autoptr (GError) error = NULL;
  g_autoptr (GraphviewLayout) layout = graphview_layouter_layout (layouter, model, NULL, &error);
  g_assert_no_error (error);
  graphview_renderer_set_layout (renderer, layout);
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, 2);

  /* The file: the legend (translated) and both nodes' Chinese names. */
  graphview_renderer_take_missing_glyphs (renderer);
  g_auto (Pixels) p = { 0 };
  render_png (renderer, 2.0, "ui-dark-chinese.png", &p);
  g_assert_cmpuint (graphview_renderer_take_missing_glyphs (renderer), ==, 0);
  GraphviewViewport vp;
  graphview_renderer_get_file_viewport (renderer, GRAPHVIEW_FORMAT_PNG, 2.0, &vp);
  guint ink_a, ink_b;
  g_autoptr (GByteArray) a = label_ink (&p, layout, 0, &vp, &ink_a);
  g_autoptr (GByteArray) b = label_ink (&p, layout, 1, &vp, &ink_b);
  g_assert_cmpuint (a->len, ==, b->len);
  guint differ = 0;
  for (guint i = 0; i < a->len; i++)
    differ += a->data[i] != b->data[i];
  g_test_message ("label ink %u and %u pixels, %u differ", ink_a, ink_b, differ);
  /* Four glyphs of strokes each: real ink. A missing-glyph box is the same box for every
   * character, so two names of four boxes would draw the same pixels. */
  g_assert_cmpuint (ink_a, >, 150);
  g_assert_cmpuint (ink_b, >, 150);
  g_assert_cmpuint (differ, >, MIN (ink_a, ink_b) / 3);

  /* The legend in Chinese is drawn with glyphs, and is narrower than the English would be
   * per character: measure it alone. */
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, 900, 60);
  cairo_t *cr = cairo_create (surface);
  double w = 0, h = 0;
  graphview_renderer_draw_legend (renderer, cr, 0, 0, &w, &h);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  g_assert_cmpuint (graphview_renderer_take_missing_glyphs (renderer), ==, 0);
  g_assert_cmpfloat (w, >, 100);
}

/* The widget follows the style ---------------------------------------------------------------- */

static void
set_dark (gboolean dark)
{
  adw_style_manager_set_color_scheme (adw_style_manager_get_default (),
                                      dark ? ADW_COLOR_SCHEME_FORCE_DARK
                                           : ADW_COLOR_SCHEME_FORCE_LIGHT);
  pump (200);
}

static void
test_widget_style (void)
{
  adw_init ();
  g_autoptr (PlannerGraph) graph = test_util_model ("gpt2", NULL);
  g_autoptr (PlannerPlan) plan = test_util_plan (graph, "dp=2,mp=4", NULL, "megatron", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  GtkWidget *window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 500, 400);
  GtkWidget *view = graphview_widget_new ();
  gtk_window_set_child (GTK_WINDOW (window), view);
  graphview_widget_set_model (GRAPHVIEW_WIDGET (view), model);
  graphview_widget_set_plan (GRAPHVIEW_WIDGET (view), plan);
  gtk_window_present (GTK_WINDOW (window));
  test_ui_wait_for (widget_ready, view, 60, "the widget's layout");

  for (int round = 0; round < 3; round++)
    {
      gboolean dark = round != 1;
      set_dark (dark);
      wait_for_style (GRAPHVIEW_WIDGET (view), dark);
      g_auto (Pixels) p = { 0 };
      pixels_from_widget (&p, view);
      assert_colour (pixels_mode (&p), graphview_palette_get (dark)->background);
    }
  set_dark (FALSE);
  gtk_window_destroy (GTK_WINDOW (window));
}

/* The app's switch without a session bus ------------------------------------------------------ */

static gboolean
plan_ready (gpointer data)
{
  AppWindow *window = data;
  AppDocument *doc = app_window_get_document (window);
  return doc && app_document_get_plan (doc) && !app_document_get_busy (doc)
         && widget_ready (app_window_get_graph (window));
}

static GtkWidget *
find_minimap (GtkWidget *root)
{
  if (APP_IS_MINIMAP (root))
    return root;
  for (GtkWidget *c = gtk_widget_get_first_child (root); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *m = find_minimap (c);
      if (m)
        return m;
    }
  return NULL;
}

static void
test_app_without_bus (void)
{
  g_autoptr (AppApplication) app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_assert_null (g_application_get_dbus_connection (G_APPLICATION (app)));
  g_application_activate (G_APPLICATION (app));
  AppWindow *window = APP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  gtk_window_set_default_size (GTK_WINDOW (window), 1200, 800);
  test_ui_wait_for (plan_ready, window, 120, "the example's plan and layout");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.select-op", "s",
                                             "transformer.h.0.attn.c_attn"));

  /* Not silent: the limit is said, in the window. */
  const char *notice = app_application_get_style_notice (app);
  g_assert_nonnull (notice);
  g_test_message ("notice: %s", notice);
  g_assert_nonnull (strstr (notice, tmpdir));
  g_assert_cmpuint (app_window_get_n_toasts (window), >=, 1);

  GraphviewWidget *graph = app_window_get_graph (window);
  GtkWidget *minimap = find_minimap (GTK_WIDGET (window));
  g_assert_nonnull (minimap);
  g_autofree char *keyfile = g_build_filename (tmpdir, "shardscope", "settings.ini", NULL);
  for (int round = 0; round < 3; round++)
    {
      gboolean dark = round != 1;
      g_action_group_activate_action (G_ACTION_GROUP (app), "color-scheme",
                                      g_variant_new_string (dark ? "dark" : "light"));
      pump (300);
      /* The choice holds (dconf without a bus would have put the old one back by now). */
      g_autoptr (GVariant) state
          = g_action_group_get_action_state (G_ACTION_GROUP (app), "color-scheme");
      g_assert_cmpstr (g_variant_get_string (state, NULL), ==, dark ? "dark" : "light");
      g_assert_cmpint (adw_style_manager_get_dark (adw_style_manager_get_default ()), ==, dark);
      wait_for_style (graph, dark);
      g_assert_cmpint (graphview_widget_get_dark (graph), ==, dark);
      /* The canvas, or an unfolded block's frame where the view is inside one. */
      g_auto (Pixels) p = { 0 };
      pixels_from_widget (&p, GTK_WIDGET (graph));
      const GraphviewPalette *pal = graphview_palette_get (dark);
      guint32 canvas = pixels_mode (&p);
      assert_colour (canvas,
                     colour_near (canvas, pal->frame_fill) ? pal->frame_fill : pal->background);
      /* The minimap: the canvas, or mostly under its view rectangle when the view shows most
       * of the graph (15 % of its colour over the canvas). */
      g_auto (Pixels) m = { 0 };
      /* It steps aside while nodes lie under it (app-minimap.c); Fit always brings it back. */
      if (app_minimap_get_aside (APP_MINIMAP (minimap)))
        {
          g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-fit", NULL));
          pump (400);
        }
      g_assert_false (app_minimap_get_aside (APP_MINIMAP (minimap)));
      pixels_from_widget (&m, minimap);
      GraphviewRgb under = { pal->background.r * 0.85 + pal->view_rect.r * 0.15,
                             pal->background.g * 0.85 + pal->view_rect.g * 0.15,
                             pal->background.b * 0.85 + pal->view_rect.b * 0.15 };
      guint32 mode = pixels_mode (&m);
      assert_colour (mode, colour_near (mode, pal->background) ? pal->background : under);
      /* The cost chart: the selected layer's bar is opaque, in the palette's compute colour,
       * and no pixel has the other palette's. */
      g_auto (Pixels) c = { 0 };
      pixels_from_widget (&c, app_window_get_part (window, "cost_chart"));
      guint ours = count_colour (&c, pal->chart_compute);
      guint theirs = count_colour (&c, graphview_palette_get (!dark)->chart_compute);
      g_test_message ("cost chart: %u pixels of this palette's compute colour, %u of the other's",
                      ours, theirs);
      g_assert_cmpuint (ours, >, 20);
      g_assert_cmpuint (theirs, ==, 0);
      /* And it is remembered. */
      g_autofree char *saved = NULL;
      g_assert_true (g_file_get_contents (keyfile, &saved, NULL, NULL));
      g_assert_nonnull (strstr (saved, dark ? "'dark'" : "'light'"));
    }
  /* Following the system: where libadwaita finds no source for it (no portal, and no
   * desktop schema to read), asking for it says so; the style is light either way here. */
  guint before = app_window_get_n_toasts (window);
  g_action_group_activate_action (G_ACTION_GROUP (app), "color-scheme",
                                  g_variant_new_string ("default"));
  pump (300);
  gboolean follows
      = adw_style_manager_get_system_supports_color_schemes (adw_style_manager_get_default ());
  g_test_message ("libadwaita can follow a system setting: %d", follows);
  g_assert_cmpint (app_window_get_n_toasts (window) > before, ==, !follows);
  g_assert_false (adw_style_manager_get_dark (adw_style_manager_get_default ()));

  app_window_dismiss_toasts (window);
  gtk_window_destroy (GTK_WINDOW (window));
  pump (100);
}


/* GTK and libadwaita say on their own when there is no bus; nothing else may warn (dconf's
 * lost write would, and its message names dbus-launch: test_ui_log_fatal() would let it
 * pass). */
static gboolean
log_fatal (const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  if (strstr (message, "session bus") || strstr (message, "Failed to connect to the bus"))
    return FALSE;
  return TRUE;
}

int
main (int argc, char *argv[])
{
  tmpdir = g_dir_make_tmp ("shardscope-dark-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  /* A desktop without a session bus, in Chinese. */
  g_setenv ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/shardscope-test-bus", TRUE);
  g_unsetenv ("GSETTINGS_BACKEND");
  g_unsetenv ("SHARDSCOPE_LOCALEDIR");
  g_setenv ("XDG_CONFIG_HOME", tmpdir, TRUE);
  g_setenv ("LC_ALL", "C.UTF-8", TRUE);
  g_setenv ("LANGUAGE", "zh_CN", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_autofree char *po = g_build_filename (g_getenv ("G_TEST_BUILDDIR"), "..", "po", NULL);
  g_autofree char *po_canonical = g_canonicalize_filename (po, NULL);
  g_setenv ("G_TEST_BUILDDIR_PO", po_canonical, TRUE);
  gtk_test_init (&argc, &argv, NULL);
  /* gtk_test_init() leaves the C locale, where gettext ignores LANGUAGE. */
  setlocale (LC_ALL, "");
  g_test_log_set_fatal_handler (log_fatal, NULL);
  app_application_init_environment ();
  app_application_bind_text_domain ();

  g_test_add_func ("/ui/dark/contrast", test_contrast);
  g_test_add_func ("/ui/dark/renderer-palette", test_renderer_palette);
  g_test_add_func ("/ui/dark/chinese-text", test_chinese_text);
  g_test_add_func ("/ui/dark/app-without-bus", test_app_without_bus);
  g_test_add_func ("/ui/dark/widget-style", test_widget_style);
  int status = g_test_run ();
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
