#define G_LOG_DOMAIN "planner-hardware"

#include "config.h"

#include <math.h>
#include <string.h>

#include "planner-hardware-private.h"

/* The profile's "efficiency" object (planner/README.md, "Efficiency"):
 *
 *   "efficiency": {
 *     "gemm": [[256, 0.35], [1024, 0.65], [4096, 0.8]],
 *     "attention_flash": { "forward": 0.55, "backward": 0.4 },
 *     "memory_bound": 0.75,
 *     "kernel_launch_us": 3,
 *     "nics_per_node": 8,
 *     "nvls_bandwidth_GBps": 450,
 *     "attention": [
 *       { "kernel": "flash", "causal": true, "head_dim": 128, "points": [[2048, 0.5]] }
 *     ],
 *     "overlap_slowdown": 0.19
 *   }
 *
 * Every member is optional; an absent one keeps the datasheet-peak default. */

/* The collective model's numbers (planner/README.md, "Collectives by message size"): each
 * optional, >= 0 and at most its bound; absent or 0 leaves that part of the model off. */
static const struct
{
  const char *name;
  gsize offset;
  double max;
} collective_numbers[] = {
  { "ll_base_us", G_STRUCT_OFFSET (PlannerEfficiency, ll_base_us), 1e6 },
  { "ll_step_us", G_STRUCT_OFFSET (PlannerEfficiency, ll_step_us), 1e6 },
  { "ll_bandwidth_factor", G_STRUCT_OFFSET (PlannerEfficiency, ll_bandwidth_factor), 1 },
  { "ll_bandwidth_GBps", G_STRUCT_OFFSET (PlannerEfficiency, ll_bandwidth_GBps), 1e6 },
  { "ll128_base_us", G_STRUCT_OFFSET (PlannerEfficiency, ll128_base_us), 1e6 },
  { "ll128_step_us", G_STRUCT_OFFSET (PlannerEfficiency, ll128_step_us), 1e6 },
  { "ll128_bandwidth_factor", G_STRUCT_OFFSET (PlannerEfficiency, ll128_bandwidth_factor), 1 },
  { "ll128_bandwidth_GBps", G_STRUCT_OFFSET (PlannerEfficiency, ll128_bandwidth_GBps), 1e6 },
  { "ring_base_us", G_STRUCT_OFFSET (PlannerEfficiency, ring_base_us), 1e6 },
  { "ring_step_us", G_STRUCT_OFFSET (PlannerEfficiency, ring_step_us), 1e6 },
  { "nvls_latency_us", G_STRUCT_OFFSET (PlannerEfficiency, nvls_latency_us), 1e6 },
  { "nvls_chunk_us", G_STRUCT_OFFSET (PlannerEfficiency, nvls_chunk_us), 1e6 },
  { "nvls_fill_chunks", G_STRUCT_OFFSET (PlannerEfficiency, nvls_fill_chunks), 1e3 },
  { "nvls_channels", G_STRUCT_OFFSET (PlannerEfficiency, nvls_channels), 64 },
  { "nvls_max_chunk_KiB", G_STRUCT_OFFSET (PlannerEfficiency, nvls_max_chunk_KiB), 1 << 20 },
};

#define COLLECTIVE_NUMBER(e, i) G_STRUCT_MEMBER (double, (e), collective_numbers[i].offset)

/* The profile's "runtime_memory" object (planner/README.md, "Reserved memory"): what a device
 * holds beyond the plan's tensors. Each optional, >= 0 and at most its bound; 0 leaves it
 * out (allocator_min_block_B 0: no caching allocator modelled). */
static const struct
{
  const char *name;
  gsize offset;
  double max;
} runtime_numbers[] = {
  { "cuda_context_MiB", G_STRUCT_OFFSET (PlannerEfficiency, cuda_context_MiB), 1 << 20 },
  { "cublas_workspace_KiB", G_STRUCT_OFFSET (PlannerEfficiency, cublas_workspace_KiB), 1 << 24 },
  { "nccl_channels", G_STRUCT_OFFSET (PlannerEfficiency, nccl_channels), 64 },
  { "nccl_buffer_KiB", G_STRUCT_OFFSET (PlannerEfficiency, nccl_buffer_KiB), 1 << 24 },
  { "allocator_min_block_B", G_STRUCT_OFFSET (PlannerEfficiency, allocator_min_block_B), 1 << 20 },
  { "allocator_small_size_KiB", G_STRUCT_OFFSET (PlannerEfficiency, allocator_small_size_KiB),
    1 << 20 },
  { "allocator_small_segment_KiB",
    G_STRUCT_OFFSET (PlannerEfficiency, allocator_small_segment_KiB), 1 << 20 },
  { "allocator_large_segment_KiB",
    G_STRUCT_OFFSET (PlannerEfficiency, allocator_large_segment_KiB), 1 << 22 },
  { "allocator_min_large_alloc_KiB",
    G_STRUCT_OFFSET (PlannerEfficiency, allocator_min_large_alloc_KiB), 1 << 22 },
  { "allocator_round_large_KiB", G_STRUCT_OFFSET (PlannerEfficiency, allocator_round_large_KiB),
    1 << 22 },
};

