/* test-ui-conventions.c: the window's conventions (issue 15, item 9), under Xvfb (suite ui).
 *
 * gpt2-tiny (2 layers) on dp=2,mp=2 with the megatron policy and the cpu-local profile, every
 * block unfolded:
 * - the op-type legend lists the 11 op types of the graph with their op counts (the table
 *   below, counted from the model's op list by hand), each swatch drawn in the colour that
 *   fills that type's nodes in the graph (read back from pixels), and Fit leaves it free;
 * - PNG export at 2x is twice the 1x picture a side, has the title in its top band, ran on
 *   a worker thread while the main loop went on, drew the state of the moment it was asked
 *   for, and a failed export says why in a toast;
 * - searching "mlp" rings all 10 matching ops at once (per layer mlp.c_fc, mlp.act,
 *   mlp.c_proj, mlp.dropout and add_mlp), "1 of 10", next/previous walk them;
 * - the hardware dialog shows cpu-local's figures; halving the intra-node bandwidth (5 to
 *   2.5 GB/s) and saving writes a profile shardscope-cli reads, whose plan's five mp
 *   AllReduces of 131,072 bytes then cost 5 x (2 x 1 x 2 us + 2 x 1/2 x 131072 B /
 *   2.5 GB/s) = 282.144 us instead of 5 x (4 + 26.2144) = 151.072 us, in the CLI and in the
 *   window's re-costed plan.
 */
#include "config.h"

#include <glib/gstdio.h>
#include <math.h>

#include "app-application.h"
#include "app-export.h"
#include "app-hardware-dialog.h"
#include "app-type-legend.h"
#include "app-window.h"
#include "graphview-renderer.h"
#include "planner-plan.h"

#include "test-util.h"
#include "test-ui-util.h"

static AppApplication *app;
static AppWindow *window;
static char *tmpdir;





static AppDocument *
doc (void)
{
  return app_window_get_document (window);
}

static GraphviewWidget *
graph (void)
{
  return app_window_get_graph (window);
}

static GraphviewRenderer *
renderer (void)
{
  return graphview_widget_get_renderer (graph ());
}

static gboolean
plan_ready (gpointer data)
{
  AppDocument *d = doc ();
  return d && app_document_get_plan (d) && !app_document_get_busy (d)
         && app_document_get_plan (d) != data && graphview_widget_is_ready (graph ());
}

static void
test_start (void)
{
  app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  window = APP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_true (APP_IS_WINDOW (window));
  gtk_window_set_default_size (GTK_WINDOW (window), 1600, 1000);
  app_window_load_model (window, "gpt2-tiny", "dp=2,mp=2", "cpu-local", "megatron");
  test_ui_wait_for (plan_ready, NULL, 120, "gpt2-tiny's plan");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.expand-all", NULL));
  test_ui_wait_for (plan_ready, NULL, 60, "the unfolded layout");
  GraphviewModel *model = graphview_widget_get_model (graph ());
  /* 48 ops, every one its own node. */
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, 48);
}

/* ---- op-type legend ----------------------------------------------------------------- */

/* gpt2-tiny's op types and how many ops each has, counted from `shardscope-cli graph
 * gpt2-tiny --ops` by hand: per layer ln_1, ln_2 (LayerNorm), c_attn (Einsum), split_qkv,
 * q/k/v views and merge_view (Reshape 4), q/k/v heads and merge_heads (Transpose 4), sdpa,
 * attn c_proj, mlp c_fc and c_proj (MatMul 3), act (GeLU), resid_dropout and mlp dropout,
 * add_attn and add_mlp; and wte, wpe, embed_add, drop, ln_f and the lm_head. */
static const struct
{
  const char *type;
  guint n;
} gpt2_tiny_types[] = {
  { "MatMul", 7 },
  { "Einsum", 2 },
  { "Add", 5 },
  { "GeLU", 2 },
  { "Dropout", 5 },
  { "LayerNorm", 5 },
  { "Embedding", 2 },
  { "Reshape", 8 },
  { "Transpose", 8 },
  { "Split", 2 },
  { "ScaledDotProductAttention", 2 },
};

/* 0..255 per channel of an RGB24/ARGB32 pixel. */
static void
pixel_rgb (const guint8 *data, int stride, int x, int y, int rgb[3])
{
  guint32 p = *(const guint32 *)(data + (gsize)y * stride + 4 * x);
  rgb[0] = (p >> 16) & 0xff;
  rgb[1] = (p >> 8) & 0xff;
  rgb[2] = p & 0xff;
}

