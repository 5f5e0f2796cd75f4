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

/* The main kernel at head dim D: 8 warps, BC keys per block, BR query rows per step (128 at
 * d64, so that a step's GEMMs are as large as d128's), Q and dO (with their LSE and D entries)
 * double-buffered, K, V, P^T and dS^T single. Each GEMM has its own warp grid, so that every
 * warp tile is at least 32 x 32 (ldmatrix bytes per mma: NOTES_bwd.md, v2):
 * - S^T = K Q^T and dP^T = V dO^T: warp (w % S_KG, w / S_KG) takes keys S_KEYS (w % S_KG) ..
 *   and queries S_COLS (w / S_KG) .. (d128: 32 x 32; d64: 64 x 32, so that a thread reads the
 *   LSE2 and D of 8 queries, not 16);
 * - dV += P^T dO and dK += dS^T Q: keys 32 (w % 4) .. + 31, columns KV_COLS (w / 4) ..;
 * - dQ += dS K: queries 32 (w % Q_RG) .. + 31, columns Q_COLS (w / Q_RG) ... */
template <int D_>
struct BwdConfig {
    static constexpr int D = D_;
    static constexpr int WARPS = 8, THREADS = 32 * WARPS;
    static constexpr int BC = 128;
    static constexpr int BR = D == 64 ? 128 : 64;
    static constexpr int MIN_BLOCKS = 1; /* register cap 255 */
    static constexpr int KG = 4;                          /* key groups of 32 (dK, dV) */
    static constexpr int S_KG = D == 64 ? 2 : 4;          /* key groups of S^T and dP^T */
    static constexpr int S_KEYS = BC / S_KG, MT_S = S_KEYS / 16; /* keys per warp there, m16 tiles */
    static constexpr int S_COLS = BR / (WARPS / S_KG);    /* queries per warp in S^T, dP^T */
    static constexpr int NT_S = S_COLS / 8;               /* their n8 tiles */
    static constexpr int KV_COLS = D / (WARPS / KG);      /* dK, dV columns per warp */
    static constexpr int NT_KV = KV_COLS / 8;
    static constexpr int Q_RG = BR / 32;                  /* dQ's query groups of 32 */
    static constexpr int Q_COLS = D / (WARPS / Q_RG);     /* dQ columns per warp */
    static constexpr int NT_Q = Q_COLS / 8;
    /* shared memory, bytes: K, V [BC][D]; Q, dO [2][BR][D]; P^T, dS^T [BC][BR] (keys x
     * queries); LSE2, D [2][BR] float */
    static constexpr int OFF_K = 0, OFF_V = OFF_K + BC * D * 2, OFF_Q = OFF_V + BC * D * 2;
    static constexpr int OFF_DO = OFF_Q + 2 * BR * D * 2, OFF_P = OFF_DO + 2 * BR * D * 2;
    static constexpr int OFF_DS = OFF_P + BC * BR * 2, OFF_LSE = OFF_DS + BC * BR * 2;
    static constexpr int OFF_DEL = OFF_LSE + 2 * BR * 4, SMEM = OFF_DEL + 2 * BR * 4;
    /* Registers a thread keeps live through a step: dK and dV (2 x NT_KV x 4 each), S^T and
     * dP^T (MT_S x NT_S x 4 each); dQ's (2 x NT_Q x 4) come after S^T and dP^T are in shared
     * memory. 48 for addresses, indices and operand fragments (ptxas's count: NOTES_bwd.md). */
    static constexpr int FRAGMENT_REGS = 2 * (2 * NT_KV * 4) + 2 * (MT_S * NT_S * 4);
    static constexpr int REG_CAP = flash2_space::register_cap(THREADS, MIN_BLOCKS);

