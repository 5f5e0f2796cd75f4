/* The backward pass's checks (groups backward, bwd_contract and bwd_launch in checks.def).
 * Each builds the case's backward problem (harness/gpu_problem.h: the forward's O and LSE
 * from the golden reference, dO random, dQ, dK, dV and the workspace poisoned), launches bwd
 * and judges dQ, dK and dV by the verdict rule with [gradients]' factors against the float32
 * backward and its fp16/bf16 twin (reference.h). */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "context.h"
#include "device_memory.h"
#include "gpu_verify.h"
#include "problem.h"
#include "registry.h"

enum { RACE_LAUNCHES = 20, DETERMINISM_LAUNCHES = 3 };

static int declares_deterministic(const check_ctx *c) { return (c->kernel->bwd_caps & ATTN_BWD_DETERMINISTIC) != 0; }

/* The backward problem of d, the references included; 0, or 1 said. A kernel that does not take
 * its backward: CHECK_UNSUPPORTED in *oc, the reason kept for the case's report. */
static int build_bwd_with(check_ctx *c, attn_bwd_problem *x, const attn_problem_desc *d, const attn_layout *layout,
                          int deterministic, attn_reference *ref, outcome *oc) {
    char err[1024];
    memset(x, 0, sizeof *x);
    *oc = CHECK_FAIL;
    attn_gpu_problem plan; /* the forward problem on the host, to ask the kernel first */
    if (attn_gpu_problem_plan(&plan, d, err, sizeof err)) {
        say(c, "  %s\n", err);
        return 1;
    }
    attn_bwd_params shape = {.fwd = &plan.p, .deterministic = deterministic};
    char why[512];
    const char *lacks = attn_kernel_lacks_bwd(c->kernel, &shape, why, sizeof why);
    attn_seqs_free(&plan.seqs);
    if (lacks) {
        if (!c->unsupported[0]) snprintf(c->unsupported, sizeof c->unsupported, "%s", why);
        *oc = CHECK_UNSUPPORTED;
        return 1;
    }
    if (attn_bwd_problem_build(x, d, layout, c->kernel, deterministic, ref, c->stream, err, sizeof err)) {
        say(c, "  %s\n", err);
        return 1;
    }
    return 0;
}

static int build_bwd(check_ctx *c, attn_bwd_problem *x, const attn_problem_desc *d, const attn_layout *layout,
                     int deterministic, outcome *oc) {
    return build_bwd_with(c, x, d, layout, deterministic, c->ref, oc);
}

/* bwd's return value as a launch result */
static launch_result bwd_result(check_ctx *c, int rc) {
    if (rc == ATTN_UNSUPPORTED) {
        if (!c->unsupported[0])
            snprintf(c->unsupported, sizeof c->unsupported, "kernel '%s' returned ATTN_UNSUPPORTED from bwd for %s",
                     c->kernel->name, c->tc->label);
        return declined(c, "bwd");
    }
    if (rc != ATTN_OK) {
        say(c, "  kernel '%s' returned error code %d from bwd\n", c->kernel->name, rc);
        return LAUNCH_FAILED;
    }
    return LAUNCH_OK;
}

/* Poisons dQ, dK, dV and the workspace, runs bwd, waits, all on c->stream. */
static launch_result run_bwd(check_ctx *c, attn_bwd_problem *x) {
    char err[1024];
    if (attn_bwd_problem_poison(x, ATTN_BWD_OUTPUTS, c->stream, err, sizeof err)) {
        say(c, "  %s\n", err);
        return LAUNCH_FAILED;
    }
    cudaGetLastError(); /* an error left before the call is not the kernel's (declined) */
    launch_result lr = bwd_result(c, c->kernel->bwd(&x->bp, c->stream));
    return lr == LAUNCH_OK ? wait_kernel(c, c->stream) : lr;
}

/* Header, build, one launch; *fail set when anything before judging failed. */
static outcome prepare_bwd(check_ctx *c, attn_bwd_problem *x, const attn_problem_desc *d, const attn_layout *layout,
                           int deterministic, const char *check, int *fail) {
    say_header(c, check, d);
    *fail = 1;
    outcome oc;
    if (build_bwd(c, x, d, layout, deterministic, &oc)) return oc;
    launch_result lr = run_bwd(c, x);
    if (lr != LAUNCH_OK) return launch_outcome(lr);
    *fail = 0;
    return CHECK_PASS;
}

