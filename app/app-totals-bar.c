#define G_LOG_DOMAIN "app-totals-bar"
#include "config.h"

#include "app-totals-bar.h"

#include <glib/gi18n.h>

#include "planner-pipeline.h"

struct _AppTotalsBar
{
  AppDocumentView parent_instance;

  GtkLabel *step;
  GtkLabel *compute;
  GtkLabel *comm;
  GtkLabel *collectives;
  GtkWidget *memory_box;
  GtkLabel *memory;
  GtkLevelBar *memory_bar;
  GtkLabel *memory_breakdown;
  GtkLabel *memory_pipeline;
  GtkLabel *memory_extra;
  GtkLabel *memory_reserved;
  gboolean over_budget;
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
  /* Shown while there is a plan: app-window.ui binds "visible" to the window's "has-plan". */
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
  /* The figure is the tensors'; the bar and the fit check are what the device really holds
   * beside them, the reserved total (issue 12): a plan whose tensors fit but whose CUDA
   * context, library buffers and allocator rounding do not is shown as not fitting. */
  double fraction = capacity ? (double)t->memory.reserved_total / capacity : 0;
  self->over_budget = t->memory.reserved_total > capacity;
  /* A plan that cannot fit says so in words, not only in colour. */
  g_autofree char *mem = g_strdup_printf (self->over_budget ? _("%s of %s: does not fit")
                                                            : _("%s of %s"),
                                          used, cap);
  set_figure (self->memory, _("Memory per device"), mem);
  gtk_level_bar_set_value (self->memory_bar, MIN (fraction, 1.0));
  /* Red in the bar itself (app-style.css): the level, the figure and the frame. */
  GtkWidget *red[] = { GTK_WIDGET (self->memory), GTK_WIDGET (self->memory_bar),
                        self->memory_box };
  for (guint i = 0; i < G_N_ELEMENTS (red); i++)
    if (self->over_budget)
      gtk_widget_add_css_class (red[i], i == 0 ? "error" : "over-budget");
    else
      gtk_widget_remove_css_class (red[i], i == 0 ? "error" : "over-budget");

  /* What the total is made of, as `propagate --json` prints it under "memory". */
  g_autofree char *params = planner_format_bytes (t->memory.parameters);
  g_autofree char *grads = planner_format_bytes (t->memory.gradients);
  g_autofree char *opt = planner_format_bytes (t->memory.optimizer);
  g_autofree char *acts = planner_format_bytes (t->memory.activations);
  g_autofree char *loss = planner_format_bytes (t->memory.loss);
  g_autofree char *buffers = planner_format_bytes (t->memory.buffers);
  g_autofree char *breakdown = g_strdup_printf (
      _("Parameters %s · gradients %s · optimizer %s · activations %s"), params, grads, opt,
      acts);
  gtk_label_set_text (self->memory_breakdown, breakdown);
  /* The loss path's temporaries and ZeRO's buckets are in the total too (issue 12): a line
   * of their own when there are any, so the first stays as short as it was. */
  gtk_widget_set_visible (GTK_WIDGET (self->memory_extra),
                          t->memory.loss > 0 || t->memory.buffers > 0);
  g_autofree char *extra
      = t->memory.buffers == 0 ? g_strdup_printf (_("Loss temporaries %s"), loss)
        : t->memory.loss == 0  ? g_strdup_printf (_("ZeRO buckets %s"), buffers)
                               : g_strdup_printf (_("Loss temporaries %s · ZeRO buckets %s"),
                                                  loss, buffers);
  gtk_label_set_text (self->memory_extra, extra);
  guint64 beside = t->memory.reserved_total - MIN (t->memory.reserved_total, total);
  gtk_widget_set_visible (GTK_WIDGET (self->memory_reserved), beside > 0);
  g_autofree char *reserved = planner_format_bytes (t->memory.reserved_total);
  g_autofree char *allocator = planner_format_bytes (t->memory.allocator);
  g_autofree char *context = planner_format_bytes (t->memory.cuda_context);
  g_autofree char *cublas = planner_format_bytes (t->memory.cublas_workspace);
  g_autofree char *nccl = planner_format_bytes (t->memory.nccl_buffers);
  g_autofree char *reserved_text = g_strdup_printf (
      _("Reserved %s: allocator %s · CUDA context %s · cuBLAS %s · NCCL %s"), reserved,
      allocator, context, cublas, nccl);
  gtk_label_set_text (self->memory_reserved, reserved_text);
  g_autofree char *mem_tip = g_strdup_printf (
      _("Parameters %s, gradients %s, optimizer states %s, activations %s (the micro-batches "
        "in flight), loss temporaries %s, ZeRO bucket buffers %s. Reserved as nvidia-smi "
        "counts it, %s: the caching allocator's rounding %s, the CUDA context %s, cuBLAS's "
        "workspace %s, NCCL's buffers %s; the fit check uses it"),
      params, grads, opt, acts, loss, buffers, reserved, allocator, context, cublas, nccl);
  gtk_widget_set_tooltip_text (self->memory_box, mem_tip);

