/* Which problems a kernel takes (attn_kernel_lacks, kernels/capability.c) and whether a
 * problem is well-formed (attn_problem_check, harness/problem.c): each rule passes at its
 * boundary and fails past it, the message naming the field. */
#include "unit.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "problem.h"
#include "registry.h"
#include "seqs.h"

static int dummy_fwd(const attn_fwd_params *p, cudaStream_t s) {
    (void)p, (void)s;
    return ATTN_OK;
}

static char buf_q, buf_k, buf_v, buf_o; /* never dereferenced: the checks look at the pointers */

/* A version-1 problem: every version-2 field at its "off" value; rows of [row][head][dim]
 * (any strides >= 0 do: no element is read). */
static attn_fwd_params plain(void) {
    return (attn_fwd_params){.dtype = ATTN_F16, .batch = 2, .heads = 8, .seqlen_q = 16,
                             .seqlen_k = 40, .head_dim = 64, .softmax_scale = 0.125f,
                             .q = &buf_q, .k = &buf_k, .v = &buf_v, .o = &buf_o,
                             .q_batch_stride = 16 * 1024, .q_head_stride = 128, .q_row_stride = 1024,
                             .k_batch_stride = 40 * 1024, .k_head_stride = 128, .k_row_stride = 1024,
                             .v_batch_stride = 40 * 1024, .v_head_stride = 128, .v_row_stride = 1024,
                             .o_batch_stride = 16 * 1024, .o_head_stride = 128, .o_row_stride = 1024,
                             .heads_k = 8, .window_left = -1, .window_right = -1};
}

/* ---- attn_kernel_lacks ---- */

/* the reason kernel {name "x", caps, dtypes, head_dims, head_dim_pairs} gives for p, or NULL */
static char why[512];
static const char *lacks_pairs(uint32_t caps, uint32_t dtypes, const int *dims, const int *pairs,
                               attn_fwd_params p) {
    attn_kernel k = {.name = "x", .fwd = dummy_fwd, .caps = caps, .dtypes = dtypes, .head_dims = dims, .head_dim_pairs = pairs};
    const char *r = attn_kernel_lacks(&k, &p, why, sizeof why);
    ck_assert(r == NULL || r == why);
    return r;
}
static const char *lacks(uint32_t caps, uint32_t dtypes, const int *dims, attn_fwd_params p) {
    return lacks_pairs(caps, dtypes, dims, NULL, p);
}

#define ck_lacks(r, expect) \
    ck_assert_msg((r) && strstr((r), (expect)), "expected '%s' in: %s", (expect), (r) ? (r) : "(NULL)")

START_TEST(lacks_v1_problem) {
    /* a version-1 kernel (caps 0, dtypes 0, head_dims NULL) takes a version-1 problem */
    attn_fwd_params p = plain();
    ck_assert_ptr_null(lacks(0, 0, NULL, p));
    p.dtype = ATTN_BF16, p.head_dim = 256, p.causal = 1, p.window_right = 0, p.head_dim_v = 256;
    ck_assert_ptr_null(lacks(0, 0, NULL, p));
    p.window_right = -1;
    ck_assert_ptr_null(lacks(0, 0, NULL, p));
}
END_TEST

START_TEST(lacks_dtype) {
    attn_fwd_params p = plain();
    p.dtype = ATTN_BF16;
    ck_assert_ptr_null(lacks(0, 0, NULL, p)); /* 0 = fp16 and bf16 */
    ck_assert_ptr_null(lacks(0, 1u << ATTN_BF16, NULL, p));
    ck_lacks(lacks(0, 1u << ATTN_F16, NULL, p), "kernel 'x' does not take dtype bf16: not in its dtypes");
    p.dtype = ATTN_F16;
    ck_assert_ptr_null(lacks(0, 1u << ATTN_F16, NULL, p));
    ck_lacks(lacks(0, 1u << ATTN_BF16, NULL, p), "dtype fp16");
}
END_TEST

START_TEST(lacks_head_dim) {
    static const int dims[] = {64, 128, 192, 0};
    attn_fwd_params p = plain();
    ck_assert_ptr_null(lacks(0, 0, dims, p));
    p.head_dim = 96;
    ck_lacks(lacks(0, 0, dims, p), "kernel 'x' does not take head_dim 96: its head_dims are 64, 128, 192");
    ck_assert_ptr_null(lacks(0, 0, NULL, p)); /* NULL = any */
    /* head_dim_v: checked when set and different */
    p.head_dim = 192, p.head_dim_v = 128;
    ck_assert_ptr_null(lacks(ATTN_CAP_HEAD_DIM_V, 0, dims, p));
    p.head_dim_v = 96;
    ck_lacks(lacks(ATTN_CAP_HEAD_DIM_V, 0, dims, p), "head_dim_v 96: its head_dims are 64, 128, 192");
    p.head_dim = 96, p.head_dim_v = 96; /* the same: head_dim's check only */
    ck_lacks(lacks(0, 0, dims, p), "head_dim 96:");
}
END_TEST

