#define G_LOG_DOMAIN "app-sidebar"
#include "config.h"

#include "app-sidebar.h"

#include <glib/gi18n.h>

struct _AppSidebar
{
  GtkWidget parent_instance;

  GtkSearchEntry *search_entry;
  GtkStack *stack;
  GtkListBox *list;
  GtkLabel *store_label;

  PlannerStore *store;
  GPtrArray *entries;   /* PlannerStoreEntry*, sorted by model then newest first */
  GHashTable *hidden;   /* gint64* ids pending deletion */
  gint64 current_id;
  GCancellable *cancellable;
};

G_DEFINE_FINAL_TYPE (AppSidebar, app_sidebar, GTK_TYPE_WIDGET)

enum
{
  PROP_0,
  PROP_STORE,
  PROP_CURRENT_ID,
  N_PROPS
};

enum
{
  SIGNAL_PLAN_ACTIVATED,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

static const PlannerStoreEntry *
row_entry (GtkListBoxRow *row)
{
  return g_object_get_data (G_OBJECT (row), "entry");
}

static gboolean
filter_row (GtkListBoxRow *row, gpointer data)
{
  AppSidebar *self = data;
  const PlannerStoreEntry *e = row_entry (row);
  if (g_hash_table_contains (self->hidden, &e->id))
    return FALSE;
  const char *text = gtk_editable_get_text (GTK_EDITABLE (self->search_entry));
  if (*text == '\0')
    return TRUE;
  g_autofree char *needle = g_utf8_casefold (text, -1);
  g_autofree char *hay = g_strjoin (" ", e->name, e->model ? e->model : "", e->mesh ? e->mesh : "",
                                    e->hardware ? e->hardware : "", e->policy ? e->policy : "",
                                    NULL);
  g_autofree char *folded = g_utf8_casefold (hay, -1);
  return strstr (folded, needle) != NULL;
}

/* A heading above the first plan of each model. */
static void
header_func (GtkListBoxRow *row, GtkListBoxRow *before, gpointer data)
{
  const PlannerStoreEntry *e = row_entry (row);
  const PlannerStoreEntry *b = before ? row_entry (before) : NULL;
  if (b && g_strcmp0 (b->model_source, e->model_source) == 0)
    {
      gtk_list_box_row_set_header (row, NULL);
      return;
    }
  GtkWidget *label = gtk_label_new (e->model);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_widget_set_tooltip_text (label, e->model_source);
  gtk_widget_add_css_class (label, "heading");
  gtk_widget_set_margin_start (label, 6);
  gtk_widget_set_margin_top (label, 12);
  gtk_widget_set_margin_bottom (label, 3);
  gtk_list_box_row_set_header (row, label);
}

static GtkWidget *
make_row (AppSidebar *self, const PlannerStoreEntry *e)
{
  GtkWidget *row = gtk_list_box_row_new ();
  g_object_set_data (G_OBJECT (row), "entry", (gpointer) e);
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *text = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  gtk_widget_set_hexpand (text, TRUE);
  GtkWidget *name = gtk_label_new (e->name);
  gtk_label_set_xalign (GTK_LABEL (name), 0);
  gtk_label_set_ellipsize (GTK_LABEL (name), PANGO_ELLIPSIZE_END);
  g_autofree char *step = planner_format_time (e->totals.step_time_s);
  g_autofree char *sub = g_strdup_printf ("%s · %s · %s%s", e->mesh, e->policy ? e->policy : _("no policy"),
                                          step, e->n_trial_runs ? " · ✓" : "");
  GtkWidget *subtitle = gtk_label_new (sub);
  gtk_label_set_xalign (GTK_LABEL (subtitle), 0);
  gtk_label_set_ellipsize (GTK_LABEL (subtitle), PANGO_ELLIPSIZE_END);
  gtk_widget_add_css_class (subtitle, "caption");
  gtk_widget_add_css_class (subtitle, "dim-label");
  gtk_box_append (GTK_BOX (text), name);
  gtk_box_append (GTK_BOX (text), subtitle);
  g_autofree char *created = NULL;
  g_autoptr (GDateTime) dt = g_date_time_new_from_unix_local (e->created / G_USEC_PER_SEC);
  created = dt ? g_date_time_format (dt, "%x %X") : g_strdup ("");
  g_autofree char *tip = g_strdup_printf (
      _("%s\nhardware %s · %u pins · %u trial runs · saved %s%s%s"), e->name, e->hardware,
      e->n_pins, e->n_trial_runs, created, e->parent_name ? _(" · from ") : "",
      e->parent_name ? e->parent_name : "");
  gtk_widget_set_tooltip_text (text, tip);
  gtk_box_append (GTK_BOX (box), text);

  /* The row's menu: each item an action on this plan's id. */
  static const struct
  {
    const char *label;
    const char *action;
  } items[] = {
    { N_("_Rename…"), "sidebar.rename" },
    { N_("_Duplicate"), "win.duplicate-plan" },
    { N_("_Compare With Current"), "win.compare-stored" },
    { N_("De_lete"), "win.delete-plan" },
  };
  g_autoptr (GMenu) menu = g_menu_new ();
  for (guint i = 0; i < G_N_ELEMENTS (items); i++)
    {
      g_autoptr (GMenuItem) item = g_menu_item_new (_(items[i].label), NULL);
      g_menu_item_set_action_and_target_value (item, items[i].action, g_variant_new_int64 (e->id));
      g_menu_append_item (menu, item);
    }
  GtkWidget *button = gtk_menu_button_new ();
  gtk_menu_button_set_icon_name (GTK_MENU_BUTTON (button), "view-more-symbolic");
  gtk_menu_button_set_menu_model (GTK_MENU_BUTTON (button), G_MENU_MODEL (menu));
  gtk_widget_add_css_class (button, "flat");
  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (button, _("Plan Actions"));
  gtk_box_append (GTK_BOX (box), button);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), box);
  return row;
}

