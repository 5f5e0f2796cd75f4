/* attn_tune: a tunable kernel's best configuration per shape class of the benchmark matrix,
 * proven correct, confirmed faster than the default, written per GPU.
 *
 *   attn_tune --kernel flash2 [--plugin lib.so] --dtypes fp16,bf16 --head-dims 64,128
 *       --masks full,causal --seqlens 4,32,128,512,1024,2048 --tokens 16384 --hidden 2048
 *       --tolerance thresholds/tolerance.ini --results-dir results --tuned-dir thresholds
 *
 * 1. Gates, per (dtype, head dim), before any launch: every configuration of the kernel's
 *    space (attn_tuning, attn_abi.h) is judged by what it says it needs against this GPU:
 *    its own rules, threads, shared memory per block, registers (its estimate against the
 *    cap its launch bounds set), occupancy (at least max(1, min_blocks) resident blocks), then
 *    whether this build holds it, then after the compile its real registers and spills
 *    (cudaFuncGetAttributes). Each rejected configuration is listed with its gate.
 * 2. Correctness, per configuration that passed: a tail shape (2 x 3 heads, 333 x 333) and a
 *    causal shape (1 x 4 heads, 200 x 333, bottom-right), O and LSE judged by the verdict
 *    rule against the cuBLAS reference. A configuration that is wrong, declines, faults or
 *    hangs is rejected: each runs in a supervised child (harness/supervise.h), so a fault
 *    fails that configuration alone.
 * 3. Search, per class (dtype, head dim, mask, seqlen of the matrix): the correct
 *    configurations, exhaustively when at most --exhaustive-max, else a Latin hypercube
 *    design then a tree-structured Parzen estimator up to --trials (harness/tune_search.h);
 *    then successive halving (a third kept per rung, each rung timed longer).
 * 4. Confirmation: the winner and the default timed interleaved (attn_measure_pair) on the
 *    class's benchmark shape; accepted only when the winner's 95 % CI of the median lies 3 %
 *    or more under the default's, and the winner's output on that shape is right.
 * 5. Output: results/<gpu>/tune/<date>-<commit>-<kernel>.json (every configuration, its gate
 *    or verdict, every timing, the winners), and <tuned-dir>/<gpu>.tuned.txt: the accepted
 *    configurations, one line per class (cmake/tuned.cmake reads it; flash2 compiles and
 *    runs them), the other kernels' lines kept.
 * A configuration that passes the gates but is not in this build stops the run after step 2
 * (flash2: -DATTN_TUNE_SPACE=ON builds its space), unless --built-only.
 * Exit: 0 done; 1 a phase failed; 2 bad arguments, or configurations missing from the build;
 * 77 no GPU, or the kernel has no tunables. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <jansson.h>

#include "bench_gpu.h"
#include "gpu_verify.h"
#include "harness.h"
#include "reference.h"
#include "registry.h"
#include "results.h"
#include "supervise.h"
#include "thresholds.h"
#include "tune_search.h"
#include "verdict.h"

#define MAX_LIST 16
#define ACCEPT_MARGIN 0.03 /* the winner's CI must lie this far under the default's */

/* ---------------------------------------------------------------- arguments ---- */

static struct {
    const char *kernel_name, *plugin, *tolerance, *results_dir, *tuned_dir, *source_dir, *work_dir;
    attn_dtype dtypes[MAX_LIST];
    int n_dtypes, dims[MAX_LIST], n_dims, masks[MAX_LIST], n_masks, seqlens[MAX_LIST], n_seqlens;
    int tokens, hidden, exhaustive_max, trials;
    unsigned long long seed;
    double case_timeout_s;
    int built_only; /* search what this build holds, even where the gates let more through */
} A = {.exhaustive_max = 64, .trials = 40, .seed = 1, .case_timeout_s = 60, .source_dir = "."};

/* the kernel, its tunables, the space */
static const attn_kernel *K;
static const attn_tuning *T;
static attn_tune_space space;
static size_t space_size;

typedef struct {
    attn_dtype dtype;
    int d;
} group;
static group groups[MAX_LIST * MAX_LIST];
static int n_groups;

static void usage(const char *why) {
    fprintf(stderr, "attn_tune: %s\nusage: attn_tune --kernel NAME [--plugin LIB] --dtypes fp16,bf16 --head-dims 64,128 "
                    "--masks full,causal --seqlens S,S,... --tokens N --hidden N --tolerance FILE --results-dir DIR "
                    "--tuned-dir DIR [--source-dir DIR] [--work-dir DIR] [--exhaustive-max N] [--trials N] [--seed N] "
                    "[--case-timeout S] [--built-only]\n", why);
    exit(2);
}

static int positive(const char *opt, const char *s, int max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < 1 || v > max) {
        char why[256];
        snprintf(why, sizeof why, "%s: expected a positive integer up to %d, got '%s'", opt, max, s);
        usage(why);
    }
    return (int)v;
}

