/* Checks the GPU reference itself against the float64 CPU oracle on small shapes, so that
 * a verdict never rests on an unchecked reference.
 *
 *   attn_reference_check --dtype fp16|bf16 --head-dim D
 *
 * Bounds (against the oracle, from the same quantized inputs):
 *   golden O:   max|G - X| <= 1e-5 * max(1, max|X|)   (float32 GEMMs and softmax)
 *   golden LSE: |Lg - Lx|  <= 1e-5 * (1 + |Lx|)
 *   low-prec O: max|R - X| <= 2 * step(max|X|) + 2^-m * max|V|, with m the dtype's mantissa
 *               bits: O's own rounding plus P's rounding (relative 2^-(m+1) per weight,
 *               weights summing to 1) carried through V.
 *   rows that see no key: O exactly 0, LSE exactly -inf, in both variants.
 *   the benchmark's cuBLAS + softmax baseline (attn_ref_baseline, O in the dtype through its
 *               strides): the low-precision bound, on BSHD with batch < heads and with
 *               batch > heads and on BHSD, so each of its ways of batching the GEMMs is run.
 * Exit 0 pass, 1 fail, 77 no GPU. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "args.h"
#include "gpu_problem.h"
#include "harness.h"
#include "oracle.h"
#include "reference.h"
#include "verdict.h"

enum { BATCH = 2, HEADS = 3 }; /* the oracle shapes' batch and heads */
/* (batch, heads, layout) for the baseline: heads batched, batches batched, (b, h) flattened */
static const int baseline_cases[][3] = {{2, 3, ATTN_LAYOUT_BSHD}, {5, 2, ATTN_LAYOUT_BSHD}, {2, 3, ATTN_LAYOUT_BHSD}};
enum { N_BASELINE_CASES = sizeof baseline_cases / sizeof baseline_cases[0] };
static const int shapes[][2] = {{4, 4}, {17, 17}, {65, 65}, {3, 17}, {17, 3}, {1, 9}, {130, 70}};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

#define CK_CUDA(call)                                                                     \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));        \
    } while (0)

/* The version-2 features of a case (attn_abi.h); {heads, d, -1, -1, 0} is a version-1 case. */
typedef struct {
    int heads_k, dv, window_left, window_right;
    double softcap;
} features;

/* One oracle case: its shape, its problem on the GPU (harness/gpu_problem.h: inputs, O, the
 * references), the inputs copied to the host in the dtype (through the layout's strides) and
 * widened to float (BHSD, the oracle's input), the oracle's, the GPU reference's and the
 * baseline's outputs. It lives in the run's `current` so that the checked teardown can free
 * it after a failed assertion (CK_NOFORK: the test longjmps out). Fields keep the names the
 * checks used to print. */
struct oracle_case {
    attn_dtype dtype;
    int sq, sk, causal, batch, heads, d;
    features f;
    int baseline; /* a version-1 case: the baseline (which takes only those) is checked too */
    attn_layout layout;
    attn_strides stq, stk, stv, sto;
    size_t nq, nk, nv, no, rows;
    char name[128];
    double scale, vmax; /* softmax scale; max|V|, for the low-precision bound */
    attn_gpu_problem x;
    uint16_t *hq, *hk, *hv, *bo;
    float *fq, *fk, *fv; /* BHSD */
    double *xo, *xl;
    float *go, *ro, *gl;
};

/* The run: the command line's dtype and head dim, the reference, the case being checked. */
typedef struct {
    attn_dtype dtype;
    int head_dim;
    attn_reference *ref;
    struct oracle_case current;
} ref_check;

/* Check's test functions and fixtures take no argument: main's context reaches them through
 * this one pointer, set once before the run. */
static ref_check *the_run;

/* Frees whatever c holds (the problem only when it was built, so that a second call, or the
 * teardown after a passing case, makes no CUDA call) and zeroes it. */
static void free_case(struct oracle_case *c) {
    if (c->x.buf[ATTN_T_Q]) attn_gpu_problem_free(&c->x);
    free(c->bo);
    free(c->hq), free(c->hk), free(c->hv), free(c->fq), free(c->fk), free(c->fv), free(c->xo), free(c->xl);
    free(c->go), free(c->ro), free(c->gl);
    memset(c, 0, sizeof *c);
}

static void teardown(void) { free_case(&the_run->current); }

