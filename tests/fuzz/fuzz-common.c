/* fuzz-common.c: what the harnesses share (fuzz-harness.h). */
#include "fuzz-harness.h"

#include <glib/gstdio.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner-error.h"

char *
fuzz_text (const guint8 *data, gsize size)
{
  char *text = g_malloc (size + 1);
  if (size > 0)
    memcpy (text, data, size);
  text[size] = '\0';
  return text;
}

void
fuzz_check_outcome (gboolean ok, const GError *error, const char *harness)
{
  if (ok && error == NULL)
    return;
  if (!ok && error != NULL && error->domain == PLANNER_ERROR && error->message != NULL
      && error->message[0] != '\0')
    return;
  fuzz_fail ("%s: %s with %s error%s%s", harness, ok ? "took the input" : "refused the input",
             error == NULL                    ? "no"
             : error->domain == PLANNER_ERROR ? "a PLANNER_ERROR"
                                              : "a foreign",
             error != NULL ? ": " : "", error != NULL ? error->message : "");
}

void
fuzz_fail (const char *format, ...)
{
  va_list args;
  va_start (args, format);
  g_autofree char *message = g_strdup_vprintf (format, args);
  va_end (args);
  fprintf (stderr, "fuzz: %s\n", message);
  fflush (stderr);
  /* abort(), not GLib's G_BREAKPOINT: libFuzzer saves the input on SIGABRT, not SIGTRAP. */
  abort ();
}

static void
log_handler (const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  /* A warning or critical on bad input is a bug the fuzzer should stop at, as the tests do. */
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    fuzz_fail ("%s%s%s", domain ? domain : "", domain ? ": " : "", message);
}

void
fuzz_init (void)
{
  g_log_set_default_handler (log_handler, NULL);
}

const char *
fuzz_tmp_path (const char *suffix)
{
  static GHashTable *paths;
  if (paths == NULL)
    paths = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  char *path = g_hash_table_lookup (paths, suffix);
  if (path == NULL)
    {
      /* Per process, so parallel fuzzing jobs (-jobs=N) do not share files. */
      g_autofree char *base = g_strdup_printf ("shardscope-fuzz-%d-%s", (int)getpid (), suffix);
      path = g_build_filename (g_get_tmp_dir (), base, NULL);
      g_hash_table_insert (paths, g_strdup (suffix), path);
    }
  return path;
}

void
fuzz_write_file (const char *path, const guint8 *data, gsize size)
{
  /* Plain stdio: truncated, no fsync (g_file_set_contents() syncs; GLib 2.74's
   * G_FILE_SET_CONTENTS_NONE does not truncate), the file lives as long as one input. */
  FILE *file = fopen (path, "wb");
  if (file == NULL || (size > 0 && fwrite (data, 1, size, file) != size) || fclose (file) != 0)
    fuzz_fail ("cannot write %s", path);
}
