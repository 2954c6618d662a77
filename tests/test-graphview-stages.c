#define G_LOG_DOMAIN "test-graphview-stages"

#include "config.h"

#include <math.h>
#include <string.h>

#include "graphview-layouter.h"
#include "graphview-renderer.h"
#include "planner-request.h"
#include "test-util.h"

/* Pipeline stages as bands in the graph view (issue 18): every op's node inside its stage's
 * band, labels with the devices worked out by hand from the mesh, folded blocks across the
 * bands of their layers, and the bands in the pixels. */

typedef struct
{
  PlannerGraph *graph;
  PlannerPlan *plan;
  GraphviewModel *model;
  GraphviewLayouter *layouter;
  GraphviewRenderer *renderer;
} Fixture;

/* A 4-layer LLaMA with the megatron policy on @mesh_text, with @constants (NULL: the
 * defaults), laid out with every block unfolded or none. */
static void
fixture_init (Fixture *f, const char *mesh_text, const PlannerCostConstants *constants,
              gboolean expand)
{
  g_autoptr (GError) error = NULL;
  f->graph = test_util_model_sized ("llama", 4, 0);
  g_autoptr (PlannerMesh) mesh = test_util_mesh (mesh_text);
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (PlannerRequest) request = planner_request_new ();
  planner_request_set_policy (request, "megatron");
  if (constants)
    planner_request_set_constants (request, constants);
  f->plan = planner_request_propagate (request, f->graph, mesh, hw, NULL, NULL, &error);
  g_assert_no_error (error);
  f->model = graphview_model_new (f->graph);
  if (expand)
    graphview_model_expand_all (f->model);
  f->layouter = graphview_layouter_new ();
  f->renderer = graphview_renderer_new (f->model);
  graphview_renderer_set_plan (f->renderer, f->plan);
  g_autoptr (GraphviewLayout) layout
      = graphview_layouter_layout (f->layouter, f->model, NULL, &error);
  g_assert_no_error (error);
  graphview_renderer_set_layout (f->renderer, layout);
  g_assert_true (graphview_renderer_is_ready (f->renderer));
}

static void
fixture_clear (Fixture *f)
{
  g_object_unref (f->renderer);
  g_object_unref (f->layouter);
  g_object_unref (f->model);
  g_object_unref (f->plan);
  g_object_unref (f->graph);
}

/* The stage of an op by hand: layers 0-1 on stage 0 and 2-3 on stage 1 (equal layers, two
 * stages), the embedding with the first layer, the final norm and the head with the last. */
static guint
hand_stage (const char *name)
{
  const char *layer = strstr (name, "layers.");
  if (layer)
    return g_ascii_strtoull (layer + strlen ("layers."), NULL, 10) >= 2;
  return strstr (name, "embed_tokens") ? 0 : 1;
}

static gboolean
rect_inside (const GraphviewRect *inner, const GraphviewRect *outer)
{
  return inner->x >= outer->x && inner->y >= outer->y
         && inner->x + inner->width <= outer->x + outer->width
         && inner->y + inner->height <= outer->y + outer->height;
}

/* Renders the whole drawing, as a file is, onto an image surface. */
static cairo_surface_t *
render (Fixture *f, GraphviewViewport *vp)
{
  graphview_renderer_get_file_viewport (f->renderer, GRAPHVIEW_FORMAT_PNG, 1.0, vp);
  cairo_surface_t *surface
      = cairo_image_surface_create (CAIRO_FORMAT_RGB24, (int)vp->width, (int)vp->height);
  cairo_t *cr = cairo_create (surface);
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);
  graphview_renderer_draw (f->renderer, cr, vp);
  g_assert_cmpint (cairo_status (cr), ==, CAIRO_STATUS_SUCCESS);
  cairo_destroy (cr);
  cairo_surface_flush (surface);
  return surface;
}

static void
pixel_rgb (cairo_surface_t *s, const GraphviewViewport *vp, double wx, double wy, int *r, int *g,
           int *b)
{
  int x = (int)((wx - vp->x) * vp->scale), y = (int)((wy - vp->y) * vp->scale);
  g_assert_cmpint (x, >=, 0);
  g_assert_cmpint (y, >=, 0);
  g_assert_cmpint (x, <, cairo_image_surface_get_width (s));
  g_assert_cmpint (y, <, cairo_image_surface_get_height (s));
  const guint8 *data = cairo_image_surface_get_data (s);
  guint32 p = ((const guint32 *)(data + y * cairo_image_surface_get_stride (s)))[x];
  *r = (p >> 16) & 0xff;
  *g = (p >> 8) & 0xff;
  *b = p & 0xff;
}

