/* Float64 CPU oracle for attention, for small shapes: every attn_fwd_params feature
 * (attn_abi.h) on plain host arrays. Pure C and free of CUDA, so host tests can use it. */
#ifndef ATTN_ORACLE_H
#define ATTN_ORACLE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One problem. Paged K/V and packed (cu_seqlens) layouts are the caller's to unpack into the
 * padded arrays below, as attn_abi.h reads them (a paged sequence's first
 * ceil(used / page_size) pages only); seqused_k is passed as seqlen_k, so that the mask's
 * diagonal is taken from the used keys, as attn_abi.h says. */
typedef struct {
    int batch, heads, heads_k, head_dim, head_dim_v; /* heads_k >= 1 (0 is invalid, as in
                                                 attn_abi.h); head_dim_v 0 = head_dim */
    int causal, window_left, window_right;   /* as attn_abi.h: -1 unbounded; causal => right bound
                                                 0, causal with window_right > 0 invalid */
    double softmax_scale, softcap;            /* softcap 0 = off; else s = softcap * tanh(s / softcap)
                                                 before masking */
    const int *seqlen_q, *seqlen_k;           /* per sequence [batch] (host), the lengths (for
                                                 seqused_k, pass the used length), each in
                                                 [0, max_seqlen_q] (resp. max_seqlen_k) */
    int max_seqlen_q, max_seqlen_k;           /* row counts of the arrays below */
} attn_oracle_problem;

/* 0 when pr keeps the rules above (those of attn_abi.h that an unpacked problem still has),
 * else 1 with one line in err naming the field, e.g. "heads_k 0 must be >= 1". */
int attn_oracle_check(const attn_oracle_problem *pr, char *err, size_t len);

/* q [batch][heads][max_seqlen_q][head_dim], k [batch][heads_k][max_seqlen_k][head_dim],
 * v [batch][heads_k][max_seqlen_k][head_dim_v] (host float, the quantized values widened);
 * o [batch][heads][max_seqlen_q][head_dim_v], lse [batch][heads][max_seqlen_q] (may be NULL):
 * natural-log LSE of the visible (capped) scores. Query head h reads KV head
 * h / (heads / heads_k). A row that sees no key gets o = 0 and lse = -INFINITY.
 * Rows i >= seqlen_q[b] of o and lse are not written. Returns 0, or 1 when attn_oracle_check
 * refuses pr (nothing is written). */
int attn_oracle_forward(const attn_oracle_problem *pr, const float *q, const float *k,
                        const float *v, double *o, double *lse);

/* The backward pass of attn_oracle_forward: the gradients of sum(o * dout) with respect to q,
 * k and v, in float64, for every feature above. dout is laid out as o, dq as q, dk as k, dv as
 * v; a KV head's dk and dv sum over the query heads that read it (GQA); the softcap's
 * derivative 1 - (s / softcap)^2 is applied before the scale. Rows i >= seqlen_q[b] of dout
 * are not read, rows past the lengths of dq, dk and dv are zero, and a query row that sees no
 * key contributes nothing. Returns 0, or 1 when attn_oracle_check refuses pr (nothing is
 * written). */
int attn_oracle_backward(const attn_oracle_problem *pr, const float *q, const float *k,
                         const float *v, const double *dout, double *dq, double *dk, double *dv);

#ifdef __cplusplus
}
#endif
#endif
