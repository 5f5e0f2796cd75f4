/* flash2's backward kernels (bwd.cu: the host side; NOTES_bwd.md: the design, the floor and
 * the resources): the pre-pass (D = rowsum(dO * O), LSE in the log2 domain, dQ's float32
 * accumulator zeroed), the main kernel (one block per key block of one (batch, KV head): dK and
 * dV in registers, dQ added into the accumulator) and the post-pass (dQ = scale * the
 * accumulator, in the dtype). The loaders, the swizzle, ldmatrix and mma.sync are the
 * forward's (kernel.cuh, ptx.cuh). */
#ifndef FLASH2_BWD_KERNEL_CUH
#define FLASH2_BWD_KERNEL_CUH

#include "bwd_plan.h"
#include "kernel.cuh"

namespace {

/* Warps per main-kernel block; each owns 16 keys of the key block (dK and dV rows). */
constexpr int kBwdWarps = 8;

/* The main kernel at head dim D: BC keys per block, BR query rows per step, Q and dO (with
 * their LSE and D entries) double-buffered, K, V and dS^T single. */
template <int D_>
struct BwdConfig {
    static constexpr int D = D_;
    static constexpr int WARPS = kBwdWarps, THREADS = 32 * WARPS;
    static constexpr int BC = 16 * WARPS;
    static constexpr int BR = FLASH2_BWD_BLOCK_ROWS;
    static constexpr int MIN_BLOCKS = 1; /* register cap 255 */
    /* shared memory, bytes: K, V [BC][D]; Q, dO [2][BR][D]; dS^T [BC][BR] (keys x queries);
     * LSE2, D [2][BR] float */
    static constexpr int OFF_K = 0, OFF_V = OFF_K + BC * D * 2, OFF_Q = OFF_V + BC * D * 2;
    static constexpr int OFF_DO = OFF_Q + 2 * BR * D * 2, OFF_DS = OFF_DO + 2 * BR * D * 2;
    static constexpr int OFF_LSE = OFF_DS + BC * BR * 2, OFF_DEL = OFF_LSE + 2 * BR * 4;
    static constexpr int SMEM = OFF_DEL + 2 * BR * 4;
    /* dQ = dS K: warp w computes query rows 16 (w % RG) .. + 15, columns (w / RG) DQ_COLS .. */
    static constexpr int DQ_RG = BR / 16, DQ_CG = WARPS / DQ_RG, DQ_COLS = D / DQ_CG;
    /* n8 tiles of dQ accumulated at once (4 registers each, at most 32) */
    static constexpr int DQ_CHUNK = DQ_COLS / 8 < 8 ? DQ_COLS / 8 : 8;
    /* Registers a thread keeps live through a step: dK and dV (16 keys x D per warp: D / 2
     * each), S^T and dP^T (16 keys x BR: BR / 8 each); dQ's accumulators come after S^T is
     * dead. 48 for addresses, indices and operand fragments (ptxas's count: NOTES_bwd.md). */
    static constexpr int FRAGMENT_REGS = D + 2 * (BR / 8) * 4;
    static constexpr int REG_CAP = flash2_space::register_cap(THREADS, MIN_BLOCKS);

    static_assert(D == 64 || D == 128, "head dims 64 and 128");
    static_assert(BC == FLASH2_BWD_BLOCK_KEYS, "bwd_plan.h's grid and workspace assume this key block");
    static_assert(BR == 64, "dS^T rows are 64 queries: whole groups of the swizzle's 8 chunks");
    static_assert(THREADS >= 2 * BR, "one thread per LSE2 and per D entry of a step");
    static_assert(WARPS % DQ_RG == 0 && DQ_COLS % 16 == 0 && (DQ_COLS / 8) % DQ_CHUNK == 0 && DQ_CHUNK % 2 == 0,
                  "dQ's warp grid: whole row groups and n8 pairs");
    /* d64 81 KB, d128 145 KB: within sm_80's 163 KB per block (one block per SM either way:
     * registers at d64, shared memory at d128 on the H100's 228 KB) */
    static_assert(SMEM <= 163 * 1024, "shared memory per block");
    /* d64 128, d128 192 of 255 */
    static_assert(FRAGMENT_REGS + 48 <= REG_CAP, "fragments exceed the register cap");
};

/* What every bwd kernel reads: the forward problem as bwd.cu normalised it (heads_k set, causal
 * folded from window_right 0), the backward's tensors, and the workspace as bwd_plan.h lays it out. */
struct BwdArgs {
    attn_fwd_params p;
    attn_bwd_params g;      /* its fwd pointer unused (a host address) */
    float *delta, *lse2;    /* [rows] each */
    float *dq_acc;          /* [nsplit][rows][D] */
    int64_t split_stride;   /* deterministic: rows * D (block x adds into slice x); else 0 */
    int nsplit;
    float scale_log2;       /* softmax_scale * log2(e) */
};

/* 4 bytes global -> shared (cp.async.ca: .cg takes 16 only); valid == false writes zeros */
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}