/* "a,b,c" into up to MAX_LIST items through parse_one(item, out index) */
static int parse_csv(const char *opt, const char *s, void (*one)(const char *opt, const char *item, int i)) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_LIST) usage("too many values in a list");
        one(opt, tok, n++);
    }
    if (n == 0) usage("an empty list");
    return n;
}
static void one_dtype(const char *opt, const char *s, int i) {
    if (attn_dtype_parse(s, &A.dtypes[i])) {
        char why[128];
        snprintf(why, sizeof why, "%s: expected fp16 or bf16, got '%s'", opt, s);
        usage(why);
    }
}
static void one_dim(const char *opt, const char *s, int i) { A.dims[i] = positive(opt, s, 1024); }
static void one_seqlen(const char *opt, const char *s, int i) { A.seqlens[i] = positive(opt, s, 1 << 24); }
static void one_mask(const char *opt, const char *s, int i) {
    if (strcmp(s, "full") && strcmp(s, "causal")) {
        char why[128];
        snprintf(why, sizeof why, "%s: expected full or causal, got '%s'", opt, s);
        usage(why);
    }
    A.masks[i] = !strcmp(s, "causal");
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void parse_args(int argc, char **argv) {
    static const struct option opts[] = {
        {"kernel", 1, 0, 'k'},      {"plugin", 1, 0, 'p'},        {"dtypes", 1, 0, 'd'},   {"head-dims", 1, 0, 'D'},
        {"masks", 1, 0, 'm'},       {"seqlens", 1, 0, 's'},       {"tokens", 1, 0, 't'},   {"hidden", 1, 0, 'H'},
        {"tolerance", 1, 0, 'o'},   {"results-dir", 1, 0, 'r'},   {"tuned-dir", 1, 0, 'u'}, {"source-dir", 1, 0, 'S'},
        {"work-dir", 1, 0, 'w'},    {"exhaustive-max", 1, 0, 'x'}, {"trials", 1, 0, 'n'},  {"seed", 1, 0, 'e'},
        {"case-timeout", 1, 0, 'c'}, {"built-only", 0, 0, 'b'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': A.kernel_name = optarg; break;
        case 'p': A.plugin = optarg; break;
        case 'd': A.n_dtypes = parse_csv("--dtypes", optarg, one_dtype); break;
        case 'D': A.n_dims = parse_csv("--head-dims", optarg, one_dim); break;
        case 'm': A.n_masks = parse_csv("--masks", optarg, one_mask); break;
        case 's': A.n_seqlens = parse_csv("--seqlens", optarg, one_seqlen); break;
        case 't': A.tokens = positive("--tokens", optarg, 1 << 30); break;
        case 'H': A.hidden = positive("--hidden", optarg, 1 << 30); break;
        case 'o': A.tolerance = optarg; break;
        case 'r': A.results_dir = optarg; break;
        case 'u': A.tuned_dir = optarg; break;
        case 'S': A.source_dir = optarg; break;
        case 'w': A.work_dir = optarg; break;
        case 'x': A.exhaustive_max = positive("--exhaustive-max", optarg, 1 << 24); break;
        case 'n': A.trials = positive("--trials", optarg, 1 << 20); break;
        case 'e': A.seed = (unsigned long long)positive("--seed", optarg, 1 << 30); break;
        case 'c': A.case_timeout_s = positive("--case-timeout", optarg, 86400); break;
        case 'b': A.built_only = 1; break;
        default: usage("unknown option");
        }
    }
    if (optind < argc) usage("unexpected argument");
    if (!A.kernel_name || !A.n_dtypes || !A.n_dims || !A.n_masks || !A.n_seqlens || !A.tokens || !A.hidden ||
        !A.tolerance || !A.results_dir || !A.tuned_dir)
        usage("missing a required option");
    qsort(A.seqlens, (size_t)A.n_seqlens, sizeof A.seqlens[0], cmp_int);
    for (int i = 0; i < A.n_dtypes; i++)
        for (int j = 0; j < A.n_dims; j++) groups[n_groups++] = (group){A.dtypes[i], A.dims[j]};
}

/* ---------------------------------------------------------------- configurations ---- */

/* configuration index -> the kernel's values */
static void config_values(size_t index, int *values) {
    int idx[ATTN_TUNE_MAX_TUNABLES];
    attn_tune_decode(&space, index, idx);
    for (int i = 0; i < space.n; i++) values[i] = T->tunables[i].values[idx[i]];
}
/* the kernel's values -> configuration index, or ATTN_TUNE_NONE when one is not in its list */
static size_t config_index(const int *values) {
    int idx[ATTN_TUNE_MAX_TUNABLES];
    for (int i = 0; i < space.n; i++) {
        idx[i] = -1;
        for (int j = 0; j < T->tunables[i].count; j++)
            if (T->tunables[i].values[j] == values[i]) idx[i] = j;
        if (idx[i] < 0) return ATTN_TUNE_NONE;
    }
    return attn_tune_encode(&space, idx);
}
/* "name=value name=value ..." */
static const char *config_text(size_t index, char *buf, size_t len) {
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(index, v);
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < space.n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s=%d", i ? " " : "", T->tunables[i].name, v[i]);
    return buf;
}
static json_t *config_json(size_t index) {
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(index, v);
    json_t *o = json_object();
    for (int i = 0; i < space.n; i++) json_object_set_new(o, T->tunables[i].name, json_integer(v[i]));
    return o;
}

/* ---------------------------------------------------------------- problems ---- */

/* A problem on the GPU: inputs (BSHD, random normal), O, LSE, and its references. */
typedef struct {
    attn_fwd_params p;
    float *g, *r, *lg; /* golden O and LSE, low-precision O */
    size_t o_elems, rows;
} problem;

static attn_reference *ref;
static cudaStream_t stream;
static attn_tolerance tol;
static struct cudaDeviceProp prop;

static void problem_free(problem *x) {
    cudaFree((void *)x->p.q), cudaFree((void *)x->p.k), cudaFree((void *)x->p.v), cudaFree(x->p.o);
    cudaFree(x->p.lse), cudaFree(x->g), cudaFree(x->r), cudaFree(x->lg);
    memset(x, 0, sizeof *x);
}

/* Allocates and fills a problem; with refs, computes its references. 0, or 1 with err. */
static int problem_make(problem *x, attn_dtype dt, int d, int batch, int heads, int sq, int sk, int causal,
                        const char *seed_name, int refs, char *err, size_t errlen) {
    memset(x, 0, sizeof *x);
    attn_fwd_params *p = &x->p;
    attn_params_clear(p, heads);
    p->dtype = dt, p->batch = batch, p->seqlen_q = sq, p->seqlen_k = sk, p->head_dim = d, p->causal = causal;
    p->softmax_scale = (float)(1.0 / sqrt((double)d));
    const size_t nq = (size_t)batch * sq * heads * d, nk = (size_t)batch * sk * heads * d;
    x->o_elems = nq, x->rows = (size_t)batch * heads * sq;
    void *q, *k, *v, *o;
    if (cudaMalloc(&q, nq * 2) || cudaMalloc(&k, nk * 2) || cudaMalloc(&v, nk * 2) || cudaMalloc(&o, nq * 2) ||
        cudaMalloc((void **)&p->lse, x->rows * 4))
        return snprintf(err, errlen, "cudaMalloc failed (%zu + 2 x %zu elements)", 2 * nq, nk), 1;
    p->q = q, p->k = k, p->v = v, p->o = o;
    const uint64_t seed = attn_seed_from_name(seed_name);
    if (attn_fill_normal(q, dt, nq, seed, 1.0f, stream) || attn_fill_normal(k, dt, nk, seed + 1, 1.0f, stream) ||
        attn_fill_normal(v, dt, nk, seed + 2, 1.0f, stream))
        return snprintf(err, errlen, "attn_fill_normal failed"), 1;
    p->q_row_stride = p->k_row_stride = p->v_row_stride = p->o_row_stride = (int64_t)heads * d;
    p->q_head_stride = p->k_head_stride = p->v_head_stride = p->o_head_stride = d;
    p->q_batch_stride = p->o_batch_stride = (int64_t)sq * heads * d;
    p->k_batch_stride = p->v_batch_stride = (int64_t)sk * heads * d;
    if (!refs) return 0;
    if (cudaMalloc((void **)&x->g, nq * 4) || cudaMalloc((void **)&x->r, nq * 4) ||
        cudaMalloc((void **)&x->lg, x->rows * 4))
        return snprintf(err, errlen, "cudaMalloc for the references failed"), 1;
    if (attn_ref_forward(ref, p, ATTN_REF_GOLDEN, x->g, x->lg, stream, err, errlen) ||
        attn_ref_forward(ref, p, ATTN_REF_LOWP, x->r, NULL, stream, err, errlen))
        return 1;
    cudaError_t e = cudaStreamSynchronize(stream);
    return e ? snprintf(err, errlen, "reference: %s", cudaGetErrorString(e)), 1 : 0;
}

/* Runs configuration `values` once on poisoned O and LSE and judges both. 0 right; 1 wrong or
 * an error (why); ATTN_UNSUPPORTED (returned as 3) when the kernel declined it. */
static int check_config(problem *x, const int *values, char *why, size_t len) {
    if (cudaMemsetAsync(x->p.o, 0xff, x->o_elems * 2, stream) || cudaMemsetAsync(x->p.lse, 0xff, x->rows * 4, stream))
        return snprintf(why, len, "cudaMemsetAsync failed"), 1;
    const int rc = T->fwd_config(&x->p, values, stream);
    if (rc == ATTN_UNSUPPORTED) return 3;
    if (rc != ATTN_OK) return snprintf(why, len, "fwd_config returned %d", rc), 1;
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e) return snprintf(why, len, "CUDA error: %s", cudaGetErrorString(e)), 1;
    attn_output_stats st;
    if ((e = attn_output_stats_gpu(&x->p, x->g, x->r, &st, stream)))
        return snprintf(why, len, "verdict on the GPU: %s", cudaGetErrorString(e)), 1;
    attn_output_verdict v;
    attn_output_decide(&st, x->p.dtype, &tol, &v);
    if (v.rule != ATTN_RULE_PASS)
        return snprintf(why, len, "O: %s (max|O-G| %.3g, bound %.3g; mean %.3g, bound %.3g)", attn_rule_name(v.rule),
                        v.max_err, v.max_bound, v.mean_err, v.mean_bound), 1;
    attn_lse_verdict lv;
    double top;
    if ((e = attn_lse_verdict_gpu(x->p.lse, x->lg, x->rows, &tol, &lv, &top, stream)))
        return snprintf(why, len, "LSE verdict on the GPU: %s", cudaGetErrorString(e)), 1;
    if (!lv.ok)
        return snprintf(why, len, "LSE: %zu rows wrong (max |L-Lg| %.3g, bound %.3g)", lv.bad_count, lv.max_err,
                        lv.bound), 1;
    return 0;
}

