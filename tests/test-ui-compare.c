/* test-ui-compare.c: compare mode and the totals bar in the window, under Xvfb (suite ui).
 *
 * gpt2-tiny (2 layers, hidden 64, 4 heads, vocabulary 512, 128 positions; batch 8, sequence
 * 128, f32) is planned with the megatron policy on dp=2,mp=2 and compared with the plan of no
 * policy on the same mesh. At 1280x720 and at 1920x1080:
 *   - both panes have one width and one zoom; zooming one (as the wheel does, and with the
 *     view's zoom buttons) moves the other to the same zoom and origin, scrolling one scrolls
 *     the other, selecting in one selects in the other;
 *   - each pane's legend is drawn whole inside its own strip under the graph;
 *   - Escape (the view's captured shortcut) and the close button leave compare mode, and the
 *     header's toggle follows;
 *   - every label of the totals bar gets at least its natural width, inside the window.
 * The memory breakdown is checked against figures computed here by hand from the config
 * (Korthikanti et al. 2022's activation count, README "Training step and memory"): with a
 * profile of 4 MB per device the plan (4,715,520 B) does not fit and the bar is red, as its
 * pixels show; on pp=2,dp=1,mp=2 the pipeline line gives each stage's total.
 */
#include "config.h"

#include <math.h>

#include "app-application.h"
#include "app-compare-view.h"
#include "app-totals-bar.h"
#include "app-window.h"
#include "planner-hardware.h"
#include "planner-redistribute.h"

#include "test-util.h"
#include "test-ui-util.h"

static AppApplication *app;
static AppWindow *window;
static char *tmpdir;
static PlannerPlan *other_plan; /* the plan compared with the window's */

static gboolean
timed_out (gpointer data)
{
  *(gboolean *)data = TRUE;
  return G_SOURCE_REMOVE;
}




static AppDocument *
doc (void)
{
  return app_window_get_document (window);
}

static PlannerPlan *
plan (void)
{
  return app_document_get_plan (doc ());
}

static gboolean
plan_ready (gpointer data)
{
  AppDocument *d = doc ();
  return d && app_document_get_plan (d) && !app_document_get_busy (d)
         && app_document_get_plan (d) != data
         && graphview_widget_is_ready (app_window_get_graph (window));
}

typedef struct
{
  const char *mesh;
  guint64 memory; /* the profile's bytes per device */
} Wanted;

/* The window shows gpt2-tiny's plan on @mesh and a profile of @memory bytes, laid out (the
 * example the window opens with may still arrive first). */
static gboolean
plan_is (gpointer data)
{
  const Wanted *want = data;
  if (!plan_ready (NULL))
    return FALSE;
  PlannerPlan *p = plan ();
  g_autofree char *mesh = planner_mesh_to_string (planner_plan_get_mesh (p));
  return g_str_equal (mesh, want->mesh)
         && planner_graph_get_n_ops (planner_plan_get_graph (p)) == 48
         && planner_hardware_memory_bytes (planner_plan_get_hardware (p)) == want->memory;
}

static void
load (const char *mesh, const char *hardware, guint64 memory)
{
  app_window_load_model (window, "gpt2-tiny", mesh, hardware, "megatron");
  Wanted want = { mesh, memory };
  test_ui_wait_for (plan_is, &want, 60, "gpt2-tiny's plan");
  g_assert_cmpstr (app_document_get_policy (doc ()), ==, "megatron");
}

static AppCompareView *
compare_view (void)
{
  return APP_COMPARE_VIEW (app_window_get_part (window, "compare_view"));
}

static AppTotalsBar *
totals_bar (void)
{
  return APP_TOTALS_BAR (app_window_get_part (window, "totals_bar"));
}

static gboolean
window_sized (gpointer data)
{
  const int *size = data;
  return gtk_widget_get_width (GTK_WIDGET (window)) == size[0]
         && gtk_widget_get_height (GTK_WIDGET (window)) == size[1];
}

