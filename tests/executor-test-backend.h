/* executor-test-backend.h: which backend the executor tests run on.
 *
 * SHARDSCOPE_TEST_BACKEND names it (cpu when unset): the executor suite runs the tests on
 * cpu, the gpu suite runs the same programs on cuda and nccl. A GPU backend without a
 * device for the mesh (no GPU, or fewer GPUs than nccl needs) skips the test with the
 * backend's reason, "no CUDA device: ..."; a skip is never a pass.
 */
#pragma once

#include <glib.h>

#include "executor-error.h"

static inline const char *
test_backend (void)
{
  const char *name = g_getenv ("SHARDSCOPE_TEST_BACKEND");
  return name && *name ? name : "cpu";
}

/* TRUE, with the test marked skipped, when @error says the backend has no device. */
static inline gboolean
test_backend_skips (const GError *error)
{
  if (error == NULL || g_str_equal (test_backend (), "cpu")
      || !g_error_matches (error, EXECUTOR_ERROR, EXECUTOR_ERROR_NO_DEVICE))
    return FALSE;
  g_test_skip (error->message);
  return TRUE;
}
