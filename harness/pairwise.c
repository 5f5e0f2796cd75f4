/* Pairwise covering arrays (pairwise.h): each row starts from the first pair not yet
 * covered, then fills every other axis with the value that covers the most uncovered pairs
 * with the values already chosen, so each row covers at least one new pair. */
#include "pairwise.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_AXES = 16, MAX_VALUES = 64 };

typedef struct {
    int n, size[MAX_AXES];
    unsigned char *covered; /* [a][b][va][vb], a < b */
} pairs;

static unsigned char *cell(const pairs *P, int a, int va, int b, int vb) {
    if (a > b) {
        int t = a; a = b; b = t;
        t = va; va = vb; vb = t;
    }
    return &P->covered[(((size_t)a * MAX_AXES + b) * MAX_VALUES + va) * MAX_VALUES + vb];
}

/* The first uncovered pair; 0 when there is none. */
static int first_uncovered(const pairs *P, int *a, int *va, int *b, int *vb) {
    for (*a = 0; *a < P->n; (*a)++)
        for (*b = *a + 1; *b < P->n; (*b)++)
            for (*va = 0; *va < P->size[*a]; (*va)++)
                for (*vb = 0; *vb < P->size[*b]; (*vb)++)
                    if (!*cell(P, *a, *va, *b, *vb)) return 1;
    return 0;
}

/* Completes row[] (entries -1 unset) axis by axis with the most newly covered pairs. */
static void fill_row(const pairs *P, int *row) {
    for (int a = 0; a < P->n; a++) {
        if (row[a] >= 0) continue;
        int best = 0, best_gain = -1;
        for (int v = 0; v < P->size[a]; v++) {
            int gain = 0;
            for (int b = 0; b < P->n; b++)
                if (b != a && row[b] >= 0) gain += !*cell(P, a, v, b, row[b]);
            if (gain > best_gain) best = v, best_gain = gain;
        }
        row[a] = best;
    }
}

int attn_pairwise(const int *sizes, int n_axes, int *rows, int max_rows) {
    if (n_axes < 1 || n_axes > MAX_AXES) return -1;
    for (int a = 0; a < n_axes; a++)
        if (sizes[a] < 1 || sizes[a] > MAX_VALUES) return -1;
    if (n_axes == 1) {
        if (sizes[0] > max_rows) return -1;
        for (int v = 0; v < sizes[0]; v++) rows[v] = v;
        return sizes[0];
    }
    pairs P = {n_axes, {0}, calloc((size_t)MAX_AXES * MAX_AXES * MAX_VALUES * MAX_VALUES, 1)};
    if (!P.covered) return -1;
    memcpy(P.size, sizes, sizeof(int) * (size_t)n_axes);
    int n = 0, a, va, b, vb;
    while (first_uncovered(&P, &a, &va, &b, &vb)) {
        if (n == max_rows) {
            n = -1;
            break;
        }
        int *row = rows + (size_t)n * n_axes;
        for (int i = 0; i < n_axes; i++) row[i] = -1;
        row[a] = va, row[b] = vb;
        fill_row(&P, row);
        for (int i = 0; i < n_axes; i++)
            for (int j = i + 1; j < n_axes; j++) *cell(&P, i, row[i], j, row[j]) = 1;
        n++;
    }
    free(P.covered);
    return n;
}

int attn_axis_rows(const int *sizes, int n_axes, int pairwise, int *rows, int max_rows) {
    if (pairwise) return attn_pairwise(sizes, n_axes, rows, max_rows);
    if (n_axes < 1 || !rows) return -1;
    long total = 1;
    for (int a = 0; a < n_axes; a++) {
        if (sizes[a] < 1) return -1;
        total *= sizes[a];
        if (total > max_rows) return -1;
    }
    for (long r = 0; r < total; r++)
        for (long a = n_axes - 1, k = r; a >= 0; k /= sizes[a], a--) rows[r * n_axes + a] = (int)(k % sizes[a]);
    return (int)total;
}
