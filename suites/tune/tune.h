/* attn_tune's parts (main.c says what the program does): the run's context, which main owns
 * and passes to every phase and, through attn_case_runner's ctx, to the supervised children. */
#ifndef ATTN_TUNE_H
#define ATTN_TUNE_H

#include <stddef.h>

#include <cuda_runtime_api.h>
#include <jansson.h>

#include "attn_abi.h"
#include "bench_gpu.h"
#include "gpu_problem.h"
#include "harness.h"
#include "reference.h"
#include "supervise.h"
#include "tune_search.h"
#include "verdict.h"

#define MAX_LIST 16
#define ACCEPT_MARGIN 0.03 /* the winner's CI must lie this far under the default's */

/* The command line (args.c). */
typedef struct {
    const char *kernel_name, *plugin, *tolerance, *results_dir, *tuned_dir, *source_dir, *work_dir;
    attn_dtype dtypes[MAX_LIST];
    int n_dtypes, dims[MAX_LIST], n_dims, masks[MAX_LIST], n_masks, seqlens[MAX_LIST], n_seqlens;
    int tokens, hidden, exhaustive_max, trials;
    unsigned long long seed;
    double case_timeout_s;
    int built_only; /* search what this build holds, even where the gates let more through */
} tune_args;

typedef struct {
    attn_dtype dtype;
    int d;
} group;

/* What phase 1 and 2 found of one configuration (the work file, read back by phase 3). */
enum { ST_UNSEEN, ST_GATED, ST_FAILED, ST_CRASHED, ST_PASSED };
typedef struct {
    char state, gate[24];
    int regs, spill;
    char detail[400];
} config_state;

typedef struct {
    tune_args a;
    /* the kernel, its tunables, the space, the (dtype, head dim) groups */
    const attn_kernel *kernel;
    const attn_tuning *tuning;
    attn_tune_space space;
    size_t space_size;
    group groups[MAX_LIST * MAX_LIST];
    int n_groups;
    /* The work file: what the children found, a line per configuration (phase 1), read back
     * by phase 3. "G <group> <index> <gate> <regs> <spill> <detail>", "P <group> <index>
     * <regs> <spill>", "F <group> <index> <why>", "X <group> <index>" (crashed or hung, by
     * the parent). */
    char work_path[1100];
    attn_tolerance tol;
    char label[320]; /* config_label's answer */
    /* a child's: the GPU, the reference, the stream (child_init) */
    attn_reference *ref;
    cudaStream_t stream;
    struct cudaDeviceProp prop;
    /* phases 1 and 2: the current group's two problems */
    attn_gpu_problem tail_p, causal_p;
    int problems_group;
    /* phase 3 */
    config_state *states[MAX_LIST * MAX_LIST]; /* [group][configuration] */
    attn_timer *timer;
} tuner;

/* args.c: the command line into a and the groups into tu; a bad one exits 2 with the usage. */
void tune_parse_args(tuner *tu, int argc, char **argv);

/* configs.c: configurations, problems, phases 1 and 2 (gates and correctness) */
void config_values(const tuner *tu, size_t index, int *values);
size_t config_index(const tuner *tu, const int *values);
const char *config_text(const tuner *tu, size_t index, char *buf, size_t len);
json_t *config_json(const tuner *tu, size_t index);
int problem_make(tuner *tu, attn_gpu_problem *x, attn_dtype dt, int d, int batch, int heads, int sq, int sk,
                 int causal, const char *seed_name, int refs, char *err, size_t errlen);
int check_config(tuner *tu, attn_gpu_problem *x, const int *values, char *why, size_t len);
void work_line(const tuner *tu, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int child_init(void *ctx);
attn_case_verdict run_config(int i, void *ctx, int *stop_child);
const char *config_label(int i, void *ctx);

/* search.c: phase 3, the search per class, and the output files */
attn_case_verdict run_search(int i, void *ctx, int *stop_child);
const char *search_label(int i, void *ctx);

/* class.c: one class's search, confirmation and JSON */
typedef struct {
    int group, causal, seqlen, lo, hi;
} shape_class;
json_t *tune_class(tuner *tu, const shape_class *sc, char *line, size_t linelen);

#endif
