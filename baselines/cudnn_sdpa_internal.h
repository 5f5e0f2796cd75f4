/* Private to baselines/cudnn_*.c: cuDNN 9's ABI values, the library's entry points, the plan,
 * and the functions one part of the baseline calls in another. The API is cudnn_sdpa.h.
 *
 * No cuDNN header is included: the few enum values used are cuDNN 9's stable ABI values, as
 * cudnn_graph.h (9.19) defines them, so the baseline builds where cuDNN is not installed.
 *
 *   cudnn_load.c      loading libcudnn (dlopen, symbols, version), the handle, messages
 *   cudnn_graph.c     descriptors, graph pieces, the two forward graph forms
 *   cudnn_graph_bwd.c the backward's composite graph
 *   cudnn_engines.c   engine choice (heuristics modes, candidates) and autotuning
 *   cudnn_plan.c      plan creation: graph form search, buffers, options
 *   cudnn_plan_bwd.c  backward plans: refusals, the workspace, creation, tuning
 *   cudnn_run.c       running a plan: problem check, pointer binding, the variant pack kept
 *   cudnn_run_bwd.c   running a backward plan
 *   cudnn_aux.c       the helper kernels (PTX) and their launches
 *   cudnn_kcache.c    dynamic-shape graphs and the handle's kernel cache, with the fallback
 *                     to the static graph */
#ifndef ATTN_CUDNN_SDPA_INTERNAL_H
#define ATTN_CUDNN_SDPA_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "cudnn_sdpa.h"

/* ---- cuDNN 9 ABI values (cudnn_graph.h) ------------------------------------------ */

enum { CUDNN_STATUS_SUCCESS = 0 };

enum { /* cudnnDataType_t */
    CUDNN_DATA_FLOAT = 0,
    CUDNN_DATA_HALF = 2,
    CUDNN_DATA_INT32 = 4,
    CUDNN_DATA_BFLOAT16 = 9,
    CUDNN_DATA_INT64 = 10,
    CUDNN_DATA_BOOLEAN = 11,
};

enum { /* cudnnPointwiseMode_t */
    CUDNN_POINTWISE_ADD = 0,
    CUDNN_POINTWISE_MUL = 1,
    CUDNN_POINTWISE_DIV = 6,
    CUDNN_POINTWISE_SUB = 9,
    CUDNN_POINTWISE_EXP = 13,
    CUDNN_POINTWISE_LOG = 15,
    CUDNN_POINTWISE_IDENTITY = 21,
    CUDNN_POINTWISE_TANH_FWD = 101,
    CUDNN_POINTWISE_TANH_BWD = 201,
    CUDNN_POINTWISE_CMP_GT = 302,
    CUDNN_POINTWISE_CMP_GE = 303,
    CUDNN_POINTWISE_CMP_LT = 304,
    CUDNN_POINTWISE_LOGICAL_AND = 400,
    CUDNN_POINTWISE_GEN_INDEX = 501,
    CUDNN_POINTWISE_BINARY_SELECT = 601,
};

enum { /* cudnnReduceTensorOp_t */
    CUDNN_REDUCE_TENSOR_ADD = 0,
    CUDNN_REDUCE_TENSOR_MAX = 3,
};

enum { /* cudnnBackendHeurMode_t */
    CUDNN_HEUR_MODE_B = 1,
    CUDNN_HEUR_MODE_FALLBACK = 2,
    CUDNN_HEUR_MODE_A = 3,
};

enum { /* cudnnBackendAttributeType_t */
    CUDNN_TYPE_HANDLE = 0,
    CUDNN_TYPE_DATA_TYPE = 1,
    CUDNN_TYPE_BOOLEAN = 2,
    CUDNN_TYPE_INT64 = 3,
    CUDNN_TYPE_VOID_PTR = 6,
    CUDNN_TYPE_HEUR_MODE = 8,
    CUDNN_TYPE_KNOB_TYPE = 9,
    CUDNN_TYPE_POINTWISE_MODE = 14,
    CUDNN_TYPE_BACKEND_DESCRIPTOR = 15,
    CUDNN_TYPE_REDUCTION_OPERATOR_TYPE = 18,
};

