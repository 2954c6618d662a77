#define G_LOG_DOMAIN "planner-plan"

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-plan-private.h"
#include "planner-request.h"

/* The training-step and memory model of a finished plan (planner/README.md, "Training step
 * and memory").
 *
 * Memory: model states from planner_cost_model_states() per parameter, sharded by ZeRO over
 * the axes its gradient is synced on; activations as what the backward pass keeps, op by op
 * (the Korthikanti et al. 2022 accounting: a GEMM keeps its activation input, a norm and an
 * activation function their input, a dropout its 1-byte mask, attention q, k, v plus either
 * the s x s scores (unfused) or its output and logsumexp (flash)), each stored tensor counted
 * once however many ops keep it, through reshapes and transposes (views).
 *
 * Time: per micro-batch, forward compute at achieved throughput (planner-cost.h), backward,
 * recompute, the redistributions of both passes, then the gradient sync in buckets overlapped
 * with the last micro-batch's backward pass, kernel launches and the optimizer step. */

#define MiB 1048576.0
/* Flash attention's backward does 2.5x the forward's matmul FLOPs (it recomputes the scores):
 * five s x s x d products against two (Dao 2023, FlashAttention-2, section 3.1.2). */
#define FLASH_BACKWARD_FLOPS 2.5
/* Adam touches per parameter: fp32 master, m and v read and written (24 bytes), the gradient
 * read and the 16-bit weights written (4): 28 bytes; fp32 training reads a 4-byte gradient
 * and writes no copy: 28 as well. SGD: the master (or weights) read and written plus the
 * gradient and copy: 12. */
#define ADAM_STEP_BYTES 28.0
#define SGD_STEP_BYTES 12.0

typedef struct
{
  PlannerPlan *plan;
  PlannerGraph *graph;
  const PlannerMesh *mesh;
  const PlannerHardware *hw;
  const PlannerCostConstants *c;
  gboolean dropout; /* dropout ops with p > 0: attention drops its probabilities too */
  guint accum;      /* micro-batches per step */
  int *layer;       /* per op: transformer layer index from its name, -1 outside layers */
  guint *root;      /* per tensor: the tensor it is a view of (reshape/transpose chains) */
  const gboolean *scope; /* per op: in the part of the plan the figures are for; NULL: all */
} Model;

static gboolean
in_scope (const Model *m, int op)
{
  return m->scope == NULL || (op >= 0 && m->scope[op]);
}

/* A redistribution belongs to its consumer; a graph output's final reduction to the tensor's
 * producer. */
static gboolean
redistribution_in_scope (const Model *m, const PlannerRedistribution *red)
{
  if (m->scope == NULL)
    return TRUE;
  if (red->consumer >= 0)
    return in_scope (m, red->consumer);
  return in_scope (m, planner_graph_get_tensor (m->graph, red->tensor)->producer);
}

/* A parameter is held by every part that uses it (a tied embedding by the first and the last
 * pipeline stage). */
static gboolean
parameter_in_scope (const Model *m, const PlannerTensor *x)
{
  if (m->scope == NULL)
    return TRUE;
  for (guint c = 0; c < x->consumers->len; c++)
    if (in_scope (m, (int)g_array_index (x->consumers, PlannerUse, c).op))
      return TRUE;
  return FALSE;
}

static guint64
local_bytes (const Model *m, const PlannerTensor *t, const PlannerLayout *layout)
{
  gint64 local[PLANNER_MAX_RANK];
  guint64 n = planner_dtype_size (t->dtype);
  planner_layout_local_shape (layout, m->mesh, t->shape, local);
  for (guint d = 0; d < t->rank; d++)
    n *= (guint64)local[d];
  return n;
}

static guint64
local_numel (const Model *m, const PlannerTensor *t, const PlannerLayout *layout)
{
  return local_bytes (m, t, layout) / planner_dtype_size (t->dtype);
}

static void
append_size (GArray *sizes, double bytes)
{
  guint64 n = (guint64)llround (bytes);
  if (n > 0)
    g_array_append_val (sizes, n);
}

/* One parameter's model states as separate tensors, as eager PyTorch holds them: its weights,
 * its gradient, and the optimizer's fp32 master copy (16-bit training) and states, each as
 * large as the others (flat ZeRO / FSDP buffers round less: this is the upper end). */
static void
add_model_state_sizes (const Model *m, const PlannerMemory *one, PlannerDType dtype,
                       GArray *weights, GArray *states)
{
  append_size (weights, (double)one->parameters);
  append_size (states, (double)one->gradients);
  guint pieces = m->c->optimizer_states + (planner_dtype_size (dtype) < 4 ? 1 : 0);
  for (guint k = 0; k < pieces; k++)
    append_size (states, (double)one->optimizer / pieces);
}

/* The CUDA context, cuBLAS's workspace and NCCL's buffers of one device (planner/README.md,
 * "Reserved memory"): one NCCL communicator per mesh axis of more than one device, as
 * DeviceMesh makes one process group per dimension. */
static void
add_runtime_memory (const Model *m, PlannerMemory *mem)
{
  const PlannerEfficiency *e = planner_hardware_get_efficiency (m->hw);
  guint node = MAX (planner_hardware_get_node_size (m->hw), 1u);
  mem->cuda_context = (guint64)llround (e->cuda_context_MiB * 1048576);
  /* One workspace: the backward pass runs its GEMMs on the forward's stream; the
   * communication streams run no GEMM. */
  mem->cublas_workspace = (guint64)llround (e->cublas_workspace_KiB * 1024);
  mem->nccl_buffers = 0;
  guint64 minor = 1;
  for (guint a = m->mesh->n_axes; a-- > 0;)
    {
      guint ranks = m->mesh->sizes[a];
      /* The axis's ranks that share a node: all of them while the more minor axes leave room
       * in the node, one once they fill it. */
      guint node_ranks = minor >= node ? 1 : (guint)MIN ((guint64)ranks, node / minor);
      mem->nccl_buffers += planner_cost_nccl_buffers (e, ranks, node_ranks);
      minor *= ranks;
    }
}

/* Ops that are views in eager PyTorch and in the fused kernels that read strided inputs: they
 * move no data and launch nothing. */
static gboolean
is_view (PlannerOpType type)
{
  return type == PLANNER_OP_RESHAPE || type == PLANNER_OP_TRANSPOSE || type == PLANNER_OP_SPLIT;
}

static gboolean
is_gemm (PlannerOpType type)
{
  return type == PLANNER_OP_MATMUL || type == PLANNER_OP_BATCH_MATMUL || type == PLANNER_OP_EINSUM
         || type == PLANNER_OP_CONV2D;
}

/* The layout an op keeps input @k in: the one it reads, unless that comes from the stored
 * layout by AllGathers only (sequence parallelism), which the backward pass gathers again
 * rather than keep the gathered copy (Korthikanti et al. section 4.2.2). */
static const PlannerLayout *
kept_layout (Model *m, guint op, guint k, const PlannerLayout *needed)
{
  const PlannerOp *o = planner_graph_get_op (m->graph, op);
  guint t = o->inputs[k];
  int r = planner_plan_find_redistribution (m->plan, t, needed);
  if (r < 0)
    return needed;
  const PlannerRedistribution *red = planner_plan_get_redistribution (m->plan, r);
  for (guint s = 0; s < red->n_steps; s++)
    if (red->steps[s].kind != PLANNER_STEP_ALL_GATHER)
      return needed;
  return planner_plan_get_tensor_layout (m->plan, t);
}

typedef struct
{
  guint64 *kept;  /* per root tensor: bytes kept (max over keepers) */
  int *keeper;    /* per root tensor: the first op that keeps it */
  guint64 *extra; /* per op: bytes it keeps that are not tensors (masks, scores, logsumexp) */
} Kept;

