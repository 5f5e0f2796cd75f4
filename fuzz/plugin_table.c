/* The plugin the plugin fuzz target loads (libfuzz_plugin_table.so, beside the target): its
 * attn_plugin_kernels and attn_plugin_tuning return whatever table the target built from the
 * input, through these variables (the target dlopens this library first to set them; the
 * loader's dlopen then finds the same copy). */
#include "attn_abi.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT const attn_kernel *fuzz_plugin_kernels;
EXPORT int fuzz_plugin_count, fuzz_plugin_abi;
EXPORT const attn_tuning *fuzz_plugin_tuning;

EXPORT const attn_kernel *attn_plugin_kernels(int *count, int *abi_version) {
    *count = fuzz_plugin_count;
    *abi_version = fuzz_plugin_abi;
    return fuzz_plugin_kernels;
}

EXPORT const attn_tuning *attn_plugin_tuning(const char *name) {
    (void)name;
    return fuzz_plugin_tuning;
}
