/* One test problem built on the GPU (gpu_problem.h). A problem is planned on the host first
 * (strides, sizes, the sequences' layout, attn_fwd_params with stand-in pointers), checked by
 * attn_problem_check, and only then allocated, so that a malformed problem is reported as
 * such and never as a failed allocation. */
#include "gpu_problem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "device_memory.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 1;
}

#define GP_TRY(call)                                                                                 \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess)                                                                       \
            return fail(err, errlen, "CUDA error at %s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, \
                        cudaGetErrorName(e_), cudaGetErrorString(e_));                               \
    } while (0)

attn_problem_desc attn_problem_dense(attn_dtype dtype, int batch, int heads, int seqlen_q, int seqlen_k,
                                     int head_dim, int causal, const char *name) {
    attn_problem_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = dtype;
    d.batch = batch, d.heads = heads, d.heads_k = heads;
    d.seqlen_q = seqlen_q, d.seqlen_k = seqlen_k;
    d.head_dim = head_dim, d.head_dim_v = head_dim;
    d.causal = causal, d.window_left = -1, d.window_right = -1;
    for (int t = 0; t < 4; t++) d.layout[t] = ATTN_LAYOUT_BSHD;
    d.sigma_qk = 1.0f, d.sigma_v = 1.0f;
    d.with_lse = 1;
    d.seed = attn_seed_from_name(name);
    return d;
}

static int is_kv(attn_tensor_id t) { return t == ATTN_T_K || t == ATTN_T_V; }
static int heads_of(const attn_gpu_problem *x, attn_tensor_id t) { return is_kv(t) ? x->desc.heads_k : x->desc.heads; }
static int dim_of(const attn_gpu_problem *x, attn_tensor_id t) {
    return t == ATTN_T_V || t == ATTN_T_O ? x->desc.head_dim_v : x->desc.head_dim;
}

/* A packed batch whose sequences all have the same number of queries (at least one): Q, O
 * and the LSE are dense (rows b * S_q + i, the same memory), no cu_seqlens_q. */
int attn_problem_q_dense(const attn_problem_desc *d) {
    for (int b = 1; b < d->nseq; b++)
        if (d->lens_q[b] != d->lens_q[0]) return 0;
    return d->nseq > 0 && d->lens_q[0] > 0;
}

/* With Q dense and no pages, K and V are a dense cache (FlashAttention's KV-cache layout):
 * [sequence][capacity][heads_k][dim], every sequence's rows past its seqused_k filled with
 * random values too, so that reading past its length shows. */
int attn_problem_kv_cache(const attn_problem_desc *d) { return d->page_size == 0 && attn_problem_q_dense(d); }

void attn_problem_set_batch(attn_problem_desc *d, int nseq, int page_size, const int *lens_q, const int *lens_k) {
    d->nseq = nseq, d->page_size = page_size, d->spare_pages = 3, d->serving = 1;
    for (int b = 0; b < nseq && b < ATTN_MAX_SEQS; b++) d->lens_q[b] = lens_q[b], d->lens_k[b] = lens_k[b];
}

int attn_problem_seqused(const attn_problem_desc *d) {
    if (d->page_size == 0) return attn_problem_kv_cache(d);
    int same = d->serving && d->nseq > 0 && d->lens_k[0] > 0;
    for (int b = 1; b < d->nseq; b++) same &= d->lens_k[b] == d->lens_k[0];
    return !same;
}

attn_tensor_view attn_gpu_problem_view(const attn_gpu_problem *x, attn_tensor_id t) {
    attn_tensor_view v;
    memset(&v, 0, sizeof v);
    if (t > ATTN_T_O) return v;
    const attn_strides *st = &x->st[t];
    v.heads = heads_of(x, t), v.dim = dim_of(x, t);
    v.batch_stride = st->batch, v.head_stride = st->head, v.row_stride = st->row;
    if (x->desc.nseq > 0) /* rows of [row][heads][dim] */
        v.batch = 1, v.seq = (int)(st->extent / st->row);
    else
        v.batch = x->desc.batch, v.seq = is_kv(t) ? x->desc.seqlen_k : x->desc.seqlen_q;
    /* a broadcast tensor's view is its memory: one head, or one batch element */
    if (x->desc.nseq == 0 && x->desc.layout[t] == ATTN_LAYOUT_HEADS_BCAST) v.heads = 1;
    if (x->desc.nseq == 0 && x->desc.layout[t] == ATTN_LAYOUT_BATCH_BCAST) v.batch = 1;
    return v;
}

size_t attn_gpu_problem_lead(const attn_gpu_problem *x, attn_tensor_id t) {
    return ATTN_GUARD_BYTES + (t <= ATTN_T_O && (x->desc.shifted & ATTN_TENSOR_BIT(t)) ? 2 : 0);
}

void *attn_gpu_problem_data(const attn_gpu_problem *x, attn_tensor_id t) {
    return x->buf[t] ? (char *)x->buf[t] + attn_gpu_problem_lead(x, t) : NULL;
}

/* ------------------------------------------------------------------ planning ---- */

static void set_strides(attn_fwd_params *p, const attn_strides st[4]) {
    p->q_batch_stride = st[0].batch, p->q_head_stride = st[0].head, p->q_row_stride = st[0].row;
    p->k_batch_stride = st[1].batch, p->k_head_stride = st[1].head, p->k_row_stride = st[1].row;
    p->v_batch_stride = st[2].batch, p->v_head_stride = st[2].head, p->v_row_stride = st[2].row;
    p->o_batch_stride = st[3].batch, p->o_head_stride = st[3].head, p->o_row_stride = st[3].row;
}

/* The fields every problem shares; sizes and strides are the layout's. */
static void plan_common(attn_gpu_problem *x) {
    const attn_problem_desc *d = &x->desc;
    attn_fwd_params *p = &x->p;
    attn_params_clear(p, d->heads);
    p->dtype = d->dtype;
    p->head_dim = d->head_dim, p->head_dim_v = d->head_dim_v, p->heads_k = d->heads_k;
    p->causal = d->causal, p->window_left = d->window_left, p->window_right = d->window_right;
    p->softcap = d->softcap, p->softmax_scale = d->softmax_scale;
}

static void plan_dense(attn_gpu_problem *x) {
    const attn_problem_desc *d = &x->desc;
    for (int t = 0; t < 4; t++) {
        attn_tensor_view v = attn_gpu_problem_view(x, (attn_tensor_id)t);
        x->st[t] = attn_make_strides(d->layout[t], v.batch, v.heads, v.seq, v.dim);
    }
    x->rows = (size_t)d->batch * d->heads * d->seqlen_q;
    x->o_elems = x->rows * d->head_dim_v;
    x->bytes[ATTN_T_LSE] = x->rows * 4 + 2 * ATTN_GUARD_BYTES;
    plan_common(x);
    x->p.batch = d->batch, x->p.seqlen_q = d->seqlen_q, x->p.seqlen_k = d->seqlen_k;
    set_strides(&x->p, x->st);
}

static attn_strides rows_of(int64_t rows, int heads, int dim) {
    attn_strides st = {0, dim, (int64_t)heads * dim, rows * heads * dim};
    return st;
}

/* Rows of [row][heads][dim]: Q and O over all queries; K and V over the packed keys, the
 * pool of pages or the dense cache. The references' layout is over the longest lengths. */
static void plan_packed(attn_gpu_problem *x) {
    const attn_problem_desc *d = &x->desc;
    const attn_seqs *sq = &x->seqs;
    const int H = d->heads, HK = d->heads_k, D = d->head_dim, DV = d->head_dim_v, paged = d->page_size > 0;
    const int cache = attn_problem_kv_cache(d);
    const int64_t capacity = (int64_t)sq->max_k + ATTN_CACHE_SLACK;
    const int64_t kv_rows = paged ? (int64_t)sq->num_pages * d->page_size : cache ? d->nseq * capacity : sq->total_k;
    const int64_t maxq = sq->max_q > 0 ? sq->max_q : 1;
    const int64_t rq = sq->total_q > 0 ? sq->total_q : 1, rk = kv_rows > 0 ? kv_rows : 1;
    x->st[ATTN_T_Q] = rows_of(rq, H, D), x->st[ATTN_T_O] = rows_of(rq, H, DV);
    x->st[ATTN_T_K] = rows_of(rk, HK, D), x->st[ATTN_T_V] = rows_of(rk, HK, DV);
    x->rows = (size_t)d->nseq * H * maxq;
    x->o_elems = x->rows * DV;
    x->bytes[ATTN_T_LSE] = (size_t)rq * H * 4 + 2 * ATTN_GUARD_BYTES;
    plan_common(x);
    attn_fwd_params *p = &x->p;
    p->batch = d->nseq, p->seqlen_q = (int)maxq;
    p->seqlen_k = sq->max_k > 0 ? sq->max_k : 1; /* paged too: the stored keys, not the table's width */
    set_strides(p, x->st);
    if (attn_problem_q_dense(d)) /* rows b * S_q + i: the same memory */
        p->q_batch_stride = maxq * p->q_row_stride, p->o_batch_stride = maxq * p->o_row_stride;
    if (paged) {
        p->block_table_stride = sq->block_table_stride, p->page_size = d->page_size, p->num_pages = sq->num_pages;
        p->k_batch_stride = (int64_t)d->page_size * HK * D, p->v_batch_stride = (int64_t)d->page_size * HK * DV;
    } else if (cache) {
        p->seqlen_k = (int)capacity;
        p->k_batch_stride = capacity * HK * D, p->v_batch_stride = capacity * HK * DV;
    }
    x->host.cu_seqlens_q = attn_problem_q_dense(d) ? NULL : sq->cu_seqlens_q;
    x->host.cu_seqlens_k = paged || cache ? NULL : sq->cu_seqlens_k;
    x->host.block_table = sq->block_table;
    x->host.seqused_k = attn_problem_seqused(d) ? (const int32_t *)d->lens_k : NULL;
    p->total_q = x->host.cu_seqlens_q ? x->host.cu_seqlens_q[d->nseq] : 0;
    p->total_k = x->host.cu_seqlens_k ? x->host.cu_seqlens_k[d->nseq] : 0;
}

/* Points p at the buffers, or, before they exist, at `stand_in` (attn_problem_check only
 * asks whether a pointer is set, never reads through it). */
static void bind(attn_gpu_problem *x, void *stand_in) {
    attn_fwd_params *p = &x->p;
    void *ptr[ATTN_N_TENSORS];
    for (int t = 0; t < ATTN_N_TENSORS; t++) ptr[t] = x->buf[t] ? attn_gpu_problem_data(x, (attn_tensor_id)t) : stand_in;
    p->q = ptr[ATTN_T_Q], p->k = ptr[ATTN_T_K], p->v = ptr[ATTN_T_V], p->o = ptr[ATTN_T_O];
    p->lse = x->desc.with_lse ? ptr[ATTN_T_LSE] : NULL;
    if (x->desc.nseq == 0) return;
    const attn_problem_host *h = &x->host;
    p->cu_seqlens_q = h->cu_seqlens_q ? (x->cu_q ? x->cu_q : stand_in) : NULL;
    p->cu_seqlens_k = h->cu_seqlens_k ? (x->cu_k ? x->cu_k : stand_in) : NULL;
    p->block_table = h->block_table ? (x->table ? x->table : stand_in) : NULL;
    p->seqused_k = h->seqused_k ? (x->used ? x->used : stand_in) : NULL;
}

/* The description's "off" values made explicit, and what cannot be planned at all. */
static int normalize(attn_problem_desc *d, char *err, size_t errlen) {
    if (d->heads_k == 0) d->heads_k = d->heads;
    if (d->head_dim_v == 0) d->head_dim_v = d->head_dim;
    if (d->softmax_scale == 0 && d->head_dim > 0) d->softmax_scale = (float)(1.0 / sqrt((double)d->head_dim));
    if (d->nseq < 0 || d->nseq > ATTN_MAX_SEQS)
        return fail(err, errlen, "nseq %d is outside [0, %d]", d->nseq, ATTN_MAX_SEQS);
    if (d->page_size < 0 || (d->page_size > 0 && d->nseq == 0))
        return fail(err, errlen, "page_size %d needs a packed batch (nseq %d)", d->page_size, d->nseq);
    if (d->nseq == 0 && (d->batch < 1 || d->heads < 1 || d->heads_k < 1 || d->seqlen_q < 1 || d->seqlen_k < 1 ||
                         d->head_dim < 1 || d->head_dim_v < 1))
        return fail(err, errlen, "a dense problem needs batch, heads, heads_k, seqlen_q, seqlen_k, head_dim and "
                                 "head_dim_v >= 1 (got %d, %d, %d, %d, %d, %d, %d)",
                    d->batch, d->heads, d->heads_k, d->seqlen_q, d->seqlen_k, d->head_dim, d->head_dim_v);
    return 0;
}

/* ---------------------------------------------------------------- allocation ---- */

/* n int32 from the host into a new device array */
static int upload_i32(int32_t **dst, const int32_t *src, size_t n, char *err, size_t errlen) {
    if (!src) return 0;
    GP_TRY(attn_dev_malloc((void **)dst, n * sizeof(int32_t)));
    GP_TRY(cudaMemcpy(*dst, src, n * sizeof(int32_t), cudaMemcpyHostToDevice));
    return 0;
}

static int allocate(attn_gpu_problem *x, char *err, size_t errlen) {
    for (int t = 0; t < 4; t++) /* as much after the data as before it (the guard checks' rule) */
        x->bytes[t] = 2 * attn_gpu_problem_lead(x, (attn_tensor_id)t) + (size_t)x->st[t].extent * 2;
    for (int t = 0; t < ATTN_N_TENSORS; t++) GP_TRY(attn_dev_malloc(&x->buf[t], x->bytes[t]));
    const int nseq = x->desc.nseq;
    if (nseq == 0) return 0;
    const attn_problem_host *h = &x->host;
    /* cu_seqlens_q always: unpacking O and the LSE reads it even when Q is dense */
    if (upload_i32(&x->cu_q, x->seqs.cu_seqlens_q, (size_t)nseq + 1, err, errlen) ||
        upload_i32(&x->cu_k, h->cu_seqlens_k, (size_t)nseq + 1, err, errlen) ||
        upload_i32(&x->table, h->block_table, (size_t)nseq * x->seqs.block_table_stride, err, errlen) ||
        upload_i32(&x->used, h->seqused_k, (size_t)nseq, err, errlen))
        return 1;
    GP_TRY(attn_dev_malloc(&x->o_dense, x->o_elems * 2));
    GP_TRY(attn_dev_malloc((void **)&x->lse_dense, x->rows * 4));
    return 0;
}

int attn_gpu_problem_plan(attn_gpu_problem *x, const attn_problem_desc *d, char *err, size_t errlen) {
    memset(x, 0, sizeof *x);
    x->desc = *d;
    if (normalize(&x->desc, err, errlen)) return 1;
    const attn_problem_desc *dd = &x->desc;
    if (dd->nseq > 0) {
        if (attn_seqs_make(&x->seqs, dd->nseq, dd->lens_q, dd->lens_k, dd->page_size, dd->spare_pages, dd->seed, err,
                           errlen) ||
            (dd->serving && dd->page_size > 0 && attn_seqs_serving(&x->seqs, dd->seed, err, errlen))) {
            attn_seqs_free(&x->seqs);
            return 1;
        }
        plan_packed(x);
    } else {
        plan_dense(x);
    }
    bind(x, x);
    char why[512];
    if (attn_problem_check(&x->p, dd->nseq > 0 ? &x->host : NULL, why, sizeof why)) {
        fail(err, errlen, "harness error: %s", why);
        attn_seqs_free(&x->seqs);
        return 1;
    }
    return 0;
}

int attn_gpu_problem_build(attn_gpu_problem *x, const attn_problem_desc *d, cudaStream_t stream, char *err,
                           size_t errlen) {
    if (attn_gpu_problem_plan(x, d, err, errlen)) return 1;
    const attn_problem_desc *dd = &x->desc;
    if (allocate(x, err, errlen)) {
        attn_gpu_problem_free(x);
        return 1;
    }
    bind(x, NULL);
    if (attn_gpu_problem_fill(x, dd->seed, stream, err, errlen) ||
        attn_gpu_problem_poison_outputs(x, stream, err, errlen)) {
        attn_gpu_problem_free(x);
        return 1;
    }
    return 0;
}

void attn_gpu_problem_free(attn_gpu_problem *x) {
    for (int t = 0; t < ATTN_N_TENSORS; t++) attn_dev_free(x->buf[t]);
    void *dev[] = {x->g, x->r, x->lg, x->cu_q, x->cu_k, x->table, x->used, x->o_dense, x->lse_dense};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) attn_dev_free(dev[i]);
    attn_seqs_free(&x->seqs);
    memset(x, 0, sizeof *x);
}

