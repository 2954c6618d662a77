#define G_LOG_DOMAIN "planner-pipeline"

#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-json.h"
#include "planner-pipeline.h"
#include "planner-request.h"
#include "planner-plan-private.h"

/* Pipeline parallelism: the stage split, what crosses each boundary, and the schedule's cost
 * (planner-pipeline.h). */

void
planner_pipeline_free (PlannerPipeline *pl)
{
  if (pl == NULL)
    return;
  for (guint s = 0; s < pl->n_stages; s++)
    g_free (pl->stages[s].chunks);
  g_free (pl->stages);
  g_free (pl->sends);
  g_free (pl->chunk_first);
  g_free (pl->chunk_last);
  g_free (pl->op_chunk);
  g_free (pl);
}

/* "0-19,20-39" -> the chunks' layer ranges; they must cover 0 .. n_layers - 1 in order. */
static gboolean
parse_split (const char *text, PlannerPipeline *pl, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (text, ",", -1);
  guint n = g_strv_length (parts);
  int next = 0;
  if (n != pl->n_chunks)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "--stages '%s' gives %u layer ranges, the pipeline has %u chunks (pp=%u x %u "
                   "virtual stages); give one range per chunk, e.g. '0-%d,...'",
                   text, n, pl->n_chunks, pl->p, pl->v, (int)(pl->n_layers / pl->n_chunks) - 1);
      return FALSE;
    }
  for (guint c = 0; c < n; c++)
    {
      char *end;
      const char *s = g_strstrip (parts[c]);
      long first = strtol (s, &end, 10), last = first;
      if (end == s || first < 0)
        goto bad;
      if (*end == '-')
        {
          const char *t = end + 1;
          last = strtol (t, &end, 10);
          if (end == t)
            goto bad;
        }
      if (*end != '\0' || first != next || last < first || last >= (long)pl->n_layers)
        {
          g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                       "--stages: range %u '%s' must start at layer %d and end at or before layer "
                       "%u (the model has %u layers 0-%u, each in one range, in order)",
                       c, s, next, pl->n_layers - 1, pl->n_layers, pl->n_layers - 1);
          return FALSE;
        }
      pl->chunk_first[c] = (int)first;
      pl->chunk_last[c] = (int)last;
      next = (int)last + 1;
      continue;
    bad:
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "--stages: range %u '%s' is not FIRST-LAST or a layer number", c, s);
      return FALSE;
    }
  if (next != (int)pl->n_layers)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "--stages '%s' ends at layer %d; the model has %u layers, the last range must "
                   "end at %u",
                   text, next - 1, pl->n_layers, pl->n_layers - 1);
      return FALSE;
    }
  return TRUE;
}

/* The contiguous split of the layers (costs @w, plus @pre on the first chunk and @post on the
 * last) into n_chunks whose largest chunk is smallest (dynamic programming over the end of
 * each chunk). Ties keep the earlier end, so with equal layers the chunks are equal. */
static void
balance_split (PlannerPipeline *pl, const double *w, double pre, double post)
{
  guint L = pl->n_layers, C = pl->n_chunks;
  g_autofree double *prefix = g_new0 (double, L + 1);
  g_autofree double *best = g_new (double, (gsize)(C + 1) * (L + 1));
  g_autofree guint *from = g_new0 (guint, (gsize)(C + 1) * (L + 1));
  for (guint l = 0; l < L; l++)
    prefix[l + 1] = prefix[l] + w[l];
#define BEST(c, l) best[(gsize)(c) * (L + 1) + (l)]
#define FROM(c, l) from[(gsize)(c) * (L + 1) + (l)]
  for (guint c = 0; c <= C; c++)
    for (guint l = 0; l <= L; l++)
      BEST (c, l) = INFINITY;
  BEST (0, 0) = 0;
  for (guint c = 1; c <= C; c++)
    for (guint l = c; l <= L - (C - c); l++)
      for (guint k = c - 1; k < l; k++)
        {
          double cost = prefix[l] - prefix[k] + (k == 0 ? pre : 0) + (l == L ? post : 0);
          double v = MAX (BEST (c - 1, k), cost);
          /* Relative tolerance: FLOP sums of equal layers may round differently. */
          if (v < BEST (c, l) * (1 - 1e-12))
            {
              BEST (c, l) = v;
              FROM (c, l) = k;
            }
        }
  guint l = L;
  for (guint c = C; c >= 1; c--)
    {
      guint k = FROM (c, l);
      pl->chunk_first[c - 1] = (int)k;
      pl->chunk_last[c - 1] = (int)l - 1;
      l = k;
    }
#undef BEST
#undef FROM
}

