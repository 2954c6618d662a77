#define G_LOG_DOMAIN "test-graphview-render"

#include "config.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "graphview-layouter.h"
#include "graphview-renderer.h"
#include "planner-hardware.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "test-util.h"

/* Drawing plans: files, pixels inside nodes, the step and comparison overlays (issue 6). */

typedef struct
{
  PlannerGraph *graph;
  PlannerPlan *plan;
  GraphviewModel *model;
  GraphviewLayouter *layouter;
  GraphviewRenderer *renderer;
  char *dir;
} Fixture;

static void
relayout (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GraphviewLayout) layout
      = graphview_layouter_layout (f->layouter, f->model, NULL, &error);
  g_assert_no_error (error);
  graphview_renderer_set_layout (f->renderer, layout);
  g_assert_true (graphview_renderer_is_ready (f->renderer));
}

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  f->graph = test_util_model (data ? data : "gpt2", NULL);
  f->plan = test_util_plan (f->graph, "dp=2,mp=4", NULL, "megatron", NULL);
  f->model = graphview_model_new (f->graph);
  f->layouter = graphview_layouter_new ();
  f->renderer = graphview_renderer_new (f->model);
  graphview_renderer_set_plan (f->renderer, f->plan);
  relayout (f);
  f->dir = test_util_tmp_dir_new ("graphview-XXXXXX");
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  test_util_tmp_dir_remove (f->dir);
  g_free (f->dir);
  g_object_unref (f->renderer);
  g_object_unref (f->layouter);
  g_object_unref (f->model);
  g_object_unref (f->plan);
  g_object_unref (f->graph);
}

static cairo_surface_t *
render_png (Fixture *f, const char *name, GraphviewViewport *vp)
{
  g_autofree char *path = g_build_filename (f->dir, name, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) bytes
      = graphview_renderer_render_file (f->renderer, GRAPHVIEW_FORMAT_PNG, 1.0, &error);
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (path, g_bytes_get_data (bytes, NULL),
                                      (gssize)g_bytes_get_size (bytes), NULL));
  graphview_renderer_get_file_viewport (f->renderer, GRAPHVIEW_FORMAT_PNG, 1.0, vp);
  cairo_surface_t *png = cairo_image_surface_create_from_png (path);
  g_assert_cmpint (cairo_surface_status (png), ==, CAIRO_STATUS_SUCCESS);
  return png;
}

static guint32
pixel (cairo_surface_t *png, int x, int y)
{
  const guint8 *data = cairo_image_surface_get_data (png);
  int stride = cairo_image_surface_get_stride (png);
  return ((const guint32 *)(data + y * stride))[x] & 0xffffff;
}

/* The share of non-white pixels inside an item's box. */
static double
ink (cairo_surface_t *png, const GraphviewViewport *vp, const GraphviewRect *r)
{
  int x0 = (int)((r->x - vp->x) * vp->scale) + 1,
      x1 = (int)((r->x + r->width - vp->x) * vp->scale) - 1;
  int y0 = (int)((r->y - vp->y) * vp->scale) + 1,
      y1 = (int)((r->y + r->height - vp->y) * vp->scale) - 1;
  guint inked = 0, total = 0;
  for (int y = y0; y < y1; y++)
    for (int x = x0; x < x1; x++, total++)
      inked += pixel (png, x, y) != 0xffffff;
  return total ? (double)inked / total : 0;
}

