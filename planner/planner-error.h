/* planner-error.h: the planner's GError domain.
 *
 * Every refusal of the planner is one of these codes, with a message that names the op,
 * the tensor, the dim, the sizes and the axes, and says what would work (semantics.md 8).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define PLANNER_ERROR (planner_error_quark ())

typedef enum
{
  PLANNER_ERROR_PARSE,            /* text that does not parse: layout, mesh, pin */
  PLANNER_ERROR_INVALID_MESH,     /* bad axis name or size, duplicate axis */
  PLANNER_ERROR_UNKNOWN_AXIS,     /* a layout or pin names an axis the mesh lacks */
  PLANNER_ERROR_AXIS_REUSED,      /* an axis used twice in one layout or strategy */
  PLANNER_ERROR_INVALID_LAYOUT,   /* rank mismatch and other structural errors */
  PLANNER_ERROR_NOT_DIVISIBLE,    /* a split that does not divide a dim or factor */
  PLANNER_ERROR_INVALID_GRAPH,    /* dangling tensors, cycles, duplicate names */
  PLANNER_ERROR_SHAPE_MISMATCH,   /* shapes that do not fit an op's rule */
  PLANNER_ERROR_UNKNOWN_OP_TYPE,  /* an op type the planner has no rule for */
  PLANNER_ERROR_UNKNOWN_OP,       /* a pin or lookup naming no op */
  PLANNER_ERROR_INVALID_STRATEGY, /* a strategy the op's rule refuses */
  PLANNER_ERROR_MALFORMED_FILE,   /* JSON that does not parse or lacks fields */
  PLANNER_ERROR_UNKNOWN_MODEL,    /* a zoo name, model_type or architecture we cannot build */
  PLANNER_ERROR_UNKNOWN_POLICY,
  PLANNER_ERROR_UNKNOWN_HARDWARE,
  PLANNER_ERROR_CONFLICT,         /* pins that cannot all hold (tied parameters) */
  PLANNER_ERROR_STORE,            /* the plan store refused or is damaged */
  PLANNER_ERROR_IO,
} PlannerError;

GQuark planner_error_quark (void);

G_END_DECLS
