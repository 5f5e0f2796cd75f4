/* libattn_broken, the backward pass (ABI version 5): deliberately broken backward kernels,
 * each one known bug in an otherwise correct backward; "broken_bwd_none" is the same
 * template with no bug, a control that must pass everything (so a failure of the others
 * comes from their bug, not from this copy).
 *
 * The algorithm is a private copy of kernels/simple's backward (kernel 1: one warp per query
 * row, D_i = dO_i . O_i and dQ_i; kernel 2: one warp per key row, dK_j and dV_j over the
 * group's query heads; float32; the mask, lengths and row split of kernels/common/
 * warp_row.cuh), templated on `int BUG`. A bug that needs another schedule reuses these two
 * kernels with a parameter: BUG_DQ_ATOMIC splits kernel 1's keys into tiles (`n_tiles`
 * warps a row), BUG_DK_RACE kernel 2's queries into two halves (two blocks a key row); each
 * then reduces through a float accumulator in the workspace, written out by
 * dq_from_acc_kernel / dkdv_from_acc_kernel. The forward of every kernel here is
 * broken_v2_none's (broken_v2.cu), which is correct and takes every ATTN_CAP_*; the
 * backward declares simple's bwd_caps (every feature but paged, ATTN_BWD_DETERMINISTIC).
 * Built into the attn_broken plugin only; broken.cu lists these after its other kernels.
 * To add a bug class: one enum value, one `if constexpr (BUG == ...)` hook, one line in
 * `table`, and one row in README.md. */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "attn_abi.h"
#include "warp_row.cuh"

extern "C" const attn_kernel *broken_v2_kernels(int *count); /* broken_v2.cu */

