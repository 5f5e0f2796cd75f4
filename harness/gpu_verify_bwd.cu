/* The backward problem's GPU helpers (gpu_verify.h): a dense float tensor stored into a
 * kernel's layout (the forward's O and LSE given to bwd), and the rows of dK and dV past a
 * sequence's used keys, which bwd may write as 0 or leave alone. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "device_memory.h"
#include "gpu_verify.h"

namespace {

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }

/* dense[b][h][r][d] (max_rows rows a head) into dst: row r of sequence b, head h at
 * (cu ? (cu[b] + r) * row_stride : b * batch_stride + r * row_stride) + h * head_stride + d,
 * for r below the sequence's length (cu's span, else max_rows). */
template <typename T>
__global__ void pack_rows_kernel(const float *dense, const int32_t *cu, int batch, int heads, int max_rows, int dim,
                                 int64_t batch_stride, int64_t head_stride, int64_t row_stride, T *dst) {
    const uint64_t n = (uint64_t)batch * heads * max_rows * dim;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t d = i % dim, r = i / dim % max_rows, h = i / dim / max_rows % heads, b = i / dim / max_rows / heads;
        if (cu && (int64_t)r >= (int64_t)cu[b + 1] - cu[b]) continue;
        const int64_t row = cu ? (int64_t)cu[b] + (int64_t)r : (int64_t)r;
        const int64_t at = (cu ? 0 : (int64_t)b * batch_stride) + row * row_stride + (int64_t)h * head_stride + (int64_t)d;
        dst[at] = from_float<T>(dense[i]);
    }
}

__device__ __forceinline__ unsigned short bits16(const __half *t, int64_t i) { return __half_as_ushort(t[i]); }
__device__ __forceinline__ unsigned short bits16(const __nv_bfloat16 *t, int64_t i) { return __bfloat16_as_ushort(t[i]); }

/* Rows j >= used[b] of a [batch][heads][rows][dim] tensor through the view: the poison's bits
 * (0xffff, never written) become 0, as bwd may leave them; anything but +-0 is counted. */
template <typename T>
__global__ void stale_rows_kernel(T *t, attn_tensor_view v, const int32_t *used, unsigned long long *count,
                                  unsigned long long *first) {
    const uint64_t n = (uint64_t)v.batch * v.heads * v.seq * v.dim;
    unsigned long long c = 0, f = ~0ull;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t d = i % v.dim, s = i / v.dim % v.seq, h = i / v.dim / v.seq % v.heads, b = i / v.dim / v.seq / v.heads;
        if ((int64_t)s < used[b]) continue;
        const int64_t at = (int64_t)b * v.batch_stride + (int64_t)h * v.head_stride + (int64_t)s * v.row_stride + d;
        const unsigned short bits = bits16(t, at);
        if (bits == 0xffff)
            t[at] = from_float<T>(0.0f);
        else if ((bits & 0x7fff) != 0)
            c++, f = min(f, (unsigned long long)i);
    }
    if (c) {
        atomicAdd(count, c);
        atomicMin(first, f);
    }
}

} // namespace

extern "C" cudaError_t attn_pack_rows(const float *dense, attn_store_type type, const int32_t *cu, int batch,
                                      int heads, int max_rows, int dim, int64_t batch_stride, int64_t head_stride,
                                      int64_t row_stride, void *dst, cudaStream_t stream) {
#define PACK(T) pack_rows_kernel<T><<<1024, 256, 0, stream>>>(dense, cu, batch, heads, max_rows, dim, batch_stride, \
                                                             head_stride, row_stride, (T *)dst)
    if (type == ATTN_STORE_F32)
        PACK(float);
    else if (type == ATTN_STORE_BF16)
        PACK(__nv_bfloat16);
    else
        PACK(__half);
#undef PACK
    return cudaGetLastError();
}

extern "C" cudaError_t attn_clear_stale_rows(void *t, attn_dtype dtype, const attn_tensor_view *v,
                                             const int32_t *used, attn_match *out, cudaStream_t stream) {
    unsigned long long *dev, host[2] = {0, ~0ull};
    cudaError_t e = attn_dev_malloc((void **)&dev, sizeof host);
    if (e != cudaSuccess) return e;
    e = cudaMemcpyAsync(dev, host, sizeof host, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) {
        if (dtype == ATTN_BF16)
            stale_rows_kernel<__nv_bfloat16><<<1024, 256, 0, stream>>>((__nv_bfloat16 *)t, *v, used, dev, dev + 1);
        else
            stale_rows_kernel<__half><<<1024, 256, 0, stream>>>((__half *)t, *v, used, dev, dev + 1);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(host, dev, sizeof host, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    attn_dev_free(dev);
    out->count = host[0], out->first = host[0] ? host[1] : 0;
    return e;
}
