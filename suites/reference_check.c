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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "harness.h"
#include "reference.h"
#include "verdict.h"

static attn_dtype dtype;
static int head_dim;
static attn_reference *ref;

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

static void check_shape(int sq, int sk, int causal, int batch, int heads, attn_layout layout) {
    int d = head_dim;
    attn_strides stq = attn_make_strides(layout, batch, heads, sq, d);
    attn_strides stk = attn_make_strides(layout, batch, heads, sk, d);
    size_t nq = (size_t)stq.extent, nk = (size_t)stk.extent, no = (size_t)batch * heads * sq * d;
    size_t rows = (size_t)batch * heads * sq;
    uint16_t *hq = malloc(nq * 2), *hk = malloc(nk * 2), *hv = malloc(nk * 2);
    float *fq = malloc(nq * 4), *fk = malloc(nk * 4), *fv = malloc(nk * 4); /* BHSD */
    double *xo = malloc(no * 8), *xl = malloc(rows * 8);
    float *go = malloc(no * 4), *ro = malloc(no * 4), *gl = malloc(rows * 4);
    ck_assert(hq && hk && hv && fq && fk && fv && xo && xl && go && ro && gl);

    char name[128];
    snprintf(name, sizeof name, "reference/%s/d%d/q%dk%d/%d/b%dh%d/%s", attn_dtype_name(dtype), d, sq, sk,
             causal, batch, heads, attn_layout_name(layout));
    attn_rng rng;
    attn_rng_init(&rng, attn_seed_from_name(name));
    uint16_t *h16[3] = {hq, hk, hv};
    float *f32[3] = {fq, fk, fv};
    double vmax = 0;
    for (int t = 0; t < 3; t++) {
        int seq = t == 0 ? sq : sk;
        attn_strides *st = t == 0 ? &stq : &stk;
        size_t n = 0;
        for (int b = 0; b < batch; b++)
            for (int h = 0; h < heads; h++)
                for (int s = 0; s < seq; s++)
                    for (int e = 0; e < d; e++) {
                        uint16_t bits = attn_to_dtype(dtype, (float)attn_rng_normal(&rng));
                        h16[t][attn_offset(st, b, h, s, e)] = bits;
                        f32[t][n++] = attn_from_dtype(dtype, bits);
                        if (t == 2) vmax = fmax(vmax, fabs(f32[t][n - 1]));
                    }
    }
    double scale = 1.0 / sqrt((double)d);
    attn_oracle_forward(batch, heads, sq, sk, d, causal, (double)(float)scale, fq, fk, fv, xo, xl);

    void *dq, *dk, *dv;
    float *dgo, *dro, *dgl;
    CK_CUDA(cudaMalloc(&dq, nq * 2));
    CK_CUDA(cudaMalloc(&dk, nk * 2));
    CK_CUDA(cudaMalloc(&dv, nk * 2));
    CK_CUDA(cudaMalloc((void **)&dgo, no * 4));
    CK_CUDA(cudaMalloc((void **)&dro, no * 4));
    CK_CUDA(cudaMalloc((void **)&dgl, rows * 4));
    CK_CUDA(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
    CK_CUDA(cudaMemcpy(dk, hk, nk * 2, cudaMemcpyHostToDevice));
    CK_CUDA(cudaMemcpy(dv, hv, nk * 2, cudaMemcpyHostToDevice));
    attn_fwd_params p = {
        .dtype = dtype, .batch = batch, .heads = heads, .seqlen_q = sq, .seqlen_k = sk,
        .head_dim = d, .causal = causal, .softmax_scale = (float)scale, .q = dq, .k = dk, .v = dv,
        .q_batch_stride = stq.batch, .q_head_stride = stq.head, .q_row_stride = stq.row,
        .k_batch_stride = stk.batch, .k_head_stride = stk.head, .k_row_stride = stk.row,
        .v_batch_stride = stk.batch, .v_head_stride = stk.head, .v_row_stride = stk.row,
    };
    char err[1024];
    /* the baseline first, into O (the dtype, through Q's strides) */
    void *dbo;
    uint16_t *bo = malloc(nq * 2);
    ck_assert(bo);
    CK_CUDA(cudaMalloc(&dbo, nq * 2));
    CK_CUDA(cudaMemset(dbo, 0xff, nq * 2)); /* NaN-poisoned: every element must be written */
    p.o = dbo, p.o_batch_stride = stq.batch, p.o_head_stride = stq.head, p.o_row_stride = stq.row;
    ck_assert_msg(!attn_ref_baseline(ref, &p, 0, err, sizeof err), "%s", err);
    CK_CUDA(cudaDeviceSynchronize());
    CK_CUDA(cudaMemcpy(bo, dbo, nq * 2, cudaMemcpyDeviceToHost));
    ck_assert_msg(!attn_ref_forward(ref, &p, ATTN_REF_GOLDEN, dgo, dgl, 0, err, sizeof err), "%s", err);
    ck_assert_msg(!attn_ref_forward(ref, &p, ATTN_REF_LOWP, dro, NULL, 0, err, sizeof err), "%s", err);
    CK_CUDA(cudaDeviceSynchronize());
    CK_CUDA(cudaMemcpy(go, dgo, no * 4, cudaMemcpyDeviceToHost));
    CK_CUDA(cudaMemcpy(ro, dro, no * 4, cudaMemcpyDeviceToHost));
    CK_CUDA(cudaMemcpy(gl, dgl, rows * 4, cudaMemcpyDeviceToHost));

    double xmax = 0, gerr = 0, rerr = 0;
    size_t gworst = 0, rworst = 0;
    for (size_t i = 0; i < no; i++) xmax = fmax(xmax, fabs(xo[i]));
    for (size_t i = 0; i < no; i++) {
        double eg = fabs(go[i] - xo[i]), er = fabs(ro[i] - xo[i]);
        if (!(eg <= gerr)) gerr = eg, gworst = i; /* NaN is taken as the worst */
        if (!(er <= rerr)) rerr = er, rworst = i;
        size_t row = i / d;
        if (isinf(xl[row])) {
            ck_assert_msg(go[i] == 0.0f && ro[i] == 0.0f,
                          "%s: row %zu sees no key but O is G=%g R=%g", name, row, go[i], ro[i]);
        }
    }
    double gbound = 1e-5 * fmax(1.0, xmax);
    double rbound = 2 * attn_dtype_step(dtype, xmax) + ldexp(vmax, dtype == ATTN_BF16 ? -7 : -10);
    ck_assert_msg(gerr <= gbound, "%s: golden O off the float64 oracle: max err %.3g > %.3g at %zu (G=%.8g X=%.8g)",
                  name, gerr, gbound, gworst, go[gworst], xo[gworst]);
    ck_assert_msg(rerr <= rbound, "%s: low-precision O off the oracle: max err %.3g > %.3g at %zu (R=%.8g X=%.8g)",
                  name, rerr, rbound, rworst, ro[rworst], xo[rworst]);
    double berr = 0;
    size_t bworst = 0;
    float bval = 0;
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++)
            for (int s = 0; s < sq; s++)
                for (int e = 0; e < d; e++) {
                    size_t i = (((size_t)b * heads + h) * sq + s) * d + e; /* the oracle's BHSD index */
                    float o = attn_from_dtype(dtype, bo[attn_offset(&stq, b, h, s, e)]);
                    double eb = fabs(o - xo[i]);
                    if (!(eb <= berr)) berr = eb, bworst = i, bval = o;
                }
    ck_assert_msg(berr <= rbound, "%s: the baseline's O off the oracle: max err %.3g > %.3g at %zu (O=%.8g X=%.8g)",
                  name, berr, rbound, bworst, bval, xo[bworst]);
    cudaFree(dbo);
    free(bo);
    for (size_t r = 0; r < rows; r++) {
        if (isinf(xl[r])) {
            ck_assert_msg(isinf(gl[r]) && gl[r] < 0, "%s: row %zu sees no key, LSE %g (want -inf)", name, r, gl[r]);
        } else {
            double e = fabs(gl[r] - xl[r]);
            ck_assert_msg(e <= 1e-5 * (1 + fabs(xl[r])), "%s: golden LSE row %zu: %.8g vs oracle %.8g",
                          name, r, gl[r], xl[r]);
        }
    }
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dgo), cudaFree(dro), cudaFree(dgl);
    free(hq), free(hk), free(hv), free(fq), free(fk), free(fv), free(xo), free(xl);
    free(go), free(ro), free(gl);
}

