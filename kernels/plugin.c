/* Plugin loading: kept free of CUDA calls so that CMake can list a plugin's kernels at
 * configure time (scripts/list_plugin.c) on a machine without a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"

int attn_kernel_name_valid(const char *name) {
    if (!name || !*name) return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
    return 1;
}

const attn_kernel *attn_plugin_load(const char *path, int *count, char *err, size_t errlen) {
    *count = 0;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "plugin %s: cannot be loaded: %s", path, dlerror());
        return NULL;
    }
    dlerror();
    attn_plugin_kernels_fn list = (attn_plugin_kernels_fn)dlsym(lib, "attn_plugin_kernels");
    if (!list) {
        const char *why = dlerror();
        snprintf(err, errlen, "plugin %s: has no symbol attn_plugin_kernels (%s)", path,
                 why ? why : "the symbol is NULL");
        return NULL;
    }
    int n = -1, abi = -1;
    const attn_kernel *kernels = list(&n, &abi);
    if (abi != ATTN_ABI_VERSION) {
        snprintf(err, errlen, "plugin %s: has ABI version %d; this harness needs version %d",
                 path, abi, ATTN_ABI_VERSION);
        return NULL;
    }
    if (!kernels || n <= 0) {
        snprintf(err, errlen, "plugin %s: attn_plugin_kernels returned no kernels (count %d)",
                 path, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!attn_kernel_name_valid(kernels[i].name)) {
            snprintf(err, errlen, "plugin %s: kernel #%d has an invalid name '%s' (need [a-z0-9_]+)",
                     path, i, kernels[i].name ? kernels[i].name : "(null)");
            return NULL;
        }
        if (!kernels[i].fwd) {
            snprintf(err, errlen, "plugin %s: kernel '%s' has no fwd function", path,
                     kernels[i].name);
            return NULL;
        }
        for (int j = 0; j < i; j++) {
            if (!strcmp(kernels[i].name, kernels[j].name)) {
                snprintf(err, errlen, "plugin %s: kernel name '%s' appears twice", path,
                         kernels[i].name);
                return NULL;
            }
        }
    }
    *count = n;
    return kernels;
}
