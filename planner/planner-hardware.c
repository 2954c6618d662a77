#define G_LOG_DOMAIN "planner-hardware"

#include "config.h"

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "planner-error.h"
#include "planner-hardware.h"
#include "planner-hardware-private.h"
#include "planner-json.h"
#include "planner-resources.h"

/* PlannerDType has no count member; i64 is its last value. */
#define N_DTYPES (PLANNER_DTYPE_I64 + 1)

#define FORMAT_VERSION 1
#define DEFAULT_NODE_SIZE 8

typedef struct
{
  PlannerStepKind kind;
  PlannerLinkKind link;
  guint p;
  GArray *points; /* PlannerMeasuredPoint, sorted by bytes, unique */
} Curve;

struct _PlannerHardware
{
  char *name;
  char *description;
  double peak_tflops[N_DTYPES];
  double memory_bandwidth_GBps;
  double memory_GB;
  guint node_size;
  PlannerLink links[PLANNER_N_LINKS];
  GPtrArray *curves; /* Curve, sorted by (kind, link, p) so files are written in one order */
  PlannerEfficiency efficiency; /* planner-hardware-efficiency.c */
};

static const char *const step_kind_names[PLANNER_N_STEP_KINDS] = {
  "AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Slice",
};

static const char *const link_kind_names[PLANNER_N_LINKS] = { "intra", "inter" };

static const char *const builtin_names[] = {
  "h100-sxm", "h200-sxm", "a100-sxm", "cpu-local", NULL,
};

const char *
planner_step_kind_to_string (PlannerStepKind kind)
{
  g_return_val_if_fail (kind < PLANNER_N_STEP_KINDS, NULL);
  return step_kind_names[kind];
}

/* The index of @text in @names[@n], else -1: the enum parsers below. */
static int
name_index (const char *const *names, guint n, const char *text)
{
  for (guint i = 0; i < n; i++)
    if (strcmp (text, names[i]) == 0)
      return (int)i;
  return -1;
}

gboolean
planner_step_kind_from_string (const char *text, PlannerStepKind *kind)
{
  g_return_val_if_fail (text != NULL, FALSE);

  int i = name_index (step_kind_names, PLANNER_N_STEP_KINDS, text);
  if (i >= 0 && kind)
    *kind = i;
  return i >= 0;
}

const char *
planner_link_kind_to_string (PlannerLinkKind kind)
{
  g_return_val_if_fail (kind < PLANNER_N_LINKS, NULL);
  return link_kind_names[kind];
}

gboolean
planner_link_kind_from_string (const char *text, PlannerLinkKind *kind)
{
  g_return_val_if_fail (text != NULL, FALSE);

  int i = name_index (link_kind_names, PLANNER_N_LINKS, text);
  if (i >= 0 && kind)
    *kind = i;
  return i >= 0;
}

/* Curves */

static Curve *
curve_new (PlannerStepKind kind, PlannerLinkKind link, guint p)
{
  Curve *curve = g_new0 (Curve, 1);

  curve->kind = kind;
  curve->link = link;
  curve->p = p;
  curve->points = g_array_new (FALSE, FALSE, sizeof (PlannerMeasuredPoint));
  return curve;
}

static void
curve_free (gpointer data)
{
  Curve *curve = data;

  g_array_unref (curve->points);
  g_free (curve);
}

static Curve *
curve_copy (const Curve *curve)
{
  Curve *copy = curve_new (curve->kind, curve->link, curve->p);

  g_array_append_vals (copy->points, curve->points->data, curve->points->len);
  return copy;
}

static int
curve_key_compare (const Curve *curve, PlannerStepKind kind, PlannerLinkKind link, guint p)
{
  if (curve->kind != kind)
    return curve->kind < kind ? -1 : 1;
  if (curve->link != link)
    return curve->link < link ? -1 : 1;
  if (curve->p != p)
    return curve->p < p ? -1 : 1;
  return 0;
}

/* Index of the curve with this key, or where it would be inserted (with *found FALSE). */
static guint
find_curve (const PlannerHardware *hw, PlannerStepKind kind, PlannerLinkKind link, guint p,
            gboolean *found)
{
  guint i;

  for (i = 0; i < hw->curves->len; i++)
    {
      int c = curve_key_compare (g_ptr_array_index (hw->curves, i), kind, link, p);

      if (c >= 0)
        {
          *found = c == 0;
          return i;
        }
    }
  *found = FALSE;
  return i;
}

/* Life cycle */

