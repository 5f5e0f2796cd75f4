/* "flash2": a FlashAttention-2-class forward kernel (tensor cores through mma.sync
 * m16n8k16 with float32 accumulation, operands by ldmatrix from swizzled shared memory,
 * K and V tiles double-buffered with cp.async, online softmax in float32 registers with
 * exp2 and log2(e) folded into the scale, causal tiles above the diagonal skipped).
 *
 * One block computes BM query rows of one (batch, head) with 4 warps: 64 rows, 16 per warp,
 * or at d64 without a causal mask 128 rows, 32 per warp (MT = 2 row tiles). Per KV tile of BN = 64
 * keys: S = Q.K^T (Q fragments stay in registers), mask where the tile crosses the diagonal
 * or the end of K, rescale, O += P.V with P converted to the input dtype in registers. Short
 * sequences (S_q, S_k <= 32) pack several heads into one block. ABI version 2's grouped KV
 * heads, windows and softcap (v8) take separate instantiations (EXT), and varlen, paged K/V
 * and seqused_k (v9) others again (VAR), chosen on the host, so that version-1 problems run
 * the code they ran before. Head dims 64 and 128, and (v10, plain path only, one row tile per
 * warp) 96 (in d128-wide shared-memory rows), 256 (32-key tiles, Q re-read from shared memory)
 * and 192 for Q.K^T with 128 for V and O (DV). v11: the plain path's tile shape, warps,
 * stages, Q's place and residency are a tunable space (space.h; the kernel template and its
 * launch are in kernel.cuh); on a GPU that thresholds/<gpu>.tuned.txt names, version-1
 * problems run their class's tuned point (tuning.cu). See NOTES.md for the work per tile, the
 * resources per config and each version's measurements. */
#include <math.h>
#include <stdint.h>

#include "attn_abi.h"
#include "bwd.h"
#include "decode.h"
#include "kernel.cuh"
#include "tuning.h"

