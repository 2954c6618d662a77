#define G_LOG_DOMAIN "app-window"
#include "config.h"

#include "app-window-private.h"

#include "app-application.h"

#include <glib/gi18n.h>

#include "app-autosave.h"

G_DEFINE_FINAL_TYPE (AppWindow, app_window, ADW_TYPE_APPLICATION_WINDOW)

enum
{
  PROP_0,
  PROP_DOCUMENT,
  PROP_STORE,
  /* Derived from the document and the store (app_window_sync_state()); read-only. */
  PROP_HAS_DOCUMENT,
  PROP_HAS_PLAN,
  PROP_CAN_SAVE,
  PROP_CAN_UNDO,
  PROP_CAN_REDO,
  PROP_CAN_PIN,
  PROP_CAN_UNPIN,
  PROP_DISPLAY_TITLE,
  PROP_DISPLAY_SUBTITLE,
  PROP_HAS_ERROR,
  PROP_ERROR_TEXT,
  /* The window's own. */
  PROP_MODE,
  PROP_COMPARE_MODE,
  PROP_OFFERS_RECOVERY,
  PROP_SHOW_TRIAL_RESULTS,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

/* libadwaita 1.2's overlay frees a toast when its hide animation ends even if its show
 * animation still runs (REPLACE_DURATION, 500 ms, while another toast hides): that
 * animation's end then writes into the freed toast. So a toast is never dismissed by us
 * while it may still be appearing; queued ones are withdrawn at once, without animation. */
#define TOAST_SHOW_US (600 * G_TIME_SPAN_MILLISECOND)

static void
toast_gone (AdwToast *toast, AppWindow *self)
{
  if (self->toasts == NULL)
    return;
  guint index = 0;
  if (!g_ptr_array_find (self->toasts, toast, &index))
    return;
  g_ptr_array_remove_index (self->toasts, index);
  /* Toasts are shown in the order they came: the next one appears now. */
  if (index == 0)
    self->toast_shown_at = g_get_monotonic_time ();
}

/* Toasts still shown or queued are kept so they can all be dismissed at once. */
void
app_window_add_toast (AppWindow *self, AdwToast *toast)
{
  if (self->toasts->len == 0)
    self->toast_shown_at = g_get_monotonic_time ();
  g_ptr_array_add (self->toasts, g_object_ref (toast));
  g_signal_connect_object (toast, "dismissed", G_CALLBACK (toast_gone), self, G_CONNECT_DEFAULT);
  adw_toast_overlay_add_toast (self->toast_overlay, toast);
}

static gboolean
dismiss_shown_toast (gpointer data)
{
  AppWindow *self = data;
  self->toast_timeout = 0;
  app_window_dismiss_toasts (self);
  return G_SOURCE_REMOVE;
}

void
app_window_dismiss_toasts (AppWindow *self)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  if (self->toasts == NULL)
    return;
  /* The queued ones, newest first: none of them has a widget or an animation yet. */
  while (self->toasts->len > 1)
    {
      g_autoptr (AdwToast) toast
          = g_object_ref (g_ptr_array_index (self->toasts, self->toasts->len - 1));
      g_ptr_array_remove_index (self->toasts, self->toasts->len - 1);
      adw_toast_dismiss (toast);
    }
  if (self->toasts->len == 0)
    return;
  gint64 shown_for = g_get_monotonic_time () - self->toast_shown_at;
  if (shown_for < TOAST_SHOW_US)
    {
      /* Still appearing: dismissed once it has appeared. */
      if (self->toast_timeout == 0)
        self->toast_timeout = g_timeout_add ((TOAST_SHOW_US - shown_for) / 1000 + 1,
                                             dismiss_shown_toast, self);
      return;
    }
  g_autoptr (AdwToast) toast = g_object_ref (g_ptr_array_index (self->toasts, 0));
  g_ptr_array_remove_index (self->toasts, 0);
  adw_toast_dismiss (toast);
}

guint
app_window_get_n_toasts (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), 0);
  return self->toasts ? self->toasts->len : 0;
}

static void
add_text_toast (AppWindow *self, const char *text, guint timeout)
{
  AdwToast *toast = adw_toast_new (text);
  adw_toast_set_timeout (toast, timeout);
  app_window_add_toast (self, toast);
}

