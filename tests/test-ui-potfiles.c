/* test-ui-potfiles.c: po/POTFILES.in lists every file with translatable strings, and only
 * files that exist, so no user-visible string escapes the translators. */
#include "config.h"

#include <glib.h>
#include <string.h>

static char *
source_path (const char *relative)
{
  return g_build_filename (g_getenv ("G_TEST_SRCDIR"), "..", relative, NULL);
}

static GHashTable *
read_potfiles (void)
{
  g_autofree char *path = source_path ("po/POTFILES.in");
  g_autofree char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  GHashTable *listed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      char *line = g_strstrip (lines[i]);
      if (*line && *line != '#')
        g_hash_table_add (listed, g_strdup (line));
    }
  return listed;
}

/* Whether a file holds a string meant for translation. */
static gboolean
has_translatable (const char *path)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  if (g_str_has_suffix (path, ".ui") || g_str_has_suffix (path, ".xml")
      || g_str_has_suffix (path, ".xml.in"))
    return strstr (text, "translatable=\"yes\"") || strstr (text, "<summary>")
           || strstr (text, "<description>") || strstr (text, "<name>");
  if (g_str_has_suffix (path, ".desktop.in"))
    return strstr (text, "Name=") != NULL;
  return strstr (text, " _(") || strstr (text, "(_(") || strstr (text, "N_(")
         || strstr (text, "ngettext (") || strstr (text, "C_(");
}

static void
scan (const char *folder, GHashTable *listed, GPtrArray *missing)
{
  g_autofree char *dir_path = source_path (folder);
  g_autoptr (GDir) dir = g_dir_open (dir_path, 0, NULL);
  if (dir == NULL)
    return;
  const char *name;
  while ((name = g_dir_read_name (dir)))
    {
      g_autofree char *relative = g_build_filename (folder, name, NULL);
      g_autofree char *path = source_path (relative);
      if (g_file_test (path, G_FILE_TEST_IS_DIR))
        continue;
      if (!(g_str_has_suffix (name, ".c") || g_str_has_suffix (name, ".ui")
            || g_str_has_suffix (name, ".desktop.in") || g_str_has_suffix (name, ".xml.in")
            || g_str_has_suffix (name, ".gschema.xml")))
        continue;
      if (has_translatable (path) && !g_hash_table_contains (listed, relative))
        g_ptr_array_add (missing, g_steal_pointer (&relative));
    }
}

static void
test_complete (void)
{
  g_autoptr (GHashTable) listed = read_potfiles ();
  g_autoptr (GPtrArray) missing = g_ptr_array_new_with_free_func (g_free);
  const char *folders[] = { "app", "app/gtk", "data", "planner", "executor", "graphview" };
  for (guint i = 0; i < G_N_ELEMENTS (folders); i++)
    scan (folders[i], listed, missing);
  for (guint i = 0; i < missing->len; i++)
    g_test_message ("not in po/POTFILES.in: %s", (char *) g_ptr_array_index (missing, i));
  g_assert_cmpuint (missing->len, ==, 0);
}

static void
test_exist (void)
{
  g_autoptr (GHashTable) listed = read_potfiles ();
  g_assert_cmpuint (g_hash_table_size (listed), >, 10);
  GHashTableIter iter;
  gpointer key;
  g_hash_table_iter_init (&iter, listed);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      g_autofree char *path = source_path (key);
      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        g_error ("po/POTFILES.in lists %s, which does not exist", (char *) key);
    }
}

int
main (int argc, char *argv[])
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ui/potfiles/complete", test_complete);
  g_test_add_func ("/ui/potfiles/exist", test_exist);
  return g_test_run ();
}
