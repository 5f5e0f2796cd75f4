/* Float64 CPU oracle for attention (see reference.h): double accumulation throughout,
 * softmax with max subtraction, bottom-right causal mask, empty rows give o = 0 and
 * lse = -INFINITY. Meant for small shapes; O(batch*heads*seqlen_q*seqlen_k*head_dim). */
#include <math.h>
#include <stddef.h>

#include "reference.h"

/* Scaled score of query row q against key row k. */
static double score(const float *q, const float *k, int head_dim, double scale)
{
    double acc = 0.0;
    for (int d = 0; d < head_dim; d++) acc += (double)q[d] * (double)k[d];
    return scale * acc;
}

void attn_oracle_forward(int batch, int heads, int seqlen_q, int seqlen_k, int head_dim,
                         int causal, double softmax_scale, const float *q, const float *k,
                         const float *v, double *o, double *lse)
{
    const size_t D = (size_t)head_dim;
    for (size_t bh = 0; bh < (size_t)batch * (size_t)heads; bh++) {
        const float *qh = q + bh * (size_t)seqlen_q * D;
        const float *kh = k + bh * (size_t)seqlen_k * D;
        const float *vh = v + bh * (size_t)seqlen_k * D;
        for (int i = 0; i < seqlen_q; i++) {
            const float *qi = qh + (size_t)i * D;
            double *oi = o + (bh * (size_t)seqlen_q + (size_t)i) * D;

            /* Bottom-right causal: key j is visible iff j <= i + seqlen_k - seqlen_q. */
            long long nvis = seqlen_k;
            if (causal) {
                nvis = (long long)i + seqlen_k - seqlen_q + 1;
                if (nvis < 0) nvis = 0;
                if (nvis > seqlen_k) nvis = seqlen_k;
            }

            for (size_t d = 0; d < D; d++) oi[d] = 0.0;
            if (nvis == 0) {
                if (lse) lse[bh * (size_t)seqlen_q + (size_t)i] = -INFINITY;
                continue;
            }

            /* Two passes (scores recomputed) so no scratch allocation is needed. */
            double m = -INFINITY;
            for (long long j = 0; j < nvis; j++) {
                double s = score(qi, kh + (size_t)j * D, head_dim, softmax_scale);
                if (s > m) m = s;
            }
            double l = 0.0;
            for (long long j = 0; j < nvis; j++) {
                double w = exp(score(qi, kh + (size_t)j * D, head_dim, softmax_scale) - m);
                const float *vj = vh + (size_t)j * D;
                l += w;
                for (size_t d = 0; d < D; d++) oi[d] += w * (double)vj[d];
            }
            for (size_t d = 0; d < D; d++) oi[d] /= l;
            if (lse) lse[bh * (size_t)seqlen_q + (size_t)i] = m + log(l);
        }
    }
}