/* Gradient i by the verdict rule (attn_bwd_grad_verdict); 0 pass, or 1 with the figures in msg. */
static int judge_grad(check_ctx *c, attn_bwd_problem *x, int i, const char *what) {
    char err[1024];
    attn_fwd_params v;
    attn_match stale;
    attn_output_verdict r;
    const char *name = attn_grad_names[i];
    if (attn_bwd_grad_verdict(x, i, &c->tol, &v, &stale, &r, c->stream, err, sizeof err)) {
        say(c, "  %s: %s: %s\n", what, name, err);
        return 1;
    }
    int bad = 0, b, h, s, d;
    if (stale.count) {
        attn_bwd_grad_where(&v, stale.first, &b, &h, &s, &d);
        say(c, "  %s: %s: %llu elements written with values other than 0 at rows past the sequence's used keys "
            "(seqused_k); first at (b=%d, h=%d, s=%d, d=%d)\n", what, name, stale.count, b, h, s, d);
        bad = 1;
    }
    const attn_tolerance tol = attn_tolerance_for_gradients(&c->tol); /* the factors, for the message */
    if (r.rule == ATTN_RULE_PASS) return bad;
    attn_bwd_grad_where(&v, r.worst, &b, &h, &s, &d);
    say(c, "  %s: %s: %s", what, name, attn_rule_name(r.rule));
    if (r.rule == ATTN_RULE_NONFINITE || r.rule == ATTN_RULE_EMPTY_ROW)
        say(c, " (%zu of %zu elements%s)", r.bad_count, x->elems[i],
            r.rule == ATTN_RULE_NONFINITE ? ": NaN poison left means never written" : ": a row that sees no key");
    say(c, "\n  max|%s-G| = %.4g  bound %.4g = %g x max|R-G| %.4g + atol %.4g (%g steps of %.3g)\n", name, r.max_err,
        r.max_bound, tol.max_factor, r.max_ref_err, r.atol, tol.atol_steps, r.step);
    say(c, "  mean|%s-G| = %.4g  bound %.4g = %g x mean|R-G| %.4g + %.3g\n", name, r.mean_err, r.mean_bound,
        tol.mean_factor, r.mean_ref_err, r.mean_bound - tol.mean_factor * r.mean_ref_err);
    attn_tensor_view tv = {v.batch, v.heads, v.seqlen_q, v.head_dim_v, v.o_batch_stride, v.o_head_stride, v.o_row_stride};
    say(c, "  %s element (b=%d, h=%d, s=%d, d=%d): %s=%.6g G=%.6g R=%.6g\n",
        r.rule == ATTN_RULE_MAX || r.rule == ATTN_RULE_MEAN ? "worst" : "first bad", b, h, s, d, name,
        attn_peek_view(v.o, v.dtype, &tv, r.worst), attn_peek_f32(x->g[i], r.worst), attn_peek_f32(x->r[i], r.worst));
    return 1;
}

static int judge_grads(check_ctx *c, attn_bwd_problem *x, const char *what) {
    int bad = 0;
    for (int i = 0; i < 3; i++) bad |= judge_grad(c, x, i, what);
    return bad;
}

/* 15. dQ, dK, dV of normal random inputs and dO, the default (non-deterministic) path */
outcome check_bwd_accuracy(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_accuracy);
    int fail;
    outcome oc = prepare_bwd(c, &x, &d, NULL, 0, "bwd_accuracy", &fail);
    if (!fail) oc = judge_grads(c, &x, "backward") ? CHECK_FAIL : CHECK_PASS;
    attn_bwd_problem_free(&x);
    return oc;
}