void
app_window_show_toast (AppWindow *self, const char *text)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  add_text_toast (self, text, 4);
}

void
app_window_show_error (AppWindow *self, const char *what, const GError *error)
{
  g_autofree char *text = g_strdup_printf ("%s: %s", what, error->message);
  g_message ("%s", text);
  add_text_toast (self, text, 8);
}

/* ---- the bound state -------------------------------------------------------------- */

static void
set_bool (AppWindow *self, gboolean *field, gboolean value, guint prop)
{
  value = !!value;
  if (*field == value)
    return;
  *field = value;
  g_object_notify_by_pspec (G_OBJECT (self), properties[prop]);
}

/* Takes @value. */
static void
set_string (AppWindow *self, char **field, char *value, guint prop)
{
  if (g_strcmp0 (*field, value) == 0)
    {
      g_free (value);
      return;
    }
  g_free (*field);
  *field = value;
  g_object_notify_by_pspec (G_OBJECT (self), properties[prop]);
}

static char *
dup_subtitle (AppDocument *doc)
{
  g_autofree char *mesh = planner_mesh_to_string (app_document_get_mesh (doc));
  const char *policy = app_document_get_policy (doc);
  return g_strdup_printf ("%s · %s · %s · %s",
                          planner_graph_get_name (app_document_get_graph (doc)), mesh,
                          planner_hardware_get_name (app_document_get_hardware (doc)),
                          policy ? policy : _("no policy"));
}

void
app_window_sync_state (AppWindow *self)
{
  AppDocument *doc = self->document;
  PlannerPlan *plan = doc ? app_document_get_plan (doc) : NULL;
  const char *op_name = doc ? app_document_get_selected_op_name (doc) : NULL;
  const char *error = doc ? app_document_get_error (doc) : NULL;
  /* One "notify" per property that changed, after all of them hold their new values. */
  g_object_freeze_notify (G_OBJECT (self));
  set_bool (self, &self->has_document, doc != NULL, PROP_HAS_DOCUMENT);
  set_bool (self, &self->has_plan, plan != NULL, PROP_HAS_PLAN);
  set_bool (self, &self->can_save, plan != NULL && self->store != NULL, PROP_CAN_SAVE);
  set_bool (self, &self->can_undo, doc && app_document_get_can_undo (doc), PROP_CAN_UNDO);
  set_bool (self, &self->can_redo, doc && app_document_get_can_redo (doc), PROP_CAN_REDO);
  set_bool (self, &self->can_pin, op_name != NULL && plan != NULL, PROP_CAN_PIN);
  set_bool (self, &self->can_unpin, op_name && app_document_get_op_pin (doc, op_name),
            PROP_CAN_UNPIN);
  set_string (self, &self->display_title,
              doc ? g_strdup_printf ("%s%s", app_document_get_modified (doc) ? "• " : "",
                                     app_document_get_name (doc))
                  : g_strdup ("Shardscope"),
              PROP_DISPLAY_TITLE);
  set_string (self, &self->display_subtitle, doc ? dup_subtitle (doc) : NULL,
              PROP_DISPLAY_SUBTITLE);
  /* The text stays while the bar hides, so that it does not shrink as it goes. */
  if (error)
    set_string (self, &self->error_text, g_strdup_printf (_("The plan was refused: %s"), error),
                PROP_ERROR_TEXT);
  set_bool (self, &self->has_error, error != NULL, PROP_HAS_ERROR);
  g_object_thaw_notify (G_OBJECT (self));
}

void
app_window_set_mode (AppWindow *self, const char *mode)
{
  static const char *const modes[] = { "empty", "plan", "compare" };
  const char *interned = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    if (g_str_equal (mode, modes[i]))
      interned = modes[i];
  g_return_if_fail (interned != NULL);
  if (self->mode == interned)
    return;
  gboolean was_compare = g_str_equal (self->mode, "compare");
  self->mode = interned;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MODE]);
  if (was_compare != g_str_equal (interned, "compare"))
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_COMPARE_MODE]);
}

void
app_window_set_offers_recovery (AppWindow *self, gboolean offers)
{
  set_bool (self, &self->offers_recovery, offers, PROP_OFFERS_RECOVERY);
}

void
app_window_set_show_trial_results (AppWindow *self, gboolean show)
{
  set_bool (self, &self->show_trial_results, show, PROP_SHOW_TRIAL_RESULTS);
}