static void
keep (Model *m, Kept *kp, guint op, guint tensor, const PlannerLayout *layout)
{
  const PlannerTensor *t = planner_graph_get_tensor (m->graph, tensor);
  if (t->kind != PLANNER_TENSOR_ACTIVATION)
    return;
  guint r = m->root[tensor];
  guint64 bytes = local_bytes (m, t, layout);
  if (kp->keeper[r] < 0)
    kp->keeper[r] = (int)op;
  kp->kept[r] = MAX (kp->kept[r], bytes);
}

/* What op @i keeps for its backward pass (the tensors go to @kp by root, the rest to
 * kp->extra[i]); @selective drops the attention core's scores. */
static void
op_keeps (Model *m, Kept *kp, guint i, gboolean selective)
{
  const PlannerOp *op = planner_graph_get_op (m->graph, i);
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  planner_plan_op_layouts (m->plan, i, in, out);
  const PlannerTensor *o0 = planner_graph_get_tensor (m->graph, op->outputs[0]);

  switch (op->type)
    {
    case PLANNER_OP_MATMUL:
    case PLANNER_OP_EINSUM:
    case PLANNER_OP_BATCH_MATMUL:
    case PLANNER_OP_CONV2D:
    case PLANNER_OP_MUL:
    case PLANNER_OP_DIV:
    case PLANNER_OP_CROSS_ENTROPY:
    case PLANNER_OP_MOE_COMBINE: /* and the gates rebuild the slots (dispatch's too) */
      /* Each activation input is needed for the other operand's gradient. */
      for (guint k = 0; k < op->n_inputs; k++)
        keep (m, kp, i, op->inputs[k], kept_layout (m, i, k, &in[k]));
      break;
    case PLANNER_OP_RMS_NORM:
      if (m->c->rms_norm == PLANNER_NORM_UNFUSED)
        {
          /* Hugging Face's eager LlamaRMSNorm: x.to(float32) is kept by pow and mul (for a
           * 16-bit input a 4-byte copy, the input itself when it is f32), and the weight's mul
           * keeps the normalized tensor cast back to the input's dtype; the input is not
           * kept. */
          const PlannerTensor *x = planner_graph_get_tensor (m->graph, op->inputs[0]);
          const PlannerLayout *l = kept_layout (m, i, 0, &in[0]);
          guint64 n = local_numel (m, x, l);
          if (x->dtype == PLANNER_DTYPE_F32)
            keep (m, kp, i, op->inputs[0], l);
          else
            kp->extra[i] += 4 * n;
          kp->extra[i] += n * planner_dtype_size (x->dtype);
          break;
        }
      keep (m, kp, i, op->inputs[0], kept_layout (m, i, 0, &in[0]));
      break;
    case PLANNER_OP_GELU:
    case PLANNER_OP_SILU:
    case PLANNER_OP_RELU:
    case PLANNER_OP_LAYER_NORM:
    case PLANNER_OP_MOE_ROUTER: /* the logits: softmax and top-k again */
      keep (m, kp, i, op->inputs[0], kept_layout (m, i, 0, &in[0]));
      break;
    case PLANNER_OP_TANH:
    case PLANNER_OP_EXP:
    case PLANNER_OP_SOFTMAX:
    case PLANNER_OP_SIGMOID:
      keep (m, kp, i, op->outputs[0], &out[0]);
      break;
    case PLANNER_OP_DROPOUT:
      if (m->dropout)
        kp->extra[i] += local_numel (m, o0, &out[0]); /* a 1-byte mask */
      break;
    case PLANNER_OP_SDPA:
      {
        const PlannerTensor *q = planner_graph_get_tensor (m->graph, op->inputs[0]);
        const PlannerTensor *k = planner_graph_get_tensor (m->graph, op->inputs[1]);
        gint64 ql[PLANNER_MAX_RANK], kl[PLANNER_MAX_RANK];
        planner_layout_local_shape (&in[0], m->mesh, q->shape, ql);
        planner_layout_local_shape (&in[1], m->mesh, k->shape, kl);
        double scores = (double)ql[0] * ql[1] * ql[2] * kl[2];
        double size = planner_dtype_size (o0->dtype);

        for (guint j = 0; j < 3 && j < op->n_inputs; j++)
          keep (m, kp, i, op->inputs[j], kept_layout (m, i, j, &in[j]));
        if (m->c->attention != PLANNER_ATTENTION_UNFUSED)
          {
            keep (m, kp, i, op->outputs[0], &out[0]);
            kp->extra[i] += (guint64)(4.0 * ql[0] * ql[1] * ql[2]); /* fp32 logsumexp */
          }
        else if (!selective)
          /* softmax output; with dropout also its mask (1 byte) and output (Korthikanti's
           * 5 a s^2 b in 16-bit) */
          kp->extra[i] += (guint64)(scores * (size + (m->dropout ? 1 + size : 0)));
        break;
      }
    default:
      /* Add, Sub, Cast, Neg, Embedding (keeps the ids, a graph input), Rotary (keeps nothing
       * but positions), views, reductions, Concat, Slice. */
      break;
    }
}

/* ---- time ---- */

typedef struct
{
  double forward, backward;
  guint kernels; /* forward and backward together */
} OpTime;

/* One op's compute for one micro-batch (1/accum of the local batch). */
static OpTime
op_time (Model *m, guint i)
{
  const PlannerOp *op = planner_graph_get_op (m->graph, i);
  PlannerOpPlan *p = planner_plan_get_op (m->plan, i);
  PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
  OpTime t = { 0 };
  double a = m->accum, bytes = 0;
  const PlannerEfficiency *e = planner_hardware_get_efficiency (m->hw);
  const PlannerTensor *o0 = planner_graph_get_tensor (m->graph, op->outputs[0]);
  PlannerDType dtype = o0->dtype;
  double flops = planner_strategy_local_flops (&p->strategy, &op->rule, m->mesh) / a;

  if (is_view (op->type) || (op->type == PLANNER_OP_DROPOUT && !m->dropout))
    return t;
  planner_plan_op_layouts (m->plan, i, in, out);
  for (guint k = 0; k < op->n_inputs; k++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (m->graph, op->inputs[k]);
      double b = local_bytes (m, x, &in[k]);
      bytes += x->kind == PLANNER_TENSOR_PARAMETER ? b : b / a;
    }
  for (guint k = 0; k < op->n_outputs; k++)
    bytes += local_bytes (m, planner_graph_get_tensor (m->graph, op->outputs[k]), &out[k]) / a;

  if (op->type == PLANNER_OP_SDPA)
    {
      const PlannerTensor *q = planner_graph_get_tensor (m->graph, op->inputs[0]);
      const PlannerTensor *k = planner_graph_get_tensor (m->graph, op->inputs[1]);
      gint64 ql[PLANNER_MAX_RANK], kl[PLANNER_MAX_RANK];
      planner_layout_local_shape (&in[0], m->mesh, q->shape, ql);
      planner_layout_local_shape (&in[1], m->mesh, k->shape, kl);
      double peak = planner_hardware_peak_flops (m->hw, dtype);
      if (m->c->attention != PLANNER_ATTENTION_UNFUSED)
        {
          /* The causal kernel skips the masked half of the tiles. */
          double f = op->attrs.causal ? flops / 2 : flops;
          double fwd = e->flash_forward, bwd = e->flash_backward, both;
          /* A measured curve gives both passes together, as FlashAttention's benchmark counts
           * them: 3.5 f FLOPs over the time of both, so each pass at that fraction. */
          if (planner_cost_attention_efficiency (m->hw, m->c->attention, op->attrs.causal, ql[3],
                                                 kl[2], &both))
            fwd = bwd = both;
          t.forward = f / (peak * fwd);
          t.backward = FLASH_BACKWARD_FLOPS * f / (peak * bwd);
          t.kernels = 3;
        }
      else
        {
          /* Two batched GEMMs per head (s x d x s), scale-mask-softmax fused (read and write
           * the scores), dropout (read, write, mask); the backward pass does each twice. */
          double scores = (double)ql[0] * ql[1] * ql[2] * kl[2] / a;
          double size = planner_dtype_size (dtype);
          double per_head = (double)ql[2] * kl[2] * ql[3];
          double gemm = flops / (peak * planner_cost_gemm_efficiency (m->hw, cbrt (per_head)));
          double elementwise = scores * (2 * size + (m->dropout ? 2 * size + 1 : 0));
          double mem = elementwise / (planner_hardware_memory_bandwidth (m->hw) * e->memory_bound);
          t.forward = gemm + mem;
          t.backward = 2 * gemm + 2 * mem;
          t.kernels = m->dropout ? 4 * 3 : 3 * 3;
        }
      return t;
    }
  if (op->type == PLANNER_OP_EMBEDDING)
    {
      /* A gather reads only the rows it returns; its gradient is a scatter-add into a table
       * of zeros. */
      double rows = local_bytes (m, o0, &out[0]) / a;
      double table = local_bytes (m, planner_graph_get_tensor (m->graph, op->inputs[1]), &in[1]);
      t.forward = planner_cost_memory_bound_time (m->hw, dtype, 0, 2 * rows);
      t.backward = planner_cost_memory_bound_time (m->hw, dtype, 0, 2 * rows + table);
      t.kernels = 3;
      return t;
    }
  if (op->type == PLANNER_OP_DROPOUT)
    bytes += local_numel (m, o0, &out[0]) / a; /* writes its mask */
  if (is_gemm (op->type))
    {
      t.forward = planner_cost_gemm_time (m->hw, dtype, flops, bytes);
      /* Input and weight gradients: two GEMMs of the forward's size. */
      t.backward = m->c->backward_factor * t.forward;
      t.kernels = 3;
    }
  else
    {
      t.forward = planner_cost_memory_bound_time (m->hw, dtype, flops, bytes);
      t.backward = m->c->backward_factor * t.forward;
      t.kernels = 2;
    }
  return t;
}

