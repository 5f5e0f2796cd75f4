/* attn_benchmark's timings: the kernel verified then timed, the baselines (cuBLAS + softmax,
 * cuDNN; the backward passes' in backward.c) verified on this test's inputs then timed or
 * reused from this run (main.c says how), and the kernel's launches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "launch_trace.h"
#include "registry.h"
#include "results.h"

/* ---- runs --------------------------------------------------------------------------- */

int bench_run_kernel(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    const bench *bm = ctx;
    int rc = bench_kernel_call(bm, s);
    if (rc != ATTN_OK) snprintf(err, errlen, "kernel '%s' returned %d", bm->kernel->name, rc);
    return rc != ATTN_OK;
}

static int run_baseline(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    bench *bm = ctx;
    return attn_ref_baseline(bm->ref, &bm->prob->p, s, err, errlen);
}

/* cuDNN's plan on the benchmark's problem */
typedef struct {
    attn_cudnn_plan *plan;
    const attn_fwd_params *p;
} cudnn_run;

static int run_cudnn(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    const cudnn_run *r = ctx;
    return attn_cudnn_plan_run(r->plan, r->p, s, err, errlen);
}

/* The kernel failed (an error, or a wrong output): call it once more under CUPTI's API
 * callbacks, and if it asked for more shared memory per block than this GPU allows, that is
 * the reason: not supported here, with the numbers. Returns only when it is not that. */
static void not_supported_if_smem_too_big(bench *bm, const struct cudaDeviceProp *prop) {
    char why[512];
    if (attn_requests_begin(why, sizeof why)) return; /* no CUPTI: the plain failure stands */
    bench_kernel_call(bm, bm->stream);
    cudaStreamSynchronize(bm->stream);
    cudaGetLastError();
    const int asked = attn_requests_end();
    if ((size_t)asked > prop->sharedMemPerBlockOptin)
        bench_finish(bm, "not_supported", ATTN_EXIT_SKIP, "not supported on this GPU: the kernel asks for %d bytes of "
               "shared memory per block; %s allows %zu (sharedMemPerBlockOptin)", asked, prop->name,
               prop->sharedMemPerBlockOptin);
}

/* The launches of one call of the kernel (CUPTI activity records), with the occupancy their
 * registers and shared memory allow, into the fragment and the output. */
void bench_record_launches(bench *bm) {
    attn_launch_info l[16];
    int n = 0;
    char why[512];
    int rc = attn_trace_launches(bench_run_kernel, bm, bm->stream, l, 16, &n, why, sizeof why);
    if (rc) {
        printf("  launches: not available: %s\n", why);
        json_object_set_new(bm->doc, "launches", json_pack("{s:b, s:s}", "available", 0, "reason", why));
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n && i < 16; i++) {
        printf("  launch %d: %s grid (%d,%d,%d) block (%d,%d,%d), %d registers, %d + %d B shared, %d B local; "
               "%d blocks/SM, occupancy %.0f%% (limited by %s)\n", i, l[i].name, l[i].grid[0], l[i].grid[1],
               l[i].grid[2], l[i].block[0], l[i].block[1], l[i].block[2], l[i].registers, l[i].static_smem,
               l[i].dynamic_smem, l[i].local_bytes, l[i].blocks_per_sm, 100 * l[i].occupancy, l[i].limited_by);
        json_array_append_new(arr, json_pack("{s:s, s:[i,i,i], s:[i,i,i], s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:s, s:f}",
            "name", l[i].name, "grid", l[i].grid[0], l[i].grid[1], l[i].grid[2], "block", l[i].block[0],
            l[i].block[1], l[i].block[2], "registers", l[i].registers, "static_smem", l[i].static_smem,
            "dynamic_smem", l[i].dynamic_smem, "local_bytes", l[i].local_bytes, "smem_carveout", l[i].smem_carveout,
            "blocks_per_sm", l[i].blocks_per_sm, "occupancy", l[i].occupancy, "limited_by", l[i].limited_by,
            "duration_us", l[i].duration_us));
    }
    if (n > 16) printf("  (%d launches in all; the first 16 recorded)\n", n);
    json_object_set_new(bm->doc, "launches", json_pack("{s:b, s:i, s:o}", "available", 1, "count", n, "each", arr));
}

/* ---- baselines shared within a run (see the top of this file) ------------------------ */

static int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

/* Reads a shape's baseline figures left by an earlier benchmark of this run into bm->tr and
 * the bm->cudnn_* fields: 1 when usable. */
