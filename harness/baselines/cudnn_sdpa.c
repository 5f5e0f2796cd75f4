/* cuDNN fused flash-attention forward through the cuDNN 9 backend API, libcudnn loaded
 * with dlopen. See cudnn_sdpa.h.
 *
 * No cuDNN header is included: the few enum values used below are cuDNN 9's stable ABI
 * values, as cudnn_graph.h (9.19) defines them, so this file builds where cuDNN is not
 * installed. */
#define _GNU_SOURCE /* dladdr */
#include "cudnn_sdpa.h"

#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

/* ---- cuDNN 9 ABI values (cudnn_graph.h) ------------------------------------------ */

enum { CUDNN_STATUS_SUCCESS = 0 };

enum { /* cudnnDataType_t */
    CUDNN_DATA_FLOAT = 0,
    CUDNN_DATA_HALF = 2,
    CUDNN_DATA_INT32 = 4,
    CUDNN_DATA_BFLOAT16 = 9,
    CUDNN_DATA_BOOLEAN = 11,
};

enum { /* cudnnPointwiseMode_t */
    CUDNN_POINTWISE_ADD = 0,
    CUDNN_POINTWISE_MUL = 1,
    CUDNN_POINTWISE_DIV = 6,
    CUDNN_POINTWISE_SUB = 9,
    CUDNN_POINTWISE_EXP = 13,
    CUDNN_POINTWISE_LOG = 15,
    CUDNN_POINTWISE_CMP_GE = 303,
    CUDNN_POINTWISE_GEN_INDEX = 501,
    CUDNN_POINTWISE_BINARY_SELECT = 601,
};

enum { /* cudnnReduceTensorOp_t */
    CUDNN_REDUCE_TENSOR_ADD = 0,
    CUDNN_REDUCE_TENSOR_MAX = 3,
};

enum { /* cudnnBackendHeurMode_t */
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
    CUDNN_TYPE_POINTWISE_MODE = 14,
    CUDNN_TYPE_BACKEND_DESCRIPTOR = 15,
    CUDNN_TYPE_REDUCTION_OPERATOR_TYPE = 18,
};

enum { /* cudnnBackendDescriptorType_t */
    CUDNN_BACKEND_POINTWISE_DESCRIPTOR = 0,
    CUDNN_BACKEND_ENGINECFG_DESCRIPTOR = 3,
    CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR = 4,
    CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR = 5,
    CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR = 13,
    CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR = 15,
    CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR = 16,
    CUDNN_BACKEND_TENSOR_DESCRIPTOR = 17,
    CUDNN_BACKEND_MATMUL_DESCRIPTOR = 18,
    CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR = 19,
    CUDNN_BACKEND_REDUCTION_DESCRIPTOR = 21,
    CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR = 22,
    CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR = 41,
};

enum { /* cudnnBackendAttributeName_t */
    CUDNN_ATTR_POINTWISE_MODE = 0,
    CUDNN_ATTR_POINTWISE_MATH_PREC = 1,
    CUDNN_ATTR_POINTWISE_AXIS = 9,
    CUDNN_ATTR_ENGINEHEUR_MODE = 200,
    CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH = 201,
    CUDNN_ATTR_ENGINEHEUR_RESULTS = 202,
    CUDNN_ATTR_EXECUTION_PLAN_HANDLE = 400,
    CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401,
    CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402,
    CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR = 750,
    CUDNN_ATTR_OPERATION_POINTWISE_XDESC = 751,
    CUDNN_ATTR_OPERATION_POINTWISE_BDESC = 752,
    CUDNN_ATTR_OPERATION_POINTWISE_YDESC = 753,
    CUDNN_ATTR_OPERATION_POINTWISE_TDESC = 758,
    CUDNN_ATTR_OPERATIONGRAPH_HANDLE = 800,
    CUDNN_ATTR_OPERATIONGRAPH_OPS = 801,
    CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT = 900,
    CUDNN_ATTR_TENSOR_DATA_TYPE = 901,
    CUDNN_ATTR_TENSOR_DIMENSIONS = 902,
    CUDNN_ATTR_TENSOR_STRIDES = 903,
    CUDNN_ATTR_TENSOR_UNIQUE_ID = 906,
    CUDNN_ATTR_TENSOR_IS_VIRTUAL = 907,
    CUDNN_ATTR_TENSOR_IS_BY_VALUE = 908,
    CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS = 1000,
    CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS = 1001,
    CUDNN_ATTR_VARIANT_PACK_WORKSPACE = 1003,
    CUDNN_ATTR_MATMUL_COMP_TYPE = 1500,
    CUDNN_ATTR_OPERATION_MATMUL_ADESC = 1520,
    CUDNN_ATTR_OPERATION_MATMUL_BDESC = 1521,
    CUDNN_ATTR_OPERATION_MATMUL_CDESC = 1522,
    CUDNN_ATTR_OPERATION_MATMUL_DESC = 1523,
    CUDNN_ATTR_REDUCTION_OPERATOR = 1600,
    CUDNN_ATTR_REDUCTION_COMP_TYPE = 1601,
    CUDNN_ATTR_OPERATION_REDUCTION_XDESC = 1610,
    CUDNN_ATTR_OPERATION_REDUCTION_YDESC = 1611,
    CUDNN_ATTR_OPERATION_REDUCTION_DESC = 1612,
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
};

