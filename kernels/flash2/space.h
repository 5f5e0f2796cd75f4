/* flash2's tunable space (v11): the plain path's warps, row tiles per warp, key tile, K/V
 * pipeline stages, whether Q stays in registers, and the residency asked of ptxas; with what
 * each point needs (threads, shared memory, registers) and the kernel's own rules, as
 * constexpr arithmetic. The build compiles only the points that pass (space_instances.cu.in),
 * the static_asserts of kernel.cuh check the same figures, and the autotuner's gates read them
 * at run time (tuning.cu, attn_tuning.facts). Host and device code; no CUDA calls. */
#ifndef FLASH2_SPACE_H
#define FLASH2_SPACE_H

/* host and device: the kernel's Config calls these in __host__ __device__ functions */
#ifdef __CUDACC__
#define FLASH2_HD __host__ __device__
#else
#define FLASH2_HD
#endif

namespace flash2_space {

/* The tunables, in this order in every values array (attn_tuning, the tuned file). */
enum { WARPS, ROW_TILES, BLOCK_N, STAGES, Q_IN_REGS, MIN_BLOCKS, N_TUNABLES };
constexpr int kWarps[] = {4, 8};
constexpr int kRowTiles[] = {1, 2};
constexpr int kBlockN[] = {32, 64, 128};
constexpr int kStages[] = {2, 3};
constexpr int kQInRegs[] = {0, 1};
constexpr int kMinBlocks[] = {1, 2, 3, 4};

struct Point {
    int warps, row_tiles, block_n, stages, q_in_regs, min_blocks;
};

/* The H100's (sm_90) limits, the largest of the architectures the project builds: a point
 * over them is compiled nowhere. A smaller GPU's limits are the autotuner's gates (and
 * fwd_config declines a point over its shared memory). */
constexpr int kMaxSharedPerBlock = 227 * 1024, kSharedPerSm = 228 * 1024, kReservedPerBlock = 1024;
constexpr int kRegsPerSm = 65536, kMaxThreadsPerSm = 2048;
/* Registers past the fragments (addresses, softmax state, loop counters): ptxas used 76-86
 * more than fragment_regs for the v5-v10 configs (NOTES.md); 72 leaves the doubtful points to
 * the post-compile check (cudaFuncGetAttributes: registers and spills) rather than reject
 * them unbuilt. */
constexpr int kRegOverhead = 72;

/* What point x needs at head dims d (Q.K^T) and dv (P.V). */
struct Needs {
    int threads, block_m, shared_bytes, fragment_regs, regs_estimate, reg_cap;
    const char *rule; /* nullptr, or the kernel's own rule the point breaks */
};

FLASH2_HD constexpr int row_width(int d) { return (d + 63) / 64 * 64; } /* whole groups of the swizzle's 8 chunks */
FLASH2_HD constexpr int register_cap(int threads, int blocks) {
    return kRegsPerSm / (threads * blocks) < 255 ? kRegsPerSm / (threads * blocks) : 255;
}
/* The plain path's loader (kernel.cuh, RowSplit): W chunk columns per row pass, rows step by
 * threads / W, which must be a multiple of 8 (one swizzle phase per thread) and divide the tile. */
FLASH2_HD constexpr int loader_width(int d) { return row_width(d) / 8 % 16 == 0 ? 16 : 8; }
FLASH2_HD constexpr bool loader_splits(int rows, int threads, int d) {
    return threads % loader_width(d) == 0 && threads / loader_width(d) % 8 == 0 &&
           rows % (threads / loader_width(d)) == 0;
}

FLASH2_HD constexpr Needs needs(const Point &x, int d, int dv) {
    Needs n{};
    n.threads = 32 * x.warps;
    n.block_m = 16 * x.row_tiles * x.warps;
    n.shared_bytes = 2 * (n.block_m * row_width(d) + x.stages * x.block_n * (row_width(d) + row_width(dv)));
    /* per thread: O (dv / 8 n8 tiles), S (block_n / 8), Q (d / 16 k16 steps, or one), 4 each per row tile */
    n.fragment_regs = x.row_tiles * 4 * (dv / 8 + x.block_n / 8 + (x.q_in_regs ? d / 16 : 1));
    n.regs_estimate = n.fragment_regs + kRegOverhead;
    n.reg_cap = register_cap(n.threads, x.min_blocks);
    n.rule = nullptr;
    if (x.block_n % 16 != 0)
        n.rule = "key tiles of whole k16 steps (P.V) and n8 pairs (ldmatrix x4): block_n % 16 == 0";
    else if (!loader_splits(n.block_m, n.threads, d) || !loader_splits(x.block_n, n.threads, d) ||
             !loader_splits(x.block_n, n.threads, dv))
        n.rule = "loader: a row pass (threads / chunk columns) must be a multiple of 8 rows and divide the tile, "
                 "so each thread's swizzle phase is constant";
    else if (x.stages < 2)
        n.rule = "the K/V pipeline needs 2 stages or more (one loads while one is read)";
    return n;
}

/* Whether the build compiles point x at (d, dv): every limit of the largest GPU built for and
 * the kernel's rules. The autotuner applies the same tests with its GPU's figures. */
FLASH2_HD constexpr bool buildable(const Point &x, int d, int dv) {
    const Needs n = needs(x, d, dv);
    return !n.rule && n.shared_bytes <= kMaxSharedPerBlock && n.regs_estimate <= n.reg_cap &&
           x.min_blocks * (n.shared_bytes + kReservedPerBlock) <= kSharedPerSm &&
           x.min_blocks * n.threads <= kMaxThreadsPerSm;
}

/* Row tiles per warp the plain path runs untuned at head dim d (v5, measured on the H100:
 * NOTES.md). Without a mask that bounds a row's keys (causal, window): at d64, 2 (each K/V
 * fragment read from shared memory feeds two mma: 8-11 % faster); at d128, 1, since 2 row
 * tiles leave registers for 32-key tiles only, which won at most 3 %. Banded shapes use 1: a
 * 128-row block wastes more on its diagonal tile and makes half as many blocks (d64 causal
 * S = 128 was 13 % slower with 2). The packed path always uses 1; another choice is a tuned
 * point (thresholds/<gpu>.tuned.txt), not a build switch. */
FLASH2_HD constexpr int default_row_tiles(int d, bool banded) { return d == 64 && !banded ? 2 : 1; }

/* The point the plain path runs untuned (v5-v10's choices, NOTES.md): 4 warps; row tiles
 * per warp 2 at d64 without a causal mask, else 1; 64-key tiles but 32 for 2 row tiles at d128
 * and for d256; 2 stages; Q in registers but for 2 row tiles at d128 and for d256; 2 resident
 * blocks, 3 for d64 with one row tile. */
FLASH2_HD constexpr Point default_point(int d, int row_tiles) {
    return Point{4,
                 row_tiles,
                 (row_tiles == 2 && d == 128) || d == 256 ? 32 : 64,
                 2,
                 (row_tiles == 1 && d != 256) || d == 64 ? 1 : 0,
                 row_tiles > 1 ? 2 : d == 64 ? 3 : 2};
}

FLASH2_HD constexpr bool same(const Point &a, const Point &b) {
    return a.warps == b.warps && a.row_tiles == b.row_tiles && a.block_n == b.block_n && a.stages == b.stages &&
           a.q_in_regs == b.q_in_regs && a.min_blocks == b.min_blocks;
}

} // namespace flash2_space

#endif
