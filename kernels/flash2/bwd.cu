/* flash2's backward pass (FlashAttention-2's Algorithm 2 with mma.sync; NOTES_bwd.md): three
 * launches on the caller's stream, no allocation, the scratch in the caller's workspace
 * (bwd_plan.h): the pre-pass writes D = rowsum(dO * O) and the LSE in the log2 domain and
 * zeroes dQ's float32 accumulator; the main kernel (bwd_kernel.cuh), one block per key block of
 * 128 keys of one (sequence, KV head), keeps dK and dV in registers over every query head of
 * the group and every query block that sees its keys, and adds dQ into the accumulator with
 * atomics; the post-pass scales dQ and writes it in the dtype. Deterministic: each block adds
 * into a slice of its own, summed by the post-pass in slice order.
 * Takes fp16 and bf16, head dims 64 and 128, dense (BSHD, BHSD, any strides that are multiples
 * of 8 elements) or packed rows (cu_seqlens_q / _k) with seqused_k, full or causal masks,
 * grouped KV heads; anything else is ATTN_UNSUPPORTED. */
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "bwd.h"
#include "bwd_kernel.cuh"

namespace {

/* 16-byte cp.async and vector loads and stores of rows: 16-byte aligned base, strides in
 * multiples of 8 elements (a stride a packed layout leaves unused is passed as 0) */
bool rows_aligned(const void *ptr, int64_t batch_stride, int64_t head_stride, int64_t row_stride) {
    return ((uintptr_t)ptr % 16) == 0 && batch_stride % 8 == 0 && head_stride % 8 == 0 && row_stride % 8 == 0;
}

/* ATTN_OK when flash2's backward takes bp (then *n is its forward problem normalised: heads_k
 * set, causal folded from window_right 0), else ATTN_UNSUPPORTED or kErr. */
int check(const attn_bwd_params *bp, attn_fwd_params *n) {
    if (!bp || !bp->fwd) return kErr;
    *n = *bp->fwd;
    if (n->dtype != ATTN_F16 && n->dtype != ATTN_BF16) return ATTN_UNSUPPORTED;
    if ((n->head_dim != 64 && n->head_dim != 128) || (n->head_dim_v != 0 && n->head_dim_v != n->head_dim))
        return ATTN_UNSUPPORTED;
    if (n->batch < 1 || n->heads < 1 || n->seqlen_q < 1 || n->seqlen_k < 1) return kErr;
    if (!n->q || !n->k || !n->v || !n->o || !n->lse || !bp->dout || !bp->dq || !bp->dk || !bp->dv) return kErr;
    if (n->block_table || !(n->softcap == 0.0f)) return ATTN_UNSUPPORTED; /* paged has no backward; softcap: later */
    if (n->heads_k == 0) n->heads_k = n->heads;
    if (n->heads_k < 1 || n->heads % n->heads_k != 0) return kErr;
    /* windows as the forward reads them: a bound no (row, key) pair reaches is none; causal is
     * window_right 0; any other window is not taken yet */
    if (n->window_left < 0 || n->window_left >= n->seqlen_k - 1) n->window_left = -1;
    if (n->causal)
        n->window_right = 0;
    else if (n->window_right < 0 || n->window_right >= n->seqlen_q - 1)
        n->window_right = -1;
    if (n->window_left >= 0 || n->window_right > 0) return ATTN_UNSUPPORTED;
    n->causal = n->window_right == 0;
    if (n->heads > 65535 || n->batch > 65535) return ATTN_UNSUPPORTED; /* grid y and z */
    const bool packed_q = n->cu_seqlens_q != nullptr, packed_k = n->cu_seqlens_k != nullptr;
    if (packed_q && n->total_q < 0) return kErr;
    const int64_t bq = packed_q ? 0 : 1, bk = packed_k ? 0 : 1; /* batch strides unused when packed */
    if (!rows_aligned(n->q, bq * n->q_batch_stride, n->q_head_stride, n->q_row_stride) ||
        !rows_aligned(n->k, bk * n->k_batch_stride, n->k_head_stride, n->k_row_stride) ||
        !rows_aligned(n->v, bk * n->v_batch_stride, n->v_head_stride, n->v_row_stride) ||
        !rows_aligned(n->o, bq * n->o_batch_stride, n->o_head_stride, n->o_row_stride) ||
        !rows_aligned(bp->dout, bq * bp->do_batch_stride, bp->do_head_stride, bp->do_row_stride) ||
        !rows_aligned(bp->dq, bq * bp->dq_batch_stride, bp->dq_head_stride, bp->dq_row_stride) ||
        !rows_aligned(bp->dk, bk * bp->dk_batch_stride, bp->dk_head_stride, bp->dk_row_stride) ||
        !rows_aligned(bp->dv, bk * bp->dv_batch_stride, bp->dv_head_stride, bp->dv_row_stride))
        return ATTN_UNSUPPORTED;
    return ATTN_OK;
}

/* The main kernel's dynamic shared memory above 48 KB: raised once per device (a property of
 * the function in that device's context), as the forward's launch does. A GPU whose blocks
 * cannot have that much (under sm_80's 163 KB: sm_86, sm_89, at d64 and d128) is not supported. */
template <typename T, int D>
int raise_smem(void) {
    static std::atomic<unsigned long long> raised{0};
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return kErr;
    const unsigned long long bit = dev < 64 ? 1ull << dev : 0; /* past 64 devices: every call */
    if (raised.load(std::memory_order_relaxed) & bit) return ATTN_OK;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) return kErr;
    if (optin < BwdConfig<D>::SMEM) return ATTN_UNSUPPORTED;
    if (cudaFuncSetAttribute(flash2_bwd_main<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             BwdConfig<D>::SMEM) != cudaSuccess)
        return kErr;
    raised.fetch_or(bit, std::memory_order_relaxed);
    return ATTN_OK;
}

