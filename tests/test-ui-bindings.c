/* test-ui-bindings.c: the window's state properties and what app-window.ui binds to them,
 * under Xvfb (suite ui, issue 15).
 *
 * The window says what its document and store allow ("has-document", "has-plan",
 * "can-save", "can-undo", "can-redo", "can-pin", "can-unpin"), its title and subtitle, why
 * the last plan was refused, its mode, the recovery bar and the trial card, as properties
 * that notify once per change; the template binds its widgets to them (and the spinner to
 * the document's own "busy" through the window's "document"), the win.* actions are
 * enabled by them. Each case changes the state through the document or the window as the
 * app does, then checks the property, how many times it was notified, and the widget that
 * shows it: a header button's sensitivity, a revealer, a label, the title, the stack's page.
 * The expected texts are written out by hand from the model, mesh and profile names.
 */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "app-application.h"
#include "app-autosave.h"
#include "app-inspector.h"
#include "app-schedule-chart.h"
#include "app-suggest-dialog.h"
#include "app-trial-dialog.h"
#include "app-timeline.h"
#include "app-window.h"
#include "planner-store.h"

#include "test-util.h"
#include "test-ui-util.h"

#define PIN_OP "transformer.h.0.mlp.c_fc"

static AppApplication *app;
static AppWindow *window;
static char *tmpdir;
static char *db_path;
static PlannerGraph *graph;
static AppDocument *document;

/* ---- helpers ------------------------------------------------------------------------ */

static void
count_notify (GObject *object, GParamSpec *pspec, gpointer data)
{
  (*(guint *) data)++;
}

/* Counts @object's "notify::@property" into @counter (zeroed) until the object goes. */
static void
watch (gpointer object, const char *property, guint *counter)
{
  *counter = 0;
  g_autofree char *signal = g_strconcat ("notify::", property, NULL);
  g_signal_connect (object, signal, G_CALLBACK (count_notify), counter);
}

static void
unwatch (gpointer object, guint *counter)
{
  g_signal_handlers_disconnect_by_data (object, counter);
}

static gboolean
get_bool (const char *property)
{
  gboolean value = FALSE;
  g_object_get (window, property, &value, NULL);
  return value;
}

static GtkWidget *
part (const char *name)
{
  return app_window_get_part (window, name);
}

/* The first button in the window (depth first) whose action is @action: in the header bar
 * for every action asked here. */
static GtkWidget *
find_button (GtkWidget *widget, const char *action)
{
  if (GTK_IS_BUTTON (widget)
      && g_strcmp0 (gtk_actionable_get_action_name (GTK_ACTIONABLE (widget)), action) == 0)
    return widget;
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child;
       child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_button (child, action);
      if (found)
        return found;
    }
  return NULL;
}

static GtkWidget *
find_type (GtkWidget *widget, GType type)
{
  if (G_TYPE_CHECK_INSTANCE_TYPE (widget, type))
    return widget;
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child;
       child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_type (child, type);
      if (found)
        return found;
    }
  return NULL;
}

/* The timeline's description: its one label with markup (the speed dropdown has one
 * without). */
static GtkWidget *
find_label (GtkWidget *widget)
{
  if (GTK_IS_LABEL (widget) && gtk_label_get_use_markup (GTK_LABEL (widget)))
    return widget;
  for (GtkWidget *child = gtk_widget_get_first_child (widget); child;
       child = gtk_widget_get_next_sibling (child))
    {
      GtkWidget *found = find_label (child);
      if (found)
        return found;
    }
  return NULL;
}

/* The timeline's one toggle (play). */

static GtkWidget *
find_toggle (GtkWidget *timeline)
{
  return find_type (timeline, GTK_TYPE_TOGGLE_BUTTON);
}

/* The template child @name of @widget, of the template of @type. */
static GtkWidget *
dialog_part (gpointer widget, GType type, const char *name)
{
  GObject *child = gtk_widget_get_template_child (GTK_WIDGET (widget), type, name);
  g_assert_true (GTK_IS_WIDGET (child));
  return GTK_WIDGET (child);
}

/* Whether the timeline's controls can be used (its box is bound to "has-steps"). */
static gboolean
timeline_sensitive (void)
{
  GtkWidget *play = find_toggle (part ("timeline"));
  GtkWidget *scale = find_type (part ("timeline"), GTK_TYPE_SCALE);
  g_assert_cmpint (gtk_widget_is_sensitive (play), ==, gtk_widget_is_sensitive (scale));
  return gtk_widget_is_sensitive (play);
}