/* version 3: with head_dim_pairs the pair decides (head_dims is not read), naming the pair;
 * head_dim_v 0 is head_dim; a listed pair with dv != d still needs ATTN_CAP_HEAD_DIM_V */
START_TEST(lacks_head_dim_pairs) {
    static const int pairs[] = {64, 64, 128, 128, 192, 128, 0}, dims[] = {64, 0};
    attn_fwd_params p = plain();
    ck_assert_ptr_null(lacks_pairs(0, 0, dims, pairs, p)); /* 64 x 0: 64x64 */
    p.head_dim_v = 64;
    ck_assert_ptr_null(lacks_pairs(0, 0, NULL, pairs, p));
    p.head_dim = 192, p.head_dim_v = 128;
    ck_assert_ptr_null(lacks_pairs(ATTN_CAP_HEAD_DIM_V, 0, dims, pairs, p)); /* head_dims {64} not read */
    ck_lacks(lacks_pairs(0, 0, NULL, pairs, p), "(head_dim_v 128 != head_dim 192): ATTN_CAP_HEAD_DIM_V");
    p.head_dim_v = 0; /* 192 x 192: head_dims NULL would take it; the pairs do not */
    ck_assert_ptr_null(lacks(ATTN_CAP_HEAD_DIM_V, 0, NULL, p));
    ck_assert_str_eq(lacks_pairs(ATTN_CAP_HEAD_DIM_V, 0, NULL, pairs, p),
                     "kernel 'x' does not take the head dim pair 192x192 (head_dim x head_dim_v): its "
                     "head_dim_pairs are 64x64, 128x128, 192x128");
    p.head_dim = 64, p.head_dim_v = 128;
    ck_lacks(lacks_pairs(ATTN_CAP_HEAD_DIM_V, 0, NULL, pairs, p), "the head dim pair 64x128");
}
END_TEST

/* the rules of attn_abi.h that decide what a problem needs: a problem that breaks one is
 * taken by no kernel, not by one that declares what the broken field seems to ask for */
START_TEST(lacks_invalid_problem) {
    static const int32_t arr[4] = {0};
    const uint32_t all = ~0u;
    attn_fwd_params p = plain();
    p.heads_k = 0; /* not "heads": it was read as grouped KV heads (heads_k 0 < heads 8) */
    ck_assert_str_eq(lacks(all, 0, NULL, p),
                     "kernel 'x' does not take an invalid problem: heads_k 0 (must be >= 1 and divide heads 8)");
    p.heads_k = 16;
    ck_lacks(lacks(all, 0, NULL, p), "an invalid problem: heads_k 16");
    p = plain();
    p.causal = 1, p.window_right = 4; /* was read as a sliding window */
    ck_lacks(lacks(all, 0, NULL, p), "an invalid problem: window_right 4 with causal (causal means window_right 0)");
    p.window_right = 0;
    ck_assert_ptr_null(lacks(0, 0, NULL, p));
    p = plain();
    p.block_table = arr, p.page_size = 16, p.cu_seqlens_k = arr; /* was read as paged and varlen */
    ck_lacks(lacks(all, 0, NULL, p), "an invalid problem: cu_seqlens_k with block_table");
    p.cu_seqlens_k = NULL, p.cu_seqlens_q = arr; /* packed queries with paged K/V: valid */
    ck_assert_ptr_null(lacks(all, 0, NULL, p));
}
END_TEST

/* A problem that needs capability cap (a version-1 problem after edit) is refused by a
 * kernel without the bit, and by one with every other bit, with a reason containing expect
 * (the need, with the field's values, and the bit's name); a kernel with only that bit
 * takes it. */
static void needs(uint32_t cap, const attn_fwd_params *p, const char *expect, int line) {
    for (int other = 0; other < 2; other++) {
        const char *r = lacks(other ? ~cap : 0, 0, NULL, *p);
        ck_assert_msg(r && strstr(r, expect), "line %d: expected '%s' in: %s", line, expect,
                      r ? r : "(NULL)");
    }
    ck_assert_msg(!lacks(cap, 0, NULL, *p), "line %d: %s", line, why);
}
#define NEEDS(cap, edit, expect)        \
    do {                                \
        attn_fwd_params p = plain();    \
        edit;                           \
        needs(cap, &p, expect, __LINE__); \
    } while (0)

