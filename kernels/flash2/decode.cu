/* flash2's split-KV ("flash-decoding") forward path: a few queries (seqlen_q <= 16) against a
 * long key side, where the time is reading K and V. See NOTES_decode.md.
 *
 * GQA packing: one CTA takes one (sequence b, KV head) and the group = heads / heads_k query
 * heads that read it, times its S_q queries: tile row r is query i = r / group of query head
 * kh * group + r % group, so K and V are read once per KV head, not once per query head.
 * Splits: the keys a CTA's rows see are cut into `nsplit` ranges of whole 64-key tiles (the
 * host sizes nsplit so the grid fills the GPU); each CTA writes a partial O (float32) and a
 * partial LSE per row to a stream-ordered workspace and a combine kernel merges them (with a
 * single split the CTA writes O and the LSE directly).
 * Per CTA: 4 warps; W_R of them hold one m16 row tile each (16 W_R rows), and the 4 / W_R warps
 * of a row tile split every KV tile's keys between them and merge their softmax states through
 * shared memory at the end. S = Q.K^T and O += P.V by mma.sync m16n8k16 (float32
 * accumulators, operands by ldmatrix from XOR-swizzled shared memory), online softmax in the
 * exp2 domain, K and V tiles streamed by cp.async through a 3-stage (d128) or 4-stage (d64)
 * pipeline. Paged K/V: the tile is one page (a base and a constant step) when page_size is a
 * multiple of 64, else every row goes through the block table, whose entries for the next
 * tile are fetched one iteration ahead. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "attn_abi.h"
#include "decode.h"
#include "split_kv.h"
#include "ptx.cuh"

/* The combine kernel is launched with programmatic dependent launch on sm_90 (it is scheduled
 * while the split kernel drains, and waits for it in griddepcontrol.wait): 0 turns it off. */
#ifndef FLASH2_DECODE_PDL
#define FLASH2_DECODE_PDL 1
#endif

namespace {

using namespace flash2_ptx;

constexpr int kErr = 2;           /* ATTN_OK / ATTN_UNSUPPORTED / anything else: error */
constexpr int kMaxDevices = 64;   /* per-device state (pools, occupancy) */
constexpr int kMinSplitTiles = 4; /* 256 keys at least per split */
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.69314718055994531f;

template <int D_>
struct DecodeConfig {
    static constexpr int D = D_;
    static constexpr int WARPS = 4, THREADS = WARPS * 32;
    static constexpr int BN = 64; /* keys per KV tile */
    /* K+V bytes per tile: 32 KB at d128, 16 KB at d64. Stages in flight per CTA (STAGES - 1)
     * times the resident CTAs: d128 2 x 32 KB x 2 CTAs, d64 3 x 16 KB x 3 CTAs = 128 / 144 KB
     * per SM, against the ~23-46 KB Little's law asks (22.9 GB/s per SM x 1-2 us) */
    static constexpr int STAGES = D == 128 ? 3 : 4;
    static constexpr int MIN_BLOCKS = D == 128 ? 2 : 3; /* resident CTAs per SM asked of ptxas */
    static constexpr int CHUNKS = D / 8;                /* 16-byte chunks per row */
    static constexpr int RSTEP = THREADS / CHUNKS;      /* rows between a loader thread's rows */
    static constexpr int RPT = BN / RSTEP;              /* K (and V) rows per loader thread per tile */
    static constexpr int TILE_BYTES = BN * D * 2;       /* one K or V tile */
    __host__ __device__ static constexpr int bm(int wr) { return 16 * wr; }
    __host__ __device__ static constexpr int smem_q(int wr) { return bm(wr) * D * 2; }
    __host__ __device__ static constexpr int smem_bytes(int wr) { return smem_q(wr) + 2 * STAGES * TILE_BYTES; }
    /* the epilogue's merge of the warps' softmax states reuses the K/V stages: float O rows
     * [WARPS / W_R][16 W_R] = 64 rows, padded so the fragment stores do not conflict, then (m, l) */
    static constexpr int RED_PITCH = D + 8;
    static constexpr int RED_ROWS = WARPS * 16;
    static constexpr int RED_BYTES = RED_ROWS * RED_PITCH * 4 + RED_ROWS * 2 * 4;
    /* registers a thread keeps live across a tile: O (D/8 n8 tiles), Q (D/16 k16 steps), S
     * (the warp's keys per tile / 8 n8 tiles), 4 each */
    __host__ __device__ static constexpr int fragment_regs(int wr) { return 4 * (D / 8 + D / 16 + BN / (WARPS / wr) / 8); }
    static constexpr int REG_CAP = 65536 / (THREADS * MIN_BLOCKS) < 255 ? 65536 / (THREADS * MIN_BLOCKS) : 255;