/* ---------------------------------------------------------------- phase 1 and 2 ---- */

/* The work file: what the children found, a line per configuration (phase 1), read back by
 * phase 3. "G <group> <index> <gate> <regs> <spill> <detail>", "P <group> <index> <regs>
 * <spill>", "F <group> <index> <why>", "X <group> <index>" (crashed or hung, by the parent). */
static char work_path[1100];

static int child_init(void *ctx) {
    (void)ctx;
    char err[1024];
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    int dev;
    if (cudaGetDevice(&dev) || cudaGetDeviceProperties(&prop, dev) || cudaStreamCreate(&stream))
        return printf("FAILED: cannot set up the GPU\n"), 1;
    if (attn_ref_create(&ref, err, sizeof err)) return printf("FAILED: reference: %s\n", err), 1;
    return 0;
}

/* The gates of configuration `index` for group g before any launch: 0 passed (regs, spill set
 * when compiled), else 1 with the gate's name and the reason. */
static int gate(const group *g, size_t index, const char **name, char *detail, size_t len, int *regs, int *spill) {
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(index, v);
    attn_config_facts f;
    *regs = -1, *spill = -1;
    if (T->facts(v, g->dtype, g->d, &f) != ATTN_OK)
        return *name = "no_path", snprintf(detail, len, "no tunable path for %s d%d", attn_dtype_name(g->dtype), g->d), 1;
    if (f.rule[0]) return *name = "rule", snprintf(detail, len, "%s", f.rule), 1;
    if (f.threads < 1 || f.threads > prop.maxThreadsPerBlock)
        return *name = "threads", snprintf(detail, len, "%d threads per block; %d allowed", f.threads,
                                           prop.maxThreadsPerBlock), 1;
    if ((size_t)f.shared_bytes > prop.sharedMemPerBlockOptin)
        return *name = "shared_memory", snprintf(detail, len, "%d bytes per block; %zu allowed", f.shared_bytes,
                                                 prop.sharedMemPerBlockOptin), 1;
    const int want = f.min_blocks > 1 ? f.min_blocks : 1;
    int cap = prop.regsPerMultiprocessor / (f.threads * want);
    cap = cap > 255 ? 255 : cap;
    if (f.regs_estimate > cap)
        return *name = "registers", snprintf(detail, len, "needs about %d registers per thread; %d blocks of %d "
                                             "threads cap it at %d (it would spill)", f.regs_estimate, want, f.threads,
                                             cap), 1;
    /* resident blocks per SM: shared memory (with the per-block reserve), threads, registers
     * (per warp, allocated in units of 256) */
    const int warps = (f.threads + 31) / 32;
    int by_smem = (int)(prop.sharedMemPerMultiprocessor / ((size_t)f.shared_bytes + prop.reservedSharedMemPerBlock));
    int by_threads = prop.maxThreadsPerMultiProcessor / f.threads;
    int by_regs = prop.regsPerMultiprocessor / (warps * ((f.regs_estimate * 32 + 255) / 256 * 256));
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
        by_regs = prop.regsPerMultiprocessor / (warps * ((fa.numRegs * 32 + 255) / 256 * 256));
        if (by_regs < want)
            return *name = "occupancy", snprintf(detail, len, "%d registers per thread after the compile leave %d "
                                                 "blocks per SM; it asks for %d", fa.numRegs, by_regs, want), 1;
    }
    return 0;
}

