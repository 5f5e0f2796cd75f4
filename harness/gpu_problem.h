/* One test problem: its description (attn_problem_desc) and the one function that builds it
 * on the GPU (attn_gpu_problem_build): inputs of fresh random values, NaN-poisoned outputs
 * inside guard bands, the attn_fwd_params that points at them, the references on demand, all
 * freed by one call. Every suite, tool and development program builds its problems here;
 * nothing else allocates problem tensors.
 *
 * Dense problems take any layout per tensor (attn_layout, through the strides). A packed
 * batch (nseq > 0 sequences of their own lengths, attn_abi.h's varlen layout) is laid out as
 * rows of [row][heads][dim]: Q and O packed by cu_seqlens_q, or dense when every sequence has
 * the same number of queries (a decode batch); K and V packed by cu_seqlens_k, in a shuffled
 * pool of pages read through a block table (page_size > 0, seqused_k their filled length),
 * or, with Q dense and no pages, a dense cache with seqused_k and spare capacity.
 *
 * The tensors are indexed by attn_tensor_id so that a backward problem appends its own
 * (dO, dQ, dK, dV, scratch) after ATTN_T_LSE rather than copying this module. */
#ifndef ATTN_GPU_PROBLEM_H
#define ATTN_GPU_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "attn_abi.h"
#include "gpu_verify.h"
#include "harness.h"
#include "problem.h"
#include "reference.h"
#include "seqs.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ATTN_GUARD_BYTES = 4096 };          /* guard band before and after every buffer */
enum { ATTN_POISON = 0xff };               /* all-ones bytes: NaN in fp16, bf16 and float32 */
enum { ATTN_MAX_SEQS = 256 };              /* sequences of a packed batch */
enum { ATTN_CACHE_SLACK = 16 };            /* a dense cache's rows past its longest sequence */

typedef enum { ATTN_T_Q, ATTN_T_K, ATTN_T_V, ATTN_T_O, ATTN_T_LSE, ATTN_N_TENSORS } attn_tensor_id;
/* Sets of tensors (attn_gpu_problem_poison, attn_gpu_problem_snapshot): a bit per tensor. */
#define ATTN_TENSOR_BIT(t) (1u << (t))
/* Tensor t's inputs come from seed + t * ATTN_TENSOR_SEED_STEP (the backward's dO and O are
 * tensors 5 and 10): the values the correctness suite has always used, so a seed in an old
 * report still reproduces its case. */
#define ATTN_TENSOR_SEED_STEP 0x632be59bd9b4e019ull
enum {
    ATTN_FWD_INPUTS = ATTN_TENSOR_BIT(ATTN_T_Q) | ATTN_TENSOR_BIT(ATTN_T_K) | ATTN_TENSOR_BIT(ATTN_T_V),
    ATTN_FWD_OUTPUTS = ATTN_TENSOR_BIT(ATTN_T_O) | ATTN_TENSOR_BIT(ATTN_T_LSE),
};

typedef struct {
    attn_dtype dtype;
    int batch, heads, heads_k;        /* packed: batch is ignored (nseq sequences) */
    int seqlen_q, seqlen_k;           /* packed: ignored (the longest sequence's) */
    int head_dim, head_dim_v;
    int causal, window_left, window_right; /* -1: unbounded */
    float softcap;                    /* 0: off */
    float softmax_scale;              /* 0: 1/sqrt(head_dim) */
    attn_layout layout[4];            /* q, k, v, o of a dense problem */
    unsigned shifted;                 /* ATTN_TENSOR_BIT of Q, K, V, O (dense problems) whose first
                                       * element sits 2 bytes past the 16-byte boundary where it
                                       * would start, as a slice's base pointer does (check
                                       * unaligned); 0: none */
    float sigma_qk, sigma_v;          /* the inputs' standard deviations */
    int with_lse;                     /* the kernel is asked for the LSE */
    uint64_t seed;                    /* the inputs' values (attn_gpu_problem_fill) */
    /* a packed batch: nseq sequences of lens_q[b] queries and lens_k[b] keys (0 allowed) */
    int nseq, page_size, spare_pages;
    int lens_q[ATTN_MAX_SEQS], lens_k[ATTN_MAX_SEQS];
    /* paged: the block table as serving engines lay it out (attn_seqs_serving: spare columns,
     * entries past a sequence's pages -1, stale or out of the pool), and no seqused_k where
     * every sequence holds the same number of keys (attn_problem_seqused) */
    int serving;
} attn_problem_desc;

/* A dense problem, BSHD throughout, inputs of std 1, the LSE requested, no window, no
 * softcap, heads_k = heads, head_dim_v = head_dim, the seed from `name` (attn_seed_from_name). */
