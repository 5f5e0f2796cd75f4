/* The plugin loader: a good plugin loads; each broken one fails with a clear reason that
 * names the file. Fixture paths come from the environment (set by CTest). */
#include "unit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static int dummy_fwd(const attn_fwd_params *p, cudaStream_t s) {
    (void)p, (void)s;
    return ATTN_OK;
}

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

/* a plugin built against the version-2 header: its table is read with the version-2 layout
 * (a version-3 stride would take the second entry from the middle of the first), its
 * caps, dtypes and head dims kept and no head dim pairs (the version-2 rule) */
START_TEST(v2_plugin_loads) {
    char err[1024] = "";
    const attn_kernel *k = expect_load("ATTN_FIXTURE_V2", 2);
    ck_assert_str_eq(k[0].name, "fixture_v2_a");
    ck_assert_uint_eq(k[0].caps, ATTN_CAP_GQA | ATTN_CAP_HEAD_DIM_V);
    ck_assert_uint_eq(k[0].dtypes, 1u << ATTN_BF16);
    ck_assert_msg(k[0].head_dims && k[0].head_dims[0] == 64 && k[0].head_dims[1] == 128 &&
                  k[0].head_dims[2] == 192 && k[0].head_dims[3] == 0, "head_dims not kept");
    ck_assert_str_eq(k[1].name, "fixture_v2_b");
    ck_assert_uint_eq(k[1].caps, ATTN_CAP_WINDOW);
    ck_assert_uint_eq(k[1].dtypes, 0);
    ck_assert_ptr_null(k[1].head_dims);
    for (int i = 0; i < 2; i++) ck_assert_ptr_null(k[i].head_dim_pairs);
    attn_fwd_params p = {.dtype = ATTN_BF16, .batch = 1, .heads = 4, .seqlen_q = 8, .seqlen_k = 8,
                         .head_dim = 64, .heads_k = 2, .window_left = -1, .window_right = -1};
    ck_assert_int_eq(k[0].fwd(&p, 0), ATTN_OK);
    char why[256];
    ck_assert_ptr_null(attn_kernel_lacks(&k[0], &p, why, sizeof why));
    p.head_dim = 192, p.head_dim_v = 128; /* both listed, and ATTN_CAP_HEAD_DIM_V */
    ck_assert_ptr_null(attn_kernel_lacks(&k[0], &p, why, sizeof why));
    p.head_dim_v = 96;
    ck_assert_ptr_nonnull(attn_kernel_lacks(&k[0], &p, why, sizeof why));
    ck_assert_msg(strstr(why, "head_dim_v 96: its head_dims are 64, 128, 192"), "%s", why);
    p.dtype = ATTN_F16, p.head_dim_v = 0;
    ck_assert_ptr_nonnull(attn_kernel_lacks(&k[0], &p, why, sizeof why));
    ck_assert_msg(strstr(why, "dtype fp16"), "%s", why);
    const attn_kernel *f = attn_find_kernel("fixture_v2_b", fixture("ATTN_FIXTURE_V2"), err, sizeof err);
    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_str_eq(f->name, "fixture_v2_b");
    ck_assert_uint_eq(f->caps, ATTN_CAP_WINDOW);
}
END_TEST

/* version 3: a kernel's head_dim_pairs decide which (head_dim, head_dim_v) it takes */
START_TEST(pairs_plugin_loads) {
    const attn_kernel *k = expect_load("ATTN_FIXTURE_PAIRS", 1);
    ck_assert_str_eq(k[0].name, "fixture_pairs");
    ck_assert_msg(k[0].head_dim_pairs && k[0].head_dim_pairs[2] == 192 && k[0].head_dim_pairs[3] == 128,
                  "head_dim_pairs not read");
    attn_fwd_params p = {.dtype = ATTN_F16, .batch = 1, .heads = 4, .seqlen_q = 8, .seqlen_k = 8,
                         .head_dim = 192, .head_dim_v = 128, .heads_k = 4, .window_left = -1,
                         .window_right = -1};
    char why[256];
    ck_assert_ptr_null(attn_kernel_lacks(&k[0], &p, why, sizeof why));
    p.head_dim_v = 192;
    ck_assert_ptr_nonnull(attn_kernel_lacks(&k[0], &p, why, sizeof why));
    ck_assert_str_eq(why, "kernel 'fixture_pairs' does not take the head dim pair 192x192 (head_dim x head_dim_v): "
                          "its head_dim_pairs are 64x64, 192x128");
    p.head_dim = 64, p.head_dim_v = 0;
    ck_assert_ptr_null(attn_kernel_lacks(&k[0], &p, why, sizeof why));
}
END_TEST

