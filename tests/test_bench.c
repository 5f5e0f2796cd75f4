/* Benchmark host logic: statistics, the thresholds file, the work counted per pass. */
#include "unit.h"
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch_trace.h"
#include "results.h"
#include "stats.h"
#include "thresholds.h"
#include "work.h"

START_TEST(median_min_rsd) {
    double x[5] = {5, 1, 4, 2, 3}, y[4] = {4, 1, 3, 2};
    ck_assert_double_eq(attn_median(x, 5), 3);
    ck_assert_double_eq(attn_median(y, 4), 2.5);
    ck_assert_double_eq(x[0], 5); /* not modified */
    ck_assert_double_eq(attn_min(x, 5), 1);
    double same[3] = {2, 2, 2};
    ck_assert_double_eq(attn_rsd(same, 3), 0);
    ck_assert_double_eq_tol(attn_rsd(x, 5), sqrt(2.5) / 3, 1e-12);
}
END_TEST

START_TEST(bootstrap_ci_brackets_the_median) {
    double x[200];
    for (int i = 0; i < 200; i++) x[i] = 1.0 + 0.01 * ((i * 37) % 100) / 100.0; /* 1.0 .. 1.01 */
    double lo, hi, m = attn_median(x, 200);
    attn_bootstrap_median_ci(x, 200, 1000, 7, &lo, &hi);
    ck_assert(lo <= m && m <= hi);
    ck_assert(hi - lo < 0.005);
    double lo2, hi2;
    attn_bootstrap_median_ci(x, 200, 1000, 7, &lo2, &hi2);
    ck_assert(lo == lo2 && hi == hi2); /* deterministic */
    double c[10] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
    attn_bootstrap_median_ci(c, 10, 100, 1, &lo, &hi);
    ck_assert(lo == 3 && hi == 3);
}
END_TEST

START_TEST(gpu_slug) {
    char s[64];
    attn_gpu_slug("NVIDIA H100 80GB HBM3", s, sizeof s);
    ck_assert_str_eq(s, "nvidia_h100_80gb_hbm3");
    attn_gpu_slug("  NVIDIA  A100-SXM4-40GB ", s, sizeof s);
    ck_assert_str_eq(s, "nvidia_a100_sxm4_40gb");
}
END_TEST

static char path[64];
static const char *write_file(const char *text) { return attn_unit_temp_file(path, text); }

static const char *HEAD = "[gpu]\nname = Test GPU\n[peaks]\nfp16_tflops = 700\nbf16_tflops = 710\nbandwidth_gbs = 3000\n";

static void expect_error(const char *text, const char *expect) {
    attn_thresholds t;
    char err[1024] = "", want[600];
    write_file(text);
    snprintf(want, sizeof want, expect, path);
    ck_assert_int_ne(attn_thresholds_load(path, &t, err, sizeof err), 0);
    unlink(path);
    ck_assert_msg(strstr(err, want) != NULL, "expected '%s' in '%s'", want, err);
}

START_TEST(classes_match_first) {
    char text[1024];
    snprintf(text, sizeof text, "%s[simple bf16 d128 causal 512-2048]\nmin_speedup_reference = 3\nmin_roofline = 0.5\n"
             "[simple * * * 1-2048]\nmin_speedup_reference = 1.5\nmin_speedup_cudnn = 0.2\nmin_roofline = 0.1\n", HEAD);
    attn_thresholds t;
    char err[512];
    ck_assert_msg(attn_thresholds_load(write_file(text), &t, err, sizeof err) == 0, "%s", err);
    unlink(path);
    ck_assert_str_eq(t.gpu_name, "Test GPU");
    ck_assert_double_eq(t.bf16_tflops, 710);
    ck_assert_int_eq(t.nclasses, 2);
    const attn_threshold_class *k = attn_thresholds_find(&t, "simple", ATTN_PASS_FWD, ATTN_BF16, 128, 1, 1024, 1024);
    ck_assert_ptr_eq(k, &t.classes[0]);
    ck_assert(isnan(k->min_speedup_cudnn));
    k = attn_thresholds_find(&t, "simple", ATTN_PASS_FWD, ATTN_F16, 128, 1, 1024, 1024);
    ck_assert_ptr_eq(k, &t.classes[1]);
    ck_assert_double_eq(k->min_speedup_cudnn, 0.2);
    ck_assert_ptr_eq(attn_thresholds_find(&t, "simple", ATTN_PASS_FWD, ATTN_BF16, 128, 1, 256, 256), &t.classes[1]);
    ck_assert_ptr_null(attn_thresholds_find(&t, "other", ATTN_PASS_FWD, ATTN_BF16, 128, 1, 256, 256));
    ck_assert_ptr_null(attn_thresholds_find(&t, "simple", ATTN_PASS_FWD, ATTN_BF16, 128, 1, 4096, 4096));
}
END_TEST

