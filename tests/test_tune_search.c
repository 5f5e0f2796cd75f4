/* The autotuner's search (harness/tune_search.c): the index space, the Latin hypercube
 * start, TPE proposals on a synthetic objective against random search, successive halving. */
#include "unit.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune_search.h"

static const attn_tune_space small = {3, {2, 3, 4}}; /* 24 configurations */

START_TEST(space_index_round_trip) {
    ck_assert_uint_eq(attn_tune_space_size(&small), 24);
    int v[ATTN_TUNE_MAX_TUNABLES];
    for (size_t i = 0; i < 24; i++) {
        attn_tune_decode(&small, i, v);
        for (int t = 0; t < 3; t++) ck_assert(v[t] >= 0 && v[t] < small.counts[t]);
        ck_assert_uint_eq(attn_tune_encode(&small, v), i);
    }
    attn_tune_decode(&small, 1, v); /* the last tunable turns fastest */
    ck_assert(v[0] == 0 && v[1] == 0 && v[2] == 1);
    attn_tune_decode(&small, 4, v);
    ck_assert(v[0] == 0 && v[1] == 1 && v[2] == 0);
    attn_tune_decode(&small, 23, v);
    ck_assert(v[0] == 1 && v[1] == 2 && v[2] == 3);
    const int out_of_range[] = {0, 3, 0}, negative[] = {-1, 0, 0};
    ck_assert_uint_eq(attn_tune_encode(&small, out_of_range), ATTN_TUNE_NONE);
    ck_assert_uint_eq(attn_tune_encode(&small, negative), ATTN_TUNE_NONE);

    const attn_tune_space none = {0, {0}}, too_many = {13, {2}}, zero = {3, {2, 0, 4}},
                          minus = {2, {-2, -3}}, huge = {3, {4096, 4096, 2}}, largest = {2, {4096, 4096}},
                          twelve = {12, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3}};
    ck_assert_uint_eq(attn_tune_space_size(&none), 0);
    ck_assert_uint_eq(attn_tune_space_size(&too_many), 0);
    ck_assert_uint_eq(attn_tune_space_size(&zero), 0);
    ck_assert_uint_eq(attn_tune_space_size(&minus), 0); /* a product of negatives is no size */
    ck_assert_uint_eq(attn_tune_space_size(&huge), 0);
    ck_assert_uint_eq(attn_tune_space_size(&largest), ATTN_TUNE_MAX_SIZE);
    ck_assert_uint_eq(attn_tune_space_size(&twelve), 3 << 11);
    ck_assert_uint_eq(attn_tune_encode(&zero, v), ATTN_TUNE_NONE);
    size_t out[4];
    ck_assert_int_eq(attn_tune_lhs(&huge, NULL, 4, 1, out), 0);
}
END_TEST

/* out[0 .. n-1] are distinct configurations, each allowed (mask NULL: all). */
static void expect_distinct_allowed(const attn_tune_space *s, const size_t *out, int n,
                                    const unsigned char *allowed) {
    size_t size = attn_tune_space_size(s);
    unsigned char *seen = calloc(size, 1);
    for (int j = 0; j < n; j++) {
        ck_assert_uint_lt(out[j], size);
        ck_assert_msg(!seen[out[j]], "configuration %zu chosen twice", out[j]);
        ck_assert_msg(!allowed || allowed[out[j]], "configuration %zu is not allowed", out[j]);
        seen[out[j]] = 1;
    }
    free(seen);
}

/* Each tunable's values appear floor(n / count) or ceil(n / count) times in the design. */
static void expect_balanced(const attn_tune_space *s, const size_t *out, int n) {
    for (int t = 0; t < s->n; t++) {
        int uses[64] = {0}, v[ATTN_TUNE_MAX_TUNABLES];
        for (int j = 0; j < n; j++) attn_tune_decode(s, out[j], v), uses[v[t]]++;
        for (int x = 0; x < s->counts[t]; x++)
            ck_assert_msg(uses[x] == n / s->counts[t] || uses[x] == (n + s->counts[t] - 1) / s->counts[t],
                          "tunable %d value %d used %d times in %d points", t, x, uses[x], n);
    }
}

