/* Running a cuDNN backward plan (cudnn_sdpa.h): the problem checked against the plan's, the
 * workspace split, the pointers bound (the variant pack kept while they stay the same), then
 * on the caller's stream: the lens kernel (twice: the inputs' and the gradients' ragged
 * offsets), the LSE made cuDNN's Stats, the accumulator zeroed (cuDNN < 9.6), cuDNN, and the
 * rows cuDNN does not write: dQ's sliced rows (memset), the rows that see no key (fix kernel)
 * and the keys no query sees (kv-fix kernel). */
#include "cudnn_sdpa_internal.h"

#include <string.h>

/* The gradients' strides and the deterministic flag: what a backward plan depends on beyond
 * the forward problem. */
static int same_gradients(const attn_bwd_params *a, const attn_bwd_params *b) {
    const int64_t sa[12] = {a->do_batch_stride, a->do_head_stride, a->do_row_stride, a->dq_batch_stride,
                            a->dq_head_stride,  a->dq_row_stride,  a->dk_batch_stride, a->dk_head_stride,
                            a->dk_row_stride,   a->dv_batch_stride, a->dv_head_stride, a->dv_row_stride};
    const int64_t sb[12] = {b->do_batch_stride, b->do_head_stride, b->do_row_stride, b->dq_batch_stride,
                            b->dq_head_stride,  b->dq_row_stride,  b->dk_batch_stride, b->dk_head_stride,
                            b->dk_row_stride,   b->dv_batch_stride, b->dv_head_stride, b->dv_row_stride};
    return !memcmp(sa, sb, sizeof sa) && !a->deterministic == !b->deterministic;
}

/* The run's pointer for each role of a backward plan; ws: the run's workspace. Q, O, dO and
 * dQ start cut rows in (sliced plans). */
static void *pointer_of(attn_cudnn_plan *pl, const attn_bwd_params *p, char *ws, int role) {
    const attn_fwd_params *f = p->fwd;
    const int64_t e = pl->esize, cut = pl->cut, n = pl->offs_n;
    switch (role) {
    case ROLE_Q: return (char *)f->q + cut * f->q_row_stride * e;
    case ROLE_K: return (void *)f->k;
    case ROLE_V: return (void *)f->v;
    case ROLE_O: return (char *)f->o + cut * f->o_row_stride * e;
    case ROLE_DO: return (char *)p->dout + cut * p->do_row_stride * e;
    case ROLE_DQ: return (char *)p->dq + cut * p->dq_row_stride * e;
    case ROLE_DK: return p->dk;
    case ROLE_DV: return p->dv;
    case ROLE_LSE: return f->lse;
    case ROLE_STATS: return pl->stats;
    case ROLE_ACCUM: return ws;
    case ROLE_SUM: return ws + pl->accum_bytes;
    case ROLE_SCALE: return &pl->scale;
    case ROLE_ONE: return &pl->one;
    case ROLE_NEG_INF: return &pl->neg_inf;
    case ROLE_SKV: return &pl->skv;
    case ROLE_SQ: return &pl->sq;
    case ROLE_SOFTCAP: return &pl->softcap;
    case ROLE_RIGHT: return &pl->right;
    case ROLE_LEFT_I: return &pl->left_i;
    case ROLE_LEFT_F: return &pl->left_f;
    case ROLE_SEQ_Q: return pl->lens;
    case ROLE_SEQ_KV: return pl->seq_kv_used ? (void *)f->seqused_k : pl->lens + pl->lens_kv;
    case ROLE_Q_OFF: return pl->offs;
    case ROLE_K_OFF: return pl->offs + n;
    case ROLE_V_OFF: return pl->offs + 2 * n;
    case ROLE_O_OFF: return pl->offs + 3 * n;
    case ROLE_DQ_OFF: return pl->offs + 4 * n;
    case ROLE_DK_OFF: return pl->offs + 5 * n;
    case ROLE_DV_OFF: return pl->offs + 6 * n;
    case ROLE_DO_OFF: return pl->offs + 7 * n;
    default: return NULL;
    }
}