START_TEST(missing_peak) {
    expect_error("[gpu]\nname = X\n[peaks]\nfp16_tflops = 700\nbandwidth_gbs = 3000\n",
                 "%s: missing peak 'bf16_tflops' in [peaks] (a missing peak is an error, not a zero)");
}
END_TEST
START_TEST(zero_peak) {
    expect_error("[gpu]\nname = X\n[peaks]\nfp16_tflops = 0\n", "%s:4: [peaks] fp16_tflops: expected a positive number, got '0'");
}
END_TEST
START_TEST(bad_class) {
    char text[512];
    snprintf(text, sizeof text, "%s[simple fp32 d64 full 1-8]\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s:8: section [simple fp32 d64 full 1-8]: expected [<kernel>");
}
END_TEST
START_TEST(class_lacks_key) {
    char text[512];
    snprintf(text, sizeof text, "%s[simple * * * 1-8]\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s: section [simple * * * 1-8] lacks min_speedup_reference");
}
END_TEST
/* Version 2's workloads are a class's fourth word; they have no cuBLAS baseline, so their
 * classes may omit min_speedup_reference (a class of a dense mask, or of any, may not). */
START_TEST(workload_classes) {
    char text[1024];
    snprintf(text, sizeof text, "%s[k bf16 d128 decode 4096-131072 q1]\nmin_roofline = 0.7\nmin_speedup_cudnn = 1\n"
             "[k * * window 1-8192]\nmin_roofline = 0.2\n[k * * causal 1-8192]\nmin_speedup_reference = 2\n"
             "min_roofline = 0.3\n[k * * decode 1-131072 q2-16]\nmin_roofline = 0.4\n", HEAD);
    attn_thresholds t;
    char err[512];
    ck_assert_msg(attn_thresholds_load(write_file(text), &t, err, sizeof err) == 0, "%s", err);
    unlink(path);
    const attn_threshold_class *k = attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_BF16, 128, ATTN_WORKLOAD_DECODE, 8192, 1);
    ck_assert_ptr_eq(k, &t.classes[0]);
    ck_assert(isnan(k->min_speedup_reference));
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_BF16, 128, ATTN_WORKLOAD_DECODE, 8192, 16), &t.classes[3]);
    ck_assert_ptr_null(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_BF16, 128, ATTN_WORKLOAD_DECODE, 8192, 17));
    ck_assert_ptr_null(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_F16, 128, ATTN_WORKLOAD_DECODE, 8192, 1));
    ck_assert_ptr_null(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_BF16, 128, ATTN_WORKLOAD_VARLEN, 8192, 8192));
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_F16, 64, ATTN_WORKLOAD_WINDOW, 4096, 4096), &t.classes[1]);
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_F16, 64, ATTN_WORKLOAD_CAUSAL, 4096, 4096), &t.classes[2]);
    attn_thresholds_free(&t);
    ck_assert_str_eq(attn_workload_name(ATTN_WORKLOAD_VARLEN), "varlen");
    ck_assert_int_eq(attn_workload_parse("window"), ATTN_WORKLOAD_WINDOW);
    ck_assert_int_eq(attn_workload_parse("prefill"), -1);
    ck_assert_ptr_null(attn_workload_name(ATTN_WORKLOAD_COUNT));
    snprintf(text, sizeof text, "%s[k * * full 1-8]\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s: section [k * * full 1-8] lacks min_speedup_reference");
    snprintf(text, sizeof text, "%s[k * * prefill 1-8]\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s:8: section [k * * prefill 1-8]: expected [<kernel>");
    snprintf(text, sizeof text, "%s[k * * decode 1-8 q0]\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s:8: section [k * * decode 1-8 q0]: expected [<kernel>");
}
END_TEST
/* A class's optional pass word after the kernel: a section without it is fwd's, one with it
 * covers that pass only; every other word as without it. */
