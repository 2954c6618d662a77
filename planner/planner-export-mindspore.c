#define G_LOG_DOMAIN "planner-export-mindspore"

#include "config.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-export-private.h"
#include "planner-export.h"
#include "planner-json.h"
#include "planner-pipeline.h"
#include "planner-request.h"

/* The MindSpore exports (planner-export.h). MindSpore looks an op's strategy up in a strategy
 * file by "<Primitive>_<name of its first parameter input>", so the file can carry only ops
 * that take a parameter, each with its inputs in the primitive's order and ranks as the
 * primitive sees them (Gather takes the table before the ids; a Linear is a 2-D MatMul after
 * a reshape, its bias a separate Add). Every other op is a .shard() call in the generated
 * Python module. Both come from one table: per op, the MindSpore primitives that compute it
 * and, per primitive input, the mesh axes that split each of its dims. */

#define MS_MAX_CALLS 2

typedef struct
{
  const char *primitive; /* "MatMul", "Gather", ... */
  const char *param;     /* the first parameter input's name; NULL: none */
  guint n_inputs;
  guint rank[PLANNER_MAX_OPERANDS];
  /* Per input, per dim: the mesh axes that split it, major first. */
  guint n_axes[PLANNER_MAX_OPERANDS][PLANNER_MAX_RANK];
  guint8 axes[PLANNER_MAX_OPERANDS][PLANNER_MAX_RANK][PLANNER_MAX_AXES];
} MsCall;

typedef struct
{
  guint n_calls;
  MsCall calls[MS_MAX_CALLS];
  const char *why; /* n_calls == 0: why there is no primitive */
} MsOp;

/* Input @k of @call from @layout; with @merge_to > 1 its dims 0 .. merge_to - 1 become one (the
 * reshape to 2-D before a MatMul), their axes in order. */
static void
call_input (MsCall *call, guint k, const PlannerLayout *layout, guint merge_to)
{
  guint r = 0;

  for (guint d = 0; d < layout->rank; d++)
    {
      if (d == 0 || d >= merge_to)
        call->n_axes[k][r++] = 0;
      guint target = r - 1;
      for (guint i = 0; i < layout->n_axes[d]; i++)
        call->axes[k][target][call->n_axes[k][target]++] = layout->axes[d][i];
    }
  call->rank[k] = r;
  call->n_inputs = MAX (call->n_inputs, k + 1);
}

static const char *
elementwise_primitive (PlannerOpType type)
{
  switch (type)
    {
    case PLANNER_OP_ADD:
      return "Add";
    case PLANNER_OP_SUB:
      return "Sub";
    case PLANNER_OP_MUL:
      return "Mul";
    case PLANNER_OP_DIV:
      return "RealDiv";
    case PLANNER_OP_RELU:
      return "ReLU";
    case PLANNER_OP_GELU:
      return "GeLU";
    case PLANNER_OP_SILU:
      return "SiLU";
    case PLANNER_OP_TANH:
      return "Tanh";
    case PLANNER_OP_EXP:
      return "Exp";
    case PLANNER_OP_NEG:
      return "Neg";
    case PLANNER_OP_CAST:
      return "Cast";
    case PLANNER_OP_DROPOUT:
      return "Dropout";
    case PLANNER_OP_SOFTMAX:
      return "Softmax";
    case PLANNER_OP_TRANSPOSE:
      return "Transpose";
    case PLANNER_OP_REDUCE_SUM:
      return "ReduceSum";
    case PLANNER_OP_REDUCE_MEAN:
      return "ReduceMean";
    case PLANNER_OP_CONCAT:
      return "Concat";
    case PLANNER_OP_SPLIT:
      return "Split";
    case PLANNER_OP_BATCH_MATMUL:
      return "BatchMatMul";
    case PLANNER_OP_SDPA:
      return "FlashAttentionScore";
    default:
      return NULL;
    }
}

static const char *
param_name (PlannerGraph *graph, const PlannerOp *op, guint slot)
{
  const PlannerTensor *t
      = slot < op->n_inputs ? planner_graph_get_tensor (graph, op->inputs[slot]) : NULL;
  return t != NULL && t->kind == PLANNER_TENSOR_PARAMETER ? t->name : NULL;
}

