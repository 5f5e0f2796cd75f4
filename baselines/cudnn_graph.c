/* The cuDNN baseline's operation graphs: descriptor bookkeeping (every descriptor is the
 * plan's, destroyed with it), the graph pieces (tensors, pointwise, reduction, matmul, paged
 * cache load), and the two graph forms (cudnn_sdpa.h): the single SDPA_FWD operation and the
 * composite graph cudnn-frontend lowers SDPA to. */
#include "cudnn_sdpa_internal.h"

#include <stdlib.h>

/* ---- descriptor bookkeeping --------------------------------------------------------- */

void sdpa_rollback(attn_cudnn_plan *pl, int mark) {
    while (pl->n_descs > mark) pl->c->f.DestroyDescriptor(pl->descs[--pl->n_descs]);
}

void *sdpa_mk(builder *b, int type, const char *what) {
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
        sdpa_msg(b->c, b->why, b->whylen, st, "cudnnBackendCreateDescriptor", what, NULL);
        return NULL;
    }
    pl->descs[pl->n_descs++] = d;
    return d;
}

int sdpa_set_attr(builder *b, void *d, const char *what, int name, const char *attr, int type,
                  int64_t n, const void *v) {
    cudnn_status st = b->c->f.SetAttribute(d, name, type, n, v);
    if (st == CUDNN_STATUS_SUCCESS) return 0;
    sdpa_msg(b->c, b->why, b->whylen, st, "cudnnBackendSetAttribute", what, attr);
    return -1;
}

int sdpa_fin(builder *b, void *d, const char *what) {
    cudnn_status st = b->c->f.Finalize(d);
    if (st == CUDNN_STATUS_SUCCESS) return 0;
    sdpa_msg(b->c, b->why, b->whylen, st, "cudnnBackendFinalize", what, NULL);
    return -1;
}

/* ---- graph pieces --------------------------------------------------------------------- */

/* ragged: NULL, or the [B+1,1,1,1] tensor of each batch's first element (variable lengths,
 * rows packed) */
void *sdpa_tensor(builder *b, const char *what, int64_t uid, int dtype, const int64_t dims[4],
                    const int64_t strides[4], bool is_virtual, bool by_value, void *ragged) {
    void *t = sdpa_mk(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
    int64_t align = 16;
    if (!t || SA(b, t, what, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dtype) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) ||
        SA(b, t, what, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual) ||
        (by_value && SA(b, t, what, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value)) ||
        (ragged && SA(b, t, what, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged)) ||
        sdpa_fin(b, t, what))
        return NULL;
    return t;
}

/* a non-virtual tensor, bound at run time to the pointer of `role` */
void *sdpa_io_tensor(builder *b, const char *what, int64_t uid, int role, int dtype, const int64_t dims[4],
                         const int64_t strides[4], bool by_value, void *ragged) {
    if (b->pl->n_uids == MAX_UIDS) {
        put(b->why, b->whylen, "internal: too many graph inputs/outputs");
        return NULL;
    }
    void *t = sdpa_tensor(b, what, uid, dtype, dims, strides, false, by_value, ragged);
    if (t) {
        b->pl->uids[b->pl->n_uids] = uid;
        b->pl->roles[b->pl->n_uids++] = role;
    }
    return t;
}

static void *io_tensor(builder *b, const char *what, int64_t uid, int role, int dtype,
                       const int64_t dims[4], const int64_t strides[4], bool by_value) {
    return sdpa_io_tensor(b, what, uid, role, dtype, dims, strides, by_value, NULL);
}

void *sdpa_virt(builder *b, const char *what, int dtype, const int64_t dims[4],
                  const int64_t strides[4]) {
    return sdpa_tensor(b, what, b->next_uid++, dtype, dims, strides, true, false, NULL);
}

/* y = mode(x[, bb[, t]]); axis >= 0 only for GEN_INDEX. TANH_BWD: bb is dy, y is dx (cuDNN's
 * DYDESC and DXDESC, as cudnn-frontend binds an activation's backward). */