/* a malformed head_dim_pairs: the entry is refused, naming the kernel and what is wrong */
START_TEST(pairs_checked) {
    static const int empty[] = {0}, odd[] = {64, 64, 128, 0}, negative[] = {64, -64, 0}, hdv[] = {192, 128, 0};
    static int endless[2 * 300];
    for (int i = 0; i < 2 * 300; i++) endless[i] = 64;
    const struct { const int *pairs; uint32_t caps; const char *expect; } cases[] = {
        {empty, 0, "kernel 'k': head_dim_pairs is empty (NULL takes any pair)"},
        {odd, 0, "kernel 'k': head_dim_pairs pair #1 is (128, 0): each must be >= 1 (the list ends inside a pair)"},
        {negative, 0, "pair #0 is (64, -64): each must be >= 1 (a negative value)"},
        {hdv, 0, "kernel 'k': head_dim_pairs lists 192x128 but ATTN_CAP_HEAD_DIM_V is not in its caps"},
        {endless, 0, "kernel 'k': head_dim_pairs has no 0 after 256 pairs"},
        {hdv, ATTN_CAP_HEAD_DIM_V, NULL},
        {NULL, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_kernel k = {.name = "k", .fwd = dummy_fwd, .caps = cases[i].caps, .head_dim_pairs = cases[i].pairs};
        char err[256] = "";
        const char *r = attn_kernel_entry_check(&k, 0, err, sizeof err);
        if (!cases[i].expect) {
            ck_assert_msg(r == NULL, "case %zu: %s", i, err);
        } else {
            ck_assert_msg(r == err && strstr(err, cases[i].expect), "case %zu: expected '%s' in: %s", i,
                          cases[i].expect, err);
        }
    }
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
START_TEST(bad_abi) { expect_error("ATTN_FIXTURE_BAD_ABI", "has ABI version 99; this harness takes versions 1 to 5"); }
END_TEST
START_TEST(bad_pairs) {
    expect_error("ATTN_FIXTURE_BAD_PAIRS",
                 "kernel 'fixture_bad_pairs': head_dim_pairs lists 192x128 but ATTN_CAP_HEAD_DIM_V is not in its caps");
}
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
    char why[256];
    for (int i = 0; i < n; i++) ck_assert_msg(!attn_kernel_entry_check(b[i], i, why, sizeof why), "%s", why);
    char err[256];
    ck_assert_ptr_null(attn_find_kernel("no_such_kernel", NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "no built-in kernel named 'no_such_kernel'"), "%s", err);
}
END_TEST

/* flash2 takes 192 x 128 and not 192 x 192 (its fwd answers ATTN_UNSUPPORTED): its pairs say
 * so before any launch; simple takes any pair (up to 256) */
START_TEST(builtin_pairs) {
    char err[256], why[512];
    const attn_kernel *f = attn_find_kernel("flash2", NULL, err, sizeof err), *s = attn_find_kernel("simple", NULL, err, sizeof err);
    ck_assert_msg(f && s, "%s", err);
    attn_fwd_params p = {.dtype = ATTN_BF16, .batch = 1, .heads = 4, .seqlen_q = 8, .seqlen_k = 8,
                         .head_dim = 192, .head_dim_v = 128, .heads_k = 4, .window_left = -1, .window_right = -1};
    ck_assert_ptr_null(attn_kernel_lacks(f, &p, why, sizeof why));
    const int d[][2] = {{64, 64}, {96, 0}, {128, 128}, {256, 0}};
    for (int i = 0; i < 4; i++) {
        p.head_dim = d[i][0], p.head_dim_v = d[i][1];
        ck_assert_msg(!attn_kernel_lacks(f, &p, why, sizeof why), "%s", why);
    }
    const int not[][2] = {{192, 0}, {192, 192}, {64, 128}, {128, 64}, {256, 128}};
    for (int i = 0; i < 5; i++) {
        p.head_dim = not[i][0], p.head_dim_v = not[i][1];
        ck_assert_ptr_nonnull(attn_kernel_lacks(f, &p, why, sizeof why));
        char pair[32];
        snprintf(pair, sizeof pair, "pair %dx%d ", not[i][0], not[i][1] ? not[i][1] : not[i][0]);
        ck_assert_msg(strstr(why, pair) && strstr(why, "64x64, 96x96, 128x128, 256x256, 192x128"), "%s", why);
        ck_assert_ptr_null(attn_kernel_lacks(s, &p, why, sizeof why));
    }
}
END_TEST

/* simple refuses an invalid problem (an error: neither ATTN_OK nor ATTN_UNSUPPORTED) before
 * any launch, as attn_abi.h says, rather than compute another problem (heads_k 0 as heads,
 * causal with window_right > 0 as causal, paged lengths from cu_seqlens_k). No GPU needed:
 * the valid problem is too large to launch (over 2^31 blocks), which simple answers
 * ATTN_UNSUPPORTED before any launch too. */
START_TEST(simple_refuses_invalid) {
    static char buf[64];
    static const int32_t arr[4] = {0};
    char err[256];
    const attn_kernel *k = attn_find_kernel("simple", NULL, err, sizeof err);
    ck_assert_msg(k != NULL, "%s", err);
    const attn_fwd_params valid = {
        .dtype = ATTN_F16, .batch = 65535, .heads = 64, .seqlen_q = 4096, .seqlen_k = 4096, .head_dim = 64,
        .softmax_scale = 0.125f, .q = buf, .k = buf, .v = buf, .o = buf,
        .q_batch_stride = 1 << 24, .q_head_stride = 64, .q_row_stride = 4096,
        .k_batch_stride = 1 << 24, .k_head_stride = 64, .k_row_stride = 4096,
        .v_batch_stride = 1 << 24, .v_head_stride = 64, .v_row_stride = 4096,
        .o_batch_stride = 1 << 24, .o_head_stride = 64, .o_row_stride = 4096,
        .heads_k = 64, .window_left = -1, .window_right = -1};
    attn_fwd_params p = valid;
    ck_assert_int_eq(k->fwd(&p, 0), ATTN_UNSUPPORTED);
    p.block_table = arr, p.page_size = 16, p.num_pages = 1, p.block_table_stride = 256, p.seqlen_k = 4000;
    ck_assert_int_eq(k->fwd(&p, 0), ATTN_UNSUPPORTED); /* paged, seqlen_k < 256 x 16: valid */
    for (int i = 0; i < 13; i++) {
        p = valid;
        if (i == 0) p.heads_k = 0;
        if (i == 1) p.heads_k = 3;
        if (i == 2) p.causal = 1, p.window_right = 2;
        if (i == 3) p.window_left = -2;
        if (i >= 4 && i <= 6) p.block_table = arr, p.page_size = 16, p.num_pages = 1, p.block_table_stride = 256;
        if (i == 4) p.cu_seqlens_k = arr;
        if (i == 5) p.seqlen_k = 4097;
        if (i == 6) p.num_pages = 0;
        if (i == 7) p.k_head_stride = -64;
        if (i == 8) p.o_batch_stride = -1;
        if (i == 9) p.q_row_stride = 0;
        if (i == 10) p.v_row_stride = 0;
        if (i == 11) p.o_head_stride = 0; /* a broadcast output */
        if (i == 12) p.o_batch_stride = 0;
        const int rc = k->fwd(&p, 0);
        ck_assert_msg(rc != ATTN_OK && rc != ATTN_UNSUPPORTED, "invalid problem %d: simple answered %d", i, rc);
    }
    p = valid;
    p.seqlen_q = 1, p.q_row_stride = p.o_row_stride = 0, p.batch = 65535 * 4096; /* one query row */
    ck_assert_int_eq(k->fwd(&p, 0), ATTN_UNSUPPORTED);
}
END_TEST

/* a version-4 table (no backward fields): read with its own stride, each field kept, no bwd */
START_TEST(v4_plugin_loads) {
    const attn_kernel *k = expect_load("ATTN_FIXTURE_V4", 2);
    ck_assert_str_eq(k[0].name, "fixture_v4_a");
    ck_assert_uint_eq(k[0].caps, ATTN_CAP_HEAD_DIM_V);
    ck_assert_uint_eq(k[0].dtypes, 1u << ATTN_F16);
    ck_assert_msg(k[0].head_dim_pairs && k[0].head_dim_pairs[0] == 192 && k[0].head_dim_pairs[1] == 128,
                  "head_dim_pairs not kept");
    ck_assert_str_eq(k[1].name, "fixture_v4_b");
    ck_assert_uint_eq(k[1].caps, ATTN_CAP_SOFTCAP);
    ck_assert_msg(k[1].head_dims && k[1].head_dims[0] == 96, "head_dims not kept");
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_null(k[i].bwd);
        ck_assert_ptr_null(k[i].bwd_workspace);
        ck_assert_uint_eq(k[i].bwd_caps, 0);
    }
    attn_fwd_params p = {.dtype = ATTN_F16, .batch = 1, .heads = 1, .heads_k = 1, .seqlen_q = 8, .seqlen_k = 8,
                         .head_dim = 96, .window_left = -1, .window_right = -1};
    attn_bwd_params bp = {.fwd = &p};
    char why[256];
    ck_assert_ptr_nonnull(attn_kernel_lacks_bwd(&k[1], &bp, why, sizeof why));
    ck_assert_str_eq(why, "kernel 'fixture_v4_b' does not take the backward pass: it has no bwd");
}
END_TEST

