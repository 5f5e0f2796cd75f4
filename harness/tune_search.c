/* The autotuner's search (tune_search.h). Every choice comes from attn_rng (splitmix64),
 * seeded by the caller, so a tuning run can be replayed. Each call keeps a byte per
 * configuration: spaces are small (ATTN_TUNE_MAX_SIZE) next to what timing them costs. */
#include "tune_search.h"

#include <math.h>
#include <stdlib.h>

enum { TPE_REDRAWS = 100 };

size_t attn_tune_space_size(const attn_tune_space *s) {
    if (!s || s->n < 1 || s->n > ATTN_TUNE_MAX_TUNABLES) return 0;
    size_t size = 1;
    for (int i = 0; i < s->n; i++) {
        if (s->counts[i] < 1) return 0;
        size *= (size_t)s->counts[i]; /* at most 2^24 * INT_MAX before the check: no overflow */
        if (size > ATTN_TUNE_MAX_SIZE) return 0;
    }
    return size;
}

void attn_tune_decode(const attn_tune_space *s, size_t index, int *values) {
    for (int i = s->n - 1; i >= 0; i--) {
        values[i] = (int)(index % (size_t)s->counts[i]);
        index /= (size_t)s->counts[i];
    }
}

size_t attn_tune_encode(const attn_tune_space *s, const int *values) {
    if (!attn_tune_space_size(s)) return ATTN_TUNE_NONE;
    size_t index = 0;
    for (int i = 0; i < s->n; i++) {
        if (values[i] < 0 || values[i] >= s->counts[i]) return ATTN_TUNE_NONE;
        index = index * (size_t)s->counts[i] + (size_t)values[i];
    }
    return index;
}

/* The next configuration's values in index order (the last tunable turns fastest). */
static void step(const attn_tune_space *s, int *v) {
    for (int i = s->n - 1; i >= 0 && ++v[i] == s->counts[i]; i--) v[i] = 0;
}

/* Where tunable i's per-value entries start in a table of all tunables' values; the total. */
static size_t value_offsets(const attn_tune_space *s, size_t *off) {
    size_t total = 0;
    for (int i = 0; i < s->n; i++) off[i] = total, total += (size_t)s->counts[i];
    return total;
}

/* A value v < count drawn with probability weight[v] / (the weights' sum); weights >= 1. */
static int draw_weighted(const long *weight, int count, attn_rng *rng) {
    long sum = 0;
    for (int v = 0; v < count; v++) sum += weight[v];
    long k = (long)(attn_rng_u64(rng) % (uint64_t)sum);
    for (int v = 0; v < count - 1; v++)
        if ((k -= weight[v]) < 0) return v;
    return count - 1;
}

/* Reservoir choice among ties: the k-th equal candidate replaces the kept one with
 * probability 1/k, so each of them is kept with the same probability. */
static int take_tie(int *ties, attn_rng *rng) {
    return attn_rng_u64(rng) % (uint64_t)++*ties == 0;
}

/* Fisher-Yates over x[0], x[stride], ... x[(n - 1) * stride]. */
static void shuffle(int *x, int n, int stride, attn_rng *rng) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(attn_rng_u64(rng) % (uint64_t)(i + 1)), t = x[(size_t)i * stride];
        x[(size_t)i * stride] = x[(size_t)j * stride], x[(size_t)j * stride] = t;
    }
}

/* Whether configuration c may still join the design. */
static int is_free(const unsigned char *allowed, const unsigned char *taken, size_t c) {
    return (!allowed || allowed[c]) && !taken[c];
}

/* Configuration c with tunables a and b (a alone when b == a) changed from from[] to to[]. */
static size_t moved(size_t c, const size_t *stride, const int *from, const int *to, int a, int b) {
    c = c + (size_t)to[a] * stride[a] - (size_t)from[a] * stride[a];
    return b == a ? c : c + (size_t)to[b] * stride[b] - (size_t)from[b] * stride[b];
}

/* Puts design point j (values p, not free) on a free configuration. First by swapping the
 * values of one tunable, else of two, with another point k of the design, which keeps every
 * column's counts: point j moves by as few values as it can; a later k is checked when its
 * turn comes, an earlier one must stay free. Else the nearest free configuration (the counts
 * change). Ties by rng. Returns the configuration; p gets its values. */
