#define G_LOG_DOMAIN "executor-pipeline"

#include "config.h"

#include <math.h>
#include <string.h>

#include "executor-backward.h"
#include "executor-error.h"
#include "executor-op-util.h"
#include "executor-pipeline.h"
#include "executor-spmd.h"
#include "executor-train-private.h"
#include "planner-pipeline.h"

/* The pipelined training step (executor-pipeline.h). Every device runs its stage's slots of
 * the schedule in its own thread; the only meetings between stages are the point-to-point
 * messages below, so stage s is free to start micro-batch k + 1 while stage s + 1 still works
 * on k. Collectives stay inside a stage (the plan's layouts never name pp), where every
 * device runs the same slots in the same order, so they pair up as in a plan without pp. */

/* ---- point-to-point messages ----
 *
 * The backends have collectives only; a send is a host copy of the sender's shard left in a
 * mailbox the receiver takes it from (for cpu a copy within host memory), keyed by sender,
 * receiver, tensor, micro-batch and direction, so messages may arrive in any order. */

typedef struct
{
  GMutex mutex;
  GCond cond;
  GHashTable *box; /* key -> GBytes */
  gboolean aborted;
} Mailbox;

static char *
message_key (guint from, guint to, guint tensor, guint micro_batch, gboolean gradient)
{
  return g_strdup_printf ("%u>%u:%u:%u:%c", from, to, tensor, micro_batch, gradient ? 'g' : 'a');
}

static void
mailbox_put (Mailbox *mb, char *key, GBytes *data)
{
  g_mutex_lock (&mb->mutex);
  g_hash_table_replace (mb->box, key, data);
  g_cond_broadcast (&mb->cond);
  g_mutex_unlock (&mb->mutex);
}

/* Waits for the message; NULL with EXECUTOR_ERROR_ABORTED when a device failed. */
static GBytes *
mailbox_take (Mailbox *mb, const char *key, GError **error)
{
  GBytes *data = NULL;
  gpointer stolen_key = NULL;
  g_mutex_lock (&mb->mutex);
  while (!mb->aborted
         && !g_hash_table_steal_extended (mb->box, key, &stolen_key, (gpointer *)&data))
    g_cond_wait (&mb->cond, &mb->mutex);
  g_mutex_unlock (&mb->mutex);
  /* Stealing leaves the table's copy of the key to free. */
  g_free (stolen_key);
  if (data == NULL)
    executor_spmd_aborted_error (error);
  return data;
}

static void
mailbox_abort (Mailbox *mb)
{
  g_mutex_lock (&mb->mutex);
  mb->aborted = TRUE;
  g_cond_broadcast (&mb->cond);
  g_mutex_unlock (&mb->mutex);
}

/* ---- the step ---- */

typedef ExecutorTrainOpLower OpLower;

typedef struct
{
  PlannerPlan *plan;
  PlannerGraph *g;
  const PlannerMesh *mesh;
  ExecutorTensors *sources;
  const ExecutorTrainOptions *options;
  guint axis, p, v, m, n_chunks;
  const int *op_chunk;
  GArray **orders; /* per stage: PlannerPipelineSlot, in its run order */

  /* Per tensor: the dim that holds the batch (-1: none), and the tensor as one micro-batch
   * sees it (that dim divided by m). */
  int *bdim;
  PlannerTensor *mt;
  int *producer_stage;     /* -1: a source */
  guint32 *consumer_stages; /* stages with an op that reads it */
  int *last_consumer;      /* [t * p + s]: the lowest chunk of stage s that reads it, -1 */
  OpLower *ops;
  PlannerLayout *stored, *grad_layout;
  const PlannerRedistPath *logits_whole, *logits_grad;
  int logits;
  const gint64 *labels;
  gint64 label_count; /* labelled rows of the whole batch: the loss's divisor */

  Mailbox mailbox;
  gint sends, transfers; /* atomic */
  gint64 t0;
  GArray **events; /* per stage, written by its first device only */
  double *loss;    /* per device: the sum over its micro-batches' labelled rows */
  float *logits_out;
  float ***param_grad, ***param_new; /* [tensor][device] */
  double *bwd_s, *sync_s;
} Pipe;

static double
since_start (Pipe *pp)
{
  return (double)(g_get_monotonic_time () - pp->t0) * 1e-6;
}

static gboolean
is_first_of_stage (const Pipe *pp, const ExecutorDevice *dev)
{
  for (guint a = 0; a < pp->mesh->n_axes; a++)
    if (a != pp->axis && dev->coords[a] != 0)
      return FALSE;
  return TRUE;
}

/* The device of stage @stage with @dev's other coordinates. */
static guint
peer (const Pipe *pp, const ExecutorDevice *dev, guint stage)
{
  guint coords[PLANNER_MAX_AXES];
  memcpy (coords, dev->coords, sizeof coords);
  coords[pp->axis] = stage;
  return (guint)planner_mesh_device_id (pp->mesh, coords);
}

static gsize
stored_bytes (const Pipe *pp, guint t)
{
  return executor_train_local_bytes (&pp->stored[t], pp->mesh, &pp->mt[t]);
}

/* An activation travels in its stored layout, a gradient in the layout the gradient of its
 * tensor is kept in (its producer's output layout, partial sums made whole). */
static gsize
message_bytes (const Pipe *pp, guint t, gboolean gradient)
{
  return executor_train_local_bytes (gradient ? &pp->grad_layout[t] : &pp->stored[t], pp->mesh,
                                     &pp->mt[t]);
}

