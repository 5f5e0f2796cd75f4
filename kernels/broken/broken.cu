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
    /* the bug classes (issue 6's catalog; `ctest -L selftest` proves each is caught) */
    BUG_CAUSAL_OFF_BY_ONE,  /* causal mask lets each query see one key too many */
    BUG_CAUSAL_TOP_LEFT,    /* causal mask top-left aligned: j <= i (wrong when S_q != S_k) */
    BUG_EMPTY_ROW_NAN,      /* a row that sees no key writes 0/0 = NaN instead of zeros */
    BUG_NO_MAX_SUBTRACT,    /* exp(s) without the running max: overflows for large scores */
    BUG_TAIL_ROWS_UNWRITTEN,/* the last partial 64-row tile of queries is never written */
    BUG_TAIL_KEYS_SKIPPED,  /* the last partial 64-key tile is skipped */
    BUG_BATCH_STRIDE,       /* inputs' batch stride ignored: every batch reads batch 0 */
    BUG_HEAD_STRIDE,        /* inputs' head stride ignored: every head reads head 0 */
    BUG_SCALE_IGNORED,      /* softmax_scale ignored, 1/sqrt(d) hard-coded */
    BUG_BF16_AS_FP16,       /* bf16 data read and written as fp16 */
    BUG_HALF_HEAD_DIM,      /* scores use only the first 64 dimensions (wrong at d128) */
    BUG_MISSING_BARRIER,    /* the epilogue's shared-memory exchange lacks its barrier */
    BUG_ROW_PAST_END,       /* the last query row is also written one row further */
    BUG_PV_IN_HALF,         /* P.V accumulated in half precision */
    BUG_LSE_NO_MAX,         /* LSE = log(sum) without the max: O right, LSE wrong */
    /* isolation fixtures: they prove a faulting or hanging kernel fails its own test only */
    BUG_ILLEGAL_ADDRESS,    /* writes far outside O: the launch faults */
    BUG_HANG,               /* never finishes: the CTest timeout must stop it */
    /* performance fixture: correct output in twice the time; the benchmark thresholds of
     * "simple" must fail it (run it with ATTN_THRESHOLDS_KERNEL=simple) */
    BUG_SLOW_2X,
    /* resources fixture: asks for more dynamic shared memory per block than the GPU allows;
     * a benchmark must call it not supported on this GPU, with both numbers */
    BUG_SMEM_TOO_BIG,
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
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + warp;
    const int64_t n_rows = (int64_t)p.batch * p.heads * p.seqlen_q;
    const bool active = row < n_rows; /* inactive warps still reach the block's barrier */

    const int i = active ? (int)(row % p.seqlen_q) : 0;
    const int64_t bh = active ? row / p.seqlen_q : 0;
    const int h = (int)(bh % p.heads);
    const int b = (int)(bh / p.heads);
    /* BUG_BATCH_STRIDE / BUG_HEAD_STRIDE: the inputs' offsets drop a stride */
    const int64_t bi = BUG == BUG_BATCH_STRIDE ? 0 : b, hi = BUG == BUG_HEAD_STRIDE ? 0 : h;

    const T *q = (const T *)p.q + bi * p.q_batch_stride + hi * p.q_head_stride + i * p.q_row_stride;
    const T *k = (const T *)p.k + bi * p.k_batch_stride + hi * p.k_head_stride;
    const T *v = (const T *)p.v + bi * p.v_batch_stride + hi * p.v_head_stride;

    /* Visible keys are 0 .. n_keys-1; correct: key j visible iff j <= i + seqlen_k - seqlen_q. */
    int64_t n_keys = active ? p.seqlen_k : 0;
    if (p.causal && active) {
        int64_t last = (int64_t)i + p.seqlen_k - p.seqlen_q;
        if constexpr (BUG == BUG_CAUSAL_OFF_BY_ONE) last += 1; /* BUG: j <= i + sk - sq + 1 */
        if constexpr (BUG == BUG_CAUSAL_TOP_LEFT) last = i;    /* BUG: j <= i */
        n_keys = last + 1 < n_keys ? last + 1 : n_keys;
        if (n_keys < 0) n_keys = 0;
    }
    if constexpr (BUG == BUG_TAIL_KEYS_SKIPPED) { /* BUG: keys of the last partial tile dropped */
        const int64_t whole = (int64_t)(p.seqlen_k / 64) * 64;
        if (p.seqlen_k % 64 && n_keys > whole) n_keys = whole;
    }
    if constexpr (BUG == BUG_HANG) {
        while (p.seqlen_k > 0) __nanosleep(1u << 20); /* BUG: spins until the process is killed */
    }

    const float scale = BUG == BUG_SCALE_IGNORED ? rsqrtf((float)D) : p.softmax_scale;
    float qf[E], acc[E];
    __half acc_h[E]; /* BUG_PV_IN_HALF's accumulator */
