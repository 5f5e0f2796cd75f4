/* attn_tune: a tunable kernel's best configuration per shape class of the benchmark matrix,
 * proven correct, confirmed faster than the default, written per GPU.
 *
 *   attn_tune --kernel flash2 [--plugin lib.so] --dtypes fp16,bf16 --head-dims 64,128
 *       --masks full,causal --seqlens 4,32,128,512,1024,2048 --tokens 16384 --hidden 2048
 *       --tolerance thresholds/tolerance.ini --results-dir results --tuned-dir thresholds
 *
 * 1. Gates, per (dtype, head dim), before any launch: every configuration of the kernel's
 *    space (attn_tuning, attn_abi.h) is judged by what it says it needs against this GPU:
 *    its own rules, threads, shared memory per block, registers (its estimate against the
 *    cap its launch bounds set), occupancy (at least max(1, min_blocks) resident blocks), then
 *    whether this build holds it, then after the compile its real registers and spills
 *    (cudaFuncGetAttributes). Each rejected configuration is listed with its gate.
 * 2. Correctness, per configuration that passed: a tail shape (2 x 3 heads, 333 x 333) and a
 *    causal shape (1 x 4 heads, 200 x 333, bottom-right), O and LSE judged by the verdict
 *    rule against the cuBLAS reference. A configuration that is wrong, declines, faults or
 *    hangs is rejected: each runs in a supervised child (harness/supervise.h), so a fault
 *    fails that configuration alone.
 * 3. Search, per class (dtype, head dim, mask, seqlen of the matrix): the correct
 *    configurations, exhaustively when at most --exhaustive-max, else a Latin hypercube
 *    design then a tree-structured Parzen estimator up to --trials (harness/tune_search.h);
 *    then successive halving (a third kept per rung, each rung timed longer).
 * 4. Confirmation: the winner and the default timed interleaved (attn_measure_pair) on the
 *    class's benchmark shape; accepted only when the winner's 95 % CI of the median lies 3 %
 *    or more under the default's, and the winner's output on that shape is right.
 * 5. Output: results/<gpu>/tune/<date>-<commit>-<kernel>.json (every configuration, its gate
 *    or verdict, every timing, the winners), and <tuned-dir>/<gpu>.tuned.txt: the accepted
 *    configurations, one line per class (cmake/tuned.cmake reads it; flash2 compiles and
 *    runs them), the other kernels' lines kept.
 * A configuration that passes the gates but is not in this build stops the run after step 2
 * (flash2: -DATTN_TUNE_SPACE=ON builds its space), unless --built-only.
 * Exit: 0 done; 1 a phase failed; 2 bad arguments, or configurations missing from the build;
 * 77 no GPU, or the kernel has no tunables. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "results.h"
#include "tune.h"

/* The tolerance, the kernel and its space, the work file. 0, or main's exit code (the
 * reason printed). */
static int set_up(tuner *tu) {
    char err[2048];
    const tune_args *a = &tu->a;
    if (attn_tolerance_load(a->tolerance, &tu->tol, err, sizeof err)) return fprintf(stderr, "attn_tune: %s\n", err), 2;
    if (!(tu->kernel = attn_find_kernel(a->kernel_name, a->plugin, err, sizeof err)))
        return fprintf(stderr, "attn_tune: %s\n", err), 2;
    if (!(tu->tuning = attn_find_tuning(tu->kernel, a->plugin, err, sizeof err))) {
        if (err[0]) return fprintf(stderr, "attn_tune: %s\n", err), 2;
        printf("SKIPPED: kernel '%s' has no tunables (attn_tuning, attn_abi.h)\n", a->kernel_name);
        return ATTN_EXIT_SKIP;
    }
    tu->space.n = tu->tuning->count;
    for (int i = 0; i < tu->tuning->count; i++) tu->space.counts[i] = tu->tuning->tunables[i].count;
    tu->space_size = attn_tune_space_size(&tu->space);
    if (tu->space_size == 0 || tu->space_size * (size_t)tu->n_groups > 1u << 20)
        return fprintf(stderr, "attn_tune: kernel '%s': a space of %zu configurations x %d groups is more than the "
                       "gate and correctness pass takes (2^20)\n", a->kernel_name, tu->space_size, tu->n_groups), 2;
    char dir[1024];
    if (a->work_dir) snprintf(dir, sizeof dir, "%s", a->work_dir);
    else if (!mkdtemp(strcpy(dir, "/tmp/attn_tune.XXXXXX"))) return fprintf(stderr, "attn_tune: mkdtemp failed\n"), 2;
    if (attn_mkdirs(dir, err, sizeof err)) return fprintf(stderr, "attn_tune: %s\n", err), 2;
    snprintf(tu->work_path, sizeof tu->work_path, "%s/work.txt", dir);
    FILE *w = fopen(tu->work_path, "w");
    if (!w) return fprintf(stderr, "attn_tune: %s: cannot be written\n", tu->work_path), 2;
    fclose(w);
    printf("attn_tune: kernel %s, %d tunables, %zu configurations x %d (dtype, head dim) groups; work file %s\n",
           a->kernel_name, tu->space.n, tu->space_size, tu->n_groups, tu->work_path);
    return 0;
}

