#define G_LOG_DOMAIN "planner-export"

#include "config.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-export.h"
#include "planner-json.h"
#include "planner-plan-json.h"
#include "planner-export-private.h"

/* ---- text ---- */

/* Every character outside printable ASCII as an escape; with @quoting, backslashes and single
 * quotes too, which makes a Python string literal body. Output is always ASCII without line
 * breaks, so it can end neither a comment nor a literal. */
void
planner_export_append_escaped (GString *out, const char *text, gboolean quoting)
{
  const char *p = text;

  while (*p != '\0')
    {
      gunichar c = g_utf8_get_char_validated (p, -1);
      gsize length;

      if (c == (gunichar)-1 || c == (gunichar)-2)
        {
          /* Not UTF-8: the byte as \xNN (it reads back as U+00NN). */
          g_string_append_printf (out, "\\x%02x", (guint8)*p);
          p++;
          continue;
        }
      length = g_utf8_next_char (p) - p;
      p += length;
      if (c == '\\' && quoting)
        g_string_append (out, "\\\\");
      else if (c == '\'' && quoting)
        g_string_append (out, "\\'");
      else if (c == '\n')
        g_string_append (out, "\\n");
      else if (c == '\r')
        g_string_append (out, "\\r");
      else if (c == '\t')
        g_string_append (out, "\\t");
      else if (c >= 0x20 && c < 0x7f)
        g_string_append_c (out, (char)c);
      else if (c < 0x100)
        g_string_append_printf (out, "\\x%02x", c);
      else if (c < 0x10000)
        g_string_append_printf (out, "\\u%04x", c);
      else
        g_string_append_printf (out, "\\U%08x", c);
    }
}

void
planner_export_append_python_string (GString *out, const char *text)
{
  g_string_append_c (out, '\'');
  planner_export_append_escaped (out, text, TRUE);
  g_string_append_c (out, '\'');
}

char *
planner_export_python_string (const char *text)
{
  GString *out = g_string_new (NULL);

  g_return_val_if_fail (text != NULL, NULL);
  planner_export_append_python_string (out, text);
  return g_string_free (out, FALSE);
}

void
planner_export_csv_field (GString *out, const char *text)
{
  g_return_if_fail (out != NULL);
  if (text == NULL)
    return;
  if (strpbrk (text, ",\"\r\n") == NULL && text[0] != ' ' && text[0] != '\0'
      && text[strlen (text) - 1] != ' ')
    {
      g_string_append (out, text);
      return;
    }
  if (text[0] == '\0')
    return;
  g_string_append_c (out, '"');
  for (const char *p = text; *p != '\0'; p++)
    {
      if (*p == '"')
        g_string_append_c (out, '"');
      g_string_append_c (out, *p);
    }
  g_string_append_c (out, '"');
}

/* "model.layers.12.mlp.up_proj" -> "model.layers.*.mlp.up_proj": every all-digit path component
 * (a repeated block's index) becomes a wildcard. NULL when there is none. */
char *
planner_export_block_pattern (const char *name, gboolean fnmatch_escape)
{
  g_auto (GStrv) parts = g_strsplit (name, ".", -1);
  GString *out = g_string_new (NULL);
  gboolean any = FALSE;

  for (guint i = 0; parts[i] != NULL; i++)
    {
      const char *c = parts[i];
      gboolean digits = *c != '\0';

      for (const char *q = c; *q != '\0'; q++)
        digits &= g_ascii_isdigit (*q);
      if (i > 0)
        g_string_append_c (out, '.');
      if (digits)
        {
          g_string_append_c (out, '*');
          any = TRUE;
          continue;
        }
      for (const char *q = c; *q != '\0'; q++)
        if (fnmatch_escape && (*q == '*' || *q == '?' || *q == '['))
          g_string_append_printf (out, "[%c]", *q);
        else
          g_string_append_c (out, *q);
    }
  if (!any)
    {
      g_string_free (out, TRUE);
      return NULL;
    }
  return g_string_free (out, FALSE);
}

