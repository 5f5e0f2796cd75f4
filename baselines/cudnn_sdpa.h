/* cuDNN's fused flash-attention forward (and backward: "the backward pass" below) as a
 * baseline to time against, called from C through the cuDNN 9 backend (graph) API. libcudnn is loaded at run time, so the harness
 * builds and runs where cuDNN is absent (attn_cudnn_open then says why).
 *
 * Library: $ATTN_CUDNN_LIB when set (that path only); else the CMake cache option
 * ATTN_CUDNN_LIB when the build set one (that path only); else "libcudnn.so.9", then
 * "libcudnn.so", then libcudnn.so.9 next to the libcudart this process uses.
 * attn_cudnn_library_info says which library that is (path, version, how it was chosen).
 *
 * A plan is built once per problem (shape, dtype, strides, mask, softcap, which per-sequence
 * arrays are given, the page pool's shape) and then enqueued as often as wanted with any
 * pointers of that layout (and any contents of cu_seqlens, block_table, seqused_k: cuDNN
 * reads them on the GPU); attn_cudnn_plan_run neither allocates device memory nor
 * synchronizes, so it can be timed (and captured in a CUDA graph).
 *
 * Engine choice. attn_cudnn_plan_create takes the first engine config that builds
 * (heuristics mode A, then FALLBACK). attn_cudnn_plan_create_ex autotunes by default, as
 * cudnn-frontend's autotune does: every distinct config that heuristics modes A, B and
 * FALLBACK propose (distinct by engine and knobs) is built; each execution plan that builds
 * is run on the caller's buffers (one warm-up, then three rounds of back-to-back runs
 * between CUDA events) and the fastest per run is kept. attn_cudnn_plan_get_info names the
 * chosen engine ("eng<global index>_k<knob type>=<value>...", cudnn-frontend's plan tag)
 * and counts the configs tried, built and timed, and where the build's time went (the
 * operation graph's finalize, the heuristics, the execution plans' finalize).
 *
 * Kernel cache (attn_cudnn_plan_opts.kernel_cache, off by default; cuDNN >= 9.5): the graph
 * is built as a dynamic-shape graph whose execution plans share the handle's kernel cache, so
 * a plan of a topology the handle has compiled before skips the compile; the single SDPA
 * operation never, and a graph cuDNN refuses so falls back to the static graph
 * (attn_cudnn_plan_get_info says which, and why). For plans where one is wanted rather than
 * the fastest (the cudnn kernel's untuned plans); a dynamic plan may run another kernel.
 *
 * Two graph forms:
 *   "sdpa_fwd op"      the single CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR operation
 *                      (cuDNN >= 9.13.1; no mask in cuDNN 9.19's attribute set, so only
 *                      problems without mask, softcap, pages or per-sequence lengths;
 *                      GQA and head_dim_v as K/V/O dims);
 *   "composite graph"  the runtime-fusion flash-attention pattern cudnn-frontend (1.x,
 *                      before cuDNN 9.21's unified ops) lowers SDPA to: matmul, scale,
 *                      [softcap], [masks], max/sub/exp/sum/log/div softmax, matmul. Any
 *                      problem cuDNN accepts.
 *
 * Version-2 features (attn_abi.h) in the composite graph, each op as cudnn-frontend emits it:
 *   heads_k, head_dim_v  K and V tensors [B, heads_k, Sk, d|dv], O [B, H, Sq, dv]: cuDNN's
 *                      matmuls broadcast the KV heads.
 *   softcap            S = softcap * tanh(S / softcap) after the scale, before the masks
 *                      (DIV, TANH_FWD, MUL with a by-value scalar).
 *   window, causal     bottom-right bands on GEN_INDEX row/col: right bound (causal: 0)
 *                      keeps row + (sk - sq) + right >= col; left bound keeps
 *                      col + (left + 1) - (sk - sq) > row, i.e. j >= i + sk - sq - left.
 *   per-sequence lengths ("padded": cu_seqlens, seqused_k, pages; and masked Sq > Sk with a
 *                      left bound or a right bound > 0, where cudnn-frontend demands them)
 *                      seq_len_q/kv [B,1,1,1] int32: the padding mask (row < seq_q, col <
 *                      seq_kv), the masks' sk, sq per sequence, and the matmuls' M/N/K
 *                      overrides. Constants where the ABI's lengths are; p->seqused_k
 *                      itself when only it varies; else computed per run from cu_seqlens.
 *   cu_seqlens         ragged offsets (int64 elements) on Q, O and K, V: cuDNN wants them
 *                      on all four, so a side that is not packed gets b * batch_stride.
 *   block_table        paged cache load ops: K and V pools as [num_pages, heads_k,
 *                      page_size, d] (batch stride = the page stride), the block table as
 *                      [B, 1, ceil(Sk / page_size), 1] (row stride block_table_stride),
 *                      seq_len_kv as the lengths (cuDNN >= 9.5). Entries past a sequence's
 *                      used pages are never read (compute-sanitizer clean with -1 there).
 * cuDNN reads none of the ABI's per-sequence arrays in the form it wants, so padded plans may
 * launch two small helper kernels (PTX in cudnn_aux.c, JIT-compiled by the driver): before
 * cuDNN, the lengths and ragged offsets from cu_seqlens (and seqused_k); after it, zeros in
 * O and -inf in the LSE for the rows that see no key (cuDNN's output there is not the ABI's),
 * and the packed LSE ([heads][total_q], from a [B][H][Sq] scratch). Refused (ATTN_UNSUPPORTED
 * with the reason) beyond what cuDNN's heuristics refuse: what cudnn-frontend's support
 * surface refuses for the loaded version and GPU (e.g. cuDNN 9.14.0's non-causal left window
 * with s_kv > 1024, 9.10.0/9.10.1, paging before 9.5, bottom-right bands before 9.6), and
 * more than 2^31 - 1 query rows in a padded plan.
 * Causal (no left window) with seqlen_q > seqlen_k, lengths constant: the bottom-right graph
 * is tried as is first; if cuDNN refuses it (or ATTN_CUDNN_SQ_GT_SK=slice, as the cudnn
 * kernel asks), Q and O are sliced to their last seqlen_k rows (a square causal problem) and
 * the first seqlen_q - seqlen_k rows of O (which see no key) are zero-filled by
 * cudaMemset2DAsync in plan_run.
 * p->lse is written only by plans made with attn_cudnn_plan_opts.want_lse (cuDNN's softmax
 * statistics, max + log(sum) of the scaled scores: the natural-log LSE), in the ABI's layout:
 * [batch][heads][seqlen_q] bound to cuDNN's output, or [heads][total_q] (cu_seqlens_q) copied
 * by the helper kernel; sliced plans copy the statistics into the last seqlen_k rows of each
 * (batch, head) and write -inf in the rows that see no key.
 *
 * Run on an H100 with cuDNN 9.14.0 (2026-11-23): the cudnn kernel passes the correctness
 * suite's features, packed (paged page sizes 1-256, decode, empty sequences), matrix, scale
 * and contract tests; not yet run with cuDNN 9.19.
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

/* Builds graph + heuristics + execution plan + workspace for p's problem (p's pointers are not
 * used, except whether cu_seqlens_q/k, block_table and seqused_k are NULL). Returns 0; or ATTN_UNSUPPORTED (1) with why = the
 * reason cuDNN refuses this case (e.g. "composite graph: no engine supports ...:
 * CUDNN_STATUS_NOT_SUPPORTED ..."); or another non-zero value with why for any other
 * failure (memory, bad parameters). On success why holds a note on the fallbacks taken
 * (empty when none), for diagnostics. */