/* The window's own area at @width x @height. Its default size is clamped to the screen
 * (xvfb-run's is 1280x1024), a size request is not; both count the frame GTK draws around
 * the window (its shadow), so the request is corrected by what the last one gave. */
static void
resize (int width, int height)
{
  int size[2] = { width, height };
  int request_w = width, request_h = height;
  for (int attempt = 0; attempt < 4 && !window_sized (size); attempt++)
    {
      gtk_widget_set_size_request (GTK_WIDGET (window), request_w, request_h);
      gtk_window_set_default_size (GTK_WINDOW (window), request_w, request_h);
      gboolean expired = FALSE;
      guint id = g_timeout_add (3000, timed_out, &expired);
      while (!window_sized (size) && !expired)
        g_main_context_iteration (NULL, TRUE);
      if (!expired)
        g_source_remove (id);
      request_w += width - gtk_widget_get_width (GTK_WIDGET (window));
      request_h += height - gtk_widget_get_height (GTK_WIDGET (window));
    }
  if (!window_sized (size))
    g_error ("the window is %dx%d, not %dx%d", gtk_widget_get_width (GTK_WIDGET (window)),
             gtk_widget_get_height (GTK_WIDGET (window)), width, height);
  test_ui_pump (200);
}

/* @widget as drawn, into the build folder (to look at; nothing is compared). */
static void
photograph (GtkWidget *widget, const char *file)
{
  test_ui_pump (200);
  test_ui_photograph (widget, file);
}

/* The level bar as drawn: the colour of a pixel in the filled part's middle. */
static void
filled_colour (GtkWidget *bar, guchar rgb[3])
{
  test_ui_pump (100);
  int width = gtk_widget_get_width (bar), height = gtk_widget_get_height (bar);
  g_assert_cmpint (width, >, 8);
  g_assert_cmpint (height, >, 0);
  g_autoptr (GdkPaintable) paintable = gtk_widget_paintable_new (bar);
  GtkSnapshot *snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  g_autoptr (GskRenderNode) node = gtk_snapshot_free_to_node (snapshot);
  g_assert_nonnull (node);
  GskRenderer *renderer = gtk_native_get_renderer (gtk_widget_get_native (bar));
  g_autoptr (GdkTexture) texture
      = gsk_renderer_render_texture (renderer, node, &GRAPHENE_RECT_INIT (0, 0, width, height));
  int tw = gdk_texture_get_width (texture), th = gdk_texture_get_height (texture);
  g_autofree guchar *data = g_malloc ((gsize)tw * th * 4);
  gdk_texture_download (texture, data, (gsize)tw * 4);
  /* GDK_MEMORY_DEFAULT: B G R A in memory on little-endian machines. Sample a quarter of the
   * way in (a nearly empty bar's fill is narrower: callers only ask for full ones). */
  const guchar *px = data + ((gsize)(th / 2) * tw + tw / 4) * 4;
  rgb[0] = px[2];
  rgb[1] = px[1];
  rgb[2] = px[0];
}

static void
test_start (void)
{
  app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  g_application_activate (G_APPLICATION (app));
  window = APP_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_true (APP_IS_WINDOW (window));
  resize (1280, 720);
  /* The example first, so that it does not replace the plan asked for. */
  test_ui_wait_for (plan_ready, NULL, 120, "the example's plan");
  load ("dp=2,mp=2", "h100-sxm", 80000000000);
}

/* Compare mode ----------------------------------------------------------------------------- */

static gboolean
panes_ready (gpointer data)
{
  AppCompareView *view = compare_view ();
  return graphview_widget_is_ready (app_compare_view_get_pane (view, 0))
         && graphview_widget_is_ready (app_compare_view_get_pane (view, 1))
         && gtk_widget_get_mapped (GTK_WIDGET (app_compare_view_get_pane (view, 1)));
}

