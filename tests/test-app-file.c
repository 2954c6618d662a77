/* app_file_write(), the one writer of shardscope-cli and the app: on its own (regular files,
 * links, FIFOs, devices, /dev/stdout, a full device, a file too big to finish) and through
 * every command that writes a file the user names (propagate -o, export -o, render
 * --png/--svg/--pdf, calibrate -o). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "app-file.h"
#include "test-util.h"

static char *dir;

static char *
path_in (const char *name)
{
  return g_build_filename (dir, name, NULL);
}

static char *
read_text (const char *path)
{
  g_autoptr (GError) error = NULL;
  char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  g_assert_no_error (error);
  return text;
}

/* No temporary file of a write is left in @folder: only the @n names listed. */
static void
assert_only (const char *folder, const char *const *names, guint n)
{
  g_autoptr (GDir) d = g_dir_open (folder, 0, NULL);
  const char *name;
  guint seen = 0;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      gboolean listed = FALSE;
      for (guint i = 0; i < n; i++)
        listed |= g_str_equal (name, names[i]);
      if (!listed)
        g_error ("%s is left in %s", name, folder);
      seen++;
    }
  g_assert_cmpuint (seen, ==, n);
}

static void
assert_write_error (const char *path, int code, const char *fragment)
{
  g_autoptr (GError) error = NULL;
  g_assert_false (app_file_write (path, "x\n", 2, &error));
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_assert_error (error, G_IO_ERROR, code);
  g_assert_nonnull (strstr (error->message, path));
  if (strstr (error->message, fragment) == NULL)
    g_error ("'%s' lacks '%s'", error->message, fragment);
}

/* ---- app_file_write() on its own ---- */

