/* "hopper": a FlashAttention-3-style forward kernel for the H100 (sm_90a): wgmma for both
 * GEMMs, TMA tile loads into 128-byte-swizzled shared memory under an mbarrier pipeline, warp
 * specialisation with register reallocation (setmaxnreg), online softmax in float32 with exp2
 * and log2(e) folded into the scale.
 *
 * One block of 384 threads computes BM = 128 query rows of one (batch, head): warpgroup 0 is
 * the producer (one thread issues every TMA load; the warpgroup gives its registers away),
 * warpgroups 1 and 2 are consumers of 64 rows each (d64 at long sequences: three consumers,
 * 512 threads, BM = 192). The Q tile is loaded once; K and V tiles
 * of BN = 128 keys (64 at d256) flow through a ring of STAGES stages, each with a full barrier (TMA's
 * transaction count) and an empty barrier (one arrival per consumer warp) for K and for V
 * apart, so that S = Q.K^T can start before V has landed. Per KV tile a consumer issues
 * S = Q.K^T (wgmma m64n128k16, A and B from shared memory, K-major), masks where the tile
 * crosses the causal diagonal or the end of the keys, updates the running max and sum, rescales
 * O and converts P to the input dtype in registers, and issues O += P.V (wgmma m64nDk16, A
 * from registers, B = V from shared memory, MN-major). Tiles are walked from the last key
 * tile down, so the masked ones come first.
 *
 * The two GEMMs of a tile overlap the softmax: S of tile j is issued together with P.V of tile
 * j-1, and the consumer warpgroups take turns to issue (a ping-pong over named barriers), so
 * one's GEMMs run during the others' softmax, the turns running on from tile to tile. The grid
 * is persistent: one block per SM loops over row blocks, causal ones paired heaviest with
 * lightest, and the next Q is loaded while this tile runs (a second Q buffer where shared
 * memory has room) or under its last GEMM and epilogue. O leaves through shared memory in
 * 16-byte stores. NOTES.md measures each of these choices and the versions that led to them (the
 * earlier versions' code, and the switches that measured slower, are in git history).
 *
 * Head dims 64, 128 and 256 (64-key tiles), 192 x 128 (Config::DV: V and O 128 columns), and 96
 * as 128 on maps that end at column 96 (TMA's zeros past it). Windows, softcap, paged K/V and
 * seqused_k take their own instantiations (FEAT); decode, a KV head's query heads packed into
 * one block with split-KV, its own again (PACK): Config says how.
 *
 * Tails and variable lengths: a dense tensor is a 4-D tensor map (d, rows, heads, batch), so
 * TMA writes zeros for rows past the sequence. Packed (varlen) tensors are one map over all
 * rows; a tile that would run past its sequence's end is moved back to end there (rows before
 * the tile's nominal start are then masked, for K, or not written, for Q and O), so that no
 * load ever reaches past the last row of the last sequence, whose count the host never sees. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <atomic>
#include <type_traits>

#include <algorithm>
#include <cstring>

#include "attn_abi.h"
#include "ptx.cuh"
#include "split_kv.h"

namespace {

using namespace hopper_ptx;

/* Consumer warpgroups at d64: three (FlashAttention-3's d64 block: BM = 192 query rows, 512
 * threads, consumers at 160 registers; the GEMM turns rotate over three warpgroups, so each
 * has two turns' time for its softmax, which at d64 takes as long as its GEMMs) from
 * seqlen_q = kD64ThreeFrom (no mask) or kD64ThreeFromCausal; two below (BM = 128, as d128).
 * Measured (NOTES.md): three is 5-14 % faster at d64 full from S = 512 but 10-50 % slower at
 * S <= 256 (a block's rows are mostly empty); with the causal mask it loses 6-27 % at
 * S <= 2048 (192-row blocks waste more of the diagonal) and gains 6-13 % from S = 4096, so
 * causal switches at 4096, which the long suite (shapes/long.txt: S_q 3000, 4096, 8191,
 * 16384) checks on both sides. */
constexpr int kD64ThreeFrom = 512, kD64ThreeFromCausal = 4096;

/* d128 without a mask: 176-key tiles (Config::BN) from seqlen_k = kD128WideFrom, 128 below
 * (NOTES.md, change 7: +6.6 / 2.4 % at S = 512 / 2k; 128-key tiles lost 2.2 % at 16k). */
constexpr int kD128WideFrom = 8192;

constexpr int kErr = 2; /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */

/* PACK (decode): seqlen_q at most kPackMaxQ, as flash2's decode path; a split of a (sequence,
 * KV head)'s keys at least kPackMinSplitTiles key tiles (512 keys: a split's Q load, pipeline
 * fill and partial write are amortised over them) */
constexpr int kPackMaxQ = 16, kPackMinSplitTiles = 4;

/* FEAT_: the problem has a feature beyond dense or packed rows and a causal mask: a window
 * (window_left, or a window_right other than causal's 0: Args' bounds), a softcap, paged K/V or
 * seqused_k. Its own instantiations (two consumers, BN = 128), so that the plain path's code
 * stays as measured. PACK_ (decode: a few queries, FEAT's features too): a block's rows are the
 * query rows of every query head of one KV head, row R = query R / group of head
 * kv_head group + R % group (K and V read once per KV head), the consumers load Q themselves,
 * and a (sequence, KV head)'s keys may be split over several blocks (split_kv.h). */
template <int D_, bool CAUSAL_, int CONSUMERS_, bool FEAT_ = false, bool PACK_ = false, int BN_ = 0>
struct Config {
    static constexpr int D = D_;
    static constexpr int DV = D == 192 ? 128 : D; /* V's and O's columns: 192 x 128 (DeepSeek's MLA prefill) */
    static constexpr bool FEAT = FEAT_, PACK = PACK_;
    static constexpr int CONSUMERS = CONSUMERS_; /* warpgroups of 64 query rows: 2, or 3 at d64 */
    static constexpr int BM = 64 * CONSUMERS; /* query rows per block (tile) */
    /* keys per KV tile: FlashAttention-3's 176 at d128 without a mask (a causal block's
     * diagonal wastes more of a wide tile; 192 at d64 measured 0-17 % slower than 128), but
     * 128 (BN_) for short keys (kD128WideFrom) */
    static constexpr int BN = BN_ ? BN_ : D == 256 ? 64 : D == 128 && !CAUSAL_ && !FEAT_ ? 176 : 128;
    static constexpr int THREADS = 128 * (1 + CONSUMERS);
    static constexpr int STAGES = D == 64 ? 3 : 2; /* the K/V ring (shared memory: SMEM below) */
    /* A tile is D / 64 panels of [rows][64] elements: one TMA box (128-byte rows, the widest
     * the 128-byte swizzle takes) each, the panels of a tile back to back. */
    static constexpr int PANEL_Q = BM * 128, PANEL_KV = BN * 128; /* bytes */
    static constexpr int Q_BYTES = BM * D * 2, K_BYTES = BN * D * 2, V_BYTES = BN * DV * 2;
    static constexpr int O_STAGE_BYTES = 4 * CONSUMERS * 2048;
    /* Q buffers: two where shared memory has room for a second (then the next tile's Q loads
     * while this one runs, not after its last S GEMM), one at d128 with 176-key tiles, d192 and
     * d256, and with PACK (the consumers load Q) */
    static constexpr int Q_BUFS =
        !PACK && 2 * Q_BYTES + STAGES * (K_BYTES + V_BYTES) + O_STAGE_BYTES + 8 * (4 + 4 * STAGES) + 1024 <= 227 * 1024
            ? 2
            : 1;
    static constexpr int OFF_K = Q_BUFS * Q_BYTES;
    static constexpr int OFF_V = OFF_K + STAGES * K_BYTES;
    /* the epilogue's 2 KB per consumer warp (16 rows x 64 columns of O, one column panel at a
     * time) */
    static constexpr int OFF_O = OFF_V + STAGES * V_BYTES;
    static constexpr int OFF_BAR = OFF_O + O_STAGE_BYTES;
    /* Q full per Q buffer; K full, V full, K empty, V empty per stage; Q empty per Q buffer */
    static constexpr int BARS = 2 * Q_BUFS + 4 * STAGES;
    /* + 1024: the dynamic shared memory is aligned up to the swizzle pattern's 1024 bytes */
    static constexpr int SMEM = OFF_BAR + 8 * BARS + 1024;
    /* registers per thread: the producer warpgroup keeps 24 (56 with FEAT: the paged loads'
     * addressing spilled at 48), the consumers take the rest (240 each of two, 224 with FEAT,
     * 160 each of three). d256 with FEAT spills 36-44 bytes here and 196-204 with PACK (O alone
     * is 128 registers), and still at 232 / 40 or 240 / 24; FEAT at d64 / d128 causal 4-12 */
    static constexpr int PRODUCER_REGS = FEAT ? 56 : 24;
    static constexpr int CONSUMER_REGS = CONSUMERS == 3 ? 160 : FEAT ? 224 : 240;
    /* live fragments of a consumer thread: O (DV / 2 floats), S (BN / 2 floats), P (BN / 4
     * registers of two dtype values) */
    static constexpr int CONSUMER_FRAGMENT_REGS = DV / 2 + BN / 2 + BN / 4;

