#define G_LOG_DOMAIN "graphview-model"

#include "config.h"

#include <math.h>
#include <string.h>

#include "graphview-model.h"
#include "graphview-private.h"

struct _GraphviewModel
{
  GObject parent_instance;

  PlannerGraph *graph;
  guint serial;

  GPtrArray *runs;     /* GraphviewRun*, owned */
  GPtrArray *expanded; /* per run: GByteArray of one flag per block */
  int *op_run;         /* per op: its run or -1 */
  guint *op_block;     /* per op: its block within that run */

  GArray *items;          /* GraphviewItem */
  guint *op_item;         /* per op: the visible item showing it */
  GArray *edges;          /* GraphviewEdge */
  GArray *refs;           /* GraphviewEdgeRef */
  GHashTable *edge_index; /* (source << 32 | target) -> edge + 1 */
};

G_DEFINE_FINAL_TYPE (GraphviewModel, graphview_model, G_TYPE_OBJECT)

enum
{
  SIGNAL_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
run_free (gpointer data)
{
  GraphviewRun *run = data;
  g_free (run->prefix);
  g_free (run->signature);
  g_free (run);
}

/* Shared metrics --------------------------------------------------------------------------- */

void
graphview_op_matrix_size (const PlannerOp *op, PlannerGraph *graph, guint *rows, guint *cols)
{
  guint max_rank = 0;
  for (guint i = 0; i < op->n_inputs; i++)
    max_rank = MAX (max_rank, planner_graph_get_tensor (graph, op->inputs[i])->rank);
  *rows = MIN (op->n_inputs, GRAPHVIEW_MATRIX_MAX_ROWS);
  *cols = MIN (MAX (max_rank, 1), GRAPHVIEW_MATRIX_MAX_COLS);
}

static guint
shape_text_length (const PlannerTensor *t)
{
  char buffer[32];
  guint n = 2;
  for (guint d = 0; d < t->rank; d++)
    n += g_snprintf (buffer, sizeof buffer, "%" G_GINT64_FORMAT, t->shape[d]) + (d > 0);
  return n;
}

void
graphview_op_node_size (PlannerGraph *graph, guint op_index, const char *label, double *width,
                        double *height)
{
  const PlannerOp *op = planner_graph_get_op (graph, op_index);
  const char *type = planner_op_type_to_string (op->type);
  guint rows, cols;
  graphview_op_matrix_size (op, graph, &rows, &cols);

  guint shape_chars = 0;
  if (op->n_outputs > 0)
    shape_chars = shape_text_length (planner_graph_get_tensor (graph, op->outputs[0]));

  double text
      = MAX (strlen (label) * GRAPHVIEW_FONT_SIZE, strlen (type) * GRAPHVIEW_TITLE_FONT_SIZE);
  text = MAX (text, shape_chars * GRAPHVIEW_FONT_SIZE * 0.9);
  text *= GRAPHVIEW_CHAR_ADVANCE;
  double matrix_w = cols * GRAPHVIEW_CELL;
  double matrix_h = rows * GRAPHVIEW_CELL;

  *width = MAX (GRAPHVIEW_MIN_NODE_WIDTH, 3 * GRAPHVIEW_PAD + text + matrix_w);
  *height = MAX (2 * GRAPHVIEW_PAD + 3 * GRAPHVIEW_LINE, 2 * GRAPHVIEW_PAD + matrix_h);
  /* Whole points keep positions exact when a block's layout is translated. */
  *width = ceil (*width);
  *height = ceil (*height);
}

char *
graphview_signature (PlannerGraph *graph, guint first, guint n, gsize prefix_len)
{
  GString *s = g_string_sized_new (64 * n);
  for (guint j = first; j < first + n; j++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, j);
      gsize len = strlen (op->name);
      g_string_append_printf (s, "%s|%d|", op->name + MIN (prefix_len, len), op->type);
      for (guint i = 0; i < op->n_inputs; i++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (graph, op->inputs[i]);
          if (t->producer >= (int)first && t->producer < (int)(first + n))
            g_string_append_printf (s, "i%d.%u", t->producer - (int)first, t->producer_slot);
          else
            g_string_append_c (s, t->kind == PLANNER_TENSOR_PARAMETER ? 'p' : 'x');
          for (guint d = 0; d < t->rank; d++)
            g_string_append_printf (s, ",%" G_GINT64_FORMAT, t->shape[d]);
          g_string_append_c (s, ';');
        }
      for (guint o = 0; o < op->n_outputs; o++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (graph, op->outputs[o]);
          g_string_append_c (s, 'o');
          for (guint d = 0; d < t->rank; d++)
            g_string_append_printf (s, ",%" G_GINT64_FORMAT, t->shape[d]);
        }
      g_string_append_c (s, '\n');
    }
  return g_string_free (s, FALSE);
}

