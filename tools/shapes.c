/* attn_shapes: a shape-matrix file (harness/shapes.h) and the table of correctness checks
 * (harness/checks.def), printed for the programs that build or run the tests:
 * CMake set() lines for the configure step (cmake/shapes.cmake compiles and runs this before
 * anything is built), JSON for the scripts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapes.h"
#include "text_file.h"
#include "tuned.h"

static const struct {
    const char *name, *group, *summary;
} checks[] = {
#define ATTN_CHECK(name, group, summary) {#name, #group, summary},
#include "checks.def"
#undef ATTN_CHECK
};
enum { N_CHECKS = sizeof checks / sizeof checks[0] };

/* The axes (harness/axes.def) as the usage text lists them from column `col`: their CMake
 * variables ("_DTYPES, ...") or JSON keys ("\"dtype\", ..."), wrapped at column 96. */
static void usage_axes(FILE *out, int cmake, int col, const char *tail) {
    for (int a = 0; a < ATTN_SHAPES_N_AXES; a++) {
        char word[64];
        int n = cmake ? snprintf(word, sizeof word, "_%s", attn_axes[a].cmake)
                      : snprintf(word, sizeof word, "\"%s\"", attn_axes[a].key);
        if (a) col += fprintf(out, ",");
        if (col + n + 2 > 96) fprintf(out, "\n%22s", ""), col = 22;
        col += fprintf(out, a || cmake ? " %s" : "%s", word);
    }
    fprintf(out, "%s\n", tail);
}

static void usage(FILE *out) {
    fprintf(out, "usage: attn_shapes --cmake PREFIX FILE | --json FILE | --checks GROUP | --checks-json |\n"
                 "                   --tuned KERNEL TUNABLES [FILE...] | --help\n"
                 "  --cmake PREFIX FILE  the shapes file as CMake set() lines, PREFIX and: the axes (;-lists)\n"
                 "                      ");
    usage_axes(out, 1, 22, ",");
    fprintf(out, "                       _AXIS_OPTIONS (\"--<option>;<v>,<v>,...\" per axis given that has a\n"
                 "                       default, for attn_correctness), _BATCH, _HEADS, _TOKENS, _HIDDEN (\"\" when\n"
                 "                       absent), _SHAPES (\"QxK,QxK,...\"), _PACKED (\"QxK+QxK+...\" per 'sequences'\n"
                 "                       line) and _CASES, the cross product\n"
                 "                       \"<dtype>:<head_dim>:<mask>:<seqlen_q>:<seqlen_k>:<shape name>\"\n"
                 "  --json FILE          the shapes file as JSON: {\"file\", \"axes\": {");
    usage_axes(out, 0, 67, ": [strings, as written]},");
    fprintf(out, "                       \"batch\", \"heads\", \"tokens\", \"hidden\": integer or null, \"shapes\": [{\"name\",\n"
                 "                       \"seqlen_q\", \"seqlen_k\"}], \"sequences\": [\"QxK+QxK+...\"], \"cases\": [{\"dtype\",\n"
                 "                       \"head_dim\", \"mask\", \"shape\", \"seqlen_q\", \"seqlen_k\"}]}\n"
                 "  --checks GROUP       the names of the checks of GROUP (correctness: the default checks,\n"
                 "                       contract, launch, packed), comma-separated\n"
                 "  --checks-json        every check as [{\"name\", \"group\", \"summary\"}], in the order a case runs them\n"
                 "  --tuned KERNEL TUNABLES [FILE...]\n"
                 "                       KERNEL's configurations in the tuned files (harness/tuned.h), in order, as\n"
                 "                       one CMake list of \"<gpu>|<dtype>|<head dim>|<causal 0/1>|<lo>|<hi>|<v>,<v>,...\";\n"
                 "                       TUNABLES, \"<tunable>[=<v>|<v>...],...\", gives the values' order and the\n"
                 "                       values each tunable takes (cmake/tuned.cmake)\n"
                 "A malformed file: one line 'attn_shapes: <file>:<line>: <what was expected>' on stderr.\n"
                 "Exit status 0, or 2 (bad arguments or a malformed file).\n");
}

static void bad_usage(const char *what, const char *arg) {
    fprintf(stderr, "attn_shapes: %s%s%s\n", what, arg ? arg : "", arg ? "'" : "");
    fprintf(stderr, "usage: attn_shapes --cmake PREFIX FILE | --json FILE | --checks GROUP | --checks-json |\n"
                    "                   --tuned KERNEL TUNABLES [FILE...] | --help\n");
    exit(2);
}

/* s as a JSON string */
static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* n as a JSON number, 0 (absent) as null */
static void json_size(const char *key, int n) {
    printf("  \"%s\": ", key);
    if (n)
        printf("%d,\n", n);
    else
        printf("null,\n");
}