    static_assert(D == 64 || D == 128 || D == 192 || D == 256, "head dims 64, 128, 192 (x 128) and 256");
    static_assert(CONSUMERS == 2 || (CONSUMERS == 3 && D == 64 && !FEAT), "three consumers at d64 only, plain");
    static_assert(BN == 64 || BN == 128 || BN == 176, "the S GEMM shapes ptx.cuh has: n64, n128, n176");
    static_assert(BN_ == 0 || (BN_ == 128 && D == 128 && !CAUSAL_ && !FEAT_ && !PACK_),
                  "BN_: 128-key tiles for d128 without a mask only");
    static_assert(SMEM <= 227 * 1024, "sm_90 allows 227 KB of shared memory per block");
    static_assert(OFF_K % 1024 == 0 && K_BYTES % 1024 == 0 && V_BYTES % 1024 == 0 && PANEL_Q % 1024 == 0 &&
                      PANEL_KV % 1024 == 0,
                  "every panel starts on a 1024-byte swizzle pattern");
    static_assert(PANEL_KV >> 4 < (1 << 14), "V's panel stride fits the descriptor's leading byte offset");
    static_assert(128 * PRODUCER_REGS + 128 * CONSUMERS * CONSUMER_REGS <= 65536, "register file: 64 K per SM");
    static_assert(65536 / THREADS >= PRODUCER_REGS, "launch count (65536 / THREADS) covers the producer's");
    /* three consumers leave 32 besides the fragments (ptxas -v reports it if that spills) */
    static_assert(CONSUMER_FRAGMENT_REGS + (CONSUMERS == 3 ? 32 : 40) <= CONSUMER_REGS,
                  "fragments + ~40 (32 with three consumers) for addresses and softmax state");
    static_assert(BM <= 256, "a TMA box has at most 256 rows");
    static_assert(FEAT || !PACK, "PACK takes FEAT's features");
};

/* What the kernel reads besides the tensor maps. */
struct Args {
    void *o;
    float *lse;
    const int32_t *cu_q, *cu_k;
    int64_t o_batch_stride, o_head_stride, o_row_stride; /* elements */
    int batch, heads, group, seqlen_q, seqlen_k, m_blocks;
    long long units; /* persistent: work units (a tile, or a causal pair of tiles) */
    /* which map dimension (1..3) holds the rows, the heads and the batch: 2 bits each */
    uint32_t slots_q, slots_k, slots_v;
    float scale_log2; /* softmax_scale * log2(e); 1 with a softcap (cap_out has it) */
    int dv;           /* V's and O's columns in memory: Config::DV, or 96 run as D = 128 (TMA's zeros past it) */
    /* FEAT only */
    int window_left, window_right; /* -1: unbounded (causal's right bound is CAUSAL's 0) */
    /* softcap in the log2 domain: s becomes cap_out (1 - 2 / (2^(s cap_in) + 1)) =
     * cap_out tanh(s cap_in ln(2) / 2), cap_in = 2 log2(e) softmax_scale / softcap, cap_out =
     * softcap log2(e); 0: off */
    float cap_in, cap_out;
    const int32_t *seqused_k;
    /* paged: K and V maps over (d, page rows, heads, pages), a tile loaded in chunks of
     * page_chunk rows (it divides page_size and BN), each from its page */
    const int32_t *block_table;
    int block_table_stride, page_size, page_chunk;
    /* PACK only: Q read by the consumers; the splits of a (sequence, KV head)'s keys, and with
     * more than one their partials (split_kv.h) */
    const void *q;
    int64_t q_batch_stride, q_head_stride, q_row_stride; /* elements */
    int nsplit;
    float *ws_o, *ws_lse;
};

/* One block's share of the problem. */
struct Tile {
    int h, hk, b;        /* query head, KV head, sequence */
    int sq, sk;          /* this sequence's lengths */
    int q_row0, k_row0;  /* packed: the sequence's first row in the map; else 0 */
    int q_batch, k_batch; /* the map's batch coordinate: b, or 0 when packed */
    int m0, q_first;     /* first row of the block; first row of its Q tile (m0 but at a moved tail) */
    int rows;            /* the sequence's rows: sq, or sq x group (PACK) */
    int split;           /* PACK: which of nsplit parts of the keys */
    int n_min, n_max;    /* key tiles n_min .. n_max - 1 are visible to some row of the block */
    __device__ __forceinline__ int tiles() const { return n_max - n_min; }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)

template <int BN>
__device__ __forceinline__ int key_first(const Args &a, const Tile &t, int n) {
    /* packed K: the last tile ends at the sequence's last key, never past it */
    return a.cu_k && (n + 1) * BN > t.sk ? t.sk - BN : n * BN;
}

/* the D / 64 panels of one tile: rows row .. row + 127 of (head, batch) */
template <int D, int PANEL>
__device__ __forceinline__ void load_tile(uint32_t dst, const CUtensorMap *map, uint32_t bar, uint32_t slots, int row,
                                          int head, int batch) {
    const int sr = slots & 3, sh = (slots >> 2) & 3;
    const int c1 = sr == 1 ? row : sh == 1 ? head : batch;
    const int c2 = sr == 2 ? row : sh == 2 ? head : batch;
    const int c3 = sr == 3 ? row : sh == 3 ? head : batch;
#pragma unroll
    for (int p = 0; p < D / 64; ++p) tma_load_4d(dst + p * PANEL, map, bar, 64 * p, c1, c2, c3);
}

/* the max of m[0 .. W - 1], halving W per level (m is overwritten) */
template <int W, int N>
__device__ __forceinline__ float max_tree(float (&m)[N]) {
    if constexpr (W == 1) {
        return m[0];
    } else {
#pragma unroll
        for (int i = 0; i < W / 2; ++i) m[i] = fmaxf(m[i], m[i + (W + 1) / 2]);
        return max_tree<(W + 1) / 2>(m);
    }
}

/* two floats to the dtype (split_kv.h's, which the combine uses too) */
template <typename T> using Pack = SplitKvPack<T>;

/* Barrier addresses: bars + 8 * index. */
template <class C>
struct Bars {
    static constexpr int S = C::STAGES, QB = C::Q_BUFS;
    uint32_t base;
    __device__ __forceinline__ uint32_t q(int b) const { return base + 8 * b; }
    __device__ __forceinline__ uint32_t full_k(int s) const { return base + 8 * (QB + s); }
    __device__ __forceinline__ uint32_t full_v(int s) const { return base + 8 * (QB + S + s); }
    __device__ __forceinline__ uint32_t empty_k(int s) const { return base + 8 * (QB + 2 * S + s); }
    __device__ __forceinline__ uint32_t empty_v(int s) const { return base + 8 * (QB + 3 * S + s); }
    __device__ __forceinline__ uint32_t q_empty(int b) const { return base + 8 * (QB + 4 * S + b); }
};

/* Producer: one thread loads Q, then K and V of every visible tile, last tile first, each
 * into the next stage of the ring once the consumers have released it. kv0: KV tiles this
 * block loaded before (the ring's position); qi: Q tiles loaded before (persistent: the Q
 * buffer is reloaded once the consumers have released it). */
