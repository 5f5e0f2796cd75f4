/* The helpers every correctness check uses (context.h). Nothing of the size of a tensor
 * crosses to the host: inputs are generated and outputs judged on the GPU. */
#include "context.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_verify.h"
#include "harness.h"

/* ----------------------------------------------------------------- messages ---- */

void say(check_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->msg + c->msg_len, sizeof c->msg - c->msg_len, fmt, ap);
    va_end(ap);
    if (n > 0) c->msg_len += (size_t)n < sizeof c->msg - c->msg_len ? (size_t)n : sizeof c->msg - c->msg_len - 1;
}

void say_header(check_ctx *c, const char *check, const attn_problem_desc *d) {
    const test_case *t = c->tc;
    c->msg_len = 0;
    c->msg[0] = 0;
    say(c, "%s: check '%s' failed\n  shape: batch=%d heads=%d heads_k=%d seqlen_q=%d seqlen_k=%d head_dim=%d "
        "head_dim_v=%d window=(%d,%d) softcap=%g %s %s, layouts q/k/v %s o %s, softmax_scale=%g\n"
        "  seed: ATTN_SEED=0x%016llx CK_RUN_CASE=%s reproduces it\n",
        c->seed_name, check, c->batch, c->heads, t->heads_k, t->seqlen_q, t->seqlen_k, t->head_dim, t->head_dim_v,
        t->window_left, t->window_right, t->softcap, attn_dtype_name(t->dtype), t->causal ? "causal" : "full",
        attn_layout_name(d->layout[0]), attn_layout_name(d->layout[3]), d->softmax_scale,
        (unsigned long long)d->seed, check);
}

/* ------------------------------------------------------------------ problems ---- */

attn_problem_desc case_problem(const check_ctx *c, int check_id) {
    const test_case *t = c->tc;
    attn_problem_desc d = attn_problem_dense(t->dtype, c->batch, c->heads, t->seqlen_q, t->seqlen_k, t->head_dim,
                                             t->causal, c->seed_name);
    d.heads_k = t->heads_k, d.head_dim_v = t->head_dim_v;
    d.window_left = t->window_left, d.window_right = t->window_right, d.softcap = t->softcap;
    d.softmax_scale = (float)(1.0 / sqrt((double)t->head_dim));
    /* the same seeds in any grouping of cases: from the kernel, the case and the check */
    d.seed = attn_seed_from_name(c->seed_name) + 0x9e3779b97f4a7c15ull * (uint64_t)check_id;
    if (getenv("ATTN_SEED") && *getenv("ATTN_SEED")) d.seed = attn_seed_from_name(c->seed_name);
    if (t->nseq) {
        attn_problem_set_batch(&d, t->nseq, t->page_size, t->lens_q, t->lens_k);
        d.softmax_scale = 0; /* the module's default, 1/sqrt(d); the header says 0 */
    }
    return d;
}

int build_problem(check_ctx *c, attn_gpu_problem *x, const attn_problem_desc *d) {
    char err[1024];
    if (!attn_gpu_problem_build(x, d, c->stream, err, sizeof err)) return 0;
    say(c, "  %s\n", err);
    return 1;
}

int problem_references(check_ctx *c, attn_gpu_problem *x) {
    char err[1024];
    if (!attn_gpu_problem_references(x, c->ref, c->stream, err, sizeof err)) return 0;
    say(c, "  %s\n", err);
    return 1;
}

int problem_fill(check_ctx *c, attn_gpu_problem *x, uint64_t seed) {
    char err[1024];
    if (!attn_gpu_problem_fill(x, seed, c->stream, err, sizeof err)) return 0;
    say(c, "  %s\n", err);
    return 1;
}

/* ------------------------------------------------------------------ launches ---- */

static void note_unsupported(check_ctx *c, const attn_gpu_problem *x) {
    const test_case *t = c->tc;
    if (!c->unsupported[0])
        snprintf(c->unsupported, sizeof c->unsupported,
                 "kernel '%s' returned ATTN_UNSUPPORTED for %s %s head_dim=%d layouts q/k/v %s o %s", c->kernel->name,
                 attn_dtype_name(t->dtype), t->causal ? "causal" : "full", t->head_dim,
                 attn_layout_name(x->desc.layout[0]), attn_layout_name(x->desc.layout[3]));
}