START_TEST(lacks_caps) {
    static const int32_t arr[4] = {0};
    NEEDS(ATTN_CAP_GQA, p.heads_k = 2, "grouped KV heads (heads_k 2 < heads 8): ATTN_CAP_GQA not in its caps");
    NEEDS(ATTN_CAP_WINDOW, p.window_left = 16, "a sliding window (window_left 16, window_right -1): ATTN_CAP_WINDOW");
    NEEDS(ATTN_CAP_WINDOW, (p.causal = 1, p.window_left = 16, p.window_right = 0),
          "(window_left 16, window_right 0, causal): ATTN_CAP_WINDOW");
    NEEDS(ATTN_CAP_WINDOW, p.window_right = 0, "(window_left -1, window_right 0): ATTN_CAP_WINDOW");
    NEEDS(ATTN_CAP_WINDOW, p.window_right = 4, "window_right 4): ATTN_CAP_WINDOW");
    NEEDS(ATTN_CAP_SOFTCAP, p.softcap = 30, "a softcap (softcap 30): ATTN_CAP_SOFTCAP");
    NEEDS(ATTN_CAP_HEAD_DIM_V, p.head_dim_v = 128, "(head_dim_v 128 != head_dim 64): ATTN_CAP_HEAD_DIM_V");
    NEEDS(ATTN_CAP_VARLEN, p.cu_seqlens_q = arr, "variable lengths (cu_seqlens_q): ATTN_CAP_VARLEN");
    NEEDS(ATTN_CAP_VARLEN, p.cu_seqlens_k = arr, "(cu_seqlens_k): ATTN_CAP_VARLEN");
    NEEDS(ATTN_CAP_VARLEN, (p.cu_seqlens_q = arr, p.cu_seqlens_k = arr), "(cu_seqlens_q and cu_seqlens_k)");
    NEEDS(ATTN_CAP_PAGED, (p.block_table = arr, p.page_size = 16),
          "paged K/V (block_table, page_size 16): ATTN_CAP_PAGED not in its caps");
    NEEDS(ATTN_CAP_SEQUSED_K, p.seqused_k = arr, "(seqused_k): ATTN_CAP_SEQUSED_K");
    /* the whole line */
    attn_fwd_params p = plain();
    p.heads_k = 2;
    ck_assert_str_eq(lacks(ATTN_CAP_WINDOW, 0, NULL, p),
                     "kernel 'x' does not take grouped KV heads (heads_k 2 < heads 8): ATTN_CAP_GQA not in its caps");
    /* none needed: causal (window_right 0 or -1), heads_k == heads, head_dim_v == head_dim */
    p = plain();
    p.causal = 1, p.window_right = 0, p.head_dim_v = p.head_dim;
    ck_assert_ptr_null(lacks(0, 0, NULL, p));
}
END_TEST

/* ---- attn_problem_check ---- */

/* A problem with every version-2 array a paged problem has: 3 sequences, varlen Q, paged K/V
 * (pages of 16 keys, 3 columns, seqlen_k 40 stored for every sequence) and used lengths.
 * p's device pointers are the host copies themselves (never dereferenced as such). */
typedef struct {
    attn_fwd_params p;
    attn_problem_host h;
    int32_t cu_q[4], cu_k[4], table[3][3], used[3];
} problem;

static void make_full(problem *x) {
    static const problem init = {
        .cu_q = {0, 5, 21, 30},  /* lengths 5, 16, 9: the longest is seqlen_q 16 */
        .cu_k = {0, 40, 50, 80}, /* for make_packed_k: lengths 40, 10, 30 */
        /* used 40, 7, 0 keys: 3, 1, 0 pages read; the rest spare: -1, stale, out of the pool */
        .table = {{3, 0, 31}, {7, -1, 99}, {1, 2, -5}},
        .used = {40, 7, 0},
    };
    *x = init;
    x->p = plain();
    x->p.batch = 3, x->p.heads_k = 2, x->p.causal = 1, x->p.window_left = 8, x->p.window_right = 0;
    x->p.softcap = 30, x->p.head_dim_v = 128;
    x->p.page_size = 16, x->p.num_pages = 32, x->p.block_table_stride = 3;
    x->p.k_batch_stride = x->p.v_batch_stride = 16 * 1024; /* the page stride */
    x->h = (attn_problem_host){x->cu_q, NULL, &x->table[0][0], x->used};
    x->p.cu_seqlens_q = x->h.cu_seqlens_q, x->p.block_table = x->h.block_table, x->p.seqused_k = x->h.seqused_k;
    x->p.total_q = 30;
}

/* make_full's K and V packed instead of paged (cu_seqlens_k, lengths 40, 10, 30) */
static void make_packed_k(problem *x) {
    make_full(x);
    x->p.block_table = x->h.block_table = NULL;
    x->p.cu_seqlens_k = x->h.cu_seqlens_k = x->cu_k;
    x->p.total_k = 80;
    x->p.k_batch_stride = x->p.v_batch_stride = 0; /* unused */
}

/* expect NULL: the problem passes; else the message contains expect */
static void check(const problem *x, const char *expect, int line) {
    char err[512] = "";
    int rc = attn_problem_check(&x->p, &x->h, err, sizeof err);
    if (!expect) {
        ck_assert_msg(rc == 0, "line %d: expected to pass, got: %s", line, err);
    } else {
        ck_assert_msg(rc == 1, "line %d: expected '%s', but it passed", line, expect);
        ck_assert_msg(strstr(err, expect), "line %d: expected '%s' in: %s", line, expect, err);
    }
}
/* one edit of the full problem (or of the packed one: CASE_K), then the verdict */
#define CASE_OF(make, edit, expect) \
    do {                            \
        problem x;                  \
        make(&x);                   \
        edit;                       \
        check(&x, expect, __LINE__); \
    } while (0)