void *sdpa_pointwise(builder *b, const char *what, int mode, int prec, int64_t axis, void *x, void *bb, void *t,
                     void *y) {
    const int bwd = mode == CUDNN_POINTWISE_TANH_BWD;
    void *d = sdpa_mk(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what);
    if (!d || SA(b, d, what, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ||
        SA(b, d, what, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) ||
        (axis >= 0 && SA(b, d, what, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis)) ||
        sdpa_fin(b, d, what))
        return NULL;
    void *op = sdpa_mk(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        (bb && sdpa_set_attr(b, op, what, bwd ? CUDNN_ATTR_OPERATION_POINTWISE_DYDESC : CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                             bwd ? "CUDNN_ATTR_OPERATION_POINTWISE_DYDESC" : "CUDNN_ATTR_OPERATION_POINTWISE_BDESC",
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bb)) ||
        (t && SA(b, op, what, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t)) ||
        sdpa_set_attr(b, op, what, bwd ? CUDNN_ATTR_OPERATION_POINTWISE_DXDESC : CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                      bwd ? "CUDNN_ATTR_OPERATION_POINTWISE_DXDESC" : "CUDNN_ATTR_OPERATION_POINTWISE_YDESC",
                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        sdpa_fin(b, op, what))
        return NULL;
    return op;
}

/* y = reduce(x) over the dimensions where y has extent 1 */
void *sdpa_reduction(builder *b, const char *what, int mode, void *x, void *y) {
    int comp = CUDNN_DATA_FLOAT;
    void *d = sdpa_mk(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, what);
    if (!d ||
        SA(b, d, what, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode) ||
        SA(b, d, what, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp) ||
        sdpa_fin(b, d, what))
        return NULL;
    void *op = sdpa_mk(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d) ||
        sdpa_fin(b, op, what))
        return NULL;
    return op;
}

/* cc = a . bm (batched over the two leading dimensions), float accumulation; m, n, kk: NULL,
 * or per-batch [B,1,1,1] int32 extents of the rows of a, the columns of bm, the inner
 * dimension (variable lengths: the padding beyond them is not computed) */
void *sdpa_matmul(builder *b, const char *what, void *a, void *bm, void *cc, void *m, void *n, void *kk) {
    int comp = CUDNN_DATA_FLOAT;
    void *d = sdpa_mk(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, what);
    if (!d || SA(b, d, what, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp) ||
        sdpa_fin(b, d, what))
        return NULL;
    void *op = sdpa_mk(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bm) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cc) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d) ||
        (m && SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m)) ||
        (n && SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n)) ||
        (kk && SA(b, op, what, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &kk)) ||
        sdpa_fin(b, op, what))
        return NULL;
    return op;
}

/* y = the rows of the pages of `container` that `pages` lists per sequence, up to `seq`
 * ([B,1,1,1]) keys: a paged K or V cache read as a dense [B,Hk,Sk,.] tensor */
static void *paged_load(builder *b, const char *what, void *container, void *pages, void *seq, void *y) {
    void *op = sdpa_mk(b, CUDNN_BACKEND_OPERATION_PAGED_CACHE_LOAD_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_CONTAINER_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &container) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_PAGE_TABLE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pages) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_SEQUENCE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seq) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_PAGED_CACHE_LOAD_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        sdpa_fin(b, op, what))
        return NULL;
    return op;
}

/* ---- the two graph forms --------------------------------------------------------------- */

/* The single SDPA forward operation: Q, K (not transposed), V, O, a by-value float scale
 * and, when stats_out, the softmax statistics as an output. No mask. */
int sdpa_graph_op(builder *b, const problem *pr, bool stats_out) {
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
    void *op = sdpa_mk(b, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, what);
    if (!op ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &q) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o) ||
        SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sc) ||
        (st && SA(b, op, what, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &st)) ||
        sdpa_fin(b, op, what))
        return -1;
    return sdpa_make_plan(b, &op, 1);
}

int sdpa_add_op(sdpa_graph *g, void *op) {
    if (!op) return -1;
    if (g->n == MAX_OPS) {
        put(g->b->why, g->b->whylen, "internal: too many graph operations");
        return -1;
    }
    g->ops[g->n++] = op;
    return 0;
}

void *sdpa_pw(sdpa_graph *g, const char *what, int mode, int prec, int dtype, void *x, void *bb) {
    void *y = sdpa_virt(g->b, what, dtype, g->ds, g->ss);
    if (!y || sdpa_add_op(g, sdpa_pointwise(g->b, what, mode, prec, -1, x, bb, NULL, y))) return NULL;
    return y;
}