START_TEST(pass_classes) {
    char text[1024];
    snprintf(text, sizeof text, "%s[k bwd fp16 d128 causal 512-16384]\nmin_speedup_reference = 2\nmin_roofline = 0.3\n"
             "[k fp16 d128 causal 512-16384]\nmin_speedup_reference = 5\nmin_roofline = 0.5\n"
             "[k fwd_bwd * * * 1-16384]\nmin_speedup_reference = 3\nmin_speedup_cudnn = 0.9\nmin_roofline = 0.4\n"
             "[k fwd bf16 * decode 1-131072 q1]\nmin_roofline = 0.6\n", HEAD);
    attn_thresholds t;
    char err[512];
    ck_assert_msg(attn_thresholds_load(write_file(text), &t, err, sizeof err) == 0, "%s", err);
    unlink(path);
    ck_assert_int_eq(t.nclasses, 4);
    ck_assert_int_eq(t.classes[0].pass, ATTN_PASS_BWD);
    ck_assert_int_eq(t.classes[1].pass, ATTN_PASS_FWD);
    ck_assert_int_eq(t.classes[2].pass, ATTN_PASS_FWD_BWD);
    ck_assert_int_eq(t.classes[3].pass, ATTN_PASS_FWD);
    ck_assert_str_eq(t.classes[0].kernel, "k");
    ck_assert_int_eq(t.classes[0].dtype, ATTN_F16);
    ck_assert_int_eq(t.classes[0].head_dim, 128);
    ck_assert_int_eq(t.classes[0].workload, ATTN_WORKLOAD_CAUSAL);
    ck_assert_int_eq(t.classes[0].s_lo, 512);
    ck_assert_int_eq(t.classes[0].s_hi, 16384);
    ck_assert_int_eq(t.classes[3].q_hi, 1);
    ck_assert_str_eq(t.classes[0].section, "k bwd fp16 d128 causal 512-16384");
    /* each pass finds its own class, never another pass's */
    const int C = ATTN_WORKLOAD_CAUSAL;
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_BWD, ATTN_F16, 128, C, 2048, 2048), &t.classes[0]);
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_F16, 128, C, 2048, 2048), &t.classes[1]);
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_FWD_BWD, ATTN_F16, 128, C, 2048, 2048), &t.classes[2]);
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_FWD_BWD, ATTN_BF16, 64, 0, 16384, 16384), &t.classes[2]);
    ck_assert_ptr_null(attn_thresholds_find(&t, "k", ATTN_PASS_BWD, ATTN_BF16, 128, C, 2048, 2048));
    ck_assert_ptr_null(attn_thresholds_find(&t, "k", ATTN_PASS_BWD, ATTN_F16, 128, C, 256, 256));
    ck_assert_ptr_eq(attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_BF16, 128, ATTN_WORKLOAD_DECODE, 8192, 1),
                     &t.classes[3]);
    attn_thresholds_free(&t);
    ck_assert_str_eq(attn_pass_name(ATTN_PASS_FWD_BWD), "fwd_bwd");
    ck_assert_int_eq(attn_pass_parse("bwd"), ATTN_PASS_BWD);
    ck_assert_int_eq(attn_pass_parse("backward"), -1);
    ck_assert_ptr_null(attn_pass_name(ATTN_PASS_COUNT));
    ck_assert_ptr_null(attn_pass_name(-1));
    /* a pass word where none fits, twice, or alone */
    snprintf(text, sizeof text, "%s[k fp16 bwd d128 causal 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s:8: section [k fp16 bwd d128 causal 1-8]: expected [<kernel> [fwd|bwd|fwd_bwd]");
    snprintf(text, sizeof text, "%s[k bwd fwd * * full 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s:8: section [k bwd fwd * * full 1-8]: expected [<kernel>");
    snprintf(text, sizeof text, "%s[k bwd]\nmin_speedup_reference = 1\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s:8: section [k bwd]: expected [<kernel>");
    snprintf(text, sizeof text, "%s[k bwd * * full 1-8]\nmin_roofline = 0.1\n", HEAD);
    expect_error(text, "%s: section [k bwd * * full 1-8] lacks min_speedup_reference");
}
END_TEST