/* Folding ----------------------------------------------------------------------------------- */

/* The block an op name belongs to: the prefix before its first all-digit component, and that
 * number. "model.layers.3.mlp.up_proj" -> ("model.layers", 3), block prefix length 14. */
static gboolean
parse_block (const char *name, gsize *parent_len, gsize *block_len, guint *number)
{
  const char *component = name;
  while (*component)
    {
      const char *end = strchr (component, '.');
      gsize len = end ? (gsize)(end - component) : strlen (component);
      gboolean digits = len > 0 && len <= 9;
      for (gsize i = 0; digits && i < len; i++)
        digits = g_ascii_isdigit (component[i]);
      /* A trailing number is the op itself, not a module around it. */
      if (digits && end && component > name)
        {
          *parent_len = component - name - 1;
          *block_len = end - name;
          *number = (guint)g_ascii_strtoull (component, NULL, 10);
          return TRUE;
        }
      if (!end)
        break;
      component = end + 1;
    }
  return FALSE;
}

typedef struct
{
  guint first_op;
  guint n_ops;
  gsize parent_len;
  gsize block_len;
  guint number;
} Span;

static void
find_runs (GraphviewModel *self)
{
  guint n_ops = planner_graph_get_n_ops (self->graph);
  g_autoptr (GArray) spans = g_array_new (FALSE, FALSE, sizeof (Span));

  /* Maximal ranges of consecutive ops in the same block. */
  for (guint i = 0; i < n_ops; i++)
    {
      const char *name = planner_graph_get_op (self->graph, i)->name;
      Span span = { i, 1, 0, 0, 0 };
      if (!parse_block (name, &span.parent_len, &span.block_len, &span.number))
        continue;
      if (spans->len > 0)
        {
          Span *last = &g_array_index (spans, Span, spans->len - 1);
          const char *last_name = planner_graph_get_op (self->graph, last->first_op)->name;
          if (last->first_op + last->n_ops == i && last->block_len == span.block_len
              && strncmp (last_name, name, span.block_len) == 0)
            {
              last->n_ops++;
              continue;
            }
        }
      g_array_append_val (spans, span);
    }

  /* Consecutive spans under one parent, numbered n, n+1, ..., of equal structure. */
  for (guint s = 0; s < spans->len;)
    {
      Span *a = &g_array_index (spans, Span, s);
      g_autofree char *sig = graphview_signature (self->graph, a->first_op, a->n_ops, a->block_len);
      const char *a_name = planner_graph_get_op (self->graph, a->first_op)->name;
      guint t = s + 1;
      while (t < spans->len)
        {
          Span *b = &g_array_index (spans, Span, t);
          Span *prev = &g_array_index (spans, Span, t - 1);
          const char *b_name = planner_graph_get_op (self->graph, b->first_op)->name;
          if (b->first_op != prev->first_op + prev->n_ops || b->number != prev->number + 1
              || b->n_ops != a->n_ops || b->parent_len != a->parent_len
              || strncmp (a_name, b_name, a->parent_len) != 0)
            break;
          g_autofree char *b_sig
              = graphview_signature (self->graph, b->first_op, b->n_ops, b->block_len);
          if (strcmp (sig, b_sig) != 0)
            break;
          t++;
        }
      if (t - s >= 2)
        {
          GraphviewRun *run = g_new0 (GraphviewRun, 1);
          run->prefix = g_strndup (a_name, a->parent_len);
          run->signature = g_steal_pointer (&sig);
          run->first_label = a->number;
          run->n_blocks = t - s;
          run->ops_per_block = a->n_ops;
          run->first_op = a->first_op;
          for (guint b = 0; b < run->n_blocks; b++)
            for (guint k = 0; k < run->ops_per_block; k++)
              {
                guint op = run->first_op + b * run->ops_per_block + k;
                self->op_run[op] = self->runs->len;
                self->op_block[op] = b;
              }
          g_ptr_array_add (self->expanded, g_byte_array_new ());
          g_byte_array_set_size (g_ptr_array_index (self->expanded, self->expanded->len - 1),
                                 run->n_blocks);
          memset (((GByteArray *)g_ptr_array_index (self->expanded, self->expanded->len - 1))->data,
                  0, run->n_blocks);
          g_ptr_array_add (self->runs, run);
        }
      s = t;
    }
}