static int
compare_entries (gconstpointer a, gconstpointer b)
{
  const PlannerStoreEntry *x = *(PlannerStoreEntry **) a, *y = *(PlannerStoreEntry **) b;
  int c = g_strcmp0 (x->model, y->model);
  if (c == 0)
    c = g_strcmp0 (x->model_source, y->model_source);
  if (c == 0)
    c = x->created > y->created ? -1 : x->created < y->created ? 1 : 0;
  return c;
}

/* Rows point into the entries: remove them before the entries go. */
static void
set_entries (AppSidebar *self, GPtrArray *entries)
{
  GtkWidget *child;
  while (self->list && (child = gtk_widget_get_first_child (GTK_WIDGET (self->list))))
    gtk_list_box_remove (self->list, child);
  g_clear_pointer (&self->entries, g_ptr_array_unref);
  self->entries = entries;
}

static void
populate (AppSidebar *self)
{
  for (guint i = 0; self->entries && i < self->entries->len; i++)
    {
      const PlannerStoreEntry *e = g_ptr_array_index (self->entries, i);
      GtkWidget *row = make_row (self, e);
      gtk_list_box_append (self->list, row);
      if (e->id == self->current_id)
        gtk_list_box_select_row (self->list, GTK_LIST_BOX_ROW (row));
    }
  gtk_stack_set_visible_child_name (self->stack, app_sidebar_get_n_visible (self) ? "list"
                                                                                  : "empty");
}

static void
list_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  GError *error = NULL;
  GPtrArray *entries = planner_store_list_plans (PLANNER_STORE (task_data), &error);
  if (entries)
    g_task_return_pointer (task, entries, (GDestroyNotify) g_ptr_array_unref);
  else
    g_task_return_error (task, error);
}

static void
list_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  g_autoptr (GError) error = NULL;
  GPtrArray *entries = g_task_propagate_pointer (G_TASK (result), &error);
  if (entries == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_warning ("listing the plan store: %s", error->message);
      return;
    }
  AppSidebar *self = APP_SIDEBAR (source);
  g_ptr_array_sort (entries, compare_entries);
  set_entries (self, entries);
  populate (self);
}

void
app_sidebar_reload (AppSidebar *self)
{
  g_return_if_fail (APP_IS_SIDEBAR (self));
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  if (self->store == NULL)
    {
      set_entries (self, NULL);
      populate (self);
      return;
    }
  self->cancellable = g_cancellable_new ();
  g_autoptr (GTask) task = g_task_new (self, self->cancellable, list_done, NULL);
  g_task_set_source_tag (task, app_sidebar_reload);
  g_task_set_task_data (task, g_object_ref (self->store), g_object_unref);
  g_task_set_return_on_cancel (task, TRUE);
  g_task_run_in_thread (task, list_thread);
}

