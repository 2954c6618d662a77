#define G_LOG_DOMAIN "app-window-document"
#include "config.h"

#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "app-autosave.h"
#include "app-hardware-dialog.h"
#include "app-window-private.h"
#include "planner-model.h"
#include "planner-plan-json.h"

/* ---- autosave ------------------------------------------------------------------------ */

/* A left-over of a session that did not end is moved here while it is offered back. */
static char *
recovered_path (AppWindow *self)
{
  return g_strconcat (self->autosave_path, ".recovered", NULL);
}

void
app_window_update_autosave (AppWindow *self)
{
  if (self->autosave_path == NULL)
    return;
  AppDocument *doc = self->document;
  PlannerPlan *plan = doc ? app_document_get_plan (doc) : NULL;
  if (doc && plan && app_document_get_modified (doc))
    {
      app_autosave_write (self->autosave_path, plan, app_document_get_store_id (doc));
      self->autosaved = TRUE;
    }
  else if (self->autosaved && (doc == NULL || !app_document_get_modified (doc)))
    {
      app_autosave_remove (self->autosave_path);
      self->autosaved = FALSE;
    }
}

void
app_window_set_autosave_path (AppWindow *self, const char *store_path)
{
  if (self->autosave_path)
    {
      if (self->autosaved)
        app_autosave_remove (self->autosave_path);
      app_autosave_claim (self->autosave_path, FALSE);
      g_clear_pointer (&self->autosave_path, g_free);
      self->autosaved = FALSE;
    }
  self->autosave_path = app_autosave_path_for_store (store_path);
  /* A file nobody in this process writes is what a session that did not end left. */
  if (!app_autosave_is_claimed (self->autosave_path))
    {
      g_autofree char *recovered = recovered_path (self);
      if (g_file_test (self->autosave_path, G_FILE_TEST_IS_REGULAR))
        g_rename (self->autosave_path, recovered);
      if (g_file_test (recovered, G_FILE_TEST_IS_REGULAR))
        app_window_set_offers_recovery (self, TRUE);
    }
  app_autosave_claim (self->autosave_path, TRUE);
  app_window_update_autosave (self);
}

const char *
app_window_get_autosave_path (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->autosave_path;
}

gboolean
app_window_get_offers_recovery (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), FALSE);
  return self->offers_recovery;
}

/* ---- asking before discarding ---------------------------------------------------------- */

struct _AppWindowProceed
{
  AppWindowProceedFunc proceed;
  gpointer data;
  GDestroyNotify destroy;
};

AppWindowProceed *
app_window_proceed_new (AppWindowProceedFunc func, gpointer data, GDestroyNotify destroy)
{
  AppWindowProceed *p = g_new0 (AppWindowProceed, 1);
  p->proceed = func;
  p->data = data;
  p->destroy = destroy;
  return p;
}

static void
proceed_free (AppWindowProceed *p)
{
  if (p == NULL)
    return;
  if (p->destroy)
    p->destroy (p->data);
  g_free (p);
}

static void
proceed_run (AppWindow *self, AppWindowProceed *p)
{
  if (p == NULL)
    return;
  p->proceed (self, p->data);
  proceed_free (p);
}

typedef struct
{
  AppWindow *self;
  AppWindowProceed *then;
} Deferred;

static gboolean
run_deferred (gpointer data)
{
  Deferred *d = data;
  proceed_run (d->self, d->then);
  g_object_unref (d->self);
  g_free (d);
  return G_SOURCE_REMOVE;
}

/* From a dialog's response: what goes on may close the window, and with it the dialog that
 * is still emitting (a transient dialog dies with its parent), so it runs once the
 * emission is over. */
static void
proceed_later (AppWindow *self, AppWindowProceed *then)
{
  Deferred *d = g_new0 (Deferred, 1);
  d->self = g_object_ref (self);
  d->then = then;
  g_idle_add (run_deferred, d);
}

static void save_then (AppWindow *self, AppWindowProceed *then);

static AdwMessageDialog *
prompt_new (AppWindow *self, const char *heading, const char *body)
{
  AdwMessageDialog *dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (GTK_WINDOW (self),
                                                                         heading, body));
  self->prompt = dialog;
  g_object_add_weak_pointer (G_OBJECT (dialog), (gpointer *) &self->prompt);
  return dialog;
}

/* The question is answered: the next one may come (a name after Save). */
static AppWindow *
prompt_answered (AdwMessageDialog *dialog)
{
  AppWindow *self = APP_WINDOW (gtk_window_get_transient_for (GTK_WINDOW (dialog)));
  if (self->prompt == dialog)
    {
      g_object_remove_weak_pointer (G_OBJECT (dialog), (gpointer *) &self->prompt);
      self->prompt = NULL;
    }
  return self;
}