static int reuse_baselines(bench *bm, const json_t *doc) {
    const json_t *cud = json_object_get(doc, "cudnn");
    const char *measured_by = json_string_value(json_object_get(doc, "measured_by"));
    const char *ref_not_run = json_string_value(json_object_get(doc, "reference_not_run"));
    if (!measured_by || !json_is_object(cud) ||
        (bm->have_reference && !ref_not_run && attn_timing_from_json(json_object_get(doc, "reference"), &bm->tr)))
        return 0;
    const char *lib = json_string_value(json_object_get(cud, "library"));
    snprintf(bm->cudnn_lib, sizeof bm->cudnn_lib, "%s", lib ? lib : "");
    bm->cudnn_version = json_is_integer(json_object_get(cud, "version"))
                          ? (long)json_integer_value(json_object_get(cud, "version")) : 0;
    if (json_is_true(json_object_get(cud, "available"))) {
        const char *k = json_string_value(json_object_get(cud, "kind"));
        if (!k || !bm->cudnn_version || attn_timing_from_json(json_object_get(cud, "timing"), &bm->tc)) return 0;
        snprintf(bm->cudnn_kind, sizeof bm->cudnn_kind, "%s", k);
        /* the engine and its search: every other key */
        bm->cudnn_engine = json_deep_copy(cud);
        static const char *const own[] = {"available", "kind", "version", "timing", "library", "reason"};
        for (size_t i = 0; bm->cudnn_engine && i < sizeof own / sizeof own[0]; i++)
            json_object_del(bm->cudnn_engine, own[i]);
        bm->have_cudnn = 1;
    } else {
        const char *r = json_string_value(json_object_get(cud, "reason"));
        snprintf(bm->cudnn_why, sizeof bm->cudnn_why, "%s", r ? r : "(no reason recorded)");
        bm->have_cudnn = 0;
    }
    snprintf(bm->measured_by, sizeof bm->measured_by, "%s", measured_by);
    if (bm->have_reference && ref_not_run) /* the backward's did not fit */
        bm->have_reference = 0, snprintf(bm->reference_why, sizeof bm->reference_why, "%s", ref_not_run);
    return 1;
}

/* Leaves this shape's baseline figures (bm->tr, the cuDNN object) for the other kernels'
 * benchmarks of the run. A failure to write costs only their time: it is reported, never
 * fatal. */