launch_result declined(check_ctx *c, const char *call) {
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return LAUNCH_UNSUPPORTED;
    say(c, "  kernel '%s' returned ATTN_UNSUPPORTED from %s but left a CUDA error pending (%s: %s): the caller's "
        "next error check (cudaGetLastError, as PyTorch makes after every operation) reports it as its own; a "
        "kernel that declines after a failed CUDA call must clear it\n", c->kernel->name, call, cudaGetErrorName(e),
        cudaGetErrorString(e));
    return LAUNCH_FAILED;
}

outcome state_verdict(check_ctx *c, const char *call) {
    attn_cuda_state now;
    attn_cuda_state_read(&now, c->stream);
    if (!c->pristine.device_ok || !now.device_ok) {
        say(c, "  the check cannot judge: the CUDA state could not be read (cudaGetDevice failed)\n");
        return CHECK_FAIL;
    }
    char diff[2048];
    if (!attn_cuda_state_diff(&c->pristine, &now, diff, sizeof diff)) return CHECK_PASS;
    say(c, "  after %s (and the kernel's calls before it in this process) the process's CUDA state is not as the "
        "kernel found it: %s. A library call must put back what it changes: its caller and every kernel after it "
        "inherit it\n", call, diff);
    return CHECK_FAIL;
}

launch_result fwd_result(check_ctx *c, const attn_gpu_problem *x, int rc) {
    if (rc == ATTN_UNSUPPORTED) {
        note_unsupported(c, x);
        return declined(c, "fwd");
    }
    if (rc != ATTN_OK) {
        say(c, "  kernel '%s' returned error code %d\n", c->kernel->name, rc);
        return LAUNCH_FAILED;
    }
    return LAUNCH_OK;
}

launch_result wait_kernel(check_ctx *c, cudaStream_t stream) {
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        say(c, "  the kernel failed on the GPU: %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
        return LAUNCH_FAILED;
    }
    return LAUNCH_OK;
}

/* Every operation goes on c->stream: nothing may race with the kernel. */
launch_result run_kernel(check_ctx *c, attn_gpu_problem *x) {
    char err[1024];
    if (attn_gpu_problem_poison_outputs(x, c->stream, err, sizeof err)) {
        say(c, "  %s\n", err);
        return LAUNCH_FAILED;
    }
    cudaGetLastError(); /* an error left before the call is not the kernel's (declined) */
    launch_result lr = fwd_result(c, x, c->kernel->fwd(&x->p, c->stream));
    return lr == LAUNCH_OK ? wait_kernel(c, c->stream) : lr;
}

outcome launch_outcome(launch_result lr) {
    return lr == LAUNCH_OK ? CHECK_PASS : lr == LAUNCH_UNSUPPORTED ? CHECK_UNSUPPORTED : CHECK_FAIL;
}

outcome prepare(check_ctx *c, attn_gpu_problem *x, const attn_problem_desc *d, const char *check, int *fail) {
    say_header(c, check, d);
    *fail = 1;
    if (build_problem(c, x, d) || problem_references(c, x)) return CHECK_FAIL;
    launch_result lr = run_kernel(c, x);
    if (lr != LAUNCH_OK) return launch_outcome(lr);
    *fail = 0;
    return CHECK_PASS;
}

/* ------------------------------------------------------------------ verdicts ---- */

void where(const attn_gpu_problem *x, size_t i, int *b, int *h, int *s, int *d) {
    const attn_problem_desc *p = &x->desc;
    *d = (int)(i % p->head_dim_v);
    i /= p->head_dim_v;
    *s = (int)(i % p->seqlen_q);
    i /= p->seqlen_q;
    *h = (int)(i % p->heads);
    *b = (int)(i / p->heads);
}

