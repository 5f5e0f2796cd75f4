/* The host side of the check inputs_unchanged (harness/gpu_problem.h): the first difference
 * of a layout array, and the message naming a changed element in its tensor's own
 * coordinates (dense b, h, s, d; packed rows by sequence; paged rows by page and the sequence
 * whose block table holds the page; a dense cache's rows by sequence), with its bits before
 * and after. The GPU side (attn_diff_fill_view) is run by the selftest's fixtures. */
#include "unit.h"
#include <stdio.h>
#include <string.h>

#include "gpu_problem.h"

#define ck_has(text, expect) ck_assert_msg(strstr((text), (expect)), "expected '%s' in: %s", (expect), (text))

/* A problem as gpu_problem plans it, on the host only: heads 4, heads_k 2, head_dim 8. */
static void dense(attn_gpu_problem *x) {
    memset(x, 0, sizeof *x);
    x->desc = attn_problem_dense(ATTN_F16, 2, 4, 5, 7, 8, 0, "t");
    x->desc.heads_k = 2, x->desc.head_dim_v = 8;
    for (int t = 0; t < 4; t++) x->bytes[t] = 2 * ATTN_GUARD_BYTES + 1000;
}

/* A packed batch: Q rows over every query (or the decode batch's dense rows), K over the
 * packed keys, the pool of pages or the dense cache, as plan_packed lays them out. */
static void packed(attn_gpu_problem *x, int nseq, const int *lq, const int *lk, int page_size) {
    dense(x);
    attn_problem_desc *d = &x->desc;
    d->nseq = nseq, d->page_size = page_size;
    memcpy(d->lens_q, lq, sizeof *lq * (size_t)nseq), memcpy(d->lens_k, lk, sizeof *lk * (size_t)nseq);
    char err[256];
    ck_assert_msg(!attn_seqs_make(&x->seqs, nseq, lq, lk, page_size, 3, 42, err, sizeof err), "%s", err);
    const attn_seqs *s = &x->seqs;
    const int64_t rq = s->total_q, rk = page_size ? (int64_t)s->num_pages * page_size
                                      : attn_problem_kv_cache(d) ? nseq * ((int64_t)s->max_k + ATTN_CACHE_SLACK)
                                                                 : s->total_k;
    x->st[ATTN_T_Q] = (attn_strides){0, 8, 4 * 8, rq * 4 * 8};
    x->st[ATTN_T_K] = x->st[ATTN_T_V] = (attn_strides){0, 8, 2 * 8, rk * 2 * 8};
}

static const char *describe(const attn_gpu_problem *x, const attn_input_change *ch) {
    static char out[1024];
    attn_input_change_describe(x, ch, out, sizeof out);
    return out;
}

/* element e of head h of row r of a packed tensor of `rows` rows (the view's logical index) */
static unsigned long long at_row(int64_t rows, int h, int64_t r, int e) { return ((h * rows + r) * 8 + e); }

static int in_table(const attn_seqs *s, int page) {
    for (int i = 0; i < s->batch * s->block_table_stride; i++)
        if (s->block_table[i] == page) return 1;
    return 0;
}

START_TEST(i32_first_difference) {
    const int32_t was[6] = {0, 3, 3, 43, -1, 44};
    int32_t now[6];
    memcpy(now, was, sizeof was);
    attn_input_change ch = {.name = "cu_seqlens_k", .tensor = -1};
    attn_i32_diff(was, now, 6, &ch);
    ck_assert_int_eq(ch.count, 0);
    ck_assert_int_eq(ch.total, 6);
    now[4] = 0, now[5] = 7;
    attn_i32_diff(was, now, 6, &ch);
    ck_assert_int_eq(ch.count, 2);
    ck_assert_int_eq(ch.first, 4);
    ck_assert_int_eq((int32_t)ch.was, -1);
    ck_assert_int_eq((int32_t)ch.now, 0);
    attn_gpu_problem x;
    dense(&x);
    ck_assert_str_eq(describe(&x, &ch), "input cu_seqlens_k modified by fwd: 2 of 6 entries differ, the first at "
                                        "cu_seqlens_k[4]: -1 -> 0");
}
END_TEST

