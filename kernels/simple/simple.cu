/* "simple": the harness's built-in correctness floor, not a fast kernel.
 *
 * Forward: one warp computes one (batch, head, query row) with a plain online softmax in
 * float32, one key at a time. It takes every forward problem of the ABI (every ATTN_CAP_*,
 * fp16 and bf16, head dims up to 256, any pair of them). Backward (ABI version 5): one warp
 * per query row for dQ (and D = rowsum(dO * O)), then one warp per key row for dK and dV,
 * every feature but paged K/V, deterministic. Both are written to be checked line by line
 * against attn_abi.h, an invalid problem an error (kErr) before any launch: when "simple"
 * disagrees with the reference, suspect the reference or the harness first. See NOTES.md. */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "attn_abi.h"
#include "warp_row.cuh"

namespace {

constexpr int kWarpsPerBlock = 4; /* query rows per block */
constexpr int kErr = 2;           /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */

using namespace warp_row;

/* One warp per query row: row = (b * heads + h) * seqlen_q + i over the padded
 * [batch][heads][seqlen_q]. p.heads_k and p.head_dim_v are resolved (never 0). Lane t owns
 * columns c = e * 32 + t (e < E) of q and of the float32 output accumulator, in registers,
 * so each load instruction of the warp reads 32 consecutive elements. Columns past D (q, k)
 * or Dv (v, o) are skipped. Plain (D == Dv == 32 E, no pages, no softcap: version 1's
 * problems with any mask, GQA or lengths) only removes what is then dead (the guards, page
 * lookups and softcap), so that those run version 1's loop at its register count. */
template <typename T, int E, bool Plain>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
simple_fwd_kernel(const attn_fwd_params p, const int group) {
    const int D = p.head_dim, Dv = p.head_dim_v;
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads * p.seqlen_q;
    if (row >= n_rows) return; /* whole warp leaves together */
    int b, h, i; /* (b, h, i) of the row */
    split_row(row, n_rows, p.seqlen_q, p.heads, &b, &h, &i);
    const int kh = group == 1 ? h : h / group; /* KV head; group = heads / heads_k */

    /* This sequence's lengths: seqlen_q/seqlen_k are the maxima under varlen. (sq is
     * seq_len(p.cu_seqlens_q, b, p.seqlen_q) written out: through the helper ptxas gives the
     * Plain d128 instance 44 registers instead of 40, a block less per SM.) */
    const int sq = p.cu_seqlens_q ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
    if (i >= sq) return; /* padding row of a shorter sequence: not written */
    const int sk = used_keys(p.cu_seqlens_k, p.seqused_k, b, p.seqlen_k); /* the used keys */
    int64_t lo, hi; /* the visible keys lo..hi (hi < lo: none) */
    visible_keys(i, sq, sk, p.window_left, p.window_right, p.causal, &lo, &hi);

    const T *q = (const T *)p.q + row_offset(p.cu_seqlens_q, b, h, i, p.q_batch_stride,
                                             p.q_head_stride, p.q_row_stride);
    T *o = (T *)p.o + row_offset(p.cu_seqlens_q, b, h, i, p.o_batch_stride, p.o_head_stride,
                                 p.o_row_stride);
    /* K and V rows of KV head kh start at this sequence's row 0, or at the pool (paged). */
    const int32_t *pages = !Plain && p.block_table
        ? p.block_table + (int64_t)b * p.block_table_stride : nullptr; /* this sequence's row */
    const T *k = (const T *)p.k + (pages ? kh * p.k_head_stride
                                         : row_offset(p.cu_seqlens_k, b, kh, 0, p.k_batch_stride,
                                                      p.k_head_stride, p.k_row_stride));
    const T *v = (const T *)p.v + (pages ? kh * p.v_head_stride
                                         : row_offset(p.cu_seqlens_k, b, kh, 0, p.v_batch_stride,
                                                      p.v_head_stride, p.v_row_stride));

    float qf[E], acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        qf[e] = Plain || e * 32 + lane < D ? to_float(q[e * 32 + lane]) : 0.f;
        acc[e] = 0.f;
    }

