/* GPU reference for attn_fwd_params: gather to float32, S = scale * Q.K^T (cuBLAS, fp32),
 * masked softmax (CUDA kernel, fp32), O = P.V (cuBLAS, fp32). See reference.h.
 *
 * Heads of one batch index are processed in chunks so that the float32 score buffer
 * S [chunk][seqlen_q][seqlen_k] stays <= 64 MiB (at least one head per chunk).
 * Scratch buffers live in the attn_reference and are reused, so calls that share one
 * attn_reference must be ordered (same stream, or synchronized in between). */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference.h"

#define SCORE_BUDGET_BYTES ((size_t)64 << 20)
#define MAX_HEAD_DIM 256
#define THREADS 256

struct attn_reference {
    cublasHandle_t blas;
    float *q, *k, *v, *s; /* scratch: [chunk][seq][head_dim] x3, [chunk][seqlen_q][seqlen_k] */
    size_t q_cap, k_cap, v_cap, s_cap; /* bytes */
    float *bs, *bp;       /* baseline scratch: float scores, dtype probabilities */
    size_t bs_cap, bp_cap;
};

/* ---- error reporting ------------------------------------------------------------- */

static int fail(char *err, size_t errlen, int line, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "reference.cu:%d: ", line);
        if (n >= 0 && (size_t)n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

/* CUDA_CALL(fn, args...) calls fn(args...) and returns from the enclosing function with
 * "reference.cu:LINE: fn: <error text>" in err on failure. Needs err/errlen in scope. */
#define CUDA_CALL(fn, ...)                                                                \
    do {                                                                                  \
        cudaError_t e_ = fn(__VA_ARGS__);                                                 \
        if (e_ != cudaSuccess)                                                            \
            return fail(err, errlen, __LINE__, "%s: %s (%s)", #fn, cudaGetErrorString(e_), \
                        cudaGetErrorName(e_));                                            \
    } while (0)

#define CUBLAS_CALL(fn, ...)                                                              \
    do {                                                                                  \
        cublasStatus_t s_ = fn(__VA_ARGS__);                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                  \
            return fail(err, errlen, __LINE__, "%s: %s (%s)", #fn, cublasGetStatusName(s_), \
                        cublasGetStatusString(s_));                                       \
    } while (0)

/* Kernel launches report configuration errors only through cudaGetLastError. */
#define LAUNCH_CHECK(name)                                                                \
    do {                                                                                  \
        cudaError_t e_ = cudaGetLastError();                                              \
        if (e_ != cudaSuccess)                                                            \
            return fail(err, errlen, __LINE__, "launch %s: %s (%s)", name,                \
                        cudaGetErrorString(e_), cudaGetErrorName(e_));                    \
    } while (0)

/* ---- kernels ---------------------------------------------------------------------- */

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/* Round-to-nearest-even to the kernel's dtype, back to float (exact). */
__device__ __forceinline__ float round_to(float x, int dtype)
{
    return dtype == ATTN_BF16 ? __bfloat162float(__float2bfloat16_rn(x))
                              : __half2float(__float2half_rn(x));
}

/* dst[h][r][d] = src[h*head_stride + r*row_stride + d], h < heads, r < rows, d < dim;
 * src already points at (batch b, first head of the chunk). Widening is exact. */
template <typename T>
__global__ void gather_kernel(const T *__restrict__ src, int64_t head_stride,
                              int64_t row_stride, int rows, int dim, int64_t total,
                              float *__restrict__ dst)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t d = idx % dim;
        int64_t r = (idx / dim) % rows;
        int64_t h = idx / ((int64_t)dim * rows);
        dst[idx] = to_float(src[h * head_stride + r * row_stride + d]);
    }
}

template <bool kMax>
__device__ float block_reduce(float v)
{
    __shared__ float buf[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = kMax ? fmaxf(v, w) : v + w;
    }
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? buf[lane] : (kMax ? -INFINITY : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_xor_sync(0xffffffffu, v, o);
            v = kMax ? fmaxf(v, w) : v + w;
        }
        if (lane == 0) buf[0] = v;
    }
    __syncthreads();
    v = buf[0];
    __syncthreads(); /* buf is reused by the next reduction */
    return v;
}