static double
in_flight (const PlannerPipeline *pl, guint s)
{
  switch (pl->schedule)
    {
    case PLANNER_SCHEDULE_GPIPE:
      return pl->m;
    case PLANNER_SCHEDULE_INTERLEAVED:
      {
        /* Megatron-LM's interleaved 1F1B: warm-up 2 (p - s - 1) + (v - 1) p chunk-micro-batches,
         * plus the one in the steady state; each chunk holds 1/v of the stage. */
        double chunks = 2.0 * (pl->p - s - 1) + (double)(pl->v - 1) * pl->p + 1;
        return MIN (chunks, (double)pl->v * pl->m) / pl->v;
      }
    case PLANNER_SCHEDULE_1F1B:
    default:
      return MIN ((double)(pl->p - s), (double)pl->m);
    }
}

static guint64
local_bytes (PlannerPlan *plan, guint tensor)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerTensor *t = planner_graph_get_tensor (planner_plan_get_graph (plan), tensor);
  const PlannerLayout *layout = planner_plan_get_tensor_layout (plan, tensor);
  gint64 local[PLANNER_MAX_RANK];
  guint64 n = planner_dtype_size (t->dtype);
  planner_layout_local_shape (layout, mesh, t->shape, local);
  for (guint d = 0; d < t->rank; d++)
    n *= (guint64)local[d];
  return n;
}

/* One boundary's point-to-point time for @bytes of @tensor's stored layout: sent whole over the
 * pp link, or as 1/k slices over the intra-node axes the layout does not split, whichever is
 * faster (Narayanan et al. 2021, 4.1, scatter/gather). On an axis the layout replicates, the
 * receiving stage gathers the slices again (an AllGather added here); on an axis it holds
 * partial sums over, the AllReduce the plan already charges for them is done as its two halves,
 * a ReduceScatter before the send and an AllGather after it, at the same cost. */
static void
send_time (PlannerPlan *plan, const PlannerPipeline *pl, guint tensor, PlannerPipelineSend *send)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerHardware *hw = planner_plan_get_hardware (plan);
  const PlannerLink *link = planner_hardware_axis_link (hw, mesh, pl->axis);
  const PlannerLayout *layout = planner_plan_get_tensor_layout (plan, tensor);
  double alpha = link->latency_us * 1e-6, B = link->bandwidth_GBps * 1e9;
  double n = (double)send->bytes;
  guint32 unit = planner_mesh_unit_axes (mesh);
  guint32 whole = ~(planner_layout_split_mask (layout) | unit);
  guint32 replicated = whole & ~layout->partial;

  send->link = planner_hardware_axis_link_kind (hw, mesh, pl->axis);
  send->time_s = n > 0 ? alpha + n / B : 0;
  send->scatter = 1;
  guint k = 1;
  double gather = 0;
  for (guint a = 0; a < mesh->n_axes; a++)
    if ((whole & (1u << a)) && planner_hardware_axis_is_intra (hw, mesh, a))
      k *= mesh->sizes[a];
  if (k < 2 || n <= 0 || send->bytes % k != 0)
    return;
  /* Gathered axis by axis, minor first: each step's output is the buffer so far. */
  guint64 have = send->bytes / k;
  for (guint a = mesh->n_axes; a-- > 0;)
    if ((whole & (1u << a)) && planner_hardware_axis_is_intra (hw, mesh, a))
      {
        have *= mesh->sizes[a];
        if (replicated & (1u << a))
          gather += planner_cost_step_time (hw, mesh, PLANNER_STEP_ALL_GATHER, a,
                                            have / mesh->sizes[a], have);
      }
  double t = alpha + n / k / B + gather;
  if (t < send->time_s)
    {
      send->time_s = t;
      send->scatter = k;
    }
}

/* A parameter used on several stages (a tied embedding: the lookup on the first, the head on
 * the last) is held by each, and after the last backward pass their gradients are summed: an
 * AllReduce over the k stages that hold it, on the pp link, exposed (Megatron-LM's embedding
 * group). The time of those stage @s takes part in. */
