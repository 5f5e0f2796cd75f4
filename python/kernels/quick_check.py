"""Smoke test of the kernels in this folder outside the harness: each runs a few problems (dense,
causal bottom-right, windows, GQA, softcap, packed, paged, seqused_k, rows that see no key) that
its declaration takes, checked against a float64 reference of abi/attn_abi.h. The harness's
suites are the real test; this catches an adapter's API mistakes in seconds.

    python3 python/kernels/quick_check.py [kernel ...]      (default: every kernel)
Exit status 1 if any case fails. Without a GPU it runs on the CPU what can run there.
"""
import math
import os
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import torch  # noqa: E402

import attn_bridge as ab  # noqa: E402

KERNELS = {"sdpa_flash": "torch_sdpa", "sdpa_efficient": "torch_sdpa", "sdpa_cudnn": "torch_sdpa",
           "sdpa_math": "torch_sdpa", "flex": "flex", "gems_flash": "gems_flash",
           "triton_example": "triton_example"}
# (name, problem arguments): dense shapes, then packed (seqs) and paged (page) batches
CASES = [("full", {}), ("causal q<k", dict(sq=40, sk=300, causal=True)),
         ("causal q>k (empty rows)", dict(sq=239, sk=17, causal=True)),
         ("window 16:0", dict(sq=130, sk=200, wl=16, wr=0)), ("window 3:5 q>k", dict(sq=60, sk=30, wl=3, wr=5)),
         ("gqa 4:1 causal", dict(hk=1, causal=True)), ("softcap 30", dict(softcap=30.0, causal=True)),
         ("head_dim_v 192x128", dict(d=192, dv=128, causal=True)), ("decode 1x500 gqa", dict(sq=1, sk=500, hk=2)),
         ("packed", dict(seqs=[(1, 239), (0, 17), (128, 128), (17, 0), (30, 30)], causal=True)),
         ("packed seqused", dict(seqs=[(3, 40), (4, 20)], used=[25, 0], causal=True)),
         ("paged 16", dict(seqs=[(1, 100), (1, 1), (1, 0), (1, 77)], page=16, hk=2)),
         ("paged 64 seqused", dict(seqs=[(5, 300), (7, 64)], page=64, used=[290, 3], causal=True))]


