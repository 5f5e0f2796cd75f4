/* The cuDNN baseline's backward plans (cudnn_sdpa.h): cudnn-frontend's support surface for the
 * SDPA backward, the problem as the backward graph takes it (sliced, padded), the plan's
 * buffers and workspace layout, creation and tuning. */
#include "cudnn_sdpa_internal.h"

#include <stdlib.h>
#include <string.h>

enum { WS_ALIGN = 256 };

static int64_t align_up(int64_t n) { return (n + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

size_t attn_cudnn_bwd_plan_workspace(const attn_cudnn_plan *pl) {
    if (!pl || !pl->bwd) return 0;
    return (size_t)(pl->accum_bytes + pl->sum_bytes + align_up(pl->workspace_size));
}

/* The forward problem's, with the gradients' strides (batch strides as if padded to the
 * longest where rows are packed, as the forward's) and the dQ path. */
static problem bwd_problem_of(const attn_bwd_params *p) {
    const attn_fwd_params *f = p->fwd;
    problem pr = sdpa_problem_of(f);
    const int64_t s[4][3] = {{p->do_batch_stride, p->do_head_stride, p->do_row_stride},
                             {p->dq_batch_stride, p->dq_head_stride, p->dq_row_stride},
                             {p->dk_batch_stride, p->dk_head_stride, p->dk_row_stride},
                             {p->dv_batch_stride, p->dv_head_stride, p->dv_row_stride}};
    memcpy(pr.dos, s[0], sizeof pr.dos);
    memcpy(pr.dqs, s[1], sizeof pr.dqs);
    memcpy(pr.dks, s[2], sizeof pr.dks);
    memcpy(pr.dvs, s[3], sizeof pr.dvs);
    if (pr.packed_q) pr.dos[0] = pr.Sq * pr.dos[2], pr.dqs[0] = pr.Sq * pr.dqs[2];
    if (f->cu_seqlens_k) pr.dks[0] = pr.Sk * pr.dks[2], pr.dvs[0] = pr.Sk * pr.dvs[2];
    pr.accum = !p->deterministic;
    return pr;
}

/* The head dims cudnn-frontend's backward takes on this GPU and cuDNN; NULL, or the reason. */
static const char *head_dim_refusal(long v, const problem *pr, int sm_major, char *buf, size_t len) {
    const int64_t d = pr->D, dv = pr->Dv;
    if (sm_major == 9) {
        if (v >= 91100 && v < 91300 && d > 128 && d <= 192 && dv > 64 && dv <= 128 && dv != 128 && d != 192)
            return "cuDNN 9.11-9.12 on Hopper: a backward with 128 < head_dim <= 192 and 64 < head_dim_v <= 128 "
                   "needs head_dim 192 or head_dim_v 128 (cudnn-frontend refuses it)";
        if (d <= 256 && dv <= 256) return NULL;
        snprintf(buf, len, "head_dim %lld / head_dim_v %lld: the backward takes head dims up to 256 on Hopper",
                 (long long)d, (long long)dv);
        return buf;
    }
    if (sm_major == 10 && v >= 91100 && d == 192) {
        if (dv == 128) return NULL;
        return "head_dim 192 needs head_dim_v 128 in the backward on this GPU (cudnn-frontend refuses it)";
    }
    if (d <= 128 && dv <= 128) return NULL;
    snprintf(buf, len, "head_dim %lld / head_dim_v %lld: the backward takes head dims up to 128 on this GPU (sm_%d0) "
             "and cuDNN", (long long)d, (long long)dv, sm_major);
    return buf;
}

/* The cases cudnn-frontend's SDPA backward node refuses for this cuDNN and GPU (its
 * pre-validation: known bugs, unsupported patterns), and the ones this graph cannot honour:
 * refused here too, so that no such plan is ever run. pr: the problem before slicing. */
static const char *known_refusal(const attn_cudnn *c, const problem *pr, int sm_major, int deterministic, char *buf,
                                 size_t len) {
    const long v = c->version;
    const int bottom_right = pr->padded || pr->Sq != pr->Sk;
    if (v == 91000 || v == 91001)
        return "cuDNN 9.10.0 and 9.10.1: fp16/bf16 SDPA backward has known bugs (cudnn-frontend refuses it)";
    if (pr->Sq == 1 && pr->Sk == 1) return "s_q = s_kv = 1: cudnn-frontend refuses the backward";
    if (v == 91400 && pr->Sk > 1024 && pr->left >= 0 && pr->right < 0) {
        snprintf(buf, len, "cuDNN 9.14.0: a left window without a right bound and s_kv %lld > 1024 is a known bug "
                 "(cudnn-frontend refuses it; fixed in 9.14.1)", (long long)pr->Sk);
        return buf;
    }
    const char *hd = head_dim_refusal(v, pr, sm_major, buf, len);
    if (hd) return hd;
    if (pr->right >= 0 && bottom_right && v < 90600 && (pr->Sq % 64 || pr->Sk % 64))
        return "a bottom-right aligned mask needs s_q and s_kv multiples of 64 before cuDNN 9.6";
    if (pr->left >= 0 && pr->right >= 0 && sm_major == 9 && v <= 90900 && pr->Sq == pr->Sk)
        return "a left window with a right bound on Hopper with s_q == s_kv is a known bug through cuDNN 9.9";
    if (pr->left >= 0 && v < 90200) return "a left window needs cuDNN 9.2 or newer in the backward";
    if (pr->left >= 0 && pr->right < 0 && v < 91002)
        return "a left window needs a right bound (causal) before cuDNN 9.10.2";
    if (pr->ragged_q && pr->H != pr->Hk && v < 90600)
        return "GQA with packed (ragged) tensors needs cuDNN 9.6 or newer in the backward";
    if (pr->ragged_q && sm_major < 9 && v < 91801)
        return "packed (ragged) tensors need Hopper or newer before cuDNN 9.18.1";
    if (pr->softcap > 0 && (pr->padded || pr->left >= 0 || pr->right >= 0))
        return "softcap with a mask or per-sequence lengths: cudnn-frontend's backward takes a score modifier "
               "(softcap) only without masks";
    if (deterministic && sm_major != 9)
        return "a deterministic backward: cudnn-frontend's deterministic graph (dQ without the fp32 accumulator) "
               "is deterministic on Hopper only, and needs engine knobs elsewhere";
    return NULL;
}

/* Causal with more queries than keys on constant lengths: cudnn-frontend's backward takes no
 * unpadded bottom-right mask with s_q > s_kv (it asks for Q sliced): the first Sq - Sk rows
 * see no key (dQ 0 there, nothing to dK, dV), the rest is a square causal problem. The rows
 * cut (0: none). */
static int64_t slice(problem *pr) {
    if (pr->padded || pr->right != 0 || pr->left >= 0 || pr->Sq <= pr->Sk) return 0;
    const int64_t cut = pr->Sq - pr->Sk;
    pr->Sq = pr->Sk;
    return cut;
}

/* cudnn-frontend's workaround for cuDNN <= 9.15: no padding mask and no ragged tensors, and
 * s_kv (frontend 1.16 on; s_q in 1.15, with any cuDNN) not a multiple of 128: a padding mask
 * with constant lengths, which masks nothing. Both conditions taken. */
static void workaround_padding(const attn_cudnn *c, problem *pr) {
    if (c->version <= 91500 && (pr->Sk % 128 || pr->Sq % 128) && !pr->padded && !pr->ragged_q) pr->padded = 1;
}

/* The plan's scalars, scratch, lengths, offsets, helper kernels and zero fills; on failure
 * the reason goes to why and the caller destroys pl. */
static int finish(attn_cudnn_plan *pl, const attn_bwd_params *p, const problem *pr, char *why, size_t whylen) {
    const attn_fwd_params *f = p->fwd;
    pl->sq = (int32_t)pr->Sq;
    pl->skv = (int32_t)pr->Sk;
    pl->softcap = pr->softcap;
    pl->right = (int32_t)pr->right;
    pl->left_i = (int32_t)(pr->left + 1); /* cuDNN keeps col + left_i - (sk - sq) > row */
    pl->left_f = (float)(pr->left + 1 - pr->Sk + pr->Sq);
    pl->one = 1.0f;
    pl->zero_accum = pr->accum && pl->c->version < 90600; /* cudnn-frontend zeroes it before 9.6 */
    pl->accum_bytes = pr->accum ? align_up(pr->B * pr->H * pr->Sq * pr->D * (int64_t)sizeof(float)) : 0;
    pl->sum_bytes = align_up(pr->B * pr->H * pr->Sq * (int64_t)sizeof(float));
    pl->stats_bytes = (size_t)(pr->B * pr->H * pr->Sq) * sizeof(float);
    if (pl->stats_role == ROLE_STATS &&
        sdpa_device_buffer((void **)&pl->stats, pl->stats_bytes, NULL,
                           "the LSE as cuDNN's Stats (scratch)", why, whylen))
        return -1;
    /* Q, K, V, O then dQ, dK, dV, dO: the lens kernel's order, launched once for each four */
    const int64_t bs[8] = {f->q_batch_stride,  f->k_batch_stride,  f->v_batch_stride,  f->o_batch_stride,
                           p->dq_batch_stride, p->dk_batch_stride, p->dv_batch_stride, p->do_batch_stride};
    if (pr->padded && sdpa_plan_lengths(pl, f, pr, bs, 8, why, whylen)) return -1;
    pl->run_fix = pr->padded && sdpa_may_have_keyless_rows(pr);
    pl->run_kv_fix = pr->dynamic;
    if ((pl->run_lens || pl->run_fix || pl->run_kv_fix || pl->stats_mode == STATS_CONVERT) &&
        sdpa_load_aux(pl->c, why, whylen))
        return -1;
    if (pl->cut) {
        int rc = sdpa_plan_zero_fill(pl, pr->B, pr->H, pr->D, p->dq_batch_stride, p->dq_head_stride, p->dq_row_stride,
                                     pl->cut);
        if (rc) {
            put(why, whylen, rc == -1 ? "out of host memory" : "dQ rows overlap (dq_row_stride < head_dim)");
            return -1;
        }
    }
    return 0;
}

/* p's problem refused (ATTN_UNSUPPORTED with the reason), or NULL. */
static const char *refusal(const attn_cudnn *c, const attn_bwd_params *p, const problem *pr, char *buf, size_t len) {
    const char *no = known_refusal(c, pr, sdpa_sm_major(), p->deterministic, buf, len);
    if (no || !pr->padded) return no;
    /* the helper kernels index rows with 32 bits */
    if ((int64_t)p->fwd->batch * p->fwd->heads * p->fwd->seqlen_q > 0x7fffffff ||
        (int64_t)p->fwd->batch * heads_k_of(p->fwd) * p->fwd->seqlen_k > 0x7fffffff)
        return "more than 2^31 - 1 query or key rows (batch * heads * seqlen) for the helper kernels";
    return NULL;
}

/* A backward plan for p with no graph yet, and the problem as its graph takes it (sliced,
 * padded); NULL when out of host memory. */
static attn_cudnn_plan *new_bwd_plan(attn_cudnn *c, const attn_bwd_params *p, const attn_cudnn_plan_opts *o,
                                     problem *pr) {
    attn_cudnn_plan *pl = sdpa_new_plan(c, p->fwd);
    if (!pl) return NULL;
    pl->bwd = 1;
    pl->kind = "composite backward graph";
    pl->bshape = *p;
    pl->bshape.fwd = &pl->shape;
    pl->bshape.dout = pl->bshape.dq = pl->bshape.dk = pl->bshape.dv = pl->bshape.workspace = NULL;
    pl->tune = o->tune, pl->max_configs = o->max_configs, pl->tune_runs = o->tune_runs;
    pl->kc_want = o->kernel_cache;
    pl->cut = slice(pr);
    workaround_padding(c, pr);
    pl->stats_mode = pl->cut ? STATS_COPY
                     : pr->packed_q || sdpa_may_have_keyless_rows(pr) ? STATS_CONVERT
                                                                      : STATS_BOUND;
    pl->stats_role = pl->stats_mode == STATS_BOUND ? ROLE_LSE : ROLE_STATS;
    /* the bwd-stats kernel reads the lengths (a problem with keyless rows is padded anyway) */
    if (pl->stats_mode == STATS_CONVERT) pr->padded = 1;
    return pl;
}

int sdpa_bwd_graph_check(attn_cudnn *c, const attn_bwd_params *p, int *n_ops, int *n_uids, char *why,
                         size_t whylen) {
    attn_cudnn_plan_opts o = attn_cudnn_plan_opts_default();
    o.tune = 0;
    problem pr = bwd_problem_of(p);
    attn_cudnn_plan *pl = new_bwd_plan(c, p, &o, &pr);
    if (!pl) {
        put(why, whylen, "out of host memory");
        return -1;
    }
    builder b = {c, pl, why, whylen, 100, 1, 0, 0};
    int rc = sdpa_graph_bwd(&b, &pr);
    *n_ops = b.n_ops;
    *n_uids = pl->n_uids;
    attn_cudnn_plan_destroy(pl);
    return rc;
}

/* A new backward plan for p, up to its candidates: 0, ATTN_UNSUPPORTED or -1 (why). */
static int build(attn_cudnn *c, const attn_bwd_params *p, const attn_cudnn_plan_opts *o, attn_cudnn_plan **out,
                 char *why, size_t whylen) {
    const double t0 = sdpa_now_s();
    problem pr = bwd_problem_of(p);
    char buf[512];
    const char *no = refusal(c, p, &pr, buf, sizeof buf);
    if (no) {
        put(why, whylen, "%s", no);
        return ATTN_UNSUPPORTED;
    }
    attn_cudnn_plan *pl = new_bwd_plan(c, p, o, &pr);
    if (!pl) {
        put(why, whylen, "out of host memory");
        return -1;
    }
    char msg[4096];
    builder b = {c, pl, msg, sizeof msg, 100, 0, 0, 0};
    if (sdpa_build_graph(&b, &pr, FORM_BWD, false)) {
        put(why, whylen, "composite backward graph: %s", msg);
        attn_cudnn_plan_destroy(pl);
        return ATTN_UNSUPPORTED;
    }
    if (finish(pl, p, &pr, why, whylen)) {
        attn_cudnn_plan_destroy(pl);
        return -1;
    }
    snprintf(pl->engine, sizeof pl->engine, "%s", pl->cands[0].tag);
    pl->engine_id = pl->cands[0].engine_id;
    pl->build_s = sdpa_now_s() - t0;
    *out = pl;
    return 0;
}

/* sdpa_run_fn for tuning a backward plan: ctx is the attn_bwd_params */
static int run_bwd(void *ctx, attn_cudnn_plan *pl, cudaStream_t stream, char *why, size_t whylen) {
    return attn_cudnn_bwd_plan_run(pl, (const attn_bwd_params *)ctx, stream, why, whylen);
}

/* Times the candidates on p's buffers and keeps the fastest: 0, ATTN_UNSUPPORTED (none ran)
 * or -1, with why. */
static int tune(attn_cudnn_plan *pl, const attn_bwd_params *p, cudaStream_t stream, char *why, size_t whylen) {
    const int n = pl->n_cands;
    char msg[2048] = "";
    int rc = sdpa_tune_plan(pl, run_bwd, (void *)p, stream, pl->tune_runs, msg, sizeof msg);
    if (rc) {
        put(why, whylen, "autotuning %d execution plan%s (%s): %s", n, n == 1 ? "" : "s", pl->heuristics, msg);
        return rc > 0 ? ATTN_UNSUPPORTED : -1;
    }
    pl->tuned = 1;
    return 0;
}

/* The arguments of attn_cudnn_bwd_plan_create_ex: 0, or -1 with why. */
static int check_args(attn_cudnn *c, const attn_bwd_params *p, const attn_cudnn_plan_opts *o, cudaStream_t stream,
                      char *why, size_t whylen) {
    static const char fn[] = "attn_cudnn_bwd_plan_create_ex";
    if (!c || !p || !p->fwd) {
        put(why, whylen, "%s: NULL argument (c, p or p->fwd)", fn);
        return -1;
    }
    if (sdpa_check_problem(p->fwd, fn, why, whylen)) return -1;
    if (p->fwd->block_table) {
        put(why, whylen, "%s: block_table is set, and a paged problem has no backward", fn);
        return -1;
    }
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
        put(why, whylen, "%s: the stream is capturing a CUDA graph; plans allocate and synchronize, so create them "
            "before the capture", fn);
        return -1;
    }
    const attn_fwd_params *f = p->fwd;
    if (o->tune && !o->external_workspace &&
        (!f->q || !f->k || !f->v || !f->o || !f->lse || !p->dout || !p->dq || !p->dk || !p->dv)) {
        put(why, whylen, "%s: tuning runs the configs on p's buffers, and p has a NULL pointer (set "
            "ATTN_CUDNN_AUTOTUNE=0 or opts.tune = 0 to plan without buffers)", fn);
        return -1;
    }
    return 0;
}

int attn_cudnn_bwd_plan_create_ex(attn_cudnn *c, const attn_bwd_params *p, const attn_cudnn_plan_opts *opts,
                                  cudaStream_t stream, attn_cudnn_plan **out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!out) {
        put(why, whylen, "attn_cudnn_bwd_plan_create_ex: out is NULL");
        return -1;
    }
    *out = NULL;
    attn_cudnn_plan_opts o;
    if (sdpa_resolve_opts(opts, &o, why, whylen) || check_args(c, p, &o, stream, why, whylen)) return -1;
    attn_cudnn_plan *pl = NULL;
    int rc = build(c, p, &o, &pl, why, whylen);
    if (rc) return rc;
    if (!o.external_workspace) {
        const size_t bytes = attn_cudnn_bwd_plan_workspace(pl);
        if (bytes && sdpa_device_buffer(&pl->own_ws, bytes, NULL, "the backward's workspace", why, whylen)) {
            attn_cudnn_plan_destroy(pl);
            return -1;
        }
    }
    if (!o.tune) rc = sdpa_keep_candidate(pl, 0, why, whylen);
    else if (!o.external_workspace) rc = tune(pl, p, stream, why, whylen);
    if (rc) {
        attn_cudnn_plan_destroy(pl);
        return rc;
    }
    *out = pl;
    return 0;
}

int attn_cudnn_bwd_plan_tune(attn_cudnn_plan *pl, const attn_bwd_params *p, int keep_first, cudaStream_t stream,
                             char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!pl || !pl->bwd || !p) {
        put(why, whylen, "attn_cudnn_bwd_plan_tune: %s", !pl || !p ? "NULL argument" : "a forward plan");
        return -1;
    }
    if (pl->n_cands == 0) return 0; /* chosen already */
    if (keep_first) return sdpa_keep_candidate(pl, 0, why, whylen);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
        put(why, whylen, "attn_cudnn_bwd_plan_tune: the stream is capturing a CUDA graph (tuning synchronizes)");
        return -1;
    }
    return tune(pl, p, stream, why, whylen);
}