static void
discard_response (AdwMessageDialog *dialog, const char *response, gpointer data)
{
  AppWindow *self = prompt_answered (dialog);
  AppWindowProceed *then = g_object_steal_data (G_OBJECT (dialog), "proceed");
  if (g_str_equal (response, "save"))
    save_then (self, then);
  else if (g_str_equal (response, "discard"))
    proceed_later (self, then);
  else
    proceed_free (then);
}

/* Runs @then now when the document has no unsaved edits; else asks Save / Discard / Cancel
 * first, as GNOME applications do, and runs it after a save or a discard. */
void
app_window_ask_before_discarding (AppWindow *self, AppWindowProceed *then)
{
  AppDocument *doc = self->document;
  if (doc == NULL || !app_document_get_modified (doc))
    {
      proceed_run (self, then);
      return;
    }
  if (self->prompt)
    {
      /* One question at a time: the one shown is answered first. */
      proceed_free (then);
      gtk_window_present (GTK_WINDOW (self->prompt));
      return;
    }
  g_autofree char *heading = g_strdup_printf (_("Save Changes to “%s”?"),
                                              app_document_get_name (doc));
  AdwMessageDialog *dialog
      = prompt_new (self, heading, _("The pin edits since the last save are lost if you "
                                     "discard them."));
  adw_message_dialog_add_responses (dialog, "cancel", _("_Cancel"), "discard", _("_Discard"),
                                    "save", _("_Save"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "discard", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_response_appearance (dialog, "save", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (dialog, "save");
  adw_message_dialog_set_close_response (dialog, "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "proceed", then, (GDestroyNotify) proceed_free);
  g_signal_connect (dialog, "response", G_CALLBACK (discard_response), NULL);
  gtk_window_present (GTK_WINDOW (dialog));
}

AdwMessageDialog *
app_window_get_prompt (AppWindow *self)
{
  g_return_val_if_fail (APP_IS_WINDOW (self), NULL);
  return self->prompt;
}

/* ---- loading ---------------------------------------------------------------------- */

typedef struct
{
  char *model;
  char *mesh;
  char *hardware;
  char *policy;
  char *path;  /* a plan file */
  gint64 id;   /* a stored plan */
  char *autosave; /* a recovered autosave */
  PlannerStore *store;
} LoadRequest;

typedef struct
{
  PlannerGraph *graph;
  PlannerMesh *mesh;
  PlannerHardware *hw;
  PlannerPlan *plan;
  gint64 store_id; /* of a recovered autosave */
} LoadResult;

static void
load_request_free (LoadRequest *req)
{
  g_free (req->model);
  g_free (req->mesh);
  g_free (req->hardware);
  g_free (req->policy);
  g_free (req->path);
  g_free (req->autosave);
  g_clear_object (&req->store);
  g_free (req);
}

static void
load_result_free (LoadResult *res)
{
  g_clear_object (&res->graph);
  g_clear_pointer (&res->mesh, planner_mesh_free);
  g_clear_pointer (&res->hw, planner_hardware_free);
  g_clear_object (&res->plan);
  g_free (res);
}

static void
load_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  LoadRequest *req = task_data;
  GError *error = NULL;
  LoadResult *res = g_new0 (LoadResult, 1);
  if (req->autosave)
    {
      res->plan = app_autosave_read (req->autosave, &res->store_id, &error);
      if (res->plan)
        g_unlink (req->autosave);
    }
  else if (req->id > 0)
    res->plan = planner_store_load_plan (req->store, req->id, &error);
  else if (req->path)
    res->plan = planner_plan_load_json (req->path, &error);
  else
    {
      res->mesh = planner_mesh_parse (req->mesh, &error);
      if (res->mesh)
        res->hw = app_hardware_lookup (req->hardware, &error);
      if (res->hw)
        res->graph = planner_model_load (req->model, NULL, &error);
    }
  if (error)
    {
      load_result_free (res);
      g_task_return_error (task, error);
    }
  else
    g_task_return_pointer (task, res, (GDestroyNotify) load_result_free);
}

static void
load_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AppWindow *self = APP_WINDOW (source);
  LoadRequest *req = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  LoadResult *res = g_task_propagate_pointer (G_TASK (result), &error);
  if (res == NULL)
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        app_window_show_error (self, req->model      ? req->model
                          : req->path     ? req->path
                          : req->autosave ? req->autosave
                                          : _("Plan store"),
                    error);
      return;
    }
  g_autoptr (AppDocument) doc = NULL;
  if (res->plan && req->autosave)
    {
      /* The recovered edits are unsaved edits again. */
      doc = app_document_new_for_plan (res->plan, res->store_id);
      app_document_mark_modified (doc);
    }
  else if (res->plan)
    doc = app_document_new_for_plan (res->plan, req->id);
  else
    {
      doc = app_document_new (res->graph, res->mesh, res->hw, req->policy);
      app_document_replan (doc);
    }
  app_window_set_document (self, doc);
  load_result_free (res);
}

static void
start_load (AppWindow *self, LoadRequest *req)
{
  g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  self->cancellable = g_cancellable_new ();
  g_autoptr (GTask) task = g_task_new (self, self->cancellable, load_done, NULL);
  g_task_set_source_tag (task, start_load);
  g_task_set_task_data (task, req, (GDestroyNotify) load_request_free);
  g_task_run_in_thread (task, load_thread);
}

void
app_window_load_model (AppWindow *self, const char *model, const char *mesh,
                       const char *hardware, const char *policy)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (model != NULL && mesh != NULL && hardware != NULL);
  LoadRequest *req = g_new0 (LoadRequest, 1);
  req->model = g_strdup (model);
  req->mesh = g_strdup (mesh);
  req->hardware = g_strdup (hardware);
  req->policy = policy && *policy ? g_strdup (policy) : NULL;
  start_load (self, req);
}