    static_assert(D == 64 || D == 128, "head dims 64 and 128");
    static_assert(RSTEP % 8 == 0 && BN % RSTEP == 0, "a loader thread's rows share one swizzle");
    static_assert(BN % (16 * WARPS) == 0, "each of 4 warps sharing a row tile gets whole k16 steps");
    static_assert(RED_BYTES <= 2 * STAGES * TILE_BYTES, "the merge fits in the K/V stages");
    /* d128: 16 + 96 = 112 KB, d64: 8 + 64 = 72 KB at W_R = 4: under sm_80's 163 KB per block,
     * and MIN_BLOCKS of them (plus 1 KB each reserved) under the H100's 228 KB per SM */
    static_assert(smem_bytes(4) <= 163 * 1024, "shared memory per block on sm_80");
    static_assert(MIN_BLOCKS * (smem_bytes(4) + 1024) <= 228 * 1024, "MIN_BLOCKS CTAs per SM on sm_90");
    /* d128: 64 + 32 + 8..32 = 104..128 of 255; d64: 32 + 16 + 8..32 = 56..80 of 170 */
    static_assert(fragment_regs(1) <= REG_CAP && fragment_regs(4) <= REG_CAP, "fragments exceed the register cap");
};

/* Launch constants, from the host. */
struct DecodeArgs {
    float scale_log2;      /* softmax_scale log2(e): scores in the exp2 domain */
    float cap_in, cap_out; /* softcap: s = tanhf(q.k cap_in) cap_out (cap_out has log2(e)); 0: off */
    int group;             /* query heads per KV head */
    int row_ctas;          /* CTAs along the rows of one (b, KV head, split) */
    int nsplit;            /* splits of each CTA's keys; 1: O and the LSE written directly */
    int page_shift;        /* log2(page_size) when it is a power of two, else -1 */
    int tile_in_page;      /* paged with page_size a multiple of BN: a tile never crosses a page */
    float *ws_o;           /* nsplit > 1: partial O, [row][split][D], row = (b heads + h) seqlen_q + i */
    float *ws_lse;         /* nsplit > 1: partial LSE (log2 domain; -inf: no key), [row][split] */
};

/* Sequence b's lengths, as simple.cu takes them: S_q from cu_seqlens_q, else seqlen_q; S_k from
 * cu_seqlens_k, else seqlen_k, then at most seqused_k[b]. */
struct SeqLens {
    int sq, sk;
};
__host__ __device__ __forceinline__ SeqLens seq_lens(const attn_fwd_params &p, int b) {
    const int sq = p.cu_seqlens_q ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
    int sk = p.cu_seqlens_k ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
    if (p.seqused_k) {
        const int used = p.seqused_k[b] > 0 ? p.seqused_k[b] : 0;
        sk = used < sk ? used : sk;
    }
    return {sq, sk};
}

/* Keys query i of a sequence sees: lo..hi (none when hi < lo), from -window_left <= j - (i + sk
 * - sq) <= window_right and 0 <= j < sk (causal: window_right 0). 64-bit: windows may be huge. */
struct KeyRange {
    int lo, hi;
};
__host__ __device__ __forceinline__ KeyRange visible_keys(const attn_fwd_params &p, int i, int sq, int sk) {
    const int64_t diag = (int64_t)i + sk - sq;
    const int right = p.causal ? 0 : p.window_right;
    int64_t lo = p.window_left >= 0 ? diag - p.window_left : 0;
    int64_t hi = right >= 0 ? diag + right : (int64_t)sk - 1;
    lo = lo < 0 ? 0 : lo;
    hi = hi > sk - 1 ? sk - 1 : hi;
    hi = hi < -1 ? -1 : hi; /* empty stays empty, in int */
    return {(int)lo, (int)hi};
}

/* Split s of ns of tiles first..last: [t0, t1), sizes differing by at most one tile. */
__host__ __device__ __forceinline__ void split_tiles(int first, int last, int s, int ns, int &t0, int &t1) {
    const int64_t n = (int64_t)last - first + 1;
    t0 = first + (int)(n * s / ns);
    t1 = first + (int)(n * (s + 1) / ns);
}

/* Four floats to the dtype, as one 8-byte store (O rows are 16-byte aligned, c a multiple of 4). */
template <typename T>
__device__ __forceinline__ void store4(T *dst, float4 v) {
    uint2 u;
    u.x = Mma<T>::pack(v.x, v.y);
    u.y = Mma<T>::pack(v.z, v.w);
    *reinterpret_cast<uint2 *>(dst) = u;
}

/* One CTA: row tile rt (16 W_R rows) of (sequence b, KV head kh), split `split` of its keys. */
template <typename T, int D, int WR>
__global__ void __launch_bounds__(DecodeConfig<D>::THREADS, DecodeConfig<D>::MIN_BLOCKS)
decode_split_kernel(const attn_fwd_params p, const DecodeArgs a) {
    using C = DecodeConfig<D>;
    constexpr int BN = C::BN, STAGES = C::STAGES, THREADS = C::THREADS;
    constexpr int WK = C::WARPS / WR;          /* warps sharing a row tile, each on its own keys */
    constexpr int BM = 16 * WR, KW = BN / WK;  /* tile rows; keys per warp per KV tile */
    constexpr int NT_S = KW / 8, NT_O = D / 8, KSTEPS = D / 16;
    constexpr int CHUNKS = C::CHUNKS, RSTEP = C::RSTEP, RPT = C::RPT;
    constexpr uint32_t TILE_BYTES = C::TILE_BYTES;
    static_assert(C::WARPS % WR == 0 && KW % 16 == 0, "warps split rows and keys evenly");

    /* the combine kernel (launched with PDL) may be scheduled as soon as every CTA got here; it
     * still waits for this whole grid to finish before it reads a partial */
    pdl_launch_dependents();

    extern __shared__ __align__(128) unsigned char smem[];
    T *sQ = reinterpret_cast<T *>(smem);                   /* [BM][D] */
    T *sK = reinterpret_cast<T *>(smem + C::smem_q(WR));  /* [STAGES][BN][D] */
    T *sV = sK + STAGES * BN * D;                          /* [STAGES][BN][D] */

    /* the row tiles of one split are neighbours in the grid: they run together and read the
     * split's K/V once from DRAM, the others from L2 */
    unsigned x = blockIdx.x;
    const int rt = (int)(x % (unsigned)a.row_ctas);
    x /= (unsigned)a.row_ctas;
    const int split = (int)(x % (unsigned)a.nsplit);
    x /= (unsigned)a.nsplit;
    const int kh = (int)(x % (unsigned)p.heads_k), b = (int)(x / (unsigned)p.heads_k);
    const int group = a.group;

    const SeqLens len = seq_lens(p, b);
    const int row0 = rt * BM, rows_b = group * len.sq; /* tile rows of this sequence */
    if (row0 >= rows_b) return; /* only padding rows (a shorter sequence): nothing to write */
    const int row_end = min(row0 + BM, rows_b);
    /* the CTA's first and last queries; rows see key ranges that move right with i, so its keys
     * are first.lo .. last.hi, and a tile inside last.lo .. first.hi needs no mask */
    const KeyRange first = visible_keys(p, row0 / group, len.sq, len.sk);
    const KeyRange last = visible_keys(p, (row_end - 1) / group, len.sq, len.sk);
    int t0 = 0, t1 = 0; /* this split's KV tiles */
    if (last.hi >= first.lo) split_tiles(first.lo / BN, last.hi / BN, split, a.nsplit, t0, t1);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3; /* mma fragment row group and column pair */
    const int wr = warp % WR, wk = warp / WR; /* row tile, and key slice KW wk .. KW (wk + 1) of each tile */

    /* this thread's rows (g and g + 8 of its row tile): the keys each sees; padding rows none */
    int lo_r[2], hi_r[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int idx = row0 + wr * 16 + g + 8 * r;
        const KeyRange kr = idx < row_end ? visible_keys(p, idx / group, len.sq, len.sk) : KeyRange{0, -1};
        lo_r[r] = kr.lo, hi_r[r] = kr.hi;
    }

    /* K and V of KV head kh: this sequence's row 0, or (paged) the pool's page 0 */
    const bool paged = p.block_table != nullptr;
    const int32_t *table = paged ? p.block_table + (int64_t)b * p.block_table_stride : nullptr;
    const T *k_head = static_cast<const T *>(p.k) + (int64_t)kh * p.k_head_stride;
    const T *v_head = static_cast<const T *>(p.v) + (int64_t)kh * p.v_head_stride;
    if (!paged) {
        k_head += p.cu_seqlens_k ? (int64_t)p.cu_seqlens_k[b] * p.k_row_stride : (int64_t)b * p.k_batch_stride;
        v_head += p.cu_seqlens_k ? (int64_t)p.cu_seqlens_k[b] * p.v_row_stride : (int64_t)b * p.v_batch_stride;
    }

    /* Loader: thread tid copies chunk tid % CHUNKS of tile rows ld_row + k RSTEP (k < RPT) of K
     * and V; RSTEP is a multiple of 8, so its swizzled smem addresses are a base plus a step. */
    const int ld_row = tid / CHUNKS, ld_col = (tid % CHUNKS) * 8;
    const uint32_t sK_ld = smem_addr(sK + swz<D>(ld_row, tid % CHUNKS));
    const uint32_t sV_ld = smem_addr(sV + swz<D>(ld_row, tid % CHUNKS));
    /* paged: the page (and the row in it) of each of this thread's rows of the next tile to
     * load, fetched from the block table one iteration before its cp.async needs it; with
     * tile_in_page only [0], the tile's page. Rows at or past S_k read no table entry. */
    int pg[RPT], po[RPT];
#pragma unroll
    for (int k = 0; k < RPT; ++k) pg[k] = po[k] = 0;
    auto fetch_pages = [&](int tile) {
        if (!paged) return;
        const int key0 = tile * BN; /* < S_k: tiles lie within first.lo .. last.hi */
        if (a.tile_in_page) {
            const int q = a.page_shift >= 0 ? key0 >> a.page_shift : key0 / p.page_size;
            pg[0] = table[q], po[0] = key0 - q * p.page_size;
        } else {
#pragma unroll
            for (int k = 0; k < RPT; ++k) {
                const int j = key0 + ld_row + k * RSTEP;
                const int q = j < len.sk ? (a.page_shift >= 0 ? j >> a.page_shift : j / p.page_size) : 0;
                pg[k] = j < len.sk ? table[q] : 0;
                po[k] = j - q * p.page_size;
            }
        }
    };
    /* K and V of tile `tile` into stage `stage`; rows at or past S_k are zero-filled, unread
     * (P is 0 there, and 0 x a NaN of unwritten memory would not be) */
    auto issue = [&](int tile, int stage) {
        const int key0 = tile * BN, valid_rows = len.sk - key0;
        const uint32_t dk = sK_ld + stage * TILE_BYTES, dv = sV_ld + stage * TILE_BYTES;
        if (!paged || a.tile_in_page) { /* consecutive rows: a base and a constant step */
            const int64_t k_at = paged ? (int64_t)pg[0] * p.k_batch_stride + (int64_t)po[0] * p.k_row_stride
                                       : (int64_t)key0 * p.k_row_stride;
            const int64_t v_at = paged ? (int64_t)pg[0] * p.v_batch_stride + (int64_t)po[0] * p.v_row_stride
                                       : (int64_t)key0 * p.v_row_stride;
            const T *kt = k_head + k_at + (int64_t)ld_row * p.k_row_stride + ld_col;
            const T *vt = v_head + v_at + (int64_t)ld_row * p.v_row_stride + ld_col;
#pragma unroll
            for (int k = 0; k < RPT; ++k) {
                const bool valid = ld_row + k * RSTEP < valid_rows;
                cp_async16(dk + k * RSTEP * D * (int)sizeof(T), valid ? kt + (int64_t)k * RSTEP * p.k_row_stride : k_head, valid);
                cp_async16(dv + k * RSTEP * D * (int)sizeof(T), valid ? vt + (int64_t)k * RSTEP * p.v_row_stride : v_head, valid);
            }
        } else { /* pages shorter than a tile, or not a multiple of it: each row its own */
#pragma unroll
            for (int k = 0; k < RPT; ++k) {
                const bool valid = ld_row + k * RSTEP < valid_rows;
                const T *kr = k_head + (int64_t)pg[k] * p.k_batch_stride + (int64_t)po[k] * p.k_row_stride + ld_col;
                const T *vr = v_head + (int64_t)pg[k] * p.v_batch_stride + (int64_t)po[k] * p.v_row_stride + ld_col;
                cp_async16(dk + k * RSTEP * D * (int)sizeof(T), valid ? kr : k_head, valid);
                cp_async16(dv + k * RSTEP * D * (int)sizeof(T), valid ? vr : v_head, valid);
            }
        }
    };

    /* prologue: Q (rows past the sequence's zero-filled), then tiles t0 .. t0 + STAGES - 2, one
     * commit group each (Q rides with the first); empty groups keep the count uniform */
    if (t0 < t1) {
        for (int c = tid; c < BM * CHUNKS; c += THREADS) {
            const int r = c / CHUNKS, ch = c % CHUNKS, idx = row0 + r;
            const bool valid = idx < row_end;
            const int i = idx / group, h = kh * group + idx % group;
            const T *src = static_cast<const T *>(p.q) +
                           split_kv_row_offset(p.cu_seqlens_q, b, h, i, p.q_batch_stride, p.q_head_stride,
                                               p.q_row_stride);
            cp_async16(smem_addr(sQ + swz<D>(r, ch)), valid ? src + ch * 8 : static_cast<const T *>(p.q), valid);
        }
#pragma unroll
        for (int st = 0; st < STAGES - 1; ++st) {
            if (t0 + st < t1) {
                fetch_pages(t0 + st);
                issue(t0 + st, st);
            }
            cp_async_commit();
        }
        if (t0 + STAGES - 1 < t1) fetch_pages(t0 + STAGES - 1);
    }

    uint32_t qf[KSTEPS][4];
    float acc[NT_O][4];
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}; /* log2 domain; this thread's keys */
#pragma unroll
    for (int dt = 0; dt < NT_O; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;

    /* ldmatrix lanes: K's x4 reads keys (lane & 7) + 8 (lane >> 4) at chunk 2 kk + ((lane >> 3) & 1);
     * V's .trans x4 reads keys (lane & 7) + 8 ((lane >> 3) & 1) at chunk dt + (lane >> 4); every
     * row a lane reads is lane (mod 8), so its swizzle XOR is always lane & 7 */
    const uint32_t l7 = lane & 7, k_hi = (lane >> 3) & 1, v_hi = lane >> 4;
    const uint32_t sK_lane = smem_addr(sK + (wk * KW + (lane & 7) + ((lane >> 4) << 3)) * D);
    const uint32_t sV_lane = smem_addr(sV + (wk * KW + (lane & 7) + (((lane >> 3) & 1) << 3)) * D);
    const bool softcap = a.cap_in != 0.0f;

    int stage = 0; /* stage of tile j */
    for (int j = t0; j < t1; ++j) {
        cp_async_wait<STAGES - 2>();
        __syncthreads(); /* tile j is in; every warp is done with tile j - 1's stage, refilled next */
        {
            const int jn = j + STAGES - 1;
            if (jn < t1) {
                issue(jn, stage == 0 ? STAGES - 1 : stage - 1);
                if (jn + 1 < t1) fetch_pages(jn + 1); /* used next iteration: its latency hides behind this one */
            }
            cp_async_commit();
        }
        if (j == t0) {
#pragma unroll
            for (int kk = 0; kk < KSTEPS; ++kk) {
                const int row = wr * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                ldmatrix_x4(qf[kk], smem_addr(sQ + swz<D>(row, 2 * kk + (lane >> 4))));
            }
        }
        const uint32_t kS = sK_lane + stage * TILE_BYTES, vS = sV_lane + stage * TILE_BYTES;

        /* S = Q.K^T over this warp's KW keys of the tile */
        float s[NT_S][4];
#pragma unroll
        for (int nt = 0; nt < NT_S; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
            for (int nt = 0; nt < NT_S; nt += 2) {
                uint32_t bk[4];
                ldmatrix_x4(bk, kS + (uint32_t)(nt * 8 * D * sizeof(T)) + ((((2 * kk) | k_hi) ^ l7) << 4));
                Mma<T>::run(s[nt], qf[kk], bk[0], bk[1]);
                Mma<T>::run(s[nt + 1], qf[kk], bk[2], bk[3]);
            }

        /* softcap before the mask (a uniform branch), then the exp2-domain scale */
        float mul = a.scale_log2;
        if (softcap) {
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[nt][e] = tanhf(s[nt][e] * a.cap_in) * a.cap_out;
            mul = 1.0f;
        }
        const int n0 = j * BN;
        if (n0 < last.lo || n0 + BN - 1 > first.hi) { /* the tile crosses some row's range: mask per element */
            const int key_t = n0 + wk * KW + 2 * t;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = key_t + nt * 8 + (e & 1), r = e >> 1;
                    s[nt][e] = key < lo_r[r] || key > hi_r[r] ? -INFINITY : s[nt][e] * mul;
                }
        } else {
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[nt][e] *= mul;
        }

        /* online softmax over the warp's keys: one rescale of O per tile */
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = row_max[r];
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float base = mx == -INFINITY ? 0.0f : mx; /* a row that sees nothing yet: P = 0 */
            const float corr = exp2_approx(row_max[r] - base);
            row_max[r] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt) {
                s[nt][2 * r] = exp2_approx(s[nt][2 * r] - base);
                s[nt][2 * r + 1] = exp2_approx(s[nt][2 * r + 1] - base);
                sum += s[nt][2 * r] + s[nt][2 * r + 1];
            }
            row_sum[r] = row_sum[r] * corr + sum;
#pragma unroll
            for (int dt = 0; dt < NT_O; ++dt) acc[dt][2 * r] *= corr, acc[dt][2 * r + 1] *= corr;
        }