enum { /* cudnnBackendDescriptorType_t */
    CUDNN_BACKEND_POINTWISE_DESCRIPTOR = 0,
    CUDNN_BACKEND_ENGINE_DESCRIPTOR = 2,
    CUDNN_BACKEND_ENGINECFG_DESCRIPTOR = 3,
    CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR = 4,
    CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR = 5,
    CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR = 7,
    CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR = 13,
    CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR = 15,
    CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR = 16,
    CUDNN_BACKEND_TENSOR_DESCRIPTOR = 17,
    CUDNN_BACKEND_MATMUL_DESCRIPTOR = 18,
    CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR = 19,
    CUDNN_BACKEND_REDUCTION_DESCRIPTOR = 21,
    CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR = 22,
    CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR = 31,
    CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR = 34,
    CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR = 35,
    CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR = 41,
};

enum { /* cudnnBackendAttributeName_t */
    CUDNN_ATTR_POINTWISE_MODE = 0,
    CUDNN_ATTR_POINTWISE_MATH_PREC = 1,
    CUDNN_ATTR_POINTWISE_AXIS = 9,
    CUDNN_ATTR_ENGINEHEUR_MODE = 200,
    CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH = 201,
    CUDNN_ATTR_ENGINEHEUR_RESULTS = 202,
    CUDNN_ATTR_ENGINECFG_ENGINE = 300,
    CUDNN_ATTR_ENGINECFG_KNOB_CHOICES = 302,
    CUDNN_ATTR_EXECUTION_PLAN_HANDLE = 400,
    CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401,
    CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402,
    CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE = 406,
    CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE = 600,
    CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE = 601,
    CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR = 750,
    CUDNN_ATTR_OPERATION_POINTWISE_XDESC = 751,
    CUDNN_ATTR_OPERATION_POINTWISE_BDESC = 752,
    CUDNN_ATTR_OPERATION_POINTWISE_YDESC = 753,
    CUDNN_ATTR_OPERATION_POINTWISE_DXDESC = 756,
    CUDNN_ATTR_OPERATION_POINTWISE_DYDESC = 757,
    CUDNN_ATTR_OPERATION_POINTWISE_TDESC = 758,
    CUDNN_ATTR_OPERATIONGRAPH_HANDLE = 800,
    CUDNN_ATTR_OPERATIONGRAPH_OPS = 801,
    CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED = 803,
    CUDNN_ATTR_ENGINE_GLOBAL_INDEX = 1301,
    CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT = 900,
    CUDNN_ATTR_TENSOR_DATA_TYPE = 901,
    CUDNN_ATTR_TENSOR_DIMENSIONS = 902,
    CUDNN_ATTR_TENSOR_STRIDES = 903,
    CUDNN_ATTR_TENSOR_UNIQUE_ID = 906,
    CUDNN_ATTR_TENSOR_IS_VIRTUAL = 907,
    CUDNN_ATTR_TENSOR_IS_BY_VALUE = 908,
    CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC = 913,
    CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS = 1000,
    CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS = 1001,
    CUDNN_ATTR_VARIANT_PACK_WORKSPACE = 1003,
    CUDNN_ATTR_MATMUL_COMP_TYPE = 1500,
    CUDNN_ATTR_OPERATION_MATMUL_ADESC = 1520,
    CUDNN_ATTR_OPERATION_MATMUL_BDESC = 1521,
    CUDNN_ATTR_OPERATION_MATMUL_CDESC = 1522,
    CUDNN_ATTR_OPERATION_MATMUL_DESC = 1523,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC = 1525,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC = 1526,
    CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC = 1527,
    CUDNN_ATTR_REDUCTION_OPERATOR = 1600,
    CUDNN_ATTR_REDUCTION_COMP_TYPE = 1601,
    CUDNN_ATTR_OPERATION_REDUCTION_XDESC = 1610,
    CUDNN_ATTR_OPERATION_REDUCTION_YDESC = 1611,
    CUDNN_ATTR_OPERATION_REDUCTION_DESC = 1612,
    CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC = 1950,
    CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC = 1951,
    CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC = 1952,
    CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC = 1953,
    CUDNN_ATTR_OPERATION_RESHAPE_XDESC = 2200,
    CUDNN_ATTR_OPERATION_RESHAPE_YDESC = 2201,
    CUDNN_ATTR_KERNEL_CACHE_OPERATION_GRAPH = 2400,
    CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC = 2800,
    CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC = 2801,
    CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC = 2802,
    CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC = 2803,
    CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC = 2804,
    CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC = 2805,
};