/* Shows @op in the graph: unfolds the block it is in and selects its node. */
static void
reveal_op (AppWindow *self, int op)
{
  if (self->graph_model == NULL)
    return;
  self->syncing_selection = TRUE;
  if (op < 0)
    graphview_widget_set_selected (self->graph, -1);
  else
    {
      PlannerGraph *graph = graphview_model_get_graph (self->graph_model);
      const char *name = planner_graph_get_op (graph, op)->name;
      guint item = graphview_model_get_item_of_op (self->graph_model, op);
      const GraphviewItem *it = graphview_model_get_item (self->graph_model, item);
      if (it->kind != GRAPHVIEW_ITEM_OP)
        {
          /* Names hold no glob characters, so the glob is the name itself. */
          graphview_model_expand_matching (self->graph_model, name);
          item = graphview_model_get_item_of_op (self->graph_model, op);
        }
      graphview_widget_set_selected (self->graph, (int) item);
      /* Navigation from elsewhere (chart, compare, search, the timeline) centres the op. */
      graphview_widget_center_on_item (self->graph, item);
    }
  self->syncing_selection = FALSE;
}


static void
on_plan_changed (AppWindow *self)
{
  PlannerPlan *plan = app_document_get_plan (self->document);
  graphview_widget_set_plan (self->graph, plan);
  /* The stages' bands from the pipeline the document made with the plan. */
  graphview_widget_set_pipeline (self->graph, app_document_get_pipeline (self->document));
  /* A trial's figures belong to the plan it ran. */
  app_window_show_trial_on_nodes (self, NULL);
  graphview_widget_set_step (self->graph, app_document_get_step (self->document));
  if (plan && g_str_equal (self->mode, "empty"))
    app_window_set_mode (self, "plan");
  app_window_sync_state (self);
}

static void
on_step_changed (AppWindow *self)
{
  int step = app_document_get_step (self->document);
  graphview_widget_set_step (self->graph, step);
  PlannerPlan *plan = app_document_get_plan (self->document);
  /* The graph follows the step's op, folded or not: playing never unfolds blocks. */
  if (plan && step >= 0 && (guint) step < planner_plan_get_n_trace_steps (plan)
      && self->graph_model && graphview_widget_is_ready (self->graph))
    graphview_widget_center_on_item (
        self->graph, graphview_model_get_item_of_op (self->graph_model,
                                                     planner_plan_get_trace_step (plan, step)->op));
}

static void
on_selected_op_changed (AppWindow *self)
{
  if (!self->syncing_selection)
    reveal_op (self, app_document_get_selected_op (self->document));
  app_window_sync_state (self);
}

static void
on_graph_selection_changed (AppWindow *self, int item)
{
  if (self->syncing_selection || self->document == NULL || self->graph_model == NULL)
    return;
  /* Folding renumbers the items and drops the widget's selection; the op stays selected
   * and is shown again when the new layout arrives (on_layout_ready). */
  if (item < 0 && !graphview_widget_is_ready (self->graph))
    return;
  int op = -1;
  if (item >= 0)
    {
      const GraphviewItem *it = graphview_model_get_item (self->graph_model, item);
      if (it->kind == GRAPHVIEW_ITEM_OP)
        op = (int) it->first_op;
    }
  self->syncing_selection = TRUE;
  app_document_set_selected_op (self->document, op);
  self->syncing_selection = FALSE;
}

/* Whether @item's node lies wholly inside the graph view. */
static gboolean
item_in_view (GraphviewWidget *graph, guint item)
{
  GraphviewLayout *layout = graphview_renderer_get_layout (graphview_widget_get_renderer (graph));
  if (layout == NULL || item >= graphview_layout_get_n_items (layout))
    return FALSE;
  const GraphviewRect *r = graphview_layout_get_item_rect (layout, item);
  double zoom = graphview_widget_get_zoom (graph), x, y;
  graphview_widget_get_origin (graph, &x, &y);
  double x0 = (r->x - x) * zoom, y0 = (r->y - y) * zoom;
  return x0 >= 0 && y0 >= 0 && x0 + r->width * zoom <= gtk_widget_get_width (GTK_WIDGET (graph))
         && y0 + r->height * zoom <= gtk_widget_get_height (GTK_WIDGET (graph));
}

