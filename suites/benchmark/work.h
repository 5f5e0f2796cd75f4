/* attn_benchmark's work per measured call of the dense matrix, by pass (harness/thresholds.h's
 * attn_pass): pure arithmetic, unit-tested (tests/test_bench.c compiles work.c in). */
#ifndef ATTN_BENCH_WORK_H
#define ATTN_BENCH_WORK_H

typedef struct {
    double flops, bytes;
} bench_work;

/* FlashAttention's convention. FLOPs: the forward's 4 B H S^2 D (its two GEMMs, 2 S^2 D each
 * per head), halved when causal (S^2 / 2 visible pairs, the diagonal's half not counted); the
 * backward 2.5 times that (its five GEMMs: S and dP recomputed, dQ, dK, dV), forward then
 * backward 3.5 times. Bytes: the least traffic at 2 bytes an element and 4 a float, n = B S H D:
 * the forward reads Q, K, V and writes O (8 n); the backward reads Q, K, V, O, dO and the LSE
 * (B H S floats) and writes dQ, dK, dV (16 n + 4 B H S); forward then backward is both, its
 * forward also writing the LSE that its backward reads (24 n + 8 B H S). pass: an attn_pass;
 * anything else gives zeros. */
bench_work bench_work_dense(int pass, int batch, int heads, int seqlen, int head_dim, int causal);

#endif