static double
shared_sync (PlannerPlan *plan, const PlannerPipeline *pl, guint s)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerHardware *hw = planner_plan_get_hardware (plan);
  const PlannerLink *link = planner_hardware_axis_link (hw, mesh, pl->axis);
  double alpha = link->latency_us * 1e-6, B = link->bandwidth_GBps * 1e9, time = 0;
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (graph, t);
      if (x->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      /* The distinct stages of its users, and whether @s is one. */
      guint k = 0;
      gboolean mine = FALSE;
      for (guint u = 0; u < x->consumers->len; u++)
        {
          int stage = pl->op_chunk[g_array_index (x->consumers, PlannerUse, u).op] % (int)pl->p;
          gboolean seen = FALSE;
          for (guint w = 0; w < u && !seen; w++)
            seen = pl->op_chunk[g_array_index (x->consumers, PlannerUse, w).op] % (int)pl->p
                   == stage;
          k += !seen;
          mine |= stage == (int)s;
        }
      if (k < 2 || !mine)
        continue;
      double n = (double)local_bytes (plan, t);
      if (planner_plan_get_constants (plan)->grad_reduce == PLANNER_GRAD_REDUCE_F32)
        n = n / planner_dtype_size (x->dtype) * 4;
      time += 2.0 * (k - 1) * alpha + 2.0 * (k - 1) / k * n / B;
    }
  return time;
}

/* What balancing weighs: each layer's time in the training model, per step (forward,
 * backward, recompute and its tensor-parallel communication), and the ops before the first
 * layer (@pre) and after the last (@post). Equal layers cost exactly the same. */
static gboolean
layer_costs (PlannerPlan *plan, const int *layer, int first_layered, guint n_layers, double *w,
             double *pre, double *post, GError **error)
{
  guint n_ops = planner_graph_get_n_ops (planner_plan_get_graph (plan));
  g_autofree gboolean *ops = g_new (gboolean, n_ops);
  for (int l = -2; l < (int)n_layers; l++)
    {
      /* l = -2: the ops before the layers; -1: after them. */
      for (guint i = 0; i < n_ops; i++)
        ops[i] = l >= 0 ? layer[i] == l : layer[i] < 0 && ((int)i < first_layered) == (l == -2);
      PlannerPlanTotals tot = *planner_plan_get_totals (plan);
      PlannerTrainingScope scope = { ops, 0 };
      if (!planner_plan_compute_training_scope (plan, &scope, &tot, FALSE, error))
        return FALSE;
      const PlannerStepBreakdown *b = &tot.breakdown;
      double cost = b->forward + b->backward + b->recompute + b->tp_comm_exposed;
      if (l >= 0)
        w[l] = cost;
      else if (l == -2)
        *pre = cost;
      else
        *post = cost;
    }
  return TRUE;
}

static gboolean
assign_chunks (PlannerPlan *plan, PlannerPipeline *pl, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerCostConstants *c = planner_plan_get_constants (plan);
  guint n_ops = planner_graph_get_n_ops (graph);
  g_autofree int *layer = g_new (int, n_ops);
  int n_layers = 0, first_layered = -1;

  for (guint i = 0; i < n_ops; i++)
    {
      layer[i] = planner_op_block (planner_graph_get_op (graph, i)->name, NULL);
      n_layers = MAX (n_layers, layer[i] + 1);
      if (layer[i] >= 0 && first_layered < 0)
        first_layered = (int)i;
    }
  pl->n_layers = (guint)n_layers;
  if (pl->n_layers < pl->n_chunks)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "%s has %u transformer layers (ops named layers.N.), fewer than the %u "
                   "pipeline chunks of pp=%u x %u virtual stages; use pp x virtual stages <= %u",
                   planner_graph_get_name (graph), pl->n_layers, pl->n_chunks, pl->p, pl->v,
                   pl->n_layers);
      return FALSE;
    }
  pl->chunk_first = g_new (int, pl->n_chunks);
  pl->chunk_last = g_new (int, pl->n_chunks);
  if (c->stages[0])
    {
      if (!parse_split (c->stages, pl, error))
        return FALSE;
    }
  else
    {
      g_autofree double *w = g_new0 (double, pl->n_layers);
      double pre = 0, post = 0;
      if (!layer_costs (plan, layer, first_layered, pl->n_layers, w, &pre, &post, error))
        return FALSE;
      balance_split (pl, w, pre, post);
    }
  g_autofree guint *chunk_of_layer = g_new (guint, pl->n_layers);
  for (guint k = 0; k < pl->n_chunks; k++)
    for (int l = pl->chunk_first[k]; l <= pl->chunk_last[k]; l++)
      chunk_of_layer[l] = k;
  pl->op_chunk = g_new (int, n_ops);
  for (guint i = 0; i < n_ops; i++)
    pl->op_chunk[i] = layer[i] >= 0                                 ? (int)chunk_of_layer[layer[i]]
                      : (int)i < first_layered || first_layered < 0 ? 0
                                                                    : (int)pl->n_chunks - 1;
  return TRUE;
}

