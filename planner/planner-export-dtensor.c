#define G_LOG_DOMAIN "planner-export-dtensor"

#include "config.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-export.h"
#include "planner-json.h"
#include "planner-plan-json.h"
#include "planner-export-private.h"

/* ---- dtensor ---- */

typedef enum
{
  STYLE_NONE, /* replicated on the TP axis, or computed locally on its shard */
  STYLE_COLWISE,
  STYLE_ROWWISE,
  STYLE_SEQUENCE,
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
  int seq_dim;
  gboolean has_input, has_output;
  Place input, output; /* input_layouts / output_layouts when not the default */
  gboolean output_conflict;
  gboolean local_output_false;
  /* PrepareModuleInput/Output on an op without a style. */
  guint n_prepare_in;
  gboolean prepare_set[PLANNER_MAX_OPERANDS];
  Place prepare_in[PLANNER_MAX_OPERANDS];
  Place prepare_in_desired[PLANNER_MAX_OPERANDS];
  gboolean has_prepare_out;
  Place prepare_out, prepare_out_desired;
} OpStyle;

typedef struct
{
  PlannerPlan *plan;
  PlannerGraph *graph;
  const PlannerMesh *mesh;
  int tp;
  OpStyle *styles;
  Place *eff;         /* per tensor: its TP placement as the styles leave it */
  gboolean *in_chain; /* per tensor: partial sums a RowwiseParallel output reduces */
  PlannerExportNotes notes;
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
      return "ColwiseParallel";
    case STYLE_ROWWISE:
      return "RowwiseParallel";
    case STYLE_SEQUENCE:
      return "SequenceParallel";
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
  return (Place){ PLACE_REPLICATE, 0 };
}

static char *
describe_factor (Dtensor *x, const PlannerOp *op, int f)
{
  return g_strdup_printf ("factor %s", op->rule.factors[f].name);
}

