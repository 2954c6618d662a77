#define G_LOG_DOMAIN "executor-train"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-backward.h"
#include "executor-error.h"
#include "executor-op-util.h"
#include "executor-pipeline.h"
#include "executor-redistribute.h"
#include "executor-train.h"
#include "executor-train-private.h"

/* One training step on one CPU device: every tensor whole, every op's kernel and backward
 * kernel on it in graph order and back. */

void
executor_train_options_init (ExecutorTrainOptions *options)
{
  memset (options, 0, sizeof *options);
  options->optimizer = EXECUTOR_OPTIMIZER_SGD;
  options->lr = 1e-3;
  options->beta1 = 0.9;
  options->beta2 = 0.999;
  options->eps = 1e-8;
}

typedef struct
{
  PlannerGraph *g;
  ExecutorTensors *sources;
  const ExecutorTrainOptions *options;
  ExecutorTensors *out;
  int logits;           /* the graph output the loss reads */
  const gint64 *labels; /* one per row of the logits; EXECUTOR_TRAIN_IGNORE: no loss there */
} Train;

static gsize
tensor_bytes (const PlannerTensor *t)
{
  return (gsize)executor_shape_numel (t->shape, t->rank)
         * executor_storage_size (executor_storage_dtype (t->dtype));
}

static void
arg_of (ExecutorTensorArg *a, const PlannerTensor *t, ExecutorBuffer *buf)
{
  a->rank = t->rank;
  memcpy (a->shape, t->shape, sizeof a->shape);
  a->dtype = executor_storage_dtype (t->dtype);
  a->buffer = buf;
}

gpointer
executor_train_download (ExecutorDevice *dev, ExecutorBuffer *buf, gsize bytes, GError **error)
{
  gpointer host = g_malloc (MAX (bytes, 1));
  if (!executor_device_download (dev, buf, host, bytes, error))
    g_clear_pointer (&host, g_free);
  return host;
}

/* Loss and its gradient: mean cross-entropy over the labelled rows of the logits, as
 * torch's cross_entropy with ignore_index -100 (Hugging Face's loss in every family). */
static double
lm_loss (Train *tr, const float *logits, float *dlogits)
{
  const PlannerTensor *lt = planner_graph_get_tensor (tr->g, (guint)tr->logits);
  gint64 v = lt->shape[lt->rank - 1], rows = executor_shape_numel (lt->shape, lt->rank) / v;
  gint64 count = 0;
  for (gint64 r = 0; r < rows; r++)
    count += tr->labels[r] != EXECUTOR_TRAIN_IGNORE;
  double total = executor_train_cross_entropy (logits, dlogits, tr->labels, rows, v, count);
  return total / (double)MAX (count, 1);
}

