/* The cuDNN baseline's plans: the search for a graph form cuDNN accepts (in order of
 * preference, with cudnn-frontend's known refusals), the plan's device buffers, options from
 * the arguments and the environment, and the public create/destroy/info calls (cudnn_sdpa.h). */
#include "cudnn_sdpa_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- plans ------------------------------------------------------------------------------ */

void attn_cudnn_plan_destroy(attn_cudnn_plan *pl) {
    if (!pl) return;
    if (pl->vpack) pl->c->f.DestroyDescriptor(pl->vpack);
    sdpa_rollback(pl, 0);
    free(pl->descs);
    if (pl->workspace && !pl->bwd) cudaFree(pl->workspace); /* a backward plan's is borrowed */
    if (pl->own_ws) cudaFree(pl->own_ws);
    if (pl->stats) cudaFree(pl->stats);
    if (pl->neg_inf_rows) cudaFree(pl->neg_inf_rows);
    if (pl->lens) cudaFree(pl->lens);
    if (pl->offs) cudaFree(pl->offs);
    if (pl->last_run) cudaEventDestroy(pl->last_run);
    free(pl->fills);
    free(pl->cands);
    free(pl);
}

const char *attn_cudnn_plan_kind(const attn_cudnn_plan *pl) { return pl ? pl->kind : "none"; }

