/* The float64 CPU oracle on cases computed by hand, and the rules of attn_abi.h that the
 * oracle and the cuBLAS reference refuse problems by (host-only: the reference refuses
 * before any CUDA call). */
#include "unit.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "oracle.h"
#include "reference.h"

enum { MAX_BATCH = 4 };
static int all_q[MAX_BATCH], all_k[MAX_BATCH]; /* the lengths dense() points at */

/* A version-1 problem: every sequence sq queries and sk keys, no GQA, window or softcap.
 * Tests set the version-2 fields on the result. */
static attn_oracle_problem dense(int batch, int heads, int sq, int sk, int d, int causal,
                                 double scale) {
    ck_assert_int_le(batch, MAX_BATCH);
    for (int b = 0; b < batch; b++) all_q[b] = sq, all_k[b] = sk;
    return (attn_oracle_problem){.batch = batch, .heads = heads, .heads_k = heads,
                                 .head_dim = d, .head_dim_v = d, .causal = causal,
                                 .window_left = -1, .window_right = -1,
                                 .softmax_scale = scale, .softcap = 0, .seqlen_q = all_q,
                                 .seqlen_k = all_k, .max_seqlen_q = sq, .max_seqlen_k = sk};
}

#define NEG_INF(x) (isinf(x) && (x) < 0)

/* ---- version 1 ---- */

START_TEST(two_keys) {
    /* scores 0 and ln 2 -> weights 1/3, 2/3; o = 3/3 + 12/3 = 5; lse = ln(1 + 2) */
    float q[1] = {1}, k[2] = {0, (float)log(2.0)}, v[2] = {3, 6};
    double o[1], lse[1];
    attn_oracle_problem p = dense(1, 1, 1, 2, 1, 0, 1.0);
    attn_oracle_forward(&p, q, k, v, o, lse);
    double w1 = exp((double)k[1]) / (1 + exp((double)k[1])); /* k[1] is ln 2 rounded to float */
    ck_assert_double_eq_tol(o[0], 3 * (1 - w1) + 6 * w1, 1e-12);
    ck_assert_double_eq_tol(o[0], 5.0, 1e-6);
    ck_assert_double_eq_tol(lse[0], log(1 + exp((double)k[1])), 1e-12);
    ck_assert_double_eq_tol(lse[0], log(3.0), 1e-6);
}
END_TEST

START_TEST(scale_multiplies_scores) {
    /* scale 2 on scores 0 and 0.5 ln 2 is the case above */
    float q[1] = {1}, k[2] = {0, (float)(0.5 * log(2.0))}, v[2] = {3, 6};
    double o[1], lse[1];
    attn_oracle_problem p = dense(1, 1, 1, 2, 1, 0, 2.0);
    attn_oracle_forward(&p, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[0], 5.0, 1e-6);
    ck_assert_double_eq_tol(lse[0], log(3.0), 1e-6);
}
END_TEST

START_TEST(causal_bottom_right) {
    /* seqlen_q = 2 > seqlen_k = 1: row 0 sees no key (j <= 0 + 1 - 2 = -1), row 1 sees key 0 */
    float q[4] = {1, 2, 3, 4}, k[2] = {5, 6}, v[2] = {7, 8};
    double o[4] = {9, 9, 9, 9}, lse[2];
    attn_oracle_problem p = dense(1, 1, 2, 1, 2, 1, 1.0);
    attn_oracle_forward(&p, q, k, v, o, lse);
    ck_assert(o[0] == 0 && o[1] == 0);
    ck_assert(NEG_INF(lse[0]));
    ck_assert_double_eq_tol(o[2], 7, 1e-15);
    ck_assert_double_eq_tol(o[3], 8, 1e-15);
    ck_assert_double_eq_tol(lse[1], 3 * 5 + 4 * 6, 1e-12);
}
END_TEST

START_TEST(causal_square_and_wide) {
    /* seqlen_q = 2, seqlen_k = 3, d = 1, all scores 0: row 0 sees keys 0..1, row 1 sees 0..2 */
    float q[2] = {0, 0}, k[3] = {1, 1, 1}, v[3] = {1, 2, 6};
    double o[2], lse[2];
    attn_oracle_problem p = dense(1, 1, 2, 3, 1, 1, 1.0);
    attn_oracle_forward(&p, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[0], 1.5, 1e-15);
    ck_assert_double_eq_tol(o[1], 3.0, 1e-15);
    ck_assert_double_eq_tol(lse[0], log(2.0), 1e-15);
    ck_assert_double_eq_tol(lse[1], log(3.0), 1e-15);
}
END_TEST

START_TEST(large_scores_do_not_overflow) {
    /* scores 1000 and 1000 + ln 2: float exp would overflow without the max subtracted */
    float q[1] = {1000}, k[2] = {1, 1}, v[2] = {3, 6};
    double o[1], lse[1];
    attn_oracle_problem p = dense(1, 1, 1, 2, 1, 0, 1.0);
    attn_oracle_forward(&p, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[0], 4.5, 1e-12);
    ck_assert_double_eq_tol(lse[0], 1000 + log(2.0), 1e-9);
}
END_TEST

