/* The block table as serving engines lay it out (attn_seqs_serving) and the paged and packed
 * problems the correctness suite plans with it (attn_gpu_problem_plan, on the host): spare
 * columns, every kind of entry past a sequence's pages, seqlen_k short of
 * block_table_stride * page_size, no seqused_k for a batch of equal lengths; and the scale
 * rows' layouts past 2^31 elements. No GPU: planning allocates nothing on it. */
#include "unit.h"
#include <stdint.h>
#include <stdio.h>

#include "gpu_problem.h"
#include "seqs.h"
#include "shapes.h"

#ifndef ATTN_SOURCE_DIR
#error "ATTN_SOURCE_DIR: the source tree, for the shapes files"
#endif

enum { NONE, STALE, POOL_END, FAR, KINDS, NO_KIND = KINDS };
static const int64_t TWO_31 = (int64_t)1 << 31;

/* (no ck_assert per entry: Check records every assertion, and tables have thousands) */
static int kind_of(int32_t e, int num_pages) {
    if (e == -1) return NONE;
    if (e >= 0 && e < num_pages) return STALE;
    if (e >= num_pages && e < ATTN_SEQS_FAR_PAGE) return POOL_END;
    return e >= ATTN_SEQS_FAR_PAGE ? FAR : NO_KIND;
}

/* The entries past each sequence's pages (lens_k[b] keys), counted by kind into n; their number. */
static int count_past(const int32_t *table, int batch, int stride, const int *lens_k, int page_size, int num_pages,
                      int n[KINDS]) {
    int past = 0, counts[KINDS + 1] = {0};
    for (int b = 0; b < batch; b++)
        for (int i = (lens_k[b] + page_size - 1) / page_size; i < stride; i++, past++)
            counts[kind_of(table[(int64_t)b * stride + i], num_pages)]++;
    ck_assert_msg(!counts[NO_KIND], "%d entries past the pages: not -1, a page, just past the pool or far past it",
                  counts[NO_KIND]);
    for (int k = 0; k < KINDS; k++) n[k] = counts[k];
    return past;
}

START_TEST(serving_table) {
    const int lq[4] = {1, 4, 1, 2}, lk[4] = {33, 0, 16, 5};
    char err[256];
    int widths = 0, last_stride = 0;
    for (uint64_t seed = 1; seed <= 64; seed++) {
        attn_seqs plain, s, again;
        ck_assert_int_eq(attn_seqs_make(&plain, 4, lq, lk, 16, 3, seed, err, sizeof err), 0);
        ck_assert_int_eq(attn_seqs_make(&s, 4, lq, lk, 16, 3, seed, err, sizeof err), 0);
        ck_assert_msg(!attn_seqs_serving(&s, seed, err, sizeof err), "%s", err);
        const int blocks = plain.block_table_stride, stride = s.block_table_stride; /* 3: ceil(33 / 16) */
        ck_assert_int_eq(blocks, 3);
        ck_assert_msg(stride >= blocks + blocks / 2 + 1 && stride <= 2 * blocks + blocks / 2 + 1, "stride %d", stride);
        ck_assert_int_gt(stride * 16, s.max_k); /* the table's width is never the stored length */
        ck_assert_int_eq(s.num_pages, plain.num_pages);
        int moved = 0;
        for (int b = 0; b < 4; b++) /* the pages a sequence uses are kept */
            for (int i = 0; i < (lk[b] + 15) / 16; i++)
                moved += s.block_table[b * stride + i] != plain.block_table[b * blocks + i];
        ck_assert_int_eq(moved, 0);
        int n[KINDS];
        ck_assert_int_ge(count_past(s.block_table, 4, stride, lk, 16, s.num_pages, n), 4);
        ck_assert_msg(n[NONE] && n[STALE] && n[POOL_END] && n[FAR], "seed %llu: kinds %d %d %d %d",
                      (unsigned long long)seed, n[NONE], n[STALE], n[POOL_END], n[FAR]);
        ck_assert_int_eq(attn_seqs_make(&again, 4, lq, lk, 16, 3, seed, err, sizeof err), 0);
        ck_assert_int_eq(attn_seqs_serving(&again, seed, err, sizeof err), 0); /* the seed decides all of it */
        ck_assert_int_eq(again.block_table_stride, stride);
        ck_assert(!memcmp(again.block_table, s.block_table, sizeof(int32_t) * 4 * (size_t)stride));
        widths += stride != last_stride, last_stride = stride;
        attn_seqs_free(&plain), attn_seqs_free(&s), attn_seqs_free(&again);
    }
    ck_assert_int_gt(widths, 1); /* the width varies with the seed */
}
END_TEST

START_TEST(serving_needs_pages) {
    const int lq[2] = {1, 1}, lk[2] = {5, 7};
    attn_seqs s;
    char err[256];
    ck_assert_int_eq(attn_seqs_make(&s, 2, lq, lk, 0, 0, 1, err, sizeof err), 0);
    ck_assert_int_eq(attn_seqs_serving(&s, 1, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "needs pages"), "%s", err);
    attn_seqs_free(&s);
}
END_TEST

