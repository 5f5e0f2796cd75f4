/* attn_benchmark's backward passes (--pass bwd and fwd_bwd; main.c says what they time): the
 * kernel's calls and what it takes, their problem (harness/gpu_problem_bwd.c), the verdict on
 * dQ, dK and dV (check bwd_accuracy's: attn_bwd_grad_verdict), and the baselines' backward:
 * the cuBLAS reference's fp16/bf16 twin and cuDNN's SDPA backward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "device_memory.h"
#include "registry.h"

/* ---- the kernel --------------------------------------------------------------------- */

/* One call of what the pass times, enqueued on s: fwd, bwd, or fwd then bwd. The ABI's code. */
int bench_kernel_call(const bench *bm, cudaStream_t s) {
    if (bm->pass == ATTN_PASS_FWD) return bm->kernel->fwd(&bm->prob->p, s);
    const int rc = bm->pass == ATTN_PASS_FWD_BWD ? bm->kernel->fwd(&bm->prob->p, s) : ATTN_OK;
    return rc == ATTN_OK ? bm->kernel->bwd(&bm->bwd.bp, s) : rc;
}

/* Whether the kernel takes the pass's problem bp (fwd_bwd: its forward's too). NULL, or the
 * reason in why. */
static const char *lacks_for(const bench *bm, const attn_bwd_params *bp, char *why, size_t whylen) {
    if (bm->pass != ATTN_PASS_BWD && attn_kernel_lacks(bm->kernel, bp->fwd, why, whylen)) return why;
    if (bm->pass != ATTN_PASS_FWD && attn_kernel_lacks_bwd(bm->kernel, bp, why, whylen)) return why;
    return NULL;
}

const char *bench_kernel_lacks(const bench *bm, char *why, size_t whylen) {
    if (bm->pass == ATTN_PASS_FWD) return attn_kernel_lacks(bm->kernel, &bm->prob->p, why, whylen);
    return lacks_for(bm, &bm->bwd.bp, why, whylen);
}

/* ---- the problem -------------------------------------------------------------------- */

/* The backward passes' description: the forward's, the LSE asked for (bwd reads it). */
static attn_problem_desc describe_bwd(const bench *bm) {
    attn_problem_desc d = bench_describe(bm);
    d.with_lse = 1;
    return d;
}

/* The problem planned on the host and the kernel asked whether it takes it, before any
 * reference runs: a kernel without bwd, or that lacks what the problem needs, is not
 * supported (exit 77), as the forward's benchmark says it. */
void bench_bwd_check_support(bench *bm) {
    char err[2048], why[1024];
    const attn_problem_desc d = describe_bwd(bm);
    attn_gpu_problem plan;
    if (attn_gpu_problem_plan(&plan, &d, err, sizeof err)) bench_finish(bm, "fail", 2, "%s", err);
    const attn_bwd_params shape = {.fwd = &plan.p, .deterministic = 0};
    const char *lacks = lacks_for(bm, &shape, why, sizeof why);
    attn_seqs_free(&plan.seqs);
    if (lacks) bench_finish(bm, "not_supported", ATTN_EXIT_SKIP, "%s", why);
}

/* The backward problem: the forward's inputs, O and the LSE the golden forward's, dO random,
 * dQ, dK, dV and the kernel's workspace (its bwd_workspace bytes) poisoned, the references of
 * both passes; deterministic 0 (the fast path). O and the LSE kept, to be put back before the
 * baselines. */
void bench_bwd_build(bench *bm) {
    char err[2048];
    const attn_problem_desc d = describe_bwd(bm);
    if (attn_bwd_problem_build(&bm->bwd, &d, NULL, bm->kernel, 0, bm->ref, bm->stream, err, sizeof err))
        bench_finish(bm, "fail", 2, "%s", err);
    bm->prob = &bm->bwd.f;
    if (attn_gpu_problem_snapshot(bm->prob, ATTN_FWD_OUTPUTS, &bm->fwd_out, bm->stream, err, sizeof err))
        bench_finish(bm, "fail", 2, "%s", err);
    json_object_set_new(bm->doc, "bwd_workspace_bytes", json_integer((json_int_t)bm->bwd.bp.workspace_bytes));
}

/* O and the LSE as built: the baselines' backward reads them whatever the kernel left there */
void bench_bwd_restore_forward(bench *bm) {
    char err[1024];
    if (attn_gpu_problem_restore(bm->prob, &bm->fwd_out, bm->stream, err, sizeof err))
        bench_finish(bm, "fail", 2, "%s", err);
}