/* One block per score row (row = head_in_chunk * seqlen_q + i). Replaces S by P in place
 * and writes lse[row] (if lse != NULL; lse already points at the chunk's first head). */
__global__ void softmax_kernel(float *__restrict__ S, int seqlen_q, int seqlen_k, int causal,
                               int lowp, int dtype, float *__restrict__ lse)
{
    const int64_t row = blockIdx.x;
    const int64_t i = row % seqlen_q;
    float *s = S + row * seqlen_k;

    /* Bottom-right causal: key j is visible iff j <= i + seqlen_k - seqlen_q. */
    int64_t nvis = seqlen_k;
    if (causal) {
        nvis = i + seqlen_k - seqlen_q + 1;
        nvis = nvis < 0 ? 0 : (nvis > seqlen_k ? seqlen_k : nvis);
    }

    if (nvis == 0) { /* uniform across the block, so returning early is safe */
        for (int j = threadIdx.x; j < seqlen_k; j += blockDim.x) s[j] = 0.0f;
        if (lse && threadIdx.x == 0) lse[row] = -INFINITY;
        return;
    }

    float m = -INFINITY;
    for (int j = threadIdx.x; j < nvis; j += blockDim.x) m = fmaxf(m, s[j]);
    m = block_reduce<true>(m);

    float l = 0.0f;
    for (int j = threadIdx.x; j < nvis; j += blockDim.x) l += expf(s[j] - m);
    l = block_reduce<false>(l);

    for (int j = threadIdx.x; j < seqlen_k; j += blockDim.x) {
        float p = j < nvis ? expf(s[j] - m) / l : 0.0f;
        s[j] = lowp ? round_to(p, dtype) : p;
    }
    if (lse && threadIdx.x == 0) lse[row] = m + logf(l);
}

/* The baseline's softmax: one block per score row, P written in the input dtype (what an
 * unfused fp16/bf16 implementation feeds its second GEMM). */
template <typename T>
__global__ void softmax_to_dtype_kernel(const float *__restrict__ S, T *__restrict__ P,
                                        int seqlen_q, int seqlen_k, int causal)
{
    const int64_t row = blockIdx.x;
    const int64_t i = row % seqlen_q;
    const float *s = S + row * seqlen_k;
    T *pr = P + row * seqlen_k;
    int64_t nvis = seqlen_k;
    if (causal) {
        nvis = i + seqlen_k - seqlen_q + 1;
        nvis = nvis < 0 ? 0 : (nvis > seqlen_k ? seqlen_k : nvis);
    }
    float m = -INFINITY, l = 0.0f;
    if (nvis > 0) { /* uniform across the block */
        for (int j = threadIdx.x; j < nvis; j += blockDim.x) m = fmaxf(m, s[j]);
        m = block_reduce<true>(m);
        for (int j = threadIdx.x; j < nvis; j += blockDim.x) l += expf(s[j] - m);
        l = block_reduce<false>(l);
    }
    for (int j = threadIdx.x; j < seqlen_k; j += blockDim.x)
        pr[j] = (T)(j < nvis ? expf(s[j] - m) / l : 0.0f);
}

__global__ void round_kernel(float *x, int64_t n, int dtype)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x)
        x[idx] = round_to(x[idx], dtype);
}

/* ---- host helpers ----------------------------------------------------------------- */

static unsigned grid_for(int64_t n)
{
    int64_t g = (n + THREADS - 1) / THREADS;
    return (unsigned)(g < 1 ? 1 : (g > 65536 ? 65536 : g)); /* grid-stride loops do the rest */
}

/* Grows *buf to at least `bytes`. Old contents are not kept. */
static int grow(float **buf, size_t *cap, size_t bytes, char *err, size_t errlen)
{
    if (*cap >= bytes) return 0;
    if (*buf) {
        /* Earlier calls may still be reading the old buffer on some stream. */
        CUDA_CALL(cudaDeviceSynchronize);
        CUDA_CALL(cudaFree, *buf);
        *buf = NULL;
        *cap = 0;
    }
    CUDA_CALL(cudaMalloc, (void **)buf, bytes);
    *cap = bytes;
    return 0;
}

