#define G_LOG_DOMAIN "planner-export-jax"

#include "config.h"

#include <string.h>

#include "planner-export-private.h"
#include "planner-export.h"

/* The JAX export (planner-export.h): the mesh, a PartitionSpec per parameter and graph input,
 * and sharding constraints where the plan redistributes an op's input. Elsewhere XLA's GSPMD
 * propagates the layouts from the parameters and inputs as the plan has them; at a
 * redistribution the plan chose where and how the layout changes (a sequence-parallel
 * norm's ReduceScatter, a gather before a projection), so the module pins it there. */

static void
append_spec (GString *out, const PlannerLayout *layout, const PlannerMesh *mesh)
{
  g_string_append (out, "P(");
  for (guint d = 0; d < layout->rank; d++)
    {
      if (d > 0)
        g_string_append (out, ", ");
      if (layout->n_axes[d] == 0)
        g_string_append (out, "None");
      else if (layout->n_axes[d] == 1)
        planner_export_append_python_string (out, mesh->names[layout->axes[d][0]]);
      else
        {
          g_string_append_c (out, '(');
          for (guint i = 0; i < layout->n_axes[d]; i++)
            {
              if (i > 0)
                g_string_append (out, ", ");
              planner_export_append_python_string (out, mesh->names[layout->axes[d][i]]);
            }
          g_string_append_c (out, ')');
        }
    }
  g_string_append_c (out, ')');
}

