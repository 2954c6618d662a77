#define G_LOG_DOMAIN "test-hardware"

#include "config.h"

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>

#include "planner-error.h"
#include "planner-hardware.h"
#include "test-util.h"

typedef struct
{
  const char *name;
  double bf16, f16, f32, memory_GBps, memory_GB;
  const char *intra_name;
  double intra_GBps;
  const char *inter_name;
  double inter_GBps;
} Figures;

/* The figures of costs.md's table. */
static void
test_builtins (void)
{
  static const Figures expected[] = {
    { "h100-sxm", 989, 989, 67, 3350, 80, "NVLink 4", 370, "NDR InfiniBand", 47 },
    { "h200-sxm", 989, 989, 67, 4800, 141, "NVLink 4", 370, "NDR InfiniBand", 47 },
    { "a100-sxm", 312, 312, 19.5, 2000, 80, "NVLink 3", 225, "HDR InfiniBand", 23 },
    { "cpu-local", 0.025, 0.025, 0.05, 10, 8, "shared memory", 5, "shared memory", 5 },
  };
  const char *const *names = planner_hardware_builtin_names ();

  g_assert_cmpuint (g_strv_length ((char **)names), ==, G_N_ELEMENTS (expected));
  for (guint i = 0; i < G_N_ELEMENTS (expected); i++)
    {
      const Figures *f = &expected[i];
      g_autoptr (PlannerHardware) hw = test_util_hardware (f->name);
      const PlannerLink *intra = planner_hardware_get_link (hw, PLANNER_LINK_INTRA);
      const PlannerLink *inter = planner_hardware_get_link (hw, PLANNER_LINK_INTER);

      g_assert_cmpstr (names[i], ==, f->name);
      g_assert_cmpstr (planner_hardware_get_name (hw), ==, f->name);
      g_assert_cmpstr (planner_hardware_get_description (hw), !=, "");
      g_assert_cmpfloat (planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_BF16), ==, f->bf16);
      g_assert_cmpfloat (planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_F16), ==, f->f16);
      g_assert_cmpfloat (planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_F32), ==, f->f32);
      /* Not in the files: integer ops take the f32 rate. */
      g_assert_cmpfloat (planner_hardware_get_peak_tflops (hw, PLANNER_DTYPE_I64), ==, f->f32);
      g_assert_cmpfloat (planner_hardware_peak_flops (hw, PLANNER_DTYPE_BF16), ==, f->bf16 * 1e12);
      g_assert_cmpfloat (planner_hardware_get_memory_bandwidth_GBps (hw), ==, f->memory_GBps);
      g_assert_cmpfloat (planner_hardware_memory_bandwidth (hw), ==, f->memory_GBps * 1e9);
      g_assert_cmpfloat (planner_hardware_get_memory_GB (hw), ==, f->memory_GB);
      g_assert_cmpuint (planner_hardware_memory_bytes (hw), ==, (guint64)(f->memory_GB * 1e9));
      g_assert_cmpstr (intra->name, ==, f->intra_name);
      g_assert_cmpfloat (intra->bandwidth_GBps, ==, f->intra_GBps);
      g_assert_cmpstr (inter->name, ==, f->inter_name);
      g_assert_cmpfloat (inter->bandwidth_GBps, ==, f->inter_GBps);
      g_assert_cmpuint (planner_hardware_get_n_measurements (hw), ==, 0);
    }

  {
    g_autoptr (PlannerHardware) h100 = test_util_hardware ("h100-sxm");
    g_autoptr (PlannerHardware) cpu = test_util_hardware ("cpu-local");

    g_assert_cmpuint (planner_hardware_get_node_size (h100), ==, 8);
    g_assert_cmpfloat (planner_hardware_get_link (h100, PLANNER_LINK_INTRA)->latency_us, ==, 2.5);
    g_assert_cmpfloat (planner_hardware_get_link (h100, PLANNER_LINK_INTER)->latency_us, ==, 8);
    g_assert_nonnull (strstr (planner_hardware_get_description (cpu), "shardscope-cli calibrate"));
  }
}