/* Adds (x, y) to two consecutive floats of global memory (8-byte aligned): one vector red on
 * sm_90, two elsewhere. One thread's adds to an address apply in its program order. */
__device__ __forceinline__ void atomic_add2(float *dst, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2 *>(dst), make_float2(x, y));
#else
    atomicAdd(dst, x);
    atomicAdd(dst + 1, y);
#endif
}

template <typename T> __device__ __forceinline__ float2 to_float2(uint32_t u);
template <> __device__ __forceinline__ float2 to_float2<__half>(uint32_t u) {
    return __half22float2(*reinterpret_cast<const __half2 *>(&u));
}
template <> __device__ __forceinline__ float2 to_float2<__nv_bfloat16>(uint32_t u) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u));
}

/* Sequence b's rows of the workspace and of the query-side tensors: workspace row of (head h,
 * query i) = ws_base + h * ws_head + i, the LSE's own index ([batch][heads][seqlen_q] dense,
 * [heads][total_q] packed); the element offset of its row 0 in a query-side tensor is
 * row0 * row_stride, or b * batch_stride when not packed (q_tok0 < 0). */
struct QRows {
    int len;
    int64_t ws_base, ws_head;
    int q_tok0; /* cu_seqlens_q[b], or -1 when not packed */
    __device__ __forceinline__ int64_t seq_off(int b, int64_t batch_stride, int64_t row_stride) const {
        return q_tok0 >= 0 ? (int64_t)q_tok0 * row_stride : (int64_t)b * batch_stride;
    }
};
__device__ __forceinline__ QRows q_rows(const attn_fwd_params &p, int b) {
    QRows r;
    r.len = seq_len_q(p, b);
    if (p.cu_seqlens_q) {
        r.q_tok0 = p.cu_seqlens_q[b];
        r.ws_base = r.q_tok0, r.ws_head = p.total_q;
    } else {
        r.q_tok0 = -1;
        r.ws_base = (int64_t)b * p.heads * p.seqlen_q, r.ws_head = p.seqlen_q;
    }
    return r;
}

/* The row passes of the pre- and post-pass: blocks of 64 query rows of one (sequence b =
 * blockIdx.z, head h = blockIdx.y), 256 threads, thread x on 16-byte chunk x % (D / 8) of rows
 * x / (D / 8) + k 256 / (D / 8). */
constexpr int kRowPassThreads = 256, kRowPassRows = 64;

/* D = rowsum(dO * O) in float32, LSE2 = LSE log2(e) (+inf for a row that sees no key, so that
 * exp2(s - LSE2) = 0), and the row's dQ accumulator zeroed in every slice. */
