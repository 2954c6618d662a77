#define G_LOG_DOMAIN "bench-graphview"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench-util.h"
#include "graphview-layouter.h"
#include "graphview-renderer.h"
#include "planner-hardware.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"

/* The graph view on the 80-layer LLaMA-2-70B-shaped plan (issue 6):
 *   1. layout + first render, folded (target <= 0.3 s);
 *   2. layout with every block expanded (target <= 3 s), against plain dot on the same flat
 *      graph in the same run;
 *   3. one frame with about 5k nodes visible (target <= 16 ms): the same model with 208
 *      layers, every block expanded, the whole graph in a 1920x1080 view;
 *   4. unfolding and folding layer 37 alone (issue 15): the plain layout (dot places the
 *      groups again) against the stable one (from the layout shown), with layer 37's group
 *      cached and cold, folded and with 20 other layers unfolded.
 * Usage: bench-graphview [REPEATS] [--no-flat] */

#define MESH "dp=2,mp=8"
#define WIDTH 1920
#define HEIGHT 1080

static PlannerGraph *
build (gint64 layers)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.layers = layers;
  PlannerGraph *graph = planner_zoo_build ("llama-70b", &options, &error);
  g_assert_no_error (error);
  return graph;
}

static PlannerPlan *
megatron (PlannerGraph *graph)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (MESH, &error);
  g_autoptr (PlannerHardware) hw = planner_hardware_lookup ("h100-sxm", &error);
  g_assert_no_error (error);
  g_autoptr (GPtrArray) pins = planner_policy_expand ("megatron", graph, mesh, NULL, &error);
  g_assert_no_error (error);
  PlannerPlan *plan = planner_propagate (graph, mesh, hw, pins, NULL, &error);
  g_assert_no_error (error);
  return plan;
}

static void
fit (GraphviewLayout *layout, GraphviewViewport *vp)
{
  double w, h;
  graphview_layout_get_bounds (layout, &w, &h);
  vp->scale = MIN (WIDTH / w, HEIGHT / h);
  vp->x = vp->y = 0;
  vp->width = WIDTH;
  vp->height = HEIGHT;
}

static double
frame_ms (GraphviewRenderer *renderer, cairo_t *cr, const GraphviewViewport *vp)
{
  gint64 start = g_get_monotonic_time ();
  cairo_set_source_rgb (cr, 1, 1, 1);
  cairo_paint (cr);
  graphview_renderer_draw (renderer, cr, vp);
  cairo_surface_flush (cairo_get_target (cr));
  return bench_ms_since (start);
}

/* Median ms of laying out @model's folding with layer 37 unfolded and then folded again,
 * from @base (made for the folding without it), stably or plainly; *@cold_ms is the first
 * unfold on a fresh layouter (layer 37's group laid out with dot too). */
static void
one_instance (GraphviewModel *model, guint repeats, gboolean stable, double *unfold_ms,
              double *fold_ms, double *cold_ms)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewLayout) base = graphview_layouter_layout (layouter, model, NULL, &error);
  g_assert_no_error (error);
  double *u = g_new (double, repeats + 1), *f = g_new (double, repeats + 1);
  for (guint r = 0; r <= repeats; r++)
    {
      graphview_model_set_expanded (model, 0, 37, TRUE);
      gint64 start = g_get_monotonic_time ();
      g_autoptr (GraphviewLayout) open
          = graphview_layouter_layout_stable (layouter, model, stable ? base : NULL, NULL, &error);
      g_assert_no_error (error);
      u[r] = bench_ms_since (start);
      g_assert_true (graphview_layout_is_stable (open) == stable);
      graphview_model_set_expanded (model, 0, 37, FALSE);
      start = g_get_monotonic_time ();
      g_autoptr (GraphviewLayout) closed
          = graphview_layouter_layout_stable (layouter, model, stable ? open : NULL, NULL, &error);
      g_assert_no_error (error);
      f[r] = bench_ms_since (start);
      g_assert_true (graphview_layout_is_stable (closed) == stable);
    }
  *cold_ms = u[0];
  *unfold_ms = bench_median (u + 1, repeats);
  *fold_ms = bench_median (f + 1, repeats);
  g_free (u);
  g_free (f);
}

static guint
visible_items (GraphviewLayout *layout, const GraphviewViewport *vp)
{
  GraphviewRect view = { vp->x, vp->y, vp->width / vp->scale, vp->height / vp->scale };
  guint n = 0;
  for (guint i = 0; i < graphview_layout_get_n_items (layout); i++)
    n += graphview_rect_intersects (graphview_layout_get_item_rect (layout, i), &view);
  return n;
}

