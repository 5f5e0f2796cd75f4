/* What the forward (reference.cu) and the backward (reference_bwd.cu) of the GPU reference
 * share: the scratch they keep in struct attn_reference, error reporting, the gather of any
 * layout into dense float, the mask rule and the masked softmax, and the problem's checks.
 * Private to reference/: nothing outside it includes this file.
 *
 * A file that includes it first defines REF_FILE, its own name, for its error messages. */
#ifndef ATTN_REFERENCE_INTERNAL_CUH
#define ATTN_REFERENCE_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "reference.h"

#ifndef REF_FILE
#error "define REF_FILE (the including file's name, for error messages) first"
#endif

#define SCORE_BUDGET_BYTES ((size_t)64 << 20)
#define MAX_HEAD_DIM 256
#define THREADS 256

struct attn_reference {
    cublasHandle_t blas;
    float *q, *k, *v, *s; /* scratch: [chunk][seq][head_dim] x3, [chunk][seqlen_q][seqlen_k] */
    size_t q_cap, k_cap, v_cap, s_cap; /* bytes */
    float *bs, *bp;       /* baseline scratch: float scores, dtype probabilities */
    size_t bs_cap, bp_cap;
    /* backward scratch: P and dP (then dS) [chunk][seqlen_q][seqlen_k]; dO and the given O
     * [chunk][seqlen_q][head_dim_v]; each query head's dK [chunk][seqlen_k][head_dim] and dV
     * [chunk][seqlen_k][head_dim_v] before a KV head's group sums them */
    float *p, *ds, *dout, *o, *dk, *dv;
    size_t p_cap, ds_cap, dout_cap, o_cap, dk_cap, dv_cap;
};

/* ---- error reporting ------------------------------------------------------------- */

static inline int fail(char *err, size_t errlen, int line, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, REF_FILE ":%d: ", line);
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
 * "<REF_FILE>:LINE: fn: <error text>" in err on failure. Needs err/errlen in scope. */
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

namespace attn_ref_internal {

/* ---- device helpers --------------------------------------------------------------- */

/* Round-to-nearest-even to the kernel's dtype, back to float (exact). */
static __device__ __forceinline__ float round_to(float x, int dtype)
{
    return dtype == ATTN_BF16 ? __bfloat162float(__float2bfloat16_rn(x))
                              : __half2float(__float2half_rn(x));
}

template <bool kMax>
static __device__ float block_reduce(float v)
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

/* The mask and softcap of one problem (attn_abi.h): key j is visible to query i iff
 * -left <= j - (i + seqlen_k - seqlen_q) <= right, 0 <= j < seqlen_k (left, right < 0:
 * unbounded); scores are capped before anything else reads them. */
struct score_rule {
    int left, right;
    float softcap; /* 0: off */
};

/* The keys [*lo, *hi) that query i sees (*hi <= *lo: none). */
static __device__ __forceinline__ void visible_keys(int64_t i, int seqlen_q, int seqlen_k, score_rule rule,
                                                    int64_t *lo, int64_t *hi)
{
    const int64_t diag = i + seqlen_k - seqlen_q;
    int64_t l = rule.left < 0 ? 0 : diag - rule.left, h = rule.right < 0 ? seqlen_k : diag + rule.right + 1;
    *lo = l < 0 ? 0 : l;
    *hi = h > seqlen_k ? seqlen_k : h;
}

/* ---- host helpers ----------------------------------------------------------------- */

/* Where one sequence's rows of one tensor are: row r of head h (h counted from the chunk's
 * first query head h0) is at src + (h0 + h) / group * head_stride + row(r) + d, with
 * row(r) = r * row_stride, or through the sequence's block table (pages). */
struct rows_view {
    const void *src;      /* the sequence's first row (dense, packed) or the pool (paged) */
    int64_t head_stride, row_stride, page_stride;
    const int32_t *pages; /* NULL, or this sequence's block table row (device) */
    int page_size;
    int h0, group;        /* first query head of the chunk; query heads per KV head */
};

/* One sequence: its lengths, and where its rows start in q (and o) and in k and v. */
struct sequence {
    int b, sq, sk;
    int64_t q_off, k_off, v_off; /* elements, to its first row of head 0 (k, v: 0 when paged) */
};

static inline unsigned grid_for(int64_t n)
{
    int64_t g = (n + THREADS - 1) / THREADS;
    return (unsigned)(g < 1 ? 1 : (g > 65536 ? 65536 : g)); /* grid-stride loops do the rest */
}

static inline size_t elem_size(attn_dtype dtype)
{
    return dtype == ATTN_F16 ? sizeof(__half) : sizeof(__nv_bfloat16);
}

/* The first row of sequence b in a tensor laid out as Q (packed by cu_seqlens_q when cq, the
 * host copy, is set): elements from the tensor's start. */
static inline int64_t first_row_q(const int32_t *cq, int b, int64_t batch_stride, int64_t row_stride)
{
    return cq ? (int64_t)cq[b] * row_stride : (int64_t)b * batch_stride;
}

/* Defined in reference.cu. `fn` names the public function in the messages. */
int grow(float **buf, size_t *cap, size_t bytes, char *err, size_t errlen);
int gather(const rows_view *w, attn_dtype dtype, int heads, int rows, int dim, float *dst, cudaStream_t stream,
           char *err, size_t errlen);
/* P from the raw scaled scores S [rows][seqlen_k] (rows = heads * seqlen_q, head-major): capped,
 * masked, softmax; P may be S (in place); lse as softmax_kernel's. LOWP: P in the dtype. */
int softmax_rows(const float *S, float *P, int64_t rows, int seqlen_q, int seqlen_k, score_rule rule, int lowp,
                 int dtype, float *lse, int64_t lse_head_stride, cudaStream_t stream, const char *fn, char *err,
                 size_t errlen);
int round_floats(float *x, int64_t n, int dtype, cudaStream_t stream, char *err, size_t errlen);
/* p's scalars and pointers (dtype, variant, shape, q, k, v, the rules of attn_abi.h). */
int check_problem(const attn_fwd_params *p, attn_ref_variant variant, const char *fn, char *err, size_t errlen);
int check_sequences(const attn_fwd_params *p, const int32_t *cq, const int32_t *ck, const int32_t *used,
                    const int32_t *table, const char *fn, char *err, size_t errlen);
int to_host(const int32_t *src, int n, int32_t **out, cudaStream_t stream, const char *fn, char *err,
            size_t errlen);
sequence sequence_of(const attn_fwd_params *p, int b, const int32_t *cq, const int32_t *ck, const int32_t *used);
rows_view kv_view(const attn_fwd_params *p, int t, const sequence *sqn, int h0);

} /* namespace attn_ref_internal */

#endif
