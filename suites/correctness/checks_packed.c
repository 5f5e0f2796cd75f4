/* 13. a packed batch (attn_abi.h's varlen layout, group packed in checks.def): sequences of
 * their own lengths (0 included), queries packed by cu_seqlens_q, K and V packed by
 * cu_seqlens_k or in a shuffled pool of pages read through a block table (seqused_k their
 * filled length). A batch whose sequences all have the same number of queries (a decode
 * batch) gives Q, O and the LSE dense instead (no cu_seqlens_q): the memory is the same
 * rows, so only the problem and the LSE's index differ; without pages its K and V are then a
 * dense cache with seqused_k. harness/gpu_problem.h builds all of these. The kernel's O and
 * LSE are unpacked on the GPU into the reference's dense layout and judged by the same
 * rules; a right output is then put through the kernel contract on the same layout
 * (packed_contract). */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "context.h"
#include "gpu_verify.h"
#include "harness.h"

/* O and the LSE unpacked and judged as a dense problem of the longest lengths (no mask in
 * the view: which rows see no key is already in G and the golden LSE). */
static int packed_judge(check_ctx *c, attn_gpu_problem *x) {
    char err[1024];
    if (attn_gpu_problem_unpack(x, c->stream, err, sizeof err)) {
        say(c, "  %s\n", err);
        return 1;
    }
    const attn_fwd_params view = attn_gpu_problem_unpacked(x);
    attn_output_stats st;
    attn_output_verdict v;
    attn_lse_verdict lv;
    double top;
    cudaError_t e = attn_output_stats_gpu(&view, x->g, x->r, &st, c->stream);
    if (e == cudaSuccess) e = attn_lse_verdict_gpu(x->lse_dense, x->lg, x->rows, &c->tol, &lv, &top, c->stream);
    if (e != cudaSuccess) {
        say(c, "  packed: gathering the verdict's figures failed: %s (%s)\n", cudaGetErrorName(e),
            cudaGetErrorString(e));
        return 1;
    }
    attn_output_decide(&st, x->desc.dtype, &c->tol, &v);
    int bad = v.rule != ATTN_RULE_PASS;
    if (bad)
        say(c, "  packed output: %s (verdict rule %d: max|O-G| %g, bound %g)\n", attn_rule_name(v.rule), (int)v.rule,
            st.max_err, v.max_bound);
    if (!lv.ok) {
        say(c, "  packed LSE: %zu values wrong, first at dense row %zu (b, h, s over the longest lengths)\n",
            lv.bad_count, lv.worst);
        bad = 1;
    }
    return bad;
}

/* fwd on a non-blocking stream held by a gate, the outputs poisoned behind it: it must
 * return at once and leave a right output once the gate opens. */