/* The shape and its name. */
static void case_init(const ref_check *rc, struct oracle_case *c, int sq, int sk, int causal, int batch,
                      int heads, attn_layout layout, features f) {
    memset(c, 0, sizeof *c);
    const attn_dtype dtype = c->dtype = rc->dtype;
    int d = rc->head_dim;
    c->sq = sq, c->sk = sk, c->causal = causal, c->batch = batch, c->heads = heads, c->d = d, c->f = f;
    c->layout = layout;
    snprintf(c->name, sizeof c->name, "reference/%s/d%d/q%dk%d/%d/b%dh%d/%s", attn_dtype_name(dtype), d, sq, sk,
             causal, batch, heads, attn_layout_name(layout));
    c->baseline = f.heads_k == heads && f.dv == d && f.window_left < 0 && f.window_right < 0 && f.softcap == 0;
    if (!c->baseline) {
        size_t n = strlen(c->name);
        snprintf(c->name + n, sizeof c->name - n, "/kv%d/v%d/w%d_%d/cap%g", f.heads_k, f.dv, f.window_left,
                 f.window_right, f.softcap);
    }
    c->scale = 1.0 / sqrt((double)d);
}

/* The problem on the GPU, every tensor in the case's layout, inputs from the seed of the
 * case's name; its strides and sizes, and the host buffers. */
static void make_problem(struct oracle_case *c) {
    attn_problem_desc d = attn_problem_dense(c->dtype, c->batch, c->heads, c->sq, c->sk, c->d, c->causal, c->name);
    for (int t = 0; t < 4; t++) d.layout[t] = c->layout;
    d.heads_k = c->f.heads_k, d.head_dim_v = c->f.dv, d.softcap = (float)c->f.softcap;
    d.window_left = c->f.window_left, d.window_right = c->f.window_right;
    char err[1024];
    ck_assert_msg(!attn_gpu_problem_build(&c->x, &d, 0, err, sizeof err), "%s: %s", c->name, err);
    c->stq = c->x.st[ATTN_T_Q], c->stk = c->x.st[ATTN_T_K], c->stv = c->x.st[ATTN_T_V], c->sto = c->x.st[ATTN_T_O];
    size_t nq = (size_t)c->stq.extent, nk = (size_t)c->stk.extent, nv = (size_t)c->stv.extent;
    size_t no = c->x.o_elems, rows = c->x.rows;
    c->nq = nq, c->nk = nk, c->nv = nv, c->no = no, c->rows = rows;
    uint16_t *hq = malloc(nq * 2), *hk = malloc(nk * 2), *hv = malloc(nv * 2);
    float *fq = malloc(nq * 4), *fk = malloc(nk * 4), *fv = malloc(nv * 4); /* BHSD */
    double *xo = malloc(no * 8), *xl = malloc(rows * 8);
    float *go = malloc(no * 4), *ro = malloc(no * 4), *gl = malloc(rows * 4);
    /* into c before the assertion, so that the teardown frees those that were allocated */
    c->hq = hq, c->hk = hk, c->hv = hv, c->fq = fq, c->fk = fk, c->fv = fv;
    c->xo = xo, c->xl = xl, c->go = go, c->ro = ro, c->gl = gl;
    ck_assert(hq && hk && hv && fq && fk && fv && xo && xl && go && ro && gl);
}

/* Q, K, V as the problem holds them: copied to the host in the dtype through the layout's
 * strides, and the same values widened to float (BHSD) for the oracle. */