/* A profile file added to data/hardware/ but not to the list (or the reverse) is caught here. */
static void
test_builtins_match_resources (void)
{
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm"); /* registers the resource */
  g_assert_nonnull (hw);
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) children = g_resources_enumerate_children (
      "/io/github/shardscope/planner/hardware/", G_RESOURCE_LOOKUP_FLAGS_NONE, &error);
  const char *const *names = planner_hardware_builtin_names ();

  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (children), ==, g_strv_length ((char **)names));
  for (guint i = 0; names[i]; i++)
    {
      g_autofree char *file = g_strdup_printf ("%s.json", names[i]);
      g_assert_true (g_strv_contains ((const char *const *)children, file));
    }
}

static void
test_unknown_builtin (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw = planner_hardware_new_builtin ("h300-sxm", &error);

  g_assert_null (hw);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_HARDWARE);
  g_assert_nonnull (strstr (error->message, "h300-sxm"));
  g_assert_nonnull (strstr (error->message, "h100-sxm, h200-sxm, a100-sxm, cpu-local"));
}

static void
test_lookup (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw = planner_hardware_lookup ("a100-sxm", &error);
  g_autoptr (PlannerHardware) from_file = NULL;
  g_autoptr (PlannerHardware) none = NULL;
  g_autofree char *dir = g_dir_make_tmp ("test-hardware-XXXXXX", &error);
  g_autofree char *path = g_build_filename (dir, "mine.json", NULL);

  g_assert_no_error (error);
  g_assert_cmpstr (planner_hardware_get_name (hw), ==, "a100-sxm");

  planner_hardware_set_name (hw, "my-a100");
  g_assert_true (planner_hardware_save_file (hw, path, &error));
  g_assert_no_error (error);
  from_file = planner_hardware_lookup (path, &error);
  g_assert_no_error (error);
  g_assert_true (planner_hardware_equal (hw, from_file));

  none = planner_hardware_lookup ("no-such-profile.json", &error);
  g_assert_null (none);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_HARDWARE);
  g_assert_nonnull (strstr (error->message, "no-such-profile.json"));
  g_assert_nonnull (strstr (error->message, "cpu-local"));
  g_clear_error (&error);

  /* A file that exists but is bad says which file and which field. */
  g_assert_true (g_file_set_contents (path, "{\"shardscope_hardware\": 1}", -1, &error));
  none = planner_hardware_lookup (path, &error);
  g_assert_null (none);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_nonnull (strstr (error->message, "'name'"));
  g_clear_error (&error);

  g_assert_cmpint (g_remove (path), ==, 0);
  none = planner_hardware_load_file (path, &error);
  g_assert_null (none);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_IO);
  g_assert_nonnull (strstr (error->message, path));
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

typedef struct
{
  const char *mesh;
  guint node_size;
  const char *links; /* one letter per axis: i(ntra) or e(xtern) */
} AxisCase;

