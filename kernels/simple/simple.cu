/* "simple": the harness's built-in correctness floor, not a fast kernel.
 *
 * One warp computes one (batch, head, query row) with a plain online softmax in float32,
 * one key at a time. It takes every problem of ABI version 3 (every ATTN_CAP_*, fp16 and bf16,
 * head dims up to 256, any pair of them) and is written to be checked line by line against
 * attn_abi.h, an invalid problem an error (kErr) before any launch: when "simple"
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
    if (row >= (int64_t)p.batch * p.heads * p.seqlen_q) return; /* whole warp leaves together */
    /* (b, h, i) of the row: 32-bit divisions while the rows fit (64-bit ones cost a short
     * row more than its keys: v2 measured 15-27 % slower than v1 at S = 4 with both) */
    int i, h, b;
    if ((int64_t)p.batch * p.heads * p.seqlen_q <= 0x7fffffff) {
        const unsigned r = (unsigned)row, bh = r / (unsigned)p.seqlen_q;
        i = (int)(r - bh * (unsigned)p.seqlen_q), h = (int)(bh % (unsigned)p.heads), b = (int)(bh / (unsigned)p.heads);
    } else {
        i = (int)(row % p.seqlen_q), h = (int)(row / p.seqlen_q % p.heads), b = (int)(row / p.seqlen_q / p.heads);
    }
    const int kh = group == 1 ? h : h / group; /* KV head; group = heads / heads_k */

    /* This sequence's lengths: seqlen_q/seqlen_k are the maxima under varlen. */
    const int sq = p.cu_seqlens_q ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
    if (i >= sq) return; /* padding row of a shorter sequence: not written */
    int sk = p.cu_seqlens_k ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
    /* only the used keys (0 <= seqused_k[b] <= sk, attn_abi.h; the clamp only keeps an invalid
     * problem from reading past the stored keys) */
    if (p.seqused_k) sk = min(sk, max(p.seqused_k[b], 0));

    /* Visible keys lo..hi: -window_left <= j - (i + sk - sq) <= window_right, 0 <= j < sk, sk
     * the used keys; causal is window_right = 0; a negative bound is unbounded. 64-bit so that
     * huge windows cannot overflow. */
    const int64_t diag = (int64_t)i + sk - sq; /* the key aligned with query i */
    const int right = p.causal ? 0 : p.window_right;
    int64_t lo = p.window_left >= 0 ? diag - p.window_left : 0;
    int64_t hi = right >= 0 ? diag + right : (int64_t)sk - 1;
    lo = lo < 0 ? 0 : lo;
    hi = hi > sk - 1 ? sk - 1 : hi; /* hi < lo: no visible key */

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
    if (p.lse != nullptr && lane == 0) {
        /* [batch][heads][seqlen_q], or [heads][total_q] indexed by token when packed */
        const int64_t at = p.cu_seqlens_q
            ? (int64_t)h * p.cu_seqlens_q[p.batch] + p.cu_seqlens_q[b] + i
            : row;
        p.lse[at] = any ? m + logf(l) : -INFINITY;
    }
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

} // namespace

extern "C" const attn_kernel attn_kernel_simple = {
    "simple", simple_fwd,
    ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V | ATTN_CAP_VARLEN |
        ATTN_CAP_PAGED | ATTN_CAP_SEQUSED_K,
    0,       /* fp16 and bf16 */
    nullptr, /* any head dim up to 256 (larger: ATTN_UNSUPPORTED, see simple_fwd) */
    nullptr, /* and any pair of them */
};