namespace {

enum {
    BUG_NONE = 0,              /* control: correct */
    BUG_DQ_TAIL_TILE,          /* dQ of the queries past a sequence's last multiple of 64 (its
                                  last partial 64-row tile) not written */
    BUG_GQA_FIRST_HEAD,        /* dK, dV from the first query head of the group only */
    BUG_VARLEN_NEIGHBOUR_KEYS, /* packed K: every sequence takes seqlen_k (the longest) keys
                                  from its start, into its neighbour's */
    BUG_D_IN_HALF,             /* D = rowsum(dO * O) with each product rounded to the dtype
                                  and summed in a dtype accumulator */
    BUG_SOFTCAP_DERIVATIVE,    /* the softcap's derivative 1 - (s / softcap)^2 forgotten */
    BUG_DQ_ATOMIC,             /* dQ summed with float atomicAdd by warps over key tiles, in
                                  whatever order they land, while declaring deterministic */
    BUG_DK_RACE,               /* dK, dV summed by two blocks a key row with plain load-add-
                                  store into one float accumulator: lost updates */
    BUG_WORKSPACE_NOT_ZEROED,  /* dQ accumulated in the workspace, never initialized */
    BUG_DK_PAST_END,           /* the last used key row's dK also written one row further */
    BUG_O_CLEARED,             /* O's row zeroed in the caller's buffer once D is taken */
    BUG_SCALE_IGNORED,         /* 1/sqrt(head_dim) instead of softmax_scale in dQ and dK */
    BUG_KEYLESS_DQ_UNWRITTEN,  /* a query row that sees no key leaves its dQ unwritten */
    BUG_SHARED_ROW_SUMS,       /* D_i = dO.O kept in a buffer made once and shared by every
                                  call, not in the caller's workspace */
    BUG_GRAD_ROWS_IN_VECTORS,  /* dQ, dK, dV rows written from their start rounded down to 16
                                  bytes (as int4 stores would): right where rows are aligned */
    BUG_POOL_LEFT_CURRENT,     /* its own memory pool made the device's current one, never put back */
    BUG_CALL_IN_GLOBALS,       /* the call's parameters and stream kept in globals until its launch */
};

constexpr int kWarpsPerBlock = 4; /* rows per block */
constexpr int kErr = 2;           /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */
constexpr int kKeyTile = 16;      /* BUG_DQ_ATOMIC: keys per warp (a row's tiles: its atomics) */

using namespace warp_row;

/* A gradient's row pointer; BUG_GRAD_ROWS_IN_VECTORS: rounded down to 16 bytes (taken as aligned). */
template <int BUG, typename T> __device__ __forceinline__ T *grad_row(T *row) {
    if constexpr (BUG == BUG_GRAD_ROWS_IN_VECTORS) return (T *)((uintptr_t)row & ~(uintptr_t)15); /* BUG */
    return row;
}

/* used_keys with BUG_VARLEN_NEIGHBOUR_KEYS's hook. */
template <int BUG>
__device__ __forceinline__ int keys_of(const attn_fwd_params &p, int b) {
    if constexpr (BUG == BUG_VARLEN_NEIGHBOUR_KEYS) /* BUG: the longest sequence's length */
        return used_keys(nullptr, p.seqused_k, b, p.seqlen_k);
    return used_keys(p.cu_seqlens_k, p.seqused_k, b, p.seqlen_k);
}

/* The factor of dQ and dK (P is always from softmax_scale: the LSE is the caller's). */
template <int BUG>
__device__ __forceinline__ float grad_scale(const attn_fwd_params &p) {
    return BUG == BUG_SCALE_IGNORED ? rsqrtf((float)p.head_dim) : p.softmax_scale; /* BUG: 1/sqrt(d) */
}

/* The score after the softcap, and the softcap's derivative in *dcap. */
template <int BUG>
__device__ __forceinline__ float capped(float s, float softcap, float *dcap) {
    *dcap = 1.f;
    if (softcap > 0.f) {
        s = softcap * tanhf(s / softcap);
        if constexpr (BUG != BUG_SOFTCAP_DERIVATIVE) /* BUG: the derivative stays 1 */
            *dcap = 1.f - (s / softcap) * (s / softcap);
    }
    return s;
}

/* BUG_D_IN_HALF: D_i as a naive dtype kernel sums it: each product rounded to T and added to
 * a T accumulator, column after column (lane 0), then given to the whole warp. */
template <typename T>
__device__ float d_in_dtype(const T *o, const T *dout, int Dv, int lane) {
    float d = 0.f;
    if (lane == 0) {
        T acc = from_float<T>(0.f);
        for (int c = 0; c < Dv; ++c)
            acc = from_float<T>(to_float(acc) + to_float(from_float<T>(to_float(dout[c]) * to_float(o[c]))));
        d = to_float(acc);
    }
    return __shfl_sync(0xffffffffu, d, 0);
}

/* Kernel 1, as simple_bwd_dq_kernel: warp w takes query row w / n_tiles (n_tiles is 1 but for
 * BUG_DQ_ATOMIC, whose warp takes the row's keys of tile w % n_tiles). ws: D_i at [row] of
 * [batch][heads][seqlen_q], then (BUG_DQ_ATOMIC, BUG_WORKSPACE_NOT_ZEROED) a float dQ
 * accumulator [row][head_dim]. g.fwd is NULL (a host pointer): the device reads p. */
template <typename T, int E, int BUG>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
bwd_dq_kernel(const attn_fwd_params p, const attn_bwd_params g, const int group, float *ws, const int n_tiles) {
    const int D = p.head_dim, Dv = p.head_dim_v;
    const int lane = threadIdx.x & 31;
    const int64_t warp_id = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads * p.seqlen_q;
    if (warp_id >= n_rows * n_tiles) return;
    const int64_t row = warp_id / n_tiles;
    const int tile = (int)(warp_id % n_tiles);
    int b, h, i;
    split_row(row, n_rows, p.seqlen_q, p.heads, &b, &h, &i);
    const int kh = h / group;
    const int sq = seq_len(p.cu_seqlens_q, b, p.seqlen_q);
    if (i >= sq) return;
    const int sk = keys_of<BUG>(p, b);
    int64_t lo, hi;
    visible_keys(i, sq, sk, p.window_left, p.window_right, p.causal, &lo, &hi);
    const bool any = hi >= lo; /* the row sees a key */
    if constexpr (BUG == BUG_DQ_ATOMIC) { /* this warp's tile of the visible keys */
        lo = lo > (int64_t)tile * kKeyTile ? lo : (int64_t)tile * kKeyTile;
        hi = hi < (int64_t)tile * kKeyTile + kKeyTile - 1 ? hi : (int64_t)tile * kKeyTile + kKeyTile - 1;
    }

    const T *q = (const T *)p.q + row_offset(p.cu_seqlens_q, b, h, i, p.q_batch_stride, p.q_head_stride,
                                             p.q_row_stride);
    const T *o = (const T *)p.o + row_offset(p.cu_seqlens_q, b, h, i, p.o_batch_stride, p.o_head_stride,
                                             p.o_row_stride);
    const T *dout = (const T *)g.dout + row_offset(p.cu_seqlens_q, b, h, i, g.do_batch_stride,
                                                   g.do_head_stride, g.do_row_stride);
    T *dq = grad_row<BUG>((T *)g.dq + row_offset(p.cu_seqlens_q, b, h, i, g.dq_batch_stride, g.dq_head_stride,
                                                 g.dq_row_stride));
    const T *k = (const T *)p.k + row_offset(p.cu_seqlens_k, b, kh, 0, p.k_batch_stride, p.k_head_stride,
                                             p.k_row_stride);
    const T *v = (const T *)p.v + row_offset(p.cu_seqlens_k, b, kh, 0, p.v_batch_stride, p.v_head_stride,
                                             p.v_row_stride);
    float *dq_acc = ws + n_rows + row * D; /* BUG_DQ_ATOMIC, BUG_WORKSPACE_NOT_ZEROED */

    float qf[E], dof[E], acc[E], d_i = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = e * 32 + lane;
        qf[e] = c < D ? to_float(q[c]) : 0.f;
        dof[e] = c < Dv ? to_float(dout[c]) : 0.f;
        if (c < Dv) d_i += dof[e] * to_float(o[c]);
        acc[e] = 0.f;
        if constexpr (BUG == BUG_WORKSPACE_NOT_ZEROED) /* BUG: the workspace taken as zeros */
            if (c < D) acc[e] = dq_acc[c];
    }
    d_i = warp_sum(d_i);
    if constexpr (BUG == BUG_D_IN_HALF) d_i = d_in_dtype<T>(o, dout, Dv, lane); /* BUG */
    if constexpr (BUG == BUG_O_CLEARED) /* BUG: O "consumed", cleared in the caller's buffer */
#pragma unroll
        for (int e = 0; e < E; ++e) /* each lane its own columns, read above */
            if (e * 32 + lane < Dv) const_cast<T *>(o)[e * 32 + lane] = from_float<T>(0.f);
    if (tile == 0 && lane == 0) ws[row] = d_i;
    if constexpr (BUG == BUG_KEYLESS_DQ_UNWRITTEN)
        if (!any) return; /* BUG: "nothing to do" */
    const float lse = p.lse[lse_index(p.cu_seqlens_q, p.batch, b, h, i, row)];

