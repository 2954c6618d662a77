#define G_LOG_DOMAIN "planner-graph"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-graph.h"

struct _PlannerGraph
{
  GObject parent_instance;

  char *name;
  char *source;
  GArray *tensors;        /* PlannerTensor */
  GArray *ops;            /* PlannerOp, in topological order */
  GHashTable *op_index;   /* name -> index + 1 */
  GHashTable *tensor_index;
  GArray *outputs;        /* guint tensor ids */
  guint64 tensor_bytes;   /* of every tensor, at most PLANNER_MAX_GRAPH_BYTES */
};

G_DEFINE_FINAL_TYPE (PlannerGraph, planner_graph, G_TYPE_OBJECT)

enum
{
  PROP_0,
  PROP_NAME,
  PROP_SOURCE,
  PROP_N_OPS,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

static void
clear_tensor (gpointer data)
{
  PlannerTensor *t = data;
  g_free (t->name);
  g_clear_pointer (&t->consumers, g_array_unref);
}

static void
clear_op (gpointer data)
{
  PlannerOp *op = data;
  g_free (op->name);
  g_free (op->inputs);
  g_free (op->outputs);
}

static void
planner_graph_finalize (GObject *object)
{
  PlannerGraph *self = PLANNER_GRAPH (object);

  g_free (self->name);
  g_free (self->source);
  g_array_unref (self->tensors);
  g_array_unref (self->ops);
  g_hash_table_unref (self->op_index);
  g_hash_table_unref (self->tensor_index);
  g_array_unref (self->outputs);

  G_OBJECT_CLASS (planner_graph_parent_class)->finalize (object);
}

static void
planner_graph_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  PlannerGraph *self = PLANNER_GRAPH (object);

