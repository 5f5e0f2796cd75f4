/* attn_benchmark's set-up and problem: the harness (tolerance, kernel, GPU), the fragment's
 * start, the thresholds, the inputs and the kernel's parameters, the references, and the
 * verdict rule on what O holds (the backward passes' problem and gradients: backward.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "gpu_verify.h"
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
    bm->doc = json_pack("{s:s, s:s, s:s, s:s, s:i, s:b, s:i, s:i, s:i, s:i, s:s, s:i}", "test", bm->name, "kernel",
                      bm->kernel_name, "pass", attn_pass_name(bm->pass), "dtype", bm->dtype_name, "head_dim",
                      bm->head_dim, "causal", bm->causal, "seqlen_q", seqlen_q, "seqlen_k", bm->seqlen, "batch",
                      bm->batch, "heads", bm->heads, "workload", attn_workload_name(bm->workload), "heads_k",
                      bm->heads_k);
    if (!bm->doc) return fprintf(stderr, "attn_benchmark: cannot build JSON\n"), 2;
    if (bm->workload > ATTN_WORKLOAD_CAUSAL) { /* what else the problem is */
        json_object_set_new(bm->doc, "window", json_pack("[i,i]", bm->window_left, bm->window_right));
        json_object_set_new(bm->doc, "page_size", json_integer(bm->page_size));
        json_t *lens = json_array();
        for (int b = 0; b < bm->nseq; b++)
            json_array_append_new(lens, json_pack("[i,i]", bm->lens_q[b], bm->lens_k[b]));
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
        bench_finish(bm, "fail", 2, "%s: [gpu] name '%s' is not this GPU ('%s')", bm->tpath, bm->th.gpu_name,
                     bm->prop.name);
    bm->judge_as = getenv("ATTN_THRESHOLDS_KERNEL");
    if (!bm->judge_as || !*bm->judge_as) bm->judge_as = bm->kernel_name;
    /* no class: measured and recorded all the same (so that minimums can be set from the
     * figures: scripts/set_thresholds.py), but skipped, never passed */
    bm->cls = attn_thresholds_find(&bm->th, bm->judge_as, bm->pass, bm->dtype, bm->head_dim, bm->workload,
                                   bm->seqlen, bm->seqlen_q);
}

/* The problem's description: the dense matrix BSHD; the window workload a dense problem too
 * (every sequence the same length); varlen a packed batch, decode a packed batch in pages
 * (Q dense: every sequence has the same number of queries). The kernel is not asked for
 * the LSE (the backward passes' problem asks for it); the inputs' seed comes from the test's
 * name. */
attn_problem_desc bench_describe(const bench *bm) {
    const int dense = bm->workload <= ATTN_WORKLOAD_CAUSAL || bm->workload == ATTN_WORKLOAD_WINDOW;
    const int sq = bm->workload == ATTN_WORKLOAD_WINDOW ? bm->lens_q[0] : bm->seqlen;
    const int sk = bm->workload == ATTN_WORKLOAD_WINDOW ? bm->lens_k[0] : bm->seqlen;
    attn_problem_desc d = attn_problem_dense(bm->dtype, dense ? bm->batch : 1, bm->heads, dense ? sq : 1,
                                             dense ? sk : 1, bm->head_dim, bm->causal, bm->name);
    d.heads_k = bm->heads_k, d.window_left = bm->window_left, d.window_right = bm->window_right;
    d.with_lse = 0;
    if (!dense) {
        d.nseq = bm->nseq, d.page_size = bm->page_size, d.spare_pages = 0;
        memcpy(d.lens_q, bm->lens_q, sizeof d.lens_q);
        memcpy(d.lens_k, bm->lens_k, sizeof d.lens_k);
    }
    return d;
}

/* The stream, and the problem built on it (harness/gpu_problem.h): inputs, poisoned outputs,
 * the kernel's parameters. The backward passes only ask the kernel whether it takes their
 * problem here: it is built with its references (bench_make_references). */
void bench_make_inputs(bench *bm) {
    char err[2048];
    if (cudaStreamCreate(&bm->stream) != cudaSuccess) bench_finish(bm, "fail", 2, "cannot create a stream");
    if (bm->pass != ATTN_PASS_FWD) {
        bench_bwd_check_support(bm);
        return;
    }
    const attn_problem_desc d = bench_describe(bm);
    bm->prob = &bm->fwd_prob;
    if (attn_gpu_problem_build(bm->prob, &d, bm->stream, err, sizeof err)) bench_finish(bm, "fail", 2, "%s", err);
}

/* Which configuration of a tunable kernel (attn_tuning) runs this problem's forward, default or
 * tuned (flash2: a committed thresholds/<gpu>.tuned.txt): "config" {tunable: value, ...,
 * "tuned"}. None for the backward pass: the tunables are the forward's. */