static void
test_gpt2_png (Fixture *f, gconstpointer data)
{
  /* One layer unfolded shows op nodes, the other eleven one block node. */
  g_assert_cmpuint (graphview_model_expand_matching (f->model, "transformer.h.0"), ==, 1);
  relayout (f);
  GraphviewLayout *layout = graphview_renderer_get_layout (f->renderer);
  GraphviewViewport vp;
  cairo_surface_t *png = render_png (f, "gpt2.png", &vp);

  double width, height;
  graphview_layout_get_bounds (layout, &width, &height);
  g_assert_cmpint (cairo_image_surface_get_width (png), ==, (int)vp.width);
  g_assert_cmpint (cairo_image_surface_get_height (png), ==, (int)vp.height);
  g_assert_cmpfloat (vp.scale, ==, 1.0);
  g_assert_cmpint (cairo_image_surface_get_width (png), ==, (int)ceil (MAX (width, 560)));
  g_assert_cmpint (cairo_image_surface_get_height (png), ==,
                   (int)ceil (height + GRAPHVIEW_FILE_LEGEND_HEIGHT));

  guint n = graphview_model_get_n_items (f->model);
  g_assert_cmpuint (n, ==, 6 + 21 + 1);
  for (guint i = 0; i < n; i++)
    {
      double share = ink (png, &vp, graphview_layout_get_item_rect (layout, i));
      if (share < 0.5)
        g_error ("item %u is mostly background (%.0f%% ink)", i, 100 * share);
    }
  /* Between nodes the page is background. */
  g_assert_cmphex (pixel (png, 2, (int)vp.height - 2), ==, 0xffffff);
  cairo_surface_destroy (png);

  /* Megatron's row-parallel projections end in an AllReduce over mp, badged on the edge. */
  guint badges = 0;
  for (guint e = 0; e < graphview_model_get_n_edges (f->model); e++)
    {
      g_autofree char *badge = graphview_renderer_dup_edge_badge (f->renderer, e);
      guint64 bytes = 0;
      double cost = graphview_renderer_get_edge_cost (f->renderer, e, &bytes);
      if (badge == NULL)
        {
          g_assert_cmpfloat (cost, ==, 0);
          continue;
        }
      badges++;
      g_assert_true (g_str_has_prefix (badge, "AllReduce(mp) "));
      g_assert_cmpfloat (cost, >, 0);
      g_assert_cmpuint (bytes, >, 0);
      g_autofree char *time = planner_format_time (cost);
      g_assert_true (g_str_has_suffix (badge, time));
    }
  g_assert_cmpuint (badges, >=, 2);
}

static void
test_vector_files (Fixture *f, gconstpointer data)
{
  static const char *const names[] = { "g.svg", "g.pdf" };
  static const char *const magic[] = { "<?xml", "%PDF" };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      GraphviewFormat format;
      g_assert_true (graphview_format_from_path (names[i], &format));
      g_autoptr (GError) error = NULL;
      g_autoptr (GBytes) bytes = graphview_renderer_render_file (f->renderer, format, 1.0, &error);
      g_assert_no_error (error);
      gsize length = 0;
      const char *text = g_bytes_get_data (bytes, &length);
      g_assert_cmpuint (length, >, 1000);
      g_assert_cmpmem (text, strlen (magic[i]), magic[i], strlen (magic[i]));
    }
  GraphviewFormat format;
  g_assert_false (graphview_format_from_path ("x.bmp", &format));

  /* Nothing laid out yet: an error that says so, and no bytes. */
  g_autoptr (GraphviewRenderer) bare = graphview_renderer_new (f->model);
  g_autoptr (GError) error = NULL;
  g_assert_null (graphview_renderer_render_file (bare, GRAPHVIEW_FORMAT_PNG, 1.0, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_NOT_INITIALIZED);
  g_assert_nonnull (strstr (error->message, "lay it out first"));
}

/* Step k greys exactly the ops decided after k: propagated ops of later steps and every
 * defaulted op; pinned ops and earlier steps keep their colours. */
