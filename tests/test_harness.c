/* Host helpers: fp16/bf16 rounding, seeds, layouts. */
#include "unit.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_state.h"
#include "gpu_problem.h"
#include "harness.h"
#include "pairwise.h"

START_TEST(f16_known_values) {
    ck_assert_uint_eq(attn_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(attn_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(attn_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(attn_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(attn_f32_to_f16(65520.0f), 0x7c00);         /* ties to even: Inf */
    ck_assert_uint_eq(attn_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);  /* tie: to even */
    ck_assert_uint_eq(attn_f32_to_f16(1.0f + 0x3p-11f), 0x3c02);  /* tie: to even, up */
    ck_assert_uint_eq(attn_f32_to_f16(1.0f + 0x1.8p-11f), 0x3c01); /* above the tie */
    ck_assert_uint_eq(attn_f32_to_f16(0x1p-24f), 0x0001);          /* smallest subnormal */
    ck_assert_uint_eq(attn_f32_to_f16(0x1p-25f), 0x0000);          /* tie to even: zero */
    ck_assert_uint_eq(attn_f32_to_f16(0x1.8p-24f), 0x0002);
    ck_assert_uint_eq(attn_f32_to_f16(0x1p-14f), 0x0400);          /* smallest normal */
    ck_assert_uint_eq(attn_f32_to_f16(INFINITY), 0x7c00);
    ck_assert((attn_f32_to_f16(NAN) & 0x7fff) > 0x7c00);
}
END_TEST

START_TEST(f16_round_trip_every_value) {
    for (unsigned h = 0; h < 65536; h++) {
        float f = attn_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        ck_assert_msg(attn_f32_to_f16(f) == h, "0x%04x -> %g -> 0x%04x", h, f, attn_f32_to_f16(f));
    }
    ck_assert_float_eq(attn_f16_to_f32(0x3555), 0.333251953125f);
}
END_TEST

START_TEST(bf16_known_values) {
    ck_assert_uint_eq(attn_f32_to_bf16(1.0f), 0x3f80);
    ck_assert_uint_eq(attn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);   /* tie: to even */
    ck_assert_uint_eq(attn_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);   /* tie: to even, up */
    ck_assert_uint_eq(attn_f32_to_bf16(1.0f + 0x1.2p-8f), 0x3f81);
    ck_assert_float_eq(attn_bf16_to_f32(0xc040), -3.0f);
    ck_assert(isnan(attn_bf16_to_f32(attn_f32_to_bf16(NAN))));
    for (unsigned h = 0; h < 65536; h++) {
        float f = attn_bf16_to_f32((uint16_t)h);
        if (!isnan(f)) ck_assert_uint_eq(attn_f32_to_bf16(f), h);
    }
}
END_TEST

START_TEST(seeds_from_names) {
    unsetenv("ATTN_SEED");
    uint64_t a = attn_seed_from_name("correctness/simple/fp16/d64/full/s4");
    ck_assert_uint_eq(a, attn_seed_from_name("correctness/simple/fp16/d64/full/s4"));
    ck_assert_uint_ne(a, attn_seed_from_name("correctness/simple/fp16/d64/full/s17"));
    setenv("ATTN_SEED", "0x1234", 1);
    ck_assert_uint_eq(attn_seed_from_name("anything"), 0x1234);
    unsetenv("ATTN_SEED");
}
END_TEST

START_TEST(normals_are_normal) {
    attn_rng r;
    attn_rng_init(&r, 42);
    double sum = 0, sq = 0;
    int n = 200000, zeros = 0;
    for (int i = 0; i < n; i++) {
        double x = attn_rng_normal(&r);
        sum += x, sq += x * x, zeros += x == 0;
    }
    ck_assert_double_eq_tol(sum / n, 0.0, 0.01);
    ck_assert_double_eq_tol(sq / n, 1.0, 0.02);
    ck_assert_int_eq(zeros, 0);
}
END_TEST

START_TEST(layouts) {
    attn_strides s = attn_make_strides(ATTN_LAYOUT_BSHD, 2, 3, 5, 64);
    ck_assert_int_eq(s.head, 64);
    ck_assert_int_eq(s.row, 192);
    ck_assert_int_eq(s.batch, 960);
    ck_assert_int_eq(s.extent, 1920);
    s = attn_make_strides(ATTN_LAYOUT_BHSD, 2, 3, 5, 64);
    ck_assert_int_eq(s.row, 64);
    ck_assert_int_eq(s.head, 320);
    ck_assert_int_eq(s.batch, 960);
    s = attn_make_strides(ATTN_LAYOUT_BSHD_PADDED, 2, 3, 5, 64);
    ck_assert_int_eq(s.row, 200);
    ck_assert_int_eq(s.batch, 1000);
    s = attn_make_strides(ATTN_LAYOUT_BHSD_PADDED, 2, 3, 5, 64);
    ck_assert_int_eq(s.row, 72);
    ck_assert_int_eq(s.head, 360);
    ck_assert_int_eq(attn_offset(&s, 1, 2, 4, 63), 1080 + 720 + 288 + 63);
    s = attn_make_strides(ATTN_LAYOUT_BSHD_ODD, 2, 3, 5, 64);
    ck_assert_int_eq(s.head, 64);
    ck_assert_int_eq(s.row, 193); /* odd: row 1 starts 2 bytes past a 4-byte boundary */
    ck_assert_int_eq(s.batch, 965);
    ck_assert_int_eq(s.extent, 1930);
}
END_TEST

/* The contract checks' layouts (unaligned, broadcast) planned as the suite plans them: the
 * strides the kernel gets, the views the inputs are filled through (a broadcast tensor's is its
 * memory), the 2-byte shift of a base, and the problem valid (attn_gpu_problem_plan checks it). */
static attn_gpu_problem planned(attn_layout q, attn_layout kv, unsigned shifted) {
    attn_problem_desc d = attn_problem_dense(ATTN_F16, 2, 3, 5, 7, 64, 0, "unit/layouts");
    d.layout[ATTN_T_Q] = q, d.layout[ATTN_T_K] = d.layout[ATTN_T_V] = kv, d.shifted = shifted;
    attn_gpu_problem x;
    char err[512];
    ck_assert_msg(!attn_gpu_problem_plan(&x, &d, err, sizeof err), "%s", err);
    return x;
}

START_TEST(contract_layouts_planned) {
    attn_gpu_problem x = planned(ATTN_LAYOUT_BSHD_ODD, ATTN_LAYOUT_HEADS_BCAST, 0);
    ck_assert_int_eq(x.p.q_row_stride, 3 * 64 + 1);
    ck_assert_int_eq(x.p.k_head_stride, 0);
    ck_assert_int_eq(x.p.k_row_stride, 64);
    ck_assert_int_eq(x.p.k_batch_stride, 7 * 64);
    ck_assert_int_eq(x.st[ATTN_T_V].extent, 2 * 7 * 64);
    attn_tensor_view v = attn_gpu_problem_view(&x, ATTN_T_K);
    ck_assert_int_eq(v.heads, 1);
    ck_assert_int_eq(v.batch, 2);
    v = attn_gpu_problem_view(&x, ATTN_T_Q);
    ck_assert_int_eq(v.heads, 3);
    ck_assert_uint_eq(attn_gpu_problem_lead(&x, ATTN_T_Q), ATTN_GUARD_BYTES);

    x = planned(ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BATCH_BCAST, ATTN_TENSOR_BIT(ATTN_T_V) | ATTN_TENSOR_BIT(ATTN_T_O));
    ck_assert_int_eq(x.p.v_batch_stride, 0);
    ck_assert_int_eq(x.p.v_head_stride, 64);
    ck_assert_int_eq(x.p.v_row_stride, 3 * 64);
    ck_assert_int_eq(x.st[ATTN_T_K].extent, 7 * 3 * 64);
    v = attn_gpu_problem_view(&x, ATTN_T_V);
    ck_assert_int_eq(v.batch, 1);
    ck_assert_int_eq(v.heads, 3);
    ck_assert_uint_eq(attn_gpu_problem_lead(&x, ATTN_T_V), ATTN_GUARD_BYTES + 2);
    ck_assert_uint_eq(attn_gpu_problem_lead(&x, ATTN_T_O), ATTN_GUARD_BYTES + 2);
    ck_assert_uint_eq(attn_gpu_problem_lead(&x, ATTN_T_K), ATTN_GUARD_BYTES);
    ck_assert_uint_eq(attn_gpu_problem_lead(&x, ATTN_T_LSE), ATTN_GUARD_BYTES); /* never shifted */
}
END_TEST

START_TEST(ctest_gpu_assignment) {
    int id = -1;
    ck_assert_int_eq(attn_parse_ctest_gpu("id:1,slots:2", &id), 0);
    ck_assert_int_eq(id, 1);
    ck_assert_int_eq(attn_parse_ctest_gpu("id:0,slots:8;id:1,slots:8", &id), 0);
    ck_assert_int_eq(id, 0);
    ck_assert_int_ne(attn_parse_ctest_gpu("id:x,slots:1", &id), 0);
    ck_assert_int_ne(attn_parse_ctest_gpu("id:1", &id), 0);
    ck_assert_int_ne(attn_parse_ctest_gpu("id:1,slots:0", &id), 0);
    ck_assert_int_ne(attn_parse_ctest_gpu("id:1,slots:1junk", &id), 0);
}
END_TEST

/* Every pair of values of every two axes appears in some row; rows are in range. */
static void expect_covering(const int *sizes, int n_axes, int max_expected) {
    int rows[4096 * 8];
    int n = attn_pairwise(sizes, n_axes, rows, 4096);
    ck_assert_int_gt(n, 0);
    ck_assert_msg(n <= max_expected, "%d rows, expected at most %d", n, max_expected);
    for (int r = 0; r < n; r++)
        for (int a = 0; a < n_axes; a++) ck_assert(rows[r * n_axes + a] >= 0 && rows[r * n_axes + a] < sizes[a]);
    for (int a = 0; a < n_axes; a++)
        for (int b = a + 1; b < n_axes; b++)
            for (int va = 0; va < sizes[a]; va++)
                for (int vb = 0; vb < sizes[b]; vb++) {
                    int found = 0;
                    for (int r = 0; r < n && !found; r++) found = rows[r * n_axes + a] == va && rows[r * n_axes + b] == vb;
                    ck_assert_msg(found, "pair (axis %d = %d, axis %d = %d) not covered", a, va, b, vb);
                }
}

START_TEST(pairwise_covers_every_pair) {
    const int three_binary[] = {2, 2, 2};
    expect_covering(three_binary, 3, 6);
    const int mixed[] = {2, 4, 2, 3, 4, 2, 22}; /* dtype, head dim, mask, kv, window, softcap, shape */
    expect_covering(mixed, 7, 4 * 22 + 22);     /* at least 4 x 22 (the two largest axes) */
    const int one_value[] = {1, 5, 1};
    expect_covering(one_value, 3, 5);
    int rows[8];
    const int single[] = {3};
    ck_assert_int_eq(attn_pairwise(single, 1, rows, 8), 3); /* one axis: each value once */
    ck_assert_int_eq(attn_pairwise(three_binary, 3, rows, 2), -1); /* more rows than allowed */
    int r1[64], r2[64];
    ck_assert_int_eq(attn_pairwise(mixed, 7, r1, 9) , -1);
    const int small[] = {2, 3, 2};
    int n1 = attn_pairwise(small, 3, r1, 21), n2 = attn_pairwise(small, 3, r2, 21);
    ck_assert_int_eq(n1, n2);
    ck_assert(!memcmp(r1, r2, sizeof(int) * (size_t)n1 * 3)); /* deterministic */
}
END_TEST

/* the cross product: every combination once, the last axis fastest; bad sizes refused */
START_TEST(axis_rows_cross_product) {
    const int sizes[] = {2, 1, 3};
    int rows[6 * 3];
    ck_assert_int_eq(attn_axis_rows(sizes, 3, 0, rows, 6), 6);
    const int expect[6][3] = {{0, 0, 0}, {0, 0, 1}, {0, 0, 2}, {1, 0, 0}, {1, 0, 1}, {1, 0, 2}};
    ck_assert(!memcmp(rows, expect, sizeof expect));
    ck_assert_int_eq(attn_axis_rows(sizes, 3, 0, rows, 5), -1); /* more rows than allowed */
    const int empty[] = {2, 0};
    ck_assert_int_eq(attn_axis_rows(empty, 2, 0, rows, 6), -1);
    int pw[64];
    ck_assert_int_eq(attn_axis_rows(sizes, 3, 1, pw, 64), attn_pairwise(sizes, 3, rows, 6));
}
END_TEST

/* the state comparison of state_unchanged: each difference named once; an item read on one
 * side only is not compared; a full buffer truncates, never overflows */
START_TEST(cuda_state_differences) {
    attn_cuda_state a, b;
    memset(&a, 0, sizeof a);
    a.device_ok = a.window_ok = a.mempool_ok = 1;
    for (int i = 0; i < ATTN_STATE_LIMITS; i++) a.limit_ok[i] = 1;
    b = a;
    char out[1024];
    ck_assert_int_eq(attn_cuda_state_diff(&a, &b, out, sizeof out), 0);
    ck_assert_str_eq(out, "");
    b.window.base_ptr = (void *)0x1000, b.window.num_bytes = 65536, b.window.hitRatio = 1.0f;
    b.limit[ATTN_STATE_LIMITS - 1] = 4u << 20; /* the persisting-L2 set-aside */
    ck_assert_int_eq(attn_cuda_state_diff(&a, &b, out, sizeof out), 2);
    ck_assert_ptr_nonnull(strstr(out, "persisting-L2 set-aside (cudaLimitPersistingL2CacheSize) 0 -> 4194304"));
    ck_assert_ptr_nonnull(strstr(out, "L2 access policy window"));
    ck_assert_ptr_nonnull(strstr(out, "; "));
    b.window_ok = 0; /* not read after: not compared */
    ck_assert_int_eq(attn_cuda_state_diff(&a, &b, out, sizeof out), 1);
    b.device = 1, b.capture_mode = cudaStreamCaptureModeRelaxed, b.capture_ok = 1; /* capture not read before */
    ck_assert_int_eq(attn_cuda_state_diff(&a, &b, out, 16), 2);
    ck_assert_int_eq((int)strlen(out), 15);
    /* the flags: the driver's local-memory resize bit is not a difference, a scheduling bit is */
    attn_cuda_state f = a, g = a;
    f.flags_ok = g.flags_ok = 1;
    f.device_flags = cudaDeviceMapHost, g.device_flags = cudaDeviceMapHost | cudaDeviceLmemResizeToMax;
    ck_assert_int_eq(attn_cuda_state_diff(&f, &g, out, sizeof out), 0);
    g.device_flags |= cudaDeviceScheduleBlockingSync;
    ck_assert_int_eq(attn_cuda_state_diff(&f, &g, out, sizeof out), 1);
    ck_assert_ptr_nonnull(strstr(out, "device flags"));
}
END_TEST

int main(void) {
    Suite *s = suite_create("harness");
    TCase *tc = tcase_create("host_helpers");
    tcase_add_test(tc, f16_known_values);
    tcase_add_test(tc, f16_round_trip_every_value);
    tcase_add_test(tc, bf16_known_values);
    tcase_add_test(tc, seeds_from_names);
    tcase_add_test(tc, normals_are_normal);
    tcase_add_test(tc, layouts);
    tcase_add_test(tc, contract_layouts_planned);
    tcase_add_test(tc, ctest_gpu_assignment);
    tcase_add_test(tc, pairwise_covers_every_pair);
    tcase_add_test(tc, axis_rows_cross_product);
    tcase_add_test(tc, cuda_state_differences);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
