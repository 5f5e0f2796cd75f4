/* cuDNN fused flash-attention forward through the cuDNN 9 backend API, libcudnn loaded
 * with dlopen. See cudnn_sdpa.h.
 *
 * No cuDNN header is included: the few enum values used below are cuDNN 9's stable ABI
 * values, as cudnn_graph.h (9.19) defines them, so this file builds where cuDNN is not
 * installed. */
#define _GNU_SOURCE /* dladdr, dlinfo, realpath */
#include "cudnn_sdpa.h"

#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <link.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

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
    CUDNN_POINTWISE_TANH_FWD = 101,
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
    CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE = 600,
    CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE = 601,
    CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR = 750,
    CUDNN_ATTR_OPERATION_POINTWISE_XDESC = 751,
    CUDNN_ATTR_OPERATION_POINTWISE_BDESC = 752,
    CUDNN_ATTR_OPERATION_POINTWISE_YDESC = 753,
    CUDNN_ATTR_OPERATION_POINTWISE_TDESC = 758,
    CUDNN_ATTR_OPERATIONGRAPH_HANDLE = 800,
    CUDNN_ATTR_OPERATIONGRAPH_OPS = 801,
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
    CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC = 2800,
    CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC = 2801,
    CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC = 2802,
    CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC = 2803,
    CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC = 2804,
    CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC = 2805,
};

/* cudnn-frontend builds the single SDPA_FWD operation from this backend version on. */
#define SDPA_OP_MIN_VERSION 91301L

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
    /* the two helper kernels (aux_ptx below), loaded by the first plan that needs them */
    cudaLibrary_t aux;
    cudaKernel_t k_lens, k_fix;
};

/* ---- plan ------------------------------------------------------------------------- */

/* ROLE_LSE: the statistics bound to p->lse itself (want_lse, not sliced, not packed);
 * ROLE_STATS: to the plan's scratch. ROLE_SEQ_Q/KV: the per-sequence lengths [B,1,1,1]
 * (the plan's buffer, or p->seqused_k itself); ROLE_PAGES: p->block_table; ROLE_*_OFF: the
 * ragged offsets (elements) the lens kernel writes into the plan's buffer. */
enum {
    ROLE_Q, ROLE_K, ROLE_V, ROLE_O, ROLE_SCALE, ROLE_NEG_INF, ROLE_SKV, ROLE_SQ, ROLE_STATS, ROLE_LSE,
    ROLE_SOFTCAP, ROLE_RIGHT, ROLE_LEFT_I, ROLE_LEFT_F, ROLE_SEQ_Q, ROLE_SEQ_KV, ROLE_PAGES,
    ROLE_Q_OFF, ROLE_K_OFF, ROLE_V_OFF, ROLE_O_OFF,
};
enum {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_SCALE, UID_NEG_INF, UID_SKV, UID_SQ, UID_STATS, UID_SOFTCAP,
    UID_RIGHT, UID_LEFT, UID_SEQ_Q, UID_SEQ_KV, UID_PAGES, UID_Q_OFF, UID_K_OFF, UID_V_OFF, UID_O_OFF,
};
enum { MAX_UIDS = 24, MAX_OPS = 64, MAX_ENGINE_CFGS = 64 };
/* autotuning: candidates kept per graph form, knob choices read per config, tag length */
enum { MAX_CANDIDATES = 64, KNOB_MAX = 64, TAG_LEN = 160, DEFAULT_MAX_CONFIGS = 32 };

typedef struct { /* an engine config that finalized into an execution plan */
    void *plan;        /* the execution plan (one of the plan's descriptors) */
    int64_t workspace; /* bytes */
    long long engine_id;
    char tag[TAG_LEN]; /* "eng<id>_k<type>=<value>..." */
    double ms;         /* tuning: time per run; < 0 not timed (or it failed to run) */
} candidate;

typedef struct { /* one cudaMemset2DAsync of the zero-filled (keyless) rows of O */
    int64_t offset; /* elements from p->o */
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
    candidate *cands; /* during creation only */
    int n_cands;
    int configs_tried, configs_built, configs_timed, chosen_rank;
    char engine[TAG_LEN];
    long long engine_id;
    double best_ms, first_ms, build_s, tune_s;
    char heuristics[256];
};

/* ---- messages --------------------------------------------------------------------- */

static void put(char *why, size_t whylen, const char *fmt, ...) {
    if (!why || !whylen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

static const char *status_name(const attn_cudnn *c, cudnn_status st) {
    const char *s = c->f.GetErrorString ? c->f.GetErrorString(st) : NULL;
    return s ? s : "CUDNN_STATUS_?";
}

/* "<function> (<what>[, <attribute>]): <status name> (<code>) <last error text>" */
static void cudnn_msg(const attn_cudnn *c, char *why, size_t whylen, cudnn_status st,
                      const char *fn, const char *what, const char *attr) {
    char last[4096] = "";
    if (c->f.GetLastErrorString) {
        c->f.GetLastErrorString(last, sizeof last);
        last[sizeof last - 1] = 0;
        for (char *s = last; *s; s++)
            if (*s == '\n' || *s == '\r') *s = ' ';
    }
    put(why, whylen, "%s (%s%s%s): %s (%d)%s%s", fn, what, attr ? ", " : "", attr ? attr : "",
        status_name(c, st), (int)st, last[0] ? " " : "", last);
}

/* ---- descriptor bookkeeping --------------------------------------------------------- */

typedef struct {
    attn_cudnn *c;
    attn_cudnn_plan *pl;
    char *why;
    size_t whylen;
    int64_t next_uid; /* for virtual tensors */
} builder;

static void rollback(attn_cudnn_plan *pl, int mark) {
    while (pl->n_descs > mark) pl->c->f.DestroyDescriptor(pl->descs[--pl->n_descs]);
}

static void *mk(builder *b, int type, const char *what) {
    attn_cudnn_plan *pl = b->pl;
    if (pl->n_descs == pl->cap_descs) {
        int cap = pl->cap_descs ? 2 * pl->cap_descs : 128;
        void **d = realloc(pl->descs, (size_t)cap * sizeof *d);
        if (!d) {
            put(b->why, b->whylen, "out of host memory (descriptor list)");
            return NULL;
        }
        pl->descs = d;
        pl->cap_descs = cap;
    }
    void *d = NULL;
    cudnn_status st = b->c->f.CreateDescriptor(type, &d);
    if (st != CUDNN_STATUS_SUCCESS || !d) {
        cudnn_msg(b->c, b->why, b->whylen, st, "cudnnBackendCreateDescriptor", what, NULL);
        return NULL;
    }
    pl->descs[pl->n_descs++] = d;
    return d;
}

static int set_attr(builder *b, void *d, const char *what, int name, const char *attr, int type,
                    int64_t n, const void *v) {
    cudnn_status st = b->c->f.SetAttribute(d, name, type, n, v);
    if (st == CUDNN_STATUS_SUCCESS) return 0;
    cudnn_msg(b->c, b->why, b->whylen, st, "cudnnBackendSetAttribute", what, attr);
    return -1;
}
#define SA(b, d, what, name, type, n, v) set_attr(b, d, what, name, #name, type, n, v)

static int fin(builder *b, void *d, const char *what) {
    cudnn_status st = b->c->f.Finalize(d);
    if (st == CUDNN_STATUS_SUCCESS) return 0;
    cudnn_msg(b->c, b->why, b->whylen, st, "cudnnBackendFinalize", what, NULL);
    return -1;
}

/* ---- graph pieces --------------------------------------------------------------------- */

/* ragged: NULL, or the [B+1,1,1,1] tensor of each batch's first element (variable lengths,
 * rows packed) */
static void *tensor(builder *b, const char *what, int64_t uid, int dtype, const int64_t dims[4],
                    const int64_t strides[4], bool is_virtual, bool by_value, void *ragged) {
    void *t = mk(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t align = 16;
    if (!t || SA(b, t, what, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual) ||
        (by_value && SA(b, t, what, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value)) ||
        (ragged && SA(b, t, what, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged)) ||
        fin(b, t, what))
        return NULL;
    return t;
}

/* a non-virtual tensor, bound at run time to the pointer of `role` */
static void *io_tensor_r(builder *b, const char *what, int64_t uid, int role, int dtype, const int64_t dims[4],
                         const int64_t strides[4], bool by_value, void *ragged) {
    if (b->pl->n_uids == MAX_UIDS) {
        put(b->why, b->whylen, "internal: too many graph inputs/outputs");
        return NULL;
    }
    void *t = tensor(b, what, uid, dtype, dims, strides, false, by_value, ragged);
    if (t) {
        b->pl->uids[b->pl->n_uids] = uid;
        b->pl->roles[b->pl->n_uids++] = role;
    }
    return t;
}

static void *io_tensor(builder *b, const char *what, int64_t uid, int role, int dtype,
                       const int64_t dims[4], const int64_t strides[4], bool by_value) {
    return io_tensor_r(b, what, uid, role, dtype, dims, strides, by_value, NULL);
}

static void *virt(builder *b, const char *what, int dtype, const int64_t dims[4],
                  const int64_t strides[4]) {
    return tensor(b, what, b->next_uid++, dtype, dims, strides, true, false, NULL);
}

/* y = mode(x[, bb[, t]]); axis >= 0 only for GEN_INDEX */
static void *pointwise(builder *b, const char *what, int mode, int prec, int64_t axis, void *x,
                       void *bb, void *t, void *y) {
    void *d = mk(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    if (!d || SA(b, d, what, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ||
        SA(b, d, what, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) ||
        (axis >= 0 && SA(b, d, what, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis)) ||
        fin(b, d, what))
        return NULL;
    void *op = mk(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        (bb && SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bb)) ||
        (t && SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t)) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        fin(b, op, what))
        return NULL;
    return op;
}

/* y = reduce(x) over the dimensions where y has extent 1 */
static void *reduction(builder *b, const char *what, int mode, void *x, void *y) {
    int comp = CUDNN_DATA_FLOAT;
    void *d = mk(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    if (!d ||
        SA(b, d, what, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode) ||
        SA(b, d, what, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp) ||
        fin(b, d, what))
        return NULL;
    void *op = mk(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d) ||
        fin(b, op, what))
        return NULL;
    return op;
}

/* cc = a . bm (batched over the two leading dimensions), float accumulation; m, n, kk: NULL,
 * or per-batch [B,1,1,1] int32 extents of the rows of a, the columns of bm, the inner
 * dimension (variable lengths: the padding beyond them is not computed) */
static void *matmul(builder *b, const char *what, void *a, void *bm, void *cc, void *m, void *n, void *kk) {
    int comp = CUDNN_DATA_FLOAT;
    void *d = mk(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    if (!d || SA(b, d, what, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp) ||
        fin(b, d, what))
        return NULL;
    void *op = mk(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bm) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cc) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d) ||
        (m && SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m)) ||
        (n && SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n)) ||
        (kk && SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &kk)) ||
        fin(b, op, what))
        return NULL;
    return op;
}

/* y = the rows of the pages of `container` that `pages` lists per sequence, up to `seq`
 * ([B,1,1,1]) keys: a paged K or V cache read as a dense [B,Hk,Sk,.] tensor */
static void *paged_load(builder *b, const char *what, void *container, void *pages, void *seq, void *y) {
    void *op = mk(b, CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &container) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pages) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seq) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        fin(b, op, what))
        return NULL;
    return op;
}

/* What the search over heuristics modes keeps for its refusal message. */
typedef struct {
    char first[4096]; /* the first failure: the likeliest cause when no engine works */
    char msg[4096];   /* the latest failure */
    char counts[256]; /* per mode, "failed" or how many configs it proposed */
} heur_log;

static void log_count(heur_log *lg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_count(heur_log *lg, const char *fmt, ...) {
    size_t used = strlen(lg->counts);
    if (used + 1 >= sizeof lg->counts) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lg->counts + used, sizeof lg->counts - used, fmt, ap);
    va_end(ap);
}

static void keep_first(heur_log *lg) {
    if (!lg->first[0]) snprintf(lg->first, sizeof lg->first, "%s", lg->msg);
}

/* The engine configs the heuristics descriptor proposes, at most MAX_ENGINE_CFGS, created
 * through hb; returns how many cuDNN filled in (0 when it could not list them). */
static int64_t engine_configs(builder *hb, void *heur, const char *mode, void **cfgs, heur_log *lg) {
    attn_cudnn *c = hb->c;
    int64_t n_cfgs = 0;
    cudnn_status st = c->f.GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n_cfgs, NULL);
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnn_msg(c, lg->msg, sizeof lg->msg, st, "cudnnBackendGetAttribute", mode,
                  "CUDNN_ATTR_ENGINEHEUR_RESULTS count");
        keep_first(lg);
        n_cfgs = 0;
    }
    if (n_cfgs > MAX_ENGINE_CFGS) n_cfgs = MAX_ENGINE_CFGS;
    int64_t got = 0;
    for (int64_t i = 0; i < n_cfgs; i++)
        if (!(cfgs[i] = mk(hb, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"))) {
            keep_first(lg);
            n_cfgs = 0;
        }
    if (n_cfgs > 0) {
        st = c->f.GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               n_cfgs, &got, cfgs);
        if (st != CUDNN_STATUS_SUCCESS) {
            cudnn_msg(c, lg->msg, sizeof lg->msg, st, "cudnnBackendGetAttribute", mode,
                      "CUDNN_ATTR_ENGINEHEUR_RESULTS");
            keep_first(lg);
            got = 0;
        }
    }
    if (got > n_cfgs) got = n_cfgs;
    return got;
}

/* Which engine and knobs a config stands for, as cudnn-frontend tags its plans:
 * "eng<CUDNN_ATTR_ENGINE_GLOBAL_INDEX>" then "_k<knob type>=<value>" per knob choice.
 * The descriptors it reads into are its own, destroyed before it returns. 0, or -1 (tag
 * "eng?", *id -1) when cuDNN does not say. */