/* Whether O's row `row` sees no key (attn_abi.h's window rule, causal included). */
static int row_empty(const attn_gpu_problem *x, size_t row) {
    const attn_problem_desc *p = &x->desc;
    const int64_t diag = (int64_t)(row % p->seqlen_q) + p->seqlen_k - p->seqlen_q;
    const int right = p->causal ? 0 : p->window_right;
    int64_t lo = p->window_left < 0 ? 0 : diag - p->window_left, hi = right < 0 ? p->seqlen_k : diag + right + 1;
    return (hi < p->seqlen_k ? hi : p->seqlen_k) <= (lo > 0 ? lo : 0);
}

/* The verdict's figures gathered on the GPU; the metrics and the worst element in msg. */
int judge_output(check_ctx *c, const attn_gpu_problem *x, const char *what) {
    const attn_tolerance *tol = &c->tol;
    attn_output_stats st;
    cudaError_t e = attn_output_stats_gpu(&x->p, x->g, x->r, &st, c->stream);
    if (e != cudaSuccess) {
        say(c, "  %s: gathering the verdict's figures failed: %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    attn_output_verdict v;
    attn_output_decide(&st, x->desc.dtype, tol, &v);
    if (v.rule == ATTN_RULE_PASS) return 0;
    int b, h, s, d;
    where(x, v.worst, &b, &h, &s, &d);
    say(c, "  %s: %s", what, attn_rule_name(v.rule));
    if (v.rule == ATTN_RULE_NONFINITE || v.rule == ATTN_RULE_EMPTY_ROW)
        say(c, " (%zu of %zu elements)", v.bad_count, x->o_elems);
    say(c, "\n  max|O-G| = %.4g  bound %.4g = %g x max|R-G| %.4g + atol %.4g (%g steps of %.3g)\n", v.max_err,
        v.max_bound, tol->max_factor, v.max_ref_err, v.atol, tol->atol_steps, v.step);
    say(c, "  mean|O-G| = %.4g  bound %.4g = %g x mean|R-G| %.4g + %.3g\n", v.mean_err, v.mean_bound,
        tol->mean_factor, v.mean_ref_err, v.mean_bound - tol->mean_factor * v.mean_ref_err);
    attn_tensor_view ov = attn_gpu_problem_view(x, ATTN_T_O);
    say(c, "  %s element (b=%d, h=%d, s=%d, d=%d): O=%.6g G=%.6g R=%.6g%s\n",
        v.rule == ATTN_RULE_MAX || v.rule == ATTN_RULE_MEAN ? "worst" : "first bad", b, h, s, d,
        attn_peek_view(x->p.o, x->desc.dtype, &ov, v.worst), attn_peek_f32(x->g, v.worst),
        attn_peek_f32(x->r, v.worst), row_empty(x, v.worst / x->desc.head_dim_v) ? " (a row that sees no key)" : "");
    return 1;
}

int judge_lse(check_ctx *c, const attn_gpu_problem *x, const char *what, double *max_abs_g) {
    const float *lse = attn_gpu_problem_data(x, ATTN_T_LSE);
    const attn_problem_desc *p = &x->desc;
    attn_lse_verdict v;
    double top;
    cudaError_t e = attn_lse_verdict_gpu(lse, x->lg, x->rows, &c->tol, &v, &top, c->stream);
    if (e != cudaSuccess) {
        say(c, "  %s: gathering the LSE figures failed: %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    if (max_abs_g) *max_abs_g = top;
    if (v.ok) return 0;
    size_t r = v.worst;
    say(c, "  %s: %zu of %zu LSE values wrong (bound |L-Lg| <= %g + %g |Lg|)\n", what, v.bad_count, x->rows,
        c->tol.lse_atol, c->tol.lse_rtol);
    say(c, "  first bad row (b=%d, h=%d, s=%d): LSE=%.7g golden=%.7g%s\n", (int)(r / p->seqlen_q / p->heads),
        (int)(r / p->seqlen_q % p->heads), (int)(r % p->seqlen_q), attn_peek_f32(lse, r), attn_peek_f32(x->lg, r),
        row_empty(x, r) ? " (a row that sees no key: expected -inf)" : "");
    return 1;
}

int judge_all(check_ctx *c, const attn_gpu_problem *x, const char *what) {
    char w[256];
    snprintf(w, sizeof w, "%s: output", what);
    int bad = judge_output(c, x, w);
    snprintf(w, sizeof w, "%s: lse", what);
    return bad | judge_lse(c, x, w, NULL);
}

void concurrent_setup(check_ctx *c, int check_id, const char *check, attn_problem_desc d[2], concurrent_streams *cs) {
    d[0] = case_problem(c, check_id);
    d[1] = d[0], d[1].seed = d[0].seed + 1;
    say_header(c, check, &d[0]);
    memset(cs, 0, sizeof *cs);
}

int concurrent_hold(check_ctx *c, concurrent_streams *cs, int n) {
    memset(cs, 0, sizeof *cs);
    cs->n = n < HELD_STREAMS_MAX ? n : HELD_STREAMS_MAX;
    if (cudaStreamSynchronize(c->stream) != cudaSuccess) goto failed;
    for (int i = 0; i < cs->n; i++)
        if (cudaStreamCreateWithFlags(&cs->s[i], cudaStreamNonBlocking) != cudaSuccess ||
            attn_gate_create(&cs->gate[i]) != cudaSuccess || attn_gate_shut(cs->gate[i], cs->s[i], GATE_TIMEOUT_S) != cudaSuccess)
            goto failed;
    return 0;
failed:
    say(c, "  setting up the %d held streams failed: %s\n", cs->n, cudaGetErrorString(cudaGetLastError()));
    return 1;
}

void concurrent_release(concurrent_streams *cs) {
    for (int i = 0; i < cs->n; i++)
        if (cs->gate[i]) attn_gate_open(cs->gate[i]);
}

launch_result concurrent_wait(check_ctx *c, concurrent_streams *cs) {
    launch_result lr = LAUNCH_OK;
    int timed_out = 0;
    for (int i = 0; i < cs->n; i++) {
        const launch_result w = wait_kernel(c, cs->s[i]);
        if (lr == LAUNCH_OK) lr = w;
        timed_out |= attn_gate_timed_out(cs->gate[i]);
    }
    if (lr == LAUNCH_OK && timed_out) {
        say(c, "  a call did not return while its stream was held (a gate opened by its %d s timeout): it waits "
            "for the GPU (see stream_order)\n", GATE_TIMEOUT_S);
        lr = LAUNCH_FAILED;
    }
    return lr;
}

void concurrent_free(concurrent_streams *cs) {
    concurrent_release(cs); /* a gate left shut by an early exit */
    for (int i = 0; i < cs->n; i++) {
        if (cs->s[i]) cudaStreamSynchronize(cs->s[i]), cudaStreamDestroy(cs->s[i]);
        attn_gate_destroy(cs->gate[i]);
        cs->s[i] = NULL, cs->gate[i] = NULL;
    }
    cs->n = 0;
}

typedef struct {
    const attn_kernel *kernel;
    thread_call_fn call;
    void *problems;
    int first;  /* its first problem's index */
    int device; /* the device of the problems and stream */
    cudaStream_t s;
    atomic_int *go;   /* set once every thread exists: they start together */
    int rc;           /* the first return other than ATTN_OK, or ATTN_OK */
    cudaError_t left;       /* an error a call left pending on this thread */
    cudaError_t set_device; /* making the device current in the thread */
} thread_calls;

static void *call_from_thread(void *arg) {
    thread_calls *t = arg;
    /* A caller makes its data's device current, as a framework's device guard does (abi/attn_abi.h);
     * on device 0 the thread is left as it started, with no context current, as a one-GPU caller's
     * thread pool gives it (the runtime's default device is 0). */
    if (t->device != 0 && (t->set_device = cudaSetDevice(t->device)) != cudaSuccess) return NULL;
    while (!atomic_load(t->go)) sched_yield();
    for (int k = 0; k < THREAD_CALLS && t->rc == ATTN_OK && t->left == cudaSuccess; k++) {
        t->rc = t->call(t->kernel, t->problems, t->first + k, t->s);
        t->left = cudaGetLastError(); /* CUDA's error state is per thread: read here */
    }
    return NULL;
}

/* The threads' calls: 0, or 1 said (a thread that could not start). */
static int spawn_and_join(check_ctx *c, thread_calls *t) {
    pthread_t th[THREAD_COUNT];
    atomic_int go = 0;
    int started = 0;
    for (int i = 0; i < THREAD_COUNT; i++) {
        t[i].go = &go;
        if (pthread_create(&th[i], NULL, call_from_thread, &t[i])) break;
        started++;
    }
    atomic_store(&go, 1);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (started == THREAD_COUNT) return 0;
    say(c, "  the check cannot judge: pthread_create failed after %d of %d threads\n", started, THREAD_COUNT);
    return 1;
}

launch_result threads_run(check_ctx *c, thread_call_fn call, void *problems, concurrent_streams *cs) {
    thread_calls t[THREAD_COUNT];
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        say(c, "  the check cannot judge: cudaGetDevice failed\n");
        return LAUNCH_FAILED;
    }
    for (int i = 0; i < THREAD_COUNT; i++)
        t[i] = (thread_calls){c->kernel, call, problems, i * THREAD_CALLS, device, cs->s[i], NULL, ATTN_OK, cudaSuccess,
                              cudaSuccess};
    if (spawn_and_join(c, t)) return LAUNCH_FAILED;
    int returned = 1; /* every call returned while every stream was held */
    for (int i = 0; i < cs->n; i++) returned &= !attn_gate_timed_out(cs->gate[i]);
    launch_result lr = LAUNCH_OK;
    for (int i = cs->n - 1; i >= 0; i--) { /* last to first */
        attn_gate_open(cs->gate[i]);
        const launch_result w = wait_kernel(c, cs->s[i]);
        if (lr == LAUNCH_OK) lr = w;
        int tied = -1; /* a stream still held whose gate had to time out before stream i drained */
        for (int j = 0; j < i; j++)
            if (attn_gate_timed_out(cs->gate[j])) tied = j;
        if (returned && lr == LAUNCH_OK && tied >= 0) {
            say(c, "  stream %d's work did not finish until stream %d, still held, was let go by its %d s timeout: "
                "a call made its stream wait for work on another of the caller's streams (an event of an "
                "earlier call's, a buffer handed over), which deadlocks where the caller orders those streams "
                "the other way\n", i, tied, GATE_TIMEOUT_S);
            lr = LAUNCH_FAILED;
        }
    }
    if (lr != LAUNCH_OK) return lr; /* every stream drained above */
    if ((lr = concurrent_wait(c, cs)) != LAUNCH_OK) return lr; /* a gate that opened by its timeout */
    for (int i = 0; i < THREAD_COUNT; i++) {
        if (t[i].set_device != cudaSuccess) {
            say(c, "  the check cannot judge: cudaSetDevice(%d) failed in thread %d: %s\n", device, i,
                cudaGetErrorString(t[i].set_device));
            return LAUNCH_FAILED;
        }
        if (t[i].rc != ATTN_OK) {
            say(c, "  thread %d: the call returned %d (%s) for a problem the main thread's call took%s\n", i, t[i].rc,
                t[i].rc == ATTN_UNSUPPORTED ? "ATTN_UNSUPPORTED" : "an error",
                device ? "" : " (often the driver API, cuTensorMapEncodeTiled or cuLaunchKernel, with no context "
                "current: on device 0 each thread's first CUDA call was the kernel's, and the runtime makes the "
                "primary context current only when a runtime call needs it)");
            return LAUNCH_FAILED;
        }
        if (t[i].left != cudaSuccess) {
            say(c, "  thread %d: the call returned ATTN_OK but left a CUDA error pending on its thread (%s: %s)\n", i,
                cudaGetErrorName(t[i].left), cudaGetErrorString(t[i].left));
            return LAUNCH_FAILED;
        }
    }
    return LAUNCH_OK;
}
