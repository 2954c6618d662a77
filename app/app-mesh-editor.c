#define G_LOG_DOMAIN "app-mesh-editor"
#include "config.h"

#include "app-mesh-editor.h"

#include <glib/gi18n.h>

#include "planner-mesh.h"

struct _AppMeshEditor
{
  GtkWidget parent_instance;
  GtkListBox *axes;
  GtkLabel *devices;
  GtkLabel *error;
  guint64 n_devices;
};

G_DEFINE_FINAL_TYPE (AppMeshEditor, app_mesh_editor, GTK_TYPE_WIDGET)

enum
{
  PROP_0,
  PROP_MESH,
  PROP_N_DEVICES,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

char *
app_mesh_editor_dup_mesh (AppMeshEditor *self)
{
  g_return_val_if_fail (APP_IS_MESH_EDITOR (self), NULL);
  GString *s = g_string_new (NULL);
  for (GtkWidget *row = gtk_widget_get_first_child (GTK_WIDGET (self->axes)); row;
       row = gtk_widget_get_next_sibling (row))
    {
      GtkEditable *name = g_object_get_data (G_OBJECT (row), "name");
      GtkSpinButton *size = g_object_get_data (G_OBJECT (row), "size");
      if (name == NULL)
        continue;
      g_string_append_printf (s, "%s%s=%d", s->len ? "," : "", gtk_editable_get_text (name),
                              gtk_spin_button_get_value_as_int (size));
    }
  return g_string_free (s, FALSE);
}

static void
validate (AppMeshEditor *self)
{
  g_autofree char *text = app_mesh_editor_dup_mesh (self);
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerMesh) mesh = *text ? planner_mesh_parse (text, &error) : NULL;
  self->n_devices = mesh ? planner_mesh_n_devices (mesh) : 0;
  if (mesh)
    {
      g_autofree char *count = g_strdup_printf ("%" G_GUINT64_FORMAT, self->n_devices);
      g_autofree char *label = g_strdup_printf (
          g_dngettext (GETTEXT_PACKAGE, "%s device", "%s devices", (gulong) MIN (self->n_devices, G_MAXULONG)),
          count);
      gtk_label_set_text (self->devices, label);
    }
  else
    gtk_label_set_text (self->devices, "");
  gtk_label_set_text (self->error, error ? error->message : *text ? "" : _("Add at least one axis"));
  gtk_widget_set_visible (GTK_WIDGET (self->error), mesh == NULL);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_MESH]);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_DEVICES]);
}

static void
remove_row (GtkButton *button, AppMeshEditor *self)
{
  GtkWidget *row = gtk_widget_get_ancestor (GTK_WIDGET (button), GTK_TYPE_LIST_BOX_ROW);
  gtk_list_box_remove (self->axes, row);
  validate (self);
}

static void
add_axis (AppMeshEditor *self, const char *name, guint size)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_widget_set_margin_start (box, 6);
  gtk_widget_set_margin_end (box, 6);
  gtk_widget_set_margin_top (box, 3);
  gtk_widget_set_margin_bottom (box, 3);
  GtkWidget *entry = gtk_entry_new ();
  gtk_editable_set_text (GTK_EDITABLE (entry), name);
  gtk_widget_set_hexpand (entry, TRUE);
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Axis name"), -1);
  GtkWidget *spin = gtk_spin_button_new_with_range (1, 4096, 1);
  gtk_spin_button_set_value (GTK_SPIN_BUTTON (spin), size);
  gtk_accessible_update_property (GTK_ACCESSIBLE (spin), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Axis size"), -1);
  GtkWidget *remove = gtk_button_new_from_icon_name ("list-remove-symbolic");
  gtk_widget_set_tooltip_text (remove, _("Remove the Axis"));
  gtk_widget_add_css_class (remove, "flat");
  gtk_box_append (GTK_BOX (box), entry);
  gtk_box_append (GTK_BOX (box), spin);
  gtk_box_append (GTK_BOX (box), remove);
  GtkWidget *row = gtk_list_box_row_new ();
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), FALSE);
  gtk_list_box_row_set_child (GTK_LIST_BOX_ROW (row), box);
  g_object_set_data (G_OBJECT (row), "name", entry);
  g_object_set_data (G_OBJECT (row), "size", spin);
  g_signal_connect_swapped (entry, "changed", G_CALLBACK (validate), self);
  g_signal_connect_swapped (spin, "value-changed", G_CALLBACK (validate), self);
  g_signal_connect (remove, "clicked", G_CALLBACK (remove_row), self);
  gtk_list_box_append (self->axes, row);
}