/* cudnn-frontend builds the single SDPA_FWD operation from this backend version on. */
#define SDPA_OP_MIN_VERSION 91301L
/* Dynamic-shape operation graphs and the kernel cache: the descriptor came in 9.4, binding it
 * to an operation graph (CUDNN_ATTR_KERNEL_CACHE_OPERATION_GRAPH) in 9.5; cudnn-frontend's
 * kernel cache test needs 9.5. */
#define KCACHE_MIN_VERSION 90500L

/* ---- library ---------------------------------------------------------------------- */

typedef int cudnn_status;
typedef struct {
    size_t (*GetVersion)(void);
    cudnn_status (*Create)(void **handle);
    cudnn_status (*Destroy)(void *handle);
    cudnn_status (*SetStream)(void *handle, cudaStream_t stream);
    const char *(*GetErrorString)(cudnn_status status);
    void (*GetLastErrorString)(char *message, size_t max_size); /* may be NULL */
    cudnn_status (*CreateDescriptor)(int type, void **desc);
    cudnn_status (*DestroyDescriptor)(void *desc);
    cudnn_status (*SetAttribute)(void *desc, int name, int type, int64_t count, const void *values);
    cudnn_status (*GetAttribute)(void *desc, int name, int type, int64_t requested, int64_t *count,
                                 void *values);
    cudnn_status (*Finalize)(void *desc);
    cudnn_status (*Execute)(void *handle, void *plan, void *variant_pack);
} cudnn_fns;

struct attn_cudnn {
    void *lib;
    void *handle;
    long version;
    cudnn_fns f;
    char requested[1024];  /* the name dlopen was given */
    const char *chosen_by; /* which setting chose it */
    /* the helper kernels (cudnn_aux.c), loaded by the first plan that needs them */
    cudaLibrary_t aux;
    cudaKernel_t k_lens, k_fix, k_bwd_stats, k_kv_fix;
    /* the kernel cache of dynamic-shape plans (cudnn_kcache.c), made by the first plan that
     * uses one, from that plan's operation graph, which is kept here with it; kcache_why: why
     * it could not be made (then no later plan tries) */
    void *kcache, *kcache_graph;
    char kcache_why[512];
    /* runs' own buffers (sdpa_run_begin), made with the first plan; NULL: none could be made
     * (runs on another stream then wait for the plan's last run) */
    cudaMemPool_t pool;
};

/* ---- plan ------------------------------------------------------------------------- */

/* ROLE_LSE: the statistics bound to p->lse itself (want_lse, not sliced, not packed);
 * ROLE_STATS: to the plan's scratch. ROLE_SEQ_Q/KV: the per-sequence lengths [B,1,1,1]
 * (the plan's buffer, or p->seqused_k itself); ROLE_PAGES: p->block_table; ROLE_*_OFF: the
 * ragged offsets (elements) the lens kernel writes into the plan's buffer. The backward's:
 * dO, dQ, dK, dV; ROLE_ONE the by-value 1 of the dO.O chain; ROLE_SUM and ROLE_ACCUM its row
 * sums and fp32 dQ accumulator in the run's workspace; ROLE_D*_OFF their ragged offsets. */
enum {
    ROLE_Q, ROLE_K, ROLE_V, ROLE_O, ROLE_SCALE, ROLE_NEG_INF, ROLE_SKV, ROLE_SQ, ROLE_STATS, ROLE_LSE,
    ROLE_SOFTCAP, ROLE_RIGHT, ROLE_LEFT_I, ROLE_LEFT_F, ROLE_SEQ_Q, ROLE_SEQ_KV, ROLE_PAGES,
    ROLE_Q_OFF, ROLE_K_OFF, ROLE_V_OFF, ROLE_O_OFF,
    ROLE_DO, ROLE_DQ, ROLE_DK, ROLE_DV, ROLE_ONE, ROLE_SUM, ROLE_ACCUM,
    ROLE_DQ_OFF, ROLE_DK_OFF, ROLE_DV_OFF, ROLE_DO_OFF,
};
enum {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_SCALE, UID_NEG_INF, UID_SKV, UID_SQ, UID_STATS, UID_SOFTCAP,
    UID_RIGHT, UID_LEFT, UID_SEQ_Q, UID_SEQ_KV, UID_PAGES, UID_Q_OFF, UID_K_OFF, UID_V_OFF, UID_O_OFF,
    UID_DO, UID_DQ, UID_DK, UID_DV, UID_ONE, UID_SUM, UID_ACCUM, UID_DQ_OFF, UID_DK_OFF, UID_DV_OFF, UID_DO_OFF,
};
enum { MAX_UIDS = 40, MAX_OPS = 64, MAX_ENGINE_CFGS = 64 };
/* autotuning: candidates kept per graph form, knob choices read per config, tag length */
enum { MAX_CANDIDATES = 64, KNOB_MAX = 64, TAG_LEN = 160, DEFAULT_MAX_CONFIGS = 32 };

