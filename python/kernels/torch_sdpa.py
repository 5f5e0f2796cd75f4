"""PyTorch's scaled_dot_product_attention backends as four harness kernels.

Each calls the aten op its SDPA backend dispatches to, so that exactly that backend runs (or
raises) and its log-sum-exp comes back: F.scaled_dot_product_attention returns no LSE, and its
is_causal is top-left aligned where the ABI's causal is bottom-right. The math backend, whose op
returns no LSE, runs through F.scaled_dot_product_attention under sdpa_kernel(MATH); its LSE is
computed beside it in float32. Each declares only what its op takes (python/kernels/README.md).
sdpa_math has a backward (float32 math, a yardstick for the backward checks).
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attn_bridge as ab

try:
    from . import _common as cm
except ImportError:  # imported as a top-level module from python/kernels/
    import _common as cm

_aten = torch.ops.aten
_INF = float("inf")
_MATH_MAX_SCORE_BYTES = 2 << 30


def _window_masked(p):
    """A window beyond plain causal: needs an explicit mask in backends without window args."""
    return p.window_left >= 0 or (not p.causal and p.window_right >= 0)


def _bias(left, right, sq, sk, device, dtype):
    return cm.additive_bias(cm.visible(left, right, sq, sk, device), dtype)


_bias_cache = cm.DenseMaskCache(_bias)
_mask_cache = cm.DenseMaskCache(cm.visible)


def _require_aligned(p, backend):
    """The fused backends read Q, K and V 16 bytes at a time and check only that the last
    dimension is contiguous: a base or a stride that is not 16-byte aligned (a slice, which the
    ABI allows: the harness's check unaligned) is declined."""
    for name, t in (("q", p.q), ("k", p.k), ("v", p.v)):
        if t.data_ptr() % 16 or any(s % 8 for s in t.stride()[:-1]):
            raise ab.Unsupported(f"{backend}: {name} is not 16-byte aligned (base or strides {t.stride()})")


def _dense_bias(p):
    key = cm.window_of(p) + (p.seqlen_q, p.seqlen_k, p.q.device, p.torch_dtype)
    bias = _bias_cache.get(key, p.seqlen_q * p.seqlen_k)
    return bias.expand(p.batch, p.heads, p.seqlen_q, p.seqlen_k)


# FlashAttention-2 (PyTorch's vendored copy). _flash_attention_forward is the op behind SDPA's
# flash backend and torch.nn.attention.varlen; it takes FlashAttention's (B, S, H, D) layout,
# KV heads that divide the query heads, window sizes (bottom-right, as the ABI's), packed
# batches (cu_seqlens for both Q and K) and seqused_k (packed path only). Its causal is
# bottom-right. No softcap (the op passes 0), no block table, V's head dim must equal Q's.
@ab.kernel(name="sdpa_flash", caps={"gqa", "window", "varlen", "seqused_k"},
           head_dims=(64, 96, 128, 256))
@torch.no_grad()
def sdpa_flash(p):
    _require_aligned(p, "sdpa_flash")
    kw = dict(scale=p.softmax_scale, window_size_left=p.window_left, window_size_right=p.window_right)
    if not (p.q_packed or p.k_packed or p.seqused_k is not None):
        out, lse = _aten._flash_attention_forward(
            p.q, p.k, p.v, None, None, p.seqlen_q, p.seqlen_k, 0.0, p.causal, False, **kw)[:2]
    else:  # the packed path; a dense side is viewed as packed rows of equal lengths
        q, cu_q = cm.as_packed(p.q, p.cu_seqlens_q, p.batch, p.seqlen_q)
        k, cu_k = cm.as_packed(p.k, p.cu_seqlens_k, p.batch, p.seqlen_k)
        v, _ = cm.as_packed(p.v, p.cu_seqlens_k, p.batch, p.seqlen_k)
        out, lse = _aten._flash_attention_forward(
            q, k, v, cu_q, cu_k, p.seqlen_q, p.seqlen_k, 0.0, p.causal, False,
            seqused_k=p.seqused_k, **kw)[:2]
        if not p.q_packed:  # out (B*Sq, H, Dv), lse (H, B*Sq) back to the dense layouts
            out = out.view(p.batch, p.seqlen_q, p.heads, out.shape[-1])
            lse = lse.view(p.heads, p.batch, p.seqlen_q).transpose(0, 1)
    p.o.copy_(out)
    if p.lse is not None:  # FlashAttention-2 writes +inf for a row that sees no key
        p.lse.copy_(lse.masked_fill(lse == _INF, -_INF))


# The memory-efficient (xFormers CUTLASS) kernel. _efficient_attention_forward takes the
# (B, S, H, D) layout, V's own head dim, a bottom-right causal mask (custom_mask_type 2) and an
# additive bias, through which windows go. Dense batches only here; the same number of KV heads
# as query heads (SDPA's front end would copy K/V for GQA).
@ab.kernel(name="sdpa_efficient", caps={"window", "head_dim_v"},
           head_dim_pairs=((64, 64), (96, 96), (128, 128), (256, 256), (192, 128)))
@torch.no_grad()
def sdpa_efficient(p):
    _require_aligned(p, "sdpa_efficient")
    bias, mask_type = None, 0
    if _window_masked(p):
        bias = _dense_bias(p)
    elif p.causal:
        mask_type = 2  # CausalFromBottomRight
    out, lse = _aten._efficient_attention_forward(
        p.q, p.k, p.v, bias, None, None, None, None, 0.0, mask_type, p.lse is not None,
        scale=p.softmax_scale)[:2]
    p.o.copy_(out)
    if p.lse is not None:  # rows padded to a multiple of 32
        p.lse.copy_(lse[:, :, :p.seqlen_q])
    cm.zero_empty_rows_dense(p, p.o, p.lse)


def _bhsd(p):
    return p.q.transpose(1, 2), p.k.transpose(1, 2), p.v.transpose(1, 2)


# cuDNN's fused attention (the op behind SDPA's cuDNN backend): (B, H, S, D) views, an additive
# bias for windows and for causal with seqlen_q != seqlen_k (its is_causal is top-left).
# Same KV heads as query heads, head_dim_v = head_dim, dense batches.
@ab.kernel(name="sdpa_cudnn", caps={"window"}, head_dims=(64, 96, 128))
@torch.no_grad()
def sdpa_cudnn(p):
    _require_aligned(p, "sdpa_cudnn")
    if 0 in p.k.stride()[:-1] or 0 in p.v.stride()[:-1]:  # cuDNN's tensors need positive strides
        raise ab.Unsupported("sdpa_cudnn: K or V broadcast (a zero stride)")
    q, k, v = _bhsd(p)
    bias, causal = None, False
    if _window_masked(p) or (p.causal and p.seqlen_q != p.seqlen_k):
        bias = _dense_bias(p)
    elif p.causal:
        causal = True
    out, lse = _aten._scaled_dot_product_cudnn_attention(
        q, k, v, bias, p.lse is not None, 0.0, causal, False, scale=p.softmax_scale)[:2]
    p.o.copy_(out.transpose(1, 2))
    if p.lse is not None:  # (B, H, Sq, 1)
        p.lse.copy_(lse.reshape(p.batch, p.heads, p.seqlen_q))
    cm.zero_empty_rows_dense(p, p.o, p.lse)


def _lse_fp32(p, q, k, mask):
    """The natural-log LSE of the scaled, masked scores in float32 (SDPA's math op returns
    none). Query heads are grouped over their KV head, so K is never copied per head."""
    b, h, sq, d = q.shape
    groups = p.heads // p.heads_k
    qf = q.float().reshape(b, p.heads_k, groups * sq, d)
    s = torch.matmul(qf, k.float().transpose(-1, -2)).mul_(p.softmax_scale).view(b, h, sq, -1)
    if mask is not None:
        s.masked_fill_(~mask, -_INF)
    return torch.logsumexp(s, dim=-1)  # -inf for a row with no visible key


def _check_math_size(p):
    """The math backend materializes the scores (float32, B x H x Sq x Sk) and their softmax
    (its backward here, three such): beyond a few GiB it is not meant to run, and says so
    rather than running out of memory."""
    scores = p.batch * p.heads * p.seqlen_q * p.seqlen_k * 4
    if scores > _MATH_MAX_SCORE_BYTES:
        raise ab.Unsupported(f"the math backend would materialize {scores / 2**30:.1f} GiB of scores "
                             f"(batch {p.batch} x heads {p.heads} x {p.seqlen_q} x {p.seqlen_k} float32; "
                             f"this adapter's limit {_MATH_MAX_SCORE_BYTES / 2**30:.0f} GiB)")


def _math_mask(p):
    """(seqlen_q, seqlen_k) bool, True where visible; None when nothing is masked."""
    if not cm.is_masked(p):
        return None
    key = cm.window_of(p) + (p.seqlen_q, p.seqlen_k, p.q.device)
    return _mask_cache.get(key, p.seqlen_q * p.seqlen_k)


# The math backend: F.scaled_dot_product_attention with only MATH allowed (it upcasts fp16/bf16
# to float32 unless allow_fp16_bf16_reduction_math_sdp is set). Masks as a boolean attn_mask;
# GQA through enable_gqa; any head dims.
@ab.kernel(name="sdpa_math", caps={"gqa", "window", "head_dim_v"})
@torch.no_grad()
def sdpa_math(p):
    _check_math_size(p)
    q, k, v = _bhsd(p)
    mask = _math_mask(p)
    with sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=p.softmax_scale,
                                             enable_gqa=p.heads_k != p.heads)
    p.o.copy_(out.transpose(1, 2))
    if p.lse is not None:
        p.lse.copy_(_lse_fp32(p, q, k, mask))
    cm.zero_empty_rows_dense(p, p.o, p.lse)