    /* Online softmax: m = max score so far, l = sum exp(s - m), acc = sum exp(s - m) * v. */
    float m = -INFINITY, l = 0.f;
    for (int64_t j = lo; j <= hi; ++j) {
        const T *kj = k + kv_row(pages, p.page_size, j, p.k_batch_stride, p.k_row_stride);
        const T *vj = v + kv_row(pages, p.page_size, j, p.v_batch_stride, p.v_row_stride);
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (Plain || e * 32 + lane < D) s += qf[e] * to_float(kj[e * 32 + lane]);
        s = warp_sum(s) * p.softmax_scale;
        if (!Plain && p.softcap > 0.f) s = p.softcap * tanhf(s / p.softcap); /* before the mask */

        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new); /* 0 on the first key (m = -inf) */
        const float pj = expf(s - m_new);
        l = l * corr + pj;
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (Plain || e * 32 + lane < Dv)
                acc[e] = acc[e] * corr + pj * to_float(vj[e * 32 + lane]);
        m = m_new;
    }

    /* A row that sees no key writes O = 0 and LSE = -inf. */
    const bool any = hi >= lo;
#pragma unroll
    for (int e = 0; e < E; ++e)
        if (Plain || e * 32 + lane < Dv) o[e * 32 + lane] = from_float<T>(any ? acc[e] / l : 0.f);
    if (p.lse != nullptr && lane == 0) /* [batch][heads][seqlen_q], or [heads][total_q] when packed */
        p.lse[lse_index(p.cu_seqlens_q, p.batch, b, h, i, row)] = any ? m + logf(l) : -INFINITY;
}