static gboolean
send_buffer (Pipe *pp, ExecutorDevice *dev, guint to_stage, guint t, guint k, gboolean gradient,
             ExecutorBuffer *buf, GError **error)
{
  gsize bytes = message_bytes (pp, t, gradient);
  gpointer host
      = buf ? executor_train_download (dev, buf, bytes, error) : g_malloc0 (MAX (bytes, 1));
  if (host == NULL)
    return FALSE;
  mailbox_put (&pp->mailbox, message_key (dev->index, peer (pp, dev, to_stage), t, k, gradient),
               g_bytes_new_take (host, bytes));
  g_atomic_int_inc (&pp->transfers);
  if (is_first_of_stage (pp, dev))
    g_atomic_int_inc (&pp->sends);
  return TRUE;
}

static ExecutorBuffer *
recv_buffer (Pipe *pp, ExecutorDevice *dev, guint from_stage, guint t, guint k,
             gboolean gradient, GError **error)
{
  g_autofree char *key = message_key (peer (pp, dev, from_stage), dev->index, t, k, gradient);
  g_autoptr (GBytes) data = mailbox_take (&pp->mailbox, key, error);
  if (data == NULL)
    return NULL;
  gsize bytes;
  gconstpointer host = g_bytes_get_data (data, &bytes);
  ExecutorBuffer *buf = executor_device_buffer_new (dev, MAX (bytes, 1), error);
  if (buf && !executor_device_upload (dev, buf, host, bytes, error))
    {
      executor_device_buffer_free (dev, buf);
      return NULL;
    }
  return buf;
}

/* One device's state: micro-batch k's tensor t is [k * n_t + t]. */
typedef struct
{
  ExecutorBuffer **val, **grad, **ins, **outs;
  ExecutorOpCall *calls;
  ExecutorBuffer **shared; /* per tensor: a source every micro-batch reads (parameters) */
  ExecutorBuffer **pgrad;  /* per parameter: its gradient, accumulated over micro-batches */
  ExecutorBuffer *zero;
  double bwd_s, sync_s;
} Dev;

static ExecutorBuffer *
value (Pipe *pp, Dev *d, guint k, guint t)
{
  guint n_t = planner_graph_get_n_tensors (pp->g);
  return d->shared[t] ? d->shared[t] : d->val[(gsize)k * n_t + t];
}

/* Micro-batch @k's block of source @t on @dev, in its stored layout. */
static ExecutorBuffer *
upload_source (Pipe *pp, ExecutorDevice *dev, guint t, int k, GError **error)
{
  const PlannerTensor *pt = planner_graph_get_tensor (pp->g, t);
  const ExecutorHostTensor *h = executor_tensors_lookup (pp->sources, pt->name);
  if (h == NULL)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
                   "the training step needs %s from the sources", pt->name);
      return NULL;
    }
  gsize es = executor_storage_size (executor_storage_dtype (pt->dtype));
  const PlannerTensor *mt = &pp->mt[t];
  g_autofree guint8 *micro = NULL;
  const guint8 *whole = h->data;
  if (k >= 0)
    {
      /* The micro-batch as a global tensor of its own: rows k m' .. (k + 1) m' - 1 of the
       * batch dim. */
      gint64 offset[PLANNER_MAX_RANK] = { 0 };
      offset[pp->bdim[t]] = k * mt->shape[pp->bdim[t]];
      micro = g_malloc (MAX (executor_shape_numel (mt->shape, mt->rank) * es, 1));
      executor_train_block_copy ((guint8 *)h->data, pt->shape, pt->rank, offset, mt->shape, es,
                                 micro, FALSE);
      whole = micro;
    }
  gint64 local[PLANNER_MAX_RANK], offset[PLANNER_MAX_RANK];
  planner_layout_local_shape (&pp->stored[t], pp->mesh, mt->shape, local);
  planner_layout_local_offset (&pp->stored[t], pp->mesh, mt->shape, dev->coords, offset);
  gsize bytes = stored_bytes (pp, t);
  g_autofree guint8 *block = g_malloc (MAX (bytes, 1));
  executor_train_block_copy ((guint8 *)whole, mt->shape, mt->rank, offset, local, es, block,
                             FALSE);
  ExecutorBuffer *buf = executor_device_buffer_new (dev, MAX (bytes, 1), error);
  if (buf && !executor_device_upload (dev, buf, block, bytes, error))
    {
      executor_device_buffer_free (dev, buf);
      return NULL;
    }
  return buf;
}

static void
record (Pipe *pp, ExecutorDevice *dev, guint chunk, guint k, gboolean backward, double start)
{
  if (!is_first_of_stage (pp, dev))
    return;
  ExecutorPipelineEvent e = { dev->coords[pp->axis], chunk, k, backward, start,
                              since_start (pp) };
  g_array_append_val (pp->events[e.stage], e);
}