static void
test_axis_link (void)
{
  static const AxisCase cases[] = {
    { "dp=4,mp=8", 8, "ei" }, /* mp fills a node; dp crosses nodes */
    { "dp=2,mp=2", 8, "ii" }, /* 4 devices: one node */
    { "a=16", 8, "e" },       /* one axis bigger than a node */
    { "dp=2,mp=4", 8, "ii" }, /* exactly one node */
    { "dp=3,mp=3", 8, "ei" }, /* 9 devices: dp's groups span nodes */
    { "pp=2,dp=2,mp=4", 8, "eii" },
    { "dp=16,x=1", 8, "ei" }, /* a size-1 axis talks to no one */
    { "x=1,dp=16", 8, "ie" },
    { "dp=2,mp=2", 2, "ei" }, /* the node size is the profile's, not always 8 */
    { "dp=4,mp=8", 1024, "ii" },
  };
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (PlannerMesh) m = test_util_mesh (cases[i].mesh);

      planner_hardware_set_node_size (hw, cases[i].node_size);
      g_assert_cmpuint (m->n_axes, ==, strlen (cases[i].links));
      for (guint a = 0; a < m->n_axes; a++)
        {
          gboolean intra = cases[i].links[a] == 'i';
          const PlannerLink *link = planner_hardware_axis_link (hw, m, a);

          g_test_message ("%s node %u axis %u", cases[i].mesh, cases[i].node_size, a);
          g_assert_cmpint (planner_hardware_axis_is_intra (hw, m, a), ==, intra);
          g_assert_cmpint (planner_hardware_axis_link_kind (hw, m, a), ==,
                           intra ? PLANNER_LINK_INTRA : PLANNER_LINK_INTER);
          g_assert_cmpfloat (link->bandwidth_GBps, ==, intra ? 370 : 47);
        }
    }
}

static void
test_roundtrip (void)
{
  for (const char *const *name = planner_hardware_builtin_names (); *name; name++)
    {
      g_autoptr (PlannerHardware) hw = test_util_hardware (*name);
      g_autoptr (GError) error = NULL;
      g_autofree char *text = planner_hardware_to_json (hw);
      g_autoptr (PlannerHardware) back = planner_hardware_from_json (text, &error);
      g_autofree char *again = NULL;

      g_assert_no_error (error);
      g_assert_true (planner_hardware_equal (hw, back));
      again = planner_hardware_to_json (back);
      g_assert_cmpstr (text, ==, again);
    }

  /* Figures that have no short decimal form, edited ones, and measurements. */
  {
    g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
    g_autoptr (GError) error = NULL;
    PlannerLink link = { "NVLink \"4\" \\ custom", 1.0 / 3.0, 0 };
    g_autofree char *text = NULL;
    g_autoptr (PlannerHardware) back = NULL;
    g_autofree char *again = NULL;

    planner_hardware_set_description (hw, "line one\nline \"two\" é");
    planner_hardware_set_peak_tflops (hw, PLANNER_DTYPE_I64, 0.1 + 0.2);
    planner_hardware_set_memory_bandwidth_GBps (hw, 3350.000000000001);
    planner_hardware_set_memory_GB (hw, 85.89934592);
    planner_hardware_set_node_size (hw, 4);
    planner_hardware_set_link (hw, PLANNER_LINK_INTRA, &link);
    planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_GATHER, PLANNER_LINK_INTER, 16, 8,
                                      1.2345678901234567e-5);
    planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8,
                                      G_GUINT64_CONSTANT (1) << 40, 2.9);
    planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, 1024,
                                      1e-300);
    /* Attention curves (a non-causal one with a single point) and the overlap slowdown. */
    PlannerEfficiency e = *planner_hardware_get_efficiency (hw);
    g_assert_cmpuint (e.n_attention, ==, 6);
    e.attention[e.n_attention] = (PlannerAttentionCurve){
      PLANNER_ATTENTION_FLASH1, FALSE, 80, 1, { 4096 }, { 1.0 / 3.0 }
    };
    e.n_attention++;
    e.overlap_slowdown = 0.1 + 0.2;
    planner_hardware_set_efficiency (hw, &e);
    text = planner_hardware_to_json (hw);
    back = planner_hardware_from_json (text, &error);
    g_assert_no_error (error);
    g_assert_true (planner_hardware_equal (hw, back));
    again = planner_hardware_to_json (back);
    g_assert_cmpstr (text, ==, again);

    /* A copy is equal and independent. */
    {
      g_autoptr (PlannerHardware) copy = planner_hardware_copy (hw);

      g_assert_true (planner_hardware_equal (hw, copy));
      planner_hardware_add_measurement (copy, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, 1024,
                                        2e-300);
      g_assert_false (planner_hardware_equal (hw, copy));
      planner_hardware_clear_measurements (copy);
      g_assert_cmpuint (planner_hardware_get_n_measurements (copy), ==, 0);
      g_assert_cmpuint (planner_hardware_get_n_measurements (hw), ==, 2);
    }
    /* Equality sees every efficiency member added with the attention curves. */
    {
      g_autoptr (PlannerHardware) copy = planner_hardware_copy (hw);
      PlannerEfficiency c = *planner_hardware_get_efficiency (copy);
      c.overlap_slowdown = 0.2;
      planner_hardware_set_efficiency (copy, &c);
      g_assert_false (planner_hardware_equal (hw, copy));
      c = *planner_hardware_get_efficiency (hw);
      c.attention[2].efficiency[3] += 0.01;
      planner_hardware_set_efficiency (copy, &c);
      g_assert_false (planner_hardware_equal (hw, copy));
      c = *planner_hardware_get_efficiency (hw);
      c.attention[0].causal = !c.attention[0].causal;
      planner_hardware_set_efficiency (copy, &c);
      g_assert_false (planner_hardware_equal (hw, copy));
    }
  }
}

