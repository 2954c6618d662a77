#define G_LOG_DOMAIN "executor-trial"

#include "config.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "executor-error.h"
#include "executor-op-util.h"
#include "executor-redistribute.h"
#include "executor-trial.h"
#include "executor-pipeline.h"

/* A plan is lowered to a program: values (one local shard shape each, the same on every
 * device) and instructions (an op, or one step of a redistribution), in execution order.
 * The reference is the same program builder on a one-device mesh with nothing split. */

typedef struct
{
  guint rank;
  gint64 global[PLANNER_MAX_RANK];
  gint64 local[PLANNER_MAX_RANK];
  PlannerLayout layout;
  PlannerDType dtype; /* storage */
  gsize bytes;
  int tensor;         /* the graph tensor it holds a view of; -1 for scratch */
  gboolean compare;
  gboolean source;    /* a parameter or graph input: uploaded, not computed */
  int stage;          /* pipelined: the stage whose devices compute it (-1: every device) */
} Value;

typedef enum
{
  INSTR_OP,
  INSTR_STEP,
  INSTR_SEND, /* pipelined: in_value from stage from_stage to the others (executor-pipeline.h) */
} InstrKind;

typedef struct
{
  InstrKind kind;
  guint slot;          /* timing slot: op i is i, redistribution r is n_ops + r */
  /* INSTR_OP */
  guint op;
  PlannerStrategy strategy;
  guint in_values[PLANNER_MAX_OPERANDS];
  guint out_values[PLANNER_MAX_OPERANDS];
  guint32 out_partial; /* partial axes of the outputs: the bias goes on coordinate 0 */
  /* INSTR_STEP */
  int redist;
  guint step_index;
  PlannerRedistStep step;
  PlannerLayout before;
  guint in_value, out_value;
  int scratch_a, scratch_b;
  /* Pipelined programs (Program.stages.axis >= 0): the stage that runs it, and for a send
   * the stage it comes from. */
  int stage;
  guint from_stage;
} Instr;

typedef struct
{
  PlannerGraph *graph;
  PlannerMesh mesh;
  GArray *values;       /* Value; value t is tensor t as stored */
  GArray *instrs;       /* Instr */
  guint n_ops;
  guint n_redists;
  guint *output_values; /* per graph output: the value compared with the reference */
  ExecutorPipelineStages stages; /* axis -1: not pipelined */
} Program;

static void
program_clear (Program *p)
{
  g_clear_pointer (&p->values, g_array_unref);
  g_clear_pointer (&p->instrs, g_array_unref);
  g_clear_pointer (&p->output_values, g_free);
  executor_pipeline_stages_clear (&p->stages);
}

static guint
add_value (Program *p, int tensor, const PlannerLayout *layout)
{
  const PlannerTensor *t = planner_graph_get_tensor (p->graph, tensor);
  Value v = { 0 };
  v.rank = t->rank;
  memcpy (v.global, t->shape, sizeof v.global);
  v.layout = *layout;
  planner_layout_local_shape (layout, &p->mesh, t->shape, v.local);
  v.dtype = executor_storage_dtype (t->dtype);
  gint64 n = 1;
  for (guint d = 0; d < v.rank; d++)
    n *= v.local[d];
  v.bytes = (gsize) n * executor_storage_size (v.dtype);
  v.tensor = tensor;
  v.compare = TRUE;
  g_array_append_val (p->values, v);
  return p->values->len - 1;
}

static int
add_scratch (Program *p, gsize bytes)
{
  if (bytes == 0)
    return -1;
  Value v = { 0 };
  v.bytes = bytes;
  v.tensor = -1;
  g_array_append_val (p->values, v);
  return (int) p->values->len - 1;
}

static Value *
value_at (Program *p, guint v)
{
  return &g_array_index (p->values, Value, v);
}

static char *
redist_name (PlannerGraph *g, const PlannerRedistribution *r)
{
  const PlannerTensor *t = planner_graph_get_tensor (g, r->tensor);
  if (r->consumer < 0)
    return g_strdup_printf ("%s -> output", t->name);
  const PlannerOp *op = planner_graph_get_op (g, (guint) r->consumer);
  if (r->producer_side)
    return g_strdup_printf ("%s -> out_strategy of %s", t->name, op->name);
  return g_strdup_printf ("%s -> %s", t->name, op->name);
}

/* Emits the steps of redistribution @ri from value @from; the last step writes @final when
 * it is >= 0. Returns the value holding the result. */
static gboolean
emit_redistribution (Program *p, guint ri, const PlannerRedistribution *r, guint from,
                     int final, guint *result, GError **error)
{
  g_autofree char *what = redist_name (p->graph, r);
  PlannerLayout cur = value_at (p, from)->layout;
  const PlannerTensor *t = planner_graph_get_tensor (p->graph, r->tensor);

  if (!planner_layout_equal (&cur, &r->from))
    {
      g_autofree char *have = planner_layout_to_string (&cur, &p->mesh);
      g_autofree char *said = planner_layout_to_string (&r->from, &p->mesh);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                   "redistribution %s starts from %s, but the tensor is laid out as %s", what,
                   said, have);
      return FALSE;
    }
  guint v = from;
  for (guint s = 0; s < r->n_steps; s++)
    {
      g_autofree char *where = g_strdup_printf ("redistribution %s, step %u", what, s + 1);
      PlannerLayout after;
      if (!executor_redist_step_check (&r->steps[s], &cur, &p->mesh, where, &after, error))
        return FALSE;
      Instr in = { 0 };
      in.kind = INSTR_STEP;
      in.slot = p->n_ops + ri;
      in.redist = (int) ri;
      in.step_index = s;
      in.step = r->steps[s];
      in.before = cur;
      in.in_value = v;
      in.out_value = (s + 1 == r->n_steps && final >= 0) ? (guint) final
                                                         : add_value (p, r->tensor, &after);
      gsize scratch = executor_redist_step_scratch_bytes (&r->steps[s], &cur, &p->mesh,
                                                          t->shape, t->rank,
                                                          executor_storage_dtype (t->dtype));
      in.scratch_a = add_scratch (p, scratch);
      in.scratch_b = add_scratch (p, scratch);
      g_array_append_val (p->instrs, in);
      v = in.out_value;
      cur = after;
    }
  if (!planner_layout_equal (&cur, &r->to) || (final >= 0 && v != (guint) final))
    {
      g_autofree char *got = planner_layout_to_string (&cur, &p->mesh);
      g_autofree char *want = planner_layout_to_string (&r->to, &p->mesh);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                   "redistribution %s ends as %s, but it must give %s", what, got, want);
      return FALSE;
    }
  *result = v;
  return TRUE;
}

