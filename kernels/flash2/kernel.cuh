/* flash2's forward kernel (header comment of flash2.cu: the design; NOTES.md: each version):
 * the per-point configuration, the loaders, the kernel template and its launch. Included by
 * flash2.cu (the default points) and by the generated instances of the tunable space
 * (space_instances.cu.in), each translation unit with its own copies (anonymous namespace). */
#ifndef FLASH2_KERNEL_CUH
#define FLASH2_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "attn_abi.h"
#include "ptx.cuh"
#include "space.h"

namespace {

constexpr int kErr = 2; /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */

/* resident packed blocks per SM (v7; v4-v6 had 3 and 2, the plain path's) */
#ifndef FLASH2_PACKED_BLOCKS_D64
#define FLASH2_PACKED_BLOCKS_D64 5
#endif
#ifndef FLASH2_PACKED_BLOCKS_D128
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define FLASH2_PACKED_BLOCKS_D128 3 /* sm_80: 4 (128 registers) spills 4 bytes */
#else
#define FLASH2_PACKED_BLOCKS_D128 4
#endif
#endif

/* A point of the plain path's tunable space (space.h) as a type: the kernel's template
 * argument. DefaultPt<D, MT> is the point the plain path runs untuned (v5-v10's choices). */
template <int WARPS_, int ROW_TILES_, int BLOCK_N_, int STAGES_, int Q_IN_REGS_, int MIN_BLOCKS_>
struct Pt {
    static constexpr flash2_space::Point value{WARPS_, ROW_TILES_, BLOCK_N_, STAGES_, Q_IN_REGS_, MIN_BLOCKS_};
};
template <int D, int MT>
using DefaultPt = Pt<flash2_space::default_point(D, MT).warps, flash2_space::default_point(D, MT).row_tiles,
                     flash2_space::default_point(D, MT).block_n, flash2_space::default_point(D, MT).stages,
                     flash2_space::default_point(D, MT).q_in_regs, flash2_space::default_point(D, MT).min_blocks>;

/* D: Q's and K's head dim (Q.K^T); DV: V's and O's (P.V), D but for 192 x 128 (v10); P: the
 * plain path's point (Pt). The defaults (space.h, default_point): 4 warps; keys per KV tile
 * 64, but 32 for 2 row tiles at d128, whose S and O accumulators (64 + 128 registers per
 * thread at BN = 64) leave no room otherwise, and at d256, whose K and V stages would take
 * 128 KB at 64 keys (one block per SM); Q's fragments in registers for the whole block, except
 * with 2 row tiles at d128, where they would need 64 more registers per thread, and at d256
 * (64 more again next to O's 128: 72 to 108 bytes of spill): there they are re-read from
 * shared memory at each k16 step, as FlashAttention-2 does; K and V double-buffered. */
template <int D_, typename P, int DV_ = D_>
struct Config {
    static constexpr flash2_space::Point X = P::value;
    static constexpr int D = D_;
    static constexpr int DV = DV_;
    static constexpr int WARPS = X.warps;
    static constexpr int THREADS = WARPS * 32;
    static constexpr int MT = X.row_tiles; /* plain path */
    /* v10's head dims (96, 256, 192 x 128) take the plain path only, one row tile per warp */
    static constexpr bool PACKABLE = D == DV && (D == 64 || D == 128);
    /* Shared-memory rows of the Q and K tiles (LDK) and of the V tiles (LDV), in elements: the
     * head dim rounded up to 64 (whole groups of the 8 chunks the XOR swizzle spans). d96's
     * rows are d128's: the 12 chunks of data, then 4 that are never written nor read (v10). */
    static constexpr int LDK = flash2_space::row_width(D), LDV = flash2_space::row_width(DV);
    /* query rows per block: plain, 16 MT per warp; packed, 16 per warp */
    __host__ __device__ static constexpr int bm(bool packed) { return 16 * WARPS * (packed ? 1 : MT); }
    static constexpr int BM = bm(false);
    /* keys per KV tile: the point's; packed blocks, 64 */
    __host__ __device__ static constexpr int bn(bool packed) { return packed ? 64 : X.block_n; }
    static constexpr int BN = bn(false);
    static constexpr bool Q_IN_REGS = X.q_in_regs != 0;
    /* resident blocks per SM asked of ptxas: it caps registers at 64 K / (THREADS x this).
     * Packed blocks (memory-bound, each one load, compute and store) ask for more, so more
     * bytes are in flight per SM: 5 at d64 (96 registers), 4 at d128 (128; 3 on sm_80). */
    static constexpr int MIN_BLOCKS = X.min_blocks;
    static constexpr int PACKED_MIN_BLOCKS = D == 64 ? FLASH2_PACKED_BLOCKS_D64 : FLASH2_PACKED_BLOCKS_D128;
    static constexpr int STAGES = X.stages; /* K and V tiles in flight: 2 double-buffers */