static void
enter_compare (void)
{
  if (other_plan == NULL)
    other_plan = test_util_plan (app_document_get_graph (doc ()), "dp=2,mp=2",
                                 app_document_get_hardware (doc ()), NULL, NULL);
  app_window_compare (window, other_plan, "no policy");
  g_assert_cmpstr (app_window_get_mode (window), ==, "compare");
  test_ui_wait_for (panes_ready, NULL, 60, "both panes' layouts");
  test_ui_pump (200);
  GVariant *state = g_action_group_get_action_state (G_ACTION_GROUP (window), "compare");
  g_assert_true (g_variant_get_boolean (state));
  g_variant_unref (state);
}

static void
assert_in_step (const char *after)
{
  AppCompareView *view = compare_view ();
  GraphviewWidget *a = app_compare_view_get_pane (view, 0), *b = app_compare_view_get_pane (view, 1);
  double ax, ay, bx, by;
  graphview_widget_get_origin (a, &ax, &ay);
  graphview_widget_get_origin (b, &bx, &by);
  if (graphview_widget_get_zoom (a) != graphview_widget_get_zoom (b) || ax != bx || ay != by)
    g_error ("after %s the panes differ: zoom %.9g and %.9g, origin (%.6g, %.6g) and "
             "(%.6g, %.6g)",
             after, graphview_widget_get_zoom (a), graphview_widget_get_zoom (b), ax, ay, bx, by);
}