  switch (prop_id)
    {
    case PROP_NAME: g_value_set_string (value, self->name); break;
    case PROP_SOURCE: g_value_set_string (value, self->source); break;
    case PROP_N_OPS: g_value_set_uint (value, self->ops->len); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
planner_graph_set_property (GObject *object, guint prop_id, const GValue *value,
                            GParamSpec *pspec)
{
  PlannerGraph *self = PLANNER_GRAPH (object);

  switch (prop_id)
    {
    case PROP_NAME: planner_graph_set_name (self, g_value_get_string (value)); break;
    case PROP_SOURCE: planner_graph_set_source (self, g_value_get_string (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
planner_graph_class_init (PlannerGraphClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = planner_graph_finalize;
  object_class->get_property = planner_graph_get_property;
  object_class->set_property = planner_graph_set_property;

  properties[PROP_NAME] = g_param_spec_string ("name", NULL, NULL, NULL,
                                               G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  properties[PROP_SOURCE] = g_param_spec_string ("source", NULL, NULL, NULL,
                                                 G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  properties[PROP_N_OPS] = g_param_spec_uint ("n-ops", NULL, NULL, 0, G_MAXUINT, 0,
                                              G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
planner_graph_init (PlannerGraph *self)
{
  self->tensors = g_array_new (FALSE, TRUE, sizeof (PlannerTensor));
  g_array_set_clear_func (self->tensors, clear_tensor);
  self->ops = g_array_new (FALSE, TRUE, sizeof (PlannerOp));
  g_array_set_clear_func (self->ops, clear_op);
  self->op_index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->tensor_index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->outputs = g_array_new (FALSE, FALSE, sizeof (guint));
}

PlannerGraph *
planner_graph_new (void)
{
  return g_object_new (PLANNER_TYPE_GRAPH, NULL);
}

const char *
planner_graph_get_name (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), NULL);
  return self->name;
}

void
planner_graph_set_name (PlannerGraph *self, const char *name)
{
  g_return_if_fail (PLANNER_IS_GRAPH (self));
  if (g_strcmp0 (self->name, name) == 0)
    return;
  g_free (self->name);
  self->name = g_strdup (name);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_NAME]);
}

const char *
planner_graph_get_source (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), NULL);
  return self->source;
}

void
planner_graph_set_source (PlannerGraph *self, const char *source)
{
  g_return_if_fail (PLANNER_IS_GRAPH (self));
  if (g_strcmp0 (self->source, source) == 0)
    return;
  g_free (self->source);
  self->source = g_strdup (source);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SOURCE]);
}

static int
add_tensor (PlannerGraph *self, const char *name, PlannerDType dtype, PlannerTensorKind kind,
            guint rank, const gint64 *shape, int producer, guint slot, GError **error)
{
  if (name == NULL || name[0] == '\0')
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH, "a tensor has no name");
      return -1;
    }
  if (g_hash_table_contains (self->tensor_index, name))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                   "tensor %s is defined twice; tensor names must be unique", name);
      return -1;
    }
  if (rank > PLANNER_MAX_RANK)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "tensor %s has rank %u; at most %d dims are supported", name, rank,
                   PLANNER_MAX_RANK);
      return -1;
    }
  for (guint d = 0; d < rank; d++)
    if (shape[d] <= 0)
      {
        g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                     "tensor %s: dim %u is %" G_GINT64_FORMAT "; dims must be > 0", name, d,
                     shape[d]);
        return -1;
      }
  /* Byte counts (of a tensor, the parameters, a device's memory, a plan's traffic) are
   * guint64 sums and gint64 differences: bounding all of a graph's bytes keeps each of them
   * exact. 2^60 bytes is an exabyte, a thousand times the largest models. */
  guint64 bytes = planner_dtype_size (dtype);
  for (guint d = 0; d < rank; d++)
    {
      if ((guint64)shape[d] > PLANNER_MAX_GRAPH_BYTES / bytes)
        bytes = PLANNER_MAX_GRAPH_BYTES + 1;
      else
        bytes *= (guint64)shape[d];
    }
  if (bytes > PLANNER_MAX_GRAPH_BYTES - self->tensor_bytes)
    {
      g_autoptr (GString) text = g_string_new (NULL);
      for (guint d = 0; d < rank; d++)
        g_string_append_printf (text, "%s%" G_GINT64_FORMAT, d ? "," : "", shape[d]);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "tensor %s [%s] takes the graph's tensors past 2^60 bytes (an exabyte); "
                   "use smaller sizes (batch, sequence, hidden, vocabulary)",
                   name, text->str);
      return -1;
    }
  self->tensor_bytes += bytes;

  PlannerTensor t = { 0 };
  t.name = g_strdup (name);
  t.dtype = dtype;
  t.kind = kind;
  t.rank = rank;
  memcpy (t.shape, shape, rank * sizeof (gint64));
  t.producer = producer;
  t.producer_slot = slot;
  t.consumers = g_array_new (FALSE, FALSE, sizeof (PlannerUse));
  g_array_append_val (self->tensors, t);
  g_hash_table_insert (self->tensor_index, g_strdup (name),
                       GUINT_TO_POINTER (self->tensors->len));
  return (int) self->tensors->len - 1;
}

int
planner_graph_add_input (PlannerGraph *self, const char *name, PlannerDType dtype, guint rank,
                         const gint64 *shape, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), -1);
  return add_tensor (self, name, dtype, PLANNER_TENSOR_INPUT, rank, shape, -1, 0, error);
}

int
planner_graph_add_parameter (PlannerGraph *self, const char *name, PlannerDType dtype,
                             guint rank, const gint64 *shape, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), -1);
  return add_tensor (self, name, dtype, PLANNER_TENSOR_PARAMETER, rank, shape, -1, 0, error);
}

/* The dtype an op computes in: its first floating-point input's. */
static PlannerDType
result_dtype (PlannerGraph *self, PlannerOpType type, const PlannerOpAttrs *attrs,
              const guint *inputs, guint n_inputs)
{
  if (type == PLANNER_OP_CAST)
    return attrs->dtype;
  if (type == PLANNER_OP_EMBEDDING)
    return g_array_index (self->tensors, PlannerTensor, inputs[1]).dtype;
  if (type == PLANNER_OP_RELATIVE_POSITION_BUCKET)
    return PLANNER_DTYPE_I64;
  for (guint i = 0; i < n_inputs; i++)
    {
      PlannerDType d = g_array_index (self->tensors, PlannerTensor, inputs[i]).dtype;
      if (d != PLANNER_DTYPE_I64)
        return d;
    }
  return PLANNER_DTYPE_F32;
}

