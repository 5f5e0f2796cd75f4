/* The cuDNN baseline's helper kernels (hand-written PTX, JIT-compiled by the driver): the
 * per-sequence lengths and ragged offsets cuDNN reads, the ABI's keyless rows and packed LSE
 * after it; for the backward, the LSE as cuDNN's Stats and the dK, dV rows no query sees. */
#include "cudnn_sdpa_internal.h"


/* ---- helper kernels ------------------------------------------------------------------ */

/* Small kernels in hand-written PTX (this file is C, built without nvcc), JIT-compiled by
 * the driver once per process (cudaLibraryLoadData), launched on the plan's stream:
 *
 * attn_cudnn_lens (before cuDNN, only with cu_seqlens): what cuDNN reads per sequence but
 *   the ABI does not give as such. Thread b in [0, nb]: off_q[b] = cu_q[b] * rs_q and
 *   off_o[b] = cu_q[b] * rs_o (ragged offsets, elements) when cu_q; off_k, off_v alike from
 *   cu_k when off_k is set (not paged); and for b < nb the lengths seq_q[b] = cu_q ?
 *   cu_q[b+1] - cu_q[b] : sq, seq_kv[b] = cu_k ? cu_k[b+1] - cu_k[b] : sk, then
 *   min(seq_kv[b], max(used[b], 0)) when used (seqused_k).
 * attn_cudnn_fix (after cuDNN): the ABI's rows that see no key, and the packed LSE. Thread
 *   row = (b * nh + h) * sq + i, for i < seq_q[b]: with lq = seq_q[b], lk = seq_kv[b],
 *   d = i + lk - lq, the visible keys are max(0, d - left) .. min(lk - 1, d + right) (a
 *   negative bound: unbounded), as attn_abi.h says. None visible (cuDNN leaves NaN there):
 *   O's row (row_bytes, in 16-byte stores) is zeroed and the LSE is -inf. Otherwise, with
 *   stats (the plan's [B][H][Sq] scratch), the LSE is copied from it. The O row is at
 *   o + b*ob + h*oh + i*or, or (cu_q) o + (cu_q[b] + i)*or + h*oh (strides in bytes); the
 *   LSE at lse[row], or (cu_q) lse[h * cu_q[nb] + cu_q[b] + i] ([heads][total_q]). The
 *   backward runs it on dQ (o = dq, no lse): its rows that see no key get zeros.
 * attn_cudnn_bwd_stats (before a backward's cuDNN): thread row = (b * nh + h) * sq + i writes
 *   stats[row] (the plan's [B][H][Sq] scratch, cuDNN's Stats): +inf for i >= seq_q[b] (padding)
 *   or where the LSE is -inf (the row sees no key: exp(s - (+inf)) = 0, where -inf would give
 *   NaN), else the LSE, read at lse[row] or (cu_q) lse[h * cu_q[nb] + cu_q[b] + i].
 * attn_cudnn_kv_fix (after a backward's cuDNN): thread row = (b * nh + h) * sk + j (nh: the KV
 *   heads), for j < lk = seq_kv[b], with lq = seq_q[b] and c = j - lk + lq: the queries that
 *   see key j are max(0, c - right) .. min(lq - 1, c + left) (a negative bound: unbounded);
 *   none (e.g. a sequence with no queries, which cuDNN may skip): the rows of dK and dV
 *   (k_bytes, v_bytes, in 16-byte stores) are zeroed, at dk + b*kb + h*kh + j*kr or (cu_k)
 *   dk + (cu_k[b] + j)*kr + h*kh (strides in bytes), dv alike. */
