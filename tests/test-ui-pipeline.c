/* test-ui-pipeline.c: the pipeline in the window, under Xvfb (suite ui, issue 18).
 *
 * LLaMA-7B on pp=4,mp=2 (batch 8, so each device's 8 sequences split into up to 8
 * micro-batches). The schedule chart shows once the plan has its pipeline; its controls set
 * the micro-batches and the schedule and re-plan; its boxes must be the hand-drawn diagrams
 * of GPipe and 1F1B for p = 4, m = 8 (Huang et al. 2019, fig. 2; Narayanan et al. 2021,
 * fig. 4): the order each stage runs its passes in, written out below, each stage in its own
 * row, no stage running two passes at once, a micro-batch's forward on stage i + 1 after it on
 * stage i and its backward on stage i after it on stage i + 1; the bubble fraction
 * (p - 1) / (m + p - 1) = 3/11 in the summary. The graph shows the four stages' bands. A mesh
 * without pp hides the chart.
 */
#include "config.h"

#include <math.h>

#include "app-application.h"
#include "app-schedule-chart.h"
#include "app-window.h"

#include "test-util.h"
#include "test-ui-util.h"

static AppApplication *app;
static AppWindow *window;
static char *tmpdir;



/* A plan other than @data, with nothing still running. */
static gboolean
plan_ready (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return doc && app_document_get_plan (doc) && !app_document_get_busy (doc)
         && (data == NULL || app_document_get_plan (doc) != data);
}

static gboolean
error_shown (gpointer data)
{
  AppDocument *doc = app_window_get_document (window);
  return !app_document_get_busy (doc) && app_document_get_error (doc) != NULL;
}


static AppScheduleChart *
chart (void)
{
  return APP_SCHEDULE_CHART (app_window_get_part (window, "schedule_chart"));
}

static gboolean
chart_drawn (gpointer data)
{
  GtkWidget *area = app_schedule_chart_get_area (chart ());
  return gtk_widget_get_mapped (area) && gtk_widget_get_width (area) > 100
         && gtk_widget_get_height (area) > 40;
}

/* Waits for the plan the last change makes, and for the chart to be laid out again. */
static void
wait_replanned (PlannerPlan *before)
{
  test_ui_wait_for (plan_ready, before, 120, "the re-planned document");
  test_ui_wait_for (chart_drawn, NULL, 30, "the schedule chart on screen");
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
}

static PlannerPlan *
current_plan (void)
{
  return app_document_get_plan (app_window_get_document (window));
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
  app_window_load_model (window, "llama", "pp=4,mp=2", "h100-sxm", "megatron");
  test_ui_wait_for (plan_ready, NULL, 120, "llama's plan");
  test_ui_wait_for (chart_drawn, NULL, 30, "the schedule chart on screen");
  /* The defaults: one micro-batch of the whole local batch, 1F1B. */
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (chart ())));
  g_assert_cmpuint (app_schedule_chart_get_n_boxes (chart ()), ==, 2 * 4);
  g_assert_nonnull (strstr (app_schedule_chart_get_summary (chart ()), "bubble 75.0%"));
}

/* "F1 F2 B1 ...": stage @stage's boxes in the order of their left edges, checked to be in
 * the stage's row, not overlapping, and numbered as the diagram numbers micro-batches. */
static char *
stage_sequence (guint stage)
{
  AppScheduleChart *c = chart ();
  guint n = app_schedule_chart_get_n_boxes (c);
  GtkWidget *area = app_schedule_chart_get_area (c);
  double height = gtk_widget_get_height (area);
  g_autoptr (GArray) boxes = g_array_new (FALSE, FALSE, sizeof (AppScheduleBox));
  for (guint i = 0; i < n; i++)
    {
      AppScheduleBox b;
      app_schedule_chart_get_box (c, i, &b);
      if (b.stage == stage)
        g_array_append_val (boxes, b);
    }
  /* Row i of four, top to bottom: boxes of stage i lie in the i-th quarter of the plot. */
  for (guint i = 0; i < boxes->len; i++)
    {
      const AppScheduleBox *b = &g_array_index (boxes, AppScheduleBox, i);
      g_assert_cmpfloat (b->y, >=, stage * (height - 16) / 4);
      g_assert_cmpfloat (b->y + b->height, <=, (stage + 1) * (height - 16) / 4 + 2);
      g_assert_cmpfloat (b->width, >, 1);
    }
  /* Selection sort by left edge (n is small). */
  GString *s = g_string_new (NULL);
  g_autofree gboolean *used = g_new0 (gboolean, boxes->len);
  double last_end = -1;
  for (guint k = 0; k < boxes->len; k++)
    {
      int best = -1;
      for (guint i = 0; i < boxes->len; i++)
        if (!used[i]
            && (best < 0
                || g_array_index (boxes, AppScheduleBox, i).x
                       < g_array_index (boxes, AppScheduleBox, best).x))
          best = (int)i;
      used[best] = TRUE;
      const AppScheduleBox *b = &g_array_index (boxes, AppScheduleBox, best);
      g_assert_cmpfloat (b->x, >=, last_end - 1e-6);
      last_end = b->x + b->width;
      g_string_append_printf (s, "%s%c%u", k ? " " : "", b->backward ? 'B' : 'F',
                              b->micro_batch + 1);
    }
  return g_string_free (s, FALSE);
}