    static_assert(D == 64 || D == 128, "head dims 64 and 128");
    static_assert(BC == FLASH2_BWD_BLOCK_KEYS, "bwd_plan.h's grid and workspace assume this key block");
    static_assert(BC == 32 * KG && WARPS % KG == 0, "dK/dV's warp grid: 32 keys per warp row");
    static_assert(BC % S_KG == 0 && S_KEYS % 16 == 0 && WARPS % S_KG == 0, "S^T's warp grid: whole m16 tiles");
    static_assert(BR % 64 == 0, "P^T and dS^T rows are whole groups of the swizzle's 8 chunks");
    static_assert(THREADS >= 2 * BR, "one thread per LSE2 and per D entry of a step");
    static_assert(Q_COLS == 32 && WARPS % Q_RG == 0, "dQ's warp tiles are 32 x 32: dq_acc_index's blocks");
    static_assert(NT_S % 2 == 0 && NT_KV % 2 == 0 && NT_Q % 2 == 0,
                  "n8 tiles in pairs (one ldmatrix x4 each)");
    /* d64 162 KB, d128 161 KB: within sm_80's 163 KB per block (one block per SM) */
    static_assert(SMEM <= 163 * 1024, "shared memory per block");
    /* 192 of 255 at both head dims */
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

/* Adds (x, y, z, w) to four consecutive floats of global memory (16-byte aligned): one vector
 * red on sm_90, four elsewhere. One thread's adds to an address apply in its program order. */
__device__ __forceinline__ void atomic_add4(float *dst, float x, float y, float z, float w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4 *>(dst), make_float4(x, y, z, w));
#else
    atomicAdd(dst, x);
    atomicAdd(dst + 1, y);
    atomicAdd(dst + 2, z);
    atomicAdd(dst + 3, w);
#endif
}

template <typename T> __device__ __forceinline__ float2 to_float2(uint32_t u);
template <> __device__ __forceinline__ float2 to_float2<__half>(uint32_t u) {
    return __half22float2(*reinterpret_cast<const __half2 *>(&u));
}
template <> __device__ __forceinline__ float2 to_float2<__nv_bfloat16>(uint32_t u) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u));
}

/* Sequence b's rows: workspace row of (head h, query i) = ws_base + h * ws_head + i (bwd_plan.h:
 * ws_base a multiple of FLASH2_BWD_ROW_GROUP), the LSE's own index lse_base + h * lse_head + i
 * ([batch][heads][seqlen_q] dense, [heads][total_q] packed); the element offset of its row 0 in a
 * query-side tensor is row0 * row_stride, or b * batch_stride when not packed (q_tok0 < 0). */
struct QRows {
    int len;
    int64_t ws_base, ws_head, lse_base, lse_head;
    int q_tok0; /* cu_seqlens_q[b], or -1 when not packed */
    __device__ __forceinline__ int64_t seq_off(int b, int64_t batch_stride, int64_t row_stride) const {
        return q_tok0 >= 0 ? (int64_t)q_tok0 * row_stride : (int64_t)b * batch_stride;
    }
};
__device__ __forceinline__ QRows q_rows(const attn_fwd_params &p, int b) {
    QRows r;
    r.len = seq_len_q(p, b);
    r.ws_head = flash2_bwd_head_rows(&p);
    if (p.cu_seqlens_q) {
        r.q_tok0 = p.cu_seqlens_q[b];
        r.ws_base = flash2_bwd_round_group(r.q_tok0) + (int64_t)FLASH2_BWD_ROW_GROUP * b;
        r.lse_base = r.q_tok0, r.lse_head = p.total_q;
    } else {
        r.q_tok0 = -1;
        r.ws_base = (int64_t)b * p.heads * r.ws_head;
        r.lse_base = (int64_t)b * p.heads * p.seqlen_q, r.lse_head = p.seqlen_q;
    }
    return r;
}