START_TEST(full) { check_shape(shapes[_i][0], shapes[_i][1], 0, BATCH, HEADS, ATTN_LAYOUT_BSHD); }
END_TEST
START_TEST(causal) { check_shape(shapes[_i][0], shapes[_i][1], 1, BATCH, HEADS, ATTN_LAYOUT_BSHD); }
END_TEST
/* each way the baseline batches its GEMMs, on a tail shape, causal with S_q > S_k */
START_TEST(baseline_batching) {
    const int *c = baseline_cases[_i];
    check_shape(17, 17, 0, c[0], c[1], (attn_layout)c[2]);
    check_shape(130, 70, 1, c[0], c[1], (attn_layout)c[2]);
}
END_TEST

int main(int argc, char **argv) {
    if (argc != 5 || strcmp(argv[1], "--dtype") || attn_dtype_parse(argv[2], &dtype) ||
        strcmp(argv[3], "--head-dim") || (head_dim = atoi(argv[4])) <= 0) {
        fprintf(stderr, "usage: %s --dtype fp16|bf16 --head-dim D\n", argv[0]);
        return 2;
    }
    char err[1024];
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    if (attn_ref_create(&ref, err, sizeof err)) {
        printf("FAILED: cannot create the reference: %s\n", err);
        return 1;
    }
    Suite *s = suite_create("reference_vs_oracle");
    TCase *tc = tcase_create("oracle");
    tcase_add_loop_test(tc, full, 0, N_SHAPES);
    tcase_add_loop_test(tc, causal, 0, N_SHAPES);
    tcase_add_loop_test(tc, baseline_batching, 0, N_BASELINE_CASES);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    attn_ref_destroy(ref);
    return failed ? 1 : 0;
}