static void
on_layout_ready (AppWindow *self)
{
  if (self->document == NULL || self->graph_model == NULL
      || app_document_get_selected_op (self->document) < 0)
    return;
  int op = app_document_get_selected_op (self->document);
  /* A fold change from the canvas already selected the op's node and kept the view where
   * the user was looking (graphview_widget_activate_item()): centring it now would make the
   * view jump. */
  guint item = graphview_model_get_item_of_op (self->graph_model, op);
  if (graphview_widget_get_selected (self->graph) == (int)item && item_in_view (self->graph, item))
    return;
  /* The selected node may have moved in the new layout: scroll to it again. */
  reveal_op (self, op);
}

AppDocument *
app_window_get_document (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->document;
}

void
app_window_set_document (AppWindow *self, AppDocument *document)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (document == NULL || APP_IS_DOCUMENT (document));
  if (self->document == document)
    return;
  PlannerGraph *old_graph = self->document ? app_document_get_graph (self->document) : NULL;
  g_set_object (&self->document, document);
  g_signal_group_set_target (self->document_signals, document);

  if (document == NULL)
    {
      graphview_widget_set_plan (self->graph, NULL);
      app_window_set_mode (self, "empty");
    }
  else
    {
      PlannerGraph *graph = app_document_get_graph (document);
      if (graph != old_graph || self->graph_model == NULL)
        {
          g_clear_object (&self->graph_model);
          self->graph_model = graphview_model_new (graph);
          graphview_widget_set_model (self->graph, self->graph_model);
          app_type_legend_set_renderer (self->type_legend,
                                        graphview_widget_get_renderer (self->graph));
        }
      on_plan_changed (self);
      app_sidebar_set_current_id (self->sidebar, app_document_get_store_id (document));
    }
  app_trial_results_set_result (self->trial_results, NULL, NULL);
  app_window_set_show_trial_results (self, FALSE);
  app_window_show_trial_on_nodes (self, NULL);
  self->search_index = -1;
  app_window_update_search_matches (self);
  app_window_update_autosave (self);
  app_window_sync_state (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_DOCUMENT]);
}

PlannerStore *
app_window_get_store (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->store;
}

void
app_window_set_store (AppWindow *self, PlannerStore *store)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  if (!g_set_object (&self->store, store))
    return;
  app_sidebar_set_store (self->sidebar, store);
  app_window_set_autosave_path (self, store ? planner_store_get_path (store) : NULL);
  app_window_sync_state (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STORE]);
}

/* ---- parts ------------------------------------------------------------------------ */

GraphviewWidget *
app_window_get_graph (AppWindow *self)
{
  return self->graph;
}

GtkWidget *
app_window_get_part (AppWindow *self, const char *name)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  g_return_val_if_fail (name != NULL, NULL);
  GObject *part = gtk_widget_get_template_child (GTK_WIDGET (self), APP_TYPE_WINDOW, name);
  g_return_val_if_fail (GTK_IS_WIDGET (part), NULL);
  return GTK_WIDGET (part);
}

const char *
app_window_get_mode (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->mode;
}

/* ---- object ----------------------------------------------------------------------- */

static void
close_proceed (AppWindow *self, gpointer data)
{
  self->close_confirmed = TRUE;
  gtk_window_close (GTK_WINDOW (self));
}

static gboolean
app_window_close_request (GtkWindow *window)
{
  AppWindow *self = APP_WINDOW (window);
  if (!self->close_confirmed && self->document && app_document_get_modified (self->document))
    {
      app_window_ask_before_discarding (self, app_window_proceed_new (close_proceed, NULL, NULL));
      return TRUE;
    }
  /* Closed on purpose: nothing is left to recover. */
  if (self->autosave_path)
    {
      app_autosave_remove (self->autosave_path);
      app_autosave_flush ();
      app_autosave_claim (self->autosave_path, FALSE);
      self->autosaved = FALSE;
    }
  if (self->settings)
    {
      int width = 0, height = 0;
      gtk_window_get_default_size (window, &width, &height);
      g_settings_set_int (self->settings, "window-width", width);
      g_settings_set_int (self->settings, "window-height", height);
      g_settings_set_boolean (self->settings, "window-maximized",
                              gtk_window_is_maximized (window));
    }
  /* Deletions still undoable become final now. */
  app_window_finish_pending_deletes (self);
  return GTK_WINDOW_CLASS (app_window_parent_class)->close_request (window);
}