static gboolean
train_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  Train *tr = data;
  PlannerGraph *g = tr->g;
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  g_autofree ExecutorBuffer **val = g_new0 (ExecutorBuffer *, n_t);
  g_autofree ExecutorBuffer **grad = g_new0 (ExecutorBuffer *, n_t);
  g_autofree ExecutorBuffer **tmp = g_new0 (ExecutorBuffer *, PLANNER_MAX_OPERANDS);
  ExecutorBuffer *zero = NULL;
  gboolean ok = TRUE;
  PlannerStrategy none = { 0 };

  for (guint t = 0; ok && t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      ok = (val[t] = executor_device_buffer_new (dev, MAX (tensor_bytes (pt), 1), error)) != NULL;
      if (ok && pt->producer < 0)
        {
          const ExecutorHostTensor *h = executor_tensors_lookup (tr->sources, pt->name);
          if (h == NULL || h->dtype != executor_storage_dtype (pt->dtype)
              || executor_host_tensor_numel (h) != executor_shape_numel (pt->shape, pt->rank))
            {
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
                           "the training step needs %s (%s, %" G_GINT64_FORMAT
                           " elements) from the sources",
                           pt->name, planner_dtype_to_string (pt->dtype),
                           executor_shape_numel (pt->shape, pt->rank));
              ok = FALSE;
            }
          else
            ok = executor_device_upload (dev, val[t], h->data, tensor_bytes (pt), error);
        }
    }

  /* Forward. */
  ExecutorOpCall *calls = g_new0 (ExecutorOpCall, MAX (n_ops, 1));
  for (guint i = 0; ok && i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      ExecutorOpCall *c = &calls[i];
      c->op = op;
      c->rule = &op->rule;
      c->strategy = &none;
      c->n_inputs = op->n_inputs;
      c->n_outputs = op->n_outputs;
      c->add_bias = TRUE;
      for (guint k = 0; k < op->n_inputs; k++)
        arg_of (&c->inputs[k], planner_graph_get_tensor (g, op->inputs[k]), val[op->inputs[k]]);
      for (guint k = 0; k < op->n_outputs; k++)
        arg_of (&c->outputs[k], planner_graph_get_tensor (g, op->outputs[k]), val[op->outputs[k]]);
      ok = executor_device_run_op (dev, c, error);
    }

  /* Loss. */
  const PlannerTensor *lt = planner_graph_get_tensor (g, (guint)tr->logits);
  g_autofree float *logits
      = ok ? executor_train_download (dev, val[tr->logits], tensor_bytes (lt), error) : NULL;
  ok = ok && logits;
  g_autofree float *dlogits = g_new (float, MAX (executor_shape_numel (lt->shape, lt->rank), 1));
  double loss = ok ? lm_loss (tr, logits, dlogits) : 0;

  /* Backward: each tensor's gradient is the sum over its consumers. */
  gsize max_bytes = 4;
  for (guint t = 0; t < n_t; t++)
    max_bytes = MAX (max_bytes, tensor_bytes (planner_graph_get_tensor (g, t)));
  ok = ok && (zero = executor_device_buffer_new (dev, max_bytes, error)) != NULL;
  if (ok)
    {
      g_autofree guint8 *zeros = g_malloc0 (max_bytes);
      ok = executor_device_upload (dev, zero, zeros, max_bytes, error);
    }
  ok = ok && (grad[tr->logits] = executor_device_buffer_new (dev, tensor_bytes (lt), error))
       && executor_device_upload (dev, grad[tr->logits], dlogits, tensor_bytes (lt), error);
  for (guint k = 0; ok && k < PLANNER_MAX_OPERANDS; k++)
    ok = (tmp[k] = executor_device_buffer_new (dev, max_bytes, error)) != NULL;
  for (int i = (int)n_ops - 1; ok && i >= 0; i--)
    {
      const PlannerOp *op = planner_graph_get_op (g, (guint)i);
      gboolean any = FALSE;
      for (guint k = 0; k < op->n_outputs; k++)
        any |= grad[op->outputs[k]] != NULL;
      if (!any)
        continue;
      ExecutorBackwardCall bc = { 0 };
      bc.fwd = &calls[i];
      for (guint k = 0; k < op->n_outputs; k++)
        {
          bc.grad_outputs[k] = calls[i].outputs[k];
          bc.grad_outputs[k].buffer = grad[op->outputs[k]] ? grad[op->outputs[k]] : zero;
        }
      for (guint k = 0; k < op->n_inputs; k++)
        if (calls[i].inputs[k].dtype == PLANNER_DTYPE_F32)
          {
            bc.grad_inputs[k] = calls[i].inputs[k];
            bc.grad_inputs[k].buffer = tmp[k];
          }
      ok = executor_cpu_backward_kernels[op->type](dev, &bc, error);
      /* Accumulate into each input's gradient (host arithmetic on the CPU's buffers). */
      for (guint k = 0; ok && k < op->n_inputs; k++)
        {
          guint t = op->inputs[k];
          if (bc.grad_inputs[k].buffer == NULL)
            continue;
          gsize bytes = tensor_bytes (planner_graph_get_tensor (g, t));
          g_autofree float *add = executor_train_download (dev, tmp[k], bytes, error);
          ok = add != NULL;
          if (!ok)
            break;
          if (grad[t] == NULL)
            {
              ok = (grad[t] = executor_device_buffer_new (dev, bytes, error)) != NULL
                   && executor_device_upload (dev, grad[t], add, bytes, error);
              continue;
            }
          g_autofree float *have = executor_train_download (dev, grad[t], bytes, error);
          ok = have != NULL;
          for (gsize e = 0; ok && e < bytes / 4; e++)
            have[e] += add[e];
          ok = ok && executor_device_upload (dev, grad[t], have, bytes, error);
        }
    }

  /* Gradients, the optimizer step and the outputs. */
  const ExecutorTrainOptions *o = tr->options;
  for (guint t = 0; ok && t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      gsize bytes = tensor_bytes (pt);
      if (pt->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      float *gr = grad[t] ? executor_train_download (dev, grad[t], bytes, error)
                          : g_malloc0 (MAX (bytes, 1));
      float *w = executor_train_download (dev, val[t], bytes, error);
      ok = gr && w;
      for (gsize e = 0; ok && e < bytes / 4; e++)
        {
          double step = o->lr * gr[e];
          if (o->optimizer == EXECUTOR_OPTIMIZER_ADAM)
            {
              /* First step from zero moments: m = (1 - b1) g, v = (1 - b2) g^2, both
               * bias-corrected back to g and g^2. */
              double mhat = (1 - o->beta1) * gr[e] / (1 - o->beta1),
                     vhat = (1 - o->beta2) * (double)gr[e] * gr[e] / (1 - o->beta2);
              step = o->lr * mhat / (sqrt (vhat) + o->eps);
            }
          w[e] = (float)(w[e] - step);
        }
      g_autofree char *gname = g_strconcat ("grad.", pt->name, NULL);
      g_autofree char *uname = g_strconcat ("updated.", pt->name, NULL);
      /* In the shape the weights came in: GPT-2's c_attn as Hugging Face stores it. */
      const ExecutorHostTensor *h = executor_tensors_lookup (tr->sources, pt->name);
      if (ok)
        {
          executor_tensors_add (tr->out, gname, PLANNER_DTYPE_F32, h->rank, h->shape, gr);
          executor_tensors_add (tr->out, uname, PLANNER_DTYPE_F32, h->rank, h->shape, w);
        }
      else
        {
          g_free (gr);
          g_free (w);
        }
    }
  if (ok)
    {
      float *l = g_new (float, 1);
      *l = (float)loss;
      executor_tensors_add (tr->out, "loss", PLANNER_DTYPE_F32, 0, NULL, l);
      const GArray *outputs = planner_graph_get_outputs (g);
      for (guint i = 0; ok && i < outputs->len; i++)
        {
          guint t = g_array_index (outputs, guint, i);
          const PlannerTensor *pt = planner_graph_get_tensor (g, t);
          gpointer host = executor_train_download (dev, val[t], tensor_bytes (pt), error);
          ok = host != NULL;
          if (ok)
            executor_tensors_add (tr->out, pt->name, executor_storage_dtype (pt->dtype), pt->rank,
                                  pt->shape, host);
        }
    }

  g_free (calls);
  for (guint t = 0; t < n_t; t++)
    {
      executor_device_buffer_free (dev, val[t]);
      executor_device_buffer_free (dev, grad[t]);
    }
  for (guint k = 0; k < PLANNER_MAX_OPERANDS; k++)
    executor_device_buffer_free (dev, tmp[k]);
  executor_device_buffer_free (dev, zero);
  return ok;
}

