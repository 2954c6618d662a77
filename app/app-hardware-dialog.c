#define G_LOG_DOMAIN "app-hardware-dialog"
#include "config.h"

#include "app-hardware-dialog.h"

#include <errno.h>
#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <math.h>

#include "planner-error.h"

/* ---- the user's profiles ---------------------------------------------------------- */

char *
app_hardware_user_dir (void)
{
  return g_build_filename (g_get_user_data_dir (), "shardscope", "hardware", NULL);
}

static char *
user_profile_path (const char *name)
{
  g_autofree char *dir = app_hardware_user_dir ();
  g_autofree char *file = g_strconcat (name, ".json", NULL);
  return g_build_filename (dir, file, NULL);
}

static gboolean
is_builtin (const char *name)
{
  return g_strv_contains (planner_hardware_builtin_names (), name);
}

GStrv
app_hardware_list_names (void)
{
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  g_strv_builder_addv (builder, (const char **)planner_hardware_builtin_names ());
  g_autofree char *path = app_hardware_user_dir ();
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  g_autoptr (GPtrArray) user = g_ptr_array_new_with_free_func (g_free);
  const char *file;
  while (dir && (file = g_dir_read_name (dir)))
    if (g_str_has_suffix (file, ".json"))
      {
        char *name = g_strndup (file, strlen (file) - strlen (".json"));
        if (*name && !is_builtin (name))
          g_ptr_array_add (user, name);
        else
          g_free (name);
      }
  g_ptr_array_sort (user, (GCompareFunc)g_strcmp0);
  for (guint i = 0; i < user->len; i++)
    g_strv_builder_add (builder, *(char **)&user->pdata[i]);
  return g_strv_builder_end (builder);
}

PlannerHardware *
app_hardware_lookup (const char *name, GError **error)
{
  g_return_val_if_fail (name != NULL, NULL);
  /* Saved names never take a built-in's (the dialog refuses them), nor hold a separator. */
  if (!is_builtin (name) && strchr (name, G_DIR_SEPARATOR) == NULL)
    {
      g_autofree char *path = user_profile_path (name);
      if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
        return planner_hardware_load_file (path, error);
    }
  return planner_hardware_lookup (name, error);
}

/* ---- rows ------------------------------------------------------------------------- */

typedef enum
{
  FIELD_NAME,
  FIELD_DESCRIPTION,
  FIELD_PEAK, /* arg: PlannerDType */
  FIELD_MEMORY_BANDWIDTH,
  FIELD_MEMORY,
  FIELD_NODE_SIZE,
  FIELD_LINK_NAME, /* arg: PlannerLinkKind */
  FIELD_LINK_BANDWIDTH,
  FIELD_LINK_LATENCY,
  FIELD_EFFICIENCY,       /* a double of PlannerEfficiency at offset */
  FIELD_EFFICIENCY_COUNT, /* a guint of PlannerEfficiency at offset */
  FIELD_GEMM,             /* the GEMM table, "256:0.2, 512:0.38" */
  FIELD_ATTENTION,        /* arg: the curve's index */
} FieldKind;

typedef struct
{
  const char *key;
  const char *title; /* translatable */
  FieldKind kind;
  int arg;
  gsize offset;
  gboolean positive; /* must be > 0, else >= 0 */
} Field;

#define EFF(member) offsetof (PlannerEfficiency, member)