/* An op name as an fnmatch key that matches only itself, component by component. */
char *
planner_export_literal_key (const char *name)
{
  GString *out = g_string_new (NULL);

  for (const char *q = name; *q != '\0'; q++)
    if (*q == '*' || *q == '?' || *q == '[')
      g_string_append_printf (out, "[%c]", *q);
    else
      g_string_append_c (out, *q);
  return g_string_free (out, FALSE);
}

/* Does @name fall under the block pattern of @pattern_of (same components, the wildcard ones
 * anything)? As torch matches keys: component by component. */
gboolean
planner_export_under_pattern (const char *name, char **pattern_parts,
                              const char *const *literal_parts)
{
  g_auto (GStrv) parts = g_strsplit (name, ".", -1);

  if (g_strv_length (parts) != g_strv_length (pattern_parts))
    return FALSE;
  for (guint i = 0; parts[i] != NULL; i++)
    if (strcmp (pattern_parts[i], "*") != 0 && strcmp (parts[i], literal_parts[i]) != 0)
      return FALSE;
  return TRUE;
}

/* ---- notes: what a format cannot express, collapsed over repeated blocks ---- */

void
planner_export_notes_init (PlannerExportNotes *n)
{
  n->names = g_ptr_array_new_with_free_func (g_free);
  n->reasons = g_ptr_array_new_with_free_func (g_free);
}

void
planner_export_notes_clear (PlannerExportNotes *n)
{
  g_ptr_array_unref (n->names);
  g_ptr_array_unref (n->reasons);
}

void
planner_export_note (PlannerExportNotes *n, const char *name, char *reason)
{
  g_ptr_array_add (n->names, g_strdup (name));
  g_ptr_array_add (n->reasons, reason);
}

typedef struct
{
  char *pattern;     /* the block pattern, or the name itself */
  const char *first; /* the first name under it */
  const char *reason;
  guint count;
} NoteGroup;

/* One line per (block pattern, reason), in order of first appearance: "NAME: REASON", NAME the
 * name itself when the pattern covers one. The texts are raw; writers escape them. */
GPtrArray *
planner_export_notes_collapse (PlannerExportNotes *n)
{
  GPtrArray *lines = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GHashTable) index = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GArray) groups = g_array_new (FALSE, TRUE, sizeof (NoteGroup));

  for (guint i = 0; i < n->names->len; i++)
    {
      const char *name = g_ptr_array_index (n->names, i);
      const char *reason = g_ptr_array_index (n->reasons, i);
      char *pattern = planner_export_block_pattern (name, FALSE);
      char *key = g_strdup_printf ("%s\n%s", pattern != NULL ? pattern : name, reason);
      gpointer found;

      if (g_hash_table_lookup_extended (index, key, NULL, &found))
        {
          g_array_index (groups, NoteGroup, GPOINTER_TO_UINT (found)).count++;
          g_free (pattern);
          g_free (key);
          continue;
        }
      NoteGroup g = { pattern != NULL ? pattern : g_strdup (name), name, reason, 1 };
      g_hash_table_insert (index, key, GUINT_TO_POINTER (groups->len));
      g_array_append_val (groups, g);
    }
  for (guint i = 0; i < groups->len; i++)
    {
      NoteGroup *g = &g_array_index (groups, NoteGroup, i);
      g_ptr_array_add (
          lines, g_strdup_printf ("%s: %s", g->count == 1 ? g->first : g->pattern, g->reason));
      g_free (g->pattern);
    }
  return lines;
}

void
planner_export_notes_publish (GPtrArray *lines, GPtrArray *notes)
{
  if (notes == NULL)
    return;
  for (guint i = 0; i < lines->len; i++)
    g_ptr_array_add (notes, g_strdup (g_ptr_array_index (lines, i)));
}

/* ---- plan helpers ---- */

int
planner_export_factor_of_axis (const PlannerStrategy *s, guint axis)
{
  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    for (guint i = 0; i < s->n_axes[f]; i++)
      if (s->axes[f][i] == axis)
        return (int)f;
  return -1;
}