START_TEST(lhs_balanced_and_distinct) {
    const attn_tune_space wide = {4, {3, 4, 5, 2}}; /* 120 */
    unsigned char all[120];
    memset(all, 1, sizeof all);
    for (uint64_t seed = 0; seed < 40; seed++) {
        size_t out[120];
        ck_assert_int_eq(attn_tune_lhs(&small, NULL, 12, seed, out), 12); /* lcm: exact thirds, quarters */
        expect_distinct_allowed(&small, out, 12, NULL);
        expect_balanced(&small, out, 12);
        ck_assert_int_eq(attn_tune_lhs(&small, all, 10, seed, out), 10);
        expect_distinct_allowed(&small, out, 10, NULL);
        expect_balanced(&small, out, 10);
        ck_assert_int_eq(attn_tune_lhs(&small, NULL, 24, seed, out), 24); /* the whole space */
        expect_distinct_allowed(&small, out, 24, NULL);
        ck_assert_int_eq(attn_tune_lhs(&wide, NULL, 60, seed, out), 60);
        expect_distinct_allowed(&wide, out, 60, NULL);
        expect_balanced(&wide, out, 60);
        ck_assert_int_eq(attn_tune_lhs(&wide, all, 17, seed, out), 17);
        expect_distinct_allowed(&wide, out, 17, NULL);
        expect_balanced(&wide, out, 17);
    }
}
END_TEST

START_TEST(lhs_respects_the_mask) {
    unsigned char allowed[24];
    int v[ATTN_TUNE_MAX_TUNABLES], n_allowed = 0;
    for (size_t i = 0; i < 24; i++) { /* a checkerboard: half the space */
        attn_tune_decode(&small, i, v);
        allowed[i] = (v[0] + v[1] + v[2]) % 2 == 0;
        n_allowed += allowed[i];
    }
    ck_assert_int_eq(n_allowed, 12);
    for (uint64_t seed = 0; seed < 20; seed++) {
        size_t out[64];
        ck_assert_int_eq(attn_tune_lhs(&small, allowed, 8, seed, out), 8);
        expect_distinct_allowed(&small, out, 8, allowed);
        ck_assert_int_eq(attn_tune_lhs(&small, allowed, 64, seed, out), 12); /* all that is allowed */
        expect_distinct_allowed(&small, out, 12, allowed);
    }
    unsigned char one[24] = {0};
    one[17] = 1;
    size_t out[4];
    ck_assert_int_eq(attn_tune_lhs(&small, one, 4, 3, out), 1);
    ck_assert_uint_eq(out[0], 17);
    memset(one, 0, sizeof one);
    ck_assert_int_eq(attn_tune_lhs(&small, one, 4, 3, out), 0);
    ck_assert_int_eq(attn_tune_lhs(&small, NULL, 0, 3, out), 0);
}
END_TEST

START_TEST(lhs_deterministic_per_seed) {
    const attn_tune_space wide = {4, {3, 4, 5, 2}};
    size_t a[20], b[20];
    ck_assert_int_eq(attn_tune_lhs(&wide, NULL, 20, 7, a), 20);
    ck_assert_int_eq(attn_tune_lhs(&wide, NULL, 20, 7, b), 20);
    ck_assert(!memcmp(a, b, sizeof a));
    ck_assert_int_eq(attn_tune_lhs(&wide, NULL, 20, 8, b), 20);
    ck_assert(memcmp(a, b, sizeof a));
}
END_TEST

/* ---- TPE on a synthetic objective ---- */

/* 192 configurations, with a gate that rejects 16 of them; the time is a sum of per-tunable
 * penalties with a unique optimum, as when each tunable has a best value of its own. */
static const attn_tune_space tpe_space = {6, {2, 2, 3, 2, 2, 4}};
static const int tpe_best[6] = {1, 0, 2, 1, 0, 3};

static double tpe_loss(size_t index) {
    static const double weight[6] = {0.30, 0.20, 0.25, 0.15, 0.35, 0.10};
    int v[ATTN_TUNE_MAX_TUNABLES];
    attn_tune_decode(&tpe_space, index, v);
    double loss = 1.0;
    for (int t = 0; t < 6; t++) loss += weight[t] * abs(v[t] - tpe_best[t]);
    return loss;
}