/* Bytes of buffer t of x in [from, to) that lost their poison; said, 0 when none. */
static int guard_written(check_ctx *c, const attn_bwd_problem *x, int t, const char *name) {
    const size_t G = ATTN_GUARD_BYTES, data = x->bytes[t] - 2 * G;
    const struct { size_t from, to; const char *where; } band[] = {{0, G, "before"}, {G + data, x->bytes[t], "after"}};
    int bad = 0;
    for (int k = 0; k < 2; k++) {
        attn_match m;
        if (attn_count_changed_bytes(x->buf[t], band[k].from, band[k].to, ATTN_POISON, &m, c->stream) != cudaSuccess) {
            say(c, "  counting bytes on the GPU failed\n");
            return 1;
        }
        if (m.count)
            bad = 1, say(c, "  %llu bytes written in the %zu bytes %s %s%s\n", m.count, G, band[k].where, name,
                         t == ATTN_G_WS ? " (past its workspace_bytes)" : "");
    }
    return bad;
}

/* 16. nothing written around dQ, dK, dV and the workspace, or in the padding between the
 * gradients' rows (padded layouts) */
outcome check_bwd_guard_bands(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_guard_bands);
    const attn_layout padded[4] = {ATTN_LAYOUT_BSHD_PADDED, ATTN_LAYOUT_BSHD_PADDED, ATTN_LAYOUT_BSHD_PADDED,
                                   ATTN_LAYOUT_BSHD_PADDED};
    int fail;
    outcome oc = prepare_bwd(c, &x, &d, padded, 0, "bwd_guard_bands", &fail);
    if (fail) goto done;
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        bad |= guard_written(c, &x, ATTN_G_DQ + i, attn_grad_names[i]);
        const attn_tensor_view v = attn_bwd_problem_view(&x, i);
        attn_match pad;
        if (attn_count_padding_written(attn_bwd_problem_data(&x, ATTN_G_DQ + i), x.st[i + 1].extent, v.row_stride,
                                       (int64_t)v.heads * v.dim, &pad, c->stream) != cudaSuccess)
            bad = 1, say(c, "  counting padding on the GPU failed\n");
        else if (pad.count && d.nseq == 0)
            bad = 1, say(c, "  %llu padding elements between %s's rows written (row stride %lld)\n", pad.count,
                         attn_grad_names[i], (long long)v.row_stride);
    }
    if (x.buf[ATTN_G_WS]) bad |= guard_written(c, &x, ATTN_G_WS, "the workspace");
    oc = bad ? CHECK_FAIL : CHECK_PASS;
done:
    attn_bwd_problem_free(&x);
    return oc;
}

/* dQ, dK, dV's buffers (guard bands included) copied into `keep`, or compared with it:
 * the differing bytes said. 0 same (or copied), 1 differ or an error. */
static int grads_same(check_ctx *c, const attn_bwd_problem *x, void *keep[3], int launch) {
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        const int t = ATTN_G_DQ + i;
        if (!keep[i]) {
            if (attn_dev_malloc(&keep[i], x->bytes[t]) != cudaSuccess ||
                cudaMemcpyAsync(keep[i], x->buf[t], x->bytes[t], cudaMemcpyDeviceToDevice, c->stream) != cudaSuccess) {
                say(c, "  keeping the gradients failed: %s\n", cudaGetErrorString(cudaGetLastError()));
                return 1;
            }
            continue;
        }
        attn_match m;
        if (attn_count_diff_bytes(keep[i], x->buf[t], x->bytes[t], &m, c->stream) != cudaSuccess) {
            say(c, "  comparing the gradients failed\n");
            return 1;
        }
        if (m.count)
            bad = 1, say(c, "  launch %d: %s differs from launch 1 in %llu bytes (first at byte %lld of its data) "
                         "though bwd was asked to be deterministic\n", launch, attn_grad_names[i], m.count,
                         (long long)m.first - ATTN_GUARD_BYTES);
    }
    return bad;
}

/* `n` launches of x, each judged; with `deterministic` each also bit-identical to the first. */
static outcome repeated(check_ctx *c, attn_bwd_problem *x, int n, int deterministic) {
    void *keep[3] = {NULL, NULL, NULL};
    outcome oc = CHECK_PASS;
    char what[64];
    for (int k = 1; k <= n && oc == CHECK_PASS; k++) {
        launch_result lr = k == 1 ? LAUNCH_OK : run_bwd(c, x); /* the first ran in prepare_bwd */
        snprintf(what, sizeof what, "launch %d of %d", k, n);
        if (lr != LAUNCH_OK)
            oc = launch_outcome(lr);
        else if ((deterministic && grads_same(c, x, keep, k)) || judge_grads(c, x, what))
            oc = CHECK_FAIL;
    }
    for (int i = 0; i < 3; i++) attn_dev_free(keep[i]);
    return oc;
}