/* ------------------------------------------------------------ values and poison ---- */

int attn_gpu_problem_poison(attn_gpu_problem *x, unsigned tensors, cudaStream_t stream, char *err, size_t errlen) {
    for (int t = 0; t < ATTN_N_TENSORS; t++)
        if (tensors & ATTN_TENSOR_BIT(t)) GP_TRY(cudaMemsetAsync(x->buf[t], ATTN_POISON, x->bytes[t], stream));
    return 0;
}

int attn_gpu_problem_poison_outputs(attn_gpu_problem *x, cudaStream_t stream, char *err, size_t errlen) {
    return attn_gpu_problem_poison(x, ATTN_FWD_OUTPUTS, stream, err, errlen);
}

int attn_gpu_problem_fill(attn_gpu_problem *x, uint64_t seed, cudaStream_t stream, char *err, size_t errlen) {
    x->desc.seed = seed;
    if (attn_gpu_problem_poison(x, ATTN_FWD_INPUTS, stream, err, errlen)) return 1;
    for (int t = ATTN_T_Q; t <= ATTN_T_V; t++) {
        const attn_tensor_view v = attn_gpu_problem_view(x, (attn_tensor_id)t);
        const float sigma = t == ATTN_T_V ? x->desc.sigma_v : x->desc.sigma_qk;
        GP_TRY(attn_fill_normal_view(attn_gpu_problem_data(x, (attn_tensor_id)t), x->desc.dtype, &v,
                                     seed + (uint64_t)t * ATTN_TENSOR_SEED_STEP, sigma, stream));
    }
    return 0;
}

