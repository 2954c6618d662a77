#define G_LOG_DOMAIN "planner-solve"

#include "config.h"

#include <gio/gio.h>
#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-plan-private.h"
#include "planner-request.h"
#include "planner-solve.h"

/* The exact solve (planner-solve.h): variables are ops, values their candidate strategies;
 * factors are each op's own cost (a unary table) and each tensor's cost (a table over its
 * producer and its consumers: the redistributions it needs, their transposes, its gradient
 * AllReduces), indexed through per-variable class maps so that a tensor with three
 * consumers is tabulated over the few layouts they need, not over all their strategies.
 * Variable elimination in a min-size order then gives the minimum and, walking the
 * eliminations back, one assignment that reaches it. */

#define INFEASIBLE 1e30
#define MAX_SCOPE 24

/* ---- domains: every candidate of one op ---- */

typedef struct
{
  guint n;
  guint n_in, n_out;
  PlannerStrategy *s;
  PlannerLayout *in;  /* n x n_in */
  PlannerLayout *out; /* n x n_out, as produced */
  guint32 *used;
} Domain;

static void
domain_free (gpointer data)
{
  Domain *d = data;
  g_free (d->s);
  g_free (d->in);
  g_free (d->out);
  g_free (d->used);
  g_free (d);
}

typedef struct
{
  guint n;
  guint vars[MAX_SCOPE];
  guint dims[MAX_SCOPE];
  guint *maps[MAX_SCOPE]; /* value -> class, NULL: the value itself */
  gboolean own_maps;
  int tensor;      /* leaf tensor factor; -1 otherwise */
  int op;          /* leaf op factor; -1 otherwise */
  int block;       /* block whose internal factor it is (or derives from); -1 */
  double *time;    /* leaf: the objective's part */
  double *mem;     /* leaf: the memory lower bound's part */
  double *table;   /* what elimination reads: time + lambda mem */
  gboolean shared; /* table borrowed from another factor */
  gboolean alive;
} Factor;

typedef struct
{
  guint x;
  guint n;
  guint vars[MAX_SCOPE];
  guint dims[MAX_SCOPE];
  guint *maps[MAX_SCOPE]; /* borrowed from the factor it made */
  guint16 *argmin;
  gboolean shared;
} Elim;

typedef struct
{
  PlannerPlan *seed;
  PlannerPlan *scratch; /* strategies set one op at a time to cost them */
  PlannerGraph *graph;
  const PlannerMesh *mesh;
  const PlannerHardware *hw;
  PlannerRedistributor *redist;
  const PlannerSolveOptions *options;
  gboolean allow_tied;
  gboolean dropout;
  guint n_ops;
  const Domain **dom; /* per op */
  GHashTable *domains;
  guint32 *maybe_partial; /* per tensor */
  GPtrArray *leaves;      /* Factor*: op factors, then tensor factors */
  GArray **var_leaves;    /* per op: indices into leaves */
  int *block_of;          /* per op: index into blocks, -1 */
  GPtrArray *blocks;      /* Block* */
  guint64 cells;
  double lambda;
} Problem;

typedef struct
{
  GArray *ops;       /* guint, in topological order */
  gboolean *in_k;    /* per position: a boundary op (in a leaf homed elsewhere) */
  GArray *homed;     /* guint: the leaves the block's solve takes (see find_blocks) */
  GArray *externals; /* guint: ops outside the block those leaves involve, in order met */
  GByteArray *signature;
  int representative; /* first block of this kind, -1 for itself */
} Block;

static void
block_free (gpointer data)
{
  Block *b = data;
  g_array_unref (b->ops);
  g_array_unref (b->homed);
  g_array_unref (b->externals);
  g_free (b->in_k);
  g_byte_array_unref (b->signature);
  g_free (b);
}

static void
factor_free (gpointer data)
{
  Factor *f = data;
  if (f->own_maps)
    for (guint j = 0; j < f->n; j++)
      g_free (f->maps[j]);
  g_free (f->time);
  g_free (f->mem);
  if (!f->shared)
    g_free (f->table);
  g_free (f);
}

static void
elim_free (gpointer data)
{
  Elim *e = data;
  if (!e->shared)
    g_free (e->argmin);
  g_free (e);
}

void
planner_solve_options_init (PlannerSolveOptions *options)
{
  memset (options, 0, sizeof *options);
  options->sync_weight = 1.0;
  options->reuse_blocks = TRUE;
  options->max_table_cells = 64u << 20;
}

/* ---- domains ---- */

typedef struct
{
  PlannerOpRule rule;
  guint32 masks[PLANNER_MAX_OPERANDS];
  /* A pinned op's one value. */
  gboolean pinned;
  PlannerStrategy strategy;
  gboolean has_out_layouts;
  PlannerLayout out_layouts[PLANNER_MAX_OPERANDS];
} DomainKey;

static guint
domain_key_hash (gconstpointer p)
{
  return planner_hash_bytes (p, sizeof (DomainKey));
}

static gboolean
domain_key_equal (gconstpointer a, gconstpointer b)
{
  return memcmp (a, b, sizeof (DomainKey)) == 0;
}

static void
domain_add (GArray *values, const PlannerStrategy *s)
{
  g_array_append_val (values, *s);
}

static Domain *
domain_build (Problem *p, const PlannerOp *op, GArray *values)
{
  Domain *d = g_new0 (Domain, 1);
  d->n = values->len;
  d->n_in = op->rule.n_inputs;
  d->n_out = op->rule.n_outputs;
  d->s = g_memdup2 (values->data, sizeof (PlannerStrategy) * values->len);
  d->in = g_new0 (PlannerLayout, (gsize)MAX (d->n * d->n_in, 1));
  d->out = g_new0 (PlannerLayout, (gsize)MAX (d->n * d->n_out, 1));
  d->used = g_new (guint32, d->n);
  for (guint i = 0; i < d->n; i++)
    {
      planner_strategy_layouts (&d->s[i], &op->rule, p->mesh, d->in + (gsize)i * d->n_in,
                                d->out + (gsize)i * d->n_out);
      d->used[i] = planner_strategy_axis_mask (&d->s[i]);
    }
  return d;
}

/* Candidates of op @o: its pin, or every legal strategy and, where an input the op is linear
 * in can arrive partial over some axes the strategy leaves free, the variants that keep those
 * partial sums (every non-empty subset of them). */
static const Domain *
domain_of (Problem *p, guint o)
{
  const PlannerOp *op = planner_graph_get_op (p->graph, o);
  const PlannerOpPlan *seed = planner_plan_get_op (p->seed, o);
  g_autoptr (GArray) values = g_array_new (FALSE, FALSE, sizeof (PlannerStrategy));

  DomainKey *key = g_new0 (DomainKey, 1);
  key->rule = op->rule;
  if (seed->decision == PLANNER_DECIDED_PINNED)
    {
      key->pinned = TRUE;
      key->strategy = seed->strategy;
      key->has_out_layouts = seed->has_out_layouts;
      if (seed->has_out_layouts)
        memcpy (key->out_layouts, seed->out_layouts, sizeof key->out_layouts);
    }
  else
    for (guint k = 0; k < op->n_inputs; k++)
      if ((op->rule.linear_inputs >> k) & 1)
        key->masks[k] = p->maybe_partial[op->inputs[k]];
  Domain *cached = g_hash_table_lookup (p->domains, key);
  if (cached)
    {
      g_free (key);
      return cached;
    }
  if (key->pinned)
    {
      domain_add (values, &seed->strategy);
      Domain *d = domain_build (p, op, values);
      if (seed->has_out_layouts)
        memcpy (d->out, seed->out_layouts, sizeof (PlannerLayout) * d->n_out);
      g_hash_table_insert (p->domains, key, d);
      return d;
    }

  guint32 all = 0;
  for (guint a = 0; a < p->mesh->n_axes; a++)
    if (p->mesh->sizes[a] > 1)
      all |= 1u << a;
  g_autoptr (GArray) base = planner_op_rule_enumerate (&op->rule, p->mesh);
  for (guint i = 0; i < base->len; i++)
    {
      const PlannerStrategy *s = &g_array_index (base, PlannerStrategy, i);
      guint32 free_axes = all & ~planner_strategy_axis_mask (s);
      domain_add (values, s);
      if (op->rule.linear_all)
        {
          guint32 m = free_axes;
          gboolean any = FALSE;
          for (guint k = 0; k < op->n_inputs; k++)
            if ((op->rule.linear_inputs >> k) & 1)
              {
                m &= key->masks[k];
                any = TRUE;
              }
          if (!any)
            continue;
          for (guint32 sub = m; sub; sub = (sub - 1) & m)
            {
              PlannerStrategy v = *s;
              v.partial = sub;
              v.partial_input = 0;
              domain_add (values, &v);
            }
          continue;
        }
      for (guint k = 0; k < op->n_inputs; k++)
        {
          guint32 m = free_axes & key->masks[k];
          for (guint32 sub = m; sub; sub = (sub - 1) & m)
            {
              PlannerStrategy v = *s;
              v.partial = sub;
              v.partial_input = (guint8)k;
              domain_add (values, &v);
            }
        }
    }
  Domain *d = domain_build (p, op, values);
  g_hash_table_insert (p->domains, key, d);
  return d;
}

