/* planner-resources.h: the data compiled into the planner (data/planner.gresource.xml):
 * model configs, hardware profiles and policies. Looked up on the GResource object itself,
 * so nothing depends on a static library's constructor registering it. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define PLANNER_RESOURCE_PREFIX "/io/github/shardscope/planner/"

/* @path is relative to the prefix: "policies/megatron.json". NULL with @error when absent. */
GBytes *planner_resources_lookup (const char *path, GError **error);
/* Names of the files in one folder of the resource, without @suffix, sorted. */
char **planner_resources_list (const char *folder, const char *suffix);

G_END_DECLS
