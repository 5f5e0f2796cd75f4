/* Probe of the cuDNN SDPA baseline (cudnn_sdpa.h) against the golden reference.
 *
 *   cudnn_probe [--quick]
 *   cudnn_probe --time --dtype fp16 --head-dim 64 --mask causal --seqlen 512 --tokens 16384
 *               --hidden 2048 --tolerance thresholds/tolerance.ini
 *   cudnn_probe --plans [off|on|both]
 *
 * --time: the benchmarks' cuDNN baseline on one shape of the benchmark matrix, as
 * attn_benchmark plans, checks and times it (scripts/cudnn_vs_torch.py runs it per shape);
 * see time_main below.
 * --plans: what plans cost, as the cudnn kernel builds them in the correctness suites (not
 * tuned), with the kernel cache off, on, or both (default; off first, each pass on a fresh
 * handle, so an empty kernel cache): the cases below with and without the LSE (each run and
 * checked as below) and their backward plans (built, not run); per plan its build time split
 * into the operation graph's finalize, the heuristics and the execution plans' finalize, and
 * whether the kernel cache was used (or why not); per pass the sums. Set CUDA_CACHE_DISABLE=1
 * for what a machine with an empty driver JIT cache sees. Otherwise:
 *
 * Opens cuDNN (prints its version, or the reason and exits 77), then for every case of
 * {fp16, bf16} x {head_dim 64, 128} x {full, causal} x {(Sq,Sk) = (128,128), (1000,1000),
 * (127,512), (512,127)}, batch 2, heads 3, BSHD layout, random normal inputs: builds a
 * plan, runs it, compares O with ATTN_REF_GOLDEN and prints one line:
 *   the case, the plan kind (or cuDNN's refusal), max|O - G| over the rows that see a key,
 *   PASS if it is <= 0.02 (fp16) / 0.05 (bf16) else FAIL, the mean time of one run, and
 *   for causal Sq > Sk what cuDNN left in the rows that see no key (never a FAIL).
 * Then, unless --quick, the alternative graph forms, forced through the environment:
 *   ATTN_CUDNN_GRAPH=composite for the non-causal cases (the composite graph, where the
 *   auto choice was the single SDPA op) and ATTN_CUDNN_SQ_GT_SK=slice for causal Sq > Sk.
 * Exit: 0, 1 if any case that got a plan FAILed (or failed to run), 77 no cuDNN / no GPU,
 * 2 other setup errors. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <jansson.h>

#include "args.h"
#include "attn_abi.h"
#include "bench_gpu.h"
#include "cudnn_sdpa.h"
#include "gpu_problem.h"
#include "gpu_verify.h"
#include "harness.h"
#include "reference.h"
#include "results.h"
#include "verdict.h"

enum { BATCH = 2, HEADS = 3, TIMED_RUNS = 20 };
#define O_SENTINEL_BYTE 0x5A /* O is filled with 0x5A5A before each run: "untouched" */

/* The probe's run: what every case uses, and the counts. main owns it. */
/* --plans: one pass's sums over its plans */
typedef struct {
    int plans, kc_used, finalizes;
    double build_s, opgraph_s, heur_s, finalize_s, kc_fail_s;
    char kc_note[256]; /* the first reason a plan did not use the kernel cache */
} plan_totals;

typedef struct {
    attn_cudnn *cudnn;
    attn_reference *ref;
    cudaStream_t stream;
    int n_fail, n_pass, n_refused;
    int full_refusals, full_notes; /* refusals and notes printed in full so far */
    const attn_cudnn_plan_opts *opts; /* --plans: plans made with these, costs summed in tot;
                                         NULL: attn_cudnn_plan_create, as ever */
    int with_lse;                      /* --plans: the LSE asked for (opts->want_lse) */
    plan_totals tot;
} probe;

#define CUDA_OR(label, call)                                                              \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            printf("  CUDA error: %s: %s\n", #call, cudaGetErrorString(e_));              \
            pc->pr->n_fail++;                                                             \
            goto label;                                                                   \
        }                                                                                 \
    } while (0)

static void describe_keyless(const uint16_t *ho, attn_dtype dt, const attn_strides *so, int sq,
                             int sk, int d, char *buf, size_t len) {
    uint16_t sentinel = (uint16_t)(O_SENTINEL_BYTE << 8 | O_SENTINEL_BYTE);
    long zeros = 0, nans = 0, untouched = 0, other = 0;
    double other_max = 0;
    for (int b = 0; b < BATCH; b++)
        for (int h = 0; h < HEADS; h++)
            for (int s = 0; s < sq - sk; s++)
                for (int e = 0; e < d; e++) {
                    uint16_t bits = ho[attn_offset(so, b, h, s, e)];
                    float x = attn_from_dtype(dt, bits);
                    if (bits == sentinel) untouched++;
                    else if (isnan(x)) nans++;
                    else if (x == 0.0f) zeros++;
                    else {
                        other++;
                        if (fabs(x) > other_max) other_max = fabs(x);
                    }
                }
    long total = (long)BATCH * HEADS * (sq - sk) * d;
    if (zeros == total) snprintf(buf, len, "keyless rows 0..%d: all zero", sq - sk - 1);
    else if (nans == total) snprintf(buf, len, "keyless rows 0..%d: all NaN", sq - sk - 1);
    else if (untouched == total) snprintf(buf, len, "keyless rows 0..%d: not written", sq - sk - 1);
    else
        snprintf(buf, len, "keyless rows 0..%d: %ld zero, %ld NaN, %ld not written, %ld other (max |x| %.3g)",
                 sq - sk - 1, zeros, nans, untouched, other, other_max);
}