    /* K and V stages: packed blocks (S_q, S_k <= 32) need one KV tile, hence one stage.
     * The kernel's shared-memory layout and the launch's byte count both come from here. */
    __host__ __device__ static constexpr int kv_stages(bool packed) { return packed ? 1 : STAGES; }
    __host__ __device__ static constexpr int smem_q(bool packed) { return bm(packed) * LDK * 2; }
    __host__ __device__ static constexpr int smem_bytes(bool packed) {
        return smem_q(packed) + kv_stages(packed) * bn(packed) * (LDK + LDV) * 2; /* Q, then K and V stages */
    }
    static constexpr int SMEM = smem_bytes(false);
    static constexpr bool DEFAULT = flash2_space::same(X, flash2_space::default_point(D, MT));
    static_assert(MT == 1 || MT == 2, "one or two m16 row tiles per warp");
    static_assert(PACKABLE || MT == 1, "v10's head dims: one row tile per warp");
    static_assert(D % 16 == 0 && DV % 16 == 0 && BN % 16 == 0 && bn(true) % 16 == 0, "whole k16 steps and n8 pairs");
    static_assert(LDK % 64 == 0 && LDV % 64 == 0, "the XOR swizzle spans 8 chunks per row");
    static_assert(STAGES >= 2, "one stage loads while another is read");
    /* the autotuner's figures are these */
    static_assert(flash2_space::needs(X, D, DV).shared_bytes == SMEM, "space.h and the kernel disagree");
    static_assert(flash2_space::needs(X, D, DV).rule == nullptr, "a point that breaks the kernel's rules");
    /* default points, MT 1 (also VAR): 40 KB (d64) / 80 KB (d96, d128) / 104 KB (192 x 128) / 96
     * KB (d256, BN 32); MT 2: 48 / 96 KB: within sm_80's 163 KB per block. Tuned points: within
     * sm_90's 227 KB (space.h); fwd_config declines one over the GPU's limit. */
    static_assert(SMEM <= (DEFAULT ? 163 * 1024 : flash2_space::kMaxSharedPerBlock), "shared memory per block");
    /* the packed path runs at default_point(D, 1) only */
    static constexpr bool PACKED_HOST = PACKABLE && flash2_space::same(X, flash2_space::default_point(D, 1));
    static_assert(!PACKED_HOST || smem_bytes(true) <= 163 * 1024, "packed blocks' shared memory on sm_80");
    /* v10's head dims: 2 blocks per SM on sm_90 (228 KB, 1 KB reserved per block), as d128 */
    static_assert(PACKABLE || 2 * (SMEM + 1024) <= 228 * 1024, "two blocks per SM on sm_90");

