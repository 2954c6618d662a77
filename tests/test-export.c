#define G_LOG_DOMAIN "test-export"

#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include <glib/gstdio.h>

#include "planner-error.h"
#include "planner-export.h"
#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-store.h"
#include "test-util.h"

/* Exports: the DTensor script's styles for Megatron and sequence-parallel plans, what it
 * cannot express listed and never dropped, any op name made into Python that compiles and
 * does nothing but define the plan; MindSpore's strategy fields checked against the plan;
 * CSV quoting, rows and measured times. */

static char *tmp_dir;

/* Exports name the plan: every plan here is "test plan". */
static PlannerPlan *
plan_of_graph (PlannerGraph *graph, const char *mesh_text, const char *policy,
               const char *const *extra_pins)
{
  PlannerPlan *plan = test_util_plan (graph, mesh_text, NULL, policy, extra_pins);
  planner_plan_set_name (plan, "test plan");
  return plan;
}

static PlannerPlan *
make_plan (const char *model, const char *mesh_text, const char *policy)
{
  g_autoptr (PlannerGraph) graph = test_util_model (model, NULL);
  return plan_of_graph (graph, mesh_text, policy, NULL);
}

static void
assert_contains (const char *text, const char *what)
{
  if (strstr (text, what) == NULL)
    g_error ("expected to find:\n%s\nin:\n%s", what, text);
}

static guint
count_of (const char *text, const char *what)
{
  guint n = 0;
  for (const char *p = strstr (text, what); p != NULL; p = strstr (p + 1, what))
    n++;
  return n;
}

/* ---- python ---- */

static const char *python;

/* Checks a generated script: it parses; at top level it only imports, assigns (calling no
 * more than the style and placement constructors, its own styles among them), defines
 * functions and classes, has docstrings and an `if __name__ == '__main__'` guard; run
 * against stub torch modules it builds no mesh, applies nothing, runs no command and defines
 * nothing but the plan's data and what it imports and defines; PLAN_NAME is the plan's name; and
 * its keys, matched as torch matches them (component by component, fnmatch), reach exactly the ops
 * that should have an entry, each once. argv: SCRIPT EXPECT.json SENTINEL */
static const char checker[]
    = "import ast, fnmatch, json, os, sys, types\n"
      "script, expect_file, sentinel = sys.argv[1:4]\n"
      "src = open(script, encoding='ascii').read()\n"
      "tree = ast.parse(src, script)\n"
      "styles = {'ColwiseParallel', 'RowwiseParallel', 'SequenceParallel', 'PrepareModuleInput',\n"
      "          'PrepareModuleOutput', 'Shard', 'Replicate', 'Partial', 'ParallelStyle',\n"
      "          'DTensor'}\n"
      "own = {'Conv1DParallel', 'PrepareBlockInput', 'ActivationParallel', 'FusedColwiseParallel',\n"
      "       'ReplicatedParallel', 'ExpertParallel'}\n"
      "data = {'PLAN_NAME', 'MODEL', 'BATCH', 'SEQ', 'LAYERS', 'MESH_SHAPE', 'MESH_DIM_NAMES',\n"
      "        'TP_DIM', 'DP_DIMS', 'FSDP_BLOCKS', 'LOSS_PARALLEL', 'TIED', 'FUSED', 'HEADS', 'PLAN',\n"
      "        'PP_DIM', 'EP_DIM', 'EXPERTS'}\n"
      "bound = set()\n"
      "for node in tree.body:\n"
      "    if isinstance(node, (ast.Import, ast.ImportFrom)):\n"
      "        bound |= {(a.asname or a.name).split('.')[0] for a in node.names}\n"
      "        continue\n"
      "    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):\n"
      "        bound.add(node.name)\n"
      "        continue\n"
      "    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):\n"
      "        continue\n"
      "    if isinstance(node, ast.If):\n"
      "        assert ast.unparse(node.test) == \"__name__ == '__main__'\", ast.dump(node)\n"
      "        continue\n"
      "    assert isinstance(node, ast.Assign), ast.dump(node)\n"
      "    for sub in ast.walk(node.value):\n"
      "        assert not isinstance(sub, (ast.Attribute, ast.Lambda, ast.Subscript)), "
      "ast.dump(sub)\n"
      "        if isinstance(sub, ast.Call):\n"
      "            assert isinstance(sub.func, ast.Name) and sub.func.id in styles | own, "
      "ast.dump(sub)\n"
      "def refuse(what):\n"
      "    def f(*args, **kwargs):\n"
      "        raise AssertionError(what + ' at import')\n"
      "    return f\n"
      "stub = types.ModuleType('stub')\n"
      "for name in styles:\n"
      "    setattr(stub, name, type(name, (), {'__init__': lambda self, *a, **k: None}))\n"
      "for name in ('nn', 'functional', 'distributed', 'device_mesh', 'tensor', 'parallel'):\n"
      "    setattr(stub, name, stub)\n"
      "for name in ('init_device_mesh', 'parallelize_module', 'distribute_module',\n"
      "             'distribute_tensor', 'loss_parallel'):\n"
      "    setattr(stub, name, refuse(name))\n"
      "for m in ('torch', 'torch.nn', 'torch.nn.functional', 'torch.distributed',\n"
      "          'torch.distributed.device_mesh', 'torch.distributed.tensor',\n"
      "          'torch.distributed.tensor.parallel'):\n"
      "    sys.modules[m] = stub\n"
      "g = {}\n"
      "exec(compile(src, script, 'exec'), g)\n"
      "assert not os.path.exists(sentinel), 'the script ran a command'\n"
      "defined = {k for k in g if not k.startswith('__')}\n"
      "assert defined <= data | bound, defined - data - bound\n"
      "assert own <= bound, own - bound\n"
      "expect = json.load(open(expect_file, encoding='utf-8'))\n"
      "assert g['PLAN_NAME'] == expect['plan_name'], (g['PLAN_NAME'], expect['plan_name'])\n"
      "assert list(g['MESH_DIM_NAMES']) == expect['axes']\n"
      "hits = {}\n"
      "for key in g['PLAN']:\n"
      "    parts = key.split('.')\n"
      "    for name in expect['ops']:\n"
      "        comps = name.split('.')\n"
      "        if len(comps) == len(parts) and all(fnmatch.fnmatch(c, p) for c, p in zip(comps, "
      "parts)):\n"
      "            hits.setdefault(name, []).append(key)\n"
      "for name, keys in hits.items():\n"
      "    assert len(keys) == 1, (name, keys)\n"
      "assert sorted(hits) == sorted(expect['styled']), (sorted(hits), sorted(expect['styled']))\n"
      "print(len(g['PLAN']), 'keys')\n";

/* Runs the checker on @script; @styled: the ops that must have an entry. Skips (with a message)
 * without python3. */
