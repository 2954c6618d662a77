/* planner-moe.h: what a plan says about its mixture-of-experts layers (planner/README.md,
 * "Mixture of experts"): capacity and load balance from the cost model (planner_cost_moe),
 * and the dispatch and combine redistributions (AllToAlls under expert parallelism) with
 * their bytes and times. */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-cost.h"
#include "planner-plan.h"

G_BEGIN_DECLS

typedef struct
{
  guint64 bytes; /* sent per device, all layers */
  double time_s; /* all layers */
  guint n_steps; /* redistribution steps, all layers */
  guint n_all_to_all;
  char *first; /* the first layer's steps, as planner_redist_path_describe writes them */
} PlannerMoeTraffic;

typedef struct
{
  guint n_layers;             /* MoEDispatch ops */
  PlannerCostMoe cost;        /* the first layer's (a model's layers are alike) */
  PlannerMoeTraffic dispatch; /* into the experts: redistributions of the dispatch's output */
  PlannerMoeTraffic combine;  /* out of them: of the combine's expert input */
  double expert_compute_s;    /* forward, per device: the ops named *.mlp.experts.* */
} PlannerMoeSummary;

/* FALSE (and @summary cleared) when the plan's graph has no MoE layer. */
gboolean planner_moe_summarize (PlannerPlan *plan, PlannerMoeSummary *summary);
void planner_moe_summary_clear (PlannerMoeSummary *summary);
/* Lines for the CLI and the UI, or NULL without MoE layers. */
char *planner_moe_describe (PlannerPlan *plan);
/* {"layers", "experts", "top_k", "tokens_per_group", "capacity", "capacity_factor",
 * "balanced_load", "padding", "dropped_at_2x", "dispatch": {...}, "combine": {...},
 * "expert_compute_us"}, or NULL without MoE layers. */
JsonNode *planner_moe_to_json (PlannerPlan *plan);

G_END_DECLS
