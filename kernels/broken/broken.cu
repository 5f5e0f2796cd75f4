/* libattn_broken: a plugin of deliberately broken kernels, used as test fixtures that
 * prove the harness catches bugs. Each kernel is one known bug in an otherwise correct
 * kernel; "broken_none" is the same template with no bug, a control that must pass
 * everything (so a failure of the others comes from their bug, not from this copy).
 *
 * It is never part of the default correctness suite: it runs only when the harness is
 * configured with -DATTN_PLUGINS=<path to libattn_broken.so>.
 *
 * The algorithm is a private copy of kernels/simple (one warp per query row, float32
 * online softmax; its device helpers shared: kernels/common/warp_row.cuh), templated on
 * `int BUG`. To add a bug class: one enum value below, one
 * `if constexpr (BUG == ...)` hook where the bug lives, one line in `table`, and one row
 * in README.md. A bug that lives in the host code (in `broken_fwd`) launches the control's
 * GPU kernel (`kernel_bug`), so it adds no kernel instantiations to the build.
 *
 * The bugs of version 2's features (grouped KV heads, windows, softcap, head_dim_v) live in
 * broken_v2.cu, a copy of simple's version-2 algorithm; built against the version-2 header,
 * the plugin lists its kernels after these, and after broken_tunable those of broken_bwd.cu
 * (the backward pass, version 5). This file also builds against the version-1 header
 * (attn_broken_v1: a plugin written before version 2), then without them. */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "attn_abi.h"
#include "warp_row.cuh"

#if ATTN_ABI_VERSION >= 2
extern "C" const attn_kernel *broken_v2_kernels(int *count); /* broken_v2.cu */
#endif
#if ATTN_ABI_VERSION >= 5
extern "C" const attn_kernel *broken_bwd_kernels(int *count); /* broken_bwd.cu: the backward's */
#endif

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
    /* contract fixtures: right numbers, but the call breaks a rule of the ABI that the
     * correctness suite's contract checks test */
    BUG_OWN_STREAM,         /* works on a stream of its own: the caller's stream does not wait */
    BUG_HOST_SYNC,          /* cudaDeviceSynchronize() in fwd: blocks the host, breaks capture */
    BUG_ALLOC_IN_FWD,       /* cudaMalloc + cudaStreamSynchronize + cudaFree in every call */
    BUG_CACHED_SHAPE,       /* keeps the first call's seqlen_k and uses it on every later call */
    BUG_SHARED_WORKSPACE,   /* the LSE staged in one workspace that every call shares */
    /* large-problem fixtures: correct until the problem outgrows a 16- or 32-bit index */
    BUG_GRID_Y,             /* batch x heads in gridDim.y: no launch once it is over 65535 */
    BUG_INT32_OFFSETS,      /* element offsets in 32-bit int: wrap past 2^31 elements */
    /* long-sequence fixture: a path chosen by length (as a split-KV kernel's) that is wrong */
    BUG_LONG_SPLIT_LOST,    /* from seqlen_k 8192 on, the keys of the second half are dropped */
    /* sanitizer fixture: a shared-memory race that ordinary runs never show */
    BUG_RACE,               /* lane 0 writes shared memory, its warp reads it, no __syncwarp() */
    /* benchmark fixture: from the 3rd identical call in a row on, nothing is launched */
    BUG_TIMING_CHEAT,
    /* inputs fixtures: right numbers (up to rounding), but the caller's inputs changed */
    BUG_Q_SCALED_IN_PLACE,  /* Q multiplied by softmax_scale in the caller's buffer, then scale 1 */
    BUG_K_SCALED_AND_BACK,  /* K scaled in place for exp2, divided back after: rounded twice */
    /* layout fixture: right wherever every row starts on a 16-byte boundary */
    BUG_ROWS_IN_VECTORS,    /* rows addressed in 16-byte vectors: a row's start rounded down */
    BUG_ZERO_STRIDE_DEFAULT,/* a zero batch or head stride of K or V taken as "not given": dense */
    /* progress fixture: right, but its blocks wait for each other */
    BUG_GRID_BARRIER,       /* every block waits at a software grid barrier before its stores */
    /* decline fixture: right where it runs; where it declines, an error is left behind */
    BUG_DECLINE_ERROR_PENDING, /* declines S_q >= 512 after a failed CUDA call, its error pending */
    /* state fixture: right, but the process's CUDA state is not left as it was */
    BUG_STATE_LEFT,         /* an L2 persistence window for K on the caller's stream, never reset */
    /* control: correct, launched in clusters of two blocks (sm_90 on) */
    BUG_CLUSTER_NONE,
    /* threads fixture: right from one host thread */
    BUG_CALL_IN_GLOBALS,    /* the call's parameters and stream kept in globals until its launch */
};

