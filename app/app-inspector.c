#define G_LOG_DOMAIN "app-inspector"
#include "config.h"

#include "app-inspector.h"

#include <glib/gi18n.h>

#include "planner-cost.h"

/* Ops of wide meshes can have thousands of strategies; the cheapest are the ones worth a
 * row. */
#define MAX_ROWS 200

typedef struct
{
  PlannerStrategy strategy;
  double compute_s;
  double comm_s;
  gboolean chosen;
} Candidate;

struct _AppInspector
{
  AppDocumentView parent_instance;

  GtkStack *stack;
  GtkScrolledWindow *scroller;
  int shown_op; /* the op shown, to scroll back to the top on another */
  GtkLabel *type_label;
  GtkLabel *name_label;
  GtkLabel *tensors_label;
  GtkLabel *factors_label;
  GtkLabel *why_label;
  GtkEntry *pin_entry;
  GtkButton *pin_button;
  GtkLabel *candidates_heading;
  GtkListBox *candidates;

  GArray *rows; /* Candidate, as listed */
  char *pin_error;
};

G_DEFINE_FINAL_TYPE (AppInspector, app_inspector, APP_TYPE_DOCUMENT_VIEW)

/* Why the last pin typed was refused: app-inspector.ui shows it under the entry. */
enum
{
  PROP_0,
  PROP_PIN_ERROR,
  PROP_HAS_PIN_ERROR,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

static AppDocument *
get_document (AppInspector *self)
{
  return app_document_view_get_document (APP_DOCUMENT_VIEW (self));
}

static void
set_pin_error (AppInspector *self, const char *message)
{
  if (g_strcmp0 (self->pin_error, message) == 0)
    return;
  gboolean had = self->pin_error != NULL;
  g_free (self->pin_error);
  self->pin_error = g_strdup (message);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_PIN_ERROR]);
  if (had != (message != NULL))
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_HAS_PIN_ERROR]);
  /* A style class is no property a binding could set without replacing the others. */
  if (message)
    gtk_widget_add_css_class (GTK_WIDGET (self->pin_entry), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->pin_entry), "error");
}

static char *
shape_text (const gint64 *shape, guint rank)
{
  GString *s = g_string_new ("[");
  for (guint d = 0; d < rank; d++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, d ? ", " : "", shape[d]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

static void
append_tensor (GString *markup, PlannerPlan *plan, const char *role, guint tensor_id,
               const PlannerLayout *layout)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerTensor *t = planner_graph_get_tensor (graph, tensor_id);
  g_autofree char *shape = shape_text (t->shape, t->rank);
  g_autofree char *brackets = planner_layout_to_string (layout, mesh);
  g_autofree char *placements = planner_layout_to_placements (layout, mesh);
  gint64 local[PLANNER_MAX_RANK];
  planner_layout_local_shape (layout, mesh, t->shape, local);
  g_autofree char *local_shape = shape_text (local, t->rank);
  g_autofree char *escaped = g_markup_printf_escaped (
      "<b>%s</b> %s\n<tt>%s %s</tt>\n<tt>%s  %s</tt> · %s %s\n\n", role, t->name, shape,
      planner_dtype_to_string (t->dtype), brackets, placements, _("local"), local_shape);
  g_string_append (markup, escaped);
}

static double
redist_cost (PlannerPlan *plan, const PlannerTensor *t, const PlannerLayout *from,
             const PlannerLayout *to)
{
  if (planner_layout_equal (from, to))
    return 0;
  return planner_redistributor_cost (planner_plan_get_redistributor (plan), from, to, t->shape,
                                     t->rank, t->dtype);
}

/* Bytes of @t's shard on one device under @layout. */
static double
local_bytes (const PlannerTensor *t, const PlannerLayout *layout, const PlannerMesh *mesh)
{
  gint64 local[PLANNER_MAX_RANK];
  planner_layout_local_shape (layout, mesh, t->shape, local);
  double n = planner_dtype_size (t->dtype);
  for (guint d = 0; d < t->rank; d++)
    n *= local[d];
  return n;
}

/* What this op costs under @c->strategy with every other op as planned now. */
static void
score_candidate (PlannerPlan *plan, guint op_index, Candidate *c)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerOp *op = planner_graph_get_op (graph, op_index);
  PlannerLayout ins[PLANNER_MAX_OPERANDS], outs[PLANNER_MAX_OPERANDS];
  planner_strategy_layouts (&c->strategy, &op->rule, mesh, ins, outs);

  double bytes = 0;
  c->comm_s = 0;
  for (guint i = 0; i < op->n_inputs; i++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, op->inputs[i]);
      bytes += local_bytes (t, &ins[i], mesh);
      /* Parameters and graph inputs are stored the way their op wants them. */
      if (t->producer >= 0)
        c->comm_s += redist_cost (plan, t, planner_plan_get_tensor_layout (plan, op->inputs[i]),
                                  &ins[i]);
    }
  PlannerDType dtype = PLANNER_DTYPE_F32;
  for (guint o = 0; o < op->n_outputs; o++)
    {
      const PlannerTensor *t = planner_graph_get_tensor (graph, op->outputs[o]);
      dtype = o == 0 ? t->dtype : dtype;
      bytes += local_bytes (t, &outs[o], mesh);
      for (guint k = 0; t->consumers && k < t->consumers->len; k++)
        {
          const PlannerUse *use = &g_array_index (t->consumers, PlannerUse, k);
          PlannerLayout cin[PLANNER_MAX_OPERANDS], cout[PLANNER_MAX_OPERANDS];
          planner_plan_op_layouts (plan, use->op, cin, cout);
          c->comm_s += redist_cost (plan, t, &outs[o], &cin[use->slot]);
        }
    }
  double flops = planner_strategy_local_flops (&c->strategy, &op->rule, mesh);
  c->compute_s = planner_cost_compute_time (planner_plan_get_hardware (plan), dtype, flops, bytes);
}

