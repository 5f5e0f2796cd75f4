/* Shape-matrix files (shapes.h): every key, every rule and every message of the format. A
 * line is '<key> <value>...'; '#' starts a comment. Values are checked as the programs will
 * take them, so a bad value stops the configure step, naming its line, instead of failing
 * every test it reaches. */
#include "shapes.h"
#include "text_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pairwise.h"

const attn_axis_info attn_axes[ATTN_SHAPES_N_AXES] = {
#define ATTN_AXIS(key, NAME, option, cmake, kind, dflt, label, ...) {#key, option, #cmake, kind, dflt, label},
#include "axes.def"
#undef ATTN_AXIS
};

/* The keys given once each (bit k of parser.seen: key k): the axes, then the problem's
 * size and its square shapes; 'shape' and 'sequences' repeat. */
enum { K_BATCH = ATTN_SHAPES_N_AXES, K_HEADS, K_TOKENS, K_HIDDEN, K_SEQLEN, N_KEYS };
static const char *const size_keys[N_KEYS - K_BATCH] = {"batch", "heads", "tokens", "hidden", "seqlen"};
static const char *key_name(int k) { return k < K_BATCH ? attn_axes[k].key : size_keys[k - K_BATCH]; }

enum { MAX_WORDS = 1024 };               /* words on one line */
static const long long MAX_SIZE = 1LL << 30; /* tokens and hidden: attn_benchmark takes them to 2^30 */

typedef struct {
    const char *file;
    int line;
    char *err;
    size_t errlen;
    attn_shape_matrix *m;
    unsigned seen; /* bit k: key k (key_name) given */
    /* the shapes, kept apart until the end: every seqlen value comes before every shape line */
    int n_seqlen, n_lines;
    attn_shapes_shape seqlen[ATTN_SHAPES_MAX_SHAPES], lines[ATTN_SHAPES_MAX_SHAPES];
} parser;

/* "<file>:<line>: <what>" (line > 0) or "<file>: <what>" into p->err; returns 1. */
static int fail(parser *p, int line, const char *fmt, ...) {
    int k = line > 0 ? snprintf(p->err, p->errlen, "%s:%d: ", p->file, line) : snprintf(p->err, p->errlen, "%s: ", p->file);
    if (k < 0 || (size_t)k >= p->errlen) return 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return 1;
}