/* dQ's accumulator: a group of 8 workspace rows (bwd_plan.h) holds 8 x D floats as D / 32
 * blocks of 256, block qc columns 32 qc .. + 31, element (row g, column 32 qc + 8 nt + 2 t + e)
 * at 128 (nt / 2) + 4 (4 g + t) + 2 (nt % 2) + e: the order in which lane 4 g + t of a 32 x 32
 * mma.sync tile holds them (n8 tiles nt), so that a warp adds 8 rows x 32 columns with two
 * 16-byte reds per lane, each 512 contiguous bytes (four whole 128-byte lines; in row-major
 * order each red touched 8 lines). The offset of (row, column) in floats: */
template <int D>
__device__ __forceinline__ int64_t dq_acc_index(int64_t row, int col) {
    const int g = (int)(row % 8), nt = (col % 32) / 8, t = (col % 8) / 2;
    return (row - g) * D + (col / 32) * 256 + (nt / 2) * 128 + 4 * (4 * g + t) + 2 * (nt % 2) + col % 2;
}

/* The row passes of the pre- and post-pass: blocks of 64 query rows of one (sequence b =
 * blockIdx.z, head h = blockIdx.y), 256 threads, thread x on 16-byte chunk x % (D / 8) of rows
 * x / (D / 8) + k 256 / (D / 8). */
constexpr int kRowPassThreads = 256, kRowPassRows = 64;

/* D = rowsum(dO * O) in float32, LSE2 = LSE log2(e) (+inf for a row that sees no key, so that
 * exp2(s - LSE2) = 0), and the row's dQ accumulator zeroed in every slice, with the padding rows
 * of the sequence's last group (a group's 8 x D floats in any order zero it). */
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
    const int64_t ws0 = q.ws_base + h * q.ws_head, lse0 = q.lse_base + h * q.lse_head;
    /* rows past len up to its group's end: padding, zeroed here (the block of row len - 1 has them) */
    const int padded = (int)flash2_bwd_round_group(q.len);
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
        if (i >= padded) continue;
        const int64_t row = ws0 + i;
        if (valid && chunk == 0) {
            const float lse = p.lse[lse0 + i];
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
        /* columns 8 chunk + 2 t + {0, 1} of the row: four float2 16 bytes apart (dq_acc_index) */
        const float *acc = a.dq_acc + dq_acc_index<D>(ws0 + i, chunk * 8);
        float v[8];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            const float2 x = *reinterpret_cast<const float2 *>(acc + 4 * t);
            v[2 * t] = x.x, v[2 * t + 1] = x.y;
        }
        for (int s = 1; s < a.nsplit; ++s) {
            acc += a.split_stride;
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const float2 x = *reinterpret_cast<const float2 *>(acc + 4 * t);
                v[2 * t] += x.x, v[2 * t + 1] += x.y;
            }
        }
        uint4 out;
        out.x = Mma<T>::pack(v[0] * scale, v[1] * scale);
        out.y = Mma<T>::pack(v[2] * scale, v[3] * scale);
        out.z = Mma<T>::pack(v[4] * scale, v[5] * scale);
        out.w = Mma<T>::pack(v[6] * scale, v[7] * scale);
        *reinterpret_cast<uint4 *>(dq + (int64_t)i * a.g.dq_row_stride) = out;
    }
}

/* ---- the main kernel ------------------------------------------------------------------
 * ldmatrix lanes, as the forward's (kernel.cuh): an A fragment (16 rows x k16) read from a
 * [rows][k] tile takes rows l7 + 8 k_hi at chunk 2 kk + hi16; a B fragment pair (n16 x k16)
 * from a [n][k] tile, rows l7 + 8 hi16 at chunk 2 kk + k_hi; a B fragment pair (k16 x n16)
 * from a [k][n] tile (.trans), rows l7 + 8 k_hi at chunk dt + hi16; an A fragment from a
 * [k][m] tile (.trans: dS for dQ), rows l7 + 8 hi16 at chunk 2 m16 + k_hi (l7 = lane & 7,
 * k_hi = lane bit 3, hi16 = lane bit 4). Every row a lane reads is = lane (mod 8), so its
 * swizzle XOR is always l7. */