static void fill_inputs(struct oracle_case *c) {
    const attn_dtype dtype = c->dtype;
    const size_t nq = c->nq, nk = c->nk, nv = c->nv;
    uint16_t *hq = c->hq, *hk = c->hk, *hv = c->hv;
    CK_CUDA(cudaMemcpy(hq, attn_gpu_problem_data(&c->x, ATTN_T_Q), nq * 2, cudaMemcpyDeviceToHost));
    CK_CUDA(cudaMemcpy(hk, attn_gpu_problem_data(&c->x, ATTN_T_K), nk * 2, cudaMemcpyDeviceToHost));
    CK_CUDA(cudaMemcpy(hv, attn_gpu_problem_data(&c->x, ATTN_T_V), nv * 2, cudaMemcpyDeviceToHost));
    const uint16_t *h16[3] = {hq, hk, hv};
    float *f32[3] = {c->fq, c->fk, c->fv};
    double vmax = 0;
    for (int t = 0; t < 3; t++) {
        int seq = t == 0 ? c->sq : c->sk, heads = t == 0 ? c->heads : c->f.heads_k, dim = t == 2 ? c->f.dv : c->d;
        attn_strides *st = t == 0 ? &c->stq : t == 1 ? &c->stk : &c->stv;
        size_t n = 0;
        for (int b = 0; b < c->batch; b++)
            for (int h = 0; h < heads; h++)
                for (int s = 0; s < seq; s++)
                    for (int e = 0; e < dim; e++) {
                        f32[t][n++] = attn_from_dtype(dtype, h16[t][attn_offset(st, b, h, s, e)]);
                        if (t == 2) vmax = fmax(vmax, fabs(f32[t][n - 1]));
                    }
    }
    c->vmax = vmax;
}

/* The baseline into the problem's O (NaN-poisoned: every element must be written; the dtype,
 * through O's strides, which are Q's in a version-1 case), then the golden and the
 * low-precision reference, each copied back. */
static void run_gpu(attn_reference *ref, struct oracle_case *c) {
    const size_t no = c->no, rows = c->rows;
    float *go = c->go, *ro = c->ro, *gl = c->gl;
    char err[1024];
    if (c->baseline) {
        const size_t nq = c->nq;
        uint16_t *bo = malloc(nq * 2);
        c->bo = bo;
        ck_assert(bo);
        ck_assert_msg(!attn_ref_baseline(ref, &c->x.p, 0, err, sizeof err), "%s", err);
        CK_CUDA(cudaDeviceSynchronize());
        CK_CUDA(cudaMemcpy(bo, attn_gpu_problem_data(&c->x, ATTN_T_O), nq * 2, cudaMemcpyDeviceToHost));
    }
    ck_assert_msg(!attn_gpu_problem_references(&c->x, ref, 0, err, sizeof err), "%s", err);
    CK_CUDA(cudaMemcpy(go, c->x.g, no * 4, cudaMemcpyDeviceToHost));
    CK_CUDA(cudaMemcpy(ro, c->x.r, no * 4, cudaMemcpyDeviceToHost));
    CK_CUDA(cudaMemcpy(gl, c->x.lg, rows * 4, cudaMemcpyDeviceToHost));
}

/* Golden and low-precision O against the oracle (and exact zeros where a row sees no key).
 * Returns the low-precision bound, which the baseline is held to as well. */
static double check_o(const struct oracle_case *c) {
    const attn_dtype dtype = c->dtype;
    const float *go = c->go, *ro = c->ro;
    const double *xo = c->xo, *xl = c->xl;
    double xmax = 0, gerr = 0, rerr = 0;
    size_t gworst = 0, rworst = 0;
    for (size_t i = 0; i < c->no; i++) xmax = fmax(xmax, fabs(xo[i]));
    for (size_t i = 0; i < c->no; i++) {
        double eg = fabs(go[i] - xo[i]), er = fabs(ro[i] - xo[i]);
        if (!(eg <= gerr)) gerr = eg, gworst = i; /* NaN is taken as the worst */
        if (!(er <= rerr)) rerr = er, rworst = i;
        size_t row = i / c->f.dv;
        if (isinf(xl[row])) {
            ck_assert_msg(go[i] == 0.0f && ro[i] == 0.0f,
                          "%s: row %zu sees no key but O is G=%g R=%g", c->name, row, go[i], ro[i]);
        }
    }
    double gbound = 1e-5 * fmax(1.0, xmax);
    double rbound = 2 * attn_dtype_step(dtype, xmax) + ldexp(c->vmax, dtype == ATTN_BF16 ? -7 : -10);
    ck_assert_msg(gerr <= gbound, "%s: golden O off the float64 oracle: max err %.3g > %.3g at %zu (G=%.8g X=%.8g)",
                  c->name, gerr, gbound, gworst, go[gworst], xo[gworst]);
    ck_assert_msg(rerr <= rbound, "%s: low-precision O off the oracle: max err %.3g > %.3g at %zu (R=%.8g X=%.8g)",
                  c->name, rerr, rbound, rworst, ro[rworst], xo[rworst]);
    return rbound;
}