static int
find_input (PlannerGraph *graph, const char *name)
{
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      if (pt->kind == PLANNER_TENSOR_INPUT && g_str_equal (pt->name, name))
        return (int)t;
    }
  return -1;
}

/* The graph's logits output and the label of each of its rows (a new array), as Hugging Face
 * labels them:
 * - given labels (--labels): as they are, -100 (EXECUTOR_TRAIN_IGNORE) ignored;
 * - an encoder-decoder (T5: a decoder_input_ids input): the decoder's next token, the last
 *   position ignored (decoder_input_ids are the labels shifted right, as Hugging Face makes
 *   them from labels);
 * - a language model (input_ids): causal, labels = input_ids shifted left, the last position
 *   ignored; without a causal attention (BERT) a masked LM labelled with its own ids;
 * - a classifier (logits [batch, classes] and no token input, ViT): row b is labelled
 *   b mod classes, a fixed target where no labels are given. */
static gint64 *
find_labels (PlannerGraph *graph, ExecutorTensors *sources, const ExecutorHostTensor *given,
             int *logits, GError **error)
{
  *logits = -1;
  const GArray *outputs = planner_graph_get_outputs (graph);
  for (guint i = 0; i < outputs->len; i++)
    {
      guint t = g_array_index (outputs, guint, i);
      if (g_str_equal (planner_graph_get_tensor (graph, t)->name, "logits"))
        *logits = (int)t;
    }
  if (*logits < 0)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "--train needs a graph with a logits output (a Hugging Face *ForCausalLM, "
                   "GPT2LMHeadModel, BertForMaskedLM, T5ForConditionalGeneration or "
                   "ViTForImageClassification config)");
      return NULL;
    }
  const PlannerTensor *lt = planner_graph_get_tensor (graph, (guint)*logits);
  gint64 v = lt->shape[lt->rank - 1], rows = executor_shape_numel (lt->shape, lt->rank) / v;
  gint64 seq = lt->rank >= 2 ? lt->shape[lt->rank - 2] : rows;
  gint64 *labels = g_new (gint64, MAX (rows, 1));
  if (given != NULL)
    {
      if (given->dtype != PLANNER_DTYPE_I64 || executor_host_tensor_numel (given) != rows)
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
                       "--train: the labels need one integer a row of the logits, %" G_GINT64_FORMAT
                       " (logits are %" G_GINT64_FORMAT " rows of %" G_GINT64_FORMAT
                       "), not %" G_GINT64_FORMAT " %s",
                       rows, rows, v, executor_host_tensor_numel (given),
                       given->dtype == PLANNER_DTYPE_I64 ? "integers" : "floats");
          g_free (labels);
          return NULL;
        }
      const gint64 *l = given->data;
      for (gint64 r = 0; r < rows; r++)
        {
          if (l[r] != EXECUTOR_TRAIN_IGNORE && (l[r] < 0 || l[r] >= v))
            {
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
                           "--train: label %" G_GINT64_FORMAT " at row %" G_GINT64_FORMAT
                           " is outside the %" G_GINT64_FORMAT " classes of the logits (-100 "
                           "leaves a row out)",
                           l[r], r, v);
              g_free (labels);
              return NULL;
            }
          labels[r] = l[r];
        }
      return labels;
    }
  int dec = find_input (graph, "decoder_input_ids"), ids = find_input (graph, "input_ids");
  int from = dec >= 0 ? dec : ids;
  if (from < 0)
    {
      if (lt->rank != 2)
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                       "--train: the graph has no input_ids and its logits are not [batch, "
                       "classes] (rank %u); give the labels with --labels",
                       lt->rank);
          g_free (labels);
          return NULL;
        }
      for (gint64 r = 0; r < rows; r++)
        labels[r] = r % v;
      return labels;
    }
  const PlannerTensor *it = planner_graph_get_tensor (graph, (guint)from);
  const ExecutorHostTensor *h = executor_tensors_lookup (sources, it->name);
  if (executor_shape_numel (it->shape, it->rank) != rows || h == NULL
      || h->dtype != PLANNER_DTYPE_I64 || executor_host_tensor_numel (h) != rows)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "--train: logits and %s do not have one row per token", it->name);
      g_free (labels);
      return NULL;
    }
  gboolean causal = dec >= 0;
  for (guint i = 0; dec < 0 && i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      causal |= op->type == PLANNER_OP_SDPA && op->attrs.causal;
    }
  const gint64 *tok = h->data;
  for (gint64 r = 0; r < rows; r++)
    labels[r] = !causal ? tok[r] : r % seq == seq - 1 ? EXECUTOR_TRAIN_IGNORE : tok[r + 1];
  return labels;
}

gboolean
executor_train_step_reference (PlannerGraph *graph, ExecutorTensors *sources,
                               const ExecutorTrainOptions *options, ExecutorTensors *out,
                               GError **error)
{
  Train tr = { graph, sources, options, out, -1, NULL };
  g_autofree gint64 *labels = find_labels (graph, sources, options->labels, &tr.logits, error);
  if (labels == NULL)
    return FALSE;
  tr.labels = labels;
  g_autoptr (PlannerMesh) one = planner_mesh_parse ("a=1", error);
  g_autoptr (ExecutorBackend) backend = one ? executor_backend_new ("cpu", one, error) : NULL;
  return backend && executor_backend_run (backend, train_device, &tr, error);
}

/* Copies the block at @offset of @local shape out of a row-major global array, or into it
 * (@to_global); as executor-trial.c does. */
