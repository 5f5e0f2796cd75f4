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
 * The backward (attn_ref_backward), on every case, from dO read through strides of its own
 * (another layout than O's, rows padded) and the oracle's O rounded to the dtype as the given
 * O; X the oracle's (attn_oracle_backward) dQ, dK or dV, u = 2^-(m+1) the dtype's unit
 * roundoff:
 *   golden:     max|G - X| <= 1e-5 * max(1, max|X|), as O. Its float32 sums of n <= 320
 *               terms (head dims, keys, queries) err by about sqrt(n) * 2^-24 of the terms'
 *               size: dP = dO.V and D = rowsum(P * dP) (|dP| ~ sqrt(head_dim_v) at unit
 *               inputs) by ~1e-6, and so dS = P * (dP - D), whose cancellation adds no error
 *               of its own, by ~1e-6 P; dQ, dK, dV, sums of such terms times inputs of size
 *               ~1 and the scale 1/sqrt(head_dim), by ~1e-7: two orders below the bound.
 *   low-prec:   |R - X| <= 2^-m * B + 2 * step(|X|) + the golden bound, element by element,
 *               with B the first-order bound of what the twin rounds, summed over the visible
 *               keys j of a query i (float64, from the oracle's LSE): the twin's dS_ij is off
 *               by at most u * e_ij, e_ij = P_ij * cap'_ij * (2|dP_ij - D_i| + |dP_ij| +
 *               sum_d |dO_id O_id|) (dS's and P's rounding, dP's, and D_i taken from O in
 *               the dtype), so dQ_i by u * scale * sum_j e_ij |K_j|, dK_j by u * scale *
 *               sum_i e_ij |Q_i| and dV_j (P's rounding) by u * sum_i P_ij |dO_i|; twice u
 *               (2^-m) covers the second-order terms, 2 steps the final rounding. And the
 *               twin is in the dtype, and not just the golden rounded at the end: some
 *               element of dQ, dK, dV is off the oracle by more than a step (+ the golden
 *               bound), which the final rounding alone (half a step) never is.
 *   structural zeros, exactly 0 in both: rows past a sequence's lengths, the dQ of a query
 *               that sees no key, the dK and dV of a key that no query sees.
 * Packed batches (cu_seqlens, a dense cache with seqused_k) check the forward and the
 * backward alike, over each sequence's own lengths.
 * Exit 0 pass, 1 fail, 77 no GPU. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "args.h"
#include "device_memory.h"
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
enum { MAX_BATCH = 8 }; /* sequences of a case */

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

/* The gradients, indexed by grad_id: [batch][heads][max_seqlen_q][head_dim] (dQ),
 * [batch][heads_k][max_seqlen_k][head_dim] (dK), [..][head_dim_v] (dV). */
enum grad_id { G_DQ, G_DK, G_DV, N_GRADS };
static const char *const grad_names[N_GRADS] = {"dQ", "dK", "dV"};

/* A case's backward: dO on the GPU (the dtype, strides of its own) and on the host (the dtype
 * through those strides, and widened to float64 BHSD for the oracle); the golden and
 * low-precision gradients (device, then host), the oracle's, and the twin's bound B. */
struct grad_case {
    void *dout;             /* device, st_do.extent elements */
    float *dev[N_GRADS];    /* device outputs of attn_ref_backward */
    int64_t st_do[3];       /* dO's batch, head, row strides */
    size_t n_do, n[N_GRADS];
    uint16_t *hdo, *ho;     /* host dO; O as given (the oracle's, rounded), through O's strides */
    double *xdo;            /* BHSD over max_seqlen_q: the oracle's dout */
    double *x[N_GRADS], *bound[N_GRADS];
    float *g[N_GRADS], *r[N_GRADS];
};

/* One oracle case: its shape, its problem on the GPU (harness/gpu_problem.h: inputs, O, the
 * references), the inputs copied to the host in the dtype (through the layout's strides) and
 * widened to float (BHSD over the longest lengths, the oracle's input), the oracle's, the GPU
 * reference's and the baseline's outputs, and the backward's. It lives in the run's `current`
 * so that the checked teardown can free it after a failed assertion (CK_NOFORK: the test
 * longjmps out). Fields keep the names the checks used to print. */
struct oracle_case {
    attn_dtype dtype;
    int sq, sk, causal, batch, heads, d; /* packed: sq and sk are the arrays' rows (the longest) */
    features f;
    int baseline; /* a version-1 case: the baseline (which takes only those) is checked too */
    int packed;   /* a packed batch: sequences of lq[b] queries and lk[b] used keys */
    int lq[MAX_BATCH], lk[MAX_BATCH];
    attn_layout layout;
    attn_strides stq, stk, stv, sto;
    size_t nq, nk, nv, no, rows;
    char name[160];
    double scale, vmax; /* softmax scale; max|V|, for the low-precision bound */
    attn_gpu_problem x;
    uint16_t *hq, *hk, *hv, *bo;
    float *fq, *fk, *fv; /* BHSD */
    double *xo, *xl;
    float *go, *ro, *gl;
    struct grad_case gr;
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

/* The backward's buffers (CUDA calls only for those allocated). */
static void free_grads(struct grad_case *gr) {
    if (gr->dout) attn_dev_free(gr->dout);
    for (int g = 0; g < N_GRADS; g++) {
        if (gr->dev[g]) attn_dev_free(gr->dev[g]);
        free(gr->x[g]), free(gr->bound[g]), free(gr->g[g]), free(gr->r[g]);
    }
    free(gr->hdo), free(gr->ho), free(gr->xdo);
}

/* Frees whatever c holds (the problem only when it was built, so that a second call, or the
 * teardown after a passing case, makes no CUDA call) and zeroes it. */
static void free_case(struct oracle_case *c) {
    if (c->x.buf[ATTN_T_Q]) attn_gpu_problem_free(&c->x);
    free(c->bo);
    free(c->hq), free(c->hk), free(c->hv), free(c->fq), free(c->fk), free(c->fv), free(c->xo), free(c->xl);
    free(c->go), free(c->ro), free(c->gl);
    free_grads(&c->gr);
    memset(c, 0, sizeof *c);
}

static void teardown(void) { free_case(&the_run->current); }

/* The features' part of a case's name. */
static void name_features(struct oracle_case *c) {
    const features f = c->f;
    size_t n = strlen(c->name);
    snprintf(c->name + n, sizeof c->name - n, "/kv%d/v%d/w%d_%d/cap%g", f.heads_k, f.dv, f.window_left,
             f.window_right, f.softcap);
}

/* The shape and its name. */
static void case_init(const ref_check *rc, struct oracle_case *c, int sq, int sk, int causal, int batch,
                      int heads, attn_layout layout, features f) {
    memset(c, 0, sizeof *c);
    const attn_dtype dtype = c->dtype = rc->dtype;
    int d = rc->head_dim;
    c->sq = sq, c->sk = sk, c->causal = causal, c->batch = batch, c->heads = heads, c->d = d, c->f = f;
    c->layout = layout;
    for (int b = 0; b < batch && b < MAX_BATCH; b++) c->lq[b] = sq, c->lk[b] = sk;
    snprintf(c->name, sizeof c->name, "reference/%s/d%d/q%dk%d/%d/b%dh%d/%s", attn_dtype_name(dtype), d, sq, sk,
             causal, batch, heads, attn_layout_name(layout));
    c->baseline = f.heads_k == heads && f.dv == d && f.window_left < 0 && f.window_right < 0 && f.softcap == 0;
    if (!c->baseline) name_features(c);
    c->scale = 1.0 / sqrt((double)d);
}

/* The problem described by d on the GPU, inputs from the seed of the case's name; its
 * strides and sizes (packed: the arrays' rows are the longest lengths), the host buffers. */
static void make_problem(struct oracle_case *c, const attn_problem_desc *d) {
    char err[1024];
    ck_assert_msg(!attn_gpu_problem_build(&c->x, d, 0, err, sizeof err), "%s: %s", c->name, err);
    c->stq = c->x.st[ATTN_T_Q], c->stk = c->x.st[ATTN_T_K], c->stv = c->x.st[ATTN_T_V], c->sto = c->x.st[ATTN_T_O];
    c->sq = c->x.p.seqlen_q, c->sk = c->x.p.seqlen_k;
    size_t nq = (size_t)c->stq.extent, nk = (size_t)c->stk.extent, nv = (size_t)c->stv.extent;
    size_t no = c->x.o_elems, rows = c->x.rows;
    c->nq = nq, c->nk = nk, c->nv = nv, c->no = no, c->rows = rows;
    const size_t kv_rows = (size_t)c->batch * c->f.heads_k * c->sk; /* BHSD, as the oracle reads them */
    uint16_t *hq = malloc(nq * 2), *hk = malloc(nk * 2), *hv = malloc(nv * 2);
    float *fqa = calloc(rows * c->d, 4), *fka = calloc(kv_rows * c->d, 4), *fva = calloc(kv_rows * c->f.dv, 4);
    double *xo = calloc(no, 8), *xl = calloc(rows, 8);
    float *go = malloc(no * 4), *ro = malloc(no * 4), *gl = malloc(rows * 4);
    /* into c before the assertion, so that the teardown frees those that were allocated */
    c->hq = hq, c->hk = hk, c->hv = hv, c->fq = fqa, c->fk = fka, c->fv = fva;
    c->xo = xo, c->xl = xl, c->go = go, c->ro = ro, c->gl = gl;
    ck_assert(hq && hk && hv && fqa && fka && fva && xo && xl && go && ro && gl);
}

/* A dense case's problem: every tensor in the case's layout. */
static void make_dense_problem(struct oracle_case *c) {
    attn_problem_desc d = attn_problem_dense(c->dtype, c->batch, c->heads, c->sq, c->sk, c->d, c->causal, c->name);
    for (int t = 0; t < 4; t++) d.layout[t] = c->layout;
    d.heads_k = c->f.heads_k, d.head_dim_v = c->f.dv, d.softcap = (float)c->f.softcap;
    d.window_left = c->f.window_left, d.window_right = c->f.window_right;
    make_problem(c, &d);
}

/* Where element (b, h, s, e) is in a tensor of batch, head and row strides st, its rows packed
 * by cu (a host copy of cu_seqlens; NULL: dense): elements from the tensor's start. */
static int64_t elem_at(const int32_t *cu, const int64_t st[3], int b, int h, int s, int e) {
    return (cu ? (int64_t)cu[b] * st[2] : (int64_t)b * st[0]) + (int64_t)h * st[1] + (int64_t)s * st[2] + e;
}

/* Tensor t's strides as the problem gives them, and the cu_seqlens that packs its rows. */
static const int32_t *strides_of(const struct oracle_case *c, attn_tensor_id t, int64_t st[3]) {
    const attn_fwd_params *p = &c->x.p;
    const int64_t all[4][3] = {{p->q_batch_stride, p->q_head_stride, p->q_row_stride},
                               {p->k_batch_stride, p->k_head_stride, p->k_row_stride},
                               {p->v_batch_stride, p->v_head_stride, p->v_row_stride},
                               {p->o_batch_stride, p->o_head_stride, p->o_row_stride}};
    memcpy(st, all[t], sizeof all[t]);
    return t == ATTN_T_K || t == ATTN_T_V ? c->x.host.cu_seqlens_k : c->x.host.cu_seqlens_q;
}

/* Q, K, V as the problem holds them: copied to the host in the dtype through the layout's
 * strides, and each sequence's rows widened to float (BHSD, zero past its lengths) for the
 * oracle. */
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
        int64_t st[3];
        const int32_t *cu = strides_of(c, (attn_tensor_id)t, st);
        int rows = t == 0 ? c->sq : c->sk, heads = t == 0 ? c->heads : c->f.heads_k, dim = t == 2 ? c->f.dv : c->d;
        for (int b = 0; b < c->batch; b++)
            for (int h = 0; h < heads; h++)
                for (int s = 0; s < (t == 0 ? c->lq[b] : c->lk[b]); s++)
                    for (int e = 0; e < dim; e++) {
                        size_t n = (((size_t)b * heads + h) * rows + s) * dim + e;
                        f32[t][n] = attn_from_dtype(dtype, h16[t][elem_at(cu, st, b, h, s, e)]);
                        if (t == 2) vmax = fmax(vmax, fabs(f32[t][n]));
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

/* Whether row `row` of the references' [batch][heads][max_seqlen_q] is one of its sequence's
 * queries (the reference leaves the others alone). */
static int query_row(const struct oracle_case *c, size_t row) {
    return (int)(row % (size_t)c->sq) < c->lq[row / ((size_t)c->sq * c->heads)];
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
        size_t row = i / c->f.dv;
        if (!query_row(c, row)) continue;
        double eg = fabs(go[i] - xo[i]), er = fabs(ro[i] - xo[i]);
        if (!(eg <= gerr)) gerr = eg, gworst = i; /* NaN is taken as the worst */
        if (!(er <= rerr)) rerr = er, rworst = i;
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
        if (!query_row(c, r)) continue;
        if (isinf(xl[r])) {
            ck_assert_msg(isinf(gl[r]) && gl[r] < 0, "%s: row %zu sees no key, LSE %g (want -inf)", c->name, r, gl[r]);
        } else {
            double e = fabs(gl[r] - xl[r]);
            ck_assert_msg(e <= 1e-5 * (1 + fabs(xl[r])), "%s: golden LSE row %zu: %.8g vs oracle %.8g",
                          c->name, r, gl[r], xl[r]);
        }
    }
}

/* ---- the backward ---------------------------------------------------------------------- */

/* Whether query i of sequence b sees key j: attn_abi.h's mask, restated (bottom-right
 * aligned: d = j - (i + used_k - q_len), -window_left <= d <= window_right; causal: right 0). */
static int sees(const struct oracle_case *c, int b, int i, int j) {
    const long long d = j - (i + (long long)c->lk[b] - c->lq[b]);
    const int right = c->causal ? 0 : c->f.window_right, left = c->f.window_left;
    return i < c->lq[b] && j < c->lk[b] && (left < 0 || d >= -left) && (right < 0 || d <= right);
}

/* Whether row s of sequence b of gradient g is 0 whatever the values: past the sequence's
 * lengths, a query that sees no key (dQ), or a key that no query sees (dK, dV). */
static int zero_row(const struct oracle_case *c, int g, int b, int s) {
    const int n = g == G_DQ ? c->lk[b] : c->lq[b];
    for (int t = 0; t < n; t++)
        if (g == G_DQ ? sees(c, b, s, t) : sees(c, b, t, s)) return 0;
    return 1;
}

static void grad_shape(const struct oracle_case *c, int g, int *heads, int *rows, int *dim) {
    *heads = g == G_DQ ? c->heads : c->f.heads_k;
    *rows = g == G_DQ ? c->sq : c->sk;
    *dim = g == G_DV ? c->f.dv : c->d;
}

/* "(b=1, h=2, s=3, d=4)" for element i of gradient g. */
static const char *grad_where(const struct oracle_case *c, int g, size_t i, char *buf, size_t len) {
    int heads, rows, dim;
    grad_shape(c, g, &heads, &rows, &dim);
    const size_t row = i / dim;
    snprintf(buf, len, "(b=%zu, h=%zu, s=%zu, d=%zu)", row / ((size_t)heads * rows), row / rows % heads, row % rows,
             i % dim);
    return buf;
}

/* dO with strides of its own, not O's (dense: the other layout, rows padded; packed: rows
 * padded by 8 elements), NaN between its rows, values from the case's seed; copied back and
 * widened (BHSD over the longest queries, zero past a sequence's) as the oracle's dout. */
static void make_dout(struct oracle_case *c) {
    struct grad_case *gr = &c->gr;
    const int H = c->heads, dv = c->f.dv;
    attn_tensor_view v = attn_gpu_problem_view(&c->x, ATTN_T_O); /* packed: one batch of all rows */
    if (c->packed) {
        v.row_stride = (int64_t)H * dv + 8, v.head_stride = dv, v.batch_stride = 0;
        gr->n_do = (size_t)v.seq * v.row_stride;
    } else {
        const attn_layout l = c->layout == ATTN_LAYOUT_BHSD ? ATTN_LAYOUT_BSHD_PADDED : ATTN_LAYOUT_BHSD_PADDED;
        const attn_strides st = attn_make_strides(l, c->batch, H, c->sq, dv);
        v.batch_stride = st.batch, v.head_stride = st.head, v.row_stride = st.row;
        gr->n_do = (size_t)st.extent;
    }
    /* as the problem's O: packed without cu_seqlens_q (every sequence as long), max_seqlen_q rows apart */
    gr->st_do[0] = !c->packed ? v.batch_stride : c->x.p.cu_seqlens_q ? 0 : (int64_t)c->sq * v.row_stride;
    gr->st_do[1] = v.head_stride, gr->st_do[2] = v.row_stride;
    CK_CUDA(attn_dev_malloc(&gr->dout, gr->n_do * 2));
    CK_CUDA(cudaMemset(gr->dout, ATTN_POISON, gr->n_do * 2));
    CK_CUDA(attn_fill_normal_view(gr->dout, c->dtype, &v, attn_seed_from_name(c->name) + 7, 1.0f, 0));
    gr->hdo = malloc(gr->n_do * 2), gr->xdo = calloc(c->no, 8);
    ck_assert(gr->hdo && gr->xdo);
    CK_CUDA(cudaMemcpy(gr->hdo, gr->dout, gr->n_do * 2, cudaMemcpyDeviceToHost));
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < H; h++)
            for (int s = 0; s < c->lq[b]; s++)
                for (int e = 0; e < dv; e++)
                    gr->xdo[(((size_t)b * H + h) * c->sq + s) * dv + e] =
                        attn_from_dtype(c->dtype, gr->hdo[elem_at(c->x.host.cu_seqlens_q, gr->st_do, b, h, s, e)]);
}

/* Element i of the O the backward is given: the oracle's, rounded to the dtype. */
static double given_o(const struct oracle_case *c, size_t i) {
    return attn_from_dtype(c->dtype, attn_to_dtype(c->dtype, (float)c->xo[i]));
}

/* The given O into the problem's O at every sequence's rows (the rest stays as it was). */
static void give_o(struct oracle_case *c) {
    const size_t n = (size_t)c->sto.extent;
    void *o = attn_gpu_problem_data(&c->x, ATTN_T_O);
    uint16_t *ho = c->gr.ho = malloc(n * 2);
    ck_assert(ho);
    CK_CUDA(cudaMemcpy(ho, o, n * 2, cudaMemcpyDeviceToHost));
    int64_t st[3];
    const int32_t *cu = strides_of(c, ATTN_T_O, st);
    const int H = c->heads, dv = c->f.dv;
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < H; h++)
            for (int s = 0; s < c->lq[b]; s++)
                for (int e = 0; e < dv; e++)
                    ho[elem_at(cu, st, b, h, s, e)] =
                        attn_to_dtype(c->dtype, (float)c->xo[(((size_t)b * H + h) * c->sq + s) * dv + e]);
    CK_CUDA(cudaMemcpy(o, ho, n * 2, cudaMemcpyHostToDevice));
}

/* The golden and the low-precision backward into NaN-poisoned outputs (every element must be
 * written), each copied back. */
static void run_backward(attn_reference *ref, struct oracle_case *c) {
    struct grad_case *gr = &c->gr;
    attn_bwd_params bp;
    memset(&bp, 0, sizeof bp);
    bp.fwd = &c->x.p, bp.dout = gr->dout;
    bp.do_batch_stride = gr->st_do[0], bp.do_head_stride = gr->st_do[1], bp.do_row_stride = gr->st_do[2];
    for (int g = 0; g < N_GRADS; g++) {
        int heads, rows, dim;
        grad_shape(c, g, &heads, &rows, &dim);
        gr->n[g] = (size_t)c->batch * heads * rows * dim;
        CK_CUDA(attn_dev_malloc((void **)&gr->dev[g], gr->n[g] * 4));
        gr->g[g] = malloc(gr->n[g] * 4), gr->r[g] = malloc(gr->n[g] * 4);
        gr->x[g] = calloc(gr->n[g], 8), gr->bound[g] = calloc(gr->n[g], 8);
        ck_assert(gr->g[g] && gr->r[g] && gr->x[g] && gr->bound[g]);
    }
    char err[1024];
    for (int lowp = 0; lowp < 2; lowp++) {
        for (int g = 0; g < N_GRADS; g++) CK_CUDA(cudaMemset(gr->dev[g], 0xff, gr->n[g] * 4));
        ck_assert_msg(!attn_ref_backward(ref, &bp, lowp ? ATTN_REF_LOWP : ATTN_REF_GOLDEN, gr->dev[G_DQ],
                                         gr->dev[G_DK], gr->dev[G_DV], 0, err, sizeof err),
                      "%s: %s", c->name, err);
        CK_CUDA(cudaDeviceSynchronize());
        for (int g = 0; g < N_GRADS; g++)
            CK_CUDA(cudaMemcpy(lowp ? gr->r[g] : gr->g[g], gr->dev[g], gr->n[g] * 4, cudaMemcpyDeviceToHost));
    }
}

/* Query i of head h of sequence b: its share of the twin's bound B (the file's comment), from
 * the oracle's LSE in float64. w: scratch for 3 * max_seqlen_k doubles. */
static void bound_query(const struct oracle_case *c, int b, int h, int i, double *w) {
    const int H = c->heads, HK = c->f.heads_k, D = c->d, DV = c->f.dv, sk = c->lk[b];
    const size_t qrow = ((size_t)b * H + h) * c->sq + i, kv0 = ((size_t)b * HK + h / (H / HK)) * c->sk;
    const float *q = c->fq + qrow * D, *k = c->fk + kv0 * D, *v = c->fv + kv0 * DV;
    const double *dout = c->gr.xdo + qrow * DV, lse = c->xl[qrow];
    const double scale = (double)(float)c->scale, cap = (double)(float)c->f.softcap;
    double *bq = c->gr.bound[G_DQ] + qrow * D, *bk = c->gr.bound[G_DK] + kv0 * D, *bv = c->gr.bound[G_DV] + kv0 * DV;
    double *p = w, *dp = w + sk, *dcap = w + 2 * sk; /* P_ij, dP_ij, cap'_ij */
    double dsum = 0, odo = 0;                        /* D_i; sum_d |dO_id O_id| over the given O */
    for (int e = 0; e < DV; e++) odo += fabs(dout[e] * given_o(c, qrow * DV + e));
    for (int j = 0; j < sk; j++) {
        p[j] = 0;
        if (!sees(c, b, i, j)) continue;
        double s = 0, a = 0;
        for (int e = 0; e < D; e++) s += (double)q[e] * k[(size_t)j * D + e];
        s *= scale, dcap[j] = 1;
        if (cap > 0) {
            const double t = tanh(s / cap);
            s = cap * t, dcap[j] = 1 - t * t;
        }
        for (int e = 0; e < DV; e++) a += dout[e] * v[(size_t)j * DV + e];
        p[j] = exp(s - lse), dp[j] = a, dsum += p[j] * a;
    }
    for (int j = 0; j < sk; j++) {
        if (p[j] == 0) continue;
        const double err_ds = p[j] * dcap[j] * (2 * fabs(dp[j] - dsum) + fabs(dp[j]) + odo);
        for (int e = 0; e < D; e++) {
            bq[e] += scale * err_ds * fabs(k[(size_t)j * D + e]);
            bk[(size_t)j * D + e] += scale * err_ds * fabs(q[e]);
        }
        for (int e = 0; e < DV; e++) bv[(size_t)j * DV + e] += p[j] * fabs(dout[e]);
    }
}

static void lowp_bounds(struct oracle_case *c) {
    double *w = malloc(3 * (size_t)c->sk * sizeof(double) + 1);
    ck_assert(w);
    for (int b = 0; b < c->batch; b++)
        for (int h = 0; h < c->heads; h++)
            for (int i = 0; i < c->lq[b]; i++)
                if (!isinf(c->xl[((size_t)b * c->heads + h) * c->sq + i])) bound_query(c, b, h, i, w);
    free(w);
}

/* Every element of gradient g: finite, its structural zeros exactly 0, golden within its
 * bound, low-precision in the dtype and within its bound. *excess: the largest amount by
 * which a low-precision element is off the oracle beyond a step (and the golden bound). */
static void check_grad(const struct oracle_case *c, int g, double *excess) {
    const struct grad_case *gr = &c->gr;
    const attn_dtype dtype = c->dtype;
    const double *x = gr->x[g], *bd = gr->bound[g];
    const float *G = gr->g[g], *R = gr->r[g];
    int heads, rows, dim;
    grad_shape(c, g, &heads, &rows, &dim);
    double xmax = 0, gerr = 0, rratio = 0, rbound = 0;
    size_t gworst = 0, rworst = 0;
    char at[96];
    for (size_t i = 0; i < gr->n[g]; i++) xmax = fmax(xmax, fabs(x[i]));
    const double gtol = 1e-5 * fmax(1.0, xmax), twice_u = ldexp(1.0, dtype == ATTN_BF16 ? -7 : -10);
    for (size_t row = 0; row < gr->n[g] / dim; row++) {
        const int zero = zero_row(c, g, (int)(row / ((size_t)heads * rows)), (int)(row % rows));
        for (size_t i = row * dim; i < (row + 1) * dim; i++) {
            if (!isfinite(G[i]) || !isfinite(R[i]))
                ck_abort_msg("%s: %s %s not written or not finite: G=%g R=%g", c->name, grad_names[g],
                             grad_where(c, g, i, at, sizeof at), G[i], R[i]);
            if (zero && (G[i] != 0.0f || R[i] != 0.0f))
                ck_abort_msg("%s: %s %s is 0 whatever the inputs (past the lengths, or masked out) but G=%g R=%g",
                             c->name, grad_names[g], grad_where(c, g, i, at, sizeof at), G[i], R[i]);
            if (attn_from_dtype(dtype, attn_to_dtype(dtype, R[i])) != R[i])
                ck_abort_msg("%s: low-precision %s %s = %.9g is not a %s value", c->name, grad_names[g],
                             grad_where(c, g, i, at, sizeof at), R[i], attn_dtype_name(dtype));
            const double eg = fabs(G[i] - x[i]), er = fabs(R[i] - x[i]), step = attn_dtype_step(dtype, x[i]);
            const double rb = twice_u * bd[i] + 2 * step + gtol;
            if (eg > gerr) gerr = eg, gworst = i;
            if (er / rb > rratio) rratio = er / rb, rworst = i, rbound = rb;
            *excess = fmax(*excess, er - step - gtol);
        }
    }
    ck_assert_msg(gerr <= gtol, "%s: golden %s off the float64 oracle: max err %.3g > %.3g at %s (G=%.8g X=%.8g)",
                  c->name, grad_names[g], gerr, gtol, grad_where(c, g, gworst, at, sizeof at), G[gworst], x[gworst]);
    ck_assert_msg(rratio <= 1, "%s: low-precision %s off the oracle: err %.3g > its bound %.3g at %s (R=%.8g X=%.8g)",
                  c->name, grad_names[g], rratio * rbound, rbound, grad_where(c, g, rworst, at, sizeof at),
                  R[rworst], x[rworst]);
}

/* The case's backward: dO, the given O, both variants, the oracle, the checks. */
static void check_backward(ref_check *rc, struct oracle_case *c, const attn_oracle_problem *pr) {
    struct grad_case *gr = &c->gr;
    make_dout(c);
    give_o(c);
    run_backward(rc->ref, c);
    ck_assert_msg(attn_oracle_backward(pr, c->fq, c->fk, c->fv, gr->xdo, gr->x[G_DQ], gr->x[G_DK], gr->x[G_DV]) == 0,
                  "the oracle refused the problem (an invalid case: see attn_abi.h)");
    lowp_bounds(c);
    double excess = -INFINITY;
    for (int g = 0; g < N_GRADS; g++) check_grad(c, g, &excess);
    ck_assert_msg(excess > 0,
                  "%s: the low-precision dQ, dK, dV are within a step of the oracle everywhere (by %.3g at most): "
                  "rounded at the end only, not where a naive fp16/bf16 backward rounds",
                  c->name, excess);
}

/* ---- cases ------------------------------------------------------------------------------ */

/* The oracle's view of the case: every sequence's own lengths, the arrays' rows. */
static attn_oracle_problem oracle_problem(const struct oracle_case *c) {
    const features f = c->f;
    attn_oracle_problem pr = {.batch = c->batch, .heads = c->heads, .heads_k = f.heads_k, .head_dim = c->d,
                              .head_dim_v = f.dv, .causal = c->causal, .window_left = f.window_left,
                              .window_right = f.window_right, .softmax_scale = (double)(float)c->scale,
                              .softcap = (double)(float)f.softcap, .seqlen_q = c->lq, .seqlen_k = c->lk,
                              .max_seqlen_q = c->sq, .max_seqlen_k = c->sk};
    return pr;
}

/* A built case: its forward and its backward against the oracle. */
static void check_built(ref_check *rc, struct oracle_case *c) {
    fill_inputs(c);
    attn_oracle_problem pr = oracle_problem(c);
    ck_assert_msg(attn_oracle_forward(&pr, c->fq, c->fk, c->fv, c->xo, c->xl) == 0,
                  "the oracle refused the problem (an invalid case: see attn_abi.h)");
    run_gpu(rc->ref, c);
    double rbound = check_o(c);
    if (c->baseline) check_baseline_o(c, rbound);
    check_lse(c);
    check_backward(rc, c, &pr);
    free_case(c);
}

static void check_case(ref_check *rc, int sq, int sk, int causal, int batch, int heads, attn_layout layout,
                       features f) {
    struct oracle_case *c = &rc->current;
    ck_assert_int_le(batch, MAX_BATCH);
    case_init(rc, c, sq, sk, causal, batch, heads, layout, f); /* every sequence at full length */
    make_dense_problem(c);
    check_built(rc, c);
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

/* head_dim_v from a case's code: 0 head_dim, -1 narrower, -2 wider */
static int dv_of(int head_dim, int code) { return code == 0 ? head_dim : code == -1 ? head_dim / 2 : head_dim + 64; }

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
    f.dv = dv_of(head_dim, f.dv);
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

/* Packed batches (harness/gpu_problem.h): Q and O packed by cu_seqlens_q, K and V by
 * cu_seqlens_k, lengths 0 among them; or every sequence with the same queries: Q dense and K, V
 * a dense cache read through seqused_k (used lengths 0 to 65 of 81 rows). Heads 4. */
typedef struct {
    int nseq, causal;
    int lens_q[MAX_BATCH], lens_k[MAX_BATCH];
    features f; /* dv: dv_of's code */
} packed_case;
static const packed_case packed_cases[] = {
    {6, 1, {5, 0, 33, 17, 1, 40}, {17, 9, 20, 0, 1, 40}, {2, 0, -1, -1, 0}},
    {6, 0, {5, 0, 33, 17, 1, 40}, {17, 9, 20, 0, 1, 40}, {1, -1, 7, 2, 5}},
    {4, 1, {4, 4, 4, 4}, {30, 3, 0, 65}, {4, 0, -1, -1, 0}},
    {4, 1, {4, 4, 4, 4}, {30, 3, 0, 65}, {2, -2, 16, 0, 30}},
};
enum { N_PACKED_CASES = sizeof packed_cases / sizeof packed_cases[0], PACKED_HEADS = 4 };

static void check_packed(ref_check *rc, const packed_case *pc) {
    struct oracle_case *c = &rc->current;
    memset(c, 0, sizeof *c);
    c->dtype = rc->dtype, c->d = rc->head_dim, c->causal = pc->causal, c->batch = pc->nseq;
    c->heads = PACKED_HEADS, c->f = pc->f, c->f.dv = dv_of(c->d, pc->f.dv), c->packed = 1;
    c->scale = 1.0 / sqrt((double)c->d);
    int n = snprintf(c->name, sizeof c->name, "reference/%s/d%d/packed/", attn_dtype_name(c->dtype), c->d);
    for (int b = 0; b < pc->nseq; b++) {
        c->lq[b] = pc->lens_q[b], c->lk[b] = pc->lens_k[b];
        n += snprintf(c->name + n, sizeof c->name - n, "%s%dx%d", b ? "," : "", c->lq[b], c->lk[b]);
    }
    snprintf(c->name + n, sizeof c->name - n, "/%d", c->causal);
    name_features(c);
    attn_problem_desc d = attn_problem_dense(c->dtype, 1, c->heads, 1, 1, c->d, c->causal, c->name);
    attn_problem_set_batch(&d, pc->nseq, 0, pc->lens_q, pc->lens_k);
    d.heads_k = c->f.heads_k, d.head_dim_v = c->f.dv, d.softcap = (float)c->f.softcap;
    d.window_left = c->f.window_left, d.window_right = c->f.window_right;
    make_problem(c, &d);
    check_built(rc, c);
}

START_TEST(packed) { check_packed(the_run, &packed_cases[_i]); }
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
            printf(USAGE "Checks the GPU reference (golden and low-precision, forward and backward, and the\n"
                   "benchmarks' cuBLAS + softmax baseline) against the float64 CPU oracle on small shapes, dense\n"
                   "and packed (suites/reference_check.c lists the bounds). Exit 0 pass, 1 fail, 77 no GPU, 2 bad\n"
                   "arguments.\n");
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
    tcase_add_loop_test(tc, packed, 0, N_PACKED_CASES);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    attn_ref_destroy(run.ref);
    return failed ? 1 : 0;
}