typedef struct { /* an engine config that finalized into an execution plan */
    void *plan;        /* the execution plan (one of the plan's descriptors) */
    int64_t workspace; /* bytes */
    long long engine_id;
    char tag[TAG_LEN]; /* "eng<id>_k<type>=<value>..." */
    double ms;         /* tuning: time per run; < 0 not timed (or it failed to run) */
} candidate;

typedef struct { /* one cudaMemset2DAsync of the zero-filled (keyless) rows of O (dQ) */
    int64_t offset; /* elements from p->o (p->dq) */
    size_t pitch, width, height;
} zero_fill;

struct attn_cudnn_plan {
    attn_cudnn *c;
    const char *kind;
    attn_fwd_params shape;  /* p at create, pointers cleared */
    int esize;              /* bytes per element of Q/K/V/O */
    int64_t q_offset, o_offset; /* elements: non-zero when Q/O are sliced */

    void **descs; /* every descriptor this plan created, in creation order */
    int n_descs, cap_descs;
    void *exec_plan;

    int n_uids;
    int64_t uids[MAX_UIDS];
    int roles[MAX_UIDS];

    void *workspace;
    int64_t workspace_size;
    float *stats; /* scratch for a non-virtual softmax-stats output, else NULL */

    /* by-value scalars: cuDNN reads them through these host pointers */
    float scale, neg_inf, softcap, left_f;
    int32_t skv, sq, right, left_i;

    /* per-sequence lengths (padded plans): lens[0 .. B) the queries, lens[lens_kv ..
     * lens_kv + B) the keys, int32 (constants, or the lens kernel's output); offs: the
     * ragged offsets of Q, K, V, O (int64 elements, offs_n apart) */
    int32_t *lens;
    int64_t lens_kv;
    int64_t *offs;
    int64_t offs_n;
    int seq_kv_used;        /* seq_len_kv is p->seqused_k itself */
    int run_lens, run_fix;  /* launch the lens kernel before cuDNN, the fix kernel after */

    /* runs of this plan on its buffers in enqueue order (sdpa_run_begin / sdpa_run_end):
     * completes after the last one, enqueued on last_stream; NULL before the first run that
     * needs it */
    cudaEvent_t last_run;
    cudaStream_t last_stream;
    /* a run's own buffers (sdpa_run_begin: the plan's are in use on another stream), from the
     * pool; kept: the plan's workspace, own_ws, stats, lens and offs meanwhile */
    void *run_buf;
    void *kept[5];
    size_t stats_bytes, lens_bytes, offs_bytes; /* the plan's stats, lens and offs */

    /* the variant pack of the last run, reused while pointers and scale stay the same */
    void *vpack;
    void *vpack_ptrs[MAX_UIDS];
    void *vpack_workspace;
    float vpack_scale;

    zero_fill *fills;
    int n_fills;

    /* the LSE (want_lse): stats_role is ROLE_LSE (bound to p->lse) or, when sliced,
     * ROLE_STATS (the scratch above), copied into rows [lse_cut, seqlen_q) of each
     * (batch, head) of p->lse while rows [0, lse_cut) get -inf from neg_inf_rows */
    int want_lse, stats_role;
    int64_t lse_cut;
    float *neg_inf_rows; /* batch * heads * lse_cut floats, all -inf */

    /* engine configs: what the search may do, what it found, what it chose */
    int tune, max_configs, tuned;
    candidate *cands; /* during creation only (a backward plan: until it is tuned) */
    int n_cands;
    int configs_tried, configs_built, configs_timed, chosen_rank;
    char engine[TAG_LEN];
    long long engine_id;
    double best_ms, first_ms, build_s, tune_s;
    char heuristics[256];