START_TEST(batch_and_heads_are_independent) {
    /* batch 2, heads 2, one key each: o = v of that (b, h) */
    float q[4] = {1, 1, 1, 1}, k[4] = {1, 2, 3, 4}, v[4] = {10, 20, 30, 40};
    double o[4], lse[4];
    attn_oracle_problem p = dense(2, 2, 1, 1, 1, 0, 1.0);
    attn_oracle_forward(&p, q, k, v, o, lse);
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq_tol(o[i], v[i], 1e-15);
        ck_assert_double_eq_tol(lse[i], k[i], 1e-15);
    }
}
END_TEST

START_TEST(lse_may_be_null) {
    float q[1] = {1}, k[2] = {1, 1}, v[2] = {3, 6};
    double o[1];
    attn_oracle_problem p = dense(1, 1, 1, 2, 1, 0, 1.0);
    attn_oracle_forward(&p, q, k, v, o, NULL);
    ck_assert_double_eq_tol(o[0], 4.5, 1e-15);
}
END_TEST

/* ---- version 2 ---- */

START_TEST(gqa_heads_share_kv_by_division) {
    /* batch 2, heads 4, heads_k 2, one key: query head h reads KV head h / 2, so o is that
     * KV head's v and lse its score. (h % 2 would give 10, 20, 10, 20 for batch 0.) */
    float q[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float k[4] = {2, 3, 4, 5}, v[4] = {10, 20, 30, 40}; /* [b][kv head] */
    double o[8], lse[8];
    attn_oracle_problem p = dense(2, 4, 1, 1, 1, 0, 1.0);
    p.heads_k = 2;
    attn_oracle_forward(&p, q, k, v, o, lse);
    const double want_o[8] = {10, 10, 20, 20, 30, 30, 40, 40};
    const double want_lse[8] = {2, 2, 3, 3, 4, 4, 5, 5};
    for (int i = 0; i < 8; i++) {
        ck_assert_double_eq_tol(o[i], want_o[i], 1e-15);
        ck_assert_double_eq_tol(lse[i], want_lse[i], 1e-15);
    }
}
END_TEST

START_TEST(gqa_single_kv_head) {
    /* heads 3, heads_k 1 (multi-query): every head reads the one KV head, with its own q:
     * scores 0 and q_h * 1 over v = {0, 1} give o = sigmoid(q_h) */
    float q[3] = {0, 1, -2}, k[2] = {0, 1}, v[2] = {0, 1};
    double o[3], lse[3];
    attn_oracle_problem p = dense(1, 3, 1, 2, 1, 0, 1.0);
    p.heads_k = 1;
    attn_oracle_forward(&p, q, k, v, o, lse);
    for (int h = 0; h < 3; h++) {
        ck_assert_double_eq_tol(o[h], 1 / (1 + exp(-(double)q[h])), 1e-15);
        ck_assert_double_eq_tol(lse[h], log(1 + exp((double)q[h])), 1e-15);
    }
}
END_TEST

/* All scores 0 (q = 0) over v = {1, 2, 4, 8}: o is the mean of the visible keys' v and lse
 * the log of their count, so each row shows exactly which keys it sees. */
static const float zero_q[4] = {0, 0, 0, 0}, ones_k[4] = {1, 1, 1, 1}, pow2_v[4] = {1, 2, 4, 8};

static void check_rows(const double *o, const double *lse, const double *want_o,
                       const int *want_count, int rows) {
    for (int i = 0; i < rows; i++) {
        if (want_count[i] == 0) {
            ck_assert_msg(o[i] == 0 && NEG_INF(lse[i]), "row %d: o %g lse %g, want 0 -inf", i,
                          o[i], lse[i]);
        } else {
            ck_assert_msg(fabs(o[i] - want_o[i]) < 1e-14, "row %d: o %.17g, want %.17g", i, o[i],
                          want_o[i]);
            ck_assert_msg(fabs(lse[i] - log(want_count[i])) < 1e-14, "row %d: lse %.17g, want ln %d",
                          i, lse[i], want_count[i]);
        }
    }
}

START_TEST(window_left) {
    /* sq = sk = 4, window_left 1: row i sees j >= i - 1 */
    double o[4], lse[4];
    attn_oracle_problem p = dense(1, 1, 4, 4, 1, 0, 1.0);
    p.window_left = 1;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    const double want[4] = {15 / 4.0, 15 / 4.0, 14 / 3.0, 6};
    const int count[4] = {4, 4, 3, 2};
    check_rows(o, lse, want, count, 4);
}
END_TEST

START_TEST(window_right) {
    /* sq = sk = 4, window_right 1: row i sees j <= i + 1 */
    double o[4], lse[4];
    attn_oracle_problem p = dense(1, 1, 4, 4, 1, 0, 1.0);
    p.window_right = 1;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    const double want[4] = {1.5, 7 / 3.0, 15 / 4.0, 15 / 4.0};
    const int count[4] = {2, 3, 4, 4};
    check_rows(o, lse, want, count, 4);
}
END_TEST

START_TEST(window_both_sides) {
    /* window (1, 1): row i sees i-1..i+1; window (0, 0): only the diagonal */
    double o[4], lse[4];
    attn_oracle_problem p = dense(1, 1, 4, 4, 1, 0, 1.0);
    p.window_left = 1, p.window_right = 1;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    const double want[4] = {1.5, 7 / 3.0, 14 / 3.0, 6};
    const int count[4] = {2, 3, 3, 2};
    check_rows(o, lse, want, count, 4);

    p.window_left = 0, p.window_right = 0;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    const double diag[4] = {1, 2, 4, 8};
    const int one[4] = {1, 1, 1, 1};
    check_rows(o, lse, diag, one, 4);
}
END_TEST

START_TEST(window_right_empty_row) {
    /* sq = 3 > sk = 1, not causal, window_right 1: d = j - (i - 2) <= 1 means j <= i - 1, so
     * row 0 sees no key; rows 1 and 2 see key 0 */
    double o[3] = {9, 9, 9}, lse[3];
    attn_oracle_problem p = dense(1, 1, 3, 1, 1, 0, 1.0);
    p.window_right = 1;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    const double want[3] = {0, 1, 1};
    const int count[3] = {0, 1, 1};
    check_rows(o, lse, want, count, 3);
}
END_TEST

START_TEST(window_left_with_causal_bottom_right) {
    /* sq = 2, sk = 4, causal, window_left 1: the diagonal is j = i + 2, row 0 sees keys 1..2
     * (mean 3) and row 1 keys 2..3 (mean 6). Causal alone would give 7/3 and 15/4; top-left
     * alignment would give 1 and 1.5. window_right 0 with causal is the same problem. */
    double o[2], lse[2];
    const double want[2] = {3, 6};
    const int count[2] = {2, 2};
    attn_oracle_problem p = dense(1, 1, 2, 4, 1, 1, 1.0);
    p.window_left = 1;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    check_rows(o, lse, want, count, 2);
    p.window_right = 0;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    check_rows(o, lse, want, count, 2);
}
END_TEST

START_TEST(window_left_with_causal_empty_rows) {
    /* sq = 4, sk = 2, causal, window_left 0: the diagonal is j = i - 2, so rows 0 and 1 see no
     * key and rows 2 and 3 only keys 0 and 1 */
    double o[4] = {9, 9, 9, 9}, lse[4];
    attn_oracle_problem p = dense(1, 1, 4, 2, 1, 1, 1.0);
    p.window_left = 0;
    attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse);
    const double want[4] = {0, 0, 1, 2};
    const int count[4] = {0, 0, 1, 1};
    check_rows(o, lse, want, count, 4);
}
END_TEST