        /* O += P.V: S's accumulators are P's A fragments once packed to the dtype */
#pragma unroll
        for (int kb = 0; kb < KW / 16; ++kb) {
            uint32_t pa[4];
            pa[0] = Mma<T>::pack(s[2 * kb][0], s[2 * kb][1]);
            pa[1] = Mma<T>::pack(s[2 * kb][2], s[2 * kb][3]);
            pa[2] = Mma<T>::pack(s[2 * kb + 1][0], s[2 * kb + 1][1]);
            pa[3] = Mma<T>::pack(s[2 * kb + 1][2], s[2 * kb + 1][3]);
#pragma unroll
            for (int dt = 0; dt < NT_O; dt += 2) {
                uint32_t bv[4];
                ldmatrix_x4_trans(bv, vS + (uint32_t)(kb * 16 * D * sizeof(T)) + (((dt | v_hi) ^ l7) << 4));
                Mma<T>::run(acc[dt], pa, bv[0], bv[1]);
                Mma<T>::run(acc[dt + 1], pa, bv[2], bv[3]);
            }
        }
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }

    /* Epilogue: the WK warps of each row tile merge their (max, sum, O) through shared memory
     * (the K/V stages, drained), then the CTA writes its rows with coalesced stores. */
    cp_async_wait<0>();
    __syncthreads();
    float *red = reinterpret_cast<float *>(smem + C::smem_q(WR)); /* [WK][BM][RED_PITCH] */
    float *red_ml = red + WK * BM * C::RED_PITCH;                 /* [WK][BM][2]: max, sum */
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float l = row_sum[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = wr * 16 + g + 8 * r, at = wk * BM + row;
        if (t == 0) red_ml[2 * at] = row_max[r], red_ml[2 * at + 1] = l;
        float *dst = red + at * C::RED_PITCH + 2 * t;
#pragma unroll
        for (int dt = 0; dt < NT_O; ++dt)
            *reinterpret_cast<float2 *>(dst + dt * 8) = make_float2(acc[dt][2 * r], acc[dt][2 * r + 1]);
    }
    __syncthreads();

    constexpr int C4 = D / 4; /* float4 column groups per row */
    for (int e = tid; e < BM * C4; e += THREADS) {
        const int row = e / C4, c = (e % C4) * 4, idx = row0 + row;
        if (idx >= row_end) continue;
        float m = -INFINITY;
#pragma unroll
        for (int w = 0; w < WK; ++w) m = fmaxf(m, red_ml[2 * (w * BM + row)]);
        float l = 0.0f;
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (m != -INFINITY) {
#pragma unroll
            for (int w = 0; w < WK; ++w) {
                const float sc = exp2f(red_ml[2 * (w * BM + row)] - m); /* 0 for a warp that saw nothing */
                const float4 v = *reinterpret_cast<const float4 *>(red + (w * BM + row) * C::RED_PITCH + c);
                l += sc * red_ml[2 * (w * BM + row) + 1];
                o.x += sc * v.x, o.y += sc * v.y, o.z += sc * v.z, o.w += sc * v.w;
            }
        }
        const float inv = l > 0.0f ? 1.0f / l : 0.0f; /* a row that sees no key: O = 0 */
        o.x *= inv, o.y *= inv, o.z *= inv, o.w *= inv;
        const int i = idx / group, h = kh * group + idx % group;
        if (a.nsplit == 1) {
            T *dst = static_cast<T *>(p.o) +
                     split_kv_row_offset(p.cu_seqlens_q, b, h, i, p.o_batch_stride, p.o_head_stride,
                                         p.o_row_stride) +
                     c;
            store4<T>(dst, o);
            if (c == 0 && p.lse) p.lse[split_kv_lse_index(p, b, h, i)] = l > 0.0f ? (m + log2f(l)) * kLn2 : -INFINITY;
        } else {
            const int64_t at = (((int64_t)b * p.heads + h) * p.seqlen_q + i) * a.nsplit + split;
            if (l > 0.0f) *reinterpret_cast<float4 *>(a.ws_o + at * D + c) = o; /* the combine skips the others */
            if (c == 0) a.ws_lse[at] = l > 0.0f ? m + log2f(l) : -INFINITY;
        }
    }
}