START_TEST(block_table_by_sequence_and_column) {
    const int lq[3] = {1, 2, 1}, lk[3] = {33, 0, 16};
    attn_gpu_problem x;
    packed(&x, 3, lq, lk, 16); /* 3 columns a sequence */
    int32_t now[9];
    memcpy(now, x.seqs.block_table, sizeof now);
    now[5] = 0; /* sequence 1 has no page: its entries are -1 */
    attn_input_change ch = {.name = "block_table", .tensor = -1};
    attn_i32_diff(x.seqs.block_table, now, 9, &ch);
    ck_assert_str_eq(describe(&x, &ch), "input block_table modified by fwd: 1 of 9 entries differ, the first at "
                                        "block_table[1][2]: -1 -> 0");
    attn_seqs_free(&x.seqs);
}
END_TEST

START_TEST(dense_element_and_bits) {
    attn_gpu_problem x;
    dense(&x); /* Q [2][4][5][8], K and V [2][2][7][8] */
    attn_input_change q = {.name = "Q", .tensor = ATTN_T_Q, .count = 320, .total = 320,
                           .first = ((1 * 4 + 2) * 5 + 3) * 8 + 6, .was = 0x3c00, .now = 0x3000};
    ck_assert_str_eq(describe(&x, &q), "input Q modified by fwd: 320 of 320 elements differ, the first at (b=1, h=2, "
                                       "s=3, d=6): bits 0x3c00 -> 0x3000 (1 -> 0.125)");
    attn_input_change v = {.name = "V", .tensor = ATTN_T_V, .count = 1, .total = 224,
                           .first = ((0 * 2 + 1) * 7 + 6) * 8 + 0, .was = 0xc000, .now = 0x8000};
    ck_has(describe(&x, &v), "the first at (b=0, h=1, s=6, d=0): bits 0xc000 -> 0x8000 (-2 -> -0)");
    x.desc.dtype = ATTN_BF16;
    v.was = 0x3f80, v.now = 0x4000;
    ck_has(describe(&x, &v), "bits 0x3f80 -> 0x4000 (1 -> 2)");
}
END_TEST

START_TEST(guard_bands) {
    attn_gpu_problem x;
    dense(&x); /* 1000 bytes of data between the bands */
    attn_input_change k = {.name = "K", .tensor = ATTN_T_K, .total = 224, .guard_count = 3, .guard_first = -4};
    ck_assert_str_eq(describe(&x, &k), "input K modified by fwd: 3 bytes of its 4096-byte guard bands written, the "
                                       "first at K-4");
    k.guard_first = 1002;
    ck_has(describe(&x, &k), "the first at end+2");
    k.count = 1, k.first = 9, k.was = 0x3c00, k.now = 0x3c01;
    ck_has(describe(&x, &k), "(b=0, h=0, s=1, d=1): bits 0x3c00 -> 0x3c01 (1 -> 1.00098); and 3 bytes of its "
                             "4096-byte guard bands written, the first at end+2");
}
END_TEST

START_TEST(packed_rows_by_sequence) {
    const int lq[4] = {0, 1, 17, 5}, lk[4] = {3, 0, 40, 1}; /* cu_q 0 0 1 18 23, cu_k 0 3 3 43 44 */
    attn_gpu_problem x;
    packed(&x, 4, lq, lk, 0);
    attn_input_change ch = {.name = "Q", .tensor = ATTN_T_Q, .count = 1, .total = 23 * 32,
                            .first = at_row(23, 3, 20, 5), .was = 0x3c00, .now = 0x3c00};
    ck_has(describe(&x, &ch), "the first at (row 20 = b=3 s=2, h=3, d=5)");
    ch.name = "K", ch.tensor = ATTN_T_K, ch.first = at_row(44, 1, 3, 7); /* sequence 1 has no key */
    ck_has(describe(&x, &ch), "the first at (row 3 = b=2 s=0, h=1, d=7)");
    ch.first = at_row(44, 0, 43, 0);
    ck_has(describe(&x, &ch), "(row 43 = b=3 s=0, h=0, d=0)");
    attn_seqs_free(&x.seqs);
}
END_TEST

