#define G_LOG_DOMAIN "app-totals-bar"
#include "config.h"

#include "app-totals-bar.h"

#include <glib/gi18n.h>

struct _AppTotalsBar
{
  AppDocumentView parent_instance;

  GtkLabel *step;
  GtkLabel *compute;
  GtkLabel *comm;
  GtkLabel *collectives;
  GtkLabel *memory;
  GtkLevelBar *memory_bar;
};

G_DEFINE_FINAL_TYPE (AppTotalsBar, app_totals_bar, APP_TYPE_DOCUMENT_VIEW)

static void
set_figure (GtkLabel *label, const char *what, const char *value)
{
  g_autofree char *markup = g_markup_printf_escaped ("<small>%s</small>\n<b>%s</b>", what, value);
  gtk_label_set_markup (label, markup);
}

static void
update (AppDocumentView *view)
{
  AppTotalsBar *self = APP_TOTALS_BAR (view);
  PlannerPlan *plan = app_document_view_get_plan (view);
  gtk_widget_set_visible (GTK_WIDGET (self), plan != NULL);
  if (plan == NULL)
    return;
  const PlannerPlanTotals *t = planner_plan_get_totals (plan);
  const PlannerHardware *hw = planner_plan_get_hardware (plan);

  g_autofree char *step = planner_format_time (t->step_time_s);
  set_figure (self->step, _("Training step"), step);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->step), step);
  g_object_set_data_full (G_OBJECT (self), "step-text", g_strdup (step), g_free);
  /* The breakdown the CLI prints: what the step is made of, and what the backward pass hides. */
  const PlannerStepBreakdown *b = &t->breakdown;
  g_autofree char *fwd = planner_format_time (b->forward);
  g_autofree char *bwd = planner_format_time (b->backward);
  g_autofree char *rec = planner_format_time (b->recompute);
  g_autofree char *tp = planner_format_time (b->tp_comm_exposed);
  g_autofree char *dp = planner_format_time (b->dp_sync_exposed);
  g_autofree char *hidden = planner_format_time (b->dp_sync_hidden);
  g_autofree char *over = planner_format_time (b->overhead);
  g_autofree char *step_tip = g_strdup_printf (
      _("Forward %s, backward %s, recompute %s, tensor-parallel communication %s, gradient sync "
        "%s exposed (%s hidden), overhead %s"),
      fwd, bwd, rec, tp, dp, hidden, over);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->step), step_tip);

  g_autofree char *compute = planner_format_time (t->compute_time_s);
  set_figure (self->compute, _("Compute (forward)"), compute);

  g_autofree char *comm_time = planner_format_time (t->comm_time_s);
  g_autofree char *comm_bytes = planner_format_bytes (t->comm_bytes);
  g_autofree char *comm = g_strdup_printf ("%s · %s", comm_time, comm_bytes);
  set_figure (self->comm, _("Communication (forward)"), comm);
  g_autofree char *backward = planner_format_time (t->backward_comm_time_s);
  g_autofree char *grad = planner_format_time (t->grad_sync_time_s);
  g_autofree char *comm_tip = g_strdup_printf (_("Backward communication %s, gradient sync %s"),
                                               backward, grad);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->comm), comm_tip);

  g_autoptr (GString) coll = g_string_new (NULL);
  for (guint k = 0; k < PLANNER_N_STEP_KINDS; k++)
    {
      if (t->coll_count[k] == 0)
        continue;
      g_autofree char *bytes = planner_format_bytes (t->coll_bytes[k]);
      g_autofree char *time = planner_format_time (t->coll_time_s[k]);
      g_string_append_printf (coll, "%s%s ×%u  %s  %s", coll->len ? "\n" : "",
                              planner_step_kind_to_string (k), t->coll_count[k], bytes, time);
    }
  if (coll->len == 0)
    g_string_append (coll, _("no redistribution"));
  gtk_label_set_text (self->collectives, coll->str);

  guint64 capacity = planner_hardware_memory_bytes (hw);
  guint64 total = t->memory.total;
  g_autofree char *used = planner_format_bytes (total);
  g_autofree char *cap = planner_format_bytes (capacity);
  double fraction = capacity ? (double) total / capacity : 0;
  /* A plan that cannot fit says so in words, not only in colour. */
  g_autofree char *mem = g_strdup_printf (fraction > 1.0 ? _("%s of %s: does not fit")
                                                         : _("%s of %s"),
                                          used, cap);
  set_figure (self->memory, _("Memory per device"), mem);
  gtk_level_bar_set_value (self->memory_bar, MIN (fraction, 1.0));
  if (fraction > 1.0)
    gtk_widget_add_css_class (GTK_WIDGET (self->memory), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->memory), "error");
  g_autofree char *params = planner_format_bytes (t->memory.parameters);
  g_autofree char *grads = planner_format_bytes (t->memory.gradients);
  g_autofree char *opt = planner_format_bytes (t->memory.optimizer);
  g_autofree char *acts = planner_format_bytes (t->memory.activations);
  g_autofree char *loss = planner_format_bytes (t->memory.loss);
  g_autofree char *buffers = planner_format_bytes (t->memory.buffers);
  /* The loss path's temporaries and ZeRO's buckets are in the total too (issue 12). */
  g_autofree char *mem_tip = g_strdup_printf (
      _("Parameters %s, gradients %s, optimizer states %s, activations %s (one micro-batch), "
        "loss temporaries %s, ZeRO bucket buffers %s"),
      params, grads, opt, acts, loss, buffers);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->memory), mem_tip);
}