static void
check_python (PlannerPlan *plan, const char *script, GPtrArray *styled, const char *sentinel)
{
  g_autofree char *script_path = g_build_filename (tmp_dir, "plan.py", NULL);
  g_autofree char *checker_path = g_build_filename (tmp_dir, "checker.py", NULL);
  g_autofree char *expect_path = g_build_filename (tmp_dir, "expect.json", NULL);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;

  if (python == NULL)
    {
      g_test_skip ("python3 is not installed: the script is not compiled");
      return;
    }
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "plan_name");
  json_builder_add_string_value (b, planner_plan_get_name (plan));
  json_builder_set_member_name (b, "axes");
  json_builder_begin_array (b);
  for (guint a = 0; a < mesh->n_axes; a++)
    json_builder_add_string_value (b, mesh->names[a]);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "ops");
  json_builder_begin_array (b);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    json_builder_add_string_value (b, planner_graph_get_op (graph, i)->name);
  json_builder_end_array (b);
  json_builder_set_member_name (b, "styled");
  json_builder_begin_array (b);
  for (guint i = 0; i < styled->len; i++)
    json_builder_add_string_value (b, g_ptr_array_index (styled, i));
  json_builder_end_array (b);
  json_builder_end_object (b);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  g_assert_true (json_generator_to_file (gen, expect_path, &error));
  g_assert_true (g_file_set_contents (script_path, script, -1, NULL));
  g_assert_true (g_file_set_contents (checker_path, checker, -1, NULL));

  /* py_compile first, as the CI does, then the checker. */
  const char *compile_argv[] = { python, "-m", "py_compile", script_path, NULL };
  g_assert_true (g_spawn_sync (NULL, (char **)compile_argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &err, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("py_compile refused the script:\n%s\n%s", err, script);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  const char *check_argv[] = { python,
                               checker_path,
                               script_path,
                               expect_path,
                               sentinel != NULL ? sentinel : "/nonexistent/sentinel",
                               NULL };
  g_assert_true (g_spawn_sync (NULL, (char **)check_argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &err, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("the script does more than define the plan, or its keys are wrong:\n%s\n%s", err,
             script);
  g_test_message ("checker: %s", g_strstrip (out));
  g_remove (script_path);
  g_remove (checker_path);
  g_remove (expect_path);
  /* py_compile leaves __pycache__ beside the script. */
  g_autofree char *cache = g_build_filename (tmp_dir, "__pycache__", NULL);
  g_autoptr (GDir) dir = g_dir_open (cache, 0, NULL);
  const char *entry;
  while (dir != NULL && (entry = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (cache, entry, NULL);
      g_remove (path);
    }
  g_rmdir (cache);
}

static GPtrArray *
names_of (const char *const *names)
{
  GPtrArray *out = g_ptr_array_new ();
  for (guint i = 0; names[i] != NULL; i++)
    g_ptr_array_add (out, (gpointer)names[i]);
  return out;
}

/* ---- dtensor ---- */

static void
test_dtensor_megatron (void)
{
  g_autoptr (PlannerPlan) plan = make_plan ("llama-tiny", "dp=2,mp=2", "megatron");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *script = planner_export_dtensor (plan, notes, NULL);
  const char *styled[] = { "model.embed_tokens",
                           "model.layers.0.self_attn.q_proj",
                           "model.layers.1.self_attn.q_proj",
                           "model.layers.0.self_attn.k_proj",
                           "model.layers.1.self_attn.k_proj",
                           "model.layers.0.self_attn.v_proj",
                           "model.layers.1.self_attn.v_proj",
                           "model.layers.0.self_attn.o_proj",
                           "model.layers.1.self_attn.o_proj",
                           "model.layers.0.mlp.gate_proj",
                           "model.layers.1.mlp.gate_proj",
                           "model.layers.0.mlp.up_proj",
                           "model.layers.1.mlp.up_proj",
                           "model.layers.0.mlp.down_proj",
                           "model.layers.1.mlp.down_proj",
                           "lm_head",
                           NULL };

  /* Megatron-LM as torch's own tensor-parallel examples write it. */
  g_assert_cmpuint (notes->len, ==, 0);
  assert_contains (script, "MESH_SHAPE = (2, 2)\nMESH_DIM_NAMES = ('dp', 'mp')\nTP_DIM = 'mp'\n");
  assert_contains (script,
                   "    'model.embed_tokens': RowwiseParallel(input_layouts=Replicate()),\n");
  assert_contains (script, "    'model.layers.*.self_attn.q_proj': ColwiseParallel(),\n");
  assert_contains (script, "    'model.layers.*.self_attn.o_proj': RowwiseParallel(),\n");
  assert_contains (script, "    'model.layers.*.mlp.gate_proj': ColwiseParallel(),\n");
  assert_contains (script, "    'model.layers.*.mlp.down_proj': RowwiseParallel(),\n");
  assert_contains (script, "    'lm_head': ColwiseParallel(use_local_output=False),\n");
  assert_contains (script, "# Every op of the plan is expressed.\n");
  assert_contains (script, "DP_DIMS = ('dp',)\nFSDP_BLOCKS = ('model.layers.*',)\n"
                           "LOSS_PARALLEL = True\nTIED = ()\nFUSED = {}\n");
  assert_contains (script, "FSDP2 fully_shard");
  /* The config by its file name, never the author's path. */
  assert_contains (script,
                   "# Model: llama-tiny (batch 8, sequence 128, 2 layers); mesh: dp=2,mp=2; "
                   "policy: megatron.\n");
  g_autoptr (GPtrArray) expect = names_of (styled);
  check_python (plan, script, expect, NULL);
}

static void
test_dtensor_sequence_parallel (void)
{
  g_autoptr (PlannerPlan) plan = make_plan ("llama-tiny", "dp=2,mp=2", "megatron-sp");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *script = planner_export_dtensor (plan, notes, NULL);
  g_autoptr (GPtrArray) styled = g_ptr_array_new ();

  g_assert_cmpuint (notes->len, ==, 0);
  /* The norms run on sequence shards; each block gathers its input once (PrepareBlockInput on
   * self_attn and mlp, as torch's examples do: 5 gathers as the plan has, not one per
   * projection) and the row-parallel ones reduce-scatter back (output_layouts). */
  assert_contains (script, "    'model.embed_tokens': RowwiseParallel(input_layouts=Replicate(), "
                           "output_layouts=Shard(1)),\n");
  assert_contains (script, "    'model.layers.*.input_layernorm': SequenceParallel(),\n");
  assert_contains (script,
                   "    'model.layers.*.self_attn': PrepareBlockInput(Shard(1), Replicate()),\n"
                   "    'model.layers.*.self_attn.q_proj': ColwiseParallel(),\n");
  assert_contains (script, "    'model.layers.*.mlp': PrepareBlockInput(Shard(1), Replicate()),\n"
                           "    'model.layers.*.mlp.gate_proj': ColwiseParallel(),\n");
  g_assert_cmpuint (count_of (script, "PrepareBlockInput(Shard(1)"), ==, 2);
  g_assert_cmpuint (count_of (script, "input_layouts=Shard(1)"), ==, 1); /* lm_head's */
  assert_contains (script, "position_ids=positions(input_ids)");
  assert_contains (
      script, "    'model.layers.*.self_attn.o_proj': RowwiseParallel(output_layouts=Shard(1)),\n");
  assert_contains (script, "    'model.layers.*.post_attention_layernorm': SequenceParallel(),\n");
  assert_contains (
      script, "    'model.layers.*.mlp.down_proj': RowwiseParallel(output_layouts=Shard(1)),\n");
  assert_contains (script, "    'model.norm': SequenceParallel(),\n");
  assert_contains (
      script, "    'lm_head': ColwiseParallel(input_layouts=Shard(1), use_local_output=False),\n");
  PlannerGraph *graph = planner_plan_get_graph (plan);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      if (op->type == PLANNER_OP_MATMUL || op->type == PLANNER_OP_EMBEDDING
          || op->type == PLANNER_OP_RMS_NORM)
        g_ptr_array_add (styled, op->name);
    }
  check_python (plan, script, styled, NULL);
}

/* GPT-2: Conv1D modules (weight [in, out]) get Conv1DParallel, the fused c_attn is split by
 * heads of q, k and v (groups=3, its columns regrouped), the tied wte and lm_head are tied
 * again after the styles, and every op that splits a weight over mp has an entry. */
static void
test_dtensor_gpt2 (void)
{
  g_autoptr (PlannerPlan) plan = make_plan ("gpt2-tiny", "dp=2,mp=2", "megatron");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_autofree char *script = planner_export_dtensor (plan, notes, &error);
  g_autoptr (GPtrArray) styled = g_ptr_array_new ();

  g_assert_no_error (error);
  g_assert_cmpuint (notes->len, ==, 0);
  assert_contains (script, "    'transformer.h.*.attn.c_attn': Conv1DParallel(True, groups=3),\n"
                           "    'transformer.h.*.attn.c_proj': Conv1DParallel(False),\n");
  assert_contains (script, "    'transformer.h.*.mlp.c_fc': Conv1DParallel(True),\n"
                           "    'transformer.h.*.mlp.c_proj': Conv1DParallel(False),\n");
  assert_contains (script, "TIED = (('lm_head.weight', 'transformer.wte.weight'),)\n");
  assert_contains (script, "FUSED = {'transformer.h.*.attn.c_attn': 3}\n");
  assert_contains (script, "FSDP_BLOCKS = ('transformer.h.*',)\n");

  /* Never dropped silently: an op splitting a weight over mp has an entry. */
  PlannerGraph *graph = planner_plan_get_graph (plan);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS];
      gboolean weight_split = FALSE;
      planner_plan_op_layouts (plan, i, in, NULL);
      for (guint k = 0; k < op->n_inputs; k++)
        weight_split
            |= planner_graph_get_tensor (graph, op->inputs[k])->kind == PLANNER_TENSOR_PARAMETER
               && planner_layout_split_mask (&in[k]) != 0;
      if (weight_split)
        g_ptr_array_add (styled, op->name);
    }
  g_assert_cmpuint (styled->len, ==, 3 + 4 * 2); /* wte, wpe, lm_head; 4 per block */
  check_python (plan, script, styled, NULL);
}

/* A plan the styles cannot say is refused with the reasons, never written: the MLP pinned
 * alone leaves q, k and v split by heads and sdpa gathering them, between two ops that are
 * no modules. */
static void
test_dtensor_refused (void)
{
  g_autoptr (PlannerGraph) graph = test_util_model ("llama-tiny", NULL);
  const char *pins[] = { "*.gate_proj=[dp,_,_],[mp,_]", "*.up_proj=[dp,_,_],[mp,_]",
                         "*.down_proj=[dp,_,mp],[_,mp]", NULL };
  g_autoptr (PlannerPlan) plan = plan_of_graph (graph, "dp=2,mp=2", NULL, pins);
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_autofree char *script = planner_export_dtensor (plan, notes, &error);

  g_assert_null (script);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY);
  assert_contains (error->message, "the DTensor export cannot run this plan as planned");
  assert_contains (error->message, "model.layers.0.self_attn.rotary_q -> "
                                   "model.layers.0.self_attn.sdpa:0: Shard(1) to Replicate() on "
                                   "mp between ops that run on their local shards");
  g_clear_error (&error);
  g_assert_null (planner_export_to_string (plan, "dtensor", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY);
}

/* A pipelined script hands a later chunk the hidden states as inputs_embeds: a model whose
 * forward does more than look up and add embeddings before its first layer (Gemma's scale,
 * BLOOM's embedding LayerNorm) is refused by that op's name, and llama is not. */
static void
test_dtensor_pipeline_embeddings (void)
{
  static const struct
  {
    const char *config, *refused_op;
  } cases[] = {
    { "gemma-2b.json", "model.embed_scale (Scale): runs on the embeddings before the first layer" },
    { "bloom-560m.json",
      "transformer.word_embeddings_layernorm (LayerNorm): runs on the embeddings before the "
      "first layer" },
  };
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autofree char *path
          = g_test_build_filename (G_TEST_DIST, "data", "zoo", cases[c].config, NULL);
      g_autoptr (PlannerGraph) graph = test_util_model_sized (path, 2, 0);
      g_autoptr (PlannerPlan) plan = plan_of_graph (graph, "pp=2", NULL, NULL);
      g_autoptr (GError) error = NULL;
      g_autofree char *script = planner_export_dtensor (plan, NULL, &error);
      g_assert_null (script);
      g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY);
      assert_contains (error->message, "cannot run this plan's pipeline over pp");
      assert_contains (error->message, cases[c].refused_op);
    }
  g_autoptr (PlannerGraph) llama = test_util_model_sized ("llama-tiny", 2, 0);
  g_autoptr (PlannerPlan) plan = plan_of_graph (llama, "pp=2", NULL, NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *script = planner_export_dtensor (plan, NULL, &error);
  g_assert_no_error (error);
  assert_contains (script, "PP_DIM = 'pp'");
}