static int config_tag(attn_cudnn *c, void *cfg, char *tag, size_t len, long long *id) {
    snprintf(tag, len, "eng?");
    *id = -1;
    void *eng = NULL, *knobs[KNOB_MAX];
    int n_knobs = 0, rc = -1;
    int64_t n = 0, engine_index = -1;
    if (c->f.CreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) || !eng) return -1;
    if (c->f.GetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ||
        c->f.GetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &engine_index))
        goto done;
    *id = (long long)engine_index;
    size_t used = (size_t)snprintf(tag, len, "eng%lld", (long long)engine_index);
    for (; n_knobs < KNOB_MAX; n_knobs++)
        if (c->f.CreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &knobs[n_knobs]) || !knobs[n_knobs])
            break;
    int64_t got = 0;
    if (n_knobs < KNOB_MAX ||
        c->f.GetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, KNOB_MAX, &got,
                          knobs)) {
        snprintf(tag + used, len - used, "_k?"); /* the engine is known, its knobs are not */
        rc = 0;
        goto done;
    }
    for (int64_t i = 0; i < got && i < KNOB_MAX && used < len; i++) {
        int type = -1;
        int64_t value = -2, cnt = 0;
        c->f.GetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &type);
        c->f.GetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &cnt, &value);
        int k = snprintf(tag + used, len - used, "_k%d=%lld", type, (long long)value);
        if (k < 0) break;
        used += (size_t)k;
    }
    rc = 0;
done:
    for (int i = 0; i < n_knobs; i++) c->f.DestroyDescriptor(knobs[i]);
    c->f.DestroyDescriptor(eng);
    return rc;
}

/* Finalizes one config into an execution plan, kept as a candidate: 0 built; 1 not built
 * (its reason goes to lg through hb, its descriptors are rolled back); -1 when the plan's
 * workspace size cannot be read (reason in b->why, the search stops). */
static int build_candidate(builder *b, builder *hb, void *cfg, const char *what, const char *tag,
                           long long engine_id, heur_log *lg) {
    attn_cudnn *c = b->c;
    attn_cudnn_plan *pl = b->pl;
    int pmark = pl->n_descs;
    void *plan = mk(hb, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what);
    if (!plan ||
        SA(hb, plan, what, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->handle) ||
        SA(hb, plan, what, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) ||
        fin(hb, plan, what)) {
        keep_first(lg);
        rollback(pl, pmark);
        return 1;
    }
    int64_t ws = 0, n = 0;
    cudnn_status st = c->f.GetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnn_msg(c, b->why, b->whylen, st, "cudnnBackendGetAttribute", what,
                  "CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE");
        return -1;
    }
    candidate *cd = &pl->cands[pl->n_cands++];
    cd->plan = plan;
    cd->workspace = ws < 0 ? 0 : ws;
    cd->engine_id = engine_id;
    snprintf(cd->tag, sizeof cd->tag, "%s", tag);
    cd->ms = -1;
    return 0;
}

/* The distinct configs seen so far in one search (by tag), so that a config two heuristics
 * modes propose is built once. */
typedef struct {
    char (*tags)[TAG_LEN];
    int n, cap;
} seen_tags;

static int seen_before(seen_tags *st, const char *tag) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->tags[i], tag)) return 1;
    if (st->n < st->cap) snprintf(st->tags[st->n++], TAG_LEN, "%s", tag);
    return 0;
}

/* 1 when the search has what it wants: a plan when not tuning, else max_configs tried. */
static int search_done(const attn_cudnn_plan *pl) {
    if (!pl->tune) return pl->n_cands > 0 || pl->configs_tried >= 3 * MAX_ENGINE_CFGS;
    return pl->configs_tried >= pl->max_configs || pl->n_cands >= MAX_CANDIDATES;
}

/* One heuristics mode on the finalized operation graph g: its configs not seen before are
 * built into candidates (pl->cands). 0 (whatever it found), or -1 to stop the search (reason
 * in b->why). A mode that yields no candidate leaves no descriptor behind. */
static int collect_mode(builder *b, void *g, int mode, const char *mode_name, heur_log *lg, seen_tags *seen) {
    attn_cudnn_plan *pl = b->pl;
    int mark = pl->n_descs, before = pl->n_cands, fresh = 0;
    /* failures inside a mode are not final (the next config or mode may work): they go to
     * lg->msg, not to the caller's why */
    builder hb = *b;
    hb.why = lg->msg;
    hb.whylen = sizeof lg->msg;
    void *heur = mk(&hb, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_name);
    if (!heur ||
        SA(&hb, heur, mode_name, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g) ||
        SA(&hb, heur, mode_name, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ||
        fin(&hb, heur, mode_name)) {
        keep_first(lg);
        log_count(lg, "%s%s: failed", lg->counts[0] ? ", " : "", mode_name);
        rollback(pl, mark);
        return 0;
    }
    void *cfgs[MAX_ENGINE_CFGS];
    int64_t got = engine_configs(&hb, heur, mode_name, cfgs, lg);
    for (int64_t i = 0; i < got && !search_done(pl); i++) {
        char tag[TAG_LEN], what[TAG_LEN + 128];
        long long id;
        if (config_tag(b->c, cfgs[i], tag, sizeof tag, &id)) /* unknown: never merged with another */
            snprintf(tag, sizeof tag, "eng?(%s #%lld)", mode_name, (long long)i);
        if (seen_before(seen, tag)) continue;
        fresh++;
        pl->configs_tried++;
        snprintf(what, sizeof what, "execution plan, %s config %lld of %lld (%s)", mode_name, (long long)i,
                 (long long)got, tag);
        if (build_candidate(b, &hb, cfgs[i], what, tag, id, lg) < 0) return -1;
    }
    log_count(lg, "%s%s: %lld config%s", lg->counts[0] ? ", " : "", mode_name, (long long)got, got == 1 ? "" : "s");
    if (got > 0 && fresh < got) log_count(lg, " (%d new)", fresh);
    if (pl->n_cands == before) rollback(pl, mark);
    return 0;
}

/* Operation graph, then heuristics: modes A, B and FALLBACK when tuning (every distinct
 * config that builds becomes a candidate, up to max_configs tried), else A then FALLBACK
 * until one config builds. Sets pl->exec_plan (the first candidate: the heuristics' first
 * choice) and pl->workspace_size (the largest candidate's, so that any can run). */
static int make_plan(builder *b, void **ops, int n_ops) {
    attn_cudnn *c = b->c;
    attn_cudnn_plan *pl = b->pl;
    void *g = mk(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    if (!g || SA(b, g, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->handle) ||
        SA(b, g, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops) ||
        fin(b, g, "operation graph"))
        return -1;

    static const int tuned_modes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK};
    static const int first_modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    static const char *const tuned_names[3] = {"heuristics mode A", "heuristics mode B", "heuristics mode FALLBACK"};
    static const char *const first_names[2] = {"heuristics mode A", "heuristics mode FALLBACK"};
    const int n_modes = pl->tune ? 3 : 2;
    const int *modes = pl->tune ? tuned_modes : first_modes;
    const char *const *names = pl->tune ? tuned_names : first_names;

    heur_log lg = {.first = "", .counts = ""};
    seen_tags seen = {calloc(3 * MAX_ENGINE_CFGS, TAG_LEN), 0, 3 * MAX_ENGINE_CFGS};
    if (!seen.tags) {
        put(b->why, b->whylen, "out of host memory (engine config tags)");
        return -1;
    }
    pl->n_cands = pl->configs_tried = 0;
    int rc = 0;
    for (int m = 0; m < n_modes && !rc && !search_done(pl); m++)
        rc = collect_mode(b, g, modes[m], names[m], &lg, &seen);
    free(seen.tags);
    snprintf(pl->heuristics, sizeof pl->heuristics, "%s", lg.counts);
    if (rc) return -1;
    if (pl->n_cands > 0) {
        pl->exec_plan = pl->cands[0].plan;
        pl->workspace_size = 0;
        for (int i = 0; i < pl->n_cands; i++)
            if (pl->cands[i].workspace > pl->workspace_size) pl->workspace_size = pl->cands[i].workspace;
        pl->configs_built = pl->n_cands;
        return 0;
    }
    if (!lg.first[0] && c->f.GetLastErrorString) {
        char last[4000] = "";
        c->f.GetLastErrorString(last, sizeof last);
        last[sizeof last - 1] = 0;
        for (char *t = last; *t; t++)
            if (*t == '\n' || *t == '\r') *t = ' ';
        if (last[0]) snprintf(lg.first, sizeof lg.first, "cuDNN's last error: %s", last);
    }
    put(b->why, b->whylen, "no engine supports this graph (%s; %d distinct config%s tried); first failure: %s",
        lg.counts, pl->configs_tried, pl->configs_tried == 1 ? "" : "s", lg.first[0] ? lg.first : "none reported");
    return -1;
}

/* ---- the two graph forms --------------------------------------------------------------- */

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
} problem;

static int plain(const problem *pr) {
    return !pr->padded && pr->left < 0 && pr->right < 0 && !(pr->softcap > 0);
}

/* The single SDPA forward operation: Q, K (not transposed), V, O, a by-value float scale
 * and, when stats_out, the softmax statistics as an output. No mask. */
static int graph_sdpa_op(builder *b, const problem *pr, bool stats_out) {
    const int64_t one[4] = {1, 1, 1, 1};
    const int64_t dq[4] = {pr->B, pr->H, pr->Sq, pr->D}, sq_[4] = {pr->qs[0], pr->qs[1], pr->qs[2], 1};
    const int64_t dk[4] = {pr->B, pr->Hk, pr->Sk, pr->D}, sk_[4] = {pr->ks[0], pr->ks[1], pr->ks[2], 1};
    const int64_t dv[4] = {pr->B, pr->Hk, pr->Sk, pr->Dv}, sv_[4] = {pr->vs[0], pr->vs[1], pr->vs[2], 1};
    const int64_t do_[4] = {pr->B, pr->H, pr->Sq, pr->Dv}, so_[4] = {pr->os[0], pr->os[1], pr->os[2], 1};
    const int64_t dr[4] = {pr->B, pr->H, pr->Sq, 1}, sr[4] = {pr->H * pr->Sq, pr->Sq, 1, 1};
    void *q = io_tensor(b, "Q tensor", UID_Q, ROLE_Q, pr->dtype, dq, sq_, false);
    void *k = q ? io_tensor(b, "K tensor", UID_K, ROLE_K, pr->dtype, dk, sk_, false) : NULL;
    void *v = k ? io_tensor(b, "V tensor", UID_V, ROLE_V, pr->dtype, dv, sv_, false) : NULL;
    void *o = v ? io_tensor(b, "O tensor", UID_O, ROLE_O, pr->dtype, do_, so_, false) : NULL;
    void *sc = o ? io_tensor(b, "scale tensor", UID_SCALE, ROLE_SCALE, CUDNN_DATA_FLOAT, one, one, true) : NULL;
    void *st = NULL;
    if (!sc) return -1;
    if (stats_out && !(st = io_tensor(b, "stats tensor", UID_STATS, b->pl->stats_role, CUDNN_DATA_FLOAT, dr, sr, false)))
        return -1;
    const char *what = "SDPA_FWD operation";
    void *op = mk(b, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &q) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sc) ||
        (st && SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &st)) ||
        fin(b, op, what))
        return -1;
    return make_plan(b, &op, 1);
}

/* The graph under construction: its operations, and the masks' shared pieces. */
typedef struct {
    builder *b;
    const problem *pr;
    void *ops[MAX_OPS];
    int n;
    int64_t ds[4], ss[4]; /* the [B,H,Sq,Sk] score tensors */
    void *seq_q, *seq_kv; /* padded: the [B,1,1,1] lengths */
    void *ninf;           /* the mask value, a by-value scalar (declared by the first mask) */
} graph;

static int add_op(graph *g, void *op) {
    if (!op) return -1;
    if (g->n == MAX_OPS) {
        put(g->b->why, g->b->whylen, "internal: too many graph operations");
        return -1;
    }
    g->ops[g->n++] = op;
    return 0;
}

/* y = mode(x[, bb]) into a new virtual [B,H,Sq,Sk] tensor of type dtype, computed in prec;
 * NULL on failure */
static void *pw(graph *g, const char *what, int mode, int prec, int dtype, void *x, void *bb) {
    void *y = virt(g->b, what, dtype, g->ds, g->ss);
    if (!y || add_op(g, pointwise(g->b, what, mode, prec, -1, x, bb, NULL, y))) return NULL;
    return y;
}

/* the row (axis 2) or column (axis 3) index of each score, int32 */
static void *gen_index(graph *g, const char *what, int prec, int axis, void *s) {
    void *y = virt(g->b, what, CUDNN_DATA_INT32, g->ds, g->ss);
    if (!y || add_op(g, pointwise(g->b, what, CUDNN_POINTWISE_GEN_INDEX, prec, axis, s, NULL, NULL, y))) return NULL;
    return y;
}

static void *scalar(graph *g, const char *what, int64_t uid, int role, int dtype);

/* s where keep, else the mask value (-inf) */
static void *select_keep(graph *g, const char *what, void *s, void *keep) {
    /* declared by the first mask: a graph input no operation reads fails cuDNN's variant
     * pack check (CUDNN_STATUS_BAD_PARAM_NULL_POINTER at execution) */
    if (!g->ninf && !(g->ninf = scalar(g, "mask value scalar", UID_NEG_INF, ROLE_NEG_INF, CUDNN_DATA_FLOAT)))
        return NULL;
    void *y = virt(g->b, what, CUDNN_DATA_FLOAT, g->ds, g->ss);
    if (!y || add_op(g, pointwise(g->b, what, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, s, g->ninf, keep, y)))
        return NULL;
    return y;
}

/* a by-value scalar graph input */
static void *scalar(graph *g, const char *what, int64_t uid, int role, int dtype) {
    const int64_t one[4] = {1, 1, 1, 1};
    return io_tensor(g->b, what, uid, role, dtype, one, one, true);
}

/* The masks, as cudnn-frontend's composite SDPA lowers them (the ops and their data types
 * as it emits them: the runtime-fusion engines match these patterns):
 *   padding (padded): row < seq_q[b] and col < seq_kv[b]
 *   right bound (causal: 0): row + (sk - sq) + right >= col
 *   left bound: col + (left + 1) - (sk - sq) > row, i.e. col >= row + (sk - sq) - left
 * sk, sq: per-sequence tensors when padded (bottom-right per sequence), else by-value
 * scalars folded in (Sq == Sk: no shift). Each masked score becomes -inf. */
