/* The one contract every attention kernel meets, built-in or external (plugin).
 * A kernel enqueues a forward pass on `stream` and returns ATTN_OK, ATTN_UNSUPPORTED
 * (the harness reports "not supported", never "passed"; a kernel that declines leaves no CUDA
 * error pending for the caller's next cudaGetLastError), or any other value for an error.
 *
 * Version 2 appends fields to attn_fwd_params and attn_kernel; a version-1 plugin (built
 * against the old header: tests/abi_v1/attn_abi.h) still loads, its table read with the
 * version-1 layout, and is given only version-1 problems (every version-2 field at its
 * "off" value below). Version 3 appends head_dim_pairs to attn_kernel (attn_fwd_params is
 * unchanged); a version-2 plugin (tests/abi_v2/attn_abi.h) still loads, its table read with
 * the version-2 layout. Version 4 appends total_q and total_k to attn_fwd_params (attn_kernel
 * is unchanged): a version-3 plugin (tests/abi_v3/attn_abi.h) loads as it is. Version 5 adds
 * the backward pass (attn_bwd_params) and appends bwd, bwd_workspace and bwd_caps to
 * attn_kernel; a version-4 plugin (tests/abi_v4/attn_abi.h) still loads, with no backward.
 *
 * A problem that breaks a rule marked "invalid" below is never given to a kernel (the
 * harness checks every rule first: harness/problem.c), so a kernel may assume it holds.
 * fwd writes o and lse only: q, k, v and the layout arrays (cu_seqlens, block_table,
 * seqused_k) are the caller's, left bit for bit as they were (check inputs_unchanged). Calls
 * enqueued on two streams may run at the same time: device memory a kernel keeps across
 * calls must not be written by two of them at once (check concurrent). Pointers and strides
 * carry no alignment rule (a slice of a larger tensor may start anywhere): a kernel that needs
 * one returns ATTN_UNSUPPORTED where it does not hold (check unaligned). fwd and bwd leave the
 * process's CUDA state as they found it: the current device, the device's limits and memory
 * pools, the stream's attributes such as an L2 access policy window (check state_unchanged).
 * Host threads may call at once, each with its own stream and problem: host state a kernel
 * keeps is locked or per call (check threads). A call runs on the current device: the caller
 * makes its pointers' and stream's device current (a framework's device guard does); a thread
 * that never chose one is on device 0, possibly with no context current yet. */
#ifndef ATTN_ABI_H
#define ATTN_ABI_H

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_ABI_VERSION 5

typedef enum { ATTN_F16 = 0, ATTN_BF16 = 1 } attn_dtype;
enum { ATTN_OK = 0, ATTN_UNSUPPORTED = 1 }; /* any other value: an error */

/* One attention problem. Element (b, h, i, c) of a tensor is at
 *   ptr + b * batch_stride + h * head_stride + i * row_stride + c     (in elements)
 * unless a version-2 layout below says otherwise. The scores of query i against key j are
 * s = softmax_scale * q_i.k_j, then softcap * tanh(s / softcap) when softcap > 0, then
 * masked; O = softmax(s) V over the visible keys, LSE = log sum exp of them.
 *
 * Sequence b's lengths: q_len(b) = seqlen_q, or its cu_seqlens_q span; the keys it stores,
 * stored_k(b) = seqlen_k (dense or paged K/V), or its cu_seqlens_k span; the keys it uses,
 * used_k(b) = seqused_k[b] when seqused_k is set, else stored_k(b). Only keys j < used_k(b)
 * exist for it, and the mask's diagonal is taken from q_len(b) and used_k(b). */