static void
unsupported (Dtensor *x, guint i, char *reason)
{
  x->styles[i].kind = STYLE_UNSUPPORTED;
  planner_export_note (&x->notes, planner_graph_get_op (x->graph, i)->name, reason);
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

  for (guint a = 0; a < x->mesh->n_axes; a++)
    {
      int fa = planner_export_factor_of_axis (&p->strategy, a);
      if ((int)a == x->tp || fa < 0 || fa == batch)
        continue;
      g_autofree char *what = describe_factor (x, op, fa);
      unsupported (x, i,
                   g_strdup_printf ("splits %s over %s; DTensor's tensor-parallel styles shard "
                                    "over one mesh axis (%s) and only the batch over others",
                                    what, x->mesh->names[a],
                                    x->tp >= 0 ? x->mesh->names[x->tp] : "none"));
      return;
    }
  if (x->tp < 0 || (f = planner_export_factor_of_axis (&p->strategy, x->tp)) < 0)
    return;
  gboolean module = planner_export_has_parameter_input (x->graph, op);
  if (f == batch)
    {
      unsupported (x, i,
                   g_strdup_printf ("splits the batch over %s; data parallelism belongs on "
                                    "another mesh axis than the tensor-parallel one",
                                    x->mesh->names[x->tp]));
      return;
    }
  switch (op->type)
    {
    case PLANNER_OP_MATMUL:
    case PLANNER_OP_EMBEDDING:
      if (op->type == PLANNER_OP_MATMUL && !op->attrs.transpose_b)
        {
          unsupported (x, i,
                       g_strdup ("a Conv1D-style weight [in, out] (as GPT-2's); "
                                 "ColwiseParallel and RowwiseParallel take nn.Linear and "
                                 "nn.Embedding: convert the module to nn.Linear first"));
          return;
        }
      s->embedding = op->type == PLANNER_OP_EMBEDDING;
      if (rule->factors[f].kind == PLANNER_FACTOR_REDUCTION)
        s->kind = STYLE_ROWWISE;
      else if (planner_export_operand_dim_of_factor (&rule->inputs[1], f) >= 0)
        s->kind = STYLE_COLWISE;
      else
        {
          g_autofree char *what = describe_factor (x, op, f);
          unsupported (x, i,
                       g_strdup_printf ("splits %s of its activations (not the weight) over "
                                        "%s, which no tensor-parallel style does",
                                        what, x->mesh->names[x->tp]));
        }
      return;
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
        g_autofree char *what = describe_factor (x, op, f);
        unsupported (x, i,
                     g_strdup_printf ("splits %s over %s; SequenceParallel splits a norm's "
                                      "input on its sequence dim only",
                                      what, x->mesh->names[x->tp]));
        return;
      }
    default:
      if (module)
        {
          g_autofree char *what = describe_factor (x, op, f);
          unsupported (x, i,
                       g_strdup_printf ("its parameters are split by %s over %s, and no "
                                        "tensor-parallel style shards %s modules (a fused "
                                        "projection wants separate nn.Linear modules)",
                                        what, x->mesh->names[x->tp],
                                        planner_op_type_to_string (op->type)));
        }
      /* Ops without parameters compute on the local shards they are given. */
      return;
    }
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
follow_partial (Dtensor *x, guint r)
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
  if (conflict)
    {
      unsupported (x, r,
                   g_strdup ("its partial sums are reduced to different layouts downstream; "
                             "RowwiseParallel reduces them once, at its output"));
      return;
    }
  s->output = target;
  s->has_output = !place_equal (target, style_default_output (s));
  for (guint q = 0; q < queue->len; q++)
    {
      guint t = g_array_index (queue, guint, q);
      x->eff[t] = target;
      x->in_chain[t] = TRUE;
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

  if (cs->kind == STYLE_UNSUPPORTED || (ps != NULL && ps->kind == STYLE_UNSUPPORTED))
    {
      planner_export_note (&x->notes, name,
            g_strdup_printf ("%s to %s on %s, next to an op the styles cannot express", from, to,
                             x->mesh->names[x->tp]));
      return;
    }
  /* The consumer's style takes it in: input_layouts. */
  if (style_name (cs) != NULL && position == 0 && place_equal (required, style_desired_input (cs)))
    {
      if (cs->kind == STYLE_SEQUENCE)
        {
          /* SequenceParallel takes a plain tensor as already sharded: it cannot gather. */
          planner_export_note (&x->notes, name,
                g_strdup_printf ("%s to %s on %s into SequenceParallel, which takes its input "
                                 "as already split on the sequence",
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
  if (ps != NULL && ps->kind == STYLE_COLWISE)
    {
      if (ps->has_output && !place_equal (ps->output, required))
        ps->output_conflict = TRUE;
      ps->output = required;
      ps->has_output = TRUE;
      return;
    }
  if (ps != NULL && ps->kind == STYLE_NONE
      && planner_export_has_parameter_input (x->graph, planner_graph_get_op (x->graph, t->producer)))
    {
      if (ps->has_prepare_out && !place_equal (ps->prepare_out_desired, required))
        ps->output_conflict = TRUE;
      ps->has_prepare_out = TRUE;
      ps->prepare_out = produced;
      ps->prepare_out_desired = required;
      return;
    }
  planner_export_note (&x->notes, name,
        g_strdup_printf ("%s to %s on %s between ops that run on their local shards; no style "
                         "places this redistribution",
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

          /* Parameters are sharded by the styles themselves. */
          if (t->kind == PLANNER_TENSOR_PARAMETER)
            continue;
          /* Partial sums flowing on, or reduced where the chain ends: the RowwiseParallel
           * output_layouts covers both. */
          if (x->in_chain[tensor])
            continue;
          if (!place_equal (x->eff[tensor], required))
            place_edge (x, tensor, c, k, x->eff[tensor], required);
        }
    }
  /* An output handed over in a new layout reaches every consumer in it. */
  for (guint i = 0; i < n_ops; i++)
    {
      OpStyle *s = &x->styles[i];
      gboolean colwise = s->kind == STYLE_COLWISE && s->has_output;
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

/* Redistribution steps on other axes than TP: no tensor-parallel style places them. */
static void
note_other_axes (Dtensor *x)
{
  for (guint r = 0; r < planner_plan_get_n_redistributions (x->plan); r++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (x->plan, r);
      for (guint s = 0; s < red->n_steps; s++)
        if ((int)red->steps[s].axis != x->tp)
          {
            g_autofree char *name = planner_store_redistribution_name (x->plan, r);
            g_autofree char *step = planner_redist_step_describe (&red->steps[s], x->mesh);
            planner_export_note (&x->notes, name,
                  g_strdup_printf ("%s is on %s, an axis the tensor-parallel plan does not "
                                   "cover",
                                   step, x->mesh->names[red->steps[s].axis]));
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
      g_string_append_c (out, ')');
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
  if (s->kind == STYLE_SEQUENCE && s->seq_dim != 1)
    {
      g_string_append_printf (out, "sequence_dim=%d", s->seq_dim);
      first = FALSE;
    }
  if (s->has_input || (s->kind == STYLE_ROWWISE && s->embedding))
    {
      g_string_append (out, "input_layouts=");
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
    g_string_append (out, first ? "use_local_output=False" : ", use_local_output=False");
  g_string_append_c (out, ')');
}

static gboolean
has_entry (const OpStyle *s)
{
  return style_name (s) != NULL || s->n_prepare_in > 0 || s->has_prepare_out;
}

/* The plan's entries, a repeated block's identical entries as one wildcard key. */
static void
append_entries (GString *out, Dtensor *x, guint *n_entries)
{
  guint n_ops = planner_graph_get_n_ops (x->graph);
  g_autoptr (GPtrArray) texts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GHashTable) done = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (guint i = 0; i < n_ops; i++)
    {
      GString *text = NULL;
      if (has_entry (&x->styles[i]))
        {
          text = g_string_new (NULL);
          append_style (text, &x->styles[i]);
        }
      g_ptr_array_add (texts, text != NULL ? g_string_free (text, FALSE) : NULL);
    }

  *n_entries = 0;
  for (guint i = 0; i < n_ops; i++)
    {
      const char *text = g_ptr_array_index (texts, i);
      const char *name = planner_graph_get_op (x->graph, i)->name;
      g_autofree char *pattern = NULL;
      g_autofree char *key = NULL;

      if (text == NULL)
        continue;
      pattern = planner_export_block_pattern (name, FALSE);
      if (pattern != NULL && g_hash_table_contains (done, pattern))
        continue;
      if (pattern != NULL)
        {
          /* Valid only if every op the key would reach has this very entry. */
          g_auto (GStrv) pattern_parts = g_strsplit (pattern, ".", -1);
          g_auto (GStrv) name_parts = g_strsplit (name, ".", -1);
          gboolean uniform = TRUE;
          guint covered = 0;
          for (guint j = 0; j < n_ops && uniform; j++)
            if (planner_export_under_pattern (planner_graph_get_op (x->graph, j)->name, pattern_parts,
                               (const char *const *)name_parts))
              {
                uniform = g_strcmp0 (g_ptr_array_index (texts, j), text) == 0;
                covered++;
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

static int
choose_tp_axis (PlannerPlan *plan)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  guint uses[PLANNER_MAX_AXES] = { 0 };
  int best = -1;

  /* An axis of size 1 parallelizes nothing: mp=1 exports as a mesh without tensor
   * parallelism does (semantics.md 2). */
  for (guint a = 0; a < mesh->n_axes; a++)
    if ((strcmp (mesh->names[a], "tp") == 0 || strcmp (mesh->names[a], "mp") == 0)
        && mesh->sizes[a] > 1)
      return (int)a;
  /* Else the axis that splits the most non-batch factors. */
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      const PlannerStrategy *s = &planner_plan_get_op (plan, i)->strategy;
      for (guint a = 0; a < mesh->n_axes; a++)
        {
          int f = planner_export_factor_of_axis (s, a);
          if (f >= 0 && f != planner_export_batch_factor (&op->rule))
            uses[a]++;
        }
    }
  for (guint a = 0; a < mesh->n_axes; a++)
    if (uses[a] > 0 && (best < 0 || uses[a] > uses[best]))
      best = (int)a;
  return best;
}

static void
append_comment (GString *out, const char *text)
{
  g_string_append (out, "# ");
  planner_export_append_escaped (out, text, FALSE);
  g_string_append_c (out, '\n');
}

char *
planner_export_dtensor (PlannerPlan *plan, GPtrArray *notes)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);

  Dtensor x = { 0 };
  GString *out = g_string_new (NULL);
  GString *entries = g_string_new (NULL);
  guint n_ops, n_entries = 0;
  gboolean heads = FALSE, dp = FALSE;

  x.plan = plan;
  x.graph = planner_plan_get_graph (plan);
  x.mesh = planner_plan_get_mesh (plan);
  x.tp = choose_tp_axis (plan);
  n_ops = planner_graph_get_n_ops (x.graph);
  x.styles = g_new0 (OpStyle, n_ops);
  x.eff = g_new0 (Place, planner_graph_get_n_tensors (x.graph));
  x.in_chain = g_new0 (gboolean, planner_graph_get_n_tensors (x.graph));
  planner_export_notes_init (&x.notes);

  if (x.tp >= 0)
    {
      for (guint t = 0; t < planner_graph_get_n_tensors (x.graph); t++)
        x.eff[t] = place_of (planner_plan_get_tensor_layout (plan, t), x.tp);
      for (guint i = 0; i < n_ops; i++)
        classify (&x, i);
      for (guint i = 0; i < n_ops; i++)
        if (x.styles[i].kind == STYLE_ROWWISE)
          follow_partial (&x, i);
      for (guint i = 0; i < n_ops; i++)
        if (x.styles[i].kind == STYLE_COLWISE || x.styles[i].kind == STYLE_SEQUENCE)
          {
            const PlannerOp *op = planner_graph_get_op (x.graph, i);
            x.eff[op->outputs[0]] = style_default_output (&x.styles[i]);
          }
      place_edges (&x);
      /* Logits left split over the vocabulary: keep them a DTensor for loss_parallel(). */
      for (guint i = 0; i < n_ops; i++)
        {
          const PlannerOp *op = planner_graph_get_op (x.graph, i);
          OpStyle *s = &x.styles[i];
          if (s->kind == STYLE_COLWISE
              && planner_graph_get_tensor (x.graph, op->outputs[0])->is_output && !s->has_output)
            s->local_output_false = TRUE;
          heads |= s->kind == STYLE_COLWISE && op->attrs.heads > 0;
        }
    }
  else
    for (guint i = 0; i < n_ops; i++)
      classify (&x, i);
  note_other_axes (&x);
  for (guint a = 0; a < x.mesh->n_axes; a++)
    dp |= (int)a != x.tp && x.mesh->sizes[a] > 1;
  if (x.tp >= 0)
    append_entries (entries, &x, &n_entries);

  g_autoptr (GPtrArray) lines = planner_export_notes_collapse (&x.notes);
  planner_export_notes_publish (lines, notes);

  /* Header: every dynamic text escaped, so nothing leaves the comment. */
  g_autofree char *mesh_text = planner_mesh_to_string (x.mesh);
  const char *name = planner_plan_get_name (plan);
  g_autofree char *about = g_strdup_printf (
      "Tensor-parallel plan for PyTorch DTensor, written by Shardscope from plan %s.",
      name != NULL ? name : "(unnamed)");
  g_autofree char *model = g_strdup_printf (
      "Model: %s; mesh: %s; policy: %s.",
      planner_graph_get_source (x.graph) != NULL ? planner_graph_get_source (x.graph)
                                                 : "(no source)",
      mesh_text, planner_plan_get_policy (plan) != NULL ? planner_plan_get_policy (plan) : "none");
  append_comment (out, about);
  append_comment (out, model);
  g_string_append (out, "#\n");
  if (x.tp < 0)
    append_comment (out, "No mesh axis splits anything but the batch: PLAN is empty.");
  for (guint a = 0; a < x.mesh->n_axes; a++)
    if ((int)a != x.tp && x.mesh->sizes[a] > 1)
      {
        g_autofree char *line = g_strdup_printf (
            "Data parallel over %s: wrap the model with FSDP or DDP on mesh['%s'].",
            x.mesh->names[a], x.mesh->names[a]);
        append_comment (out, line);
      }
  if (heads)
    append_comment (out, "Attention runs on the local heads: divide num_attention_heads and "
                         "num_key_value_heads in the config by the TP size.");
  if (dp || heads || x.tp < 0)
    g_string_append (out, "#\n");
  if (lines->len == 0)
    append_comment (out, "Every op of the plan is expressed by these styles.");
  else
    {
      g_autofree char *head = g_strdup_printf ("Not expressed by these styles (%u):", lines->len);
      append_comment (out, head);
      for (guint i = 0; i < lines->len; i++)
        {
          g_string_append (out, "#   ");
          planner_export_append_escaped (out, g_ptr_array_index (lines, i), FALSE);
          g_string_append_c (out, '\n');
        }
    }

  g_string_append (out, "\n"
                        "from torch.distributed.device_mesh import init_device_mesh\n"
                        "from torch.distributed.tensor import Partial, Replicate, Shard\n"
                        "from torch.distributed.tensor.parallel import (\n"
                        "    ColwiseParallel,\n"
                        "    PrepareModuleInput,\n"
                        "    PrepareModuleOutput,\n"
                        "    RowwiseParallel,\n"
                        "    SequenceParallel,\n"
                        "    parallelize_module,\n"
                        ")\n\n");
  g_string_append (out, "PLAN_NAME = ");
  planner_export_append_python_string (out, name != NULL ? name : "");
  g_string_append (out, "\nMESH_SHAPE = (");
  for (guint a = 0; a < x.mesh->n_axes; a++)
    g_string_append_printf (out, "%s%u", a > 0 ? ", " : "", x.mesh->sizes[a]);
  g_string_append (out, x.mesh->n_axes == 1 ? ",)\nMESH_DIM_NAMES = (" : ")\nMESH_DIM_NAMES = (");
  for (guint a = 0; a < x.mesh->n_axes; a++)
    {
      if (a > 0)
        g_string_append (out, ", ");
      planner_export_append_python_string (out, x.mesh->names[a]);
    }
  g_string_append (out, x.mesh->n_axes == 1 ? ",)\nTP_DIM = " : ")\nTP_DIM = ");
  if (x.tp >= 0)
    planner_export_append_python_string (out, x.mesh->names[x.tp]);
  else
    g_string_append (out, "None");
  g_string_append (out, "\n\nPLAN = {\n");
  g_string_append_len (out, entries->str, entries->len);
  g_string_append (out,
                   "}\n\n\n"
                   "def parallelize(model, device_type='cuda'):\n"
                   "    \"\"\"Builds the device mesh and applies PLAN to a Hugging Face model,\n"
                   "    on every rank once torch.distributed is initialized. Returns the "
                   "mesh.\"\"\"\n"
                   "    mesh = init_device_mesh(device_type, MESH_SHAPE, "
                   "mesh_dim_names=MESH_DIM_NAMES)\n"
                   "    if TP_DIM is not None and PLAN:\n"
                   "        parallelize_module(model, mesh[TP_DIM], PLAN)\n"
                   "    return mesh\n");

  g_string_free (entries, TRUE);
  planner_export_notes_clear (&x.notes);
  g_free (x.styles);
  g_free (x.eff);
  g_free (x.in_chain);
  return g_string_free (out, FALSE);
}