/* ---- leaf costs ---- */

static guint64
local_bytes (Problem *p, const PlannerTensor *t, const PlannerLayout *layout)
{
  gint64 local[PLANNER_MAX_RANK];
  guint64 n = planner_dtype_size (t->dtype);
  planner_layout_local_shape (layout, p->mesh, t->shape, local);
  for (guint d = 0; d < t->rank; d++)
    n *= (guint64)local[d];
  return n;
}

/* Forward and transposed backward time of the cheapest path; INFEASIBLE when none. @gathered
 * gets the axes it AllGathers over. */
static double
path_cost (Problem *p, const PlannerTensor *t, const PlannerLayout *from, const PlannerLayout *to,
           guint32 *gathered)
{
  if (gathered)
    *gathered = 0;
  if (planner_layout_equal (from, to))
    return 0;
  const PlannerRedistPath *path
      = planner_redistributor_find (p->redist, from, to, t->shape, t->rank, t->dtype);
  if (!path->reachable)
    return INFEASIBLE;
  double cost = 0;
  for (guint s = 0; s < path->n_steps; s++)
    {
      const PlannerRedistStep *st = &path->steps[s];
      PlannerStepKind back;
      cost += st->time_s;
      if (planner_step_kind_backward (st->kind, &back))
        cost += planner_cost_step_time (p->hw, p->mesh, back, st->axis, st->n_out, st->n_in);
      if (gathered && st->kind == PLANNER_STEP_ALL_GATHER)
        *gathered |= 1u << st->axis;
    }
  return cost;
}

static double
all_reduce_time (Problem *p, guint32 axes, guint64 bytes)
{
  double t = 0;
  for (guint a = 0; a < p->mesh->n_axes; a++)
    if (axes & (1u << a))
      t += planner_cost_step_time (p->hw, p->mesh, PLANNER_STEP_ALL_REDUCE, a, bytes, bytes);
  return t;
}

/* A parameter's gradient AllReduce over @axes as its share of the training model's buckets:
 * a full bucket's time, prorated by the parameter's bytes. Linear in the bytes, so each
 * parameter pays its own part (exact when a sync group fills whole buckets), and small
 * parameters do not pay a latency each that the buckets pay once. */
static double
grad_sync_time (PlannerPlan *plan, guint32 axes, guint64 bytes)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerHardware *hw = planner_plan_get_hardware (plan);
  double bucket = MAX (planner_plan_get_constants (plan)->dp_bucket_MiB, 1e-6) * 1048576.0;
  double t = 0;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (axes & (1u << a))
      t += planner_cost_step_time (hw, mesh, PLANNER_STEP_ALL_REDUCE, a, (guint64)bucket,
                                   (guint64)bucket);
  return t * (double)bytes / bucket;
}

/* The optimizer step over the parameter's local elements, which ZeRO (stage >= 1) shards
 * over the axes its gradient is synced on. */
static double
optimizer_time (PlannerPlan *plan, const PlannerTensor *t, const PlannerLayout *layout,
                guint64 bytes, guint32 sync)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  double numel = (double)bytes / planner_dtype_size (t->dtype);
  if (planner_plan_get_constants (plan)->zero >= 1)
    numel /= (double)planner_mesh_mask_size (mesh, sync);
  return planner_plan_optimizer_step_time (plan, numel);
}

/* Op @o under value @v: its compute and, when pinned with output layouts, the conversion. */
static double
op_cost (Problem *p, guint o, guint v)
{
  const PlannerOp *op = planner_graph_get_op (p->graph, o);
  const Domain *d = p->dom[o];
  PlannerOpPlan *scratch = planner_plan_get_op (p->scratch, o);
  PlannerStrategy saved = scratch->strategy;
  double forward, backward;
  scratch->strategy = d->s[v];
  planner_plan_op_train_time (p->scratch, o, p->dropout, &forward, &backward);
  scratch->strategy = saved;
  double cost = forward + backward;

  const PlannerOpPlan *seed = planner_plan_get_op (p->seed, o);
  if (seed->decision == PLANNER_DECIDED_PINNED && seed->has_out_layouts)
    {
      PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
      planner_strategy_layouts (&d->s[v], &op->rule, p->mesh, in, out);
      for (guint k = 0; k < op->n_outputs; k++)
        cost += path_cost (p, planner_graph_get_tensor (p->graph, op->outputs[k]), &out[k],
                           &seed->out_layouts[k], NULL);
    }
  return cost;
}

/* Whether op @op keeps input @slot for its backward pass, as the training model counts it
 * (planner-plan-train.c). */
static gboolean
op_keeps_input (const PlannerOp *op, guint slot)
{
  switch (op->type)
    {
    case PLANNER_OP_MATMUL:
    case PLANNER_OP_EINSUM:
    case PLANNER_OP_BATCH_MATMUL:
    case PLANNER_OP_CONV2D:
    case PLANNER_OP_MUL:
    case PLANNER_OP_DIV:
    case PLANNER_OP_CROSS_ENTROPY:
      return TRUE;
    case PLANNER_OP_GELU:
    case PLANNER_OP_SILU:
    case PLANNER_OP_RELU:
    case PLANNER_OP_LAYER_NORM:
    case PLANNER_OP_RMS_NORM:
      return slot == 0;
    case PLANNER_OP_SDPA:
      return slot < 3;
    default:
      return FALSE;
    }
}

/* The activations kept for the backward pass enter the memory bound only where the training
 * model counts them as kept tensors of the whole local batch (no full recompute, no
 * micro-batches), and only for tensors that are not views, so that no storage counts twice:
 * each such tensor at the least of the layouts a keeper may keep it in. */
static gboolean
keeps_counted (Problem *p, const PlannerTensor *t)
{
  const PlannerCostConstants *c = planner_plan_get_constants (p->seed);
  if (c->recompute == PLANNER_RECOMPUTE_FULL || c->micro_batch != 0)
    return FALSE;
  if (t->producer < 0)
    return TRUE;
  PlannerOpType type = planner_graph_get_op (p->graph, (guint)t->producer)->type;
  return type != PLANNER_OP_RESHAPE && type != PLANNER_OP_TRANSPOSE;
}

/* What op @o keeps beyond tensors (planner-plan-train.c's extras): attention's logsumexp or
 * scores, a dropout's mask; 0 where keeps_counted() would not count. */
static double
op_mem (Problem *p, guint o, guint v)
{
  const PlannerOp *op = planner_graph_get_op (p->graph, o);
  const PlannerCostConstants *c = planner_plan_get_constants (p->seed);
  const PlannerTensor *out = planner_graph_get_tensor (p->graph, op->outputs[0]);
  const Domain *d = p->dom[o];
  if (c->recompute == PLANNER_RECOMPUTE_FULL || c->micro_batch != 0)
    return 0;
  if (op->type == PLANNER_OP_DROPOUT && p->dropout)
    return (double)local_bytes (p, out, &d->out[(gsize)v * d->n_out])
           / planner_dtype_size (out->dtype);
  if (op->type != PLANNER_OP_SDPA)
    return 0;
  const PlannerTensor *q = planner_graph_get_tensor (p->graph, op->inputs[0]);
  const PlannerTensor *k = planner_graph_get_tensor (p->graph, op->inputs[1]);
  gint64 ql[PLANNER_MAX_RANK], kl[PLANNER_MAX_RANK];
  planner_layout_local_shape (&d->in[(gsize)v * d->n_in], p->mesh, q->shape, ql);
  planner_layout_local_shape (&d->in[(gsize)v * d->n_in + 1], p->mesh, k->shape, kl);
  if (c->attention != PLANNER_ATTENTION_UNFUSED)
    return 4.0 * ql[0] * ql[1] * ql[2];
  if (c->recompute == PLANNER_RECOMPUTE_SELECTIVE)
    return 0;
  double size = planner_dtype_size (out->dtype);
  return (double)ql[0] * ql[1] * ql[2] * kl[2] * (size + (p->dropout ? 1 + size : 0));
}

/* Whether the producer of @t keeps its output (planner-plan-train.c): the activations whose
 * gradient needs the output, and fused attention. */
static gboolean
producer_keeps_output (Problem *p, const PlannerTensor *t)
{
  if (t->producer < 0 || t->producer_slot != 0)
    return FALSE;
  const PlannerOpPlan *seed = planner_plan_get_op (p->seed, (guint)t->producer);
  if (seed->decision == PLANNER_DECIDED_PINNED && seed->has_out_layouts)
    return FALSE; /* kept as computed, before the conversion: not counted */
  switch (planner_graph_get_op (p->graph, (guint)t->producer)->type)
    {
    case PLANNER_OP_TANH:
    case PLANNER_OP_EXP:
    case PLANNER_OP_SOFTMAX:
      return TRUE;
    case PLANNER_OP_SDPA:
      return planner_plan_get_constants (p->seed)->attention != PLANNER_ATTENTION_UNFUSED;
    default:
      return FALSE;
    }
}

