/* The correctness verdict rule (the method of FlashAttention's tests): a kernel output O
 * is judged against the golden reference G by how far a naive low-precision
 * implementation R lands from G. Pure host code, unit-tested on synthetic arrays. */
#ifndef ATTN_VERDICT_H
#define ATTN_VERDICT_H

#include <stddef.h>
#include <stdint.h>
#include "attn_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    double max_factor, atol_steps;      /* max|O-G| <= max_factor*max|R-G| + atol_steps*step */
    double mean_factor, mean_eps_steps; /* mean|O-G| <= mean_factor*mean|R-G| + eps */
    double lse_atol, lse_rtol;          /* |L-Lg| <= lse_atol + lse_rtol*|Lg| */
    /* the same rule for the backward's dQ, dK and dV (section [gradients]) */
    double grad_max_factor, grad_atol_steps, grad_mean_factor, grad_mean_eps_steps;
} attn_tolerance;

/* The output rule's factors for gradients: t with [gradients]' values in the [output] fields. */
attn_tolerance attn_tolerance_for_gradients(const attn_tolerance *t);

/* Reads an INI file (see thresholds/tolerance.ini). Every key is required, once, with a
 * finite number >= 0; every line is read whole (harness/ini_file.h). Returns 0, or non-zero
 * with "path:line: what was expected" (or the missing key) in err. */
int attn_tolerance_load(const char *path, attn_tolerance *t, char *err, size_t errlen);
/* The same on a file's text in memory, text[0..len); `file` names it in the messages. */
int attn_tolerance_parse(const char *text, size_t len, const char *file, attn_tolerance *t, char *err, size_t errlen);

/* Spacing of representable dtype values at magnitude x (fp16: 10 mantissa bits, bf16: 7). */
double attn_dtype_step(attn_dtype dtype, double x);

typedef enum {
    ATTN_RULE_PASS = 0,
    ATTN_RULE_NONFINITE,  /* NaN/Inf where G is finite */
    ATTN_RULE_EMPTY_ROW,  /* a row that sees no key is not exactly zero */
    ATTN_RULE_MAX,        /* max|O-G| above its bound */
    ATTN_RULE_MEAN,       /* mean|O-G| above its bound */
} attn_rule;

typedef struct {
    attn_rule rule;        /* the first rule that failed, or PASS */
    double max_err, max_ref_err, max_bound, atol, step;
    double mean_err, mean_ref_err, mean_bound;
    size_t worst;          /* index of the largest |O-G| (or of the first bad element) */
    size_t bad_count;      /* elements breaking the failed rule (non-finite / empty-row) */
} attn_output_verdict;

/* What the rule needs from a comparison of O with G and R, gathered on the host
 * (attn_judge_output) or on the GPU (the benchmarks). Non-finite O elements are counted,
 * not summed; `worst` is the first index of the largest |O-G|. */
typedef struct {
    double max_err, sum_err, max_ref_err, sum_ref_err, max_abs_g;
    size_t worst, counted;
    size_t nonfinite, first_nonfinite;         /* O non-finite where G is finite */
    size_t empty_nonzero, first_empty_nonzero; /* a row that sees no key, not exactly 0 */
} attn_output_stats;

/* The rule, from the gathered figures. */
void attn_output_decide(const attn_output_stats *st, attn_dtype dtype, const attn_tolerance *t,
                        attn_output_verdict *v);

/* o, g, r: n = rows*head_dim floats, row-major; row_empty[row] != 0 marks a row that sees
 * no key (G is zero there). Gathers the figures, then attn_output_decide. */
void attn_judge_output(const float *o, const float *g, const float *r, size_t rows,
                       int head_dim, const unsigned char *row_empty, attn_dtype dtype,
                       const attn_tolerance *t, attn_output_verdict *v);

typedef struct {
    int ok;
    double max_err;        /* largest |L-Lg| over rows that see keys */
    double bound;          /* its bound at that row */
    size_t worst;          /* row of the worst (or first bad) value */
    size_t bad_count;      /* rows out of bound, non-finite, or wrong for empty rows */
} attn_lse_verdict;

/* lse, g: `rows` floats; g is -INFINITY exactly for rows that see no key. */
void attn_judge_lse(const float *lse, const float *g, size_t rows, const attn_tolerance *t,
                    attn_lse_verdict *v);

const char *attn_rule_name(attn_rule r);

#ifdef __cplusplus
}
#endif
#endif