int attn_gpu_problem_references(attn_gpu_problem *x, attn_reference *ref, cudaStream_t stream, char *err,
                                size_t errlen) {
    if (!x->g) GP_TRY(attn_dev_malloc((void **)&x->g, x->o_elems * 4));
    if (!x->r) GP_TRY(attn_dev_malloc((void **)&x->r, x->o_elems * 4));
    if (!x->lg) GP_TRY(attn_dev_malloc((void **)&x->lg, x->rows * 4));
    /* NaN until the reference writes them: a reference gap shows as NaN, and compute-sanitizer's
     * initcheck, which sanitize.sh filters to the kernel under test and so never sees the
     * reference's own kernels write, finds these buffers initialized when they are read */
    GP_TRY(cudaMemsetAsync(x->g, 0xff, x->o_elems * 4, stream));
    GP_TRY(cudaMemsetAsync(x->r, 0xff, x->o_elems * 4, stream));
    GP_TRY(cudaMemsetAsync(x->lg, 0xff, x->rows * 4, stream));
    char why[512];
    if (attn_ref_forward(ref, &x->p, ATTN_REF_GOLDEN, x->g, x->lg, stream, why, sizeof why) ||
        attn_ref_forward(ref, &x->p, ATTN_REF_LOWP, x->r, NULL, stream, why, sizeof why))
        return fail(err, errlen, "reference failed: %s", why);
    GP_TRY(cudaStreamSynchronize(stream));
    return 0;
}

