/* The plugin loader: a good plugin loads; each broken one fails with a clear reason that
 * names the file. Fixture paths come from the environment (set by CTest). */
#include "unit.h"
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static const char *fixture(const char *var) {
    const char *p = getenv(var);
    ck_assert_msg(p != NULL, "%s is not set (run through ctest)", var);
    return p;
}

static void expect_error(const char *var, const char *reason) {
    char err[1024] = "";
    int n = -1;
    const char *path = fixture(var);
    ck_assert_ptr_null(attn_plugin_load(path, &n, err, sizeof err));
    ck_assert_int_eq(n, 0);
    ck_assert_msg(strstr(err, path) != NULL, "message does not name the file: %s", err);
    ck_assert_msg(strstr(err, reason) != NULL, "expected '%s' in: %s", reason, err);
}

/* the table of the fixture plugin named by var, which must load with count kernels */
static const attn_kernel *expect_load(const char *var, int count) {
    char err[1024] = "";
    int n = 0;
    const attn_kernel *k = attn_plugin_load(fixture(var), &n, err, sizeof err);
    ck_assert_msg(k != NULL, "%s", err);
    ck_assert_int_eq(n, count);
    return k;
}

START_TEST(good_plugin_loads) {
    char err[1024] = "";
    const attn_kernel *k = expect_load("ATTN_FIXTURE_GOOD", 1);
    ck_assert_str_eq(k[0].name, "fixture_unsupported");
    ck_assert_int_eq(k[0].fwd(NULL, 0), ATTN_UNSUPPORTED);
    const attn_kernel *f = attn_find_kernel("fixture_unsupported", fixture("ATTN_FIXTURE_GOOD"), err, sizeof err);
    ck_assert_ptr_eq(f, &k[0]);
}
END_TEST

/* a plugin built against the version-1 header: its {name, fwd} table comes back as
 * version-2 entries that take only version-1 problems */
START_TEST(v1_plugin_loads) {
    char err[1024] = "";
    const attn_kernel *k = expect_load("ATTN_FIXTURE_V1", 2);
    const char *names[] = {"fixture_v1_a", "fixture_v1_b"};
    for (int i = 0; i < 2; i++) {
        ck_assert_str_eq(k[i].name, names[i]);
        ck_assert_uint_eq(k[i].caps, 0);
        ck_assert_uint_eq(k[i].dtypes, 0);
        ck_assert_ptr_null(k[i].head_dims);
    }
    /* the version-2 params reach the version-1 fwd with the version-1 fields in place */
    attn_fwd_params p = {.dtype = ATTN_BF16, .batch = 1, .heads = 4, .seqlen_q = 8,
                         .seqlen_k = 8, .head_dim = 64, .heads_k = 4, .window_left = -1,
                         .window_right = -1};
    ck_assert_int_eq(k[0].fwd(&p, 0), ATTN_OK);
    ck_assert_int_eq(k[1].fwd(&p, 0), ATTN_UNSUPPORTED);
    p.head_dim = 128;
    ck_assert_int_eq(k[0].fwd(&p, 0), ATTN_UNSUPPORTED);
    /* a version-1 problem is taken; one with a version-2 feature is not */
    char why[256];
    ck_assert_ptr_null(attn_kernel_lacks(&k[0], &p, why, sizeof why));
    p.heads_k = 2;
    ck_assert_ptr_eq(attn_kernel_lacks(&k[0], &p, why, sizeof why), why);
    ck_assert_msg(strstr(why, "kernel 'fixture_v1_a'") && strstr(why, "ATTN_CAP_GQA"), "%s", why);
    const attn_kernel *f = attn_find_kernel("fixture_v1_b", fixture("ATTN_FIXTURE_V1"), err, sizeof err);
    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_str_eq(f->name, "fixture_v1_b");
}
END_TEST

START_TEST(missing_kernel_name) {
    char err[1024] = "";
    ck_assert_ptr_null(attn_find_kernel("nope", fixture("ATTN_FIXTURE_GOOD"), err, sizeof err));
    ck_assert_msg(strstr(err, "has no kernel named 'nope'"), "%s", err);
}
END_TEST

