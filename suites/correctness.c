/* The correctness suite: one process per test, each test a list of cases (the cross product
 * of dtypes, head dims, masks and shapes), one Check test case per check of a case, so a
 * failure names its case and its check.
 *
 *   attn_correctness --name correctness/simple/bf16/d128/causal --kernel simple
 *       [--plugin lib.so] --dtype bf16 --head-dim 128 --mask causal --shapes 4,17,1000,1x239
 *       --batch 2 --heads 3 --tolerance thresholds/tolerance.ini
 *
 * Prints one line per case, "CASE <dtype>/d<D>/<mask>/<shape> passed|FAILED <checks>|
 * NOT_SUPPORTED|SKIPPED|NOT_RUN", a tally, and for each failed case the command that reruns
 * it alone. Exit: 0 no case failed and one passed; 1 a case failed or did not run; 77 no GPU,
 * or no case supported or runnable here (the reasons are printed); 2 bad arguments or a
 * harness error.
 *
 * Isolation: a CUDA context does not survive fork(), so Check runs without forking
 * (CK_NOFORK) inside one child process that runs the cases (harness/supervise.h); a case that
 * crashes it, hangs past --case-timeout or leaves its CUDA context broken fails alone, and a
 * new child runs the cases after it. One process per case would cost a CUDA context each:
 * about 0.13 s, serialized by the driver across processes.
 * Seeds derive from the kernel, the case and the check (never from the grouping);
 * ATTN_SEED=<n> overrides them. CK_RUN_CASE=<check> runs one check. */
#include <check.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attn_abi.h"
#include "gpu_verify.h"
#include "harness.h"
#include "reference.h"
#include "registry.h"
#include "pairwise.h"
#include "problem.h"
#include "seqs.h"
#include "supervise.h"
#include "verdict.h"

/* ---------------------------------------------------------------- configuration ---- */

static struct {
    const char *name;      /* CTest test name: messages */
    char seed_name[288];   /* the case's name for its seeds: correctness/<kernel>/<case> */
    const attn_kernel *kernel;
    attn_dtype dtype;
    int batch, heads, seqlen_q, seqlen_k, head_dim, causal;
    int heads_k, head_dim_v, window_left, window_right; /* version 2 (off: heads, head_dim, -1, -1) */
    /* a packed case (check 'packed'): nseq sequences of lens_q[b] queries and lens_k[b] keys,
     * K and V packed too (page_size 0) or in a pool of pages */
    int nseq, page_size;
    const int *lens_q, *lens_k;
    float softcap;
    attn_tolerance tol;
    attn_reference *ref;
    cudaStream_t stream;
    char unsupported[512]; /* first ATTN_UNSUPPORTED seen, reported at exit */
} cfg;

enum { GUARD_BYTES = 4096 }; /* guard band before and after every buffer */
static const unsigned char POISON = 0xff; /* all-ones: NaN in fp16, bf16 and float32 */

/* ----------------------------------------------------------------- messages ---- */

static char msg[32768];
static size_t msg_len;

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg + msg_len, sizeof msg - msg_len, fmt, ap);
    va_end(ap);
    if (n > 0) msg_len += (size_t)n < sizeof msg - msg_len ? (size_t)n : sizeof msg - msg_len - 1;
}

static void say_header(const char *check, uint64_t seed, attn_layout lq, attn_layout lo,
                       float scale) {
    msg_len = 0;
    msg[0] = 0;
    say("%s: check '%s' failed\n  shape: batch=%d heads=%d heads_k=%d seqlen_q=%d seqlen_k=%d head_dim=%d "
        "head_dim_v=%d window=(%d,%d) softcap=%g %s %s, layouts q/k/v %s o %s, softmax_scale=%g\n"
        "  seed: ATTN_SEED=0x%016llx CK_RUN_CASE=%s reproduces it\n",
        cfg.seed_name, check, cfg.batch, cfg.heads, cfg.heads_k, cfg.seqlen_q, cfg.seqlen_k, cfg.head_dim,
        cfg.head_dim_v, cfg.window_left, cfg.window_right, cfg.softcap,
        attn_dtype_name(cfg.dtype), cfg.causal ? "causal" : "full", attn_layout_name(lq),
        attn_layout_name(lo), scale, (unsigned long long)seed, check);
}

/* ------------------------------------------------------------- one forward run ---- */

typedef struct {
    attn_layout layout[4]; /* q, k, v, o */
    double sigma_qk, sigma_v;
    float scale;
    int with_lse;
    uint64_t seed;
} run_spec;

/* One problem on the GPU: inputs, poisoned outputs, the references. Nothing of the size of a
 * tensor ever crosses to the host: inputs are generated and outputs judged on the GPU. */
typedef struct {
    run_spec spec;
    int batch, heads, heads_k, seqlen_q, seqlen_k; /* the problem (cfg's, or another: 'interleaved') */
    attn_strides st[4];
    void *dbuf[4];          /* q, k, v, o device buffers, guards included */
    size_t bytes[4];
    float *dlse_buf;        /* LSE buffer, guards included */
    float *dg, *dr, *dlg;   /* golden O, low-precision O, golden LSE (BHSD, float) */
    attn_fwd_params p;
    size_t o_elems, rows;
} run;

#define CUDA_TRY(call)                                                                     \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            say("  CUDA error at %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,          \
                cudaGetErrorName(e_), cudaGetErrorString(e_));                             \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

static size_t lse_bytes(const run *x) { return x->rows * 4; }
static void *inner(void *buf) { return (char *)buf + GUARD_BYTES; }

/* Tensor t (q, k, v, o)'s heads, rows and columns. */
static int heads_of(const run *x, int t) { return t == 1 || t == 2 ? x->heads_k : x->heads; }
static int seq_of(const run *x, int t) { return t == 1 || t == 2 ? x->seqlen_k : x->seqlen_q; }
static int dim_of(int t) { return t >= 2 ? cfg.head_dim_v : cfg.head_dim; }

static attn_tensor_view view_of(const run *x, int t) {
    attn_tensor_view v = {x->batch, heads_of(x, t), seq_of(x, t), dim_of(t), x->st[t].batch, x->st[t].head, x->st[t].row};
    return v;
}

static void run_free(run *x) {
    for (int t = 0; t < 4; t++) cudaFree(x->dbuf[t]);
    cudaFree(x->dlse_buf);
    cudaFree(x->dg);
    cudaFree(x->dr);
    cudaFree(x->dlg);
    memset(x, 0, sizeof *x);
}

static void fill_params(run *x) {
    attn_fwd_params *p = &x->p;
    attn_params_clear(p, x->heads);
    p->dtype = cfg.dtype;
    p->batch = x->batch;
    p->seqlen_q = x->seqlen_q;
    p->seqlen_k = x->seqlen_k;
    p->head_dim = cfg.head_dim;
    p->causal = cfg.causal;
    p->heads_k = x->heads_k;
    p->head_dim_v = cfg.head_dim_v;
    p->window_left = cfg.window_left, p->window_right = cfg.window_right;
    p->softcap = cfg.softcap;
    p->softmax_scale = x->spec.scale;
    p->q = inner(x->dbuf[0]);
    p->k = inner(x->dbuf[1]);
    p->v = inner(x->dbuf[2]);
    p->o = inner(x->dbuf[3]);
    p->lse = x->spec.with_lse ? (float *)inner(x->dlse_buf) : NULL;
    p->q_batch_stride = x->st[0].batch, p->q_head_stride = x->st[0].head, p->q_row_stride = x->st[0].row;
    p->k_batch_stride = x->st[1].batch, p->k_head_stride = x->st[1].head, p->k_row_stride = x->st[1].row;
    p->v_batch_stride = x->st[2].batch, p->v_head_stride = x->st[2].head, p->v_row_stride = x->st[2].row;
    p->o_batch_stride = x->st[3].batch, p->o_head_stride = x->st[3].head, p->o_row_stride = x->st[3].row;
}

/* Fresh inputs in the buffers x already has: poison (NaN) everywhere, so the padding between
 * rows keeps NaN and a kernel reading through a wrong stride is caught, then normal random
 * values (never zeros), quantized to the dtype, generated on the GPU from `seed`. */
static int run_fill_inputs(run *x, uint64_t seed, cudaStream_t stream) {
    x->spec.seed = seed;
    for (int t = 0; t < 3; t++) {
        attn_tensor_view v = view_of(x, t);
        double sigma = t == 2 ? x->spec.sigma_v : x->spec.sigma_qk;
        CUDA_TRY(cudaMemsetAsync(x->dbuf[t], POISON, x->bytes[t], stream));
        CUDA_TRY(attn_fill_normal_view(inner(x->dbuf[t]), cfg.dtype, &v, seed + (uint64_t)t * 0x632be59bd9b4e019ull,
                                       (float)sigma, stream));
    }
    return 0;
}

/* Allocates a problem of the given size (cfg's, unless 'interleaved' asks for another),
 * with cfg's query heads per KV head. */
static int run_alloc(run *x, const run_spec *spec, int batch, int heads, int sq, int sk) {
    memset(x, 0, sizeof *x);
    x->spec = *spec;
    x->batch = batch, x->heads = heads, x->heads_k = heads / (cfg.heads / cfg.heads_k);
    x->seqlen_q = sq, x->seqlen_k = sk;
    for (int t = 0; t < 4; t++) {
        x->st[t] = attn_make_strides(spec->layout[t], batch, heads_of(x, t), seq_of(x, t), dim_of(t));
        x->bytes[t] = 2 * GUARD_BYTES + (size_t)x->st[t].extent * 2;
        CUDA_TRY(cudaMalloc(&x->dbuf[t], x->bytes[t]));
    }
    x->o_elems = (size_t)batch * heads * sq * cfg.head_dim_v;
    x->rows = (size_t)batch * heads * sq;
    CUDA_TRY(cudaMalloc((void **)&x->dlse_buf, lse_bytes(x) + 2 * GUARD_BYTES));
    CUDA_TRY(cudaMalloc((void **)&x->dg, x->o_elems * 4));
    CUDA_TRY(cudaMalloc((void **)&x->dr, x->o_elems * 4));
    CUDA_TRY(cudaMalloc((void **)&x->dlg, x->rows * 4));
    fill_params(x);
    return 0;
}

static int run_setup(run *x, const run_spec *spec) {
    return run_alloc(x, spec, cfg.batch, cfg.heads, cfg.seqlen_q, cfg.seqlen_k) ||
           run_fill_inputs(x, spec->seed, cfg.stream);
}