static gboolean
button_sensitive (const char *action)
{
  GtkWidget *button = find_button (GTK_WIDGET (window), action);
  if (button == NULL)
    g_error ("no button for %s", action);
  return gtk_widget_get_sensitive (button);
}

static gboolean
action_enabled (const char *name)
{
  return g_action_get_enabled (g_action_map_lookup_action (G_ACTION_MAP (window), name));
}

static const char *
title (void)
{
  return adw_window_title_get_title (ADW_WINDOW_TITLE (part ("window_title")));
}

static const char *
subtitle (void)
{
  return adw_window_title_get_subtitle (ADW_WINDOW_TITLE (part ("window_title")));
}

static gboolean
revealed (const char *name)
{
  return gtk_revealer_get_reveal_child (GTK_REVEALER (part (name)));
}

static gboolean
spinner_on (void)
{
  GtkWidget *spinner = part ("spinner");
  g_assert_cmpint (gtk_widget_get_visible (spinner), ==,
                   gtk_spinner_get_spinning (GTK_SPINNER (spinner)));
  return gtk_widget_get_visible (spinner);
}

static gboolean
idle (gpointer data)
{
  return !app_document_get_busy (APP_DOCUMENT (data));
}

static void
wait_idle (AppDocument *doc)
{
  test_ui_wait_for (idle, doc, 120, "the propagation");
}

/* ---- cases -------------------------------------------------------------------------- */

/* A window with neither store nor document: nothing to do but make or open a plan. */
static void
test_empty (void)
{
  app = app_application_new ();
  g_autoptr (GError) error = NULL;
  g_assert_true (g_application_register (G_APPLICATION (app), NULL, &error));
  g_assert_no_error (error);
  /* Not activated: that would load the example model; this window starts bare. */
  window = app_window_new (GTK_APPLICATION (app));
  gtk_window_set_default_size (GTK_WINDOW (window), 1280, 800);
  gtk_window_present (GTK_WINDOW (window));
  test_ui_pump (100);

  g_assert_cmpstr (title (), ==, "Shardscope");
  /* libadwaita keeps an unset subtitle as "" (and hides it). */
  g_assert_cmpstr (subtitle (), ==, "");
  g_assert_cmpstr (app_window_get_mode (window), ==, "empty");
  g_assert_cmpstr (gtk_stack_get_visible_child_name (GTK_STACK (part ("mode_stack"))), ==,
                   "empty");
  const char *off[] = { "has-document", "has-plan",  "can-save",  "can-undo",
                        "can-redo",     "can-pin",   "can-unpin", "has-error",
                        "compare-mode", "offers-recovery", "show-trial-results" };
  for (guint i = 0; i < G_N_ELEMENTS (off); i++)
    if (get_bool (off[i]))
      g_error ("%s is on in an empty window", off[i]);
  const char *disabled[] = { "undo", "redo", "save", "save-as", "export", "trial-run",
                             "compare", "pin", "unpin", "suggest-plans", "edit-hardware" };
  for (guint i = 0; i < G_N_ELEMENTS (disabled); i++)
    if (action_enabled (disabled[i]))
      g_error ("win.%s is enabled in an empty window", disabled[i]);
  g_assert_false (button_sensitive ("win.save"));
  g_assert_false (button_sensitive ("win.trial-run"));
  g_assert_false (button_sensitive ("win.undo"));
  g_assert_false (spinner_on ());
  g_assert_false (revealed ("error_revealer"));
  g_assert_false (revealed ("recovery_revealer"));
  g_assert_false (gtk_widget_get_visible (part ("trial_results")));
  g_assert_false (gtk_widget_get_visible (part ("totals_bar")));
  g_assert_false (gtk_widget_get_visible (part ("cost_chart")));
  g_assert_false (timeline_sensitive ());
}

/* A store whose autosave a session that did not end left: the bar offers it back; Discard
 * hides it. */
static void
test_recovery (void)
{
  g_autofree char *autosave = app_autosave_path_for_store (db_path);
  g_assert_true (g_file_set_contents (autosave, "{}", -1, NULL));
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerStore) store = planner_store_open (db_path, &error);
  g_assert_no_error (error);

  guint n = 0, n_save = 0;
  watch (window, "offers-recovery", &n);
  watch (window, "can-save", &n_save);
  app_window_set_store (window, store);
  g_assert_true (get_bool ("offers-recovery"));
  g_assert_cmpuint (n, ==, 1);
  g_assert_true (revealed ("recovery_revealer"));
  g_assert_true (app_window_get_offers_recovery (window));
  /* A store without a plan saves nothing. */
  g_assert_cmpuint (n_save, ==, 0);
  g_assert_false (action_enabled ("save"));

  gtk_widget_activate_action (GTK_WIDGET (window), "win.discard-autosave", NULL);
  g_assert_false (get_bool ("offers-recovery"));
  g_assert_cmpuint (n, ==, 1 + 1);
  g_assert_false (revealed ("recovery_revealer"));
  unwatch (window, &n);
  unwatch (window, &n_save);
}