static gboolean
op_expanded (GraphviewModel *self, guint op)
{
  int run = self->op_run[op];
  if (run < 0)
    return TRUE;
  GByteArray *flags = g_ptr_array_index (self->expanded, run);
  return flags->data[self->op_block[op]] != 0;
}

static void
rebuild (GraphviewModel *self)
{
  guint n_ops = planner_graph_get_n_ops (self->graph);
  g_array_set_size (self->items, 0);
  g_array_set_size (self->edges, 0);
  g_array_set_size (self->refs, 0);
  g_hash_table_remove_all (self->edge_index);

  for (guint op = 0; op < n_ops; op++)
    {
      int run = self->op_run[op];
      if (op_expanded (self, op))
        {
          GraphviewItem item
              = { GRAPHVIEW_ITEM_OP, op, 1, run, run >= 0 ? self->op_block[op] : 0, run >= 0 };
          g_array_append_val (self->items, item);
        }
      else
        {
          GraphviewItem *last = self->items->len > 0 ? &g_array_index (self->items, GraphviewItem,
                                                                       self->items->len - 1)
                                                     : NULL;
          if (last && last->kind == GRAPHVIEW_ITEM_BLOCK && last->run == run
              && last->first_op + last->n_ops == op)
            {
              last->n_ops++;
              last->n_blocks = self->op_block[op] - last->first_block + 1;
            }
          else
            {
              GraphviewItem item = { GRAPHVIEW_ITEM_BLOCK, op, 1, run, self->op_block[op], 1 };
              g_array_append_val (self->items, item);
            }
        }
      self->op_item[op] = self->items->len - 1;
    }

  /* Edges in consumer order, then slot order: deterministic. Refs are grouped per edge. */
  g_autoptr (GArray) pending = g_array_new (FALSE, FALSE, sizeof (GraphviewEdgeRef));
  g_autoptr (GArray) owner = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint op = 0; op < n_ops; op++)
    {
      const PlannerOp *o = planner_graph_get_op (self->graph, op);
      for (guint slot = 0; slot < o->n_inputs; slot++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (self->graph, o->inputs[slot]);
          if (t->producer < 0)
            continue;
          guint source = self->op_item[t->producer];
          guint target = self->op_item[op];
          if (source == target)
            continue;
          guint64 key = ((guint64)source << 32) | target;
          guint index = GPOINTER_TO_UINT (g_hash_table_lookup (self->edge_index, &key));
          if (index == 0)
            {
              GraphviewEdge edge = { source, target, 0, 0 };
              g_array_append_val (self->edges, edge);
              index = self->edges->len;
              guint64 *stored = g_new (guint64, 1);
              *stored = key;
              g_hash_table_insert (self->edge_index, stored, GUINT_TO_POINTER (index));
            }
          GraphviewEdgeRef ref = { o->inputs[slot], t->producer, op, slot };
          g_array_append_val (pending, ref);
          guint e = index - 1;
          g_array_append_val (owner, e);
          g_array_index (self->edges, GraphviewEdge, e).n_refs++;
        }
    }
  guint offset = 0;
  for (guint e = 0; e < self->edges->len; e++)
    {
      GraphviewEdge *edge = &g_array_index (self->edges, GraphviewEdge, e);
      edge->first_ref = offset;
      offset += edge->n_refs;
      edge->n_refs = 0;
    }
  g_array_set_size (self->refs, pending->len);
  for (guint i = 0; i < pending->len; i++)
    {
      GraphviewEdge *edge
          = &g_array_index (self->edges, GraphviewEdge, g_array_index (owner, guint, i));
      g_array_index (self->refs, GraphviewEdgeRef, edge->first_ref + edge->n_refs++)
          = g_array_index (pending, GraphviewEdgeRef, i);
    }
}