/* The box of micro-batch @mb's pass on @stage. */
static AppScheduleBox
find_box (guint stage, guint mb, gboolean backward)
{
  AppScheduleChart *c = chart ();
  for (guint i = 0; i < app_schedule_chart_get_n_boxes (c); i++)
    {
      AppScheduleBox b;
      app_schedule_chart_get_box (c, i, &b);
      if (b.stage == stage && b.micro_batch == mb && b.backward == backward)
        return b;
    }
  g_error ("no box for stage %u micro-batch %u %s", stage, mb, backward ? "backward" : "forward");
}

/* A pass starts once its input is there: the forward from the stage above, the gradient
 * from the stage below (the last stage's backward after its own forward). */
static void
assert_dependencies (guint p, guint m)
{
  for (guint mb = 0; mb < m; mb++)
    for (guint s = 0; s < p; s++)
      {
        AppScheduleBox f = find_box (s, mb, FALSE), b = find_box (s, mb, TRUE);
        if (s > 0)
          {
            AppScheduleBox up = find_box (s - 1, mb, FALSE);
            g_assert_cmpfloat (f.x, >=, up.x + up.width - 1e-6);
          }
        AppScheduleBox from = s + 1 < p ? find_box (s + 1, mb, TRUE) : f;
        g_assert_cmpfloat (b.x, >=, from.x + from.width - 1e-6);
      }
}

/* Narayanan et al. 2021, fig. 4 (top), p = 4, m = 8: stage i first runs p - 1 - i forwards,
 * then one forward and one backward in turn, then the backwards left. */
static const char *const one_f_one_b[4] = {
  "F1 F2 F3 F4 B1 F5 B2 F6 B3 F7 B4 F8 B5 B6 B7 B8",
  "F1 F2 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 F8 B6 B7 B8",
  "F1 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 F8 B7 B8",
  "F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 F8 B8",
};
/* Huang et al. 2019, fig. 2: every forward, then every backward. */
static const char *const gpipe = "F1 F2 F3 F4 F5 F6 F7 F8 B1 B2 B3 B4 B5 B6 B7 B8";

static void
test_1f1b (void)
{
  PlannerPlan *before = current_plan ();
  app_schedule_chart_set_micro_batches (chart (), 8);
  wait_replanned (before);
  const PlannerCostConstants *c = planner_plan_get_constants (current_plan ());
  g_assert_cmpuint (c->micro_batches, ==, 8);
  g_assert_cmpint (c->schedule, ==, PLANNER_SCHEDULE_1F1B);
  g_assert_cmpuint (app_schedule_chart_get_n_boxes (chart ()), ==, 2 * 4 * 8);
  for (guint s = 0; s < 4; s++)
    {
      g_autofree char *seq = stage_sequence (s);
      g_assert_cmpstr (seq, ==, one_f_one_b[s]);
    }
  assert_dependencies (4, 8);
  /* The last stage waits for the first micro-batch to come down three stages: it starts at
   * the end of stage 2's first forward, after stage 0's, 1's and 2's. */
  AppScheduleBox f0 = find_box (0, 0, FALSE), f3 = find_box (3, 0, FALSE);
  g_assert_cmpfloat (f3.x, >=, f0.x + 3 * f0.width * 0.5);
  const char *summary = app_schedule_chart_get_summary (chart ());
  /* (p - 1) / (m + p - 1) = 3 / 11. */
  g_assert_nonnull (strstr (summary, "1F1B"));
  g_assert_nonnull (strstr (summary, "bubble 27.3%"));
  g_autofree char *step
      = planner_format_time (planner_plan_get_totals (current_plan ())->step_time_s);
  g_assert_nonnull (strstr (summary, step));

  /* The graph shows the four stages, 8 layers each, on devices 2s .. 2s + 1. */
  GraphviewRenderer *renderer = graphview_widget_get_renderer (app_window_get_graph (window));
  GraphviewStages *stages = graphview_renderer_get_stages (renderer);
  g_assert_nonnull (stages);
  g_assert_cmpuint (graphview_stages_get_n_bands (stages), ==, 4);
  g_assert_cmpstr (graphview_stages_get_band (stages, 2)->label, ==,
                   "stage 2 · layers 16-23 · devices 4-5");
  test_ui_photograph (GTK_WIDGET (window), "ui-pipeline-1f1b.png");
}