static void
app_window_dispose (GObject *object)
{
  AppWindow *self = APP_WINDOW (object);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->document_signals)
    g_signal_group_set_target (self->document_signals, NULL);
  g_clear_object (&self->document_signals);
  g_clear_object (&self->document);
  g_clear_object (&self->graph_model);
  g_clear_object (&self->store);
  g_clear_object (&self->settings);
  g_clear_pointer (&self->pending_deletes, g_hash_table_unref);
  g_clear_pointer (&self->toasts, g_ptr_array_unref);
  g_clear_handle_id (&self->toast_timeout, g_source_remove);
  if (self->autosave_path)
    app_autosave_claim (self->autosave_path, FALSE);
  g_clear_pointer (&self->autosave_path, g_free);
  g_clear_pointer (&self->display_title, g_free);
  g_clear_pointer (&self->display_subtitle, g_free);
  g_clear_pointer (&self->error_text, g_free);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_WINDOW);
  G_OBJECT_CLASS (app_window_parent_class)->dispose (object);
}

static void
app_window_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppWindow *self = APP_WINDOW (object);
  switch (prop_id)
    {
    case PROP_DOCUMENT: g_value_set_object (value, self->document); break;
    case PROP_STORE: g_value_set_object (value, self->store); break;
    case PROP_HAS_DOCUMENT: g_value_set_boolean (value, self->has_document); break;
    case PROP_HAS_PLAN: g_value_set_boolean (value, self->has_plan); break;
    case PROP_CAN_SAVE: g_value_set_boolean (value, self->can_save); break;
    case PROP_CAN_UNDO: g_value_set_boolean (value, self->can_undo); break;
    case PROP_CAN_REDO: g_value_set_boolean (value, self->can_redo); break;
    case PROP_CAN_PIN: g_value_set_boolean (value, self->can_pin); break;
    case PROP_CAN_UNPIN: g_value_set_boolean (value, self->can_unpin); break;
    case PROP_DISPLAY_TITLE: g_value_set_string (value, self->display_title); break;
    case PROP_DISPLAY_SUBTITLE: g_value_set_string (value, self->display_subtitle); break;
    case PROP_HAS_ERROR: g_value_set_boolean (value, self->has_error); break;
    case PROP_ERROR_TEXT: g_value_set_string (value, self->error_text); break;
    case PROP_MODE: g_value_set_string (value, self->mode); break;
    case PROP_COMPARE_MODE: g_value_set_boolean (value, g_str_equal (self->mode, "compare")); break;
    case PROP_OFFERS_RECOVERY: g_value_set_boolean (value, self->offers_recovery); break;
    case PROP_SHOW_TRIAL_RESULTS: g_value_set_boolean (value, self->show_trial_results); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_window_set_property (GObject *object, guint prop_id, const GValue *value,
                         GParamSpec *pspec)
{
  AppWindow *self = APP_WINDOW (object);
  switch (prop_id)
    {
    case PROP_DOCUMENT: app_window_set_document (self, g_value_get_object (value)); break;
    case PROP_STORE: app_window_set_store (self, g_value_get_object (value)); break;
    case PROP_SHOW_TRIAL_RESULTS:
      app_window_set_show_trial_results (self, g_value_get_boolean (value));
      break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}


static void
app_window_class_init (AppWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  GtkWindowClass *window_class = GTK_WINDOW_CLASS (klass);
  object_class->dispose = app_window_dispose;
  object_class->get_property = app_window_get_property;
  object_class->set_property = app_window_set_property;
  window_class->close_request = app_window_close_request;

  properties[PROP_DOCUMENT] = g_param_spec_object ("document", NULL, NULL, APP_TYPE_DOCUMENT,
                                                   G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
                                                       | G_PARAM_EXPLICIT_NOTIFY);
  properties[PROP_STORE] = g_param_spec_object ("store", NULL, NULL, PLANNER_TYPE_STORE,
                                                G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
                                                    | G_PARAM_EXPLICIT_NOTIFY);
  GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  properties[PROP_HAS_DOCUMENT] = g_param_spec_boolean ("has-document", NULL, NULL, FALSE, ro);
  properties[PROP_HAS_PLAN] = g_param_spec_boolean ("has-plan", NULL, NULL, FALSE, ro);
  properties[PROP_CAN_SAVE] = g_param_spec_boolean ("can-save", NULL, NULL, FALSE, ro);
  properties[PROP_CAN_UNDO] = g_param_spec_boolean ("can-undo", NULL, NULL, FALSE, ro);
  properties[PROP_CAN_REDO] = g_param_spec_boolean ("can-redo", NULL, NULL, FALSE, ro);
  properties[PROP_CAN_PIN] = g_param_spec_boolean ("can-pin", NULL, NULL, FALSE, ro);
  properties[PROP_CAN_UNPIN] = g_param_spec_boolean ("can-unpin", NULL, NULL, FALSE, ro);
  properties[PROP_DISPLAY_TITLE]
      = g_param_spec_string ("display-title", NULL, NULL, "Shardscope", ro);
  properties[PROP_DISPLAY_SUBTITLE]
      = g_param_spec_string ("display-subtitle", NULL, NULL, NULL, ro);
  properties[PROP_HAS_ERROR] = g_param_spec_boolean ("has-error", NULL, NULL, FALSE, ro);
  properties[PROP_ERROR_TEXT] = g_param_spec_string ("error-text", NULL, NULL, NULL, ro);
  properties[PROP_MODE] = g_param_spec_string ("mode", NULL, NULL, "empty", ro);
  properties[PROP_COMPARE_MODE] = g_param_spec_boolean ("compare-mode", NULL, NULL, FALSE, ro);
  properties[PROP_OFFERS_RECOVERY]
      = g_param_spec_boolean ("offers-recovery", NULL, NULL, FALSE, ro);
  properties[PROP_SHOW_TRIAL_RESULTS]
      = g_param_spec_boolean ("show-trial-results", NULL, NULL, FALSE,
                              G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
                                  | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  g_type_ensure (GRAPHVIEW_TYPE_WIDGET);
  g_type_ensure (APP_TYPE_SIDEBAR);
  g_type_ensure (APP_TYPE_INSPECTOR);
  g_type_ensure (APP_TYPE_TIMELINE);
  g_type_ensure (APP_TYPE_TOTALS_BAR);
  g_type_ensure (APP_TYPE_COST_CHART);
  g_type_ensure (APP_TYPE_SCHEDULE_CHART);
  g_type_ensure (APP_TYPE_MINIMAP);
  g_type_ensure (APP_TYPE_COMPARE_VIEW);
  g_type_ensure (APP_TYPE_TRIAL_RESULTS);
  g_type_ensure (APP_TYPE_TYPE_LEGEND);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/shardscope/Shardscope/app-window.ui");
  gtk_widget_class_bind_template_child (widget_class, AppWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, flap);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, sidebar);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, search_bar);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, search_entry);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, search_status);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, graph);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, minimap);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, graph_buttons);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, trial_results);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, type_legend);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, timeline);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, totals_bar);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, cost_chart);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, schedule_chart);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, inspector);
  gtk_widget_class_bind_template_child (widget_class, AppWindow, compare_view);
  /* Bound in the template to the window's properties, never set from here: named only so
   * that app_window_get_part() hands them to the tests. */
  static const char *const bound_parts[]
      = { "window_title", "mode_stack",        "spinner",       "error_revealer",
          "error_label",  "recovery_revealer", "recovery_label" };
  for (guint i = 0; i < G_N_ELEMENTS (bound_parts); i++)
    gtk_widget_class_bind_template_child_full (widget_class, bound_parts[i], FALSE, 0);

  app_window_class_init_actions (widget_class);
}