/* G, R and the golden LSE of the inputs x holds now. */
static int run_reference(run *x) {
    char err[1024];
    /* NaN until the reference writes them: a reference gap shows as NaN, and compute-sanitizer's
     * initcheck, which sanitize.sh filters to the kernel under test and so never sees the
     * reference's own kernels write, finds these buffers initialized when they are read */
    CUDA_TRY(cudaMemsetAsync(x->dg, 0xff, x->o_elems * 4, cfg.stream));
    CUDA_TRY(cudaMemsetAsync(x->dr, 0xff, x->o_elems * 4, cfg.stream));
    CUDA_TRY(cudaMemsetAsync(x->dlg, 0xff, x->rows * 4, cfg.stream));
    if (attn_ref_forward(cfg.ref, &x->p, ATTN_REF_GOLDEN, x->dg, x->dlg, cfg.stream, err, sizeof err) ||
        attn_ref_forward(cfg.ref, &x->p, ATTN_REF_LOWP, x->dr, NULL, cfg.stream, err, sizeof err)) {
        say("  reference failed: %s\n", err);
        return 1;
    }
    CUDA_TRY(cudaStreamSynchronize(cfg.stream));
    return 0;
}

typedef enum { LAUNCH_OK, LAUNCH_UNSUPPORTED, LAUNCH_FAILED } launch_result;

static void note_unsupported(const run *x) {
    if (!cfg.unsupported[0])
        snprintf(cfg.unsupported, sizeof cfg.unsupported,
                 "kernel '%s' returned ATTN_UNSUPPORTED for %s %s head_dim=%d layouts q/k/v %s o %s",
                 cfg.kernel->name, attn_dtype_name(cfg.dtype), cfg.causal ? "causal" : "full",
                 cfg.head_dim, attn_layout_name(x->spec.layout[0]), attn_layout_name(x->spec.layout[3]));
}

/* Poisons O and LSE (guards included) on `stream`. */
static int poison_outputs(run *x, cudaStream_t stream) {
    CUDA_TRY(cudaMemsetAsync(x->dbuf[3], POISON, x->bytes[3], stream));
    CUDA_TRY(cudaMemsetAsync(x->dlse_buf, POISON, lse_bytes(x) + 2 * GUARD_BYTES, stream));
    return 0;
}

/* What fwd returned, as a launch result (the reason in msg). */
static launch_result fwd_result(const run *x, int rc) {
    if (rc == ATTN_UNSUPPORTED) {
        note_unsupported(x);
        return LAUNCH_UNSUPPORTED;
    }
    if (rc != ATTN_OK) {
        say("  kernel '%s' returned error code %d\n", cfg.kernel->name, rc);
        return LAUNCH_FAILED;
    }
    return LAUNCH_OK;
}

/* Waits for `stream`; a kernel fault or launch error is the kernel's failure. */
static launch_result wait_kernel(cudaStream_t stream) {
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        say("  the kernel failed on the GPU: %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
        return LAUNCH_FAILED;
    }
    return LAUNCH_OK;
}

/* Poisons O and LSE, runs the kernel, waits. Every operation goes on cfg.stream: nothing
 * may race with the kernel. */
static launch_result run_kernel(run *x) {
    if (poison_outputs(x, cfg.stream)) return LAUNCH_FAILED;
    launch_result lr = fwd_result(x, cfg.kernel->fwd(&x->p, cfg.stream));
    return lr == LAUNCH_OK ? wait_kernel(cfg.stream) : lr;
}

/* (b, h, s, d) of logical element `i` of O */
static void where(const run *x, size_t i, int *b, int *h, int *s, int *d) {
    *d = (int)(i % cfg.head_dim_v);
    i /= cfg.head_dim_v;
    *s = (int)(i % x->seqlen_q);
    i /= x->seqlen_q;
    *h = (int)(i % x->heads);
    *b = (int)(i / x->heads);
}

/* Whether O's row `row` sees no key (attn_abi.h's window rule, causal included). */
static int row_empty(const run *x, size_t row) {
    const int64_t diag = (int64_t)(row % x->seqlen_q) + x->seqlen_k - x->seqlen_q;
    const int right = cfg.causal ? 0 : cfg.window_right;
    int64_t lo = cfg.window_left < 0 ? 0 : diag - cfg.window_left, hi = right < 0 ? x->seqlen_k : diag + right + 1;
    return (hi < x->seqlen_k ? hi : x->seqlen_k) <= (lo > 0 ? lo : 0);
}

/* ------------------------------------------------------------------ the checks ---- */

typedef enum { CHECK_PASS, CHECK_FAIL, CHECK_UNSUPPORTED } outcome;

static const attn_layout BSHD4[4] = {ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BSHD};

static run_spec default_spec(int check_id) {
    run_spec s;
    memcpy(s.layout, BSHD4, sizeof BSHD4);
    s.sigma_qk = 1.0;
    s.sigma_v = 1.0;
    s.scale = (float)(1.0 / sqrt((double)cfg.head_dim));
    s.with_lse = 1;
    s.seed = attn_seed_from_name(cfg.seed_name) + 0x9e3779b97f4a7c15ull * (uint64_t)check_id;
    if (getenv("ATTN_SEED") && *getenv("ATTN_SEED")) s.seed = attn_seed_from_name(cfg.seed_name);
    return s;
}

/* Judges O by the verdict rule, its figures gathered on the GPU; appends the metrics and the
 * worst element to msg. */