/* Redistribution time for one micro-batch: an activation's buffers shrink by the accumulation
 * count, a parameter's do not. */
static double
step_time (Model *m, const PlannerRedistribution *red, const PlannerRedistStep *st, gboolean back)
{
  const PlannerTensor *t = planner_graph_get_tensor (m->graph, red->tensor);
  double a = t->kind == PLANNER_TENSOR_ACTIVATION ? m->accum : 1;
  guint64 n_in = (guint64)(st->n_in / a), n_out = (guint64)(st->n_out / a);
  PlannerStepKind kind = st->kind;

  if (!back)
    return planner_cost_step_time (m->hw, m->mesh, kind, st->axis, n_in, n_out);
  if (!planner_step_kind_backward (st->kind, &kind))
    return 0;
  return planner_cost_step_time (m->hw, m->mesh, kind, st->axis, n_out, n_in);
}

/* ---- the gradient sync ---- */

typedef struct
{
  guint32 axes;
  /* ZeRO-3: the unit FSDP wraps and syncs as one flat buffer, a transformer layer (its index
   * + 1; 0 for the parameters outside layers). -1 below ZeRO-3: cut into dp_bucket_MiB
   * buckets. */
  int unit;
  guint64 bytes;      /* the parameters, as AllGathers move them */
  guint64 grad_bytes; /* their gradients, as ReduceScatters and AllReduces move them */
} SyncGroup;

static int
sync_group_compare (gconstpointer a, gconstpointer b)
{
  const SyncGroup *x = a, *y = b;
  if (x->unit != y->unit)
    return x->unit < y->unit ? -1 : 1;
  return x->axes < y->axes ? -1 : x->axes > y->axes;
}

/* One collective of @kind per axis per bucket (a gradient AllReduce, ReduceScatter or a
 * parameter AllGather of the bucket's full size): each group of parameters that sync over the
 * same axes is cut into dp_bucket_MiB buckets, or is one bucket when it is a ZeRO-3 unit.
 * Returns the total; @times lists each bucket, in the order the groups are. */
static double
sync_buckets (Model *m, GArray *groups, PlannerStepKind kind, GArray *times)
{
  double total = 0;
  for (guint g = 0; g < groups->len; g++)
    {
      const SyncGroup *sg = &g_array_index (groups, SyncGroup, g);
      double bytes = kind == PLANNER_STEP_ALL_GATHER ? sg->bytes : sg->grad_bytes;
      double bucket = sg->unit >= 0 ? bytes : MAX (m->c->dp_bucket_MiB, 1e-6) * MiB;
      double left = bytes;
      while (left > 0)
        {
          guint64 n = (guint64)MIN (left, bucket);
          double t = 0;
          guint64 shard = n;
          for (guint a = 0; a < m->mesh->n_axes; a++)
            if (sg->axes & (1u << a))
              shard /= m->mesh->sizes[a];
          for (guint a = 0; a < m->mesh->n_axes; a++)
            if (sg->axes & (1u << a))
              t += planner_cost_step_time (m->hw, m->mesh, kind, a,
                                           kind == PLANNER_STEP_ALL_GATHER ? shard : n,
                                           kind == PLANNER_STEP_REDUCE_SCATTER ? shard : n);
          g_array_append_val (times, t);
          total += t;
          left -= n;
        }
    }
  return total;
}

/* The data-parallel sync by ZeRO stage, as DDP, DeepSpeed and FSDP run it:
 *   0, 1  one gradient AllReduce per bucket per step (DDP's no_sync accumulation; stage 1's
 *         ReduceScatter + AllGather moves the same bytes), behind the last micro-batch's
 *         backward pass;
 *   2     a ReduceScatter per bucket per micro-batch (gradients are kept sharded), behind each
 *         backward pass, and one AllGather of the updated parameters per step, exposed;
 *   3     per micro-batch and per FSDP unit (a transformer layer), the parameter AllGather of
 *         the forward pass, prefetched ahead of it, and in the backward pass an AllGather and a
 *         ReduceScatter behind it. With full recompute the unit's gathered parameters serve
 *         both its recomputed forward and its backward (FSDP checkpoints inside the unit): one
 *         backward gather still.
 * Sets @exposed and returns the whole sync time. */
static double
dp_sync (Model *m, GArray *groups, double forward, double backward, double *exposed)
{
  gboolean overlap = m->c->dp_overlap;
  double a = m->accum;
  g_autoptr (GArray) ar = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GArray) rs = g_array_new (FALSE, FALSE, sizeof (double));
  g_autoptr (GArray) ag = g_array_new (FALSE, FALSE, sizeof (double));

  if (m->c->zero <= 1)
    {
      double total = sync_buckets (m, groups, PLANNER_STEP_ALL_REDUCE, ar);
      *exposed = planner_cost_bucket_exposed ((const double *)(void *)ar->data, ar->len, backward,
                                              overlap);
      return total;
    }
  double t_rs = sync_buckets (m, groups, PLANNER_STEP_REDUCE_SCATTER, rs);
  double t_ag = sync_buckets (m, groups, PLANNER_STEP_ALL_GATHER, ag);
  if (m->c->zero == 2)
    {
      *exposed = a
                     * planner_cost_bucket_exposed ((const double *)(void *)rs->data, rs->len,
                                                    backward, overlap)
                 + t_ag;
      return a * t_rs + t_ag;
    }
  /* Stage 3: the backward pass gathers each unit again before reducing its gradients, ahead
   * of it (pre) or after the unit before it (post). */
  const double *gathers = (const double *)(void *)ag->data;
  const double *reduces = (const double *)(void *)rs->data;
  double back_exposed;
  if (overlap && m->c->backward_prefetch == PLANNER_PREFETCH_POST)
    back_exposed = planner_cost_post_prefetch_exposed (gathers, reduces, ag->len);
  else
    {
      g_autoptr (GArray) back = g_array_new (FALSE, FALSE, sizeof (double));
      for (guint k = 0; k < rs->len; k++)
        {
          double t = reduces[k] + gathers[k];
          g_array_append_val (back, t);
        }
      back_exposed = planner_cost_bucket_exposed ((const double *)(void *)back->data, back->len,
                                                  backward, overlap);
    }
  *exposed
      = a * (planner_cost_prefetch_exposed (gathers, ag->len, forward, overlap) + back_exposed);
  return a * (2 * t_ag + t_rs);
}

