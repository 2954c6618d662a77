#define G_LOG_DOMAIN "app-document"
#include "config.h"

#include "app-document.h"

#include <glib/gi18n.h>
#include <string.h>

#include "planner-error.h"
#include "planner-pipeline.h"
#include "planner-pin.h"
#include "planner-policy.h"
#include "planner-propagate.h"
#include "planner-request.h"

struct _AppDocument
{
  GObject parent_instance;

  PlannerGraph *graph;
  PlannerMesh *mesh;
  PlannerHardware *hw;
  char *policy;
  char *name;
  gint64 store_id;
  gboolean modified;
  /* What "can-undo" and "can-redo" last said, so that each is notified once per change. */
  gboolean could_undo, could_redo;

  GPtrArray *pins;   /* char* */
  /* The training options every propagation is finished with (schedule, micro-batches, ...). */
  PlannerCostConstants constants;
  GPtrArray *undo;   /* GPtrArray* of char*: the pins before each edit */
  GPtrArray *redo;

  PlannerPlan *plan;
  /* The plan's pipeline (NULL without pp), made with it off the GTK thread; pipeline_of
   * says which plan it is of. */
  PlannerPipeline *pipeline;
  PlannerPlan *pipeline_of;
  PlannerPlan *previous_plan;
  char *error;
  /* Results of an older propagation that finish after a newer one started are dropped. */
  guint serial;
  guint running;
  GCancellable *cancellable;

  int selected_op;
  int step;
};

G_DEFINE_FINAL_TYPE (AppDocument, app_document, G_TYPE_OBJECT)

enum
{
  PROP_0,
  PROP_NAME,
  PROP_STORE_ID,
  PROP_MODIFIED,
  PROP_HARDWARE_NAME,
  PROP_PINS,
  PROP_PLAN,
  PROP_BUSY,
  PROP_ERROR,
  PROP_CAN_UNDO,
  PROP_CAN_REDO,
  PROP_SELECTED_OP,
  PROP_STEP,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

static GPtrArray *
pins_copy (GPtrArray *pins)
{
  GPtrArray *copy = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < pins->len; i++)
    g_ptr_array_add (copy, g_strdup (g_ptr_array_index (pins, i)));
  return copy;
}

static void
app_document_finalize (GObject *object)
{
  AppDocument *self = APP_DOCUMENT (object);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_object (&self->graph);
  g_clear_pointer (&self->mesh, planner_mesh_free);
  g_clear_pointer (&self->hw, planner_hardware_free);
  g_clear_pointer (&self->policy, g_free);
  g_clear_pointer (&self->name, g_free);
  g_clear_pointer (&self->pins, g_ptr_array_unref);
  g_clear_pointer (&self->undo, g_ptr_array_unref);
  g_clear_pointer (&self->redo, g_ptr_array_unref);
  g_clear_object (&self->plan);
  g_clear_pointer (&self->pipeline, planner_pipeline_free);
  g_clear_object (&self->previous_plan);
  g_clear_pointer (&self->error, g_free);
  G_OBJECT_CLASS (app_document_parent_class)->finalize (object);
}