START_TEST(softcap_after_scale) {
    /* scale 0.5, softcap 1: scores 0 and 0.5 * 6 = 3 become 0 and tanh 3, so over v = {0, 1}
     * o = sigmoid(tanh 3) ~ 0.730 (uncapped: sigmoid(3) ~ 0.953; capped before the scale:
     * sigmoid(0.5 tanh 6) ~ 0.622) */
    float q[1] = {1}, k[2] = {0, 6}, v[2] = {0, 1};
    double o[1], lse[1];
    attn_oracle_problem p = dense(1, 1, 1, 2, 1, 0, 0.5);
    p.softcap = 1;
    attn_oracle_forward(&p, q, k, v, o, lse);
    double t = tanh(3.0);
    ck_assert_double_eq_tol(o[0], exp(t) / (1 + exp(t)), 1e-15);
    ck_assert_double_eq_tol(o[0], 0.7301, 1e-4);
    ck_assert_double_eq_tol(lse[0], log(1 + exp(t)), 1e-15);
}
END_TEST

START_TEST(softcap_bounds_scores) {
    /* softcap 2: score 1000 becomes 2 tanh 500 = 2, so o = sigmoid(2), lse = ln(1 + e^2) */
    float q[1] = {1000}, k[2] = {0, 1}, v[2] = {0, 1};
    double o[1], lse[1];
    attn_oracle_problem p = dense(1, 1, 1, 2, 1, 0, 1.0);
    p.softcap = 2;
    attn_oracle_forward(&p, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[0], 1 / (1 + exp(-2.0)), 1e-15);
    ck_assert_double_eq_tol(lse[0], log(1 + exp(2.0)), 1e-15);
}
END_TEST

START_TEST(softcap_before_mask) {
    /* causal, sq = sk = 2, softcap 1: row 0 still sees only key 0 (masking after the cap; a
     * mask of -inf capped would become -1 and let key 1 in), so o = 2 and lse = 0; row 1
     * sees scores 0 and tanh 5 */
    float q[2] = {1, 1}, k[2] = {0, 5}, v[2] = {2, 7};
    double o[2], lse[2];
    attn_oracle_problem p = dense(1, 1, 2, 2, 1, 1, 1.0);
    p.softcap = 1;
    attn_oracle_forward(&p, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[0], 2, 1e-15);
    ck_assert_double_eq_tol(lse[0], 0, 1e-15);
    double t = tanh(5.0), w1 = exp(t) / (1 + exp(t));
    ck_assert_double_eq_tol(o[1], 2 * (1 - w1) + 7 * w1, 1e-14);
    ck_assert_double_eq_tol(lse[1], log(1 + exp(t)), 1e-15);

    /* a window masks after the cap too: window (0, 0) leaves row 1 key 1 alone */
    p.causal = 0, p.window_left = 0, p.window_right = 0;
    attn_oracle_forward(&p, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[1], 7, 1e-15);
    ck_assert_double_eq_tol(lse[1], t, 1e-15);
}
END_TEST