/* F: micro-batch @k through chunk @c. */
static gboolean
forward_chunk (Pipe *pp, ExecutorDevice *dev, Dev *d, guint c, guint k, GError **error)
{
  PlannerGraph *g = pp->g;
  const PlannerMesh *mesh = pp->mesh;
  guint s = dev->coords[pp->axis];
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  gsize base = (gsize)k * n_t;

  /* Its inputs from other stages first, so its time is its own compute. */
  for (guint i = 0; i < n_ops; i++)
    {
      if ((guint)pp->op_chunk[i] != c)
        continue;
      const PlannerOp *op = planner_graph_get_op (g, i);
      for (guint j = 0; j < op->n_inputs; j++)
        {
          guint t = op->inputs[j];
          int from = pp->producer_stage[t];
          if (from < 0 || (guint)from == s || d->val[base + t] != NULL)
            continue;
          if (!(d->val[base + t] = recv_buffer (pp, dev, (guint)from, t, k, FALSE, error)))
            return FALSE;
        }
    }

  double start = since_start (pp);
  for (guint i = 0; i < n_ops; i++)
    {
      if ((guint)pp->op_chunk[i] != c)
        continue;
      const PlannerOp *op = planner_graph_get_op (g, i);
      const OpLower *lo = &pp->ops[i];
      ExecutorOpCall *call = &d->calls[(gsize)k * n_ops + i];
      ExecutorBuffer **ins = &d->ins[((gsize)k * n_ops + i) * PLANNER_MAX_OPERANDS];
      ExecutorBuffer **outs = &d->outs[((gsize)k * n_ops + i) * PLANNER_MAX_OPERANDS];
      call->op = op;
      call->rule = &op->rule;
      call->strategy = &planner_plan_get_op (pp->plan, i)->strategy;
      call->n_inputs = op->n_inputs;
      call->n_outputs = op->n_outputs;
      planner_strategy_factor_offsets (call->strategy, &op->rule, mesh, dev->coords,
                                       call->factor_offsets);
      call->add_bias = TRUE;
      for (guint a = 0; a < mesh->n_axes; a++)
        if ((lo->out_partial & (1u << a)) && dev->coords[a] != 0)
          call->add_bias = FALSE;
      for (guint j = 0; j < op->n_inputs; j++)
        {
          guint t = op->inputs[j];
          ExecutorBuffer *have = value (pp, d, k, t);
          if (have == NULL)
            {
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                           "%s (chunk %u) reads %s of micro-batch %u before it is there", op->name,
                           c, pp->mt[t].name, k);
              return FALSE;
            }
          if (!(ins[j] = executor_train_convert (dev, lo->fwd_in[j], &pp->stored[t], mesh,
                                                 &pp->mt[t], have, error)))
            return FALSE;
          executor_train_local_arg (&call->inputs[j], &lo->in[j], mesh, &pp->mt[t], ins[j]);
        }
      for (guint j = 0; j < op->n_outputs; j++)
        {
          const PlannerTensor *mt = &pp->mt[op->outputs[j]];
          if (!(outs[j] = executor_device_buffer_new (
                    dev, MAX (executor_train_local_bytes (&lo->out[j], mesh, mt), 1), error)))
            return FALSE;
          executor_train_local_arg (&call->outputs[j], &lo->out[j], mesh, mt, outs[j]);
        }
      if (!executor_device_run_op (dev, call, error))
        return FALSE;
      for (guint j = 0; j < op->n_outputs; j++)
        {
          guint t = op->outputs[j];
          if (!(d->val[base + t] = executor_train_convert (dev, lo->fwd_out[j], &lo->out[j], mesh,
                                                           &pp->mt[t], outs[j], error)))
            return FALSE;
        }
    }

  /* The loss, on the stage that makes the logits: this micro-batch's rows, made whole on
   * every device of the stage. */
  guint lt_t = (guint)pp->logits;
  if (pp->producer_stage[lt_t] >= 0
      && (guint)pp->op_chunk[planner_graph_get_tensor (g, lt_t)->producer] == c)
    {
      const PlannerTensor *lt = &pp->mt[lt_t];
      gint64 v = lt->shape[lt->rank - 1];
      gint64 rows = executor_shape_numel (lt->shape, lt->rank) / v;
      gsize lbytes = (gsize)(rows * v) * sizeof (float);
      ExecutorBuffer *whole = executor_train_convert (dev, pp->logits_whole, &pp->stored[lt_t],
                                                      mesh, lt, d->val[base + lt_t], error);
      g_autofree float *logits = whole ? executor_train_download (dev, whole, lbytes, error) : NULL;
      g_autofree float *dl = g_new (float, MAX (rows * v, 1));
      gboolean ok = logits != NULL;
      if (ok)
        {
          pp->loss[dev->index] += executor_train_cross_entropy (
              logits, dl, pp->labels + (gsize)k * rows, rows, v, pp->label_count);
          if (is_first_of_stage (pp, dev))
            memcpy (pp->logits_out + (gsize)k * rows * v, logits, lbytes);
          ok = executor_device_upload (dev, whole, dl, lbytes, error);
        }
      PlannerLayout rep;
      planner_layout_init_replicated (&rep, lt->rank);
      ok = ok
           && (d->grad[base + lt_t]
               = executor_train_convert (dev, pp->logits_grad, &rep, mesh, lt, whole, error))
                  != NULL;
      executor_device_buffer_free (dev, whole);
      if (!ok)
        return FALSE;
    }
  record (pp, dev, c, k, FALSE, start);

  /* What later stages read: to each of them once. */
  for (guint i = 0; i < n_ops; i++)
    {
      if ((guint)pp->op_chunk[i] != c)
        continue;
      const PlannerOp *op = planner_graph_get_op (g, i);
      for (guint j = 0; j < op->n_outputs; j++)
        {
          guint t = op->outputs[j];
          for (guint to = 0; to < pp->p; to++)
            if (to != s && (pp->consumer_stages[t] & (1u << to))
                && !send_buffer (pp, dev, to, t, k, FALSE, d->val[base + t], error))
              return FALSE;
        }
    }
  return TRUE;
}