/* dQ, dK and dV as their buffers hold them now, by the verdict rule with [gradients]' factors.
 * 0 when right; else the first wrong one's reason in why, worded as the forward's on O. */
int bench_judge_grads_now(bench *bm, char *why, size_t whylen) {
    for (int i = 0; i < 3; i++) {
        char err[1024];
        const char *name = attn_grad_names[i];
        attn_fwd_params v;
        attn_match stale;
        attn_output_verdict r;
        int b, h, s, d;
        if (attn_bwd_grad_verdict(&bm->bwd, i, &bm->tol, &v, &stale, &r, bm->stream, err, sizeof err))
            return snprintf(why, whylen, "%s: %s", name, err), 1;
        if (stale.count) {
            attn_bwd_grad_where(&v, stale.first, &b, &h, &s, &d);
            return snprintf(why, whylen, "%s: %llu elements other than 0 at rows past the used keys; first at "
                            "(b=%d, h=%d, s=%d, d=%d)", name, stale.count, b, h, s, d), 1;
        }
        if (r.rule == ATTN_RULE_PASS) continue;
        attn_bwd_grad_where(&v, r.worst, &b, &h, &s, &d);
        snprintf(why, whylen, "%s: %s: max|%s-G| %.3g (bound %.3g), mean|%s-G| %.3g (bound %.3g); %s at "
                 "(b=%d, h=%d, s=%d, d=%d)", name, attn_rule_name(r.rule), name, r.max_err, r.max_bound, name,
                 r.mean_err, r.mean_bound, r.rule == ATTN_RULE_MAX || r.rule == ATTN_RULE_MEAN ? "worst" : "first bad",
                 b, h, s, d);
        return 1;
    }
    return 0;
}

/* ---- the cuBLAS reference's backward ------------------------------------------------ */

/* The reference's timed call: the backward's fp16/bf16 twin (ATTN_REF_LOWP: what a naive
 * unfused backward computes, P, dP and dS stored in the dtype) writing float32 dQ, dK, dV into
 * buffers of its own; fwd_bwd: the forward's cuBLAS baseline first, whose O the twin's
 * D = rowsum(dO * O) reads. */
typedef struct {
    bench *bm;
    float *out[3];
} ref_run;

static int run_reference(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    ref_run *r = ctx;
    bench *bm = r->bm;
    if (bm->pass == ATTN_PASS_FWD_BWD && attn_ref_baseline(bm->ref, &bm->prob->p, s, err, errlen)) return 1;
    return attn_ref_backward(bm->ref, &bm->bwd.bp, ATTN_REF_LOWP, r->out[0], r->out[1], r->out[2], s, err,
                             errlen) != 0;
}

/* Checked on this test's inputs as the forward's baseline is: fwd_bwd's forward (O by the
 * verdict rule). The twin itself is R, the verdict's own yardstick (checked against the
 * float64 oracle by attn_reference_check): there is nothing to judge it by. 0, or 1 with why. */
int bench_bwd_verify_reference(bench *bm, char *why, size_t whylen) {
    if (bm->pass != ATTN_PASS_FWD_BWD) return 0;
    if (attn_gpu_problem_poison(bm->prob, ATTN_TENSOR_BIT(ATTN_T_O), bm->stream, why, whylen) ||
        attn_ref_baseline(bm->ref, &bm->prob->p, bm->stream, why, whylen))
        return 1;
    return bench_judge_o_now(bm, why, whylen);
}

/* Times the reference into bm->tr where its outputs fit in memory: the scratch it computes in
 * (one head's three S x S float32 score buffers at least: 3 GiB at S = 16384) grew when the
 * problem's references were computed, so only the outputs are new. Where they do not fit,
 * bm->have_reference is 0 and bm->reference_why says so (the class is then judged without
 * min_speedup_reference). */
void bench_bwd_time_reference(bench *bm) {
    char err[2048];
    if (!bm->have_reference) return;
    ref_run r = {bm, {NULL, NULL, NULL}};
    size_t bytes = 0;
    int fits = 1;
    for (int i = 0; i < 3; i++) {
        bytes += bm->bwd.elems[i] * sizeof(float);
        if (fits && attn_dev_malloc((void **)&r.out[i], bm->bwd.elems[i] * sizeof(float)) != cudaSuccess) fits = 0;
    }
    if (!fits) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError(); /* the failed allocation's error is this report */
        attn_dev_trim();
        cudaMemGetInfo(&free_b, &total_b);
        snprintf(bm->reference_why, sizeof bm->reference_why, "the cuBLAS reference's backward was not run: its "
                 "float32 dQ, dK and dV (%zu MiB) do not fit beside the problem (%zu of %zu MiB free)", bytes >> 20,
                 free_b >> 20, total_b >> 20);
        bm->have_reference = 0;
    } else if (attn_measure(bm->timer, run_reference, &r, &bm->rules, &bm->tr, err, sizeof err)) {
        bench_finish(bm, "fail", 2, "timing the baseline: %s", err);
    }
    for (int i = 0; i < 3; i++) attn_dev_free(r.out[i]);
}