/* The cases of m (attn_shapes_cases), or exits; *n their number. */
static int *cases_of(const attn_shape_matrix *m, int *n) {
    long total = attn_shapes_n_cases(m);
    int *rows = malloc(sizeof *rows * (size_t)(total ? total : 1) * ATTN_SHAPES_CASE_AXES);
    *n = rows && total <= 1L << 24 ? attn_shapes_cases(m, rows, (int)total) : -1;
    if (*n < 0) {
        fprintf(stderr, "attn_shapes: %ld cases: too many to enumerate\n", total);
        exit(2);
    }
    return rows;
}

static void print_json(const char *file, const attn_shape_matrix *m) {
    printf("{\n  \"file\": ");
    json_string(file);
    printf(",\n  \"axes\": {");
    for (int a = 0; a < ATTN_SHAPES_N_AXES; a++) {
        printf("%s\"%s\": [", a ? ", " : "", attn_axes[a].key);
        for (int i = 0; i < m->axis[a].n; i++) {
            printf("%s", i ? ", " : "");
            json_string(m->axis[a].value[i]);
        }
        printf("]");
    }
    printf("},\n");
    json_size("batch", m->batch), json_size("heads", m->heads);
    json_size("tokens", m->tokens), json_size("hidden", m->hidden);
    printf("  \"shapes\": [");
    for (int s = 0; s < m->n_shapes; s++)
        printf("%s{\"name\": \"%s\", \"seqlen_q\": %d, \"seqlen_k\": %d}", s ? ", " : "", m->shape[s].name,
               m->shape[s].seqlen_q, m->shape[s].seqlen_k);
    printf("],\n  \"sequences\": [");
    for (int b = 0; b < m->n_batches; b++) printf("%s\"%s\"", b ? ", " : "", m->packed[b].text);
    printf("],\n  \"cases\": [");
    int n, *rows = cases_of(m, &n);
    for (int r = 0; r < n; r++) {
        const int *c = rows + (size_t)r * ATTN_SHAPES_CASE_AXES;
        const attn_shapes_shape *s = &m->shape[c[3]];
        printf("%s\n    {\"dtype\": \"%s\", \"head_dim\": \"%s\", \"mask\": \"%s\", \"shape\": \"%s\", "
               "\"seqlen_q\": %d, \"seqlen_k\": %d}",
               r ? "," : "", m->axis[ATTN_SHAPES_DTYPE].value[c[0]], m->axis[ATTN_SHAPES_HEAD_DIM].value[c[1]],
               m->axis[ATTN_SHAPES_MASK].value[c[2]], s->name, s->seqlen_q, s->seqlen_k);
    }
    printf("%s]\n}\n", n ? "\n  " : "");
    free(rows);
}

/* set(<prefix>_<name> "<v0>;<v1>;...") for an axis; the values hold no '"', '\', '$' or ';' */
static void cmake_list(const char *prefix, const char *name, const attn_shapes_values *a) {
    printf("set(%s_%s \"", prefix, name);
    for (int i = 0; i < a->n; i++) printf("%s%s", i ? ";" : "", a->value[i]);
    printf("\")\n");
}

static void cmake_size(const char *prefix, const char *name, int n) {
    if (n)
        printf("set(%s_%s \"%d\")\n", prefix, name, n);
    else
        printf("set(%s_%s \"\")\n", prefix, name);
}

/* The variables attn_read_shapes (cmake/shapes.cmake) gives its caller. */
static void print_cmake(const char *prefix, const attn_shape_matrix *m) {
    int n, *rows = cases_of(m, &n);
    printf("set(%s_CASES \"", prefix);
    for (int r = 0; r < n; r++) {
        const int *c = rows + (size_t)r * ATTN_SHAPES_CASE_AXES;
        const attn_shapes_shape *s = &m->shape[c[3]];
        printf("%s%s:%s:%s:%d:%d:%s", r ? ";" : "", m->axis[ATTN_SHAPES_DTYPE].value[c[0]],
               m->axis[ATTN_SHAPES_HEAD_DIM].value[c[1]], m->axis[ATTN_SHAPES_MASK].value[c[2]], s->seqlen_q,
               s->seqlen_k, s->name);
    }
    printf("\")\n");
    free(rows);
    cmake_size(prefix, "BATCH", m->batch), cmake_size(prefix, "HEADS", m->heads);
    cmake_size(prefix, "TOKENS", m->tokens), cmake_size(prefix, "HIDDEN", m->hidden);
    for (int a = 0; a < ATTN_SHAPES_N_AXES; a++) cmake_list(prefix, attn_axes[a].cmake, &m->axis[a]);
    printf("set(%s_AXIS_OPTIONS \"", prefix); /* what attn_correctness takes beyond dtype, head dim and mask */
    for (int a = 0, n = 0; a < ATTN_SHAPES_N_AXES; a++) {
        if (!attn_axes[a].dflt || !m->axis[a].n) continue;
        printf("%s--%s;", n++ ? ";" : "", attn_axes[a].option);
        for (int i = 0; i < m->axis[a].n; i++) printf("%s%s", i ? "," : "", m->axis[a].value[i]);
    }
    printf("\")\n");
    printf("set(%s_PACKED \"", prefix);
    for (int b = 0; b < m->n_batches; b++) printf("%s%s", b ? ";" : "", m->packed[b].text);
    printf("\")\nset(%s_SHAPES \"", prefix);
    for (int s = 0; s < m->n_shapes; s++)
        printf("%s%dx%d", s ? "," : "", m->shape[s].seqlen_q, m->shape[s].seqlen_k);
    printf("\")\n");
}

