/* test-ui-suggest.c: "Suggest Plans…" in the window, under Xvfb (suite ui).
 *
 * gpt2-tiny is loaded on dp=2,mp=2; win.suggest-plans opens the dialog with the mesh's 4
 * devices; the search runs off the GTK thread and its list must be the candidates a direct
 * planner_search() gives for the same model, hardware and count: the five meshes of 4
 * devices (dp=4,mp=1, dp=2,mp=2, dp=1,mp=4 and, with its 2 layers, pp=2 over dp=2,mp=1 and
 * dp=1,mp=2, by hand), the fitting ones in order of step time,
 * the marked best the fastest that fits (found here by a plain loop, not by the planner's
 * ranking). Opening the best makes it the window's plan. A search cancelled at once says so
 * and lists nothing.
 */
#include "config.h"

#include <math.h>

#include "app-application.h"
#include "app-suggest-dialog.h"
#include "app-window.h"
#include "planner-store.h"

#include "test-util.h"
#include "test-ui-util.h"

static AppApplication *app;
static AppWindow *window;
static char *tmpdir;



static gboolean
plan_ready (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return doc && app_document_get_plan (doc) && !app_document_get_busy (doc)
         && (data == NULL || app_document_get_plan (doc) != data);
}

static gboolean
search_over (gpointer data)
{
  return !app_suggest_dialog_get_running (APP_SUGGEST_DIALOG (data));
}


static AppSuggestDialog *
find_dialog (void)
{
  GListModel *toplevels = gtk_window_get_toplevels (); /* borrowed */
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr (GObject) w = g_list_model_get_item (toplevels, i);
      if (APP_IS_SUGGEST_DIALOG (w) && gtk_widget_get_visible (GTK_WIDGET (w)))
        return APP_SUGGEST_DIALOG (w);
    }
  return NULL;
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
  app_window_load_model (window, "gpt2-tiny", "dp=2,mp=2", "cpu-local", "megatron");
  test_ui_wait_for (plan_ready, NULL, 60, "gpt2-tiny's plan");
}

static void
test_cancel (void)
{
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.suggest-plans", NULL));
  AppSuggestDialog *d = find_dialog ();
  g_assert_nonnull (d);
  app_suggest_dialog_start (d);
  g_assert_true (app_suggest_dialog_get_running (d));
  app_suggest_dialog_cancel (d);
  g_assert_false (app_suggest_dialog_get_running (d));
  g_assert_cmpstr (app_suggest_dialog_get_status (d), ==, "Cancelled.");
  g_assert_cmpuint (app_suggest_dialog_get_n_rows (d), ==, 0);
  g_assert_null (app_suggest_dialog_get_result (d));
  gtk_window_destroy (GTK_WINDOW (d));
  for (int i = 0; i < 50; i++)
    g_main_context_iteration (NULL, FALSE);
}