static void
test_measurements (void)
{
  g_autoptr (PlannerHardware) hw = planner_hardware_new ("test");
  const PlannerMeasuredPoint *points;
  PlannerStepKind kind;
  PlannerLinkKind link;
  guint p, n;

  /* Out of order, and a repeated size that replaces the earlier time. */
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_TO_ALL, PLANNER_LINK_INTER, 4, 4096, 4.0);
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, 2048, 2.0);
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, 1024, 1.0);
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, 4096, 3.0);
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, 2048, 2.5);
  planner_hardware_add_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 2, 64, 0.5);

  points
      = planner_hardware_get_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 8, &n);
  g_assert_cmpuint (n, ==, 3);
  g_assert_cmpuint (points[0].bytes, ==, 1024);
  g_assert_cmpuint (points[1].bytes, ==, 2048);
  g_assert_cmpfloat (points[1].seconds, ==, 2.5);
  g_assert_cmpuint (points[2].bytes, ==, 4096);

  g_assert_null (
      planner_hardware_get_measurement (hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTER, 8, &n));
  g_assert_cmpuint (n, ==, 0);

  /* Listed in (kind, link, p) order. */
  g_assert_cmpuint (planner_hardware_get_n_measurements (hw), ==, 3);
  points = planner_hardware_get_nth_measurement (hw, 0, &kind, &link, &p, &n);
  g_assert_cmpint (kind, ==, PLANNER_STEP_ALL_REDUCE);
  g_assert_cmpuint (p, ==, 2);
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpfloat (points[0].seconds, ==, 0.5);
  planner_hardware_get_nth_measurement (hw, 1, &kind, &link, &p, &n);
  g_assert_cmpint (kind, ==, PLANNER_STEP_ALL_REDUCE);
  g_assert_cmpuint (p, ==, 8);
  planner_hardware_get_nth_measurement (hw, 2, &kind, &link, &p, &n);
  g_assert_cmpint (kind, ==, PLANNER_STEP_ALL_TO_ALL);
  g_assert_cmpint (link, ==, PLANNER_LINK_INTER);
  g_assert_cmpuint (p, ==, 4);
}

static void
test_strings (void)
{
  static const char *const steps[]
      = { "AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Slice" };
  PlannerStepKind kind;
  PlannerLinkKind link;

  for (guint i = 0; i < PLANNER_N_STEP_KINDS; i++)
    {
      g_assert_cmpstr (planner_step_kind_to_string (i), ==, steps[i]);
      g_assert_true (planner_step_kind_from_string (steps[i], &kind));
      g_assert_cmpint (kind, ==, i);
    }
  g_assert_false (planner_step_kind_from_string ("allreduce", &kind));
  g_assert_false (planner_step_kind_from_string ("", &kind));

  for (guint i = 0; i < PLANNER_N_LINKS; i++)
    {
      g_assert_true (planner_link_kind_from_string (planner_link_kind_to_string (i), &link));
      g_assert_cmpint (link, ==, i);
    }
  g_assert_false (planner_link_kind_from_string ("nvlink", &link));
}