    /* Registers: the fragments a thread keeps live across a KV tile (O accumulators, S, and Q
     * when it stays in registers) must fit under the cap that the resident blocks asked of
     * ptxas set (64 K registers / (THREADS x blocks), at most 255); addresses and softmax state
     * come on top, so ptxas's count (NOTES.md) is the final word, and a spill shows there. */
    __host__ __device__ static constexpr int fragment_regs(bool packed) {
        return (packed ? 1 : MT) * 4 * (DV / 8 + bn(packed) / 8 + (packed || Q_IN_REGS ? D / 16 : 1));
    }
    __host__ __device__ static constexpr int register_cap(int blocks) {
        return flash2_space::register_cap(THREADS, blocks);
    }
    static_assert(flash2_space::needs(X, D, DV).fragment_regs == fragment_regs(false), "space.h and the kernel disagree");
    /* d64: 80 (MT 1) / 160 (MT 2) of 170 / 255; d128: 128 of 255; packed: 80 of 102, 128 of 128;
     * v10: d96 104, 192 x 128 144, d256 148 (Q re-read, BN 32) of 255 */
    static_assert(fragment_regs(false) <= register_cap(MIN_BLOCKS), "plain path's fragments exceed the register cap");
    static_assert(!PACKED_HOST || fragment_regs(true) <= register_cap(PACKED_MIN_BLOCKS),
                  "packed path's fragments exceed the register cap");
};

/* ---- PTX wrappers: ptx.cuh, shared with decode.cu ------------------------------------ */

using flash2_ptx::cp_async16;
using flash2_ptx::cp_async_commit;
using flash2_ptx::exp2_approx;
using flash2_ptx::ldmatrix_x4;
using flash2_ptx::ldmatrix_x4_trans;
using flash2_ptx::Mma;
using flash2_ptx::smem_addr;

/* swz<LD>(row, chunk): element offset of 16-byte chunk `chunk` of tile row `row` in a tile of
 * LD elements per row, XOR-swizzled within each group of 8 chunks (ptx.cuh) */
using flash2_ptx::swz;

/* Copies ROWS rows into a swizzled tile: row_ptr(r) gives tile row r's first element in
 * global memory, or nullptr for a row past the data, which is zero-filled without a global
 * read (cp.async with 0 source bytes; `any` is only an address it is handed). */
template <typename T, int D, int ROWS, int THREADS, typename RowPtr>
__device__ __forceinline__ void load_tile(T *tile, const T *any, RowPtr row_ptr) {
    constexpr int CHUNKS = D / 8;
#pragma unroll
    for (int c = threadIdx.x; c < ROWS * CHUNKS; c += THREADS) {
        const int row = c / CHUNKS, chunk = c % CHUNKS;
        const T *g = row_ptr(row);
        cp_async16(smem_addr(tile + swz<D>(row, chunk)), (g ? g : any) + chunk * 8, g != nullptr);
    }
}

/* How the plain path's loaders spread a tile of LD elements per row, of which the first NCH
 * 16-byte chunks hold data, over the threads: thread x copies chunk columns x % W + W m
 * (m < COLS) of rows x / W + RSTEP i. W (8 or 16 chunks, a multiple of the swizzle's 8 that
 * divides THREADS) and RSTEP (a multiple of 8) keep each thread's swizzle (row & 7) constant,
 * and chunk c + W m's XOR leaves W m alone: the addresses are a base plus constant steps.
 * d64 and d128: W = the row's chunks, COLS = 1 (v3's loader); 192 x 128's K (24 chunks): W = 8,
 * COLS = 3; d256: W = 16, COLS = 2; d96 (12 chunks of a 16-chunk row): W = 16, and the threads
 * of columns 12..15 copy nothing (those chunks are never read). */
template <int LD, int NCH, int THREADS>
struct RowSplit {
    static constexpr int W = LD / 8 % 16 == 0 ? 16 : 8, RSTEP = THREADS / W, COLS = (NCH + W - 1) / W;
    static_assert(LD % 64 == 0 && NCH <= LD / 8 && THREADS % W == 0 && RSTEP % 8 == 0 && (NCH % W == 0 || NCH < W),
                  "constant swizzle per thread");
};

/* The plain path's loader: ROWS consecutive rows of one head, from `first` (row 0 of the tile)
 * on, rows at or past `valid_rows` zero-filled, NCH chunks of each into a tile of LD elements
 * per row (RowSplit). Each thread always copies the same 16-byte chunk column(s) of rows r,
 * r + RSTEP, ...; RSTEP is a multiple of 8, so the swizzle (row & 7) is the same for all of
 * them: the addresses are a base plus a constant step, with no per-row index math (v2 spent a
 * quarter of its instructions on an integer division per chunk). */
template <typename T, int LD, int NCH, int ROWS, int THREADS>
__device__ __forceinline__ void load_rows(T *tile, const T *first, int64_t row_stride, int valid_rows) {
    using S = RowSplit<LD, NCH, THREADS>;
    constexpr int W = S::W, RSTEP = S::RSTEP, COLS = S::COLS;
    static_assert(ROWS % RSTEP == 0, "whole row steps");
    const int chunk = threadIdx.x % W, r = threadIdx.x / W;
    if (NCH < W && chunk >= NCH) return; /* d96: no data in this column */
    const uint32_t dst = smem_addr(tile + swz<LD>(r, chunk));
    const char *src = reinterpret_cast<const char *>(first + (int64_t)r * row_stride + chunk * 8);
    const int64_t step = (int64_t)RSTEP * row_stride * (int64_t)sizeof(T);
    if (valid_rows >= ROWS) { /* every tile but a tail: no per-row checks */
#pragma unroll
        for (int i = 0; i < ROWS / RSTEP; ++i, src += step)
#pragma unroll
            for (int m = 0; m < COLS; ++m)
                cp_async16(dst + i * RSTEP * LD * (int)sizeof(T) + m * W * 16, src + m * W * 16, true);
    } else {
#pragma unroll
        for (int i = 0; i < ROWS / RSTEP; ++i, src += step) {
            const bool valid = r + i * RSTEP < valid_rows;
#pragma unroll
            for (int m = 0; m < COLS; ++m)
                cp_async16(dst + i * RSTEP * LD * (int)sizeof(T) + m * W * 16,
                           valid ? src + m * W * 16 : reinterpret_cast<const char *>(first), valid);
        }
    }
}

/* n / d for a divisor d >= 1 fixed for the block, by a multiply-high and two shifts instead of
 * a division per use (Granlund and Montgomery 1994; exact for every 32-bit n): the paged
 * loader's key -> page, once per row and tile. */
struct DivBy {
    uint32_t mul, shift1, shift2;
    __device__ __forceinline__ explicit DivBy(uint32_t d) {
        const int l = d > 1 ? 32 - __clz(d - 1) : 0; /* ceil(log2 d) <= 31: (2^l - d) << 32 fits */
        mul = (uint32_t)((((1ull << l) - d) << 32) / d) + 1;
        shift1 = l > 0 ? 1 : 0, shift2 = l > 0 ? l - 1 : 0;
    }
    __device__ __forceinline__ uint32_t operator()(uint32_t n) const {
        const uint32_t t = __umulhi(n, mul);
        return (t + ((n - t) >> shift1)) >> shift2;
    }
};

/* VAR's paged K and V tiles when a tile may span pages (page_size not a multiple of ROWS):
 * each row's page from the sequence's block table row `pages`. The thread's chunks and
 * swizzle are load_rows' (constant per thread). LOAD_K / LOAD_V: which of the two it copies,
 * both when their tiles have the same shape (one division per row serves K and V), else one
 * call each (192 x 128, whose K and V rows split over the threads differently). Rows at or
 * past valid_rows are zero-filled and their table entries not read (they may lie past the
 * sequence's pages, which the harness leaves unchecked). */
template <typename T, int LD, int NCH, int ROWS, int THREADS, bool LOAD_K = true, bool LOAD_V = true>
__device__ __forceinline__ void load_paged_rows(T *tile_k, T *tile_v, const T *k, const T *v, const attn_fwd_params &p,
                                                const int32_t *pages, const DivBy &by_page, int key0, int valid_rows) {
    using S = RowSplit<LD, NCH, THREADS>;
    constexpr int W = S::W, RSTEP = S::RSTEP, COLS = S::COLS;
    static_assert(ROWS % RSTEP == 0 && (LOAD_K || LOAD_V), "whole row steps");
    const int chunk = threadIdx.x % W, r = threadIdx.x / W;
    if (NCH < W && chunk >= NCH) return; /* d96: no data in this column */
    const uint32_t dst_k = smem_addr(tile_k + swz<LD>(r, chunk)), dst_v = smem_addr(tile_v + swz<LD>(r, chunk));
    k += chunk * 8, v += chunk * 8; /* also the address handed for a zero-filled row */
#pragma unroll
    for (int i = 0; i < ROWS / RSTEP; ++i) {
        const int row = r + i * RSTEP;
        const bool valid = row < valid_rows;
        const T *gk = k, *gv = v;
        if (valid) {
            const uint32_t key = key0 + row, n = by_page(key);
            const int64_t page = pages[n], in_page = key - n * (uint32_t)p.page_size;
            gk += page * p.k_batch_stride + in_page * p.k_row_stride;
            gv += page * p.v_batch_stride + in_page * p.v_row_stride;
        }
        if constexpr (COLS == 1) { /* d64, d128 (v9's code), d96 */
            if (LOAD_K) cp_async16(dst_k + i * RSTEP * LD * (int)sizeof(T), gk, valid);
            if (LOAD_V) cp_async16(dst_v + i * RSTEP * LD * (int)sizeof(T), gv, valid);
        } else {
#pragma unroll
            for (int m = 0; m < COLS; ++m) {
                if (LOAD_K) cp_async16(dst_k + i * RSTEP * LD * (int)sizeof(T) + m * W * 16, gk + m * W * 8, valid);
                if (LOAD_V) cp_async16(dst_v + i * RSTEP * LD * (int)sizeof(T) + m * W * 16, gv + m * W * 8, valid);
            }
        }
    }
}

/* VAR: sequence b's lengths (attn_abi.h, as simple.cu): S_q from cu_seqlens_q, else seqlen_q;
 * S_k from cu_seqlens_k, else seqlen_k, then at most seqused_k[b] (paged or not). */
__device__ __forceinline__ int seq_len_q(const attn_fwd_params &p, int b) {
    return p.cu_seqlens_q ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
}
__device__ __forceinline__ int seq_len_k(const attn_fwd_params &p, int b) {
    const int sk = p.cu_seqlens_k ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
    return p.seqused_k ? min(sk, max(p.seqused_k[b], 0)) : sk;
}
/* VAR: row 0 of head h of sequence b: packed rows from cu[b] when cu is given (the batch
 * stride unused), else the batch stride's; paged K/V pass neither (the pool's head h; the page
 * is added per tile). */
template <typename T>
__device__ __forceinline__ const T *seq_base(const void *base, const int32_t *cu, int b, int h, int64_t batch_stride,
                                             int64_t head_stride, int64_t row_stride) {
    return static_cast<const T *>(base) + (cu ? (int64_t)cu[b] * row_stride : (int64_t)b * batch_stride) +
           (int64_t)h * head_stride;
}

/* Which (batch, head) a block's tile row belongs to, and which row of that head. Plain
 * blocks hold BM query rows of one (batch, head) and walk its keys in tiles of BN. Packed
 * blocks (S_q, S_k <= 32: see heads_per_block) hold `pack` whole heads side by side, head i of
 * the block at tile rows [i S_q, (i + 1) S_q) and tile keys [i S_k, (i + 1) S_k), in one KV
 * tile under a block-diagonal mask: a short sequence fills a tile instead of a sixteenth of
 * one. */
struct Slot {
    int head; /* the block's head index (packed) or 0 (plain); >= pack past the block's heads */
    int pos;  /* row (or key) within its head */
};
__device__ __forceinline__ Slot packed_slot(int tile_row, int per_head) {
    const int head = tile_row / per_head;
    return {head, tile_row - head * per_head};
}

/* Row 0 of job `job` (= b * heads + h) of q, o (group 1), or k, v: with GQA, query head h
 * reads KV head h / group, group = heads / heads_k (the head stride is then a KV head's). */
template <typename T, bool GQA = false>
__device__ __forceinline__ const T *head_base(const void *base, int job, int heads, int64_t batch_stride,
                                              int64_t head_stride, int group = 1) {
    if constexpr (GQA)
        return static_cast<const T *>(base) + (int64_t)(job / heads) * batch_stride +
               (int64_t)(job % heads / group) * head_stride;
    return static_cast<const T *>(base) + (int64_t)(job / heads) * batch_stride + (int64_t)(job % heads) * head_stride;
}

/* EXT (v8): ABI version 2's grouped KV heads, windows and softcap, from p as flash2_fwd
 * normalised it: heads_k set, window_left -1 (unbounded) or < S_k - 1, window_right -1 or
 * < S_q - 1 with causal folded in as 0. Without EXT the kernel is v7's (version-1 problems):
 * p.causal is the only mask. VAR (v9): varlen, paged K/V, seqused_k; the plain path with
 * EXT's masks and one row tile per warp, S_q and S_k sequence blockIdx.z's, the rows of Q, O,
 * K and V and the LSE entries from its own bases (seq_base), K/V tiles through its pages. */
template <typename T, int D, int DV, bool PACKED, typename P, bool EXT, bool VAR>
__global__ void __launch_bounds__(Config<D, P, DV>::THREADS,
                                  PACKED ? Config<D, P, DV>::PACKED_MIN_BLOCKS : Config<D, P, DV>::MIN_BLOCKS)
flash2_fwd_kernel(const attn_fwd_params p, const float scale_log2, const int pack) {
    using C = Config<D, P, DV>;
    static_assert(!VAR || (EXT && !PACKED && C::MT == 1), "VAR: the plain path, EXT's masks, one row tile per warp");
    static_assert(!PACKED || C::PACKABLE, "packed heads: d64 and d128 only");
    constexpr int MT = PACKED ? 1 : C::MT; /* m16 row tiles per warp */
    constexpr int STAGES = PACKED ? 2 : C::STAGES; /* packed: one tile, in stage 0 */
    constexpr int BM = C::bm(PACKED), BN = C::bn(PACKED);
    constexpr bool Q_IN_REGS = PACKED || C::Q_IN_REGS;
    constexpr int LDK = C::LDK, LDV = C::LDV; /* tile row widths (elements) of Q and K, and of V */
    constexpr int KSTEPS = D / 16;  /* k16 steps of Q.K^T */
    constexpr int NT_S = BN / 8;    /* n8 tiles of S */
    constexpr int NT_O = DV / 8;    /* n8 tiles of O */
    extern __shared__ __align__(128) unsigned char smem[];
    T *sQ = reinterpret_cast<T *>(smem);                      /* [BM][LDK] */
    T *sK = reinterpret_cast<T *>(smem + C::smem_q(PACKED)); /* [kv_stages][BN][LDK] */
    T *sV = sK + C::kv_stages(PACKED) * BN * LDK;             /* [kv_stages][BN][LDV] */

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3; /* mma fragment row group and column pair */
    /* VAR: sequence b = blockIdx.z's own lengths; else the problem's */
    const int Sq = VAR ? seq_len_q(p, blockIdx.z) : p.seqlen_q, Sk = VAR ? seq_len_k(p, blockIdx.z) : p.seqlen_k;
    const int offset = Sk - Sq; /* causal: row i sees key j iff j <= i + offset */
    const int jobs = p.batch * p.heads;
    /* plain: this block's (batch, head) as a job index b * heads + h, and its first row;
     * packed: the job of the block's head 0 */
    const int job0 = PACKED ? blockIdx.x * pack : blockIdx.z * p.heads + blockIdx.y;
    const int m0 = PACKED ? 0 : blockIdx.x * BM;
    if (VAR && m0 >= Sq) return; /* the grid covers the longest sequence: no row of this one here */
    /* EXT: query heads per KV head; the window as offsets from the query's row: key c is
     * visible to row i (of its head) iff i + lo_off <= c <= i + hi_off and c < S_k. An
     * unbounded side gets an offset that never binds for 0 <= i < S_q, 0 <= c < S_k. */
    const int group = EXT ? p.heads / p.heads_k : 1;
    const int lo_off = EXT && p.window_left >= 0 ? offset - p.window_left : -Sq;
    const int hi_off = EXT && p.window_right >= 0 ? offset + p.window_right : Sk - 1;

    auto q_row = [&](int r) -> const T * {
        int job = job0, pos = m0 + r;
        if (PACKED) {
            const Slot s = packed_slot(r, Sq);
            job += s.head, pos = s.pos;
            if (s.head >= pack || job >= jobs) return nullptr;
        } else if (pos >= Sq) {
            return nullptr;
        }
        return head_base<T>(p.q, job, p.heads, p.q_batch_stride, p.q_head_stride) + (int64_t)pos * p.q_row_stride;
    };
    /* key `key0 + c` (plain) or tile key c (packed) of K or V */
    auto kv_row = [&](const void *base, int64_t bs, int64_t hs, int64_t rs, int key0, int c) -> const T * {
        int job = job0, pos = key0 + c;
        if (PACKED) {
            const Slot s = packed_slot(c, Sk);
            job += s.head, pos = s.pos;
            if (s.head >= pack || job >= jobs) return nullptr;
        } else if (pos >= Sk) {
            return nullptr;
        }
        return head_base<T, EXT>(base, job, p.heads, bs, hs, group) + (int64_t)pos * rs;
    };
    /* plain: the block's (batch, head) bases, once (K and V: its KV head). VAR: the sequence's
     * (seq_base; paged K/V, the pool's KV head, the block table row `pages` giving each key's
     * page), for Q and O too; its LSE entry of row 0: [heads][total_q] by token with
     * cu_seqlens_q, else dense. */
    const int32_t *pages = VAR && p.block_table ? p.block_table + (int64_t)blockIdx.z * p.block_table_stride : nullptr;
    const T *k_head = VAR ? seq_base<T>(p.k, pages ? nullptr : p.cu_seqlens_k, blockIdx.z, blockIdx.y / group,
                                        pages ? 0 : p.k_batch_stride, p.k_head_stride, p.k_row_stride)
                          : head_base<T, EXT>(p.k, job0, p.heads, p.k_batch_stride, p.k_head_stride, group);
    const T *v_head = VAR ? seq_base<T>(p.v, pages ? nullptr : p.cu_seqlens_k, blockIdx.z, blockIdx.y / group,
                                        pages ? 0 : p.v_batch_stride, p.v_head_stride, p.v_row_stride)
                          : head_base<T, EXT>(p.v, job0, p.heads, p.v_batch_stride, p.v_head_stride, group);
    const T *q_seq = VAR ? seq_base<T>(p.q, p.cu_seqlens_q, blockIdx.z, blockIdx.y, p.q_batch_stride,
                                       p.q_head_stride, p.q_row_stride)
                         : nullptr;
    T *const o_seq = VAR ? const_cast<T *>(seq_base<T>(p.o, p.cu_seqlens_q, blockIdx.z, blockIdx.y, p.o_batch_stride,
                                                       p.o_head_stride, p.o_row_stride))
                         : nullptr;
    const int64_t lse_row0 = !VAR ? 0
                           : p.cu_seqlens_q ? (int64_t)blockIdx.y * p.cu_seqlens_q[p.batch] + p.cu_seqlens_q[blockIdx.z]
                                            : (int64_t)job0 * p.seqlen_q;
    /* VAR, paged: a tile lies in one page iff page_size is a multiple of BN (tiles start at
     * multiples of BN); else each row's page is looked up */
    const bool whole_tiles = VAR && pages && p.page_size % BN == 0;
    const DivBy by_page(VAR && pages ? p.page_size : 1);
    auto load_kv = [&](int stage, int key0) {
        if constexpr (PACKED) { /* d64 / d128: LDK = LDV = D */
            load_tile<T, D, BN, C::THREADS>(sK + stage * BN * LDK, static_cast<const T *>(p.k), [&](int c) {
                return kv_row(p.k, p.k_batch_stride, p.k_head_stride, p.k_row_stride, key0, c);
            });
            load_tile<T, D, BN, C::THREADS>(sV + stage * BN * LDV, static_cast<const T *>(p.v), [&](int c) {
                return kv_row(p.v, p.v_batch_stride, p.v_head_stride, p.v_row_stride, key0, c);
            });
        } else if (VAR && whole_tiles) { /* from row key0 % page_size of the tile's page */
            const uint32_t n = by_page(key0);
            const int64_t page = pages[n], in_page = key0 - n * (uint32_t)p.page_size;
            load_rows<T, LDK, D / 8, BN, C::THREADS>(sK + stage * BN * LDK,
                                                     k_head + page * p.k_batch_stride + in_page * p.k_row_stride,
                                                     p.k_row_stride, Sk - key0);
            load_rows<T, LDV, DV / 8, BN, C::THREADS>(sV + stage * BN * LDV,
                                                      v_head + page * p.v_batch_stride + in_page * p.v_row_stride,
                                                      p.v_row_stride, Sk - key0);
        } else if (VAR && pages) {
            if constexpr (LDK == LDV && D == DV) {
                load_paged_rows<T, LDK, D / 8, BN, C::THREADS>(sK + stage * BN * LDK, sV + stage * BN * LDV, k_head,
                                                               v_head, p, pages, by_page, key0, Sk - key0);
            } else { /* 192 x 128: K's and V's rows split over the threads differently */
                load_paged_rows<T, LDK, D / 8, BN, C::THREADS, true, false>(
                    sK + stage * BN * LDK, sK, k_head, k_head, p, pages, by_page, key0, Sk - key0);
                load_paged_rows<T, LDV, DV / 8, BN, C::THREADS, false, true>(
                    sV, sV + stage * BN * LDV, v_head, v_head, p, pages, by_page, key0, Sk - key0);
            }
        } else {
            load_rows<T, LDK, D / 8, BN, C::THREADS>(sK + stage * BN * LDK, k_head + (int64_t)key0 * p.k_row_stride,
                                                     p.k_row_stride, Sk - key0);
            load_rows<T, LDV, DV / 8, BN, C::THREADS>(sV + stage * BN * LDV, v_head + (int64_t)key0 * p.v_row_stride,
                                                      p.v_row_stride, Sk - key0);
        }
    };

    /* KV tiles j_first .. n_blocks - 1 this block needs: packed, one; causal stops at the last
     * key its last row sees; EXT, from the first key its first row sees (window_left) to the
     * last key its last row sees (window_right): rows see overlapping or abutting key ranges
     * (each at least one key wide before the clamp to [0, S_k)), so that range is exactly the
     * union of its rows' visible keys, empty iff hi < lo */
    int n_blocks = PACKED ? 1 : (Sk + BN - 1) / BN;
    int j_first = 0;
    if constexpr (!PACKED && EXT) {
        const int lo = max(m0 + lo_off, 0), hi = min(min(m0 + BM - 1, Sq - 1) + hi_off, Sk - 1);
        j_first = lo / BN;
        n_blocks = hi < lo ? j_first : hi / BN + 1;
    } else if (!PACKED && p.causal) {
        const int last_key = min(m0 + BM - 1, Sq - 1) + offset;
        n_blocks = last_key < 0 ? 0 : min(n_blocks, last_key / BN + 1);
    }
    if (EXT ? n_blocks <= j_first : n_blocks == 0) { /* no row of this block sees a key: zeros and -inf */
        const int b = blockIdx.z, h = blockIdx.y;
        T *o = VAR ? o_seq : static_cast<T *>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;
        for (int i = threadIdx.x; i < BM * DV; i += C::THREADS) {
            const int row = m0 + i / DV;
            if (row < Sq) o[(int64_t)row * p.o_row_stride + i % DV] = T(0.0f);
        }
        if (p.lse)
            for (int i = threadIdx.x; i < BM; i += C::THREADS)
                if (m0 + i < Sq) p.lse[VAR ? lse_row0 + m0 + i : (int64_t)job0 * Sq + m0 + i] = -INFINITY;
        return;
    }

    if constexpr (PACKED)
        load_tile<T, D, BM, C::THREADS>(sQ, static_cast<const T *>(p.q), q_row);
    else
        load_rows<T, LDK, D / 8, BM, C::THREADS>(
            sQ,
            (VAR ? q_seq : head_base<T>(p.q, job0, p.heads, p.q_batch_stride, p.q_head_stride)) +
                (int64_t)m0 * p.q_row_stride,
            p.q_row_stride, Sq - m0);
    load_kv((unsigned)j_first % STAGES, j_first * BN);
    cp_async_commit();
    /* 3 stages or more: tiles j_first + 1 .. j_first + STAGES - 2 in flight before the loop, a
     * commit group each (empty past the last tile), so that group i always holds tile j_first + i */
#pragma unroll
    for (int i = 1; i + 1 < STAGES; ++i) {
        if (j_first + i < n_blocks) load_kv((unsigned)(j_first + i) % STAGES, (j_first + i) * BN);
        cp_async_commit();
    }

    /* Warp w owns tile rows [16 MT w, 16 MT (w + 1)): row tile mt is rows 16 (MT w + mt) + 0..15 */
    uint32_t qf[MT][Q_IN_REGS ? KSTEPS : 1][4];
    float acc[MT][NT_O][4];
    float row_max[MT][2], row_sum[MT][2]; /* log2 domain, rows g and g + 8; this thread's columns */
    Slot slot[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int i = 0; i < NT_O; ++i) acc[mt][i][0] = acc[mt][i][1] = acc[mt][i][2] = acc[mt][i][3] = 0.0f;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            row_max[mt][r] = -INFINITY, row_sum[mt][r] = 0.0f;
            const int tile_row = (warp * MT + mt) * 16 + g + 8 * r;
            slot[mt][r] = PACKED ? packed_slot(tile_row, Sq) : Slot{0, m0 + tile_row};
        }
    }
    /* Q's A fragment (m16 x k16) of row tile mt at k16 step kk */
    auto load_q = [&](uint32_t (&f)[4], int mt, int kk) {
        const int row = (warp * MT + mt) * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        ldmatrix_x4(f, smem_addr(sQ + swz<LDK>(row, 2 * kk + (lane >> 4))));
    };

    /* ldmatrix lanes: K's x4 reads keys (lane & 7) + 8 (lane >> 4) at chunk 2 kk + ((lane >> 3) & 1);
     * V's .trans x4 reads keys (lane & 7) + 8 ((lane >> 3) & 1) at chunk dt + (lane >> 4). Every
     * row a lane reads is = lane (mod 8), so its swizzle XOR is always l7 = lane & 7. */
    const uint32_t l7 = lane & 7, k_hi = (lane >> 3) & 1, v_hi = lane >> 4;
    const uint32_t sK_lane = smem_addr(sK + ((lane & 7) + ((lane >> 4) << 3)) * LDK);
    const uint32_t sV_lane = smem_addr(sV + ((lane & 7) + (((lane >> 3) & 1) << 3)) * LDV);

    /* EXT with a softcap: s = softcap tanh(softmax_scale q.k / softcap), in the log2 domain:
     * S becomes tanhf(S cap_in) cap_out, then the mask's multiplier is 1 */
    float cap_in = 0.0f, cap_out = 0.0f;
    if (EXT && p.softcap > 0.0f)
        cap_in = p.softmax_scale / p.softcap, cap_out = p.softcap * 1.4426950408889634f;

    for (int j = j_first; j < n_blocks; ++j) { /* stage j % STAGES holds tile j */
        flash2_ptx::cp_async_wait<STAGES - 2>(); /* all but the newest STAGES - 2 groups: tile j is in */
        __syncthreads(); /* tile j is in for every thread; every warp is done with tile j - 1's stage */
        if (j + STAGES - 1 < n_blocks) load_kv((unsigned)(j + STAGES - 1) % STAGES, (j + STAGES - 1) * BN);
        cp_async_commit();
        if (Q_IN_REGS && j == j_first) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int kk = 0; kk < KSTEPS; ++kk) load_q(qf[mt][Q_IN_REGS ? kk : 0], mt, kk);
        }
        /* this lane's ldmatrix row in the stage's K and V tiles (its chunk's swizzle is l7) */
        const uint32_t stage = (unsigned)j % STAGES;
        const uint32_t cK_lane = sK_lane + stage * (BN * LDK * sizeof(T));
        const uint32_t cV_lane = sV_lane + stage * (BN * LDV * sizeof(T));

        /* S = Q.K^T for this warp's 16 MT rows and the tile's BN keys: each K fragment feeds MT mma */
        float s[MT][NT_S][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < NT_S; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            if constexpr (!Q_IN_REGS) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) load_q(qf[mt][0], mt, kk);
            }