static gboolean
program_build (Program *p, PlannerGraph *g, const PlannerMesh *mesh,
               const PlannerStrategy *strategies, const PlannerLayout *tensor_layouts,
               const PlannerRedistribution *const *redists, guint n_redists, GError **error)
{
  guint n_tensors = planner_graph_get_n_tensors (g);
  p->graph = g;
  p->mesh = *mesh;
  p->n_ops = planner_graph_get_n_ops (g);
  p->n_redists = n_redists;
  p->values = g_array_new (FALSE, TRUE, sizeof (Value));
  p->instrs = g_array_new (FALSE, TRUE, sizeof (Instr));
  p->stages.axis = -1;

  g_autofree int *results = g_new (int, MAX (n_redists, 1));
  for (guint r = 0; r < n_redists; r++)
    results[r] = -1;
  for (guint t = 0; t < n_tensors; t++)
    {
      add_value (p, (int) t, &tensor_layouts[t]);
      value_at (p, t)->source = planner_graph_get_tensor (g, t)->producer < 0;
    }

  for (guint i = 0; i < p->n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (g, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS], out[PLANNER_MAX_OPERANDS];
      guint inputs[PLANNER_MAX_OPERANDS];
      planner_strategy_layouts (&strategies[i], &op->rule, mesh, in, out);

      for (guint k = 0; k < op->n_inputs; k++)
        inputs[k] = op->inputs[k];
      for (guint r = 0; r < n_redists; r++)
        if (redists[r]->consumer == (int) i && !redists[r]->producer_side)
          {
            guint slot = redists[r]->slot;
            if (slot >= op->n_inputs || op->inputs[slot] != redists[r]->tensor)
              {
                g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                             "a redistribution names input %u of %s, which is not its tensor",
                             slot, op->name);
                return FALSE;
              }
            if (!emit_redistribution (p, r, redists[r], redists[r]->tensor, -1, &inputs[slot],
                                      error))
              return FALSE;
            results[r] = (int) inputs[slot];
          }
      /* A redistribution serves every later consumer that needs the same layout of its
       * tensor (planner_plan_find_redistribution): they reuse its result. */
      for (guint k = 0; k < op->n_inputs; k++)
        for (guint r = 0; r < n_redists; r++)
          if (!planner_layout_equal (&value_at (p, inputs[k])->layout, &in[k])
              && results[r] >= 0 && redists[r]->tensor == op->inputs[k]
              && !redists[r]->producer_side && planner_layout_equal (&redists[r]->to, &in[k]))
            inputs[k] = (guint) results[r];
      for (guint k = 0; k < op->n_inputs; k++)
        if (!planner_layout_equal (&value_at (p, inputs[k])->layout, &in[k]))
          {
            const PlannerTensor *t = planner_graph_get_tensor (g, op->inputs[k]);
            g_autofree char *have = planner_layout_to_string (&value_at (p, inputs[k])->layout,
                                                             mesh);
            g_autofree char *need = planner_layout_to_string (&in[k], mesh);
            g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                         "%s: input %u (%s) is laid out as %s but its strategy needs %s, and "
                         "the plan lists no redistribution that makes it so",
                         op->name, k, t->name, have, need);
            return FALSE;
          }

      Instr ins = { 0 };
      ins.kind = INSTR_OP;
      ins.slot = i;
      ins.op = i;
      ins.strategy = strategies[i];
      memcpy (ins.in_values, inputs, sizeof inputs);
      ins.out_partial = op->n_outputs ? out[0].partial : 0;
      int producer_redist[PLANNER_MAX_OPERANDS];
      for (guint k = 0; k < op->n_outputs; k++)
        {
          producer_redist[k] = -1;
          for (guint r = 0; r < n_redists; r++)
            if (redists[r]->consumer == (int) i && redists[r]->producer_side
                && redists[r]->slot == k)
              producer_redist[k] = (int) r;
          guint t = op->outputs[k];
          if (producer_redist[k] >= 0)
            ins.out_values[k] = add_value (p, (int) t, &out[k]);
          else if (planner_layout_equal (&tensor_layouts[t], &out[k]))
            ins.out_values[k] = t;
          else
            {
              g_autofree char *have = planner_layout_to_string (&out[k], mesh);
              g_autofree char *said = planner_layout_to_string (&tensor_layouts[t], mesh);
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                           "%s: its strategy leaves output %u as %s but the plan stores it "
                           "as %s with no redistribution in between",
                           op->name, k, have, said);
              return FALSE;
            }
        }
      g_array_append_val (p->instrs, ins);
      for (guint k = 0; k < op->n_outputs; k++)
        if (producer_redist[k] >= 0)
          {
            guint result;
            guint r = (guint) producer_redist[k];
            if (!emit_redistribution (p, r, redists[r], ins.out_values[k],
                                      (int) op->outputs[k], &result, error))
              return FALSE;
          }
    }

  const GArray *outputs = planner_graph_get_outputs (g);
  p->output_values = g_new0 (guint, MAX (outputs->len, 1));
  for (guint o = 0; o < outputs->len; o++)
    {
      guint t = g_array_index (outputs, guint, o);
      p->output_values[o] = t;
      for (guint r = 0; r < n_redists; r++)
        if (redists[r]->consumer < 0 && redists[r]->tensor == t
            && !emit_redistribution (p, r, redists[r], t, -1, &p->output_values[o], error))
          return FALSE;
    }
  return TRUE;
}

/* ---- host data ---- */

/* Copies the block at @offset of @local shape out of a row-major global array (or into it,
 * accumulating, when @accumulate). */
static void
block_copy (guint8 *global, const gint64 *gshape, guint rank, const gint64 *offset,
            const gint64 *local, gsize es, guint8 *block, gboolean to_global)
{
  if (rank == 0)
    {
      if (to_global)
        memcpy (global, block, es);
      else
        memcpy (block, global, es);
      return;
    }
  gint64 gstride[PLANNER_MAX_RANK], s = 1, idx[PLANNER_MAX_RANK] = { 0 };
  for (int d = (int) rank - 1; d >= 0; d--)
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
        memcpy (global + off * es, block + r * row * es, row * es);
      else
        memcpy (block + r * row * es, global + off * es, row * es);
      for (int d = (int) rank - 2; d >= 0; d--)
        {
          if (++idx[d] < local[d])
            break;
          idx[d] = 0;
        }
    }
}

/* The local shard of a source value on one device. A partial layout (a test feeding an op
 * partial inputs) gets unequal shares that sum to the whole. */
static void
make_shard (const Value *v, const PlannerMesh *mesh, const guint *coords, guint8 *global,
            guint8 *out)
{
  gint64 offset[PLANNER_MAX_RANK];
  planner_layout_local_offset (&v->layout, mesh, v->global, coords, offset);
  block_copy (global, v->global, v->rank, offset, v->local, executor_storage_size (v->dtype),
              out, FALSE);
  if (v->layout.partial && v->dtype == PLANNER_DTYPE_F32)
    {
      guint n, m = executor_partial_member (mesh, v->layout.partial, coords, &n);
      float w = (float) (m + 1) / (float) (n * (n + 1) / 2);
      float *f = (float *) out;
      for (gsize i = 0; i < v->bytes / 4; i++)
        f[i] *= w;
    }
}

/* ---- running ---- */

typedef struct
{
  Program *prog;
  ExecutorBackend *backend;
  const ExecutorTrialOptions *options;
  GCancellable *cancellable;
  guint n_passes;
  guint timed_from;       /* first timed pass */
  guint8 **sources;       /* per tensor: global host data, NULL for activations */
  guint8 ***downloads;    /* [value][device] after the first pass */
  double *times;          /* [timed pass][instr][device] */
  const char *label;
  double progress_base, progress_span;
} RunCtx;

