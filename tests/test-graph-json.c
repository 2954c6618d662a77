#define G_LOG_DOMAIN "test-graph-json"

#include "config.h"

#include <string.h>

#include <glib/gstdio.h>

#include "planner-error.h"
#include "planner-model.h"
#include "test-util.h"

/* Graph JSON: write -> read gives an equal graph; bad files are refused, never crash. */

/* Zoo graphs at sequence length 32 (the mlp has none). */
static PlannerGraph *
zoo (const char *name, gint64 layers)
{
  return test_util_model_sized (name, layers, g_str_equal (name, "mlp") ? 0 : 32);
}

static void
assert_roundtrip (PlannerGraph *graph)
{
  g_autofree char *text = planner_graph_to_json (graph);
  g_autofree char *again_text = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) again = planner_graph_from_json (text, &error);

  g_assert_no_error (error);
  g_assert_true (planner_graph_equal (graph, again));
  g_assert_cmpuint (planner_graph_get_parameter_count (again), ==,
                    planner_graph_get_parameter_count (graph));
  g_assert_cmpstr (planner_graph_get_name (again), ==, planner_graph_get_name (graph));
  g_assert_cmpstr (planner_graph_get_source (again), ==, planner_graph_get_source (graph));
  /* The writer is a function of the graph alone: byte-identical the second time. */
  again_text = planner_graph_to_json (again);
  g_assert_cmpstr (again_text, ==, text);
}

static void
test_roundtrip (gconstpointer data)
{
  g_autoptr (PlannerGraph) graph = zoo (data, 0);

  assert_roundtrip (graph);
}

/* One layer of every family: every attribute kind the importer uses goes through. */
static void
test_roundtrip_families (void)
{
  const char *const names[] = { "gpt2", "llama-70b", "qwen2", "bert", "mistral" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autoptr (PlannerGraph) graph = zoo (names[i], 1);

      assert_roundtrip (graph);
    }
}

static void
test_format (void)
{
  g_autoptr (PlannerGraph) qwen2 = zoo ("qwen2", 1);
  g_autoptr (PlannerGraph) tiny = zoo ("gpt2-tiny", 0);
  g_autofree char *text = planner_graph_to_json (qwen2);
  g_autofree char *tiny_text = planner_graph_to_json (tiny);

  g_assert_true (g_str_has_prefix (text,
                                   "{\n  \"shardscope_graph\": 1,\n  \"name\": \"qwen2\",\n"
                                   "  \"source\": \"qwen2?batch=8&seq=32&layers=1&dtype=bf16\""));
  /* One tensor or op per line, attributes only where they differ from the defaults, and
   * doubles in their shortest exact form. */
  g_assert_nonnull (strstr (text, "\n    {\"name\": \"input_ids\", \"dtype\": \"i64\", \"kind\": "
                                  "\"input\", \"shape\": [8, 32]},\n"));
  g_assert_nonnull (strstr (text,
                            "\n    {\"name\": \"model.layers.0.self_attn.rotary_q\", \"type\": "
                            "\"RotaryEmbedding\", \"attrs\": {\"theta\": 1000000.0}, "
                            "\"inputs\": [\"model.layers.0.self_attn.q_heads\"], "
                            "\"outputs\": [\"model.layers.0.self_attn.rotary_q\"]},\n"));
  g_assert_nonnull (strstr (text, "\"type\": \"RMSNorm\", \"attrs\": {\"eps\": 1e-06}, "));
  g_assert_nonnull (strstr (text, "\"attrs\": {\"heads\": 2, \"transpose_b\": true}"));
  g_assert_nonnull (strstr (text, "\"outputs\": [\"logits\"]\n}\n"));
  g_assert_nonnull (strstr (tiny_text, "{\"name\": \"transformer.h.0.attn.split_qkv\", \"type\": "
                                       "\"Split\", \"attrs\": {\"axis\": 2, \"ints\": [1, 1, 1]}, "
                                       "\"inputs\": [\"transformer.h.0.attn.c_attn\"], "
                                       "\"outputs\": [\"transformer.h.0.attn.split_qkv:0\", "
                                       "\"transformer.h.0.attn.split_qkv:1\", "
                                       "\"transformer.h.0.attn.split_qkv:2\"]}"));
  g_assert_nonnull (strstr (tiny_text, "\"attrs\": {\"equation\": \"bsh,hqnd->bsqnd\"}"));
  /* LayerNorm's eps is the default 1e-5: not written. */
  g_assert_nonnull (strstr (tiny_text, "\"name\": \"transformer.ln_f\", \"type\": \"LayerNorm\", "
                                       "\"inputs\""));
}