/* The primitives of op @i as a MindFormers-style model computes it. */
static void
ms_op (PlannerPlan *plan, guint i, MsOp *m)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerOp *op = planner_graph_get_op (graph, i);
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  const char *primitive;

  memset (m, 0, sizeof *m);
  planner_plan_op_layouts (plan, i, in, out);
  switch (op->type)
    {
    case PLANNER_OP_EMBEDDING:
      if (param_name (graph, op, 1) == NULL)
        break;
      m->n_calls = 1;
      m->calls[0].primitive = "Gather";
      m->calls[0].param = param_name (graph, op, 1);
      call_input (&m->calls[0], 0, &in[1], 0);
      call_input (&m->calls[0], 1, &in[0], 0);
      return;
    case PLANNER_OP_MATMUL:
      if (param_name (graph, op, 1) == NULL)
        break;
      /* x[..., K] reshaped to [rows, K], then MatMul(x, W) and Add(y, bias). */
      m->n_calls = 1;
      m->calls[0].primitive = "MatMul";
      m->calls[0].param = param_name (graph, op, 1);
      call_input (&m->calls[0], 0, &in[0], in[0].rank - 1);
      call_input (&m->calls[0], 1, &in[1], 0);
      if (param_name (graph, op, 2) != NULL)
        {
          PlannerLayout y = out[0];
          y.partial = 0;
          m->n_calls = 2;
          m->calls[1].primitive = "Add";
          m->calls[1].param = param_name (graph, op, 2);
          call_input (&m->calls[1], 0, &y, y.rank - 1);
          call_input (&m->calls[1], 1, &in[2], 0);
        }
      return;
    case PLANNER_OP_RMS_NORM:
    case PLANNER_OP_LAYER_NORM:
      m->n_calls = 1;
      m->calls[0].primitive = op->type == PLANNER_OP_RMS_NORM ? "RmsNorm" : "LayerNorm";
      m->calls[0].param = param_name (graph, op, 1);
      for (guint k = 0; k < op->n_inputs; k++)
        call_input (&m->calls[0], k, &in[k], 0);
      return;
    case PLANNER_OP_RESHAPE:
      m->why = "MindSpore's Reshape takes no strategy: it redistributes as its neighbours need";
      return;
    case PLANNER_OP_ROTARY_EMBEDDING:
      m->why = "no single MindSpore primitive (MindFormers builds it from Mul and Add)";
      return;
    default:
      break;
    }
  if (planner_export_has_parameter_input (graph, op))
    {
      m->why = "no MindSpore primitive takes this op's parameters as the graph has them";
      return;
    }
  if ((primitive = elementwise_primitive (op->type)) == NULL)
    {
      m->why = "no MindSpore primitive for this op type";
      return;
    }
  m->n_calls = 1;
  m->calls[0].primitive = primitive;
  /* FlashAttentionScore's strategy covers q, k and v only (BNSD). */
  for (guint k = 0; k < op->n_inputs; k++)
    call_input (&m->calls[0], k, &in[k], 0);
}

static gint64
splits (const PlannerMesh *mesh, const MsCall *c, guint k, guint d)
{
  gint64 n = 1;
  for (guint i = 0; i < c->n_axes[k][d]; i++)
    n *= mesh->sizes[c->axes[k][d][i]];
  return n;
}

static void
note_partial (PlannerExportNotes *n, PlannerPlan *plan, guint i)
{
  const PlannerOp *op = planner_graph_get_op (planner_plan_get_graph (plan), i);
  PlannerLayout in[PLANNER_MAX_OPERANDS];
  guint32 partial = 0;

  planner_plan_op_layouts (plan, i, in, NULL);
  for (guint k = 0; k < op->n_inputs; k++)
    partial |= in[k].partial;
  if (partial != 0)
    planner_export_note (n, op->name,
                         g_strdup ("takes partial sums on an input; MindSpore's strategy has "
                                   "split counts only and reduces them before the op"));
}

/* ---- the strategy file ---- */

/* MindSpore's layout: a device matrix and, per tensor dim, the index of the device-matrix dim
 * that splits it counted from the right (-1: whole). A dim split by several mesh axes becomes
 * one merged device-matrix dim, which keeps device order only for adjacent axes in mesh
 * order. */
