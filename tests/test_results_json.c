/* The C readers of results JSON (harness/results.h): a test's record checked against the
 * schema (attn_check_test_json, what attn_results --collect applies to each fragment) and a
 * timing read back (attn_timing_from_json, what a benchmark reusing a shared baseline
 * applies): wrong types, negative numbers, integers beyond a C int and a median of 0 are
 * refused, naming the field. */
#include <jansson.h>
#include <stdio.h>

#include "results.h"
#include "unit.h"

static const char *good_test =
    "{\"test\": \"benchmark/k/fp16/d64/full/s4\", \"kernel\": \"k\", \"dtype\": \"fp16\", \"head_dim\": 64,"
    " \"causal\": false, \"seqlen_q\": 4, \"seqlen_k\": 4, \"batch\": 1, \"heads\": 1,"
    " \"kernel_timing\": {\"median_ms\": 1.0, \"ci_lo_ms\": 0.99, \"ci_hi_ms\": 1.01}, \"tflops\": 1.0,"
    " \"flops\": 1e9, \"bytes\": 1e6, \"roofline_efficiency\": 0.5, \"verdict\": \"pass\", \"reason\": \"\","
    " \"peaks\": {\"tflops\": 700, \"gbs\": 3000}, \"phases_s\": {\"setup\": 0.5, \"startup\": 0.1},"
    " \"baselines\": {\"reference\": {\"speedup\": 100.0, \"speedup_ci\": [99, 101]},"
    "                 \"cudnn\": {\"available\": true, \"speedup\": 2.0, \"version\": 91900}}}";

/* good_test with `key` (a dotted path) set to the JSON `value`; the checker's message. */
static const char *check_with(const char *key, const char *value, char *err, size_t errlen) {
    json_t *t = json_loads(good_test, 0, NULL), *v = json_loads(value, JSON_DECODE_ANY, NULL), *parent = t;
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(v);
    char path[128], *dot;
    snprintf(path, sizeof path, "%s", key);
    char *name = path;
    while ((dot = strchr(name, '.'))) {
        *dot = 0;
        parent = json_object_get(parent, name);
        name = dot + 1;
    }
    json_object_set_new(parent, name, v);
    err[0] = 0;
    int rc = attn_check_test_json(t, err, errlen);
    json_decref(t);
    ck_assert_int_eq(rc, err[0] != 0);
    return err;
}

START_TEST(good_record_passes) {
    char err[256] = "";
    json_t *t = json_loads(good_test, 0, NULL);
    ck_assert_msg(attn_check_test_json(t, err, sizeof err) == 0, "%s", err);
    json_decref(t);
    ck_assert_str_eq(check_with("kernel_timing", "null", err, sizeof err), ""); /* a verdict before timing */
    ck_assert_str_eq(check_with("extra_field", "-5", err, sizeof err), "");     /* not the schema's */
}
END_TEST

START_TEST(negative_numbers) {
    char err[256];
    ck_assert_str_eq(check_with("tflops", "-1.0", err, sizeof err), "'tflops' is the number -1, expected a number >= 0");
    ck_assert_str_eq(check_with("baselines.reference.speedup", "-0.5", err, sizeof err),
                     "'baselines.reference.speedup' is the number -0.5, expected a number >= 0");
    ck_assert_str_eq(check_with("seqlen_k", "-4", err, sizeof err),
                     "'seqlen_k' is the number -4, expected an integer from 0 to 2147483647");
    ck_assert_str_eq(check_with("phases_s.setup", "-1", err, sizeof err),
                     "'phases_s.setup' is the number -1, expected a number >= 0");
    ck_assert_str_eq(check_with("kernel_timing.ci_lo_ms", "-0.25", err, sizeof err),
                     "'kernel_timing.ci_lo_ms' is the number -0.25, expected a number >= 0");
    ck_assert_str_eq(check_with("kernel_timing.median_ms", "0", err, sizeof err),
                     "'kernel_timing.median_ms' is the number 0, expected a positive number");
}
END_TEST