#define RUNTIME_NUMBER(e, i) G_STRUCT_MEMBER (double, (e), runtime_numbers[i].offset)

void
planner_hardware_efficiency_init (PlannerEfficiency *efficiency)
{
  g_return_if_fail (efficiency != NULL);
  memset (efficiency, 0, sizeof *efficiency);
  efficiency->flash_forward = 1;
  efficiency->flash_backward = 1;
  efficiency->memory_bound = 1;
}

static void clear_runtime_numbers (PlannerEfficiency *e);

/* The "efficiency" object's part only: the runtime numbers are written apart. */
gboolean
planner_hardware_efficiency_is_default (const PlannerEfficiency *efficiency)
{
  PlannerEfficiency d, e = *efficiency;
  planner_hardware_efficiency_init (&d);
  clear_runtime_numbers (&e);
  return planner_hardware_efficiency_equal (&e, &d);
}

gboolean
planner_hardware_efficiency_equal (const PlannerEfficiency *a, const PlannerEfficiency *b)
{
  if (a->n_gemm != b->n_gemm || a->flash_forward != b->flash_forward
      || a->flash_backward != b->flash_backward || a->memory_bound != b->memory_bound
      || a->kernel_launch_us != b->kernel_launch_us || a->nics_per_node != b->nics_per_node
      || a->nvls_bandwidth_GBps != b->nvls_bandwidth_GBps || a->n_attention != b->n_attention
      || a->overlap_slowdown != b->overlap_slowdown)
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (collective_numbers); i++)
    if (COLLECTIVE_NUMBER (a, i) != COLLECTIVE_NUMBER (b, i))
      return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (runtime_numbers); i++)
    if (RUNTIME_NUMBER (a, i) != RUNTIME_NUMBER (b, i))
      return FALSE;
  for (guint i = 0; i < a->n_gemm; i++)
    if (a->gemm_size[i] != b->gemm_size[i] || a->gemm_efficiency[i] != b->gemm_efficiency[i])
      return FALSE;
  for (guint i = 0; i < a->n_attention; i++)
    {
      const PlannerAttentionCurve *x = &a->attention[i], *y = &b->attention[i];
      if (x->kernel != y->kernel || !x->causal != !y->causal || x->head_dim != y->head_dim
          || x->n != y->n)
        return FALSE;
      for (guint k = 0; k < x->n; k++)
        if (x->seq[k] != y->seq[k] || x->efficiency[k] != y->efficiency[k])
          return FALSE;
    }
  return TRUE;
}

/* A fraction in (0, 1]. */
static gboolean
read_fraction (PlannerJsonReader *r, JsonNode *node, const char *name, double *out)
{
  double value;
  if (!planner_json_read_number (r, node, name, &value))
    return FALSE;
  if (!isfinite (value) || value <= 0 || value > 1)
    return planner_json_fail (r, name, "must be a fraction in (0, 1], got %g", value);
  *out = value;
  return TRUE;
}

static gboolean
get_optional_fraction (PlannerJsonReader *r, JsonObject *o, const char *name, double *out)
{
  return !json_object_has_member (o, name)
         || read_fraction (r, json_object_get_member (o, name), name, out);
}

/* Member @name of @o: 1 to PLANNER_MAX_EFFICIENCY_POINTS [@what, efficiency] pairs, @what
 * >= 1 and strictly increasing, efficiency a fraction (the GEMM table by size, an attention
 * curve by sequence length). */