/* B: micro-batch @k back through chunk @c. */
static gboolean
backward_chunk (Pipe *pp, ExecutorDevice *dev, Dev *d, guint c, guint k, GError **error)
{
  PlannerGraph *g = pp->g;
  const PlannerMesh *mesh = pp->mesh;
  guint s = dev->coords[pp->axis];
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  gsize base = (gsize)k * n_t;

  /* The gradients other stages send back for what this chunk made. */
  for (guint i = 0; i < n_ops; i++)
    {
      if ((guint)pp->op_chunk[i] != c)
        continue;
      const PlannerOp *op = planner_graph_get_op (g, i);
      for (guint j = 0; j < op->n_outputs; j++)
        {
          guint t = op->outputs[j];
          if (pp->mt[t].dtype == PLANNER_DTYPE_I64)
            continue;
          for (guint from = 0; from < pp->p; from++)
            {
              if (from == s || !(pp->consumer_stages[t] & (1u << from)))
                continue;
              ExecutorBuffer *got = recv_buffer (pp, dev, from, t, k, TRUE, error);
              if (got == NULL)
                return FALSE;
              gboolean ok = TRUE;
              if (d->grad[base + t] == NULL)
                d->grad[base + t] = got;
              else
                {
                  ok = executor_train_add_into (dev, d->grad[base + t], got,
                                                message_bytes (pp, t, TRUE), error);
                  executor_device_buffer_free (dev, got);
                }
              if (!ok)
                return FALSE;
            }
        }
    }

  double start = since_start (pp), t0 = start;
  for (int i = (int)n_ops - 1; i >= 0; i--)
    {
      if ((guint)pp->op_chunk[i] != c)
        continue;
      const PlannerOp *op = planner_graph_get_op (g, (guint)i);
      const OpLower *lo = &pp->ops[i];
      ExecutorOpCall *call = &d->calls[(gsize)k * n_ops + (guint)i];
      gboolean any = FALSE;
      for (guint j = 0; j < op->n_outputs; j++)
        any |= d->grad[base + op->outputs[j]] != NULL;
      if (!any)
        continue;
      ExecutorBackwardCall bc = { 0 };
      ExecutorBuffer *gin[PLANNER_MAX_OPERANDS] = { NULL };
      bc.fwd = call;
      for (guint j = 0; j < op->n_outputs; j++)
        {
          bc.grad_outputs[j] = call->outputs[j];
          ExecutorBuffer *gr = d->grad[base + op->outputs[j]];
          bc.grad_outputs[j].buffer = gr ? gr : d->zero;
        }
      gboolean ok = TRUE;
      for (guint j = 0; ok && j < op->n_inputs; j++)
        if (call->inputs[j].dtype == PLANNER_DTYPE_F32)
          {
            bc.grad_inputs[j] = call->inputs[j];
            ok = (gin[j] = bc.grad_inputs[j].buffer = executor_device_buffer_new (
                      dev, MAX (executor_train_local_bytes (&lo->in[j], mesh,
                                                            &pp->mt[op->inputs[j]]),
                                1),
                      error))
                 != NULL;
          }
      ok = ok && executor_cpu_backward_kernels[op->type](dev, &bc, error);
      for (guint j = 0; ok && j < op->n_inputs; j++)
        {
          if (gin[j] == NULL)
            continue;
          guint t = op->inputs[j];
          const PlannerTensor *mt = &pp->mt[t];
          double c0 = since_start (pp);
          ExecutorBuffer *contrib = executor_train_convert (dev, lo->bwd_in[j], &lo->contrib[j],
                                                            mesh, mt, gin[j], error);
          d->sync_s += lo->bwd_in[j]->n_steps ? since_start (pp) - c0 : 0;
          ok = contrib != NULL;
          if (!ok)
            break;
          gsize bytes = executor_train_local_bytes (&pp->grad_layout[t], mesh, mt);
          /* A parameter's gradient adds up over the micro-batches (gradient accumulation);
           * an activation's is this micro-batch's own. */
          ExecutorBuffer **acc = mt->kind == PLANNER_TENSOR_PARAMETER ? &d->pgrad[t]
                                                                       : &d->grad[base + t];
          if (*acc == NULL)
            *acc = g_steal_pointer (&contrib);
          else
            ok = executor_train_add_into (dev, *acc, contrib, bytes, error);
          executor_device_buffer_free (dev, contrib);
        }
      for (guint j = 0; j < op->n_inputs; j++)
        executor_device_buffer_free (dev, gin[j]);
      if (!ok)
        return FALSE;
    }
  d->bwd_s += since_start (pp) - t0;
  record (pp, dev, c, k, TRUE, start);

  /* The gradients of what other stages sent, once this stage's last reader of them is done. */
  for (guint t = 0; t < n_t; t++)
    {
      int from = pp->producer_stage[t];
      if (from < 0 || (guint)from == s || pp->last_consumer[(gsize)t * pp->p + s] != (int)c
          || pp->mt[t].dtype == PLANNER_DTYPE_I64)
        continue;
      if (!send_buffer (pp, dev, (guint)from, t, k, TRUE, d->grad[base + t], error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
pipe_device_run (ExecutorDevice *dev, Pipe *pp, Dev *d, GError **error)
{
  PlannerGraph *g = pp->g;
  guint s = dev->coords[pp->axis];
  guint n_t = planner_graph_get_n_tensors (g);

  /* The sources this stage reads: parameters once, inputs per micro-batch. Every
   * parameter's gradient starts at zero on every device, so the sum over pp of a parameter
   * held by several stages is a plain AllReduce. */
  gsize max_bytes = 4;
  for (guint t = 0; t < n_t; t++)
    max_bytes = MAX (max_bytes, stored_bytes (pp, t));
  g_autofree guint8 *zeros = g_malloc0 (max_bytes);
  if (!(d->zero = executor_device_buffer_new (dev, max_bytes, error))
      || !executor_device_upload (dev, d->zero, zeros, max_bytes, error))
    return FALSE;
  for (guint t = 0; t < n_t; t++)
    {
      const PlannerTensor *pt = &pp->mt[t];
      if (pt->kind == PLANNER_TENSOR_PARAMETER
          && (!(d->pgrad[t] = executor_device_buffer_new (dev, MAX (stored_bytes (pp, t), 1),
                                                          error))
              || !executor_device_upload (dev, d->pgrad[t], zeros, stored_bytes (pp, t), error)))
        return FALSE;
      if (pt->producer >= 0 || !(pp->consumer_stages[t] & (1u << s)))
        continue;
      if (pp->bdim[t] < 0)
        {
          if (!(d->shared[t] = upload_source (pp, dev, t, -1, error)))
            return FALSE;
          continue;
        }
      for (guint k = 0; k < pp->m; k++)
        if (!(d->val[(gsize)k * n_t + t] = upload_source (pp, dev, t, (int)k, error)))
          return FALSE;
    }

  /* Every stage starts together; from here on stages meet only through their messages. */
  if (!executor_device_barrier (dev, error))
    return FALSE;
  GArray *order = pp->orders[s];
  for (guint i = 0; i < order->len; i++)
    {
      const PlannerPipelineSlot *slot = &g_array_index (order, PlannerPipelineSlot, i);
      guint c = slot->chunk * pp->p + s;
      if (!(slot->backward ? backward_chunk (pp, dev, d, c, slot->micro_batch, error)
                           : forward_chunk (pp, dev, d, c, slot->micro_batch, error)))
        return FALSE;
    }
  if (!executor_device_barrier (dev, error))
    return FALSE;

  /* A parameter that several stages hold (a tied embedding): its gradient summed over them,
   * in the same parameter order on every device. Then the optimizer on the shards. */
  const ExecutorTrainOptions *o = pp->options;
  for (guint t = 0; t < n_t; t++)
    {
      const PlannerTensor *pt = &pp->mt[t];
      if (pt->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      gsize bytes = stored_bytes (pp, t);
      if (__builtin_popcount (pp->consumer_stages[t]) > 1
          && !executor_device_collective (dev, PLANNER_STEP_ALL_REDUCE, pp->axis, d->pgrad[t],
                                          d->pgrad[t], bytes / 4, PLANNER_DTYPE_F32, error))
        return FALSE;
      if (!(pp->consumer_stages[t] & (1u << s)))
        continue;
      float *gr = executor_train_download (dev, d->pgrad[t], bytes, error);
      float *w = gr ? executor_train_download (dev, d->shared[t], bytes, error) : NULL;
      if (w == NULL)
        {
          g_free (gr);
          return FALSE;
        }
      for (gsize e = 0; e < bytes / 4; e++)
        {
          double step = o->lr * gr[e];
          if (o->optimizer == EXECUTOR_OPTIMIZER_ADAM)
            step = o->lr * gr[e] / (fabs ((double)gr[e]) + o->eps);
          w[e] = (float)(w[e] - step);
        }
      pp->param_grad[t][dev->index] = gr;
      pp->param_new[t][dev->index] = w;
    }
  pp->bwd_s[dev->index] = d->bwd_s;
  pp->sync_s[dev->index] = d->sync_s;
  return TRUE;
}

static gboolean
pipe_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  Pipe *pp = data;
  PlannerGraph *g = pp->g;
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  gsize nv = (gsize)pp->m * n_t, no = (gsize)pp->m * n_ops * PLANNER_MAX_OPERANDS;
  Dev d = { 0 };
  d.val = g_new0 (ExecutorBuffer *, nv);
  d.grad = g_new0 (ExecutorBuffer *, nv);
  d.ins = g_new0 (ExecutorBuffer *, MAX (no, 1));
  d.outs = g_new0 (ExecutorBuffer *, MAX (no, 1));
  d.calls = g_new0 (ExecutorOpCall, MAX ((gsize)pp->m * n_ops, 1));
  d.shared = g_new0 (ExecutorBuffer *, MAX (n_t, 1));
  d.pgrad = g_new0 (ExecutorBuffer *, MAX (n_t, 1));

  gboolean ok = pipe_device_run (dev, pp, &d, error);
  /* A failed device wakes the devices of other stages waiting for its messages (its own
   * stage's collectives are the backend's to abort). */
  if (!ok)
    mailbox_abort (&pp->mailbox);

  for (gsize i = 0; i < nv; i++)
    {
      executor_device_buffer_free (dev, d.val[i]);
      executor_device_buffer_free (dev, d.grad[i]);
    }
  for (gsize i = 0; i < no; i++)
    {
      executor_device_buffer_free (dev, d.ins[i]);
      executor_device_buffer_free (dev, d.outs[i]);
    }
  for (guint t = 0; t < n_t; t++)
    {
      executor_device_buffer_free (dev, d.shared[t]);
      executor_device_buffer_free (dev, d.pgrad[t]);
    }
  executor_device_buffer_free (dev, d.zero);
  g_free (d.val);
  g_free (d.grad);
  g_free (d.ins);
  g_free (d.outs);
  g_free (d.calls);
  g_free (d.shared);
  g_free (d.pgrad);
  return ok;
}

/* ---- the batch dim of every tensor ----
 *
 * The graph inputs hold the batch in dim 0 (those whose dim 0 is the batch: a [1, S] mask
 * broadcasts); an op's batch factor is the factor of its inputs' batch dims, and an output
 * holds the batch in the dim whose major-most factor it is. Cutting that factor into m
 * contiguous blocks is a micro-batch: the op on each block is the op on the whole, block by
 * block, unless it reduces over the batch (a loss inside the graph). */
static gboolean
find_batch_dims (Pipe *pp, GError **error)
{
  PlannerGraph *g = pp->g;
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  gint64 batch = -1;
  for (guint t = 0; t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      pp->bdim[t] = -1;
      if (pt->kind == PLANNER_TENSOR_INPUT && pt->rank >= 1
          && (batch < 0 || g_str_equal (pt->name, "input_ids")))
        batch = pt->shape[0];
    }
  for (guint t = 0; t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      if (pt->kind == PLANNER_TENSOR_INPUT && pt->rank >= 1 && pt->shape[0] == batch
          && batch > 1)
        pp->bdim[t] = 0;
    }
  if (batch < 0 || batch % pp->m != 0)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "the pipelined step cuts the batch into %u micro-batches, but the graph's "
                   "batch is %" G_GINT64_FORMAT "; plan it with a batch that is a multiple of %u "
                   "(--batch) or fewer micro-batches (--micro-batches)",
                   pp->m, batch, pp->m);
      return FALSE;
    }
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      int bf = -1;
      for (guint j = 0; j < op->n_inputs; j++)
        {
          int d = pp->bdim[op->inputs[j]];
          if (d < 0)
            continue;
          const PlannerOperandMap *map = &op->rule.inputs[j];
          int f = map->n[d] > 0 ? map->f[d][0] : -1;
          if (f < 0 || (bf >= 0 && f != bf))
            {
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                           "%s: the batch dim of input %u is not one factor with the other "
                           "inputs' batch, so the micro-batches cannot be cut through it",
                           op->name, j);
              return FALSE;
            }
          bf = f;
        }
      if (bf < 0)
        continue;
      gboolean kept = FALSE;
      for (guint j = 0; j < op->n_outputs; j++)
        {
          const PlannerOperandMap *map = &op->rule.outputs[j];
          for (guint d = 0; d < map->rank; d++)
            for (guint q = 0; q < map->n[d]; q++)
              if (map->f[d][q] == bf)
                {
                  if (q != 0)
                    {
                      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                                   "%s: output %u holds the batch inside dim %u, not major-most, "
                                   "so a micro-batch is no block of it",
                                   op->name, j, d);
                      return FALSE;
                    }
                  pp->bdim[op->outputs[j]] = (int)d;
                  kept = TRUE;
                }
        }
      if (!kept || op->rule.factors[bf].kind == PLANNER_FACTOR_REDUCTION)
        {
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                       "%s (%s) reduces over the batch, so its micro-batches do not add up to "
                       "the batch; the pipelined step needs the loss outside the graph",
                       op->name, planner_op_type_to_string (op->type));
          return FALSE;
        }
    }
  for (guint t = 0; t < n_t; t++)
    {
      pp->mt[t] = *planner_graph_get_tensor (g, t);
      if (pp->bdim[t] < 0)
        continue;
      pp->mt[t].shape[pp->bdim[t]] /= pp->m;
      /* The micro-batch must split as the plan splits the batch (data parallelism). */
      gint64 whole[PLANNER_MAX_RANK], micro[PLANNER_MAX_RANK];
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      planner_layout_local_shape (&pp->stored[t], pp->mesh, pt->shape, whole);
      planner_layout_local_shape (&pp->stored[t], pp->mesh, pp->mt[t].shape, micro);
      int d = pp->bdim[t];
      if (micro[d] * pp->m != whole[d] || micro[d] == 0)
        {
          g_autofree char *l = planner_layout_to_string (&pp->stored[t], pp->mesh);
          g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                       "%s: a micro-batch of %" G_GINT64_FORMAT " rows does not split as %s "
                       "splits the batch of %" G_GINT64_FORMAT "; plan a larger batch (--batch) "
                       "or fewer micro-batches",
                       pt->name, pp->mt[t].shape[d], l, pt->shape[d]);
          return FALSE;
        }
    }
  if (pp->bdim[pp->logits] != 0)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "the logits do not hold the batch in dim 0, so the micro-batches' rows of "
                   "the labels are not blocks");
      return FALSE;
    }
  return TRUE;
}