static void
check_compare (int width, int height)
{
  resize (width, height);
  enter_compare ();
  AppCompareView *view = compare_view ();
  GraphviewWidget *a = app_compare_view_get_pane (view, 0), *b = app_compare_view_get_pane (view, 1);
  g_assert_cmpuint (app_compare_view_get_n_differences (view), >, 0);

  /* One width: one fit, one clamp. */
  g_assert_cmpint (gtk_widget_get_width (GTK_WIDGET (a)), ==, gtk_widget_get_width (GTK_WIDGET (b)));
  g_assert_cmpint (gtk_widget_get_height (GTK_WIDGET (a)), ==,
                   gtk_widget_get_height (GTK_WIDGET (b)));
  graphview_widget_zoom_to_fit (a);
  assert_in_step ("fitting the left pane");
  double fit = graphview_widget_get_zoom (a);
  g_assert_cmpfloat (fit, ==, graphview_widget_get_fit_zoom (b));

  /* Zooming the left pane at a point off its middle, as the wheel does. */
  double w = gtk_widget_get_width (GTK_WIDGET (a)), h = gtk_widget_get_height (GTK_WIDGET (a));
  graphview_widget_zoom_at (a, 3.0, w * 0.3, h * 0.6);
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (a), 3 * fit, 1e-9 * fit);
  assert_in_step ("zooming the left pane");
  /* Zooming the right one. */
  graphview_widget_zoom_at (b, 1.5, w * 0.7, h * 0.2);
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (b), 4.5 * fit, 1e-9 * fit);
  assert_in_step ("zooming the right pane");
  /* Scrolling one scrolls the other, each way. */
  double x0, y0;
  graphview_widget_get_origin (a, &x0, &y0);
  graphview_widget_pan (b, -40, -25);
  double x1, y1;
  graphview_widget_get_origin (a, &x1, &y1);
  g_assert_cmpfloat (x1, !=, x0);
  assert_in_step ("scrolling the right pane");
  graphview_widget_pan (a, 30, 10);
  assert_in_step ("scrolling the left pane");
  /* The view's zoom buttons. */
  double z = graphview_widget_get_zoom (a);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (view), "compare.zoom-in", NULL));
  g_assert_cmpfloat_with_epsilon (graphview_widget_get_zoom (b), z * APP_WINDOW_ZOOM_STEP,
                                  1e-9 * z);
  assert_in_step ("compare.zoom-in");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (view), "compare.zoom-fit", NULL));
  g_assert_cmpfloat (graphview_widget_get_zoom (b), ==, fit);
  assert_in_step ("compare.zoom-fit");

  /* Selecting in one pane selects the same item in the other, and both show it. */
  int item = (int)graphview_model_get_n_items (graphview_widget_get_model (a)) - 1;
  graphview_widget_zoom_at (a, 5.0, 0, 0);
  graphview_widget_set_selected (b, item);
  g_assert_cmpint (graphview_widget_get_selected (a), ==, item);
  assert_in_step ("selecting in the right pane");

  /* Each legend whole, unscaled, inside the legends' strip under both graphs; side by side
   * under their own panes where they fit, else stacked one above the other. */
  test_ui_pump (200);
  GtkWidget *legends = app_compare_view_get_legends (view);
  g_assert_true (gtk_widget_get_mapped (legends));
  int lw = gtk_widget_get_width (legends), lh = gtk_widget_get_height (legends);
  graphene_rect_t drawn[2];
  for (guint pane = 0; pane < 2; pane++)
    {
      GraphviewWidget *graph = app_compare_view_get_pane (view, pane);
      graphene_rect_t *d = &drawn[pane], bounds, pane_bounds;
      g_assert_true (app_compare_view_get_legend_rect (view, pane, d));
      g_test_message ("%dx%d: legend %u drawn at %.0f,%.0f %.0fx%.0f in %dx%d", width, height,
                      pane, d->origin.x, d->origin.y, d->size.width, d->size.height, lw, lh);
      g_assert_cmpfloat (d->origin.x, >=, 0);
      g_assert_cmpfloat (d->origin.y, >=, 0);
      g_assert_cmpfloat (d->origin.x + d->size.width, <=, lw);
      g_assert_cmpfloat (d->origin.y + d->size.height, <=, lh);
      /* Its natural size, drawn here: not shrunk (graphene keeps floats). */
      cairo_surface_t *s = cairo_recording_surface_create (CAIRO_CONTENT_COLOR_ALPHA, NULL);
      cairo_t *cr = cairo_create (s);
      double nw, nh;
      graphview_renderer_draw_legend (graphview_widget_get_renderer (graph), cr, 0, 0, &nw, &nh);
      cairo_destroy (cr);
      cairo_surface_destroy (s);
      g_assert_cmpfloat_with_epsilon (d->size.width, nw, 1e-3);
      g_assert_cmpfloat_with_epsilon (d->size.height, nh, 1e-3);
      /* Under the graph, not over it. */
      g_assert_true (gtk_widget_compute_bounds (legends, GTK_WIDGET (graph), &bounds));
      g_assert_cmpfloat (bounds.origin.y, >=, gtk_widget_get_height (GTK_WIDGET (graph)));
      g_assert_true (gtk_widget_compute_bounds (GTK_WIDGET (graph), legends, &pane_bounds));
      if (nw + 8 <= pane_bounds.size.width)
        {
          /* Under its own pane. */
          g_assert_cmpfloat (d->origin.x, >=, pane_bounds.origin.x);
          g_assert_cmpfloat (d->origin.x + d->size.width, <=,
                             pane_bounds.origin.x + pane_bounds.size.width);
        }
    }
  /* The two do not overlap. */
  g_assert_false (graphene_rect_intersection (&drawn[0], &drawn[1], NULL));
  g_autofree char *file = g_strdup_printf ("ui-compare-%dx%d.png", width, height);
  photograph (GTK_WIDGET (window), file);
}

/* Escape: the view holds it in the capture phase (before a pane takes it to clear its
 * selection); it leaves compare mode and the toggle goes off. */
static void
press_escape (void)
{
  AppCompareView *view = compare_view ();
  GtkEventController *shortcuts = app_compare_view_get_shortcuts (view);
  g_assert_true (GTK_IS_SHORTCUT_CONTROLLER (shortcuts));
  g_assert_true (gtk_event_controller_get_widget (shortcuts) == GTK_WIDGET (view));
  g_assert_cmpint (gtk_event_controller_get_propagation_phase (shortcuts), ==, GTK_PHASE_CAPTURE);
  g_autoptr (GtkShortcutTrigger) escape = gtk_keyval_trigger_new (GDK_KEY_Escape, 0);
  GListModel *list = G_LIST_MODEL (shortcuts);
  gboolean found = FALSE;
  for (guint i = 0; i < g_list_model_get_n_items (list) && !found; i++)
    {
      g_autoptr (GtkShortcut) shortcut = g_list_model_get_item (list, i);
      if (!gtk_shortcut_trigger_equal (gtk_shortcut_get_trigger (shortcut), escape))
        continue;
      found = TRUE;
      g_assert_true (gtk_shortcut_action_activate (gtk_shortcut_get_action (shortcut), 0,
                                                   GTK_WIDGET (view), NULL));
    }
  g_assert_true (found);
}

