/* The cuBLAS + softmax reference, on the GPU, and a float64 CPU oracle that checks it.
 *
 * Both GPU variants start from the kernel's own quantized inputs (the same fp16/bf16
 * tensors, read through the same strides as the kernel):
 *   ATTN_REF_GOLDEN   float32 throughout: S = scale * Q.K^T and O = P.V by cuBLAS with
 *                     CUBLAS_COMPUTE_32F (never TF32), float32 masked softmax.
 *   ATTN_REF_LOWP     what a naive fp16/bf16 implementation computes: as GOLDEN, but P is
 *                     rounded to the kernel's dtype before P.V and O is rounded to it after.
 * Heads are processed in chunks so that the float32 score buffer stays small (S = 2048
 * never needs B*H*S*S floats). */
#ifndef ATTN_REFERENCE_H
#define ATTN_REFERENCE_H

#include <stddef.h>
#include "attn_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ATTN_REF_GOLDEN = 0, ATTN_REF_LOWP = 1 } attn_ref_variant;

typedef struct attn_reference attn_reference; /* cuBLAS handle and scratch buffers */

/* Returns 0, or non-zero with a message in err (CUDA/cuBLAS error text). */
int attn_ref_create(attn_reference **out, char *err, size_t errlen);
void attn_ref_destroy(attn_reference *r);

/* Reads p->q, p->k, p->v through their strides (p->o and p->lse are ignored) and writes
 *   o_out:   device float [batch][heads][seqlen_q][head_dim], contiguous;
 *            rows that see no key are 0; for LOWP the values are exactly representable
 *            in p->dtype.
 *   lse_out: NULL, or device float [batch][heads][seqlen_q]: natural-log LSE of the
 *            scaled, masked scores; -INFINITY for a row that sees no key.
 * Enqueued on `stream`; returns 0 or non-zero with a message in err. */
int attn_ref_forward(attn_reference *r, const attn_fwd_params *p, attn_ref_variant variant,
                     float *o_out, float *lse_out, cudaStream_t stream, char *err,
                     size_t errlen);

/* The backward pass of bp's problem (ABI version 5: attn_bwd_params; no paged K/V) from the
 * same quantized q, k, v and dout, read through their strides and layouts:
 *   GOLDEN  float32 throughout: P recomputed from the scores (bp->fwd->lse and o are not
 *           read), dP = dO.V^T, D = rowsum(P * dP), dS = P * (dP - D) times the softcap's
 *           derivative, dQ = scale * dS.K, dK = scale * dS^T.Q, dV = P^T.dO by cuBLAS
 *           (CUBLAS_COMPUTE_32F, never TF32), a KV head's dK and dV summed over its query heads.
 *   LOWP    what a naive fp16/bf16 backward computes: P, dP and dS rounded to the dtype before
 *           the GEMMs that read them, D = rowsum(dO * O) over the given O (bp->fwd->o, the
 *           dtype), and dQ, dK, dV rounded to the dtype at the end.
 * Writes device floats dq_out [batch][heads][seqlen_q][head_dim], dk_out
 * [batch][heads_k][seqlen_k][head_dim], dv_out [batch][heads_k][seqlen_k][head_dim_v]
 * (contiguous; packed problems over the longest lengths): every element, 0 at rows past a
 * sequence's lengths (its queries, its used keys). Enqueued on `stream`; returns 0 or
 * non-zero with a message in err. */
int attn_ref_backward(attn_reference *r, const attn_bwd_params *bp, attn_ref_variant variant, float *dq_out,
                      float *dk_out, float *dv_out, cudaStream_t stream, char *err, size_t errlen);

/* The benchmark baseline: the same attention computed as an unfused fp16/bf16
 * implementation does (cuBLAS tensor-core GEMMs on the inputs' strides with float32
 * accumulation, a float32 score buffer, P in the dtype), writing p->o (in the dtype,
 * through its strides) like a kernel; p->lse is not written. Enqueued on `stream`.
 * Returns 0 or non-zero with a message in err. */
int attn_ref_baseline(attn_reference *r, const attn_fwd_params *p, cudaStream_t stream,
                      char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