template <typename T, int E, bool Plain>
int launch(const attn_fwd_params *p, cudaStream_t stream) {
    /* grid x only (y and z stop at 65535); 2^31 - 1 blocks are 8.6e9 rows, beyond memory */
    const int64_t n_rows = (int64_t)p->batch * p->heads * p->seqlen_q;
    const int64_t n_blocks = (n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (n_blocks == 0) return ATTN_OK;
    if (n_blocks > 0x7fffffff) return ATTN_UNSUPPORTED;
    simple_fwd_kernel<T, E, Plain><<<(unsigned)n_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p, p->heads / p->heads_k);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

/* E = ceil(max(D, Dv) / 32) rounded up to a power of two (the guards make that harmless). */
template <typename T>
int launch_for_dims(const attn_fwd_params *p, cudaStream_t stream) {
    const int D = p->head_dim, Dv = p->head_dim_v;
    const bool plain = D == Dv && !p->block_table && !(p->softcap > 0.f);
    if (plain && D == 64) return launch<T, 2, true>(p, stream);
    if (plain && D == 128) return launch<T, 4, true>(p, stream);
    const int chunks = ((D > Dv ? D : Dv) + 31) / 32;
    return chunks <= 1 ? launch<T, 1, false>(p, stream)
         : chunks <= 2 ? launch<T, 2, false>(p, stream)
         : chunks <= 4 ? launch<T, 4, false>(p, stream)
                       : launch<T, 8, false>(p, stream);
}

/* ---- The backward pass (ABI version 5), in two kernels, each output row written once by one
 * warp (no atomics: deterministic). With the given LSE (natural log) and s_ij the score after
 * the softcap: P_ij = exp(s_ij - lse_i) over the visible keys, dP_ij = dO_i . v_j,
 * D_i = dO_i . O_i (= sum_j P_ij dP_ij), dS_ij = P_ij (dP_ij - D_i) times the softcap's
 * derivative 1 - (s_ij / softcap)^2 (d s_ij / d of the scaled score), then
 *   dQ_i = scale * sum_j dS_ij k_j,  dK_j = scale * sum_(h,i) dS_ij q_i,  dV_j = sum_(h,i) P_ij dO_i,
 * dK and dV summed over the query heads h of the group that reads KV head j's head. All in
 * float32, rounded to the dtype once at the store. ---- */

/* Kernel 1: one warp per query row, rows as the forward's. Writes dQ_i (0 for a row that sees
 * no key) and D_i to dsum[row] (the workspace, [batch][heads][seqlen_q]) for kernel 2. The
 * device reads p; g's fwd is NULL (a host pointer). */
template <typename T, int E>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
simple_bwd_dq_kernel(const attn_fwd_params p, const attn_bwd_params g, const int group, float *dsum) {
    const int D = p.head_dim, Dv = p.head_dim_v;
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads * p.seqlen_q;
    if (row >= n_rows) return; /* whole warp leaves together */
    int b, h, i;
    split_row(row, n_rows, p.seqlen_q, p.heads, &b, &h, &i);
    const int kh = h / group; /* KV head */
    const int sq = seq_len(p.cu_seqlens_q, b, p.seqlen_q);
    if (i >= sq) return; /* padding row of a shorter sequence: not written */
    const int sk = used_keys(p.cu_seqlens_k, p.seqused_k, b, p.seqlen_k);
    int64_t lo, hi; /* the visible keys lo..hi (hi < lo: none) */
    visible_keys(i, sq, sk, p.window_left, p.window_right, p.causal, &lo, &hi);

    const T *q = (const T *)p.q + row_offset(p.cu_seqlens_q, b, h, i, p.q_batch_stride, p.q_head_stride,
                                             p.q_row_stride);
    const T *o = (const T *)p.o + row_offset(p.cu_seqlens_q, b, h, i, p.o_batch_stride, p.o_head_stride,
                                             p.o_row_stride);
    const T *dout = (const T *)g.dout + row_offset(p.cu_seqlens_q, b, h, i, g.do_batch_stride,
                                                   g.do_head_stride, g.do_row_stride);
    T *dq = (T *)g.dq + row_offset(p.cu_seqlens_q, b, h, i, g.dq_batch_stride, g.dq_head_stride,
                                   g.dq_row_stride);
    const T *k = (const T *)p.k + row_offset(p.cu_seqlens_k, b, kh, 0, p.k_batch_stride, p.k_head_stride,
                                             p.k_row_stride); /* key 0 of the sequence */
    const T *v = (const T *)p.v + row_offset(p.cu_seqlens_k, b, kh, 0, p.v_batch_stride, p.v_head_stride,
                                             p.v_row_stride);

    float qf[E], dof[E], acc[E], d_i = 0.f; /* d_i: D_i = dO_i . O_i */
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = e * 32 + lane;
        qf[e] = c < D ? to_float(q[c]) : 0.f;
        dof[e] = c < Dv ? to_float(dout[c]) : 0.f;
        if (c < Dv) d_i += dof[e] * to_float(o[c]);
        acc[e] = 0.f;
    }
    d_i = warp_sum(d_i);
    if (lane == 0) dsum[row] = d_i;
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
        s = warp_sum(s) * p.softmax_scale;
        dp = warp_sum(dp);
        float dcap = 1.f; /* d(capped score) / d(scaled score) */
        if (p.softcap > 0.f) {
            s = p.softcap * tanhf(s / p.softcap);
            dcap = 1.f - (s / p.softcap) * (s / p.softcap);
        }
        const float ds = expf(s - lse) * (dp - d_i) * dcap;
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (e * 32 + lane < D) acc[e] += ds * to_float(kj[e * 32 + lane]);
    }
    /* a row that sees no key: dQ = 0 (written as such, whatever the sign of the scale) */
#pragma unroll
    for (int e = 0; e < E; ++e)
        if (e * 32 + lane < D) dq[e * 32 + lane] = from_float<T>(hi >= lo ? acc[e] * p.softmax_scale : 0.f);
}

/* Kernel 2: one warp per key row, row = (b * heads_k + kh) * seqlen_k + j over the padded
 * [batch][heads_k][seqlen_k]. It loops over the query heads of KV head kh's group and, in each,
 * the queries that see key j (seeing_queries: the forward's mask from the key's side),
 * recomputing P_ij and dS_ij as kernel 1 (D_i from it, through dsum). Writes dK_j and dV_j (0
 * for a key no query sees) at every used key j < used_k(b); rows j >= used_k(b) are left as
 * they were (past stored_k(b) they are padding, or another sequence's when packed). */