static void
test_regular (void)
{
  g_autofree char *sub = path_in ("regular");
  g_assert_cmpint (g_mkdir (sub, 0755), ==, 0);
  g_autofree char *path = g_build_filename (sub, "a.txt", NULL);
  g_autoptr (GError) error = NULL;

  g_assert_true (app_file_write (path, "one\n", 4, &error));
  g_assert_no_error (error);
  g_autofree char *one = read_text (path);
  g_assert_cmpstr (one, ==, "one\n");

  /* Replaced whole, keeping its permissions, with nothing left beside it. */
  g_assert_cmpint (g_chmod (path, 0604), ==, 0);
  g_assert_true (app_file_write (path, "two\n", 4, &error));
  g_autofree char *two = read_text (path);
  g_assert_cmpstr (two, ==, "two\n");
  GStatBuf st;
  g_assert_cmpint (g_stat (path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0604);
  const char *names[] = { "a.txt" };
  assert_only (sub, names, 1);
}

static void
test_symlink (void)
{
  g_autofree char *sub = path_in ("links");
  g_assert_cmpint (g_mkdir (sub, 0755), ==, 0);
  g_autofree char *target = g_build_filename (sub, "target.txt", NULL);
  g_autofree char *link = g_build_filename (sub, "link.txt", NULL);
  g_autofree char *chain = g_build_filename (sub, "chain.txt", NULL);
  g_autoptr (GError) error = NULL;

  /* A dangling relative link: the file it names is made, and the link stays a link. */
  g_assert_cmpint (symlink ("target.txt", link), ==, 0);
  g_assert_cmpint (symlink ("link.txt", chain), ==, 0);
  g_assert_true (app_file_write (chain, "through\n", 8, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_test (link, G_FILE_TEST_IS_SYMLINK));
  g_assert_true (g_file_test (chain, G_FILE_TEST_IS_SYMLINK));
  g_autofree char *text = read_text (target);
  g_assert_cmpstr (text, ==, "through\n");

  g_assert_true (app_file_write (link, "again\n", 6, &error));
  g_assert_true (g_file_test (link, G_FILE_TEST_IS_SYMLINK));
  g_autofree char *again = read_text (target);
  g_assert_cmpstr (again, ==, "again\n");
  const char *names[] = { "target.txt", "link.txt", "chain.txt" };
  assert_only (sub, names, 3);

  /* Links in a circle: refused, saying so. */
  g_autofree char *a = g_build_filename (sub, "a", NULL);
  g_autofree char *b = g_build_filename (sub, "b", NULL);
  g_assert_cmpint (symlink ("b", a), ==, 0);
  g_assert_cmpint (symlink ("a", b), ==, 0);
  assert_write_error (a, G_IO_ERROR_TOO_MANY_LINKS, "circle");
}

static gpointer
read_fifo (gpointer path)
{
  g_autofree char *text = NULL;
  g_file_get_contents (path, &text, NULL, NULL);
  return g_steal_pointer (&text);
}

/* Ends the test at once (g_error) when @path is no longer a FIFO. */
static void
assert_fifo (const char *path)
{
  GStatBuf st;
  if (g_lstat (path, &st) != 0 || !S_ISFIFO (st.st_mode))
    g_error ("%s is no longer a FIFO: it was replaced rather than written", path);
}

static void
test_fifo (void)
{
  g_autofree char *fifo = path_in ("fifo");
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  GThread *reader = g_thread_new ("reader", read_fifo, fifo);
  g_autoptr (GError) error = NULL;
  g_assert_true (app_file_write (fifo, "piped\n", 6, &error));
  g_assert_no_error (error);
  /* Checked before the join: a reader of a FIFO that was replaced waits for ever. */
  assert_fifo (fifo);
  g_autofree char *got = g_thread_join (reader);
  g_assert_cmpstr (got, ==, "piped\n");
}

static void
test_device (void)
{
  /* A null device of our own, so a regression replaces it rather than the system's. */
  g_autofree char *dev = path_in ("null");
  if (mknod (dev, S_IFCHR | 0666, makedev (1, 3)) != 0)
    {
      g_test_skip_printf ("cannot make a character device here (%s): run as root to check "
                          "devices are written in place",
                          g_strerror (errno));
      return;
    }
  g_autoptr (GError) error = NULL;
  g_assert_true (app_file_write (dev, "gone\n", 5, &error));
  g_assert_no_error (error);
  GStatBuf st;
  g_assert_cmpint (g_lstat (dev, &st), ==, 0);
  g_assert_true (S_ISCHR (st.st_mode));
  g_assert_cmpuint (major (st.st_rdev), ==, 1);
  g_assert_cmpuint (minor (st.st_rdev), ==, 3);
}

/* A full device to write to. A regression that replaces devices rather than writing them
 * must not replace the system's /dev/full: as root (who could), it is a node of our own. */
static char *
full_device (void)
{
  g_autofree char *node = path_in ("full");
  if (g_file_test (node, G_FILE_TEST_EXISTS) || mknod (node, S_IFCHR | 0666, makedev (1, 7)) == 0)
    return g_steal_pointer (&node);
  if (g_file_test ("/dev/full", G_FILE_TEST_EXISTS) && access ("/dev", W_OK) != 0)
    return g_strdup ("/dev/full");
  g_test_skip ("no full device: /dev/full is missing, or /dev is writable and a device "
               "node cannot be made");
  return NULL;
}

static void
test_full (void)
{
  g_autofree char *full = full_device ();
  if (full == NULL)
    return;
  assert_write_error (full, G_IO_ERROR_NO_SPACE, "No space left on device");
  assert_write_error (full, G_IO_ERROR_NO_SPACE, "free space there or write elsewhere");
  GStatBuf st;
  g_assert_cmpint (g_lstat (full, &st), ==, 0);
  g_assert_true (S_ISCHR (st.st_mode));
}

static void
test_refusals (void)
{
  g_autofree char *missing = path_in ("no/such/folder/x.json");
  assert_write_error (missing, G_IO_ERROR_NOT_FOUND, "create its folder first");
  assert_write_error (dir, G_IO_ERROR_IS_DIRECTORY, "name a file inside it");
}

/* A file size limit stops the write half way: the old file stays byte for byte. */
static void
test_too_big (void)
{
  g_autofree char *path = path_in ("kept.txt");
  if (g_test_subprocess ())
    {
      struct rlimit limit = { 16, 16 };
      signal (SIGXFSZ, SIG_IGN);
      g_assert_cmpint (setrlimit (RLIMIT_FSIZE, &limit), ==, 0);
      char big[100];
      memset (big, 'b', sizeof big);
      g_autoptr (GError) error = NULL;
      g_assert_false (app_file_write (path, big, sizeof big, &error));
      g_assert_nonnull (error);
      g_assert_nonnull (strstr (error->message, "File too large"));
      return;
    }
  g_assert_true (g_file_set_contents (path, "old bytes\n", -1, NULL));
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_autofree char *text = read_text (path);
  g_assert_cmpstr (text, ==, "old bytes\n");
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  while ((name = g_dir_read_name (d)) != NULL)
    g_assert_false (g_str_has_prefix (name, ".kept.txt."));
}

/* /dev/stdout when standard output is a file opened to append: the file keeps what was
 * there and gets the bytes after it, as a shell's >> promises. A link of our own to
 * /proc/self/fd/1, as /dev/stdout is, so that a regression replaces it and not the
 * system's. */
static void
test_stdout_append (void)
{
  g_autofree char *path = path_in ("log.txt");
  g_autofree char *stdout_link = path_in ("stdout");
  if (g_test_subprocess ())
    {
      int fd = g_open (path, O_WRONLY | O_APPEND, 0);
      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpint (dup2 (fd, STDOUT_FILENO), ==, STDOUT_FILENO);
      close (fd);
      g_autoptr (GError) error = NULL;
      g_assert_true (app_file_write (stdout_link, "appended\n", 9, &error));
      g_assert_no_error (error);
      return;
    }
  g_assert_true (g_file_set_contents (path, "header\n", -1, NULL));
  g_assert_cmpint (symlink ("/proc/self/fd/1", stdout_link), ==, 0);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_autofree char *text = read_text (path);
  g_assert_cmpstr (text, ==, "header\nappended\n");
  g_assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));
  g_assert_true (g_file_test (stdout_link, G_FILE_TEST_IS_SYMLINK));
}

