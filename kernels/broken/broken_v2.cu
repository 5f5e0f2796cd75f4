/* libattn_broken, version 2: deliberately broken kernels of version 2's features (grouped KV
 * heads, windows, softcap, head_dim_v, packed and paged layouts, seqused_k, the layout arrays
 * left as given). Each kernel is
 * one known bug in an otherwise correct kernel; "broken_v2_none" is the same template with no bug, a control that must pass
 * everything (so a failure of the others comes from their bug, not from this copy).
 *
 * The algorithm is a private copy of kernels/simple's version 2 (one warp per query row,
 * float32 online softmax, every ATTN_CAP_*; the helpers of kernels/common/warp_row.cuh), without simple's Plain instances (they only
 * drop guards that are then always true), templated on `int BUG`. Every kernel claims all
 * of version 2's capabilities, as simple does, so that the harness gives it version-2
 * problems. Built into the attn_broken plugin only (attn_broken_v1 builds broken.cu alone,
 * against the version-1 header); broken.cu appends broken_v2_kernels()'s table to its own.
 * To add a bug class: one enum value, one `if constexpr (BUG == ...)` hook, one line in
 * `table`, and one row in README.md. */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "attn_abi.h"
#include "warp_row.cuh"

namespace {

enum {
    BUG_NONE = 0,              /* control: correct */
    BUG_GQA_MOD,               /* KV head h % heads_k instead of h / (heads / heads_k) */
    BUG_WINDOW_OFF_BY_ONE,     /* the left window bound lets one key too many through */
    BUG_WINDOW_TOP_LEFT,       /* a window's diagonal top-left aligned: ignores sk - sq */
    BUG_SOFTCAP_AFTER_MASK,    /* masked scores (-inf) softcapped to -softcap: weight > 0 */
    BUG_SOFTCAP_IGNORED,       /* softcap never applied */
    BUG_HEAD_DIM_V_AS_D,       /* V and O columns looped to head_dim, not head_dim_v */
    BUG_VARLEN_NEIGHBOUR_KEYS, /* packed K: every sequence reads seqlen_k (the longest) keys,
                                  running into its neighbour's */
    BUG_VARLEN_LSE_DENSE,      /* packed Q: LSE written at the dense [batch][heads][seqlen_q]
                                  index, not [heads][total_q] */
    BUG_PAGE_64,               /* paged: page boundary assumed at 64 rows, not page_size */
    BUG_PAGES_CONTIGUOUS,      /* paged: a sequence's pages assumed consecutive from its first */
    BUG_SEQUSED_IGNORED,       /* seqused_k never read: every key of the sequence's pages */
    BUG_HOST_LENGTHS,          /* fwd copies cu_seqlens_q (or seqused_k) to the host and waits
                                  for it on its stream (the longest length, as varlen kernels
                                  size their grid): right output, a host synchronization */
    /* serving engines' layouts and scale (harness/seqs.h's block table, the large rows) */
    BUG_PAGES_PAST_USED,       /* paged: K and V of every key its block table row could hold
                                  (block_table_stride * page_size) read, those past the
                                  sequence's visible keys weighed 0: reads the pages of the
                                  entries past the used ones */
    BUG_PAGE_COUNT_FROM_STRIDE, /* paged: a sequence's stored keys taken as block_table_stride *
                                  page_size, not seqlen_k (seqused_k still honoured) */
    BUG_PACKED_INT32_OFFSETS,  /* element offsets (packed rows, pages) wrapped to 32 bits */
    BUG_BLOCK_TABLE_SANITIZED, /* the block table's entries past a sequence's pages (-1)
                                  rewritten as page 0 in the caller's table: right output */
    BUG_HEAD_DIM_TAIL_DROPPED, /* Q.K^T over the head dim rounded down to a multiple of 32:
                                  the last partial chunk of columns dropped */
};

constexpr int kWarpsPerBlock = 4; /* query rows per block */
constexpr int kErr = 2;           /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */

using namespace warp_row;

/* BUG_PACKED_INT32_OFFSETS: an element offset as a 32-bit int holds it (wrapped past 2^31). */
template <int BUG>
__device__ __forceinline__ int64_t offset_of(int64_t off) {
    return BUG == BUG_PACKED_INT32_OFFSETS ? (int64_t)(int32_t)(uint32_t)(uint64_t)off : off;
}

/* warp_row::kv_row with the paging bugs' hooks. */
template <int BUG>
__device__ __forceinline__ int64_t kv_row(const int32_t *pages, int page_size, int64_t j,
                                          int64_t page_stride, int64_t row_stride) {
    if constexpr (BUG == BUG_PAGE_64) page_size = 64; /* BUG: the boundary of one common size */
    if constexpr (BUG == BUG_PAGES_CONTIGUOUS)        /* BUG: pages taken in order from the first */
        if (pages != nullptr)
            return (pages[0] + (int64_t)j / page_size) * page_stride + (int64_t)((int)j % page_size) * row_stride;
    return offset_of<BUG>(warp_row::kv_row(pages, page_size, j, page_stride, row_stride));
}

/* One warp per query row, as simple_fwd_kernel (its comments say why each line is so). */
template <typename T, int E, int BUG>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
broken_v2_kernel(const attn_fwd_params p) {
    const int D = p.head_dim;
    const int Dv = BUG == BUG_HEAD_DIM_V_AS_D ? p.head_dim : p.head_dim_v; /* BUG: Dv = D */
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (row >= (int64_t)p.batch * p.heads * p.seqlen_q) return;
    const int i = (int)(row % p.seqlen_q);
    const int h = (int)(row / p.seqlen_q % p.heads);
    const int b = (int)(row / p.seqlen_q / p.heads);
    const int kh = BUG == BUG_GQA_MOD ? h % p.heads_k               /* BUG: heads interleaved */
                                      : h / (p.heads / p.heads_k); /* KV head */

    const int sq = p.cu_seqlens_q ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
    if (i >= sq) return;
    int sk = p.cu_seqlens_k && BUG != BUG_VARLEN_NEIGHBOUR_KEYS /* BUG: the longest length */
                 ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
    if constexpr (BUG == BUG_PAGE_COUNT_FROM_STRIDE) /* BUG: the table row's keys are stored */
        if (p.block_table) sk = p.block_table_stride * p.page_size;
    if (p.seqused_k && BUG != BUG_SEQUSED_IGNORED) sk = min(sk, max(p.seqused_k[b], 0));

    /* Visible keys lo..hi: -window_left <= j - (i + sk - sq) <= window_right, 0 <= j < sk. */
    int64_t diag = (int64_t)i + sk - sq; /* the key aligned with query i */
    if constexpr (BUG == BUG_WINDOW_TOP_LEFT) /* BUG: with a window (not causal alone): j = i */
        if (p.window_left >= 0 || (!p.causal && p.window_right >= 0)) diag = i;
    const int right = p.causal ? 0 : p.window_right;
    int64_t lo = p.window_left >= 0 ? diag - p.window_left : 0;
    if constexpr (BUG == BUG_WINDOW_OFF_BY_ONE) /* BUG: -window_left - 1 <= j - diag */
        if (p.window_left >= 0) lo -= 1;
    int64_t hi = right >= 0 ? diag + right : (int64_t)sk - 1;
    lo = lo < 0 ? 0 : lo;
    hi = hi > sk - 1 ? sk - 1 : hi;

    /* The keys the loop visits: the visible ones (a masked key's weight is 0). */
    int64_t first = lo, last = hi;
    if constexpr (BUG == BUG_SOFTCAP_AFTER_MASK) /* BUG: with a softcap every key is visited, */
        if (p.softcap > 0.f) first = 0, last = (int64_t)sk - 1; /* a masked one scored -inf */
    if constexpr (BUG == BUG_PAGES_PAST_USED) /* BUG: on to the end of the table row, weighed 0 */
        if (p.block_table && hi >= lo) last = (int64_t)p.block_table_stride * p.page_size - 1;

    const T *q = (const T *)p.q + offset_of<BUG>(row_offset(p.cu_seqlens_q, b, h, i, p.q_batch_stride,
                                                            p.q_head_stride, p.q_row_stride));
    T *o = (T *)p.o + offset_of<BUG>(row_offset(p.cu_seqlens_q, b, h, i, p.o_batch_stride, p.o_head_stride,
                                                p.o_row_stride));
    const int32_t *pages = p.block_table ? p.block_table + (int64_t)b * p.block_table_stride : nullptr;
    const T *k = (const T *)p.k + (pages ? kh * p.k_head_stride
                                         : offset_of<BUG>(row_offset(p.cu_seqlens_k, b, kh, 0, p.k_batch_stride,
                                                                     p.k_head_stride, p.k_row_stride)));
    const T *v = (const T *)p.v + (pages ? kh * p.v_head_stride
                                         : offset_of<BUG>(row_offset(p.cu_seqlens_k, b, kh, 0, p.v_batch_stride,
                                                                     p.v_head_stride, p.v_row_stride)));

    float qf[E], acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        qf[e] = e * 32 + lane < D ? to_float(q[e * 32 + lane]) : 0.f;
        acc[e] = 0.f;
    }