int
planner_graph_add_op (PlannerGraph *self, const char *name, PlannerOpType type,
                      const PlannerOpAttrs *attrs, const guint *inputs, guint n_inputs,
                      guint n_outputs, const char *const *output_names, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), -1);
  g_return_val_if_fail (name != NULL, -1);
  g_return_val_if_fail (type < PLANNER_N_OP_TYPES, -1);
  g_return_val_if_fail (n_inputs <= PLANNER_MAX_OPERANDS && n_outputs <= PLANNER_MAX_OPERANDS,
                        -1);

  PlannerOpAttrs default_attrs;
  guint ranks[PLANNER_MAX_OPERANDS];
  const gint64 *shapes[PLANNER_MAX_OPERANDS];

  if (attrs == NULL)
    {
      planner_op_attrs_init (&default_attrs);
      attrs = &default_attrs;
    }
  if (name[0] == '\0' || g_hash_table_contains (self->op_index, name))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                   "op name '%s' is empty or used twice; op names must be unique", name);
      return -1;
    }
  for (guint i = 0; i < n_inputs; i++)
    {
      if (inputs[i] >= self->tensors->len)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "%s: input %u refers to tensor #%u, which does not exist", name, i,
                       inputs[i]);
          return -1;
        }
      const PlannerTensor *t = &g_array_index (self->tensors, PlannerTensor, inputs[i]);
      ranks[i] = t->rank;
      shapes[i] = t->shape;
    }

  PlannerOp op = { 0 };
  if (!planner_op_rule_build (&op.rule, type, attrs, n_inputs, ranks, shapes, n_outputs, name,
                              error))
    return -1;
  if (type == PLANNER_OP_EMBEDDING
      && g_array_index (self->tensors, PlannerTensor, inputs[0]).dtype != PLANNER_DTYPE_I64)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_SHAPE_MISMATCH,
                   "%s (Embedding): the ids (input 0) must be i64", name);
      return -1;
    }

  guint index = self->ops->len;
  PlannerDType dtype = result_dtype (self, type, attrs, inputs, n_inputs);
  guint *outputs = g_new (guint, op.rule.n_outputs);
  for (guint o = 0; o < op.rule.n_outputs; o++)
    {
      gint64 shape[PLANNER_MAX_RANK];
      guint rank = planner_op_rule_output_shape (&op.rule, o, shape);
      g_autofree char *generated = NULL;
      const char *tname = output_names ? output_names[o] : NULL;
      if (tname == NULL)
        tname = generated = op.rule.n_outputs == 1 ? g_strdup (name)
                                                   : g_strdup_printf ("%s:%u", name, o);
      int t = add_tensor (self, tname, dtype, PLANNER_TENSOR_ACTIVATION, rank, shape, (int) index,
                          o, error);
      if (t < 0)
        {
          /* Undo the outputs added so far: the graph is unchanged by a refused op. */
          for (guint k = 0; k < o; k++)
            {
              const PlannerTensor *added
                  = &g_array_index (self->tensors, PlannerTensor, outputs[k]);
              self->tensor_bytes -= planner_tensor_bytes (added);
              g_hash_table_remove (self->tensor_index, added->name);
            }
          g_array_set_size (self->tensors, self->tensors->len - o);
          g_free (outputs);
          return -1;
        }
      outputs[o] = (guint) t;
    }

  op.name = g_strdup (name);
  op.type = type;
  op.attrs = *attrs;
  op.n_inputs = n_inputs;
  op.inputs = g_memdup2 (inputs, n_inputs * sizeof (guint));
  op.n_outputs = op.rule.n_outputs;
  op.outputs = outputs;
  g_array_append_val (self->ops, op);
  g_hash_table_insert (self->op_index, g_strdup (name), GUINT_TO_POINTER (index + 1));

  for (guint i = 0; i < n_inputs; i++)
    {
      PlannerUse use = { index, i };
      g_array_append_val (g_array_index (self->tensors, PlannerTensor, inputs[i]).consumers, use);
    }
  return (int) index;
}