    /* where build_s went (wall seconds, every graph attempt and candidate summed): the
     * operation graphs' finalize, the heuristics queries (configs listed and tagged), the
     * execution plans' finalize (cuDNN's code generation and the driver's JIT), and how many
     * execution plans were finalized (built or refused) */
    double opgraph_s, heur_s, finalize_s;
    int finalizes;
    /* the kernel cache (cudnn_kcache.c): asked for (opts.kernel_cache resolved), used by the
     * graph kept, why not (or "used"), and the seconds the refused dynamic attempts cost */
    int kc_want, kc_used;
    char kc_note[256];
    double kc_fail_s;

    /* the backward (cudnn_plan_bwd.c): workspace = [fp32 dQ accumulator][dO.O row sums]
     * [cuDNN's workspace_size bytes], each part 256-byte aligned; pl->workspace points at
     * cuDNN's part of the current run's (the caller's, or own_ws) */
    int bwd;
    attn_bwd_params bshape;  /* p at create (strides, deterministic), pointers cleared */
    int64_t cut;             /* sliced (causal, seqlen_q > seqlen_k): the leading rows of Q, O,
                                dO, dQ and the LSE that see no key, left out of cuDNN's graph */
    int64_t accum_bytes, sum_bytes;
    int stats_mode;          /* how the LSE reaches cuDNN: STATS_BOUND, STATS_COPY, STATS_CONVERT */
    int zero_accum;          /* cuDNN < 9.6: the accumulator is zeroed before each run */
    int tune_runs;           /* runs per timed round when tuning later (0: about 1 ms) */
    int run_kv_fix;          /* the kv-fix kernel zeroes dK, dV rows no query sees */
    float one;
    void *own_ws;            /* the plan's own workspace; NULL: every run passes one */
};

/* How a backward plan gives cuDNN the forward's LSE (its Stats [B,H,Sq,1]): p->lse itself;
 * rows cut..seqlen_q of each (batch, head) copied into the plan's scratch (sliced); or the
 * bwd-stats kernel's [B][H][Sq] copy, packed rows unpacked and -inf (a row that sees no key)
 * turned into +inf, so that exp(s - lse) is 0 there, not NaN. */
enum { STATS_BOUND, STATS_COPY, STATS_CONVERT };

/* ---- messages --------------------------------------------------------------------- */

