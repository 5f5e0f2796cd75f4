/* One benchmark: a kernel on one shape of the benchmark matrix, sized like FlashAttention's
 * benchmarks (batch x seqlen = tokens, heads x head_dim = hidden), against the cuBLAS +
 * softmax baseline and cuDNN's fused attention, judged by the thresholds stored for this GPU.
 *
 *   attn_benchmark --name benchmark/simple/fp16/d64/causal/s512 --kernel simple [--plugin L]
 *       --dtype fp16 --head-dim 64 --mask causal --seqlen 512 --tokens 16384 --hidden 2048
 *       --thresholds-dir thresholds --tolerance thresholds/tolerance.ini --fragments DIR
 *
 * Version 2's workloads (shapes/benchmark_<workload>.txt) give the problem instead of
 * tokens and hidden:
 *   --workload decode --batch B --heads H --heads-k HK --shape QxK --page-size P
 *       B sequences of Q queries (Q dense) against K keys each in a shuffled pool of P-row
 *       pages (seqused_k = K): a decode step against a KV cache;
 *   --workload varlen --heads H --heads-k HK --sequences QxK+QxK+...
 *       a packed batch (cu_seqlens_q and cu_seqlens_k) of prefill sequences of mixed lengths;
 *   --workload window --batch B --heads H --heads-k HK --shape SxS --window L:R
 *       dense, with a sliding window (and the mask).
 * They have no cuBLAS baseline (it computes version-1 problems only); their work is counted
 * exactly, row by row (FLOPs of the visible keys; bytes of Q, O and each sequence's keys
 * that some row sees, read once per KV head): decode's roofline is a memory roofline.
 *
 * Order: verify the kernel (a wrong kernel is never timed as a pass), time it, verify and
 * time each baseline, then the verdict. Writes DIR/<name>.json (collected into one results
 * file by attn_results at the end of the run) and prints <CTestMeasurement> tags.
 * Exit: 0 pass, 1 fail, 77 skipped / not supported, 2 bad arguments or harness error.
 * ATTN_THRESHOLDS_KERNEL=<k> judges the kernel by k's thresholds (e.g. a slowed-down copy
 * by the original's); ATTN_BENCH_TIMEOUT=<s> caps each measurement (default 1 s).
 *
 * The baselines are the same computation whatever the kernel: within one run (one fragments
 * directory, which attn_results --reset empties at the run's start), the first benchmark of
 * a shape on a GPU times them and leaves them in DIR/baselines/; the other kernels' benchmarks
 * of that shape reuse those figures (the fragment names the test that measured them) and
 * only check the baseline's output on their own inputs. ATTN_BENCH_REUSE_BASELINES=0 times
 * them in every test. */
#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <jansson.h>

#include "bench_gpu.h"
#include "gpu_verify.h"
#include "cudnn_sdpa.h"
#include "harness.h"
#include "launch_trace.h"
#include "problem.h"
#include "reference.h"
#include "registry.h"
#include "results.h"
#include "seqs.h"
#include "thresholds.h"
#include "verdict.h"

/* The benchmark's state: one test per process, so one instance, filled phase by phase and
 * read by the later phases (which is why it is here rather than in parameter lists). */
enum { MAX_BENCH_SEQS = 256 }; /* sequences of a varlen batch */

static struct {
    const char *name, *kernel_name, *plugin, *thresholds_dir, *tolerance_path, *fragments;
    const char *dtype_name, *mask_name, *workload_name; /* as given, for the messages */
    const attn_kernel *kernel;
    attn_dtype dtype;
    int head_dim, causal, seqlen, tokens, hidden;
    int batch, heads; /* the shape derived from tokens and hidden (version 2: given) */
    size_t n;         /* elements of each of Q, K, V, O (dense workloads) */
    /* version 2's workloads (workload > ATTN_WORKLOAD_CAUSAL) */
    int workload, heads_k, window_left, window_right, page_size;
    int seqlen_q; /* the longest sequence's queries (the dense matrix: seqlen) */
    int nseq, lens_q[MAX_BENCH_SEQS], lens_k[MAX_BENCH_SEQS];
    attn_seqs seqs;
    size_t o_elems;  /* elements of O as the kernel writes it */
    void *o_dense;   /* varlen: O unpacked into the references' dense layout */
    attn_fwd_params p;
    cudaStream_t stream;
    attn_reference *ref;
    json_t *doc; /* this test's fragment */
    /* this GPU and the thresholds that judge the kernel on it */
    struct cudaDeviceProp prop;
    char tpath[1024];
    attn_thresholds th;
    const char *judge_as;
    const attn_threshold_class *cls; /* NULL: no class covers the case */
    /* timings; tc and the cudnn_* fields are valid only where have_cudnn */
    attn_timer *timer;
    attn_timing_rules rules;
    attn_timing tk, tr, tc;
    int have_reference; /* the cuBLAS baseline ran (dense workloads only) */
    int have_cudnn;
    char cudnn_why[2048], cudnn_kind[64];
    long cudnn_version;    /* 0: cuDNN did not load */
    char cudnn_lib[1024];  /* the library loaded (path) */
    json_t *cudnn_engine;  /* the chosen engine config and its search (cudnn_engine_json) */
    char measured_by[512]; /* the test that timed the baselines, when reused; else "" */
    char timed_output_why[2048]; /* the output left by the timed launches: "" when right */
} B;

/* ---- the fragment and the exit ------------------------------------------------------ */

static void write_fragment(void) {
    if (!B.fragments || !B.doc) return;
    char err[512], path[1024], file[512];
    snprintf(file, sizeof file, "%s", B.name);
    for (char *c = file; *c; c++)
        if (*c == '/') *c = '.';
    snprintf(path, sizeof path, "%s/%s.json", B.fragments, file);
    if (attn_mkdirs(B.fragments, err, sizeof err) || attn_json_write_atomic(B.doc, path, err, sizeof err))
        fprintf(stderr, "attn_benchmark: %s\n", err);
}

