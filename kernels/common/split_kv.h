/* Split-KV ("flash-decoding") partials and their combine, shared by the decode paths that cut
 * a row's keys over several CTAs (flash2's decode.cu, hopper's decode mode). Split s of output
 * row r = (b heads + h) seqlen_q + i of p writes, in the workspace:
 *   ws_o[(r nsplit + s) D + c]: its O normalised by its own sum (float32), only where the split
 *                               saw a key;
 *   ws_lse[r nsplit + s]:       its log-sum-exp in the log2 domain, -inf where it saw none;
 * and the combine merges a row's splits into O and the LSE (a row none saw: O = 0, LSE -inf). */
#ifndef ATTN_SPLIT_KV_H
#define ATTN_SPLIT_KV_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "attn_abi.h"

/* The partials of `rows` rows x nsplit, of d columns, from this device's pool (created by the
 * first call that needs one; freed blocks stay in it, so a warm call allocates without the
 * driver), stream-ordered on `stream`: *ws_o, then *ws_lse in the same allocation (release it
 * with cudaFreeAsync(*ws_o, stream) after the combine). ATTN_OK; ATTN_UNSUPPORTED when the
 * pool does not exist yet and `capturing` (creating one would end a stream capture); 2 on an
 * error. */
int split_kv_alloc(int dev, bool capturing, size_t rows, int nsplit, int d, cudaStream_t stream, float **ws_o,
                   float **ws_lse);

/* The most splits a row may have (the combine merges up to this many partials). */
#define SPLIT_KV_MAX 128

/* Splits per CTA's keys. A unit is one unsplit CTA's time; split s ways, a CTA takes 1/s of it
 * and the grid of base x s CTAs runs in ceil(base s / slots) rounds of `slots` (SMs x resident
 * CTAs per SM): cost(s) = ceil(base s / slots) / s. The fewest splits whose cost is within 10 %
 * of the best (fewer partials to write and combine), with at least min_tiles of the row's
 * `tiles` key tiles per split, at most SPLIT_KV_MAX. Lengths live on the device, so base and
 * tiles are the longest sequence's. */
int split_kv_count(int64_t base, int64_t tiles, int64_t slots, int min_tiles);

/* Launches the combine of p's rows (its dtype; O's columns, head_dim_v or head_dim, 64, 96, 128 or
 * 256; dense or packed Q) on
 * `stream`; with pdl (sm_90, not under capture) as a programmatic dependent launch, which the
 * split kernel must have allowed (griddepcontrol.launch_dependents). */
cudaError_t split_kv_combine(const attn_fwd_params &p, const float *ws_o, const float *ws_lse, int nsplit, bool pdl,
                             cudaStream_t stream);

/* Device helpers shared by the split kernels and the combine: output offsets, and two floats
 * packed into the dtype (round to nearest). */
#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T> struct SplitKvPack;
template <> struct SplitKvPack<__half> {
    static __device__ __forceinline__ uint32_t run(float lo, float hi) {
        __half2 h = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};
template <> struct SplitKvPack<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t run(float lo, float hi) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&h);
    }
};

/* Offset (elements) of row i of head h of sequence b in q or o: packed rows cu[b] + i, else
 * the dense strides. */
__device__ __forceinline__ int64_t split_kv_row_offset(const int32_t *cu, int b, int h, int i, int64_t batch_stride,
                                                       int64_t head_stride, int64_t row_stride) {
    if (cu) return ((int64_t)cu[b] + i) * row_stride + (int64_t)h * head_stride;
    return (int64_t)b * batch_stride + (int64_t)h * head_stride + (int64_t)i * row_stride;
}

/* Index of (b, h, i) in p.lse: [batch][heads][seqlen_q], or [heads][total_q] by token. */
__device__ __forceinline__ int64_t split_kv_lse_index(const attn_fwd_params &p, int b, int h, int i) {
    if (p.cu_seqlens_q) return (int64_t)h * p.cu_seqlens_q[p.batch] + p.cu_seqlens_q[b] + i;
    return ((int64_t)b * p.heads + h) * p.seqlen_q + i;
}
#endif

#endif
