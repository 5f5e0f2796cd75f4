#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_sorted(const double *s, size_t n) {
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

double attn_median(const double *x, size_t n) {
    if (!n) return NAN;
    double *s = malloc(n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    double m = median_sorted(s, n);
    free(s);
    return m;
}

double attn_min(const double *x, size_t n) {
    double m = INFINITY;
    for (size_t i = 0; i < n; i++) m = x[i] < m ? x[i] : m;
    return n ? m : NAN;
}

double attn_rsd(const double *x, size_t n) {
    if (n < 2) return 0;
    double mean = 0, ss = 0;
    for (size_t i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (size_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    return sqrt(ss / (n - 1)) / mean;
}

static uint64_t next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void attn_bootstrap_median_ci(const double *x, size_t n, int reps, uint64_t seed, double *lo,
                              double *hi) {
    *lo = *hi = NAN;
    if (!n || reps < 2) return;
    double *sample = malloc(n * sizeof *sample), *medians = malloc((size_t)reps * sizeof *medians);
    if (!sample || !medians) {
        free(sample), free(medians);
        return;
    }
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < n; i++) sample[i] = x[next(&seed) % n];
        qsort(sample, n, sizeof *sample, cmp_double);
        medians[r] = median_sorted(sample, n);
    }
    qsort(medians, (size_t)reps, sizeof *medians, cmp_double);
    *lo = medians[(size_t)floor(0.025 * (reps - 1))];
    *hi = medians[(size_t)ceil(0.975 * (reps - 1))];
    free(sample);
    free(medians);
}
