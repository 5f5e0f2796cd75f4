/* Device helpers of the one-warp-per-query-row kernels: "simple" and the broken fixtures
 * (kernels/broken), which are copies of simple's algorithm with one bug each and share these
 * helpers rather than copy them. Each .cu file that includes this compiles its own inline
 * copies (no device linking). */
#ifndef ATTN_WARP_ROW_CUH
#define ATTN_WARP_ROW_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace warp_row {

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

/* Sum over the 32 lanes; every lane gets the total. */
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* Offset (in elements) of row r of head h of sequence b in a q/k/v/o tensor: packed rows
 * cu[b] + r when cu_seqlens is given (the batch stride unused), else the dense strides. */
__device__ __forceinline__ int64_t row_offset(const int32_t *cu, int b, int h, int64_t r,
                                              int64_t batch_stride, int64_t head_stride,
                                              int64_t row_stride) {
    if (cu != nullptr) return ((int64_t)cu[b] + r) * row_stride + h * head_stride;
    return b * batch_stride + h * head_stride + r * row_stride;
}

/* Offset of key/value row j from its head's first row: through the sequence's block table
 * row `pages` when paged (the batch stride is then the page stride), else j rows on. */
__device__ __forceinline__ int64_t kv_row(const int32_t *pages, int page_size, int64_t j,
                                          int64_t page_stride, int64_t row_stride) {
    if (pages != nullptr) /* j < 2^31: 32-bit division */
        return pages[(int)j / page_size] * page_stride + (int64_t)((int)j % page_size) * row_stride;
    return j * row_stride;
}

/* (b, h, i) of row = (b * heads + h) * n + i over a padded [batch][heads][n]; n_rows is
 * batch * heads * n. 32-bit divisions while the rows fit (64-bit ones cost a short row more
 * than its keys: simple's forward measured 15-27 % slower at S = 4 with them). */
__device__ __forceinline__ void split_row(int64_t row, int64_t n_rows, int n, int heads, int *b,
                                          int *h, int *i) {
    if (n_rows <= 0x7fffffff) {
        const unsigned r = (unsigned)row, bh = r / (unsigned)n;
        *i = (int)(r - bh * (unsigned)n), *h = (int)(bh % (unsigned)heads), *b = (int)(bh / (unsigned)heads);
    } else {
        *i = (int)(row % n), *h = (int)(row / n % heads), *b = (int)(row / n / heads);
    }
}

/* Sequence b's length (attn_abi.h): its span of cu_seqlens when packed, else `dense`. */
__device__ __forceinline__ int seq_len(const int32_t *cu, int b, int dense) {
    return cu != nullptr ? cu[b + 1] - cu[b] : dense;
}

/* The keys sequence b uses, used_k(b): its stored keys, capped by seqused_k[b] when set
 * (0 <= seqused_k[b] <= stored, attn_abi.h; the clamp only keeps an invalid problem from
 * reading past the stored keys). */
__device__ __forceinline__ int used_keys(const int32_t *cu_seqlens_k, const int32_t *seqused_k, int b,
                                         int seqlen_k) {
    int used = seq_len(cu_seqlens_k, b, seqlen_k); /* the stored keys */
    if (seqused_k != nullptr) used = min(used, max(seqused_k[b], 0));
    return used;
}

/* The mask of attn_abi.h, for query i of a sequence of sq queries and sk used keys: key j is
 * visible iff 0 <= j < sk and -window_left <= j - (i + sk - sq) <= right, right = 0 when
 * causal, else window_right; a bound of -1 is unbounded. 64-bit so that huge windows cannot
 * overflow. The visible keys of query i are the range lo..hi (hi < lo: none). */
__device__ __forceinline__ void visible_keys(int64_t i, int sq, int sk, int window_left, int window_right,
                                             int causal, int64_t *lo, int64_t *hi) {
    const int64_t diag = i + sk - sq; /* the key aligned with query i */
    const int right = causal ? 0 : window_right;
    int64_t l = window_left >= 0 ? diag - window_left : 0;
    int64_t r = right >= 0 ? diag + right : (int64_t)sk - 1;
    *lo = l < 0 ? 0 : l;
    *hi = r > sk - 1 ? sk - 1 : r;
}

/* The same mask seen from key j (0 <= j < sk): the queries that see it are the range lo..hi
 * (hi < lo: none). With off = sk - sq, j - (i + off) <= right <=> i >= j - off - right, and
 * j - (i + off) >= -window_left <=> i <= j - off + window_left; 0 <= i < sq. */
__device__ __forceinline__ void seeing_queries(int64_t j, int sq, int sk, int window_left, int window_right,
                                               int causal, int64_t *lo, int64_t *hi) {
    const int64_t off = (int64_t)sk - sq;
    const int right = causal ? 0 : window_right;
    int64_t l = right >= 0 ? j - off - right : 0;
    int64_t r = window_left >= 0 ? j - off + window_left : (int64_t)sq - 1;
    *lo = l < 0 ? 0 : l;
    *hi = r > sq - 1 ? sq - 1 : r;
}

/* Index of (b, h, i)'s LSE: [heads][total_q] by token when Q is packed (total_q =
 * cu_seqlens_q[batch]), else `row`, its index in [batch][heads][seqlen_q]. */
__device__ __forceinline__ int64_t lse_index(const int32_t *cu_seqlens_q, int batch, int b, int h, int i,
                                             int64_t row) {
    return cu_seqlens_q != nullptr ? (int64_t)h * cu_seqlens_q[batch] + cu_seqlens_q[b] + i : row;
}

} // namespace warp_row

#endif
