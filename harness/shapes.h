/* A shape-matrix file (shapes/<name>.txt; shapes/correctness.txt describes the format), parsed in
 * one place: the configure step runs it through tools/shapes.c (attn_shapes --cmake) to
 * generate the tests, the scripts through attn_shapes --json. Host-only C with libc and
 * pairwise.c alone, so that the configure step can compile it before anything is built. */
#ifndef ATTN_SHAPES_H
#define ATTN_SHAPES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    ATTN_SHAPES_MAX_VALUES = 64,  /* values of one axis line */
    ATTN_SHAPES_MAX_SHAPES = 256, /* seqlen values and shape lines together */
    ATTN_SHAPES_MAX_BATCHES = 64, /* 'sequences' lines */
    ATTN_SHAPES_MAX_SEQS = 16,    /* sequences in one batch (a rule of the format) */
    ATTN_SHAPES_WORD = 24,        /* the longest value, with its NUL */
    ATTN_SHAPES_MAX_LEN = 1 << 24 /* the largest length or dimension the programs take */
};

/* The axes that list values (harness/axes.def, in its order): ATTN_SHAPES_DTYPE, ... */
typedef enum {
#define ATTN_AXIS(key, NAME, ...) ATTN_SHAPES_##NAME,
#include "axes.def"
#undef ATTN_AXIS
    ATTN_SHAPES_N_AXES
} attn_shapes_axis;

/* The forms of the axes' values, each with one checker, parser and formatter here:
 * fp16|bf16, D|DxDV (head_dim_v), full|causal, a positive integer (<= ATTN_SHAPES_MAX_LEN),
 * a window L:R (each -1, unbounded, or a bound), a number >= 0 (0: off), a page size (0: none). */
typedef enum {
    ATTN_KIND_DTYPE,
    ATTN_KIND_DIMS,
    ATTN_KIND_MASK,
    ATTN_KIND_COUNT,
    ATTN_KIND_WINDOW,
    ATTN_KIND_NUMBER,
    ATTN_KIND_PAGE
} attn_axis_kind;

/* One line of axes.def. */
typedef struct {
    const char *key, *option, *cmake;
    attn_axis_kind kind;
    const char *dflt, *label; /* dflt NULL: a required axis; "": --heads */
} attn_axis_info;

extern const attn_axis_info attn_axes[ATTN_SHAPES_N_AXES];

/* A value: i[0] (the word's index for dtype, fp16 0, and mask, causal 1), i[1] the second
 * of a pair (DV, R; DV = D for a single D), f a number. */
typedef struct {
    int i[2];
    double f;
} attn_axis_value;

/* Whether `text` has the form of `kind`: NULL, or what was expected ("expected fp16 or bf16"),
 * the part at fault (all of text, or one of a pair) at *bad, *bad_len characters. */
const char *attn_axis_check(attn_axis_kind kind, const char *text, const char **bad, int *bad_len);

/* A text of the form into *v: NULL, or what was expected of a value out of range. */
const char *attn_axis_parse(attn_axis_kind kind, const char *text, attn_axis_value *v);

/* The case label's part for v ("kv2/", "d192v128/"); nothing when v is off (the window
 * -1:-1, 0 for a number or a page size, `off` for a count). Returns the characters written. */
int attn_axis_label(const attn_axis_info *a, const attn_axis_value *v, int off, char *out, size_t len);

/* v as an option takes it ("192x128", "-1:0", "30"). */
int attn_axis_format(attn_axis_kind kind, const attn_axis_value *v, char *out, size_t len);

/* The form for a usage text: "fp16|bf16", "D|DxDV", "L:R", ... */
const char *attn_axis_form(attn_axis_kind kind);

/* One axis's values as the file writes them ("192x128", "-1:-1", "30"), the form the
 * programs take them in; n = 0 when the file has no such line. */
typedef struct {
    int n;
    char value[ATTN_SHAPES_MAX_VALUES][ATTN_SHAPES_WORD];
} attn_shapes_values;

/* A dense shape: name s<S> for a seqlen value (S_q = S_k = S), q<Q>k<K> for a shape line. */
typedef struct {
    int seqlen_q, seqlen_k;
    char name[ATTN_SHAPES_WORD];
} attn_shapes_shape;

/* One 'sequences' line: a packed batch of sequences of their own lengths (0 allowed). */
typedef struct {
    int n;
    int seqlen_q[ATTN_SHAPES_MAX_SEQS], seqlen_k[ATTN_SHAPES_MAX_SEQS];
    char text[ATTN_SHAPES_MAX_SEQS * ATTN_SHAPES_WORD]; /* "QxK+QxK+...", as written */
} attn_shapes_batch;

typedef struct {
    attn_shapes_values axis[ATTN_SHAPES_N_AXES];
    int batch, heads;   /* 0 when the file sizes the problem by tokens and hidden */
    int tokens, hidden; /* 0 when it gives batch and heads */
    int n_shapes;       /* every seqlen value, then every shape line, each in file order */
    attn_shapes_shape shape[ATTN_SHAPES_MAX_SHAPES];
    int n_batches;
    attn_shapes_batch packed[ATTN_SHAPES_MAX_BATCHES];
} attn_shape_matrix;

/* Reads and validates the file at `path` into *m: 0, or 1 with "<path>:<line>: <what was
 * expected>" in err ("<path>: ..." for what no one line holds, e.g. a missing line). */
int attn_shapes_read(const char *path, attn_shape_matrix *m, char *err, size_t errlen);

/* The same on a file's text in memory; `file` names it in the messages. */
int attn_shapes_parse(const char *text, const char *file, attn_shape_matrix *m, char *err, size_t errlen);

/* The matrix's cases: the cross product dtype x head_dim x mask x shape, the shape varying
 * fastest, as attn_axis_rows enumerates it. Case r's indices are rows[r * ATTN_SHAPES_CASE_AXES
 * + {0: dtype, 1: head dim, 2: mask, 3: shape}]. Returns the number of cases (0 when the file
 * has packed batches only), or -1 when more than max_rows. */
enum { ATTN_SHAPES_CASE_AXES = 4 };
int attn_shapes_cases(const attn_shape_matrix *m, int *rows, int max_rows);

/* The number of cases attn_shapes_cases writes. */
long attn_shapes_n_cases(const attn_shape_matrix *m);

#ifdef __cplusplus
}
#endif
#endif
