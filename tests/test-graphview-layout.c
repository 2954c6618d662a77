#define G_LOG_DOMAIN "test-graphview-layout"

#include "config.h"

#include <string.h>

#include "graphview-layouter.h"
#include "graphview-model.h"
#include "planner-model.h"
#include "test-util.h"

/* Folding of repeated blocks and the hierarchical dot layout (issue 6). */

static GraphviewLayout *
layout_of (GraphviewLayouter *layouter, GraphviewModel *model)
{
  g_autoptr (GError) error = NULL;
  GraphviewLayout *layout = graphview_layouter_layout (layouter, model, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (layout);
  g_assert_cmpuint (graphview_layout_get_serial (layout), ==, graphview_model_get_serial (model));
  return layout;
}

static void
assert_positions_and_no_overlap (GraphviewModel *model, GraphviewLayout *layout)
{
  guint n = graphview_model_get_n_items (model);
  double width, height;
  graphview_layout_get_bounds (layout, &width, &height);
  g_assert_cmpuint (graphview_layout_get_n_items (layout), ==, n);
  for (guint i = 0; i < n; i++)
    {
      const GraphviewRect *r = graphview_layout_get_item_rect (layout, i);
      g_assert_cmpfloat (r->width, >, 0);
      g_assert_cmpfloat (r->height, >, 0);
      g_assert_cmpfloat (r->x, >=, 0);
      g_assert_cmpfloat (r->y, >=, 0);
      g_assert_cmpfloat (r->x + r->width, <=, width);
      g_assert_cmpfloat (r->y + r->height, <=, height);
      for (guint j = 0; j < i; j++)
        {
          const GraphviewRect *s = graphview_layout_get_item_rect (layout, j);
          if (graphview_rect_intersects (r, s))
            g_error ("items %u and %u overlap: (%g,%g %gx%g) and (%g,%g %gx%g)", i, j, r->x, r->y,
                     r->width, r->height, s->x, s->y, s->width, s->height);
        }
    }
  for (guint e = 0; e < graphview_model_get_n_edges (model); e++)
    {
      guint n_points = 0;
      const double *points = graphview_layout_get_edge_points (layout, e, &n_points);
      g_assert_nonnull (points);
      g_assert_cmpuint (n_points, >=, 4);
      g_assert_cmpuint ((n_points - 1) % 3, ==, 0);
    }
}

static void
test_llama_folds (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);

  g_assert_cmpuint (graphview_model_get_n_runs (model), ==, 1);
  const GraphviewRun *run = graphview_model_get_run (model, 0);
  g_assert_cmpstr (run->prefix, ==, "model.layers");
  g_assert_cmpuint (run->n_blocks, ==, 80);
  g_assert_cmpuint (run->first_label, ==, 0);
  g_assert_cmpuint (run->first_op + 80 * run->ops_per_block, <=, planner_graph_get_n_ops (graph));

  /* One layer block between the embedding and the head. */
  guint n = graphview_model_get_n_items (model);
  guint blocks = 0, before = 0, after = 0;
  for (guint i = 0; i < n; i++)
    {
      const GraphviewItem *item = graphview_model_get_item (model, i);
      const char *name = planner_graph_get_op (graph, item->first_op)->name;
      if (item->kind == GRAPHVIEW_ITEM_BLOCK)
        {
          blocks++;
          g_assert_cmpuint (item->n_blocks, ==, 80);
          g_assert_cmpuint (item->n_ops, ==, 80 * run->ops_per_block);
          g_autofree char *label = graphview_model_dup_item_label (model, i);
          g_assert_cmpstr (label, ==, "model.layers.0-79 x80");
        }
      else if (blocks == 0)
        {
          before++;
          g_assert_true (g_str_has_prefix (name, "model.embed_tokens"));
        }
      else
        {
          after++;
          g_assert_true (g_str_equal (name, "model.norm") || g_str_has_prefix (name, "lm_head"));
        }
    }
  g_assert_cmpuint (blocks, ==, 1);
  g_assert_cmpuint (before, >=, 1);
  g_assert_cmpuint (after, >=, 2);
  g_assert_cmpuint (n, ==, before + 1 + after);

  /* The embedding feeds the block and the block feeds the head. */
  g_assert_cmpint (graphview_model_find_edge (model, before - 1, before), >=, 0);
  g_assert_cmpint (graphview_model_find_edge (model, before, before + 1), >=, 0);
}