    for (int64_t j = lo; j <= hi; ++j) {
        const T *kj = k + j * p.k_row_stride, *vj = v + j * p.v_row_stride;
        float s = 0.f, dp = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const int c = e * 32 + lane;
            if (c < D) s += qf[e] * to_float(kj[c]);
            if (c < Dv) dp += dof[e] * to_float(vj[c]);
        }
        float dcap;
        s = capped<BUG>(warp_sum(s) * p.softmax_scale, p.softcap, &dcap);
        dp = warp_sum(dp);
        const float ds = expf(s - lse) * (dp - d_i) * dcap;
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (e * 32 + lane < D) acc[e] += ds * to_float(kj[e * 32 + lane]);
    }
    if constexpr (BUG == BUG_DQ_ATOMIC) { /* BUG: the tiles' sums land in any order */
        if (hi >= lo)
#pragma unroll
            for (int e = 0; e < E; ++e)
                if (e * 32 + lane < D) atomicAdd(&dq_acc[e * 32 + lane], acc[e]);
        return; /* dq_from_acc_kernel writes dQ */
    }
    if constexpr (BUG == BUG_WORKSPACE_NOT_ZEROED) /* the accumulator lives in the workspace */
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (e * 32 + lane < D) dq_acc[e * 32 + lane] = acc[e];
    if constexpr (BUG == BUG_DQ_TAIL_TILE) /* BUG: the last partial 64-query tile */
        if (sq % 64 && i >= sq / 64 * 64) return;
    const float scale = grad_scale<BUG>(p);