/* A document before its first plan, then planned: the title names it, the subtitle says
 * model, mesh, profile and policy; the plan enables what needs one and shows the plan page;
 * the spinner turns while it propagates. */
static void
test_document (void)
{
  graph = test_util_model ("gpt2-tiny", NULL);
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2");
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  document = app_document_new (graph, mesh, hw, NULL);

  guint n_doc = 0, n_plan = 0, n_title = 0, n_subtitle = 0, n_mode = 0;
  watch (window, "has-document", &n_doc);
  watch (window, "has-plan", &n_plan);
  watch (window, "display-title", &n_title);
  watch (window, "display-subtitle", &n_subtitle);
  watch (window, "mode", &n_mode);
  app_window_set_document (window, document);
  g_assert_cmpuint (n_doc, ==, 1);
  g_assert_cmpuint (n_plan, ==, 0);
  g_assert_cmpuint (n_title, ==, 1);
  g_assert_cmpuint (n_subtitle, ==, 1);
  g_assert_cmpstr (title (), ==, "gpt2-tiny dp=2");
  g_assert_cmpstr (subtitle (), ==, "gpt2-tiny · dp=2 · h100-sxm · no policy");
  g_assert_true (action_enabled ("suggest-plans"));
  g_assert_true (action_enabled ("edit-hardware"));
  g_assert_false (action_enabled ("save-as"));
  g_assert_false (button_sensitive ("win.trial-run"));
  g_assert_false (button_sensitive ("win.save"));
  g_assert_false (gtk_widget_get_visible (part ("totals_bar")));
  g_assert_false (gtk_widget_get_visible (part ("cost_chart")));
  /* No plan yet: still the empty page. */
  g_assert_cmpuint (n_mode, ==, 0);
  g_assert_cmpstr (gtk_stack_get_visible_child_name (GTK_STACK (part ("mode_stack"))), ==,
                   "empty");

  /* Busy from the call until the plan arrives on the GTK thread. */
  app_document_replan (document);
  g_assert_true (spinner_on ());
  wait_idle (document);
  g_assert_false (spinner_on ());
  g_assert_nonnull (app_document_get_plan (document));
  g_assert_true (get_bool ("has-plan"));
  g_assert_cmpuint (n_plan, ==, 1);
  g_assert_true (get_bool ("can-save"));
  g_assert_true (button_sensitive ("win.save"));
  g_assert_true (button_sensitive ("win.trial-run"));
  g_assert_true (action_enabled ("export"));
  g_assert_true (action_enabled ("compare"));
  g_assert_true (gtk_widget_get_visible (part ("totals_bar")));
  g_assert_true (gtk_widget_get_visible (part ("cost_chart")));
  g_assert_cmpuint (n_mode, ==, 1);
  g_assert_cmpstr (app_window_get_mode (window), ==, "plan");
  g_assert_cmpstr (gtk_stack_get_visible_child_name (GTK_STACK (part ("mode_stack"))), ==,
                   "plan");
  /* The plan changed none of the texts. */
  g_assert_cmpuint (n_title, ==, 1);
  g_assert_cmpuint (n_subtitle, ==, 1);
  unwatch (window, &n_doc);
  unwatch (window, &n_plan);
  unwatch (window, &n_title);
  unwatch (window, &n_subtitle);
  unwatch (window, &n_mode);
}

/* Unsaved edits put "• " before the name; a rename and another profile follow. */
static void
test_title (void)
{
  guint n_title = 0, n_subtitle = 0;
  watch (window, "display-title", &n_title);
  watch (window, "display-subtitle", &n_subtitle);
  app_document_mark_modified (document);
  g_assert_cmpstr (title (), ==, "• gpt2-tiny dp=2");
  g_assert_cmpuint (n_title, ==, 1);
  /* Marked again: nothing changed, nothing notified. */
  app_document_mark_modified (document);
  g_assert_cmpuint (n_title, ==, 1);
  app_document_set_name (document, "tiny");
  g_assert_cmpstr (title (), ==, "• tiny");
  g_assert_cmpuint (n_title, ==, 2);
  g_assert_cmpuint (n_subtitle, ==, 0);

  g_autoptr (PlannerHardware) a100 = test_util_hardware ("a100-sxm");
  app_document_set_hardware (document, a100);
  g_assert_cmpstr (subtitle (), ==, "gpt2-tiny · dp=2 · a100-sxm · no policy");
  g_assert_cmpuint (n_subtitle, ==, 1);
  wait_idle (document);
  /* The re-costed plan leaves both as they are. */
  g_assert_cmpuint (n_subtitle, ==, 1);
  g_assert_cmpuint (n_title, ==, 2);
  g_assert_cmpstr (title (), ==, "• tiny");
  unwatch (window, &n_title);
  unwatch (window, &n_subtitle);
}