#define CASE(edit, expect) CASE_OF(make_full, edit, expect)
#define CASE_K(edit, expect) CASE_OF(make_packed_k, edit, expect)

START_TEST(problem_valid) {
    CASE((void)0, NULL);
    CASE_K((void)0, NULL);
    attn_fwd_params p = plain(); /* no arrays: h may be NULL */
    char err[256] = "";
    ck_assert_msg(attn_problem_check(&p, NULL, err, sizeof err) == 0, "%s", err);
}
END_TEST

/* the int field at offset off of x's problem */
static int *field(problem *x, size_t off) { return (int *)((char *)&x->p + off); }

/* the integer fields: the boundary passes, past it fails, the message naming the field */
START_TEST(problem_ints) {
#define F(f) #f, offsetof(attn_fwd_params, f)
    const struct { const char *field; size_t off; int good, bad; const char *expect; } ints[] = {
        {F(batch), 1, 0, "batch 0 must be >= 1"}, /* one sequence: total_q below is its 5 rows */
        {F(heads), 2, 0, "heads 0 must be >= 1"},
        {F(seqlen_q), 16, 0, "seqlen_q 0 must be >= 1"},
        {F(seqlen_k), 40, 0, "seqlen_k 0 must be >= 1"},
        {F(head_dim), 1, 0, "head_dim 0 must be >= 1"},
        {F(heads_k), 8, 0, "heads_k 0 must be >= 1"},
        {F(heads_k), 1, 3, "heads_k 3 does not divide heads 8"},
        {F(heads_k), 8, 16, "heads_k 16 does not divide heads 8"},
        {F(window_left), -1, -2, "window_left -2 must be >= -1"},
        {F(window_left), 0, -2, "window_left -2"},
        {F(window_right), -1, -2, "window_right -2 must be >= -1"},
        {F(window_right), 0, 4, "window_right 4 with causal (causal means window_right 0)"},
        {F(head_dim_v), 0, -1, "head_dim_v -1 must be >= 0"},
        {F(dtype), ATTN_BF16, 7, "dtype 7"},
        {F(page_size), 20, 0, "page_size 0 must be >= 1 (block_table is set)"},
        {F(num_pages), 32, 0, "num_pages 0 must be >= 1"},
        {F(block_table_stride), 3, 0, "block_table_stride 0 must be >= 1"},
        {F(block_table_stride), 3, 2, "block_table_stride 2 * page_size 16 < seqlen_k 40"},
        {F(page_size), 20, 13, "block_table_stride 3 * page_size 13 < seqlen_k 40"},
        {F(num_pages), 32, 31, "block_table[0][2] = 31 is outside the pool (num_pages 31)"},
    };
#undef F
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        CASE((*field(&x, ints[i].off) = ints[i].good, x.p.total_q = x.cu_q[x.p.batch]), NULL);
        CASE(*field(&x, ints[i].off) = ints[i].bad, ints[i].expect);
    }
    /* a window_right > 0 is fine without causal; paged fields unused without block_table */
    CASE((x.p.causal = 0, x.p.window_right = 4), NULL);
    CASE_K((x.p.page_size = 0, x.p.num_pages = 0, x.p.block_table_stride = 0), NULL);
}
END_TEST

START_TEST(problem_floats) {
    CASE(x.p.softcap = 0, NULL);
    CASE(x.p.softcap = -1, "softcap -1 must be finite and >= 0");
    CASE(x.p.softcap = NAN, "softcap nan");
    CASE(x.p.softcap = INFINITY, "softcap inf");
    CASE(x.p.softmax_scale = -0.5f, NULL);
    CASE(x.p.softmax_scale = INFINITY, "softmax_scale inf must be finite");
    CASE(x.p.softmax_scale = NAN, "softmax_scale nan must be finite");
}
END_TEST

START_TEST(problem_pointers) {
    CASE(x.p.q = NULL, "q is NULL");
    CASE(x.p.k = NULL, "k is NULL");
    CASE(x.p.v = NULL, "v is NULL");
    CASE(x.p.o = NULL, "o is NULL");
    /* each array in the problem iff in the host copies */
    CASE(x.h.cu_seqlens_q = NULL, "cu_seqlens_q is set in the problem but NULL in the host copies");
    CASE_K(x.p.cu_seqlens_k = NULL, "cu_seqlens_k is NULL in the problem but set in the host copies");
    CASE(x.h.block_table = NULL, "block_table is set in the problem but NULL");
    CASE(x.p.seqused_k = NULL, "seqused_k is NULL in the problem but set");
    CASE((x.p.cu_seqlens_q = NULL, x.h.cu_seqlens_q = NULL, x.p.total_q = 0), NULL);
    CASE((x.p.seqused_k = NULL, x.h.seqused_k = NULL, x.p.seqlen_k = 7), NULL);
    char err[256];
    problem x;
    make_full(&x);
    ck_assert_int_eq(attn_problem_check(&x.p, NULL, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "cu_seqlens_q is set in the problem but NULL in the host copies"), "%s", err);
}
END_TEST

