"""FlagGems' FlashAttention-2 port to Triton (PyPI: flag-gems, python/kernels/README.md) as a
harness kernel: the flash_attention_forward that FlagGems substitutes for aten's, and the
vLLM-style flash_attn_varlen_func for packed and paged batches.

FlagGems keeps FlashAttention-2's interface (bottom-right causal and windows, KV heads dividing
the query heads, softcap, +inf as the LSE of a row that sees no key) but not all of its
behaviour: on the H100 the harness found it wrong with padded K/V rows, causal with fewer
queries than keys, long sequences and tensors over 2^31 elements (python/kernels/README.md). It
takes no V head dim of its own. Its paged path wants seqused_k (filled here with seqlen_k when the
problem has none) and reads seqused_k only with a block table: a packed or dense K with
seqused_k is not supported.
"""
import importlib.util
import os

import torch

import attn_bridge as ab

try:
    from . import _common as cm
except ImportError:  # imported as a top-level module from python/kernels/
    import _common as cm

# flag_gems is imported on the first call (its import needs a GPU); where it is not installed
# at all, the configure step is told so now, and skips this kernel's tests with the reason.
if importlib.util.find_spec("flag_gems") is None:
    raise ModuleNotFoundError("No module named 'flag_gems' (python/kernels/README.md: its wheels)",
                              name="flag_gems")

_gems = None


def _attention():
    """flag_gems.ops.attention, imported on the first call rather than with the declaration:
    importing flag_gems queries the GPU, which the configure step may not have."""
    global _gems
    if _gems is None:
        os.environ.setdefault("GEMS_VENDOR", "nvidia")  # else it runs every vendor's smi tool
        from flag_gems.ops import attention, flash_kernel
        _pin_one_config(flash_kernel.flash_fwd_kernel)
        _gems = attention
    return _gems


def _pin_one_config(kernel):
    """flash_fwd_kernel autotunes over a dozen configurations on its first launch for each head
    dim, benchmarking with host syncs inside fwd; keep one of its own configurations (Triton's
    autotuner runs a single configuration without benchmarking)."""
    tuner = getattr(kernel, "fn", None)  # flag_gems' LibEntry wraps triton's Autotuner
    configs = list(getattr(tuner, "configs", None) or ())
    if not configs:
        raise RuntimeError("flag_gems.ops.flash_kernel.flash_fwd_kernel: no autotuner configs found "
                           f"(got {type(tuner).__name__}); this adapter was written for flag-gems 5.0.2")
    pick = [c for c in configs if c.kwargs.get("BLOCK_M") == 128 and c.kwargs.get("BLOCK_N") == 32
            and c.num_warps == 4 and c.num_stages == 2]
    tuner.configs = (pick or configs)[:1]


def _paged_pool(x, page_size):
    """The kernel addresses a page as page * page_size rows of the pool: pages must be densely
    packed rows (a padded pool is copied)."""
    if x.stride(0) == page_size * x.stride(1):
        return x
    return x.contiguous()


def _lse(lse):
    return lse.masked_fill(lse == float("inf"), float("-inf"))  # FlashAttention-2's convention


@ab.kernel(name="gems_flash", caps={"gqa", "window", "softcap", "varlen", "paged", "seqused_k"},
           head_dims=(64, 96, 128, 256))
@torch.no_grad()
def gems_flash(p):
    gems = _attention()
    if not (p.q_packed or p.k_packed or p.paged or p.seqused_k is not None):
        out, lse = gems.flash_attention_forward(
            p.q, p.k, p.v, None, None, p.seqlen_q, p.seqlen_k, 0.0, p.causal, False,
            scale=p.softmax_scale, softcap=p.softcap, window_size_left=p.window_left,
            window_size_right=p.window_right)[:2]
        p.o.copy_(out)
        if p.lse is not None:
            p.lse.copy_(_lse(lse).view(p.batch, p.heads, p.seqlen_q))
        return
    if p.seqused_k is not None and not p.paged:
        raise ab.Unsupported("flag_gems reads seqused_k only with a block table (paged K/V)")

    q, cu_q = cm.as_packed(p.q, p.cu_seqlens_q, p.batch, p.seqlen_q)
    k, v, cu_k, used, table = p.k, p.v, p.cu_seqlens_k, p.seqused_k, None
    if p.paged:
        k, v, table = _paged_pool(p.k, p.page_size), _paged_pool(p.v, p.page_size), p.block_table
        if used is None:  # every sequence holds seqlen_k keys
            used = torch.full((p.batch,), p.seqlen_k, dtype=torch.int32, device=q.device)
    else:
        k, cu_k = cm.as_packed(p.k, p.cu_seqlens_k, p.batch, p.seqlen_k)
        v, _ = cm.as_packed(p.v, p.cu_seqlens_k, p.batch, p.seqlen_k)
    if k.stride() != v.stride():  # it reads V with K's strides
        k, v = k.contiguous(), v.contiguous()
    out, lse = gems.flash_attn_varlen_func(
        q, k, v, p.seqlen_q, cu_q, p.seqlen_k, cu_seqlens_k=cu_k, seqused_k=used,
        softmax_scale=p.softmax_scale, causal=p.causal, window_size=(p.window_left, p.window_right),
        softcap=p.softcap, block_table=table, return_softmax_lse=True)
    if not p.q_packed:  # out (B*Sq, H, D), lse (H, B*Sq) back to the dense layouts
        out = out.view(p.batch, p.seqlen_q, p.heads, out.shape[-1])
        lse = lse.view(p.heads, p.batch, p.seqlen_q).transpose(0, 1)
    p.o.copy_(out)
    if p.lse is not None:
        p.lse.copy_(_lse(lse))