static void
app_document_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppDocument *self = APP_DOCUMENT (object);
  switch (prop_id)
    {
    case PROP_NAME: g_value_set_string (value, self->name); break;
    case PROP_STORE_ID: g_value_set_int64 (value, self->store_id); break;
    case PROP_MODIFIED: g_value_set_boolean (value, self->modified); break;
    case PROP_HARDWARE_NAME: g_value_set_string (value, planner_hardware_get_name (self->hw)); break;
    case PROP_PINS: g_value_set_boxed (value, self->pins); break;
    case PROP_PLAN: g_value_set_object (value, self->plan); break;
    case PROP_BUSY: g_value_set_boolean (value, self->running > 0); break;
    case PROP_ERROR: g_value_set_string (value, self->error); break;
    case PROP_CAN_UNDO: g_value_set_boolean (value, self->undo->len > 0); break;
    case PROP_CAN_REDO: g_value_set_boolean (value, self->redo->len > 0); break;
    case PROP_SELECTED_OP: g_value_set_int (value, self->selected_op); break;
    case PROP_STEP: g_value_set_int (value, self->step); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_document_set_property (GObject *object, guint prop_id, const GValue *value,
                           GParamSpec *pspec)
{
  AppDocument *self = APP_DOCUMENT (object);
  switch (prop_id)
    {
    case PROP_NAME: app_document_set_name (self, g_value_get_string (value)); break;
    case PROP_STORE_ID: app_document_set_store_id (self, g_value_get_int64 (value)); break;
    case PROP_SELECTED_OP: app_document_set_selected_op (self, g_value_get_int (value)); break;
    case PROP_STEP: app_document_set_step (self, g_value_get_int (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_document_class_init (AppDocumentClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->finalize = app_document_finalize;
  object_class->get_property = app_document_get_property;
  object_class->set_property = app_document_set_property;

  GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;
  properties[PROP_NAME] = g_param_spec_string ("name", NULL, NULL, NULL, rw);
  properties[PROP_STORE_ID] = g_param_spec_int64 ("store-id", NULL, NULL, 0, G_MAXINT64, 0, rw);
  properties[PROP_MODIFIED] = g_param_spec_boolean ("modified", NULL, NULL, FALSE, ro);
  /* The profile's name, notified when app_document_set_hardware() gives another. */
  properties[PROP_HARDWARE_NAME] = g_param_spec_string ("hardware-name", NULL, NULL, NULL, ro);
  /* The user's pins (char*), notified at every edit, undo and redo. */
  properties[PROP_PINS] = g_param_spec_boxed ("pins", NULL, NULL, G_TYPE_PTR_ARRAY, ro);
  properties[PROP_PLAN] = g_param_spec_object ("plan", NULL, NULL, PLANNER_TYPE_PLAN, ro);
  properties[PROP_BUSY] = g_param_spec_boolean ("busy", NULL, NULL, FALSE, ro);
  properties[PROP_ERROR] = g_param_spec_string ("error", NULL, NULL, NULL, ro);
  properties[PROP_CAN_UNDO] = g_param_spec_boolean ("can-undo", NULL, NULL, FALSE, ro);
  properties[PROP_CAN_REDO] = g_param_spec_boolean ("can-redo", NULL, NULL, FALSE, ro);
  properties[PROP_SELECTED_OP] = g_param_spec_int ("selected-op", NULL, NULL, -1, G_MAXINT, -1,
                                                   rw);
  properties[PROP_STEP] = g_param_spec_int ("step", NULL, NULL, -1, G_MAXINT, -1, rw);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
app_document_init (AppDocument *self)
{
  self->pins = g_ptr_array_new_with_free_func (g_free);
  self->undo = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  self->redo = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  self->selected_op = -1;
  self->step = -1;
  planner_cost_constants_init (&self->constants);
}

AppDocument *
app_document_new (PlannerGraph *graph, const PlannerMesh *mesh, const PlannerHardware *hw,
                  const char *policy)
{
  g_return_val_if_fail (PLANNER_IS_GRAPH (graph), NULL);
  g_return_val_if_fail (mesh != NULL && hw != NULL, NULL);
  AppDocument *self = g_object_new (APP_TYPE_DOCUMENT, NULL);
  self->graph = g_object_ref (graph);
  self->mesh = planner_mesh_copy (mesh);
  self->hw = planner_hardware_copy (hw);
  self->policy = policy && *policy ? g_strdup (policy) : NULL;
  g_autofree char *mesh_text = planner_mesh_to_string (mesh);
  self->name = g_strdup_printf ("%s %s%s%s", planner_graph_get_name (graph), mesh_text,
                                self->policy ? " " : "", self->policy ? self->policy : "");
  return self;
}

AppDocument *
app_document_new_for_plan (PlannerPlan *plan, gint64 store_id)
{
  g_return_val_if_fail (PLANNER_IS_PLAN (plan), NULL);
  AppDocument *self = app_document_new (planner_plan_get_graph (plan),
                                        planner_plan_get_mesh (plan),
                                        planner_plan_get_hardware (plan),
                                        planner_plan_get_policy (plan));
  self->plan = g_object_ref (plan);
  self->store_id = store_id;
  /* Edits keep the plan's training options. */
  self->constants = *planner_plan_get_constants (plan);
  if (planner_plan_get_name (plan) != NULL)
    {
      g_free (self->name);
      self->name = g_strdup (planner_plan_get_name (plan));
    }

  /* The plan's pins are the policy's and then the user's; the policy's are what expanding
   * it again gives, so whatever else is there the user added. */
  g_autoptr (GHashTable) from_policy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                              NULL);
  if (self->policy != NULL)
    {
      g_autoptr (GPtrArray) pins = planner_policy_expand (self->policy, self->graph, self->mesh,
                                                          NULL, NULL);
      for (guint i = 0; pins && i < pins->len; i++)
        {
          const PlannerPin *pin = g_ptr_array_index (pins, i);
          g_hash_table_add (from_policy, g_strdup (pin->text));
        }
      if (pins)
        g_ptr_array_set_free_func (pins, (GDestroyNotify) planner_pin_free);
    }
  const GPtrArray *texts = planner_plan_get_pins (plan);
  for (guint i = 0; texts && i < texts->len; i++)
    {
      const char *text = g_ptr_array_index ((GPtrArray *) texts, i);
      if (!g_hash_table_contains (from_policy, text))
        g_ptr_array_add (self->pins, g_strdup (text));
    }
  return self;
}

PlannerGraph *
app_document_get_graph (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->graph;
}

const PlannerMesh *
app_document_get_mesh (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->mesh;
}

const PlannerHardware *
app_document_get_hardware (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->hw;
}

void
app_document_set_hardware (AppDocument *self, const PlannerHardware *hw)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  g_return_if_fail (hw != NULL);
  gboolean renamed = g_strcmp0 (planner_hardware_get_name (self->hw),
                                planner_hardware_get_name (hw)) != 0;
  g_clear_pointer (&self->hw, planner_hardware_free);
  self->hw = planner_hardware_copy (hw);
  if (renamed)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_HARDWARE_NAME]);
  app_document_mark_modified (self);
  app_document_replan (self);
}

const char *
app_document_get_policy (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->policy;
}

const char *
app_document_get_name (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->name;
}

void
app_document_set_name (AppDocument *self, const char *name)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  if (g_strcmp0 (self->name, name) == 0)
    return;
  g_free (self->name);
  self->name = g_strdup (name);
  if (self->plan)
    planner_plan_set_name (self->plan, name);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_NAME]);
}