/* A check of n launches of its case's problem (deterministic asked for when declared). */
static outcome repeated_check(check_ctx *c, int check_no, const char *name, int n) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, check_no);
    const int det = declares_deterministic(c);
    int fail;
    outcome oc = prepare_bwd(c, &x, &d, NULL, det, name, &fail);
    if (!fail) oc = repeated(c, &x, n, det);
    attn_bwd_problem_free(&x);
    return oc;
}

/* 17. deterministic = 1 (a kernel that declares ATTN_BWD_DETERMINISTIC): three launches
 * bit-identical; else deterministic = 0: each of three within the verdict */
outcome check_bwd_determinism(check_ctx *c) {
    return repeated_check(c, CHECK_NO_bwd_determinism, "bwd_determinism", DETERMINISM_LAUNCHES);
}

/* 18. BHSD and padded layouts of every tensor, dO's and O's differing (a dense problem; a
 * packed one has the rows layout only) */
outcome check_bwd_layouts(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_layouts);
    d.layout[0] = ATTN_LAYOUT_BHSD, d.layout[1] = ATTN_LAYOUT_BSHD_PADDED;
    d.layout[2] = ATTN_LAYOUT_BHSD_PADDED, d.layout[3] = ATTN_LAYOUT_BHSD;
    const attn_layout grads[4] = {ATTN_LAYOUT_BHSD_PADDED, ATTN_LAYOUT_BHSD, ATTN_LAYOUT_BHSD_PADDED,
                                  ATTN_LAYOUT_BSHD_PADDED};
    int fail;
    outcome oc = prepare_bwd(c, &x, &d, grads, 0, "bwd_layouts", &fail);
    if (!fail) oc = judge_grads(c, &x, "layouts q BHSD, k BSHD+pad, v BHSD+pad, o BHSD, dO BHSD+pad") ? CHECK_FAIL
                                                                                                       : CHECK_PASS;
    attn_bwd_problem_free(&x);
    return oc;
}

/* 19. bwd leaves its inputs as they were: Q, K, V against their fill, the layout arrays
 * against their host copies (attn_gpu_problem_input_changes), O, the LSE and dO (guard
 * bands included) against copies taken before the launch */
outcome check_bwd_inputs_unchanged(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_inputs_unchanged);
    say_header(c, "bwd_inputs_unchanged", &d);
    outcome oc;
    if (build_bwd(c, &x, &d, NULL, 0, &oc)) return oc;
    void *keep[3] = {NULL, NULL, NULL};
    void *const bufs[3] = {x.f.buf[ATTN_T_O], x.f.buf[ATTN_T_LSE], x.buf[ATTN_G_DO]};
    const size_t bytes[3] = {x.f.bytes[ATTN_T_O], x.f.bytes[ATTN_T_LSE], x.bytes[ATTN_G_DO]};
    static const char *const names[3] = {"O", "LSE", "dO"};
    oc = CHECK_FAIL;
    for (int i = 0; i < 3; i++)
        if (attn_dev_malloc(&keep[i], bytes[i]) != cudaSuccess ||
            cudaMemcpyAsync(keep[i], bufs[i], bytes[i], cudaMemcpyDeviceToDevice, c->stream) != cudaSuccess) {
            say(c, "  copying the inputs failed\n");
            goto done;
        }
    launch_result lr = run_bwd(c, &x);
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        attn_match m;
        if (attn_count_diff_bytes(keep[i], bufs[i], bytes[i], &m, c->stream) != cudaSuccess) {
            say(c, "  comparing the inputs failed\n");
            goto done;
        }
        if (m.count)
            bad = 1, say(c, "  input %s modified by bwd: %llu bytes differ, the first at byte %lld of its data\n",
                         names[i], m.count, (long long)m.first - ATTN_GUARD_BYTES);
    }
    attn_input_change ch[ATTN_N_INPUTS];
    char err[1024], line[512];
    int n = attn_gpu_problem_input_changes(&x.f, ch, c->stream, err, sizeof err);
    if (n < 0) {
        say(c, "  %s\n", err);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        attn_input_change_describe(&x.f, &ch[i], line, sizeof line);
        say(c, "  %s (by bwd)\n", line);
    }
    oc = bad || n ? CHECK_FAIL : CHECK_PASS;