static void
test_expand_one (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  const GraphviewRun *run = graphview_model_get_run (model, 0);
  guint folded = graphview_model_get_n_items (model);
  guint serial = graphview_model_get_serial (model);

  graphview_model_set_expanded (model, 0, 40, TRUE);
  g_assert_cmpuint (graphview_model_get_serial (model), >, serial);
  /* Layers 0-39 and 41-79 stay folded; layer 40 shows its ops. */
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, folded + 1 + run->ops_per_block);
  g_autofree char *first = graphview_model_dup_item_label (model, 1);
  g_assert_cmpstr (first, ==, "model.layers.0-39 x40");
  g_autofree char *last = graphview_model_dup_item_label (model, 2 + run->ops_per_block);
  g_assert_cmpstr (last, ==, "model.layers.41-79 x39");
  guint q = planner_graph_find_op (graph, "model.layers.40.self_attn.q_proj");
  guint item = graphview_model_get_item_of_op (model, q);
  g_assert_cmpint (graphview_model_get_item (model, item)->kind, ==, GRAPHVIEW_ITEM_OP);
  g_assert_cmpstr (graphview_model_get_op_label (model, q), ==, "self_attn.q_proj");

  /* Toggling an op of the expanded block folds it back into one block node. */
  g_assert_true (graphview_model_toggle_item (model, item));
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, folded);

  g_assert_cmpuint (graphview_model_expand_matching (model, "model.layers.7"), ==, 1);
  g_assert_true (graphview_model_get_expanded (model, 0, 7));
  g_assert_cmpuint (graphview_model_expand_matching (model, "*.1?.mlp.up_proj"), ==, 10);
  graphview_model_expand_all (model);
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, planner_graph_get_n_ops (graph));
  graphview_model_collapse_all (model);
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, folded);
}