/* Gathers `heads` heads of one batch index (src points at its first head) into
 * contiguous float dst [heads][rows][dim]. */
static int gather(const void *src, attn_dtype dtype, int64_t head_stride, int64_t row_stride,
                  int heads, int rows, int dim, float *dst, cudaStream_t stream, char *err,
                  size_t errlen)
{
    const int64_t total = (int64_t)heads * rows * dim;
    if (dtype == ATTN_F16)
        gather_kernel<__half><<<grid_for(total), THREADS, 0, stream>>>(
            (const __half *)src, head_stride, row_stride, rows, dim, total, dst);
    else
        gather_kernel<__nv_bfloat16><<<grid_for(total), THREADS, 0, stream>>>(
            (const __nv_bfloat16 *)src, head_stride, row_stride, rows, dim, total, dst);
    LAUNCH_CHECK("gather_kernel");
    return 0;
}

static size_t elem_size(attn_dtype dtype)
{
    return dtype == ATTN_F16 ? sizeof(__half) : sizeof(__nv_bfloat16);
}

/* ---- public API ------------------------------------------------------------------- */

extern "C" int attn_ref_create(attn_reference **out, char *err, size_t errlen)
{
    if (!out) return fail(err, errlen, __LINE__, "attn_ref_create: out is NULL");
    *out = NULL;
    attn_reference *r = (attn_reference *)calloc(1, sizeof *r);
    if (!r) return fail(err, errlen, __LINE__, "attn_ref_create: out of host memory");
    cublasStatus_t s = cublasCreate(&r->blas);
    if (s == CUBLAS_STATUS_SUCCESS)
        /* DEFAULT keeps at least the requested precision with COMPUTE_32F: never TF32. */
        s = cublasSetMathMode(r->blas, CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (r->blas) cublasDestroy(r->blas);
        free(r);
        return fail(err, errlen, __LINE__, "cublasCreate/cublasSetMathMode: %s (%s)",
                    cublasGetStatusName(s), cublasGetStatusString(s));
    }
    *out = r;
    return 0;
}

extern "C" void attn_ref_destroy(attn_reference *r)
{
    if (!r) return;
    /* Errors are ignored: there is nowhere to report them. Pending work may still use
     * the buffers, so wait for it first. */
    cudaDeviceSynchronize();
    cudaFree(r->q);
    cudaFree(r->k);
    cudaFree(r->v);
    cudaFree(r->s);
    cudaFree(r->bs);
    cudaFree(r->bp);
    cublasDestroy(r->blas);
    free(r);
}

/* attn_ref_forward's arguments, checked; err names the first that is wrong. */
static int check_forward_args(const attn_reference *r, const attn_fwd_params *p,
                              attn_ref_variant variant, const float *o_out, char *err,
                              size_t errlen)
{
    if (!r || !p)
        return fail(err, errlen, __LINE__, "attn_ref_forward: NULL reference or params");
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16)
        return fail(err, errlen, __LINE__, "attn_ref_forward: unknown dtype %d", (int)p->dtype);
    if (variant != ATTN_REF_GOLDEN && variant != ATTN_REF_LOWP)
        return fail(err, errlen, __LINE__, "attn_ref_forward: unknown variant %d", (int)variant);
    if (p->batch <= 0 || p->heads <= 0 || p->seqlen_q <= 0 || p->seqlen_k <= 0 ||
        p->head_dim <= 0 || p->head_dim > MAX_HEAD_DIM)
        return fail(err, errlen, __LINE__,
                    "attn_ref_forward: bad shape batch=%d heads=%d seqlen_q=%d seqlen_k=%d "
                    "head_dim=%d (all must be > 0, head_dim <= %d)",
                    p->batch, p->heads, p->seqlen_q, p->seqlen_k, p->head_dim, MAX_HEAD_DIM);
    if (!p->q || !p->k || !p->v || !o_out)
        return fail(err, errlen, __LINE__, "attn_ref_forward: NULL q, k, v or o_out");
    return 0;
}