gint64
app_document_get_store_id (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), 0);
  return self->store_id;
}

static void
set_modified (AppDocument *self, gboolean modified)
{
  if (self->modified == modified)
    return;
  self->modified = modified;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MODIFIED]);
}

void
app_document_set_store_id (AppDocument *self, gint64 id)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  set_modified (self, FALSE);
  if (self->store_id == id)
    return;
  self->store_id = id;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STORE_ID]);
}

gboolean
app_document_get_modified (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), FALSE);
  return self->modified;
}

void
app_document_mark_modified (AppDocument *self)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  set_modified (self, TRUE);
}

PlannerPlan *
app_document_get_plan (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->plan;
}

PlannerPlan *
app_document_get_previous_plan (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->previous_plan;
}

gboolean
app_document_get_busy (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), FALSE);
  return self->running > 0;
}

const char *
app_document_get_error (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->error;
}

GPtrArray *
app_document_get_pins (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return self->pins;
}

/* Index of the user's pin whose glob is exactly @op_name, or -1. */
static int
find_op_pin (AppDocument *self, const char *op_name)
{
  gsize len = strlen (op_name);
  for (guint i = 0; i < self->pins->len; i++)
    {
      const char *text = g_ptr_array_index (self->pins, i);
      if (strncmp (text, op_name, len) == 0 && text[len] == '=')
        return (int) i;
    }
  return -1;
}

const char *
app_document_get_op_pin (AppDocument *self, const char *op_name)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  g_return_val_if_fail (op_name != NULL, NULL);
  int i = find_op_pin (self, op_name);
  return i < 0 ? NULL : g_ptr_array_index (self->pins, i);
}

/* Notifies "can-undo" and "can-redo" when they change, not at every edit: the window's
 * actions and buttons are bound to them. */
static void
notify_history (AppDocument *self)
{
  gboolean can_undo = self->undo->len > 0, can_redo = self->redo->len > 0;
  if (can_undo != self->could_undo)
    {
      self->could_undo = can_undo;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CAN_UNDO]);
    }
  if (can_redo != self->could_redo)
    {
      self->could_redo = can_redo;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CAN_REDO]);
    }
}

/* Every edit goes through here: the old pins go on the undo stack, redo is forgotten. */
static void
replace_pins (AppDocument *self, GPtrArray *pins)
{
  g_ptr_array_add (self->undo, self->pins);
  self->pins = pins;
  g_ptr_array_set_size (self->redo, 0);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PINS]);
  notify_history (self);
  set_modified (self, TRUE);
  app_document_replan (self);
}