static gboolean
rgb_close (const int a[3], const double b[3])
{
  for (int c = 0; c < 3; c++)
    if (abs (a[c] - (int)lround (b[c] * 255)) > 1)
      return FALSE;
  return TRUE;
}

/* The most frequent colour inside the middle of item @item's node when the graph is drawn
 * as files are: the node's fill (text, matrix and border are smaller than it). */
static void
node_fill (cairo_surface_t *surface, const GraphviewViewport *vp, guint item, int mode[3])
{
  const GraphviewRect *r
      = graphview_layout_get_item_rect (graphview_renderer_get_layout (renderer ()), item);
  const guint8 *data = cairo_image_surface_get_data (surface);
  int stride = cairo_image_surface_get_stride (surface);
  g_autoptr (GHashTable) counts = g_hash_table_new (NULL, NULL);
  guint best = 0;
  int x0 = (int)((r->x - vp->x) * vp->scale), y0 = (int)((r->y - vp->y) * vp->scale);
  int w = (int)(r->width * vp->scale), h = (int)(r->height * vp->scale);
  for (int y = y0 + h / 6; y < y0 + h - h / 6; y++)
    for (int x = x0 + w / 6; x < x0 + w - w / 6; x++)
      {
        int rgb[3];
        pixel_rgb (data, stride, x, y, rgb);
        gpointer key = GINT_TO_POINTER ((rgb[0] << 16) | (rgb[1] << 8) | rgb[2]);
        guint n = GPOINTER_TO_UINT (g_hash_table_lookup (counts, key)) + 1;
        g_hash_table_insert (counts, key, GUINT_TO_POINTER (n));
        if (n > best)
          {
            best = n;
            memcpy (mode, rgb, sizeof rgb);
          }
      }
  g_assert_cmpuint (best, >, 0);
}

/* The legend widget as drawn on screen, as a downloaded texture. */
static guint8 *
photograph (GtkWidget *widget, int *width, int *height, gsize *stride)
{
  *width = gtk_widget_get_width (widget);
  *height = gtk_widget_get_height (widget);
  g_assert_cmpint (*width, >, 0);
  g_autoptr (GdkPaintable) paintable = gtk_widget_paintable_new (widget);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, *width, *height);
  g_autoptr (GskRenderNode) node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  GskRenderer *r = gtk_native_get_renderer (gtk_widget_get_native (widget));
  g_autoptr (GdkTexture) texture
      = gsk_renderer_render_texture (r, node, &GRAPHENE_RECT_INIT (0, 0, *width, *height));
  *width = gdk_texture_get_width (texture);
  *height = gdk_texture_get_height (texture);
  *stride = 4 * (gsize)*width;
  guint8 *data = g_malloc (*stride * *height);
  gdk_texture_download (texture, data, *stride);
  return data;
}

/* A photograph into the build folder, to look at (nothing is compared). */
static void
keep_photograph (GtkWidget *widget, const char *name)
{
  int width, height;
  gsize stride;
  g_autofree guint8 *data = photograph (widget, &width, &height, &stride);
  cairo_surface_t *surface = cairo_image_surface_create_for_data (data, CAIRO_FORMAT_ARGB32, width,
                                                                  height, (int)stride);
  g_autofree char *path = g_build_filename (g_getenv ("G_TEST_BUILDDIR"), name, NULL);
  g_assert_cmpint (cairo_surface_write_to_png (surface, path), ==, CAIRO_STATUS_SUCCESS);
  cairo_surface_destroy (surface);
  g_test_message ("wrote %s (%dx%d)", path, width, height);
}

static gboolean
rects_overlap (const graphene_rect_t *a, const graphene_rect_t *b)
{
  return a->origin.x < b->origin.x + b->size.width && b->origin.x < a->origin.x + a->size.width
         && a->origin.y < b->origin.y + b->size.height
         && b->origin.y < a->origin.y + a->size.height;
}

static guint
n_covered (const graphene_rect_t *cover)
{
  GraphviewLayout *layout = graphview_renderer_get_layout (renderer ());
  double zoom = graphview_widget_get_zoom (graph ()), ox, oy;
  graphview_widget_get_origin (graph (), &ox, &oy);
  guint n = 0;
  for (guint i = 0; i < graphview_layout_get_n_items (layout); i++)
    {
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      graphene_rect_t box = GRAPHENE_RECT_INIT ((r->x - ox) * zoom, (r->y - oy) * zoom,
                                                r->width * zoom, r->height * zoom);
      n += rects_overlap (&box, cover);
    }
  return n;
}