template <int D, bool CAUSAL, int NC, bool FEAT, bool PACK, int BNX>
__device__ __forceinline__ void produce(const CUtensorMap *tm_q, const CUtensorMap *tm_k, const CUtensorMap *tm_v,
                                        const Args &a, const Tile &t, uint32_t sQ, uint32_t sK, uint32_t sV,
                                        const Bars<Config<D, CAUSAL, NC, FEAT, PACK, BNX>> &bar, int kv0, int qi) {
    using C = Config<D, CAUSAL, NC, FEAT, PACK, BNX>;
    /* the producer waits suspended, not spinning (its spin loop was ~10 % of the instructions
     * issued at d64): woken when the phase completes, 1 ms at most per try */
    auto wait = [](uint32_t b, uint32_t parity) { mbar_wait_suspend(b, parity, 1000000u); };
    if constexpr (!PACK) { /* PACK: the consumers load Q */
        const int qb = qi % C::Q_BUFS;
        wait(bar.q_empty(qb), ((qi / C::Q_BUFS) & 1) ^ 1);
        mbar_arrive_expect_tx(bar.q(qb), C::Q_BYTES);
        load_tile<D, C::PANEL_Q>(sQ + qb * C::Q_BYTES, tm_q, bar.q(qb), a.slots_q, t.q_row0 + t.q_first, t.h,
                                 t.q_batch);
    }
    /* tile n of K or V into dst: paged, chunk by chunk from each chunk's page (a chunk past the
     * sequence's last used page reads that page again: the table's later entries may hold
     * anything, and its keys are masked) */
    auto load_kv = [&](auto cols, uint32_t dst, const CUtensorMap *map, uint32_t full, uint32_t slots, int n) {
        constexpr int W = decltype(cols)::value; /* D for K, DV for V */
        if (FEAT && a.block_table) {
            const int32_t *pages = a.block_table + (int64_t)t.b * a.block_table_stride;
            const int last = (t.sk - 1) / a.page_size;
            for (int key = n * C::BN; key < (n + 1) * C::BN; key += a.page_chunk)
                load_tile<W, C::PANEL_KV>(dst + (key - n * C::BN) * 128, map, full, slots, key % a.page_size, t.hk,
                                          __ldg(pages + min(key / a.page_size, last)));
        } else {
            load_tile<W, C::PANEL_KV>(dst, map, full, slots, t.k_row0 + key_first<C::BN>(a, t, n), t.hk, t.k_batch);
        }
    };
    for (int it = 0; it < t.tiles(); ++it) {
        const int n = t.n_max - 1 - it, s = (kv0 + it) % C::STAGES;
        const uint32_t phase = ((kv0 + it) / C::STAGES) & 1;
        wait(bar.empty_k(s), phase ^ 1);
        mbar_arrive_expect_tx(bar.full_k(s), C::K_BYTES);
        load_kv(std::integral_constant<int, D>{}, sK + s * C::K_BYTES, tm_k, bar.full_k(s), a.slots_k, n);
        wait(bar.empty_v(s), phase ^ 1);
        mbar_arrive_expect_tx(bar.full_v(s), C::V_BYTES);
        load_kv(std::integral_constant<int, C::DV>{}, sV + s * C::V_BYTES, tm_v, bar.full_v(s), a.slots_v, n);
    }
}

/* the named barrier of the consumer warpgroup after cw (1 + w is warpgroup w's); with two, 2 - cw
 * as measured before three were possible */
template <int CONSUMERS>
__device__ __forceinline__ int next_turn_of(int cw) {
    return CONSUMERS == 2 ? 2 - cw : 1 + (cw + 1) % CONSUMERS;
}

/* Consumer warpgroup cw (0 .. CONSUMERS - 1): query rows 64 cw .. 64 cw + 63 of the block.
 * Thread t of the warpgroup (warp w, lane l) holds rows 16 w + l / 4 and that + 8 of them, in
 * every accumulator fragment: element 4 i + 2 r + j is (row 16 w + l / 4 + 8 r, column
 * 8 i + 2 (l % 4) + j). */