/* Dark pixels (text) in a world rectangle. */
static guint
dark_pixels (cairo_surface_t *s, const GraphviewViewport *vp, const GraphviewRect *r)
{
  guint n = 0;
  for (double y = r->y; y < r->y + r->height; y += 1 / vp->scale)
    for (double x = r->x; x < r->x + r->width; x += 1 / vp->scale)
      {
        int R, G, B;
        pixel_rgb (s, vp, x, y, &R, &G, &B);
        n += R + G + B < 3 * 160;
      }
  return n;
}

static void
test_unfolded (void)
{
  Fixture f;
  fixture_init (&f, "pp=2,mp=2", NULL, TRUE);
  GraphviewStages *stages = graphview_renderer_get_stages (f.renderer);
  g_assert_nonnull (stages);
  g_assert_cmpuint (graphview_stages_get_n_stages (stages), ==, 2);
  g_assert_cmpuint (graphview_stages_get_n_bands (stages), ==, 2);

  /* pp is the major axis of pp=2,mp=2: device d has pp coordinate d / 2. */
  g_assert_cmpstr (graphview_stages_get_band (stages, 0)->label, ==,
                   "stage 0 · layers 0-1 · devices 0-1");
  g_assert_cmpstr (graphview_stages_get_band (stages, 1)->label, ==,
                   "stage 1 · layers 2-3 · devices 2-3");

  GraphviewViewport vp;
  cairo_surface_t *surface = render (&f, &vp);
  GraphviewLayout *layout = graphview_renderer_get_layout (f.renderer);
  double lw, lh, bw, bh;
  graphview_layout_get_bounds (layout, &lw, &lh);
  graphview_renderer_get_bounds (f.renderer, &bw, &bh);
  /* The labels' gutter widens the drawing, and the file with it. */
  g_assert_cmpfloat (bw, ==, lw + graphview_stages_get_gutter (stages));
  g_assert_cmpfloat (bh, ==, lh);
  g_assert_cmpint (cairo_image_surface_get_width (surface), ==, (int)ceil (MAX (bw, 560)));

  const GraphviewRect *band0 = &graphview_stages_get_band (stages, 0)->rect;
  const GraphviewRect *band1 = &graphview_stages_get_band (stages, 1)->rect;
  /* Stage 0 above stage 1, meeting without a gap or an overlap. */
  g_assert_cmpfloat (band0->y + band0->height, ==, band1->y);
  guint n_items = graphview_model_get_n_items (f.model), per_stage[2] = { 0, 0 };
  for (guint i = 0; i < n_items; i++)
    {
      const GraphviewItem *it = graphview_model_get_item (f.model, i);
      g_assert_cmpint (it->kind, ==, GRAPHVIEW_ITEM_OP);
      const char *name = planner_graph_get_op (f.graph, it->first_op)->name;
      guint stage = hand_stage (name);
      per_stage[stage]++;
      g_assert_cmpuint (graphview_stages_get_op_chunk (stages, it->first_op), ==, stage);
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      const GraphviewRect *mine = &graphview_stages_get_band (stages, stage)->rect;
      const GraphviewRect *other = &graphview_stages_get_band (stages, 1 - stage)->rect;
      if (!rect_inside (r, mine))
        g_error ("%s (%.1f,%.1f %.1fx%.1f) is not inside the band of stage %u (y %.1f-%.1f)", name,
                 r->x, r->y, r->width, r->height, stage, mine->y, mine->y + mine->height);
      g_assert_false (graphview_rect_intersects (r, other));
    }
  /* 1 embedding + 2 x 24 layer ops; 2 x 24 + norm + head. */
  g_assert_cmpuint (per_stage[0], ==, 1 + 2 * 24);
  g_assert_cmpuint (per_stage[1], ==, 2 * 24 + 2);

  /* The pixels: each band's gutter is tinted with its stage's hue (blue, then green) and
   * holds its label's text; below the last band the page is white. */
  int r, g, b;
  double gx = lw + graphview_stages_get_gutter (stages) - 4;
  pixel_rgb (surface, &vp, gx, band0->y + band0->height / 2, &r, &g, &b);
  g_assert_cmpint (b, >, r + 20);
  g_assert_cmpint (b, <, 255);
  pixel_rgb (surface, &vp, gx, band1->y + band1->height / 2, &r, &g, &b);
  g_assert_cmpint (g, >, r + 20);
  g_assert_cmpint (g, >, b);
  for (guint s = 0; s < 2; s++)
    {
      const GraphviewRect *band = &graphview_stages_get_band (stages, s)->rect;
      GraphviewRect text = { lw + 8, band->y, graphview_stages_get_gutter (stages) - 8, 20 };
      g_assert_cmpuint (dark_pixels (surface, &vp, &text), >, 40);
    }

  /* Bands off: the same drawing without them, the layout's own bounds. */
  graphview_renderer_set_show_stages (f.renderer, FALSE);
  graphview_renderer_get_bounds (f.renderer, &bw, &bh);
  g_assert_cmpfloat (bw, ==, lw);
  GraphviewViewport plain_vp;
  cairo_surface_t *plain = render (&f, &plain_vp);
  pixel_rgb (plain, &plain_vp, 1, band0->y + band0->height / 2, &r, &g, &b);
  g_assert_cmpint (r + g + b, ==, 3 * 255);
  cairo_surface_destroy (plain);
  cairo_surface_destroy (surface);
  fixture_clear (&f);
}