PlannerHardware *
planner_hardware_new (const char *name)
{
  PlannerHardware *hw;

  g_return_val_if_fail (name != NULL && name[0] != '\0', NULL);

  hw = g_new0 (PlannerHardware, 1);
  hw->name = g_strdup (name);
  hw->description = g_strdup ("");
  for (guint i = 0; i < N_DTYPES; i++)
    hw->peak_tflops[i] = 1.0;
  hw->memory_bandwidth_GBps = 1.0;
  hw->memory_GB = 1.0;
  hw->node_size = DEFAULT_NODE_SIZE;
  for (guint i = 0; i < PLANNER_N_LINKS; i++)
    {
      hw->links[i].bandwidth_GBps = 1.0;
      hw->links[i].latency_us = 1.0;
    }
  hw->curves = g_ptr_array_new_with_free_func (curve_free);
  planner_hardware_efficiency_init (&hw->efficiency);
  return hw;
}

PlannerHardware *
planner_hardware_copy (const PlannerHardware *hw)
{
  PlannerHardware *copy;

  g_return_val_if_fail (hw != NULL, NULL);

  copy = g_memdup2 (hw, sizeof *hw);
  copy->name = g_strdup (hw->name);
  copy->description = g_strdup (hw->description);
  copy->curves = g_ptr_array_new_with_free_func (curve_free);
  for (guint i = 0; i < hw->curves->len; i++)
    g_ptr_array_add (copy->curves, curve_copy (g_ptr_array_index (hw->curves, i)));
  return copy;
}

void
planner_hardware_free (PlannerHardware *hw)
{
  if (hw == NULL)
    return;
  g_free (hw->name);
  g_free (hw->description);
  g_ptr_array_unref (hw->curves);
  g_free (hw);
}

static gboolean
links_equal (const PlannerLink *a, const PlannerLink *b)
{
  return strcmp (a->name, b->name) == 0 && a->bandwidth_GBps == b->bandwidth_GBps
         && a->latency_us == b->latency_us;
}

static gboolean
curves_equal (const Curve *a, const Curve *b)
{
  if (curve_key_compare (a, b->kind, b->link, b->p) != 0 || a->points->len != b->points->len)
    return FALSE;
  for (guint i = 0; i < a->points->len; i++)
    {
      const PlannerMeasuredPoint *pa = &g_array_index (a->points, PlannerMeasuredPoint, i);
      const PlannerMeasuredPoint *pb = &g_array_index (b->points, PlannerMeasuredPoint, i);

      if (pa->bytes != pb->bytes || pa->seconds != pb->seconds)
        return FALSE;
    }
  return TRUE;
}

gboolean
planner_hardware_equal (const PlannerHardware *a, const PlannerHardware *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);

  if (strcmp (a->name, b->name) != 0 || strcmp (a->description, b->description) != 0
      || a->memory_bandwidth_GBps != b->memory_bandwidth_GBps || a->memory_GB != b->memory_GB
      || a->node_size != b->node_size || a->curves->len != b->curves->len
      || !planner_hardware_efficiency_equal (&a->efficiency, &b->efficiency))
    return FALSE;
  for (guint i = 0; i < N_DTYPES; i++)
    if (a->peak_tflops[i] != b->peak_tflops[i])
      return FALSE;
  for (guint i = 0; i < PLANNER_N_LINKS; i++)
    if (!links_equal (&a->links[i], &b->links[i]))
      return FALSE;
  for (guint i = 0; i < a->curves->len; i++)
    if (!curves_equal (g_ptr_array_index (a->curves, i), g_ptr_array_index (b->curves, i)))
      return FALSE;
  return TRUE;
}

/* Getters and setters. Setters refuse what the formulas cannot use (they divide by
 * bandwidths and peaks); the UI and the file reader check user input before calling them. */

const char *
planner_hardware_get_name (const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, NULL);
  return hw->name;
}

void
planner_hardware_set_name (PlannerHardware *hw, const char *name)
{
  g_return_if_fail (hw != NULL);
  g_return_if_fail (name != NULL && name[0] != '\0');

  g_free (hw->name);
  hw->name = g_strdup (name);
}

const char *
planner_hardware_get_description (const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, NULL);
  return hw->description;
}

void
planner_hardware_set_description (PlannerHardware *hw, const char *description)
{
  g_return_if_fail (hw != NULL);
  g_return_if_fail (description != NULL);

  g_free (hw->description);
  hw->description = g_strdup (description);
}