  /* With a pipeline the total is the fullest stage's: say which, and every stage's. The
   * document made the pipeline with the plan, off the GTK thread. */
  const PlannerPipeline *pipeline
      = app_document_get_pipeline (app_document_view_get_document (APP_DOCUMENT_VIEW (self)));
  gtk_widget_set_visible (GTK_WIDGET (self->memory_pipeline), pipeline != NULL);
  if (pipeline)
    {
      guint fullest = 0;
      g_autoptr (GString) stages = g_string_new (NULL);
      for (guint s = 0; s < pipeline->n_stages; s++)
        {
          const PlannerPipelineStage *st = &pipeline->stages[s];
          if (st->memory.total > pipeline->stages[fullest].memory.total)
            fullest = s;
          g_autofree char *b = planner_format_bytes (st->memory.total);
          g_string_append_printf (stages, "%s%s", s ? ", " : "", b);
        }
      g_autofree char *in_flight
          = g_strdup_printf ("%.3g", pipeline->stages[fullest].in_flight);
      g_autofree char *text = g_strdup_printf (
          _("Pipeline of %u stages: stage %u holds the most, %s micro-batches in flight; per "
            "stage %s"),
          pipeline->n_stages, fullest, in_flight, stages->str);
      gtk_label_set_text (self->memory_pipeline, text);
    }
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
  GtkLabel *labels[] = { self->step,   self->compute,          self->comm,
                         self->collectives, self->memory,      self->memory_breakdown,
                         self->memory_reserved, self->memory_pipeline };
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 0; i < G_N_ELEMENTS (labels); i++)
    if (i < 6 || gtk_widget_get_visible (GTK_WIDGET (labels[i])))
      g_string_append_printf (text, "%s%s", i ? "\n" : "", gtk_label_get_text (labels[i]));
  return g_string_free (g_steal_pointer (&text), FALSE);
}

const char *
app_totals_bar_get_memory_reserved (AppTotalsBar *self)
{
  g_return_val_if_fail (APP_IS_TOTALS_BAR (self), NULL);
  return gtk_widget_get_visible (GTK_WIDGET (self->memory_reserved))
             ? gtk_label_get_text (self->memory_reserved)
             : NULL;
}

gboolean
app_totals_bar_get_over_budget (AppTotalsBar *self)
{
  g_return_val_if_fail (APP_IS_TOTALS_BAR (self), FALSE);
  return self->over_budget;
}

GtkLevelBar *
app_totals_bar_get_memory_bar (AppTotalsBar *self)
{
  g_return_val_if_fail (APP_IS_TOTALS_BAR (self), NULL);
  return self->memory_bar;
}