/* The bugs that live in the host code: they launch the control's GPU kernel. */
constexpr int kernel_bug(int bug) {
    return bug == BUG_OWN_STREAM || bug == BUG_HOST_SYNC || bug == BUG_ALLOC_IN_FWD ||
                   bug == BUG_CACHED_SHAPE || bug == BUG_SHARED_WORKSPACE || bug == BUG_TIMING_CHEAT ||
                   bug == BUG_Q_SCALED_IN_PLACE || bug == BUG_K_SCALED_AND_BACK || bug == BUG_DECLINE_ERROR_PENDING ||
                   bug == BUG_STATE_LEFT || bug == BUG_CALL_IN_GLOBALS
               ? BUG_NONE
               : bug;
}

constexpr int kWarpsPerBlock = 4; /* query rows per block */
constexpr int kErr = 2;           /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */

using namespace warp_row;

/* The query row (over batch x heads x seqlen_q) that warp w of this block computes, or -1:
 * the rows are numbered along gridDim.x, 4 per block. */
template <int BUG> __device__ __forceinline__ int64_t row_of(const attn_fwd_params &p, int w) {
    if constexpr (BUG == BUG_GRID_Y) { /* BUG: blockIdx.y = b * heads + h, at most 65535 */
        const int64_t i = (int64_t)blockIdx.x * kWarpsPerBlock + w;
        return i < p.seqlen_q ? (int64_t)blockIdx.y * p.seqlen_q + i : -1;
    }
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + w;
    return row < (int64_t)p.batch * p.heads * p.seqlen_q ? row : -1;
}

/* The element offset of (b, h, s, d) in a tensor with these strides: 64-bit, as the ABI's
 * strides are, since one tensor may hold more than 2^31 elements. */
template <int BUG>
__device__ __forceinline__ int64_t offset(int64_t b, int64_t bs, int64_t h, int64_t hs, int64_t s,
                                          int64_t rs, int d) {
    if constexpr (BUG == BUG_INT32_OFFSETS) /* BUG: `int off = b * bs + h * hs + s * rs + d;`
        written with unsigned operands so that it wraps as such int code does on the GPU,
        without the undefined behaviour (that would let the compiler widen it) */
        return (int)((unsigned)b * (unsigned)bs + (unsigned)h * (unsigned)hs +
                     (unsigned)s * (unsigned)rs + (unsigned)d);
    if constexpr (BUG == BUG_ROWS_IN_VECTORS) /* BUG: the row's start counted in 16-byte vectors
        (8 elements, as an int4 pointer would): rounded down when a stride is not a multiple of 8 */
        return (b * bs + h * hs + s * rs) / 8 * 8 + d;
    return b * bs + h * hs + s * rs + d;
}

/* K's or V's batch or head stride; BUG_ZERO_STRIDE_DEFAULT: 0 (a broadcast, which the ABI allows)
 * taken as "not given" and replaced by the dense BHSD stride `dense`. */
template <int BUG> __device__ __forceinline__ int64_t kv_stride(int64_t stride, int64_t dense) {
    if constexpr (BUG == BUG_ZERO_STRIDE_DEFAULT) return stride ? stride : dense; /* BUG */
    return stride;
}

/* A tensor's base pointer; BUG_ROWS_IN_VECTORS: rounded down to 16 bytes (taken as aligned). */
template <int BUG, typename P> __device__ __forceinline__ P *base(P *ptr) {
    if constexpr (BUG == BUG_ROWS_IN_VECTORS) return (P *)((uintptr_t)ptr & ~(uintptr_t)15);
    return ptr;
}