/* The dim of operand @map that factor @f maps to, or -1. */
int
planner_export_operand_dim_of_factor (const PlannerOperandMap *map, guint f)
{
  for (guint d = 0; d < map->rank; d++)
    for (guint i = 0; i < map->n[d]; i++)
      if (map->f[d][i] == f)
        return (int)d;
  return -1;
}

/* The factor of dim 0 of the first input and output: the batch. */
int
planner_export_batch_factor (const PlannerOpRule *rule)
{
  if (rule->n_inputs == 0 || rule->n_outputs == 0 || rule->outputs[0].rank == 0
      || rule->outputs[0].n[0] == 0)
    return -1;
  int f = rule->outputs[0].f[0][0];
  return planner_export_operand_dim_of_factor (&rule->inputs[0], f) == 0 ? f : -1;
}

gboolean
planner_export_has_parameter_input (PlannerGraph *graph, const PlannerOp *op)
{
  for (guint k = 0; k < op->n_inputs; k++)
    if (planner_graph_get_tensor (graph, op->inputs[k])->kind == PLANNER_TENSOR_PARAMETER)
      return TRUE;
  return FALSE;
}

/* ---- csv ---- */

static guint64
local_bytes (const PlannerTensor *t, const PlannerLayout *layout, const PlannerMesh *mesh)
{
  gint64 local[PLANNER_MAX_RANK];
  guint64 n = planner_dtype_size (t->dtype);

  planner_layout_local_shape (layout, mesh, t->shape, local);
  for (guint d = 0; d < t->rank; d++)
    n *= (guint64)local[d];
  return n;
}

static char *
layouts_text (const PlannerLayout *layouts, guint n, const PlannerMesh *mesh)
{
  GString *out = g_string_new (NULL);

  for (guint k = 0; k < n; k++)
    {
      g_autofree char *text = planner_layout_to_string (&layouts[k], mesh);
      g_string_append_printf (out, "%s%s", k > 0 ? "," : "", text);
    }
  return g_string_free (out, FALSE);
}

static void
csv_row (GString *out, const char *const *fields, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      if (i > 0)
        g_string_append_c (out, ',');
      planner_export_csv_field (out, fields[i]);
    }
  g_string_append (out, "\r\n");
}

static char *
number_text (double value)
{
  GString *out = g_string_new (NULL);
  planner_json_append_number (out, value);
  return g_string_free (out, FALSE);
}

static char *
measured_text (const PlannerTrialRun *run, PlannerMeasurementKind kind, const char *name)
{
  const PlannerTrialMeasurement *m = run != NULL ? planner_trial_run_find (run, kind, name) : NULL;
  return m != NULL ? number_text (m->measured_us) : NULL;
}