/* One case: its parameters, problem (harness/gpu_problem.h), host copies and plan, so each
 * step below takes one argument and free_case releases whatever the steps got to. */
typedef struct {
    probe *pr;
    attn_dtype dt;
    int d, causal, sq, sk;
    char name[160], why[4096], line[256];
    char note[4096]; /* plan_create's note on the graph form it chose */
    attn_gpu_problem x; /* BSHD, no LSE; x.p is cuDNN's problem, x.g the golden O */
    attn_strides stq;   /* O's strides (Q's) */
    size_t nq, ng;      /* elements of O, and of the float32 golden output */
    uint16_t *ho;
    float *hg;
    attn_cudnn_plan *plan;
    cudaEvent_t ev0, ev1;
} probe_case;

/* Q, K, V: normal random numbers from the seed of the case's name, built on the GPU; O
 * filled with the sentinel ("untouched"); host room for O and G. */
static int make_problem(probe_case *pc) {
    attn_problem_desc d = attn_problem_dense(pc->dt, BATCH, HEADS, pc->sq, pc->sk, pc->d, pc->causal, pc->name);
    d.with_lse = pc->pr->with_lse;
    if (attn_gpu_problem_build(&pc->x, &d, pc->pr->stream, pc->why, sizeof pc->why)) {
        printf("%s  %s\n", pc->line, pc->why);
        pc->pr->n_fail++;
        return -1;
    }
    pc->stq = pc->x.st[ATTN_T_O];
    pc->nq = (size_t)pc->stq.extent, pc->ng = pc->x.o_elems;
    pc->ho = calloc(pc->nq, 2), pc->hg = calloc(pc->ng, sizeof(float));
    if (!pc->ho || !pc->hg) {
        printf("%s  host out of memory\n", pc->line);
        pc->pr->n_fail++;
        return -1;
    }
    CUDA_OR(fail, cudaMemsetAsync(attn_gpu_problem_data(&pc->x, ATTN_T_O), O_SENTINEL_BYTE, pc->nq * 2,
                                  pc->pr->stream));
    return 0;
fail:
    return -1;
}

/* One plan's cost on its own line ("      cost: ..."), summed into pr->tot. */
static void plan_cost(probe *pr, const attn_cudnn_plan *plan) {
    attn_cudnn_plan_info in;
    attn_cudnn_plan_get_info(plan, &in);
    printf("      cost: built in %.3f s = operation graph %.3f + heuristics %.3f + %d execution plan finalize%s %.3f "
           "+ the rest %.3f; kernel cache: %s\n", in.build_s, in.opgraph_s, in.heuristics_s, in.finalizes,
           in.finalizes == 1 ? "" : "s", in.finalize_s, in.build_s - in.opgraph_s - in.heuristics_s - in.finalize_s,
           in.kernel_cache_note);
    plan_totals *t = &pr->tot;
    t->plans++, t->kc_used += in.kernel_cache, t->finalizes += in.finalizes;
    t->build_s += in.build_s, t->opgraph_s += in.opgraph_s, t->heur_s += in.heuristics_s;
    t->finalize_s += in.finalize_s, t->kc_fail_s += in.kernel_cache_fail_s;
    if (!in.kernel_cache && !t->kc_note[0]) snprintf(t->kc_note, sizeof t->kc_note, "%s", in.kernel_cache_note);
}

/* A refusal is counted as refused, not failed: cuDNN may not support every case. */
static int create_plan(probe_case *pc) {
    int rc;
    if (pc->pr->opts) { /* as the cudnn kernel plans: causal Sq > Sk sliced */
        attn_cudnn_plan_opts o = *pc->pr->opts;
        if (pc->causal && pc->sq > pc->sk) o.sq_gt_sk = "slice";
        rc = attn_cudnn_plan_create_ex(pc->pr->cudnn, &pc->x.p, &o, pc->pr->stream, &pc->plan, pc->why, sizeof pc->why);
    } else {
        rc = attn_cudnn_plan_create(pc->pr->cudnn, &pc->x.p, &pc->plan, pc->why, sizeof pc->why);
    }
    if (rc) {
        if (pc->pr->full_refusals++ < 2 || strlen(pc->why) <= 600)
            printf("%s  %s: %s\n", pc->line, rc == ATTN_UNSUPPORTED ? "REFUSED" : "ERROR", pc->why);
        else
            printf("%s  %s: %.600s ...\n", pc->line, rc == ATTN_UNSUPPORTED ? "REFUSED" : "ERROR", pc->why);
        if (rc == ATTN_UNSUPPORTED) pc->pr->n_refused++;
        else pc->pr->n_fail++;
        return -1;
    }
    snprintf(pc->note, sizeof pc->note, "%s", pc->why);
    return 0;
}

