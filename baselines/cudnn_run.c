/* Running a cuDNN baseline plan: the problem checked against the plan's, the run's pointers
 * bound (the plan's buffers, or the run's own: sdpa_run_begin), the variant pack kept while
 * they stay the same, then the lens kernel, cuDNN, the zero fills and LSE copies of sliced plans, and
 * the fix kernel, all on the caller's stream. */
#include "cudnn_sdpa_internal.h"

#include <string.h>

/* Everything a plan depends on; the length tensors and pointers are bound per run. */
int sdpa_same_problem(const attn_fwd_params *a, const attn_fwd_params *b) {
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
int sdpa_update_vpack(attn_cudnn_plan *pl, void *const *ptrs, char *why, size_t whylen) {
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
        sdpa_msg(c, why, whylen, st, "cudnnBackendCreateDescriptor", "variant pack", NULL);
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
        sdpa_msg(c, why, whylen, st, "cudnnBackendSetAttribute", "variant pack", attr);
        c->f.DestroyDescriptor(vp);
        return -1;
    }
    if ((st = c->f.Finalize(vp))) {
        sdpa_msg(c, why, whylen, st, "cudnnBackendFinalize", "variant pack", NULL);
        c->f.DestroyDescriptor(vp);
        return -1;
    }
    pl->vpack = vp;
    memcpy(pl->vpack_ptrs, ptrs, (size_t)pl->n_uids * sizeof *ptrs);
    pl->vpack_workspace = pl->workspace;
    pl->vpack_scale = pl->scale;
    return 0;
}

/* Whether the plan's runs write buffers of the plan's own: the workspace (a backward plan's
 * own, or any forward's), the statistics scratch, the lengths and offsets of the lens kernel. */
static int writes_own_buffers(const attn_cudnn_plan *pl) {
    return pl->stats || pl->run_lens || pl->own_ws || (!pl->bwd && pl->workspace_size > 0);
}

/* *cap: whether stream is capturing a graph */
static cudaError_t capture_state(cudaStream_t stream, int *cap) {
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing(stream, &st);
    *cap = st != cudaStreamCaptureStatusNone;
    return e;
}

void sdpa_make_pool(attn_cudnn *c) {
    int dev = 0;
    if (c->pool || cudaGetDevice(&dev) != cudaSuccess) return;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = NULL;
    uint64_t keep = UINT64_MAX; /* freed blocks stay for the next run */
    int no = 0;                 /* never a wait the pool adds itself to reuse a block */
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no) != cudaSuccess) {
        if (pool) cudaMemPoolDestroy(pool);
        cudaGetLastError();
        return;
    }
    c->pool = pool;
}

static size_t aligned(size_t n) { return (n + 255) / 256 * 256; }

/* This run's own workspace, statistics, lengths and offsets (those the plan's runs write) in
 * one block from c->pool on `stream`, in place of the plan's until sdpa_run_end; the lengths
 * and offsets start as the plan's (the lens kernel rewrites the per-run ones). */
static int take_run_buffers(attn_cudnn_plan *pl, cudaStream_t stream, char *why, size_t whylen) {
    const size_t ws = !pl->bwd ? (size_t)pl->workspace_size : pl->own_ws ? attn_cudnn_bwd_plan_workspace(pl) : 0;
    const size_t st = pl->stats ? pl->stats_bytes : 0;
    const size_t ln = pl->run_lens && pl->lens ? pl->lens_bytes : 0, of = pl->run_lens && pl->offs ? pl->offs_bytes : 0;
    const size_t at_st = aligned(ws), at_ln = at_st + aligned(st), at_of = at_ln + aligned(ln), total = at_of + of;
    if (!total) return 0;
    char *buf = NULL;
    cudaError_t e = cudaMallocFromPoolAsync((void **)&buf, total, pl->c->pool, stream);
    if (e == cudaSuccess && ln) e = cudaMemcpyAsync(buf + at_ln, pl->lens, ln, cudaMemcpyDeviceToDevice, stream);
    if (e == cudaSuccess && of) e = cudaMemcpyAsync(buf + at_of, pl->offs, of, cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) {
        if (buf) cudaFreeAsync(buf, stream);
        put(why, whylen, "the run's own buffers (%zu bytes from the plan's pool): %s", total, cudaGetErrorString(e));
        return -1;
    }
    void *const kept[5] = {pl->workspace, pl->own_ws, pl->stats, pl->lens, pl->offs};
    memcpy(pl->kept, kept, sizeof kept);
    if (ws && !pl->bwd) pl->workspace = buf;
    if (ws && pl->bwd) pl->own_ws = buf;
    if (st) pl->stats = (float *)(buf + at_st);
    if (ln) pl->lens = (int32_t *)(buf + at_ln);
    if (of) pl->offs = (int64_t *)(buf + at_of);
    pl->run_buf = buf;
    return 0;
}

