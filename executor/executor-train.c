#define G_LOG_DOMAIN "executor-train"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-backward.h"
#include "executor-error.h"
#include "executor-op-util.h"
#include "executor-train.h"

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
  int logits; /* the graph output the loss reads */
  int ids;    /* input_ids */
  gboolean causal;
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

static gpointer
download (ExecutorDevice *dev, ExecutorBuffer *buf, gsize bytes, GError **error)
{
  gpointer host = g_malloc (MAX (bytes, 1));
  if (!executor_device_download (dev, buf, host, bytes, error))
    g_clear_pointer (&host, g_free);
  return host;
}

/* Loss and its gradient: mean cross-entropy over the labelled positions. */
static double
lm_loss (Train *tr, const float *logits, const gint64 *ids, float *dlogits)
{
  const PlannerTensor *lt = planner_graph_get_tensor (tr->g, (guint)tr->logits);
  gint64 v = lt->shape[lt->rank - 1], rows = executor_shape_numel (lt->shape, lt->rank) / v;
  gint64 seq = lt->rank >= 2 ? lt->shape[lt->rank - 2] : rows;
  gint64 count = tr->causal ? rows - rows / seq : rows;
  double total = 0;
  memset (dlogits, 0, (gsize)(rows * v) * sizeof (float));
  for (gint64 r = 0; r < rows; r++)
    {
      if (tr->causal && r % seq == seq - 1)
        continue; /* the last position has no next token */
      gint64 label = tr->causal ? ids[r + 1] : ids[r];
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
  const PlannerTensor *it = planner_graph_get_tensor (g, (guint)tr->ids);
  g_autofree float *logits = ok ? download (dev, val[tr->logits], tensor_bytes (lt), error) : NULL;
  g_autofree gint64 *ids = ok ? download (dev, val[tr->ids], tensor_bytes (it), error) : NULL;
  ok = ok && logits && ids;
  g_autofree float *dlogits = g_new (float, MAX (executor_shape_numel (lt->shape, lt->rank), 1));
  double loss = ok ? lm_loss (tr, logits, ids, dlogits) : 0;

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
          g_autofree float *add = download (dev, tmp[k], bytes, error);
          ok = add != NULL;
          if (!ok)
            break;
          if (grad[t] == NULL)
            {
              ok = (grad[t] = executor_device_buffer_new (dev, bytes, error)) != NULL
                   && executor_device_upload (dev, grad[t], add, bytes, error);
              continue;
            }
          g_autofree float *have = download (dev, grad[t], bytes, error);
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
      float *gr = grad[t] ? download (dev, grad[t], bytes, error) : g_malloc0 (MAX (bytes, 1));
      float *w = download (dev, val[t], bytes, error);
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
          gpointer host = download (dev, val[t], tensor_bytes (pt), error);
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

gboolean
executor_train_step_reference (PlannerGraph *graph, ExecutorTensors *sources,
                               const ExecutorTrainOptions *options, ExecutorTensors *out,
                               GError **error)
{
  Train tr = { graph, sources, options, out, -1, -1, FALSE };
  const GArray *outputs = planner_graph_get_outputs (graph);
  for (guint i = 0; i < outputs->len; i++)
    {
      guint t = g_array_index (outputs, guint, i);
      if (g_str_equal (planner_graph_get_tensor (graph, t)->name, "logits"))
        tr.logits = (int)t;
    }
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      if (pt->kind == PLANNER_TENSOR_INPUT && g_str_equal (pt->name, "input_ids"))
        tr.ids = (int)t;
    }
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      tr.causal |= op->type == PLANNER_OP_SDPA && op->attrs.causal;
    }
  if (tr.logits < 0 || tr.ids < 0)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "--train needs a language model: a graph with input_ids and a logits output "
                   "(a Hugging Face *ForCausalLM, GPT2LMHeadModel or BertForMaskedLM config)");
      return FALSE;
    }
  const PlannerTensor *lt = planner_graph_get_tensor (graph, (guint)tr.logits);
  const PlannerTensor *it = planner_graph_get_tensor (graph, (guint)tr.ids);
  if (executor_shape_numel (lt->shape, lt->rank) / lt->shape[lt->rank - 1]
      != executor_shape_numel (it->shape, it->rank))
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "--train: logits and input_ids do not have one row per token");
      return FALSE;
    }
  g_autoptr (PlannerMesh) one = planner_mesh_parse ("a=1", error);
  g_autoptr (ExecutorBackend) backend = one ? executor_backend_new ("cpu", one, error) : NULL;
  return backend && executor_backend_run (backend, train_device, &tr, error);
}