double
planner_hardware_get_peak_tflops (const PlannerHardware *hw, PlannerDType dtype)
{
  g_return_val_if_fail (hw != NULL, 0.0);
  g_return_val_if_fail (dtype < N_DTYPES, 0.0);
  return hw->peak_tflops[dtype];
}

void
planner_hardware_set_peak_tflops (PlannerHardware *hw, PlannerDType dtype, double tflops)
{
  g_return_if_fail (hw != NULL);
  g_return_if_fail (dtype < N_DTYPES);
  g_return_if_fail (isfinite (tflops) && tflops > 0);
  hw->peak_tflops[dtype] = tflops;
}

double
planner_hardware_get_memory_bandwidth_GBps (const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, 0.0);
  return hw->memory_bandwidth_GBps;
}

void
planner_hardware_set_memory_bandwidth_GBps (PlannerHardware *hw, double GBps)
{
  g_return_if_fail (hw != NULL);
  g_return_if_fail (isfinite (GBps) && GBps > 0);
  hw->memory_bandwidth_GBps = GBps;
}

double
planner_hardware_get_memory_GB (const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, 0.0);
  return hw->memory_GB;
}

void
planner_hardware_set_memory_GB (PlannerHardware *hw, double GB)
{
  g_return_if_fail (hw != NULL);
  g_return_if_fail (isfinite (GB) && GB > 0);
  hw->memory_GB = GB;
}

guint
planner_hardware_get_node_size (const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, 0);
  return hw->node_size;
}

void
planner_hardware_set_node_size (PlannerHardware *hw, guint node_size)
{
  g_return_if_fail (hw != NULL);
  g_return_if_fail (node_size >= 1);
  hw->node_size = node_size;
}

const PlannerLink *
planner_hardware_get_link (const PlannerHardware *hw, PlannerLinkKind kind)
{
  g_return_val_if_fail (hw != NULL, NULL);
  g_return_val_if_fail (kind < PLANNER_N_LINKS, NULL);
  return &hw->links[kind];
}

void
planner_hardware_set_link (PlannerHardware *hw, PlannerLinkKind kind, const PlannerLink *link)
{
  g_return_if_fail (hw != NULL);
  g_return_if_fail (kind < PLANNER_N_LINKS);
  g_return_if_fail (link != NULL);
  g_return_if_fail (memchr (link->name, '\0', sizeof link->name) != NULL);
  g_return_if_fail (isfinite (link->bandwidth_GBps) && link->bandwidth_GBps > 0);
  /* Zero latency is allowed: an ideal link is a legitimate what-if. */
  g_return_if_fail (isfinite (link->latency_us) && link->latency_us >= 0);
  hw->links[kind] = *link;
}

const PlannerEfficiency *
planner_hardware_get_efficiency (const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, NULL);
  return &hw->efficiency;
}

void
planner_hardware_set_efficiency (PlannerHardware *hw, const PlannerEfficiency *efficiency)
{
  g_return_if_fail (hw != NULL && efficiency != NULL);
  g_return_if_fail (efficiency->n_gemm <= PLANNER_MAX_EFFICIENCY_POINTS);
  g_return_if_fail (efficiency->n_attention <= PLANNER_MAX_ATTENTION_CURVES);
  for (guint i = 0; i < efficiency->n_attention; i++)
    g_return_if_fail (efficiency->attention[i].n <= PLANNER_MAX_EFFICIENCY_POINTS);
  hw->efficiency = *efficiency;
}

double
planner_hardware_peak_flops (const PlannerHardware *hw, PlannerDType dtype)
{
  return planner_hardware_get_peak_tflops (hw, dtype) * 1e12;
}

double
planner_hardware_memory_bandwidth (const PlannerHardware *hw)
{
  return planner_hardware_get_memory_bandwidth_GBps (hw) * 1e9;
}

guint64
planner_hardware_memory_bytes (const PlannerHardware *hw)
{
  return (guint64)llround (planner_hardware_get_memory_GB (hw) * 1e9);
}

/* Mesh axes and links */

PlannerLinkKind
planner_hardware_axis_link_kind (const PlannerHardware *hw, const PlannerMesh *mesh, guint axis)
{
  guint64 devices = 1;

  g_return_val_if_fail (hw != NULL, PLANNER_LINK_INTRA);
  g_return_val_if_fail (mesh != NULL, PLANNER_LINK_INTRA);
  g_return_val_if_fail (axis < mesh->n_axes, PLANNER_LINK_INTRA);

  /* A group of one device talks to no one: whatever its position, it crosses no node. */
  if (mesh->sizes[axis] <= 1)
    return PLANNER_LINK_INTRA;
  /* Device ids are row-major, so the minor axes are the ones whose groups are neighbours. */
  for (guint i = mesh->n_axes; i-- > axis;)
    devices *= mesh->sizes[i];
  return devices <= hw->node_size ? PLANNER_LINK_INTRA : PLANNER_LINK_INTER;
}

