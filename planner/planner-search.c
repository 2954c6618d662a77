#define G_LOG_DOMAIN "planner-search"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-policy.h"
#include "planner-search.h"

void
planner_search_options_init (PlannerSearchOptions *options)
{
  memset (options, 0, sizeof *options);
  options->solve = TRUE;
  options->policies = TRUE;
  options->pipelines = TRUE;
}

static void
candidate_free (gpointer data)
{
  PlannerSearchCandidate *c = data;
  g_free (c->mesh);
  g_free (c->policy);
  g_free (c->error);
  g_clear_object (&c->plan);
  g_free (c);
}

void
planner_search_result_free (PlannerSearchResult *result)
{
  if (result == NULL)
    return;
  g_ptr_array_unref (result->candidates);
  g_free (result);
}

GPtrArray *
planner_search_meshes (guint n_devices, guint n_layers)
{
  GPtrArray *meshes = g_ptr_array_new_with_free_func (g_free);
  for (guint mp = 1; mp <= n_devices; mp++)
    if (n_devices % mp == 0)
      g_ptr_array_add (meshes, g_strdup_printf ("dp=%u,mp=%u", n_devices / mp, mp));
  /* A pipeline needs two layers at least and a layer per stage. */
  for (guint pp = 2; n_layers >= 2 && pp <= MIN (n_devices, n_layers); pp++)
    {
      if (n_devices % pp != 0)
        continue;
      guint rest = n_devices / pp;
      for (guint mp = 1; mp <= rest; mp++)
        if (rest % mp == 0)
          g_ptr_array_add (meshes, g_strdup_printf ("pp=%u,dp=%u,mp=%u", pp, rest / mp, mp));
    }
  return meshes;
}

guint
planner_search_layers (PlannerGraph *graph)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), 0);
  int n = 0;
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    n = MAX (n, planner_op_block (planner_graph_get_op (graph, i)->name, NULL) + 1);
  return (guint)n;
}

static void
candidate_set_plan (PlannerSearchCandidate *c, PlannerPlan *plan, guint64 limit)
{
  /* On pp > 1 the totals are the pipelined step (bubble and sends) and the fullest stage. */
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  c->plan = plan;
  c->step_time_s = t->step_time_s;
  c->memory_per_device_bytes = t->memory_per_device_bytes;
  /* The reserved total (the tensors, the caching allocator's rounding, the CUDA context,
   * cuBLAS's and NCCL's buffers), as `fits` (issue 12). */
  c->fits = t->memory.reserved_total <= limit;
  /* The schedule's bubble, (p - 1) / (v m + p - 1) with v = 1: the m the pipeline ran (the
   * totals'), without building the pipeline a second time. */
  if (c->pp > 1)
    c->bubble_fraction = (double)(c->pp - 1) / ((double)t->micro_batches + c->pp - 1);
}

static void
progress (const PlannerSearchOptions *options, guint done, guint total, const char *mesh,
          const char *what)
{
  if (options->progress == NULL)
    return;
  g_autofree char *text = g_strdup_printf ("%s: %s", mesh, what);
  options->progress (done, total, text, options->progress_data);
}

