/* attn_tune's phase 3 for one class (dtype, head dim, mask, seqlen of the benchmark matrix):
 * the search over the correct configurations, successive halving, the winner confirmed
 * against the default, and the class's JSON and tuned line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results.h"
#include "tune.h"

/* one configuration's call, for the timer */
typedef struct {
    const attn_tuning *tuning;
    const attn_fwd_params *p;
    int values[ATTN_TUNE_MAX_TUNABLES];
} run_ctx;
static int run_config_once(void *ctx, cudaStream_t s, char *err, size_t errlen) {
    const run_ctx *r = ctx;
    const int rc = r->tuning->fwd_config(r->p, r->values, s);
    if (rc != ATTN_OK) snprintf(err, errlen, "fwd_config returned %d", rc);
    return rc != ATTN_OK;
}

/* Successive halving's rungs: each a longer timing than the last (rung 0 screens), by sample
 * count and time alone (no spread rule: a short kernel's spread would hold every rung to its
 * timeout; the medians' CIs carry the precision). The confirmation keeps the noise rule.
 * Warm-up 10 ms: the clocks are up after the first configuration. */
static const attn_timing_rules rungs[] = {{3, 0.005, 1e9, 0.5, 0.75, 0.01},
                                          {10, 0.03, 1e9, 1.0, 0.75, 0.01},
                                          {20, 0.1, 1e9, 2.0, 0.75, 0.01},
                                          {40, 0.2, 1e9, 3.0, 0.75, 0.01}};
static const attn_timing_rules confirm_rules = {40, 0.4, 0.01, 2.0, 0.75, 0.01};
#define N_RUNGS (int)(sizeof rungs / sizeof rungs[0])

/* Times configuration `index` on p at rung r into *t, and records it; the median in ms, or
 * INFINITY when the call failed. */
static double time_config(tuner *tu, const attn_fwd_params *p, size_t index, int r, json_t *trials) {
    run_ctx c = {tu->tuning, p, {0}};
    config_values(tu, index, c.values);
    attn_timing t;
    char err[512];
    double ms = INFINITY;
    json_t *j = json_pack("{s:o, s:i}", "config", config_json(tu, index), "rung", r);
    if (attn_measure(tu->timer, run_config_once, &c, &rungs[r], &t, err, sizeof err)) {
        json_object_set_new(j, "error", json_string(err));
        cudaGetLastError();
    } else {
        ms = t.median_ms;
        json_object_set_new(j, "timing", attn_timing_json(&t));
    }
    json_array_append_new(trials, j);
    return ms;
}


/* One class's search: its benchmark shape and problem, the default, and the configurations
 * timed (pool, loss: n of them; at the last rung, the survivors). */
typedef struct {
    const shape_class *sc;
    const group *g;
    const char *mask;
    int batch, heads;
    char seed[160];
    attn_gpu_problem x;
    size_t def;
    unsigned char *allowed, *tried;
    size_t *pool;
    double *loss;
    int n, n_cand, rung;
    const char *method;
    json_t *trials;
} class_search;

/* The class's problem and its default configuration: 0 when the search can go on; else 1
 * with the reason (or that the class is untunable) in j. */
static int class_start(tuner *tu, class_search *cs, json_t *j) {
    const group *g = cs->g;
    char err[1024], cfg[256];
    snprintf(cs->seed, sizeof cs->seed, "tune/%s/%s/d%d/%s/s%d", tu->a.kernel_name, attn_dtype_name(g->dtype), g->d,
             cs->mask, cs->sc->seqlen);
    if (problem_make(tu, &cs->x, g->dtype, g->d, cs->batch, cs->heads, cs->sc->seqlen, cs->sc->seqlen, cs->sc->causal,
                     cs->seed, 0, err, sizeof err)) {
        printf("FAILED: %s\n", err);
        json_object_set_new(j, "error", json_string(err));
        return 1;
    }
    int dv[ATTN_TUNE_MAX_TUNABLES];
    if (tu->tuning->default_for(&cs->x.p, dv) != ATTN_OK) { /* e.g. flash2's packed heads at S <= 32 */
        printf("no tunable path for this class: the kernel runs it without tunables\n");
        json_object_set_new(j, "untunable", json_true());
        return 1;
    }
    const size_t def = cs->def = config_index(tu, dv);
    const config_state *states = tu->states[cs->sc->group];
    if (def == ATTN_TUNE_NONE || states[def].state != ST_PASSED) {
        snprintf(err, sizeof err, "the default configuration %s did not pass the gates and correctness: %s",
                 def == ATTN_TUNE_NONE ? "(values outside the tunables' lists)" : config_text(tu, def, cfg, sizeof cfg),
                 def == ATTN_TUNE_NONE ? "" : states[def].detail);
        printf("FAILED: %s\n", err);
        json_object_set_new(j, "error", json_string(err));
        return 1;
    }
    json_object_set_new(j, "default", config_json(tu, def));
    return 0;
}

