/* The kernel contract (group contract in checks.def): fwd only enqueues, on the stream it is
 * given (stream_order); it captures into a CUDA graph (graph_capture); it keeps no state
 * across calls (interleaved); calls on two streams at once do not share device state
 * (concurrent); its work progresses on the SMs other work leaves free (busy_sms); after each
 * of their launches the inputs are verified for the check inputs_unchanged (checks_inputs.c); it
 * leaves the process's CUDA state as it found it (state_unchanged); calls from several host
 * threads at once are each right (threads).
 * And 'launch': one fwd, nothing judged, for compute-sanitizer. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "context.h"
#include "gpu_verify.h"
#include "harness.h"

/* The gated launch of stream_order: behind the shut gate, the real inputs arrive (from
 * `saved`) and the outputs are poisoned; fwd is called; the gate opens only after fwd
 * returns. */
static outcome gated_launch(check_ctx *c, attn_gpu_problem *x, const attn_gpu_snapshot *saved, cudaStream_t s,
                            attn_gate *gate) {
    char err[1024];
    if (attn_gate_shut(gate, s, GATE_TIMEOUT_S) != cudaSuccess ||
        attn_gpu_problem_restore(x, saved, s, err, sizeof err) ||
        attn_gpu_problem_poison_outputs(x, s, err, sizeof err)) {
        say(c, "  enqueueing the gate failed\n");
        return CHECK_FAIL;
    }
    int rc = c->kernel->fwd(&x->p, s);
    int blocked = attn_gate_timed_out(gate); /* fwd waited for the shut gate */
    attn_gate_open(gate);
    launch_result lr = fwd_result(c, x, rc);
    if (lr == LAUNCH_OK) lr = wait_kernel(c, s);
    if (lr != LAUNCH_OK) return launch_outcome(lr);
    verify_inputs(c, x, "stream_order");
    if (blocked || attn_gate_timed_out(gate)) {
        say(c, "  fwd did not return while its stream was held (the gate opened by its %d s timeout): "
            "fwd waits for the GPU (cudaDeviceSynchronize, cudaStreamSynchronize, a blocking copy or "
            "cudaFree); a kernel must only enqueue work\n", GATE_TIMEOUT_S);
        return CHECK_FAIL;
    }
    if (judge_all(c, x, "stream order")) {
        say(c, "  fwd was called on a non-blocking stream held by a gate until fwd returned; the "
            "inputs arrived and the outputs were poisoned behind the gate: work not ordered on "
            "that stream (a stream of the kernel's own, the legacy default stream, a missing "
            "event wait) reads NaN inputs or is overwritten\n");
        return CHECK_FAIL;
    }
    return CHECK_PASS;
}

/* The real inputs kept aside in `saved`; the buffers hold NaN until the gate lets them back. */
static int hold_back_inputs(check_ctx *c, attn_gpu_problem *x, attn_gpu_snapshot *saved) {
    char err[1024];
    if (attn_gpu_problem_snapshot(x, ATTN_FWD_INPUTS, saved, c->stream, err, sizeof err) ||
        attn_gpu_problem_poison(x, ATTN_FWD_INPUTS, c->stream, err, sizeof err)) {
        say(c, "  %s\n", err);
        return 1;
    }
    return 0;
}

/* 9. stream order and no host synchronization: fwd must only enqueue, on the stream it is
 * given. */