static void
changed (GraphviewModel *self)
{
  rebuild (self);
  self->serial++;
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
}

static void
graphview_model_finalize (GObject *object)
{
  GraphviewModel *self = GRAPHVIEW_MODEL (object);
  g_clear_object (&self->graph);
  g_clear_pointer (&self->runs, g_ptr_array_unref);
  g_clear_pointer (&self->expanded, g_ptr_array_unref);
  g_clear_pointer (&self->op_run, g_free);
  g_clear_pointer (&self->op_block, g_free);
  g_clear_pointer (&self->op_item, g_free);
  g_clear_pointer (&self->items, g_array_unref);
  g_clear_pointer (&self->edges, g_array_unref);
  g_clear_pointer (&self->refs, g_array_unref);
  g_clear_pointer (&self->edge_index, g_hash_table_unref);
  G_OBJECT_CLASS (graphview_model_parent_class)->finalize (object);
}

static void
graphview_model_class_init (GraphviewModelClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = graphview_model_finalize;
  /* Emitted after the visible items changed (folding). */
  signals[SIGNAL_CHANGED] = g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                          0, NULL, NULL, NULL, G_TYPE_NONE, 0);
}

static void
graphview_model_init (GraphviewModel *self)
{
  self->runs = g_ptr_array_new_with_free_func (run_free);
  self->expanded = g_ptr_array_new_with_free_func ((GDestroyNotify)g_byte_array_unref);
  self->items = g_array_new (FALSE, FALSE, sizeof (GraphviewItem));
  self->edges = g_array_new (FALSE, FALSE, sizeof (GraphviewEdge));
  self->refs = g_array_new (FALSE, FALSE, sizeof (GraphviewEdgeRef));
  self->edge_index = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
}

GraphviewModel *
graphview_model_new (PlannerGraph *graph)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), NULL);
  GraphviewModel *self = g_object_new (GRAPHVIEW_TYPE_MODEL, NULL);
  self->graph = g_object_ref (graph);
  guint n_ops = planner_graph_get_n_ops (graph);
  self->op_run = g_new (int, MAX (n_ops, 1));
  for (guint i = 0; i < n_ops; i++)
    self->op_run[i] = -1;
  self->op_block = g_new0 (guint, MAX (n_ops, 1));
  self->op_item = g_new0 (guint, MAX (n_ops, 1));
  find_runs (self);
  rebuild (self);
  return self;
}

struct _GraphviewFolding
{
  guint serial;
  GPtrArray *expanded; /* per run: GByteArray, as in the model */
};

GraphviewFolding *
graphview_model_dup_folding (GraphviewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), NULL);
  GraphviewFolding *folding = g_new0 (GraphviewFolding, 1);
  folding->serial = self->serial;
  folding->expanded = g_ptr_array_new_with_free_func ((GDestroyNotify)g_byte_array_unref);
  for (guint r = 0; r < self->expanded->len; r++)
    {
      GByteArray *flags = g_ptr_array_index (self->expanded, r);
      GByteArray *copy = g_byte_array_sized_new (flags->len);
      g_byte_array_append (copy, flags->data, flags->len);
      g_ptr_array_add (folding->expanded, copy);
    }
  return folding;
}

void
graphview_folding_free (GraphviewFolding *folding)
{
  if (folding == NULL)
    return;
  g_ptr_array_unref (folding->expanded);
  g_free (folding);
}