template <typename T, int D, bool CAUSAL, int NC, bool FEAT, bool PACK, int BNX>
__device__ __forceinline__ void consume(const Args &a, const Tile &t, uint32_t sQ, uint32_t sK, uint32_t sV,
                                        const Bars<Config<D, CAUSAL, NC, FEAT, PACK, BNX>> &bar, int kv0, int qi) {
    using C = Config<D, CAUSAL, NC, FEAT, PACK, BNX>;
    constexpr int BN = C::BN, STAGES = C::STAGES;
    const int cw = threadIdx.x / 128 - 1;
    auto next_turn = [](int w) { return next_turn_of<C::CONSUMERS>(w); };
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    const int q_row = t.q_first + 64 * cw + 16 * warp + lane / 4; /* this thread's first row (block row index) */
    /* row R's query (its index in the sequence) and head: R and the tile's head, or (PACK) query
     * R / group of head kv_head group + R % group */
    auto query_of = [&](int R) { return PACK ? R / a.group : R; };
    auto head_of = [&](int R) { return PACK ? t.hk * a.group + R % a.group : t.h; };
    const int qb = qi % C::Q_BUFS; /* this tile's Q buffer */
    const uint32_t q_base = sQ + qb * C::Q_BYTES + cw * 64 * 128; /* this warpgroup's 64 rows of each Q panel */

    constexpr int DV = C::DV;
    float o[DV / 2];
#pragma unroll
    for (int i = 0; i < DV / 2; ++i) o[i] = 0.0f;
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}; /* max: log2 domain, scaled */

    /* S = Q.K^T of stage s: D / 16 k-steps; within a 128-byte swizzled row, k-step kk of a panel
     * starts 32 kk bytes in (the hardware applies the swizzle to the address it forms) */
    /* the descriptors of Q, K and V stage 0 made once, the others by adding the byte offset
     * (desc_add: make_desc per k-step took ~90 uniform-datapath instructions per d64 tile) */
    const uint64_t desc_q = make_desc(q_base, 16, 1024), desc_k = make_desc(sK, 16, 1024),
                   desc_v = make_desc(sV, C::PANEL_KV, 1024);
    auto issue_qk = [&](float(&s)[BN / 2], int stage) {
        const uint64_t dk = desc_add(desc_k, stage * C::K_BYTES);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            const uint32_t qo = (kk / 4) * C::PANEL_Q + (kk % 4) * 32, ko = (kk / 4) * C::PANEL_KV + (kk % 4) * 32;
            const uint64_t da = desc_add(desc_q, qo), db = desc_add(dk, ko);
            if constexpr (BN == 128)
                Wgmma<T>::ss_n128(s, da, db, kk);
            else if constexpr (BN == 64)
                Wgmma<T>::ss_n64(s, da, db, kk);
            else
                WgmmaSS<T, BN>::run(s, da, db, kk);
        }
    };
    /* O += P.V of stage s: BN / 16 k-steps of 16 keys = 16 rows of 128 bytes; V is MN-major
     * (d contiguous): the leading offset steps to the next 64-column panel */
    auto issue_pv = [&](const uint32_t(&p)[BN / 16][4], int stage) {
        const uint64_t dv = desc_add(desc_v, stage * C::V_BYTES);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            const uint64_t db = desc_add(dv, kk * 16 * 128);
            if constexpr (DV == 256) { /* two n128 halves: O's columns 0-127 (panels 0, 1), 128-255 (2, 3) */
                Wgmma<T>::rs_n128(*reinterpret_cast<float(*)[64]>(&o[0]), p[kk], db);
                Wgmma<T>::rs_n128(*reinterpret_cast<float(*)[64]>(&o[64]), p[kk], desc_add(db, 2 * C::PANEL_KV));
            } else if constexpr (DV == 128) {
                Wgmma<T>::rs_n128(o, p[kk], db);
            } else {
                Wgmma<T>::rs_n64(o, p[kk], db);
            }
        }
    };
    /* a stage's K or V is free once every consumer warp has arrived (after its wgmma wait) */
    auto release = [&](uint32_t empty) {
        __syncwarp();
        if (lane == 0) mbar_arrive(empty);
    };
    /* the window's bounds (-1: none): key k is visible to row q iff, with the diagonal
     * g = q + sk - sq, g - wl <= k <= g + wr (and 0 <= k < sk) */
    const int wl = FEAT ? a.window_left : -1, wr = CAUSAL ? 0 : FEAT ? a.window_right : -1;
    /* key tile n needs a mask iff it reaches past the keys, starts before its nominal start (a
     * moved packed tail), crosses the right bound of the block's first row or the left bound
     * of its last */
    auto needs_mask = [&](int n) {
        const int kf = key_first<BN>(a, t, n), g = query_of(t.q_first) + t.sk - t.sq,
                  g_last = query_of(t.q_first + C::BM - 1) + t.sk - t.sq;
        return kf + BN > t.sk || kf < n * BN || (wr >= 0 && kf + BN - 1 > g + wr) || (wl >= 0 && kf < g_last - wl);
    };
    /* The online softmax over tile n's scores, in three steps: mask_tile (where needs_mask),
     * row_stats per row (the tile's max, the new running max, corr = the factor that rescales
     * O and the sums; returns the max to subtract), row_exp per row (s becomes
     * 2^(s scale_log2 - max), the sums are updated). A row that has seen no key yet keeps max
     * -inf and subtracts 0 (not -inf: no inf - inf). */
    /* Both bounds as column offsets of this thread's first column (8 i + j is column
     * 8 i + 2 (l % 4) + j): compares with immediates, no key computed per score */
    auto mask_tile = [&](float(&s)[BN / 2], int n) {
        const int kf = key_first<BN>(a, t, n), c0 = kf + 2 * (lane % 4);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int g = query_of(q_row + 8 * r) + t.sk - t.sq;
            const int lo = (wl >= 0 ? max(n * BN, g - wl) : n * BN) - c0;
            const int hi = (wr >= 0 ? min(t.sk - 1, g + wr) : t.sk - 1) - c0;
#pragma unroll
            for (int i = 0; i < BN / 8; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    if (8 * i + j < lo || 8 * i + j > hi) s[4 * i + 2 * r + j] = -INFINITY;
        }
    };
    auto row_stats = [&](const float(&s)[BN / 2], int r, float(&corr)[2]) {
        /* BN / 8 pair maxima, halved per level (an odd count carries its middle one to the next
         * level): ceil(log2(BN / 8)) dependent steps instead of BN / 8 */
        float m[BN / 8];
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) m[i] = fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]);
        float mx = max_tree<BN / 8>(m);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(row_max[r], mx * a.scale_log2);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        corr[r] = exp2_approx(row_max[r] - m_use);
        row_max[r] = m_new;
        return m_use;
    };
    auto row_exp = [&](float(&s)[BN / 2], int r, float m_use, const float(&corr)[2]) {
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                float &x = s[4 * i + 2 * r + j];
                const float e = fmaf(x, a.scale_log2, -m_use);
                x = exp2_approx(e);
                sum += x;
            }
        row_sum[r] = row_sum[r] * corr[r] + sum;
    };
    auto softmax = [&](float(&s)[BN / 2], int n, bool masked, float(&corr)[2]) {
        /* the softcap before the mask (tanh(-inf) would unmask); 2^(s cap_in) overflows to inf
         * for large s, whose 1 / (inf + 1) is 0: s becomes cap_out */
        if (FEAT && a.cap_out != 0.0f) {
#pragma unroll
            for (int i = 0; i < BN / 2; ++i)
                s[i] = fmaf(-2.0f * a.cap_out, rcp_approx(exp2_approx(s[i] * a.cap_in) + 1.0f), a.cap_out);
        }
        if (masked) mask_tile(s, n);
#pragma unroll
        for (int r = 0; r < 2; ++r) row_exp(s, r, row_stats(s, r, corr), corr);
    };
    auto rescale_o = [&](const float(&corr)[2]) {
#pragma unroll
        for (int i = 0; i < DV / 8; ++i)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                o[4 * i + 2 * r] *= corr[r];
                o[4 * i + 2 * r + 1] *= corr[r];
            }
    };
    /* P in the dtype as wgmma's A fragments: k-step kk (keys 16 kk ..) is accumulator groups 2 kk
     * and 2 kk + 1: {row, k 2(l%4)}, {row + 8, same}, {row, k + 8}, {row + 8, k + 8} */
    auto pack_p = [&](uint32_t(&p)[BN / 16][4], const float(&s)[BN / 2]) {
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
            for (int x = 0; x < 4; ++x) p[kk][x] = Pack<T>::run(s[8 * kk + 2 * x], s[8 * kk + 2 * x + 1]);
    };

    /* PACK: this warpgroup's 64 rows of Q, 16 bytes per thread and step, into the 128-byte
     * swizzled panels TMA would have written (chunk c of row r at r 128 + 16 (c ^ r % 8)); rows
     * past the sequence's are zeros. The warpgroup's barrier before (its last tile's S GEMMs,
     * which read these rows, are done in every warp) and after (each thread fences its own
     * stores for the async proxy, wgmma's reads). */
    auto load_q_rows = [&]() {
        constexpr int CH = D / 8; /* 16-byte chunks per row */
        named_bar_sync(8 + cw, 128);
        for (int e = threadIdx.x % 128; e < 64 * CH; e += 128) {
            const int r = 64 * cw + e / CH, c = e % CH, R = t.q_first + r;
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (R < t.rows && (D != 128 || c * 8 < a.dv)) /* d96: columns past 96 are zeros, as TMA's */
                v = __ldg(reinterpret_cast<const uint4 *>(static_cast<const T *>(a.q) +
                                                          split_kv_row_offset(a.cu_q, t.b, head_of(R), query_of(R),
                                                                              a.q_batch_stride, a.q_head_stride,
                                                                              a.q_row_stride)) +
                          c);
            st_shared_v4(sQ + (c / 8) * C::PANEL_Q + r * 128 + (((c % 8) ^ (r % 8)) << 4), v);
        }
        fence_proxy_async_shared();
        named_bar_sync(8 + cw, 128);
    };

    if (t.tiles() > 0) {
        /* PACK: a warpgroup with no valid row (a decode step's 8-64 rows) takes its turns and
         * releases the ring only: no GEMM, no softmax, no Q */
        const bool idle = PACK && t.q_first + 64 * cw >= t.rows;
        if constexpr (PACK) {
            if (!idle) load_q_rows();
        } else {
            mbar_wait(bar.q(qb), (qi / C::Q_BUFS) & 1);
        }
        float s[BN / 2];
        uint32_t p[BN / 16][4];
        float corr[2];
        /* S of tile it is issued with P.V of tile it - 1 (meant to run the softmax while that
         * P.V is on the tensor cores: see the wait below), and the consumer warpgroups
         * take turns to issue (named barrier 1 + w is warpgroup w's, 256 threads: it waits, the
         * one before it arrives), so one's GEMMs run during the others' softmax. Each
         * warpgroup has tiles() + 1 turns. The turns run on across the block's tiles (the kernel
         * opens the first and closes the last: hopper_fwd_kernel), so that warpgroup 0 issues
         * the next tile's first S while the last warpgroup's last P.V and epilogue run. */
        auto take_turn = [&]() { named_bar_sync(1 + cw, 256); };
        auto pass_turn = [&]() { named_bar_arrive(next_turn(cw), 256); };

        /* stage and phase of the block's KV tile kv0 + it (persistent: the ring runs on across tiles) */
        auto stage = [&](int it) { return (kv0 + it) % STAGES; };
        auto phase = [&](int it) { return (uint32_t)(((kv0 + it) / STAGES) & 1); };
        if (idle) {
            for (int it = 0; it <= t.tiles(); ++it) {
                if (it < t.tiles()) mbar_wait(bar.full_k(stage(it)), phase(it));
                if (it > 0) mbar_wait(bar.full_v(stage(it - 1)), phase(it - 1));
                take_turn();
                pass_turn();
                if (it < t.tiles()) release(bar.empty_k(stage(it)));
                if (it > 0) release(bar.empty_v(stage(it - 1)));
            }
        } else {
        mbar_wait(bar.full_k(stage(0)), phase(0));
        take_turn();
        wgmma_fence();
        issue_qk(s, stage(0));
        wgmma_commit();
        pass_turn();
        wgmma_wait<0>();
        pin(s);
        release(bar.empty_k(stage(0)));
        softmax(s, t.n_max - 1, needs_mask(t.n_max - 1), corr); /* O is 0: no rescale */
        pack_p(p, s);
        for (int it = 1; it < t.tiles(); ++it) {
            const int n = t.n_max - 1 - it, st = stage(it), prev = stage(it - 1);
            mbar_wait(bar.full_k(st), phase(it));
            mbar_wait(bar.full_v(prev), phase(it - 1));
            take_turn();
            wgmma_fence();
            issue_qk(s, st);
            wgmma_commit();
            issue_pv(p, prev);
            wgmma_commit();
            pass_turn();
            wgmma_wait<1>(); /* S done; P.V may still run */
            pin(s);
            release(bar.empty_k(st));
            softmax(s, n, needs_mask(n), corr);
            /* the softmax done before the wait for P.V, pinned (nvcc); ptxas still puts the
             * wgmma wait at the top of its basic block, above every exp2 of the tile, so no
             * softmax runs under P.V (a block boundary that prevents it measured no faster:
             * NOTES.md) */
            pin(s);
            wgmma_wait<0>();
            pin(o);
            release(bar.empty_v(prev));
            rescale_o(corr);
            pack_p(p, s);
        }
        /* every S GEMM of the tile is done: the producer may load the next tile's Q */
        if constexpr (!PACK) release(bar.q_empty(qb));
        const int last = stage(t.tiles() - 1);
        mbar_wait(bar.full_v(last), phase(t.tiles() - 1));
        take_turn();
        wgmma_fence();
        issue_pv(p, last);
        wgmma_commit();
        pass_turn();
        wgmma_wait<0>();
        pin(o);
        release(bar.empty_v(last));
        }
    }

    /* epilogue: the row sums over the quad, O = acc / l, LSE = ln 2 (max + log2 l); rows of a
     * moved packed tile before m0 belong to the previous block, rows past the end to none.
     * SFU: 1 / l and log2 l by the SFU and O's rows from one base pointer per warp, 1-9 % faster
     * with two consumers at S <= 2048 but 2-4 % slower with three (d64, 160 registers) at
     * S >= 2048, measured side by side (cause not profiled): three keep the IEEE division,
     * log2f and a 64-bit offset per row. */
    constexpr bool SFU = C::CONSUMERS == 2;
    const int64_t total_q = a.cu_q ? (int64_t)a.cu_q[a.batch] : 0;
    auto written = [&](int R) { return R >= t.m0 && R < t.rows; };
    /* O's row of block row R */
    auto o_row = [&](int R) {
        return static_cast<T *>(a.o) + split_kv_row_offset(a.cu_q, t.b, head_of(R), query_of(R), a.o_batch_stride,
                                                           a.o_head_stride, a.o_row_stride);
    };
    float inv_r[2], l_r[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float l = row_sum[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        l_r[r] = l;
        /* l >= 1 where a row saw a key (its maximum's term is 2^0): the SFU's reciprocal and
         * log2 are exact enough (SFU above) */
        inv_r[r] = l > 0.0f ? (SFU ? rcp_approx(l) : 1.0f / l) : 0.0f; /* no key seen: zeros */
        const int R = q_row + 8 * r;
        if (!written(R) || (PACK && a.nsplit > 1)) continue;
        if (a.lse && lane % 4 == 0) {
            const int h = head_of(R), q = query_of(R);
            const int64_t idx =
                a.cu_q ? (int64_t)h * total_q + t.q_row0 + q : ((int64_t)t.b * a.heads + h) * a.seqlen_q + q;
            a.lse[idx] =
                l > 0.0f ? (row_max[r] + (SFU ? lg2_approx(l) : log2f(l))) * 0.69314718055994531f : -INFINITY;
        }
    }
    /* PACK with splits: this split's partial O (normalised by its own sum, float32) and its LSE
     * in the log2 domain, for the combine (split_kv.h) */
    if (PACK && a.nsplit > 1) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int R = q_row + 8 * r;
            if (!written(R)) continue;
            const int64_t at =
                (((int64_t)t.b * a.heads + head_of(R)) * a.seqlen_q + query_of(R)) * a.nsplit + t.split;
            if (lane % 4 == 0) a.ws_lse[at] = l_r[r] > 0.0f ? row_max[r] + lg2_approx(l_r[r]) : -INFINITY;
            if (l_r[r] > 0.0f) {
                float *dst = a.ws_o + at * a.dv + 2 * (lane % 4);
#pragma unroll
                for (int i = 0; i < DV / 8; ++i)
                    if (DV != 128 || 8 * i < a.dv)
                        *reinterpret_cast<float2 *>(dst + 8 * i) =
                            make_float2(o[4 * i + 2 * r] * inv_r[r], o[4 * i + 2 * r + 1] * inv_r[r]);
            }
        }
        return;
    }
    /* O through this warp's 2 KB of shared memory, one 64-column panel at a time: the warp's 16
     * rows (local row R = l / 4 + 8 r) x 8 chunks of 16 bytes, chunk c of row R stored at
     * R 128 + 16 (c ^ R % 8) (conflict-free: a fragment store's 8 rows hit 8 different chunks;
     * a quarter-warp's 16-byte loads read one row's 8 chunks). Then lane l reads rows l / 8 + 4 it,
     * chunk l % 8, and stores it to global memory: 8 lanes write a row's 128 contiguous bytes.
     * The buffer is this warp's alone (no other warp, no TMA, no later Q load touches it):
     * __syncwarp orders the writes before the reads and the reads before the next panel's (or
     * next tile's) writes. */
    {
        const uint32_t buf = sQ + C::OFF_O + (uint32_t)(threadIdx.x / 32 - 4) * 2048u;
        const int row0 = t.q_first + 64 * cw + 16 * warp; /* the warp's first row (block row index) */
        /* O's rows of one head are o_row_stride apart, dense or packed: one base per warp (PACK's
         * rows change head and query: o_row per row) */
        T *const o_row0 = PACK || !SFU ? nullptr : o_row(row0);
#pragma unroll
        for (int pnl = 0; pnl < DV / 64; ++pnl) {
#pragma unroll
            for (int c = 0; c < 8; ++c)
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int R = lane / 4 + 8 * r, i = 8 * pnl + c;
                    st_shared_b32(buf + R * 128 + ((c ^ (R & 7)) << 4) + 4 * (lane % 4),
                                  Pack<T>::run(o[4 * i + 2 * r] * inv_r[r], o[4 * i + 2 * r + 1] * inv_r[r]));
                }
            __syncwarp();
#pragma unroll
            for (int it = 0; it < 4; ++it) {
                const int R = lane / 8 + 4 * it, c = lane % 8, q = row0 + R;
                const uint4 v = ld_shared_v4(buf + R * 128 + ((c ^ (R & 7)) << 4));
                if (written(q) && (DV != 128 || 64 * pnl + 8 * c < a.dv))
                    *reinterpret_cast<uint4 *>((PACK || !SFU ? o_row(q) : o_row0 + (int64_t)R * a.o_row_stride) +
                                               64 * pnl + 8 * c) = v;
            }
            __syncwarp();
        }
    }
}