static int dummy_bwd(const attn_bwd_params *p, cudaStream_t s) {
    (void)p, (void)s;
    return ATTN_OK;
}
static size_t dummy_workspace(const attn_bwd_params *p) {
    (void)p;
    return 0;
}

/* version 5: backward fields without a bwd are refused; bwd_caps decide what bwd takes */
START_TEST(bwd_entry) {
    char err[256];
    attn_kernel k = {.name = "k", .fwd = dummy_fwd, .bwd_caps = ATTN_CAP_GQA};
    ck_assert_ptr_nonnull(attn_kernel_entry_check(&k, 0, err, sizeof err));
    ck_assert_str_eq(err, "kernel 'k' has bwd_caps but no bwd function");
    k = (attn_kernel){.name = "k", .fwd = dummy_fwd, .bwd_workspace = dummy_workspace};
    ck_assert_ptr_nonnull(attn_kernel_entry_check(&k, 0, err, sizeof err));
    ck_assert_str_eq(err, "kernel 'k' has bwd_workspace but no bwd function");
    /* forward caps GQA, backward none: the backward of a GQA problem is not taken */
    k = (attn_kernel){.name = "k", .fwd = dummy_fwd, .caps = ATTN_CAP_GQA | ATTN_CAP_VARLEN, .bwd = dummy_bwd,
                      .bwd_caps = ATTN_CAP_VARLEN};
    ck_assert_ptr_null(attn_kernel_entry_check(&k, 0, err, sizeof err));
    attn_fwd_params p = {.dtype = ATTN_F16, .batch = 1, .heads = 4, .heads_k = 2, .seqlen_q = 8, .seqlen_k = 8,
                         .head_dim = 64, .window_left = -1, .window_right = -1};
    attn_bwd_params bp = {.fwd = &p};
    ck_assert_ptr_null(attn_kernel_lacks(&k, &p, err, sizeof err));
    ck_assert_ptr_nonnull(attn_kernel_lacks_bwd(&k, &bp, err, sizeof err));
    ck_assert_str_eq(err, "kernel 'k' does not take grouped KV heads (heads_k 2 < heads 4): ATTN_CAP_GQA not in its "
                          "bwd_caps");
    p.heads_k = 4;
    ck_assert_ptr_null(attn_kernel_lacks_bwd(&k, &bp, err, sizeof err));
    bp.deterministic = 1;
    ck_assert_ptr_nonnull(attn_kernel_lacks_bwd(&k, &bp, err, sizeof err));
    ck_assert_str_eq(err, "kernel 'k' does not take a deterministic backward: ATTN_BWD_DETERMINISTIC not in its "
                          "bwd_caps");
    k.bwd_caps |= ATTN_BWD_DETERMINISTIC;
    ck_assert_ptr_null(attn_kernel_lacks_bwd(&k, &bp, err, sizeof err));
    static const int32_t table[1] = {0};
    p.block_table = table, p.page_size = 8, p.num_pages = 1, p.block_table_stride = 1;
    ck_assert_ptr_nonnull(attn_kernel_lacks_bwd(&k, &bp, err, sizeof err));
    ck_assert_msg(strstr(err, "paged K/V (block_table) has no backward"), "%s", err);
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
    tcase_add_test(tc, v2_plugin_loads);
    tcase_add_test(tc, pairs_plugin_loads);
    tcase_add_test(tc, pairs_checked);
    tcase_add_test(tc, v4_plugin_loads);
    tcase_add_test(tc, bwd_entry);
    tcase_add_test(tc, bad_pairs);
    tcase_add_test(tc, builtin_pairs);
    tcase_add_test(tc, simple_refuses_invalid);
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