static int
compare_candidates (gconstpointer a, gconstpointer b)
{
  const Candidate *x = a, *y = b;
  double cx = x->compute_s + x->comm_s, cy = y->compute_s + y->comm_s;
  return cx < cy ? -1 : cx > cy ? 1 : 0;
}

static GtkWidget *
candidate_row (AppInspector *self, PlannerPlan *plan, const PlannerOp *op, const Candidate *c,
               double best)
{
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  g_autofree char *layouts = planner_strategy_to_string (&c->strategy, &op->rule, mesh);
  g_autofree char *describe = planner_strategy_describe (&c->strategy, &op->rule, mesh);
  g_autofree char *compute = planner_format_time (c->compute_s);
  g_autofree char *comm = planner_format_time (c->comm_s);
  g_autofree char *total = planner_format_time (c->compute_s + c->comm_s);

  AdwActionRow *row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), layouts);
  g_autofree char *subtitle = g_strdup_printf (_("%s · compute %s · communication %s"), describe,
                                               compute, comm);
  adw_action_row_set_subtitle (row, subtitle);
  gtk_widget_add_css_class (GTK_WIDGET (row), "monospace");
  GtkWidget *cost = gtk_label_new (total);
  gtk_widget_add_css_class (cost, "numeric");
  if (c->compute_s + c->comm_s <= best)
    gtk_widget_add_css_class (cost, "success");
  adw_action_row_add_suffix (row, cost);
  if (c->chosen)
    {
      GtkWidget *check = gtk_image_new_from_icon_name ("object-select-symbolic");
      gtk_widget_set_tooltip_text (check, _("The plan's strategy"));
      adw_action_row_add_prefix (row, check);
      gtk_widget_add_css_class (GTK_WIDGET (row), "accent");
    }
  gtk_list_box_row_set_activatable (GTK_LIST_BOX_ROW (row), TRUE);
  return GTK_WIDGET (row);
}