void
app_sidebar_set_hidden (AppSidebar *self, gint64 id, gboolean hidden)
{
  g_return_if_fail (APP_IS_SIDEBAR (self));
  if (hidden)
    {
      gint64 *key = g_new (gint64, 1);
      *key = id;
      g_hash_table_add (self->hidden, key);
    }
  else
    g_hash_table_remove (self->hidden, &id);
  gtk_list_box_invalidate_filter (self->list);
  gtk_list_box_invalidate_headers (self->list);
  gtk_stack_set_visible_child_name (self->stack, app_sidebar_get_n_visible (self) ? "list"
                                                                                  : "empty");
}

void
app_sidebar_set_current_id (AppSidebar *self, gint64 id)
{
  g_return_if_fail (APP_IS_SIDEBAR (self));
  self->current_id = id;
  gtk_list_box_unselect_all (self->list);
  for (GtkWidget *row = gtk_widget_get_first_child (GTK_WIDGET (self->list)); row;
       row = gtk_widget_get_next_sibling (row))
    if (GTK_IS_LIST_BOX_ROW (row) && row_entry (GTK_LIST_BOX_ROW (row))->id == id)
      gtk_list_box_select_row (self->list, GTK_LIST_BOX_ROW (row));
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_CURRENT_ID]);
}

guint
app_sidebar_get_n_visible (AppSidebar *self)
{
  g_return_val_if_fail (APP_IS_SIDEBAR (self), 0);
  guint n = 0;
  for (GtkWidget *row = gtk_widget_get_first_child (GTK_WIDGET (self->list)); row;
       row = gtk_widget_get_next_sibling (row))
    if (GTK_IS_LIST_BOX_ROW (row) && filter_row (GTK_LIST_BOX_ROW (row), self))
      n++;
  return n;
}

const PlannerStoreEntry *
app_sidebar_get_entry (AppSidebar *self, gint64 id)
{
  g_return_val_if_fail (APP_IS_SIDEBAR (self), NULL);
  for (guint i = 0; self->entries && i < self->entries->len; i++)
    {
      const PlannerStoreEntry *e = g_ptr_array_index (self->entries, i);
      if (e->id == id)
        return e;
    }
  return NULL;
}

GPtrArray *
app_sidebar_get_entries (AppSidebar *self)
{
  g_return_val_if_fail (APP_IS_SIDEBAR (self), NULL);
  return self->entries;
}

void
app_sidebar_set_search (AppSidebar *self, const char *text)
{
  g_return_if_fail (APP_IS_SIDEBAR (self));
  gtk_editable_set_text (GTK_EDITABLE (self->search_entry), text ? text : "");
}

static void
on_search_changed (AppSidebar *self)
{
  gtk_list_box_invalidate_filter (self->list);
  gtk_list_box_invalidate_headers (self->list);
}

static void
on_row_activated (AppSidebar *self, GtkListBoxRow *row)
{
  g_signal_emit (self, signals[SIGNAL_PLAN_ACTIVATED], 0, row_entry (row)->id);
}

static void
rename_response (AdwMessageDialog *dialog, const char *response, AppSidebar *self)
{
  if (g_strcmp0 (response, "rename") != 0)
    return;
  GtkEditable *entry = GTK_EDITABLE (adw_message_dialog_get_extra_child (dialog));
  gint64 id = GPOINTER_TO_SIZE (g_object_get_data (G_OBJECT (dialog), "plan-id"));
  gtk_widget_activate_action (GTK_WIDGET (self), "win.rename-plan", "(xs)", id,
                              gtk_editable_get_text (entry));
}

