/* GPU reference for attn_fwd_params: gather to float32, S = scale * Q.K^T (cuBLAS, fp32),
 * softcap and mask and softmax (CUDA kernel, fp32), O = P.V (cuBLAS, fp32). See reference.h.
 *
 * One sequence at a time, with its own lengths (cu_seqlens, seqused_k), its heads in chunks
 * so that the float32 score buffer S [chunk][seqlen_q][seqlen_k] stays <= 64 MiB (at least
 * one head per chunk). The gather reads every version-2 layout (grouped KV heads, packed
 * rows, pages) into dense float; everything after it is the same for all of them.
 * Scratch buffers live in the attn_reference and are reused, so calls that share one
 * attn_reference must be ordered (same stream, or synchronized in between). The backward
 * pass is reference_bwd.cu; what the two share, reference_internal.cuh. */
#include <math.h>
#include <stdlib.h>

#define REF_FILE "reference.cu"
#include "reference_internal.cuh"

using namespace attn_ref_internal;

/* ---- kernels ---------------------------------------------------------------------- */

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/* dst[h][r][d] = the view's element (h, r, d), h < heads, r < rows, d < dim. Widening is exact. */
template <typename T>
__global__ void gather_kernel(rows_view w, int rows, int dim, int64_t total, float *__restrict__ dst)
{
    const T *src = (const T *)w.src;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t d = idx % dim;
        int64_t r = (idx / dim) % rows;
        int64_t h = idx / ((int64_t)dim * rows);
        int64_t row = w.pages ? (int64_t)w.pages[r / w.page_size] * w.page_stride + (r % w.page_size) * w.row_stride
                              : r * w.row_stride;
        dst[idx] = to_float(src[(w.h0 + h) / w.group * w.head_stride + row + d]);
    }
}

/* One block per score row (row = head_in_chunk * seqlen_q + i): P from the raw scaled scores
 * S (P may be S: in place; else S is left as it was) and lse[h * lse_head_stride + i] (if lse
 * != NULL; lse already points at the chunk's first head). */
static __global__ void softmax_kernel(const float *S, float *P, int seqlen_q, int seqlen_k, score_rule rule, int lowp,
                               int dtype, float *__restrict__ lse, int64_t lse_head_stride)
{
    const int64_t row = blockIdx.x;
    const int64_t i = row % seqlen_q, h = row / seqlen_q;
    const float *s = S + row * seqlen_k;
    float *p = P + row * seqlen_k;

    int64_t lo, hi;
    visible_keys(i, seqlen_q, seqlen_k, rule, &lo, &hi);
    float *lse_row = lse ? lse + h * lse_head_stride + i : NULL;

    if (hi <= lo) { /* uniform across the block, so returning early is safe */
        for (int j = threadIdx.x; j < seqlen_k; j += blockDim.x) p[j] = 0.0f;
        if (lse_row && threadIdx.x == 0) *lse_row = -INFINITY;
        return;
    }
    if (rule.softcap > 0) { /* the capped scores go to P, read from there on */
        for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) p[j] = rule.softcap * tanhf(s[j] / rule.softcap);
        s = p;
    }

    float m = -INFINITY;
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) m = fmaxf(m, s[j]);
    m = block_reduce<true>(m); /* its barriers also publish the capped scores to every thread */

    float l = 0.0f;
    for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) l += expf(s[j] - m);
    l = block_reduce<false>(l);

    for (int j = threadIdx.x; j < seqlen_k; j += blockDim.x) { /* reads s[j] before writing p[j] */
        float pj = j >= lo && j < hi ? expf(s[j] - m) / l : 0.0f;
        p[j] = lowp ? round_to(pj, dtype) : pj;
    }
    if (lse_row && threadIdx.x == 0) *lse_row = m + logf(l);
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

static __global__ void round_kernel(float *x, int64_t n, int dtype)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x)
        x[idx] = round_to(x[idx], dtype);
}

/* ---- host helpers shared with reference_bwd.cu (reference_internal.cuh) ------------- */

