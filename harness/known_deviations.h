/* Known deviations of kernels we do not own (python/kernels/known_deviations.txt): a case of
 * such a kernel that fails only checks an entry names is reported as a known deviation, with
 * the entry's reason, instead of failing its test; any other failure of the same case still
 * fails it. The harness refuses entries for the built-in kernels (main.c): ours are fixed,
 * not excused.
 *
 * A line: <kernel> <case> <checks> <why...>; '#' starts a comment. <case> is a glob (fnmatch,
 * '*' crossing '/') of the case's label as attn_correctness prints it (fp16/d64/causal/q512k127);
 * <checks> is a comma-separated list of check names, or '*' for any. Host-only C. */
#ifndef ATTN_KNOWN_DEVIATIONS_H
#define ATTN_KNOWN_DEVIATIONS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { ATTN_DEVIATION_WORD = 512, ATTN_DEVIATION_WHY = 512 };

typedef struct {
    char kernel[128], cases[ATTN_DEVIATION_WORD], checks[ATTN_DEVIATION_WORD], why[ATTN_DEVIATION_WHY];
    int line;
} attn_deviation;

typedef struct {
    attn_deviation *v;
    int n;
} attn_deviations;

/* The file's entries into *d (free with attn_deviations_free); 0, or 1 with "<file>:<line>:
 * <what>" in err (a missing field, a word too long, a check list with an empty name). */
int attn_deviations_load(const char *path, attn_deviations *d, char *err, size_t errlen);
void attn_deviations_free(attn_deviations *d);

/* The first entry of `kernel` whose glob matches `label` and whose checks include every one
 * in `failed` (comma-separated, non-empty); NULL if none does. */
const attn_deviation *attn_deviation_find(const attn_deviations *d, const char *kernel, const char *label,
                                          const char *failed);

/* The first entry of `kernel` naming exactly `label` (no wildcard): a case that passed while
 * such an entry expects it to fail (the deviation may be fixed upstream); NULL if none. */
const attn_deviation *attn_deviation_exact(const attn_deviations *d, const char *kernel, const char *label);

#ifdef __cplusplus
}
#endif
#endif