START_TEST(decode_rows_and_cache) {
    const int lq[3] = {2, 2, 2}, lk[3] = {30, 5, 0}; /* Q dense: rows b * 2 + i; K a cache of 30 + 16 rows */
    attn_gpu_problem x;
    packed(&x, 3, lq, lk, 0);
    attn_input_change ch = {.name = "Q", .tensor = ATTN_T_Q, .count = 1, .total = 6 * 32,
                            .first = at_row(6, 2, 5, 1), .was = 0x3c00, .now = 0x3c00};
    ck_has(describe(&x, &ch), "(row 5 = b=2 s=1, h=2, d=1)");
    ch.name = "V", ch.tensor = ATTN_T_V, ch.first = at_row(3 * 46, 1, 46 + 40, 4);
    ck_has(describe(&x, &ch), "(row 86 = b=1 s=40 (past its seqused_k), h=1, d=4)"); /* b=1 has 5 keys */
    ch.first = at_row(3 * 46, 0, 29, 0);
    ck_has(describe(&x, &ch), "(row 29 = b=0 s=29, h=0, d=0)");
    attn_seqs_free(&x.seqs);
}
END_TEST

START_TEST(paged_rows_by_page) {
    const int lq[3] = {1, 2, 1}, lk[3] = {33, 0, 16};
    attn_gpu_problem x;
    packed(&x, 3, lq, lk, 16); /* pages: 3 + 0 + 1 used, 3 spare */
    const int64_t rows = (int64_t)x.seqs.num_pages * 16;
    const int page = x.seqs.block_table[0 * 3 + 2]; /* sequence 0's third page: its key 32 */
    attn_input_change ch = {.name = "K", .tensor = ATTN_T_K, .count = 1, .total = (unsigned long long)rows * 16,
                            .first = at_row(rows, 1, (int64_t)page * 16, 3), .was = 0x3c00, .now = 0x3c00};
    char want[128];
    snprintf(want, sizeof want, "the first at (page %d row 0 = b=0 s=32, h=1, d=3)", page);
    ck_has(describe(&x, &ch), want);
    int spare = 0;
    while (in_table(&x.seqs, spare)) spare++;
    ch.first = at_row(rows, 0, (int64_t)spare * 16 + 15, 0);
    snprintf(want, sizeof want, "(page %d row 15 (a spare page: in no sequence's filled pages), h=0, d=0)", spare);
    ck_has(describe(&x, &ch), want);
    /* a stale entry past a sequence's filled pages (a serving engine's table) is not the page's owner */
    x.seqs.block_table[1 * 3 + 0] = page;
    ch.first = at_row(rows, 1, (int64_t)page * 16 + 1, 3);
    snprintf(want, sizeof want, "(page %d row 1 = b=0 s=33 (past its seqused_k), h=1, d=3)", page);
    ck_has(describe(&x, &ch), want);
    attn_seqs_free(&x.seqs);
}
END_TEST

int main(void) {
    Suite *s = suite_create("inputs");
    TCase *tc = tcase_create("describe");
    tcase_add_test(tc, i32_first_difference);
    tcase_add_test(tc, block_table_by_sequence_and_column);
    tcase_add_test(tc, dense_element_and_bits);
    tcase_add_test(tc, guard_bands);
    tcase_add_test(tc, packed_rows_by_sequence);
    tcase_add_test(tc, decode_rows_and_cache);
    tcase_add_test(tc, paged_rows_by_page);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