char *
planner_export_csv (PlannerPlan *plan, const PlannerTrialRun *run)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);

  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  GString *out = g_string_new (NULL);
  static const char *const header[] = {
    "kind", "index", "name",  "type",  "decision",     "from",
    "to",   "steps", "flops", "bytes", "estimated_us", "measured_us",
  };

  csv_row (out, header, G_N_ELEMENTS (header));
  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      const PlannerOpPlan *p = planner_plan_get_op (plan, i);
      PlannerLayout in[PLANNER_MAX_OPERANDS], out_layouts[PLANNER_MAX_OPERANDS];
      guint64 bytes = 0;

      planner_plan_op_layouts (plan, i, in, out_layouts);
      for (guint k = 0; k < op->n_inputs; k++)
        bytes += local_bytes (planner_graph_get_tensor (graph, op->inputs[k]), &in[k], mesh);
      for (guint k = 0; k < op->n_outputs; k++)
        bytes += local_bytes (planner_graph_get_tensor (graph, op->outputs[k]), &out_layouts[k],
                              mesh);
      g_autofree char *index = g_strdup_printf ("%u", i);
      g_autofree char *from = layouts_text (in, op->n_inputs, mesh);
      g_autofree char *to = layouts_text (out_layouts, op->n_outputs, mesh);
      g_autofree char *flops = number_text (p->flops);
      g_autofree char *bytes_text = g_strdup_printf ("%" G_GUINT64_FORMAT, bytes);
      g_autofree char *estimated = number_text (p->compute_time_s * 1e6);
      g_autofree char *measured = measured_text (run, PLANNER_MEASUREMENT_OP, op->name);
      const char *fields[] = { "op",
                               index,
                               op->name,
                               planner_op_type_to_string (op->type),
                               planner_decision_to_string (p->decision),
                               from,
                               to,
                               "",
                               flops,
                               bytes_text,
                               estimated,
                               measured };
      csv_row (out, fields, G_N_ELEMENTS (fields));
    }
  for (guint r = 0; r < planner_plan_get_n_redistributions (plan); r++)
    {
      const PlannerRedistribution *red = planner_plan_get_redistribution (plan, r);
      PlannerRedistPath path = { TRUE, red->n_steps, red->steps, red->bytes, red->time_s };
      g_autofree char *index = g_strdup_printf ("%u", r);
      g_autofree char *name = planner_store_redistribution_name (plan, r);
      g_autofree char *from = planner_layout_to_string (&red->from, mesh);
      g_autofree char *to = planner_layout_to_string (&red->to, mesh);
      g_autofree char *steps = planner_redist_path_describe (&path, mesh);
      g_autofree char *bytes_text = g_strdup_printf ("%" G_GUINT64_FORMAT, red->bytes);
      g_autofree char *estimated = number_text (red->time_s * 1e6);
      g_autofree char *measured = measured_text (run, PLANNER_MEASUREMENT_REDISTRIBUTION, name);
      const char *fields[] = { "redistribution", index,     name,    "", "", from, to, steps, "",
                               bytes_text,       estimated, measured };
      csv_row (out, fields, G_N_ELEMENTS (fields));
    }
  return g_string_free (out, FALSE);
}

/* ---- the table ---- */

static char *
write_dtensor (PlannerPlan *plan, const PlannerTrialRun *run, GPtrArray *notes, GError **error)
{
  return planner_export_dtensor (plan, notes, error);
}

static char *
write_mindspore (PlannerPlan *plan, const PlannerTrialRun *run, GPtrArray *notes, GError **error)
{
  return planner_export_mindspore (plan, notes);
}

static char *
write_mindspore_shard (PlannerPlan *plan, const PlannerTrialRun *run, GPtrArray *notes,
                       GError **error)
{
  return planner_export_mindspore_shard (plan, notes, error);
}

static char *
write_jax (PlannerPlan *plan, const PlannerTrialRun *run, GPtrArray *notes, GError **error)
{
  return planner_export_jax (plan, notes, error);
}

static char *
write_csv (PlannerPlan *plan, const PlannerTrialRun *run, GPtrArray *notes, GError **error)
{
  return planner_export_csv (plan, run);
}

static const PlannerExportFormat formats[] = {
  { "dtensor", "py", "PyTorch DTensor script: tensor parallelism + FSDP2, with a self-check",
    write_dtensor },
  { "mindspore", "json", "MindSpore strategy checkpoint (JSON)", write_mindspore },
  { "mindspore-shard", "py", "MindSpore .shard() calls for the ops a strategy file cannot carry",
    write_mindspore_shard },
  { "jax", "py", "JAX mesh, PartitionSpecs per parameter and sharding constraints", write_jax },
  { "csv", "csv", "one row per op and per redistribution: layouts, bytes, times", write_csv },
};

const PlannerExportFormat *
planner_export_formats (guint *n_formats)
{
  g_return_val_if_fail (n_formats != NULL, NULL);
  *n_formats = G_N_ELEMENTS (formats);
  return formats;
}

const PlannerExportFormat *
planner_export_format_lookup (const char *name)
{
  g_return_val_if_fail (name != NULL, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (formats); i++)
    if (strcmp (formats[i].name, name) == 0)
      return &formats[i];
  return NULL;
}

char *
planner_export_to_string (PlannerPlan *plan, const char *name, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  g_return_val_if_fail (name != NULL, NULL);

  const PlannerExportFormat *format = planner_export_format_lookup (name);
  if (format == NULL)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_PARSE,
                   "unknown export format '%s' (dtensor, mindspore, mindspore-shard, jax, csv)",
                   name);
      return NULL;
    }
  return format->write (plan, NULL, NULL, error);
}
