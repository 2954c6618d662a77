#define G_LOG_DOMAIN "app-file"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app-file.h"

/* As the kernel's own limit on links followed in one lookup. */
#define MAX_LINKS 40

/* What would work after @saved stopped a write. */
static const char *
advice (int saved)
{
  switch (saved)
    {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return "free space there or write elsewhere";
    case EACCES:
    case EPERM:
    case EROFS:
    case ETXTBSY:
      return "choose a file you may write";
    case ENOENT:
    case ENOTDIR:
      return "create its folder first or choose another path";
    case EISDIR:
      return "name a file inside it instead";
    case ELOOP:
      return "its symbolic links go round in a circle; choose another path";
    case ENAMETOOLONG:
      return "choose a shorter path";
    case ENXIO:
      return "write to a file, a FIFO with a reader or a device instead";
    default:
      return "choose another path";
    }
}

static gboolean
set_error (GError **error, const char *path, const char *target, int saved)
{
  if (target && strcmp (path, target) != 0)
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved),
                 "cannot write %s (a link to %s): %s; %s", path, target, g_strerror (saved),
                 advice (saved));
  else
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved), "cannot write %s: %s; %s", path,
                 g_strerror (saved), advice (saved));
  return FALSE;
}

static gboolean
write_all (int fd, const guint8 *data, gsize length, int *saved)
{
  while (length > 0)
    {
      ssize_t n = write (fd, data, MIN (length, (gsize)G_MAXSSIZE));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          *saved = n < 0 ? errno : ENOSPC;
          return FALSE;
        }
      data += n;
      length -= (gsize)n;
    }
  return TRUE;
}

static gboolean
is_under_proc (const char *dir)
{
  char *real = realpath (dir, NULL);
  gboolean proc = real && (strcmp (real, "/proc") == 0 || g_str_has_prefix (real, "/proc/"));
  free (real);
  return proc;
}

/* Follows @path's symbolic links to the name they lead to (which need not exist yet).
 * *@open_file is set when a link lives under /proc (/dev/stdout -> /proc/self/fd/1): such
 * a link names an open file, which is written in place. */
static char *
resolve_links (const char *path, gboolean *open_file, GError **error)
{
  g_autofree char *p = g_strdup (path);
  for (guint hops = 0;; hops++)
    {
      GStatBuf st;
      if (g_lstat (p, &st) != 0 || !S_ISLNK (st.st_mode))
        return g_steal_pointer (&p);
      g_autofree char *dir = g_path_get_dirname (p);
      if (is_under_proc (dir))
        {
          *open_file = TRUE;
          return g_steal_pointer (&p);
        }
      if (hops == MAX_LINKS)
        {
          set_error (error, path, NULL, ELOOP);
          return NULL;
        }
      g_autoptr (GError) local = NULL;
      g_autofree char *link = g_file_read_link (p, &local);
      if (link == NULL)
        {
          set_error (error, path, p, errno ? errno : EINVAL);
          return NULL;
        }
      g_free (p);
      p = g_path_is_absolute (link) ? g_steal_pointer (&link) : g_build_filename (dir, link, NULL);
    }
}

/* /proc/self/fd/N or /proc/PID/fd/N of this process: N. */
static int
own_fd (const char *target)
{
  g_autofree char *dir = g_path_get_dirname (target);
  g_autofree char *base = g_path_get_basename (target);
  char *real = realpath (dir, NULL);
  g_autofree char *ours = g_strdup_printf ("/proc/%d/fd", (int)getpid ());
  gboolean mine = real && strcmp (real, ours) == 0;
  free (real);
  guint64 n;
  if (!mine || !g_ascii_string_to_unsigned (base, 10, 0, G_MAXINT, &n, NULL))
    return -1;
  return (int)n;
}

/* A device, a FIFO or an open file: written where it is, never replaced. */
static gboolean
write_in_place (const char *path, const char *target, gboolean regular, const void *data,
                gsize length, GError **error)
{
  int saved = 0;
  /* What stdio holds must come first when this is one of our own streams. */
  fflush (NULL);
  int mine = own_fd (target);
  int fd = mine >= 0 ? dup (mine)
                     : g_open (path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (regular ? O_TRUNC : 0), 0);
  if (fd < 0)
    return set_error (error, path, target, errno);
  gboolean ok = write_all (fd, data, length, &saved);
  if (close (fd) != 0 && ok)
    {
      ok = FALSE;
      saved = errno;
    }
  return ok || set_error (error, path, target, saved);
}

/* A regular file or a new name: a temporary file beside it, renamed over it when whole. */
static gboolean
write_replacing (const char *path, const char *target, const GStatBuf *old, const void *data,
                 gsize length, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (target);
  g_autofree char *base = g_path_get_basename (target);
  g_autofree char *name = g_strdup_printf (".%s.XXXXXX", base);
  g_autofree char *tmp = g_build_filename (dir, name, NULL);
  int mode = old ? (int)(old->st_mode & 07777) : 0666;
  int fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, mode);
  if (fd < 0)
    return set_error (error, path, target, errno);

  int saved = 0;
  gboolean ok = TRUE;
  /* mkstemp's mode passes through the umask; an existing file keeps exactly its own. */
  if (old != NULL && fchmod (fd, (mode_t)mode) != 0)
    {
      ok = FALSE;
      saved = errno;
    }
  ok = ok && write_all (fd, data, length, &saved);
  /* A full disk may show only when the data reach it. */
  if (ok && fsync (fd) != 0)
    {
      ok = FALSE;
      saved = errno;
    }
  if (close (fd) != 0 && ok)
    {
      ok = FALSE;
      saved = errno;
    }
  if (ok && g_rename (tmp, target) != 0)
    {
      ok = FALSE;
      saved = errno;
    }
  if (!ok)
    {
      g_unlink (tmp);
      return set_error (error, path, target, saved);
    }
  return TRUE;
}

gboolean
app_file_write (const char *path, const void *data, gsize length, GError **error)
{
  g_return_val_if_fail (path != NULL, FALSE);
  g_return_val_if_fail (data != NULL || length == 0, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (*path == '\0')
    return set_error (error, "''", NULL, ENOENT);
  gboolean open_file = FALSE;
  g_autofree char *target = resolve_links (path, &open_file, error);
  if (target == NULL)
    return FALSE;
  GStatBuf st;
  gboolean exists = g_stat (target, &st) == 0;
  if (exists && S_ISDIR (st.st_mode))
    return set_error (error, path, target, EISDIR);
  if (open_file || (exists && !S_ISREG (st.st_mode)))
    return write_in_place (path, target, exists && S_ISREG (st.st_mode), data ? data : "", length,
                           error);
  return write_replacing (path, target, exists ? &st : NULL, data ? data : "", length, error);
}

gboolean
app_file_write_bytes (const char *path, GBytes *bytes, GError **error)
{
  gsize length = 0;
  const void *data = g_bytes_get_data (bytes, &length);
  return app_file_write (path, data, length, error);
}