static gboolean
read_points (PlannerJsonReader *r, JsonObject *o, const char *name, const char *what, double *x,
             double *y, guint *n_out)
{
  JsonArray *points = planner_json_get_array (r, o, name);
  if (points == NULL)
    return FALSE;
  guint n = json_array_get_length (points);
  if (n == 0 || n > PLANNER_MAX_EFFICIENCY_POINTS)
    return planner_json_fail (r, name, "must hold 1 to %d [%s, efficiency] points, has %u",
                              PLANNER_MAX_EFFICIENCY_POINTS, what, n);
  gsize mark = planner_json_push (r, "%s", name);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *point = g_strdup_printf ("[%u]", i);
      JsonArray *pair = planner_json_read_array (r, json_array_get_element (points, i), point);
      double at;
      if (pair == NULL)
        return FALSE;
      if (json_array_get_length (pair) != 2)
        return planner_json_fail (r, point, "must be a [%s, efficiency] pair", what);
      if (!planner_json_read_number (r, json_array_get_element (pair, 0), point, &at)
          || !read_fraction (r, json_array_get_element (pair, 1), point, &y[i]))
        return FALSE;
      if (!isfinite (at) || at < 1 || (i > 0 && at <= x[i - 1]))
        return planner_json_fail (r, point,
                                  "must have a %s >= 1 and larger than the point before it", what);
      x[i] = at;
    }
  *n_out = n;
  planner_json_pop (r, mark);
  return TRUE;
}

/* One element of "attention": { "kernel", "causal", "head_dim", "points" }, all required. */
static gboolean
read_attention_curve (PlannerJsonReader *r, JsonObject *o, guint i, gpointer data)
{
  static const char *const known[] = { "kernel", "causal", "head_dim", "points", NULL };
  PlannerAttentionCurve *c = &((PlannerEfficiency *)data)->attention[i];
  const char *kernel;
  gint64 head_dim;
  if (!planner_json_check_members (r, o, known)
      || !planner_json_get_string (r, o, "kernel", FALSE, &kernel))
    return FALSE;
  if (!planner_attention_kernel_from_string (kernel, &c->kernel)
      || c->kernel == PLANNER_ATTENTION_UNFUSED)
    return planner_json_fail (r, "kernel",
                              "must be a fused kernel, \"flash\" or \"flash1\"; "
                              "got \"%s\"",
                              kernel);
  if (!planner_json_get_bool (r, o, "causal", &c->causal)
      || !planner_json_get_int (r, o, "head_dim", 1, 65536, &head_dim)
      || !read_points (r, o, "points", "sequence", c->seq, c->efficiency, &c->n))
    return FALSE;
  c->head_dim = (guint)head_dim;
  return TRUE;
}

static gboolean
read_attention (PlannerJsonReader *r, JsonObject *o, PlannerEfficiency *e)
{
  JsonArray *curves = planner_json_get_array (r, o, "attention");
  if (curves == NULL)
    return FALSE;
  guint n = json_array_get_length (curves);
  if (n > PLANNER_MAX_ATTENTION_CURVES)
    return planner_json_fail (r, "attention", "holds %u curves; at most %d", n,
                              PLANNER_MAX_ATTENTION_CURVES);
  if (!planner_json_read_elements (r, curves, "attention", read_attention_curve, e))
    return FALSE;
  e->n_attention = n;
  return TRUE;
}