static void
block_copy (guint8 *global, const gint64 *gshape, guint rank, const gint64 *offset,
            const gint64 *local, gsize es, guint8 *block, gboolean to_global)
{
  if (rank == 0)
    {
      memcpy (to_global ? global : block, to_global ? block : global, es);
      return;
    }
  gint64 gstride[PLANNER_MAX_RANK], s = 1, idx[PLANNER_MAX_RANK] = { 0 };
  for (int d = (int)rank - 1; d >= 0; d--)
    {
      gstride[d] = s;
      s *= gshape[d];
    }
  gint64 rows = executor_shape_numel (local, rank - 1), row = local[rank - 1];
  for (gint64 r = 0; r < rows; r++)
    {
      gint64 off = offset[rank - 1];
      for (guint d = 0; d + 1 < rank; d++)
        off += (offset[d] + idx[d]) * gstride[d];
      if (to_global)
        memcpy (global + off * es, block + r * row * es, (gsize)row * es);
      else
        memcpy (block + r * row * es, global + off * es, (gsize)row * es);
      for (int d = (int)rank - 2; d >= 0; d--)
        {
          if (++idx[d] < local[d])
            break;
          idx[d] = 0;
        }
    }
}

/* ---- the same step, sharded by a plan ----
 *
 * Forward: each op on its local shards in the layouts its strategy needs, every input
 * converted from the layout the plan stores its tensor in (the redistributor's path: the
 * plan's own redistributions). Loss: the logits made whole on every device. Backward, in
 * reverse: each op's backward on its local shards, with the gradient of an output laid out as
 * the output with its partial axes made whole (each device's local backward then gives its
 * shards' gradients); an input's contribution is partial over the axes the strategy uses but
 * the input does not split (tensor parallelism's f/g operators, the data-parallel gradient
 * sum) and is converted, with collectives, to the layout its tensor's gradient is kept in.
 * Parameters end in their stored layout, whole; the optimizer updates the shards. */

typedef ExecutorTrainOpLower OpLower;

typedef struct
{
  PlannerPlan *plan;
  PlannerGraph *g;
  const PlannerMesh *mesh;
  ExecutorTensors *sources;
  const ExecutorTrainOptions *options;
  OpLower *ops;
  PlannerLayout *stored, *grad_layout;
  const PlannerRedistPath *logits_whole, *logits_grad;
  int logits;
  const gint64 *labels;
  float *loss;         /* per device */
  float ***param_grad; /* [tensor][device] local shards of each parameter's gradient */
  float ***param_new;
  double *bwd_s, *sync_s; /* per device: backward time, of which gradient conversions */
} Sharded;

static gsize
local_bytes (const PlannerLayout *l, const PlannerMesh *mesh, const PlannerTensor *t)
{
  gint64 local[PLANNER_MAX_RANK];
  planner_layout_local_shape (l, mesh, t->shape, local);
  return (gsize)executor_shape_numel (local, t->rank)
         * executor_storage_size (executor_storage_dtype (t->dtype));
}

static void
local_arg (ExecutorTensorArg *a, const PlannerLayout *l, const PlannerMesh *mesh,
           const PlannerTensor *t, ExecutorBuffer *buf)
{
  arg_of (a, t, buf);
  planner_layout_local_shape (l, mesh, t->shape, a->shape);
}

/* A new buffer holding @in (laid out as @path's source) converted along @path. */
static ExecutorBuffer *
convert (ExecutorDevice *dev, const PlannerRedistPath *path, const PlannerLayout *from,
         const PlannerMesh *mesh, const PlannerTensor *t, ExecutorBuffer *in, GError **error)
{
  PlannerDType dt = executor_storage_dtype (t->dtype);
  gsize bytes = local_bytes (from, mesh, t);
  ExecutorBuffer *cur = executor_device_buffer_new (dev, MAX (bytes, 1), error);
  if (cur == NULL
      || !executor_device_copy_2d (dev, cur, 0, MAX (bytes, 1), in, 0, MAX (bytes, 1), bytes, 1,
                                   error))
    return NULL;
  for (guint s = 0; s < path->n_steps; s++)
    {
      const PlannerRedistStep *st = &path->steps[s];
      gsize scratch
          = executor_redist_step_scratch_bytes (st, &st->before, mesh, t->shape, t->rank, dt);
      ExecutorBuffer *out
          = executor_device_buffer_new (dev, MAX (local_bytes (&st->after, mesh, t), 1), error);
      ExecutorBuffer *sa = scratch ? executor_device_buffer_new (dev, scratch, error) : NULL;
      ExecutorBuffer *sb = scratch ? executor_device_buffer_new (dev, scratch, error) : NULL;
      gboolean ok = out && (!scratch || (sa && sb))
                    && executor_redist_step_run (dev, st, &st->before, t->shape, t->rank, dt, cur,
                                                 out, sa, sb, error);
      executor_device_buffer_free (dev, sa);
      executor_device_buffer_free (dev, sb);
      executor_device_buffer_free (dev, cur);
      cur = out;
      if (!ok)
        {
          executor_device_buffer_free (dev, cur);
          return NULL;
        }
    }
  return cur;
}

static gboolean
add_into (ExecutorDevice *dev, ExecutorBuffer *acc, ExecutorBuffer *add, gsize bytes,
          GError **error)
{
  g_autofree float *a = executor_train_download (dev, acc, bytes, error);
  g_autofree float *b = a ? executor_train_download (dev, add, bytes, error) : NULL;
  if (b == NULL)
    return FALSE;
  for (gsize e = 0; e < bytes / 4; e++)
    a[e] += b[e];
  return executor_device_upload (dev, acc, a, bytes, error);
}

static double
now_s (void)
{
  return (double)g_get_monotonic_time () * 1e-6;
}