/* Binds every uid of the plan to the run's pointer; -1 (why) when a tensor the caller gives
 * is NULL or not 16-byte aligned, as the tensors were declared. */
static int bind_pointers(attn_cudnn_plan *pl, const attn_bwd_params *p, char *ws, void **ptrs, char *why,
                         size_t whylen) {
    static const struct {
        int role;
        const char *name;
    } given[] = {{ROLE_Q, "q"},   {ROLE_K, "k"},   {ROLE_V, "v"},   {ROLE_O, "o"},          {ROLE_DO, "dout"},
                 {ROLE_DQ, "dq"}, {ROLE_DK, "dk"}, {ROLE_DV, "dv"}, {ROLE_LSE, "lse"}, {ROLE_SEQ_KV, "seqused_k"}};
    for (int i = 0; i < pl->n_uids; i++) {
        ptrs[i] = pointer_of(pl, p, ws, pl->roles[i]);
        const int role = pl->roles[i];
        const int sliced = pl->cut && (role == ROLE_Q || role == ROLE_O || role == ROLE_DO || role == ROLE_DQ);
        for (size_t g = 0; g < sizeof given / sizeof given[0]; g++)
            if (given[g].role == role && (!ptrs[i] || ((uintptr_t)ptrs[i] & 15u))) {
                put(why, whylen, "attn_cudnn_bwd_plan_run: %s%s is %s (%p)", given[g].name, sliced ? " (sliced)" : "",
                    ptrs[i] ? "not 16-byte aligned" : "NULL", ptrs[i]);
                return -1;
            }
    }
    return 0;
}

/* The run's workspace (the caller's, else the plan's own): NULL with why when there is none
 * or it is too small. */
static char *workspace_of(const attn_cudnn_plan *pl, const attn_bwd_params *p, char *why, size_t whylen) {
    const size_t need = attn_cudnn_bwd_plan_workspace(pl);
    if (!p->workspace) {
        if (!pl->own_ws)
            put(why, whylen, "attn_cudnn_bwd_plan_run: workspace is NULL, and the plan (made with "
                "external_workspace) has none: %zu bytes needed", need);
        return pl->own_ws;
    }
    if (p->workspace_bytes < need || ((uintptr_t)p->workspace & 15u)) {
        put(why, whylen, "attn_cudnn_bwd_plan_run: workspace %p of %zu bytes: %zu bytes, 16-byte aligned, needed",
            p->workspace, p->workspace_bytes, need);
        return NULL;
    }
    return p->workspace;
}