/* Plain data parallelism: no tensor-parallel axis, an empty PLAN that still compiles. */
static void
test_dtensor_data_parallel (void)
{
  g_autoptr (PlannerPlan) plan = make_plan ("gpt2-tiny", "dp=4", "dp");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *script = planner_export_dtensor (plan, notes, NULL);
  g_autoptr (GPtrArray) none = g_ptr_array_new ();

  g_assert_cmpuint (notes->len, ==, 0);
  assert_contains (script, "MESH_SHAPE = (4,)\nMESH_DIM_NAMES = ('dp',)\nTP_DIM = None\n"
                           "DP_DIMS = ('dp',)\n");
  assert_contains (script, "PLAN = {\n}\n");
  check_python (plan, script, none, NULL);
}

/* Mixtral under megatron-ep on dp=2,ep=2 (issue 16): no tensor parallelism (PLAN empty), the
 * batch over dp and ep, each layer's experts one ExpertParallel entry on ep with the graph's
 * 8 experts and its capacity (tests/data/models/mixtral-tiny.json: capacity factor 4 = 8
 * experts / top 2, so 8 slots for a sequence of 8: dropless); the plan's two AllToAlls per
 * layer are notes naming the style. On ep=2,mp=2 the policy keeps the residual whole on mp
 * (its norm and router rules) and the plan exports; pinned to split the residual's batch over
 * mp next to the experts (as the policy's plan did before those rules), which the script
 * cannot do, it is refused, naming the edge. The scripts
 * run for real in tests/frameworks/test-export-dtensor-moe.py. */
