/* golden-run: the executor's kernels on inputs from files, for tests/test-golden.py.
 *
 *   golden-run [--backend NAME] [--mesh MESH] CASE...
 *
 * For each CASE: the one-op (or small) graph CASE.graph.json, its source tensors (every
 * graph input and parameter, by name) from CASE.in.safetensors; writes the one-device
 * reference's graph outputs to CASE.out.safetensors and, with --mesh, the outputs of the
 * plan that propagation gives on that mesh (default strategies: the batch dim over every
 * axis that divides it), gathered from the shards, to CASE.sharded.safetensors. The
 * expected values come from NumPy in the test, never from here.
 */
#include "config.h"

#include <stdio.h>

#include "executor-trial.h"
#include "planner-model.h"
#include "planner-propagate.h"

static gboolean
run_case (const char *prefix, const char *backend, const char *mesh_text, GError **error)
{
  g_autofree char *graph_path = g_strconcat (prefix, ".graph.json", NULL);
  g_autofree char *in_path = g_strconcat (prefix, ".in.safetensors", NULL);
  g_autofree char *out_path = g_strconcat (prefix, ".out.safetensors", NULL);
  g_autofree char *sharded_path = g_strconcat (prefix, ".sharded.safetensors", NULL);
  g_autoptr (PlannerGraph) g = planner_graph_load_json (graph_path, error);
  if (g == NULL)
    return FALSE;
  g_autoptr (ExecutorTensors) inputs = executor_safetensors_load (in_path, error);
  if (inputs == NULL)
    return FALSE;
  /* Every source tensor must come from the file: a random one would test nothing. */
  for (guint i = 0; i < planner_graph_get_n_tensors (g); i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (g, i);
      if (t->producer < 0 && executor_tensors_lookup (inputs, t->name) == NULL)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "%s lacks tensor %s", in_path,
                       t->name);
          return FALSE;
        }
    }
  g_autoptr (PlannerMesh) mesh = planner_mesh_parse (mesh_text ? mesh_text : "a=1", error);
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("cpu-local", error);
  if (mesh == NULL || hw == NULL)
    return FALSE;
  g_autoptr (GPtrArray) pins = g_ptr_array_new ();
  PlannerPropagateOptions popts;
  planner_propagate_options_init (&popts);
  popts.allow_tied_redistribution = TRUE;
  g_autoptr (PlannerPlan) plan = planner_propagate (g, mesh, hw, pins, &popts, error);
  if (plan == NULL)
    return FALSE;

  ExecutorTrialOptions options;
  executor_trial_options_init (&options);
  options.warmup = 0;
  options.repeat = 0;
  options.sources = inputs;
  options.keep_outputs = TRUE;
  /* Sharded and reference runs may differ in rounding (other GEMM shapes); the test
   * compares both with NumPy itself, so the trial's own comparison only has to finish. */
  options.tolerance = 1e9;
  g_autoptr (ExecutorTrialResult) res
      = executor_trial_run_named (plan, backend, &options, NULL, error);
  if (res == NULL)
    return FALSE;
  if (!executor_safetensors_save (res->outputs_reference, out_path, error))
    return FALSE;
  if (mesh_text && !executor_safetensors_save (res->outputs_sharded, sharded_path, error))
    return FALSE;
  return TRUE;
}

int
main (int argc, char **argv)
{
  g_autofree char *backend = NULL, *mesh = NULL;
  GOptionEntry entries[] = {
    { "backend", 'b', 0, G_OPTION_ARG_STRING, &backend, "cpu, cuda or nccl (cpu)", "NAME" },
    { "mesh", 'm', 0, G_OPTION_ARG_STRING, &mesh, "also run sharded on MESH", "MESH" },
    { NULL },
  };
  g_autoptr (GOptionContext) context = g_option_context_new ("CASE...");
  g_option_context_add_main_entries (context, entries, NULL);
  g_autoptr (GError) error = NULL;
  if (!g_option_context_parse (context, &argc, &argv, &error) || argc < 2)
    {
      fprintf (stderr, "golden-run: %s\n", error ? error->message : "give at least one CASE");
      return 2;
    }
  for (int i = 1; i < argc; i++)
    if (!run_case (argv[i], backend ? backend : "cpu", mesh, &error))
      {
        fprintf (stderr, "golden-run: %s: %s\n", argv[i], error->message);
        return 1;
      }
  return 0;
}
