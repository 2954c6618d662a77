#define G_LOG_DOMAIN "planner-store-plan"

#include "config.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "planner-error.h"
#include "planner-json.h"
#include "planner-model-private.h"
#include "planner-onnx-import.h"
#include "planner-plan-private.h"
#include "planner-store-private.h"

/* Saving a plan's rows (model, mesh, hardware, plan, pins, op strategies, tensor layouts,
 * redistributions and steps, trace, conflicts, totals) and rebuilding a PlannerPlan from them.
 * The store object, its statements and transactions are in planner-store.c. */

/* ---- encoding: strategies as factor and axis indices, layouts as text ---- */

/* "0=0,3=1.2;p=2@1": factor 0 on axis 0, factor 3 on axes 1 then 2, partial over axis 1 arriving
 * on input 1; "" when replicated. Indices, not names, so decoding is exact and fast. */
static void
append_uint (GString *out, guint value)
{
  char digits[12];
  int n = 0;

  do
    digits[n++] = (char)('0' + value % 10);
  while ((value /= 10) > 0);
  while (n > 0)
    g_string_append_c (out, digits[--n]);
}

static void
strategy_encode (GString *out, const PlannerStrategy *s)
{
  g_string_truncate (out, 0);
  for (guint f = 0; f < PLANNER_MAX_FACTORS; f++)
    {
      if (s->n_axes[f] == 0)
        continue;
      if (out->len > 0)
        g_string_append_c (out, ',');
      append_uint (out, f);
      g_string_append_c (out, '=');
      for (guint i = 0; i < s->n_axes[f]; i++)
        {
          if (i > 0)
            g_string_append_c (out, '.');
          append_uint (out, s->axes[f][i]);
        }
    }
  if (s->partial != 0)
    {
      g_string_append (out, ";p=");
      append_uint (out, s->partial);
      g_string_append_c (out, '@');
      append_uint (out, s->partial_input);
    }
}

static gboolean
parse_uint (const char **p, guint limit, guint *value)
{
  char *end;
  guint64 v;

  if (!g_ascii_isdigit (**p))
    return FALSE;
  v = g_ascii_strtoull (*p, &end, 10);
  if (v >= limit)
    return FALSE;
  *value = (guint)v;
  *p = end;
  return TRUE;
}

static gboolean
strategy_decode (const char *text, const PlannerOpRule *rule, const PlannerMesh *mesh,
                 PlannerStrategy *s)
{
  const char *p = text;
  guint32 used = 0;

  planner_strategy_init (s);
  if (text == NULL)
    return FALSE;
  while (*p != '\0' && *p != ';')
    {
      guint f, a;
      if (p != text && *p++ != ',')
        return FALSE;
      if (!parse_uint (&p, rule->n_factors, &f) || *p++ != '=' || s->n_axes[f] != 0)
        return FALSE;
      for (;;)
        {
          if (!parse_uint (&p, mesh->n_axes, &a) || (used & (1u << a)))
            return FALSE;
          used |= 1u << a;
          s->axes[f][s->n_axes[f]++] = (guint8)a;
          if (*p != '.')
            break;
          p++;
        }
    }
  if (*p == ';')
    {
      guint mask, input;
      p++;
      if (*p++ != 'p' || *p++ != '=' || !parse_uint (&p, 1u << mesh->n_axes, &mask) || *p++ != '@'
          || !parse_uint (&p, PLANNER_MAX_OPERANDS, &input) || mask == 0)
        return FALSE;
      s->partial = mask;
      s->partial_input = (guint8)input;
    }
  return *p == '\0';
}

/* A layout of @tensor, which must fit its shape on @mesh: a row edited by hand (or a mesh row
 * changed under it) may split a dim the axes do not divide. */
static gboolean
layout_decode (const char *text, const PlannerMesh *mesh, const PlannerTensor *tensor,
               PlannerLayout *layout)
{
  return text != NULL && planner_layout_parse (text, mesh, layout, NULL)
         && layout->rank == tensor->rank
         && planner_layout_validate (layout, mesh, tensor->shape, tensor->rank, tensor->name, NULL);
}

/* A strategy of @op, which its rule must allow on @mesh. */
static gboolean
op_strategy_decode (const char *text, PlannerGraph *graph, const PlannerOp *op,
                    const PlannerMesh *mesh, PlannerStrategy *s)
{
  const char *names[PLANNER_MAX_OPERANDS + 1];

  if (!strategy_decode (text, &op->rule, mesh, s))
    return FALSE;
  for (guint k = 0; k < op->n_inputs; k++)
    names[k] = planner_graph_get_tensor (graph, op->inputs[k])->name;
  names[op->n_inputs] = NULL;
  return planner_strategy_validate (s, &op->rule, mesh, op->name, names, NULL);
}

/* ---- graph hashes, kept on the graph ----
 *
 * Hashing the 80-layer LLaMA graph takes a third of a save. A graph is complete before a plan
 * is made on it (the plan's arrays are sized by it), so its hash is kept on it, with its op
 * and tensor counts as a guard, and saving a second plan of one model does not hash again. */

typedef struct
{
  guint n_ops;
  guint n_tensors;
  char hash[];
} GraphHash;

static GQuark
graph_hash_quark (void)
{
  static gsize quark;

  if (g_once_init_enter (&quark))
    g_once_init_leave (&quark, g_quark_from_static_string ("planner-store-graph-hash"));
  return (GQuark)quark;
}

static gpointer
dup_graph_hash (gpointer data, gpointer user_data)
{
  const GraphHash *cached = data;
  PlannerGraph *graph = user_data;

  if (cached == NULL || cached->n_ops != planner_graph_get_n_ops (graph)
      || cached->n_tensors != planner_graph_get_n_tensors (graph))
    return NULL;
  return g_strdup (cached->hash);
}