int attn_cudnn_plan_create(attn_cudnn *c, const attn_fwd_params *p, attn_cudnn_plan **out,
                           char *why, size_t whylen);

/* "sdpa_fwd op" or "composite graph" */
const char *attn_cudnn_plan_kind(const attn_cudnn_plan *plan);

/* Enqueues one forward on stream with p's pointers (the same problem as at create, see
 * attn_cudnn_plan_create; softmax_scale may differ) writing p->o. Pointers must be 16-byte
 * aligned (block_table and seqused_k included). Does not allocate device memory or
 * synchronize. A run on another stream than the plan's last run (or into a graph being
 * captured) waits for that run on the GPU: the plan's buffers are one per plan. 0, or
 * non-zero with why. */
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
    int external_workspace; /* backward plans: 1 the plan allocates no workspace (every run
                               passes p->workspace) and tuning waits for
                               attn_cudnn_bwd_plan_tune; 0 the plan owns one */
    int kernel_cache;    /* 0 (default): static graphs, one compiled kernel per problem (the
                            benchmarks' baseline); 1: a dynamic-shape graph whose execution
                            plans share the handle's kernel cache, so that a problem of the
                            same topology (other sizes, strides) reuses the kernel compiled for
                            the first, where cuDNN takes it (else the static graph, silently:
                            attn_cudnn_plan_info says which and why); -1: 1 when the plan is
                            not tuned, else 0 (the cudnn kernel's default) */
} attn_cudnn_plan_opts;

/* opts with every field "from the environment / default" (tune -1, the rest 0/NULL) */
attn_cudnn_plan_opts attn_cudnn_plan_opts_default(void);

/* $ATTN_CUDNN_KERNEL_CACHE (0 or 1) for opts.kernel_cache: *value 0 or 1 as set, -1 when
 * unset or empty (the baseline itself never reads it; the cudnn kernel does). 0, or -1 with
 * why naming the variable when it is something else. */
int attn_cudnn_kernel_cache_env(int *value, char *why, size_t whylen);

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
    /* where build_s went, every graph form attempted summed: the operation graphs' finalize,
     * the heuristics queries, the execution plans' finalize (code generation, the driver's
     * JIT; a kernel cache hit skips both), and how many execution plans were finalized */
    double opgraph_s, heuristics_s, finalize_s;
    int finalizes;
    int kernel_cache;          /* 1: the plan is a dynamic-shape graph on the kernel cache */
    char kernel_cache_note[256]; /* "used", or why not ("off", "refused by cuDNN: ...") */
    double kernel_cache_fail_s; /* seconds spent on dynamic attempts cuDNN refused */
} attn_cudnn_plan_info;

