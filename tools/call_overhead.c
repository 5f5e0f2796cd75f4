/* The host's cost of one fwd call: what a kernel's launch path (the Python bridge's, a C
 * kernel's cudaLaunchKernel) costs before the GPU sees any work. The benchmarks keep it out of
 * a kernel's time (their samples wait behind a kernel that holds the stream until all are
 * enqueued; results record "held" and "enqueue_ms"); this tool says how large it is.
 *
 *   attn_call_overhead --kernel NAME [--plugin PATH] [--calls N]
 *
 * For each kernel: one small dense problem (fp16, batch 1, 1 head, 128 x 128, d64), one
 * warm-up call, then N calls (default 2000) enqueued back to back; prints the host time per
 * call (the median of 5 rounds of N/5 calls, each round timed on the host) and the GPU time
 * per call (events around the round). Exit 0, 1 a call failed, 2 bad arguments, 77 no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "gpu_problem.h"
#include "harness.h"
#include "registry.h"

#define USAGE "usage: attn_call_overhead --kernel NAME [--plugin PATH] [--calls N]\n"
enum { ROUNDS = 5 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* calls of k on x, in rounds; host and GPU microseconds per call (medians over the rounds) */
static int measure(const attn_kernel *k, const attn_gpu_problem *x, int calls, cudaStream_t s, double *host_us,
                   double *gpu_us) {
    cudaEvent_t e0, e1;
    double host[ROUNDS], gpu[ROUNDS];
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) return 1;
    int rc = k->fwd(&x->p, s); /* warm-up: first-call set-up (Python's start, imports) */
    if (rc != ATTN_OK || cudaStreamSynchronize(s) != cudaSuccess) {
        fprintf(stderr, "attn_call_overhead: kernel '%s': the warm-up call returned %d (%s)\n", k->name, rc,
                cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    const int per_round = calls / ROUNDS > 0 ? calls / ROUNDS : 1;
    for (int r = 0; r < ROUNDS; r++) {
        cudaEventRecord(e0, s);
        const double t0 = now_s();
        for (int i = 0; i < per_round && rc == ATTN_OK; i++) rc = k->fwd(&x->p, s);
        host[r] = (now_s() - t0) * 1e6 / per_round;
        cudaEventRecord(e1, s);
        float ms = 0;
        if (rc != ATTN_OK || cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1)) {
            fprintf(stderr, "attn_call_overhead: kernel '%s': a call returned %d (%s)\n", k->name, rc,
                    cudaGetErrorString(cudaGetLastError()));
            return 1;
        }
        gpu[r] = ms * 1e3 / per_round;
    }
    qsort(host, ROUNDS, sizeof host[0], cmp_double);
    qsort(gpu, ROUNDS, sizeof gpu[0], cmp_double);
    *host_us = host[ROUNDS / 2], *gpu_us = gpu[ROUNDS / 2];
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return 0;
}

int main(int argc, char **argv) {
    const char *name = NULL, *plugin = NULL;
    int calls = 2000;
    for (int i = 1; i < argc; i++) {
        if (attn_is_help(argv[i])) {
            printf(USAGE "The host's time per fwd call, and the GPU's, of one kernel on a small problem\n"
                         "(tools/call_overhead.c says more). Exit 0, 1 a call failed, 2 bad arguments, 77 no GPU.\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "attn_call_overhead: '%s' needs a value (or is unknown)\n" USAGE, argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--kernel")) name = argv[++i];
        else if (!strcmp(argv[i], "--plugin")) plugin = argv[++i];
        else if (!strcmp(argv[i], "--calls")) {
            char *end;
            const long v = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || v < 1 || v > 1000000) {
                fprintf(stderr, "attn_call_overhead: --calls '%s': expected an integer in [1, 1000000]\n", argv[i]);
                return 2;
            }
            calls = (int)v;
        } else {
            fprintf(stderr, "attn_call_overhead: unknown option '%s'\n" USAGE, argv[i]);
            return 2;
        }
    }
    if (!name) {
        fprintf(stderr, "attn_call_overhead: --kernel is required\n" USAGE);
        return 2;
    }
    char err[1024];
    const attn_kernel *k = attn_find_kernel(name, plugin, err, sizeof err);
    if (!k) {
        fprintf(stderr, "attn_call_overhead: %s\n", err);
        return 2;
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIPPED: no GPU\n");
        return 77;
    }
    cudaStream_t s;
    attn_gpu_problem x;
    attn_problem_desc d = attn_problem_dense(ATTN_F16, 1, 1, 128, 128, 64, 0, "call_overhead");
    d.with_lse = 0;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        attn_gpu_problem_build(&x, &d, s, err, sizeof err)) {
        fprintf(stderr, "attn_call_overhead: building the problem failed: %s\n", err);
        return 1;
    }
    double host_us, gpu_us;
    int rc = measure(k, &x, calls, s, &host_us, &gpu_us);
    if (!rc)
        printf("kernel %s: host %.1f us per call, GPU %.1f us per call (%d calls, fp16 b1 h1 128x128 d64)\n", name,
               host_us, gpu_us, calls);
    attn_gpu_problem_free(&x);
    cudaStreamDestroy(s);
    return rc;
}
