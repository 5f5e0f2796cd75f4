#include "thresholds.h"

#include <ctype.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void attn_gpu_slug(const char *name, char *out, size_t outlen) {
    size_t n = 0;
    int gap = 0;
    for (const char *c = name; *c && n + 1 < outlen; c++) {
        if (isalnum((unsigned char)*c)) {
            if (gap && n) out[n++] = '_';
            if (n + 1 < outlen) out[n++] = (char)tolower((unsigned char)*c);
            gap = 0;
        } else {
            gap = 1;
        }
    }
    out[n] = 0;
}

enum { K_SPEEDUP_REF = 1, K_SPEEDUP_CUDNN = 2, K_ROOFLINE = 4 };
enum { P_FP16 = 1, P_BF16 = 2, P_BW = 4, P_NAME = 8 };

typedef struct {
    attn_thresholds *t;
    char *why;
    size_t whylen;
    unsigned peaks;
    char last_section[128];
    attn_threshold_class *cls;
} ctx;

static int number(ctx *c, const char *section, const char *key, const char *value, double *out) {
    char *end;
    double x = strtod(value, &end);
    while (isspace((unsigned char)*end)) end++;
    if (end == value || *end || !isfinite(x) || x <= 0) {
        snprintf(c->why, c->whylen, "[%s] %s: expected a positive number, got '%s'", section, key,
                 value);
        return 0;
    }
    *out = x;
    return 1;
}

static const char *const workload_names[ATTN_WORKLOAD_COUNT] = {"full", "causal", "decode", "varlen", "window"};

const char *attn_workload_name(int w) { return w >= 0 && w < ATTN_WORKLOAD_COUNT ? workload_names[w] : NULL; }

int attn_workload_parse(const char *s) {
    for (int w = 0; w < ATTN_WORKLOAD_COUNT; w++)
        if (!strcmp(s, workload_names[w])) return w;
    return -1;
}

/* "<kernel> <dtype|*> <d64|d128|*> <workload|*> <lo>-<hi> [q<lo>[-<hi>]]" */
static int parse_class(ctx *c, const char *section, attn_threshold_class *k) {
    char kernel[64], dt[16], d[16], mask[16], range[32], qrange[32], extra[2];
    int n = sscanf(section, "%63s %15s %15s %15s %31s %31s %1s", kernel, dt, d, mask, range, qrange, extra);
    const char *want = "expected [<kernel> <fp16|bf16|*> <d64|d128|*> <full|causal|decode|varlen|window|*> <lo>-<hi> "
                       "[q<lo>[-<hi>]]]";
    if (n != 5 && n != 6) goto bad;
    memset(k, 0, sizeof *k);
    snprintf(k->kernel, sizeof k->kernel, "%s", kernel);
    snprintf(k->section, sizeof k->section, "%s", section);
    k->min_speedup_reference = k->min_speedup_cudnn = NAN;
    k->dtype = !strcmp(dt, "*") ? -1 : !strcmp(dt, "fp16") ? ATTN_F16 : !strcmp(dt, "bf16") ? ATTN_BF16 : -2;
    if (k->dtype == -2) goto bad;
    if (!strcmp(d, "*")) k->head_dim = 0;
    else if (sscanf(d, "d%d", &k->head_dim) != 1 || k->head_dim <= 0) goto bad;
    k->workload = !strcmp(mask, "*") ? -1 : attn_workload_parse(mask);
    if (k->workload == -1 && strcmp(mask, "*")) goto bad;
    if (sscanf(range, "%d-%d%1s", &k->s_lo, &k->s_hi, extra) != 2 || k->s_lo < 1 || k->s_hi < k->s_lo) goto bad;
    k->q_lo = 0, k->q_hi = INT_MAX;
    if (n == 6) {
        int m = sscanf(qrange, "q%d-%d%1s", &k->q_lo, &k->q_hi, extra);
        if (m == 1) k->q_hi = k->q_lo;
        if ((m != 1 && m != 2) || k->q_lo < 1 || k->q_hi < k->q_lo) goto bad;
    }
    return 1;
bad:
    snprintf(c->why, c->whylen, "section [%s]: %s", section, want);
    return 0;
}