/* Paths a tensor's table needs again and again: by the class of the op that fixes the
 * tensor's layout and, for each use, the class of its op (planner_redistributor_find hashes
 * both layouts and the shape each time). */
typedef struct
{
  guint have_j;   /* scope index of the op that fixes the layout */
  guint stride;   /* entries per class of that op */
  guint *use_j;   /* per use: scope index of its op */
  guint *use_off; /* per use: offset of its entries */
  double *cost;   /* NAN: not computed yet */
  guint32 *gathered;
} PathMemo;

static void
path_memo_init (PathMemo *m, Problem *p, const Factor *f)
{
  const PlannerTensor *t = planner_graph_get_tensor (p->graph, (guint)f->tensor);
  guint fixer
      = t->producer >= 0 ? (guint)t->producer : g_array_index (t->consumers, PlannerUse, 0).op;
  m->have_j = 0;
  m->use_j = g_new (guint, t->consumers->len);
  m->use_off = g_new (guint, t->consumers->len);
  m->stride = 0;
  for (guint j = 0; j < f->n; j++)
    if (f->vars[j] == fixer)
      m->have_j = j;
  for (guint c = 0; c < t->consumers->len; c++)
    {
      guint o = g_array_index (t->consumers, PlannerUse, c).op;
      for (guint j = 0; j < f->n; j++)
        if (f->vars[j] == o)
          m->use_j[c] = j;
      m->use_off[c] = m->stride;
      m->stride += f->dims[m->use_j[c]];
    }
  gsize n = (gsize)f->dims[m->have_j] * m->stride;
  m->cost = g_new (double, n);
  m->gathered = g_new0 (guint32, n);
  for (gsize i = 0; i < n; i++)
    m->cost[i] = NAN;
}

static void
path_memo_clear (PathMemo *m)
{
  g_free (m->use_j);
  g_free (m->use_off);
  g_free (m->cost);
  g_free (m->gathered);
}

/* Tensor @t's cost and memory bound with value @vals[j] for each var of factor @f. */
static void
tensor_cost (Problem *p, const Factor *f, const guint *vals, PathMemo *memo, double *time,
             double *mem)
{
  const PlannerTensor *t = planner_graph_get_tensor (p->graph, (guint)f->tensor);
  PlannerLayout have;
  *time = 0;
  *mem = 0;

#define VAL_OF(op_index)                                                                           \
  ({                                                                                               \
    guint _v = 0;                                                                                  \
    for (guint _j = 0; _j < f->n; _j++)                                                            \
      if (f->vars[_j] == (op_index))                                                               \
        _v = vals[_j];                                                                             \
    _v;                                                                                            \
  })

  if (t->producer >= 0)
    {
      guint o = (guint)t->producer;
      have = p->dom[o]->out[(gsize)VAL_OF (o) * p->dom[o]->n_out + t->producer_slot];
    }
  else
    {
      const PlannerUse *first = &g_array_index (t->consumers, PlannerUse, 0);
      have = p->dom[first->op]
                 ->in[(gsize)VAL_OF (first->op) * p->dom[first->op]->n_in + first->slot];
    }

  PlannerLayout seen[PLANNER_MAX_OPERANDS * 4];
  guint n_seen = 0;
  guint64 kept = 0;
  gboolean count_kept = t->kind == PLANNER_TENSOR_ACTIVATION && keeps_counted (p, t);
  guint32 pending = 0, users = 0;
  guint64 grad_bytes = 0;
  for (guint c = 0; c < t->consumers->len; c++)
    {
      const PlannerUse *use = &g_array_index (t->consumers, PlannerUse, c);
      const Domain *d = p->dom[use->op];
      guint v = VAL_OF (use->op);
      const PlannerLayout *need = &d->in[(gsize)v * d->n_in + use->slot];
      guint32 used = d->used[v];
      guint32 gathered = 0;
      users |= used;
      if (!planner_layout_equal (&have, need))
        {
          if (t->kind == PLANNER_TENSOR_PARAMETER && !p->allow_tied)
            {
              *time = INFEASIBLE;
              return;
            }
          gboolean dup = FALSE;
          for (guint i = 0; i < n_seen && !dup; i++)
            dup = planner_layout_equal (&seen[i], need);
          double c_path;
          if (memo)
            {
              gsize at = (gsize)f->maps[memo->have_j][vals[memo->have_j]] * memo->stride
                         + memo->use_off[c] + f->maps[memo->use_j[c]][vals[memo->use_j[c]]];
              if (isnan (memo->cost[at]))
                memo->cost[at] = path_cost (p, t, &have, need, &memo->gathered[at]);
              c_path = memo->cost[at];
              gathered = memo->gathered[at];
            }
          else
            c_path = path_cost (p, t, &have, need, &gathered);
          if (c_path >= INFEASIBLE)
            {
              *time = INFEASIBLE;
              return;
            }
          if (!dup)
            {
              *time += c_path;
              if (n_seen < G_N_ELEMENTS (seen))
                seen[n_seen++] = *need;
            }
        }
      if (count_kept && op_keeps_input (planner_graph_get_op (p->graph, use->op), use->slot))
        kept = MAX (kept, MIN (local_bytes (p, t, need), local_bytes (p, t, &have)));
      if (t->kind == PLANNER_TENSOR_ACTIVATION && used)
        {
          pending |= used & ~planner_layout_split_mask (need) & ~need->partial & ~gathered;
          grad_bytes = MAX (grad_bytes, local_bytes (p, t, need));
        }
    }
#undef VAL_OF
  if (t->kind == PLANNER_TENSOR_ACTIVATION)
    *time += all_reduce_time (p, pending, grad_bytes);
  /* Kept by its producer, or as a graph output nobody keeps (the logits, for the loss; not
   * with a fused cross-entropy, which never holds the logits). */
  gboolean fused_logits = planner_plan_get_constants (p->seed)->loss == PLANNER_LOSS_FUSED
                          && strcmp (t->name, "logits") == 0;
  if (count_kept && (producer_keeps_output (p, t) || (t->is_output && kept == 0 && !fused_logits)))
    kept = MAX (kept, local_bytes (p, t, &have));
  *mem += (double)kept;
  if (t->kind == PLANNER_TENSOR_PARAMETER)
    {
      guint64 bytes = local_bytes (p, t, &have);
      guint32 sync = users & ~planner_layout_split_mask (&have) & ~have.partial;
      *time += p->options->sync_weight * grad_sync_time (p->seed, sync, bytes);
      *time += optimizer_time (p->seed, t, &have, bytes, sync);
      /* The model states as the training model counts them, ZeRO sharding them over every
       * axis the parameter is not split on (the most it can: a lower bound). */
      const PlannerCostConstants *c = planner_plan_get_constants (p->seed);
      guint32 all = (1u << p->mesh->n_axes) - 1;
      guint64 dp = planner_mesh_mask_size (p->mesh, all & ~planner_layout_split_mask (&have)
                                                        & ~have.partial);
      PlannerMemory states = { 0 };
      planner_cost_model_states (c, bytes / planner_dtype_size (t->dtype), t->dtype,
                                 (guint)MIN (dp, G_MAXUINT), &states);
      *mem = (double)(states.parameters + states.gradients + states.optimizer);
    }
  if (t->is_output && have.partial)
    {
      PlannerLayout reduced = have;
      reduced.partial = 0;
      *time += path_cost (p, t, &have, &reduced, NULL);
    }
}

/* ---- factor tables ---- */

static guint64
factor_cells (const Factor *f)
{
  guint64 n = 1;
  for (guint j = 0; j < f->n; j++)
    n *= f->dims[j];
  return n;
}

/* The class of each value of var @o for tensor @t: what of the value the tensor's cost reads
 * (the produced layout, or the layouts it is needed in and the axes the op uses). */