const char *
app_totals_bar_get_step_text (AppTotalsBar *self)
{
  g_return_val_if_fail (APP_IS_TOTALS_BAR (self), NULL);
  return g_object_get_data (G_OBJECT (self), "step-text");
}

char *
app_totals_bar_dup_text (AppTotalsBar *self)
{
  g_return_val_if_fail (APP_IS_TOTALS_BAR (self), NULL);
  return g_strjoin ("\n", gtk_label_get_text (self->step), gtk_label_get_text (self->compute),
                    gtk_label_get_text (self->comm), gtk_label_get_text (self->collectives),
                    gtk_label_get_text (self->memory), NULL);
}

GtkWidget *
app_totals_bar_new (void)
{
  return g_object_new (APP_TYPE_TOTALS_BAR, NULL);
}

static void
app_totals_bar_dispose (GObject *object)
{
  AppTotalsBar *self = APP_TOTALS_BAR (object);
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self))))
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (app_totals_bar_parent_class)->dispose (object);
}

static void
app_totals_bar_class_init (AppTotalsBarClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_totals_bar_dispose;
  APP_DOCUMENT_VIEW_CLASS (klass)->document_changed = update;
  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BOX_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "totalsbar");
}

static GtkLabel *
add_label (AppTotalsBar *self)
{
  GtkWidget *label = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  /* Narrow windows cut figures short rather than push the graph aside. */
  gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
  gtk_widget_add_css_class (label, "numeric");
  gtk_widget_set_parent (label, GTK_WIDGET (self));
  return GTK_LABEL (label);
}

static void
app_totals_bar_init (AppTotalsBar *self)
{
  GtkBoxLayout *layout = GTK_BOX_LAYOUT (gtk_widget_get_layout_manager (GTK_WIDGET (self)));
  gtk_box_layout_set_spacing (layout, 18);
  gtk_widget_set_margin_start (GTK_WIDGET (self), 12);
  gtk_widget_set_margin_end (GTK_WIDGET (self), 12);
  gtk_widget_set_margin_top (GTK_WIDGET (self), 6);
  gtk_widget_set_margin_bottom (GTK_WIDGET (self), 6);
  self->step = add_label (self);
  self->compute = add_label (self);
  self->comm = add_label (self);
  self->collectives = add_label (self);
  gtk_widget_add_css_class (GTK_WIDGET (self->collectives), "caption");
  gtk_widget_set_hexpand (GTK_WIDGET (self->collectives), TRUE);
  self->memory = add_label (self);
  self->memory_bar = GTK_LEVEL_BAR (gtk_level_bar_new_for_interval (0, 1));
  gtk_level_bar_add_offset_value (self->memory_bar, GTK_LEVEL_BAR_OFFSET_LOW, 0.75);
  gtk_level_bar_add_offset_value (self->memory_bar, GTK_LEVEL_BAR_OFFSET_HIGH, 0.9);
  gtk_level_bar_add_offset_value (self->memory_bar, GTK_LEVEL_BAR_OFFSET_FULL, 1.0);
  gtk_widget_set_size_request (GTK_WIDGET (self->memory_bar), 80, -1);
  gtk_widget_set_valign (GTK_WIDGET (self->memory_bar), GTK_ALIGN_CENTER);
  gtk_widget_set_parent (GTK_WIDGET (self->memory_bar), GTK_WIDGET (self));
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::plan", G_CALLBACK (update));
  gtk_widget_set_visible (GTK_WIDGET (self), FALSE);
}