/* phase 1+2, case i: configuration i % space_size of group i / space_size */
static problem tail_p, causal_p;
static int problems_group = -1;

static void work_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void work_line(const char *fmt, ...) {
    FILE *f = fopen(work_path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static attn_case_verdict run_config(int i, void *ctx, int *stop_child) {
    (void)ctx;
    const int gi = (int)((size_t)i / space_size);
    const size_t index = (size_t)i % space_size;
    const group *g = &groups[gi];
    const char *gname;
    char detail[512], cfg[256];
    int regs, spill;
    if (gate(g, index, &gname, detail, sizeof detail, &regs, &spill)) {
        for (char *c = detail; *c; c++) if (*c == '\n') *c = ' ';
        work_line("G %d %zu %s %d %d %s", gi, index, gname, regs, spill, detail);
        return ATTN_CASE_SKIPPED;
    }
    char err[1024];
    if (problems_group != gi) { /* the group's two problems and their references, once */
        problem_free(&tail_p), problem_free(&causal_p);
        char seed[128];
        snprintf(seed, sizeof seed, "tune/%s/%s/d%d", A.kernel_name, attn_dtype_name(g->dtype), g->d);
        if (problem_make(&tail_p, g->dtype, g->d, 2, 3, 333, 333, 0, seed, 1, err, sizeof err) ||
            problem_make(&causal_p, g->dtype, g->d, 1, 4, 200, 333, 1, seed, 1, err, sizeof err)) {
            work_line("F %d %zu harness: %s", gi, index, err);
            *stop_child = 1;
            return ATTN_CASE_FAILED;
        }
        problems_group = gi;
    }
    int v[ATTN_TUNE_MAX_TUNABLES];
    config_values(index, v);
    char why[600];
    int rc = check_config(&tail_p, v, why, sizeof why);
    const char *which = "tail shape 2x3x333x333 full";
    if (rc == 0) rc = check_config(&causal_p, v, why, sizeof why), which = "causal shape 1x4x200x333";
    cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) *stop_child = 1; /* a sticky error: a new process */
    if (rc == 3) {
        work_line("G %d %zu declined %d %d the kernel declined the configuration (ATTN_UNSUPPORTED) on the %s", gi,
                  index, regs, spill, which);
        return ATTN_CASE_SKIPPED;
    }
    if (rc) {
        work_line("F %d %zu %s: %s", gi, index, which, why);
        printf("%s d%d %s: rejected by correctness: %s: %s\n", attn_dtype_name(g->dtype), g->d,
               config_text(index, cfg, sizeof cfg), which, why);
        return ATTN_CASE_FAILED;
    }
    work_line("P %d %zu %d %d", gi, index, regs, spill);
    return ATTN_CASE_PASSED;
}

static const char *config_label(int i, void *ctx) {
    (void)ctx;
    static char buf[320];
    char cfg[256];
    const group *g = &groups[(size_t)i / space_size];
    snprintf(buf, sizeof buf, "%s d%d %s", attn_dtype_name(g->dtype), g->d,
             config_text((size_t)i % space_size, cfg, sizeof cfg));
    return buf;
}

/* ---------------------------------------------------------------- phase 3: search ---- */

enum { ST_UNSEEN, ST_GATED, ST_FAILED, ST_CRASHED, ST_PASSED };
typedef struct {
    char state, gate[24];
    int regs, spill;
    char detail[400];
} config_state;
static config_state *states[MAX_LIST * MAX_LIST]; /* [group][configuration] */

/* Reads the work file into states; 0, or 1 with err. */
static int read_work(char *err, size_t errlen) {
    for (int g = 0; g < n_groups; g++)
        if (!states[g] && !(states[g] = calloc(space_size, sizeof *states[g])))
            return snprintf(err, errlen, "out of memory"), 1;
    FILE *f = fopen(work_path, "r");
    if (!f) return snprintf(err, errlen, "%.900s: cannot be read", work_path), 1;
    char line[1200];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        char kind;
        int g, n = 0;
        size_t i;
        if (sscanf(line, "%c %d %zu %n", &kind, &g, &i, &n) < 3 || g < 0 || g >= n_groups || i >= space_size) {
            fclose(f);
            return snprintf(err, errlen, "%.500s:%d: malformed line '%.400s'", work_path, lineno, line), 1;
        }
        config_state *c = &states[g][i];
        const char *rest = line + n;
        switch (kind) {
        case 'G':
            c->state = ST_GATED;
            if (sscanf(rest, "%23s %d %d %n", c->gate, &c->regs, &c->spill, &n) >= 3)
                snprintf(c->detail, sizeof c->detail, "%s", rest + n);
            break;
        case 'P': c->state = ST_PASSED, sscanf(rest, "%d %d", &c->regs, &c->spill); break;
        case 'F': c->state = ST_FAILED, snprintf(c->gate, sizeof c->gate, "correctness"),
                  snprintf(c->detail, sizeof c->detail, "%s", rest); break;
        case 'X': c->state = ST_CRASHED, snprintf(c->gate, sizeof c->gate, "correctness"),
                  snprintf(c->detail, sizeof c->detail, "crashed or hung (a fault, a broken CUDA context or the "
                           "case timeout): %s", rest); break;
        default: fclose(f); return snprintf(err, errlen, "%.900s:%d: unknown line kind '%c'", work_path, lineno, kind), 1;
        }
    }
    fclose(f);
    return 0;
}