/* This lane's ldmatrix addresses for N consecutive chunk pairs c0, c0 + 1, ... of a swizzled
 * tile: base (the lane's row) + the byte offset of 16-byte chunk 2 c + bit, XOR-swizzled by the
 * row (l7), computed before the loops (ptxas recomputes some in the step where registers are
 * short), so that an ldmatrix is one address register plus an immediate (chunk pairs 4 apart
 * differ by 128 bytes: the XOR touches the low three chunk bits only). */
template <int N>
__device__ __forceinline__ void lane_chunks(uint32_t (&x)[N], uint32_t base, int c0, uint32_t bit, uint32_t l7) {
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = base + ((((uint32_t)(2 * (c0 + i)) + bit) ^ l7) << 4);
}

/* c (MT m16 tiles x NT n8 tiles) += A B over KSTEPS k16 steps, both operands from swizzled
 * shared-memory tiles of LDA and LDB elements per row; a_add and b_add are added to every
 * address (another tile of the same shape, a stage). The lane addresses (lane_chunks):
 * - A_T false, A a [m][k] tile: a[j] for chunk pair j of k (rows: the lane's row_a row of the
 *   warp's first m16 tile); NA 4, pair kk at a[kk % 4] + 128 (kk / 4);
 * - A_T true, A a [k][m] tile (.trans): a[mt] for the warp's m16 tile mt (its row_b row of k);
 * - B_T false, B a [n][k] tile: b[j] for chunk pair j of k (its row_b row of the warp's first
 *   n8 tile); NB 4;
 * - B_T true, B a [k][n] tile (.trans): b[j] for the warp's n8 tiles 2 j, 2 j + 1 (its row_a
 *   row of k); NB NT / 2, or 4 when the warp's first pair is a multiple of 4.
 * k0 .. k1 - 1: the k16 steps to run (all by default; dK's run in four parts, a group of dQ's
 * reds between them). */
template <typename T, int MT, int NT, int KSTEPS, bool A_T, int LDA, bool B_T, int LDB, int NA, int NB>
__device__ __forceinline__ void mma_tiles(float (&c)[MT][NT][4], const uint32_t (&a)[NA], uint32_t a_add,
                                          const uint32_t (&b)[NB], uint32_t b_add, int k0 = 0, int k1 = KSTEPS) {
    constexpr uint32_t ES = sizeof(T);
    static_assert(A_T ? NA == MT : NA == 4, "A's lane addresses");
    static_assert(B_T ? (NB == NT / 2 || NB == 4) : NB == 4, "B's lane addresses");
#pragma unroll
    for (int kk = k0; kk < k1; ++kk) {
        uint32_t af[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            if constexpr (A_T)
                ldmatrix_x4_trans(af[mt], a[mt] + a_add + kk * 16 * LDA * ES);
            else
                ldmatrix_x4(af[mt], a[kk % 4] + a_add + (kk / 4) * 128 + mt * 16 * LDA * ES);
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt += 2) {
            uint32_t bf[4];
            if constexpr (B_T)
                ldmatrix_x4_trans(bf, b[(nt / 2) % NB] + b_add + ((nt / 2) / NB) * 128 + kk * 16 * LDB * ES);
            else
                ldmatrix_x4(bf, b[kk % 4] + b_add + (kk / 4) * 128 + nt * 8 * LDB * ES);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                Mma<T>::run(c[mt][nt], af[mt], bf[0], bf[1]);
                Mma<T>::run(c[mt][nt + 1], af[mt], bf[2], bf[3]);
            }
        }
    }
}

template <int MT, int NT>
__device__ __forceinline__ void zero_tiles(float (&c)[MT][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) c[mt][nt][0] = c[mt][nt][1] = c[mt][nt][2] = c[mt][nt][3] = 0.0f;
}