/* The run that is checked: cuDNN, then the golden reference on the same stream; O and G
 * copied back to the host. */
static int run_checked(probe_case *pc) {
    if (attn_cudnn_plan_run(pc->plan, &pc->x.p, pc->pr->stream, pc->why, sizeof pc->why)) {
        printf("%s  %-15s RUN FAILED: %s\n", pc->line, attn_cudnn_plan_kind(pc->plan), pc->why);
        pc->pr->n_fail++;
        return -1;
    }
    if (attn_gpu_problem_references(&pc->x, pc->pr->ref, pc->pr->stream, pc->why, sizeof pc->why)) {
        printf("%s  reference failed: %s\n", pc->line, pc->why);
        pc->pr->n_fail++;
        return -1;
    }
    CUDA_OR(fail, cudaStreamSynchronize(pc->pr->stream));
    CUDA_OR(fail, cudaMemcpy(pc->ho, attn_gpu_problem_data(&pc->x, ATTN_T_O), pc->nq * 2, cudaMemcpyDeviceToHost));
    CUDA_OR(fail, cudaMemcpy(pc->hg, pc->x.g, pc->ng * sizeof(float), cudaMemcpyDeviceToHost));
    return 0;
fail:
    return -1;
}

/* timing: TIMED_RUNS back-to-back runs after one warm-up; *ms is their total */
static int time_runs(probe_case *pc, float *ms) {
    CUDA_OR(fail, cudaEventCreate(&pc->ev0));
    CUDA_OR(fail, cudaEventCreate(&pc->ev1));
    if (attn_cudnn_plan_run(pc->plan, &pc->x.p, pc->pr->stream, pc->why, sizeof pc->why)) {
        printf("%s  %-15s RUN FAILED (second run): %s\n", pc->line, attn_cudnn_plan_kind(pc->plan), pc->why);
        pc->pr->n_fail++;
        return -1;
    }
    CUDA_OR(fail, cudaEventRecord(pc->ev0, pc->pr->stream));
    for (int i = 0; i < TIMED_RUNS; i++)
        if (attn_cudnn_plan_run(pc->plan, &pc->x.p, pc->pr->stream, pc->why, sizeof pc->why)) {
            printf("%s  %-15s RUN FAILED (timed run): %s\n", pc->line, attn_cudnn_plan_kind(pc->plan), pc->why);
            pc->pr->n_fail++;
            return -1;
        }
    CUDA_OR(fail, cudaEventRecord(pc->ev1, pc->pr->stream));
    CUDA_OR(fail, cudaEventSynchronize(pc->ev1));
    CUDA_OR(fail, cudaEventElapsedTime(ms, pc->ev0, pc->ev1));
    return 0;
fail:
    return -1;
}

/* The case's line: the error against G, PASS/FAIL, the time; then the plan's note. */
static void verdict(probe_case *pc, float ms) {
    const int d = pc->d, sq = pc->sq, sk = pc->sk;
    /* compare the rows that see a key */
    double err = 0, gmax = 0;
    long bad = 0, checked = 0;
    int first_keyed = pc->causal && sq > sk ? sq - sk : 0;
    for (int b = 0; b < BATCH; b++)
        for (int h = 0; h < HEADS; h++)
            for (int s = first_keyed; s < sq; s++)
                for (int e = 0; e < d; e++) {
                    float x = attn_from_dtype(pc->dt, pc->ho[attn_offset(&pc->stq, b, h, s, e)]);
                    float g = pc->hg[(((size_t)b * HEADS + h) * sq + s) * d + e];
                    double diff = fabs((double)x - (double)g);
                    checked++;
                    if (!(diff == diff) || isinf(diff)) bad++; /* NaN / Inf in O */
                    else if (diff > err) err = diff;
                    if (fabs(g) > gmax) gmax = fabs(g);
                }
    double tol = pc->dt == ATTN_BF16 ? 0.05 : 0.02;
    int pass = bad == 0 && err <= tol;
    char extra[256] = "";
    if (pc->causal && sq > sk) describe_keyless(pc->ho, pc->dt, &pc->stq, sq, sk, d, extra, sizeof extra);
    char errtxt[64];
    if (bad) snprintf(errtxt, sizeof errtxt, "%ld non-finite of %ld", bad, checked);
    else snprintf(errtxt, sizeof errtxt, "%.3e", err);
    printf("%s  %-15s max|O-G| %-10s (tol %.2g, max|G| %.2f) %s  %8.1f us%s%s%s\n", pc->line,
           attn_cudnn_plan_kind(pc->plan), errtxt, tol, gmax, pass ? "PASS" : "FAIL",
           1000.0 * ms / TIMED_RUNS, extra[0] ? "  [" : "", extra, extra[0] ? "]" : "");
    if (pc->note[0]) { /* the first note in full, later ones cut (they repeat the same refusals) */
        if (pc->pr->full_notes++ == 0 || strlen(pc->note) <= 400) printf("      note: %s\n", pc->note);
        else printf("      note: %.400s ...\n", pc->note);
    }
    if (pass) pc->pr->n_pass++;
    else pc->pr->n_fail++;
    if (pc->pr->opts) plan_cost(pc->pr, pc->plan);
}