attn_problem_desc attn_problem_dense(attn_dtype dtype, int batch, int heads, int seqlen_q, int seqlen_k,
                                     int head_dim, int causal, const char *name);

typedef struct {
    attn_problem_desc desc;
    attn_fwd_params p;                  /* the kernel's problem: points at the buffers below */
    attn_strides st[4];                 /* q, k, v, o strides (packed: rows of [row][heads][dim]) */
    void *buf[ATTN_N_TENSORS];          /* device allocations, guard bands included */
    size_t bytes[ATTN_N_TENSORS];       /* their sizes, guard bands included */
    size_t o_elems, rows;               /* O's elements and LSE rows in the references' dense layout */
    float *g, *r, *lg;                  /* golden O, low-precision O, golden LSE ([batch][heads][seqlen_q][dv]
                                         * floats; packed: over the longest lengths), NULL until
                                         * attn_gpu_problem_references */
    /* packed */
    attn_seqs seqs;                     /* the host layout */
    attn_problem_host host;             /* host copies of the device arrays, for attn_problem_check */
    int32_t *cu_q, *cu_k, *table, *used; /* device arrays (NULL where the problem has none; cu_q
                                         * is always there: unpacking reads it) */
    void *o_dense;                      /* O and the LSE unpacked into the references' layout */
    float *lse_dense;                   /* (attn_gpu_problem_unpack; packed problems only) */
} attn_gpu_problem;
/* x->host.seqused_k points into x->desc: a built problem is not copied or moved. */

/* The problem described by d planned on the host, nothing allocated on the GPU: strides,
 * sizes, the sequences' layout, x->p with stand-in pointers, checked (attn_problem_check).
 * 0, or 1 with the reason in err. What it holds is host memory (attn_seqs_free(&x->seqs)). */
int attn_gpu_problem_plan(attn_gpu_problem *x, const attn_problem_desc *d, char *err, size_t errlen);
/* Plans, allocates and fills the problem described by d: inputs from d->seed, outputs
 * poisoned. 0, or 1 with the reason in err (x is then freed). */
int attn_gpu_problem_build(attn_gpu_problem *x, const attn_problem_desc *d, cudaStream_t stream, char *err,
                           size_t errlen);
/* New inputs in the same buffers, from `seed`: poison first (the padding between rows keeps
 * NaN), then normal random values quantized to the dtype. */
int attn_gpu_problem_fill(attn_gpu_problem *x, uint64_t seed, cudaStream_t stream, char *err, size_t errlen);
/* O and the LSE (guard bands included) poisoned on `stream`. */
int attn_gpu_problem_poison_outputs(attn_gpu_problem *x, cudaStream_t stream, char *err, size_t errlen);
/* The buffers of a set of tensors (ATTN_TENSOR_BIT), guard bands included, poisoned. */
int attn_gpu_problem_poison(attn_gpu_problem *x, unsigned tensors, cudaStream_t stream, char *err, size_t errlen);
/* G, R and the golden LSE of the inputs x holds now (allocated on first use; NaN until the
 * reference writes them), synchronized. */
int attn_gpu_problem_references(attn_gpu_problem *x, attn_reference *ref, cudaStream_t stream, char *err,
                                size_t errlen);
/* A packed problem's O and LSE unpacked into o_dense and lse_dense (the references' layout);
 * the references' rows past a sequence's length, which the reference leaves alone, set to
 * what the unpacked rows hold there (0 and -inf) when the references exist. Enqueued. */
int attn_gpu_problem_unpack(attn_gpu_problem *x, cudaStream_t stream, char *err, size_t errlen);
/* The unpacked output as a dense problem of the longest lengths (o = o_dense, lse =
 * lse_dense, BHSD, no mask: which rows see no key is already in the references), for the
 * verdict's figures (attn_output_stats_gpu). */
attn_fwd_params attn_gpu_problem_unpacked(const attn_gpu_problem *x);
/* The packed batch of the correctness suite's cases into d: nseq (<= ATTN_MAX_SEQS) sequences
 * of lens_q[b] queries and lens_k[b] keys; paged (page_size > 0) in a pool with spare pages
 * and a serving engine's block table (d->serving), else packed or a dense cache. */
void attn_problem_set_batch(attn_problem_desc *d, int nseq, int page_size, const int *lens_q, const int *lens_k);
/* A packed batch whose sequences all have the same number of queries (at least one): Q, O
 * and the LSE dense, rows b * seqlen_q + i (a decode batch). */
