/* attn_tune's configurations (index, values, text, JSON), its problems, and phases 1 and 2:
 * the gates and the correctness of each configuration, a case each in a supervised child,
 * a line each in the work file. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_verify.h"
#include "registry.h"
#include "tune.h"

/* configuration index -> the kernel's values */
void config_values(const tuner *tu, size_t index, int *values) {
    int idx[ATTN_TUNE_MAX_TUNABLES];
    attn_tune_decode(&tu->space, index, idx);
    for (int i = 0; i < tu->space.n; i++) values[i] = tu->tuning->tunables[i].values[idx[i]];
}
/* the kernel's values -> configuration index, or ATTN_TUNE_NONE when one is not in its list */
size_t config_index(const tuner *tu, const int *values) {
    int idx[ATTN_TUNE_MAX_TUNABLES];
    for (int i = 0; i < tu->space.n; i++) {
        idx[i] = -1;
        for (int j = 0; j < tu->tuning->tunables[i].count; j++)
            if (tu->tuning->tunables[i].values[j] == values[i]) idx[i] = j;
        if (idx[i] < 0) return ATTN_TUNE_NONE;
    }
    return attn_tune_encode(&tu->space, idx);
}
/* "name=value name=value ..." */
const char *config_text(const tuner *tu, size_t index, char *buf, size_t len) {
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(tu, index, v);
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < tu->space.n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s=%d", i ? " " : "", tu->tuning->tunables[i].name, v[i]);
    return buf;
}
json_t *config_json(const tuner *tu, size_t index) {
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(tu, index, v);
    json_t *o = json_object();
    for (int i = 0; i < tu->space.n; i++) json_object_set_new(o, tu->tuning->tunables[i].name, json_integer(v[i]));
    return o;
}

/* ---------------------------------------------------------------- problems ---- */

/* A dense problem (harness/gpu_problem.h: BSHD, inputs from seed_name, the LSE asked for)
 * built on the child's stream; with refs, its references too. 0, or 1 with err. */
int problem_make(tuner *tu, attn_gpu_problem *x, attn_dtype dt, int d, int batch, int heads, int sq, int sk,
                 int causal, const char *seed_name, int refs, char *err, size_t errlen) {
    const attn_problem_desc desc = attn_problem_dense(dt, batch, heads, sq, sk, d, causal, seed_name);
    if (attn_gpu_problem_build(x, &desc, tu->stream, err, errlen)) return 1;
    return refs && attn_gpu_problem_references(x, tu->ref, tu->stream, err, errlen);
}

/* Runs configuration `values` once on poisoned O and LSE and judges both. 0 right; 1 wrong or
 * an error (why); ATTN_UNSUPPORTED (returned as 3) when the kernel declined it. */
int check_config(tuner *tu, attn_gpu_problem *x, const int *values, char *why, size_t len) {
    if (attn_gpu_problem_poison_outputs(x, tu->stream, why, len)) return 1;
    const int rc = tu->tuning->fwd_config(&x->p, values, tu->stream);
    if (rc == ATTN_UNSUPPORTED) return 3;
    if (rc != ATTN_OK) return snprintf(why, len, "fwd_config returned %d", rc), 1;
    cudaError_t e = cudaStreamSynchronize(tu->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e) return snprintf(why, len, "CUDA error: %s", cudaGetErrorString(e)), 1;
    attn_output_stats st;
    if ((e = attn_output_stats_gpu(&x->p, x->g, x->r, &st, tu->stream)))
        return snprintf(why, len, "verdict on the GPU: %s", cudaGetErrorString(e)), 1;
    attn_output_verdict v;
    attn_output_decide(&st, x->p.dtype, &tu->tol, &v);
    if (v.rule != ATTN_RULE_PASS)
        return snprintf(why, len, "O: %s (max|O-G| %.3g, bound %.3g; mean %.3g, bound %.3g)", attn_rule_name(v.rule),
                        v.max_err, v.max_bound, v.mean_err, v.mean_bound), 1;
    attn_lse_verdict lv;
    double top;
    if ((e = attn_lse_verdict_gpu(x->p.lse, x->lg, x->rows, &tu->tol, &lv, &top, tu->stream)))
        return snprintf(why, len, "LSE verdict on the GPU: %s", cudaGetErrorString(e)), 1;
    if (!lv.ok)
        return snprintf(why, len, "LSE: %zu rows wrong (max |L-Lg| %.3g, bound %.3g)", lv.bad_count, lv.max_err,
                        lv.bound), 1;
    return 0;
}

