#include "known_deviations.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_file.h"

static int fail(char *err, size_t len, const char *path, int line, const char *what) {
    snprintf(err, len, "%s:%d: %s", path, line, what);
    return 1;
}

/* The next blank-separated word of *s into out (at most cap - 1 characters); 0 none left,
 * -1 too long, else its length. */
static int next_word(char **s, char *out, size_t cap) {
    char *p = *s;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = 0;
    while (p[n] && p[n] != ' ' && p[n] != '\t') n++;
    *s = p + n;
    if (n >= cap) return -1;
    memcpy(out, p, n);
    out[n] = 0;
    return (int)n;
}

/* One line (comment stripped) into e; 0 blank, 1 an entry, -1 said in err. */
static int parse_line(char *s, attn_deviation *e, const char *path, int line, char *err, size_t len) {
    char *hash = strchr(s, '#');
    if (hash) *hash = 0;
    char *words[3] = {e->kernel, e->cases, e->checks};
    const size_t caps[3] = {sizeof e->kernel, sizeof e->cases, sizeof e->checks};
    static const char *const names[3] = {"the kernel", "the case", "the checks"};
    for (int w = 0; w < 3; w++) {
        const int n = next_word(&s, words[w], caps[w]);
        if (n == 0 && w == 0) return 0;
        char what[128];
        if (n <= 0) {
            snprintf(what, sizeof what, n < 0 ? "%s: longer than %zu characters" : "missing %s (<kernel> <case> "
                     "<checks> <why>)", names[w], caps[w] - 1);
            return -fail(err, len, path, line, what);
        }
    }
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    if (!n) return -fail(err, len, path, line, "missing the reason (<kernel> <case> <checks> <why>): say why");
    if (n >= sizeof e->why) return -fail(err, len, path, line, "the reason: longer than 511 characters");
    memcpy(e->why, s, n + 1);
    const char *c = e->checks;
    if (strcmp(c, "*"))
        for (;;) { /* a,b,c: no empty name */
            const char *comma = strchr(c, ',');
            if (comma == c || !*c) return -fail(err, len, path, line, "the checks: an empty name in the list");
            if (!comma) break;
            c = comma + 1;
        }
    e->line = line;
    return 1;
}

int attn_deviations_load(const char *path, attn_deviations *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    char *text = NULL;
    size_t len = 0;
    if (attn_text_file_read(path, &text, &len)) {
        snprintf(err, errlen, "%s: cannot read it", path);
        return 1;
    }
    if (strlen(text) != len) {
        free(text);
        snprintf(err, errlen, "%s: a NUL byte in the file", path);
        return 1;
    }
    int lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    d->v = calloc((size_t)lines, sizeof *d->v);
    int rc = d->v == NULL;
    if (rc) snprintf(err, errlen, "%s: out of memory", path);
    int line = 0;
    for (char *s = text, *next; !rc && s; s = next) {
        next = strchr(s, '\n');
        if (next) *next++ = 0;
        line++;
        const int r = parse_line(s, &d->v[d->n], path, line, err, errlen);
        if (r < 0) rc = 1;
        d->n += r > 0;
    }
    free(text);
    if (rc) attn_deviations_free(d);
    return rc;
}

void attn_deviations_free(attn_deviations *d) {
    free(d->v);
    d->v = NULL, d->n = 0;
}

/* 1 if the comma-separated list holds name (or is "*") */
static int lists(const char *list, const char *name, size_t n) {
    if (!strcmp(list, "*")) return 1;
    for (const char *p = list; p;) {
        const char *comma = strchr(p, ',');
        const size_t k = comma ? (size_t)(comma - p) : strlen(p);
        if (k == n && !strncmp(p, name, n)) return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

const attn_deviation *attn_deviation_find(const attn_deviations *d, const char *kernel, const char *label,
                                          const char *failed) {
    if (!failed || !*failed) return NULL;
    for (int i = 0; i < d->n; i++) {
        const attn_deviation *e = &d->v[i];
        if (strcmp(e->kernel, kernel) || fnmatch(e->cases, label, 0)) continue;
        int all = 1;
        for (const char *p = failed; p && all;) {
            const char *comma = strchr(p, ',');
            all = lists(e->checks, p, comma ? (size_t)(comma - p) : strlen(p));
            p = comma ? comma + 1 : NULL;
        }
        if (all) return e;
    }
    return NULL;
}

const attn_deviation *attn_deviation_exact(const attn_deviations *d, const char *kernel, const char *label) {
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->v[i].kernel, kernel) && !strpbrk(d->v[i].cases, "*?[") && !strcmp(d->v[i].cases, label))
            return &d->v[i];
    return NULL;
}