static void store_baselines(const bench *bm, const char *path) {
    char dir[1400], err[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    json_t *doc = json_pack("{s:s, s:o*, s:o*}", "measured_by", bm->name, "reference",
                            bm->have_reference ? attn_timing_json(&bm->tr) : NULL, "cudnn", bench_cudnn_json(bm));
    if (doc && bm->reference_why[0]) json_object_set_new(doc, "reference_not_run", json_string(bm->reference_why));
    if (!doc || attn_mkdirs(dir, err, sizeof err) || attn_json_write_atomic(doc, path, err, sizeof err))
        fprintf(stderr, "attn_benchmark: note: baselines not shared (%s)\n", doc ? err : "out of memory");
    json_decref(doc);
}

/* ---- the kernel --------------------------------------------------------------------- */

/* Exits when the kernel declines the case or its output is wrong: a wrong kernel is never
 * timed. */
void bench_verify_kernel(bench *bm) {
    char err[2048];
    if (bench_kernel_lacks(bm, err, sizeof err)) bench_finish(bm, "not_supported", ATTN_EXIT_SKIP, "%s", err);
    int rc = bench_kernel_call(bm, bm->stream);
    if (rc == ATTN_UNSUPPORTED)
        bench_finish(bm, "not_supported", ATTN_EXIT_SKIP, "kernel '%s' returned ATTN_UNSUPPORTED%s", bm->kernel_name,
                     bm->pass == ATTN_PASS_FWD ? "" : bm->pass == ATTN_PASS_BWD ? " from bwd" : " from fwd or bwd");
    cudaStreamSynchronize(bm->stream);
    if (bench_verify(bm, bench_run_kernel, bm, err, sizeof err)) {
        not_supported_if_smem_too_big(bm, &bm->prop);
        bench_finish(bm, "fail", 1, "the kernel's output is wrong, so it is not timed: %s", err);
    }
}

/* Creates the timer (kept for the baselines) and times the kernel into bm->tk. */
void bench_time_kernel(bench *bm) {
    char err[2048];
    bm->rules = (attn_timing_rules){10, 0.5, 0.005, 1.0, 0.75, 0};
    const char *tmo = getenv("ATTN_BENCH_TIMEOUT");
    if (tmo && atof(tmo) > 0) bm->rules.timeout_s = atof(tmo);
    if (attn_timer_create(&bm->timer, bm->stream, err, sizeof err)) bench_finish(bm, "fail", 2, "timer: %s", err);
    /* fresh poison before the timed launches, the verdict on what they leave: a kernel that
     * skips work when called again (on the same pointers) leaves NaN */
    if (bench_poison_outputs(bm, err, sizeof err)) bench_finish(bm, "fail", 2, "%s", err);
    if (attn_measure(bm->timer, bench_run_kernel, bm, &bm->rules, &bm->tk, err, sizeof err))
        bench_finish(bm, "fail", 1, "timing the kernel: %s", err);
    bench_judge_output_now(bm, bm->timed_output_why, sizeof bm->timed_output_why);
}

/* ---- the baselines ------------------------------------------------------------------ */

/* The chosen engine config and how it was found, for the results (keys documented in
 * results/README.md): engine, engine_id, tuned, configs_tried, configs_built, configs_timed,
 * heuristics, and with tuning the chosen and the heuristics' first config's times. */
json_t *bench_cudnn_engine_json(const attn_cudnn_plan_info *in) {
    json_t *j = json_pack("{s:s, s:I, s:b, s:i, s:i, s:i, s:i, s:s, s:I, s:f, s:f}", "engine", in->engine,
                          "engine_id", (json_int_t)in->engine_id, "tuned", in->tuned, "configs_tried",
                          in->configs_tried, "configs_built", in->configs_built, "configs_timed", in->configs_timed,
                          "chosen_rank", in->chosen_rank, "heuristics", in->heuristics, "workspace_bytes",
                          (json_int_t)in->workspace_bytes, "build_s", in->build_s, "tune_s", in->tune_s);
    if (j && in->tuned)
        json_object_update_new(j, json_pack("{s:f, s:f}", "tune_best_ms", in->best_ms, "tune_first_ms", in->first_ms));
    return j;
}

/* libcudnn opened, its version and file recorded in bm; NULL with the reason in bm->cudnn_why
 * when it cannot be. */
attn_cudnn *bench_cudnn_open(bench *bm) {
    attn_cudnn *cudnn = NULL;
    if (attn_cudnn_open(&cudnn, bm->cudnn_why, sizeof bm->cudnn_why)) return NULL;
    attn_cudnn_lib_info lib;
    attn_cudnn_get_library(cudnn, &lib);
    bm->cudnn_version = lib.version;
    snprintf(bm->cudnn_lib, sizeof bm->cudnn_lib, "%s", lib.path[0] ? lib.path : lib.requested);
    return cudnn;
}

/* 3. cuDNN, where it is there and takes the case: the engine configs autotuned on this
 * test's inputs (attn_cudnn_plan_create_ex; ATTN_CUDNN_AUTOTUNE=0: the first that builds),
 * the chosen one checked, then timed into bm->tc. Any failure only leaves bm->have_cudnn 0 and
 * the reason in bm->cudnn_why. */
static void time_cudnn(bench *bm) {
    attn_cudnn *cudnn = bench_cudnn_open(bm);
    attn_cudnn_plan *plan = NULL;
    if (cudnn && attn_cudnn_plan_create_ex(cudnn, &bm->prob->p, NULL, bm->stream, &plan, bm->cudnn_why,
                                           sizeof bm->cudnn_why) == 0) {
        char why[1024];
        cudnn_run run = {plan, &bm->prob->p};
        bench_phase_done(bm, "cudnn_plan");
        attn_cudnn_plan_info info;
        attn_cudnn_plan_get_info(plan, &info);
        if (bench_verify(bm, run_cudnn, &run, why, sizeof why))
            snprintf(bm->cudnn_why, sizeof bm->cudnn_why, "cuDNN's output (engine %s) fails the verdict rule: %s",
                     info.engine, why);
        else if (attn_measure(bm->timer, run_cudnn, &run, &bm->rules, &bm->tc, why, sizeof why))
            snprintf(bm->cudnn_why, sizeof bm->cudnn_why, "timing cuDNN (engine %s) failed: %s", info.engine, why);
        else {
            bm->have_cudnn = 1;
            snprintf(bm->cudnn_kind, sizeof bm->cudnn_kind, "%s", attn_cudnn_plan_kind(plan));
            bm->cudnn_engine = bench_cudnn_engine_json(&info);
        }
    }
    attn_cudnn_plan_destroy(plan);
    attn_cudnn_close(cudnn);
}

/* The cuDNN baseline's object in the fragment (record_figures adds the speedups) and in the
 * shared baselines file. */
json_t *bench_cudnn_json(const bench *bm) {
    json_t *j = bm->have_cudnn ? json_pack("{s:b, s:s, s:I, s:o}", "available", 1, "kind", bm->cudnn_kind, "version",
                                         (json_int_t)bm->cudnn_version, "timing", attn_timing_json(&bm->tc))
                             : json_pack("{s:b, s:s}", "available", 0, "reason", bm->cudnn_why);
    if (!j) return NULL;
    if (!bm->have_cudnn && bm->cudnn_version) json_object_set_new(j, "version", json_integer(bm->cudnn_version));
    if (bm->cudnn_lib[0]) json_object_set_new(j, "library", json_string(bm->cudnn_lib));
    if (bm->have_cudnn && bm->cudnn_engine) json_object_update(j, bm->cudnn_engine);
    return j;
}

/* The file of DIR/baselines/ that shares this shape's baseline figures within the run (keyed
 * by the pass too), into path; "" when they are not shared. */
static void baselines_path(const bench *bm, char *path, size_t len) {
    path[0] = 0;
    if (!bm->fragments || env_is("ATTN_BENCH_REUSE_BASELINES", "0")) return;
    char pass[16] = ""; /* the forward's files keep their names */
    if (bm->pass != ATTN_PASS_FWD) snprintf(pass, sizeof pass, "%s-", attn_pass_name(bm->pass));
    if (bm->workload <= ATTN_WORKLOAD_CAUSAL) {
        snprintf(path, len, "%s/baselines/%s%s-d%d-%s-s%d-t%d-h%d-pci%04x%02x%02x.json", bm->fragments, pass,
                 attn_dtype_name(bm->dtype), bm->head_dim, bm->causal ? "causal" : "full", bm->seqlen, bm->tokens,
                 bm->hidden, bm->prop.pciDomainID, bm->prop.pciBusID, bm->prop.pciDeviceID);
        return;
    }
    uint64_t lens = 1469598103934665603ull; /* FNV-1a of the sequences' lengths */
    for (int b = 0; b < bm->nseq; b++)
        lens = (lens ^ (uint64_t)bm->lens_q[b] << 32 ^ (uint64_t)bm->lens_k[b]) * 1099511628211ull;
    snprintf(path, len, "%s/baselines/%s-%s-d%d-%s-n%d-h%d-kv%d-w%d_%d-p%d-%016llx-pci%04x%02x%02x.json",
             bm->fragments, bm->workload_name, attn_dtype_name(bm->dtype), bm->head_dim, bm->mask_name, bm->nseq,
             bm->heads, bm->heads_k, bm->window_left, bm->window_right, bm->page_size, (unsigned long long)lens,
             bm->prop.pciDomainID, bm->prop.pciBusID, bm->prop.pciDeviceID);
}

/* The baselines timed here: the cuBLAS one (the forward's, or the backward's reference), then
 * cuDNN. */
static void time_baselines(bench *bm) {
    char err[2048];
    bm->measured_by[0] = 0, bm->cudnn_lib[0] = 0, bm->cudnn_version = 0, bm->have_cudnn = 0;
    json_decref(bm->cudnn_engine);
    bm->cudnn_engine = NULL;
    if (bm->pass != ATTN_PASS_FWD)
        bench_bwd_time_reference(bm);
    else if (bm->have_reference && attn_measure(bm->timer, run_baseline, bm, &bm->rules, &bm->tr, err, sizeof err))
        bench_finish(bm, "fail", 2, "timing the baseline: %s", err);
    bench_phase_done(bm, "baseline");
    if (bm->pass == ATTN_PASS_FWD)
        time_cudnn(bm);
    else
        bench_bwd_time_cudnn(bm);
}

/* 2. the cuBLAS baseline: its output checked on this test's inputs (the backward's reference
 * is the verdict's own yardstick: backward.c), its timing measured here or reused from this
 * run's first benchmark of the shape; then 3., cuDNN's */
void bench_baselines(bench *bm) {
    char err[2048];
    bm->have_reference = bm->workload <= ATTN_WORKLOAD_CAUSAL; /* attn_ref_baseline: version 1 only */
    if (bm->pass != ATTN_PASS_FWD) bench_bwd_restore_forward(bm);
    if (bm->have_reference && (bm->pass == ATTN_PASS_FWD ? bench_verify(bm, run_baseline, bm, err, sizeof err)
                                                         : bench_bwd_verify_reference(bm, err, sizeof err)))
        bench_finish(bm, "fail", 2, "harness error: the baseline is wrong: %s", err);
    char cache_path[1400];
    baselines_path(bm, cache_path, sizeof cache_path);
    json_t *cached = cache_path[0] ? json_load_file(cache_path, 0, NULL) : NULL;
    if (cached && reuse_baselines(bm, cached)) {
        bench_phase_done(bm, "baseline");
    } else {
        time_baselines(bm);
        if (cache_path[0]) store_baselines(bm, cache_path);
    }
    json_decref(cached);
}