typedef struct {
    attn_dtype dtype;
    int batch, heads, seqlen_q, seqlen_k, head_dim; /* each >= 1 (seqlen_k: see block_table) */
    int causal;             /* bottom-right aligned (as FlashAttention >= 2.1): query i sees
                               key j iff j <= i + used_k(b) - q_len(b); a query row that
                               sees no key outputs zeros. Invalid with window_right > 0 */
    float softmax_scale;    /* multiplies Q.K^T before the softmax */
    const void *q, *k, *v;  /* device pointers; head_dim is the contiguous dimension */
    void *o;
    float *lse;             /* NULL, or device [batch][heads][seqlen_q]: natural-log
                               log-sum-exp of the scaled scores (-INFINITY for a row
                               that sees no key) */
    /* Strides in elements, >= 0 (negative: invalid). 0 is allowed for a batch or head stride
     * (a tensor broadcast over it, e.g. K/V over heads); a row stride of 0 is invalid for a
     * tensor with more than one row (Q, O: seqlen_q, or the cu_seqlens_q total; K, V:
     * seqlen_k, the cu_seqlens_k total, or page_size when paged). O is never broadcast: its
     * head stride is not 0 when heads > 1, nor its batch stride when batch > 1 (dense Q). */
    int64_t q_batch_stride, q_head_stride, q_row_stride;
    int64_t k_batch_stride, k_head_stride, k_row_stride;
    int64_t v_batch_stride, v_head_stride, v_row_stride;
    int64_t o_batch_stride, o_head_stride, o_row_stride;

    /* ---- version 2 (each "off" value is the version-1 problem) ---- */
    int heads_k;            /* heads of K and V: 1 <= heads_k <= heads, heads % heads_k == 0
                               (0 is invalid, not "heads"); query head h reads KV head
                               h / (heads / heads_k). Off: heads_k == heads */
    int window_left, window_right; /* -1 = unbounded (< -1: invalid). With
                               d = j - (i + used_k(b) - q_len(b)), key j is visible iff
                               -window_left <= d <= window_right, 0 <= j < used_k(b).
                               causal means window_right = 0: a causal problem has
                               window_right -1 or 0 (the same problem), > 0 is invalid;
                               causal with window_left >= 0 is a causal sliding window.
                               Off: -1, -1 */
    float softcap;          /* > 0: scores become softcap * tanh(s / softcap) before the
                               mask. Off: 0 */
    int head_dim_v;         /* columns of V and O (e.g. 128 with head_dim 192). Off: 0 or
                               head_dim (0 stays "head_dim", unlike heads_k) */
    /* Variable lengths, tokens packed: with cu_seqlens_q, sequence b's queries are rows
     * cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1 of q and o (q_batch_stride, o_batch_stride
     * unused), seqlen_q is the longest (max_seqlen_q), and lse is [heads][total_q] (the
     * row index is the token). Likewise cu_seqlens_k for k and v, seqlen_k the longest;
     * cu_seqlens_k with block_table is invalid (a paged problem's lengths are seqused_k's,
     * or all seqlen_k). Off: NULL */
    const int32_t *cu_seqlens_q, *cu_seqlens_k; /* device [batch + 1], from 0, non-decreasing */
    /* Paged K/V: with block_table, k and v are pools of pages of page_size rows; key j of
     * sequence b is row j % page_size of page block_table[b * block_table_stride +
     * j / page_size], at k + page * k_batch_stride + (j % page_size) * k_row_stride +
     * h * k_head_stride (v alike). seqlen_k is the keys every sequence stores (the longest
     * when seqused_k is set): 1 <= seqlen_k <= block_table_stride * page_size, not
     * necessarily equal (a serving engine's table has a fixed number of columns). Only the
     * first ceil(used_k(b) / page_size) entries of row b are read, each in [0, num_pages);
     * the entries past them may hold anything (-1, stale or out-of-range ids) and a kernel
     * must not read them. Off: NULL */
    const int32_t *block_table; /* device [batch][block_table_stride] */
    int block_table_stride, page_size; /* each >= 1 when paged */
    int num_pages;              /* pages in the pools k and v (>= 1), for bounds (e.g. TMA) */
    const int32_t *seqused_k;   /* NULL, or device [batch]: sequence b uses only its first
                                   seqused_k[b] keys (a KV cache's filled length);
                                   0 <= seqused_k[b] <= stored_k(b), else invalid */
    /* ---- version 4 ---- */
    /* The packed row counts, host copies of cu_seqlens_q[batch] and cu_seqlens_k[batch] (0
     * when that array is NULL; another value is invalid): a caller that needs a packed
     * tensor's shape on the host (a Python framework's tensor) has it without reading device
     * memory, which would wait for the stream. */
    int total_q, total_k;
} attn_fwd_params;

