/* Runs a list of test cases in a child process, so that one case that crashes the process,
 * breaks its CUDA context or hangs fails alone and the cases after it still run.
 *
 * The parent never touches CUDA (a CUDA context does not survive fork()): it forks a child,
 * which sets up once (init: GPU, handles) and runs cases from some index on, telling the
 * parent through a pipe when each case starts and how it ended. A child that dies, or stays
 * on one case longer than the case timeout (then killed), fails that case; a new child takes
 * the cases after it. A case that leaves its CUDA context broken asks to stop its child
 * (stop_child), and the next case starts in a fresh one.
 *
 * Why not one process per case: on an H100, creating a CUDA context costs about 0.13 s and
 * the driver serializes it across processes (8 at once took 1.1 s each), so hundreds of
 * one-case processes spend minutes in context creation alone. */
#ifndef ATTN_SUPERVISE_H
#define ATTN_SUPERVISE_H

#include <stdio.h>

typedef enum {
    ATTN_CASE_PASSED,
    ATTN_CASE_FAILED,        /* a check failed, or the case crashed or hung */
    ATTN_CASE_UNSUPPORTED,   /* the kernel does not take this case */
    ATTN_CASE_SKIPPED,       /* this machine cannot run it (e.g. too little GPU memory) */
    ATTN_CASE_KNOWN,         /* failed only as a listed known deviation of a kernel not ours */
    ATTN_CASE_NOT_RUN,       /* never reached (the child could not be started again) */
} attn_case_verdict;

typedef struct {
    /* In the child, before its first case: 0, or the exit status the whole run ends with
     * (e.g. 77 with no GPU) when nothing can run. */
    int (*init)(void *ctx);
    /* In the child: runs case i; sets *stop_child when this process must not run another
     * (its CUDA context is broken). */
    attn_case_verdict (*run)(int i, void *ctx, int *stop_child);
    /* In the parent: the case's name, for messages. */
    const char *(*label)(int i, void *ctx);
    void *ctx;
    int n_cases;
    double case_timeout_s; /* <= 0: no limit */
} attn_case_runner;

/* Runs every case; verdicts[i] gets each one's verdict. Returns 0 when every case was given
 * a verdict, else the status the child's init asked to end with (no case ran). Messages
 * about crashed and hung cases go to `log`. */
int attn_run_cases(const attn_case_runner *r, attn_case_verdict *verdicts, FILE *log);

/* Every case in this process, in order, no child (for tools that follow one process, such as
 * compute-sanitizer and Nsight Compute). Same return as attn_run_cases; a crash ends it. */
int attn_run_cases_in_process(const attn_case_runner *r, attn_case_verdict *verdicts);

#endif
