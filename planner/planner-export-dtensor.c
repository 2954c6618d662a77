#define G_LOG_DOMAIN "planner-export-dtensor"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-export-private.h"
#include "planner-export.h"
#include "planner-pipeline.h"
#include "planner-resources.h"

/* The DTensor export (planner-export.h): a script that runs the plan under torchrun. The
 * strategies on the tensor-parallel axis become parallelize_module styles; the other axes may
 * split only the batch, which FSDP2 (fully_shard) does; whatever the styles cannot say makes
 * the export fail with the list of reasons, since a script that computes something else than
 * the plan is worse than none. The fixed Python (styles for Conv1D and blocks, parallelize(),
 * the self-check) lives in data/exports/ and is compiled into the planner's resources. */

typedef enum
{
  STYLE_NONE, /* replicated on the TP axis, or computed locally on its shard */
  STYLE_COLWISE,
  STYLE_ROWWISE,
  STYLE_SEQUENCE,
  STYLE_ACT, /* a module computing on its shard of the activations: ActivationParallel */
  STYLE_REPLICATED, /* a module computed whole, its output used in parts: ReplicatedParallel */
  STYLE_UNSUPPORTED,
} StyleKind;

/* A placement on the TP axis. */
typedef enum
{
  PLACE_REPLICATE,
  PLACE_PARTIAL,
  PLACE_SHARD, /* + dim */
} PlaceKind;

typedef struct
{
  PlaceKind kind;
  int dim; /* -1: the last dim */
} Place;

typedef struct
{
  StyleKind kind;
  gboolean embedding;
  gboolean conv1d; /* a weight [in, out]: transformers' Conv1D (GPT-2) */
  guint groups;    /* > 1: a fused projection whose parts each split by heads (c_attn) */
  gboolean fused;  /* an Einsum projection: its output is as the plan has it (heads in a dim) */
  int seq_dim;
  int act_dim;           /* ActivationParallel: the dim of input and output it splits */
  Place act_in, act_out; /* that dim as a placement of the input and of the output */
  gboolean has_input, has_output;
  Place input, output; /* input_layouts / output_layouts when not the default */
  gboolean output_conflict;
  gboolean local_output_false;
  gboolean whole; /* computed whole on each rank although the plan splits it (noted) */
  gboolean kv_copy; /* ReplicatedParallel of key/value heads each rank holds a copy of */
  /* ReplicatedParallel of a fused weight split into parts (Falcon's query_key_value [q|k|v]):
   * each part's rows, and whether the ranks split it (q's heads) or each uses all of it (the
   * one key/value head). */
  guint n_segments;
  gint64 segment_rows[PLANNER_MAX_OPERANDS];
  gboolean segment_split[PLANNER_MAX_OPERANDS];
  /* PrepareModuleInput/Output on an op without a style. */
  guint n_prepare_in;
  gboolean prepare_set[PLANNER_MAX_OPERANDS];
  Place prepare_in[PLANNER_MAX_OPERANDS];
  Place prepare_in_desired[PLANNER_MAX_OPERANDS];
  gboolean has_prepare_out;
  Place prepare_out, prepare_out_desired;
} OpStyle;

/* One MoE layer's experts module under expert parallelism (ExpertParallel): the graph's
 * dispatch, experts.* and combine ops run inside it. */
typedef struct
{
  char *name;     /* "model.layers.0.mlp.experts" */
  gint64 experts; /* E */
  gint64 slots;   /* C, the capacity per expert and batch row */
  gint64 seq;     /* S: C == S is dropless */
} Experts;

/* One redistribution of a block's input that serves every projection in the block. */
typedef struct
{
  char *name; /* the parent module */
  Place from, to;
} BlockInput;

typedef struct
{
  PlannerPlan *plan;
  PlannerGraph *graph;
  const PlannerMesh *mesh;
  int tp;
  int ep;             /* the axis the experts' weights are split over, or -1 */
  gboolean *expert_op; /* per op: runs inside an ExpertParallel module */
  GArray *experts;     /* Experts */
  OpStyle *styles;
  Place *eff;                  /* per tensor: its TP placement as the styles leave it */
  gboolean *in_chain;          /* per tensor: partial sums a RowwiseParallel output reduces */
  char **hoisted;              /* per tensor: the block whose input redistributes it */
  int *part_of;                /* per op: the op whose module it runs inside, or -1 */
  GArray *blocks;              /* BlockInput */
  PlannerExportNotes refusals; /* what the script cannot do: the export fails */
  PlannerExportNotes notes;    /* what it does otherwise, with the same values */
} Dtensor;

static gboolean
place_equal (Place a, Place b)
{
  return a.kind == b.kind && (a.kind != PLACE_SHARD || a.dim == b.dim);
}

static Place
place_of (const PlannerLayout *layout, guint axis)
{
  Place p = { PLACE_REPLICATE, 0 };
  int d;

  if (layout->partial & (1u << axis))
    p.kind = PLACE_PARTIAL;
  else if ((d = planner_layout_dim_of_axis (layout, axis)) >= 0)
    {
      p.kind = PLACE_SHARD;
      p.dim = d == (int)layout->rank - 1 ? -1 : d;
    }
  return p;
}

static void
append_place (GString *out, Place p)
{
  switch (p.kind)
    {
    case PLACE_REPLICATE:
      g_string_append (out, "Replicate()");
      break;
    case PLACE_PARTIAL:
      g_string_append (out, "Partial()");
      break;
    case PLACE_SHARD:
      g_string_append_printf (out, "Shard(%d)", p.dim);
      break;
    }
}

static char *
place_text (Place p)
{
  GString *out = g_string_new (NULL);
  append_place (out, p);
  return g_string_free (out, FALSE);
}

static const char *
style_name (const OpStyle *s)
{
  switch (s->kind)
    {
    case STYLE_COLWISE:
      return s->conv1d ? "Conv1DParallel" : s->groups > 1 ? "FusedColwiseParallel" : "ColwiseParallel";
    case STYLE_ROWWISE:
      return s->conv1d ? "Conv1DParallel" : "RowwiseParallel";
    case STYLE_SEQUENCE:
      return "SequenceParallel";
    case STYLE_ACT:
      return "ActivationParallel";
    case STYLE_REPLICATED:
      return "ReplicatedParallel";
    default:
      return NULL;
    }
}

/* What a style wants its input to be on the TP axis. */
static Place
style_desired_input (const OpStyle *s)
{
  Place p = { PLACE_REPLICATE, 0 };
  if (s->kind == STYLE_ROWWISE && !s->embedding)
    p = (Place){ PLACE_SHARD, -1 };
  else if (s->kind == STYLE_SEQUENCE)
    p = (Place){ PLACE_SHARD, s->seq_dim };
  else if (s->kind == STYLE_ACT)
    p = s->act_in;
  return p;
}

/* What a style takes its input to be when input_layouts is not given. */
static Place
style_default_input (const OpStyle *s)
{
  if (s->kind == STYLE_ROWWISE)
    return (Place){ PLACE_SHARD, -1 };
  return style_desired_input (s);
}

static Place
style_default_output (const OpStyle *s)
{
  if (s->kind == STYLE_COLWISE)
    return (Place){ PLACE_SHARD, -1 };
  if (s->kind == STYLE_SEQUENCE)
    return (Place){ PLACE_SHARD, s->seq_dim };
  if (s->kind == STYLE_ACT)
    return s->act_out;
  return (Place){ PLACE_REPLICATE, 0 };
}

static void
unsupported (Dtensor *x, guint i, char *reason)
{
  x->styles[i].kind = STYLE_UNSUPPORTED;
  planner_export_note (&x->refusals, planner_graph_get_op (x->graph, i)->name, reason);
}

static const char *
axis_name (Dtensor *x, int axis)
{
  return axis >= 0 ? x->mesh->names[axis] : "none";
}

/* A module whose strategy on the TP axis splits only its activations, the same dim of its
 * first input and of its output (the batch, or the sequence of an embedding or lm_head that
 * the vocabulary does not divide): ActivationParallel, its parameters replicated. */
static gboolean
activation_style (Dtensor *x, const PlannerOp *op, OpStyle *s, int f)
{
  const PlannerOpRule *rule = &op->rule;
  int d = planner_export_operand_dim_of_factor (&rule->inputs[0], f);

  for (guint k = 0; k < op->n_inputs; k++)
    if (planner_graph_get_tensor (x->graph, op->inputs[k])->kind == PLANNER_TENSOR_PARAMETER
        && planner_export_operand_dim_of_factor (&rule->inputs[k], f) >= 0)
      return FALSE;
  if (d < 0 || op->n_outputs != 1
      || planner_export_operand_dim_of_factor (&rule->outputs[0], f) != d)
    return FALSE;
  s->kind = STYLE_ACT;
  s->conv1d = s->embedding = FALSE;
  s->act_dim = d;
  s->act_in = (Place){ PLACE_SHARD, d == (int)rule->inputs[0].rank - 1 ? -1 : d };
  s->act_out = (Place){ PLACE_SHARD, d == (int)rule->outputs[0].rank - 1 ? -1 : d };
  return TRUE;
}

/* Per op, the op whose module it is part of: "a.k_proj.repeat_kv" runs inside the module
 * "a.k_proj" when the graph has an op of that name (its weight's repeat, a norm weight's Mul);
 * -1 for the others. The longest such name wins. */
static int *
find_parts (PlannerGraph *graph)
{
  guint n = planner_graph_get_n_ops (graph);
  int *part_of = g_new (int, n);
  g_autoptr (GHashTable) names = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < n; i++)
    g_hash_table_insert (names, (gpointer)planner_graph_get_op (graph, i)->name,
                         GUINT_TO_POINTER (i + 1));
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *name = g_strdup (planner_graph_get_op (graph, i)->name);
      char *dot;
      part_of[i] = -1;
      while (part_of[i] < 0 && (dot = strrchr (name, '.')) != NULL)
        {
          *dot = '\0';
          guint j = GPOINTER_TO_UINT (g_hash_table_lookup (names, name));
          if (j > 0)
            part_of[i] = (int)j - 1;
        }
    }
  return part_of;
}