/* Sequences per device in one global step: the leading dim of the first graph input (the
 * token ids) as its layout splits it; @batch_axes gets the mesh axes that split it (the
 * data-parallel axes). */
static guint
find_local_batch (Model *m, guint32 *batch_axes)
{
  *batch_axes = 0;
  for (guint t = 0; t < planner_graph_get_n_tensors (m->graph); t++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (m->graph, t);
      if (x->kind != PLANNER_TENSOR_INPUT || x->rank == 0)
        continue;
      const PlannerLayout *layout = planner_plan_get_tensor_layout (m->plan, t);
      gint64 local[PLANNER_MAX_RANK];
      planner_layout_local_shape (layout, m->mesh, x->shape, local);
      for (guint i = 0; i < layout->n_axes[0]; i++)
        *batch_axes |= 1u << layout->axes[0][i];
      return (guint)MAX (local[0], 1);
    }
  return 1;
}

/* ---- the step's allocations and frees, replayed through the caching allocator ---- */

/* One parameter's states as the replay allocates them (add_model_state_sizes' pieces). */
typedef struct
{
  guint tensor;
  guint64 weights, grad, transient; /* the gradient state; the backward's local gradient */
  guint64 piece;                    /* each optimizer piece (master copy, Adam states) */
  guint pieces;
} ReplayParam;

static guint64
per_micro (const Model *m, double bytes)
{
  return (guint64)llround (bytes / m->accum);
}

/* What PyTorch's caching allocator reserves at its high-water mark over three training steps
 * (the first creates the gradients and the optimizer states; the later ones find them), as
 * eager PyTorch allocates and frees (planner/README.md, "Reserved memory"):
 *   init      each parameter's weights, ZeRO's buckets; with ZeRO its flat gradient and
 *             optimizer partitions;
 *   forward   op by op, its outputs (views share their input's storage) and what it keeps that
 *             is not a tensor (@kp's extra); an activation the backward pass does not keep is
 *             freed once its last forward consumer has run;
 *   loss      over "logits": logits.float() and log_softmax's output, the copy freed;
 *   backward  the loss's gradients (12 bytes a logit at once, then the logits' gradient),
 *             then op by op in reverse: the gradients of its activation inputs (the first
 *             consumer to reach one allocates it) and of its parameters (step 1 without ZeRO:
 *             the .grad itself; otherwise a temporary, accumulated into the state and freed
 *             after the parameter's first user); then its outputs' gradients and what it kept
 *             are freed. With full recompute a layer's kept set is allocated again when its
 *             backward pass begins;
 *   optimizer step 1 without ZeRO creates the states, parameter by parameter; Adam's
 *             denominator is one fp32 temporary per parameter (torch.optim.AdamW with
 *             foreach=False, transformers' AdamW).
 * One micro-batch of the step is replayed: the others repeat it. */