START_TEST(head_dim_v_narrower_and_wider) {
    /* head_dim 2, head_dim_v 3, sq 2, sk 2. Row 0: q = (1, 0), scores 0 and ln 2 -> weights
     * 1/3, 2/3; row 1: q = 0, weights 1/2, 1/2. V rows (3, 0, 1) and (6, 3, 1). */
    float q[4] = {1, 0, 0, 0}, k[4] = {0, 7, (float)log(2.0), 7}, v[6] = {3, 0, 1, 6, 3, 1};
    double o[7], lse[2];
    o[6] = 99; /* just past o: not written */
    attn_oracle_problem p = dense(1, 1, 2, 2, 2, 0, 1.0);
    p.head_dim_v = 3;
    attn_oracle_forward(&p, q, k, v, o, lse);
    const double want[6] = {5, 2, 1, 4.5, 1.5, 1};
    for (int i = 0; i < 6; i++) ck_assert_double_eq_tol(o[i], want[i], 1e-6);
    ck_assert(o[6] == 99);
    ck_assert_double_eq_tol(lse[0], log(3.0), 1e-6);
    ck_assert_double_eq_tol(lse[1], log(2.0), 1e-15);

    /* head_dim 3, head_dim_v 1: q.k over all 3 columns, o one column */
    float q3[3] = {1, 1, 1}, k3[6] = {0, 0, 0, 1, 1, -2}, v1[2] = {3, 6}; /* scores 0, 0 */
    double o1[2] = {0, 99}, l1[1];
    p = dense(1, 1, 1, 2, 3, 0, 1.0);
    p.head_dim_v = 1;
    attn_oracle_forward(&p, q3, k3, v1, o1, l1);
    ck_assert_double_eq_tol(o1[0], 4.5, 1e-15);
    ck_assert(o1[1] == 99);
    ck_assert_double_eq_tol(l1[0], log(2.0), 1e-15);
}
END_TEST

START_TEST(head_dim_v_zero_is_off) {
    /* head_dim_v 0 is head_dim: the batch_and_heads case again */
    float q[4] = {1, 1, 1, 1}, k[4] = {1, 2, 3, 4}, v[4] = {10, 20, 30, 40};
    double o[4], lse[4];
    attn_oracle_problem p = dense(2, 2, 1, 1, 1, 0, 1.0);
    p.head_dim_v = 0;
    ck_assert_int_eq(attn_oracle_forward(&p, q, k, v, o, lse), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq_tol(o[i], v[i], 1e-15);
        ck_assert_double_eq_tol(lse[i], k[i], 1e-15);
    }
}
END_TEST

/* The problem p breaks a rule: attn_oracle_check names it and attn_oracle_forward writes
 * nothing. */
static void refused(const attn_oracle_problem *p, const char *expect, int line) {
    float q[8] = {0}, k[8] = {0}, v[8] = {0};
    double o[8], lse[8];
    for (int i = 0; i < 8; i++) o[i] = lse[i] = 7;
    char err[256] = "";
    ck_assert_msg(attn_oracle_check(p, err, sizeof err) == 1, "line %d: passed", line);
    ck_assert_msg(strstr(err, expect), "line %d: expected '%s' in: %s", line, expect, err);
    ck_assert_msg(attn_oracle_forward(p, q, k, v, o, lse) == 1, "line %d: computed", line);
    for (int i = 0; i < 8; i++) ck_assert_msg(o[i] == 7 && lse[i] == 7, "line %d: wrote o or lse", line);
}
#define REFUSED(edit, expect)                              \
    do {                                                   \
        attn_oracle_problem p = dense(2, 2, 1, 2, 1, 0, 1.0); \
        edit;                                              \
        refused(&p, expect, __LINE__);                     \
    } while (0)

/* attn_abi.h's rules as the oracle has them: heads_k 0 is invalid (it was read as heads),
 * causal with window_right > 0 is invalid (it was computed as causal), a sequence uses at
 * most the keys it stores (it read past them) */
START_TEST(invalid_problems) {
    REFUSED(p.heads_k = 0, "heads_k 0 must be >= 1");
    REFUSED(p.heads_k = 4, "heads_k 4 does not divide heads 2");
    REFUSED((p.causal = 1, p.window_right = 1), "window_right 1 with causal (causal means window_right 0)");
    REFUSED(p.window_left = -2, "window_left -2 must be >= -1");
    REFUSED(all_k[1] = 3, "seqlen_k[1] = 3 is outside [0, max_seqlen_k 2]");
    REFUSED(all_k[0] = -1, "seqlen_k[0] = -1 is outside");
    REFUSED(all_q[1] = 2, "seqlen_q[1] = 2 is outside [0, max_seqlen_q 1]");
    /* the boundaries pass: causal with window_right 0 or -1, no keys at all */
    char err[128];
    attn_oracle_problem p = dense(2, 2, 1, 2, 1, 1, 1.0);
    p.window_right = 0;
    ck_assert_msg(!attn_oracle_check(&p, err, sizeof err), "%s", err);
    all_k[0] = 0;
    ck_assert_msg(!attn_oracle_check(&p, err, sizeof err), "%s", err);
}
END_TEST

