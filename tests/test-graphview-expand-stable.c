#define G_LOG_DOMAIN "test-graphview-expand-stable"

#include "config.h"

#include <math.h>

#include "graphview-layouter.h"
#include "graphview-model.h"
#include "test-util.h"

/* Stable expansion (graphview/README.md, "Stable expansion"; issue 15 item 4): unfolding one
 * instance of LLaMA-2-70B's 80 layers keeps every other group where it was.
 *
 * The expectations come from the folded layout and from the boxes the layouts report, never
 * from the layouter's own shift: folded, the graph is embedding ops, one block node
 * "model.layers.0-79 x80" and the head. Unfolding layer 37 splits the block node into
 * "0-36 x37" (in the old node's place), layer 37's frame and "38-79 x42", stacked in that
 * order 36 points apart (dot's ranksep of 0.5 in), so everything below moves down by the
 * frame's height, rounded up to a whole point, plus the second block node's height plus two
 * gaps. */

#define GAP 36.0

static GraphviewLayout *
stable_layout (GraphviewLayouter *layouter, GraphviewModel *model, GraphviewLayout *previous)
{
  g_autoptr (GError) error = NULL;
  GraphviewLayout *layout
      = graphview_layouter_layout_stable (layouter, model, previous, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (layout);
  g_assert_cmpuint (graphview_layout_get_serial (layout), ==, graphview_model_get_serial (model));
  g_assert_cmpuint (graphview_layout_get_n_items (layout), ==, graphview_model_get_n_items (model));
  return layout;
}

static int
block_item (GraphviewModel *model, guint first_block)
{
  for (guint i = 0; i < graphview_model_get_n_items (model); i++)
    {
      const GraphviewItem *it = graphview_model_get_item (model, i);
      if (it->kind == GRAPHVIEW_ITEM_BLOCK && it->first_block == first_block)
        return (int)i;
    }
  return -1;
}

static void
assert_rect_equal (const GraphviewRect *a, const GraphviewRect *b, double dx, double dy,
                   const char *what, guint index)
{
  if (a->x + dx != b->x || a->y + dy != b->y || a->width != b->width || a->height != b->height)
    g_error ("%s %u: expected (%g,%g %gx%g) moved by (%g,%g), got (%g,%g %gx%g)", what, index, a->x,
             a->y, a->width, a->height, dx, dy, b->x, b->y, b->width, b->height);
}

static void
assert_no_overlap (GraphviewLayout *layout)
{
  guint n = graphview_layout_get_n_items (layout);
  double width, height;
  graphview_layout_get_bounds (layout, &width, &height);
  for (guint i = 0; i < n; i++)
    {
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      g_assert_cmpfloat (r->x, >=, 0);
      g_assert_cmpfloat (r->y, >=, 0);
      g_assert_cmpfloat (r->x + r->width, <=, width);
      g_assert_cmpfloat (r->y + r->height, <=, height);
      for (guint j = 0; j < i; j++)
        if (graphview_rect_intersects (r, graphview_layout_get_item_rect (layout, j)))
          g_error ("items %u and %u overlap", i, j);
    }
}

/* Every item rect of @a equals @b's. */
static void
assert_same_layout (GraphviewLayout *a, GraphviewLayout *b)
{
  g_assert_cmpuint (graphview_layout_get_n_items (a), ==, graphview_layout_get_n_items (b));
  for (guint i = 0; i < graphview_layout_get_n_items (a); i++)
    assert_rect_equal (graphview_layout_get_item_rect (a, i), graphview_layout_get_item_rect (b, i),
                       0, 0, "item", i);
  double wa, ha, wb, hb;
  graphview_layout_get_bounds (a, &wa, &ha);
  graphview_layout_get_bounds (b, &wb, &hb);
  g_assert_cmpfloat_with_epsilon (wa, wb, 1e-9);
  g_assert_cmpfloat_with_epsilon (ha, hb, 1e-9);
  g_assert_cmpuint (graphview_layout_get_n_frames (a), ==, graphview_layout_get_n_frames (b));
}

static void
test_llama_layer_37 (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  const GraphviewRun *run = graphview_model_get_run (model, 0);
  g_assert_cmpuint (run->n_blocks, ==, 80);

  g_autoptr (GraphviewLayout) folded = stable_layout (layouter, model, NULL);
  g_assert_false (graphview_layout_is_stable (folded));
  guint n0 = graphview_model_get_n_items (model);
  int b = block_item (model, 0);
  g_assert_cmpint (b, >, 0);
  g_assert_cmpint (b, <, (int)n0 - 1);
  GraphviewRect old_block = *graphview_layout_get_item_rect (folded, b);
  double w0, h0;
  graphview_layout_get_bounds (folded, &w0, &h0);

  g_assert_cmpuint (graphview_model_expand_matching (model, "model.layers.37"), ==, 1);
  guint runs_before = graphview_layouter_get_n_dot_runs (layouter);
  g_autoptr (GraphviewLayout) open = stable_layout (layouter, model, folded);
  g_assert_true (graphview_layout_is_stable (open));
  /* Only layer 37's own group ran dot: no skeleton. */
  g_assert_cmpuint (graphview_layouter_get_n_dot_runs (layouter) - runs_before, ==, 1);
  guint n1 = graphview_model_get_n_items (model);
  g_assert_cmpuint (n1, ==, n0 + 1 + run->ops_per_block);
  assert_no_overlap (open);

  /* The pieces: 0-36 x37 where 0-79 x80 was, layer 37's ops, 38-79 x42. */
  g_assert_cmpint (block_item (model, 0), ==, b);
  int rest = block_item (model, 38);
  g_assert_cmpint (rest, ==, b + 1 + (int)run->ops_per_block);
  g_autofree char *rest_label = graphview_model_dup_item_label (model, rest);
  g_assert_cmpstr (rest_label, ==, "model.layers.38-79 x42");
  g_assert_cmpuint (graphview_layout_get_n_frames (open), ==, 1);
  const GraphviewFrame *frame = graphview_layout_get_frame (open, 0);
  g_assert_cmpuint (frame->block, ==, 37);
  const GraphviewRect *rest_rect = graphview_layout_get_item_rect (open, rest);

  /* The room layer 37 takes, from the boxes alone. */
  double shift = GAP + ceil (frame->rect.height) + GAP + rest_rect->height;
  g_test_message ("frame %gx%g, block node %gx%g, shift %g", frame->rect.width, frame->rect.height,
                  rest_rect->width, rest_rect->height, shift);
  g_assert_cmpfloat (shift, >, old_block.height + 2 * GAP);
  double w1, h1;
  graphview_layout_get_bounds (open, &w1, &h1);
  g_assert_cmpfloat_with_epsilon (h1 - h0, shift, 1e-9);
  g_assert_cmpfloat (w1, >=, w0);

  /* Above: the same boxes. Below: the same x, moved down by the shift. */
  for (guint i = 0; i < (guint)b; i++)
    assert_rect_equal (graphview_layout_get_item_rect (folded, i),
                       graphview_layout_get_item_rect (open, i), 0, 0, "item above", i);
  for (guint i = b + 1; i < n0; i++)
    assert_rect_equal (graphview_layout_get_item_rect (folded, i),
                       graphview_layout_get_item_rect (open, i + (n1 - n0)), 0, shift, "item below",
                       i);
  assert_rect_equal (&old_block, graphview_layout_get_item_rect (open, b), 0, 0, "block node", b);
  assert_rect_equal (&old_block, rest_rect, 0, shift, "block node", rest);
  /* The frame right under 0-36, centred on the block nodes' middle (or kept in the margin). */
  g_assert_cmpfloat (frame->rect.y, ==, old_block.y + old_block.height + GAP);
  double centre = old_block.x + old_block.width / 2;
  if (frame->rect.x > 24)
    g_assert_cmpfloat (fabs (frame->rect.x + frame->rect.width / 2 - centre), <=, 0.5);
  /* Inside the frame: the same picture as dot's own layout of this folding, moved. */
  g_autoptr (GraphviewLayout) fresh = stable_layout (layouter, model, NULL);
  g_assert_false (graphview_layout_is_stable (fresh));
  const GraphviewRect *fresh_frame = &graphview_layout_get_frame (fresh, 0)->rect;
  for (guint k = 0; k < run->ops_per_block; k++)
    assert_rect_equal (graphview_layout_get_item_rect (fresh, b + 1 + k),
                       graphview_layout_get_item_rect (open, b + 1 + k),
                       frame->rect.x - fresh_frame->x, frame->rect.y - fresh_frame->y, "layer op",
                       b + 1 + k);

  /* A click on 38-79 unfolds layer 38 under 37: all above stays, 39-79 and the head move by
   * layer 38's frame and one gap (the block node is already there). */
  g_assert_true (graphview_model_toggle_item (model, rest));
  runs_before = graphview_layouter_get_n_dot_runs (layouter);
  g_autoptr (GraphviewLayout) two = stable_layout (layouter, model, open);
  g_assert_true (graphview_layout_is_stable (two));
  g_assert_cmpuint (graphview_layouter_get_n_dot_runs (layouter), ==, runs_before);
  assert_no_overlap (two);
  guint n2 = graphview_model_get_n_items (model);
  g_assert_cmpuint (graphview_layout_get_n_frames (two), ==, 2);
  double shift2 = ceil (graphview_layout_get_frame (two, 1)->rect.height) + GAP;
  for (guint i = 0; i < (guint)rest; i++)
    assert_rect_equal (graphview_layout_get_item_rect (open, i),
                       graphview_layout_get_item_rect (two, i), 0, 0, "item above", i);
  for (guint i = rest; i < n1; i++)
    assert_rect_equal (graphview_layout_get_item_rect (open, i),
                       graphview_layout_get_item_rect (two, i + (n2 - n1)), 0, shift2, "item below",
                       i);

  /* Folding back restores each earlier layout exactly. */
  graphview_model_set_expanded (model, 0, 38, FALSE);
  g_autoptr (GraphviewLayout) back = stable_layout (layouter, model, two);
  g_assert_true (graphview_layout_is_stable (back));
  assert_same_layout (open, back);
  graphview_model_set_expanded (model, 0, 37, FALSE);
  g_autoptr (GraphviewLayout) closed = stable_layout (layouter, model, back);
  g_assert_true (graphview_layout_is_stable (closed));
  assert_same_layout (folded, closed);
  g_assert_cmpuint (graphview_layout_get_n_frames (closed), ==, 0);
}

/* Thirty random unfolds and folds, each laid out from the one before: never an overlap, and
 * the run stays one column 36 points apart, so the places depend only on the folding, not
 * on the way there: the last layout equals the one reached by unfolding the same layers
 * from the bottom up, and folding everything gives the folded layout back. */
static void
test_random_path (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewLayout) folded = stable_layout (layouter, model, NULL);
  GraphviewLayout *layout = graphview_layout_ref (folded);
  g_autoptr (GRand) rand = g_rand_new_with_seed (15);
  for (guint step = 0; step < 30; step++)
    {
      guint block = g_rand_int_range (rand, 0, 80);
      graphview_model_set_expanded (model, 0, block,
                                    !graphview_model_get_expanded (model, 0, block));
      GraphviewLayout *next = stable_layout (layouter, model, layout);
      g_assert_true (graphview_layout_is_stable (next));
      assert_no_overlap (next);
      graphview_layout_unref (layout);
      layout = next;
    }
  g_test_message ("after 30 steps: %u layers unfolded, %u items",
                  graphview_layout_get_n_frames (layout), graphview_layout_get_n_items (layout));
  g_assert_cmpuint (graphview_layout_get_n_frames (layout), >=, 5);
  /* The same folding reached another way: its layers unfolded from the bottom up. */
  g_autoptr (GraphviewModel) other = graphview_model_new (graph);
  g_autoptr (GraphviewLayout) start = stable_layout (layouter, other, NULL);
  GraphviewLayout *replay = graphview_layout_ref (start);
  for (guint b = 80; b-- > 0;)
    if (graphview_model_get_expanded (model, 0, b))
      {
        graphview_model_set_expanded (other, 0, b, TRUE);
        GraphviewLayout *next = stable_layout (layouter, other, replay);
        g_assert_true (graphview_layout_is_stable (next));
        graphview_layout_unref (replay);
        replay = next;
      }
  assert_same_layout (replay, layout);
  graphview_layout_unref (replay);
  /* Folding everything at once is dot's layout again: the folded one. */
  graphview_model_collapse_all (model);
  g_autoptr (GraphviewLayout) closed = stable_layout (layouter, model, layout);
  g_assert_false (graphview_layout_is_stable (closed));
  assert_same_layout (folded, closed);
  graphview_layout_unref (layout);
}