static int handler(void *user, const char *section, const char *key, const char *value) {
    ctx *c = user;
    attn_thresholds *t = c->t;
    if (!strcmp(section, "gpu")) {
        if (strcmp(key, "name")) goto unknown;
        snprintf(t->gpu_name, sizeof t->gpu_name, "%s", value);
        c->peaks |= P_NAME;
        return 1;
    }
    if (!strcmp(section, "peaks")) {
        if (!strcmp(key, "fp16_tflops")) return c->peaks |= P_FP16, number(c, section, key, value, &t->fp16_tflops);
        if (!strcmp(key, "bf16_tflops")) return c->peaks |= P_BF16, number(c, section, key, value, &t->bf16_tflops);
        if (!strcmp(key, "bandwidth_gbs")) return c->peaks |= P_BW, number(c, section, key, value, &t->bandwidth_gbs);
        goto unknown;
    }
    if (strcmp(section, c->last_section) || !c->cls) { /* a new class section */
        if (t->nclasses == t->capacity) {
            int cap = t->capacity ? 2 * t->capacity : 64;
            attn_threshold_class *grown = realloc(t->classes, (size_t)cap * sizeof *grown);
            if (!grown) {
                snprintf(c->why, c->whylen, "out of memory at %d class sections", t->nclasses);
                return 0;
            }
            t->classes = grown, t->capacity = cap;
        }
        c->cls = &t->classes[t->nclasses++];
        memset(c->cls, 0, sizeof *c->cls);
        snprintf(c->last_section, sizeof c->last_section, "%s", section);
        if (!parse_class(c, section, c->cls)) return 0;
    }
    attn_threshold_class *k = c->cls;
    if (!strcmp(key, "min_speedup_reference")) return k->seen |= K_SPEEDUP_REF, number(c, section, key, value, &k->min_speedup_reference);
    if (!strcmp(key, "min_speedup_cudnn")) return k->seen |= K_SPEEDUP_CUDNN, number(c, section, key, value, &k->min_speedup_cudnn);
    if (!strcmp(key, "min_roofline")) {
        k->seen |= K_ROOFLINE;
        if (!number(c, section, key, value, &k->min_roofline)) return 0;
        if (k->min_roofline > 1) {
            snprintf(c->why, c->whylen, "[%s] min_roofline: expected a fraction in (0, 1], got '%s'", section, value);
            return 0;
        }
        return 1;
    }
unknown:
    snprintf(c->why, c->whylen, "unknown key '%s' in section [%s]", key, section);
    return 0;
}

void attn_thresholds_free(attn_thresholds *t) {
    free(t->classes);
    t->classes = NULL, t->nclasses = t->capacity = 0;
}

static int load(const char *path, attn_thresholds *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    char why[512] = "";
    ctx c = {.t = t, .why = why, .whylen = sizeof why};
    int rc = ini_parse(path, handler, &c);
    if (rc == -1) {
        snprintf(err, errlen, "%s: cannot open thresholds file", path);
        return 1;
    }
    if (rc > 0) {
        snprintf(err, errlen, "%s:%d: %s", path, rc,
                 why[0] ? why : "expected '[section]', 'key = value' or a comment");
        return 1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot parse (ini_parse returned %d)", path, rc);
        return 1;
    }
    static const struct { unsigned bit; const char *what; } need[] = {
        {P_NAME, "'name' in [gpu]"}, {P_FP16, "peak 'fp16_tflops' in [peaks]"},
        {P_BF16, "peak 'bf16_tflops' in [peaks]"}, {P_BW, "peak 'bandwidth_gbs' in [peaks]"}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!(c.peaks & need[i].bit)) {
            snprintf(err, errlen, "%s: missing %s (a missing peak is an error, not a zero)", path, need[i].what);
            return 1;
        }
    for (int i = 0; i < t->nclasses; i++) {
        unsigned s = t->classes[i].seen;
        const int w = t->classes[i].workload; /* the cuBLAS baseline runs the dense workloads only */
        const int has_reference = w == -1 || w == ATTN_WORKLOAD_FULL || w == ATTN_WORKLOAD_CAUSAL;
        const char *missing = has_reference && !(s & K_SPEEDUP_REF) ? "min_speedup_reference"
                            : !(s & K_ROOFLINE)                     ? "min_roofline"
                                                                    : NULL;
        if (missing) {
            attn_threshold_class *k = &t->classes[i];
            snprintf(err, errlen, "%s: section [%s] lacks %s", path, k->section, missing);
            return 1;
        }
    }
    return 0;
}

int attn_thresholds_load(const char *path, attn_thresholds *t, char *err, size_t errlen) {
    int rc = load(path, t, err, errlen);
    if (rc) attn_thresholds_free(t); /* nothing half-loaded */
    return rc;
}

const attn_threshold_class *attn_thresholds_find(const attn_thresholds *t, const char *kernel,
                                                 attn_dtype dtype, int head_dim, int workload,
                                                 int seqlen, int seqlen_q) {
    for (int i = 0; i < t->nclasses; i++) {
        const attn_threshold_class *k = &t->classes[i];
        if (strcmp(k->kernel, kernel)) continue;
        if (k->dtype != -1 && k->dtype != (int)dtype) continue;
        if (k->head_dim && k->head_dim != head_dim) continue;
        if (k->workload != -1 && k->workload != workload) continue;
        if (seqlen < k->s_lo || seqlen > k->s_hi) continue;
        if (seqlen_q < k->q_lo || seqlen_q > k->q_hi) continue;
        return k;
    }
    return NULL;
}
