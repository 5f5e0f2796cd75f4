#include "thresholds.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ini_file.h"

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

static const char *const pass_names[ATTN_PASS_COUNT] = {"fwd", "bwd", "fwd_bwd"};

const char *attn_pass_name(int pass) { return pass >= 0 && pass < ATTN_PASS_COUNT ? pass_names[pass] : NULL; }

int attn_pass_parse(const char *s) {
    for (int p = 0; p < ATTN_PASS_COUNT; p++)
        if (!strcmp(s, pass_names[p])) return p;
    return -1;
}

/* The decimal integer at *s (digits only: no sign, no space) into *out, *s moved past it:
 * 1, 0 when there is none, -1 when it does not fit in an int. */
static int int_at(const char **s, int *out) {
    if (!isdigit((unsigned char)**s)) return 0;
    char *end;
    errno = 0;
    long v = strtol(*s, &end, 10);
    int fits = errno != ERANGE && v <= INT_MAX;
    for (*s = end; isdigit((unsigned char)**s); (*s)++) {}
    if (!fits) return -1;
    *out = (int)v;
    return 1;
}

/* "<lo>-<hi>" (or "<lo>" alone when `single`) after `prefix`: 1, 0 when malformed, -1 when a
 * number does not fit in an int. */
static int int_range(const char *w, const char *prefix, int single, int *lo, int *hi) {
    size_t n = strlen(prefix);
    if (strncmp(w, prefix, n)) return 0;
    w += n;
    int r = int_at(&w, lo);
    if (r <= 0) return r;
    if (!*w && single) return *hi = *lo, 1;
    if (*w++ != '-') return 0;
    r = int_at(&w, hi);
    return r <= 0 ? r : *w ? 0 : 1;
}

/* "<kernel> [fwd|bwd|fwd_bwd] <dtype|*> <d64|d128|*> <workload|*> <lo>-<hi> [q<lo>[-<hi>]]",
 * each number a positive int; without the pass word the class is fwd's (no dtype is a pass's
 * name, so the second word tells which) */
static int parse_class(ctx *c, const char *section, attn_threshold_class *k) {
    char words[128], *all[8], **w = all;
    int n = 0, r = 1;
    snprintf(words, sizeof words, "%s", section); /* inih keeps at most ATTN_INI_MAX_SECTION */
    for (char *p = words; *p && n < 8;) {
        while (isspace((unsigned char)*p)) *p++ = 0;
        if (!*p) break;
        all[n++] = p;
        while (*p && !isspace((unsigned char)*p)) p++;
    }
    const char *want = "expected [<kernel> [fwd|bwd|fwd_bwd] <fp16|bf16|*> <d64|d128|*> "
                       "<full|causal|decode|varlen|window|*> <lo>-<hi> [q<lo>[-<hi>]]]";
    memset(k, 0, sizeof *k);
    if (n >= 2 && attn_pass_parse(all[1]) >= 0) { /* the pass word: the rest as without it */
        k->pass = attn_pass_parse(all[1]);
        all[1] = all[0], w = all + 1, n--;
    }
    if (n != 5 && n != 6) goto bad;
    snprintf(k->kernel, sizeof k->kernel, "%s", w[0]);
    snprintf(k->section, sizeof k->section, "%s", section);
    k->min_speedup_reference = k->min_speedup_cudnn = NAN;
    k->dtype = !strcmp(w[1], "*") ? -1 : !strcmp(w[1], "fp16") ? ATTN_F16 : !strcmp(w[1], "bf16") ? ATTN_BF16 : -2;
    if (k->dtype == -2) goto bad;
    const char *d = w[2];
    if (strcmp(d, "*") && (*d++ != 'd' || (r = int_at(&d, &k->head_dim)) <= 0 || *d || k->head_dim <= 0)) goto bad;
    k->workload = !strcmp(w[3], "*") ? -1 : attn_workload_parse(w[3]);
    if (k->workload == -1 && strcmp(w[3], "*")) goto bad;
    if ((r = int_range(w[4], "", 0, &k->s_lo, &k->s_hi)) <= 0 || k->s_lo < 1 || k->s_hi < k->s_lo) goto bad;
    k->q_lo = 0, k->q_hi = INT_MAX;
    if (n == 6 && ((r = int_range(w[5], "q", 1, &k->q_lo, &k->q_hi)) <= 0 || k->q_lo < 1 || k->q_hi < k->q_lo))
        goto bad;
    return 1;
bad:
    for (const char *p = section; r < 0 && *p; p++) { /* name the number */
        const char *q = p;
        int v;
        if (isdigit((unsigned char)*p) && int_at(&q, &v) < 0) {
            snprintf(c->why, c->whylen, "section [%s]: %.*s does not fit in an int", section, (int)(q - p), p);
            return 0;
        }
        if (isdigit((unsigned char)*p)) p = q - 1;
    }
    snprintf(c->why, c->whylen, "section [%s]: %s", section, want);
    return 0;
}

