/* Plugin loading: kept free of CUDA calls so that CMake can list a plugin's kernels at
 * configure time (scripts/list_plugin.c) on a machine without a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* The kernel entry of ABI version 1 (tests/abi_v1/attn_abi.h): a version-1 plugin's table is
 * an array of these. Its fwd reads only the version-1 prefix of attn_fwd_params, which
 * version 2 kept unchanged, so the function pointer is called as it is. */
typedef struct {
    const char *name;
    int (*fwd)(const attn_fwd_params *p, cudaStream_t stream);
} attn_kernel_v1;

/* The message of an unknown version and the conversion below are written for these two. */
_Static_assert(ATTN_ABI_VERSION == 2, "plugin.c: update the ABI versions the loader takes");

int attn_kernel_name_valid(const char *name) {
    if (!name || !*name) return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
    return 1;
}

/* A version-1 table as version-2 entries (heap, kept for the life of the process as the
 * library is): no capabilities, fp16 and bf16, any head dim, so that the harness gives its
 * kernels only version-1 problems. NULL when out of memory. */
static attn_kernel *from_v1(const attn_kernel_v1 *v1, int n) {
    attn_kernel *k = calloc((size_t)n, sizeof *k);
    if (!k) return NULL;
    for (int i = 0; i < n; i++)
        k[i] = (attn_kernel){.name = v1[i].name, .fwd = v1[i].fwd, .caps = 0, .dtypes = 0,
                             .head_dims = NULL};
    return k;
}

/* NULL when every entry is usable, else the reason (in err). */
static const char *check_table(const char *path, const attn_kernel *kernels, int n, char *err,
                               size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (!attn_kernel_name_valid(kernels[i].name)) {
            snprintf(err, errlen, "plugin %s: kernel #%d has an invalid name '%s' (need [a-z0-9_]+)",
                     path, i, kernels[i].name ? kernels[i].name : "(null)");
            return err;
        }
        if (!kernels[i].fwd) {
            snprintf(err, errlen, "plugin %s: kernel '%s' has no fwd function", path,
                     kernels[i].name);
            return err;
        }
        for (int j = 0; j < i; j++) {
            if (!strcmp(kernels[i].name, kernels[j].name)) {
                snprintf(err, errlen, "plugin %s: kernel name '%s' appears twice", path,
                         kernels[i].name);
                return err;
            }
        }
    }
    return NULL;
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
    if (abi != 1 && abi != ATTN_ABI_VERSION) {
        snprintf(err, errlen, "plugin %s: has ABI version %d; this harness takes versions 1 and %d",
                 path, abi, ATTN_ABI_VERSION);
        return NULL;
    }
    if (!kernels || n <= 0) {
        snprintf(err, errlen, "plugin %s: attn_plugin_kernels returned no kernels (count %d)",
                 path, n);
        return NULL;
    }
    attn_kernel *converted = NULL;
    if (abi == 1) {
        /* the function returned a version-1 table under the version-2 type */
        kernels = converted = from_v1((const attn_kernel_v1 *)(const void *)kernels, n);
        if (!converted) {
            snprintf(err, errlen, "plugin %s: out of memory converting %d version-1 kernels",
                     path, n);
            return NULL;
        }
    }
    if (check_table(path, kernels, n, err, errlen)) {
        free(converted);
        return NULL;
    }
    *count = n;
    return kernels;
}

const attn_tuning *attn_plugin_find_tuning(const char *path, const char *name, char *err, size_t errlen) {
    if (errlen) err[0] = 0;
    /* loaded already by attn_plugin_load: RTLD_NOLOAD finds it without loading it again */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "plugin %s: cannot be loaded: %s", path, dlerror());
        return NULL;
    }
    attn_plugin_tuning_fn f = (attn_plugin_tuning_fn)dlsym(lib, "attn_plugin_tuning");
    const attn_tuning *t = f ? f(name) : NULL;
    if (!t) return NULL; /* no tunables: not an error */
    if (t->count < 1 || t->count > ATTN_TUNE_MAX_TUNABLES || !t->tunables || !t->facts || !t->fwd_config ||
        !t->config_for || !t->default_for) {
        snprintf(err, errlen,
                 "plugin %s: kernel '%s': attn_plugin_tuning gives %d tunables (1..%d) or a NULL "
                 "tunables, facts, fwd_config, config_for or default_for",
                 path, name, t->count, ATTN_TUNE_MAX_TUNABLES);
        return NULL;
    }
    for (int i = 0; i < t->count; i++) {
        const attn_tunable *u = &t->tunables[i];
        if (!attn_kernel_name_valid(u->name) || u->count < 1 || u->count > 64 || !u->values) {
            snprintf(err, errlen,
                     "plugin %s: kernel '%s': tunable #%d ('%s') needs a [a-z0-9_]+ name and 1..64 values",
                     path, name, i, u->name ? u->name : "(null)");
            return NULL;
        }
    }
    return t;
}