static guint *
class_map (Problem *p, guint o, const PlannerTensor *t, guint *n_classes)
{
  const PlannerOp *op = planner_graph_get_op (p->graph, o);
  const Domain *d = p->dom[o];
  guint *map = g_new (guint, d->n);
  g_autoptr (GHashTable) seen
      = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, NULL);
  for (guint v = 0; v < d->n; v++)
    {
      g_autoptr (GByteArray) key = g_byte_array_new ();
      if (t->producer == (int)o)
        g_byte_array_append (key, (const guint8 *)&d->out[(gsize)v * d->n_out + t->producer_slot],
                             sizeof (PlannerLayout));
      for (guint k = 0; k < op->n_inputs; k++)
        if (planner_graph_get_tensor (p->graph, op->inputs[k]) == t)
          {
            const PlannerLayout *need = &d->in[(gsize)v * d->n_in + k];
            g_byte_array_append (key, (const guint8 *)need, sizeof (PlannerLayout));
            /* What the cost reads of the axes used: a parameter's users' axes (its gradient
             * sync), an activation's axes it is whole on (its gradient AllReduce). */
            guint32 axes = d->used[v];
            if (t->kind == PLANNER_TENSOR_ACTIVATION)
              axes = (axes & ~planner_layout_split_mask (need) & ~need->partial)
                     | (axes ? 0x80000000u : 0); /* a user at all: its bytes count */
            if (t->kind == PLANNER_TENSOR_INPUT)
              axes = 0;
            g_byte_array_append (key, (const guint8 *)&axes, sizeof axes);
          }
      GBytes *bytes = g_byte_array_free_to_bytes (g_steal_pointer (&key));
      gpointer found;
      if (g_hash_table_lookup_extended (seen, bytes, NULL, &found))
        {
          map[v] = GPOINTER_TO_UINT (found);
          g_bytes_unref (bytes);
        }
      else
        {
          map[v] = g_hash_table_size (seen);
          g_hash_table_insert (seen, bytes, GUINT_TO_POINTER (map[v]));
        }
    }
  *n_classes = g_hash_table_size (seen);
  return map;
}

static gboolean
leaf_build (Problem *p, Factor *f, GError **error)
{
  if (f->time != NULL)
    return TRUE;
  if (f->tensor >= 0)
    for (guint j = 0; j < f->n; j++)
      f->maps[j] = class_map (p, f->vars[j], planner_graph_get_tensor (p->graph, (guint)f->tensor),
                              &f->dims[j]);
  guint64 cells = factor_cells (f);
  if (cells > p->options->max_table_cells)
    {
      const PlannerTensor *t = planner_graph_get_tensor (p->graph, (guint)f->tensor);
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                   "exact solve: tensor %s and its %u users need a table of %" G_GUINT64_FORMAT
                   " cells, more than the limit of %" G_GUINT64_FORMAT
                   "; pin some of its users, or use a mesh with fewer axes",
                   t->name, t->consumers->len, cells, p->options->max_table_cells);
      return FALSE;
    }
  f->time = g_new (double, cells);
  f->mem = g_new0 (double, cells);
  p->cells += cells;
  if (f->op >= 0)
    {
      for (guint v = 0; v < f->dims[0]; v++)
        {
          f->time[v] = op_cost (p, (guint)f->op, v);
          f->mem[v] = op_mem (p, (guint)f->op, v);
        }
      return TRUE;
    }
  /* A representative value of each class. */
  guint *rep[MAX_SCOPE];
  for (guint j = 0; j < f->n; j++)
    {
      rep[j] = g_new (guint, f->dims[j]);
      const Domain *d = p->dom[f->vars[j]];
      for (guint v = d->n; v-- > 0;)
        rep[j][f->maps[j][v]] = v;
    }
  guint idx[MAX_SCOPE] = { 0 }, vals[MAX_SCOPE];
  PathMemo memo;
  path_memo_init (&memo, p, f);
  for (guint64 c = 0; c < cells; c++)
    {
      for (guint j = 0; j < f->n; j++)
        vals[j] = rep[j][idx[j]];
      tensor_cost (p, f, vals, &memo, &f->time[c], &f->mem[c]);
      for (guint j = f->n; j-- > 0;)
        {
          if (++idx[j] < f->dims[j])
            break;
          idx[j] = 0;
        }
    }
  path_memo_clear (&memo);
  for (guint j = 0; j < f->n; j++)
    g_free (rep[j]);
  return TRUE;
}

/* ---- the problem ---- */

static void
add_leaf (Problem *p, Factor *f)
{
  guint index = p->leaves->len;
  g_ptr_array_add (p->leaves, f);
  for (guint j = 0; j < f->n; j++)
    g_array_append_val (p->var_leaves[f->vars[j]], index);
}

static gboolean
problem_init (Problem *p, GError **error)
{
  guint n_tensors = planner_graph_get_n_tensors (p->graph);
  p->maybe_partial = g_new0 (guint32, n_tensors);
  p->dom = g_new0 (const Domain *, p->n_ops);
  p->domains = g_hash_table_new_full (domain_key_hash, domain_key_equal, g_free, domain_free);
  p->leaves = g_ptr_array_new_with_free_func (factor_free);
  p->var_leaves = g_new (GArray *, p->n_ops);
  for (guint o = 0; o < p->n_ops; o++)
    p->var_leaves[o] = g_array_new (FALSE, FALSE, sizeof (guint));

  for (guint o = 0; o < p->n_ops; o++)
    {
      const PlannerOp *op = planner_graph_get_op (p->graph, o);
      if (op->type == PLANNER_OP_DROPOUT)
        p->dropout = !planner_plan_get_constants (p->seed)->no_dropout;
      p->dom[o] = domain_of (p, o);
      const Domain *d = p->dom[o];
      for (guint v = 0; v < d->n; v++)
        for (guint k = 0; k < d->n_out; k++)
          p->maybe_partial[op->outputs[k]] |= d->out[(gsize)v * d->n_out + k].partial;
    }

  for (guint o = 0; o < p->n_ops; o++)
    {
      Factor *f = g_new0 (Factor, 1);
      f->n = 1;
      f->vars[0] = o;
      f->dims[0] = p->dom[o]->n;
      f->tensor = -1;
      f->op = (int)o;
      f->block = -1;
      add_leaf (p, f);
    }
  for (guint t = 0; t < n_tensors; t++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (p->graph, t);
      if (tensor->consumers->len == 0 && !(tensor->is_output && tensor->producer >= 0))
        continue;
      Factor *f = g_new0 (Factor, 1);
      f->tensor = (int)t;
      f->op = -1;
      f->block = -1;
      f->own_maps = TRUE;
      if (tensor->producer >= 0)
        f->vars[f->n++] = (guint)tensor->producer;
      for (guint c = 0; c < tensor->consumers->len; c++)
        {
          guint o = g_array_index (tensor->consumers, PlannerUse, c).op;
          gboolean dup = FALSE;
          for (guint j = 0; j < f->n && !dup; j++)
            dup = f->vars[j] == o;
          if (dup)
            continue;
          if (f->n == MAX_SCOPE)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                           "exact solve: tensor %s has more than %u users; the solver takes at "
                           "most that many per tensor",
                           tensor->name, MAX_SCOPE - 1);
              factor_free (f);
              return FALSE;
            }
          f->vars[f->n++] = o;
        }
      /* The class maps (and so the dims) are made when the table is: most blocks never
       * build theirs. */
      add_leaf (p, f);
    }
  return TRUE;
}

static void
problem_clear (Problem *p)
{
  g_clear_pointer (&p->maybe_partial, g_free);
  g_clear_pointer (&p->dom, g_free);
  g_clear_pointer (&p->domains, g_hash_table_unref);
  g_clear_pointer (&p->leaves, g_ptr_array_unref);
  if (p->var_leaves)
    for (guint o = 0; o < p->n_ops; o++)
      g_array_unref (p->var_leaves[o]);
  g_clear_pointer (&p->var_leaves, g_free);
  g_clear_pointer (&p->block_of, g_free);
  g_clear_pointer (&p->blocks, g_ptr_array_unref);
}

/* ---- repeated blocks ---- */

static void
sig_add (GByteArray *sig, const void *data, gsize n)
{
  g_byte_array_append (sig, data, (guint)n);
}

/* The block a leaf belongs to: an op's own term to its op's block; a tensor's to the block of
 * all its consumers (its producer may lie outside: the previous layer's output), -1 when they
 * are in several blocks or outside all. */
static int
leaf_home (Problem *p, const Factor *f)
{
  if (f->op >= 0)
    return p->block_of[f->op];
  const PlannerTensor *t = planner_graph_get_tensor (p->graph, (guint)f->tensor);
  int home = -2;
  for (guint j = 0; j < f->n; j++)
    {
      if ((int)f->vars[j] == t->producer)
        continue;
      int b = p->block_of[f->vars[j]];
      if (home == -2)
        home = b;
      else if (home != b)
        return -1;
    }
  return home == -2 ? p->block_of[f->vars[0]] : home;
}

/* Blocks by name (planner_op_block). A block's solve takes its homed leaves and eliminates
 * the ops of the block found in no other leaf; what remains is a table over its boundary ops
 * (in_k) and the outside ops its leaves involve (externals: the previous layer's output).
 * The signature is equal exactly when two blocks give the same tables up to renaming. */