/* ---------------------------------------------------------------- phase 1 and 2 ---- */

/* In a child: the GPU, its stream and the reference. */
int child_init(void *ctx) {
    tuner *tu = ctx;
    char err[1024];
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    int dev;
    if (cudaGetDevice(&dev) || cudaGetDeviceProperties(&tu->prop, dev) || cudaStreamCreate(&tu->stream))
        return printf("FAILED: cannot set up the GPU\n"), 1;
    if (attn_ref_create(&tu->ref, err, sizeof err)) return printf("FAILED: reference: %s\n", err), 1;
    return 0;
}

/* The gates of configuration `index` for group g before any launch: 0 passed (regs, spill set
 * when compiled), else 1 with the gate's name and the reason. */
static int gate(const tuner *tu, const group *g, size_t index, const char **name, char *detail, size_t len, int *regs,
                int *spill) {
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(tu, index, v);
    attn_config_facts f;
    *regs = -1, *spill = -1;
    if (tu->tuning->facts(v, g->dtype, g->d, &f) != ATTN_OK)
        return *name = "no_path",
               snprintf(detail, len, "no tunable path for %s d%d", attn_dtype_name(g->dtype), g->d), 1;
    if (f.rule[0]) return *name = "rule", snprintf(detail, len, "%s", f.rule), 1;
    if (f.threads < 1 || f.threads > tu->prop.maxThreadsPerBlock)
        return *name = "threads", snprintf(detail, len, "%d threads per block; %d allowed", f.threads,
                                           tu->prop.maxThreadsPerBlock), 1;
    if ((size_t)f.shared_bytes > tu->prop.sharedMemPerBlockOptin)
        return *name = "shared_memory", snprintf(detail, len, "%d bytes per block; %zu allowed", f.shared_bytes,
                                                 tu->prop.sharedMemPerBlockOptin), 1;
    const int want = f.min_blocks > 1 ? f.min_blocks : 1;
    int cap = tu->prop.regsPerMultiprocessor / (f.threads * want);
    cap = cap > 255 ? 255 : cap;
    if (f.regs_estimate > cap)
        return *name = "registers", snprintf(detail, len, "needs about %d registers per thread; %d blocks of %d "
                                             "threads cap it at %d (it would spill)", f.regs_estimate, want, f.threads,
                                             cap), 1;
    /* resident blocks per SM: shared memory (with the per-block reserve), threads, registers
     * (per warp, allocated in units of 256) */
    const int warps = (f.threads + 31) / 32;
    const struct cudaDeviceProp *prop = &tu->prop;
    int by_smem = (int)(prop->sharedMemPerMultiprocessor / ((size_t)f.shared_bytes + prop->reservedSharedMemPerBlock));
    int by_threads = tu->prop.maxThreadsPerMultiProcessor / f.threads;
    int by_regs = tu->prop.regsPerMultiprocessor / (warps * ((f.regs_estimate * 32 + 255) / 256 * 256));
    int blocks = by_smem < by_threads ? by_smem : by_threads;
    blocks = by_regs < blocks ? by_regs : blocks;
    if (blocks < want)
        return *name = "occupancy", snprintf(detail, len, "%d resident blocks per SM (shared memory %d, threads %d, "
                                             "registers %d); it asks for %d", blocks, by_smem, by_threads, by_regs,
                                             want), 1;
    if (!f.built)
        return *name = "not_built", snprintf(detail, len, "not in this build (flash2: configure with "
                                             "-DATTN_TUNE_SPACE=ON)"), 1;
    if (f.func) { /* after the compile: ptxas's registers and spills */
        struct cudaFuncAttributes fa;
        if (cudaFuncGetAttributes(&fa, f.func) != cudaSuccess)
            return cudaGetLastError(), *name = "compiled", snprintf(detail, len, "cudaFuncGetAttributes failed"), 1;
        *regs = fa.numRegs, *spill = (int)fa.localSizeBytes;
        if (fa.localSizeBytes > 0)
            return *name = "spills", snprintf(detail, len, "%zu bytes of local memory per thread (%d registers; "
                                              "estimate %d)", fa.localSizeBytes, fa.numRegs, f.regs_estimate), 1;
        by_regs = tu->prop.regsPerMultiprocessor / (warps * ((fa.numRegs * 32 + 255) / 256 * 256));
        if (by_regs < want)
            return *name = "occupancy", snprintf(detail, len, "%d registers per thread after the compile leave %d "
                                                 "blocks per SM; it asks for %d", fa.numRegs, by_regs, want), 1;
    }
    return 0;
}