/* The activations that cross each chunk boundary: produced in a chunk before it, used in a chunk
 * after it (a tensor used several chunks later is passed along through each). */
static void
find_sends (PlannerPlan *plan, PlannerPipeline *pl, guint accum)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  pl->n_sends = pl->n_chunks - 1;
  pl->sends = g_new0 (PlannerPipelineSend, MAX (pl->n_sends, 1));
  for (guint k = 0; k + 1 < pl->n_chunks; k++)
    {
      PlannerPipelineSend *send = &pl->sends[k];
      send->chunk = k;
      send->from_stage = k % pl->p;
      send->to_stage = (k + 1) % pl->p;
      send->tensor = G_MAXUINT;
    }
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *x = planner_graph_get_tensor (graph, t);
      if (x->kind != PLANNER_TENSOR_ACTIVATION || x->producer < 0)
        continue;
      int from = pl->op_chunk[x->producer], to = from;
      for (guint u = 0; u < x->consumers->len; u++)
        to = MAX (to, pl->op_chunk[g_array_index (x->consumers, PlannerUse, u).op]);
      for (int k = from; k < to; k++)
        {
          PlannerPipelineSend *send = &pl->sends[k];
          if (send->n_tensors++ == 0)
            send->tensor = t;
          send->bytes += local_bytes (plan, t) / accum;
        }
    }
  for (guint k = 0; k < pl->n_sends; k++)
    if (pl->sends[k].n_tensors)
      send_time (plan, pl, pl->sends[k].tensor, &pl->sends[k]);
}