static void free_case(probe_case *pc) {
    if (pc->ev0) cudaEventDestroy(pc->ev0);
    if (pc->ev1) cudaEventDestroy(pc->ev1);
    attn_cudnn_plan_destroy(pc->plan);
    attn_gpu_problem_free(&pc->x);
    free(pc->ho);
    free(pc->hg);
}

static void run_case(probe *pr, attn_dtype dt, int d, int causal, int sq, int sk, const char *label) {
    probe_case pc = {.pr = pr, .dt = dt, .d = d, .causal = causal, .sq = sq, .sk = sk, .why = ""};
    snprintf(pc.name, sizeof pc.name, "cudnn_probe/%s/d%d/%s/q%dk%d", attn_dtype_name(dt), d,
             causal ? "causal" : "full", sq, sk);
    snprintf(pc.line, sizeof pc.line, "%-4s d%-3d %-6s q%-4d k%-4d%s%s%s", attn_dtype_name(dt), d,
             causal ? "causal" : "full", sq, sk, pr->with_lse ? " LSE" : "", label ? " " : "", label ? label : "");
    float ms = 0;
    /* each step prints and counts its own failure; the rest of the case is skipped */
    if (!make_problem(&pc) && !create_plan(&pc) && !run_checked(&pc) && !time_runs(&pc, &ms)) verdict(&pc, ms);
    free_case(&pc);
    fflush(stdout);
}

/* ---- --time: the benchmark's cuDNN baseline on one shape of the benchmark matrix -------- */

/* What one timed shape needs, for the enqueue callback. */
typedef struct {
    attn_cudnn_plan *plan;
    attn_gpu_problem x; /* x.p is cuDNN's problem */
} timed_case;

static int run_timed(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    timed_case *tc = ctx;
    return attn_cudnn_plan_run(tc->plan, &tc->x.p, s, err, errlen);
}

#define USAGE "usage: attn_cudnn_probe [--quick]\n" \
    "       attn_cudnn_probe --time --dtype fp16|bf16 --head-dim D --mask full|causal --seqlen S --tokens T " \
    "--hidden H --tolerance FILE\n" \
    "       attn_cudnn_probe --plans [off|on|both]\n"

static void time_usage(const char *why) {
    fprintf(stderr, "attn_cudnn_probe: %s\n" USAGE, why);
    exit(2);
}

/* --help: the usage, then what each form does (the top of this file) */
static int help(void) {
    printf(USAGE "The cuDNN SDPA baseline against the golden reference: every case of {fp16, bf16} x {d64, d128}\n"
           "x {full, causal} x four shapes, one line each (plan, max|O - G|, PASS or FAIL, time); then, unless\n"
           "--quick, the alternative graph forms (ATTN_CUDNN_GRAPH=composite, ATTN_CUDNN_SQ_GT_SK=slice).\n"
           "--time: the benchmarks' cuDNN baseline on one shape, planned, checked and timed as attn_benchmark\n"
           "does; prints \"RESULT {json}\".\n"
           "--plans: plans as the cudnn kernel builds them in the correctness suites (not tuned), forward (with and\n"
           "without the LSE, each checked) and backward (built only), with the kernel cache off, on or both (default),\n"
           "each pass on a fresh handle: per plan its build time (operation graph, heuristics, execution plan\n"
           "finalize) and whether the kernel cache was used; per pass the sums.\n"
           "Exit 0, 1 a case failed, 77 no cuDNN or no GPU, 2 bad arguments or a setup error.\n");
    return 0;
}

static int time_positive(const char *opt, const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > (1L << 30)) {
        fprintf(stderr, "attn_cudnn_probe: %s: expected a positive integer, got '%s'\n", opt, s);
        exit(2);
    }
    return (int)v;
}

/* BSHD inputs as attn_benchmark makes them (batch = tokens / S, heads = hidden / D, no LSE),
 * built on the GPU (harness/gpu_problem.h). 0, or 2 with the reason printed. */
static int time_inputs(probe *pr, attn_gpu_problem *x, attn_dtype dt, int d, int causal, int s, int tokens,
                       int hidden, const char *name) {
    attn_problem_desc desc = attn_problem_dense(dt, tokens / s > 0 ? tokens / s : 1, hidden / d, s, s, d, causal, name);
    desc.with_lse = 0;
    char why[2048];
    if (attn_gpu_problem_build(x, &desc, pr->stream, why, sizeof why)) {
        printf("ERROR: %s\n", why);
        return 2;
    }
    return 0;
}