/* What a kernel takes beyond version 1 (attn_kernel.caps). A problem that needs a
 * capability the kernel lacks is reported not supported, naming it, without a launch. */
enum {
    ATTN_CAP_GQA = 1u << 0,        /* heads_k < heads */
    ATTN_CAP_WINDOW = 1u << 1,     /* window_left or window_right >= 0 (beyond causal) */
    ATTN_CAP_SOFTCAP = 1u << 2,    /* softcap > 0 */
    ATTN_CAP_HEAD_DIM_V = 1u << 3, /* head_dim_v != head_dim */
    ATTN_CAP_VARLEN = 1u << 4,     /* cu_seqlens_q or cu_seqlens_k */
    ATTN_CAP_PAGED = 1u << 5,      /* block_table */
    ATTN_CAP_SEQUSED_K = 1u << 6,  /* seqused_k */
};

/* ---- Version 5: the backward pass ----
 * bwd gets the forward problem (fwd: its q, k, v, scalars and layouts; fwd->o the forward's
 * output, fwd->lse its LSE, both inputs here and never NULL) and dO, and writes the gradients
 * of sum(O * dO): dQ laid out as Q, dK as K, dV as V (heads_k heads: a KV head's gradient
 * sums over the query heads that read it), in the problem's dtype. Every layout of the
 * forward applies to them (strides, packed rows by cu_seqlens_q / cu_seqlens_k, seqused_k),
 * with their own strides below; dO has O's layout with its own strides. A paged problem
 * (block_table) has no backward in this version: bwd is never given one.
 *
 * Written: dQ at every query row of every sequence (a row that sees no key gets 0); dK and
 * dV at every key row j < used_k(b) (a key no query sees gets 0); rows j in [used_k(b),
 * stored_k(b)) 0 or left as they were; nothing else (the padding between rows, guard
 * bytes, rows of no sequence). q, k, v, o, lse, dout and the layout arrays are left bit for
 * bit as they were. The O and LSE given are any correct forward's (the harness's reference,
 * rounded to the dtype), not necessarily this kernel's fwd's: bwd keeps no state from fwd.
 * bwd allocates nothing and may be captured into a CUDA graph: its scratch is `workspace`. */
enum {
    ATTN_BWD_DETERMINISTIC = 1u << 31, /* bwd_caps: deterministic = 1 is honoured */
};

typedef struct {
    const attn_fwd_params *fwd;
    const void *dout;            /* [batch][heads][seqlen_q][head_dim_v] as O (packed alike) */
    int64_t do_batch_stride, do_head_stride, do_row_stride;
    void *dq;                    /* as Q */
    int64_t dq_batch_stride, dq_head_stride, dq_row_stride;
    void *dk;                    /* as K: heads_k heads, head_dim columns */
    int64_t dk_batch_stride, dk_head_stride, dk_row_stride;
    void *dv;                    /* as V: heads_k heads, head_dim_v columns */
    int64_t dv_batch_stride, dv_head_stride, dv_row_stride;
    int deterministic;           /* 1: every call on the same inputs gives bit-identical dQ,
                                    dK and dV (asked only of a kernel whose bwd_caps has
                                    ATTN_BWD_DETERMINISTIC); 0: the order of floating-point
                                    sums may vary (atomics), within the verdict's bounds */
    void *workspace;             /* >= bwd_workspace(p) bytes, 256-byte aligned, contents
                                    undefined at the call (the kernel initializes what it
                                    reads); NULL when 0 bytes */
    size_t workspace_bytes;
} attn_bwd_params;