static void
test_gpipe (void)
{
  PlannerPlan *before = current_plan ();
  app_schedule_chart_set_schedule (chart (), PLANNER_SCHEDULE_GPIPE);
  wait_replanned (before);
  g_assert_cmpint (planner_plan_get_constants (current_plan ())->schedule, ==,
                   PLANNER_SCHEDULE_GPIPE);
  g_assert_cmpuint (app_schedule_chart_get_n_boxes (chart ()), ==, 2 * 4 * 8);
  for (guint s = 0; s < 4; s++)
    {
      g_autofree char *seq = stage_sequence (s);
      g_assert_cmpstr (seq, ==, gpipe);
    }
  assert_dependencies (4, 8);
  const char *summary = app_schedule_chart_get_summary (chart ());
  g_assert_nonnull (strstr (summary, "GPipe"));
  g_assert_nonnull (strstr (summary, "bubble 27.3%"));

  /* Fewer micro-batches, a bigger bubble: 3 / 7. */
  before = current_plan ();
  app_schedule_chart_set_micro_batches (chart (), 4);
  wait_replanned (before);
  g_assert_cmpuint (app_schedule_chart_get_n_boxes (chart ()), ==, 2 * 4 * 4);
  g_assert_nonnull (strstr (app_schedule_chart_get_summary (chart ()), "bubble 42.9%"));

  /* 3 micro-batches do not split 8 sequences: refused with the planner's reason, the plan
   * and its chart stay. */
  before = current_plan ();
  app_schedule_chart_set_micro_batches (chart (), 3);
  test_ui_wait_for (error_shown, NULL, 120, "the refusal");
  g_assert_nonnull (strstr (app_document_get_error (app_window_get_document (window)),
                            "3 micro-batches do not split the 8 sequences"));
  g_assert_true (current_plan () == before);
  g_assert_cmpuint (app_schedule_chart_get_n_boxes (chart ()), ==, 2 * 4 * 4);
}

/* Two chunks a stage over 8 micro-batches: 2 x 4 x 2 x 8 boxes, stage i starting with
 * 2 (p - i - 1) + (v - 1) p forwards (Megatron-LM's warm-up), bubble 3 / 19. */
static void
test_interleaved (void)
{
  PlannerPlan *before = current_plan ();
  app_schedule_chart_set_micro_batches (chart (), 8);
  wait_replanned (before);
  before = current_plan ();
  app_schedule_chart_set_virtual_stages (chart (), 2);
  wait_replanned (before);
  const PlannerCostConstants *c = planner_plan_get_constants (current_plan ());
  g_assert_cmpint (c->schedule, ==, PLANNER_SCHEDULE_INTERLEAVED);
  g_assert_cmpuint (c->virtual_stages, ==, 2);
  g_assert_cmpuint (app_schedule_chart_get_n_boxes (chart ()), ==, 2 * 4 * 2 * 8);
  for (guint s = 0; s < 4; s++)
    {
      g_autofree char *seq = stage_sequence (s);
      g_auto (GStrv) passes = g_strsplit (seq, " ", -1);
      guint warmup = 0;
      while (passes[warmup] && passes[warmup][0] == 'F')
        warmup++;
      g_assert_cmpuint (warmup, ==, 2 * (4 - s - 1) + (2 - 1) * 4 + 1);
    }
  g_assert_nonnull (strstr (app_schedule_chart_get_summary (chart ()), "bubble 15.8%"));
  test_ui_photograph (GTK_WIDGET (window), "ui-pipeline-interleaved.png");
  GraphviewStages *stages = graphview_renderer_get_stages (
      graphview_widget_get_renderer (app_window_get_graph (window)));
  g_assert_cmpuint (graphview_stages_get_n_bands (stages), ==, 8);
}

static void
test_no_pipeline (void)
{
  PlannerPlan *before = current_plan ();
  app_window_load_model (window, "gpt2-tiny", "dp=2,mp=2", "h100-sxm", "megatron");
  test_ui_wait_for (plan_ready, before, 120, "gpt2-tiny's plan");
  for (int i = 0; i < 20; i++)
    g_main_context_iteration (NULL, FALSE);
  g_assert_false (gtk_widget_get_visible (GTK_WIDGET (chart ())));
  g_assert_cmpuint (app_schedule_chart_get_n_boxes (chart ()), ==, 0);
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
  tmpdir = g_dir_make_tmp ("shardscope-ui-pipeline-XXXXXX", NULL);
  g_autofree char *db = g_build_filename (tmpdir, "plans.db", NULL);
  g_setenv ("SHARDSCOPE_DB", db, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("LANGUAGE", "C", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  gtk_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (test_ui_log_fatal, NULL);
  app_application_init_environment ();

  g_test_add_func ("/ui/pipeline/start", test_start);
  g_test_add_func ("/ui/pipeline/1f1b", test_1f1b);
  g_test_add_func ("/ui/pipeline/gpipe", test_gpipe);
  g_test_add_func ("/ui/pipeline/interleaved", test_interleaved);
  g_test_add_func ("/ui/pipeline/no-pipeline", test_no_pipeline);
  g_test_add_func ("/ui/pipeline/close", test_close);
  int status = g_test_run ();
  g_clear_object (&app);
  test_util_tmp_dir_remove (tmpdir);
  return status;
}