/* Whether factor @f of @op splits only rows of activations: dim 0 of its output and of no
 * parameter (ViT's class token expanded to each rank's images), which FSDP's rows are. */
static gboolean
rows_only (Dtensor *x, const PlannerOp *op, int f)
{
  if (op->n_outputs != 1 || planner_export_operand_dim_of_factor (&op->rule.outputs[0], f) != 0)
    return FALSE;
  for (guint k = 0; k < op->n_inputs; k++)
    {
      int d = planner_export_operand_dim_of_factor (&op->rule.inputs[k], f);
      if (d > 0 || (d == 0 && planner_graph_get_tensor (x->graph, op->inputs[k])->kind
                                  == PLANNER_TENSOR_PARAMETER))
        return FALSE;
    }
  return TRUE;
}

/* Whether op @i (or a part of its module) takes a parameter. */
static gboolean
unit_has_parameter (Dtensor *x, guint i)
{
  for (guint j = 0; j < planner_graph_get_n_ops (x->graph); j++)
    if ((j == i || x->part_of[j] == (int)i)
        && planner_export_has_parameter_input (x->graph, planner_graph_get_op (x->graph, j)))
      return TRUE;
  return FALSE;
}

/* Whether op @i's weight (input 1) comes from a RepeatInterleave among its module's parts. */
static gboolean
repeated_weight (Dtensor *x, guint i)
{
  const PlannerOp *op = planner_graph_get_op (x->graph, i);
  int t = op->n_inputs >= 2 ? (int)op->inputs[1] : -1;

  while (t >= 0)
    {
      int producer = planner_graph_get_tensor (x->graph, (guint)t)->producer;
      if (producer < 0 || x->part_of[producer] != (int)i)
        return FALSE;
      const PlannerOp *pop = planner_graph_get_op (x->graph, (guint)producer);
      if (pop->type == PLANNER_OP_REPEAT_INTERLEAVE)
        return TRUE;
      t = pop->n_inputs > 0 ? (int)pop->inputs[0] : -1;
    }
  return FALSE;
}

/* Op @i's weight is part of a fused parameter its module splits first (Falcon's
 * query_key_value.split into q, k and v, k and v then repeated for each rank's copy): one
 * Linear in Hugging Face. It is computed whole on each rank (ReplicatedParallel), and each rank
 * keeps the parts it has in the plan: its share of a part the ranks split by heads, all of one
 * they repeat. FALSE if the graph is not so. */
static Place required_place (Dtensor *x, guint op, guint slot);

static gboolean
split_weight (Dtensor *x, guint i, OpStyle *s)
{
  const PlannerOp *op = planner_graph_get_op (x->graph, i);
  const PlannerTensor *w = planner_graph_get_tensor (x->graph, op->inputs[1]);
  if (w->producer < 0 || x->part_of[w->producer] != (int)i)
    return FALSE;
  const PlannerOp *split = planner_graph_get_op (x->graph, (guint)w->producer);
  if (split->type != PLANNER_OP_SPLIT || split->n_outputs > PLANNER_MAX_OPERANDS
      || planner_graph_get_tensor (x->graph, split->inputs[0])->kind != PLANNER_TENSOR_PARAMETER)
    return FALSE;
  for (guint o = 0; o < split->n_outputs; o++)
    {
      const PlannerTensor *part = planner_graph_get_tensor (x->graph, split->outputs[o]);
      gint64 rows = 1;
      for (guint d = 0; d + 1 < part->rank; d++)
        rows *= part->shape[d];
      if (part->consumers->len != 1)
        return FALSE;
      const PlannerUse *use = &g_array_index (part->consumers, PlannerUse, 0);
      const PlannerOp *user = planner_graph_get_op (x->graph, use->op);
      gboolean repeated = user->type == PLANNER_OP_REPEAT_INTERLEAVE;
      /* The projection that takes this part (through its repeat): the split ones take it
       * split on tp, the repeated ones take each rank's copy. */
      if (!repeated && (user->type != PLANNER_OP_EINSUM || use->slot != 1))
        return FALSE;
      if (!repeated && required_place (x, use->op, 1).kind != PLACE_SHARD)
        return FALSE;
      s->segment_rows[o] = rows;
      s->segment_split[o] = !repeated;
      s->kv_copy |= repeated;
    }
  s->n_segments = split->n_outputs;
  s->kind = STYLE_REPLICATED;
  planner_export_note (&x->notes, op->name,
                       g_strdup_printf ("computed whole on each rank, which keeps its share of "
                                        "the parts the plan splits over %s and all of the "
                                        "parts it repeats (the plan computes only those)",
                                        x->mesh->names[x->tp]));
  return TRUE;
}

/* The dim of the weight (input 1) that the activations' last dim contracts with: 0 for a
 * Conv1D [in, out], the last for a Linear [out, in]; -1 if none. */
static int
weight_in_dim (const PlannerOpRule *rule)
{
  for (guint g = 0; g < rule->n_factors; g++)
    if (rule->factors[g].kind == PLANNER_FACTOR_REDUCTION
        && planner_export_operand_dim_of_factor (&rule->inputs[0], g)
               == (int)rule->inputs[0].rank - 1)
      return planner_export_operand_dim_of_factor (&rule->inputs[1], g);
  return -1;
}

/* "a.b.c" -> "a.b" (a new string), "" for a top-level name. */
static char *parent_of (const char *name);

/* The MoE layers whose expert weights the plan splits on their expert dim (dim 0 of
 * gate_up_proj [E, 2I, H] and down_proj [E, H, I]) over one axis: that axis is EP_DIM, each
 * layer's experts module an ExpertParallel entry, and the dispatch, the experts' ops and the
 * combine run inside it (x->expert_op). Layers whose experts are split otherwise (tensor
 * parallel under megatron) are left to the styles, which refuse them. */
static void
find_experts (Dtensor *x)
{
  guint n_ops = planner_graph_get_n_ops (x->graph);

  x->ep = -1;
  x->expert_op = g_new0 (gboolean, n_ops);
  x->experts = g_array_new (FALSE, TRUE, sizeof (Experts));
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (x->graph, i);
      if (op->type != PLANNER_OP_MOE_DISPATCH || op->n_outputs != 1 || op->n_inputs < 1)
        continue;
      g_autofree char *block = parent_of (op->name);
      g_autofree char *module = g_strconcat (block, block[0] != '\0' ? "." : "", "experts", NULL);
      g_autofree char *prefix = g_strconcat (module, ".", NULL);
      int axis = -1;
      gboolean split = FALSE, other = FALSE;

      /* The experts' parameters: on dim 0 over one axis, nothing else split. */
      for (guint t = 0; t < planner_graph_get_n_tensors (x->graph); t++)
        {
          const PlannerTensor *pt = planner_graph_get_tensor (x->graph, t);
          if (pt->kind != PLANNER_TENSOR_PARAMETER || !g_str_has_prefix (pt->name, prefix))
            continue;
          const PlannerLayout *l = planner_plan_get_tensor_layout (x->plan, t);
          for (guint a = 0; a < x->mesh->n_axes; a++)
            {
              int d = planner_layout_dim_of_axis (l, a);
              if (d == 0 && (axis < 0 || axis == (int)a))
                {
                  axis = (int)a;
                  split = TRUE;
                }
              else if (d >= 0 || (l->partial & (1u << a)))
                other = TRUE;
            }
        }
      if (!split || other)
        continue;
      /* Not run with pipeline stages: say so rather than write a script nothing checked. */
      if (planner_mesh_pipeline_axis (x->mesh) >= 0)
        {
          planner_export_note (&x->refusals, module,
                               g_strdup_printf ("its experts are split over %s on a mesh with a "
                                                "pipeline axis; the script runs expert "
                                                "parallelism without pipeline stages only",
                                                x->mesh->names[axis]));
          continue;
        }
      if (x->ep >= 0 && x->ep != axis)
        {
          planner_export_note (&x->refusals, module,
                               g_strdup_printf ("its experts are split over %s, another layer's "
                                                "over %s; the script has one expert-parallel "
                                                "axis",
                                                x->mesh->names[axis], x->mesh->names[x->ep]));
          continue;
        }
      x->ep = axis;
      const PlannerTensor *slots = planner_graph_get_tensor (x->graph, op->outputs[0]);
      const PlannerTensor *tokens = planner_graph_get_tensor (x->graph, op->inputs[0]);
      Experts e = { g_strdup (module), slots->rank == 4 ? slots->shape[1] : 0,
                    slots->rank == 4 ? slots->shape[2] : 0,
                    tokens->rank == 3 ? tokens->shape[1] : 0 };
      g_array_append_val (x->experts, e);
      x->expert_op[i] = TRUE;
      g_autofree char *combine = g_strconcat (block, block[0] != '\0' ? "." : "", "combine", NULL);
      for (guint j = 0; j < n_ops; j++)
        {
          const PlannerOp *o = planner_graph_get_op (x->graph, j);
          if (g_str_has_prefix (o->name, prefix)
              || (o->type == PLANNER_OP_MOE_COMBINE && strcmp (o->name, combine) == 0))
            x->expert_op[j] = TRUE;
        }
    }
}

/* An op inside an experts module: ExpertParallel runs it, each rank's experts whole on the
 * tokens the dispatch's all_to_all brings from every rank of the ep axis. So on ep the
 * dispatch and the combine split the batch (each rank's rows in and out), the ops between
 * the experts (dim 1 of their activations [B, E, C, ...], dim 0 of the weights); on the
 * other axes only the batch; on the tensor-parallel axis nothing. */
