/* Host test of the cuDNN backward graph (no GPU): for each case, every tensor and operation
 * descriptor of the graph a backward plan builds is created, given its attributes and
 * finalized by the libcudnn this machine loads (what cudnn_sdpa.h's search finds), up to the
 * operation graph, which needs a handle and so a GPU. It catches attribute names, types and
 * counts cuDNN rejects, and shapes it refuses, before any GPU run. The library's version is
 * spoofed per case where the graph depends on it (cudnn-frontend's workarounds). Exit 77
 * (skipped) when libcudnn cannot be loaded. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudnn_sdpa_internal.h"

typedef struct {
    const char *name;
    int b, h, hk, sq, sk, d, dv, causal, left, right;
    float softcap;
    int varlen, seqused, deterministic;
    long version; /* 0: the library's */
    int expect_fail;
} bwd_case;

static const bwd_case cases[] = {
    {"plain", 2, 4, 4, 128, 128, 64, 64, 0, -1, -1, 0, 0, 0, 0, 0, 0},
    {"causal", 2, 4, 4, 256, 256, 128, 128, 1, -1, -1, 0, 0, 0, 0, 0, 0},
    {"deterministic", 2, 4, 4, 256, 256, 128, 128, 1, -1, -1, 0, 0, 0, 1, 0, 0},
    {"gqa", 2, 8, 2, 128, 256, 64, 64, 0, -1, -1, 0, 0, 0, 0, 0, 0},
    {"mqa_head_dim_v", 1, 4, 1, 64, 64, 128, 64, 0, -1, -1, 0, 0, 0, 0, 0, 0},
    {"causal_sq_gt_sk_sliced", 2, 4, 4, 300, 128, 64, 64, 1, -1, -1, 0, 0, 0, 0, 0, 0},
    {"window", 2, 4, 4, 256, 256, 64, 64, 0, 32, 16, 0, 0, 0, 0, 0, 0},
    {"causal_window_sq_gt_sk", 2, 4, 4, 200, 128, 64, 64, 1, 40, -1, 0, 0, 0, 0, 0, 0},
    {"left_only", 2, 4, 4, 256, 256, 64, 64, 0, 32, -1, 0, 0, 0, 0, 0, 0},
    {"softcap", 2, 4, 4, 128, 128, 64, 64, 0, -1, -1, 30.0f, 0, 0, 0, 0, 0},
    {"varlen_causal_gqa", 3, 8, 4, 97, 211, 64, 64, 1, -1, -1, 0, 1, 0, 0, 0, 0},
    {"varlen_deterministic", 3, 4, 4, 97, 211, 128, 128, 0, -1, -1, 0, 1, 0, 1, 0, 0},
    {"seqused_k_window", 2, 4, 2, 64, 300, 64, 64, 1, 50, -1, 0, 0, 1, 0, 0, 0},
    {"cudnn_9_14_workaround_padding", 2, 4, 4, 100, 200, 64, 64, 0, -1, -1, 0, 0, 0, 0, 91400, 0},
    {"cudnn_9_14_softcap_padding", 2, 4, 4, 100, 200, 64, 64, 0, -1, -1, 50.0f, 0, 0, 0, 91400, 0},
    {"cudnn_9_5_second_padding_mask", 2, 4, 4, 128, 128, 64, 64, 1, -1, -1, 0, 1, 0, 0, 90500, 0},
    /* the controls, which cuDNN refuses: a negative dimension (its tensor descriptor), and 3
     * query heads on 2 KV heads (the Q.K^T matmul's broadcast) */
    {"control_negative_head_dim", 1, 1, 1, 64, 64, -8, -8, 0, -1, -1, 0, 0, 0, 0, 0, 1},
    {"control_heads_3_on_2", 1, 3, 2, 64, 64, 64, 64, 0, -1, -1, 0, 0, 0, 0, 0, 1},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static attn_cudnn *lib;

/* A BSHD problem (packed rows when varlen: cu_seqlens set, never read here) */
static void make_problem(const bwd_case *k, attn_fwd_params *f, attn_bwd_params *p) {
    static const int32_t never_read[4];
    memset(f, 0, sizeof *f);
    memset(p, 0, sizeof *p);
    f->dtype = ATTN_BF16;
    f->batch = k->b, f->heads = k->h, f->heads_k = k->hk, f->seqlen_q = k->sq, f->seqlen_k = k->sk;
    f->head_dim = k->d, f->head_dim_v = k->dv, f->causal = k->causal;
    f->window_left = k->left, f->window_right = k->right, f->softcap = k->softcap, f->softmax_scale = 0.125f;
    const int64_t h = k->h, hk = k->hk, d = k->d, dv = k->dv, sq = k->sq, sk = k->sk;
    f->q_batch_stride = sq * h * d, f->q_head_stride = d, f->q_row_stride = h * d;
    f->k_batch_stride = sk * hk * d, f->k_head_stride = d, f->k_row_stride = hk * d;
    f->v_batch_stride = sk * hk * dv, f->v_head_stride = dv, f->v_row_stride = hk * dv;
    f->o_batch_stride = sq * h * dv, f->o_head_stride = dv, f->o_row_stride = h * dv;
    if (k->varlen) f->cu_seqlens_q = f->cu_seqlens_k = never_read;
    if (k->seqused) f->seqused_k = never_read;
    p->fwd = f;
    p->do_batch_stride = f->o_batch_stride, p->do_head_stride = dv, p->do_row_stride = h * dv;
    p->dq_batch_stride = f->q_batch_stride, p->dq_head_stride = d, p->dq_row_stride = h * d;
    p->dk_batch_stride = f->k_batch_stride, p->dk_head_stride = d, p->dk_row_stride = hk * d;
    p->dv_batch_stride = f->v_batch_stride, p->dv_head_stride = dv, p->dv_row_stride = hk * dv;
    p->deterministic = k->deterministic;
}

START_TEST(test_bwd_graph) {
    const bwd_case *k = &cases[_i];
    attn_fwd_params f;
    attn_bwd_params p;
    make_problem(k, &f, &p);
    const long real = lib->version;
    if (k->version) lib->version = k->version;
    char why[8192] = "";
    int n_ops = 0, n_uids = 0;
    int rc = sdpa_bwd_graph_check(lib, &p, &n_ops, &n_uids, why, sizeof why);
    lib->version = real;
    printf("%-32s %s: %d operations, %d graph inputs/outputs%s%s\n", k->name, rc ? "refused" : "built", n_ops, n_uids,
           why[0] ? ": " : "", why);
    if (k->expect_fail) {
        ck_assert_msg(rc != 0, "%s: the control was built (a descriptor cuDNN should refuse was accepted)", k->name);
        return;
    }
    ck_assert_msg(rc == 0, "%s: %s", k->name, why);
    ck_assert_int_gt(n_ops, 10);
    ck_assert_int_le(n_uids, MAX_UIDS);
}
END_TEST

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: attn_unit_cudnn_bwd_graph\n"
               "The cuDNN backward graph's descriptors finalized by the libcudnn this machine loads (no GPU\n"
               "needed): 0 all built (the controls refused), 1 a failure, 77 no libcudnn.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "attn_unit_cudnn_bwd_graph: unknown argument '%s' (it takes none; --help)\n", argv[1]);
        return 2;
    }
    char why[2048];
    if (sdpa_open_library(&lib, why, sizeof why)) {
        printf("skipped: %s\n", why);
        return 77;
    }
    printf("cuDNN %ld\n", lib->version);
    Suite *s = suite_create("cudnn_bwd_graph");
    TCase *tc = tcase_create("descriptors");
    tcase_add_loop_test(tc, test_bwd_graph, 0, N_CASES);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    attn_cudnn_close(lib);
    return failed != 0;
}
