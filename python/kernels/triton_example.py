"""A fused attention forward in Triton, run by the harness: the README's five-minute example.

One program computes BLOCK_M query rows of one (batch, head): it walks the keys BLOCK_N at a
time with an online softmax (running max m, running sum l, rescaled accumulator), so the scores
never leave registers. Strides come from the tensors, so BHSD storage, padded rows and K/V
broadcast over heads (stride 0) need no copy. Dense batches, fp16/bf16, head dims 64 and 128.
"""
import triton
import triton.language as tl

import attn_bridge as ab

LOG2E = 1.4426950408889634  # scores are kept in base 2: exp2 is one instruction
LN2 = tl.constexpr(0.6931471805599453)  # a global a @triton.jit function reads must be constexpr


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, scale_log2, seqlen_q, seqlen_k, heads, groups,
              sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som, slb, slh,
              CAUSAL: tl.constexpr, WRITE_LSE: tl.constexpr, D: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0) // heads  # batch x heads on the grid's x axis: y and z stop at 65,535
    h = tl.program_id(0) % heads
    start_m = tl.program_id(1)
    hk = h // groups  # grouped KV heads: query head h reads KV head h // (heads / heads_k)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + rows[:, None] * sqm + dims[None, :],
                mask=rows[:, None] < seqlen_q, other=0.0)
    k_base = K + b * skb + hk * skh
    v_base = V + b * svb + hk * svh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    diag = seqlen_k - seqlen_q  # bottom-right causal: key j is visible to query i iff j <= i + diag
    end = seqlen_k
    if CAUSAL:  # no key past this block's last row's diagonal is visible
        end = tl.minimum(seqlen_k, tl.maximum((start_m + 1) * BLOCK_M + diag, 0))
    for start_n in tl.range(0, end, BLOCK_N):
        keys = start_n + cols
        k = tl.load(k_base + keys[None, :] * skn + dims[:, None], mask=keys[None, :] < seqlen_k, other=0.0)
        s = tl.dot(q, k) * scale_log2
        ok = keys[None, :] < seqlen_k  # the tail block's columns past the last key
        if CAUSAL:
            ok = ok & (keys[None, :] <= rows[:, None] + diag)
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # no key seen yet: avoid -inf - -inf
        p = tl.math.exp2(s - m_use[:, None])
        alpha = tl.math.exp2(m_i - m_use)  # rescales what was summed under the old max
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + keys[:, None] * svn + dims[None, :], mask=keys[:, None] < seqlen_k, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    seen = l_i > 0  # a row that sees no key: zeros and an LSE of -inf
    o = acc / tl.where(seen, l_i, 1.0)[:, None]
    tl.store(O + b * sob + h * soh + rows[:, None] * som + dims[None, :], o.to(O.dtype.element_ty),
             mask=rows[:, None] < seqlen_q)
    if WRITE_LSE:  # natural log, as the ABI asks
        lse = tl.where(seen, (m_i + tl.math.log2(tl.where(seen, l_i, 1.0))) * LN2, float("-inf"))
        tl.store(LSE + b * slb + h * slh + rows, lse, mask=rows < seqlen_q)


def _bhs(t):
    """(batch, head, row) strides of a (batch, seq, head, dim) tensor, in elements."""
    return t.stride(0), t.stride(2), t.stride(1)


@ab.kernel(name="triton_example", caps={"gqa"}, dtypes=("fp16", "bf16"), head_dims=(64, 128))
def triton_example(p):
    block_m, block_n = 64, 64
    lse = p.lse if p.lse is not None else p.o  # not read when WRITE_LSE is off
    lse_strides = (p.lse.stride(0), p.lse.stride(1)) if p.lse is not None else (0, 0)
    grid = (p.batch * p.heads, triton.cdiv(p.seqlen_q, block_m))
    _attn_fwd[grid](p.q, p.k, p.v, p.o, lse, p.softmax_scale * LOG2E, p.seqlen_q, p.seqlen_k,
                    p.heads, p.heads // p.heads_k, *_bhs(p.q), *_bhs(p.k), *_bhs(p.v), *_bhs(p.o),
                    *lse_strides, CAUSAL=p.causal, WRITE_LSE=p.lse is not None, D=p.head_dim,
                    BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4, num_stages=2)