#pragma unroll
            for (int nt = 0; nt < NT_S; nt += 2) {
                uint32_t bk[4];
                ldmatrix_x4(bk, cK_lane + (uint32_t)(nt * 8 * LDK * sizeof(T)) + ((((2 * kk) | k_hi) ^ l7) << 4));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    Mma<T>::run(s[mt][nt], qf[mt][Q_IN_REGS ? kk : 0], bk[0], bk[1]);
                    Mma<T>::run(s[mt][nt + 1], qf[mt][Q_IN_REGS ? kk : 0], bk[2], bk[3]);
                }
            }
        }

        /* EXT's softcap, before the mask (a uniform branch per tile) */
        float mul = scale_log2;
        if (EXT && cap_in != 0.0f) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[mt][nt][e] = tanhf(s[mt][nt][e] * cap_in) * cap_out;
            mul = 1.0f;
        }

        /* scale into the log2 domain; mask keys past the end of K and above the diagonal
         * (EXT: outside the window), plain: only tiles that cross either need it; packed, keys
         * of other heads. EXT: the tile needs no mask if its last key is within the first
         * row's reach and its first key within the last row's. */
        const int n0 = j * BN;
        const bool mask = PACKED || n0 + BN > Sk ||
                          (EXT ? n0 + BN - 1 > m0 + hi_off || n0 < min(m0 + BM - 1, Sq - 1) + lo_off
                               : p.causal && n0 + BN - 1 > m0 + offset);
        if (mask) { /* a branch, not per-element selects: most tiles need no mask (v3 paid ~150
                     * instructions per tile computing masks it then discarded) */
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const Slot &r = slot[mt][e >> 1];
                        Slot c = {0, n0 + nt * 8 + 2 * t + (e & 1)};
                        if (PACKED) c = packed_slot(c.pos, Sk);
                        const bool hidden = c.head != r.head || c.pos >= Sk ||
                                            (EXT ? c.pos > r.pos + hi_off || c.pos < r.pos + lo_off
                                                 : p.causal && c.pos > r.pos + offset);
                        s[mt][nt][e] = hidden ? -INFINITY : s[mt][nt][e] * mul;
                    }
                }
        } else {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[mt][nt][e] *= mul;
        }

        /* online softmax: one rescale of O per tile */
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = row_max[mt][r];
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float base = mx == -INFINITY ? 0.0f : mx; /* a row that sees nothing yet */
                const float corr = exp2_approx(row_max[mt][r] - base);
                row_max[mt][r] = mx;
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT_S; ++nt) {
                    s[mt][nt][2 * r] = exp2_approx(s[mt][nt][2 * r] - base);
                    s[mt][nt][2 * r + 1] = exp2_approx(s[mt][nt][2 * r + 1] - base);
                    sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
                }
                row_sum[mt][r] = row_sum[mt][r] * corr + sum;