static int all_digits(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* s[0..n) is 1 to 10 digits, no leading zero, at most max: its value in *out. */
static int positive_int(const char *s, size_t n, long long max, long long *out) {
    if (n > 10 || s[0] < '1' || s[0] > '9' || !all_digits(s, n)) return 0;
    *out = strtoll(s, NULL, 10);
    return *out <= max;
}

/* The values of axis `axis` (tokens and hidden to 2^30, the rest to 2^24) into out[] (may be NULL). */
static int positive_ints(parser *p, const char *axis, char **v, int n, int *out) {
    long long max = !strcmp(axis, "tokens") || !strcmp(axis, "hidden") ? MAX_SIZE : ATTN_SHAPES_MAX_LEN, x;
    for (int i = 0; i < n; i++) {
        if (!positive_int(v[i], strlen(v[i]), max, &x))
            return fail(p, p->line, "%s: expected positive integers up to %lld, got '%s'", axis, max, v[i]);
        if (out) out[i] = (int)x;
    }
    return 0;
}

/* ------------------------------------------------------------- the value kinds ---- */

static const char *const DTYPE_WORDS[2] = {"fp16", "bf16"}, *const MASK_WORDS[2] = {"full", "causal"};
static const char UP_TO[] = "expected positive integers up to 16777216"; /* ATTN_SHAPES_MAX_LEN */

/* 0 or 1: which of the two words s is; -1: neither */
static int word_index(const char *const words[2], const char *s) {
    return !strcmp(s, words[0]) ? 0 : !strcmp(s, words[1]) ? 1 : -1;
}

/* -1 or a bound >= 0 (a window side) */
static int window_bound(const char *s, size_t n) { return (n == 2 && s[0] == '-' && s[1] == '1') || all_digits(s, n); }

/* D or DxDV, each a positive integer */
static const char *dims_error(const char *t, const char **bad, int *bad_len) {
    size_t n = strlen(t);
    const char *x = strchr(t, 'x');
    long long d;
    if (n == 0 || t[0] == 'x' || t[n - 1] == 'x' || (x && strchr(x + 1, 'x'))) return "expected D or DxDV";
    size_t n1 = x ? (size_t)(x - t) : n;
    if (!positive_int(t, n1, ATTN_SHAPES_MAX_LEN, &d)) return *bad_len = (int)n1, UP_TO;
    if (!x || positive_int(x + 1, strlen(x + 1), ATTN_SHAPES_MAX_LEN, &d)) return NULL;
    *bad = x + 1, *bad_len = (int)strlen(x + 1);
    return UP_TO;
}

const char *attn_axis_check(attn_axis_kind kind, const char *t, const char **bad, int *bad_len) {
    size_t n = strlen(t);
    const char *sep;
    long long x;
    *bad = t, *bad_len = (int)n;
    switch (kind) {
    case ATTN_KIND_DTYPE: return word_index(DTYPE_WORDS, t) < 0 ? "expected fp16 or bf16" : NULL;
    case ATTN_KIND_MASK: return word_index(MASK_WORDS, t) < 0 ? "expected full or causal" : NULL;
    case ATTN_KIND_DIMS: return dims_error(t, bad, bad_len);
    case ATTN_KIND_COUNT: return positive_int(t, n, ATTN_SHAPES_MAX_LEN, &x) ? NULL : UP_TO;
    case ATTN_KIND_WINDOW: /* L:R, each -1 (unbounded) or a bound >= 0 */
        sep = strchr(t, ':');
        return sep && window_bound(t, (size_t)(sep - t)) && window_bound(sep + 1, strlen(sep + 1))
                   ? NULL
                   : "expected L:R, each -1 or a bound >= 0";
    case ATTN_KIND_PAGE: return all_digits(t, n) ? NULL : "expected 0 or a page size";
    case ATTN_KIND_NUMBER: /* digits, or digits.digits */
        sep = strchr(t, '.');
        return (sep ? all_digits(t, (size_t)(sep - t)) && all_digits(sep + 1, strlen(sep + 1)) : all_digits(t, n))
                   ? NULL
                   : "expected a number >= 0";
    }
    return "an axis of an unknown kind";
}

const char *attn_axis_parse(attn_axis_kind kind, const char *t, attn_axis_value *v) {
    const char *bad, *why = attn_axis_check(kind, t, &bad, &(int){0});
    if (why) return why;
    char *end;
    v->i[0] = v->i[1] = 0, v->f = 0;
    switch (kind) {
    case ATTN_KIND_DTYPE: v->i[0] = word_index(DTYPE_WORDS, t); return NULL;
    case ATTN_KIND_MASK: v->i[0] = v->i[1] = word_index(MASK_WORDS, t); return NULL;
    case ATTN_KIND_NUMBER: v->f = strtod(t, NULL); return v->f > 1e6 ? "expected a number >= 0 up to 1e6" : NULL;
    default: break;
    }
    long long a = strtoll(t, &end, 10), b = *end ? strtoll(end + 1, NULL, 10) : a; /* DxDV, L:R */
    if (a > ATTN_SHAPES_MAX_LEN || b > ATTN_SHAPES_MAX_LEN)
        return kind == ATTN_KIND_WINDOW ? "expected L:R, each -1 or a bound >= 0 up to 16777216"
                                        : "expected 0 or a page size up to 16777216"; /* the others checked */
    v->i[0] = (int)a, v->i[1] = (int)b;
    return NULL;
}

int attn_axis_label(const attn_axis_info *a, const attn_axis_value *v, int off, char *out, size_t len) {
    const char *l = a->label;
    const int *i = v->i;
    switch (a->kind) {
    case ATTN_KIND_DTYPE: return snprintf(out, len, "%s%s/", l, DTYPE_WORDS[i[0]]);
    case ATTN_KIND_MASK: return snprintf(out, len, "%s%s/", l, MASK_WORDS[i[0]]);
    case ATTN_KIND_DIMS: /* DV only when it differs */
        return i[1] != i[0] ? snprintf(out, len, "%s%dv%d/", l, i[0], i[1]) : snprintf(out, len, "%s%d/", l, i[0]);
    case ATTN_KIND_COUNT: return i[0] != off ? snprintf(out, len, "%s%d/", l, i[0]) : 0;
    case ATTN_KIND_WINDOW: return i[0] >= 0 || i[1] >= 0 ? snprintf(out, len, "%s%d_%d/", l, i[0], i[1]) : 0;
    case ATTN_KIND_NUMBER: return v->f > 0 ? snprintf(out, len, "%s%g/", l, (double)(float)v->f) : 0;
    case ATTN_KIND_PAGE: return i[0] > 0 ? snprintf(out, len, "%s%d/", l, i[0]) : 0;
    }
    return 0;
}

int attn_axis_format(attn_axis_kind kind, const attn_axis_value *v, char *out, size_t len) {
    switch (kind) {
    case ATTN_KIND_DTYPE: return snprintf(out, len, "%s", DTYPE_WORDS[v->i[0]]);
    case ATTN_KIND_MASK: return snprintf(out, len, "%s", MASK_WORDS[v->i[0]]);
    case ATTN_KIND_DIMS: return snprintf(out, len, "%dx%d", v->i[0], v->i[1]);
    case ATTN_KIND_WINDOW: return snprintf(out, len, "%d:%d", v->i[0], v->i[1]);
    case ATTN_KIND_NUMBER: return snprintf(out, len, "%g", (double)(float)v->f);
    default: return snprintf(out, len, "%d", v->i[0]);
    }
}

const char *attn_axis_form(attn_axis_kind kind) {
    static const char *const form[] = {[ATTN_KIND_DTYPE] = "fp16|bf16", [ATTN_KIND_DIMS] = "D|DxDV",
                                       [ATTN_KIND_MASK] = "full|causal", [ATTN_KIND_COUNT] = "N",
                                       [ATTN_KIND_WINDOW] = "L:R", [ATTN_KIND_NUMBER] = "X",
                                       [ATTN_KIND_PAGE] = "P"};
    return form[kind];
}

/* ------------------------------------------------------------------ the file ---- */

/* A list axis's values, kept as written. */
static int store_values(parser *p, attn_shapes_values *a, const char *key, char **v, int n) {
    if (n > ATTN_SHAPES_MAX_VALUES) return fail(p, p->line, "%s: at most %d values", key, ATTN_SHAPES_MAX_VALUES);
    for (int i = 0; i < n; i++) {
        if (strlen(v[i]) >= ATTN_SHAPES_WORD)
            return fail(p, p->line, "%s: '%s' is longer than %d characters", key, v[i], ATTN_SHAPES_WORD - 1);
        strcpy(a->value[i], v[i]);
    }
    a->n = n;
    return 0;
}

/* A shape into list[*n] (p->seqlen: named s<S>, p->lines: q<Q>k<K>); 1 when the matrix holds no more. */
static int add_shape(parser *p, attn_shapes_shape *list, int *n, int q, int k) {
    if (p->n_seqlen + p->n_lines >= ATTN_SHAPES_MAX_SHAPES)
        return fail(p, p->line, "at most %d shapes (seqlen values and shape lines)", ATTN_SHAPES_MAX_SHAPES);
    attn_shapes_shape *s = &list[(*n)++];
    s->seqlen_q = q, s->seqlen_k = k;
    if (list == p->seqlen)
        snprintf(s->name, sizeof s->name, "s%d", q);
    else
        snprintf(s->name, sizeof s->name, "q%dk%d", q, k);
    return 0;
}

/* 'sequences QxK...': one packed batch, QxK per sequence (0 allowed). */
static int parse_sequences(parser *p, char **v, int n) {
    for (int i = 0; i < n; i++) {
        char *x = strchr(v[i], 'x');
        if (!x || !all_digits(v[i], (size_t)(x - v[i])) || !all_digits(x + 1, strlen(x + 1)))
            return fail(p, p->line, "sequences: expected QxK per sequence, got '%s'", v[i]);
    }
    if (n > ATTN_SHAPES_MAX_SEQS)
        return fail(p, p->line, "sequences: at most %d sequences in one batch", ATTN_SHAPES_MAX_SEQS);
    attn_shape_matrix *m = p->m;
    if (m->n_batches == ATTN_SHAPES_MAX_BATCHES)
        return fail(p, p->line, "sequences: at most %d 'sequences' lines", ATTN_SHAPES_MAX_BATCHES);
    attn_shapes_batch *b = &m->packed[m->n_batches++];
    char *t = b->text;
    for (int i = 0; i < n; i++) {
        char *x = strchr(v[i], 'x');
        size_t nq = (size_t)(x - v[i]), nk = strlen(x + 1);
        long long q = nq <= 10 ? strtoll(v[i], NULL, 10) : -1, k = nk <= 10 ? strtoll(x + 1, NULL, 10) : -1;
        if (q < 0 || k < 0 || q > ATTN_SHAPES_MAX_LEN || k > ATTN_SHAPES_MAX_LEN)
            return fail(p, p->line, "sequences: expected lengths up to %d, got '%s'", ATTN_SHAPES_MAX_LEN, v[i]);
        b->seqlen_q[i] = (int)q, b->seqlen_k[i] = (int)k;
        t += sprintf(t, "%s%s", i ? "+" : "", v[i]); /* fits: each value at most 21 characters */
    }
    b->n = n;
    return 0;
}

/* 'shape Q K': one shape S_q != S_k (or equal), named q<Q>k<K>. */
static int parse_shape(parser *p, char **v, int n) {
    int qk[2];
    if (n != 2) return fail(p, p->line, "shape: expected two values, <seqlen_q> <seqlen_k>");
    if (positive_ints(p, "shape", v, 2, qk)) return 1;
    return add_shape(p, p->lines, &p->n_lines, qk[0], qk[1]);
}

/* An axis's values, each of its kind's form, of at most ATTN_SHAPES_WORD - 1 characters,
 * then in its range: checked and stored as written. */
static int parse_list_axis(parser *p, int k, char **v, int n) {
    const attn_axis_info *a = &attn_axes[k];
    const char *bad, *why;
    int bad_len;
    attn_axis_value value;
    for (int i = 0; i < n; i++)
        if ((why = attn_axis_check(a->kind, v[i], &bad, &bad_len)))
            return fail(p, p->line, "%s: %s, got '%.*s'", a->key, why, bad_len, bad);
    if (store_values(p, &p->m->axis[k], a->key, v, n)) return 1;
    for (int i = 0; i < n; i++)
        if ((why = attn_axis_parse(a->kind, v[i], &value)))
            return fail(p, p->line, "%s: %s, got '%s'", a->key, why, v[i]);
    return 0;
}

/* A key given once: its values checked and stored. */
static int parse_axis(parser *p, int k, char **v, int n) {
    attn_shape_matrix *m = p->m;
    if (p->seen & (1u << k)) return fail(p, p->line, "'%s' given twice", key_name(k));
    p->seen |= 1u << k;
    if (k < K_BATCH) return parse_list_axis(p, k, v, n);
    int ints[MAX_WORDS];
    if (positive_ints(p, key_name(k), v, n, ints)) return 1;
    if (k == K_SEQLEN) {
        for (int i = 0; i < n; i++)
            if (add_shape(p, p->seqlen, &p->n_seqlen, ints[i], ints[i])) return 1;
        return 0;
    }
    if (n != 1) return fail(p, p->line, "%s: expected exactly one value", key_name(k));
    int *size[N_KEYS] = {[K_BATCH] = &m->batch, [K_HEADS] = &m->heads, [K_TOKENS] = &m->tokens,
                         [K_HIDDEN] = &m->hidden};
    *size[k] = ints[0];
    return 0;
}

/* "unknown key '<w>': expected <the required axes>, <the size keys>, <the other axes>, shape
 * or sequences" */
static int unknown_key(parser *p, const char *w) {
    char keys[512];
    size_t n = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int k = 0; k < N_KEYS; k++) {
            int group = k >= K_BATCH ? 1 : attn_axes[k].dflt ? 2 : 0;
            if (group == pass && n < sizeof keys) n += (size_t)snprintf(keys + n, sizeof keys - n, "%s, ", key_name(k));
        }
    return fail(p, p->line, "unknown key '%s': expected %sshape or sequences", w, keys);
}