/* Folded, the four layers are one block node: its upper half stands for stage 0's layers
 * 0-1, its lower half for stage 1's 2-3, each inside its band. pp is the middle axis of
 * dp=2,pp=2,mp=2: device d = 4 dp + 2 pp + mp, so stage 0 has 0, 1, 4, 5. */
static void
test_folded (void)
{
  Fixture f;
  fixture_init (&f, "dp=2,pp=2,mp=2", NULL, FALSE);
  GraphviewStages *stages = graphview_renderer_get_stages (f.renderer);
  g_assert_nonnull (stages);
  g_assert_cmpstr (graphview_stages_get_band (stages, 0)->label, ==,
                   "stage 0 · layers 0-1 · devices 0-1,4-5");
  g_assert_cmpstr (graphview_stages_get_band (stages, 1)->label, ==,
                   "stage 1 · layers 2-3 · devices 2-3,6-7");
  GraphviewLayout *layout = graphview_renderer_get_layout (f.renderer);
  GraphviewViewport vp;
  cairo_surface_t *surface = render (&f, &vp);
  guint n_items = graphview_model_get_n_items (f.model), blocks = 0;
  for (guint i = 0; i < n_items; i++)
    {
      const GraphviewItem *it = graphview_model_get_item (f.model, i);
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      guint first, last;
      graphview_stages_get_item_chunks (stages, f.model, i, &first, &last);
      if (it->kind == GRAPHVIEW_ITEM_OP)
        {
          guint stage = hand_stage (planner_graph_get_op (f.graph, it->first_op)->name);
          g_assert_cmpuint (first, ==, stage);
          g_assert_cmpuint (last, ==, stage);
          g_assert_true (rect_inside (r, &graphview_stages_get_band (stages, stage)->rect));
          continue;
        }
      blocks++;
      g_assert_cmpuint (it->n_blocks, ==, 4);
      /* Its tooltip names both stages. */
      g_autofree char *where = graphview_stages_dup_item_text (stages, f.model, i);
      g_assert_cmpstr (where, ==,
                       "stage 0 · layers 0-1 · devices 0-1,4-5\n"
                       "stage 1 · layers 2-3 · devices 2-3,6-7");
      g_assert_cmpuint (first, ==, 0);
      g_assert_cmpuint (last, ==, 1);
      for (guint c = 0; c < 2; c++)
        {
          GraphviewRect part;
          graphview_stages_get_item_part (stages, f.model, layout, i, c, &part);
          g_assert_cmpfloat_with_epsilon (part.height, r->height / 2, 1e-9);
          g_assert_cmpfloat_with_epsilon (part.y, r->y + c * r->height / 2, 1e-9);
          g_assert_true (rect_inside (&part, &graphview_stages_get_band (stages, c)->rect));
        }
      /* The band boundary crosses the node at its middle: beside it, the tints change
       * there. */
      const GraphviewRect *band1 = &graphview_stages_get_band (stages, 1)->rect;
      g_assert_cmpfloat_with_epsilon (band1->y, r->y + r->height / 2, 1e-9);
      int r0, g0, b0, r1, g1, b1;
      double x = r->x + r->width + 4;
      pixel_rgb (surface, &vp, x, band1->y - 4, &r0, &g0, &b0);
      pixel_rgb (surface, &vp, x, band1->y + 4, &r1, &g1, &b1);
      g_assert_cmpint (b0, >, r0);
      g_assert_cmpint (g1, >, r1);
      g_assert_cmpint (g1 - b1, >, g0 - b0);
    }
  g_assert_cmpuint (blocks, ==, 1);
  cairo_surface_destroy (surface);
  fixture_clear (&f);
}

