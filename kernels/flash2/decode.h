/* flash2's split-KV ("flash-decoding") forward path for decode problems: a few queries
 * (seqlen_q <= 16) against a long key side; see decode.cu and NOTES_decode.md. */
#ifndef FLASH2_DECODE_H
#define FLASH2_DECODE_H

#include <cuda_runtime_api.h>

#include "attn_abi.h"

/* What the path takes: seqlen_q (the longest sequence's) at most FLASH2_DECODE_MAX_Q, and
 * seqlen_k (the longest) at least FLASH2_DECODE_MIN_KEYS. Below 1024 keys a (b, KV head) is at
 * most 16 tiles, a split-KV launch and a combine buy little against the prefill path, and the
 * prefill path is the measured one. -DFLASH2_DECODE_MIN_KEYS=1 routes every seqlen_q <= 16
 * problem here (to run the correctness suites through this path). */
#ifndef FLASH2_DECODE_MIN_KEYS
#define FLASH2_DECODE_MIN_KEYS 1024
#endif
#ifndef FLASH2_DECODE_MAX_Q
#define FLASH2_DECODE_MAX_Q 16
#endif

/* p as flash2_fwd validated and normalised it (heads_k set, window_left -1 or < seqlen_k - 1,
 * window_right -1, 0 with causal set, or > 0; softcap >= 0 finite; any head dim flash2
 * takes (this path takes 64 and 128 with head_dim_v 0 or head_dim, and declines the rest); 16-byte aligned pointers, strides multiples of 8 elements).
 * Returns ATTN_UNSUPPORTED when the problem is not a decode problem this path takes (flash2's
 * prefill path then runs it), ATTN_OK once the work is enqueued on `stream`, 2 on an error.
 * Never synchronizes; safe from several host threads and streams at once and under CUDA
 * graph capture (its workspace is stream-ordered, from a memory pool of its own, created by
 * the first call that needs it; a first call inside a capture returns ATTN_UNSUPPORTED, and
 * flash2's prefill path takes the problem). A captured call's workspace is a graph
 * allocation node: such a graph instantiates once at a time and cannot be cloned. */
int flash2_decode_fwd(const attn_fwd_params *p, cudaStream_t stream);

#endif