static void *masks(graph *g, void *s) {
    const problem *pr = g->pr;
    const int F = CUDNN_DATA_FLOAT, I32 = CUDNN_DATA_INT32, BOOL = CUDNN_DATA_BOOLEAN;
    if (pr->padded) {
        void *row = gen_index(g, "padding row index", I32, 2, s);
        void *col = row ? gen_index(g, "padding column index", I32, 3, s) : NULL;
        void *rk = col ? pw(g, "row < seq_q", CUDNN_POINTWISE_CMP_LT, BOOL, BOOL, row, g->seq_q) : NULL;
        void *ck = rk ? pw(g, "col < seq_kv", CUDNN_POINTWISE_CMP_LT, BOOL, BOOL, col, g->seq_kv) : NULL;
        void *keep = ck ? pw(g, "padding keep", CUDNN_POINTWISE_LOGICAL_AND, BOOL, BOOL, rk, ck) : NULL;
        if (!keep || !(s = select_keep(g, "padding mask", s, keep))) return NULL;
    }
    if (pr->right >= 0) {
        void *row = gen_index(g, "row index", F, 2, s);
        void *col = row ? gen_index(g, "column index", F, 3, s) : NULL;
        if (!col) return NULL;
        if (pr->padded) {
            if (!(row = pw(g, "row + seq_kv", CUDNN_POINTWISE_ADD, I32, I32, row, g->seq_kv)) ||
                !(row = pw(g, "row + seq_kv - seq_q", CUDNN_POINTWISE_SUB, I32, I32, row, g->seq_q)))
                return NULL;
        } else if (pr->Sq != pr->Sk) {
            void *skv = scalar(g, "Sk scalar", UID_SKV, ROLE_SKV, I32);
            if (!skv || !(row = pw(g, "row + Sk", CUDNN_POINTWISE_ADD, I32, I32, row, skv))) return NULL;
            void *sqs = scalar(g, "Sq scalar", UID_SQ, ROLE_SQ, I32);
            if (!sqs || !(row = pw(g, "row + Sk - Sq", CUDNN_POINTWISE_SUB, I32, I32, row, sqs))) return NULL;
        }
        if (pr->right > 0) {
            void *r = scalar(g, "right bound scalar", UID_RIGHT, ROLE_RIGHT, I32);
            if (!r || !(row = pw(g, "row + right", CUDNN_POINTWISE_ADD, I32, I32, row, r))) return NULL;
        }
        void *keep = pw(g, "right bound keep", CUDNN_POINTWISE_CMP_GE, BOOL, BOOL, row, col);
        if (!keep || !(s = select_keep(g, "right bound mask", s, keep))) return NULL;
    }
    if (pr->left >= 0) {
        void *row = gen_index(g, "row index", F, 2, s);
        void *col = row ? gen_index(g, "column index", F, 3, s) : NULL;
        if (!col) return NULL;
        if (pr->padded) {
            void *l = scalar(g, "left bound scalar", UID_LEFT, ROLE_LEFT_I, I32);
            if (!l || !(col = pw(g, "col + left", CUDNN_POINTWISE_ADD, I32, I32, col, l)) ||
                !(col = pw(g, "col + left - seq_kv", CUDNN_POINTWISE_SUB, I32, I32, col, g->seq_kv)) ||
                !(col = pw(g, "col + left - seq_kv + seq_q", CUDNN_POINTWISE_ADD, I32, I32, col, g->seq_q)))
                return NULL;
        } else { /* one float: left + 1 - Sk + Sq */
            void *l = scalar(g, "left bound scalar", UID_LEFT, ROLE_LEFT_F, F);
            if (!l || !(col = pw(g, "col + left", CUDNN_POINTWISE_ADD, F, F, col, l))) return NULL;
        }
        void *keep = pw(g, "left bound keep", CUDNN_POINTWISE_CMP_GT, BOOL, BOOL, col, row);
        if (!keep || !(s = select_keep(g, "left bound mask", s, keep))) return NULL;
    }
    return s;
}

/* The runtime-fusion flash-attention pattern, as cudnn-frontend lowers SDPA before the
 * unified softmax / mask operations of cuDNN 9.21:
 *   [paged: K^T = paged cache load (K pages, block table, seq_kv)]
 *   S  = Q . K^T                       (K read through swapped row/column strides), float;
 *                                      padded: M and N overridden by seq_q, seq_kv
 *   S  = S * scale                     (by-value float scalar)
 *   softcap: S = softcap * tanh(S / softcap)
 *   masks (masks() above)
 *   M = max_3(S), E = exp(S - M), Z = sum_3(E), stats = M + log(Z),
 *   P = E / Z                          (P in the I/O data type, the second matmul's A)
 *   [paged: V = paged cache load (V pages, block table, seq_kv)]
 *   O = P . V                          padded: M and K overridden by seq_q, seq_kv
 * Q/O and K/V carry ragged offsets when ragged_q / ragged_k (see problem). stats is virtual
 * unless stats_out (then bound to p->lse or the plan's scratch). */
static int graph_composite(builder *b, const problem *pr, bool stats_out) {
    const int F = CUDNN_DATA_FLOAT, I32 = CUDNN_DATA_INT32, I64 = CUDNN_DATA_INT64;
    const int64_t B = pr->B, H = pr->H, Hk = pr->Hk, Sq = pr->Sq, Sk = pr->Sk, D = pr->D, Dv = pr->Dv;
    const int64_t one[4] = {1, 1, 1, 1}, dseq[4] = {B, 1, 1, 1}, doff[4] = {B + 1, 1, 1, 1};
    const int64_t dq[4] = {B, H, Sq, D}, sq_[4] = {pr->qs[0], pr->qs[1], pr->qs[2], 1};
    const int64_t dkt[4] = {B, Hk, D, Sk}, dv[4] = {B, Hk, Sk, Dv};
    const int64_t do_[4] = {B, H, Sq, Dv}, so_[4] = {pr->os[0], pr->os[1], pr->os[2], 1};
    const int64_t dr[4] = {B, H, Sq, 1}, sr[4] = {H * Sq, Sq, 1, 1};
    graph g = {.b = b, .pr = pr, .n = 0, .ds = {B, H, Sq, Sk}, .ss = {H * Sq * Sk, Sq * Sk, Sk, 1}};

    if (pr->padded) {
        g.seq_q = io_tensor(b, "seq_len_q tensor", UID_SEQ_Q, ROLE_SEQ_Q, I32, dseq, one, false);
        g.seq_kv = g.seq_q ? io_tensor(b, "seq_len_kv tensor", UID_SEQ_KV, ROLE_SEQ_KV, I32, dseq, one, false) : NULL;
        if (!g.seq_kv) return -1;
    }
    void *qoff = NULL, *ooff = NULL, *koff = NULL, *voff = NULL;
    if (pr->ragged_q &&
        (!(qoff = io_tensor(b, "Q ragged offsets", UID_Q_OFF, ROLE_Q_OFF, I64, doff, one, false)) ||
         !(ooff = io_tensor(b, "O ragged offsets", UID_O_OFF, ROLE_O_OFF, I64, doff, one, false))))
        return -1;
    if (pr->ragged_k &&
        (!(koff = io_tensor(b, "K ragged offsets", UID_K_OFF, ROLE_K_OFF, I64, doff, one, false)) ||
         !(voff = io_tensor(b, "V ragged offsets", UID_V_OFF, ROLE_V_OFF, I64, doff, one, false))))
        return -1;

    void *q = io_tensor_r(b, "Q tensor", UID_Q, ROLE_Q, pr->dtype, dq, sq_, false, qoff);
    void *o = q ? io_tensor_r(b, "O tensor", UID_O, ROLE_O, pr->dtype, do_, so_, false, ooff) : NULL;
    void *scale = o ? scalar(&g, "scale tensor", UID_SCALE, ROLE_SCALE, F) : NULL;
    if (!scale) return -1;

    void *kt = NULL, *v = NULL, *vpages = NULL, *pages = NULL;
    if (pr->paged) { /* containers [pages, Hk, page_size, d]; the block table [B,1,cols,1] */
        const int64_t dpg[4] = {B, 1, pr->table_cols, 1}, spg[4] = {pr->table_stride, pr->table_stride, 1, 1};
        const int64_t dck[4] = {pr->num_pages, Hk, pr->page_size, D}, sck[4] = {pr->ks[0], pr->ks[1], pr->ks[2], 1};
        const int64_t dcv[4] = {pr->num_pages, Hk, pr->page_size, Dv}, scv[4] = {pr->vs[0], pr->vs[1], pr->vs[2], 1};
        const int64_t skt[4] = {D * Sk * Hk, D * Sk, 1, D}; /* as cudnn-frontend declares the loaded K^T */
        pages = io_tensor(b, "block table", UID_PAGES, ROLE_PAGES, I32, dpg, spg, false);
        void *ck = pages ? io_tensor(b, "K pages", UID_K, ROLE_K, pr->dtype, dck, sck, false) : NULL;
        vpages = ck ? io_tensor(b, "V pages", UID_V, ROLE_V, pr->dtype, dcv, scv, false) : NULL;
        kt = vpages ? virt(b, "K^T (loaded from pages)", pr->dtype, dkt, skt) : NULL;
        if (!kt || add_op(&g, paged_load(b, "paged cache load of K", ck, pages, g.seq_kv, kt))) return -1;
    } else {
        const int64_t skt[4] = {pr->ks[0], pr->ks[1], 1, pr->ks[2]}, sv_[4] = {pr->vs[0], pr->vs[1], pr->vs[2], 1};
        kt = io_tensor_r(b, "K^T tensor", UID_K, ROLE_K, pr->dtype, dkt, skt, false, koff);
        v = kt ? io_tensor_r(b, "V tensor", UID_V, ROLE_V, pr->dtype, dv, sv_, false, voff) : NULL;
        if (!v) return -1;
    }

    void *s = virt(b, "S = Q.K^T", F, g.ds, g.ss);
    if (!s || add_op(&g, matmul(b, "matmul Q.K^T", q, kt, s, g.seq_q, g.seq_kv, NULL))) return -1;
    if (!(s = pw(&g, "S * scale", CUDNN_POINTWISE_MUL, F, F, s, scale))) return -1;
    if (pr->softcap > 0) {
        void *cap = scalar(&g, "softcap scalar", UID_SOFTCAP, ROLE_SOFTCAP, F);
        if (!cap || !(s = pw(&g, "S / softcap", CUDNN_POINTWISE_DIV, F, F, s, cap)) ||
            !(s = pw(&g, "tanh", CUDNN_POINTWISE_TANH_FWD, F, F, s, NULL)) ||
            !(s = pw(&g, "tanh * softcap", CUDNN_POINTWISE_MUL, F, F, s, cap)))
            return -1;
    }
    if (!(s = masks(&g, s))) return -1;

    const int64_t *ds = g.ds, *ss = g.ss;
    void *mx = virt(b, "row max", F, dr, sr);
    if (!mx || add_op(&g, reduction(b, "reduce max", CUDNN_REDUCE_TENSOR_MAX, s, mx))) return -1;
    void *sub = virt(b, "S - max", F, ds, ss);
    if (!sub || add_op(&g, pointwise(b, "sub max", CUDNN_POINTWISE_SUB, F, -1, s, mx, NULL, sub))) return -1;
    void *ex = virt(b, "exp", F, ds, ss);
    if (!ex || add_op(&g, pointwise(b, "exp", CUDNN_POINTWISE_EXP, F, -1, sub, NULL, NULL, ex))) return -1;
    void *sum = virt(b, "row sum", F, dr, sr);
    if (!sum || add_op(&g, reduction(b, "reduce sum", CUDNN_REDUCE_TENSOR_ADD, ex, sum))) return -1;
    void *lg = virt(b, "log sum", F, dr, sr);
    if (!lg || add_op(&g, pointwise(b, "log", CUDNN_POINTWISE_LOG, F, -1, sum, NULL, NULL, lg))) return -1;
    void *stats = stats_out ? io_tensor(b, "stats tensor", UID_STATS, b->pl->stats_role, F, dr, sr, false)
                            : virt(b, "stats", F, dr, sr);
    if (!stats || add_op(&g, pointwise(b, "add stats", CUDNN_POINTWISE_ADD, F, -1, mx, lg, NULL, stats))) return -1;
    void *pr_ = virt(b, "P", pr->dtype, ds, ss);
    if (!pr_ || add_op(&g, pointwise(b, "div sum", CUDNN_POINTWISE_DIV, F, -1, ex, sum, NULL, pr_))) return -1;
    if (pr->paged) {
        const int64_t svp[4] = {Dv * Sk * Hk, Dv * Sk, Dv, 1};
        v = virt(b, "V (loaded from pages)", pr->dtype, dv, svp);
        if (!v || add_op(&g, paged_load(b, "paged cache load of V", vpages, pages, g.seq_kv, v))) return -1;
    }
    if (add_op(&g, matmul(b, "matmul P.V", pr_, v, o, g.seq_q, NULL, g.seq_kv))) return -1;
    return make_plan(b, g.ops, g.n);
}

/* ---- library loading ------------------------------------------------------------------ */

static int sym(void *lib, const char *name, void *fnptr, int required, char *why, size_t whylen) {
    void *s = dlsym(lib, name);
    if (!s && required) {
        const char *e = dlerror();
        put(why, whylen, "libcudnn: symbol %s not found: %s", name, e ? e : "?");
        return -1;
    }
    memcpy(fnptr, &s, sizeof s); /* object pointer -> function pointer, as POSIX allows */
    return 0;
}

/* The default search: libcudnn.so.9, libcudnn.so, then beside the CUDA runtime; the name
 * that loaded goes to requested; on failure every name tried, with dlerror's reason, goes
 * to why. */
static void *load_default_library(char *requested, size_t rlen, char *why, size_t whylen) {
    char errs[1536] = "";
    size_t el = 0;
    void *lib = NULL;
    static const char *const names[2] = {"libcudnn.so.9", "libcudnn.so"};
    for (int i = 0; i < 2 && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) snprintf(requested, rlen, "%s", names[i]);
        else {
            const char *e = dlerror();
            int k = snprintf(errs + el, sizeof errs - el, "%s%s not found: %s", el ? "; " : "",
                             names[i], e ? e : "?");
            if (k > 0) el = el + (size_t)k < sizeof errs ? el + (size_t)k : sizeof errs - 1;
        }
    }
    if (!lib) { /* next to the CUDA runtime this process uses (toolkit installs) */
        Dl_info info;
        void *rt = dlsym(RTLD_DEFAULT, "cudaMalloc");
        if (rt && dladdr(rt, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
            char path[1024];
            const char *slash = strrchr(info.dli_fname, '/');
            int len = (int)(slash - info.dli_fname);
            snprintf(path, sizeof path, "%.*s/libcudnn.so.9", len, info.dli_fname);
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (lib) snprintf(requested, rlen, "%s", path);
            else {
                const char *e = dlerror();
                snprintf(errs + el, sizeof errs - el, "; %s: %s", path, e ? e : "?");
            }
        }
    }
    if (!lib) put(why, whylen, "%s", errs);
    return lib;
}

