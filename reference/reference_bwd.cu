/* GPU reference for the backward pass (attn_bwd_params; see reference.h): per sequence and
 * per chunk of query heads, as the forward (reference.cu) does it,
 *   gather Q, K, V, dO (and, LOWP, the given O) to float32;
 *   S = scale * Q.K^T (cuBLAS, fp32), kept; P = the masked softmax of S (softcap, mask:
 *       the forward's kernel); dP = dO.V^T (cuBLAS);
 *   dS = P * (dP - D) * cap'(S) (CUDA kernel), D = rowsum(P * dP), or, LOWP, rowsum(dO * O)
 *       over the given O; cap'(s) = 1 - tanh(s / softcap)^2, the derivative of the softcap;
 *   dQ = scale * dS.K straight into dq_out; each query head's dK = scale * dS^T.Q and
 *       dV = P^T.dO into scratch, then added to its KV head's rows of dk_out and dv_out
 *       (zeroed first, in a fixed order: the result is deterministic).
 * LOWP rounds P, dP and dS to the dtype where a naive fp16/bf16 backward stores them (before
 * the GEMMs that read them) and dQ, dK, dV at the end, after the group sums. Rows that see
 * no key have P = 0, so dS = 0 and their dQ is 0; keys that no query sees get dK = dV = 0.
 * The float32 score buffers S, P and dS together stay within the forward's budget (at least
 * one head per chunk). */
#include <math.h>
#include <stdlib.h>

#define REF_FILE "reference_bwd.cu"
#include "reference_internal.cuh"

using namespace attn_ref_internal;

/* ---- kernels ---------------------------------------------------------------------- */

/* One block per score row (row = head_in_chunk * seqlen_q + i): dP (in dS) becomes dS, 0 at
 * the keys row i does not see. S holds the raw scaled scores (before the softcap), P the
 * probabilities; dout and o (LOWP only) are the chunk's gathered [row][dv]. */
static __global__ void dscores_kernel(const float *__restrict__ S, const float *__restrict__ P, float *dS,
                                      const float *__restrict__ dout, const float *__restrict__ o, int dv,
                                      int seqlen_q, int seqlen_k, score_rule rule, int lowp, int dtype)
{
    const int64_t row = blockIdx.x;
    const float *s = S + row * seqlen_k, *p = P + row * seqlen_k;
    float *ds = dS + row * seqlen_k;
    int64_t lo, hi;
    visible_keys(row % seqlen_q, seqlen_q, seqlen_k, rule, &lo, &hi);

    /* D = dO . O: the exact identity rowsum(P * dP) = dO . (P V) evaluated as each variant
     * does it: GOLDEN from its own float32 P and dP, LOWP from the O it was given. */
    float d = 0.0f;
    if (lowp)
        for (int c = threadIdx.x; c < dv; c += blockDim.x) d += dout[row * dv + c] * o[row * dv + c];
    else
        for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) d += p[j] * ds[j];
    d = block_reduce<false>(d); /* its barriers order these reads before the writes below */

    for (int64_t j = threadIdx.x; j < seqlen_k; j += blockDim.x) {
        float v = 0.0f;
        if (j >= lo && j < hi) {
            const float dp = lowp ? round_to(ds[j], dtype) : ds[j];
            v = p[j] * (dp - d);
            if (rule.softcap > 0) {
                const float t = tanhf(s[j] / rule.softcap); /* the capped score over softcap */
                v *= 1.0f - t * t;
            }
            if (lowp) v = round_to(v, dtype);
        }
        ds[j] = v;
    }
}

/* out += the chunk's per-query-head gradients part [nh][rows][dim] (query heads h0 ..
 * h0 + nh - 1), each added to its KV head h / group: out points at the sequence's KV head 0,
 * out_head_stride apart. Heads are added in order, one thread per element: deterministic. */
