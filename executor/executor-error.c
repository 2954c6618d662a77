#define G_LOG_DOMAIN "executor-error"

#include "config.h"

#include "executor-error.h"

G_DEFINE_QUARK (executor-error-quark, executor_error)