/* The build's default library: the CMake cache option ATTN_CUDNN_LIB, empty when unset. */
#ifdef ATTN_CUDNN_DEFAULT_LIB
static const char build_default_lib[] = ATTN_CUDNN_DEFAULT_LIB;
#else
static const char build_default_lib[] = "";
#endif

static const char CHOSEN_BY_ENV[] = "ATTN_CUDNN_LIB (environment)";
static const char CHOSEN_BY_CMAKE[] = "ATTN_CUDNN_LIB (CMake option, build default)";
static const char CHOSEN_BY_SEARCH[] = "default search";

/* libcudnn: $ATTN_CUDNN_LIB when set (and then only it), else the build's default (and then
 * only it), else the default places. requested and chosen_by say which. */
static void *load_library(char *requested, size_t rlen, const char **chosen_by, char *why, size_t whylen) {
    const char *env = getenv("ATTN_CUDNN_LIB");
    const char *name = env && *env ? env : build_default_lib;
    requested[0] = 0;
    if (!*name) {
        *chosen_by = CHOSEN_BY_SEARCH;
        return load_default_library(requested, rlen, why, whylen);
    }
    *chosen_by = env && *env ? CHOSEN_BY_ENV : CHOSEN_BY_CMAKE;
    snprintf(requested, rlen, "%s", name);
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        put(why, whylen, "%s not found (chosen by %s): %s%s", name, *chosen_by, e ? e : "?",
            env && *env ? "" : " (unset the CMake option, or set $ATTN_CUDNN_LIB, to load another)");
    }
    return lib;
}

/* The file a loaded library came from, symbolic links resolved; "" when unknown. */
static void library_path(void *lib, char *path, size_t len) {
    path[0] = 0;
    const char *name = NULL;
    struct link_map *lm = NULL;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) name = lm->l_name;
    Dl_info info;
    void *s = dlsym(lib, "cudnnGetVersion");
    if (!name && s && dladdr(s, &info) && info.dli_fname) name = info.dli_fname;
    if (!name) return;
    char resolved[PATH_MAX];
    const char *src = realpath(name, resolved) ? resolved : name;
    size_t n = strlen(src);
    if (n >= len) n = len - 1; /* cut, never overflowed */
    memcpy(path, src, n);
    path[n] = 0;
}

/* Every entry point this file calls; only cudnnGetLastErrorString may be missing. */
static int load_symbols(void *lib, cudnn_fns *f, char *why, size_t whylen) {
    if (sym(lib, "cudnnGetVersion", &f->GetVersion, 1, why, whylen) ||
        sym(lib, "cudnnCreate", &f->Create, 1, why, whylen) ||
        sym(lib, "cudnnDestroy", &f->Destroy, 1, why, whylen) ||
        sym(lib, "cudnnSetStream", &f->SetStream, 1, why, whylen) ||
        sym(lib, "cudnnGetErrorString", &f->GetErrorString, 1, why, whylen) ||
        sym(lib, "cudnnGetLastErrorString", &f->GetLastErrorString, 0, why, whylen) ||
        sym(lib, "cudnnBackendCreateDescriptor", &f->CreateDescriptor, 1, why, whylen) ||
        sym(lib, "cudnnBackendDestroyDescriptor", &f->DestroyDescriptor, 1, why, whylen) ||
        sym(lib, "cudnnBackendSetAttribute", &f->SetAttribute, 1, why, whylen) ||
        sym(lib, "cudnnBackendGetAttribute", &f->GetAttribute, 1, why, whylen) ||
        sym(lib, "cudnnBackendFinalize", &f->Finalize, 1, why, whylen) ||
        sym(lib, "cudnnBackendExecute", &f->Execute, 1, why, whylen))
        return -1;
    return 0;
}

int attn_cudnn_open(attn_cudnn **out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!out) {
        put(why, whylen, "attn_cudnn_open: out is NULL");
        return -1;
    }
    *out = NULL;
    char requested[1024];
    const char *chosen_by = CHOSEN_BY_SEARCH;
    void *lib = load_library(requested, sizeof requested, &chosen_by, why, whylen);
    if (!lib) return -1;

    attn_cudnn *c = calloc(1, sizeof *c);
    if (!c) {
        dlclose(lib);
        put(why, whylen, "out of host memory");
        return -1;
    }
    c->lib = lib;
    snprintf(c->requested, sizeof c->requested, "%s", requested);
    c->chosen_by = chosen_by;
    cudnn_fns *f = &c->f;
    if (load_symbols(lib, f, why, whylen)) {
        dlclose(lib);
        free(c);
        return -1;
    }
    c->version = (long)f->GetVersion();
    if (c->version < 90000 || c->version >= 100000) {
        put(why, whylen, "cuDNN version %ld: this code speaks the cuDNN 9 backend ABI only", c->version);
        dlclose(lib);
        free(c);
        return -1;
    }
    cudnn_status st = f->Create(&c->handle);
    if (st != CUDNN_STATUS_SUCCESS || !c->handle) {
        char msg[2048];
        cudnn_msg(c, msg, sizeof msg, st, "cudnnCreate", "handle", NULL);
        put(why, whylen, "cuDNN %ld loaded, but %s", c->version, msg);
        dlclose(lib);
        free(c);
        return -1;
    }
    *out = c;
    return 0;
}

long attn_cudnn_version(const attn_cudnn *c) { return c ? c->version : 0; }

void attn_cudnn_get_library(const attn_cudnn *c, attn_cudnn_lib_info *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->chosen_by = c ? c->chosen_by : "";
    if (!c) return;
    out->version = c->version;
    snprintf(out->requested, sizeof out->requested, "%s", c->requested);
    library_path(c->lib, out->path, sizeof out->path);
}

int attn_cudnn_library_info(attn_cudnn_lib_info *out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!out) {
        put(why, whylen, "attn_cudnn_library_info: out is NULL");
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->chosen_by = CHOSEN_BY_SEARCH;
    void *lib = load_library(out->requested, sizeof out->requested, &out->chosen_by, why, whylen);
    if (!lib) return -1;
    library_path(lib, out->path, sizeof out->path);
    size_t (*get_version)(void) = NULL;
    if (sym(lib, "cudnnGetVersion", &get_version, 1, why, whylen)) {
        dlclose(lib);
        return -1;
    }
    out->version = (long)get_version();
    dlclose(lib);
    return 0;
}

void attn_cudnn_close(attn_cudnn *c) {
    if (!c) return;
    if (c->aux) cudaLibraryUnload(c->aux);
    if (c->handle) c->f.Destroy(c->handle);
    if (c->lib) dlclose(c->lib);
    free(c);
}

/* ---- helper kernels ------------------------------------------------------------------ */

/* Two small kernels in hand-written PTX (this file is C, built without nvcc), JIT-compiled
 * by the driver once per process (cudaLibraryLoadData), launched on the plan's stream:
 *
 * attn_cudnn_lens (before cuDNN, only with cu_seqlens): what cuDNN reads per sequence but
 *   the ABI does not give as such. Thread b in [0, nb]: off_q[b] = cu_q[b] * rs_q and
 *   off_o[b] = cu_q[b] * rs_o (ragged offsets, elements) when cu_q; off_k, off_v alike from
 *   cu_k when off_k is set (not paged); and for b < nb the lengths seq_q[b] = cu_q ?
 *   cu_q[b+1] - cu_q[b] : sq, seq_kv[b] = cu_k ? cu_k[b+1] - cu_k[b] : sk, then
 *   min(seq_kv[b], max(used[b], 0)) when used (seqused_k).
 * attn_cudnn_fix (after cuDNN): the ABI's rows that see no key, and the packed LSE. Thread
 *   row = (b * nh + h) * sq + i, for i < seq_q[b]: with lq = seq_q[b], lk = seq_kv[b],
 *   d = i + lk - lq, the visible keys are max(0, d - left) .. min(lk - 1, d + right) (a
 *   negative bound: unbounded), as attn_abi.h says. None visible (cuDNN leaves NaN there):
 *   O's row (row_bytes, in 16-byte stores) is zeroed and the LSE is -inf. Otherwise, with
 *   stats (the plan's [B][H][Sq] scratch), the LSE is copied from it. The O row is at
 *   o + b*ob + h*oh + i*or, or (cu_q) o + (cu_q[b] + i)*or + h*oh (strides in bytes); the
 *   LSE at lse[row], or (cu_q) lse[h * cu_q[nb] + cu_q[b] + i] ([heads][total_q]). */
static const char aux_ptx[] =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry attn_cudnn_lens(\n"
    "    .param .u64 p_cu_q, .param .u64 p_cu_k, .param .u64 p_used, .param .u64 p_seq_q, .param .u64 p_seq_kv,\n"
    "    .param .u64 p_off_q, .param .u64 p_off_k, .param .u64 p_off_v, .param .u64 p_off_o,\n"
    "    .param .u64 p_rs_q, .param .u64 p_rs_k, .param .u64 p_rs_v, .param .u64 p_rs_o,\n"
    "    .param .u32 p_nb, .param .u32 p_sq, .param .u32 p_sk)\n"
    "{\n"
    "    .reg .pred %p<4>;\n"
    "    .reg .b32 %r<12>;\n"
    "    .reg .b64 %rd<12>;\n"
    "    mov.u32 %r0, %ctaid.x;\n"
    "    mov.u32 %r1, %ntid.x;\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    mad.lo.u32 %r3, %r0, %r1, %r2;\n"
    "    ld.param.u32 %r4, [p_nb];\n"
    "    setp.gt.u32 %p0, %r3, %r4;\n"
    "    @%p0 bra L_DONE;\n"
    "    setp.lt.u32 %p1, %r3, %r4;\n"
    "    mul.wide.u32 %rd0, %r3, 4;\n"
    "    mul.wide.u32 %rd1, %r3, 8;\n"
    "    ld.param.u32 %r5, [p_sq];\n"
    "    ld.param.u32 %r6, [p_sk];\n"
    "    ld.param.u64 %rd2, [p_cu_q];\n"
    "    setp.eq.u64 %p2, %rd2, 0;\n"
    "    @%p2 bra L_K;\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r7, [%rd2];\n"
    "    @%p1 ld.s32 %r8, [%rd2+4];\n"
    "    @%p1 sub.s32 %r5, %r8, %r7;\n"
    "    cvt.s64.s32 %rd3, %r7;\n"
    "    ld.param.u64 %rd4, [p_rs_q];\n"
    "    ld.param.u64 %rd5, [p_off_q];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "    ld.param.u64 %rd4, [p_rs_o];\n"
    "    ld.param.u64 %rd5, [p_off_o];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "L_K:\n"
    "    ld.param.u64 %rd2, [p_cu_k];\n"
    "    setp.eq.u64 %p2, %rd2, 0;\n"
    "    @%p2 bra L_USED;\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r7, [%rd2];\n"
    "    @%p1 ld.s32 %r8, [%rd2+4];\n"
    "    @%p1 sub.s32 %r6, %r8, %r7;\n"
    "    ld.param.u64 %rd5, [p_off_k];\n"
    "    setp.eq.u64 %p3, %rd5, 0;\n"
    "    @%p3 bra L_USED;\n"
    "    cvt.s64.s32 %rd3, %r7;\n"
    "    ld.param.u64 %rd4, [p_rs_k];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "    ld.param.u64 %rd4, [p_rs_v];\n"
    "    ld.param.u64 %rd5, [p_off_v];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "L_USED:\n"
    "    @!%p1 bra L_DONE;\n"
    "    ld.param.u64 %rd2, [p_used];\n"
    "    setp.eq.u64 %p2, %rd2, 0;\n"
    "    @%p2 bra L_STORE;\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r9, [%rd2];\n"
    "    max.s32 %r9, %r9, 0;\n"
    "    min.s32 %r6, %r6, %r9;\n"
    "L_STORE:\n"
    "    ld.param.u64 %rd7, [p_seq_q];\n"
    "    add.u64 %rd7, %rd7, %rd0;\n"
    "    st.u32 [%rd7], %r5;\n"
    "    ld.param.u64 %rd8, [p_seq_kv];\n"
    "    add.u64 %rd8, %rd8, %rd0;\n"
    "    st.u32 [%rd8], %r6;\n"
    "L_DONE:\n"
    "    ret;\n"
    "}\n"
    ".visible .entry attn_cudnn_fix(\n"
    "    .param .u64 p_seq_q, .param .u64 p_seq_kv, .param .u64 p_cu_q, .param .u64 p_o,\n"
    "    .param .u64 p_ob, .param .u64 p_oh, .param .u64 p_or, .param .u64 p_lse, .param .u64 p_stats,\n"
    "    .param .u64 p_left, .param .u64 p_right,\n"
    "    .param .u32 p_row_bytes, .param .u32 p_nb, .param .u32 p_nh, .param .u32 p_sq, .param .u32 p_rows)\n"
    "{\n"
    "    .reg .pred %p<8>;\n"
    "    .reg .b32 %r<20>;\n"
    "    .reg .b64 %rd<32>;\n"
    "    .reg .f32 %f<2>;\n"
    "    mov.u32 %r0, %ctaid.x;\n"
    "    mov.u32 %r1, %ntid.x;\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    mad.lo.u32 %r3, %r0, %r1, %r2;\n"
    "    ld.param.u32 %r4, [p_rows];\n"
    "    setp.ge.u32 %p0, %r3, %r4;\n"
    "    @%p0 bra F_DONE;\n"
    "    ld.param.u32 %r5, [p_sq];\n"
    "    ld.param.u32 %r6, [p_nh];\n"
    "    rem.u32 %r7, %r3, %r5;\n"
    "    div.u32 %r8, %r3, %r5;\n"
    "    rem.u32 %r9, %r8, %r6;\n"
    "    div.u32 %r10, %r8, %r6;\n"
    "    mul.wide.u32 %rd0, %r10, 4;\n"
    "    ld.param.u64 %rd1, [p_seq_q];\n"
    "    add.u64 %rd1, %rd1, %rd0;\n"
    "    ld.s32 %r11, [%rd1];\n"
    "    setp.ge.s32 %p1, %r7, %r11;\n"
    "    @%p1 bra F_DONE;\n"
    "    ld.param.u64 %rd2, [p_seq_kv];\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r12, [%rd2];\n"
    "    cvt.u64.u32 %rd3, %r7;\n"
    "    cvt.s64.s32 %rd4, %r12;\n"
    "    cvt.s64.s32 %rd5, %r11;\n"
    "    add.s64 %rd6, %rd3, %rd4;\n"
    "    sub.s64 %rd6, %rd6, %rd5;\n"
    "    add.s64 %rd7, %rd4, -1;\n"
    "    mov.u64 %rd8, 0;\n"
    "    ld.param.u64 %rd9, [p_left];\n"
    "    setp.lt.s64 %p2, %rd9, 0;\n"
    "    @%p2 bra F_RIGHT;\n"
    "    sub.s64 %rd10, %rd6, %rd9;\n"
    "    max.s64 %rd8, %rd10, %rd8;\n"
    "F_RIGHT:\n"
    "    ld.param.u64 %rd9, [p_right];\n"
    "    setp.lt.s64 %p2, %rd9, 0;\n"
    "    @%p2 bra F_ROW;\n"
    "    add.s64 %rd10, %rd6, %rd9;\n"
    "    min.s64 %rd7, %rd10, %rd7;\n"
    "F_ROW:\n"
    "    setp.lt.s64 %p3, %rd7, %rd8;\n"
    "    ld.param.u64 %rd11, [p_o];\n"
    "    ld.param.u64 %rd12, [p_oh];\n"
    "    cvt.u64.u32 %rd13, %r9;\n"
    "    mad.lo.u64 %rd11, %rd13, %rd12, %rd11;\n"
    "    ld.param.u64 %rd14, [p_or];\n"
    "    ld.param.u64 %rd15, [p_cu_q];\n"
    "    setp.ne.u64 %p4, %rd15, 0;\n"
    "    @%p4 bra F_PACKED;\n"
    "    ld.param.u64 %rd16, [p_ob];\n"
    "    cvt.u64.u32 %rd17, %r10;\n"
    "    mad.lo.u64 %rd11, %rd17, %rd16, %rd11;\n"
    "    mad.lo.u64 %rd11, %rd3, %rd14, %rd11;\n"
    "    cvt.u64.u32 %rd18, %r3;\n"
    "    bra.uni F_ZERO;\n"
    "F_PACKED:\n"
    "    add.u64 %rd19, %rd15, %rd0;\n"
    "    ld.s32 %r13, [%rd19];\n"
    "    cvt.s64.s32 %rd20, %r13;\n"
    "    add.s64 %rd20, %rd20, %rd3;\n"
    "    mad.lo.u64 %rd11, %rd20, %rd14, %rd11;\n"
    "    ld.param.u32 %r14, [p_nb];\n"
    "    mul.wide.u32 %rd21, %r14, 4;\n"
    "    add.u64 %rd21, %rd15, %rd21;\n"
    "    ld.s32 %r15, [%rd21];\n"
    "    cvt.s64.s32 %rd22, %r15;\n"
    "    mad.lo.u64 %rd18, %rd13, %rd22, %rd20;\n"
    "F_ZERO:\n"
    "    @!%p3 bra F_LSE;\n"
    "    ld.param.u32 %r16, [p_row_bytes];\n"
    "    cvt.u64.u32 %rd23, %r16;\n"
    "    add.u64 %rd23, %rd11, %rd23;\n"
    "    mov.b32 %r17, 0;\n"
    "F_ZLOOP:\n"
    "    setp.ge.u64 %p5, %rd11, %rd23;\n"
    "    @%p5 bra F_LSE;\n"
    "    st.v4.b32 [%rd11], {%r17, %r17, %r17, %r17};\n"
    "    add.u64 %rd11, %rd11, 16;\n"
    "    bra.uni F_ZLOOP;\n"
    "F_LSE:\n"
    "    ld.param.u64 %rd24, [p_lse];\n"
    "    setp.eq.u64 %p6, %rd24, 0;\n"
    "    @%p6 bra F_DONE;\n"
    "    mov.f32 %f0, 0fFF800000;\n"
    "    @%p3 bra F_STORE;\n"
    "    ld.param.u64 %rd25, [p_stats];\n"
    "    setp.eq.u64 %p6, %rd25, 0;\n"
    "    @%p6 bra F_DONE;\n"
    "    cvt.u64.u32 %rd26, %r3;\n"
    "    shl.b64 %rd26, %rd26, 2;\n"
    "    add.u64 %rd25, %rd25, %rd26;\n"
    "    ld.f32 %f0, [%rd25];\n"
    "F_STORE:\n"
    "    shl.b64 %rd27, %rd18, 2;\n"
    "    add.u64 %rd24, %rd24, %rd27;\n"
    "    st.f32 [%rd24], %f0;\n"
    "F_DONE:\n"
    "    ret;\n"
    "}\n";

/* Loads the helper kernels into c (once). 0, or -1 with why. */
static int load_aux(attn_cudnn *c, char *why, size_t whylen) {
    if (c->aux) return 0;
    cudaError_t e = cudaLibraryLoadData(&c->aux, aux_ptx, NULL, NULL, 0, NULL, NULL, 0);
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&c->k_lens, c->aux, "attn_cudnn_lens");
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&c->k_fix, c->aux, "attn_cudnn_fix");
    /* loaded (and JIT-compiled) into this context now, at plan creation: never lazily at a
     * first launch inside a CUDA graph capture */
    struct cudaFuncAttributes fa;
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)c->k_lens);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)c->k_fix);
    if (e != cudaSuccess) {
        put(why, whylen, "loading the helper kernels (PTX, JIT-compiled by the driver): %s", cudaGetErrorString(e));
        if (c->aux) cudaLibraryUnload(c->aux);
        c->aux = NULL;
        return -1;
    }
    return 0;
}