gboolean
planner_hardware_axis_is_intra (const PlannerHardware *hw, const PlannerMesh *mesh, guint axis)
{
  return planner_hardware_axis_link_kind (hw, mesh, axis) == PLANNER_LINK_INTRA;
}

const PlannerLink *
planner_hardware_axis_link (const PlannerHardware *hw, const PlannerMesh *mesh, guint axis)
{
  g_return_val_if_fail (hw != NULL, NULL);
  return &hw->links[planner_hardware_axis_link_kind (hw, mesh, axis)];
}

/* Measurements */

void
planner_hardware_add_measurement (PlannerHardware *hw, PlannerStepKind kind, PlannerLinkKind link,
                                  guint p, guint64 bytes, double seconds)
{
  PlannerMeasuredPoint point = { bytes, seconds };
  gboolean found;
  guint i;
  Curve *curve;

  g_return_if_fail (hw != NULL);
  g_return_if_fail (kind < PLANNER_N_STEP_KINDS && kind != PLANNER_STEP_SLICE);
  g_return_if_fail (link < PLANNER_N_LINKS);
  g_return_if_fail (p >= 2);
  /* Bytes are written as JSON integers (gint64). */
  g_return_if_fail (bytes > 0 && bytes <= G_MAXINT64);
  g_return_if_fail (isfinite (seconds) && seconds > 0);

  i = find_curve (hw, kind, link, p, &found);
  if (!found)
    g_ptr_array_insert (hw->curves, i, curve_new (kind, link, p));
  curve = g_ptr_array_index (hw->curves, i);

  for (i = 0; i < curve->points->len; i++)
    {
      PlannerMeasuredPoint *at = &g_array_index (curve->points, PlannerMeasuredPoint, i);

      if (at->bytes == bytes)
        {
          at->seconds = seconds;
          return;
        }
      if (at->bytes > bytes)
        break;
    }
  g_array_insert_val (curve->points, i, point);
}

static const PlannerMeasuredPoint *
curve_points (const Curve *curve, guint *n_points)
{
  if (n_points)
    *n_points = curve->points->len;
  return (const PlannerMeasuredPoint *)curve->points->data;
}

const PlannerMeasuredPoint *
planner_hardware_get_measurement (const PlannerHardware *hw, PlannerStepKind kind,
                                  PlannerLinkKind link, guint p, guint *n_points)
{
  gboolean found;
  guint i;

  if (n_points)
    *n_points = 0;
  g_return_val_if_fail (hw != NULL, NULL);

  i = find_curve (hw, kind, link, p, &found);
  return found ? curve_points (g_ptr_array_index (hw->curves, i), n_points) : NULL;
}

guint
planner_hardware_get_n_measurements (const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, 0);
  return hw->curves->len;
}

const PlannerMeasuredPoint *
planner_hardware_get_nth_measurement (const PlannerHardware *hw, guint i, PlannerStepKind *kind,
                                      PlannerLinkKind *link, guint *p, guint *n_points)
{
  const Curve *curve;

  g_return_val_if_fail (hw != NULL, NULL);
  g_return_val_if_fail (i < hw->curves->len, NULL);

  curve = g_ptr_array_index (hw->curves, i);
  if (kind)
    *kind = curve->kind;
  if (link)
    *link = curve->link;
  if (p)
    *p = curve->p;
  return curve_points (curve, n_points);
}

void
planner_hardware_clear_measurements (PlannerHardware *hw)
{
  g_return_if_fail (hw != NULL);
  g_ptr_array_set_size (hw->curves, 0);
}

/* Reading profiles. Every refusal names the field as a path ("links.intra.latency_us"). */

/* Far above any machine (a zettaFLOP/s per device, an hour of latency), low enough that the
 * costs made of them stay finite. */
#define MAX_FIGURE 1e9
/* 1 PB per device: its bytes (x 1e9) fit a gint64 with room for the plan's sums. */
#define MAX_MEMORY_GB 1e6
/* A calibration sweep writes one point per power of two of bytes; reading is quadratic in
 * the points of a curve, so a hand-made file with 100,000 of them is refused, not slow. */
#define MAX_CURVE_POINTS 1024
#define MAX_CURVES 1024