int attn_gpu_problem_unpack(attn_gpu_problem *x, cudaStream_t stream, char *err, size_t errlen) {
    const attn_problem_desc *d = &x->desc;
    const attn_fwd_params *p = &x->p;
    if (d->nseq == 0) return fail(err, errlen, "unpacking a dense problem");
    GP_TRY(attn_unpack_rows(p->o, d->dtype, x->cu_q, d->nseq, d->heads, p->seqlen_q, d->head_dim_v, p->o_row_stride,
                            p->o_head_stride, x->o_dense, x->g, x->r, stream));
    if (p->cu_seqlens_q) /* else the LSE is dense already */
        GP_TRY(attn_unpack_lse(p->lse, x->cu_q, d->nseq, d->heads, p->seqlen_q, x->lse_dense, x->lg, stream));
    else
        GP_TRY(cudaMemcpyAsync(x->lse_dense, p->lse, x->rows * 4, cudaMemcpyDeviceToDevice, stream));
    return 0;
}

attn_fwd_params attn_gpu_problem_unpacked(const attn_gpu_problem *x) {
    const attn_problem_desc *d = &x->desc;
    const int maxq = x->p.seqlen_q, DV = d->head_dim_v;
    attn_fwd_params view;
    attn_params_clear(&view, d->heads);
    view.dtype = d->dtype, view.batch = d->nseq, view.seqlen_q = maxq, view.seqlen_k = 1;
    view.head_dim = d->head_dim, view.head_dim_v = DV, view.o = x->o_dense, view.lse = x->lse_dense;
    view.o_row_stride = DV, view.o_head_stride = (int64_t)maxq * DV, view.o_batch_stride = (int64_t)d->heads * maxq * DV;
    return view;
}