int attn_problem_q_dense(const attn_problem_desc *d);
/* Q dense and no pages: K and V a dense cache with seqused_k and ATTN_CACHE_SLACK spare rows. */
int attn_problem_kv_cache(const attn_problem_desc *d);
/* Whether the problem gives seqused_k: a dense cache always; paged, unless d->serving and
 * every sequence holds the same number of keys (at least one): the ABI's other form, every
 * sequence storing seqlen_k keys, where the length comes from seqlen_k and not from
 * block_table_stride * page_size. */
int attn_problem_seqused(const attn_problem_desc *d);
void attn_gpu_problem_free(attn_gpu_problem *x);

/* The logical view of tensor t (q, k, v, o) and the first byte of its data (past the guard). */
attn_tensor_view attn_gpu_problem_view(const attn_gpu_problem *x, attn_tensor_id t);
void *attn_gpu_problem_data(const attn_gpu_problem *x, attn_tensor_id t);
/* Bytes from tensor t's buffer to its first element: the guard band, and 2 more when
 * desc.shifted names it (buf[t] + lead is attn_gpu_problem_data's pointer). */
size_t attn_gpu_problem_lead(const attn_gpu_problem *x, attn_tensor_id t);

/* Copies of some of a problem's buffers (a set of ATTN_TENSOR_BIT, guard bands included), to
 * compare with later (two launches' outputs) or to put back (inputs held back while the
 * buffers hold poison). Enqueued on `stream`. */
typedef struct {
    void *buf[ATTN_N_TENSORS];
    size_t bytes[ATTN_N_TENSORS];
} attn_gpu_snapshot;
int attn_gpu_problem_snapshot(const attn_gpu_problem *x, unsigned tensors, attn_gpu_snapshot *s,
                              cudaStream_t stream, char *err, size_t errlen);
int attn_gpu_problem_restore(attn_gpu_problem *x, const attn_gpu_snapshot *s, cudaStream_t stream, char *err,
                             size_t errlen);
void attn_gpu_snapshot_free(attn_gpu_snapshot *s);

/* What fwd changed in its inputs (the check inputs_unchanged): Q, K and V against the fill
 * they came from (x->desc.seed; on the GPU, attn_diff_fill_view), their guard bands against
 * the poison, and each layout array fwd was given (cu_seqlens_q, cu_seqlens_k, block_table,
 * seqused_k) against the host's copy it was uploaded from. */
typedef struct {
    const char *name;                /* "Q", "K", "V", "cu_seqlens_q", "cu_seqlens_k", "block_table", "seqused_k" */
    int tensor;                      /* ATTN_T_Q, ATTN_T_K or ATTN_T_V; -1 for a layout array */
    unsigned long long count, total; /* elements that differ, of `total` */
    unsigned long long first;        /* the first's index: logical (the view's order) or in the array */
    uint32_t was, now;               /* its bits before and after fwd (16 of them for Q, K and V) */
    unsigned long long guard_count;  /* Q, K, V: bytes of their guard bands written */
    long long guard_first;           /* the first's offset from the data's start (negative: before it) */
} attn_input_change;
enum { ATTN_N_INPUTS = 7 };
/* Every input of x->p compared: the changed ones into out[ATTN_N_INPUTS] (count or guard_count
 * > 0). Their number, or -1 with the reason in err. Synchronizes `stream`. */
int attn_gpu_problem_input_changes(const attn_gpu_problem *x, attn_input_change *out, cudaStream_t stream, char *err,
                                   size_t errlen);
/* One line (no newline) for a change of x's input: "input K modified by fwd: 3 of 4096 elements
 * differ, the first at (page 7 row 3 = b=2 s=35, h=1, d=5): bits 0x3c00 -> 0x3e00 (1 -> 1.5)";
 * the element in the tensor's own coordinates (dense b, h, s, d; packed rows by sequence;
 * paged rows by page and the sequence whose block table holds it), an array's by [b][column]. */
void attn_input_change_describe(const attn_gpu_problem *x, const attn_input_change *ch, char *out, size_t len);
/* n int32 before (was) and after (now) into ch's count, total, first, was and now. */
void attn_i32_diff(const int32_t *was, const int32_t *now, size_t n, attn_input_change *ch);

/* ---- The backward problem (ABI version 5) ----
 * The forward problem of d (Q, K, V filled), its O and LSE the golden forward's (O rounded to
 * the dtype: any correct forward's, not the kernel's), dO of fresh random values (std 1) in
 * O's layout or its own, the gradients dQ, dK, dV and the kernel's workspace poisoned inside
 * guard bands, and the references G (float32) and R (the naive fp16/bf16 twin) of dQ, dK, dV.
 * A paged problem has no backward (refused with that reason). */
