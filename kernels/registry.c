#include <stdio.h>
#include <string.h>

#include "registry.h"

#define ATTN_KERNEL(name) extern const attn_kernel attn_kernel_##name;
#define ATTN_TUNING(name) extern const attn_tuning attn_tuning_##name;
#include "registry.def"
#undef ATTN_KERNEL
#undef ATTN_TUNING

static const attn_kernel *const builtin[] = {
#define ATTN_KERNEL(name) &attn_kernel_##name,
#define ATTN_TUNING(name)
#include "registry.def"
#undef ATTN_KERNEL
#undef ATTN_TUNING
};

static const struct {
    const char *name;
    const attn_tuning *tuning;
} builtin_tuning[] = {
#define ATTN_KERNEL(name)
#define ATTN_TUNING(name) {#name, &attn_tuning_##name},
#include "registry.def"
#undef ATTN_KERNEL
#undef ATTN_TUNING
    {NULL, NULL},
};

const attn_kernel *const *attn_builtin_kernels(int *count) {
    *count = (int)(sizeof builtin / sizeof builtin[0]);
    return builtin;
}

const attn_kernel *attn_find_kernel(const char *name, const char *plugin_path, char *err,
                                    size_t errlen) {
    if (plugin_path) {
        int n;
        const attn_kernel *k = attn_plugin_load(plugin_path, &n, err, errlen);
        if (!k) return NULL;
        for (int i = 0; i < n; i++)
            if (!strcmp(k[i].name, name)) return &k[i];
        snprintf(err, errlen, "plugin %s: has no kernel named '%s'", plugin_path, name);
        return NULL;
    }
    int n;
    const attn_kernel *const *b = attn_builtin_kernels(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(b[i]->name, name)) return b[i];
    snprintf(err, errlen, "no built-in kernel named '%s' (see kernels/registry.def)", name);
    return NULL;
}

const attn_tuning *attn_find_tuning(const attn_kernel *k, const char *plugin_path, char *err,
                                    size_t errlen) {
    if (errlen) err[0] = 0;
    if (!k) return NULL;
    if (plugin_path) return attn_plugin_find_tuning(plugin_path, k->name, err, errlen);
    for (int i = 0; builtin_tuning[i].name; i++)
        if (!strcmp(builtin_tuning[i].name, k->name)) return builtin_tuning[i].tuning;
    return NULL;
}
