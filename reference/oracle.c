/* Float64 CPU oracle for attention (see oracle.h): double accumulation throughout, softmax
 * with max subtraction, the attn_abi.h mask (bottom-right aligned window, causal = right
 * bound 0), empty rows give o = 0 and lse = -INFINITY. Meant for small shapes;
 * O(batch*heads*seqlen_q*seqlen_k*(head_dim + head_dim_v)). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "oracle.h"

static int refuse(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && len) vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return 1;
}

int attn_oracle_check(const attn_oracle_problem *pr, char *err, size_t len)
{
    const struct { const char *field; int value, min; } ints[] = {
        {"batch", pr->batch, 1},           {"heads", pr->heads, 1},
        {"heads_k", pr->heads_k, 1},       {"head_dim", pr->head_dim, 1},
        {"head_dim_v", pr->head_dim_v, 0}, {"window_left", pr->window_left, -1},
        {"window_right", pr->window_right, -1}, {"max_seqlen_q", pr->max_seqlen_q, 0},
        {"max_seqlen_k", pr->max_seqlen_k, 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].value < ints[i].min)
            return refuse(err, len, "%s %d must be >= %d", ints[i].field, ints[i].value, ints[i].min);
    if (pr->heads % pr->heads_k)
        return refuse(err, len, "heads_k %d does not divide heads %d", pr->heads_k, pr->heads);
    if (pr->causal && pr->window_right > 0)
        return refuse(err, len, "window_right %d with causal (causal means window_right 0)", pr->window_right);
    for (int b = 0; b < pr->batch; b++) {
        if (pr->seqlen_q[b] < 0 || pr->seqlen_q[b] > pr->max_seqlen_q)
            return refuse(err, len, "seqlen_q[%d] = %d is outside [0, max_seqlen_q %d]", b, pr->seqlen_q[b],
                          pr->max_seqlen_q);
        if (pr->seqlen_k[b] < 0 || pr->seqlen_k[b] > pr->max_seqlen_k)
            return refuse(err, len, "seqlen_k[%d] = %d is outside [0, max_seqlen_k %d] (the keys it stores)", b,
                          pr->seqlen_k[b], pr->max_seqlen_k);
    }
    return 0;
}

/* Score of query row q against key row k: scaled, then capped (before any mask). */
static double score(const float *q, const float *k, int head_dim, double scale, double softcap)
{
    double acc = 0.0;
    for (int d = 0; d < head_dim; d++) acc += (double)q[d] * (double)k[d];
    double s = scale * acc;
    return softcap > 0 ? softcap * tanh(s / softcap) : s;
}

int attn_oracle_forward(const attn_oracle_problem *pr, const float *q, const float *k,
                        const float *v, double *o, double *lse)
{
    if (attn_oracle_check(pr, NULL, 0)) return 1;
    const int heads_k = pr->heads_k;
    const int group = pr->heads / heads_k; /* query heads per KV head */
    const size_t D = (size_t)pr->head_dim;
    const size_t DV = (size_t)(pr->head_dim_v > 0 ? pr->head_dim_v : pr->head_dim);
    const size_t SQ = (size_t)pr->max_seqlen_q, SK = (size_t)pr->max_seqlen_k;
    /* Bounds on d = j - (i + sk - sq), sk the used keys: d <= R and d >= -L; -1 is unbounded. */
    const long long R = pr->causal ? 0 : pr->window_right;
    const long long L = pr->window_left;

    for (int b = 0; b < pr->batch; b++) {
        const long long sq = pr->seqlen_q[b], sk = pr->seqlen_k[b];
        for (int h = 0; h < pr->heads; h++) {
            const size_t bh = (size_t)b * (size_t)pr->heads + (size_t)h;
            const size_t bhk = (size_t)b * (size_t)heads_k + (size_t)(h / group);
            const float *qh = q + bh * SQ * D;
            const float *kh = k + bhk * SK * D;
            const float *vh = v + bhk * SK * DV;
            for (long long i = 0; i < sq; i++) {
                const float *qi = qh + (size_t)i * D;
                double *oi = o + (bh * SQ + (size_t)i) * DV;

                /* The visible keys are one contiguous range [lo, hi] (bottom-right aligned). */
                const long long diag = i + sk - sq; /* the key with d = 0 */
                long long lo = L < 0 ? 0 : diag - L, hi = R < 0 ? sk - 1 : diag + R;
                if (lo < 0) lo = 0;
                if (hi > sk - 1) hi = sk - 1;

                for (size_t c = 0; c < DV; c++) oi[c] = 0.0;
                if (lo > hi) {
                    if (lse) lse[bh * SQ + (size_t)i] = -INFINITY;
                    continue;
                }

                /* Two passes (scores recomputed) so no scratch allocation is needed. */
                double m = -INFINITY;
                for (long long j = lo; j <= hi; j++) {
                    double s = score(qi, kh + (size_t)j * D, pr->head_dim, pr->softmax_scale,
                                     pr->softcap);
                    if (s > m) m = s;
                }
                double l = 0.0;
                for (long long j = lo; j <= hi; j++) {
                    double w = exp(score(qi, kh + (size_t)j * D, pr->head_dim,
                                         pr->softmax_scale, pr->softcap) - m);
                    const float *vj = vh + (size_t)j * DV;
                    l += w;
                    for (size_t c = 0; c < DV; c++) oi[c] += w * (double)vj[c];
                }
                for (size_t c = 0; c < DV; c++) oi[c] /= l;
                if (lse) lse[bh * SQ + (size_t)i] = m + log(l);
            }
        }
    }
    return 0;
}