/* A line into the work file. */
void work_line(const tuner *tu, const char *fmt, ...) {
    FILE *f = fopen(tu->work_path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* phase 1+2, case i: configuration i % space_size of group i / space_size */
attn_case_verdict run_config(int i, void *ctx, int *stop_child) {
    tuner *tu = ctx;
    const int gi = (int)((size_t)i / tu->space_size);
    const size_t index = (size_t)i % tu->space_size;
    const group *g = &tu->groups[gi];
    const char *gname;
    char detail[512], cfg[256];
    int regs, spill;
    if (gate(tu, g, index, &gname, detail, sizeof detail, &regs, &spill)) {
        for (char *c = detail; *c; c++) if (*c == '\n') *c = ' ';
        work_line(tu, "G %d %zu %s %d %d %s", gi, index, gname, regs, spill, detail);
        return ATTN_CASE_SKIPPED;
    }
    char err[1024];
    if (tu->problems_group != gi) { /* the group's two problems and their references, once */
        attn_gpu_problem_free(&tu->tail_p), attn_gpu_problem_free(&tu->causal_p);
        char seed[128];
        snprintf(seed, sizeof seed, "tune/%s/%s/d%d", tu->a.kernel_name, attn_dtype_name(g->dtype), g->d);
        if (problem_make(tu, &tu->tail_p, g->dtype, g->d, 2, 3, 333, 333, 0, seed, 1, err, sizeof err) ||
            problem_make(tu, &tu->causal_p, g->dtype, g->d, 1, 4, 200, 333, 1, seed, 1, err, sizeof err)) {
            work_line(tu, "F %d %zu harness: %s", gi, index, err);
            *stop_child = 1;
            return ATTN_CASE_FAILED;
        }
        tu->problems_group = gi;
    }
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(tu, index, v);
    char why[600];
    int rc = check_config(tu, &tu->tail_p, v, why, sizeof why);
    const char *which = "tail shape 2x3x333x333 full";
    if (rc == 0) rc = check_config(tu, &tu->causal_p, v, why, sizeof why), which = "causal shape 1x4x200x333";
    cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) *stop_child = 1; /* a sticky error: a new process */
    if (rc == 3) {
        work_line(tu, "G %d %zu declined %d %d the kernel declined the configuration (ATTN_UNSUPPORTED) on the %s", gi,
                  index, regs, spill, which);
        return ATTN_CASE_SKIPPED;
    }
    if (rc) {
        work_line(tu, "F %d %zu %s: %s", gi, index, which, why);
        printf("%s d%d %s: rejected by correctness: %s: %s\n", attn_dtype_name(g->dtype), g->d,
               config_text(tu, index, cfg, sizeof cfg), which, why);
        return ATTN_CASE_FAILED;
    }
    work_line(tu, "P %d %zu %d %d", gi, index, regs, spill);
    return ATTN_CASE_PASSED;
}

const char *config_label(int i, void *ctx) {
    tuner *tu = ctx;
    char *buf = tu->label;
    const size_t buflen = sizeof tu->label;
    char cfg[256];
    const group *g = &tu->groups[(size_t)i / tu->space_size];
    snprintf(buf, buflen, "%s d%d %s", attn_dtype_name(g->dtype), g->d,
             config_text(tu, (size_t)i % tu->space_size, cfg, sizeof cfg));
    return buf;
}