START_TEST(nonexistent_file) {
    char err[1024] = "";
    int n;
    ck_assert_ptr_null(attn_plugin_load("/nonexistent/libx.so", &n, err, sizeof err));
    ck_assert_msg(strstr(err, "plugin /nonexistent/libx.so: cannot be loaded"), "%s", err);
}
END_TEST

START_TEST(not_a_library) { expect_error("ATTN_FIXTURE_NOT_ELF", "cannot be loaded"); }
END_TEST
START_TEST(no_symbol) { expect_error("ATTN_FIXTURE_NO_SYMBOL", "has no symbol attn_plugin_kernels"); }
END_TEST
START_TEST(bad_abi) { expect_error("ATTN_FIXTURE_BAD_ABI", "has ABI version 99; this harness takes versions 1 and 2"); }
END_TEST
START_TEST(bad_name) { expect_error("ATTN_FIXTURE_BAD_NAME", "invalid name 'Bad-Name'"); }
END_TEST

/* attn_plugin_tuning: found, absent (not tunable: no error), malformed (an error naming it) */
START_TEST(plugin_tunables) {
    char err[512];
    const attn_tuning *t = attn_plugin_find_tuning(fixture("ATTN_FIXTURE_GOOD"), "fixture_unsupported", err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_int_eq(t->count, 1);
    ck_assert_str_eq(t->tunables[0].name, "tile");
    ck_assert_ptr_null(attn_plugin_find_tuning(fixture("ATTN_FIXTURE_GOOD"), "x_untunable", err, sizeof err));
    ck_assert_str_eq(err, "");
    ck_assert_ptr_null(attn_plugin_find_tuning(fixture("ATTN_FIXTURE_V1"), "fixture_v1_a", err, sizeof err));
    ck_assert_str_eq(err, "");
    ck_assert_ptr_null(attn_plugin_find_tuning(fixture("ATTN_FIXTURE_BAD_NAME"), "k", err, sizeof err));
    ck_assert_msg(strstr(err, "tunable #0 ('tile') needs a [a-z0-9_]+ name and 1..64 values"), "%s", err);
}
END_TEST

/* the built-ins' tunables: flash2 has them (ATTN_TUNING in registry.def), simple none */
START_TEST(builtin_tunables) {
    char err[256];
    const attn_tuning *t = attn_find_tuning(attn_find_kernel("flash2", NULL, err, sizeof err), NULL, err, sizeof err);
    ck_assert_msg(t != NULL && t->count == 6, "%s", err);
    ck_assert_ptr_null(attn_find_tuning(attn_find_kernel("simple", NULL, err, sizeof err), NULL, err, sizeof err));
}
END_TEST

START_TEST(builtins) {
    int n;
    const attn_kernel *const *b = attn_builtin_kernels(&n);
    ck_assert_int_ge(n, 1);
    for (int i = 0; i < n; i++) ck_assert_msg(attn_kernel_name_valid(b[i]->name), "%s", b[i]->name);
    char err[256];
    ck_assert_ptr_null(attn_find_kernel("no_such_kernel", NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "no built-in kernel named 'no_such_kernel'"), "%s", err);
}
END_TEST

START_TEST(name_rule) {
    ck_assert(attn_kernel_name_valid("flash_v2_d128"));
    ck_assert(!attn_kernel_name_valid(""));
    ck_assert(!attn_kernel_name_valid("Flash"));
    ck_assert(!attn_kernel_name_valid("a-b"));
    ck_assert(!attn_kernel_name_valid("a/b"));
}
END_TEST

int main(void) {
    Suite *s = suite_create("plugin");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, good_plugin_loads);
    tcase_add_test(tc, v1_plugin_loads);
    tcase_add_test(tc, missing_kernel_name);
    tcase_add_test(tc, nonexistent_file);
    tcase_add_test(tc, not_a_library);
    tcase_add_test(tc, no_symbol);
    tcase_add_test(tc, bad_abi);
    tcase_add_test(tc, bad_name);
    tcase_add_test(tc, name_rule);
    tcase_add_test(tc, builtins);
    tcase_add_test(tc, plugin_tunables);
    tcase_add_test(tc, builtin_tunables);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