START_TEST(problem_cu_seqlens) {
    CASE(x.cu_q[0] = 1, "cu_seqlens_q[0] = 1 (must be 0)");
    CASE((x.cu_q[2] = 12, x.cu_q[3] = 10), "cu_seqlens_q[3] = 10 < cu_seqlens_q[2] = 12 (must not decrease)");
    CASE((x.cu_q[2] = 5, x.cu_q[3] = 14, x.p.total_q = 14), NULL); /* an empty sequence */
    CASE(x.cu_q[2] = 22, "cu_seqlens_q[2] - cu_seqlens_q[1] = 17 > seqlen_q 16");
    CASE_K(x.cu_k[0] = -1, "cu_seqlens_k[0] = -1 (must be 0)");
    CASE_K(x.cu_k[2] = 39, "cu_seqlens_k[2] = 39 < cu_seqlens_k[1] = 40 (must not decrease)");
    CASE_K(x.cu_k[1] = 41, "cu_seqlens_k[1] - cu_seqlens_k[0] = 41 > seqlen_k 40");
    CASE(x.p.seqlen_q = 15, "= 16 > seqlen_q 15");
}
END_TEST

/* version 4: total_q and total_k are the packed row counts, 0 when not packed */
START_TEST(problem_totals) {
    CASE(x.p.total_q = 29, "total_q 29, but the packed rows are 30 (cu_seqlens_q[3])");
    CASE((x.cu_q[3] = 25, x.p.total_q = 25), NULL);
    CASE(x.p.total_k = 80, "total_k 80, but the packed rows are 0 (cu_seqlens_k[3] is NULL: 0)");
    CASE((x.p.cu_seqlens_q = x.h.cu_seqlens_q = NULL), "total_q 30, but the packed rows are 0");
    CASE_K(x.p.total_k = 0, "total_k 0, but the packed rows are 80 (cu_seqlens_k[3])");
    CASE_K(x.p.total_k = 80, NULL);
}
END_TEST

/* attn_abi.h: a paged problem's lengths are seqused_k's, or all seqlen_k; cu_seqlens_k with
 * a block table is invalid (cu_seqlens_q is fine) */
START_TEST(problem_paged_with_cu_seqlens_k) {
    CASE((x.p.cu_seqlens_k = x.h.cu_seqlens_k = x.cu_k),
         "cu_seqlens_k with block_table (a paged problem's lengths are seqused_k, or all seqlen_k)");
    CASE((x.p.cu_seqlens_q = x.h.cu_seqlens_q = NULL, x.p.cu_seqlens_k = x.h.cu_seqlens_k = x.cu_k),
         "cu_seqlens_k with block_table");
}
END_TEST

START_TEST(problem_paged) {
    /* only the pages of each sequence's used keys (seqused_k, else seqlen_k) are read: its
     * first ceil(used / page_size) entries; the rest may hold anything */
    CASE(x.table[0][2] = 32, "block_table[0][2] = 32 is outside the pool (num_pages 32)");
    CASE(x.table[1][0] = -1, "block_table[1][0] = -1 is outside the pool (num_pages 32)");
    CASE(x.table[2][0] = 40, NULL); /* sequence 2 uses none of its keys */
    CASE((x.used[2] = 30, x.table[2][1] = 40), "block_table[2][1] = 40 is outside the pool");
    CASE(x.table[1][1] = 40, NULL); /* sequence 1 uses 7 keys: one page */
    CASE(x.used[1] = 17, "block_table[1][1] = -1"); /* 17 keys: two pages */
    CASE(x.used[1] = 16, NULL);                       /* 16 keys: still one */
    /* without seqused_k every sequence uses all seqlen_k keys */
    CASE((x.p.seqused_k = NULL, x.h.seqused_k = NULL), "block_table[1][1] = -1");
    CASE((x.p.seqused_k = NULL, x.h.seqused_k = NULL, x.table[1][1] = 4, x.table[1][2] = 5, x.table[2][2] = 6), NULL);
}
END_TEST

/* attn_abi.h: seqlen_k of a paged problem is the keys every sequence stores, at most
 * block_table_stride * page_size and not necessarily equal (a serving engine's fixed
 * number of columns); a sequence then uses up to seqlen_k of them */