static void
test_small_no_overlap (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("gpt2-tiny", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();

  g_autoptr (GraphviewLayout) folded = layout_of (layouter, model);
  assert_positions_and_no_overlap (model, folded);

  graphview_model_expand_all (model);
  g_assert_cmpuint (graphview_model_get_n_items (model), ==, planner_graph_get_n_ops (graph));
  g_autoptr (GraphviewLayout) expanded = layout_of (layouter, model);
  assert_positions_and_no_overlap (model, expanded);
  /* Every expanded block has its frame, around its ops. */
  const GraphviewRun *run = graphview_model_get_run (model, 0);
  g_assert_cmpuint (graphview_layout_get_n_frames (expanded), ==, run->n_blocks);
  for (guint f = 0; f < graphview_layout_get_n_frames (expanded); f++)
    {
      const GraphviewFrame *frame = graphview_layout_get_frame (expanded, f);
      guint op = run->first_op + frame->block * run->ops_per_block;
      const GraphviewRect *r
          = graphview_layout_get_item_rect (expanded, graphview_model_get_item_of_op (model, op));
      g_assert_true (graphview_rect_intersects (&frame->rect, r));
    }
}

/* Identical layers are laid out once, and every copy is the first one moved. */
static void
test_blocks_reused (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("gpt2", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  graphview_model_expand_all (model);
  g_autoptr (GraphviewLayout) layout = layout_of (layouter, model);
  assert_positions_and_no_overlap (model, layout);

  const GraphviewRun *run = graphview_model_get_run (model, 0);
  g_assert_cmpuint (run->n_blocks, ==, 12);
  /* The embedding group, one layer, the head group, and the skeleton. */
  g_assert_cmpuint (graphview_layouter_get_n_dot_runs (layouter), <=, 4);
  for (guint b = 1; b < run->n_blocks; b++)
    {
      const GraphviewRect *a0 = graphview_layout_get_item_rect (
          layout, graphview_model_get_item_of_op (model, run->first_op));
      const GraphviewRect *b0 = graphview_layout_get_item_rect (
          layout, graphview_model_get_item_of_op (model, run->first_op + b * run->ops_per_block));
      double dx = b0->x - a0->x, dy = b0->y - a0->y;
      g_assert_cmpfloat (dy, >, 0);
      for (guint k = 0; k < run->ops_per_block; k++)
        {
          const GraphviewRect *a = graphview_layout_get_item_rect (
              layout, graphview_model_get_item_of_op (model, run->first_op + k));
          const GraphviewRect *c = graphview_layout_get_item_rect (
              layout,
              graphview_model_get_item_of_op (model, run->first_op + b * run->ops_per_block + k));
          g_assert_cmpfloat_with_epsilon (c->x - a->x, dx, 1e-9);
          g_assert_cmpfloat_with_epsilon (c->y - a->y, dy, 1e-9);
        }
    }

  /* Laying out again reuses every group: only the skeleton runs. */
  guint runs = graphview_layouter_get_n_dot_runs (layouter);
  g_autoptr (GraphviewLayout) again = layout_of (layouter, model);
  g_assert_cmpuint (graphview_layouter_get_n_dot_runs (layouter), ==, runs + 1);
  for (guint i = 0; i < graphview_model_get_n_items (model); i++)
    {
      const GraphviewRect *a = graphview_layout_get_item_rect (layout, i);
      const GraphviewRect *b = graphview_layout_get_item_rect (again, i);
      g_assert_cmpmem (a, sizeof *a, b, sizeof *b);
    }
}

/* A long run of loose ops is laid out in groups of at most GRAPHVIEW_MAX_GROUP (500). */
static void
test_big_group_split (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_graph_new ();
  gint64 shape[] = { 8, 64 };
  int x = planner_graph_add_input (graph, "x", PLANNER_DTYPE_F32, 2, shape, &error);
  g_assert_no_error (error);
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  for (guint i = 0; i < 1200; i++)
    {
      char name[32];
      g_snprintf (name, sizeof name, "act_%c%u", 'a' + i % 3, i);
      guint input = (guint)x;
      int op = planner_graph_add_op (graph, name, i % 2 ? PLANNER_OP_RELU : PLANNER_OP_TANH, &attrs,
                                     &input, 1, 1, NULL, &error);
      g_assert_no_error (error);
      x = (int)planner_graph_op_output (graph, op, 0);
    }
  planner_graph_mark_output (graph, x);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_assert_cmpuint (graphview_model_get_n_runs (model), ==, 0);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GraphviewLayout) layout = layout_of (layouter, model);
  assert_positions_and_no_overlap (model, layout);
  /* Three groups (500, 500, 200) and the skeleton. */
  g_assert_cmpuint (graphview_layouter_get_n_cached (layouter), ==, 3);
  g_assert_cmpuint (graphview_layouter_get_n_dot_runs (layouter), ==, 4);
}

static void
test_cancel (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("gpt2", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  g_autoptr (GCancellable) cancellable = g_cancellable_new ();
  g_cancellable_cancel (cancellable);
  g_autoptr (GError) error = NULL;
  g_autoptr (GraphviewLayout) layout
      = graphview_layouter_layout (layouter, model, cancellable, &error);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_assert_null (layout);
}

static void
async_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  GraphviewLayout **out = user_data;
  g_autoptr (GError) error = NULL;
  *out = graphview_layouter_layout_finish (GRAPHVIEW_LAYOUTER (source), result, &error);
  g_assert_no_error (error);
  g_assert_nonnull (*out);
}

static void
test_async (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-70b", NULL);
  g_autoptr (GraphviewModel) model = graphview_model_new (graph);
  g_autoptr (GraphviewLayouter) layouter = graphview_layouter_new ();
  GraphviewLayout *layout = NULL;
  graphview_layouter_layout_async (layouter, model, NULL, async_done, &layout);
  /* The model may change while the worker runs: the result keeps its serial. */
  guint serial = graphview_model_get_serial (model);
  graphview_model_expand_all (model);
  while (layout == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_cmpuint (graphview_layout_get_serial (layout), ==, serial);
  g_assert_cmpuint (graphview_layout_get_n_items (layout), <, graphview_model_get_n_items (model));
  graphview_layout_unref (layout);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/graphview/model/llama-70b-folds", test_llama_folds);
  g_test_add_func ("/graphview/model/expand-one", test_expand_one);
  g_test_add_func ("/graphview/layout/small-no-overlap", test_small_no_overlap);
  g_test_add_func ("/graphview/layout/blocks-reused", test_blocks_reused);
  g_test_add_func ("/graphview/layout/big-group-split", test_big_group_split);
  g_test_add_func ("/graphview/layout/cancel", test_cancel);
  g_test_add_func ("/graphview/layout/async", test_async);
  return g_test_run ();
}