template <typename T, int D, int BUG>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
broken_fwd_kernel(const attn_fwd_params p, unsigned *arrivals) {
    constexpr int E = D / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row = row_of<BUG>(p, warp);
    const bool active = row >= 0; /* inactive warps still reach the block's barrier */

    const int i = active ? (int)(row % p.seqlen_q) : 0;
    const int64_t bh = active ? row / p.seqlen_q : 0;
    const int h = (int)(bh % p.heads);
    const int b = (int)(bh / p.heads);
    /* BUG_BATCH_STRIDE / BUG_HEAD_STRIDE: the inputs' offsets drop a stride */
    const int64_t bi = BUG == BUG_BATCH_STRIDE ? 0 : b, hi = BUG == BUG_HEAD_STRIDE ? 0 : h;

    const T *q = base<BUG>((const T *)p.q), *k = base<BUG>((const T *)p.k), *v = base<BUG>((const T *)p.v);
    const int64_t kv_head = (int64_t)p.seqlen_k * D, kv_batch = (int64_t)p.heads * kv_head; /* BHSD's */
    const int64_t kbs = kv_stride<BUG>(p.k_batch_stride, kv_batch), khs = kv_stride<BUG>(p.k_head_stride, kv_head);
    const int64_t vbs = kv_stride<BUG>(p.v_batch_stride, kv_batch), vhs = kv_stride<BUG>(p.v_head_stride, kv_head);

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
    if constexpr (BUG == BUG_LONG_SPLIT_LOST) { /* BUG: the long path loses its second split */
        if (p.seqlen_k >= 8192 && n_keys > p.seqlen_k / 2) n_keys = p.seqlen_k / 2;
    }
    if constexpr (BUG == BUG_HANG) {
        while (p.seqlen_k > 0) __nanosleep(1u << 20); /* BUG: spins until the process is killed */
    }

    const float scale = BUG == BUG_SCALE_IGNORED ? rsqrtf((float)D) : p.softmax_scale;
    float qf[E], acc[E];
    __half acc_h[E]; /* BUG_PV_IN_HALF's accumulator */
#pragma unroll
    for (int e = 0; e < E; ++e) {
        qf[e] = active ? to_float(q[offset<BUG>(bi, p.q_batch_stride, hi, p.q_head_stride, i,
                                                p.q_row_stride, e * 32 + lane)])
                       : 0.f;
        acc[e] = 0.f;
        acc_h[e] = __float2half(0.f);
    }

    /* Online softmax: m = max score so far, l = sum exp(s - m), acc = sum exp(s - m) * v. */
    float m = -INFINITY, l = 0.f;
    for (int64_t j = 0; j < n_keys; ++j) {
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e) /* BUG_HALF_HEAD_DIM: only dims 0..63 */
            if (BUG != BUG_HALF_HEAD_DIM || e * 32 < 64)
                s += qf[e] * to_float(k[offset<BUG>(bi, kbs, hi, khs, j, p.k_row_stride, e * 32 + lane)]);
        s = warp_sum(s) * scale;

        const float m_new = BUG == BUG_NO_MAX_SUBTRACT ? 0.f : fmaxf(m, s); /* BUG: no max */
        const float corr = BUG == BUG_NO_MAX_SUBTRACT ? 1.f : expf(m - m_new);
        const float pj = expf(s - m_new);
        l = l * corr + pj;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const float vje = to_float(v[offset<BUG>(bi, vbs, hi, vhs, j, p.v_row_stride, e * 32 + lane)]);
            if constexpr (BUG == BUG_PV_IN_HALF) /* BUG: the accumulator rounds to half */
                acc_h[e] = __float2half(__half2float(acc_h[e]) * corr + pj * vje);
            else
                acc[e] = acc[e] * corr + pj * vje;
        }
        m = BUG == BUG_NO_MAX_SUBTRACT ? fmaxf(m, s) : m_new;
    }
    if constexpr (BUG == BUG_PV_IN_HALF) {
#pragma unroll
        for (int e = 0; e < E; ++e) acc[e] = __half2float(acc_h[e]);
    }

    if constexpr (BUG == BUG_RACE) {
        /* BUG: lane 0 publishes the row's sum l in shared memory and the other 31 lanes of its
         * warp read it back, with no __syncwarp() between the write and the reads. Since
         * Volta a warp's lanes are not guaranteed to run in lockstep, so nothing orders the
         * write before the reads: a data race, which compute-sanitizer's racecheck reports
         * (a hazard between threads of one warp on l_shared[warp]).
         * Why ordinary runs still get the right answer: the warp is converged here (every
         * lane has just left warp_sum's __shfl_xor_sync and the key loop, whose trip count
         * n_keys is the same for all 32 lanes), so it issues the store and then the load as
         * two instructions in program order, and one warp's shared-memory accesses complete
         * in order; `volatile` keeps the compiler from reordering the two or replacing the
         * load by the value in a register. Every lane reads the value lane 0 wrote, which
         * equals its own l (warp_sum gives every lane the same scores), so O is bit-identical
         * to broken_none's. This is the pre-Volta "warp-synchronous" idiom: correct in
         * practice until the warp diverges here, wrong by the programming model. */
        __shared__ volatile float l_shared[kWarpsPerBlock];
        if (lane == 0) l_shared[warp] = l;
        l = l_shared[warp]; /* BUG: no __syncwarp() before this read */
    }

    /* The epilogue goes through shared memory: warp w stores the row of warp w + 1 (a
     * stand-in for the staged, vectorized stores of real kernels), so a barrier is needed. */
    __shared__ float stage[kWarpsPerBlock][D];