static gboolean
run_instr (ExecutorDevice *dev, RunCtx *ctx, const Instr *in, ExecutorBuffer **bufs,
           GError **error)
{
  Program *p = ctx->prog;
  if (in->kind == INSTR_SEND)
    {
      const Value *v = value_at (p, in->in_value);
      return executor_pipeline_send (dev, &p->stages, in->from_stage, bufs[in->in_value],
                                     bufs[in->scratch_a],
                                     v->bytes / executor_storage_size (v->dtype), v->dtype, error);
    }
  if (in->kind == INSTR_STEP)
    {
      const Value *v = value_at (p, in->in_value);
      return executor_redist_step_run (dev, &in->step, &in->before, v->global, v->rank,
                                       v->dtype, bufs[in->in_value], bufs[in->out_value],
                                       in->scratch_a >= 0 ? bufs[in->scratch_a] : NULL,
                                       in->scratch_b >= 0 ? bufs[in->scratch_b] : NULL, error);
    }
  const PlannerOp *op = planner_graph_get_op (p->graph, in->op);
  ExecutorOpCall call = { 0 };
  call.op = op;
  call.rule = &op->rule;
  call.strategy = &in->strategy;
  call.n_inputs = op->n_inputs;
  call.n_outputs = op->n_outputs;
  const guint *values[2] = { in->in_values, in->out_values };
  ExecutorTensorArg *args[2] = { call.inputs, call.outputs };
  guint counts[2] = { op->n_inputs, op->n_outputs };
  for (guint side = 0; side < 2; side++)
    for (guint k = 0; k < counts[side]; k++)
      {
        const Value *v = value_at (p, values[side][k]);
        args[side][k].rank = v->rank;
        memcpy (args[side][k].shape, v->local, sizeof v->local);
        args[side][k].dtype = v->dtype;
        args[side][k].buffer = bufs[values[side][k]];
      }
  planner_strategy_factor_offsets (&in->strategy, &op->rule, &p->mesh, dev->coords,
                                   call.factor_offsets);
  call.add_bias = TRUE;
  for (guint a = 0; a < p->mesh.n_axes; a++)
    if ((in->out_partial & (1u << a)) && dev->coords[a] != 0)
      call.add_bias = FALSE;
  return executor_device_run_op (dev, &call, error);
}

static char *
instr_label (Program *p, const Instr *in)
{
  if (in->kind == INSTR_OP)
    return g_strdup (planner_graph_get_op (p->graph, in->op)->name);
  return planner_redist_step_describe (&in->step, &p->mesh);
}

static gboolean
device_passes (ExecutorDevice *dev, RunCtx *ctx, ExecutorBuffer **bufs, GError **error)
{
  Program *p = ctx->prog;
  guint n_instrs = p->instrs->len, n_dev = ctx->backend->n_devices;

  for (guint t = 0; t < p->values->len; t++)
    {
      Value *v = value_at (p, t);
      if (!(bufs[t] = executor_device_buffer_new (dev, MAX (v->bytes, 1), error)))
        return FALSE;
      if (v->source)
        {
          g_autofree guint8 *shard = g_malloc (MAX (v->bytes, 1));
          make_shard (v, &p->mesh, dev->coords, ctx->sources[t], shard);
          if (!executor_device_upload (dev, bufs[t], shard, v->bytes, error))
            return FALSE;
        }
    }

  for (guint pass = 0; pass < ctx->n_passes; pass++)
    {
      gboolean timed = pass >= ctx->timed_from;
      for (guint i = 0; i < n_instrs; i++)
        {
          const Instr *in = &g_array_index (p->instrs, Instr, i);
          if (g_cancellable_set_error_if_cancelled (ctx->cancellable, error))
            return FALSE;
          if (dev->index == 0 && ctx->options->progress)
            {
              g_autofree char *what = instr_label (p, in);
              g_autofree char *msg = g_strdup_printf ("%s: %s", ctx->label, what);
              double f = ((double) pass * n_instrs + i) / ((double) ctx->n_passes * n_instrs);
              ctx->options->progress (ctx->progress_base + ctx->progress_span * f, msg,
                                      ctx->options->progress_data);
            }
          /* Every device starts each timed instruction together, so a collective's time is
           * its own and not the wait for a slower device. */
          if (timed && !executor_device_barrier (dev, error))
            return FALSE;
          executor_device_timer_begin (dev);
          /* Pipelined: a stage's devices run its instructions only (and every send). */
          gboolean mine = p->stages.axis < 0 || in->kind == INSTR_SEND
                          || dev->coords[p->stages.axis] == (guint)in->stage;
          if (mine && !run_instr (dev, ctx, in, bufs, error))
            return FALSE;
          double t = executor_device_timer_end (dev);
          if (timed)
            ctx->times[((gsize) (pass - ctx->timed_from) * n_instrs + i) * n_dev + dev->index]
              = t;
        }
      if (pass == 0)
        for (guint t = 0; t < p->values->len; t++)
          {
            Value *v = value_at (p, t);
            if (!v->compare)
              continue;
            ctx->downloads[t][dev->index] = g_malloc (MAX (v->bytes, 1));
            if (!executor_device_download (dev, bufs[t], ctx->downloads[t][dev->index],
                                           v->bytes, error))
              return FALSE;
          }
    }
  return TRUE;
}

static gboolean
device_main (ExecutorDevice *dev, gpointer data, GError **error)
{
  RunCtx *ctx = data;
  guint n = ctx->prog->values->len;
  g_autofree ExecutorBuffer **bufs = g_new0 (ExecutorBuffer *, n);
  gboolean ok = device_passes (dev, ctx, bufs, error);
  for (guint t = 0; t < n; t++)
    executor_device_buffer_free (dev, bufs[t]);
  return ok;
}

static void
ctx_clear (RunCtx *ctx)
{
  if (ctx->downloads)
    {
      for (guint t = 0; t < ctx->prog->values->len; t++)
        {
          for (guint d = 0; d < ctx->backend->n_devices; d++)
            g_free (ctx->downloads[t][d]);
          g_free (ctx->downloads[t]);
        }
      g_free (ctx->downloads);
    }
  g_free (ctx->times);
}

static gboolean
ctx_run (RunCtx *ctx, GError **error)
{
  Program *p = ctx->prog;
  guint n_dev = ctx->backend->n_devices;
  ctx->downloads = g_new0 (guint8 **, p->values->len);
  for (guint t = 0; t < p->values->len; t++)
    ctx->downloads[t] = g_new0 (guint8 *, n_dev);
  guint timed = ctx->n_passes - ctx->timed_from;
  ctx->times = g_new0 (double, MAX ((gsize) timed * p->instrs->len * n_dev, 1));
  return executor_backend_run (ctx->backend, device_main, ctx, error);
}

/* ---- comparison ---- */

typedef struct
{
  double max_abs;
  double ref_scale; /* max |reference| */
} Diff;

static double
elem (const guint8 *data, PlannerDType dtype, gint64 i)
{
  return dtype == PLANNER_DTYPE_I64 ? (double) ((const gint64 *) data)[i]
                                    : (double) ((const float *) data)[i];
}

/* Compares every device's shard of @v with the reference, after summing the members of a
 * partial group. Every replica is checked, not only one. */