/* ---- plan ------------------------------------------------------------------------- */

enum { ROLE_Q, ROLE_K, ROLE_V, ROLE_O, ROLE_SCALE, ROLE_NEG_INF, ROLE_SKV, ROLE_SQ, ROLE_STATS };
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_SCALE, UID_NEG_INF, UID_SKV, UID_SQ, UID_STATS };
enum { MAX_UIDS = 12, MAX_OPS = 24, MAX_ENGINE_CFGS = 64 };

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
    float scale, neg_inf;
    int32_t skv, sq;

    /* the variant pack of the last run, reused while pointers and scale stay the same */
    void *vpack;
    void *vpack_ptrs[MAX_UIDS];
    void *vpack_workspace;
    float vpack_scale;

    zero_fill *fills;
    int n_fills;
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

static void *tensor(builder *b, const char *what, int64_t uid, int dtype, const int64_t dims[4],
                    const int64_t strides[4], bool is_virtual, bool by_value) {
    void *t = mk(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t align = 16;
    if (!t || SA(b, t, what, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual) ||
        (by_value && SA(b, t, what, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value)) ||
        fin(b, t, what))
        return NULL;
    return t;
}

/* a non-virtual tensor, bound at run time to the pointer of `role` */
static void *io_tensor(builder *b, const char *what, int64_t uid, int role, int dtype,
                       const int64_t dims[4], const int64_t strides[4], bool by_value) {
    if (b->pl->n_uids == MAX_UIDS) {
        put(b->why, b->whylen, "internal: too many graph inputs/outputs");
        return NULL;
    }
    void *t = tensor(b, what, uid, dtype, dims, strides, false, by_value);
    if (t) {
        b->pl->uids[b->pl->n_uids] = uid;
        b->pl->roles[b->pl->n_uids++] = role;
    }
    return t;
}

static void *virt(builder *b, const char *what, int dtype, const int64_t dims[4],
                  const int64_t strides[4]) {
    return tensor(b, what, b->next_uid++, dtype, dims, strides, true, false);
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

/* cc = a . bm (batched over the two leading dimensions), float accumulation */
static void *matmul(builder *b, const char *what, void *a, void *bm, void *cc) {
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
        fin(b, op, what))
        return NULL;
    return op;
}

/* What the search over heuristics modes keeps for its refusal message. */
typedef struct {
    char first[4096]; /* the first failure: the likeliest cause when no engine works */
    char msg[4096];   /* the latest failure */
    char counts[160]; /* per mode, "failed" or how many configs it proposed */
    int counts_len;
} heur_log;

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

/* The first of the got configs that finalizes into an execution plan: 0 with pl->exec_plan
 * and pl->workspace_size set; -1 when its workspace size cannot be read (reason in b->why,
 * the search stops); 1 when none finalizes. A config's own failures go to lg through hb. */
static int first_exec_plan(builder *b, builder *hb, void **cfgs, int64_t got, const char *mode,
                           heur_log *lg) {
    attn_cudnn *c = b->c;
    attn_cudnn_plan *pl = b->pl;
    for (int64_t i = 0; i < got; i++) {
        char what[96];
        snprintf(what, sizeof what, "execution plan, %s config %lld of %lld", mode,
                 (long long)i, (long long)got);
        int pmark = pl->n_descs;
        void *plan = mk(hb, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what);
        if (!plan ||
            SA(hb, plan, what, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->handle) ||
            SA(hb, plan, what, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]) ||
            fin(hb, plan, what)) {
            keep_first(lg);
            rollback(pl, pmark);
            continue;
        }
        int64_t ws = 0, n = 0;
        cudnn_status st = c->f.GetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                            CUDNN_TYPE_INT64, 1, &n, &ws);
        if (st != CUDNN_STATUS_SUCCESS) {
            cudnn_msg(c, b->why, b->whylen, st, "cudnnBackendGetAttribute", what,
                      "CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE");
            return -1;
        }
        pl->exec_plan = plan;
        pl->workspace_size = ws < 0 ? 0 : ws;
        return 0;
    }
    return 1;
}