START_TEST(overflowing_integers) {
    char err[256];
    ck_assert_str_eq(check_with("head_dim", "4294967360", err, sizeof err),
                     "'head_dim' is the number 4294967360, expected an integer from 0 to 2147483647");
    ck_assert_str_eq(check_with("baselines.cudnn.version", "2147483648", err, sizeof err),
                     "'baselines.cudnn.version' is the number 2147483648, expected an integer from 0 to 2147483647");
    ck_assert_str_eq(check_with("batch", "2147483647", err, sizeof err), ""); /* INT_MAX fits */
}
END_TEST

START_TEST(wrong_types) {
    char err[256];
    ck_assert_str_eq(check_with("kernel_timing.median_ms", "\"1.0\"", err, sizeof err),
                     "'kernel_timing.median_ms' is a string, expected a positive number");
    ck_assert_str_eq(check_with("head_dim", "64.5", err, sizeof err), "'head_dim' is the number 64.5, expected an integer");
    ck_assert_str_eq(check_with("causal", "1", err, sizeof err), "'causal' is the number 1, expected true or false");
    ck_assert_str_eq(check_with("test", "null", err, sizeof err), "'test' is null, expected a string");
    ck_assert_str_eq(check_with("baselines", "[]", err, sizeof err), "'baselines' is a list, expected an object");
    ck_assert_str_eq(check_with("kernel_timing", "true", err, sizeof err),
                     "'kernel_timing' is true, expected an object or null");
    ck_assert_str_eq(check_with("window", "{}", err, sizeof err), "'window' is an object, expected a list");
    ck_assert_str_eq(check_with("tflops", "false", err, sizeof err), "'tflops' is false, expected a number");
}
END_TEST

START_TEST(not_a_record) {
    char err[256];
    json_t *list = json_loads("[1, 2]", 0, NULL), *no_test = json_loads(good_test, 0, NULL);
    ck_assert_int_eq(attn_check_test_json(list, err, sizeof err), 1);
    ck_assert_str_eq(err, "expected a JSON object at the top, got a list");
    ck_assert_int_eq(attn_check_test_json(NULL, err, sizeof err), 1);
    json_object_del(no_test, "test");
    ck_assert_int_eq(attn_check_test_json(no_test, err, sizeof err), 1);
    ck_assert_str_eq(err, "missing key 'test'");
    json_decref(list), json_decref(no_test);
}
END_TEST

/* a timing as attn_timing_json writes it, with `key` set to the JSON `value` */
static int timing_with(const char *key, const char *value) {
    attn_timing in = {.median_ms = 1.25, .min_ms = 1.2, .ci_lo_ms = 1.24, .ci_hi_ms = 1.26, .samples = 30,
                      .rsd = 0.01, .mean_clock_mhz = 1980, .gpu_time_s = 0.5, .held = 1, .enqueue_ms = 0.004};
    attn_timing out;
    json_t *j = attn_timing_json(&in);
    if (key) json_object_set_new(j, key, json_loads(value, JSON_DECODE_ANY, NULL));
    int rc = attn_timing_from_json(j, &out);
    json_decref(j);
    return rc;
}

START_TEST(timing_numbers) {
    ck_assert_int_eq(timing_with(NULL, NULL), 0);
    ck_assert_int_eq(timing_with("samples", "4294967326"), 1); /* read as 30 by a cast to int */
    ck_assert_int_eq(timing_with("samples", "-3"), 1);
    ck_assert_int_eq(timing_with("median_ms", "-1.25"), 1);
    ck_assert_int_eq(timing_with("median_ms", "0"), 1);
    ck_assert_int_eq(timing_with("ci_hi_ms", "-0.5"), 1);
    ck_assert_int_eq(timing_with("enqueue_ms", "\"fast\""), 1);
    ck_assert_int_eq(timing_with("dropped_for_clock", "2147483648"), 1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("results_json");
    TCase *tc = tcase_create("readers");
    tcase_add_test(tc, good_record_passes);
    tcase_add_test(tc, negative_numbers);
    tcase_add_test(tc, overflowing_integers);
    tcase_add_test(tc, wrong_types);
    tcase_add_test(tc, not_a_record);
    tcase_add_test(tc, timing_numbers);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
