/* Plugin loading: kept free of CUDA calls so that CMake can list a plugin's kernels at
 * configure time (scripts/list_plugin.c) on a machine without a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

/* The kernel entries of ABI versions 1 and 2 (tests/abi_v1/attn_abi.h,
 * tests/abi_v2/attn_abi.h): an older plugin's table is an array of these. Its fwd reads only
 * its version's prefix of attn_fwd_params, which later versions kept unchanged, so the
 * function pointer is called as it is. */
typedef struct {
    const char *name;
    int (*fwd)(const attn_fwd_params *p, cudaStream_t stream);
} attn_kernel_v1;
typedef struct {
    const char *name;
    int (*fwd)(const attn_fwd_params *p, cudaStream_t stream);
    uint32_t caps, dtypes;
    const int *head_dims;
} attn_kernel_v2;
/* Versions 3 and 4 (version 4 changed attn_fwd_params only): version 5 appends the backward. */
typedef struct {
    const char *name;
    int (*fwd)(const attn_fwd_params *p, cudaStream_t stream);
    uint32_t caps, dtypes;
    const int *head_dims;
    const int *head_dim_pairs;
} attn_kernel_v3;

/* The message of an unknown version and the conversion below are written for these five. */
_Static_assert(ATTN_ABI_VERSION == 5, "plugin.c: update the ABI versions the loader takes");

/* A version-3 pair list is read up to this many pairs; a longer one is refused. */
enum { MAX_HEAD_DIM_PAIRS = 256 };

int attn_kernel_name_valid(const char *name) {
    if (!name || !*name) return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
    return 1;
}

/* An older table as this version's entries (heap, kept for the life of the process as the
 * library is), each read with its own version's layout: version 1 with no capabilities, fp16
 * and bf16, any head dim, so that the harness gives its kernels only version-1 problems;
 * version 2 with its fields as they are and no head_dim pairs; versions 3 and 4 with theirs
 * and no backward. NULL when out of memory. */
static attn_kernel *convert(const void *table, int abi, int n) {
    attn_kernel *k = calloc((size_t)n, sizeof *k);
    if (!k) return NULL;
    for (int i = 0; i < n; i++) {
        if (abi == 1) {
            const attn_kernel_v1 *e = (const attn_kernel_v1 *)table + i;
            k[i] = (attn_kernel){.name = e->name, .fwd = e->fwd};
        } else if (abi >= 3) {
            const attn_kernel_v3 *e = (const attn_kernel_v3 *)table + i;
            k[i] = (attn_kernel){.name = e->name, .fwd = e->fwd, .caps = e->caps, .dtypes = e->dtypes,
                                 .head_dims = e->head_dims, .head_dim_pairs = e->head_dim_pairs};
        } else {
            const attn_kernel_v2 *e = (const attn_kernel_v2 *)table + i;
            k[i] = (attn_kernel){.name = e->name, .fwd = e->fwd, .caps = e->caps, .dtypes = e->dtypes,
                                 .head_dims = e->head_dims};
        }
    }
    return k;
}

/* NULL when head_dim_pairs is NULL or a well-formed list, else the reason (in err). */
static const char *check_pairs(const attn_kernel *k, char *err, size_t errlen) {
    const int *l = k->head_dim_pairs;
    if (!l) return NULL;
    if (!l[0]) {
        snprintf(err, errlen, "kernel '%s': head_dim_pairs is empty (NULL takes any pair)", k->name);
        return err;
    }
    for (int i = 0; l[2 * i]; i++) {
        const int d = l[2 * i], dv = l[2 * i + 1];
        if (i == MAX_HEAD_DIM_PAIRS) {
            snprintf(err, errlen, "kernel '%s': head_dim_pairs has no 0 after %d pairs", k->name, i);
            return err;
        }
        if (d < 1 || dv < 1) {
            snprintf(err, errlen, "kernel '%s': head_dim_pairs pair #%d is (%d, %d): each must be >= 1 (%s)",
                     k->name, i, d, dv, dv ? "a negative value" : "the list ends inside a pair");
            return err;
        }
        if (d != dv && !(k->caps & ATTN_CAP_HEAD_DIM_V)) {
            snprintf(err, errlen, "kernel '%s': head_dim_pairs lists %dx%d but ATTN_CAP_HEAD_DIM_V is not in its caps",
                     k->name, d, dv);
            return err;
        }
    }
    return NULL;
}

const char *attn_kernel_entry_check(const attn_kernel *k, int index, char *err, size_t errlen) {
    if (!attn_kernel_name_valid(k->name)) {
        snprintf(err, errlen, "kernel #%d has an invalid name '%s' (need [a-z0-9_]+)", index,
                 k->name ? k->name : "(null)");
        return err;
    }
    if (!k->fwd) {
        snprintf(err, errlen, "kernel '%s' has no fwd function", k->name);
        return err;
    }
    if (!k->bwd && (k->bwd_workspace || k->bwd_caps)) {
        snprintf(err, errlen, "kernel '%s' has %s but no bwd function", k->name,
                 k->bwd_workspace ? "bwd_workspace" : "bwd_caps");
        return err;
    }
    return check_pairs(k, err, errlen);
}

/* NULL when every entry is usable, else the reason (in err). */
static const char *check_table(const char *path, const attn_kernel *kernels, int n, char *err,
                               size_t errlen) {
    char why[512];
    for (int i = 0; i < n; i++) {
        if (attn_kernel_entry_check(&kernels[i], i, why, sizeof why)) {
            snprintf(err, errlen, "plugin %s: %s", path, why);
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
    if (abi < 1 || abi > ATTN_ABI_VERSION) {
        snprintf(err, errlen, "plugin %s: has ABI version %d; this harness takes versions 1 to %d",
                 path, abi, ATTN_ABI_VERSION);
        return NULL;
    }
    if (!kernels || n <= 0) {
        snprintf(err, errlen, "plugin %s: attn_plugin_kernels returned no kernels (count %d)",
                 path, n);
        return NULL;
    }
    attn_kernel *converted = NULL;
    if (abi < ATTN_ABI_VERSION) {
        /* the function returned an older version's table under this version's type */
        kernels = converted = convert((const void *)kernels, abi, n);
        if (!converted) {
            snprintf(err, errlen, "plugin %s: out of memory converting %d version-%d kernels",
                     path, n, abi);
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
