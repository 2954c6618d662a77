/* planner-model.h: where graphs come from (architecture.md, "Data flow").
 *
 * A MODEL is a zoo name (`gpt2`, `llama`, ...), a path to a Hugging Face config.json (its
 * "model_type" picks the builder) or a path to a graph JSON file ("shardscope_graph"). Every
 * graph built here records a source string (planner_graph_get_source()) from which
 * planner_model_load_source() rebuilds an equal graph, so a stored plan can find its model.
 */
#pragma once

#include <glib.h>

#include "planner-graph.h"

G_BEGIN_DECLS

/* Shape overrides; a zero field (or dtype_set FALSE) keeps the model's default: batch 8,
 * sequence 1024 or the model's maximum positions if smaller, the config's torch_dtype (else
 * f32), the config's number of layers. */
typedef struct
{
  gint64 batch;
  gint64 seq;
  gint64 layers;
  gboolean dtype_set;
  PlannerDType dtype;
  /* Model zoo (issue 16); 0 keeps the checkpoint's shapes. pad_vocab: the vocabulary rounded
   * up to a multiple of it, as Megatron-LM pads (the embedding and lm_head grow by the
   * padding rows). kv_replicas: each key/value head repeated that many times, so tensor
   * parallelism over more ranks than kv heads gives each rank a copy of its group's head
   * (Megatron-LM); the checkpoint's parameters are unchanged. */
  gint64 pad_vocab;
  gint64 kv_replicas;
} PlannerModelOptions;

void planner_model_options_init (PlannerModelOptions *options);

/* Hugging Face config.json importer: gpt2, llama, mistral, qwen2, bert, gemma, phi3, gpt_neox,
 * opt, falcon, bloom, vit, t5 (docs/models.md). */
const char *const *planner_hf_model_types (void);
PlannerGraph *planner_hf_import_json (const char *config_json_text,
                                      const PlannerModelOptions *options, GError **error);
PlannerGraph *planner_hf_import_file (const char *path, const PlannerModelOptions *options,
                                      GError **error);

/* The zoo: configs shipped in the planner's GResource. */
const char *const *planner_zoo_names (void);
/* One line: family, layers, hidden size, parameter count; NULL for an unknown name. */
char *planner_zoo_describe (const char *name);
PlannerGraph *planner_zoo_build (const char *name, const PlannerModelOptions *options,
                                 GError **error);

/* MODEL as the CLI takes it (see above). @options may be NULL. */
PlannerGraph *planner_model_load (const char *model, const PlannerModelOptions *options,
                                  GError **error);
/* Rebuilds a graph from planner_graph_get_source(): "gpt2?batch=8&seq=1024&layers=12&dtype=f32",
 * "/abs/config.json?batch=...", "/abs/graph.json". */
PlannerGraph *planner_model_load_source (const char *source, GError **error);

/* Graph JSON, version 1 (planner/README.md): writing and reading back gives a graph equal by
 * planner_graph_equal(). Reading validates everything and refuses bad files with a GError. */
#define PLANNER_GRAPH_JSON_VERSION 1

char *planner_graph_to_json (PlannerGraph *graph);
PlannerGraph *planner_graph_from_json (const char *text, GError **error);
gboolean planner_graph_save_json (PlannerGraph *graph, const char *path, GError **error);
PlannerGraph *planner_graph_load_json (const char *path, GError **error);

G_END_DECLS