const char *
app_totals_bar_get_memory_breakdown (AppTotalsBar *self)
{
  g_return_val_if_fail (APP_IS_TOTALS_BAR (self), NULL);
  return gtk_label_get_text (self->memory_breakdown);
}

const char *
app_totals_bar_get_memory_pipeline (AppTotalsBar *self)
{
  g_return_val_if_fail (APP_IS_TOTALS_BAR (self), NULL);
  return gtk_widget_get_visible (GTK_WIDGET (self->memory_pipeline))
             ? gtk_label_get_text (self->memory_pipeline)
             : NULL;
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

/* Layout: the figures flow left to right at their natural widths and wrap onto another line
 * where the next one would not fit (GtkFlowBox would put them in columns as wide as the
 * widest figure, one per line here), so none is ever cut short or ellipsized. */
#define FIGURE_SPACING 18
#define LINE_SPACING 6

/* Lays the children out in @width (allocating them when @allocate); returns the height. */
static int
flow (GtkWidget *widget, int width, gboolean allocate)
{
  int x = 0, y = 0, line_height = 0;
  GtkWidget *line_start = NULL;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    {
      if (!gtk_widget_should_layout (c))
        continue;
      int min_w, nat_w;
      gtk_widget_measure (c, GTK_ORIENTATION_HORIZONTAL, -1, &min_w, &nat_w, NULL, NULL);
      int w = MIN (nat_w, MAX (width, min_w));
      if (line_start && x + FIGURE_SPACING + w > width)
        {
          y += line_height + LINE_SPACING;
          x = 0;
          line_height = 0;
          line_start = NULL;
        }
      if (line_start)
        x += FIGURE_SPACING;
      int h;
      gtk_widget_measure (c, GTK_ORIENTATION_VERTICAL, w, NULL, &h, NULL, NULL);
      if (allocate)
        gtk_widget_size_allocate (c, &(GtkAllocation){ x, y, w, h }, -1);
      x += w;
      line_height = MAX (line_height, h);
      if (line_start == NULL)
        line_start = c;
    }
  return y + line_height;
}

static GtkSizeRequestMode
app_totals_bar_get_request_mode (GtkWidget *widget)
{
  return GTK_SIZE_REQUEST_HEIGHT_FOR_WIDTH;
}

static void
app_totals_bar_measure (GtkWidget *widget, GtkOrientation orientation, int for_size,
                        int *minimum, int *natural, int *minimum_baseline, int *natural_baseline)
{
  if (orientation == GTK_ORIENTATION_VERTICAL)
    {
      int width = for_size;
      if (width < 0)
        app_totals_bar_measure (widget, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &width, NULL, NULL);
      *minimum = *natural = flow (widget, width, FALSE);
      return;
    }
  /* As narrow as the widest figure; naturally all on one line. */
  int min = 0, nat = 0, n = 0;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    {
      if (!gtk_widget_should_layout (c))
        continue;
      int cm, cn;
      gtk_widget_measure (c, GTK_ORIENTATION_HORIZONTAL, -1, &cm, &cn, NULL, NULL);
      min = MAX (min, cm);
      nat += cn + (n++ ? FIGURE_SPACING : 0);
    }
  if (minimum)
    *minimum = min;
  if (natural)
    *natural = nat;
}

static void
app_totals_bar_size_allocate (GtkWidget *widget, int width, int height, int baseline)
{
  flow (widget, width, TRUE);
}

static void
app_totals_bar_class_init (AppTotalsBarClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_totals_bar_dispose;
  APP_DOCUMENT_VIEW_CLASS (klass)->document_changed = update;
  widget_class->get_request_mode = app_totals_bar_get_request_mode;
  widget_class->measure = app_totals_bar_measure;
  widget_class->size_allocate = app_totals_bar_size_allocate;
  gtk_widget_class_set_css_name (widget_class, "totalsbar");
}

/* A figure: never ellipsized nor wrapped, so its minimum width is its natural width and the
 * bar moves it to the next line rather than cutting it. */
static GtkLabel *
new_label (void)
{
  GtkWidget *label = gtk_label_new (NULL);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_widget_set_valign (label, GTK_ALIGN_START);
  gtk_widget_add_css_class (label, "numeric");
  return GTK_LABEL (label);
}

static void
add_child (AppTotalsBar *self, GtkWidget *child)
{
  gtk_widget_set_parent (child, GTK_WIDGET (self));
}

static GtkLabel *
add_label (AppTotalsBar *self)
{
  GtkLabel *label = new_label ();
  add_child (self, GTK_WIDGET (label));
  return label;
}

static void
app_totals_bar_init (AppTotalsBar *self)
{
  gtk_widget_set_margin_start (GTK_WIDGET (self), 12);
  gtk_widget_set_margin_end (GTK_WIDGET (self), 12);
  gtk_widget_set_margin_top (GTK_WIDGET (self), 6);
  gtk_widget_set_margin_bottom (GTK_WIDGET (self), 6);
  self->step = add_label (self);
  self->compute = add_label (self);
  self->comm = add_label (self);
  self->collectives = add_label (self);
  gtk_widget_add_css_class (GTK_WIDGET (self->collectives), "caption");

  self->memory_box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 3);
  gtk_widget_add_css_class (self->memory_box, "memory");
  self->memory = new_label ();
  gtk_box_append (GTK_BOX (self->memory_box), GTK_WIDGET (self->memory));
  self->memory_bar = GTK_LEVEL_BAR (gtk_level_bar_new_for_interval (0, 1));
  /* GTK's offsets are a battery's (low is bad); memory is bad when full: the level is
   * "memory-near" over 90 % and the bar red (over-budget) beyond the capacity. */
  gtk_level_bar_remove_offset_value (self->memory_bar, GTK_LEVEL_BAR_OFFSET_LOW);
  gtk_level_bar_remove_offset_value (self->memory_bar, GTK_LEVEL_BAR_OFFSET_HIGH);
  gtk_level_bar_remove_offset_value (self->memory_bar, GTK_LEVEL_BAR_OFFSET_FULL);
  gtk_level_bar_add_offset_value (self->memory_bar, "memory-ok", 0.9);
  gtk_level_bar_add_offset_value (self->memory_bar, "memory-near", 1.0);
  gtk_widget_add_css_class (GTK_WIDGET (self->memory_bar), "memory");
  gtk_widget_set_size_request (GTK_WIDGET (self->memory_bar), 160, -1);
  gtk_box_append (GTK_BOX (self->memory_box), GTK_WIDGET (self->memory_bar));
  self->memory_breakdown = new_label ();
  gtk_widget_add_css_class (GTK_WIDGET (self->memory_breakdown), "caption");
  gtk_box_append (GTK_BOX (self->memory_box), GTK_WIDGET (self->memory_breakdown));
  self->memory_extra = new_label ();
  gtk_widget_add_css_class (GTK_WIDGET (self->memory_extra), "caption");
  gtk_widget_set_visible (GTK_WIDGET (self->memory_extra), FALSE);
  gtk_box_append (GTK_BOX (self->memory_box), GTK_WIDGET (self->memory_extra));
  self->memory_reserved = new_label ();
  gtk_widget_add_css_class (GTK_WIDGET (self->memory_reserved), "caption");
  gtk_widget_set_visible (GTK_WIDGET (self->memory_reserved), FALSE);
  gtk_box_append (GTK_BOX (self->memory_box), GTK_WIDGET (self->memory_reserved));
  self->memory_pipeline = new_label ();
  gtk_widget_add_css_class (GTK_WIDGET (self->memory_pipeline), "caption");
  gtk_widget_set_visible (GTK_WIDGET (self->memory_pipeline), FALSE);
  gtk_box_append (GTK_BOX (self->memory_box), GTK_WIDGET (self->memory_pipeline));
  add_child (self, self->memory_box);

  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::plan", G_CALLBACK (update));
}