/* ------------------------------------------------------------------ snapshots ---- */

int attn_gpu_problem_snapshot(const attn_gpu_problem *x, unsigned tensors, attn_gpu_snapshot *s,
                              cudaStream_t stream, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    for (int t = 0; t < ATTN_N_TENSORS; t++) {
        if (!(tensors & ATTN_TENSOR_BIT(t))) continue;
        s->bytes[t] = x->bytes[t];
        GP_TRY(attn_dev_malloc(&s->buf[t], s->bytes[t]));
        GP_TRY(cudaMemcpyAsync(s->buf[t], x->buf[t], s->bytes[t], cudaMemcpyDeviceToDevice, stream));
    }
    return 0;
}

int attn_gpu_problem_restore(attn_gpu_problem *x, const attn_gpu_snapshot *s, cudaStream_t stream, char *err,
                             size_t errlen) {
    for (int t = 0; t < ATTN_N_TENSORS; t++)
        if (s->buf[t]) GP_TRY(cudaMemcpyAsync(x->buf[t], s->buf[t], s->bytes[t], cudaMemcpyDeviceToDevice, stream));
    return 0;
}

void attn_gpu_snapshot_free(attn_gpu_snapshot *s) {
    for (int t = 0; t < ATTN_N_TENSORS; t++) attn_dev_free(s->buf[t]);
    memset(s, 0, sizeof *s);
}