# Its backward, a yardstick and not fast: the textbook gradients in float32 from q, k, v and
# dO, P recomputed (the given O and LSE are not read). Query heads are grouped over their KV
# head, (B, H, S, D) viewed as (B, HK, G * S, D), so that one matmul gives dK and dV summed over
# the G heads that share a KV head (repeat_interleave and a sum, without the copies). Caps: the
# forward's. Not declared deterministic: cuBLAS promises bit-identical results only per stream
# and workspace configuration, which the harness's repeats do not fix.
@sdpa_math.backward()
@torch.no_grad()
def sdpa_math_bwd(p):
    _check_math_size(p)
    b, hk, sq, sk = p.batch, p.heads_k, p.seqlen_q, p.seqlen_k
    g = p.heads // hk

    def grouped(t):  # (B, Sq, H, D) -> float32 (B, HK, G * Sq, D)
        return t.transpose(1, 2).float().reshape(b, hk, g * sq, t.shape[-1])
    q, do = grouped(p.q), grouped(p.dout)
    k, v = p.k.transpose(1, 2).float(), p.v.transpose(1, 2).float()  # (B, HK, Sk, D)
    s = torch.matmul(q, k.transpose(-1, -2)).mul_(p.softmax_scale)  # (B, HK, G * Sq, Sk)
    mask = _math_mask(p)
    if mask is not None:
        s.view(b, hk, g, sq, sk).masked_fill_(~mask, -_INF)
    prob = torch.softmax(s, dim=-1)
    if mask is not None:  # a row that sees no key: NaN from the softmax, 0 here
        prob.view(b, hk, g, sq, sk).masked_fill_(~mask, 0.0)
    dp = torch.matmul(do, v.transpose(-1, -2))
    ds = prob * (dp - (prob * dp).sum(dim=-1, keepdim=True))  # dS = P (dP - rowsum(P dP))
    dq = torch.matmul(ds, k).mul_(p.softmax_scale).view(b, p.heads, sq, p.head_dim)
    dk = torch.matmul(ds.transpose(-1, -2), q).mul_(p.softmax_scale)  # (B, HK, Sk, D)
    dv = torch.matmul(prob.transpose(-1, -2), do)  # (B, HK, Sk, Dv)
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)