PlannerPipeline *
planner_pipeline_new (PlannerPlan *plan, gboolean set_op_times, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);

  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerCostConstants *c = planner_plan_get_constants (plan);
  PlannerGraph *graph = planner_plan_get_graph (plan);
  int axis = planner_mesh_pipeline_axis (mesh);
  if (axis < 0 || mesh->sizes[axis] < 2)
    return NULL;

  g_autoptr (PlannerPipeline) pl = g_new0 (PlannerPipeline, 1);
  pl->axis = (guint)axis;
  pl->p = mesh->sizes[axis];
  pl->v = MAX (c->virtual_stages, 1);
  pl->schedule = c->schedule;
  if (pl->v > 1 && pl->schedule != PLANNER_SCHEDULE_INTERLEAVED)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "%u virtual stages need the interleaved schedule, not %s; use --schedule "
                   "interleaved or --virtual-stages 1",
                   pl->v, planner_schedule_to_string (pl->schedule));
      return NULL;
    }
  if ((guint64)pl->p * pl->v > PLANNER_MAX_PIPELINE_CHUNKS)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_MESH,
                   "pp=%u x %u virtual stages is more than %u chunks", pl->p, pl->v,
                   PLANNER_MAX_PIPELINE_CHUNKS);
      return NULL;
    }
  pl->n_chunks = pl->p * pl->v;
  if (!assign_chunks (plan, pl, error))
    return NULL;

  /* Each stage's figures from the training model on its ops alone. */
  guint n_ops = planner_graph_get_n_ops (graph);
  g_autofree gboolean *ops = g_new (gboolean, n_ops);
  pl->n_stages = pl->p;
  pl->stages = g_new0 (PlannerPipelineStage, pl->p);
  guint64 per_stage = planner_mesh_n_devices (mesh) / pl->p;
  for (guint s = 0; s < pl->p; s++)
    {
      PlannerPipelineStage *st = &pl->stages[s];
      PlannerPlanTotals tot = *planner_plan_get_totals (plan);
      PlannerTrainingScope scope = { ops, 0 };
      st->index = s;
      st->n_devices = per_stage;
      st->n_chunks = pl->v;
      st->chunks = g_new (guint, pl->v);
      for (guint j = 0; j < pl->v; j++)
        {
          st->chunks[j] = s + j * pl->p;
          st->n_layers
              += (guint)(pl->chunk_last[st->chunks[j]] - pl->chunk_first[st->chunks[j]] + 1);
        }
      for (guint i = 0; i < n_ops; i++)
        {
          ops[i] = (guint)pl->op_chunk[i] % pl->p == s;
          if (ops[i])
            {
              st->n_ops++;
              st->flops += planner_plan_get_op (plan, i)->flops;
            }
        }
      if (!planner_plan_compute_training_scope (plan, &scope, &tot, set_op_times, error))
        return NULL;
      if (s == 0)
        {
          pl->m = tot.micro_batches;
          pl->local_batch = tot.local_batch;
          if (pl->schedule == PLANNER_SCHEDULE_INTERLEAVED && pl->v > 1 && pl->m % pl->p != 0)
            {
              g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_NOT_DIVISIBLE,
                           "the interleaved schedule runs the micro-batches in groups of pp=%u; "
                           "%u micro-batches is not a multiple of %u",
                           pl->p, pl->m, pl->p);
              return NULL;
            }
          find_sends (plan, pl, MAX (pl->m, 1));
        }
      st->breakdown = tot.breakdown;
      st->in_flight = in_flight (pl, s);
      st->memory = tot.memory;
      double once = MIN (scope.activations_once, (double)tot.memory.activations);
      st->memory.activations
          = (guint64)llround (st->in_flight * ((double)tot.memory.activations - once) + once);
      /* The allocator's rounding of the activations grows with them. */
      if (tot.memory.activations > 0)
        {
          guint64 act = (guint64)llround ((double)tot.memory.allocator_activations
                                          * (double)st->memory.activations
                                          / (double)tot.memory.activations);
          st->memory.allocator = tot.memory.allocator - tot.memory.allocator_activations + act;
          st->memory.allocator_activations = act;
        }
      planner_memory_finish (&st->memory);
      const PlannerStepBreakdown *b = &st->breakdown;
      st->micro_batch_s = (b->forward + b->backward + b->recompute + b->tp_comm_exposed) / pl->m;
      for (guint k = 0; k < pl->n_sends; k++)
        {
          /* Activations forward from the sending stage, their gradients back from the
           * receiving one. */
          if (pl->sends[k].from_stage == s)
            st->comm_s += pl->sends[k].time_s;
          if (pl->sends[k].to_stage == s)
            st->comm_s += pl->sends[k].time_s;
        }
      st->micro_batch_s += st->comm_s;
      st->shared_sync_s = shared_sync (plan, pl, s);
      st->busy_s = pl->m * st->micro_batch_s + b->dp_sync_exposed + b->overhead + st->shared_sync_s;
      if (s == 0 || st->busy_s > pl->stages[pl->bottleneck].busy_s)
        pl->bottleneck = s;
      if (s == 0 || st->memory.reserved_total > pl->memory.reserved_total)
        pl->memory = st->memory;
      if (s == pl->bottleneck)
        {
          pl->compute_time_s = tot.compute_time_s;
          pl->grad_sync_time_s = tot.grad_sync_time_s;
        }
    }

  /* Fill and drain: every stage but the slowest once, a v-th of it per chunk. */
  double sum = 0, largest = 0;
  for (guint s = 0; s < pl->p; s++)
    {
      sum += pl->stages[s].micro_batch_s;
      largest = MAX (largest, pl->stages[s].micro_batch_s);
    }
  const PlannerPipelineStage *b = &pl->stages[pl->bottleneck];
  pl->breakdown = b->breakdown;
  pl->breakdown.pipeline_comm = pl->m * b->comm_s + b->shared_sync_s;
  pl->breakdown.pipeline_bubble = (sum - largest) / pl->v;
  pl->bubble_fraction = (double)(pl->p - 1) / ((double)pl->v * pl->m + pl->p - 1);
  return g_steal_pointer (&pl);
}

gboolean
planner_pipeline_compute_training (PlannerPlan *self, PlannerPlanTotals *tot, gboolean set_totals,
                                   GError **error)
{
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (self, set_totals, error);
  if (pl == NULL)
    return FALSE;
  tot->memory = pl->memory;
  tot->breakdown = pl->breakdown;
  tot->micro_batches = pl->m;
  tot->local_batch = pl->local_batch;
  if (set_totals)
    {
      tot->compute_time_s = pl->compute_time_s;
      tot->grad_sync_time_s = pl->grad_sync_time_s;
      tot->activation_bytes_per_device = pl->memory.activations;
      tot->memory_per_device_bytes = pl->memory.total;
      tot->step_time_s = planner_step_breakdown_total (&pl->breakdown);
    }
  return TRUE;
}

guint64 *
planner_pipeline_stage_devices (const PlannerPipeline *pl, const PlannerMesh *mesh, guint stage,
                                guint64 *n)
{
  g_return_val_if_fail (pl != NULL && mesh != NULL && n != NULL, NULL);
  guint64 total = planner_mesh_n_devices (mesh), k = 0;
  guint64 *ids = g_new (guint64, MAX (total / pl->p, 1));
  for (guint64 d = 0; d < total; d++)
    {
      guint coords[PLANNER_MAX_AXES];
      planner_mesh_device_coords (mesh, d, coords);
      if (coords[pl->axis] == stage)
        ids[k++] = d;
    }
  *n = k;
  return ids;
}