#pragma unroll
    for (int e = 0; e < E; ++e) {
        qf[e] = active ? to_float(q[e * 32 + lane]) : 0.f;
        acc[e] = 0.f;
        acc_h[e] = __float2half(0.f);
    }

    /* Online softmax: m = max score so far, l = sum exp(s - m), acc = sum exp(s - m) * v. */
    float m = -INFINITY, l = 0.f;
    for (int64_t j = 0; j < n_keys; ++j) {
        const T *kj = k + j * p.k_row_stride;
        const T *vj = v + j * p.v_row_stride;
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e) /* BUG_HALF_HEAD_DIM: only dims 0..63 */
            if (BUG != BUG_HALF_HEAD_DIM || e * 32 < 64) s += qf[e] * to_float(kj[e * 32 + lane]);
        s = warp_sum(s) * scale;

        const float m_new = BUG == BUG_NO_MAX_SUBTRACT ? 0.f : fmaxf(m, s); /* BUG: no max */
        const float corr = BUG == BUG_NO_MAX_SUBTRACT ? 1.f : expf(m - m_new);
        const float pj = expf(s - m_new);
        l = l * corr + pj;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            if constexpr (BUG == BUG_PV_IN_HALF) /* BUG: the accumulator rounds to half */
                acc_h[e] = __float2half(__half2float(acc_h[e]) * corr + pj * to_float(vj[e * 32 + lane]));
            else
                acc[e] = acc[e] * corr + pj * to_float(vj[e * 32 + lane]);
        }
        m = BUG == BUG_NO_MAX_SUBTRACT ? fmaxf(m, s) : m_new;
    }
    if constexpr (BUG == BUG_PV_IN_HALF) {
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] = __half2float(acc_h[e]);
    }

    /* The epilogue goes through shared memory: warp w stores the row of warp w + 1 (a
     * stand-in for the staged, vectorized stores of real kernels), so a barrier is needed. */
    __shared__ float stage[kWarpsPerBlock][D];
#pragma unroll
    for (int e = 0; e < E; ++e) /* a row that sees no key: zeros (BUG_EMPTY_ROW_NAN: 0/0) */
        stage[warp][e * 32 + lane] = BUG == BUG_EMPTY_ROW_NAN || n_keys > 0 ? acc[e] / l : 0.f;
    if constexpr (BUG != BUG_MISSING_BARRIER) __syncthreads(); /* BUG: no barrier */
    const int src = (warp + 1) % kWarpsPerBlock;
    const int64_t src_row = (int64_t)blockIdx.x * kWarpsPerBlock + src;
    if (src_row < n_rows) {
        const int si = (int)(src_row % p.seqlen_q);
        const int64_t sbh = src_row / p.seqlen_q;
        T *so = (T *)p.o + (sbh / p.heads) * p.o_batch_stride + (sbh % p.heads) * p.o_head_stride +
                si * p.o_row_stride;
        if constexpr (BUG == BUG_ILLEGAL_ADDRESS) so += (int64_t)1 << 40; /* BUG: 2 TB past O */
        const bool skip = BUG == BUG_TAIL_ROWS_UNWRITTEN && p.seqlen_q % 64 &&
                          si >= (p.seqlen_q / 64) * 64; /* BUG: the partial query tile */
        if (!skip) {
#pragma unroll
            for (int e = 0; e < E; ++e) {
                so[e * 32 + lane] = from_float<T>(stage[src][e * 32 + lane]);
                if (BUG == BUG_ROW_PAST_END && si == p.seqlen_q - 1) /* BUG: one row further */
                    so[p.o_row_stride + e * 32 + lane] = from_float<T>(stage[src][e * 32 + lane]);
            }
        }
    }
    if (active && p.lse != nullptr && lane == 0) {
        float lse = n_keys > 0 ? m + logf(l) : -INFINITY;
        if constexpr (BUG == BUG_LSE_NO_MAX) lse = n_keys > 0 ? logf(l) : -INFINITY; /* BUG */
        p.lse[row] = lse;
    }
}