outcome check_stream_order(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_stream_order);
    say_header(c, "stream_order", &d);
    attn_gpu_snapshot saved;
    memset(&saved, 0, sizeof saved);
    cudaStream_t s = NULL;
    attn_gate *gate = NULL;
    outcome oc = CHECK_FAIL;
    /* a warm-up call outside the gate: first-call set-up (module loading, plans) is allowed */
    if (build_problem(c, &x, &d) || problem_references(c, &x)) goto done;
    launch_result lr = run_kernel(c, &x);
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    if (hold_back_inputs(c, &x, &saved)) goto done;
    if (cudaStreamSynchronize(c->stream) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        attn_gate_create(&gate) != cudaSuccess) {
        say(c, "  setting up the gate failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    oc = gated_launch(c, &x, &saved, s, gate);
done:
    if (s) cudaStreamSynchronize(s), cudaStreamDestroy(s);
    attn_gate_destroy(gate);
    attn_gpu_snapshot_free(&saved);
    attn_gpu_problem_free(&x);
    return oc;
}

/* Captures one fwd call on a fresh stream in global mode; 0 with *exec, or 1 (said). */
static int capture(check_ctx *c, const attn_gpu_problem *x, cudaGraphExec_t *exec) {
    cudaStream_t s;
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        say(c, "  creating a stream failed: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
        return 1;
    }
    e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    int rc = e == cudaSuccess ? c->kernel->fwd(&x->p, s) : ATTN_OK;
    cudaError_t e2 = cudaStreamEndCapture(s, &graph);
    if (e == cudaSuccess) e = e2;
    cudaGetLastError(); /* a failed capture's error is not the next call's */
    cudaStreamDestroy(s);
    if (e != cudaSuccess || rc != ATTN_OK || !graph) {
        say(c, "  fwd could not be captured into a CUDA graph (stream capture, global mode): %s, fwd "
            "returned %d. fwd must only enqueue work on its stream: no host synchronization, no "
            "cudaMalloc/cudaFree, no work on another stream that is not joined back\n",
            e != cudaSuccess ? cudaGetErrorString(e) : "no graph", rc);
        if (graph) cudaGraphDestroy(graph);
        return 1;
    }
    e = cudaGraphInstantiate(exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        say(c, "  the captured graph does not instantiate: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

/* Replay `replay` of the graph on new inputs in x's buffers, judged; 0 or 1 (said). */
static int replay_graph(check_ctx *c, attn_gpu_problem *x, cudaGraphExec_t exec, uint64_t seed, int replay) {
    char what[64], err[1024];
    snprintf(what, sizeof what, "replay %d of the captured graph on new inputs", replay);
    if (problem_fill(c, x, seed + 0x51ed2701u * (uint64_t)replay) || problem_references(c, x)) return 1;
    if (attn_gpu_problem_poison_outputs(x, c->stream, err, sizeof err)) {
        say(c, "  %s\n", err);
        return 1;
    }
    if (cudaGraphLaunch(exec, c->stream) != cudaSuccess || wait_kernel(c, c->stream) != LAUNCH_OK) {
        say(c, "  %s failed: %s\n", what, cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    verify_inputs(c, x, "graph_capture");
    return judge_all(c, x, what);
}

/* 10. fwd under CUDA graph capture; replays on new inputs in the same buffers are right */
outcome check_graph_capture(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_graph_capture);
    say_header(c, "graph_capture", &d);
    cudaGraphExec_t exec = NULL;
    outcome oc = CHECK_FAIL;
    if (build_problem(c, &x, &d)) goto done;
    launch_result lr = run_kernel(c, &x); /* warm-up outside the capture */
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    if (capture(c, &x, &exec)) goto done;
    for (int replay = 1; replay <= 2; replay++)
        if (replay_graph(c, &x, exec, d.seed, replay)) goto done;
    oc = CHECK_PASS;
done:
    if (exec) cudaGraphExecDestroy(exec);
    attn_gpu_problem_free(&x);
    return oc;
}

/* One call of 'interleaved': x built from `build` (NULL: new inputs from `seed` in x),
 * reference, launch, verdict. */
static outcome interleaved_call(check_ctx *c, attn_gpu_problem *x, const attn_problem_desc *build, uint64_t seed,
                                const char *what) {
    if ((build ? build_problem(c, x, build) : problem_fill(c, x, seed)) || problem_references(c, x)) return CHECK_FAIL;
    launch_result lr = run_kernel(c, x);
    if (lr != LAUNCH_OK) {
        if (lr == LAUNCH_FAILED) say(c, "  (in %s)\n", what);
        return launch_outcome(lr);
    }
    verify_inputs(c, x, "interleaved");
    if (judge_all(c, x, what)) {
        say(c, "  the kernel keeps state across calls (a shape, a pointer or a plan from an earlier "
            "call): calls alternated between two problems of different sizes\n");
        return CHECK_FAIL;
    }
    return CHECK_PASS;
}

/* 11. no state across calls: problems A and B (another batch, heads and lengths) interleaved,
 * A again on new buffers, B again on new inputs; each output verified */
outcome check_interleaved(check_ctx *c) {
    attn_gpu_problem a1, b, a2;
    memset(&a1, 0, sizeof a1), memset(&b, 0, sizeof b), memset(&a2, 0, sizeof a2);
    const attn_problem_desc da = case_problem(c, CHECK_NO_interleaved);
    say_header(c, "interleaved", &da);
    /* B keeps A's query heads per KV head */
    attn_problem_desc db = da, da2 = da;
    const int group = da.heads / da.heads_k;
    db.batch = da.batch + 1, db.heads = da.heads + group, db.heads_k = db.heads / group;
    db.seqlen_q = da.seqlen_q + 19, db.seqlen_k = da.seqlen_k + 41;
    db.seed = da.seed + 1, da2.seed = da.seed + 2;
    char wb[2][160];
    for (int i = 0; i < 2; i++)
        snprintf(wb[i], sizeof wb[i], "call %d (problem B: batch=%d heads=%d seqlen_q=%d seqlen_k=%d)", 2 + 2 * i,
                 db.batch, db.heads, db.seqlen_q, db.seqlen_k);
    outcome oc;
    /* A again while A's first buffers are held: other buffers */
    if ((oc = interleaved_call(c, &a1, &da, da.seed, "call 1 (problem A)")) == CHECK_PASS &&
        (oc = interleaved_call(c, &b, &db, db.seed, wb[0])) == CHECK_PASS &&
        (oc = interleaved_call(c, &a2, &da2, da2.seed, "call 3 (problem A again, on other buffers)")) == CHECK_PASS)
        oc = interleaved_call(c, &b, NULL, da.seed + 3, wb[1]);
    attn_gpu_problem_free(&a1), attn_gpu_problem_free(&b), attn_gpu_problem_free(&a2);
    return oc;
}

/* 12. one launch, nothing judged: what compute-sanitizer watches (scripts/sanitize.sh). No
 * reference runs, so the only other kernels in the process are the input generators. */
outcome check_launch(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_launch);
    say_header(c, "launch", &d);
    outcome oc = CHECK_FAIL;
    if (!build_problem(c, &x, &d)) oc = launch_outcome(run_kernel(c, &x));
    attn_gpu_problem_free(&x);
    return oc;
}

/* 24. calls on two streams at once: problems A and B (the case's shape, each its own buffers
 * and inputs) enqueued CONCURRENT_CALLS times each, A on one non-blocking stream and B on
 * another, both behind shut gates that open together, so that the launches overlap on the GPU;
 * each output verified. A kernel whose calls share device memory (a workspace, split-KV
 * partials or arrival counters kept across calls) mixes the two problems. */
outcome check_concurrent(check_ctx *c) {
    attn_gpu_problem x[2];
    memset(x, 0, sizeof x);
    attn_problem_desc d[2];
    concurrent_streams cs;
    concurrent_setup(c, CHECK_NO_concurrent, "concurrent", d, &cs);
    outcome oc = CHECK_FAIL;
    char err[1024];
    for (int i = 0; i < 2; i++)
        if (build_problem(c, &x[i], &d[i]) || problem_references(c, &x[i])) goto done;
    /* a warm-up call outside the gates: first-call set-up (module loading, plans, pools) */
    launch_result lr = run_kernel(c, &x[0]);
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    if (concurrent_hold(c, &cs, 2)) goto done;
    for (int i = 0; i < 2; i++)
        if (attn_gpu_problem_poison_outputs(&x[i], cs.s[i], err, sizeof err)) {
            say(c, "  %s\n", err);
            goto done;
        }
    for (int call = 0; call < CONCURRENT_CALLS && lr == LAUNCH_OK; call++)
        for (int i = 0; i < 2 && lr == LAUNCH_OK; i++) lr = fwd_result(c, &x[i], c->kernel->fwd(&x[i].p, cs.s[i]));
    concurrent_release(&cs);
    const launch_result w = concurrent_wait(c, &cs);
    if (lr == LAUNCH_OK) lr = w;
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    for (int i = 0; i < 2; i++) verify_inputs(c, &x[i], "concurrent");
    if (judge_all(c, &x[0], "problem A (stream 1)") || judge_all(c, &x[1], "problem B (stream 2)")) {
        say(c, "  %d calls of problem A on one stream and %d of B (new inputs) on another ran at once (both "
            "streams held, then released together): the calls share device state (a workspace, partials or "
            "counters kept across calls rather than per call)\n", CONCURRENT_CALLS, CONCURRENT_CALLS);
        goto done;
    }
    oc = CHECK_PASS;
done:
    concurrent_free(&cs);
    for (int i = 0; i < 2; i++) attn_gpu_problem_free(&x[i]);
    return oc;
}

/* 29. progress on a busy GPU: fwd while a kernel on another stream holds every SM but a few,
 * as a communication kernel or another stream's work holds them beside attention. The work fwd
 * enqueues must finish on the SMs left, within the deadline (BUSY_SLACK times its time on the
 * idle GPU scaled by the SMs it lost, at least BUSY_MIN_S), before the hold is released. A
 * kernel whose blocks wait for blocks that have not started (a grid-wide barrier, splits
 * waiting for each other, a persistent grid that needs every block resident) makes no progress
 * until the hold ends. The hold (attn_gate_hold_sms) puts a block on every SM, then lets go the
 * blocks on BUSY_FREE_PAIRS pairs of SMs 2k, 2k+1 (one TPC: one GPC), so that a kernel launched
 * in clusters of two blocks (CUTLASS's, two-block MMAs: a cluster's blocks start at once on one
 * GPC) still progresses; the harness's own cluster of two (sm_90 on) is started on the SMs left
 * first, and more pairs are let go until it runs (at most a quarter of the SMs: else the check
 * cannot judge). A grid that needs more blocks resident at once than the SMs left hold fails. */
enum { BUSY_FREE_PAIRS = 4, BUSY_SLACK = 50 };
static const double BUSY_MIN_S = 1.0, BUSY_MAX_S = 20.0, BUSY_START_S = 5.0, BUSY_PROBE_S = 0.2;

/* The hold: its stream, gate and the event that marks fwd's work done; the probe's stream and
 * event; the SM count, the SMs held and left free, the block on each SM; fwd's deadline. */
typedef struct {
    cudaStream_t s, probe_s;
    cudaEvent_t done, probe_done;
    attn_gate *gate;
    int sms, held, free, next_sm; /* next_sm: the SM whose block is let go next */
    int block_on[ATTN_GATE_MAX_BLOCKS];
    double deadline;
} busy_hold;

/* Waits until `n` of the hold's blocks run: 0, or 1 said. */
static int busy_wait_running(check_ctx *c, busy_hold *h, int n) {
    const double t0 = attn_wall_s();
    while (attn_gate_running(h->gate) != n) {
        if (attn_wall_s() - t0 > BUSY_START_S || attn_gate_timed_out(h->gate)) {
            say(c, "  the check cannot judge: %d of the SMs' blocks ran after %.0f s, not %d (another process's work "
                "on this GPU?)\n", attn_gate_running(h->gate), BUSY_START_S, n);
            return 1;
        }
        attn_sleep_s(1e-4);
    }
    return 0;
}

/* Lets go the blocks on SM pairs 2k, 2k+1 for k < pairs (h->free counts the SMs freed). */
static int busy_free_pairs(check_ctx *c, busy_hold *h, int pairs) {
    for (; h->next_sm < 2 * pairs && h->next_sm < h->sms; h->next_sm++)
        if (h->block_on[h->next_sm] >= 0) attn_gate_release_block(h->gate, h->block_on[h->next_sm]), h->free++;
    return busy_wait_running(c, h, h->sms - h->free);
}

/* The probe run once on the idle GPU: its module loaded (lazily, at its first launch, which
 * waits while the SMs are held), and clusters launch at all; before sm_90, nothing. */
static cudaError_t probe_loaded(cudaStream_t s) {
    cudaError_t e = attn_cluster_probe(s);
    if (e == cudaErrorNotSupported) return cudaSuccess;
    return e == cudaSuccess ? cudaStreamSynchronize(s) : e;
}

/* Holds every SM but a few pairs, so many that a cluster of two blocks starts: 0, or 1 said. */
static int busy_hold_start(check_ctx *c, busy_hold *h, double idle_s) {
    static int pairs = BUSY_FREE_PAIRS; /* the pairs that let the probe start in this process */
    int dev = 0;
    memset(h, 0, sizeof *h);
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&h->sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        h->sms < 4 * BUSY_FREE_PAIRS || h->sms > ATTN_GATE_MAX_BLOCKS) {
        say(c, "  the check cannot judge: the GPU's SM count (%d) is outside %d-%d\n", h->sms, 4 * BUSY_FREE_PAIRS,
            ATTN_GATE_MAX_BLOCKS);
        return 1;
    }
    if (cudaStreamCreateWithFlags(&h->s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&h->probe_s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&h->done, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&h->probe_done, cudaEventDisableTiming) != cudaSuccess ||
        attn_gate_create(&h->gate) != cudaSuccess || probe_loaded(h->probe_s) != cudaSuccess ||
        attn_gate_hold_sms(h->gate, h->s, BUSY_START_S * 2 + BUSY_MAX_S + GATE_TIMEOUT_S, h->sms) != cudaSuccess) {
        say(c, "  holding the SMs failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    if (busy_wait_running(c, h, h->sms)) return 1;
    for (int sm = 0; sm < h->sms; sm++) h->block_on[sm] = -1;
    for (int b = 0; b < h->sms; b++) {
        const int sm = attn_gate_block_sm(h->gate, b);
        if (sm >= 0 && sm < h->sms) h->block_on[sm] = b;
    }
    if (busy_free_pairs(c, h, pairs)) return 1;
    if (!h->free) {
        say(c, "  the check cannot judge: no SM of the first %d had a block of the hold to let go\n", 2 * pairs);
        return 1;
    }
    const cudaError_t e = attn_cluster_probe(h->probe_s);
    if (e != cudaSuccess && e != cudaErrorNotSupported) {
        say(c, "  the cluster probe failed: %s\n", cudaGetErrorString(e));
        return 1;
    }
    if (e == cudaSuccess && cudaEventRecord(h->probe_done, h->probe_s) == cudaSuccess)
        for (;;) {
            const double t0 = attn_wall_s();
            while (cudaEventQuery(h->probe_done) == cudaErrorNotReady && attn_wall_s() - t0 < BUSY_PROBE_S)
                attn_sleep_s(1e-4);
            if (cudaEventQuery(h->probe_done) == cudaSuccess) break;
            if (4 * pairs > h->sms / 4) { /* doubling would free more than a quarter of the SMs */
                say(c, "  the check cannot judge: a cluster of two blocks did not start with %d SMs free\n", h->free);
                return 1;
            }
            const int was = h->free;
            if (busy_free_pairs(c, h, pairs *= 2)) return 1;
            fprintf(stderr, "busy_sms: a cluster of two blocks did not start on %d free SMs; %d now free\n", was,
                    h->free);
        }
    h->held = h->sms - h->free;
    const double d = BUSY_SLACK * idle_s * h->sms / h->free;
    h->deadline = d < BUSY_MIN_S ? BUSY_MIN_S : d > BUSY_MAX_S ? BUSY_MAX_S : d;
    return 0;
}

static void busy_hold_free(busy_hold *h) {
    if (h->gate) attn_gate_open(h->gate);
    if (h->s) cudaStreamSynchronize(h->s), cudaStreamDestroy(h->s);
    if (h->probe_s) cudaStreamSynchronize(h->probe_s), cudaStreamDestroy(h->probe_s);
    if (h->done) cudaEventDestroy(h->done);
    if (h->probe_done) cudaEventDestroy(h->probe_done);
    attn_gate_destroy(h->gate);
}

outcome check_busy_sms(check_ctx *c) {
    attn_gpu_problem x;
    memset(&x, 0, sizeof x);
    attn_problem_desc d = case_problem(c, CHECK_NO_busy_sms);
    say_header(c, "busy_sms", &d);
    busy_hold h;
    memset(&h, 0, sizeof h);
    outcome oc = CHECK_FAIL;
    char err[1024];
    if (build_problem(c, &x, &d) || problem_references(c, &x)) goto out;
    /* the warm-up call on the idle GPU (first-call set-up included: a generous time) */
    const double t0 = attn_wall_s();
    launch_result lr = run_kernel(c, &x);
    const double idle_s = attn_wall_s() - t0;
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto out;
    }
    if (busy_hold_start(c, &h, idle_s)) goto out;
    if (attn_gpu_problem_poison_outputs(&x, c->stream, err, sizeof err)) {
        say(c, "  %s\n", err);
        goto out;
    }
    lr = fwd_result(c, &x, c->kernel->fwd(&x.p, c->stream));
    const int returned_held = !attn_gate_timed_out(h.gate); /* fwd returned while the SMs were held */
    if (lr == LAUNCH_OK && cudaEventRecord(h.done, c->stream) != cudaSuccess) lr = LAUNCH_FAILED;
    const double t1 = attn_wall_s();
    cudaError_t q = cudaErrorNotReady;
    while (lr == LAUNCH_OK && (q = cudaEventQuery(h.done)) == cudaErrorNotReady && attn_wall_s() - t1 < h.deadline &&
           !attn_gate_timed_out(h.gate))
        attn_sleep_s(1e-4);
    const int finished_held = q == cudaSuccess && !attn_gate_timed_out(h.gate);
    const double busy_s = attn_wall_s() - t1;
    attn_gate_open(h.gate);
    if (lr == LAUNCH_OK) lr = wait_kernel(c, c->stream);
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto out;
    }
    verify_inputs(c, &x, "busy_sms");
    if (!returned_held)
        say(c, "  fwd did not return while another stream's kernel held %d of the %d SMs (the hold ended by its "
            "timeout first): fwd waits for the GPU (see stream_order)\n", h.held, h.sms);
    else if (!finished_held)
        say(c, "  fwd's work did not finish in %.2f s on the %d SMs left while another stream's kernel held the other "
            "%d (the call took %.4f s on the idle GPU); it finished %.2f s after the hold ended: its blocks wait "
            "for blocks that cannot start (a grid-wide barrier or a wait on other blocks without a cooperative "
            "launch; a grid that needs every block resident at once), or it needs more SMs at once than were left "
            "(a cooperative launch, thread block clusters)\n", busy_s, h.free, h.held, idle_s,
            attn_wall_s() - t1 - busy_s);
    else if (judge_all(c, &x, "busy SMs"))
        say(c, "  fwd ran on the %d SMs another stream's kernel left free (it held the other %d)\n", h.free,
            h.held);
    else
        oc = CHECK_PASS;
out:
    busy_hold_free(&h);
    attn_gpu_problem_free(&x);
    return oc;
}

/* 30. the process's CUDA state as the kernel found it: after a fwd (and every call of the
 * kernel's before it in this process), the current device, the device's limits, cache
 * configuration and memory pools, this thread's capture mode and the stream's L2 access policy
 * window and synchronization policy, as read before its first call (harness/cuda_state.h). A
 * kernel that sets an L2 persistence window on the caller's stream, raises a device limit or
 * makes its own pool current changes every later kernel of its caller's. */
outcome check_state_unchanged(check_ctx *c) {
    attn_gpu_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_state_unchanged);
    say_header(c, "state_unchanged", &d);
    outcome oc = CHECK_FAIL;
    if (!build_problem(c, &x, &d)) {
        const launch_result lr = run_kernel(c, &x);
        oc = lr == LAUNCH_OK ? state_verdict(c, "fwd") : launch_outcome(lr);
    }
    attn_gpu_problem_free(&x);
    return oc;
}

/* 32. fwd from several host threads at once, as an inference server's or a data loader's
 * threads call it: THREAD_COUNT threads started together, each with its own stream (held by a
 * gate until every thread has returned) and THREAD_CALLS calls, each call its own problem (the
 * case's shape, its own buffers and inputs); then the gates open last to first, each stream
 * drained before the next opens, and every output is judged. Host code that keeps the call in
 * flight in globals (its stream, its parameters, a cache filled without a lock) sends a call's
 * work to another's stream or buffers: its output left poisoned, written from another's inputs,
 * or run out of its stream's order (before the poison that its own stream enqueued). A thread
 * first makes the problem's device current, as a caller's device guard does, except device 0:
 * there its first CUDA call is the kernel's, and one that calls the driver API (TMA
 * descriptors) finds no context current unless it makes one so. */
static int fwd_call(const attn_kernel *kernel, void *problems, int i, cudaStream_t stream) {
    return kernel->fwd(&((attn_gpu_problem *)problems)[i].p, stream);
}

outcome check_threads(check_ctx *c) {
    attn_gpu_problem x[THREAD_PROBLEMS];
    memset(x, 0, sizeof x);
    const attn_problem_desc d = case_problem(c, CHECK_NO_threads);
    say_header(c, "threads", &d);
    concurrent_streams cs;
    memset(&cs, 0, sizeof cs);
    outcome oc = CHECK_FAIL;
    char err[1024];
    for (int i = 0; i < THREAD_PROBLEMS; i++) {
        attn_problem_desc di = d;
        di.seed = d.seed + (uint64_t)i;
        if (build_problem(c, &x[i], &di) || problem_references(c, &x[i])) goto done;
    }
    launch_result lr = run_kernel(c, &x[0]); /* first-call set-up, from the main thread */
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    if (concurrent_hold(c, &cs, THREAD_COUNT)) goto done;
    for (int i = 0; i < THREAD_PROBLEMS; i++)
        if (attn_gpu_problem_poison_outputs(&x[i], cs.s[i / THREAD_CALLS], err, sizeof err)) {
            say(c, "  %s\n", err);
            goto done;
        }
    if ((lr = threads_run(c, fwd_call, x, &cs)) != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    for (int i = 0; i < THREAD_PROBLEMS; i++) verify_inputs(c, &x[i], "threads");
    for (int i = 0; i < THREAD_PROBLEMS; i++) {
        char what[64];
        snprintf(what, sizeof what, "thread %d's call %d", i / THREAD_CALLS, i % THREAD_CALLS + 1);
        if (judge_all(c, &x[i], what)) {
            say(c, "  %d host threads called fwd %d times each at once, each on its own stream, each call its own "
                "problem: host state shared by the calls (a global stream, parameters or a cache written without "
                "a lock) mixed them\n", THREAD_COUNT, THREAD_CALLS);
            goto done;
        }
    }
    oc = CHECK_PASS;
done:
    concurrent_free(&cs);
    for (int i = 0; i < THREAD_PROBLEMS; i++) attn_gpu_problem_free(&x[i]);
    return oc;
}