START_TEST(problem_paged_seqlen_k) {
    CASE(x.p.seqlen_k = 48, NULL); /* 3 columns of 16 */
    CASE(x.p.seqlen_k = 49, "block_table_stride 3 * page_size 16 < seqlen_k 49");
    CASE((x.p.seqlen_k = 33, x.used[0] = 33), NULL); /* a spare third of the last page */
    CASE((x.p.seqlen_k = 33, x.used[0] = 34), "seqused_k[0] = 34 is outside [0, 33]");
    CASE((x.p.seqlen_k = 7, x.used[0] = 7), NULL); /* two spare columns */
    /* two spare columns of stale and out-of-pool ids: never read */
    CASE((x.p.seqlen_k = 7, x.used[0] = 7, x.table[0][1] = -1, x.table[0][2] = 1 << 30), NULL);
    /* without seqused_k every sequence uses seqlen_k keys: its first ceil(7 / 16) = 1 page */
    CASE((x.p.seqlen_k = 7, x.p.seqused_k = x.h.seqused_k = NULL, x.table[0][1] = -1), NULL);
}
END_TEST

START_TEST(problem_seqused_k) {
    CASE(x.used[0] = 40, NULL);
    CASE(x.used[1] = 40, "block_table[1][1] = -1"); /* its keys, but pages it has not */
    CASE(x.used[1] = 41, "seqused_k[1] = 41 is outside [0, 40]");
    CASE(x.used[2] = -1, "seqused_k[2] = -1 is outside [0, 40]");
    /* packed K: a sequence's stored keys are its cu_seqlens_k span */
    CASE_K(x.used[1] = 10, NULL);
    CASE_K(x.used[1] = 11, "seqused_k[1] = 11 is outside [0, 10]");
    CASE_K(x.used[2] = -1, "seqused_k[2] = -1 is outside [0, 30]");
    /* dense K (a KV cache): seqlen_k each */
    CASE_K((x.p.cu_seqlens_k = x.h.cu_seqlens_k = NULL, x.p.total_k = 0, x.used[2] = 40), NULL);
    CASE_K((x.p.cu_seqlens_k = x.h.cu_seqlens_k = NULL, x.p.total_k = 0, x.used[2] = 41),
           "seqused_k[2] = 41 is outside [0, 40]");
}
END_TEST

/* attn_abi.h: strides >= 0; 0 is a broadcast for a batch or head stride, and for a row stride
 * only over at most one row (Q, O: seqlen_q or the packed total; K, V: seqlen_k, the packed
 * total, or page_size when paged) */
START_TEST(problem_strides) {
#define S(f) #f, offsetof(attn_fwd_params, f)
    static const struct { const char *field; size_t off; } all[] = {
        {S(q_batch_stride)}, {S(q_head_stride)}, {S(q_row_stride)}, {S(k_batch_stride)},
        {S(k_head_stride)},  {S(k_row_stride)},  {S(v_batch_stride)}, {S(v_head_stride)},
        {S(v_row_stride)},   {S(o_batch_stride)}, {S(o_head_stride)}, {S(o_row_stride)},
    };
#undef S
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        char expect[64];
        snprintf(expect, sizeof expect, "%s -1 must be >= 0", all[i].field);
        CASE(*(int64_t *)((char *)&x.p + all[i].off) = -1, expect);
        CASE_K(*(int64_t *)((char *)&x.p + all[i].off) = -(1ll << 40), "must be >= 0");
        if (!strstr(all[i].field, "row") && all[i].field[0] != 'o') {
            CASE(*(int64_t *)((char *)&x.p + all[i].off) = 0, NULL); /* broadcast */
            CASE_K(*(int64_t *)((char *)&x.p + all[i].off) = 0, NULL);
        }
    }
    /* a zero row stride: over the packed Q (30 rows), a page (16), the packed K (80) */
    CASE(x.p.q_row_stride = 0, "q_row_stride 0 with 30 rows (0 is for a tensor of one row)");
    CASE(x.p.o_row_stride = 0, "o_row_stride 0 with 30 rows");
    CASE(x.p.k_row_stride = 0, "k_row_stride 0 with 16 rows");
    CASE(x.p.v_row_stride = 0, "v_row_stride 0 with 16 rows");
    CASE_K(x.p.k_row_stride = 0, "k_row_stride 0 with 80 rows");
    CASE((x.cu_q[1] = x.cu_q[2] = 0, x.cu_q[3] = x.p.total_q = 1, x.p.q_row_stride = x.p.o_row_stride = 0),
         NULL); /* one row */
    CASE((x.p.page_size = 1, x.p.seqlen_k = 3, x.used[0] = 3, x.used[1] = 1, x.p.k_row_stride = x.p.v_row_stride = 0),
         NULL); /* pages of one row */
    /* O is never broadcast: over heads always, over the batch when Q is dense */
    CASE(x.p.o_head_stride = 0, "o_head_stride 0 with");
    CASE(x.p.o_batch_stride = 0, NULL); /* packed Q: unused */
    /* dense: seqlen_q, seqlen_k rows */
    attn_fwd_params p = plain();
    char err[256] = "";
    p.o_batch_stride = 0;
    ck_assert_int_eq(attn_problem_check(&p, NULL, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "o_batch_stride 0 with batch 2"), "%s", err);
    p = plain();
    p.seqlen_q = 1, p.q_row_stride = p.o_row_stride = 0; /* decode: one query row */
    ck_assert_msg(!attn_problem_check(&p, NULL, err, sizeof err), "%s", err);
    p.seqlen_k = 2, p.k_row_stride = 0;
    ck_assert_int_eq(attn_problem_check(&p, NULL, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "k_row_stride 0 with 2 rows"), "%s", err);
}
END_TEST