template <typename T, int E>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
simple_bwd_dkdv_kernel(const attn_fwd_params p, const attn_bwd_params g, const int group, const float *dsum) {
    const int D = p.head_dim, Dv = p.head_dim_v;
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t n_rows = (int64_t)p.batch * p.heads_k * p.seqlen_k;
    if (row >= n_rows) return;
    int b, kh, j;
    split_row(row, n_rows, p.seqlen_k, p.heads_k, &b, &kh, &j);
    const int sk = used_keys(p.cu_seqlens_k, p.seqused_k, b, p.seqlen_k);
    if (j >= sk) return; /* not a used key of sequence b */
    const int sq = seq_len(p.cu_seqlens_q, b, p.seqlen_q);
    int64_t lo, hi; /* the queries that see key j, lo..hi (hi < lo: none) */
    seeing_queries(j, sq, sk, p.window_left, p.window_right, p.causal, &lo, &hi);

    const T *kj = (const T *)p.k + row_offset(p.cu_seqlens_k, b, kh, j, p.k_batch_stride, p.k_head_stride,
                                              p.k_row_stride);
    const T *vj = (const T *)p.v + row_offset(p.cu_seqlens_k, b, kh, j, p.v_batch_stride, p.v_head_stride,
                                              p.v_row_stride);
    T *dk = (T *)g.dk + row_offset(p.cu_seqlens_k, b, kh, j, g.dk_batch_stride, g.dk_head_stride,
                                   g.dk_row_stride);
    T *dv = (T *)g.dv + row_offset(p.cu_seqlens_k, b, kh, j, g.dv_batch_stride, g.dv_head_stride,
                                   g.dv_row_stride);

    float kf[E], vf[E], dkf[E], dvf[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = e * 32 + lane;
        kf[e] = c < D ? to_float(kj[c]) : 0.f;
        vf[e] = c < Dv ? to_float(vj[c]) : 0.f;
        dkf[e] = dvf[e] = 0.f;
    }

    for (int h = kh * group; h < (kh + 1) * group; ++h) { /* the query heads reading kh */
        const int64_t row0 = ((int64_t)b * p.heads + h) * p.seqlen_q; /* (b, h, 0) in dsum */
        for (int64_t i = lo; i <= hi; ++i) {
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
            s = warp_sum(s) * p.softmax_scale;
            dp = warp_sum(dp);
            float dcap = 1.f;
            if (p.softcap > 0.f) {
                s = p.softcap * tanhf(s / p.softcap);
                dcap = 1.f - (s / p.softcap) * (s / p.softcap);
            }
            const float pij = expf(s - p.lse[lse_index(p.cu_seqlens_q, p.batch, b, h, (int)i, row0 + i)]);
            const float ds = pij * (dp - dsum[row0 + i]) * dcap;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                dkf[e] += ds * qf[e];
                dvf[e] += pij * dof[e];
            }
        }
    }
    const bool seen = hi >= lo; /* a key no query sees: dK = dV = 0 */
#pragma unroll
    for (int e = 0; e < E; ++e) {
        const int c = e * 32 + lane;
        if (c < D) dk[c] = from_float<T>(seen ? dkf[e] * p.softmax_scale : 0.f);
        if (c < Dv) dv[c] = from_float<T>(seen ? dvf[e] : 0.f);
    }
}

