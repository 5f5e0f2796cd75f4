/* harness/known_deviations.c: what an entry excuses (every failed check listed, the kernel and
 * the case's glob matching) and what the loader refuses, naming the line. */
#include "known_deviations.h"

#include "unit.h"

static const char LIST[] = "# a comment\n"
                           "\n"
                           "ext */causal/q512k127 accuracy,lse the reason   # a trailing comment\n"
                           "ext fp16/d64/full/s17 * any check\n"
                           "other */q3k1+q1k1 packed why\n";

static attn_deviations load(const char *text) {
    char path[64], err[256] = "";
    attn_deviations d;
    ck_assert_msg(attn_deviations_load(attn_unit_temp_file(path, text), &d, err, sizeof err) == 0, "%s", err);
    unlink(path);
    return d;
}

START_TEST(test_entries_parsed) {
    attn_deviations d = load(LIST);
    ck_assert_int_eq(d.n, 3);
    ck_assert_str_eq(d.v[0].kernel, "ext");
    ck_assert_str_eq(d.v[0].cases, "*/causal/q512k127");
    ck_assert_str_eq(d.v[0].checks, "accuracy,lse");
    ck_assert_str_eq(d.v[0].why, "the reason");
    ck_assert_int_eq(d.v[0].line, 3);
    ck_assert_int_eq(d.v[2].line, 5);
    attn_deviations_free(&d);
}
END_TEST

START_TEST(test_every_failed_check_must_be_listed) {
    attn_deviations d = load(LIST);
    ck_assert_ptr_eq(attn_deviation_find(&d, "ext", "bf16/d128/causal/q512k127", "accuracy,lse"), &d.v[0]);
    ck_assert_ptr_eq(attn_deviation_find(&d, "ext", "fp16/d64/causal/q512k127", "lse"), &d.v[0]);
    /* one check more than the entry names: a failure */
    ck_assert_ptr_null(attn_deviation_find(&d, "ext", "fp16/d64/causal/q512k127", "accuracy,lse,layouts"));
    ck_assert_ptr_null(attn_deviation_find(&d, "ext", "fp16/d64/causal/q512k127", "acc"));
    /* nothing failed by name (a Check error): never excused */
    ck_assert_ptr_null(attn_deviation_find(&d, "ext", "fp16/d64/causal/q512k127", ""));
    ck_assert_ptr_eq(attn_deviation_find(&d, "ext", "fp16/d64/full/s17", "threads,accuracy"), &d.v[1]);
    attn_deviations_free(&d);
}
END_TEST

START_TEST(test_kernel_and_case_must_match) {
    attn_deviations d = load(LIST);
    ck_assert_ptr_null(attn_deviation_find(&d, "other", "fp16/d64/causal/q512k127", "lse"));
    ck_assert_ptr_null(attn_deviation_find(&d, "ext", "fp16/d64/causal/q512k1270", "lse"));
    ck_assert_ptr_null(attn_deviation_find(&d, "ext", "fp16/d64/full/q512k127", "lse"));
    /* '*' crosses '/': a features label with more parts */
    ck_assert_ptr_eq(attn_deviation_find(&d, "other", "bf16/d64/full/kv1/q3k1+q1k1", "packed"), &d.v[2]);
    /* '+' is literal in a glob */
    ck_assert_ptr_null(attn_deviation_find(&d, "other", "bf16/d64/full/q3k11q1k1", "packed"));
    attn_deviations_free(&d);
}
END_TEST

START_TEST(test_exact_entries_only) {
    attn_deviations d = load(LIST);
    ck_assert_ptr_eq(attn_deviation_exact(&d, "ext", "fp16/d64/full/s17"), &d.v[1]);
    ck_assert_ptr_null(attn_deviation_exact(&d, "ext", "fp16/d64/causal/q512k127")); /* a glob's */
    ck_assert_ptr_null(attn_deviation_exact(&d, "other", "fp16/d64/full/s17"));
    attn_deviations_free(&d);
}
END_TEST

static void refused(const char *text, const char *what) {
    char path[64], err[256] = "";
    attn_deviations d;
    ck_assert_int_eq(attn_deviations_load(attn_unit_temp_file(path, text), &d, err, sizeof err), 1);
    unlink(path);
    ck_assert_msg(strstr(err, what) != NULL, "'%s' lacks '%s'", err, what);
    ck_assert_ptr_null(d.v);
}

START_TEST(test_refused_lines) {
    refused("ext\n", ":1: missing the case");
    refused("# x\next */s17\n", ":2: missing the checks");
    refused("ext */s17 accuracy\n", ":1: missing the reason");
    refused("ext */s17 accuracy # a comment is not a reason\n", "missing the reason");
    refused("ext */s17 accuracy,,lse why\n", "an empty name");
    refused("ext */s17 accuracy, why\n", "an empty name");
    char longer[700];
    memset(longer, 'a', sizeof longer);
    memcpy(longer, "ext ", 4);
    strcpy(longer + 600, " lse why\n");
    refused(longer, "the case: longer than 511 characters");
}
END_TEST

START_TEST(test_missing_file) {
    char err[256] = "";
    attn_deviations d;
    ck_assert_int_eq(attn_deviations_load("/nonexistent/known.txt", &d, err, sizeof err), 1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/known.txt"));
}
END_TEST

int main(void) {
    Suite *s = suite_create("known_deviations");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_entries_parsed);
    tcase_add_test(tc, test_every_failed_check_must_be_listed);
    tcase_add_test(tc, test_kernel_and_case_must_match);
    tcase_add_test(tc, test_exact_entries_only);
    tcase_add_test(tc, test_refused_lines);
    tcase_add_test(tc, test_missing_file);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
