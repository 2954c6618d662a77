#define G_LOG_DOMAIN "executor-moe"

#include "config.h"

#include <string.h>

#include "executor-moe.h"

/* Hub checkpoints of mixture-of-experts models keep one matrix per expert; the graph, as
 * transformers 5 builds the model, one 3-D tensor per layer (executor-moe.h). */

/* An expert's matrix is "<layer prefix><experts>N.<leaf>". */
typedef struct
{
  const char *router; /* relative to the layer prefix; NULL: it keeps its name */
  const char *experts;
  const char *gate, *up, *down;
} Layout;

static const Layout layouts[] = {
  /* Mixtral: w1 gate, w3 up, w2 down. */
  { "block_sparse_moe.gate.weight", "block_sparse_moe.experts.", "w1.weight", "w3.weight",
    "w2.weight" },
  { NULL, "mlp.experts.", "gate_proj.weight", "up_proj.weight", "down_proj.weight" },
};

static char *
piece_of (const char *prefix, const Layout *layout, const char *leaf, int e)
{
  return g_strdup_printf ("%s%s%d.%s", prefix, layout->experts, e, leaf);
}

static gboolean
has_shape (const ExecutorHostTensor *t, gint64 rows, gint64 cols)
{
  return t != NULL && t->dtype == PLANNER_DTYPE_F32 && t->rank == 2 && t->shape[0] == rows
         && t->shape[1] == cols;
}

/* Whether every piece of @layout is in @weights for @E experts of [I, H]. */
static gboolean
complete (ExecutorTensors *weights, const Layout *layout, const char *prefix, gint64 E, gint64 I,
          gint64 H)
{
  for (int e = 0; e < E; e++)
    {
      g_autofree char *g = piece_of (prefix, layout, layout->gate, e),
                      *u = piece_of (prefix, layout, layout->up, e),
                      *d = piece_of (prefix, layout, layout->down, e);
      if (!has_shape (executor_tensors_lookup (weights, g), I, H)
          || !has_shape (executor_tensors_lookup (weights, u), I, H)
          || !has_shape (executor_tensors_lookup (weights, d), H, I))
        return FALSE;
    }
  return TRUE;
}

static void
convert_layer (ExecutorTensors *weights, const Layout *layout, const char *prefix, gint64 E,
               gint64 I, gint64 H)
{
  const gint64 gate_up_shape[] = { E, 2 * I, H }, down_shape[] = { E, H, I };
  float *gate_up = g_new (float, E * 2 * I * H), *down = g_new (float, E *H *I);

  for (int e = 0; e < E; e++)
    {
      g_autofree char *g = piece_of (prefix, layout, layout->gate, e),
                      *u = piece_of (prefix, layout, layout->up, e),
                      *d = piece_of (prefix, layout, layout->down, e);
      const gsize block = (gsize)(I * H) * sizeof (float);
      memcpy (gate_up + e * 2 * I * H, executor_tensors_lookup (weights, g)->data, block);
      memcpy (gate_up + (e * 2 + 1) * I * H, executor_tensors_lookup (weights, u)->data, block);
      memcpy (down + e * H * I, executor_tensors_lookup (weights, d)->data, block);
      executor_tensors_remove (weights, g);
      executor_tensors_remove (weights, u);
      executor_tensors_remove (weights, d);
    }
  g_autofree char *gu_name = g_strconcat (prefix, "mlp.experts.gate_up_proj", NULL);
  g_autofree char *down_name = g_strconcat (prefix, "mlp.experts.down_proj", NULL);
  executor_tensors_add (weights, gu_name, PLANNER_DTYPE_F32, 3, gate_up_shape, gate_up);
  executor_tensors_add (weights, down_name, PLANNER_DTYPE_F32, 3, down_shape, down);
  if (layout->router != NULL)
    {
      g_autofree char *from = g_strconcat (prefix, layout->router, NULL);
      g_autofree char *to = g_strconcat (prefix, "mlp.gate.weight", NULL);
      const ExecutorHostTensor *r = executor_tensors_lookup (weights, from);
      if (r != NULL && executor_tensors_lookup (weights, to) == NULL)
        {
          gpointer data = g_memdup2 (r->data, (gsize)executor_host_tensor_numel (r) * 4);
          executor_tensors_add (weights, to, r->dtype, r->rank, r->shape, data);
          executor_tensors_remove (weights, from);
        }
    }
}

guint
executor_moe_checkpoint_convert (ExecutorTensors *weights, PlannerGraph *graph)
{
  static const char suffix[] = "mlp.experts.gate_up_proj";
  guint made = 0;

  g_return_val_if_fail (weights != NULL && PLANNER_IS_GRAPH (graph), 0);
  for (guint i = 0; i < planner_graph_get_n_tensors (graph); i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, i);
      if (t->kind != PLANNER_TENSOR_PARAMETER || !g_str_has_suffix (t->name, suffix) || t->rank != 4
          || executor_tensors_lookup (weights, t->name) != NULL)
        continue;
      /* The graph's view: [E, 2, I, H]. */
      const gint64 E = t->shape[0], I = t->shape[2], H = t->shape[3];
      g_autofree char *prefix = g_strndup (t->name, strlen (t->name) - strlen (suffix));
      for (guint l = 0; l < G_N_ELEMENTS (layouts); l++)
        if (complete (weights, &layouts[l], prefix, E, I, H))
          {
            convert_layer (weights, &layouts[l], prefix, E, I, H);
            made += 2;
            break;
          }
    }
  return made;
}