/* ---- plans ------------------------------------------------------------------------------ */

void attn_cudnn_plan_destroy(attn_cudnn_plan *pl) {
    if (!pl) return;
    if (pl->vpack) pl->c->f.DestroyDescriptor(pl->vpack);
    rollback(pl, 0);
    free(pl->descs);
    if (pl->workspace) cudaFree(pl->workspace);
    if (pl->stats) cudaFree(pl->stats);
    if (pl->neg_inf_rows) cudaFree(pl->neg_inf_rows);
    if (pl->lens) cudaFree(pl->lens);
    if (pl->offs) cudaFree(pl->offs);
    free(pl->fills);
    free(pl->cands);
    free(pl);
}

const char *attn_cudnn_plan_kind(const attn_cudnn_plan *pl) { return pl ? pl->kind : "none"; }

/* Plans the cudaMemset2DAsync calls that zero rows [0, n) of every (batch, head) of O. */
static int plan_zero_fill(attn_cudnn_plan *pl, const attn_fwd_params *p, int64_t n) {
    const int64_t B = p->batch, H = p->heads, D = p->head_dim_v > 0 ? p->head_dim_v : p->head_dim, E = pl->esize;
    const int64_t bs = p->o_batch_stride, hs = p->o_head_stride, rs = p->o_row_stride;
    zero_fill one = {0, 0, 0, 0};
    int count = 0;
    if (hs == D && rs == H * D) { /* all heads of a row, then the rows: n*rs per batch */
        one.offset = 0;
        one.width = (size_t)(n * rs * E);
        one.height = (size_t)B;
        one.pitch = B == 1 ? one.width : (size_t)(bs * E);
        count = (B == 1 || one.pitch >= one.width) ? 1 : 0;
    } else if (rs == D && bs == H * hs && hs >= n * D) { /* head-major, heads back to back */
        one.offset = 0;
        one.width = (size_t)(n * D * E);
        one.height = (size_t)(B * H);
        one.pitch = (size_t)(hs * E);
        count = 1;
    }
    if (count == 1) {
        if (!(pl->fills = malloc(sizeof one))) return -1;
        pl->fills[0] = one;
        pl->n_fills = 1;
        return 0;
    }
    if (rs < D) return -2; /* overlapping rows: not a layout */
    if (!(pl->fills = malloc((size_t)(B * H) * sizeof *pl->fills))) return -1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            zero_fill *z = &pl->fills[pl->n_fills++];
            z->offset = b * bs + h * hs;
            z->width = (size_t)(D * E);
            z->height = (size_t)n;
            z->pitch = n == 1 ? z->width : (size_t)(rs * E);
        }
    return 0;
}

/* The ABI's "off" values made explicit: heads_k, head_dim_v resolved; the window with
 * causal as right bound 0 (a causal problem has window_right -1 or 0), -1 for unbounded. */
static int heads_k_of(const attn_fwd_params *p) { return p->heads_k > 0 ? p->heads_k : p->heads; }
static int head_dim_v_of(const attn_fwd_params *p) { return p->head_dim_v > 0 ? p->head_dim_v : p->head_dim; }
static int right_of(const attn_fwd_params *p) { return p->causal ? 0 : p->window_right < 0 ? -1 : p->window_right; }
static int left_of(const attn_fwd_params *p) { return p->window_left < 0 ? -1 : p->window_left; }

/* Everything a plan depends on; the length tensors and pointers are bound per run. */
static int same_problem(const attn_fwd_params *a, const attn_fwd_params *b) {
    const int paged = a->block_table != NULL;
    return a->dtype == b->dtype && a->batch == b->batch && a->heads == b->heads &&
           a->seqlen_q == b->seqlen_q && a->seqlen_k == b->seqlen_k && a->head_dim == b->head_dim &&
           !a->causal == !b->causal && a->q_batch_stride == b->q_batch_stride &&
           a->q_head_stride == b->q_head_stride && a->q_row_stride == b->q_row_stride &&
           a->k_batch_stride == b->k_batch_stride && a->k_head_stride == b->k_head_stride &&
           a->k_row_stride == b->k_row_stride && a->v_batch_stride == b->v_batch_stride &&
           a->v_head_stride == b->v_head_stride && a->v_row_stride == b->v_row_stride &&
           a->o_batch_stride == b->o_batch_stride && a->o_head_stride == b->o_head_stride &&
           a->o_row_stride == b->o_row_stride && heads_k_of(a) == heads_k_of(b) &&
           head_dim_v_of(a) == head_dim_v_of(b) && left_of(a) == left_of(b) && right_of(a) == right_of(b) &&
           (a->softcap > 0 ? a->softcap : 0) == (b->softcap > 0 ? b->softcap : 0) &&
           !a->cu_seqlens_q == !b->cu_seqlens_q && !a->cu_seqlens_k == !b->cu_seqlens_k &&
           !a->seqused_k == !b->seqused_k && paged == (b->block_table != NULL) &&
           (!paged || (a->page_size == b->page_size && a->num_pages == b->num_pages &&
                       a->block_table_stride == b->block_table_stride));
}

/* One attempt: builds the graph form into pl; on failure undoes it and leaves the reason
 * in why. */
static int attempt(attn_cudnn *c, attn_cudnn_plan *pl, const problem *pr, int sdpa_op, bool stats_out,
                   char *why, size_t whylen) {
    builder b = {c, pl, why, whylen, 100};
    int mark = pl->n_descs;
    pl->n_uids = 0;
    int rc = sdpa_op ? graph_sdpa_op(&b, pr, stats_out) : graph_composite(&b, pr, stats_out);
    if (rc) {
        rollback(pl, mark);
        pl->n_uids = 0;
        pl->exec_plan = NULL;
        pl->n_cands = 0;
    }
    return rc;
}

