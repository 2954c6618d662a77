/* app-file.h: the one way shardscope-cli and the app write a file the user named (-o, export,
 * render, calibrate, the Export menu). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Writes @length bytes of @data to @path:
 * - a regular file, or a name that does not exist yet, is written to a temporary file beside
 *   it, flushed and renamed over it: it appears whole or not at all, and a file that cannot
 *   be written whole is left byte for byte as it was (its permissions are kept);
 * - a symbolic link is followed, and the file it leads to is written that way, so the link
 *   stays a link;
 * - anything else (a device such as /dev/null, a FIFO, /dev/stdout and the other names of an
 *   open file under /proc) is written in place, never replaced;
 * - every write, flush and close is checked: a full device (/dev/full), a missing folder or
 *   a file that may not be written is a G_IO_ERROR naming @path, what went wrong and what
 *   would work. */
gboolean app_file_write (const char *path, const void *data, gsize length, GError **error);

/* The same for GBytes. */
gboolean app_file_write_bytes (const char *path, GBytes *bytes, GError **error);

G_END_DECLS