    /* Online softmax: m = max score so far, l = sum exp(s - m), acc = sum exp(s - m) * v. */
    float m = -INFINITY, l = 0.f;
    for (int64_t j = first; j <= last; ++j) {
        const T *kj = k + kv_row<BUG>(pages, p.page_size, j, p.k_batch_stride, p.k_row_stride);
        const T *vj = v + kv_row<BUG>(pages, p.page_size, j, p.v_batch_stride, p.v_row_stride);
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (e * 32 + lane < (BUG == BUG_HEAD_DIM_TAIL_DROPPED ? D / 32 * 32 : D)) /* BUG: whole chunks */
                s += qf[e] * to_float(kj[e * 32 + lane]);
        s = warp_sum(s) * p.softmax_scale;
        if constexpr (BUG == BUG_SOFTCAP_AFTER_MASK)
            if (j < lo || j > hi) s = -INFINITY; /* BUG: masked here, softcapped next: -softcap */
        if (BUG != BUG_SOFTCAP_IGNORED && p.softcap > 0.f) /* BUG_SOFTCAP_IGNORED: never */
            s = p.softcap * tanhf(s / p.softcap);
        if constexpr (BUG == BUG_PAGES_PAST_USED) /* BUG: read, then weighed 0 (0 x its V: a NaN shows) */
            if (j > hi) s = -INFINITY;

        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float pj = expf(s - m_new);
        l = l * corr + pj;
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (e * 32 + lane < Dv) acc[e] = acc[e] * corr + pj * to_float(vj[e * 32 + lane]);
        m = m_new;
    }

