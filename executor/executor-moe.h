/* executor-moe.h: the kernels of the mixture-of-experts op types (Sigmoid, MoERouter,
 * MoEDispatch, MoECombine; planner/README.md "Mixture of experts"). The CPU backend runs
 * them (executor-cpu-moe.c); the CUDA backends refuse them by name. */
#pragma once

#include "executor-backend.h"
#include "executor-backward.h"
#include "executor-tensors.h"

G_BEGIN_DECLS

gboolean executor_cpu_sigmoid (ExecutorDevice *device, const ExecutorOpCall *call, GError **error);
gboolean executor_cpu_moe_router (ExecutorDevice *device, const ExecutorOpCall *call,
                                  GError **error);
gboolean executor_cpu_moe_dispatch (ExecutorDevice *device, const ExecutorOpCall *call,
                                    GError **error);
gboolean executor_cpu_moe_combine (ExecutorDevice *device, const ExecutorOpCall *call,
                                   GError **error);

gboolean executor_cpu_sigmoid_backward (ExecutorDevice *device, const ExecutorBackwardCall *call,
                                        GError **error);
gboolean executor_cpu_moe_router_backward (ExecutorDevice *device, const ExecutorBackwardCall *call,
                                           GError **error);
gboolean executor_cpu_moe_dispatch_backward (ExecutorDevice *device,
                                             const ExecutorBackwardCall *call, GError **error);
gboolean executor_cpu_moe_combine_backward (ExecutorDevice *device,
                                            const ExecutorBackwardCall *call, GError **error);

/* Checkpoints in the hub's per-expert layout (what transformers 5's save_pretrained still
 * writes): Mixtral's "P.block_sparse_moe.experts.N.w1/w3/w2.weight" (gate, up [I, H]; down
 * [H, I]) and "P.block_sparse_moe.gate.weight", Qwen2-MoE's "P.mlp.experts.N.gate_proj/up_proj/
 * down_proj.weight", become the graph's "P.mlp.experts.gate_up_proj" [E, 2I, H] (gate rows
 * first, then up, as transformers fuses them), "P.mlp.experts.down_proj" [E, H, I] and
 * "P.mlp.gate.weight", for every such parameter of @graph that @weights lacks and whose pieces
 * are all there with their shapes. Anything else is left for executor_tensors_check_parameters
 * to report. Returns the number of graph parameters made. */
guint executor_moe_checkpoint_convert (ExecutorTensors *weights, PlannerGraph *graph);

/* For a backend without these kernels: EXECUTOR_ERROR_UNSUPPORTED naming the op and its type. */
gboolean executor_kernel_not_on_backend (ExecutorDevice *device, const ExecutorOpCall *call,
                                         GError **error);

/* Entries of a backend's kernel table (EXECUTOR_KERNEL_TABLE): a backend defines k_sigmoid,
 * k_moe_router, k_moe_dispatch and k_moe_combine. */
#define EXECUTOR_MOE_KERNEL_ENTRIES                                                                \
  [PLANNER_OP_SIGMOID] = k_sigmoid, [PLANNER_OP_MOE_ROUTER] = k_moe_router,                        \
  [PLANNER_OP_MOE_DISPATCH] = k_moe_dispatch, [PLANNER_OP_MOE_COMBINE] = k_moe_combine,

#define EXECUTOR_MOE_BACKWARD_ENTRIES                                                              \
  [PLANNER_OP_SIGMOID] = executor_cpu_sigmoid_backward,                                            \
  [PLANNER_OP_MOE_ROUTER] = executor_cpu_moe_router_backward,                                      \
  [PLANNER_OP_MOE_DISPATCH] = executor_cpu_moe_dispatch_backward,                                  \
  [PLANNER_OP_MOE_COMBINE] = executor_cpu_moe_combine_backward,

G_END_DECLS