static __global__ void group_sum_kernel(const float *__restrict__ part, float *out, int64_t out_head_stride,
                                        int rows, int dim, int h0, int nh, int group)
{
    const int kh0 = h0 / group, nkh = (h0 + nh - 1) / group - kh0 + 1;
    const int64_t total = (int64_t)nkh * rows * dim;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = idx % dim, j = idx / dim % rows;
        const int kh = kh0 + (int)(idx / ((int64_t)dim * rows));
        const int first = kh * group > h0 ? kh * group : h0;
        const int last = (kh + 1) * group < h0 + nh ? (kh + 1) * group : h0 + nh;
        float *dst = out + kh * out_head_stride + j * dim + c;
        float acc = *dst;
        for (int h = first; h < last; h++) acc += part[((int64_t)(h - h0) * rows + j) * dim + c];
        *dst = acc;
    }
}

/* ---- host ------------------------------------------------------------------------- */

/* One operand of a batched row-major GEMM: [batch][rows][ld] at ptr, stride apart;
 * transposed: the operand is the stored matrix's transpose. */
struct operand {
    const float *ptr;
    int ld;
    long long stride;
    bool t;
};

/* Row-major C [batch][M][N] (ldc, c_stride) = alpha * op(A) [M][K] . op(B) [K][N], float32
 * throughout (CUBLAS_COMPUTE_32F, never TF32). cuBLAS is column-major, where row-major C is
 * C^T = op(B)^T . op(A)^T: a row-major operand is its column-major transpose already, so each
 * keeps its own op, and B comes first. */
