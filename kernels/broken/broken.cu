/* libattn_broken: a plugin of deliberately broken kernels, used as test fixtures that
 * prove the harness catches bugs. Each kernel is one known bug in an otherwise correct
 * kernel; "broken_none" is the same template with no bug, a control that must pass
 * everything (so a failure of the others comes from their bug, not from this copy).
 *
 * It is never part of the default correctness suite: it runs only when the harness is
 * configured with -DATTN_PLUGINS=<path to libattn_broken.so>.
 *
 * The algorithm is a private copy of kernels/simple (one warp per query row, float32
 * online softmax), templated on `int BUG`. To add a bug class: one enum value below, one
 * `if constexpr (BUG == ...)` hook where the bug lives, one line in `table`, and one row
 * in README.md. */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "attn_abi.h"

namespace {

enum {
    BUG_NONE = 0,           /* control: correct */
    BUG_CAUSAL_OFF_BY_ONE,  /* causal mask lets each query see one key too many */
    /* isolation fixtures: they prove a faulting or hanging kernel fails its own test only */
    BUG_ILLEGAL_ADDRESS,    /* writes far outside O: the launch faults */
    BUG_HANG,               /* never finishes: the CTest timeout must stop it */
    /* performance fixture: correct output in twice the time; the benchmark thresholds of
     * "simple" must fail it (run it with ATTN_THRESHOLDS_KERNEL=simple) */
    BUG_SLOW_2X,
};

constexpr int kWarpsPerBlock = 4; /* query rows per block */
constexpr int kErr = 2;           /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

template <typename T, int D, int BUG>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
broken_fwd_kernel(const attn_fwd_params p) {
    constexpr int E = D / 32;
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads * p.seqlen_q;
    if (row >= n_rows) return;

    const int i = (int)(row % p.seqlen_q);
    const int64_t bh = row / p.seqlen_q;
    const int h = (int)(bh % p.heads);
    const int b = (int)(bh / p.heads);

    const T *q = (const T *)p.q + b * p.q_batch_stride + h * p.q_head_stride + i * p.q_row_stride;
    const T *k = (const T *)p.k + b * p.k_batch_stride + h * p.k_head_stride;
    const T *v = (const T *)p.v + b * p.v_batch_stride + h * p.v_head_stride;
    T *o = (T *)p.o + b * p.o_batch_stride + h * p.o_head_stride + i * p.o_row_stride;

    /* Visible keys are 0 .. n_keys-1; correct: key j visible iff j <= i + seqlen_k - seqlen_q. */
    int64_t n_keys = p.seqlen_k;
    if (p.causal) {
        int64_t last = (int64_t)i + p.seqlen_k - p.seqlen_q;
        if constexpr (BUG == BUG_CAUSAL_OFF_BY_ONE) last += 1; /* BUG: j <= i + sk - sq + 1 */
        n_keys = last + 1 < n_keys ? last + 1 : n_keys;
        if (n_keys < 0) n_keys = 0;
    }

    if constexpr (BUG == BUG_ILLEGAL_ADDRESS) o += (int64_t)1 << 40; /* BUG: 2 TB past O */
    if constexpr (BUG == BUG_HANG) {
        while (p.seqlen_k > 0) __nanosleep(1u << 20); /* BUG: spins until the process is killed */
    }

    float qf[E], acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        qf[e] = to_float(q[e * 32 + lane]);
        acc[e] = 0.f;
    }

    float m = -INFINITY, l = 0.f;
    for (int64_t j = 0; j < n_keys; ++j) {
        const T *kj = k + j * p.k_row_stride;
        const T *vj = v + j * p.v_row_stride;
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e) s += qf[e] * to_float(kj[e * 32 + lane]);
        s = warp_sum(s) * p.softmax_scale;

        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float pj = expf(s - m_new);
        l = l * corr + pj;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] = acc[e] * corr + pj * to_float(vj[e * 32 + lane]);
        m = m_new;
    }

#pragma unroll
    for (int e = 0; e < E; ++e) o[e * 32 + lane] = from_float<T>(n_keys > 0 ? acc[e] / l : 0.f);
    if (p.lse != nullptr && lane == 0) p.lse[row] = n_keys > 0 ? m + logf(l) : -INFINITY;
}

template <typename T, int D, int BUG>
int launch(const attn_fwd_params *p, cudaStream_t stream) {
    const int64_t n_rows = (int64_t)p->batch * p->heads * p->seqlen_q;
    const int64_t n_blocks = (n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (n_blocks > 0x7fffffff) return kErr;
    broken_fwd_kernel<T, D, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p);
    if constexpr (BUG == BUG_SLOW_2X) /* BUG: the same work again */
        broken_fwd_kernel<T, D, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

template <int BUG>
int broken_fwd(const attn_fwd_params *p, cudaStream_t stream) {
    if (p == nullptr) return kErr;
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if (p->head_dim != 64 && p->head_dim != 128) return ATTN_UNSUPPORTED;
    if (p->batch < 1 || p->heads < 1 || p->seqlen_q < 1 || p->seqlen_k < 1) return kErr;
    if (!p->q || !p->k || !p->v || !p->o) return kErr;

    const bool bf16 = p->dtype == ATTN_BF16;
    if (p->head_dim == 64)
        return bf16 ? launch<__nv_bfloat16, 64, BUG>(p, stream)
                    : launch<__half, 64, BUG>(p, stream);
    return bf16 ? launch<__nv_bfloat16, 128, BUG>(p, stream)
                : launch<__half, 128, BUG>(p, stream);
}

const attn_kernel table[] = {
    { "broken_none", broken_fwd<BUG_NONE> },
    { "broken_causal_off_by_one", broken_fwd<BUG_CAUSAL_OFF_BY_ONE> },
    { "broken_illegal_address", broken_fwd<BUG_ILLEGAL_ADDRESS> },
    { "broken_hang", broken_fwd<BUG_HANG> },
    { "broken_slow_2x", broken_fwd<BUG_SLOW_2X> },
};

} // namespace

extern "C" __attribute__((visibility("default")))
const attn_kernel *attn_plugin_kernels(int *count, int *abi_version) {
    *count = (int)(sizeof table / sizeof table[0]);
    *abi_version = ATTN_ABI_VERSION;
    return table;
}