static Diff
compare_value (Program *p, const Value *v, guint8 **shards, const guint8 *ref)
{
  Diff diff = { 0, 0 };
  gint64 n_global = executor_shape_numel (v->global, v->rank),
         n_local = executor_shape_numel (v->local, v->rank);
  for (gint64 i = 0; i < n_global; i++)
    diff.ref_scale = MAX (diff.ref_scale, fabs (elem (ref, v->dtype, i)));

  guint n_dev = (guint)planner_mesh_n_devices (&p->mesh);
  gsize es = executor_storage_size (v->dtype);
  g_autofree double *sum = g_new (double, MAX (n_local, 1));
  g_autofree guint8 *expect = g_malloc (MAX (v->bytes, es));
  for (guint d = 0; d < n_dev; d++)
    {
      guint coords[PLANNER_MAX_AXES], n_members;
      planner_mesh_device_coords (&p->mesh, d, coords);
      if (executor_partial_member (&p->mesh, v->layout.partial, coords, &n_members) != 0)
        continue;
      /* Pipelined: only the devices of the stage that computed it hold it. */
      if (p->stages.axis >= 0 && v->stage >= 0 && coords[p->stages.axis] != (guint)v->stage)
        continue;
      memset (sum, 0, sizeof (double) * MAX (n_local, 1));
      for (guint m = 0; m < n_members; m++)
        {
          /* Member m of the group: its coordinates on the partial axes, mixed radix. */
          guint c[PLANNER_MAX_AXES];
          memcpy (c, coords, sizeof c);
          guint rest = m;
          for (int a = (int) p->mesh.n_axes - 1; a >= 0; a--)
            if (v->layout.partial & (1u << a))
              {
                c[a] = rest % p->mesh.sizes[a];
                rest /= p->mesh.sizes[a];
              }
          const guint8 *shard = shards[planner_mesh_device_id (&p->mesh, c)];
          for (gint64 i = 0; i < n_local; i++)
            sum[i] += elem (shard, v->dtype, i);
        }
      gint64 offset[PLANNER_MAX_RANK];
      planner_layout_local_offset (&v->layout, &p->mesh, v->global, coords, offset);
      block_copy ((guint8 *) ref, v->global, v->rank, offset, v->local, es, expect, FALSE);
      for (gint64 i = 0; i < n_local; i++)
        {
          double e = fabs (sum[i] - elem (expect, v->dtype, i));
          if (!(e <= diff.max_abs)) /* NaN counts as the largest error */
            diff.max_abs = isnan (e) ? INFINITY : e;
        }
    }
  return diff;
}

static double
rel_of (Diff d)
{
  if (d.max_abs == 0)
    return 0;
  return d.max_abs / MAX (d.ref_scale, 1e-30);
}

/* ---- inputs ---- */

static double
uniform (GRand *r)
{
  return g_rand_double_range (r, -1.0, 1.0);
}

/* Ids stay inside what their users index: an Embedding's rows, a loss's classes. */
static gint64
id_range (PlannerGraph *g, const PlannerTensor *t)
{
  gint64 range = G_MAXINT64;
  for (guint u = 0; u < t->consumers->len; u++)
    {
      const PlannerUse *use = &g_array_index (t->consumers, PlannerUse, u);
      const PlannerOp *op = planner_graph_get_op (g, use->op);
      if (op->type == PLANNER_OP_EMBEDDING && use->slot == 0)
        range = MIN (range, planner_graph_get_tensor (g, op->inputs[1])->shape[0]);
      else if (op->type == PLANNER_OP_CROSS_ENTROPY && use->slot == 1)
        {
          const PlannerTensor *logits = planner_graph_get_tensor (g, op->inputs[0]);
          range = MIN (range, logits->shape[logits->rank - 1]);
        }
    }
  return range == G_MAXINT64 ? 16 : range;
}

/* Scales that keep activations near unit size: weights by 1/sqrt(fan-in) (the rule's
 * reduction factors on that operand), norm scales near 1, biases small. */
static double
param_scale (PlannerGraph *g, const PlannerTensor *t, double *offset)
{
  *offset = 0;
  if (t->consumers->len == 0)
    return 1;
  const PlannerUse *use = &g_array_index (t->consumers, PlannerUse, 0);
  const PlannerOp *op = planner_graph_get_op (g, use->op);
  if ((op->type == PLANNER_OP_LAYER_NORM || op->type == PLANNER_OP_RMS_NORM) && use->slot == 1)
    {
      *offset = 1;
      return 0.1;
    }
  if ((op->rule.bias_inputs >> use->slot) & 1
      || (op->type == PLANNER_OP_LAYER_NORM && use->slot == 2))
    return 0.1;
  if (op->type == PLANNER_OP_EMBEDDING)
    return 1;
  double fan_in = 1;
  const PlannerOperandMap *m = &op->rule.inputs[use->slot];
  for (guint d = 0; d < m->rank; d++)
    for (guint k = 0; k < m->n[d]; k++)
      if (op->rule.factors[m->f[d][k]].kind == PLANNER_FACTOR_REDUCTION)
        fan_in *= (double) op->rule.factors[m->f[d][k]].size;
  return fan_in > 1 ? sqrt (3.0 / fan_in) : 1;
}

static void
free_sources (guint8 **sources, guint n)
{
  for (guint i = 0; i < n; i++)
    g_free (sources[i]);
  g_free (sources);
}

/* Global data of each source tensor: @given's where it names the tensor, else seeded random
 * values. */
static guint8 **
make_sources (PlannerGraph *g, guint64 seed, ExecutorTensors *given, GError **error)
{
  guint n = planner_graph_get_n_tensors (g);
  guint8 **sources = g_new0 (guint8 *, n);
  guint32 words[2] = { (guint32) seed, (guint32) (seed >> 32) };
  GRand *r = g_rand_new_with_seed_array (words, 2);
  for (guint i = 0; i < n; i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (g, i);
      if (t->producer >= 0)
        continue;
      gint64 count = executor_shape_numel (t->shape, t->rank);
      const ExecutorHostTensor *h = given ? executor_tensors_lookup (given, t->name) : NULL;
      if (h)
        {
          if (h->dtype != executor_storage_dtype (t->dtype)
              || !executor_shape_is_view_of (h->shape, h->rank, t->shape, t->rank))
            {
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_WEIGHTS,
                           "%s: the given %s tensor of %" G_GINT64_FORMAT
                           " elements does not fit the graph's %s tensor of %" G_GINT64_FORMAT
                           " (%u dims)",
                           t->name, h->dtype == PLANNER_DTYPE_I64 ? "integer" : "float",
                           executor_host_tensor_numel (h),
                           planner_dtype_to_string (t->dtype), count, t->rank);
              g_rand_free (r);
              free_sources (sources, n);
              return NULL;
            }
          sources[i] = g_memdup2 (h->data, (gsize) MAX (count, 1)
                                             * executor_storage_size (h->dtype));
          continue;
        }
      if (executor_storage_dtype (t->dtype) == PLANNER_DTYPE_I64)
        {
          gint64 *ids = g_new (gint64, MAX (count, 1));
          gint64 range = id_range (g, t);
          for (gint64 k = 0; k < count; k++)
            ids[k] = g_rand_int_range (r, 0, (gint32) MIN (range, G_MAXINT32));
          sources[i] = (guint8 *) ids;
          continue;
        }
      float *x = g_new (float, MAX (count, 1));
      double offset = 0, scale = t->kind == PLANNER_TENSOR_PARAMETER
                                   ? param_scale (g, t, &offset)
                                   : 1.0;
      for (gint64 k = 0; k < count; k++)
        x[k] = (float) (offset + scale * uniform (r));
      sources[i] = (guint8 *) x;
    }
  g_rand_free (r);
  return sources;
}

/* ---- results ---- */

/* The graph outputs as global tensors: each device's block put in place (summed over the
 * members of a partial group), once per replica group. */