/* Selecting an op enables Pin; pinning it enables Unpin and Undo; a second edit leaves
 * can-undo as it is, without a notify; undo enables Redo. */
static void
test_pins (void)
{
  guint n_pin = 0, n_unpin = 0, n_undo = 0, n_redo = 0, n_doc_undo = 0;
  watch (window, "can-pin", &n_pin);
  watch (window, "can-unpin", &n_unpin);
  watch (window, "can-undo", &n_undo);
  watch (window, "can-redo", &n_redo);
  watch (document, "can-undo", &n_doc_undo);
  int op = planner_graph_find_op (graph, PIN_OP);
  g_assert_cmpint (op, >=, 0);
  app_document_set_selected_op (document, op);
  g_assert_true (get_bool ("can-pin"));
  g_assert_cmpuint (n_pin, ==, 1);
  g_assert_true (action_enabled ("pin"));
  g_assert_false (action_enabled ("unpin"));
  g_assert_false (button_sensitive ("win.undo"));

  g_autoptr (GError) error = NULL;
  g_assert_true (app_document_pin (document, PIN_OP, "[dp,_,_],[_,_]", &error));
  g_assert_no_error (error);
  g_assert_true (get_bool ("can-unpin"));
  g_assert_cmpuint (n_unpin, ==, 1);
  g_assert_true (action_enabled ("unpin"));
  g_assert_true (get_bool ("can-undo"));
  g_assert_cmpuint (n_undo, ==, 1);
  g_assert_cmpuint (n_doc_undo, ==, 1);
  g_assert_true (button_sensitive ("win.undo"));
  g_assert_false (button_sensitive ("win.redo"));
  wait_idle (document);

  /* Another layout of the same op: still undoable, so neither says anything. */
  g_assert_true (app_document_pin (document, PIN_OP, "[_,_,_],[_,_]", &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_doc_undo, ==, 1);
  g_assert_cmpuint (n_undo, ==, 1);
  g_assert_cmpuint (n_unpin, ==, 1);
  wait_idle (document);

  /* Unpinned: Unpin goes at once, before the new plan, though Undo stays as it was. */
  g_assert_true (app_document_unpin (document, PIN_OP));
  g_assert_false (get_bool ("can-unpin"));
  g_assert_cmpuint (n_unpin, ==, 2);
  g_assert_false (action_enabled ("unpin"));
  g_assert_cmpuint (n_undo, ==, 1);
  wait_idle (document);
  /* The unpin undone: pinned again. */
  app_document_undo (document);
  g_assert_true (get_bool ("can-unpin"));
  g_assert_cmpuint (n_unpin, ==, 3);
  wait_idle (document);

  app_document_undo (document);
  g_assert_true (get_bool ("can-redo"));
  g_assert_cmpuint (n_redo, ==, 1);
  g_assert_true (button_sensitive ("win.redo"));
  g_assert_true (button_sensitive ("win.undo"));
  /* Pinned still (the first layout). */
  g_assert_true (get_bool ("can-unpin"));
  app_document_undo (document);
  g_assert_false (get_bool ("can-undo"));
  g_assert_cmpuint (n_undo, ==, 2);
  g_assert_cmpuint (n_doc_undo, ==, 2);
  g_assert_false (button_sensitive ("win.undo"));
  /* Back to no pin on the op. */
  g_assert_false (get_bool ("can-unpin"));
  g_assert_cmpuint (n_unpin, ==, 4);
  wait_idle (document);

  app_document_set_selected_op (document, -1);
  g_assert_false (get_bool ("can-pin"));
  g_assert_cmpuint (n_pin, ==, 2);
  g_assert_false (action_enabled ("pin"));
  unwatch (window, &n_pin);
  unwatch (window, &n_unpin);
  unwatch (window, &n_undo);
  unwatch (window, &n_redo);
  unwatch (document, &n_doc_undo);
}

/* A pin the inspector refuses: the reason under the entry, gone with the next good pin. */
static void
test_inspector_error (void)
{
  GtkWidget *inspector = part ("inspector");
  GtkWidget *entry = dialog_part (inspector, APP_TYPE_INSPECTOR, "pin_entry");
  GtkWidget *label = dialog_part (inspector, APP_TYPE_INSPECTOR,
                                  "pin_error_label");
  app_document_set_selected_op (document, planner_graph_find_op (graph, PIN_OP));
  g_assert_false (gtk_widget_get_visible (label));
  guint n = 0, n_has = 0;
  watch (inspector, "pin-error", &n);
  watch (inspector, "has-pin-error", &n_has);
  /* An axis the mesh dp=2 has not. */
  gtk_editable_set_text (GTK_EDITABLE (entry), "[mp,_,_],[_,_]");
  g_signal_emit_by_name (entry, "activate");
  g_autofree char *error = NULL;
  g_object_get (inspector, "pin-error", &error, NULL);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error, "mp"));
  g_assert_cmpuint (n, ==, 1);
  g_assert_cmpuint (n_has, ==, 1);
  g_assert_true (gtk_widget_get_visible (label));
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (label)), ==, error);
  g_assert_true (gtk_widget_has_css_class (entry, "error"));

  gtk_editable_set_text (GTK_EDITABLE (entry), "[dp,_,_],[_,_]");
  g_signal_emit_by_name (entry, "activate");
  g_assert_cmpuint (n, ==, 2);
  g_assert_cmpuint (n_has, ==, 2);
  g_assert_false (gtk_widget_get_visible (label));
  g_assert_false (gtk_widget_has_css_class (entry, "error"));
  unwatch (inspector, &n);
  unwatch (inspector, &n_has);
  wait_idle (document);
  app_document_undo (document);
  wait_idle (document);
  app_document_set_selected_op (document, -1);
}

