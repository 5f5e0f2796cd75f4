/* The correctness suite: one process per (kernel, dtype, head dim, mask, shape), one Check
 * test case per check, so a failure names its check.
 *
 *   attn_correctness --name correctness/simple/bf16/d128/causal/s1000 --kernel simple
 *       [--plugin lib.so] --dtype bf16 --head-dim 128 --mask causal --seqlen-q 1000
 *       --seqlen-k 1000 --batch 2 --heads 3 --tolerance thresholds/tolerance.ini
 *
 * Exit: 0 all checks passed; 1 a check failed; 77 skipped (no GPU, or the kernel said
 * ATTN_UNSUPPORTED; the reason is printed); 2 bad arguments or a harness error.
 *
 * Isolation: a CUDA context does not survive fork(), so Check runs without forking
 * (CK_NOFORK) and CTest gives each shape its own process; a kernel that faults fails the
 * checks of its own process only, and a hang is stopped by the CTest timeout.
 * Seeds derive from the test name and the check; ATTN_SEED=<n> overrides them.
 * CK_RUN_CASE=<check> runs one check. */
#include <check.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "attn_abi.h"
#include "harness.h"
#include "reference.h"
#include "registry.h"
#include "verdict.h"

/* ---------------------------------------------------------------- configuration ---- */