static char *
why_markup (AppInspector *self, PlannerPlan *plan, guint op_index)
{
  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerOp *op = planner_graph_get_op (graph, op_index);
  const PlannerOpPlan *op_plan = planner_plan_get_op (plan, op_index);
  GString *s = g_string_new (NULL);
  switch (op_plan->decision)
    {
    case PLANNER_DECIDED_PINNED:
      {
        const GPtrArray *pins = planner_plan_get_pins (plan);
        const char *pin = op_plan->pin >= 0 && pins && (guint) op_plan->pin < pins->len
                              ? g_ptr_array_index ((GPtrArray *) pins, op_plan->pin)
                              : "?";
        gboolean mine = FALSE;
        GPtrArray *user = app_document_get_pins (get_document (self));
        for (guint i = 0; i < user->len && !mine; i++)
          mine = g_str_equal (g_ptr_array_index (user, i), pin);
        const char *policy = planner_plan_get_policy (plan);
        g_autofree char *line = mine ? g_markup_printf_escaped (_("Pinned by you: <tt>%s</tt>"), pin)
                                     : g_markup_printf_escaped (
                                         _("Pinned by the policy %s: <tt>%s</tt>"),
                                         policy ? policy : "?", pin);
        g_string_append (s, line);
        break;
      }
    case PLANNER_DECIDED_PROPAGATED:
      {
        const PlannerTraceStep *step = planner_plan_get_trace_step (plan, op_plan->trace_step);
        const char *from = step->from_op >= 0
                               ? planner_graph_get_op (graph, step->from_op)->name
                               : "?";
        g_autofree char *cost = planner_format_time (step->edge_cost_s);
        g_autofree char *line = g_markup_printf_escaped (
            step->forward
                ? _("Step %u of %u: reached forward from <tt>%s</tt>; its edges cost %s; %u candidates considered.")
                : _("Step %u of %u: reached backward from <tt>%s</tt>; its edges cost %s; %u candidates considered."),
            step->index + 1, planner_plan_get_n_trace_steps (plan), from, cost,
            step->n_candidates);
        g_string_append (s, line);
        if (step->has_runner_up)
          {
            g_autofree char *runner = planner_strategy_to_string (&step->runner_up, &op->rule,
                                                                  mesh);
            g_autofree char *rcost = planner_format_time (step->runner_up_cost_s);
            g_autofree char *more = g_markup_printf_escaped (
                _("\nRunner-up: <tt>%s</tt> at %s."), runner, rcost);
            g_string_append (s, more);
          }
        else
          g_string_append (s, _("\nNo runner-up: it was the only candidate."));
        break;
      }
    case PLANNER_DECIDED_DEFAULTED:
    default:
      g_string_append (s, _("No pin reached this op, so it has the default strategy: its batch "
                            "dim over every axis that divides it, else replicated."));
      break;
    }
  /* The redistributions into this op are what its choice costs its neighbours. */
  guint n = planner_plan_get_n_redistributions (plan);
  for (guint i = 0; i < n; i++)
    {
      const PlannerRedistribution *r = planner_plan_get_redistribution (plan, i);
      if (r->consumer != (int) op_index)
        continue;
      PlannerRedistPath path = { TRUE, r->n_steps, r->steps, r->bytes, r->time_s };
      g_autofree char *describe = planner_redist_path_describe (&path, mesh);
      g_autofree char *line = g_markup_printf_escaped (
          _("\nInput %u is redistributed: %s"), r->slot, describe);
      g_string_append (s, line);
    }
  return g_string_free (s, FALSE);
}