/* One heuristics mode on the finalized operation graph g: as first_exec_plan (0, -1, or 1
 * with this mode's descriptors rolled back). */
static int try_heur_mode(builder *b, void *g, int m, heur_log *lg) {
    static const int modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    static const char *const mode_names[2] = {"heuristics mode A", "heuristics mode FALLBACK"};
    attn_cudnn_plan *pl = b->pl;
    int mark = pl->n_descs;
    /* failures inside a mode are not final (the next config or mode may work): they go to
     * lg->msg, not to the caller's why */
    builder hb = *b;
    hb.why = lg->msg;
    hb.whylen = sizeof lg->msg;
    void *heur = mk(&hb, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_names[m]);
    if (!heur ||
        SA(&hb, heur, mode_names[m], CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g) ||
        SA(&hb, heur, mode_names[m], CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]) ||
        fin(&hb, heur, mode_names[m])) {
        keep_first(lg);
        lg->counts_len += snprintf(lg->counts + lg->counts_len, sizeof lg->counts - (size_t)lg->counts_len,
                                   "%s%s: failed", lg->counts_len ? ", " : "", mode_names[m]);
        rollback(pl, mark);
        return 1;
    }
    void *cfgs[MAX_ENGINE_CFGS];
    int64_t got = engine_configs(&hb, heur, mode_names[m], cfgs, lg);
    lg->counts_len += snprintf(lg->counts + lg->counts_len, sizeof lg->counts - (size_t)lg->counts_len,
                               "%s%s: %lld config%s", lg->counts_len ? ", " : "", mode_names[m],
                               (long long)got, got == 1 ? "" : "s");
    int rc = first_exec_plan(b, &hb, cfgs, got, mode_names[m], lg);
    if (rc != 1) return rc;
    rollback(pl, mark);
    return 1;
}

/* Operation graph, then heuristics (mode A, then fallback): the first engine config that
 * finalizes into an execution plan wins. Sets pl->exec_plan and pl->workspace_size. */
