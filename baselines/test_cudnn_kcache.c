/* Host test of the cuDNN baseline's kernel cache option (cudnn_kcache.c; no GPU): how
 * $ATTN_CUDNN_KERNEL_CACHE and opts.kernel_cache resolve (on for untuned plans only when
 * asked, never for the benchmarks' baseline), which plans try a dynamic-shape graph, and,
 * with the libcudnn this machine loads, that cuDNN takes the attributes as declared here, that
 * the handle's cache is made once and keeps the graph it was made from, and that a refused
 * dynamic attempt leaves the plan as it was and says why. The library parts are skipped (said
 * on stdout) where libcudnn cannot be loaded. */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_sdpa_internal.h"

static attn_cudnn *lib; /* NULL: libcudnn not loadable here */

START_TEST(test_env) {
    char why[256] = "";
    int v = 7;
    unsetenv("ATTN_CUDNN_KERNEL_CACHE");
    ck_assert_int_eq(attn_cudnn_kernel_cache_env(&v, why, sizeof why), 0);
    ck_assert_int_eq(v, -1);
    static const char *const ok[3] = {"", "0", "1"};
    static const int want[3] = {-1, 0, 1};
    for (int i = 0; i < 3; i++) {
        setenv("ATTN_CUDNN_KERNEL_CACHE", ok[i], 1);
        ck_assert_int_eq(attn_cudnn_kernel_cache_env(&v, why, sizeof why), 0);
        ck_assert_msg(v == want[i], "ATTN_CUDNN_KERNEL_CACHE='%s': %d, expected %d", ok[i], v, want[i]);
    }
    static const char *const bad[3] = {"2", "yes", "-1"};
    for (int i = 0; i < 3; i++) {
        setenv("ATTN_CUDNN_KERNEL_CACHE", bad[i], 1);
        why[0] = 0;
        ck_assert_msg(attn_cudnn_kernel_cache_env(&v, why, sizeof why) != 0, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(why, "ATTN_CUDNN_KERNEL_CACHE"), "the message does not name the variable: %s", why);
    }
    unsetenv("ATTN_CUDNN_KERNEL_CACHE");
}
END_TEST

/* opts.kernel_cache as sdpa_resolve_opts leaves it, with $ATTN_CUDNN_AUTOTUNE `autotune`
 * (NULL: unset) */
static int resolved(const attn_cudnn_plan_opts *in, const char *autotune) {
    if (autotune) setenv("ATTN_CUDNN_AUTOTUNE", autotune, 1);
    else unsetenv("ATTN_CUDNN_AUTOTUNE");
    attn_cudnn_plan_opts o;
    char why[256];
    ck_assert_int_eq(sdpa_resolve_opts(in, &o, why, sizeof why), 0);
    unsetenv("ATTN_CUDNN_AUTOTUNE");
    return o.kernel_cache;
}

START_TEST(test_resolve) {
    /* the benchmarks' baseline (no options, or the defaults) never uses it, tuned or not */
    ck_assert_int_eq(resolved(NULL, NULL), 0);
    ck_assert_int_eq(resolved(NULL, "0"), 0);
    attn_cudnn_plan_opts o = attn_cudnn_plan_opts_default();
    ck_assert_int_eq(o.kernel_cache, 0);
    ck_assert_int_eq(resolved(&o, "0"), 0);
    /* -1 (the cudnn kernel's default): on exactly when the plan is not tuned */
    o.kernel_cache = -1;
    ck_assert_int_eq(resolved(&o, NULL), 0);
    ck_assert_int_eq(resolved(&o, "1"), 0);
    ck_assert_int_eq(resolved(&o, "0"), 1);
    o.tune = 0;
    ck_assert_int_eq(resolved(&o, "1"), 1);
    o.tune = 1;
    ck_assert_int_eq(resolved(&o, "0"), 0);
    /* set: as set */
    o.kernel_cache = 1;
    ck_assert_int_eq(resolved(&o, NULL), 1);
    o.kernel_cache = 0, o.tune = 0;
    ck_assert_int_eq(resolved(&o, NULL), 0);
}
END_TEST