static void
find_blocks (Problem *p)
{
  p->block_of = g_new (int, p->n_ops);
  p->blocks = g_ptr_array_new_with_free_func (block_free);
  g_autoptr (GHashTable) by_name = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  for (guint o = 0; o < p->n_ops; o++)
    {
      const char *name = planner_graph_get_op (p->graph, o)->name;
      gsize len;
      p->block_of[o] = -1;
      if (planner_op_block (name, &len) < 0)
        continue;
      g_autofree char *prefix = g_strndup (name, len);
      gpointer found;
      int b;
      if (g_hash_table_lookup_extended (by_name, prefix, NULL, &found))
        b = GPOINTER_TO_INT (found);
      else
        {
          Block *block = g_new0 (Block, 1);
          block->ops = g_array_new (FALSE, FALSE, sizeof (guint));
          block->homed = g_array_new (FALSE, FALSE, sizeof (guint));
          block->externals = g_array_new (FALSE, FALSE, sizeof (guint));
          block->representative = -1;
          b = (int)p->blocks->len;
          g_ptr_array_add (p->blocks, block);
          g_hash_table_insert (by_name, g_steal_pointer (&prefix), GINT_TO_POINTER (b));
        }
      p->block_of[o] = b;
      g_array_append_val (((Block *)g_ptr_array_index (p->blocks, b))->ops, o);
    }

  g_autofree int *homes = g_new (int, p->leaves->len);
  for (guint l = 0; l < p->leaves->len; l++)
    {
      Factor *f = g_ptr_array_index (p->leaves, l);
      homes[l] = leaf_home (p, f);
      f->block = homes[l];
      if (homes[l] >= 0)
        g_array_append_val (((Block *)g_ptr_array_index (p->blocks, homes[l]))->homed, l);
    }

  g_autofree int *position = g_new (int, p->n_ops);
  for (guint o = 0; o < p->n_ops; o++)
    position[o] = G_MININT;
  for (guint b = 0; b < p->blocks->len; b++)
    {
      Block *block = g_ptr_array_index (p->blocks, b);
      guint n = block->ops->len;
      for (guint i = 0; i < n; i++)
        position[g_array_index (block->ops, guint, i)] = (int)i;
      block->in_k = g_new0 (gboolean, n);
      GByteArray *sig = block->signature = g_byte_array_new ();
      sig_add (sig, &n, sizeof n);
      for (guint i = 0; i < n; i++)
        {
          guint o = g_array_index (block->ops, guint, i);
          const PlannerOp *op = planner_graph_get_op (p->graph, o);
          const PlannerOpPlan *seed = planner_plan_get_op (p->seed, o);
          sig_add (sig, &op->type, sizeof op->type);
          sig_add (sig, &op->attrs, sizeof op->attrs);
          sig_add (sig, &p->dom[o], sizeof p->dom[o]);
          sig_add (sig, &seed->decision, sizeof seed->decision);
          if (seed->decision == PLANNER_DECIDED_PINNED)
            {
              sig_add (sig, &seed->strategy, sizeof seed->strategy);
              sig_add (sig, &seed->has_out_layouts, sizeof seed->has_out_layouts);
              sig_add (sig, seed->out_layouts, sizeof seed->out_layouts);
            }
          for (guint k = 0; k < op->n_outputs; k++)
            {
              const PlannerTensor *t = planner_graph_get_tensor (p->graph, op->outputs[k]);
              sig_add (sig, &t->dtype, sizeof t->dtype);
              sig_add (sig, &t->is_output, sizeof t->is_output);
            }
          /* A boundary op: in some leaf the block does not take. */
          GArray *mine = p->var_leaves[o];
          for (guint l = 0; l < mine->len; l++)
            if (homes[g_array_index (mine, guint, l)] != (int)b)
              block->in_k[i] = TRUE;
        }
      sig_add (sig, block->in_k, sizeof (gboolean) * n);
      for (guint h = 0; h < block->homed->len; h++)
        {
          const Factor *f = g_ptr_array_index (p->leaves, g_array_index (block->homed, guint, h));
          sig_add (sig, &f->n, sizeof f->n);
          int kind = f->op >= 0 ? -1 : 1;
          sig_add (sig, &kind, sizeof kind);
          for (guint j = 0; j < f->n; j++)
            {
              guint v = f->vars[j];
              int ref = p->block_of[v] == (int)b ? position[v] : -1;
              if (ref < 0)
                {
                  guint e = 0;
                  while (e < block->externals->len
                         && g_array_index (block->externals, guint, e) != v)
                    e++;
                  if (e == block->externals->len)
                    g_array_append_val (block->externals, v);
                  ref = -1 - (int)e;
                  sig_add (sig, &p->dom[v], sizeof p->dom[v]);
                }
              sig_add (sig, &ref, sizeof ref);
            }
          if (f->tensor >= 0)
            {
              const PlannerTensor *t = planner_graph_get_tensor (p->graph, (guint)f->tensor);
              sig_add (sig, &t->kind, sizeof t->kind);
              sig_add (sig, &t->dtype, sizeof t->dtype);
              sig_add (sig, &t->rank, sizeof t->rank);
              sig_add (sig, t->shape, sizeof t->shape);
              sig_add (sig, &t->is_output, sizeof t->is_output);
              sig_add (sig, &t->producer_slot, sizeof t->producer_slot);
              for (guint c = 0; c < t->consumers->len; c++)
                {
                  const PlannerUse *use = &g_array_index (t->consumers, PlannerUse, c);
                  sig_add (sig, &position[use->op], sizeof (int));
                  sig_add (sig, &use->slot, sizeof use->slot);
                }
            }
        }
      for (guint r = 0; r < b; r++)
        {
          Block *other = g_ptr_array_index (p->blocks, r);
          if (other->representative < 0 && other->signature->len == sig->len
              && memcmp (other->signature->data, sig->data, sig->len) == 0)
            {
              block->representative = (int)r;
              break;
            }
        }
    }
}

/* ---- elimination ---- */

typedef struct
{
  Problem *p;
  GPtrArray *factors; /* Factor*: the leaves (borrowed, not freed here) then derived ones */
  guint n_leaves;
  GArray **var_factors; /* per op: indices into factors */
  gboolean *eliminated;
  GPtrArray *elims; /* Elim* in elimination order */
  guint *vals;      /* per op: the value being tried, then the solution */
} Round;

static void
round_add_factor (Round *r, Factor *f)
{
  guint index = r->factors->len;
  g_ptr_array_add (r->factors, f);
  for (guint j = 0; j < f->n; j++)
    g_array_append_val (r->var_factors[f->vars[j]], index);
}

static gboolean
factor_ready (Round *r, Factor *f, GError **error)
{
  if (f->table)
    return TRUE;
  if (!leaf_build (r->p, f, error))
    return FALSE;
  guint64 cells = factor_cells (f);
  f->table = g_new (double, cells);
  for (guint64 c = 0; c < cells; c++)
    f->table[c] = f->time[c] + r->p->lambda * f->mem[c];
  return TRUE;
}

static guint64
factor_index (const Factor *f, const guint *vals)
{
  guint64 idx = 0;
  for (guint j = 0; j < f->n; j++)
    {
      guint v = vals[f->vars[j]];
      idx = idx * f->dims[j] + (f->maps[j] ? f->maps[j][v] : v);
    }
  return idx;
}

/* The scope that eliminating @x would leave, sorted; its size in cells (G_MAXUINT64 when it
 * would not fit in MAX_SCOPE). */
static guint64
scope_of (Round *r, guint x, guint *scope, guint *n_scope)
{
  GArray *list = r->var_factors[x];
  guint n = 0;
  for (guint l = 0; l < list->len; l++)
    {
      Factor *f = g_ptr_array_index (r->factors, g_array_index (list, guint, l));
      if (!f->alive)
        continue;
      for (guint j = 0; j < f->n; j++)
        {
          guint v = f->vars[j];
          gboolean dup = v == x;
          for (guint i = 0; i < n && !dup; i++)
            dup = scope[i] == v;
          if (dup)
            continue;
          if (n == MAX_SCOPE)
            return G_MAXUINT64;
          guint i = n++;
          while (i > 0 && scope[i - 1] > v)
            {
              scope[i] = scope[i - 1];
              i--;
            }
          scope[i] = v;
        }
    }
  *n_scope = n;
  guint64 cells = 1;
  for (guint i = 0; i < n; i++)
    {
      cells *= r->p->dom[scope[i]]->n;
      if (cells > G_MAXUINT32)
        return G_MAXUINT64;
    }
  return cells;
}

/* Value -> class of var @s over the factors of @fx that contain it: two values that every one
 * of them tabulates alike are one class of the new table. */
