/* cuDNN's fused flash-attention forward as a baseline to time against, called from C
 * through the cuDNN 9 backend (graph) API. libcudnn is loaded at run time, so the harness
 * builds and runs where cuDNN is absent (attn_cudnn_open then says why).
 *
 * Library: $ATTN_CUDNN_LIB when set (that path only), else "libcudnn.so.9", then
 * "libcudnn.so", then libcudnn.so.9 next to the libcudart this process uses.
 *
 * A plan is built once per problem (shape, dtype, strides, causal) and then enqueued as
 * often as wanted with any pointers of that layout; attn_cudnn_plan_run neither allocates
 * device memory nor synchronizes, so it can be timed. Two graph forms:
 *   "sdpa_fwd op"      the single CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR operation
 *                      (cuDNN >= 9.13.1; no mask in cuDNN 9.19's attribute set, so
 *                      non-causal problems only);
 *   "composite graph"  the runtime-fusion flash-attention pattern cudnn-frontend lowers
 *                      SDPA to: matmul, scale, [causal mask], max/sub/exp/sum/log/div
 *                      softmax, matmul. Any problem cuDNN accepts.
 * Causal with seqlen_q > seqlen_k: the bottom-right graph is tried as is first; if cuDNN
 * refuses it, Q and O are sliced to their last seqlen_k rows (a square causal problem)
 * and the first seqlen_q - seqlen_k rows of O (which see no key) are zero-filled by
 * cudaMemset2DAsync in plan_run.
 * p->lse is never written.
 *
 * Environment (read by attn_cudnn_plan_create, for experiments):
 *   ATTN_CUDNN_GRAPH     auto (default: the op where it applies, else composite) | sdpa |
 *                        composite
 *   ATTN_CUDNN_SQ_GT_SK  auto (default: direct, then slice) | direct | slice */
#ifndef ATTN_CUDNN_SDPA_H
#define ATTN_CUDNN_SDPA_H

#include <stddef.h>
#include "attn_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_cudnn attn_cudnn;           /* library + handle */
typedef struct attn_cudnn_plan attn_cudnn_plan; /* one execution plan, built once per shape */

/* 0, or non-zero with the reason cuDNN is not available
 * ("libcudnn.so.9 not found: <dlerror>", a missing symbol, cudnnCreate's status). */
int attn_cudnn_open(attn_cudnn **out, char *why, size_t whylen);

/* cudnnGetVersion(), e.g. 91900 */
long attn_cudnn_version(const attn_cudnn *c);

/* Builds graph + heuristics + execution plan + workspace for p's shape, dtype, strides and
 * causal (p's pointers are not used). Returns 0; or ATTN_UNSUPPORTED (1) with why = the
 * reason cuDNN refuses this case (e.g. "composite graph: no engine supports ...:
 * CUDNN_STATUS_NOT_SUPPORTED ..."); or another non-zero value with why for any other
 * failure (memory, bad parameters). On success why holds a note on the fallbacks taken
 * (empty when none), for diagnostics. */
int attn_cudnn_plan_create(attn_cudnn *c, const attn_fwd_params *p, attn_cudnn_plan **out,
                           char *why, size_t whylen);

/* "sdpa_fwd op" or "composite graph" */
const char *attn_cudnn_plan_kind(const attn_cudnn_plan *plan);

/* Enqueues one forward on stream with p's pointers (same shape/strides/dtype/causal as at
 * create; softmax_scale may differ) writing p->o. Pointers must be 16-byte aligned.
 * Does not allocate device memory or synchronize. 0, or non-zero with why. */
int attn_cudnn_plan_run(attn_cudnn_plan *plan, const attn_fwd_params *p, cudaStream_t stream,
                        char *why, size_t whylen);

void attn_cudnn_plan_destroy(attn_cudnn_plan *plan);
void attn_cudnn_close(attn_cudnn *c);

#ifdef __cplusplus
}
#endif
#endif
