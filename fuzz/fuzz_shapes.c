/* The shapes parser (harness/shapes.c): a shape-matrix file read by path, as the configure step
 * reads shapes/<name>.txt, then every value it kept through the axis functions that the programs
 * call on them. Beyond memory and UB errors it holds the parser to its promises: every error
 * names the file; every kept value passes its axis's check and parse, and what
 * attn_axis_format writes parses back; the cases enumerate within the matrix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "shapes.h"

enum { MAX_ENUMERATED = 1 << 16 }; /* cases enumerated per input: the enumeration, not its size, is tested */

static void check_values(const attn_shape_matrix *m) {
    for (int k = 0; k < ATTN_SHAPES_N_AXES; k++) {
        const attn_axis_info *a = &attn_axes[k];
        for (int i = 0; i < m->axis[k].n; i++) {
            const char *text = m->axis[k].value[i], *bad, *why;
            int bad_len;
            attn_axis_value v, back;
            char out[64], label[64];
            if ((why = attn_axis_check(a->kind, text, &bad, &bad_len)) || (why = attn_axis_parse(a->kind, text, &v)))
                fuzz_fail("%s '%s' was kept but does not parse: %s", a->key, text, why);
            attn_axis_label(a, &v, 0, label, sizeof label);
            attn_axis_format(a->kind, &v, out, sizeof out);
            if ((why = attn_axis_parse(a->kind, out, &back)))
                fuzz_fail("%s '%s' formats as '%s', which does not parse: %s", a->key, text, out, why);
            if (a->kind != ATTN_KIND_NUMBER && (back.i[0] != v.i[0] || back.i[1] != v.i[1]))
                fuzz_fail("%s '%s' formats as '%s', which parses to another value", a->key, text, out);
        }
    }
}

static void check_cases(const attn_shape_matrix *m) {
    long n = attn_shapes_n_cases(m);
    if (n <= 0 || n > MAX_ENUMERATED) return;
    int *rows = malloc(sizeof *rows * (size_t)n * ATTN_SHAPES_CASE_AXES);
    if (!rows) return;
    const int sizes[ATTN_SHAPES_CASE_AXES] = {m->axis[ATTN_SHAPES_DTYPE].n, m->axis[ATTN_SHAPES_HEAD_DIM].n,
                                              m->axis[ATTN_SHAPES_MASK].n, m->n_shapes};
    int got = attn_shapes_cases(m, rows, (int)n);
    if (got != n) fuzz_fail("attn_shapes_cases gave %d cases, attn_shapes_n_cases %ld", got, n);
    for (long r = 0; r < n; r++)
        for (int a = 0; a < ATTN_SHAPES_CASE_AXES; a++) {
            int i = rows[r * ATTN_SHAPES_CASE_AXES + a];
            if (i < 0 || i >= sizes[a]) fuzz_fail("case %ld: index %d of axis %d outside 0..%d", r, i, a, sizes[a] - 1);
        }
    free(rows);
}

/* The axis functions on any word (the programs' options take them from the command line). */
static void check_word(const char *text) {
    const char *word_end = strchr(text, '\n');
    char word[64];
    size_t n = word_end ? (size_t)(word_end - text) : strlen(text);
    if (n >= sizeof word) return;
    memcpy(word, text, n);
    word[n] = 0;
    char *heap = strdup(word); /* exactly its length: ASan sees a read before or past it */
    for (int kind = ATTN_KIND_DTYPE; kind <= ATTN_KIND_PAGE && heap; kind++) {
        const char *bad;
        int bad_len;
        attn_axis_value v;
        const char *why = attn_axis_check((attn_axis_kind)kind, heap, &bad, &bad_len);
        if (why && (bad < heap || bad_len < 0 || bad + bad_len > heap + n))
            fuzz_fail("attn_axis_check('%s') points outside the text", heap);
        if (!why && !attn_axis_parse((attn_axis_kind)kind, heap, &v)) {
            char out[64];
            attn_axis_format((attn_axis_kind)kind, &v, out, sizeof out);
        }
    }
    free(heap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static attn_shape_matrix m; /* 60 KB: not on the stack */
    char err[1024];
    const char *path = fuzz_file(data, size);
    if (attn_shapes_read(path, &m, err, sizeof err) == 0) {
        check_values(&m);
        check_cases(&m);
    } else if (strncmp(err, path, strlen(path))) {
        fuzz_fail("an error that does not name the file: %s", err);
    }
    char *text = fuzz_text(data, size);
    check_word(text);
    free(text);
    return 0;
}
