/* cuDNN's fused flash-attention forward as a baseline to time against, called from C
 * through the cuDNN 9 backend (graph) API. libcudnn is loaded at run time, so the harness
 * builds and runs where cuDNN is absent (attn_cudnn_open then says why).
 *
 * Library: $ATTN_CUDNN_LIB when set (that path only); else the CMake cache option
 * ATTN_CUDNN_LIB when the build set one (that path only); else "libcudnn.so.9", then
 * "libcudnn.so", then libcudnn.so.9 next to the libcudart this process uses.
 * attn_cudnn_library_info says which library that is (path, version, how it was chosen).
 *
 * A plan is built once per problem (shape, dtype, strides, causal) and then enqueued as
 * often as wanted with any pointers of that layout; attn_cudnn_plan_run neither allocates
 * device memory nor synchronizes, so it can be timed (and captured in a CUDA graph).
 *
 * Engine choice. attn_cudnn_plan_create takes the first engine config that builds
 * (heuristics mode A, then FALLBACK). attn_cudnn_plan_create_ex autotunes by default, as
 * cudnn-frontend's autotune does: every distinct config that heuristics modes A, B and
 * FALLBACK propose (distinct by engine and knobs) is built; each execution plan that builds
 * is run on the caller's buffers (one warm-up, then three rounds of back-to-back runs
 * between CUDA events) and the fastest per run is kept. attn_cudnn_plan_get_info names the
 * chosen engine ("eng<global index>_k<knob type>=<value>...", cudnn-frontend's plan tag)
 * and counts the configs tried, built and timed.
 *
 * Two graph forms:
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
 * p->lse is written only by plans made with attn_cudnn_plan_opts.want_lse (cuDNN's softmax
 * statistics, max + log(sum) of the scaled scores: the natural-log LSE); sliced plans then
 * copy the statistics into the last seqlen_k rows of each (batch, head) and write -inf in
 * the rows that see no key.
 *
 * Environment (read by attn_cudnn_plan_create and, where opts leave them unset, by
 * attn_cudnn_plan_create_ex):
 *   ATTN_CUDNN_GRAPH     auto (default: the op where it applies, else composite) | sdpa |
 *                        composite
 *   ATTN_CUDNN_SQ_GT_SK  auto (default: direct, then slice) | direct | slice
 *   ATTN_CUDNN_AUTOTUNE  1 (default) | 0: attn_cudnn_plan_create_ex takes the first config
 *                        that builds, as attn_cudnn_plan_create does
 *   ATTN_CUDNN_TUNE_MAX_CONFIGS  at most this many distinct configs tried to build, in the
 *                        heuristics' order (default 32, at most 64)
 *   ATTN_CUDNN_TUNE_RUNS back-to-back runs per timed round while tuning (default: enough
 *                        for about 1 ms, 1 to 50) */
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

/* ---- the library loaded ------------------------------------------------------------ */

typedef struct {
    char path[1024];      /* the library's file, symbolic links resolved (dlinfo/dladdr,
                             then realpath); "" when unknown */
    char requested[1024]; /* the name or path dlopen was given */
    const char *chosen_by; /* "ATTN_CUDNN_LIB (environment)", "ATTN_CUDNN_LIB (CMake option,
                              build default)" or "default search" */
    long version;         /* cudnnGetVersion(), e.g. 91900 */
} attn_cudnn_lib_info;

/* The library an open attn_cudnn uses. */
void attn_cudnn_get_library(const attn_cudnn *c, attn_cudnn_lib_info *out);

/* For tools (attn_envcheck): loads libcudnn as attn_cudnn_open would, reads its path and
 * cudnnGetVersion(), unloads it. Needs no GPU (no handle is created). 0, or non-zero with
 * why ("libcudnn.so.9 not found: ..."; out->requested and out->chosen_by still say what was
 * tried). */
int attn_cudnn_library_info(attn_cudnn_lib_info *out, char *why, size_t whylen);

/* ---- plans with options, autotuned ------------------------------------------------- */

typedef struct {
    int tune;            /* -1: $ATTN_CUDNN_AUTOTUNE (default 1); 1: time the configs, keep
                            the fastest; 0: the first config that builds */
    int max_configs;     /* > 0: at most this many distinct configs tried (<= 64); 0:
                            $ATTN_CUDNN_TUNE_MAX_CONFIGS (default 32) */
    int tune_runs;       /* > 0: back-to-back runs per timed round; 0: $ATTN_CUDNN_TUNE_RUNS,
                            default enough for about 1 ms (1 to 50) */
    int want_lse;        /* 1: the plan writes p->lse (p->lse must then be non-NULL and
                            16-byte aligned in every run); cuDNN graphs that cannot output
                            the statistics are refused (ATTN_UNSUPPORTED) */
    const char *graph;   /* NULL: $ATTN_CUDNN_GRAPH; else auto | sdpa | composite */
    const char *sq_gt_sk; /* NULL: $ATTN_CUDNN_SQ_GT_SK; else auto | direct | slice */
} attn_cudnn_plan_opts;

/* opts with every field "from the environment / default" (tune -1, the rest 0/NULL) */
attn_cudnn_plan_opts attn_cudnn_plan_opts_default(void);

/* As attn_cudnn_plan_create, with options (opts NULL: attn_cudnn_plan_opts_default()).
 * When tuning, the candidates run on p's buffers (p->q, k, v read; p->o, and p->lse with
 * want_lse, written: they must be valid device pointers of p's layout) on `stream`, which
 * is synchronized; so is the device when the workspace is resized. Refused (non-zero, not
 * ATTN_UNSUPPORTED) while `stream` is capturing a CUDA graph: create plans before capture.
 * Returns as attn_cudnn_plan_create. */
int attn_cudnn_plan_create_ex(attn_cudnn *c, const attn_fwd_params *p, const attn_cudnn_plan_opts *opts,
                              cudaStream_t stream, attn_cudnn_plan **out, char *why, size_t whylen);

typedef struct {
    const char *kind;       /* as attn_cudnn_plan_kind */
    char engine[256];       /* the chosen config: "eng<id>_k<type>=<value>..." (cudnn-frontend's
                               plan tag); "eng?" when cuDNN did not say */
    long long engine_id;    /* CUDNN_ATTR_ENGINE_GLOBAL_INDEX, -1 when unknown */
    int configs_tried;      /* distinct configs (engine + knobs) that were tried to build */
    int configs_built;      /* of those, the ones that finalized into an execution plan */
    int configs_timed;      /* of those, the ones timed (0 when not tuned) */
    int tuned;              /* 1: chosen by timing; 0: the first config that built */
    int chosen_rank;        /* rank of the chosen config among those built, in the
                               heuristics' order (0: the heuristics' first choice) */
    double best_ms;         /* tuning's time per run of the chosen config (0: not tuned) */
    double first_ms;        /* tuning's time per run of the heuristics' first choice (0: not tuned) */
    double build_s, tune_s; /* wall seconds: graph + heuristics + builds; timing the candidates */
    long long workspace_bytes;
    char heuristics[256];   /* per mode, how many configs it proposed (and how many of them
                               were new), e.g. "heuristics mode A: 3 configs, heuristics mode
                               B: 3 configs (0 new), heuristics mode FALLBACK: 2 configs (1 new)" */
} attn_cudnn_plan_info;

void attn_cudnn_plan_get_info(const attn_cudnn_plan *plan, attn_cudnn_plan_info *out);

#ifdef __cplusplus
}
#endif
#endif