/* Interleaved, two chunks a stage: a band per chunk, coloured and labelled by its stage. */
static void
test_interleaved (void)
{
  PlannerCostConstants c;
  planner_cost_constants_init (&c);
  c.schedule = PLANNER_SCHEDULE_INTERLEAVED;
  c.virtual_stages = 2;
  c.micro_batches = 2;
  g_strlcpy (c.stages, "0-0,1-1,2-2,3-3", sizeof c.stages);
  Fixture f;
  fixture_init (&f, "pp=2,mp=2", &c, TRUE);
  GraphviewStages *stages = graphview_renderer_get_stages (f.renderer);
  g_assert_cmpuint (graphview_stages_get_n_bands (stages), ==, 4);
  static const char *const labels[] = {
    "stage 0 · layer 0 · devices 0-1",
    "stage 1 · layer 1 · devices 2-3",
    "stage 0 · layer 2 · devices 0-1",
    "stage 1 · layer 3 · devices 2-3",
  };
  for (guint k = 0; k < 4; k++)
    {
      g_assert_cmpstr (graphview_stages_get_band (stages, k)->label, ==, labels[k]);
      g_assert_cmpuint (graphview_stages_get_band (stages, k)->stage, ==, k % 2);
    }
  GraphviewLayout *layout = graphview_renderer_get_layout (f.renderer);
  for (guint i = 0; i < graphview_model_get_n_items (f.model); i++)
    {
      const GraphviewItem *it = graphview_model_get_item (f.model, i);
      const char *name = planner_graph_get_op (f.graph, it->first_op)->name;
      const char *layer = strstr (name, "layers.");
      guint chunk = layer                           ? (guint)g_ascii_strtoull (layer + 7, NULL, 10)
                    : strstr (name, "embed_tokens") ? 0
                                                    : 3;
      g_assert_true (rect_inside (graphview_layout_get_item_rect (layout, i),
                                  &graphview_stages_get_band (stages, chunk)->rect));
    }
  fixture_clear (&f);
}

/* No pp axis: no stages, nothing added to the bounds. */
static void
test_no_pipeline (void)
{
  Fixture f;
  fixture_init (&f, "dp=2,mp=2", NULL, FALSE);
  g_assert_null (graphview_renderer_get_stages (f.renderer));
  double lw, lh, bw, bh;
  graphview_layout_get_bounds (graphview_renderer_get_layout (f.renderer), &lw, &lh);
  graphview_renderer_get_bounds (f.renderer, &bw, &bh);
  g_assert_cmpfloat (bw, ==, lw);
  g_assert_cmpfloat (bh, ==, lh);
  fixture_clear (&f);
}

static void
test_format_devices (void)
{
  static const guint64 ids[] = { 0, 1, 2, 3, 8, 9, 10, 11, 16, 24, 25, 40 };
  g_autofree char *a = graphview_stages_format_devices (ids, 8);
  g_assert_cmpstr (a, ==, "0-3,8-11");
  g_autofree char *b = graphview_stages_format_devices (ids, 9);
  g_assert_cmpstr (b, ==, "0-3,8-11,16");
  g_autofree char *c = graphview_stages_format_devices (ids, G_N_ELEMENTS (ids));
  g_assert_cmpstr (c, ==, "0-3,8-11,16,24-25,… (12)");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/graphview/stages/unfolded", test_unfolded);
  g_test_add_func ("/graphview/stages/folded", test_folded);
  g_test_add_func ("/graphview/stages/interleaved", test_interleaved);
  g_test_add_func ("/graphview/stages/no-pipeline", test_no_pipeline);
  g_test_add_func ("/graphview/stages/format-devices", test_format_devices);
  return g_test_run ();
}