namespace attn_ref_internal {

/* Grows *buf to at least `bytes`. Old contents are not kept. */
int grow(float **buf, size_t *cap, size_t bytes, char *err, size_t errlen)
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

/* Gathers `heads` heads of one sequence, as the view places them, into contiguous float
 * dst [heads][rows][dim]. */
int gather(const rows_view *w, attn_dtype dtype, int heads, int rows, int dim, float *dst, cudaStream_t stream,
           char *err, size_t errlen)
{
    const int64_t total = (int64_t)heads * rows * dim;
    if (total == 0) return 0;
    if (dtype == ATTN_F16)
        gather_kernel<__half><<<grid_for(total), THREADS, 0, stream>>>(*w, rows, dim, total, dst);
    else
        gather_kernel<__nv_bfloat16><<<grid_for(total), THREADS, 0, stream>>>(*w, rows, dim, total, dst);
    LAUNCH_CHECK("gather_kernel");
    return 0;
}

int softmax_rows(const float *S, float *P, int64_t rows, int seqlen_q, int seqlen_k, score_rule rule, int lowp,
                 int dtype, float *lse, int64_t lse_head_stride, cudaStream_t stream, const char *fn, char *err,
                 size_t errlen)
{
    if (rows > 0x7fffffff)
        return fail(err, errlen, __LINE__, "%s: %lld softmax rows exceed the grid", fn, (long long)rows);
    softmax_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(S, P, seqlen_q, seqlen_k, rule, lowp, dtype, lse,
                                                           lse_head_stride);
    LAUNCH_CHECK("softmax_kernel");
    return 0;
}

/* x[0..n) rounded to the dtype in place. */
int round_floats(float *x, int64_t n, int dtype, cudaStream_t stream, char *err, size_t errlen)
{
    if (n <= 0) return 0;
    round_kernel<<<grid_for(n), THREADS, 0, stream>>>(x, n, dtype);
    LAUNCH_CHECK("round_kernel");
    return 0;
}

} /* namespace attn_ref_internal */

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
    float *bwd[] = {r->p, r->ds, r->dout, r->o, r->dk, r->dv};
    for (size_t i = 0; i < sizeof bwd / sizeof bwd[0]; i++) cudaFree(bwd[i]);
    cublasDestroy(r->blas);
    free(r);
}

/* The rules of attn_abi.h that p's scalars decide, as harness/problem.h's attn_problem_check
 * has them (the harness checks every rule before it asks for a reference; these keep any
 * other caller from a silent wrong answer or a fault): an invalid problem is refused. */
static int check_rules(const attn_fwd_params *p, const char *fn, char *err, size_t errlen)
{
    if (p->window_left < -1 || p->window_right < -1 || (p->causal && p->window_right > 0))
        return fail(err, errlen, __LINE__,
                    "%s: window_left %d, window_right %d%s: invalid (each >= -1, and causal means "
                    "window_right 0)", fn, p->window_left, p->window_right, p->causal ? " with causal" : "");
    if (p->block_table && (p->cu_seqlens_k || p->page_size < 1 || p->num_pages < 1 || p->block_table_stride < 1 ||
                           (int64_t)p->block_table_stride * p->page_size < p->seqlen_k))
        return fail(err, errlen, __LINE__,
                    "%s: paged K/V with%s cu_seqlens_k, page_size %d, num_pages %d, block_table_stride "
                    "%d, seqlen_k %d: invalid (no cu_seqlens_k, each >= 1, block_table_stride * page_size >= seqlen_k)",
                    fn, p->cu_seqlens_k ? "" : "out", p->page_size, p->num_pages, p->block_table_stride, p->seqlen_k);
    const int64_t strides[12] = {p->q_batch_stride, p->q_head_stride, p->q_row_stride, p->k_batch_stride,
                                 p->k_head_stride,  p->k_row_stride,  p->v_batch_stride, p->v_head_stride,
                                 p->v_row_stride,   p->o_batch_stride, p->o_head_stride, p->o_row_stride};
    static const char *const names[12] = {"q_batch", "q_head", "q_row", "k_batch", "k_head", "k_row",
                                           "v_batch", "v_head", "v_row", "o_batch", "o_head", "o_row"};
    for (int i = 0; i < 12; i++)
        if (strides[i] < 0)
            return fail(err, errlen, __LINE__, "%s: %s_stride %lld must be >= 0", fn, names[i],
                        (long long)strides[i]);
    return 0;
}