static char *
settings_string (AppWindow *self, const char *key, const char *fallback)
{
  if (self->settings)
    return g_settings_get_string (self->settings, key);
  return g_strdup (fallback);
}

void
app_window_open_file (AppWindow *self, GFile *file)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (G_IS_FILE (file));
  g_autofree char *path = g_file_get_path (file);
  if (path == NULL)
    return;
  /* A plan file names itself in its first bytes; anything else is a model source. */
  g_autofree char *head = NULL;
  gsize length = 0;
  g_autoptr (GFileInputStream) in = g_file_read (file, NULL, NULL);
  if (in)
    {
      head = g_malloc0 (4097);
      length = 0;
      g_input_stream_read_all (G_INPUT_STREAM (in), head, 4096, &length, NULL, NULL);
    }
  LoadRequest *req = g_new0 (LoadRequest, 1);
  if (head && strstr (head, "\"shardscope_plan\""))
    req->path = g_steal_pointer (&path);
  else
    {
      req->model = g_steal_pointer (&path);
      req->mesh = settings_string (self, "default-mesh", "dp=2,mp=4");
      req->hardware = settings_string (self, "default-hardware", "h100-sxm");
      req->policy = settings_string (self, "default-policy", "megatron");
      if (*req->policy == '\0')
        g_clear_pointer (&req->policy, g_free);
    }
  start_load (self, req);
}

void
app_window_open_stored (AppWindow *self, gint64 id)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  g_return_if_fail (self->store != NULL);
  LoadRequest *req = g_new0 (LoadRequest, 1);
  req->id = id;
  req->store = g_object_ref (self->store);
  start_load (self, req);
}

/* ---- saving ----------------------------------------------------------------------- */

/* A name no stored plan has: @base, else "BASE 2", "BASE 3", ... (@base when @entries is
 * NULL). */
char *
app_window_free_plan_name (GPtrArray *entries, const char *base)
{
  char *name = g_strdup (base);
  for (guint n = 2; entries; n++)
    {
      gboolean taken = FALSE;
      for (guint i = 0; i < entries->len && !taken; i++)
        taken = g_strcmp0 (((PlannerStoreEntry *) g_ptr_array_index (entries, i))->name, name)
                == 0;
      if (!taken)
        break;
      g_free (name);
      name = g_strdup_printf ("%s %u", base, n);
    }
  return name;
}

typedef struct
{
  PlannerStore *store;
  PlannerPlan *plan;
  AppDocument *document;
  char *name;
  gint64 parent;
  AppWindowProceed *then; /* after a successful save */
} SaveRequest;

static void
save_request_free (SaveRequest *req)
{
  g_object_unref (req->store);
  g_object_unref (req->plan);
  g_object_unref (req->document);
  g_free (req->name);
  proceed_free (req->then);
  g_free (req);
}

static void
save_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  SaveRequest *req = task_data;
  GError *error = NULL;
  g_autoptr (GPtrArray) entries = planner_store_list_plans (req->store, &error);
  if (entries == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  /* The plan's own name, unless a stored plan has it. */
  g_autofree char *name = app_window_free_plan_name (entries, req->name);
  gint64 id = planner_store_save_plan (req->store, req->plan, name, req->parent, &error);
  if (id == 0)
    g_task_return_error (task, error);
  else
    g_task_return_int (task, id);
}