/* Bad files: each is the minimal valid profile with one thing wrong. */
#define VALID_HEAD "{\"shardscope_hardware\": 1, \"name\": \"x\", "
#define VALID_PEAKS "\"peak_tflops\": {\"f32\": 1, \"bf16\": 2, \"f16\": 2}, "
#define VALID_MEMORY "\"memory_bandwidth_GBps\": 100, \"memory_GB\": 16, "
#define VALID_LINKS                                                                                \
  "\"links\": {\"intra\": {\"bandwidth_GBps\": 10, \"latency_us\": 1}, "                           \
  "\"inter\": {\"bandwidth_GBps\": 1, \"latency_us\": 5}}"
#define VALID_BODY VALID_PEAKS VALID_MEMORY VALID_LINKS

typedef struct
{
  const char *json;
  int code;
  const char *fragment;
} BadCase;

static void
test_bad_files (void)
{
  static const BadCase cases[] = {
    { "{\"shardscope_hardware\": ", PLANNER_ERROR_MALFORMED_FILE,
      "hardware profile:1:24: Parse error" },
    { "[1, 2]", PLANNER_ERROR_MALFORMED_FILE, "top level" },
    { "{\"name\": \"x\", " VALID_BODY "}", PLANNER_ERROR_MALFORMED_FILE,
      "'shardscope_hardware' is missing" },
    { "{\"shardscope_hardware\": 2, \"name\": \"x\", " VALID_BODY "}", PLANNER_ERROR_MALFORMED_FILE,
      "newer than" },
    { "{\"shardscope_hardware\": \"1\", \"name\": \"x\", " VALID_BODY "}",
      PLANNER_ERROR_MALFORMED_FILE, "'shardscope_hardware' must be an integer" },
    { "{\"shardscope_hardware\": 1, " VALID_BODY "}", PLANNER_ERROR_MALFORMED_FILE,
      "'name' is missing" },
    { "{\"shardscope_hardware\": 1, \"name\": \"\", " VALID_BODY "}", PLANNER_ERROR_MALFORMED_FILE,
      "'name' must not be empty" },
    { VALID_HEAD "\"node-size\": 8, " VALID_BODY "}", PLANNER_ERROR_MALFORMED_FILE,
      "'node-size' is not known" },
    { VALID_HEAD
      "\"peak_tflops\": {\"f32\": 1, \"bf16\": -2, \"f16\": 2}, " VALID_MEMORY VALID_LINKS "}",
      PLANNER_ERROR_MALFORMED_FILE, "'peak_tflops.bf16' must be > 0, got -2" },
    { VALID_HEAD "\"peak_tflops\": {\"f32\": 1, \"bf16\": 2}, " VALID_MEMORY VALID_LINKS "}",
      PLANNER_ERROR_MALFORMED_FILE, "'peak_tflops.f16' is missing" },
    { VALID_HEAD "\"peak_tflops\": {\"f32\": 1, \"bf16\": 2, \"f16\": 2, \"fp8\": 4}, " VALID_MEMORY
          VALID_LINKS "}",
      PLANNER_ERROR_MALFORMED_FILE, "'peak_tflops.fp8' is not a dtype" },
    { VALID_HEAD VALID_PEAKS "\"memory_bandwidth_GBps\": 0, \"memory_GB\": 16, " VALID_LINKS "}",
      PLANNER_ERROR_MALFORMED_FILE, "'memory_bandwidth_GBps' must be > 0, got 0" },
    { VALID_HEAD VALID_PEAKS "\"memory_bandwidth_GBps\": 100, \"memory_GB\": \"16\", " VALID_LINKS
                             "}",
      PLANNER_ERROR_MALFORMED_FILE, "'memory_GB' must be a number" },
    { VALID_HEAD VALID_BODY ", \"node_size\": 0}", PLANNER_ERROR_MALFORMED_FILE,
      "'node_size' must be in [1," },
    { VALID_HEAD VALID_BODY ", \"node_size\": 8.5}", PLANNER_ERROR_MALFORMED_FILE,
      "'node_size' must be an integer" },
    { VALID_HEAD VALID_PEAKS VALID_MEMORY
      "\"links\": {\"intra\": {\"bandwidth_GBps\": 10, \"latency_us\": 1}}}",
      PLANNER_ERROR_MALFORMED_FILE, "'links.inter' is missing" },
    { VALID_HEAD VALID_PEAKS VALID_MEMORY
      "\"links\": {\"intra\": {\"bandwidth_GBps\": 10, \"latency_us\": -1}, "
      "\"inter\": {\"bandwidth_GBps\": 1, \"latency_us\": 5}}}",
      PLANNER_ERROR_MALFORMED_FILE, "'links.intra.latency_us' must be >= 0, got -1" },
    { VALID_HEAD VALID_PEAKS VALID_MEMORY
      "\"links\": {\"intra\": {\"bandwidth_GBps\": 10, \"latency_us\": 1}, "
      "\"inter\": {\"latency_us\": 5}}}",
      PLANNER_ERROR_MALFORMED_FILE, "'links.inter.bandwidth_GBps' is missing" },
    { VALID_HEAD VALID_PEAKS VALID_MEMORY
      "\"links\": {\"intra\": {\"bandwidth_GBps\": 10, \"latency_us\": 1}, "
      "\"inter\": {\"bandwidth_GBps\": 1, \"latency_us\": 5}, \"pcie\": {}}}",
      PLANNER_ERROR_MALFORMED_FILE, "'links.pcie' is not known" },
    { VALID_HEAD VALID_PEAKS VALID_MEMORY
      "\"links\": {\"intra\": {\"name\": \"0123456789012345678901234567890123\", "
      "\"bandwidth_GBps\": 10, \"latency_us\": 1}, "
      "\"inter\": {\"bandwidth_GBps\": 1, \"latency_us\": 5}}}",
      PLANNER_ERROR_MALFORMED_FILE, "'links.intra.name' is longer than 31" },
    { VALID_HEAD VALID_BODY ", \"measurements\": {}}", PLANNER_ERROR_MALFORMED_FILE,
      "'measurements' must be an array" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"Slice\", \"link\": \"intra\", "
                            "\"p\": 2, \"points\": [[8, 1e-6]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].step' must be a collective" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"nvlink\", "
                            "\"p\": 2, \"points\": [[8, 1e-6]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].link' must be \"intra\" or \"inter\"" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 1, \"points\": [[8, 1e-6]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].p' must be in [2," },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 2, \"points\": []}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].points' must hold at least one" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 2, \"points\": [[16, 1e-6], [8, 2e-6]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].points[1]' must have more bytes" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 2, \"points\": [[16, 0]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].points[0]' must be > 0, got 0" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 2, \"points\": [[16, 1e-6, 3]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].points[0]' must be a [bytes, seconds]" },
    { VALID_HEAD VALID_BODY
      ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
      "\"p\": 2, \"points\": [[16, 1e-6]]}, {\"step\": \"AllReduce\", \"link\": \"intra\", "
      "\"p\": 2, \"points\": [[32, 1e-6]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[1]' repeats" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 2, \"points\": [[16, 1e-6]], \"median\": true}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].median' is not known" },
    /* 1e308 GB is finite, but its bytes (x 1e9) are not: it read as a negative capacity. */
    { VALID_HEAD VALID_PEAKS "\"memory_bandwidth_GBps\": 100, \"memory_GB\": 1e308, " VALID_LINKS
                             "}",
      PLANNER_ERROR_MALFORMED_FILE, "'memory_GB' must be at most 1e+06, got 1e+308" },
    { VALID_HEAD
      "\"peak_tflops\": {\"f32\": 1, \"bf16\": 2e9, \"f16\": 2}, " VALID_MEMORY VALID_LINKS "}",
      PLANNER_ERROR_MALFORMED_FILE, "'peak_tflops.bf16' must be at most 1e+09, got 2e+09" },
    { VALID_HEAD VALID_PEAKS VALID_MEMORY
      "\"links\": {\"intra\": {\"bandwidth_GBps\": 10, \"latency_us\": 1}, "
      "\"inter\": {\"bandwidth_GBps\": 1, \"latency_us\": 1.5e9}}}",
      PLANNER_ERROR_MALFORMED_FILE, "'links.inter.latency_us' must be at most 1e+09" },
    { VALID_HEAD VALID_BODY ", \"node_size\": 1048577}", PLANNER_ERROR_MALFORMED_FILE,
      "'node_size' must be in [1, 1048576], got 1048577" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 4294967295, \"points\": [[8, 1e-6]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].p' must be in [2, 1048576], got 4294967295" },
    { VALID_HEAD VALID_BODY ", \"measurements\": [{\"step\": \"AllReduce\", \"link\": \"intra\", "
                            "\"p\": 2, \"points\": [[16, 1e10]]}]}",
      PLANNER_ERROR_MALFORMED_FILE, "'measurements[0].points[0]' must be at most 1e+09" },
    /* The efficiency object's attention curves and overlap slowdown. */
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"attention\": [{\"kernel\": \"unfused\", "
                            "\"causal\": true, \"head_dim\": 128, \"points\": [[512, 0.5]]}]}}",
      PLANNER_ERROR_MALFORMED_FILE, "'efficiency.attention[0].kernel' must be a fused kernel" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"attention\": [{\"kernel\": \"flash3\", "
                            "\"causal\": true, \"head_dim\": 128, \"points\": [[512, 0.5]]}]}}",
      PLANNER_ERROR_MALFORMED_FILE, "got \"flash3\"" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"attention\": [{\"kernel\": \"flash\", "
                            "\"causal\": 1, \"head_dim\": 128, \"points\": [[512, 0.5]]}]}}",
      PLANNER_ERROR_MALFORMED_FILE, "'efficiency.attention[0].causal' must be true or false" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"attention\": [{\"kernel\": \"flash\", "
                            "\"causal\": true, \"points\": [[512, 0.5]]}]}}",
      PLANNER_ERROR_MALFORMED_FILE, "'efficiency.attention[0].head_dim' is missing" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"attention\": [{\"kernel\": \"flash\", "
                            "\"causal\": true, \"head_dim\": 128, "
                            "\"points\": [[1024, 0.5], [512, 0.6]]}]}}",
      PLANNER_ERROR_MALFORMED_FILE,
      "'efficiency.attention[0].points[1]' must have a sequence >= 1 and larger" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"attention\": [{\"kernel\": \"flash\", "
                            "\"causal\": true, \"head_dim\": 128, \"points\": [[512, 1.5]]}]}}",
      PLANNER_ERROR_MALFORMED_FILE,
      "'efficiency.attention[0].points[0]' must be a fraction in (0, 1], got 1.5" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"attention\": [{\"kernel\": \"flash\", "
                            "\"causal\": true, \"head_dim\": 128, \"points\": [[512, 0.5]], "
                            "\"dtype\": \"bf16\"}]}}",
      PLANNER_ERROR_MALFORMED_FILE, "'efficiency.attention[0].dtype' is not known" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"overlap_slowdown\": 1}}",
      PLANNER_ERROR_MALFORMED_FILE, "'efficiency.overlap_slowdown' must be in [0, 1), got 1" },
    { VALID_HEAD VALID_BODY ", \"efficiency\": {\"overlap_slowdown\": -0.1}}",
      PLANNER_ERROR_MALFORMED_FILE, "'efficiency.overlap_slowdown' must be in [0, 1), got -0.1" },
  };

  /* The base they all vary is itself valid, and node_size defaults to 8. */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (PlannerHardware) hw = planner_hardware_from_json (VALID_HEAD VALID_BODY "}", &error);

    g_assert_no_error (error);
    g_assert_cmpuint (planner_hardware_get_node_size (hw), ==, 8);
    g_assert_cmpfloat (planner_hardware_get_link (hw, PLANNER_LINK_INTER)->latency_us, ==, 5);
  }

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (PlannerHardware) hw = planner_hardware_from_json (cases[i].json, &error);

      g_test_message ("case %u: %s", i, cases[i].json);
      g_assert_null (hw);
      g_assert_error (error, PLANNER_ERROR, cases[i].code);
      if (strstr (error->message, cases[i].fragment) == NULL)
        g_error ("case %u: '%s' lacks '%s'", i, error->message, cases[i].fragment);
    }
}