static int make_plan(builder *b, void **ops, int n_ops) {
    attn_cudnn *c = b->c;
    void *g = mk(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    if (!g || SA(b, g, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->handle) ||
        SA(b, g, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops) ||
        fin(b, g, "operation graph"))
        return -1;

    heur_log lg = {.first = "", .counts = "", .counts_len = 0};
    for (int m = 0; m < 2; m++) {
        int rc = try_heur_mode(b, g, m, &lg);
        if (rc != 1) return rc;
    }
    if (!lg.first[0] && c->f.GetLastErrorString) {
        char last[4000] = "";
        c->f.GetLastErrorString(last, sizeof last);
        last[sizeof last - 1] = 0;
        for (char *t = last; *t; t++)
            if (*t == '\n' || *t == '\r') *t = ' ';
        if (last[0]) snprintf(lg.first, sizeof lg.first, "cuDNN's last error: %s", last);
    }
    put(b->why, b->whylen, "no engine supports this graph (%s); first failure: %s", lg.counts,
        lg.first[0] ? lg.first : "none reported");
    return -1;
}

/* ---- the two graph forms --------------------------------------------------------------- */

typedef struct {
    int dtype; /* CUDNN_DATA_HALF / CUDNN_DATA_BFLOAT16 */
    int64_t B, H, Sq, Sk, D;
    int causal;
    int64_t qs[3], ks[3], vs[3], os[3]; /* batch, head, row strides in elements */
} problem;

/* The single SDPA forward operation: Q, K (not transposed), V, O, a by-value float scale
 * and, when stats_out, the softmax statistics as an output. No mask. */
static int graph_sdpa_op(builder *b, const problem *pr, bool stats_out) {
    const int64_t one[4] = {1, 1, 1, 1};
    const int64_t dq[4] = {pr->B, pr->H, pr->Sq, pr->D}, sq_[4] = {pr->qs[0], pr->qs[1], pr->qs[2], 1};
    const int64_t dk[4] = {pr->B, pr->H, pr->Sk, pr->D}, sk_[4] = {pr->ks[0], pr->ks[1], pr->ks[2], 1};
    const int64_t sv_[4] = {pr->vs[0], pr->vs[1], pr->vs[2], 1};
    const int64_t so_[4] = {pr->os[0], pr->os[1], pr->os[2], 1};
    const int64_t dr[4] = {pr->B, pr->H, pr->Sq, 1}, sr[4] = {pr->H * pr->Sq, pr->Sq, 1, 1};
    void *q = io_tensor(b, "Q tensor", UID_Q, ROLE_Q, pr->dtype, dq, sq_, false);
    void *k = q ? io_tensor(b, "K tensor", UID_K, ROLE_K, pr->dtype, dk, sk_, false) : NULL;
    void *v = k ? io_tensor(b, "V tensor", UID_V, ROLE_V, pr->dtype, dk, sv_, false) : NULL;
    void *o = v ? io_tensor(b, "O tensor", UID_O, ROLE_O, pr->dtype, dq, so_, false) : NULL;
    void *sc = o ? io_tensor(b, "scale tensor", UID_SCALE, ROLE_SCALE, CUDNN_DATA_FLOAT, one, one, true) : NULL;
    void *st = NULL;
    if (!sc) return -1;
    if (stats_out && !(st = io_tensor(b, "stats tensor", UID_STATS, ROLE_STATS, CUDNN_DATA_FLOAT, dr, sr, false)))
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

/* The runtime-fusion flash-attention pattern, as cudnn-frontend lowers SDPA before the
 * unified softmax / mask operations of cuDNN 9.21:
 *   S  = Q . K^T                       (K read through swapped row/column strides), float
 *   S1 = S * scale                     (by-value float scalar)
 *   causal: row = gen_index(S1, 2), col = gen_index(S1, 3) (int32)
 *           [row = row + Sk - Sq       (two int32 by-value scalars) when Sq != Sk]
 *           S1 = row >= col ? S1 : neg_inf   (binary select)
 *   M = max_3(S1), E = exp(S1 - M), Z = sum_3(E), stats = M + log(Z),
 *   P = E / Z                          (P in the I/O data type, the second matmul's A)
 *   O = P . V
 * stats is virtual unless stats_out (then bound to a scratch buffer). */
static int graph_composite(builder *b, const problem *pr, bool stats_out) {
    const int F = CUDNN_DATA_FLOAT;
    const int64_t B = pr->B, H = pr->H, Sq = pr->Sq, Sk = pr->Sk, D = pr->D;
    const int64_t one[4] = {1, 1, 1, 1};
    const int64_t dq[4] = {B, H, Sq, D}, sq_[4] = {pr->qs[0], pr->qs[1], pr->qs[2], 1};
    const int64_t dkt[4] = {B, H, D, Sk}, skt[4] = {pr->ks[0], pr->ks[1], 1, pr->ks[2]};
    const int64_t dv[4] = {B, H, Sk, D}, sv_[4] = {pr->vs[0], pr->vs[1], pr->vs[2], 1};
    const int64_t so_[4] = {pr->os[0], pr->os[1], pr->os[2], 1};
    const int64_t ds[4] = {B, H, Sq, Sk}, ss[4] = {H * Sq * Sk, Sq * Sk, Sk, 1};
    const int64_t dr[4] = {B, H, Sq, 1}, sr[4] = {H * Sq, Sq, 1, 1};
    void *ops[MAX_OPS];
    int n = 0;

    void *q = io_tensor(b, "Q tensor", UID_Q, ROLE_Q, pr->dtype, dq, sq_, false);
    void *kt = q ? io_tensor(b, "K^T tensor", UID_K, ROLE_K, pr->dtype, dkt, skt, false) : NULL;
    void *v = kt ? io_tensor(b, "V tensor", UID_V, ROLE_V, pr->dtype, dv, sv_, false) : NULL;
    void *o = v ? io_tensor(b, "O tensor", UID_O, ROLE_O, pr->dtype, dq, so_, false) : NULL;
    void *scale = o ? io_tensor(b, "scale tensor", UID_SCALE, ROLE_SCALE, F, one, one, true) : NULL;
    if (!scale) return -1;

    void *s = virt(b, "S = Q.K^T", F, ds, ss);
    if (!s || !(ops[n++] = matmul(b, "matmul Q.K^T", q, kt, s))) return -1;
    void *s1 = virt(b, "S * scale", F, ds, ss);
    if (!s1 || !(ops[n++] = pointwise(b, "mul scale", CUDNN_POINTWISE_MUL, F, -1, s, scale, NULL, s1)))
        return -1;
    void *cur = s1;

    if (pr->causal) {
        void *row = virt(b, "row index", CUDNN_DATA_INT32, ds, ss);
        if (!row || !(ops[n++] = pointwise(b, "gen_index row", CUDNN_POINTWISE_GEN_INDEX, F, 2, cur, NULL, NULL, row)))
            return -1;
        void *col = virt(b, "column index", CUDNN_DATA_INT32, ds, ss);
        if (!col || !(ops[n++] = pointwise(b, "gen_index column", CUDNN_POINTWISE_GEN_INDEX, F, 3, cur, NULL, NULL, col)))
            return -1;
        if (Sq != Sk) { /* bottom-right: query i sees key j iff i + Sk - Sq >= j */
            void *skv = io_tensor(b, "Sk scalar", UID_SKV, ROLE_SKV, CUDNN_DATA_INT32, one, one, true);
            void *r1 = skv ? virt(b, "row + Sk", CUDNN_DATA_INT32, ds, ss) : NULL;
            if (!r1 || !(ops[n++] = pointwise(b, "add Sk", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, -1, row, skv, NULL, r1)))
                return -1;
            void *sqs = io_tensor(b, "Sq scalar", UID_SQ, ROLE_SQ, CUDNN_DATA_INT32, one, one, true);
            void *r2 = sqs ? virt(b, "row + Sk - Sq", CUDNN_DATA_INT32, ds, ss) : NULL;
            if (!r2 || !(ops[n++] = pointwise(b, "sub Sq", CUDNN_POINTWISE_SUB, CUDNN_DATA_INT32, -1, r1, sqs, NULL, r2)))
                return -1;
            row = r2;
        }
        void *keep = virt(b, "causal keep", CUDNN_DATA_BOOLEAN, ds, ss);
        if (!keep || !(ops[n++] = pointwise(b, "cmp_ge row col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, keep)))
            return -1;
        void *ninf = io_tensor(b, "mask value scalar", UID_NEG_INF, ROLE_NEG_INF, F, one, one, true);
        void *masked = ninf ? virt(b, "masked S", F, ds, ss) : NULL;
        if (!masked || !(ops[n++] = pointwise(b, "binary_select mask", CUDNN_POINTWISE_BINARY_SELECT, F, -1, cur, ninf, keep, masked)))
            return -1;
        cur = masked;
    }

    void *mx = virt(b, "row max", F, dr, sr);
    if (!mx || !(ops[n++] = reduction(b, "reduce max", CUDNN_REDUCE_TENSOR_MAX, cur, mx))) return -1;
    void *sub = virt(b, "S - max", F, ds, ss);
    if (!sub || !(ops[n++] = pointwise(b, "sub max", CUDNN_POINTWISE_SUB, F, -1, cur, mx, NULL, sub))) return -1;
    void *ex = virt(b, "exp", F, ds, ss);
    if (!ex || !(ops[n++] = pointwise(b, "exp", CUDNN_POINTWISE_EXP, F, -1, sub, NULL, NULL, ex))) return -1;
    void *sum = virt(b, "row sum", F, dr, sr);
    if (!sum || !(ops[n++] = reduction(b, "reduce sum", CUDNN_REDUCE_TENSOR_ADD, ex, sum))) return -1;
    void *lg = virt(b, "log sum", F, dr, sr);
    if (!lg || !(ops[n++] = pointwise(b, "log", CUDNN_POINTWISE_LOG, F, -1, sum, NULL, NULL, lg))) return -1;
    void *stats = stats_out ? io_tensor(b, "stats tensor", UID_STATS, ROLE_STATS, F, dr, sr, false)
                            : virt(b, "stats", F, dr, sr);
    if (!stats || !(ops[n++] = pointwise(b, "add stats", CUDNN_POINTWISE_ADD, F, -1, mx, lg, NULL, stats)))
        return -1;
    void *pr_ = virt(b, "P", pr->dtype, ds, ss);
    if (!pr_ || !(ops[n++] = pointwise(b, "div sum", CUDNN_POINTWISE_DIV, F, -1, ex, sum, NULL, pr_))) return -1;
    if (!(ops[n++] = matmul(b, "matmul P.V", pr_, v, o))) return -1;
    return make_plan(b, ops, n);
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

/* No ATTN_CUDNN_LIB: libcudnn.so.9, libcudnn.so, then beside the CUDA runtime; on failure
 * every name tried, with dlerror's reason, goes to why. */
static void *load_default_library(char *why, size_t whylen) {
    char errs[1536] = "";
    size_t el = 0;
    void *lib = NULL;
    static const char *const names[2] = {"libcudnn.so.9", "libcudnn.so"};
    for (int i = 0; i < 2 && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
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
            if (!lib) {
                const char *e = dlerror();
                snprintf(errs + el, sizeof errs - el, "; %s: %s", path, e ? e : "?");
            }
        }
    }
    if (!lib) put(why, whylen, "%s", errs);
    return lib;
}

/* libcudnn: ATTN_CUDNN_LIB when set (and then only it), else the default places. */
static void *load_library(char *why, size_t whylen) {
    const char *env = getenv("ATTN_CUDNN_LIB");
    if (!env || !*env) return load_default_library(why, whylen);
    void *lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        put(why, whylen, "%s (ATTN_CUDNN_LIB) not found: %s", env, e ? e : "?");
    }
    return lib;
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
    void *lib = load_library(why, whylen);
    if (!lib) return -1;

    attn_cudnn *c = calloc(1, sizeof *c);
    if (!c) {
        dlclose(lib);
        put(why, whylen, "out of host memory");
        return -1;
    }
    c->lib = lib;
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

void attn_cudnn_close(attn_cudnn *c) {
    if (!c) return;
    if (c->handle) c->f.Destroy(c->handle);
    if (c->lib) dlclose(c->lib);
    free(c);
}

/* ---- plans ------------------------------------------------------------------------------ */

void attn_cudnn_plan_destroy(attn_cudnn_plan *pl) {
    if (!pl) return;
    if (pl->vpack) pl->c->f.DestroyDescriptor(pl->vpack);
    rollback(pl, 0);
    free(pl->descs);
    if (pl->workspace) cudaFree(pl->workspace);
    if (pl->stats) cudaFree(pl->stats);
    free(pl->fills);
    free(pl);
}

const char *attn_cudnn_plan_kind(const attn_cudnn_plan *pl) { return pl ? pl->kind : "none"; }

/* Plans the cudaMemset2DAsync calls that zero rows [0, n) of every (batch, head) of O. */
static int plan_zero_fill(attn_cudnn_plan *pl, const attn_fwd_params *p, int64_t n) {
    const int64_t B = p->batch, H = p->heads, D = p->head_dim, E = pl->esize;
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

static int same_problem(const attn_fwd_params *a, const attn_fwd_params *b) {
    return a->dtype == b->dtype && a->batch == b->batch && a->heads == b->heads &&
           a->seqlen_q == b->seqlen_q && a->seqlen_k == b->seqlen_k && a->head_dim == b->head_dim &&
           !a->causal == !b->causal && a->q_batch_stride == b->q_batch_stride &&
           a->q_head_stride == b->q_head_stride && a->q_row_stride == b->q_row_stride &&
           a->k_batch_stride == b->k_batch_stride && a->k_head_stride == b->k_head_stride &&
           a->k_row_stride == b->k_row_stride && a->v_batch_stride == b->v_batch_stride &&
           a->v_head_stride == b->v_head_stride && a->v_row_stride == b->v_row_stride &&
           a->o_batch_stride == b->o_batch_stride && a->o_head_stride == b->o_head_stride &&
           a->o_row_stride == b->o_row_stride;
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

static int read_graph_forms(graph_forms *gf, char *why, size_t whylen) {
    const char *gm = getenv("ATTN_CUDNN_GRAPH"), *sm = getenv("ATTN_CUDNN_SQ_GT_SK");
    gf->allow_op = !gm || !*gm || !strcmp(gm, "auto") || !strcmp(gm, "sdpa");
    gf->allow_composite = !gm || !*gm || !strcmp(gm, "auto") || !strcmp(gm, "composite");
    gf->allow_direct = !sm || !*sm || !strcmp(sm, "auto") || !strcmp(sm, "direct");
    gf->allow_slice = !sm || !*sm || !strcmp(sm, "auto") || !strcmp(sm, "slice");
    if (!gf->allow_op && !gf->allow_composite) {
        put(why, whylen, "ATTN_CUDNN_GRAPH=%s: expected auto, sdpa or composite", gm);
        return -1;
    }
    if (!gf->allow_direct && !gf->allow_slice) {
        put(why, whylen, "ATTN_CUDNN_SQ_GT_SK=%s: expected auto, direct or slice", sm);
        return -1;
    }
    return 0;
}

/* A plan for p's problem with no graph yet; NULL when out of host memory. */
static attn_cudnn_plan *new_plan(attn_cudnn *c, const attn_fwd_params *p) {
    attn_cudnn_plan *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->c = c;
    pl->shape = *p;
    pl->shape.q = pl->shape.k = pl->shape.v = NULL;
    pl->shape.o = NULL;
    pl->shape.lse = NULL;
    pl->esize = 2;
    pl->scale = p->softmax_scale;
    /* cudnn-frontend masks with -inf from cuDNN 9.10 on, with the lowest float before */
    pl->neg_inf = c->version >= 91000 ? -INFINITY : -FLT_MAX;
    return pl;
}

static problem problem_of(const attn_fwd_params *p) {
    problem pr = {
        .dtype = p->dtype == ATTN_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF,
        .B = p->batch, .H = p->heads, .Sq = p->seqlen_q, .Sk = p->seqlen_k, .D = p->head_dim,
        .causal = p->causal != 0,
        .qs = {p->q_batch_stride, p->q_head_stride, p->q_row_stride},
        .ks = {p->k_batch_stride, p->k_head_stride, p->k_row_stride},
        .vs = {p->v_batch_stride, p->v_head_stride, p->v_row_stride},
        .os = {p->o_batch_stride, p->o_head_stride, p->o_row_stride},
    };
    return pr;
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
 * or -1 with both reasons in gs->err. */
static int attempt_both(graph_search *gs, const problem *pr, int sdpa_op) {
    for (int s = 0; s < 2; s++)
        if (!attempt(gs->c, gs->pl, pr, sdpa_op, s == 1, gs->err[s], sizeof gs->err[s])) return s;
    return -1;
}

/* 1. the single SDPA forward operation: non-causal only (cuDNN 9.19 has no mask for it) */
static void try_sdpa_op(graph_search *gs) {
    if (gs->gf.allow_op && !gs->pr.causal) {
        if (gs->c->version < SDPA_OP_MIN_VERSION) {
            append(gs->reasons, sizeof gs->reasons, "sdpa_fwd op: needs cuDNN >= 9.13.1 (this is %ld)", gs->c->version);
            return;
        }
        int s = attempt_both(gs, &gs->pr, 1);
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
        append(gs->reasons, sizeof gs->reasons, "sdpa_fwd op: cuDNN 9.19's SDPA_FWD operation has no causal mask");
    }
}

/* 2a. the composite graph on the whole problem (bottom-right causal mask when Sq != Sk) */
static void try_composite_direct(graph_search *gs) {
    int s = attempt_both(gs, &gs->pr, 0);
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
    int s = attempt_both(gs, &ps, 0);
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
    int want_direct = !(pr->causal && pr->Sq > pr->Sk) || gs->gf.allow_direct;
    int want_slice = pr->causal && pr->Sq > pr->Sk && gs->gf.allow_slice;
    if (want_direct) try_composite_direct(gs);
    if (!gs->ok && want_slice) try_composite_sliced(gs, want_direct);
    if (gs->ok) gs->pl->kind = "composite graph";
}

/* The device buffers and zero fills the accepted graph form needs; on failure the reason
 * goes to why and the caller destroys pl. */
static int finish_plan(attn_cudnn_plan *pl, const attn_fwd_params *p, bool stats_out, int sliced,
                       char *why, size_t whylen) {
    pl->sq = (int32_t)(sliced ? p->seqlen_k : p->seqlen_q);
    pl->skv = (int32_t)p->seqlen_k;
    if (pl->workspace_size > 0) {
        cudaError_t e = cudaMalloc(&pl->workspace, (size_t)pl->workspace_size);
        if (e != cudaSuccess) {
            put(why, whylen, "cudaMalloc(workspace, %lld bytes): %s", (long long)pl->workspace_size,
                cudaGetErrorString(e));
            pl->workspace = NULL;
            return -1;
        }
    }
    if (stats_out) {
        size_t bytes = (size_t)p->batch * (size_t)p->heads * (size_t)pl->sq * sizeof(float);
        cudaError_t e = cudaMalloc((void **)&pl->stats, bytes);
        if (e != cudaSuccess) {
            put(why, whylen, "cudaMalloc(stats scratch, %zu bytes): %s", bytes, cudaGetErrorString(e));
            pl->stats = NULL;
            return -1;
        }
    }
    if (sliced) {
        int rc = plan_zero_fill(pl, p, (int64_t)p->seqlen_q - p->seqlen_k);
        if (rc) {
            put(why, whylen, rc == -1 ? "out of host memory" : "O rows overlap (o_row_stride < head_dim)");
            return -1;
        }
    }
    return 0;
}

int attn_cudnn_plan_create(attn_cudnn *c, const attn_fwd_params *p, attn_cudnn_plan **out,
                           char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!out) {
        put(why, whylen, "attn_cudnn_plan_create: out is NULL");
        return -1;
    }
    *out = NULL;
    if (!c || !p) {
        put(why, whylen, "attn_cudnn_plan_create: NULL argument");
        return -1;
    }
    if (p->batch < 1 || p->heads < 1 || p->seqlen_q < 1 || p->seqlen_k < 1 || p->head_dim < 1 ||
        (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16)) {
        put(why, whylen, "attn_cudnn_plan_create: bad problem (b=%d h=%d sq=%d sk=%d d=%d dtype=%d)",
            p->batch, p->heads, p->seqlen_q, p->seqlen_k, p->head_dim, (int)p->dtype);
        return -1;
    }
    graph_search gs = {.c = c, .p = p, .notes = "", .reasons = ""};
    if (read_graph_forms(&gs.gf, why, whylen)) return -1;
    if (!(gs.pl = new_plan(c, p))) {
        put(why, whylen, "out of host memory");
        return -1;
    }
    gs.pr = problem_of(p);

    try_sdpa_op(&gs);
    try_composite(&gs);
    attn_cudnn_plan *pl = gs.pl;
    if (!gs.ok) {
        put(why, whylen, "%s", gs.reasons[0] ? gs.reasons : "no graph form allowed for this case");
        attn_cudnn_plan_destroy(pl);
        return ATTN_UNSUPPORTED;
    }
    if (finish_plan(pl, p, gs.stats_out, gs.sliced, why, whylen)) {
        attn_cudnn_plan_destroy(pl);
        return -1;
    }
    char *notes = gs.notes;
    size_t nl = strlen(notes);
    while (nl > 0 && (notes[nl - 1] == ' ' || notes[nl - 1] == ';')) notes[--nl] = 0;
    put(why, whylen, "%s", notes);
    *out = pl;
    return 0;
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
        default: ptrs[i] = NULL; break;
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

int attn_cudnn_plan_run(attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream,
                        char *why, size_t whylen) {
    if (!pl || !p) {
        put(why, whylen, "attn_cudnn_plan_run: NULL argument");
        return -1;
    }
    attn_cudnn *c = pl->c;
    if (!same_problem(&pl->shape, p)) {
        put(why, whylen, "attn_cudnn_plan_run: p's shape/strides/dtype/causal differ from the plan's");
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
    return 0;
}