/* ---- attn_seqs_make: packed and paged layouts the harness builds ---- */

/* The backward's problem (ABI version 5): make_packed_k's forward (packed K/V, used keys)
 * with an LSE, dO, dQ, dK, dV in its layouts; one edit, then attn_bwd_problem_check. */
static char buf_do, buf_dq, buf_dk, buf_dv, buf_lse[4];
static char buf_ws[512] __attribute__((aligned(256)));
static void bwd_case(void (*edit)(attn_bwd_params *, problem *), const char *expect, int line) {
    problem x;
    make_packed_k(&x);
    x.p.lse = (float *)buf_lse;
    attn_bwd_params bp = {.fwd = &x.p, .dout = &buf_do, .dq = &buf_dq, .dk = &buf_dk, .dv = &buf_dv};
    bp.do_head_stride = bp.dq_head_stride = bp.dk_head_stride = bp.dv_head_stride = 64;
    bp.do_row_stride = bp.dq_row_stride = bp.dk_row_stride = bp.dv_row_stride = 1024;
    if (edit) edit(&bp, &x);
    char err[512] = "";
    int rc = attn_bwd_problem_check(&bp, &x.h, err, sizeof err);
    if (!expect)
        ck_assert_msg(rc == 0, "line %d: expected to pass, got: %s", line, err);
    else
        ck_assert_msg(rc == 1 && strstr(err, expect), "line %d: expected '%s', got rc %d: %s", line, expect, rc, err);
}
static void no_lse(attn_bwd_params *bp, problem *x) { (void)bp, x->p.lse = NULL; }
static void no_dk(attn_bwd_params *bp, problem *x) { (void)x, bp->dk = NULL; }
static void dq_broadcast(attn_bwd_params *bp, problem *x) { (void)x, bp->dq_head_stride = 0; }
static void dv_row0(attn_bwd_params *bp, problem *x) { (void)x, bp->dv_row_stride = 0; }
static void do_negative(attn_bwd_params *bp, problem *x) { (void)x, bp->do_batch_stride = -1; }
static void det2(attn_bwd_params *bp, problem *x) { (void)x, bp->deterministic = 2; }
static void ws_bytes_only(attn_bwd_params *bp, problem *x) { (void)x, bp->workspace_bytes = 256; }
static void ws_unaligned(attn_bwd_params *bp, problem *x) {
    (void)x, bp->workspace = buf_ws + 1, bp->workspace_bytes = 256;
}
static void paged(attn_bwd_params *bp, problem *x) {
    (void)bp;
    problem full;
    make_full(&full);
    x->p = full.p, x->h = full.h, x->p.lse = (float *)buf_lse;
    x->p.cu_seqlens_q = x->h.cu_seqlens_q = x->cu_q, x->p.block_table = x->h.block_table = &x->table[0][0];
    x->p.seqused_k = x->h.seqused_k = x->used;
}
static void no_fwd(attn_bwd_params *bp, problem *x) { (void)x, bp->fwd = NULL; }
static void fwd_invalid(attn_bwd_params *bp, problem *x) { (void)bp, x->p.heads_k = 3; }

START_TEST(bwd_problem) {
    bwd_case(NULL, NULL, __LINE__);
    bwd_case(no_lse, "lse is NULL", __LINE__);
    bwd_case(no_dk, "dk is NULL", __LINE__);
    bwd_case(dq_broadcast, "dq head stride 0 with 8 heads", __LINE__);
    bwd_case(dv_row0, "dv row stride 0 with 80 rows", __LINE__);
    bwd_case(do_negative, "dout strides (batch -1", __LINE__);
    bwd_case(det2, "deterministic 2 must be 0 or 1", __LINE__);
    bwd_case(ws_bytes_only, "workspace NULL with workspace_bytes 256", __LINE__);
    bwd_case(ws_unaligned, "is not 256-byte aligned", __LINE__);
    bwd_case(paged, "a paged problem has no backward", __LINE__);
    bwd_case(no_fwd, "fwd is NULL", __LINE__);
    bwd_case(fwd_invalid, "heads_k 3 does not divide heads 8", __LINE__);
}
END_TEST