/* A refused plan shows the planner's reason in the bar; the next plan hides the bar. */
static void
test_error (void)
{
  /* Micro-batches that do not split the batch: refused on a pipeline axis. */
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("pp=2");
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (AppDocument) piped = app_document_new (graph, mesh, hw, NULL);
  app_window_set_document (window, piped);
  app_document_replan (piped);
  wait_idle (piped);
  g_assert_nonnull (app_document_get_plan (piped));
  g_assert_false (revealed ("error_revealer"));
  /* A pp axis: the schedule chart shows, its summary in its label ("1F1B · 2 stages × 1
   * micro-batches · ..."). */
  GtkWidget *chart = part ("schedule_chart");
  GtkWidget *summary = dialog_part (chart, APP_TYPE_SCHEDULE_CHART, "summary_label");
  g_assert_true (gtk_widget_get_visible (chart));
  g_assert_true (g_str_has_prefix (gtk_label_get_text (GTK_LABEL (summary)), "1F1B · 2 stages"));
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (summary)), ==,
                   app_schedule_chart_get_summary (APP_SCHEDULE_CHART (chart)));

  guint n_error = 0, n_text = 0;
  watch (window, "has-error", &n_error);
  watch (window, "error-text", &n_text);
  PlannerCostConstants constants = *app_document_get_constants (piped);
  PlannerCostConstants good = constants;
  constants.micro_batches = 3;
  app_document_set_constants (piped, &constants);
  wait_idle (piped);
  g_assert_nonnull (app_document_get_error (piped));
  g_assert_true (get_bool ("has-error"));
  g_assert_cmpuint (n_error, ==, 1);
  g_assert_cmpuint (n_text, ==, 1);
  g_assert_true (revealed ("error_revealer"));
  g_autofree char *expected
      = g_strdup_printf ("The plan was refused: %s", app_document_get_error (piped));
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (part ("error_label"))), ==, expected);

  app_document_set_constants (piped, &good);
  wait_idle (piped);
  g_assert_null (app_document_get_error (piped));
  g_assert_false (get_bool ("has-error"));
  g_assert_cmpuint (n_error, ==, 2);
  g_assert_false (revealed ("error_revealer"));
  /* The text stays while the bar hides. */
  g_assert_cmpuint (n_text, ==, 1);
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (part ("error_label"))), ==, expected);
  unwatch (window, &n_error);
  unwatch (window, &n_text);

  /* No pp axis: no chart. */
  guint n_pipeline = 0;
  watch (chart, "has-pipeline", &n_pipeline);
  app_window_set_document (window, document);
  g_assert_false (gtk_widget_get_visible (chart));
  g_assert_cmpuint (n_pipeline, ==, 1);
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (summary)), ==, "");
  unwatch (chart, &n_pipeline);
}

