/* attn_tuning_flash2 (attn_abi.h): flash2's tunable space (space.h) for the plain path of
 * version-1 problems at d64 and d128 (not the packed heads of S <= 32, decode, nor the EXT and
 * VAR instantiations), its compiled points (the generated instances, tuning.h), and the tuned
 * point flash2_fwd runs on a GPU that a committed tuned file names. */
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "decode.h"
#include "tuning.h"

#define FLASH2_UNIT(tag) int flash2_instances_##tag(flash2_tune::Instance *out);
#include "flash2_units.inc" /* generated (space.cmake) */
#undef FLASH2_UNIT

namespace {

using flash2_space::Point;

constexpr attn_tunable kTunables[] = {
    {"warps", 2, flash2_space::kWarps},         {"row_tiles", 2, flash2_space::kRowTiles},
    {"block_n", 3, flash2_space::kBlockN},      {"stages", 2, flash2_space::kStages},
    {"q_in_regs", 2, flash2_space::kQInRegs},   {"min_blocks", 4, flash2_space::kMinBlocks},
};
static_assert(sizeof kTunables / sizeof kTunables[0] == flash2_space::N_TUNABLES, "one entry per tunable");

Point to_point(const int *v) {
    return Point{v[flash2_space::WARPS],   v[flash2_space::ROW_TILES], v[flash2_space::BLOCK_N],
                 v[flash2_space::STAGES],  v[flash2_space::Q_IN_REGS], v[flash2_space::MIN_BLOCKS]};
}
void from_point(const Point &x, int *v) {
    v[flash2_space::WARPS] = x.warps, v[flash2_space::ROW_TILES] = x.row_tiles, v[flash2_space::BLOCK_N] = x.block_n;
    v[flash2_space::STAGES] = x.stages, v[flash2_space::Q_IN_REGS] = x.q_in_regs, v[flash2_space::MIN_BLOCKS] = x.min_blocks;
}
bool in_space(const int *v) {
    for (int i = 0; i < flash2_space::N_TUNABLES; ++i) {
        bool found = false;
        for (int j = 0; j < kTunables[i].count; ++j) found |= kTunables[i].values[j] == v[i];
        if (!found) return false;
    }
    return true;
}

/* Every compiled point but the defaults, gathered once from the generated units. */
struct Instances {
    flash2_tune::Instance all[16 * flash2_tune::kPerUnit];
    int n = 0;
    Instances() {
#define FLASH2_UNIT(tag) n += flash2_instances_##tag(all + n);
#include "flash2_units.inc"
#undef FLASH2_UNIT
    }
};
const Instances &instances() {
    static const Instances in; /* thread-safe initialisation (C++11) */
    return in;
}
const flash2_tune::Instance *find_instance(const Point &x, int dtype, int d) {
    const Instances &in = instances();
    for (int i = 0; i < in.n; ++i)
        if (in.all[i].dtype == dtype && in.all[i].d == d && flash2_space::same(in.all[i].x, x)) return &in.all[i];
    return nullptr;
}

/* The tunable path: a version-1 problem (flash2_fwd's `ext` and `var` both false) at d64 or
 * d128 that takes neither the packed heads (S_q, S_k <= 32) nor the decode path. */
bool tunable_path(const attn_fwd_params *p) {
    if (!p || (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) || (p->head_dim != 64 && p->head_dim != 128))
        return false;
    if (p->head_dim_v != 0 && p->head_dim_v != p->head_dim) return false;
    if (p->heads_k != 0 && p->heads_k != p->heads) return false;
    if (p->softcap != 0.0f || p->cu_seqlens_q || p->cu_seqlens_k || p->block_table || p->seqused_k) return false;
    /* windows: only the forms flash2_fwd folds into causal or none */
    const bool left = p->window_left >= 0 && p->window_left < p->seqlen_k - 1;
    const bool right = !p->causal && p->window_right >= 1 && p->window_right < p->seqlen_q - 1;
    if (left || right) return false;
    if (!flash2_dense_ok(p)) return false;                    /* what flash2_fwd refuses */
    if (p->seqlen_q <= 32 && p->seqlen_k <= 32) return false; /* packed heads (heads_per_block >= 2) */
    /* the decode path's problems (it may still decline one, e.g. on its first call inside a
     * graph capture: the default point then runs it, not a tuned one) */
    return !(p->seqlen_q <= FLASH2_DECODE_MAX_Q && p->seqlen_k >= FLASH2_DECODE_MIN_KEYS);
}
bool is_causal(const attn_fwd_params *p) {
    return p->causal || (p->window_right == 0 && p->seqlen_q > 1);
}
Point default_point(const attn_fwd_params *p) {
    /* flash2.cu's dispatch: its untuned row tiles */
    return flash2_space::default_point(p->head_dim, flash2_space::default_row_tiles(p->head_dim, is_causal(p)));
}

/* The tuned table's GPU for the current device: an index into kTuned's names, -1 none; per
 * device, resolved once (the device's name from cudaGetDeviceProperties). */
constexpr int kMaxDevices = 64;
std::atomic<int> tuned_gpu[kMaxDevices];
std::once_flag tuned_gpu_once[kMaxDevices];
int device_tuned_gpu() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return -1;
    std::call_once(tuned_gpu_once[dev], [dev] {
        int found = -1;
        cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
            for (int i = 0; flash2_tune::kTuned[i].gpu; ++i)
                if (!strcmp(flash2_tune::kTuned[i].gpu, prop.name)) {
                    found = i;
                    break;
                }
        tuned_gpu[dev].store(found);
    });
    return tuned_gpu[dev].load();
}