static void tpe_gate(unsigned char *allowed) {
    int v[ATTN_TUNE_MAX_TUNABLES];
    for (size_t i = 0; i < 192; i++) {
        attn_tune_decode(&tpe_space, i, v);
        allowed[i] = !(v[2] == 0 && v[5] == 0);
    }
}

enum { TPE_START = 12, TPE_TRIALS = 40, TPE_SEEDS = 20 };

/* One tuning run (LHS start, then TPE): whether it timed the optimum. Checks every proposal
 * as it goes. */
static int tpe_run(uint64_t seed, const unsigned char *allowed) {
    size_t index[TPE_TRIALS], optimum = attn_tune_encode(&tpe_space, tpe_best);
    double loss[TPE_TRIALS];
    unsigned char tried[192] = {0};
    int n = attn_tune_lhs(&tpe_space, allowed, TPE_START, seed, index);
    ck_assert_int_eq(n, TPE_START);
    attn_rng rng;
    attn_rng_init(&rng, seed);
    for (int t = 0; t < TPE_TRIALS; t++) {
        if (t >= TPE_START) {
            index[t] = attn_tune_tpe_propose(&tpe_space, allowed, tried, index, loss, t, 0.25, 24, &rng);
            ck_assert_uint_lt(index[t], 192);
            ck_assert_msg(allowed[index[t]], "proposed %zu, which the gate rejects", index[t]);
            ck_assert_msg(!tried[index[t]], "proposed %zu again", index[t]);
        }
        tried[index[t]] = 1;
        loss[t] = tpe_loss(index[t]);
    }
    return tried[optimum];
}

/* The same number of distinct allowed configurations, uniformly at random. */
static int random_run(uint64_t seed, const unsigned char *allowed) {
    size_t pool[192], optimum = attn_tune_encode(&tpe_space, tpe_best);
    int n = 0;
    for (size_t i = 0; i < 192; i++)
        if (allowed[i]) pool[n++] = i;
    attn_rng rng;
    attn_rng_init(&rng, seed);
    for (int t = 0; t < TPE_TRIALS; t++) { /* the first TPE_TRIALS of a Fisher-Yates shuffle */
        int j = t + (int)(attn_rng_u64(&rng) % (uint64_t)(n - t));
        size_t x = pool[t];
        pool[t] = pool[j], pool[j] = x;
        if (pool[t] == optimum) return 1;
    }
    return 0;
}

START_TEST(tpe_beats_random_search) {
    unsigned char allowed[192];
    tpe_gate(allowed);
    int tpe_hits = 0, random_hits = 0;
    for (uint64_t seed = 1; seed <= TPE_SEEDS; seed++) {
        tpe_hits += tpe_run(seed, allowed);
        random_hits += random_run(seed, allowed);
    }
    ck_assert_msg(tpe_hits >= 15, "TPE found the optimum in %d of %d runs", tpe_hits, TPE_SEEDS);
    ck_assert_msg(tpe_hits > random_hits, "TPE %d, random search %d of %d runs", tpe_hits,
                  random_hits, TPE_SEEDS);
}
END_TEST

/* Proposals until the allowed configurations run out: each allowed and new, then NONE. */
START_TEST(tpe_exhausts_the_allowed_space) {
    unsigned char allowed[24], tried[24] = {0};
    int v[ATTN_TUNE_MAX_TUNABLES], n_allowed = 0;
    for (size_t i = 0; i < 24; i++) {
        attn_tune_decode(&small, i, v);
        allowed[i] = v[2] != 1;
        n_allowed += allowed[i];
    }
    size_t index[24];
    double loss[24];
    attn_rng rng;
    attn_rng_init(&rng, 5);
    for (int t = 0; t < n_allowed; t++) { /* tried NULL: the trials alone say what was tried */
        index[t] = attn_tune_tpe_propose(&small, allowed, NULL, index, loss, t, 0.25, 8, &rng);
        ck_assert_uint_lt(index[t], 24);
        ck_assert(allowed[index[t]] && !tried[index[t]]);
        tried[index[t]] = 1;
        loss[t] = t % 3 ? (double)index[t] : NAN; /* failed trials among them */
    }
    ck_assert_uint_eq(attn_tune_tpe_propose(&small, allowed, NULL, index, loss, n_allowed, 0.25, 8, &rng),
                      ATTN_TUNE_NONE);
    ck_assert_uint_eq(attn_tune_tpe_propose(&small, allowed, tried, NULL, NULL, 0, 0.25, 8, &rng),
                      ATTN_TUNE_NONE);
    /* with no trials: an allowed one; with nothing allowed: none */
    size_t first = attn_tune_tpe_propose(&small, allowed, NULL, NULL, NULL, 0, 0.25, 8, &rng);
    ck_assert(first < 24 && allowed[first]);
    memset(allowed, 0, sizeof allowed);
    ck_assert_uint_eq(attn_tune_tpe_propose(&small, allowed, NULL, NULL, NULL, 0, 0.25, 8, &rng),
                      ATTN_TUNE_NONE);
    /* the same rng state gives the same proposal */
    attn_rng a, b;
    attn_rng_init(&a, 11), attn_rng_init(&b, 11);
    size_t x = attn_tune_tpe_propose(&small, NULL, NULL, index, loss, 6, 0.25, 8, &a);
    ck_assert_uint_eq(x, attn_tune_tpe_propose(&small, NULL, NULL, index, loss, 6, 0.25, 8, &b));
}
END_TEST