/* one configuration's call, for the timer */
typedef struct {
    const attn_fwd_params *p;
    int values[ATTN_TUNE_MAX_TUNABLES];
} run_ctx;
static int run_config_once(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    const run_ctx *r = ctx;
    const int rc = T->fwd_config(r->p, r->values, s);
    if (rc != ATTN_OK) snprintf(err, errlen, "fwd_config returned %d", rc);
    return rc != ATTN_OK;
}

/* Successive halving's rungs: each a longer timing than the last (rung 0 screens), by sample
 * count and time alone (no spread rule: a short kernel's spread would hold every rung to its
 * timeout; the medians' CIs carry the precision). The confirmation keeps the noise rule.
 * Warm-up 10 ms: the clocks are up after the first configuration. */
static const attn_timing_rules rungs[] = {{3, 0.005, 1e9, 0.5, 0.75, 0.01},
                                          {10, 0.03, 1e9, 1.0, 0.75, 0.01},
                                          {20, 0.1, 1e9, 2.0, 0.75, 0.01},
                                          {40, 0.2, 1e9, 3.0, 0.75, 0.01}};
static const attn_timing_rules confirm_rules = {40, 0.4, 0.01, 2.0, 0.75, 0.01};
#define N_RUNGS (int)(sizeof rungs / sizeof rungs[0])

static attn_timer *timer;

/* Times configuration `index` on p at rung r into *t, and records it; the median in ms, or
 * INFINITY when the call failed. */
static double time_config(const attn_fwd_params *p, size_t index, int r, json_t *trials) {
    run_ctx c = {p, {0}};
    config_values(index, c.values);
    attn_timing t;
    char err[512];
    double ms = INFINITY;
    json_t *j = json_pack("{s:o, s:i}", "config", config_json(index), "rung", r);
    if (attn_measure(timer, run_config_once, &c, &rungs[r], &t, err, sizeof err)) {
        json_object_set_new(j, "error", json_string(err));
        cudaGetLastError();
    } else {
        ms = t.median_ms;
        json_object_set_new(j, "timing", attn_timing_json(&t));
    }
    json_array_append_new(trials, j);
    return ms;
}

typedef struct {
    int group, causal, seqlen, lo, hi;
} shape_class;

/* One class: search, confirmation, its JSON; *accepted and the tuned line when the winner
 * was accepted (line), else a comment (line). */