/* The dense matrix's work by pass (suites/benchmark/work.c): the forward's FLOPs 4 B H S^2 D
 * (halved when causal), the backward 2.5x, forward + backward 3.5x; bytes the least traffic. */
START_TEST(work_by_pass) {
    /* FlashAttention's S = 2048, d128: batch 8, 16 heads */
    const double n = 8.0 * 2048 * 16 * 128, rows = 8.0 * 16 * 2048, fwd = 4.0 * 8 * 16 * 2048.0 * 2048 * 128;
    bench_work w = bench_work_dense(ATTN_PASS_FWD, 8, 16, 2048, 128, 0);
    ck_assert_double_eq(w.flops, fwd);
    ck_assert_double_eq(w.bytes, 4 * n * 2);
    w = bench_work_dense(ATTN_PASS_FWD, 8, 16, 2048, 128, 1);
    ck_assert_double_eq(w.flops, fwd / 2);
    w = bench_work_dense(ATTN_PASS_BWD, 8, 16, 2048, 128, 0);
    ck_assert_double_eq(w.flops, 2.5 * fwd);
    ck_assert_double_eq(w.bytes, 8 * n * 2 + 4 * rows); /* Q K V O dO read, dQ dK dV written, the LSE read */
    w = bench_work_dense(ATTN_PASS_BWD, 8, 16, 2048, 128, 1);
    ck_assert_double_eq(w.flops, 2.5 * fwd / 2);
    ck_assert_double_eq(w.bytes, 8 * n * 2 + 4 * rows); /* causal moves the same tensors */
    w = bench_work_dense(ATTN_PASS_FWD_BWD, 8, 16, 2048, 128, 1);
    ck_assert_double_eq(w.flops, 3.5 * fwd / 2);
    ck_assert_double_eq(w.bytes, 4 * n * 2 + 4 * rows + 8 * n * 2 + 4 * rows); /* the forward writes the LSE */
    /* S = 16384, d64: batch 1, 32 heads; 1.76e13 backward FLOPs, full */
    w = bench_work_dense(ATTN_PASS_BWD, 1, 32, 16384, 64, 0);
    ck_assert_double_eq(w.flops, 2.5 * 4.0 * 32 * 16384.0 * 16384 * 64);
    ck_assert_double_eq(w.bytes, 16.0 * 16384 * 32 * 64 + 4.0 * 32 * 16384);
    w = bench_work_dense(ATTN_PASS_COUNT, 1, 32, 16384, 64, 0);
    ck_assert(w.flops == 0 && w.bytes == 0);
}
END_TEST
START_TEST(roofline_above_one) {
    char text[512];
    snprintf(text, sizeof text, "%s[simple * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 80\n", HEAD);
    expect_error(text, "%s:9: [simple * * * 1-8] min_roofline: expected a fraction in (0, 1]");
}
END_TEST
START_TEST(unknown_key) {
    expect_error("[gpu]\nname = X\ncolour = red\n", "%s:3: unknown key 'colour' in section [gpu]");
}
END_TEST

/* Every thresholds file in the repository loads, and names the GPU its file name says: a
 * file the benchmarks cannot read fails here, in CI, not on the GPU machine. */