/* Rung 0: every correct configuration when at most --exhaustive-max, else a Latin hypercube
 * design, then TPE's proposals, to --trials (and the default). */
static void search_rung0(tuner *tu, class_search *cs) {
    const size_t space_size = tu->space_size, def = cs->def;
    cs->allowed = calloc(space_size, 1), cs->tried = calloc(space_size, 1);
    cs->pool = malloc(space_size * sizeof *cs->pool);
    cs->loss = malloc(space_size * sizeof *cs->loss);
    unsigned char *allowed = cs->allowed, *tried = cs->tried;
    size_t *pool = cs->pool;
    double *loss = cs->loss;
    for (size_t i = 0; i < space_size; i++)
        if (tu->states[cs->sc->group][i].state == ST_PASSED) allowed[i] = 1, cs->n_cand++;
    const attn_fwd_params *p = &cs->x.p;
    int n = 0;
    if (cs->n_cand <= tu->a.exhaustive_max) { /* every correct configuration */
        cs->method = "exhaustive";
        for (size_t i = 0; i < space_size; i++)
            if (allowed[i]) pool[n] = i, loss[n] = time_config(tu, p, i, 0, cs->trials), n++;
    } else { /* a Latin hypercube design, then TPE's proposals, to --trials */
        cs->method = "lhs+tpe";
        attn_rng rng;
        attn_rng_init(&rng, tu->a.seed ^ attn_seed_from_name(cs->seed));
        const int n0 = tu->a.trials / 3 > 4 ? tu->a.trials / 3 : 4;
        size_t design[1024];
        const int nd = attn_tune_lhs(&tu->space, allowed, n0 < 1024 ? n0 : 1024, tu->a.seed, design);
        for (int k = 0; k < nd; k++)
            pool[n] = design[k], tried[design[k]] = 1, loss[n] = time_config(tu, p, design[k], 0, cs->trials), n++;
        while (n < tu->a.trials) {
            const size_t next = attn_tune_tpe_propose(&tu->space, allowed, tried, pool, loss, n, 0.25, 24, &rng);
            if (next == ATTN_TUNE_NONE) break;
            pool[n] = next, tried[next] = 1, loss[n] = time_config(tu, p, next, 0, cs->trials), n++;
        }
        if (!tried[def]) pool[n] = def, loss[n] = time_config(tu, p, def, 0, cs->trials), n++;
    }
    cs->n = n;
    printf("search: %s, %d of %d correct configurations timed at rung 0\n", cs->method, n, cs->n_cand);
}

/* Successive halving: a third goes on to each longer rung. */
static void search_halving(tuner *tu, class_search *cs) {
    int *keep = malloc((size_t)cs->n * sizeof *keep);
    size_t *next_pool = malloc((size_t)cs->n * sizeof *next_pool);
    while (cs->n > 1 && cs->rung + 1 < N_RUNGS) {
        const int m = attn_tune_halving_keep(cs->loss, cs->n, 3, keep);
        for (int k = 0; k < m; k++) next_pool[k] = cs->pool[keep[k]];
        cs->rung++;
        for (int k = 0; k < m; k++)
            cs->pool[k] = next_pool[k], cs->loss[k] = time_config(tu, &cs->x.p, cs->pool[k], cs->rung, cs->trials);
        cs->n = m;
    }
    free(keep), free(next_pool);
}

/* The winner timed interleaved with the default on the class's shape, then its output on that
 * shape checked: 1 when accepted; why says so either way. */
static int confirm(tuner *tu, class_search *cs, size_t win, json_t *j, char *why, size_t whylen) {
    char err[1024];
    run_ctx cw = {tu->tuning, &cs->x.p, {0}}, cd = {tu->tuning, &cs->x.p, {0}};
    config_values(tu, win, cw.values);
    config_values(tu, cs->def, cd.values);
    attn_timing tw, td;
    const int bad = attn_measure_pair(tu->timer, run_config_once, &cw, run_config_once, &cd, &confirm_rules, &tw, &td,
                                      err, sizeof err);
    const double speedup = bad ? 0 : td.median_ms / tw.median_ms;
    int ok = !bad && tw.ci_hi_ms <= (1.0 - ACCEPT_MARGIN) * td.ci_lo_ms;
    if (bad) snprintf(why, whylen, "confirmation failed: %.600s", err);
    else if (!ok)
        snprintf(why, whylen, "%.3fx: the winner's CI %.4g-%.4g ms does not lie %.0f %% under the default's "
                 "%.4g-%.4g ms", speedup, tw.ci_lo_ms, tw.ci_hi_ms, 100 * ACCEPT_MARGIN, td.ci_lo_ms, td.ci_hi_ms);
    else { /* right on this shape too */
        if (attn_gpu_problem_references(&cs->x, tu->ref, tu->stream, err, sizeof err))
            ok = 0, snprintf(why, whylen, "cannot verify on this shape: %.600s", err);
        else if (check_config(tu, &cs->x, cw.values, err, sizeof err))
            ok = 0, snprintf(why, whylen, "wrong on this shape: %.600s", err);
        else
            snprintf(why, whylen, "%.3fx: the winner's CI %.4g-%.4g ms, the default's %.4g-%.4g ms", speedup,
                     tw.ci_lo_ms, tw.ci_hi_ms, td.ci_lo_ms, td.ci_hi_ms);
    }
    if (!bad)
        json_object_set_new(j, "confirmation", json_pack("{s:o, s:o, s:f}", "winner", attn_timing_json(&tw),
                                                         "default", attn_timing_json(&td), "speedup", speedup));
    return ok;
}