int
main (int argc, char **argv)
{
  guint repeats = argc > 1 ? (guint)MAX (atoi (argv[1]), 1) : 5;
  gboolean flat = !(argc > 2 && g_str_equal (argv[2], "--no-flat"));
  g_autoptr (GError) error = NULL;
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_RGB24, WIDTH, HEIGHT);
  cairo_t *cr = cairo_create (surface);

  g_autoptr (PlannerGraph) graph = build (0);
  g_autoptr (PlannerPlan) plan = megatron (graph);
  printf ("llama-70b: %u ops, mesh %s, megatron, %u redistributions\n",
          planner_graph_get_n_ops (graph), MESH, planner_plan_get_n_redistributions (plan));

  /* 1. Folded: a new layouter each time, so nothing comes from the cache. */
  double *t = g_new (double, repeats);
  guint n_items = 0;
  for (guint r = 0; r < repeats; r++)
    {
      g_autoptr (GraphviewModel) model = graphview_model_new (graph);
      g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
      gint64 start = g_get_monotonic_time ();
      g_autoptr (GraphviewLayout) layout
          = graphview_layouter_layout (layouter, model, NULL, &error);
      g_assert_no_error (error);
      g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
      graphview_renderer_set_layout (renderer, layout);
      graphview_renderer_set_plan (renderer, plan);
      GraphviewViewport vp;
      fit (layout, &vp);
      frame_ms (renderer, cr, &vp);
      t[r] = bench_ms_since (start);
      n_items = graphview_model_get_n_items (model);
    }
  printf ("folded: layout + first render %.1f ms (median of %u; %u items; target 300 ms)\n",
          bench_median (t, repeats), repeats, n_items);

  /* 2. Every block expanded, from a cold layouter, against flat dot. */
  double expanded = 0;
  for (guint r = 0; r < repeats; r++)
    {
      g_autoptr (GraphviewModel) model = graphview_model_new (graph);
      graphview_model_expand_all (model);
      g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
      gint64 start = g_get_monotonic_time ();
      g_autoptr (GraphviewLayout) layout
          = graphview_layouter_layout (layouter, model, NULL, &error);
      g_assert_no_error (error);
      g_assert_nonnull (layout);
      t[r] = bench_ms_since (start);
      n_items = graphview_model_get_n_items (model);
    }
  expanded = bench_median (t, repeats);
  printf ("expanded: layout %.1f ms (median of %u; %u items; target 3000 ms)\n", expanded, repeats,
          n_items);
  if (flat)
    {
      g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
      double seconds = graphview_layouter_time_flat (layouter, graph, NULL, &error);
      g_assert_no_error (error);
      printf ("plain dot, same flat graph: %.1f ms (once); ratio %.0fx\n", seconds * 1e3,
              seconds * 1e3 / expanded);
    }

  /* 3. A frame with ~5k nodes visible. */
  g_autoptr (PlannerGraph) big = build (208);
  g_autoptr (PlannerPlan) big_plan = megatron (big);
  g_autoptr (GraphviewModel) model = graphview_model_new (big);
  graphview_model_expand_all (model);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  gint64 start = g_get_monotonic_time ();
  g_autoptr (GraphviewLayout) layout = graphview_layouter_layout (layouter, model, NULL, &error);
  g_assert_no_error (error);
  double big_layout = bench_ms_since (start);
  g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
  graphview_renderer_set_layout (renderer, layout);
  graphview_renderer_set_plan (renderer, big_plan);
  GraphviewViewport vp;
  fit (layout, &vp);
  guint frames = MAX (repeats * 4, 10);
  double *f = g_new (double, frames);
  frame_ms (renderer, cr, &vp);
  for (guint r = 0; r < frames; r++)
    f[r] = frame_ms (renderer, cr, &vp);
  printf ("frame, whole graph: %.2f ms (median of %u; %u of %u items visible, scale %.4f, "
          "%dx%d; layout %.0f ms; target 16 ms)\n",
          bench_median (f, frames), frames, visible_items (layout, &vp),
          graphview_model_get_n_items (model), vp.scale, WIDTH, HEIGHT, big_layout);
  /* The same at a zoom where labels and matrices show. */
  vp.scale = 1.0;
  for (guint r = 0; r < frames; r++)
    f[r] = frame_ms (renderer, cr, &vp);
  printf ("frame, zoom 1: %.2f ms (median of %u; %u items visible)\n", bench_median (f, frames),
          frames, visible_items (layout, &vp));

  /* 4. One instance, plain against stable. */
  for (guint others = 0; others <= 20; others += 20)
    {
      g_autoptr (GraphviewModel) m = graphview_model_new (graph);
      for (guint b = 0; b < others; b++)
        graphview_model_set_expanded (m, 0, 2 * b + (2 * b >= 36 ? 3 : 0), TRUE);
      for (int stable = 0; stable <= 1; stable++)
        {
          double unfold, fold, cold;
          one_instance (m, repeats, stable, &unfold, &fold, &cold);
          printf ("layer 37, %u others unfolded, %s: unfold %.2f ms, fold %.2f ms (median of %u); "
                  "first unfold %.1f ms\n",
                  others, stable ? "stable" : "plain", unfold, fold, repeats, cold);
        }
    }

  g_free (f);
  g_free (t);
  cairo_destroy (cr);
  cairo_surface_destroy (surface);
  return 0;
}