static json_t *tune_class(const shape_class *sc, char *line, size_t linelen) {
    const group *g = &groups[sc->group];
    const char *mask = sc->causal ? "causal" : "full";
    const int S = sc->seqlen, batch = A.tokens / S > 0 ? A.tokens / S : 1, heads = A.hidden / g->d > 0 ? A.hidden / g->d : 1;
    json_t *j = json_pack("{s:s, s:i, s:s, s:i, s:i, s:i, s:i, s:i}", "dtype", attn_dtype_name(g->dtype), "head_dim",
                          g->d, "mask", mask, "seqlen", S, "lo", sc->lo, "hi", sc->hi, "batch", batch, "heads", heads);
    char err[1024], cfg[256], cfg2[256];
    line[0] = 0;
    const char *name = A.kernel_name;
    printf("\n== %s %s d%d %s S=%d (class %d-%d, batch %d, %d heads)\n", name, attn_dtype_name(g->dtype), g->d, mask, S,
           sc->lo, sc->hi, batch, heads);
    problem x;
    char seed[160];
    snprintf(seed, sizeof seed, "tune/%s/%s/d%d/%s/s%d", name, attn_dtype_name(g->dtype), g->d, mask, S);
    if (problem_make(&x, g->dtype, g->d, batch, heads, S, S, sc->causal, seed, 0, err, sizeof err)) {
        printf("FAILED: %s\n", err);
        json_object_set_new(j, "error", json_string(err));
        problem_free(&x);
        return j;
    }
    int dv[ATTN_TUNE_MAX_TUNABLES];
    if (T->default_for(&x.p, dv) != ATTN_OK) { /* e.g. flash2's packed heads at S <= 32 */
        printf("no tunable path for this class: the kernel runs it without tunables\n");
        json_object_set_new(j, "untunable", json_true());
        problem_free(&x);
        return j;
    }
    const size_t def = config_index(dv);
    if (def == ATTN_TUNE_NONE || states[sc->group][def].state != ST_PASSED) {
        snprintf(err, sizeof err, "the default configuration %s did not pass the gates and correctness: %s",
                 def == ATTN_TUNE_NONE ? "(values outside the tunables' lists)" : config_text(def, cfg, sizeof cfg),
                 def == ATTN_TUNE_NONE ? "" : states[sc->group][def].detail);
        printf("FAILED: %s\n", err);
        json_object_set_new(j, "error", json_string(err));
        problem_free(&x);
        return j;
    }
    json_object_set_new(j, "default", config_json(def));
    unsigned char *allowed = calloc(space_size, 1), *tried = calloc(space_size, 1);
    size_t *pool = malloc(space_size * sizeof *pool);
    double *loss = malloc(space_size * sizeof *loss);
    int n_cand = 0;
    for (size_t i = 0; i < space_size; i++)
        if (states[sc->group][i].state == ST_PASSED) allowed[i] = 1, n_cand++;
    json_t *trials = json_array();
    int n = 0;
    const char *method;
    if (n_cand <= A.exhaustive_max) { /* every correct configuration */
        method = "exhaustive";
        for (size_t i = 0; i < space_size; i++)
            if (allowed[i]) pool[n] = i, loss[n] = time_config(&x.p, i, 0, trials), n++;
    } else { /* a Latin hypercube design, then TPE's proposals, to --trials */
        method = "lhs+tpe";
        attn_rng rng;
        attn_rng_init(&rng, A.seed ^ attn_seed_from_name(seed));
        const int n0 = A.trials / 3 > 4 ? A.trials / 3 : 4;
        size_t design[1024];
        const int nd = attn_tune_lhs(&space, allowed, n0 < 1024 ? n0 : 1024, A.seed, design);
        for (int k = 0; k < nd; k++)
            pool[n] = design[k], tried[design[k]] = 1, loss[n] = time_config(&x.p, design[k], 0, trials), n++;
        while (n < A.trials) {
            const size_t next = attn_tune_tpe_propose(&space, allowed, tried, pool, loss, n, 0.25, 24, &rng);
            if (next == ATTN_TUNE_NONE) break;
            pool[n] = next, tried[next] = 1, loss[n] = time_config(&x.p, next, 0, trials), n++;
        }
        if (!tried[def]) pool[n] = def, loss[n] = time_config(&x.p, def, 0, trials), n++;
    }
    printf("search: %s, %d of %d correct configurations timed at rung 0\n", method, n, n_cand);
    /* successive halving: a third goes on to each longer rung */
    int rung = 0;
    int *keep = malloc((size_t)n * sizeof *keep);
    size_t *next_pool = malloc((size_t)n * sizeof *next_pool);
    while (n > 1 && rung + 1 < N_RUNGS) {
        const int m = attn_tune_halving_keep(loss, n, 3, keep);
        for (int k = 0; k < m; k++) next_pool[k] = pool[keep[k]];
        rung++;
        for (int k = 0; k < m; k++) pool[k] = next_pool[k], loss[k] = time_config(&x.p, pool[k], rung, trials);
        n = m;
    }
    free(keep), free(next_pool);
    int best = 0;
    for (int k = 1; k < n; k++)
        if (loss[k] < loss[best]) best = k;
    const size_t win = pool[best];
    json_object_set_new(j, "search", json_pack("{s:s, s:i, s:i, s:o}", "method", method, "correct", n_cand, "rungs",
                                               rung + 1, "trials", trials));
    json_object_set_new(j, "winner", config_json(win));
    config_text(win, cfg, sizeof cfg);
    config_text(def, cfg2, sizeof cfg2);
    if (win == def || !isfinite(loss[best])) {
        printf("winner: the default (%s)\n", cfg2);
        snprintf(line, linelen, "# %s %s d%d %s %d-%d: default kept (%s): the search's best", name,
                 attn_dtype_name(g->dtype), g->d, mask, sc->lo, sc->hi, cfg2);
        json_object_set_new(j, "accepted", json_false());
        json_object_set_new(j, "why", json_string("the default was the search's best"));
    } else { /* confirmation: interleaved with the default, then the winner's output on this shape */
        run_ctx cw = {&x.p, {0}}, cd = {&x.p, {0}};
        config_values(win, cw.values);
        config_values(def, cd.values);
        attn_timing tw, td;
        const int bad = attn_measure_pair(timer, run_config_once, &cw, run_config_once, &cd, &confirm_rules, &tw, &td,
                                          err, sizeof err);
        const double speedup = bad ? 0 : td.median_ms / tw.median_ms;
        int ok = !bad && tw.ci_hi_ms <= (1.0 - ACCEPT_MARGIN) * td.ci_lo_ms;
        char why[700];
        if (bad) snprintf(why, sizeof why, "confirmation failed: %.600s", err);
        else if (!ok)
            snprintf(why, sizeof why, "%.3fx: the winner's CI %.4g-%.4g ms does not lie %.0f %% under the default's "
                     "%.4g-%.4g ms", speedup, tw.ci_lo_ms, tw.ci_hi_ms, 100 * ACCEPT_MARGIN, td.ci_lo_ms, td.ci_hi_ms);
        else { /* right on this shape too */
            problem_free(&x);
            if (problem_make(&x, g->dtype, g->d, batch, heads, S, S, sc->causal, seed, 1, err, sizeof err))
                ok = 0, snprintf(why, sizeof why, "cannot verify on this shape: %.600s", err);
            else if (check_config(&x, cw.values, err, sizeof err))
                ok = 0, snprintf(why, sizeof why, "wrong on this shape: %.600s", err);
            else
                snprintf(why, sizeof why, "%.3fx: the winner's CI %.4g-%.4g ms, the default's %.4g-%.4g ms", speedup,
                         tw.ci_lo_ms, tw.ci_hi_ms, td.ci_lo_ms, td.ci_hi_ms);
        }
        printf("winner %s: %s: %s\n", cfg, ok ? "accepted" : "default kept", why);
        if (!bad)
            json_object_set_new(j, "confirmation", json_pack("{s:o, s:o, s:f}", "winner", attn_timing_json(&tw),
                                                             "default", attn_timing_json(&td), "speedup", speedup));
        json_object_set_new(j, "accepted", json_boolean(ok));
        json_object_set_new(j, "why", json_string(why));
        if (ok)
            snprintf(line, linelen, "%s %s d%d %s %d-%d %s  # %s", name, attn_dtype_name(g->dtype), g->d, mask, sc->lo,
                     sc->hi, cfg, why);
        else
            snprintf(line, linelen, "# %s %s d%d %s %d-%d: default kept (%s); best %s: %.400s", name,
                     attn_dtype_name(g->dtype), g->d, mask, sc->lo, sc->hi, cfg2, cfg, why);
    }
    free(allowed), free(tried), free(pool), free(loss);
    problem_free(&x);
    return j;
}

