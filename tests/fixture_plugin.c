/* Test fixture plugins for the loader: FIXTURE_GOOD exports one kernel that always answers
 * ATTN_UNSUPPORTED, with one tunable (attn_plugin_tuning); FIXTURE_BAD_NAME's tunables are
 * malformed too (a tunable without values); FIXTURE_V1 is built against the version-1 header (tests/abi_v1 first on
 * the include path) and exports two kernels that take head dim 64 only; FIXTURE_V2 is built
 * against the version-2 header (tests/abi_v2) and exports two kernels whose version-2 fields
 * all differ, so that a table read with another layout shows; FIXTURE_PAIRS declares
 * version 3's head_dim_pairs (built against the version-3 header, tests/abi_v3); FIXTURE_V4
 * two kernels of version 4 (tests/abi_v4: no backward, a table stride of six fields); the others
 * are broken in one way each (FIXTURE_BAD_PAIRS: a pair 192x128 without ATTN_CAP_HEAD_DIM_V). */
#include <stddef.h>

#include "attn_abi.h"

#define EXPORT __attribute__((visibility("default")))

static int unsupported_fwd(const attn_fwd_params *p, cudaStream_t s) {
    (void)p, (void)s;
    return ATTN_UNSUPPORTED;
}

#if defined(FIXTURE_V1) || defined(FIXTURE_V2)
/* reads a version-1 field: OK for head dim 64, else not supported */
static int d64_fwd(const attn_fwd_params *p, cudaStream_t s) {
    (void)s;
    return p && p->head_dim == 64 ? ATTN_OK : ATTN_UNSUPPORTED;
}
#endif

#if defined(FIXTURE_V1)
#if ATTN_ABI_VERSION != 1
#error "FIXTURE_V1 must be built with tests/abi_v1 before kernels/ on the include path"
#endif
static const attn_kernel table[] = {{"fixture_v1_a", d64_fwd}, {"fixture_v1_b", unsupported_fwd}};
#elif defined(FIXTURE_V2)
#if ATTN_ABI_VERSION != 2
#error "FIXTURE_V2 must be built with tests/abi_v2 before kernels/ on the include path"
#endif
static const int v2_dims[] = {64, 128, 192, 0};
static const attn_kernel table[] = {
    {"fixture_v2_a", d64_fwd, ATTN_CAP_GQA | ATTN_CAP_HEAD_DIM_V, 1u << ATTN_BF16, v2_dims},
    {"fixture_v2_b", unsupported_fwd, ATTN_CAP_WINDOW, 0, NULL},
};
#elif defined(FIXTURE_PAIRS)
#if ATTN_ABI_VERSION != 3
#error "FIXTURE_PAIRS must be built with tests/abi_v3 before kernels/ on the include path"
#endif
static const int pairs[] = {64, 64, 192, 128, 0};
static const attn_kernel table[] = {{"fixture_pairs", unsupported_fwd, ATTN_CAP_HEAD_DIM_V, 0, NULL, pairs}};
#elif defined(FIXTURE_V4)
#if ATTN_ABI_VERSION != 4
#error "FIXTURE_V4 must be built with tests/abi_v4 before kernels/ on the include path"
#endif
static const int v4_pairs[] = {192, 128, 0};
static const int v4_dims[] = {96, 0};
static const attn_kernel table[] = {
    {"fixture_v4_a", unsupported_fwd, ATTN_CAP_HEAD_DIM_V, 1u << ATTN_F16, NULL, v4_pairs},
    {"fixture_v4_b", unsupported_fwd, ATTN_CAP_SOFTCAP, 0, v4_dims, NULL},
};
#elif defined(FIXTURE_BAD_PAIRS)
static const int pairs[] = {192, 128, 0};
static const attn_kernel table[] = {{.name = "fixture_bad_pairs", .fwd = unsupported_fwd, .head_dim_pairs = pairs}};
#elif defined(FIXTURE_BAD_NAME)
static const attn_kernel table[] = {{.name = "Bad-Name", .fwd = unsupported_fwd}};
#else
static const attn_kernel table[] = {{.name = "fixture_unsupported", .fwd = unsupported_fwd}};
#endif

#if !defined(FIXTURE_NO_SYMBOL)
EXPORT const attn_kernel *attn_plugin_kernels(int *count, int *abi_version) {
    *count = (int)(sizeof table / sizeof table[0]);
#if defined(FIXTURE_BAD_ABI)
    *abi_version = 99;
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

#if ATTN_ABI_VERSION >= 2 && (defined(FIXTURE_GOOD) || defined(FIXTURE_BAD_NAME))
static int facts(const int *v, attn_dtype dt, int d, attn_config_facts *out) {
    (void)v, (void)dt, (void)d, (void)out;
    return ATTN_UNSUPPORTED;
}
static int fwd_config(const attn_fwd_params *p, const int *v, cudaStream_t s) {
    (void)p, (void)v, (void)s;
    return ATTN_UNSUPPORTED;
}
static int config_for(const attn_fwd_params *p, int *v, int *tuned) {
    (void)p, (void)v, (void)tuned;
    return ATTN_UNSUPPORTED;
}
static int default_for(const attn_fwd_params *p, int *v) {
    (void)p, (void)v;
    return ATTN_UNSUPPORTED;
}
#if defined(FIXTURE_GOOD)
static const int tile_values[] = {64, 128};
static const attn_tunable tunables[] = {{"tile", 2, tile_values}};
#else
static const attn_tunable tunables[] = {{"tile", 0, NULL}};
#endif
static const attn_tuning tuning = {1, tunables, facts, fwd_config, config_for, default_for};
EXPORT const attn_tuning *attn_plugin_tuning(const char *name) {
    return name && name[0] != 'x' ? &tuning : NULL; /* any kernel but names starting with x */
}
#endif
