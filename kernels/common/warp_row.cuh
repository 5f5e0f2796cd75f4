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

} // namespace warp_row

#endif