/* The verdict rule on O against the golden and low-precision references, as attn_benchmark
 * checks a baseline before timing it. 0 when right; else 1 with the reason printed. */
static int time_verify(probe *pr, timed_case *tc, const attn_tolerance *tol) {
    const attn_fwd_params *p = &tc->x.p;
    char why[2048];
    if (attn_gpu_problem_references(&tc->x, pr->ref, pr->stream, why, sizeof why)) {
        printf("ERROR: reference: %s\n", why);
        return 1;
    }
    if (attn_gpu_problem_poison_outputs(&tc->x, pr->stream, why, sizeof why) ||
        run_timed(tc, pr->stream, why, sizeof why)) {
        printf("ERROR: the cuDNN run to verify failed: %s\n", why);
        return 1;
    }
    attn_output_stats st;
    cudaError_t e = attn_output_stats_gpu(p, tc->x.g, tc->x.r, &st, pr->stream);
    if (e != cudaSuccess) {
        printf("ERROR: verifying on the GPU: %s\n", cudaGetErrorString(e));
        return 1;
    }
    attn_output_verdict v;
    attn_output_decide(&st, p->dtype, tol, &v);
    if (v.rule != ATTN_RULE_PASS) {
        printf("FAIL: cuDNN's output fails the verdict rule: %s: max|O-G| %.3g (bound %.3g), mean|O-G| %.3g "
               "(bound %.3g)\n", attn_rule_name(v.rule), v.max_err, v.max_bound, v.mean_err, v.mean_bound);
        return 1;
    }
    printf("verified: max|O-G| %.3g (bound %.3g), mean|O-G| %.3g (bound %.3g)\n", v.max_err, v.max_bound,
           v.mean_err, v.mean_bound);
    return 0;
}

/* Times the planned case with attn_benchmark's rules and prints the "RESULT {json}" line.
 * 0, or 1 with the reason printed. */
static int measure_and_print(probe *pr, timed_case *tc, const char *name, const attn_cudnn_plan_info *info,
                             const attn_cudnn_lib_info *lib) {
    char why[4096];
    attn_timer *timer = NULL;
    attn_timing_rules rules = {10, 0.5, 0.005, 1.0, 0.75, 0}; /* attn_benchmark's */
    const char *tmo = getenv("ATTN_BENCH_TIMEOUT");
    if (tmo && atof(tmo) > 0) rules.timeout_s = atof(tmo);
    attn_timing t;
    if (attn_timer_create(&timer, pr->stream, why, sizeof why) ||
        attn_measure(timer, run_timed, tc, &rules, &t, why, sizeof why)) {
        printf("ERROR: timing: %s\n", why);
        return 1;
    }
    attn_timer_destroy(timer);
    json_t *res = json_pack("{s:s, s:f, s:f, s:f, s:f, s:i, s:b, s:b, s:s, s:s, s:I, s:i, s:i, s:i, s:b, s:I, s:s}",
                            "shape", name, "median_ms", t.median_ms, "ci_lo_ms", t.ci_lo_ms, "ci_hi_ms", t.ci_hi_ms,
                            "min_ms", t.min_ms, "samples", t.samples, "noisy", t.noisy, "held", t.held, "kind",
                            info->kind, "engine", info->engine, "engine_id", (json_int_t)info->engine_id,
                            "configs_tried", info->configs_tried, "configs_built", info->configs_built,
                            "configs_timed", info->configs_timed, "tuned", info->tuned, "version",
                            (json_int_t)lib->version, "library", lib->path[0] ? lib->path : lib->requested);
    char *line = res ? json_dumps(res, JSON_COMPACT) : NULL;
    if (!line) {
        printf("ERROR: cannot build the result's JSON\n");
        return 1;
    }
    printf("%s: cuDNN %.4f ms [%.4f, %.4f] (%d samples%s)\nRESULT %s\n", name, t.median_ms, t.ci_lo_ms, t.ci_hi_ms,
           t.samples, t.noisy ? ", noisy" : "", line);
    free(line);
    json_decref(res);
    return 0;
}

/* --time's command line */
typedef struct {
    const char *dtype, *mask, *tol_path;
    int d, s, tokens, hidden;
    attn_dtype dt;
} time_args;

/* The --time command line into ta: 0, or 1 after --help; a bad one exits 2, naming the
 * argument. */