START_TEST(shipped_files_load) {
    const char *dir = getenv("ATTN_THRESHOLDS_DIR");
    ck_assert_msg(dir != NULL, "ATTN_THRESHOLDS_DIR is not set (run through ctest)");
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".ini") || !strcmp(e->d_name, "tolerance.ini")) continue;
        char p[1024], err[1024], slug[256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        attn_thresholds t;
        ck_assert_msg(attn_thresholds_load(p, &t, err, sizeof err) == 0, "%s", err);
        attn_gpu_slug(t.gpu_name, slug, sizeof slug);
        ck_assert_msg(strlen(slug) == n - 4 && !strncmp(slug, e->d_name, n - 4), "%s names GPU '%s'", p, t.gpu_name);
        ck_assert_int_ge(t.nclasses, 1);
        attn_thresholds_free(&t);
        files++;
    }
    closedir(d);
    ck_assert_int_ge(files, 1);
}
END_TEST

/* More class sections than the first allocation holds (64): all kept, in file order. */
START_TEST(many_classes) {
    size_t cap = 200 * 96 + 256, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "%s", HEAD);
    for (int i = 1; i <= 200; i++)
        len += (size_t)snprintf(text + len, cap - len, "[k * * * %d-%d]\nmin_speedup_reference = %d\nmin_roofline = 0.5\n", i, i, i);
    attn_thresholds t;
    char err[512];
    ck_assert_msg(attn_thresholds_load(write_file(text), &t, err, sizeof err) == 0, "%s", err);
    unlink(path);
    free(text);
    ck_assert_int_eq(t.nclasses, 200);
    const attn_threshold_class *k = attn_thresholds_find(&t, "k", ATTN_PASS_FWD, ATTN_F16, 64, 0, 150, 150);
    ck_assert_ptr_nonnull(k);
    ck_assert_double_eq(k->min_speedup_reference, 150);
    ck_assert(isnan(k->min_speedup_cudnn));
    attn_thresholds_free(&t);
}
END_TEST

/* A timing survives the trip through the results schema (the benchmarks share baseline
 * timings within a run through it), and a record missing a field is refused. */
START_TEST(timing_json_round_trip) {
    attn_timing a = {.samples = 37, .dropped_clock = 2, .noisy = 1, .held = 1, .enqueue_ms = 0.004,
                     .median_ms = 1.25, .min_ms = 1.2, .ci_lo_ms = 1.24, .ci_hi_ms = 1.26, .rsd = 0.003,
                     .mean_clock_mhz = 1980, .gpu_time_s = 0.51};
    json_t *j = attn_timing_json(&a);
    attn_timing b;
    ck_assert_int_eq(attn_timing_from_json(j, &b), 0);
    ck_assert_int_eq(b.samples, 37);
    ck_assert_int_eq(b.dropped_clock, 2);
    ck_assert_int_eq(b.noisy, 1);
    ck_assert_int_eq(b.held, 1);
    ck_assert_double_eq(b.median_ms, 1.25);
    ck_assert_double_eq(b.ci_lo_ms, 1.24);
    ck_assert_double_eq(b.ci_hi_ms, 1.26);
    ck_assert_double_eq(b.enqueue_ms, 0.004);
    json_object_del(j, "ci_hi_ms");
    ck_assert_int_ne(attn_timing_from_json(j, &b), 0);
    ck_assert_int_ne(attn_timing_from_json(NULL, &b), 0);
    json_decref(j);
}
END_TEST