/* The tile of row block mb (rows mb BM ..) of query head h, sequence b; false when the
 * block starts past its (packed) sequence's end: nothing to do. */
template <int D, bool CAUSAL, int NC, bool FEAT, bool PACK, int BNX>
__device__ __forceinline__ bool make_tile(const Args &a, int mb, int h, int b, Tile &t) {
    using C = Config<D, CAUSAL, NC, FEAT, PACK, BNX>;
    t.h = h, t.b = b, t.hk = h / a.group;
    t.sq = a.seqlen_q, t.sk = a.seqlen_k, t.q_row0 = 0, t.k_row0 = 0, t.q_batch = b, t.k_batch = b;
    if (a.cu_q) t.q_row0 = a.cu_q[b], t.sq = a.cu_q[b + 1] - t.q_row0, t.q_batch = 0;
    if (a.cu_k) t.k_row0 = a.cu_k[b], t.sk = a.cu_k[b + 1] - t.k_row0, t.k_batch = 0;
    if (FEAT && a.seqused_k) t.sk = a.seqused_k[b];
    t.rows = PACK ? t.sq * a.group : t.sq;
    t.m0 = mb * C::BM;
    if (t.m0 >= t.rows) return false;
    /* a packed tail moved back for TMA's Q load (PACK loads its own) */
    t.q_first = !PACK && a.cu_q && t.m0 + C::BM > t.sq ? t.sq - C::BM : t.m0;
    /* keys lo .. hi are visible to some row m0 .. of the block: the right bound of its last row,
     * the left bound of its first (as needs_mask) */
    const int wl = FEAT ? a.window_left : -1, wr = CAUSAL ? 0 : FEAT ? a.window_right : -1;
    auto query_of = [&](int R) { return PACK ? R / a.group : R; };
    const int g_last = query_of(min(t.m0 + C::BM, t.rows) - 1) + t.sk - t.sq, g_first = query_of(t.m0) + t.sk - t.sq;
    const int hi = wr >= 0 ? min(t.sk - 1, g_last + wr) : t.sk - 1;
    const int lo = wl >= 0 ? max(0, g_first - wl) : 0;
    t.n_max = hi < 0 ? 0 : hi / C::BN + 1;
    t.n_min = FEAT ? min(lo / C::BN, t.n_max) : 0; /* 0 as a constant: the plain path's code as before */
    if (PACK && a.nsplit > 1) { /* split t.split of nsplit: sizes differing by one tile at most */
        const int64_t n = t.n_max - t.n_min;
        const int first = t.n_min;
        t.n_min = first + (int)(n * t.split / a.nsplit);
        t.n_max = first + (int)(n * (t.split + 1) / a.nsplit);
    }
    return true;
}

/* Persistent scheduling: work unit u (0 .. a.units - 1), its k-th tile (k = 0, 1). Full mask:
 * one tile per unit, row blocks fastest (last block first), then heads, then sequences, so
 * that the blocks running together share a head's K and V in L2. Causal: unit = the pair of
 * row blocks (M - 1 - p, p) of one (head, sequence), heaviest first, so that every unit costs
 * about M + 1 KV tiles (the middle block of an odd M alone) and the static round-robin over
 * units stays balanced; the pairs of a head are again adjacent. VARLEN (plain varlen problems):
 * the heads fastest, then the row blocks (pairs), then the sequences. A short sequence's row
 * blocks past its end cost nothing, and with the row blocks fastest a block's units all had one
 * row block index when their count divided the grid (12 pairs, 132 SMs): in a model of the
 * varlen benchmark's mixes the SMs idled 9-19 % of the time at the end, 4-6 % with the heads
 * fastest. Its own instantiation: the same code as a runtime choice made the dense kernels 3 %
 * slower at S = 512 and FEAT spill. PACK: one tile per unit, the splits of a (row block, KV
 * head, sequence) fastest. */
