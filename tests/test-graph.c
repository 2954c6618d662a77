#define G_LOG_DOMAIN "test-graph"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-graph.h"
#include "test-util.h"

/* The operator graph (semantics.md 1): ops in topological order, one producer and many
 * consumers per tensor, tied parameters as one tensor, refusals that leave the graph as it
 * was. */

typedef struct
{
  PlannerGraph *graph;
  guint x, w1, b1, w2;
  guint fc1, act, fc2, res;
} Mlp;

/* x[8,16] -> fc1 (MatMul + bias, 16 -> 32) -> GeLU -> fc2 (MatMul, 32 -> 16) -> + x */
static void
build_mlp (Mlp *m, PlannerDType dtype)
{
  g_autoptr (GError) error = NULL;
  const gint64 xs[] = { 8, 16 }, w1s[] = { 16, 32 }, b1s[] = { 32 }, w2s[] = { 32, 16 };
  int id;

  m->graph = planner_graph_new ();
  planner_graph_set_name (m->graph, "mlp");
  m->x = (guint)planner_graph_add_input (m->graph, "x", dtype, 2, xs, &error);
  g_assert_no_error (error);
  m->w1 = (guint)planner_graph_add_parameter (m->graph, "fc1.weight", dtype, 2, w1s, &error);
  m->b1 = (guint)planner_graph_add_parameter (m->graph, "fc1.bias", dtype, 1, b1s, &error);
  m->w2 = (guint)planner_graph_add_parameter (m->graph, "fc2.weight", dtype, 2, w2s, &error);
  g_assert_no_error (error);

  id = planner_graph_add_op (m->graph, "fc1", PLANNER_OP_MATMUL, NULL,
                             (guint[]){ m->x, m->w1, m->b1 }, 3, 1, NULL, &error);
  g_assert_no_error (error);
  m->fc1 = (guint)id;
  id = planner_graph_add_op (m->graph, "act", PLANNER_OP_GELU, NULL,
                             (guint[]){ planner_graph_op_output (m->graph, m->fc1, 0) }, 1, 1, NULL,
                             &error);
  g_assert_no_error (error);
  m->act = (guint)id;
  id = planner_graph_add_op (m->graph, "fc2", PLANNER_OP_MATMUL, NULL,
                             (guint[]){ planner_graph_op_output (m->graph, m->act, 0), m->w2 }, 2,
                             1, NULL, &error);
  g_assert_no_error (error);
  m->fc2 = (guint)id;
  id = planner_graph_add_op (m->graph, "residual", PLANNER_OP_ADD, NULL,
                             (guint[]){ planner_graph_op_output (m->graph, m->fc2, 0), m->x }, 2, 1,
                             NULL, &error);
  g_assert_no_error (error);
  m->res = (guint)id;
  planner_graph_mark_output (m->graph, planner_graph_op_output (m->graph, m->res, 0));
}