static gboolean
mindspore_layout (const PlannerLayout *layout, const PlannerMesh *mesh, gint64 *dev_matrix,
                  guint *n_dev, gint64 *tensor_map)
{
  int group_of_axis[PLANNER_MAX_AXES];
  guint n = 0;

  for (guint d = 0; d < layout->rank; d++)
    for (guint i = 1; i < layout->n_axes[d]; i++)
      if (layout->axes[d][i] != layout->axes[d][i - 1] + 1)
        return FALSE;
  for (guint a = 0; a < mesh->n_axes;)
    {
      /* The pipeline axis splits stages, not tensors: a stage's device matrix leaves it out
       * (issue 18). */
      if ((int)a == planner_mesh_pipeline_axis (mesh))
        {
          group_of_axis[a] = -1;
          a++;
          continue;
        }
      int d = planner_layout_dim_of_axis (layout, a);
      guint span = d >= 0 ? layout->n_axes[d] : 1;
      dev_matrix[n] = 1;
      for (guint k = 0; k < span; k++)
        {
          group_of_axis[a + k] = (int)n;
          dev_matrix[n] *= mesh->sizes[a + k];
        }
      a += span;
      n++;
    }
  for (guint d = 0; d < layout->rank; d++)
    tensor_map[d] = layout->n_axes[d] == 0 ? -1 : (gint64)n - 1 - group_of_axis[layout->axes[d][0]];
  *n_dev = n;
  return TRUE;
}

char *
planner_export_mindspore (PlannerPlan *plan, GPtrArray *notes)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);

  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (GHashTable) keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  PlannerExportNotes n;

  /* Pipelined plans: each op's stage (issue 18). */
  g_autoptr (PlannerPipeline) pipeline = planner_pipeline_new (plan, FALSE, NULL);
  planner_export_notes_init (&n);
  json_builder_begin_object (b);
  planner_json_add_int (b, "current_stage", 0);

  json_builder_set_member_name (b, "parallel_strategy_item");
  json_builder_begin_object (b);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      MsOp m;
      ms_op (plan, i, &m);
      note_partial (&n, plan, i);
      for (guint c = 0; c < m.n_calls; c++)
        {
          const MsCall *call = &m.calls[c];
          if (call->param == NULL)
            continue;
          char *key = g_strdup_printf ("%s_%s", call->primitive, call->param);
          /* A tied parameter's second user would take the first one's key. */
          if (!g_hash_table_add (keys, key))
            {
              planner_export_note (
                  &n, planner_graph_get_op (graph, i)->name,
                  g_strdup_printf ("its key %s_%s is another op's already (a tied parameter "
                                   "used twice by one primitive); left out",
                                   call->primitive, call->param));
              continue;
            }
          json_builder_set_member_name (b, key);
          json_builder_begin_object (b);
          planner_json_add_int (b, "stage",
                                pipeline ? planner_pipeline_op_stage (pipeline, i) : 0);
          json_builder_set_member_name (b, "parallel_strategy");
          json_builder_begin_array (b);
          for (guint k = 0; k < call->n_inputs; k++)
            {
              json_builder_begin_array (b);
              for (guint d = 0; d < call->rank[k]; d++)
                json_builder_add_int_value (b, splits (mesh, call, k, d));
              json_builder_end_array (b);
            }
          json_builder_end_array (b);
          json_builder_end_object (b);
        }
    }
  json_builder_end_object (b);

  json_builder_set_member_name (b, "parallel_layout_item");
  json_builder_begin_object (b);
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (graph, t);
      const PlannerLayout *layout = planner_plan_get_tensor_layout (plan, t);
      gint64 dev_matrix[PLANNER_MAX_AXES], tensor_map[PLANNER_MAX_RANK];
      guint n_dev = 0;

      if (tensor->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      if (!mindspore_layout (layout, mesh, dev_matrix, &n_dev, tensor_map))
        {
          g_autofree char *text = planner_layout_to_string (layout, mesh);
          planner_export_note (
              &n, tensor->name,
              g_strdup_printf ("layout %s splits a dim over mesh axes that are not adjacent "
                               "in mesh order, which a MindSpore tensor_map cannot say; left "
                               "out of parallel_layout_item",
                               text));
          continue;
        }
      json_builder_set_member_name (b, tensor->name);
      json_builder_begin_object (b);
      planner_json_add_ints (b, "dev_matrix", dev_matrix, n_dev);
      planner_json_add_ints (b, "tensor_map", tensor_map, tensor->rank);
      planner_json_add_ints (b, "tensor_shape", tensor->shape, tensor->rank);
      planner_json_add_int (b, "field", 0);
      planner_json_add_int (b, "opt_weight_shard_step", 0);
      planner_json_add_int (b, "opt_weight_shard_size", 0);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);

  /* What the strategy cannot say travels with it; MindSpore reads only its own members. */
  g_autoptr (GPtrArray) lines = planner_export_notes_collapse (&n);
  planner_export_notes_publish (lines, notes);
  if (lines->len > 0)
    {
      json_builder_set_member_name (b, "shardscope_notes");
      json_builder_begin_array (b);
      for (guint i = 0; i < lines->len; i++)
        json_builder_add_string_value (b, g_ptr_array_index (lines, i));
      json_builder_end_array (b);
    }
  json_builder_end_object (b);
  planner_export_notes_clear (&n);
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  return planner_json_to_string (root);
}