static void
app_window_init (AppWindow *self)
{
  /* What the template's bindings read when they are made. */
  self->mode = "empty";
  self->display_title = g_strdup ("Shardscope");
  gtk_widget_init_template (GTK_WIDGET (self));
  self->search_index = -1;
  self->toasts = g_ptr_array_new_with_free_func (g_object_unref);
  self->pending_deletes = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free,
                                                 g_object_unref);

  app_window_init_actions (self);

  /* Settings are optional: without the installed (or build-dir) schema the app still runs. */
  self->settings = app_application_new_settings ();
  if (self->settings)
    {
      gtk_window_set_default_size (GTK_WINDOW (self),
                                   g_settings_get_int (self->settings, "window-width"),
                                   g_settings_get_int (self->settings, "window-height"));
      if (g_settings_get_boolean (self->settings, "window-maximized"))
        gtk_window_maximize (GTK_WINDOW (self));
      g_settings_bind (self->settings, "show-sidebar", self->flap, "reveal-flap",
                       G_SETTINGS_BIND_DEFAULT);
      g_settings_bind (self->settings, "show-minimap", self->minimap, "visible",
                       G_SETTINGS_BIND_DEFAULT);
      g_settings_bind (self->settings, "show-type-legend", self->type_legend, "visible",
                       G_SETTINGS_BIND_DEFAULT);
      g_settings_bind (self->settings, "timeline-speed", self->timeline, "speed",
                       G_SETTINGS_BIND_DEFAULT);
    }
  g_autoptr (GPropertyAction) sidebar_action
      = g_property_action_new ("show-sidebar", self->flap, "reveal-flap");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (sidebar_action));
  g_autoptr (GPropertyAction) minimap_action
      = g_property_action_new ("show-minimap", self->minimap, "visible");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (minimap_action));
  g_autoptr (GPropertyAction) find_action
      = g_property_action_new ("find", self->search_bar, "search-mode-enabled");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (find_action));

  app_minimap_set_view (self->minimap, self->graph);
  /* Fit leaves the graph uncovered by what floats over it. */
  graphview_widget_add_overlay (self->graph, GTK_WIDGET (self->minimap));
  graphview_widget_add_overlay (self->graph, GTK_WIDGET (self->graph_buttons));
  graphview_widget_add_overlay (self->graph, GTK_WIDGET (self->trial_results));
  graphview_widget_add_overlay (self->graph, GTK_WIDGET (self->type_legend));
  g_autoptr (GPropertyAction) type_legend_action
      = g_property_action_new ("show-type-legend", self->type_legend, "visible");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (type_legend_action));
  g_autoptr (GPropertyAction) legend_action
      = g_property_action_new ("show-legend", self->graph, "show-legend");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (legend_action));
  gtk_search_bar_connect_entry (self->search_bar, GTK_EDITABLE (self->search_entry));
  g_signal_connect_swapped (self->graph, "selection-changed",
                            G_CALLBACK (on_graph_selection_changed), self);
  g_signal_connect_swapped (self->graph, "layout-ready", G_CALLBACK (on_layout_ready), self);

  /* The parts follow the window's document through bindings, not copies. */
  g_object_bind_property (self, "document", self->inspector, "document", G_BINDING_DEFAULT);
  g_object_bind_property (self, "document", self->timeline, "document", G_BINDING_DEFAULT);
  g_object_bind_property (self, "document", self->totals_bar, "document", G_BINDING_DEFAULT);
  g_object_bind_property (self, "document", self->cost_chart, "document", G_BINDING_DEFAULT);
  g_object_bind_property (self, "document", self->schedule_chart, "document", G_BINDING_DEFAULT);

  self->document_signals = g_signal_group_new (APP_TYPE_DOCUMENT);
  g_signal_group_connect_swapped (self->document_signals, "notify::plan",
                                  G_CALLBACK (on_plan_changed), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::step",
                                  G_CALLBACK (on_step_changed), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::selected-op",
                                  G_CALLBACK (on_selected_op_changed), self);
  /* What the window's bound state is derived from (the plan, the selection: above). */
  static const char *const state_signals[]
      = { "notify::error", "notify::can-undo", "notify::can-redo", "notify::modified",
          "notify::name", "notify::hardware-name", "notify::pins" };
  for (guint i = 0; i < G_N_ELEMENTS (state_signals); i++)
    g_signal_group_connect_swapped (self->document_signals, state_signals[i],
                                    G_CALLBACK (app_window_sync_state), self);
  /* Every plan an edit gives, and every save, updates the autosave. */
  g_signal_group_connect_swapped (self->document_signals, "notify::plan",
                                  G_CALLBACK (app_window_update_autosave), self);
  g_signal_group_connect_swapped (self->document_signals, "notify::modified",
                                  G_CALLBACK (app_window_update_autosave), self);
}

AppWindow *
app_window_new (GtkApplication *application)
{
  return g_object_new (APP_TYPE_WINDOW, "application", application, NULL);
}