static const Field fields[] = {
  { "name", N_ ("Name"), FIELD_NAME },
  { "description", N_ ("Description"), FIELD_DESCRIPTION },
  { "peak_tflops.f32", N_ ("Peak f32 (TFLOP/s)"), FIELD_PEAK, PLANNER_DTYPE_F32, 0, TRUE },
  { "peak_tflops.bf16", N_ ("Peak bf16 (TFLOP/s)"), FIELD_PEAK, PLANNER_DTYPE_BF16, 0, TRUE },
  { "peak_tflops.f16", N_ ("Peak f16 (TFLOP/s)"), FIELD_PEAK, PLANNER_DTYPE_F16, 0, TRUE },
  { "memory_bandwidth_GBps", N_ ("HBM bandwidth (GB/s)"), FIELD_MEMORY_BANDWIDTH, 0, 0, TRUE },
  { "memory_GB", N_ ("Memory per device (GB)"), FIELD_MEMORY, 0, 0, TRUE },
  { "node_size", N_ ("Devices per node"), FIELD_NODE_SIZE, 0, 0, TRUE },
  { "links.intra.name", N_ ("Intra-node link"), FIELD_LINK_NAME, PLANNER_LINK_INTRA },
  { "links.intra.bandwidth_GBps", N_ ("Intra-node bandwidth (GB/s busbw)"), FIELD_LINK_BANDWIDTH,
    PLANNER_LINK_INTRA, 0, TRUE },
  { "links.intra.latency_us", N_ ("Intra-node latency per ring step (µs)"), FIELD_LINK_LATENCY,
    PLANNER_LINK_INTRA },
  { "links.inter.name", N_ ("Inter-node link"), FIELD_LINK_NAME, PLANNER_LINK_INTER },
  { "links.inter.bandwidth_GBps", N_ ("Inter-node bandwidth (GB/s busbw)"), FIELD_LINK_BANDWIDTH,
    PLANNER_LINK_INTER, 0, TRUE },
  { "links.inter.latency_us", N_ ("Inter-node latency per ring step (µs)"), FIELD_LINK_LATENCY,
    PLANNER_LINK_INTER },
  { "efficiency.gemm", N_ ("GEMM efficiency by (M N K)^⅓ (size:fraction, …)"), FIELD_GEMM },
  { "efficiency.attention_flash.forward", N_ ("Flash attention forward (fraction of peak)"),
    FIELD_EFFICIENCY, 0, EFF (flash_forward) },
  { "efficiency.attention_flash.backward", N_ ("Flash attention backward (fraction of peak)"),
    FIELD_EFFICIENCY, 0, EFF (flash_backward) },
  { "efficiency.memory_bound", N_ ("Memory-bound kernels (fraction of HBM bandwidth)"),
    FIELD_EFFICIENCY, 0, EFF (memory_bound) },
  { "efficiency.kernel_launch_us", N_ ("Kernel launch (µs)"), FIELD_EFFICIENCY, 0,
    EFF (kernel_launch_us) },
  { "efficiency.nics_per_node", N_ ("NICs per node"), FIELD_EFFICIENCY_COUNT, 0,
    EFF (nics_per_node) },
  { "efficiency.nvls_bandwidth_GBps", N_ ("NVLS AllReduce bandwidth (GB/s busbw)"),
    FIELD_EFFICIENCY, 0, EFF (nvls_bandwidth_GBps) },
  { "efficiency.nvls_latency_us", N_ ("NVLS latency (µs)"), FIELD_EFFICIENCY, 0,
    EFF (nvls_latency_us) },
  { "efficiency.nvls_chunk_us", N_ ("NVLS cost per round of chunks (µs)"), FIELD_EFFICIENCY, 0,
    EFF (nvls_chunk_us) },
  { "efficiency.nvls_fill_chunks", N_ ("NVLS pipeline fill (rounds)"), FIELD_EFFICIENCY, 0,
    EFF (nvls_fill_chunks) },
  { "efficiency.nvls_channels", N_ ("NVLS channels"), FIELD_EFFICIENCY, 0, EFF (nvls_channels) },
  { "efficiency.nvls_max_chunk_KiB", N_ ("NVLS largest chunk (KiB)"), FIELD_EFFICIENCY, 0,
    EFF (nvls_max_chunk_KiB) },
  { "efficiency.ll_base_us", N_ ("LL protocol base latency (µs)"), FIELD_EFFICIENCY, 0,
    EFF (ll_base_us) },
  { "efficiency.ll_step_us", N_ ("LL protocol latency per step (µs)"), FIELD_EFFICIENCY, 0,
    EFF (ll_step_us) },
  { "efficiency.ll_bandwidth_factor", N_ ("LL protocol bandwidth (fraction of the link's)"),
    FIELD_EFFICIENCY, 0, EFF (ll_bandwidth_factor) },
  { "efficiency.ll_bandwidth_GBps", N_ ("LL protocol bandwidth cap (GB/s)"), FIELD_EFFICIENCY, 0,
    EFF (ll_bandwidth_GBps) },
  { "efficiency.ll128_base_us", N_ ("LL128 protocol base latency (µs)"), FIELD_EFFICIENCY, 0,
    EFF (ll128_base_us) },
  { "efficiency.ll128_step_us", N_ ("LL128 protocol latency per step (µs)"), FIELD_EFFICIENCY, 0,
    EFF (ll128_step_us) },
  { "efficiency.ll128_bandwidth_factor", N_ ("LL128 protocol bandwidth (fraction of the link's)"),
    FIELD_EFFICIENCY, 0, EFF (ll128_bandwidth_factor) },
  { "efficiency.ll128_bandwidth_GBps", N_ ("LL128 protocol bandwidth cap (GB/s)"),
    FIELD_EFFICIENCY, 0, EFF (ll128_bandwidth_GBps) },
  { "efficiency.ring_base_us", N_ ("Intra-node ring base latency (µs)"), FIELD_EFFICIENCY, 0,
    EFF (ring_base_us) },
  { "efficiency.ring_step_us", N_ ("Intra-node ring latency per step (µs)"), FIELD_EFFICIENCY, 0,
    EFF (ring_step_us) },
  { "efficiency.overlap_slowdown", N_ ("Compute slowdown under overlapped communication"),
    FIELD_EFFICIENCY, 0, EFF (overlap_slowdown) },
  { "runtime_memory.cuda_context_MiB", N_ ("CUDA context (MiB)"),
    FIELD_EFFICIENCY, 0, EFF (cuda_context_MiB) },
  { "runtime_memory.cublas_workspace_KiB", N_ ("cuBLAS workspace per stream (KiB)"),
    FIELD_EFFICIENCY, 0, EFF (cublas_workspace_KiB) },
  { "runtime_memory.nccl_channels", N_ ("NCCL ring channels"),
    FIELD_EFFICIENCY, 0, EFF (nccl_channels) },
  { "runtime_memory.nccl_buffer_KiB", N_ ("NCCL buffers per channel (KiB)"),
    FIELD_EFFICIENCY, 0, EFF (nccl_buffer_KiB) },
  { "runtime_memory.allocator_min_block_B", N_ ("Caching allocator block rounding (B, 0: none)"),
    FIELD_EFFICIENCY, 0, EFF (allocator_min_block_B) },
  { "runtime_memory.allocator_small_size_KiB", N_ ("Caching allocator largest small request (KiB)"),
    FIELD_EFFICIENCY, 0, EFF (allocator_small_size_KiB) },
  { "runtime_memory.allocator_small_segment_KiB", N_ ("Caching allocator small segment (KiB)"),
    FIELD_EFFICIENCY, 0, EFF (allocator_small_segment_KiB) },
  { "runtime_memory.allocator_large_segment_KiB", N_ ("Caching allocator large segment (KiB)"),
    FIELD_EFFICIENCY, 0, EFF (allocator_large_segment_KiB) },
  { "runtime_memory.allocator_min_large_alloc_KiB", N_ ("Caching allocator own segment from (KiB)"),
    FIELD_EFFICIENCY, 0, EFF (allocator_min_large_alloc_KiB) },
  { "runtime_memory.allocator_round_large_KiB", N_ ("Caching allocator large rounding (KiB)"),
    FIELD_EFFICIENCY, 0, EFF (allocator_round_large_KiB) },
};