/* The rules of attn_abi.h on the problem's arrays (host copies: cq, ck, used, table; NULL where
 * p has none), as attn_problem_check has them: no row stride 0 over more than one row, each
 * sequence's used keys within its stored ones, the block-table entries it reads (its first
 * ceil(used / page_size), the only ones the gather reads) inside the pool. */
int attn_ref_internal::check_sequences(const attn_fwd_params *p, const int32_t *cq, const int32_t *ck,
                                       const int32_t *used, const int32_t *table, const char *fn, char *err,
                                       size_t errlen)
{
    const int64_t rows_q = cq ? cq[p->batch] : p->seqlen_q;
    const int64_t rows_k = p->block_table ? p->page_size : ck ? ck[p->batch] : p->seqlen_k;
    if ((rows_q > 1 && (p->q_row_stride == 0 || p->o_row_stride == 0)) ||
        (rows_k > 1 && (p->k_row_stride == 0 || p->v_row_stride == 0)))
        return fail(err, errlen, __LINE__,
                    "%s: a row stride of 0 (q %lld, k %lld, v %lld, o %lld) over more than one row "
                    "(%lld of Q and O, %lld of K and V): invalid", fn, (long long)p->q_row_stride,
                    (long long)p->k_row_stride, (long long)p->v_row_stride, (long long)p->o_row_stride,
                    (long long)rows_q, (long long)rows_k);
    for (int b = 0; b < p->batch; b++) {
        const int stored = ck ? ck[b + 1] - ck[b] : p->seqlen_k;
        if (used && (used[b] < 0 || used[b] > stored))
            return fail(err, errlen, __LINE__, "%s: seqused_k[%d] = %d is outside [0, %d]", fn, b, used[b],
                        stored);
        const int64_t n = table ? ((int64_t)(used ? used[b] : stored) + p->page_size - 1) / p->page_size : 0;
        for (int64_t j = 0; j < n; j++) {
            const int32_t page = table[(int64_t)b * p->block_table_stride + j];
            if (page < 0 || page >= p->num_pages)
                return fail(err, errlen, __LINE__,
                            "%s: block_table[%d][%lld] = %d is outside the pool (num_pages %d)", fn, b,
                            (long long)j, page, p->num_pages);
        }
    }
    return 0;
}

/* The problem's scalars and inputs, checked; err names the first that is wrong. (Whether the
 * problem itself is well-formed is harness/problem.h's attn_problem_check; the rules above
 * are the reference's guard.) */
int attn_ref_internal::check_problem(const attn_fwd_params *p, attn_ref_variant variant, const char *fn, char *err,
                                     size_t errlen)
{
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16)
        return fail(err, errlen, __LINE__, "%s: unknown dtype %d", fn, (int)p->dtype);
    if (variant != ATTN_REF_GOLDEN && variant != ATTN_REF_LOWP)
        return fail(err, errlen, __LINE__, "%s: unknown variant %d", fn, (int)variant);
    const int dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
    if (p->batch <= 0 || p->heads <= 0 || p->seqlen_q <= 0 || p->seqlen_k <= 0 ||
        p->head_dim <= 0 || p->head_dim > MAX_HEAD_DIM || dv <= 0 || dv > MAX_HEAD_DIM ||
        p->heads_k <= 0 || p->heads % p->heads_k)
        return fail(err, errlen, __LINE__,
                    "%s: bad shape batch=%d heads=%d heads_k=%d seqlen_q=%d seqlen_k=%d "
                    "head_dim=%d head_dim_v=%d (all must be > 0, heads_k must divide heads, head dims <= %d)",
                    fn, p->batch, p->heads, p->heads_k, p->seqlen_q, p->seqlen_k, p->head_dim, p->head_dim_v,
                    MAX_HEAD_DIM);
    if (!p->q || !p->k || !p->v) return fail(err, errlen, __LINE__, "%s: NULL q, k or v", fn);
    return check_rules(p, fn, err, errlen);
}