/* The timeline: sensitive while the plan has steps; the label and its tooltip say the
 * step; the play button's icon says whether it plays. */
static void
test_timeline (void)
{
  AppTimeline *timeline = APP_TIMELINE (part ("timeline"));
  /* Megatron's pins give the propagation steps to walk. */
  g_autoptr (PlannerMesh) mp_mesh = test_util_mesh ("dp=2,mp=2");
  g_autoptr (PlannerHardware) h100 = test_util_hardware ("h100-sxm");
  g_autoptr (AppDocument) traced = app_document_new (graph, mp_mesh, h100, "megatron");
  app_window_set_document (window, traced);
  app_document_replan (traced);
  wait_idle (traced);
  PlannerPlan *plan = app_document_get_plan (traced);
  guint n_steps = planner_plan_get_n_trace_steps (plan);
  g_assert_cmpuint (n_steps, >, 1);
  g_assert_true (timeline_sensitive ());
  GtkWidget *label = find_label (GTK_WIDGET (timeline));
  g_autofree char *whole = g_strdup_printf ("Whole plan: %u steps · ", n_steps);
  g_assert_true (g_str_has_prefix (gtk_label_get_text (GTK_LABEL (label)), whole));
  g_assert_cmpstr (app_timeline_get_description (timeline), ==,
                   gtk_label_get_text (GTK_LABEL (label)));

  guint n = 0;
  watch (timeline, "description", &n);
  app_document_set_step (traced, 0);
  g_assert_cmpuint (n, ==, 1);
  g_autofree char *first = g_strdup_printf ("Step 1/%u ", n_steps);
  g_assert_true (g_str_has_prefix (gtk_label_get_text (GTK_LABEL (label)), first));
  /* The whole line, without its markup, in the tooltip. */
  g_assert_cmpstr (gtk_widget_get_tooltip_text (label), ==,
                   gtk_label_get_text (GTK_LABEL (label)));
  g_autofree char *markup = NULL;
  g_object_get (timeline, "description", &markup, NULL);
  g_assert_true (g_str_has_prefix (markup, "<b>Step 1/"));
  app_document_set_step (traced, 1);
  g_assert_cmpuint (n, ==, 2);
  g_autofree char *second = g_strdup_printf ("Step 2/%u ", n_steps);
  g_assert_true (g_str_has_prefix (gtk_label_get_text (GTK_LABEL (label)), second));

  GtkWidget *play = find_toggle (GTK_WIDGET (timeline));
  g_assert_cmpstr (gtk_button_get_icon_name (GTK_BUTTON (play)), ==,
                   "media-playback-start-symbolic");
  app_timeline_set_playing (timeline, TRUE);
  g_assert_cmpstr (gtk_button_get_icon_name (GTK_BUTTON (play)), ==,
                   "media-playback-pause-symbolic");
  app_timeline_set_playing (timeline, FALSE);
  g_assert_cmpstr (gtk_button_get_icon_name (GTK_BUTTON (play)), ==,
                   "media-playback-start-symbolic");
  app_document_set_step (traced, -1);
  g_assert_true (g_str_has_prefix (gtk_label_get_text (GTK_LABEL (label)), whole));
  unwatch (timeline, &n);

  /* A document without a plan: nothing to walk, nothing said. */
  guint n_steps_notify = 0;
  watch (timeline, "has-steps", &n_steps_notify);
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2");
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (AppDocument) unplanned = app_document_new (graph, mesh, hw, NULL);
  app_window_set_document (window, unplanned);
  g_assert_false (timeline_sensitive ());
  g_assert_cmpuint (n_steps_notify, ==, 1);
  g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (label)), ==, "");
  g_assert_false (gtk_widget_get_visible (part ("totals_bar")));
  app_window_set_document (window, traced);
  g_assert_true (timeline_sensitive ());
  g_assert_cmpuint (n_steps_notify, ==, 2);
  g_assert_true (gtk_widget_get_visible (part ("totals_bar")));
  unwatch (timeline, &n_steps_notify);
  app_window_set_document (window, document);
}

/* The spinner follows the busy of whichever document the window shows. */
static void
test_busy_follows_document (void)
{
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2");
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (AppDocument) other = app_document_new (graph, mesh, hw, NULL);
  g_assert_false (spinner_on ());
  app_document_replan (other);
  /* Busy, but not shown: the spinner stays off. */
  g_assert_false (spinner_on ());
  app_window_set_document (window, other);
  g_assert_true (spinner_on ());
  app_window_set_document (window, document);
  g_assert_false (spinner_on ());
  wait_idle (other);
  app_window_set_document (window, other);
  g_assert_false (spinner_on ());
  app_window_set_document (window, document);
}