static void
test_dtensor_experts (void)
{
  g_autofree char *path = g_test_build_filename (G_TEST_DIST, "data", "models", "mixtral-tiny.json",
                                                 NULL);
  PlannerModelOptions options;
  planner_model_options_init (&options);
  options.batch = 4;
  options.seq = 8;
  g_autoptr (PlannerGraph) graph = test_util_model (path, &options);
  g_autoptr (PlannerPlan) plan = plan_of_graph (graph, "dp=2,ep=2", "megatron-ep", NULL);
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_autofree char *script = planner_export_dtensor (plan, notes, &error);
  g_autoptr (GPtrArray) none = g_ptr_array_new ();
  guint all_to_all = 0;

  g_assert_no_error (error);
  assert_contains (script, "TP_DIM = None\nDP_DIMS = ('dp', 'ep')\n");
  assert_contains (script, "PLAN = {\n}\nEP_DIM = 'ep'\nEXPERTS = {\n"
                           "    'model.layers.*.mlp.experts': ExpertParallel(experts=8, "
                           "capacity=8, dropless=True),\n}\n");
  assert_contains (script, "# Expert parallelism over ep: EXPERTS, ExpertParallel on "
                           "mesh['ep'] (2 MoE layers, 8 experts each, 4 per rank");
  for (guint i = 0; i < notes->len; i++)
    all_to_all += strstr (g_ptr_array_index (notes, i), "is ExpertParallel's all_to_all over ep")
                  != NULL;
  /* dispatch and combine, collapsed over the two layers */
  g_assert_cmpuint (all_to_all, ==, 2);
  check_python (plan, script, none, NULL);

  g_autoptr (PlannerPlan) mp = plan_of_graph (graph, "ep=2,mp=2", "megatron-ep", NULL);
  g_autofree char *tp = planner_export_dtensor (mp, NULL, &error);
  g_assert_no_error (error);
  assert_contains (tp, "TP_DIM = 'mp'\nDP_DIMS = ('ep',)\n");
  assert_contains (tp, "EP_DIM = 'ep'\n");
  static const char *const split[] = { "model.layers.*.add_mlp=[ep+mp,_,_],[ep+mp,_,_]", NULL };
  g_autoptr (PlannerPlan) mp_split = plan_of_graph (graph, "ep=2,mp=2", "megatron-ep", split);
  g_autofree char *refused = planner_export_dtensor (mp_split, NULL, &error);
  g_assert_null (refused);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY);
  assert_contains (error->message, "model.layers.*.mlp.combine -> model.layers.*.add_mlp:1: "
                                   "Replicate() to Shard(0) on mp at the experts");
  /* Not with pipeline stages (nothing runs that). */
  g_clear_error (&error);
  g_autoptr (PlannerPlan) pp = plan_of_graph (graph, "pp=2,ep=2", "megatron-ep", NULL);
  g_autofree char *staged = planner_export_dtensor (pp, NULL, &error);
  g_assert_null (staged);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY);
  assert_contains (error->message, "model.layers.*.mlp.experts: its experts are split over ep on "
                                   "a mesh with a pipeline axis");
  /* A plan without experts has none. */
  g_autoptr (PlannerPlan) dense = make_plan ("gpt2-tiny", "dp=4", "dp");
  g_autofree char *plain = planner_export_dtensor (dense, NULL, NULL);
  assert_contains (plain, "EP_DIM = None\nEXPERTS = {\n}\n");
}

/* ---- hostile names: through the store and into every export ---- */

static PlannerGraph *
hostile_graph (const char *sentinel, GPtrArray *names)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerGraph) graph = planner_graph_new ();
  gint64 x_shape[2] = { 8, 64 }, w_shape[2] = { 64, 64 };
  g_autofree char *command = g_strdup_printf ("__import__('os').system('touch %s')", sentinel);
  /* In chain order; hostile_pins says how the test pins each. */
  const char *fixed[] = {
    "x'); DROP TABLE plans; --",
    "line\nbreak\r\n\ttab",
    "\'\'\'\"\"\" triple \\ back\\slash \\' \\n end\\",
    "blocks.0.up",
    "blocks.0.down",
    "blocks.1.up",
    "blocks.1.down",
    "glob*chars?[x]",
    "unicode 张量 ✓ \u00e9",
  };
  int x = planner_graph_add_input (graph, "input \"x\"\n", PLANNER_DTYPE_F32, 2, x_shape, &error);
  guint current;

  g_assert_no_error (error);
  current = (guint)x;
  g_ptr_array_add (names, g_strdup (command));
  for (guint i = 0; i < G_N_ELEMENTS (fixed); i++)
    g_ptr_array_add (names, g_strdup (fixed[i]));
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      g_autofree char *weight_name = g_strconcat (name, ".weight", NULL);
      int w
          = planner_graph_add_parameter (graph, weight_name, PLANNER_DTYPE_F32, 2, w_shape, &error);
      g_assert_no_error (error);
      PlannerOpAttrs attrs;
      planner_op_attrs_init (&attrs);
      attrs.transpose_b = TRUE;
      guint inputs[2] = { current, (guint)w };
      int op = planner_graph_add_op (graph, name, PLANNER_OP_MATMUL, &attrs, inputs, 2, 1, NULL,
                                     &error);
      g_assert_no_error (error);
      current = planner_graph_op_output (graph, op, 0);
    }
  planner_graph_mark_output (graph, current);
  g_assert_true (planner_graph_check (graph, &error));

  /* Through a graph JSON file, so the plan has a source the store can rebuild it from. */
  g_autofree char *path = g_build_filename (tmp_dir, "hostile-graph.json", NULL);
  g_assert_true (planner_graph_save_json (graph, path, &error));
  PlannerGraph *loaded = planner_model_load (path, NULL, &error);
  g_assert_no_error (error);
  return loaded;
}

/* Per op of hostile_graph: C column-parallel, R row-parallel, - left to propagation (a glob
 * pin on "glob*chars?[x]" would be a pattern). Megatron pairs, and two identical blocks. */
static const char hostile_pins[] = "CRCRCRCR-C";

/* The ops whose weight the plan splits over mp: each must have a PLAN entry. */
static GPtrArray *
weight_split_ops (PlannerPlan *plan)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  int mp = planner_mesh_axis_index (planner_plan_get_mesh (plan), "mp");
  GPtrArray *out = g_ptr_array_new ();

  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS];
      planner_plan_op_layouts (plan, i, in, NULL);
      for (guint k = 0; k < op->n_inputs; k++)
        if (planner_graph_get_tensor (graph, op->inputs[k])->kind == PLANNER_TENSOR_PARAMETER
            && mp >= 0 && (planner_layout_split_mask (&in[k]) & (1u << mp)))
          {
            g_ptr_array_add (out, op->name);
            break;
          }
    }
  return out;
}

