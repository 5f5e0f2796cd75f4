/* The dense matrix's work by pass (work.h says how it is counted). */
#include "work.h"

#include "thresholds.h"

bench_work bench_work_dense(int pass, int batch, int heads, int seqlen, int head_dim, int causal) {
    const double n = (double)batch * seqlen * heads * head_dim; /* elements of each of Q, K, V, O */
    const double rows = (double)batch * heads * seqlen;          /* the LSE's floats */
    const double fwd_flops = 4.0 * batch * heads * (double)seqlen * seqlen * head_dim * (causal ? 0.5 : 1.0);
    const double fwd_bytes = 4.0 * n * 2, bwd_bytes = 8.0 * n * 2 + 4.0 * rows;
    switch (pass) {
    case ATTN_PASS_FWD: return (bench_work){fwd_flops, fwd_bytes};
    case ATTN_PASS_BWD: return (bench_work){2.5 * fwd_flops, bwd_bytes};
    case ATTN_PASS_FWD_BWD: return (bench_work){3.5 * fwd_flops, fwd_bytes + 4.0 * rows + bwd_bytes};
    default: return (bench_work){0, 0};
    }
}
