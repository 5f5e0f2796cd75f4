/* The float64 CPU oracle on cases computed by hand. */
#include "unit.h"
#include <math.h>

#include "reference.h"

START_TEST(two_keys) {
    /* scores 0 and ln 2 -> weights 1/3, 2/3; o = 3/3 + 12/3 = 5; lse = ln(1 + 2) */
    float q[1] = {1}, k[2] = {0, (float)log(2.0)}, v[2] = {3, 6};
    double o[1], lse[1];
    attn_oracle_forward(1, 1, 1, 2, 1, 0, 1.0, q, k, v, o, lse);
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
    attn_oracle_forward(1, 1, 1, 2, 1, 0, 2.0, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[0], 5.0, 1e-6);
    ck_assert_double_eq_tol(lse[0], log(3.0), 1e-6);
}
END_TEST

START_TEST(causal_bottom_right) {
    /* seqlen_q = 2 > seqlen_k = 1: row 0 sees no key (j <= 0 + 1 - 2 = -1), row 1 sees key 0 */
    float q[4] = {1, 2, 3, 4}, k[2] = {5, 6}, v[2] = {7, 8};
    double o[4] = {9, 9, 9, 9}, lse[2];
    attn_oracle_forward(1, 1, 2, 1, 2, 1, 1.0, q, k, v, o, lse);
    ck_assert(o[0] == 0 && o[1] == 0);
    ck_assert(isinf(lse[0]) && lse[0] < 0);
    ck_assert_double_eq_tol(o[2], 7, 1e-15);
    ck_assert_double_eq_tol(o[3], 8, 1e-15);
    ck_assert_double_eq_tol(lse[1], 3 * 5 + 4 * 6, 1e-12);
}
END_TEST

START_TEST(causal_square_and_wide) {
    /* seqlen_q = 2, seqlen_k = 3, d = 1, all scores 0: row 0 sees keys 0..1, row 1 sees 0..2 */
    float q[2] = {0, 0}, k[3] = {1, 1, 1}, v[3] = {1, 2, 6};
    double o[2], lse[2];
    attn_oracle_forward(1, 1, 2, 3, 1, 1, 1.0, q, k, v, o, lse);
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
    attn_oracle_forward(1, 1, 1, 2, 1, 0, 1.0, q, k, v, o, lse);
    ck_assert_double_eq_tol(o[0], 4.5, 1e-12);
    ck_assert_double_eq_tol(lse[0], 1000 + log(2.0), 1e-9);
}
END_TEST

START_TEST(batch_and_heads_are_independent) {
    /* batch 2, heads 2, one key each: o = v of that (b, h) */
    float q[4] = {1, 1, 1, 1}, k[4] = {1, 2, 3, 4}, v[4] = {10, 20, 30, 40};
    double o[4], lse[4];
    attn_oracle_forward(2, 2, 1, 1, 1, 0, 1.0, q, k, v, o, lse);
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq_tol(o[i], v[i], 1e-15);
        ck_assert_double_eq_tol(lse[i], k[i], 1e-15);
    }
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
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