static gboolean
sharded_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  Sharded *sh = data;
  PlannerGraph *g = sh->g;
  const PlannerMesh *mesh = sh->mesh;
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  g_autofree ExecutorBuffer **val = g_new0 (ExecutorBuffer *, n_t);
  g_autofree ExecutorBuffer **grad = g_new0 (ExecutorBuffer *, n_t);
  g_autofree ExecutorBuffer **ins = g_new0 (ExecutorBuffer *, (gsize)n_ops * PLANNER_MAX_OPERANDS);
  g_autofree ExecutorBuffer **outs = g_new0 (ExecutorBuffer *, (gsize)n_ops * PLANNER_MAX_OPERANDS);
  g_autofree ExecutorOpCall *calls = g_new0 (ExecutorOpCall, MAX (n_ops, 1));
  ExecutorBuffer *zero = NULL, *tmp = NULL;
  gboolean ok = TRUE;

  /* Sources: this device's block of each global value, in its stored layout. */
  for (guint t = 0; ok && t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      if (pt->producer >= 0)
        continue;
      const ExecutorHostTensor *h = executor_tensors_lookup (sh->sources, pt->name);
      gsize es = executor_storage_size (executor_storage_dtype (pt->dtype));
      gint64 local[PLANNER_MAX_RANK], offset[PLANNER_MAX_RANK];
      planner_layout_local_shape (&sh->stored[t], mesh, pt->shape, local);
      planner_layout_local_offset (&sh->stored[t], mesh, pt->shape, dev->coords, offset);
      gsize bytes = local_bytes (&sh->stored[t], mesh, pt);
      g_autofree guint8 *block = g_malloc (MAX (bytes, 1));
      block_copy ((guint8 *)h->data, pt->shape, pt->rank, offset, local, es, block, FALSE);
      ok = (val[t] = executor_device_buffer_new (dev, MAX (bytes, 1), error))
           && executor_device_upload (dev, val[t], block, bytes, error);
    }

  /* Forward. */
  for (guint i = 0; ok && i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      const OpLower *lo = &sh->ops[i];
      ExecutorOpCall *c = &calls[i];
      c->op = op;
      c->rule = &op->rule;
      c->strategy = &planner_plan_get_op (sh->plan, i)->strategy;
      c->n_inputs = op->n_inputs;
      c->n_outputs = op->n_outputs;
      planner_strategy_factor_offsets (c->strategy, &op->rule, mesh, dev->coords,
                                       c->factor_offsets);
      c->add_bias = TRUE;
      for (guint a = 0; a < mesh->n_axes; a++)
        if ((lo->out_partial & (1u << a)) && dev->coords[a] != 0)
          c->add_bias = FALSE;
      for (guint k = 0; ok && k < op->n_inputs; k++)
        {
          const PlannerTensor *pt = planner_graph_get_tensor (g, op->inputs[k]);
          ExecutorBuffer **b = &ins[i * PLANNER_MAX_OPERANDS + k];
          ok = (*b = convert (dev, lo->fwd_in[k], &sh->stored[op->inputs[k]], mesh, pt,
                              val[op->inputs[k]], error))
               != NULL;
          local_arg (&c->inputs[k], &lo->in[k], mesh, pt, *b);
        }
      for (guint k = 0; ok && k < op->n_outputs; k++)
        {
          const PlannerTensor *pt = planner_graph_get_tensor (g, op->outputs[k]);
          ExecutorBuffer **b = &outs[i * PLANNER_MAX_OPERANDS + k];
          ok = (*b = executor_device_buffer_new (dev, MAX (local_bytes (&lo->out[k], mesh, pt), 1),
                                                 error))
               != NULL;
          local_arg (&c->outputs[k], &lo->out[k], mesh, pt, *b);
        }
      ok = ok && executor_device_run_op (dev, c, error);
      for (guint k = 0; ok && k < op->n_outputs; k++)
        ok = (val[op->outputs[k]] = convert (dev, lo->fwd_out[k], &lo->out[k], mesh,
                                             planner_graph_get_tensor (g, op->outputs[k]),
                                             outs[i * PLANNER_MAX_OPERANDS + k], error))
             != NULL;
    }

  /* Loss on the whole logits, the same on every device. */
  const PlannerTensor *lt = planner_graph_get_tensor (g, (guint)sh->logits);
  gsize lbytes = tensor_bytes (lt);
  Train tr = { g, sh->sources, sh->options, NULL, sh->logits, sh->labels };
  if (ok)
    {
      g_autofree float *dl = g_new (float, MAX (lbytes / 4, 1));
      ExecutorBuffer *whole = convert (dev, sh->logits_whole, &sh->stored[sh->logits], mesh, lt,
                                       val[sh->logits], error);
      g_autofree float *logits = whole ? executor_train_download (dev, whole, lbytes, error) : NULL;
      ok = logits != NULL;
      if (ok)
        {
          sh->loss[dev->index] = (float)lm_loss (&tr, logits, dl);
          ok = executor_device_upload (dev, whole, dl, lbytes, error);
        }
      PlannerLayout rep;
      planner_layout_init_replicated (&rep, lt->rank);
      ok = ok
           && (grad[sh->logits] = convert (dev, sh->logits_grad, &rep, mesh, lt, whole, error))
                  != NULL;
      executor_device_buffer_free (dev, whole);
    }

  /* Backward. */
  gsize max_bytes = 4;
  for (guint t = 0; t < n_t; t++)
    max_bytes = MAX (max_bytes, tensor_bytes (planner_graph_get_tensor (g, t)));
  if (ok)
    {
      g_autofree guint8 *zeros = g_malloc0 (max_bytes);
      ok = (zero = executor_device_buffer_new (dev, max_bytes, error))
           && executor_device_upload (dev, zero, zeros, max_bytes, error);
    }
  double t0 = now_s (), sync = 0;
  ok = ok && executor_device_barrier (dev, error);
  for (int i = (int)n_ops - 1; ok && i >= 0; i--)
    {
      const PlannerOp *op = planner_graph_get_op (g, (guint)i);
      const OpLower *lo = &sh->ops[i];
      gboolean any = FALSE;
      for (guint k = 0; k < op->n_outputs; k++)
        any |= grad[op->outputs[k]] != NULL;
      if (!any)
        continue;
      ExecutorBackwardCall bc = { 0 };
      ExecutorBuffer *gin_bufs[PLANNER_MAX_OPERANDS] = { NULL };
      bc.fwd = &calls[i];
      for (guint k = 0; k < op->n_outputs; k++)
        {
          bc.grad_outputs[k] = calls[i].outputs[k];
          bc.grad_outputs[k].buffer = grad[op->outputs[k]] ? grad[op->outputs[k]] : zero;
        }
      for (guint k = 0; ok && k < op->n_inputs; k++)
        if (calls[i].inputs[k].dtype == PLANNER_DTYPE_F32)
          {
            bc.grad_inputs[k] = calls[i].inputs[k];
            ok = (gin_bufs[k] = bc.grad_inputs[k].buffer = executor_device_buffer_new (
                      dev,
                      MAX (local_bytes (&lo->in[k], mesh,
                                        planner_graph_get_tensor (g, op->inputs[k])),
                           1),
                      error))
                 != NULL;
          }
      ok = ok && executor_cpu_backward_kernels[op->type](dev, &bc, error);
      for (guint k = 0; ok && k < op->n_inputs; k++)
        {
          if (gin_bufs[k] == NULL)
            continue;
          guint t = op->inputs[k];
          const PlannerTensor *pt = planner_graph_get_tensor (g, t);
          double c0 = now_s ();
          tmp = convert (dev, lo->bwd_in[k], &lo->contrib[k], mesh, pt, gin_bufs[k], error);
          sync += lo->bwd_in[k]->n_steps ? now_s () - c0 : 0;
          ok = tmp != NULL;
          if (ok && grad[t] == NULL)
            grad[t] = g_steal_pointer (&tmp);
          else if (ok)
            ok = add_into (dev, grad[t], tmp, local_bytes (&sh->grad_layout[t], mesh, pt), error);
          executor_device_buffer_free (dev, tmp);
          tmp = NULL;
        }
      for (guint k = 0; k < op->n_inputs; k++)
        executor_device_buffer_free (dev, gin_bufs[k]);
    }
  ok = ok && executor_device_barrier (dev, error);
  sh->bwd_s[dev->index] = now_s () - t0;
  sh->sync_s[dev->index] = sync;

  /* Each parameter's gradient shard, and the optimizer step on it. */
  const ExecutorTrainOptions *o = sh->options;
  for (guint t = 0; ok && t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      if (pt->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      gsize bytes = local_bytes (&sh->stored[t], mesh, pt);
      float *gr = grad[t] ? executor_train_download (dev, grad[t], bytes, error)
                          : g_malloc0 (MAX (bytes, 1));
      float *w = executor_train_download (dev, val[t], bytes, error);
      ok = gr && w;
      for (gsize e = 0; ok && e < bytes / 4; e++)
        {
          double step = o->lr * gr[e];
          if (o->optimizer == EXECUTOR_OPTIMIZER_ADAM)
            step = o->lr * gr[e] / (fabs ((double)gr[e]) + o->eps);
          w[e] = (float)(w[e] - step);
        }
      sh->param_grad[t][dev->index] = gr;
      sh->param_new[t][dev->index] = w;
    }

  for (guint t = 0; t < n_t; t++)
    {
      executor_device_buffer_free (dev, val[t]);
      executor_device_buffer_free (dev, grad[t]);
    }
  for (guint i = 0; i < n_ops * PLANNER_MAX_OPERANDS; i++)
    {
      executor_device_buffer_free (dev, ins[i]);
      executor_device_buffer_free (dev, outs[i]);
    }
  executor_device_buffer_free (dev, zero);
  return ok;
}

