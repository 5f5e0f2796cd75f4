/* The bridge's C side without a GPU: plugins built from bridge.c for the probe kernels of
 * probe_kernels.py ("raw" kernels, no torch) load through the harness's loader with their
 * declarations, and a fwd call hands every field of attn_fwd_params, the stream and the
 * layouts' tensors to Python; a Python exception fails the call (traceback on stderr), and
 * attn_bridge.Unsupported answers ATTN_UNSUPPORTED. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "registry.h"

static const attn_kernel *load(const char *env) {
    const char *path = getenv(env);
    ck_assert_msg(path, "%s is not set", env);
    char err[512];
    int n = 0;
    const attn_kernel *k = attn_plugin_load(path, &n, err, sizeof err);
    ck_assert_msg(k && n == 1, "%s", err);
    return k;
}

/* fwd with stderr captured into buf */
static int call(const attn_kernel *k, const attn_fwd_params *p, cudaStream_t s, char *buf, size_t len) {
    char path[] = "/tmp/attn_bridge_stderr_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    int rc = k->fwd(p, s);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, len - 1, f) : 0;
    buf[got] = 0;
    if (f) fclose(f);
    close(fd);
    unlink(path);
    return rc;
}

/* every field different, so that one read as another shows */
static attn_fwd_params distinct(void) {
    attn_fwd_params p = {0};
    p.dtype = ATTN_BF16, p.batch = 3, p.heads = 12, p.seqlen_q = 17, p.seqlen_k = 40, p.head_dim = 192;
    p.causal = 1, p.softmax_scale = 0.0721f;
    p.q = (void *)0x10000, p.k = (void *)0x20000, p.v = (void *)0x30000, p.o = (void *)0x40000;
    p.lse = (float *)0x50000;
    p.q_batch_stride = 1001, p.q_head_stride = 1002, p.q_row_stride = 1003;
    p.k_batch_stride = 1004, p.k_head_stride = 1005, p.k_row_stride = 1006;
    p.v_batch_stride = 1007, p.v_head_stride = 0, p.v_row_stride = 1009;
    p.o_batch_stride = 1010, p.o_head_stride = 1011, p.o_row_stride = 1012;
    p.heads_k = 4, p.window_left = 33, p.window_right = 0, p.softcap = 30.5f, p.head_dim_v = 128;
    p.cu_seqlens_q = (const int32_t *)0x60000, p.block_table = (const int32_t *)0x80000;
    p.block_table_stride = 5, p.page_size = 16, p.num_pages = 77, p.seqused_k = (const int32_t *)0x90000;
    p.total_q = 29, p.total_k = 0;
    return p;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "%s was not written", path);
    static char buf[1 << 14];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

#define HAS(text, line) ck_assert_msg(strstr(text, line "\n"), "missing '%s' in:\n%s", line, text)

START_TEST(declaration_through_the_loader) {
    const attn_kernel *k = load("ATTN_PROBE_RECORD");
    ck_assert_str_eq(k->name, "probe_record");
    ck_assert_uint_eq(k->caps, ATTN_CAP_GQA | ATTN_CAP_VARLEN | ATTN_CAP_PAGED | ATTN_CAP_HEAD_DIM_V);
    ck_assert_uint_eq(k->dtypes, 1u << ATTN_BF16);
    ck_assert_ptr_null(k->head_dims);
    const int want[] = {64, 64, 192, 128, 0};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(k->head_dim_pairs[i], want[i]);
    k = load("ATTN_PROBE_RAISES");
    ck_assert_str_eq(k->name, "probe_raises");
    ck_assert_int_eq(k->head_dims[0], 64);
    ck_assert_int_eq(k->head_dims[1], 0);
    ck_assert_uint_eq(k->caps, 0);
    ck_assert_uint_eq(k->dtypes, 3);
}
END_TEST

