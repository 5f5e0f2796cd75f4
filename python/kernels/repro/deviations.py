"""Minimal reproducers, outside the harness and in plain PyTorch, of deviations the harness found
in third-party kernels (python/kernels/README.md lists them all; the others are reproduced by
the harness's own "rerun ... alone" line): prints "REPRODUCED <name>: ..." or "not reproduced
<name>: ..." per case. Needs a GPU.

    python3 python/kernels/repro/deviations.py [name ...]
"""
import sys

import torch

dev = "cuda"


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


CASES = {f.__name__: f for f in (efficient_causal_more_queries,)}


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