/* A number that must be > 0 (or >= 0 with @allow_zero) and at most @max. */
static gboolean
read_figure (PlannerJsonReader *r, JsonNode *node, const char *name, gboolean allow_zero,
             double max, double *out)
{
  double value;

  if (!planner_json_read_number (r, node, name, &value))
    return FALSE;
  if (!isfinite (value) || value < 0 || (value == 0 && !allow_zero))
    return planner_json_fail (r, name, "must be %s, got %g", allow_zero ? ">= 0" : "> 0", value);
  if (value > max)
    return planner_json_fail (r, name, "must be at most %g, got %g", max, value);
  *out = value;
  return TRUE;
}

static gboolean
get_figure (PlannerJsonReader *r, JsonObject *object, const char *name, gboolean allow_zero,
            double max, double *out)
{
  JsonNode *node = planner_json_member (r, object, name);
  return node != NULL && read_figure (r, node, name, allow_zero, max, out);
}

/* An optional string member: @out keeps its value when the member is absent. */
static gboolean
get_optional_string (PlannerJsonReader *r, JsonObject *object, const char *name, const char **out)
{
  return !json_object_has_member (object, name)
         || planner_json_get_string (r, object, name, FALSE, out);
}

static gboolean
read_peaks (PlannerJsonReader *r, PlannerHardware *hw, JsonObject *object)
{
  JsonObject *peaks = planner_json_get_object (r, object, "peak_tflops");
  gboolean seen[N_DTYPES] = { FALSE };

  if (peaks == NULL)
    return FALSE;
  gsize mark = planner_json_push (r, "peak_tflops");
  g_autoptr (GList) members = json_object_get_members (peaks);
  for (GList *l = members; l; l = l->next)
    {
      PlannerDType dtype;

      if (!planner_dtype_from_string (l->data, &dtype))
        return planner_json_fail (r, l->data, "is not a dtype (f32, bf16, f16, i64)");
      if (!get_figure (r, peaks, l->data, FALSE, MAX_FIGURE, &hw->peak_tflops[dtype]))
        return FALSE;
      seen[dtype] = TRUE;
    }
  for (PlannerDType dtype = PLANNER_DTYPE_F32; dtype <= PLANNER_DTYPE_F16; dtype++)
    if (!seen[dtype])
      return planner_json_fail (r, planner_dtype_to_string (dtype), "is missing");
  /* Integer ops (ids, masks) run on the vector units: f32's rate unless the file says. */
  if (!seen[PLANNER_DTYPE_I64])
    hw->peak_tflops[PLANNER_DTYPE_I64] = hw->peak_tflops[PLANNER_DTYPE_F32];
  planner_json_pop (r, mark);
  return TRUE;
}

static gboolean
read_link (PlannerJsonReader *r, PlannerLink *link, JsonObject *links, PlannerLinkKind kind)
{
  static const char *const known[] = { "name", "bandwidth_GBps", "latency_us", NULL };
  JsonObject *object = planner_json_get_object (r, links, link_kind_names[kind]);
  const char *name = "";

  if (object == NULL)
    return FALSE;
  gsize mark = planner_json_push (r, "%s", link_kind_names[kind]);
  if (!planner_json_check_members (r, object, known)
      || !get_figure (r, object, "bandwidth_GBps", FALSE, MAX_FIGURE, &link->bandwidth_GBps)
      || !get_figure (r, object, "latency_us", TRUE, MAX_FIGURE, &link->latency_us)
      || !get_optional_string (r, object, "name", &name))
    return FALSE;
  if (strlen (name) >= sizeof link->name)
    return planner_json_fail (r, "name", "is longer than %zu characters", sizeof link->name - 1);
  memset (link->name, 0, sizeof link->name);
  g_strlcpy (link->name, name, sizeof link->name);
  planner_json_pop (r, mark);
  return TRUE;
}