static int handler(void *user, const char *section, const char *key, const char *value, char *why, size_t whylen) {
    ctx *c = user;
    attn_thresholds *t = c->t;
    c->why = why, c->whylen = whylen;
    if (!strcmp(section, "gpu")) {
        if (strcmp(key, "name")) goto unknown;
        if (!*value || strlen(value) >= sizeof t->gpu_name) {
            snprintf(why, whylen, "[gpu] name: expected the GPU's name as CUDA gives it (1 to %zu characters)",
                     sizeof t->gpu_name - 1);
            return 0;
        }
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

/* What a file that parsed may still lack: the GPU's name, every peak, each class's keys. */
static int complete(const char *path, const ctx *c, char *err, size_t errlen) {
    const attn_thresholds *t = c->t;
    static const struct { unsigned bit; const char *what; } need[] = {
        {P_NAME, "'name' in [gpu]"}, {P_FP16, "peak 'fp16_tflops' in [peaks]"},
        {P_BF16, "peak 'bf16_tflops' in [peaks]"}, {P_BW, "peak 'bandwidth_gbs' in [peaks]"}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!(c->peaks & need[i].bit)) {
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
            snprintf(err, errlen, "%s: section [%s] lacks %s", path, t->classes[i].section, missing);
            return 1;
        }
    }
    return 0;
}

/* From the file at path (text NULL) or from text[0..len). */
static int load(const char *path, const char *text, size_t len, attn_thresholds *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    ctx c = {.t = t};
    int rc = text ? attn_ini_parse(text, len, path, handler, &c, err, errlen)
                  : attn_ini_load(path, "thresholds file", handler, &c, err, errlen);
    if (!rc) rc = complete(path, &c, err, errlen);
    if (rc) attn_thresholds_free(t); /* nothing half-loaded */
    return rc;
}

int attn_thresholds_load(const char *path, attn_thresholds *t, char *err, size_t errlen) {
    return load(path, NULL, 0, t, err, errlen);
}

int attn_thresholds_parse(const char *text, size_t len, const char *file, attn_thresholds *t, char *err,
                          size_t errlen) {
    return load(file, text, len, t, err, errlen);
}

const attn_threshold_class *attn_thresholds_find(const attn_thresholds *t, const char *kernel, int pass,
                                                 attn_dtype dtype, int head_dim, int workload,
                                                 int seqlen, int seqlen_q) {
    for (int i = 0; i < t->nclasses; i++) {
        const attn_threshold_class *k = &t->classes[i];
        if (strcmp(k->kernel, kernel) || k->pass != pass) continue;
        if (k->dtype != -1 && k->dtype != (int)dtype) continue;
        if (k->head_dim && k->head_dim != head_dim) continue;
        if (k->workload != -1 && k->workload != workload) continue;
        if (seqlen < k->s_lo || seqlen > k->s_hi) continue;
        if (seqlen_q < k->q_lo || seqlen_q > k->q_hi) continue;
        return k;
    }
    return NULL;
}