static int packed_gated(check_ctx *c, attn_gpu_problem *x, cudaStream_t s, attn_gate *gate) {
    char err[1024];
    if (attn_gate_shut(gate, s, GATE_TIMEOUT_S) != cudaSuccess ||
        attn_gpu_problem_poison_outputs(x, s, err, sizeof err)) {
        say(c, "  packed contract: setting up the gate failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    int rc = c->kernel->fwd(&x->p, s);
    const int blocked = attn_gate_timed_out(gate);
    attn_gate_open(gate);
    if (rc != ATTN_OK || wait_kernel(c, s) != LAUNCH_OK) {
        say(c, "  packed contract: fwd on a held stream returned %d or failed\n", rc);
        return 1;
    }
    if (blocked || attn_gate_timed_out(gate)) {
        say(c, "  packed contract: fwd did not return while its stream was held (the gate opened by its %d s "
            "timeout): fwd waits for the GPU on this layout (a blocking copy of cu_seqlens, seqused_k or the "
            "block table to the host, a synchronization); a kernel must only enqueue work\n", GATE_TIMEOUT_S);
        return 1;
    }
    if (packed_judge(c, x)) {
        say(c, "  packed contract: fwd was called on a non-blocking stream held by a gate, the outputs "
            "poisoned behind it: work not ordered on that stream\n");
        return 1;
    }
    return 0;
}

/* fwd captured into a CUDA graph on s and replayed on poisoned outputs. */
static int packed_captured(check_ctx *c, attn_gpu_problem *x, cudaStream_t s) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    char err[1024];
    int bad = 1;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    int rc = e == cudaSuccess ? c->kernel->fwd(&x->p, s) : ATTN_OK;
    cudaError_t e2 = cudaStreamEndCapture(s, &graph);
    if (e == cudaSuccess) e = e2;
    if (e == cudaSuccess && rc == ATTN_OK && graph) e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGetLastError();
    if (e != cudaSuccess || rc != ATTN_OK || !exec) {
        say(c, "  packed contract: fwd could not be captured into a CUDA graph on this layout: %s, fwd returned "
            "%d (no host synchronization, allocation or unjoined stream in fwd)\n",
            e != cudaSuccess ? cudaGetErrorString(e) : "no graph", rc);
    } else if (attn_gpu_problem_poison_outputs(x, c->stream, err, sizeof err) ||
               cudaGraphLaunch(exec, c->stream) != cudaSuccess || wait_kernel(c, c->stream) != LAUNCH_OK) {
        say(c, "  packed contract: replaying the captured graph failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    } else if (packed_judge(c, x)) {
        say(c, "  packed contract: the replay of the captured graph left a wrong output\n");
    } else {
        bad = 0;
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    return bad;
}

/* The kernel contract on this layout (the contract checks run dense problems only): the
 * gated launch (a host copy of cu_seqlens or seqused_k, a synchronization, work on another
 * stream fail), then the graph capture (an allocation or a synchronization in fwd fails). */
static outcome packed_contract(check_ctx *c, attn_gpu_problem *x) {
    cudaStream_t s = NULL;
    attn_gate *gate = NULL;
    outcome oc = CHECK_FAIL;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess || attn_gate_create(&gate) != cudaSuccess)
        say(c, "  packed contract: setting up the gate failed: %s\n", cudaGetErrorString(cudaGetLastError()));
    else if (!packed_gated(c, x, s, gate) && !packed_captured(c, x, s))
        oc = CHECK_PASS;
    if (s) cudaStreamSynchronize(s), cudaStreamDestroy(s);
    attn_gate_destroy(gate);
    return oc;
}

/* The first launch on the packed problem x (its references computed first). */
static launch_result packed_launch(check_ctx *c, attn_gpu_problem *x) {
    if (problem_references(c, x)) return LAUNCH_FAILED;
    cudaGetLastError(); /* an error left before the call is not the kernel's (declined) */
    const int rc = c->kernel->fwd(&x->p, c->stream);
    if (rc == ATTN_OK) return wait_kernel(c, c->stream);
    if (rc != ATTN_UNSUPPORTED) {
        say(c, "  kernel '%s' returned error code %d\n", c->kernel->name, rc);
        return LAUNCH_FAILED;
    }
    if (!c->unsupported[0])
        snprintf(c->unsupported, sizeof c->unsupported, "kernel '%s' returned ATTN_UNSUPPORTED for a packed batch",
                 c->kernel->name);
    return declined(c, "fwd");
}

outcome check_packed(check_ctx *c) {
    attn_problem_desc d = case_problem(c, CHECK_NO_packed);
    say_header(c, "packed", &d);
    attn_gpu_problem x;
    outcome oc = CHECK_FAIL;
    if (!build_problem(c, &x, &d)) {
        launch_result lr = packed_launch(c, &x);
        if (lr == LAUNCH_OK) verify_inputs(c, &x, "packed");
        oc = lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED
           : lr == LAUNCH_OK          ? (packed_judge(c, &x) ? CHECK_FAIL : packed_contract(c, &x))
                                      : CHECK_FAIL;
    }
    attn_gpu_problem_free(&x);
    return oc;
}
