#define G_LOG_DOMAIN "planner-error"

#include "config.h"

#include "planner-error.h"

G_DEFINE_QUARK (planner-error-quark, planner_error)
