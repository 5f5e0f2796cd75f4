/* attn_benchmark's set-up and problem: the harness (tolerance, kernel, GPU), the fragment's
 * start, the thresholds, the inputs and the kernel's parameters, the references, and the
 * verdict rule on what O holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gpu_verify.h"
#include "problem.h"
#include "registry.h"

/* ---- set-up ------------------------------------------------------------------------- */

/* The tolerance file, the kernel, a GPU. 0 when all are there; else main's exit code. No
 * fragment exists yet, so these report on stderr/stdout only. */
int bench_open_harness(bench *bm) {
    char err[2048];
    if (attn_tolerance_load(bm->tolerance_path, &bm->tol, err, sizeof err)) {
        fprintf(stderr, "attn_benchmark: %s\n", err);
        return 2;
    }
    if (!(bm->kernel = attn_find_kernel(bm->kernel_name, bm->plugin, err, sizeof err))) {
        fprintf(stderr, "attn_benchmark: %s\n", err);
        return 2;
    }
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    return 0;
}

/* Starts the fragment with the shape; from here on bench_finish() records every exit in it.
 * 0, or 2 when the JSON cannot be built. */
int bench_begin_fragment(bench *bm) {
    int seqlen_q = bm->seqlen;
    if (bm->workload <= ATTN_WORKLOAD_CAUSAL) { /* the shape: FlashAttention's benchmark convention */
        bm->batch = bm->tokens / bm->seqlen > 0 ? bm->tokens / bm->seqlen : 1, bm->heads = bm->hidden / bm->head_dim;
        bm->heads_k = bm->heads;
    } else { /* the longest sequence's lengths; its keys pick the thresholds class */
        bm->batch = bm->nseq, seqlen_q = 0, bm->seqlen = 0;
        for (int b = 0; b < bm->nseq; b++) {
            seqlen_q = bm->lens_q[b] > seqlen_q ? bm->lens_q[b] : seqlen_q;
            bm->seqlen = bm->lens_k[b] > bm->seqlen ? bm->lens_k[b] : bm->seqlen;
        }
    }
    bm->seqlen_q = seqlen_q;
    bm->doc = json_pack("{s:s, s:s, s:s, s:i, s:b, s:i, s:i, s:i, s:i, s:s, s:i}", "test", bm->name, "kernel",
                      bm->kernel_name, "dtype", bm->dtype_name, "head_dim", bm->head_dim, "causal", bm->causal,
                      "seqlen_q", seqlen_q, "seqlen_k", bm->seqlen, "batch", bm->batch, "heads", bm->heads,
                      "workload", attn_workload_name(bm->workload), "heads_k", bm->heads_k);
    if (!bm->doc) return fprintf(stderr, "attn_benchmark: cannot build JSON\n"), 2;
    if (bm->workload > ATTN_WORKLOAD_CAUSAL) { /* what else the problem is */
        json_object_set_new(bm->doc, "window", json_pack("[i,i]", bm->window_left, bm->window_right));
        json_object_set_new(bm->doc, "page_size", json_integer(bm->page_size));
        json_t *lens = json_array();
        for (int b = 0; b < bm->nseq; b++) json_array_append_new(lens, json_pack("[i,i]", bm->lens_q[b], bm->lens_k[b]));
        json_object_set_new(bm->doc, "sequences", lens);
    }
    bm->phases = json_object();
    json_object_set_new(bm->doc, "phases_s", bm->phases);
    return 0;
}

/* Finds this GPU's thresholds file and the class that judges the kernel; bm->cls stays NULL
 * when none covers the case. */
void bench_load_thresholds(bench *bm) {
    /* thresholds for this GPU and class, before spending any time */
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&bm->prop, dev) != cudaSuccess)
        bench_finish(bm, "fail", 1, "cannot read the device's properties");
    char slug[256], err[2048];
    attn_gpu_slug(bm->prop.name, slug, sizeof slug);
    snprintf(bm->tpath, sizeof bm->tpath, "%s/%s.ini", bm->thresholds_dir, slug);
    FILE *probe = fopen(bm->tpath, "r");
    if (!probe)
        bench_finish(bm, "skipped", ATTN_EXIT_SKIP, "no thresholds for %s; run attn_calibrate --write %s "
               "(from the build directory) on this GPU, then add the minimums", bm->prop.name, bm->thresholds_dir);
    fclose(probe);
    if (attn_thresholds_load(bm->tpath, &bm->th, err, sizeof err)) bench_finish(bm, "fail", 2, "%s", err);
    if (strcmp(bm->th.gpu_name, bm->prop.name))
        bench_finish(bm, "fail", 2, "%s: [gpu] name '%s' is not this GPU ('%s')", bm->tpath, bm->th.gpu_name, bm->prop.name);
    bm->judge_as = getenv("ATTN_THRESHOLDS_KERNEL");
    if (!bm->judge_as || !*bm->judge_as) bm->judge_as = bm->kernel_name;
    /* no class: measured and recorded all the same (so that minimums can be set from the
     * figures: scripts/set_thresholds.py), but skipped, never passed */
    bm->cls = attn_thresholds_find(&bm->th, bm->judge_as, bm->dtype, bm->head_dim, bm->workload, bm->seqlen, bm->seqlen_q);
}