static const char aux_ptx[] =
    ".version 7.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry attn_cudnn_lens(\n"
    "    .param .u64 p_cu_q, .param .u64 p_cu_k, .param .u64 p_used, .param .u64 p_seq_q, .param .u64 p_seq_kv,\n"
    "    .param .u64 p_off_q, .param .u64 p_off_k, .param .u64 p_off_v, .param .u64 p_off_o,\n"
    "    .param .u64 p_rs_q, .param .u64 p_rs_k, .param .u64 p_rs_v, .param .u64 p_rs_o,\n"
    "    .param .u32 p_nb, .param .u32 p_sq, .param .u32 p_sk)\n"
    "{\n"
    "    .reg .pred %p<4>;\n"
    "    .reg .b32 %r<12>;\n"
    "    .reg .b64 %rd<12>;\n"
    "    mov.u32 %r0, %ctaid.x;\n"
    "    mov.u32 %r1, %ntid.x;\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    mad.lo.u32 %r3, %r0, %r1, %r2;\n"
    "    ld.param.u32 %r4, [p_nb];\n"
    "    setp.gt.u32 %p0, %r3, %r4;\n"
    "    @%p0 bra L_DONE;\n"
    "    setp.lt.u32 %p1, %r3, %r4;\n"
    "    mul.wide.u32 %rd0, %r3, 4;\n"
    "    mul.wide.u32 %rd1, %r3, 8;\n"
    "    ld.param.u32 %r5, [p_sq];\n"
    "    ld.param.u32 %r6, [p_sk];\n"
    "    ld.param.u64 %rd2, [p_cu_q];\n"
    "    setp.eq.u64 %p2, %rd2, 0;\n"
    "    @%p2 bra L_K;\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r7, [%rd2];\n"
    "    @%p1 ld.s32 %r8, [%rd2+4];\n"
    "    @%p1 sub.s32 %r5, %r8, %r7;\n"
    "    cvt.s64.s32 %rd3, %r7;\n"
    "    ld.param.u64 %rd4, [p_rs_q];\n"
    "    ld.param.u64 %rd5, [p_off_q];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "    ld.param.u64 %rd4, [p_rs_o];\n"
    "    ld.param.u64 %rd5, [p_off_o];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "L_K:\n"
    "    ld.param.u64 %rd2, [p_cu_k];\n"
    "    setp.eq.u64 %p2, %rd2, 0;\n"
    "    @%p2 bra L_USED;\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r7, [%rd2];\n"
    "    @%p1 ld.s32 %r8, [%rd2+4];\n"
    "    @%p1 sub.s32 %r6, %r8, %r7;\n"
    "    ld.param.u64 %rd5, [p_off_k];\n"
    "    setp.eq.u64 %p3, %rd5, 0;\n"
    "    @%p3 bra L_USED;\n"
    "    cvt.s64.s32 %rd3, %r7;\n"
    "    ld.param.u64 %rd4, [p_rs_k];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "    ld.param.u64 %rd4, [p_rs_v];\n"
    "    ld.param.u64 %rd5, [p_off_v];\n"
    "    mul.lo.s64 %rd6, %rd3, %rd4;\n"
    "    add.u64 %rd5, %rd5, %rd1;\n"
    "    st.u64 [%rd5], %rd6;\n"
    "L_USED:\n"
    "    @!%p1 bra L_DONE;\n"
    "    ld.param.u64 %rd2, [p_used];\n"
    "    setp.eq.u64 %p2, %rd2, 0;\n"
    "    @%p2 bra L_STORE;\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r9, [%rd2];\n"
    "    max.s32 %r9, %r9, 0;\n"
    "    min.s32 %r6, %r6, %r9;\n"
    "L_STORE:\n"
    "    ld.param.u64 %rd7, [p_seq_q];\n"
    "    add.u64 %rd7, %rd7, %rd0;\n"
    "    st.u32 [%rd7], %r5;\n"
    "    ld.param.u64 %rd8, [p_seq_kv];\n"
    "    add.u64 %rd8, %rd8, %rd0;\n"
    "    st.u32 [%rd8], %r6;\n"
    "L_DONE:\n"
    "    ret;\n"
    "}\n"
    ".visible .entry attn_cudnn_fix(\n"
    "    .param .u64 p_seq_q, .param .u64 p_seq_kv, .param .u64 p_cu_q, .param .u64 p_o,\n"
    "    .param .u64 p_ob, .param .u64 p_oh, .param .u64 p_or, .param .u64 p_lse, .param .u64 p_stats,\n"
    "    .param .u64 p_left, .param .u64 p_right,\n"
    "    .param .u32 p_row_bytes, .param .u32 p_nb, .param .u32 p_nh, .param .u32 p_sq, .param .u32 p_rows)\n"
    "{\n"
    "    .reg .pred %p<8>;\n"
    "    .reg .b32 %r<20>;\n"
    "    .reg .b64 %rd<32>;\n"
    "    .reg .f32 %f<2>;\n"
    "    mov.u32 %r0, %ctaid.x;\n"
    "    mov.u32 %r1, %ntid.x;\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    mad.lo.u32 %r3, %r0, %r1, %r2;\n"
    "    ld.param.u32 %r4, [p_rows];\n"
    "    setp.ge.u32 %p0, %r3, %r4;\n"
    "    @%p0 bra F_DONE;\n"
    "    ld.param.u32 %r5, [p_sq];\n"
    "    ld.param.u32 %r6, [p_nh];\n"
    "    rem.u32 %r7, %r3, %r5;\n"
    "    div.u32 %r8, %r3, %r5;\n"
    "    rem.u32 %r9, %r8, %r6;\n"
    "    div.u32 %r10, %r8, %r6;\n"
    "    mul.wide.u32 %rd0, %r10, 4;\n"
    "    ld.param.u64 %rd1, [p_seq_q];\n"
    "    add.u64 %rd1, %rd1, %rd0;\n"
    "    ld.s32 %r11, [%rd1];\n"
    "    setp.ge.s32 %p1, %r7, %r11;\n"
    "    @%p1 bra F_DONE;\n"
    "    ld.param.u64 %rd2, [p_seq_kv];\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r12, [%rd2];\n"
    "    cvt.u64.u32 %rd3, %r7;\n"
    "    cvt.s64.s32 %rd4, %r12;\n"
    "    cvt.s64.s32 %rd5, %r11;\n"
    "    add.s64 %rd6, %rd3, %rd4;\n"
    "    sub.s64 %rd6, %rd6, %rd5;\n"
    "    add.s64 %rd7, %rd4, -1;\n"
    "    mov.u64 %rd8, 0;\n"
    "    ld.param.u64 %rd9, [p_left];\n"
    "    setp.lt.s64 %p2, %rd9, 0;\n"
    "    @%p2 bra F_RIGHT;\n"
    "    sub.s64 %rd10, %rd6, %rd9;\n"
    "    max.s64 %rd8, %rd10, %rd8;\n"
    "F_RIGHT:\n"
    "    ld.param.u64 %rd9, [p_right];\n"
    "    setp.lt.s64 %p2, %rd9, 0;\n"
    "    @%p2 bra F_ROW;\n"
    "    add.s64 %rd10, %rd6, %rd9;\n"
    "    min.s64 %rd7, %rd10, %rd7;\n"
    "F_ROW:\n"
    "    setp.lt.s64 %p3, %rd7, %rd8;\n"
    "    ld.param.u64 %rd11, [p_o];\n"
    "    ld.param.u64 %rd12, [p_oh];\n"
    "    cvt.u64.u32 %rd13, %r9;\n"
    "    mad.lo.u64 %rd11, %rd13, %rd12, %rd11;\n"
    "    ld.param.u64 %rd14, [p_or];\n"
    "    ld.param.u64 %rd15, [p_cu_q];\n"
    "    setp.ne.u64 %p4, %rd15, 0;\n"
    "    @%p4 bra F_PACKED;\n"
    "    ld.param.u64 %rd16, [p_ob];\n"
    "    cvt.u64.u32 %rd17, %r10;\n"
    "    mad.lo.u64 %rd11, %rd17, %rd16, %rd11;\n"
    "    mad.lo.u64 %rd11, %rd3, %rd14, %rd11;\n"
    "    cvt.u64.u32 %rd18, %r3;\n"
    "    bra.uni F_ZERO;\n"
    "F_PACKED:\n"
    "    add.u64 %rd19, %rd15, %rd0;\n"
    "    ld.s32 %r13, [%rd19];\n"
    "    cvt.s64.s32 %rd20, %r13;\n"
    "    add.s64 %rd20, %rd20, %rd3;\n"
    "    mad.lo.u64 %rd11, %rd20, %rd14, %rd11;\n"
    "    ld.param.u32 %r14, [p_nb];\n"
    "    mul.wide.u32 %rd21, %r14, 4;\n"
    "    add.u64 %rd21, %rd15, %rd21;\n"
    "    ld.s32 %r15, [%rd21];\n"
    "    cvt.s64.s32 %rd22, %r15;\n"
    "    mad.lo.u64 %rd18, %rd13, %rd22, %rd20;\n"
    "F_ZERO:\n"
    "    @!%p3 bra F_LSE;\n"
    "    ld.param.u32 %r16, [p_row_bytes];\n"
    "    cvt.u64.u32 %rd23, %r16;\n"
    "    add.u64 %rd23, %rd11, %rd23;\n"
    "    mov.b32 %r17, 0;\n"
    "F_ZLOOP:\n"
    "    setp.ge.u64 %p5, %rd11, %rd23;\n"
    "    @%p5 bra F_LSE;\n"
    "    st.v4.b32 [%rd11], {%r17, %r17, %r17, %r17};\n"
    "    add.u64 %rd11, %rd11, 16;\n"
    "    bra.uni F_ZLOOP;\n"
    "F_LSE:\n"
    "    ld.param.u64 %rd24, [p_lse];\n"
    "    setp.eq.u64 %p6, %rd24, 0;\n"
    "    @%p6 bra F_DONE;\n"
    "    mov.f32 %f0, 0fFF800000;\n"
    "    @%p3 bra F_STORE;\n"
    "    ld.param.u64 %rd25, [p_stats];\n"
    "    setp.eq.u64 %p6, %rd25, 0;\n"
    "    @%p6 bra F_DONE;\n"
    "    cvt.u64.u32 %rd26, %r3;\n"
    "    shl.b64 %rd26, %rd26, 2;\n"
    "    add.u64 %rd25, %rd25, %rd26;\n"
    "    ld.f32 %f0, [%rd25];\n"
    "F_STORE:\n"
    "    shl.b64 %rd27, %rd18, 2;\n"
    "    add.u64 %rd24, %rd24, %rd27;\n"
    "    st.f32 [%rd24], %f0;\n"
    "F_DONE:\n"
    "    ret;\n"
    "}\n"
    ".visible .entry attn_cudnn_bwd_stats(\n"
    "    .param .u64 p_seq_q, .param .u64 p_cu_q, .param .u64 p_lse, .param .u64 p_stats,\n"
    "    .param .u32 p_nb, .param .u32 p_nh, .param .u32 p_sq, .param .u32 p_rows)\n"
    "{\n"
    "    .reg .pred %p<4>;\n"
    "    .reg .b32 %r<16>;\n"
    "    .reg .b64 %rd<16>;\n"
    "    .reg .f32 %f<2>;\n"
    "    mov.u32 %r0, %ctaid.x;\n"
    "    mov.u32 %r1, %ntid.x;\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    mad.lo.u32 %r3, %r0, %r1, %r2;\n"
    "    ld.param.u32 %r4, [p_rows];\n"
    "    setp.ge.u32 %p0, %r3, %r4;\n"
    "    @%p0 bra S_DONE;\n"
    "    ld.param.u32 %r5, [p_sq];\n"
    "    ld.param.u32 %r6, [p_nh];\n"
    "    rem.u32 %r7, %r3, %r5;\n"
    "    div.u32 %r8, %r3, %r5;\n"
    "    rem.u32 %r9, %r8, %r6;\n"
    "    div.u32 %r10, %r8, %r6;\n"
    "    mov.f32 %f0, 0f7F800000;\n"
    "    mul.wide.u32 %rd0, %r10, 4;\n"
    "    ld.param.u64 %rd1, [p_seq_q];\n"
    "    add.u64 %rd1, %rd1, %rd0;\n"
    "    ld.s32 %r11, [%rd1];\n"
    "    setp.ge.s32 %p1, %r7, %r11;\n"
    "    @%p1 bra S_STORE;\n"
    "    cvt.u64.u32 %rd2, %r3;\n"
    "    ld.param.u64 %rd3, [p_cu_q];\n"
    "    setp.eq.u64 %p2, %rd3, 0;\n"
    "    @%p2 bra S_LOAD;\n"
    "    add.u64 %rd4, %rd3, %rd0;\n"
    "    ld.s32 %r12, [%rd4];\n"
    "    ld.param.u32 %r13, [p_nb];\n"
    "    mul.wide.u32 %rd5, %r13, 4;\n"
    "    add.u64 %rd5, %rd3, %rd5;\n"
    "    ld.s32 %r14, [%rd5];\n"
    "    cvt.s64.s32 %rd6, %r12;\n"
    "    cvt.u64.u32 %rd7, %r7;\n"
    "    add.s64 %rd6, %rd6, %rd7;\n"
    "    cvt.s64.s32 %rd8, %r14;\n"
    "    cvt.u64.u32 %rd9, %r9;\n"
    "    mad.lo.s64 %rd2, %rd9, %rd8, %rd6;\n"
    "S_LOAD:\n"
    "    shl.b64 %rd10, %rd2, 2;\n"
    "    ld.param.u64 %rd11, [p_lse];\n"
    "    add.u64 %rd11, %rd11, %rd10;\n"
    "    ld.f32 %f1, [%rd11];\n"
    "    setp.eq.f32 %p3, %f1, 0fFF800000;\n"
    "    selp.f32 %f0, %f0, %f1, %p3;\n"
    "S_STORE:\n"
    "    cvt.u64.u32 %rd12, %r3;\n"
    "    shl.b64 %rd12, %rd12, 2;\n"
    "    ld.param.u64 %rd13, [p_stats];\n"
    "    add.u64 %rd13, %rd13, %rd12;\n"
    "    st.f32 [%rd13], %f0;\n"
    "S_DONE:\n"
    "    ret;\n"
    "}\n"
    ".visible .entry attn_cudnn_kv_fix(\n"
    "    .param .u64 p_seq_q, .param .u64 p_seq_kv, .param .u64 p_cu_k, .param .u64 p_dk, .param .u64 p_dv,\n"
    "    .param .u64 p_kb, .param .u64 p_kh, .param .u64 p_kr, .param .u64 p_vb, .param .u64 p_vh,\n"
    "    .param .u64 p_vr, .param .u64 p_left, .param .u64 p_right,\n"
    "    .param .u32 p_k_bytes, .param .u32 p_v_bytes, .param .u32 p_nb, .param .u32 p_nh, .param .u32 p_sk,\n"
    "    .param .u32 p_rows)\n"
    "{\n"
    "    .reg .pred %p<8>;\n"
    "    .reg .b32 %r<20>;\n"
    "    .reg .b64 %rd<24>;\n"
    "    mov.u32 %r0, %ctaid.x;\n"
    "    mov.u32 %r1, %ntid.x;\n"
    "    mov.u32 %r2, %tid.x;\n"
    "    mad.lo.u32 %r3, %r0, %r1, %r2;\n"
    "    ld.param.u32 %r4, [p_rows];\n"
    "    setp.ge.u32 %p0, %r3, %r4;\n"
    "    @%p0 bra K_DONE;\n"
    "    ld.param.u32 %r5, [p_sk];\n"
    "    ld.param.u32 %r6, [p_nh];\n"
    "    rem.u32 %r7, %r3, %r5;\n"
    "    div.u32 %r8, %r3, %r5;\n"
    "    rem.u32 %r9, %r8, %r6;\n"
    "    div.u32 %r10, %r8, %r6;\n"
    "    mul.wide.u32 %rd0, %r10, 4;\n"
    "    ld.param.u64 %rd1, [p_seq_kv];\n"
    "    add.u64 %rd1, %rd1, %rd0;\n"
    "    ld.s32 %r11, [%rd1];\n"
    "    setp.ge.s32 %p1, %r7, %r11;\n"
    "    @%p1 bra K_DONE;\n"
    "    ld.param.u64 %rd2, [p_seq_q];\n"
    "    add.u64 %rd2, %rd2, %rd0;\n"
    "    ld.s32 %r12, [%rd2];\n"
    "    cvt.u64.u32 %rd3, %r7;\n"
    "    cvt.s64.s32 %rd4, %r11;\n"
    "    cvt.s64.s32 %rd5, %r12;\n"
    "    sub.s64 %rd6, %rd3, %rd4;\n"
    "    add.s64 %rd6, %rd6, %rd5;\n"
    "    mov.u64 %rd7, 0;\n"
    "    add.s64 %rd8, %rd5, -1;\n"
    "    ld.param.u64 %rd9, [p_right];\n"
    "    setp.lt.s64 %p2, %rd9, 0;\n"
    "    @%p2 bra K_LEFT;\n"
    "    sub.s64 %rd10, %rd6, %rd9;\n"
    "    max.s64 %rd7, %rd10, %rd7;\n"
    "K_LEFT:\n"
    "    ld.param.u64 %rd9, [p_left];\n"
    "    setp.lt.s64 %p2, %rd9, 0;\n"
    "    @%p2 bra K_TEST;\n"
    "    add.s64 %rd10, %rd6, %rd9;\n"
    "    min.s64 %rd8, %rd10, %rd8;\n"
    "K_TEST:\n"
    "    setp.le.s64 %p3, %rd7, %rd8;\n"
    "    @%p3 bra K_DONE;\n"
    "    cvt.u64.u32 %rd11, %r9;\n"
    "    cvt.u64.u32 %rd12, %r10;\n"
    "    ld.param.u64 %rd13, [p_cu_k];\n"
    "    setp.eq.u64 %p4, %rd13, 0;\n"
    "    @%p4 bra K_ROWS;\n"
    "    add.u64 %rd14, %rd13, %rd0;\n"
    "    ld.s32 %r13, [%rd14];\n"
    "    cvt.s64.s32 %rd15, %r13;\n"
    "    add.s64 %rd3, %rd15, %rd3;\n"
    "    mov.u64 %rd12, 0;\n"
    "K_ROWS:\n"
    "    ld.param.u64 %rd16, [p_dk];\n"
    "    ld.param.u64 %rd17, [p_kb];\n"
    "    mad.lo.u64 %rd16, %rd12, %rd17, %rd16;\n"
    "    ld.param.u64 %rd17, [p_kh];\n"
    "    mad.lo.u64 %rd16, %rd11, %rd17, %rd16;\n"
    "    ld.param.u64 %rd17, [p_kr];\n"
    "    mad.lo.u64 %rd16, %rd3, %rd17, %rd16;\n"
    "    ld.param.u64 %rd18, [p_dv];\n"
    "    ld.param.u64 %rd17, [p_vb];\n"
    "    mad.lo.u64 %rd18, %rd12, %rd17, %rd18;\n"
    "    ld.param.u64 %rd17, [p_vh];\n"
    "    mad.lo.u64 %rd18, %rd11, %rd17, %rd18;\n"
    "    ld.param.u64 %rd17, [p_vr];\n"
    "    mad.lo.u64 %rd18, %rd3, %rd17, %rd18;\n"
    "    mov.b32 %r14, 0;\n"
    "    ld.param.u32 %r15, [p_k_bytes];\n"
    "    cvt.u64.u32 %rd19, %r15;\n"
    "    add.u64 %rd19, %rd16, %rd19;\n"
    "K_ZK:\n"
    "    setp.ge.u64 %p5, %rd16, %rd19;\n"
    "    @%p5 bra K_V;\n"
    "    st.v4.b32 [%rd16], {%r14, %r14, %r14, %r14};\n"
    "    add.u64 %rd16, %rd16, 16;\n"
    "    bra.uni K_ZK;\n"
    "K_V:\n"
    "    ld.param.u32 %r16, [p_v_bytes];\n"
    "    cvt.u64.u32 %rd20, %r16;\n"
    "    add.u64 %rd20, %rd18, %rd20;\n"
    "K_ZV:\n"
    "    setp.ge.u64 %p6, %rd18, %rd20;\n"
    "    @%p6 bra K_DONE;\n"
    "    st.v4.b32 [%rd18], {%r14, %r14, %r14, %r14};\n"
    "    add.u64 %rd18, %rd18, 16;\n"
    "    bra.uni K_ZV;\n"
    "K_DONE:\n"
    "    ret;\n"
    "}\n";