void bench_record_config(bench *bm) {
    char err[1024];
    const attn_tuning *t = bm->pass == ATTN_PASS_BWD ? NULL : attn_find_tuning(bm->kernel, bm->plugin, err, sizeof err);
    int values[ATTN_TUNE_MAX_TUNABLES], tuned = 0;
    if (!t || t->config_for(&bm->prob->p, values, &tuned) != ATTN_OK) return;
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

/* The golden and low-precision outputs that bench_verify() judges every run against, once,
 * kept on the GPU: the verdict's figures are gathered there (attn_output_stats_gpu), so a
 * benchmark-sized output never crosses. The backward passes: their problem, built with the
 * forward's and the backward's references (bench_bwd_build). */
void bench_make_references(bench *bm) {
    char err[2048];
    if (attn_ref_create(&bm->ref, err, sizeof err)) bench_finish(bm, "fail", 2, "reference: %s", err);
    if (bm->pass != ATTN_PASS_FWD) {
        bench_bwd_build(bm);
        return;
    }
    if (attn_gpu_problem_references(bm->prob, bm->ref, bm->stream, err, sizeof err))
        bench_finish(bm, "fail", 2, "reference: %s", err);
}

/* What the pass writes, poisoned (guard bands included): O (and the LSE); the backward's
 * gradients and workspace; forward then backward both. 0, or 1 with err. */
int bench_poison_outputs(bench *bm, char *err, size_t errlen) {
    if (bm->pass != ATTN_PASS_BWD && attn_gpu_problem_poison_outputs(bm->prob, bm->stream, err, errlen)) return 1;
    return bm->pass != ATTN_PASS_FWD && attn_bwd_problem_poison(&bm->bwd, ATTN_BWD_OUTPUTS, bm->stream, err, errlen);
}

/* Runs `fn` once on NaN-poisoned outputs and judges them by the verdict rule. 0 when right;
 * else the reason in why. */
int bench_verify(bench *bm, attn_enqueue_fn fn, void *ctx, char *why, size_t whylen) {
    if (bench_poison_outputs(bm, why, whylen)) return 1;
    if (fn(ctx, bm->stream, why, whylen)) return 1;
    return bench_judge_output_now(bm, why, whylen);
}

/* What O holds now, as the verdict reads it: packed rows unpacked into the references' dense
 * layout (the references' rows past a sequence's end are zeroed alike; the kernel was not
 * asked for the LSE, so only O is unpacked). */
static cudaError_t output_view(bench *bm, attn_fwd_params *view) {
    const attn_gpu_problem *x = bm->prob;
    *view = x->p;
    if (!x->p.cu_seqlens_q) return cudaSuccess;
    const int64_t S = x->p.seqlen_q, H = bm->heads, D = bm->head_dim;
    view->cu_seqlens_q = NULL, view->total_q = 0, view->o = x->o_dense;
    view->o_row_stride = D, view->o_head_stride = S * D, view->o_batch_stride = H * S * D;
    return attn_unpack_rows(x->p.o, bm->dtype, x->cu_q, bm->nseq, bm->heads, (int)S, bm->head_dim,
                            x->p.o_row_stride, x->p.o_head_stride, x->o_dense, x->g, x->r, bm->stream);
}

/* The verdict rule on what the pass wrote, now (after the stream's work): O, the gradients, or
 * both. 0 when right; else the reason in why. */
int bench_judge_output_now(bench *bm, char *why, size_t whylen) {
    why[0] = 0;
    if (bm->pass == ATTN_PASS_BWD) return bench_judge_grads_now(bm, why, whylen);
    if (bench_judge_o_now(bm, why, whylen)) return 1;
    return bm->pass == ATTN_PASS_FWD_BWD && bench_judge_grads_now(bm, why, whylen);
}

/* The verdict rule on what O holds now. 0 when right; else the reason in why. */
int bench_judge_o_now(bench *bm, char *why, size_t whylen) {
    why[0] = 0;
    attn_output_stats st;
    attn_fwd_params view;
    cudaError_t e = output_view(bm, &view);
    if (e == cudaSuccess) e = attn_output_stats_gpu(&view, bm->prob->g, bm->prob->r, &st, bm->stream);
    if (e != cudaSuccess) return snprintf(why, whylen, "on the GPU: %s", cudaGetErrorString(e)), 1;
    attn_output_verdict v;
    attn_output_decide(&st, bm->dtype, &bm->tol, &v);
    if (v.rule == ATTN_RULE_PASS) return 0;
    const attn_fwd_params *p = &bm->prob->p;
    size_t i = v.worst, D = bm->head_dim, S = p->seqlen_q, H = p->heads;
    snprintf(why, whylen, "%s: max|O-G| %.3g (bound %.3g), mean|O-G| %.3g (bound %.3g); %s at "
             "(b=%zu, h=%zu, s=%zu, d=%zu)", attn_rule_name(v.rule), v.max_err, v.max_bound, v.mean_err,
             v.mean_bound, v.rule == ATTN_RULE_MAX || v.rule == ATTN_RULE_MEAN ? "worst" : "first bad",
             i / D / S / H, i / D / S % H, i / D % S, i % D);
    return 1;
}