static guint64
replay_step (Model *m, const Kept *kp, const GArray *params, guint n_buckets, guint64 bucket,
             guint64 logits_numel, int logits_root, guint logits_dtype)
{
  const PlannerEfficiency *e = planner_hardware_get_efficiency (m->hw);
  gint64 start = g_get_monotonic_time ();
  guint n_ops = planner_graph_get_n_ops (m->graph);
  guint n_tensors = planner_graph_get_n_tensors (m->graph);
  gboolean full = m->c->recompute == PLANNER_RECOMPUTE_FULL;
  gboolean zero = m->c->zero >= 1;
  gboolean adam = m->c->optimizer == PLANNER_OPTIMIZER_ADAM;
  g_autofree guint *st = g_new (guint, n_tensors);          /* per tensor: its storage, every
                                                              * view (splits too) its input's */
  g_autofree guint64 *bytes = g_new0 (guint64, n_tensors);   /* per storage: its bytes */
  g_autofree guint64 *kept = g_new0 (guint64, n_tensors);    /* per storage: bytes kept */
  g_autofree int *keeper = g_new (int, n_tensors);           /* per storage: first keeper */
  g_autofree int *last_use = g_new (int, n_tensors);         /* per storage */
  g_autofree int *first_use = g_new (int, n_tensors);        /* per storage */
  g_autofree int *layer_in = g_new (int, n_tensors);         /* per storage: the first layer op
                                                              * that reads it from outside */
  g_autofree int *free_at = g_new (int, n_tensors);          /* per storage: the backward op that
                                                              * frees it; -1 forward */
  g_autofree gboolean *recomputed = g_new0 (gboolean, n_tensors);
  g_autofree gboolean *grad = g_new0 (gboolean, n_tensors);  /* per tensor: requires grad */
  g_autofree int *h_act = g_new (int, n_tensors);
  g_autofree int *h_grad = g_new (int, n_tensors);
  g_autofree int *h_extra = g_new (int, n_ops);
  g_autofree int *param_of = g_new (int, n_tensors);

  for (guint t = 0; t < n_tensors; t++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (m->graph, t);
      st[t] = t;
      if (x->producer >= 0)
        {
          const PlannerOp *op = planner_graph_get_op (m->graph, (guint)x->producer);
          if (is_view (op->type))
            st[t] = st[op->inputs[0]];
        }
      last_use[t] = first_use[t] = layer_in[t] = free_at[t] = keeper[t] = param_of[t] = -1;
      grad[t] = x->kind == PLANNER_TENSOR_PARAMETER;
    }
  for (guint t = 0; t < n_tensors; t++)
    {
      if (m->root[t] != t || kp->kept[t] == 0)
        continue;
      guint s = st[t];
      kept[s] += kp->kept[t];
      if (kp->keeper[t] >= 0 && (keeper[s] < 0 || kp->keeper[t] < keeper[s]))
        keeper[s] = kp->keeper[t];
    }
  for (guint p = 0; p < params->len; p++)
    param_of[g_array_index (params, ReplayParam, p).tensor] = (int)p;
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (m->graph, i);
      gboolean g = FALSE;
      for (guint k = 0; k < op->n_inputs; k++)
        g |= grad[op->inputs[k]];
      for (guint k = 0; k < op->n_outputs; k++)
        grad[op->outputs[k]] = g;
      if (!in_scope (m, (int)i) || is_view (op->type))
        continue;
      for (guint k = 0; k < op->n_inputs; k++)
        {
          guint t = op->inputs[k];
          const PlannerTensor *x = planner_graph_get_tensor (m->graph, t);
          guint s = st[t];
          last_use[s] = (int)i;
          if (first_use[s] < 0)
            first_use[s] = (int)i;
          /* full recompute's checkpoint: a layer's input from outside it, as the activation
           * memory counts it */
          if (m->layer[i] >= 0 && layer_in[s] < 0 && x->kind == PLANNER_TENSOR_ACTIVATION
              && !(x->producer >= 0 && m->layer[x->producer] == m->layer[i]))
            layer_in[s] = (int)i;
        }
      for (guint k = 0; k < op->n_outputs; k++)
        {
          guint t = op->outputs[k];
          const PlannerTensor *x = planner_graph_get_tensor (m->graph, t);
          if (st[t] != t || x->kind != PLANNER_TENSOR_ACTIVATION)
            continue;
          if (m->c->loss == PLANNER_LOSS_FUSED && strcmp (x->name, "logits") == 0)
            continue;
          bytes[t] = per_micro (
              m, (double)MAX (local_bytes (m, x, planner_plan_get_tensor_layout (m->plan, t)),
                              kept[t]));
        }
    }
  /* When each stored tensor goes: at the backward pass of the first op that keeps it (the
   * last of its keepers to run backward), or of its producer for what the loss keeps. */
  for (guint t = 0; t < n_tensors; t++)
    {
      if (bytes[t] == 0)
        continue;
      if (full && layer_in[t] >= 0)
        free_at[t] = first_use[t]; /* checkpointed: until its first reader's backward */
      else if (kept[t] == 0)
        continue;
      else if (full && keeper[t] >= 0 && m->layer[keeper[t]] >= 0)
        {
          recomputed[t] = TRUE; /* again with its layer */
          free_at[t] = keeper[t];
        }
      else
        free_at[t] = keeper[t] >= 0 ? keeper[t] : planner_graph_get_tensor (m->graph, t)->producer;
    }

  PlannerAllocSim *sim = planner_alloc_sim_new (e);
  g_autofree int *h_grad_state = g_new (int, params->len);
  g_autofree int *h_transient = g_new (int, params->len);
  g_autofree guint *made = g_new0 (guint, params->len);
  for (guint p = 0; p < params->len; p++)
    {
      const ReplayParam *rp = &g_array_index (params, ReplayParam, p);
      planner_alloc_sim_malloc (sim, rp->weights);
    }
  for (guint k = 0; k < n_buckets; k++)
    planner_alloc_sim_malloc (sim, bucket);
  for (guint p = 0; p < params->len && zero; p++)
    {
      const ReplayParam *rp = &g_array_index (params, ReplayParam, p);
      planner_alloc_sim_malloc (sim, rp->grad);
      for (guint k = 0; k < rp->pieces; k++)
        planner_alloc_sim_malloc (sim, rp->piece);
    }
  guint64 logits_f32 = 4 * per_micro (m, (double)logits_numel);

  for (guint step = 0; step < 3; step++)
    {
      for (guint t = 0; t < n_tensors; t++)
        h_act[t] = h_grad[t] = -1;
      for (guint p = 0; p < params->len; p++)
        h_transient[p] = -1;
      /* forward */
      for (guint i = 0; i < n_ops; i++)
        {
          const PlannerOp *op = planner_graph_get_op (m->graph, i);
          h_extra[i] = -1;
          if (!in_scope (m, (int)i) || is_view (op->type))
            continue;
          for (guint k = 0; k < op->n_outputs; k++)
            if (bytes[op->outputs[k]] > 0)
              h_act[op->outputs[k]] = planner_alloc_sim_malloc (sim, bytes[op->outputs[k]]);
          if (!full || m->layer[i] < 0)
            h_extra[i] = planner_alloc_sim_malloc (sim, per_micro (m, (double)kp->extra[i]));
          /* What the backward pass does not keep goes once its last reader has run. */
          for (guint k = 0; k < op->n_inputs + op->n_outputs; k++)
            {
              guint t = k < op->n_inputs ? op->inputs[k] : op->outputs[k - op->n_inputs];
              guint r = st[t];
              if (h_act[r] >= 0 && free_at[r] < 0 && (last_use[r] == (int)i || last_use[r] < 0))
                {
                  planner_alloc_sim_release (sim, h_act[r]);
                  h_act[r] = -1;
                }
              if (recomputed[r] && h_act[r] >= 0 && last_use[r] == (int)i)
                {
                  planner_alloc_sim_release (sim, h_act[r]);
                  h_act[r] = -1;
                }
            }
        }
      /* the loss: logits.float(), log_softmax (kept), the copy freed */
      int h_lsm = -1;
      if (logits_root >= 0)
        {
          int copy = planner_alloc_sim_malloc (sim, logits_f32);
          h_lsm = planner_alloc_sim_malloc (sim, logits_f32);
          planner_alloc_sim_release (sim, copy);
          /* backward: nll_loss's gradient, log_softmax's, then the cast's */
          int g_nll = planner_alloc_sim_malloc (sim, logits_f32);
          int g_lsm = planner_alloc_sim_malloc (sim, logits_f32);
          planner_alloc_sim_release (sim, g_nll);
          planner_alloc_sim_release (sim, h_lsm);
          h_grad[logits_root] = planner_alloc_sim_malloc (
              sim, per_micro (m, (double)logits_numel) * logits_dtype);
          planner_alloc_sim_release (sim, g_lsm);
        }
      const GArray *outputs = planner_graph_get_outputs (m->graph);
      for (guint o = 0; o < outputs->len; o++)
        {
          guint r = st[g_array_index (outputs, guint, o)];
          if (bytes[r] > 0 && h_grad[r] < 0 && grad[r])
            h_grad[r] = planner_alloc_sim_malloc (sim, bytes[r]);
        }
      /* backward */
      int cur_layer = -1;
      for (guint i = n_ops; i-- > 0;)
        {
          const PlannerOp *op = planner_graph_get_op (m->graph, i);
          if (!in_scope (m, (int)i) || is_view (op->type))
            continue;
          if (full && m->layer[i] >= 0 && m->layer[i] != cur_layer)
            {
              /* The layer's forward again: what it keeps. */
              cur_layer = m->layer[i];
              for (guint j = 0; j < n_ops; j++)
                {
                  if (m->layer[j] != cur_layer || !in_scope (m, (int)j))
                    continue;
                  const PlannerOp *oj = planner_graph_get_op (m->graph, j);
                  for (guint k = 0; k < oj->n_outputs; k++)
                    {
                      guint t = oj->outputs[k];
                      if (st[t] == t && recomputed[t] && h_act[t] < 0)
                        h_act[t] = planner_alloc_sim_malloc (sim, bytes[t]);
                    }
                  h_extra[j] = planner_alloc_sim_malloc (sim, per_micro (m, (double)kp->extra[j]));
                }
            }
          for (guint k = 0; k < op->n_inputs; k++)
            {
              guint t = op->inputs[k];
              guint r = st[t];
              int p = param_of[r];
              if (p >= 0)
                {
                  const ReplayParam *rp = &g_array_index (params, ReplayParam, p);
                  if (last_use[r] != (int)i || made[p] == step + 1)
                    continue;
                  made[p] = step + 1; /* a tensor read twice by its op: one gradient */
                  if (step == 0 && !zero)
                    h_grad_state[p] = planner_alloc_sim_malloc (sim, rp->grad);
                  else
                    h_transient[p] = planner_alloc_sim_malloc (sim, rp->transient);
                }
              else if (grad[t] && bytes[r] > 0 && h_grad[r] < 0)
                h_grad[r] = planner_alloc_sim_malloc (sim, bytes[r]);
            }
          for (guint k = 0; k < op->n_inputs; k++)
            {
              guint r = st[op->inputs[k]];
              int p = param_of[r];
              if (p >= 0 && first_use[r] == (int)i)
                {
                  planner_alloc_sim_release (sim, h_transient[p]);
                  h_transient[p] = -1;
                }
            }
          for (guint k = 0; k < op->n_outputs; k++)
            {
              guint r = op->outputs[k];
              if (st[r] != r)
                continue;
              planner_alloc_sim_release (sim, h_grad[r]);
              h_grad[r] = -1;
            }
          for (guint k = 0; k < op->n_inputs + op->n_outputs; k++)
            {
              guint t = k < op->n_inputs ? op->inputs[k] : op->outputs[k - op->n_inputs];
              guint r = st[t];
              if (h_act[r] >= 0 && free_at[r] == (int)i)
                {
                  planner_alloc_sim_release (sim, h_act[r]);
                  h_act[r] = -1;
                }
            }
          planner_alloc_sim_release (sim, h_extra[i]);
          h_extra[i] = -1;
        }
      for (guint t = 0; t < n_tensors; t++)
        {
          planner_alloc_sim_release (sim, h_act[t]);
          planner_alloc_sim_release (sim, h_grad[t]);
        }
      for (guint p = 0; p < params->len; p++)
        planner_alloc_sim_release (sim, h_transient[p]);
      /* the optimizer step */
      for (guint p = 0; p < params->len; p++)
        {
          const ReplayParam *rp = &g_array_index (params, ReplayParam, p);
          if (step == 0 && !zero)
            for (guint k = 0; k < rp->pieces; k++)
              planner_alloc_sim_malloc (sim, rp->piece);
          if (adam)
            planner_alloc_sim_release (sim, planner_alloc_sim_malloc (sim, rp->piece));
        }
    }
  guint64 reserved = planner_alloc_sim_reserved_peak (sim);
  g_debug ("allocator replay: %" G_GUINT64_FORMAT " B reserved at the high-water mark, %"
           G_GUINT64_FORMAT " B of tensors alive at most, %" G_GINT64_FORMAT " us", reserved,
           planner_alloc_sim_live_peak (sim), g_get_monotonic_time () - start);
  planner_alloc_sim_free (sim);
  return reserved;
}