/* the row (axis 2) or column (axis 3) index of each score, int32 */
static void *gen_index(sdpa_graph *g, const char *what, int prec, int axis, void *s) {
    void *y = sdpa_virt(g->b, what, CUDNN_DATA_INT32, g->ds, g->ss);
    if (!y || sdpa_add_op(g, sdpa_pointwise(g->b, what, CUDNN_POINTWISE_GEN_INDEX, prec, axis, s, NULL, NULL, y))) return NULL;
    return y;
}

/* s where keep, else the mask value (-inf) */
static void *select_keep(sdpa_graph *g, const char *what, void *s, void *keep) {
    /* declared by the first mask: a graph input no operation reads fails cuDNN's variant
     * pack check (CUDNN_STATUS_BAD_PARAM_NULL_POINTER at execution) */
    if (!g->ninf && !(g->ninf = sdpa_scalar(g, "mask value scalar", UID_NEG_INF, ROLE_NEG_INF, CUDNN_DATA_FLOAT)))
        return NULL;
    void *y = sdpa_virt(g->b, what, CUDNN_DATA_FLOAT, g->ds, g->ss);
    if (!y || sdpa_add_op(g, sdpa_pointwise(g->b, what, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, s, g->ninf, keep, y)))
        return NULL;
    return y;
}