/* The group's gate table: counts per gate, every configuration's verdict. */
static json_t *group_json(int gi) {
    const group *g = &groups[gi];
    json_t *counts = json_object(), *configs = json_array();
    printf("\n%s %s d%d: %zu configurations:", A.kernel_name, attn_dtype_name(g->dtype), g->d, space_size);
    for (size_t i = 0; i < space_size; i++) {
        const config_state *c = &states[gi][i];
        const char *verdict = c->state == ST_PASSED ? "passed" : c->state == ST_UNSEEN ? "not_run" : c->gate;
        json_object_set_new(counts, verdict, json_integer(json_integer_value(json_object_get(counts, verdict)) + 1));
        json_t *o = json_pack("{s:o, s:s}", "config", config_json(i), "verdict", verdict);
        int v[ATTN_TUNE_MAX_TUNABLES];
        attn_config_facts f;
        config_values(i, v);
        if (T->facts(v, g->dtype, g->d, &f) == ATTN_OK) /* what the gates judged, beside ptxas's count */
            json_object_set_new(o, "needs", json_pack("{s:i, s:i, s:i, s:i}", "threads", f.threads, "shared_bytes",
                                                      f.shared_bytes, "regs_estimate", f.regs_estimate, "min_blocks",
                                                      f.min_blocks));
        if (c->detail[0]) json_object_set_new(o, "detail", json_string(c->detail));
        if (c->regs >= 0 && c->state != ST_UNSEEN) json_object_set_new(o, "registers", json_integer(c->regs));
        if (c->spill >= 0 && c->state != ST_UNSEEN) json_object_set_new(o, "spill_bytes", json_integer(c->spill));
        json_array_append_new(configs, o);
    }
    const char *key;
    json_t *val;
    json_object_foreach(counts, key, val) printf(" %s %lld", key, (long long)json_integer_value(val));
    printf("\n");
    char cfg[256];
    for (size_t i = 0; i < space_size; i++)
        if (states[gi][i].state == ST_FAILED || states[gi][i].state == ST_CRASHED)
            printf("  %s: rejected by correctness: %s\n", config_text(i, cfg, sizeof cfg), states[gi][i].detail);
    return json_pack("{s:s, s:i, s:o, s:o}", "dtype", attn_dtype_name(g->dtype), "head_dim", g->d, "gates", counts,
                     "configs", configs);
}

/* Writes <tuned-dir>/<slug>.tuned.txt whole (tmp + rename): the header, the GPU, the other
 * kernels' lines as they were, then this run's. 0, or 1 with err. */
static int write_tuned(const char *slug, const attn_run_stamp *st, const char *results_file, char **lines, int n,
                       char *err, size_t errlen) {
    char path[1100], tmp[1200];
    snprintf(path, sizeof path, "%s/%s.tuned.txt", A.tuned_dir, slug);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) return snprintf(err, errlen, "%.900s: cannot be written", tmp), 1;
    const char *base = strrchr(results_file, '/');
    fprintf(out, "# Tuned configurations on %s: one line per shape class of the benchmark matrix\n"
                 "# whose winner's time beat the default's by %.0f %% or more (95 %% CIs, timed interleaved);\n"
                 "# read by cmake/tuned.cmake. Written by attn_tune (suites/tune.c) on %s, commit %s%s;\n"
                 "# %s's search: results/%s/tune/%s. Other kernels' lines are kept as they were.\n"
                 "gpu %s\n", prop.name, 100 * ACCEPT_MARGIN, st->stamp, st->commit, st->dirty ? " (dirty)" : "",
            A.kernel_name, slug, base ? base + 1 : results_file, prop.name);
    FILE *in = fopen(path, "r");
    size_t klen = strlen(A.kernel_name);
    if (in) { /* keep other kernels' lines and comments about them */
        char l[2048];
        while (fgets(l, sizeof l, in)) {
            const char *w = l[0] == '#' && l[1] == ' ' ? l + 2 : l;
            const int ours = !strncmp(w, A.kernel_name, klen) && (w[klen] == ' ' || w[klen] == '\t');
            const int kernel_line = l[0] != '#' && strncmp(l, "gpu ", 4) && l[0] != '\n';
            const int other_comment = l[0] == '#' && w != l && !ours && strchr(w, ' ') && strstr(w, " d") &&
                                      strstr(w, "default kept");
            if (!ours && (kernel_line || other_comment)) fputs(l, out);
        }
        fclose(in);
    }
    for (int i = 0; i < n; i++)
        if (lines[i][0]) fprintf(out, "%s\n", lines[i]);
    if (fclose(out) || rename(tmp, path)) {
        unlink(tmp);
        return snprintf(err, errlen, "%.900s: cannot be written", path), 1;
    }
    printf("tuned file: %s\n", path);
    return 0;
}

static attn_case_verdict run_search(int i, void *ctx, int *stop_child) {
    (void)i, (void)ctx, (void)stop_child;
    char err[1024];
    const double t0 = attn_wall_s();
    if (read_work(err, sizeof err)) return printf("FAILED: %s\n", err), ATTN_CASE_FAILED;
    if (attn_timer_create(&timer, stream, err, sizeof err)) return printf("FAILED: timer: %s\n", err), ATTN_CASE_FAILED;
    attn_run_stamp st;
    attn_run_stamp_now(A.source_dir, &st);
    json_t *tun = json_array();
    for (int t = 0; t < space.n; t++) {
        json_t *vals = json_array();
        for (int k = 0; k < T->tunables[t].count; k++) json_array_append_new(vals, json_integer(T->tunables[t].values[k]));
        json_array_append_new(tun, json_pack("{s:s, s:o}", "name", T->tunables[t].name, "values", vals));
    }
    json_t *gj = json_array();
    for (int g = 0; g < n_groups; g++) json_array_append_new(gj, group_json(g));
    json_t *cj = json_array();
    char **lines = calloc((size_t)n_groups * A.n_masks * A.n_seqlens, sizeof *lines);
    int n_lines = 0, accepted = 0;
    for (int g = 0; g < n_groups; g++)
        for (int m = 0; m < A.n_masks; m++)
            for (int s = 0; s < A.n_seqlens; s++) {
                const shape_class sc = {g, A.masks[m], A.seqlens[s], s ? A.seqlens[s - 1] + 1 : 1,
                                        s + 1 < A.n_seqlens ? A.seqlens[s] : 1 << 24};
                char *line = calloc(1, 1024);
                json_t *c = tune_class(&sc, line, 1024);
                accepted += json_is_true(json_object_get(c, "accepted"));
                json_array_append_new(cj, c);
                lines[n_lines++] = line;
            }
    char slug[256], stem[256], out_path[1200];
    attn_gpu_slug(prop.name, slug, sizeof slug);
    snprintf(stem, sizeof stem, "%s-%s-%s", st.date, st.commit, A.kernel_name);
    char dir[1100]; /* a folder of its own: the benchmark scripts read the .json files of results/<gpu> */
    snprintf(dir, sizeof dir, "%s/%s/tune", A.results_dir, slug);
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:b, s:s, s:s}, s:o, s:o, s:o, s:f, s:i, s:i}", "kind", "tune", "kernel",
                            A.kernel_name, "run", "commit", st.commit, "dirty", st.dirty, "date", st.stamp, "gpu",
                            prop.name, "tunables", tun, "groups", gj, "classes", cj, "search_s", attn_wall_s() - t0,
                            "exhaustive_max", A.exhaustive_max, "trials", A.trials);
    int rc = attn_mkdirs(dir, err, sizeof err) || attn_json_write_new(doc, dir, stem, out_path, sizeof out_path, err, sizeof err);
    if (!rc) printf("\nresults: %s\n", out_path);
    if (!rc) rc = write_tuned(slug, &st, out_path, lines, n_lines, err, sizeof err);
    if (rc) printf("FAILED: %s\n", err);
    printf("%d of %d classes take a tuned configuration (search %.1f s)\n", accepted, n_lines, attn_wall_s() - t0);
    for (int k = 0; k < n_lines; k++) free(lines[k]);
    free(lines);
    json_decref(doc);
    attn_timer_destroy(timer);
    return rc ? ATTN_CASE_FAILED : ATTN_CASE_PASSED;
}