/* ---- every writer of the CLI ---- */

static char *plan_path;

/* A plan file from `propagate gpt2-tiny --mesh dp=2`, made once. */
static const char *
cli_plan (void)
{
  if (plan_path == NULL)
    {
      plan_path = path_in ("plan.json");
      const char *args[] = { "propagate", "gpt2-tiny", "--mesh", "dp=2", "-o", plan_path, NULL };
      g_autofree char *err = NULL;
      g_assert_cmpint (test_util_run_cli (args, NULL, &err), ==, 0);
    }
  return plan_path;
}

typedef struct
{
  const char *name;
  const char *magic; /* what the file starts with */
} Writer;

static const Writer writers[] = {
  { "propagate", "{\n  \"shardscope_plan\"" },
  { "export", "kind,index,name" },
  { "render-png", "\x89PNG" },
  { "render-svg", "<?xml" },
  { "render-pdf", "%PDF" },
  { "calibrate", "{" },
};

/* The command line of @w writing to @out. */
static GPtrArray *
writer_args (const Writer *w, const char *out)
{
  GPtrArray *a = g_ptr_array_new ();
  const char *plan = cli_plan ();
  if (g_str_equal (w->name, "propagate"))
    {
      const char *args[] = { "propagate", "gpt2-tiny", "--mesh", "dp=2", "-o", out };
      for (guint i = 0; i < G_N_ELEMENTS (args); i++)
        g_ptr_array_add (a, (gpointer)args[i]);
    }
  else if (g_str_equal (w->name, "export"))
    {
      const char *args[] = { "export", plan, "--format", "csv", "-o", out };
      for (guint i = 0; i < G_N_ELEMENTS (args); i++)
        g_ptr_array_add (a, (gpointer)args[i]);
    }
  else if (g_str_has_prefix (w->name, "render-"))
    {
      g_ptr_array_add (a, "render");
      g_ptr_array_add (a, (gpointer)plan);
      g_ptr_array_add (a, g_str_has_suffix (w->name, "png")   ? "--png"
                          : g_str_has_suffix (w->name, "svg") ? "--svg"
                                                              : "--pdf");
      g_ptr_array_add (a, (gpointer)out);
    }
  else
    {
      const char *args[] = { "calibrate", "--backend",   "cpu", "-o",           out, "--devices",
                             "2",         "--max-bytes", "64",  "--iterations", "1" };
      for (guint i = 0; i < G_N_ELEMENTS (args); i++)
        g_ptr_array_add (a, (gpointer)args[i]);
    }
  g_ptr_array_add (a, NULL);
  return a;
}

static void
limit_file_size (gpointer data)
{
  struct rlimit limit = { 64, 64 };
  signal (SIGXFSZ, SIG_IGN);
  setrlimit (RLIMIT_FSIZE, &limit);
}

