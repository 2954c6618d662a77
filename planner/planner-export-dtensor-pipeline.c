#define G_LOG_DOMAIN "planner-export-dtensor"

#include "config.h"

#include <string.h>

#include "planner-error.h"
#include "planner-export-private.h"
#include "planner-pipeline.h"
#include "planner-request.h"
#include "planner-resources.h"

/* The DTensor script's pipeline (issue 18): with a mesh axis pp, the plan's layer chunks
 * become torch.distributed.pipelining stages. The script keeps, on each rank, a copy of the
 * Hugging Face model per chunk it runs, with the other chunks' layers as pass-throughs, the
 * modules before the first layer on chunk 0 and those after the last on the last chunk
 * (data/exports/dtensor-pipeline.py); this file writes the split and the schedule the plan
 * chose. Within a stage the plan's layouts never name pp, so the tensor-parallel and FSDP
 * part of the script is the same as without a pipeline. */

static void
append_names (GString *out, GPtrArray *names)
{
  g_string_append_c (out, '(');
  for (guint i = 0; i < names->len; i++)
    {
      if (i > 0)
        g_string_append (out, ", ");
      planner_export_append_python_string (out, g_ptr_array_index (names, i));
    }
  g_string_append (out, names->len == 1 ? ",)" : ")");
}

static const char *
schedule_class (PlannerSchedule schedule)
{
  switch (schedule)
    {
    case PLANNER_SCHEDULE_GPIPE:
      return "ScheduleGPipe";
    case PLANNER_SCHEDULE_INTERLEAVED:
      return "ScheduleInterleaved1F1B";
    default:
      return "Schedule1F1B";
    }
}

