/* The one contract every attention kernel meets, built-in or external (plugin).
 * A kernel enqueues a forward pass on `stream` and returns ATTN_OK, ATTN_UNSUPPORTED
 * (the harness reports "not supported", never "passed"), or any other value for an error. */
#ifndef ATTN_ABI_H
#define ATTN_ABI_H

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_ABI_VERSION 1

typedef enum { ATTN_F16 = 0, ATTN_BF16 = 1 } attn_dtype;
enum { ATTN_OK = 0, ATTN_UNSUPPORTED = 1 }; /* any other value: an error */

typedef struct {
    attn_dtype dtype;
    int batch, heads, seqlen_q, seqlen_k, head_dim;
    int causal;             /* bottom-right aligned (as FlashAttention >= 2.1):
                               query i sees key j iff j <= i + seqlen_k - seqlen_q;
                               a query row that sees no key outputs zeros */
    float softmax_scale;    /* multiplies Q.K^T before the softmax */
    const void *q, *k, *v;  /* device pointers; head_dim is the contiguous dimension */
    void *o;
    float *lse;             /* NULL, or device [batch][heads][seqlen_q]: natural-log
                               log-sum-exp of the scaled scores (-INFINITY for a row
                               that sees no key) */
    int64_t q_batch_stride, q_head_stride, q_row_stride; /* in elements */
    int64_t k_batch_stride, k_head_stride, k_row_stride;
    int64_t v_batch_stride, v_head_stride, v_row_stride;
    int64_t o_batch_stride, o_head_stride, o_row_stride;
} attn_fwd_params;

typedef struct {
    const char *name;                                          /* [a-z0-9_]+, stable */
    int (*fwd)(const attn_fwd_params *p, cudaStream_t stream); /* enqueue on stream */
} attn_kernel;

/* Exported (with C linkage) by a plugin shared library. */
typedef const attn_kernel *(*attn_plugin_kernels_fn)(int *count, int *abi_version);
const attn_kernel *attn_plugin_kernels(int *count, int *abi_version);

#ifdef __cplusplus
}
#endif
#endif