static void
test_step_overlay (Fixture *f, gconstpointer data)
{
  graphview_model_expand_all (f->model);
  relayout (f);
  GraphviewLayout *layout = graphview_renderer_get_layout (f->renderer);
  guint n_steps = planner_plan_get_n_trace_steps (f->plan);
  g_assert_cmpuint (n_steps, >, 4);
  GraphviewViewport vp;
  cairo_surface_t *plain = render_png (f, "plain.png", &vp);

  int steps[] = { 0, (int)n_steps / 2, (int)n_steps - 1 };
  for (guint s = 0; s < G_N_ELEMENTS (steps); s++)
    {
      int k = steps[s];
      graphview_renderer_set_step (f->renderer, k);
      cairo_surface_t *png = render_png (f, "step.png", &vp);
      guint greyed = 0;
      for (guint op = 0; op < planner_graph_get_n_ops (f->graph); op++)
        {
          const PlannerOpPlan *p = planner_plan_get_op (f->plan, op);
          gboolean later = (p->decision == PLANNER_DECIDED_PROPAGATED && p->trace_step > k)
                           || p->decision == PLANNER_DECIDED_DEFAULTED;
          GraphviewStepState state = graphview_renderer_get_step_state (f->renderer, op);
          g_assert_cmpint (state == GRAPHVIEW_STEP_PENDING, ==, later);
          if (p->decision == PLANNER_DECIDED_PROPAGATED && p->trace_step == k)
            g_assert_cmpint (state, ==, GRAPHVIEW_STEP_CURRENT);
          /* A corner of the node away from text, marks and edges. */
          const GraphviewRect *r = graphview_layout_get_item_rect (
              layout, graphview_model_get_item_of_op (f->model, op));
          int x = (int)((r->x - vp.x) * vp.scale) + 3;
          int y = (int)((r->y + r->height - vp.y) * vp.scale) - 3;
          gboolean changed = pixel (png, x, y) != pixel (plain, x, y);
          g_assert_cmpint (changed, ==, later);
          greyed += later;
        }
      if (k == 0)
        g_assert_cmpuint (greyed, >, 0);
      cairo_surface_destroy (png);
    }
  cairo_surface_destroy (plain);
  graphview_renderer_set_step (f->renderer, -1);
  g_assert_cmpint (graphview_renderer_get_step_state (f->renderer, 0), ==, GRAPHVIEW_STEP_DECIDED);
}

static void
test_compare (Fixture *f, gconstpointer data)
{
  g_autoptr (PlannerPlan) dp = test_util_plan (f->graph, "dp=2,mp=4", NULL, "dp", NULL);
  graphview_renderer_set_compare_plan (f->renderer, dp);
  guint differ = 0;
  for (guint op = 0; op < planner_graph_get_n_ops (f->graph); op++)
    {
      gboolean expected = !planner_strategy_equal (&planner_plan_get_op (f->plan, op)->strategy,
                                                   &planner_plan_get_op (dp, op)->strategy);
      g_assert_cmpint (graphview_renderer_op_differs (f->renderer, op), ==, expected);
      differ += expected;
    }
  g_assert_cmpuint (differ, >, 0);
  /* The folded block says how many of its ops differ. */
  for (guint i = 0; i < graphview_model_get_n_items (f->model); i++)
    if (graphview_model_get_item (f->model, i)->kind == GRAPHVIEW_ITEM_BLOCK)
      {
        g_autofree char *summary = graphview_renderer_dup_item_summary (f->renderer, i);
        g_assert_nonnull (strstr (summary, "ops differ"));
        g_assert_nonnull (strstr (summary, "pinned "));
      }
  GraphviewViewport vp;
  cairo_surface_t *png = render_png (f, "compare.png", &vp);
  cairo_surface_destroy (png);
}

/* Zoomed far out: boxes without text are still drawn, and quickly. */
static void
test_zoomed_out (Fixture *f, gconstpointer data)
{
  graphview_model_expand_all (f->model);
  relayout (f);
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_RGB24, 200, 800);
  cairo_t *cr = cairo_create (surface);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);
  double w, h;
  graphview_layout_get_bounds (graphview_renderer_get_layout (f->renderer), &w, &h);
  GraphviewViewport vp = { MIN (200 / w, 800 / h), 0, 0, 200, 800 };
  graphview_renderer_draw (f->renderer, cr, &vp);
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  guint inked = 0;
  for (int y = 0; y < 800; y++)
    for (int x = 0; x < 200; x++)
      inked += pixel (surface, x, y) != 0xffffff;
  g_assert_cmpuint (inked, >, 1000);
  cairo_surface_destroy (surface);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/graphview/render/gpt2-megatron-png", Fixture, NULL, fixture_setup, test_gpt2_png,
              fixture_teardown);
  g_test_add ("/graphview/render/svg-pdf", Fixture, "gpt2-tiny", fixture_setup, test_vector_files,
              fixture_teardown);
  g_test_add ("/graphview/render/step-overlay", Fixture, "gpt2-tiny", fixture_setup,
              test_step_overlay, fixture_teardown);
  g_test_add ("/graphview/render/compare", Fixture, NULL, fixture_setup, test_compare,
              fixture_teardown);
  g_test_add ("/graphview/render/zoomed-out", Fixture, "gpt2-tiny", fixture_setup, test_zoomed_out,
              fixture_teardown);
  return g_test_run ();
}