/* One attn_ref_forward call, as every chunk of it needs it (the scratch already grown). */
struct forward_job {
    attn_reference *r;
    const attn_fwd_params *p;
    int lowp;
    float *o_out, *lse_out;
    cudaStream_t stream;
};

/* Heads h0 .. h0 + nh - 1 of batch index b: gather, S = scale * Q.K^T, softmax, O = P.V,
 * enqueued on j->stream in that order. */
static int forward_chunk(const struct forward_job *j, int b, int h0, int nh, char *err,
                         size_t errlen)
{
    attn_reference *r = j->r;
    const attn_fwd_params *p = j->p;
    const cudaStream_t stream = j->stream;
    const int H = p->heads, Sq = p->seqlen_q, Sk = p->seqlen_k, D = p->head_dim;
    const float one = 1.0f, zero = 0.0f, scale = p->softmax_scale;
    const size_t es = elem_size(p->dtype);
    const char *qb = (const char *)p->q, *kb = (const char *)p->k, *vb = (const char *)p->v;

    /* a) Widen this chunk's Q, K, V into contiguous float [nh][seq][D]. */
    const int64_t qoff = b * p->q_batch_stride + h0 * p->q_head_stride;
    const int64_t koff = b * p->k_batch_stride + h0 * p->k_head_stride;
    const int64_t voff = b * p->v_batch_stride + h0 * p->v_head_stride;
    if (gather(qb + qoff * (int64_t)es, p->dtype, p->q_head_stride, p->q_row_stride,
               nh, Sq, D, r->q, stream, err, errlen) ||
        gather(kb + koff * (int64_t)es, p->dtype, p->k_head_stride, p->k_row_stride,
               nh, Sk, D, r->k, stream, err, errlen) ||
        gather(vb + voff * (int64_t)es, p->dtype, p->v_head_stride, p->v_row_stride,
               nh, Sk, D, r->v, stream, err, errlen))
        return -1;

    /* b) Row-major S [Sq][Sk] is column-major S^T (Sk x Sq, ld Sk) = K . Q^T, where
     *    row-major K [Sk][D] is column-major D x Sk (so op T) and row-major
     *    Q [Sq][D] is column-major D x Sq = Q^T (op N). */
    CUBLAS_CALL(cublasGemmStridedBatchedEx, r->blas, CUBLAS_OP_T, CUBLAS_OP_N,
                Sk, Sq, D, &scale,
                r->k, CUDA_R_32F, D, (long long)Sk * D,
                r->q, CUDA_R_32F, D, (long long)Sq * D,
                &zero,
                r->s, CUDA_R_32F, Sk, (long long)Sq * Sk,
                nh, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);

    /* c) S -> P in place, plus LSE. */
    const int64_t first_row = (int64_t)b * H + h0; /* (b, h0) in [B][H] */
    const int64_t rows = (int64_t)nh * Sq;
    if (rows > 0x7fffffff)
        return fail(err, errlen, __LINE__,
                    "attn_ref_forward: %lld softmax rows exceed the grid", (long long)rows);
    softmax_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(
        r->s, Sq, Sk, p->causal, j->lowp, (int)p->dtype,
        j->lse_out ? j->lse_out + first_row * Sq : NULL);
    LAUNCH_CHECK("softmax_kernel");

    /* d) Row-major O [Sq][D] is column-major O^T (D x Sq, ld D) = V^T . P^T, where
     *    row-major V [Sk][D] is column-major V^T (D x Sk, op N) and row-major
     *    P [Sq][Sk] is column-major P^T (Sk x Sq, op N). Written straight to o_out. */
    float *o = j->o_out + first_row * Sq * D;
    CUBLAS_CALL(cublasGemmStridedBatchedEx, r->blas, CUBLAS_OP_N, CUBLAS_OP_N,
                D, Sq, Sk, &one,
                r->v, CUDA_R_32F, D, (long long)Sk * D,
                r->s, CUDA_R_32F, Sk, (long long)Sq * Sk,
                &zero,
                o, CUDA_R_32F, D, (long long)Sq * D,
                nh, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);

    /* e) LOWP: O as the kernel's dtype would store it. */
    if (j->lowp) {
        const int64_t n = rows * D;
        round_kernel<<<grid_for(n), THREADS, 0, stream>>>(o, n, (int)p->dtype);
        LAUNCH_CHECK("round_kernel");
    }
    return 0;
}

