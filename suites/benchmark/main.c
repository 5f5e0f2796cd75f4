/* One benchmark: a kernel on one shape of the benchmark matrix, sized like FlashAttention's
 * benchmarks (batch x seqlen = tokens, heads x head_dim = hidden), against the cuBLAS +
 * softmax baseline and cuDNN's fused attention, judged by the thresholds stored for this GPU.
 *
 *   attn_benchmark --name benchmark/simple/fp16/d64/causal/s512 --kernel simple [--plugin L]
 *       [--pass fwd|bwd|fwd_bwd] --dtype fp16 --head-dim 64 --mask causal --seqlen 512
 *       --tokens 16384 --hidden 2048 --thresholds-dir thresholds
 *       --tolerance thresholds/tolerance.ini --fragments DIR
 *
 * Version 2's workloads (shapes/benchmark_<workload>.txt) give the problem instead of
 * tokens and hidden:
 *   --workload decode --batch B --heads H --heads-k HK --shape QxK --page-size P
 *       B sequences of Q queries (Q dense) against K keys each in a shuffled pool of P-row
 *       pages (seqused_k = K): a decode step against a KV cache;
 *   --workload varlen --heads H --heads-k HK --sequences QxK+QxK+...
 *       a packed batch (cu_seqlens_q and cu_seqlens_k) of prefill sequences of mixed lengths;
 *   --workload window --batch B --heads H --heads-k HK --shape SxS --window L:R
 *       dense, with a sliding window (and the mask).
 * They have no cuBLAS baseline (it computes version-1 problems only); their work is counted
 * exactly, row by row (FLOPs of the visible keys; bytes of Q, O and each sequence's keys
 * that some row sees, read once per KV head): decode's roofline is a memory roofline.
 *
 * The backward (--pass bwd; the dense matrix only, shapes/benchmark_bwd.txt): the kernel's bwd
 * on the backward problem (harness/gpu_problem_bwd.c: O and the LSE the golden forward's, dO
 * random, the workspace of the kernel's bwd_workspace allocated here, deterministic 0);
 * --pass fwd_bwd: its fwd then its bwd as one measured call (the "forward + backward" row). A
 * kernel without bwd, or that lacks what the problem needs (attn_kernel_lacks_bwd), or returns
 * ATTN_UNSUPPORTED, is not supported. dQ, dK and dV are judged by check bwd_accuracy's rule
 * (attn_bwd_grad_verdict; fwd_bwd: O by the forward's too), before the timing and on what the
 * timed launches leave. Work by FlashAttention's convention (work.h): FLOPs 2.5 x the
 * forward's 4 B H S^2 D (halved when causal, as the forward counts it), fwd_bwd 3.5 x; bytes
 * the least traffic (bwd reads Q, K, V, O, dO and the LSE and writes dQ, dK, dV once; fwd_bwd
 * adds the forward's, and the LSE it writes). Baselines: the cuBLAS reference's backward twin
 * (attn_ref_backward ATTN_REF_LOWP, the unfused fp16/bf16 backward, its GEMMs float32 on CUDA
 * cores, unlike the forward's tensor-core baseline; fwd_bwd: after the forward's cuBLAS
 * baseline), not run where its outputs do not fit in memory (said, and the class judged
 * without min_speedup_reference); cuDNN's SDPA backward (fwd_bwd: its forward then its
 * backward), autotuned and checked on this test's inputs. Thresholds sections name the pass
 * after the kernel ([flash2 bwd fp16 d128 causal 512-16384]).
 *
 * Order: verify the kernel (a wrong kernel is never timed as a pass), time it, verify and
 * time each baseline, then the verdict. Writes DIR/<name>.json (collected into one results
 * file by attn_results at the end of the run) and prints <CTestMeasurement> tags.
 * Exit: 0 pass, 1 fail, 77 skipped / not supported, 2 bad arguments or harness error.
 * ATTN_THRESHOLDS_KERNEL=<k> judges the kernel by k's thresholds (e.g. a slowed-down copy
 * by the original's); ATTN_BENCH_TIMEOUT=<s> caps each measurement (default 1 s).
 *
 * The baselines are the same computation whatever the kernel: within one run (one fragments
 * directory, which attn_results --reset empties at the run's start), the first benchmark of
 * a shape on a GPU times them and leaves them in DIR/baselines/; the other kernels' benchmarks
 * of that shape and pass reuse those figures (the fragment names the test that measured them)
 * and only check the baseline's output on their own inputs. ATTN_BENCH_REUSE_BASELINES=0 times
 * them in every test. Every fragment says its "pass". */
#include "bench.h"

/* The phases in order (see the top of this file). */
int main(int argc, char **argv) {
    const double t_main = attn_wall_s();
    bench bm = {0}; /* the test's one context, passed to every phase */
    bench_parse_args(&bm, argc, argv);
    int rc = bench_open_harness(&bm);
    if (rc) return rc;
    if ((rc = bench_begin_fragment(&bm))) return rc;
    bm.phase_start = t_main;
    bench_phase_done(&bm, "startup"); /* arguments, the tolerance file, the CUDA context */

    bench_load_thresholds(&bm);
    bench_make_inputs(&bm); /* the backward passes: the kernel asked whether it takes the problem */
    bench_phase_done(&bm, "setup");
    bench_make_references(&bm); /* the backward passes: their problem built with its references */
    bench_phase_done(&bm, "references");
    bench_record_config(&bm);

    /* 1. the kernel: right first, then timed */
    bench_verify_kernel(&bm);
    bench_phase_done(&bm, "verify_kernel");
    bench_time_kernel(&bm);
    bench_phase_done(&bm, "time_kernel");

    /* 2. and 3. the baselines, checked on this test's inputs; timed here or reused */
    bench_baselines(&bm);
    bench_phase_done(&bm, "cudnn");
    bench_record_launches(&bm); /* after the timings: CUPTI stays out of them */
    bench_phase_done(&bm, "launches");

    const struct figures f = bench_compute_figures(&bm);
    bench_print_figures(&bm, &f);
    bench_record_figures(&bm, &f);
    attn_timer_destroy(bm.timer);
    bench_check_measurement(&bm, &f);
    bench_judge(&bm, &f);
}