typedef struct
{
  const Field *field;
  Field attention; /* FIELD_ATTENTION rows own their field */
  char *key;
  GtkWidget *row; /* an AdwEntryRow */
} Row;

struct _AppHardwareDialog
{
  AdwWindow parent_instance;

  PlannerHardware *hw; /* what was given: measurements and whatever no row shows */
  GPtrArray *rows;     /* Row* */
  GtkWidget *save_button;
  GtkLabel *status;
};

G_DEFINE_FINAL_TYPE (AppHardwareDialog, app_hardware_dialog, ADW_TYPE_WINDOW)

enum
{
  SIGNAL_SAVED,
  N_SIGNALS
};
static guint signals[N_SIGNALS];

static void
row_free (Row *row)
{
  g_free (row->key);
  g_free (row);
}

/* Figures as people typed them: "370", "0.05", never "0.050000000000000003". */
static char *
format_number (double value)
{
  char buffer[G_ASCII_DTOSTR_BUF_SIZE];
  return g_strdup (g_ascii_formatd (buffer, sizeof buffer, "%.15g", value));
}

static char *
format_points (const double *x, const double *y, guint n)
{
  GString *text = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *a = format_number (x[i]);
      g_autofree char *b = format_number (y[i]);
      g_string_append_printf (text, "%s%s:%s", i ? ", " : "", a, b);
    }
  return g_string_free (text, FALSE);
}

