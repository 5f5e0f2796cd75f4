/* Finding a kernel by name: among the built-in kernels (registry.def) or in a plugin
 * shared library that exports attn_plugin_kernels(). */
#ifndef ATTN_REGISTRY_H
#define ATTN_REGISTRY_H

#include <stddef.h>
#include "attn_abi.h"

/* The built-in kernels; *count receives their number. */
const attn_kernel *const *attn_builtin_kernels(int *count);

/* Loads a plugin (dlopen) and returns its kernel table. On failure returns NULL with
 * "plugin <path>: <reason>" in err: cannot be loaded, lacks attn_plugin_kernels, another
 * ABI version, no kernels, or a kernel with an invalid name or no fwd. The library stays
 * loaded for the life of the process. */
const attn_kernel *attn_plugin_load(const char *path, int *count, char *err, size_t errlen);

/* The kernel called `name`: in the plugin at plugin_path if that is non-NULL, else among
 * the built-ins. NULL with the reason in err when there is none. */
const attn_kernel *attn_find_kernel(const char *name, const char *plugin_path, char *err,
                                    size_t errlen);

/* 1 iff name matches [a-z0-9_]+ */
int attn_kernel_name_valid(const char *name);

#endif