/* P^T = exp2(S^T log2(e) scale - LSE2) (0 where masked), dS^T = P^T (dP^T - D), both stored in
 * the dtype to the [BC][BR] tiles: the warp's S_KEYS keys (rows S_KEYS kg ..) x S_COLS queries
 * (columns q0 ..). key0: this thread's first key (row g of m16 tile 0); m0: the step's first query.
 * MASK: the step crosses the diagonal or an end (one uniform branch per step picks it, so that
 * the element loops carry no branches). */
template <typename T, int D, bool MASK>
__device__ __forceinline__ void softmax_grad(float (&s)[BwdConfig<D>::MT_S][BwdConfig<D>::NT_S][4],
                                             const float (&dp)[BwdConfig<D>::MT_S][BwdConfig<D>::NT_S][4],
                                             const float *lse2, const float *delta, T *sP, T *sdS, const BwdArgs &a,
                                             int kg, int q0, int key0, int m0, int Sq, int Sk, int g, int t) {
    using C = BwdConfig<D>;
    constexpr int NT = C::NT_S, BR = C::BR;
    const int offset = Sk - Sq;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        const float2 l2 = *reinterpret_cast<const float2 *>(lse2 + q0 + nt * 8 + 2 * t);
        const float2 dd = *reinterpret_cast<const float2 *>(delta + q0 + nt * 8 + 2 * t);
#pragma unroll
        for (int mt = 0; mt < C::MT_S; ++mt) {
            float pv[4], ds[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                pv[e] = exp2_approx(fmaf(s[mt][nt][e], a.scale_log2, -(e & 1 ? l2.y : l2.x)));
                if constexpr (MASK) {
                    const int key = key0 + 16 * mt + 8 * (e >> 1), qi = m0 + q0 + nt * 8 + 2 * t + (e & 1);
                    pv[e] = key >= Sk || qi >= Sq || (a.p.causal && key > qi + offset) ? 0.0f : pv[e];
                }
                ds[e] = pv[e] * (dp[mt][nt][e] - (e & 1 ? dd.y : dd.x));
            }
            const int row = C::S_KEYS * kg + 16 * mt + g, chunk = (q0 >> 3) + nt;
            *reinterpret_cast<uint32_t *>(sP + swz<BR>(row, chunk) + 2 * t) = Mma<T>::pack(pv[0], pv[1]);
            *reinterpret_cast<uint32_t *>(sP + swz<BR>(row + 8, chunk) + 2 * t) = Mma<T>::pack(pv[2], pv[3]);
            *reinterpret_cast<uint32_t *>(sdS + swz<BR>(row, chunk) + 2 * t) = Mma<T>::pack(ds[0], ds[1]);
            *reinterpret_cast<uint32_t *>(sdS + swz<BR>(row + 8, chunk) + 2 * t) = Mma<T>::pack(ds[2], ds[3]);
        }
    }
}

/* Block (x, KV head hk = blockIdx.y, sequence b = blockIdx.z): key blocks x, x + gridDim.x, ...
 * of the sequence (one when not deterministic: gridDim.x covers the longest). Per key block: K
 * and V to shared memory once; then every query step (head h of hk's group, BR query rows from
 * the first that sees one of the block's keys) double-buffered: S^T and dP^T in registers, P^T
 * and dS^T through shared memory to dV and dK (accumulated in registers) and to dQ's atomics;
 * at the end dK (times softmax_scale) and dV for the keys the sequence has. */
