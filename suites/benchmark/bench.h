/* attn_benchmark's parts (main.c says what the program does): the test's context, filled
 * phase by phase and passed to every phase, and the functions of each file. One test per
 * process; main owns the one context. */
#ifndef ATTN_BENCH_H
#define ATTN_BENCH_H

#include <stddef.h>

#include <cuda_runtime_api.h>
#include <jansson.h>

#include "attn_abi.h"
#include "bench_gpu.h"
#include "cudnn_sdpa.h"
#include "gpu_problem.h"
#include "harness.h"
#include "reference.h"
#include "thresholds.h"
#include "verdict.h"
#include "work.h"

enum { MAX_BENCH_SEQS = ATTN_MAX_SEQS }; /* sequences of a varlen batch */

typedef struct {
    /* the arguments (args.c) */
    const char *name, *kernel_name, *plugin, *thresholds_dir, *tolerance_path, *fragments;
    const char *dtype_name, *mask_name, *workload_name; /* as given, for the messages */
    int pass; /* attn_pass (--pass): what is timed; bwd and fwd_bwd take the dense matrix only */
    attn_dtype dtype;
    int head_dim, causal, seqlen, tokens, hidden;
    int batch, heads; /* the shape derived from tokens and hidden (version 2: given) */
    /* version 2's workloads (workload > ATTN_WORKLOAD_CAUSAL) */
    int workload, heads_k, window_left, window_right, page_size;
    int seqlen_q; /* the longest sequence's queries (the dense matrix: seqlen) */
    int nseq, lens_q[MAX_BENCH_SEQS], lens_k[MAX_BENCH_SEQS];

    /* the harness: tolerance file, kernel, fragment and its phases (report.c) */
    attn_tolerance tol;
    const attn_kernel *kernel;
    json_t *doc;           /* this test's fragment */
    json_t *phases;        /* wall time of each phase, in doc ("phases_s") */
    double phase_start;

    /* the problem (problem.c; the backward passes' in backward.c): its tensors, the kernel's
     * parameters (prob->p), the golden and low-precision O (prob->g, prob->r), kept on the GPU */
    attn_gpu_problem fwd_prob; /* the forward pass's */
    attn_bwd_problem bwd;      /* the backward passes': dO, the gradients, the workspace, their
                                  references, on the forward problem bwd.f */
    attn_gpu_problem *prob;    /* the forward problem: &fwd_prob or &bwd.f */
    attn_gpu_snapshot fwd_out; /* the backward passes: O and the LSE as built, put back before
                                  the baselines run (a kernel may have written them) */
    cudaStream_t stream;
    attn_reference *ref;

    /* this GPU and the thresholds that judge the kernel on it */
    struct cudaDeviceProp prop;
    char tpath[1024];
    attn_thresholds th;
    const char *judge_as;
    const attn_threshold_class *cls; /* NULL: no class covers the case */

    /* timings (timing.c); tc and the cudnn_* fields are valid only where have_cudnn */
    attn_timer *timer;
    attn_timing_rules rules;
    attn_timing tk, tr, tc;
    int have_reference; /* the cuBLAS baseline ran (dense workloads only) */
    char reference_why[512]; /* why not, for a dense problem (the backward's did not fit) */
    int have_cudnn;
    char cudnn_why[2048], cudnn_kind[64];
    long cudnn_version;    /* 0: cuDNN did not load */
    char cudnn_lib[1024];  /* the library loaded (path) */
    json_t *cudnn_engine;  /* the chosen engine config and its search (cudnn_engine_json) */
    char measured_by[512]; /* the test that timed the baselines, when reused; else "" */
    char timed_output_why[2048]; /* the output left by the timed launches: "" when right */
} bench;

/* What the timings mean: work, roofline, speedups (with their confidence intervals). */
struct figures {
    double flops, bytes, peak, bw, floor_s, t, roofline, roofline_hi;
    double sp_ref, sp_ref_lo, sp_ref_hi, sp_cud, sp_cud_lo, sp_cud_hi; /* sp_cud*: NAN without cuDNN */
};

/* args.c: reads and checks the command line into bm; a bad one exits 2 with the usage. */
void bench_parse_args(bench *bm, int argc, char **argv);

/* report.c: the fragment, the phases, the figures and the verdict */
/* Records the verdict and its reason, writes the fragment, exits. */
void bench_finish(bench *bm, const char *verdict, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
void bench_phase_done(bench *bm, const char *name);
struct figures bench_compute_figures(const bench *bm);
void bench_print_figures(const bench *bm, const struct figures *f);
void bench_record_figures(bench *bm, const struct figures *f);
void bench_check_measurement(bench *bm, const struct figures *f);
void bench_judge(bench *bm, const struct figures *f) __attribute__((noreturn));

/* problem.c: set-up, the problem, its references and the verdict rule on O (and, through
 * backward.c, on the gradients) */
int bench_open_harness(bench *bm);
int bench_begin_fragment(bench *bm);
void bench_load_thresholds(bench *bm);
attn_problem_desc bench_describe(const bench *bm);
void bench_make_inputs(bench *bm);
void bench_record_config(bench *bm);
void bench_make_references(bench *bm);
int bench_verify(bench *bm, attn_enqueue_fn fn, void *ctx, char *why, size_t whylen);
int bench_judge_output_now(bench *bm, char *why, size_t whylen);
int bench_judge_o_now(bench *bm, char *why, size_t whylen);
int bench_poison_outputs(bench *bm, char *err, size_t errlen);

/* timing.c: the kernel and the baselines, verified and timed */
int bench_run_kernel(void *bm, cudaStream_t s, char *err, size_t errlen);
void bench_verify_kernel(bench *bm);
void bench_time_kernel(bench *bm);
void bench_baselines(bench *bm);
void bench_record_launches(bench *bm);
json_t *bench_cudnn_json(const bench *bm);
json_t *bench_cudnn_engine_json(const attn_cudnn_plan_info *in);
attn_cudnn *bench_cudnn_open(bench *bm);

/* backward.c: the backward passes (bwd, fwd_bwd): their problem, the kernel's calls, the
 * verdict on the gradients, the baselines' backward */
void bench_bwd_check_support(bench *bm);
void bench_bwd_build(bench *bm);
void bench_bwd_restore_forward(bench *bm);
int bench_kernel_call(const bench *bm, cudaStream_t s);
const char *bench_kernel_lacks(const bench *bm, char *why, size_t whylen);
int bench_judge_grads_now(bench *bm, char *why, size_t whylen);
int bench_bwd_verify_reference(bench *bm, char *why, size_t whylen);
void bench_bwd_time_reference(bench *bm);
void bench_bwd_time_cudnn(bench *bm);

#endif