/* The baseline's O (the dtype, through Q's strides) against the oracle's BHSD O. */
static void check_baseline_o(const struct oracle_case *c, double rbound) {
    const attn_dtype dtype = c->dtype;
    double berr = 0;
    size_t bworst = 0;
    float bval = 0;
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < c->heads; h++)
            for (int s = 0; s < c->sq; s++)
                for (int e = 0; e < c->d; e++) {
                    size_t i = (((size_t)b * c->heads + h) * c->sq + s) * c->d + e; /* the oracle's BHSD index */
                    float o = attn_from_dtype(dtype, c->bo[attn_offset(&c->stq, b, h, s, e)]);
                    double eb = fabs(o - c->xo[i]);
                    if (!(eb <= berr)) berr = eb, bworst = i, bval = o;
                }
    ck_assert_msg(berr <= rbound, "%s: the baseline's O off the oracle: max err %.3g > %.3g at %zu (O=%.8g X=%.8g)",
                  c->name, berr, rbound, bworst, bval, c->xo[bworst]);
}

/* The golden LSE against the oracle's: -inf exactly where a row sees no key. */
static void check_lse(const struct oracle_case *c) {
    const float *gl = c->gl;
    const double *xl = c->xl;
    for (size_t r = 0; r < c->rows; r++) {
        if (isinf(xl[r])) {
            ck_assert_msg(isinf(gl[r]) && gl[r] < 0, "%s: row %zu sees no key, LSE %g (want -inf)", c->name, r, gl[r]);
        } else {
            double e = fabs(gl[r] - xl[r]);
            ck_assert_msg(e <= 1e-5 * (1 + fabs(xl[r])), "%s: golden LSE row %zu: %.8g vs oracle %.8g",
                          c->name, r, gl[r], xl[r]);
        }
    }
}

static void check_case(ref_check *rc, int sq, int sk, int causal, int batch, int heads, attn_layout layout,
                       features f) {
    struct oracle_case *c = &rc->current;
    case_init(rc, c, sq, sk, causal, batch, heads, layout, f);
    make_problem(c);
    fill_inputs(c);
    /* every sequence at full length (varying lengths: next to come) */
    enum { MAX_BATCH = 8 };
    int sqs[MAX_BATCH], sks[MAX_BATCH];
    ck_assert_int_le(batch, MAX_BATCH);
    for (int b = 0; b < batch; b++) sqs[b] = sq, sks[b] = sk;
    attn_oracle_problem pr = {.batch = batch, .heads = heads, .heads_k = f.heads_k, .head_dim = c->d,
                              .head_dim_v = f.dv, .causal = causal, .window_left = f.window_left,
                              .window_right = f.window_right, .softmax_scale = (double)(float)c->scale,
                              .softcap = (double)(float)f.softcap, .seqlen_q = sqs, .seqlen_k = sks,
                              .max_seqlen_q = sq, .max_seqlen_k = sk};
    ck_assert_msg(attn_oracle_forward(&pr, c->fq, c->fk, c->fv, c->xo, c->xl) == 0,
                  "the oracle refused the problem (an invalid case: see attn_abi.h)");
    run_gpu(rc->ref, c);
    double rbound = check_o(c);
    if (c->baseline) check_baseline_o(c, rbound);
    check_lse(c);
    free_case(c);
}

static void check_shape(ref_check *rc, int sq, int sk, int causal, int batch, int heads, attn_layout layout) {
    features v1 = {heads, rc->head_dim, -1, -1, 0};
    check_case(rc, sq, sk, causal, batch, heads, layout, v1);
}

START_TEST(full) { check_shape(the_run, shapes[_i][0], shapes[_i][1], 0, BATCH, HEADS, ATTN_LAYOUT_BSHD); }
END_TEST
START_TEST(causal) { check_shape(the_run, shapes[_i][0], shapes[_i][1], 1, BATCH, HEADS, ATTN_LAYOUT_BSHD); }
END_TEST
/* each way the baseline batches its GEMMs, on a tail shape, causal with S_q > S_k */
START_TEST(baseline_batching) {
    const int *c = baseline_cases[_i];
    check_shape(the_run, 17, 17, 0, c[0], c[1], (attn_layout)c[2]);
    check_shape(the_run, 130, 70, 1, c[0], c[1], (attn_layout)c[2]);
}
END_TEST