static void
test_build (void)
{
  Mlp m;
  g_autoptr (GError) error = NULL;

  build_mlp (&m, PLANNER_DTYPE_F32);
  g_autoptr (PlannerGraph) g = m.graph;

  g_assert_true (planner_graph_check (g, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (planner_graph_get_name (g), ==, "mlp");
  g_assert_cmpuint (planner_graph_get_n_ops (g), ==, 4);
  /* x, 3 parameters, 4 activations. */
  g_assert_cmpuint (planner_graph_get_n_tensors (g), ==, 8);

  /* Insertion order is the topological index. */
  g_assert_cmpint (planner_graph_find_op (g, "fc1"), ==, 0);
  g_assert_cmpint (planner_graph_find_op (g, "act"), ==, 1);
  g_assert_cmpint (planner_graph_find_op (g, "fc2"), ==, 2);
  g_assert_cmpint (planner_graph_find_op (g, "residual"), ==, 3);
  g_assert_cmpint (planner_graph_find_op (g, "nope"), ==, -1);

  /* Single outputs are named after their op. */
  int t = planner_graph_find_tensor (g, "fc1");
  g_assert_cmpint (t, >=, 0);
  const PlannerTensor *fc1_out = planner_graph_get_tensor (g, (guint)t);
  g_assert_cmpint (fc1_out->producer, ==, 0);
  g_assert_cmpuint (fc1_out->kind, ==, PLANNER_TENSOR_ACTIVATION);
  g_assert_cmpuint (fc1_out->rank, ==, 2);
  g_assert_cmpint (fc1_out->shape[0], ==, 8);
  g_assert_cmpint (fc1_out->shape[1], ==, 32);
  g_assert_cmpint (planner_graph_find_tensor (g, "fc1.weight"), ==, (int)m.w1);

  /* x has two consumers, in consumer topological order, with their input slots. */
  const PlannerTensor *x = planner_graph_get_tensor (g, m.x);
  g_assert_cmpuint (x->kind, ==, PLANNER_TENSOR_INPUT);
  g_assert_cmpint (x->producer, ==, -1);
  g_assert_cmpuint (x->consumers->len, ==, 2);
  PlannerUse u0 = g_array_index (x->consumers, PlannerUse, 0);
  PlannerUse u1 = g_array_index (x->consumers, PlannerUse, 1);
  g_assert_cmpuint (u0.op, ==, m.fc1);
  g_assert_cmpuint (u0.slot, ==, 0);
  g_assert_cmpuint (u1.op, ==, m.res);
  g_assert_cmpuint (u1.slot, ==, 1);

  /* Edges: every op input is a tensor produced earlier or an input/parameter. */
  for (guint i = 0; i < planner_graph_get_n_ops (g); i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      for (guint k = 0; k < op->n_inputs; k++)
        g_assert_cmpint (planner_graph_get_tensor (g, op->inputs[k])->producer, <, (int)i);
      for (guint k = 0; k < op->n_outputs; k++)
        {
          const PlannerTensor *o = planner_graph_get_tensor (g, op->outputs[k]);
          g_assert_cmpint (o->producer, ==, (int)i);
          g_assert_cmpuint (o->producer_slot, ==, k);
        }
    }

  const GArray *outputs = planner_graph_get_outputs (g);
  g_assert_cmpuint (outputs->len, ==, 1);
  g_assert_cmpuint (g_array_index (outputs, guint, 0), ==, planner_graph_op_output (g, m.res, 0));
  g_assert_true (planner_graph_get_tensor (g, g_array_index (outputs, guint, 0))->is_output);
  /* Marking twice changes nothing. */
  planner_graph_mark_output (g, g_array_index (outputs, guint, 0));
  g_assert_cmpuint (planner_graph_get_outputs (g)->len, ==, 1);
}

static void
test_totals (void)
{
  Mlp m;
  build_mlp (&m, PLANNER_DTYPE_F32);
  g_autoptr (PlannerGraph) g = m.graph;

  /* 16*32 + 32 + 32*16 parameters of 4 bytes. */
  g_assert_cmpuint (planner_graph_get_parameter_count (g), ==, 1056);
  g_assert_cmpuint (planner_graph_get_parameter_bytes (g), ==, 4224);
  /* fc1 2*8*16*32 = 8192, GeLU 8 per element * 256 = 2048, fc2 2*8*32*16 = 8192,
   * Add 1 per element * 128 = 128. */
  g_assert_cmpfloat (planner_graph_get_flops (g), ==, 8192 + 2048 + 8192 + 128);
  g_assert_cmpuint (planner_tensor_numel (planner_graph_get_tensor (g, m.w1)), ==, 512);
  g_assert_cmpuint (planner_tensor_bytes (planner_graph_get_tensor (g, m.w1)), ==, 2048);

  Mlp h;
  build_mlp (&h, PLANNER_DTYPE_BF16);
  g_autoptr (PlannerGraph) gh = h.graph;
  g_assert_cmpuint (planner_graph_get_parameter_count (gh), ==, 1056);
  g_assert_cmpuint (planner_graph_get_parameter_bytes (gh), ==, 2112);
  /* Activations compute in the dtype of their inputs. */
  g_assert_cmpuint (planner_graph_get_tensor (gh, planner_graph_op_output (gh, h.act, 0))->dtype,
                    ==, PLANNER_DTYPE_BF16);
}

/* A tied embedding and lm_head share one parameter tensor: counted once, two consumers. */
static void
test_tied_parameter (void)
{
  g_autoptr (PlannerGraph) g = planner_graph_new ();
  g_autoptr (GError) error = NULL;
  const gint64 ids_shape[] = { 2, 4 }, table_shape[] = { 50, 8 };
  PlannerOpAttrs attrs;

  int ids = planner_graph_add_input (g, "input_ids", PLANNER_DTYPE_I64, 2, ids_shape, &error);
  int table
      = planner_graph_add_parameter (g, "wte.weight", PLANNER_DTYPE_F32, 2, table_shape, &error);
  g_assert_no_error (error);
  int emb = planner_graph_add_op (g, "wte", PLANNER_OP_EMBEDDING, NULL,
                                  (guint[]){ (guint)ids, (guint)table }, 2, 1, NULL, &error);
  g_assert_no_error (error);
  planner_op_attrs_init (&attrs);
  attrs.transpose_b = TRUE;
  int head = planner_graph_add_op (
      g, "lm_head", PLANNER_OP_MATMUL, &attrs,
      (guint[]){ planner_graph_op_output (g, (guint)emb, 0), (guint)table }, 2, 1, NULL, &error);
  g_assert_no_error (error);
  planner_graph_mark_output (g, planner_graph_op_output (g, (guint)head, 0));
  g_assert_true (planner_graph_check (g, &error));
  g_assert_no_error (error);

  const PlannerTensor *t = planner_graph_get_tensor (g, (guint)table);
  g_assert_cmpuint (t->consumers->len, ==, 2);
  g_assert_cmpuint (planner_graph_get_parameter_count (g), ==, 400);
  const PlannerTensor *logits
      = planner_graph_get_tensor (g, planner_graph_op_output (g, (guint)head, 0));
  g_assert_cmpuint (logits->rank, ==, 3);
  g_assert_cmpint (logits->shape[2], ==, 50);
  /* The embedding output takes the table's dtype, not the ids'. */
  g_assert_cmpuint (planner_graph_get_tensor (g, planner_graph_op_output (g, (guint)emb, 0))->dtype,
                    ==, PLANNER_DTYPE_F32);
}

static void
test_split_outputs (void)
{
  g_autoptr (PlannerGraph) g = planner_graph_new ();
  g_autoptr (GError) error = NULL;
  const gint64 shape[] = { 4, 12 };
  PlannerOpAttrs attrs;

  int x = planner_graph_add_input (g, "x", PLANNER_DTYPE_F32, 2, shape, &error);
  planner_op_attrs_init (&attrs);
  attrs.axis = 1;
  attrs.n_ints = 3;
  attrs.ints[0] = 4;
  attrs.ints[1] = 4;
  attrs.ints[2] = 4;
  int op = planner_graph_add_op (g, "qkv", PLANNER_OP_SPLIT, &attrs, (guint[]){ (guint)x }, 1, 3,
                                 NULL, &error);
  g_assert_no_error (error);
  /* Unnamed outputs of a multi-output op are NAME:i. */
  g_assert_cmpint (planner_graph_find_tensor (g, "qkv:0"), ==,
                   (int)planner_graph_op_output (g, (guint)op, 0));
  g_assert_cmpint (planner_graph_find_tensor (g, "qkv:2"), ==,
                   (int)planner_graph_op_output (g, (guint)op, 2));
  const PlannerTensor *t = planner_graph_get_tensor (g, planner_graph_op_output (g, (guint)op, 1));
  g_assert_cmpuint (t->producer_slot, ==, 1);
  g_assert_cmpint (t->shape[1], ==, 4);

  const char *const names[] = { "q", "k", "v" };
  int op2 = planner_graph_add_op (g, "qkv2", PLANNER_OP_SPLIT, &attrs, (guint[]){ (guint)x }, 1, 3,
                                  names, &error);
  g_assert_no_error (error);
  g_assert_cmpint (planner_graph_find_tensor (g, "v"), ==,
                   (int)planner_graph_op_output (g, (guint)op2, 2));
}

static void
test_hash_equal (void)
{
  Mlp a, b, c;
  build_mlp (&a, PLANNER_DTYPE_F32);
  build_mlp (&b, PLANNER_DTYPE_F32);
  build_mlp (&c, PLANNER_DTYPE_BF16);
  g_autoptr (PlannerGraph) ga = a.graph;
  g_autoptr (PlannerGraph) gb = b.graph;
  g_autoptr (PlannerGraph) gc = c.graph;

  g_autofree char *ha = planner_graph_hash (ga);
  g_autofree char *hb = planner_graph_hash (gb);
  g_autofree char *hc = planner_graph_hash (gc);
  g_assert_cmpuint (strlen (ha), ==, 64);
  g_assert_cmpstr (ha, ==, hb);
  g_assert_cmpstr (ha, !=, hc);
  g_assert_true (planner_graph_equal (ga, gb));
  g_assert_false (planner_graph_equal (ga, gc));

  /* One more output marked is another graph. */
  planner_graph_mark_output (gb, planner_graph_op_output (gb, b.act, 0));
  g_assert_false (planner_graph_equal (ga, gb));
}

static void
test_bad_input (void)
{
  Mlp m;
  g_autoptr (GError) error = NULL;
  build_mlp (&m, PLANNER_DTYPE_F32);
  g_autoptr (PlannerGraph) g = m.graph;
  g_autofree char *before = planner_graph_hash (g);
  guint n_tensors = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);

  /* Negative and zero dims. */
  g_assert_cmpint (
      planner_graph_add_input (g, "z", PLANNER_DTYPE_F32, 2, (gint64[]){ 4, 0 }, &error), ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH,
                          "tensor z: dim 1 is 0; dims must be > 0");
  g_clear_error (&error);
  g_assert_cmpint (
      planner_graph_add_parameter (g, "n", PLANNER_DTYPE_F32, 1, (gint64[]){ -8 }, &error), ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH, "tensor n: dim 0 is -8");
  g_clear_error (&error);

  /* Names are unique. */
  g_assert_cmpint (planner_graph_add_input (g, "x", PLANNER_DTYPE_F32, 1, (gint64[]){ 4 }, &error),
                   ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH, "tensor x is defined twice");
  g_clear_error (&error);
  g_assert_cmpint (planner_graph_add_op (g, "act", PLANNER_OP_RELU, NULL, (guint[]){ m.x }, 1, 1,
                                         (const char *[]){ "other" }, &error),
                   ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH,
                          "op name 'act' is empty or used twice");
  g_clear_error (&error);

  /* A dangling input id. */
  g_assert_cmpint (
      planner_graph_add_op (g, "bad", PLANNER_OP_RELU, NULL, (guint[]){ 999 }, 1, 1, NULL, &error),
      ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH,
                          "refers to tensor #999, which does not exist");
  g_clear_error (&error);

  /* Shapes that do not fit the rule: x[8,16] @ fc2.weight[32,16]. */
  g_assert_cmpint (planner_graph_add_op (g, "bad_mm", PLANNER_OP_MATMUL, NULL,
                                         (guint[]){ m.x, m.w2 }, 2, 1, NULL, &error),
                   ==, -1);
  test_util_assert_error (
      error, PLANNER_ERROR_SHAPE_MISMATCH,
      "bad_mm (MatMul): dim 1 of input 0 (size 16) does not match dim 0 of input 1 "
      "(size 32)");
  g_clear_error (&error);

  /* An output name that is taken is refused and nothing is half-added. */
  g_assert_cmpint (planner_graph_add_op (g, "relu", PLANNER_OP_RELU, NULL, (guint[]){ m.x }, 1, 1,
                                         (const char *[]){ "fc1.weight" }, &error),
                   ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH, "tensor fc1.weight is defined twice");
  g_clear_error (&error);
  PlannerOpAttrs attrs;
  planner_op_attrs_init (&attrs);
  attrs.axis = 1;
  attrs.n_ints = 2;
  attrs.ints[0] = 8;
  attrs.ints[1] = 8;
  g_assert_cmpint (planner_graph_add_op (g, "halves", PLANNER_OP_SPLIT, &attrs, (guint[]){ m.x }, 1,
                                         2, (const char *[]){ "left", "x" }, &error),
                   ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH, "tensor x is defined twice");
  g_clear_error (&error);
  g_assert_cmpint (planner_graph_find_tensor (g, "left"), ==, -1);

  /* Embedding ids must be integers. */
  g_assert_cmpint (planner_graph_add_op (g, "emb", PLANNER_OP_EMBEDDING, NULL,
                                         (guint[]){ m.x, m.w1 }, 2, 1, NULL, &error),
                   ==, -1);
  test_util_assert_error (error, PLANNER_ERROR_SHAPE_MISMATCH,
                          "emb (Embedding): the ids (input 0) must be i64");
  g_clear_error (&error);

  /* None of the refusals changed the graph. */
  g_autofree char *after = planner_graph_hash (g);
  g_assert_cmpstr (before, ==, after);
  g_assert_cmpuint (planner_graph_get_n_tensors (g), ==, n_tensors);
  g_assert_cmpuint (planner_graph_get_n_ops (g), ==, n_ops);
  g_assert_true (planner_graph_check (g, NULL));
}

static void
test_check (void)
{
  g_autoptr (GError) error = NULL;

  g_autoptr (PlannerGraph) empty = planner_graph_new ();
  g_assert_false (planner_graph_check (empty, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH, "the graph has no ops");
  g_clear_error (&error);

  /* No output marked. */
  g_autoptr (PlannerGraph) g = planner_graph_new ();
  int x = planner_graph_add_input (g, "x", PLANNER_DTYPE_F32, 1, (gint64[]){ 4 }, NULL);
  int op = planner_graph_add_op (g, "relu", PLANNER_OP_RELU, NULL, (guint[]){ (guint)x }, 1, 1,
                                 NULL, NULL);
  g_assert_cmpint (op, ==, 0);
  g_assert_false (planner_graph_check (g, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH, "marks no output");
  g_clear_error (&error);
  planner_graph_mark_output (g, planner_graph_op_output (g, 0, 0));
  g_assert_true (planner_graph_check (g, NULL));

  /* A parameter no op uses. */
  g_assert_cmpint (
      planner_graph_add_parameter (g, "unused.weight", PLANNER_DTYPE_F32, 1, (gint64[]){ 4 }, NULL),
      >=, 0);
  g_assert_false (planner_graph_check (g, &error));
  test_util_assert_error (error, PLANNER_ERROR_INVALID_GRAPH,
                          "parameter unused.weight is used by no op");
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/planner/graph/build", test_build);
  g_test_add_func ("/planner/graph/totals", test_totals);
  g_test_add_func ("/planner/graph/tied-parameter", test_tied_parameter);
  g_test_add_func ("/planner/graph/split-outputs", test_split_outputs);
  g_test_add_func ("/planner/graph/hash-equal", test_hash_equal);
  g_test_add_func ("/planner/graph/bad-input", test_bad_input);
  g_test_add_func ("/planner/graph/check", test_check);

  return g_test_run ();
}