template <int D, bool CAUSAL, int NC, bool FEAT, bool PACK, int BNX, bool VARLEN>
__device__ __forceinline__ bool unit_tile(const Args &a, long long u, int k, Tile &t) {
    const int M = a.m_blocks;
    t.split = 0;
    if (PACK) {
        if (k) return false;
        t.split = (int)(u % a.nsplit);
        u /= a.nsplit;
        const int heads_k = a.heads / a.group;
        const long long bk = u / M;
        return make_tile<D, CAUSAL, NC, FEAT, PACK, BNX>(a, M - 1 - (int)(u % M), (int)(bk % heads_k) * a.group,
                                                    (int)(bk / heads_k), t);
    }
    if constexpr (VARLEN) {
        const int P = CAUSAL ? (M + 1) / 2 : M; /* units per (head, sequence) */
        const int h = (int)(u % a.heads), pi = (int)(u / a.heads % P), b = (int)(u / a.heads / P);
        if (k && (!CAUSAL || pi == M - 1 - pi)) return false;
        return make_tile<D, CAUSAL, NC, FEAT, PACK, BNX>(a, k ? pi : M - 1 - pi, h, b, t);
    }
    int mb;
    long long bh;
    if (!CAUSAL) {
        if (k) return false;
        mb = M - 1 - (int)(u % M), bh = u / M;
    } else {
        const int P = (M + 1) / 2, pi = (int)(u % P);
        if (k && pi == M - 1 - pi) return false;
        mb = k ? pi : M - 1 - pi, bh = u / P;
    }
    return make_tile<D, CAUSAL, NC, FEAT, PACK, BNX>(a, mb, (int)(bh % a.heads), (int)(bh / a.heads), t);
}

#endif /* sm_90a */

template <typename T, int D, bool CAUSAL, int NC, bool FEAT, bool PACK, int BNX, bool VARLEN>
__global__ void __launch_bounds__(Config<D, CAUSAL, NC, FEAT, PACK, BNX>::THREADS, 1)
    hopper_fwd_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                      const __grid_constant__ CUtensorMap tm_v, const Args a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = Config<D, CAUSAL, NC, FEAT, PACK, BNX>;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t smem = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const Bars<C> bar{smem + C::OFF_BAR};

    /* PACK: the combine (a programmatic dependent launch) may be scheduled once every block got
     * here; it still waits for this grid to finish before it reads a partial */
    if (PACK) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    if (threadIdx.x == 0) {
        for (int b = 0; b < C::Q_BUFS; ++b) {
            mbar_init(bar.q(b), 1);
            mbar_init(bar.q_empty(b), 4 * C::CONSUMERS);
        }
        for (int s = 0; s < C::STAGES; ++s) {
            mbar_init(bar.full_k(s), 1);
            mbar_init(bar.full_v(s), 1);
            mbar_init(bar.empty_k(s), 4 * C::CONSUMERS);
            mbar_init(bar.empty_v(s), 4 * C::CONSUMERS);
        }
        fence_barrier_init();
    }
    __syncthreads();

    if (threadIdx.x < 128) {
        setmaxnreg_dec<C::PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            if (!PACK) prefetch_tensormap(&tm_q); /* PACK: never encoded */
            prefetch_tensormap(&tm_k);
            prefetch_tensormap(&tm_v);
            int kv = 0, qi = 0;
            for (long long u = blockIdx.x; u < a.units; u += gridDim.x)
                for (int k = 0; k < 2; ++k) {
                    Tile t;
                    if (!unit_tile<D, CAUSAL, NC, FEAT, PACK, BNX, VARLEN>(a, u, k, t) || t.tiles() == 0) continue;
                    produce<D, CAUSAL, NC, FEAT, PACK, BNX>(&tm_q, &tm_k, &tm_v, a, t, smem, smem + C::OFF_K,
                                                       smem + C::OFF_V, bar, kv, qi);
                    kv += t.tiles(), ++qi;
                }
        }
    } else {
        setmaxnreg_inc<C::CONSUMER_REGS>();
        /* the GEMM turns (consume) run on from tile to tile: the last consumer warpgroup opens
         * warpgroup 0's first turn here and every turn is handed on, so warpgroup 0 takes one
         * more turn at the end, which matches the last hand-over's arrival */
        const int cw = threadIdx.x / 128 - 1;
        if (cw == C::CONSUMERS - 1) named_bar_arrive(1, 256);
        int kv = 0, qi = 0;
        for (long long u = blockIdx.x; u < a.units; u += gridDim.x)
            for (int k = 0; k < 2; ++k) {
                Tile t;
                if (!unit_tile<D, CAUSAL, NC, FEAT, PACK, BNX, VARLEN>(a, u, k, t)) continue;
                consume<T, D, CAUSAL, NC, FEAT, PACK, BNX>(a, t, smem, smem + C::OFF_K, smem + C::OFF_V, bar, kv, qi);
                if (t.tiles() > 0) kv += t.tiles(), ++qi;
            }
        if (cw == 0) named_bar_sync(1, 256);
    }
#endif
}

/* ---- host ---- */

/* cuTensorMapEncodeTiled from the driver, looked up once (the project does not link libcuda) */
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
    static std::atomic<void *> fn{nullptr};
    void *f = fn.load(std::memory_order_acquire);
    if (!f) {
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess || !f)
            return nullptr;
        fn.store(f, std::memory_order_release);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
}

/* A context current on this thread, for the driver's cuTensorMapEncodeTiled (which fails with
 * CUDA_ERROR_INVALID_CONTEXT without one): the runtime binds the device's primary context only
 * at its first call that needs a context, so a thread whose first CUDA call is fwd has none
 * (the contract check 'threads'). The primary context of dev is made current when none is,
 * never in place of the caller's. 0, or kErr. */
int bind_context(int dev) {
    static std::atomic<void *> fn{nullptr};
    void *f = fn.load(std::memory_order_acquire);
    if (!f) {
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &f, 4000, cudaEnableDefault, &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess || !f)
            return kErr;
        fn.store(f, std::memory_order_release);
    }
    CUcontext ctx = nullptr;
    if (reinterpret_cast<CUresult (*)(CUcontext *)>(f)(&ctx) != CUDA_SUCCESS) return kErr;
    return ctx || cudaSetDevice(dev) == cudaSuccess ? 0 : kErr;
}

/* 1 on compute capability 9.x, 0 on others, -1 on an error; cached per device (a bit each in
 * `known` and `yes`; past 64 devices, asked every call) */
int device_is_sm90(int dev) {
    static std::atomic<unsigned long long> known{0}, yes{0};
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
    if (known.load(std::memory_order_acquire) & bit) return (yes.load(std::memory_order_relaxed) & bit) != 0;
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return -1;
    if (major == 9) yes.fetch_or(bit, std::memory_order_relaxed);
    known.fetch_or(bit, std::memory_order_release);
    return major == 9;
}

/* A 4-D tensor map of 16-bit elements over (d, rows, heads, batch), the element (c, i, h, b) at
 * ptr + i rs + h hs + b bs: box 64 columns x box_rows rows, 128-byte swizzle, zeros out of bounds. The
 * three outer dimensions go in increasing stride order (TMA's strides describe nested
 * dimensions), a dimension of size 1 last with a stride that nests; *slots says where each
 * went. ATTN_UNSUPPORTED for a layout TMA cannot address. */