static void make_workload_inputs(bench *bm);

/* Allocates Q, K, V, O and the stream, fills the inputs and sets the kernel's parameters. */
void bench_make_inputs(bench *bm) {
    if (bm->workload > ATTN_WORKLOAD_CAUSAL) return make_workload_inputs(bm);
    /* inputs: BSHD, random normal */
    attn_fwd_params *p = &bm->p;
    size_t n = bm->n = (size_t)bm->batch * bm->seqlen * bm->heads * bm->head_dim;
    attn_params_clear(p, bm->heads);
    p->dtype = bm->dtype, p->batch = bm->batch, p->seqlen_q = p->seqlen_k = bm->seqlen;
    p->head_dim = bm->head_dim, p->causal = bm->causal;
    p->softmax_scale = (float)(1.0 / sqrt((double)bm->head_dim));
    void *buf[4];
    for (int t = 0; t < 4; t++)
        if (cudaMalloc(&buf[t], n * 2) != cudaSuccess) bench_finish(bm, "fail", 2, "cudaMalloc of %zu bytes failed", n * 2);
    if (cudaStreamCreate(&bm->stream) != cudaSuccess) bench_finish(bm, "fail", 2, "cannot create a stream");
    uint64_t seed = attn_seed_from_name(bm->name);
    for (int t = 0; t < 3; t++)
        if (attn_fill_normal(buf[t], bm->dtype, n, seed + t, 1.0f, bm->stream) != cudaSuccess)
            bench_finish(bm, "fail", 2, "attn_fill_normal failed");
    p->q = buf[0], p->k = buf[1], p->v = buf[2], p->o = buf[3], p->lse = NULL;
    attn_strides st = attn_make_strides(ATTN_LAYOUT_BSHD, bm->batch, bm->heads, bm->seqlen, bm->head_dim);
    p->q_batch_stride = p->k_batch_stride = p->v_batch_stride = p->o_batch_stride = st.batch;
    p->q_head_stride = p->k_head_stride = p->v_head_stride = p->o_head_stride = st.head;
    p->q_row_stride = p->k_row_stride = p->v_row_stride = p->o_row_stride = st.row;
    bm->o_elems = n;
}

/* n int32 from the host into a new device array */
static const int32_t *upload_i32(bench *bm, const int32_t *src, size_t n) {
    int32_t *d = NULL;
    if (cudaMalloc((void **)&d, n * sizeof *d) != cudaSuccess ||
        cudaMemcpy(d, src, n * sizeof *d, cudaMemcpyHostToDevice) != cudaSuccess)
        bench_finish(bm, "fail", 2, "cannot upload %zu int32 to the GPU", n);
    return d;
}

/* A version-2 workload's problem: rows of [row][heads][dim] throughout. Q and O dense where
 * every sequence has the same number of queries (decode, window), else packed by
 * cu_seqlens_q (varlen); K and V dense (window), packed by cu_seqlens_k (varlen), or in a
 * shuffled pool of pages with seqused_k (decode). */