/* Records the verdict and its reason, writes the fragment, exits. */
static void finish(const char *verdict, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void finish(const char *verdict, int code, const char *fmt, ...) {
    char reason[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    printf("%s: %s\n", !strcmp(verdict, "pass") ? "PASSED" : !strcmp(verdict, "skipped") ? "SKIPPED"
                       : !strcmp(verdict, "not_supported") ? "NOT SUPPORTED" : "FAILED", reason);
    if (B.doc) {
        json_object_set_new(B.doc, "verdict", json_string(verdict));
        json_object_set_new(B.doc, "reason", json_string(reason));
        write_fragment();
    }
    exit(code);
}

/* Wall time of each phase, recorded in the fragment ("phases_s"): where a test's time goes. */
static double phase_start;
static json_t *phases;
static void phase_done(const char *name) {
    double now = attn_wall_s();
    if (phases) json_object_set_new(phases, name, json_real(now - phase_start));
    phase_start = now;
}

static void measure(const char *name, double value, const char *unit) {
    printf("<CTestMeasurement type=\"numeric/double\" name=\"%s%s\">%.6g</CTestMeasurement>\n",
           name, unit, value);
}

/* ---- runs --------------------------------------------------------------------------- */

static int run_kernel(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    (void)ctx;
    int rc = B.kernel->fwd(&B.p, s);
    if (rc != ATTN_OK) snprintf(err, errlen, "kernel '%s' returned %d", B.kernel->name, rc);
    return rc != ATTN_OK;
}

static int run_baseline(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    (void)ctx;
    return attn_ref_baseline(B.ref, &B.p, s, err, errlen);
}

static int run_cudnn(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    return attn_cudnn_plan_run((attn_cudnn_plan *)ctx, &B.p, s, err, errlen);
}

/* Golden and low-precision references, once, kept on the GPU: the verdict's figures are
 * gathered there (attn_output_stats_gpu), so a benchmark-sized output never crosses. */
static float *dG, *dR;
static attn_tolerance tol;

static int compute_references(char *err, size_t errlen) {
    size_t n = (size_t)B.p.batch * B.p.heads * B.p.seqlen_q * B.head_dim;
    if (cudaMalloc((void **)&dG, n * 4) != cudaSuccess || cudaMalloc((void **)&dR, n * 4) != cudaSuccess) {
        snprintf(err, errlen, "cudaMalloc of 2 x %zu bytes for the reference failed", n * 4);
        return 1;
    }
    if (attn_ref_forward(B.ref, &B.p, ATTN_REF_GOLDEN, dG, NULL, B.stream, err, errlen) ||
        attn_ref_forward(B.ref, &B.p, ATTN_REF_LOWP, dR, NULL, B.stream, err, errlen))
        return 1;
    cudaError_t e = cudaStreamSynchronize(B.stream);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "reference: %s", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

/* Runs `fn` once on NaN-poisoned O and judges the output by the verdict rule. 0 when right;
 * else the reason in why. */
static int judge_output_now(char *why, size_t whylen);
static int verify(attn_enqueue_fn fn, void *ctx, char *why, size_t whylen) {
    if (cudaMemsetAsync(B.p.o, 0xff, B.o_elems * 2, B.stream) != cudaSuccess)
        return snprintf(why, whylen, "cudaMemsetAsync failed"), 1;
    if (fn(ctx, B.stream, why, whylen)) return 1;
    return judge_output_now(why, whylen);
}

/* The verdict rule on what O holds now (after the stream's work). 0 when right; else the
 * reason in why. */
static int judge_output_now(char *why, size_t whylen) {
    why[0] = 0;
    attn_output_stats st;
    attn_fwd_params view = B.p;
    cudaError_t e = cudaSuccess;
    if (B.p.cu_seqlens_q) { /* packed rows: unpacked into the references' dense layout (the
                               references' rows past a sequence's end are zeroed alike) */
        const int64_t S = B.p.seqlen_q, H = B.heads, D = B.head_dim;
        e = attn_unpack_rows(B.p.o, B.dtype, B.p.cu_seqlens_q, B.nseq, B.heads, (int)S, B.head_dim, B.p.o_row_stride,
                             B.p.o_head_stride, B.o_dense, dG, dR, B.stream);
        view.cu_seqlens_q = NULL, view.o = B.o_dense;
        view.o_row_stride = D, view.o_head_stride = S * D, view.o_batch_stride = H * S * D;
    }
    if (e == cudaSuccess) e = attn_output_stats_gpu(&view, dG, dR, &st, B.stream);
    if (e != cudaSuccess) return snprintf(why, whylen, "on the GPU: %s", cudaGetErrorString(e)), 1;
    attn_output_verdict v;
    attn_output_decide(&st, B.dtype, &tol, &v);
    if (v.rule == ATTN_RULE_PASS) return 0;
    size_t i = v.worst, D = B.head_dim, S = B.p.seqlen_q, H = B.p.heads;
    snprintf(why, whylen, "%s: max|O-G| %.3g (bound %.3g), mean|O-G| %.3g (bound %.3g); %s at "
             "(b=%zu, h=%zu, s=%zu, d=%zu)", attn_rule_name(v.rule), v.max_err, v.max_bound, v.mean_err,
             v.mean_bound, v.rule == ATTN_RULE_MAX || v.rule == ATTN_RULE_MEAN ? "worst" : "first bad",
             i / D / S / H, i / D / S % H, i / D % S, i % D);
    return 1;
}

/* The kernel failed (an error, or a wrong output): call it once more under CUPTI's API
 * callbacks, and if it asked for more shared memory per block than this GPU allows, that is
 * the reason: not supported here, with the numbers. Returns only when it is not that. */
static void not_supported_if_smem_too_big(const struct cudaDeviceProp *prop) {
    char why[512];
    if (attn_requests_begin(why, sizeof why)) return; /* no CUPTI: the plain failure stands */
    B.kernel->fwd(&B.p, B.stream);
    cudaStreamSynchronize(B.stream);
    cudaGetLastError();
    const int asked = attn_requests_end();
    if ((size_t)asked > prop->sharedMemPerBlockOptin)
        finish("not_supported", ATTN_EXIT_SKIP, "not supported on this GPU: the kernel asks for %d bytes of "
               "shared memory per block; %s allows %zu (sharedMemPerBlockOptin)", asked, prop->name,
               prop->sharedMemPerBlockOptin);
}

/* The launches of one call of the kernel (CUPTI activity records), with the occupancy their
 * registers and shared memory allow, into the fragment and the output. */
static void record_launches(void) {
    attn_launch_info l[16];
    int n = 0;
    char why[512];
    int rc = attn_trace_launches(run_kernel, NULL, B.stream, l, 16, &n, why, sizeof why);
    if (rc) {
        printf("  launches: not available: %s\n", why);
        json_object_set_new(B.doc, "launches", json_pack("{s:b, s:s}", "available", 0, "reason", why));
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
    json_object_set_new(B.doc, "launches", json_pack("{s:b, s:i, s:o}", "available", 1, "count", n, "each", arr));
}

/* ---- baselines shared within a run (see the top of this file) ------------------------ */

static int env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

static json_t *cudnn_json(void);

/* Reads a shape's baseline figures left by an earlier benchmark of this run into B.tr and
 * the B.cudnn_* fields: 1 when usable. */
static int reuse_baselines(const json_t *doc) {
    const json_t *cud = json_object_get(doc, "cudnn");
    const char *measured_by = json_string_value(json_object_get(doc, "measured_by"));
    if (!measured_by || !json_is_object(cud) ||
        (B.have_reference && attn_timing_from_json(json_object_get(doc, "reference"), &B.tr)))
        return 0;
    const char *lib = json_string_value(json_object_get(cud, "library"));
    snprintf(B.cudnn_lib, sizeof B.cudnn_lib, "%s", lib ? lib : "");
    B.cudnn_version = json_is_integer(json_object_get(cud, "version"))
                          ? (long)json_integer_value(json_object_get(cud, "version")) : 0;
    if (json_is_true(json_object_get(cud, "available"))) {
        const char *k = json_string_value(json_object_get(cud, "kind"));
        if (!k || !B.cudnn_version || attn_timing_from_json(json_object_get(cud, "timing"), &B.tc)) return 0;
        snprintf(B.cudnn_kind, sizeof B.cudnn_kind, "%s", k);
        /* the engine and its search: every other key */
        B.cudnn_engine = json_deep_copy(cud);
        static const char *const own[] = {"available", "kind", "version", "timing", "library", "reason"};
        for (size_t i = 0; B.cudnn_engine && i < sizeof own / sizeof own[0]; i++)
            json_object_del(B.cudnn_engine, own[i]);
        B.have_cudnn = 1;
    } else {
        const char *r = json_string_value(json_object_get(cud, "reason"));
        snprintf(B.cudnn_why, sizeof B.cudnn_why, "%s", r ? r : "(no reason recorded)");
        B.have_cudnn = 0;
    }
    snprintf(B.measured_by, sizeof B.measured_by, "%s", measured_by);
    return 1;
}

/* Leaves this shape's baseline figures (B.tr, the cuDNN object) for the other kernels'
 * benchmarks of the run. A failure to write costs only their time: it is reported, never
 * fatal. */
static void store_baselines(const char *path) {
    char dir[1400], err[512];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    json_t *doc = json_pack("{s:s, s:o*, s:o*}", "measured_by", B.name, "reference",
                            B.have_reference ? attn_timing_json(&B.tr) : NULL, "cudnn", cudnn_json());
    if (!doc || attn_mkdirs(dir, err, sizeof err) || attn_json_write_atomic(doc, path, err, sizeof err))
        fprintf(stderr, "attn_benchmark: note: baselines not shared (%s)\n", doc ? err : "out of memory");
    json_decref(doc);
}

/* ---- the arguments ------------------------------------------------------------------ */

static void usage(const char *why) {
    fprintf(stderr, "attn_benchmark: %s\nusage: attn_benchmark --name N --kernel K [--plugin L] "
            "--dtype fp16|bf16 --head-dim D --mask full|causal --seqlen S --tokens T --hidden H "
            "--thresholds-dir DIR --tolerance FILE [--fragments DIR]\n"
            "   or: ... --mask M --workload decode|varlen|window --heads H --heads-k HK\n"
            "       [--batch B --shape QxK] [--sequences QxK+QxK+...] [--page-size P] [--window L:R]\n", why);
    exit(2);
}

/* "QxK" into *q, *k (each >= 0); 0, or -1 when malformed */
static int parse_qk(const char *s, int *q, int *k) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || *end != 'x') return -1;
    const char *t = end + 1;
    long b = strtol(t, &end, 10);
    if (end == t || (*end && *end != '+') || a < 0 || b < 0 || a > (1L << 24) || b > (1L << 24)) return -1;
    *q = (int)a, *k = (int)b;
    return 0;
}

/* --sequences "QxK+QxK+..." into B.lens_q, B.lens_k */
static void parse_sequences(const char *s) {
    B.nseq = 0;
    for (const char *t = s; t && *t; t = strchr(t, '+') ? strchr(t, '+') + 1 : NULL) {
        if (B.nseq == MAX_BENCH_SEQS) usage("--sequences: more than 256 sequences");
        if (parse_qk(t, &B.lens_q[B.nseq], &B.lens_k[B.nseq])) usage("--sequences: expected QxK+QxK+...");
        B.nseq++;
    }
    if (!B.nseq) usage("--sequences: expected QxK+QxK+...");
}

static int positive(const char *opt, const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > (1L << 30)) {
        fprintf(stderr, "attn_benchmark: %s: expected a positive integer, got '%s'\n", opt, s);
        exit(2);
    }
    return (int)v;
}

/* Reads and checks the command line into B; a bad one exits 2 with the usage. */
static void parse_args(int argc, char **argv) {
    static const struct option opts[] = {
        {"name", 1, 0, 'n'}, {"kernel", 1, 0, 'k'}, {"plugin", 1, 0, 'p'}, {"dtype", 1, 0, 't'},
        {"head-dim", 1, 0, 'd'}, {"mask", 1, 0, 'm'}, {"seqlen", 1, 0, 's'}, {"tokens", 1, 0, 'T'},
        {"hidden", 1, 0, 'H'}, {"thresholds-dir", 1, 0, 'D'}, {"tolerance", 1, 0, 'o'},
        {"fragments", 1, 0, 'f'}, {"workload", 1, 0, 'w'}, {"batch", 1, 0, 'b'}, {"heads", 1, 0, 'e'},
        {"heads-k", 1, 0, 'K'}, {"shape", 1, 0, 'S'}, {"sequences", 1, 0, 'Q'}, {"page-size", 1, 0, 'P'},
        {"window", 1, 0, 'W'}, {0, 0, 0, 0}};
    const char *shape = NULL, *sequences = NULL, *window = NULL;
    B.window_left = B.window_right = -1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n': B.name = optarg; break;
        case 'k': B.kernel_name = optarg; break;
        case 'p': B.plugin = optarg; break;
        case 't': B.dtype_name = optarg; break;
        case 'd': B.head_dim = positive("--head-dim", optarg); break;
        case 'm': B.mask_name = optarg; break;
        case 's': B.seqlen = positive("--seqlen", optarg); break;
        case 'T': B.tokens = positive("--tokens", optarg); break;
        case 'H': B.hidden = positive("--hidden", optarg); break;
        case 'D': B.thresholds_dir = optarg; break;
        case 'o': B.tolerance_path = optarg; break;
        case 'f': B.fragments = optarg; break;
        case 'w': B.workload_name = optarg; break;
        case 'b': B.batch = positive("--batch", optarg); break;
        case 'e': B.heads = positive("--heads", optarg); break;
        case 'K': B.heads_k = positive("--heads-k", optarg); break;
        case 'S': shape = optarg; break;
        case 'Q': sequences = optarg; break;
        case 'P': B.page_size = positive("--page-size", optarg); break;
        case 'W': window = optarg; break;
        default: usage("unknown option");
        }
    }
    if (optind != argc || !B.name || !B.kernel_name || !B.dtype_name || !B.mask_name || !B.head_dim ||
        !B.thresholds_dir || !B.tolerance_path)
        usage("missing or unexpected argument");
    if (attn_dtype_parse(B.dtype_name, &B.dtype)) usage("--dtype: expected fp16 or bf16");
    if (strcmp(B.mask_name, "full") && strcmp(B.mask_name, "causal")) usage("--mask: expected full or causal");
    B.causal = !strcmp(B.mask_name, "causal");
    B.workload = B.causal ? ATTN_WORKLOAD_CAUSAL : ATTN_WORKLOAD_FULL;
    if (!B.workload_name) { /* the dense matrix */
        if (!B.seqlen || !B.tokens || !B.hidden || B.batch || B.heads || B.heads_k || shape || sequences ||
            B.page_size || window)
            usage("the dense matrix takes --seqlen, --tokens and --hidden, and none of version 2's options");
        if (B.hidden % B.head_dim) usage("--hidden must be a multiple of --head-dim");
        B.workload_name = B.mask_name;
        return;
    }
    B.workload = attn_workload_parse(B.workload_name);
    if (B.workload <= ATTN_WORKLOAD_CAUSAL) usage("--workload: expected decode, varlen or window");
    if (B.seqlen || B.tokens || B.hidden || !B.heads || !B.heads_k || B.heads % B.heads_k)
        usage("a workload takes --heads and --heads-k (dividing it), not --seqlen, --tokens or --hidden");
    if ((B.workload == ATTN_WORKLOAD_VARLEN) != (sequences != NULL) || (B.workload == ATTN_WORKLOAD_VARLEN) == (shape != NULL))
        usage("varlen takes --sequences; decode and window take --shape QxK");
    if ((B.workload == ATTN_WORKLOAD_DECODE) != (B.page_size > 0)) usage("decode, and only decode, takes --page-size");
    if ((B.workload == ATTN_WORKLOAD_WINDOW) != (window != NULL)) usage("window, and only window, takes --window L:R");
    if (window && (sscanf(window, "%d:%d", &B.window_left, &B.window_right) != 2 || B.window_left < -1 ||
                   B.window_right < -1 || (B.window_left < 0 && B.window_right < 0)))
        usage("--window: expected L:R, each -1 (unbounded) or >= 0, not both -1");
    if (B.causal && B.window_right > 0) B.window_right = 0; /* causal is a right bound of 0 */
    if (sequences) {
        parse_sequences(sequences);
    } else {
        if (!B.batch || B.batch > MAX_BENCH_SEQS) usage("--batch: expected 1 to 256 sequences");
        int q, k;
        if (parse_qk(shape, &q, &k) || strchr(shape, '+') || q < 1 || k < 1) usage("--shape: expected QxK, both >= 1");
        B.nseq = B.batch;
        for (int b = 0; b < B.nseq; b++) B.lens_q[b] = q, B.lens_k[b] = k;
    }
}

