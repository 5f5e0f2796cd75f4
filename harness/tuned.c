/* Tuned files (tuned.h): every rule and message of the format. What would only fail the
 * compile later, or be compiled other than as written, is refused here, naming the line: a
 * number that does not fit in an int, a GPU name that cannot go into a C string as it is,
 * a tunable value outside the kernel's space. */
#include "tuned.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *file, *kernel;
    const attn_tuned_spec *spec;
    attn_tuned_fn on_entry;
    void *user;
    char *err;
    size_t errlen;
    int line;
    int have_gpu;
    char gpu[ATTN_TUNED_GPU_NAME];
    char **word; /* the words of the line at hand */
    int cap_words;
} parser;

/* "<file>:<line>: <what>" into p->err; returns 1. */
static int fail(parser *p, const char *fmt, ...) {
    int k = snprintf(p->err, p->errlen, "%s:%d: ", p->file, p->line);
    if (k < 0 || (size_t)k >= p->errlen) return 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return 1;
}

/* s is one or more of [a-z0-9_] */
static int name_word(const char *s, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_')) return 0;
    return 1;
}

/* s[0..n) is [1-9][0-9]* */
static int positive_digits(const char *s, size_t n) {
    if (!n || s[0] < '1' || s[0] > '9') return 0;
    for (size_t i = 1; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

/* s is 0 or -?[1-9][0-9]*: no leading 0, which C would read as octal */
static int integer_word(const char *s) {
    if (!strcmp(s, "0")) return 1;
    if (*s == '-') s++;
    return positive_digits(s, strlen(s));
}

/* The decimal integer s[0..n) (an integer_word) into *out: 0 when it does not fit in an int. */
static int fits_int(const char *s, size_t n, int *out) {
    char buf[24];
    if (n >= sizeof buf) return 0;
    memcpy(buf, s, n), buf[n] = 0;
    errno = 0;
    long v = strtol(buf, NULL, 10);
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX) return 0;
    *out = (int)v;
    return 1;
}

/* "gpu <name>": the first, and a name that goes into a C string and into the configure
 * step's generated file as written. */
static int gpu_line(parser *p, const char *name) {
    if (p->have_gpu) return fail(p, "a second 'gpu' line (one GPU per file)");
    if (strpbrk(name, "\\\"")) return fail(p, "the GPU's name goes into a C string: no '\\' or '\"'");
    if (strlen(name) >= ATTN_TUNED_GPU_NAME)
        return fail(p, "the GPU's name has %zu characters: CUDA's names have at most %d", strlen(name),
                    ATTN_TUNED_GPU_NAME - 1);
    for (const char *c = name; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            return fail(p, "the GPU's name: expected printable ASCII, got byte 0x%02x", (unsigned char)*c);
    if (strchr(name, '@')) return fail(p, "the GPU's name: no '@' (the configure step would read @...@ as a variable)");
    snprintf(p->gpu, sizeof p->gpu, "%s", name);
    p->have_gpu = 1;
    return 0;
}

/* Splits s at runs of ' ' and '\t' into p->word; the number of words, or -1 (out of memory). */
static int split(parser *p, char *s) {
    int n = 0;
    for (char *c = s; *c;) {
        while (*c == ' ' || *c == '\t') *c++ = 0;
        if (!*c) break;
        if (n == p->cap_words) {
            int cap = p->cap_words ? 2 * p->cap_words : 16;
            char **more = realloc(p->word, (size_t)cap * sizeof *more);
            if (!more) return -1;
            p->word = more, p->cap_words = cap;
        }
        p->word[n++] = c;
        while (*c && *c != ' ' && *c != '\t') c++;
    }
    return n;
}

/* The pairs <tunable>=<integer> of words w[0..n): each well formed, new, and an int; split
 * in place into w[i] (the name) and *value[i] (its digits, after the name's NUL). */
static int pairs(parser *p, char **w, int n) {
    for (int i = 0; i < n; i++) {
        char *eq = strchr(w[i], '=');
        if (!eq || !name_word(w[i], (size_t)(eq - w[i])) || !integer_word(eq + 1))
            return fail(p, "expected <tunable>=<integer>, got '%s'", w[i]);
        *eq = 0;
        for (int j = 0; j < i; j++)
            if (!strcmp(w[j], w[i])) return fail(p, "tunable '%s' given twice", w[i]);
        int v;
        if (!fits_int(eq + 1, strlen(eq + 1), &v)) return fail(p, "%s=%s does not fit in an int", w[i], eq + 1);
    }
    return 0;
}

/* The value text of tunable `name` among the pairs w[0..n), or NULL. */
static const char *value_of(char **w, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(w[i], name)) return w[i] + strlen(w[i]) + 1;
    return NULL;
}

/* ";"-joined tunables of the spec, as the CMake list the messages have always shown */
static const char *spec_names(const attn_tuned_spec *s, char *out, size_t len) {
    out[0] = 0;
    for (int t = 0, k = 0; t < s->n && (size_t)k < len; t++)
        k += snprintf(out + k, len - (size_t)k, "%s%s", t ? ";" : "", s->tunable[t].name);
    return out;
}

/* The kernel's configuration: every tunable of the spec, each with an allowed value, and no other. */
static int entry(parser *p, attn_tuned_entry *e, char **w, int n) {
    const attn_tuned_spec *s = p->spec;
    char names[ATTN_TUNED_MAX_TUNABLES * ATTN_TUNED_NAME];
    for (int t = 0; t < s->n; t++) {
        const char *v = value_of(w, n, s->tunable[t].name);
        if (!v)
            return fail(p, "%s: tunable '%s' missing (it takes: %s)", p->kernel, s->tunable[t].name,
                        spec_names(s, names, sizeof names));
        fits_int(v, strlen(v), &e->values[t]);
        int ok = !s->tunable[t].n_allowed;
        for (int a = 0; a < s->tunable[t].n_allowed; a++) ok |= s->tunable[t].allowed[a] == e->values[t];
        if (!ok) {
            char one_of[ATTN_TUNED_MAX_ALLOWED * 13] = "";
            for (int a = 0, k = 0; a < s->tunable[t].n_allowed; a++)
                k += snprintf(one_of + k, sizeof one_of - (size_t)k, "%s%d", a ? ", " : "", s->tunable[t].allowed[a]);
            return fail(p, "%s: %s=%s is not one of %s", p->kernel, s->tunable[t].name, v, one_of);
        }
    }
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (int t = 0; t < s->n; t++) known |= !strcmp(w[i], s->tunable[t].name);
        if (!known)
            return fail(p, "%s has no tunable '%s' (it takes: %s)", p->kernel, w[i], spec_names(s, names, sizeof names));
    }
    return 0;
}