/* each version-2 feature alone, then together, on tails with S_q != S_k (heads 4) */
static features feature_case(int head_dim, int i) {
    const features all[] = {
        {2, 0, -1, -1, 0},  {1, 0, -1, -1, 0}, /* grouped KV heads: 2 per KV head, all to one */
        {4, 0, 16, -1, 0},  {4, 0, -1, 5, 0},  {4, 0, 3, 5, 0}, {4, 0, 0, 0, 0}, /* windows */
        {4, 0, -1, -1, 2},  {4, 0, -1, -1, 30},                                   /* softcap */
        {4, -1, -1, -1, 0}, {4, -2, -1, -1, 0},                                  /* head_dim_v */
        {2, -1, 7, 2, 5},                                                         /* together */
    };
    features f = all[i];
    f.dv = f.dv == 0 ? head_dim : f.dv == -1 ? head_dim / 2 : head_dim + 64; /* narrower, wider */
    return f;
}
enum { N_FEATURE_CASES = 11 };

START_TEST(version2_features) {
    features f = feature_case(the_run->head_dim, _i);
    check_case(the_run, 70, 130, 0, BATCH, 4, ATTN_LAYOUT_BSHD, f);
    check_case(the_run, 130, 70, 0, BATCH, 4, ATTN_LAYOUT_BHSD, f);
    if (f.window_right <= 0) check_case(the_run, 130, 70, 1, BATCH, 4, ATTN_LAYOUT_BSHD, f); /* causal: right bound 0 */
}
END_TEST

#define USAGE "usage: attn_reference_check --dtype fp16|bf16 --head-dim D\n"

/* The command line into run: -1 to go on, else main's exit code (0 after --help; 2 after a
 * line naming the bad argument). */
static int parse_args(int argc, char **argv, ref_check *run) {
    int have_dtype = 0;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long d = val ? strtol(val, &end, 10) : 0;
        if (attn_is_help(opt)) {
            printf(USAGE "Checks the GPU reference (golden and low-precision, and the benchmarks' cuBLAS + softmax\n"
                   "baseline) against the float64 CPU oracle on small shapes (suites/reference_check.c lists\n"
                   "the bounds). Exit 0 pass, 1 fail, 77 no GPU, 2 bad arguments.\n");
            return 0;
        }
        if (strcmp(opt, "--dtype") && strcmp(opt, "--head-dim"))
            return fprintf(stderr, "attn_reference_check: unknown argument '%s'\n" USAGE, opt), 2;
        if (!val) return fprintf(stderr, "attn_reference_check: option '%s' needs a value\n" USAGE, opt), 2;
        if (!strcmp(opt, "--dtype") && attn_dtype_parse(val, &run->dtype))
            return fprintf(stderr, "attn_reference_check: --dtype: expected fp16 or bf16, got '%s'\n", val), 2;
        if (!strcmp(opt, "--head-dim") && (!*val || *end || d < 1 || d > INT_MAX))
            return fprintf(stderr, "attn_reference_check: --head-dim: expected a positive integer, got '%s'\n", val), 2;
        if (!strcmp(opt, "--head-dim")) run->head_dim = (int)d;
        else have_dtype = 1;
        i++;
    }
    if (!have_dtype || !run->head_dim)
        return fprintf(stderr, "attn_reference_check: missing option %s\n" USAGE, have_dtype ? "--head-dim" : "--dtype"), 2;
    return -1;
}

int main(int argc, char **argv) {
    ref_check run = {0};
    the_run = &run;
    int rc = parse_args(argc, argv, &run);
    if (rc >= 0) return rc;
    char err[1024];
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    if (attn_ref_create(&run.ref, err, sizeof err)) {
        printf("FAILED: cannot create the reference: %s\n", err);
        return 1;
    }
    Suite *s = suite_create("reference_vs_oracle");
    TCase *tc = tcase_create("oracle");
    tcase_add_checked_fixture(tc, NULL, teardown); /* frees a case that failed part way */
    tcase_add_loop_test(tc, full, 0, N_SHAPES);
    tcase_add_loop_test(tc, causal, 0, N_SHAPES);
    tcase_add_loop_test(tc, baseline_batching, 0, N_BASELINE_CASES);
    tcase_add_loop_test(tc, version2_features, 0, N_FEATURE_CASES);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    attn_ref_destroy(run.ref);
    return failed ? 1 : 0;
}
