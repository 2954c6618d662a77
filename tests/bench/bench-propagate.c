#define G_LOG_DOMAIN "bench-propagate"

#include "config.h"

#include <stdio.h>

#include "planner-model.h"
#include "planner-policy.h"
#include "planner-propagate.h"

#include "bench-util.h"
#include "test-util.h"

/* Propagation time on big graphs: the 80-layer LLaMA-2-70B shape with the megatron policy and
 * with pins on layer 0 only, and a graph of about 100k ops. Prints the median of repeats, the
 * ops per second, and where the time goes (pin matching and BFS against the plan's finish:
 * layouts, redistributions, conflicts and totals). */

typedef struct
{
  const char *label;
  const char *model;
  gint64 layers;
  const char *mesh;
  const char *policy;       /* or NULL: the layer-0 pins below */
  guint repeats;
} Case;

static int
run (const Case *c)
{
  g_autoptr (GError) error = NULL;
  PlannerModelOptions o;
  planner_model_options_init (&o);
  o.layers = c->layers;
  g_autoptr (PlannerGraph) g = planner_model_load (c->model, &o, &error);
  g_autoptr (PlannerMesh) mesh = g ? planner_mesh_parse (c->mesh, &error) : NULL;
  g_autoptr (PlannerHardware) hw = mesh ? planner_hardware_new_builtin ("h100-sxm", &error)
                                        : NULL;
  g_autoptr (GPtrArray) pins = NULL;
  if (hw && c->policy)
    pins = planner_policy_expand (c->policy, g, mesh, NULL, &error);
  else if (hw)
    {
      pins = g_ptr_array_new_with_free_func ((GDestroyNotify) planner_pin_free);
      for (guint i = 0; i < G_N_ELEMENTS (test_util_llama_layer0_pins) && error == NULL; i++)
        {
          PlannerPin *pin = planner_pin_parse (test_util_llama_layer0_pins[i], mesh, &error);
          if (pin)
            g_ptr_array_add (pins, pin);
        }
    }
  if (error)
    {
      fprintf (stderr, "%s: %s\n", c->label, error->message);
      return 1;
    }

  g_autofree double *total = g_new (double, c->repeats);
  g_autofree double *finish = g_new (double, c->repeats);
  guint n_ops = planner_graph_get_n_ops (g);
  guint n_redist = 0;
  for (guint r = 0; r < c->repeats; r++)
    {
      gint64 start = g_get_monotonic_time ();
      g_autoptr (PlannerPlan) plan = planner_propagate (g, mesh, hw, pins, NULL, &error);
      total[r] = bench_ms_since (start);
      if (plan == NULL)
        {
          fprintf (stderr, "%s: %s\n", c->label, error->message);
          return 1;
        }
      /* The finish again, alone: its share of the total. */
      start = g_get_monotonic_time ();
      planner_plan_finish (plan, FALSE, NULL);
      finish[r] = bench_ms_since (start);
      n_redist = planner_plan_get_n_redistributions (plan);
    }
  double t = bench_median (total, c->repeats), f = bench_median (finish, c->repeats);
  printf ("%-28s %6u ops %5u redistributions: median %8.2f ms over %u repeats, %9.0f ops/s; "
          "finish %.2f ms (%.0f%%), pins + BFS %.2f ms\n",
          c->label, n_ops, n_redist, t, c->repeats, n_ops / (t / 1e3), f, 100 * f / t, t - f);
  return 0;
}

int
main (int argc, char **argv)
{
  const Case cases[] = {
    { "llama-70b megatron dp=8,mp=8", "llama-70b", 0, "dp=8,mp=8", "megatron", 21 },
    { "llama-70b layer-0 pins", "llama-70b", 0, "dp=8,mp=8", NULL, 21 },
    { "llama 4096 layers megatron", "llama", 4096, "dp=8,mp=8", "megatron", 3 },
  };
  int status = 0;
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    status |= run (&cases[i]);
  return status;
}