#pragma unroll
    for (int e = 0; e < E; ++e)
        if (e * 32 + lane < D) dq[e * 32 + lane] = from_float<T>(any ? acc[e] * scale : 0.f);
}

/* BUG_DQ_ATOMIC's epilogue: one warp per query row, dQ from the float accumulator. */
template <typename T, int E>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
dq_from_acc_kernel(const attn_fwd_params p, const attn_bwd_params g, const float *ws) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads * p.seqlen_q;
    if (row >= n_rows) return;
    int b, h, i;
    split_row(row, n_rows, p.seqlen_q, p.heads, &b, &h, &i);
    if (i >= seq_len(p.cu_seqlens_q, b, p.seqlen_q)) return;
    T *dq = (T *)g.dq + row_offset(p.cu_seqlens_q, b, h, i, g.dq_batch_stride, g.dq_head_stride,
                                   g.dq_row_stride);
    const float *acc = ws + n_rows + row * p.head_dim; /* 0 for a row that sees no key */
#pragma unroll
    for (int e = 0; e < E; ++e)
        if (e * 32 + lane < p.head_dim) dq[e * 32 + lane] = from_float<T>(acc[e * 32 + lane] * p.softmax_scale);
}

/* Kernel 2, as simple_bwd_dkdv_kernel: one warp per key row. BUG_DK_RACE: two blocks a key
 * row (blocks 2n and 2n + 1 take the same 4 rows, the even and the odd queries), each adding
 * every query's term into the float accumulators of ws with a plain load-add-store. */