START_TEST(every_field_reaches_python) {
    const attn_kernel *k = load("ATTN_PROBE_RECORD");
    const attn_fwd_params p = distinct();
    char err[4096];
    int rc = call(k, &p, (cudaStream_t)0xabc0, err, sizeof err);
    ck_assert_msg(rc == ATTN_OK, "fwd returned %d: %s", rc, err);
    const char *out = slurp(getenv("ATTN_PROBE_OUT"));
    static const char *const lines[] = {
        "field dtype 1", "field batch 3", "field heads 12", "field seqlen_q 17", "field seqlen_k 40",
        "field head_dim 192", "field causal 1", "field softmax_scale 0.0721", "field q 65536", "field k 131072",
        "field v 196608", "field o 262144", "field lse 327680", "field q_batch_stride 1001",
        "field q_head_stride 1002", "field q_row_stride 1003", "field k_batch_stride 1004", "field k_head_stride 1005",
        "field k_row_stride 1006", "field v_batch_stride 1007", "field v_head_stride 0", "field v_row_stride 1009",
        "field o_batch_stride 1010", "field o_head_stride 1011", "field o_row_stride 1012", "field heads_k 4",
        "field window_left 33", "field window_right 0", "field softcap 30.5", "field head_dim_v 128",
        "field cu_seqlens_q 393216", "field cu_seqlens_k 0", "field block_table 524288",
        "field block_table_stride 5", "field page_size 16", "field num_pages 77", "field seqused_k 589824",
        "field total_q 29", "field total_k 0",
        /* packed Q (29 rows), paged K/V (77 pages of 16), the LSE [heads][total_q] */
        "spec q 65536 29,12,192 1003,1002,1 bf16", "spec o 262144 29,12,128 1012,1011,1 bf16",
        "spec k 131072 77,16,4,192 1004,1006,1005,1 bf16", "spec v 196608 77,16,4,128 1007,1009,0,1 bf16",
        "spec lse 327680 12,29 29,1 f32", "spec cu_seqlens_q 393216 4 1 i32", "spec cu_seqlens_k none",
        "spec block_table 524288 3,5 5,1 i32", "spec seqused_k 589824 3 1 i32", "stream 43968",
        "problem bf16 128 True True False True"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        ck_assert_msg(strstr(out, lines[i]) && strstr(out, lines[i])[strlen(lines[i])] == '\n',
                      "missing '%s' in:\n%s", lines[i], out);
    int fields = 0;
    for (const char *c = out; (c = strstr(c, "field ")); c++) fields++;
    ck_assert_int_eq(fields, 39); /* every field of attn_fwd_params but none more */
}
END_TEST

START_TEST(an_exception_fails_the_call_with_its_traceback) {
    const attn_kernel *k = load("ATTN_PROBE_RAISES");
    attn_fwd_params p = distinct();
    char err[8192];
    int rc = call(k, &p, NULL, err, sizeof err);
    ck_assert_msg(rc != ATTN_OK && rc != ATTN_UNSUPPORTED, "fwd returned %d", rc);
    ck_assert_msg(strstr(err, "python kernel 'probe_raises' raised:") && strstr(err, "Traceback") &&
                      strstr(err, "ValueError: probe failure at batch 3"),
                  "no traceback in:\n%s", err);
    rc = call(k, &p, NULL, err, sizeof err); /* and again: the bridge is still usable */
    ck_assert_int_eq(rc, 3);
}
END_TEST

START_TEST(unsupported_is_not_a_failure) {
    const attn_kernel *k = load("ATTN_PROBE_UNSUPPORTED");
    attn_fwd_params p = distinct();
    char err[4096];
    ck_assert_int_eq(call(k, &p, NULL, err, sizeof err), ATTN_UNSUPPORTED);
    ck_assert_msg(strstr(err, "python kernel 'probe_unsupported': not supported: probe says no"), "%s", err);
}
END_TEST

int main(void) {
    Suite *s = suite_create("python_bridge");
    TCase *tc = tcase_create("bridge");
    tcase_add_test(tc, declaration_through_the_loader);
    tcase_add_test(tc, every_field_reaches_python);
    tcase_add_test(tc, an_exception_fails_the_call_with_its_traceback);
    tcase_add_test(tc, unsupported_is_not_a_failure);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* one process, one interpreter, as the harness runs it */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