static void
test_suggest (void)
{
  AppDocument *doc = app_window_get_document (window);
  PlannerPlan *before = app_document_get_plan (doc);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.suggest-plans", NULL));
  AppSuggestDialog *d = find_dialog ();
  g_assert_nonnull (d);
  /* The current mesh's device count is the default. */
  g_assert_cmpuint (app_suggest_dialog_get_devices (d), ==, 4);
  app_suggest_dialog_start (d);
  test_ui_wait_for (search_over, d, 300, "the search");
  const PlannerSearchResult *shown = app_suggest_dialog_get_result (d);
  g_assert_nonnull (shown);

  /* The same search, here. */
  g_autoptr (PlannerRequest) request = planner_request_new ();
  PlannerSearchOptions options;
  planner_search_options_init (&options);
  options.n_devices = 4;
  options.request = request;
  g_autoptr (GError) error = NULL;
  g_autoptr (PlannerSearchResult) ref = planner_search (
      app_document_get_graph (doc), app_document_get_hardware (doc), &options, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (shown->candidates->len, ==, ref->candidates->len);
  g_assert_cmpuint (app_suggest_dialog_get_n_rows (d), ==, ref->candidates->len);

  /* Every candidate listed once, the same as the direct search's; the meshes of 4. */
  /* gpt2-tiny has 2 layers: the search also tries two pipeline stages. */
  const char *meshes[] = { "dp=4,mp=1", "dp=2,mp=2", "dp=1,mp=4", "pp=2,dp=2,mp=1",
                           "pp=2,dp=1,mp=2" };
  guint per_mesh[G_N_ELEMENTS (meshes)] = { 0 };
  g_autofree gboolean *seen = g_new0 (gboolean, ref->candidates->len);
  double last_fit = 0;
  gboolean in_fit = TRUE;
  for (guint r = 0; r < app_suggest_dialog_get_n_rows (d); r++)
    {
      guint i = app_suggest_dialog_get_row_candidate (d, r);
      g_assert_cmpuint (i, <, ref->candidates->len);
      g_assert_false (seen[i]);
      seen[i] = TRUE;
      PlannerSearchCandidate *a = g_ptr_array_index (shown->candidates, i);
      PlannerSearchCandidate *b = g_ptr_array_index (ref->candidates, i);
      g_assert_cmpstr (a->mesh, ==, b->mesh);
      g_assert_cmpstr (a->policy, ==, b->policy);
      g_assert_cmpint (a->solved, ==, b->solved);
      g_assert_cmpint (a->fits, ==, b->fits);
      g_assert_cmpint (a->plan != NULL, ==, b->plan != NULL);
      if (b->plan)
        {
          g_assert_cmpfloat_with_epsilon (a->step_time_s, b->step_time_s,
                                          1e-12 + 1e-9 * b->step_time_s);
          g_assert_cmpuint (a->memory_per_device_bytes, ==, b->memory_per_device_bytes);
          /* Fitting ones first, each group by step time. */
          if (!a->fits && in_fit)
            {
              in_fit = FALSE;
              last_fit = 0;
            }
          g_assert_true (a->fits || !in_fit);
          g_assert_cmpfloat (a->step_time_s, >=, last_fit);
          last_fit = a->step_time_s;
        }
      gboolean known = FALSE;
      for (guint m = 0; m < G_N_ELEMENTS (meshes); m++)
        if (g_str_equal (a->mesh, meshes[m]))
          {
            per_mesh[m]++;
            known = TRUE;
          }
      g_assert_true (known);
    }
  for (guint m = 0; m < G_N_ELEMENTS (meshes); m++)
    g_assert_cmpuint (per_mesh[m], >, 0);

  /* The best: the fastest that fits, by a plain loop over the direct search. */
  int best = -1;
  for (guint i = 0; i < ref->candidates->len; i++)
    {
      PlannerSearchCandidate *c = g_ptr_array_index (ref->candidates, i);
      if (c->plan && c->fits
          && (best < 0
              || c->step_time_s
                     < ((PlannerSearchCandidate *)g_ptr_array_index (ref->candidates, best))
                           ->step_time_s))
        best = (int)i;
    }
  g_assert_cmpint (best, >=, 0);
  PlannerSearchCandidate *want = g_ptr_array_index (ref->candidates, best);
  int best_row = app_suggest_dialog_get_best_row (d);
  g_assert_cmpint (best_row, ==, 0);
  PlannerSearchCandidate *marked = g_ptr_array_index (
      shown->candidates, app_suggest_dialog_get_row_candidate (d, (guint)best_row));
  g_assert_cmpstr (marked->mesh, ==, want->mesh);
  g_assert_cmpstr (marked->policy, ==, want->policy);
  g_assert_cmpint (marked->solved, ==, want->solved);
  g_assert_cmpfloat_with_epsilon (marked->step_time_s, want->step_time_s,
                                  1e-12 + 1e-9 * want->step_time_s);
  g_assert_nonnull (strstr (app_suggest_dialog_get_status (d), want->mesh));
  g_test_message ("best of %u: %s %s, step %.6g s, %" G_GUINT64_FORMAT " B per device",
                  ref->candidates->len, want->mesh, want->solved ? "solved" : want->policy,
                  want->step_time_s, want->memory_per_device_bytes);

  test_ui_photograph (GTK_WIDGET (d), "suggest.png");

  /* Saving it puts it in the store, once per save; the dialog stays. */
  g_assert_true (app_suggest_dialog_save_row (d, (guint)best_row));
  g_assert_nonnull (find_dialog ());
  {
    g_autoptr (PlannerStore) store = planner_store_open (g_getenv ("SHARDSCOPE_DB"), &error);
    g_assert_no_error (error);
    g_autoptr (GPtrArray) entries = planner_store_list_plans (store, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (entries->len, ==, 1);
    PlannerStoreEntry *e = g_ptr_array_index (entries, 0);
    g_assert_cmpstr (e->mesh, ==, want->mesh);
    g_autofree char *expected_name
        = g_strdup_printf ("gpt2-tiny %s · %s", want->mesh, want->solved ? "solved" : want->policy);
    g_assert_cmpstr (e->name, ==, expected_name);
    g_autoptr (PlannerPlan) stored = planner_store_load_plan (store, e->id, &error);
    g_assert_no_error (error);
    g_assert_cmpfloat_with_epsilon (planner_plan_get_totals (stored)->step_time_s,
                                    want->step_time_s, 1e-12 + 1e-9 * want->step_time_s);
  }

  /* Opening it makes it the window's plan. */
  g_autofree char *mesh = g_strdup (want->mesh);
  double step = want->step_time_s;
  g_assert_true (app_suggest_dialog_open_row (d, (guint)best_row));
  test_ui_wait_for (plan_ready, before, 30, "the suggested plan");
  g_assert_null (find_dialog ());
  PlannerPlan *now = app_document_get_plan (app_window_get_document (window));
  g_autofree char *now_mesh = planner_mesh_to_string (planner_plan_get_mesh (now));
  g_assert_cmpstr (now_mesh, ==, mesh);
  g_assert_cmpfloat_with_epsilon (planner_plan_get_totals (now)->step_time_s, step,
                                  1e-12 + 1e-9 * step);
}

static void
test_close (void)
{
  gtk_window_destroy (GTK_WINDOW (window));
  for (int i = 0; i < 50; i++)
    g_main_context_iteration (NULL, FALSE);
}

int
main (int argc, char *argv[])
{
  tmpdir = g_dir_make_tmp ("shardscope-ui-suggest-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (test_ui_log_fatal, NULL);
  app_application_init_environment ();

  g_test_add_func ("/ui/suggest/start", test_start);
  g_test_add_func ("/ui/suggest/cancel", test_cancel);
  g_test_add_func ("/ui/suggest/suggest", test_suggest);
  g_test_add_func ("/ui/suggest/close", test_close);
  int status = g_test_run ();
  g_clear_object (&app);
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