static ExecutorTensors *
gather_outputs (Program *p, RunCtx *ctx)
{
  ExecutorTensors *out = executor_tensors_new ();
  const GArray *outputs = planner_graph_get_outputs (p->graph);
  guint n_dev = (guint) planner_mesh_n_devices (&p->mesh);
  for (guint o = 0; o < outputs->len; o++)
    {
      const Value *v = value_at (p, p->output_values[o]);
      const PlannerTensor *t = planner_graph_get_tensor (p->graph, v->tensor);
      gsize es = executor_storage_size (v->dtype);
      gint64 n = executor_shape_numel (v->global, v->rank), n_local
                                                            = executor_shape_numel (v->local,
                                                                                    v->rank);
      guint8 *global = g_malloc0 ((gsize) MAX (n, 1) * es);
      guint32 owning = planner_layout_split_mask (&v->layout) | v->layout.partial;
      g_autofree guint8 *block = g_malloc (MAX (v->bytes, es));
      for (guint d = 0; d < n_dev; d++)
        {
          guint coords[PLANNER_MAX_AXES];
          planner_mesh_device_coords (&p->mesh, d, coords);
          gboolean first_replica = TRUE;
          for (guint a = 0; a < p->mesh.n_axes; a++)
            if (!(owning & (1u << a)) && coords[a] != 0
                && !(p->stages.axis == (int)a && v->stage >= 0))
              first_replica = FALSE;
          if (p->stages.axis >= 0 && v->stage >= 0 && coords[p->stages.axis] != (guint)v->stage)
            first_replica = FALSE;
          if (!first_replica)
            continue;
          gint64 offset[PLANNER_MAX_RANK];
          planner_layout_local_offset (&v->layout, &p->mesh, v->global, coords, offset);
          const guint8 *shard = ctx->downloads[p->output_values[o]][d];
          if (v->layout.partial && v->dtype == PLANNER_DTYPE_F32)
            {
              /* Partial sums: read the block as it stands, add the shard, write it back. */
              block_copy (global, v->global, v->rank, offset, v->local, es, block, FALSE);
              for (gint64 i = 0; i < n_local; i++)
                ((float *) block)[i] += ((const float *) shard)[i];
              block_copy (global, v->global, v->rank, offset, v->local, es, block, TRUE);
            }
          else
            block_copy (global, v->global, v->rank, offset, v->local, es, (guint8 *) shard,
                        TRUE);
        }
      executor_tensors_add (out, t->name, v->dtype, v->rank, v->global, global);
    }
  return out;
}

void
executor_trial_options_init (ExecutorTrialOptions *options)
{
  memset (options, 0, sizeof *options);
  options->seed = 1;
  options->warmup = 1;
  options->repeat = 5;
  options->tolerance = 1e-5;
}

static void
clear_output_error (gpointer data)
{
  g_free (((ExecutorOutputError *) data)->name);
}

static void
clear_timing (gpointer data)
{
  ExecutorTiming *t = data;
  g_free (t->name);
  g_free (t->what);
}

void
executor_trial_result_free (ExecutorTrialResult *result)
{
  if (result == NULL)
    return;
  g_free (result->backend);
  g_clear_pointer (&result->outputs, g_array_unref);
  g_clear_pointer (&result->ops, g_array_unref);
  g_clear_pointer (&result->redistributions, g_array_unref);
  g_free (result->mismatch);
  executor_tensors_free (result->outputs_sharded);
  executor_tensors_free (result->outputs_reference);
  g_free (result);
}

