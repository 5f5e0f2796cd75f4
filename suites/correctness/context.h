/* What a correctness check sees: its case, the run's kernel, tolerance, reference and stream,
 * and the message it writes (check_ctx); the helpers every check uses: a problem of the
 * case built by harness/gpu_problem.h, one launch, the verdict rules. No global state: a
 * check is `outcome check_<name>(check_ctx *c)` (the table: checks.def). */
#ifndef ATTN_CORRECTNESS_CONTEXT_H
#define ATTN_CORRECTNESS_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "attn_abi.h"
#include "cuda_state.h"
#include "gpu_problem.h"
#include "verdict.h"

/* One case: a row of the cross product (or of a pairwise covering array, --pairwise) of
 * the --dtype, --head-dim, --mask, --heads-k, --window, --softcap and --shapes lists. */
enum { MAX_SEQS = 16 }; /* sequences of a packed case */
typedef struct {
    attn_dtype dtype;
    int head_dim, head_dim_v, causal, heads_k, window_left, window_right, seqlen_q, seqlen_k;
    float softcap;
    /* packed (a shape "QxK+QxK+..." or a page size): its sequences' lengths; else nseq 0 */
    int nseq, page_size, lens_q[MAX_SEQS], lens_k[MAX_SEQS];
    const char *shape; /* its --shapes element, as given ("QxK", "S" or "QxK+QxK+...") */
    char label[192];   /* fp16/d64/full/s1000, bf16/d192v128/causal/kv1/w16_0/cap30/p16/q1k239+s5 */
} test_case;

typedef struct {
    /* the run (fixed once the child has started) */
    const attn_kernel *kernel;
    attn_tolerance tol;
    attn_reference *ref;
    cudaStream_t stream;
    attn_cuda_state pristine; /* read before the kernel's first call in this process */
    int batch, heads;
    /* the case */
    const test_case *tc;
    char seed_name[288]; /* the case's name for its seeds: correctness/<kernel>/<case> */
    /* what its checks found */
    char unsupported[512]; /* first ATTN_UNSUPPORTED seen, reported with the case */
    int n_unsupported;
    char failed_checks[256]; /* the failed checks' names, comma-separated */
    int print_times;         /* $ATTN_CHECK_TIMES=1: each case's checks' wall seconds printed */
    char check_times[1024];  /* "name=seconds ..." of the case's checks so far */
    char msg[32768];         /* the current check's failure message */
    size_t msg_len;
    /* fwd's inputs after this case's launches (verify_inputs, the check inputs_unchanged):
     * the problems verified, and what the first changed one showed ("" none) */
    int verify_inputs; /* inputs_unchanged is in the case's checks: else nothing reads them back */
    int inputs_verified;
    char inputs_changed[4096];
} check_ctx;

typedef enum { CHECK_PASS, CHECK_FAIL, CHECK_UNSUPPORTED } outcome;
typedef enum { LAUNCH_OK, LAUNCH_UNSUPPORTED, LAUNCH_FAILED } launch_result;

#define ATTN_CHECK(name, group, summary) outcome check_##name(check_ctx *c);
#include "checks.def"
#undef ATTN_CHECK

/* A check's number, its place in checks.def from 1, seeds its inputs (case_problem): a new
 * check appended at the end leaves every other check's seeds, and the reports quoting them,
 * as they were. */
enum {
    CHECK_NO_NONE,
#define ATTN_CHECK(name, group, summary) CHECK_NO_##name,
#include "checks.def"
#undef ATTN_CHECK
};

enum { GATE_TIMEOUT_S = 5 }; /* the contract checks' gate opens by itself after this */