static void
assert_left_compare (void)
{
  g_assert_cmpstr (app_window_get_mode (window), ==, "plan");
  GVariant *state = g_action_group_get_action_state (G_ACTION_GROUP (window), "compare");
  g_assert_false (g_variant_get_boolean (state));
  g_variant_unref (state);
}

static GtkToggleButton *
find_compare_toggle (GtkWidget *widget)
{
  if (GTK_IS_TOGGLE_BUTTON (widget)
      && g_strcmp0 (gtk_actionable_get_action_name (GTK_ACTIONABLE (widget)), "win.compare") == 0)
    return GTK_TOGGLE_BUTTON (widget);
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    {
      GtkToggleButton *found = find_compare_toggle (c);
      if (found)
        return found;
    }
  return NULL;
}

static void
test_compare (gconstpointer data)
{
  const int *size = data;
  check_compare (size[0], size[1]);
  /* The focus is inside the view, where Escape reaches its controller. */
  GtkWidget *focus = gtk_root_get_focus (GTK_ROOT (window));
  g_assert_nonnull (focus);
  g_assert_true (gtk_widget_is_ancestor (focus, GTK_WIDGET (compare_view ())));
  press_escape ();
  assert_left_compare ();

  enter_compare ();
  GtkWidget *close = app_compare_view_get_close_button (compare_view ());
  g_assert_true (gtk_widget_get_mapped (close));
  g_assert_true (gtk_widget_get_sensitive (close));
  g_signal_emit_by_name (close, "clicked");
  assert_left_compare ();

  /* The header's toggle opens it and shows it on, and goes off when Escape leaves. */
  GtkToggleButton *toggle = find_compare_toggle (GTK_WIDGET (window));
  g_assert_nonnull (toggle);
  g_assert_false (gtk_toggle_button_get_active (toggle));
  g_signal_emit_by_name (toggle, "clicked");
  g_assert_cmpstr (app_window_get_mode (window), ==, "compare");
  g_assert_true (gtk_toggle_button_get_active (toggle));
  test_ui_wait_for (panes_ready, NULL, 60, "both panes' layouts");
  press_escape ();
  assert_left_compare ();
  g_assert_false (gtk_toggle_button_get_active (toggle));
}

/* The totals bar ---------------------------------------------------------------------------- */

static void
collect_labels (GtkWidget *widget, GPtrArray *labels)
{
  if (GTK_IS_LABEL (widget))
    g_ptr_array_add (labels, widget);
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    collect_labels (c, labels);
}

/* Every shown label has its natural width (nothing ellipsized or cut), and its natural height
 * for that width, inside the window. */