guint
planner_graph_op_output (PlannerGraph *self, guint op_index, guint slot)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), 0);
  g_return_val_if_fail (op_index < self->ops->len, 0);
  const PlannerOp *op = &g_array_index (self->ops, PlannerOp, op_index);
  g_return_val_if_fail (slot < op->n_outputs, 0);
  return op->outputs[slot];
}

void
planner_graph_mark_output (PlannerGraph *self, guint tensor)
{
  g_return_if_fail (PLANNER_IS_GRAPH (self));
  g_return_if_fail (tensor < self->tensors->len);
  PlannerTensor *t = &g_array_index (self->tensors, PlannerTensor, tensor);
  if (t->is_output)
    return;
  t->is_output = TRUE;
  g_array_append_val (self->outputs, tensor);
}

guint
planner_graph_get_n_ops (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), 0);
  return self->ops->len;
}

const PlannerOp *
planner_graph_get_op (PlannerGraph *self, guint index)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), NULL);
  g_return_val_if_fail (index < self->ops->len, NULL);
  return &g_array_index (self->ops, PlannerOp, index);
}

guint
planner_graph_get_n_tensors (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), 0);
  return self->tensors->len;
}

const PlannerTensor *
planner_graph_get_tensor (PlannerGraph *self, guint index)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), NULL);
  g_return_val_if_fail (index < self->tensors->len, NULL);
  return &g_array_index (self->tensors, PlannerTensor, index);
}

int
planner_graph_find_op (PlannerGraph *self, const char *name)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), -1);
  return GPOINTER_TO_INT (g_hash_table_lookup (self->op_index, name)) - 1;
}

int
planner_graph_find_tensor (PlannerGraph *self, const char *name)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), -1);
  return GPOINTER_TO_INT (g_hash_table_lookup (self->tensor_index, name)) - 1;
}

const GArray *
planner_graph_get_outputs (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), NULL);
  return self->outputs;
}

guint64
planner_tensor_numel (const PlannerTensor *tensor)
{
  guint64 n = 1;
  for (guint d = 0; d < tensor->rank; d++)
    n *= (guint64) tensor->shape[d];
  return n;
}

guint64
planner_tensor_bytes (const PlannerTensor *tensor)
{
  return planner_tensor_numel (tensor) * planner_dtype_size (tensor->dtype);
}

guint64
planner_graph_get_parameter_count (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), 0);
  guint64 n = 0;
  for (guint i = 0; i < self->tensors->len; i++)
    {
      const PlannerTensor *t = &g_array_index (self->tensors, PlannerTensor, i);
      if (t->kind == PLANNER_TENSOR_PARAMETER)
        n += planner_tensor_numel (t);
    }
  return n;
}

guint64
planner_graph_get_parameter_bytes (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), 0);
  guint64 n = 0;
  for (guint i = 0; i < self->tensors->len; i++)
    {
      const PlannerTensor *t = &g_array_index (self->tensors, PlannerTensor, i);
      if (t->kind == PLANNER_TENSOR_PARAMETER)
        n += planner_tensor_bytes (t);
    }
  return n;
}

double
planner_graph_get_flops (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), 0);
  double flops = 0;
  for (guint i = 0; i < self->ops->len; i++)
    flops += g_array_index (self->ops, PlannerOp, i).rule.flops;
  return flops;
}

gboolean
planner_graph_check (PlannerGraph *self, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), FALSE);

  if (self->ops->len == 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH, "the graph has no ops");
      return FALSE;
    }
  if (self->outputs->len == 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                   "the graph marks no output tensor");
      return FALSE;
    }
  for (guint i = 0; i < self->tensors->len; i++)
    {
      const PlannerTensor *t = &g_array_index (self->tensors, PlannerTensor, i);
      gboolean produced = t->producer >= 0;
      if (produced != (t->kind == PLANNER_TENSOR_ACTIVATION))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "tensor %s: activations have one producer, inputs and parameters none",
                       t->name);
          return FALSE;
        }
      if (!produced && t->consumers->len == 0)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                       "%s %s is used by no op", t->kind == PLANNER_TENSOR_PARAMETER
                                                       ? "parameter" : "input", t->name);
          return FALSE;
        }
    }
  /* Shapes: every op's outputs are what its rule infers from its inputs. Ops are appended
   * only after their inputs exist, so the order is topological by construction. */
  for (guint i = 0; i < self->ops->len; i++)
    {
      const PlannerOp *op = &g_array_index (self->ops, PlannerOp, i);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          const PlannerTensor *t = &g_array_index (self->tensors, PlannerTensor, op->inputs[k]);
          if (t->producer >= (int) i)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_GRAPH,
                           "%s uses %s before it is produced", op->name, t->name);
              return FALSE;
            }
        }
    }
  return TRUE;
}