static void
classify_expert (Dtensor *x, guint i)
{
  const PlannerOp *op = planner_graph_get_op (x->graph, i);
  const PlannerOpRule *rule = &op->rule;
  const PlannerStrategy *strategy = &planner_plan_get_op (x->plan, i)->strategy;
  int batch = planner_export_batch_factor (rule);
  gboolean ends = op->type == PLANNER_OP_MOE_DISPATCH || op->type == PLANNER_OP_MOE_COMBINE;

  for (guint a = 0; a < x->mesh->n_axes; a++)
    {
      int fa = planner_export_factor_of_axis (strategy, a);
      if ((int)a == x->ep)
        {
          gboolean expert_dim = fa >= 0 && op->n_inputs > 0
                                && planner_export_operand_dim_of_factor (&rule->inputs[0], fa) == 1;
          if (ends ? fa == batch && fa >= 0 : expert_dim)
            continue;
          unsupported (x, i,
                       g_strdup_printf ("%s over %s; ExpertParallel takes each rank's rows of "
                                        "the batch into the dispatch and out of the combine, "
                                        "and splits the experts' ops by expert (dim 1)",
                                        fa >= 0 ? rule->factors[fa].name : "nothing split",
                                        x->mesh->names[a]));
          return;
        }
      if (fa < 0 || x->mesh->sizes[a] <= 1)
        continue;
      if ((int)a == x->tp)
        {
          unsupported (x, i,
                       g_strdup_printf ("splits factor %s over %s; ExpertParallel runs each "
                                        "expert whole on every rank of the tensor-parallel axis",
                                        rule->factors[fa].name, x->mesh->names[a]));
          return;
        }
      if (fa != batch)
        {
          unsupported (x, i,
                       g_strdup_printf ("splits factor %s over %s; besides the experts over %s, "
                                        "the script splits only the batch there",
                                        rule->factors[fa].name, x->mesh->names[a],
                                        x->mesh->names[x->ep]));
          return;
        }
    }
}

/* Which style, if any, gives op @i its strategy on the TP axis. */
static void
classify (Dtensor *x, guint i)
{
  const PlannerOp *op = planner_graph_get_op (x->graph, i);
  const PlannerOpPlan *p = planner_plan_get_op (x->plan, i);
  const PlannerOpRule *rule = &op->rule;
  OpStyle *s = &x->styles[i];
  int batch = planner_export_batch_factor (rule);
  int f;

  if (x->expert_op[i])
    {
      classify_expert (x, i);
      return;
    }
  for (guint a = 0; a < x->mesh->n_axes; a++)
    {
      int fa = planner_export_factor_of_axis (&p->strategy, a);
      if ((int)a == x->tp || fa < 0 || fa == batch || rows_only (x, op, fa))
        continue;
      unsupported (x, i,
                   g_strdup_printf ("splits factor %s over %s; the script splits over one "
                                    "tensor-parallel axis (%s) and leaves the others to FSDP, "
                                    "which splits only the batch",
                                    rule->factors[fa].name, x->mesh->names[a],
                                    axis_name (x, x->tp)));
      return;
    }
  if (x->tp < 0 || (f = planner_export_factor_of_axis (&p->strategy, x->tp)) < 0)
    return;
  /* A part of a module's computation (its norm weight's Mul, its weight's repeat or slice):
   * it runs inside the module's forward, on what the module's style gives it. */
  if (x->part_of[i] >= 0)
    return;
  gboolean own = planner_export_has_parameter_input (x->graph, op);
  gboolean module = own || unit_has_parameter (x, i);
  /* Its rows of the batch: a module gets BatchParallel (replicated parameters whose
   * gradients DTensor sums over the axis), other ops compute on the rows they are given. */
  if (f == batch)
    {
      if (module && !activation_style (x, op, s, f))
        unsupported (x, i,
                     g_strdup_printf ("splits the batch over %s in a way no style follows",
                                      x->mesh->names[x->tp]));
      return;
    }
  switch (op->type)
    {
    case PLANNER_OP_MATMUL:
    case PLANNER_OP_EMBEDDING:
      if (!module)
        break;
      if (!own && op->type == PLANNER_OP_MATMUL && rule->factors[f].kind != PLANNER_FACTOR_REDUCTION
          && repeated_weight (x, i))
        {
          /* The weight's heads repeated so that each rank holds a copy of its group's key/value
           * head (--kv-replicas): transformers computes the projection whole on each rank
           * (its heads are the copy), and the ranks' gradients of it add up. */
          s->kind = STYLE_REPLICATED;
          s->kv_copy = TRUE;
          return;
        }
      if (!own && op->type == PLANNER_OP_EMBEDDING)
        {
          /* A table the graph slices first (OPT's positions, offset by two): the module looks
           * up in the whole table, so it is computed whole, which gives the same sum. */
          s->whole = TRUE;
          planner_export_note (&x->notes, op->name,
                               g_strdup_printf ("computed whole on each rank instead of split "
                                                "by rows of its table over %s (its table is "
                                                "sliced first, so no style splits it)",
                                                x->mesh->names[x->tp]));
          return;
        }
      if (!own)
        {
          unsupported (x, i,
                       g_strdup_printf ("its weight is computed from a parameter by other ops "
                                        "(%s...), split by factor %s over %s, which no style "
                                        "shards",
                                        planner_graph_get_op (x->graph,
                                                              planner_graph_get_tensor (
                                                                  x->graph, op->inputs[1])
                                                                  ->producer)
                                            ->name,
                                        rule->factors[f].name, x->mesh->names[x->tp]));
          return;
        }
      s->embedding = op->type == PLANNER_OP_EMBEDDING;
      s->conv1d = op->type == PLANNER_OP_MATMUL && !op->attrs.transpose_b;
      if (rule->factors[f].kind == PLANNER_FACTOR_REDUCTION)
        s->kind = STYLE_ROWWISE;
      else if (planner_export_operand_dim_of_factor (&rule->inputs[1], f) >= 0)
        s->kind = STYLE_COLWISE;
      else if (!activation_style (x, op, s, f))
        unsupported (x, i,
                     g_strdup_printf ("splits factor %s of its activations (not the weight) over "
                                      "%s, which no tensor-parallel style does",
                                      rule->factors[f].name, x->mesh->names[x->tp]));
      return;
    case PLANNER_OP_EINSUM:
      {
        /* A projection whose weight the graph shapes by heads. Its output stays as the plan
         * has it: each rank's heads, in the local view transformers reshapes itself. */
        const PlannerTensor *w
            = op->n_inputs >= 2 ? planner_graph_get_tensor (x->graph, op->inputs[1]) : NULL;
        int df = planner_export_operand_dim_of_factor (&rule->inputs[1], f);
        if (w != NULL && w->kind == PLANNER_TENSOR_PARAMETER
            && rule->factors[f].kind != PLANNER_FACTOR_REDUCTION
            && planner_export_operand_dim_of_factor (&rule->inputs[0], f) < 0)
          {
            int in = weight_in_dim (rule);
            /* GPT-2's c_attn: a Conv1D weight [in, parts, heads, head_dim] split by heads is
             * Conv1DParallel over the regrouped columns. */
            if (w->rank == 4 && df == 2 && in == 0)
              {
                s->kind = STYLE_COLWISE;
                s->conv1d = s->fused = TRUE;
                s->groups = (guint)w->shape[1];
                return;
              }
            /* A Linear weight [out..., in] split on its first dim: rows in Hugging Face's
             * order, heads first (GPT-NeoX's and BLOOM's query_key_value, [heads, 3, head_dim,
             * in]): ColwiseParallel cuts each rank its heads of q, k and v. */
            if (df == 0 && in == (int)w->rank - 1)
              {
                s->kind = STYLE_COLWISE;
                s->fused = TRUE;
                return;
              }
            /* [parts, heads or columns, ..., in] split on dim 1 (Phi-3's qkv_proj [3, heads,
             * head_dim, in], gate_up_proj [2, intermediate, in]): each part split, its rows
             * regrouped (FusedColwiseParallel). */
            if (df == 1 && w->rank >= 3 && in == (int)w->rank - 1)
              {
                s->kind = STYLE_COLWISE;
                s->fused = TRUE;
                s->groups = (guint)w->shape[0];
                return;
              }
          }
        if (w != NULL && w->kind != PLANNER_TENSOR_PARAMETER && split_weight (x, i, s))
          return;
        break;
      }
    case PLANNER_OP_LAYER_NORM:
    case PLANNER_OP_RMS_NORM:
      {
        int d = planner_export_operand_dim_of_factor (&rule->inputs[0], f);
        if (d >= 1 && d < (int)rule->inputs[0].rank - 1)
          {
            s->kind = STYLE_SEQUENCE;
            s->seq_dim = d;
            return;
          }
        unsupported (x, i,
                     g_strdup_printf ("splits factor %s over %s; SequenceParallel splits a "
                                      "norm's input on its sequence dim only",
                                      rule->factors[f].name, x->mesh->names[x->tp]));
        return;
      }
    case PLANNER_OP_ROTARY_EMBEDDING:
    case PLANNER_OP_SDPA:
      /* [batch, heads, seq, head_dim]: only the heads may be local. */
      if (planner_export_operand_dim_of_factor (&rule->inputs[0], f) != 1)
        {
          unsupported (x, i,
                       g_strdup_printf ("splits factor %s (not the heads) over %s; transformers "
                                        "computes positions and the causal mask for whole "
                                        "sequences",
                                        rule->factors[f].name, x->mesh->names[x->tp]));
          return;
        }
      break;
    default:
      break;
    }
  if (module)
    unsupported (x, i,
                 g_strdup_printf ("its parameters are split by factor %s over %s, and no "
                                  "tensor-parallel style shards %s modules that way",
                                  rule->factors[f].name, x->mesh->names[x->tp],
                                  planner_op_type_to_string (op->type)));
  /* Ops without parameters compute on the local shards they are given. */
}

static Place
required_place (Dtensor *x, guint op, guint slot)
{
  PlannerLayout in[PLANNER_MAX_OPERANDS];
  planner_plan_op_layouts (x->plan, op, in, NULL);
  return place_of (&in[slot], x->tp);
}

static Place
produced_place (Dtensor *x, guint op, guint slot)
{
  PlannerLayout out[PLANNER_MAX_OPERANDS];
  planner_plan_op_layouts (x->plan, op, NULL, out);
  return place_of (&out[slot], x->tp);
}

/* The partial sums a RowwiseParallel op leaves on the TP axis flow through ops that accept
 * partial inputs (a residual Add) until redistributions reduce them. DTensor reduces at the
 * style's output instead, to what those redistributions reduce to: output_layouts. */