/* The winner: kept as the default, or confirmed (accepted or not), into j and the line. */
static void decide(tuner *tu, class_search *cs, size_t win, double win_ms, json_t *j, char *line, size_t linelen) {
    const char *name = tu->a.kernel_name, *dt = attn_dtype_name(cs->g->dtype), *mask = cs->mask;
    const int d = cs->g->d, lo = cs->sc->lo, hi = cs->sc->hi;
    char cfg[256], cfg2[256];
    config_text(tu, win, cfg, sizeof cfg);
    config_text(tu, cs->def, cfg2, sizeof cfg2);
    if (win == cs->def || !isfinite(win_ms)) {
        printf("winner: the default (%s)\n", cfg2);
        snprintf(line, linelen, "# %s %s d%d %s %d-%d: default kept (%s): the search's best", name, dt, d, mask, lo,
                 hi, cfg2);
        json_object_set_new(j, "accepted", json_false());
        json_object_set_new(j, "why", json_string("the default was the search's best"));
        return;
    }
    char why[700];
    const int ok = confirm(tu, cs, win, j, why, sizeof why);
    printf("winner %s: %s: %s\n", cfg, ok ? "accepted" : "default kept", why);
    json_object_set_new(j, "accepted", json_boolean(ok));
    json_object_set_new(j, "why", json_string(why));
    if (ok)
        snprintf(line, linelen, "%s %s d%d %s %d-%d %s  # %s", name, dt, d, mask, lo, hi, cfg, why);
    else
        snprintf(line, linelen, "# %s %s d%d %s %d-%d: default kept (%s); best %s: %.400s", name, dt, d, mask, lo, hi,
                 cfg2, cfg, why);
}

/* One class: search, confirmation, its JSON; the tuned line when the winner was accepted
 * (line), else a comment (line). */
json_t *tune_class(tuner *tu, const shape_class *sc, char *line, size_t linelen) {
    const group *g = &tu->groups[sc->group];
    const int S = sc->seqlen;
    class_search cs = {.sc = sc, .g = g, .mask = sc->causal ? "causal" : "full",
                       .batch = tu->a.tokens / S > 0 ? tu->a.tokens / S : 1,
                       .heads = tu->a.hidden / g->d > 0 ? tu->a.hidden / g->d : 1};
    json_t *j = json_pack("{s:s, s:i, s:s, s:i, s:i, s:i, s:i, s:i}", "dtype", attn_dtype_name(g->dtype), "head_dim",
                          g->d, "mask", cs.mask, "seqlen", S, "lo", sc->lo, "hi", sc->hi, "batch", cs.batch, "heads",
                          cs.heads);
    line[0] = 0;
    printf("\n== %s %s d%d %s S=%d (class %d-%d, batch %d, %d heads)\n", tu->a.kernel_name, attn_dtype_name(g->dtype),
           g->d, cs.mask, S, sc->lo, sc->hi, cs.batch, cs.heads);
    if (class_start(tu, &cs, j)) {
        attn_gpu_problem_free(&cs.x);
        return j;
    }
    cs.trials = json_array();
    search_rung0(tu, &cs);
    search_halving(tu, &cs);
    int best = 0;
    for (int k = 1; k < cs.n; k++)
        if (cs.loss[k] < cs.loss[best]) best = k;
    const size_t win = cs.pool[best];
    json_object_set_new(j, "search", json_pack("{s:s, s:i, s:i, s:o}", "method", cs.method, "correct", cs.n_cand,
                                               "rungs", cs.rung + 1, "trials", cs.trials));
    json_object_set_new(j, "winner", config_json(tu, win));
    decide(tu, &cs, win, cs.loss[best], j, line, linelen);
    free(cs.allowed), free(cs.tried), free(cs.pool), free(cs.loss);
    attn_gpu_problem_free(&cs.x);
    return j;
}