static void
on_add (AppMeshEditor *self)
{
  static const char *names[] = { "dp", "mp", "pp", "sp", "ep" };
  guint n = 0;
  for (GtkWidget *row = gtk_widget_get_first_child (GTK_WIDGET (self->axes)); row;
       row = gtk_widget_get_next_sibling (row))
    n++;
  g_autofree char *name = n < G_N_ELEMENTS (names) ? g_strdup (names[n])
                                                   : g_strdup_printf ("a%u", n);
  add_axis (self, name, 2);
  validate (self);
}

void
app_mesh_editor_set_mesh (AppMeshEditor *self, const char *text)
{
  g_return_if_fail (APP_IS_MESH_EDITOR (self));
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->axes))))
    gtk_list_box_remove (self->axes, child);
  g_autoptr (PlannerMesh) mesh = text ? planner_mesh_parse (text, NULL) : NULL;
  for (guint a = 0; mesh && a < mesh->n_axes; a++)
    add_axis (self, mesh->names[a], mesh->sizes[a]);
  validate (self);
}

guint64
app_mesh_editor_get_n_devices (AppMeshEditor *self)
{
  g_return_val_if_fail (APP_IS_MESH_EDITOR (self), 0);
  return self->n_devices;
}

GtkWidget *
app_mesh_editor_new (void)
{
  return g_object_new (APP_TYPE_MESH_EDITOR, NULL);
}

static void
app_mesh_editor_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppMeshEditor *self = APP_MESH_EDITOR (object);
  switch (prop_id)
    {
    case PROP_MESH: g_value_take_string (value, app_mesh_editor_dup_mesh (self)); break;
    case PROP_N_DEVICES: g_value_set_uint64 (value, self->n_devices); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_mesh_editor_set_property (GObject *object, guint prop_id, const GValue *value,
                              GParamSpec *pspec)
{
  switch (prop_id)
    {
    case PROP_MESH: app_mesh_editor_set_mesh (APP_MESH_EDITOR (object), g_value_get_string (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_mesh_editor_dispose (GObject *object)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (object))))
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (app_mesh_editor_parent_class)->dispose (object);
}

static void
app_mesh_editor_class_init (AppMeshEditorClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->dispose = app_mesh_editor_dispose;
  object_class->get_property = app_mesh_editor_get_property;
  object_class->set_property = app_mesh_editor_set_property;
  properties[PROP_MESH] = g_param_spec_string ("mesh", NULL, NULL, NULL,
                                               G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS
                                                   | G_PARAM_EXPLICIT_NOTIFY);
  properties[PROP_N_DEVICES] = g_param_spec_uint64 ("n-devices", NULL, NULL, 0, G_MAXUINT64, 0,
                                                    G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  gtk_widget_class_set_layout_manager_type (GTK_WIDGET_CLASS (klass), GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "mesheditor");
}

static void
app_mesh_editor_init (AppMeshEditor *self)
{
  GtkBoxLayout *layout = GTK_BOX_LAYOUT (gtk_widget_get_layout_manager (GTK_WIDGET (self)));
  gtk_orientable_set_orientation (GTK_ORIENTABLE (layout), GTK_ORIENTATION_VERTICAL);
  gtk_box_layout_set_spacing (layout, 6);
  self->axes = GTK_LIST_BOX (gtk_list_box_new ());
  gtk_list_box_set_selection_mode (self->axes, GTK_SELECTION_NONE);
  gtk_widget_add_css_class (GTK_WIDGET (self->axes), "boxed-list");
  gtk_widget_set_parent (GTK_WIDGET (self->axes), GTK_WIDGET (self));
  GtkWidget *bottom = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *add = gtk_button_new_with_mnemonic (_("_Add Axis"));
  g_signal_connect_swapped (add, "clicked", G_CALLBACK (on_add), self);
  self->devices = GTK_LABEL (gtk_label_new (NULL));
  gtk_widget_set_hexpand (GTK_WIDGET (self->devices), TRUE);
  gtk_label_set_xalign (self->devices, 1);
  gtk_widget_add_css_class (GTK_WIDGET (self->devices), "heading");
  gtk_box_append (GTK_BOX (bottom), add);
  gtk_box_append (GTK_BOX (bottom), GTK_WIDGET (self->devices));
  gtk_widget_set_parent (bottom, GTK_WIDGET (self));
  self->error = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->error, TRUE);
  gtk_label_set_xalign (self->error, 0);
  gtk_widget_add_css_class (GTK_WIDGET (self->error), "error");
  gtk_widget_set_parent (GTK_WIDGET (self->error), GTK_WIDGET (self));
  app_mesh_editor_set_mesh (self, "dp=2,mp=4");
}
