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

/* The axes that list values, as the file names them (attn_shapes_axis_names). */
typedef enum {
    ATTN_SHAPES_DTYPE,
    ATTN_SHAPES_HEAD_DIM,
    ATTN_SHAPES_MASK,
    ATTN_SHAPES_HEADS_K,
    ATTN_SHAPES_WINDOW,
    ATTN_SHAPES_SOFTCAP,
    ATTN_SHAPES_PAGE_SIZE,
    ATTN_SHAPES_N_AXES
} attn_shapes_axis;

extern const char *const attn_shapes_axis_names[ATTN_SHAPES_N_AXES]; /* "dtype", "head_dim", ... */

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