template <typename T, int E, int BUG>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
bwd_dkdv_kernel(const attn_fwd_params p, const attn_bwd_params g, const int group, float *ws) {
    const int D = p.head_dim, Dv = p.head_dim_v;
    const int lane = threadIdx.x & 31;
    const int half = BUG == BUG_DK_RACE ? (int)(blockIdx.x & 1) : 0;   /* its queries: i = half mod 2 */
    const int64_t block = BUG == BUG_DK_RACE ? blockIdx.x >> 1 : blockIdx.x;
    const int64_t row = block * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads_k * p.seqlen_k;
    if (row >= n_rows) return;
    int b, kh, j;
    split_row(row, n_rows, p.seqlen_k, p.heads_k, &b, &kh, &j);
    const int sk = keys_of<BUG>(p, b);
    if (j >= sk) return;
    const int sq = seq_len(p.cu_seqlens_q, b, p.seqlen_q);
    int64_t lo, hi;
    seeing_queries(j, sq, sk, p.window_left, p.window_right, p.causal, &lo, &hi);

    const T *kj = (const T *)p.k + row_offset(p.cu_seqlens_k, b, kh, j, p.k_batch_stride, p.k_head_stride,
                                              p.k_row_stride);
    const T *vj = (const T *)p.v + row_offset(p.cu_seqlens_k, b, kh, j, p.v_batch_stride, p.v_head_stride,
                                              p.v_row_stride);
    T *dk = grad_row<BUG>((T *)g.dk + row_offset(p.cu_seqlens_k, b, kh, j, g.dk_batch_stride, g.dk_head_stride,
                                                 g.dk_row_stride));
    T *dv = grad_row<BUG>((T *)g.dv + row_offset(p.cu_seqlens_k, b, kh, j, g.dv_batch_stride, g.dv_head_stride,
                                                 g.dv_row_stride));
    const int64_t rows_q = (int64_t)p.batch * p.heads * p.seqlen_q;
    /* BUG_DK_RACE's accumulators, volatile: every term a load and a store of global memory */
    volatile float *dk_acc = ws + rows_q + row * D, *dv_acc = ws + rows_q + n_rows * D + row * Dv;

    float kf[E], vf[E], dkf[E], dvf[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = e * 32 + lane;
        kf[e] = c < D ? to_float(kj[c]) : 0.f;
        vf[e] = c < Dv ? to_float(vj[c]) : 0.f;
        dkf[e] = dvf[e] = 0.f;
    }

    const int heads_end = BUG == BUG_GQA_FIRST_HEAD ? kh * group + 1 : (kh + 1) * group; /* BUG: one head */
    for (int h = kh * group; h < heads_end; ++h) {
        const int64_t row0 = ((int64_t)b * p.heads + h) * p.seqlen_q;
        for (int64_t i = lo + half; i <= hi; i += BUG == BUG_DK_RACE ? 2 : 1) {
            const T *qi = (const T *)p.q + row_offset(p.cu_seqlens_q, b, h, i, p.q_batch_stride,
                                                      p.q_head_stride, p.q_row_stride);
            const T *doi = (const T *)g.dout + row_offset(p.cu_seqlens_q, b, h, i, g.do_batch_stride,
                                                          g.do_head_stride, g.do_row_stride);
            float qf[E], dof[E], s = 0.f, dp = 0.f;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                const int c = e * 32 + lane;
                qf[e] = c < D ? to_float(qi[c]) : 0.f;
                dof[e] = c < Dv ? to_float(doi[c]) : 0.f;
                s += qf[e] * kf[e];
                dp += dof[e] * vf[e];
            }
            float dcap;
            s = capped<BUG>(warp_sum(s) * p.softmax_scale, p.softcap, &dcap);
            dp = warp_sum(dp);
            const float pij = expf(s - p.lse[lse_index(p.cu_seqlens_q, p.batch, b, h, (int)i, row0 + i)]);
            const float ds = pij * (dp - ws[row0 + i]) * dcap;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                const int c = e * 32 + lane;
                if constexpr (BUG == BUG_DK_RACE) { /* BUG: read-modify-write, no atomics */
                    if (c < D) dk_acc[c] = dk_acc[c] + ds * qf[e];
                    if (c < Dv) dv_acc[c] = dv_acc[c] + pij * dof[e];
                } else {
                    dkf[e] += ds * qf[e];
                    dvf[e] += pij * dof[e];
                }
            }
        }
    }
    if constexpr (BUG == BUG_DK_RACE) return; /* dkdv_from_acc_kernel writes dK and dV */
    const bool seen = hi >= lo;
    const float scale = grad_scale<BUG>(p);
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = e * 32 + lane;
        if (c < D) dk[c] = from_float<T>(seen ? dkf[e] * scale : 0.f);
        if (c < Dv) dv[c] = from_float<T>(seen ? dvf[e] : 0.f);
        if constexpr (BUG == BUG_DK_PAST_END) /* BUG: one row further too */
            if (j == sk - 1 && c < D) dk[g.dk_row_stride + c] = from_float<T>(seen ? dkf[e] * scale : 0.f);
    }
}

/* BUG_DK_RACE's epilogue: one warp per key row, dK and dV from the float accumulators. */
template <typename T, int E>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
dkdv_from_acc_kernel(const attn_fwd_params p, const attn_bwd_params g, const float *ws) {
    const int D = p.head_dim, Dv = p.head_dim_v;
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads_k * p.seqlen_k;
    if (row >= n_rows) return;
    int b, kh, j;
    split_row(row, n_rows, p.seqlen_k, p.heads_k, &b, &kh, &j);
    if (j >= used_keys(p.cu_seqlens_k, p.seqused_k, b, p.seqlen_k)) return;
    T *dk = (T *)g.dk + row_offset(p.cu_seqlens_k, b, kh, j, g.dk_batch_stride, g.dk_head_stride,
                                   g.dk_row_stride);
    T *dv = (T *)g.dv + row_offset(p.cu_seqlens_k, b, kh, j, g.dv_batch_stride, g.dv_head_stride,
                                   g.dv_row_stride);
    const int64_t rows_q = (int64_t)p.batch * p.heads * p.seqlen_q;
    const float *dk_acc = ws + rows_q + row * D, *dv_acc = ws + rows_q + n_rows * D + row * Dv;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = e * 32 + lane;
        if (c < D) dk[c] = from_float<T>(dk_acc[c] * p.softmax_scale);
        if (c < Dv) dv[c] = from_float<T>(dv_acc[c]);
    }
}