/* Compare mode: the stack's page, the property and the header toggle; win.compare leaves. */
static void
test_compare (void)
{
  guint n_mode = 0, n_compare = 0;
  watch (window, "mode", &n_mode);
  watch (window, "compare-mode", &n_compare);
  GtkWidget *toggle = find_button (GTK_WIDGET (window), "win.compare");
  g_assert_true (GTK_IS_TOGGLE_BUTTON (toggle));
  g_assert_false (gtk_toggle_button_get_active (GTK_TOGGLE_BUTTON (toggle)));
  app_window_compare (window, app_document_get_plan (document), "A");
  g_assert_cmpstr (app_window_get_mode (window), ==, "compare");
  g_assert_cmpstr (gtk_stack_get_visible_child_name (GTK_STACK (part ("mode_stack"))), ==,
                   "compare");
  g_assert_true (get_bool ("compare-mode"));
  g_assert_cmpuint (n_mode, ==, 1);
  g_assert_cmpuint (n_compare, ==, 1);
  g_assert_true (gtk_toggle_button_get_active (GTK_TOGGLE_BUTTON (toggle)));

  gtk_widget_activate_action (GTK_WIDGET (window), "win.compare", NULL);
  g_assert_cmpstr (app_window_get_mode (window), ==, "plan");
  g_assert_cmpstr (gtk_stack_get_visible_child_name (GTK_STACK (part ("mode_stack"))), ==,
                   "plan");
  g_assert_false (get_bool ("compare-mode"));
  g_assert_cmpuint (n_mode, ==, 2);
  g_assert_cmpuint (n_compare, ==, 2);
  g_assert_false (gtk_toggle_button_get_active (GTK_TOGGLE_BUTTON (toggle)));
  unwatch (window, &n_mode);
  unwatch (window, &n_compare);
}

/* The trial card: the property shows it, its own hiding (the close button) sets the
 * property back, another document hides it. */
static void
test_trial_card (void)
{
  GtkWidget *card = part ("trial_results");
  guint n = 0;
  watch (window, "show-trial-results", &n);
  g_object_set (window, "show-trial-results", TRUE, NULL);
  g_assert_true (gtk_widget_get_visible (card));
  g_assert_cmpuint (n, ==, 1);
  /* What the card's close button does. */
  gtk_widget_set_visible (card, FALSE);
  g_assert_false (get_bool ("show-trial-results"));
  g_assert_cmpuint (n, ==, 2);

  g_object_set (window, "show-trial-results", TRUE, NULL);
  g_assert_cmpuint (n, ==, 3);
  g_autoptr (PlannerMesh) mesh = test_util_mesh ("dp=2");
  g_autoptr (PlannerHardware) hw = test_util_hardware ("h100-sxm");
  g_autoptr (AppDocument) other = app_document_new (graph, mesh, hw, NULL);
  app_window_set_document (window, other);
  g_assert_false (gtk_widget_get_visible (card));
  g_assert_false (get_bool ("show-trial-results"));
  g_assert_cmpuint (n, ==, 4);
  unwatch (window, &n);
  app_window_set_document (window, document);
}

static const char *
button_label (gpointer dialog, GType type)
{
  return gtk_button_get_label (GTK_BUTTON (dialog_part (dialog, type, "cancel_button")));
}

static gboolean
trial_can_run (gpointer data)
{
  return app_trial_dialog_get_can_run (APP_TRIAL_DIALOG (data));
}

/* The dialogs' "running" (and the trial's "can-run"): the controls and Run follow, the
 * cancel button says Cancel while a run or search goes and Close otherwise. */