/* ----------------------------------------------------------- inputs unchanged ---- */

void attn_i32_diff(const int32_t *was, const int32_t *now, size_t n, attn_input_change *ch) {
    ch->count = 0, ch->total = n, ch->first = 0, ch->was = ch->now = 0;
    for (size_t i = 0; i < n; i++)
        if (was[i] != now[i]) {
            if (!ch->count) ch->first = i, ch->was = (uint32_t)was[i], ch->now = (uint32_t)now[i];
            ch->count++;
        }
}

/* Q, K or V against the fill of x->desc.seed (attn_gpu_problem_fill's seeds and sigmas). */
static int tensor_changes(const attn_gpu_problem *x, attn_tensor_id t, attn_input_change *ch, cudaStream_t stream,
                          char *err, size_t errlen) {
    static const char *const names[] = {[ATTN_T_Q] = "Q", [ATTN_T_K] = "K", [ATTN_T_V] = "V"};
    const attn_tensor_view v = attn_gpu_problem_view(x, t);
    const float sigma = t == ATTN_T_V ? x->desc.sigma_v : x->desc.sigma_qk;
    attn_fill_diff d;
    const size_t lead = attn_gpu_problem_lead(x, t);
    GP_TRY(attn_diff_fill_view(x->buf[t], x->bytes[t], lead, x->desc.dtype, &v,
                               x->desc.seed + (uint64_t)t * ATTN_TENSOR_SEED_STEP, sigma, ATTN_POISON, &d, stream));
    memset(ch, 0, sizeof *ch);
    ch->name = names[t], ch->tensor = t;
    ch->count = d.count, ch->first = d.first, ch->was = d.filled;
    ch->total = (unsigned long long)v.batch * v.heads * v.seq * v.dim;
    if (d.count) ch->now = attn_peek_view_bits(attn_gpu_problem_data(x, t), &v, d.first);
    ch->guard_count = d.guard_count;
    ch->guard_first = (long long)d.guard_first - (long long)lead;
    return 0;
}

