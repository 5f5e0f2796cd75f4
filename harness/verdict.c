#include "verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ini_file.h"

typedef struct {
    const char *section, *name;
    size_t offset;
} tol_key;

static const tol_key tol_keys[] = {
    {"output", "max_factor", offsetof(attn_tolerance, max_factor)},
    {"output", "atol_steps", offsetof(attn_tolerance, atol_steps)},
    {"output", "mean_factor", offsetof(attn_tolerance, mean_factor)},
    {"output", "mean_eps_steps", offsetof(attn_tolerance, mean_eps_steps)},
    {"lse", "atol", offsetof(attn_tolerance, lse_atol)},
    {"lse", "rtol", offsetof(attn_tolerance, lse_rtol)},
    {"gradients", "max_factor", offsetof(attn_tolerance, grad_max_factor)},
    {"gradients", "atol_steps", offsetof(attn_tolerance, grad_atol_steps)},
    {"gradients", "mean_factor", offsetof(attn_tolerance, grad_mean_factor)},
    {"gradients", "mean_eps_steps", offsetof(attn_tolerance, grad_mean_eps_steps)},
};
enum { N_TOL_KEYS = sizeof tol_keys / sizeof tol_keys[0] };

typedef struct {
    attn_tolerance *t;
    int seen[N_TOL_KEYS];
} tol_ctx;

static int tol_handler(void *user, const char *section, const char *name, const char *value, char *why,
                       size_t whylen) {
    tol_ctx *c = user;
    for (int i = 0; i < N_TOL_KEYS; i++) {
        if (strcmp(section, tol_keys[i].section) || strcmp(name, tol_keys[i].name)) continue;
        char *end;
        double x = strtod(value, &end);
        while (*end == ' ' || *end == '\t') end++;
        if (end == value || *end || !isfinite(x) || x < 0 || signbit(x)) {
            snprintf(why, whylen, "[%s] %s: expected a non-negative number, got '%s'", section, name, value);
            return 0;
        }
        *(double *)((char *)c->t + tol_keys[i].offset) = x;
        c->seen[i] = 1;
        return 1;
    }
    snprintf(why, whylen, "unknown key '%s' in section [%s]", name, section);
    return 0;
}

/* From the file at path (text NULL) or from text[0..len). */
static int tol_load(const char *path, const char *text, size_t len, attn_tolerance *t, char *err, size_t errlen) {
    tol_ctx c = {.t = t};
    memset(t, 0, sizeof *t);
    if (text ? attn_ini_parse(text, len, path, tol_handler, &c, err, errlen)
             : attn_ini_load(path, "tolerance file", tol_handler, &c, err, errlen))
        return 1;
    for (int i = 0; i < N_TOL_KEYS; i++) {
        if (!c.seen[i]) {
            snprintf(err, errlen, "%s: missing key '%s' in section [%s]", path, tol_keys[i].name,
                     tol_keys[i].section);
            return 1;
        }
    }
    return 0;
}

attn_tolerance attn_tolerance_for_gradients(const attn_tolerance *t) {
    attn_tolerance g = *t;
    g.max_factor = t->grad_max_factor, g.atol_steps = t->grad_atol_steps;
    g.mean_factor = t->grad_mean_factor, g.mean_eps_steps = t->grad_mean_eps_steps;
    return g;
}

int attn_tolerance_load(const char *path, attn_tolerance *t, char *err, size_t errlen) {
    return tol_load(path, NULL, 0, t, err, errlen);
}

int attn_tolerance_parse(const char *text, size_t len, const char *file, attn_tolerance *t, char *err, size_t errlen) {
    return tol_load(file, text, len, t, err, errlen);
}

double attn_dtype_step(attn_dtype dtype, double x) {
    int mant = dtype == ATTN_BF16 ? 7 : 10;
    x = fabs(x);
    /* below the smallest normal, fp16's spacing is fixed; bf16 shares float32's range */
    double min_normal = dtype == ATTN_BF16 ? ldexp(1.0, -126) : ldexp(1.0, -14);
    if (!(x >= min_normal)) x = min_normal;
    int e;
    frexp(x, &e); /* x = f * 2^e, f in [0.5, 1): the binade is 2^(e-1) */
    return ldexp(1.0, e - 1 - mant);
}