static guint *
composite_map (Problem *p, GPtrArray *fx, guint s, guint *n_classes, guint **reps)
{
  const Domain *d = p->dom[s];
  guint *map = g_new (guint, d->n);
  g_autoptr (GHashTable) ids = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  g_autoptr (GArray) rep = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint v = 0; v < d->n; v++)
    {
      guint64 key = 0;
      for (guint i = 0; i < fx->len; i++)
        {
          const Factor *f = g_ptr_array_index (fx, i);
          for (guint j = 0; j < f->n; j++)
            if (f->vars[j] == s)
              key = key * f->dims[j] + (f->maps[j] ? f->maps[j][v] : v);
        }
      gpointer found;
      if (g_hash_table_lookup_extended (ids, &key, NULL, &found))
        map[v] = GPOINTER_TO_UINT (found);
      else
        {
          map[v] = rep->len;
          g_array_append_val (rep, v);
          g_hash_table_insert (ids, g_memdup2 (&key, sizeof key), GUINT_TO_POINTER (map[v]));
        }
    }
  *n_classes = rep->len;
  *reps = (guint *)(void *)g_array_free (g_steal_pointer (&rep), FALSE);
  return map;
}

static gboolean
eliminate (Round *r, guint x, int block, GError **error)
{
  Problem *p = r->p;
  guint scope[MAX_SCOPE], n;
  if (scope_of (r, x, scope, &n) == G_MAXUINT64 && n == MAX_SCOPE)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                   "exact solve: eliminating %s would tie more than %u ops together; pin more "
                   "ops",
                   planner_graph_get_op (p->graph, x)->name, MAX_SCOPE);
      return FALSE;
    }

  g_autoptr (GPtrArray) fx = g_ptr_array_new ();
  g_autoptr (GPtrArray) unary = g_ptr_array_new ();
  GArray *list = r->var_factors[x];
  for (guint l = 0; l < list->len; l++)
    {
      Factor *f = g_ptr_array_index (r->factors, g_array_index (list, guint, l));
      if (!f->alive)
        continue;
      if (!factor_ready (r, f, error))
        return FALSE;
      g_ptr_array_add (f->n == 1 ? unary : fx, f);
    }

  Factor *g = g_new0 (Factor, 1);
  g->n = n;
  memcpy (g->vars, scope, n * sizeof (guint));
  g->own_maps = TRUE;
  g->tensor = g->op = -1;
  g->block = block;
  g->alive = TRUE;
  guint *reps[MAX_SCOPE];
  guint64 cells = 1;
  for (guint i = 0; i < n; i++)
    {
      g->maps[i] = composite_map (p, fx, scope[i], &g->dims[i], &reps[i]);
      cells *= g->dims[i];
    }
  /* x's values that the other factors see alike: only the cheapest on its own counts. */
  guint n_groups, *group_rep;
  g_autofree guint *group = composite_map (p, fx, x, &n_groups, &group_rep);
  g_autofree double *group_cost = g_new (double, n_groups);
  for (guint k = 0; k < n_groups; k++)
    group_cost[k] = INFEASIBLE * 8;
  for (guint v = 0; v < p->dom[x]->n; v++)
    {
      double c = 0;
      r->vals[x] = v;
      for (guint i = 0; i < unary->len; i++)
        {
          const Factor *f = g_ptr_array_index (unary, i);
          c += f->table[factor_index (f, r->vals)];
        }
      if (c < group_cost[group[v]])
        {
          group_cost[group[v]] = c;
          group_rep[group[v]] = v;
        }
    }

  if (cells > p->options->max_table_cells || cells * n_groups > 16 * p->options->max_table_cells)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                   "exact solve: eliminating %s would build a table of %" G_GUINT64_FORMAT
                   " cells over %u ops, beyond the limit of %" G_GUINT64_FORMAT
                   "; pin more ops or use fewer mesh axes",
                   planner_graph_get_op (p->graph, x)->name, cells, n, p->options->max_table_cells);
      for (guint i = 0; i < n; i++)
        g_free (reps[i]);
      g_free (group_rep);
      factor_free (g);
      return FALSE;
    }
  for (guint i = 0; i < fx->len; i++)
    ((Factor *)g_ptr_array_index (fx, i))->alive = FALSE;
  for (guint i = 0; i < unary->len; i++)
    ((Factor *)g_ptr_array_index (unary, i))->alive = FALSE;

  g->table = g_new (double, cells);
  Elim *e = g_new0 (Elim, 1);
  e->x = x;
  e->n = n;
  memcpy (e->vars, scope, n * sizeof (guint));
  memcpy (e->dims, g->dims, n * sizeof (guint));
  memcpy (e->maps, g->maps, n * sizeof (guint *));
  e->argmin = g_new (guint16, cells);
  p->cells += cells;

  guint idx[MAX_SCOPE] = { 0 };
  for (guint i = 0; i < n; i++)
    r->vals[scope[i]] = reps[i][0];
  for (guint64 c = 0; c < cells; c++)
    {
      double best = INFEASIBLE * 4;
      guint16 arg = 0;
      for (guint k = 0; k < n_groups; k++)
        {
          double sum = group_cost[k];
          r->vals[x] = group_rep[k];
          for (guint i = 0; i < fx->len && sum < best; i++)
            {
              const Factor *f = g_ptr_array_index (fx, i);
              sum += f->table[factor_index (f, r->vals)];
            }
          if (sum < best)
            {
              best = sum;
              arg = (guint16)group_rep[k];
            }
        }
      g->table[c] = MIN (best, INFEASIBLE);
      e->argmin[c] = arg;
      for (guint i = n; i-- > 0;)
        {
          if (++idx[i] < g->dims[i])
            {
              r->vals[scope[i]] = reps[i][idx[i]];
              break;
            }
          idx[i] = 0;
          r->vals[scope[i]] = reps[i][0];
        }
    }
  for (guint i = 0; i < n; i++)
    g_free (reps[i]);
  g_free (group_rep);
  r->eliminated[x] = TRUE;
  round_add_factor (r, g);
  g_ptr_array_add (r->elims, e);
  return TRUE;
}

/* Eliminates every var of @set (n of them) in a min-table order. */
static gboolean
eliminate_set (Round *r, const guint *set, guint n, int block, GError **error)
{
  g_autofree gboolean *done = g_new0 (gboolean, n);
  for (guint step = 0; step < n; step++)
    {
      guint best = G_MAXUINT;
      guint64 best_cells = G_MAXUINT64;
      for (guint i = 0; i < n; i++)
        {
          if (done[i])
            continue;
          guint scope[MAX_SCOPE], ns;
          guint64 c = scope_of (r, set[i], scope, &ns);
          if (best == G_MAXUINT || c < best_cells)
            {
              best = i;
              best_cells = c;
            }
          if (c <= 1)
            break;
        }
      done[best] = TRUE;
      if (g_cancellable_set_error_if_cancelled (r->p->options->cancellable, error))
        return FALSE;
      if (!eliminate (r, set[best], block, error))
        return FALSE;
    }
  return TRUE;
}

/* Another block of a kind already solved: its tables are the representative's, renamed. */
static void
reuse_block (Round *r, const Block *rep, const Block *block, guint first_elim, guint n_elims,
             GPtrArray *rep_results)
{
  g_autoptr (GHashTable) rename = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < rep->ops->len; i++)
    g_hash_table_insert (rename, GUINT_TO_POINTER (g_array_index (rep->ops, guint, i) + 1),
                         GUINT_TO_POINTER (g_array_index (block->ops, guint, i) + 1));
  for (guint e = 0; e < rep->externals->len; e++)
    g_hash_table_insert (rename, GUINT_TO_POINTER (g_array_index (rep->externals, guint, e) + 1),
                         GUINT_TO_POINTER (g_array_index (block->externals, guint, e) + 1));
#define RENAME(v) (GPOINTER_TO_UINT (g_hash_table_lookup (rename, GUINT_TO_POINTER ((v) + 1))) - 1)
  for (guint h = 0; h < block->homed->len; h++)
    ((Factor *)g_ptr_array_index (r->factors, g_array_index (block->homed, guint, h)))->alive
        = FALSE;
  for (guint i = 0; i < block->ops->len; i++)
    if (!block->in_k[i])
      r->eliminated[g_array_index (block->ops, guint, i)] = TRUE;
  for (guint k = 0; k < rep_results->len; k++)
    {
      const Factor *src = g_ptr_array_index (rep_results, k);
      Factor *f = g_new0 (Factor, 1);
      *f = *src;
      f->own_maps = FALSE;
      f->time = f->mem = NULL;
      f->shared = TRUE;
      f->alive = TRUE;
      for (guint j = 0; j < f->n; j++)
        f->vars[j] = RENAME (src->vars[j]);
      round_add_factor (r, f);
    }
  for (guint k = first_elim; k < first_elim + n_elims; k++)
    {
      const Elim *src = g_ptr_array_index (r->elims, k);
      Elim *e = g_new0 (Elim, 1);
      *e = *src;
      e->shared = TRUE;
      e->x = RENAME (src->x);
      for (guint j = 0; j < e->n; j++)
        e->vars[j] = RENAME (src->vars[j]);
      g_ptr_array_add (r->elims, e);
    }
#undef RENAME
}

static void
results_free (gpointer data)
{
  if (data)
    g_ptr_array_unref (data);
}

/* One solve of the whole graph at the current lambda: the minimum of time + lambda memory,
 * and in r->vals an assignment that reaches it. */