/* The committed tuned point for p on this device, or nullptr. */
const flash2_tune::Tuned *tuned_for(const attn_fwd_params *p) {
    if (!tunable_path(p)) return nullptr;
    const int g = device_tuned_gpu();
    if (g < 0) return nullptr;
    const char *gpu = flash2_tune::kTuned[g].gpu;
    const int causal = is_causal(p);
    for (const flash2_tune::Tuned &t : flash2_tune::kTuned)
        if (t.gpu && !strcmp(t.gpu, gpu) && t.dtype == (int)p->dtype && t.d == p->head_dim && t.causal == causal &&
            p->seqlen_q >= t.lo && p->seqlen_q <= t.hi && p->seqlen_k >= t.lo && p->seqlen_k <= t.hi)
            return &t;
    return nullptr;
}

int facts(const int *values, attn_dtype dtype, int head_dim, attn_config_facts *out) {
    if (!values || !out || (dtype != ATTN_F16 && dtype != ATTN_BF16) || (head_dim != 64 && head_dim != 128))
        return ATTN_UNSUPPORTED;
    memset(out, 0, sizeof *out);
    if (!in_space(values)) {
        snprintf(out->rule, sizeof out->rule, "a value outside the tunable's list");
        return ATTN_OK;
    }
    const Point x = to_point(values);
    const flash2_space::Needs n = flash2_space::needs(x, head_dim, head_dim);
    out->threads = n.threads;
    out->shared_bytes = n.shared_bytes;
    out->regs_estimate = n.regs_estimate;
    out->min_blocks = x.min_blocks;
    if (n.rule) snprintf(out->rule, sizeof out->rule, "%s", n.rule);
    for (int mt = 1; mt <= 2; ++mt)
        if (flash2_space::same(x, flash2_space::default_point(head_dim, mt))) {
            attn_fwd_params probe = {};
            probe.dtype = dtype, probe.head_dim = head_dim;
            flash2_launch_default(&probe, mt, nullptr, &out->func); /* only the function, no launch */
        }
    if (const flash2_tune::Instance *in = find_instance(x, dtype, head_dim)) out->func = in->func;
    out->built = out->func != nullptr;
    return ATTN_OK;
}

int fwd_config(const attn_fwd_params *p, const int *values, cudaStream_t stream) {
    if (!values || !in_space(values) || !tunable_path(p)) return ATTN_UNSUPPORTED;
    const Point x = to_point(values);
    /* over this GPU's shared memory per block: the launch would fail */
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        return 2;
    if (flash2_space::needs(x, p->head_dim, p->head_dim).shared_bytes > optin) return ATTN_UNSUPPORTED;
    for (int mt = 1; mt <= 2; ++mt)
        if (flash2_space::same(x, flash2_space::default_point(p->head_dim, mt)))
            return flash2_launch_default(p, mt, stream, nullptr);
    const flash2_tune::Instance *in = find_instance(x, p->dtype, p->head_dim);
    return in ? in->launch(p, stream) : ATTN_UNSUPPORTED; /* not in this build */
}

int default_for(const attn_fwd_params *p, int *values) {
    if (!values || !tunable_path(p)) return ATTN_UNSUPPORTED;
    from_point(default_point(p), values);
    return ATTN_OK;
}

int config_for(const attn_fwd_params *p, int *values, int *tuned) {
    if (!values || !tunable_path(p)) return ATTN_UNSUPPORTED;
    const flash2_tune::Tuned *t = tuned_for(p);
    const bool use = t && find_instance(t->x, p->dtype, p->head_dim);
    from_point(use ? t->x : default_point(p), values);
    if (tuned) *tuned = use;
    return ATTN_OK;
}

} // namespace

int flash2_tuned_fwd(const attn_fwd_params *p, cudaStream_t stream) {
    const flash2_tune::Tuned *t = tuned_for(p);
    if (!t) return ATTN_UNSUPPORTED;
    const flash2_tune::Instance *in = find_instance(t->x, p->dtype, p->head_dim);
    return in ? in->launch(p, stream) : ATTN_UNSUPPORTED;
}

extern "C" const attn_tuning attn_tuning_flash2 = {
    flash2_space::N_TUNABLES, kTunables, facts, fwd_config, config_for, default_for,
};