/* A layout array read back and compared with the host's copy it was uploaded from. */
static int array_changes(const char *name, const int32_t *dev, const int32_t *host, size_t n, attn_input_change *ch,
                         cudaStream_t stream, char *err, size_t errlen) {
    int32_t *now = malloc(n * sizeof *now);
    if (!now) return fail(err, errlen, "no host memory to read %s back (%zu entries)", name, n);
    cudaError_t e = cudaMemcpyAsync(now, dev, n * sizeof *now, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    memset(ch, 0, sizeof *ch);
    ch->name = name, ch->tensor = -1;
    if (e == cudaSuccess) attn_i32_diff(host, now, n, ch);
    free(now);
    if (e != cudaSuccess) return fail(err, errlen, "reading %s back failed: %s", name, cudaGetErrorString(e));
    return 0;
}

int attn_gpu_problem_input_changes(const attn_gpu_problem *x, attn_input_change *out, cudaStream_t stream, char *err,
                                   size_t errlen) {
    const attn_fwd_params *p = &x->p;
    const size_t nseq = (size_t)x->desc.nseq;
    const struct {
        const char *name;
        const int32_t *dev, *host;
        size_t n;
    } arrays[] = {
        {"cu_seqlens_q", p->cu_seqlens_q, x->host.cu_seqlens_q, nseq + 1},
        {"cu_seqlens_k", p->cu_seqlens_k, x->host.cu_seqlens_k, nseq + 1},
        {"block_table", p->block_table, x->host.block_table, nseq * (size_t)x->seqs.block_table_stride},
        {"seqused_k", p->seqused_k, x->host.seqused_k, nseq},
    };
    int n = 0;
    for (int t = ATTN_T_Q; t <= ATTN_T_V; t++) {
        if (tensor_changes(x, (attn_tensor_id)t, &out[n], stream, err, errlen)) return -1;
        n += out[n].count || out[n].guard_count;
    }
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++) {
        if (!arrays[a].dev || !arrays[a].host || !arrays[a].n) continue; /* not given to fwd */
        if (array_changes(arrays[a].name, arrays[a].dev, arrays[a].host, arrays[a].n, &out[n], stream, err, errlen))
            return -1;
        n += out[n].count > 0;
    }
    return n;
}

/* The sequence b with cu[b] <= row < cu[b + 1], or -1. */
static int sequence_of(const int32_t *cu, int nseq, int64_t row) {
    for (int b = 0; b < nseq; b++)
        if (row >= cu[b] && row < cu[b + 1]) return b;
    return -1;
}

/* Appends to out[len] from *at, never past its end. */
static void append(char *out, size_t len, size_t *at, const char *fmt, ...) {
    if (*at >= len) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(out + *at, len - *at, fmt, ap);
    va_end(ap);
    if (n > 0) *at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}

/* The block-table entry that maps `page` within its sequence's filled pages, or -1. */
static int64_t entry_of(const attn_problem_desc *d, const attn_seqs *sq, int64_t page) {
    for (int64_t at = 0; at < (int64_t)d->nseq * sq->block_table_stride; at++) {
        const int64_t b = at / sq->block_table_stride, filled = (d->lens_k[b] + d->page_size - 1) / d->page_size;
        if (sq->block_table[at] == page && at % sq->block_table_stride < filled) return at;
    }
    return -1;
}