void
executor_pipeline_run_clear (ExecutorPipelineRun *run)
{
  if (run == NULL)
    return;
  g_clear_pointer (&run->events, g_array_unref);
  g_clear_pointer (&run->outputs, executor_tensors_free);
}

char *
executor_pipeline_run_order (const ExecutorPipelineRun *run, guint stage)
{
  g_return_val_if_fail (run != NULL && run->events != NULL, NULL);
  GString *text = g_string_new (NULL);
  for (guint i = 0; i < run->events->len; i++)
    {
      const ExecutorPipelineEvent *e = &g_array_index (run->events, ExecutorPipelineEvent, i);
      if (e->stage != stage)
        continue;
      if (text->len)
        g_string_append_c (text, ' ');
      g_string_append_printf (text, "%c%u", e->backward ? 'B' : 'F', e->micro_batch);
      if (run->v > 1)
        g_string_append_printf (text, ".%u", e->chunk);
    }
  return g_string_free (text, FALSE);
}

typedef struct
{
  double at;
  int delta;
} Edge;

static int
edge_cmp (gconstpointer a, gconstpointer b)
{
  const Edge *x = a, *y = b;
  if (x->at != y->at)
    return x->at < y->at ? -1 : 1;
  return x->delta - y->delta; /* an end before a start at the same instant */
}