static char *
field_text (const PlannerHardware *hw, const Field *f)
{
  const PlannerEfficiency *eff = planner_hardware_get_efficiency (hw);
  switch (f->kind)
    {
    case FIELD_NAME:
      return g_strdup (planner_hardware_get_name (hw));
    case FIELD_DESCRIPTION:
      return g_strdup (planner_hardware_get_description (hw));
    case FIELD_PEAK:
      return format_number (planner_hardware_get_peak_tflops (hw, f->arg));
    case FIELD_MEMORY_BANDWIDTH:
      return format_number (planner_hardware_get_memory_bandwidth_GBps (hw));
    case FIELD_MEMORY:
      return format_number (planner_hardware_get_memory_GB (hw));
    case FIELD_NODE_SIZE:
      return g_strdup_printf ("%u", planner_hardware_get_node_size (hw));
    case FIELD_LINK_NAME:
      return g_strdup (planner_hardware_get_link (hw, f->arg)->name);
    case FIELD_LINK_BANDWIDTH:
      return format_number (planner_hardware_get_link (hw, f->arg)->bandwidth_GBps);
    case FIELD_LINK_LATENCY:
      return format_number (planner_hardware_get_link (hw, f->arg)->latency_us);
    case FIELD_EFFICIENCY:
      return format_number (*(const double *)((const char *)eff + f->offset));
    case FIELD_EFFICIENCY_COUNT:
      return g_strdup_printf ("%u", *(const guint *)((const char *)eff + f->offset));
    case FIELD_GEMM:
      return format_points (eff->gemm_size, eff->gemm_efficiency, eff->n_gemm);
    case FIELD_ATTENTION:
      {
        const PlannerAttentionCurve *c = &eff->attention[f->arg];
        return format_points (c->seq, c->efficiency, c->n);
      }
    }
  g_assert_not_reached ();
}

static gboolean
refuse (GError **error, const char *key, const char *text, const char *what)
{
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE, _ ("%s: “%s” is not %s"), key, text,
               what);
  return FALSE;
}

static gboolean
parse_number (const char *key, const char *text, gboolean positive, double *value, GError **error)
{
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod (text, &end);
  while (end && g_ascii_isspace (*end))
    end++;
  if (end == text || *end != '\0' || errno || !isfinite (v) || v < 0 || (positive && v == 0))
    return refuse (error, key, text, positive ? _ ("a number above 0") : _ ("a number, 0 or more"));
  *value = v;
  return TRUE;
}