static size_t replace_point(const attn_tune_space *s, size_t size, const unsigned char *allowed,
                            unsigned char *taken, const size_t *stride, int *col, int m, int j,
                            size_t *out, attn_rng *rng) {
    int n = s->n, *p = col + (size_t)j * n, ties = 0, best_k = -1, best_a = 0, best_b = 0;
    size_t at = attn_tune_encode(s, p), best = ATTN_TUNE_NONE, best_other = 0;
    for (int two = 0; two < 2 && best_k < 0; two++)
        for (int k = 0; k < m; k++) {
            const int *q = col + (size_t)k * n;
            for (int a = 0; k != j && a < n; a++)
                for (int b = two ? a + 1 : a; b < (two ? n : a + 1); b++) {
                    if (q[a] == p[a] || q[b] == p[b]) continue;
                    size_t c = moved(at, stride, p, q, a, b);
                    size_t other = k < j ? moved(out[k], stride, q, p, a, b) : 0;
                    if (!is_free(allowed, taken, c) || (k < j && !is_free(allowed, taken, other)) ||
                        !take_tie(&ties, rng))
                        continue;
                    best = c, best_k = k, best_a = a, best_b = b, best_other = other;
                }
        }
    if (best_k >= 0) {
        int *q = col + (size_t)best_k * n;
        for (int i = 0; i < n; i++)
            if (i == best_a || i == best_b) {
                int t = q[i];
                q[i] = p[i], p[i] = t;
            }
        if (best_k < j) taken[out[best_k]] = 0, taken[best_other] = 1, out[best_k] = best_other;
        return best;
    }
    int v[ATTN_TUNE_MAX_TUNABLES] = {0}, best_d = n + 1;
    ties = 0;
    for (size_t c = 0; c < size; c++, step(s, v)) {
        if (!is_free(allowed, taken, c)) continue;
        int d = 0;
        for (int i = 0; i < n; i++) d += v[i] != p[i];
        if (d < best_d) best = c, best_d = d, ties = 1;
        else if (d == best_d && take_tie(&ties, rng)) best = c;
    }
    attn_tune_decode(s, best, p);
    return best;
}

int attn_tune_lhs(const attn_tune_space *s, const unsigned char *allowed, int n, uint64_t seed,
                  size_t *out) {
    size_t size = attn_tune_space_size(s);
    if (!size || n < 1) return 0;
    size_t n_allowed = 0;
    for (size_t c = 0; c < size; c++) n_allowed += !allowed || allowed[c];
    int m = (size_t)n < n_allowed ? n : (int)n_allowed;
    if (!m) return 0;
    size_t off[ATTN_TUNE_MAX_TUNABLES], stride[ATTN_TUNE_MAX_TUNABLES];
    size_t n_values = value_offsets(s, off);
    stride[s->n - 1] = 1; /* what one step of tunable i adds to the index */
    for (int i = s->n - 2; i >= 0; i--) stride[i] = stride[i + 1] * (size_t)s->counts[i + 1];
    unsigned char *taken = calloc(size, 1);
    int *col = malloc(sizeof *col * (size_t)m * (size_t)s->n); /* point j's values at j * n */
    int *perm = malloc(sizeof *perm * n_values);
    if (!taken || !col || !perm) {
        m = 0;
        goto done;
    }
    attn_rng rng;
    attn_rng_init(&rng, seed);
    for (int i = 0; i < s->n; i++) {
        /* a column cycles through a shuffle of the values (the first m % count get the extra
         * use), then is shuffled itself, so the tunables pair up at random */
        int count = s->counts[i], *p = perm + off[i];
        for (int v = 0; v < count; v++) p[v] = v;
        shuffle(p, count, 1, &rng);
        for (int j = 0; j < m; j++) col[(size_t)j * s->n + i] = p[j % count];
        shuffle(col + i, m, s->n, &rng);
    }
    for (int j = 0; j < m; j++) {
        size_t c = attn_tune_encode(s, col + (size_t)j * s->n);
        if (!is_free(allowed, taken, c))
            c = replace_point(s, size, allowed, taken, stride, col, m, j, out, &rng);
        taken[c] = 1;
        out[j] = c;
    }
done:
    free(taken), free(col), free(perm);
    return m;
}

/* Writes the positions of the best (at most k) finite losses, best first, ties by lower
 * position; returns how many. Insertion into a list of k: n is a few hundred at most. */
static int best_finite(const double *loss, int n, int k, int *best) {
    int len = 0;
    for (int p = 0; p < n; p++) {
        if (!isfinite(loss[p]) || k < 1 || (len == k && !(loss[p] < loss[best[k - 1]]))) continue;
        int at = len < k ? len++ : k - 1;
        for (; at > 0 && loss[p] < loss[best[at - 1]]; at--) best[at] = best[at - 1];
        best[at] = p;
    }
    return len;
}