static void
test_type_legend (void)
{
  AppTypeLegend *legend = APP_TYPE_LEGEND (app_window_get_part (window, "type_legend"));
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (legend)));
  g_assert_cmpuint (app_type_legend_get_n_types (legend), ==, G_N_ELEMENTS (gpt2_tiny_types));
  g_autofree gboolean *seen = g_new0 (gboolean, G_N_ELEMENTS (gpt2_tiny_types));
  for (guint row = 0; row < app_type_legend_get_n_types (legend); row++)
    {
      guint n = 0;
      const char *name = planner_op_type_to_string (app_type_legend_get_op_type (legend, row, &n));
      guint k = 0;
      while (k < G_N_ELEMENTS (gpt2_tiny_types) && g_strcmp0 (gpt2_tiny_types[k].type, name))
        k++;
      if (k == G_N_ELEMENTS (gpt2_tiny_types))
        g_error ("the legend lists %s, which gpt2-tiny does not have", name);
      g_assert_false (seen[k]);
      seen[k] = TRUE;
      g_assert_cmpuint (n, ==, gpt2_tiny_types[k].n);
    }

  /* The graph drawn as the files are, at a zoom with text: each type's node is filled with
   * the legend's colour for it. */
  GraphviewViewport vp;
  graphview_renderer_get_file_viewport (renderer (), GRAPHVIEW_FORMAT_PNG, 1.5, &vp);
  cairo_surface_t *surface
      = cairo_image_surface_create (CAIRO_FORMAT_RGB24, (int)vp.width, (int)vp.height);
  cairo_t *cr = cairo_create (surface);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);
  graphview_renderer_draw_static (renderer (), cr, &vp);
  cairo_destroy (cr);
  cairo_surface_flush (surface);

  GtkWidget *widget = GTK_WIDGET (legend);
  test_ui_pump (200);
  GraphviewModel *model = graphview_widget_get_model (graph ());
  PlannerGraph *g = graphview_model_get_graph (model);
  for (guint row = 0; row < app_type_legend_get_n_types (legend); row++)
    {
      PlannerOpType type = app_type_legend_get_op_type (legend, row, NULL);
      double colour[3];
      app_type_legend_get_colour (legend, row, colour);
      guint checked = 0;
      for (guint i = 0; i < graphview_model_get_n_items (model); i++)
        {
          const GraphviewItem *it = graphview_model_get_item (model, i);
          if (it->kind != GRAPHVIEW_ITEM_OP || planner_graph_get_op (g, it->first_op)->type != type)
            continue;
          int fill[3];
          node_fill (surface, &vp, i, fill);
          if (!rgb_close (fill, colour))
            g_error ("%s node %s is filled with #%02x%02x%02x, the legend says #%02x%02x%02x",
                     planner_op_type_to_string (type), planner_graph_get_op (g, it->first_op)->name,
                     fill[0], fill[1], fill[2], (int)lround (colour[0] * 255),
                     (int)lround (colour[1] * 255), (int)lround (colour[2] * 255));
          checked++;
        }
      g_assert_cmpuint (checked, >, 0);
      /* And the swatch on screen shows that colour (GDK's download is B, G, R, A): most of
       * its inside, its border left out. The swatch alone, as the legend card's shadow
       * would scale a photograph of the whole card. */
      int sw, sh;
      gsize sstride;
      g_autofree guint8 *shot
          = photograph (app_type_legend_get_swatch (legend, row), &sw, &sh, &sstride);
      guint inside = 0, same = 0;
      int last[3] = { 0 };
      for (int y = 2; y < sh - 2; y++)
        for (int x = 2; x < sw - 2; x++)
          {
            const guint8 *p = shot + (gsize)y * sstride + 4 * x;
            int on_screen[3] = { p[2], p[1], p[0] };
            inside++;
            same += rgb_close (on_screen, colour);
            memcpy (last, on_screen, sizeof last);
          }
      g_assert_cmpuint (inside, >, 40);
      if (same != inside)
        g_error ("the %s swatch shows #%02x%02x%02x (%u of %u pixels its colour)",
                 planner_op_type_to_string (type), last[0], last[1], last[2], same, inside);
    }
  cairo_surface_destroy (surface);

  /* It takes its own room: after Fit no node is under it; hidden, it gives the room back. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.zoom-fit", NULL));
  test_ui_pump (200);
  graphene_rect_t cover;
  g_assert_true (gtk_widget_compute_bounds (widget, GTK_WIDGET (graph ()), &cover));
  g_assert_cmpfloat (cover.size.height, >, 100);
  g_assert_cmpuint (n_covered (&cover), ==, 0);
  keep_photograph (GTK_WIDGET (window), "ui-conventions-window.png");
  double with_legend = graphview_widget_get_fit_zoom (graph ());
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.show-type-legend", NULL));
  g_assert_false (gtk_widget_get_visible (widget));
  g_assert_cmpfloat (graphview_widget_get_fit_zoom (graph ()), >=, with_legend);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.show-type-legend", NULL));
  g_assert_true (gtk_widget_get_visible (widget));
}

/* ---- search ------------------------------------------------------------------------- */