static void
follow_partial (Dtensor *x, guint r, gboolean *whole_chain)
{
  const PlannerOp *op = planner_graph_get_op (x->graph, r);
  OpStyle *s = &x->styles[r];
  guint tensor = op->outputs[0];
  Place stored = place_of (planner_plan_get_tensor_layout (x->plan, tensor), x->tp);
  g_autoptr (GArray) queue = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autofree gboolean *visited = g_new0 (gboolean, planner_graph_get_n_tensors (x->graph));
  gboolean found = FALSE, conflict = FALSE;
  Place target = { PLACE_REPLICATE, 0 };

  /* An out_strategy already reduced it at the op: that is the output. */
  if (stored.kind != PLACE_PARTIAL)
    {
      s->output = stored;
      s->has_output = !place_equal (stored, style_default_output (s));
      x->eff[tensor] = stored;
      return;
    }

  g_array_append_val (queue, tensor);
  visited[tensor] = TRUE;
  for (guint q = 0; q < queue->len; q++)
    {
      guint t = g_array_index (queue, guint, q);
      const PlannerTensor *pt = planner_graph_get_tensor (x->graph, t);
      if (pt->is_output)
        {
          PlannerLayout reduced = *planner_plan_get_tensor_layout (x->plan, t);
          reduced.partial = 0;
          Place p = place_of (&reduced, x->tp);
          conflict |= found && !place_equal (p, target);
          target = p;
          found = TRUE;
        }
      for (guint c = 0; c < pt->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (pt->consumers, PlannerUse, c);
          Place need = required_place (x, use->op, use->slot);
          if (need.kind != PLACE_PARTIAL)
            {
              conflict |= found && !place_equal (need, target);
              target = need;
              found = TRUE;
              continue;
            }
          /* It stays partial through this op: follow its partial outputs. */
          const PlannerOp *cop = planner_graph_get_op (x->graph, use->op);
          for (guint o = 0; o < cop->n_outputs; o++)
            if (produced_place (x, use->op, o).kind == PLACE_PARTIAL && !visited[cop->outputs[o]])
              {
                visited[cop->outputs[o]] = TRUE;
                g_array_append_val (queue, cop->outputs[o]);
              }
        }
    }
  /* Reduced to different layouts downstream (T5's residual stream, summed whole for each
   * layer's norm and split by rows for the last): reduced whole once, at the output, and
   * sliced where the plan reduce-scatters. */
  /* A chain that meets one reduced whole (their Adds sum both) is reduced whole too. */
  for (guint q = 0; q < queue->len && !conflict && whole_chain != NULL; q++)
    if (whole_chain[g_array_index (queue, guint, q)] && target.kind != PLACE_REPLICATE)
      conflict = TRUE;
  if (conflict)
    {
      target = (Place){ PLACE_REPLICATE, 0 };
      planner_export_note (&x->notes, op->name,
                           g_strdup_printf ("its partial sums are reduced whole at its output "
                                            "and sliced where the plan reduce-scatters them "
                                            "over %s",
                                            x->mesh->names[x->tp]));
    }
  s->output = target;
  s->has_output = !place_equal (target, style_default_output (s));
  for (guint q = 0; q < queue->len; q++)
    {
      guint t = g_array_index (queue, guint, q);
      x->eff[t] = target;
      x->in_chain[t] = TRUE;
      if (conflict && whole_chain != NULL)
        whole_chain[t] = TRUE;
    }
}

static char *
edge_name (Dtensor *x, guint tensor, guint consumer, guint slot)
{
  return g_strdup_printf ("%s -> %s:%u", planner_graph_get_tensor (x->graph, tensor)->name,
                          planner_graph_get_op (x->graph, consumer)->name, slot);
}

/* Position of input @slot among the op's activation inputs (a module's forward arguments). */
static int
activation_position (Dtensor *x, const PlannerOp *op, guint slot)
{
  int position = 0;
  for (guint k = 0; k < slot; k++)
    if (planner_graph_get_tensor (x->graph, op->inputs[k])->kind != PLANNER_TENSOR_PARAMETER)
      position++;
  return position;
}

static char *
parent_of (const char *name)
{
  const char *dot = strrchr (name, '.');
  return dot != NULL ? g_strndup (name, dot - name) : g_strdup ("");
}

static gboolean
under (const char *name, const char *prefix)
{
  size_t n = strlen (prefix);
  return n > 0 && strncmp (name, prefix, n) == 0 && name[n] == '.';
}

/* A tensor that the projections of one block need redistributed the same way (a
 * sequence-parallel norm's output, gathered for q, k and v) is redistributed once, at the
 * block's input: PrepareBlockInput on the parent module, as torch's own examples do. Its
 * consumers outside the block (a residual Add) take it as it is. */