const char *attn_rule_name(attn_rule r) {
    switch (r) {
    case ATTN_RULE_PASS: return "pass";
    case ATTN_RULE_NONFINITE: return "non-finite output where the reference is finite";
    case ATTN_RULE_EMPTY_ROW: return "a row that sees no key is not exactly zero";
    case ATTN_RULE_MAX: return "max|O-G| above bound";
    case ATTN_RULE_MEAN: return "mean|O-G| above bound";
    }
    return "?";
}

void attn_output_decide(const attn_output_stats *st, attn_dtype dtype, const attn_tolerance *t,
                        attn_output_verdict *v) {
    memset(v, 0, sizeof *v);
    v->max_err = st->max_err;
    v->worst = st->worst;
    v->max_ref_err = st->max_ref_err;
    v->mean_err = st->counted ? st->sum_err / st->counted : 0;
    v->mean_ref_err = st->counted ? st->sum_ref_err / st->counted : 0;
    v->step = attn_dtype_step(dtype, st->max_abs_g);
    v->atol = t->atol_steps * v->step;
    v->max_bound = t->max_factor * v->max_ref_err + v->atol;
    v->mean_bound = t->mean_factor * v->mean_ref_err + t->mean_eps_steps * v->step;
    if (st->nonfinite) {
        v->rule = ATTN_RULE_NONFINITE;
        v->worst = st->first_nonfinite;
        v->bad_count = st->nonfinite;
    } else if (st->empty_nonzero) {
        v->rule = ATTN_RULE_EMPTY_ROW;
        v->worst = st->first_empty_nonzero;
        v->bad_count = st->empty_nonzero;
    } else if (v->max_err > v->max_bound) {
        v->rule = ATTN_RULE_MAX;
    } else if (v->mean_err > v->mean_bound) {
        v->rule = ATTN_RULE_MEAN;
    }
}

void attn_judge_output(const float *o, const float *g, const float *r, size_t rows,
                       int head_dim, const unsigned char *row_empty, attn_dtype dtype,
                       const attn_tolerance *t, attn_output_verdict *v) {
    attn_output_stats st = {0};
    size_t n = rows * (size_t)head_dim;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(g[i]) && !isfinite(o[i])) { /* excluded from the error sums */
            if (!st.nonfinite++) st.first_nonfinite = i;
            continue;
        }
        if (row_empty && row_empty[i / (size_t)head_dim] && o[i] != 0.0f) {
            if (!st.empty_nonzero++) st.first_empty_nonzero = i;
        }
        double e = fabs((double)o[i] - g[i]), er = fabs((double)r[i] - g[i]);
        if (e > st.max_err) {
            st.max_err = e;
            st.worst = i;
        }
        if (er > st.max_ref_err) st.max_ref_err = er;
        if (fabs(g[i]) > st.max_abs_g) st.max_abs_g = fabs(g[i]);
        st.sum_err += e;
        st.sum_ref_err += er;
    }
    st.counted = n - st.nonfinite;
    attn_output_decide(&st, dtype, t, v);
}

void attn_judge_lse(const float *lse, const float *g, size_t rows, const attn_tolerance *t,
                    attn_lse_verdict *v) {
    memset(v, 0, sizeof *v);
    double worst_margin = -INFINITY; /* largest e - bound seen: the row nearest to failing */
    size_t first_bad = rows;
    for (size_t i = 0; i < rows; i++) {
        int bad;
        if (isinf(g[i]) && g[i] < 0) {
            bad = !(isinf(lse[i]) && lse[i] < 0);
        } else {
            double bound = t->lse_atol + t->lse_rtol * fabs(g[i]);
            double e = fabs((double)lse[i] - g[i]);
            bad = !(e <= bound); /* NaN fails too */
            if (isfinite(e) && e - bound > worst_margin) {
                worst_margin = e - bound;
                v->max_err = e;
                v->bound = bound;
                v->worst = i;
            }
        }
        if (bad && !v->bad_count++) first_bad = i;
    }
    if (v->bad_count) v->worst = first_bad;
    v->ok = v->bad_count == 0;
}