template <typename T, int D, int BUG>
int launch(const attn_fwd_params *p, cudaStream_t stream) {
    const int64_t n_rows = (int64_t)p->batch * p->heads * p->seqlen_q;
    const int64_t n_blocks = (n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (n_blocks > 0x7fffffff) return kErr;
    if constexpr (BUG == BUG_SMEM_TOO_BIG) { /* BUG: a config this GPU cannot hold */
        int dev, optin;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            return kErr;
        const int want = optin + 1024;
        if (cudaFuncSetAttribute(broken_fwd_kernel<T, D, BUG>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 want) != cudaSuccess)
            return kErr;
        broken_fwd_kernel<T, D, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, want, stream>>>(*p);
        return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
    }
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

    const bool bf16 = p->dtype == ATTN_BF16 && BUG != BUG_BF16_AS_FP16; /* BUG: bf16 as fp16 */
    if (p->head_dim == 64)
        return bf16 ? launch<__nv_bfloat16, 64, BUG>(p, stream)
                    : launch<__half, 64, BUG>(p, stream);
    return bf16 ? launch<__nv_bfloat16, 128, BUG>(p, stream)
                : launch<__half, 128, BUG>(p, stream);
}

const attn_kernel table[] = {
    { "broken_none", broken_fwd<BUG_NONE> },
    { "broken_causal_off_by_one", broken_fwd<BUG_CAUSAL_OFF_BY_ONE> },
    { "broken_causal_top_left", broken_fwd<BUG_CAUSAL_TOP_LEFT> },
    { "broken_empty_row_nan", broken_fwd<BUG_EMPTY_ROW_NAN> },
    { "broken_no_max_subtract", broken_fwd<BUG_NO_MAX_SUBTRACT> },
    { "broken_tail_rows_unwritten", broken_fwd<BUG_TAIL_ROWS_UNWRITTEN> },
    { "broken_tail_keys_skipped", broken_fwd<BUG_TAIL_KEYS_SKIPPED> },
    { "broken_batch_stride", broken_fwd<BUG_BATCH_STRIDE> },
    { "broken_head_stride", broken_fwd<BUG_HEAD_STRIDE> },
    { "broken_scale_ignored", broken_fwd<BUG_SCALE_IGNORED> },
    { "broken_bf16_as_fp16", broken_fwd<BUG_BF16_AS_FP16> },
    { "broken_half_head_dim", broken_fwd<BUG_HALF_HEAD_DIM> },
    { "broken_missing_barrier", broken_fwd<BUG_MISSING_BARRIER> },
    { "broken_row_past_end", broken_fwd<BUG_ROW_PAST_END> },
    { "broken_pv_in_half", broken_fwd<BUG_PV_IN_HALF> },
    { "broken_lse_no_max", broken_fwd<BUG_LSE_NO_MAX> },
    { "broken_illegal_address", broken_fwd<BUG_ILLEGAL_ADDRESS> },
    { "broken_hang", broken_fwd<BUG_HANG> },
    { "broken_slow_2x", broken_fwd<BUG_SLOW_2X> },
    { "broken_smem_too_big", broken_fwd<BUG_SMEM_TOO_BIG> },
};

} // namespace

extern "C" __attribute__((visibility("default")))
const attn_kernel *attn_plugin_kernels(int *count, int *abi_version) {
    *count = (int)(sizeof table / sizeof table[0]);
    *abi_version = ATTN_ABI_VERSION;
    return table;
}