static void
test_dialogs (void)
{
  GType trial_type = APP_TYPE_TRIAL_DIALOG;
  AppTrialDialog *trial = APP_TRIAL_DIALOG (
      app_trial_dialog_new (GTK_WINDOW (window), app_document_get_plan (document)));
  gtk_window_present (GTK_WINDOW (trial));
  const char *controls[] = { "backend_row", "repeat_spin", "train_switch" };
  g_assert_cmpstr (button_label (trial, trial_type), ==, "_Close");
  g_assert_true (gtk_widget_get_sensitive (dialog_part (trial, trial_type, "run_button")));
  for (guint i = 0; i < G_N_ELEMENTS (controls); i++)
    g_assert_true (gtk_widget_get_sensitive (dialog_part (trial, trial_type, controls[i])));
  guint n_running = 0, n_can_run = 0;
  watch (trial, "running", &n_running);
  watch (trial, "can-run", &n_can_run);
  app_trial_dialog_start (trial);
  g_assert_true (app_trial_dialog_get_running (trial));
  g_assert_cmpuint (n_running, ==, 1);
  g_assert_cmpuint (n_can_run, ==, 1);
  g_assert_cmpstr (button_label (trial, trial_type), ==, "_Cancel");
  g_assert_false (gtk_widget_get_sensitive (dialog_part (trial, trial_type, "run_button")));
  for (guint i = 0; i < G_N_ELEMENTS (controls); i++)
    g_assert_false (gtk_widget_get_sensitive (dialog_part (trial, trial_type, controls[i])));
  app_trial_dialog_cancel (trial);
  g_assert_cmpuint (n_running, ==, 2);
  g_assert_cmpstr (button_label (trial, trial_type), ==, "_Close");
  for (guint i = 0; i < G_N_ELEMENTS (controls); i++)
    g_assert_true (gtk_widget_get_sensitive (dialog_part (trial, trial_type, controls[i])));
  /* Run comes back once the cancelled run has let go of its memory. */
  test_ui_wait_for (trial_can_run, trial, 120, "the cancelled run to drain");
  g_assert_cmpuint (n_can_run, ==, 2);
  g_assert_true (gtk_widget_get_sensitive (dialog_part (trial, trial_type, "run_button")));
  unwatch (trial, &n_running);
  unwatch (trial, &n_can_run);
  gtk_window_destroy (GTK_WINDOW (trial));

  GType suggest_type = APP_TYPE_SUGGEST_DIALOG;
  AppSuggestDialog *suggest
      = APP_SUGGEST_DIALOG (app_suggest_dialog_new (GTK_WINDOW (window), document));
  gtk_window_present (GTK_WINDOW (suggest));
  const char *suggest_controls[] = { "search_button", "devices_spin", "list" };
  g_assert_cmpstr (button_label (suggest, suggest_type), ==, "_Close");
  watch (suggest, "running", &n_running);
  app_suggest_dialog_start (suggest);
  g_assert_cmpuint (n_running, ==, 1);
  g_assert_cmpstr (button_label (suggest, suggest_type), ==, "_Cancel");
  for (guint i = 0; i < G_N_ELEMENTS (suggest_controls); i++)
    g_assert_false (
        gtk_widget_get_sensitive (dialog_part (suggest, suggest_type, suggest_controls[i])));
  app_suggest_dialog_cancel (suggest);
  g_assert_cmpuint (n_running, ==, 2);
  g_assert_cmpstr (button_label (suggest, suggest_type), ==, "_Close");
  for (guint i = 0; i < G_N_ELEMENTS (suggest_controls); i++)
    g_assert_true (
        gtk_widget_get_sensitive (dialog_part (suggest, suggest_type, suggest_controls[i])));
  unwatch (suggest, &n_running);
  gtk_window_destroy (GTK_WINDOW (suggest));
  test_ui_pump (100);
}

static void
test_close (void)
{
  gtk_window_destroy (GTK_WINDOW (window));
  test_ui_pump (100);
  g_clear_object (&document);
  g_clear_object (&graph);
}

int
main (int argc, char *argv[])
{
  tmpdir = g_dir_make_tmp ("shardscope-ui-bindings-XXXXXX", NULL);
  db_path = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db_path, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (test_ui_log_fatal, NULL);
  app_application_init_environment ();

  g_test_add_func ("/ui/bindings/empty", test_empty);
  g_test_add_func ("/ui/bindings/recovery", test_recovery);
  g_test_add_func ("/ui/bindings/document", test_document);
  g_test_add_func ("/ui/bindings/title", test_title);
  g_test_add_func ("/ui/bindings/pins", test_pins);
  g_test_add_func ("/ui/bindings/inspector-error", test_inspector_error);
  g_test_add_func ("/ui/bindings/error", test_error);
  g_test_add_func ("/ui/bindings/timeline", test_timeline);
  g_test_add_func ("/ui/bindings/busy-follows-document", test_busy_follows_document);
  g_test_add_func ("/ui/bindings/compare", test_compare);
  g_test_add_func ("/ui/bindings/trial-card", test_trial_card);
  g_test_add_func ("/ui/bindings/dialogs", test_dialogs);
  g_test_add_func ("/ui/bindings/close", test_close);
  int status = g_test_run ();
  g_clear_object (&app);
  app_autosave_flush ();
  test_util_tmp_dir_remove (tmpdir);
  g_free (db_path);
  return status;
}