static void
hoist_block_inputs (Dtensor *x)
{
  for (guint t = 0; t < planner_graph_get_n_tensors (x->graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (x->graph, t);
      g_autofree char *parent = NULL;
      gboolean ok = pt->kind != PLANNER_TENSOR_PARAMETER && !x->in_chain[t];
      guint inside = 0;
      Place want = { PLACE_REPLICATE, 0 };

      /* The block: the parent of its first consumer that is a projection. */
      for (guint c = 0; ok && parent == NULL && c < pt->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (pt->consumers, PlannerUse, c);
          StyleKind k = x->styles[use->op].kind;
          if (k == STYLE_COLWISE || k == STYLE_REPLICATED)
            parent = parent_of (planner_graph_get_op (x->graph, use->op)->name);
        }
      ok &= parent != NULL && parent[0] != '\0';
      for (guint c = 0; ok && c < pt->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (pt->consumers, PlannerUse, c);
          const PlannerOp *cop = planner_graph_get_op (x->graph, use->op);
          OpStyle *cs = &x->styles[use->op];
          Place need = required_place (x, use->op, use->slot);

          if (!under (cop->name, parent))
            continue;
          ok = (cs->kind == STYLE_COLWISE || cs->kind == STYLE_REPLICATED)
               && activation_position (x, cop, use->slot) == 0
               && place_equal (need, style_desired_input (cs)) && !place_equal (need, x->eff[t])
               && (inside == 0 || place_equal (need, want));
          want = need;
          inside++;
        }
      if (!ok)
        continue;
      /* One projection (BLOOM's fused query_key_value) is redistributed at the block too when
       * the block is an attention: transformers takes the batch and sequence it reshapes to
       * from the block's input, which must then be as the projection has it. */
      if (inside == 1)
        {
          gboolean attention = FALSE;
          for (guint i = 0; i < planner_graph_get_n_ops (x->graph); i++)
            {
              const PlannerOp *op = planner_graph_get_op (x->graph, i);
              attention |= op->type == PLANNER_OP_SDPA && under (op->name, parent);
            }
          ok = attention;
        }
      if (!ok)
        continue;
      if (pt->producer >= 0 && under (planner_graph_get_op (x->graph, pt->producer)->name, parent))
        continue;
      BlockInput b = { g_strdup (parent), x->eff[t], want };
      g_array_append_val (x->blocks, b);
      x->hoisted[t] = g_steal_pointer (&parent);
    }
}

/* A redistribution between two ops that are no modules, where the consumer's enclosing module
 * (a decoder layer, no op of the graph) takes the tensor as its first input and all of the
 * tensor's consumers are inside it: PrepareBlockInput on that module (opt-350m's residual
 * stream, whole after the embeddings and split by rows in the layers). */
static void
enter_blocks (Dtensor *x)
{
  for (guint t = 0; t < planner_graph_get_n_tensors (x->graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (x->graph, t);
      if (pt->kind == PLANNER_TENSOR_PARAMETER || pt->producer < 0 || x->in_chain[t]
          || pt->consumers->len == 0)
        continue;
      const char *producer = planner_graph_get_op (x->graph, pt->producer)->name;
      for (guint c = 0; c < pt->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (pt->consumers, PlannerUse, c);
          const PlannerOp *cop = planner_graph_get_op (x->graph, use->op);
          Place need = required_place (x, use->op, use->slot);
          if (place_equal (need, x->eff[t]) || x->styles[use->op].kind != STYLE_NONE
              || unit_has_parameter (x, use->op) || x->part_of[use->op] >= 0
              || need.kind == PLACE_PARTIAL || x->eff[t].kind == PLACE_PARTIAL)
            continue;
          /* The innermost module around the consumer that holds all the tensor's consumers
           * and not its producer. */
          g_autofree char *inner = parent_of (cop->name);
          gboolean found = FALSE;
          while (inner[0] != '\0' && !under (producer, inner) && !found)
            {
              found = TRUE;
              for (guint k = 0; k < pt->consumers->len; k++)
                found &= under (planner_graph_get_op (
                                    x->graph, g_array_index (pt->consumers, PlannerUse, k).op)
                                    ->name,
                                inner);
              if (!found)
                {
                  char *next = parent_of (inner);
                  g_free (inner);
                  inner = next;
                }
            }
          if (!found)
            break;
          /* A module of the graph's own (an op by that name) has a style or none: not a block. */
          gboolean is_op = FALSE;
          for (guint i = 0; i < planner_graph_get_n_ops (x->graph); i++)
            is_op |= strcmp (planner_graph_get_op (x->graph, i)->name, inner) == 0;
          if (is_op)
            break;
          BlockInput b = { g_strdup (inner), x->eff[t], need };
          g_array_append_val (x->blocks, b);
          x->eff[t] = need;
          break;
        }
    }
}

/* An edge whose tensor arrives on the TP axis other than its consumer needs it: who among the
 * styles places the redistribution? */
static void
place_edge (Dtensor *x, guint tensor, guint c, guint slot, Place produced, Place required)
{
  const PlannerTensor *t = planner_graph_get_tensor (x->graph, tensor);
  const PlannerOp *cop = planner_graph_get_op (x->graph, c);
  OpStyle *cs = &x->styles[c];
  OpStyle *ps = t->producer >= 0 ? &x->styles[t->producer] : NULL;
  int position = activation_position (x, cop, slot);
  g_autofree char *name = edge_name (x, tensor, c, slot);
  g_autofree char *from = place_text (produced);
  g_autofree char *to = place_text (required);

  /* The op itself is refused already, with its reason. */
  if (cs->kind == STYLE_UNSUPPORTED || (ps != NULL && ps->kind == STYLE_UNSUPPORTED))
    return;
  /* ExpertParallel takes the tokens and hands its output over as plain tensors of the
   * rank's rows, whole on the tensor-parallel axis. */
  if (x->expert_op[c] || (t->producer >= 0 && x->expert_op[t->producer]))
    {
      planner_export_note (&x->refusals, name,
                           g_strdup_printf ("%s to %s on %s at the experts, which take and give "
                                            "their tokens whole on that axis",
                                            from, to, x->mesh->names[x->tp]));
      return;
    }
  /* The consumer's style takes it in: input_layouts. */
  if (style_name (cs) != NULL && position == 0 && place_equal (required, style_desired_input (cs)))
    {
      if (cs->kind == STYLE_SEQUENCE)
        {
          /* SequenceParallel takes a plain tensor as already sharded: it cannot gather. */
          planner_export_note (&x->refusals, name,
                               g_strdup_printf ("%s to %s on %s into SequenceParallel, which "
                                                "takes its input as already split on the "
                                                "sequence",
                                                from, to, x->mesh->names[x->tp]));
          return;
        }
      cs->input = produced;
      cs->has_input = !place_equal (produced, style_default_input (cs));
      return;
    }
  /* A module without a style: PrepareModuleInput. */
  if (cs->kind == STYLE_NONE && planner_export_has_parameter_input (x->graph, cop) && position >= 0
      && position < PLANNER_MAX_OPERANDS)
    {
      cs->n_prepare_in = MAX (cs->n_prepare_in, (guint)position + 1);
      cs->prepare_set[position] = TRUE;
      cs->prepare_in[position] = produced;
      cs->prepare_in_desired[position] = required;
      return;
    }
  /* The producer's style hands it over as the consumers need it: output_layouts. */
  if (ps != NULL && ((ps->kind == STYLE_COLWISE && !ps->fused) || ps->kind == STYLE_ACT))
    {
      if (ps->has_output && !place_equal (ps->output, required))
        ps->output_conflict = TRUE;
      ps->output = required;
      ps->has_output = TRUE;
      return;
    }
  if (ps != NULL && ps->kind == STYLE_NONE
      && planner_export_has_parameter_input (x->graph,
                                             planner_graph_get_op (x->graph, t->producer)))
    {
      if (ps->has_prepare_out && !place_equal (ps->prepare_out_desired, required))
        ps->output_conflict = TRUE;
      ps->has_prepare_out = TRUE;
      ps->prepare_out = produced;
      ps->prepare_out_desired = required;
      return;
    }
  planner_export_note (&x->refusals, name,
                       g_strdup_printf ("%s to %s on %s between ops that run on their local "
                                        "shards (no module's input or output), which no style "
                                        "places",
                                        from, to, x->mesh->names[x->tp]));
}

static void
place_edges (Dtensor *x)
{
  guint n_ops = planner_graph_get_n_ops (x->graph);

  for (guint c = 0; c < n_ops; c++)
    {
      const PlannerOp *op = planner_graph_get_op (x->graph, c);
      PlannerLayout in[PLANNER_MAX_OPERANDS];

      planner_plan_op_layouts (x->plan, c, in, NULL);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          guint tensor = op->inputs[k];
          const PlannerTensor *t = planner_graph_get_tensor (x->graph, tensor);
          Place required = place_of (&in[k], x->tp);

          /* Parameters are sharded by the styles themselves, and so are the weights a
           * module's parts make of them (a repeat, a slice, a split of a fused weight). */
          if (t->kind == PLANNER_TENSOR_PARAMETER
              || (t->producer >= 0 && x->part_of[t->producer] >= 0
                  && (x->part_of[t->producer] == (int)c
                      || x->part_of[t->producer] == x->part_of[c])))
            continue;
          /* Partial sums flowing on, or reduced where the chain ends: the RowwiseParallel
           * output_layouts covers both. A block input: PrepareBlockInput. */
          if ((x->in_chain[tensor]
               && (required.kind == PLACE_PARTIAL || place_equal (x->eff[tensor], required)))
              || (x->hoisted[tensor] != NULL && under (op->name, x->hoisted[tensor])))
            continue;
          /* A whole value into a sum whose partial sums the style reduces at its output
           * (OPT's whole position embedding, added to the token embedding): the sum of whole
           * values is the reduced sum. */
          if (required.kind == PLACE_PARTIAL && x->eff[tensor].kind == PLACE_REPLICATE
              && x->in_chain[op->outputs[0]] && x->eff[op->outputs[0]].kind == PLACE_REPLICATE)
            continue;
          if (!place_equal (x->eff[tensor], required))
            place_edge (x, tensor, c, k, x->eff[tensor], required);
        }
    }
  /* An output handed over in a new layout reaches every consumer in it. */
  for (guint i = 0; i < n_ops; i++)
    {
      OpStyle *s = &x->styles[i];
      gboolean colwise = (s->kind == STYLE_COLWISE || s->kind == STYLE_ACT) && s->has_output;
      if (!colwise && !s->has_prepare_out)
        continue;
      const PlannerTensor *t
          = planner_graph_get_tensor (x->graph, planner_graph_get_op (x->graph, i)->outputs[0]);
      for (guint c = 0; c < t->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (t->consumers, PlannerUse, c);
          Place need = required_place (x, use->op, use->slot);
          if (!place_equal (need, colwise ? s->output : s->prepare_out_desired))
            s->output_conflict = TRUE;
        }
    }
  for (guint i = 0; i < n_ops; i++)
    if (x->styles[i].output_conflict)
      unsupported (x, i,
                   g_strdup ("its consumers need its output in different layouts; a style "
                             "hands it over in one"));
}

/* Steps on other axes than TP: FSDP keeps each rank's rows of the batch, so a gather, slice
 * or exchange of rows changes no value and is left out (said in the header); a reduction
 * there would mean a split the script does not make. */
static void
place_other_axes (Dtensor *x)
{
  for (guint r = 0; r < planner_plan_get_n_redistributions (x->plan); r++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (x->plan, r);
      for (guint s = 0; s < red->n_steps; s++)
        {
          const PlannerRedistStep *step = &red->steps[s];
          if ((int)step->axis == x->tp)
            continue;
          g_autofree char *name = planner_store_redistribution_name (x->plan, r);
          g_autofree char *text = planner_redist_step_describe (step, x->mesh);
          gboolean reduces
              = step->kind == PLANNER_STEP_ALL_REDUCE || step->kind == PLANNER_STEP_REDUCE_SCATTER;
          int producer = planner_graph_get_tensor (x->graph, red->tensor)->producer;
          gboolean experts = (producer >= 0 && x->expert_op[producer])
                             || (red->consumer >= 0 && x->expert_op[red->consumer]);
          /* The dispatch's rows to the experts' ranks and back: ExpertParallel's two
           * all_to_alls, on the same [B, E, C, H] slots. */
          if (experts && (int)step->axis == x->ep && step->kind == PLANNER_STEP_ALL_TO_ALL)
            {
              planner_export_note (&x->notes, name,
                                   g_strdup_printf ("%s is ExpertParallel's all_to_all over %s",
                                                    text, x->mesh->names[step->axis]));
              continue;
            }
          planner_export_note (
              reduces ? &x->refusals : &x->notes, name,
              reduces ? g_strdup_printf ("%s reduces over %s, where the script only splits "
                                         "the batch",
                                         text, x->mesh->names[step->axis])
                      : g_strdup_printf ("%s is left out: FSDP keeps each rank's rows of the "
                                         "batch, and moving rows over %s changes no value",
                                         text, x->mesh->names[step->axis]));
          break;
        }
    }
}

static void
append_style (GString *out, const OpStyle *s)
{
  const char *name = style_name (s);
  gboolean first = TRUE;

  if (name == NULL && s->n_prepare_in > 0)
    {
      for (guint pass = 0; pass < 2; pass++)
        {
          g_string_append (out, pass == 0 ? "PrepareModuleInput(input_layouts=("
                                          : ", desired_input_layouts=(");
          for (guint i = 0; i < s->n_prepare_in; i++)
            {
              if (i > 0)
                g_string_append (out, ", ");
              if (!s->prepare_set[i])
                g_string_append (out, "None");
              else
                append_place (out, pass == 0 ? s->prepare_in[i] : s->prepare_in_desired[i]);
            }
          g_string_append (out, s->n_prepare_in == 1 ? ",)" : ")");
        }
      /* The module computes on plain tensors (its parameters are no DTensors). */
      g_string_append (out, ", use_local_output=True)");
      return;
    }
  if (name == NULL && s->has_prepare_out)
    {
      g_string_append (out, "PrepareModuleOutput(output_layouts=(");
      append_place (out, s->prepare_out);
      g_string_append (out, ",), desired_output_layouts=(");
      append_place (out, s->prepare_out_desired);
      g_string_append (out, ",))");
      return;
    }
  g_string_append_printf (out, "%s(", name);
  if (s->conv1d)
    {
      g_string_append (out, s->kind == STYLE_COLWISE ? "True" : "False");
      first = FALSE;
    }
  if (s->kind == STYLE_ACT)
    {
      g_string_append_printf (out, "%d", s->act_dim);
      first = FALSE;
    }
  if (s->kind == STYLE_SEQUENCE && s->seq_dim != 1)
    {
      g_string_append_printf (out, "sequence_dim=%d", s->seq_dim);
      first = FALSE;
    }
  if (s->has_input || (s->kind == STYLE_ROWWISE && s->embedding))
    {
      g_string_append (out, first ? "input_layouts=" : ", input_layouts=");
      append_place (out, s->has_input ? s->input : (Place){ PLACE_REPLICATE, 0 });
      first = FALSE;
    }
  if (s->has_output && s->kind != STYLE_SEQUENCE)
    {
      g_string_append (out, first ? "output_layouts=" : ", output_layouts=");
      append_place (out, s->output);
      first = FALSE;
    }
  if (s->local_output_false)
    {
      g_string_append (out, first ? "use_local_output=False" : ", use_local_output=False");
      first = FALSE;
    }
  if (s->groups > 1)
    g_string_append_printf (out, "%sgroups=%u", first ? "" : ", ", s->groups);
  if (s->n_segments > 0)
    {
      g_string_append (out, first ? "segments=(" : ", segments=(");
      for (guint k = 0; k < s->n_segments; k++)
        g_string_append_printf (out, "%s(%" G_GINT64_FORMAT ", %s)", k > 0 ? ", " : "",
                                s->segment_rows[k], s->segment_split[k] ? "True" : "False");
      g_string_append (out, s->n_segments == 1 ? ",)" : ")");
    }
  g_string_append_c (out, ')');
}

/* ---- the plan's entries ---- */

typedef struct
{
  GPtrArray *names; /* char*: a module, an op or a block's parent */
  GPtrArray *texts; /* char*: its entry */
} Entries;

/* Each entry, a repeated block's identical entries as one wildcard key: valid only where
 * every name the key would reach (among @names and the graph's ops) has this very entry. */
static void
append_entries (GString *out, Dtensor *x, Entries *e, guint *n_entries)
{
  g_autoptr (GHashTable) done = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  guint n_ops = planner_graph_get_n_ops (x->graph);

  for (guint i = 0; i < e->names->len; i++)
    {
      const char *name = g_ptr_array_index (e->names, i);
      const char *text = g_ptr_array_index (e->texts, i);
      g_autofree char *pattern = planner_export_block_pattern (name, FALSE);
      g_autofree char *key = NULL;

      if (pattern != NULL && g_hash_table_contains (done, pattern))
        continue;
      if (pattern != NULL)
        {
          g_auto (GStrv) pattern_parts = g_strsplit (pattern, ".", -1);
          g_auto (GStrv) name_parts = g_strsplit (name, ".", -1);
          gboolean uniform = TRUE;
          guint covered = 0;
          for (guint j = 0; j < e->names->len && uniform; j++)
            if (planner_export_under_pattern (g_ptr_array_index (e->names, j), pattern_parts,
                                              (const char *const *)name_parts))
              {
                uniform = g_strcmp0 (g_ptr_array_index (e->texts, j), text) == 0;
                covered++;
              }
          /* An op without an entry that the key would reach. */
          for (guint j = 0; j < n_ops && uniform; j++)
            {
              const char *op = planner_graph_get_op (x->graph, j)->name;
              if (planner_export_under_pattern (op, pattern_parts, (const char *const *)name_parts)
                  && !g_ptr_array_find_with_equal_func (e->names, op, g_str_equal, NULL))
                uniform = FALSE;
            }
          if (uniform && covered > 1)
            {
              key = planner_export_block_pattern (name, TRUE);
              g_hash_table_add (done, g_strdup (pattern));
            }
        }
      if (key == NULL)
        key = planner_export_literal_key (name);
      g_string_append (out, "    ");
      planner_export_append_python_string (out, key);
      g_string_append (out, ": ");
      g_string_append (out, text);
      g_string_append (out, ",\n");
      (*n_entries)++;
    }
}

static gboolean
has_entry (const OpStyle *s)
{
  return style_name (s) != NULL || s->n_prepare_in > 0 || s->has_prepare_out;
}

/* The entries in graph order, each block input just before the first op under it. */
static void
collect_entries (Dtensor *x, Entries *e)
{
  guint n_ops = planner_graph_get_n_ops (x->graph);
  g_autofree gboolean *placed = g_new0 (gboolean, x->blocks->len + 1);

  for (guint i = 0; i < n_ops; i++)
    {
      const char *name = planner_graph_get_op (x->graph, i)->name;
      for (guint b = 0; b < x->blocks->len; b++)
        {
          BlockInput *block = &g_array_index (x->blocks, BlockInput, b);
          g_autofree char *prefix = g_strconcat (block->name, ".", NULL);
          if (placed[b] || !g_str_has_prefix (name, prefix))
            continue;
          GString *text = g_string_new ("PrepareBlockInput(");
          append_place (text, block->from);
          g_string_append (text, ", ");
          append_place (text, block->to);
          g_string_append_c (text, ')');
          g_ptr_array_add (e->names, g_strdup (block->name));
          g_ptr_array_add (e->texts, g_string_free (text, FALSE));
          placed[b] = TRUE;
        }
      if (!has_entry (&x->styles[i]))
        continue;
      GString *text = g_string_new (NULL);
      append_style (text, &x->styles[i]);
      g_ptr_array_add (e->names, g_strdup (name));
      g_ptr_array_add (e->texts, g_string_free (text, FALSE));
    }
}

/* The axis that splits the most non-batch factors, the one named tp or mp first; -1 when
 * every axis splits only the batch (then all of them are data parallel). */
static int
choose_tp_axis (PlannerPlan *plan, int ep, const gboolean *expert_op)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  guint uses[PLANNER_MAX_AXES] = { 0 };
  int best = -1;

  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      const PlannerStrategy *s = &planner_plan_get_op (plan, i)->strategy;
      /* The experts are ExpertParallel's, on their own axis. */
      if (expert_op[i])
        continue;
      for (guint a = 0; a < mesh->n_axes; a++)
        {
          int f = planner_export_factor_of_axis (s, a);
          if ((int)a == ep)
            continue;
          if (f >= 0 && f != planner_export_batch_factor (&op->rule))
            uses[a]++;
        }
    }
  /* An axis of size 1 parallelizes nothing (semantics.md 2). */
  for (guint a = 0; a < mesh->n_axes; a++)
    if ((strcmp (mesh->names[a], "tp") == 0 || strcmp (mesh->names[a], "mp") == 0)
        && mesh->sizes[a] > 1 && uses[a] > 0)
      return (int)a;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (uses[a] > 0 && mesh->sizes[a] > 1 && (best < 0 || uses[a] > uses[best]))
      best = (int)a;
  return best;
}