done:
    for (int i = 0; i < 3; i++) attn_dev_free(keep[i]);
    attn_bwd_problem_free(&x);
    return oc;
}

/* 20. a race shows as a result that varies: twenty launches of one problem, each judged, and
 * bit-identical when the kernel declares ATTN_BWD_DETERMINISTIC (asked for) */
outcome check_bwd_race(check_ctx *c) {
    return repeated_check(c, CHECK_NO_bwd_race, "bwd_race", RACE_LAUNCHES);
}

/* 21. bwd under CUDA graph capture (global mode, a fresh stream): two replays, each on
 * poisoned gradients and workspace, judged */
outcome check_bwd_graph_capture(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_graph_capture);
    int fail;
    outcome oc = prepare_bwd(c, &x, &d, NULL, 0, "bwd_graph_capture", &fail); /* the warm-up launch */
    cudaStream_t s = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (fail) goto done;
    oc = CHECK_FAIL;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) goto done;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    int rc = e == cudaSuccess ? c->kernel->bwd(&x.bp, s) : ATTN_OK;
    cudaError_t e2 = cudaStreamEndCapture(s, &graph);
    if (e == cudaSuccess) e = e2;
    cudaGetLastError();
    if (e != cudaSuccess || rc != ATTN_OK || !graph || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        say(c, "  bwd could not be captured into a CUDA graph (stream capture, global mode): %s, bwd returned %d. "
            "bwd must only enqueue work on its stream: no host synchronization, no cudaMalloc/cudaFree, no work "
            "on another stream that is not joined back\n", e != cudaSuccess ? cudaGetErrorString(e) : "no graph", rc);
        goto done;
    }
    for (int replay = 1; replay <= 2; replay++) {
        char err[1024], what[64];
        snprintf(what, sizeof what, "replay %d of the captured graph", replay);
        if (attn_bwd_problem_poison(&x, ATTN_BWD_OUTPUTS, c->stream, err, sizeof err) ||
            cudaGraphLaunch(exec, c->stream) != cudaSuccess || wait_kernel(c, c->stream) != LAUNCH_OK) {
            say(c, "  %s failed\n", what);
            goto done;
        }
        if (judge_grads(c, &x, what)) goto done;
    }
    oc = CHECK_PASS;
done:
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (s) cudaStreamDestroy(s);
    attn_bwd_problem_free(&x);
    return oc;
}

/* 22. one bwd, nothing judged: what compute-sanitizer watches. No reference runs (O random,
 * the LSE 0), so the only other kernels in the process are the input generators. */
outcome check_bwd_launch(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_launch);
    say_header(c, "bwd_launch", &d);
    outcome oc;
    if (!build_bwd_with(c, &x, &d, NULL, 0, NULL, &oc)) oc = launch_outcome(run_bwd(c, &x));
    attn_bwd_problem_free(&x);
    return oc;
}

/* 23. a softmax scale other than 1/sqrt(d): the scale enters P and, once more, dS's way into
 * dQ and dK; every other backward check runs 1/sqrt(d), which a kernel that hard-codes it
 * passes */
outcome check_bwd_scale(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_scale);
    d.softmax_scale = 0.5f; /* 4x (d=64) or 5.7x (d=128) the usual 1/sqrt(d), as the forward's scale check */
    int fail;
    outcome oc = prepare_bwd(c, &x, &d, NULL, 0, "bwd_scale", &fail);
    if (!fail) oc = judge_grads(c, &x, "softmax scale 0.5") ? CHECK_FAIL : CHECK_PASS;
    attn_bwd_problem_free(&x);
    return oc;
}

/* 25. bwd on two streams at once: problems A and B (the case's shape, each its own buffers,
 * inputs and workspace) enqueued CONCURRENT_CALLS times each, A on one non-blocking stream and B
 * on another, both held until released together (check_concurrent's, for bwd); every gradient
 * judged. A kernel whose calls share device memory of its own (an accumulator or row sums kept
 * across calls instead of in the caller's workspace) mixes the two problems. */