/* attn_ref_forward's arguments: the problem, and where O goes. */
static int check_forward_args(const attn_reference *r, const attn_fwd_params *p, attn_ref_variant variant,
                              const float *o_out, char *err, size_t errlen)
{
    if (!r || !p)
        return fail(err, errlen, __LINE__, "attn_ref_forward: NULL reference or params");
    if (!o_out) return fail(err, errlen, __LINE__, "attn_ref_forward: NULL o_out");
    return check_problem(p, variant, "attn_ref_forward", err, errlen);
}

/* One attn_ref_forward call, as every chunk of it needs it (the scratch already grown). */
struct forward_job {
    attn_reference *r;
    const attn_fwd_params *p;
    int lowp, dv;
    score_rule rule;
    float *o_out, *lse_out;
    cudaStream_t stream;
};

/* The view of tensor k or v (t = 1, 2) of sequence sqn, for query heads from h0. */
rows_view attn_ref_internal::kv_view(const attn_fwd_params *p, int t, const sequence *sqn, int h0)
{
    const int64_t es = (int64_t)elem_size(p->dtype);
    const char *base = (const char *)(t == 1 ? p->k : p->v);
    rows_view w;
    w.src = base + (t == 1 ? sqn->k_off : sqn->v_off) * es;
    w.head_stride = t == 1 ? p->k_head_stride : p->v_head_stride;
    w.row_stride = t == 1 ? p->k_row_stride : p->v_row_stride;
    w.page_stride = t == 1 ? p->k_batch_stride : p->v_batch_stride;
    w.pages = p->block_table ? p->block_table + (int64_t)sqn->b * p->block_table_stride : NULL;
    w.page_size = p->page_size;
    w.h0 = h0;
    w.group = p->heads / p->heads_k;
    return w;
}

/* Rows that see no key (a sequence without keys): O zero, LSE -inf. */
static __global__ void keyless_rows_kernel(float *o, int64_t o_head_stride, int rows, int dim, int nh, float *lse,
                                    int64_t lse_head_stride)
{
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < (int64_t)nh * rows * dim;
         idx += (int64_t)gridDim.x * blockDim.x) {
        int64_t d = idx % dim, r = idx / dim % rows, h = idx / ((int64_t)dim * rows);
        o[h * o_head_stride + r * dim + d] = 0.0f;
        if (lse && d == 0) lse[h * lse_head_stride + r] = -INFINITY;
    }
}

/* Heads h0 .. h0 + nh - 1 of one sequence: gather, S = scale * Q.K^T, softmax, O = P.V,
 * enqueued on j->stream in that order. O and LSE go to their rows of the dense outputs
 * [batch][heads][seqlen_q][.]; rows past the sequence's length are not written. */
