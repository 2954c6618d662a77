#define G_LOG_DOMAIN "app-trial-results"
#include "config.h"

#include "app-trial-results.h"

#include <glib/gi18n.h>

/* Rows beyond these are the long tail nobody reads in an overlay. */
#define MAX_ROWS 12

struct _AppTrialResults
{
  GtkWidget parent_instance;
  GtkLabel *title;
  GtkLabel *body;
};

G_DEFINE_FINAL_TYPE (AppTrialResults, app_trial_results, GTK_TYPE_WIDGET)

static int
by_measured (gconstpointer a, gconstpointer b)
{
  const ExecutorTiming *x = *(ExecutorTiming **) a, *y = *(ExecutorTiming **) b;
  return x->measured_s < y->measured_s ? 1 : x->measured_s > y->measured_s ? -1 : 0;
}

void
app_trial_results_set_result (AppTrialResults *self, const ExecutorTrialResult *result,
                              const AppTrialTrain *train)
{
  g_return_if_fail (APP_IS_TRIAL_RESULTS (self));
  /* Whether the card shows is its "visible", which the window binds ("show-trial-results"). */
  if (result == NULL)
    {
      gtk_label_set_text (self->title, "");
      gtk_label_set_text (self->body, "");
      return;
    }
  g_autofree char *title = g_markup_printf_escaped (
      "%s <b>%s</b> · %s, %u devices",
      result->passed ? "✔" : "✘", result->passed ? _("Trial run matches") : _("Trial run differs"),
      result->backend, result->n_devices);
  gtk_label_set_markup (self->title, title);

  g_autoptr (GString) s = g_string_new (NULL);
  g_autofree char *est = planner_format_time (result->estimated_step_s);
  g_autofree char *meas = planner_format_time (result->measured_step_s);
  g_string_append_printf (s, _("Max error: %.3g absolute, %.3g relative\n"), result->max_abs_error,
                          result->max_rel_error);
  g_string_append_printf (s, _("Forward: estimated %s, measured %s\n"), est, meas);
  if (result->mismatch)
    g_string_append_printf (s, "%s\n", result->mismatch);
  if (train)
    {
      g_string_append_printf (s, _("Training step (%s): %s\n"), train->adam ? "adam" : "sgd",
                              train->passed ? _("matches") : _("differs"));
      g_string_append_printf (s, _("  loss %.6g, rel error %.3g\n"), train->loss,
                              train->loss_rel_error);
      g_string_append_printf (s, _("  gradients: max rel error %.3g (%s)\n"),
                              train->grad_rel_error, train->grad_worst ? train->grad_worst : "-");
      g_string_append_printf (s, _("  updated weights: max rel error %.3g\n"),
                              train->updated_rel_error);
    }
  g_autoptr (GPtrArray) all = g_ptr_array_new ();
  for (guint i = 0; i < result->ops->len; i++)
    g_ptr_array_add (all, &g_array_index (result->ops, ExecutorTiming, i));
  for (guint i = 0; i < result->redistributions->len; i++)
    g_ptr_array_add (all, &g_array_index (result->redistributions, ExecutorTiming, i));
  g_ptr_array_sort (all, by_measured);
  g_string_append (s, _("\nSlowest (measured / estimated):"));
  for (guint i = 0; i < all->len && i < MAX_ROWS; i++)
    {
      const ExecutorTiming *t = g_ptr_array_index (all, i);
      g_autofree char *m = planner_format_time (t->measured_s);
      g_autofree char *e = planner_format_time (t->estimated_s);
      g_string_append_printf (s, "\n%s  %s / %s  %s", m, e, "", t->name);
    }
  gtk_label_set_text (self->body, s->str);
}

GtkWidget *
app_trial_results_new (void)
{
  return g_object_new (APP_TYPE_TRIAL_RESULTS, NULL);
}

static void
on_close (AppTrialResults *self)
{
  gtk_widget_set_visible (GTK_WIDGET (self), FALSE);
}

static void
app_trial_results_dispose (GObject *object)
{
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (object))))
    gtk_widget_unparent (child);
  G_OBJECT_CLASS (app_trial_results_parent_class)->dispose (object);
}

static void
app_trial_results_class_init (AppTrialResultsClass *klass)
{
  G_OBJECT_CLASS (klass)->dispose = app_trial_results_dispose;
  gtk_widget_class_set_layout_manager_type (GTK_WIDGET_CLASS (klass), GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (GTK_WIDGET_CLASS (klass), "trialresults");
}

static void
app_trial_results_init (AppTrialResults *self)
{
  GtkWidget *box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 6);
  gtk_widget_add_css_class (box, "card");
  gtk_widget_add_css_class (box, "osd");
  gtk_widget_set_size_request (box, 360, -1);
  GtkWidget *head = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  gtk_widget_set_margin_start (head, 12);
  gtk_widget_set_margin_top (head, 6);
  gtk_widget_set_margin_end (head, 6);
  self->title = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_xalign (self->title, 0);
  gtk_widget_set_hexpand (GTK_WIDGET (self->title), TRUE);
  gtk_box_append (GTK_BOX (head), GTK_WIDGET (self->title));
  GtkWidget *close = gtk_button_new_from_icon_name ("window-close-symbolic");
  gtk_widget_add_css_class (close, "flat");
  gtk_widget_add_css_class (close, "circular");
  gtk_widget_set_tooltip_text (close, _("Hide the Results"));
  g_signal_connect_swapped (close, "clicked", G_CALLBACK (on_close), self);
  gtk_box_append (GTK_BOX (head), close);
  gtk_box_append (GTK_BOX (box), head);
  self->body = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_xalign (self->body, 0);
  gtk_label_set_selectable (self->body, TRUE);
  gtk_label_set_ellipsize (self->body, PANGO_ELLIPSIZE_END);
  gtk_widget_add_css_class (GTK_WIDGET (self->body), "monospace");
  gtk_widget_add_css_class (GTK_WIDGET (self->body), "caption");
  gtk_widget_set_margin_start (GTK_WIDGET (self->body), 12);
  gtk_widget_set_margin_end (GTK_WIDGET (self->body), 12);
  gtk_widget_set_margin_bottom (GTK_WIDGET (self->body), 12);
  gtk_box_append (GTK_BOX (box), GTK_WIDGET (self->body));
  gtk_widget_set_parent (box, GTK_WIDGET (self));
}