static void
action_rename (GtkWidget *widget, const char *name, GVariant *param)
{
  AppSidebar *self = APP_SIDEBAR (widget);
  gint64 id = g_variant_get_int64 (param);
  const PlannerStoreEntry *e = app_sidebar_get_entry (self, id);
  if (e == NULL)
    return;
  GtkRoot *root = gtk_widget_get_root (widget);
  GtkWidget *dialog = adw_message_dialog_new (GTK_WINDOW (root), _("Rename Plan"), NULL);
  GtkWidget *entry = gtk_entry_new ();
  gtk_editable_set_text (GTK_EDITABLE (entry), e->name);
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  adw_message_dialog_set_extra_child (ADW_MESSAGE_DIALOG (dialog), entry);
  adw_message_dialog_add_responses (ADW_MESSAGE_DIALOG (dialog), "cancel", _("_Cancel"),
                                    "rename", _("_Rename"), NULL);
  adw_message_dialog_set_response_appearance (ADW_MESSAGE_DIALOG (dialog), "rename",
                                              ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (ADW_MESSAGE_DIALOG (dialog), "rename");
  g_object_set_data (G_OBJECT (dialog), "plan-id", GSIZE_TO_POINTER ((gsize) id));
  g_signal_connect (dialog, "response", G_CALLBACK (rename_response), self);
  gtk_window_present (GTK_WINDOW (dialog));
}

GtkWidget *
app_sidebar_new (void)
{
  return g_object_new (APP_TYPE_SIDEBAR, NULL);
}

PlannerStore *
app_sidebar_get_store (AppSidebar *self)
{
  g_return_val_if_fail (APP_IS_SIDEBAR (self), NULL);
  return self->store;
}

void
app_sidebar_set_store (AppSidebar *self, PlannerStore *store)
{
  g_return_if_fail (APP_IS_SIDEBAR (self));
  if (!g_set_object (&self->store, store))
    return;
  gtk_label_set_text (self->store_label, store ? planner_store_get_path (store) : "");
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->store_label),
                               store ? planner_store_get_path (store) : NULL);
  g_hash_table_remove_all (self->hidden);
  app_sidebar_reload (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_STORE]);
}

static void
app_sidebar_dispose (GObject *object)
{
  AppSidebar *self = APP_SIDEBAR (object);
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  set_entries (self, NULL);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_SIDEBAR);
  /* The template's root has no id, so disposing the template leaves it parented. */
  GtkWidget *root;
  while ((root = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (root);
  g_clear_pointer (&self->hidden, g_hash_table_unref);
  g_clear_object (&self->store);
  G_OBJECT_CLASS (app_sidebar_parent_class)->dispose (object);
}

static void
app_sidebar_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppSidebar *self = APP_SIDEBAR (object);
  switch (prop_id)
    {
    case PROP_STORE: g_value_set_object (value, self->store); break;
    case PROP_CURRENT_ID: g_value_set_int64 (value, self->current_id); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_sidebar_set_property (GObject *object, guint prop_id, const GValue *value,
                          GParamSpec *pspec)
{
  AppSidebar *self = APP_SIDEBAR (object);
  switch (prop_id)
    {
    case PROP_STORE: app_sidebar_set_store (self, g_value_get_object (value)); break;
    case PROP_CURRENT_ID: app_sidebar_set_current_id (self, g_value_get_int64 (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_sidebar_class_init (AppSidebarClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_sidebar_dispose;
  object_class->get_property = app_sidebar_get_property;
  object_class->set_property = app_sidebar_set_property;
  GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  properties[PROP_STORE] = g_param_spec_object ("store", NULL, NULL, PLANNER_TYPE_STORE, rw);
  properties[PROP_CURRENT_ID] = g_param_spec_int64 ("current-id", NULL, NULL, 0, G_MAXINT64, 0,
                                                    rw);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  signals[SIGNAL_PLAN_ACTIVATED] = g_signal_new ("plan-activated", G_TYPE_FROM_CLASS (klass),
                                                 G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                                                 G_TYPE_NONE, 1, G_TYPE_INT64);
  gtk_widget_class_install_action (widget_class, "sidebar.rename", "x", action_rename);
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "plansidebar");
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/shardscope/Shardscope/app-sidebar.ui");
  gtk_widget_class_bind_template_child (widget_class, AppSidebar, search_entry);
  gtk_widget_class_bind_template_child (widget_class, AppSidebar, stack);
  gtk_widget_class_bind_template_child (widget_class, AppSidebar, list);
  gtk_widget_class_bind_template_child (widget_class, AppSidebar, store_label);
}

static void
app_sidebar_init (AppSidebar *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->hidden = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  gtk_list_box_set_filter_func (self->list, filter_row, self, NULL);
  gtk_list_box_set_header_func (self->list, header_func, self, NULL);
  g_signal_connect_swapped (self->search_entry, "search-changed", G_CALLBACK (on_search_changed),
                            self);
  g_signal_connect_swapped (self->list, "row-activated", G_CALLBACK (on_row_activated), self);
  gtk_stack_set_visible_child_name (self->stack, "empty");
}