gboolean
app_document_pin (AppDocument *self, const char *op_name, const char *layouts, GError **error)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), FALSE);
  g_return_val_if_fail (op_name != NULL && layouts != NULL, FALSE);

  int op_index = planner_graph_find_op (self->graph, op_name);
  if (op_index < 0)
    {
      g_set_error (error, PLANNER_ERROR, PLANNER_ERROR_UNKNOWN_OP, _("No op is named %s"),
                   op_name);
      return FALSE;
    }
  g_autofree char *stripped = g_strstrip (g_strdup (layouts));
  g_autofree char *text = g_strdup_printf ("%s=%s", op_name, stripped);
  g_autoptr (PlannerPin) pin = planner_pin_parse (text, self->mesh, error);
  if (pin == NULL)
    return FALSE;

  /* The same check propagation makes, now, so the inspector can show it under the entry. */
  const PlannerOp *op = planner_graph_get_op (self->graph, op_index);
  const char *names[PLANNER_MAX_OPERANDS + 1] = { NULL };
  for (guint i = 0; i < op->n_inputs && i < PLANNER_MAX_OPERANDS; i++)
    names[i] = planner_graph_get_tensor (self->graph, op->inputs[i])->name;
  PlannerStrategy strategy;
  if (!planner_strategy_from_layouts (&op->rule, self->mesh, pin->inputs, pin->n_inputs,
                                      op->name, names, &strategy, error))
    return FALSE;
  if (!planner_strategy_validate (&strategy, &op->rule, self->mesh, op->name, names, error))
    return FALSE;

  int existing = find_op_pin (self, op_name);
  if (existing >= 0 && g_strcmp0 (g_ptr_array_index (self->pins, existing), text) == 0)
    return TRUE;
  GPtrArray *pins = pins_copy (self->pins);
  if (existing >= 0)
    g_ptr_array_remove_index (pins, existing);
  g_ptr_array_add (pins, g_steal_pointer (&text));
  replace_pins (self, pins);
  return TRUE;
}

gboolean
app_document_unpin (AppDocument *self, const char *op_name)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), FALSE);
  g_return_val_if_fail (op_name != NULL, FALSE);
  int existing = find_op_pin (self, op_name);
  if (existing < 0)
    return FALSE;
  GPtrArray *pins = pins_copy (self->pins);
  g_ptr_array_remove_index (pins, existing);
  replace_pins (self, pins);
  return TRUE;
}

gboolean
app_document_get_can_undo (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), FALSE);
  return self->undo->len > 0;
}

gboolean
app_document_get_can_redo (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), FALSE);
  return self->redo->len > 0;
}

static void
move_history (AppDocument *self, GPtrArray *from, GPtrArray *to)
{
  if (from->len == 0)
    return;
  GPtrArray *pins = g_ptr_array_steal_index (from, from->len - 1);
  g_ptr_array_add (to, self->pins);
  self->pins = pins;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PINS]);
  notify_history (self);
  set_modified (self, TRUE);
  app_document_replan (self);
}

void
app_document_undo (AppDocument *self)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  move_history (self, self->undo, self->redo);
}

void
app_document_redo (AppDocument *self)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  move_history (self, self->redo, self->undo);
}

/* What the worker needs, copied, so the document may change while it runs. */
typedef struct
{
  PlannerGraph *graph;
  PlannerMesh *mesh;
  PlannerHardware *hw;
  char *policy;
  char *name;
  GPtrArray *pins;
  PlannerCostConstants constants;
  guint serial;
} ReplanData;

static void
replan_data_free (ReplanData *data)
{
  g_object_unref (data->graph);
  planner_mesh_free (data->mesh);
  planner_hardware_free (data->hw);
  g_free (data->policy);
  g_free (data->name);
  g_ptr_array_unref (data->pins);
  g_free (data);
}

typedef struct
{
  PlannerPlan *plan;
  PlannerPipeline *pipeline;
} ReplanResult;

static void
replan_result_free (ReplanResult *result)
{
  g_clear_object (&result->plan);
  planner_pipeline_free (result->pipeline);
  g_free (result);
}

static void
replan_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  ReplanData *data = task_data;
  GError *error = NULL;
  /* The plan request (planner-request.h): the policy's pins, then the user's over them. */
  g_autoptr (PlannerRequest) request = planner_request_new ();
  planner_request_set_policy (request, data->policy);
  planner_request_set_constants (request, &data->constants);
  for (guint i = 0; i < data->pins->len; i++)
    planner_request_add_pin (request, g_ptr_array_index (data->pins, i), PLANNER_PIN_TIER_USER);
  gint64 start = g_get_monotonic_time ();
  PlannerPlan *plan
      = planner_request_propagate (request, data->graph, data->mesh, data->hw, NULL, NULL, &error);
  if (plan == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  planner_plan_set_propagate_ms (plan, (g_get_monotonic_time () - start) / 1000.0);
  planner_plan_set_policy (plan, data->policy);
  planner_plan_set_name (plan, data->name);
  /* Made here, not on the GTK thread: tens of ms for an 80-layer model. A finished plan
   * always has it (or none without a pp axis). */
  ReplanResult *result = g_new0 (ReplanResult, 1);
  result->pipeline = planner_pipeline_new (plan, FALSE, NULL);
  result->plan = plan;
  g_task_return_pointer (task, result, (GDestroyNotify) replan_result_free);
}