template <typename T, int E>
int launch_bwd(const attn_fwd_params *p, const attn_bwd_params *g, cudaStream_t stream) {
    /* grid x only, as the forward's; both grids checked before either launch */
    const int64_t blocks_q = ((int64_t)p->batch * p->heads * p->seqlen_q + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int64_t blocks_k = ((int64_t)p->batch * p->heads_k * p->seqlen_k + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks_q > 0x7fffffff || blocks_k > 0x7fffffff) return ATTN_UNSUPPORTED;
    const int group = p->heads / p->heads_k;
    float *dsum = (float *)g->workspace;
    if (blocks_q > 0) /* kernel 2 reads D from kernel 1: the stream orders them */
        simple_bwd_dq_kernel<T, E><<<(unsigned)blocks_q, kWarpsPerBlock * 32, 0, stream>>>(*p, *g, group, dsum);
    if (blocks_k > 0)
        simple_bwd_dkdv_kernel<T, E><<<(unsigned)blocks_k, kWarpsPerBlock * 32, 0, stream>>>(*p, *g, group, dsum);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

/* E = ceil(max(D, Dv) / 32) rounded up to a power of two, as the forward's general instances. */
template <typename T>
int launch_bwd_for_dims(const attn_fwd_params *p, const attn_bwd_params *g, cudaStream_t stream) {
    const int chunks = ((p->head_dim > p->head_dim_v ? p->head_dim : p->head_dim_v) + 31) / 32;
    return chunks <= 1 ? launch_bwd<T, 1>(p, g, stream)
         : chunks <= 2 ? launch_bwd<T, 2>(p, g, stream)
         : chunks <= 4 ? launch_bwd<T, 4>(p, g, stream)
                       : launch_bwd<T, 8>(p, g, stream);
}

/* The rules of attn_abi.h that p's scalars decide, as harness/problem.c has them: a problem
 * that breaks one is an error, never computed as some other problem. (A packed tensor's row
 * count is on the device: seqlen_q and seqlen_k, the longest sequence's, stand for it.) */
bool invalid(const attn_fwd_params &p) {
    if (p.heads_k < 1 || p.heads % p.heads_k != 0) return true; /* heads_k 0 is not "heads" */
    if (p.window_left < -1 || p.window_right < -1 || (p.causal && p.window_right > 0)) return true;
    if (p.block_table != nullptr &&
        (p.cu_seqlens_k != nullptr || p.page_size < 1 || p.num_pages < 1 || p.block_table_stride < 1 ||
         (int64_t)p.block_table_stride * p.page_size < p.seqlen_k))
        return true;
    const int64_t strides[] = {p.q_batch_stride, p.q_head_stride, p.q_row_stride, p.k_batch_stride,
                               p.k_head_stride,  p.k_row_stride,  p.v_batch_stride, p.v_head_stride,
                               p.v_row_stride,   p.o_batch_stride, p.o_head_stride, p.o_row_stride};
    for (int64_t s : strides)
        if (s < 0) return true;
    if ((p.heads > 1 && p.o_head_stride == 0) || (p.batch > 1 && !p.cu_seqlens_q && p.o_batch_stride == 0))
        return true; /* a broadcast output: heads or sequences would race for it */
    const bool rows_q = p.seqlen_q > 1, rows_k = (p.block_table ? p.page_size : p.seqlen_k) > 1;
    return (rows_q && (p.q_row_stride == 0 || p.o_row_stride == 0)) ||
           (rows_k && (p.k_row_stride == 0 || p.v_row_stride == 0));
}

int simple_fwd(const attn_fwd_params *in, cudaStream_t stream) {
    if (in == nullptr) return kErr;
    attn_fwd_params p = *in;
    if (p.dtype != ATTN_F16 && p.dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    /* head_dim_v's "off" value made explicit (heads_k has none: 0 is invalid) */
    if (p.head_dim_v == 0) p.head_dim_v = p.head_dim;
    if (p.batch < 1 || p.heads < 1 || p.seqlen_q < 0 || p.seqlen_k < 0 || p.head_dim < 1 ||
        p.head_dim_v < 1 || invalid(p))
        return kErr;
    if (!p.q || !p.k || !p.v || !p.o) return kErr;
    /* Any head dims up to 256 (FlashAttention's and the reference's limit): q and the
     * accumulator stay in registers, 8 per lane at most. Larger: not supported. */
    if (p.head_dim > 256 || p.head_dim_v > 256) return ATTN_UNSUPPORTED;

    return p.dtype == ATTN_BF16 ? launch_for_dims<__nv_bfloat16>(&p, stream)
                                : launch_for_dims<__half>(&p, stream);
}

/* The backward's workspace: D_i, a float per row of the padded [batch][heads][seqlen_q]. */
size_t simple_bwd_workspace(const attn_bwd_params *bp) {
    if (bp == nullptr || bp->fwd == nullptr) return 0;
    const attn_fwd_params &p = *bp->fwd;
    if (p.batch < 1 || p.heads < 1 || p.seqlen_q < 1) return 0; /* invalid: simple_bwd refuses it */
    return (size_t)p.batch * p.heads * p.seqlen_q * sizeof(float);
}

/* The rules of attn_abi.h on the backward's own fields (harness/problem.c's
 * attn_bwd_problem_check): dO, dQ, dK, dV set, strides >= 0, a zero row stride only for one
 * row, no broadcast gradient; deterministic 0 or 1; the workspace NULL exactly when 0 bytes. */
bool invalid_bwd(const attn_bwd_params &g, const attn_fwd_params &p) {
    if (g.deterministic != 0 && g.deterministic != 1) return true;
    if ((g.workspace == nullptr) != (g.workspace_bytes == 0)) return true;
    /* the packed row counts are on the host too (total_q, total_k: attn_abi.h version 4) */
    const int64_t rows_q = p.cu_seqlens_q ? p.total_q : p.seqlen_q, rows_k = p.cu_seqlens_k ? p.total_k : p.seqlen_k;
    const struct { const void *ptr; int64_t batch, head, row, rows; int heads; bool out, packed; } t[] = {
        {g.dout, g.do_batch_stride, g.do_head_stride, g.do_row_stride, rows_q, p.heads, false, p.cu_seqlens_q != nullptr},
        {g.dq, g.dq_batch_stride, g.dq_head_stride, g.dq_row_stride, rows_q, p.heads, true, p.cu_seqlens_q != nullptr},
        {g.dk, g.dk_batch_stride, g.dk_head_stride, g.dk_row_stride, rows_k, p.heads_k, true, p.cu_seqlens_k != nullptr},
        {g.dv, g.dv_batch_stride, g.dv_head_stride, g.dv_row_stride, rows_k, p.heads_k, true, p.cu_seqlens_k != nullptr},
    };
    for (const auto &x : t) {
        if (x.ptr == nullptr || x.batch < 0 || x.head < 0 || x.row < 0) return true;
        if (x.row == 0 && x.rows > 1) return true;
        if (x.out && ((x.head == 0 && x.heads > 1) || (x.batch == 0 && p.batch > 1 && !x.packed)))
            return true; /* a broadcast gradient: heads or sequences would race for it */
    }
    return false;
}

int simple_bwd(const attn_bwd_params *in, cudaStream_t stream) {
    if (in == nullptr || in->fwd == nullptr) return kErr;
    attn_fwd_params p = *in->fwd;
    attn_bwd_params g = *in;
    g.fwd = nullptr; /* host memory: the kernels read p */
    if (p.dtype != ATTN_F16 && p.dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if (p.head_dim_v == 0) p.head_dim_v = p.head_dim;
    if (p.batch < 1 || p.heads < 1 || p.seqlen_q < 0 || p.seqlen_k < 0 || p.head_dim < 1 ||
        p.head_dim_v < 1 || invalid(p) || invalid_bwd(g, p))
        return kErr;
    if (!p.q || !p.k || !p.v || !p.o || !p.lse) return kErr; /* O and LSE are inputs here */
    if (p.block_table != nullptr) return kErr; /* paged: no backward in ABI version 5 */
    if (g.workspace_bytes < simple_bwd_workspace(in)) return kErr;
    if (p.head_dim > 256 || p.head_dim_v > 256) return ATTN_UNSUPPORTED; /* as the forward */

    return p.dtype == ATTN_BF16 ? launch_bwd_for_dims<__nv_bfloat16>(&p, &g, stream)
                                : launch_bwd_for_dims<__half>(&p, &g, stream);
}

} // namespace

extern "C" const attn_kernel attn_kernel_simple = {
    "simple", simple_fwd,
    ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V | ATTN_CAP_VARLEN |
        ATTN_CAP_PAGED | ATTN_CAP_SEQUSED_K,
    0,       /* fp16 and bf16 */
    nullptr, /* any head dim up to 256 (larger: ATTN_UNSUPPORTED, see simple_fwd) */
    nullptr, /* and any pair of them */
    simple_bwd, simple_bwd_workspace,
    ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V | ATTN_CAP_VARLEN |
        ATTN_CAP_SEQUSED_K | ATTN_BWD_DETERMINISTIC, /* every feature but paged K/V: always deterministic */
};