static inline void put(char *why, size_t whylen, const char *fmt, ...) {
    if (!why || !whylen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* cudnnGetLastErrorString on one line (newlines as spaces); "" when the library has none */
void sdpa_last_error(const attn_cudnn *c, char *buf, size_t len);
/* "<function> (<what>[, <attribute>]): <status name> (<code>) <last error text>" */
void sdpa_msg(const attn_cudnn *c, char *why, size_t whylen, cudnn_status st, const char *fn, const char *what,
              const char *attr);

/* ---- the problem, as the graphs see it ------------------------------------------------ */

/* The ABI's "off" values made explicit: heads_k, head_dim_v resolved; the window with
 * causal as right bound 0 (a causal problem has window_right -1 or 0), -1 for unbounded. */
static inline int heads_k_of(const attn_fwd_params *p) { return p->heads_k > 0 ? p->heads_k : p->heads; }
static inline int head_dim_v_of(const attn_fwd_params *p) { return p->head_dim_v > 0 ? p->head_dim_v : p->head_dim; }
static inline int right_of(const attn_fwd_params *p) { return p->causal ? 0 : p->window_right < 0 ? -1 : p->window_right; }
static inline int left_of(const attn_fwd_params *p) { return p->window_left < 0 ? -1 : p->window_left; }

typedef struct {
    int dtype; /* CUDNN_DATA_HALF / CUDNN_DATA_BFLOAT16 */
    int64_t B, H, Hk, Sq, Sk, D, Dv; /* Sq, Sk: the longest sequences when padded */
    int64_t left, right; /* the ABI's window, causal as right 0; -1: unbounded */
    float softcap;       /* > 0: softcap * tanh(s / softcap) before the masks */
    int padded;          /* per-sequence lengths: seq_len tensors, padding mask, GEMM overrides */
    int dynamic;         /* those lengths are device data (cu_seqlens, seqused_k, block table) */
    int packed_q;           /* Q's rows packed by cu_seqlens_q (the LSE [heads][total_q]) */
    int ragged_q, ragged_k; /* ragged offsets on Q and O, K and V: rows packed by cu_seqlens;
                               cuDNN wants them on all four or none (pages aside), so a dense
                               side gets constant offsets b * batch_stride */
    int paged;              /* K and V are page pools read through the block table */
    int64_t num_pages, page_size, table_cols, table_stride;
    int64_t qs[3], ks[3], vs[3], os[3]; /* batch (page when paged), head, row strides in elements */
    /* the backward: dO, dQ, dK, dV strides as above; accum: dQ through the fp32 accumulator
     * (cudnn-frontend's default), else straight from its matmul (the deterministic graph) */
    int64_t dos[3], dqs[3], dks[3], dvs[3];
    int accum;
} problem;

/* ---- descriptor bookkeeping (cudnn_graph.c) ------------------------------------------ */

typedef struct {
    attn_cudnn *c;
    attn_cudnn_plan *pl;
    char *why;
    size_t whylen;
    int64_t next_uid; /* for virtual tensors */
    int ops_only;     /* sdpa_make_plan stops before the operation graph (which needs a
                         handle, so a GPU): the host test of the descriptors */
    int n_ops;        /* ops_only: the operations the graph has */
    int dynamic;      /* a dynamic-shape operation graph whose execution plans use the
                         handle's kernel cache (sdpa_build_graph) */
} builder;

/* Destroys the plan's descriptors created after the first `mark`. */
void sdpa_rollback(attn_cudnn_plan *pl, int mark);
/* A new descriptor of `type`, owned by the plan; NULL with the reason in b->why. */
void *sdpa_mk(builder *b, int type, const char *what);
int sdpa_set_attr(builder *b, void *d, const char *what, int name, const char *attr, int type, int64_t n, const void *v);
#define SA(b, d, what, name, type, n, v) sdpa_set_attr(b, d, what, name, #name, type, n, v)
int sdpa_fin(builder *b, void *d, const char *what);

/* ---- graph pieces (cudnn_graph.c) ------------------------------------------------------ */

/* A tensor (ragged: NULL, or the [B+1,1,1,1] offsets of each batch's first element); a
 * non-virtual one bound at run time to the pointer of `role`; a virtual one. NULL on failure. */
void *sdpa_tensor(builder *b, const char *what, int64_t uid, int dtype, const int64_t dims[4],
                  const int64_t strides[4], bool is_virtual, bool by_value, void *ragged);
void *sdpa_io_tensor(builder *b, const char *what, int64_t uid, int role, int dtype, const int64_t dims[4],
                     const int64_t strides[4], bool by_value, void *ragged);
void *sdpa_virt(builder *b, const char *what, int dtype, const int64_t dims[4], const int64_t strides[4]);
/* Operations: y = mode(x[, bb[, t]]) (axis >= 0 only for GEN_INDEX; TANH_BWD: x, dy = bb,
 * dx = y); y = reduce(x) over the
 * dimensions where y has extent 1 or fewer (the heads of a GQA group); cc = a . bm with the
 * optional [B,1,1,1] int32 overrides of M, N, K. NULL on failure. */
void *sdpa_pointwise(builder *b, const char *what, int mode, int prec, int64_t axis, void *x, void *bb, void *t,
                     void *y);
void *sdpa_reduction(builder *b, const char *what, int mode, void *x, void *y);
void *sdpa_matmul(builder *b, const char *what, void *a, void *bm, void *cc, void *m, void *n, void *kk);

/* A composite graph under construction: its operations, and the masks' shared pieces. */
typedef struct {
    builder *b;
    const problem *pr;
    void *ops[MAX_OPS];
    int n;
    int64_t ds[4], ss[4]; /* the [B,H,Sq,Sk] score tensors */
    void *seq_q, *seq_kv; /* padded: the [B,1,1,1] lengths */
    void *ninf;           /* the mask value, a by-value scalar (declared by the first mask) */
} sdpa_graph;

int sdpa_add_op(sdpa_graph *g, void *op); /* 0, or -1 (op NULL, or too many) */
/* y = mode(x[, bb]) into a new virtual [B,H,Sq,Sk] tensor of dtype, computed in prec */
void *sdpa_pw(sdpa_graph *g, const char *what, int mode, int prec, int dtype, void *x, void *bb);
/* a by-value scalar graph input */
void *sdpa_scalar(sdpa_graph *g, const char *what, int64_t uid, int role, int dtype);
/* The masks on the scores s, as cudnn-frontend emits them: the padding mask (padded
 * problems), then the bands (right bound, left bound); each masked score becomes -inf. The
 * new scores, or NULL. */
void *sdpa_mask_padding(sdpa_graph *g, void *s);
void *sdpa_mask_bands(sdpa_graph *g, void *s);

/* ---- graphs (cudnn_graph.c, cudnn_graph_bwd.c), engines and autotuning (cudnn_engines.c) -- */

/* The graph forms, built into b->pl up to its execution plan candidates (sdpa_make_plan):
 * 0, or -1 with the reason in b->why. */
int sdpa_graph_op(builder *b, const problem *pr, bool stats_out);
int sdpa_graph_composite(builder *b, const problem *pr, bool stats_out);
int sdpa_graph_bwd(builder *b, const problem *pr);
/* The host test (no GPU): p's backward graph built as a plan would build it, every tensor and
 * operation descriptor finalized by cuDNN, up to the operation graph (which needs a handle);
 * its operations and graph inputs/outputs counted. 0, or -1 with why. (cudnn_plan_bwd.c) */
int sdpa_bwd_graph_check(attn_cudnn *c, const attn_bwd_params *p, int *n_ops, int *n_uids, char *why,
                         size_t whylen);
int sdpa_make_plan(builder *b, void **ops, int n_ops);

/* ---- dynamic shapes and the kernel cache (cudnn_kcache.c) ------------------------------ */

enum { FORM_SDPA_OP, FORM_COMPOSITE, FORM_BWD }; /* sdpa_graph_op, _composite, _bwd */
/* NULL when a graph of this form is tried as a dynamic-shape graph with the handle's kernel
 * cache (want: the plan's option), else why not: the option off, cuDNN < 9.5, the single SDPA
 * operation (cudnn-frontend: no dynamic shapes for it), or the cache could not be made. */
const char *sdpa_kc_skip(const attn_cudnn *c, int want, int form);
/* The graph of `form` built into b->pl up to its execution plan candidates: first as a
 * dynamic-shape graph with the kernel cache (unless sdpa_kc_skip says why not), then, when
 * that is not wanted or cuDNN refuses it, as today's static graph. Sets pl->kc_used and
 * pl->kc_note. 0, or -1 with the static attempt's reason in b->why (the plan rolled back to
 * where it was). stats_out: forward forms only. */
int sdpa_build_graph(builder *b, const problem *pr, int form, bool stats_out);
/* sdpa_make_plan's: the finalized operation graph g bound to the handle's kernel cache (made
 * from g when there is none yet). 0, or -1 with why in b->why. */
int sdpa_kcache_bind(builder *b, void *g);
/* One run of the plan being tuned on the tuning's buffers: 0, or non-zero with why. */
typedef int (*sdpa_run_fn)(void *ctx, attn_cudnn_plan *pl, cudaStream_t stream, char *why, size_t whylen);
int sdpa_tune_plan(attn_cudnn_plan *pl, sdpa_run_fn run, void *ctx, cudaStream_t stream, int runs, char *why,
                   size_t whylen);
int sdpa_keep_candidate(attn_cudnn_plan *pl, int best, char *why, size_t whylen);
double sdpa_now_s(void); /* CLOCK_MONOTONIC seconds */

/* ---- plans (cudnn_plan.c), shared by the backward's (cudnn_plan_bwd.c) ------------------ */

/* libcudnn loaded and its entry points read, no handle (cudnn_load.c): 0, or -1 with why */
int sdpa_open_library(attn_cudnn **out, char *why, size_t whylen);
/* A plan for p's problem with no graph yet; NULL when out of host memory. */
attn_cudnn_plan *sdpa_new_plan(attn_cudnn *c, const attn_fwd_params *p);
problem sdpa_problem_of(const attn_fwd_params *p);
/* Some query row may see no key (dynamic lengths, or a right bound with Sq - Sk beyond it). */
int sdpa_may_have_keyless_rows(const problem *pr);
/* 0, or -1 with why (naming fn) when p is not a problem the baseline can plan */
int sdpa_check_problem(const attn_fwd_params *p, const char *fn, char *why, size_t whylen);
int sdpa_resolve_opts(const attn_cudnn_plan_opts *in, attn_cudnn_plan_opts *o, char *why, size_t whylen);
int sdpa_device_buffer(void **out, size_t n, const void *host, const char *what, char *why, size_t whylen);
/* The lengths of a padded plan and, when ragged, n_tensors arrays of ragged offsets, array t
 * prefilled with b * batch_strides[t] (the lens kernel overwrites the packed ones). */
int sdpa_plan_lengths(attn_cudnn_plan *pl, const attn_fwd_params *p, const problem *pr, const int64_t *batch_strides,
                      int n_tensors, char *why, size_t whylen);
/* The cudaMemset2DAsync calls that zero rows [0, n) of every (batch, head) of a [B][H][rows][D]
 * tensor with these strides (elements): 0, -1 out of host memory, -2 rows overlap. */
int sdpa_plan_zero_fill(attn_cudnn_plan *pl, int64_t B, int64_t H, int64_t D, int64_t bs, int64_t hs, int64_t rs,
                        int64_t n);
/* the current device's compute capability major, 0 when unknown */
int sdpa_sm_major(void);
/* A plan's runs write buffers of the plan's (the workspace, statistics, lengths and offsets),
 * so two runs must never use them at once, also when enqueued on two streams. Runs on one
 * stream are in order. A run on another stream while the plan's last run may still be in
 * flight takes buffers of its own from c->pool (stream-ordered: allocated and freed on its
 * stream), so that no run waits for work on another of the caller's streams (which would tie
 * them together: a deadlock where the caller makes that stream wait for this one; the
 * contract check 'threads'). Inside a graph capture, or without a pool, `stream` waits for
 * the plan's last run (an external event node under capture). sdpa_run_begin before the
 * run's pointers are bound; sdpa_run_end after it (failed: its buffers are given back, no run
 * recorded). Plans that write no buffer of their own enqueue nothing here. 0, or -1 with the
 * reason in why (cudnn_run.c). */
int sdpa_run_begin(attn_cudnn_plan *pl, cudaStream_t stream, char *why, size_t whylen);
int sdpa_run_end(attn_cudnn_plan *pl, cudaStream_t stream, int failed, char *why, size_t whylen);
/* c->pool, when not made yet (a plan's creation: outside any capture). */
void sdpa_make_pool(attn_cudnn *c);
/* the variant pack of ptrs, the workspace and the scale, kept while they stay the same (cudnn_run.c) */
int sdpa_update_vpack(attn_cudnn_plan *pl, void *const *ptrs, char *why, size_t whylen);
/* a and b are the same problem for a plan: shape, strides, dtype, masks, layout arrays given */
int sdpa_same_problem(const attn_fwd_params *a, const attn_fwd_params *b);

/* ---- helper kernels (cudnn_aux.c) ------------------------------------------------------ */

int sdpa_load_aux(attn_cudnn *c, char *why, size_t whylen);
cudaError_t sdpa_launch_lens(const attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream);
cudaError_t sdpa_launch_fix(const attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream);
/* The lens kernel writing the ragged offsets offs4[0..4) (Q, K, V, O order: the backward's dQ,
 * dK, dV, dO) from these row strides. */
cudaError_t sdpa_launch_lens_offs(const attn_cudnn_plan *pl, const attn_fwd_params *p, int64_t *offs4,
                                  const int64_t rs[4], cudaStream_t stream);
/* The backward's: the LSE as cuDNN's Stats (STATS_CONVERT); dQ's rows that see no key zeroed
 * (the fix kernel on dQ); dK and dV rows no query sees zeroed (the kv-fix kernel). */
cudaError_t sdpa_launch_bwd_stats(const attn_cudnn_plan *pl, const attn_bwd_params *p, cudaStream_t stream);
cudaError_t sdpa_launch_fix_dq(const attn_cudnn_plan *pl, const attn_bwd_params *p, cudaStream_t stream);
cudaError_t sdpa_launch_kv_fix(const attn_cudnn_plan *pl, const attn_bwd_params *p, cudaStream_t stream);

#endif