/* ---- set-up ------------------------------------------------------------------------- */

/* The tolerance file, the kernel, a GPU. 0 when all are there; else main's exit code. No
 * fragment exists yet, so these report on stderr/stdout only. */
static int open_harness(void) {
    char err[2048];
    if (attn_tolerance_load(B.tolerance_path, &tol, err, sizeof err)) {
        fprintf(stderr, "attn_benchmark: %s\n", err);
        return 2;
    }
    if (!(B.kernel = attn_find_kernel(B.kernel_name, B.plugin, err, sizeof err))) {
        fprintf(stderr, "attn_benchmark: %s\n", err);
        return 2;
    }
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    return 0;
}

/* Starts the fragment with the shape; from here on finish() records every exit in it.
 * 0, or 2 when the JSON cannot be built. */
static int begin_fragment(void) {
    int seqlen_q = B.seqlen;
    if (B.workload <= ATTN_WORKLOAD_CAUSAL) { /* the shape: FlashAttention's benchmark convention */
        B.batch = B.tokens / B.seqlen > 0 ? B.tokens / B.seqlen : 1, B.heads = B.hidden / B.head_dim;
        B.heads_k = B.heads;
    } else { /* the longest sequence's lengths; its keys pick the thresholds class */
        B.batch = B.nseq, seqlen_q = 0, B.seqlen = 0;
        for (int b = 0; b < B.nseq; b++) {
            seqlen_q = B.lens_q[b] > seqlen_q ? B.lens_q[b] : seqlen_q;
            B.seqlen = B.lens_k[b] > B.seqlen ? B.lens_k[b] : B.seqlen;
        }
    }
    B.seqlen_q = seqlen_q;
    B.doc = json_pack("{s:s, s:s, s:s, s:i, s:b, s:i, s:i, s:i, s:i, s:s, s:i}", "test", B.name, "kernel",
                      B.kernel_name, "dtype", B.dtype_name, "head_dim", B.head_dim, "causal", B.causal,
                      "seqlen_q", seqlen_q, "seqlen_k", B.seqlen, "batch", B.batch, "heads", B.heads,
                      "workload", attn_workload_name(B.workload), "heads_k", B.heads_k);
    if (!B.doc) return fprintf(stderr, "attn_benchmark: cannot build JSON\n"), 2;
    if (B.workload > ATTN_WORKLOAD_CAUSAL) { /* what else the problem is */
        json_object_set_new(B.doc, "window", json_pack("[i,i]", B.window_left, B.window_right));
        json_object_set_new(B.doc, "page_size", json_integer(B.page_size));
        json_t *lens = json_array();
        for (int b = 0; b < B.nseq; b++) json_array_append_new(lens, json_pack("[i,i]", B.lens_q[b], B.lens_k[b]));
        json_object_set_new(B.doc, "sequences", lens);
    }
    phases = json_object();
    json_object_set_new(B.doc, "phases_s", phases);
    return 0;
}