gboolean
planner_plan_compute_training (PlannerPlan *self, PlannerPlanTotals *tot, gboolean set_totals,
                               GError **error)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (self);
  int pp = planner_mesh_pipeline_axis (mesh);
  if (pp >= 0 && mesh->sizes[pp] > 1)
    return planner_pipeline_compute_training (self, tot, set_totals, error);
  return planner_plan_compute_training_scope (self, NULL, tot, set_totals, error);
}

gboolean
planner_plan_compute_training_scope (PlannerPlan *self, PlannerTrainingScope *scope,
                                     PlannerPlanTotals *tot, gboolean set_totals, GError **error)
{
  Model m = { 0 };
  m.scope = scope ? scope->ops : NULL;
  m.plan = self;
  m.graph = planner_plan_get_graph (self);
  m.mesh = planner_plan_get_mesh (self);
  m.hw = planner_plan_get_hardware (self);
  m.c = planner_plan_get_constants (self);
  guint n_ops = planner_graph_get_n_ops (m.graph);
  guint n_tensors = planner_graph_get_n_tensors (m.graph);
  const PlannerEfficiency *eff = planner_hardware_get_efficiency (m.hw);

  guint32 batch_axes;
  guint local_batch = find_local_batch (&m, &batch_axes);
  guint micro = m.c->micro_batch ? m.c->micro_batch : local_batch;
  if (m.c->micro_batches)
    {
      guint count = m.c->micro_batches;
      if (local_batch % count != 0 || (m.c->micro_batch && m.c->micro_batch * count != local_batch))
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE,
                       "%u micro-batches do not split the %u sequences each device gets per "
                       "step%s; use a divisor of %u, or a batch of %u x the data-parallel size",
                       count, local_batch,
                       m.c->micro_batch ? " into the micro-batch size given" : "", local_batch,
                       count);
          return FALSE;
        }
      micro = local_batch / count;
    }
  if (micro > local_batch || local_batch % micro != 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE,
                   "micro-batch %u does not divide the %u sequences each device gets per step; "
                   "use a divisor of %u",
                   m.c->micro_batch, local_batch, local_batch);
      return FALSE;
    }
  m.accum = local_batch / micro;

  g_autofree int *layer = g_new (int, n_ops);
  g_autofree guint *root = g_new (guint, n_tensors);
  m.layer = layer;
  m.root = root;
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (m.graph, i);
      layer[i] = planner_op_block (op->name, NULL);
      if (op->type == PLANNER_OP_DROPOUT && !m.c->no_dropout)
        m.dropout = TRUE;
    }
  for (guint t = 0; t < n_tensors; t++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (m.graph, t);
      root[t] = t;
      if (x->producer >= 0)
        {
          const PlannerOp *op = planner_graph_get_op (m.graph, (guint)x->producer);
          /* Reshape and transpose keep every element: the same storage. */
          if (op->type == PLANNER_OP_RESHAPE || op->type == PLANNER_OP_TRANSPOSE)
            root[t] = root[op->inputs[0]];
        }
    }

  /* ---- memory ---- */
  PlannerMemory mem = { 0 };
  g_autoptr (GArray) groups = g_array_new (FALSE, FALSE, sizeof (SyncGroup));
  /* The allocations alive at the peak, weights, gradients, optimizer states, then ZeRO's
   * buckets, the activations of one micro-batch and the loss's temporaries: their packing
   * with nothing freed gives the states' and the activations' parts of the caching
   * allocator's reserve; replay_params the states per parameter for the step's replay. */
  g_autoptr (GArray) weight_sizes = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GArray) state_sizes = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GArray) act_sizes = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GArray) replay_params = g_array_new (FALSE, FALSE, sizeof (ReplayParam));
  double optimizer_params = 0;
  for (guint t = 0; t < n_tensors; t++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (m.graph, t);
      if (x->kind != PLANNER_TENSOR_PARAMETER || !parameter_in_scope (&m, x))
        continue;
      const PlannerLayout *layout = planner_plan_get_tensor_layout (self, t);
      guint32 users = 0;
      for (guint c = 0; c < x->consumers->len; c++)
        users |= planner_strategy_axis_mask (
            &planner_plan_get_op (self, g_array_index (x->consumers, PlannerUse, c).op)->strategy);
      guint32 sync = users & ~planner_layout_split_mask (layout) & ~layout->partial;
      /* ZeRO shards every parameter over the data-parallel axes it is replicated on, also one
       * whose users run replicated there (GPT-2's position table: its gradient is synced as
       * the activation gradient AllReduce of tp_comm). */
      guint32 shard = (sync | batch_axes) & ~planner_layout_split_mask (layout) & ~layout->partial;
      guint dp = 1;
      for (guint a = 0; a < m.mesh->n_axes; a++)
        if (shard & (1u << a))
          dp *= m.mesh->sizes[a];
      guint64 n = local_numel (&m, x, layout);
      PlannerMemory one = { 0 };
      planner_cost_model_states (m.c, n, x->dtype, dp, &one);
      mem.parameters += one.parameters;
      mem.gradients += one.gradients;
      mem.optimizer += one.optimizer;
      add_model_state_sizes (&m, &one, x->dtype, weight_sizes, state_sizes);
      {
        guint pieces = m.c->optimizer_states + (planner_dtype_size (x->dtype) < 4 ? 1 : 0);
        ReplayParam rp = { t, one.parameters, one.gradients, local_bytes (&m, x, layout),
                           pieces ? (guint64)llround ((double)one.optimizer / pieces) : 0,
                           pieces };
        g_array_append_val (replay_params, rp);
      }
      optimizer_params += m.c->zero >= 1 ? (double)n / dp : (double)n;
      if (sync == 0)
        continue;
      /* ZeRO-3's unit: the layer of the parameter's first user (tied embeddings are used
       * outside layers). */
      int unit = -1;
      if (m.c->zero >= 3)
        unit
            = x->consumers->len > 0 ? layer[g_array_index (x->consumers, PlannerUse, 0).op] + 1 : 0;
      guint g = 0;
      while (g < groups->len
             && (g_array_index (groups, SyncGroup, g).axes != sync
                 || g_array_index (groups, SyncGroup, g).unit != unit))
        g++;
      if (g == groups->len)
        {
          SyncGroup sg = { sync, unit, 0, 0 };
          g_array_append_val (groups, sg);
        }
      g_array_index (groups, SyncGroup, g).bytes += local_bytes (&m, x, layout);
      g_array_index (groups, SyncGroup, g).grad_bytes
          += m.c->grad_reduce == PLANNER_GRAD_REDUCE_F32 ? n * 4 : local_bytes (&m, x, layout);
    }
  /* Units in the order the forward pass reaches them. */
  g_array_sort (groups, sync_group_compare);

  Kept kp = { g_new0 (guint64, n_tensors), g_new (int, n_tensors), g_new0 (guint64, n_ops) };
  for (guint t = 0; t < n_tensors; t++)
    kp.keeper[t] = -1;
  for (guint i = 0; i < n_ops; i++)
    if (in_scope (&m, (int)i))
      op_keeps (&m, &kp, i, m.c->recompute == PLANNER_RECOMPUTE_SELECTIVE);
  /* Graph outputs (the logits) are kept for the loss. The loss over an output named "logits"
   * (the importer's LM and classification heads), unfused as Hugging Face's ForCausalLMLoss
   * runs it, adds fp32 temporaries: logits.float() (4 bytes an element, freed once
   * cross_entropy returns), log_softmax's output (4, kept for the backward pass), and in the
   * backward pass nll_loss's gradient of it (4) and log_softmax's gradient of its input (4),
   * then the cast's 16-bit gradient (2) once those are gone. The most alive at once is the
   * backward pass's 4 + 4 + 4 = 12 bytes an element, on top of every stored activation (the
   * loss's backward runs first). Fused (a fused linear cross-entropy) never holds the logits:
   * neither they nor the temporaries count. */
  double loss = 0;
  guint64 logits_numel = 0;
  int logits_root = -1;
  guint logits_dtype = 0;
  const GArray *outputs = planner_graph_get_outputs (m.graph);
  for (guint o = 0; o < outputs->len; o++)
    {
      guint t = g_array_index (outputs, guint, o);
      const PlannerTensor *x = planner_graph_get_tensor (m.graph, t);
      if (x->kind != PLANNER_TENSOR_ACTIVATION || !in_scope (&m, x->producer))
        continue;
      const PlannerLayout *layout = planner_plan_get_tensor_layout (self, t);
      gboolean is_logits = strcmp (x->name, "logits") == 0;
      if (is_logits && m.c->loss == PLANNER_LOSS_FUSED)
        continue;
      if (kp.keeper[root[t]] < 0)
        kp.kept[root[t]] = local_bytes (&m, x, layout);
      if (is_logits)
        {
          loss += 12.0 * (double)local_numel (&m, x, layout);
          logits_numel += local_numel (&m, x, layout);
          logits_root = (int)root[t];
          logits_dtype = planner_dtype_size (x->dtype);
        }
    }

  double activations = 0;
  if (m.c->recompute == PLANNER_RECOMPUTE_FULL)
    {
      /* Each layer keeps only its input; during the backward pass one layer at a time holds
       * everything it would have kept. */
      int n_layers = 0;
      for (guint i = 0; i < n_ops; i++)
        n_layers = MAX (n_layers, layer[i] + 1);
      g_autofree double *per_layer = g_new0 (double, MAX (n_layers, 1));
      g_autofree gboolean *counted = g_new0 (gboolean, n_tensors);
      double inputs = 0, outside = 0, largest = 0;
      int largest_layer = -1;
      for (guint t = 0; t < n_tensors; t++)
        {
          if (kp.kept[t] == 0)
            continue;
          int owner = kp.keeper[t] >= 0 ? layer[kp.keeper[t]] : -1;
          if (owner >= 0)
            per_layer[owner] += kp.kept[t];
          else
            {
              outside += kp.kept[t];
              append_size (act_sizes, (double)kp.kept[t] / m.accum);
            }
        }
      for (guint i = 0; i < n_ops; i++)
        {
          const PlannerOp *op = planner_graph_get_op (m.graph, i);
          if (!in_scope (&m, (int)i))
            continue;
          if (layer[i] < 0)
            {
              outside += kp.extra[i];
              append_size (act_sizes, (double)kp.extra[i] / m.accum);
              continue;
            }
          per_layer[layer[i]] += kp.extra[i];
          for (guint k = 0; k < op->n_inputs; k++)
            {
              guint t = op->inputs[k];
              const PlannerTensor *x = planner_graph_get_tensor (m.graph, t);
              if (x->kind != PLANNER_TENSOR_ACTIVATION || counted[t]
                  || (x->producer >= 0 && layer[x->producer] == layer[i]))
                continue;
              counted[t] = TRUE;
              guint64 bytes = local_bytes (&m, x, planner_plan_get_tensor_layout (self, t));
              inputs += bytes;
              append_size (act_sizes, (double)bytes / m.accum);
            }
        }
      for (int l = 0; l < n_layers; l++)
        if (per_layer[l] > largest)
          {
            largest = per_layer[l];
            largest_layer = l;
          }
      /* The layer being recomputed holds its whole set beside every layer's input. */
      for (guint t = 0; t < n_tensors && largest_layer >= 0; t++)
        if (kp.kept[t] > 0 && kp.keeper[t] >= 0 && layer[kp.keeper[t]] == largest_layer)
          append_size (act_sizes, (double)kp.kept[t] / m.accum);
      for (guint i = 0; i < n_ops && largest_layer >= 0; i++)
        if (in_scope (&m, (int)i) && layer[i] == largest_layer)
          append_size (act_sizes, (double)kp.extra[i] / m.accum);
      activations = inputs + largest + outside;
      /* The loss's temporaries are gone before the first layer is recomputed: they add to
       * the peak only what they exceed that layer's set by. */
      loss = MAX (0.0, loss - largest);
      if (scope)
        scope->activations_once = largest / m.accum;
    }
  else
    {
      for (guint t = 0; t < n_tensors; t++)
        {
          activations += kp.kept[t];
          append_size (act_sizes, (double)kp.kept[t] / m.accum);
        }
      for (guint i = 0; i < n_ops; i++)
        {
          activations += kp.extra[i];
          append_size (act_sizes, (double)kp.extra[i] / m.accum);
        }
    }
  /* The graph is built for the whole local batch; one micro-batch is kept at a time. */
  mem.activations = (guint64)llround (activations / m.accum);
  /* One micro-batch's loss at a time. */
  mem.loss = (guint64)llround (loss / m.accum);
  /* ZeRO 2 and 3 reduce gradients through flat bucket buffers that live for the whole
   * backward pass: DeepSpeed's ipg_buffer of reduce_bucket_size elements in the gradients'
   * dtype, two with overlap_comm at stage 2 (deepspeed/runtime/zero/stage_1_and_2.py,
   * backward()), one at stage 3 (stage3.py's __ipg_bucket_flat_buffer, allocated with
   * contiguous_gradients, on by default there). */
  guint buffers = 0;
  guint64 bucket = 0;
  if (m.c->zero >= 2 && groups->len > 0 && m.c->zero_bucket_elements > 0)
    {
      guint size = 2;
      for (guint t = 0; t < n_tensors; t++)
        {
          const PlannerTensor *x = planner_graph_get_tensor (m.graph, t);
          if (x->kind == PLANNER_TENSOR_PARAMETER && parameter_in_scope (&m, x))
            size = MAX (size, planner_dtype_size (x->dtype));
        }
      if (m.c->grad_reduce == PLANNER_GRAD_REDUCE_F32)
        size = 4;
      buffers = m.c->zero == 2 && m.c->dp_overlap ? 2 : 1;
      bucket = (guint64)llround (m.c->zero_bucket_elements * size);
      mem.buffers = (guint64)llround (buffers * m.c->zero_bucket_elements * size);
      for (guint k = 0; k < buffers; k++)
        append_size (weight_sizes, m.c->zero_bucket_elements * size);
    }
  /* The loss's peak is three fp32 tensors as large as the logits (above). */
  for (guint k = 0; k < 3; k++)
    append_size (act_sizes, (double)mem.loss / 3);
  {
    const PlannerEfficiency *e = planner_hardware_get_efficiency (m.hw);
    g_array_append_vals (weight_sizes, state_sizes->data, state_sizes->len);
    guint n_states = weight_sizes->len;
    guint64 states_bytes = 0, all_bytes;
    for (guint k = 0; k < n_states; k++)
      states_bytes += g_array_index (weight_sizes, guint64, k);
    all_bytes = states_bytes;
    for (guint k = 0; k < act_sizes->len; k++)
      all_bytes += g_array_index (act_sizes, guint64, k);
    guint64 states_reserved
        = planner_cost_allocator_reserved (e, (const guint64 *)weight_sizes->data, n_states);
    /* The high-water mark of the segments over the step's allocations and frees, less the
     * tensors' peak: the rounding, the packing and what freed blocks keep cached. */
    guint64 tensors = mem.parameters + mem.gradients + mem.optimizer + mem.activations
                      + mem.loss + mem.buffers;
    guint64 all_reserved = e->allocator_min_block_B > 0
                               ? replay_step (&m, &kp, replay_params, buffers, bucket,
                                              logits_numel, logits_root, logits_dtype)
                               : 0;
    if (all_reserved > 0)
      {
        mem.allocator = all_reserved - MIN (all_reserved, tensors);
        /* The part that grows with each micro-batch a pipeline stage holds: the rounding and
         * packing of one micro-batch's stored activations beside the states, all alive
         * (what is cached from the step's transients is there once per step). */
        guint64 states_part = states_reserved - MIN (states_reserved, states_bytes);
        g_array_append_vals (weight_sizes, act_sizes->data, act_sizes->len);
        guint64 alive = planner_cost_allocator_reserved (e, (const guint64 *)weight_sizes->data,
                                                         weight_sizes->len);
        guint64 alive_part = alive - MIN (alive, all_bytes);
        mem.allocator_activations
            = MIN (mem.allocator, alive_part - MIN (alive_part, states_part));
      }
  }
  g_free (kp.kept);
  g_free (kp.keeper);
  g_free (kp.extra);
  add_runtime_memory (&m, &mem);
  planner_memory_finish (&mem);

  /* ---- time, per micro-batch ---- */
  PlannerStepBreakdown b = { 0 };
  double forward = 0, backward = 0, recompute = 0, comm = 0, recompute_comm = 0;
  guint kernels = 0;
  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (m.graph, i);
      if (!in_scope (&m, (int)i))
        continue;
      OpTime t = op_time (&m, i);
      if (set_totals)
        planner_plan_get_op (self, i)->compute_time_s = t.forward * m.accum;
      forward += t.forward;
      backward += t.backward;
      kernels += t.kernels;
      if ((m.c->recompute == PLANNER_RECOMPUTE_FULL && layer[i] >= 0)
          || (m.c->recompute == PLANNER_RECOMPUTE_SELECTIVE && op->type == PLANNER_OP_SDPA
              && m.c->attention == PLANNER_ATTENTION_UNFUSED))
        {
          recompute += t.forward;
          kernels += t.kernels / 3 + 1;
        }
    }
  for (guint r = 0; r < planner_plan_get_n_redistributions (self); r++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (self, r);
      if (!redistribution_in_scope (&m, red))
        continue;
      for (guint s = 0; s < red->n_steps; s++)
        {
          double f = step_time (&m, red, &red->steps[s], FALSE);
          comm += f + step_time (&m, red, &red->steps[s], TRUE);
          if (m.c->recompute == PLANNER_RECOMPUTE_FULL && red->consumer >= 0
              && layer[red->consumer] >= 0)
            recompute_comm += f;
        }
    }
  /* Gradients of activations replicated while their users split the work (the plan's
   * backward_comm_time_s beyond the transposed steps) do not shrink with micro-batches'
   * count: their bytes do, their number grows. */
  double transposed = 0;
  for (guint r = 0; r < planner_plan_get_n_redistributions (self); r++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (self, r);
      if (!redistribution_in_scope (&m, red))
        continue;
      for (guint s = 0; s < red->n_steps; s++)
        {
          PlannerStepKind back;
          if (planner_step_kind_backward (red->steps[s].kind, &back))
            transposed += planner_cost_step_time (m.hw, m.mesh, back, red->steps[s].axis,
                                                  red->steps[s].n_out, red->steps[s].n_in);
        }
    }
  if (scope)
    comm += planner_plan_activation_gradient_sync (self, scope->ops) / m.accum;
  else
    comm += MAX (0.0, tot->backward_comm_time_s - transposed) / m.accum;

  b.forward = forward * m.accum;
  b.backward = backward * m.accum;
  b.recompute = (recompute + recompute_comm) * m.accum;
  b.tp_comm_exposed = comm * m.accum;

  /* One micro-batch's passes, with their share of the redistributions. */
  double pass_backward = backward + recompute + recompute_comm + comm / 2;
  double pass_forward = forward + comm / 2;
  double sync = dp_sync (&m, groups, pass_forward, pass_backward, &b.dp_sync_exposed);
  /* MAX: exposed is computed apart and may exceed sync by a rounding error (-3e-21). */
  b.dp_sync_hidden = MAX (sync - b.dp_sync_exposed, 0.0);
  /* What is hidden still costs: compute slows while a collective shares the GPU with it (its
   * kernels take SMs and memory bandwidth), by the profile's overlap_slowdown over the time
   * they overlap. */
  b.dp_sync_exposed += eff->overlap_slowdown * b.dp_sync_hidden;
  double step_bytes = m.c->optimizer == PLANNER_OPTIMIZER_SGD ? SGD_STEP_BYTES : ADAM_STEP_BYTES;
  b.overhead = kernels * m.accum * eff->kernel_launch_us * 1e-6
               + optimizer_params * step_bytes
                     / (planner_hardware_memory_bandwidth (m.hw) * eff->memory_bound);

  tot->memory = mem;
  tot->breakdown = b;
  tot->micro_batches = m.accum;
  tot->local_batch = local_batch;
  if (set_totals)
    {
      double fwd_total = 0;
      for (guint i = 0; i < n_ops; i++)
        if (in_scope (&m, (int)i))
          fwd_total += planner_plan_get_op (self, i)->compute_time_s;
      tot->compute_time_s = fwd_total;
      tot->grad_sync_time_s = sync;
      tot->activation_bytes_per_device = mem.activations;
      tot->memory_per_device_bytes = mem.total;
      tot->step_time_s = planner_step_breakdown_total (&b);
    }
  return TRUE;
}