static int judge_output(const run *x, const char *what) {
    attn_output_stats st;
    cudaError_t e = attn_output_stats_gpu(&x->p, x->dg, x->dr, &st, cfg.stream);
    if (e != cudaSuccess) {
        say("  %s: gathering the verdict's figures failed: %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    attn_output_verdict v;
    attn_output_decide(&st, cfg.dtype, &cfg.tol, &v);
    if (v.rule == ATTN_RULE_PASS) return 0;
    int b, h, s, d;
    where(x, v.worst, &b, &h, &s, &d);
    say("  %s: %s", what, attn_rule_name(v.rule));
    if (v.rule == ATTN_RULE_NONFINITE || v.rule == ATTN_RULE_EMPTY_ROW)
        say(" (%zu of %zu elements)", v.bad_count, x->o_elems);
    say("\n  max|O-G| = %.4g  bound %.4g = %g x max|R-G| %.4g + atol %.4g (%g steps of %.3g)\n",
        v.max_err, v.max_bound, cfg.tol.max_factor, v.max_ref_err, v.atol, cfg.tol.atol_steps, v.step);
    say("  mean|O-G| = %.4g  bound %.4g = %g x mean|R-G| %.4g + %.3g\n", v.mean_err, v.mean_bound,
        cfg.tol.mean_factor, v.mean_ref_err, v.mean_bound - cfg.tol.mean_factor * v.mean_ref_err);
    attn_tensor_view ov = view_of(x, 3);
    say("  %s element (b=%d, h=%d, s=%d, d=%d): O=%.6g G=%.6g R=%.6g%s\n",
        v.rule == ATTN_RULE_MAX || v.rule == ATTN_RULE_MEAN ? "worst" : "first bad", b, h, s, d,
        attn_peek_view(x->p.o, cfg.dtype, &ov, v.worst), attn_peek_f32(x->dg, v.worst),
        attn_peek_f32(x->dr, v.worst),
        row_empty(x, v.worst / cfg.head_dim_v) ? " (a row that sees no key)" : "");
    return 1;
}

/* The LSE rule on the GPU; *max_abs_g (optional) receives the largest finite golden |LSE|. */
static int judge_lse(const run *x, const char *what, double *max_abs_g) {
    attn_lse_verdict v;
    double top;
    cudaError_t e = attn_lse_verdict_gpu((const float *)inner(x->dlse_buf), x->dlg, x->rows, &cfg.tol,
                                         &v, &top, cfg.stream);
    if (e != cudaSuccess) {
        say("  %s: gathering the LSE figures failed: %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    if (max_abs_g) *max_abs_g = top;
    if (v.ok) return 0;
    size_t r = v.worst;
    say("  %s: %zu of %zu LSE values wrong (bound |L-Lg| <= %g + %g |Lg|)\n", what, v.bad_count,
        x->rows, cfg.tol.lse_atol, cfg.tol.lse_rtol);
    say("  first bad row (b=%d, h=%d, s=%d): LSE=%.7g golden=%.7g%s\n",
        (int)(r / x->seqlen_q / x->heads), (int)(r / x->seqlen_q % x->heads),
        (int)(r % x->seqlen_q), attn_peek_f32((const float *)inner(x->dlse_buf), r),
        attn_peek_f32(x->dlg, r), row_empty(x, r) ? " (a row that sees no key: expected -inf)" : "");
    return 1;
}

/* Setup + reference + one launch; `fail` is set when anything before judging failed. */
static outcome prepare(run *x, const run_spec *spec, const char *check, int *fail) {
    say_header(check, spec->seed, spec->layout[0], spec->layout[3], spec->scale);
    *fail = 1;
    if (run_setup(x, spec) || run_reference(x)) return CHECK_FAIL;
    launch_result lr = run_kernel(x);
    if (lr == LAUNCH_UNSUPPORTED) return CHECK_UNSUPPORTED;
    if (lr == LAUNCH_FAILED) return CHECK_FAIL;
    *fail = 0;
    return CHECK_PASS;
}

/* 1. normal random inputs, LSE not requested (lse = NULL must be honoured) */
static outcome check_accuracy(void) {
    run x;
    run_spec spec = default_spec(1);
    spec.with_lse = 0;
    int fail;
    outcome oc = prepare(&x, &spec, "accuracy", &fail);
    if (!fail) oc = judge_output(&x, "output") ? CHECK_FAIL : CHECK_PASS;
    run_free(&x);
    return oc;
}

/* 2. scaled scores beyond +-100: exp overflows (or underflows to 0/0) in float32 unless
 * the row max is subtracted. The score std is sigma^2 * sqrt(d) * scale = 400, so even the
 * 6 visible scores of q239k1 causal reach |s| > 100 (checked, from the golden LSE). */
static outcome check_large_inputs(void) {
    run x;
    run_spec spec = default_spec(2);
    spec.sigma_qk = 20.0;
    int fail;
    outcome oc = prepare(&x, &spec, "large_inputs", &fail);
    if (!fail) {
        double top = 0;
        int bad = judge_output(&x, "output");
        bad |= judge_lse(&x, "lse", &top);
        /* max s <= LSE <= max s + ln(seqlen_k): |LSE| > 100 + ln(seqlen_k) puts a score
         * beyond +-100. With a softcap the scores stay within +-softcap (no overflow to
         * provoke; the check then tests tanh's saturation) and the LSE cannot show them. */
        if (cfg.softcap == 0 && !(top > 100.0 + log((double)cfg.seqlen_k))) {
            say("  harness error: the stimulus did not reach a score beyond +-100 (max |LSE| %g)\n", top);
            bad = 1;
        }
        oc = bad ? CHECK_FAIL : CHECK_PASS;
    }
    run_free(&x);
    return oc;
}

/* 3. every element of O and LSE written: they were NaN before the launch */
static outcome check_unwritten(void) {
    run x;
    run_spec spec = default_spec(3);
    int fail;
    outcome oc = prepare(&x, &spec, "unwritten", &fail);
    if (!fail) {
        attn_match o, l, lpoison;
        attn_tensor_view ov = view_of(&x, 3);
        if (attn_count_nan_view(x.p.o, cfg.dtype, &ov, &o, cfg.stream) != cudaSuccess ||
            attn_count_nan_f32(x.p.lse, x.rows, &l, &lpoison, cfg.stream) != cudaSuccess) {
            say("  counting NaN on the GPU failed: %s\n", cudaGetErrorString(cudaGetLastError()));
            oc = CHECK_FAIL;
        } else {
            if (o.count) {
                int b, h, s, d;
                where(&x, o.first, &b, &h, &s, &d);
                say("  %llu of %zu O elements still NaN after the launch (never written?); first at "
                    "(b=%d, h=%d, s=%d, d=%d), where G=%.6g\n", o.count, x.o_elems, b, h, s, d,
                    attn_peek_f32(x.dg, o.first));
            }
            int lbad = l.count && l.count < x.rows; /* all NaN: no LSE at all (see check 'lse') */
            if (lbad)
                say("  %llu of %zu LSE values still NaN after the launch; first at row %llu\n", l.count,
                    x.rows, l.first);
            oc = o.count || lbad ? CHECK_FAIL : CHECK_PASS;
        }
    }
    run_free(&x);
    return oc;
}

/* Bytes of buf[from, to) that lost their poison; 0 when none (or on error, said in msg). */
static unsigned long long touched(const void *buf, size_t from, size_t to, size_t *first) {
    attn_match m;
    cudaError_t e = attn_count_changed_bytes(buf, from, to, POISON, &m, cfg.stream);
    if (e != cudaSuccess) {
        say("  counting bytes on the GPU failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    *first = m.first;
    return m.count;
}

/* 4. nothing written outside the outputs: guard bands before and after O and LSE, and the
 * padding between O's rows (padded layout) keep their poison */
static outcome check_guard_bands(void) {
    run x;
    run_spec spec = default_spec(4);
    spec.layout[3] = ATTN_LAYOUT_BSHD_PADDED;
    int fail;
    outcome oc = prepare(&x, &spec, "guard_bands", &fail);
    if (!fail) {
        size_t first = 0, bad = 0;
        unsigned long long n;
        size_t obytes = (size_t)x.st[3].extent * 2;
        if ((n = touched(x.dbuf[3], 0, GUARD_BYTES, &first)))
            bad++, say("  %llu bytes written in the %d bytes before O (nearest at O-%zu)\n", n, GUARD_BYTES, GUARD_BYTES - first);
        if ((n = touched(x.dbuf[3], GUARD_BYTES + obytes, x.bytes[3], &first)))
            bad++, say("  %llu bytes written in the %d bytes after O's last element (first at end+%zu)\n", n, GUARD_BYTES, first - GUARD_BYTES - obytes);
        /* padding: elements of each row past heads*head_dim */
        attn_match pad;
        if (attn_count_padding_written(x.p.o, x.st[3].extent, x.st[3].row,
                                       (int64_t)x.heads * cfg.head_dim_v, &pad, cfg.stream) != cudaSuccess)
            bad++, say("  counting padding on the GPU failed\n");
        else if (pad.count)
            bad++, say("  %llu padding elements between O's rows written (row stride %lld, first at "
                       "element %llu: s=%lld)\n", pad.count, (long long)x.st[3].row, pad.first,
                       (long long)(pad.first % x.st[3].batch / x.st[3].row));
        size_t lb = lse_bytes(&x);
        if ((n = touched(x.dlse_buf, 0, GUARD_BYTES, &first)))
            bad++, say("  %llu bytes written in the %d bytes before LSE\n", n, GUARD_BYTES);
        if ((n = touched(x.dlse_buf, GUARD_BYTES + lb, lb + 2 * GUARD_BYTES, &first)))
            bad++, say("  %llu bytes written in the %d bytes after LSE's last value (first at end+%zu)\n", n, GUARD_BYTES, first - GUARD_BYTES - lb);
        oc = bad ? CHECK_FAIL : CHECK_PASS;
    }
    run_free(&x);
    return oc;
}

/* Bytes in which a and b (device, n bytes) differ; 0 when none. */
static unsigned long long differing(const void *a, const void *b, size_t n, size_t *first) {
    attn_match m;
    cudaError_t e = attn_count_diff_bytes(a, b, n, &m, cfg.stream);
    if (e != cudaSuccess) {
        say("  comparing on the GPU failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    *first = m.first;
    return m.count;
}

/* 5. two launches on the same inputs give bit-identical O and LSE */
static outcome check_determinism(void) {
    run x;
    run_spec spec = default_spec(5);
    int fail;
    outcome oc = prepare(&x, &spec, "determinism", &fail);
    if (!fail) {
        void *o1 = NULL, *l1 = NULL;
        size_t lb = lse_bytes(&x) + 2 * GUARD_BYTES;
        if (cudaMalloc(&o1, x.bytes[3]) != cudaSuccess || cudaMalloc(&l1, lb) != cudaSuccess ||
            cudaMemcpyAsync(o1, x.dbuf[3], x.bytes[3], cudaMemcpyDeviceToDevice, cfg.stream) != cudaSuccess ||
            cudaMemcpyAsync(l1, x.dlse_buf, lb, cudaMemcpyDeviceToDevice, cfg.stream) != cudaSuccess) {
            say("  keeping the first launch's outputs failed: %s\n", cudaGetErrorString(cudaGetLastError()));
            oc = CHECK_FAIL;
        } else {
            launch_result lr = run_kernel(&x);
            if (lr != LAUNCH_OK) {
                oc = lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
            } else {
                size_t fo = 0, fl = 0;
                unsigned long long no = differing(o1, x.dbuf[3], x.bytes[3], &fo);
                unsigned long long nl = differing(l1, x.dlse_buf, lb, &fl);
                if (no)
                    say("  O differs between two launches on the same inputs in %llu bytes (first at "
                        "byte %zd from O's start)\n", no, (ssize_t)fo - GUARD_BYTES);
                if (nl) say("  LSE differs between two launches in %llu bytes\n", nl);
                oc = no || nl ? CHECK_FAIL : CHECK_PASS;
            }
        }
        cudaFree(o1);
        cudaFree(l1);
    }
    run_free(&x);
    return oc;
}

/* 6. a softmax scale other than 1/sqrt(d) */
static outcome check_scale(void) {
    run x;
    run_spec spec = default_spec(6);
    spec.scale = 0.5f; /* 4x (d=64) or 5.7x (d=128) the usual 1/sqrt(d) */
    int fail;
    outcome oc = prepare(&x, &spec, "scale", &fail);
    if (!fail) {
        int bad = judge_output(&x, "output");
        bad |= judge_lse(&x, "lse", NULL);
        oc = bad ? CHECK_FAIL : CHECK_PASS;
    }
    run_free(&x);
    return oc;
}

/* 7. layouts through the strides: all BHSD, then each tensor its own (padded) layout */
static outcome check_layouts(void) {
    static const attn_layout sets[2][4] = {
        {ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BHSD},
        {ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BSHD_PADDED, ATTN_LAYOUT_BHSD_PADDED, ATTN_LAYOUT_BSHD},
    };
    outcome oc = CHECK_PASS;
    for (int i = 0; i < 2 && oc == CHECK_PASS; i++) {
        run x;
        run_spec spec = default_spec(7 + 16 * i);
        memcpy(spec.layout, sets[i], sizeof sets[i]);
        int fail;
        oc = prepare(&x, &spec, "layouts", &fail);
        if (!fail) {
            char what[128];
            snprintf(what, sizeof what, "output with q %s, k %s, v %s, o %s",
                     attn_layout_name(sets[i][0]), attn_layout_name(sets[i][1]),
                     attn_layout_name(sets[i][2]), attn_layout_name(sets[i][3]));
            int bad = judge_output(&x, what);
            bad |= judge_lse(&x, "lse", NULL);
            oc = bad ? CHECK_FAIL : CHECK_PASS;
        }
        run_free(&x);
    }
    return oc;
}

/* 8. the LSE against the golden LSE; a kernel that writes no LSE at all is "not supported"
 * for this check */
static outcome check_lse(void) {
    run x;
    run_spec spec = default_spec(8);
    int fail;
    outcome oc = prepare(&x, &spec, "lse", &fail);
    if (!fail) {
        attn_match nan, untouched;
        if (attn_count_nan_f32(x.p.lse, x.rows, &nan, &untouched, cfg.stream) != cudaSuccess) {
            say("  counting LSE poison on the GPU failed\n");
            oc = CHECK_FAIL;
        } else if (untouched.count == x.rows) {
            if (!cfg.unsupported[0])
                snprintf(cfg.unsupported, sizeof cfg.unsupported,
                         "kernel '%s' does not write the LSE", cfg.kernel->name);
            oc = CHECK_UNSUPPORTED;
        } else {
            oc = judge_lse(&x, "lse", NULL) ? CHECK_FAIL : CHECK_PASS;
        }
    }
    run_free(&x);
    return oc;
}

/* ------------------------------------------------------------ the kernel contract ---- */

enum { GATE_TIMEOUT_S = 5 };

/* Judges O (and the LSE) of x, prefixed by `what` in the message. */
static int judge_all(const run *x, const char *what) {
    char w[256];
    snprintf(w, sizeof w, "%s: output", what);
    int bad = judge_output(x, w);
    snprintf(w, sizeof w, "%s: lse", what);
    return bad | judge_lse(x, w, NULL);
}

/* Copies the inputs of x (q, k, v buffers, guards included) to or from `saved`. */
static int copy_inputs(run *x, void *saved[3], int to_saved, cudaStream_t stream) {
    for (int t = 0; t < 3; t++)
        CUDA_TRY(cudaMemcpyAsync(to_saved ? saved[t] : x->dbuf[t], to_saved ? x->dbuf[t] : saved[t],
                                 x->bytes[t], cudaMemcpyDeviceToDevice, stream));
    return 0;
}

/* The gated launch of stream_order: behind the shut gate, the real inputs arrive and the
 * outputs are poisoned; fwd is called; the gate opens only after fwd returns. */
static outcome gated_launch(run *x, void *saved[3], cudaStream_t s, attn_gate *gate) {
    if (attn_gate_shut(gate, s, GATE_TIMEOUT_S) != cudaSuccess || copy_inputs(x, saved, 0, s) ||
        poison_outputs(x, s)) {
        say("  enqueueing the gate failed\n");
        return CHECK_FAIL;
    }
    int rc = cfg.kernel->fwd(&x->p, s);
    int blocked = attn_gate_timed_out(gate); /* fwd waited for the shut gate */
    attn_gate_open(gate);
    launch_result lr = fwd_result(x, rc);
    if (lr == LAUNCH_OK) lr = wait_kernel(s);
    if (lr != LAUNCH_OK) return lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
    if (blocked || attn_gate_timed_out(gate)) {
        say("  fwd did not return while its stream was held (the gate opened by its %d s timeout): "
            "fwd waits for the GPU (cudaDeviceSynchronize, cudaStreamSynchronize, a blocking copy or "
            "cudaFree); a kernel must only enqueue work\n", GATE_TIMEOUT_S);
        return CHECK_FAIL;
    }
    if (judge_all(x, "stream order")) {
        say("  fwd was called on a non-blocking stream held by a gate until fwd returned; the "
            "inputs arrived and the outputs were poisoned behind the gate: work not ordered on "
            "that stream (a stream of the kernel's own, the legacy default stream, a missing "
            "event wait) reads NaN inputs or is overwritten\n");
        return CHECK_FAIL;
    }
    return CHECK_PASS;
}

/* 9. stream order and no host synchronization: fwd must only enqueue, on the stream it is
 * given. */
static outcome check_stream_order(void) {
    run x;
    run_spec spec = default_spec(9);
    say_header("stream_order", spec.seed, spec.layout[0], spec.layout[3], spec.scale);
    void *saved[3] = {NULL, NULL, NULL};
    cudaStream_t s = NULL;
    attn_gate *gate = NULL;
    outcome oc = CHECK_FAIL;
    /* a warm-up call outside the gate: first-call set-up (module loading, plans) is allowed */
    if (run_setup(&x, &spec) || run_reference(&x)) goto done;
    launch_result lr = run_kernel(&x);
    if (lr != LAUNCH_OK) {
        oc = lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
        goto done;
    }
    for (int t = 0; t < 3; t++)
        if (cudaMalloc(&saved[t], x.bytes[t]) != cudaSuccess) goto done;
    /* the real inputs are kept aside; the buffers hold NaN until the gate lets them back */
    if (copy_inputs(&x, saved, 1, cfg.stream)) goto done;
    for (int t = 0; t < 3; t++)
        if (cudaMemsetAsync(x.dbuf[t], POISON, x.bytes[t], cfg.stream) != cudaSuccess) goto done;
    if (cudaStreamSynchronize(cfg.stream) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        attn_gate_create(&gate) != cudaSuccess) {
        say("  setting up the gate failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    oc = gated_launch(&x, saved, s, gate);
done:
    if (s) cudaStreamSynchronize(s), cudaStreamDestroy(s);
    attn_gate_destroy(gate);
    for (int t = 0; t < 3; t++) cudaFree(saved[t]);
    run_free(&x);
    return oc;
}

/* Captures one fwd call on a fresh stream in global mode; 0 with *exec, or 1 (said). */
static int capture(run *x, cudaGraphExec_t *exec) {
    cudaStream_t s;
    cudaGraph_t graph = NULL;
    CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    int rc = e == cudaSuccess ? cfg.kernel->fwd(&x->p, s) : ATTN_OK;
    cudaError_t e2 = cudaStreamEndCapture(s, &graph);
    if (e == cudaSuccess) e = e2;
    cudaGetLastError(); /* a failed capture's error is not the next call's */
    cudaStreamDestroy(s);
    if (e != cudaSuccess || rc != ATTN_OK || !graph) {
        say("  fwd could not be captured into a CUDA graph (stream capture, global mode): %s, fwd "
            "returned %d. fwd must only enqueue work on its stream: no host synchronization, no "
            "cudaMalloc/cudaFree, no work on another stream that is not joined back\n",
            e != cudaSuccess ? cudaGetErrorString(e) : "no graph", rc);
        if (graph) cudaGraphDestroy(graph);
        return 1;
    }
    e = cudaGraphInstantiate(exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        say("  the captured graph does not instantiate: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

/* 10. fwd under CUDA graph capture; replays on new inputs in the same buffers are right */
static outcome check_graph_capture(void) {
    run x;
    run_spec spec = default_spec(10);
    say_header("graph_capture", spec.seed, spec.layout[0], spec.layout[3], spec.scale);
    cudaGraphExec_t exec = NULL;
    outcome oc = CHECK_FAIL;
    if (run_setup(&x, &spec)) goto done;
    launch_result lr = run_kernel(&x); /* warm-up outside the capture */
    if (lr != LAUNCH_OK) {
        oc = lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
        goto done;
    }
    if (capture(&x, &exec)) goto done;
    for (int replay = 1; replay <= 2; replay++) {
        char what[64];
        snprintf(what, sizeof what, "replay %d of the captured graph on new inputs", replay);
        if (run_fill_inputs(&x, spec.seed + 0x51ed2701u * (uint64_t)replay, cfg.stream) ||
            run_reference(&x) || poison_outputs(&x, cfg.stream))
            goto done;
        if (cudaGraphLaunch(exec, cfg.stream) != cudaSuccess || wait_kernel(cfg.stream) != LAUNCH_OK) {
            say("  %s failed: %s\n", what, cudaGetErrorString(cudaGetLastError()));
            goto done;
        }
        if (judge_all(&x, what)) goto done;
    }
    oc = CHECK_PASS;
done:
    if (exec) cudaGraphExecDestroy(exec);
    run_free(&x);
    return oc;
}

/* One call of 'interleaved': new inputs, reference, launch, verdict. */
static outcome interleaved_call(run *x, uint64_t seed, const char *what) {
    if (run_fill_inputs(x, seed, cfg.stream) || run_reference(x)) return CHECK_FAIL;
    launch_result lr = run_kernel(x);
    if (lr != LAUNCH_OK) {
        if (lr == LAUNCH_FAILED) say("  (in %s)\n", what);
        return lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
    }
    if (judge_all(x, what)) {
        say("  the kernel keeps state across calls (a shape, a pointer or a plan from an earlier "
            "call): calls alternated between two problems of different sizes\n");
        return CHECK_FAIL;
    }
    return CHECK_PASS;
}

/* 11. no state across calls: problems A and B (another batch, heads and lengths) interleaved,
 * A again on new buffers, B again on new inputs; each output verified */
static outcome check_interleaved(void) {
    run a1, b, a2;
    memset(&a1, 0, sizeof a1), memset(&b, 0, sizeof b), memset(&a2, 0, sizeof a2);
    run_spec spec = default_spec(11);
    say_header("interleaved", spec.seed, spec.layout[0], spec.layout[3], spec.scale);
    /* B keeps A's query heads per KV head */
    int bb = cfg.batch + 1, bh = cfg.heads + cfg.heads / cfg.heads_k, bq = cfg.seqlen_q + 19, bk = cfg.seqlen_k + 41;
    char wb[2][160];
    for (int i = 0; i < 2; i++)
        snprintf(wb[i], sizeof wb[i], "call %d (problem B: batch=%d heads=%d seqlen_q=%d seqlen_k=%d)",
                 2 + 2 * i, bb, bh, bq, bk);
    outcome oc = CHECK_FAIL;
    if (run_alloc(&a1, &spec, cfg.batch, cfg.heads, cfg.seqlen_q, cfg.seqlen_k) ||
        run_alloc(&b, &spec, bb, bh, bq, bk) ||
        run_alloc(&a2, &spec, cfg.batch, cfg.heads, cfg.seqlen_q, cfg.seqlen_k))
        goto done;
    if ((oc = interleaved_call(&a1, spec.seed, "call 1 (problem A)")) != CHECK_PASS ||
        (oc = interleaved_call(&b, spec.seed + 1, wb[0])) != CHECK_PASS ||
        (oc = interleaved_call(&a2, spec.seed + 2, "call 3 (problem A again, on other buffers)")) != CHECK_PASS)
        goto done;
    oc = interleaved_call(&b, spec.seed + 3, wb[1]);
done:
    run_free(&a1), run_free(&b), run_free(&a2);
    return oc;
}

/* 12. one launch, nothing judged: what compute-sanitizer watches (scripts/sanitize.sh). No
 * reference runs, so the only other kernels in the process are the input generators. */
static outcome check_launch(void) {
    run x;
    run_spec spec = default_spec(12);
    say_header("launch", spec.seed, spec.layout[0], spec.layout[3], spec.scale);
    outcome oc = CHECK_FAIL;
    if (!run_setup(&x, &spec)) {
        launch_result lr = run_kernel(&x);
        oc = lr == LAUNCH_OK ? CHECK_PASS : lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
    }
    run_free(&x);
    return oc;
}

/* --------------------------------------------------------------- Check plumbing ---- */

/* 13. a packed batch (attn_abi.h's varlen layout): sequences of their own lengths (0
 * included), queries packed by cu_seqlens_q, K and V packed by cu_seqlens_k or in a shuffled
 * pool of pages read through a block table (seqused_k their filled length). A batch whose
 * sequences all have the same number of queries (a decode batch) gives Q, O and the LSE
 * dense instead (no cu_seqlens_q): the memory is the same rows, so only the problem and the
 * LSE's index differ; without pages its K and V are then a dense cache with seqused_k
 * (packed_kv_cache). The kernel's O and LSE are unpacked on the GPU into the reference's
 * dense layout and judged by the same rules; a right output is then put through the kernel
 * contract on the same layout (packed_contract). */
typedef struct {
    attn_seqs seqs;
    void *q, *k, *v, *o, *o_dense;
    float *lse, *lse_dense, *dg, *dr, *dlg;
    int32_t *cu_q, *cu_k, *table, *used;
    size_t o_bytes, lse_bytes; /* of o and lse as the kernel writes them */
} packed_run;

static void packed_free(packed_run *r) {
    void *dev[] = {r->q, r->k, r->v, r->o, r->o_dense, r->lse, r->lse_dense, r->dg, r->dr, r->dlg,
                   r->cu_q, r->cu_k, r->table, r->used};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaFree(dev[i]);
    attn_seqs_free(&r->seqs);
}

/* Q dense: every sequence has the same number of queries, at least one */
static int packed_q_dense(int nseq, const int *lens_q) {
    for (int b = 1; b < nseq; b++)
        if (lens_q[b] != lens_q[0]) return 0;
    return nseq > 0 && lens_q[0] > 0;
}

/* With Q dense and no pages, K and V are a dense cache (FlashAttention's KV-cache layout):
 * [sequence][capacity][heads_k][dim], every sequence's rows past its seqused_k filled with
 * random values too, so that reading past its length shows. */
enum { CACHE_SLACK = 16 }; /* rows of capacity past the longest sequence's keys */
static int packed_kv_cache(int nseq, const int *lens_q, int page_size) {
    return page_size == 0 && packed_q_dense(nseq, lens_q);
}

/* n int32 from the host into a new device array */
static int upload_i32(int32_t **dst, const int32_t *src, size_t n) {
    CUDA_TRY(cudaMalloc((void **)dst, n * sizeof(int32_t)));
    CUDA_TRY(cudaMemcpy(*dst, src, n * sizeof(int32_t), cudaMemcpyHostToDevice));
    return 0;
}

/* Buffers (NaN-poisoned), inputs and the problem of a packed case. */
static int packed_setup(packed_run *r, attn_fwd_params *p, uint64_t seed) {
    const attn_seqs *sq = &r->seqs;
    const int H = cfg.heads, HK = cfg.heads_k, D = cfg.head_dim, DV = cfg.head_dim_v, paged = cfg.page_size > 0;
    const int cache = packed_kv_cache(cfg.nseq, cfg.lens_q, cfg.page_size);
    const int64_t capacity = (int64_t)sq->max_k + CACHE_SLACK;
    const int64_t kv_rows = paged ? (int64_t)sq->num_pages * cfg.page_size : cache ? cfg.nseq * capacity : sq->total_k;
    const int64_t maxq = sq->max_q > 0 ? sq->max_q : 1;
    const size_t rq = (size_t)(sq->total_q > 0 ? sq->total_q : 1), rk = (size_t)(kv_rows > 0 ? kv_rows : 1);
    const size_t dense = (size_t)cfg.nseq * H * maxq;
    CUDA_TRY(cudaMalloc(&r->q, rq * H * D * 2));
    CUDA_TRY(cudaMalloc(&r->k, rk * HK * D * 2));
    CUDA_TRY(cudaMalloc(&r->v, rk * HK * DV * 2));
    CUDA_TRY(cudaMalloc(&r->o, rq * H * DV * 2));
    CUDA_TRY(cudaMalloc(&r->o_dense, dense * DV * 2));
    CUDA_TRY(cudaMalloc((void **)&r->lse, rq * H * 4));
    CUDA_TRY(cudaMalloc((void **)&r->lse_dense, dense * 4));
    CUDA_TRY(cudaMalloc((void **)&r->dg, dense * DV * 4));
    CUDA_TRY(cudaMalloc((void **)&r->dr, dense * DV * 4));
    CUDA_TRY(cudaMalloc((void **)&r->dlg, dense * 4));
    void *in[3] = {r->q, r->k, r->v};
    const size_t bytes[3] = {rq * H * D * 2, rk * HK * D * 2, rk * HK * DV * 2};
    /* rows of [row][heads][dim]: Q over all tokens; K, V over the packed keys or the pool */
    const attn_tensor_view views[3] = {{1, H, (int)rq, D, 0, D, (int64_t)H * D},
                                       {1, HK, (int)rk, D, 0, D, (int64_t)HK * D},
                                       {1, HK, (int)rk, DV, 0, DV, (int64_t)HK * DV}};
    for (int t = 0; t < 3; t++) {
        CUDA_TRY(cudaMemsetAsync(in[t], POISON, bytes[t], cfg.stream));
        CUDA_TRY(attn_fill_normal_view(in[t], cfg.dtype, &views[t], seed + (uint64_t)t * 0x632be59bd9b4e019ull, 1.0f,
                                       cfg.stream));
    }
    r->o_bytes = rq * H * DV * 2, r->lse_bytes = rq * H * 4;
    CUDA_TRY(cudaMemsetAsync(r->o, POISON, r->o_bytes, cfg.stream));
    CUDA_TRY(cudaMemsetAsync(r->lse, POISON, r->lse_bytes, cfg.stream));
    if (upload_i32(&r->cu_q, sq->cu_seqlens_q, (size_t)cfg.nseq + 1)) return 1;
    if (paged ? upload_i32(&r->table, sq->block_table, (size_t)cfg.nseq * sq->block_table_stride) ||
                    upload_i32(&r->used, (const int32_t *)cfg.lens_k, (size_t)cfg.nseq)
              : cache ? upload_i32(&r->used, (const int32_t *)cfg.lens_k, (size_t)cfg.nseq)
                      : upload_i32(&r->cu_k, sq->cu_seqlens_k, (size_t)cfg.nseq + 1))
        return 1;
    attn_params_clear(p, H);
    p->dtype = cfg.dtype, p->batch = cfg.nseq, p->head_dim = D, p->head_dim_v = DV, p->heads_k = HK;
    p->causal = cfg.causal, p->window_left = cfg.window_left, p->window_right = cfg.window_right;
    p->softcap = cfg.softcap, p->softmax_scale = (float)(1.0 / sqrt((double)D));
    p->seqlen_q = (int)maxq;
    p->seqlen_k = paged ? sq->block_table_stride * cfg.page_size : (sq->max_k > 0 ? sq->max_k : 1);
    p->q = r->q, p->k = r->k, p->v = r->v, p->o = r->o, p->lse = r->lse;
    p->q_head_stride = D, p->q_row_stride = (int64_t)H * D;
    p->o_head_stride = DV, p->o_row_stride = (int64_t)H * DV;
    p->k_head_stride = D, p->k_row_stride = (int64_t)HK * D;
    p->v_head_stride = DV, p->v_row_stride = (int64_t)HK * DV;
    if (packed_q_dense(cfg.nseq, cfg.lens_q)) /* rows b * S_q + i: the same memory */
        p->q_batch_stride = maxq * p->q_row_stride, p->o_batch_stride = maxq * p->o_row_stride;
    else
        p->cu_seqlens_q = r->cu_q;
    if (paged) {
        p->block_table = r->table, p->block_table_stride = sq->block_table_stride;
        p->page_size = cfg.page_size, p->num_pages = sq->num_pages, p->seqused_k = r->used;
        p->k_batch_stride = (int64_t)cfg.page_size * HK * D, p->v_batch_stride = (int64_t)cfg.page_size * HK * DV;
    } else if (cache) {
        p->seqused_k = r->used, p->seqlen_k = (int)capacity;
        p->k_batch_stride = capacity * HK * D, p->v_batch_stride = capacity * HK * DV;
    } else {
        p->cu_seqlens_k = r->cu_k;
    }
    return 0;
}

/* O and the LSE unpacked and judged as a dense problem of the longest lengths (no mask in
 * the view: which rows see no key is already in G and the golden LSE). */
static int packed_judge(packed_run *r, const attn_fwd_params *p) {
    const int H = cfg.heads, DV = cfg.head_dim_v, maxq = p->seqlen_q;
    CUDA_TRY(attn_unpack_rows(r->o, cfg.dtype, r->cu_q, cfg.nseq, H, maxq, DV, p->o_row_stride, p->o_head_stride,
                              r->o_dense, r->dg, r->dr, cfg.stream));
    if (p->cu_seqlens_q) /* else the LSE is dense already */
        CUDA_TRY(attn_unpack_lse(r->lse, r->cu_q, cfg.nseq, H, maxq, r->lse_dense, r->dlg, cfg.stream));
    else
        CUDA_TRY(cudaMemcpyAsync(r->lse_dense, r->lse, (size_t)cfg.nseq * H * maxq * 4, cudaMemcpyDeviceToDevice,
                                 cfg.stream));
    attn_fwd_params view;
    attn_params_clear(&view, H);
    view.dtype = cfg.dtype, view.batch = cfg.nseq, view.seqlen_q = maxq, view.seqlen_k = 1;
    view.head_dim = cfg.head_dim, view.head_dim_v = DV, view.o = r->o_dense;
    view.o_row_stride = DV, view.o_head_stride = (int64_t)maxq * DV, view.o_batch_stride = (int64_t)H * maxq * DV;
    attn_output_stats st;
    attn_output_verdict v;
    CUDA_TRY(attn_output_stats_gpu(&view, r->dg, r->dr, &st, cfg.stream));
    attn_output_decide(&st, cfg.dtype, &cfg.tol, &v);
    int bad = v.rule != ATTN_RULE_PASS;
    if (bad) say("  packed output: %s (verdict rule %d: max|O-G| %g, bound %g)\n", attn_rule_name(v.rule), (int)v.rule,
                 st.max_err, v.max_bound);
    attn_lse_verdict lv;
    double top;
    CUDA_TRY(attn_lse_verdict_gpu(r->lse_dense, r->dlg, (size_t)cfg.nseq * H * maxq, &cfg.tol, &lv, &top,
                                  cfg.stream));
    if (!lv.ok) {
        say("  packed LSE: %zu values wrong, first at dense row %zu (b, h, s over the longest lengths)\n",
            lv.bad_count, lv.worst);
        bad = 1;
    }
    return bad;
}

/* The kernel contract on this layout (the contract checks run dense problems only): fwd on a
 * non-blocking stream held by a gate, the outputs poisoned behind it, must return at once
 * and leave a right output once the gate opens (a host copy of cu_seqlens or seqused_k, a
 * synchronization, work on another stream fail); then fwd captured into a CUDA graph and
 * replayed on poisoned outputs (an allocation or a synchronization in fwd fails). */
static outcome packed_contract(packed_run *r, const attn_fwd_params *p) {
    cudaStream_t s = NULL;
    attn_gate *gate = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    outcome oc = CHECK_FAIL;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess || attn_gate_create(&gate) != cudaSuccess ||
        attn_gate_shut(gate, s, GATE_TIMEOUT_S) != cudaSuccess ||
        cudaMemsetAsync(r->o, POISON, r->o_bytes, s) != cudaSuccess ||
        cudaMemsetAsync(r->lse, POISON, r->lse_bytes, s) != cudaSuccess) {
        say("  packed contract: setting up the gate failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    int rc = cfg.kernel->fwd(p, s);
    const int blocked = attn_gate_timed_out(gate);
    attn_gate_open(gate);
    if (rc != ATTN_OK || wait_kernel(s) != LAUNCH_OK) {
        say("  packed contract: fwd on a held stream returned %d or failed\n", rc);
        goto done;
    }
    if (blocked || attn_gate_timed_out(gate)) {
        say("  packed contract: fwd did not return while its stream was held (the gate opened by its %d s "
            "timeout): fwd waits for the GPU on this layout (a blocking copy of cu_seqlens, seqused_k or the "
            "block table to the host, a synchronization); a kernel must only enqueue work\n", GATE_TIMEOUT_S);
        goto done;
    }
    if (packed_judge(r, p)) {
        say("  packed contract: fwd was called on a non-blocking stream held by a gate, the outputs "
            "poisoned behind it: work not ordered on that stream\n");
        goto done;
    }
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    rc = e == cudaSuccess ? cfg.kernel->fwd(p, s) : ATTN_OK;
    cudaError_t e2 = cudaStreamEndCapture(s, &graph);
    if (e == cudaSuccess) e = e2;
    if (e == cudaSuccess && rc == ATTN_OK && graph) e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGetLastError();
    if (e != cudaSuccess || rc != ATTN_OK || !exec) {
        say("  packed contract: fwd could not be captured into a CUDA graph on this layout: %s, fwd returned "
            "%d (no host synchronization, allocation or unjoined stream in fwd)\n",
            e != cudaSuccess ? cudaGetErrorString(e) : "no graph", rc);
        goto done;
    }
    if (cudaMemsetAsync(r->o, POISON, r->o_bytes, cfg.stream) != cudaSuccess ||
        cudaMemsetAsync(r->lse, POISON, r->lse_bytes, cfg.stream) != cudaSuccess ||
        cudaGraphLaunch(exec, cfg.stream) != cudaSuccess || wait_kernel(cfg.stream) != LAUNCH_OK) {
        say("  packed contract: replaying the captured graph failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    if (packed_judge(r, p)) {
        say("  packed contract: the replay of the captured graph left a wrong output\n");
        goto done;
    }
    oc = CHECK_PASS;
done:
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (s) cudaStreamSynchronize(s), cudaStreamDestroy(s);
    attn_gate_destroy(gate);
    return oc;
}

static outcome check_packed(void) {
    run_spec spec = default_spec(13);
    say_header("packed", spec.seed, ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BSHD, 0);
    packed_run r;
    memset(&r, 0, sizeof r);
    char err[512];
    attn_fwd_params p;
    outcome oc = CHECK_FAIL;
    if (attn_seqs_make(&r.seqs, cfg.nseq, cfg.lens_q, cfg.lens_k, cfg.page_size, 3, spec.seed, err, sizeof err)) {
        say("  %s\n", err);
    } else if (!packed_setup(&r, &p, spec.seed)) {
        const int cache = packed_kv_cache(cfg.nseq, cfg.lens_q, cfg.page_size);
        const int32_t *used = cfg.page_size > 0 || cache ? (const int32_t *)cfg.lens_k : NULL;
        const attn_problem_host host = {p.cu_seqlens_q ? r.seqs.cu_seqlens_q : NULL,
                                        cfg.page_size || cache ? NULL : r.seqs.cu_seqlens_k,
                                        r.seqs.block_table, used};
        const size_t dense = (size_t)cfg.nseq * cfg.heads * p.seqlen_q;
        launch_result lr = LAUNCH_FAILED;
        if (attn_problem_check(&p, &host, err, sizeof err)) {
            say("  harness error: %s\n", err);
        } else if (cudaMemsetAsync(r.dg, 0xff, dense * cfg.head_dim_v * 4, cfg.stream) == cudaSuccess &&
                   cudaMemsetAsync(r.dr, 0xff, dense * cfg.head_dim_v * 4, cfg.stream) == cudaSuccess &&
                   cudaMemsetAsync(r.dlg, 0xff, dense * 4, cfg.stream) == cudaSuccess &&
                   !attn_ref_forward(cfg.ref, &p, ATTN_REF_GOLDEN, r.dg, r.dlg, cfg.stream, err, sizeof err) &&
                   !attn_ref_forward(cfg.ref, &p, ATTN_REF_LOWP, r.dr, NULL, cfg.stream, err, sizeof err)) {
            const int rc = cfg.kernel->fwd(&p, cfg.stream);
            lr = rc == ATTN_OK ? wait_kernel(cfg.stream) : rc == ATTN_UNSUPPORTED ? LAUNCH_UNSUPPORTED : LAUNCH_FAILED;
            if (lr == LAUNCH_UNSUPPORTED && !cfg.unsupported[0])
                snprintf(cfg.unsupported, sizeof cfg.unsupported, "kernel '%s' returned ATTN_UNSUPPORTED for a packed batch",
                         cfg.kernel->name);
            if (rc != ATTN_OK && rc != ATTN_UNSUPPORTED) say("  kernel '%s' returned error code %d\n", cfg.kernel->name, rc);
        } else {
            say("  reference failed: %s\n", err);
        }
        oc = lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED
           : lr == LAUNCH_OK          ? (packed_judge(&r, &p) ? CHECK_FAIL : packed_contract(&r, &p))
                                      : CHECK_FAIL;
    }
    packed_free(&r);
    return oc;
}

/* What the checks of the current case found: unsupported checks, failed checks by name. */
static int n_unsupported;
static char failed_checks[256];

static void finish(const char *check, outcome oc) {
    if (oc == CHECK_UNSUPPORTED) {
        n_unsupported++;
        return;
    }
    if (oc != CHECK_PASS) {
        size_t n = strlen(failed_checks);
        snprintf(failed_checks + n, sizeof failed_checks - n, "%s%s", n ? "," : "", check);
    }
    ck_assert_msg(oc == CHECK_PASS, "%s", msg);
}

#define CHECK_TEST(fn) \
    START_TEST(test_##fn) { finish(#fn, check_##fn()); } \
    END_TEST

CHECK_TEST(accuracy)
CHECK_TEST(large_inputs)
CHECK_TEST(unwritten)
CHECK_TEST(guard_bands)
CHECK_TEST(determinism)
CHECK_TEST(scale)
CHECK_TEST(layouts)
CHECK_TEST(lse)
CHECK_TEST(stream_order)
CHECK_TEST(graph_capture)
CHECK_TEST(interleaved)
CHECK_TEST(launch)
CHECK_TEST(packed)

/* Every check, by name; --checks picks some (default: the correctness checks). Then the
 * kernel contract (tests labelled 'contract'), and 'launch' for the sanitizers. */
static const char *const CHECK_NAMES[] = {
    "accuracy", "large_inputs", "unwritten", "guard_bands", "determinism", "scale", "layouts",
    "lse", "stream_order", "graph_capture", "interleaved", "launch", "packed",
};
enum { N_CHECKS = sizeof CHECK_NAMES / sizeof CHECK_NAMES[0] };
static const char *DEFAULT_CHECKS =
    "accuracy,large_inputs,unwritten,guard_bands,determinism,scale,layouts,lse";

/* 1 iff `name` is an element of the comma-separated `list` */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

/* 0, or the first unknown name of the list in `bad` */
static int checks_valid(const char *list, char *bad, size_t badlen) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int known = 0;
        for (int i = 0; i < N_CHECKS; i++) known |= !strcmp(CHECK_NAMES[i], tok);
        if (!known) {
            snprintf(bad, badlen, "%s", tok);
            return 1;
        }
    }
    return 0;
}


static Suite *make_suite(const char *name, const char *checks) {
    const TTest *tests[N_CHECKS] = {
        test_accuracy,    test_large_inputs, test_unwritten,   test_guard_bands,
        test_determinism, test_scale,        test_layouts,     test_lse,
        test_stream_order, test_graph_capture, test_interleaved, test_launch, test_packed,
    };
    Suite *s = suite_create(name);
    for (int i = 0; i < N_CHECKS; i++) {
        if (!listed(checks, CHECK_NAMES[i])) continue;
        TCase *tc = tcase_create(CHECK_NAMES[i]);
        tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

/* ---------------------------------------------------------------------- cases ---- */

/* One case: a row of the cross product (or of a pairwise covering array, --pairwise) of
 * the --dtype, --head-dim, --mask, --heads-k, --window, --softcap and --shapes lists. */
enum { MAX_SEQS = 16 }; /* sequences of a packed case */
typedef struct {
    attn_dtype dtype;
    int head_dim, head_dim_v, causal, heads_k, window_left, window_right, seqlen_q, seqlen_k;
    float softcap;
    /* packed (a shape "QxK+QxK+..." or a page size): its sequences' lengths; else nseq 0 */
    int nseq, page_size, lens_q[MAX_SEQS], lens_k[MAX_SEQS];
    const char *shape; /* its --shapes element, as given ("QxK", "S" or "QxK+QxK+...") */
    char label[192]; /* fp16/d64/full/s1000, bf16/d192v128/causal/kv1/w16_0/cap30/p16/q1k239+s5 */
} test_case;

typedef struct {
    const char *kernel, *plugin, *tolerance, *checks;
    const char *lists[8]; /* dtypes, head dims, masks, KV heads, windows, softcaps, page sizes, shapes */
    int in_process, pairwise, list;
    int shard, shards; /* --shard K/N: only the cases i with i % N == K (N 1: all) */
    double case_timeout_s;
    test_case *cases;
    int n_cases;
} args;

/* The problem of case c as the checks build it, pointers standing in (nothing reads them):
 * for validating it and asking the kernel whether it takes it. */
static attn_fwd_params case_shape(const test_case *c) {
    attn_fwd_params p;
    attn_params_clear(&p, cfg.heads);
    p.dtype = c->dtype, p.batch = cfg.batch, p.seqlen_q = c->seqlen_q, p.seqlen_k = c->seqlen_k;
    p.head_dim = c->head_dim, p.head_dim_v = c->head_dim_v, p.causal = c->causal, p.heads_k = c->heads_k;
    p.window_left = c->window_left, p.window_right = c->window_right, p.softcap = c->softcap;
    p.softmax_scale = 1.0f;
    static char stand_in[16];
    p.q = p.k = p.v = p.o = stand_in;
    if (c->nseq) { /* what a packed case needs, for attn_kernel_lacks */
        p.batch = c->nseq;
        if (!packed_q_dense(c->nseq, c->lens_q)) p.cu_seqlens_q = (const int32_t *)stand_in;
        if (c->page_size > 0)
            p.block_table = p.seqused_k = (const int32_t *)stand_in, p.page_size = c->page_size;
        else if (packed_kv_cache(c->nseq, c->lens_q, 0))
            p.seqused_k = (const int32_t *)stand_in;
        else
            p.cu_seqlens_k = (const int32_t *)stand_in;
    }
    return p;
}

/* The scale rows need tens of GB: with less free GPU memory than a check needs, the case is
 * skipped, saying so (a smaller GPU cannot run it; that is not a pass). The largest check
 * holds q, k, v, o and a copy of o in the dtype, and G, R in float. */
static int enough_memory(char *why, size_t len) {
    double eq = (double)cfg.batch * cfg.heads * cfg.seqlen_q * (cfg.head_dim > cfg.head_dim_v ? cfg.head_dim : cfg.head_dim_v);
    double ek = (double)cfg.batch * cfg.heads_k * cfg.seqlen_k * (cfg.head_dim > cfg.head_dim_v ? cfg.head_dim : cfg.head_dim_v);
    double need = 1.1 * (2 * (3 * eq + 2 * ek) + 8 * eq) + (256 << 20);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess || (double)free_b >= need) return 1;
    snprintf(why, len, "this case needs about %.1f GiB of GPU memory; %.1f GiB of %.1f GiB are free",
             need / (1 << 30), free_b / 1073741824.0, total_b / 1073741824.0);
    return 0;
}

/* In the child, once: the GPU (77 without one), the stream, the reference. */
static int child_init(void *ctx) {
    (void)ctx;
    char err[1024];
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    /* which GPU ran this test (with several, CTest's resource allocation picks it) */
    int dev = -1;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
        printf("GPU %d: %s, PCI %04x:%02x:%02x\n", dev, prop.name, prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    cudaError_t e = cudaStreamCreate(&cfg.stream);
    if (e != cudaSuccess) {
        printf("FAILED: cannot create a CUDA stream: %s\n", cudaGetErrorString(e));
        return 1;
    }
    if (attn_ref_create(&cfg.ref, err, sizeof err)) {
        printf("FAILED: cannot create the reference: %s\n", err);
        return 1;
    }
    return 0;
}

/* The checks of one case, as a Check suite run in this process; prints each failure. */
static attn_case_verdict run_checks(const test_case *c, const char *checks, double t0) {
    n_unsupported = 0, failed_checks[0] = 0, cfg.unsupported[0] = 0;
    SRunner *sr = srunner_create(make_suite(c->label, checks));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    TestResult **tr = srunner_failures(sr);
    for (int k = 0; k < failed; k++) printf("%s\n", tr_msg(tr[k]));
    free(tr);
    srunner_free(sr);
    double s = attn_wall_s() - t0;
    if (failed) {
        printf("CASE %s FAILED %s (%.2f s)\n", c->label, failed_checks[0] ? failed_checks : "(a Check error)", s);
        return ATTN_CASE_FAILED;
    }
    if (n_unsupported) {
        printf("CASE %s NOT_SUPPORTED (%.2f s)\nNOT SUPPORTED (%d checks): %s\n", c->label, s, n_unsupported,
               cfg.unsupported);
        return ATTN_CASE_UNSUPPORTED;
    }
    printf("CASE %s passed (%.2f s)\n", c->label, s);
    return ATTN_CASE_PASSED;
}

/* In the child: case i. A CUDA context left broken (a kernel fault is sticky) ends this
 * process, so that the next case starts in a new one. */
static attn_case_verdict run_case(int i, void *ctx, int *stop_child) {
    const args *a = ctx;
    const test_case *c = &a->cases[i];
    cfg.dtype = c->dtype, cfg.head_dim = c->head_dim, cfg.head_dim_v = c->head_dim_v, cfg.causal = c->causal;
    cfg.heads_k = c->heads_k, cfg.window_left = c->window_left, cfg.window_right = c->window_right;
    cfg.softcap = c->softcap;
    cfg.seqlen_q = c->seqlen_q, cfg.seqlen_k = c->seqlen_k;
    cfg.nseq = c->nseq, cfg.page_size = c->page_size, cfg.lens_q = c->lens_q, cfg.lens_k = c->lens_k;
    /* the same seeds in any grouping of cases: from the kernel and the case alone */
    snprintf(cfg.seed_name, sizeof cfg.seed_name, "correctness/%s/%s", a->kernel, c->label);
    double t0 = attn_wall_s();
    char why[512];
    attn_case_verdict v;
    const attn_fwd_params shape = case_shape(c);
    if (attn_kernel_lacks(cfg.kernel, &shape, why, sizeof why)) { /* said before any launch */
        printf("CASE %s NOT_SUPPORTED (0.00 s)\nNOT SUPPORTED: %s\n", c->label, why);
        v = ATTN_CASE_UNSUPPORTED;
    } else if (!enough_memory(why, sizeof why)) {
        printf("CASE %s SKIPPED: %s\n", c->label, why);
        v = ATTN_CASE_SKIPPED;
    } else {
        v = run_checks(c, c->nseq ? "packed" : a->checks, t0); /* a packed case has its own check */
    }
    cudaGetLastError(); /* clears an error that is not sticky; a sticky one stays */
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("the CUDA context is broken after case %s (%s): the next case starts in a new process\n", c->label,
               cudaGetErrorName(e));
        *stop_child = 1;
    }
    return v;
}

static const char *case_label(int i, void *ctx) { return ((const args *)ctx)->cases[i].label; }

/* ---------------------------------------------------------------- arguments ---- */

static void usage(const char *why) {
    fprintf(stderr,
            "attn_correctness: %s\n"
            "usage: attn_correctness --name NAME --kernel K [--plugin LIB.so] --dtype fp16|bf16[,...]\n"
            "         --head-dim D|DxDV[,...] --mask full|causal[,...] --shapes QxK|S[,...] --batch B --heads H\n"
            "         [--heads-k HK[,...]] [--window L:R[,...]] [--softcap C[,...]] [--page-size P[,...]]\n"
            "         [--pairwise] [--shard K/N]\n"
            "         --tolerance FILE.ini [--checks NAME,...] [--case-timeout SECONDS] [--in-process] [--list]\n"
            "cases: the cross product of the lists (S = SxS; D = DxD; --heads-k defaults to --heads,\n"
            "        --window to -1:-1 (none; -1 is unbounded; causal cases keep only L), --softcap to 0\n"
            "        (off)); --pairwise: the rows of a pairwise covering array of them instead;\n"
            "        --shard K/N: of those, the cases i with i %% N == K (a test split over N processes)\n"
            "packed cases: a shape QxK+QxK+... (sequences of their own lengths, 0 allowed) or a page\n"
            "        size P > 0 (K and V in a shuffled pool of P-row pages) runs only the check 'packed'\n"
            "checks: accuracy large_inputs unwritten guard_bands determinism scale layouts lse\n"
            "        (the default), stream_order graph_capture interleaved (the kernel contract),\n"
            "        launch (one fwd, nothing judged: for compute-sanitizer), packed (a packed case's)\n"
            "--in-process: run the cases in this process (for tools that follow one process);\n"
            "        by default a child process runs them, replaced after a crash or a hang\n"
            "--list: print the cases and exit\n",
            why);
    exit(2);
}

static int positive_arg(const char *opt, const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < 1 || v > (1L << 24)) {
        fprintf(stderr, "attn_correctness: %s: expected a positive integer, got '%s'\n", opt, s);
        exit(2);
    }
    return (int)v;
}

enum { ELEM = 96 }; /* the longest list element: a packed batch "QxK+QxK+..." */

/* The elements of a comma-separated list into out[] (at most max, each under ELEM chars). */
static int split_list(const char *opt, const char *list, char out[][ELEM], int max) {
    int n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= ELEM || n == max) {
            fprintf(stderr, "attn_correctness: %s: bad list '%s'\n", opt, list);
            exit(2);
        }
        memcpy(out[n], p, len);
        out[n++][len] = 0;
        p += len;
        if (!*p) return n;
    }
}

/* "A" or "A<sep>B" (B defaults to A) into two integers, each checked by `value`. */
static void parse_pair(const char *opt, const char *s, char sep, int (*value)(const char *, const char *), int *a,
                       int *b) {
    char first[32];
    size_t len = strcspn(s, (char[]){sep, 0});
    snprintf(first, sizeof first, "%.*s", (int)len, s);
    *a = value(opt, first);
    *b = s[len] ? value(opt, s + len + 1) : *a;
}

/* -1 (unbounded) or a window bound >= 0 */
static int window_arg(const char *opt, const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < -1 || v > (1L << 24)) {
        fprintf(stderr, "attn_correctness: %s: expected -1 or a bound >= 0, got '%s'\n", opt, s);
        exit(2);
    }
    return (int)v;
}

static float softcap_arg(const char *opt, const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (*s == 0 || *end || !(v >= 0) || v > 1e6) {
        fprintf(stderr, "attn_correctness: %s: expected a number >= 0, got '%s'\n", opt, s);
        exit(2);
    }
    return (float)v;
}

enum { AX_DTYPE, AX_DIM, AX_MASK, AX_HEADS_K, AX_WINDOW, AX_SOFTCAP, AX_PAGE, AX_SHAPE, N_AXES, MAXL = 64 };
static const char *const AXIS_OPT[N_AXES] = {"--dtype", "--head-dim", "--mask", "--heads-k", "--window", "--softcap",
                                             "--page-size", "--shapes"};

/* A shape "QxK" (or "S"), or sequences "QxK+QxK+..." (a packed batch), into c; its label
 * part ("s17", "q1k239", "q1k239+s0") at l. Returns the label's end. */
static char *parse_shapes(test_case *c, const char *s, char *l, char *end) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    c->seqlen_q = c->seqlen_k = 0;
    for (char *tok = strtok(buf, "+"); tok; tok = strtok(NULL, "+")) {
        if (n == MAX_SEQS) usage("--shapes: more than 16 sequences in one packed shape");
        int q, k;
        parse_pair("--shapes", tok, 'x', strchr(s, '+') ? window_arg : positive_arg, &q, &k);
        if (q < 0 || k < 0) usage("--shapes: a sequence length below 0");
        c->lens_q[n] = q, c->lens_k[n++] = k;
        c->seqlen_q = q > c->seqlen_q ? q : c->seqlen_q, c->seqlen_k = k > c->seqlen_k ? k : c->seqlen_k;
        l += snprintf(l, end - l, "%s", n > 1 ? "+" : "");
        l += q == k ? snprintf(l, end - l, "s%d", q) : snprintf(l, end - l, "q%dk%d", q, k);
    }
    c->nseq = n > 1 ? n : 0;
    if (c->seqlen_q < 1) c->seqlen_q = 1; /* the maxima of a packed batch: at least one row */
    if (c->seqlen_k < 1) c->seqlen_k = 1;
    return l;
}

/* Case c from the axis values v[] (strings) chosen by row[]; its label names what is not off. */
static void make_case(test_case *c, char v[N_AXES][MAXL][ELEM], const int *row) {
    if (attn_dtype_parse(v[AX_DTYPE][row[AX_DTYPE]], &c->dtype)) usage("--dtype: expected fp16 or bf16");
    parse_pair("--head-dim", v[AX_DIM][row[AX_DIM]], 'x', positive_arg, &c->head_dim, &c->head_dim_v);
    const char *m = v[AX_MASK][row[AX_MASK]];
    if (strcmp(m, "full") && strcmp(m, "causal")) usage("--mask: expected full or causal");
    c->causal = !strcmp(m, "causal");
    c->heads_k = positive_arg("--heads-k", v[AX_HEADS_K][row[AX_HEADS_K]]);
    parse_pair("--window", v[AX_WINDOW][row[AX_WINDOW]], ':', window_arg, &c->window_left, &c->window_right);
    if (c->causal && c->window_right > 0) c->window_right = 0; /* causal is a right bound of 0 */
    c->softcap = softcap_arg("--softcap", v[AX_SOFTCAP][row[AX_SOFTCAP]]);
    c->page_size = window_arg("--page-size", v[AX_PAGE][row[AX_PAGE]]);
    if (c->page_size < 0) usage("--page-size: expected 0 (none) or a page size");
    char *l = c->label, *end = c->label + sizeof c->label;
    l += snprintf(l, end - l, "%s/d%d", v[AX_DTYPE][row[AX_DTYPE]], c->head_dim);
    if (c->head_dim_v != c->head_dim) l += snprintf(l, end - l, "v%d", c->head_dim_v);
    l += snprintf(l, end - l, "/%s/", m);
    if (c->heads_k != cfg.heads) l += snprintf(l, end - l, "kv%d/", c->heads_k);
    if (c->window_left >= 0 || c->window_right >= 0) l += snprintf(l, end - l, "w%d_%d/", c->window_left, c->window_right);
    if (c->softcap > 0) l += snprintf(l, end - l, "cap%g/", c->softcap);
    if (c->page_size > 0) l += snprintf(l, end - l, "p%d/", c->page_size);
    c->shape = v[AX_SHAPE][row[AX_SHAPE]];
    parse_shapes(c, c->shape, l, end);
    if (c->page_size > 0 && !c->nseq) { /* paged, one shape: cfg.batch sequences of it */
        c->nseq = cfg.batch < MAX_SEQS ? cfg.batch : MAX_SEQS;
        for (int b = 1; b < c->nseq; b++) c->lens_q[b] = c->lens_q[0], c->lens_k[b] = c->lens_k[0];
    }
}

static void validate_case(const test_case *c) {
    if (c->nseq) return; /* a packed case: check 'packed' validates its arrays before any launch */
    const attn_fwd_params p = case_shape(c);
    const attn_problem_host none = {NULL, NULL, NULL, NULL};
    char err[512];
    if (attn_problem_check(&p, &none, err, sizeof err)) {
        fprintf(stderr, "attn_correctness: case %s: %s\n", c->label, err);
        exit(2);
    }
}

/* The cases: the cross product of the lists, in the order of the axes, or (--pairwise) the
 * rows of a pairwise covering array of them. */
static void build_cases(args *a) {
    static char v[N_AXES][MAXL][ELEM];
    int size[N_AXES], total = 1;
    for (int x = 0; x < N_AXES; x++) total *= size[x] = split_list(AXIS_OPT[x], a->lists[x], v[x], MAXL);
    int *rows = calloc((size_t)total * N_AXES, sizeof *rows);
    int n = total;
    if (a->pairwise) {
        n = attn_pairwise(size, N_AXES, rows, total);
    } else {
        for (int r = 0; r < total; r++)
            for (int x = N_AXES - 1, k = r; x >= 0; k /= size[x], x--) rows[r * N_AXES + x] = k % size[x];
    }
    a->cases = calloc((size_t)n, sizeof *a->cases);
    a->n_cases = 0;
    for (int r = a->shard; r < n; r += a->shards) {
        test_case *c = &a->cases[a->n_cases++];
        make_case(c, v, rows + (size_t)r * N_AXES);
        validate_case(c);
    }
    free(rows);
}

/* The command line into cfg and a; exits 2 with the usage on anything malformed. */
static void parse_args(int argc, char **argv, args *a) {
    a->checks = DEFAULT_CHECKS;
    a->case_timeout_s = 60;
    a->lists[AX_WINDOW] = "-1:-1", a->lists[AX_SOFTCAP] = "0", a->lists[AX_PAGE] = "0";
    a->shard = 0, a->shards = 1;
    static const struct option opts[] = {
        {"name", 1, 0, 'n'},     {"kernel", 1, 0, 'k'},       {"plugin", 1, 0, 'p'},    {"dtype", 1, 0, 't'},
        {"head-dim", 1, 0, 'd'}, {"mask", 1, 0, 'm'},         {"shapes", 1, 0, 'S'},    {"batch", 1, 0, 'b'},
        {"heads", 1, 0, 'h'},    {"tolerance", 1, 0, 'T'},    {"checks", 1, 0, 'c'},    {"case-timeout", 1, 0, 'W'},
        {"in-process", 0, 0, 'I'}, {"heads-k", 1, 0, 'K'},    {"window", 1, 0, 'w'},    {"softcap", 1, 0, 'C'},
        {"pairwise", 0, 0, 'P'}, {"list", 0, 0, 'L'}, {"page-size", 1, 0, 'G'}, {"shard", 1, 0, 'H'}, {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n': cfg.name = optarg; break;
        case 'k': a->kernel = optarg; break;
        case 'p': a->plugin = optarg; break;
        case 't': a->lists[AX_DTYPE] = optarg; break;
        case 'd': a->lists[AX_DIM] = optarg; break;
        case 'm': a->lists[AX_MASK] = optarg; break;
        case 'K': a->lists[AX_HEADS_K] = optarg; break;
        case 'w': a->lists[AX_WINDOW] = optarg; break;
        case 'C': a->lists[AX_SOFTCAP] = optarg; break;
        case 'G': a->lists[AX_PAGE] = optarg; break;
        case 'S': a->lists[AX_SHAPE] = optarg; break;
        case 'b': cfg.batch = positive_arg("--batch", optarg); break;
        case 'h': cfg.heads = positive_arg("--heads", optarg); break;
        case 'T': a->tolerance = optarg; break;
        case 'c': a->checks = optarg; break;
        case 'W': a->case_timeout_s = positive_arg("--case-timeout", optarg); break;
        case 'I': a->in_process = 1; break;
        case 'P': a->pairwise = 1; break;
        case 'L': a->list = 1; break;
        case 'H': {
            char extra;
            if (sscanf(optarg, "%d/%d%c", &a->shard, &a->shards, &extra) != 2 || a->shards < 1 || a->shards > 64 ||
                a->shard < 0 || a->shard >= a->shards)
                usage("--shard: expected K/N with 0 <= K < N <= 64");
            break;
        }
        default: usage("unknown option");
        }
    }
    if (optind != argc) usage("unexpected argument");
    if (!cfg.name || !a->kernel || !a->lists[AX_DTYPE] || !a->lists[AX_MASK] || !a->tolerance ||
        !a->lists[AX_DIM] || !a->lists[AX_SHAPE] || !cfg.batch || !cfg.heads)
        usage("missing option");
    static char heads[16];
    snprintf(heads, sizeof heads, "%d", cfg.heads);
    if (!a->lists[AX_HEADS_K]) a->lists[AX_HEADS_K] = heads;
    build_cases(a);
    char bad[128];
    if (checks_valid(a->checks, bad, sizeof bad)) {
        fprintf(stderr, "attn_correctness: --checks: unknown check '%s'\n", bad);
        exit(2);
    }
}

/* ------------------------------------------------------------------ the end ---- */

/* The tally, a line per case that never reported, how to rerun each failed case alone;
 * the exit status: 1 if any case failed or did not run, else 0 if any passed, else 77. */
static int report(const args *a, const attn_case_verdict *v, const char *argv0) {
    int count[ATTN_CASE_NOT_RUN + 1] = {0};
    for (int i = 0; i < a->n_cases; i++) {
        count[v[i]]++;
        if (v[i] == ATTN_CASE_NOT_RUN) printf("CASE %s NOT_RUN\n", a->cases[i].label);
    }
    printf("%s: %d cases: %d passed, %d failed, %d not supported, %d skipped, %d not run\n", cfg.name, a->n_cases,
           count[ATTN_CASE_PASSED], count[ATTN_CASE_FAILED], count[ATTN_CASE_UNSUPPORTED], count[ATTN_CASE_SKIPPED],
           count[ATTN_CASE_NOT_RUN]);
    for (int i = 0; i < a->n_cases; i++) {
        const test_case *c = &a->cases[i];
        if (v[i] != ATTN_CASE_FAILED) continue;
        printf("rerun %s alone: %s --name %s --kernel %s%s%s --dtype %s --head-dim %dx%d --mask %s --heads-k %d "
               "--window=%d:%d --softcap %g --shapes %s --page-size %d --batch %d --heads %d --tolerance %s "
               "--checks %s\n",
               c->label, argv0, cfg.name, a->kernel, a->plugin ? " --plugin " : "", a->plugin ? a->plugin : "",
               attn_dtype_name(c->dtype), c->head_dim, c->head_dim_v, c->causal ? "causal" : "full", c->heads_k,
               c->window_left, c->window_right, c->softcap, c->shape, c->page_size, cfg.batch, cfg.heads,
               a->tolerance, a->checks);
    }
    if (count[ATTN_CASE_FAILED] || count[ATTN_CASE_NOT_RUN]) return 1;
    if (count[ATTN_CASE_PASSED]) return 0;
    printf("%s\n", count[ATTN_CASE_UNSUPPORTED] ? "NOT SUPPORTED: no case of this test (reasons above)"
                                                : "SKIPPED: every case of this test (reasons above)");
    return ATTN_EXIT_SKIP;
}

int main(int argc, char **argv) {
    args a = {0};
    parse_args(argc, argv, &a);
    char err[1024];
    if (attn_tolerance_load(a.tolerance, &cfg.tol, err, sizeof err)) {
        fprintf(stderr, "attn_correctness: %s\n", err);
        return 2;
    }
    cfg.kernel = attn_find_kernel(a.kernel, a.plugin, err, sizeof err);
    if (!cfg.kernel) {
        fprintf(stderr, "attn_correctness: %s\n", err);
        return 2;
    }
    if (a.list) { /* the cases, no GPU needed */
        for (int i = 0; i < a.n_cases; i++) printf("%s\n", a.cases[i].label);
        return 0;
    }
    attn_case_runner r = {child_init, run_case, case_label, &a, a.n_cases, a.case_timeout_s};
    attn_case_verdict *v = calloc((size_t)a.n_cases, sizeof *v);
    int rc = a.in_process ? attn_run_cases_in_process(&r, v) : attn_run_cases(&r, v, stdout);
    if (rc) return rc; /* nothing ran: no GPU (77), or the set-up failed */
    rc = report(&a, v, argv[0]);
    free(v);
    free(a.cases);
    return rc;
}