static void
assert_labels_whole (int width, int height)
{
  GtkWidget *bar = GTK_WIDGET (totals_bar ());
  test_ui_pump (200);
  g_assert_true (gtk_widget_get_mapped (bar));
  graphene_rect_t bar_bounds;
  g_assert_true (gtk_widget_compute_bounds (bar, GTK_WIDGET (window), &bar_bounds));
  g_assert_cmpfloat (bar_bounds.origin.y + bar_bounds.size.height, <=, height);
  g_assert_cmpfloat (bar_bounds.origin.x + bar_bounds.size.width, <=, width);
  g_autoptr (GPtrArray) labels = g_ptr_array_new ();
  collect_labels (bar, labels);
  guint n = 0;
  for (guint i = 0; i < labels->len; i++)
    {
      GtkWidget *label = g_ptr_array_index (labels, i);
      if (!gtk_widget_get_mapped (label))
        continue;
      n++;
      int nat_w, nat_h;
      gtk_widget_measure (label, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &nat_w, NULL, NULL);
      int w = gtk_widget_get_width (label);
      gtk_widget_measure (label, GTK_ORIENTATION_VERTICAL, w, NULL, &nat_h, NULL, NULL);
      const char *tooltip = gtk_widget_get_tooltip_text (label);
      gboolean whole = w >= nat_w && gtk_widget_get_height (label) >= nat_h;
      /* A label cut short must carry its whole text in its tooltip. */
      if (!whole && (tooltip == NULL || !strstr (tooltip, gtk_label_get_text (GTK_LABEL (label)))))
        g_error ("%dx%d: totals label \"%s\" is %dx%d, needs %dx%d, and no tooltip holds it",
                 width, height, gtk_label_get_text (GTK_LABEL (label)), w,
                 gtk_widget_get_height (label), nat_w, nat_h);
      graphene_rect_t b;
      g_assert_true (gtk_widget_compute_bounds (label, GTK_WIDGET (window), &b));
      g_assert_cmpfloat (b.origin.x + b.size.width, <=, width);
      g_assert_cmpfloat (b.origin.y + b.size.height, <=, height);
    }
  /* Step, compute, communication, collectives, memory and its breakdown. */
  g_assert_cmpuint (n, >=, 6);
}

static void
test_totals_whole (gconstpointer data)
{
  const int *size = data;
  resize (size[0], size[1]);
  g_assert_cmpstr (app_window_get_mode (window), ==, "plan");
  assert_labels_whole (size[0], size[1]);
  g_autofree char *file = g_strdup_printf ("ui-compare-plan-%dx%d.png", size[0], size[1]);
  photograph (GTK_WIDGET (window), file);
}

/* gpt2-tiny's memory per device on dp=2,mp=2 with megatron, by hand. f32 Adam: weights 4 B,
 * gradients 4 B, m and v 8 B a parameter. megatron splits over mp=2 the token and position
 * tables, each layer's c_attn and c_fc (weights and biases) and the weights of both c_proj
 * (their biases and the norms stay whole). */
#define H 64
#define V 512
#define P 128
#define LAYERS 2
static const guint64 layer_params_mp2 = 2 * (2 * H)                 /* ln_1, ln_2 */
                                        + (H * 3 * H + 3 * H) / 2   /* c_attn */
                                        + (H * H) / 2 + H           /* attn.c_proj */
                                        + (H * 4 * H + 4 * H) / 2   /* c_fc */
                                        + (4 * H * H) / 2 + H;      /* mlp.c_proj */
/* Activations kept for the backward pass, one micro-batch of b sequences of s tokens (README
 * "Training step and memory", Korthikanti et al. 2022 with FlashAttention): per layer the
 * two norm inputs and the two GEMM inputs they feed (4 sbh, whole), q, k, v and the attention
 * output (4 sbh / t), the GeLU's input and output (8 sbh / t), all f32; the fp32 logsumexp
 * (a s b / t); two 1-byte dropout masks (2 sbh). */
static guint64
layer_activations (guint64 s, guint64 b, guint64 h, guint64 a, guint64 t)
{
  return 4 * (4 * s * b * h + 12 * s * b * h / t) + 4 * a * s * b / t + 2 * s * b * h;
}

typedef struct
{
  guint64 parameters, gradients, optimizer, activations, loss, total;
} Memory;

/* @logits: the local logits of the stage that computes the loss (0 elsewhere). Hugging
 * Face's unfused cross-entropy holds 12 bytes a logit at the backward pass's peak (its fp32
 * copy, the log-softmax kept for the backward pass and its gradient; planner/README.md). */
static Memory
adam_f32 (guint64 params, guint64 activations, guint64 logits)
{
  return (Memory){ 4 * params, 4 * params, 8 * params, activations, 12 * logits,
                   16 * params + activations + 12 * logits };
}

static char *
expected_breakdown (const Memory *m)
{
  g_autofree char *p = planner_format_bytes (m->parameters);
  g_autofree char *g = planner_format_bytes (m->gradients);
  g_autofree char *o = planner_format_bytes (m->optimizer);
  g_autofree char *a = planner_format_bytes (m->activations);
  return g_strdup_printf ("Parameters %s · gradients %s · optimizer %s · activations %s", p, g,
                          o, a);
}