/* A profile with one AllReduce curve of @n points, (k + 1) bytes in k microseconds. */
static char *
profile_with_points (guint n)
{
  GString *s = g_string_new (VALID_HEAD VALID_BODY
                             ", \"measurements\": [{\"step\": "
                             "\"AllReduce\", \"link\": \"intra\", \"p\": 2, \"points\": [");
  for (guint k = 1; k <= n; k++)
    g_string_append_printf (s, "%s[%u, %ue-6]", k > 1 ? ", " : "", k + 1, k);
  g_string_append (s, "]}]}");
  return g_string_free (s, FALSE);
}

/* A hand-made profile with 100,000 points took 5 s to read (each point is inserted in
 * order): a curve holds at most 1024, which a calibration sweep (one point per power of two
 * of bytes) never nears. */
static void
test_point_limit (void)
{
  g_autofree char *most = profile_with_points (1024);
  g_autofree char *too_many = profile_with_points (100000);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw = planner_hardware_from_json (most, &error);
  guint n_points;

  g_assert_no_error (error);
  const PlannerMeasuredPoint *points = planner_hardware_get_measurement (
      hw, PLANNER_STEP_ALL_REDUCE, PLANNER_LINK_INTRA, 2, &n_points);
  g_assert_cmpuint (n_points, ==, 1024);
  g_assert_cmpuint (points[1023].bytes, ==, 1025);
  g_assert_cmpfloat (points[1023].seconds, ==, 1024e-6);

  g_autoptr (PlannerHardware) refused = planner_hardware_from_json (too_many, &error);
  g_assert_null (refused);
  g_assert_error (error, PLANNER_ERROR, PLANNER_ERROR_MALFORMED_FILE);
  g_assert_nonnull (strstr (error->message, "field 'measurements[0].points' holds 100000 points; "
                                            "a curve holds at most 1024"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/planner/hardware/builtins", test_builtins);
  g_test_add_func ("/planner/hardware/builtins-match-resources", test_builtins_match_resources);
  g_test_add_func ("/planner/hardware/unknown-builtin", test_unknown_builtin);
  g_test_add_func ("/planner/hardware/lookup", test_lookup);
  g_test_add_func ("/planner/hardware/axis-link", test_axis_link);
  g_test_add_func ("/planner/hardware/roundtrip", test_roundtrip);
  g_test_add_func ("/planner/hardware/measurements", test_measurements);
  g_test_add_func ("/planner/hardware/strings", test_strings);
  g_test_add_func ("/planner/hardware/bad-files", test_bad_files);
  g_test_add_func ("/planner/hardware/point-limit", test_point_limit);

  return g_test_run ();
}
