/* The bridge's C side without a GPU: plugins built from bridge.c for the probe kernels of
 * probe_kernels.py ("raw" kernels, no torch) load through the harness's loader with their
 * declarations, and a fwd call hands every field of attn_fwd_params, the stream and the
 * layouts' tensors to Python; a Python exception fails the call (traceback on stderr), and
 * attn_bridge.Unsupported answers ATTN_UNSUPPORTED. A declared backward is exported (bwd,
 * bwd_caps, bwd_workspace; a fwd-only kernel has none) and its calls behave alike. */
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

/* stderr goes to a temporary file from capture_start to capture_end, which reads it into buf */
typedef struct {
    char path[40];
    int fd, saved;
} capture;

static void capture_start(capture *c) {
    strcpy(c->path, "/tmp/attn_bridge_stderr_XXXXXX");
    c->fd = mkstemp(c->path), c->saved = dup(2);
    fflush(stderr);
    dup2(c->fd, 2);
}

static void capture_end(capture *c, char *buf, size_t len) {
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    FILE *f = fopen(c->path, "r");
    size_t got = f ? fread(buf, 1, len - 1, f) : 0;
    buf[got] = 0;
    if (f) fclose(f);
    close(c->fd);
    unlink(c->path);
}

/* fwd with stderr captured into buf */
static int call(const attn_kernel *k, const attn_fwd_params *p, cudaStream_t s, char *buf, size_t len) {
    capture c;
    capture_start(&c);
    int rc = k->fwd(p, s);
    capture_end(&c, buf, len);
    return rc;
}