static int time_parse_args(int argc, char **argv, time_args *ta) {
    static const struct option opts[] = {
        {"time", 0, 0, 'x'}, {"dtype", 1, 0, 't'}, {"head-dim", 1, 0, 'd'}, {"mask", 1, 0, 'm'},
        {"seqlen", 1, 0, 's'}, {"tokens", 1, 0, 'T'}, {"hidden", 1, 0, 'H'}, {"tolerance", 1, 0, 'o'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    char why[256];
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ATTN_GETOPT_SHORT, opts, NULL)) != -1) {
        switch (c) {
        case 'x': break;
        case 't': ta->dtype = optarg; break;
        case 'd': ta->d = time_positive("--head-dim", optarg); break;
        case 'm': ta->mask = optarg; break;
        case 's': ta->s = time_positive("--seqlen", optarg); break;
        case 'T': ta->tokens = time_positive("--tokens", optarg); break;
        case 'H': ta->hidden = time_positive("--hidden", optarg); break;
        case 'o': ta->tol_path = optarg; break;
        case 'h': return 1;
        default: time_usage(attn_getopt_error(c, argv, why, sizeof why));
        }
    }
    if (optind != argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        time_usage(why);
    }
    if (!ta->dtype || !ta->mask || !ta->d || !ta->s || !ta->tokens || !ta->hidden || !ta->tol_path)
        time_usage("--time takes --dtype, --head-dim, --mask, --seqlen, --tokens, --hidden and --tolerance");
    if (attn_dtype_parse(ta->dtype, &ta->dt)) time_usage("--dtype: expected fp16 or bf16");
    if (strcmp(ta->mask, "full") && strcmp(ta->mask, "causal")) time_usage("--mask: expected full or causal");
    if (ta->hidden % ta->d) time_usage("--hidden must be a multiple of --head-dim");
    return 0;
}

/* attn_cudnn_probe --time ...: plans the shape as attn_benchmark does (autotuned unless
 * ATTN_CUDNN_AUTOTUNE=0), verifies the output, times it with the benchmarks' rules and
 * prints one line "RESULT {json}" (median_ms, ci_lo_ms, ci_hi_ms, min_ms, samples, noisy,
 * kind, engine, configs_tried, configs_built, tuned, version, library). Exit 0; 77 no GPU,
 * no cuDNN or not supported; 1 wrong output or a failure; 2 bad arguments. */
static int time_main(probe *pr, int argc, char **argv) {
    time_args ta = {0};
    if (time_parse_args(argc, argv, &ta)) return help();
    char why[4096], name[160];
    attn_tolerance tol;
    if (attn_tolerance_load(ta.tol_path, &tol, why, sizeof why)) {
        fprintf(stderr, "attn_cudnn_probe: %s\n", why);
        return 2;
    }
    int causal = !strcmp(ta.mask, "causal");
    snprintf(name, sizeof name, "cudnn_probe/time/%s/d%d/%s/s%d", ta.dtype, ta.d, ta.mask, ta.s);

    if (attn_cudnn_open(&pr->cudnn, why, sizeof why)) {
        printf("SKIPPED: cuDNN not available: %s\n", why);
        return ATTN_EXIT_SKIP;
    }
    attn_cudnn_lib_info lib;
    attn_cudnn_get_library(pr->cudnn, &lib);
    printf("cuDNN %ld: %s (%s)\n", lib.version, lib.path[0] ? lib.path : lib.requested, lib.chosen_by);
    if (!attn_gpu_available(why, sizeof why)) {
        printf("SKIPPED: %s\n", why);
        return ATTN_EXIT_SKIP;
    }
    if (attn_ref_create(&pr->ref, why, sizeof why)) {
        printf("ERROR: reference: %s\n", why);
        return 2;
    }
    if (cudaStreamCreate(&pr->stream) != cudaSuccess) {
        printf("ERROR: cudaStreamCreate failed\n");
        return 2;
    }
    timed_case tc = {0};
    int rc = time_inputs(pr, &tc.x, ta.dt, ta.d, causal, ta.s, ta.tokens, ta.hidden, name);
    if (rc) return rc;
    printf("%s: batch %d, heads %d, BSHD\n", name, tc.x.p.batch, tc.x.p.heads);
    rc = attn_cudnn_plan_create_ex(pr->cudnn, &tc.x.p, NULL, pr->stream, &tc.plan, why, sizeof why);
    if (rc) {
        printf("%s: %s\n", rc == ATTN_UNSUPPORTED ? "NOT SUPPORTED" : "ERROR", why);
        return rc == ATTN_UNSUPPORTED ? ATTN_EXIT_SKIP : 1;
    }
    attn_cudnn_plan_info info;
    attn_cudnn_plan_get_info(tc.plan, &info);
    printf("plan: %s, engine %s; %d distinct configs tried, %d built, %d timed (%s); %s; build %.2f s (operation "
           "graph %.3f s, heuristics %.3f s, %d execution plans finalized %.3f s), tuning %.2f s\n", info.kind,
           info.engine, info.configs_tried, info.configs_built, info.configs_timed,
           info.tuned ? "the fastest kept" : "the first kept", info.heuristics, info.build_s, info.opgraph_s,
           info.heuristics_s, info.finalizes, info.finalize_s, info.tune_s);
    if (why[0]) printf("note: %s\n", why);
    if (time_verify(pr, &tc, &tol)) return 1;

    if (measure_and_print(pr, &tc, name, &info, &lib)) return 1;
    attn_cudnn_plan_destroy(tc.plan);
    attn_gpu_problem_free(&tc.x);
    attn_ref_destroy(pr->ref);
    attn_cudnn_close(pr->cudnn);
    return 0;
}