static const char *
search_status (void)
{
  return gtk_label_get_text (GTK_LABEL (app_window_get_part (window, "search_status")));
}

static gboolean
status_is (gpointer data)
{
  return g_strcmp0 (search_status (), data) == 0;
}

/* Whether the search ring is drawn around @item: the overlays alone on a transparent surface,
 * at the middle of the item's left side, 3 pixels out (the ring is 4 pixels wide, 1 out). */
static gboolean
ring_drawn (cairo_surface_t *surface, const GraphviewViewport *vp, guint item)
{
  const GraphviewRect *r
      = graphview_layout_get_item_rect (graphview_renderer_get_layout (renderer ()), item);
  int x = (int)lround ((r->x - vp->x) * vp->scale) - 3;
  int y = (int)lround ((r->y + r->height / 2 - vp->y) * vp->scale);
  const guint8 *data = cairo_image_surface_get_data (surface);
  guint32 p
      = *(const guint32 *)(data + (gsize)y * cairo_image_surface_get_stride (surface) + 4 * x);
  return (p >> 24) == 0xff;
}

static void
test_search (void)
{
  GtkWidget *entry = app_window_get_part (window, "search_entry");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.find", NULL));
  gtk_editable_set_text (GTK_EDITABLE (entry), "mlp");
  test_ui_wait_for (status_is, "1 of 10", 10, "“1 of 10”");
  test_ui_pump (300);
  keep_photograph (GTK_WIDGET (window), "ui-conventions-search.png");

  /* Every op whose name holds "mlp", and no other. */
  PlannerGraph *g = app_document_get_graph (doc ());
  guint n_marked = 0;
  for (guint op = 0; op < planner_graph_get_n_ops (g); op++)
    {
      gboolean match = strstr (planner_graph_get_op (g, op)->name, "mlp") != NULL;
      g_assert_cmpint (graphview_renderer_op_is_highlighted (renderer (), op), ==, match);
      n_marked += match;
    }
  g_assert_cmpuint (n_marked, ==, 10);

  /* All drawn at once: the ring around each matching node and none around the others. */
  GraphviewViewport vp;
  graphview_renderer_get_file_viewport (renderer (), GRAPHVIEW_FORMAT_PNG, 1, &vp);
  cairo_surface_t *surface
      = cairo_image_surface_create (CAIRO_FORMAT_ARGB32, (int)vp.width, (int)vp.height);
  cairo_t *cr = cairo_create (surface);
  /* Only the search's marks: no selection or hover ring. */
  graphview_renderer_set_selected (renderer (), -1);
  graphview_renderer_set_hover (renderer (), -1);
  graphview_renderer_draw_overlays (renderer (), cr, &vp);
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  GraphviewModel *model = graphview_widget_get_model (graph ());
  guint n_rings = 0;
  for (guint i = 0; i < graphview_model_get_n_items (model); i++)
    {
      const GraphviewItem *it = graphview_model_get_item (model, i);
      gboolean match = strstr (planner_graph_get_op (g, it->first_op)->name, "mlp") != NULL;
      gboolean ring = ring_drawn (surface, &vp, i);
      if (ring != match)
        g_error ("%s is %sringed", planner_graph_get_op (g, it->first_op)->name,
                 ring ? "" : "not ");
      n_rings += ring;
    }
  cairo_surface_destroy (surface);
  g_assert_cmpuint (n_rings, ==, 10);

  /* Next and previous walk the matches in graph order. */
  g_assert_cmpstr (app_document_get_selected_op_name (doc ()), ==, "transformer.h.0.mlp.c_fc");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.find-next", NULL));
  g_assert_cmpstr (search_status (), ==, "2 of 10");
  g_assert_cmpstr (app_document_get_selected_op_name (doc ()), ==, "transformer.h.0.mlp.act");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.find-previous", NULL));
  g_assert_cmpstr (search_status (), ==, "1 of 10");

  /* Closing the search bar takes the rings away. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.find", NULL));
  for (guint op = 0; op < planner_graph_get_n_ops (g); op++)
    g_assert_false (graphview_renderer_op_is_highlighted (renderer (), op));
  app_document_set_selected_op (doc (), -1);
  test_ui_wait_for (plan_ready, NULL, 60, "the layout");
}

/* ---- picture export ----------------------------------------------------------------- */

typedef struct
{
  gboolean done;
  gboolean ok;
  gboolean off_thread;
  GError *error;
  guint iterations; /* main loop iterations while it ran */
} Export;

static void
export_done (GObject *source, GAsyncResult *result, gpointer data)
{
  Export *e = data;
  e->ok = app_window_export_finish (APP_WINDOW (source), result, &e->error);
  e->off_thread = app_export_picture_drawn_off_thread (result);
  e->done = TRUE;
}

static gboolean
count_iteration (gpointer data)
{
  Export *e = data;
  e->iterations++;
  return e->done ? G_SOURCE_REMOVE : G_SOURCE_CONTINUE;
}

static gboolean
export_over (gpointer data)
{
  return ((Export *)data)->done;
}

static cairo_surface_t *
export_png (double scale, const char *name, Export *e)
{
  g_autofree char *path = g_build_filename (tmpdir, name, NULL);
  g_autoptr (GFile) file = g_file_new_for_path (path);
  app_window_export_picture_async (window, "png", file, scale, export_done, e);
  /* Nothing is drawn before the call returns: the state changes at once, the picture must
   * still be the one asked for. */
  g_assert_false (e->done);
  g_timeout_add (1, count_iteration, e);
  test_ui_wait_for (export_over, e, 60, name);
  if (!e->ok)
    return NULL;
  cairo_surface_t *png = cairo_image_surface_create_from_png (path);
  g_assert_cmpint (cairo_surface_status (png), ==, CAIRO_STATUS_SUCCESS);
  return png;
}

typedef struct
{
  GBytes *bytes;
  gsize at;
} PngReader;

static cairo_status_t
read_png (void *closure, unsigned char *data, unsigned int length)
{
  PngReader *r = closure;
  gsize size = 0;
  const guint8 *all = g_bytes_get_data (r->bytes, &size);
  if (r->at + length > size)
    return CAIRO_STATUS_READ_ERROR;
  memcpy (data, all + r->at, length);
  r->at += length;
  return CAIRO_STATUS_SUCCESS;
}

static cairo_surface_t *
png_from_bytes (GBytes *bytes)
{
  PngReader r = { bytes, 0 };
  cairo_surface_t *png = cairo_image_surface_create_from_png_stream (read_png, &r);
  g_assert_cmpint (cairo_surface_status (png), ==, CAIRO_STATUS_SUCCESS);
  return png;
}

/* Dark pixels (text) in rows [y0, y1). */
static guint
dark_pixels (cairo_surface_t *png, int y0, int y1)
{
  const guint8 *data = cairo_image_surface_get_data (png);
  int stride = cairo_image_surface_get_stride (png);
  guint n = 0;
  for (int y = y0; y < y1; y++)
    for (int x = 0; x < cairo_image_surface_get_width (png); x++)
      {
        int rgb[3];
        pixel_rgb (data, stride, x, y, rgb);
        n += rgb[0] < 0x80 && rgb[1] < 0x80 && rgb[2] < 0x80;
      }
  return n;
}

static gboolean
more_toasts (gpointer data)
{
  return app_window_get_n_toasts (window) > GPOINTER_TO_UINT (data);
}

static void
test_export_png (void)
{
  g_autofree char *title = app_window_dup_picture_title (window);
  g_assert_cmpstr (title, ==, "gpt2-tiny · dp=2,mp=2 · megatron · cpu-local");

  /* What 1x must measure: the unfolded graph at scale 1 with the title band. */
  GraphviewViewport vp;
  graphview_renderer_set_title (renderer (), title);
  graphview_renderer_get_file_viewport (renderer (), GRAPHVIEW_FORMAT_PNG, 1, &vp);
  graphview_renderer_set_title (renderer (), NULL);

  Export one = { 0 }, two = { 0 };
  cairo_surface_t *png1 = export_png (1, "one.png", &one);
  g_assert_no_error (one.error);
  g_assert_cmpint (cairo_image_surface_get_width (png1), ==, (int)vp.width);
  g_assert_cmpint (cairo_image_surface_get_height (png1), ==, (int)vp.height);
  /* The band is room of its own: below it the legend is drawn as in a picture without a
   * title (the CLI's), pixel for pixel. */
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) plain
      = graphview_renderer_render_file (renderer (), GRAPHVIEW_FORMAT_PNG, 1, &error);
  g_assert_no_error (error);
  cairo_surface_t *untitled = png_from_bytes (plain);
  int band = (int)GRAPHVIEW_FILE_TITLE_HEIGHT;
  int legend = (int)GRAPHVIEW_FILE_LEGEND_HEIGHT;
  g_assert_cmpint (cairo_image_surface_get_height (untitled) + band, ==,
                   cairo_image_surface_get_height (png1));
  g_assert_cmpuint (dark_pixels (untitled, 0, legend), >, 100);
  for (int y = 0; y < legend; y++)
    g_assert_cmpmem (cairo_image_surface_get_data (untitled)
                         + (gsize)y * cairo_image_surface_get_stride (untitled),
                     4 * cairo_image_surface_get_width (untitled),
                     cairo_image_surface_get_data (png1)
                         + (gsize)(y + band) * cairo_image_surface_get_stride (png1),
                     4 * cairo_image_surface_get_width (png1));
  cairo_surface_destroy (untitled);

  /* The window's picture is the CLI's, byte for byte: the same renderer on the same plan. */
  if (!test_util_skip_without_cli ())
    {
      g_autofree char *cli_png = g_build_filename (tmpdir, "cli.png", NULL);
      g_autofree char *one_png = g_build_filename (tmpdir, "one.png", NULL);
      const char *args[] = { "render", "gpt2-tiny", "--mesh", "dp=2,mp=2", "--policy",
                             "megatron", "--hardware", "cpu-local", "--expand", "all",
                             "--title", title, "--png", cli_png, NULL };
      g_autofree char *out = NULL, *err = NULL;
      g_assert_cmpint (test_util_run_cli (args, &out, &err), ==, 0);
      g_autofree char *a = NULL, *b = NULL;
      gsize na = 0, nb = 0;
      g_assert_true (g_file_get_contents (cli_png, &a, &na, NULL));
      g_assert_true (g_file_get_contents (one_png, &b, &nb, NULL));
      g_assert_cmpmem (a, na, b, nb);
    }

  /* Folding everything right after asking changes the widget, not the picture. */
  g_autofree char *path = g_build_filename (tmpdir, "two.png", NULL);
  g_autoptr (GFile) file = g_file_new_for_path (path);
  app_window_export_picture_async (window, "png", file, 2, export_done, &two);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.collapse-all", NULL));
  g_timeout_add (1, count_iteration, &two);
  test_ui_wait_for (export_over, &two, 60, "two.png");
  g_assert_no_error (two.error);
  g_assert_true (two.ok);
  cairo_surface_t *png2 = cairo_image_surface_create_from_png (path);
  g_assert_cmpint (cairo_surface_status (png2), ==, CAIRO_STATUS_SUCCESS);
  g_assert_cmpint (cairo_image_surface_get_width (png2), ==,
                   2 * cairo_image_surface_get_width (png1));
  g_assert_cmpint (cairo_image_surface_get_height (png2), ==,
                   2 * cairo_image_surface_get_height (png1));

  /* Drawn on a worker, the main loop going on meanwhile. */
  g_assert_true (one.off_thread);
  g_assert_true (two.off_thread);
  g_assert_cmpuint (one.iterations, >, 0);
  g_assert_cmpuint (two.iterations, >, 0);

  /* The title in the top band (30 units, 60 pixels at 2x), text where it is written. */
  g_assert_cmpuint (dark_pixels (png1, 0, (int)GRAPHVIEW_FILE_TITLE_HEIGHT), >, 150);
  g_assert_cmpuint (dark_pixels (png2, 0, 2 * (int)GRAPHVIEW_FILE_TITLE_HEIGHT), >, 600);
  cairo_surface_destroy (png1);
  cairo_surface_destroy (png2);

  /* A failed export says why. */
  Export bad = { 0 };
  g_autofree char *nowhere = g_build_filename (tmpdir, "no-such-dir", "x.png", NULL);
  g_autoptr (GFile) bad_file = g_file_new_for_path (nowhere);
  app_window_export_picture_async (window, "png", bad_file, 1, export_done, &bad);
  test_ui_wait_for (export_over, &bad, 60, "the failed export");
  g_assert_false (bad.ok);
  g_assert_nonnull (bad.error);
  g_assert_nonnull (strstr (bad.error->message, "no-such-dir"));
  g_clear_error (&bad.error);
  /* Through the window's own path (where win.export's chooser ends), in a toast. */
  app_window_dismiss_toasts (window);
  test_ui_pump (700);
  app_window_dismiss_toasts (window);
  test_ui_pump (100);
  guint toasts = app_window_get_n_toasts (window);
  app_window_export_file (window, "png", bad_file, 2);
  test_ui_wait_for (more_toasts, GUINT_TO_POINTER (toasts), 60, "the failure's toast");
  gtk_widget_activate_action (GTK_WIDGET (window), "win.expand-all", NULL);
  test_ui_wait_for (plan_ready, NULL, 60, "the unfolded layout again");
}

