/* The split-KV workspace pool and combine kernel (split_kv.h). */
#include "split_kv.h"

#include <math.h>
#include <stdint.h>

#include <atomic>
#include <mutex>

namespace {

constexpr int kErr = 2;
constexpr int kMaxDevices = 64;
constexpr float kLn2 = 0.69314718055994531f;

/* One warp per output row (b, h, i): LSE = log-sum-exp of the splits' partial LSEs, O = sum of
 * 2^(lse_s - LSE) O_s over the splits that saw a key; a row none did gets O = 0, LSE = -inf. */
template <typename T, int D>
__global__ void __launch_bounds__(128) combine_kernel(const attn_fwd_params p, const float *ws_o, const float *ws_lse,
                                                      const int nsplit) {
    constexpr int V = D / 32; /* columns per lane */
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= (int64_t)p.batch * p.heads * p.seqlen_q) return;
    const int i = (int)(row % p.seqlen_q);
    const int64_t bh = row / p.seqlen_q;
    const int h = (int)(bh % p.heads), b = (int)(bh / p.heads);
    const int sq = p.cu_seqlens_q ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
    if (i >= sq) return; /* padding of a shorter sequence: no such row */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* the split kernel has finished and its partials are visible (a no-op without PDL) */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    const float *lse = ws_lse + row * nsplit;
    float m = -INFINITY;
    for (int s = lane; s < nsplit; s += 32) m = fmaxf(m, lse[s]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float total = -INFINITY; /* log2 domain */
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.0f;
    if (m != -INFINITY) {
        float l = 0.0f;
        for (int s = lane; s < nsplit; s += 32) l += exp2f(lse[s] - m);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
        total = m + log2f(l);
        const float *o = ws_o + row * nsplit * D + lane * V;
        for (int s = 0; s < nsplit; ++s) {
            const float ls = lse[s];
            if (ls == -INFINITY) continue; /* its O was not written */
            const float w = exp2f(ls - total);
            if constexpr (V % 4 == 0) {
#pragma unroll
                for (int v = 0; v < V; v += 4) {
                    const float4 x = *reinterpret_cast<const float4 *>(o + (int64_t)s * D + v);
                    acc[v] += w * x.x, acc[v + 1] += w * x.y, acc[v + 2] += w * x.z, acc[v + 3] += w * x.w;
                }
            } else if constexpr (V == 2) {
                const float2 x = *reinterpret_cast<const float2 *>(o + (int64_t)s * D);
                acc[0] += w * x.x, acc[1] += w * x.y;
            } else { /* d96: 3 columns a lane, not 8-byte aligned */
#pragma unroll
                for (int v = 0; v < V; ++v) acc[v] += w * o[(int64_t)s * D + v];
            }
        }
    }
    T *dst = static_cast<T *>(p.o) +
             split_kv_row_offset(p.cu_seqlens_q, b, h, i, p.o_batch_stride, p.o_head_stride, p.o_row_stride) + lane * V;
    if constexpr (V % 4 == 0) {
#pragma unroll
        for (int v = 0; v < V; v += 4)
            *reinterpret_cast<uint2 *>(dst + v) =
                make_uint2(SplitKvPack<T>::run(acc[v], acc[v + 1]), SplitKvPack<T>::run(acc[v + 2], acc[v + 3]));
    } else if constexpr (V == 2) {
        *reinterpret_cast<uint32_t *>(dst) = SplitKvPack<T>::run(acc[0], acc[1]);
    } else {
#pragma unroll
        for (int v = 0; v < V; ++v) dst[v] = T(acc[v]);
    }
    if (lane == 0 && p.lse) p.lse[split_kv_lse_index(p, b, h, i)] = total * kLn2;
}

template <int D>
cudaError_t launch_combine(const cudaLaunchConfig_t &cfg, bool bf16, const attn_fwd_params &p, const float *ws_o,
                           const float *ws_lse, int nsplit) {
    return bf16 ? cudaLaunchKernelEx(&cfg, combine_kernel<__nv_bfloat16, D>, p, ws_o, ws_lse, nsplit)
                : cudaLaunchKernelEx(&cfg, combine_kernel<__half, D>, p, ws_o, ws_lse, nsplit);
}

/* The pool of each device: created under a lock (host threads may race there), never trimmed
 * (release threshold UINT64_MAX). Allocations are stream-ordered and the pool orders reuse
 * across streams itself (its default reuse policies follow stream order), so two streams
 * calling at once are safe; under graph capture an allocation becomes a graph node that owns
 * its memory. */
std::mutex g_pool_mutex;
std::atomic<cudaMemPool_t> g_pools[kMaxDevices];

cudaError_t device_pool(int dev, cudaMemPool_t *out) {
    if (dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
    cudaMemPool_t pool = g_pools[dev].load(std::memory_order_acquire);
    if (!pool) {
        std::lock_guard<std::mutex> lock(g_pool_mutex);
        pool = g_pools[dev].load(std::memory_order_relaxed);
        if (!pool) {
            cudaMemPoolProps props = {};
            props.allocType = cudaMemAllocationTypePinned;
            props.handleTypes = cudaMemHandleTypeNone;
            props.location.type = cudaMemLocationTypeDevice;
            props.location.id = dev;
            cudaError_t e = cudaMemPoolCreate(&pool, &props);
            if (e != cudaSuccess) return e;
            uint64_t keep = UINT64_MAX;
            e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
            if (e != cudaSuccess) {
                cudaMemPoolDestroy(pool);
                return e;
            }
            g_pools[dev].store(pool, std::memory_order_release);
        }
    }
    *out = pool;
    return cudaSuccess;
}

} // namespace

int split_kv_alloc(int dev, bool capturing, size_t rows, int nsplit, int d, cudaStream_t stream, float **ws_o,
                   float **ws_lse) {
    if (capturing && (dev < 0 || dev >= kMaxDevices || !g_pools[dev].load(std::memory_order_acquire)))
        return ATTN_UNSUPPORTED;
    cudaMemPool_t pool;
    void *ws = nullptr;
    const size_t partials = rows * (size_t)nsplit;
    if (device_pool(dev, &pool) != cudaSuccess ||
        cudaMallocFromPoolAsync(&ws, partials * (size_t)(d + 1) * sizeof(float), pool, stream) != cudaSuccess)
        return kErr;
    *ws_o = static_cast<float *>(ws);
    *ws_lse = *ws_o + partials * d;
    return ATTN_OK;
}

cudaError_t split_kv_combine(const attn_fwd_params &p, const float *ws_o, const float *ws_lse, int nsplit, bool pdl,
                             cudaStream_t stream) {
    const int64_t rows = (int64_t)p.batch * p.heads * p.seqlen_q;
    if ((rows + 3) / 4 > 0x7fffffff) return cudaErrorInvalidValue;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)((rows + 3) / 4));
    cfg.blockDim = dim3(128);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    if (pdl) cfg.attrs = attr, cfg.numAttrs = 1;
    const bool bf16 = p.dtype == ATTN_BF16;
    switch (p.head_dim_v == 0 ? p.head_dim : p.head_dim_v) { /* O's columns */
    case 64: return launch_combine<64>(cfg, bf16, p, ws_o, ws_lse, nsplit);
    case 96: return launch_combine<96>(cfg, bf16, p, ws_o, ws_lse, nsplit);
    case 128: return launch_combine<128>(cfg, bf16, p, ws_o, ws_lse, nsplit);
    case 256: return launch_combine<256>(cfg, bf16, p, ws_o, ws_lse, nsplit);
    }
    return cudaErrorInvalidValue;
}

int split_kv_count(int64_t base, int64_t tiles, int64_t slots, int min_tiles) {
    int64_t max_splits = tiles / (min_tiles < 1 ? 1 : min_tiles);
    max_splits = max_splits < 1 ? 1 : max_splits > SPLIT_KV_MAX ? SPLIT_KV_MAX : max_splits;
    if (base <= 0 || slots <= 0) return 1;
    double best = 1e30;
    for (int64_t s = 1; s <= max_splits; ++s) {
        const double cost = (double)((base * s + slots - 1) / slots) / (double)s;
        best = cost < best ? cost : best;
    }
    for (int64_t s = 1; s <= max_splits; ++s)
        if ((double)((base * s + slots - 1) / slots) / (double)s <= 1.1 * best) return (int)s;
    return 1;
}