int sdpa_plan_zero_fill(attn_cudnn_plan *pl, int64_t B, int64_t H, int64_t D, int64_t bs, int64_t hs, int64_t rs,
                        int64_t n) {
    const int64_t E = pl->esize;
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

/* One attempt: builds the graph form into pl (a dynamic-shape graph on the kernel cache
 * first, when the plan asks for it); on failure undoes it and leaves the reason in why. */
static int attempt(attn_cudnn *c, attn_cudnn_plan *pl, const problem *pr, int sdpa_op, bool stats_out,
                   char *why, size_t whylen) {
    builder b = {c, pl, why, whylen, 100, 0, 0, 0};
    return sdpa_build_graph(&b, pr, sdpa_op ? FORM_SDPA_OP : FORM_COMPOSITE, stats_out);
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

static int plain(const problem *pr) {
    return !pr->padded && pr->left < 0 && pr->right < 0 && !(pr->softcap > 0);
}

attn_cudnn_plan *sdpa_new_plan(attn_cudnn *c, const attn_fwd_params *p) {
    attn_cudnn_plan *pl = calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->c = c;
    sdpa_make_pool(c);
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
problem sdpa_problem_of(const attn_fwd_params *p) {
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
int sdpa_may_have_keyless_rows(const problem *pr) {
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
int sdpa_device_buffer(void **out, size_t n, const void *host, const char *what, char *why, size_t whylen) {
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
int sdpa_plan_lengths(attn_cudnn_plan *pl, const attn_fwd_params *p, const problem *pr, const int64_t *batch_strides,
                      int n_tensors, char *why, size_t whylen) {
    const int64_t B = pr->B;
    pl->lens_kv = (B + 3) / 4 * 4; /* each array 16-byte aligned, as its tensor is declared */
    int32_t *h = malloc((size_t)(2 * pl->lens_kv) * sizeof *h);
    if (!h) {
        put(why, whylen, "out of host memory (lengths)");
        return -1;
    }
    for (int64_t i = 0; i < 2 * pl->lens_kv; i++) h[i] = (int32_t)(i < pl->lens_kv ? pr->Sq : pr->Sk);
    pl->lens_bytes = (size_t)(2 * pl->lens_kv) * sizeof *h;
    int rc = sdpa_device_buffer((void **)&pl->lens, pl->lens_bytes, h, "per-sequence lengths", why,
                           whylen);
    free(h);
    if (rc) return -1;
    pl->seq_kv_used = p->seqused_k && !p->cu_seqlens_k;
    pl->run_lens = p->cu_seqlens_q || p->cu_seqlens_k;
    if (pr->ragged_q) { /* b * batch_stride where not packed (the lens kernel writes the rest) */
        pl->offs_n = (B + 2) / 2 * 2; /* B + 1 offsets, each array 16-byte aligned */
        int64_t *ho = calloc((size_t)(n_tensors * pl->offs_n), sizeof *ho);
        if (!ho) {
            put(why, whylen, "out of host memory (ragged offsets)");
            return -1;
        }
        for (int t = 0; t < n_tensors; t++)
            for (int64_t b = 0; b <= B; b++) ho[t * pl->offs_n + b] = b * batch_strides[t];
        pl->offs_bytes = (size_t)(n_tensors * pl->offs_n) * sizeof *ho;
        rc = sdpa_device_buffer((void **)&pl->offs, pl->offs_bytes, ho,
                                "ragged offsets", why, whylen);
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
        pl->stats_bytes = bytes;
        cudaError_t e = cudaMalloc((void **)&pl->stats, bytes);
        if (e != cudaSuccess) {
            put(why, whylen, "cudaMalloc(stats scratch, %zu bytes): %s", bytes, cudaGetErrorString(e));
            pl->stats = NULL;
            return -1;
        }
    }
    /* Q, K, V, O: the lens kernel's order */
    const int64_t bs[4] = {p->q_batch_stride, p->k_batch_stride, p->v_batch_stride, p->o_batch_stride};
    if (pr->padded && sdpa_plan_lengths(pl, p, pr, bs, 4, why, whylen)) return -1;
    pl->run_fix = (pr->padded && sdpa_may_have_keyless_rows(pr)) || (pl->want_lse && pr->packed_q);
    if ((pl->run_lens || pl->run_fix) && sdpa_load_aux(pl->c, why, whylen)) return -1;
    if (sliced) {
        int rc = sdpa_plan_zero_fill(pl, p->batch, p->heads, head_dim_v_of(p), p->o_batch_stride, p->o_head_stride,
                                     p->o_row_stride, (int64_t)p->seqlen_q - p->seqlen_k);
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
        int rc = sdpa_device_buffer((void **)&pl->neg_inf_rows, n * sizeof *h, h, "-inf rows of the LSE", why, whylen);
        free(h);
        if (rc) return -1;
        pl->lse_cut = cut;
    }
    return 0;
}

attn_cudnn_plan_opts attn_cudnn_plan_opts_default(void) {
    attn_cudnn_plan_opts o = {.tune = -1, .max_configs = 0, .tune_runs = 0, .want_lse = 0, .graph = NULL,
                              .sq_gt_sk = NULL, .external_workspace = 0, .kernel_cache = 0};
    return o;
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
int sdpa_resolve_opts(const attn_cudnn_plan_opts *in, attn_cudnn_plan_opts *o, char *why, size_t whylen) {
    *o = in ? *in : attn_cudnn_plan_opts_default();
    if (o->tune < 0 && env_int("ATTN_CUDNN_AUTOTUNE", 1, 0, 1, &o->tune, why, whylen)) return -1;
    if (o->max_configs <= 0 &&
        env_int("ATTN_CUDNN_TUNE_MAX_CONFIGS", DEFAULT_MAX_CONFIGS, 1, MAX_CANDIDATES, &o->max_configs, why, whylen))
        return -1;
    if (o->max_configs > MAX_CANDIDATES) o->max_configs = MAX_CANDIDATES;
    if (o->tune_runs <= 0 && env_int("ATTN_CUDNN_TUNE_RUNS", 0, 0, 1000, &o->tune_runs, why, whylen)) return -1;
    if (o->kernel_cache < 0) o->kernel_cache = !o->tune; /* a plan is wanted, not the fastest */
    o->kernel_cache = o->kernel_cache != 0;
    return 0;
}

int attn_cudnn_kernel_cache_env(int *value, char *why, size_t whylen) {
    const char *v = getenv("ATTN_CUDNN_KERNEL_CACHE");
    *value = -1;
    if (!v || !*v) return 0;
    return env_int("ATTN_CUDNN_KERNEL_CACHE", -1, 0, 1, value, why, whylen);
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
    return sdpa_check_problem(p, fn, why, whylen);
}

int sdpa_check_problem(const attn_fwd_params *p, const char *fn, char *why, size_t whylen) {
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

int sdpa_sm_major(void) {
    int device = 0, sm_major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sm_major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
        return 0;
    return sm_major;
}

/* The graph search and the plan's buffers, with resolved options: 0, ATTN_UNSUPPORTED or
 * -1, as attn_cudnn_plan_create. The plan keeps its candidates (pl->cands) for tuning. */
static int build_plan(attn_cudnn *c, const attn_fwd_params *p, const attn_cudnn_plan_opts *o,
                      attn_cudnn_plan **out, char *why, size_t whylen) {
    const double t0 = sdpa_now_s();
    graph_search gs = {.c = c, .p = p, .notes = "", .reasons = ""};
    if (read_graph_forms(&gs.gf, o, why, whylen)) return -1;
    gs.pr = sdpa_problem_of(p);
    char buf[512];
    const char *no = known_refusal(c, &gs.pr, sdpa_sm_major(), buf, sizeof buf);
    if (!no && gs.pr.padded && (int64_t)p->batch * p->heads * p->seqlen_q > 0x7fffffff)
        no = "more than 2^31 - 1 query rows (batch * heads * seqlen_q) for the helper kernels";
    if (no) {
        put(why, whylen, "%s", no);
        return ATTN_UNSUPPORTED;
    }
    if (!(gs.pl = sdpa_new_plan(c, p))) {
        put(why, whylen, "out of host memory");
        return -1;
    }
    gs.pl->tune = o->tune;
    gs.pl->max_configs = o->max_configs;
    gs.pl->want_lse = o->want_lse;
    gs.pl->kc_want = o->kernel_cache;

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
    pl->build_s = sdpa_now_s() - t0;
    char *notes = gs.notes;
    size_t nl = strlen(notes);
    while (nl > 0 && (notes[nl - 1] == ' ' || notes[nl - 1] == ';')) notes[--nl] = 0;
    put(why, whylen, "%s", notes);
    *out = pl;
    return 0;
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

/* sdpa_run_fn for tuning a forward plan: ctx is the attn_fwd_params */
static int run_fwd(void *ctx, attn_cudnn_plan *pl, cudaStream_t stream, char *why, size_t whylen) {
    return attn_cudnn_plan_run(pl, (const attn_fwd_params *)ctx, stream, why, whylen);
}

int attn_cudnn_plan_create_ex(attn_cudnn *c, const attn_fwd_params *p, const attn_cudnn_plan_opts *opts,
                              cudaStream_t stream, attn_cudnn_plan **out, char *why, size_t whylen) {
    if (check_create_args(c, p, out, "attn_cudnn_plan_create_ex", why, whylen)) return -1;
    attn_cudnn_plan_opts o;
    if (sdpa_resolve_opts(opts, &o, why, whylen)) return -1;
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
        rc = sdpa_tune_plan(pl, run_fwd, (void *)p, stream, o.tune_runs, why, whylen);
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
        sdpa_keep_candidate(pl, 0, why, whylen); /* the workspace is already the first's */
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
    out->workspace_bytes = (long long)(pl->bwd ? attn_cudnn_bwd_plan_workspace(pl) : (size_t)pl->workspace_size);
    snprintf(out->heuristics, sizeof out->heuristics, "%s", pl->heuristics);
    out->opgraph_s = pl->opgraph_s;
    out->heuristics_s = pl->heur_s;
    out->finalize_s = pl->finalize_s;
    out->finalizes = pl->finalizes;
    out->kernel_cache = pl->kc_used;
    snprintf(out->kernel_cache_note, sizeof out->kernel_cache_note, "%s", pl->kc_note[0] ? pl->kc_note : "off");
    out->kernel_cache_fail_s = pl->kc_fail_s;
}