extern "C" int attn_ref_forward(attn_reference *r, const attn_fwd_params *p,
                                attn_ref_variant variant, float *o_out, float *lse_out,
                                cudaStream_t stream, char *err, size_t errlen)
{
    if (check_forward_args(r, p, variant, o_out, err, errlen)) return -1;

    const int B = p->batch, H = p->heads, Sq = p->seqlen_q, Sk = p->seqlen_k, D = p->head_dim;

    /* Largest head chunk whose score buffer fits the budget, but at least one head. */
    const size_t head_score_bytes = (size_t)Sq * Sk * sizeof(float);
    size_t fit = SCORE_BUDGET_BYTES / head_score_bytes;
    const int chunk = fit < 1 ? 1 : (fit > (size_t)H ? H : (int)fit);

    if (grow(&r->q, &r->q_cap, (size_t)chunk * Sq * D * sizeof(float), err, errlen) ||
        grow(&r->k, &r->k_cap, (size_t)chunk * Sk * D * sizeof(float), err, errlen) ||
        grow(&r->v, &r->v_cap, (size_t)chunk * Sk * D * sizeof(float), err, errlen) ||
        grow(&r->s, &r->s_cap, (size_t)chunk * head_score_bytes, err, errlen))
        return -1;

    CUBLAS_CALL(cublasSetStream, r->blas, stream);

    const struct forward_job job = {r, p, variant == ATTN_REF_LOWP, o_out, lse_out, stream};
    for (int b = 0; b < B; b++) {
        for (int h0 = 0; h0 < H; h0 += chunk) {
            const int nh = H - h0 < chunk ? H - h0 : chunk;
            if (forward_chunk(&job, b, h0, nh, err, errlen)) return -1;
        }
    }
    return 0;
}

/* ---- the baseline: the same computation, unfused, as a naive fp16/bf16 implementation
 * runs it: tensor-core GEMMs straight on the inputs' strides (COMPUTE_32F), a float32
 * score buffer, P in the dtype, O written in the dtype through its strides. ---------- */

#define BASELINE_SCORE_BUDGET_BYTES ((size_t)512 << 20)