GraphviewModel *
graphview_model_new_folded (PlannerGraph *graph, const GraphviewFolding *folding)
{
  g_return_val_if_fail (folding != NULL, NULL);
  GraphviewModel *self = graphview_model_new (graph);
  /* Runs are found from the graph alone, so the same graph gives the same runs. */
  g_return_val_if_fail (self->expanded->len == folding->expanded->len, self);
  gboolean any = FALSE;
  for (guint r = 0; r < self->expanded->len; r++)
    {
      GByteArray *flags = g_ptr_array_index (self->expanded, r);
      GByteArray *from = g_ptr_array_index (folding->expanded, r);
      g_return_val_if_fail (flags->len == from->len, self);
      any |= memcmp (flags->data, from->data, flags->len) != 0;
      memcpy (flags->data, from->data, flags->len);
    }
  if (any)
    rebuild (self);
  self->serial = folding->serial;
  return self;
}

PlannerGraph *
graphview_model_get_graph (GraphviewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), NULL);
  return self->graph;
}

guint
graphview_model_get_serial (GraphviewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), 0);
  return self->serial;
}

guint
graphview_model_get_n_runs (GraphviewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), 0);
  return self->runs->len;
}

const GraphviewRun *
graphview_model_get_run (GraphviewModel *self, guint run)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), NULL);
  g_return_val_if_fail (run < self->runs->len, NULL);
  return g_ptr_array_index (self->runs, run);
}

char *
graphview_model_dup_block_name (GraphviewModel *self, guint run, guint block)
{
  const GraphviewRun *r = graphview_model_get_run (self, run);
  g_return_val_if_fail (r != NULL && block < r->n_blocks, NULL);
  return g_strdup_printf ("%s.%u", r->prefix, r->first_label + block);
}

gboolean
graphview_model_get_expanded (GraphviewModel *self, guint run, guint block)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), FALSE);
  g_return_val_if_fail (run < self->runs->len, FALSE);
  GByteArray *flags = g_ptr_array_index (self->expanded, run);
  g_return_val_if_fail (block < flags->len, FALSE);
  return flags->data[block] != 0;
}

void
graphview_model_set_expanded (GraphviewModel *self, guint run, guint block, gboolean expanded)
{
  g_return_if_fail (GRAPHVIEW_IS_MODEL (self));
  g_return_if_fail (run < self->runs->len);
  GByteArray *flags = g_ptr_array_index (self->expanded, run);
  g_return_if_fail (block < flags->len);
  if ((flags->data[block] != 0) == (expanded != FALSE))
    return;
  flags->data[block] = expanded != FALSE;
  changed (self);
}

static void
set_all (GraphviewModel *self, guint8 value)
{
  gboolean any = FALSE;
  for (guint r = 0; r < self->expanded->len; r++)
    {
      GByteArray *flags = g_ptr_array_index (self->expanded, r);
      for (guint b = 0; b < flags->len; b++)
        {
          any |= flags->data[b] != value;
          flags->data[b] = value;
        }
    }
  if (any)
    changed (self);
}

void
graphview_model_expand_all (GraphviewModel *self)
{
  g_return_if_fail (GRAPHVIEW_IS_MODEL (self));
  set_all (self, 1);
}

void
graphview_model_collapse_all (GraphviewModel *self)
{
  g_return_if_fail (GRAPHVIEW_IS_MODEL (self));
  set_all (self, 0);
}

guint
graphview_model_expand_matching (GraphviewModel *self, const char *glob)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), 0);
  g_return_val_if_fail (glob != NULL, 0);
  g_autoptr (GPatternSpec) spec = g_pattern_spec_new (glob);
  guint count = 0;
  for (guint r = 0; r < self->runs->len; r++)
    {
      const GraphviewRun *run = g_ptr_array_index (self->runs, r);
      GByteArray *flags = g_ptr_array_index (self->expanded, r);
      for (guint b = 0; b < run->n_blocks; b++)
        {
          g_autofree char *name = graphview_model_dup_block_name (self, r, b);
          gboolean match = g_pattern_spec_match_string (spec, name);
          for (guint k = 0; !match && k < run->ops_per_block; k++)
            match = g_pattern_spec_match_string (
                spec, planner_graph_get_op (self->graph, run->first_op + b * run->ops_per_block + k)
                          ->name);
          if (match && !flags->data[b])
            {
              flags->data[b] = 1;
              count++;
            }
        }
    }
  if (count > 0)
    changed (self);
  return count;
}

