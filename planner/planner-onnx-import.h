/* planner-onnx-import.h: ONNX model files as MODEL (planner/README.md, "ONNX").
 *
 * An .onnx file is read with protobuf-c against ONNX's own schema (planner/onnx.proto, compiled
 * by protoc-c at build time); its standard ops become Shardscope op types, the subgraphs that
 * exporters write for one module (RMSNorm, SiLU, GeLU, rotary embedding, attention) become that
 * op, shape arithmetic on constants is folded, and what is left unused (masks, rotary tables) is
 * dropped. Symbolic dims named like batch or sequence take PlannerModelOptions' batch and seq.
 * A build without protobuf-c (-Donnx=disabled) refuses every .onnx file, saying so.
 */
#pragma once

#include <glib.h>

#include "planner-model.h"

G_BEGIN_DECLS

/* Whether this build reads ONNX files. */
gboolean planner_onnx_supported (void);

/* Whether MODEL names an ONNX file (by its suffix, .onnx). */
gboolean planner_onnx_is_onnx_path (const char *model);

/* @options: batch and seq set symbolic dims (0: 8 and 1024); layers and dtype are refused. The
 * graph's source is the absolute path, with "?batch=..&seq=.." when the file has such dims. */
PlannerGraph *planner_onnx_import_file (const char *path, const PlannerModelOptions *options,
                                        GError **error);
/* The same from bytes in memory; @what names them in messages. @folder is where external data
 * files are looked for (none may lie outside it); NULL refuses external data. */
PlannerGraph *planner_onnx_import_data (const guint8 *data, gsize size, const char *what,
                                        const char *folder, const PlannerModelOptions *options,
                                        GError **error);

G_END_DECLS