/* ---- the probe's matrix, and --plans -------------------------------------------------- */

static const int seqs[4][2] = {{128, 128}, {1000, 1000}, {127, 512}, {512, 127}};
static const attn_dtype dts[2] = {ATTN_F16, ATTN_BF16};
static const int dims[2] = {64, 128};

/* Every case of the matrix through run_case. */
static void run_matrix(probe *pr) {
    for (int t = 0; t < 2; t++)
        for (int di = 0; di < 2; di++)
            for (int causal = 0; causal < 2; causal++)
                for (int s = 0; s < 4; s++) run_case(pr, dts[t], dims[di], causal, seqs[s][0], seqs[s][1], NULL);
}

/* --plans: the backward plan of one case as the cudnn kernel makes it (dO, dQ, dK, dV in O's,
 * Q's, K's and V's layouts; built with pr->opts and no buffers, not run), and its cost. */
static void bwd_plan_case(probe *pr, attn_dtype dt, int d, int causal, int sq, int sk) {
    char line[128], name[160], why[4096];
    snprintf(line, sizeof line, "%-4s d%-3d %-6s q%-4d k%-4d backward", attn_dtype_name(dt), d,
             causal ? "causal" : "full", sq, sk);
    snprintf(name, sizeof name, "cudnn_probe/bwd/%s/d%d/%s/q%dk%d", attn_dtype_name(dt), d,
             causal ? "causal" : "full", sq, sk);
    attn_problem_desc desc = attn_problem_dense(dt, BATCH, HEADS, sq, sk, d, causal, name);
    attn_gpu_problem x;
    memset(&x, 0, sizeof x);
    if (attn_gpu_problem_plan(&x, &desc, why, sizeof why)) { /* host only: stand-in pointers */
        printf("%s  ERROR: %s\n", line, why);
        pr->n_fail++;
        return;
    }
    const attn_fwd_params *f = &x.p;
    attn_bwd_params bp = {.fwd = f,
                          .do_batch_stride = f->o_batch_stride, .do_head_stride = f->o_head_stride,
                          .do_row_stride = f->o_row_stride, .dq_batch_stride = f->q_batch_stride,
                          .dq_head_stride = f->q_head_stride, .dq_row_stride = f->q_row_stride,
                          .dk_batch_stride = f->k_batch_stride, .dk_head_stride = f->k_head_stride,
                          .dk_row_stride = f->k_row_stride, .dv_batch_stride = f->v_batch_stride,
                          .dv_head_stride = f->v_head_stride, .dv_row_stride = f->v_row_stride};
    attn_cudnn_plan_opts o = *pr->opts;
    o.want_lse = 0, o.external_workspace = 1;
    attn_cudnn_plan *plan = NULL;
    int rc = attn_cudnn_bwd_plan_create_ex(pr->cudnn, &bp, &o, pr->stream, &plan, why, sizeof why);
    if (rc) {
        printf("%s  %s: %.600s\n", line, rc == ATTN_UNSUPPORTED ? "REFUSED" : "ERROR", why);
        if (rc == ATTN_UNSUPPORTED) pr->n_refused++;
        else pr->n_fail++;
    } else {
        printf("%s  %s\n", line, attn_cudnn_plan_kind(plan));
        plan_cost(pr, plan);
        attn_cudnn_plan_destroy(plan);
    }
    attn_seqs_free(&x.seqs);
    fflush(stdout);
}

/* --plans: one pass on a fresh handle (an empty kernel cache): the matrix without and with
 * the LSE, then its backward plans; the pass's sums. */
static void plans_pass(probe *pr, int kernel_cache) {
    char why[2048];
    memset(&pr->tot, 0, sizeof pr->tot);
    if (attn_cudnn_open(&pr->cudnn, why, sizeof why)) {
        printf("cuDNN not available: %s\n", why);
        pr->n_fail++;
        return;
    }
    attn_cudnn_plan_opts o = attn_cudnn_plan_opts_default();
    o.tune = 0, o.kernel_cache = kernel_cache;
    pr->opts = &o;
    printf("-- kernel cache %s (cuDNN %ld, a fresh handle)\n", kernel_cache ? "on" : "off",
           attn_cudnn_version(pr->cudnn));
    for (int lse = 0; lse < 2; lse++) {
        o.want_lse = pr->with_lse = lse;
        run_matrix(pr);
    }
    pr->with_lse = 0;
    for (int t = 0; t < 2; t++)
        for (int di = 0; di < 2; di++)
            for (int causal = 0; causal < 2; causal++)
                for (int s = 0; s < 4; s++) bwd_plan_case(pr, dts[t], dims[di], causal, seqs[s][0], seqs[s][1]);
    const plan_totals *t = &pr->tot;
    printf("kernel cache %s: %d plans built in %.2f s: operation graphs %.3f s, heuristics %.3f s, %d execution plans "
           "finalized %.2f s, the rest %.2f s; %d used the kernel cache; dynamic attempts cuDNN refused %.2f s\n",
           kernel_cache ? "on" : "off", t->plans, t->build_s, t->opgraph_s, t->heur_s, t->finalizes, t->finalize_s,
           t->build_s - t->opgraph_s - t->heur_s - t->finalize_s, t->kc_used, t->kc_fail_s);
    if (t->kc_note[0]) printf("  the first plan without the kernel cache: %s\n", t->kc_note);
    attn_cudnn_close(pr->cudnn);
    pr->cudnn = NULL;
    pr->opts = NULL;
}