template <typename T, int D>
__global__ void __launch_bounds__(kRowPassThreads) flash2_bwd_pre(const BwdArgs a) {
    constexpr int CH = D / 8, STEP = kRowPassThreads / CH;
    const attn_fwd_params &p = a.p;
    const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * kRowPassRows;
    const QRows q = q_rows(p, b);
    if (m0 >= q.len) return; /* packed: this sequence is shorter than the grid */
    const int chunk = threadIdx.x % CH;
    const T *o = static_cast<const T *>(p.o) + q.seq_off(b, p.o_batch_stride, p.o_row_stride) +
                 (int64_t)h * p.o_head_stride + chunk * 8;
    const T *d_o = static_cast<const T *>(a.g.dout) + q.seq_off(b, a.g.do_batch_stride, a.g.do_row_stride) +
                   (int64_t)h * a.g.do_head_stride + chunk * 8;
    const int64_t ws0 = q.ws_base + h * q.ws_head;
    for (int r = threadIdx.x / CH; r < kRowPassRows; r += STEP) {
        const int i = m0 + r;
        const bool valid = i < q.len;
        float dot = 0.0f;
        if (valid) {
            const uint4 ov = *reinterpret_cast<const uint4 *>(o + (int64_t)i * p.o_row_stride);
            const uint4 dv = *reinterpret_cast<const uint4 *>(d_o + (int64_t)i * a.g.do_row_stride);
            const uint32_t ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 x = to_float2<T>(ow[e]), y = to_float2<T>(dw[e]);
                dot = fmaf(x.x, y.x, dot);
                dot = fmaf(x.y, y.y, dot);
            }
        }
        /* the row's CH chunks are CH consecutive lanes of one warp (CH divides 32) */
#pragma unroll
        for (int m = 1; m < CH; m <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, m);
        if (!valid) continue;
        const int64_t row = ws0 + i;
        if (chunk == 0) {
            const float lse = p.lse[row];
            a.delta[row] = dot;
            a.lse2[row] = lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f;
        }
        float4 *acc = reinterpret_cast<float4 *>(a.dq_acc + row * D + chunk * 8);
        for (int s = 0; s < a.nsplit; ++s, acc += a.split_stride / 4) {
            acc[0] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            acc[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
}

/* dQ = softmax_scale * (slice 0 + slice 1 + ...) in that order, in the dtype. */
template <typename T, int D>
__global__ void __launch_bounds__(kRowPassThreads) flash2_bwd_post(const BwdArgs a) {
    constexpr int CH = D / 8, STEP = kRowPassThreads / CH;
    const attn_fwd_params &p = a.p;
    const int b = blockIdx.z, h = blockIdx.y, m0 = blockIdx.x * kRowPassRows;
    const QRows q = q_rows(p, b);
    if (m0 >= q.len) return;
    const int chunk = threadIdx.x % CH;
    T *dq = static_cast<T *>(a.g.dq) + q.seq_off(b, a.g.dq_batch_stride, a.g.dq_row_stride) +
            (int64_t)h * a.g.dq_head_stride + chunk * 8;
    const int64_t ws0 = q.ws_base + h * q.ws_head;
    const float scale = p.softmax_scale;
    for (int r = threadIdx.x / CH; r < kRowPassRows; r += STEP) {
        const int i = m0 + r;
        if (i >= q.len) break; /* rows only grow with r */
        const float4 *acc = reinterpret_cast<const float4 *>(a.dq_acc + (ws0 + i) * D + chunk * 8);
        float4 lo = acc[0], hi = acc[1];
        for (int s = 1; s < a.nsplit; ++s) {
            acc += a.split_stride / 4;
            const float4 l = acc[0], u = acc[1];
            lo.x += l.x, lo.y += l.y, lo.z += l.z, lo.w += l.w;
            hi.x += u.x, hi.y += u.y, hi.z += u.z, hi.w += u.w;
        }
        uint4 out;
        out.x = Mma<T>::pack(lo.x * scale, lo.y * scale);
        out.y = Mma<T>::pack(lo.z * scale, lo.w * scale);
        out.z = Mma<T>::pack(hi.x * scale, hi.y * scale);
        out.w = Mma<T>::pack(hi.z * scale, hi.w * scale);
        *reinterpret_cast<uint4 *>(dq + (int64_t)i * a.g.dq_row_stride) = out;
    }
}

/* ---- the main kernel ------------------------------------------------------------------
 * ldmatrix lanes, as the forward's (kernel.cuh): an A fragment (16 rows x k16) read from a
 * [rows][k] tile takes rows l7 + 8 k_hi at chunk 2 kk + hi16; a B fragment pair (n16 x k16)
 * from a [n][k] tile, rows l7 + 8 hi16 at chunk 2 kk + k_hi; a B fragment pair (k16 x n16)
 * from a [k][n] tile (.trans), rows l7 + 8 k_hi at chunk dt + hi16; an A fragment from a
 * [k][m] tile (.trans: dS for dQ), rows l7 + 8 hi16 at chunk 2 rg + k_hi. Every row a lane
 * reads is = lane (mod 8), so its swizzle XOR is always l7. */
struct Lanes {
    uint32_t l7, k_hi, hi16;
    __device__ __forceinline__ explicit Lanes(int lane) : l7(lane & 7), k_hi((lane >> 3) & 1), hi16(lane >> 4) {}
    __device__ __forceinline__ uint32_t row_a() const { return l7 + 8 * k_hi; }
    __device__ __forceinline__ uint32_t row_b() const { return l7 + 8 * hi16; }
};

/* c (16 rows x NT n8 tiles) = A B^T over D: A's 16 rows from the [rows][D] tile at a_lane (this
 * lane's row_a row), B's NT * 8 rows from the [n][D] tile at b_lane (its row_b row): S^T = K Q^T
 * and dP^T = V dO^T, the warp's 16 keys against the step's BR queries. */
template <typename T, int D, int NT>
__device__ __forceinline__ void gemm_nt(float (&c)[NT][4], uint32_t a_lane, uint32_t b_lane, const Lanes &ln) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t af[4];
        ldmatrix_x4(af, a_lane + (((2 * kk + ln.hi16) ^ ln.l7) << 4));
#pragma unroll
        for (int nt = 0; nt < NT; nt += 2) {
            uint32_t bf[4];
            ldmatrix_x4(bf, b_lane + (uint32_t)(nt * 8 * D * sizeof(T)) + (((2 * kk + ln.k_hi) ^ ln.l7) << 4));
            Mma<T>::run(c[nt], af, bf[0], bf[1]);
            Mma<T>::run(c[nt + 1], af, bf[2], bf[3]);
        }
    }
}