extern "C" int attn_ref_baseline(attn_reference *r, const attn_fwd_params *p,
                                 cudaStream_t stream, char *err, size_t errlen)
{
    if (!r || !p || !p->q || !p->k || !p->v || !p->o)
        return fail(err, errlen, __LINE__, "attn_ref_baseline: NULL argument");
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16)
        return fail(err, errlen, __LINE__, "attn_ref_baseline: unknown dtype %d", (int)p->dtype);
    const int Sq = p->seqlen_q, Sk = p->seqlen_k, D = p->head_dim;
    /* The GEMMs batch over one dimension with one stride per tensor and loop over the other.
     * (b, h) pairs flatten into one run when every tensor's batch stride is heads x its head
     * stride (contiguous BHSD); otherwise the larger of batch and heads is batched (BSHD at
     * S = 4 has 4096 batches of 16 heads: a loop over batches would make the baseline a
     * measure of 12 288 launches). */
    const int flat = p->q_batch_stride == p->heads * p->q_head_stride &&
                     p->k_batch_stride == p->heads * p->k_head_stride &&
                     p->v_batch_stride == p->heads * p->v_head_stride &&
                     p->o_batch_stride == p->heads * p->o_head_stride;
    const int inner_is_batch = !flat && p->batch > p->heads;
    const int64_t n_outer = flat ? 1 : inner_is_batch ? p->heads : p->batch;
    const int64_t n_inner = flat ? (int64_t)p->batch * p->heads : inner_is_batch ? p->batch : p->heads;
    /* element strides along the batched (inner) and the looped (outer) dimension */
    const int64_t q_in = inner_is_batch ? p->q_batch_stride : p->q_head_stride;
    const int64_t k_in = inner_is_batch ? p->k_batch_stride : p->k_head_stride;
    const int64_t v_in = inner_is_batch ? p->v_batch_stride : p->v_head_stride;
    const int64_t o_in = inner_is_batch ? p->o_batch_stride : p->o_head_stride;
    const int64_t q_out = inner_is_batch ? p->q_head_stride : p->q_batch_stride;
    const int64_t k_out = inner_is_batch ? p->k_head_stride : p->k_batch_stride;
    const int64_t v_out = inner_is_batch ? p->v_head_stride : p->v_batch_stride;
    const int64_t o_out = inner_is_batch ? p->o_head_stride : p->o_batch_stride;
    const size_t head_score_bytes = (size_t)Sq * Sk * sizeof(float);
    size_t fit = BASELINE_SCORE_BUDGET_BYTES / head_score_bytes;
    const int64_t chunk = fit < 1 ? 1 : ((int64_t)fit > n_inner ? n_inner : (int64_t)fit);
    const size_t es = elem_size(p->dtype);
    if (grow(&r->bs, &r->bs_cap, (size_t)chunk * head_score_bytes, err, errlen) ||
        grow(&r->bp, &r->bp_cap, (size_t)chunk * Sq * Sk * es, err, errlen))
        return -1;
    CUBLAS_CALL(cublasSetStream, r->blas, stream);
    const cudaDataType_t dt = p->dtype == ATTN_F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float one = 1.0f, zero = 0.0f, scale = p->softmax_scale;
    for (int64_t a = 0; a < n_outer; a++) {
        for (int64_t i0 = 0; i0 < n_inner; i0 += chunk) {
            const int n = (int)(n_inner - i0 < chunk ? n_inner - i0 : chunk);
            const char *q = (const char *)p->q + (a * q_out + i0 * q_in) * es;
            const char *k = (const char *)p->k + (a * k_out + i0 * k_in) * es;
            const char *v = (const char *)p->v + (a * v_out + i0 * v_in) * es;
            char *o = (char *)p->o + (a * o_out + i0 * o_in) * es;
            /* S^T (col-major Sk x Sq) = K . Q^T, as in attn_ref_forward, on the dtype inputs */
            CUBLAS_CALL(cublasGemmStridedBatchedEx, r->blas, CUBLAS_OP_T, CUBLAS_OP_N,
                        Sk, Sq, D, &scale,
                        k, dt, (int)p->k_row_stride, (long long)k_in,
                        q, dt, (int)p->q_row_stride, (long long)q_in,
                        &zero, r->bs, CUDA_R_32F, Sk, (long long)Sq * Sk,
                        n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            const int64_t rows = (int64_t)n * Sq;
            if (rows > 0x7fffffff)
                return fail(err, errlen, __LINE__, "attn_ref_baseline: too many softmax rows");
            if (p->dtype == ATTN_F16)
                softmax_to_dtype_kernel<__half><<<(unsigned)rows, THREADS, 0, stream>>>(
                    r->bs, (__half *)r->bp, Sq, Sk, p->causal);
            else
                softmax_to_dtype_kernel<__nv_bfloat16><<<(unsigned)rows, THREADS, 0, stream>>>(
                    r->bs, (__nv_bfloat16 *)r->bp, Sq, Sk, p->causal);
            LAUNCH_CHECK("softmax_to_dtype_kernel");
            /* O^T (col-major D x Sq, ld = O's row stride) = V^T . P^T */
            CUBLAS_CALL(cublasGemmStridedBatchedEx, r->blas, CUBLAS_OP_N, CUBLAS_OP_N,
                        D, Sq, Sk, &one,
                        v, dt, (int)p->v_row_stride, (long long)v_in,
                        r->bp, dt, Sk, (long long)Sq * Sk,
                        &zero, o, dt, (int)p->o_row_stride, (long long)o_in,
                        n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        }
    }
    return 0;
}