/* The GPU, the reference and the stream every form but --time needs: 0, or the exit code
 * (the reason printed). */
static int probe_setup(probe *pr) {
    char why[2048];
    if (!attn_gpu_available(why, sizeof why)) {
        printf("%s\n", why);
        return ATTN_EXIT_SKIP;
    }
    int dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
        printf("GPU %d: %s (sm_%d%d)\n", dev, prop.name, prop.major, prop.minor);
    if (attn_ref_create(&pr->ref, why, sizeof why)) {
        printf("reference: %s\n", why);
        return 2;
    }
    if (cudaStreamCreate(&pr->stream) != cudaSuccess) {
        printf("cudaStreamCreate failed\n");
        attn_ref_destroy(pr->ref);
        return 2;
    }
    return 0;
}

/* attn_cudnn_probe --plans [off|on|both] */
static int plans_main(probe *pr, int argc, char **argv) {
    const char *which = argc > 2 ? argv[2] : "both";
    if (argc > 3 || (strcmp(which, "off") && strcmp(which, "on") && strcmp(which, "both"))) {
        fprintf(stderr, "attn_cudnn_probe: --plans takes off, on or both, got '%s'\n" USAGE, argc > 3 ? argv[3] : which);
        return 2;
    }
    char why[2048];
    attn_cudnn_lib_info lib;
    if (attn_cudnn_library_info(&lib, why, sizeof why)) {
        printf("cuDNN not available: %s\n", why);
        return ATTN_EXIT_SKIP;
    }
    printf("cuDNN %ld: %s (%s); batch %d, heads %d, BSHD; plans not tuned, as the correctness suites build them\n",
           lib.version, lib.path[0] ? lib.path : lib.requested, lib.chosen_by, BATCH, HEADS);
    int rc = probe_setup(pr);
    if (rc) return rc;
    if (strcmp(which, "on")) plans_pass(pr, 0);
    if (strcmp(which, "off")) plans_pass(pr, 1);
    printf("%d PASS, %d FAIL, %d refused\n", pr->n_pass, pr->n_fail, pr->n_refused);
    cudaStreamDestroy(pr->stream);
    attn_ref_destroy(pr->ref);
    return pr->n_fail ? 1 : 0;
}

int main(int argc, char **argv) {
    probe pr = {0}; /* the run's one context */
    if (argc > 1 && !strcmp(argv[1], "--time")) return time_main(&pr, argc, argv);
    if (argc > 1 && !strcmp(argv[1], "--plans")) return plans_main(&pr, argc, argv);
    if (argc > 1 && attn_is_help(argv[1])) return help();
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 1 + quick) {
        fprintf(stderr, "attn_cudnn_probe: unknown argument '%s'\n" USAGE, argv[1 + quick]);
        return 2;
    }
    char why[2048];
    if (attn_cudnn_open(&pr.cudnn, why, sizeof why)) {
        printf("cuDNN not available: %s\n", why);
        return ATTN_EXIT_SKIP;
    }
    printf("cuDNN %ld (cudnnGetVersion)\n", attn_cudnn_version(pr.cudnn));
    int rc = probe_setup(&pr);
    if (rc) {
        attn_cudnn_close(pr.cudnn);
        return rc;
    }
    printf("batch %d, heads %d, BSHD; tolerance max|O-G| <= 0.02 (fp16), 0.05 (bf16)\n", BATCH, HEADS);
    run_matrix(&pr);

    if (!quick) {
        printf("-- alternatives: ATTN_CUDNN_GRAPH=composite (non-causal), ATTN_CUDNN_SQ_GT_SK=slice (causal Sq > Sk)\n");
        for (int t = 0; t < 2; t++)
            for (int di = 0; di < 2; di++) {
                setenv("ATTN_CUDNN_GRAPH", "composite", 1);
                for (int s = 0; s < 4; s++)
                    run_case(&pr, dts[t], dims[di], 0, seqs[s][0], seqs[s][1], "[composite]");
                unsetenv("ATTN_CUDNN_GRAPH");
                setenv("ATTN_CUDNN_SQ_GT_SK", "slice", 1);
                run_case(&pr, dts[t], dims[di], 1, 512, 127, "[slice]");
                unsetenv("ATTN_CUDNN_SQ_GT_SK");
            }
    }
    printf("%d PASS, %d FAIL, %d refused\n", pr.n_pass, pr.n_fail, pr.n_refused);
    cudaStreamDestroy(pr.stream);
    attn_ref_destroy(pr.ref);
    attn_cudnn_close(pr.cudnn);
    return pr.n_fail ? 1 : 0;
}