/* "256:0.2, 512:0.38": increasing sizes, fractions in (0, 1]. */
static gboolean
parse_points (const char *key, const char *text, double *x, double *y, guint *n, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (text, ",", -1);
  guint count = 0;
  for (guint i = 0; parts[i]; i++)
    {
      char *part = g_strstrip (parts[i]);
      if (*part == '\0' && parts[1] == NULL)
        break;
      g_auto (GStrv) pair = g_strsplit (part, ":", 2);
      double a, b;
      if (count == PLANNER_MAX_EFFICIENCY_POINTS || g_strv_length (pair) != 2
          || !parse_number (key, g_strstrip (pair[0]), TRUE, &a, NULL)
          || !parse_number (key, g_strstrip (pair[1]), TRUE, &b, NULL) || b > 1
          || (count > 0 && a <= x[count - 1]))
        return refuse (
            error, key, part,
            _ ("size:fraction with sizes increasing and fractions in (0, 1], at most 16 points"));
      x[count] = a;
      y[count] = b;
      count++;
    }
  *n = count;
  return TRUE;
}

static gboolean
apply_field (PlannerHardware *hw, const Field *f, const char *key, const char *text, GError **error)
{
  PlannerEfficiency eff = *planner_hardware_get_efficiency (hw);
  double v = 0;
  gboolean numeric = f->kind != FIELD_NAME && f->kind != FIELD_DESCRIPTION
                     && f->kind != FIELD_LINK_NAME && f->kind != FIELD_GEMM
                     && f->kind != FIELD_ATTENTION;
  if (numeric && !parse_number (key, text, f->positive, &v, error))
    return FALSE;
  if ((f->kind == FIELD_NODE_SIZE || f->kind == FIELD_EFFICIENCY_COUNT)
      && (v != floor (v) || v > G_MAXUINT))
    return refuse (error, key, text, _ ("a whole number"));
  switch (f->kind)
    {
    case FIELD_NAME:
      {
        g_autofree char *name = g_strstrip (g_strdup (text));
        if (*name == '\0' || strchr (name, '/') || strchr (name, '\\') || name[0] == '.')
          return refuse (error, key, text, _ ("a file name (no slash, not starting with a dot)"));
        planner_hardware_set_name (hw, name);
        return TRUE;
      }
    case FIELD_DESCRIPTION:
      planner_hardware_set_description (hw, text);
      return TRUE;
    case FIELD_PEAK:
      planner_hardware_set_peak_tflops (hw, f->arg, v);
      return TRUE;
    case FIELD_MEMORY_BANDWIDTH:
      planner_hardware_set_memory_bandwidth_GBps (hw, v);
      return TRUE;
    case FIELD_MEMORY:
      planner_hardware_set_memory_GB (hw, v);
      return TRUE;
    case FIELD_NODE_SIZE:
      planner_hardware_set_node_size (hw, (guint)v);
      return TRUE;
    case FIELD_LINK_NAME:
    case FIELD_LINK_BANDWIDTH:
    case FIELD_LINK_LATENCY:
      {
        PlannerLink link = *planner_hardware_get_link (hw, f->arg);
        if (f->kind == FIELD_LINK_NAME)
          {
            if (strlen (text) >= PLANNER_MAX_LINK_NAME)
              return refuse (error, key, text, _ ("a name of at most 31 bytes"));
            g_strlcpy (link.name, text, sizeof link.name);
          }
        else if (f->kind == FIELD_LINK_BANDWIDTH)
          link.bandwidth_GBps = v;
        else
          link.latency_us = v;
        planner_hardware_set_link (hw, f->arg, &link);
        return TRUE;
      }
    case FIELD_EFFICIENCY:
      *(double *)((char *)&eff + f->offset) = v;
      break;
    case FIELD_EFFICIENCY_COUNT:
      *(guint *)((char *)&eff + f->offset) = (guint)v;
      break;
    case FIELD_GEMM:
      if (!parse_points (key, text, eff.gemm_size, eff.gemm_efficiency, &eff.n_gemm, error))
        return FALSE;
      break;
    case FIELD_ATTENTION:
      {
        PlannerAttentionCurve *c = &eff.attention[f->arg];
        if (!parse_points (key, text, c->seq, c->efficiency, &c->n, error))
          return FALSE;
        if (c->n == 0)
          return refuse (error, key, text, _ ("at least one seq:fraction point"));
        break;
      }
    }
  planner_hardware_set_efficiency (hw, &eff);
  return TRUE;
}

