/* The autotuner's search over a kernel's configuration space (pure host code, unit-tested):
 * where to start (a Latin hypercube design), what to time next (a tree-structured Parzen
 * estimator) and which candidates go on to longer timings (successive halving).
 *
 * A space has n tunables; tunable i takes counts[i] values, named by their index
 * 0 .. counts[i]-1. A configuration is an array of n value indices, or its mixed-radix index
 * in [0, size): tunable 0 is the most significant digit, so index order is the lexicographic
 * order of the value arrays. `allowed` (a byte per index, nonzero = allowed; NULL = all) marks
 * the configurations the gates let through; losses are times, lower is better. */
#ifndef ATTN_TUNE_SEARCH_H
#define ATTN_TUNE_SEARCH_H

#include <stddef.h>
#include <stdint.h>
#include "harness.h" /* attn_rng; attn_abi.h: ATTN_TUNE_MAX_TUNABLES */

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_TUNE_MAX_SIZE ((size_t)1 << 24) /* the search keeps a byte per configuration */
#define ATTN_TUNE_NONE ((size_t)-1)

typedef struct {
    int n;
    int counts[ATTN_TUNE_MAX_TUNABLES];
} attn_tune_space;

/* The number of configurations (the product of counts); 0 when the space is invalid
 * (n not in 1 .. ATTN_TUNE_MAX_TUNABLES, a count < 1) or larger than ATTN_TUNE_MAX_SIZE.
 * Every function below returns nothing (0, ATTN_TUNE_NONE) for such a space. */
size_t attn_tune_space_size(const attn_tune_space *s);
/* index (< size) -> values[0 .. n-1]: value indices, as all the values arrays here. */
void attn_tune_decode(const attn_tune_space *s, size_t index, int *values);
/* values -> index; ATTN_TUNE_NONE when a value is out of range or the space is invalid. */
size_t attn_tune_encode(const attn_tune_space *s, const int *values);

/* A Latin hypercube design: m = min(n, allowed count) distinct allowed configurations,
 * written to out[], spread over every tunable's values. Each tunable's column cycles through
 * a seeded random permutation of its values, so each value appears floor(m/count) or
 * ceil(m/count) times, and is then shuffled, independently of the other tunables. A point
 * that is not allowed or was already chosen moves to an allowed, not-yet-chosen configuration:
 * one value away (else two) by swapping that value with another point of the design, where
 * it can, so the columns keep their counts; else the nearest one in Hamming distance, and
 * they may not (seen only in designs of more than half the space, or under a tight mask).
 * Ties are broken by the seeded RNG. Returns m. Deterministic for a seed; a point that no
 * swap places costs a pass over the space. */
int attn_tune_lhs(const attn_tune_space *s, const unsigned char *allowed, int n, uint64_t seed,
                  size_t *out);

/* The next configuration to time, by a tree-structured Parzen estimator for categorical
 * tunables (Bergstra et al. 2011; as Optuna's TPESampler does for categorical parameters,
 * each tunable independently). The trials (trial_index[t], trial_loss[t], t < n_trials;
 * indices out of range are ignored) split into the best ceil(gamma * trials) with a finite
 * loss ("good", at least one) and the rest; a failed trial (loss NaN or infinite) is never
 * good. Per tunable, l(v) and g(v) are the value frequencies in each group with one prior
 * count per value (Laplace smoothing). Of n_candidates (at least 1) configurations drawn from
 * l (a draw that is not allowed or was tried is redrawn; after 100 redraws, a uniformly random
 * allowed untried one is taken), returns the one maximising prod l(v) / g(v), the first on
 * ties. Tried = tried[index] nonzero (tried may be NULL) or among trial_index. Returns
 * ATTN_TUNE_NONE when every allowed configuration was tried (or memory ran out).
 * Deterministic for a given rng state, which it advances. Optuna's defaults: gamma 0.1 (at
 * most 25 good) and 24 candidates. */
size_t attn_tune_tpe_propose(const attn_tune_space *s, const unsigned char *allowed,
                             const unsigned char *tried, const size_t *trial_index,
                             const double *trial_loss, int n_trials, double gamma,
                             int n_candidates, attn_rng *rng);

/* Successive halving: of n candidates with losses from the current rung, writes to keep[] the
 * positions of the best ceil(n / eta) (eta < 1 is taken as 1), best first, ties by lower
 * position, and returns their count. A failed candidate (loss NaN or infinite) is never kept
 * (so fewer may be kept) unless all failed: then only the first (position 0) is. 0 for n < 1.
 * keep[] holds ceil(n / eta). */
int attn_tune_halving_keep(const double *loss, int n, int eta, int *keep);

#ifdef __cplusplus
}
#endif
#endif