/* attn_abi.h: with seqused_k the diagonal is taken from the used keys. A cache of 4 keys of
 * which 2 are used (the caller passes seqlen_k 2, max_seqlen_k 4), 2 queries, causal: row 0
 * sees key 0 only and row 1 keys 0..1 (from the stored 4 keys it would see 0..2 and 0..3). */
START_TEST(used_keys_set_the_diagonal) {
    const int sq[1] = {2}, used[1] = {2};
    double o[2], lse[2];
    attn_oracle_problem p = dense(1, 1, 2, 4, 1, 1, 1.0);
    p.seqlen_q = sq, p.seqlen_k = used;
    ck_assert_int_eq(attn_oracle_forward(&p, zero_q, ones_k, pow2_v, o, lse), 0);
    const double want[2] = {1, 1.5};
    const int count[2] = {1, 2};
    check_rows(o, lse, want, count, 2);
}
END_TEST

/* ---- the cuBLAS reference's guard (reference.cu): the same rules refused, each named,
 * before the handle or the GPU is used ---- */

static char buf_in[64];

/* A version-1 problem for the reference (batch 2, heads 4, S 8, d 64, dense rows). */
static attn_fwd_params ref_problem(void) {
    return (attn_fwd_params){.dtype = ATTN_F16, .batch = 2, .heads = 4, .seqlen_q = 8, .seqlen_k = 8,
                             .head_dim = 64, .softmax_scale = 0.125f, .q = buf_in, .k = buf_in,
                             .v = buf_in, .o = buf_in,
                             .q_batch_stride = 2048, .q_head_stride = 64, .q_row_stride = 256,
                             .k_batch_stride = 2048, .k_head_stride = 64, .k_row_stride = 256,
                             .v_batch_stride = 2048, .v_head_stride = 64, .v_row_stride = 256,
                             .o_batch_stride = 2048, .o_head_stride = 64, .o_row_stride = 256,
                             .heads_k = 4, .window_left = -1, .window_right = -1};
}

/* attn_ref_forward (or, baseline, attn_ref_baseline) refuses p with expect in its message. The
 * handle is a zeroed stand-in: a refused problem never reaches it. */
static void ref_refuses(const attn_fwd_params *p, int baseline, const char *expect, int line) {
    static double stand_in[64];
    attn_reference *r = (attn_reference *)stand_in;
    float o[1];
    char err[512] = "";
    int rc = baseline ? attn_ref_baseline(r, p, 0, err, sizeof err)
                      : attn_ref_forward(r, p, ATTN_REF_GOLDEN, o, NULL, 0, err, sizeof err);
    ck_assert_msg(rc != 0, "line %d: accepted", line);
    ck_assert_msg(strstr(err, expect), "line %d: expected '%s' in: %s", line, expect, err);
}
#define REF_REFUSES(edit, expect)             \
    do {                                      \
        attn_fwd_params p = ref_problem();    \
        edit;                                 \
        ref_refuses(&p, 0, expect, __LINE__); \
    } while (0)

START_TEST(reference_refuses_invalid) {
    static const int32_t arr[4] = {0};
    REF_REFUSES(p.heads_k = 0, "heads_k=0");
    REF_REFUSES((p.causal = 1, p.window_right = 2), "window_right 2 with causal: invalid");
    REF_REFUSES(p.window_left = -3, "window_left -3, window_right -1: invalid");
    REF_REFUSES((p.block_table = arr, p.page_size = 16, p.num_pages = 1, p.block_table_stride = 1,
                 p.cu_seqlens_k = arr), "paged K/V with cu_seqlens_k");
    REF_REFUSES((p.block_table = arr, p.page_size = 4, p.num_pages = 1, p.block_table_stride = 1),
                "block_table_stride 1, seqlen_k 8: invalid");
    REF_REFUSES((p.block_table = arr, p.page_size = 8, p.num_pages = 0, p.block_table_stride = 1),
                "num_pages 0");
    REF_REFUSES(p.k_head_stride = -64, "k_head_stride -64 must be >= 0");
    REF_REFUSES(p.o_row_stride = -1, "o_row_stride -1 must be >= 0");
    REF_REFUSES(p.k_row_stride = 0, "a row stride of 0 (q 256, k 0, v 256, o 256) over more than one row");
    REF_REFUSES((p.seqlen_k = 1, p.q_row_stride = 0), "(8 of Q and O, 1 of K and V): invalid");
    /* the benchmark baseline computes version-1 problems only (it answered these wrongly) */
    const char *v1_only = "attn_ref_baseline: version-1 problems only";
    for (int i = 0; i < 6; i++) {
        attn_fwd_params p = ref_problem();
        if (i == 0) p.heads_k = 2;
        if (i == 1) p.window_right = 0; /* causal without the causal flag */
        if (i == 2) p.window_left = 3;
        if (i == 3) p.softcap = 30;
        if (i == 4) p.head_dim_v = 32;
        if (i == 5) p.seqused_k = arr;
        ref_refuses(&p, 1, v1_only, __LINE__);
    }
}
END_TEST