static void
save_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  AppWindow *self = APP_WINDOW (source);
  SaveRequest *req = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  gint64 id = g_task_propagate_int (G_TASK (result), &error);
  if (id == 0)
    {
      app_window_show_error (self, _("Saving failed"), error);
      return;
    }
  /* The store names the plan what it was saved as. */
  app_document_set_name (req->document, planner_plan_get_name (req->plan));
  app_document_set_store_id (req->document, id);
  app_sidebar_reload (self->sidebar);
  app_sidebar_set_current_id (self->sidebar, id);
  g_autofree char *text = g_strdup_printf (_("Saved as “%s”"), planner_plan_get_name (req->plan));
  app_window_show_toast (self, text);
  proceed_run (self, g_steal_pointer (&req->then));
}

static void
start_save (AppWindow *self, AppWindowProceed *then)
{
  AppDocument *doc = self->document;
  if (doc == NULL || app_document_get_plan (doc) == NULL || self->store == NULL)
    {
      proceed_free (then);
      return;
    }
  gint64 id = app_document_get_store_id (doc);
  if (id > 0 && !app_document_get_modified (doc))
    {
      app_window_show_toast (self, _("The plan is saved"));
      proceed_later (self, then);
      return;
    }
  SaveRequest *req = g_new0 (SaveRequest, 1);
  req->store = g_object_ref (self->store);
  req->plan = g_object_ref (app_document_get_plan (doc));
  req->document = g_object_ref (doc);
  req->name = g_strdup (app_document_get_name (doc));
  /* An edited stored plan is saved as a new plan derived from it. */
  req->parent = id;
  req->then = then;
  g_autoptr (GTask) task = g_task_new (self, NULL, save_done, NULL);
  g_task_set_source_tag (task, start_save);
  g_task_set_task_data (task, req, (GDestroyNotify) save_request_free);
  g_task_run_in_thread (task, save_thread);
}

static void
name_response (AdwMessageDialog *dialog, const char *response, gpointer data)
{
  AppWindow *self = prompt_answered (dialog);
  AppWindowProceed *then = g_object_steal_data (G_OBJECT (dialog), "proceed");
  if (!g_str_equal (response, "save") || self->document == NULL)
    {
      proceed_free (then);
      return;
    }
  GtkEditable *entry = GTK_EDITABLE (adw_message_dialog_get_extra_child (dialog));
  g_autofree char *name = g_strstrip (g_strdup (gtk_editable_get_text (entry)));
  if (*name)
    app_document_set_name (self->document, name);
  start_save (self, then);
}

/* A plan saved for the first time is named first. */
static void
save_then (AppWindow *self, AppWindowProceed *then)
{
  AppDocument *doc = self->document;
  if (doc == NULL || app_document_get_store_id (doc) > 0 || self->store == NULL
      || self->prompt)
    {
      start_save (self, then);
      return;
    }
  AdwMessageDialog *dialog
      = prompt_new (self, _("Save the Plan"), _("The plan store keeps it under this name."));
  GtkWidget *entry = gtk_entry_new ();
  gtk_editable_set_text (GTK_EDITABLE (entry), app_document_get_name (doc));
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  adw_message_dialog_set_extra_child (dialog, entry);
  adw_message_dialog_add_responses (dialog, "cancel", _("_Cancel"), "save", _("_Save"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "save", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (dialog, "save");
  adw_message_dialog_set_close_response (dialog, "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "proceed", then, (GDestroyNotify) proceed_free);
  g_signal_connect (dialog, "response", G_CALLBACK (name_response), NULL);
  gtk_window_present (GTK_WINDOW (dialog));
}

void
app_window_save (AppWindow *self)
{
  g_return_if_fail (APP_IS_WINDOW (self));
  save_then (self, NULL);
}


static void
restore_proceed (AppWindow *self, gpointer data)
{
  app_window_set_offers_recovery (self, FALSE);
  LoadRequest *req = g_new0 (LoadRequest, 1);
  req->autosave = recovered_path (self);
  start_load (self, req);
}

void
app_window_action_restore_autosave (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  if (self->autosave_path == NULL)
    return;
  app_window_ask_before_discarding (self, app_window_proceed_new (restore_proceed, NULL, NULL));
}

void
app_window_action_discard_autosave (GtkWidget *widget, const char *name, GVariant *param)
{
  AppWindow *self = APP_WINDOW (widget);
  app_window_set_offers_recovery (self, FALSE);
  if (self->autosave_path)
    {
      g_autofree char *recovered = recovered_path (self);
      g_unlink (recovered);
    }
}