/* acc (16 rows x D) += A B: A (16 rows x NTQ * 8 queries) from registers, packed to the dtype
 * (pk[nt][0]: row g, pk[nt][1]: row g + 8, columns 8 nt + 2 t, + 1: an accumulator's layout,
 * which is the A fragment's), B from the [queries][D] tile at bt_lane (.trans, its row_a row):
 * dV += P^T dO and dK += dS^T Q. */
template <typename T, int D, int NTQ>
__device__ __forceinline__ void gemm_tn(float (&acc)[D / 8][4], const uint32_t (&pk)[NTQ][2], uint32_t bt_lane,
                                        const Lanes &ln) {
#pragma unroll
    for (int kb = 0; kb < NTQ / 2; ++kb) {
        const uint32_t af[4] = {pk[2 * kb][0], pk[2 * kb][1], pk[2 * kb + 1][0], pk[2 * kb + 1][1]};
#pragma unroll
        for (int dt = 0; dt < D / 8; dt += 2) {
            uint32_t bf[4];
            ldmatrix_x4_trans(bf, bt_lane + (uint32_t)(kb * 16 * D * sizeof(T)) + (((dt + ln.hi16) ^ ln.l7) << 4));
            Mma<T>::run(acc[dt], af, bf[0], bf[1]);
            Mma<T>::run(acc[dt + 1], af, bf[2], bf[3]);
        }
    }
}

/* dQ (BR x D) += dS K for the step, into the float32 accumulator rows dq_rows[0 .. rows):
 * warp (rg, cg) takes query rows 16 rg .. + 15 and columns cg DQ_COLS .. + DQ_COLS - 1, over
 * the block's BC keys; dS^T [BC][BR] and K [BC][D] from shared memory (.trans both). */