#pragma unroll
    for (int e = 0; e < E; ++e) /* a row that sees no key: zeros (BUG_EMPTY_ROW_NAN: 0/0) */
        stage[warp][e * 32 + lane] = BUG == BUG_EMPTY_ROW_NAN || n_keys > 0 ? acc[e] / l : 0.f;
    if constexpr (BUG != BUG_MISSING_BARRIER) __syncthreads(); /* BUG: no barrier */
    if constexpr (BUG == BUG_GRID_BARRIER) { /* BUG: a grid-wide barrier with no cooperative launch,
        as a kernel that combines its splits in place: right while every block of the grid is
        resident at once, which nothing guarantees (another stream's work holds SMs) */
        if (arrivals && threadIdx.x == 0) {
            atomicAdd(arrivals, 1u);
            while (atomicAdd(arrivals, 0u) < gridDim.x) __nanosleep(256);
        }
        __syncthreads();
    }
    const int src = (warp + 1) % kWarpsPerBlock;
    const int64_t src_row = row_of<BUG>(p, src);
    if (src_row >= 0) {
        const int si = (int)(src_row % p.seqlen_q);
        const int64_t sbh = src_row / p.seqlen_q, sb = sbh / p.heads, sh = sbh % p.heads;
        T *o = base<BUG>((T *)p.o);
        if constexpr (BUG == BUG_ILLEGAL_ADDRESS) o += (int64_t)1 << 40; /* BUG: 2 TB past O */
        const bool skip = BUG == BUG_TAIL_ROWS_UNWRITTEN && p.seqlen_q % 64 &&
                          si >= (p.seqlen_q / 64) * 64; /* BUG: the partial query tile */
        if (!skip) {
#pragma unroll
            for (int e = 0; e < E; ++e) {
                const T x = from_float<T>(stage[src][e * 32 + lane]);
                o[offset<BUG>(sb, p.o_batch_stride, sh, p.o_head_stride, si, p.o_row_stride, e * 32 + lane)] = x;
                if (BUG == BUG_ROW_PAST_END && si == p.seqlen_q - 1) /* BUG: one row further */
                    o[offset<BUG>(sb, p.o_batch_stride, sh, p.o_head_stride, si + 1, p.o_row_stride,
                                  e * 32 + lane)] = x;
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
        broken_fwd_kernel<T, D, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, want, stream>>>(*p, nullptr);
        return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
    }
    if constexpr (BUG == BUG_GRID_Y) { /* BUG: batch x heads in gridDim.y (limit 65535) */
        const int64_t bh = (int64_t)p->batch * p->heads;
        if (bh > 0x7fffffff) return kErr;
        const dim3 grid((unsigned)((p->seqlen_q + kWarpsPerBlock - 1) / kWarpsPerBlock), (unsigned)bh);
        broken_fwd_kernel<T, D, BUG><<<grid, kWarpsPerBlock * 32, 0, stream>>>(*p, nullptr);
        return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
    }
    if constexpr (BUG == BUG_CLUSTER_NONE) { /* right, in clusters of two blocks from sm_90 on, as
        CUTLASS's kernels and two-block MMAs launch: a cluster's blocks run at once on one GPC, so
        a check that leaves SMs free must leave two on some GPC (busy_sms) */
        int dev, major;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            return kErr;
        if (major >= 9) {
            cudaLaunchAttribute cluster[1];
            cluster[0].id = cudaLaunchAttributeClusterDimension;
            cluster[0].val.clusterDim.x = 2, cluster[0].val.clusterDim.y = 1, cluster[0].val.clusterDim.z = 1;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3((unsigned)((n_blocks + 1) / 2 * 2)), cfg.blockDim = dim3(kWarpsPerBlock * 32);
            cfg.stream = stream, cfg.attrs = cluster, cfg.numAttrs = 1;
            unsigned *no_arrivals = nullptr;
            return cudaLaunchKernelEx(&cfg, broken_fwd_kernel<T, D, BUG>, *p, no_arrivals) == cudaSuccess ? ATTN_OK
                                                                                                          : kErr;
        }
    }
    if constexpr (BUG == BUG_GRID_BARRIER) { /* the barrier where the grid fits in half the GPU at
        once (alone, or beside one other call, every block is resident): a counter per call */
        int dev, sms, per_sm;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, broken_fwd_kernel<T, D, BUG>, kWarpsPerBlock * 32,
                                                          0) != cudaSuccess)
            return kErr;
        if (2 * n_blocks <= (int64_t)sms * per_sm) {
            unsigned *arrivals = nullptr;
            if (cudaMallocAsync((void **)&arrivals, sizeof *arrivals, stream) != cudaSuccess ||
                cudaMemsetAsync(arrivals, 0, sizeof *arrivals, stream) != cudaSuccess)
                return kErr;
            broken_fwd_kernel<T, D, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p, arrivals);
            cudaError_t e = cudaGetLastError();
            if (cudaFreeAsync(arrivals, stream) != cudaSuccess) e = cudaErrorUnknown;
            return e == cudaSuccess ? ATTN_OK : kErr;
        }
    }
    broken_fwd_kernel<T, D, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p, nullptr);
    if constexpr (BUG == BUG_SLOW_2X) /* BUG: the same work again */
        broken_fwd_kernel<T, D, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p, nullptr);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