static gboolean
round_run (Problem *p, Round *r, double *minimum, GError **error)
{
  r->p = p;
  r->factors = g_ptr_array_new ();
  r->var_factors = g_new (GArray *, p->n_ops);
  r->eliminated = g_new0 (gboolean, p->n_ops);
  r->elims = g_ptr_array_new_with_free_func (elim_free);
  r->vals = g_new0 (guint, p->n_ops);
  for (guint o = 0; o < p->n_ops; o++)
    r->var_factors[o] = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint l = 0; l < p->leaves->len; l++)
    {
      Factor *f = g_ptr_array_index (p->leaves, l);
      if (f->table && !f->shared)
        g_clear_pointer (&f->table, g_free);
      f->alive = TRUE;
      round_add_factor (r, f);
    }
  r->n_leaves = p->leaves->len;

  if (p->options->reuse_blocks)
    {
      g_autofree guint *first_elim = g_new0 (guint, p->blocks->len);
      g_autofree guint *n_elims = g_new0 (guint, p->blocks->len);
      g_autoptr (GPtrArray) results = g_ptr_array_new_with_free_func (results_free);
      for (guint b = 0; b < p->blocks->len; b++)
        g_ptr_array_add (results, NULL);
      for (guint b = 0; b < p->blocks->len; b++)
        {
          const Block *block = g_ptr_array_index (p->blocks, b);
          if (block->representative >= 0)
            {
              guint rb = (guint)block->representative;
              reuse_block (r, g_ptr_array_index (p->blocks, rb), block, first_elim[rb], n_elims[rb],
                           g_ptr_array_index (results, rb));
              continue;
            }
          g_autoptr (GArray) interior = g_array_new (FALSE, FALSE, sizeof (guint));
          for (guint i = 0; i < block->ops->len; i++)
            if (!block->in_k[i])
              g_array_append_val (interior, g_array_index (block->ops, guint, i));
          first_elim[b] = r->elims->len;
          if (!eliminate_set (r, (const guint *)(void *)interior->data, interior->len, (int)b,
                              error))
            return FALSE;
          n_elims[b] = r->elims->len - first_elim[b];
          GPtrArray *res = g_ptr_array_new ();
          for (guint f = 0; f < r->factors->len; f++)
            {
              Factor *x = g_ptr_array_index (r->factors, f);
              if (x->alive && x->block == (int)b)
                {
                  if (!factor_ready (r, x, error))
                    {
                      g_ptr_array_unref (res);
                      return FALSE;
                    }
                  g_ptr_array_add (res, x);
                }
            }
          g_ptr_array_index (results, b) = res;
        }
    }

  g_autoptr (GArray) rest = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint o = 0; o < p->n_ops; o++)
    if (!r->eliminated[o])
      g_array_append_val (rest, o);
  if (!eliminate_set (r, (const guint *)(void *)rest->data, rest->len, -1, error))
    return FALSE;

  double total = 0;
  for (guint f = 0; f < r->factors->len; f++)
    {
      Factor *x = g_ptr_array_index (r->factors, f);
      if (!x->alive)
        continue;
      g_assert (x->n == 0);
      if (!factor_ready (r, x, error))
        return FALSE;
      total += x->table[0];
    }
  *minimum = total;

  /* Walk back: each var takes the best value given the vars eliminated after it. */
  for (guint k = r->elims->len; k-- > 0;)
    {
      const Elim *e = g_ptr_array_index (r->elims, k);
      guint64 idx = 0;
      for (guint j = 0; j < e->n; j++)
        idx = idx * e->dims[j] + e->maps[j][r->vals[e->vars[j]]];
      r->vals[e->x] = e->argmin[idx];
    }
  return TRUE;
}

static void
round_clear (Round *r)
{
  if (r->factors)
    for (guint f = r->n_leaves; f < r->factors->len; f++)
      factor_free (g_ptr_array_index (r->factors, f));
  g_clear_pointer (&r->factors, g_ptr_array_unref);
  if (r->var_factors)
    for (guint o = 0; o < r->p->n_ops; o++)
      g_array_unref (r->var_factors[o]);
  g_clear_pointer (&r->var_factors, g_free);
  g_clear_pointer (&r->eliminated, g_free);
  g_clear_pointer (&r->elims, g_ptr_array_unref);
  g_clear_pointer (&r->vals, g_free);
}

/* ---- plans ---- */

/* Why each chosen op has its strategy: the cost of the terms it takes part in (its own, and
 * each tensor it produces or reads) with every other op as solved, for its value and for the
 * best other one (the runner-up). */
typedef struct
{
  double cost;
  double runner_up_cost;
  int runner_up; /* value, -1 when the op had no other */
} Why;

/* Leaf @f's objective part with the ops at @vals. */
static double
leaf_value (Problem *p, const Factor *f, const guint *vals)
{
  if (f->time)
    {
      guint64 idx = 0;
      for (guint j = 0; j < f->n; j++)
        {
          guint v = vals[f->vars[j]];
          idx = idx * f->dims[j] + (f->maps[j] ? f->maps[j][v] : v);
        }
      return f->time[idx];
    }
  if (f->op >= 0)
    return op_cost (p, (guint)f->op, vals[f->op]);
  guint local[MAX_SCOPE];
  for (guint j = 0; j < f->n; j++)
    local[j] = vals[f->vars[j]];
  double time, mem;
  tensor_cost (p, f, local, NULL, &time, &mem);
  return time;
}

static double
op_terms (Problem *p, guint o, guint *vals)
{
  double c = 0;
  GArray *list = p->var_leaves[o];
  for (guint l = 0; l < list->len; l++)
    c += leaf_value (p, g_ptr_array_index (p->leaves, g_array_index (list, guint, l)), vals);
  return c;
}

/* Whether op @o sees around it what op @r of the representative block saw: then its
 * explanation is @r's. */
static gboolean
same_surroundings (Problem *p, guint o, guint r, const guint *vals)
{
  GArray *a = p->var_leaves[o], *b = p->var_leaves[r];
  if (a->len != b->len)
    return FALSE;
  for (guint l = 0; l < a->len; l++)
    {
      const Factor *fa = g_ptr_array_index (p->leaves, g_array_index (a, guint, l));
      const Factor *fb = g_ptr_array_index (p->leaves, g_array_index (b, guint, l));
      if (fa->n != fb->n)
        return FALSE;
      for (guint j = 0; j < fa->n; j++)
        if (vals[fa->vars[j]] != vals[fb->vars[j]] || p->dom[fa->vars[j]] != p->dom[fb->vars[j]])
          return FALSE;
    }
  return TRUE;
}

static Why *
explain (Problem *p, const guint *solution)
{
  Why *why = g_new0 (Why, p->n_ops);
  g_autofree guint *vals = g_memdup2 (solution, sizeof (guint) * p->n_ops);
  g_autofree int *twin = g_new (int, p->n_ops);
  for (guint o = 0; o < p->n_ops; o++)
    twin[o] = -1;
  if (p->options->reuse_blocks)
    for (guint b = 0; b < p->blocks->len; b++)
      {
        const Block *block = g_ptr_array_index (p->blocks, b);
        if (block->representative < 0)
          continue;
        const Block *rep = g_ptr_array_index (p->blocks, block->representative);
        for (guint i = 0; i < block->ops->len; i++)
          twin[g_array_index (block->ops, guint, i)] = (int)g_array_index (rep->ops, guint, i);
      }
  for (guint o = 0; o < p->n_ops; o++)
    {
      why[o].runner_up = -1;
      if (p->dom[o]->n < 2)
        continue;
      if (twin[o] >= 0 && same_surroundings (p, o, (guint)twin[o], vals))
        {
          why[o] = why[twin[o]];
          continue;
        }
      why[o].cost = op_terms (p, o, vals);
      for (guint v = 0; v < p->dom[o]->n; v++)
        {
          if (v == solution[o])
            continue;
          vals[o] = v;
          double c = op_terms (p, o, vals);
          if (why[o].runner_up < 0 || c < why[o].runner_up_cost)
            {
              why[o].runner_up = (int)v;
              why[o].runner_up_cost = c;
            }
        }
      vals[o] = solution[o];
    }
  return why;
}