#pragma unroll
                for (int dt = 0; dt < NT_O; ++dt) {
                    acc[mt][dt][2 * r] *= corr;
                    acc[mt][dt][2 * r + 1] *= corr;
                }
            }

        /* O += P.V: the S accumulators are P's A fragments once packed to the dtype; each V
         * fragment feeds MT mma */
#pragma unroll
        for (int kb = 0; kb < BN / 16; ++kb) {
            uint32_t a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                a[mt][0] = Mma<T>::pack(s[mt][2 * kb][0], s[mt][2 * kb][1]);
                a[mt][1] = Mma<T>::pack(s[mt][2 * kb][2], s[mt][2 * kb][3]);
                a[mt][2] = Mma<T>::pack(s[mt][2 * kb + 1][0], s[mt][2 * kb + 1][1]);
                a[mt][3] = Mma<T>::pack(s[mt][2 * kb + 1][2], s[mt][2 * kb + 1][3]);
            }
#pragma unroll
            for (int dt = 0; dt < NT_O; dt += 2) {
                uint32_t bv[4];
                ldmatrix_x4_trans(bv, cV_lane + (uint32_t)(kb * 16 * LDV * sizeof(T)) + (((dt | v_hi) ^ l7) << 4));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    Mma<T>::run(acc[mt][dt], a[mt], bv[0], bv[1]);
                    Mma<T>::run(acc[mt][dt + 1], a[mt], bv[2], bv[3]);
                }
            }
        }
    }

    /* epilogue: the row sums over the quad, O = acc / l, LSE = ln 2 * (max + log2 l) */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float l = row_sum[mt][r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const float inv = l > 0.0f ? 1.0f / l : 0.0f; /* a row that sees no key: zeros */
            const int job = job0 + slot[mt][r].head, row = slot[mt][r].pos;
            if (row >= Sq || (PACKED && (slot[mt][r].head >= pack || job >= jobs))) continue;
            T *orow = (VAR ? o_seq : const_cast<T *>(head_base<T>(p.o, job, p.heads, p.o_batch_stride, p.o_head_stride))) +
                      (int64_t)row * p.o_row_stride + 2 * t;
#pragma unroll
            for (int dt = 0; dt < NT_O; ++dt)
                *reinterpret_cast<uint32_t *>(orow + dt * 8) =
                    Mma<T>::pack(acc[mt][dt][2 * r] * inv, acc[mt][dt][2 * r + 1] * inv);
            if (p.lse && t == 0)
                p.lse[VAR ? lse_row0 + row : (int64_t)job * Sq + row] =
                    l > 0.0f ? (row_max[mt][r] + log2f(l)) * 0.69314718055994531f : -INFINITY;
        }
}