/* ---- cuDNN's backward --------------------------------------------------------------- */

/* cuDNN's plans for the pass: the backward on the kernel's problem but cuDNN's own workspace,
 * and for fwd_bwd the forward before it, writing the LSE that the backward reads. */
typedef struct {
    attn_cudnn_plan *fwd, *bwd;
    const attn_fwd_params *p;
    attn_bwd_params bp;
} cudnn_bwd_run;

static int run_cudnn(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    cudnn_bwd_run *r = ctx;
    if (r->fwd && attn_cudnn_plan_run(r->fwd, r->p, s, err, errlen)) return 1;
    return attn_cudnn_bwd_plan_run(r->bwd, &r->bp, s, err, errlen) != 0;
}

/* The plans, autotuned on this test's buffers unless ATTN_CUDNN_AUTOTUNE=0 (as the forward's
 * baseline is). 0, or 1 with the reason in bm->cudnn_why. */
static int make_plans(bench *bm, attn_cudnn *cudnn, cudnn_bwd_run *r) {
    char why[sizeof bm->cudnn_why - 16]; /* room for the prefix */
    r->p = &bm->prob->p;
    r->bp = bm->bwd.bp;
    r->bp.workspace = NULL, r->bp.workspace_bytes = 0; /* the plan's own */
    if (bm->pass == ATTN_PASS_FWD_BWD) {
        attn_cudnn_plan_opts o = attn_cudnn_plan_opts_default();
        o.want_lse = 1;
        if (attn_cudnn_plan_create_ex(cudnn, r->p, &o, bm->stream, &r->fwd, why, sizeof why)) {
            snprintf(bm->cudnn_why, sizeof bm->cudnn_why, "the forward: %s", why);
            return 1;
        }
    }
    if (attn_cudnn_bwd_plan_create_ex(cudnn, &r->bp, NULL, bm->stream, &r->bwd, why, sizeof why)) {
        snprintf(bm->cudnn_why, sizeof bm->cudnn_why, "the backward: %s", why);
        return 1;
    }
    return 0;
}

/* 3. cuDNN's backward (fwd_bwd: forward then backward), where it is there and takes the case:
 * checked on this test's inputs (O, dQ, dK, dV by the verdict rule), then timed into bm->tc.
 * Any failure only leaves bm->have_cudnn 0 and the reason in bm->cudnn_why. */
void bench_bwd_time_cudnn(bench *bm) {
    attn_cudnn *cudnn = bench_cudnn_open(bm);
    cudnn_bwd_run r = {0};
    if (cudnn && !make_plans(bm, cudnn, &r)) {
        char why[1024];
        bench_phase_done(bm, "cudnn_plan");
        attn_cudnn_plan_info info, fwd_info;
        attn_cudnn_plan_get_info(r.bwd, &info);
        if (bench_verify(bm, run_cudnn, &r, why, sizeof why))
            snprintf(bm->cudnn_why, sizeof bm->cudnn_why, "cuDNN's output (backward engine %s) fails the verdict "
                     "rule: %s", info.engine, why);
        else if (attn_measure(bm->timer, run_cudnn, &r, &bm->rules, &bm->tc, why, sizeof why))
            snprintf(bm->cudnn_why, sizeof bm->cudnn_why, "timing cuDNN (backward engine %s) failed: %s", info.engine,
                     why);
        else {
            bm->have_cudnn = 1;
            bm->cudnn_engine = bench_cudnn_engine_json(&info);
            snprintf(bm->cudnn_kind, sizeof bm->cudnn_kind, "%s", attn_cudnn_plan_kind(r.bwd));
            if (r.fwd) { /* the forward's plan beside the backward's */
                attn_cudnn_plan_get_info(r.fwd, &fwd_info);
                json_object_set_new(bm->cudnn_engine, "forward", bench_cudnn_engine_json(&fwd_info));
                snprintf(bm->cudnn_kind, sizeof bm->cudnn_kind, "%s + %s", attn_cudnn_plan_kind(r.fwd),
                         attn_cudnn_plan_kind(r.bwd));
            }
        }
    }
    attn_cudnn_plan_destroy(r.fwd);
    attn_cudnn_plan_destroy(r.bwd);
    attn_cudnn_close(cudnn);
}