static gboolean
read_measurement (PlannerJsonReader *r, PlannerHardware *hw, JsonArray *measurements, guint index)
{
  static const char *const known[] = { "step", "link", "p", "points", NULL };
  gsize mark;
  JsonObject *object = planner_json_enter_element (r, measurements, "measurements", index, &mark);
  JsonArray *points;
  const char *text;
  PlannerStepKind kind;
  PlannerLinkKind link;
  gint64 p, previous_bytes = 0;

  if (object == NULL || !planner_json_check_members (r, object, known)
      || !planner_json_get_string (r, object, "step", FALSE, &text))
    return FALSE;
  if (!planner_step_kind_from_string (text, &kind) || kind == PLANNER_STEP_SLICE)
    return planner_json_fail (
        r, "step", "must be a collective: AllReduce, AllGather, ReduceScatter or AllToAll");

  if (!planner_json_get_string (r, object, "link", FALSE, &text))
    return FALSE;
  if (!planner_link_kind_from_string (text, &link))
    return planner_json_fail (r, "link", "must be \"intra\" or \"inter\"");

  if (!planner_json_get_int (r, object, "p", 2, PLANNER_MAX_DEVICES, &p)
      || !(points = planner_json_get_array (r, object, "points")))
    return FALSE;
  if (json_array_get_length (points) == 0)
    return planner_json_fail (r, "points", "must hold at least one [bytes, seconds] point");
  if (json_array_get_length (points) > MAX_CURVE_POINTS)
    return planner_json_fail (r, "points",
                              "holds %u points; a curve holds at most %d (one per power of two "
                              "of bytes is what calibrate writes)",
                              json_array_get_length (points), MAX_CURVE_POINTS);
  if (planner_hardware_get_measurement (hw, kind, link, p, NULL) != NULL)
    return planner_json_fail (r, NULL, "repeats the step, link and p of an earlier curve");

  planner_json_push (r, "points");
  for (guint i = 0; i < json_array_get_length (points); i++)
    {
      g_autofree char *point = g_strdup_printf ("[%u]", i);
      JsonArray *pair = planner_json_read_array (r, json_array_get_element (points, i), point);
      gint64 bytes;
      double seconds;

      if (pair == NULL)
        return FALSE;
      if (json_array_get_length (pair) != 2)
        return planner_json_fail (r, point, "must be a [bytes, seconds] pair");
      if (!planner_json_read_int (r, json_array_get_element (pair, 0), point, 1, G_MAXINT64, &bytes)
          || !read_figure (r, json_array_get_element (pair, 1), point, FALSE, MAX_FIGURE, &seconds))
        return FALSE;
      /* Sorted and unique on disk, as written, so that reading never reorders or merges. */
      if (bytes <= previous_bytes)
        return planner_json_fail (r, point, "must have more bytes than the point before it");
      previous_bytes = bytes;
      planner_hardware_add_measurement (hw, kind, link, p, bytes, seconds);
    }
  planner_json_pop (r, mark);
  return TRUE;
}

PlannerHardware *
planner_hardware_from_json (const char *text, GError **error)
{
  static const char *const known[] = {
    "shardscope_hardware", "name",      "description", "peak_tflops",  "memory_bandwidth_GBps",
    "memory_GB",           "node_size", "links",       "measurements", "efficiency",
    "runtime_memory",      NULL,
  };
  static const char *const known_links[] = { "intra", "inter", NULL };
  g_auto (PlannerJsonReader) r = { "hardware profile", NULL, error };
  g_autoptr (PlannerHardware) hw = NULL;
  g_autoptr (JsonNode) root = NULL;
  JsonObject *object, *links;
  JsonArray *measurements;
  const char *name, *description = "";
  gint64 version, node_size = DEFAULT_NODE_SIZE;

  g_return_val_if_fail (text != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  root = planner_json_parse (text, -1, "hardware profile", error);
  if (root == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE,
                   "hardware profile: the top level must be an object with "
                   "\"shardscope_hardware\": %d",
                   FORMAT_VERSION);
      return NULL;
    }
  object = json_node_get_object (root);

  if (!planner_json_get_int (&r, object, "shardscope_hardware", 1, G_MAXINT64, &version))
    return NULL;
  if (version > FORMAT_VERSION)
    {
      planner_json_fail (&r, "shardscope_hardware",
                         "is %" G_GINT64_FORMAT ", newer than this Shardscope reads (%d)", version,
                         FORMAT_VERSION);
      return NULL;
    }
  if (!planner_json_check_members (&r, object, known)
      || !planner_json_get_string (&r, object, "name", FALSE, &name))
    return NULL;
  if (name[0] == '\0')
    {
      planner_json_fail (&r, "name", "must not be empty");
      return NULL;
    }
  hw = planner_hardware_new (name);

  if (!get_optional_string (&r, object, "description", &description) || !read_peaks (&r, hw, object)
      || !get_figure (&r, object, "memory_bandwidth_GBps", FALSE, MAX_FIGURE,
                      &hw->memory_bandwidth_GBps)
      || !get_figure (&r, object, "memory_GB", FALSE, MAX_MEMORY_GB, &hw->memory_GB))
    return NULL;
  planner_hardware_set_description (hw, description);

  if (json_object_has_member (object, "node_size")
      && !planner_json_get_int (&r, object, "node_size", 1, PLANNER_MAX_DEVICES, &node_size))
    return NULL;
  hw->node_size = node_size;

  if (!(links = planner_json_get_object (&r, object, "links")))
    return NULL;
  gsize mark = planner_json_push (&r, "links");
  if (!planner_json_check_members (&r, links, known_links))
    return NULL;
  for (guint i = 0; i < PLANNER_N_LINKS; i++)
    if (!read_link (&r, &hw->links[i], links, i))
      return NULL;
  planner_json_pop (&r, mark);

  if (json_object_has_member (object, "measurements"))
    {
      if (!(measurements = planner_json_get_array (&r, object, "measurements")))
        return NULL;
      if (json_array_get_length (measurements) > MAX_CURVES)
        {
          planner_json_fail (&r, "measurements", "holds %u curves; a profile holds at most %d",
                             json_array_get_length (measurements), MAX_CURVES);
          return NULL;
        }
      for (guint i = 0; i < json_array_get_length (measurements); i++)
        if (!read_measurement (&r, hw, measurements, i))
          return NULL;
    }

  if (json_object_has_member (object, "efficiency")
      && !planner_hardware_read_efficiency (&r, object, &hw->efficiency))
    return NULL;
  if (json_object_has_member (object, "runtime_memory")
      && !planner_hardware_read_runtime_memory (&r, object, &hw->efficiency))
    return NULL;

  return g_steal_pointer (&hw);
}