static void
update (AppDocumentView *view)
{
  AppInspector *self = APP_INSPECTOR (view);
  AppDocument *doc = app_document_view_get_document (view);
  PlannerPlan *plan = app_document_view_get_plan (view);
  int op_index = doc ? app_document_get_selected_op (doc) : -1;
  g_array_set_size (self->rows, 0);
  GtkWidget *child;
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->candidates))))
    gtk_list_box_remove (self->candidates, child);
  if (plan == NULL || op_index < 0)
    {
      gtk_stack_set_visible_child_name (self->stack, "empty");
      return;
    }
  gtk_stack_set_visible_child_name (self->stack, "op");
  /* Another op starts at its top, not where the last one was scrolled to. */
  if (op_index != self->shown_op)
    gtk_adjustment_set_value (gtk_scrolled_window_get_vadjustment (self->scroller), 0);
  self->shown_op = op_index;

  PlannerGraph *graph = planner_plan_get_graph (plan);
  const PlannerMesh *mesh = planner_plan_get_mesh (plan);
  const PlannerOp *op = planner_graph_get_op (graph, op_index);
  const PlannerOpPlan *op_plan = planner_plan_get_op (plan, op_index);
  gtk_label_set_text (self->type_label, planner_op_type_to_string (op->type));
  gtk_label_set_text (self->name_label, op->name);

  PlannerLayout ins[PLANNER_MAX_OPERANDS], outs[PLANNER_MAX_OPERANDS];
  planner_plan_op_layouts (plan, op_index, ins, outs);
  g_autoptr (GString) markup = g_string_new (NULL);
  for (guint i = 0; i < op->n_inputs; i++)
    {
      g_autofree char *role = g_strdup_printf (_("in %u"), i);
      append_tensor (markup, plan, role, op->inputs[i], &ins[i]);
    }
  for (guint o = 0; o < op->n_outputs; o++)
    {
      g_autofree char *role = g_strdup_printf (_("out %u"), o);
      append_tensor (markup, plan, role, op->outputs[o],
                     planner_plan_get_tensor_layout (plan, op->outputs[o]));
    }
  g_strchomp (markup->str);
  gtk_label_set_markup (self->tensors_label, markup->str);

  g_autoptr (GString) factors = g_string_new (NULL);
  static const char *kinds[] = { N_("pass-through"), N_("reduction"), N_("need-replication") };
  for (guint f = 0; f < op->rule.n_factors; f++)
    {
      const PlannerFactor *factor = &op->rule.factors[f];
      g_string_append_printf (factors, "%s%s = %" G_GINT64_FORMAT "  %s", f ? "\n" : "",
                              factor->name, factor->size, _(kinds[factor->kind]));
      for (guint a = 0; a < op_plan->strategy.n_axes[f]; a++)
        g_string_append_printf (factors, "%s%s", a ? "+" : "  ← ",
                                mesh->names[op_plan->strategy.axes[f][a]]);
    }
  gtk_label_set_text (self->factors_label, factors->str);

  g_autofree char *why = why_markup (self, plan, op_index);
  gtk_label_set_markup (self->why_label, why);

  /* The entry shows the op's pin when it has one, else its strategy, ready to edit. */
  const char *pin = app_document_get_op_pin (doc, op->name);
  g_autofree char *current = planner_strategy_to_string (&op_plan->strategy, &op->rule, mesh);
  gtk_editable_set_text (GTK_EDITABLE (self->pin_entry),
                         pin ? pin + strlen (op->name) + 1 : current);
  set_pin_error (self, NULL);

  g_autoptr (GArray) all = planner_op_rule_enumerate (&op->rule, mesh);
  g_autoptr (GArray) scored = g_array_sized_new (FALSE, FALSE, sizeof (Candidate), all->len);
  gboolean chosen_listed = FALSE;
  for (guint i = 0; i < all->len; i++)
    {
      Candidate c = { 0 };
      c.strategy = g_array_index (all, PlannerStrategy, i);
      c.chosen = planner_strategy_equal (&c.strategy, &op_plan->strategy);
      chosen_listed |= c.chosen;
      score_candidate (plan, op_index, &c);
      g_array_append_val (scored, c);
    }
  if (!chosen_listed)
    {
      /* A strategy with partial inputs is not enumerated; show it all the same. */
      Candidate c = { 0 };
      c.strategy = op_plan->strategy;
      c.chosen = TRUE;
      score_candidate (plan, op_index, &c);
      g_array_append_val (scored, c);
    }
  g_array_sort (scored, compare_candidates);
  double best = scored->len ? g_array_index (scored, Candidate, 0).compute_s
                                  + g_array_index (scored, Candidate, 0).comm_s
                            : 0;
  for (guint i = 0; i < scored->len; i++)
    {
      const Candidate *c = &g_array_index (scored, Candidate, i);
      if (self->rows->len >= MAX_ROWS && !c->chosen)
        continue;
      g_array_append_val (self->rows, *c);
      gtk_list_box_append (self->candidates, candidate_row (self, plan, op, c, best));
    }
  g_autofree char *heading = g_strdup_printf (
      ngettext ("%u Candidate Strategy", "%u Candidate Strategies", scored->len), scored->len);
  gtk_label_set_text (self->candidates_heading, heading);
}

static void
pin_from_entry (AppInspector *self)
{
  AppDocument *doc = get_document (self);
  const char *name = doc ? app_document_get_selected_op_name (doc) : NULL;
  if (name == NULL)
    return;
  g_autoptr (GError) error = NULL;
  if (!app_document_pin (doc, name, gtk_editable_get_text (GTK_EDITABLE (self->pin_entry)),
                         &error))
    set_pin_error (self, error->message);
  else
    set_pin_error (self, NULL);
}

static void
on_row_activated (AppInspector *self, GtkListBoxRow *row)
{
  app_inspector_pin_candidate (self, (guint) gtk_list_box_row_get_index (row));
}

void
app_inspector_pin_candidate (AppInspector *self, guint i)
{
  g_return_if_fail (APP_IS_INSPECTOR (self));
  AppDocument *doc = get_document (self);
  PlannerPlan *plan = app_document_view_get_plan (APP_DOCUMENT_VIEW (self));
  int op = doc ? app_document_get_selected_op (doc) : -1;
  if (plan == NULL || op < 0 || i >= self->rows->len)
    return;
  const PlannerOp *o = planner_graph_get_op (app_document_get_graph (doc), op);
  g_autofree char *layouts = planner_strategy_to_string (
      &g_array_index (self->rows, Candidate, i).strategy, &o->rule, planner_plan_get_mesh (plan));
  gtk_editable_set_text (GTK_EDITABLE (self->pin_entry), layouts);
  pin_from_entry (self);
}

