/* inih reads a line into a fixed buffer and a section name into 50 bytes, and drops what does
 * not fit without a word; it reads an indented line as more of the value above; it calls the
 * handler again for a key or a section given twice, and not at all for a section with no key.
 * So the lines reach inih through our own reader (ini_parse_stream), which sees each one
 * first, as inih will classify it, and refuses what inih would read other than as written;
 * keys given twice are caught as inih reports them. Debian's inih passes no line number to
 * the handler: the reader's count is the line inih is on. */
#include "ini_file.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_file.h"

typedef struct {
    size_t off, len; /* the name in the text */
    int line;
} ini_section;

typedef struct {
    char *name;
    int line;
} ini_key;

typedef struct {
    const char *text, *file;
    size_t len, pos;
    int line; /* the line last given to inih */
    attn_ini_key_fn key;
    void *user;
    ini_section *sections; /* every header so far, in file order */
    int n_sections, cap_sections;
    int content; /* lines under the last header that are not blank or comments */
    ini_key *keys; /* the keys of the last section */
    int n_keys, cap_keys;
    size_t prev_off, prev_len; /* the name of the last 'key = value' in its section, if any */
    int prev_line;
    int err_line; /* the first error found here (inih reports its own as its result) */
    char why[768];
} ini_ctx;

/* Records the first error, at `line`; returns 0 (inih's failure). */
static int fail(ini_ctx *c, int line, const char *fmt, ...) {
    if (c->err_line) return 0;
    c->err_line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    return 0;
}

static void clear_keys(ini_ctx *c) {
    for (int i = 0; i < c->n_keys; i++) free(c->keys[i].name);
    c->n_keys = 0;
}

/* Grows *p (n used of *cap, each `size` bytes) to hold one more; 0 when out of memory. */
static int grow(void **p, int n, int *cap, size_t size) {
    if (n < *cap) return 1;
    int more = *cap ? 2 * *cap : 16;
    void *q = realloc(*p, (size_t)more * size);
    if (!q) return 0;
    *p = q, *cap = more;
    return 1;
}

/* The last header has had no key line: refused (inih never reports such a section). */
static int empty_section(ini_ctx *c) {
    if (!c->n_sections || c->content) return 1;
    const ini_section *s = &c->sections[c->n_sections - 1];
    return fail(c, s->line, "section [%.*s] has no keys", (int)s->len, c->text + s->off);
}

/* A '[name]' line: whole, new, and after a section that had keys. */
static int new_section(ini_ctx *c, size_t off, size_t len) {
    const char *name = c->text + off;
    if (!empty_section(c)) return 0;
    if (len > ATTN_INI_MAX_SECTION)
        return fail(c, c->line, "section name [%.*s] has %zu characters: inih keeps %d (it would read [%.*s])",
                    (int)len, name, len, ATTN_INI_MAX_SECTION, ATTN_INI_MAX_SECTION, name);
    for (int i = 0; i < c->n_sections; i++) {
        const ini_section *s = &c->sections[i];
        if (s->len == len && !memcmp(c->text + s->off, name, len))
            return fail(c, c->line, "section [%.*s] given twice (lines %d and %d)", (int)len, name, s->line, c->line);
    }
    if (!grow((void **)&c->sections, c->n_sections, &c->cap_sections, sizeof *c->sections))
        return fail(c, c->line, "out of memory at %d sections", c->n_sections);
    c->sections[c->n_sections++] = (ini_section){off, len, c->line};
    clear_keys(c);
    c->content = 0, c->prev_len = 0;
    return 1;
}

/* inih's inline comment rule: the first of `chars`, or a ';' after a space, in s[0..n). */
static size_t find_chars_or_comment(const char *s, size_t n, const char *chars) {
    int was_space = 0;
    size_t i = 0;
    for (; i < n && !strchr(chars, s[i]) && !(was_space && s[i] == ';'); i++) was_space = isspace((unsigned char)s[i]);
    return i;
}

/* Line c->line, s[0..n) without its '\n', as inih will take it (ini_parse_stream's order of
 * tests): a comment, more of the value above, a section, or a key. 0 when refused. */