int make_map(CUtensorMap *map, attn_dtype dtype, const void *ptr, int d, uint64_t rows, uint64_t heads,
             uint64_t batch, int64_t rs, int64_t hs, int64_t bs, uint32_t box_rows, uint32_t *slots) {
    PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
    if (!encode) return kErr;
    struct Dim {
        uint64_t n;
        int64_t stride; /* bytes; -1 until placed (size 1) */
        int kind;       /* 0 rows, 1 heads, 2 batch */
    } dim[3] = {{rows, rs * 2, 0}, {heads, hs * 2, 1}, {batch, bs * 2, 2}};
    const int64_t kMax = (int64_t)1 << 40;
    for (Dim &x : dim) {
        if (x.n < 1 || x.n > (1ull << 31)) return ATTN_UNSUPPORTED; /* coordinates are int32 */
        if (x.n == 1)
            x.stride = -1;
        else if (x.stride <= 0 || x.stride % 16 != 0 || x.stride >= kMax)
            return ATTN_UNSUPPORTED;
    }
    auto key = [](const Dim &x) { return x.stride < 0 ? INT64_MAX : x.stride; };
    for (int i = 1; i < 3; ++i) /* insertion sort by stride, size-1 dimensions last */
        for (int j = i; j > 0 && key(dim[j]) < key(dim[j - 1]); --j) {
            const Dim tmp = dim[j];
            dim[j] = dim[j - 1];
            dim[j - 1] = tmp;
        }
    int64_t span = (int64_t)d * 2; /* bytes spanned by the dimensions placed so far */
    for (Dim &x : dim) {
        if (x.stride < 0) x.stride = (span + 15) / 16 * 16;
        if (x.stride >= kMax) x.stride = kMax - 16;
        const int64_t s = x.stride * (int64_t)x.n;
        span = s > span && s / (int64_t)x.n == x.stride ? s : span;
    }
    const cuuint64_t gdim[4] = {(cuuint64_t)d, dim[0].n, dim[1].n, dim[2].n};
    const cuuint64_t gstride[3] = {(cuuint64_t)dim[0].stride, (cuuint64_t)dim[1].stride, (cuuint64_t)dim[2].stride};
    /* the box: 64 columns x box_rows rows (BM for Q, BN for K and V), one head, one batch,
     * wherever the rows went */
    const cuuint32_t box[4] = {64, dim[0].kind == 0 ? box_rows : 1u, dim[1].kind == 0 ? box_rows : 1u,
                               dim[2].kind == 0 ? box_rows : 1u};
    const cuuint32_t estride[4] = {1, 1, 1, 1};
    const CUresult rc =
        encode(map, dtype == ATTN_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
               const_cast<void *>(ptr), gdim, gstride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (rc != CUDA_SUCCESS) return ATTN_UNSUPPORTED;
    *slots = 0;
    for (int i = 0; i < 3; ++i) *slots |= (uint32_t)(i + 1) << (2 * dim[i].kind);
    return ATTN_OK;
}

/* multiprocessors of device dev (cached for devices 0 .. 63); 0 on an error */
int sm_count(int dev) {
    static std::atomic<int> cache[64];
    if (dev >= 0 && dev < 64) {
        const int c = cache[dev].load(std::memory_order_relaxed);
        if (c > 0) return c;
    }
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) return 0;
    if (dev >= 0 && dev < 64) cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

template <typename T, int D, bool CAUSAL, int NC, bool FEAT, bool PACK, int BNX = 0, bool VARLEN = false>
int launch(const Args &a, const CUtensorMap &mq, const CUtensorMap &mk, const CUtensorMap &mv, int dev,
           cudaStream_t stream) {
    using C = Config<D, CAUSAL, NC, FEAT, PACK, BNX>;
    auto kernel = hopper_fwd_kernel<T, D, CAUSAL, NC, FEAT, PACK, BNX, VARLEN>;
    /* once per instantiation and device: the kernel must have sm_90a code (a build without it
     * has an empty body), and its shared-memory limit is raised (a property of the function in
     * that device's context) */
    static std::atomic<unsigned long long> ready{0};
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
    if (!(ready.load(std::memory_order_acquire) & bit)) {
        cudaFuncAttributes fa;
        if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) return kErr;
        if (fa.binaryVersion < 90 || fa.binaryVersion >= 100) return ATTN_UNSUPPORTED;
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) != cudaSuccess)
            return kErr;
        ready.fetch_or(bit, std::memory_order_release);
    }
    /* one block per SM (or per unit, when fewer), each looping over units */
    Args pa = a;
    const long long M = a.m_blocks;
    pa.units = PACK ? M * (a.heads / a.group) * a.batch * a.nsplit : (CAUSAL ? (M + 1) / 2 : M) * a.heads * a.batch;
    const int sms = sm_count(dev);
    if (sms < 1) return kErr;
    const dim3 grid((unsigned)(pa.units < sms ? pa.units : sms));
    kernel<<<grid, C::THREADS, C::SMEM, stream>>>(mq, mk, mv, pa);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

/* consumer warpgroups of the block for this problem (kD64ThreeFrom) */
int consumers(int d, bool causal, int seqlen_q) {
    return d == 64 && seqlen_q >= (causal ? kD64ThreeFromCausal : kD64ThreeFrom) ? 3 : 2;
}

/* the plain instantiations: VARLEN (cu_seqlens_q) orders the units with the heads fastest */
template <typename T, int D, bool VARLEN>
int dispatch_plain(const Args &a, bool causal, int nc, const CUtensorMap &mq, const CUtensorMap &mk,
                   const CUtensorMap &mv, int dev, cudaStream_t stream) {
    if constexpr (D == 64) {
        if (nc == 3 && !causal) return launch<T, D, false, 3, false, false, 0, VARLEN>(a, mq, mk, mv, dev, stream);
        if (nc == 3) return launch<T, D, true, 3, false, false, 0, VARLEN>(a, mq, mk, mv, dev, stream);
    }
    if constexpr (D == 128)
        if (!causal && a.seqlen_k < kD128WideFrom)
            return launch<T, D, false, 2, false, false, 128, VARLEN>(a, mq, mk, mv, dev, stream);
    return causal ? launch<T, D, true, 2, false, false, 0, VARLEN>(a, mq, mk, mv, dev, stream)
                  : launch<T, D, false, 2, false, false, 0, VARLEN>(a, mq, mk, mv, dev, stream);
}

template <typename T, int D>
int dispatch(const Args &a, bool causal, int nc, bool feat, bool pack, const CUtensorMap &mq, const CUtensorMap &mk,
             const CUtensorMap &mv, int dev, cudaStream_t stream) {
    if (pack)
        return causal ? launch<T, D, true, 2, true, true>(a, mq, mk, mv, dev, stream)
                      : launch<T, D, false, 2, true, true>(a, mq, mk, mv, dev, stream);
    if (feat)
        return causal ? launch<T, D, true, 2, true, false>(a, mq, mk, mv, dev, stream)
                      : launch<T, D, false, 2, true, false>(a, mq, mk, mv, dev, stream);
    return a.cu_q ? dispatch_plain<T, D, true>(a, causal, nc, mq, mk, mv, dev, stream)
                  : dispatch_plain<T, D, false>(a, causal, nc, mq, mk, mv, dev, stream);
}

/* the kernel's BN (the same for two and three consumers) */
int block_n(int d, bool causal, bool feat, int seqlen_k) {
    if (d == 128 && !causal && !feat && seqlen_k < kD128WideFrom) return Config<128, false, 2, false, false, 128>::BN;
    if (d == 256) return Config<256, false, 2>::BN; /* every instantiation's */
    if (d == 192) return Config<192, false, 2>::BN;
    if (feat) return d == 64 ? Config<64, false, 2, true>::BN : Config<128, false, 2, true>::BN;
    return d == 64 ? (causal ? Config<64, true, 2>::BN : Config<64, false, 2>::BN)
                   : (causal ? Config<128, true, 2>::BN : Config<128, false, 2>::BN);
}
static_assert(Config<64, true, 2, true>::BN == Config<64, false, 2, true>::BN &&
                  Config<128, true, 2, true>::BN == Config<128, false, 2, true>::BN,
              "block_n: FEAT's BN does not depend on the mask");

bool aligned16(const void *ptr) { return ((uintptr_t)ptr % 16) == 0; }

