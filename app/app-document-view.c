#define G_LOG_DOMAIN "app-document-view"
#include "config.h"

#include "app-document-view.h"

typedef struct
{
  AppDocument *document;
  GSignalGroup *signals;
} AppDocumentViewPrivate;

G_DEFINE_ABSTRACT_TYPE_WITH_PRIVATE (AppDocumentView, app_document_view, GTK_TYPE_WIDGET)

enum
{
  PROP_0,
  PROP_DOCUMENT,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

AppDocument *
app_document_view_get_document (AppDocumentView *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT_VIEW (self), NULL);
  AppDocumentViewPrivate *priv = app_document_view_get_instance_private (self);
  return priv->document;
}

void
app_document_view_set_document (AppDocumentView *self, AppDocument *document)
{
  g_return_if_fail (APP_IS_DOCUMENT_VIEW (self));
  g_return_if_fail (document == NULL || APP_IS_DOCUMENT (document));
  AppDocumentViewPrivate *priv = app_document_view_get_instance_private (self);
  if (!g_set_object (&priv->document, document))
    return;
  g_signal_group_set_target (priv->signals, document);
  APP_DOCUMENT_VIEW_GET_CLASS (self)->document_changed (self);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_DOCUMENT]);
}

PlannerPlan *
app_document_view_get_plan (AppDocumentView *self)
{
  g_return_val_if_fail (APP_IS_DOCUMENT_VIEW (self), NULL);
  AppDocumentViewPrivate *priv = app_document_view_get_instance_private (self);
  return priv->document ? app_document_get_plan (priv->document) : NULL;
}

void
app_document_view_follow (AppDocumentView *self, const char *detailed_signal, GCallback callback)
{
  g_return_if_fail (APP_IS_DOCUMENT_VIEW (self));
  AppDocumentViewPrivate *priv = app_document_view_get_instance_private (self);
  g_signal_group_connect_swapped (priv->signals, detailed_signal, callback, self);
}

static void
app_document_view_real_document_changed (AppDocumentView *self)
{
}

static void
app_document_view_dispose (GObject *object)
{
  AppDocumentView *self = APP_DOCUMENT_VIEW (object);
  AppDocumentViewPrivate *priv = app_document_view_get_instance_private (self);
  if (priv->signals)
    g_signal_group_set_target (priv->signals, NULL);
  g_clear_object (&priv->signals);
  g_clear_object (&priv->document);
  /* A template root without an id stays parented when its template is disposed. */
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (app_document_view_parent_class)->dispose (object);
}

static void
app_document_view_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppDocumentView *self = APP_DOCUMENT_VIEW (object);
  switch (prop_id)
    {
    case PROP_DOCUMENT:
      g_value_set_object (value, app_document_view_get_document (self));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_document_view_set_property (GObject *object, guint prop_id, const GValue *value,
                                GParamSpec *pspec)
{
  AppDocumentView *self = APP_DOCUMENT_VIEW (object);
  switch (prop_id)
    {
    case PROP_DOCUMENT:
      app_document_view_set_document (self, g_value_get_object (value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_document_view_class_init (AppDocumentViewClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->dispose = app_document_view_dispose;
  object_class->get_property = app_document_view_get_property;
  object_class->set_property = app_document_view_set_property;
  klass->document_changed = app_document_view_real_document_changed;
  properties[PROP_DOCUMENT]
      = g_param_spec_object ("document", NULL, NULL, APP_TYPE_DOCUMENT,
                             G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
app_document_view_init (AppDocumentView *self)
{
  AppDocumentViewPrivate *priv = app_document_view_get_instance_private (self);
  priv->signals = g_signal_group_new (APP_TYPE_DOCUMENT);
}