/* Picks the instantiation for the dtype and head dimension and launches it on `stream`. */
template <int BUG>
int dispatch(const attn_fwd_params *p, cudaStream_t stream) {
    constexpr int KB = kernel_bug(BUG);
    const bool bf16 = p->dtype == ATTN_BF16 && BUG != BUG_BF16_AS_FP16; /* BUG: bf16 as fp16 */
    if (p->head_dim == 64)
        return bf16 ? launch<__nv_bfloat16, 64, KB>(p, stream) : launch<__half, 64, KB>(p, stream);
    return bf16 ? launch<__nv_bfloat16, 128, KB>(p, stream) : launch<__half, 128, KB>(p, stream);
}

/* The inputs fixtures' pre- and post-passes: every element of Q or K (v1 problems: as many
 * heads as Q) times `factor`, or divided by it, written back into the caller's buffer. */
template <typename T, bool DIVIDE>
__global__ void scale_in_place_kernel(void *t, attn_fwd_params p, bool is_k, float factor) {
    const int64_t seq = is_k ? p.seqlen_k : p.seqlen_q, n = (int64_t)p.batch * p.heads * seq * p.head_dim;
    const int64_t bs = is_k ? p.k_batch_stride : p.q_batch_stride, hs = is_k ? p.k_head_stride : p.q_head_stride,
                  rs = is_k ? p.k_row_stride : p.q_row_stride;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t e = i % p.head_dim, r = i / p.head_dim, s = r % seq, bh = r / seq;
        T *x = (T *)t + bh / p.heads * bs + bh % p.heads * hs + s * rs + e;
        *x = from_float<T>(DIVIDE ? to_float(*x) / factor : to_float(*x) * factor);
    }
}

