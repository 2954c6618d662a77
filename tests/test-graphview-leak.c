#define G_LOG_DOMAIN "test-graphview-leak"

#include "config.h"

#include <malloc.h>

#include "graphview-layouter.h"
#include "graphview-renderer.h"
#include "planner-model.h"

/* Expanding and collapsing blocks lays out again each time (the groups come from the cache,
 * the skeleton is new): every Graphviz graph must be freed (gvFreeLayout, agclose), and so
 * must every layout. 200 cycles must not grow the heap. Run it under valgrind with
 * `meson test -C BUILD --setup graphview-valgrind --suite graphview leak` for the full check. */

#define CYCLES 200
#define WARM_UP 20

static gsize
heap_in_use (void)
{
  struct mallinfo2 info = mallinfo2 ();
  return info.uordblks + info.hblkhd;
}

static void
cycle (GraphviewModel *model, GraphviewLayouter *layouter, GraphviewRenderer *renderer, cairo_t *cr,
       guint i)
{
  const GraphviewRun *run = graphview_model_get_run (model, 0);
  for (guint pass = 0; pass < 2; pass++)
    {
      if (pass == 0)
        {
          if (i % 3 == 0)
            graphview_model_expand_all (model);
          else
            graphview_model_set_expanded (model, 0, i % run->n_blocks, TRUE);
        }
      else
        graphview_model_collapse_all (model);
      g_autoptr (GError) error = NULL;
      g_autoptr (GraphviewLayout) layout
          = graphview_layouter_layout (layouter, model, NULL, &error);
      g_assert_no_error (error);
      graphview_renderer_set_layout (renderer, layout);
      GraphviewViewport vp = { 0.5, 0, 0, 64, 64 };
      graphview_renderer_draw (renderer, cr, &vp);
    }
}

static void
test_expand_collapse (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_zoo_build ("gpt2-tiny", NULL, &error);
  g_assert_no_error (error);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewRenderer) renderer = graphview_renderer_new (model);
  cairo_surface_t *surface = cairo_image_surface_create (CAIRO_FORMAT_RGB24, 64, 64);
  cairo_t *cr = cairo_create (surface);

  gsize start = 0;
  guint runs = 0;
  for (guint i = 0; i < CYCLES; i++)
    {
      if (i == WARM_UP)
        {
          malloc_trim (0);
          start = heap_in_use ();
          runs = graphview_layouter_get_n_dot_runs (layouter);
        }
      cycle (model, layouter, renderer, cr, i);
    }
  graphview_renderer_set_layout (renderer, NULL);
  malloc_trim (0);
  gsize end = heap_in_use ();
  guint dot_runs = graphview_layouter_get_n_dot_runs (layouter) - runs;
  g_test_message ("heap in use after %u cycles: %zu, after %u more: %zu; dot ran %u times", WARM_UP,
                  start, CYCLES - WARM_UP, end, dot_runs);
  /* Graphviz really ran in every cycle (two skeletons each), and left nothing behind:
   * allow a little for allocator slack, far below one leaked layout per cycle. */
  g_assert_cmpuint (dot_runs, >=, 2 * (CYCLES - WARM_UP));
  g_assert_cmpint ((gssize)end - (gssize)start, <, 64 * 1024);

  cairo_destroy (cr);
  cairo_surface_destroy (surface);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/graphview/leak/expand-collapse", test_expand_collapse);
  return g_test_run ();
}
