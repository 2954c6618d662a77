/* golden-run: the executor's kernels on inputs from files, for tests/test-golden.py.
 *
 *   golden-run [--backend NAME] [--mesh MESH] CASE...
 *
 * For each CASE: the one-op (or small) graph CASE.graph.json, its source tensors (every
 * graph input and parameter, by name) from CASE.in.safetensors; writes the one-device
 * reference's graph outputs to CASE.out.safetensors and, with --mesh, the outputs of the
 * plan that propagation gives on that mesh (default strategies: the batch dim over every
 * axis that divides it), gathered from the shards, to CASE.sharded.safetensors. Where
 * CASE.gout.safetensors exists (grad.OUTPUT for every output of a one-op graph), also runs
 * the op's backward on one device and writes grad.INPUT of every float input to
 * CASE.gin.safetensors. The expected values come from NumPy in the test, never from here.
 * Exit 77 when the backend has no device (or too few) for the mesh.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "executor-backward.h"
#include "executor-error.h"
#include "executor-trial.h"
#include "planner-model.h"
#include "planner-propagate.h"

typedef struct
{
  PlannerGraph *g;
  ExecutorTensors *inputs, *gouts, *result;
} Backward;

static ExecutorBuffer *
upload (ExecutorDevice *dev, const ExecutorHostTensor *h, gsize bytes, GError **error)
{
  ExecutorBuffer *buf = executor_device_buffer_new (dev, MAX (bytes, 1), error);
  if (buf && h && !executor_device_upload (dev, buf, h->data, bytes, error))
    {
      executor_device_buffer_free (dev, buf);
      return NULL;
    }
  return buf;
}

static void
arg_of (ExecutorTensorArg *a, const PlannerTensor *t)
{
  a->rank = t->rank;
  memcpy (a->shape, t->shape, sizeof a->shape);
  a->dtype = executor_storage_dtype (t->dtype);
}

static gsize
arg_bytes (const ExecutorTensorArg *a)
{
  gsize n = 1;
  for (guint d = 0; d < a->rank; d++)
    n *= (gsize)a->shape[d];
  return n * executor_storage_size (a->dtype);
}

/* The op's forward, then its backward, on the one device of @dev's backend. */
static gboolean
backward_device (ExecutorDevice *dev, gpointer data, GError **error)
{
  Backward *bw = data;
  const PlannerOp *op = planner_graph_get_op (bw->g, 0);
  PlannerStrategy none = { 0 };
  ExecutorOpCall call = { 0 };
  ExecutorBackwardCall bc = { 0 };
  call.op = op;
  call.rule = &op->rule;
  call.strategy = &none;
  call.n_inputs = op->n_inputs;
  call.n_outputs = op->n_outputs;
  call.add_bias = TRUE;
  bc.fwd = &call;
  ExecutorBuffer *bufs[4 * PLANNER_MAX_OPERANDS] = { NULL };
  guint nb = 0;
  gboolean ok = TRUE;
  for (guint k = 0; ok && k < op->n_inputs; k++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (bw->g, op->inputs[k]);
      arg_of (&call.inputs[k], t);
      ok = (bufs[nb++] = call.inputs[k].buffer
            = upload (dev, executor_tensors_lookup (bw->inputs, t->name),
                      arg_bytes (&call.inputs[k]), error))
           != NULL;
      if (ok && call.inputs[k].dtype == PLANNER_DTYPE_F32)
        {
          bc.grad_inputs[k] = call.inputs[k];
          ok = (bufs[nb++] = bc.grad_inputs[k].buffer
                = upload (dev, NULL, arg_bytes (&call.inputs[k]), error))
               != NULL;
        }
    }
  for (guint k = 0; ok && k < op->n_outputs; k++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (bw->g, op->outputs[k]);
      g_autofree char *name = g_strconcat ("grad.", t->name, NULL);
      const ExecutorHostTensor *g = executor_tensors_lookup (bw->gouts, name);
      arg_of (&call.outputs[k], t);
      bc.grad_outputs[k] = call.outputs[k];
      if (g == NULL)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "no %s given", name);
          ok = FALSE;
          break;
        }
      ok = (bufs[nb++] = call.outputs[k].buffer
            = upload (dev, NULL, arg_bytes (&call.outputs[k]), error))
               != NULL
           && (bufs[nb++] = bc.grad_outputs[k].buffer
               = upload (dev, g, arg_bytes (&call.outputs[k]), error))
                  != NULL;
    }
  ok = ok && executor_device_run_op (dev, &call, error)
       && executor_cpu_backward_kernels[op->type](dev, &bc, error);
  for (guint k = 0; ok && k < op->n_inputs; k++)
    if (bc.grad_inputs[k].buffer)
      {
        const PlannerTensor *t = planner_graph_get_tensor (bw->g, op->inputs[k]);
        gsize bytes = arg_bytes (&bc.grad_inputs[k]);
        gpointer host = g_malloc (MAX (bytes, 1));
        ok = executor_device_download (dev, bc.grad_inputs[k].buffer, host, bytes, error);
        g_autofree char *name = g_strconcat ("grad.", t->name, NULL);
        executor_tensors_add (bw->result, name, PLANNER_DTYPE_F32, t->rank, t->shape, host);
      }
  for (guint i = 0; i < nb; i++)
    executor_device_buffer_free (dev, bufs[i]);
  return ok;
}

static gboolean
run_backward (PlannerGraph *g, ExecutorTensors *inputs, const char *gout_path, const char *gin_path,
              GError **error)
{
  if (planner_graph_get_n_ops (g) != 1)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                   "the backward check takes one-op graphs");
      return FALSE;
    }
  g_autoptr (ExecutorTensors) gouts = executor_safetensors_load (gout_path, error);
  if (gouts == NULL)
    return FALSE;
  g_autoptr (ExecutorTensors) result = executor_tensors_new ();
  g_autoptr (PlannerMesh) one = planner_mesh_parse ("a=1", error);
  /* The backward kernels are the CPU's (executor-backward.h), whatever ran the forward. */
  g_autoptr (ExecutorBackend) backend = one ? executor_backend_new ("cpu", one, error) : NULL;
  Backward bw = { g, inputs, gouts, result };
  return backend && executor_backend_run (backend, backward_device, &bw, error)
         && executor_safetensors_save (result, gin_path, error);
}

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
  g_autofree char *gout_path = g_strconcat (prefix, ".gout.safetensors", NULL);
  g_autofree char *gin_path = g_strconcat (prefix, ".gin.safetensors", NULL);
  if (g_file_test (gout_path, G_FILE_TEST_EXISTS)
      && !run_backward (g, inputs, gout_path, gin_path, error))
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
        /* A backend without (enough) devices: the caller skips, with this reason. */
        return g_error_matches (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE) ? 77 : 1;
      }
  return 0;
}