void attn_cudnn_plan_get_info(const attn_cudnn_plan *plan, attn_cudnn_plan_info *out);

/* ---- the backward pass -------------------------------------------------------------
 * cuDNN's fused SDPA backward (dQ, dK, dV from Q, K, V, O, dO and the forward's LSE), the
 * composite graph cudnn-frontend's SDPA backward node lowers to (1.x, cuDNN 9.0-9.20):
 *   sum = rowsum(dO * O) * 1                  (fp32, in the workspace)
 *   S = Q.K^T * scale, [softcap], [padding mask], S - LSE, [bands], P = exp(.)
 *   dV = P^T . dO                             (GQA: [B,H,Sk,dv] then summed over the group)
 *   dS = (dO.V^T - sum) * P, [softcap's derivative], * scale
 *   dK = dS^T . Q                             (GQA alike)
 *   dQ = dS . K  through an fp32 accumulator in the workspace; deterministic: straight from
 *                the matmul (cudnn-frontend's dP-workspace graph, deterministic on Hopper)
 * Every layout of the forward but paging (the ABI has no paged backward): GQA, head_dim_v,
 * windows and causal (bottom-right), varlen (ragged offsets on all eight tensors, from the
 * lens kernel), seqused_k; softcap only without masks or per-sequence lengths (cudnn-frontend
 * disables its score modifiers with them). Causal with seqlen_q > seqlen_k: Q, O, dO, dQ and
 * the LSE sliced to their last seqlen_k rows, the first rows of dQ zero-filled. cuDNN's Stats
 * is the natural-log LSE of the scaled scores as the ABI's; it is bound to p->fwd->lse as is,
 * or (rows that may see no key, packed Q) copied by a helper kernel into a [B][H][Sq] scratch
 * with -inf made +inf (so that such rows get P = 0); a helper kernel zeroes the dQ rows that
 * see no key and the dK, dV rows no query sees when lengths are device data.
 * Refused (ATTN_UNSUPPORTED, the reason in why) besides what cuDNN's heuristics refuse:
 * cudnn-frontend's backward support surface for the loaded version and GPU (head dims over
 * 128, or over 256 on Hopper; s_q = s_kv = 1; 9.10.0/9.10.1; 9.14.0's non-causal left window
 * with s_kv > 1024; ...), softcap with a mask, deterministic off Hopper, more than 2^31 - 1
 * rows for the helper kernels. cuDNN <= 9.15 with s_q or s_kv not a multiple of 128 gets
 * cudnn-frontend's workaround (a padding mask with constant lengths, which masks nothing).
 * The workspace: [fp32 dQ accumulator][row sums][cuDNN's], each 256-byte aligned,
 * attn_cudnn_bwd_plan_workspace bytes in all. Thread safety and streams as the forward's;
 * ATTN_CUDNN_GRAPH and ATTN_CUDNN_SQ_GT_SK concern the forward only (the backward has one
 * form); the tuning variables apply. */

/* A backward plan for p (p->fwd the forward problem; p's strides and deterministic flag; its
 * pointers only when tuning). Tuning (opts->tune, $ATTN_CUDNN_AUTOTUNE) times the configs on
 * p's buffers (q, k, v, o, lse, dout read; dq, dk, dv written) and on the plan's own workspace,
 * or, with opts->external_workspace, waits for attn_cudnn_bwd_plan_tune. Returns as
 * attn_cudnn_plan_create_ex. */
int attn_cudnn_bwd_plan_create_ex(attn_cudnn *c, const attn_bwd_params *p, const attn_cudnn_plan_opts *opts,
                                  cudaStream_t stream, attn_cudnn_plan **out, char *why, size_t whylen);
/* The workspace bytes a run needs (with external_workspace, p->workspace_bytes at least
 * this; before tuning, enough for any candidate). 0 for a forward plan. */
size_t attn_cudnn_bwd_plan_workspace(const attn_cudnn_plan *plan);
/* Times the candidates of a plan made with external_workspace and tuning on p's buffers and
 * workspace, keeps the fastest (synchronizes; refused while stream is capturing). A plan
 * tuned already, or made without tuning: 0, nothing done. keep_first: keep the heuristics'
 * first choice without timing (no synchronization). 0, or non-zero with why. */
int attn_cudnn_bwd_plan_tune(attn_cudnn_plan *plan, const attn_bwd_params *p, int keep_first, cudaStream_t stream,
                             char *why, size_t whylen);
/* Enqueues one backward on stream with p's pointers (the problem the plan was made for;
 * softmax_scale may differ): dq, dk, dv written as attn_abi.h says. The workspace is
 * p->workspace when set (p->workspace_bytes >= attn_cudnn_bwd_plan_workspace, 16-byte
 * aligned), else the plan's own. Every tensor 16-byte aligned. No allocation, no
 * synchronization (capturable). 0, or non-zero with why. */
int attn_cudnn_bwd_plan_run(attn_cudnn_plan *plan, const attn_bwd_params *p, cudaStream_t stream, char *why,
                            size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