typedef struct {
    const char *name;                                          /* [a-z0-9_]+, stable */
    int (*fwd)(const attn_fwd_params *p, cudaStream_t stream); /* enqueue on stream */
    /* ---- version 2 ---- */
    uint32_t caps;          /* ATTN_CAP_* bits */
    uint32_t dtypes;        /* bits 1 << attn_dtype; 0 = fp16 and bf16 */
    const int *head_dims;   /* the head dims it takes, 0-terminated; NULL = any. With
                               head_dim_pairs NULL, head_dim (and head_dim_v when it
                               differs, which needs ATTN_CAP_HEAD_DIM_V) must be listed */
    /* ---- version 3 ---- */
    const int *head_dim_pairs; /* NULL, or a 0-terminated flat list {d, dv, d, dv, ..., 0}
                               (each >= 1): the (head_dim, head_dim_v) pairs it takes
                               (head_dim_v 0 read as head_dim). When set, it replaces
                               head_dims' rule: a problem whose pair is not listed is not
                               supported; a pair with dv != d needs ATTN_CAP_HEAD_DIM_V */
    /* ---- version 5: the backward pass (all three 0/NULL: the kernel has none) ---- */
    int (*bwd)(const attn_bwd_params *p, cudaStream_t stream); /* enqueue on stream */
    /* Scratch bytes bwd needs for p (p's pointers are not set yet: it reads the scalars, the
     * deterministic flag and which pointers are NULL, never device memory). NULL: none. */
    size_t (*bwd_workspace)(const attn_bwd_params *p);
    uint32_t bwd_caps;      /* the ATTN_CAP_* bits the backward takes (dtypes and head dims
                               are the forward's), | ATTN_BWD_DETERMINISTIC when it honours
                               deterministic; a problem needing another bit is not supported */
} attn_kernel;

/* ---- Tunables (optional: a kernel without them is simply not tunable) ----
 * A tunable kernel names its tunables and the values each takes; says, for any configuration
 * (one value per tunable), what it needs, so that the autotuner's gates judge it before any
 * compile or launch; runs any configuration this build holds; and says which configuration
 * its fwd runs for a problem (default or tuned). A built-in kernel: ATTN_TUNING(name) in
 * registry.def, defining attn_tuning_<name>; a plugin: the export attn_plugin_tuning below.
 * Adding it changes nothing else: the kernel table and its version stay as they are. */
#define ATTN_TUNE_MAX_TUNABLES 12
typedef struct {
    const char *name;  /* [a-z0-9_]+, stable (the tuned file names it) */
    int count;         /* 1..64 */
    const int *values; /* the values it takes */
} attn_tunable;

typedef struct {
    int threads;       /* per block */
    int shared_bytes;  /* shared memory per block, dynamic and static */
    int regs_estimate; /* registers per thread the kernel expects, before compiling */
    int min_blocks;    /* resident blocks per SM its launch bounds ask of ptxas (0: none) */
    int built;         /* 1 iff this build holds the configuration's code */
    const void *func;  /* NULL, or its (main) __global__ function, for the checks after the
                          compile (cudaFuncGetAttributes: registers, spills) */
    char rule[192];    /* "" or the kernel's own rule (alignment, coalescing, bank conflicts,
                          tile shapes) the configuration breaks */
} attn_config_facts;

typedef struct {
    int count;                     /* tunables, 1..ATTN_TUNE_MAX_TUNABLES */
    const attn_tunable *tunables;
    /* What configuration `values` needs for problems of this dtype and head dim: ATTN_OK, or
     * ATTN_UNSUPPORTED when no tunable path of the kernel takes such problems. No launch. */
    int (*facts)(const int *values, attn_dtype dtype, int head_dim, attn_config_facts *out);
    /* fwd at this configuration; ATTN_UNSUPPORTED when p takes a path the tunables do not
     * reach, or this build or this GPU cannot run the configuration */
    int (*fwd_config)(const attn_fwd_params *p, const int *values, cudaStream_t stream);
    /* The configuration fwd runs for p (tuned = 0 default, 1 a tuned one): ATTN_OK, or
     * ATTN_UNSUPPORTED when p takes a path without tunables. Reads p itself (its pointers
     * for alignment at most), never device memory. */
    int (*config_for)(const attn_fwd_params *p, int *values, int *tuned);
    /* The configuration fwd runs for p untuned, as config_for. */
    int (*default_for)(const attn_fwd_params *p, int *values);
} attn_tuning;

/* Optionally exported by a plugin: the tunables of its kernel `name`, or NULL. */
typedef const attn_tuning *(*attn_plugin_tuning_fn)(const char *name);
const attn_tuning *attn_plugin_tuning(const char *name);

/* Exported (with C linkage) by a plugin shared library. */
typedef const attn_kernel *(*attn_plugin_kernels_fn)(int *count, int *abi_version);
const attn_kernel *attn_plugin_kernels(int *count, int *abi_version);

#ifdef __cplusplus
}
#endif
#endif
