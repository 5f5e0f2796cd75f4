/* Is an attention problem (attn_fwd_params, ABI version 5) well-formed? Checked on the host,
 * before any launch, so that a malformed test problem is reported as the test's error and
 * never blamed on the kernel. No CUDA calls. */
#ifndef ATTN_PROBLEM_H
#define ATTN_PROBLEM_H

#include <stddef.h>
#include <stdint.h>
#include "attn_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host copies of the device arrays p points to (NULL where p's is NULL):
 * cu_seqlens_q and cu_seqlens_k [batch + 1], block_table [batch][block_table_stride],
 * seqused_k [batch]. */
typedef struct {
    const int32_t *cu_seqlens_q, *cu_seqlens_k, *block_table, *seqused_k;
} attn_problem_host;

/* 0 when p is well-formed (every "invalid" rule of attn_abi.h), else 1 with one line in err
 * naming the field and its values, e.g. "heads_k 3 does not divide heads 8". h may be NULL
 * when p has none of the arrays. Checked: batch, heads, seqlen_q, seqlen_k, head_dim >= 1;
 * heads_k >= 1 and divides heads (0 is not "heads"); window_left, window_right >= -1, and
 * window_right <= 0 when causal; softcap finite and >= 0; softmax_scale finite;
 * head_dim_v >= 0; dtype fp16 or bf16; q, k, v, o non-NULL; each array present in p iff in
 * h; cu_seqlens from 0, non-decreasing, no sequence longer than seqlen_q (resp. seqlen_k);
 * strides >= 0, a row stride 0 only for a tensor of at most one row; paged: page_size,
 * num_pages, block_table_stride >= 1, block_table_stride * page_size >= seqlen_k, no
 * cu_seqlens_k, and the first ceil(used / page_size) entries of each sequence's row in
 * [0, num_pages) (the rest are never read: anything goes), used being seqused_k[b], else
 * seqlen_k; seqused_k[b] in [0, sequence b's stored keys]. */
int attn_problem_check(const attn_fwd_params *p, const attn_problem_host *h, char *err,
                       size_t len);

/* The same for a backward problem (attn_bwd_params, ABI version 5): bp->fwd by the rules
 * above, then no block_table (no backward in this version), lse set, deterministic 0 or 1,
 * workspace NULL exactly when workspace_bytes is 0 and 256-byte aligned, dout, dq, dk, dv
 * set with strides >= 0, a zero row stride only over one row, and no gradient broadcast
 * (head stride 0 with several heads, batch stride 0 over several dense sequences). */
int attn_bwd_problem_check(const attn_bwd_params *bp, const attn_problem_host *h, char *err, size_t len);

#ifdef __cplusplus
}
#endif

#endif