outcome check_bwd_concurrent(check_ctx *c) {
    attn_bwd_problem x[2];
    memset(x, 0, sizeof x);
    attn_problem_desc d[2];
    concurrent_streams cs;
    concurrent_setup(c, CHECK_NO_bwd_concurrent, "bwd_concurrent", d, &cs);
    outcome oc = CHECK_FAIL;
    char err[1024];
    for (int i = 0; i < 2; i++)
        if (build_bwd(c, &x[i], &d[i], NULL, 0, &oc)) goto done;
    oc = CHECK_FAIL;
    launch_result lr = run_bwd(c, &x[0]); /* the warm-up, outside the gates */
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    if (concurrent_hold(c, &cs, 2)) goto done;
    for (int i = 0; i < 2; i++)
        if (attn_bwd_problem_poison(&x[i], ATTN_BWD_OUTPUTS, cs.s[i], err, sizeof err)) {
            say(c, "  %s\n", err);
            goto done;
        }
    for (int call = 0; call < CONCURRENT_CALLS && lr == LAUNCH_OK; call++)
        for (int i = 0; i < 2 && lr == LAUNCH_OK; i++) lr = bwd_result(c, c->kernel->bwd(&x[i].bp, cs.s[i]));
    concurrent_release(&cs);
    const launch_result w = concurrent_wait(c, &cs);
    if (lr == LAUNCH_OK) lr = w;
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    if (judge_grads(c, &x[0], "problem A (stream 1)") || judge_grads(c, &x[1], "problem B (stream 2)")) {
        say(c, "  %d calls of problem A on one stream and %d of B (new inputs) on another ran at once (both "
            "streams held, then released together): the calls share device state of the kernel's own (an "
            "accumulator or row sums kept across calls, not in the caller's workspace)\n", CONCURRENT_CALLS,
            CONCURRENT_CALLS);
        goto done;
    }
    oc = CHECK_PASS;
done:
    concurrent_free(&cs);
    for (int i = 0; i < 2; i++) attn_bwd_problem_free(&x[i]);
    return oc;
}

/* 27. unaligned's layouts for the backward's eight tensors: one of Q, K, V, O, dO, dQ, dK, dV
 * (the case's pick) with an odd row stride (BSHD+1), then one of Q, K, V, O with its base 2 bytes
 * past a 16-byte boundary; the others BSHD. bwd is right, or returns ATTN_UNSUPPORTED (declining
 * passes). */
outcome check_bwd_unaligned(check_ctx *c) {
    static const char *const names[] = {"Q", "K", "V", "O", "dO", "dQ", "dK", "dV"};
    const test_case *tc = c->tc;
    /* for each shape, the four (dtype, head dim) pairs pick four tensors, the next shape the next */
    const int pick = (tc->dtype + 2 * (tc->head_dim > 64) + tc->seqlen_q + tc->seqlen_k) % 8;
    char kept[sizeof c->unsupported];
    memcpy(kept, c->unsupported, sizeof kept);
    outcome oc = CHECK_PASS;
    for (int i = 0; i < 2 && oc == CHECK_PASS; i++) {
        attn_bwd_problem x;
        memset(&x, 0, sizeof x);
        attn_problem_desc d = case_problem(c, CHECK_NO_bwd_unaligned + 16 * i);
        attn_layout grads[4] = {ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BSHD, ATTN_LAYOUT_BSHD};
        const int t = i == 0 ? pick : pick % 4;
        char what[128];
        if (i == 0) {
            if (t < 4)
                d.layout[t] = ATTN_LAYOUT_BSHD_ODD;
            else
                grads[t - 4] = ATTN_LAYOUT_BSHD_ODD;
            snprintf(what, sizeof what, "%s with an odd row stride (BSHD+1), the others BSHD", names[t]);
        } else {
            d.shifted = ATTN_TENSOR_BIT(t);
            snprintf(what, sizeof what, "%s's base 2 bytes past a 16-byte boundary, the others aligned", names[t]);
        }
        say_header(c, "bwd_unaligned", &d);
        say(c, "  %s\n", what);
        /* first without the references (O random, LSE 0), so that declining costs none */
        launch_result lr = LAUNCH_FAILED;
        int built = 0;
        for (int judged = 0; judged < 2; judged++) {
            attn_bwd_problem_free(&x);
            if (!(built = !build_bwd_with(c, &x, &d, grads, 0, judged ? c->ref : NULL, &oc))) break;
            if ((lr = run_bwd(c, &x)) != LAUNCH_OK) break;
        }
        if (!built) { /* oc: CHECK_UNSUPPORTED (no backward of this case) or CHECK_FAIL (said) */
            attn_bwd_problem_free(&x);
            break;
        }
        oc = lr == LAUNCH_UNSUPPORTED ? CHECK_PASS /* declined */
             : lr != LAUNCH_OK       ? CHECK_FAIL
             : judge_grads(c, &x, what) ? CHECK_FAIL
                                         : CHECK_PASS;
        attn_bwd_problem_free(&x);
    }
    if (oc != CHECK_UNSUPPORTED) memcpy(c->unsupported, kept, sizeof kept); /* declining is not the case's reason */
    return oc;
}