static void
keep_graph_hash (PlannerGraph *graph, const char *hash)
{
  gsize length = strlen (hash) + 1;
  GraphHash *cached = g_malloc (sizeof (GraphHash) + length);

  cached->n_ops = planner_graph_get_n_ops (graph);
  cached->n_tensors = planner_graph_get_n_tensors (graph);
  memcpy (cached->hash, hash, length);
  g_object_set_qdata_full (G_OBJECT (graph), graph_hash_quark (), cached, g_free);
}

static char *
graph_hash (PlannerGraph *graph)
{
  char *hash = g_object_dup_qdata (G_OBJECT (graph), graph_hash_quark (), dup_graph_hash, graph);

  if (hash == NULL)
    {
      hash = planner_graph_hash (graph);
      keep_graph_hash (graph, hash);
    }
  return hash;
}

/* ---- saving ---- */

/* The file a source names (graph JSON or config.json), to keep beside it: a plan then still
 * loads when the file has moved or changed. NULL for zoo names and text sources. */
static char *
source_config (const char *source)
{
  g_autofree char *base = NULL;
  const char *question = strrchr (source, '?');
  char *text = NULL;

  if (g_file_test (source, G_FILE_TEST_IS_REGULAR))
    base = g_strdup (source);
  else if (question != NULL)
    base = g_strndup (source, question - source);
  else
    return NULL;
  /* An ONNX model is binary and may be gigabytes: not kept; its plans load while it is there. */
  if (!g_path_is_absolute (base) || planner_onnx_is_onnx_path (base)
      || !g_file_get_contents (base, &text, NULL, NULL))
    return NULL;
  return text;
}

static gboolean
model_id (PlannerStore *self, PlannerGraph *graph, gint64 *id, GError **error)
{
  const char *source = planner_graph_get_source (graph);
  const char *name = planner_graph_get_name (graph);
  g_autofree char *hash = graph_hash (graph);
  g_autofree char *config = NULL;

  if (source == NULL || *source == '\0')
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: the plan's graph %s has no source to rebuild it from; load the model "
                   "with planner_model_load() or save its graph JSON and load that",
                   self->path, name != NULL ? name : "(unnamed)");
      return FALSE;
    }
  if (!planner_store_find_id (self, STMT_FIND_MODEL, source, hash, id, error))
    return FALSE;
  if (*id != 0)
    return TRUE;
  config = source_config (source);
  return planner_store_insert_row (self, STMT_INSERT_MODEL, "saving the model", id, error,
                                   VALUES (V_TEXT (name != NULL ? name : ""), V_TEXT (source),
                                           V_TEXT (config), V_TEXT (hash),
                                           V_INT (planner_graph_get_n_ops (graph)),
                                           V_INT (planner_graph_get_n_tensors (graph))));
}

static gboolean
mesh_id (PlannerStore *self, const PlannerMesh *mesh, gint64 *id, GError **error)
{
  g_autofree char *spec = planner_mesh_to_string (mesh);

  return planner_store_find_id (self, STMT_FIND_MESH, spec, NULL, id, error)
         && (*id != 0
             || planner_store_insert_row (
                 self, STMT_INSERT_MESH, "saving the mesh", id, error,
                 VALUES (V_TEXT (spec), V_INT (planner_mesh_n_devices (mesh)))));
}

static gboolean
hardware_id (PlannerStore *self, const PlannerHardware *hw, gint64 *id, GError **error)
{
  g_autofree char *profile = planner_hardware_to_json (hw);

  return planner_store_find_id (self, STMT_FIND_HARDWARE, profile, NULL, id, error)
         && (*id != 0
             || planner_store_insert_row (
                 self, STMT_INSERT_HARDWARE, "saving the hardware profile", id, error,
                 VALUES (V_TEXT (planner_hardware_get_name (hw)), V_TEXT (profile))));
}

/* The figures of planner_total_fields, to ?FIRST onwards in TOTALS_COLUMNS order. */
static void
bind_totals (sqlite3_stmt *s, int first, const PlannerPlanTotals *t)
{
  for (guint i = 0; i < PLANNER_N_TOTAL_FIELDS; i++)
    {
      const PlannerTotalField *f = &planner_total_fields[i];
      if (f->kind == PLANNER_TOTAL_COUNT)
        planner_store_bind_int (s, first + (int)i, PLANNER_TOTAL (t, f, const guint));
      else if (f->kind == PLANNER_TOTAL_BYTES)
        planner_store_bind_int (s, first + (int)i, (gint64)PLANNER_TOTAL (t, f, const guint64));
      else
        planner_store_bind_double (s, first + (int)i, PLANNER_TOTAL (t, f, const double));
    }
}

/* Column @first onwards, in TOTALS_COLUMNS order (0-based columns). */
void
planner_store_read_totals (sqlite3_stmt *s, int first, PlannerPlanTotals *t)
{
  for (guint i = 0; i < PLANNER_N_TOTAL_FIELDS; i++)
    {
      const PlannerTotalField *f = &planner_total_fields[i];
      if (f->kind == PLANNER_TOTAL_COUNT)
        PLANNER_TOTAL (t, f, guint) = (guint)planner_store_col_int (s, first + (int)i);
      else if (f->kind == PLANNER_TOTAL_BYTES)
        PLANNER_TOTAL (t, f, guint64) = (guint64)planner_store_col_int (s, first + (int)i);
      else
        PLANNER_TOTAL (t, f, double) = planner_store_col_double (s, first + (int)i);
    }
}