char *
planner_pipeline_stage_layers (const PlannerPipeline *pl, guint stage)
{
  g_return_val_if_fail (pl != NULL && stage < pl->n_stages, NULL);
  GString *s = g_string_new (NULL);
  const PlannerPipelineStage *st = &pl->stages[stage];
  for (guint j = 0; j < st->n_chunks; j++)
    g_string_append_printf (s, "%s%d-%d", j ? "," : "", pl->chunk_first[st->chunks[j]],
                            pl->chunk_last[st->chunks[j]]);
  return g_string_free (s, FALSE);
}

int
planner_pipeline_op_stage (const PlannerPipeline *pl, guint op)
{
  g_return_val_if_fail (pl != NULL, 0);
  return pl->op_chunk[op] % (int)pl->p;
}

/* "model.layers.20.input_layernorm" -> "model.layers.20": the name up to the layer number. */
static char *
layer_module (const char *name, int layer)
{
  g_autofree char *number = g_strdup_printf (".%d", layer);
  for (const char *p = strstr (name, number); p; p = strstr (p + 1, number))
    {
      const char *end = p + strlen (number);
      if (*end == '.' || *end == '\0')
        return g_strndup (name, (gsize)(end - name));
    }
  return g_strdup (name);
}

char **
planner_pipeline_split_modules (const PlannerPipeline *pl, PlannerGraph *graph)
{
  g_return_val_if_fail (pl != NULL && PLANNER_IS_GRAPH (graph), NULL);
  GPtrArray *out = g_ptr_array_new ();
  for (guint k = 1; k < pl->n_chunks; k++)
    for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
      {
        const char *name = planner_graph_get_op (graph, i)->name;
        if (planner_op_block (name, NULL) == pl->chunk_first[k])
          {
            g_ptr_array_add (out, layer_module (name, pl->chunk_first[k]));
            break;
          }
      }
  g_ptr_array_add (out, NULL);
  return (char **)g_ptr_array_free (out, FALSE);
}

/* Stage @s's slots in the order it runs them. */
static GArray *
stage_order (PlannerSchedule schedule, guint p, guint v, guint m, guint s)
{
  GArray *order = g_array_new (FALSE, TRUE, sizeof (PlannerPipelineSlot));
  PlannerPipelineSlot slot = { s, 0, 0, FALSE, 0, 0 };
  if (schedule == PLANNER_SCHEDULE_GPIPE)
    {
      for (guint back = 0; back < 2; back++)
        for (guint j = 0; j < v; j++)
          for (guint i = 0; i < m; i++)
            {
              slot.micro_batch = i;
              slot.chunk = back ? v - 1 - j : j;
              slot.backward = back;
              g_array_append_val (order, slot);
            }
      return order;
    }
  /* 1F1B is the interleaved order with one chunk. Virtual micro-batch k runs micro-batch
   * (k / (p v)) p + k % p through chunk (k / p) % v forwards, the reverse chunk backwards. */
  guint total = m * v;
  guint warmup = schedule == PLANNER_SCHEDULE_INTERLEAVED && v > 1 ? 2 * (p - s - 1) + (v - 1) * p
                                                                   : p - s - 1;
  warmup = MIN (warmup, total);
  guint f = 0, b = 0;
  for (; f < warmup; f++)
    {
      slot.micro_batch = (f / (p * v)) * p + f % p;
      slot.chunk = (f / p) % v;
      slot.backward = FALSE;
      g_array_append_val (order, slot);
    }
  while (b < total)
    {
      if (f < total)
        {
          slot.micro_batch = (f / (p * v)) * p + f % p;
          slot.chunk = (f / p) % v;
          slot.backward = FALSE;
          g_array_append_val (order, slot);
          f++;
        }
      slot.micro_batch = (b / (p * v)) * p + b % p;
      slot.chunk = v - 1 - (b / p) % v;
      slot.backward = TRUE;
      g_array_append_val (order, slot);
      b++;
    }
  return order;
}

