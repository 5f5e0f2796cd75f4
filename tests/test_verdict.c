/* The verdict rule on synthetic arrays, and the tolerance file's parser. */
#include "unit.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verdict.h"

enum { ROWS = 64, D = 16, N = ROWS * D };
static float g[N], r[N], o[N];
static unsigned char empty[ROWS];
static const attn_tolerance tol = {2.0, 2.0, 1.5, 0.01, 1e-3, 1e-4, 3.0, 2.0, 1.5, 0.01};
static const double STEP = 1.0 / 1024; /* fp16 spacing in [1, 2) */

/* G in [1, 2); R = G + one fp16 step on every other element (mean|R-G| = STEP/2) */
static void setup(void) {
    for (int i = 0; i < N; i++) {
        g[i] = 1.0f + (float)(i % 97) / 97.0f;
        r[i] = g[i] + (i % 2 ? (float)STEP : 0.0f);
        o[i] = g[i];
    }
    memset(empty, 0, sizeof empty);
}

static attn_rule judge(attn_output_verdict *v) {
    attn_judge_output(o, g, r, ROWS, D, empty, ATTN_F16, &tol, v);
    return v->rule;
}

START_TEST(exact_output_passes) {
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_PASS);
    ck_assert_double_eq(v.max_err, 0);
    ck_assert_double_eq_tol(v.max_ref_err, STEP, 1e-9);
    ck_assert_double_eq_tol(v.atol, 2 * STEP, 1e-12); /* max|G| < 2: step 2^-10 */
}
END_TEST

START_TEST(naive_lowp_output_passes) {
    memcpy(o, r, sizeof o);
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_PASS);
}
END_TEST

START_TEST(max_error_fails) {
    /* bound = 2 * STEP + 2 * STEP; one element off by 5 steps */
    o[123] += (float)(5 * STEP);
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_MAX);
    ck_assert_int_eq(v.worst, 123);
    ck_assert_double_eq_tol(v.max_bound, 4 * STEP, 1e-9);
}
END_TEST

START_TEST(max_error_at_bound_passes) {
    o[123] += (float)(3.9 * STEP);
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_PASS);
}
END_TEST

START_TEST(mean_error_fails) {
    /* every element off by 0.9 steps: max passes (<= 4 steps), mean 0.9 > 1.5 * 0.5 + 0.01 */
    for (int i = 0; i < N; i++) o[i] = g[i] + (float)(0.9 * STEP);
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_MEAN);
    ck_assert_double_eq_tol(v.mean_bound, (0.75 + 0.01) * STEP, 1e-9);
}
END_TEST

START_TEST(nan_fails_first) {
    o[7] = NAN;
    o[500] += 100; /* also a max failure: the non-finite rule is reported first */
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_NONFINITE);
    ck_assert_int_eq(v.worst, 7);
    ck_assert_int_eq(v.bad_count, 1);
}
END_TEST

START_TEST(inf_fails) {
    o[9] = INFINITY;
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_NONFINITE);
}
END_TEST

START_TEST(empty_row_must_be_exact_zero) {
    empty[3] = 1;
    for (int d = 0; d < D; d++) g[3 * D + d] = r[3 * D + d] = o[3 * D + d] = 0;
    attn_output_verdict v;
    ck_assert_int_eq(judge(&v), ATTN_RULE_PASS);
    o[3 * D + 5] = 1e-6f; /* tiny, far under every bound, still wrong */
    ck_assert_int_eq(judge(&v), ATTN_RULE_EMPTY_ROW);
    ck_assert_int_eq(v.worst, 3 * D + 5);
}
END_TEST

START_TEST(step_sizes) {
    ck_assert_double_eq(attn_dtype_step(ATTN_F16, 1.0), ldexp(1, -10));
    ck_assert_double_eq(attn_dtype_step(ATTN_F16, 1.99), ldexp(1, -10));
    ck_assert_double_eq(attn_dtype_step(ATTN_F16, 0.75), ldexp(1, -11));
    ck_assert_double_eq(attn_dtype_step(ATTN_F16, -3.0), ldexp(1, -9));
    ck_assert_double_eq(attn_dtype_step(ATTN_BF16, 1.0), ldexp(1, -7));
    ck_assert_double_eq(attn_dtype_step(ATTN_F16, 0.0), ldexp(1, -24)); /* subnormal spacing */
}
END_TEST

START_TEST(lse_rule) {
    float lg[4] = {1.0f, 200.0f, -INFINITY, 3.0f}, l[4];
    memcpy(l, lg, sizeof l);
    attn_lse_verdict v;
    attn_judge_lse(l, lg, 4, &tol, &v);
    ck_assert(v.ok);
    l[1] = 200.0f + 0.025f; /* bound at 200: 1e-3 + 0.02 */
    attn_judge_lse(l, lg, 4, &tol, &v);
    ck_assert(!v.ok);
    ck_assert_int_eq(v.worst, 1);
    l[1] = 200.0f + 0.015f;
    attn_judge_lse(l, lg, 4, &tol, &v);
    ck_assert(v.ok);
    l[2] = 0.0f; /* a row that sees no key must stay -inf */
    attn_judge_lse(l, lg, 4, &tol, &v);
    ck_assert(!v.ok);
    ck_assert_int_eq(v.worst, 2);
    l[2] = -INFINITY;
    l[3] = NAN;
    attn_judge_lse(l, lg, 4, &tol, &v);
    ck_assert(!v.ok);
    ck_assert_int_eq(v.worst, 3);
    l[3] = 3.0f * 1.4427f; /* log2 instead of ln: off by O(1) */
    attn_judge_lse(l, lg, 4, &tol, &v);
    ck_assert(!v.ok);
}
END_TEST