static void
assert_memory (const PlannerMemory *got, const Memory *want)
{
  g_assert_cmpuint (got->parameters, ==, want->parameters);
  g_assert_cmpuint (got->gradients, ==, want->gradients);
  g_assert_cmpuint (got->optimizer, ==, want->optimizer);
  g_assert_cmpuint (got->activations, ==, want->activations);
  g_assert_cmpuint (got->loss, ==, want->loss);
  g_assert_cmpuint (got->total, ==, want->total);
}

static gboolean
is_red (const guchar rgb[3])
{
  return rgb[0] > 160 && rgb[1] < 90 && rgb[2] < 90;
}

static void
test_memory_over_budget (void)
{
  resize (1280, 720);
  AppTotalsBar *bar = totals_bar ();
  /* dp=2 halves the batch: b = 4 per device; t = 2. */
  guint64 s = P, b = 8 / 2, t = 2;
  guint64 params = V * H / t + P * H / t + LAYERS * layer_params_mp2 + 2 * H /* ln_f */;
  guint64 acts = LAYERS * layer_activations (s, b, H, 4, t)
                 + s * b * H            /* the embeddings' dropout mask */
                 + 4 * s * b * H        /* ln_f's input */
                 + 4 * s * b * H        /* lm_head's input */
                 + 4 * s * b * V / t;   /* the logits, split over the vocabulary */
  Memory want = adam_f32 (params, acts, s * b * V / t);
  g_assert_cmpuint (want.total, ==, 4715520 + 1572864);
  assert_memory (&planner_plan_get_totals (plan ())->memory, &want);

  /* On an 80 GB device it fits: no red. */
  g_assert_false (app_totals_bar_get_over_budget (bar));
  GtkWidget *level = GTK_WIDGET (app_totals_bar_get_memory_bar (bar));
  g_assert_false (gtk_widget_has_css_class (level, "over-budget"));
  g_autofree char *breakdown = expected_breakdown (&want);
  g_assert_cmpstr (app_totals_bar_get_memory_breakdown (bar), ==, breakdown);
  g_assert_null (app_totals_bar_get_memory_pipeline (bar));

  /* The same on a device of 4 MB (4,000,000 B < 4,715,520 B). */
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerHardware) small = planner_hardware_new_builtin ("h100-sxm", &error);
  g_assert_no_error (error);
  planner_hardware_set_name (small, "h100-4mb");
  planner_hardware_set_memory_GB (small, 0.004);
  g_autofree char *path = g_build_filename (tmpdir, "h100-4mb.json", NULL);
  g_assert_true (planner_hardware_save_file (small, path, &error));
  g_assert_no_error (error);
  load ("dp=2,mp=2", path, 4000000);
  g_assert_cmpuint (planner_hardware_memory_bytes (planner_plan_get_hardware (plan ())), ==,
                    4000000);
  assert_memory (&planner_plan_get_totals (plan ())->memory, &want);
  test_ui_pump (200);
  g_assert_true (app_totals_bar_get_over_budget (bar));
  g_assert_true (gtk_widget_has_css_class (level, "over-budget"));
  g_assert_cmpfloat (gtk_level_bar_get_value (GTK_LEVEL_BAR (level)), ==, 1.0);
  g_assert_cmpstr (app_totals_bar_get_memory_breakdown (bar), ==, breakdown);
  g_autofree char *text = app_totals_bar_dup_text (bar);
  g_autofree char *used = planner_format_bytes (want.total);
  g_autofree char *cap = planner_format_bytes (4000000);
  g_autofree char *figure = g_strdup_printf ("%s of %s: does not fit", used, cap);
  g_assert_nonnull (strstr (text, figure));
  g_assert_nonnull (strstr (text, breakdown));
  /* Red as drawn, not only as a class name. */
  guchar rgb[3];
  filled_colour (level, rgb);
  g_test_message ("over budget: the level bar's fill is #%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  if (!is_red (rgb))
    g_error ("the level bar of a plan over budget is #%02x%02x%02x, not red", rgb[0], rgb[1],
             rgb[2]);
  assert_labels_whole (1280, 720);
  photograph (GTK_WIDGET (totals_bar ()), "ui-compare-over-budget.png");
}