static void print_checks(const char *group) {
    int n = 0;
    for (int i = 0; i < N_CHECKS; i++)
        if (!strcmp(checks[i].group, group)) printf("%s%s", n++ ? "," : "", checks[i].name);
    if (!n) {
        fprintf(stderr, "attn_shapes: --checks: no check in group '%s' (harness/checks.def)\n", group);
        exit(2);
    }
    printf("\n");
}

static void print_checks_json(void) {
    printf("[");
    for (int i = 0; i < N_CHECKS; i++) {
        printf("%s\n  {\"name\": \"%s\", \"group\": \"%s\", \"summary\": ", i ? "," : "", checks[i].name,
               checks[i].group);
        json_string(checks[i].summary);
        printf("}");
    }
    printf("\n]\n");
}

/* One CMake list element "<gpu>|<dtype>|<head dim>|<causal>|<lo>|<hi>|<v>,<v>,..." (the names
 * hold no ';': the parser refuses it). */
typedef struct {
    attn_tuned_spec spec;
    int printed;
} tuned_out;

static void print_tuned_entry(void *user, const attn_tuned_entry *e) {
    tuned_out *out = user;
    printf("%s%s|%s|%d|%d|%d|%d|", out->printed++ ? ";" : "", e->gpu, e->dtype, e->head_dim, e->causal, e->seqlen_lo,
           e->seqlen_hi);
    for (int t = 0; t < out->spec.n; t++) printf("%s%d", t ? "," : "", e->values[t]);
}

/* --tuned: every file parsed in order; the first error stops it. */
static void print_tuned(const char *kernel, const char *tunables, char **files, int n) {
    static char err[1024];
    tuned_out out = {.printed = 0};
    if (attn_tuned_spec_parse(tunables, &out.spec, err, sizeof err)) bad_usage(err, NULL);
    for (int i = 0; i < n; i++) {
        char *text;
        size_t len;
        int e = attn_text_file_read(files[i], &text, &len);
        if (e) {
            fprintf(stderr, "attn_shapes: %s: cannot read: %s\n", files[i], strerror(e));
            exit(2);
        }
        int bad = attn_tuned_parse(text, len, files[i], kernel, &out.spec, print_tuned_entry, &out, err, sizeof err);
        free(text);
        if (bad) {
            fprintf(stderr, "attn_shapes: %s\n", err);
            exit(2);
        }
    }
    printf("\n");
}

/* A CMake variable name's start: letters, digits and '_' */
static int cmake_name(const char *s) {
    return *s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == strlen(s);
}

static attn_shape_matrix *read_or_exit(const char *path) {
    static char err[1024];
    attn_shape_matrix *m = malloc(sizeof *m);
    if (!m || attn_shapes_read(path, m, err, sizeof err)) {
        fprintf(stderr, "attn_shapes: %s\n", m ? err : "out of memory");
        exit(2);
    }
    return m;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "--help") || !strcmp(mode, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(mode, "--cmake")) {
        if (argc != 4) bad_usage("--cmake: expected PREFIX FILE", NULL);
        if (!cmake_name(argv[2])) bad_usage("--cmake: PREFIX: expected letters, digits and '_', got '", argv[2]);
        attn_shape_matrix *m = read_or_exit(argv[3]);
        print_cmake(argv[2], m);
        free(m);
    } else if (!strcmp(mode, "--json")) {
        if (argc != 3) bad_usage("--json: expected FILE", NULL);
        attn_shape_matrix *m = read_or_exit(argv[2]);
        print_json(argv[2], m);
        free(m);
    } else if (!strcmp(mode, "--checks")) {
        if (argc != 3) bad_usage("--checks: expected GROUP", NULL);
        print_checks(argv[2]);
    } else if (!strcmp(mode, "--tuned")) {
        if (argc < 4) bad_usage("--tuned: expected KERNEL TUNABLES [FILE...]", NULL);
        print_tuned(argv[2], argv[3], argv + 4, argc - 4);
    } else if (!strcmp(mode, "--checks-json")) {
        if (argc != 2) bad_usage("--checks-json: takes no argument", NULL);
        print_checks_json();
    } else {
        bad_usage(argc > 1 ? "expected --cmake, --json, --checks, --checks-json, --tuned or --help, got '" : "expected an option",
                  argc > 1 ? mode : NULL);
    }
    return fflush(stdout) ? 2 : 0;
}
