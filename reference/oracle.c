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

/* One query row's backward (the visible keys [lo, hi], their max score m and sum l): with
 * p_j = exp(s_j - m) / l, dP_j = dout . v_j and D = sum_j p_j dP_j, dv_j += p_j dout and
 * dS_j = p_j (dP_j - D), through the softcap's derivative and the scale into dq_i and dk_j. */
typedef struct {
    const float *qi, *kh, *vh;
    const double *douti;
    double *dqi, *dkh, *dvh;
    long long lo, hi;
    double m, l;
} oracle_row;

static void backward_row(const attn_oracle_problem *pr, const oracle_row *r, size_t D, size_t DV)
{
    double dsum = 0.0; /* D = sum_j p_j dP_j */
    for (long long j = r->lo; j <= r->hi; j++) {
        const double p = exp(score(r->qi, r->kh + (size_t)j * D, pr->head_dim, pr->softmax_scale,
                                   pr->softcap) - r->m) / r->l;
        double dp = 0.0;
        for (size_t c = 0; c < DV; c++) dp += r->douti[c] * (double)r->vh[(size_t)j * DV + c];
        dsum += p * dp;
    }
    for (long long j = r->lo; j <= r->hi; j++) {
        const float *kj = r->kh + (size_t)j * D, *vj = r->vh + (size_t)j * DV;
        const double s = score(r->qi, kj, pr->head_dim, pr->softmax_scale, pr->softcap);
        const double p = exp(s - r->m) / r->l;
        double dp = 0.0;
        for (size_t c = 0; c < DV; c++) {
            dp += r->douti[c] * (double)vj[c];
            r->dvh[(size_t)j * DV + c] += p * r->douti[c];
        }
        double ds = p * (dp - dsum);
        if (pr->softcap > 0) ds *= 1.0 - (s / pr->softcap) * (s / pr->softcap);
        ds *= pr->softmax_scale;
        for (size_t c = 0; c < D; c++) {
            r->dqi[c] += ds * (double)kj[c];
            r->dkh[(size_t)j * D + c] += ds * (double)r->qi[c];
        }
    }
}

int attn_oracle_backward(const attn_oracle_problem *pr, const float *q, const float *k,
                         const float *v, const double *dout, double *dq, double *dk, double *dv)
{
    if (attn_oracle_check(pr, NULL, 0)) return 1;
    const int group = pr->heads / pr->heads_k;
    const size_t D = (size_t)pr->head_dim;
    const size_t DV = (size_t)(pr->head_dim_v > 0 ? pr->head_dim_v : pr->head_dim);
    const size_t SQ = (size_t)pr->max_seqlen_q, SK = (size_t)pr->max_seqlen_k;
    const size_t B = (size_t)pr->batch, H = (size_t)pr->heads, HK = (size_t)pr->heads_k;
    for (size_t e = 0; e < B * H * SQ * D; e++) dq[e] = 0.0;
    for (size_t e = 0; e < B * HK * SK * D; e++) dk[e] = 0.0;
    for (size_t e = 0; e < B * HK * SK * DV; e++) dv[e] = 0.0;
    const long long R = pr->causal ? 0 : pr->window_right, L = pr->window_left;
    for (size_t b = 0; b < B; b++) {
        const long long sq = pr->seqlen_q[b], sk = pr->seqlen_k[b];
        for (size_t h = 0; h < H; h++) {
            const size_t bh = b * H + h, bhk = b * HK + h / (size_t)group;
            oracle_row r = {.kh = k + bhk * SK * D, .vh = v + bhk * SK * DV, .dkh = dk + bhk * SK * D,
                            .dvh = dv + bhk * SK * DV};
            for (long long i = 0; i < sq; i++) {
                const long long diag = i + sk - sq; /* as attn_oracle_forward */
                r.lo = L < 0 ? 0 : diag - L, r.hi = R < 0 ? sk - 1 : diag + R;
                if (r.lo < 0) r.lo = 0;
                if (r.hi > sk - 1) r.hi = sk - 1;
                if (r.lo > r.hi) continue; /* sees no key: o is 0 whatever q, k, v are */
                r.qi = q + (bh * SQ + (size_t)i) * D, r.dqi = dq + (bh * SQ + (size_t)i) * D;
                r.douti = dout + (bh * SQ + (size_t)i) * DV;
                r.m = -INFINITY, r.l = 0.0;
                for (long long j = r.lo; j <= r.hi; j++) {
                    const double s = score(r.qi, r.kh + (size_t)j * D, pr->head_dim, pr->softmax_scale, pr->softcap);
                    if (s > r.m) r.m = s;
                }
                for (long long j = r.lo; j <= r.hi; j++)
                    r.l += exp(score(r.qi, r.kh + (size_t)j * D, pr->head_dim, pr->softmax_scale, pr->softcap) - r.m);
                backward_row(pr, &r, D, DV);
            }
        }
    }
    return 0;
}