/* Loads the helper kernels into c (once). 0, or -1 with why. */
int sdpa_load_aux(attn_cudnn *c, char *why, size_t whylen) {
    if (c->aux) return 0;
    cudaError_t e = cudaLibraryLoadData(&c->aux, aux_ptx, NULL, NULL, 0, NULL, NULL, 0);
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&c->k_lens, c->aux, "attn_cudnn_lens");
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&c->k_fix, c->aux, "attn_cudnn_fix");
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&c->k_bwd_stats, c->aux, "attn_cudnn_bwd_stats");
    if (e == cudaSuccess) e = cudaLibraryGetKernel(&c->k_kv_fix, c->aux, "attn_cudnn_kv_fix");
    /* loaded (and JIT-compiled) into this context now, at plan creation: never lazily at a
     * first launch inside a CUDA graph capture */
    struct cudaFuncAttributes fa;
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)c->k_lens);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)c->k_fix);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)c->k_bwd_stats);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, (const void *)c->k_kv_fix);
    if (e != cudaSuccess) {
        put(why, whylen, "loading the helper kernels (PTX, JIT-compiled by the driver): %s", cudaGetErrorString(e));
        if (c->aux) cudaLibraryUnload(c->aux);
        c->aux = NULL;
        return -1;
    }
    return 0;
}