template <bool DIVIDE>
int scale_in_place(const void *t, const attn_fwd_params *p, bool is_k, float factor, cudaStream_t stream) {
    void *w = const_cast<void *>(t); /* BUG: the caller's const input */
    if (p->dtype == ATTN_BF16)
        scale_in_place_kernel<__nv_bfloat16, DIVIDE><<<1024, 256, 0, stream>>>(w, *p, is_k, factor);
    else
        scale_in_place_kernel<__half, DIVIDE><<<1024, 256, 0, stream>>>(w, *p, is_k, factor);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

template <int BUG>
int broken_fwd(const attn_fwd_params *p, cudaStream_t stream) {
    if (p == nullptr) return kErr;
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if (p->head_dim != 64 && p->head_dim != 128) return ATTN_UNSUPPORTED;
    if (p->batch < 1 || p->heads < 1 || p->seqlen_q < 1 || p->seqlen_k < 1) return kErr;
    if (!p->q || !p->k || !p->v || !p->o) return kErr;

    if constexpr (BUG == BUG_DECLINE_ERROR_PENDING) {
        /* BUG: from S_q = 512 on it tries a configuration with more shared memory than any GPU
         * has (as a kernel probing whether its large-tile path fits), and declines when that
         * fails, leaving the failed call's error pending: the caller's next cudaGetLastError()
         * reports it as its own */
        if (p->seqlen_q >= 512) {
            (void)cudaFuncSetAttribute(broken_fwd_kernel<__half, 64, BUG_NONE>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, 1 << 30);
            return ATTN_UNSUPPORTED;
        }
    }
    if constexpr (BUG == BUG_STATE_LEFT) {
        /* BUG: an L2-residency hint, as a kernel that keeps K in L2 across its query tiles:
         * K's first bytes as a persisting access policy window on the caller's stream and the
         * device's persisting-L2 set-aside raised, neither put back, so every later kernel the
         * caller enqueues on that stream runs with it. The output is right. A GPU without
         * persisting L2 refuses the set-aside: that error is cleared (not the bug shown here). */
        int dev = 0, max_window = 0, max_persist = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, dev) == cudaSuccess &&
            max_window > 0 && max_persist > 0) {
            if (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, (size_t)max_persist) != cudaSuccess)
                (void)cudaGetLastError();
            cudaStreamAttrValue v = {};
            v.accessPolicyWindow.base_ptr = const_cast<void *>(p->k);
            v.accessPolicyWindow.num_bytes = max_window < 65536 ? (size_t)max_window : 65536;
            v.accessPolicyWindow.hitRatio = 1.0f;
            v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
            v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
            if (cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v) != cudaSuccess)
                (void)cudaGetLastError();
        }
        return dispatch<BUG>(p, stream);
    }
    if constexpr (BUG == BUG_CALL_IN_GLOBALS) {
        /* BUG: the call in flight kept in globals, as a C wrapper that fills a static context
         * and then looks up its configuration (here a 200 us sleep stands for that) before
         * launching from the context: right from one thread; a second thread's call in between
         * overwrites the parameters and the stream, so one problem is computed twice, on the
         * other's stream, and the other's output is never written */
        static attn_fwd_params in_flight;
        static cudaStream_t in_flight_stream;
        in_flight = *p, in_flight_stream = stream;
        usleep(200);
        return dispatch<BUG>(&in_flight, in_flight_stream);
    }
    if constexpr (BUG == BUG_OWN_STREAM) {
        /* BUG: the work goes on a non-blocking stream of the kernel's own, created once; the
         * caller's stream is ignored and no event joins the two, so the caller's stream
         * neither waits for the inputs' uploads to reach this work nor for this work before
         * what the caller enqueues next (its copies of O back to the host) */
        static cudaStream_t own;
        if (own == nullptr && cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess)
            return kErr;
        return dispatch<BUG>(p, own);
    }
    if constexpr (BUG == BUG_HOST_SYNC) {
        /* BUG: a debugging leftover: the host waits for the whole device before returning.
         * The result is right, but fwd blocks the calling thread (forever if the caller
         * holds its stream until fwd returns) and is illegal inside CUDA graph capture. */
        const int rc = dispatch<BUG>(p, stream);
        if (rc != ATTN_OK) return rc;
        return cudaDeviceSynchronize() == cudaSuccess ? ATTN_OK : kErr;
    }
    if constexpr (BUG == BUG_ALLOC_IN_FWD) {
        /* BUG: a workspace (here: the LSE, always computed) allocated in every call, then the
         * stream synchronized so that it can be freed: an allocation and a host
         * synchronization per call (illegal in graph capture, and blocks the host) */
        const size_t bytes = (size_t)p->batch * p->heads * p->seqlen_q * sizeof(float);
        float *scratch = nullptr;
        if (cudaMalloc((void **)&scratch, bytes) != cudaSuccess) return kErr;
        attn_fwd_params w = *p;
        w.lse = scratch;
        int rc = dispatch<BUG>(&w, stream);
        if (rc == ATTN_OK && p->lse != nullptr &&
            cudaMemcpyAsync(p->lse, scratch, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
            rc = kErr;
        if (cudaStreamSynchronize(stream) != cudaSuccess) rc = kErr; /* before the free */
        cudaFree(scratch);
        return rc;
    }
    if constexpr (BUG == BUG_CACHED_SHAPE) {
        /* BUG: state kept across calls: the first call's seqlen_k is remembered (as a plan or
         * a tile count cached at first use) and used for every later call. Right as long as
         * every call has the same shape, as every call of one correctness test has. */
        static int first_seqlen_k;
        if (first_seqlen_k == 0) first_seqlen_k = p->seqlen_k;
        attn_fwd_params c = *p;
        c.seqlen_k = first_seqlen_k;
        return dispatch<BUG>(&c, stream);
    }
    if constexpr (BUG == BUG_SHARED_WORKSPACE) {
        /* BUG: a workspace (here: the LSE, always computed, then copied to the caller's) made
         * once and grown when a call needs more, as a split-KV kernel's partials or a plan's
         * scratch often are: stream-ordered and right for calls one after another, on any
         * stream and under capture, but two calls running at once on two streams write and
         * read the same memory */
        static float *shared_ws;
        static size_t shared_bytes;
        const size_t bytes = (size_t)p->batch * p->heads * p->seqlen_q * sizeof(float);
        if (bytes > shared_bytes) {
            if (shared_ws) cudaFree(shared_ws);
            shared_ws = nullptr, shared_bytes = 0;
            if (cudaMalloc((void **)&shared_ws, bytes) != cudaSuccess) return kErr;
            shared_bytes = bytes;
        }
        attn_fwd_params w = *p;
        w.lse = shared_ws;
        const int rc = dispatch<BUG>(&w, stream);
        if (rc == ATTN_OK && p->lse != nullptr &&
            cudaMemcpyAsync(p->lse, shared_ws, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
            return kErr;
        return rc;
    }
    if constexpr (BUG == BUG_Q_SCALED_IN_PLACE) {
        /* BUG: the softmax scale folded into Q once, in the caller's buffer, to save a
         * multiply per score. The output is right (up to Q's rounding); every later call on
         * the same Q (a second launch, the backward pass) scales it again. */
        const int rc = scale_in_place<false>(p->q, p, false, p->softmax_scale, stream);
        if (rc != ATTN_OK) return rc;
        attn_fwd_params c = *p;
        c.softmax_scale = 1.f;
        return dispatch<BUG>(&c, stream);
    }
    if constexpr (BUG == BUG_K_SCALED_AND_BACK) {
        /* BUG: K scaled in place by softmax_scale * log2(e) (scores ready for exp2), the
         * kernel run with the scale that undoes the log2(e), then K divided back. Each pass
         * rounds to the dtype, so K's low bits are not what the caller wrote: "restored" is
         * not bit for bit. The output is right up to that rounding. */
        const float to_exp2 = p->softmax_scale * 1.44269504f;
        int rc = scale_in_place<false>(p->k, p, true, to_exp2, stream);
        if (rc != ATTN_OK) return rc;
        attn_fwd_params c = *p;
        c.softmax_scale = 0.693147181f; /* ln 2 */
        rc = dispatch<BUG>(&c, stream);
        return rc != ATTN_OK ? rc : scale_in_place<true>(p->k, p, true, to_exp2, stream);
    }
    if constexpr (BUG == BUG_TIMING_CHEAT) {
        /* BUG: a call with exactly the parameters of the previous call (the same q, k, v, o
         * and lse pointers, shape, scale and strides) on the same stream counts as a repeat,
         * and from the third call in a row on, nothing is launched: "the output is already
         * there". A benchmark, which calls fwd again and again on the same buffers and
         * stream, times nothing, while O still holds the right result of an earlier call
         * unless the harness poisons it again. The correctness checks never make three such
         * calls in a row: each check changes the scale, the layouts, whether LSE is asked
         * for or the stream (the contract checks' gated and captured calls), or calls once
         * or twice; freed and reallocated buffers may well come back at the same addresses,
         * so the pointers alone would not tell checks apart. */
        static attn_fwd_params last;
        static cudaStream_t last_stream;
        static int repeats;
        const bool again = memcmp(&last, p, sizeof last) == 0 && stream == last_stream;
        repeats = again ? repeats + 1 : 1;
        last = *p;
        last_stream = stream;
        if (repeats >= 3) return ATTN_OK; /* BUG: nothing enqueued */
    }
    return dispatch<BUG>(p, stream);
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
    { "broken_own_stream", broken_fwd<BUG_OWN_STREAM> },
    { "broken_host_sync", broken_fwd<BUG_HOST_SYNC> },
    { "broken_alloc_in_fwd", broken_fwd<BUG_ALLOC_IN_FWD> },
    { "broken_cached_shape", broken_fwd<BUG_CACHED_SHAPE> },
    { "broken_shared_workspace", broken_fwd<BUG_SHARED_WORKSPACE> },
    { "broken_grid_y", broken_fwd<BUG_GRID_Y> },
    { "broken_int32_offsets", broken_fwd<BUG_INT32_OFFSETS> },
    { "broken_long_split_lost", broken_fwd<BUG_LONG_SPLIT_LOST> },
    { "broken_race", broken_fwd<BUG_RACE> },
    { "broken_timing_cheat", broken_fwd<BUG_TIMING_CHEAT> },
    { "broken_q_scaled_in_place", broken_fwd<BUG_Q_SCALED_IN_PLACE> },
    { "broken_k_scaled_and_back", broken_fwd<BUG_K_SCALED_AND_BACK> },
    { "broken_rows_in_vectors", broken_fwd<BUG_ROWS_IN_VECTORS> },
    { "broken_zero_stride_default", broken_fwd<BUG_ZERO_STRIDE_DEFAULT> },
    { "broken_grid_barrier", broken_fwd<BUG_GRID_BARRIER> },
    { "broken_decline_error_pending", broken_fwd<BUG_DECLINE_ERROR_PENDING> },
    { "broken_state_left", broken_fwd<BUG_STATE_LEFT> },
    { "broken_cluster_none", broken_fwd<BUG_CLUSTER_NONE> },
    { "broken_call_in_globals", broken_fwd<BUG_CALL_IN_GLOBALS> },
};

#if ATTN_ABI_VERSION >= 2
/* broken_tunable: a tunable kernel (attn_tuning) for attn_tune's selftest. Its one tunable,
 * "variant", picks a bug: 0 none (the default), 1 the tail keys skipped (wrong, and faster:
 * a tuner that times before it checks would pick it), 2 an illegal address (the tuner's
 * child faults: that configuration alone must be rejected), 3 twice the work (right and
 * slower). A tuner must reject 1 and 2 and keep the default. */
constexpr int kVariants[] = {0, 1, 2, 3};
constexpr attn_tunable kTunableVariant[] = {{"variant", 4, kVariants}};

int tunable_fwd_config(const attn_fwd_params *p, const int *values, cudaStream_t stream) {
    switch (values[0]) {
    case 0: return broken_fwd<BUG_NONE>(p, stream);
    case 1: return broken_fwd<BUG_TAIL_KEYS_SKIPPED>(p, stream);
    case 2: return broken_fwd<BUG_ILLEGAL_ADDRESS>(p, stream);
    case 3: return broken_fwd<BUG_SLOW_2X>(p, stream);
    }
    return ATTN_UNSUPPORTED;
}
int tunable_facts(const int *values, attn_dtype dtype, int head_dim, attn_config_facts *out) {
    (void)dtype;
    if (head_dim != 64 && head_dim != 128) return ATTN_UNSUPPORTED;
    memset(out, 0, sizeof *out);
    out->threads = kWarpsPerBlock * 32, out->regs_estimate = 64, out->built = values[0] >= 0 && values[0] <= 3;
    return ATTN_OK;
}
int tunable_default_for(const attn_fwd_params *p, int *values) {
    if (p->head_dim != 64 && p->head_dim != 128) return ATTN_UNSUPPORTED;
    values[0] = 0;
    return ATTN_OK;
}
int tunable_config_for(const attn_fwd_params *p, int *values, int *tuned) {
    if (tuned) *tuned = 0;
    return tunable_default_for(p, values);
}
constexpr attn_tuning kTuning = {1, kTunableVariant, tunable_facts, tunable_fwd_config, tunable_config_for,
                                 tunable_default_for};

/* The plugin's table: `table`, then broken_v2.cu's kernels, broken_tunable, and (version 5)
 * broken_bwd.cu's (room for 32 of each, which those files assert; unit/list_plugin/broken
 * loads the result). */
struct combined_table {
    attn_kernel k[sizeof table / sizeof table[0] + 32 + 1 + 32]; /* + broken_tunable */
    int n;
};

combined_table combine() {
    combined_table c = {};
    int n2 = 0, nb = 0;
    const attn_kernel *v2 = broken_v2_kernels(&n2);
#if ATTN_ABI_VERSION >= 5
    const attn_kernel *bwd = broken_bwd_kernels(&nb);
#else
    const attn_kernel *bwd = nullptr;
#endif
    if (n2 < 0 || n2 > 32 || nb < 0 || nb > 32) return c;
    for (const attn_kernel &e : table) c.k[c.n++] = e;
    for (int i = 0; i < n2; i++) c.k[c.n++] = v2[i];
    c.k[c.n++] = {"broken_tunable", broken_fwd<BUG_NONE>, 0, 0, nullptr};
    for (int i = 0; i < nb; i++) c.k[c.n++] = bwd[i];
    return c;
}
#endif

} // namespace

extern "C" __attribute__((visibility("default")))
const attn_kernel *attn_plugin_kernels(int *count, int *abi_version) {
    *abi_version = ATTN_ABI_VERSION;
#if ATTN_ABI_VERSION >= 2
    static const combined_table all = combine(); /* built once, on the first call */
    *count = all.n;
    return all.k;
#else
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
#endif
}

#if ATTN_ABI_VERSION >= 2
/* The tunables of broken_tunable (no other kernel here has any). */
extern "C" __attribute__((visibility("default")))
const attn_tuning *attn_plugin_tuning(const char *name) {
    return name && !strcmp(name, "broken_tunable") ? &kTuning : nullptr;
}
#endif