/* attn_ref_backward refuses what the forward refuses, under its own name, and what the
 * backward adds (no pages in ABI version 5, dO, the given O), before the GPU is used. */
static void bwd_refuses(const attn_bwd_params *bp, const char *expect, int line) {
    static double stand_in[64];
    float d[1];
    char err[512] = "";
    int rc = attn_ref_backward((attn_reference *)stand_in, bp, ATTN_REF_LOWP, d, d, d, 0, err, sizeof err);
    ck_assert_msg(rc != 0, "line %d: accepted", line);
    ck_assert_msg(strstr(err, expect), "line %d: expected '%s' in: %s", line, expect, err);
}
#define BWD_REFUSES(edit, expect)                                                               \
    do {                                                                                        \
        attn_fwd_params p = ref_problem();                                                      \
        attn_bwd_params b = {.fwd = &p, .dout = buf_in, .do_batch_stride = 2048, .do_head_stride = 64, \
                             .do_row_stride = 256};                                             \
        edit;                                                                                   \
        bwd_refuses(&b, expect, __LINE__);                                                      \
    } while (0)

START_TEST(reference_backward_refuses_invalid) {
    static const int32_t arr[4] = {0};
    BWD_REFUSES(b.fwd = NULL, "attn_ref_backward: NULL reference, params or params->fwd");
    BWD_REFUSES(p.heads_k = 0, "attn_ref_backward: bad shape");
    BWD_REFUSES((p.causal = 1, p.window_right = 2), "attn_ref_backward: window_left -1, window_right 2 with causal");
    BWD_REFUSES((p.block_table = arr, p.page_size = 8, p.num_pages = 1, p.block_table_stride = 1),
                "has no backward for paged problems");
    BWD_REFUSES(b.dout = NULL, "NULL dout");
    BWD_REFUSES(p.o = NULL, "NULL fwd->o");
    BWD_REFUSES(b.do_head_stride = -1, "dO strides (batch 2048, head -1, row 256) must be >= 0");
    BWD_REFUSES(p.k_row_stride = 0, "attn_ref_backward: a row stride of 0");
    BWD_REFUSES(b.do_row_stride = 0, "dO's row stride 0 over 8 rows: invalid");
}
END_TEST

START_TEST(per_sequence_lengths) {
    /* batch 2 padded to 3 query and 3 key rows, q = 0 (all scores 0). Sequence 0: 3 queries,
     * 2 keys (its key row 2 is padding, v 99); sequence 1: 1 query, 3 keys. */
    const int sq[2] = {3, 1}, sk[2] = {2, 3};
    float q[6] = {0}, k[6] = {1, 1, 1, 1, 1, 1}, v[6] = {1, 3, 99, 2, 4, 9};
    attn_oracle_problem p = dense(2, 1, 3, 3, 1, 1, 1.0);
    p.seqlen_q = sq, p.seqlen_k = sk;

    /* causal, aligned per sequence: sequence 0's diagonal is j = i - 1 (row 0 sees nothing,
     * row 1 key 0, row 2 keys 0..1); sequence 1's row 0 sees keys 0..2 */
    double o[6] = {7, 7, 7, 7, 7, 7}, lse[6] = {7, 7, 7, 7, 7, 7};
    attn_oracle_forward(&p, q, k, v, o, lse);
    const double want[4] = {0, 1, 2, 5};
    const int count[4] = {0, 1, 2, 3};
    check_rows(o, lse, want, count, 4);
    ck_assert(o[4] == 7 && o[5] == 7 && lse[4] == 7 && lse[5] == 7); /* past sequence 1's rows */

    /* not causal: sequence 0's rows all see keys 0..1 (never the padding) */
    p.causal = 0;
    attn_oracle_forward(&p, q, k, v, o, lse);
    const double want_full[4] = {2, 2, 2, 5};
    const int count_full[4] = {2, 2, 2, 3};
    check_rows(o, lse, want_full, count_full, 4);
    ck_assert(o[4] == 7 && o[5] == 7 && lse[4] == 7 && lse[5] == 7);
}
END_TEST