int sdpa_run_begin(attn_cudnn_plan *pl, cudaStream_t stream, char *why, size_t whylen) {
    if (!writes_own_buffers(pl)) return 0;
    if (!pl->last_run) { /* the plan's first run: nothing to wait for */
        const cudaError_t e = cudaEventCreateWithFlags(&pl->last_run, cudaEventDisableTiming);
        if (e != cudaSuccess) put(why, whylen, "cudaEventCreateWithFlags: %s", cudaGetErrorString(e));
        return e == cudaSuccess ? 0 : -1;
    }
    int cap = 0;
    cudaError_t e = capture_state(stream, &cap);
    /* the same stream outside capture: already in order */
    if (e != cudaSuccess || (!cap && stream == pl->last_stream)) goto out;
    if (!cap && pl->c->pool && cudaEventQuery(pl->last_run) == cudaErrorNotReady)
        return take_run_buffers(pl, stream, why, whylen);
    e = cudaStreamWaitEvent(stream, pl->last_run, cap ? cudaEventWaitExternal : cudaEventWaitDefault);
out:
    if (e != cudaSuccess) {
        put(why, whylen, "waiting for the plan's last run (cudaStreamWaitEvent): %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int sdpa_run_end(attn_cudnn_plan *pl, cudaStream_t stream, int failed, char *why, size_t whylen) {
    if (pl->run_buf) { /* the plan's buffers back; this run's given back after it */
        pl->workspace = pl->kept[0], pl->own_ws = pl->kept[1], pl->stats = pl->kept[2];
        pl->lens = pl->kept[3], pl->offs = pl->kept[4];
        const cudaError_t e = cudaFreeAsync(pl->run_buf, stream);
        pl->run_buf = NULL;
        if (e != cudaSuccess && !failed) put(why, whylen, "cudaFreeAsync (the run's own buffers): %s", cudaGetErrorString(e));
        return e != cudaSuccess;
    }
    if (failed || !pl->last_run) return 0;
    int cap = 0;
    cudaError_t e = capture_state(stream, &cap);
    if (e == cudaSuccess)
        e = cudaEventRecordWithFlags(pl->last_run, stream, cap ? cudaEventRecordExternal : cudaEventRecordDefault);
    if (e != cudaSuccess) {
        put(why, whylen, "recording the plan's run (cudaEventRecordWithFlags): %s", cudaGetErrorString(e));
        return -1;
    }
    pl->last_stream = stream;
    return 0;
}

static int run_plan(attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream, char *why, size_t whylen) {
    attn_cudnn *c = pl->c;
    if (pl->bwd) {
        put(why, whylen, "attn_cudnn_plan_run: a backward plan (run it with attn_cudnn_bwd_plan_run)");
        return -1;
    }
    if (!sdpa_same_problem(&pl->shape, p)) {
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
    if (sdpa_update_vpack(pl, ptrs, why, whylen)) return -1;

    cudnn_status st = c->f.SetStream(c->handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, why, whylen, st, "cudnnSetStream", "handle", NULL);
        return -1;
    }
    /* before cuDNN, on the same stream: the lengths and offsets it reads */
    cudaError_t ce = pl->run_lens ? sdpa_launch_lens(pl, p, stream) : cudaSuccess;
    if (ce != cudaSuccess) {
        put(why, whylen, "launching the lens kernel: %s", cudaGetErrorString(ce));
        return -1;
    }
    st = c->f.Execute(c->handle, pl->exec_plan, pl->vpack);
    if (st != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, why, whylen, st, "cudnnBackendExecute", pl->kind, NULL);
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
    ce = pl->run_fix ? sdpa_launch_fix(pl, p, stream) : cudaSuccess;
    if (ce != cudaSuccess) {
        put(why, whylen, "launching the fix kernel: %s", cudaGetErrorString(ce));
        return -1;
    }
    return 0;
}

int attn_cudnn_plan_run(attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream,
                        char *why, size_t whylen) {
    if (!pl || !p) {
        put(why, whylen, "attn_cudnn_plan_run: NULL argument");
        return -1;
    }
    if (sdpa_run_begin(pl, stream, why, whylen)) return -1;
    const int failed = run_plan(pl, p, stream, why, whylen) != 0;
    return sdpa_run_end(pl, stream, failed, why, whylen) || failed ? -1 : 0;
}