/* Several blocks at once (Expand All, a glob) get dot's layout, the CLI's. */
static void
test_many_at_once (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model_sized ("llama-70b", 6, 0);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewLayout) folded = stable_layout (layouter, model, NULL);
  graphview_model_expand_all (model);
  g_autoptr (GraphviewLayout) all = stable_layout (layouter, model, folded);
  g_assert_false (graphview_layout_is_stable (all));
  g_autoptr (GraphviewLayout) plain = stable_layout (layouter, model, NULL);
  assert_same_layout (plain, all);
}

/* A layout of other items (another graph) is no base: dot places everything. */
static void
test_other_graph (void)
{
  g_autoptr (PlannerGraph) llama = test_util_model_sized ("llama-70b", 4, 0);
  g_autoptr (PlannerGraph) gpt2 = test_util_model ("gpt2", NULL);
  g_autoptr (GraphviewModel) a = graphview_model_new (llama);
  g_autoptr (GraphviewModel) b = graphview_model_new (gpt2);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewLayout) la = stable_layout (layouter, a, NULL);
  g_autoptr (GraphviewLayout) lb = stable_layout (layouter, b, la);
  g_assert_false (graphview_layout_is_stable (lb));
  g_autoptr (GraphviewLayout) plain = stable_layout (layouter, b, NULL);
  assert_same_layout (plain, lb);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/graphview/expand-stable/llama-layer-37", test_llama_layer_37);
  g_test_add_func ("/graphview/expand-stable/random-path", test_random_path);
  g_test_add_func ("/graphview/expand-stable/many-at-once", test_many_at_once);
  g_test_add_func ("/graphview/expand-stable/other-graph", test_other_graph);
  return g_test_run ();
}