START_TEST(features_combined) {
    /* batch 2, heads 2, heads_k 1, per-sequence lengths, causal + window_left 1, softcap 1,
     * head_dim_v 2. Sequence 1 (sq 2, sk 3): head h has q = h + 1 against keys k = (0, 0, 3),
     * so row 0 (diagonal j = 1) sees keys 0..1 (scores 0, 0) and row 1 (j = 2) keys 1..2
     * (scores 0 and tanh(3 (h + 1))). V rows (1, 0), (3, 10), (5, 20). */
    const int sq[2] = {1, 2}, sk[2] = {1, 3};
    float q[8] = {0, 0, 0, 0, 1, 1, 2, 2};           /* [b][h][2 rows][d 1] */
    float k[6] = {0, 0, 0, 0, 0, 3};                 /* [b][1][3][1] */
    float v[12] = {0, 0, 0, 0, 0, 0, 1, 0, 3, 10, 5, 20}; /* [b][1][3][2] */
    double o[16], lse[8];
    for (int i = 0; i < 16; i++) o[i] = 7;
    for (int i = 0; i < 8; i++) lse[i] = 7;
    attn_oracle_problem p = dense(2, 2, 2, 3, 1, 1, 1.0);
    p.heads_k = 1, p.head_dim_v = 2, p.window_left = 1, p.softcap = 1;
    p.seqlen_q = sq, p.seqlen_k = sk;
    attn_oracle_forward(&p, q, k, v, o, lse);
    for (int h = 0; h < 2; h++) {
        const double *oh = o + (size_t)(2 + h) * 2 * 2, *lh = lse + (2 + h) * 2;
        ck_assert_double_eq_tol(oh[0], 2, 1e-15);
        ck_assert_double_eq_tol(oh[1], 5, 1e-15);
        ck_assert_double_eq_tol(lh[0], log(2.0), 1e-15);
        double t = tanh(3.0 * (h + 1)), w = 1 / (1 + exp(-t));
        ck_assert_double_eq_tol(oh[2], 3 * (1 - w) + 5 * w, 1e-14);
        ck_assert_double_eq_tol(oh[3], 10 * (1 - w) + 20 * w, 1e-14);
        ck_assert_double_eq_tol(lh[1], log(1 + exp(t)), 1e-15);
    }
    /* sequence 0 (sq 1, sk 1): one row per head, o = (0, 0) from its zero V; its row 1 untouched */
    for (int h = 0; h < 2; h++) {
        ck_assert(o[h * 4] == 0 && o[h * 4 + 1] == 0 && lse[h * 2] == 0);
        ck_assert(o[h * 4 + 2] == 7 && o[h * 4 + 3] == 7 && lse[h * 2 + 1] == 7);
    }
}
END_TEST

/* ---- the backward pass (issue #28): gradients against central differences ---- */

enum { G_MAX = 2 * 4 * 9 * 5 }; /* the largest array below: batch 2, heads 4, 9 rows, 5 columns */

/* sum(o * dout) over the rows that exist, o from the forward in float64 */
static double loss(const attn_oracle_problem *p, const float *q, const float *k, const float *v,
                   const double *dout) {
    double o[G_MAX], sum = 0;
    const int dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
    ck_assert_int_eq(attn_oracle_forward(p, q, k, v, o, NULL), 0);
    for (int b = 0; b < p->batch; b++)
        for (int h = 0; h < p->heads; h++)
            for (int i = 0; i < p->seqlen_q[b]; i++)
                for (int c = 0; c < dv; c++) {
                    const size_t e = (((size_t)b * p->heads + h) * p->max_seqlen_q + i) * dv + c;
                    sum += o[e] * dout[e];
                }
    return sum;
}

/* Each element of x moved by +-2^-10 (exact in float for these values): the central
 * difference of the loss against the analytic gradient g; rows past the lengths are 0 in g. */
static void check_gradient(const char *what, const attn_oracle_problem *p, float *x, size_t n, const double *g,
                           const float *q, const float *k, const float *v, const double *dout) {
    const float h = 1.0f / 1024;
    double worst = 0, scale = 1e-3;
    for (size_t e = 0; e < n; e++) scale = fmax(scale, fabs(g[e]));
    for (size_t e = 0; e < n; e++) {
        const float keep = x[e];
        x[e] = keep + h;
        const double up = loss(p, q, k, v, dout);
        x[e] = keep - h;
        const double down = loss(p, q, k, v, dout);
        x[e] = keep;
        const double numeric = (up - down) / (2.0 * h);
        ck_assert_msg(isfinite(g[e]), "%s[%zu] = %g", what, e, g[e]);
        worst = fmax(worst, fabs(numeric - g[e]));
    }
    ck_assert_msg(worst <= 1e-4 * scale, "%s: max |numeric - analytic| = %g (largest gradient %g)", what, worst,
                  scale);
}

/* One problem: inputs on a 2^-6 grid in [-2, 2), dout with NaN in the rows past seqlen_q (never
 * read), the three gradients checked, and the rows past the lengths zero. */
static void check_backward(attn_oracle_problem p) {
    static float q[G_MAX], k[G_MAX], v[G_MAX];
    static double dout[G_MAX], dq[G_MAX], dk[G_MAX], dv[G_MAX];
    const int d = p.head_dim, dvv = p.head_dim_v ? p.head_dim_v : p.head_dim;
    const size_t nq = (size_t)p.batch * p.heads * p.max_seqlen_q * d;
    const size_t nk = (size_t)p.batch * p.heads_k * p.max_seqlen_k * d;
    const size_t nv = (size_t)p.batch * p.heads_k * p.max_seqlen_k * dvv;
    const size_t no = (size_t)p.batch * p.heads * p.max_seqlen_q * dvv;
    ck_assert(nq <= G_MAX && nk <= G_MAX && nv <= G_MAX && no <= G_MAX);
    unsigned x = 12345;
    for (size_t e = 0; e < G_MAX; e++) {
        x = x * 1103515245u + 12345u;
        q[e] = (float)((int)(x >> 16) % 256 - 128) / 64;
        x = x * 1103515245u + 12345u;
        k[e] = (float)((int)(x >> 16) % 256 - 128) / 64;
        x = x * 1103515245u + 12345u;
        v[e] = (float)((int)(x >> 16) % 256 - 128) / 64;
        dout[e] = sin((double)e);
    }
    for (int b = 0; b < p.batch; b++)
        for (int h = 0; h < p.heads; h++)
            for (int i = p.seqlen_q[b]; i < p.max_seqlen_q; i++)
                for (int c = 0; c < dvv; c++) dout[(((size_t)b * p.heads + h) * p.max_seqlen_q + i) * dvv + c] = NAN;
    ck_assert_int_eq(attn_oracle_backward(&p, q, k, v, dout, dq, dk, dv), 0);
    check_gradient("dq", &p, q, nq, dq, q, k, v, dout);
    check_gradient("dk", &p, k, nk, dk, q, k, v, dout);
    check_gradient("dv", &p, v, nv, dv, q, k, v, dout);
    for (int b = 0; b < p.batch; b++)
        for (int h = 0; h < p.heads_k; h++)
            for (int j = p.seqlen_k[b]; j < p.max_seqlen_k; j++)
                for (int c = 0; c < d; c++)
                    ck_assert(dk[(((size_t)b * p.heads_k + h) * p.max_seqlen_k + j) * d + c] == 0);
}

