/* Sample statistics for the benchmarks (pure host code, unit-tested). */
#ifndef ATTN_STATS_H
#define ATTN_STATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

double attn_median(const double *x, size_t n);     /* x is not modified */
double attn_min(const double *x, size_t n);
double attn_rsd(const double *x, size_t n);        /* sample std / mean; 0 for n < 2 */
/* 95 % bootstrap confidence interval of the median (percentile method, `reps` resamples,
 * deterministic for a given seed). */
void attn_bootstrap_median_ci(const double *x, size_t n, int reps, uint64_t seed, double *lo,
                              double *hi);

#ifdef __cplusplus
}
#endif
#endif
