/* The backward problem (gpu_problem.h, attn_bwd_problem): the forward problem built as every
 * check builds it, then dO, the gradients, the workspace and the backward references. Planned
 * and checked (attn_bwd_problem_check) before the gradients are allocated, as the forward is. */
#include "gpu_problem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "device_memory.h"
#include "problem.h"

const char *const attn_grad_names[3] = {"dQ", "dK", "dV"};

/* dO's values: from the problem's seed as Q, K and V's are, a fifth tensor after them */
static const uint64_t DO_SEED_STEP = ATTN_TENSOR_SEED_STEP * 5;

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 1;
}

#define GB_TRY(call)                                                                                 \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess)                                                                       \
            return fail(err, errlen, "CUDA error at %s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, \
                        cudaGetErrorName(e_), cudaGetErrorString(e_));                               \
    } while (0)

/* heads, rows and columns of dO (0), dQ, dK, dV (1..3) in the dense layout */
static void shape_of(const attn_bwd_problem *x, int t, int *heads, int *rows, int *dim) {
    const attn_fwd_params *p = &x->f.p;
    const int kv = t >= 2;
    *heads = kv ? p->heads_k : p->heads;
    *rows = kv ? p->seqlen_k : p->seqlen_q;
    *dim = t == 0 || t == 3 ? p->head_dim_v : p->head_dim;
}

/* Strides of dO, dQ, dK, dV: a dense problem's from their layouts; a packed one's those of
 * O, Q, K and V (rows of [row][heads][dim], the same batch strides: a decode batch's dense Q,
 * a dense cache's capacity). */
static void plan_strides(attn_bwd_problem *x) {
    const attn_fwd_params *p = &x->f.p;
    attn_bwd_params *bp = &x->bp;
    int64_t *s[4][3] = {{&bp->do_batch_stride, &bp->do_head_stride, &bp->do_row_stride},
                        {&bp->dq_batch_stride, &bp->dq_head_stride, &bp->dq_row_stride},
                        {&bp->dk_batch_stride, &bp->dk_head_stride, &bp->dk_row_stride},
                        {&bp->dv_batch_stride, &bp->dv_head_stride, &bp->dv_row_stride}};
    const int64_t from[4][3] = {{p->o_batch_stride, p->o_head_stride, p->o_row_stride},
                                {p->q_batch_stride, p->q_head_stride, p->q_row_stride},
                                {p->k_batch_stride, p->k_head_stride, p->k_row_stride},
                                {p->v_batch_stride, p->v_head_stride, p->v_row_stride}};
    static const attn_tensor_id same[4] = {ATTN_T_O, ATTN_T_Q, ATTN_T_K, ATTN_T_V};
    for (int t = 0; t < 4; t++) {
        int heads, rows, dim;
        shape_of(x, t, &heads, &rows, &dim);
        if (x->f.desc.nseq > 0) {
            x->st[t] = x->f.st[same[t]];
            for (int j = 0; j < 3; j++) *s[t][j] = from[t][j];
        } else {
            x->st[t] = attn_make_strides(x->layout[t], p->batch, heads, rows, dim);
            *s[t][0] = x->st[t].batch, *s[t][1] = x->st[t].head, *s[t][2] = x->st[t].row;
        }
    }
    for (int i = 0; i < 3; i++) {
        int heads, rows, dim;
        shape_of(x, i + 1, &heads, &rows, &dim);
        x->elems[i] = (size_t)p->batch * heads * rows * dim;
    }
}

void *attn_bwd_problem_data(const attn_bwd_problem *x, int buf) {
    return x->buf[buf] ? (char *)x->buf[buf] + ATTN_GUARD_BYTES : NULL;
}

attn_tensor_view attn_bwd_problem_view(const attn_bwd_problem *x, int i) {
    attn_tensor_view v;
    int heads, rows, dim;
    shape_of(x, i + 1, &heads, &rows, &dim);
    const attn_strides *st = &x->st[i + 1];
    v.heads = heads, v.dim = dim, v.batch_stride = st->batch, v.head_stride = st->head, v.row_stride = st->row;
    if (x->f.desc.nseq > 0)
        v.batch = 1, v.seq = (int)(st->extent / st->row);
    else
        v.batch = x->f.p.batch, v.seq = rows;
    return v;
}

/* bp's pointers: the buffers, or before they exist a stand-in (the check only asks whether
 * a pointer is set) */
static void bind(attn_bwd_problem *x, void *stand_in) {
    attn_bwd_params *bp = &x->bp;
    bp->fwd = &x->f.p;
    bp->dout = x->buf[ATTN_G_DO] ? attn_bwd_problem_data(x, ATTN_G_DO) : stand_in;
    bp->dq = x->buf[ATTN_G_DQ] ? attn_bwd_problem_data(x, ATTN_G_DQ) : stand_in;
    bp->dk = x->buf[ATTN_G_DK] ? attn_bwd_problem_data(x, ATTN_G_DK) : stand_in;
    bp->dv = x->buf[ATTN_G_DV] ? attn_bwd_problem_data(x, ATTN_G_DV) : stand_in;
    /* the stand-in aligned as the workspace must be (the check reads its address) */
    void *ws_stand_in = (void *)(((uintptr_t)stand_in + 255) & ~(uintptr_t)255);
    bp->workspace = !bp->workspace_bytes ? NULL : x->buf[ATTN_G_WS] ? attn_bwd_problem_data(x, ATTN_G_WS) : ws_stand_in;
}

/* O := the golden O rounded to the dtype, LSE := the golden LSE, in the forward's layouts */
static int give_forward_outputs(attn_bwd_problem *x, cudaStream_t stream, char *err, size_t errlen) {
    attn_gpu_problem *f = &x->f;
    const attn_fwd_params *p = &f->p;
    const int packed_rows = f->desc.nseq > 0; /* cu_q always exists then (a decode batch's is uniform) */
    const int dv = p->head_dim_v;
    GB_TRY(attn_pack_rows(f->g, (attn_store_type)p->dtype, packed_rows ? f->cu_q : NULL, p->batch, p->heads,
                          p->seqlen_q, dv, p->o_batch_stride, p->o_head_stride, p->o_row_stride, (void *)p->o, stream));
    /* the LSE: [heads][total_q] with cu_seqlens_q, else [batch][heads][seqlen_q] */
    const int packed_lse = f->host.cu_seqlens_q != NULL;
    const int64_t total = packed_lse ? f->host.cu_seqlens_q[p->batch] : 0;
    GB_TRY(attn_pack_rows(f->lg, ATTN_STORE_F32, packed_lse ? f->cu_q : NULL, p->batch, p->heads, p->seqlen_q, 1,
                          (int64_t)p->heads * p->seqlen_q, packed_lse ? total : p->seqlen_q, 1, p->lse, stream));
    return 0;
}

static int allocate(attn_bwd_problem *x, char *err, size_t errlen) {
    for (int t = 0; t < 4; t++) x->bytes[t] = 2 * ATTN_GUARD_BYTES + (size_t)x->st[t].extent * 2;
    x->bytes[ATTN_G_WS] = x->bp.workspace_bytes ? x->bp.workspace_bytes + 2 * ATTN_GUARD_BYTES : 0;
    for (int t = 0; t < ATTN_N_BWD_BUFS; t++)
        if (x->bytes[t]) GB_TRY(attn_dev_malloc(&x->buf[t], x->bytes[t]));
    for (int i = 0; i < 3; i++) {
        GB_TRY(attn_dev_malloc((void **)&x->g[i], x->elems[i] * 4));
        GB_TRY(attn_dev_malloc((void **)&x->r[i], x->elems[i] * 4));
        if (x->f.desc.nseq > 0) GB_TRY(attn_dev_malloc(&x->dense[i], x->elems[i] * 2));
    }
    return 0;
}

/* dO filled, O and LSE given, the gradients and workspace poisoned, the references computed */
static int fill(attn_bwd_problem *x, attn_reference *ref, cudaStream_t stream, char *err, size_t errlen) {
    const attn_problem_desc *d = &x->f.desc;
    GB_TRY(cudaMemsetAsync(x->buf[ATTN_G_DO], ATTN_POISON, x->bytes[ATTN_G_DO], stream));
    attn_tensor_view dov = attn_gpu_problem_view(&x->f, ATTN_T_O);
    if (d->nseq == 0) {
        dov.batch_stride = x->st[0].batch, dov.head_stride = x->st[0].head, dov.row_stride = x->st[0].row;
    }
    GB_TRY(attn_fill_normal_view(attn_bwd_problem_data(x, ATTN_G_DO), d->dtype, &dov, d->seed + DO_SEED_STEP, 1.0f,
                                 stream));
    if (!ref) { /* compute-sanitizer's launch: any initialized O and LSE, no reference kernels */
        const attn_tensor_view ov = attn_gpu_problem_view(&x->f, ATTN_T_O);
        GB_TRY(attn_fill_normal_view(x->f.p.o, d->dtype, &ov, d->seed + 2 * DO_SEED_STEP, 1.0f, stream));
        GB_TRY(cudaMemsetAsync(x->f.p.lse, 0, x->f.bytes[ATTN_T_LSE] - 2 * ATTN_GUARD_BYTES, stream));
        return attn_bwd_problem_poison(x, ATTN_BWD_OUTPUTS, stream, err, errlen);
    }
    if (attn_gpu_problem_references(&x->f, ref, stream, err, errlen) || give_forward_outputs(x, stream, err, errlen) ||
        attn_bwd_problem_poison(x, ATTN_BWD_OUTPUTS, stream, err, errlen))
        return 1;
    for (int i = 0; i < 3; i++) {
        GB_TRY(cudaMemsetAsync(x->g[i], 0xff, x->elems[i] * 4, stream));
        GB_TRY(cudaMemsetAsync(x->r[i], 0xff, x->elems[i] * 4, stream));
    }
    char why[512];
    if (attn_ref_backward(ref, &x->bp, ATTN_REF_GOLDEN, x->g[0], x->g[1], x->g[2], stream, why, sizeof why) ||
        attn_ref_backward(ref, &x->bp, ATTN_REF_LOWP, x->r[0], x->r[1], x->r[2], stream, why, sizeof why))
        return fail(err, errlen, "backward reference failed: %s", why);
    GB_TRY(cudaStreamSynchronize(stream));
    return 0;
}

int attn_bwd_problem_build(attn_bwd_problem *x, const attn_problem_desc *d, const attn_layout *layout,
                           const attn_kernel *k, int deterministic, attn_reference *ref, cudaStream_t stream,
                           char *err, size_t errlen) {
    memset(x, 0, sizeof *x);
    if (d->page_size > 0)
        return fail(err, errlen, "harness error: a paged problem has no backward in ABI version %d", ATTN_ABI_VERSION);
    attn_problem_desc fd = *d;
    fd.with_lse = 1; /* bwd reads the forward's LSE */
    if (attn_gpu_problem_build(&x->f, &fd, stream, err, errlen)) return 1;
    for (int t = 0; t < 4; t++) x->layout[t] = layout ? layout[t] : fd.layout[t == 0 ? 3 : t - 1];
    plan_strides(x);
    x->bp.deterministic = deterministic;
    bind(x, x);
    x->bp.workspace_bytes = k && k->bwd_workspace ? k->bwd_workspace(&x->bp) : 0;
    bind(x, x);
    char why[512];
    if (attn_bwd_problem_check(&x->bp, fd.nseq > 0 ? &x->f.host : NULL, why, sizeof why)) {
        fail(err, errlen, "harness error: %s", why);
        attn_bwd_problem_free(x);
        return 1;
    }
    if (allocate(x, err, errlen) || (bind(x, NULL), fill(x, ref, stream, err, errlen))) {
        attn_bwd_problem_free(x);
        return 1;
    }
    return 0;
}

int attn_bwd_problem_poison(attn_bwd_problem *x, unsigned bufs, cudaStream_t stream, char *err, size_t errlen) {
    for (int t = 0; t < ATTN_N_BWD_BUFS; t++)
        if ((bufs & ATTN_GRAD_BIT(t)) && x->buf[t])
            GB_TRY(cudaMemsetAsync(x->buf[t], ATTN_POISON, x->bytes[t], stream));
    return 0;
}

void attn_bwd_problem_free(attn_bwd_problem *x) {
    for (int t = 0; t < ATTN_N_BWD_BUFS; t++) attn_dev_free(x->buf[t]);
    for (int i = 0; i < 3; i++) attn_dev_free(x->g[i]), attn_dev_free(x->r[i]), attn_dev_free(x->dense[i]);
    attn_gpu_problem_free(&x->f);
    memset(x, 0, sizeof *x);
}

/* A dense problem of `heads` x `rows` x `dim` at o through the strides, no mask. */
static attn_fwd_params dense_view(const attn_fwd_params *p, void *o, int heads, int rows, int dim, int64_t bs,
                                  int64_t hs, int64_t rs) {
    attn_fwd_params v;
    attn_params_clear(&v, heads);
    v.dtype = p->dtype, v.batch = p->batch, v.seqlen_q = v.seqlen_k = rows, v.head_dim = v.head_dim_v = dim;
    v.o = o, v.o_batch_stride = bs, v.o_head_stride = hs, v.o_row_stride = rs;
    return v;
}

int attn_bwd_problem_judged(attn_bwd_problem *x, int i, attn_fwd_params *view, attn_match *stale,
                            cudaStream_t stream, char *err, size_t errlen) {
    const attn_gpu_problem *f = &x->f;
    const attn_fwd_params *p = &f->p;
    int heads, rows, dim;
    shape_of(x, i + 1, &heads, &rows, &dim);
    void *data = attn_bwd_problem_data(x, ATTN_G_DQ + i);
    const int64_t *s = i == 0 ? &x->bp.dq_batch_stride : i == 1 ? &x->bp.dk_batch_stride : &x->bp.dv_batch_stride;
    const int32_t *cu = i == 0 ? (f->desc.nseq > 0 ? f->cu_q : NULL) : f->cu_k;
    if (stale) stale->count = stale->first = 0;
    if (cu) { /* packed rows into the references' layout */
        GB_TRY(attn_unpack_rows(data, p->dtype, cu, p->batch, heads, rows, dim, s[2], s[1], x->dense[i], x->g[i],
                                x->r[i], stream));
        *view = dense_view(p, x->dense[i], heads, rows, dim, (int64_t)heads * rows * dim, (int64_t)rows * dim, dim);
    } else {
        *view = dense_view(p, data, heads, rows, dim, s[0], s[1], s[2]);
        if (i == 0 && f->desc.nseq == 0) { /* dQ of a dense problem: the mask says which rows see no key */
            view->causal = p->causal, view->window_left = p->window_left, view->window_right = p->window_right;
            view->seqlen_k = p->seqlen_k;
        }
        if (i > 0 && f->used) { /* a dense cache: rows past the used keys are 0 or untouched */
            attn_tensor_view v = {p->batch, heads, rows, dim, s[0], s[1], s[2]};
            attn_match m;
            GB_TRY(attn_clear_stale_rows(data, p->dtype, &v, f->used, &m, stream));
            if (stale) *stale = m;
        }
    }
    GB_TRY(cudaStreamSynchronize(stream));
    return 0;
}

int attn_bwd_grad_verdict(attn_bwd_problem *x, int i, const attn_tolerance *tol, attn_fwd_params *view,
                          attn_match *stale, attn_output_verdict *v, cudaStream_t stream, char *err, size_t errlen) {
    if (attn_bwd_problem_judged(x, i, view, stale, stream, err, errlen)) return 1;
    attn_output_stats st;
    cudaError_t e = attn_output_stats_gpu(view, x->g[i], x->r[i], &st, stream);
    if (e != cudaSuccess) return fail(err, errlen, "gathering the verdict's figures failed: %s", cudaGetErrorString(e));
    const attn_tolerance g = attn_tolerance_for_gradients(tol);
    attn_output_decide(&st, view->dtype, &g, v);
    return 0;
}

void attn_bwd_grad_where(const attn_fwd_params *v, size_t i, int *b, int *h, int *s, int *d) {
    *d = (int)(i % v->head_dim_v), i /= v->head_dim_v;
    *s = (int)(i % v->seqlen_q), i /= v->seqlen_q;
    *h = (int)(i % v->heads), *b = (int)(i / v->heads);
}