/* Finds this GPU's thresholds file and the class that judges the kernel; B.cls stays NULL
 * when none covers the case. */
static void load_thresholds(void) {
    /* thresholds for this GPU and class, before spending any time */
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&B.prop, dev) != cudaSuccess)
        finish("fail", 1, "cannot read the device's properties");
    char slug[256], err[2048];
    attn_gpu_slug(B.prop.name, slug, sizeof slug);
    snprintf(B.tpath, sizeof B.tpath, "%s/%s.ini", B.thresholds_dir, slug);
    FILE *probe = fopen(B.tpath, "r");
    if (!probe)
        finish("skipped", ATTN_EXIT_SKIP, "no thresholds for %s; run attn_calibrate --write %s "
               "(from the build directory) on this GPU, then add the minimums", B.prop.name, B.thresholds_dir);
    fclose(probe);
    if (attn_thresholds_load(B.tpath, &B.th, err, sizeof err)) finish("fail", 2, "%s", err);
    if (strcmp(B.th.gpu_name, B.prop.name))
        finish("fail", 2, "%s: [gpu] name '%s' is not this GPU ('%s')", B.tpath, B.th.gpu_name, B.prop.name);
    B.judge_as = getenv("ATTN_THRESHOLDS_KERNEL");
    if (!B.judge_as || !*B.judge_as) B.judge_as = B.kernel_name;
    /* no class: measured and recorded all the same (so that minimums can be set from the
     * figures: scripts/set_thresholds.py), but skipped, never passed */
    B.cls = attn_thresholds_find(&B.th, B.judge_as, B.dtype, B.head_dim, B.workload, B.seqlen, B.seqlen_q);
}

static void make_workload_inputs(void);

/* Allocates Q, K, V, O and the stream, fills the inputs and sets the kernel's parameters. */
static void make_inputs(void) {
    if (B.workload > ATTN_WORKLOAD_CAUSAL) return make_workload_inputs();
    /* inputs: BSHD, random normal */
    attn_fwd_params *p = &B.p;
    size_t n = B.n = (size_t)B.batch * B.seqlen * B.heads * B.head_dim;
    attn_params_clear(p, B.heads);
    p->dtype = B.dtype, p->batch = B.batch, p->seqlen_q = p->seqlen_k = B.seqlen;
    p->head_dim = B.head_dim, p->causal = B.causal;
    p->softmax_scale = (float)(1.0 / sqrt((double)B.head_dim));
    void *buf[4];
    for (int t = 0; t < 4; t++)
        if (cudaMalloc(&buf[t], n * 2) != cudaSuccess) finish("fail", 2, "cudaMalloc of %zu bytes failed", n * 2);
    if (cudaStreamCreate(&B.stream) != cudaSuccess) finish("fail", 2, "cannot create a stream");
    uint64_t seed = attn_seed_from_name(B.name);
    for (int t = 0; t < 3; t++)
        if (attn_fill_normal(buf[t], B.dtype, n, seed + t, 1.0f, B.stream) != cudaSuccess)
            finish("fail", 2, "attn_fill_normal failed");
    p->q = buf[0], p->k = buf[1], p->v = buf[2], p->o = buf[3], p->lse = NULL;
    attn_strides st = attn_make_strides(ATTN_LAYOUT_BSHD, B.batch, B.heads, B.seqlen, B.head_dim);
    p->q_batch_stride = p->k_batch_stride = p->v_batch_stride = p->o_batch_stride = st.batch;
    p->q_head_stride = p->k_head_stride = p->v_head_stride = p->o_head_stride = st.head;
    p->q_row_stride = p->k_row_stride = p->v_row_stride = p->o_row_stride = st.row;
    B.o_elems = n;
}

/* n int32 from the host into a new device array */
static const int32_t *upload_i32(const int32_t *src, size_t n) {
    int32_t *d = NULL;
    if (cudaMalloc((void **)&d, n * sizeof *d) != cudaSuccess ||
        cudaMemcpy(d, src, n * sizeof *d, cudaMemcpyHostToDevice) != cudaSuccess)
        finish("fail", 2, "cannot upload %zu int32 to the GPU", n);
    return d;
}