/* ---- the script ---- */

static void
append_comment (GString *out, const char *text)
{
  g_string_append (out, "# ");
  planner_export_append_escaped (out, text, FALSE);
  g_string_append_c (out, '\n');
}

/* The graph's source "/abs/dir/config.json?batch=4&seq=8&layers=2" as what a user can read
 * without the author's file system: "config.json", and the value of @key (0 if absent). */
static char *
source_basename (const char *source)
{
  g_autofree char *path = g_strndup (source, strcspn (source, "?"));
  return g_path_get_basename (path);
}

static gint64
source_value (const char *source, const char *key)
{
  const char *query = strchr (source, '?');
  if (query == NULL)
    return 0;
  g_auto (GStrv) pairs = g_strsplit (query + 1, "&", -1);
  for (guint i = 0; pairs[i] != NULL; i++)
    {
      g_autofree char *prefix = g_strconcat (key, "=", NULL);
      if (g_str_has_prefix (pairs[i], prefix))
        return g_ascii_strtoll (pairs[i] + strlen (prefix), NULL, 10);
    }
  return 0;
}

static void
append_name_tuple (GString *out, GPtrArray *names)
{
  g_string_append_c (out, '(');
  for (guint i = 0; i < names->len; i++)
    {
      if (i > 0)
        g_string_append (out, ", ");
      planner_export_append_python_string (out, g_ptr_array_index (names, i));
    }
  g_string_append (out, names->len == 1 ? ",)" : ")");
}

static gboolean
append_resource (GString *out, const char *path, GError **error)
{
  g_autoptr (GBytes) bytes = planner_resources_lookup (path, error);
  if (bytes == NULL)
    return FALSE;
  gsize size;
  const char *data = g_bytes_get_data (bytes, &size);
  g_string_append_len (out, data, (gssize)size);
  return TRUE;
}

/* The first input of @op that is a graph input of kind PLANNER_TENSOR_INPUT with rank 2:
 * the token ids [batch, seq]. */
static const PlannerTensor *
token_input (PlannerGraph *graph)
{
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      if (pt->kind == PLANNER_TENSOR_INPUT && pt->rank == 2)
        return pt;
    }
  return NULL;
}

/* Without token ids (ViT's pixel_values [batch, channels, height, width]): the batch of the
 * first graph input. */
static gint64
first_input_rows (PlannerGraph *graph)
{
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      if (pt->kind == PLANNER_TENSOR_INPUT && pt->rank >= 1)
        return pt->shape[0];
    }
  return 0;
}

static void
dtensor_clear (Dtensor *x)
{
  for (guint b = 0; b < x->blocks->len; b++)
    g_free (g_array_index (x->blocks, BlockInput, b).name);
  g_array_unref (x->blocks);
  planner_export_notes_clear (&x->refusals);
  planner_export_notes_clear (&x->notes);
  g_free (x->styles);
  g_free (x->eff);
  g_free (x->in_chain);
  for (guint t = 0; t < planner_graph_get_n_tensors (x->graph); t++)
    g_free (x->hoisted[t]);
  g_free (x->hoisted);
  g_free (x->part_of);
  for (guint e = 0; e < x->experts->len; e++)
    g_free (g_array_index (x->experts, Experts, e).name);
  g_array_unref (x->experts);
  g_free (x->expert_op);
}

/* EP_DIM and EXPERTS, the ExpertParallel entries: one key for the layers when they are
 * alike (the pattern reaches only experts modules: a dense layer's MLP has none). */
static void
append_experts (GString *out, Dtensor *x)
{
  g_autoptr (GPtrArray) texts = g_ptr_array_new_with_free_func (g_free);
  gboolean alike = TRUE;

  g_string_append (out, "EP_DIM = ");
  if (x->ep >= 0)
    planner_export_append_python_string (out, x->mesh->names[x->ep]);
  else
    g_string_append (out, "None");
  g_string_append (out, "\nEXPERTS = {\n");
  for (guint e = 0; e < x->experts->len; e++)
    {
      const Experts *ex = &g_array_index (x->experts, Experts, e);
      g_ptr_array_add (texts,
                       g_strdup_printf ("ExpertParallel(experts=%" G_GINT64_FORMAT
                                        ", capacity=%" G_GINT64_FORMAT ", dropless=%s)",
                                        ex->experts, ex->slots,
                                        ex->slots >= ex->seq ? "True" : "False"));
      alike &= strcmp (g_ptr_array_index (texts, e), g_ptr_array_index (texts, 0)) == 0;
    }
  g_autofree char *shared = x->experts->len > 1 && alike
                                ? planner_export_block_pattern (
                                      g_array_index (x->experts, Experts, 0).name, TRUE)
                                : NULL;
  for (guint e = 0; e < x->experts->len; e++)
    {
      g_autofree char *key
          = shared != NULL ? g_strdup (shared)
                           : planner_export_literal_key (g_array_index (x->experts, Experts, e).name);
      g_string_append (out, "    ");
      planner_export_append_python_string (out, key);
      g_string_append_printf (out, ": %s,\n", (const char *)g_ptr_array_index (texts, e));
      if (shared != NULL)
        break;
    }
  g_string_append (out, "}\n");
}

