"""PyTorch FlexAttention as a harness kernel: flex_attention compiled by torch.compile, which
generates its Triton kernels (a fused forward; a split-KV decoding kernel for short queries).

The ABI's features map onto Flex's two hooks: the softcap is a score_mod (Flex applies the scale
before score_mod and the mask after it, the ABI's order); causal (bottom-right) and windows are a
mask_mod turned into a BlockMask. A packed batch (cu_seqlens, seqused_k) runs as one sequence of
all its rows, Q as (1, H, total_q, D), with a document mask built from cu_seqlens on the device.
Paged K/V is not declared: Flex reads dense K/V only.
"""
import torch
import torch.fx.experimental._config as fx_config
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

import attn_bridge as ab

try:
    from . import _common as cm
except ImportError:  # imported as a top-level module from python/kernels/
    import _common as cm

# One process runs hundreds of shapes: compile with dynamic shapes, so that a new length reuses
# the compiled kernel, and never fall back to eager Flex (an unfused kernel that materializes the
# scores) when dynamo's recompile limits are hit: raise instead, so that it shows.
torch._dynamo.config.recompile_limit = 1 << 12
torch._dynamo.config.accumulated_recompile_limit = 1 << 16
torch._dynamo.config.fail_on_recompile_limit_hit = True
fx_config.use_duck_shape = False  # seqlen_q == seqlen_k is no special case
_flex = torch.compile(flex_attention, dynamic=True)


# The hooks' numbers (softcap, window edges, the diagonal) are device scalars, not Python
# numbers: under dynamic shapes a Python number becomes a symbol that the compiled hook reads
# back with .item() (aten._local_scalar_dense), which Flex's template cannot take; a tensor the
# hook closes over is an input of the compiled kernel instead (and a new value no recompile).
def _scalar(x, dtype, device):
    return torch.full((), x, dtype=dtype, device=device)  # a fill, no host copy


def _softcap_mod(cap, device):
    cap = _scalar(cap, torch.float32, device)

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return softcap


def _window_mod(left, right, diag):
    """The ABI's mask for a dense batch: d = kv_idx - (q_idx + diag), -left <= d <= right
    (-1: that side unbounded; which sides are bounded is the hook's shape, the edges are data)."""
    has_left, has_right = left >= 0, right >= 0
    left, right = (_scalar(x, torch.int32, diag.device) for x in (left, right))

    def window(b, h, q_idx, kv_idx):
        d = kv_idx - (q_idx + diag)
        if has_left and has_right:
            return (d >= -left) & (d <= right)
        if has_left:
            return d >= -left
        return d <= right
    return window


def _dense_block_mask(left, right, sq, sk, device):
    diag = _scalar(sk - sq, torch.int32, device)
    return create_block_mask(_window_mod(left, right, diag), None, None, sq, sk, device=device)


_dense_masks = cm.DenseMaskCache(_dense_block_mask)


class PackedRows:
    """A packed batch's bookkeeping on the device (sequence b's queries are rows cu_q[b] ..
    cu_q[b+1]-1 of the packed Q, its keys rows cu_k[b] .. of the packed K), for kernels that
    see the batch as one long sequence with a document mask."""

    def __init__(self, p, cu_q, cu_k, total_q, total_k):
        self.cu_q, self.cu_k = cu_q, cu_k
        self.q_doc, self.k_doc = cm.doc_ids(cu_q, total_q), cm.doc_ids(cu_k, total_k)
        q_len = cu_q[1:] - cu_q[:-1]
        self.used = p.seqused_k if p.seqused_k is not None else cu_k[1:] - cu_k[:-1]
        self.diag = self.used - q_len  # the bottom-right diagonal of each sequence
        self.left, self.right = cm.window_of(p)


def _document_mod(rows):
    """The packed batch's mask: same sequence, key within the used ones, inside the window
    around that sequence's own bottom-right diagonal."""
    q_doc, k_doc, cu_q, cu_k = rows.q_doc, rows.k_doc, rows.cu_q, rows.cu_k
    used, diag = rows.used, rows.diag
    has_left, has_right = rows.left >= 0, rows.right >= 0
    left, right = (_scalar(x, torch.int32, cu_q.device) for x in (rows.left, rows.right))

    def document(b, h, q_idx, kv_idx):
        dq, dk = q_doc[q_idx], k_doc[kv_idx]
        j = kv_idx - cu_k[dk]
        d = j - (q_idx - cu_q[dq] + diag[dq])
        vis = (dq == dk) & (j < used[dk])
        if has_left:
            vis = vis & (d >= -left)
        if has_right:
            vis = vis & (d <= right)
        return vis
    return document


def _run(p, q, k, v, block_mask):
    """flex_attention on (B, H, S, D) views: (O as (B, H, S, Dv), natural-log LSE or None)."""
    score_mod = _softcap_mod(p.softcap, q.device) if p.softcap > 0 else None
    aux = AuxRequest(lse=True) if p.lse is not None else None
    res = _flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=p.softmax_scale,
                enable_gqa=p.heads_k != p.heads, return_aux=aux)
    if aux is None:
        return res, None
    out, aux_out = res
    return out, aux_out.lse  # Flex computes in base 2 and returns lse * ln(2)


@ab.kernel(name="flex", caps={"gqa", "window", "softcap", "head_dim_v", "varlen", "seqused_k"},
           head_dim_pairs=((64, 64), (96, 96), (128, 128), (256, 256), (192, 128)))
@torch.no_grad()  # else Flex also writes an LSE nobody asked for, for a backward
def flex(p):
    if not (p.q_packed or p.k_packed or p.seqused_k is not None):
        block_mask = None
        if cm.is_masked(p):
            key = cm.window_of(p) + (p.seqlen_q, p.seqlen_k, p.q.device)
            block_mask = _dense_masks.get(key, p.seqlen_q * p.seqlen_k)
        out, lse = _run(p, p.q.transpose(1, 2), p.k.transpose(1, 2), p.v.transpose(1, 2), block_mask)
        p.o.copy_(out.transpose(1, 2))
        if lse is not None:
            p.lse.copy_(lse)
        return

    q, cu_q = cm.as_packed(p.q, p.cu_seqlens_q, p.batch, p.seqlen_q)
    k, cu_k = cm.as_packed(p.k, p.cu_seqlens_k, p.batch, p.seqlen_k)
    v, _ = cm.as_packed(p.v, p.cu_seqlens_k, p.batch, p.seqlen_k)
    rows = PackedRows(p, cu_q, cu_k, q.shape[0], k.shape[0])
    # create_block_mask evaluates the mask on the device (vmap, sums, argsort): no host sync
    block_mask = create_block_mask(_document_mod(rows), None, None, q.shape[0], k.shape[0],
                                   device=q.device)
    out, lse = _run(p, q.unsqueeze(0).transpose(1, 2), k.unsqueeze(0).transpose(1, 2),
                    v.unsqueeze(0).transpose(1, 2), block_mask)
    # A row that sees no key is Flex's own business (it defines O = 0 and LSE = -inf there).
    out = out[0].transpose(0, 1)  # (total_q, H, Dv)
    lse = None if lse is None else lse[0]  # (H, total_q)
    if not p.q_packed:  # back to the dense layouts of Q, O and the LSE
        out = out.view(p.batch, p.seqlen_q, p.heads, out.shape[-1])
        lse = None if lse is None else lse.view(p.heads, p.batch, p.seqlen_q).transpose(0, 1)
    p.o.copy_(out)
    if lse is not None:
        p.lse.copy_(lse)