/* "<kernel> <fp16|bf16> d<D> <full|causal> <lo>-<hi> <tunable>=<value> ..." */
static int config_line(parser *p, char *line) {
    int n = split(p, line);
    if (n < 0) return fail(p, "out of memory");
    char **w = p->word;
    char *dash = n >= 6 ? strchr(w[4], '-') : NULL;
    if (n < 6 || !name_word(w[0], strlen(w[0])) || (strcmp(w[1], "fp16") && strcmp(w[1], "bf16")) ||
        w[2][0] != 'd' || !positive_digits(w[2] + 1, strlen(w[2] + 1)) || (strcmp(w[3], "full") && strcmp(w[3], "causal")) ||
        !dash || !positive_digits(w[4], (size_t)(dash - w[4])) || !positive_digits(dash + 1, strlen(dash + 1)))
        return fail(p, "expected '<kernel> <fp16|bf16> d<D> <full|causal> <lo>-<hi> <tunable>=<value> ...' or 'gpu <name>'");
    if (!p->have_gpu) return fail(p, "a configuration before the 'gpu <name>' line");
    attn_tuned_entry e = {.gpu = p->gpu, .dtype = w[1], .causal = !strcmp(w[3], "causal")};
    if (!fits_int(w[2] + 1, strlen(w[2] + 1), &e.head_dim)) return fail(p, "head dim %s does not fit in an int", w[2]);
    if (!fits_int(w[4], (size_t)(dash - w[4]), &e.seqlen_lo))
        return fail(p, "seqlen %.*s does not fit in an int", (int)(dash - w[4]), w[4]);
    if (!fits_int(dash + 1, strlen(dash + 1), &e.seqlen_hi)) return fail(p, "seqlen %s does not fit in an int", dash + 1);
    if (e.seqlen_lo > e.seqlen_hi) return fail(p, "seqlen range %d-%d: lo > hi", e.seqlen_lo, e.seqlen_hi);
    if (pairs(p, w + 5, n - 5)) return 1;
    if (strcmp(w[0], p->kernel)) return 0; /* another kernel's: checked, not used */
    if (entry(p, &e, w + 5, n - 5)) return 1;
    if (p->on_entry) p->on_entry(p->user, &e);
    return 0;
}