static void make_workload_inputs(bench *bm) {
    attn_fwd_params *p = &bm->p;
    char err[512];
    const int paged = bm->page_size > 0, dense = bm->workload != ATTN_WORKLOAD_VARLEN;
    if (attn_seqs_make(&bm->seqs, bm->nseq, bm->lens_q, bm->lens_k, bm->page_size, 0, attn_seed_from_name(bm->name), err, sizeof err))
        bench_finish(bm, "fail", 2, "%s", err);
    const attn_seqs *sq = &bm->seqs;
    const int64_t H = bm->heads, HK = bm->heads_k, D = bm->head_dim;
    const int64_t rows_q = sq->total_q, rows_k = paged ? (int64_t)sq->num_pages * bm->page_size : sq->total_k;
    bm->o_elems = (size_t)(rows_q * H * D);
    const size_t elems[4] = {(size_t)(rows_q * H * D), (size_t)(rows_k * HK * D), (size_t)(rows_k * HK * D), bm->o_elems};
    void *buf[4];
    for (int t = 0; t < 4; t++)
        if (cudaMalloc(&buf[t], elems[t] * 2) != cudaSuccess) bench_finish(bm, "fail", 2, "cudaMalloc of %zu bytes failed", elems[t] * 2);
    if (cudaStreamCreate(&bm->stream) != cudaSuccess) bench_finish(bm, "fail", 2, "cannot create a stream");
    uint64_t seed = attn_seed_from_name(bm->name);
    for (int t = 0; t < 3; t++)
        if (attn_fill_normal(buf[t], bm->dtype, elems[t], seed + t, 1.0f, bm->stream) != cudaSuccess)
            bench_finish(bm, "fail", 2, "attn_fill_normal failed");
    attn_params_clear(p, bm->heads);
    p->dtype = bm->dtype, p->batch = bm->nseq, p->head_dim = bm->head_dim, p->heads_k = bm->heads_k;
    p->causal = bm->causal, p->window_left = bm->window_left, p->window_right = bm->window_right;
    p->softmax_scale = (float)(1.0 / sqrt((double)bm->head_dim));
    p->seqlen_q = sq->max_q, p->seqlen_k = sq->max_k;
    p->q = buf[0], p->k = buf[1], p->v = buf[2], p->o = buf[3], p->lse = NULL;
    p->q_head_stride = p->o_head_stride = D, p->q_row_stride = p->o_row_stride = H * D;
    p->k_head_stride = p->v_head_stride = D, p->k_row_stride = p->v_row_stride = HK * D;
    if (dense) /* rows b * S_q + i */
        p->q_batch_stride = p->o_batch_stride = sq->max_q * H * D;
    else
        p->cu_seqlens_q = upload_i32(bm, sq->cu_seqlens_q, (size_t)bm->nseq + 1);
    if (paged) {
        p->block_table = upload_i32(bm, sq->block_table, (size_t)bm->nseq * sq->block_table_stride);
        p->block_table_stride = sq->block_table_stride, p->page_size = bm->page_size, p->num_pages = sq->num_pages;
        p->seqused_k = upload_i32(bm, (const int32_t *)bm->lens_k, (size_t)bm->nseq);
        p->seqlen_k = sq->block_table_stride * bm->page_size;
        p->k_batch_stride = p->v_batch_stride = bm->page_size * HK * D;
    } else if (dense) {
        p->k_batch_stride = p->v_batch_stride = sq->max_k * HK * D;
    } else {
        p->cu_seqlens_k = upload_i32(bm, sq->cu_seqlens_k, (size_t)bm->nseq + 1);
    }
    if (!dense && cudaMalloc(&bm->o_dense, (size_t)bm->nseq * H * sq->max_q * D * 2) != cudaSuccess)
        bench_finish(bm, "fail", 2, "cudaMalloc for the unpacked output failed");
    const attn_problem_host host = {dense ? NULL : sq->cu_seqlens_q, paged || dense ? NULL : sq->cu_seqlens_k,
                                    sq->block_table, paged ? (const int32_t *)bm->lens_k : NULL};
    if (attn_problem_check(p, &host, err, sizeof err)) bench_finish(bm, "fail", 2, "harness error: %s", err);
}

/* Which configuration of a tunable kernel (attn_tuning) runs this problem, default or tuned
 * (flash2: a committed thresholds/<gpu>.tuned.txt): "config" {tunable: value, ..., "tuned"}. */
void bench_record_config(bench *bm) {
    char err[1024];
    const attn_tuning *t = attn_find_tuning(bm->kernel, bm->plugin, err, sizeof err);
    int values[ATTN_TUNE_MAX_TUNABLES], tuned = 0;
    if (!t || t->config_for(&bm->p, values, &tuned) != ATTN_OK) return;
    json_t *c = json_object();
    printf("configuration (%s):", tuned ? "tuned" : "default");
    for (int i = 0; i < t->count; i++) {
        json_object_set_new(c, t->tunables[i].name, json_integer(values[i]));
        printf(" %s=%d", t->tunables[i].name, values[i]);
    }
    printf("\n");
    json_object_set_new(c, "tuned", json_boolean(tuned));
    json_object_set_new(bm->doc, "config", c);
}