static Row *
find_row (AppHardwareDialog *self, const char *key)
{
  for (guint i = 0; i < self->rows->len; i++)
    {
      Row *row = g_ptr_array_index (self->rows, i);
      if (g_str_equal (row->key, key))
        return row;
    }
  return NULL;
}

PlannerHardware *
app_hardware_dialog_dup_hardware (AppHardwareDialog *self, GError **error)
{
  g_return_val_if_fail (APP_IS_HARDWARE_DIALOG (self), NULL);
  g_autoptr (PlannerHardware) hw = planner_hardware_copy (self->hw);
  for (guint i = 0; i < self->rows->len; i++)
    {
      Row *row = g_ptr_array_index (self->rows, i);
      const char *text = gtk_editable_get_text (GTK_EDITABLE (row->row));
      if (!apply_field (hw, row->field, row->key, text, error))
        return NULL;
    }
  /* What is saved must read back as shardscope-cli reads it: the planner's own checks. */
  g_autofree char *json = planner_hardware_to_json (hw);
  g_autoptr (PlannerHardware) back = planner_hardware_from_json (json, error);
  if (back == NULL)
    return NULL;
  return g_steal_pointer (&hw);
}

/* Marks the refused row and says why; Save waits for a valid profile. */
static void
validate (AppHardwareDialog *self)
{
  for (guint i = 0; i < self->rows->len; i++)
    {
      Row *row = g_ptr_array_index (self->rows, i);
      g_autoptr (PlannerHardware) scratch = planner_hardware_copy (self->hw);
      const char *text = gtk_editable_get_text (GTK_EDITABLE (row->row));
      if (apply_field (scratch, row->field, row->key, text, NULL))
        gtk_widget_remove_css_class (row->row, "error");
      else
        gtk_widget_add_css_class (row->row, "error");
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) hw = app_hardware_dialog_dup_hardware (self, &error);
  const char *name = hw ? planner_hardware_get_name (hw) : NULL;
  g_autofree char *text = NULL;
  if (hw == NULL)
    text = g_strdup (error->message);
  else if (is_builtin (name))
    text = g_strdup_printf (_ ("%s is a built-in profile: save the edits under another name, "
                               "such as %s-edited"),
                            name, name);
  else
    {
      g_autofree char *path = user_profile_path (name);
      text = g_strdup_printf (_ ("Saved as %s"), path);
    }
  gtk_label_set_text (self->status, text);
  gtk_widget_set_sensitive (self->save_button, hw != NULL && !is_builtin (name));
}

const char *
app_hardware_dialog_get_text (AppHardwareDialog *self, const char *key)
{
  g_return_val_if_fail (APP_IS_HARDWARE_DIALOG (self), NULL);
  Row *row = find_row (self, key);
  return row ? gtk_editable_get_text (GTK_EDITABLE (row->row)) : NULL;
}

gboolean
app_hardware_dialog_set_text (AppHardwareDialog *self, const char *key, const char *text)
{
  g_return_val_if_fail (APP_IS_HARDWARE_DIALOG (self), FALSE);
  g_return_val_if_fail (text != NULL, FALSE);
  Row *row = find_row (self, key);
  if (row == NULL)
    return FALSE;
  gtk_editable_set_text (GTK_EDITABLE (row->row), text);
  return TRUE;
}

GStrv
app_hardware_dialog_dup_keys (AppHardwareDialog *self)
{
  g_return_val_if_fail (APP_IS_HARDWARE_DIALOG (self), NULL);
  g_autoptr (GStrvBuilder) builder = g_strv_builder_new ();
  for (guint i = 0; i < self->rows->len; i++)
    g_strv_builder_add (builder, ((Row *)g_ptr_array_index (self->rows, i))->key);
  return g_strv_builder_end (builder);
}

