/* Tuned files (thresholds/<gpu slug>.tuned.txt, written by attn_tune): the configurations a
 * kernel's build compiles for a GPU. The configure step reads them through attn_shapes
 * --tuned (cmake/tuned.cmake). Host-only C with libc alone, so that the configure step can
 * compile it before anything is built.
 *
 *   gpu <the GPU's name as cudaDeviceProp.name gives it>
 *   <kernel> <fp16|bf16> d<head dim> <full|causal> <lo>-<hi> <tunable>=<value> ...   # comment
 *
 * '#' starts a comment, to the end of its line. One 'gpu' line, before the configurations.
 * Other kernels' lines are checked too, then skipped. */
#ifndef ATTN_TUNED_H
#define ATTN_TUNED_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    ATTN_TUNED_MAX_TUNABLES = 16, /* tunables of one kernel */
    ATTN_TUNED_MAX_ALLOWED = 32,  /* values listed for one tunable */
    ATTN_TUNED_NAME = 32,         /* the longest tunable name, with its NUL */
    ATTN_TUNED_GPU_NAME = 256     /* cudaDeviceProp.name's size: the longest name, with its NUL */
};

/* A tunable and the values it takes (n_allowed 0: any int). */
typedef struct {
    char name[ATTN_TUNED_NAME];
    int n_allowed;
    int allowed[ATTN_TUNED_MAX_ALLOWED];
} attn_tuned_tunable;

/* A kernel's tunables, in the order its values are given back. */
typedef struct {
    int n;
    attn_tuned_tunable tunable[ATTN_TUNED_MAX_TUNABLES];
} attn_tuned_spec;

/* "<tunable>[=<v>|<v>...],..." (e.g. "warps=4|8,row_tiles=1|2") into *spec: 0, or 1 with what
 * was wrong in err. */
int attn_tuned_spec_parse(const char *text, attn_tuned_spec *spec, char *err, size_t errlen);

/* One configuration of the kernel asked for. */
typedef struct {
    const char *gpu;   /* as the file's 'gpu' line names it */
    const char *dtype; /* "fp16" or "bf16" */
    int head_dim, causal, seqlen_lo, seqlen_hi;
    int values[ATTN_TUNED_MAX_TUNABLES]; /* in the spec's order */
} attn_tuned_entry;

typedef void (*attn_tuned_fn)(void *user, const attn_tuned_entry *e);

/* Parses text[0..len) (NUL bytes refused), `file` naming it in the messages, and calls
 * on_entry (may be NULL) for each of `kernel`'s configurations, in file order; each must give
 * every tunable of `spec` once, with one of its allowed values. Returns 0, or 1 with
 * "<file>:<line>: <what was expected>" in err (on_entry may have been called for the lines
 * before). */
int attn_tuned_parse(const char *text, size_t len, const char *file, const char *kernel,
                     const attn_tuned_spec *spec, attn_tuned_fn on_entry, void *user, char *err,
                     size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