static gboolean
insert_plan_row (PlannerStore *self, PlannerPlan *plan, const char *name, gint64 model, gint64 mesh,
                 gint64 hw, gint64 parent_id, gint64 *plan_id, GError **error)
{
  const PlannerCostConstants *c = planner_plan_get_constants (plan);
  sqlite3_stmt *s = planner_store_stmt (self, STMT_INSERT_PLAN, error);

  if (s == NULL)
    return FALSE;
  planner_store_bind_values (
      s, 1,
      VALUES (V_TEXT (name), V_INT (model), V_INT (mesh), V_INT (hw),
              parent_id > 0 ? V_INT (parent_id) : V_NULL, V_INT (g_get_real_time ()),
              V_TEXT (planner_plan_get_policy (plan)),
              V_DOUBLE (planner_plan_get_propagate_ms (plan)), V_DOUBLE (c->weight_copies),
              V_DOUBLE (c->grad_copies), V_DOUBLE (c->optimizer_states),
              V_DOUBLE (c->backward_factor)));
  bind_totals (s, 13, planner_plan_get_totals (plan));
  G_STATIC_ASSERT (12 + N_TOTALS_COLUMNS == 26);
  g_autofree char *training = planner_cost_training_to_string (c);
  if (sqlite3_bind_text (s, 27, training, -1, SQLITE_TRANSIENT) != SQLITE_OK)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE, "saving the plan: %s",
                   sqlite3_errmsg (self->db));
      return FALSE;
    }
  if (!planner_store_run (self, s, "saving the plan", error))
    return FALSE;
  *plan_id = sqlite3_last_insert_rowid (self->db);
  return TRUE;
}

static gboolean
insert_totals_detail (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    if (!planner_store_run_with (self, STMT_INSERT_COLLECTIVE, "saving the totals", error,
                                 VALUES (V_INT (plan_id), V_TEXT (planner_step_kind_to_string (k)),
                                         V_INT (t->coll_count[k]), V_INT (t->coll_bytes[k]),
                                         V_DOUBLE (t->coll_time_s[k]))))
      return FALSE;
  for (guint a = 0; a < mesh->n_axes; a++)
    if (!planner_store_run_with (self, STMT_INSERT_AXIS, "saving the totals", error,
                                 VALUES (V_INT (plan_id), V_INT (a), V_INT (t->axis_bytes[a]),
                                         V_DOUBLE (t->axis_time_s[a]))))
      return FALSE;
  return TRUE;
}

static gboolean
insert_pins (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  const GPtrArray *pins = planner_plan_get_pins (plan);

  for (guint i = 0; i < pins->len; i++)
    if (!planner_store_run_with (
            self, STMT_INSERT_PIN, "saving a pin", error,
            VALUES (V_INT (plan_id), V_INT (i), V_TEXT (g_ptr_array_index (pins, i)))))
      return FALSE;
  return TRUE;
}

static char *
out_layouts_text (const PlannerOpPlan *p, const PlannerOp *op, const PlannerMesh *mesh)
{
  GString *out = g_string_new (NULL);

  for (guint k = 0; k < op->n_outputs; k++)
    {
      g_autofree char *text = planner_layout_to_string (&p->out_layouts[k], mesh);
      g_string_append_printf (out, "%s%s", k > 0 ? ";" : "", text);
    }
  return g_string_free (out, FALSE);
}