/* ---- tolerance file ---- */

static char path[64];

static const char *write_ini(const char *text) { return attn_unit_temp_file(path, text); }

static const char *GOOD = "[output]\nmax_factor = 2\natol_steps = 2\nmean_factor = 1.5\n"
                          "mean_eps_steps = 0.01\n[lse]\natol = 1e-3\nrtol = 1e-4\n"
                          "[gradients]\nmax_factor = 3\natol_steps = 2\nmean_factor = 1.5\nmean_eps_steps = 0.01\n";

START_TEST(shipped_tolerance_file_loads) {
    const char *f = getenv("ATTN_TOLERANCE_FILE");
    ck_assert_msg(f != NULL, "ATTN_TOLERANCE_FILE is not set (run through ctest)");
    attn_tolerance t;
    char err[512];
    ck_assert_msg(attn_tolerance_load(f, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_double_eq(t.max_factor, 2.0);
    ck_assert_double_eq(t.mean_factor, 1.5);
}
END_TEST

START_TEST(good_ini) {
    attn_tolerance t;
    char err[512];
    ck_assert_msg(attn_tolerance_load(write_ini(GOOD), &t, err, sizeof err) == 0, "%s", err);
    unlink(path);
    ck_assert_double_eq(t.lse_rtol, 1e-4);
    ck_assert_double_eq(t.atol_steps, 2);
    ck_assert_double_eq(t.grad_max_factor, 3);
    attn_tolerance g = attn_tolerance_for_gradients(&t);
    ck_assert_double_eq(g.max_factor, 3);
    ck_assert_double_eq(g.mean_eps_steps, 0.01);
}
END_TEST

static void expect_ini_error(const char *text, const char *expect) {
    attn_tolerance t;
    char err[512] = "", want[600];
    write_ini(text);
    snprintf(want, sizeof want, expect, path);
    ck_assert_int_ne(attn_tolerance_load(path, &t, err, sizeof err), 0);
    unlink(path);
    ck_assert_msg(strstr(err, want) != NULL, "expected '%s' in '%s'", want, err);
}

START_TEST(bad_number) {
    expect_ini_error("[output]\nmax_factor = two\n", "%s:2: [output] max_factor: expected a non-negative number, got 'two'");
}
END_TEST
START_TEST(negative_number) {
    expect_ini_error("[output]\n\nmax_factor = -1\n", "%s:3: [output] max_factor");
}
END_TEST
START_TEST(missing_key) {
    expect_ini_error("[output]\nmax_factor = 2\natol_steps = 2\nmean_factor = 1.5\n"
                     "mean_eps_steps = 0.01\n[lse]\natol = 1e-3\n",
                     "%s: missing key 'rtol' in section [lse]");
}
END_TEST
START_TEST(unknown_key) {
    expect_ini_error("[output]\nmax_factr = 2\n", "%s:2: unknown key 'max_factr' in section [output]");
}
END_TEST
START_TEST(syntax_error) {
    expect_ini_error("[output]\nmax_factor 2\n", "%s:2: expected");
}
END_TEST
START_TEST(missing_file) {
    attn_tolerance t;
    char err[512];
    ck_assert_int_ne(attn_tolerance_load("/nonexistent/tol.ini", &t, err, sizeof err), 0);
    ck_assert_str_eq(err, "/nonexistent/tol.ini: cannot open tolerance file");
}
END_TEST

int main(void) {
    Suite *s = suite_create("verdict");
    TCase *rule = tcase_create("rule");
    tcase_add_checked_fixture(rule, setup, NULL);
    tcase_add_test(rule, exact_output_passes);
    tcase_add_test(rule, naive_lowp_output_passes);
    tcase_add_test(rule, max_error_fails);
    tcase_add_test(rule, max_error_at_bound_passes);
    tcase_add_test(rule, mean_error_fails);
    tcase_add_test(rule, nan_fails_first);
    tcase_add_test(rule, inf_fails);
    tcase_add_test(rule, empty_row_must_be_exact_zero);
    tcase_add_test(rule, step_sizes);
    tcase_add_test(rule, lse_rule);
    suite_add_tcase(s, rule);
    TCase *ini = tcase_create("tolerance_file");
    tcase_add_test(ini, shipped_tolerance_file_loads);
    tcase_add_test(ini, good_ini);
    tcase_add_test(ini, bad_number);
    tcase_add_test(ini, negative_number);
    tcase_add_test(ini, missing_key);
    tcase_add_test(ini, unknown_key);
    tcase_add_test(ini, syntax_error);
    tcase_add_test(ini, missing_file);
    suite_add_tcase(s, ini);
    return attn_unit_run(s);
}