enum { ATTN_G_DO, ATTN_G_DQ, ATTN_G_DK, ATTN_G_DV, ATTN_G_WS, ATTN_N_BWD_BUFS };
#define ATTN_GRAD_BIT(t) (1u << (t))
enum { ATTN_BWD_OUTPUTS = ATTN_GRAD_BIT(ATTN_G_DQ) | ATTN_GRAD_BIT(ATTN_G_DK) | ATTN_GRAD_BIT(ATTN_G_DV) |
                          ATTN_GRAD_BIT(ATTN_G_WS) };
typedef struct {
    attn_gpu_problem f;             /* the forward problem; f.p is what bp.fwd points at */
    attn_bwd_params bp;             /* bwd's problem: points at f.p and the buffers below */
    attn_layout layout[4];          /* dO, dQ, dK, dV of a dense problem (packed: rows as O, Q, K, V) */
    attn_strides st[4];             /* their strides */
    void *buf[ATTN_N_BWD_BUFS];     /* device allocations, guard bands included */
    size_t bytes[ATTN_N_BWD_BUFS];
    size_t elems[3];                /* dQ, dK, dV elements in the references' layout */
    float *g[3], *r[3];             /* golden and twin dQ, dK, dV: [batch][heads or heads_k][rows][dim] */
    void *dense[3];                 /* packed: the kernel's dQ, dK, dV unpacked (attn_bwd_problem_judged) */
} attn_bwd_problem;

/* Builds the backward problem of d for kernel k (its bwd_workspace sizes the workspace;
 * deterministic as bwd's flag), dO, dQ, dK, dV in `layout` (dense problems; NULL: O's, Q's, K's
 * and V's layouts of d), the references included. ref NULL (compute-sanitizer's one launch):
 * no reference runs, O is random and the LSE 0, nothing to judge against. 0, or 1 with the
 * reason in err (x freed). */
int attn_bwd_problem_build(attn_bwd_problem *x, const attn_problem_desc *d, const attn_layout *layout,
                           const attn_kernel *k, int deterministic, attn_reference *ref, cudaStream_t stream,
                           char *err, size_t errlen);
/* The buffers of a set of ATTN_GRAD_BIT (guard bands included) poisoned. */
int attn_bwd_problem_poison(attn_bwd_problem *x, unsigned bufs, cudaStream_t stream, char *err, size_t errlen);
void attn_bwd_problem_free(attn_bwd_problem *x);
/* Gradient i (0 dQ, 1 dK, 2 dV) as its buffer holds it, a tensor view of its layout
 * (packed: rows of [row][heads][dim], batch 1). */
attn_tensor_view attn_bwd_problem_view(const attn_bwd_problem *x, int i);
void *attn_bwd_problem_data(const attn_bwd_problem *x, int buf);
/* Gradient i made ready for the verdict: a packed one unpacked into x->dense[i] (its rows past
 * a sequence's length 0), a dense cache's rows past the used keys cleared of the poison (0 or
 * untouched is the ABI's rule: anything else is counted in *stale, which may be NULL). *view is
 * then the dense problem that attn_output_stats_gpu judges against x->g[i] and x->r[i]: o the
 * gradient, seqlen_q its rows, head_dim_v its columns, heads its heads; dQ of a dense problem
 * keeps the mask (a row that sees no key must be exactly 0). Synchronizes `stream`. */
int attn_bwd_problem_judged(attn_bwd_problem *x, int i, attn_fwd_params *view, attn_match *stale,
                            cudaStream_t stream, char *err, size_t errlen);
/* Gradient i by the verdict rule with [gradients]' factors of tol (check bwd_accuracy's, and
 * the benchmarks'): made ready (attn_bwd_problem_judged: *view, *stale), its figures against
 * x->g[i] and x->r[i] gathered on the GPU, the rule's outcome in *v. Right when v->rule is
 * ATTN_RULE_PASS and stale->count is 0. 0, or 1 with err (a GPU error). Synchronizes `stream`. */
int attn_bwd_grad_verdict(attn_bwd_problem *x, int i, const attn_tolerance *tol, attn_fwd_params *view,
                          attn_match *stale, attn_output_verdict *v, cudaStream_t stream, char *err, size_t errlen);
/* (b, h, s, d) of element i of a judged gradient's view ([batch][heads][seqlen_q][head_dim_v]) */
void attn_bwd_grad_where(const attn_fwd_params *view, size_t i, int *b, int *h, int *s, int *d);
extern const char *const attn_grad_names[3]; /* "dQ", "dK", "dV" */

#ifdef __cplusplus
}
#endif

#endif