START_TEST(results_never_overwrite) {
    char dir[] = "/tmp/attn_res_XXXXXX", err[512], p1[1200], p2[1200], sub[1100];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/gpu/a", dir);
    ck_assert_msg(attn_mkdirs(sub, err, sizeof err) == 0, "%s", err);
    json_t *a = json_pack("{s:i}", "run", 1), *b = json_pack("{s:i}", "run", 2);
    ck_assert_msg(attn_json_write_new(a, sub, "2026-01-01-abc", p1, sizeof p1, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(attn_json_write_new(b, sub, "2026-01-01-abc", p2, sizeof p2, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(p1, "/2026-01-01-abc.json") != NULL, "%s", p1);
    ck_assert_msg(strstr(p2, "/2026-01-01-abc-2.json") != NULL, "%s", p2);
    json_error_t je;
    json_t *back = json_load_file(p1, 0, &je);
    ck_assert_ptr_nonnull(back);
    ck_assert_int_eq(json_integer_value(json_object_get(back, "run")), 1); /* the first kept */
    json_decref(back);
    ck_assert_msg(attn_json_write_atomic(b, p1, err, sizeof err) == 0, "%s", err); /* replaces */
    back = json_load_file(p1, 0, &je);
    ck_assert_int_eq(json_integer_value(json_object_get(back, "run")), 2);
    json_decref(back), json_decref(a), json_decref(b);
    unlink(p1), unlink(p2);
}
END_TEST

/* The occupancy rules on an H100's limits (cudaDeviceGetAttribute values of sm_90). */
static const attn_sm_limits h100 = {65536, 233472, 1024, 2048, 32, 32};

START_TEST(occupancy_by_registers) {
    attn_launch_info i;
    /* flash2 d128: 128 threads x 182 registers -> 5888 per warp -> 11 warps -> 2 blocks; its
     * 80 KB of shared memory also allows 2, and registers are the first to bind */
    attn_occupancy(&h100, 128, 182, 80 * 1024, &i);
    ck_assert_int_eq(i.blocks_per_sm, 2);
    ck_assert_str_eq(i.limited_by, "registers");
    ck_assert_double_eq_tol(i.occupancy, 8.0 / 64, 1e-12);
    attn_occupancy(&h100, 128, 255, 0, &i); /* 8192 per warp -> 8 warps -> 2 blocks */
    ck_assert_int_eq(i.blocks_per_sm, 2);
}
END_TEST

START_TEST(occupancy_by_shared_memory_threads_blocks) {
    attn_launch_info i;
    attn_occupancy(&h100, 128, 64, 100 * 1024, &i); /* 233472 / (102400 + 1024) = 2 */
    ck_assert_int_eq(i.blocks_per_sm, 2);
    ck_assert_str_eq(i.limited_by, "shared memory");
    attn_occupancy(&h100, 1024, 16, 0, &i); /* 2048 threads per SM */
    ck_assert_int_eq(i.blocks_per_sm, 2);
    ck_assert_str_eq(i.limited_by, "threads");
    ck_assert_double_eq_tol(i.occupancy, 1.0, 1e-12);
    attn_occupancy(&h100, 32, 16, 0, &i); /* 32 blocks per SM at most */
    ck_assert_int_eq(i.blocks_per_sm, 32);
    ck_assert_str_eq(i.limited_by, "blocks");
    ck_assert_double_eq_tol(i.occupancy, 0.5, 1e-12);
    attn_occupancy(&h100, 128, 32, 233472, &i); /* more than an SM holds: none */
    ck_assert_int_eq(i.blocks_per_sm, 0);
    ck_assert_str_eq(i.limited_by, "shared memory");
}
END_TEST

int main(void) {
    Suite *s = suite_create("bench");
    TCase *oc = tcase_create("occupancy");
    tcase_add_test(oc, occupancy_by_registers);
    tcase_add_test(oc, occupancy_by_shared_memory_threads_blocks);
    suite_add_tcase(s, oc);
    TCase *st = tcase_create("stats");
    tcase_add_test(st, median_min_rsd);
    tcase_add_test(st, bootstrap_ci_brackets_the_median);
    suite_add_tcase(s, st);
    TCase *th = tcase_create("thresholds");
    tcase_add_test(th, gpu_slug);
    tcase_add_test(th, classes_match_first);
    tcase_add_test(th, missing_peak);
    tcase_add_test(th, zero_peak);
    tcase_add_test(th, bad_class);
    tcase_add_test(th, class_lacks_key);
    tcase_add_test(th, workload_classes);
    tcase_add_test(th, pass_classes);
    tcase_add_test(th, work_by_pass);
    tcase_add_test(th, roofline_above_one);
    tcase_add_test(th, unknown_key);
    tcase_add_test(th, shipped_files_load);
    tcase_add_test(th, many_classes);
    tcase_add_test(th, results_never_overwrite);
    tcase_add_test(th, timing_json_round_trip);
    suite_add_tcase(s, th);
    return attn_unit_run(s);
}