def problem(dev, dtype, d=64, dv=None, b=2, h=4, hk=None, sq=33, sk=65, causal=False, wl=-1, wr=-1,
            softcap=0.0, seqs=None, page=0, used=None, seed=0):
    """A Problem as the bridge gives it (python/attn_bridge/runtime.py), over fresh tensors."""
    g = torch.Generator().manual_seed(seed)
    hk, dv = hk or h, dv or d
    p = types.SimpleNamespace(dtype="bf16" if dtype == torch.bfloat16 else "fp16", torch_dtype=dtype,
                              heads=h, heads_k=hk, head_dim=d, head_dim_v=dv, causal=causal,
                              window_left=wl, window_right=wr, softcap=softcap, softmax_scale=1 / math.sqrt(d),
                              device=0, page_size=page, num_pages=0, block_table_stride=0, total_q=0, total_k=0,
                              cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None, block_table=None)
    rnd = lambda *s: torch.randn(*s, generator=g).to(dtype).to(dev)  # noqa: E731
    i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=dev)  # noqa: E731
    nan = lambda *s, t=dtype: torch.full(s, float("nan"), dtype=t, device=dev)  # noqa: E731
    if seqs is None:
        p.batch, p.seqlen_q, p.seqlen_k = b, sq, sk
        p.q, p.k, p.v, p.o = rnd(b, sq, h, d), rnd(b, sk, hk, d), rnd(b, sk, hk, dv), nan(b, sq, h, dv)
        p.lse = nan(b, h, sq, t=torch.float32)
    else:
        ql, kl = [s[0] for s in seqs], [s[1] for s in seqs]
        p.batch, p.seqlen_q, p.seqlen_k = len(seqs), max(ql), max(kl)
        cq = [0] + [sum(ql[:i + 1]) for i in range(len(ql))]
        p.cu_seqlens_q, p.total_q = i32(cq), cq[-1]
        p.q, p.o, p.lse = rnd(cq[-1], h, d), nan(cq[-1], h, dv), nan(h, cq[-1], t=torch.float32)
        if page:  # a shuffled pool; table entries past a sequence's pages hold -1 and huge ids
            need = [(n + page - 1) // page for n in kl]
            p.block_table_stride = max(need) + 2
            p.num_pages = sum(need) + 3
            ids, table = iter(torch.randperm(p.num_pages, generator=g).tolist()), []
            for n in need:
                table.append([next(ids) for _ in range(n)] + [-1] + [10 ** 6] * (p.block_table_stride - n - 1))
            p.block_table = i32(table)
            p.k, p.v = rnd(p.num_pages, page, hk, d), rnd(p.num_pages, page, hk, dv)
        else:
            ck = [0] + [sum(kl[:i + 1]) for i in range(len(kl))]
            p.cu_seqlens_k, p.total_k = i32(ck), ck[-1]
            p.k, p.v = rnd(ck[-1], hk, d), rnd(ck[-1], hk, dv)
        p.kl = kl
    if used is not None:
        p.seqused_k = i32(used)
    p.q_packed, p.k_packed, p.paged = p.cu_seqlens_q is not None, p.cu_seqlens_k is not None, page > 0
    return p


def sequence(p, b):
    """Sequence b's q (Lq, H, D), used k and v (Lk, HK, D) and its rows of O and the LSE."""
    if p.q_packed:
        lo, hi = p.cu_seqlens_q[b].item(), p.cu_seqlens_q[b + 1].item()
        q, o, lse = p.q[lo:hi], p.o[lo:hi], p.lse[:, lo:hi]
    else:
        q, o, lse = p.q[b], p.o[b], p.lse[b]
    if p.paged:
        rows = [(p.block_table[b, j // p.page_size].item(), j % p.page_size) for j in range(p.kl[b])]
        k, v = (torch.stack([x[pg, r] for pg, r in rows]) if rows else x[:0, 0] for x in (p.k, p.v))
    elif p.k_packed:
        lo, hi = p.cu_seqlens_k[b].item(), p.cu_seqlens_k[b + 1].item()
        k, v = p.k[lo:hi], p.v[lo:hi]
    else:
        k, v = p.k[b], p.v[b]
    used = p.seqused_k[b].item() if p.seqused_k is not None else k.shape[0]
    return q, k[:used], v[:used], o, lse


def max_error(p):
    """Largest |kernel - reference| over O and the finite LSE; inf if an LSE's -inf is wrong."""
    left, right, groups, worst = p.window_left, 0 if p.causal else p.window_right, p.heads // p.heads_k, 0.0
    for b in range(p.batch):
        q, k, v, o, lse = sequence(p, b)
        lq, lk = q.shape[0], k.shape[0]
        s = torch.einsum("ihd,jhd->hij", q.double(), k.double().repeat_interleave(groups, 1)) * p.softmax_scale
        if p.softcap > 0:
            s = p.softcap * torch.tanh(s / p.softcap)
        d = torch.arange(lk, device=s.device)[None, :] - (torch.arange(lq, device=s.device)[:, None] + lk - lq)
        vis = (d >= -left if left >= 0 else d == d) & (d <= right if right >= 0 else d == d)
        s = s.masked_fill(~vis, float("-inf"))
        ref_lse = torch.logsumexp(s, -1) if lk else torch.full((p.heads, lq), float("-inf"), device=s.device)
        w = torch.exp(s - ref_lse[..., None]).nan_to_num(0.0)
        ref_o = torch.einsum("hij,jhd->ihd", w, v.double().repeat_interleave(groups, 1))
        worst = max(worst, (o.double() - ref_o).abs().nan_to_num(math.inf).max().item() if o.numel() else 0.0)
        if not torch.equal(torch.isneginf(ref_lse), torch.isneginf(lse)):
            return math.inf
        fin = torch.isfinite(ref_lse)
        if fin.any():
            worst = max(worst, (lse.double()[fin] - ref_lse[fin]).abs().nan_to_num(math.inf).max().item())
    return worst


def takes(decl, args):
    need = {"gqa": args.get("hk", 4) < 4, "window": args.get("wl", -1) >= 0 or args.get("wr", -1) >= 0,
            "softcap": args.get("softcap", 0) > 0, "head_dim_v": args.get("dv", args.get("d", 64)) != args.get("d", 64),
            "varlen": "seqs" in args and not args.get("page"), "paged": bool(args.get("page")),
            "seqused_k": "used" in args}
    if any(v and c not in decl.caps for c, v in need.items()):
        return False
    pair = (args.get("d", 64), args.get("dv", args.get("d", 64)))
    if decl.head_dim_pairs is not None:
        return pair in decl.head_dim_pairs
    return decl.head_dims is None or set(pair) <= set(decl.head_dims)


def main(names):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    failed = 0
    for name in names or KERNELS:
        fn, decl, _ = ab.resolve(f"{KERNELS[name]}:{name}")
        for dtype in (torch.float16, torch.bfloat16):
            for label, args in CASES:
                if not takes(decl, args):
                    continue
                p = problem(dev, dtype, **args)
                try:
                    fn(p)
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    err = max_error(p)
                    verdict = "ok" if err <= 2e-2 else "FAIL"
                except ab.Unsupported as e:
                    err, verdict = 0.0, f"not supported ({e})"
                except Exception:
                    err, verdict = math.inf, "FAIL (raised)"
                    traceback.print_exc()
                failed += verdict.startswith("FAIL")
                print(f"{name:15s} {str(dtype)[6:]:9s} {label:26s} max err {err:.3g}  {verdict}", flush=True)
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