gboolean
planner_hardware_read_efficiency (PlannerJsonReader *r, JsonObject *profile, PlannerEfficiency *e)
{
  static const char *const members[] = {
    "gemm",          "attention_flash",     "memory_bound", "kernel_launch_us",
    "nics_per_node", "nvls_bandwidth_GBps", "attention",    "overlap_slowdown",
  };
  static const char *const known_flash[] = { "forward", "backward", NULL };
  const char *known[G_N_ELEMENTS (members) + G_N_ELEMENTS (collective_numbers) + 1];
  guint n_known = 0;
  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    known[n_known++] = members[i];
  for (guint i = 0; i < G_N_ELEMENTS (collective_numbers); i++)
    known[n_known++] = collective_numbers[i].name;
  known[n_known] = NULL;
  JsonObject *o = planner_json_get_object (r, profile, "efficiency");
  if (o == NULL)
    return FALSE;
  gsize mark = planner_json_push (r, "efficiency");
  if (!planner_json_check_members (r, o, known))
    return FALSE;
  if (json_object_has_member (o, "gemm")
      && !read_points (r, o, "gemm", "size", e->gemm_size, e->gemm_efficiency, &e->n_gemm))
    return FALSE;
  if (json_object_has_member (o, "attention_flash"))
    {
      JsonObject *flash = planner_json_get_object (r, o, "attention_flash");
      if (flash == NULL)
        return FALSE;
      gsize m = planner_json_push (r, "attention_flash");
      if (!planner_json_check_members (r, flash, known_flash)
          || !get_optional_fraction (r, flash, "forward", &e->flash_forward)
          || !get_optional_fraction (r, flash, "backward", &e->flash_backward))
        return FALSE;
      planner_json_pop (r, m);
    }
  if (!get_optional_fraction (r, o, "memory_bound", &e->memory_bound))
    return FALSE;
  if (json_object_has_member (o, "kernel_launch_us"))
    {
      double us;
      if (!planner_json_read_number (r, json_object_get_member (o, "kernel_launch_us"),
                                     "kernel_launch_us", &us))
        return FALSE;
      if (!isfinite (us) || us < 0 || us > 1e6)
        return planner_json_fail (r, "kernel_launch_us", "must be in [0, 1e6] us, got %g", us);
      e->kernel_launch_us = us;
    }
  if (json_object_has_member (o, "nics_per_node"))
    {
      gint64 nics;
      if (!planner_json_get_int (r, o, "nics_per_node", 0, 1024, &nics))
        return FALSE;
      e->nics_per_node = (guint)nics;
    }
  if (json_object_has_member (o, "nvls_bandwidth_GBps"))
    {
      double bw;
      if (!planner_json_read_number (r, json_object_get_member (o, "nvls_bandwidth_GBps"),
                                     "nvls_bandwidth_GBps", &bw))
        return FALSE;
      if (!isfinite (bw) || bw < 0)
        return planner_json_fail (r, "nvls_bandwidth_GBps", "must be >= 0 (0: no NVLS), got %g",
                                  bw);
      e->nvls_bandwidth_GBps = bw;
    }
  for (guint i = 0; i < G_N_ELEMENTS (collective_numbers); i++)
    {
      const char *name = collective_numbers[i].name;
      double value;
      if (!json_object_has_member (o, name))
        continue;
      if (!planner_json_read_number (r, json_object_get_member (o, name), name, &value))
        return FALSE;
      if (!isfinite (value) || value < 0 || value > collective_numbers[i].max)
        return planner_json_fail (r, name, "must be in [0, %g] (0: that part off), got %g",
                                  collective_numbers[i].max, value);
      COLLECTIVE_NUMBER (e, i) = value;
    }
  if (json_object_has_member (o, "attention") && !read_attention (r, o, e))
    return FALSE;
  if (json_object_has_member (o, "overlap_slowdown"))
    {
      double slowdown;
      if (!planner_json_read_number (r, json_object_get_member (o, "overlap_slowdown"),
                                     "overlap_slowdown", &slowdown))
        return FALSE;
      if (!isfinite (slowdown) || slowdown < 0 || slowdown >= 1)
        return planner_json_fail (r, "overlap_slowdown", "must be in [0, 1), got %g", slowdown);
      e->overlap_slowdown = slowdown;
    }
  planner_json_pop (r, mark);
  return TRUE;
}

static void
append_number (GString *out, const char *name, double value, gboolean last)
{
  g_string_append_printf (out, "    \"%s\": ", name);
  planner_json_append_number (out, value);
  g_string_append (out, last ? "\n" : ",\n");
}

/* "[[x, y], [x, y]]" */
static void
append_points (GString *out, const double *x, const double *y, guint n)
{
  g_string_append (out, "[");
  for (guint i = 0; i < n; i++)
    {
      g_string_append (out, i ? ", [" : "[");
      planner_json_append_number (out, x[i]);
      g_string_append (out, ", ");
      planner_json_append_number (out, y[i]);
      g_string_append (out, "]");
    }
  g_string_append (out, "]");
}