static void
test_files (void)
{
  g_autoptr (PlannerGraph) graph = zoo ("llama-tiny", 0);
  g_autoptr (PlannerGraph) loaded = NULL;
  g_autoptr (PlannerGraph) model = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("shardscope-graph-json-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "llama-tiny.graph.json", NULL);
  g_autofree char *bad_path = g_build_filename (dir, "bad.graph.json", NULL);

  g_assert_true (planner_graph_save_json (graph, path, &error));
  g_assert_no_error (error);
  loaded = planner_graph_load_json (path, &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_equal (graph, loaded));
  /* The file keeps the source it was built from. */
  g_assert_cmpstr (planner_graph_get_source (loaded), ==, planner_graph_get_source (graph));

  /* As a MODEL, a graph JSON's source is its own path. */
  model = planner_model_load (path, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (planner_graph_equal (graph, model));
  g_assert_cmpstr (planner_graph_get_source (model), ==, path);
  g_assert_cmpstr (planner_graph_get_name (model), ==, "llama-tiny");

  /* Errors from a file name it. */
  g_assert_true (g_file_set_contents (bad_path,
                                      "{\"shardscope_graph\": 1, \"tensors\": [], "
                                      "\"ops\": [], \"outputs\": [\"y\"]}",
                                      -1, NULL));
  g_clear_object (&loaded);
  loaded = planner_graph_load_json (bad_path, &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH);
  g_assert_true (g_str_has_prefix (error->message, bad_path));
  g_assert_null (loaded);
  g_clear_error (&error);

  loaded = planner_graph_load_json ("/nonexistent/graph.json", &error);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_IO);
  g_clear_error (&error);
  g_assert_false (planner_graph_save_json (graph, "/nonexistent/dir/graph.json", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_IO);

  g_unlink (path);
  g_unlink (bad_path);
  g_rmdir (dir);
}

/* Written by hand: leaves and activations in any order, activations may be left out. */
static void
test_hand_written (void)
{
  const char *text = "{\n"
                     "  \"shardscope_graph\": 1,\n"
                     "  \"tensors\": [\n"
                     "    {\"name\": \"w\", \"dtype\": \"bf16\", \"kind\": \"parameter\", "
                     "\"shape\": [16, 32]},\n"
                     "    {\"name\": \"y\", \"dtype\": \"bf16\", \"kind\": \"activation\", "
                     "\"shape\": [4, 32]},\n"
                     "    {\"name\": \"x\", \"dtype\": \"bf16\", \"kind\": \"input\", "
                     "\"shape\": [4, 16]}\n"
                     "  ],\n"
                     "  \"ops\": [\n"
                     "    {\"name\": \"proj\", \"type\": \"Linear\", \"inputs\": [\"x\", \"w\"], "
                     "\"outputs\": [\"y\"]},\n"
                     "    {\"name\": \"act\", \"type\": \"gelu\", \"attrs\": {\"variant\": 1}, "
                     "\"inputs\": [\"y\"], \"outputs\": [\"z\"]}\n"
                     "  ],\n"
                     "  \"outputs\": [\"z\"]\n"
                     "}\n";
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_graph_from_json (text, &error);
  const PlannerTensor *z;

  g_assert_no_error (error);
  g_assert_cmpuint (planner_graph_get_n_ops (graph), ==, 2);
  g_assert_cmpuint (planner_graph_get_n_tensors (graph), ==, 4);
  g_assert_null (planner_graph_get_name (graph));
  g_assert_cmpint (planner_graph_get_op (graph, 0)->type, ==, PLANNER_OP_MATMUL);
  g_assert_cmpint (planner_graph_get_op (graph, 1)->attrs.variant, ==, 1);
  z = planner_graph_get_tensor (graph, planner_graph_find_tensor (graph, "z"));
  g_assert_cmpint (z->dtype, ==, PLANNER_DTYPE_BF16);
  g_assert_cmpuint (z->rank, ==, 2);
  g_assert_cmpint (z->shape[1], ==, 32);
  g_assert_true (z->is_output);
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 16 * 32);
  assert_roundtrip (graph);
}

static void
test_zoo_mlp (void)
{
  g_autoptr (PlannerGraph) graph = zoo ("mlp", 0);
  const PlannerOp *fc1 = planner_graph_get_op (graph, 0);
  const PlannerTensor *out;

  g_assert_cmpstr (fc1->name, ==, "fc1");
  g_assert_cmpint (fc1->type, ==, PLANNER_OP_MATMUL);
  g_assert_cmpstr (planner_graph_get_op (graph, 1)->name, ==, "act");
  g_assert_cmpint (planner_graph_get_op (graph, 1)->type, ==, PLANNER_OP_RELU);
  g_assert_cmpstr (planner_graph_get_op (graph, 2)->name, ==, "fc2");
  out = planner_graph_get_tensor (graph,
                                  g_array_index (planner_graph_get_outputs (graph), guint, 0));
  g_assert_cmpstr (out->name, ==, "fc2");
  g_assert_cmpuint (out->rank, ==, 2);
  g_assert_cmpint (out->shape[0], ==, 8);
  g_assert_cmpint (out->shape[1], ==, 1024);
  g_assert_cmpuint (planner_graph_get_parameter_count (graph), ==, 8393728);
  g_assert_cmpstr (planner_graph_get_source (graph), ==, "mlp");
  g_assert_cmpstr (planner_graph_get_name (graph), ==, "mlp");
}

/* ---- Refusals */

typedef struct
{
  const char *name;
  const char *text;
  int code;
  const char *fragment;
} BadGraph;

#define X_W                                                                                        \
  "{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [4, 16]}, "               \
  "{\"name\": \"w\", \"dtype\": \"f32\", \"kind\": \"parameter\", \"shape\": [16, 8]}"
#define MATMUL                                                                                     \
  "{\"name\": \"mm\", \"type\": \"MatMul\", \"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]}"
#define GRAPH(tensors, ops, outputs)                                                               \
  "{\"shardscope_graph\": 1, \"tensors\": [" tensors "], \"ops\": [" ops                           \
  "], \"outputs\": [" outputs "]}"

static const BadGraph bad_graphs[] = {
  /* Members the reader did not know were ignored: a typo was silently a default. */
  { "unknown-top-member",
    "{\"shardscope_graph\": 1, \"tensors\": [], \"ops\": [], \"outputs\": [], \"ouputs\": []}",
    PLANNER_ERROR_MALFORMED_FILE,
    "graph: unknown field \"ouputs\" (known: shardscope_graph, name, source, tensors, ops, "
    "outputs)" },
  { "unknown-tensor-member",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [4], "
           "\"layout\": \"[dp]\"}",
           "", "\"x\""),
    PLANNER_ERROR_MALFORMED_FILE, "tensor \"x\": unknown field \"layout\"" },
  { "unknown-op-member",
    GRAPH (X_W,
           "{\"name\": \"mm\", \"type\": \"MatMul\", \"atrs\": {}, \"inputs\": [\"x\", \"w\"], "
           "\"outputs\": [\"y\"]}",
           "\"y\""),
    PLANNER_ERROR_MALFORMED_FILE, "op \"mm\": unknown field \"atrs\"" },
  { "output-twice", GRAPH (X_W, MATMUL, "\"y\", \"y\""), PLANNER_ERROR_INVALID_GRAPH,
    "graph: output \"y\" is listed twice" },
  { "not-json", "{\"shardscope_graph\": 1,\n\"tensors\": [\n", PLANNER_ERROR_MALFORMED_FILE,
    "graph JSON:3:" },
  { "empty", "", PLANNER_ERROR_MALFORMED_FILE, "empty" },
  { "not-object", "42", PLANNER_ERROR_MALFORMED_FILE, "object" },
  { "no-version", "{\"tensors\": []}", PLANNER_ERROR_MALFORMED_FILE, "shardscope_graph" },
  { "wrong-version", "{\"shardscope_graph\": 2}", PLANNER_ERROR_MALFORMED_FILE,
    "version 2 is not supported (this build reads 1)" },
  { "version-string", "{\"shardscope_graph\": \"1\"}", PLANNER_ERROR_MALFORMED_FILE,
    "\"shardscope_graph\" must be an integer version, got \"1\"" },
  { "no-ops", "{\"shardscope_graph\": 1, \"tensors\": [], \"outputs\": []}",
    PLANNER_ERROR_MALFORMED_FILE, "missing field \"ops\"" },
  { "ops-not-list", "{\"shardscope_graph\": 1, \"tensors\": [], \"ops\": {}, \"outputs\": []}",
    PLANNER_ERROR_MALFORMED_FILE, "\"ops\" must be a list" },
  { "unknown-op-type",
    GRAPH (X_W,
           "{\"name\": \"mm\", \"type\": \"FancyMatMul\", \"inputs\": [\"x\", \"w\"], "
           "\"outputs\": [\"y\"]}",
           "\"y\""),
    PLANNER_ERROR_UNKNOWN_OP_TYPE, "op \"mm\": unknown op type \"FancyMatMul\"" },
  { "missing-input",
    GRAPH (X_W,
           "{\"name\": \"mm\", \"type\": \"MatMul\", \"inputs\": [\"x\", "
           "\"v\"], \"outputs\": [\"y\"]}",
           "\"y\""),
    PLANNER_ERROR_INVALID_GRAPH, "op \"mm\": input 1 \"v\" is not a tensor of the graph" },
  { "matmul-k-mismatch",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [4, 12]}, "
           "{\"name\": \"w\", \"dtype\": \"f32\", \"kind\": \"parameter\", \"shape\": [16, 8]}",
           MATMUL, "\"y\""),
    PLANNER_ERROR_SHAPE_MISMATCH, "mm" },
  { "declared-shape-wrong",
    GRAPH (X_W ", {\"name\": \"y\", \"dtype\": \"f32\", \"kind\": \"activation\", \"shape\": [4, "
               "9]}",
           MATMUL, "\"y\""),
    PLANNER_ERROR_SHAPE_MISMATCH,
    "tensor \"y\": declared with shape [4, 9], but op \"mm\" (MatMul) "
    "produces [4, 8]" },
  { "declared-dtype-wrong",
    GRAPH (X_W ", {\"name\": \"y\", \"dtype\": \"f16\", \"kind\": \"activation\", \"shape\": [4, "
               "8]}",
           MATMUL, "\"y\""),
    PLANNER_ERROR_SHAPE_MISMATCH, "tensor \"y\": declared as f16" },
  { "orphan-activation",
    GRAPH (X_W ", {\"name\": \"q\", \"dtype\": \"f32\", \"kind\": \"activation\", \"shape\": [4]}",
           MATMUL, "\"y\""),
    PLANNER_ERROR_INVALID_GRAPH, "\"q\" is declared as an activation but no op outputs it" },
  { "zero-dim",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [0, 16]}", "",
           "\"x\""),
    PLANNER_ERROR_SHAPE_MISMATCH, "tensor \"x\": dim 0 has size 0" },
  { "too-many-elements",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [1048576, "
           "1048576, 1048576, 1048576]}",
           "", "\"x\""),
    PLANNER_ERROR_SHAPE_MISMATCH, "tensor \"x\": dim 3 has size 1048576" },
  { "rank-too-high",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [1, 1, 1, 1, 1, "
           "1, 1, 1, 1]}",
           "", "\"x\""),
    PLANNER_ERROR_MALFORMED_FILE, "tensor \"x\": \"shape\" has 9 entries" },
  { "shape-not-ints",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [4, \"16\"]}", "",
           "\"x\""),
    PLANNER_ERROR_MALFORMED_FILE, "tensor \"x\": \"shape\" must be an integer" },
  { "bad-dtype",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f8\", \"kind\": \"input\", \"shape\": [4]}", "",
           "\"x\""),
    PLANNER_ERROR_MALFORMED_FILE, "tensor \"x\": dtype must be one of" },
  { "bad-kind",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"weight\", \"shape\": [4]}", "",
           "\"x\""),
    PLANNER_ERROR_MALFORMED_FILE, "kind \"weight\"" },
  { "tensor-no-name", GRAPH ("{\"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [4]}", "", ""),
    PLANNER_ERROR_MALFORMED_FILE, "tensor 0: missing field \"name\"" },
  { "tensor-twice", GRAPH (X_W ", " X_W, MATMUL, "\"y\""), PLANNER_ERROR_INVALID_GRAPH,
    "tensor \"x\" is declared twice" },
  { "op-twice",
    GRAPH (X_W,
           MATMUL ", {\"name\": \"mm\", \"type\": \"ReLU\", \"inputs\": [\"y\"], "
                  "\"outputs\": [\"z\"]}",
           "\"z\""),
    PLANNER_ERROR_INVALID_GRAPH, "'mm'" },
  { "unknown-attr",
    GRAPH (X_W,
           "{\"name\": \"mm\", \"type\": \"MatMul\", \"attrs\": {\"transpose\": true}, "
           "\"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]}",
           "\"y\""),
    PLANNER_ERROR_MALFORMED_FILE, "op \"mm\": unknown attribute \"transpose\"" },
  { "attr-wrong-type",
    GRAPH (X_W,
           "{\"name\": \"mm\", \"type\": \"MatMul\", \"attrs\": {\"transpose_b\": 1}, "
           "\"inputs\": [\"x\", \"w\"], \"outputs\": [\"y\"]}",
           "\"y\""),
    PLANNER_ERROR_MALFORMED_FILE, "op \"mm\": \"transpose_b\" must be true or false" },
  { "equation-too-long",
    GRAPH (X_W,
           "{\"name\": \"e\", \"type\": \"Einsum\", \"attrs\": {\"equation\": "
           "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmn->a\"}, "
           "\"inputs\": [\"x\"], \"outputs\": [\"y\"]}",
           "\"y\""),
    PLANNER_ERROR_MALFORMED_FILE, "op \"e\": \"equation\" is longer than 63 characters" },
  { "output-is-parameter",
    GRAPH (X_W,
           "{\"name\": \"mm\", \"type\": \"MatMul\", \"inputs\": [\"x\", \"w\"], "
           "\"outputs\": [\"w\"]}",
           "\"w\""),
    PLANNER_ERROR_INVALID_GRAPH, "output \"w\" is declared with kind \"parameter\"" },
  { "split-outputs",
    GRAPH ("{\"name\": \"x\", \"dtype\": \"f32\", \"kind\": \"input\", \"shape\": [4, 6]}",
           "{\"name\": \"s\", \"type\": \"Split\", \"attrs\": {\"axis\": 1, \"ints\": [2, 2, 2]}, "
           "\"inputs\": [\"x\"], \"outputs\": [\"a\", \"b\"]}",
           "\"a\""),
    0, "s (Split)" },
  { "topological-order",
    GRAPH (X_W ", {\"name\": \"z\", \"dtype\": \"f32\", \"kind\": \"activation\", \"shape\": "
               "[4, 8]}",
           "{\"name\": \"act\", \"type\": \"ReLU\", \"inputs\": [\"y\"], \"outputs\": "
           "[\"z\"]}, " MATMUL,
           "\"z\""),
    PLANNER_ERROR_INVALID_GRAPH, "op \"act\": input 0 \"y\" is not a tensor of the graph" },
  { "no-outputs", GRAPH (X_W, MATMUL, ""), PLANNER_ERROR_INVALID_GRAPH, "\"outputs\" is empty" },
  { "unknown-output", GRAPH (X_W, MATMUL, "\"q\""), PLANNER_ERROR_INVALID_GRAPH,
    "output \"q\" is not a tensor" },
  { "unused-parameter",
    GRAPH (X_W ", {\"name\": \"u\", \"dtype\": \"f32\", \"kind\": \"parameter\", \"shape\": [3]}",
           MATMUL, "\"y\""),
    PLANNER_ERROR_INVALID_GRAPH, "u" },
  { "too-many-inputs",
    GRAPH (X_W,
           "{\"name\": \"r\", \"type\": \"ReLU\", \"inputs\": [\"x\", \"w\"], "
           "\"outputs\": [\"y\"]}",
           "\"y\""),
    PLANNER_ERROR_SHAPE_MISMATCH, "r" },
};