/* A version-2 workload's problem: rows of [row][heads][dim] throughout. Q and O dense where
 * every sequence has the same number of queries (decode, window), else packed by
 * cu_seqlens_q (varlen); K and V dense (window), packed by cu_seqlens_k (varlen), or in a
 * shuffled pool of pages with seqused_k (decode). */
static void make_workload_inputs(void) {
    attn_fwd_params *p = &B.p;
    char err[512];
    const int paged = B.page_size > 0, dense = B.workload != ATTN_WORKLOAD_VARLEN;
    if (attn_seqs_make(&B.seqs, B.nseq, B.lens_q, B.lens_k, B.page_size, 0, attn_seed_from_name(B.name), err, sizeof err))
        finish("fail", 2, "%s", err);
    const attn_seqs *sq = &B.seqs;
    const int64_t H = B.heads, HK = B.heads_k, D = B.head_dim;
    const int64_t rows_q = sq->total_q, rows_k = paged ? (int64_t)sq->num_pages * B.page_size : sq->total_k;
    B.o_elems = (size_t)(rows_q * H * D);
    const size_t elems[4] = {(size_t)(rows_q * H * D), (size_t)(rows_k * HK * D), (size_t)(rows_k * HK * D), B.o_elems};
    void *buf[4];
    for (int t = 0; t < 4; t++)
        if (cudaMalloc(&buf[t], elems[t] * 2) != cudaSuccess) finish("fail", 2, "cudaMalloc of %zu bytes failed", elems[t] * 2);
    if (cudaStreamCreate(&B.stream) != cudaSuccess) finish("fail", 2, "cannot create a stream");
    uint64_t seed = attn_seed_from_name(B.name);
    for (int t = 0; t < 3; t++)
        if (attn_fill_normal(buf[t], B.dtype, elems[t], seed + t, 1.0f, B.stream) != cudaSuccess)
            finish("fail", 2, "attn_fill_normal failed");
    attn_params_clear(p, B.heads);
    p->dtype = B.dtype, p->batch = B.nseq, p->head_dim = B.head_dim, p->heads_k = B.heads_k;
    p->causal = B.causal, p->window_left = B.window_left, p->window_right = B.window_right;
    p->softmax_scale = (float)(1.0 / sqrt((double)B.head_dim));
    p->seqlen_q = sq->max_q, p->seqlen_k = sq->max_k;
    p->q = buf[0], p->k = buf[1], p->v = buf[2], p->o = buf[3], p->lse = NULL;
    p->q_head_stride = p->o_head_stride = D, p->q_row_stride = p->o_row_stride = H * D;
    p->k_head_stride = p->v_head_stride = D, p->k_row_stride = p->v_row_stride = HK * D;
    if (dense) /* rows b * S_q + i */
        p->q_batch_stride = p->o_batch_stride = sq->max_q * H * D;
    else
        p->cu_seqlens_q = upload_i32(sq->cu_seqlens_q, (size_t)B.nseq + 1);
    if (paged) {
        p->block_table = upload_i32(sq->block_table, (size_t)B.nseq * sq->block_table_stride);
        p->block_table_stride = sq->block_table_stride, p->page_size = B.page_size, p->num_pages = sq->num_pages;
        p->seqused_k = upload_i32((const int32_t *)B.lens_k, (size_t)B.nseq);
        p->seqlen_k = sq->block_table_stride * B.page_size;
        p->k_batch_stride = p->v_batch_stride = B.page_size * HK * D;
    } else if (dense) {
        p->k_batch_stride = p->v_batch_stride = sq->max_k * HK * D;
    } else {
        p->cu_seqlens_k = upload_i32(sq->cu_seqlens_k, (size_t)B.nseq + 1);
    }
    if (!dense && cudaMalloc(&B.o_dense, (size_t)B.nseq * H * sq->max_q * D * 2) != cudaSuccess)
        finish("fail", 2, "cudaMalloc for the unpacked output failed");
    const attn_problem_host host = {dense ? NULL : sq->cu_seqlens_q, paged || dense ? NULL : sq->cu_seqlens_k,
                                    sq->block_table, paged ? (const int32_t *)B.lens_k : NULL};
    if (attn_problem_check(p, &host, err, sizeof err)) finish("fail", 2, "harness error: %s", err);
}

/* Which configuration of a tunable kernel (attn_tuning) runs this problem, default or tuned
 * (flash2: a committed thresholds/<gpu>.tuned.txt): "config" {tunable: value, ..., "tuned"}. */
static void record_config(void) {
    char err[1024];
    const attn_tuning *t = attn_find_tuning(B.kernel, B.plugin, err, sizeof err);
    int values[ATTN_TUNE_MAX_TUNABLES], tuned = 0;
    if (!t || t->config_for(&B.p, values, &tuned) != ATTN_OK) return;
    json_t *c = json_object();
    printf("configuration (%s):", tuned ? "tuned" : "default");
    for (int i = 0; i < t->count; i++) {
        json_object_set_new(c, t->tunables[i].name, json_integer(values[i]));
        printf(" %s=%d", t->tunables[i].name, values[i]);
    }
    printf("\n");
    json_object_set_new(c, "tuned", json_boolean(tuned));
    json_object_set_new(B.doc, "config", c);
}

/* The golden and low-precision outputs that verify() judges every run against. */
static void make_references(void) {
    char err[2048];
    if (attn_ref_create(&B.ref, err, sizeof err)) finish("fail", 2, "reference: %s", err);
    if (compute_references(err, sizeof err)) finish("fail", 2, "reference: %s", err);
}

/* ---- the kernel --------------------------------------------------------------------- */

/* Exits when the kernel declines the case or its output is wrong: a wrong kernel is never
 * timed. */
static void verify_kernel(void) {
    char err[2048];
    if (attn_kernel_lacks(B.kernel, &B.p, err, sizeof err)) finish("not_supported", ATTN_EXIT_SKIP, "%s", err);
    int rc = B.kernel->fwd(&B.p, B.stream);
    if (rc == ATTN_UNSUPPORTED)
        finish("not_supported", ATTN_EXIT_SKIP, "kernel '%s' returned ATTN_UNSUPPORTED", B.kernel_name);
    cudaStreamSynchronize(B.stream);
    if (verify(run_kernel, NULL, err, sizeof err)) {
        not_supported_if_smem_too_big(&B.prop);
        finish("fail", 1, "the kernel's output is wrong, so it is not timed: %s", err);
    }
}

/* Creates the timer (kept for the baselines) and times the kernel into B.tk. */
static void time_kernel(void) {
    char err[2048];
    B.rules = (attn_timing_rules){10, 0.5, 0.005, 1.0, 0.75, 0};
    const char *tmo = getenv("ATTN_BENCH_TIMEOUT");
    if (tmo && atof(tmo) > 0) B.rules.timeout_s = atof(tmo);
    if (attn_timer_create(&B.timer, B.stream, err, sizeof err)) finish("fail", 2, "timer: %s", err);
    /* fresh poison before the timed launches, the verdict on what they leave: a kernel that
     * skips work when called again (on the same pointers) leaves NaN */
    if (cudaMemsetAsync(B.p.o, 0xff, B.o_elems * 2, B.stream) != cudaSuccess) finish("fail", 2, "cudaMemsetAsync failed");
    if (attn_measure(B.timer, run_kernel, NULL, &B.rules, &B.tk, err, sizeof err))
        finish("fail", 1, "timing the kernel: %s", err);
    judge_output_now(B.timed_output_why, sizeof B.timed_output_why);
}

/* ---- the baselines ------------------------------------------------------------------ */

/* The chosen engine config and how it was found, for the results (keys documented in
 * results/README.md): engine, engine_id, tuned, configs_tried, configs_built, configs_timed,
 * heuristics, and with tuning the chosen and the heuristics' first config's times. */