template <typename T, int D>
int launch(const BwdArgs &a, int deterministic, cudaStream_t stream) {
    using C = BwdConfig<D>;
    const attn_fwd_params &p = a.p;
    const int rc = raise_smem<T, D>();
    if (rc != ATTN_OK) return rc;
    const dim3 rows_grid((p.seqlen_q + kRowPassRows - 1) / kRowPassRows, p.heads, p.batch);
    const bool any_rows = a.dq_acc != nullptr; /* packed: every sequence may be empty */
    if (any_rows) flash2_bwd_pre<T, D><<<rows_grid, kRowPassThreads, 0, stream>>>(a);
    const int key_blocks = (p.seqlen_k + C::BC - 1) / C::BC;
    const dim3 grid(deterministic ? a.nsplit : key_blocks, p.heads_k, p.batch);
    flash2_bwd_main<T, D><<<grid, C::THREADS, C::SMEM, stream>>>(a);
    if (any_rows) flash2_bwd_post<T, D><<<rows_grid, kRowPassThreads, 0, stream>>>(a);
    return cudaGetLastError() == cudaSuccess ? ATTN_OK : kErr;
}

} // namespace

size_t flash2_bwd_workspace(const attn_bwd_params *bp) { return flash2_bwd_plan_for(bp).bytes; }

int flash2_bwd(const attn_bwd_params *bp, cudaStream_t stream) {
    BwdArgs a{};
    const int rc = check(bp, &a.p);
    if (rc != ATTN_OK) return rc;
    const flash2_bwd_plan pl = flash2_bwd_plan_for(bp);
    if (pl.bytes > 0 && (!bp->workspace || bp->workspace_bytes < pl.bytes)) return kErr;
    a.g = *bp;
    a.g.fwd = nullptr; /* a host address: the kernels read a.p */
    char *ws = static_cast<char *>(bp->workspace);
    a.delta = pl.bytes ? reinterpret_cast<float *>(ws + pl.off_delta) : nullptr;
    a.lse2 = pl.bytes ? reinterpret_cast<float *>(ws + pl.off_lse2) : nullptr;
    a.dq_acc = pl.bytes ? reinterpret_cast<float *>(ws + pl.off_dq) : nullptr;
    a.nsplit = bp->deterministic ? pl.nsplit : 1;
    a.split_stride = bp->deterministic ? pl.rows * a.p.head_dim : 0;
    a.scale_log2 = a.p.softmax_scale * 1.4426950408889634f;
    const bool bf16 = a.p.dtype == ATTN_BF16;
    if (a.p.head_dim == 64)
        return bf16 ? launch<__nv_bfloat16, 64>(a, bp->deterministic, stream) : launch<__half, 64>(a, bp->deterministic, stream);
    return bf16 ? launch<__nv_bfloat16, 128>(a, bp->deterministic, stream) : launch<__half, 128>(a, bp->deterministic, stream);
}