double
planner_pipeline_simulate (PlannerSchedule schedule, guint p, guint v, guint m,
                           const double *forward, const double *backward, GArray *slots,
                           double *in_flight)
{
  g_return_val_if_fail (p >= 1 && v >= 1 && m >= 1 && forward && backward, 0);
  if (schedule != PLANNER_SCHEDULE_INTERLEAVED)
    v = 1;
  /* Megatron-LM's interleaved order runs the micro-batches in groups of p. */
  g_return_val_if_fail (v == 1 || m % p == 0, 0);
  guint n_chunks = p * v;
  /* done[(c * m + i) * 2 + back]: when micro-batch i's pass through chunk c ended, or -1. */
  g_autofree double *done = g_new (double, (gsize)n_chunks *m * 2);
  for (gsize k = 0; k < (gsize)n_chunks * m * 2; k++)
    done[k] = -1;
  g_autofree GArray **orders = g_new (GArray *, p);
  g_autofree guint *next = g_new0 (guint, p);
  g_autofree double *free_at = g_new0 (double, p);
  g_autofree guint *held = g_new0 (guint, p);
  g_autofree guint *most = g_new0 (guint, p);
  for (guint s = 0; s < p; s++)
    orders[s] = stage_order (schedule, p, v, m, s);
  double length = 0;
  gboolean progress = TRUE;
  while (progress)
    {
      progress = FALSE;
      for (guint s = 0; s < p; s++)
        while (next[s] < orders[s]->len)
          {
            PlannerPipelineSlot *slot = &g_array_index (orders[s], PlannerPipelineSlot, next[s]);
            guint c = slot->chunk * p + s, i = slot->micro_batch;
            /* Its input: the forward of the chunk before, or the backward of the chunk after
             * (the last chunk's backward follows its own forward). */
            double ready = 0;
            if (!slot->backward && c > 0)
              ready = done[((gsize)(c - 1) * m + i) * 2];
            else if (slot->backward)
              ready = c + 1 < n_chunks ? done[((gsize)(c + 1) * m + i) * 2 + 1]
                                       : done[((gsize)c * m + i) * 2];
            if (ready < 0)
              break;
            slot->start = MAX (ready, free_at[s]);
            slot->end = slot->start + (slot->backward ? backward[s] : forward[s]) / v;
            free_at[s] = slot->end;
            done[((gsize)c * m + i) * 2 + (slot->backward ? 1 : 0)] = slot->end;
            length = MAX (length, slot->end);
            if (slot->backward)
              held[s]--;
            else
              {
                held[s]++;
                most[s] = MAX (most[s], held[s]);
              }
            next[s]++;
            progress = TRUE;
          }
    }
  for (guint s = 0; s < p; s++)
    {
      /* Every order is complete, so every slot ran (a schedule that deadlocked would stop). */
      g_assert (next[s] == orders[s]->len);
      if (slots)
        g_array_append_vals (slots, orders[s]->data, orders[s]->len);
      if (in_flight)
        in_flight[s] = (double)most[s] / v;
      g_array_unref (orders[s]);
    }
  return length;
}

double
planner_pipeline_schedule (const PlannerPipeline *pl, GArray *slots)
{
  g_return_val_if_fail (pl != NULL, 0);
  g_autofree double *fwd = g_new (double, pl->p);
  g_autofree double *bwd = g_new (double, pl->p);
  for (guint s = 0; s < pl->p; s++)
    {
      const PlannerStepBreakdown *b = &pl->stages[s].breakdown;
      fwd[s] = (b->forward + b->tp_comm_exposed / 2) / pl->m + pl->stages[s].comm_s / 2;
      bwd[s] = (b->backward + b->recompute + b->tp_comm_exposed / 2) / pl->m
               + pl->stages[s].comm_s / 2;
    }
  return planner_pipeline_simulate (pl->schedule, pl->p, pl->v, pl->m, fwd, bwd, slots, NULL);
}

char *
planner_pipeline_dtensor_comment (PlannerPlan *plan)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, NULL);
  if (pl == NULL)
    return NULL;
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_auto (GStrv) split = planner_pipeline_split_modules (pl, planner_plan_get_graph (plan));
  /* torch.distributed.pipelining's schedule classes. */
  const char *schedule = pl->schedule == PLANNER_SCHEDULE_GPIPE         ? "ScheduleGPipe"
                         : pl->schedule == PLANNER_SCHEDULE_INTERLEAVED ? "ScheduleInterleaved1F1B"
                                                                        : "Schedule1F1B";
  GString *s = g_string_new (NULL);
  g_string_append_printf (s,
                          "Pipeline over %s: %u stages%s; with torch.distributed.pipelining, "
                          "split the model at the start of",
                          mesh->names[pl->axis], pl->p, pl->v > 1 ? " of interleaved chunks" : "");
  for (guint i = 0; split[i]; i++)
    g_string_append_printf (s, "%s %s", i ? "," : "", split[i]);
  g_string_append_printf (s,
                          " (SplitPoint.BEGINNING), chunk c on stage c %% %u of mesh['%s'], and "
                          "run %s with n_microbatches=%u.",
                          pl->p, mesh->names[pl->axis], schedule, pl->m);
  return g_string_free (s, FALSE);
}