GtkWidget *
app_inspector_new (void)
{
  return g_object_new (APP_TYPE_INSPECTOR, NULL);
}

GtkScrolledWindow *
app_inspector_get_scroller (AppInspector *self)
{
  g_return_val_if_fail (APP_IS_INSPECTOR (self), NULL);
  return self->scroller;
}

GtkEditable *
app_inspector_get_pin_entry (AppInspector *self)
{
  g_return_val_if_fail (APP_IS_INSPECTOR (self), NULL);
  return GTK_EDITABLE (self->pin_entry);
}

const char *
app_inspector_get_pin_error (AppInspector *self)
{
  g_return_val_if_fail (APP_IS_INSPECTOR (self), NULL);
  return self->pin_error;
}

guint
app_inspector_get_n_candidates (AppInspector *self)
{
  g_return_val_if_fail (APP_IS_INSPECTOR (self), 0);
  return self->rows->len;
}

int
app_inspector_get_chosen_candidate (AppInspector *self)
{
  g_return_val_if_fail (APP_IS_INSPECTOR (self), -1);
  for (guint i = 0; i < self->rows->len; i++)
    if (g_array_index (self->rows, Candidate, i).chosen)
      return (int) i;
  return -1;
}

const char *
app_inspector_get_why (AppInspector *self)
{
  g_return_val_if_fail (APP_IS_INSPECTOR (self), NULL);
  return gtk_label_get_text (self->why_label);
}

void
app_inspector_focus_pin_entry (AppInspector *self)
{
  g_return_if_fail (APP_IS_INSPECTOR (self));
  gtk_widget_grab_focus (GTK_WIDGET (self->pin_entry));
}

static void
app_inspector_dispose (GObject *object)
{
  AppInspector *self = APP_INSPECTOR (object);
  g_clear_pointer (&self->rows, g_array_unref);
  g_clear_pointer (&self->pin_error, g_free);
  gtk_widget_dispose_template (GTK_WIDGET (self), APP_TYPE_INSPECTOR);
  G_OBJECT_CLASS (app_inspector_parent_class)->dispose (object);
}

static void
app_inspector_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  AppInspector *self = APP_INSPECTOR (object);
  switch (prop_id)
    {
    case PROP_PIN_ERROR: g_value_set_string (value, self->pin_error); break;
    case PROP_HAS_PIN_ERROR: g_value_set_boolean (value, self->pin_error != NULL); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
app_inspector_class_init (AppInspectorClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  object_class->dispose = app_inspector_dispose;
  object_class->get_property = app_inspector_get_property;
  GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;
  properties[PROP_PIN_ERROR] = g_param_spec_string ("pin-error", NULL, NULL, NULL, ro);
  properties[PROP_HAS_PIN_ERROR]
      = g_param_spec_boolean ("has-pin-error", NULL, NULL, FALSE, ro);
  g_object_class_install_properties (object_class, N_PROPS, properties);
  APP_DOCUMENT_VIEW_CLASS (klass)->document_changed = update;

  gtk_widget_class_set_layout_manager_type (widget_class, GTK_TYPE_BIN_LAYOUT);
  gtk_widget_class_set_css_name (widget_class, "inspector");
  gtk_widget_class_set_template_from_resource (
      widget_class, "/io/github/shardscope/Shardscope/app-inspector.ui");
  gtk_widget_class_bind_template_child (widget_class, AppInspector, stack);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, scroller);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, type_label);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, name_label);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, tensors_label);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, factors_label);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, why_label);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, pin_entry);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, pin_button);
  /* Bound to "pin-error" in the template; named for the tests. */
  gtk_widget_class_bind_template_child_full (widget_class, "pin_error_label", FALSE, 0);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, candidates_heading);
  gtk_widget_class_bind_template_child (widget_class, AppInspector, candidates);
}

static void
app_inspector_init (AppInspector *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->shown_op = -1;
  self->rows = g_array_new (FALSE, FALSE, sizeof (Candidate));
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::plan", G_CALLBACK (update));
  app_document_view_follow (APP_DOCUMENT_VIEW (self), "notify::selected-op", G_CALLBACK (update));
  g_signal_connect_swapped (self->pin_entry, "activate", G_CALLBACK (pin_from_entry), self);
  g_signal_connect_swapped (self->pin_button, "clicked", G_CALLBACK (pin_from_entry), self);
  g_signal_connect_swapped (self->candidates, "row-activated", G_CALLBACK (on_row_activated),
                            self);
}
