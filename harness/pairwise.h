/* A pairwise covering array: rows of axis values in which every pair of values of every
 * two axes appears at least once. Few rows cover what the full cross product would, for
 * bugs that need two features at once (FlashAttention's and cuDNN's feature matrices are
 * tested the same way). */
#ifndef ATTN_PAIRWISE_H
#define ATTN_PAIRWISE_H

/* Writes the rows (row r's value of axis a at rows[r * n_axes + a], values 0 .. sizes[a]-1)
 * and returns their number, or -1 when more than max_rows would be needed or the arguments
 * are bad. Greedy and deterministic: the same sizes give the same rows. With one axis,
 * each of its values once. */
int attn_pairwise(const int *sizes, int n_axes, int *rows, int max_rows);

/* The one place a test matrix's cases are enumerated: the cross product of the axes (the
 * last axis varying fastest) or, when `pairwise`, the rows of attn_pairwise. Rows as above;
 * returns their number, or -1 when more than max_rows or the arguments are bad. */
int attn_axis_rows(const int *sizes, int n_axes, int pairwise, int *rows, int max_rows);

#endif
