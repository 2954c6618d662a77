/* planner-model-private.h: what the importer, the zoo and the graph JSON reader share. */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-json.h"
#include "planner-model.h"

G_BEGIN_DECLS

/* Builds a graph from a parsed config.json. @what names the config in messages; the graph's
 * source is "SOURCE_BASE?batch=..&seq=..&layers=..&dtype=.." and its name @name, or the
 * config's architecture when NULL. */
PlannerGraph *planner_hf_build (JsonObject *config, const PlannerModelOptions *options,
                                const char *what, const char *source_base, const char *name,
                                GError **error);
/* Sources of graphs imported from text (planner_hf_import_json()) carry the text. */
#define PLANNER_HF_TEXT_SOURCE_SCHEME "hf-config:"
PlannerGraph *planner_hf_import_text_source (const char *base, const PlannerModelOptions *options,
                                             GError **error);
/* Family, architecture, layers and hidden size of a config, for one-line descriptions. */
gboolean planner_hf_summary (JsonObject *config, const char *what, const char **model_type,
                             const char **architecture, gint64 *layers, gint64 *hidden,
                             GError **error);
/* Refuses negative overrides (zero means default). */
gboolean planner_model_options_check (const PlannerModelOptions *options, GError **error);
gboolean planner_model_options_is_default (const PlannerModelOptions *options);

PlannerGraph *planner_graph_from_json_node (JsonNode *root, GError **error);

G_END_DECLS