char *
app_hardware_dialog_save (AppHardwareDialog *self, GError **error)
{
  g_return_val_if_fail (APP_IS_HARDWARE_DIALOG (self), NULL);
  g_autoptr (GError) local_error = NULL;
  g_autoptr (PlannerHardware) hw = app_hardware_dialog_dup_hardware (self, &local_error);
  if (hw && is_builtin (planner_hardware_get_name (hw)))
    g_set_error (&local_error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_HARDWARE,
                 _ ("%s is a built-in profile: save the edits under another name, such as "
                    "%s-edited"),
                 planner_hardware_get_name (hw), planner_hardware_get_name (hw));
  g_autofree char *dir = app_hardware_user_dir ();
  if (local_error == NULL && g_mkdir_with_parents (dir, 0700) != 0)
    g_set_error (&local_error, PLANNER_ERROR, PLANNER_ERROR_IO, _ ("cannot create %s: %s"), dir,
                 g_strerror (errno));
  g_autofree char *path = hw ? user_profile_path (planner_hardware_get_name (hw)) : NULL;
  if (local_error == NULL)
    planner_hardware_save_file (hw, path, &local_error);
  if (local_error)
    {
      gtk_label_set_text (self->status, local_error->message);
      g_propagate_error (error, g_steal_pointer (&local_error));
      return NULL;
    }
  g_signal_emit (self, signals[SIGNAL_SAVED], 0, hw, path);
  return g_steal_pointer (&path);
}

static void
on_save_clicked (AppHardwareDialog *self)
{
  g_autofree char *path = app_hardware_dialog_save (self, NULL);
  if (path)
    gtk_window_close (GTK_WINDOW (self));
}

/* ---- the object ------------------------------------------------------------------- */

static void
add_row (AppHardwareDialog *self, AdwPreferencesGroup *group, const Field *field, const char *key,
         const char *title)
{
  Row *row = g_new0 (Row, 1);
  row->field = field;
  row->key = g_strdup (key);
  row->row = adw_entry_row_new ();
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row->row), title);
  g_autofree char *text = field_text (self->hw, field);
  gtk_editable_set_text (GTK_EDITABLE (row->row), text ? text : "");
  gtk_widget_set_tooltip_text (row->row, key);
  g_signal_connect_swapped (row->row, "changed", G_CALLBACK (validate), self);
  adw_preferences_group_add (group, row->row);
  g_ptr_array_add (self->rows, row);
}

static AdwPreferencesGroup *
new_group (AdwPreferencesPage *page, const char *title, const char *description)
{
  AdwPreferencesGroup *group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (group, title);
  if (description)
    adw_preferences_group_set_description (group, description);
  adw_preferences_page_add (page, group);
  return group;
}

static void
build_rows (AppHardwareDialog *self, AdwPreferencesPage *page)
{
  static const struct
  {
    const char *prefix; /* the first key of the group */
    const char *title;
  } groups[] = {
    { "name", N_ ("Profile") },
    { "peak_tflops.f32", N_ ("Compute and memory") },
    { "links.intra.name", N_ ("Links") },
    { "efficiency.gemm", N_ ("Efficiency") },
  };
  AdwPreferencesGroup *group = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      for (guint g = 0; g < G_N_ELEMENTS (groups); g++)
        if (g_str_equal (fields[i].key, groups[g].prefix))
          group = new_group (page, _ (groups[g].title),
                             g == 3 ? _ ("A profile without efficiency figures computes at "
                                         "datasheet peak; 0 turns a figure off.")
                                    : NULL);
      add_row (self, group, &fields[i], fields[i].key, _ (fields[i].title));
    }
  const PlannerEfficiency *eff = planner_hardware_get_efficiency (self->hw);
  if (eff->n_attention > 0)
    group = new_group (page, _ ("Attention kernels"),
                       _ ("Forward and backward throughput by sequence length "
                          "(seq:fraction of peak, …)"));
  for (guint c = 0; c < eff->n_attention; c++)
    {
      const PlannerAttentionCurve *curve = &eff->attention[c];
      g_autofree char *key = g_strdup_printf ("efficiency.attention.%u", c);
      g_autofree char *title = g_strdup_printf (
          _ ("%s, %s, head dim %u"), planner_attention_kernel_to_string (curve->kernel),
          curve->causal ? _ ("causal") : _ ("not causal"), curve->head_dim);
      Field *field = g_new0 (Field, 1);
      *field = (Field){ NULL, NULL, FIELD_ATTENTION, (int)c, 0, TRUE };
      g_object_set_data_full (G_OBJECT (self), key, field, g_free);
      add_row (self, group, field, key, title);
    }
  guint n_curves = planner_hardware_get_n_measurements (self->hw);
  if (n_curves > 0)
    {
      group = new_group (page, _ ("Measurements"), NULL);
      g_autofree char *text = g_strdup_printf (
          g_dngettext (GETTEXT_PACKAGE, "%u measured collective curve, kept as it is",
                       "%u measured collective curves, kept as they are", n_curves),
          n_curves);
      GtkWidget *row = adw_action_row_new ();
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), text);
      adw_preferences_group_add (group, row);
    }
}