char *
planner_export_jax (PlannerPlan *plan, GPtrArray *notes, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);

  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const char *name = planner_plan_get_name (plan);
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);
  GString *out = g_string_new (NULL);
  guint counts[PLANNER_N_STEP_KINDS] = { 0 };
  PlannerExportNotes n;

  planner_export_notes_init (&n);
  g_autofree char *about = g_strdup_printf (
      "JAX shardings written by Shardscope from plan %s; mesh: %s; policy: %s.",
      name != NULL ? name : "(unnamed)", mesh_text,
      planner_plan_get_policy (plan) != NULL ? planner_plan_get_policy (plan) : "none");
  g_string_append (out, "# ");
  planner_export_append_escaped (out, about, FALSE);
  g_string_append (
      out, "\n"
           "#\n"
           "# PARAMS: a PartitionSpec per parameter, by its Hugging Face name and in its Hugging\n"
           "# Face shape (a Linear's weight [out, in]; a Flax kernel is its transpose).\n"
           "# INPUTS, OUTPUTS: the graph's inputs and outputs. CONSTRAINTS: op -> the spec\n"
           "# of each of its inputs that the plan redistributes (None: not constrained);\n"
           "# call constrain(op, x, k) on input k before the op. Elsewhere GSPMD propagates\n"
           "# the plan's layouts from the parameters and inputs. OUTPUT_CONSTRAINTS: op ->\n"
           "# the spec of its output, for a vocab-parallel lookup whose partial sums GSPMD\n"
           "# must reduce there; call constrain_output(op, y) on its result. COLLECTIVES:\n"
           "# what the plan's forward pass runs, per kind.\n"
           "#\n"
           "#     mesh = make_mesh()\n"
           "#     params = {k: jax.device_put(v, NamedSharding(mesh, PARAMS[k])) ...}\n"
           "#     jax.jit(forward, in_shardings=...)  with constrain() inside forward\n\n"
           "import jax\n"
           "import numpy as np\n"
           "from jax.sharding import Mesh, NamedSharding\n"
           "from jax.sharding import PartitionSpec as P\n\n");
  g_string_append (out, "PLAN_NAME = ");
  planner_export_append_python_string (out, name != NULL ? name : "");
  g_string_append (out, "\nMESH_SHAPE = (");
  for (guint a = 0; a < mesh->n_axes; a++)
    g_string_append_printf (out, "%s%u", a > 0 ? ", " : "", mesh->sizes[a]);
  g_string_append (out, mesh->n_axes == 1 ? ",)\nMESH_AXES = (" : ")\nMESH_AXES = (");
  for (guint a = 0; a < mesh->n_axes; a++)
    {
      if (a > 0)
        g_string_append (out, ", ");
      planner_export_append_python_string (out, mesh->names[a]);
    }
  g_string_append (out, mesh->n_axes == 1 ? ",)\n\nPARAMS = {\n" : ")\n\nPARAMS = {\n");
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      if (pt->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      g_string_append (out, "    ");
      planner_export_append_python_string (out, pt->name);
      g_string_append (out, ": ");
      append_spec (out, planner_plan_get_tensor_layout (plan, t), mesh);
      g_string_append (out, ",\n");
    }
  g_string_append (out, "}\n\nINPUTS = {\n");
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      if (pt->kind != PLANNER_TENSOR_INPUT)
        continue;
      g_string_append (out, "    ");
      planner_export_append_python_string (out, pt->name);
      g_string_append (out, ": ");
      append_spec (out, planner_plan_get_tensor_layout (plan, t), mesh);
      g_string_append (out, ",\n");
    }
  g_string_append (out, "}\n\nOUTPUTS = {\n");
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      PlannerLayout reduced;
      if (!pt->is_output)
        continue;
      /* A graph output left partial is reduced at the end. */
      reduced = *planner_plan_get_tensor_layout (plan, t);
      reduced.partial = 0;
      g_string_append (out, "    ");
      planner_export_append_python_string (out, pt->name);
      g_string_append (out, ": ");
      append_spec (out, &reduced, mesh);
      g_string_append (out, ",\n");
    }
  g_string_append (out, "}\n\nCONSTRAINTS = {\n");
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS];
      gboolean any = FALSE;

      planner_plan_op_layouts (plan, i, in, NULL);
      for (guint k = 0; k < op->n_inputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (graph, op->inputs[k]);
          any |= t->kind != PLANNER_TENSOR_PARAMETER
                 && !planner_layout_equal (planner_plan_get_tensor_layout (plan, op->inputs[k]),
                                           &in[k])
                 && in[k].partial == 0;
        }
      if (!any)
        continue;
      g_string_append (out, "    ");
      planner_export_append_python_string (out, op->name);
      g_string_append (out, ": (");
      for (guint k = 0; k < op->n_inputs; k++)
        {
          const PlannerTensor *t = planner_graph_get_tensor (graph, op->inputs[k]);
          if (k > 0)
            g_string_append (out, ", ");
          if (t->kind != PLANNER_TENSOR_PARAMETER
              && !planner_layout_equal (planner_plan_get_tensor_layout (plan, op->inputs[k]),
                                        &in[k])
              && in[k].partial == 0)
            append_spec (out, &in[k], mesh);
          else
            g_string_append (out, "None");
        }
      g_string_append (out, op->n_inputs == 1 ? ",),\n" : "),\n");
    }
  g_string_append (out, "}\n\nOUTPUT_CONSTRAINTS = {\n");
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      PlannerLayout outs[PLANNER_MAX_OPERANDS];

      /* A vocab-parallel lookup leaves partial sums (each device adds the rows of its vocab
       * slice). Left free, GSPMD partitions the gather by its indices instead when a
       * sequence split follows (it gathers the token ids over dp, one all-gather more than
       * the plan); pinned to the plan's layout less the partial, it reduces the sums there
       * and the next constraint slices them, the plan's AllReduce or ReduceScatter. */
      if (op->type != PLANNER_OP_EMBEDDING || op->n_outputs != 1)
        continue;
      planner_plan_op_layouts (plan, i, NULL, outs);
      if (outs[0].partial == 0)
        continue;
      outs[0].partial = 0;
      g_string_append (out, "    ");
      planner_export_append_python_string (out, op->name);
      g_string_append (out, ": ");
      append_spec (out, &outs[0], mesh);
      g_string_append (out, ",\n");
    }
  for (guint r = 0; r < planner_plan_get_n_redistributions (plan); r++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (plan, r);
      for (guint s = 0; s < red->n_steps; s++)
        counts[red->steps[s].kind]++;
      if (red->to.partial != 0)
        {
          g_autofree char *rname = planner_store_redistribution_name (plan, r);
          planner_export_note (&n, rname,
                               g_strdup ("a partial-sum input: GSPMD reduces where it needs to"));
        }
    }
  g_string_append_printf (out,
                          "}\n\nCOLLECTIVES = {'all-reduce': %u, 'all-gather': %u, "
                          "'reduce-scatter': %u, 'all-to-all': %u}\n",
                          counts[PLANNER_STEP_ALL_REDUCE], counts[PLANNER_STEP_ALL_GATHER],
                          counts[PLANNER_STEP_REDUCE_SCATTER], counts[PLANNER_STEP_ALL_TO_ALL]);
  g_string_append (
      out,
      "\n\n"
      "def make_mesh(devices=None):\n"
      "    \"\"\"The plan's mesh over the first prod(MESH_SHAPE) devices.\"\"\"\n"
      "    devices = jax.devices() if devices is None else devices\n"
      "    count = int(np.prod(MESH_SHAPE))\n"
      "    return Mesh(np.array(devices[:count]).reshape(MESH_SHAPE), MESH_AXES)\n\n\n"
      "def param_shardings(mesh):\n"
      "    return {name: NamedSharding(mesh, spec) for name, spec in PARAMS.items()}\n\n\n"
      "def constrain(op, x, k=0, mesh=None):\n"
      "    \"\"\"Input @k of @op as the plan lays it out, where the plan redistributes it.\"\"\"\n"
      "    specs = CONSTRAINTS.get(op)\n"
      "    if specs is None or specs[k] is None:\n"
      "        return x\n"
      "    spec = specs[k] if mesh is None else NamedSharding(mesh, specs[k])\n"
      "    return jax.lax.with_sharding_constraint(x, spec)\n\n\n"
      "def constrain_output(op, y, mesh=None):\n"
      "    \"\"\"The output @y of @op as the plan lays it out, where OUTPUT_CONSTRAINTS names "
      "it.\"\"\"\n"
      "    spec = OUTPUT_CONSTRAINTS.get(op)\n"
      "    if spec is None:\n"
      "        return y\n"
      "    spec = spec if mesh is None else NamedSharding(mesh, spec)\n"
      "    return jax.lax.with_sharding_constraint(y, spec)\n");
  g_autoptr (GPtrArray) lines = planner_export_notes_collapse (&n);
  planner_export_notes_publish (lines, notes);
  planner_export_notes_clear (&n);
  (void)error;
  return g_string_free (out, FALSE);
}