static struct {
    const char *name;      /* CTest test name: seeds and messages */
    const attn_kernel *kernel;
    attn_dtype dtype;
    int batch, heads, seqlen_q, seqlen_k, head_dim, causal;
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
    say("%s: check '%s' failed\n  shape: batch=%d heads=%d seqlen_q=%d seqlen_k=%d head_dim=%d "
        "%s %s, layouts q/k/v %s o %s, softmax_scale=%g\n  seed: ATTN_SEED=0x%016llx "
        "CK_RUN_CASE=%s reproduces it\n",
        cfg.name, check, cfg.batch, cfg.heads, cfg.seqlen_q, cfg.seqlen_k, cfg.head_dim,
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

typedef struct {
    run_spec spec;
    attn_strides st[4];
    void *dbuf[4];          /* q, k, v, o device buffers, guards included */
    size_t bytes[4];
    float *dlse_buf;        /* LSE buffer, guards included */
    float *dg, *dr, *dlg;   /* golden O, low-precision O, golden LSE (BHSD, float) */
    attn_fwd_params p;
    size_t o_elems, rows;
    /* host copies */
    unsigned char *o_raw, *lse_raw; /* whole buffers after the launch, guards included */
    float *o, *lse;                 /* kernel output, logical [b][h][s][d] / [b][h][s] */
    float *g, *r, *lg;
    unsigned char *row_empty;
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

static size_t lse_bytes(void) { return (size_t)cfg.batch * cfg.heads * cfg.seqlen_q * 4; }
static void *inner(void *buf) { return (char *)buf + GUARD_BYTES; }

static void run_free(run *x) {
    for (int t = 0; t < 4; t++) cudaFree(x->dbuf[t]);
    cudaFree(x->dlse_buf);
    cudaFree(x->dg);
    cudaFree(x->dr);
    cudaFree(x->dlg);
    free(x->o_raw);
    free(x->lse_raw);
    free(x->o);
    free(x->lse);
    free(x->g);
    free(x->r);
    free(x->lg);
    free(x->row_empty);
    memset(x, 0, sizeof *x);
}

/* Inputs: normal random values (never zeros), quantized to the dtype; padding between
 * rows holds NaN so that a kernel reading through a wrong stride is caught. */
static int run_setup(run *x, const run_spec *spec) {
    memset(x, 0, sizeof *x);
    x->spec = *spec;
    int seq[4] = {cfg.seqlen_q, cfg.seqlen_k, cfg.seqlen_k, cfg.seqlen_q};
    attn_rng rng;
    attn_rng_init(&rng, spec->seed);
    for (int t = 0; t < 4; t++) {
        x->st[t] = attn_make_strides(spec->layout[t], cfg.batch, cfg.heads, seq[t], cfg.head_dim);
        x->bytes[t] = 2 * GUARD_BYTES + (size_t)x->st[t].extent * 2;
        CUDA_TRY(cudaMalloc(&x->dbuf[t], x->bytes[t]));
        if (t == 3) continue;
        uint16_t *h = malloc(x->bytes[t]);
        if (!h) { say("  out of host memory\n"); return 1; }
        memset(h, POISON, x->bytes[t]);
        uint16_t *data = (uint16_t *)inner(h);
        double sigma = t == 2 ? spec->sigma_v : spec->sigma_qk;
        for (int b = 0; b < cfg.batch; b++)
            for (int hh = 0; hh < cfg.heads; hh++)
                for (int s = 0; s < seq[t]; s++)
                    for (int d = 0; d < cfg.head_dim; d++)
                        data[attn_offset(&x->st[t], b, hh, s, d)] =
                            attn_to_dtype(cfg.dtype, (float)(sigma * attn_rng_normal(&rng)));
        cudaError_t e = cudaMemcpyAsync(x->dbuf[t], h, x->bytes[t], cudaMemcpyHostToDevice, cfg.stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(cfg.stream); /* before h is freed */
        free(h);
        CUDA_TRY(e);
    }
    CUDA_TRY(cudaMalloc((void **)&x->dlse_buf, lse_bytes() + 2 * GUARD_BYTES));
    x->o_elems = (size_t)cfg.batch * cfg.heads * cfg.seqlen_q * cfg.head_dim;
    x->rows = (size_t)cfg.batch * cfg.heads * cfg.seqlen_q;
    CUDA_TRY(cudaMalloc((void **)&x->dg, x->o_elems * 4));
    CUDA_TRY(cudaMalloc((void **)&x->dr, x->o_elems * 4));
    CUDA_TRY(cudaMalloc((void **)&x->dlg, x->rows * 4));
    /* NaN until the reference writes them: a reference gap shows as NaN, and compute-sanitizer's
     * initcheck, which sanitize.sh filters to the kernel under test and so never sees the
     * reference's own kernels write, finds these buffers initialized when they are copied back */
    CUDA_TRY(cudaMemset(x->dg, 0xff, x->o_elems * 4));
    CUDA_TRY(cudaMemset(x->dr, 0xff, x->o_elems * 4));
    CUDA_TRY(cudaMemset(x->dlg, 0xff, x->rows * 4));

    attn_fwd_params *p = &x->p;
    p->dtype = cfg.dtype;
    p->batch = cfg.batch;
    p->heads = cfg.heads;
    p->seqlen_q = cfg.seqlen_q;
    p->seqlen_k = cfg.seqlen_k;
    p->head_dim = cfg.head_dim;
    p->causal = cfg.causal;
    p->softmax_scale = spec->scale;
    p->q = inner(x->dbuf[0]);
    p->k = inner(x->dbuf[1]);
    p->v = inner(x->dbuf[2]);
    p->o = inner(x->dbuf[3]);
    p->lse = spec->with_lse ? (float *)inner(x->dlse_buf) : NULL;
    p->q_batch_stride = x->st[0].batch, p->q_head_stride = x->st[0].head, p->q_row_stride = x->st[0].row;
    p->k_batch_stride = x->st[1].batch, p->k_head_stride = x->st[1].head, p->k_row_stride = x->st[1].row;
    p->v_batch_stride = x->st[2].batch, p->v_head_stride = x->st[2].head, p->v_row_stride = x->st[2].row;
    p->o_batch_stride = x->st[3].batch, p->o_head_stride = x->st[3].head, p->o_row_stride = x->st[3].row;

    x->o_raw = malloc(x->bytes[3]);
    x->lse_raw = malloc(lse_bytes() + 2 * GUARD_BYTES);
    x->o = malloc(x->o_elems * 4);
    x->lse = malloc(x->rows * 4);
    x->g = malloc(x->o_elems * 4);
    x->r = malloc(x->o_elems * 4);
    x->lg = malloc(x->rows * 4);
    x->row_empty = calloc(x->rows, 1);
    if (!x->o_raw || !x->lse_raw || !x->o || !x->lse || !x->g || !x->r || !x->lg || !x->row_empty) {
        say("  out of host memory\n");
        return 1;
    }
    for (size_t row = 0; row < x->rows; row++) {
        int i = (int)(row % cfg.seqlen_q);
        x->row_empty[row] = cfg.causal && i + cfg.seqlen_k - cfg.seqlen_q < 0;
    }
    return 0;
}

static int run_reference(run *x) {
    char err[1024];
    if (attn_ref_forward(cfg.ref, &x->p, ATTN_REF_GOLDEN, x->dg, x->dlg, cfg.stream, err, sizeof err) ||
        attn_ref_forward(cfg.ref, &x->p, ATTN_REF_LOWP, x->dr, NULL, cfg.stream, err, sizeof err)) {
        say("  reference failed: %s\n", err);
        return 1;
    }
    CUDA_TRY(cudaStreamSynchronize(cfg.stream));
    CUDA_TRY(cudaMemcpyAsync(x->g, x->dg, x->o_elems * 4, cudaMemcpyDeviceToHost, cfg.stream));
    CUDA_TRY(cudaMemcpyAsync(x->r, x->dr, x->o_elems * 4, cudaMemcpyDeviceToHost, cfg.stream));
    CUDA_TRY(cudaMemcpyAsync(x->lg, x->dlg, x->rows * 4, cudaMemcpyDeviceToHost, cfg.stream));
    CUDA_TRY(cudaStreamSynchronize(cfg.stream));
    return 0;
}

typedef enum { LAUNCH_OK, LAUNCH_UNSUPPORTED, LAUNCH_FAILED } launch_result;

/* Poisons O and LSE (guards included), runs the kernel, copies both buffers back whole.
 * Every operation goes on cfg.stream: nothing may race with the kernel. */
static launch_result run_kernel(run *x) {
    if (cudaMemsetAsync(x->dbuf[3], POISON, x->bytes[3], cfg.stream) != cudaSuccess ||
        cudaMemsetAsync(x->dlse_buf, POISON, lse_bytes() + 2 * GUARD_BYTES, cfg.stream) != cudaSuccess) {
        say("  cudaMemset failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return LAUNCH_FAILED;
    }
    int rc = cfg.kernel->fwd(&x->p, cfg.stream);
    if (rc == ATTN_UNSUPPORTED) {
        if (!cfg.unsupported[0])
            snprintf(cfg.unsupported, sizeof cfg.unsupported,
                     "kernel '%s' returned ATTN_UNSUPPORTED for %s %s head_dim=%d layouts q/k/v %s o %s",
                     cfg.kernel->name, attn_dtype_name(cfg.dtype), cfg.causal ? "causal" : "full",
                     cfg.head_dim, attn_layout_name(x->spec.layout[0]),
                     attn_layout_name(x->spec.layout[3]));
        return LAUNCH_UNSUPPORTED;
    }
    if (rc != ATTN_OK) {
        say("  kernel '%s' returned error code %d\n", cfg.kernel->name, rc);
        return LAUNCH_FAILED;
    }
    cudaError_t e = cudaStreamSynchronize(cfg.stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        say("  the kernel failed on the GPU: %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
        return LAUNCH_FAILED;
    }
    if (cudaMemcpyAsync(x->o_raw, x->dbuf[3], x->bytes[3], cudaMemcpyDeviceToHost, cfg.stream) != cudaSuccess ||
        cudaMemcpyAsync(x->lse_raw, x->dlse_buf, lse_bytes() + 2 * GUARD_BYTES, cudaMemcpyDeviceToHost,
                        cfg.stream) != cudaSuccess ||
        cudaStreamSynchronize(cfg.stream) != cudaSuccess) {
        say("  copying the outputs back failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return LAUNCH_FAILED;
    }
    const uint16_t *o = (const uint16_t *)(x->o_raw + GUARD_BYTES);
    size_t n = 0;
    for (int b = 0; b < cfg.batch; b++)
        for (int h = 0; h < cfg.heads; h++)
            for (int s = 0; s < cfg.seqlen_q; s++)
                for (int d = 0; d < cfg.head_dim; d++)
                    x->o[n++] = attn_from_dtype(cfg.dtype, o[attn_offset(&x->st[3], b, h, s, d)]);
    memcpy(x->lse, x->lse_raw + GUARD_BYTES, lse_bytes());
    return LAUNCH_OK;
}

/* (b, h, s, d) of logical element `i` of O */
static void where(size_t i, int *b, int *h, int *s, int *d) {
    *d = (int)(i % cfg.head_dim);
    i /= cfg.head_dim;
    *s = (int)(i % cfg.seqlen_q);
    i /= cfg.seqlen_q;
    *h = (int)(i % cfg.heads);
    *b = (int)(i / cfg.heads);
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
    s.seed = attn_seed_from_name(cfg.name) + 0x9e3779b97f4a7c15ull * (uint64_t)check_id;
    if (getenv("ATTN_SEED") && *getenv("ATTN_SEED")) s.seed = attn_seed_from_name(cfg.name);
    return s;
}

/* Judges O by the verdict rule; appends the metrics and the worst element to msg. */
static int judge_output(const run *x, const char *what) {
    attn_output_verdict v;
    attn_judge_output(x->o, x->g, x->r, x->rows, cfg.head_dim, x->row_empty, cfg.dtype, &cfg.tol, &v);
    if (v.rule == ATTN_RULE_PASS) return 0;
    int b, h, s, d;
    where(v.worst, &b, &h, &s, &d);
    say("  %s: %s", what, attn_rule_name(v.rule));
    if (v.rule == ATTN_RULE_NONFINITE || v.rule == ATTN_RULE_EMPTY_ROW)
        say(" (%zu of %zu elements)", v.bad_count, x->o_elems);
    say("\n  max|O-G| = %.4g  bound %.4g = %g x max|R-G| %.4g + atol %.4g (%g steps of %.3g)\n",
        v.max_err, v.max_bound, cfg.tol.max_factor, v.max_ref_err, v.atol, cfg.tol.atol_steps, v.step);
    say("  mean|O-G| = %.4g  bound %.4g = %g x mean|R-G| %.4g + %.3g\n", v.mean_err, v.mean_bound,
        cfg.tol.mean_factor, v.mean_ref_err, v.mean_bound - cfg.tol.mean_factor * v.mean_ref_err);
    size_t row = v.worst / cfg.head_dim;
    say("  %s element (b=%d, h=%d, s=%d, d=%d): O=%.6g G=%.6g R=%.6g%s\n",
        v.rule == ATTN_RULE_MAX || v.rule == ATTN_RULE_MEAN ? "worst" : "first bad", b, h, s, d,
        x->o[v.worst], x->g[v.worst], x->r[v.worst],
        x->row_empty[row] ? " (a row that sees no key)" : "");
    return 1;
}

static int judge_lse(const run *x, const char *what) {
    attn_lse_verdict v;
    attn_judge_lse(x->lse, x->lg, x->rows, &cfg.tol, &v);
    if (v.ok) return 0;
    size_t r = v.worst;
    say("  %s: %zu of %zu LSE values wrong (bound |L-Lg| <= %g + %g |Lg|)\n", what, v.bad_count,
        x->rows, cfg.tol.lse_atol, cfg.tol.lse_rtol);
    say("  first bad row (b=%d, h=%d, s=%d): LSE=%.7g golden=%.7g%s\n",
        (int)(r / cfg.seqlen_q / cfg.heads), (int)(r / cfg.seqlen_q % cfg.heads),
        (int)(r % cfg.seqlen_q), x->lse[r], x->lg[r],
        x->row_empty[r] ? " (a row that sees no key: expected -inf)" : "");
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
        /* max s <= LSE <= max s + ln(seqlen_k): |LSE| > 100 + ln(seqlen_k) puts a score
         * beyond +-100 */
        float top = 0;
        for (size_t i = 0; i < x.rows; i++)
            if (isfinite(x.lg[i])) top = fmaxf(top, fabsf(x.lg[i]));
        if (!(top > 100.0f + logf((float)cfg.seqlen_k))) {
            say("  harness error: the stimulus did not reach a score beyond +-100 (max |LSE| %g)\n", top);
            oc = CHECK_FAIL;
        } else {
            int bad = judge_output(&x, "output");
            bad |= judge_lse(&x, "lse");
            oc = bad ? CHECK_FAIL : CHECK_PASS;
        }
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
        size_t n_o = 0, first_o = 0, n_l = 0, first_l = 0;
        for (size_t i = x.o_elems; i-- > 0;)
            if (isnan(x.o[i])) n_o++, first_o = i;
        for (size_t i = x.rows; i-- > 0;)
            if (isnan(x.lse[i])) n_l++, first_l = i;
        if (n_o) {
            int b, h, s, d;
            where(first_o, &b, &h, &s, &d);
            say("  %zu of %zu O elements still NaN after the launch (never written?); first at "
                "(b=%d, h=%d, s=%d, d=%d), where G=%.6g\n", n_o, x.o_elems, b, h, s, d, x.g[first_o]);
        }
        if (n_l && n_l < x.rows) /* all NaN: the kernel does not write LSE (see check 'lse') */
            say("  %zu of %zu LSE values still NaN after the launch; first at row %zu\n", n_l, x.rows, first_l);
        oc = n_o || (n_l && n_l < x.rows) ? CHECK_FAIL : CHECK_PASS;
    }
    run_free(&x);
    return oc;
}

/* Counts bytes that differ from the poison in [from, to) of buf. */
static size_t touched(const unsigned char *buf, size_t from, size_t to, size_t *first) {
    size_t n = 0;
    for (size_t i = to; i-- > from;)
        if (buf[i] != POISON) n++, *first = i;
    return n;
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
        size_t first = 0, n, bad = 0;
        size_t obytes = (size_t)x.st[3].extent * 2;
        if ((n = touched(x.o_raw, 0, GUARD_BYTES, &first)))
            bad++, say("  %zu bytes written in the %d bytes before O (nearest at O-%zu)\n", n, GUARD_BYTES, GUARD_BYTES - first);
        if ((n = touched(x.o_raw, GUARD_BYTES + obytes, x.bytes[3], &first)))
            bad++, say("  %zu bytes written in the %d bytes after O's last element (first at end+%zu)\n", n, GUARD_BYTES, first - GUARD_BYTES - obytes);
        /* padding: elements of each row past heads*head_dim */
        const uint16_t *o = (const uint16_t *)(x.o_raw + GUARD_BYTES);
        size_t pad = 0, pad_first = 0;
        int64_t used = (int64_t)cfg.heads * cfg.head_dim;
        for (int64_t e = x.st[3].extent; e-- > 0;)
            if (e % x.st[3].row >= used && o[e] != 0xffffu) pad++, pad_first = (size_t)e;
        if (pad)
            bad++, say("  %zu padding elements between O's rows written (row stride %lld, first at "
                       "element %zu: s=%lld)\n", pad, (long long)x.st[3].row, pad_first,
                       (long long)(pad_first % x.st[3].batch / x.st[3].row));
        size_t lb = lse_bytes();
        if ((n = touched(x.lse_raw, 0, GUARD_BYTES, &first)))
            bad++, say("  %zu bytes written in the %d bytes before LSE\n", n, GUARD_BYTES);
        if ((n = touched(x.lse_raw, GUARD_BYTES + lb, lb + 2 * GUARD_BYTES, &first)))
            bad++, say("  %zu bytes written in the %d bytes after LSE's last value (first at end+%zu)\n", n, GUARD_BYTES, first - GUARD_BYTES - lb);
        oc = bad ? CHECK_FAIL : CHECK_PASS;
    }
    run_free(&x);
    return oc;
}

/* 5. two launches on the same inputs give bit-identical O and LSE */
static outcome check_determinism(void) {
    run x;
    run_spec spec = default_spec(5);
    int fail;
    outcome oc = prepare(&x, &spec, "determinism", &fail);
    if (!fail) {
        unsigned char *o1 = malloc(x.bytes[3]), *l1 = malloc(lse_bytes() + 2 * GUARD_BYTES);
        if (!o1 || !l1) {
            say("  out of host memory\n");
            oc = CHECK_FAIL;
        } else {
            memcpy(o1, x.o_raw, x.bytes[3]);
            memcpy(l1, x.lse_raw, lse_bytes() + 2 * GUARD_BYTES);
            launch_result lr = run_kernel(&x);
            if (lr != LAUNCH_OK) {
                oc = lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
            } else {
                size_t no = 0, nl = 0, fo = 0;
                for (size_t i = x.bytes[3]; i-- > 0;)
                    if (o1[i] != x.o_raw[i]) no++, fo = i;
                for (size_t i = lse_bytes() + 2 * GUARD_BYTES; i-- > 0;)
                    if (l1[i] != x.lse_raw[i]) nl++;
                if (no)
                    say("  O differs between two launches on the same inputs in %zu bytes (first at "
                        "byte %zd from O's start)\n", no, (ssize_t)fo - GUARD_BYTES);
                if (nl) say("  LSE differs between two launches in %zu bytes\n", nl);
                oc = no || nl ? CHECK_FAIL : CHECK_PASS;
            }
        }
        free(o1);
        free(l1);
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
        bad |= judge_lse(&x, "lse");
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
            bad |= judge_lse(&x, "lse");
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
        size_t untouched = 0;
        for (size_t i = 0; i < x.rows; i++) {
            uint32_t bits;
            memcpy(&bits, &x.lse[i], 4);
            untouched += bits == 0xffffffffu;
        }
        if (untouched == x.rows) {
            if (!cfg.unsupported[0])
                snprintf(cfg.unsupported, sizeof cfg.unsupported,
                         "kernel '%s' does not write the LSE", cfg.kernel->name);
            oc = CHECK_UNSUPPORTED;
        } else {
            oc = judge_lse(&x, "lse") ? CHECK_FAIL : CHECK_PASS;
        }
    }
    run_free(&x);
    return oc;
}

/* --------------------------------------------------------------- Check plumbing ---- */

static int n_unsupported;

static void finish(outcome oc) {
    if (oc == CHECK_UNSUPPORTED) {
        n_unsupported++;
        return;
    }
    ck_assert_msg(oc == CHECK_PASS, "%s", msg);
}

#define CHECK_TEST(fn) \
    START_TEST(test_##fn) { finish(check_##fn()); } \
    END_TEST

CHECK_TEST(accuracy)
CHECK_TEST(large_inputs)
CHECK_TEST(unwritten)
CHECK_TEST(guard_bands)
CHECK_TEST(determinism)
CHECK_TEST(scale)
CHECK_TEST(layouts)
CHECK_TEST(lse)

static Suite *make_suite(void) {
    Suite *s = suite_create(cfg.name);
    struct { const char *name; const TTest *test; } cases[] = {
        {"accuracy", test_accuracy},       {"large_inputs", test_large_inputs},
        {"unwritten", test_unwritten},     {"guard_bands", test_guard_bands},
        {"determinism", test_determinism}, {"scale", test_scale},
        {"layouts", test_layouts},         {"lse", test_lse},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

static void usage(const char *why) {
    fprintf(stderr,
            "attn_correctness: %s\n"
            "usage: attn_correctness --name NAME --kernel K [--plugin LIB.so] --dtype fp16|bf16\n"
            "         --head-dim D --mask full|causal --seqlen-q N --seqlen-k N --batch B --heads H\n"
            "         --tolerance FILE.ini\n",
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

int main(int argc, char **argv) {
    const char *kernel = NULL, *plugin = NULL, *tolerance = NULL, *dtype = NULL, *mask = NULL;
    static const struct option opts[] = {
        {"name", 1, 0, 'n'},     {"kernel", 1, 0, 'k'},   {"plugin", 1, 0, 'p'},
        {"dtype", 1, 0, 't'},    {"head-dim", 1, 0, 'd'}, {"mask", 1, 0, 'm'},
        {"seqlen-q", 1, 0, 'q'}, {"seqlen-k", 1, 0, 's'}, {"batch", 1, 0, 'b'},
        {"heads", 1, 0, 'h'},    {"tolerance", 1, 0, 'T'}, {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n': cfg.name = optarg; break;
        case 'k': kernel = optarg; break;
        case 'p': plugin = optarg; break;
        case 't': dtype = optarg; break;
        case 'd': cfg.head_dim = positive_arg("--head-dim", optarg); break;
        case 'm': mask = optarg; break;
        case 'q': cfg.seqlen_q = positive_arg("--seqlen-q", optarg); break;
        case 's': cfg.seqlen_k = positive_arg("--seqlen-k", optarg); break;
        case 'b': cfg.batch = positive_arg("--batch", optarg); break;
        case 'h': cfg.heads = positive_arg("--heads", optarg); break;
        case 'T': tolerance = optarg; break;
        default: usage("unknown option");
        }
    }
    if (optind != argc) usage("unexpected argument");
    if (!cfg.name || !kernel || !dtype || !mask || !tolerance || !cfg.head_dim || !cfg.seqlen_q ||
        !cfg.seqlen_k || !cfg.batch || !cfg.heads)
        usage("missing option");
    if (attn_dtype_parse(dtype, &cfg.dtype)) usage("--dtype: expected fp16 or bf16");
    if (strcmp(mask, "full") && strcmp(mask, "causal")) usage("--mask: expected full or causal");
    cfg.causal = !strcmp(mask, "causal");

    char err[1024];
    if (attn_tolerance_load(tolerance, &cfg.tol, err, sizeof err)) {
        fprintf(stderr, "attn_correctness: %s\n", err);
        return 2;
    }
    cfg.kernel = attn_find_kernel(kernel, plugin, err, sizeof err);
    if (!cfg.kernel) {
        fprintf(stderr, "attn_correctness: %s\n", err);
        return 2;
    }
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

    SRunner *sr = srunner_create(make_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    attn_ref_destroy(cfg.ref);
    cudaStreamDestroy(cfg.stream);
    if (failed) return 1;
    if (n_unsupported) {
        printf("NOT SUPPORTED (%d checks): %s\n", n_unsupported, cfg.unsupported);
        return ATTN_EXIT_SKIP;
    }
    return 0;
}