/* bwd (or, when ws is set, bwd_workspace into *ws) with stderr captured into buf */
static int call_bwd(const attn_kernel *k, const attn_bwd_params *p, cudaStream_t s, size_t *ws, char *buf,
                    size_t len) {
    capture c;
    capture_start(&c);
    int rc = ATTN_OK;
    if (ws)
        *ws = k->bwd_workspace(p);
    else
        rc = k->bwd(p, s);
    capture_end(&c, buf, len);
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

/* a backward problem, every field different: packed Q and K (no paged backward in the ABI) */
static attn_fwd_params distinct_bwd_fwd(void) {
    attn_fwd_params p = distinct();
    p.block_table = NULL, p.block_table_stride = 0, p.page_size = 0, p.num_pages = 0;
    p.cu_seqlens_k = (const int32_t *)0x70000, p.total_k = 55;
    return p;
}

static attn_bwd_params distinct_bwd(const attn_fwd_params *f) {
    attn_bwd_params b = {0};
    b.fwd = f;
    b.dout = (const void *)0xa0000, b.do_batch_stride = 2001, b.do_head_stride = 2002, b.do_row_stride = 2003;
    b.dq = (void *)0xb0000, b.dq_batch_stride = 2004, b.dq_head_stride = 2005, b.dq_row_stride = 2006;
    b.dk = (void *)0xc0000, b.dk_batch_stride = 2007, b.dk_head_stride = 2008, b.dk_row_stride = 2009;
    b.dv = (void *)0xd0000, b.dv_batch_stride = 2010, b.dv_head_stride = 0, b.dv_row_stride = 2012;
    b.deterministic = 1, b.workspace = (void *)0xe0000, b.workspace_bytes = 3001;
    return b;
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

/* every line of lines[n] is a whole line of out; returns how many lines of out start "field " */
static int expect_lines(const char *out, const char *const *lines, size_t n) {
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strstr(out, lines[i]) && strstr(out, lines[i])[strlen(lines[i])] == '\n',
                      "missing '%s' in:\n%s", lines[i], out);
    int fields = 0;
    for (const char *c = out; (c = strstr(c, "field ")); c++) fields++;
    return fields;
}

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

START_TEST(a_declared_backward_is_exported) {
    const attn_kernel *k = load("ATTN_PROBE_RECORD");
    ck_assert_ptr_nonnull(k->bwd);
    ck_assert_ptr_nonnull(k->bwd_workspace);
    ck_assert_uint_eq(k->bwd_caps, ATTN_CAP_GQA | ATTN_CAP_VARLEN | ATTN_CAP_SOFTCAP | ATTN_BWD_DETERMINISTIC);
    k = load("ATTN_PROBE_UNSUPPORTED"); /* caps: the forward's (none); no workspace declared */
    ck_assert_ptr_nonnull(k->bwd);
    ck_assert_ptr_null(k->bwd_workspace);
    ck_assert_uint_eq(k->bwd_caps, 0);
    k = load("ATTN_PROBE_NOOP"); /* fwd only */
    ck_assert_ptr_null(k->bwd);
    ck_assert_ptr_null(k->bwd_workspace);
    ck_assert_uint_eq(k->bwd_caps, 0);
}
END_TEST

START_TEST(every_bwd_field_reaches_python) {
    const attn_kernel *k = load("ATTN_PROBE_RECORD");
    const attn_fwd_params f = distinct_bwd_fwd();
    const attn_bwd_params b = distinct_bwd(&f);
    char err[4096];
    size_t ws = 0;
    ck_assert_int_eq(call_bwd(k, &b, NULL, &ws, err, sizeof err), ATTN_OK);
    ck_assert_msg(ws == 3001, "bwd_workspace gave %zu (want 1000 * batch + deterministic): %s", ws, err);
    int rc = call_bwd(k, &b, (cudaStream_t)0xabc0, NULL, err, sizeof err);
    ck_assert_msg(rc == ATTN_OK, "bwd returned %d: %s", rc, err);
    const char *out = slurp(getenv("ATTN_PROBE_OUT"));
    static const char *const lines[] = {
        "field dtype 1", "field batch 3", "field heads 12", "field head_dim 192", "field softcap 30.5",
        "field q 65536", "field o 262144", "field lse 327680", "field cu_seqlens_k 458752", "field total_k 55",
        "field block_table 0", "field dout 655360", "field do_batch_stride 2001", "field do_head_stride 2002",
        "field do_row_stride 2003", "field dq 720896", "field dq_batch_stride 2004", "field dq_head_stride 2005",
        "field dq_row_stride 2006", "field dk 786432", "field dk_batch_stride 2007", "field dk_head_stride 2008",
        "field dk_row_stride 2009", "field dv 851968", "field dv_batch_stride 2010", "field dv_head_stride 0",
        "field dv_row_stride 2012", "field deterministic 1", "field workspace 917504",
        "field workspace_bytes 3001",
        /* packed Q (29 rows) and K (55 rows): dO as O, dQ as Q, dK as K, dV as V, own strides */
        "spec q 65536 29,12,192 1003,1002,1 bf16", "spec k 131072 55,4,192 1006,1005,1 bf16",
        "spec dout 655360 29,12,128 2003,2002,1 bf16", "spec dq 720896 29,12,192 2006,2005,1 bf16",
        "spec dk 786432 55,4,192 2009,2008,1 bf16", "spec dv 851968 55,4,128 2012,0,1 bf16",
        "spec workspace 917504 3001 1 u8", "spec lse 327680 12,29 29,1 f32", "spec block_table none",
        "stream 43968", "problem bf16 128 True True True False", "backward True True 3001"};
    /* every field of attn_fwd_params and attn_bwd_params (but fwd) and none more */
    ck_assert_int_eq(expect_lines(out, lines, sizeof lines / sizeof lines[0]), 39 + 19);
}
END_TEST

START_TEST(a_bwd_exception_fails_the_call_with_its_traceback) {
    const attn_kernel *k = load("ATTN_PROBE_RAISES");
    attn_fwd_params f = distinct_bwd_fwd(); /* batch 3: the probe's workspace(p) divides by 0 */
    attn_bwd_params b = distinct_bwd(&f);
    b.workspace = NULL, b.workspace_bytes = 0;
    char err[8192];
    size_t ws = 7;
    call_bwd(k, &b, NULL, &ws, err, sizeof err);
    ck_assert_msg(ws == 0 && strstr(err, "probe_raises': workspace(p) raised:") && strstr(err, "ZeroDivisionError"),
                  "bwd_workspace gave %zu:\n%s", ws, err);
    ck_assert_int_eq(call_bwd(k, &b, NULL, NULL, err, sizeof err), 3); /* and bwd fails with it */
    ck_assert_msg(strstr(err, "python kernel 'probe_raises' raised:") && strstr(err, "ZeroDivisionError"), "%s", err);
    f.batch = 4; /* the workspace asks 1 byte; the harness gave 0 */
    ck_assert_int_eq(call_bwd(k, &b, NULL, NULL, err, sizeof err), 3);
    ck_assert_msg(strstr(err, "the harness gave 0 workspace bytes; the kernel's workspace(p) asks 1"), "%s", err);
    f.batch = 5; /* no workspace: the backward itself raises */
    ck_assert_int_eq(call_bwd(k, &b, NULL, NULL, err, sizeof err), 3);
    ck_assert_msg(strstr(err, "Traceback") && strstr(err, "ValueError: probe backward failure at batch 5"), "%s", err);
}
END_TEST

START_TEST(an_unsupported_bwd_is_not_a_failure) {
    const attn_kernel *k = load("ATTN_PROBE_UNSUPPORTED");
    const attn_fwd_params f = distinct_bwd_fwd();
    const attn_bwd_params b = distinct_bwd(&f);
    char err[4096];
    ck_assert_int_eq(call_bwd(k, &b, NULL, NULL, err, sizeof err), ATTN_UNSUPPORTED);
    ck_assert_msg(strstr(err, "python kernel 'probe_unsupported': not supported: probe's backward says no"), "%s",
                  err);
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
    /* every field of attn_fwd_params but none more */
    ck_assert_int_eq(expect_lines(out, lines, sizeof lines / sizeof lines[0]), 39);
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
    tcase_add_test(tc, a_declared_backward_is_exported);
    tcase_add_test(tc, every_bwd_field_reaches_python);
    tcase_add_test(tc, a_bwd_exception_fails_the_call_with_its_traceback);
    tcase_add_test(tc, an_unsupported_bwd_is_not_a_failure);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* one process, one interpreter, as the harness runs it */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