static void
test_hostile_names (void)
{
  g_autofree char *sentinel = g_build_filename (tmp_dir, "pwned", NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (PlannerGraph) graph = hostile_graph (sentinel, names);
  g_autoptr (GPtrArray) pin_texts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;

  g_assert_cmpuint (strlen (hostile_pins), ==, names->len);
  for (guint i = 0; i < names->len; i++)
    if (hostile_pins[i] != '-')
      g_ptr_array_add (
          pin_texts, g_strdup_printf ("%s=%s", (char *)g_ptr_array_index (names, i),
                                      hostile_pins[i] == 'C' ? "[dp,_],[mp,_]" : "[dp,mp],[_,mp]"));
  g_ptr_array_add (pin_texts, NULL);
  g_autoptr (PlannerPlan) plan
      = plan_of_graph (graph, "dp=2,mp=2", NULL, (const char *const *)pin_texts->pdata);
  planner_plan_set_name (plan, "plan '''\"\"\"\n'); import os #");

  /* Through the store and back, equal, and every export of the loaded plan is the same. */
  g_autofree char *db = g_build_filename (tmp_dir, "hostile.db", NULL);
  g_autoptr (PlannerStore) store = planner_store_open (db, &error);
  g_assert_no_error (error);
  gint64 id = planner_store_save_plan (store, plan, NULL, 0, &error);
  g_assert_no_error (error);
  g_autoptr (PlannerPlan) loaded = planner_store_load_plan (store, id, &error);
  g_assert_no_error (error);
  g_assert_true (planner_plan_equal (plan, loaded));
  g_clear_object (&store);

  guint n_formats;
  const PlannerExportFormat *formats = planner_export_formats (&n_formats);
  for (guint f = 0; f < n_formats; f++)
    {
      g_autofree char *a = formats[f].write (plan, NULL, NULL, NULL);
      g_autofree char *b = formats[f].write (loaded, NULL, NULL, NULL);
      g_assert_cmpstr (a, ==, b);
    }

  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *script = planner_export_dtensor (loaded, notes, NULL);
  for (const char *p = script; *p != '\0'; p++)
    g_assert_true ((guchar)*p < 0x80);
  /* Linears split on their weights: each has an entry, and nothing is left unexpressed. */
  for (guint i = 0; i < notes->len; i++)
    g_test_message ("note: %s", (char *)g_ptr_array_index (notes, i));
  g_assert_cmpuint (notes->len, ==, 0);
  g_autoptr (GPtrArray) styled = weight_split_ops (loaded);
  g_assert_cmpuint (styled->len, >=, 8);
  /* The two identical blocks share wildcard keys. */
  assert_contains (script, "    'blocks.*.up': ColwiseParallel(),\n");
  assert_contains (script, "    'blocks.*.down': RowwiseParallel(),\n");
  check_python (loaded, script, styled, sentinel);
  g_assert_false (g_file_test (sentinel, G_FILE_TEST_EXISTS));

  g_autofree char *mindspore = planner_export_mindspore (loaded, NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_assert_true (json_parser_load_from_data (parser, mindspore, -1, &error));
  JsonObject *items = json_object_get_object_member (
      json_node_get_object (json_parser_get_root (parser)), "parallel_strategy_item");
  for (guint i = 0; i < names->len; i++)
    {
      g_autofree char *key
          = g_strdup_printf ("MatMul_%s.weight", (const char *)g_ptr_array_index (names, i));
      g_assert_true (json_object_has_member (items, key));
    }

  g_remove (db);
  g_autofree char *wal = g_strconcat (db, "-wal", NULL);
  g_autofree char *shm = g_strconcat (db, "-shm", NULL);
  g_remove (wal);
  g_remove (shm);
  g_autofree char *graph_json = g_build_filename (tmp_dir, "hostile-graph.json", NULL);
  g_remove (graph_json);
}

static void
test_python_string (void)
{
  const char *texts[] = {
    "",
    "plain",
    "it's",
    "\"double\"",
    "back\\slash",
    "new\nline",
    "cr\r",
    "tab\t",
    "nul-less \x01\x1f\x7f",
    "'''",
    "\"\"\"",
    "\\'",
    "张量",
    "\U0001F600 emoji",
    "'; DROP TABLE x; --",
  };

  for (guint i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      g_autofree char *literal = planner_export_python_string (texts[i]);
      g_assert_true (literal[0] == '\'' && literal[strlen (literal) - 1] == '\'');
      for (const char *p = literal; *p != '\0'; p++)
        g_assert_true ((guchar)*p >= 0x20 && (guchar)*p < 0x7f);
    }
  g_autofree char *quoted = planner_export_python_string ("it's\n");
  g_assert_cmpstr (quoted, ==, "'it\\'s\\n'");
  if (python == NULL)
    {
      g_test_skip ("python3 is not installed: the literals are not read back");
      return;
    }
  /* Python reads each literal back as the very text (compared as UTF-8 bytes, hex). */
  for (guint i = 0; i < G_N_ELEMENTS (texts); i++)
    {
      g_autofree char *literal = planner_export_python_string (texts[i]);
      g_autofree char *program
          = g_strdup_printf ("import sys; sys.stdout.write((%s).encode('utf-8').hex())", literal);
      const char *argv[] = { python, "-c", program, NULL };
      g_autofree char *out = NULL;
      g_autoptr (GError) error = NULL;
      int status;
      g_assert_true (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                   NULL, &status, &error));
      g_assert_true (g_spawn_check_wait_status (status, NULL));
      GString *hex = g_string_new (NULL);
      for (const char *p = texts[i]; *p != '\0'; p++)
        g_string_append_printf (hex, "%02x", (guchar)*p);
      g_assert_cmpstr (out, ==, hex->str);
      g_string_free (hex, TRUE);
    }
}

/* ---- mindspore ---- */

static void
check_mindspore (PlannerPlan *plan, const char *text)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  g_assert_true (json_parser_load_from_data (parser, text, -1, &error));
  g_assert_no_error (error);
  JsonObject *root = json_node_get_object (json_parser_get_root (parser));
  g_assert_cmpint (json_object_get_int_member (root, "current_stage"), ==, 0);

  /* Every op that takes a parameter, keyed as MindSpore looks it up: <Primitive>_<its first
   * parameter>, its inputs in the primitive's order (Gather: table, ids), a Linear's input as
   * the 2-D [rows, K] of the MatMul after a reshape and its bias as an Add of [rows, N] and
   * the bias; per dim how many ways it is split (the global size over the local shard's). */
  JsonObject *strategies = json_object_get_object_member (root, "parallel_strategy_item");
  guint expected = 0;
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
      gint64 split[PLANNER_MAX_OPERANDS][PLANNER_MAX_RANK];
      planner_plan_op_layouts (plan, i, in, out);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (graph, op->inputs[k]);
          gint64 local[PLANNER_MAX_RANK];
          planner_layout_local_shape (&in[k], mesh, t->shape, local);
          for (guint d = 0; d < t->rank; d++)
            split[k][d] = t->shape[d] / local[d];
        }
      const PlannerTensor *w
          = op->n_inputs > 1 ? planner_graph_get_tensor (graph, op->inputs[1]) : NULL;
      if (w == NULL || w->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      g_autofree char *key = NULL;
      g_autoptr (GString) want = g_string_new (NULL);
      const PlannerTensor *x = planner_graph_get_tensor (graph, op->inputs[0]);
      if (op->type == PLANNER_OP_EMBEDDING)
        {
          key = g_strdup_printf ("Gather_%s", w->name);
          g_string_printf (want,
                           "[[%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT "],[%" G_GINT64_FORMAT
                           ",%" G_GINT64_FORMAT "]]",
                           split[1][0], split[1][1], split[0][0], split[0][1]);
        }
      else if (op->type == PLANNER_OP_MATMUL)
        {
          gint64 rows = 1;
          for (guint d = 0; d + 1 < x->rank; d++)
            rows *= split[0][d];
          key = g_strdup_printf ("MatMul_%s", w->name);
          g_string_printf (want,
                           "[[%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT "],[%" G_GINT64_FORMAT
                           ",%" G_GINT64_FORMAT "]]",
                           rows, split[0][x->rank - 1], split[1][0], split[1][1]);
        }
      else if (op->type == PLANNER_OP_RMS_NORM)
        {
          key = g_strdup_printf ("RmsNorm_%s", w->name);
          g_string_printf (want,
                           "[[%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT
                           "],[%" G_GINT64_FORMAT "]]",
                           split[0][0], split[0][1], split[0][2], split[1][0]);
        }
      else
        continue;
      expected++;
      JsonObject *item = json_object_get_object_member (strategies, key);
      if (item == NULL)
        g_error ("%s: no strategy %s", op->name, key);
      g_assert_cmpint (json_object_get_int_member (item, "stage"), ==, 0);
      g_autoptr (JsonGenerator) gen = json_generator_new ();
      json_generator_set_root (gen, json_object_get_member (item, "parallel_strategy"));
      g_autofree char *got = json_generator_to_data (gen, NULL);
      g_assert_cmpstr (got, ==, want->str);
      if (op->type == PLANNER_OP_MATMUL && op->n_inputs > 2)
        expected++; /* its bias: Add_<bias> */
    }
  g_assert_cmpuint (json_object_get_size (strategies), ==, expected);

  /* Every parameter: the device matrix covers the mesh, the tensor map (from the right, -1
   * whole) gives each dim's split, the shape is global. */
  JsonObject *layouts = json_object_get_object_member (root, "parallel_layout_item");
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (graph, t);
      if (tensor->kind != PLANNER_TENSOR_PARAMETER
          || !json_object_has_member (layouts, tensor->name))
        continue;
      JsonObject *item = json_object_get_object_member (layouts, tensor->name);
      JsonArray *dev = json_object_get_array_member (item, "dev_matrix");
      JsonArray *map = json_object_get_array_member (item, "tensor_map");
      JsonArray *shape = json_object_get_array_member (item, "tensor_shape");
      guint n_dev = json_array_get_length (dev);
      gint64 product = 1, local[PLANNER_MAX_RANK];
      for (guint i = 0; i < n_dev; i++)
        product *= json_array_get_int_element (dev, i);
      g_assert_cmpint (product, ==, planner_mesh_n_devices (mesh));
      g_assert_cmpuint (json_array_get_length (map), ==, tensor->rank);
      g_assert_cmpuint (json_array_get_length (shape), ==, tensor->rank);
      planner_layout_local_shape (planner_plan_get_tensor_layout (plan, t), mesh, tensor->shape,
                                  local);
      for (guint d = 0; d < tensor->rank; d++)
        {
          gint64 m = json_array_get_int_element (map, d);
          g_assert_cmpint (json_array_get_int_element (shape, d), ==, tensor->shape[d]);
          g_assert_cmpint (m, >=, -1);
          g_assert_cmpint (m, <, n_dev);
          gint64 split = m < 0 ? 1 : json_array_get_int_element (dev, n_dev - 1 - m);
          g_assert_cmpint (split, ==, tensor->shape[d] / local[d]);
        }
      g_assert_cmpint (json_object_get_int_member (item, "field"), ==, 0);
      g_assert_true (json_object_has_member (item, "opt_weight_shard_step"));
      g_assert_true (json_object_has_member (item, "opt_weight_shard_size"));
    }
}