static PlannerPlan *
plan_from (Problem *p, const guint *vals, const Why *why, GError **error)
{
  g_autoptr (PlannerPlan) plan = planner_plan_new (p->graph, p->mesh, p->hw);
  planner_plan_set_constants (plan, planner_plan_get_constants (p->seed));
  const GPtrArray *pins = planner_plan_get_pins (p->seed);
  for (guint i = 0; pins && i < pins->len; i++)
    planner_plan_add_pin_text (plan, g_ptr_array_index ((GPtrArray *)pins, i));
  planner_plan_set_policy (plan, planner_plan_get_policy (p->seed));
  for (guint o = 0; o < p->n_ops; o++)
    {
      const PlannerOpPlan *seed = planner_plan_get_op (p->seed, o);
      PlannerOpPlan *op = planner_plan_get_op (plan, o);
      if (seed->decision == PLANNER_DECIDED_PINNED)
        {
          *op = *seed;
          continue;
        }
      op->strategy = p->dom[o]->s[vals[o]];
      op->decision = PLANNER_DECIDED_PROPAGATED;
      op->pin = -1;
      op->has_out_layouts = FALSE;
      /* One step per chosen op, in op order: chosen among its candidates by the solve, from
       * no one neighbour. */
      PlannerTraceStep step = { 0 };
      step.index = planner_plan_get_n_trace_steps (plan);
      step.op = o;
      step.strategy = op->strategy;
      step.from_op = -1;
      step.n_candidates = p->dom[o]->n;
      if (why)
        {
          step.edge_cost_s = why[o].cost;
          step.has_runner_up = why[o].runner_up >= 0;
          if (step.has_runner_up)
            {
              step.runner_up = p->dom[o]->s[why[o].runner_up];
              step.runner_up_cost_s = MIN (why[o].runner_up_cost, INFEASIBLE);
            }
        }
      op->trace_step = (int)step.index;
      planner_plan_append_trace_step (plan, &step);
    }
  if (!planner_plan_finish (plan, p->allow_tied, error))
    return NULL;
  return g_steal_pointer (&plan);
}

double
planner_solve_objective (PlannerPlan *plan, double sync_weight)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), 0);

  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  /* The parameter-gradient AllReduces of semantics.md 7, each parameter its share of the
   * buckets (grad_sync_time). */
  double sync = 0, optimizer = 0;
  for (guint i = 0; i < planner_graph_get_n_tensors (graph); i++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (graph, i);
      if (x->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      const PlannerLayout *layout = planner_plan_get_tensor_layout (plan, i);
      guint32 users = 0;
      for (guint c = 0; c < x->consumers->len; c++)
        users |= planner_strategy_axis_mask (
            &planner_plan_get_op (plan, g_array_index (x->consumers, PlannerUse, c).op)->strategy);
      guint32 axes = users & ~planner_layout_split_mask (layout) & ~layout->partial;
      gint64 local[PLANNER_MAX_RANK];
      guint64 bytes = planner_dtype_size (x->dtype);
      planner_layout_local_shape (layout, mesh, x->shape, local);
      for (guint d = 0; d < x->rank; d++)
        bytes *= (guint64)local[d];
      sync += grad_sync_time (plan, axes, bytes);
      optimizer += optimizer_time (plan, x, layout, bytes, axes);
    }
  return t->breakdown.forward + t->breakdown.backward + t->comm_time_s + t->backward_comm_time_s
         + sync_weight * sync + optimizer;
}

PlannerPlan *
planner_solve (PlannerPlan *seed, const PlannerSolveOptions *options, PlannerSolveReport *report,
               GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (seed), NULL);

  gint64 start = g_get_monotonic_time ();
  PlannerSolveOptions defaults;
  if (options == NULL)
    {
      planner_solve_options_init (&defaults);
      options = &defaults;
    }
  PlannerSolveReport local_report;
  if (report == NULL)
    report = &local_report;
  memset (report, 0, sizeof *report);

  Problem p = { 0 };
  p.seed = seed;
  p.graph = planner_plan_get_graph (seed);
  p.mesh = planner_plan_get_mesh (seed);
  p.hw = planner_plan_get_hardware (seed);
  p.options = options;
  p.n_ops = planner_graph_get_n_ops (p.graph);
  p.scratch = planner_plan_new (p.graph, p.mesh, p.hw);
  planner_plan_set_constants (p.scratch, planner_plan_get_constants (seed));
  p.redist = planner_plan_get_redistributor (p.scratch);
  /* A seed that redistributes a tied parameter was allowed to. */
  for (guint r = 0; r < planner_plan_get_n_redistributions (seed); r++)
    if (planner_graph_get_tensor (p.graph, planner_plan_get_redistribution (seed, r)->tensor)->kind
        == PLANNER_TENSOR_PARAMETER)
      p.allow_tied = TRUE;

  g_autoptr (PlannerPlan) best = NULL;
  double best_objective = INFINITY, bound = -INFINITY;
  g_autofree guint *best_vals = NULL;
  gboolean ok = problem_init (&p, error);
  if (ok)
    find_blocks (&p);
  for (guint o = 0; ok && o < p.n_ops; o++)
    if (p.dom[o]->n > 1)
      report->n_vars++;
  for (guint b = 0; ok && b < p.blocks->len; b++)
    {
      report->n_blocks++;
      if (((Block *)g_ptr_array_index (p.blocks, b))->representative < 0)
        report->n_block_kinds++;
    }

  /* Lambda 0, then (when that plan does not fit) multipliers up and bisection. */
  double lambda_lo = 0, lambda_hi = -1, lambda = 0;
  guint64 last_memory = G_MAXUINT64;
  guint stalled = 0;
  double scale = 1e-12;
  gboolean proven = FALSE;
  for (guint round = 0; ok && round < 40; round++)
    {
      Round r = { 0 };
      double minimum;
      p.lambda = lambda;
      ok = round_run (&p, &r, &minimum, error);
      g_autoptr (PlannerPlan) plan = ok ? plan_from (&p, r.vals, NULL, error) : NULL;
      g_autofree guint *vals = ok ? g_memdup2 (r.vals, sizeof (guint) * p.n_ops) : NULL;
      round_clear (&r);
      report->n_solves++;
      if (plan == NULL)
        {
          ok = FALSE;
          break;
        }
      double objective = planner_solve_objective (plan, options->sync_weight);
      g_debug ("round %u: lambda %g, minimum %.9g, objective %.9g, memory %" G_GUINT64_FORMAT,
               round, lambda, minimum, objective,
               planner_plan_get_totals (plan)->memory_per_device_bytes);
      double dual = minimum - lambda * (double)options->memory_limit;
      if (options->memory_limit == 0)
        dual = minimum;
      bound = MAX (bound, dual);
      guint64 memory = planner_plan_get_totals (plan)->memory_per_device_bytes;
      gboolean fits = options->memory_limit == 0 || memory <= options->memory_limit;
      if (fits && objective < best_objective)
        {
          best_objective = objective;
          g_clear_object (&best);
          best = g_steal_pointer (&plan);
          g_free (best_vals);
          best_vals = g_steal_pointer (&vals);
        }
      if (fits && lambda == 0)
        {
          proven = TRUE; /* the unconstrained minimum fits */
          break;
        }
      if (fits)
        lambda_hi = lambda;
      else
        lambda_lo = lambda;
      /* The first multiplier where memory weighs a thousandth of time in the objective;
       * once it weighs as much and raising it no longer lowers the memory, nothing
       * smaller is there to find. */
      if (round == 0)
        scale = memory ? objective / (double)memory : 1e-12;
      if (!fits && lambda_hi < 0 && lambda >= scale && memory >= last_memory && ++stalled >= 3)
        break;
      if (memory < last_memory)
        stalled = 0;
      last_memory = memory;
      if (lambda_hi < 0)
        lambda = lambda == 0 ? 1e-3 * scale : lambda * 4;
      else if (round > 2 && lambda_hi - lambda_lo < 1e-3 * lambda_hi)
        break;
      else
        lambda = 0.5 * (lambda_lo + lambda_hi);
      if (best && best_objective - bound <= 1e-9 * best_objective)
        break;
    }
  /* The plan once more, each chosen op with its runner-up. */
  if (ok && best)
    {
      g_autofree Why *why = explain (&p, best_vals);
      g_autoptr (PlannerPlan) explained = plan_from (&p, best_vals, why, error);
      ok = explained != NULL;
      g_clear_object (&best);
      best = g_steal_pointer (&explained);
    }
  report->table_cells = p.cells;
  problem_clear (&p);
  g_object_unref (p.scratch);
  if (!ok)
    return NULL;

  report->seed_objective_s = planner_solve_objective (seed, options->sync_weight);
  if (best == NULL)
    {
      /* Nothing found fits: the plan of least memory among those tried is not kept. */
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_CONFLICT,
                   "exact solve: no plan found within the memory limit of %" G_GUINT64_FORMAT
                   " bytes per device (lower bound of the step %.6g s); raise the limit or use "
                   "more devices",
                   options->memory_limit, bound);
      return NULL;
    }
  report->objective_s = best_objective;
  report->bound_s = MIN (bound, best_objective);
  report->gap = best_objective > 0 ? (best_objective - report->bound_s) / best_objective : 0;
  report->optimal = proven || report->gap <= 1e-9;
  if (report->optimal)
    report->gap = 0;
  report->fits = TRUE;
  report->solve_ms = (double)(g_get_monotonic_time () - start) / 1000.0;
  planner_plan_set_propagate_ms (best, report->solve_ms);
  return g_steal_pointer (&best);
}