void
planner_hardware_append_efficiency (GString *out, const PlannerEfficiency *e)
{
  g_string_append (out, "  \"efficiency\": {\n");
  if (e->n_gemm > 0)
    {
      g_string_append (out, "    \"gemm\": ");
      append_points (out, e->gemm_size, e->gemm_efficiency, e->n_gemm);
      g_string_append (out, ",\n");
    }
  if (e->n_attention > 0)
    {
      g_string_append (out, "    \"attention\": [\n");
      for (guint i = 0; i < e->n_attention; i++)
        {
          const PlannerAttentionCurve *c = &e->attention[i];
          g_string_append_printf (out,
                                  "      { \"kernel\": \"%s\", \"causal\": %s, \"head_dim\": %u, "
                                  "\"points\": ",
                                  planner_attention_kernel_to_string (c->kernel),
                                  c->causal ? "true" : "false", c->head_dim);
          append_points (out, c->seq, c->efficiency, c->n);
          g_string_append (out, i + 1 < e->n_attention ? " },\n" : " }\n");
        }
      g_string_append (out, "    ],\n");
    }
  g_string_append (out, "    \"attention_flash\": { \"forward\": ");
  planner_json_append_number (out, e->flash_forward);
  g_string_append (out, ", \"backward\": ");
  planner_json_append_number (out, e->flash_backward);
  g_string_append (out, " },\n");
  append_number (out, "memory_bound", e->memory_bound, FALSE);
  append_number (out, "kernel_launch_us", e->kernel_launch_us, FALSE);
  g_string_append_printf (out, "    \"nics_per_node\": %u,\n", e->nics_per_node);
  append_number (out, "nvls_bandwidth_GBps", e->nvls_bandwidth_GBps, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (collective_numbers); i++)
    if (COLLECTIVE_NUMBER (e, i) != 0)
      append_number (out, collective_numbers[i].name, COLLECTIVE_NUMBER (e, i), FALSE);
  append_number (out, "overlap_slowdown", e->overlap_slowdown, TRUE);
  g_string_append (out, "  }");
}

static void
clear_runtime_numbers (PlannerEfficiency *e)
{
  for (guint i = 0; i < G_N_ELEMENTS (runtime_numbers); i++)
    RUNTIME_NUMBER (e, i) = 0;
}

gboolean
planner_hardware_runtime_memory_is_default (const PlannerEfficiency *e)
{
  for (guint i = 0; i < G_N_ELEMENTS (runtime_numbers); i++)
    if (RUNTIME_NUMBER (e, i) != 0)
      return FALSE;
  return TRUE;
}

gboolean
planner_hardware_read_runtime_memory (PlannerJsonReader *r, JsonObject *profile,
                                      PlannerEfficiency *e)
{
  const char *known[G_N_ELEMENTS (runtime_numbers) + 1];
  for (guint i = 0; i < G_N_ELEMENTS (runtime_numbers); i++)
    known[i] = runtime_numbers[i].name;
  known[G_N_ELEMENTS (runtime_numbers)] = NULL;
  JsonObject *o = planner_json_get_object (r, profile, "runtime_memory");
  if (o == NULL)
    return FALSE;
  gsize mark = planner_json_push (r, "runtime_memory");
  if (!planner_json_check_members (r, o, known))
    return FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (runtime_numbers); i++)
    {
      const char *name = runtime_numbers[i].name;
      double value;
      if (!json_object_has_member (o, name))
        continue;
      if (!planner_json_read_number (r, json_object_get_member (o, name), name, &value))
        return FALSE;
      if (!isfinite (value) || value < 0 || value > runtime_numbers[i].max)
        return planner_json_fail (r, name, "must be in [0, %g] (0: not counted), got %g",
                                  runtime_numbers[i].max, value);
      RUNTIME_NUMBER (e, i) = value;
    }
  /* The allocator's sizes are one set: a block size with a missing segment would put every
   * allocation in a segment of 0 bytes. */
  if (e->allocator_min_block_B > 0
      && (e->allocator_small_size_KiB <= 0 || e->allocator_small_segment_KiB <= 0
          || e->allocator_large_segment_KiB <= 0 || e->allocator_min_large_alloc_KiB <= 0
          || e->allocator_round_large_KiB <= 0))
    return planner_json_fail (r, "allocator_min_block_B",
                              "needs allocator_small_size_KiB, allocator_small_segment_KiB, "
                              "allocator_large_segment_KiB, allocator_min_large_alloc_KiB and "
                              "allocator_round_large_KiB > 0 (PyTorch's: 1024, 2048, 20480, "
                              "10240, 2048), or 0 for no allocator");
  planner_json_pop (r, mark);
  return TRUE;
}

void
planner_hardware_append_runtime_memory (GString *out, const PlannerEfficiency *e)
{
  g_string_append (out, "  \"runtime_memory\": {\n");
  guint last = 0;
  for (guint i = 0; i < G_N_ELEMENTS (runtime_numbers); i++)
    if (RUNTIME_NUMBER (e, i) != 0)
      last = i;
  for (guint i = 0; i < G_N_ELEMENTS (runtime_numbers); i++)
    if (RUNTIME_NUMBER (e, i) != 0)
      append_number (out, runtime_numbers[i].name, RUNTIME_NUMBER (e, i), i == last);
  g_string_append (out, "  }");
}