void
planner_plan_refresh_training (PlannerPlan *self)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));

  PlannerPlanTotals totals = *planner_plan_get_totals (self);
  /* A plan that was saved could be finished, so its micro-batch divides; a hand-edited file
   * that breaks this keeps zero figures rather than failing the read. */
  if (planner_plan_compute_training (self, &totals, FALSE, NULL))
    planner_plan_set_totals (self, &totals);
}

/* ---- for the exact solver (planner-solve.c) ---- */

void
planner_plan_op_train_time (PlannerPlan *self, guint op, gboolean dropout, double *forward,
                            double *backward)
{
  g_return_if_fail (PLANNER_IS_PLAN (self));

  Model m = { 0 };
  m.plan = self;
  m.graph = planner_plan_get_graph (self);
  m.mesh = planner_plan_get_mesh (self);
  m.hw = planner_plan_get_hardware (self);
  m.c = planner_plan_get_constants (self);
  m.dropout = dropout;
  m.accum = 1;
  OpTime t = op_time (&m, op);
  *forward = t.forward;
  *backward = t.backward;
}

double
planner_plan_optimizer_step_time (PlannerPlan *self, double numel)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (self), 0);

  const PlannerCostConstants *c = planner_plan_get_constants (self);
  const PlannerHardware *hw = planner_plan_get_hardware (self);
  double step_bytes = c->optimizer == PLANNER_OPTIMIZER_SGD ? SGD_STEP_BYTES : ADAM_STEP_BYTES;
  return numel * step_bytes
         / (planner_hardware_memory_bandwidth (hw) * planner_hardware_get_efficiency (hw)->memory_bound);
}