static int
cmp_double (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median (double *v, guint n)
{
  if (n == 0)
    return 0;
  qsort (v, n, sizeof (double), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void
fill_timings (ExecutorTrialResult *res, Program *p, RunCtx *ctx, guint timed)
{
  guint n_slots = p->n_ops + p->n_redists, n_instrs = p->instrs->len;
  guint n_dev = ctx->backend->n_devices;
  g_autofree double *per = g_new0 (double, (gsize) MAX (timed, 1) * n_slots);
  /* A slot's time in one pass: its instructions, each as long as its slowest device. */
  for (guint pass = 0; pass < timed; pass++)
    for (guint i = 0; i < n_instrs; i++)
      {
        const Instr *in = &g_array_index (p->instrs, Instr, i);
        double mx = 0;
        if (in->kind == INSTR_SEND)
          continue;
        for (guint d = 0; d < n_dev; d++)
          mx = MAX (mx, ctx->times[((gsize) pass * n_instrs + i) * n_dev + d]);
        per[(gsize) in->slot * MAX (timed, 1) + pass] += mx;
      }
  res->measured_step_s = 0;
  for (guint s = 0; s < n_slots; s++)
    {
      double m = median (per + (gsize) s * MAX (timed, 1), timed);
      ExecutorTiming *t = s < p->n_ops ? &g_array_index (res->ops, ExecutorTiming, s)
                                       : &g_array_index (res->redistributions, ExecutorTiming,
                                                         s - p->n_ops);
      t->measured_s = m;
      res->measured_step_s += m;
    }
}

static void
note_error (ExecutorTrialResult *res, Program *p, guint slot, double rel)
{
  ExecutorTiming *t = slot < p->n_ops ? &g_array_index (res->ops, ExecutorTiming, slot)
                                      : &g_array_index (res->redistributions, ExecutorTiming,
                                                        slot - p->n_ops);
  t->max_rel_error = MAX (t->max_rel_error, rel);
}

/* Every instruction's results against the reference, in execution order; the first that
 * differs beyond the tolerance is named. */
static void
compare_all (ExecutorTrialResult *res, PlannerPlan *plan, Program *p, RunCtx *ctx,
             Program *ref, RunCtx *ref_ctx)
{
  const PlannerMesh *mesh = &p->mesh;
  for (guint i = 0; i < p->instrs->len; i++)
    {
      const Instr *in = &g_array_index (p->instrs, Instr, i);
      guint outs[PLANNER_MAX_OPERANDS], n_outs = 0;
      if (in->kind == INSTR_SEND)
        continue;
      if (in->kind == INSTR_OP)
        for (guint k = 0; k < planner_graph_get_op (p->graph, in->op)->n_outputs; k++)
          outs[n_outs++] = in->out_values[k];
      else
        outs[n_outs++] = in->out_value;
      for (guint k = 0; k < n_outs; k++)
        {
          const Value *v = value_at (p, outs[k]);
          Diff d = compare_value (p, v, ctx->downloads[outs[k]],
                                  ref_ctx->downloads[v->tensor][0]);
          double rel = rel_of (d);
          note_error (res, p, in->slot, rel);
          if (rel <= res->tolerance || res->mismatch != NULL)
            continue;
          const PlannerTensor *t = planner_graph_get_tensor (p->graph, v->tensor);
          g_autofree char *layout = planner_layout_to_string (&v->layout, mesh);
          if (in->kind == INSTR_OP)
            {
              const PlannerOp *op = planner_graph_get_op (p->graph, in->op);
              g_autofree char *st = planner_strategy_describe (&in->strategy, &op->rule, mesh);
              res->first_mismatch_op = (int) in->op;
              res->mismatch = g_strdup_printf (
                "%s (%s, strategy %s): output %s (%s) differs from the reference: max abs "
                "error %.3g, max rel error %.3g > tolerance %.3g",
                op->name, planner_op_type_to_string (op->type), st, t->name, layout, d.max_abs,
                rel, res->tolerance);
            }
          else
            {
              const PlannerRedistribution *r = planner_plan_get_redistribution (plan,
                                                                                (guint) in->redist);
              g_autofree char *name = redist_name (p->graph, r);
              g_autofree char *step = planner_redist_step_describe (&in->step, mesh);
              res->first_mismatch_redistribution = in->redist;
              res->mismatch = g_strdup_printf (
                "redistribution %s, step %u (%s): result %s differs from the reference: max "
                "abs error %.3g, max rel error %.3g > tolerance %.3g",
                name, in->step_index + 1, step, layout, d.max_abs, rel, res->tolerance);
            }
        }
    }

  const GArray *outputs = planner_graph_get_outputs (p->graph);
  for (guint o = 0; o < outputs->len; o++)
    {
      guint vi = p->output_values[o];
      const Value *v = value_at (p, vi);
      Diff d = compare_value (p, v, ctx->downloads[vi], ref_ctx->downloads[v->tensor][0]);
      ExecutorOutputError e = {
        g_strdup (planner_graph_get_tensor (p->graph, v->tensor)->name), d.max_abs, rel_of (d)
      };
      g_array_append_val (res->outputs, e);
      res->max_abs_error = MAX (res->max_abs_error, e.max_abs_error);
      res->max_rel_error = MAX (res->max_rel_error, e.max_rel_error);
    }
  res->passed = res->mismatch == NULL && res->max_rel_error <= res->tolerance;
  (void) ref;
}

/* ---- pipelined programs (issue 18) ---- */

/* Each instruction gets its stage, each value the stage that computes it, and a send goes in
 * before the first instruction of a stage that reads a value another stage holds. */
static gboolean
pipeline_lower (Program *p, PlannerPlan *plan, GError **error)
{
  if (!executor_pipeline_stages (plan, &p->stages, error))
    return FALSE;
  if (p->stages.axis < 0)
    return TRUE;
  if (p->stages.p > 64)
    {
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                   "a trial run takes pipelines of at most 64 stages, not pp=%u", p->stages.p);
      return FALSE;
    }
  guint n_values = p->values->len;
  /* Per value: the stages that hold it (sources: every one), and who computed it. */
  g_autofree guint64 *held = g_new0 (guint64, n_values);
  for (guint v = 0; v < n_values; v++)
    {
      value_at (p, v)->stage = -1;
      if (value_at (p, v)->source)
        held[v] = G_MAXUINT64;
    }
  GArray *out = g_array_new (FALSE, TRUE, sizeof (Instr));
  for (guint i = 0; i < p->instrs->len; i++)
    {
      Instr in = g_array_index (p->instrs, Instr, i);
      guint reads[PLANNER_MAX_OPERANDS], writes[PLANNER_MAX_OPERANDS], n_reads = 0, n_writes = 0;
      if (in.kind == INSTR_OP)
        {
          const PlannerOp *op = planner_graph_get_op (p->graph, in.op);
          in.stage = p->stages.op_stage[in.op];
          for (guint k = 0; k < op->n_inputs; k++)
            reads[n_reads++] = in.in_values[k];
          for (guint k = 0; k < op->n_outputs; k++)
            writes[n_writes++] = in.out_values[k];
        }
      else
        {
          in.stage = p->stages.redist_stage[in.redist];
          reads[n_reads++] = in.in_value;
          writes[n_writes++] = in.out_value;
        }
      guint64 bit = (guint64)1 << MIN ((guint)in.stage, 63u);
      for (guint k = 0; k < n_reads; k++)
        {
          guint v = reads[k];
          if (held[v] & bit)
            continue;
          const Value *val = value_at (p, v);
          if (val->stage < 0)
            {
              g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_INVALID_PLAN,
                           "stage %d reads a value that no stage computes before it", in.stage);
              g_array_unref (out);
              return FALSE;
            }
          Instr send = { 0 };
          send.kind = INSTR_SEND;
          send.slot = in.slot;
          send.stage = in.stage;
          send.from_stage = (guint)val->stage;
          send.in_value = send.out_value = v;
          send.scratch_a = add_scratch (p, MAX (val->bytes, 1) * p->stages.p);
          send.scratch_b = -1;
          g_array_append_val (out, send);
          held[v] |= bit;
        }
      for (guint k = 0; k < n_writes; k++)
        {
          held[writes[k]] = bit;
          value_at (p, writes[k])->stage = in.stage;
        }
      g_array_append_val (out, in);
    }
  g_array_unref (p->instrs);
  p->instrs = out;
  return TRUE;
}

/* ---- memory ---- */

/* The sharded program, exactly as the plan lists it, and the reference: the same graph on
 * one device, nothing split, no redistributions. */
static gboolean
programs_build (PlannerPlan *plan, Program *prog, Program *ref, GError **error)
{
  PlannerGraph *g = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_ops = planner_graph_get_n_ops (g), n_tensors = planner_graph_get_n_tensors (g);
  guint n_redists = planner_plan_get_n_redistributions (plan);

  g_autofree PlannerStrategy *strategies = g_new0 (PlannerStrategy, MAX (n_ops, 1));
  g_autofree PlannerLayout *layouts = g_new0 (PlannerLayout, MAX (n_tensors, 1));
  g_autofree const PlannerRedistribution **redists
      = g_new0 (const PlannerRedistribution *, MAX (n_redists, 1));
  for (guint i = 0; i < n_ops; i++)
    strategies[i] = planner_plan_get_op (plan, i)->strategy;
  for (guint t = 0; t < n_tensors; t++)
    layouts[t] = *planner_plan_get_tensor_layout (plan, t);
  for (guint r = 0; r < n_redists; r++)
    redists[r] = planner_plan_get_redistribution (plan, r);
  if (!program_build (prog, g, mesh, strategies, layouts, redists, n_redists, error))
    {
      program_clear (prog);
      return FALSE;
    }
  if (!pipeline_lower (prog, plan, error))
    {
      program_clear (prog);
      return FALSE;
    }
  /* Results of the sharded run worth comparing: every value that holds a tensor. */
  for (guint t = 0; t < prog->values->len; t++)
    if (!value_at (prog, t)->source)
      value_at (prog, t)->compare = value_at (prog, t)->tensor >= 0;

  PlannerMesh one = { 0 };
  g_autofree PlannerStrategy *none = g_new0 (PlannerStrategy, MAX (n_ops, 1));
  g_autofree PlannerLayout *whole = g_new0 (PlannerLayout, MAX (n_tensors, 1));
  for (guint t = 0; t < n_tensors; t++)
    planner_layout_init_replicated (&whole[t], planner_graph_get_tensor (g, t)->rank);
  program_build (ref, g, &one, none, whole, NULL, 0, NULL);
  return TRUE;
}

/* What ctx_run() allocates: every value is a buffer on every device; the first pass copies
 * the values it compares to the host (device_passes()). */
static void
program_memory (Program *p, guint64 *buffers, guint64 *results)
{
  *buffers = *results = 0;
  for (guint t = 0; t < p->values->len; t++)
    {
      const Value *v = value_at (p, t);
      *buffers += MAX (v->bytes, 1);
      if (v->compare)
        *results += MAX (v->bytes, 1);
    }
}

static void
memory_of (PlannerPlan *plan, Program *prog, Program *ref, ExecutorTrialMemory *memory)
{
  PlannerGraph *g = planner_plan_get_graph (plan);
  memset (memory, 0, sizeof *memory);
  memory->n_devices = (guint)planner_mesh_n_devices (&prog->mesh);
  /* make_sources(): every tensor no op produces, whole, as stored. */
  for (guint t = 0; t < planner_graph_get_n_tensors (g); t++)
    {
      const PlannerTensor *tensor = planner_graph_get_tensor (g, t);
      if (tensor->producer < 0)
        memory->sources_bytes
            += (guint64)MAX (executor_shape_numel (tensor->shape, tensor->rank), 1)
               * executor_storage_size (executor_storage_dtype (tensor->dtype));
    }
  program_memory (ref, &memory->reference_bytes, &memory->reference_results_bytes);
  program_memory (prog, &memory->device_bytes, &memory->device_results_bytes);
}

gboolean
executor_trial_estimate_memory (PlannerPlan *plan, ExecutorTrialMemory *memory, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), FALSE);
  g_return_val_if_fail (memory != NULL, FALSE);
  Program prog = { 0 }, ref = { 0 };
  if (!programs_build (plan, &prog, &ref, error))
    return FALSE;
  memory_of (plan, &prog, &ref, memory);
  program_clear (&prog);
  program_clear (&ref);
  return TRUE;
}