gboolean
graphview_model_toggle_item (GraphviewModel *self, guint item)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), FALSE);
  g_return_val_if_fail (item < self->items->len, FALSE);
  GraphviewItem it = g_array_index (self->items, GraphviewItem, item);
  if (it.run < 0)
    return FALSE;
  GByteArray *flags = g_ptr_array_index (self->expanded, it.run);
  /* A block node unfolds one instance, its first: unfolding all 80 layers of a deep model
   * at once is never what a click means (Expand All does that). An op folds its block. */
  if (it.kind == GRAPHVIEW_ITEM_BLOCK)
    flags->data[it.first_block] = TRUE;
  else
    for (guint b = it.first_block; b < it.first_block + it.n_blocks; b++)
      flags->data[b] = FALSE;
  changed (self);
  return TRUE;
}

guint
graphview_model_get_n_items (GraphviewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), 0);
  return self->items->len;
}

const GraphviewItem *
graphview_model_get_item (GraphviewModel *self, guint item)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), NULL);
  g_return_val_if_fail (item < self->items->len, NULL);
  return &g_array_index (self->items, GraphviewItem, item);
}

guint
graphview_model_get_item_of_op (GraphviewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), 0);
  g_return_val_if_fail (op < planner_graph_get_n_ops (self->graph), 0);
  return self->op_item[op];
}

const char *
graphview_model_get_op_label (GraphviewModel *self, guint op)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), NULL);
  g_return_val_if_fail (op < planner_graph_get_n_ops (self->graph), NULL);
  const char *name = planner_graph_get_op (self->graph, op)->name;
  int run = self->op_run[op];
  if (run < 0 || !op_expanded (self, op))
    return name;
  gsize parent_len, block_len;
  guint number;
  if (!parse_block (name, &parent_len, &block_len, &number))
    return name;
  return name + block_len + 1;
}

char *
graphview_model_dup_item_label (GraphviewModel *self, guint item)
{
  const GraphviewItem *it = graphview_model_get_item (self, item);
  g_return_val_if_fail (it != NULL, NULL);
  if (it->kind == GRAPHVIEW_ITEM_OP)
    return g_strdup (planner_graph_get_op (self->graph, it->first_op)->name);
  const GraphviewRun *run = g_ptr_array_index (self->runs, it->run);
  if (it->n_blocks == 1)
    return g_strdup_printf ("%s.%u", run->prefix, run->first_label + it->first_block);
  return g_strdup_printf ("%s.%u-%u x%u", run->prefix, run->first_label + it->first_block,
                          run->first_label + it->first_block + it->n_blocks - 1, it->n_blocks);
}

guint
graphview_model_get_n_edges (GraphviewModel *self)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), 0);
  return self->edges->len;
}

const GraphviewEdge *
graphview_model_get_edge (GraphviewModel *self, guint edge)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), NULL);
  g_return_val_if_fail (edge < self->edges->len, NULL);
  return &g_array_index (self->edges, GraphviewEdge, edge);
}

const GraphviewEdgeRef *
graphview_model_get_ref (GraphviewModel *self, guint ref)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), NULL);
  g_return_val_if_fail (ref < self->refs->len, NULL);
  return &g_array_index (self->refs, GraphviewEdgeRef, ref);
}

int
graphview_model_find_edge (GraphviewModel *self, guint source, guint target)
{
  g_return_val_if_fail (GRAPHVIEW_IS_MODEL (self), -1);
  guint64 key = ((guint64)source << 32) | target;
  return (int)GPOINTER_TO_UINT (g_hash_table_lookup (self->edge_index, &key)) - 1;
}