START_TEST(test_skip) {
    attn_cudnn c;
    memset(&c, 0, sizeof c);
    c.version = 91900;
    ck_assert_str_eq(sdpa_kc_skip(&c, 0, FORM_COMPOSITE), "off");
    ck_assert_ptr_null(sdpa_kc_skip(&c, 1, FORM_COMPOSITE));
    ck_assert_ptr_null(sdpa_kc_skip(&c, 1, FORM_BWD));
    const char *op = sdpa_kc_skip(&c, 1, FORM_SDPA_OP);
    ck_assert_msg(op && strstr(op, "single SDPA operation"), "the single op: %s", op ? op : "tried");
    c.version = 90500;
    ck_assert_ptr_null(sdpa_kc_skip(&c, 1, FORM_BWD));
    c.version = 90402;
    const char *old = sdpa_kc_skip(&c, 1, FORM_COMPOSITE);
    ck_assert_msg(old && strstr(old, "9.5"), "cuDNN 9.4: %s", old ? old : "tried");
    c.version = 91900;
    snprintf(c.kcache_why, sizeof c.kcache_why, "not tried: the kernel cache could not be made: x");
    ck_assert_str_eq(sdpa_kc_skip(&c, 1, FORM_BWD), c.kcache_why);
}
END_TEST

/* The attributes as cuDNN takes them: the dynamic-shape flag a boolean (an int64 refused: the
 * check can fail), the kernel cache made and finalized, set on an execution plan. */
START_TEST(test_attributes) {
    if (!lib) return;
    void *g = NULL, *kc = NULL, *plan = NULL;
    const bool on = true;
    const int64_t one = 1;
    ck_assert_int_eq(lib->f.CreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g), CUDNN_STATUS_SUCCESS);
    ck_assert_int_eq(lib->f.SetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, CUDNN_TYPE_BOOLEAN, 1,
                                         &on), CUDNN_STATUS_SUCCESS);
    ck_assert_int_ne(lib->f.SetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED, CUDNN_TYPE_INT64, 1,
                                         &one), CUDNN_STATUS_SUCCESS);
    if (lib->version >= KCACHE_MIN_VERSION) {
        ck_assert_int_eq(lib->f.CreateDescriptor(CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR, &kc), CUDNN_STATUS_SUCCESS);
        ck_assert_int_eq(lib->f.SetAttribute(kc, CUDNN_ATTR_KERNEL_CACHE_OPERATION_GRAPH,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g), CUDNN_STATUS_SUCCESS);
        ck_assert_int_eq(lib->f.Finalize(kc), CUDNN_STATUS_SUCCESS);
        ck_assert_int_eq(lib->f.CreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan), CUDNN_STATUS_SUCCESS);
        ck_assert_int_eq(lib->f.SetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &kc), CUDNN_STATUS_SUCCESS);
        lib->f.DestroyDescriptor(plan);
        lib->f.DestroyDescriptor(kc);
    }
    lib->f.DestroyDescriptor(g);
}
END_TEST

/* A dense BSHD fp16 problem */
static attn_fwd_params dense(int causal) {
    attn_fwd_params f;
    memset(&f, 0, sizeof f);
    f.dtype = ATTN_F16, f.batch = 2, f.heads = 4, f.seqlen_q = 128, f.seqlen_k = 256, f.head_dim = 64;
    f.causal = causal, f.window_left = f.window_right = -1, f.softmax_scale = 0.125f;
    f.q_batch_stride = f.o_batch_stride = 128 * 4 * 64, f.k_batch_stride = f.v_batch_stride = 256 * 4 * 64;
    f.q_head_stride = f.k_head_stride = f.v_head_stride = f.o_head_stride = 64;
    f.q_row_stride = f.k_row_stride = f.v_row_stride = f.o_row_stride = 4 * 64;
    return f;
}