void *sdpa_scalar(sdpa_graph *g, const char *what, int64_t uid, int role, int dtype) {
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
void *sdpa_mask_padding(sdpa_graph *g, void *s) {
    const int I32 = CUDNN_DATA_INT32, BOOL = CUDNN_DATA_BOOLEAN;
    if (!g->pr->padded) return s;
    void *row = gen_index(g, "padding row index", I32, 2, s);
    void *col = row ? gen_index(g, "padding column index", I32, 3, s) : NULL;
    void *rk = col ? sdpa_pw(g, "row < seq_q", CUDNN_POINTWISE_CMP_LT, BOOL, BOOL, row, g->seq_q) : NULL;
    void *ck = rk ? sdpa_pw(g, "col < seq_kv", CUDNN_POINTWISE_CMP_LT, BOOL, BOOL, col, g->seq_kv) : NULL;
    void *keep = ck ? sdpa_pw(g, "padding keep", CUDNN_POINTWISE_LOGICAL_AND, BOOL, BOOL, rk, ck) : NULL;
    return keep ? select_keep(g, "padding mask", s, keep) : NULL;
}

void *sdpa_mask_bands(sdpa_graph *g, void *s) {
    const problem *pr = g->pr;
    const int F = CUDNN_DATA_FLOAT, I32 = CUDNN_DATA_INT32, BOOL = CUDNN_DATA_BOOLEAN;
    if (pr->right >= 0) {
        void *row = gen_index(g, "row index", F, 2, s);
        void *col = row ? gen_index(g, "column index", F, 3, s) : NULL;
        if (!col) return NULL;
        if (pr->padded) {
            if (!(row = sdpa_pw(g, "row + seq_kv", CUDNN_POINTWISE_ADD, I32, I32, row, g->seq_kv)) ||
                !(row = sdpa_pw(g, "row + seq_kv - seq_q", CUDNN_POINTWISE_SUB, I32, I32, row, g->seq_q)))
                return NULL;
        } else if (pr->Sq != pr->Sk) {
            void *skv = sdpa_scalar(g, "Sk scalar", UID_SKV, ROLE_SKV, I32);
            if (!skv || !(row = sdpa_pw(g, "row + Sk", CUDNN_POINTWISE_ADD, I32, I32, row, skv))) return NULL;
            void *sqs = sdpa_scalar(g, "Sq scalar", UID_SQ, ROLE_SQ, I32);
            if (!sqs || !(row = sdpa_pw(g, "row + Sk - Sq", CUDNN_POINTWISE_SUB, I32, I32, row, sqs))) return NULL;
        }
        if (pr->right > 0) {
            void *r = sdpa_scalar(g, "right bound scalar", UID_RIGHT, ROLE_RIGHT, I32);
            if (!r || !(row = sdpa_pw(g, "row + right", CUDNN_POINTWISE_ADD, I32, I32, row, r))) return NULL;
        }
        void *keep = sdpa_pw(g, "right bound keep", CUDNN_POINTWISE_CMP_GE, BOOL, BOOL, row, col);
        if (!keep || !(s = select_keep(g, "right bound mask", s, keep))) return NULL;
    }
    if (pr->left >= 0) {
        void *row = gen_index(g, "row index", F, 2, s);
        void *col = row ? gen_index(g, "column index", F, 3, s) : NULL;
        if (!col) return NULL;
        if (pr->padded) {
            void *l = sdpa_scalar(g, "left bound scalar", UID_LEFT, ROLE_LEFT_I, I32);
            if (!l || !(col = sdpa_pw(g, "col + left", CUDNN_POINTWISE_ADD, I32, I32, col, l)) ||
                !(col = sdpa_pw(g, "col + left - seq_kv", CUDNN_POINTWISE_SUB, I32, I32, col, g->seq_kv)) ||
                !(col = sdpa_pw(g, "col + left - seq_kv + seq_q", CUDNN_POINTWISE_ADD, I32, I32, col, g->seq_q)))
                return NULL;
        } else { /* one float: left + 1 - Sk + Sq */
            void *l = sdpa_scalar(g, "left bound scalar", UID_LEFT, ROLE_LEFT_F, F);
            if (!l || !(col = sdpa_pw(g, "col + left", CUDNN_POINTWISE_ADD, F, F, col, l))) return NULL;
        }
        void *keep = sdpa_pw(g, "left bound keep", CUDNN_POINTWISE_CMP_GT, BOOL, BOOL, col, row);
        if (!keep || !(s = select_keep(g, "left bound mask", s, keep))) return NULL;
    }
    return s;
}

static void *masks(sdpa_graph *g, void *s) {
    s = sdpa_mask_padding(g, s);
    return s ? sdpa_mask_bands(g, s) : NULL;
}

/* The softmax of the masked scores s, as cudnn-frontend emits it: M = max_3(S),
 * E = exp(S - M), Z = sum_3(E), stats = M + log(Z) (bound to a graph output when stats_out,
 * else virtual), P = E / Z in the I/O data type. P, or NULL on failure. */
static void *softmax(sdpa_graph *g, void *s, bool stats_out) {
    builder *b = g->b;
    const int F = CUDNN_DATA_FLOAT;
    const int64_t B = g->pr->B, H = g->pr->H, Sq = g->pr->Sq;
    const int64_t *ds = g->ds, *ss = g->ss, dr[4] = {B, H, Sq, 1}, sr[4] = {H * Sq, Sq, 1, 1};
    void *mx = sdpa_virt(b, "row max", F, dr, sr);
    if (!mx || sdpa_add_op(g, sdpa_reduction(b, "reduce max", CUDNN_REDUCE_TENSOR_MAX, s, mx))) return NULL;
    void *sub = sdpa_virt(b, "S - max", F, ds, ss);
    if (!sub || sdpa_add_op(g, sdpa_pointwise(b, "sub max", CUDNN_POINTWISE_SUB, F, -1, s, mx, NULL, sub))) return NULL;
    void *ex = sdpa_virt(b, "exp", F, ds, ss);
    if (!ex || sdpa_add_op(g, sdpa_pointwise(b, "exp", CUDNN_POINTWISE_EXP, F, -1, sub, NULL, NULL, ex))) return NULL;
    void *sum = sdpa_virt(b, "row sum", F, dr, sr);
    if (!sum || sdpa_add_op(g, sdpa_reduction(b, "reduce sum", CUDNN_REDUCE_TENSOR_ADD, ex, sum))) return NULL;
    void *lg = sdpa_virt(b, "log sum", F, dr, sr);
    if (!lg || sdpa_add_op(g, sdpa_pointwise(b, "log", CUDNN_POINTWISE_LOG, F, -1, sum, NULL, NULL, lg))) return NULL;
    void *stats = stats_out ? io_tensor(b, "stats tensor", UID_STATS, b->pl->stats_role, F, dr, sr, false)
                            : sdpa_virt(b, "stats", F, dr, sr);
    if (!stats || sdpa_add_op(g, sdpa_pointwise(b, "add stats", CUDNN_POINTWISE_ADD, F, -1, mx, lg, NULL, stats))) return NULL;
    void *p = sdpa_virt(b, "P", g->pr->dtype, ds, ss);
    if (!p || sdpa_add_op(g, sdpa_pointwise(b, "div sum", CUDNN_POINTWISE_DIV, F, -1, ex, sum, NULL, p))) return NULL;
    return p;
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
 *   P = E / Z                          (softmax() above; P the second matmul's A)
 *   [paged: V = paged cache load (V pages, block table, seq_kv)]
 *   O = P . V                          padded: M and K overridden by seq_q, seq_kv
 * Q/O and K/V carry ragged offsets when ragged_q / ragged_k (see problem). stats is virtual
 * unless stats_out (then bound to p->lse or the plan's scratch). */
int sdpa_graph_composite(builder *b, const problem *pr, bool stats_out) {
    const int F = CUDNN_DATA_FLOAT, I32 = CUDNN_DATA_INT32, I64 = CUDNN_DATA_INT64;
    const int64_t B = pr->B, H = pr->H, Hk = pr->Hk, Sq = pr->Sq, Sk = pr->Sk, D = pr->D, Dv = pr->Dv;
    const int64_t one[4] = {1, 1, 1, 1}, dseq[4] = {B, 1, 1, 1}, doff[4] = {B + 1, 1, 1, 1};
    const int64_t dq[4] = {B, H, Sq, D}, sq_[4] = {pr->qs[0], pr->qs[1], pr->qs[2], 1};
    const int64_t dkt[4] = {B, Hk, D, Sk}, dv[4] = {B, Hk, Sk, Dv};
    const int64_t do_[4] = {B, H, Sq, Dv}, so_[4] = {pr->os[0], pr->os[1], pr->os[2], 1};
    sdpa_graph g = {.b = b, .pr = pr, .n = 0, .ds = {B, H, Sq, Sk}, .ss = {H * Sq * Sk, Sq * Sk, Sk, 1}};

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

    void *q = sdpa_io_tensor(b, "Q tensor", UID_Q, ROLE_Q, pr->dtype, dq, sq_, false, qoff);
    void *o = q ? sdpa_io_tensor(b, "O tensor", UID_O, ROLE_O, pr->dtype, do_, so_, false, ooff) : NULL;
    void *scale = o ? sdpa_scalar(&g, "scale tensor", UID_SCALE, ROLE_SCALE, F) : NULL;
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
        kt = vpages ? sdpa_virt(b, "K^T (loaded from pages)", pr->dtype, dkt, skt) : NULL;
        if (!kt || sdpa_add_op(&g, paged_load(b, "paged cache load of K", ck, pages, g.seq_kv, kt))) return -1;
    } else {
        const int64_t skt[4] = {pr->ks[0], pr->ks[1], 1, pr->ks[2]}, sv_[4] = {pr->vs[0], pr->vs[1], pr->vs[2], 1};
        kt = sdpa_io_tensor(b, "K^T tensor", UID_K, ROLE_K, pr->dtype, dkt, skt, false, koff);
        v = kt ? sdpa_io_tensor(b, "V tensor", UID_V, ROLE_V, pr->dtype, dv, sv_, false, voff) : NULL;
        if (!v) return -1;
    }

    void *s = sdpa_virt(b, "S = Q.K^T", F, g.ds, g.ss);
    if (!s || sdpa_add_op(&g, sdpa_matmul(b, "matmul Q.K^T", q, kt, s, g.seq_q, g.seq_kv, NULL))) return -1;
    if (!(s = sdpa_pw(&g, "S * scale", CUDNN_POINTWISE_MUL, F, F, s, scale))) return -1;
    if (pr->softcap > 0) {
        void *cap = sdpa_scalar(&g, "softcap scalar", UID_SOFTCAP, ROLE_SOFTCAP, F);
        if (!cap || !(s = sdpa_pw(&g, "S / softcap", CUDNN_POINTWISE_DIV, F, F, s, cap)) ||
            !(s = sdpa_pw(&g, "tanh", CUDNN_POINTWISE_TANH_FWD, F, F, s, NULL)) ||
            !(s = sdpa_pw(&g, "tanh * softcap", CUDNN_POINTWISE_MUL, F, F, s, cap)))
            return -1;
    }
    if (!(s = masks(&g, s))) return -1;

    void *pr_ = softmax(&g, s, stats_out);
    if (!pr_) return -1;
    if (pr->paged) {
        const int64_t svp[4] = {Dv * Sk * Hk, Dv * Sk, Dv, 1};
        v = sdpa_virt(b, "V (loaded from pages)", pr->dtype, dv, svp);
        if (!v || sdpa_add_op(&g, paged_load(b, "paged cache load of V", vpages, pages, g.seq_kv, v))) return -1;
    }
    if (sdpa_add_op(&g, sdpa_matmul(b, "matmul P.V", pr_, v, o, g.seq_q, NULL, g.seq_kv))) return -1;
    return sdpa_make_plan(b, g.ops, g.n);
}