int attn_tune_halving_keep(const double *loss, int n, int eta, int *keep) {
    if (n < 1) return 0;
    if (eta < 1) eta = 1;
    int kept = best_finite(loss, n, (n + eta - 1) / eta, keep);
    if (kept) return kept;
    keep[0] = 0; /* all failed: one goes on, so the caller still has an answer */
    return 1;
}

size_t attn_tune_tpe_propose(const attn_tune_space *s, const unsigned char *allowed,
                             const unsigned char *tried, const size_t *trial_index,
                             const double *trial_loss, int n_trials, double gamma,
                             int n_candidates, attn_rng *rng) {
    size_t size = attn_tune_space_size(s), result = ATTN_TUNE_NONE;
    if (!size) return result;
    if (n_trials < 0) n_trials = 0;
    size_t off[ATTN_TUNE_MAX_TUNABLES], n_values = value_offsets(s, off);
    unsigned char *open = malloc(size), *good = calloc((size_t)n_trials + 1, 1);
    double *loss = malloc(sizeof *loss * ((size_t)n_trials + 1)), *score = malloc(sizeof *score * n_values);
    int *best = malloc(sizeof *best * ((size_t)n_trials + 1));
    long *l_count = malloc(sizeof *l_count * n_values), *g_count = malloc(sizeof *g_count * n_values);
    if (!open || !good || !loss || !score || !best || !l_count || !g_count) goto done;

    for (size_t c = 0; c < size; c++) open[c] = (!allowed || allowed[c]) && !(tried && tried[c]);
    int n_valid = 0;
    for (int t = 0; t < n_trials; t++) {
        int valid = trial_index[t] < size;
        if (valid) open[trial_index[t]] = 0;
        n_valid += valid;
        loss[t] = valid ? trial_loss[t] : NAN; /* never good, and not counted below */
    }
    size_t n_open = 0;
    for (size_t c = 0; c < size; c++) n_open += open[c];
    if (!n_open) goto done;

    /* the good group: ceil(gamma * trials), at least one, of those with a finite loss */
    double want = ceil(gamma * n_valid - 1e-9); /* 0.1 * 30 is 3, not 3.0000000000000004 */
    int n_good = n_valid == 0 ? 0 : !(want >= 1) ? 1 : want > n_valid ? n_valid : (int)want;
    n_good = best_finite(loss, n_trials, n_good, best);
    for (int k = 0; k < n_good; k++) good[best[k]] = 1;
    for (size_t k = 0; k < n_values; k++) l_count[k] = g_count[k] = 1; /* the prior */
    for (int t = 0; t < n_trials; t++) {
        if (trial_index[t] >= size) continue;
        int v[ATTN_TUNE_MAX_TUNABLES];
        attn_tune_decode(s, trial_index[t], v);
        for (int i = 0; i < s->n; i++) (good[t] ? l_count : g_count)[off[i] + v[i]]++;
    }
    for (int i = 0; i < s->n; i++)
        for (int v = 0; v < s->counts[i]; v++) {
            size_t k = off[i] + (size_t)v;
            score[k] = log((double)l_count[k] / (n_good + s->counts[i])) -
                       log((double)g_count[k] / (n_valid - n_good + s->counts[i]));
        }

    double best_score = -INFINITY;
    for (int cand = 0; cand < (n_candidates > 1 ? n_candidates : 1); cand++) {
        size_t c = ATTN_TUNE_NONE;
        int v[ATTN_TUNE_MAX_TUNABLES];
        for (int r = 0; r < TPE_REDRAWS && c == ATTN_TUNE_NONE; r++) {
            for (int i = 0; i < s->n; i++) v[i] = draw_weighted(l_count + off[i], s->counts[i], rng);
            c = attn_tune_encode(s, v);
            if (!open[c]) c = ATTN_TUNE_NONE;
        }
        if (c == ATTN_TUNE_NONE) { /* l puts little weight where the gates allow: uniform */
            size_t k = attn_rng_u64(rng) % n_open;
            for (c = 0;; c++)
                if (open[c] && k-- == 0) break;
            attn_tune_decode(s, c, v);
        }
        double sc = 0;
        for (int i = 0; i < s->n; i++) sc += score[off[i] + v[i]];
        if (result == ATTN_TUNE_NONE || sc > best_score) result = c, best_score = sc;
    }
done:
    free(open), free(good), free(loss), free(score), free(best), free(l_count), free(g_count);
    return result;
}