/* The handle's cache is made once, from the first graph, which the handle then keeps. */
START_TEST(test_bind) {
    if (!lib || lib->version < KCACHE_MIN_VERSION) return;
    attn_fwd_params f = dense(0);
    attn_cudnn_plan *pl = sdpa_new_plan(lib, &f);
    ck_assert_ptr_nonnull(pl);
    char why[1024] = "";
    builder b = {lib, pl, why, sizeof why, 100, 0, 0, 1};
    void *g = sdpa_mk(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    ck_assert_ptr_nonnull(g);
    const int n = pl->n_descs;
    ck_assert_msg(sdpa_kcache_bind(&b, g) == 0, "%s", why);
    ck_assert_ptr_nonnull(lib->kcache);
    ck_assert_ptr_eq(lib->kcache_graph, g);
    ck_assert_int_eq(pl->n_descs, n - 1); /* the plan no longer destroys it */
    void *kc = lib->kcache;
    void *g2 = sdpa_mk(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    ck_assert_int_eq(sdpa_kcache_bind(&b, g2), 0);
    ck_assert_ptr_eq(lib->kcache, kc);
    ck_assert_int_eq(pl->n_descs, n); /* g2 stays the plan's */
    attn_cudnn_plan_destroy(pl);
}
END_TEST

/* A graph that cannot be built here (no handle, so no operation graph): the dynamic attempt
 * and then the static one fail, the plan is left as it was, the note says the dynamic graph
 * was refused; with the option off, only the static attempt, and the note says "off". */
START_TEST(test_fallback) {
    if (!lib || lib->version < KCACHE_MIN_VERSION) return;
    for (int want = 0; want < 2; want++) {
        attn_fwd_params f = dense(1);
        attn_cudnn_plan *pl = sdpa_new_plan(lib, &f);
        ck_assert_ptr_nonnull(pl);
        pl->kc_want = want;
        const problem pr = sdpa_problem_of(&f);
        char why[4096] = "";
        builder b = {lib, pl, why, sizeof why, 100, 0, 0, 0};
        ck_assert_int_ne(sdpa_build_graph(&b, &pr, FORM_COMPOSITE, false), 0);
        ck_assert_msg(strstr(why, "handle"), "the static attempt's reason: %s", why);
        ck_assert_int_eq(pl->n_descs, 0);
        ck_assert_int_eq(pl->n_uids, 0);
        ck_assert_int_eq(pl->kc_used, 0);
        printf("kernel cache %s: %s\n", want ? "wanted" : "off", pl->kc_note);
        if (want) ck_assert_msg(!strncmp(pl->kc_note, "refused by cuDNN", 16), "note: %s", pl->kc_note);
        else ck_assert_str_eq(pl->kc_note, "off");
        attn_cudnn_plan_destroy(pl);
    }
}
END_TEST

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: attn_unit_cudnn_kernel_cache\n"
               "The cuDNN baseline's kernel cache option, host only: the environment and options, which plans try\n"
               "it, and (where libcudnn loads) the attributes, the cache's making and the fallback. 0 pass, 1 fail.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "attn_unit_cudnn_kernel_cache: unknown argument '%s' (it takes none; --help)\n", argv[1]);
        return 2;
    }
    char why[2048];
    if (sdpa_open_library(&lib, why, sizeof why)) {
        printf("libcudnn not loaded, its checks skipped: %s\n", why);
        lib = NULL;
    } else {
        printf("cuDNN %ld\n", lib->version);
    }
    Suite *s = suite_create("cudnn_kernel_cache");
    TCase *tc = tcase_create("kernel_cache");
    tcase_add_test(tc, test_env);
    tcase_add_test(tc, test_resolve);
    tcase_add_test(tc, test_skip);
    tcase_add_test(tc, test_attributes);
    tcase_add_test(tc, test_bind);
    tcase_add_test(tc, test_fallback);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    attn_cudnn_close(lib);
    return failed != 0;
}