static int parse_line(parser *p, char *line, size_t n) {
    if (memchr(line, 0, n)) return fail(p, "a NUL byte: not a text file");
    char *hash = strchr(line, '#'); /* a comment, to the end of its line (a '\' too) */
    if (hash) *hash = 0;
    char *end = line + strlen(line);
    while (isspace((unsigned char)*line)) line++;
    while (end > line && isspace((unsigned char)end[-1])) *--end = 0;
    if (!*line) return 0;
    if (strpbrk(line, ";[]")) return fail(p, "unexpected ';', '[' or ']'");
    if (!strncmp(line, "gpu", 3) && (line[3] == ' ' || line[3] == '\t')) return gpu_line(p, line + 3 + strspn(line + 3, " \t"));
    return config_line(p, line);
}

int attn_tuned_parse(const char *text, size_t len, const char *file, const char *kernel,
                     const attn_tuned_spec *spec, attn_tuned_fn on_entry, void *user, char *err,
                     size_t errlen) {
    parser p = {.file = file, .kernel = kernel, .spec = spec, .on_entry = on_entry, .user = user, .err = err,
                .errlen = errlen};
    char *copy = malloc(len + 1);
    if (!copy) {
        snprintf(err, errlen, "%s: out of memory", file);
        return 1;
    }
    memcpy(copy, text, len), copy[len] = 0;
    int bad = 0;
    for (char *line = copy, *stop = copy + len; !bad && line <= stop; line++) {
        char *nl = memchr(line, '\n', (size_t)(stop - line));
        if (!nl) nl = stop;
        *nl = 0;
        p.line++;
        bad = parse_line(&p, line, (size_t)(nl - line));
        line = nl;
    }
    free(copy), free(p.word);
    return bad;
}

/* "<name>[=<v>|<v>...]", spec text s[0..n), as the next tunable of spec */
static int spec_tunable(const char *s, size_t n, attn_tuned_spec *spec, char *err, size_t errlen) {
    const char *eq = memchr(s, '=', n);
    size_t name_len = eq ? (size_t)(eq - s) : n;
    if (!name_word(s, name_len) || name_len >= ATTN_TUNED_NAME || spec->n == ATTN_TUNED_MAX_TUNABLES) {
        snprintf(err, errlen, "tunables: expected up to %d names of [a-z0-9_] (up to %d characters), got '%.*s'",
                 ATTN_TUNED_MAX_TUNABLES, ATTN_TUNED_NAME - 1, (int)n, s);
        return 1;
    }
    for (int t = 0; t < spec->n; t++)
        if (strlen(spec->tunable[t].name) == name_len && !memcmp(spec->tunable[t].name, s, name_len)) {
            snprintf(err, errlen, "tunables: '%.*s' given twice", (int)name_len, s);
            return 1;
        }
    attn_tuned_tunable *t = &spec->tunable[spec->n++];
    memcpy(t->name, s, name_len), t->name[name_len] = 0;
    t->n_allowed = 0;
    for (const char *v = eq ? eq + 1 : s + n, *stop = s + n; eq && v <= stop; v++) {
        const char *bar = memchr(v, '|', (size_t)(stop - v));
        size_t k = (size_t)((bar ? bar : stop) - v);
        char word[24];
        snprintf(word, sizeof word, "%.*s", (int)k, v);
        if (t->n_allowed == ATTN_TUNED_MAX_ALLOWED || k >= sizeof word || !integer_word(word) ||
            !fits_int(word, k, &t->allowed[t->n_allowed])) {
            snprintf(err, errlen, "tunables: %s: expected up to %d ints separated by '|', got '%.*s'", t->name,
                     ATTN_TUNED_MAX_ALLOWED, (int)(stop - eq - 1), eq + 1);
            return 1;
        }
        t->n_allowed++;
        v += k;
    }
    return 0;
}

int attn_tuned_spec_parse(const char *text, attn_tuned_spec *spec, char *err, size_t errlen) {
    memset(spec, 0, sizeof *spec);
    for (const char *s = text; *s;) {
        size_t n = strcspn(s, ",");
        if (spec_tunable(s, n, spec, err, errlen)) return 1;
        s += n;
        if (*s == ',') s++;
    }
    return 0;
}