/* Before cuDNN: the lengths and ragged offsets, the Stats, the accumulator zeroed. */
static int before(const attn_cudnn_plan *pl, const attn_bwd_params *p, char *ws, cudaStream_t stream, char *why,
                  size_t whylen) {
    const attn_fwd_params *f = p->fwd;
    cudaError_t e = cudaSuccess;
    const char *what = "";
    if (pl->run_lens) {
        const int64_t rs[4] = {p->dq_row_stride, p->dk_row_stride, p->dv_row_stride, p->do_row_stride};
        what = "launching the lens kernel";
        e = sdpa_launch_lens(pl, f, stream);
        if (e == cudaSuccess && pl->offs) e = sdpa_launch_lens_offs(pl, f, pl->offs + 4 * pl->offs_n, rs, stream);
    }
    if (e == cudaSuccess && pl->stats_mode == STATS_CONVERT) {
        what = "launching the bwd-stats kernel";
        e = sdpa_launch_bwd_stats(pl, p, stream);
    } else if (e == cudaSuccess && pl->stats_mode == STATS_COPY) {
        const size_t sq = (size_t)f->seqlen_q, rows = (size_t)pl->sq, bh = (size_t)f->batch * (size_t)f->heads;
        what = "cudaMemcpy2DAsync (the LSE's rows of a sliced plan)";
        e = cudaMemcpy2DAsync(pl->stats, rows * sizeof(float), f->lse + pl->cut, sq * sizeof(float),
                              rows * sizeof(float), bh, cudaMemcpyDeviceToDevice, stream);
    }
    if (e == cudaSuccess && pl->zero_accum) {
        what = "cudaMemsetAsync (the dQ accumulator)";
        e = cudaMemsetAsync(ws, 0, (size_t)pl->accum_bytes, stream);
    }
    if (e != cudaSuccess) {
        put(why, whylen, "%s: %s", what, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* After cuDNN: the rows of dQ and of dK, dV it leaves to us. */
static int after(const attn_cudnn_plan *pl, const attn_bwd_params *p, cudaStream_t stream, char *why, size_t whylen) {
    cudaError_t e = cudaSuccess;
    const char *what = "cudaMemset2DAsync (dQ's rows that see no key)";
    for (int i = 0; i < pl->n_fills && e == cudaSuccess; i++) {
        const zero_fill *z = &pl->fills[i];
        e = cudaMemset2DAsync((char *)p->dq + z->offset * pl->esize, z->pitch, 0, z->width, z->height, stream);
    }
    if (e == cudaSuccess && pl->run_fix) {
        what = "launching the fix kernel on dQ";
        e = sdpa_launch_fix_dq(pl, p, stream);
    }
    if (e == cudaSuccess && pl->run_kv_fix) {
        what = "launching the kv-fix kernel";
        e = sdpa_launch_kv_fix(pl, p, stream);
    }
    if (e != cudaSuccess) {
        put(why, whylen, "%s: %s", what, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

static int run_plan(attn_cudnn_plan *pl, const attn_bwd_params *p, cudaStream_t stream, char *why, size_t whylen) {
    if (!pl->bwd) {
        put(why, whylen, "attn_cudnn_bwd_plan_run: a forward plan (run it with attn_cudnn_plan_run)");
        return -1;
    }
    if (!sdpa_same_problem(&pl->shape, p->fwd) || !same_gradients(&pl->bshape, p)) {
        put(why, whylen, "attn_cudnn_bwd_plan_run: p's shape/strides/dtype/mask/layout/deterministic differ from the "
            "plan's");
        return -1;
    }
    if (!p->fwd->lse || ((uintptr_t)p->fwd->lse & 15u)) { /* read by cuDNN or by the copies before it */
        put(why, whylen, "attn_cudnn_bwd_plan_run: lse (%p) is %s", (void *)p->fwd->lse,
            p->fwd->lse ? "not 16-byte aligned" : "NULL");
        return -1;
    }
    char *ws = workspace_of(pl, p, why, whylen);
    if (!ws) return -1;
    void *ptrs[MAX_UIDS];
    if (bind_pointers(pl, p, ws, ptrs, why, whylen)) return -1;
    pl->workspace = ws + pl->accum_bytes + pl->sum_bytes; /* cuDNN's part */
    pl->scale = p->fwd->softmax_scale;
    if (sdpa_update_vpack(pl, ptrs, why, whylen)) return -1;
    attn_cudnn *c = pl->c;
    cudnn_status st = c->f.SetStream(c->handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, why, whylen, st, "cudnnSetStream", "handle", NULL);
        return -1;
    }
    if (before(pl, p, ws, stream, why, whylen)) return -1;
    st = c->f.Execute(c->handle, pl->exec_plan, pl->vpack);
    if (st != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, why, whylen, st, "cudnnBackendExecute", pl->kind, NULL);
        return -1;
    }
    return after(pl, p, stream, why, whylen) ? -1 : 0;
}

int attn_cudnn_bwd_plan_run(attn_cudnn_plan *pl, const attn_bwd_params *p, cudaStream_t stream, char *why,
                            size_t whylen) {
    if (!pl || !p || !p->fwd) {
        put(why, whylen, "attn_cudnn_bwd_plan_run: NULL argument (plan, p or p->fwd)");
        return -1;
    }
    if (sdpa_run_begin(pl, stream, why, whylen)) return -1;
    const int failed = run_plan(pl, p, stream, why, whylen) != 0;
    return sdpa_run_end(pl, stream, failed, why, whylen) || failed ? -1 : 0;
}