static const char *search_label(int i, void *ctx) { return (void)i, (void)ctx, "the search"; }

/* ---------------------------------------------------------------- main ---- */

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_args(argc, argv);
    char err[2048];
    if (attn_tolerance_load(A.tolerance, &tol, err, sizeof err)) return fprintf(stderr, "attn_tune: %s\n", err), 2;
    if (!(K = attn_find_kernel(A.kernel_name, A.plugin, err, sizeof err))) return fprintf(stderr, "attn_tune: %s\n", err), 2;
    if (!(T = attn_find_tuning(K, A.plugin, err, sizeof err))) {
        if (err[0]) return fprintf(stderr, "attn_tune: %s\n", err), 2;
        printf("SKIPPED: kernel '%s' has no tunables (attn_tuning, attn_abi.h)\n", A.kernel_name);
        return ATTN_EXIT_SKIP;
    }
    space.n = T->count;
    for (int i = 0; i < T->count; i++) space.counts[i] = T->tunables[i].count;
    space_size = attn_tune_space_size(&space);
    if (space_size == 0 || space_size * (size_t)n_groups > 1u << 20)
        return fprintf(stderr, "attn_tune: kernel '%s': a space of %zu configurations x %d groups is more than the "
                       "gate and correctness pass takes (2^20)\n", A.kernel_name, space_size, n_groups), 2;
    char dir[1024];
    if (A.work_dir) snprintf(dir, sizeof dir, "%s", A.work_dir);
    else if (!mkdtemp(strcpy(dir, "/tmp/attn_tune.XXXXXX"))) return fprintf(stderr, "attn_tune: mkdtemp failed\n"), 2;
    if (attn_mkdirs(dir, err, sizeof err)) return fprintf(stderr, "attn_tune: %s\n", err), 2;
    snprintf(work_path, sizeof work_path, "%s/work.txt", dir);
    FILE *w = fopen(work_path, "w");
    if (!w) return fprintf(stderr, "attn_tune: %s: cannot be written\n", work_path), 2;
    fclose(w);
    printf("attn_tune: kernel %s, %d tunables, %zu configurations x %d (dtype, head dim) groups; work file %s\n",
           A.kernel_name, space.n, space_size, n_groups, work_path);

    /* phases 1 and 2: gates and correctness, a case per configuration, in supervised children */
    const double t0 = attn_wall_s();
    const int n_cases = (int)(space_size * (size_t)n_groups);
    attn_case_verdict *v = calloc((size_t)n_cases, sizeof *v);
    attn_case_runner r = {child_init, run_config, config_label, NULL, n_cases, A.case_timeout_s};
    int rc = attn_run_cases(&r, v, stdout);
    if (rc) return free(v), rc;
    /* what crashed or hung wrote no line: the parent says so */
    unsigned char *seen = calloc((size_t)n_cases, 1);
    FILE *f = fopen(work_path, "r");
    char l[1200];
    long not_built = 0;
    while (f && fgets(l, sizeof l, f)) {
        int g, n = 0;
        size_t i;
        if (sscanf(l + 1, " %d %zu %n", &g, &i, &n) >= 2 && g >= 0 && g < n_groups && i < space_size) {
            seen[(size_t)g * space_size + i] = 1;
            not_built += l[0] == 'G' && !strncmp(l + 1 + n, "not_built ", 10);
        }
    }
    if (f) fclose(f);
    for (int i = 0; i < n_cases; i++)
        if (!seen[i] && (v[i] == ATTN_CASE_FAILED || v[i] == ATTN_CASE_NOT_RUN))
            work_line("X %d %zu %s", (int)((size_t)i / space_size), (size_t)i % space_size,
                      v[i] == ATTN_CASE_NOT_RUN ? "not run" : "no verdict from the child");
    free(seen), free(v);
    printf("gates and correctness: %.1f s\n", attn_wall_s() - t0);
    /* a search over part of the space would still rewrite the committed tuned file */
    if (not_built && !A.built_only) {
        fprintf(stderr, "attn_tune: %ld configurations pass every gate but are not in this build (flash2: configure "
                "with -DATTN_TUNE_SPACE=ON): the search would miss them (--built-only searches what is built)\n",
                not_built);
        return 2;
    }

    /* phase 3: the search, in one supervised child */
    attn_case_verdict sv;
    attn_case_runner rs = {child_init, run_search, search_label, NULL, 1, 3600};
    rc = attn_run_cases(&rs, &sv, stdout);
    if (rc) return rc;
    printf("attn_tune: %s in %.1f s\n", sv == ATTN_CASE_PASSED ? "done" : "FAILED", attn_wall_s() - t0);
    return sv == ATTN_CASE_PASSED ? 0 : 1;
}