/* Appends to c->msg. */
void say(check_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Starts c->msg: the check, the case's shape and d's layouts and scale, the seed. */
void say_header(check_ctx *c, const char *check, const attn_problem_desc *d);

/* The case's problem for check number `check_id` (CHECK_NO_<name>): BSHD, inputs of std 1, the LSE asked for,
 * softmax scale 1/sqrt(d), the seed from the kernel, the case and the check (ATTN_SEED
 * overrides it). A packed case's sequences too. */
attn_problem_desc case_problem(const check_ctx *c, int check_id);
/* attn_gpu_problem_build, attn_gpu_problem_references and attn_gpu_problem_fill on c's
 * stream, saying why in c->msg; 0 or 1. */
int build_problem(check_ctx *c, attn_gpu_problem *x, const attn_problem_desc *d);
int problem_references(check_ctx *c, attn_gpu_problem *x);
int problem_fill(check_ctx *c, attn_gpu_problem *x, uint64_t seed);
/* Builds x from d, its references, one launch (said in the header first); *fail is set when
 * anything before judging failed. */
outcome prepare(check_ctx *c, attn_gpu_problem *x, const attn_problem_desc *d, const char *check, int *fail);

/* What fwd returned, as a launch result (the reason in msg). */
launch_result fwd_result(check_ctx *c, const attn_gpu_problem *x, int rc);
/* A call (`call`: "fwd", "bwd") that returned ATTN_UNSUPPORTED: LAUNCH_UNSUPPORTED, or
 * LAUNCH_FAILED where it left a CUDA error pending (cleared here). Callers clear the error
 * state before the call (cudaGetLastError), so that only the kernel's own is seen. */
launch_result declined(check_ctx *c, const char *call);
/* The process's CUDA state against c->pristine after `call` (state_unchanged, bwd_state_unchanged):
 * CHECK_PASS, or CHECK_FAIL said. */
outcome state_verdict(check_ctx *c, const char *call);
/* Waits for `stream`; a kernel fault or launch error is the kernel's failure. */
launch_result wait_kernel(check_ctx *c, cudaStream_t stream);
/* Poisons O and LSE, runs the kernel, waits, all on c->stream. */
launch_result run_kernel(check_ctx *c, attn_gpu_problem *x);
/* A launch that was not right as the check's outcome. */
outcome launch_outcome(launch_result lr);
/* After a launch of `check` on x: its inputs compared with what they were before
 * (checks_inputs.c), the first change of the case kept for the check inputs_unchanged. */
void verify_inputs(check_ctx *c, const attn_gpu_problem *x, const char *check);

/* The verdict rule for O against x's references, the LSE rule for its LSE; 0 pass, or 1
 * with the figures and the worst element in msg. judge_lse's *max_abs_g (optional) gets the
 * largest finite golden |LSE|; judge_all judges both, `what` prefixed. */
int judge_output(check_ctx *c, const attn_gpu_problem *x, const char *what);
int judge_lse(check_ctx *c, const attn_gpu_problem *x, const char *what, double *max_abs_g);
int judge_all(check_ctx *c, const attn_gpu_problem *x, const char *what);
/* (b, h, s, d) of logical element `i` of O */
void where(const attn_gpu_problem *x, size_t i, int *b, int *h, int *s, int *d);

/* The concurrent checks' streams (concurrent, bwd_concurrent: two; threads: one a thread):
 * non-blocking, each held by a shut gate until concurrent_release opens them all at once, so
 * that the calls enqueued on them start together. concurrent_hold: 0, or 1 said (after
 * c->stream is drained). */
enum { HELD_STREAMS_MAX = 4 };
typedef struct {
    int n;
    cudaStream_t s[HELD_STREAMS_MAX];
    struct attn_gate *gate[HELD_STREAMS_MAX];
} concurrent_streams;
enum { CONCURRENT_CALLS = 3 }; /* calls of each problem, each on its stream */
/* Their two problems: the case's for check `check_id` and the same with the next seed; the
 * header said, cs cleared (so that concurrent_free may follow any early exit). */
void concurrent_setup(check_ctx *c, int check_id, const char *check, attn_problem_desc d[2], concurrent_streams *cs);
int concurrent_hold(check_ctx *c, concurrent_streams *cs, int n);
void concurrent_release(concurrent_streams *cs);
/* every stream drained: LAUNCH_OK, or the first failure (said); a gate that opened by its
 * timeout (a call that waited for the GPU) is said and fails */
launch_result concurrent_wait(check_ctx *c, concurrent_streams *cs);
/* opens any gate still shut, drains and destroys the streams */
void concurrent_free(concurrent_streams *cs);

/* The threads checks (threads, bwd_threads): THREAD_COUNT host threads started together, thread
 * i making THREAD_CALLS calls on its held stream cs->s[i], call k given problem
 * i * THREAD_CALLS + k (call(kernel, problems, index, stream): fwd or bwd); then the gates open
 * last to first, each stream drained before the next, so that work sent to another thread's
 * stream runs out of its stream's order. LAUNCH_OK, or the first failure said: a thread that
 * could not start (the check cannot judge), a call that declined or failed, a CUDA error left
 * pending on a thread, a fault, a gate that opened by its timeout. */
enum { THREAD_COUNT = 4, THREAD_CALLS = 2, THREAD_PROBLEMS = THREAD_COUNT * THREAD_CALLS };
typedef int (*thread_call_fn)(const attn_kernel *kernel, void *problems, int index, cudaStream_t stream);
launch_result threads_run(check_ctx *c, thread_call_fn call, void *problems, concurrent_streams *cs);

#endif