guint64
executor_trial_memory_host_bytes (const ExecutorTrialMemory *m, gboolean buffers_on_host)
{
  g_return_val_if_fail (m != NULL, 0);
  /* The sources and the reference's results stay from start to end; the reference's buffers
   * are freed before the sharded run allocates its own and copies its results out. */
  guint64 sharded = (guint64)m->n_devices * m->device_results_bytes;
  guint64 reference = 0;
  if (buffers_on_host)
    {
      sharded += (guint64)m->n_devices * m->device_bytes;
      reference = m->reference_bytes;
    }
  return m->sources_bytes + m->reference_results_bytes + MAX (reference, sharded);
}

/* A "key: N kB" line of /proc/meminfo, in bytes; 0 when absent. */
static guint64
meminfo_bytes (const char *text, const char *key)
{
  const char *at = strstr (text, key);
  if (at == NULL)
    return 0;
  return g_ascii_strtoull (at + strlen (key), NULL, 10) * 1024;
}

/* What the cgroup of this process may still allocate (cgroup v2), 0 when unlimited. */
static guint64
cgroup_available (void)
{
  g_autofree char *self = NULL;
  if (!g_file_get_contents ("/proc/self/cgroup", &self, NULL, NULL))
    return 0;
  /* "0::/path" on the unified hierarchy. */
  const char *path = strstr (self, "0::");
  if (path == NULL)
    return 0;
  g_autofree char *rel = g_strndup (path + 3, strcspn (path + 3, "\n"));
  g_autofree char *dir = g_build_filename ("/sys/fs/cgroup", rel, NULL);
  g_autofree char *max_path = g_build_filename (dir, "memory.max", NULL);
  g_autofree char *current_path = g_build_filename (dir, "memory.current", NULL);
  g_autofree char *max = NULL, *current = NULL;
  if (!g_file_get_contents (max_path, &max, NULL, NULL)
      || !g_file_get_contents (current_path, &current, NULL, NULL) || g_str_has_prefix (max, "max"))
    return 0;
  guint64 limit = g_ascii_strtoull (max, NULL, 10), used = g_ascii_strtoull (current, NULL, 10);
  return limit > used ? limit - used : 1;
}

guint64
executor_host_memory_available (void)
{
  g_autofree char *text = NULL;
  guint64 available = 0;
  if (g_file_get_contents ("/proc/meminfo", &text, NULL, NULL))
    available = meminfo_bytes (text, "MemAvailable:");
  guint64 cgroup = cgroup_available ();
  if (cgroup > 0 && (available == 0 || cgroup < available))
    available = cgroup;
  return available;
}

/* Refuses, with the figures, a run that would not fit: before anything is allocated, so a
 * plan too large for the machine ends at once instead of growing for minutes. */
static gboolean
check_memory (PlannerPlan *plan, Program *prog, Program *ref, ExecutorBackend *backend,
              ExecutorBackend *ref_backend, GError **error)
{
  ExecutorTrialMemory m;
  memory_of (plan, prog, ref, &m);
  gboolean on_host = executor_backend_uses_host_memory (backend);
  guint64 host_need = executor_trial_memory_host_bytes (&m, on_host);
  guint64 host_have = executor_host_memory_available ();
  if (host_have > 0 && host_need > host_have)
    {
      g_autofree char *need = planner_format_bytes (host_need);
      g_autofree char *have = planner_format_bytes (host_have);
      g_autofree char *sources = planner_format_bytes (m.sources_bytes);
      g_autofree char *reference = planner_format_bytes (m.reference_bytes);
      g_autofree char *device = planner_format_bytes (m.device_bytes + m.device_results_bytes);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_OUT_OF_MEMORY,
                   "the trial run needs about %s of host memory (parameters and inputs %s, the "
                   "unsharded reference %s, %u devices x %s) but %s is available; make the "
                   "model smaller (--batch, --seq, --layers) and plan it again",
                   need, sources, reference, m.n_devices, device, have);
      return FALSE;
    }
  if (on_host)
    return TRUE;
  struct
  {
    ExecutorBackend *backend;
    guint64 need;
    const char *what;
  } devices[] = {
    { ref_backend, m.reference_bytes, "the unsharded reference" },
    { backend, m.device_bytes, "each device of the plan" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (devices); i++)
    {
      guint64 have = executor_backend_memory_available (devices[i].backend);
      if (have == 0 || devices[i].need <= have)
        continue;
      g_autofree char *need = planner_format_bytes (devices[i].need);
      g_autofree char *free_text = planner_format_bytes (have);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_OUT_OF_MEMORY,
                   "%s needs %s of %s memory for the trial's tensors but %s is free; make the "
                   "model smaller (--batch, --seq, --layers) or use more devices",
                   devices[i].what, need, executor_backend_get_name (devices[i].backend),
                   free_text);
      return FALSE;
    }
  return TRUE;
}