/* ---- the .shard() module ---- */

/* One input's strategy: split counts when no dim is split by more than one axis, else the
 * Layout's aliases: layout('dp', ('dp', 'tp'), 'None'). */
static void
append_input_strategy (GString *out, const PlannerMesh *mesh, const MsCall *call, guint k,
                       gboolean with_layout)
{
  g_string_append (out, with_layout ? "layout(" : "(");
  for (guint d = 0; d < call->rank[k]; d++)
    {
      if (d > 0)
        g_string_append (out, ", ");
      if (!with_layout)
        {
          g_string_append_printf (out, "%" G_GINT64_FORMAT, splits (mesh, call, k, d));
          continue;
        }
      if (call->n_axes[k][d] == 0)
        g_string_append (out, "'None'");
      else if (call->n_axes[k][d] == 1)
        planner_export_append_python_string (out, mesh->names[call->axes[k][d][0]]);
      else
        {
          g_string_append_c (out, '(');
          for (guint i = 0; i < call->n_axes[k][d]; i++)
            {
              if (i > 0)
                g_string_append (out, ", ");
              planner_export_append_python_string (out, mesh->names[call->axes[k][d][i]]);
            }
          g_string_append_c (out, ')');
        }
    }
  g_string_append (out, call->rank[k] == 1 && !with_layout ? ",)" : ")");
}

/* A name as a MindSpore cell path: "model.layers.0.mlp.mul" -> cell "model.layers.0.mlp",
 * primitive attribute "mul". */
static void
split_name (const char *name, char **cell, char **attr)
{
  const char *dot = strrchr (name, '.');
  *cell = dot != NULL ? g_strndup (name, dot - name) : g_strdup ("");
  *attr = g_strdup (dot != NULL ? dot + 1 : name);
}

static const char *
stage_cell (const char *name, char **owned)
{
  gsize prefix = 0;
  if (planner_op_block (name, &prefix) >= 0)
    return *owned = g_strndup (name, prefix);
  return name;
}

/* MindSpore's pipeline settings for a plan with a pp axis: the parallel context
 * (pipeline_stages, pipeline_config; pipeline_segments with virtual stages) and each cell's
 * pipeline_stage (and pipeline_segment, the chunk's index on its stage), as
 * mindspore.parallel.nn.Pipeline takes them (stage_config, segment_config). The layers' cells
 * and the modules with parameters outside them (embedding with the first chunk, final norm and
 * head with the last). MindSpore runs GPipe only as an interleaved schedule. */