/* The time two or more stages computed at once, from their events. */
static void
measure_overlap (ExecutorPipelineRun *run)
{
  g_autoptr (GArray) edges = g_array_new (FALSE, FALSE, sizeof (Edge));
  double first = INFINITY, last = 0;
  for (guint i = 0; i < run->events->len; i++)
    {
      const ExecutorPipelineEvent *e = &g_array_index (run->events, ExecutorPipelineEvent, i);
      Edge a = { e->start_s, 1 }, b = { e->end_s, -1 };
      g_array_append_val (edges, a);
      g_array_append_val (edges, b);
      run->busy_s += e->end_s - e->start_s;
      first = MIN (first, e->start_s);
      last = MAX (last, e->end_s);
    }
  g_array_sort (edges, edge_cmp);
  int busy = 0;
  for (guint i = 0; i < edges->len; i++)
    {
      const Edge *e = &g_array_index (edges, Edge, i);
      if (busy >= 2 && i > 0)
        run->overlap_s += e->at - g_array_index (edges, Edge, i - 1).at;
      busy += e->delta;
    }
  run->wall_s = run->events->len ? last - first : 0;
}

/* Each device's block of a parameter's gradient (or weight) in place, from the devices of
 * @stage (one replica each). */
static float *
gather_stage (const PlannerLayout *l, const PlannerMesh *mesh, guint axis, guint stage,
              const PlannerTensor *t, float **shards)
{
  gint64 n = executor_shape_numel (t->shape, t->rank), local[PLANNER_MAX_RANK];
  float *global = g_new0 (float, MAX (n, 1));
  planner_layout_local_shape (l, mesh, t->shape, local);
  guint32 owning = planner_layout_split_mask (l);
  for (guint d = 0; d < planner_mesh_n_devices (mesh); d++)
    {
      guint coords[PLANNER_MAX_AXES];
      planner_mesh_device_coords (mesh, d, coords);
      gboolean first = coords[axis] == stage;
      for (guint a = 0; a < mesh->n_axes; a++)
        if (a != axis && !(owning & (1u << a)) && coords[a] != 0)
          first = FALSE;
      if (!first || shards[d] == NULL)
        continue;
      gint64 offset[PLANNER_MAX_RANK];
      planner_layout_local_offset (l, mesh, t->shape, coords, offset);
      executor_train_block_copy ((guint8 *)global, t->shape, t->rank, offset, local, 4,
                                 (guint8 *)shards[d], TRUE);
    }
  return global;
}