static int classify(ini_ctx *c, const char *s, size_t n) {
    size_t b = 0, e = n;
    if (c->line == 1 && n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) b = 3; /* inih skips a UTF-8 BOM */
    while (b < e && isspace((unsigned char)s[b])) b++;
    while (e > b && isspace((unsigned char)s[e - 1])) e--;
    if (b == e || s[b] == ';' || s[b] == '#') return 1;
    if (c->prev_len && b > 0)
        return fail(c, c->line, "an indented line: inih reads it as more of the value of '%.*s' (line %d); start it in "
                    "the first column", (int)c->prev_len, c->text + c->prev_off, c->prev_line);
    if (s[b] == '[') {
        size_t close = b + 1 + find_chars_or_comment(s + b + 1, e - b - 1, "]");
        if (close < e && s[close] == ']') return new_section(c, (size_t)(s - c->text) + b + 1, close - b - 1);
    } else {
        size_t sep = b + find_chars_or_comment(s + b, e - b, "=:"), end = sep;
        if (sep < e && (s[sep] == '=' || s[sep] == ':')) {
            while (end > b && isspace((unsigned char)s[end - 1])) end--;
            c->prev_off = (size_t)(s - c->text) + b, c->prev_len = end - b, c->prev_line = c->line;
        }
    }
    c->content++; /* a key, or a line inih will report */
    return 1;
}

/* inih's ini_reader: the next line, refused when inih would not read it whole. */
static char *reader(char *str, int num, void *stream) {
    ini_ctx *c = stream;
    if (c->err_line || c->pos >= c->len) return NULL;
    const char *s = c->text + c->pos;
    const char *nl = memchr(s, '\n', c->len - c->pos);
    size_t n = nl ? (size_t)(nl - s) : c->len - c->pos;
    c->line++;
    if (memchr(s, 0, n)) {
        fail(c, c->line, "a NUL byte: not a text file");
        return NULL;
    }
    if (num < 3 || n > (size_t)num - 2) { /* the line, its '\n' and a NUL fill inih's buffer */
        fail(c, c->line, "a line of %zu characters: inih reads at most %d", n, num - 2);
        return NULL;
    }
    if (!classify(c, s, n)) return NULL;
    size_t take = n + (nl != NULL);
    memcpy(str, s, take);
    str[take] = 0;
    c->pos += take;
    return str;
}

/* inih's handler: the section it read must be the one the reader saw (a safety net for the
 * reader's view of inih's rules), a key is new in its section, then the owner checks it. */
static int handler(void *user, const char *section, const char *name, const char *value) {
    ini_ctx *c = user;
    const ini_section *s = c->n_sections ? &c->sections[c->n_sections - 1] : NULL;
    size_t slen = s ? s->len : 0;
    if (strlen(section) != slen || (s && memcmp(section, c->text + s->off, slen)))
        return fail(c, c->line, "inih read section [%s] here; cannot tell which section this line is in", section);
    for (int i = 0; i < c->n_keys; i++)
        if (!strcmp(c->keys[i].name, name))
            return fail(c, c->line, "key '%s' given twice in section [%s] (lines %d and %d)", name, section,
                        c->keys[i].line, c->line);
    char *copy = grow((void **)&c->keys, c->n_keys, &c->cap_keys, sizeof *c->keys) ? malloc(strlen(name) + 1) : NULL;
    if (!copy) return fail(c, c->line, "out of memory");
    c->keys[c->n_keys++] = (ini_key){strcpy(copy, name), c->line};
    char why[512] = "";
    if (!c->key(c->user, section, name, value, why, sizeof why)) return fail(c, c->line, "%s", why);
    return 1;
}

int attn_ini_parse(const char *text, size_t len, const char *file, attn_ini_key_fn key, void *user, char *err,
                   size_t errlen) {
    ini_ctx c = {.text = text, .file = file, .len = len, .key = key, .user = user};
    int rc = ini_parse_stream(reader, &c, handler, &c);
    if (!c.err_line && rc == 0) empty_section(&c); /* the last section */
    clear_keys(&c);
    free(c.keys), free(c.sections);
    if (rc > 0 && (!c.err_line || rc < c.err_line)) { /* inih's own, on an earlier line */
        snprintf(err, errlen, "%s:%d: expected '[section]', 'key = value' or a comment", file, rc);
        return 1;
    }
    if (c.err_line) {
        snprintf(err, errlen, "%s:%d: %s", file, c.err_line, c.why);
        return 1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot parse (ini_parse_stream returned %d)", file, rc);
        return 1;
    }
    return 0;
}

int attn_ini_load(const char *path, const char *what, attn_ini_key_fn key, void *user, char *err, size_t errlen) {
    char *text;
    size_t len;
    int e = attn_text_file_read(path, &text, &len);
    if (e) {
        if (e == ENOENT)
            snprintf(err, errlen, "%s: cannot open %s", path, what);
        else
            snprintf(err, errlen, "%s: cannot open %s: %s", path, what, strerror(e));
        return 1;
    }
    int bad = attn_ini_parse(text, len, path, key, user, err, errlen);
    free(text);
    return bad;
}