/* A packed batch planned as the correctness suite plans its cases (attn_problem_set_batch). */
static void plan_batch(attn_gpu_problem *x, int heads, int head_dim, int nseq, int page_size, const int *lq,
                       const int *lk, uint64_t seed) {
    attn_problem_desc d = attn_problem_dense(ATTN_BF16, 1, heads, 1, 1, head_dim, 1, "unit/seqs");
    attn_problem_set_batch(&d, nseq, page_size, lq, lk);
    d.seed = seed;
    char err[512];
    ck_assert_msg(!attn_gpu_problem_plan(x, &d, err, sizeof err), "%s", err);
}

START_TEST(serving_problem) {
    const int lq[3] = {1, 4, 1}, uneven[3] = {33, 0, 16}, equal[3] = {40, 40, 40};
    attn_gpu_problem x;
    plan_batch(&x, 8, 64, 3, 16, lq, uneven, 7);
    ck_assert_int_eq(x.p.seqlen_k, 33); /* the longest sequence's keys */
    ck_assert_int_gt((int64_t)x.p.block_table_stride * x.p.page_size, x.p.seqlen_k);
    ck_assert_ptr_nonnull(x.p.seqused_k);
    ck_assert_ptr_null(x.p.cu_seqlens_k);
    attn_seqs_free(&x.seqs);
    /* every sequence stores seqlen_k keys: no seqused_k, and the table is wider than that */
    plan_batch(&x, 8, 64, 3, 16, lq, equal, 7);
    ck_assert_ptr_null(x.p.seqused_k);
    ck_assert_int_eq(x.p.seqlen_k, 40);
    ck_assert_int_ge(x.p.block_table_stride, 3 + 1 + 1); /* ceil(40 / 16) + 3 / 2 + 1 */
    attn_seqs_free(&x.seqs);
    /* without a serving table (the benchmarks): exactly as wide as needed, seqused_k given,
     * seqlen_k still the stored keys (40, not the 48 the pages hold) */
    attn_problem_desc d = attn_problem_dense(ATTN_BF16, 1, 8, 1, 1, 64, 1, "unit/seqs");
    d.nseq = 3, d.page_size = 16;
    memcpy(d.lens_q, lq, sizeof lq), memcpy(d.lens_k, equal, sizeof equal);
    char err[512];
    ck_assert_msg(!attn_gpu_problem_plan(&x, &d, err, sizeof err), "%s", err);
    ck_assert_int_eq(x.p.block_table_stride, 3);
    ck_assert_int_eq(x.p.seqlen_k, 40);
    ck_assert_ptr_nonnull(x.p.seqused_k);
    attn_seqs_free(&x.seqs);
}
END_TEST

static void read_shapes(const char *name, attn_shape_matrix *m) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/shapes/%s", ATTN_SOURCE_DIR, name);
    ck_assert_msg(!attn_shapes_read(path, m, err, sizeof err), "%s", err);
}

/* Every paged case of the default matrix (packed/<kernel>: a pairwise subset of page sizes x
 * batches, each case its own seed) has a serving engine's table: spare columns, seqlen_k below
 * block_table_stride * page_size, entries past the pages of every kind; some have no
 * seqused_k, and there a kernel taking the length from the table's width reads an entry
 * outside the pool. */
START_TEST(suite_matrix) {
    static attn_shape_matrix m;
    read_shapes("packed.txt", &m);
    const attn_shapes_values *ps = &m.axis[ATTN_SHAPES_PAGE_SIZE];
    int paged = 0, without_used = 0;
    for (int v = 0; v < ps->n; v++) {
        const int page = atoi(ps->value[v]);
        for (int i = 0; page > 0 && i < m.n_batches; i++) {
            const attn_shapes_batch *bt = &m.packed[i];
            for (uint64_t seed = 1; seed <= 16; seed++, paged++) {
                attn_gpu_problem x;
                plan_batch(&x, m.heads, 64, bt->n, page, bt->seqlen_q, bt->seqlen_k, seed * 0x9e3779b97f4a7c15ull);
                const attn_fwd_params *p = &x.p;
                const int64_t width = (int64_t)p->block_table_stride * page;
                ck_assert_msg(width > p->seqlen_k, "%s p%d: stride %d x %d <= seqlen_k %d", bt->text, page,
                              p->block_table_stride, page, p->seqlen_k);
                ck_assert_int_eq(p->seqlen_k, x.seqs.max_k > 0 ? x.seqs.max_k : 1);
                ck_assert_int_ge(p->block_table_stride, (x.seqs.max_k + page - 1) / page + 1);
                int n[KINDS];
                const int past = count_past(x.seqs.block_table, bt->n, p->block_table_stride, bt->seqlen_k, page,
                                            p->num_pages, n);
                if (past >= KINDS)
                    ck_assert_msg(n[NONE] && n[STALE] && n[POOL_END] && n[FAR], "%s p%d", bt->text, page);
                if (!p->seqused_k) { /* keys seqlen_k .. width of some sequence: an entry outside the pool */
                    without_used++;
                    ck_assert_int_ge(n[NONE] + n[POOL_END] + n[FAR], 1);
                    int same = 1;
                    for (int b = 1; b < bt->n; b++) same &= bt->seqlen_k[b] == bt->seqlen_k[0];
                    ck_assert(same);
                }
                attn_seqs_free(&x.seqs);
            }
        }
    }
    ck_assert_int_gt(paged, 0);
    ck_assert_msg(without_used > 0, "no paged batch of packed.txt stores the same number of keys in every sequence");
}
END_TEST

