/* Test fixture plugins for the loader: FIXTURE_GOOD exports one kernel that always answers
 * ATTN_UNSUPPORTED; the others are broken in one way each. */
#include "attn_abi.h"

#define EXPORT __attribute__((visibility("default")))

static int unsupported_fwd(const attn_fwd_params *p, cudaStream_t s) {
    (void)p, (void)s;
    return ATTN_UNSUPPORTED;
}

#if defined(FIXTURE_BAD_NAME)
static const attn_kernel table[] = {{"Bad-Name", unsupported_fwd}};
#else
static const attn_kernel table[] = {{"fixture_unsupported", unsupported_fwd}};
#endif

#if !defined(FIXTURE_NO_SYMBOL)
EXPORT const attn_kernel *attn_plugin_kernels(int *count, int *abi_version) {
    *count = 1;
#if defined(FIXTURE_BAD_ABI)
    *abi_version = ATTN_ABI_VERSION + 98;
#else
    *abi_version = ATTN_ABI_VERSION;
#endif
    return table;
}
#else
EXPORT const attn_kernel *attn_plugin_kernels_misspelled(int *count, int *abi_version) {
    *count = 1;
    *abi_version = ATTN_ABI_VERSION;
    return table;
}
#endif