static int forward_chunk(const struct forward_job *j, const sequence *sqn, int h0, int nh, char *err,
                         size_t errlen)
{
    attn_reference *r = j->r;
    const attn_fwd_params *p = j->p;
    const cudaStream_t stream = j->stream;
    const int H = p->heads, Sq = sqn->sq, Sk = sqn->sk, D = p->head_dim, Dv = j->dv;
    const int64_t maxq = p->seqlen_q;
    const float one = 1.0f, zero = 0.0f, scale = p->softmax_scale;
    const int64_t first_row = (int64_t)sqn->b * H + h0; /* (b, h0) in [B][H] */
    float *o = j->o_out + first_row * maxq * Dv;
    float *lse = j->lse_out ? j->lse_out + first_row * maxq : NULL;
    if (Sq == 0) return 0;
    if (Sk == 0) {
        keyless_rows_kernel<<<grid_for((int64_t)nh * Sq * Dv), THREADS, 0, stream>>>(o, maxq * Dv, Sq, Dv, nh, lse,
                                                                                     maxq);
        LAUNCH_CHECK("keyless_rows_kernel");
        return 0;
    }

    /* a) Widen this chunk's Q, K, V into contiguous float [nh][seq][D or Dv]. */
    rows_view qv = {(const char *)p->q + sqn->q_off * (int64_t)elem_size(p->dtype), p->q_head_stride, p->q_row_stride, 0, NULL, 1, h0, 1};
    rows_view kv = kv_view(p, 1, sqn, h0), vv = kv_view(p, 2, sqn, h0);
    if (gather(&qv, p->dtype, nh, Sq, D, r->q, stream, err, errlen) ||
        gather(&kv, p->dtype, nh, Sk, D, r->k, stream, err, errlen) ||
        gather(&vv, p->dtype, nh, Sk, Dv, r->v, stream, err, errlen))
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

    /* c) softcap, mask, S -> P in place, plus LSE. */
    if (softmax_rows(r->s, r->s, (int64_t)nh * Sq, Sq, Sk, j->rule, j->lowp, (int)p->dtype, lse, maxq, stream,
                     "attn_ref_forward", err, errlen))
        return -1;

    /* d) Row-major O [Sq][Dv] is column-major O^T (Dv x Sq, ld Dv) = V^T . P^T, where
     *    row-major V [Sk][Dv] is column-major V^T (Dv x Sk, op N) and row-major
     *    P [Sq][Sk] is column-major P^T (Sk x Sq, op N). Written straight to o_out. */
    CUBLAS_CALL(cublasGemmStridedBatchedEx, r->blas, CUBLAS_OP_N, CUBLAS_OP_N,
                Dv, Sq, Sk, &one,
                r->v, CUDA_R_32F, Dv, (long long)Sk * Dv,
                r->s, CUDA_R_32F, Sk, (long long)Sq * Sk,
                &zero,
                o, CUDA_R_32F, Dv, (long long)maxq * Dv,
                nh, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);

    /* e) LOWP: O as the kernel's dtype would store it (rows not written stay NaN). */
    if (j->lowp) return round_floats(o, ((int64_t)(nh - 1) * maxq + Sq) * Dv, (int)p->dtype, stream, err, errlen);
    return 0;
}

