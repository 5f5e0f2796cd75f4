"""Minimal reproducers of the deviations the harness found in third-party kernels (the closing
table in python/kernels/README.md), each outside the harness, in plain PyTorch: prints
"REPRODUCED <name>: ..." or "not reproduced <name>: ..." per case. Needs a GPU.

    python3 python/kernels/repro/deviations.py [name ...]
"""
import sys

import torch

dev = "cuda"


def flash_window_past_keys():
    """PyTorch's FlashAttention-2: a window edge >= seqlen_k is read as unbounded, so with more
    queries than keys rows that see no key (bottom-right window 0:16, 239 queries, 1 key: rows
    0..221) get the key's value instead of zeros."""
    q = torch.randn(1, 239, 1, 64, device=dev, dtype=torch.float16)
    k = torch.randn(1, 1, 1, 64, device=dev, dtype=torch.float16)
    v = torch.randn(1, 1, 1, 64, device=dev, dtype=torch.float16)
    out = torch.ops.aten._flash_attention_forward(q, k, v, None, None, 239, 1, 0.0, False, False,
                                                  window_size_left=0, window_size_right=16)[0]
    bad = out[0, :222].abs().amax().item()
    return bad > 0, f"max |O| over rows 0..221 (which see no key) = {bad:.3f}, expected 0"


def efficient_causal_more_queries():
    """PyTorch's memory-efficient kernel, bottom-right causal (custom_mask_type 2), 239 queries
    against 17 keys: rows 222.. (which see keys) against a float64 reference."""
    torch.manual_seed(0)
    q = torch.randn(2, 239, 3, 64, device=dev, dtype=torch.float16)
    k = torch.randn(2, 17, 3, 64, device=dev, dtype=torch.float16)
    v = torch.randn(2, 17, 3, 64, device=dev, dtype=torch.float16)
    out = torch.ops.aten._efficient_attention_forward(q, k, v, None, None, None, None, None, 0.0, 2, False,
                                                      scale=0.125)[0]
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    s = qd @ kd.transpose(-1, -2) * 0.125
    i = torch.arange(239, device=dev)[:, None]
    j = torch.arange(17, device=dev)[None, :]
    s = s.masked_fill(j > i + 17 - 239, float("-inf"))
    ref = (torch.softmax(s[:, :, 222:], -1) @ vd).transpose(1, 2)
    err = (out[:, 222:].double() - ref).abs().amax().item()
    return err > 1e-2, f"max |O - O_ref| over rows 222..238 = {err:.4f}"


def flex_padded_rows_after_compile():
    """torch.compile(flex_attention, dynamic=True): called on contiguous (B, H, S, D) views of
    BSHD tensors, then on the same shapes with padded rows (a row stride of 200 for d 64), the
    compiled code asserts on the strides instead of recompiling."""
    from torch.nn.attention.flex_attention import flex_attention
    flex = torch.compile(flex_attention, dynamic=True)

    def run(row):
        x = [torch.randn(2, 4, 3, row, device=dev, dtype=torch.float16)[..., :64] for _ in range(3)]
        return flex(*(t.transpose(1, 2) for t in x))
    run(64)
    try:
        run(200)
    except AssertionError as e:
        return True, f"second call raised AssertionError: {str(e)[:120]}"
    return False, "second call ran"


CASES = {f.__name__: f for f in (flash_window_past_keys, efficient_causal_more_queries,
                                 flex_padded_rows_after_compile)}


def main(names):
    for name in names or CASES:
        try:
            hit, what = CASES[name]()
        except Exception as e:  # a reproducer that cannot run says why
            hit, what = False, f"could not run: {type(e).__name__}: {e}"
        print(f"{'REPRODUCED' if hit else 'not reproduced'} {name}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