PlannerSearchResult *
planner_search (PlannerGraph *graph, const PlannerHardware *hw, const PlannerSearchOptions *options,
                GError **error)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (graph) && hw != NULL && options != NULL, NULL);
  g_return_val_if_fail (options->n_devices >= 1, NULL);

  gint64 start = g_get_monotonic_time ();
  g_autoptr (PlannerRequest) base
      = options->request ? planner_request_copy (options->request) : planner_request_new ();
  planner_request_set_policy (base, NULL);
  PlannerSearchResult *result = g_new0 (PlannerSearchResult, 1);
  result->candidates = g_ptr_array_new_with_free_func (candidate_free);
  result->memory_limit
      = options->memory_limit ? options->memory_limit : planner_hardware_memory_bytes (hw);
  g_autoptr (PlannerSearchResult) owned = result;

  g_autoptr (GPtrArray) meshes = planner_search_meshes (
      options->n_devices, options->pipelines ? planner_search_layers (graph) : 0);
  /* The sweep's meshes have dp and mp only: a policy built for another axis (megatron-ep
   * places experts on ep) has nothing to place there and is left out, not listed as
   * refused on every mesh. */
  g_autoptr (GPtrArray) policies = g_ptr_array_new ();
  for (const char *const *p = planner_policy_builtin_names (); options->policies && *p; p++)
    if (!g_str_equal (*p, "megatron-ep"))
      g_ptr_array_add (policies, (gpointer)*p);
  guint total = 0, done = 0;
  for (guint m = 0; m < meshes->len; m++)
    total += policies->len
             + (options->solve && !g_str_has_prefix (g_ptr_array_index (meshes, m), "pp=") ? 1 : 0);

  for (guint m = 0; m < meshes->len; m++)
    {
      const char *mesh_text = g_ptr_array_index (meshes, m);
      g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text, error);
      if (mesh == NULL)
        return NULL;
      /* A pipeline: 1F1B over M micro-batches, the batch as the request has it (so every
       * candidate trains the same batch). */
      int pp_axis = planner_mesh_pipeline_axis (mesh);
      guint pp = pp_axis >= 0 ? (guint)mesh->sizes[pp_axis] : 1;
      g_autoptr (PlannerRequest) mesh_base = planner_request_copy (base);
      guint micro_batches = 0;
      if (pp > 1)
        {
          PlannerCostConstants constants = *planner_request_get_constants (base);
          micro_batches = options->micro_batches ? options->micro_batches : 4 * pp;
          constants.micro_batches = micro_batches;
          constants.schedule = PLANNER_SCHEDULE_1F1B;
          constants.virtual_stages = 1;
          constants.stages[0] = '\0';
          planner_request_set_constants (mesh_base, &constants);
        }
      for (guint i = 0; i < policies->len; i++)
        {
          if (g_cancellable_set_error_if_cancelled (options->cancellable, error))
            return NULL;
          progress (options, done, total, mesh_text, g_ptr_array_index (policies, i));
          PlannerSearchCandidate *c = g_new0 (PlannerSearchCandidate, 1);
          c->mesh = g_strdup (mesh_text);
          c->policy = g_strdup (g_ptr_array_index (policies, i));
          c->pp = pp;
          c->micro_batches = micro_batches;
          g_ptr_array_add (result->candidates, c);
          g_autoptr (PlannerRequest) request = planner_request_copy (mesh_base);
          planner_request_set_policy (request, g_ptr_array_index (policies, i));
          g_autoptr (GError) local = NULL;
          PlannerPlan *plan
              = planner_request_propagate (request, graph, mesh, hw, NULL, NULL, &local);
          if (plan == NULL)
            c->error = g_strdup (local->message);
          else
            candidate_set_plan (c, plan, result->memory_limit);
          done++;
        }
      /* The exact solve's objective has no pipeline (no bubble, no sends, one stage's memory):
       * it stays on the two-axis meshes. */
      if (!options->solve || pp > 1)
        continue;
      if (g_cancellable_set_error_if_cancelled (options->cancellable, error))
        return NULL;
      progress (options, done, total, mesh_text, "exact solve");
      PlannerSearchCandidate *c = g_new0 (PlannerSearchCandidate, 1);
      c->mesh = g_strdup (mesh_text);
      c->solved = TRUE;
      c->pp = 1;
      g_ptr_array_add (result->candidates, c);
      g_autoptr (GError) local = NULL;
      g_autoptr (PlannerPlan) seed
          = planner_request_propagate (base, graph, mesh, hw, NULL, NULL, &local);
      PlannerSolveOptions solve;
      planner_solve_options_init (&solve);
      /* The solver bounds the tensors' total; a candidate fits by its reserved total. Leave
       * the solver room for what the device holds beside the tensors, the seed's (the CUDA
       * context, cuBLAS's and NCCL's buffers depend on the mesh alone, the allocator's
       * rounding on the plan a little), so that a solved plan under its bound fits too. */
      guint64 beside = 0;
      if (seed)
        {
          const PlannerMemory *sm = &planner_plan_get_totals (seed)->memory;
          beside = sm->reserved_total - MIN (sm->reserved_total, sm->total);
        }
      solve.memory_limit = result->memory_limit > beside ? result->memory_limit - beside : 1;
      solve.cancellable = options->cancellable;
      PlannerPlan *plan = seed ? planner_solve (seed, &solve, &c->report, &local) : NULL;
      if (plan == NULL)
        {
          if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            {
              g_propagate_error (error, g_steal_pointer (&local));
              return NULL;
            }
          c->error = g_strdup (local->message);
        }
      else
        candidate_set_plan (c, plan, result->memory_limit);
      done++;
    }
  progress (options, done, total, "", "done");

  /* The best, and the front: no other plan is at least as fast and as small, and better in
   * one of them. */
  result->best = -1;
  for (guint i = 0; i < result->candidates->len; i++)
    {
      PlannerSearchCandidate *c = g_ptr_array_index (result->candidates, i);
      if (c->plan == NULL)
        continue;
      if (c->fits)
        {
          PlannerSearchCandidate *b
              = result->best >= 0 ? g_ptr_array_index (result->candidates, result->best) : NULL;
          if (b == NULL || c->step_time_s < b->step_time_s)
            result->best = (int)i;
        }
      c->pareto = TRUE;
      for (guint j = 0; j < result->candidates->len && c->pareto; j++)
        {
          PlannerSearchCandidate *o = g_ptr_array_index (result->candidates, j);
          if (o->plan == NULL || j == i)
            continue;
          gboolean no_worse = o->step_time_s <= c->step_time_s
                              && o->memory_per_device_bytes <= c->memory_per_device_bytes;
          gboolean better = o->step_time_s < c->step_time_s
                            || o->memory_per_device_bytes < c->memory_per_device_bytes;
          /* Of equal plans the first one stays on the front. */
          if (no_worse && (better || j < i))
            c->pareto = FALSE;
        }
    }
  result->search_ms = (double)(g_get_monotonic_time () - start) / 1000.0;
  return g_steal_pointer (&owned);
}

static int
rank_compare (gconstpointer a, gconstpointer b, gpointer data)
{
  const PlannerSearchResult *result = data;
  const PlannerSearchCandidate *x = g_ptr_array_index (result->candidates, *(const guint *)a);
  const PlannerSearchCandidate *y = g_ptr_array_index (result->candidates, *(const guint *)b);
  if (x->fits != y->fits)
    return x->fits ? -1 : 1;
  if (x->step_time_s != y->step_time_s)
    return x->step_time_s < y->step_time_s ? -1 : 1;
  return *(const guint *)a < *(const guint *)b ? -1 : 1;
}

GArray *
planner_search_ranking (const PlannerSearchResult *result)
{
  g_return_val_if_fail (result != NULL, NULL);
  GArray *order = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = 0; i < result->candidates->len; i++)
    if (((PlannerSearchCandidate *)g_ptr_array_index (result->candidates, i))->plan)
      g_array_append_val (order, i);
  /* Ties keep candidate order: the comparison falls back on the index. */
  g_array_sort_with_data (order, rank_compare, (gpointer)result);
  return order;
}