/* ---- hardware profile --------------------------------------------------------------- */

static AppHardwareDialog *
find_hardware_dialog (void)
{
  GListModel *toplevels = gtk_window_get_toplevels ();
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GObject) w = g_list_model_get_item (toplevels, i);
      if (APP_IS_HARDWARE_DIALOG (w) && gtk_widget_get_visible (GTK_WIDGET (w)))
        return APP_HARDWARE_DIALOG (w);
    }
  return NULL;
}

/* comm_time_us of `shardscope-cli propagate gpt2-tiny --mesh dp=2,mp=2 --policy megatron
 * --hardware HW --json`. */
static double
cli_comm_time_us (const char *hardware)
{
  const char *args[] = { "propagate", "gpt2-tiny",  "--mesh", "dp=2,mp=2", "--policy",
                         "megatron",  "--hardware", hardware, "--json",    NULL };
  g_autofree char *out = NULL, *err = NULL;
  int status = test_util_run_cli (args, &out, &err);
  if (status != 0)
    g_error ("shardscope-cli propagate --hardware %s: %d %s", hardware, status, err);
  const char *at = strstr (out, "\"comm_time_us\"");
  g_assert_nonnull (at);
  return g_ascii_strtod (strchr (at, ':') + 1, NULL);
}

static void
test_hardware (void)
{
  if (test_util_skip_without_cli ())
    return;
  PlannerPlan *before = app_document_get_plan (doc ());
  g_assert_cmpfloat_with_epsilon (planner_plan_get_totals (before)->comm_time_s, 151.072e-6, 1e-10);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.edit-hardware", NULL));
  AppHardwareDialog *d = find_hardware_dialog ();
  g_assert_nonnull (d);
  /* cpu-local's figures, as data/hardware/cpu-local.json has them. */
  g_assert_cmpstr (app_hardware_dialog_get_text (d, "name"), ==, "cpu-local");
  g_assert_cmpstr (app_hardware_dialog_get_text (d, "peak_tflops.f32"), ==, "0.05");
  g_assert_cmpstr (app_hardware_dialog_get_text (d, "memory_bandwidth_GBps"), ==, "10");
  g_assert_cmpstr (app_hardware_dialog_get_text (d, "node_size"), ==, "1024");
  g_assert_cmpstr (app_hardware_dialog_get_text (d, "links.intra.name"), ==, "shared memory");
  g_assert_cmpstr (app_hardware_dialog_get_text (d, "links.intra.bandwidth_GBps"), ==, "5");
  g_assert_cmpstr (app_hardware_dialog_get_text (d, "links.intra.latency_us"), ==, "2");
  g_assert_nonnull (app_hardware_dialog_get_text (d, "efficiency.gemm"));
  g_assert_nonnull (app_hardware_dialog_get_text (d, "efficiency.kernel_launch_us"));

  test_ui_pump (300);
  keep_photograph (GTK_WIDGET (d), "ui-conventions-hardware.png");
  /* A built-in's name is refused; nonsense too, naming the figure. */
  g_autoptr (GError) error = NULL;
  g_assert_null (app_hardware_dialog_save (d, &error));
  g_assert_nonnull (strstr (error->message, "built-in"));
  g_clear_error (&error);
  g_assert_true (app_hardware_dialog_set_text (d, "name", "cpu-local-half"));
  g_assert_true (app_hardware_dialog_set_text (d, "links.intra.bandwidth_GBps", "fast"));
  g_assert_null (app_hardware_dialog_save (d, &error));
  g_assert_nonnull (strstr (error->message, "links.intra.bandwidth_GBps"));
  g_clear_error (&error);

  /* Halved, saved, used. */
  g_assert_true (app_hardware_dialog_set_text (d, "links.intra.bandwidth_GBps", "2.5"));
  g_autofree char *path = app_hardware_dialog_save (d, &error);
  g_assert_no_error (error);
  g_autofree char *dir = app_hardware_user_dir ();
  g_autofree char *expected = g_build_filename (dir, "cpu-local-half.json", NULL);
  g_assert_cmpstr (path, ==, expected);
  gtk_window_destroy (GTK_WINDOW (d));

  /* The CLI reads it: the five AllReduces (p = 2, 131,072 bytes each, 2 us a step) cost
   * 5 x (2 x 2 us + 131072 B / 2.5 GB/s) against 5 x (2 x 2 us + 131072 B / 5 GB/s). */
  double halved = 5 * (2 * 1 * 2.0 + 2.0 * 1 / 2 * 131072 / 2.5e9 * 1e6);
  double plain = 5 * (2 * 1 * 2.0 + 2.0 * 1 / 2 * 131072 / 5e9 * 1e6);
  g_assert_cmpfloat_with_epsilon (halved, 282.144, 1e-9);
  g_assert_cmpfloat_with_epsilon (cli_comm_time_us ("cpu-local"), plain, 1e-3);
  g_assert_cmpfloat_with_epsilon (cli_comm_time_us (path), halved, 1e-3);

  /* The window re-costs its plan with the profile. */
  test_ui_wait_for (plan_ready, before, 60, "the re-costed plan");
  PlannerPlan *after = app_document_get_plan (doc ());
  g_assert_cmpstr (planner_hardware_get_name (planner_plan_get_hardware (after)), ==,
                   "cpu-local-half");
  g_assert_cmpfloat_with_epsilon (planner_plan_get_totals (after)->comm_time_s, halved * 1e-6,
                                  1e-10);
  g_assert_cmpfloat_with_epsilon (planner_plan_get_totals (after)->comm_time_s
                                      / planner_plan_get_totals (before)->comm_time_s,
                                  halved / plain, 1e-9);

  /* Selectable from then on: listed after the built-ins, found by name. */
  g_auto (GStrv) names = app_hardware_list_names ();
  g_assert_true (g_strv_contains ((const char *const *)names, "cpu-local-half"));
  g_assert_true (g_strv_contains ((const char *const *)names, "h100-sxm"));
  g_autoptr (PlannerHardware) found = app_hardware_lookup ("cpu-local-half", &error);
  g_assert_no_error (error);
  g_assert_cmpfloat (planner_hardware_get_link (found, PLANNER_LINK_INTRA)->bandwidth_GBps, ==,
                     2.5);
}