/* The lens kernel: per-sequence lengths and ragged offsets from p's cu_seqlens (aux_ptx). */
cudaError_t sdpa_launch_lens(const attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream) {
    const int64_t rs[4] = {p->q_row_stride, p->k_row_stride, p->v_row_stride, p->o_row_stride};
    return sdpa_launch_lens_offs(pl, p, pl->offs, rs, stream);
}

cudaError_t sdpa_launch_lens_offs(const attn_cudnn_plan *pl, const attn_fwd_params *p, int64_t *offs4,
                                  const int64_t rs[4], cudaStream_t stream) {
    const void *cu_q = p->cu_seqlens_q, *cu_k = p->cu_seqlens_k, *used = p->seqused_k;
    int32_t *seq_q = pl->lens, *seq_kv = pl->lens + pl->lens_kv;
    int64_t *off_q = NULL, *off_k = NULL, *off_v = NULL, *off_o = NULL;
    if (offs4 && p->cu_seqlens_q) off_q = offs4, off_o = offs4 + 3 * pl->offs_n;
    if (offs4 && p->cu_seqlens_k && !p->block_table) off_k = offs4 + pl->offs_n, off_v = offs4 + 2 * pl->offs_n;
    int64_t rs_q = rs[0], rs_k = rs[1], rs_v = rs[2], rs_o = rs[3];
    uint32_t nb = (uint32_t)p->batch, sq = (uint32_t)p->seqlen_q, sk = (uint32_t)p->seqlen_k;
    void *args[] = {&cu_q, &cu_k, &used, &seq_q, &seq_kv, &off_q, &off_k, &off_v, &off_o,
                    &rs_q, &rs_k, &rs_v, &rs_o, &nb, &sq, &sk};
    const dim3 block = {128, 1, 1}, grid = {(nb + 1 + 127) / 128, 1, 1};
    return cudaLaunchKernel((const void *)pl->c->k_lens, grid, block, args, 0, stream);
}