static void
append_pipeline (GString *out, PlannerPlan *plan)
{
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, NULL);
  if (pl == NULL)
    return;
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  GString *stages = g_string_new (NULL), *segments = g_string_new (NULL);
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  guint64 devices = 1;

  for (guint a = 0; a < mesh->n_axes; a++)
    devices *= mesh->sizes[a];
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      g_autofree char *owned = NULL;
      const char *cell = stage_cell (op->name, &owned);
      if ((owned == NULL && !planner_export_has_parameter_input (graph, op))
          || !g_hash_table_add (seen, g_strdup (cell)))
        continue;
      g_string_append (stages, "    ");
      planner_export_append_python_string (stages, cell);
      g_string_append_printf (stages, ": %d,\n", planner_pipeline_op_stage (pl, i));
      g_string_append (segments, "    ");
      planner_export_append_python_string (segments, cell);
      g_string_append_printf (segments, ": %u,\n", (guint)pl->op_chunk[i] / pl->p);
    }
  gboolean interleave = pl->v > 1 || pl->schedule == PLANNER_SCHEDULE_GPIPE;
  g_autofree char *chunks = pl->v > 1 ? g_strdup_printf (" of %u chunks each", pl->v) : g_strdup ("");
  g_autofree char *n_segments
      = pl->v > 1 ? g_strdup_printf ("'pipeline_segments': %u, ", pl->v) : g_strdup ("");
  g_string_append_printf (
      out,
      "\n\n# Pipeline over %s: %u stages%s, %s, %u micro-batches. Set PARALLEL_CONTEXT with\n"
      "# mindspore.set_auto_parallel_context(**PARALLEL_CONTEXT) before building the network,\n"
      "# then train pipeline(net) (mindspore.parallel.nn.Pipeline with STAGES%s).\n"
      "PIPELINE_STAGES = %u\nMICRO_BATCHES = %u\n"
      "PIPELINE_CONFIG = {'pipeline_interleave': %s, 'pipeline_scheduler': '%s'}\n"
      "PARALLEL_CONTEXT = {'parallel_mode': 'semi_auto_parallel', 'device_num': %" G_GUINT64_FORMAT
      ", 'pipeline_stages': %u, %s'pipeline_config': PIPELINE_CONFIG}\n"
      "STAGES = {\n%s}\n",
      mesh->names[pl->axis], pl->p,
      chunks,
      planner_schedule_to_string (pl->schedule), pl->m, pl->v > 1 ? " and SEGMENTS" : "",
      pl->p, pl->m, interleave ? "True" : "False",
      pl->schedule == PLANNER_SCHEDULE_GPIPE ? "gpipe" : "1f1b", devices, pl->p,
      n_segments, stages->str);
  if (pl->v > 1)
    g_string_append_printf (out, "SEGMENTS = {\n%s}\n", segments->str);
  else
    g_string_append (out, "SEGMENTS = None\n");
  g_string_append (out,
                   "\n\ndef pipeline(net):\n"
                   "    \"\"\"@net (its cells named as in STAGES) wrapped for MindSpore's "
                   "pipeline: each cell's\n"
                   "    pipeline_stage (and pipeline_segment) set, the batch cut into "
                   "MICRO_BATCHES.\"\"\"\n"
                   "    from mindspore.parallel.nn import Pipeline\n\n"
                   "    return Pipeline(net, MICRO_BATCHES, stage_config=STAGES, "
                   "segment_config=SEGMENTS)\n");
  g_string_free (stages, TRUE);
  g_string_free (segments, TRUE);
}