/* One line (comment cut): its key's values checked and stored. */
static int parse_line(parser *p, char *line) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    while (isspace((unsigned char)*line)) line++;
    char *end = line + strlen(line);
    while (end > line && isspace((unsigned char)end[-1])) *--end = 0;
    if (!*line) return 0;
    if (strpbrk(line, ";[]")) return fail(p, p->line, "unexpected ';', '[' or ']': values are separated by spaces");
    char *w[MAX_WORDS + 1];
    int n = 0;
    for (char *s = line; *s;) {
        if (n == MAX_WORDS + 1) return fail(p, p->line, "more than %d values on one line", MAX_WORDS);
        w[n++] = s;
        s += strcspn(s, " \t");
        if (*s) *s++ = 0;
        s += strspn(s, " \t");
    }
    if (n == 1) return fail(p, p->line, "'%s': expected at least one value", w[0]);
    if (!strcmp(w[0], "sequences")) return parse_sequences(p, w + 1, n - 1);
    if (!strcmp(w[0], "shape")) return parse_shape(p, w + 1, n - 1);
    for (int k = 0; k < N_KEYS; k++)
        if (!strcmp(w[0], key_name(k))) return parse_axis(p, k, w + 1, n - 1);
    return unknown_key(p, w[0]);
}

/* The rules across lines, once every line is read. */
static int finish(parser *p) {
    attn_shape_matrix *m = p->m;
    for (int k = 0; k < ATTN_SHAPES_N_AXES; k++)
        if (!attn_axes[k].dflt && !(p->seen & (1u << k))) return fail(p, 0, "missing the '%s' line", key_name(k));
    /* the problem size: batch and heads given, or tokens (batch x seqlen) and hidden
     * (heads x head_dim) as FlashAttention's benchmarks size them */
    static const int pairs[2][2] = {{K_BATCH, K_HEADS}, {K_TOKENS, K_HIDDEN}};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if ((p->seen >> pairs[i][j] & 1) && !(p->seen >> pairs[i][!j] & 1))
                return fail(p, 0, "'%s' given without '%s'", key_name(pairs[i][j]), key_name(pairs[i][!j]));
    if (!(p->seen & (1u << K_BATCH | 1u << K_TOKENS)))
        return fail(p, 0, "missing the 'heads' line (give batch and heads, or tokens and hidden)");
    memcpy(m->shape, p->seqlen, sizeof *p->seqlen * (size_t)p->n_seqlen);
    memcpy(m->shape + p->n_seqlen, p->lines, sizeof *p->lines * (size_t)p->n_lines);
    m->n_shapes = p->n_seqlen + p->n_lines;
    if (!m->n_shapes && !m->n_batches) return fail(p, 0, "no shapes: expected a 'seqlen', 'shape' or 'sequences' line");
    const attn_shapes_values *hk = &m->axis[ATTN_SHAPES_HEADS_K]; /* version 2 (attn_abi.h): divides heads */
    for (int i = 0; i < hk->n; i++) {
        if (!m->heads) return fail(p, 0, "heads_k needs 'batch' and 'heads'");
        if (m->heads % atoi(hk->value[i])) return fail(p, 0, "heads_k %s does not divide heads %d", hk->value[i], m->heads);
    }
    return 0;
}