static void
app_hardware_dialog_finalize (GObject *object)
{
  AppHardwareDialog *self = APP_HARDWARE_DIALOG (object);
  g_clear_pointer (&self->hw, planner_hardware_free);
  g_clear_pointer (&self->rows, g_ptr_array_unref);
  G_OBJECT_CLASS (app_hardware_dialog_parent_class)->finalize (object);
}

static void
app_hardware_dialog_class_init (AppHardwareDialogClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = app_hardware_dialog_finalize;
  /* (const PlannerHardware *hw, const char *path): after the file is written. */
  signals[SIGNAL_SAVED]
      = g_signal_new ("saved", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                      G_TYPE_NONE, 2, G_TYPE_POINTER, G_TYPE_STRING);
}

static void
app_hardware_dialog_init (AppHardwareDialog *self)
{
  self->rows = g_ptr_array_new_with_free_func ((GDestroyNotify)row_free);
}

GtkWidget *
app_hardware_dialog_new (GtkWindow *parent, const PlannerHardware *hw)
{
  g_return_val_if_fail (hw != NULL, NULL);
  AppHardwareDialog *self = g_object_new (APP_TYPE_HARDWARE_DIALOG, "transient-for", parent,
                                          "modal", TRUE, "default-width", 620, "default-height",
                                          720, "title", _ ("Hardware Profile"), NULL);
  self->hw = planner_hardware_copy (hw);

  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  GtkWidget *header = adw_header_bar_new ();
  GtkWidget *cancel = gtk_button_new_with_mnemonic (_ ("_Cancel"));
  g_signal_connect_swapped (cancel, "clicked", G_CALLBACK (gtk_window_close), self);
  adw_header_bar_pack_start (ADW_HEADER_BAR (header), cancel);
  self->save_button = gtk_button_new_with_mnemonic (_ ("_Save and Use"));
  gtk_widget_add_css_class (self->save_button, "suggested-action");
  gtk_widget_set_tooltip_text (
      self->save_button, _ ("Write the profile to your profiles and re-cost the plan with it"));
  g_signal_connect_swapped (self->save_button, "clicked", G_CALLBACK (on_save_clicked), self);
  adw_header_bar_pack_end (ADW_HEADER_BAR (header), self->save_button);
  gtk_box_append (GTK_BOX (box), header);

  GtkWidget *page = adw_preferences_page_new ();
  gtk_widget_set_vexpand (page, TRUE);
  build_rows (self, ADW_PREFERENCES_PAGE (page));
  gtk_box_append (GTK_BOX (box), page);
  self->status = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->status, TRUE);
  gtk_label_set_xalign (self->status, 0);
  gtk_widget_set_margin_start (GTK_WIDGET (self->status), 12);
  gtk_widget_set_margin_end (GTK_WIDGET (self->status), 12);
  gtk_widget_set_margin_top (GTK_WIDGET (self->status), 6);
  gtk_widget_set_margin_bottom (GTK_WIDGET (self->status), 6);
  gtk_widget_add_css_class (GTK_WIDGET (self->status), "dim-label");
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->status));
  adw_window_set_content (ADW_WINDOW (self), box);
  validate (self);
  return GTK_WIDGET (self);
}