/* The fix kernel on the rows (O, or dQ) at o with these strides (elements), width elements
 * each: zeros, and -inf in lse, in the rows that see no key; the packed LSE from stats. */
static cudaError_t launch_fix(const attn_cudnn_plan *pl, const attn_fwd_params *p, const void *o, const int64_t st[3],
                              int64_t width, const void *lse, const void *stats, cudaStream_t stream) {
    const void *seq_q = pl->lens, *seq_kv = pl->seq_kv_used ? (const void *)p->seqused_k : pl->lens + pl->lens_kv;
    const void *cu_q = p->cu_seqlens_q;
    const int64_t e = pl->esize;
    int64_t ob = st[0] * e, oh = st[1] * e, orow = st[2] * e;
    int64_t left = left_of(p), right = right_of(p);
    uint32_t row_bytes = (uint32_t)(width * e), nb = (uint32_t)p->batch, nh = (uint32_t)p->heads;
    uint32_t sq = (uint32_t)p->seqlen_q, rows = nb * nh * sq; /* < 2^31: checked at create */
    void *args[] = {&seq_q, &seq_kv, &cu_q, &o, &ob, &oh, &orow, &lse, &stats, &left, &right,
                    &row_bytes, &nb, &nh, &sq, &rows};
    const dim3 block = {256, 1, 1}, grid = {(rows + 255) / 256, 1, 1};
    return cudaLaunchKernel((const void *)pl->c->k_fix, grid, block, args, 0, stream);
}