/* The MindSpore export of @plan, checked by check_mindspore(); @parser holds it, @notes gets
 * what it cannot express. Returns its "parallel_layout_item". */
static JsonObject *
mindspore_layouts (PlannerPlan *plan, JsonParser *parser, GPtrArray *notes)
{
  g_autofree char *text = planner_export_mindspore (plan, notes);

  check_mindspore (plan, text);
  g_assert_true (json_parser_load_from_data (parser, text, -1, NULL));
  return json_object_get_object_member (json_node_get_object (json_parser_get_root (parser)),
                                        "parallel_layout_item");
}

static void
test_mindspore (void)
{
  g_autoptr (PlannerPlan) plan = make_plan ("llama-tiny", "dp=2,mp=2", "megatron");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *layouts = mindspore_layouts (plan, parser, notes);
  /* q_proj's weight [N, K] is split on N over mp, the minor axis: [-1 -> dim 1 whole]. */
  JsonObject *q = json_object_get_object_member (layouts, "model.layers.0.self_attn.q_proj.weight");
  JsonArray *map = json_object_get_array_member (q, "tensor_map");
  g_assert_cmpint (json_array_get_int_element (map, 0), ==, 0);
  g_assert_cmpint (json_array_get_int_element (map, 1), ==, -1);
  /* The residual adds keep partial sums, which MindSpore's strategy cannot say: noted. */
  g_assert_cmpuint (notes->len, >, 0);
  g_assert_true (json_object_has_member (json_node_get_object (json_parser_get_root (parser)),
                                         "shardscope_notes"));
}

/* Several mesh axes on one dim: merged into one device-matrix dim when adjacent in mesh order;
 * otherwise the parameter is left out, with a note. */
static void
test_mindspore_merged_axes (void)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *sentinel = g_build_filename (tmp_dir, "unused", NULL);
  g_autoptr (PlannerGraph) graph = hostile_graph (sentinel, names);
  g_autofree char *adjacent
      = g_strdup_printf ("%s=[_,_],[a+b,_]", (char *)g_ptr_array_index (names, 1));
  g_autofree char *apart
      = g_strdup_printf ("%s=[_,_],[a+c,_]", (char *)g_ptr_array_index (names, 2));
  const char *pins[] = { adjacent, apart, NULL };
  g_autoptr (PlannerPlan) plan = plan_of_graph (graph, "a=2,b=2,c=2", NULL, pins);
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *layouts = mindspore_layouts (plan, parser, notes);
  g_autofree char *w1 = g_strconcat (g_ptr_array_index (names, 1), ".weight", NULL);
  g_autofree char *w2 = g_strconcat (g_ptr_array_index (names, 2), ".weight", NULL);
  JsonObject *item = json_object_get_object_member (layouts, w1);
  JsonArray *dev = json_object_get_array_member (item, "dev_matrix");
  g_assert_cmpuint (json_array_get_length (dev), ==, 2);
  g_assert_cmpint (json_array_get_int_element (dev, 0), ==, 4);
  g_assert_cmpint (json_array_get_int_element (dev, 1), ==, 2);
  g_assert_cmpint (
      json_array_get_int_element (json_object_get_array_member (item, "tensor_map"), 0), ==, 1);
  g_assert_false (json_object_has_member (layouts, w2));
  gboolean noted = FALSE;
  for (guint i = 0; i < notes->len; i++)
    noted |= g_str_has_prefix (g_ptr_array_index (notes, i), w2);
  g_assert_true (noted);
  g_autofree char *graph_json = g_build_filename (tmp_dir, "hostile-graph.json", NULL);
  g_remove (graph_json);
}