/* 31. state_unchanged's, for bwd: the process's CUDA state after a bwd as the kernel found it. */
outcome check_bwd_state_unchanged(check_ctx *c) {
    attn_bwd_problem x;
    attn_problem_desc d = case_problem(c, CHECK_NO_bwd_state_unchanged);
    say_header(c, "bwd_state_unchanged", &d);
    outcome oc;
    if (!build_bwd_with(c, &x, &d, NULL, 0, NULL, &oc)) {
        const launch_result lr = run_bwd(c, &x);
        oc = lr == LAUNCH_OK ? state_verdict(c, "bwd") : launch_outcome(lr);
    }
    attn_bwd_problem_free(&x);
    return oc;
}

/* 33. threads' for bwd: THREAD_COUNT host threads started together, each on its own held stream,
 * THREAD_CALLS calls each, every call its own problem and workspace; every gradient judged. */
static int bwd_call(const attn_kernel *kernel, void *problems, int i, cudaStream_t stream) {
    return kernel->bwd(&((attn_bwd_problem *)problems)[i].bp, stream);
}

outcome check_bwd_threads(check_ctx *c) {
    attn_bwd_problem x[THREAD_PROBLEMS];
    memset(x, 0, sizeof x);
    const attn_problem_desc d = case_problem(c, CHECK_NO_bwd_threads);
    say_header(c, "bwd_threads", &d);
    concurrent_streams cs;
    memset(&cs, 0, sizeof cs);
    outcome oc = CHECK_FAIL;
    char err[1024];
    for (int i = 0; i < THREAD_PROBLEMS; i++) {
        attn_problem_desc di = d;
        di.seed = d.seed + (uint64_t)i;
        if (build_bwd(c, &x[i], &di, NULL, 0, &oc)) goto done;
    }
    oc = CHECK_FAIL;
    launch_result lr = run_bwd(c, &x[0]); /* first-call set-up, from the main thread */
    if (lr != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    if (concurrent_hold(c, &cs, THREAD_COUNT)) goto done;
    for (int i = 0; i < THREAD_PROBLEMS; i++)
        if (attn_bwd_problem_poison(&x[i], ATTN_BWD_OUTPUTS, cs.s[i / THREAD_CALLS], err, sizeof err)) {
            say(c, "  %s\n", err);
            goto done;
        }
    if ((lr = threads_run(c, bwd_call, x, &cs)) != LAUNCH_OK) {
        oc = launch_outcome(lr);
        goto done;
    }
    for (int i = 0; i < THREAD_PROBLEMS; i++) {
        char what[64];
        snprintf(what, sizeof what, "thread %d's call %d", i / THREAD_CALLS, i % THREAD_CALLS + 1);
        if (judge_grads(c, &x[i], what)) {
            say(c, "  %d host threads called bwd %d times each at once, each on its own stream, each call its own "
                "problem and workspace: host state shared by the calls mixed them\n", THREAD_COUNT, THREAD_CALLS);
            goto done;
        }
    }
    oc = CHECK_PASS;
done:
    concurrent_free(&cs);
    for (int i = 0; i < THREAD_PROBLEMS; i++) attn_bwd_problem_free(&x[i]);
    return oc;
}