static void append(char *buf, size_t len, const char *fmt, ...) {
    size_t used = strlen(buf);
    if (used + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

/* Which graph forms ATTN_CUDNN_GRAPH and ATTN_CUDNN_SQ_GT_SK allow (unset, empty or
 * "auto": all of them). */
typedef struct {
    int allow_op, allow_composite; /* ATTN_CUDNN_GRAPH: sdpa, composite */
    int allow_direct, allow_slice; /* ATTN_CUDNN_SQ_GT_SK: direct, slice */
} graph_forms;

static int read_graph_forms(graph_forms *gf, const attn_cudnn_plan_opts *o, char *why, size_t whylen) {
    const char *gm = o->graph ? o->graph : getenv("ATTN_CUDNN_GRAPH");
    const char *sm = o->sq_gt_sk ? o->sq_gt_sk : getenv("ATTN_CUDNN_SQ_GT_SK");
    gf->allow_op = !gm || !*gm || !strcmp(gm, "auto") || !strcmp(gm, "sdpa");
    gf->allow_composite = !gm || !*gm || !strcmp(gm, "auto") || !strcmp(gm, "composite");
    gf->allow_direct = !sm || !*sm || !strcmp(sm, "auto") || !strcmp(sm, "direct");
    gf->allow_slice = !sm || !*sm || !strcmp(sm, "auto") || !strcmp(sm, "slice");
    if (!gf->allow_op && !gf->allow_composite) {
        put(why, whylen, "%s=%s: expected auto, sdpa or composite", o->graph ? "graph option" : "ATTN_CUDNN_GRAPH", gm);
        return -1;
    }
    if (!gf->allow_direct && !gf->allow_slice) {
        put(why, whylen, "%s=%s: expected auto, direct or slice", o->sq_gt_sk ? "sq_gt_sk option" : "ATTN_CUDNN_SQ_GT_SK",
            sm);
        return -1;
    }
    return 0;
}

/* A plan for p's problem with no graph yet; NULL when out of host memory. */
static attn_cudnn_plan *new_plan(attn_cudnn *c, const attn_fwd_params *p) {
    attn_cudnn_plan *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->c = c;
    pl->shape = *p; /* cu_seqlens, block_table, seqused_k kept for their NULL-ness only */
    pl->shape.q = pl->shape.k = pl->shape.v = NULL;
    pl->shape.o = NULL;
    pl->shape.lse = NULL;
    pl->esize = 2;
    pl->stats_role = ROLE_STATS;
    pl->engine_id = -1;
    snprintf(pl->engine, sizeof pl->engine, "eng?");
    if (!(pl->cands = calloc(MAX_CANDIDATES, sizeof *pl->cands))) {
        free(pl);
        return NULL;
    }
    pl->scale = p->softmax_scale;
    /* cudnn-frontend masks with -inf from cuDNN 9.10 on, with the lowest float before */
    pl->neg_inf = c->version >= 91000 ? -INFINITY : -FLT_MAX;
    return pl;
}

/* Which form the problem takes. Per-sequence lengths (padded): device lengths (cu_seqlens,
 * seqused_k) or pages (cuDNN's paged cache load needs them); and the masked Sq > Sk cases
 * cudnn-frontend only allows with a padding mask (a left bound, or a right bound other than
 * causal's 0), with the lengths as constants. Causal Sq > Sk stays dense and is sliced. */
static problem problem_of(const attn_fwd_params *p) {
    problem pr = {
        .dtype = p->dtype == ATTN_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF,
        .B = p->batch, .H = p->heads, .Hk = heads_k_of(p), .Sq = p->seqlen_q, .Sk = p->seqlen_k,
        .D = p->head_dim, .Dv = head_dim_v_of(p), .left = left_of(p), .right = right_of(p),
        .softcap = p->softcap > 0 ? p->softcap : 0,
        .qs = {p->q_batch_stride, p->q_head_stride, p->q_row_stride},
        .ks = {p->k_batch_stride, p->k_head_stride, p->k_row_stride},
        .vs = {p->v_batch_stride, p->v_head_stride, p->v_row_stride},
        .os = {p->o_batch_stride, p->o_head_stride, p->o_row_stride},
    };
    pr.paged = p->block_table != NULL;
    pr.packed_q = p->cu_seqlens_q != NULL;
    pr.ragged_q = pr.packed_q || (p->cu_seqlens_k && !pr.paged);
    pr.ragged_k = pr.ragged_q && !pr.paged;
    pr.dynamic = pr.packed_q || p->cu_seqlens_k || p->seqused_k || pr.paged;
    pr.padded = pr.dynamic || (pr.Sq > pr.Sk && (pr.left >= 0 || pr.right > 0));
    if (pr.paged) {
        pr.num_pages = p->num_pages, pr.page_size = p->page_size, pr.table_stride = p->block_table_stride;
        pr.table_cols = (pr.Sk + pr.page_size - 1) / pr.page_size;
    }
    /* packed rows: a batch stride as if padded to the longest (cuDNN reads the offsets) */
    if (pr.packed_q) pr.qs[0] = pr.Sq * pr.qs[2], pr.os[0] = pr.Sq * pr.os[2];
    if (p->cu_seqlens_k && !pr.paged) pr.ks[0] = pr.Sk * pr.ks[2], pr.vs[0] = pr.Sk * pr.vs[2];
    return pr;
}

/* Some query row sees no key: none at all in a sequence (dynamic lengths may be 0), or
 * constant lengths with a right bound and more queries than keys (rows i < Sq - Sk - right). */
static int may_have_keyless_rows(const problem *pr) {
    return pr->dynamic || (pr->right >= 0 && pr->Sq - pr->Sk > pr->right);
}

/* The cases cudnn-frontend's support surface (sdpa_support_surface.h) refuses for this
 * cuDNN and GPU although the backend may build a plan (known bugs, unsupported patterns):
 * refused here too, so that no such plan is ever run. NULL when none applies. */
static const char *known_refusal(const attn_cudnn *c, const problem *pr, int sm_major, char *buf, size_t len) {
    const long v = c->version;
    const int ragged = pr->ragged_q || pr->ragged_k;
    const int bottom_right = pr->padded || pr->Sq != pr->Sk;
    if (v == 91000 || v == 91001)
        return "cuDNN 9.10.0 and 9.10.1: fp16/bf16 SDPA forward has known bugs (cudnn-frontend refuses it)";
    if (v == 91400 && pr->Sk > 1024 && pr->left >= 0 && pr->right < 0) {
        snprintf(buf, len, "cuDNN 9.14.0: a left window without a right bound and s_kv %lld > 1024 is a known bug "
                 "(cudnn-frontend refuses it; fixed in 9.14.1)", (long long)pr->Sk);
        return buf;
    }
    if (pr->right >= 0 && bottom_right && v < 90600 && (pr->Sq % 64 || pr->Sk % 64))
        return "a bottom-right aligned mask needs s_q and s_kv multiples of 64 before cuDNN 9.6";
    if (pr->left >= 0 && bottom_right && v < 90600)
        return "a left window with bottom-right alignment needs s_q == s_kv (and no padding) before cuDNN 9.6";
    if (pr->left >= 0 && pr->right >= 0 && sm_major == 9 && v <= 90900 && pr->Sq == pr->Sk)
        return "a left window with a right bound on Hopper with s_q == s_kv is a known bug through cuDNN 9.9";
    if (pr->left >= 0 && pr->right < 0 && v < 91002)
        return "a left window needs a right bound (causal) before cuDNN 9.10.2";
    if (pr->Sq == 1 && pr->right >= 0 && v <= 90900)
        return "s_q == 1 with a right bound (causal) needs cuDNN 9.10 or newer";
    if (pr->paged && v < 90500) return "paged K/V needs cuDNN 9.5 or newer";
    if (pr->paged && (pr->D > 128 || pr->Dv > 128) && v <= 90900)
        return "paged K/V with head dims over 128 needs cuDNN 9.10 or newer";
    if (pr->paged && ragged && v < 90700) return "paged K/V with packed (ragged) Q needs cuDNN 9.7 or newer";
    if (ragged && sm_major < 9 && v < 91801)
        return "packed (ragged) tensors need Hopper or newer before cuDNN 9.18.1";
    return NULL;
}

/* The search for a graph form cuDNN accepts, in order of preference. */
typedef struct {
    attn_cudnn *c;
    attn_cudnn_plan *pl;
    const attn_fwd_params *p;
    problem pr;
    graph_forms gf;
    char err[2][4096];  /* the last attempt_both: [0] virtual stats, [1] stats as an output */
    char notes[4096];   /* what the chosen form is, when not the first choice (for why) */
    char reasons[8192]; /* why each form tried was refused */
    int ok, sliced;     /* a form was accepted; Q and O are sliced to their last Sk rows */
    bool stats_out;
} graph_search;

/* attempt() with virtual stats, then with stats as an output: the one that worked (0 or 1),
 * or -1 with both reasons in gs->err. With want_lse only the second: the statistics are
 * bound to p->lse, or (sliced, or Q packed) to the scratch that plan_run copies into p->lse. */
static int attempt_both(graph_search *gs, const problem *pr, int sdpa_op, int sliced) {
    attn_cudnn_plan *pl = gs->pl;
    for (int s = 0; s < 2; s++) {
        if (pl->want_lse && s == 0) {
            snprintf(gs->err[0], sizeof gs->err[0], "not tried (the LSE is wanted: the statistics must be an output)");
            continue;
        }
        pl->stats_role = pl->want_lse && !sliced && !pr->packed_q ? ROLE_LSE : ROLE_STATS;
        if (!attempt(gs->c, pl, pr, sdpa_op, s == 1, gs->err[s], sizeof gs->err[s])) return s;
    }
    pl->stats_role = ROLE_STATS;
    return -1;
}

/* 1. the single SDPA forward operation: plain problems only (cuDNN 9.19 has no mask, softcap
 * or per-sequence lengths for it here) */
static void try_sdpa_op(graph_search *gs) {
    if (gs->gf.allow_op && plain(&gs->pr)) {
        if (gs->c->version < SDPA_OP_MIN_VERSION) {
            append(gs->reasons, sizeof gs->reasons, "sdpa_fwd op: needs cuDNN >= 9.13.1 (this is %ld)", gs->c->version);
            return;
        }
        int s = attempt_both(gs, &gs->pr, 1, 0);
        if (s < 0) {
            append(gs->reasons, sizeof gs->reasons, "sdpa_fwd op: %s | with stats output: %s", gs->err[0], gs->err[1]);
            return;
        }
        gs->ok = 1;
        gs->stats_out = s == 1;
        gs->pl->kind = "sdpa_fwd op";
        if (s == 1)
            append(gs->notes, sizeof gs->notes, "sdpa_fwd op with stats as an output (without: %s)", gs->err[0]);
    } else if (gs->gf.allow_op && !gs->gf.allow_composite) {
        append(gs->reasons, sizeof gs->reasons,
               "sdpa_fwd op: used here for problems without mask, softcap, paging or per-sequence lengths only");
    }
}

/* 2a. the composite graph on the whole problem (bottom-right masks when Sq != Sk) */
static void try_composite_direct(graph_search *gs) {
    int s = attempt_both(gs, &gs->pr, 0, 0);
    if (s < 0) {
        append(gs->reasons, sizeof gs->reasons, "%scomposite graph: %s | with stats output: %s",
               gs->reasons[0] ? "; " : "", gs->err[0], gs->err[1]);
        return;
    }
    gs->ok = 1;
    gs->stats_out = s == 1;
    if (s == 1) append(gs->notes, sizeof gs->notes, "composite graph with stats as an output (virtual stats: %s); ", gs->err[0]);
}

/* 2b. causal Sq > Sk, when the direct graph is refused or not allowed */
static void try_composite_sliced(graph_search *gs, int tried_direct) {
    /* rows i < Sq - Sk see no key; the rest is a square causal problem on the last
     * Sk rows of Q and O */
    problem ps = gs->pr;
    ps.Sq = gs->pr.Sk;
    int64_t cut = gs->pr.Sq - gs->pr.Sk;
    gs->pl->q_offset = cut * gs->p->q_row_stride;
    gs->pl->o_offset = cut * gs->p->o_row_stride;
    int s = attempt_both(gs, &ps, 0, 1);
    if (s < 0) {
        append(gs->reasons, sizeof gs->reasons, "%scomposite graph on Q sliced to its last Sk rows: %s | with stats output: %s",
               gs->reasons[0] ? "; " : "", gs->err[0], gs->err[1]);
        return;
    }
    gs->ok = 1;
    gs->sliced = 1;
    gs->stats_out = s == 1;
    if (tried_direct)
        append(gs->notes, sizeof gs->notes, "direct bottom-right graph refused (%s); ", gs->reasons);
    append(gs->notes, sizeof gs->notes,
           "Q and O sliced to their last %lld rows, the first %lld rows of O zero-filled%s; ",
           (long long)gs->pr.Sk, (long long)cut, s == 1 ? ", stats as an output" : "");
}

/* 2. the composite graph: virtual stats (inference), then stats as an output */
static void try_composite(graph_search *gs) {
    if (gs->ok || !gs->gf.allow_composite) return;
    const problem *pr = &gs->pr;
    /* the single op was wanted too: say why it was not taken */
    if (gs->reasons[0] && gs->gf.allow_op)
        append(gs->notes, sizeof gs->notes, "%s; ", gs->reasons);
    /* causal (right bound 0) with Sq > Sk on constant lengths: the direct graph (the
     * environment may ask for it) leaves the keyless rows undefined; the slice is exact */
    const int sq_gt_sk = !pr->padded && pr->right == 0 && pr->Sq > pr->Sk;
    int want_direct = !sq_gt_sk || (gs->gf.allow_direct && pr->left < 0);
    int want_slice = sq_gt_sk && gs->gf.allow_slice;
    if (want_direct) try_composite_direct(gs);
    if (!gs->ok && want_slice) try_composite_sliced(gs, want_direct);
    if (gs->ok) gs->pl->kind = "composite graph";
}

/* A device buffer of n bytes into *out, filled from host (NULL: left as is). 0, or -1 with why. */
static int device_buffer(void **out, size_t n, const void *host, const char *what, char *why, size_t whylen) {
    cudaError_t e = cudaMalloc(out, n);
    if (e == cudaSuccess && host) e = cudaMemcpy(*out, host, n, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        put(why, whylen, "%s (%zu bytes): %s", what, n, cudaGetErrorString(e));
        if (*out) cudaFree(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* The per-sequence lengths of a padded plan: constants (Sq, Sk) when no device data gives
 * them; seq_len_kv is p->seqused_k itself when that alone gives it; else the lens kernel
 * computes them (and the ragged offsets) per run. */
static int plan_lengths(attn_cudnn_plan *pl, const attn_fwd_params *p, const problem *pr, char *why, size_t whylen) {
    const int64_t B = pr->B;
    pl->lens_kv = (B + 3) / 4 * 4; /* each array 16-byte aligned, as its tensor is declared */
    int32_t *h = malloc((size_t)(2 * pl->lens_kv) * sizeof *h);
    if (!h) {
        put(why, whylen, "out of host memory (lengths)");
        return -1;
    }
    for (int64_t i = 0; i < 2 * pl->lens_kv; i++) h[i] = (int32_t)(i < pl->lens_kv ? pr->Sq : pr->Sk);
    int rc = device_buffer((void **)&pl->lens, (size_t)(2 * pl->lens_kv) * sizeof *h, h, "per-sequence lengths", why,
                           whylen);
    free(h);
    if (rc) return -1;
    pl->seq_kv_used = p->seqused_k && !p->cu_seqlens_k;
    pl->run_lens = p->cu_seqlens_q || p->cu_seqlens_k;
    if (pr->ragged_q) { /* Q, K, V, O: b * batch_stride where not packed (the lens kernel writes the rest) */
        pl->offs_n = (B + 2) / 2 * 2; /* B + 1 offsets, each array 16-byte aligned */
        int64_t *ho = calloc((size_t)(4 * pl->offs_n), sizeof *ho);
        if (!ho) {
            put(why, whylen, "out of host memory (ragged offsets)");
            return -1;
        }
        const int64_t bs[4] = {p->q_batch_stride, p->k_batch_stride, p->v_batch_stride, p->o_batch_stride};
        for (int t = 0; t < 4; t++)
            for (int64_t b = 0; b <= B; b++) ho[t * pl->offs_n + b] = b * bs[t];
        rc = device_buffer((void **)&pl->offs, (size_t)(4 * pl->offs_n) * sizeof *ho, ho, "ragged offsets", why, whylen);
        free(ho);
        if (rc) return -1;
    }
    return 0;
}

/* The device buffers, zero fills and helper kernels the accepted graph form needs; on
 * failure the reason goes to why and the caller destroys pl. */
static int finish_plan(attn_cudnn_plan *pl, const attn_fwd_params *p, const problem *pr, bool stats_out, int sliced,
                       char *why, size_t whylen) {
    pl->sq = (int32_t)(sliced ? p->seqlen_k : p->seqlen_q);
    pl->skv = (int32_t)p->seqlen_k;
    pl->softcap = pr->softcap;
    pl->right = (int32_t)pr->right;
    pl->left_i = (int32_t)(pr->left + 1); /* cuDNN keeps col + left_i - (sk - sq) > row */
    pl->left_f = (float)(pr->left + 1 - pr->Sk + (sliced ? pr->Sk : pr->Sq));
    if (pl->workspace_size > 0) {
        cudaError_t e = cudaMalloc(&pl->workspace, (size_t)pl->workspace_size);
        if (e != cudaSuccess) {
            put(why, whylen, "cudaMalloc(workspace, %lld bytes): %s", (long long)pl->workspace_size,
                cudaGetErrorString(e));
            pl->workspace = NULL;
            return -1;
        }
    }
    if (stats_out && pl->stats_role == ROLE_STATS) {
        size_t bytes = (size_t)p->batch * (size_t)p->heads * (size_t)pl->sq * sizeof(float);
        cudaError_t e = cudaMalloc((void **)&pl->stats, bytes);
        if (e != cudaSuccess) {
            put(why, whylen, "cudaMalloc(stats scratch, %zu bytes): %s", bytes, cudaGetErrorString(e));
            pl->stats = NULL;
            return -1;
        }
    }
    if (pr->padded && plan_lengths(pl, p, pr, why, whylen)) return -1;
    pl->run_fix = (pr->padded && may_have_keyless_rows(pr)) || (pl->want_lse && pr->packed_q);
    if ((pl->run_lens || pl->run_fix) && load_aux(pl->c, why, whylen)) return -1;
    if (sliced) {
        int rc = plan_zero_fill(pl, p, (int64_t)p->seqlen_q - p->seqlen_k);
        if (rc) {
            put(why, whylen, rc == -1 ? "out of host memory" : "O rows overlap (o_row_stride < head_dim_v)");
            return -1;
        }
    }
    if (sliced && pl->want_lse) { /* -inf for the rows that see no key, copied in plan_run */
        const int64_t cut = (int64_t)p->seqlen_q - p->seqlen_k;
        const size_t n = (size_t)p->batch * (size_t)p->heads * (size_t)cut;
        float *h = malloc(n * sizeof *h);
        if (!h) {
            put(why, whylen, "out of host memory (-inf rows of the LSE)");
            return -1;
        }
        for (size_t i = 0; i < n; i++) h[i] = -INFINITY;
        int rc = device_buffer((void **)&pl->neg_inf_rows, n * sizeof *h, h, "-inf rows of the LSE", why, whylen);
        free(h);
        if (rc) return -1;
        pl->lse_cut = cut;
    }
    return 0;
}

attn_cudnn_plan_opts attn_cudnn_plan_opts_default(void) {
    attn_cudnn_plan_opts o = {.tune = -1, .max_configs = 0, .tune_runs = 0, .want_lse = 0, .graph = NULL,
                              .sq_gt_sk = NULL};
    return o;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A non-negative integer from the environment, dflt when unset or empty; -1 (reason in
 * why) when it is not one in [lo, hi]. */
static int env_int(const char *name, int dflt, int lo, int hi, int *out, char *why, size_t whylen) {
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        put(why, whylen, "%s=%s: expected an integer from %d to %d", name, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* The options with the environment's values (and the defaults) filled in. */
static int resolve_opts(const attn_cudnn_plan_opts *in, attn_cudnn_plan_opts *o, char *why, size_t whylen) {
    *o = in ? *in : attn_cudnn_plan_opts_default();
    if (o->tune < 0 && env_int("ATTN_CUDNN_AUTOTUNE", 1, 0, 1, &o->tune, why, whylen)) return -1;
    if (o->max_configs <= 0 &&
        env_int("ATTN_CUDNN_TUNE_MAX_CONFIGS", DEFAULT_MAX_CONFIGS, 1, MAX_CANDIDATES, &o->max_configs, why, whylen))
        return -1;
    if (o->max_configs > MAX_CANDIDATES) o->max_configs = MAX_CANDIDATES;
    if (o->tune_runs <= 0 && env_int("ATTN_CUDNN_TUNE_RUNS", 0, 0, 1000, &o->tune_runs, why, whylen)) return -1;
    return 0;
}

/* Checks the arguments of a create call; 0, or -1 with why. */
static int check_create_args(attn_cudnn *c, const attn_fwd_params *p, attn_cudnn_plan **out, const char *fn,
                             char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!out) {
        put(why, whylen, "%s: out is NULL", fn);
        return -1;
    }
    *out = NULL;
    if (!c || !p) {
        put(why, whylen, "%s: NULL argument", fn);
        return -1;
    }
    if (p->batch < 1 || p->heads < 1 || p->seqlen_q < 1 || p->seqlen_k < 1 || p->head_dim < 1 ||
        (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) || heads_k_of(p) < 1 || p->heads % heads_k_of(p) ||
        (p->block_table && (p->page_size < 1 || p->num_pages < 1 ||
                            (int64_t)p->block_table_stride * p->page_size < p->seqlen_k))) {
        put(why, whylen, "%s: bad problem (b=%d h=%d hk=%d sq=%d sk=%d d=%d dtype=%d%s)", fn, p->batch, p->heads,
            p->heads_k, p->seqlen_q, p->seqlen_k, p->head_dim, (int)p->dtype,
            p->block_table ? ", or page_size/num_pages/block_table_stride" : "");
        return -1;
    }
    return 0;
}

/* The graph search and the plan's buffers, with resolved options: 0, ATTN_UNSUPPORTED or
 * -1, as attn_cudnn_plan_create. The plan keeps its candidates (pl->cands) for tuning. */
static int build_plan(attn_cudnn *c, const attn_fwd_params *p, const attn_cudnn_plan_opts *o,
                      attn_cudnn_plan **out, char *why, size_t whylen) {
    const double t0 = now_s();
    graph_search gs = {.c = c, .p = p, .notes = "", .reasons = ""};
    if (read_graph_forms(&gs.gf, o, why, whylen)) return -1;
    gs.pr = problem_of(p);
    int device = 0, sm_major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sm_major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
        sm_major = 0;
    char buf[512];
    const char *no = known_refusal(c, &gs.pr, sm_major, buf, sizeof buf);
    if (!no && gs.pr.padded && (int64_t)p->batch * p->heads * p->seqlen_q > 0x7fffffff)
        no = "more than 2^31 - 1 query rows (batch * heads * seqlen_q) for the helper kernels";
    if (no) {
        put(why, whylen, "%s", no);
        return ATTN_UNSUPPORTED;
    }
    if (!(gs.pl = new_plan(c, p))) {
        put(why, whylen, "out of host memory");
        return -1;
    }
    gs.pl->tune = o->tune;
    gs.pl->max_configs = o->max_configs;
    gs.pl->want_lse = o->want_lse;

    try_sdpa_op(&gs);
    try_composite(&gs);
    attn_cudnn_plan *pl = gs.pl;
    if (!gs.ok) {
        put(why, whylen, "%s", gs.reasons[0] ? gs.reasons : "no graph form allowed for this case");
        attn_cudnn_plan_destroy(pl);
        return ATTN_UNSUPPORTED;
    }
    if (finish_plan(pl, p, &gs.pr, gs.stats_out, gs.sliced, why, whylen)) {
        attn_cudnn_plan_destroy(pl);
        return -1;
    }
    /* until tuning says otherwise: the heuristics' first choice */
    snprintf(pl->engine, sizeof pl->engine, "%s", pl->cands[0].tag);
    pl->engine_id = pl->cands[0].engine_id;
    pl->build_s = now_s() - t0;
    char *notes = gs.notes;
    size_t nl = strlen(notes);
    while (nl > 0 && (notes[nl - 1] == ' ' || notes[nl - 1] == ';')) notes[--nl] = 0;
    put(why, whylen, "%s", notes);
    *out = pl;
    return 0;
}

/* Destroys one descriptor of the plan (an execution plan that lost), keeping the order of
 * the others. */
static void drop_desc(attn_cudnn_plan *pl, void *d) {
    for (int i = 0; i < pl->n_descs; i++)
        if (pl->descs[i] == d) {
            pl->c->f.DestroyDescriptor(d);
            memmove(&pl->descs[i], &pl->descs[i + 1], (size_t)(pl->n_descs - i - 1) * sizeof *pl->descs);
            pl->n_descs--;
            return;
        }
}

/* Time per run of the plan's current execution plan on p, stream: one warm-up, one run
 * timed alone, then three rounds of `runs` back-to-back runs (0: enough for about 1 ms by
 * the lone run's time, 1 to 50) between events; the fastest round. 0, 1 when this config fails to run (reason in why; the next may
 * work), -1 on a CUDA error (the context may be lost: the search stops). */
static int time_config(attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream, int runs,
                       cudaEvent_t ev[2], double *ms, char *why, size_t whylen) {
    float t = 0;
    /* the warm-up (lazy module loading, first-launch costs), then one run that is timed
     * to size the rounds */
    if (attn_cudnn_plan_run(pl, p, stream, why, whylen)) return 1;
    cudaError_t e = cudaEventRecord(ev[0], stream);
    if (e == cudaSuccess && attn_cudnn_plan_run(pl, p, stream, why, whylen)) {
        cudaStreamSynchronize(stream);
        return 1;
    }
    if (e == cudaSuccess) e = cudaEventRecord(ev[1], stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(ev[1]);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&t, ev[0], ev[1]);
    if (e != cudaSuccess) goto cuda_error;
    if (runs <= 0) { /* about 1 ms per round, from the warm-up's time */
        runs = t > 0.02f ? (int)ceil(1.0 / t) : 50;
        if (runs > 50) runs = 50;
    }
    double best = INFINITY;
    for (int round = 0; round < 3; round++) {
        if ((e = cudaEventRecord(ev[0], stream)) != cudaSuccess) goto cuda_error;
        for (int i = 0; i < runs; i++)
            if (attn_cudnn_plan_run(pl, p, stream, why, whylen)) {
                cudaStreamSynchronize(stream);
                return 1;
            }
        if ((e = cudaEventRecord(ev[1], stream)) != cudaSuccess || (e = cudaEventSynchronize(ev[1])) != cudaSuccess ||
            (e = cudaEventElapsedTime(&t, ev[0], ev[1])) != cudaSuccess)
            goto cuda_error;
        if (t / runs < best) best = t / runs;
    }
    *ms = best;
    return 0;
cuda_error:
    put(why, whylen, "CUDA error while timing %s: %s", pl->engine, cudaGetErrorString(e));
    return -1;
}

/* Keeps the fastest candidate: sets the plan's execution plan, engine, workspace; destroys
 * the others' execution plans. 0, or -1 with why. */
static int keep_candidate(attn_cudnn_plan *pl, int best, char *why, size_t whylen) {
    candidate *cb = &pl->cands[best];
    pl->exec_plan = cb->plan;
    snprintf(pl->engine, sizeof pl->engine, "%s", cb->tag);
    pl->engine_id = cb->engine_id;
    pl->chosen_rank = best;
    pl->best_ms = cb->ms > 0 ? cb->ms : 0;
    pl->first_ms = pl->cands[0].ms > 0 ? pl->cands[0].ms : 0;
    for (int i = 0; i < pl->n_cands; i++)
        if (i != best) drop_desc(pl, pl->cands[i].plan);
    if (cb->workspace != pl->workspace_size) { /* the chosen one needs less than the largest */
        if (pl->workspace) cudaFree(pl->workspace); /* synchronizes the device */
        pl->workspace = NULL;
        pl->workspace_size = cb->workspace;
        if (cb->workspace > 0) {
            cudaError_t e = cudaMalloc(&pl->workspace, (size_t)cb->workspace);
            if (e != cudaSuccess) {
                pl->workspace = NULL;
                put(why, whylen, "cudaMalloc(workspace of %s, %lld bytes): %s", cb->tag, (long long)cb->workspace,
                    cudaGetErrorString(e));
                return -1;
            }
        }
    }
    pl->n_cands = 0;
    return 0;
}

/* Runs every candidate on p and keeps the fastest (cudnn-frontend's autotune, with rounds
 * of back-to-back runs). 0; 1 when none ran (reason in why); -1 on a CUDA error. */
static int tune_plan(attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream, int runs, char *why,
                     size_t whylen) {
    const double t0 = now_s();
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t e = cudaEventCreate(&ev[0]);
    if (e == cudaSuccess) e = cudaEventCreate(&ev[1]);
    if (e != cudaSuccess) {
        put(why, whylen, "cudaEventCreate: %s", cudaGetErrorString(e));
        if (ev[0]) cudaEventDestroy(ev[0]);
        return -1;
    }
    char first_fail[1024] = "", msg[1024];
    int best = -1, rc = 0;
    for (int i = 0; i < pl->n_cands; i++) {
        candidate *cd = &pl->cands[i];
        pl->exec_plan = cd->plan;
        snprintf(pl->engine, sizeof pl->engine, "%s", cd->tag);
        msg[0] = 0;
        rc = time_config(pl, p, stream, runs, ev, &cd->ms, msg, sizeof msg);
        if (rc < 0) {
            put(why, whylen, "%s", msg);
            break;
        }
        if (rc > 0) {
            cd->ms = -1;
            if (!first_fail[0]) snprintf(first_fail, sizeof first_fail, "%s: %s", cd->tag, msg);
            rc = 0;
            continue;
        }
        pl->configs_timed++;
        if (best < 0 || cd->ms < pl->cands[best].ms) best = i;
    }
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    pl->tune_s = now_s() - t0;
    if (rc < 0) return -1;
    if (best < 0) {
        put(why, whylen, "none of the %d execution plans ran; first failure: %s", pl->n_cands, first_fail);
        return 1;
    }
    return keep_candidate(pl, best, why, whylen);
}

int attn_cudnn_plan_create(attn_cudnn *c, const attn_fwd_params *p, attn_cudnn_plan **out,
                           char *why, size_t whylen) {
    if (check_create_args(c, p, out, "attn_cudnn_plan_create", why, whylen)) return -1;
    attn_cudnn_plan_opts o = attn_cudnn_plan_opts_default();
    o.tune = 0;
    int rc = build_plan(c, p, &o, out, why, whylen);
    if (rc == 0) (*out)->n_cands = 0; /* the one built is the plan (and sized its workspace) */
    return rc;
}

int attn_cudnn_plan_create_ex(attn_cudnn *c, const attn_fwd_params *p, const attn_cudnn_plan_opts *opts,
                              cudaStream_t stream, attn_cudnn_plan **out, char *why, size_t whylen) {
    if (check_create_args(c, p, out, "attn_cudnn_plan_create_ex", why, whylen)) return -1;
    attn_cudnn_plan_opts o;
    if (resolve_opts(opts, &o, why, whylen)) return -1;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
        put(why, whylen, "attn_cudnn_plan_create_ex: the stream is capturing a CUDA graph; plans allocate and "
            "synchronize, so create them (make the first call for this problem) before the capture");
        return -1;
    }
    if (o.want_lse && (!p->lse || ((uintptr_t)p->lse & 15u))) {
        put(why, whylen, "attn_cudnn_plan_create_ex: want_lse needs p->lse %s", p->lse ? "16-byte aligned" : "set");
        return -1;
    }
    if (o.tune && (!p->q || !p->k || !p->v || !p->o)) {
        put(why, whylen, "attn_cudnn_plan_create_ex: tuning runs the configs on p's buffers, and p has a NULL "
            "pointer (set ATTN_CUDNN_AUTOTUNE=0 or opts.tune = 0 to plan without buffers)");
        return -1;
    }
    attn_cudnn_plan *pl = NULL;
    int rc = build_plan(c, p, &o, &pl, why, whylen);
    if (rc) return rc;
    char notes[2048];
    snprintf(notes, sizeof notes, "%s", why ? why : "");
    if (o.tune) {
        rc = tune_plan(pl, p, stream, o.tune_runs, why, whylen);
        if (rc) {
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", why ? why : "");
            put(why, whylen, "autotuning %d execution plan%s (%s): %s", pl->n_cands, pl->n_cands == 1 ? "" : "s",
                pl->heuristics, msg);
            attn_cudnn_plan_destroy(pl);
            return rc > 0 ? ATTN_UNSUPPORTED : -1; /* none ran: cuDNN refused at execution */
        }
        pl->tuned = 1;
        put(why, whylen, "%s", notes);
    } else {
        keep_candidate(pl, 0, why, whylen); /* the workspace is already the first's */
        put(why, whylen, "%s", notes);
    }
    *out = pl;
    return 0;
}

void attn_cudnn_plan_get_info(const attn_cudnn_plan *pl, attn_cudnn_plan_info *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->engine_id = -1;
    out->kind = pl ? pl->kind : "none";
    if (!pl) return;
    snprintf(out->engine, sizeof out->engine, "%s", pl->engine);
    out->engine_id = pl->engine_id;
    out->configs_tried = pl->configs_tried;
    out->configs_built = pl->configs_built;
    out->configs_timed = pl->configs_timed;
    out->tuned = pl->tuned;
    out->chosen_rank = pl->chosen_rank;
    out->best_ms = pl->best_ms;
    out->first_ms = pl->first_ms;
    out->build_s = pl->build_s;
    out->tune_s = pl->tune_s;
    out->workspace_bytes = (long long)pl->workspace_size;
    snprintf(out->heuristics, sizeof out->heuristics, "%s", pl->heuristics);
}

/* The run's pointer for each uid of the plan, in pl->uids order; -1 (reason in why) when Q, K,
 * V or O is not 16-byte aligned, as the tensors were declared. */
static int bind_pointers(attn_cudnn_plan *pl, const attn_fwd_params *p, void **ptrs, char *why,
                         size_t whylen) {
    const char *q = (const char *)p->q + pl->q_offset * pl->esize;
    char *o = (char *)p->o + pl->o_offset * pl->esize;
    for (int i = 0; i < pl->n_uids; i++) {
        switch (pl->roles[i]) {
        case ROLE_Q: ptrs[i] = (void *)q; break;
        case ROLE_K: ptrs[i] = (void *)p->k; break;
        case ROLE_V: ptrs[i] = (void *)p->v; break;
        case ROLE_O: ptrs[i] = o; break;
        case ROLE_SCALE: ptrs[i] = &pl->scale; break;
        case ROLE_NEG_INF: ptrs[i] = &pl->neg_inf; break;
        case ROLE_SKV: ptrs[i] = &pl->skv; break;
        case ROLE_SQ: ptrs[i] = &pl->sq; break;
        case ROLE_STATS: ptrs[i] = pl->stats; break;
        case ROLE_LSE: ptrs[i] = p->lse; break;
        case ROLE_SOFTCAP: ptrs[i] = &pl->softcap; break;
        case ROLE_RIGHT: ptrs[i] = &pl->right; break;
        case ROLE_LEFT_I: ptrs[i] = &pl->left_i; break;
        case ROLE_LEFT_F: ptrs[i] = &pl->left_f; break;
        case ROLE_SEQ_Q: ptrs[i] = pl->lens; break;
        case ROLE_SEQ_KV: ptrs[i] = pl->seq_kv_used ? (void *)p->seqused_k : pl->lens + pl->lens_kv; break;
        case ROLE_PAGES: ptrs[i] = (void *)p->block_table; break;
        case ROLE_Q_OFF: ptrs[i] = pl->offs; break;
        case ROLE_K_OFF: ptrs[i] = pl->offs + pl->offs_n; break;
        case ROLE_V_OFF: ptrs[i] = pl->offs + 2 * pl->offs_n; break;
        case ROLE_O_OFF: ptrs[i] = pl->offs + 3 * pl->offs_n; break;
        default: ptrs[i] = NULL; break;
        }
        const int role = pl->roles[i];
        if ((role == ROLE_LSE || role == ROLE_SEQ_KV || role == ROLE_PAGES) && (!ptrs[i] || ((uintptr_t)ptrs[i] & 15u))) {
            put(why, whylen, "attn_cudnn_plan_run: %s is %s (%p)",
                role == ROLE_LSE ? "lse" : role == ROLE_PAGES ? "block_table" : "seqused_k",
                ptrs[i] ? "not 16-byte aligned" : "NULL", ptrs[i]);
            return -1;
        }
        if (pl->roles[i] <= ROLE_O && ((uintptr_t)ptrs[i] & 15u)) {
            static const char *const names[4] = {"q", "k", "v", "o"};
            put(why, whylen, "attn_cudnn_plan_run: %s%s is not 16-byte aligned (%p)", names[pl->roles[i]],
                pl->q_offset && (pl->roles[i] == ROLE_Q || pl->roles[i] == ROLE_O) ? " (sliced)" : "", ptrs[i]);
            return -1;
        }
    }
    return 0;
}

/* Makes pl->vpack the variant pack of ptrs, the workspace and the current scale: the last
 * one is reused while they are unchanged, so repeated runs (a timed loop) build none. */
static int update_vpack(attn_cudnn_plan *pl, void *const *ptrs, char *why, size_t whylen) {
    attn_cudnn *c = pl->c;
    if (pl->vpack && !memcmp(ptrs, pl->vpack_ptrs, (size_t)pl->n_uids * sizeof *ptrs) &&
        pl->vpack_workspace == pl->workspace && !memcmp(&pl->vpack_scale, &pl->scale, sizeof pl->scale))
        return 0;
    if (pl->vpack) {
        c->f.DestroyDescriptor(pl->vpack);
        pl->vpack = NULL;
    }
    void *vp = NULL;
    cudnn_status st = c->f.CreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st != CUDNN_STATUS_SUCCESS || !vp) {
        cudnn_msg(c, why, whylen, st, "cudnnBackendCreateDescriptor", "variant pack", NULL);
        return -1;
    }
    const char *attr = NULL;
    if ((st = c->f.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, pl->n_uids, pl->uids)))
        attr = "CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS";
    else if ((st = c->f.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pl->n_uids, ptrs)))
        attr = "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS";
    else if ((st = c->f.SetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &pl->workspace)))
        attr = "CUDNN_ATTR_VARIANT_PACK_WORKSPACE";
    if (attr) {
        cudnn_msg(c, why, whylen, st, "cudnnBackendSetAttribute", "variant pack", attr);
        c->f.DestroyDescriptor(vp);
        return -1;
    }
    if ((st = c->f.Finalize(vp))) {
        cudnn_msg(c, why, whylen, st, "cudnnBackendFinalize", "variant pack", NULL);
        c->f.DestroyDescriptor(vp);
        return -1;
    }
    pl->vpack = vp;
    memcpy(pl->vpack_ptrs, ptrs, (size_t)pl->n_uids * sizeof *ptrs);
    pl->vpack_workspace = pl->workspace;
    pl->vpack_scale = pl->scale;
    return 0;
}

/* The lens kernel: per-sequence lengths and ragged offsets from p's cu_seqlens (aux_ptx). */
static cudaError_t launch_lens(const attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream) {
    const void *cu_q = p->cu_seqlens_q, *cu_k = p->cu_seqlens_k, *used = p->seqused_k;
    int32_t *seq_q = pl->lens, *seq_kv = pl->lens + pl->lens_kv;
    int64_t *off_q = NULL, *off_k = NULL, *off_v = NULL, *off_o = NULL;
    if (pl->offs && p->cu_seqlens_q) off_q = pl->offs, off_o = pl->offs + 3 * pl->offs_n;
    if (pl->offs && p->cu_seqlens_k && !p->block_table) off_k = pl->offs + pl->offs_n, off_v = pl->offs + 2 * pl->offs_n;
    int64_t rs_q = p->q_row_stride, rs_k = p->k_row_stride, rs_v = p->v_row_stride, rs_o = p->o_row_stride;
    uint32_t nb = (uint32_t)p->batch, sq = (uint32_t)p->seqlen_q, sk = (uint32_t)p->seqlen_k;
    void *args[] = {&cu_q, &cu_k, &used, &seq_q, &seq_kv, &off_q, &off_k, &off_v, &off_o,
                    &rs_q, &rs_k, &rs_v, &rs_o, &nb, &sq, &sk};
    const dim3 block = {128, 1, 1}, grid = {(nb + 1 + 127) / 128, 1, 1};
    return cudaLaunchKernel((const void *)pl->c->k_lens, grid, block, args, 0, stream);
}

/* The fix kernel: zero O and -inf LSE in the rows that see no key; the packed LSE from the
 * plan's scratch (aux_ptx). */
static cudaError_t launch_fix(const attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream) {
    const void *seq_q = pl->lens, *seq_kv = pl->seq_kv_used ? (const void *)p->seqused_k : pl->lens + pl->lens_kv;
    const void *cu_q = p->cu_seqlens_q, *o = p->o;
    const void *lse = pl->want_lse ? p->lse : NULL;
    const void *stats = pl->want_lse && pl->stats_role == ROLE_STATS ? pl->stats : NULL;
    const int64_t e = pl->esize;
    int64_t ob = p->o_batch_stride * e, oh = p->o_head_stride * e, orow = p->o_row_stride * e;
    int64_t left = left_of(p), right = right_of(p);
    uint32_t row_bytes = (uint32_t)(head_dim_v_of(p) * e), nb = (uint32_t)p->batch, nh = (uint32_t)p->heads;
    uint32_t sq = (uint32_t)p->seqlen_q, rows = nb * nh * sq; /* < 2^31: checked at create */
    void *args[] = {&seq_q, &seq_kv, &cu_q, &o, &ob, &oh, &orow, &lse, &stats, &left, &right,
                    &row_bytes, &nb, &nh, &sq, &rows};
    const dim3 block = {256, 1, 1}, grid = {(rows + 255) / 256, 1, 1};
    return cudaLaunchKernel((const void *)pl->c->k_fix, grid, block, args, 0, stream);
}

int attn_cudnn_plan_run(attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream,
                        char *why, size_t whylen) {
    if (!pl || !p) {
        put(why, whylen, "attn_cudnn_plan_run: NULL argument");
        return -1;
    }
    attn_cudnn *c = pl->c;
    if (!same_problem(&pl->shape, p)) {
        put(why, whylen, "attn_cudnn_plan_run: p's shape/strides/dtype/mask/layout differ from the plan's");
        return -1;
    }
    if (pl->want_lse && !p->lse) {
        put(why, whylen, "attn_cudnn_plan_run: the plan writes the LSE (want_lse) and p->lse is NULL");
        return -1;
    }
    void *ptrs[MAX_UIDS];
    if (bind_pointers(pl, p, ptrs, why, whylen)) return -1;
    pl->scale = p->softmax_scale;
    if (update_vpack(pl, ptrs, why, whylen)) return -1;

    cudnn_status st = c->f.SetStream(c->handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnn_msg(c, why, whylen, st, "cudnnSetStream", "handle", NULL);
        return -1;
    }
    /* before cuDNN, on the same stream: the lengths and offsets it reads */
    cudaError_t ce = pl->run_lens ? launch_lens(pl, p, stream) : cudaSuccess;
    if (ce != cudaSuccess) {
        put(why, whylen, "launching the lens kernel: %s", cudaGetErrorString(ce));
        return -1;
    }
    st = c->f.Execute(c->handle, pl->exec_plan, pl->vpack);
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnn_msg(c, why, whylen, st, "cudnnBackendExecute", pl->kind, NULL);
        return -1;
    }
    /* after cuDNN, on the same stream: sliced plans zero the rows of O no key reaches */
    for (int i = 0; i < pl->n_fills; i++) {
        const zero_fill *z = &pl->fills[i];
        cudaError_t e = cudaMemset2DAsync((char *)p->o + z->offset * pl->esize, z->pitch, 0, z->width,
                                          z->height, stream);
        if (e != cudaSuccess) {
            put(why, whylen, "cudaMemset2DAsync (keyless rows of O): %s", cudaGetErrorString(e));
            return -1;
        }
    }
    /* sliced plans that write the LSE: the statistics of the last seqlen_k rows, and -inf in
     * the rows before them (they see no key), for every (batch, head) */
    if (pl->lse_cut > 0) {
        const size_t sq = (size_t)p->seqlen_q, sk = (size_t)p->seqlen_k, cut = (size_t)pl->lse_cut;
        const size_t bh = (size_t)p->batch * (size_t)p->heads;
        cudaError_t e = cudaMemcpy2DAsync(p->lse + cut, sq * sizeof(float), pl->stats, sk * sizeof(float),
                                          sk * sizeof(float), bh, cudaMemcpyDeviceToDevice, stream);
        if (e == cudaSuccess)
            e = cudaMemcpy2DAsync(p->lse, sq * sizeof(float), pl->neg_inf_rows, cut * sizeof(float),
                                  cut * sizeof(float), bh, cudaMemcpyDeviceToDevice, stream);
        if (e != cudaSuccess) {
            put(why, whylen, "cudaMemcpy2DAsync (LSE rows of a sliced plan): %s", cudaGetErrorString(e));
            return -1;
        }
    }
    /* padded plans: the rows that see no key, and the packed LSE */
    ce = pl->run_fix ? launch_fix(pl, p, stream) : cudaSuccess;
    if (ce != cudaSuccess) {
        put(why, whylen, "launching the fix kernel: %s", cudaGetErrorString(ce));
        return -1;
    }
    return 0;
}