/* ---- csv ---- */

/* RFC 4180 rows of @text. */
static GPtrArray *
parse_csv (const char *text)
{
  GPtrArray *rows = g_ptr_array_new_with_free_func ((GDestroyNotify)g_ptr_array_unref);
  GPtrArray *row = g_ptr_array_new_with_free_func (g_free);
  GString *field = g_string_new (NULL);
  const char *p = text;

  while (*p != '\0')
    {
      if (*p == '"')
        {
          for (p++; !(*p == '"' && p[1] != '"'); p++)
            {
              g_assert_true (*p != '\0');
              if (*p == '"')
                p++;
              g_string_append_c (field, *p);
            }
          p++;
        }
      while (*p != ',' && *p != '\r' && *p != '\n' && *p != '\0')
        g_string_append_c (field, *p++);
      g_ptr_array_add (row, g_strdup (field->str));
      g_string_truncate (field, 0);
      if (*p == ',')
        {
          p++;
          continue;
        }
      g_assert_true (p[0] == '\r' && p[1] == '\n');
      p += 2;
      g_ptr_array_add (rows, row);
      row = g_ptr_array_new_with_free_func (g_free);
    }
  g_ptr_array_unref (row);
  g_string_free (field, TRUE);
  return rows;
}

static void
test_csv (void)
{
  g_autofree char *sentinel = g_build_filename (tmp_dir, "unused", NULL);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (PlannerGraph) graph = hostile_graph (sentinel, names);
  g_autofree char *pin = g_strdup_printf ("%s=[dp,_],[mp,_]", (char *)g_ptr_array_index (names, 0));
  const char *pins[] = { pin, NULL };
  g_autoptr (PlannerPlan) plan = plan_of_graph (graph, "dp=2,mp=2", NULL, pins);
  g_autoptr (GError) error = NULL;
  guint n_ops = planner_graph_get_n_ops (graph);
  guint n_redist = planner_plan_get_n_redistributions (plan);

  g_assert_cmpuint (n_redist, >, 0);
  g_autofree char *text = planner_export_csv (plan, NULL);
  g_autoptr (GPtrArray) rows = parse_csv (text);
  g_assert_cmpuint (rows->len, ==, 1 + n_ops + n_redist);
  for (guint r = 0; r < rows->len; r++)
    g_assert_cmpuint (((GPtrArray *)g_ptr_array_index (rows, r))->len, ==, 12);
  GPtrArray *header = g_ptr_array_index (rows, 0);
  g_assert_cmpstr (g_ptr_array_index (header, 2), ==, "name");
  g_assert_cmpstr (g_ptr_array_index (header, 10), ==, "estimated_us");
  g_assert_cmpstr (g_ptr_array_index (header, 11), ==, "measured_us");
  for (guint i = 0; i < n_ops; i++)
    {
      GPtrArray *row = g_ptr_array_index (rows, 1 + i);
      const PlannerOpPlan *p = planner_plan_get_op (plan, i);
      g_assert_cmpstr (g_ptr_array_index (row, 0), ==, "op");
      /* Names with quotes, commas and line breaks come back whole. */
      g_assert_cmpstr (g_ptr_array_index (row, 2), ==, planner_graph_get_op (graph, i)->name);
      g_assert_cmpfloat (g_ascii_strtod (g_ptr_array_index (row, 10), NULL), ==,
                         p->compute_time_s * 1e6);
      g_assert_cmpstr (g_ptr_array_index (row, 11), ==, "");
    }
  GPtrArray *first = g_ptr_array_index (rows, 1 + n_ops);
  g_autofree char *redist_name = planner_store_redistribution_name (plan, 0);
  g_autofree char *from = planner_layout_to_string (
      &planner_plan_get_redistribution (plan, 0)->from, planner_plan_get_mesh (plan));
  g_assert_cmpstr (g_ptr_array_index (first, 0), ==, "redistribution");
  g_assert_cmpstr (g_ptr_array_index (first, 2), ==, redist_name);
  g_assert_cmpstr (g_ptr_array_index (first, 5), ==, from);
  g_assert_cmpint (g_ascii_strtoll (g_ptr_array_index (first, 9), NULL, 10), ==,
                   (gint64)planner_plan_get_redistribution (plan, 0)->bytes);

  /* Measured times from a trial run of the stored plan. */
  g_autofree char *db = g_build_filename (tmp_dir, "csv.db", NULL);
  g_autoptr (PlannerStore) store = planner_store_open (db, &error);
  g_assert_no_error (error);
  gint64 id = planner_store_save_plan (store, plan, "csv", 0, &error);
  g_assert_no_error (error);
  PlannerTrialMeasurement m[] = {
    { PLANNER_MEASUREMENT_OP, planner_graph_get_op (graph, 0)->name, 1.0, 12.25 },
    { PLANNER_MEASUREMENT_REDISTRIBUTION, redist_name, 2.0, 3.5 },
  };
  planner_store_add_trial_run (store, id, "cpu", 4, 0, 0, m, G_N_ELEMENTS (m), &error);
  g_assert_no_error (error);
  g_autoptr (GPtrArray) runs = planner_store_list_trial_runs (store, id, &error);
  g_assert_no_error (error);
  g_autofree char *measured = planner_export_csv (plan, g_ptr_array_index (runs, 0));
  g_autoptr (GPtrArray) measured_rows = parse_csv (measured);
  g_assert_cmpstr (g_ptr_array_index ((GPtrArray *)g_ptr_array_index (measured_rows, 1), 11), ==,
                   "12.25");
  g_assert_cmpstr (g_ptr_array_index ((GPtrArray *)g_ptr_array_index (measured_rows, 2), 11), ==,
                   "");
  g_assert_cmpstr (
      g_ptr_array_index ((GPtrArray *)g_ptr_array_index (measured_rows, 1 + n_ops), 11), ==, "3.5");
  g_clear_object (&store);
  g_remove (db);
  g_autofree char *graph_json = g_build_filename (tmp_dir, "hostile-graph.json", NULL);
  g_remove (graph_json);
}