static int gemm_rows(attn_reference *r, int M, int N, int K, float alpha, operand A, operand B, float *C, int ldc,
                     long long c_stride, int batch, char *err, size_t errlen)
{
    const float zero = 0.0f;
    CUBLAS_CALL(cublasGemmStridedBatchedEx, r->blas, B.t ? CUBLAS_OP_T : CUBLAS_OP_N, A.t ? CUBLAS_OP_T : CUBLAS_OP_N,
                N, M, K, &alpha,
                B.ptr, CUDA_R_32F, B.ld, B.stride,
                A.ptr, CUDA_R_32F, A.ld, A.stride,
                &zero, C, CUDA_R_32F, ldc, c_stride,
                batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return 0;
}

/* One attn_ref_backward call, as every chunk of it needs it (the scratch already grown). */
struct backward_job {
    attn_reference *r;
    const attn_bwd_params *bp;
    const int32_t *cq; /* host copy of cu_seqlens_q, or NULL: where dO's and O's rows are */
    int lowp, dv;
    score_rule rule;
    float *dq_out, *dk_out, *dv_out;
    cudaStream_t stream;
};

/* A chunk's Q, K, V, dO and (LOWP) O, widened into contiguous float [nh][seq][D or Dv]. */
static int backward_gather(const backward_job *j, const sequence *sqn, int h0, int nh, char *err, size_t errlen)
{
    attn_reference *r = j->r;
    const attn_bwd_params *bp = j->bp;
    const attn_fwd_params *p = bp->fwd;
    const int64_t es = (int64_t)elem_size(p->dtype);
    const int Sq = sqn->sq, Sk = sqn->sk, D = p->head_dim, Dv = j->dv;
    const int64_t do_off = first_row_q(j->cq, sqn->b, bp->do_batch_stride, bp->do_row_stride);
    const rows_view qv = {(const char *)p->q + sqn->q_off * es, p->q_head_stride, p->q_row_stride, 0, NULL, 1, h0, 1};
    const rows_view dov = {(const char *)bp->dout + do_off * es, bp->do_head_stride, bp->do_row_stride, 0, NULL, 1, h0,
                           1};
    const rows_view kv = kv_view(p, 1, sqn, h0), vv = kv_view(p, 2, sqn, h0);
    if (gather(&qv, p->dtype, nh, Sq, D, r->q, j->stream, err, errlen) ||
        gather(&kv, p->dtype, nh, Sk, D, r->k, j->stream, err, errlen) ||
        gather(&vv, p->dtype, nh, Sk, Dv, r->v, j->stream, err, errlen) ||
        gather(&dov, p->dtype, nh, Sq, Dv, r->dout, j->stream, err, errlen))
        return -1;
    if (!j->lowp) return 0;
    const int64_t o_off = first_row_q(j->cq, sqn->b, p->o_batch_stride, p->o_row_stride);
    const rows_view ov = {(const char *)p->o + o_off * es, p->o_head_stride, p->o_row_stride, 0, NULL, 1, h0, 1};
    return gather(&ov, p->dtype, nh, Sq, Dv, r->o, j->stream, err, errlen);
}

/* Heads h0 .. h0 + nh - 1 of one sequence, both lengths > 0: S, P, dP, dS, then dQ into its
 * rows of dq_out and the chunk's dK and dV into their KV heads' rows of dk_out and dv_out. */
static int backward_chunk(const backward_job *j, const sequence *sqn, int h0, int nh, char *err, size_t errlen)
{
    attn_reference *r = j->r;
    const attn_fwd_params *p = j->bp->fwd;
    const int Sq = sqn->sq, Sk = sqn->sk, D = p->head_dim, Dv = j->dv, group = p->heads / p->heads_k;
    const int64_t maxq = p->seqlen_q, maxk = p->seqlen_k;
    const float scale = p->softmax_scale;
    const long long qs = (long long)Sq * D, ks = (long long)Sk * D, vs = (long long)Sk * Dv, os = (long long)Sq * Dv;
    const long long ss = (long long)Sq * Sk;
    if (backward_gather(j, sqn, h0, nh, err, errlen)) return -1;

    /* S = scale * Q.K^T, P = softmax(S) (S kept for the softcap's derivative), dP = dO.V^T */
    const operand Q = {r->q, D, qs, false}, K = {r->k, D, ks, false};
    const operand dO = {r->dout, Dv, os, false}, dS = {r->ds, Sk, ss, false};
    const operand Kt = {r->k, D, ks, true}, Vt = {r->v, Dv, vs, true};
    const operand Pt = {r->p, Sk, ss, true}, dSt = {r->ds, Sk, ss, true};
    if (gemm_rows(r, Sq, Sk, D, scale, Q, Kt, r->s, Sk, ss, nh, err, errlen) ||
        softmax_rows(r->s, r->p, (int64_t)nh * Sq, Sq, Sk, j->rule, j->lowp, (int)p->dtype, NULL, 0, j->stream,
                     "attn_ref_backward", err, errlen) ||
        gemm_rows(r, Sq, Sk, Dv, 1.0f, dO, Vt, r->ds, Sk, ss, nh, err, errlen))
        return -1;
    dscores_kernel<<<(unsigned)((int64_t)nh * Sq), THREADS, 0, j->stream>>>(r->s, r->p, r->ds, r->dout, r->o, Dv, Sq,
                                                                           Sk, j->rule, j->lowp, (int)p->dtype);
    LAUNCH_CHECK("dscores_kernel");

    /* dQ = scale * dS.K into (b, h0..)'s rows; per query head dK = scale * dS^T.Q, dV = P^T.dO */
    float *dq = j->dq_out + ((int64_t)sqn->b * p->heads + h0) * maxq * D;
    if (gemm_rows(r, Sq, D, Sk, scale, dS, K, dq, D, maxq * D, nh, err, errlen) ||
        gemm_rows(r, Sk, D, Sq, scale, dSt, Q, r->dk, D, ks, nh, err, errlen) ||
        gemm_rows(r, Sk, Dv, Sq, 1.0f, Pt, dO, r->dv, Dv, vs, nh, err, errlen))
        return -1;

    const int64_t kv_head0 = (int64_t)sqn->b * p->heads_k; /* (b, 0) in [B][HK] */
    const int nkh = (h0 + nh - 1) / group - h0 / group + 1;
    group_sum_kernel<<<grid_for((int64_t)nkh * Sk * D), THREADS, 0, j->stream>>>(
        r->dk, j->dk_out + kv_head0 * maxk * D, maxk * D, Sk, D, h0, nh, group);
    LAUNCH_CHECK("group_sum_kernel");
    group_sum_kernel<<<grid_for((int64_t)nkh * Sk * Dv), THREADS, 0, j->stream>>>(
        r->dv, j->dv_out + kv_head0 * maxk * Dv, maxk * Dv, Sk, Dv, h0, nh, group);
    LAUNCH_CHECK("group_sum_kernel");
    return 0;
}

/* The outputs zeroed (every row past a sequence's lengths, or that no gradient reaches, stays
 * 0), every sequence's chunks of heads added in, LOWP's rounding last. */
static int backward_all(const backward_job *job, int chunk, const int32_t *ck, const int32_t *used, char *err,
                        size_t errlen)
{
    const attn_fwd_params *p = job->bp->fwd;
    const size_t nq = (size_t)p->batch * p->heads * p->seqlen_q * p->head_dim;
    const size_t nk = (size_t)p->batch * p->heads_k * p->seqlen_k * p->head_dim;
    const size_t nv = (size_t)p->batch * p->heads_k * p->seqlen_k * job->dv;
    CUDA_CALL(cudaMemsetAsync, job->dq_out, 0, nq * sizeof(float), job->stream);
    CUDA_CALL(cudaMemsetAsync, job->dk_out, 0, nk * sizeof(float), job->stream);
    CUDA_CALL(cudaMemsetAsync, job->dv_out, 0, nv * sizeof(float), job->stream);
    for (int b = 0; b < p->batch; b++) {
        const sequence sqn = sequence_of(p, b, job->cq, ck, used);
        if (sqn.sq == 0 || sqn.sk == 0) continue; /* no query sees a key: every gradient is 0 */
        for (int h0 = 0; h0 < p->heads; h0 += chunk) {
            const int nh = p->heads - h0 < chunk ? p->heads - h0 : chunk;
            if (backward_chunk(job, &sqn, h0, nh, err, errlen)) return -1;
        }
    }
    if (!job->lowp) return 0;
    const int dtype = (int)p->dtype;
    if (round_floats(job->dq_out, (int64_t)nq, dtype, job->stream, err, errlen) ||
        round_floats(job->dk_out, (int64_t)nk, dtype, job->stream, err, errlen) ||
        round_floats(job->dv_out, (int64_t)nv, dtype, job->stream, err, errlen))
        return -1;
    return 0;
}

/* attn_ref_backward once its problem is checked (cq, ck, used: the host copies, or NULL). */
static int backward_checked(attn_reference *r, const attn_bwd_params *bp, attn_ref_variant variant, float *dq_out,
                            float *dk_out, float *dv_out, cudaStream_t stream, const int32_t *cq, const int32_t *ck,
                            const int32_t *used, char *err, size_t errlen)
{
    const attn_fwd_params *p = bp->fwd;
    const int H = p->heads, Sq = p->seqlen_q, Sk = p->seqlen_k, D = p->head_dim;
    const int Dv = p->head_dim_v ? p->head_dim_v : D;

    /* Largest head chunk whose three score buffers (S, P, dS) fit the budget, but one head at least. */
    const size_t head_score_bytes = (size_t)Sq * Sk * sizeof(float);
    const size_t fit = SCORE_BUDGET_BYTES / (3 * head_score_bytes);
    const int chunk = fit < 1 ? 1 : (fit > (size_t)H ? H : (int)fit);
    const size_t f = sizeof(float), c = (size_t)chunk;
    const int lowp = variant == ATTN_REF_LOWP;
    if (grow(&r->q, &r->q_cap, c * Sq * D * f, err, errlen) || grow(&r->k, &r->k_cap, c * Sk * D * f, err, errlen) ||
        grow(&r->v, &r->v_cap, c * Sk * Dv * f, err, errlen) || grow(&r->s, &r->s_cap, c * head_score_bytes, err, errlen) ||
        grow(&r->p, &r->p_cap, c * head_score_bytes, err, errlen) ||
        grow(&r->ds, &r->ds_cap, c * head_score_bytes, err, errlen) ||
        grow(&r->dout, &r->dout_cap, c * Sq * Dv * f, err, errlen) ||
        (lowp && grow(&r->o, &r->o_cap, c * Sq * Dv * f, err, errlen)) ||
        grow(&r->dk, &r->dk_cap, c * Sk * D * f, err, errlen) || grow(&r->dv, &r->dv_cap, c * Sk * Dv * f, err, errlen))
        return -1;
    CUBLAS_CALL(cublasSetStream, r->blas, stream);

    const score_rule rule = {p->window_left, p->causal ? 0 : p->window_right, p->softcap};
    const backward_job job = {r, bp, cq, lowp, Dv, rule, dq_out, dk_out, dv_out, stream};
    return backward_all(&job, chunk, ck, used, err, errlen);
}

/* attn_ref_backward's arguments: the forward problem's (check_problem), then what the
 * backward adds: no pages (ABI version 5 has no paged backward), dO and its strides, the
 * outputs, and the given O, which LOWP reads. */
static int check_backward_args(const attn_reference *r, const attn_bwd_params *bp, attn_ref_variant variant,
                               const float *dq_out, const float *dk_out, const float *dv_out, char *err,
                               size_t errlen)
{
    const char *fn = "attn_ref_backward";
    if (!r || !bp || !bp->fwd) return fail(err, errlen, __LINE__, "%s: NULL reference, params or params->fwd", fn);
    const attn_fwd_params *p = bp->fwd;
    if (check_problem(p, variant, fn, err, errlen)) return -1;
    if (p->block_table)
        return fail(err, errlen, __LINE__,
                    "%s: paged K/V (block_table set): ABI version 5 has no backward for paged problems", fn);
    if (!bp->dout || !dq_out || !dk_out || !dv_out)
        return fail(err, errlen, __LINE__, "%s: NULL dout, dq_out, dk_out or dv_out", fn);
    if (variant == ATTN_REF_LOWP && !p->o)
        return fail(err, errlen, __LINE__, "%s: NULL fwd->o (the low-precision variant reads the given O)", fn);
    if (bp->do_batch_stride < 0 || bp->do_head_stride < 0 || bp->do_row_stride < 0)
        return fail(err, errlen, __LINE__, "%s: dO strides (batch %lld, head %lld, row %lld) must be >= 0", fn,
                    (long long)bp->do_batch_stride, (long long)bp->do_head_stride, (long long)bp->do_row_stride);
    return 0;
}

extern "C" int attn_ref_backward(attn_reference *r, const attn_bwd_params *bp, attn_ref_variant variant,
                                 float *dq_out, float *dk_out, float *dv_out, cudaStream_t stream, char *err,
                                 size_t errlen)
{
    if (check_backward_args(r, bp, variant, dq_out, dk_out, dv_out, err, errlen)) return -1;
    const attn_fwd_params *p = bp->fwd;
    const char *fn = "attn_ref_backward";
    /* the problem's arrays, checked before anything is allocated */
    int32_t *cq = NULL, *ck = NULL, *used = NULL;
    int rc = to_host(p->cu_seqlens_q, p->batch + 1, &cq, stream, fn, err, errlen) ||
             to_host(p->cu_seqlens_k, p->batch + 1, &ck, stream, fn, err, errlen) ||
             to_host(p->seqused_k, p->batch, &used, stream, fn, err, errlen) ||
             check_sequences(p, cq, ck, used, NULL, fn, err, errlen);
    const int64_t rows_q = rc ? 0 : cq ? cq[p->batch] : p->seqlen_q;
    if (rows_q > 1 && bp->do_row_stride == 0)
        rc = fail(err, errlen, __LINE__, "%s: dO's row stride 0 over %lld rows: invalid", fn, (long long)rows_q);
    if (!rc) rc = backward_checked(r, bp, variant, dq_out, dk_out, dv_out, stream, cq, ck, used, err, errlen);
    free(cq);
    free(ck);
    free(used);
    return rc ? -1 : 0;
}