static const PlannerRedistPath *
find_path (PlannerRedistributor *r, const PlannerLayout *from, const PlannerLayout *to,
           const PlannerTensor *t, const char *what, GError **error)
{
  const PlannerRedistPath *p
      = planner_redistributor_find (r, from, to, t->shape, t->rank, t->dtype);
  if (p == NULL || !p->reachable)
    {
      const PlannerMesh *mesh = planner_redistributor_get_mesh (r);
      g_autofree char *a = planner_layout_to_string (from, mesh);
      g_autofree char *b = planner_layout_to_string (to, mesh);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                   "%s: no redistribution takes %s from %s to %s", what, t->name, a, b);
      return NULL;
    }
  return p;
}

/* The layout @l with its partial axes made whole. */
static PlannerLayout
whole_partials (const PlannerLayout *l)
{
  PlannerLayout r = *l;
  r.partial = 0;
  return r;
}

/* Puts each device's block of a gathered value in place (one replica each). */
static float *
gather (const PlannerLayout *l, const PlannerMesh *mesh, const PlannerTensor *t, float **shards)
{
  gint64 n = executor_shape_numel (t->shape, t->rank), local[PLANNER_MAX_RANK];
  float *global = g_new0 (float, MAX (n, 1));
  planner_layout_local_shape (l, mesh, t->shape, local);
  guint32 owning = planner_layout_split_mask (l);
  for (guint d = 0; d < planner_mesh_n_devices (mesh); d++)
    {
      guint coords[PLANNER_MAX_AXES];
      planner_mesh_device_coords (mesh, d, coords);
      gboolean first = TRUE;
      for (guint a = 0; a < mesh->n_axes; a++)
        if (!(owning & (1u << a)) && coords[a] != 0)
          first = FALSE;
      if (!first)
        continue;
      gint64 offset[PLANNER_MAX_RANK];
      planner_layout_local_offset (l, mesh, t->shape, coords, offset);
      block_copy ((guint8 *)global, t->shape, t->rank, offset, local, 4, (guint8 *)shards[d], TRUE);
    }
  return global;
}