static gboolean
insert_ops (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autoptr (GString) code = g_string_new (NULL);

  for (guint i = 0; i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOp *op = planner_graph_get_op (graph, i);
      const PlannerOpPlan *p = planner_plan_get_op (plan, i);
      g_autofree char *out = p->has_out_layouts ? out_layouts_text (p, op, mesh) : NULL;

      strategy_encode (code, &p->strategy);
      if (!planner_store_run_with (self, STMT_INSERT_OP, "saving an op strategy", error,
                                   VALUES (V_INT (plan_id), V_INT (i), V_TEXT (op->name),
                                           V_TEXT (code->str),
                                           V_TEXT (planner_decision_to_string (p->decision)),
                                           V_INT (p->trace_step), V_INT (p->pin), V_TEXT (out),
                                           V_DOUBLE (p->compute_time_s), V_DOUBLE (p->flops))))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_tensors (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  for (guint t = 0; t < planner_graph_get_n_tensors (graph); t++)
    {
      g_autofree char *layout
          = planner_layout_to_string (planner_plan_get_tensor_layout (plan, t), mesh);

      if (!planner_store_run_with (self, STMT_INSERT_TENSOR, "saving a tensor layout", error,
                                   VALUES (V_INT (plan_id), V_INT (t),
                                           V_TEXT (planner_graph_get_tensor (graph, t)->name),
                                           V_TEXT (layout))))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_steps (PlannerStore *self, const PlannerRedistribution *r, guint position,
              const PlannerMesh *mesh, gint64 plan_id, GError **error)
{
  for (guint i = 0; i < r->n_steps; i++)
    {
      const PlannerRedistStep *st = &r->steps[i];
      g_autofree char *before = planner_layout_to_string (&st->before, mesh);
      g_autofree char *after = planner_layout_to_string (&st->after, mesh);

      if (!planner_store_run_with (self, STMT_INSERT_STEP, "saving a redistribution step", error,
                                   VALUES (V_INT (plan_id), V_INT (position), V_INT (i),
                                           V_TEXT (planner_step_kind_to_string (st->kind)),
                                           V_INT (st->axis), V_INT (st->dim), V_INT (st->dim_to),
                                           V_TEXT (before), V_TEXT (after), V_INT (st->n_in),
                                           V_INT (st->n_out), V_INT (st->bytes),
                                           V_DOUBLE (st->time_s))))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_redistributions (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);

  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      PlannerRedistPath path = { TRUE, r->n_steps, r->steps, r->bytes, r->time_s };
      g_autofree char *from = planner_layout_to_string (&r->from, mesh);
      g_autofree char *to = planner_layout_to_string (&r->to, mesh);
      g_autofree char *steps = planner_redist_path_describe (&path, mesh);

      if (!planner_store_run_with (
              self, STMT_INSERT_REDISTRIBUTION, "saving a redistribution", error,
              VALUES (V_INT (plan_id), V_INT (i), V_INT (r->tensor),
                      V_TEXT (planner_graph_get_tensor (graph, r->tensor)->name),
                      V_INT (r->consumer), V_INT (r->slot), V_INT (r->producer_side ? 1 : 0),
                      V_TEXT (from), V_TEXT (to), V_INT (r->n_steps), V_TEXT (steps),
                      V_INT (r->bytes), V_DOUBLE (r->time_s)))
          || !insert_steps (self, r, i, mesh, plan_id, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_trace (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  g_autoptr (GString) code = g_string_new (NULL);
  g_autoptr (GString) runner_up = g_string_new (NULL);

  for (guint i = 0; i < planner_plan_get_n_trace_steps (plan); i++)
    {
      const PlannerTraceStep *t = planner_plan_get_trace_step (plan, i);

      strategy_encode (code, &t->strategy);
      if (t->has_runner_up)
        strategy_encode (runner_up, &t->runner_up);
      if (!planner_store_run_with (
              self, STMT_INSERT_TRACE, "saving a trace step", error,
              VALUES (V_INT (plan_id), V_INT (i), V_INT (t->index), V_INT (t->op),
                      V_TEXT (code->str), V_INT (t->from_op), V_INT (t->forward ? 1 : 0),
                      V_DOUBLE (t->edge_cost_s), V_INT (t->n_candidates),
                      t->has_runner_up ? V_TEXT (runner_up->str) : V_NULL,
                      t->has_runner_up ? V_DOUBLE (t->runner_up_cost_s) : V_NULL)))
        return FALSE;
    }
  return TRUE;
}

static gboolean
insert_conflicts (PlannerStore *self, PlannerPlan *plan, gint64 plan_id, GError **error)
{
  for (guint i = 0; i < planner_plan_get_n_conflicts (plan); i++)
    {
      const PlannerConflict *c = planner_plan_get_conflict (plan, i);

      if (!planner_store_run_with (
              self, STMT_INSERT_CONFLICT, "saving a conflict", error,
              VALUES (V_INT (plan_id), V_INT (i), V_INT (c->redistribution), V_TEXT (c->message))))
        return FALSE;
    }
  return TRUE;
}

typedef struct
{
  PlannerPlan *plan;
  const char *name;
  gint64 parent_id;
} SaveArgs;

static gint64
save_plan (PlannerStore *self, gconstpointer data, GError **error)
{
  const SaveArgs *args = data;
  PlannerPlan *plan = args->plan;
  gint64 model = 0, mesh = 0, hw = 0, plan_id = 0;
  g_autofree char *parent_name = NULL;

  if (!planner_store_check_new_name (self, args->name, error)
      || (args->parent_id > 0
          && !planner_store_plan_name (self, args->parent_id, &parent_name, error)))
    return 0;
  if (args->parent_id > 0 && parent_name == NULL)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: the parent plan (id %" G_GINT64_FORMAT ") of \"%s\" is not in the store",
                   self->path, args->parent_id, args->name);
      return 0;
    }
  if (!model_id (self, planner_plan_get_graph (plan), &model, error)
      || !mesh_id (self, planner_plan_get_mesh (plan), &mesh, error)
      || !hardware_id (self, planner_plan_get_hardware (plan), &hw, error)
      || !insert_plan_row (self, plan, args->name, model, mesh, hw, args->parent_id, &plan_id,
                           error)
      || !insert_totals_detail (self, plan, plan_id, error)
      || !insert_pins (self, plan, plan_id, error) || !insert_ops (self, plan, plan_id, error)
      || !insert_tensors (self, plan, plan_id, error)
      || !insert_redistributions (self, plan, plan_id, error)
      || !insert_trace (self, plan, plan_id, error)
      || !insert_conflicts (self, plan, plan_id, error))
    return 0;
  return plan_id;
}
gint64
planner_store_save_plan (PlannerStore *self, PlannerPlan *plan, const char *name, gint64 parent_id,
                         GError **error)
{
  gint64 id;

  g_return_val_if_fail (PLANNER_IS_STORE (self), 0);
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), 0);
  g_return_val_if_fail (parent_id >= 0, 0);
  g_return_val_if_fail (error == NULL || *error == NULL, 0);

  if (name == NULL)
    name = planner_plan_get_name (plan);
  id = planner_store_change (self, save_plan, &(SaveArgs){ plan, name, parent_id }, error);
  if (id == 0)
    return 0;
  if (g_strcmp0 (planner_plan_get_name (plan), name) != 0)
    planner_plan_set_name (plan, name);
  planner_store_emit_changed (self);
  return id;
}

/* ---- loading ---- */

static gboolean
damaged (PlannerStore *self, const char *plan, const char *what, GError **error)
{
  g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
               "%s: plan \"%s\" is damaged: %s; delete it and save it again", self->path, plan,
               what);
  return FALSE;
}

/* A row of plan @plan that does not decode: the load stops there, so @s is reset. */
static gboolean
damaged_row (PlannerStore *self, sqlite3_stmt *s, const char *plan, const char *what,
             GError **error)
{
  sqlite3_reset (s);
  return damaged (self, plan, what, error);
}

/* A graph JSON or config.json kept with the model, rebuilt under the options of @source. */
static PlannerGraph *
graph_from_config (const char *source, const char *config, GError **error)
{
  const char *question = strrchr (source, '?');
  g_autofree char *encoded = NULL;
  g_autofree char *text_source = NULL;
  g_autoptr (JsonNode) root = planner_json_parse (config, -1, "the stored config", error);

  if (root == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_OBJECT (root)
      && json_object_has_member (json_node_get_object (root), "shardscope_graph"))
    return planner_graph_from_json (config, error);
  encoded = g_base64_encode ((const guchar *)config, strlen (config));
  text_source = g_strconcat (PLANNER_HF_TEXT_SOURCE_SCHEME, encoded,
                             question != NULL ? question : "", NULL);
  return planner_model_load_source (text_source, error);
}

static PlannerGraph *
rebuild_graph (PlannerStore *self, const char *plan, const char *source, const char *config,
               const char *hash, GError **error)
{
  g_autoptr (GError) source_error = NULL;
  g_autoptr (PlannerGraph) graph = planner_model_load_source (source, &source_error);
  g_autofree char *got = NULL;

  if (graph != NULL)
    {
      got = planner_graph_hash (graph);
      if (strcmp (got, hash) == 0)
        {
          keep_graph_hash (graph, hash);
          return g_steal_pointer (&graph);
        }
    }
  /* The file has moved or changed since the plan was saved: its text as it was then. */
  if (config != NULL)
    {
      g_autoptr (PlannerGraph) kept = graph_from_config (source, config, NULL);
      g_autofree char *kept_hash = kept != NULL ? planner_graph_hash (kept) : NULL;
      if (kept_hash != NULL && strcmp (kept_hash, hash) == 0)
        {
          planner_graph_set_source (kept, source);
          keep_graph_hash (kept, hash);
          return g_steal_pointer (&kept);
        }
    }
  if (graph == NULL)
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                 "%s: plan \"%s\": its model %s no longer loads: %s", self->path, plan, source,
                 source_error->message);
  else
    g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                 "%s: plan \"%s\": its model %s now builds a different graph (hash %.12s, the "
                 "plan was made for %.12s); restore the model file or plan it again",
                 self->path, plan, source, got, hash);
  return NULL;
}

gboolean
planner_store_load_totals (PlannerStore *self, gint64 id, const char *name, PlannerPlanTotals *t,
                           guint n_axes, GError **error)
{
  sqlite3_stmt *s;
  int rc;

  if ((s = planner_store_query (self, STMT_SELECT_COLLECTIVES, id, error)) == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the totals", error)) > 0)
    {
      PlannerStepKind kind;
      if (!planner_step_kind_from_string (planner_store_col_str (s, 0), &kind))
        return damaged_row (self, s, name, "a collective total has an unknown kind", error);
      t->coll_count[kind] = (guint)planner_store_col_int (s, 1);
      t->coll_bytes[kind] = (guint64)planner_store_col_int (s, 2);
      t->coll_time_s[kind] = planner_store_col_double (s, 3);
    }
  if (rc < 0)
    return FALSE;

  if ((s = planner_store_query (self, STMT_SELECT_AXES, id, error)) == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the totals", error)) > 0)
    {
      gint64 axis = planner_store_col_int (s, 0);
      if (axis < 0 || axis >= n_axes)
        return damaged_row (self, s, name, "an axis total names no axis of the mesh", error);
      t->axis_bytes[axis] = (guint64)planner_store_col_int (s, 1);
      t->axis_time_s[axis] = planner_store_col_double (s, 2);
    }
  return rc == 0;
}

/* The pins of plan @id, in order. */
GPtrArray *
planner_store_pin_texts (PlannerStore *self, gint64 id, GError **error)
{
  g_autoptr (GPtrArray) pins = g_ptr_array_new_with_free_func (g_free);
  sqlite3_stmt *s = planner_store_query (self, STMT_SELECT_PINS, id, error);
  int rc;

  if (s == NULL)
    return NULL;
  while ((rc = planner_store_next_row (self, s, "reading the pins", error)) > 0)
    g_ptr_array_add (pins, g_strdup (planner_store_col_str (s, 0)));
  sqlite3_reset (s);
  return rc == 0 ? g_steal_pointer (&pins) : NULL;
}

static gboolean
load_pins (PlannerStore *self, gint64 id, PlannerPlan *plan, GError **error)
{
  g_autoptr (GPtrArray) pins = planner_store_pin_texts (self, id, error);

  if (pins == NULL)
    return FALSE;
  for (guint i = 0; i < pins->len; i++)
    planner_plan_add_pin_text (plan, g_ptr_array_index (pins, i));
  return TRUE;
}
static gboolean
load_out_layouts (const char *text, const PlannerOp *op, PlannerGraph *graph,
                  const PlannerMesh *mesh, PlannerOpPlan *p)
{
  g_auto (GStrv) parts = g_strsplit (text, ";", -1);

  if (g_strv_length (parts) != op->n_outputs)
    return FALSE;
  for (guint k = 0; k < op->n_outputs; k++)
    if (!layout_decode (parts[k], mesh, planner_graph_get_tensor (graph, op->outputs[k]),
                        &p->out_layouts[k]))
      return FALSE;
  p->has_out_layouts = TRUE;
  return TRUE;
}

static gboolean
load_ops (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_ops = planner_graph_get_n_ops (graph), count = 0;
  sqlite3_stmt *s = planner_store_query (self, STMT_SELECT_OPS, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the op strategies", error)) > 0)
    {
      gint64 index = planner_store_col_int (s, 0);
      const char *out = planner_store_col_text (s, 6);
      const PlannerOp *op;
      PlannerOpPlan *p;

      if (index != count || index >= n_ops
          || g_strcmp0 (planner_store_col_text (s, 1),
                        (op = planner_graph_get_op (graph, index))->name)
                 != 0)
        return damaged_row (self, s, name, "its op strategies do not match the model's ops", error);
      p = planner_plan_get_op (plan, index);
      if (!op_strategy_decode (planner_store_col_str (s, 2), graph, op, mesh, &p->strategy)
          || !planner_decision_from_string (planner_store_col_str (s, 3), &p->decision)
          || (out != NULL && !load_out_layouts (out, op, graph, mesh, p)))
        {
          g_autofree char *spec = planner_mesh_to_string (mesh);
          g_autofree char *what = g_strdup_printf (
              "the strategy of op %s does not decode or does not fit its shapes on mesh %s",
              op->name, spec);
          return damaged_row (self, s, name, what, error);
        }
      p->trace_step = (int)planner_store_col_int (s, 4);
      p->pin = (int)planner_store_col_int (s, 5);
      p->compute_time_s = planner_store_col_double (s, 7);
      p->flops = planner_store_col_double (s, 8);
      count++;
    }
  if (rc < 0)
    return FALSE;
  if (count != n_ops)
    return damaged (self, name, "some op strategies are missing", error);
  return TRUE;
}

static gboolean
load_tensors (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_tensors = planner_graph_get_n_tensors (graph), count = 0;
  sqlite3_stmt *s = planner_store_query (self, STMT_SELECT_TENSORS, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the tensor layouts", error)) > 0)
    {
      gint64 index = planner_store_col_int (s, 0);
      PlannerLayout layout;

      if (index != count || index >= n_tensors
          || !layout_decode (planner_store_col_str (s, 1), mesh,
                             planner_graph_get_tensor (graph, index), &layout))
        return damaged_row (self, s, name, "a tensor layout does not decode", error);
      planner_plan_set_tensor_layout (plan, index, &layout);
      count++;
    }
  if (rc < 0)
    return FALSE;
  if (count != n_tensors)
    return damaged (self, name, "some tensor layouts are missing", error);
  return TRUE;
}

/* Every redistribution with its steps; @steps holds them until the plan copies them. */
static gboolean
load_redistributions (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan,
                      GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_ops = planner_graph_get_n_ops (graph), n_tensors = planner_graph_get_n_tensors (graph);
  g_autoptr (GArray) redistributions = g_array_new (FALSE, TRUE, sizeof (PlannerRedistribution));
  g_autoptr (GArray) steps = g_array_new (FALSE, TRUE, sizeof (PlannerRedistStep));
  g_autoptr (GArray) first_step = g_array_new (FALSE, TRUE, sizeof (guint));
  sqlite3_stmt *s;
  int rc;

  if ((s = planner_store_query (self, STMT_SELECT_REDISTRIBUTIONS, id, error)) == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the redistributions", error)) > 0)
    {
      PlannerRedistribution r = { 0 };
      gint64 tensor = planner_store_col_int (s, 1), consumer = planner_store_col_int (s, 2);

      if (planner_store_col_int (s, 0) != redistributions->len || tensor < 0 || tensor >= n_tensors
          || consumer < -1 || consumer >= n_ops)
        return damaged_row (self, s, name, "a redistribution names no tensor or op of the model",
                            error);
      const PlannerTensor *t = planner_graph_get_tensor (graph, tensor);
      r.tensor = (guint)tensor;
      r.consumer = (int)consumer;
      r.slot = (guint)planner_store_col_int (s, 3);
      r.producer_side = planner_store_col_int (s, 4) != 0;
      r.n_steps = (guint)planner_store_col_int (s, 7);
      r.bytes = (guint64)planner_store_col_int (s, 8);
      r.time_s = planner_store_col_double (s, 9);
      if (!layout_decode (planner_store_col_str (s, 5), mesh, t, &r.from)
          || !layout_decode (planner_store_col_str (s, 6), mesh, t, &r.to))
        return damaged_row (self, s, name, "a redistribution's layouts do not decode", error);
      g_array_append_val (redistributions, r);
    }
  if (rc < 0)
    return FALSE;

  if ((s = planner_store_query (self, STMT_SELECT_STEPS, id, error)) == NULL)
    return FALSE;
  g_array_set_size (first_step, redistributions->len + 1);
  while ((rc = planner_store_next_row (self, s, "reading the redistribution steps", error)) > 0)
    {
      gint64 owner = planner_store_col_int (s, 0);
      PlannerRedistStep st = { 0 };
      gint64 axis = planner_store_col_int (s, 3), dim = planner_store_col_int (s, 4),
             dim_to = planner_store_col_int (s, 5);
      const PlannerRedistribution *r;

      if (owner < 0 || owner >= redistributions->len)
        return damaged_row (self, s, name, "a redistribution step belongs to no redistribution",
                            error);
      r = &g_array_index (redistributions, PlannerRedistribution, owner);
      const PlannerTensor *t = planner_graph_get_tensor (graph, r->tensor);
      guint rank = t->rank;
      PlannerLayout after;
      if (!planner_step_kind_from_string (planner_store_col_str (s, 2), &st.kind) || axis < 0
          || axis >= mesh->n_axes || dim < -1 || dim >= (gint64)rank || dim_to < -1
          || dim_to >= (gint64)rank
          || !layout_decode (planner_store_col_str (s, 6), mesh, t, &st.before)
          || !layout_decode (planner_store_col_str (s, 7), mesh, t, &st.after)
          || !planner_redist_step_apply (st.kind, (guint)axis, (int)dim, (int)dim_to, &st.before,
                                         &after)
          || !planner_layout_equal (&after, &st.after))
        return damaged_row (self, s, name, "a redistribution step does not decode", error);
      st.axis = (guint8)axis;
      st.dim = (gint8)dim;
      st.dim_to = (gint8)dim_to;
      st.n_in = (guint64)planner_store_col_int (s, 8);
      st.n_out = (guint64)planner_store_col_int (s, 9);
      st.bytes = (guint64)planner_store_col_int (s, 10);
      st.time_s = planner_store_col_double (s, 11);
      g_array_append_val (steps, st);
      /* Rows come ordered by redistribution: count them per owner. */
      g_array_index (first_step, guint, owner + 1)++;
    }
  if (rc < 0)
    return FALSE;

  guint start = 0;
  for (guint i = 0; i < redistributions->len; i++)
    {
      PlannerRedistribution *r = &g_array_index (redistributions, PlannerRedistribution, i);
      guint n = g_array_index (first_step, guint, i + 1);
      if (n != r->n_steps)
        return damaged (self, name, "a redistribution has the wrong number of steps", error);
      r->steps = n > 0 ? &g_array_index (steps, PlannerRedistStep, start) : NULL;
      planner_plan_append_redistribution (plan, r);
      start += n;
    }
  return TRUE;
}

static gboolean
load_trace (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  guint n_ops = planner_graph_get_n_ops (graph), count = 0;
  sqlite3_stmt *s = planner_store_query (self, STMT_SELECT_TRACE, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the trace", error)) > 0)
    {
      PlannerTraceStep t = { 0 };
      gint64 op = planner_store_col_int (s, 2), from_op = planner_store_col_int (s, 4);
      const char *runner_up = planner_store_col_text (s, 8);

      if (planner_store_col_int (s, 0) != count || op < 0 || op >= n_ops || from_op < -1
          || from_op >= n_ops)
        return damaged_row (self, s, name, "a trace step names no op of the model", error);
      const PlannerOp *traced = planner_graph_get_op (graph, op);
      t.index = (guint)planner_store_col_int (s, 1);
      t.op = (guint)op;
      t.from_op = (int)from_op;
      t.forward = planner_store_col_int (s, 5) != 0;
      t.edge_cost_s = planner_store_col_double (s, 6);
      t.n_candidates = (guint)planner_store_col_int (s, 7);
      t.has_runner_up = runner_up != NULL;
      if (!op_strategy_decode (planner_store_col_str (s, 3), graph, traced, mesh, &t.strategy)
          || (runner_up != NULL
              && !op_strategy_decode (runner_up, graph, traced, mesh, &t.runner_up)))
        return damaged_row (self, s, name, "a trace step's strategy does not decode", error);
      if (t.has_runner_up)
        t.runner_up_cost_s = planner_store_col_double (s, 9);
      planner_plan_append_trace_step (plan, &t);
      count++;
    }
  return rc == 0;
}

static gboolean
load_conflicts (PlannerStore *self, gint64 id, const char *name, PlannerPlan *plan, GError **error)
{
  sqlite3_stmt *s = planner_store_query (self, STMT_SELECT_CONFLICTS, id, error);
  int rc;

  if (s == NULL)
    return FALSE;
  while ((rc = planner_store_next_row (self, s, "reading the conflicts", error)) > 0)
    {
      gint64 redistribution = planner_store_col_int (s, 1);
      if (redistribution < 0 || redistribution >= planner_plan_get_n_redistributions (plan))
        return damaged_row (self, s, name, "a conflict names no redistribution", error);
      planner_plan_append_conflict (plan, planner_store_col_str (s, 2), (guint)redistribution);
    }
  return rc == 0;
}

/* Whether every time, FLOP count and constant of @plan and @t is >= 0 (or unknown: NaN). */
static gboolean
figures_ok (PlannerPlan *plan, const PlannerPlanTotals *t)
{
  const PlannerCostConstants *c = planner_plan_get_constants (plan);
  GArray *figures = g_array_new (FALSE, FALSE, sizeof (double));
  gboolean ok = TRUE;

  g_array_append_vals (figures,
                       (double[]){ c->weight_copies, c->grad_copies, c->optimizer_states,
                                   c->backward_factor, planner_plan_get_propagate_ms (plan) },
                       5);
  for (guint i = PLANNER_N_TOTAL_COUNTS; i < PLANNER_N_TOTAL_FIELDS; i++)
    if (planner_total_fields[i].kind == PLANNER_TOTAL_SECONDS)
      g_array_append_val (figures, PLANNER_TOTAL (t, &planner_total_fields[i], const double));
  g_array_append_vals (figures, t->coll_time_s, PLANNER_N_STEP_KINDS);
  g_array_append_vals (figures, t->axis_time_s, PLANNER_MAX_AXES);
  for (guint i = 0; i < planner_graph_get_n_ops (planner_plan_get_graph (plan)); i++)
    {
      const PlannerOpPlan *p = planner_plan_get_op (plan, i);
      g_array_append_val (figures, p->compute_time_s);
      g_array_append_val (figures, p->flops);
    }
  for (guint i = 0; i < planner_plan_get_n_redistributions (plan); i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      g_array_append_val (figures, r->time_s);
      for (guint s = 0; s < r->n_steps; s++)
        g_array_append_val (figures, r->steps[s].time_s);
    }
  for (guint i = 0; i < planner_plan_get_n_trace_steps (plan); i++)
    {
      const PlannerTraceStep *st = planner_plan_get_trace_step (plan, i);
      g_array_append_val (figures, st->edge_cost_s);
      g_array_append_val (figures, st->runner_up_cost_s);
    }
  for (guint i = 0; i < figures->len && ok; i++)
    ok = !(g_array_index (figures, double, i) < 0);
  g_array_free (figures, TRUE);
  return ok;
}

/* Within one read transaction, so a concurrent save or delete is seen whole or not at all. */
static PlannerPlan *
load_locked (PlannerStore *self, gint64 id, GError **error)
{
  sqlite3_stmt *s;
  int rc;
  g_autofree char *name = NULL, *policy = NULL, *source = NULL, *config = NULL;
  g_autofree char *hash = NULL, *mesh_spec = NULL, *profile = NULL;
  PlannerCostConstants constants;
  PlannerPlanTotals totals = { 0 };
  double propagate_ms;
  g_autoptr (PlannerMesh) mesh = NULL;
  g_autoptr (PlannerHardware) hw = NULL;
  g_autoptr (PlannerGraph) graph = NULL;
  g_autoptr (PlannerPlan) plan = NULL;
  g_autoptr (GError) local_error = NULL;

  if ((s = planner_store_query (self, STMT_SELECT_PLAN, id, error)) == NULL)
    return NULL;
  if ((rc = planner_store_next_row (self, s, "reading the plan", error)) < 0)
    return NULL;
  if (rc == 0)
    {
      planner_store_no_such_plan (self, id, error);
      return NULL;
    }
  name = g_strdup (planner_store_col_text (s, 0));
  policy = g_strdup (planner_store_col_text (s, 1));
  propagate_ms = planner_store_col_double (s, 2);
  /* The training options have no columns yet: a stored plan has the defaults. */
  planner_cost_constants_init (&constants);
  constants.weight_copies = planner_store_col_double (s, 3);
  constants.grad_copies = planner_store_col_double (s, 4);
  constants.optimizer_states = planner_store_col_double (s, 5);
  constants.backward_factor = planner_store_col_double (s, 6);
  source = g_strdup (planner_store_col_text (s, 7));
  config = g_strdup (planner_store_col_text (s, 8));
  hash = g_strdup (planner_store_col_text (s, 9));
  mesh_spec = g_strdup (planner_store_col_text (s, 11));
  profile = g_strdup (planner_store_col_text (s, 12));
  planner_store_read_totals (s, 13, &totals);
  gint64 n_devices = planner_store_col_int (s, 13 + PLANNER_N_TOTAL_FIELDS);
  /* Rows saved before the training options had a column read with the defaults. */
  const char *training = planner_store_col_text (s, 14 + N_TOTALS_COLUMNS);
  gboolean training_ok = training == NULL || planner_cost_training_from_string (training, &constants);
  sqlite3_reset (s);
  if (!training_ok)
    {
      damaged (self, name, "its training options do not parse", error);
      return NULL;
    }

  if (mesh_spec == NULL || (mesh = planner_mesh_parse (mesh_spec, &local_error)) == NULL
      || profile == NULL || (hw = planner_hardware_from_json (profile, &local_error)) == NULL)
    {
      damaged (self, name, local_error ? local_error->message : "its mesh or hardware is missing",
               error);
      return NULL;
    }
  if ((guint64)n_devices != planner_mesh_n_devices (mesh))
    {
      g_autofree char *what = g_strdup_printf ("its mesh %s has %" G_GUINT64_FORMAT
                                               " devices but the row says %" G_GINT64_FORMAT,
                                               mesh_spec, planner_mesh_n_devices (mesh), n_devices);
      damaged (self, name, what, error);
      return NULL;
    }
  if (!planner_store_load_totals (self, id, name, &totals, mesh->n_axes, error))
    return NULL;
  if ((graph = rebuild_graph (self, name, source, config, hash, error)) == NULL)
    return NULL;

  plan = planner_plan_new (graph, mesh, hw);
  planner_plan_set_name (plan, name);
  planner_plan_set_policy (plan, policy);
  planner_plan_set_propagate_ms (plan, propagate_ms);
  planner_plan_set_constants (plan, &constants);
  if (!load_pins (self, id, plan, error) || !load_ops (self, id, name, plan, error)
      || !load_tensors (self, id, name, plan, error)
      || !load_redistributions (self, id, name, plan, error)
      || !load_trace (self, id, name, plan, error) || !load_conflicts (self, id, name, plan, error))
    return NULL;
  /* Counts and sums that do not follow from the rows (a count of 2^31 overflowed compare);
   * figures that cannot be negative. */
  g_autofree char *why = planner_plan_check_totals (plan, &totals);
  for (guint i = 0; why == NULL && i < planner_graph_get_n_ops (graph); i++)
    {
      const PlannerOpPlan *p = planner_plan_get_op (plan, i);
      if ((p->decision == PLANNER_DECIDED_PROPAGATED) != (p->trace_step >= 0)
          || (p->decision == PLANNER_DECIDED_PINNED) != (p->pin >= 0)
          || p->trace_step >= (int)planner_plan_get_n_trace_steps (plan)
          || p->pin >= (int)planner_plan_get_pins (plan)->len
          || (p->trace_step >= 0
              && planner_plan_get_trace_step (plan, (guint)p->trace_step)->op != i))
        why = g_strdup_printf ("op %s's trace step or pin does not match its decision",
                               planner_graph_get_op (graph, i)->name);
    }
  for (guint i = 0; why == NULL && i < planner_plan_get_n_trace_steps (plan); i++)
    if (planner_plan_get_trace_step (plan, i)->index != i)
      why = g_strdup_printf ("trace step %u is numbered %u", i,
                             planner_plan_get_trace_step (plan, i)->index);
  if (why != NULL)
    {
      damaged (self, name, why, error);
      return NULL;
    }
  if (!figures_ok (plan, &totals))
    {
      damaged (self, name, "a time, FLOP count or constant is negative", error);
      return NULL;
    }
  planner_plan_set_totals (plan, &totals);
  /* Memory and step breakdown have no columns: derived from what was loaded. */
  planner_plan_refresh_training (plan);
  return g_steal_pointer (&plan);
}

/* Plan @id, or the one named @name. */
static gpointer
read_plan (PlannerStore *self, gint64 id, const char *name, GError **error)
{
  if (name != NULL && !planner_store_find_id (self, STMT_FIND_PLAN_BY_NAME, name, NULL, &id, error))
    return NULL;
  if (name != NULL && id == 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_STORE,
                   "%s: no plan named \"%s\"; 'shardscope-cli db list' shows the stored plans",
                   self->path, name);
      return NULL;
    }
  return load_locked (self, id, error);
}

PlannerPlan *
planner_store_load_plan (PlannerStore *self, gint64 id, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return planner_store_read_snapshot (self, read_plan, id, NULL, error);
}

PlannerPlan *
planner_store_load_plan_by_name (PlannerStore *self, const char *name, GError **error)
{
  g_return_val_if_fail (PLANNER_IS_STORE (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  return planner_store_read_snapshot (self, read_plan, 0, name, error);
}