/* A scale row's file: its one batch and its page size (0: none). */
static const attn_shapes_batch *scale_row(const char *name, attn_shape_matrix *m, int *page) {
    read_shapes(name, m);
    ck_assert_int_eq(m->n_batches, 1);
    ck_assert_int_le(m->axis[ATTN_SHAPES_PAGE_SIZE].n, 1);
    *page = m->axis[ATTN_SHAPES_PAGE_SIZE].n ? atoi(m->axis[ATTN_SHAPES_PAGE_SIZE].value[0]) : 0;
    return &m->packed[0];
}

/* The scale row planned with `seed`: K and V past 2^31 elements. */
static void planned_past_2_31(attn_gpu_problem *x, const attn_shape_matrix *m, const attn_shapes_batch *bt, int page,
                              uint64_t seed) {
    const int head_dim = atoi(m->axis[ATTN_SHAPES_HEAD_DIM].value[0]);
    plan_batch(x, m->heads, head_dim, bt->n, page, bt->seqlen_q, bt->seqlen_k, seed);
    ck_assert_int_gt(x->st[ATTN_T_K].extent, TWO_31);
    ck_assert_int_gt(x->st[ATTN_T_V].extent, TWO_31);
}

/* shapes/large_varlen.txt: K and V packed past 2^31 elements, the last sequence entirely past. */
START_TEST(scale_varlen) {
    static attn_shape_matrix m;
    int page;
    const attn_shapes_batch *bt = scale_row("large_varlen.txt", &m, &page);
    ck_assert_int_eq(page, 0);
    attn_gpu_problem x;
    planned_past_2_31(&x, &m, bt, page, 1);
    ck_assert_ptr_nonnull(x.p.cu_seqlens_q); /* Q packed too: uneven query counts */
    ck_assert_ptr_nonnull(x.p.cu_seqlens_k);
    ck_assert_ptr_null(x.p.block_table);
    ck_assert_int_ge((int64_t)x.seqs.cu_seqlens_k[bt->n - 1] * x.p.k_row_stride, TWO_31);
    ck_assert_int_ge((int64_t)x.seqs.cu_seqlens_k[bt->n - 1] * x.p.v_row_stride, TWO_31);
    attn_seqs_free(&x.seqs);
}
END_TEST

/* shapes/large_paged.txt: a pool past 2^31 elements, every sequence reading pages past 2^31. */
START_TEST(scale_paged) {
    static attn_shape_matrix m;
    int page;
    const attn_shapes_batch *bt = scale_row("large_paged.txt", &m, &page);
    ck_assert_int_gt(page, 0);
    for (uint64_t seed = 1; seed <= 8; seed++) {
        attn_gpu_problem x;
        planned_past_2_31(&x, &m, bt, page, seed);
        ck_assert_ptr_nonnull(x.p.block_table);
        ck_assert_ptr_nonnull(x.p.seqused_k);
        int low = 0; /* sequences reading no page past element 2^31 */
        for (int b = 0; b < bt->n; b++) {
            int64_t top = 0;
            for (int i = 0; i < (bt->seqlen_k[b] + page - 1) / page; i++) {
                const int32_t page_id = x.seqs.block_table[(int64_t)b * x.p.block_table_stride + i];
                const int64_t at = (int64_t)page_id * x.p.k_batch_stride;
                top = at > top ? at : top;
            }
            low += top < TWO_31;
        }
        ck_assert_msg(!low, "seed %llu: %d sequences read no page past element 2^31", (unsigned long long)seed, low);
        attn_seqs_free(&x.seqs);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("seqs");
    TCase *tc = tcase_create("serving");
    tcase_add_test(tc, serving_table);
    tcase_add_test(tc, serving_needs_pages);
    tcase_add_test(tc, serving_problem);
    tcase_add_test(tc, suite_matrix);
    suite_add_tcase(s, tc);
    tc = tcase_create("scale");
    tcase_add_test(tc, scale_varlen);
    tcase_add_test(tc, scale_paged);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