/* A device int32 array of n into a new host array (NULL when src is NULL); waits for it. */
int attn_ref_internal::to_host(const int32_t *src, int n, int32_t **out, cudaStream_t stream, const char *fn,
                               char *err, size_t errlen)
{
    *out = NULL;
    if (!src) return 0;
    *out = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    if (!*out) return fail(err, errlen, __LINE__, "%s: out of host memory", fn);
    CUDA_CALL(cudaMemcpyAsync, *out, src, (size_t)n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
    CUDA_CALL(cudaStreamSynchronize, stream);
    return 0;
}

/* Sequence b's lengths and first rows, from the host copies of the problem's arrays. */
sequence attn_ref_internal::sequence_of(const attn_fwd_params *p, int b, const int32_t *cq, const int32_t *ck,
                                       const int32_t *used)
{
    sequence s;
    s.b = b;
    s.sq = cq ? cq[b + 1] - cq[b] : p->seqlen_q;
    s.sk = ck ? ck[b + 1] - ck[b] : p->seqlen_k;
    if (used) s.sk = used[b];
    s.q_off = first_row_q(cq, b, p->q_batch_stride, p->q_row_stride);
    s.k_off = p->block_table ? 0 : ck ? (int64_t)ck[b] * p->k_row_stride : (int64_t)b * p->k_batch_stride;
    s.v_off = p->block_table ? 0 : ck ? (int64_t)ck[b] * p->v_row_stride : (int64_t)b * p->v_batch_stride;
    return s;
}

static int forward_all(const struct forward_job *job, int chunk, const int32_t *cq, const int32_t *ck,
                       const int32_t *used, char *err, size_t errlen)
{
    const attn_fwd_params *p = job->p;
    for (int b = 0; b < p->batch; b++) {
        const sequence sqn = sequence_of(p, b, cq, ck, used);
        for (int h0 = 0; h0 < p->heads; h0 += chunk) {
            const int nh = p->heads - h0 < chunk ? p->heads - h0 : chunk;
            if (forward_chunk(job, &sqn, h0, nh, err, errlen)) return -1;
        }
    }
    return 0;
}

/* attn_ref_forward once its problem is checked (cq, ck, used: the host copies, or NULL). */
static int forward_checked(attn_reference *r, const attn_fwd_params *p, attn_ref_variant variant, float *o_out,
                           float *lse_out, cudaStream_t stream, const int32_t *cq, const int32_t *ck,
                           const int32_t *used, char *err, size_t errlen)
{
    const int H = p->heads, Sq = p->seqlen_q, Sk = p->seqlen_k, D = p->head_dim;
    const int Dv = p->head_dim_v ? p->head_dim_v : D;

    /* Largest head chunk whose score buffer fits the budget, but at least one head. */
    const size_t head_score_bytes = (size_t)Sq * Sk * sizeof(float);
    size_t fit = SCORE_BUDGET_BYTES / head_score_bytes;
    const int chunk = fit < 1 ? 1 : (fit > (size_t)H ? H : (int)fit);

    if (grow(&r->q, &r->q_cap, (size_t)chunk * Sq * D * sizeof(float), err, errlen) ||
        grow(&r->k, &r->k_cap, (size_t)chunk * Sk * D * sizeof(float), err, errlen) ||
        grow(&r->v, &r->v_cap, (size_t)chunk * Sk * Dv * sizeof(float), err, errlen) ||
        grow(&r->s, &r->s_cap, (size_t)chunk * head_score_bytes, err, errlen))
        return -1;

    CUBLAS_CALL(cublasSetStream, r->blas, stream);

    const score_rule rule = {p->window_left, p->causal ? 0 : p->window_right, p->softcap};
    const struct forward_job job = {r, p, variant == ATTN_REF_LOWP, Dv, rule, o_out, lse_out, stream};
    return forward_all(&job, chunk, cq, ck, used, err, errlen);
}

extern "C" int attn_ref_forward(attn_reference *r, const attn_fwd_params *p,
                                attn_ref_variant variant, float *o_out, float *lse_out,
                                cudaStream_t stream, char *err, size_t errlen)
{
    if (check_forward_args(r, p, variant, o_out, err, errlen)) return -1;
    /* the problem's arrays, checked before anything is allocated */
    int32_t *cq = NULL, *ck = NULL, *used = NULL, *table = NULL;
    const char *fn = "attn_ref_forward";
    int rc = to_host(p->cu_seqlens_q, p->batch + 1, &cq, stream, fn, err, errlen) ||
             to_host(p->cu_seqlens_k, p->batch + 1, &ck, stream, fn, err, errlen) ||
             to_host(p->seqused_k, p->batch, &used, stream, fn, err, errlen) ||
             to_host(p->block_table, p->batch * p->block_table_stride, &table, stream, fn, err, errlen) ||
             check_sequences(p, cq, ck, used, table, fn, err, errlen) ||
             forward_checked(r, p, variant, o_out, lse_out, stream, cq, ck, used, err, errlen);
    free(cq);
    free(ck);
    free(used);
    free(table);
    return rc ? -1 : 0;
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
    /* It computes version-1 problems only (p->causal its one mask, one head dim, dense rows):
     * anything else is refused rather than answered wrongly. */
    if (p->heads_k != p->heads || (p->head_dim_v && p->head_dim_v != p->head_dim) || p->window_left >= 0 ||
        p->window_right > 0 || (p->window_right == 0 && !p->causal) || p->softcap > 0 || p->cu_seqlens_q ||
        p->cu_seqlens_k || p->block_table || p->seqused_k)
        return fail(err, errlen, __LINE__,
                    "attn_ref_baseline: version-1 problems only (heads_k %d, head_dim_v %d, window %d:%d, softcap %g, "
                    "cu_seqlens, block_table or seqused_k set: %s)", p->heads_k, p->head_dim_v, p->window_left,
                    p->window_right, (double)p->softcap,
                    p->cu_seqlens_q || p->cu_seqlens_k || p->block_table || p->seqused_k ? "yes" : "no");
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