/* The fix kernel: zero O and -inf LSE in the rows that see no key; the packed LSE from the
 * plan's scratch (aux_ptx). */
cudaError_t sdpa_launch_fix(const attn_cudnn_plan *pl, const attn_fwd_params *p, cudaStream_t stream) {
    const int64_t st[3] = {p->o_batch_stride, p->o_head_stride, p->o_row_stride};
    const void *lse = pl->want_lse ? p->lse : NULL;
    const void *stats = pl->want_lse && pl->stats_role == ROLE_STATS ? pl->stats : NULL;
    return launch_fix(pl, p, p->o, st, head_dim_v_of(p), lse, stats, stream);
}

cudaError_t sdpa_launch_fix_dq(const attn_cudnn_plan *pl, const attn_bwd_params *bp, cudaStream_t stream) {
    const int64_t st[3] = {bp->dq_batch_stride, bp->dq_head_stride, bp->dq_row_stride};
    return launch_fix(pl, bp->fwd, bp->dq, st, bp->fwd->head_dim, NULL, NULL, stream);
}

/* The bwd-stats kernel: the LSE as cuDNN's Stats in the plan's [B][H][Sq] scratch (aux_ptx). */
cudaError_t sdpa_launch_bwd_stats(const attn_cudnn_plan *pl, const attn_bwd_params *bp, cudaStream_t stream) {
    const attn_fwd_params *p = bp->fwd;
    const void *seq_q = pl->lens, *cu_q = p->cu_seqlens_q, *lse = p->lse, *stats = pl->stats;
    uint32_t nb = (uint32_t)p->batch, nh = (uint32_t)p->heads, sq = (uint32_t)p->seqlen_q;
    uint32_t rows = nb * nh * sq; /* < 2^31: checked at create */
    void *args[] = {&seq_q, &cu_q, &lse, &stats, &nb, &nh, &sq, &rows};
    const dim3 block = {256, 1, 1}, grid = {(rows + 255) / 256, 1, 1};
    return cudaLaunchKernel((const void *)pl->c->k_bwd_stats, grid, block, args, 0, stream);
}