gboolean
planner_export_dtensor_pipeline (GString *out, PlannerPlan *plan, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), FALSE);

  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autoptr (GError) local = NULL;
  g_autoptr (PlannerPipeline) pl = planner_pipeline_new (plan, FALSE, &local);

  if (pl == NULL && local != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (pl == NULL)
    {
      g_string_append (out, "PP_DIM = None  # no pipeline axis\n");
      return TRUE;
    }

  /* The list module of the layers ("model.layers"), and the modules with parameters outside
   * every layer: with the first chunk before the first layer, with the last after it. */
  g_autofree char *layer_list = NULL;
  g_autoptr (GPtrArray) first = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) last = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) refusals = g_ptr_array_new_with_free_func (g_free);
  guint n_ops = planner_graph_get_n_ops (graph);

  for (guint i = 0; i < n_ops; i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      gsize prefix = 0;
      int layer = planner_op_block (op->name, &prefix);
      if (layer >= 0)
        {
          /* prefix ends after the layer number: the list is the name before ".N". */
          const char *dot = g_strrstr_len (op->name, (gssize)prefix, ".");
          g_autofree char *list = g_strndup (op->name, dot != NULL ? (gsize)(dot - op->name) : 0);
          if (layer_list == NULL)
            layer_list = g_steal_pointer (&list);
          else if (strcmp (list, layer_list) != 0 && refusals->len < 12)
            g_ptr_array_add (refusals,
                             g_strdup_printf ("%s: its layer is in %s, the others' in %s; the "
                                              "pipeline splits one list of layers",
                                              op->name, list, layer_list));
          continue;
        }
      /* Before the first layer a later chunk is handed the hidden states as inputs_embeds,
       * and its embedding modules become stand-ins (the token table absent, an additive one
       * such as GPT-2's positions zero). Whatever else the model's forward does to the
       * embeddings there (Gemma's scale, BLOOM's embedding LayerNorm, OPT-350m's
       * project_in) would be dropped or done twice: refused. */
      if (pl->op_chunk[i] == 0 && op->type != PLANNER_OP_EMBEDDING && op->type != PLANNER_OP_ADD
          && op->type != PLANNER_OP_SLICE && op->type != PLANNER_OP_DROPOUT
          && refusals->len < 12)
        g_ptr_array_add (refusals,
                         g_strdup_printf ("%s (%s): runs on the embeddings before the first "
                                          "layer, where a later chunk's forward gets hidden "
                                          "states; the script's stand-ins cannot keep it "
                                          "(the pipeline runs models whose embeddings only "
                                          "look up and add, as llama, mistral, qwen2, gpt2)",
                                          op->name, planner_op_type_to_string (op->type)));
      if (!planner_export_has_parameter_input (graph, op))
        continue;
      GPtrArray *side = pl->op_chunk[i] == 0 ? first : last;
      if (!g_ptr_array_find_with_equal_func (side, op->name, g_str_equal, NULL))
        g_ptr_array_add (side, g_strdup (op->name));
    }
  /* A parameter used on two chunks (a tied embedding and lm_head) would need its gradients
   * summed between stages, which the script does not do. */
  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      const PlannerTensor *pt = planner_graph_get_tensor (graph, t);
      if (pt->kind != PLANNER_TENSOR_PARAMETER)
        continue;
      for (guint c = 1; c < pt->consumers->len; c++)
        {
          guint a = g_array_index (pt->consumers, PlannerUse, 0).op;
          guint b = g_array_index (pt->consumers, PlannerUse, c).op;
          if (pl->op_chunk[a] != pl->op_chunk[b])
            {
              g_ptr_array_add (refusals,
                               g_strdup_printf ("%s: used by %s on chunk %d and by %s on chunk "
                                                "%d; the script does not sum a shared "
                                                "parameter's gradients between stages (untie "
                                                "it: tie_word_embeddings false)",
                                                pt->name, planner_graph_get_op (graph, a)->name,
                                                pl->op_chunk[a],
                                                planner_graph_get_op (graph, b)->name,
                                                pl->op_chunk[b]));
              break;
            }
        }
    }
  if (layer_list == NULL)
    g_ptr_array_add (refusals, g_strdup ("no op is in a numbered layer (model.layers.N); the "
                                         "pipeline splits the model by its layers"));
  if (refusals->len > 0)
    {
      GString *text = g_string_new (NULL);
      for (guint i = 0; i < refusals->len; i++)
        g_string_append_printf (text, "\n  %s", (const char *)g_ptr_array_index (refusals, i));
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_INVALID_STRATEGY,
                   "the DTensor export cannot run this plan's pipeline over %s (%u reason%s):%s",
                   mesh->names[pl->axis], refusals->len, refusals->len == 1 ? "" : "s",
                   text->str);
      g_string_free (text, TRUE);
      return FALSE;
    }

  /* The header's usage lines are those of a model without a pipeline: these replace them. */
  g_string_append_printf (out,
                          "\n# Pipeline over %s: chunk c runs CHUNK_LAYERS[c] of %s on the "
                          "ranks whose %s coordinate\n# is c %% %u; %s, %u micro-batches "
                          "per step. On every rank, instead of parallelize():\n"
                          "#     schedule, chunks, mesh = build_pipeline(model)   # this "
                          "rank's chunks, each parallelized\n"
                          "#     loss, logits = pipeline_step(schedule, chunks, mesh, "
                          "input_ids[local_rows(mesh, len(input_ids))])\n"
                          "#     for chunk in chunks: optimizer over chunk.parameters()\n",
                          mesh->names[pl->axis], layer_list, mesh->names[pl->axis], pl->p,
                          schedule_class (pl->schedule), pl->m);
  g_string_append (out, "PP_DIM = ");
  planner_export_append_python_string (out, mesh->names[pl->axis]);
  g_string_append_printf (out, "\nSCHEDULE = '%s'\nMICRO_BATCHES = %u\nVIRTUAL_STAGES = %u\n",
                          schedule_class (pl->schedule), pl->m, pl->v);
  g_string_append (out, "LAYER_LIST = ");
  planner_export_append_python_string (out, layer_list);
  g_string_append_printf (out, "\nPIPELINE_LAYERS = %u\nCHUNK_LAYERS = (", pl->n_layers);
  /* Each chunk's layers as a tuple of ints: plain literals, like the rest of the data. */
  for (guint c = 0; c < pl->n_chunks; c++)
    {
      g_string_append (out, c > 0 ? ", (" : "(");
      for (int l = pl->chunk_first[c]; l <= pl->chunk_last[c]; l++)
        g_string_append_printf (out, "%s%d", l > pl->chunk_first[c] ? ", " : "", l);
      g_string_append (out, pl->chunk_first[c] == pl->chunk_last[c] ? ",)" : ")");
    }
  g_string_append (out, pl->n_chunks == 1 ? ",)\nFIRST_MODULES = " : ")\nFIRST_MODULES = ");
  append_names (out, first);
  g_string_append (out, "\nLAST_MODULES = ");
  append_names (out, last);
  g_string_append_c (out, '\n');

  g_autoptr (GBytes) bytes = planner_resources_lookup ("exports/dtensor-pipeline.py", error);
  if (bytes == NULL)
    return FALSE;
  gsize size;
  const char *data = g_bytes_get_data (bytes, &size);
  g_string_append_len (out, data, (gssize)size);
  return TRUE;
}