static json_t *cudnn_engine_json(const attn_cudnn_plan_info *in) {
    json_t *j = json_pack("{s:s, s:I, s:b, s:i, s:i, s:i, s:i, s:s, s:I, s:f, s:f}", "engine", in->engine,
                          "engine_id", (json_int_t)in->engine_id, "tuned", in->tuned, "configs_tried",
                          in->configs_tried, "configs_built", in->configs_built, "configs_timed", in->configs_timed,
                          "chosen_rank", in->chosen_rank, "heuristics", in->heuristics, "workspace_bytes",
                          (json_int_t)in->workspace_bytes, "build_s", in->build_s, "tune_s", in->tune_s);
    if (j && in->tuned)
        json_object_update_new(j, json_pack("{s:f, s:f}", "tune_best_ms", in->best_ms, "tune_first_ms", in->first_ms));
    return j;
}

/* 3. cuDNN, where it is there and takes the case: the engine configs autotuned on this
 * test's inputs (attn_cudnn_plan_create_ex; ATTN_CUDNN_AUTOTUNE=0: the first that builds),
 * the chosen one checked, then timed into B.tc. Any failure only leaves B.have_cudnn 0 and
 * the reason in B.cudnn_why. */
static void time_cudnn(void) {
    attn_cudnn *cudnn = NULL;
    attn_cudnn_plan *plan = NULL;
    if (attn_cudnn_open(&cudnn, B.cudnn_why, sizeof B.cudnn_why) == 0) {
        attn_cudnn_lib_info lib;
        attn_cudnn_get_library(cudnn, &lib);
        B.cudnn_version = lib.version;
        snprintf(B.cudnn_lib, sizeof B.cudnn_lib, "%s", lib.path[0] ? lib.path : lib.requested);
    }
    if (cudnn && attn_cudnn_plan_create_ex(cudnn, &B.p, NULL, B.stream, &plan, B.cudnn_why, sizeof B.cudnn_why) == 0) {
        char why[1024];
        phase_done("cudnn_plan");
        attn_cudnn_plan_info info;
        attn_cudnn_plan_get_info(plan, &info);
        if (verify(run_cudnn, plan, why, sizeof why))
            snprintf(B.cudnn_why, sizeof B.cudnn_why, "cuDNN's output (engine %s) fails the verdict rule: %s",
                     info.engine, why);
        else if (attn_measure(B.timer, run_cudnn, plan, &B.rules, &B.tc, why, sizeof why))
            snprintf(B.cudnn_why, sizeof B.cudnn_why, "timing cuDNN (engine %s) failed: %s", info.engine, why);
        else {
            B.have_cudnn = 1;
            snprintf(B.cudnn_kind, sizeof B.cudnn_kind, "%s", attn_cudnn_plan_kind(plan));
            B.cudnn_engine = cudnn_engine_json(&info);
        }
    }
    attn_cudnn_plan_destroy(plan);
    attn_cudnn_close(cudnn);
}

/* The cuDNN baseline's object in the fragment (record_figures adds the speedups) and in the
 * shared baselines file. */
static json_t *cudnn_json(void) {
    json_t *j = B.have_cudnn ? json_pack("{s:b, s:s, s:I, s:o}", "available", 1, "kind", B.cudnn_kind, "version",
                                         (json_int_t)B.cudnn_version, "timing", attn_timing_json(&B.tc))
                             : json_pack("{s:b, s:s}", "available", 0, "reason", B.cudnn_why);
    if (!j) return NULL;
    if (!B.have_cudnn && B.cudnn_version) json_object_set_new(j, "version", json_integer(B.cudnn_version));
    if (B.cudnn_lib[0]) json_object_set_new(j, "library", json_string(B.cudnn_lib));
    if (B.have_cudnn && B.cudnn_engine) json_object_update(j, B.cudnn_engine);
    return j;
}

/* 2. the cuBLAS + softmax baseline: its output checked on this test's inputs, its timing
 * measured here or reused from this run's first benchmark of the shape */
static void baselines(void) {
    char err[2048];
    B.have_reference = B.workload <= ATTN_WORKLOAD_CAUSAL; /* attn_ref_baseline: version 1 only */
    if (B.have_reference && verify(run_baseline, NULL, err, sizeof err))
        finish("fail", 2, "harness error: the baseline is wrong: %s", err);
    char cache_path[1400] = "";
    if (B.fragments && !env_is("ATTN_BENCH_REUSE_BASELINES", "0") && B.have_reference)
        snprintf(cache_path, sizeof cache_path, "%s/baselines/%s-d%d-%s-s%d-t%d-h%d-pci%04x%02x%02x.json",
                 B.fragments, attn_dtype_name(B.dtype), B.head_dim, B.causal ? "causal" : "full", B.seqlen,
                 B.tokens, B.hidden, B.prop.pciDomainID, B.prop.pciBusID, B.prop.pciDeviceID);
    else if (B.fragments && !env_is("ATTN_BENCH_REUSE_BASELINES", "0")) {
        uint64_t lens = 1469598103934665603ull; /* FNV-1a of the sequences' lengths */
        for (int b = 0; b < B.nseq; b++)
            lens = (lens ^ (uint64_t)B.lens_q[b] << 32 ^ (uint64_t)B.lens_k[b]) * 1099511628211ull;
        snprintf(cache_path, sizeof cache_path, "%s/baselines/%s-%s-d%d-%s-n%d-h%d-kv%d-w%d_%d-p%d-%016llx-"
                 "pci%04x%02x%02x.json", B.fragments, B.workload_name, attn_dtype_name(B.dtype), B.head_dim,
                 B.mask_name, B.nseq, B.heads, B.heads_k, B.window_left, B.window_right, B.page_size,
                 (unsigned long long)lens, B.prop.pciDomainID, B.prop.pciBusID, B.prop.pciDeviceID);
    }
    json_t *cached = cache_path[0] ? json_load_file(cache_path, 0, NULL) : NULL;
    if (cached && reuse_baselines(cached)) {
        phase_done("baseline");
    } else {
        B.measured_by[0] = 0, B.cudnn_lib[0] = 0, B.cudnn_version = 0, B.have_cudnn = 0;
        json_decref(B.cudnn_engine);
        B.cudnn_engine = NULL;
        if (B.have_reference && attn_measure(B.timer, run_baseline, NULL, &B.rules, &B.tr, err, sizeof err))
            finish("fail", 2, "timing the baseline: %s", err);
        phase_done("baseline");
        time_cudnn();
        if (cache_path[0]) store_baselines(cache_path);
    }
    json_decref(cached);
}

/* ---- figures, verdict --------------------------------------------------------------- */

/* What the timings mean: work, roofline, speedups (with their confidence intervals). */
struct figures {
    double flops, bytes, peak, bw, floor_s, t, roofline, roofline_hi;
    double sp_ref, sp_ref_lo, sp_ref_hi, sp_cud, sp_cud_lo, sp_cud_hi; /* sp_cud*: NAN without cuDNN */
};

/* A version-2 workload's work, counted row by row: 4 D FLOPs per visible (query, key) pair
 * and head; Q read and O written once, and per KV head the keys (K and V rows) that some
 * query of the sequence sees, read once. Visible: -window_left <= j - (i + S_k - S_q) <=
 * window_right (causal: 0), 0 <= j < S_k, as attn_abi.h defines it. */