/* The data the fixed Python reads: mesh, axes, PLAN and what parallelize() needs besides. */
static void
append_data (GString *out, Dtensor *x, GString *entries)
{
  const char *name = planner_plan_get_name (x->plan);
  const char *source = planner_graph_get_source (x->graph);
  const PlannerTensor *tokens = token_input (x->graph);
  g_autoptr (GPtrArray) dp = g_ptr_array_new ();
  g_autoptr (GPtrArray) blocks = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GString) tied = g_string_new (NULL);
  g_autoptr (GString) fused = g_string_new (NULL);
  g_autoptr (GString) heads = g_string_new (NULL);
  guint n_ops = planner_graph_get_n_ops (x->graph);
  gboolean loss_parallel = FALSE;

  for (guint a = 0; a < x->mesh->n_axes; a++)
    if ((int)a != x->tp && (int)a != planner_mesh_pipeline_axis (x->mesh)
        && x->mesh->sizes[a] > 1)
      g_ptr_array_add (dp, (gpointer)x->mesh->names[a]);
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (x->graph, i);
      const OpStyle *s = &x->styles[i];
      g_autofree char *block = NULL;
      g_auto (GStrv) parts = g_strsplit (op->name, ".", -1);
      GString *prefix = g_string_new (NULL);

      loss_parallel |= s->local_output_false;
      /* The repeated blocks FSDP wraps one by one: the name up to its first index. */
      for (guint k = 0; parts[k] != NULL && block == NULL; k++)
        {
          gboolean digits = parts[k][0] != '\0';
          for (const char *q = parts[k]; *q != '\0'; q++)
            digits &= g_ascii_isdigit (*q);
          if (k > 0)
            g_string_append_c (prefix, '.');
          g_string_append (prefix, digits ? "*" : parts[k]);
          if (digits)
            block = g_strdup (prefix->str);
        }
      g_string_free (prefix, TRUE);
      if (block != NULL && !g_ptr_array_find_with_equal_func (blocks, block, g_str_equal, NULL))
        g_ptr_array_add (blocks, g_steal_pointer (&block));
      if (s->groups > 1)
        {
          g_autofree char *pattern = planner_export_block_pattern (op->name, TRUE);
          g_autofree char *key = pattern != NULL ? g_steal_pointer (&pattern)
                                                 : planner_export_literal_key (op->name);
          g_autofree char *item = planner_export_python_string (key);
          if (strstr (fused->str, item) == NULL)
            g_string_append_printf (fused, "%s%s: %u", fused->len > 0 ? ", " : "", item, s->groups);
        }
    }
  /* The attention modules whose heads the ranks split: transformers reads some head counts
   * from the module (BLOOM's num_heads, Phi-3's config), which parallelize() makes local;
   * False where the key/value heads are the ranks' copies (ReplicatedParallel). */
  for (guint i = 0; x->tp >= 0 && i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (x->graph, i);
      const PlannerOpPlan *p = planner_plan_get_op (x->plan, i);
      int f = planner_export_factor_of_axis (&p->strategy, x->tp);
      if (op->type != PLANNER_OP_SDPA || f < 0
          || planner_export_operand_dim_of_factor (&op->rule.inputs[0], f) != 1)
        continue;
      g_autofree char *parent = parent_of (op->name);
      g_autofree char *prefix = g_strconcat (parent, ".", NULL);
      gboolean kv_split = TRUE;
      for (guint j = 0; j < n_ops; j++)
        if (x->styles[j].kv_copy
            && g_str_has_prefix (planner_graph_get_op (x->graph, j)->name, prefix))
          kv_split = FALSE;
      if (parent[0] == '\0')
        continue;
      g_autofree char *pattern = planner_export_block_pattern (parent, TRUE);
      g_autofree char *key
          = pattern != NULL ? g_steal_pointer (&pattern) : planner_export_literal_key (parent);
      g_autofree char *item = planner_export_python_string (key);
      if (strstr (heads->str, item) == NULL)
        g_string_append_printf (heads, "%s%s: %s", heads->len > 0 ? ", " : "", item,
                                kv_split ? "True" : "False");
    }
  /* A parameter with several users (tied embedding and lm_head) is one tensor in the plan:
   * each later user's attribute is set to the first user's parameter again. */
  for (guint t = 0; t < planner_graph_get_n_tensors (x->graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (x->graph, t);
      const char *attr = strrchr (pt->name, '.');
      if (pt->kind != PLANNER_TENSOR_PARAMETER || pt->consumers->len < 2 || attr == NULL)
        continue;
      for (guint c = 0; c < pt->consumers->len; c++)
        {
          const PlannerUse *use = &g_array_index (pt->consumers, PlannerUse, c);
          g_autofree char *user
              = g_strconcat (planner_graph_get_op (x->graph, use->op)->name, attr, NULL);
          if (strcmp (user, pt->name) == 0)
            continue;
          g_string_append (tied, "(");
          planner_export_append_python_string (tied, user);
          g_string_append (tied, ", ");
          planner_export_append_python_string (tied, pt->name);
          g_string_append (tied, "), ");
        }
    }

  g_string_append (out, "PLAN_NAME = ");
  planner_export_append_python_string (out, name != NULL ? name : "");
  g_string_append (out, "\nMODEL = ");
  if (source != NULL)
    {
      g_autofree char *base = source_basename (source);
      planner_export_append_python_string (out, base);
    }
  else
    g_string_append (out, "None");
  g_string_append_printf (out, "\nBATCH, SEQ = %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT,
                          tokens != NULL ? tokens->shape[0] : first_input_rows (x->graph),
                          tokens != NULL ? tokens->shape[1] : 0);
  gint64 layers = source != NULL ? source_value (source, "layers") : 0;
  if (layers > 0)
    g_string_append_printf (out, "\nLAYERS = %" G_GINT64_FORMAT, layers);
  else
    g_string_append (out, "\nLAYERS = None");
  g_string_append (out, "\nMESH_SHAPE = (");
  for (guint a = 0; a < x->mesh->n_axes; a++)
    g_string_append_printf (out, "%s%u", a > 0 ? ", " : "", x->mesh->sizes[a]);
  g_string_append (out, x->mesh->n_axes == 1 ? ",)\nMESH_DIM_NAMES = (" : ")\nMESH_DIM_NAMES = (");
  for (guint a = 0; a < x->mesh->n_axes; a++)
    {
      if (a > 0)
        g_string_append (out, ", ");
      planner_export_append_python_string (out, x->mesh->names[a]);
    }
  g_string_append (out, x->mesh->n_axes == 1 ? ",)\nTP_DIM = " : ")\nTP_DIM = ");
  if (x->tp >= 0)
    planner_export_append_python_string (out, x->mesh->names[x->tp]);
  else
    g_string_append (out, "None");
  g_string_append (out, "\nDP_DIMS = ");
  append_name_tuple (out, dp);
  g_string_append (out, "\nFSDP_BLOCKS = ");
  append_name_tuple (out, blocks);
  g_string_append_printf (out, "\nLOSS_PARALLEL = %s", loss_parallel ? "True" : "False");
  g_string_append (out, "\nTIED = (");
  if (tied->len > 0)
    g_string_append_len (out, tied->str, (gssize)tied->len - 1);
  g_string_append_printf (out, ")\nFUSED = {%s}\nHEADS = {%s}\n\nPLAN = {\n", fused->str,
                          heads->str);
  g_string_append_len (out, entries->str, entries->len);
  g_string_append (out, "}\n");
  append_experts (out, x);
}