gboolean
executor_train_step_sharded (PlannerPlan *plan, ExecutorTensors *sources,
                             const ExecutorTrainOptions *options, ExecutorTensors *out,
                             ExecutorTrainTimes *times, GError **error)
{
  PlannerGraph *g = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  guint n_dev = (guint)planner_mesh_n_devices (mesh);
  /* A pipelined plan runs its micro-batch schedule (executor-pipeline-train.c). */
  if (planner_mesh_pipeline_axis (mesh) >= 0
      && mesh->sizes[planner_mesh_pipeline_axis (mesh)] > 1)
    return executor_pipeline_train_step (plan, sources, options, out, times, error);
  Sharded sh = { plan, g, mesh, sources, options };
  g_autofree gint64 *labels = find_labels (g, sources, options->labels, &sh.logits, error);
  if (labels == NULL)
    return FALSE;
  sh.labels = labels;
  if (times)
    memset (times, 0, sizeof *times);
  g_autoptr (PlannerRedistributor) r
      = planner_redistributor_new (mesh, planner_plan_get_hardware (plan));
  g_autofree OpLower *ops = g_new0 (OpLower, MAX (n_ops, 1));
  g_autofree PlannerLayout *stored = g_new0 (PlannerLayout, MAX (n_t, 1));
  g_autofree PlannerLayout *grad_layout = g_new0 (PlannerLayout, MAX (n_t, 1));
  sh.ops = ops;
  sh.stored = stored;
  sh.grad_layout = grad_layout;
  for (guint t = 0; t < n_t; t++)
    {
      stored[t] = *planner_plan_get_tensor_layout (plan, t);
      grad_layout[t] = whole_partials (&stored[t]);
    }
  if (!executor_train_lower_ops (plan, r, NULL, 1, ops, stored, grad_layout, times, error))
    return FALSE;
  const PlannerTensor *lt = planner_graph_get_tensor (g, (guint)sh.logits);
  PlannerLayout rep;
  planner_layout_init_replicated (&rep, lt->rank);
  if (!(sh.logits_whole = find_path (r, &stored[sh.logits], &rep, lt, "the loss", error))
      || !(sh.logits_grad = find_path (r, &rep, &grad_layout[sh.logits], lt, "the loss", error)))
    return FALSE;

  g_autoptr (ExecutorBackend) backend = executor_backend_new ("cpu", mesh, error);
  if (backend == NULL)
    return FALSE;
  g_autofree float *loss = g_new0 (float, n_dev);
  g_autofree double *bwd_s = g_new0 (double, n_dev), *sync_s = g_new0 (double, n_dev);
  sh.loss = loss;
  sh.bwd_s = bwd_s;
  sh.sync_s = sync_s;
  sh.param_grad = executor_train_shards_new (n_t, n_dev);
  sh.param_new = executor_train_shards_new (n_t, n_dev);
  gboolean ok = executor_backend_run (backend, sharded_device, &sh, error);
  for (guint t = 0; ok && t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      if (pt->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      const ExecutorHostTensor *h = executor_tensors_lookup (sources, pt->name);
      g_autofree char *gname = g_strconcat ("grad.", pt->name, NULL);
      g_autofree char *uname = g_strconcat ("updated.", pt->name, NULL);
      executor_tensors_add (out, gname, PLANNER_DTYPE_F32, h->rank, h->shape,
                            gather (&stored[t], mesh, pt, sh.param_grad[t]));
      executor_tensors_add (out, uname, PLANNER_DTYPE_F32, h->rank, h->shape,
                            gather (&stored[t], mesh, pt, sh.param_new[t]));
    }
  if (ok)
    {
      float *l = g_new (float, 1);
      *l = loss[0];
      executor_tensors_add (out, "loss", PLANNER_DTYPE_F32, 0, NULL, l);
      if (times)
        times->estimated_backward_s += times->estimated_grad_sync_s;
      if (times)
        for (guint d = 0; d < n_dev; d++)
          {
            times->backward_s = MAX (times->backward_s, bwd_s[d]);
            times->grad_sync_s = MAX (times->grad_sync_s, sync_s[d]);
          }
    }
  executor_train_shards_free (sh.param_grad, n_t, n_dev);
  executor_train_shards_free (sh.param_new, n_t, n_dev);
  return ok;
}

/* ---- shared with the pipelined step (executor-train-private.h) ---- */

double
executor_train_cross_entropy (const float *logits, float *dlogits, const gint64 *labels,
                              gint64 rows, gint64 v, gint64 count)
{
  double total = 0;
  memset (dlogits, 0, (gsize)(rows * v) * sizeof (float));
  for (gint64 r = 0; r < rows; r++)
    {
      gint64 label = labels[r];
      if (label == EXECUTOR_TRAIN_IGNORE)
        continue;
      const float *z = logits + r * v;
      double mx = -INFINITY, sum = 0;
      for (gint64 j = 0; j < v; j++)
        mx = MAX (mx, z[j]);
      for (gint64 j = 0; j < v; j++)
        sum += exp (z[j] - mx);
      total += log (sum) + mx - z[label];
      for (gint64 j = 0; j < v; j++)
        dlogits[r * v + j]
            = (float)((exp (z[j] - mx) / sum - (j == label ? 1.0 : 0.0)) / (double)count);
    }
  return total;
}

float ***
executor_train_shards_new (guint n_tensors, guint n_devices)
{
  float ***shards = g_new0 (float **, MAX (n_tensors, 1));
  for (guint t = 0; t < n_tensors; t++)
    shards[t] = g_new0 (float *, n_devices);
  return shards;
}

void
executor_train_shards_free (float ***shards, guint n_tensors, guint n_devices)
{
  for (guint t = 0; t < n_tensors; t++)
    {
      for (guint d = 0; d < n_devices; d++)
        g_free (shards[t][d]);
      g_free (shards[t]);
    }
  g_free (shards);
}

gint64 *
executor_train_find_labels (PlannerGraph *graph, ExecutorTensors *sources,
                            const ExecutorHostTensor *given, int *logits, GError **error)
{
  return find_labels (graph, sources, given, logits, error);
}

gsize
executor_train_local_bytes (const PlannerLayout *l, const PlannerMesh *mesh,
                            const PlannerTensor *t)
{
  return local_bytes (l, mesh, t);
}

void
executor_train_local_arg (ExecutorTensorArg *a, const PlannerLayout *l, const PlannerMesh *mesh,
                          const PlannerTensor *t, ExecutorBuffer *buf)
{
  local_arg (a, l, mesh, t, buf);
}

ExecutorBuffer *
executor_train_convert (ExecutorDevice *dev, const PlannerRedistPath *path,
                        const PlannerLayout *from, const PlannerMesh *mesh,
                        const PlannerTensor *t, ExecutorBuffer *in, GError **error)
{
  return convert (dev, path, from, mesh, t, in, error);
}

gboolean
executor_train_add_into (ExecutorDevice *dev, ExecutorBuffer *acc, ExecutorBuffer *add,
                         gsize bytes, GError **error)
{
  return add_into (dev, acc, add, bytes, error);
}

const PlannerRedistPath *
executor_train_find_path (PlannerRedistributor *r, const PlannerLayout *from,
                          const PlannerLayout *to, const PlannerTensor *t, const char *what,
                          GError **error)
{
  return find_path (r, from, to, t, what, error);
}

/* Each op's lowering: its layouts, what each input contributes to the backward pass (partial
 * over the axes the strategy uses but the input does not split: tensor parallelism's f/g
 * operators, the data-parallel gradient sum) and the redistributor's paths forward and back,
 * on the shapes of @tensors (the graph's when NULL; a micro-batch's for the pipelined step).
 * @grad_layout gets each op output's gradient layout (the output with its partial axes made
 * whole). @times (may be NULL) gains the estimated backward compute and @sync_scale times
 * the backward collectives (once per micro-batch in a pipeline). */
gboolean
executor_train_lower_ops (PlannerPlan *plan, PlannerRedistributor *r,
                          const PlannerTensor *tensors, double sync_scale,
                          ExecutorTrainOpLower *ops, const PlannerLayout *stored,
                          PlannerLayout *grad_layout, ExecutorTrainTimes *times, GError **error)
{
  PlannerGraph *g = planner_plan_get_graph (plan);
  guint n_ops = planner_graph_get_n_ops (g);
#define TENSOR(id) (tensors ? &tensors[id] : planner_graph_get_tensor (g, id))
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      planner_plan_op_layouts (plan, i, ops[i].in, ops[i].out);
      for (guint k = 0; k < op->n_outputs; k++)
        {
          grad_layout[op->outputs[k]] = whole_partials (&ops[i].out[k]);
          ops[i].out_partial |= ops[i].out[k].partial;
        }
    }
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      ExecutorTrainOpLower *lo = &ops[i];
      guint32 used = lo->out_partial;
      for (guint k = 0; k < op->n_inputs; k++)
        used |= planner_layout_split_mask (&lo->in[k]);
      for (guint k = 0; k < op->n_outputs; k++)
        used |= planner_layout_split_mask (&lo->out[k]);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          const PlannerTensor *t = TENSOR (op->inputs[k]);
          lo->contrib[k] = lo->in[k];
          lo->contrib[k].partial
              = used & ~planner_layout_split_mask (&lo->in[k]) & ~lo->in[k].partial;
          if (!(lo->fwd_in[k]
                = find_path (r, &stored[op->inputs[k]], &lo->in[k], t, op->name, error)))
            return FALSE;
          if (t->dtype != PLANNER_DTYPE_I64
              && !(lo->bwd_in[k] = find_path (r, &lo->contrib[k], &grad_layout[op->inputs[k]], t,
                                              op->name, error)))
            return FALSE;
        }
      if (times)
        {
          times->estimated_backward_s += 2 * planner_plan_get_op (plan, i)->compute_time_s;
          for (guint k = 0; k < op->n_inputs; k++)
            if (lo->bwd_in[k])
              times->estimated_grad_sync_s += sync_scale * lo->bwd_in[k]->time_s;
        }
      for (guint k = 0; k < op->n_outputs; k++)
        if (!(lo->fwd_out[k] = find_path (r, &lo->out[k], &stored[op->outputs[k]],
                                          TENSOR (op->outputs[k]), op->name, error)))
          return FALSE;
    }
#undef TENSOR
  return TRUE;
}

void
executor_train_block_copy (guint8 *global, const gint64 *gshape, guint rank,
                           const gint64 *offset, const gint64 *local, gsize es, guint8 *block,
                           gboolean to_global)
{
  block_copy (global, gshape, rank, offset, local, es, block, to_global);
}
