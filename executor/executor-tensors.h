/* executor-tensors.h: named host tensors, in the executor's storage dtypes (f32 for every
 * float dtype, i64 for ids and labels), and the files they come from and go to: safetensors
 * (Hugging Face checkpoints, `run --weights/--outputs`) and .npy token ids (`run --tokens`).
 *
 * Every reader treats its file as hostile: each size and offset is bounded by the file before
 * it is used, and what does not fit is a GError naming the file, the tensor and the numbers.
 */
#pragma once

#include <glib.h>

#include "planner-graph.h"

G_BEGIN_DECLS

typedef struct
{
  char *name;
  PlannerDType dtype; /* as stored: PLANNER_DTYPE_F32 or PLANNER_DTYPE_I64 */
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  gpointer data; /* numel elements of 4 (f32) or 8 (i64) bytes */
} ExecutorHostTensor;

/* An ordered set of host tensors with unique names. */
typedef struct _ExecutorTensors ExecutorTensors;

ExecutorTensors *executor_tensors_new (void);
void executor_tensors_free (ExecutorTensors *self);
/* Takes @data (g_malloc'd, numel x storage size bytes); a name already in the set is
 * replaced. */
ExecutorHostTensor *executor_tensors_add (ExecutorTensors *self, const char *name,
                                          PlannerDType dtype, guint rank, const gint64 *shape,
                                          gpointer data);
const ExecutorHostTensor *executor_tensors_lookup (ExecutorTensors *self, const char *name);
guint executor_tensors_get_n (ExecutorTensors *self);
const ExecutorHostTensor *executor_tensors_get_nth (ExecutorTensors *self, guint i);
/* Drops the tensor @name (and its data); FALSE when there is none. The others keep their
 * order. */
gboolean executor_tensors_remove (ExecutorTensors *self, const char *name);
gint64 executor_host_tensor_numel (const ExecutorHostTensor *t);

/* Whether a tensor stored as @have may fill a graph tensor of @want: the same shape, or the
 * same elements with adjacent dims merged (Hugging Face stores GPT-2's c_attn weight as
 * [H, 3H], the graph views it as [H, 3, heads, head_dim]). */
gboolean executor_shape_is_view_of (const gint64 *have, guint have_rank, const gint64 *want,
                                    guint want_rank);

/* @weights against the parameters of @graph, by name: every parameter present with a float
 * dtype and a shape executor_shape_is_view_of() accepts, and no tensor that is not a
 * parameter (buffers Hugging Face saves beside the weights, such as GPT-2's attn.bias causal
 * masks and BERT's position_ids, are ignored). The error lists what is missing, extra or
 * misshapen. */
gboolean executor_tensors_check_parameters (ExecutorTensors *weights, PlannerGraph *graph,
                                            GError **error);

/* A safetensors file; a folder as save_pretrained writes it (model.safetensors, or
 * model.safetensors.index.json and its shards); or an index file. F32, F16, BF16 and F64
 * become f32, I64 and I32 become i64; other dtypes are refused. */
ExecutorTensors *executor_safetensors_load (const char *path, GError **error);
/* Writes every tensor of @tensors (F32 or I64) in their order. */
gboolean executor_safetensors_save (ExecutorTensors *tensors, const char *path, GError **error);

/* A .npy array of int32 or int64 (little-endian, C order) as an i64 tensor called @name,
 * added to @into. */
gboolean executor_npy_load_ids (const char *path, const char *name, ExecutorTensors *into,
                                GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ExecutorTensors, executor_tensors_free)

G_END_DECLS
