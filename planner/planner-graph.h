/* planner-graph.h: the operator graph (semantics.md 1).
 *
 * Ops are stored in topological order: an op can only be added once its inputs exist, so the
 * insertion index is the topological index and every order the planner uses derives from it.
 */
#pragma once

#include <glib-object.h>

#include "planner-op-rule.h"

G_BEGIN_DECLS

/* All of a graph's tensors hold at most this many bytes (an exabyte): every byte count of the
 * planner, summed or subtracted, then stays exact in 64 bits. */
#define PLANNER_MAX_GRAPH_BYTES (G_GUINT64_CONSTANT (1) << 60)

typedef enum
{
  PLANNER_TENSOR_ACTIVATION,
  PLANNER_TENSOR_PARAMETER,
  PLANNER_TENSOR_INPUT,
} PlannerTensorKind;

typedef struct
{
  guint op;
  guint slot;
} PlannerUse;

typedef struct
{
  char *name;
  PlannerDType dtype;
  PlannerTensorKind kind;
  guint rank;
  gint64 shape[PLANNER_MAX_RANK];
  int producer;         /* op index, -1 for parameters and graph inputs */
  guint producer_slot;
  GArray *consumers;    /* PlannerUse, in consumer topological order */
  gboolean is_output;
} PlannerTensor;

typedef struct
{
  char *name;
  PlannerOpType type;
  PlannerOpAttrs attrs;
  guint n_inputs;
  guint *inputs;        /* tensor ids */
  guint n_outputs;
  guint *outputs;
  PlannerOpRule rule;
} PlannerOp;

#define PLANNER_TYPE_GRAPH (planner_graph_get_type ())
G_DECLARE_FINAL_TYPE (PlannerGraph, planner_graph, PLANNER, GRAPH, GObject)

PlannerGraph *planner_graph_new (void);

/* Model metadata, kept for the store and the UI. */
const char *planner_graph_get_name (PlannerGraph *self);
void planner_graph_set_name (PlannerGraph *self, const char *name);
const char *planner_graph_get_source (PlannerGraph *self);
void planner_graph_set_source (PlannerGraph *self, const char *source);

/* Returns the tensor id, or -1 with @error set (duplicate name, bad shape). */
int planner_graph_add_input (PlannerGraph *self, const char *name, PlannerDType dtype, guint rank,
                             const gint64 *shape, GError **error);
int planner_graph_add_parameter (PlannerGraph *self, const char *name, PlannerDType dtype,
                                 guint rank, const gint64 *shape, GError **error);
/* Adds an op whose inputs already exist; builds its rule and its output tensors (named
 * @output_names[i], or "NAME" for a single output and "NAME:i" otherwise when NULL).
 * Returns the op index, or -1 with @error set. */
int planner_graph_add_op (PlannerGraph *self, const char *name, PlannerOpType type,
                          const PlannerOpAttrs *attrs, const guint *inputs, guint n_inputs,
                          guint n_outputs, const char *const *output_names, GError **error);
/* The single output tensor id of op @op_index (convenience for builders). */
guint planner_graph_op_output (PlannerGraph *self, guint op_index, guint slot);
void planner_graph_mark_output (PlannerGraph *self, guint tensor);

guint planner_graph_get_n_ops (PlannerGraph *self);
const PlannerOp *planner_graph_get_op (PlannerGraph *self, guint index);
guint planner_graph_get_n_tensors (PlannerGraph *self);
const PlannerTensor *planner_graph_get_tensor (PlannerGraph *self, guint index);
int planner_graph_find_op (PlannerGraph *self, const char *name);
int planner_graph_find_tensor (PlannerGraph *self, const char *name);
/* Graph output tensor ids, in the order they were marked. */
const GArray *planner_graph_get_outputs (PlannerGraph *self);

guint64 planner_graph_get_parameter_count (PlannerGraph *self);
guint64 planner_graph_get_parameter_bytes (PlannerGraph *self);
double planner_graph_get_flops (PlannerGraph *self);
guint64 planner_tensor_numel (const PlannerTensor *tensor);
guint64 planner_tensor_bytes (const PlannerTensor *tensor);

/* Every tensor has one producer or is an input/parameter, no dangling ids, shapes agree
 * with the rules, at least one output. */
gboolean planner_graph_check (PlannerGraph *self, GError **error);
/* Structural hash (names, types, attrs, shapes, dtypes, edges) as lowercase hex SHA-256. */
char *planner_graph_hash (PlannerGraph *self);
/* Graphs equal in every op, tensor and edge. */
gboolean planner_graph_equal (PlannerGraph *a, PlannerGraph *b);

G_END_DECLS
