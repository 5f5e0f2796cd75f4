/* attn_benchmark's report: the fragment and the exit, the phases' times, the figures the
 * timings give, the measurement's validity and the verdict by the thresholds. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "results.h"

/* ---- the fragment and the exit ------------------------------------------------------ */

static void write_fragment(const bench *bm) {
    if (!bm->fragments || !bm->doc) return;
    char err[512], path[1024], file[512];
    snprintf(file, sizeof file, "%s", bm->name);
    for (char *c = file; *c; c++)
        if (*c == '/') *c = '.';
    snprintf(path, sizeof path, "%s/%s.json", bm->fragments, file);
    if (attn_mkdirs(bm->fragments, err, sizeof err) || attn_json_write_atomic(bm->doc, path, err, sizeof err))
        fprintf(stderr, "attn_benchmark: %s\n", err);
}

/* Records the verdict and its reason, writes the fragment, exits. */
void bench_finish(bench *bm, const char *verdict, int code, const char *fmt, ...) {
    char reason[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    printf("%s: %s\n", !strcmp(verdict, "pass") ? "PASSED" : !strcmp(verdict, "skipped") ? "SKIPPED"
                       : !strcmp(verdict, "not_supported") ? "NOT SUPPORTED" : "FAILED", reason);
    if (bm->doc) {
        json_object_set_new(bm->doc, "verdict", json_string(verdict));
        json_object_set_new(bm->doc, "reason", json_string(reason));
        write_fragment(bm);
    }
    exit(code);
}

/* Wall time of each phase, recorded in the fragment ("phases_s"): where a test's time goes. */
void bench_phase_done(bench *bm, const char *name) {
    double now = attn_wall_s();
    if (bm->phases) json_object_set_new(bm->phases, name, json_real(now - bm->phase_start));
    bm->phase_start = now;
}

static void measure(const char *name, double value, const char *unit) {
    printf("<CTestMeasurement type=\"numeric/double\" name=\"%s%s\">%.6g</CTestMeasurement>\n",
           name, unit, value);
}

/* ---- figures, verdict --------------------------------------------------------------- */

/* " (bwd)", " (fwd_bwd)": what the summary line's kernel time is; "" for the forward */
static const char *pass_words(const bench *bm) {
    return bm->pass == ATTN_PASS_BWD ? " (bwd)" : bm->pass == ATTN_PASS_FWD_BWD ? " (fwd_bwd)" : "";
}

/* A version-2 workload's work, counted row by row: 4 D FLOPs per visible (query, key) pair
 * and head; Q read and O written once, and per KV head the keys (K and V rows) that some
 * query of the sequence sees, read once. Visible: -window_left <= j - (i + S_k - S_q) <=
 * window_right (causal: 0), 0 <= j < S_k, as attn_abi.h defines it. */
static void count_workload(const bench *bm, double *flops, double *bytes) {
    const int right = bm->causal ? 0 : bm->window_right;
    double pairs = 0, keys_read = 0, rows = 0;
    for (int b = 0; b < bm->nseq; b++) {
        const int64_t sq = bm->lens_q[b], sk = bm->lens_k[b];
        int64_t first = sk, last = -1; /* the keys some row sees */
        for (int64_t i = 0; i < sq; i++) {
            const int64_t diag = i + sk - sq;
            int64_t lo = bm->window_left >= 0 ? diag - bm->window_left : 0, hi = right >= 0 ? diag + right : sk - 1;
            lo = lo < 0 ? 0 : lo, hi = hi > sk - 1 ? sk - 1 : hi;
            if (hi < lo) continue;
            pairs += (double)(hi - lo + 1);
            first = lo < first ? lo : first, last = hi > last ? hi : last;
        }
        keys_read += last >= first ? (double)(last - first + 1) : 0;
        rows += (double)sq;
    }
    *flops = 4.0 * bm->head_dim * bm->heads * pairs;
    *bytes = 2.0 * bm->head_dim * (2 * rows * bm->heads + 2 * keys_read * bm->heads_k);
}

struct figures bench_compute_figures(const bench *bm) {
    struct figures f;
    const attn_timing *tk = &bm->tk, *tr = &bm->tr, *tc = &bm->tc;
    /* work, roofline, speedups: the dense matrix keeps its approximate count (S^2 / 2 pairs
     * when causal) so that its figures stay comparable with earlier runs (work.h) */
    const bench_work w = bench_work_dense(bm->pass, bm->batch, bm->heads, bm->seqlen, bm->head_dim, bm->causal);
    f.flops = w.flops, f.bytes = w.bytes;
    if (bm->workload > ATTN_WORKLOAD_CAUSAL) count_workload(bm, &f.flops, &f.bytes);
    f.peak = (bm->dtype == ATTN_BF16 ? bm->th.bf16_tflops : bm->th.fp16_tflops) * 1e12;
    f.bw = bm->th.bandwidth_gbs * 1e9;
    f.floor_s = fmax(f.flops / f.peak, f.bytes / f.bw);
    f.t = tk->median_ms * 1e-3;
    f.roofline = f.floor_s / f.t, f.roofline_hi = f.floor_s / (tk->ci_lo_ms * 1e-3);
    f.sp_ref = f.sp_ref_lo = f.sp_ref_hi = NAN;
    if (bm->have_reference) {
        f.sp_ref = tr->median_ms / tk->median_ms, f.sp_ref_lo = tr->ci_lo_ms / tk->ci_hi_ms;
        f.sp_ref_hi = tr->ci_hi_ms / tk->ci_lo_ms;
    }
    f.sp_cud = NAN, f.sp_cud_lo = NAN, f.sp_cud_hi = NAN;
    if (bm->have_cudnn) {
        f.sp_cud = tc->median_ms / tk->median_ms, f.sp_cud_lo = tc->ci_lo_ms / tk->ci_hi_ms;
        f.sp_cud_hi = tc->ci_hi_ms / tk->ci_lo_ms;
    }
    return f;
}

/* The figures on stdout: a readable summary and CTest's measurement tags. */
void bench_print_figures(const bench *bm, const struct figures *f) {
    const attn_timing *tk = &bm->tk, *tr = &bm->tr, *tc = &bm->tc;
    printf("%s: kernel%s %.4f ms [%.4f, %.4f] (%d samples, %d dropped for clock%s), %.1f TFLOP/s, %.0f GB/s, "
           "roofline %.1f%% (%s-bound floor %.4f ms)\n", bm->name, pass_words(bm), tk->median_ms, tk->ci_lo_ms,
           tk->ci_hi_ms, tk->samples, tk->dropped_clock, tk->noisy ? ", noisy" : "", f->flops / f->t * 1e-12,
           f->bytes / f->t * 1e-9, 100 * f->roofline, f->flops / f->peak > f->bytes / f->bw ? "compute" : "memory",
           f->floor_s * 1e3);
    const char *ref_name = bm->pass == ATTN_PASS_FWD ? "cuBLAS + softmax"
                         : bm->pass == ATTN_PASS_BWD ? "cuBLAS reference backward, fp16/bf16 twin"
                                                     : "cuBLAS + softmax, then the reference backward's twin";
    if (bm->have_reference)
        printf("  baseline (%s) %.4f ms: speedup %.2fx [%.2f, %.2f]\n", ref_name, tr->median_ms, f->sp_ref,
               f->sp_ref_lo, f->sp_ref_hi);
    else if (bm->reference_why[0])
        printf("  baseline (%s): %s\n", ref_name, bm->reference_why);
    else
        printf("  baseline (cuBLAS + softmax): none for the %s workload (version-1 problems only)\n",
               bm->workload_name);
    if (bm->measured_by[0]) printf("  baselines timed by %s in this run\n", bm->measured_by);
    if (bm->have_cudnn) {
        const json_t *e = bm->cudnn_engine;
        const char *engine = json_string_value(json_object_get(e, "engine"));
        printf("  cuDNN (%s, %ld, engine %s, %lld of %lld configs built%s) %.4f ms: speedup %.2fx [%.2f, %.2f]\n",
               bm->cudnn_kind, bm->cudnn_version, engine ? engine : "?",
               e ? (long long)json_integer_value(json_object_get(e, "configs_built")) : 0LL,
               e ? (long long)json_integer_value(json_object_get(e, "configs_tried")) : 0LL,
               e && json_is_true(json_object_get(e, "tuned")) ? ", the fastest kept" : ", the first kept",
               tc->median_ms, f->sp_cud, f->sp_cud_lo, f->sp_cud_hi);
        if (bm->cudnn_lib[0]) printf("  cuDNN library: %s\n", bm->cudnn_lib);
    } else
        printf("  cuDNN: not available: %s\n", bm->cudnn_why);
    measure("kernel_ms", tk->median_ms, "");
    measure("tflops", f->flops / f->t * 1e-12, "");
    measure("gbs", f->bytes / f->t * 1e-9, "");
    measure("roofline_efficiency", f->roofline, "");
    if (bm->have_reference) measure("speedup_reference", f->sp_ref, "");
    if (bm->have_cudnn) measure("speedup_cudnn", f->sp_cud, "");
}

/* The figures into the fragment; done before the verdict so a skipped or failed test still
 * carries them (scripts/set_thresholds.py sets minimums from them). */
void bench_record_figures(bench *bm, const struct figures *f) {
    json_object_set_new(bm->doc, "kernel_timing", attn_timing_json(&bm->tk));
    json_object_set_new(bm->doc, "flops", json_real(f->flops));
    json_object_set_new(bm->doc, "bytes", json_real(f->bytes));
    json_object_set_new(bm->doc, "tflops", json_real(f->flops / f->t * 1e-12));
    json_object_set_new(bm->doc, "gbs", json_real(f->bytes / f->t * 1e-9));
    json_object_set_new(bm->doc, "roofline_efficiency", json_real(f->roofline));
    json_object_set_new(bm->doc, "roofline_bound",
                        json_string(f->flops / f->peak > f->bytes / f->bw ? "compute" : "memory"));
    json_t *base = json_object();
    if (bm->have_reference)
        json_object_set_new(base, "reference", json_pack("{s:o, s:f, s:[f,f]}", "timing", attn_timing_json(&bm->tr),
                                                          "speedup", f->sp_ref, "speedup_ci", f->sp_ref_lo,
                                                          f->sp_ref_hi));
    json_t *cud = bench_cudnn_json(bm);
    if (cud && bm->have_cudnn) {
        json_object_set_new(cud, "speedup", json_real(f->sp_cud));
        json_object_set_new(cud, "speedup_ci", json_pack("[f,f]", f->sp_cud_lo, f->sp_cud_hi));
    }
    json_object_set_new(base, "cudnn", cud ? cud : json_pack("{s:b, s:s}", "available", 0, "reason", "out of memory"));
    if (bm->reference_why[0]) json_object_set_new(base, "reference_not_run", json_string(bm->reference_why));
    if (bm->measured_by[0]) json_object_set_new(base, "timed_by", json_string(bm->measured_by));
    json_object_set_new(bm->doc, "baselines", base);
    json_object_set_new(bm->doc, "peaks", json_pack("{s:f, s:f}", "tflops", f->peak * 1e-12, "gbs", f->bw * 1e-9));
}

/* A figure the harness cannot stand behind fails as an invalid measurement, never passes:
 * too few samples (the timeout path), a time under the physical floor of the work on this
 * GPU, or wrong output left by the timed launches. Recorded in the fragment either way. */
enum { FLOOR_MARGIN_PCT = 25 }; /* the calibrated peaks are measured (a GEMM, a copy), and L2
                                   write-back can absorb O's writes: 125 % of the roofline,
                                   at the CI's slow end, is beyond both */
void bench_check_measurement(bench *bm, const struct figures *f) {
    char why[4096] = "";
    size_t wl = 0;
    const attn_timing *t[3] = {&bm->tk, bm->have_reference ? &bm->tr : NULL, bm->have_cudnn ? &bm->tc : NULL};
    const char *who[3] = {"the kernel", "the cuBLAS baseline", "the cuDNN baseline"};
    int samples_ok = 1;
    for (int i = 0; i < 3; i++)
        if (t[i] && t[i]->samples < bm->rules.min_samples) {
            samples_ok = 0;
            wl += snprintf(why + wl, sizeof why - wl, "%s has %d samples, fewer than the %d the rules ask "
                           "(the timeout of %.1f s ended it); ", who[i], t[i]->samples, bm->rules.min_samples,
                           bm->rules.timeout_s);
        }
    const double slowest = bm->tk.ci_hi_ms * 1e-3; /* the CI's slow end */
    const int have_peaks = f->peak > 0 && f->bw > 0; /* no thresholds file: no peaks, no floor */
    const int floor_ok = !have_peaks || slowest * (1 + FLOOR_MARGIN_PCT / 100.0) >= f->floor_s;
    if (!floor_ok)
        wl += snprintf(why + wl, sizeof why - wl, "the kernel's time %.4g ms (CI up to %.4g ms) is under the "
                       "physical floor of its work on this GPU, %.4g ms (%.3g FLOP at %.0f TFLOP/s, %.3g bytes at "
                       "%.0f GB/s), by more than %d %%: %.0f %% of the roofline; work not on the timed stream, or "
                       "skipped; ", bm->tk.median_ms, bm->tk.ci_hi_ms, f->floor_s * 1e3, f->flops, f->peak * 1e-12,
                       f->bytes, f->bw * 1e-9, FLOOR_MARGIN_PCT, 100 * f->roofline);
    const int output_ok = !bm->timed_output_why[0];
    if (!output_ok)
        wl += snprintf(why + wl, sizeof why - wl, "the output the timed launches left is wrong (%s); ",
                       bm->timed_output_why);
    json_object_set_new(bm->doc, "measurement", json_pack("{s:b, s:{s:b, s:i, s:i}, s:{s:b, s:b, s:f, s:f}, s:{s:b, s:s}}",
        "valid", samples_ok && floor_ok && output_ok,
        "samples", "ok", samples_ok, "kernel", bm->tk.samples, "min", bm->rules.min_samples,
        "physical_floor", "ok", floor_ok, "checked", have_peaks, "floor_ms", have_peaks ? f->floor_s * 1e3 : 0.0,
        "kernel_ci_hi_ms", bm->tk.ci_hi_ms,
        "timed_output", "ok", output_ok, "reason", bm->timed_output_why));
    if (wl) bench_finish(bm, "invalid_measurement", 1, "invalid measurement: %s", why);
}

/* Judges the figures by the thresholds class and exits with the verdict. */
void bench_judge(bench *bm, const struct figures *f) {
    const attn_threshold_class *cls = bm->cls;
    if (!cls) {
        char pass[16] = ""; /* the section's pass word, which fwd's may leave out */
        if (bm->pass != ATTN_PASS_FWD) snprintf(pass, sizeof pass, " %s", attn_pass_name(bm->pass));
        bench_finish(bm, "skipped", ATTN_EXIT_SKIP, "measured, but no thresholds class in %s covers %s%s %s d%d %s s%d "
               "q%d; add a section [%s%s <dtype|*> <d64|d128|*> <%s|*> <lo>-<hi> [q<lo>-<hi>]] "
               "(scripts/set_thresholds.py writes them from a results file)", bm->tpath, bm->judge_as, pass,
               bm->dtype_name, bm->head_dim, bm->workload_name, bm->seqlen, bm->seqlen_q, bm->judge_as, pass,
               bm->workload_name);
    }
    json_t *jt = json_pack("{s:s, s:s, s:s, s:f}", "file", bm->tpath, "judged_as", bm->judge_as, "class",
                           cls->section, "min_roofline", cls->min_roofline);
    json_object_set_new(jt, "min_speedup_reference",
                        isnan(cls->min_speedup_reference) ? json_null() : json_real(cls->min_speedup_reference));
    json_object_set_new(jt, "min_speedup_cudnn",
                        isnan(cls->min_speedup_cudnn) ? json_null() : json_real(cls->min_speedup_cudnn));
    json_object_set_new(bm->doc, "thresholds", jt);

    /* the verdict: fail only when confidently below a minimum (the optimistic end of the
     * confidence interval is still below it) */
    char fails[2048] = "";
    size_t fl = 0;
    if (bm->have_reference && f->sp_ref_hi < cls->min_speedup_reference)
        fl += snprintf(fails + fl, sizeof fails - fl, "speedup vs reference %.2fx (CI up to %.2fx) < minimum %.2fx; ",
                       f->sp_ref, f->sp_ref_hi, cls->min_speedup_reference);
    if (bm->have_cudnn && !isnan(cls->min_speedup_cudnn) && f->sp_cud_hi < cls->min_speedup_cudnn)
        fl += snprintf(fails + fl, sizeof fails - fl, "speedup vs cuDNN %.2fx (CI up to %.2fx) < minimum %.2fx; ",
                       f->sp_cud, f->sp_cud_hi, cls->min_speedup_cudnn);
    if (f->roofline_hi < cls->min_roofline)
        fl += snprintf(fails + fl, sizeof fails - fl, "roofline efficiency %.1f%% (CI up to %.1f%%) < minimum %.1f%%; ",
                       100 * f->roofline, 100 * f->roofline_hi, 100 * cls->min_roofline);
    if (fl)
        bench_finish(bm, "fail", 1, "%s(thresholds %s [%s], judged as %s)", fails, bm->tpath, cls->section,
                     bm->judge_as);
    char cud[64] = "n/a", ref[64] = "n/a";
    if (bm->have_cudnn) snprintf(cud, sizeof cud, "%.2fx", f->sp_cud);
    if (bm->have_reference) snprintf(ref, sizeof ref, "%.2fx", f->sp_ref);
    bench_finish(bm, "pass", 0, "speedup %s vs reference, %s vs cuDNN, roofline %.1f%% (thresholds [%s] in %s)", ref, cud,
           100 * f->roofline, cls->section, bm->tpath);
}