template <typename T, int D>
__global__ void __launch_bounds__(BwdConfig<D>::THREADS, BwdConfig<D>::MIN_BLOCKS) flash2_bwd_main(const BwdArgs a) {
    using C = BwdConfig<D>;
    constexpr int BC = C::BC, BR = C::BR, THREADS = C::THREADS, NT_S = C::NT_S, NT_KV = C::NT_KV, NT_Q = C::NT_Q;
    constexpr uint32_t STAGE_BYTES = BR * D * sizeof(T);
    extern __shared__ __align__(128) unsigned char smem[];
    T *sK = reinterpret_cast<T *>(smem + C::OFF_K), *sV = reinterpret_cast<T *>(smem + C::OFF_V);
    T *sQ = reinterpret_cast<T *>(smem + C::OFF_Q), *sdO = reinterpret_cast<T *>(smem + C::OFF_DO);
    T *sP = reinterpret_cast<T *>(smem + C::OFF_P), *sdS = reinterpret_cast<T *>(smem + C::OFF_DS);
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

    /* the warp's tiles: dK's and dV's (keys 32 kg .., columns KV_COLS sc ..), dQ's (queries
     * 32 qr .., columns Q_COLS qc ..) */
    const int kg = warp % C::KG, sc = warp / C::KG, qr = warp % C::Q_RG, qc = warp / C::Q_RG;
    const int skg = warp % C::S_KG, ssc = warp / C::S_KG; /* S^T's: keys S_KEYS skg .., queries S_COLS ssc .. */
    /* this lane's addresses (lane_chunks): K and V as S^T's and dP^T's A (V: K's + OFF_V - OFF_K);
     * Q and dO as their B (the warp's queries); P^T and dS^T as dV's and dK's A (the warp's keys);
     * dO and Q as their B (.trans, the warp's columns); dS^T as dQ's A and K as its B (.trans) */
    const uint32_t l7 = lane & 7, k_hi = (lane >> 3) & 1, hi16 = lane >> 4;
    const uint32_t row_a = l7 + 8 * k_hi, row_b = l7 + 8 * hi16;
    uint32_t kv_a[4], qd_b[4], pd_a[4], qd_bt[C::NT_KV / 2 < 4 ? C::NT_KV / 2 : 4], ds_at[2], k_bt[NT_Q / 2];
    lane_chunks(kv_a, smem_addr(sK + (C::S_KEYS * skg + row_a) * D), 0, hi16, l7);
    lane_chunks(qd_b, smem_addr(sQ + (C::S_COLS * ssc + row_b) * D), 0, k_hi, l7);
    lane_chunks(pd_a, smem_addr(sP + (32 * kg + row_a) * BR), 0, hi16, l7);
    lane_chunks(qd_bt, smem_addr(sQ + row_a * D), NT_KV >= 8 ? 0 : sc * NT_KV / 2, hi16, l7);
    const uint32_t qd_bt_add = NT_KV >= 8 ? sc * NT_KV / 8 * 128 : 0; /* the warp's columns, past the XOR */
    lane_chunks(ds_at, smem_addr(sdS + row_b * BR), 2 * qr, k_hi, l7);
    lane_chunks(k_bt, smem_addr(sK + row_a * D), qc * NT_Q / 2, hi16, l7);
    constexpr uint32_t V_K = C::OFF_V - C::OFF_K, DO_Q = C::OFF_DO - C::OFF_Q, DS_P = C::OFF_DS - C::OFF_P;

    /* a step's tiles into `stage`: BR rows of Q and dO of the step whose rows start at element
     * q_off of Q and do_off of dO and at ws_off of the workspace (rows past the sequence,
     * valid_rows on, zero-filled), and their LSE2 and D entries (0 past it: such rows are
     * masked). The offsets advance by a step at the step loop's head, never recomputed from
     * (head, query block). */
    auto load_step = [&](int stage, int64_t q_off, int64_t do_off, int64_t ws_off, int valid_rows) {
        load_rows<T, D, D / 8, BR, THREADS>(sQ + stage * BR * D, q_seq + q_off, p.q_row_stride, valid_rows);
        load_rows<T, D, D / 8, BR, THREADS>(sdO + stage * BR * D, do_seq + do_off, a.g.do_row_stride, valid_rows);
        const int x = threadIdx.x;
        if (x < 2 * BR) {
            const int r = x % BR;
            const bool valid = r < valid_rows;
            const float *src = (x < BR ? a.lse2 : a.delta) + ws_off + r;
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

        float acc_dk[2][NT_KV][4], acc_dv[2][NT_KV][4];
        zero_tiles(acc_dk);
        zero_tiles(acc_dv);

        __syncthreads(); /* every warp is done with the previous key block's tiles */
        if (steps > 0) {
            load_rows<T, D, D / 8, BC, THREADS>(sK, k_head + (int64_t)n0 * p.k_row_stride, p.k_row_stride, Sk - n0);
            load_rows<T, D, D / 8, BC, THREADS>(sV, v_head + (int64_t)n0 * p.v_row_stride, p.v_row_stride, Sk - n0);
        }
        /* the next step to load: query block qb (of head hk group, then the group's next heads),
         * its offsets in Q, dO and the workspace */
        int qb = qb_first;
        int64_t q_off = (int64_t)hk * group * p.q_head_stride + (int64_t)qb * BR * p.q_row_stride;
        int64_t do_off = (int64_t)hk * group * a.g.do_head_stride + (int64_t)qb * BR * a.g.do_row_stride;
        int64_t ws_off = q.ws_base + (int64_t)hk * group * q.ws_head + qb * BR;
        if (steps > 0) load_step(0, q_off, do_off, ws_off, Sq - qb * BR);
        cp_async_commit();
        /* from a step to the next: the next query block, or the first of the next head */
        const int64_t q_wrap = p.q_head_stride - (int64_t)(qb_end - qb_first - 1) * BR * p.q_row_stride;
        const int64_t do_wrap = a.g.do_head_stride - (int64_t)(qb_end - qb_first - 1) * BR * a.g.do_row_stride;
        const int64_t ws_wrap = q.ws_head - (int64_t)(qb_end - qb_first - 1) * BR;
        for (int it = 0; it < steps; ++it) {
            const int stage = it & 1, m0 = qb * BR;
            const int64_t ws_step = ws_off; /* this step's workspace rows: dQ's accumulator */
            if (++qb == qb_end)
                qb = qb_first, q_off += q_wrap, do_off += do_wrap, ws_off += ws_wrap;
            else
                q_off += BR * p.q_row_stride, do_off += BR * a.g.do_row_stride, ws_off += BR;
            flash2_ptx::cp_async_wait<0>();
            __syncthreads(); /* the step's tiles are in; every warp is done with the last step's
                              * stage, P^T and dS^T */
            if (it + 1 < steps) load_step(stage ^ 1, q_off, do_off, ws_off, Sq - qb * BR);
            cp_async_commit();

            {
                float s[C::MT_S][NT_S][4], dp[C::MT_S][NT_S][4];
                zero_tiles(s);
                zero_tiles(dp);
                const uint32_t sq = stage * STAGE_BYTES;
                mma_tiles<T, C::MT_S, NT_S, D / 16, false, D, false, D>(s, kv_a, 0, qd_b, sq);
                mma_tiles<T, C::MT_S, NT_S, D / 16, false, D, false, D>(dp, kv_a, V_K, qd_b, sq + DO_Q);
                const bool mask = n0 + BC > Sk || m0 + BR > Sq || (p.causal && n0 + BC - 1 > m0 + offset);
                if (mask)
                    softmax_grad<T, D, true>(s, dp, sLse + stage * BR, sDel + stage * BR, sP, sdS, a, skg,
                                             ssc * C::S_COLS, n0 + C::S_KEYS * skg + g, m0, Sq, Sk, g, t);
                else
                    softmax_grad<T, D, false>(s, dp, sLse + stage * BR, sDel + stage * BR, sP, sdS, a, skg,
                                              ssc * C::S_COLS, n0 + C::S_KEYS * skg + g, m0, Sq, Sk, g, t);
            }
            __syncthreads(); /* P^T and dS^T are whole */
            const uint32_t sq = stage * STAGE_BYTES;
            /* dV += P^T dO, dQ += dS K, dK += dS^T Q (dV and dK: the warp's 32 keys x KV_COLS
             * columns over the BR queries), in that order: dQ's reds go out between dK's k-steps,
             * a quarter at a time, so that the LSU takes each quarter's operands while dK's mma
             * run (all at once, the next instructions waited for them: NOTES_bwd.md, v4) */
            mma_tiles<T, 2, NT_KV, BR / 16, false, BR, true, D>(acc_dv, pd_a, 0, qd_bt, sq + qd_bt_add + DO_Q);
            {
                /* dQ += dS K: queries 32 qr .. + 31, columns Q_COLS qc .., over the BC keys */
                float dq[2][NT_Q][4];
                zero_tiles(dq);
                mma_tiles<T, 2, NT_Q, BC / 16, true, BR, true, D>(dq, ds_at, 0, k_bt, 0);
                /* rows 32 qr + 8 i .. + 7 (group i: m16 tile i / 2, half i % 2) x the warp's 32
                 * columns: two 16-byte reds per lane, n8 tiles 2 j and 2 j + 1 (dq_acc_index),
                 * every group from one address and immediates; a tail step adds only the groups
                 * that hold a row of the sequence (their other rows add zeros to padding) */
                float *dq_groups = dq_acc + (ws_step + 32 * qr) * D + qc * 256 + 4 * lane;
                auto add_group = [&](int i) {
#pragma unroll
                    for (int j = 0; j < 2; ++j)
                        atomic_add4(dq_groups + 8 * i * D + 128 * j, dq[i / 2][2 * j][2 * (i % 2)],
                                    dq[i / 2][2 * j][2 * (i % 2) + 1], dq[i / 2][2 * j + 1][2 * (i % 2)],
                                    dq[i / 2][2 * j + 1][2 * (i % 2) + 1]);
                };
                const bool whole = m0 + BR <= Sq;
                constexpr int KQ = BR / 16 / 4; /* dK's k-steps after each group of reds */
                static_assert(BR % 64 == 0, "dK's k-steps in four equal parts");
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    if (whole || 32 * qr + 8 * i < Sq - m0) add_group(i);
                    mma_tiles<T, 2, NT_KV, BR / 16, false, BR, true, D>(acc_dk, pd_a, DS_P, qd_bt, sq + qd_bt_add,
                                                                        KQ * i, KQ * (i + 1));
                }
            }
        }

        /* dK = softmax_scale dS^T Q, dV: the warp's keys that the sequence has */
        const float scale = p.softmax_scale;
        T *dk_head = const_cast<T *>(kv_base(a.g.dk, a.g.dk_batch_stride, a.g.dk_head_stride, a.g.dk_row_stride));
        T *dv_head = const_cast<T *>(kv_base(a.g.dv, a.g.dv_batch_stride, a.g.dv_head_stride, a.g.dv_row_stride));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int key = n0 + 32 * kg + 16 * mt + g + 8 * r;
                if (key >= Sk) continue;
                T *dk = dk_head + (int64_t)key * a.g.dk_row_stride + sc * C::KV_COLS + 2 * t;
                T *dv = dv_head + (int64_t)key * a.g.dv_row_stride + sc * C::KV_COLS + 2 * t;
#pragma unroll
                for (int nt = 0; nt < NT_KV; ++nt) {
                    *reinterpret_cast<uint32_t *>(dk + nt * 8) =
                        Mma<T>::pack(acc_dk[mt][nt][2 * r] * scale, acc_dk[mt][nt][2 * r + 1] * scale);
                    *reinterpret_cast<uint32_t *>(dv + nt * 8) =
                        Mma<T>::pack(acc_dv[mt][nt][2 * r], acc_dv[mt][nt][2 * r + 1]);
                }
            }
    }
}

}  // namespace

#endif