void
planner_pipeline_add_json (PlannerPlan *plan, JsonBuilder *b)
{
  g_return_if_fail (PLANNER_IS_PLAN (plan) && JSON_IS_BUILDER (b));

  /* A plan that could be finished has a pipeline that can be made. */
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, NULL);
  if (pl == NULL)
    return;
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  json_builder_set_member_name (b, "pipeline");
  json_builder_begin_object (b);
  planner_json_add_string (b, "schedule", planner_schedule_to_string (pl->schedule));
  planner_json_add_int (b, "stages", pl->p);
  planner_json_add_int (b, "virtual_stages", pl->v);
  planner_json_add_int (b, "micro_batches", pl->m);
  planner_json_add_int (b, "layers", pl->n_layers);
  planner_json_add_int (b, "bottleneck_stage", pl->bottleneck);
  json_builder_set_member_name (b, "sends");
  json_builder_begin_array (b);
  for (guint k = 0; k < pl->n_sends; k++)
    {
      const PlannerPipelineSend *s = &pl->sends[k];
      json_builder_begin_object (b);
      planner_json_add_int (b, "chunk", s->chunk);
      planner_json_add_int (b, "from_stage", s->from_stage);
      planner_json_add_int (b, "to_stage", s->to_stage);
      planner_json_add_string (
          b, "tensor", s->n_tensors ? planner_graph_get_tensor (graph, s->tensor)->name : NULL);
      planner_json_add_int (b, "tensors", s->n_tensors);
      planner_json_add_int (b, "bytes", (gint64)s->bytes);
      planner_json_add_int (b, "scatter", s->scatter);
      planner_json_add_string (b, "link", planner_link_kind_to_string (s->link));
      planner_json_add_double (b, "time_us", s->time_s * 1e6);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  planner_json_add_double (b, "bubble_fraction", pl->bubble_fraction);

  json_builder_set_member_name (b, "stages");
  json_builder_begin_array (b);
  for (guint s = 0; s < pl->n_stages; s++)
    {
      const PlannerPipelineStage *st = &pl->stages[s];
      g_autofree char *layers = planner_pipeline_stage_layers (pl, s);
      guint64 n = 0;
      g_autofree guint64 *devices = planner_pipeline_stage_devices (pl, mesh, s, &n);
      json_builder_begin_object (b);
      planner_json_add_int (b, "stage", s);
      planner_json_add_string (b, "layers", layers);
      planner_json_add_int (b, "n_layers", st->n_layers);
      planner_json_add_int (b, "ops", st->n_ops);
      json_builder_set_member_name (b, "devices");
      json_builder_begin_array (b);
      for (guint64 d = 0; d < n; d++)
        json_builder_add_int_value (b, (gint64)devices[d]);
      json_builder_end_array (b);
      planner_json_add_double (b, "flops", st->flops);
      planner_json_add_double (b, "in_flight_micro_batches", st->in_flight);
      planner_plan_json_add_memory (b, &st->memory);
      planner_json_add_double (b, "micro_batch_us", st->micro_batch_s * 1e6);
      planner_json_add_double (b, "comm_us", st->comm_s * 1e6);
      planner_json_add_double (b, "shared_sync_us", st->shared_sync_s * 1e6);
      planner_json_add_double (b, "busy_us", st->busy_s * 1e6);
      json_builder_set_member_name (b, "step_breakdown_us");
      json_builder_begin_object (b);
      planner_json_add_double (b, "forward", st->breakdown.forward * 1e6);
      planner_json_add_double (b, "backward", st->breakdown.backward * 1e6);
      planner_json_add_double (b, "recompute", st->breakdown.recompute * 1e6);
      planner_json_add_double (b, "tp_comm_exposed", st->breakdown.tp_comm_exposed * 1e6);
      planner_json_add_double (b, "dp_sync_exposed", st->breakdown.dp_sync_exposed * 1e6);
      planner_json_add_double (b, "dp_sync_hidden", st->breakdown.dp_sync_hidden * 1e6);
      planner_json_add_double (b, "overhead", st->breakdown.overhead * 1e6);
      json_builder_end_object (b);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}