/* ---- host ------------------------------------------------------------------------------ */

/* Resident CTAs per SM of one instantiation on device dev (its shared-memory limit raised
 * first): once per device; 0 when it cannot run there, -1 on an error. */
template <typename Kernel>
int blocks_per_sm(Kernel kernel, int threads, int smem, int dev, std::atomic<int> (&cache)[kMaxDevices]) {
    int n = dev >= 0 && dev < kMaxDevices ? cache[dev].load(std::memory_order_relaxed) : 0;
    if (n > 0) return n;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) return -1;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess)
        return -1;
    if (n > 0 && dev >= 0 && dev < kMaxDevices) cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

template <typename T, int D, int WR>
int launch(const attn_fwd_params *p, DecodeArgs a, cudaStream_t stream) {
    using C = DecodeConfig<D>;
    constexpr int smem = C::smem_bytes(WR);
    static std::atomic<int> occupancy[kMaxDevices];
    int dev = 0, sms = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
        return kErr;
    const int per_sm = blocks_per_sm(decode_split_kernel<T, D, WR>, C::THREADS, smem, dev, occupancy);
    if (per_sm < 0) return kErr;
    if (per_sm == 0) return ATTN_UNSUPPORTED; /* not enough shared memory on this device */

    a.tile_in_page = p->block_table && p->page_size % C::BN == 0;
    const int64_t base = (int64_t)p->batch * p->heads_k * a.row_ctas;
    /* the keys one (b, KV head) row tile may visit: all, or a window's span */
    int64_t keys = p->seqlen_k;
    if (p->window_left >= 0) {
        const int64_t span = (int64_t)p->window_left + p->seqlen_q + (p->window_right > 0 ? p->window_right : 0);
        keys = span < keys ? span : keys;
    }
    a.nsplit = split_kv_count(base, (keys + C::BN - 1) / C::BN + 1, (int64_t)sms * per_sm, kMinSplitTiles);
    if (base * a.nsplit > 0x7fffffff) return ATTN_UNSUPPORTED; /* grid x */
    const int64_t rows = (int64_t)p->batch * p->heads * p->seqlen_q;
    if ((rows + 3) / 4 > 0x7fffffff) return ATTN_UNSUPPORTED;

    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) cudaGetLastError(); /* taken as capturing */
    if (a.nsplit > 1) {
        /* a first call inside a capture leaves this problem to the prefill path (split_kv.h) */
        const int rc = split_kv_alloc(dev, capturing != cudaStreamCaptureStatusNone, (size_t)rows, a.nsplit, D, stream,
                                      &a.ws_o, &a.ws_lse);
        if (rc != ATTN_OK) return rc;
    }
    cudaGetLastError(); /* an earlier call's error is not this launch's */
    decode_split_kernel<T, D, WR><<<(unsigned)(base * a.nsplit), C::THREADS, smem, stream>>>(*p, a);
    cudaError_t e = cudaGetLastError();
    /* PDL on sm_90 outside graph capture (captured, the launch gap it hides is small, and a
     * plain launch is the one every driver captures) */
    if (e == cudaSuccess && a.nsplit > 1)
        e = split_kv_combine(*p, a.ws_o, a.ws_lse, a.nsplit,
                             FLASH2_DECODE_PDL && major >= 9 && capturing == cudaStreamCaptureStatusNone, stream);
    void *ws = a.ws_o;
    if (ws && cudaFreeAsync(ws, stream) != cudaSuccess && e == cudaSuccess) e = cudaErrorUnknown;
    return e == cudaSuccess ? ATTN_OK : kErr;
}