static void
test_csv_field (void)
{
  const char *cases[][2] = {
    { "plain", "plain" },
    { "a,b", "\"a,b\"" },
    { "say \"hi\"", "\"say \"\"hi\"\"\"" },
    { "two\nlines", "\"two\nlines\"" },
    { " padded ", "\" padded \"" },
    { "", "" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GString) out = g_string_new (NULL);
      planner_export_csv_field (out, cases[i][0]);
      g_assert_cmpstr (out->str, ==, cases[i][1]);
    }
}

/* The .shard() module: every op without a parameter that has a MindSpore primitive, by cell
 * path and attribute, its strategy in the primitive's input order; a dim split by two axes
 * as a Layout; Reshape and the rotary embedding said, not written. */
static void
test_mindspore_shard (void)
{
  g_autoptr (PlannerPlan) plan = make_plan ("llama-tiny", "dp=2,mp=2", "megatron");
  g_autoptr (PlannerPlan) dp = make_plan ("llama-tiny", "dp=2,mp=2", "dp");
  g_autoptr (GPtrArray) notes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  g_autofree char *text = planner_export_mindspore_shard (plan, notes, &error);
  g_autofree char *dp_text = planner_export_mindspore_shard (dp, NULL, &error);

  g_assert_no_error (error);
  /* q, k, v [batch, heads, seq, head_dim]: batch over dp, heads over mp. */
  assert_contains (text,
                   "    ('model.layers.0.self_attn.sdpa', 'model.layers.0.self_attn', 'sdpa', "
                   "'FlashAttentionScore', ((2, 2, 1, 1), (2, 2, 1, 1), (2, 2, 1, 1))),\n");
  assert_contains (text,
                   "    ('model.layers.1.mlp.act_fn', 'model.layers.1.mlp', 'act_fn', 'SiLU', "
                   "((2, 1, 2),)),\n");
  g_assert_null (strstr (text, "'MatMul'"));
  g_assert_null (strstr (text, "layout("));
  assert_contains (text,
                   "#   model.layers.*.self_attn.q_view: MindSpore's Reshape takes no strategy");
  assert_contains (text, "#   model.layers.*.self_attn.rotary_q: no single MindSpore primitive");
  /* The batch over dp and mp both: one dim, two axes. */
  assert_contains (dp_text, "'Transpose', (layout(('dp', 'mp'), 'None', 'None', 'None'),)),\n");
  if (python != NULL)
    {
      g_autofree char *path = g_build_filename (tmp_dir, "shard_plan.py", NULL);
      g_assert_true (g_file_set_contents (path, dp_text, -1, NULL));
      const char *argv[] = { python, "-m", "py_compile", path, NULL };
      int status;
      g_autofree char *err = NULL;
      g_assert_true (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL,
                                   &err, &status, NULL));
      if (!g_spawn_check_wait_status (status, NULL))
        g_error ("py_compile: %s", err);
      g_remove (path);
    }
}

/* JAX: a spec per parameter in its Hugging Face shape, the inputs and outputs, a constraint
 * before each op whose input the plan redistributes, and the plan's collectives. */
static void
test_jax (void)
{
  g_autoptr (PlannerPlan) plan = make_plan ("llama-tiny", "dp=2,mp=2", "megatron-sp");
  g_autoptr (GError) error = NULL;
  g_autofree char *text = planner_export_jax (plan, NULL, &error);

  g_assert_no_error (error);
  assert_contains (text, "MESH_SHAPE = (2, 2)\nMESH_AXES = ('dp', 'mp')\n");
  assert_contains (text, "    'model.layers.0.self_attn.q_proj.weight': P('mp', None),\n");
  assert_contains (text, "    'model.layers.0.self_attn.o_proj.weight': P(None, 'mp'),\n");
  assert_contains (text, "INPUTS = {\n    'input_ids': P('dp', None),\n}\n");
  assert_contains (text, "OUTPUTS = {\n    'logits': P('dp', None, 'mp'),\n}\n");
  /* Gathered before q, k and v; split on the sequence before each norm. */
  assert_contains (text, "    'model.layers.0.self_attn.q_proj': (P('dp', None, None), None),\n");
  assert_contains (text, "    'model.layers.0.input_layernorm': (P('dp', 'mp', None), None),\n");
  g_assert_null (strstr (text, "'model.layers.0.self_attn.o_proj': ("));
  /* The vocab-parallel lookup's partial sums are reduced at its output, as the plan does (left
   * to itself GSPMD gathers the token ids over dp instead: one all-gather more). */
  assert_contains (text, "OUTPUT_CONSTRAINTS = {\n    'model.embed_tokens': P('dp', None, None),\n}\n");
  assert_contains (text, "COLLECTIVES = {'all-reduce': 0, 'all-gather': 5, 'reduce-scatter': 5, "
                         "'all-to-all': 0}\n");
}

static void
test_table (void)
{
  guint n;
  const PlannerExportFormat *formats = planner_export_formats (&n);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerPlan) plan = make_plan ("gpt2-tiny", "dp=2,mp=2", "megatron");

  g_assert_cmpuint (n, ==, 5);
  g_assert_cmpstr (formats[0].name, ==, "dtensor");
  g_assert_true (planner_export_format_lookup ("mindspore-shard") == &formats[2]);
  g_assert_true (planner_export_format_lookup ("jax") == &formats[3]);
  g_assert_true (planner_export_format_lookup ("csv") == &formats[4]);
  g_assert_null (planner_export_format_lookup ("onnx"));
  g_assert_null (planner_export_to_string (plan, "onnx", &error));
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE);
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  tmp_dir = g_dir_make_tmp ("test-export-XXXXXX", NULL);
  g_assert_nonnull (tmp_dir);
  python = g_find_program_in_path ("python3");

  g_test_add_func ("/planner/export/dtensor/megatron", test_dtensor_megatron);
  g_test_add_func ("/planner/export/dtensor/sequence-parallel", test_dtensor_sequence_parallel);
  g_test_add_func ("/planner/export/dtensor/gpt2", test_dtensor_gpt2);
  g_test_add_func ("/planner/export/dtensor/refused", test_dtensor_refused);
  g_test_add_func ("/planner/export/dtensor/data-parallel", test_dtensor_data_parallel);
  g_test_add_func ("/planner/export/dtensor/experts", test_dtensor_experts);
  g_test_add_func ("/planner/export/dtensor/pipeline-embeddings",
                   test_dtensor_pipeline_embeddings);
  g_test_add_func ("/planner/export/hostile-names", test_hostile_names);
  g_test_add_func ("/planner/export/python-string", test_python_string);
  g_test_add_func ("/planner/export/mindspore", test_mindspore);
  g_test_add_func ("/planner/export/mindspore/merged-axes", test_mindspore_merged_axes);
  g_test_add_func ("/planner/export/csv", test_csv);
  g_test_add_func ("/planner/export/csv/field", test_csv_field);
  g_test_add_func ("/planner/export/mindspore/shard", test_mindspore_shard);
  g_test_add_func ("/planner/export/jax", test_jax);
  g_test_add_func ("/planner/export/table", test_table);
  int status = g_test_run ();
  g_rmdir (tmp_dir);
  return status;
}
