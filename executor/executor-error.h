/* executor-error.h: the executor's GError domain.
 *
 * Every backend failure (a CUDA or NCCL status, a thread that could not start, a buffer that
 * does not fit) crosses the executor's boundary as one of these codes; backend status codes
 * never leave the backend's own files (style.md 7).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define EXECUTOR_ERROR (executor_error_quark ())

typedef enum
{
  EXECUTOR_ERROR_FAILED,          /* a backend call failed; the message says which */
  EXECUTOR_ERROR_UNKNOWN_BACKEND, /* no backend of that name */
  EXECUTOR_ERROR_NOT_BUILT,       /* a backend this build left out (-Dcuda=, -Dnccl=) */
  EXECUTOR_ERROR_NO_DEVICE,       /* no device answers, or fewer than the mesh needs */
  EXECUTOR_ERROR_OUT_OF_MEMORY,   /* a plan that does not fit, with the numbers */
  EXECUTOR_ERROR_INVALID_PLAN,    /* a plan whose layouts or steps do not chain */
  EXECUTOR_ERROR_UNSUPPORTED,     /* an op or dtype this backend cannot run */
  EXECUTOR_ERROR_ABORTED,         /* another device of the run failed first */
  EXECUTOR_ERROR_BAD_FILE,        /* a checkpoint, token or output file that is not what it
                                   * claims (truncated, offsets out of range, bad header) */
  EXECUTOR_ERROR_WEIGHTS,         /* weights that do not fit the graph: missing, extra or
                                   * misshapen tensors */
} ExecutorError;

GQuark executor_error_quark (void);

G_END_DECLS