START_TEST(backward_plain_and_causal) {
    check_backward(dense(2, 2, 5, 7, 4, 0, 0.5));
    check_backward(dense(2, 2, 3, 7, 4, 1, 0.5)); /* causal, fewer queries than keys */
    check_backward(dense(2, 2, 9, 4, 4, 1, 0.5)); /* causal, rows 0..4 see no key */
}
END_TEST

START_TEST(backward_gqa_sums_over_query_heads) {
    attn_oracle_problem p = dense(2, 4, 5, 6, 3, 0, 0.7);
    p.heads_k = 2;
    check_backward(p);
    p.heads_k = 1, p.causal = 1;
    check_backward(p);
}
END_TEST

START_TEST(backward_window_softcap_head_dim_v) {
    attn_oracle_problem p = dense(2, 2, 8, 9, 4, 0, 0.5);
    p.window_left = 2, p.window_right = 1;
    check_backward(p);
    p.window_right = -1, p.causal = 1, p.softcap = 2.5; /* the softcap's derivative */
    check_backward(p);
    p.head_dim_v = 3, p.window_left = -1;
    check_backward(p);
}
END_TEST

START_TEST(backward_per_sequence_lengths) {
    static const int sq[2] = {3, 0}, sk[2] = {5, 2};
    attn_oracle_problem p = dense(2, 2, 6, 7, 4, 1, 0.5);
    p.seqlen_q = sq, p.seqlen_k = sk;
    check_backward(p);
    p.causal = 0, p.softcap = 1.5, p.heads_k = 1;
    check_backward(p);
}
END_TEST

START_TEST(backward_refuses_invalid) {
    attn_oracle_problem p = dense(1, 2, 2, 2, 2, 1, 1.0);
    p.window_right = 1; /* causal with window_right > 0 */
    float x[16] = {0};
    double dout[16] = {0}, g[16];
    ck_assert_int_eq(attn_oracle_backward(&p, x, x, x, dout, g, g, g), 1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("oracle");
    TCase *tc = tcase_create("hand_computed");
    tcase_add_test(tc, two_keys);
    tcase_add_test(tc, scale_multiplies_scores);
    tcase_add_test(tc, causal_bottom_right);
    tcase_add_test(tc, causal_square_and_wide);
    tcase_add_test(tc, large_scores_do_not_overflow);
    tcase_add_test(tc, batch_and_heads_are_independent);
    tcase_add_test(tc, lse_may_be_null);
    suite_add_tcase(s, tc);

    TCase *v2 = tcase_create("version_2");
    tcase_add_test(v2, gqa_heads_share_kv_by_division);
    tcase_add_test(v2, gqa_single_kv_head);
    tcase_add_test(v2, window_left);
    tcase_add_test(v2, window_right);
    tcase_add_test(v2, window_both_sides);
    tcase_add_test(v2, window_right_empty_row);
    tcase_add_test(v2, window_left_with_causal_bottom_right);
    tcase_add_test(v2, window_left_with_causal_empty_rows);
    tcase_add_test(v2, softcap_after_scale);
    tcase_add_test(v2, softcap_bounds_scores);
    tcase_add_test(v2, softcap_before_mask);
    tcase_add_test(v2, head_dim_v_narrower_and_wider);
    tcase_add_test(v2, head_dim_v_zero_is_off);
    tcase_add_test(v2, used_keys_set_the_diagonal);
    tcase_add_test(v2, per_sequence_lengths);
    tcase_add_test(v2, features_combined);
    suite_add_tcase(s, v2);

    TCase *bwd = tcase_create("backward");
    tcase_add_test(bwd, backward_plain_and_causal);
    tcase_add_test(bwd, backward_gqa_sums_over_query_heads);
    tcase_add_test(bwd, backward_window_softcap_head_dim_v);
    tcase_add_test(bwd, backward_per_sequence_lengths);
    tcase_add_test(bwd, backward_refuses_invalid);
    suite_add_tcase(s, bwd);

    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, invalid_problems);
    tcase_add_test(rules, reference_refuses_invalid);
    tcase_add_test(rules, reference_backward_refuses_invalid);
    suite_add_tcase(s, rules);
    return attn_unit_run(s);
}