/* Writing profiles: by hand, as the shape is fixed, with figures as people write them
 * (planner_json_append_number(): 370, 2.5, 1e-05) and each measured point on one line. */

static void
append_member (GString *out, int indent, const char *name)
{
  g_string_append_printf (out, "%*s", indent, "");
  planner_json_append_string (out, name);
  g_string_append (out, ": ");
}

/* "NAME": "VALUE" and @end. */
static void
append_string_member (GString *out, int indent, const char *name, const char *value,
                      const char *end)
{
  append_member (out, indent, name);
  planner_json_append_string (out, value);
  g_string_append (out, end);
}

/* "NAME": VALUE and @end. */
static void
append_number_member (GString *out, int indent, const char *name, double value, const char *end)
{
  append_member (out, indent, name);
  planner_json_append_number (out, value);
  g_string_append (out, end);
}

char *
planner_hardware_to_json (const PlannerHardware *hw)
{
  GString *out;

  g_return_val_if_fail (hw != NULL, NULL);

  out = g_string_new ("{\n");
  append_member (out, 2, "shardscope_hardware");
  g_string_append_printf (out, "%d,\n", FORMAT_VERSION);
  append_string_member (out, 2, "name", hw->name, ",\n");
  append_string_member (out, 2, "description", hw->description, ",\n");

  append_member (out, 2, "peak_tflops");
  g_string_append (out, "{\n");
  for (PlannerDType dtype = 0; dtype < N_DTYPES; dtype++)
    append_number_member (out, 4, planner_dtype_to_string (dtype), hw->peak_tflops[dtype],
                          dtype + 1 < N_DTYPES ? ",\n" : "\n");
  g_string_append (out, "  },\n");

  append_number_member (out, 2, "memory_bandwidth_GBps", hw->memory_bandwidth_GBps, ",\n");
  append_number_member (out, 2, "memory_GB", hw->memory_GB, ",\n");
  append_member (out, 2, "node_size");
  g_string_append_printf (out, "%u,\n", hw->node_size);

  append_member (out, 2, "links");
  g_string_append (out, "{\n");
  for (guint i = 0; i < PLANNER_N_LINKS; i++)
    {
      append_member (out, 4, link_kind_names[i]);
      g_string_append (out, "{\n");
      append_string_member (out, 6, "name", hw->links[i].name, ",\n");
      append_number_member (out, 6, "bandwidth_GBps", hw->links[i].bandwidth_GBps, ",\n");
      append_number_member (out, 6, "latency_us", hw->links[i].latency_us, "\n");
      g_string_append (out, i + 1 < PLANNER_N_LINKS ? "    },\n" : "    }\n");
    }
  g_string_append (out, "  }");
  if (hw->efficiency.n_gemm > 0 || !planner_hardware_efficiency_is_default (&hw->efficiency))
    {
      g_string_append (out, ",\n");
      planner_hardware_append_efficiency (out, &hw->efficiency);
    }
  if (!planner_hardware_runtime_memory_is_default (&hw->efficiency))
    {
      g_string_append (out, ",\n");
      planner_hardware_append_runtime_memory (out, &hw->efficiency);
    }
  g_string_append (out, hw->curves->len > 0 ? ",\n" : "\n");

  if (hw->curves->len > 0)
    {
      append_member (out, 2, "measurements");
      g_string_append (out, "[\n");
      for (guint i = 0; i < hw->curves->len; i++)
        {
          const Curve *curve = g_ptr_array_index (hw->curves, i);

          g_string_append (out, "    {\n");
          append_string_member (out, 6, "step", step_kind_names[curve->kind], ",\n");
          append_string_member (out, 6, "link", link_kind_names[curve->link], ",\n");
          append_member (out, 6, "p");
          g_string_append_printf (out, "%u,\n", curve->p);
          append_member (out, 6, "points");
          g_string_append (out, "[\n");
          for (guint j = 0; j < curve->points->len; j++)
            {
              const PlannerMeasuredPoint *point
                  = &g_array_index (curve->points, PlannerMeasuredPoint, j);

              g_string_append_printf (out, "        [%" G_GUINT64_FORMAT ", ", point->bytes);
              planner_json_append_number (out, point->seconds);
              g_string_append (out, j + 1 < curve->points->len ? "],\n" : "]\n");
            }
          g_string_append (out, i + 1 < hw->curves->len ? "      ]\n    },\n" : "      ]\n    }\n");
        }
      g_string_append (out, "  ]\n");
    }
  g_string_append (out, "}\n");
  return g_string_free (out, FALSE);
}