static void
test_close (void)
{
  app_window_dismiss_toasts (window);
  test_ui_pump (700);
  app_window_dismiss_toasts (window);
  /* Destroyed, not closed: the re-costed plan's question is not the point here. */
  gtk_window_destroy (GTK_WINDOW (window));
  test_ui_pump (100);
}

/* A shortcut does one thing: no accelerator is given to two actions of the application or
 * its window (Ctrl+Shift+L was both the dark style and the op-type legend). */
static void
test_unique_accels (void)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_auto (GStrv) actions = gtk_application_list_action_descriptions (GTK_APPLICATION (app));
  guint n = 0;
  for (guint a = 0; actions[a]; a++)
    {
      g_auto (GStrv) accels = gtk_application_get_accels_for_action (GTK_APPLICATION (app),
                                                                     actions[a]);
      for (guint k = 0; accels[k]; k++)
        {
          /* The same keys however they are spelled: parsed, then named again. */
          guint key = 0;
          GdkModifierType mods = 0;
          g_assert_true (gtk_accelerator_parse (accels[k], &key, &mods));
          g_autofree char *name = gtk_accelerator_name (key, mods);
          const char *other = g_hash_table_lookup (seen, name);
          if (other)
            g_error ("%s is the shortcut of both %s and %s", name, other, actions[a]);
          g_hash_table_insert (seen, g_strdup (name), g_strdup (actions[a]));
          n++;
        }
    }
  g_assert_cmpuint (n, >, 30);
  g_auto (GStrv) legend
      = gtk_application_get_accels_for_action (GTK_APPLICATION (app), "win.show-type-legend");
  g_assert_cmpstr (legend[0], ==, "<Control>t");
}

int
main (int argc, char *argv[])
{
  tmpdir = g_dir_make_tmp ("shardscope-ui-conventions-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_autofree char *data = g_build_filename (tmpdir, "data", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  /* The user's profiles land here, not in the build folder's shared data dir. */
  g_setenv ("XDG_DATA_HOME", data, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (test_ui_log_fatal, NULL);
  app_application_init_environment ();

  g_test_add_func ("/ui/conventions/start", test_start);
  g_test_add_func ("/ui/conventions/type-legend", test_type_legend);
  g_test_add_func ("/ui/conventions/unique-accels", test_unique_accels);
  g_test_add_func ("/ui/conventions/search", test_search);
  g_test_add_func ("/ui/conventions/export-png", test_export_png);
  g_test_add_func ("/ui/conventions/hardware", test_hardware);
  g_test_add_func ("/ui/conventions/close", test_close);
  int status = g_test_run ();
  g_clear_object (&app);
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