/* Rows per CTA: 16 W_R, W_R the power of two (at most 4) that holds group x S_q rows, or 4 with
 * several CTAs along the rows (row_ctas) beyond 64. */
template <typename T, int D>
int dispatch_rows(const attn_fwd_params *p, DecodeArgs a, cudaStream_t stream) {
    const int64_t rows = (int64_t)a.group * p->seqlen_q, tiles16 = (rows + 15) / 16;
    const int wr = tiles16 <= 1 ? 1 : tiles16 <= 2 ? 2 : 4;
    const int64_t row_ctas = (rows + 16 * wr - 1) / (16 * wr);
    if (row_ctas > 0x7fffffff) return ATTN_UNSUPPORTED;
    a.row_ctas = (int)row_ctas;
    if (wr == 1) return launch<T, D, 1>(p, a, stream);
    if (wr == 2) return launch<T, D, 2>(p, a, stream);
    return launch<T, D, 4>(p, a, stream);
}

} // namespace

int flash2_decode_fwd(const attn_fwd_params *p, cudaStream_t stream) {
    if (!p) return kErr;
    if (p->seqlen_q < 1 || p->seqlen_q > FLASH2_DECODE_MAX_Q || p->seqlen_k < FLASH2_DECODE_MIN_KEYS)
        return ATTN_UNSUPPORTED;
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if (p->head_dim != 64 && p->head_dim != 128) return ATTN_UNSUPPORTED;
    if (p->head_dim_v != 0 && p->head_dim_v != p->head_dim) return ATTN_UNSUPPORTED;
    if (p->batch < 1 || p->heads < 1 || p->heads_k < 1 || p->heads % p->heads_k != 0) return kErr;
    if (p->block_table && p->page_size < 1) return kErr;

    DecodeArgs a = {};
    a.group = p->heads / p->heads_k;
    a.scale_log2 = p->softmax_scale * kLog2e;
    if (p->softcap > 0.0f) {
        a.cap_in = p->softmax_scale / p->softcap;
        a.cap_out = p->softcap * kLog2e;
        if (isinf(a.cap_in)) return ATTN_UNSUPPORTED; /* as flash2_fwd: out of float range */
    }
    a.page_shift = -1;
    if (p->block_table && (p->page_size & (p->page_size - 1)) == 0)
        for (a.page_shift = 0; (1 << a.page_shift) < p->page_size; ++a.page_shift) {}
    const bool bf16 = p->dtype == ATTN_BF16;
    if (p->head_dim == 64)
        return bf16 ? dispatch_rows<__nv_bfloat16, 64>(p, a, stream) : dispatch_rows<__half, 64>(p, a, stream);
    return bf16 ? dispatch_rows<__nv_bfloat16, 128>(p, a, stream) : dispatch_rows<__half, 128>(p, a, stream);
}