/* pp=2,dp=1,mp=2: stage 0 holds the embeddings and layer 0, stage 1 layer 1, ln_f and the
 * tied head's copy of the token table; 1F1B with one micro-batch keeps one in flight on
 * each. b = 8 (dp=1). */
static void
test_memory_pipeline (void)
{
  load ("pp=2,dp=1,mp=2", "h100-sxm", 80000000000);
  test_ui_pump (200);
  AppTotalsBar *bar = totals_bar ();
  guint64 s = P, b = 8, t = 2;
  guint64 layer_acts = layer_activations (s, b, H, 4, t);
  Memory stage0 = adam_f32 (V * H / t + P * H / t + layer_params_mp2,
                            layer_acts + s * b * H /* embedding dropout mask */, 0);
  Memory stage1 = adam_f32 (layer_params_mp2 + 2 * H + V * H / t,
                            layer_acts + 4 * s * b * H + 4 * s * b * H + 4 * s * b * V / t,
                            s * b * V / t);
  g_assert_cmpuint (stage0.total, ==, 3556864);
  g_assert_cmpuint (stage1.total, ==, 5000704 + 3145728);
  /* The plan's memory is the fullest stage's; the bar says so and lists both. */
  assert_memory (&planner_plan_get_totals (plan ())->memory, &stage1);
  g_autofree char *breakdown = expected_breakdown (&stage1);
  g_assert_cmpstr (app_totals_bar_get_memory_breakdown (bar), ==, breakdown);
  g_autofree char *s0 = planner_format_bytes (stage0.total);
  g_autofree char *s1 = planner_format_bytes (stage1.total);
  g_autofree char *line = g_strdup_printf (
      "Pipeline of 2 stages: stage 1 holds the most, 1 micro-batches in flight; per stage %s, %s",
      s0, s1);
  g_assert_cmpstr (app_totals_bar_get_memory_pipeline (bar), ==, line);
  g_assert_false (app_totals_bar_get_over_budget (bar));
  static const int sizes[][2] = { { 1280, 720 }, { 1920, 1080 } };
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      resize (sizes[i][0], sizes[i][1]);
      assert_labels_whole (sizes[i][0], sizes[i][1]);
      g_autofree char *file
          = g_strdup_printf ("ui-compare-pipeline-%dx%d.png", sizes[i][0], sizes[i][1]);
      photograph (GTK_WIDGET (window), file);
    }
}

static void
test_close (void)
{
  g_clear_object (&other_plan);
  gtk_window_destroy (GTK_WINDOW (window));
  for (int i = 0; i < 50; i++)
    g_main_context_iteration (NULL, FALSE);
}

int
main (int argc, char *argv[])
{
  tmpdir = g_dir_make_tmp ("shardscope-ui-compare-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (test_ui_log_fatal, NULL);
  app_application_init_environment ();

  static const int small[2] = { 1280, 720 }, large[2] = { 1920, 1080 };
  g_test_add_func ("/ui/compare/start", test_start);
  g_test_add_data_func ("/ui/compare/totals-whole-1280x720", small, test_totals_whole);
  g_test_add_data_func ("/ui/compare/totals-whole-1920x1080", large, test_totals_whole);
  g_test_add_data_func ("/ui/compare/compare-1280x720", small, test_compare);
  g_test_add_data_func ("/ui/compare/compare-1920x1080", large, test_compare);
  g_test_add_func ("/ui/compare/memory-over-budget", test_memory_over_budget);
  g_test_add_func ("/ui/compare/memory-pipeline", test_memory_pipeline);
  g_test_add_func ("/ui/compare/close", test_close);
  int status = g_test_run ();
  g_clear_object (&app);
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