/* The kv-fix kernel: zeros in the dK, dV rows no query sees (aux_ptx). */
cudaError_t sdpa_launch_kv_fix(const attn_cudnn_plan *pl, const attn_bwd_params *bp, cudaStream_t stream) {
    const attn_fwd_params *p = bp->fwd;
    const void *seq_q = pl->lens, *seq_kv = pl->seq_kv_used ? (const void *)p->seqused_k : pl->lens + pl->lens_kv;
    const void *cu_k = p->cu_seqlens_k, *dk = bp->dk, *dv = bp->dv;
    const int64_t e = pl->esize;
    int64_t kb = bp->dk_batch_stride * e, kh = bp->dk_head_stride * e, kr = bp->dk_row_stride * e;
    int64_t vb = bp->dv_batch_stride * e, vh = bp->dv_head_stride * e, vr = bp->dv_row_stride * e;
    int64_t left = left_of(p), right = right_of(p);
    uint32_t k_bytes = (uint32_t)(p->head_dim * e), v_bytes = (uint32_t)(head_dim_v_of(p) * e);
    uint32_t nb = (uint32_t)p->batch, nh = (uint32_t)heads_k_of(p), sk = (uint32_t)p->seqlen_k;
    uint32_t rows = nb * nh * sk; /* < 2^31: checked at create */
    void *args[] = {&seq_q, &seq_kv, &cu_k, &dk, &dv, &kb, &kh, &kr, &vb, &vh, &vr, &left, &right,
                    &k_bytes, &v_bytes, &nb, &nh, &sk, &rows};
    const dim3 block = {256, 1, 1}, grid = {(rows + 255) / 256, 1, 1};
    return cudaLaunchKernel((const void *)pl->c->k_kv_fix, grid, block, args, 0, stream);
}