static PlannerLayout
whole_partials (const PlannerLayout *l)
{
  PlannerLayout r = *l;
  r.partial = 0;
  return r;
}

gboolean
executor_pipeline_train_step (PlannerPlan *plan, ExecutorTensors *sources,
                              const ExecutorTrainOptions *options, ExecutorTensors *out,
                              ExecutorTrainTimes *times, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), FALSE);
  PlannerGraph *g = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_t = planner_graph_get_n_tensors (g), n_ops = planner_graph_get_n_ops (g);
  guint n_dev = (guint)planner_mesh_n_devices (mesh);
  ExecutorPipelineRun *run = options->pipeline_run;
  if (times)
    memset (times, 0, sizeof *times);

  g_autoptr (GError) local = NULL;
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, &local);
  if (pl == NULL)
    {
      if (local)
        g_propagate_error (error, g_steal_pointer (&local));
      else
        g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                     "the plan's mesh has no pipeline axis of size > 1");
      return FALSE;
    }
  if (pl->p > 32)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_UNSUPPORTED,
                   "the pipelined step runs at most 32 stages, not pp=%u", pl->p);
      return FALSE;
    }

  Pipe pp = { 0 };
  pp.plan = plan;
  pp.g = g;
  pp.mesh = mesh;
  pp.sources = sources;
  pp.options = options;
  pp.axis = pl->axis;
  pp.p = pl->p;
  pp.n_chunks = pl->n_chunks;
  pp.v = pl->n_chunks / pl->p;
  pp.m = pl->m;
  pp.op_chunk = pl->op_chunk;
  g_autofree gint64 *labels = executor_train_find_labels (g, sources, options->labels,
                                                          &pp.logits, error);
  if (labels == NULL)
    return FALSE;
  pp.labels = labels;
  {
    const PlannerTensor *lt = planner_graph_get_tensor (g, (guint)pp.logits);
    gint64 rows = executor_shape_numel (lt->shape, lt->rank) / lt->shape[lt->rank - 1];
    for (gint64 r = 0; r < rows; r++)
      pp.label_count += labels[r] != EXECUTOR_TRAIN_IGNORE;
    pp.label_count = MAX (pp.label_count, 1);
  }

  g_autofree int *bdim = g_new (int, MAX (n_t, 1));
  g_autofree PlannerTensor *mt = g_new0 (PlannerTensor, MAX (n_t, 1));
  g_autofree int *producer_stage = g_new (int, MAX (n_t, 1));
  g_autofree guint32 *consumer_stages = g_new0 (guint32, MAX (n_t, 1));
  g_autofree int *last_consumer = g_new (int, MAX ((gsize)n_t * pp.p, 1));
  g_autofree OpLower *ops = g_new0 (OpLower, MAX (n_ops, 1));
  g_autofree PlannerLayout *stored = g_new0 (PlannerLayout, MAX (n_t, 1));
  g_autofree PlannerLayout *grad_layout = g_new0 (PlannerLayout, MAX (n_t, 1));
  pp.bdim = bdim;
  pp.mt = mt;
  pp.producer_stage = producer_stage;
  pp.consumer_stages = consumer_stages;
  pp.last_consumer = last_consumer;
  pp.ops = ops;
  pp.stored = stored;
  pp.grad_layout = grad_layout;
  for (guint t = 0; t < n_t; t++)
    {
      stored[t] = *planner_plan_get_tensor_layout (plan, t);
      grad_layout[t] = whole_partials (&stored[t]);
      int producer = planner_graph_get_tensor (g, t)->producer;
      producer_stage[t] = producer >= 0 ? pl->op_chunk[producer] % (int)pp.p : -1;
      for (guint s = 0; s < pp.p; s++)
        last_consumer[(gsize)t * pp.p + s] = -1;
    }
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      guint c = (guint)pl->op_chunk[i], s = c % pp.p;
      for (guint j = 0; j < op->n_inputs; j++)
        {
          guint t = op->inputs[j];
          consumer_stages[t] |= 1u << s;
          int *lc = &last_consumer[(gsize)t * pp.p + s];
          if (*lc < 0 || (int)c < *lc)
            *lc = (int)c;
        }
    }
  if (!find_batch_dims (&pp, error))
    return FALSE;

  /* Within a stage, the sharded step's lowering on the micro-batch's shapes. */
  g_autoptr (PlannerRedistributor) r
      = planner_redistributor_new (mesh, planner_plan_get_hardware (plan));
  if (!executor_train_lower_ops (plan, r, mt, pp.m, ops, stored, grad_layout, times, error))
    return FALSE;
  const PlannerTensor *lt = &mt[pp.logits];
  PlannerLayout rep;
  planner_layout_init_replicated (&rep, lt->rank);
  if (!(pp.logits_whole = executor_train_find_path (r, &stored[pp.logits], &rep, lt, "the loss",
                                                    error))
      || !(pp.logits_grad = executor_train_find_path (r, &rep, &grad_layout[pp.logits], lt,
                                                      "the loss", error)))
    return FALSE;

  /* Each stage's order: the planner's schedule (planner_pipeline_simulate(), the same order
   * the view draws); the slot times do not change the order. */
  g_autoptr (GArray) slots = g_array_new (FALSE, FALSE, sizeof (PlannerPipelineSlot));
  {
    g_autofree double *fwd = g_new (double, pp.p);
    g_autofree double *bwd = g_new (double, pp.p);
    for (guint s = 0; s < pp.p; s++)
      {
        fwd[s] = 1;
        bwd[s] = 2;
      }
    planner_pipeline_simulate (pl->schedule, pp.p, pp.v, pp.m, fwd, bwd, slots, NULL);
  }
  g_autofree GArray **orders = g_new0 (GArray *, pp.p);
  g_autofree GArray **events = g_new0 (GArray *, pp.p);
  for (guint s = 0; s < pp.p; s++)
    {
      orders[s] = g_array_new (FALSE, FALSE, sizeof (PlannerPipelineSlot));
      events[s] = g_array_new (FALSE, FALSE, sizeof (ExecutorPipelineEvent));
    }
  for (guint i = 0; i < slots->len; i++)
    {
      const PlannerPipelineSlot *slot = &g_array_index (slots, PlannerPipelineSlot, i);
      g_array_append_val (orders[slot->stage], *slot);
    }
  pp.orders = orders;
  pp.events = events;

  g_autoptr (ExecutorBackend) backend = executor_backend_new ("cpu", mesh, error);
  gboolean ok = backend != NULL;
  g_autofree double *loss = g_new0 (double, n_dev);
  g_autofree double *bwd_s = g_new0 (double, n_dev), *sync_s = g_new0 (double, n_dev);
  gint64 lrows = executor_shape_numel (planner_graph_get_tensor (g, (guint)pp.logits)->shape,
                                       lt->rank);
  float *logits_out = g_new0 (float, MAX (lrows, 1));
  pp.loss = loss;
  pp.bwd_s = bwd_s;
  pp.sync_s = sync_s;
  pp.logits_out = logits_out;
  pp.param_grad = executor_train_shards_new (n_t, n_dev);
  pp.param_new = executor_train_shards_new (n_t, n_dev);
  g_mutex_init (&pp.mailbox.mutex);
  g_cond_init (&pp.mailbox.cond);
  pp.mailbox.box = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify)g_bytes_unref);
  pp.t0 = g_get_monotonic_time ();
  ok = ok && executor_backend_run (backend, pipe_device, &pp, error);

  /* The loss and the logits from the stage that made them; each parameter from the first
   * stage that holds it (every holder has the same after the AllReduce). */
  guint last_stage = (guint)producer_stage[pp.logits];
  for (guint t = 0; ok && t < n_t; t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (g, t);
      if (pt->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      const ExecutorHostTensor *h = executor_tensors_lookup (sources, pt->name);
      g_autofree char *gname = g_strconcat ("grad.", pt->name, NULL);
      g_autofree char *uname = g_strconcat ("updated.", pt->name, NULL);
      if (consumer_stages[t] == 0)
        {
          /* Read by no op: no gradient, the weight as it was. */
          gsize bytes = (gsize)executor_shape_numel (pt->shape, pt->rank) * 4;
          executor_tensors_add (out, gname, PLANNER_DTYPE_F32, h->rank, h->shape,
                                g_malloc0 (MAX (bytes, 1)));
          executor_tensors_add (out, uname, PLANNER_DTYPE_F32, h->rank, h->shape,
                                g_memdup2 (h->data, MAX (bytes, 1)));
          continue;
        }
      guint owner = (guint)__builtin_ctz (consumer_stages[t]);
      executor_tensors_add (out, gname, PLANNER_DTYPE_F32, h->rank, h->shape,
                            gather_stage (&stored[t], mesh, pp.axis, owner, pt, pp.param_grad[t]));
      executor_tensors_add (out, uname, PLANNER_DTYPE_F32, h->rank, h->shape,
                            gather_stage (&stored[t], mesh, pp.axis, owner, pt, pp.param_new[t]));
    }
  if (ok)
    {
      guint coords[PLANNER_MAX_AXES] = { 0 };
      coords[pp.axis] = last_stage;
      float *l = g_new (float, 1);
      *l = (float)(loss[planner_mesh_device_id (mesh, coords)] / (double)pp.label_count);
      executor_tensors_add (out, "loss", PLANNER_DTYPE_F32, 0, NULL, l);
      if (times)
        {
          times->estimated_backward_s += times->estimated_grad_sync_s;
          for (guint d = 0; d < n_dev; d++)
            {
              times->backward_s = MAX (times->backward_s, bwd_s[d]);
              times->grad_sync_s = MAX (times->grad_sync_s, sync_s[d]);
            }
        }
    }
  if (ok && run)
    {
      memset (run, 0, sizeof *run);
      run->schedule = pl->schedule;
      run->p = pp.p;
      run->v = pp.v;
      run->m = pp.m;
      run->sends = (guint)g_atomic_int_get (&pp.sends);
      run->transfers = (guint)g_atomic_int_get (&pp.transfers);
      run->events = g_array_new (FALSE, FALSE, sizeof (ExecutorPipelineEvent));
      for (guint s = 0; s < pp.p; s++)
        g_array_append_vals (run->events, events[s]->data, events[s]->len);
      measure_overlap (run);
      run->outputs = executor_tensors_new ();
      const PlannerTensor *whole = planner_graph_get_tensor (g, (guint)pp.logits);
      executor_tensors_add (run->outputs, whole->name, PLANNER_DTYPE_F32, whole->rank,
                            whole->shape, g_steal_pointer (&logits_out));
    }
  g_free (logits_out);

  g_hash_table_unref (pp.mailbox.box);
  g_mutex_clear (&pp.mailbox.mutex);
  g_cond_clear (&pp.mailbox.cond);
  for (guint s = 0; s < pp.p; s++)
    {
      g_array_unref (orders[s]);
      g_array_unref (events[s]);
    }
  executor_train_shards_free (pp.param_grad, n_t, n_dev);
  executor_train_shards_free (pp.param_new, n_t, n_dev);
  return ok;
}