/* Row `row` of a packed Q, K or V (rows of [row][heads][dim]) as its sequence and position. */
static void packed_row_where(const attn_gpu_problem *x, attn_tensor_id t, int64_t row, char *out, size_t len) {
    const attn_problem_desc *d = &x->desc;
    const attn_seqs *sq = &x->seqs;
    int64_t b = -1, s = 0;
    size_t at = 0;
    if (t == ATTN_T_Q && attn_problem_q_dense(d)) {
        b = row / sq->max_q, s = row % sq->max_q;
    } else if (t == ATTN_T_Q || (d->page_size == 0 && !attn_problem_kv_cache(d))) {
        const int32_t *cu = t == ATTN_T_Q ? sq->cu_seqlens_q : sq->cu_seqlens_k;
        if ((b = sequence_of(cu, d->nseq, row)) >= 0) s = row - cu[b];
    } else if (d->page_size == 0) { /* the dense cache */
        const int64_t capacity = (int64_t)sq->max_k + ATTN_CACHE_SLACK;
        b = row / capacity, s = row % capacity;
    } else {
        const int64_t page = row / d->page_size, slot = row % d->page_size, e = entry_of(d, sq, page);
        append(out, len, &at, "page %lld row %lld", (long long)page, (long long)slot);
        if (e < 0) {
            append(out, len, &at, " (a spare page: in no sequence's filled pages)");
            return;
        }
        b = e / sq->block_table_stride, s = e % sq->block_table_stride * d->page_size + slot;
    }
    if (!at) append(out, len, &at, "row %lld", (long long)row);
    if (b < 0)
        append(out, len, &at, " (in no sequence)");
    else
        append(out, len, &at, " = b=%lld s=%lld%s", (long long)b, (long long)s,
               t != ATTN_T_Q && s >= d->lens_k[b] ? " (past its seqused_k)" : "");
}

/* Logical element i of Q, K or V (the view's BHSD order) in the tensor's own coordinates. */
static void input_where(const attn_gpu_problem *x, attn_tensor_id t, unsigned long long i, char *out, size_t len) {
    const attn_tensor_view v = attn_gpu_problem_view(x, t);
    const unsigned long long e = i % v.dim, s = i / v.dim % v.seq, h = i / v.dim / v.seq % v.heads,
                             b = i / v.dim / v.seq / v.heads;
    if (x->desc.nseq == 0) {
        snprintf(out, len, "(b=%llu, h=%llu, s=%llu, d=%llu)", b, h, s, e);
        return;
    }
    char row[160];
    packed_row_where(x, t, (int64_t)s, row, sizeof row);
    snprintf(out, len, "(%s, h=%llu, d=%llu)", row, h, e);
}

static float bits_value(attn_dtype dtype, uint32_t bits) {
    return dtype == ATTN_BF16 ? attn_bf16_to_f32((uint16_t)bits) : attn_f16_to_f32((uint16_t)bits);
}

void attn_input_change_describe(const attn_gpu_problem *x, const attn_input_change *ch, char *out, size_t len) {
    size_t at = 0;
    out[0] = 0;
    append(out, len, &at, "input %s modified by fwd: ", ch->name);
    if (ch->tensor < 0) {
        const unsigned long long stride = (unsigned)x->seqs.block_table_stride;
        append(out, len, &at, "%llu of %llu entries differ, the first at %s", ch->count, ch->total, ch->name);
        if (!strcmp(ch->name, "block_table") && stride > 0)
            append(out, len, &at, "[%llu][%llu]", ch->first / stride, ch->first % stride);
        else
            append(out, len, &at, "[%llu]", ch->first);
        append(out, len, &at, ": %d -> %d", (int32_t)ch->was, (int32_t)ch->now);
        return;
    }
    const attn_tensor_id t = (attn_tensor_id)ch->tensor;
    if (ch->count) {
        char where[256];
        input_where(x, t, ch->first, where, sizeof where);
        append(out, len, &at, "%llu of %llu elements differ, the first at %s: bits 0x%04x -> 0x%04x (%.6g -> %.6g)",
               ch->count, ch->total, where, (unsigned)ch->was, (unsigned)ch->now, bits_value(x->desc.dtype, ch->was),
               bits_value(x->desc.dtype, ch->now));
        if (ch->guard_count) append(out, len, &at, "; and ");
    }
    if (!ch->guard_count) return;
    const size_t lead = attn_gpu_problem_lead(x, t);
    const long long data = x->bytes[t] > 2 * lead ? (long long)(x->bytes[t] - 2 * lead) : 0;
    append(out, len, &at, "%llu bytes of its %zu-byte guard bands written, the first at ", ch->guard_count, lead);
    if (ch->guard_first < 0)
        append(out, len, &at, "%s-%lld", ch->name, -ch->guard_first);
    else
        append(out, len, &at, "end+%lld", ch->guard_first - data);
}