/* A single allowed configuration far from where l puts its weight: the uniform fallback. */
START_TEST(tpe_falls_back_when_l_misses) {
    unsigned char allowed[192] = {0};
    allowed[191] = 1;
    size_t index[8];
    double loss[8];
    for (int t = 0; t < 8; t++) index[t] = (size_t)t, loss[t] = t; /* good: all-zero values */
    attn_rng rng;
    attn_rng_init(&rng, 2);
    ck_assert_uint_eq(attn_tune_tpe_propose(&tpe_space, allowed, NULL, index, loss, 8, 0.25, 4, &rng), 191);
}
END_TEST

START_TEST(halving_keeps_the_best) {
    const double loss[] = {5, 1, 3, 1, NAN, INFINITY, 2};
    int keep[7];
    ck_assert_int_eq(attn_tune_halving_keep(loss, 7, 2, keep), 4); /* ceil(7 / 2) */
    ck_assert(keep[0] == 1 && keep[1] == 3 && keep[2] == 6 && keep[3] == 2); /* ties: lower first */
    ck_assert_int_eq(attn_tune_halving_keep(loss, 7, 3, keep), 3);
    ck_assert(keep[0] == 1 && keep[1] == 3 && keep[2] == 6);
    ck_assert_int_eq(attn_tune_halving_keep(loss, 7, 100, keep), 1);
    ck_assert_int_eq(keep[0], 1);
    ck_assert_int_eq(attn_tune_halving_keep(loss, 7, 1, keep), 5); /* failed ones never kept */
    ck_assert(keep[0] == 1 && keep[1] == 3 && keep[2] == 6 && keep[3] == 2 && keep[4] == 0);
    ck_assert_int_eq(attn_tune_halving_keep(loss, 7, 0, keep), 5); /* eta 0 is 1 */

    const double failed[] = {NAN, INFINITY, -INFINITY, NAN};
    keep[0] = -1;
    ck_assert_int_eq(attn_tune_halving_keep(failed, 4, 2, keep), 1);
    ck_assert_int_eq(keep[0], 0);
    const double one_left[] = {NAN, 4, INFINITY, NAN};
    ck_assert_int_eq(attn_tune_halving_keep(one_left, 4, 2, keep), 1);
    ck_assert_int_eq(keep[0], 1);
    const double equal[] = {2, 2, 2, 2, 2};
    ck_assert_int_eq(attn_tune_halving_keep(equal, 5, 2, keep), 3);
    ck_assert(keep[0] == 0 && keep[1] == 1 && keep[2] == 2);
    ck_assert_int_eq(attn_tune_halving_keep(equal, 0, 2, keep), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("tune_search");
    TCase *tc = tcase_create("search");
    tcase_add_test(tc, space_index_round_trip);
    tcase_add_test(tc, lhs_balanced_and_distinct);
    tcase_add_test(tc, lhs_respects_the_mask);
    tcase_add_test(tc, lhs_deterministic_per_seed);
    tcase_add_test(tc, tpe_beats_random_search);
    tcase_add_test(tc, tpe_exhausts_the_allowed_space);
    tcase_add_test(tc, tpe_falls_back_when_l_misses);
    tcase_add_test(tc, halving_keeps_the_best);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