/* ---- the references and the verdict rule ---------------------------------------------- */

/* Golden and low-precision references, once, kept on the GPU: the verdict's figures are
 * gathered there (attn_output_stats_gpu), so a benchmark-sized output never crosses. */
static int compute_references(bench *bm, char *err, size_t errlen) {
    size_t n = (size_t)bm->p.batch * bm->p.heads * bm->p.seqlen_q * bm->head_dim;
    if (cudaMalloc((void **)&bm->dG, n * 4) != cudaSuccess || cudaMalloc((void **)&bm->dR, n * 4) != cudaSuccess) {
        snprintf(err, errlen, "cudaMalloc of 2 x %zu bytes for the reference failed", n * 4);
        return 1;
    }
    if (attn_ref_forward(bm->ref, &bm->p, ATTN_REF_GOLDEN, bm->dG, NULL, bm->stream, err, errlen) ||
        attn_ref_forward(bm->ref, &bm->p, ATTN_REF_LOWP, bm->dR, NULL, bm->stream, err, errlen))
        return 1;
    cudaError_t e = cudaStreamSynchronize(bm->stream);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "reference: %s", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

/* The golden and low-precision outputs that bench_verify() judges every run against. */
void bench_make_references(bench *bm) {
    char err[2048];
    if (attn_ref_create(&bm->ref, err, sizeof err)) bench_finish(bm, "fail", 2, "reference: %s", err);
    if (compute_references(bm, err, sizeof err)) bench_finish(bm, "fail", 2, "reference: %s", err);
}

/* Runs `fn` once on NaN-poisoned O and judges the output by the verdict rule. 0 when right;
 * else the reason in why. */
int bench_verify(bench *bm, attn_enqueue_fn fn, void *ctx, char *why, size_t whylen) {
    if (cudaMemsetAsync(bm->p.o, 0xff, bm->o_elems * 2, bm->stream) != cudaSuccess)
        return snprintf(why, whylen, "cudaMemsetAsync failed"), 1;
    if (fn(ctx, bm->stream, why, whylen)) return 1;
    return bench_judge_output_now(bm, why, whylen);
}

/* The verdict rule on what O holds now (after the stream's work). 0 when right; else the
 * reason in why. */
int bench_judge_output_now(bench *bm, char *why, size_t whylen) {
    why[0] = 0;
    attn_output_stats st;
    attn_fwd_params view = bm->p;
    cudaError_t e = cudaSuccess;
    if (bm->p.cu_seqlens_q) { /* packed rows: unpacked into the references' dense layout (the
                               references' rows past a sequence's end are zeroed alike) */
        const int64_t S = bm->p.seqlen_q, H = bm->heads, D = bm->head_dim;
        e = attn_unpack_rows(bm->p.o, bm->dtype, bm->p.cu_seqlens_q, bm->nseq, bm->heads, (int)S, bm->head_dim, bm->p.o_row_stride,
                             bm->p.o_head_stride, bm->o_dense, bm->dG, bm->dR, bm->stream);
        view.cu_seqlens_q = NULL, view.o = bm->o_dense;
        view.o_row_stride = D, view.o_head_stride = S * D, view.o_batch_stride = H * S * D;
    }
    if (e == cudaSuccess) e = attn_output_stats_gpu(&view, bm->dG, bm->dR, &st, bm->stream);
    if (e != cudaSuccess) return snprintf(why, whylen, "on the GPU: %s", cudaGetErrorString(e)), 1;
    attn_output_verdict v;
    attn_output_decide(&st, bm->dtype, &bm->tol, &v);
    if (v.rule == ATTN_RULE_PASS) return 0;
    size_t i = v.worst, D = bm->head_dim, S = bm->p.seqlen_q, H = bm->p.heads;
    snprintf(why, whylen, "%s: max|O-G| %.3g (bound %.3g), mean|O-G| %.3g (bound %.3g); %s at "
             "(b=%zu, h=%zu, s=%zu, d=%zu)", attn_rule_name(v.rule), v.max_err, v.max_bound, v.mean_err,
             v.mean_bound, v.rule == ATTN_RULE_MAX || v.rule == ATTN_RULE_MEAN ? "worst" : "first bad",
             i / D / S / H, i / D / S % H, i / D % S, i % D);
    return 1;
}