int attn_shapes_parse(const char *text, const char *file, attn_shape_matrix *m, char *err, size_t errlen) {
    parser *p = calloc(1, sizeof *p);
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (!p || !copy) {
        free(p), free(copy);
        snprintf(err, errlen, "%s: out of memory", file);
        return 1;
    }
    memcpy(copy, text, len + 1);
    memset(m, 0, sizeof *m);
    p->file = file, p->err = err, p->errlen = errlen, p->m = m;
    int bad = 0;
    for (char *line = copy, *next; line && !bad; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        p->line++;
        bad = parse_line(p, line);
    }
    if (!bad) bad = finish(p);
    free(copy), free(p);
    return bad;
}

int attn_shapes_read(const char *path, attn_shape_matrix *m, char *err, size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    const int e = attn_text_file_read(path, &text, &len);
    if (e == ENOENT) return snprintf(err, errlen, "%s: shapes file not found", path), 1;
    if (e) return snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e)), 1;
    int bad = strlen(text) != len ? (snprintf(err, errlen, "%s: a NUL byte in the file", path), 1)
                                  : attn_shapes_parse(text, path, m, err, errlen);
    free(text);
    return bad;
}

long attn_shapes_n_cases(const attn_shape_matrix *m) {
    return (long)m->axis[ATTN_SHAPES_DTYPE].n * m->axis[ATTN_SHAPES_HEAD_DIM].n * m->axis[ATTN_SHAPES_MASK].n *
           m->n_shapes;
}

int attn_shapes_cases(const attn_shape_matrix *m, int *rows, int max_rows) {
    if (attn_shapes_n_cases(m) == 0) return 0;
    const int sizes[ATTN_SHAPES_CASE_AXES] = {m->axis[ATTN_SHAPES_DTYPE].n, m->axis[ATTN_SHAPES_HEAD_DIM].n,
                                              m->axis[ATTN_SHAPES_MASK].n, m->n_shapes};
    return attn_axis_rows(sizes, ATTN_SHAPES_CASE_AXES, 0, rows, max_rows);
}
