/* executor-backward.h: the backward (vector-Jacobian product) of every op type, on the CPU
 * (issue 13, the training step's first part).
 *
 * A backward call sees the forward call (inputs and outputs hold the forward's values) and
 * the gradients of the outputs; it writes (not adds) the gradient of every float input whose
 * buffer is given (NULL for ids, labels and inputs that need none). Today's kernels are the
 * unsharded reference: what a shard's local backward and the backward collectives of a plan
 * (the f/g operators of tensor parallelism, the data-parallel gradient AllReduce) need on
 * top is issue 13's remaining work, listed in executor/README.md.
 */
#pragma once

#include "executor-backend.h"

G_BEGIN_DECLS

typedef struct
{
  const ExecutorOpCall *fwd;
  ExecutorTensorArg grad_outputs[PLANNER_MAX_OPERANDS];
  ExecutorTensorArg grad_inputs[PLANNER_MAX_OPERANDS]; /* buffer NULL: not wanted */
} ExecutorBackwardCall;

typedef gboolean (*ExecutorBackwardFunc) (ExecutorDevice *device, const ExecutorBackwardCall *call,
                                          GError **error);

/* The CPU backend's backward of each op type (executor-cpu-backward.c); every entry is set. */
extern const ExecutorBackwardFunc executor_cpu_backward_kernels[PLANNER_N_OP_TYPES];

G_END_DECLS