    /* A row that sees no key writes O = 0 and LSE = -inf. */
    const bool any = last >= first;
#pragma unroll
    for (int e = 0; e < E; ++e)
        if (e * 32 + lane < Dv) o[e * 32 + lane] = from_float<T>(any ? acc[e] / l : 0.f);
    if (p.lse != nullptr && lane == 0) {
        const int64_t at = p.cu_seqlens_q && BUG != BUG_VARLEN_LSE_DENSE /* BUG: dense index */
            ? (int64_t)h * p.cu_seqlens_q[p.batch] + p.cu_seqlens_q[b] + i
            : row;
        p.lse[at] = any ? m + logf(l) : -INFINITY;
    }
}

template <typename T, int E, int BUG>
int launch(const attn_fwd_params *p, cudaStream_t stream) {
    const int64_t n_rows = (int64_t)p->batch * p->heads * p->seqlen_q;
    const int64_t n_blocks = (n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (n_blocks == 0) return ATTN_OK;
    if (n_blocks > 0x7fffffff) return ATTN_UNSUPPORTED;
    broken_v2_kernel<T, E, BUG><<<(unsigned)n_blocks, kWarpsPerBlock * 32, 0, stream>>>(*p);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

/* E = ceil(max(D, Dv) / 32) rounded up to a power of two. */
template <typename T, int BUG>
int launch_for_dims(const attn_fwd_params *p, cudaStream_t stream) {
    const int D = p->head_dim, Dv = p->head_dim_v;
    const int chunks = ((D > Dv ? D : Dv) + 31) / 32;
    return chunks <= 1 ? launch<T, 1, BUG>(p, stream)
         : chunks <= 2 ? launch<T, 2, BUG>(p, stream)
         : chunks <= 4 ? launch<T, 4, BUG>(p, stream)
                       : launch<T, 8, BUG>(p, stream);
}

/* BUG_BLOCK_TABLE_SANITIZED's pre-pass, one block a sequence: the entries of sequence b's row
 * of the block table past the pages its keys fill set to page 0, in the caller's table. */
__global__ void sanitize_block_table_kernel(const attn_fwd_params p) {
    const int b = blockIdx.x;
    int keys = p.cu_seqlens_k ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
    if (p.seqused_k) keys = min(keys, max(p.seqused_k[b], 0));
    int32_t *row = const_cast<int32_t *>(p.block_table) + (int64_t)b * p.block_table_stride; /* BUG: const */
    for (int col = (keys + p.page_size - 1) / p.page_size + threadIdx.x; col < p.block_table_stride; col += blockDim.x)
        row[col] = 0;
}

template <int BUG>
int broken_v2_fwd(const attn_fwd_params *in, cudaStream_t stream) {
    if (in == nullptr) return kErr;
    attn_fwd_params p = *in;
    if (p.dtype != ATTN_F16 && p.dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if (p.heads_k == 0) p.heads_k = p.heads;
    if (p.head_dim_v == 0) p.head_dim_v = p.head_dim;
    if (p.batch < 1 || p.heads < 1 || p.seqlen_q < 0 || p.seqlen_k < 0 || p.head_dim < 1 ||
        p.head_dim_v < 1 || p.heads_k < 1 || p.heads % p.heads_k != 0)
        return kErr;
    if (!p.q || !p.k || !p.v || !p.o) return kErr;
    if (p.block_table != nullptr && p.page_size < 1) return kErr;
    if (p.head_dim > 256 || p.head_dim_v > 256) return ATTN_UNSUPPORTED;
    if constexpr (BUG == BUG_HOST_LENGTHS) { /* BUG: the lengths read back on the host */
        const int32_t *lens = p.cu_seqlens_q ? p.cu_seqlens_q : p.seqused_k;
        if (lens != nullptr) {
            int32_t last = 0;
            if (cudaMemcpyAsync(&last, lens + (p.cu_seqlens_q ? p.batch : p.batch - 1), sizeof last,
                                cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
                cudaStreamSynchronize(stream) != cudaSuccess)
                return kErr;
        }
    }
    if constexpr (BUG == BUG_BLOCK_TABLE_SANITIZED) { /* BUG: the caller's block table rewritten */
        /* so that a prefetch of the page after a sequence's last never reads page -1: the
         * kernel never reads those entries, but the serving engine that owns the table marks
         * free entries with -1 (or keeps a page it will reuse there) */
        if (p.block_table != nullptr && p.page_size > 0) {
            sanitize_block_table_kernel<<<p.batch, 32, 0, stream>>>(p);
            if (cudaGetLastError() != cudaSuccess) return kErr;
        }
    }
    constexpr int KB = BUG == BUG_BLOCK_TABLE_SANITIZED ? BUG_NONE : BUG; /* a host-side bug: the control's */
    return p.dtype == ATTN_BF16 ? launch_for_dims<__nv_bfloat16, KB>(&p, stream)
                                : launch_for_dims<__half, KB>(&p, stream);
}

constexpr uint32_t kAllCaps = ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP |
                              ATTN_CAP_HEAD_DIM_V | ATTN_CAP_VARLEN | ATTN_CAP_PAGED |
                              ATTN_CAP_SEQUSED_K;

/* fp16 and bf16 (dtypes 0), any head dim up to 256 (head_dims NULL), as simple */
const attn_kernel table[] = {
    { "broken_v2_none", broken_v2_fwd<BUG_NONE>, kAllCaps, 0, nullptr },
    { "broken_gqa_mod", broken_v2_fwd<BUG_GQA_MOD>, kAllCaps, 0, nullptr },
    { "broken_window_off_by_one", broken_v2_fwd<BUG_WINDOW_OFF_BY_ONE>, kAllCaps, 0, nullptr },
    { "broken_window_top_left", broken_v2_fwd<BUG_WINDOW_TOP_LEFT>, kAllCaps, 0, nullptr },
    { "broken_softcap_after_mask", broken_v2_fwd<BUG_SOFTCAP_AFTER_MASK>, kAllCaps, 0, nullptr },
    { "broken_softcap_ignored", broken_v2_fwd<BUG_SOFTCAP_IGNORED>, kAllCaps, 0, nullptr },
    { "broken_head_dim_v_as_d", broken_v2_fwd<BUG_HEAD_DIM_V_AS_D>, kAllCaps, 0, nullptr },
    { "broken_varlen_neighbour_keys", broken_v2_fwd<BUG_VARLEN_NEIGHBOUR_KEYS>, kAllCaps, 0, nullptr },
    { "broken_varlen_lse_dense", broken_v2_fwd<BUG_VARLEN_LSE_DENSE>, kAllCaps, 0, nullptr },
    { "broken_page_64", broken_v2_fwd<BUG_PAGE_64>, kAllCaps, 0, nullptr },
    { "broken_pages_contiguous", broken_v2_fwd<BUG_PAGES_CONTIGUOUS>, kAllCaps, 0, nullptr },
    { "broken_seqused_ignored", broken_v2_fwd<BUG_SEQUSED_IGNORED>, kAllCaps, 0, nullptr },
    { "broken_host_lengths", broken_v2_fwd<BUG_HOST_LENGTHS>, kAllCaps, 0, nullptr },
    /* serving engines' layouts and scale */
    { "broken_pages_past_used", broken_v2_fwd<BUG_PAGES_PAST_USED>, kAllCaps, 0, nullptr },
    { "broken_page_count_from_stride", broken_v2_fwd<BUG_PAGE_COUNT_FROM_STRIDE>, kAllCaps, 0, nullptr },
    { "broken_packed_int32_offsets", broken_v2_fwd<BUG_PACKED_INT32_OFFSETS>, kAllCaps, 0, nullptr },
    { "broken_block_table_sanitized", broken_v2_fwd<BUG_BLOCK_TABLE_SANITIZED>, kAllCaps, 0, nullptr },
    /* a head dim's last partial chunk */
    { "broken_head_dim_tail_dropped", broken_v2_fwd<BUG_HEAD_DIM_TAIL_DROPPED>, kAllCaps, 0, nullptr },
};

} // namespace

/* For broken.cu, which lists these after its own kernels (the plugin's one table). */
static_assert(sizeof table / sizeof table[0] <= 32, "broken.cu's combined table holds 32 of these");
extern "C" const attn_kernel *broken_v2_kernels(int *count) {
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}