int hopper_fwd(const attn_fwd_params *p, cudaStream_t stream) {
    if (!p) return kErr;
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    /* the pairs of kHeadDimPairs: d x d for 64, 96, 128 and 256, and 192 x 128 */
    const int dv = p->head_dim_v == 0 ? p->head_dim : p->head_dim_v;
    if (p->head_dim == 192 ? dv != 128
                           : (dv != p->head_dim ||
                              (p->head_dim != 64 && p->head_dim != 96 && p->head_dim != 128 && p->head_dim != 256)))
        return ATTN_UNSUPPORTED;
    if (p->batch < 1 || p->heads < 1 || p->seqlen_q < 1 || p->seqlen_k < 1) return kErr;
    if (!p->q || !p->k || !p->v || !p->o) return kErr;
    /* the row max is taken before scaling (and the softcap's tanh): a positive scale keeps it
     * the max */
    if (!(p->softmax_scale > 0.0f) || isinf(p->softmax_scale)) return ATTN_UNSUPPORTED;
    if (!(p->softcap >= 0.0f) || isinf(p->softcap)) return kErr;
    const float cap_in = p->softcap > 0.0f ? 2.0f * 1.4426950408889634f * (p->softmax_scale / p->softcap) : 0.0f;
    if (isinf(cap_in)) return ATTN_UNSUPPORTED; /* a softcap so small that the scale overflows */
    const int heads_k = p->heads_k == 0 ? p->heads : p->heads_k; /* 0: off */
    if (heads_k < 1 || p->heads % heads_k != 0) return kErr;
    /* Windows (as capability.c and flash2 read them): a bound that no (row, key) pair reaches
     * is none (d = j - (i + S_k - S_q) lies in [1 - S_k, S_q - 1]; seqlen_q and seqlen_k bound
     * every packed sequence's lengths); causal is window_right 0, the plain path's mask. */
    int wl = p->window_left, wr = p->causal ? 0 : p->window_right;
    if (wl < 0 || wl >= p->seqlen_k - 1) wl = -1;
    if (wr < 0 || wr >= p->seqlen_q - 1) wr = -1;
    const bool causal = wr == 0;
    /* Paged: a tile of BN keys is loaded in chunks of gcd(page_size, BN) rows, each within one
     * page; the 128-byte swizzle repeats every 8 rows (1024 bytes), so a chunk starts on a
     * pattern when page_size is a multiple of 8 */
    const bool paged = p->block_table != nullptr;
    if (paged && (p->page_size < 1 || p->block_table_stride < 1 || p->num_pages < 1)) return kErr;
    if (paged && p->page_size % 8 != 0) return ATTN_UNSUPPORTED;
    /* decode: a few queries whose rows times the group fit one block's (PACK) */
    const int group = p->heads / heads_k;
    const bool pack = p->seqlen_q <= kPackMaxQ && (int64_t)p->seqlen_q * group <= 128;
    const bool feat = pack || wl >= 0 || wr > 0 || p->softcap > 0.0f || paged || p->seqused_k;
    if (p->heads > 65535 || p->batch > 65535) return ATTN_UNSUPPORTED; /* grid y and z */

    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return kErr;
    const int sm90 = device_is_sm90(dev);
    if (sm90 < 0) return kErr;
    if (!sm90) return ATTN_UNSUPPORTED;
    if (bind_context(dev)) return kErr;

    /* TMA: 16-byte aligned bases, strides in multiples of 16 bytes (make_map); O's rows are
     * written 16 bytes at a time (the epilogue's stores), held to 16-byte alignment */
    const bool packed_q = p->cu_seqlens_q != nullptr, packed_k = p->cu_seqlens_k != nullptr && !paged;
    if (!aligned16(p->q) || !aligned16(p->k) || !aligned16(p->v) || !aligned16(p->o)) return ATTN_UNSUPPORTED;
    if (p->o_row_stride % 8 != 0 || p->o_head_stride % 8 != 0 || (!packed_q && p->o_batch_stride % 8 != 0))
        return ATTN_UNSUPPORTED;
    /* PACK reads Q 16 bytes at a time */
    if (pack && (p->q_row_stride % 8 != 0 || p->q_head_stride % 8 != 0 || (!packed_q && p->q_batch_stride % 8 != 0)))
        return ATTN_UNSUPPORTED;
    const int d = p->head_dim;
    /* d96 runs as d128: its maps end at column 96, so TMA fills Q's, K's and V's columns 96-127
     * with zeros (S unchanged, O's extra columns 0), and O is written to column 96 */
    const int dk = d == 96 ? 128 : d;
    /* packed: one map over every sequence's rows (at most batch x the longest); the batch
     * dimension is 1. Paged: K and V are (page rows, heads, pages). */
    const uint64_t rows_q = packed_q ? (uint64_t)p->batch * p->seqlen_q : (uint64_t)p->seqlen_q;
    const uint64_t rows_k = paged      ? (uint64_t)p->page_size
                            : packed_k ? (uint64_t)p->batch * p->seqlen_k
                                       : (uint64_t)p->seqlen_k;
    const uint64_t batch_q = packed_q ? 1 : (uint64_t)p->batch;
    const uint64_t batch_k = paged ? (uint64_t)p->num_pages : packed_k ? 1 : (uint64_t)p->batch;
    if (rows_q >= (1ull << 31) - 256 || rows_k >= (1ull << 31) - 256) return ATTN_UNSUPPORTED;

    Args a = {};
    CUtensorMap mq, mk, mv;
    memset(&mq, 0, sizeof mq); /* PACK: not encoded (the consumers load Q) */
    const int nc = feat ? 2 : consumers(dk, causal, p->seqlen_q);
    const uint32_t bm = 64 * nc; /* Q's box rows: the block's (Config::BM) */
    const int bn = block_n(dk, causal, feat, p->seqlen_k);
    int chunk = bn; /* K's and V's box rows */
    if (paged)
        while (p->page_size % chunk != 0) chunk /= 2; /* bn is a power of 2 with FEAT and at d256 */
    int rc = pack ? ATTN_OK
                  : make_map(&mq, p->dtype, p->q, d, rows_q, p->heads, batch_q, p->q_row_stride, p->q_head_stride,
                             p->q_batch_stride, bm, &a.slots_q);
    if (rc == ATTN_OK)
        rc = make_map(&mk, p->dtype, p->k, d, rows_k, heads_k, batch_k, p->k_row_stride, p->k_head_stride,
                      p->k_batch_stride, (uint32_t)chunk, &a.slots_k);
    if (rc == ATTN_OK)
        rc = make_map(&mv, p->dtype, p->v, dv, rows_k, heads_k, batch_k, p->v_row_stride, p->v_head_stride,
                      p->v_batch_stride, (uint32_t)chunk, &a.slots_v);
    if (rc != ATTN_OK) return rc;

    a.o = p->o;
    a.lse = p->lse;
    a.cu_q = p->cu_seqlens_q;
    a.cu_k = p->cu_seqlens_k;
    a.o_batch_stride = p->o_batch_stride, a.o_head_stride = p->o_head_stride, a.o_row_stride = p->o_row_stride;
    a.batch = p->batch, a.heads = p->heads, a.group = p->heads / heads_k;
    a.seqlen_q = p->seqlen_q, a.seqlen_k = p->seqlen_k;
    a.m_blocks = pack ? (int)(((int64_t)p->seqlen_q * group + bm - 1) / bm) : (int)((p->seqlen_q + bm - 1) / bm);
    a.units = 0;
    a.scale_log2 = p->softcap > 0.0f ? 1.0f : p->softmax_scale * 1.4426950408889634f;
    a.window_left = wl, a.window_right = wr;
    a.cap_in = cap_in, a.cap_out = p->softcap > 0.0f ? p->softcap * 1.4426950408889634f : 0.0f;
    a.seqused_k = p->seqused_k;
    a.block_table = p->block_table;
    a.block_table_stride = p->block_table_stride, a.page_size = p->page_size, a.page_chunk = chunk;
    a.dv = dv;
    a.q = p->q;
    a.q_batch_stride = p->q_batch_stride, a.q_head_stride = p->q_head_stride, a.q_row_stride = p->q_row_stride;

    /* PACK's splits: enough blocks to fill the SMs (split_kv_count), each at least
     * kPackMinSplitTiles key tiles of the keys a block may visit (all, or the window's span) */
    a.nsplit = 1;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
    if (pack) {
        const int sms = sm_count(dev);
        if (sms < 1) return kErr;
        int64_t keys = p->seqlen_k;
        if (wl >= 0) keys = std::min<int64_t>(keys, (int64_t)wl + p->seqlen_q + (wr > 0 ? wr : 0));
        const int64_t base = (int64_t)a.m_blocks * heads_k * p->batch;
        a.nsplit = split_kv_count(base, (keys + bn - 1) / bn, sms, kPackMinSplitTiles);
        if (base * a.nsplit > (1ll << 40)) return ATTN_UNSUPPORTED;
        if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) cudaGetLastError(); /* taken as capturing */
        /* a first call inside a capture cannot create the workspace's pool: no splits then */
        if (a.nsplit > 1) {
            rc = split_kv_alloc(dev, capturing != cudaStreamCaptureStatusNone,
                                (size_t)p->batch * p->heads * p->seqlen_q, a.nsplit, dv, stream, &a.ws_o, &a.ws_lse);
            if (rc == ATTN_UNSUPPORTED) a.nsplit = 1;
            else if (rc != ATTN_OK) return rc;
        }
    }

    if (p->dtype == ATTN_BF16)
        rc = dk == 64    ? dispatch<__nv_bfloat16, 64>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream)
             : dk == 128 ? dispatch<__nv_bfloat16, 128>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream)
             : dk == 192 ? dispatch<__nv_bfloat16, 192>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream)
                        : dispatch<__nv_bfloat16, 256>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream);
    else
        rc = dk == 64    ? dispatch<__half, 64>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream)
             : dk == 128 ? dispatch<__half, 128>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream)
             : dk == 192 ? dispatch<__half, 192>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream)
                        : dispatch<__half, 256>(a, causal, nc, feat, pack, mq, mk, mv, dev, stream);
    if (a.nsplit > 1) {
        /* PDL outside graph capture (as flash2's decode path) */
        const bool pdl = capturing == cudaStreamCaptureStatusNone;
        if (rc == ATTN_OK && split_kv_combine(*p, a.ws_o, a.ws_lse, a.nsplit, pdl, stream) != cudaSuccess) rc = kErr;
        if (cudaFreeAsync(a.ws_o, stream) != cudaSuccess && rc == ATTN_OK) rc = kErr;
    }
    return rc;
}

/* head_dim and head_dim_v (capability.c reads the pairs) */
constexpr int kHeadDims[] = {64, 96, 128, 192, 256, 0};
constexpr int kHeadDimPairs[] = {64, 64, 96, 96, 128, 128, 256, 256, 192, 128, 0};

} // namespace

extern "C" const attn_kernel attn_kernel_hopper = {
    "hopper", hopper_fwd,
    ATTN_CAP_GQA | ATTN_CAP_VARLEN | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_PAGED | ATTN_CAP_SEQUSED_K |
        ATTN_CAP_HEAD_DIM_V,
    0,             /* fp16 and bf16 */
    kHeadDims,     /* 64, 96, 128, 192, 256 */
    kHeadDimPairs, /* 64x64, 96x96, 128x128, 256x256, 192x128 */
};