char *
planner_export_mindspore_shard (PlannerPlan *plan, GPtrArray *notes, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);

  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  GString *out = g_string_new (NULL);
  GString *entries = g_string_new (NULL);
  PlannerExportNotes n;
  const char *name = planner_plan_get_name (plan);
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);

  planner_export_notes_init (&n);
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      MsOp m;
      ms_op (plan, i, &m);
      if (m.n_calls == 0)
        {
          planner_export_note (&n, op->name, g_strdup (m.why));
          continue;
        }
      /* Primitives that take a parameter are in the strategy file; the others here. */
      for (guint c = 0; c < m.n_calls; c++)
        {
          const MsCall *call = &m.calls[c];
          gboolean multi = FALSE;
          g_autofree char *cell = NULL, *attr = NULL;

          if (call->param != NULL)
            continue;
          for (guint k = 0; k < call->n_inputs; k++)
            for (guint d = 0; d < call->rank[k]; d++)
              multi |= call->n_axes[k][d] > 1;
          split_name (op->name, &cell, &attr);
          g_string_append (entries, "    (");
          planner_export_append_python_string (entries, op->name);
          g_string_append (entries, ", ");
          planner_export_append_python_string (entries, cell);
          g_string_append (entries, ", ");
          planner_export_append_python_string (entries, attr);
          g_string_append_printf (entries, ", '%s', (", call->primitive);
          for (guint k = 0; k < call->n_inputs; k++)
            {
              if (k > 0)
                g_string_append (entries, ", ");
              append_input_strategy (entries, mesh, call, k, multi);
            }
          g_string_append (entries, call->n_inputs == 1 ? ",)),\n" : ")),\n");
        }
    }

  g_autoptr (GPtrArray) lines = planner_export_notes_collapse (&n);
  planner_export_notes_publish (lines, notes);

  g_autofree char *about
      = g_strdup_printf ("MindSpore .shard() calls written by Shardscope from plan %s; mesh: %s.",
                         name != NULL ? name : "(unnamed)", mesh_text);
  g_string_append (out, "# ");
  planner_export_append_escaped (out, about, FALSE);
  g_string_append (
      out, "\n"
           "#\n"
           "# The ops a strategy file cannot carry (MindSpore keys a file's strategies by\n"
           "# <Primitive>_<first parameter>, so only ops that take a parameter): each entry is\n"
           "# (op, cell path, primitive attribute, primitive, in_strategy), for a MindSpore\n"
           "# (MindFormers-style) model whose cells carry the Hugging Face names and whose\n"
           "# primitives are attributes named as the op's last name component. apply(net) calls\n"
           "# .shard() on each, before the network is compiled, with semi_auto_parallel and the\n"
           "# strategy file loaded (strategy_ckpt_config={'load_file': 'strategy.json'}).\n"
           "# A dim split by several mesh axes is written with mindspore.parallel.Layout.\n");
  for (guint i = 0; i < lines->len; i++)
    {
      if (i == 0)
        g_string_append (out, "#\n# Not here, with the reason:\n");
      g_string_append (out, "#   ");
      planner_export_append_escaped (out, g_ptr_array_index (lines, i), FALSE);
      g_string_append_c (out, '\n');
    }
  /* A Layout covers one pipeline stage's devices: the pp axis splits no tensor (issue 18). */
  int pp = planner_mesh_pipeline_axis (mesh);
  guint n_layout_axes = 0;
  g_string_append (out, "\nfrom mindspore.parallel import Layout\n\nDEVICE_MATRIX = (");
  for (guint a = 0; a < mesh->n_axes; a++)
    if ((int)a != pp)
      g_string_append_printf (out, "%s%u", n_layout_axes++ > 0 ? ", " : "", mesh->sizes[a]);
  g_string_append (out, n_layout_axes == 1 ? ",)\nALIAS = (" : ")\nALIAS = (");
  n_layout_axes = 0;
  for (guint a = 0; a < mesh->n_axes; a++)
    if ((int)a != pp)
      {
        if (n_layout_axes++ > 0)
          g_string_append (out, ", ");
        planner_export_append_python_string (out, mesh->names[a]);
      }
  g_string_append (out, n_layout_axes == 1 ? ",)\n" : ")\n");
  /* No axis but pp: no dim is split by two axes, so no Layout is needed. */
  g_string_append (out, n_layout_axes > 0 ? "layout = Layout(DEVICE_MATRIX, ALIAS)\n\nSHARDS = [\n"
                                          : "layout = None\n\nSHARDS = [\n");
  g_string_append_len (out, entries->str, entries->len);
  g_string_append (
      out,
      "]\n\n\n"
      "def _cell(net, path):\n"
      "    cell = net\n"
      "    for part in path.split('.') if path else ():\n"
      "        cell = cell[int(part)] if part.isdigit() else getattr(cell, part)\n"
      "    return cell\n\n\n"
      "def apply(net):\n"
      "    \"\"\"Calls .shard() on every primitive of SHARDS in @net; returns how many.\"\"\"\n"
      "    for op, path, attr, primitive, strategy in SHARDS:\n"
      "        prim = getattr(_cell(net, path), attr, None)\n"
      "        if prim is None or type(prim).__name__ != primitive:\n"
      "            raise KeyError('%s: the network has no %s primitive at %s.%s' % (op, "
      "primitive, path, attr))\n"
      "        prim.shard(strategy)\n"
      "    return len(SHARDS)\n");
  append_pipeline (out, plan);
  g_string_free (entries, TRUE);
  planner_export_notes_clear (&n);
  return g_string_free (out, FALSE);
}