/* The workspace: D_i (a float per row of [batch][heads][seqlen_q]), then the accumulators
 * of the bugs that use them. */
template <int BUG>
size_t broken_bwd_workspace(const attn_bwd_params *bp) {
    if (bp == nullptr || bp->fwd == nullptr) return 0;
    const attn_fwd_params &p = *bp->fwd;
    if (p.batch < 1 || p.heads < 1 || p.heads_k < 1 || p.seqlen_q < 1 || p.seqlen_k < 0 || p.head_dim < 1)
        return 0; /* invalid: broken_bwd refuses it */
    const size_t rows_q = (size_t)p.batch * p.heads * p.seqlen_q, rows_k = (size_t)p.batch * p.heads_k * p.seqlen_k;
    const size_t D = (size_t)p.head_dim, Dv = (size_t)(p.head_dim_v > 0 ? p.head_dim_v : p.head_dim);
    size_t floats = rows_q;
    if (BUG == BUG_DQ_ATOMIC || BUG == BUG_WORKSPACE_NOT_ZEROED) floats += rows_q * D;
    if (BUG == BUG_DK_RACE) floats += rows_k * (D + Dv);
    return floats * sizeof(float);
}

template <typename T, int E, int BUG>
int launch(const attn_fwd_params *p, const attn_bwd_params *g, cudaStream_t stream) {
    const int64_t rows_q = (int64_t)p->batch * p->heads * p->seqlen_q;
    const int64_t rows_k = (int64_t)p->batch * p->heads_k * p->seqlen_k;
    const int n_tiles = BUG == BUG_DQ_ATOMIC ? (p->seqlen_k + kKeyTile - 1) / kKeyTile + (p->seqlen_k == 0) : 1;
    const int64_t blocks_q = (rows_q + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int64_t blocks_k = (rows_k + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int64_t blocks_1 = (rows_q * n_tiles + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int64_t blocks_2 = blocks_k * (BUG == BUG_DK_RACE ? 2 : 1);
    if (blocks_1 > 0x7fffffff || blocks_2 > 0x7fffffff) return ATTN_UNSUPPORTED;
    const int group = p->heads / p->heads_k, D = p->head_dim, Dv = p->head_dim_v;
    float *ws = (float *)g->workspace;
    if constexpr (BUG == BUG_POOL_LEFT_CURRENT) {
        /* BUG: a pool of its own (to keep its scratch between calls) made the device's current
         * pool at the first call and left so: the caller's cudaMallocAsync now takes from it.
         * The gradients are right. */
        static cudaMemPool_t own;
        int dev = 0;
        if (own == nullptr) {
            cudaMemPoolProps props = {};
            props.allocType = cudaMemAllocationTypePinned;
            props.location.type = cudaMemLocationTypeDevice;
            if (cudaGetDevice(&dev) != cudaSuccess) return kErr;
            props.location.id = dev;
            if (cudaMemPoolCreate(&own, &props) != cudaSuccess) return kErr;
        }
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceSetMemPool(dev, own) != cudaSuccess) return kErr;
    }
    if constexpr (BUG == BUG_SHARED_ROW_SUMS) {
        /* BUG: the row sums D_i (kernel 1 writes them, kernel 2 reads them) in a buffer made at
         * the first call and grown when a call needs more, as a plan's scratch often is: right
         * for calls one after another, on any stream and under capture, but two calls at once
         * on two streams read each other's */
        static float *shared;
        static size_t shared_rows;
        if ((size_t)rows_q > shared_rows) {
            if (shared) cudaFree(shared);
            shared = nullptr, shared_rows = 0;
            if (cudaMalloc((void **)&shared, (size_t)rows_q * sizeof(float)) != cudaSuccess) return kErr;
            shared_rows = (size_t)rows_q;
        }
        ws = shared;
    }
    constexpr unsigned kThreads = kWarpsPerBlock * 32;
    if (BUG == BUG_DQ_ATOMIC && rows_q > 0 && /* the accumulator zeroed, as it must be */
        cudaMemsetAsync(ws + rows_q, 0, (size_t)rows_q * D * sizeof(float), stream) != cudaSuccess)
        return kErr;
    if (BUG == BUG_DK_RACE && rows_k > 0 &&
        cudaMemsetAsync(ws + rows_q, 0, (size_t)rows_k * (D + Dv) * sizeof(float), stream) != cudaSuccess)
        return kErr;
    if (blocks_1 > 0) bwd_dq_kernel<T, E, BUG><<<(unsigned)blocks_1, kThreads, 0, stream>>>(*p, *g, group, ws, n_tiles);
    if (BUG == BUG_DQ_ATOMIC && blocks_q > 0)
        dq_from_acc_kernel<T, E><<<(unsigned)blocks_q, kThreads, 0, stream>>>(*p, *g, ws);
    if (blocks_2 > 0) bwd_dkdv_kernel<T, E, BUG><<<(unsigned)blocks_2, kThreads, 0, stream>>>(*p, *g, group, ws);
    if (BUG == BUG_DK_RACE && blocks_k > 0)
        dkdv_from_acc_kernel<T, E><<<(unsigned)blocks_k, kThreads, 0, stream>>>(*p, *g, ws);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

/* E = ceil(max(D, Dv) / 32) rounded up to a power of two. */
template <typename T, int BUG>
int launch_for_dims(const attn_fwd_params *p, const attn_bwd_params *g, cudaStream_t stream) {
    const int chunks = ((p->head_dim > p->head_dim_v ? p->head_dim : p->head_dim_v) + 31) / 32;
    return chunks <= 1 ? launch<T, 1, BUG>(p, g, stream)
         : chunks <= 2 ? launch<T, 2, BUG>(p, g, stream)
         : chunks <= 4 ? launch<T, 4, BUG>(p, g, stream)
                       : launch<T, 8, BUG>(p, g, stream);
}

/* The checks of simple_bwd that keep these kernels in bounds (the harness gives them only
 * valid problems: attn_bwd_problem_check). */
template <int BUG>
int broken_bwd(const attn_bwd_params *in, cudaStream_t stream) {
    if (in == nullptr || in->fwd == nullptr) return kErr;
    attn_fwd_params p = *in->fwd;
    attn_bwd_params g = *in;
    g.fwd = nullptr; /* host memory: the kernels read p */
    if (p.dtype != ATTN_F16 && p.dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if (p.head_dim_v == 0) p.head_dim_v = p.head_dim;
    if (p.batch < 1 || p.heads < 1 || p.seqlen_q < 0 || p.seqlen_k < 0 || p.head_dim < 1 || p.head_dim_v < 1 ||
        p.heads_k < 1 || p.heads % p.heads_k != 0)
        return kErr;
    if (!p.q || !p.k || !p.v || !p.o || !p.lse || !g.dout || !g.dq || !g.dk || !g.dv) return kErr;
    if (p.block_table != nullptr) return kErr; /* paged: no backward in ABI version 5 */
    if (g.workspace_bytes < broken_bwd_workspace<BUG>(in) || (g.workspace_bytes > 0 && g.workspace == nullptr))
        return kErr;
    if (p.head_dim > 256 || p.head_dim_v > 256) return ATTN_UNSUPPORTED;
    if constexpr (BUG == BUG_CALL_IN_GLOBALS) {
        /* BUG: the call in flight kept in globals, as a C wrapper's static context, then a
         * configuration look-up (a 200 us sleep stands for it) before launching from them: right
         * from one thread; a second thread's call in between takes over its parameters and stream */
        static attn_fwd_params in_flight;
        static attn_bwd_params in_flight_g;
        static cudaStream_t in_flight_stream;
        in_flight = p, in_flight_g = g, in_flight_stream = stream;
        usleep(200);
        return in_flight.dtype == ATTN_BF16
                   ? launch_for_dims<__nv_bfloat16, BUG>(&in_flight, &in_flight_g, in_flight_stream)
                   : launch_for_dims<__half, BUG>(&in_flight, &in_flight_g, in_flight_stream);
    }
    return p.dtype == ATTN_BF16 ? launch_for_dims<__nv_bfloat16, BUG>(&p, &g, stream)
                                : launch_for_dims<__half, BUG>(&p, &g, stream);
}

/* The forward of every kernel here: broken_v2_none's (correct, every ATTN_CAP_*). */
int control_fwd(const attn_fwd_params *p, cudaStream_t stream) {
    int n = 0;
    const attn_kernel *v2 = broken_v2_kernels(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(v2[i].name, "broken_v2_none") == 0) return v2[i].fwd(p, stream);
    return kErr;
}

constexpr uint32_t kFwdCaps = ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V |
                              ATTN_CAP_VARLEN | ATTN_CAP_PAGED | ATTN_CAP_SEQUSED_K;
/* simple's: every feature but paged, and deterministic (which BUG_DQ_ATOMIC claims falsely) */
constexpr uint32_t kBwdCaps = ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V |
                              ATTN_CAP_VARLEN | ATTN_CAP_SEQUSED_K | ATTN_BWD_DETERMINISTIC;

#define BROKEN_BWD(name, bug) \
    { name, control_fwd, kFwdCaps, 0, nullptr, nullptr, broken_bwd<bug>, broken_bwd_workspace<bug>, kBwdCaps }

/* fp16 and bf16, any head dim up to 256 (and any pair), as simple */
const attn_kernel table[] = {
    BROKEN_BWD("broken_bwd_none", BUG_NONE),
    BROKEN_BWD("broken_bwd_dq_tail_tile", BUG_DQ_TAIL_TILE),
    BROKEN_BWD("broken_bwd_gqa_first_head", BUG_GQA_FIRST_HEAD),
    BROKEN_BWD("broken_bwd_varlen_neighbour_keys", BUG_VARLEN_NEIGHBOUR_KEYS),
    BROKEN_BWD("broken_bwd_d_in_half", BUG_D_IN_HALF),
    BROKEN_BWD("broken_bwd_softcap_derivative", BUG_SOFTCAP_DERIVATIVE),
    BROKEN_BWD("broken_bwd_dq_atomic", BUG_DQ_ATOMIC),
    BROKEN_BWD("broken_bwd_dk_race", BUG_DK_RACE),
    BROKEN_BWD("broken_bwd_workspace_not_zeroed", BUG_WORKSPACE_NOT_ZEROED),
    BROKEN_BWD("broken_bwd_dk_past_end", BUG_DK_PAST_END),
    BROKEN_BWD("broken_bwd_o_cleared", BUG_O_CLEARED),
    BROKEN_BWD("broken_bwd_scale_ignored", BUG_SCALE_IGNORED),
    BROKEN_BWD("broken_bwd_keyless_dq_unwritten", BUG_KEYLESS_DQ_UNWRITTEN),
    BROKEN_BWD("broken_bwd_shared_row_sums", BUG_SHARED_ROW_SUMS),
    BROKEN_BWD("broken_bwd_grad_rows_in_vectors", BUG_GRAD_ROWS_IN_VECTORS),
    BROKEN_BWD("broken_bwd_pool_left_current", BUG_POOL_LEFT_CURRENT),
    BROKEN_BWD("broken_bwd_call_in_globals", BUG_CALL_IN_GLOBALS),
};
#undef BROKEN_BWD

} // namespace

/* For broken.cu, which lists these after its other kernels (the plugin's one table). */
static_assert(sizeof table / sizeof table[0] <= 32, "broken.cu's combined table holds 32 of these");
extern "C" const attn_kernel *broken_bwd_kernels(int *count) {
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}