/* Heads per packed block: as many whole heads as fit one BM x BN tile; 1 means the plain path. */
template <int D>
int heads_per_block(int seqlen_q, int seqlen_k) {
    return min(Config<D, DefaultPt<D, 1>>::bm(true) / seqlen_q, Config<D, DefaultPt<D, 1>>::bn(true) / seqlen_k);
}

template <typename T, int D, int DV, bool PACKED, typename P, bool EXT, bool VAR>
int launch(const attn_fwd_params *p, int pack, cudaStream_t stream) {
    using C = Config<D, P, DV>;
    constexpr int smem = C::smem_bytes(PACKED);
    /* the shared-memory limit is raised per device (it is a property of the function in that
     * device's context): once per instantiation and device, a bit per device */
    static std::atomic<unsigned long long> raised{0};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return kErr;
    const unsigned long long bit = dev < 64 ? 1ull << dev : 0; /* past 64 devices: every call */
    if (!(raised.load(std::memory_order_relaxed) & bit)) {
        if (cudaFuncSetAttribute(flash2_fwd_kernel<T, D, DV, PACKED, P, EXT, VAR>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 smem) != cudaSuccess)
            return kErr;
        raised.fetch_or(bit, std::memory_order_relaxed);
    }
    const int jobs = p->batch * p->heads;
    /* plain (VAR too): blocks of BM rows of the longest sequence, per head and sequence */
    const dim3 grid = PACKED ? dim3((jobs + pack - 1) / pack) : dim3((p->seqlen_q + C::BM - 1) / C::BM, p->heads, p->batch);
    const float scale_log2 = p->softmax_scale * 1.4426950408889634f;
    flash2_fwd_kernel<T, D, DV, PACKED, P, EXT, VAR><<<grid, C::THREADS, smem, stream>>>(*p, scale_log2, pack);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}


} // namespace

#endif