static void
hash_op_attrs (GChecksum *sum, const PlannerOpAttrs *a)
{
  g_autofree char *text = g_strdup_printf (
    "axis=%d ints=%u start=%" G_GINT64_FORMAT " end=%" G_GINT64_FORMAT " heads=%" G_GINT64_FORMAT
    " tb=%d causal=%d keep=%d var=%d dtype=%d eps=%.17g theta=%.17g scale=%.17g eq=%s",
    a->axis, a->n_ints, a->start, a->end, a->heads, a->transpose_b, a->causal, a->keepdims,
    a->variant, a->dtype, a->eps, a->theta, a->scale, a->equation);
  g_checksum_update (sum, (const guchar *) text, -1);
  if (a->rope_factor != 0)
    {
      /* Only where set, so that every graph from before keeps its hash. */
      g_autofree char *rope = g_strdup_printf (
        " rope=%.17g,%.17g,%.17g,%" G_GINT64_FORMAT, a->rope_factor, a->rope_low_freq,
        a->rope_high_freq, a->rope_original_max);
      g_checksum_update (sum, (const guchar *) rope, -1);
    }
  for (guint i = 0; i < a->n_ints; i++)
    {
      g_autofree char *n = g_strdup_printf (",%" G_GINT64_FORMAT, a->ints[i]);
      g_checksum_update (sum, (const guchar *) n, -1);
    }
}

char *
planner_graph_hash (PlannerGraph *self)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (self), NULL);
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);

  for (guint i = 0; i < self->tensors->len; i++)
    {
      const PlannerTensor *t = &g_array_index (self->tensors, PlannerTensor, i);
      g_autofree char *line = g_strdup_printf ("T %s %d %d %d", t->name, t->dtype, t->kind,
                                               t->is_output);
      g_checksum_update (sum, (const guchar *) line, -1);
      for (guint d = 0; d < t->rank; d++)
        {
          g_autofree char *n = g_strdup_printf (" %" G_GINT64_FORMAT, t->shape[d]);
          g_checksum_update (sum, (const guchar *) n, -1);
        }
      g_checksum_update (sum, (const guchar *) "\n", 1);
    }
  for (guint i = 0; i < self->ops->len; i++)
    {
      const PlannerOp *op = &g_array_index (self->ops, PlannerOp, i);
      g_autofree char *line = g_strdup_printf ("O %s %d", op->name, op->type);
      g_checksum_update (sum, (const guchar *) line, -1);
      hash_op_attrs (sum, &op->attrs);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          g_autofree char *n = g_strdup_printf (" i%u", op->inputs[k]);
          g_checksum_update (sum, (const guchar *) n, -1);
        }
      for (guint k = 0; k < op->n_outputs; k++)
        {
          g_autofree char *n = g_strdup_printf (" o%u", op->outputs[k]);
          g_checksum_update (sum, (const guchar *) n, -1);
        }
      g_checksum_update (sum, (const guchar *) "\n", 1);
    }
  return g_strdup (g_checksum_get_string (sum));
}

gboolean
planner_graph_equal (PlannerGraph *a, PlannerGraph *b)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (a) && PLANNER_IS_GRAPH (b), FALSE);
  if (a->ops->len != b->ops->len || a->tensors->len != b->tensors->len
      || a->outputs->len != b->outputs->len)
    return FALSE;
  g_autofree char *ha = planner_graph_hash (a);
  g_autofree char *hb = planner_graph_hash (b);
  return strcmp (ha, hb) == 0;
}