namespace {

/* p as flash2_fwd normalised it. EXT: grouped KV heads, a window beyond causal, or a softcap.
 * Row tiles per warp: space.h's default_row_tiles (1 for any mask that bounds a row's keys:
 * causal, window). Version-1 problems on a GPU that a committed tuned
 * file names run its point for their class (v11, tuning.cu), the default point otherwise. */
template <typename T, int D, bool EXT>
int dispatch(const attn_fwd_params *p, cudaStream_t stream) {
    const int pack = heads_per_block<D>(p->seqlen_q, p->seqlen_k);
    if (pack >= 2) return launch<T, D, D, true, DefaultPt<D, 1>, EXT, false>(p, pack, stream);
    if (p->heads > 65535 || p->batch > 65535) return ATTN_UNSUPPORTED; /* grid y and z */
    if (!EXT) {
        const int rc = flash2_tuned_fwd(p, stream);
        if (rc != ATTN_UNSUPPORTED) return rc;
    }
    const bool banded = p->causal || (EXT && (p->window_left >= 0 || p->window_right >= 0));
    constexpr int banded_mt = flash2_space::default_row_tiles(D, true);
    constexpr int full_mt = flash2_space::default_row_tiles(D, false);
    return banded ? launch<T, D, D, false, DefaultPt<D, banded_mt>, EXT, false>(p, 1, stream)
                  : launch<T, D, D, false, DefaultPt<D, full_mt>, EXT, false>(p, 1, stream);
}

/* VAR (varlen, paged K/V, seqused_k): one instantiation per dtype and head dim, the plain
 * path (packed heads assume one length for all) with EXT's masks, one row tile per warp (a
 * sequence's last block is then at most 63 rows short, and EXT at d64 MT 2 has no registers
 * left); any mask, GQA and softcap. */
template <typename T, int D>
int dispatch(const attn_fwd_params *p, bool ext, bool var, cudaStream_t stream) {
    if (var) {
        if (p->heads > 65535 || p->batch > 65535) return ATTN_UNSUPPORTED; /* grid y and z */
        return launch<T, D, D, false, DefaultPt<D, 1>, true, true>(p, 1, stream);
    }
    return ext ? dispatch<T, D, true>(p, stream) : dispatch<T, D, false>(p, stream);
}

/* v10's head dims (d96, d256, 192 x 128): the plain path for every problem (no packed heads,
 * one row tile per warp), with v7's code (no EXT), EXT or VAR as for d64 and d128. */
template <typename T, int D, int DV>
int dispatch_plain(const attn_fwd_params *p, bool ext, bool var, cudaStream_t stream) {
    if (p->heads > 65535 || p->batch > 65535) return ATTN_UNSUPPORTED; /* grid y and z */
    using P = DefaultPt<D, 1>;
    if (var) return launch<T, D, DV, false, P, true, true>(p, 1, stream);
    return ext ? launch<T, D, DV, false, P, true, false>(p, 1, stream)
               : launch<T, D, DV, false, P, false, false>(p, 1, stream);
}

template <typename T>
int dispatch_dims(const attn_fwd_params *p, bool ext, bool var, cudaStream_t stream) {
    switch (p->head_dim) {
    case 64: return dispatch<T, 64>(p, ext, var, stream);
    case 128: return dispatch<T, 128>(p, ext, var, stream);
    case 96: return dispatch_plain<T, 96, 96>(p, ext, var, stream);
    case 192: return dispatch_plain<T, 192, 128>(p, ext, var, stream);
    case 256: return dispatch_plain<T, 256, 256>(p, ext, var, stream);
    }
    return ATTN_UNSUPPORTED;
}

/* The (head_dim, head_dim_v) pairs taken (head_dim_v 0: head_dim): what kHeadDims lists. */
bool takes_dims(int d, int dv) {
    if (dv == 0) dv = d;
    return d == dv ? d == 64 || d == 96 || d == 128 || d == 256 : d == 192 && dv == 128;
}

/* 16-byte loads and the 4-byte stores of O need 16-byte aligned rows. */
bool aligned(const void *ptr, int64_t s0, int64_t s1, int64_t s2) {
    return ((uintptr_t)ptr % 16) == 0 && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0;
}

int flash2_fwd(const attn_fwd_params *in, cudaStream_t stream) {
    if (!in) return kErr;
    attn_fwd_params n = *in; /* normalised below */
    const attn_fwd_params *p = &n;
    if (p->dtype != ATTN_F16 && p->dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if (!takes_dims(p->head_dim, p->head_dim_v)) return ATTN_UNSUPPORTED; /* v10: 192 x 128, not 192 x 192 */
    if (p->batch < 1 || p->heads < 1 || p->seqlen_q < 1 || p->seqlen_k < 1) return kErr;
    if ((int64_t)p->batch * p->heads > INT32_MAX) return ATTN_UNSUPPORTED; /* job indices are int */
    if (!p->q || !p->k || !p->v || !p->o) return kErr;
    const bool paged = p->block_table != nullptr;
    if (paged && (p->page_size < 1 || p->block_table_stride < 1)) return kErr;
    /* a batch stride that the layout leaves unused (packed rows) is not checked; paged, K's and
     * V's are the page strides */
    const bool packed_q = p->cu_seqlens_q != nullptr, packed_kv = p->cu_seqlens_k && !paged;
    if (!aligned(p->q, packed_q ? 0 : p->q_batch_stride, p->q_head_stride, p->q_row_stride) ||
        !aligned(p->k, packed_kv ? 0 : p->k_batch_stride, p->k_head_stride, p->k_row_stride) ||
        !aligned(p->v, packed_kv ? 0 : p->v_batch_stride, p->v_head_stride, p->v_row_stride) ||
        !aligned(p->o, packed_q ? 0 : p->o_batch_stride, p->o_head_stride, p->o_row_stride))
        return ATTN_UNSUPPORTED;
    /* Version 2: grouped KV heads, windows, softcap, varlen, paged K/V, seqused_k and
     * head_dim_v (192 x 128 only: takes_dims above); the caps below */
    const bool var = packed_q || p->cu_seqlens_k || paged || p->seqused_k;
    if (n.heads_k == 0) n.heads_k = n.heads; /* "off", as simple takes it */
    if (n.heads_k < 1 || n.heads % n.heads_k != 0) return kErr;
    if (!(n.softcap >= 0.0f) || isinf(n.softcap)) return kErr;
    /* the kernel multiplies by softmax_scale / softcap: a softcap so small that this overflows
     * (under 1e-38 or so) is not taken */
    if (n.softcap > 0.0f && isinf(n.softmax_scale / n.softcap)) return ATTN_UNSUPPORTED;
    /* Windows: causal is window_right 0. A bound that no (row, key) pair reaches is none:
     * d = j - (i + S_k - S_q) lies in [1 - S_k, S_q - 1]. What is left: window_right 0
     * alone is causal (v7's code), anything else EXT. A version-1 problem (-1, -1) keeps its
     * causal flag as given, hence its kernel. With VAR, seqlen_q and seqlen_k bound every
     * sequence's S_q and S_k (the harness checks it), so the same bounds hold per sequence. */
    if (n.window_left < 0 || n.window_left >= n.seqlen_k - 1) n.window_left = -1;
    if (n.causal)
        n.window_right = 0;
    else if (n.window_right < 0 || n.window_right >= n.seqlen_q - 1)
        n.window_right = -1;
    n.causal = n.window_right == 0;
    /* decode (a few queries against a long key side): the split-KV path (decode.cu) */
    const int decode_rc = flash2_decode_fwd(p, stream);
    if (decode_rc != ATTN_UNSUPPORTED) return decode_rc;
    const bool ext = n.heads_k != n.heads || n.window_left >= 0 || n.window_right > 0 || n.softcap > 0.0f;
    return p->dtype == ATTN_BF16 ? dispatch_dims<__nv_bfloat16>(p, ext, var, stream)
                                 : dispatch_dims<__half>(p, ext, var, stream);
}

/* The plain path of a version-1 problem at the default point with `row_tiles` (tuning.cu's
 * fwd_config and facts): launched on `stream`; with func given, its kernel function only. */
template <typename T, int D, int MT>
int launch_default(const attn_fwd_params *p, cudaStream_t stream, const void **func) {
    if (func) *func = reinterpret_cast<const void *>(flash2_fwd_kernel<T, D, D, false, DefaultPt<D, MT>, false, false>);
    return func ? ATTN_OK : launch<T, D, D, false, DefaultPt<D, MT>, false, false>(p, 1, stream);
}
template <typename T>
int launch_default(const attn_fwd_params *p, int row_tiles, cudaStream_t stream, const void **func) {
    if (p->head_dim == 64)
        return row_tiles == 2 ? launch_default<T, 64, 2>(p, stream, func) : launch_default<T, 64, 1>(p, stream, func);
    if (p->head_dim == 128)
        return row_tiles == 2 ? launch_default<T, 128, 2>(p, stream, func) : launch_default<T, 128, 1>(p, stream, func);
    return ATTN_UNSUPPORTED;
}

/* head_dim_v too (capability.c checks both against this list, and ATTN_CAP_HEAD_DIM_V lets a
 * pair through): of the pairs that lets through, flash2_fwd takes 192 x 128 only */
constexpr int kHeadDims[] = {64, 96, 128, 192, 256, 0};
/* the pairs themselves, as takes_dims has them: capability.c reads these (version 3) rather
 * than kHeadDims, so that 192 x 192 is not supported before any launch */
constexpr int kHeadDimPairs[] = {64, 64, 96, 96, 128, 128, 256, 256, 192, 128, 0};

} // namespace

bool flash2_dense_ok(const attn_fwd_params *p) {
    return p && p->batch >= 1 && p->heads >= 1 && p->seqlen_q >= 1 && p->seqlen_k >= 1 &&
           (int64_t)p->batch * p->heads <= INT32_MAX && p->q && p->k && p->v && p->o &&
           aligned(p->q, p->q_batch_stride, p->q_head_stride, p->q_row_stride) &&
           aligned(p->k, p->k_batch_stride, p->k_head_stride, p->k_row_stride) &&
           aligned(p->v, p->v_batch_stride, p->v_head_stride, p->v_row_stride) &&
           aligned(p->o, p->o_batch_stride, p->o_head_stride, p->o_row_stride);
}

int flash2_launch_default(const attn_fwd_params *p, int row_tiles, cudaStream_t stream, const void **func) {
    if (p->heads > 65535 || p->batch > 65535) return ATTN_UNSUPPORTED; /* grid y and z */
    return p->dtype == ATTN_BF16 ? launch_default<__nv_bfloat16>(p, row_tiles, stream, func)
                                 : launch_default<__half>(p, row_tiles, stream, func);
}

extern "C" const attn_kernel attn_kernel_flash2 = {
    "flash2", flash2_fwd,
    ATTN_CAP_GQA | ATTN_CAP_WINDOW | ATTN_CAP_SOFTCAP | ATTN_CAP_HEAD_DIM_V | ATTN_CAP_VARLEN | ATTN_CAP_PAGED |
        ATTN_CAP_SEQUSED_K,
    0,             /* fp16 and bf16 */
    kHeadDims,     /* 64, 96, 128, 256 and 192 x 128 */
    kHeadDimPairs, /* 64x64, 96x96, 128x128, 256x256, 192x128 */
    flash2_bwd,    /* bwd.cu: head dims 64 and 128, full and causal */
    flash2_bwd_workspace,
    FLASH2_BWD_CAPS, /* GQA, varlen, seqused_k, deterministic */
};
