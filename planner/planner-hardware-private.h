/* planner-hardware-private.h: the profile's "efficiency" object, read and written apart from
 * the rest of the profile (planner-hardware-efficiency.c). */
#pragma once

#include <json-glib/json-glib.h>

#include "planner-hardware.h"
#include "planner-json.h"

G_BEGIN_DECLS

/* Datasheet peak: GEMMs, flash attention and memory-bound ops at 100%, no launch cost. */
void planner_hardware_efficiency_init (PlannerEfficiency *efficiency);
gboolean planner_hardware_efficiency_is_default (const PlannerEfficiency *efficiency);
gboolean planner_hardware_efficiency_equal (const PlannerEfficiency *a, const PlannerEfficiency *b);
/* The member "efficiency" of @profile; refusals name the field ("efficiency.gemm[2]"). */
gboolean planner_hardware_read_efficiency (PlannerJsonReader *r, JsonObject *profile,
                                           PlannerEfficiency *efficiency);
/* "  \"efficiency\": {...}" without a trailing comma or newline. */
void planner_hardware_append_efficiency (GString *out, const PlannerEfficiency *efficiency);
/* The member "runtime_memory" of @profile into @efficiency's runtime and allocator numbers,
 * and back ("  \"runtime_memory\": {...}" without a trailing comma or newline). */
gboolean planner_hardware_runtime_memory_is_default (const PlannerEfficiency *efficiency);
gboolean planner_hardware_read_runtime_memory (PlannerJsonReader *r, JsonObject *profile,
                                               PlannerEfficiency *efficiency);
void planner_hardware_append_runtime_memory (GString *out, const PlannerEfficiency *efficiency);

G_END_DECLS