START_TEST(seqs_packed) {
    const int lq[4] = {0, 1, 17, 5}, lk[4] = {3, 0, 40, 1};
    attn_seqs s;
    char err[256];
    ck_assert_int_eq(attn_seqs_make(&s, 4, lq, lk, 0, 0, 1, err, sizeof err), 0);
    const int32_t cq[5] = {0, 0, 1, 18, 23}, ck[5] = {0, 3, 3, 43, 44};
    ck_assert(!memcmp(s.cu_seqlens_q, cq, sizeof cq) && !memcmp(s.cu_seqlens_k, ck, sizeof ck));
    ck_assert_int_eq(s.max_q, 17);
    ck_assert_int_eq(s.max_k, 40);
    ck_assert_int_eq(s.total_q, 23);
    ck_assert_int_eq(s.total_k, 44);
    ck_assert_ptr_null(s.block_table);
    /* as a problem: well-formed */
    attn_fwd_params p = plain();
    p.batch = 4, p.seqlen_q = s.max_q, p.seqlen_k = s.max_k;
    p.cu_seqlens_q = s.cu_seqlens_q, p.cu_seqlens_k = s.cu_seqlens_k; /* stand-ins for device copies */
    p.total_q = s.total_q, p.total_k = s.total_k;
    attn_problem_host h = {s.cu_seqlens_q, s.cu_seqlens_k, NULL, NULL};
    ck_assert_msg(!attn_problem_check(&p, &h, err, sizeof err), "%s", err);
    attn_seqs_free(&s);
    const int bad[2] = {4, -1};
    ck_assert_int_eq(attn_seqs_make(&s, 2, bad, lk, 0, 0, 1, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "negative"), "%s", err);
}
END_TEST

START_TEST(seqs_paged) {
    const int lq[3] = {1, 4, 1}, lk[3] = {33, 0, 16};
    attn_seqs s, t;
    char err[256];
    ck_assert_int_eq(attn_seqs_make(&s, 3, lq, lk, 16, 5, 7, err, sizeof err), 0);
    ck_assert_int_eq(s.block_table_stride, 3); /* ceil(33 / 16) */
    ck_assert_int_eq(s.num_pages, 3 + 0 + 1 + 5);
    int used[16] = {0}, in_order = 1, n = 0, prev = -1;
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 3; i++) {
            int32_t e = s.block_table[b * 3 + i];
            int needed = i < (lk[b] + 15) / 16;
            ck_assert_msg(needed ? e >= 0 && e < s.num_pages : e == -1, "entry [%d][%d] = %d", b, i, e);
            if (!needed) continue;
            ck_assert_msg(!used[e]++, "page %d given twice", e);
            in_order &= e == prev + 1, prev = e, n++;
        }
    ck_assert_int_eq(n, 4);
    ck_assert_msg(!in_order, "the pages are not shuffled"); /* seed 7 */
    /* a KV cache: capacity seqlen_k for every sequence, seqused_k of it filled */
    const int32_t filled[3] = {33, 0, 16};
    attn_fwd_params p = plain();
    p.batch = 3, p.seqlen_q = 4, p.seqlen_k = 33, p.block_table = s.block_table, p.page_size = 16;
    p.block_table_stride = s.block_table_stride, p.num_pages = s.num_pages, p.seqused_k = filled;
    attn_problem_host h = {NULL, NULL, s.block_table, filled};
    ck_assert_msg(!attn_problem_check(&p, &h, err, sizeof err), "%s", err);
    ck_assert_int_eq(attn_seqs_make(&t, 3, lq, lk, 16, 5, 7, err, sizeof err), 0); /* same seed, same table */
    ck_assert(!memcmp(s.block_table, t.block_table, sizeof(int32_t) * 9));
    attn_seqs_free(&s), attn_seqs_free(&t);
}
END_TEST

int main(void) {
    Suite *s = suite_create("problem");
    TCase *tc = tcase_create("capability");
    tcase_add_test(tc, lacks_v1_problem);
    tcase_add_test(tc, lacks_dtype);
    tcase_add_test(tc, lacks_head_dim);
    tcase_add_test(tc, lacks_caps);
    tcase_add_test(tc, lacks_head_dim_pairs);
    tcase_add_test(tc, lacks_invalid_problem);
    suite_add_tcase(s, tc);
    tc = tcase_create("check");
    tcase_add_test(tc, problem_valid);
    tcase_add_test(tc, problem_ints);
    tcase_add_test(tc, problem_floats);
    tcase_add_test(tc, problem_pointers);
    tcase_add_test(tc, problem_cu_seqlens);
    tcase_add_test(tc, problem_totals);
    tcase_add_test(tc, problem_paged);
    tcase_add_test(tc, problem_paged_with_cu_seqlens_k);
    tcase_add_test(tc, problem_paged_seqlen_k);
    tcase_add_test(tc, problem_seqused_k);
    tcase_add_test(tc, problem_strides);
    tcase_add_test(tc, bwd_problem);
    tcase_add_test(tc, seqs_packed);
    tcase_add_test(tc, seqs_paged);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