static void
append_header (GString *out, Dtensor *x, GPtrArray *lines)
{
  g_autofree char *mesh_text = planner_mesh_to_string (x->mesh);
  const char *name = planner_plan_get_name (x->plan);
  const char *source = planner_graph_get_source (x->graph);
  g_autofree char *base = source != NULL ? source_basename (source) : g_strdup ("(no source)");
  g_autofree char *about
      = g_strdup_printf ("PyTorch DTensor plan written by Shardscope from plan %s.",
                         name != NULL ? name : "(unnamed)");
  const PlannerTensor *tokens = token_input (x->graph);
  gint64 layers = source != NULL ? source_value (source, "layers") : 0;
  g_autofree char *layers_text
      = layers > 0 ? g_strdup_printf (", %" G_GINT64_FORMAT " layers", layers) : g_strdup ("");
  g_autofree char *sizes
      = tokens != NULL
            ? g_strdup_printf (" (batch %" G_GINT64_FORMAT ", sequence %" G_GINT64_FORMAT "%s)",
                               tokens->shape[0], tokens->shape[1], layers_text)
            : g_strdup ("");
  g_autofree char *model = g_strdup_printf (
      "Model: %s%s; mesh: %s; policy: %s.", base, sizes, mesh_text,
      planner_plan_get_policy (x->plan) != NULL ? planner_plan_get_policy (x->plan) : "none");
  gboolean dp = FALSE, loss_parallel = FALSE, fused = FALSE;

  /* The pipeline axis splits the layers, not the batch (issue 18). */
  int pp = planner_mesh_pipeline_axis (x->mesh);
  g_autofree char *pipeline = planner_pipeline_dtensor_comment (x->plan);
  for (guint a = 0; a < x->mesh->n_axes; a++)
    dp |= (int)a != x->tp && (int)a != pp && x->mesh->sizes[a] > 1;
  for (guint i = 0; i < planner_graph_get_n_ops (x->graph); i++)
    {
      loss_parallel |= x->styles[i].local_output_false;
      fused |= x->styles[i].groups > 1;
    }
  append_comment (out, about);
  append_comment (out, model);
  g_string_append (out, "#\n");
  if (x->tp >= 0)
    {
      g_autofree char *line = g_strdup_printf (
          "Tensor parallelism over %s: PLAN, applied with parallelize_module on mesh['%s'].",
          x->mesh->names[x->tp], x->mesh->names[x->tp]);
      append_comment (out, line);
    }
  else
    append_comment (out, "No mesh axis splits anything but the batch: PLAN is empty.");
  if (dp)
    {
      GString *axes = g_string_new (NULL);
      for (guint a = 0; a < x->mesh->n_axes; a++)
        if ((int)a != x->tp && (int)a != pp && x->mesh->sizes[a] > 1)
          g_string_append_printf (axes, "%s%s", axes->len > 0 ? "+" : "", x->mesh->names[a]);
      g_autofree char *line = g_strdup_printf (
          "Data parallelism over %s (DP_DIMS): FSDP2 fully_shard on those axes of the same mesh "
          "(each of FSDP_BLOCKS, then the model)%s.",
          axes->str, x->tp >= 0 ? ", 2-D with the tensor parallelism" : "");
      append_comment (out, line);
      g_string_free (axes, TRUE);
    }
  if (x->ep >= 0)
    {
      const Experts *ex = &g_array_index (x->experts, Experts, 0);
      guint n = x->mesh->sizes[x->ep];
      g_autofree char *line = g_strdup_printf (
          "Expert parallelism over %s: EXPERTS, ExpertParallel on mesh['%s'] (%u MoE layer%s, %"
          G_GINT64_FORMAT " experts each, %" G_GINT64_FORMAT " per rank, %" G_GINT64_FORMAT
          " slots per expert and batch row%s); the tokens go to their experts' ranks and back "
          "with one all_to_all each way; the router runs whole on every rank.",
          x->mesh->names[x->ep], x->mesh->names[x->ep], x->experts->len,
          x->experts->len == 1 ? "" : "s", ex->experts, ex->experts / (gint64)n, ex->slots,
          ex->slots >= ex->seq ? ", dropless" : ", tokens beyond them dropped as in the plan");
      append_comment (out, line);
    }
  if (pipeline)
    append_comment (out, pipeline);
  g_string_append (out, "#\n"
                        "# On every rank, after torch.distributed.init_process_group():\n"
                        "#     mesh = parallelize(model)        # or parallelize(model, "
                        "mesh=yours), device_type='cuda'\n"
                        "#     rows = local_rows(mesh, len(input_ids))   # this rank's rows of "
                        "the global batch\n"
                        "#     out = model(input_ids[rows], position_ids=positions(input_ids))\n");
  if (loss_parallel)
    g_string_append (out, "#     with loss_parallel():           # the logits stay split over "
                          "the vocabulary\n"
                          "#         loss = causal_lm_loss(out.logits, input_ids[rows])\n"
                          "#         loss.backward()\n");
  else
    g_string_append (out, "#     loss = causal_lm_loss(out.logits, input_ids[rows])   # whole "
                          "logits\n"
                          "#     loss.backward()\n");
  append_comment (out, "position_ids are passed explicitly: under sequence parallelism "
                       "transformers would count them from the local sequence length.");
  if (x->tp >= 0)
    append_comment (out, "Attention runs on each rank's heads; transformers takes the local "
                         "head count from the tensors, so the config stays as it is.");
  if (fused)
    append_comment (out, "FUSED projections keep their columns regrouped by rank (regroup()); "
                         "ungroup() gives a checkpoint back in Hugging Face's order.");
  append_comment (out, "Self-check against the unsharded model on random weights (CPU, gloo):");
  {
    guint devices = 1;
    for (guint a = 0; a < x->mesh->n_axes; a++)
      devices *= x->mesh->sizes[a];
    g_autofree char *line = g_strdup_printf (
        "    torchrun --nproc-per-node %u THIS_FILE.py --config %s", devices,
        source != NULL && g_str_has_suffix (base, ".json") ? base : "CONFIG.json");
    append_comment (out, line);
  }
  g_string_append (out, "#\n");
  if (lines->len == 0)
    append_comment (out, "Every op of the plan is expressed.");
  else
    {
      g_autofree char *head
          = g_strdup_printf ("Done otherwise, with the same values (%u):", lines->len);
      append_comment (out, head);
      for (guint i = 0; i < lines->len; i++)
        {
          g_string_append (out, "#   ");
          planner_export_append_escaped (out, g_ptr_array_index (lines, i), FALSE);
          g_string_append_c (out, '\n');
        }
    }
  g_string_append_c (out, '\n');
}

char *
planner_export_dtensor (PlannerPlan *plan, GPtrArray *notes, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  Dtensor x = { 0 };
  guint n_ops, n_tensors, n_entries = 0;

  x.plan = plan;
  x.graph = planner_plan_get_graph (plan);
  x.mesh = planner_plan_get_mesh (plan);
  planner_export_notes_init (&x.refusals);
  planner_export_notes_init (&x.notes);
  find_experts (&x);
  x.tp = choose_tp_axis (plan, x.ep, x.expert_op);
  n_ops = planner_graph_get_n_ops (x.graph);
  n_tensors = planner_graph_get_n_tensors (x.graph);
  x.styles = g_new0 (OpStyle, n_ops);
  x.eff = g_new0 (Place, n_tensors);
  x.in_chain = g_new0 (gboolean, n_tensors);
  x.hoisted = g_new0 (char *, n_tensors);
  x.blocks = g_array_new (FALSE, TRUE, sizeof (BlockInput));
  x.part_of = find_parts (x.graph);

  for (guint i = 0; i < n_ops; i++)
    classify (&x, i);
  if (x.tp >= 0)
    {
      /* The caller passes graph inputs (token ids, positions) whole on the TP axis. */
      for (guint t = 0; t < n_tensors; t++)
        if (planner_graph_get_tensor (x.graph, t)->kind != PLANNER_TENSOR_INPUT)
          x.eff[t] = place_of (planner_plan_get_tensor_layout (plan, t), x.tp);
      /* Twice: a chain reduced whole because of its consumers makes every chain it meets
       * reduced whole, in either order. */
      g_autofree gboolean *whole_chain = g_new0 (gboolean, n_tensors);
      for (guint pass = 0; pass < 2; pass++)
        for (guint i = 0; i < n_ops; i++)
          if (x.styles[i].kind == STYLE_ROWWISE)
            follow_partial (&x, i, whole_chain);
      for (guint i = 0; i < n_ops; i++)
        {
          OpStyle *s = &x.styles[i];
          const PlannerOp *op = planner_graph_get_op (x.graph, i);
          /* A fused projection's output is as the plan has it, by the regrouping. */
          if ((s->kind == STYLE_COLWISE && !s->fused) || s->kind == STYLE_SEQUENCE
              || s->kind == STYLE_ACT)
            x.eff[op->outputs[0]] = style_default_output (s);
        }
      for (guint i = 0; i < n_ops; i++)
        if (x.styles[i].whole)
          x.eff[planner_graph_get_op (x.graph, i)->outputs[0]] = (Place){ PLACE_REPLICATE, 0 };
      enter_blocks (&x);
      hoist_block_inputs (&x);
      place_edges (&x);
      /* Logits left split over the vocabulary: a DTensor for loss_parallel(). */
      for (guint i = 0; i < n_ops; i++)
        {
          const PlannerOp *op = planner_graph_get_op (x.graph, i);
          OpStyle *s = &x.styles[i];
          if (!planner_graph_get_tensor (x.graph, op->outputs[0])->is_output || s->has_output)
            continue;
          if (s->kind == STYLE_COLWISE)
            s->local_output_false = TRUE;
          /* The loss is a mean over this rank's rows of the data-parallel batch, and DTensor
           * sums the replicated weights' gradients over tp: the logits are gathered. */
          if (s->kind == STYLE_ACT)
            {
              s->has_output = TRUE;
              s->output = (Place){ PLACE_REPLICATE, 0 };
              planner_export_note (&x.notes, op->name,
                                   g_strdup_printf ("its output, a graph output split over %s, "
                                                    "is gathered, so the loss is the mean over "
                                                    "each data-parallel rank's rows",
                                                    x.mesh->names[x.tp]));
            }
        }
    }
  place_other_axes (&x);

  g_autoptr (GPtrArray) refused = planner_export_notes_collapse (&x.refusals);
  g_autoptr (GPtrArray) lines = planner_export_notes_collapse (&x.notes);
  if (refused->len > 0)
    {
      GString *text = g_string_new (NULL);
      for (guint i = 0; i < refused->len && i < 12; i++)
        g_string_append_printf (text, "\n  %s", (const char *)g_ptr_array_index (refused, i));
      if (refused->len > 12)
        g_string_append_printf (text, "\n  ... and %u more", refused->len - 12);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                   "the DTensor export cannot run this plan as planned (%u reason%s); pin "
                   "these ops to Megatron-style strategies on %s, or export another format:%s",
                   refused->len, refused->len == 1 ? "" : "s", axis_name (&x, x.tp), text->str);
      g_string_free (text, TRUE);
      dtensor_clear (&x);
      return NULL;
    }
  planner_export_notes_publish (lines, notes);

  g_autoptr (GString) entries = g_string_new (NULL);
  Entries e = { g_ptr_array_new_with_free_func (g_free), g_ptr_array_new_with_free_func (g_free) };
  if (x.tp >= 0)
    {
      collect_entries (&x, &e);
      append_entries (entries, &x, &e, &n_entries);
    }
  g_ptr_array_unref (e.names);
  g_ptr_array_unref (e.texts);

  GString *out = g_string_new (NULL);
  append_header (out, &x, lines);
  if (!append_resource (out, "exports/dtensor-styles.py", error))
    {
      g_string_free (out, TRUE);
      dtensor_clear (&x);
      return NULL;
    }
  g_string_append (out, "\n\n");
  append_data (out, &x, entries);
  /* PP_DIM, and with a pipeline its split and build_pipeline() (before the self-check's code,
   * which uses them). */
  if (!planner_export_dtensor_pipeline (out, plan, error)
      || !append_resource (out, "exports/dtensor-apply.py", error))
    {
      g_string_free (out, TRUE);
      dtensor_clear (&x);
      return NULL;
    }
  dtensor_clear (&x);
  return g_string_free (out, FALSE);
}
