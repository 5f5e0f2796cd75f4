/* flash2's backward pass (bwd.cu, NOTES_bwd.md): its workspace and grid, from a problem's
 * scalars alone (attn_abi.h: bwd_workspace reads no device memory), so that bwd_workspace and
 * bwd agree by construction. Plain C, no CUDA calls: host code and unit tests can include it. */
#ifndef FLASH2_BWD_PLAN_H
#define FLASH2_BWD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "attn_abi.h"

/* host and device (space.h's macro): the kernels index the workspace with the plan's rules */
#ifndef FLASH2_HD
#ifdef __CUDACC__
#define FLASH2_HD __host__ __device__
#else
#define FLASH2_HD
#endif
#endif

/* Keys per main-kernel block: bwd_kernel.cuh's BwdConfig static_asserts that it uses this. */
#define FLASH2_BWD_BLOCK_KEYS 128
/* Deterministic mode: each of nsplit blocks per (batch, KV head) adds into its own float32 dQ
 * slice, which the post kernel sums in slice order. nsplit aims at this many blocks in all
 * (two per SM on a 132-SM GPU), at most one per key block, and the slices at most this many
 * bytes together (but always one). */
#define FLASH2_BWD_TARGET_BLOCKS 264
#define FLASH2_BWD_MAX_SPLIT_BYTES ((int64_t)1 << 30)
/* Workspace rows come in groups of this many, each (sequence, head)'s first row starting one:
 * dQ's accumulator is laid out by group (bwd_kernel.cuh, "dQ's accumulator"). */
#define FLASH2_BWD_ROW_GROUP 8

FLASH2_HD static inline int64_t flash2_bwd_round_group(int64_t n) {
    return (n + FLASH2_BWD_ROW_GROUP - 1) / FLASH2_BWD_ROW_GROUP * FLASH2_BWD_ROW_GROUP;
}

/* Workspace rows per head: dense, seqlen_q rounded up to a group; packed, every sequence's rows
 * from row round_group(cu_seqlens_q[b]) + GROUP b (its own groups, whatever the lengths). */
FLASH2_HD static inline int64_t flash2_bwd_head_rows(const attn_fwd_params *p) {
    return p->cu_seqlens_q ? flash2_bwd_round_group(p->total_q > 0 ? p->total_q : 0) + (int64_t)FLASH2_BWD_ROW_GROUP * p->batch
                           : flash2_bwd_round_group(p->seqlen_q > 0 ? p->seqlen_q : 0);
}

typedef struct {
    int64_t rows;      /* workspace rows: heads x head_rows (a row per (head, query row) and padding) */
    int nsplit;        /* dQ slices (1 unless deterministic) = the main grid's x when deterministic */
    size_t off_delta;  /* float [rows]: D = rowsum(dO * O) */
    size_t off_lse2;   /* float [rows]: LSE * log2(e), +inf for a row that sees no key */
    size_t off_dq;     /* float [nsplit][rows][head_dim]: dQ / softmax_scale, accumulated */
    size_t bytes;      /* all of it (0 when there are no query rows) */
} flash2_bwd_plan;

static inline size_t flash2_bwd_align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* The plan for bp (bp->fwd's scalars, cu_seqlens_q set or not, total_q, deterministic). Head
 * dims other than 64 and 128 get a plan too (bwd declines them). */
static inline flash2_bwd_plan flash2_bwd_plan_for(const attn_bwd_params *bp) {
    flash2_bwd_plan pl = {0, 1, 0, 0, 0, 0};
    const attn_fwd_params *p = bp ? bp->fwd : NULL;
    if (!p || p->batch < 1 || p->heads < 1 || p->head_dim < 1) return pl;
    const int64_t q_rows = p->cu_seqlens_q ? (p->total_q > 0 ? p->total_q : 0) : (p->seqlen_q > 0 ? p->seqlen_q : 0);
    if (q_rows == 0) return pl;
    pl.rows = (p->cu_seqlens_q ? 1 : (int64_t)p->batch) * p->heads * flash2_bwd_head_rows(p);
    const int64_t slice = pl.rows * p->head_dim * (int64_t)sizeof(float);
    if (bp->deterministic) {
        const int64_t jobs = (int64_t)p->batch * (p->heads_k > 0 ? p->heads_k : p->heads);
        const int64_t key_blocks = p->seqlen_k > 0 ? (p->seqlen_k + FLASH2_BWD_BLOCK_KEYS - 1) / FLASH2_BWD_BLOCK_KEYS : 1;
        int64_t n = (FLASH2_BWD_TARGET_BLOCKS + jobs - 1) / jobs;
        if (n > key_blocks) n = key_blocks;
        if (n * slice > FLASH2_BWD_MAX_SPLIT_BYTES) n = FLASH2_BWD_MAX_SPLIT_BYTES / slice;
        pl.nsplit = n < 1 ? 1 : (int)n;
    }
    pl.off_delta = 0;
    pl.off_lse2 = flash2_bwd_align256((size_t)pl.rows * sizeof(float));
    pl.off_dq = pl.off_lse2 + flash2_bwd_align256((size_t)pl.rows * sizeof(float));
    pl.bytes = pl.off_dq + (size_t)pl.nsplit * (size_t)slice;
    return pl;
}

#endif