static void count_workload(double *flops, double *bytes) {
    const int right = B.causal ? 0 : B.window_right;
    double pairs = 0, keys_read = 0, rows = 0;
    for (int b = 0; b < B.nseq; b++) {
        const int64_t sq = B.lens_q[b], sk = B.lens_k[b];
        int64_t first = sk, last = -1; /* the keys some row sees */
        for (int64_t i = 0; i < sq; i++) {
            const int64_t diag = i + sk - sq;
            int64_t lo = B.window_left >= 0 ? diag - B.window_left : 0, hi = right >= 0 ? diag + right : sk - 1;
            lo = lo < 0 ? 0 : lo, hi = hi > sk - 1 ? sk - 1 : hi;
            if (hi < lo) continue;
            pairs += (double)(hi - lo + 1);
            first = lo < first ? lo : first, last = hi > last ? hi : last;
        }
        keys_read += last >= first ? (double)(last - first + 1) : 0;
        rows += (double)sq;
    }
    *flops = 4.0 * B.head_dim * B.heads * pairs;
    *bytes = 2.0 * B.head_dim * (2 * rows * B.heads + 2 * keys_read * B.heads_k);
}

static struct figures compute_figures(void) {
    struct figures f;
    const attn_timing *tk = &B.tk, *tr = &B.tr, *tc = &B.tc;
    /* work, roofline, speedups: the dense matrix keeps its approximate count (S^2 / 2 pairs
     * when causal) so that its figures stay comparable with earlier runs */
    f.flops = 4.0 * B.batch * B.heads * (double)B.seqlen * B.seqlen * B.head_dim * (B.causal ? 0.5 : 1.0);
    f.bytes = 4.0 * B.n * 2; /* Q, K, V read once, O written once */
    if (B.workload > ATTN_WORKLOAD_CAUSAL) count_workload(&f.flops, &f.bytes);
    f.peak = (B.dtype == ATTN_BF16 ? B.th.bf16_tflops : B.th.fp16_tflops) * 1e12, f.bw = B.th.bandwidth_gbs * 1e9;
    f.floor_s = fmax(f.flops / f.peak, f.bytes / f.bw);
    f.t = tk->median_ms * 1e-3;
    f.roofline = f.floor_s / f.t, f.roofline_hi = f.floor_s / (tk->ci_lo_ms * 1e-3);
    f.sp_ref = f.sp_ref_lo = f.sp_ref_hi = NAN;
    if (B.have_reference) {
        f.sp_ref = tr->median_ms / tk->median_ms, f.sp_ref_lo = tr->ci_lo_ms / tk->ci_hi_ms;
        f.sp_ref_hi = tr->ci_hi_ms / tk->ci_lo_ms;
    }
    f.sp_cud = NAN, f.sp_cud_lo = NAN, f.sp_cud_hi = NAN;
    if (B.have_cudnn) {
        f.sp_cud = tc->median_ms / tk->median_ms, f.sp_cud_lo = tc->ci_lo_ms / tk->ci_hi_ms;
        f.sp_cud_hi = tc->ci_hi_ms / tk->ci_lo_ms;
    }
    return f;
}

/* The figures on stdout: a readable summary and CTest's measurement tags. */
static void print_figures(const struct figures *f) {
    const attn_timing *tk = &B.tk, *tr = &B.tr, *tc = &B.tc;
    printf("%s: kernel %.4f ms [%.4f, %.4f] (%d samples, %d dropped for clock%s), %.1f TFLOP/s, %.0f GB/s, "
           "roofline %.1f%% (%s-bound floor %.4f ms)\n", B.name, tk->median_ms, tk->ci_lo_ms, tk->ci_hi_ms,
           tk->samples, tk->dropped_clock, tk->noisy ? ", noisy" : "", f->flops / f->t * 1e-12,
           f->bytes / f->t * 1e-9, 100 * f->roofline, f->flops / f->peak > f->bytes / f->bw ? "compute" : "memory",
           f->floor_s * 1e3);
    if (B.have_reference)
        printf("  baseline (cuBLAS + softmax) %.4f ms: speedup %.2fx [%.2f, %.2f]\n", tr->median_ms, f->sp_ref,
               f->sp_ref_lo, f->sp_ref_hi);
    else
        printf("  baseline (cuBLAS + softmax): none for the %s workload (version-1 problems only)\n", B.workload_name);
    if (B.measured_by[0]) printf("  baselines timed by %s in this run\n", B.measured_by);
    if (B.have_cudnn) {
        const json_t *e = B.cudnn_engine;
        const char *engine = json_string_value(json_object_get(e, "engine"));
        printf("  cuDNN (%s, %ld, engine %s, %lld of %lld configs built%s) %.4f ms: speedup %.2fx [%.2f, %.2f]\n",
               B.cudnn_kind, B.cudnn_version, engine ? engine : "?",
               e ? (long long)json_integer_value(json_object_get(e, "configs_built")) : 0LL,
               e ? (long long)json_integer_value(json_object_get(e, "configs_tried")) : 0LL,
               e && json_is_true(json_object_get(e, "tuned")) ? ", the fastest kept" : ", the first kept",
               tc->median_ms, f->sp_cud, f->sp_cud_lo, f->sp_cud_hi);
        if (B.cudnn_lib[0]) printf("  cuDNN library: %s\n", B.cudnn_lib);
    } else
        printf("  cuDNN: not available: %s\n", B.cudnn_why);
    measure("kernel_ms", tk->median_ms, "");
    measure("tflops", f->flops / f->t * 1e-12, "");
    measure("gbs", f->bytes / f->t * 1e-9, "");
    measure("roofline_efficiency", f->roofline, "");
    if (B.have_reference) measure("speedup_reference", f->sp_ref, "");
    if (B.have_cudnn) measure("speedup_cudnn", f->sp_cud, "");
}

/* The figures into the fragment; done before the verdict so a skipped or failed test still
 * carries them (scripts/set_thresholds.py sets minimums from them). */
static void record_figures(const struct figures *f) {
    json_object_set_new(B.doc, "kernel_timing", attn_timing_json(&B.tk));
    json_object_set_new(B.doc, "flops", json_real(f->flops));
    json_object_set_new(B.doc, "bytes", json_real(f->bytes));
    json_object_set_new(B.doc, "tflops", json_real(f->flops / f->t * 1e-12));
    json_object_set_new(B.doc, "gbs", json_real(f->bytes / f->t * 1e-9));
    json_object_set_new(B.doc, "roofline_efficiency", json_real(f->roofline));
    json_object_set_new(B.doc, "roofline_bound", json_string(f->flops / f->peak > f->bytes / f->bw ? "compute" : "memory"));
    json_t *base = json_object();
    if (B.have_reference)
        json_object_set_new(base, "reference", json_pack("{s:o, s:f, s:[f,f]}", "timing", attn_timing_json(&B.tr),
                                                          "speedup", f->sp_ref, "speedup_ci", f->sp_ref_lo,
                                                          f->sp_ref_hi));
    json_t *cud = cudnn_json();
    if (cud && B.have_cudnn) {
        json_object_set_new(cud, "speedup", json_real(f->sp_cud));
        json_object_set_new(cud, "speedup_ci", json_pack("[f,f]", f->sp_cud_lo, f->sp_cud_hi));
    }
    json_object_set_new(base, "cudnn", cud ? cud : json_pack("{s:b, s:s}", "available", 0, "reason", "out of memory"));
    if (B.measured_by[0]) json_object_set_new(base, "timed_by", json_string(B.measured_by));
    json_object_set_new(B.doc, "baselines", base);
    json_object_set_new(B.doc, "peaks", json_pack("{s:f, s:f}", "tflops", f->peak * 1e-12, "gbs", f->bw * 1e-9));
}