gboolean
planner_hardware_save_file (const PlannerHardware *hw, const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local_error = NULL;

  g_return_val_if_fail (hw != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  text = planner_hardware_to_json (hw);
  /* g_file_set_contents writes a temporary file and renames it: never a half-written profile. */
  if (!g_file_set_contents (path, text, -1, &local_error))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_IO, "cannot write hardware profile %s: %s",
                   path, local_error->message);
      return FALSE;
    }
  return TRUE;
}

/* Built-ins and files */

const char *const *
planner_hardware_builtin_names (void)
{
  return builtin_names;
}

static PlannerHardware *
unknown_hardware (const char *name, GError **error)
{
  g_autofree char *names = g_strjoinv (", ", (char **)builtin_names);

  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_HARDWARE,
               "unknown hardware '%s': use a built-in profile (%s) or the path of a profile "
               "JSON file",
               name, names);
  return NULL;
}

PlannerHardware *
planner_hardware_new_builtin (const char *name, GError **error)
{
  g_autofree char *path = NULL;
  g_autoptr (GBytes) bytes = NULL;
  g_autofree char *text = NULL;
  g_autoptr (GError) local_error = NULL;
  PlannerHardware *hw;

  g_return_val_if_fail (name != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!g_strv_contains (builtin_names, name))
    return unknown_hardware (name, error);

  path = g_strdup_printf ("hardware/%s.json", name);
  bytes = planner_resources_lookup (path, &local_error);
  if (bytes == NULL)
    {
      /* A build without the file is a packaging bug, but still a refusal, not a crash. */
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_HARDWARE,
                   "built-in hardware profile %s is missing from this build: %s", name,
                   local_error->message);
      return NULL;
    }
  /* Resource data is not NUL-terminated as far as the API promises. */
  text = g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
  hw = planner_hardware_from_json (text, error);
  if (hw == NULL)
    g_prefix_error (error, "built-in %s: ", name);
  return hw;
}

PlannerHardware *
planner_hardware_load_file (const char *path, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr (GError) local_error = NULL;
  PlannerHardware *hw;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!g_file_get_contents (path, &text, NULL, &local_error))
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_IO, "cannot read hardware profile %s: %s",
                   path, local_error->message);
      return NULL;
    }
  hw = planner_hardware_from_json (text, error);
  if (hw == NULL)
    g_prefix_error (error, "%s: ", path);
  return hw;
}

PlannerHardware *
planner_hardware_lookup (const char *name_or_path, GError **error)
{
  g_return_val_if_fail (name_or_path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (g_strv_contains (builtin_names, name_or_path))
    return planner_hardware_new_builtin (name_or_path, error);
  if (g_file_test (name_or_path, G_FILE_TEST_IS_REGULAR))
    return planner_hardware_load_file (name_or_path, error);
  return unknown_hardware (name_or_path, error);
}