static void
set_error (AppDocument *self, const char *message)
{
  if (g_strcmp0 (self->error, message) == 0)
    return;
  g_free (self->error);
  self->error = g_strdup (message);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ERROR]);
}

static void
replan_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AppDocument *self = APP_DOCUMENT (source);
  ReplanData *data = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  ReplanResult *done = g_task_propagate_pointer (G_TASK (result), &error);
  g_autoptr (PlannerPlan) plan = done ? g_steal_pointer (&done->plan) : NULL;
  g_autoptr (PlannerPipeline) pipeline = done ? g_steal_pointer (&done->pipeline) : NULL;
  g_clear_pointer (&done, replan_result_free);

  self->running--;
  if (data->serial == self->serial)
    {
      if (plan != NULL)
        {
          set_error (self, NULL);
          g_clear_object (&self->previous_plan);
          self->previous_plan = g_steal_pointer (&self->plan);
          self->plan = g_steal_pointer (&plan);
          g_clear_pointer (&self->pipeline, planner_pipeline_free);
          self->pipeline = g_steal_pointer (&pipeline);
          self->pipeline_of = self->plan;
          if (self->step >= (int) planner_plan_get_n_trace_steps (self->plan))
            app_document_set_step (self, -1);
          g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PLAN]);
        }
      else if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        set_error (self, error->message);
    }
  if (self->running == 0)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BUSY]);
}

void
app_document_replan (AppDocument *self)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  ReplanData *data = g_new0 (ReplanData, 1);
  data->graph = g_object_ref (self->graph);
  data->mesh = planner_mesh_copy (self->mesh);
  data->hw = planner_hardware_copy (self->hw);
  data->policy = g_strdup (self->policy);
  data->name = g_strdup (self->name);
  data->pins = pins_copy (self->pins);
  data->constants = self->constants;
  data->serial = ++self->serial;

  /* propagate has no cancellation point; a stale run finishes and is dropped by serial. */
  g_autoptr (GTask) task = g_task_new (self, NULL, replan_done, NULL);
  g_task_set_source_tag (task, app_document_replan);
  g_task_set_task_data (task, data, (GDestroyNotify) replan_data_free);
  if (self->running++ == 0)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_BUSY]);
  g_task_run_in_thread (task, replan_thread);
}

int
app_document_get_selected_op (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), -1);
  return self->selected_op;
}

const char *
app_document_get_selected_op_name (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  if (self->selected_op < 0)
    return NULL;
  return planner_graph_get_op (self->graph, self->selected_op)->name;
}

void
app_document_set_selected_op (AppDocument *self, int op)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  g_return_if_fail (op < (int) planner_graph_get_n_ops (self->graph));
  op = MAX (op, -1);
  if (self->selected_op == op)
    return;
  self->selected_op = op;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_SELECTED_OP]);
}

int
app_document_get_step (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), -1);
  return self->step;
}

void
app_document_set_step (AppDocument *self, int step)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  step = MAX (step, -1);
  if (self->plan != NULL)
    step = MIN (step, (int) planner_plan_get_n_trace_steps (self->plan) - 1);
  if (self->step == step)
    return;
  self->step = step;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STEP]);
}

const PlannerCostConstants *
app_document_get_constants (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  return &self->constants;
}

void
app_document_set_constants (AppDocument *self, const PlannerCostConstants *constants)
{
  g_return_if_fail (APP_IS_DOCUMENT (self));
  g_return_if_fail (constants != NULL);
  /* Padding may differ between equal options: at worst an unneeded re-plan. */
  if (memcmp (&self->constants, constants, sizeof *constants) == 0)
    return;
  self->constants = *constants;
  /* Saved with the plan, like a pin edit (but not undone with the pins). */
  set_modified (self, TRUE);
  app_document_replan (self);
}

const PlannerPipeline *
app_document_get_pipeline (AppDocument *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT (self), NULL);
  /* A plan that came loaded, not from a replan, gets its pipeline here, once. */
  if (self->plan != NULL && self->pipeline_of != self->plan)
    {
      g_clear_pointer (&self->pipeline, planner_pipeline_free);
      self->pipeline = planner_pipeline_new (self->plan, FALSE, NULL);
      self->pipeline_of = self->plan;
    }
  return self->plan ? self->pipeline : NULL;
}