static void
test_cli_writer (gconstpointer data)
{
  if (test_util_skip_without_cli ())
    return;
  const Writer *w = data;
  g_autofree char *sub_name = g_strdup_printf ("cli-%s", w->name);
  g_autofree char *sub = path_in (sub_name);
  g_assert_cmpint (g_mkdir (sub, 0755), ==, 0);

  /* A full device: exit 1 and the reason, never 0. */
  g_autofree char *full = full_device ();
  if (full == NULL)
    return;
  {
    g_autoptr (GPtrArray) args = writer_args (w, full);
    g_autofree char *err = NULL;
    g_autofree char *expect
        = g_strdup_printf ("shardscope-cli: cannot write %s: No space left on device", full);
    g_assert_cmpint (test_util_run_cli ((const char *const *)args->pdata, NULL, &err), ==, 1);
    if (strstr (err, expect) == NULL)
      g_error ("%s: %s", w->name, err);
  }

  /* A symbolic link stays one; the file it names gets the output. */
  g_autofree char *target = g_build_filename (sub, "target", NULL);
  g_autofree char *link = g_build_filename (sub, "link", NULL);
  g_assert_cmpint (symlink ("target", link), ==, 0);
  {
    g_autoptr (GPtrArray) args = writer_args (w, link);
    g_autofree char *err = NULL;
    g_assert_cmpint (test_util_run_cli ((const char *const *)args->pdata, NULL, &err), ==, 0);
    g_assert_true (g_file_test (link, G_FILE_TEST_IS_SYMLINK));
    g_autofree char *text = NULL;
    gsize length = 0;
    g_assert_true (g_file_get_contents (target, &text, &length, NULL));
    g_assert_cmpuint (length, >=, strlen (w->magic));
    g_assert_cmpmem (text, strlen (w->magic), w->magic, strlen (w->magic));
  }

  /* A FIFO is written into, not replaced. */
  g_autofree char *fifo = g_build_filename (sub, "fifo", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  {
    GThread *reader = g_thread_new ("reader", read_fifo, fifo);
    g_autoptr (GPtrArray) args = writer_args (w, fifo);
    g_assert_cmpint (test_util_run_cli ((const char *const *)args->pdata, NULL, NULL), ==, 0);
    assert_fifo (fifo);
    g_autofree char *got = g_thread_join (reader);
    g_assert_nonnull (got);
    g_assert_true (g_str_has_prefix (got, w->magic));
  }

  /* A write cut short (a 64-byte file size limit): exit 1, and the file it would have
   * replaced is left byte for byte. */
  g_autofree char *kept = g_build_filename (sub, "kept", NULL);
  g_assert_true (g_file_set_contents (kept, "previous contents\n", -1, NULL));
  {
    g_autoptr (GPtrArray) args = writer_args (w, kept);
    g_autofree char *err = NULL;
    g_assert_cmpint (test_util_run_cli_setup (NULL, limit_file_size, NULL,
                                              (const char *const *)args->pdata, NULL, &err),
                     ==, 1);
    g_assert_nonnull (strstr (err, "File too large"));
    g_autofree char *text = read_text (kept);
    g_assert_cmpstr (text, ==, "previous contents\n");
  }
  const char *names[] = { "target", "link", "fifo", "kept" };
  g_assert_true (g_str_equal (full, "/dev/full") || g_str_has_prefix (full, dir));
  assert_only (sub, names, G_N_ELEMENTS (names));
}

static void
stdout_to (gpointer path)
{
  int fd = open (path, O_WRONLY);
  if (fd >= 0)
    dup2 (fd, STDOUT_FILENO);
}

/* Standard output on a full device: exit 1 with the reason, for text, JSON and an export
 * without -o. */
static void
test_cli_stdout_full (void)
{
  if (test_util_skip_without_cli ())
    return;
  g_autofree char *full = full_device ();
  if (full == NULL)
    return;
  const char *graph[] = { "graph", "gpt2-tiny", NULL };
  const char *json[] = { "models", "--json", NULL };
  const char *export[] = { "export", cli_plan (), "--format", "csv", NULL };
  const char *const *cases[] = { graph, json, export };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *err = NULL;
      g_assert_cmpint (test_util_run_cli_setup (NULL, stdout_to, full, cases[i], NULL, &err), ==,
                       1);
      if (strstr (err, "shardscope-cli: cannot write standard output: ") == NULL
          || strstr (err, "free space there or send the output elsewhere") == NULL)
        g_error ("%s: %s", cases[i][0], err);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* The subprocesses of g_test_trap_subprocess() work in the parent's folder. */
  if (g_test_subprocess ())
    dir = g_strdup (g_getenv ("TEST_APP_FILE_DIR"));
  else
    {
      dir = test_util_tmp_dir_new ("app-file-XXXXXX");
      g_setenv ("TEST_APP_FILE_DIR", dir, TRUE);
    }
  g_test_add_func ("/app/file/regular", test_regular);
  g_test_add_func ("/app/file/symlink", test_symlink);
  g_test_add_func ("/app/file/fifo", test_fifo);
  g_test_add_func ("/app/file/device", test_device);
  g_test_add_func ("/app/file/full", test_full);
  g_test_add_func ("/app/file/refusals", test_refusals);
  g_test_add_func ("/app/file/too-big", test_too_big);
  g_test_add_func ("/app/file/stdout-append", test_stdout_append);
  for (guint i = 0; i < G_N_ELEMENTS (writers); i++)
    test_util_add_named ("/app/file/cli", writers[i].name, &writers[i], test_cli_writer);
  g_test_add_func ("/app/file/cli/stdout-full", test_cli_stdout_full);
  int status = g_test_run ();
  if (!g_test_subprocess ())
    test_util_tmp_dir_remove (dir);
  g_free (dir);
  g_free (plan_path);
  return status;
}