/* A figure the harness cannot stand behind fails as an invalid measurement, never passes:
 * too few samples (the timeout path), a time under the physical floor of the work on this
 * GPU, or wrong output left by the timed launches. Recorded in the fragment either way. */
enum { FLOOR_MARGIN_PCT = 25 }; /* the calibrated peaks are measured (a GEMM, a copy), and L2
                                   write-back can absorb O's writes: 125 % of the roofline,
                                   at the CI's slow end, is beyond both */
static void check_measurement(const struct figures *f) {
    char why[4096] = "";
    size_t wl = 0;
    const attn_timing *t[3] = {&B.tk, B.have_reference ? &B.tr : NULL, B.have_cudnn ? &B.tc : NULL};
    const char *who[3] = {"the kernel", "the cuBLAS baseline", "the cuDNN baseline"};
    int samples_ok = 1;
    for (int i = 0; i < 3; i++)
        if (t[i] && t[i]->samples < B.rules.min_samples) {
            samples_ok = 0;
            wl += snprintf(why + wl, sizeof why - wl, "%s has %d samples, fewer than the %d the rules ask "
                           "(the timeout of %.1f s ended it); ", who[i], t[i]->samples, B.rules.min_samples,
                           B.rules.timeout_s);
        }
    const double slowest = B.tk.ci_hi_ms * 1e-3; /* the CI's slow end */
    const int have_peaks = f->peak > 0 && f->bw > 0; /* no thresholds file: no peaks, no floor */
    const int floor_ok = !have_peaks || slowest * (1 + FLOOR_MARGIN_PCT / 100.0) >= f->floor_s;
    if (!floor_ok)
        wl += snprintf(why + wl, sizeof why - wl, "the kernel's time %.4g ms (CI up to %.4g ms) is under the "
                       "physical floor of its work on this GPU, %.4g ms (%.3g FLOP at %.0f TFLOP/s, %.3g bytes at "
                       "%.0f GB/s), by more than %d %%: %.0f %% of the roofline; work not on the timed stream, or "
                       "skipped; ", B.tk.median_ms, B.tk.ci_hi_ms, f->floor_s * 1e3, f->flops, f->peak * 1e-12,
                       f->bytes, f->bw * 1e-9, FLOOR_MARGIN_PCT, 100 * f->roofline);
    const int output_ok = !B.timed_output_why[0];
    if (!output_ok)
        wl += snprintf(why + wl, sizeof why - wl, "the output the timed launches left is wrong (%s); ",
                       B.timed_output_why);
    json_object_set_new(B.doc, "measurement", json_pack("{s:b, s:{s:b, s:i, s:i}, s:{s:b, s:b, s:f, s:f}, s:{s:b, s:s}}",
        "valid", samples_ok && floor_ok && output_ok,
        "samples", "ok", samples_ok, "kernel", B.tk.samples, "min", B.rules.min_samples,
        "physical_floor", "ok", floor_ok, "checked", have_peaks, "floor_ms", have_peaks ? f->floor_s * 1e3 : 0.0,
        "kernel_ci_hi_ms", B.tk.ci_hi_ms,
        "timed_output", "ok", output_ok, "reason", B.timed_output_why));
    if (wl) finish("invalid_measurement", 1, "invalid measurement: %s", why);
}

/* Judges the figures by the thresholds class and exits with the verdict. */
static void judge(const struct figures *f) __attribute__((noreturn));
static void judge(const struct figures *f) {
    const attn_threshold_class *cls = B.cls;
    if (!cls)
        finish("skipped", ATTN_EXIT_SKIP, "measured, but no thresholds class in %s covers %s %s d%d %s s%d q%d; "
               "add a section [%s <dtype|*> <d64|d128|*> <%s|*> <lo>-<hi> [q<lo>-<hi>]] "
               "(scripts/set_thresholds.py writes them from a results file)", B.tpath, B.judge_as, B.dtype_name,
               B.head_dim, B.workload_name, B.seqlen, B.seqlen_q, B.judge_as, B.workload_name);
    json_t *jt = json_pack("{s:s, s:s, s:s, s:f}", "file", B.tpath, "judged_as", B.judge_as, "class",
                           cls->section, "min_roofline", cls->min_roofline);
    json_object_set_new(jt, "min_speedup_reference",
                        isnan(cls->min_speedup_reference) ? json_null() : json_real(cls->min_speedup_reference));
    json_object_set_new(jt, "min_speedup_cudnn", isnan(cls->min_speedup_cudnn) ? json_null() : json_real(cls->min_speedup_cudnn));
    json_object_set_new(B.doc, "thresholds", jt);

    /* the verdict: fail only when confidently below a minimum (the optimistic end of the
     * confidence interval is still below it) */
    char fails[2048] = "";
    size_t fl = 0;
    if (B.have_reference && f->sp_ref_hi < cls->min_speedup_reference)
        fl += snprintf(fails + fl, sizeof fails - fl, "speedup vs reference %.2fx (CI up to %.2fx) < minimum %.2fx; ",
                       f->sp_ref, f->sp_ref_hi, cls->min_speedup_reference);
    if (B.have_cudnn && !isnan(cls->min_speedup_cudnn) && f->sp_cud_hi < cls->min_speedup_cudnn)
        fl += snprintf(fails + fl, sizeof fails - fl, "speedup vs cuDNN %.2fx (CI up to %.2fx) < minimum %.2fx; ",
                       f->sp_cud, f->sp_cud_hi, cls->min_speedup_cudnn);
    if (f->roofline_hi < cls->min_roofline)
        fl += snprintf(fails + fl, sizeof fails - fl, "roofline efficiency %.1f%% (CI up to %.1f%%) < minimum %.1f%%; ",
                       100 * f->roofline, 100 * f->roofline_hi, 100 * cls->min_roofline);
    if (fl) finish("fail", 1, "%s(thresholds %s [%s], judged as %s)", fails, B.tpath, cls->section, B.judge_as);
    char cud[64] = "n/a", ref[64] = "n/a";
    if (B.have_cudnn) snprintf(cud, sizeof cud, "%.2fx", f->sp_cud);
    if (B.have_reference) snprintf(ref, sizeof ref, "%.2fx", f->sp_ref);
    finish("pass", 0, "speedup %s vs reference, %s vs cuDNN, roofline %.1f%% (thresholds [%s] in %s)", ref, cud,
           100 * f->roofline, cls->section, B.tpath);
}

/* ---- main: the phases in order (see the top of this file) --------------------------- */

int main(int argc, char **argv) {
    const double t_main = attn_wall_s();
    parse_args(argc, argv);
    int rc = open_harness();
    if (rc) return rc;
    if ((rc = begin_fragment())) return rc;
    phase_start = t_main;
    phase_done("startup"); /* arguments, the tolerance file, the CUDA context */

    load_thresholds();
    make_inputs();
    record_config();
    phase_done("setup");
    make_references();
    phase_done("references");

    /* 1. the kernel: right first, then timed */
    verify_kernel();
    phase_done("verify_kernel");
    time_kernel();
    phase_done("time_kernel");

    /* 2. and 3. the baselines, checked on this test's inputs; timed here or reused */
    baselines();
    phase_done("cudnn");
    record_launches(); /* after the timings: CUPTI stays out of them */
    phase_done("launches");

    const struct figures f = compute_figures();
    print_figures(&f);
    record_figures(&f);
    attn_timer_destroy(B.timer);
    check_measurement(&f);
    judge(&f);
}