template <typename T, int D>
__device__ __forceinline__ void gemm_dq(float *dq_rows, int rows, uint32_t ds_lane, uint32_t kt_lane, int rg, int cg,
                                        int g, int t, const Lanes &ln) {
    using C = BwdConfig<D>;
    constexpr int BC = C::BC, BR = C::BR, CHUNK = C::DQ_CHUNK, NT0 = C::DQ_COLS / 8;
#pragma unroll
    for (int c0 = 0; c0 < C::DQ_COLS / 8; c0 += CHUNK) {
        float acc[CHUNK][4];
#pragma unroll
        for (int j = 0; j < CHUNK; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < BC / 16; ++kk) {
            uint32_t af[4];
            ldmatrix_x4_trans(af, ds_lane + (uint32_t)(kk * 16 * BR * sizeof(T)) + (((2 * rg + ln.k_hi) ^ ln.l7) << 4));
#pragma unroll
            for (int j = 0; j < CHUNK; j += 2) {
                const int dt = cg * NT0 + c0 + j;
                uint32_t bf[4];
                ldmatrix_x4_trans(bf, kt_lane + (uint32_t)(kk * 16 * D * sizeof(T)) + (((dt + ln.hi16) ^ ln.l7) << 4));
                Mma<T>::run(acc[j], af, bf[0], bf[1]);
                Mma<T>::run(acc[j + 1], af, bf[2], bf[3]);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = 16 * rg + g + 8 * r;
            if (row >= rows) continue; /* past the sequence's last query */
            float *dst = dq_rows + (int64_t)row * D + (cg * NT0 + c0) * 8 + 2 * t;
#pragma unroll
            for (int j = 0; j < CHUNK; ++j) atomic_add2(dst + 8 * j, acc[j][2 * r], acc[j][2 * r + 1]);
        }
    }
}

/* P^T = exp2(S^T log2(e) scale - LSE2) (0 where masked), dS^T = P^T (dP^T - D), both packed to
 * the dtype; dS^T also stored to the [BC][BR] tile (its rows: the warp's keys). key0: this
 * thread's row g key; m0: the step's first query; mask: the tile crosses the diagonal or an end. */
template <typename T, int NTQ>
__device__ __forceinline__ void softmax_grad(float (&s)[NTQ][4], float (&dp)[NTQ][4], uint32_t (&ppk)[NTQ][2],
                                             uint32_t (&dpk)[NTQ][2], const float *lse2, const float *delta,
                                             T *ds_rows, const BwdArgs &a, int key0, int m0, int Sq, int Sk,
                                             bool mask, int g, int t) {
    const int offset = Sk - Sq;
#pragma unroll
    for (int nt = 0; nt < NTQ; ++nt) {
        const float2 l2 = *reinterpret_cast<const float2 *>(lse2 + nt * 8 + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = exp2_approx(fmaf(s[nt][e], a.scale_log2, -(e & 1 ? l2.y : l2.x)));
    }
    if (mask) { /* one uniform branch per step: most steps need no mask */
#pragma unroll
        for (int nt = 0; nt < NTQ; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = key0 + 8 * (e >> 1), qi = m0 + nt * 8 + 2 * t + (e & 1);
                if (key >= Sk || qi >= Sq || (a.p.causal && key > qi + offset)) s[nt][e] = 0.0f;
            }
    }
#pragma unroll
    for (int nt = 0; nt < NTQ; ++nt) {
        const float2 dd = *reinterpret_cast<const float2 *>(delta + nt * 8 + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[nt][e] = s[nt][e] * (dp[nt][e] - (e & 1 ? dd.y : dd.x));
        ppk[nt][0] = Mma<T>::pack(s[nt][0], s[nt][1]);
        ppk[nt][1] = Mma<T>::pack(s[nt][2], s[nt][3]);
        dpk[nt][0] = Mma<T>::pack(dp[nt][0], dp[nt][1]);
        dpk[nt][1] = Mma<T>::pack(dp[nt][2], dp[nt][3]);
        constexpr int BR = NTQ * 8;
        *reinterpret_cast<uint32_t *>(ds_rows + swz<BR>(g, nt) + 2 * t) = dpk[nt][0];
        *reinterpret_cast<uint32_t *>(ds_rows + swz<BR>(g + 8, nt) + 2 * t) = dpk[nt][1];
    }
}

/* Block (x, KV head hk = blockIdx.y, sequence b = blockIdx.z): key blocks x, x + gridDim.x, ...
 * of the sequence (one when not deterministic: gridDim.x covers the longest). Per key block: K
 * and V to shared memory once; then every query step (head h of hk's group, BR query rows from
 * the first that sees one of the block's keys) double-buffered: S^T, P^T, dP^T, dS^T for the
 * warp's 16 keys, dV and dK accumulated in registers, dS^T through shared memory to dQ's
 * atomics; at the end dK (times softmax_scale) and dV for the keys the sequence has. */
template <typename T, int D>
__global__ void __launch_bounds__(BwdConfig<D>::THREADS, BwdConfig<D>::MIN_BLOCKS) flash2_bwd_main(const BwdArgs a) {
    using C = BwdConfig<D>;
    constexpr int BC = C::BC, BR = C::BR, THREADS = C::THREADS, NTQ = BR / 8, NTD = D / 8;
    constexpr uint32_t STAGE_BYTES = BR * D * sizeof(T);
    extern __shared__ __align__(128) unsigned char smem[];
    T *sK = reinterpret_cast<T *>(smem + C::OFF_K), *sV = reinterpret_cast<T *>(smem + C::OFF_V);
    T *sQ = reinterpret_cast<T *>(smem + C::OFF_Q), *sdO = reinterpret_cast<T *>(smem + C::OFF_DO);
    T *sdS = reinterpret_cast<T *>(smem + C::OFF_DS);
    float *sLse = reinterpret_cast<float *>(smem + C::OFF_LSE), *sDel = reinterpret_cast<float *>(smem + C::OFF_DEL);

    const attn_fwd_params &p = a.p;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int b = blockIdx.z, hk = blockIdx.y;
    const QRows q = q_rows(p, b);
    const int Sq = q.len, Sk = seq_len_k(p, b), offset = Sk - Sq, group = p.heads / p.heads_k;
    /* K, V, dK, dV: sequence b's KV head hk (packed rows from cu_seqlens_k[b]) */
    const int k_tok0 = p.cu_seqlens_k ? p.cu_seqlens_k[b] : -1;
    auto kv_base = [&](const void *base, int64_t bs, int64_t hs, int64_t rs) {
        return static_cast<const T *>(base) + (k_tok0 >= 0 ? (int64_t)k_tok0 * rs : (int64_t)b * bs) + (int64_t)hk * hs;
    };
    const T *k_head = kv_base(p.k, p.k_batch_stride, p.k_head_stride, p.k_row_stride);
    const T *v_head = kv_base(p.v, p.v_batch_stride, p.v_head_stride, p.v_row_stride);
    const T *q_seq = static_cast<const T *>(p.q) + q.seq_off(b, p.q_batch_stride, p.q_row_stride);
    const T *do_seq = static_cast<const T *>(a.g.dout) + q.seq_off(b, a.g.do_batch_stride, a.g.do_row_stride);
    float *const dq_acc = a.dq_acc + (int64_t)blockIdx.x * a.split_stride; /* deterministic: slice x */

    const Lanes ln(lane);
    const uint32_t a_k = smem_addr(sK + (16 * warp + ln.row_a()) * D), a_v = smem_addr(sV + (16 * warp + ln.row_a()) * D);
    const uint32_t bn_q = smem_addr(sQ + ln.row_b() * D), bn_do = smem_addr(sdO + ln.row_b() * D);
    const uint32_t bt_q = smem_addr(sQ + ln.row_a() * D), bt_do = smem_addr(sdO + ln.row_a() * D);
    const uint32_t kt = smem_addr(sK + ln.row_a() * D), ds_lane = smem_addr(sdS + ln.row_b() * BR);
    T *const ds_rows = sdS + (16 * warp) * BR;
    const int rg = warp % C::DQ_RG, cg = warp / C::DQ_RG;

    /* a step's tiles into `stage`: BR rows of Q and dO of head h from query m0 (rows past the
     * sequence zero-filled), and their LSE2 and D entries (0 past it: such rows are masked) */
    auto load_step = [&](int stage, int h, int m0) {
        load_rows<T, D, D / 8, BR, THREADS>(sQ + stage * BR * D,
                                            q_seq + (int64_t)h * p.q_head_stride + (int64_t)m0 * p.q_row_stride,
                                            p.q_row_stride, Sq - m0);
        load_rows<T, D, D / 8, BR, THREADS>(sdO + stage * BR * D,
                                            do_seq + (int64_t)h * a.g.do_head_stride + (int64_t)m0 * a.g.do_row_stride,
                                            a.g.do_row_stride, Sq - m0);
        const int x = threadIdx.x;
        if (x < 2 * BR) {
            const int r = x % BR;
            const bool valid = m0 + r < Sq;
            const float *src = (x < BR ? a.lse2 : a.delta) + q.ws_base + h * q.ws_head + m0 + r;
            cp_async4(smem_addr((x < BR ? sLse : sDel) + stage * BR + r), valid ? src : a.delta, valid);
        }
    };

    const int n_kb = (Sk + BC - 1) / BC;
    for (int kb = blockIdx.x; kb < n_kb; kb += gridDim.x) {
        const int n0 = kb * BC;
        /* query steps: from the block holding the first query that sees key n0 (causal: query i
         * sees key j iff j <= i + offset), to the sequence's end; for each head of the group */
        const int q_lo = p.causal ? max(n0 - offset, 0) : 0;
        const int qb_first = q_lo / BR, qb_end = (Sq + BR - 1) / BR;
        const int steps = q_lo >= Sq ? 0 : (qb_end - qb_first) * group;

        float acc_dk[NTD][4], acc_dv[NTD][4];
#pragma unroll
        for (int i = 0; i < NTD; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc_dk[i][e] = acc_dv[i][e] = 0.0f;

        __syncthreads(); /* every warp is done with the previous key block's tiles */
        if (steps > 0) {
            load_rows<T, D, D / 8, BC, THREADS>(sK, k_head + (int64_t)n0 * p.k_row_stride, p.k_row_stride, Sk - n0);
            load_rows<T, D, D / 8, BC, THREADS>(sV, v_head + (int64_t)n0 * p.v_row_stride, p.v_row_stride, Sk - n0);
            load_step(0, hk * group, qb_first * BR);
            cp_async_commit();
        }
        int h = hk * group, qb = qb_first; /* the next step to load */
        for (int it = 0; it < steps; ++it) {
            const int stage = it & 1, hs = h, m0 = qb * BR;
            if (++qb == qb_end) qb = qb_first, ++h;
            flash2_ptx::cp_async_wait<0>();
            __syncthreads(); /* the step's tiles are in; every warp is done with the last step's */
            if (it + 1 < steps) load_step(stage ^ 1, h, qb * BR);
            cp_async_commit();

            float s[NTQ][4], dp[NTQ][4];
            gemm_nt<T, D, NTQ>(s, a_k, bn_q + stage * STAGE_BYTES, ln);   /* S^T = K Q^T */
            gemm_nt<T, D, NTQ>(dp, a_v, bn_do + stage * STAGE_BYTES, ln); /* dP^T = V dO^T */
            const bool mask = n0 + BC > Sk || m0 + BR > Sq || (p.causal && n0 + BC - 1 > m0 + offset);
            uint32_t ppk[NTQ][2], dpk[NTQ][2];
            softmax_grad<T, NTQ>(s, dp, ppk, dpk, sLse + stage * BR, sDel + stage * BR, ds_rows, a,
                                 n0 + 16 * warp + g, m0, Sq, Sk, mask, g, t);
            gemm_tn<T, D, NTQ>(acc_dv, ppk, bt_do + stage * STAGE_BYTES, ln); /* dV += P^T dO */
            gemm_tn<T, D, NTQ>(acc_dk, dpk, bt_q + stage * STAGE_BYTES, ln);  /* dK += dS^T Q */
            __syncthreads(); /* dS^T is whole */
            gemm_dq<T, D>(dq_acc + (q.ws_base + hs * q.ws_head + m0) * D, Sq - m0, ds_lane, kt, rg, cg, g, t, ln);
        }

        /* dK = softmax_scale dS^T Q, dV: the warp's keys that the sequence has */
        const float scale = p.softmax_scale;
        T *dk_head = const_cast<T *>(kv_base(a.g.dk, a.g.dk_batch_stride, a.g.dk_head_stride, a.g.dk_row_stride));
        T *dv_head = const_cast<T *>(kv_base(a.g.dv, a.g.dv_batch_stride, a.g.dv_head_stride, a.g.dv_row_stride));
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int key = n0 + 16 * warp + g + 8 * r;
            if (key >= Sk) continue;
            T *dk = dk_head + (int64_t)key * a.g.dk_row_stride + 2 * t;
            T *dv = dv_head + (int64_t)key * a.g.dv_row_stride + 2 * t;
#pragma unroll
            for (int dt = 0; dt < NTD; ++dt) {
                *reinterpret_cast<uint32_t *>(dk + dt * 8) =
                    Mma<T>::pack(acc_dk[dt][2 * r] * scale, acc_dk[dt][2 * r + 1] * scale);
                *reinterpret_cast<uint32_t *>(dv + dt * 8) = Mma<T>::pack(acc_dv[dt][2 * r], acc_dv[dt][2 * r + 1]);
            }
        }
    }
}

}  // namespace

#endif