/* What crashed or hung wrote no line: the parent says so in the work file. Returns how many
 * configurations pass every gate but are not in this build. */
static long mark_unseen(tuner *tu, const attn_case_verdict *v, int n_cases) {
    const size_t space_size = tu->space_size;
    unsigned char *seen = calloc((size_t)n_cases, 1);
    FILE *f = fopen(tu->work_path, "r");
    char l[1200];
    long not_built = 0;
    while (f && fgets(l, sizeof l, f)) {
        int g, n = 0;
        size_t i;
        if (sscanf(l + 1, " %d %zu %n", &g, &i, &n) >= 2 && g >= 0 && g < tu->n_groups && i < space_size) {
            seen[(size_t)g * space_size + i] = 1;
            not_built += l[0] == 'G' && !strncmp(l + 1 + n, "not_built ", 10);
        }
    }
    if (f) fclose(f);
    for (int i = 0; i < n_cases; i++)
        if (!seen[i] && (v[i] == ATTN_CASE_FAILED || v[i] == ATTN_CASE_NOT_RUN))
            work_line(tu, "X %d %zu %s", (int)((size_t)i / space_size), (size_t)i % space_size,
                      v[i] == ATTN_CASE_NOT_RUN ? "not run" : "no verdict from the child");
    free(seen);
    return not_built;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    tuner tu = {.problems_group = -1}; /* the run's one context, passed to every phase */
    tune_parse_args(&tu, argc, argv);
    int rc = set_up(&tu);
    if (rc) return rc;

    /* phases 1 and 2: gates and correctness, a case per configuration, in supervised children */
    const double t0 = attn_wall_s();
    const int n_cases = (int)(tu.space_size * (size_t)tu.n_groups);
    attn_case_verdict *v = calloc((size_t)n_cases, sizeof *v);
    attn_case_runner r = {child_init, run_config, config_label, &tu, n_cases, tu.a.case_timeout_s};
    rc = attn_run_cases(&r, v, stdout);
    if (rc) return free(v), rc;
    const long not_built = mark_unseen(&tu, v, n_cases);
    free(v);
    printf("gates and correctness: %.1f s\n", attn_wall_s() - t0);
    /* a search over part of the space would still rewrite the committed tuned file */
    if (not_built && !tu.a.built_only) {
        fprintf(stderr, "attn_tune: %ld configurations pass every gate but are not in this build (flash2: configure "
                "with -DATTN_TUNE_SPACE=ON): the search would miss them (--built-only searches what is built)\n",
                not_built);
        return 2;
    }

    /* phase 3: the search, in one supervised child */
    attn_case_verdict sv;
    attn_case_runner rs = {child_init, run_search, search_label, &tu, 1, 3600};
    rc = attn_run_cases(&rs, &sv, stdout);
    if (rc) return rc;
    printf("attn_tune: %s in %.1f s\n", sv == ATTN_CASE_PASSED ? "done" : "FAILED", attn_wall_s() - t0);
    return sv == ATTN_CASE_PASSED ? 0 : 1;
}
