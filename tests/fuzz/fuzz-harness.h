/* fuzz-harness.h: what the fuzz harnesses (tests/fuzz/fuzz-<thing>.c) share.
 *
 * Each harness is one entry point, fuzz_<thing> (data, size, error), which feeds the bytes to
 * the parser the program uses for that input and returns whether the input was taken. It is
 * called by libFuzzer (LLVMFuzzerTestOneInput, in a -Dfuzz=true build) and, in every build, by
 * test-fuzz-inputs, which replays the seed corpus and every regression input under
 * tests/fuzz/<thing>/ through the same entry point. The contract checked on both paths: the
 * input is taken with no error, or refused with a PLANNER_ERROR that has a message; nothing
 * crashes, and no GLib warning or critical is logged (they are made fatal).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef gboolean (*FuzzEntry) (const guint8 *data, gsize size, GError **error);

/* @data as a NUL-terminated string (a text reader stops at the first NUL, as C strings do). */
char *fuzz_text (const guint8 *data, gsize size);

/* Aborts unless (@ok and no @error) or (not @ok and @error a PLANNER_ERROR with a message). */
void fuzz_check_outcome (gboolean ok, const GError *error, const char *harness);

/* Prints "fuzz: MESSAGE" and aborts (a finding). */
void fuzz_fail (const char *format, ...) G_GNUC_PRINTF (1, 2) G_GNUC_NORETURN;

/* Once per process: GLib warnings and criticals abort, as G_DEBUG=fatal-warnings does. */
void fuzz_init (void);

/* A file name of this process under the temporary folder, for the harnesses that need a path
 * (policy files, store files); @suffix ends it. */
const char *fuzz_tmp_path (const char *suffix);
/* Writes @data to @path, replacing it. */
void fuzz_write_file (const char *path, const guint8 *data, gsize size);

gboolean fuzz_mesh (const guint8 *data, gsize size, GError **error);
gboolean fuzz_layout (const guint8 *data, gsize size, GError **error);
gboolean fuzz_pin (const guint8 *data, gsize size, GError **error);
gboolean fuzz_hf_config (const guint8 *data, gsize size, GError **error);
gboolean fuzz_graph_json (const guint8 *data, gsize size, GError **error);
gboolean fuzz_plan_json (const guint8 *data, gsize size, GError **error);
gboolean fuzz_policy (const guint8 *data, gsize size, GError **error);
gboolean fuzz_hardware (const guint8 *data, gsize size, GError **error);
gboolean fuzz_store (const guint8 *data, gsize size, GError **error);
gboolean fuzz_onnx (const guint8 *data, gsize size, GError **error);

/* In a -Dfuzz=true build each fuzz-<thing> program is fuzz-<thing>.c's entry point behind
 * libFuzzer's LLVMFuzzerTestOneInput; FUZZ_TARGET(fuzz_<thing>) defines it. */
#ifdef SHARDSCOPE_FUZZ_TARGET
#define FUZZ_TARGET(entry)                                                                         \
  int LLVMFuzzerInitialize (int *argc, char ***argv);                                              \
  int LLVMFuzzerTestOneInput (const guint8 *data, gsize size);                                     \
  int LLVMFuzzerInitialize (int *argc, char ***argv)                                               \
  {                                                                                                \
    fuzz_init ();                                                                                  \
    return 0;                                                                                      \
  }                                                                                                \
  int LLVMFuzzerTestOneInput (const guint8 *data, gsize size)                                      \
  {                                                                                                \
    GError *error = NULL;                                                                          \
    gboolean ok = entry (data, size, &error);                                                      \
    fuzz_check_outcome (ok, error, #entry);                                                        \
    g_clear_error (&error);                                                                        \
    return 0;                                                                                      \
  }
#else
#define FUZZ_TARGET(entry)
#endif

G_END_DECLS