static void
test_bad_graph (gconstpointer data)
{
  const BadGraph *bad = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_graph_from_json (bad->text, &error);

  g_assert_null (graph);
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_assert_true (error->domain == PLANNER_ERROR);
  /* Some refusals come from the op rules, whose exact code is theirs to choose. */
  if (bad->code != 0)
    g_assert_error (error, PLANNER_ERROR, bad->code);
  if (strstr (error->message, bad->fragment) == NULL)
    g_error ("message \"%s\" lacks \"%s\"", error->message, bad->fragment);
}

/* Every truncation of a valid file is refused, and random damage never crashes the reader
 * (G_DEBUG=fatal-criticals turns a critical into a failure too). */
static void
test_damaged (void)
{
  g_autoptr (PlannerGraph) graph = zoo ("gpt2-tiny", 1);
  g_autofree char *text = planner_graph_to_json (graph);
  gsize length = strlen (text);
  GRand *rand = g_rand_new_with_seed (20240607);
  guint accepted = 0;

  for (gsize cut = 0; cut < length - 2; cut += 7)
    {
      g_autofree char *prefix = g_strndup (text, cut);
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerGraph) broken = planner_graph_from_json (prefix, &error);

      g_assert_null (broken);
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
    }

  for (guint round = 0; round < 2000; round++)
    {
      g_autofree char *copy = g_strdup (text);
      static const char replacements[] = "0123456789-[]{}\",:aez ";
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerGraph) damaged = NULL;

      for (guint k = 0; k < 1 + round % 3; k++)
        copy[g_rand_int_range (rand, 0, length)]
            = replacements[g_rand_int_range (rand, 0, sizeof replacements - 1)];
      damaged = planner_graph_from_json (copy, &error);
      g_assert_true ((damaged == NULL) != (error == NULL));
      if (damaged != NULL)
        {
          accepted++;
          g_assert_true (planner_graph_check (damaged, NULL));
        }
      else
        g_assert_true (error->domain == PLANNER_ERROR);
    }
  g_test_message ("%u of 2000 damaged files still formed a valid graph", accepted);
  g_rand_free (rand);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_data_func ("/planner/graph-json/roundtrip/gpt2-tiny", "gpt2-tiny", test_roundtrip);
  g_test_add_data_func ("/planner/graph-json/roundtrip/llama-tiny", "llama-tiny", test_roundtrip);
  g_test_add_data_func ("/planner/graph-json/roundtrip/mlp", "mlp", test_roundtrip);
  g_test_add_func ("/planner/graph-json/roundtrip/families", test_roundtrip_families);
  g_test_add_func ("/planner/graph-json/format", test_format);
  g_test_add_func ("/planner/graph-json/files", test_files);
  g_test_add_func ("/planner/graph-json/hand-written", test_hand_written);
  g_test_add_func ("/planner/graph-json/zoo-mlp", test_zoo_mlp);
  for (guint i = 0; i < G_N_ELEMENTS (bad_graphs); i++)
    test_util_add_named ("/planner/graph-json/bad", bad_graphs[i].name, &bad_graphs[i],
                         test_bad_graph);
  g_test_add_func ("/planner/graph-json/damaged", test_damaged);
  return g_test_run ();
}