ExecutorTrialResult *
executor_trial_run (PlannerPlan *plan, ExecutorBackend *backend,
                    const ExecutorTrialOptions *options, GCancellable *cancellable,
                    GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_return_val_if_fail (backend != NULL, NULL);

  ExecutorTrialOptions defaults;
  if (options == NULL)
    {
      executor_trial_options_init (&defaults);
      options = &defaults;
    }
  PlannerGraph *g = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  if (!planner_mesh_equal (mesh, &backend->mesh))
    {
      g_autofree char *a = planner_mesh_to_string (mesh);
      g_autofree char *b = planner_mesh_to_string (&backend->mesh);
      g_set_error (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE,
                   "the plan's mesh is %s but the backend was made for %s", a, b);
      return NULL;
    }
  guint n_ops = planner_graph_get_n_ops (g), n_tensors = planner_graph_get_n_tensors (g);
  guint n_redists = planner_plan_get_n_redistributions (plan);
  Program prog = { 0 }, ref = { 0 };
  if (!programs_build (plan, &prog, &ref, error))
    return NULL;

  g_autoptr (ExecutorBackend) ref_backend
      = executor_backend_new (executor_backend_get_name (backend), &ref.mesh, error);
  if (ref_backend == NULL || !check_memory (plan, &prog, &ref, backend, ref_backend, error))
    {
      program_clear (&prog);
      program_clear (&ref);
      return NULL;
    }

  guint8 **sources = make_sources (g, options->seed, options->sources, error);
  if (sources == NULL)
    {
      program_clear (&prog);
      program_clear (&ref);
      return NULL;
    }
  for (guint t = 0; t < prog.values->len; t++)
    if (!value_at (&prog, t)->source)
      value_at (&prog, t)->compare = value_at (&prog, t)->tensor >= 0;
  RunCtx ref_ctx = { &ref, ref_backend, options, cancellable, 1, 1, sources, NULL, NULL,
                     "reference", 0.0, 0.1 };
  RunCtx ctx = { &prog, backend, options, cancellable, 1 + options->warmup + options->repeat,
                 1 + options->warmup, sources, NULL, NULL, "sharded", 0.1, 0.9 };

  ExecutorTrialResult *res = NULL;
  if (ctx_run (&ref_ctx, error) && ctx_run (&ctx, error))
    {
      res = g_new0 (ExecutorTrialResult, 1);
      res->backend = g_strdup (executor_backend_get_name (backend));
      res->n_devices = backend->n_devices;
      res->seed = options->seed;
      res->repeat = options->repeat;
      res->tolerance = options->tolerance;
      res->first_mismatch_op = -1;
      res->first_mismatch_redistribution = -1;
      for (guint i = 0; i < prog.instrs->len; i++)
        if (g_array_index (prog.instrs, Instr, i).kind == INSTR_SEND)
          res->pipeline_sends++;
      res->outputs = g_array_new (FALSE, TRUE, sizeof (ExecutorOutputError));
      g_array_set_clear_func (res->outputs, clear_output_error);
      res->ops = g_array_new (FALSE, TRUE, sizeof (ExecutorTiming));
      g_array_set_clear_func (res->ops, clear_timing);
      res->redistributions = g_array_new (FALSE, TRUE, sizeof (ExecutorTiming));
      g_array_set_clear_func (res->redistributions, clear_timing);
      for (guint t = 0; t < n_tensors; t++)
        {
          PlannerDType dt = planner_graph_get_tensor (g, t)->dtype;
          res->reduced_precision_as_f32 |= dt == PLANNER_DTYPE_BF16 || dt == PLANNER_DTYPE_F16;
        }
      for (guint i = 0; i < n_ops; i++)
        {
          const PlannerOp *op = planner_graph_get_op (g, i);
          ExecutorTiming t = { g_strdup (op->name),
                               g_strdup (planner_op_type_to_string (op->type)),
                               planner_plan_get_op (plan, i)->compute_time_s, 0, 0 };
          g_array_append_val (res->ops, t);
          res->estimated_step_s += t.estimated_s;
        }
      for (guint r = 0; r < n_redists; r++)
        {
          const PlannerRedistribution *rd = planner_plan_get_redistribution (plan, r);
          PlannerRedistPath path = { TRUE, rd->n_steps, rd->steps, rd->bytes, rd->time_s };
          ExecutorTiming t = { redist_name (g, rd), planner_redist_path_describe (&path, mesh),
                               rd->time_s, 0, 0 };
          g_array_append_val (res->redistributions, t);
          res->estimated_step_s += t.estimated_s;
        }
      fill_timings (res, &prog, &ctx, options->repeat);
      compare_all (res, plan, &prog, &ctx, &ref, &ref_ctx);
      if (options->keep_outputs)
        {
          res->outputs_sharded = gather_outputs (&prog, &ctx);
          res->outputs_reference = gather_outputs (&ref, &ref_ctx);
        }
    }

  ctx_clear (&ctx);
  ctx_clear (&ref_ctx);
  free_sources (sources, n_tensors);
  program_clear (&prog);
  program_clear (&ref);
  return res;
}

ExecutorTrialResult *
executor_trial_run_named (PlannerPlan *plan, const char *backend_name,
                          const ExecutorTrialOptions *options, GCancellable *cancellable,
                          GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_autoptr (ExecutorBackend) backend
    = executor_backend_new (backend_name, planner_plan_get_mesh (plan), error);
  if (backend == NULL)
    return NULL;
  return executor_trial_run (plan, backend, options, cancellable, error);
}

/* One member each. JSON has no infinity or NaN: a non-finite error is written as null, as
 * is a NULL string. */
static void
add_double (JsonBuilder *b, const char *member, double v)
{
  json_builder_set_member_name (b, member);
  if (isfinite (v))
    json_builder_add_double_value (b, v);
  else
    json_builder_add_null_value (b);
}

static void
add_string (JsonBuilder *b, const char *member, const char *v)
{
  json_builder_set_member_name (b, member);
  if (v)
    json_builder_add_string_value (b, v);
  else
    json_builder_add_null_value (b);
}

static void
add_int (JsonBuilder *b, const char *member, gint64 v)
{
  json_builder_set_member_name (b, member);
  json_builder_add_int_value (b, v);
}

static void
add_bool (JsonBuilder *b, const char *member, gboolean v)
{
  json_builder_set_member_name (b, member);
  json_builder_add_boolean_value (b, v);
}

static void
add_timings (JsonBuilder *b, const char *member, GArray *timings, gboolean is_op)
{
  json_builder_set_member_name (b, member);
  json_builder_begin_array (b);
  for (guint i = 0; i < timings->len; i++)
    {
      const ExecutorTiming *t = &g_array_index (timings, ExecutorTiming, i);
      json_builder_begin_object (b);
      add_string (b, "name", t->name);
      add_string (b, is_op ? "type" : "steps", t->what);
      add_double (b, "estimated_us", t->estimated_s * 1e6);
      add_double (b, "measured_us", t->measured_s * 1e6);
      add_double (b, "max_rel_error", t->max_rel_error);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

char *
executor_trial_result_to_json (const ExecutorTrialResult *res)
{
  g_return_val_if_fail (res != NULL, NULL);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  add_string (b, "backend", res->backend);
  add_int (b, "devices", res->n_devices);
  add_int (b, "seed", (gint64)res->seed);
  add_int (b, "repeat", res->repeat);
  add_double (b, "tolerance", res->tolerance);
  add_bool (b, "reduced_precision_as_f32", res->reduced_precision_as_f32);
  add_bool (b, "passed", res->passed);
  add_double (b, "max_abs_error", res->max_abs_error);
  add_double (b, "max_rel_error", res->max_rel_error);
  add_string (b, "mismatch", res->mismatch);
  add_double (b, "estimated_step_us", res->estimated_step_s * 1e6);
  add_double (b, "measured_step_us", res->measured_step_s * 1e6);
  if (res->pipeline_sends > 0)
    add_int (b, "pipeline_sends", res->pipeline_sends);
  json_builder_set_member_name (b, "outputs");
  json_builder_begin_array (b);
  for (guint i = 0; i < res->outputs->len; i++)
    {
      const ExecutorOutputError *e = &g_array_index (res->outputs, ExecutorOutputError, i);
      json_builder_begin_object (b);
      add_string (b, "name", e->name);
      add_double (b, "max_abs_error", e->max_abs_error);
      add_double (b, "max_rel_error", e->max_rel_error);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  add_timings (b, "ops", res->ops, TRUE);
  add_timings (b, "redistributions", res->redistributions, FALSE);
  json_builder_end_object (b);

  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  return json_generator_to_data (gen, NULL);
}

ExecutorTensors *
executor_trial_sources (PlannerGraph *graph, guint64 seed, ExecutorTensors *given,
                        GError **error)
{
  guint n = planner_graph_get_n_tensors (graph);
  guint8 **sources = make_sources (graph, seed, given, error);
  if (sources == NULL)
    return NULL;
  ExecutorTensors *out = executor_tensors_new ();
  for (guint i = 0; i < n; i++)
    if (sources[i])
      {
        const PlannerTensor *t = planner_graph_get_tensor (graph, i);
        /* A given tensor keeps its own shape (a view of the graph's). */
        const ExecutorHostTensor *h = given ? executor_tensors_lookup (given, t->name) : NULL;
        executor_tensors_add (out, t->name, executor_storage_dtype (t->dtype),
                              h ? h->rank : t->rank, h ? h->shape : t->shape,
                              g_steal_pointer (&sources[i]));
      }
  free_sources (sources, n);
  return out;
}
