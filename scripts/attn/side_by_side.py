#!/usr/bin/env python3
"""Times the project's kernels beside PyTorch's SDPA backends in one process, on one timer,
their samples interleaved, and writes a Markdown table and a JSON of TFLOP/s and ratios.

    scripts/side_by_side.py [--build-dir build] [--pass fwd|bwd|fwd_bwd] [--kernels flash2,cudnn]
                            [--peers torch_flash,torch_cudnn] [--shapes FILE] [--seqlen 512,1024,...]
                            [-k 'fp16 d128'] [--target 'flash2/torch_flash>=1.0@s>=1024'] ...

Why one process: on a shared GPU, times taken in separate processes moved 10-40 % between
runs; ratios measured side by side, sample against sample, hold.

The implementations. Our kernels (--kernels, built-in or from --plugin) through their C entry
points: libattn_kernel_shim.so (tools/kernel_shim.c, built with the harness; --shim) called
through ctypes on the tensors' device pointers and torch's current stream. PyTorch's backends
(--peers): torch_flash (FLASH_ATTENTION, FlashAttention-2), torch_cudnn (CUDNN_ATTENTION),
torch_efficient (EFFICIENT_ATTENTION), each under torch.nn.attention.sdpa_kernel.

The shapes: FlashAttention's benchmark convention. Batch = tokens / S, heads = hidden / D,
S_q = S_k = S, scale 1/sqrt(D), inputs random normal in the BSHD layout (torch sees (B, H, S, D)
views of it). The matrix (dtypes, head dims, masks, S, tokens, hidden) is a shapes file's
(--shapes; default shapes/benchmark_bwd.txt, or where there is none shapes/benchmark.txt with
S = 512 ... 16384); --seqlen replaces its S; -k keeps the shapes whose label ("fp16 d128 causal
s1024") matches every word of the pattern (each a regular expression).

What is timed (--pass):
  fwd      the training forward. Ours: fwd writing O and the LSE. Torch: F.scaled_dot_product_
           attention on inputs that require grad (the backend keeps what its backward needs, the
           LSE included, and autograd records the graph), as FlashAttention's benchmark_forward.
  bwd      ours: bwd, given O and the LSE of our own fwd (of a float32 computation where our fwd
           does not take the shape or fails its check), its workspace allocated once before.
           Torch: FlashAttention's benchmark_backward: one forward, then
           torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) per sample, dout laid out
           as out (q, k, v: the BSHD tensors whose (B, H, S, D) views torch gets; the views'
           backward is a view again, no copy). That includes the backend's backward kernels
           (FlashAttention-2: the dO.O row sums, the dQ/dK/dV kernel, dQ's fp32 accumulator
           converted; cuDNN: its backward graph), the autograd engine's dispatch and the
           gradients' allocation (the caching allocator); not the forward.
  fwd_bwd  both in one sample (ours: fwd then bwd; torch: the forward, then autograd.grad).

Before timing, every implementation's output is checked against a float32 computation
(matmuls without TF32, in blocks of query rows, which also gives the LSE) by scripts/peers.py's
rule (peers.check): max|O - O32| <= 0.02 fp16, 0.05 bf16 (our kernels' LSE alike); dQ, dK, dV
by the same figure relative to the gradient's size, max|dX - dX32| <= tol * max|dX32| (O's
values are of order 1: its bound is this one at scale 1). Outputs are NaN-filled before the
checked call. A wrong one is reported "wrong" and not timed; one that refuses the shape is
"n/s" (not supported).

The timer: peers.measure_interleaved, peers.measure's rules (warm-up, the L2 flushed before
every sample, CUDA events, samples at a low SM clock dropped, >= 10 samples and 0.5 s, then a
relative spread under 0.5 % or 1 s of the implementation's own samples; median, 95 % bootstrap
CI), one sample of each implementation in turn. By default the stream is held after each
flush (peers.L2Flush.holding), so that no implementation's host cost (Python, ctypes,
autograd) is timed; --no-hold: peers.py's timing as it is.

FLOPs (FlashAttention's convention): forward 4 * B * H * S^2 * D, half of it when causal;
backward 2.5 x the forward's; fwd_bwd 3.5 x. A ratio kernel/peer = the peer's median time /
the kernel's (> 1: the kernel is faster).

Writes results/<gpu>/peers/<date>-<commit>-sidebyside-<pass>.md and .json (compact), both or
neither, never replacing a file (--results-dir; --out STEM writes STEM.md and STEM.json).
--target KERNEL/PEER>=RATIO[@s>=N] (repeatable): the ratio on every shape (with S >= N); a
shape where either has no time misses it. Exit 0; 1 a target missed; 2 bad arguments (the
argument named) or the shim not built; 77 without PyTorch, numpy or a GPU.
"""
import argparse
import datetime
import math
import os
import re
import sys
import zlib

from attn import ROOT, peers, schema, store

PROG = "side_by_side"
SKIP, BAD_ARGS, MISSED = 77, 2, 1
PASSES = {p: peers.PASS_WORK[p][0] for p in schema.PASSES}  # FLOPs per the forward's
PEERS = {name: backend for name, backend in peers.BACKENDS if name != "torch_math"}  # math: S^2 memory
FA_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
TARGET = re.compile(r"^([a-z0-9_]+)/([a-z0-9_]+)>=([0-9]+(?:\.[0-9]*)?)(?:@s>=([0-9]+))?$")
REF_BLOCK_ELEMS = 1 << 28  # float32 scores of one block of query rows in the reference (1 GiB)


# ---- arguments, shapes, FLOPs, targets (host only) -------------------------------------------
def names_list(ap, option, text, allowed=None):
    names = [n for n in text.split(",") if n]
    for n in names:
        if not re.match(r"^[a-z0-9_]+$", n) or (allowed is not None and n not in allowed):
            ap.error(f"argument {option}: '{n}' is not " +
                     (f"one of {', '.join(allowed)}" if allowed is not None else "a kernel name ([a-z0-9_]+)"))
    if len(set(names)) != len(names):
        ap.error(f"argument {option}: a name twice in '{text}'")
    return names


def parse_target(text):
    """'flash2/torch_flash>=1.0@s>=1024' -> {text, kernel, peer, ratio, min_s}; None if malformed."""
    m = TARGET.match(text)
    if not m:
        return None
    return {"text": text, "kernel": m.group(1), "peer": m.group(2), "ratio": float(m.group(3)),
            "min_s": int(m.group(4) or 0)}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="side_by_side.py", description=__doc__.strip().splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.strip().splitlines()[2:]))
    ap.add_argument("--pass", dest="pass_", default="bwd", choices=list(PASSES), help="what is timed (default bwd)")
    ap.add_argument("--kernels", default="flash2,cudnn", help="our kernels, comma-separated ('' for none)")
    ap.add_argument("--peers", default="torch_flash,torch_cudnn",
                    help=f"PyTorch's backends, comma-separated, of {', '.join(PEERS)} ('' for none)")
    ap.add_argument("--build-dir", default=os.environ.get("ATTN_BUILD_DIR") or os.path.join(ROOT, "build"))
    ap.add_argument("--shim", help="libattn_kernel_shim.so (default BUILD_DIR/tools/libattn_kernel_shim.so)")
    ap.add_argument("--plugin", help="find --kernels in this plugin library instead of the built-ins")
    ap.add_argument("--shapes", help="the shape matrix (default shapes/benchmark_bwd.txt, else shapes/benchmark.txt "
                                     "with S = 512..16384)")
    ap.add_argument("--shapes-tool", help="attn_shapes (default $ATTN_SHAPES_TOOL, else BUILD_DIR/tools/attn_shapes)")
    ap.add_argument("--seqlen", help="S values replacing the shapes file's, comma-separated")
    ap.add_argument("-k", default="", help="only shapes whose label matches every word of this (regular expressions)")
    ap.add_argument("--deterministic", action="store_true", help="ask our kernels' bwd for bit-exact repeats")
    ap.add_argument("--no-hold", action="store_true", help="do not hold the stream after each flush")
    ap.add_argument("--target", action="append", default=[], metavar="KERNEL/PEER>=RATIO[@s>=N]",
                    help="exit 1 unless the kernel's ratio to the peer reaches RATIO on every shape (with S >= N)")
    ap.add_argument("--results-dir", default=os.path.join(ROOT, "results"))
    ap.add_argument("--out", help="write OUT.md and OUT.json instead of under the results folder")
    a = ap.parse_args(argv)
    a.kernels = names_list(ap, "--kernels", a.kernels)
    a.peers = names_list(ap, "--peers", a.peers, list(PEERS))
    if not a.kernels and not a.peers:
        ap.error("argument --kernels/--peers: nothing to time")
    try:
        a.seqlen = [int(s) for s in a.seqlen.split(",")] if a.seqlen else None
    except ValueError:
        a.seqlen = [0]
    if a.seqlen is not None and (not a.seqlen or min(a.seqlen) < 1):
        ap.error("argument --seqlen: expected positive integers, comma-separated")
    for w in a.k.split():
        try:
            re.compile(w)
        except re.error as e:
            ap.error(f"argument -k: '{w}' is not a regular expression ({e})")
    targets = []
    for t in a.target:
        p = parse_target(t)
        if p is None:
            ap.error(f"argument --target: '{t}' is not KERNEL/PEER>=RATIO[@s>=N]")
        if p["kernel"] not in a.kernels or p["peer"] not in a.peers:
            ap.error(f"argument --target: '{t}': {p['kernel']} must be one of --kernels and {p['peer']} one of --peers")
        targets.append(p)
    a.target = targets
    return a


def default_shapes(a):
    """(shapes file, S values replacing its own or None): --shapes, else benchmark_bwd.txt, else
    benchmark.txt with FlashAttention's S = 512..16384."""
    if a.shapes:
        return a.shapes, a.seqlen
    bwd = os.path.join(ROOT, "shapes", "benchmark_bwd.txt")
    if os.path.exists(bwd):
        return bwd, a.seqlen
    return os.path.join(ROOT, "shapes", "benchmark.txt"), a.seqlen or FA_SEQLENS


def with_seqlens(cases, seqlens):
    """The cases (dtype, head dim, mask, S, tokens, hidden) with S replaced by each of seqlens."""
    if not seqlens:
        return list(cases)
    out = []
    for c in cases:
        for s in seqlens:
            n = c[:3] + (s,) + c[4:]
            if n not in out:
                out.append(n)
    return out


def label(case):
    dt, d, mask, s = case[:4]
    return f"{dt} d{d} {mask} s{s}"


def selected(cases, k):
    words = k.split()
    return [c for c in cases if all(re.search(w, label(c)) for w in words)]


def dims(case):
    """(batch, heads) by FlashAttention's convention: tokens / S, hidden / D."""
    dt, d, mask, s, tokens, hidden = case
    return max(1, tokens // s), hidden // d


def pass_flops(pass_, batch, heads, s, d, causal):
    """FlashAttention's count: the forward's 4 * B * H * S^2 * D (half when causal) times the
    pass's factor (bwd 2.5, fwd_bwd 3.5)."""
    return 4.0 * batch * heads * s * s * d * (0.5 if causal else 1.0) * PASSES[pass_]


def test_record(pass_, name, case):
    """The JSON record of implementation `name` on a shape, before its verdict."""
    dt, d, mask, s = case[:4]
    b, h = dims(case)
    # named as the harness names a pass: no pass word for the forward (schema.split_name)
    return {"test": f"sidebyside/{'' if pass_ == 'fwd' else pass_ + '/'}{name}/{dt}/d{d}/{mask}/s{s}",
            "pass": pass_, "shape": label(case), "kernel": name, "dtype": dt, "head_dim": d,
            "causal": mask == "causal", "seqlen_q": s, "seqlen_k": s, "batch": b, "heads": h,
            "flops": pass_flops(pass_, b, h, s, d, mask == "causal")}


# ---- the table and the targets, from the JSON document (host only) ---------------------------
def ratio(doc, kernel, peer, shape):
    """peer's median / kernel's median on a shape, or None when either has no time."""
    t = {x["kernel"]: x for x in doc["tests"] if x["shape"] == shape}
    k, p = t.get(kernel, {}).get("kernel_timing"), t.get(peer, {}).get("kernel_timing")
    return p["median_ms"] / k["median_ms"] if k and p else None


CELL = {"not_supported": "n/s", "fail": "wrong", "error": "error"}


def markdown(doc):
    run, sbs = doc["run"], doc["run"]["side_by_side"]
    impls, kernels, prs = sbs["kernels"] + sbs["peers"], sbs["kernels"], sbs["peers"]
    pairs = [(k, p) for k in kernels for p in prs]
    lines = [f"## Side by side, {sbs['pass']}: {run['gpu']['name']}, commit {run['commit']}, {run['date']}", "",
             f"PyTorch {run.get('torch_version')}, CUDA {run.get('cuda_version')}, cuDNN {run.get('cudnn_version')} "
             f"({sbs.get('cudnn_library_torch')}); our cudnn kernel's: {sbs.get('cudnn_version_ours')} "
             f"({sbs.get('cudnn_library_ours')}). One process, one sample of each "
             f"in turn (peers.measure's rules{', the stream held' if sbs.get('hold') else ''}). TFLOP/s: "
             f"{PASSES[sbs['pass']]:g} x 4·B·H·S²·D, causal counted as half; kernel/peer = the peer's median time / "
             "the kernel's (> 1: the kernel is faster).", "",
             "| shape | B×H | " + " | ".join(impls + [f"{k}/{p}" for k, p in pairs]) + " |",
             "| --- | --- |" + " ---: |" * (len(impls) + len(pairs))]
    notes = []
    for shape in sbs["shapes"]:
        t = {x["kernel"]: x for x in doc["tests"] if x["shape"] == shape}
        any_t = next(iter(t.values()), {})
        cells = []
        for name in impls:
            x = t.get(name)
            if x is None:
                cells.append("")
            elif x.get("kernel_timing"):
                cells.append(f"{x['tflops']:.1f}" + ("*" if x["kernel_timing"].get("noisy") else ""))
            else:
                cells.append(CELL.get(x["verdict"], x["verdict"]))
            if x is not None and (x["verdict"] != "measured" or x.get("note")):
                notes.append(f"- {shape}, {name}: {x.get('reason') if x['verdict'] != 'measured' else x['note']}")
        for k, p in pairs:
            r = ratio(doc, k, p, shape)
            cells.append("" if r is None else f"{r:.2f}")
        lines.append(f"| {shape} | {any_t.get('batch', '')}×{any_t.get('heads', '')} | " + " | ".join(cells) + " |")
    lines += ["", "\\* noisy: stopped at its 1 s limit before a 0.5 % spread. n/s: not supported; wrong: failed its "
              "check against float32 (not timed); error: a call failed."]
    if notes:
        lines += ["", "Notes:", ""] + [n.replace("|", "\\|") for n in notes]
    if doc.get("targets"):
        lines += ["", "Targets:", ""] + [f"- {t['target']}: {'met' if t['met'] else '**missed**'} ({t['summary']})"
                                         for t in doc["targets"]]
    return "\n".join(lines) + "\n"


def judge_targets(doc, targets):
    """Each target's outcome {target, met, summary}: the ratio on every shape with S >= min_s."""
    out = []
    for t in targets:
        shapes = [x for x in doc["run"]["side_by_side"]["shapes"] if int(x.split()[-1][1:]) >= t["min_s"]]
        missed = []
        for shape in shapes:
            r = ratio(doc, t["kernel"], t["peer"], shape)
            if r is None or r < t["ratio"]:
                missed.append(f"{shape}: {'no time' if r is None else f'{r:.3f}'}")
        met = bool(shapes) and not missed
        summary = (f"{len(shapes) - len(missed)} of {len(shapes)} shapes" if shapes else "no shape ran with that S") + \
            (f"; missed: {'; '.join(missed)}" if missed else "")
        out.append({"target": t["text"], "met": met, "summary": summary})
    return out


def write_outputs(doc, md, results_dir, slug, stem, out=None):
    """STEM.md and STEM.json (compact) under results_dir/slug/peers/, both whole or neither, never
    replacing a file (a second run of the day takes -2, -3 ...); with `out` at OUT.md and OUT.json
    (replaced). Returns the two paths."""
    text = store.dumps(store.compact(doc))
    if out:
        for ext, body in (("json", text), ("md", md)):
            with open(f"{out}.{ext}.tmp", "w", encoding="utf-8") as f:
                f.write(body)
        os.replace(f"{out}.json.tmp", f"{out}.json")
        os.replace(f"{out}.md.tmp", f"{out}.md")
        return f"{out}.md", f"{out}.json"
    outdir = os.path.join(results_dir, slug, "peers")
    os.makedirs(outdir, exist_ok=True)
    tmp = {ext: os.path.join(outdir, f".{stem}.{ext}.tmp.{os.getpid()}") for ext in ("json", "md")}
    for ext, body in (("json", text), ("md", md)):
        with open(tmp[ext], "w", encoding="utf-8") as f:
            f.write(body)
    try:
        for i in range(1, 1000):
            base = os.path.join(outdir, stem + (f"-{i}" if i > 1 else ""))
            try:
                os.link(tmp["json"], base + ".json")  # a hard link never replaces a file
            except FileExistsError:
                continue
            try:
                os.link(tmp["md"], base + ".md")
                return base + ".md", base + ".json"
            except FileExistsError:
                os.unlink(base + ".json")
        raise OSError(f"{outdir}: {stem}-2 ... -999 all exist")
    finally:
        for p in tmp.values():
            os.unlink(p)


# ---- the GPU side: our kernels through the shim, torch's backends, the reference --------------
class Shim:
    """libattn_kernel_shim.so through ctypes (tools/kernel_shim.c documents the API)."""

    def __init__(self, path):
        import ctypes as c
        self.c = c
        lib = c.CDLL(path)
        P, I, Z, S = c.c_void_p, c.c_int, c.c_size_t, c.c_char_p
        for name, res, args in (
                ("attn_shim_abi_version", I, []),
                ("attn_shim_find", P, [S, S, S, Z]),
                ("attn_shim_problem_new", P, [P, c.POINTER(I), c.c_float, c.POINTER(P), c.POINTER(c.c_int64), I, S, Z]),
                ("attn_shim_lacks", I, [P, I, S, Z]),
                ("attn_shim_bwd_workspace", Z, [P]),
                ("attn_shim_set_workspace", I, [P, P, Z, S, Z]),
                ("attn_shim_fwd", I, [P, P]),
                ("attn_shim_bwd", I, [P, P]),
                ("attn_shim_problem_free", None, [P]),
                ("attn_shim_cudnn_library", I, [S, Z, c.POINTER(c.c_long), S, Z])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.lib = lib
        self.abi_version = lib.attn_shim_abi_version()

    def find(self, name, plugin):
        err = self.c.create_string_buffer(1024)
        k = self.lib.attn_shim_find(name.encode(), plugin.encode() if plugin else None, err, len(err))
        return k, err.value.decode(errors="replace")

    def problem(self, kernel, dims8, scale, ptrs9, strides24, deterministic):
        c, err = self.c, self.c.create_string_buffer(1024)
        h = self.lib.attn_shim_problem_new(kernel, (c.c_int * 8)(*dims8), scale, (c.c_void_p * 9)(*ptrs9),
                                           (c.c_int64 * 24)(*strides24), int(deterministic), err, len(err))
        return h, err.value.decode(errors="replace")

    def cudnn_library(self):
        """(path, version) of the libcudnn our cudnn kernel loads, or (None, why)."""
        c = self.c
        path, why, version = c.create_string_buffer(1024), c.create_string_buffer(1024), c.c_long()
        if self.lib.attn_shim_cudnn_library(path, len(path), c.byref(version), why, len(why)):
            return None, why.value.decode(errors="replace")
        return path.value.decode(errors="replace"), version.value

    def lacks(self, h, bwd):
        buf = self.c.create_string_buffer(1024)
        return buf.value.decode(errors="replace") if self.lib.attn_shim_lacks(h, int(bwd), buf, len(buf)) else None

    def set_workspace(self, h, ptr, nbytes):
        err = self.c.create_string_buffer(1024)
        return err.value.decode(errors="replace") if self.lib.attn_shim_set_workspace(h, ptr, nbytes, err, len(err)) \
            else None


def bshd_strides(x):
    """(batch, head, row) strides of a (B, S, H, D) tensor, in elements."""
    st = x.stride()
    return st[0], st[2], st[1]


def reference(q, k, v, dout, causal, scale, grads, torch):
    """Float32 O, LSE [B][H][S] and, with grads, dQ, dK, dV of (B, H, S, D) inputs, in blocks of
    query rows (no S x S matrix whole): s = scale q.k, p = exp(s - LSE), O = p v; dV = p^T dO,
    dS = p (dO v^T - rowsum(dO O)), dQ = scale dS k, dK = scale dS^T q."""
    B, H, S, D = q.shape
    qf, kf, vf = (x.float().contiguous() for x in (q, k, v))
    rows = max(1, min(S, REF_BLOCK_ELEMS // (B * H * S)))
    o = torch.empty(B, H, S, D, device=q.device)
    lse = torch.empty(B, H, S, device=q.device)
    keys = torch.arange(S, device=q.device)

    def scores(i0, i1):
        s = torch.matmul(qf[:, :, i0:i1], kf.transpose(-1, -2)).mul_(scale)
        if causal:
            s.masked_fill_(keys[None, :] > torch.arange(i0, i1, device=q.device)[:, None], -math.inf)
        return s
    for i0 in range(0, S, rows):
        i1 = min(S, i0 + rows)
        s = scores(i0, i1)
        lse[:, :, i0:i1] = torch.logsumexp(s, dim=-1)
        o[:, :, i0:i1] = torch.matmul(s.sub_(lse[:, :, i0:i1, None]).exp_(), vf)
    if not grads:
        return o, lse, None
    do = dout.float().contiguous()
    delta = (do * o).sum(-1)
    dq, dk, dv = torch.empty_like(qf), torch.zeros_like(kf), torch.zeros_like(vf)
    for i0 in range(0, S, rows):
        i1 = min(S, i0 + rows)
        p = scores(i0, i1).sub_(lse[:, :, i0:i1, None]).exp_()
        dv += torch.matmul(p.transpose(-1, -2), do[:, :, i0:i1])
        ds = torch.matmul(do[:, :, i0:i1], vf.transpose(-1, -2)).sub_(delta[:, :, i0:i1, None]).mul_(p)
        dq[:, :, i0:i1] = torch.matmul(ds, kf).mul_(scale)
        dk += torch.matmul(ds.transpose(-1, -2), qf[:, :, i0:i1]).mul_(scale)
    return o, lse, (dq, dk, dv)


def check_fwd(o_bhsd, ref, dt, lse=None, lse32=None):
    """None when O (and the LSE, when given) meets peers.check's forward bound, else the reason;
    and the figures."""
    figs, bad = [], []
    for name, x, r in (("O", o_bhsd, ref), ("LSE", lse, lse32)):
        if x is not None:
            err, tol = peers.check(x, r, dt, "fwd")
            figs.append(f"max|{name} - {name}32| = {err:.3g} (<= {tol})")
            if not err <= tol:  # NaN fails
                bad.append(name)
    what = ", ".join(figs)
    return (f"wrong {', '.join(bad)}: {what}" if bad else None), what


def check_grads(grads_bhsd, refs, dt):
    """None when dQ, dK, dV meet peers.check's backward bound, else the reason; and the figure."""
    err, tol = peers.check(grads_bhsd, refs, dt, "bwd")
    what = f"max|dX - dX32| / max|dX32| = {err:.3g} (<= {tol}), the worst of dQ, dK, dV"
    return (None if err <= tol else f"wrong gradients: {what}"), what


class Run:
    """One shape's inputs, reference and implementations (the GPU side)."""

    def __init__(self, env, case):
        self.env, self.case = env, case
        torch = env.torch
        dt, d, mask, s, tokens, hidden = case
        self.b, self.h = dims(case)
        self.dt, self.d, self.s, self.causal = dt, d, s, mask == "causal"
        self.dtype = torch.float16 if dt == "fp16" else torch.bfloat16
        self.scale = 1.0 / math.sqrt(d)
        gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{dt}/{d}/{mask}/{s}".encode()))
        # BSHD in memory; (B, H, S, D) views for torch and the reference
        self.q, self.k, self.v, self.do = (torch.randn(self.b, s, self.h, d, device="cuda", dtype=self.dtype,
                                                       generator=gen) for _ in range(4))
        self.grads = env.a.pass_ != "fwd"
        self.o32, self.lse32, self.g32 = reference(*(x.transpose(1, 2) for x in (self.q, self.k, self.v, self.do)),
                                                   self.causal, self.scale, self.grads, torch)

    def test(self, name):
        return test_record(self.env.a.pass_, name, self.case)

    # -- our kernels --
    def kernel(self, name, kptr):
        """(test, fn to time or None) for our kernel `name`."""
        torch, shim, a = self.env.torch, self.env.shim, self.env.a
        t = self.test(name)
        x = {"o": torch.empty_like(self.q), "lse": torch.empty(self.b, self.h, self.s, device="cuda")}
        if self.grads:
            x.update(dq=torch.empty_like(self.q), dk=torch.empty_like(self.k), dv=torch.empty_like(self.v))
        # tools/kernel_shim.c's arrays: q, k, v, o, (lse), dout, dq, dk, dv; no gradients for a forward
        bshd = [self.q, self.k, self.v, x["o"]] + ([self.do, x["dq"], x["dk"], x["dv"]] if self.grads else [None] * 4)
        ptrs = [p.data_ptr() if p is not None else None for p in bshd]
        ptrs.insert(4, x["lse"].data_ptr())
        strides = [s for p in bshd for s in (bshd_strides(p) if p is not None else (0, 0, 0))]
        dims8 = [0 if self.dt == "fp16" else 1, self.b, self.h, self.h, self.s, self.s, self.d, int(self.causal)]
        h, err = shim.problem(kptr, dims8, self.scale, ptrs, strides, a.deterministic)
        if not h:
            return dict(t, verdict="error", reason=err), None
        self.env.keep.append((h, x))  # freed with the shape (Env.release)
        why = self.kernel_prepare(h, x, t)
        if why:
            return dict(t, **why), None
        return t, self.kernel_fn(h, t)

    def kernel_prepare(self, h, x, t):
        """The checked call(s) before timing: None, or {verdict, reason}."""
        torch, shim, pass_ = self.env.torch, self.env.shim, self.env.a.pass_
        lacks_fwd = shim.lacks(h, False)
        if lacks_fwd and pass_ != "bwd":
            return {"verdict": "not_supported", "reason": lacks_fwd}
        if self.grads:
            lacks_bwd = shim.lacks(h, True)
            if lacks_bwd:
                return {"verdict": "not_supported", "reason": lacks_bwd}
            nbytes = shim.lib.attn_shim_bwd_workspace(h)
            x["ws"] = torch.empty(nbytes, dtype=torch.uint8, device="cuda") if nbytes else None
            err = shim.set_workspace(h, x["ws"].data_ptr() if nbytes else None, nbytes)
            if err:
                return {"verdict": "error", "reason": err}
        fwd_why = lacks_fwd or self.kernel_call(shim.lib.attn_shim_fwd, h, [x["o"], x["lse"]])
        if not fwd_why:
            fwd_why, t["o_check"] = check_fwd(x["o"].transpose(1, 2), self.o32, self.dt, x["lse"], self.lse32)
        if fwd_why and pass_ != "bwd":
            return {"verdict": "not_supported" if fwd_why.startswith("not supported") else
                    "fail" if fwd_why.startswith("wrong") else "error", "reason": fwd_why}
        if not self.grads:
            return None
        if fwd_why:  # bwd from the float32 forward, rounded as a forward's output is
            x["o"].copy_(self.o32.transpose(1, 2))
            x["lse"].copy_(self.lse32)
            t["note"] = f"O and LSE of the float32 reference (its fwd: {fwd_why})"
        t["o_lse_from"] = "reference" if fwd_why else "fwd"
        why = self.kernel_call(shim.lib.attn_shim_bwd, h, [x["dq"], x["dk"], x["dv"]])
        if why:
            return {"verdict": "not_supported" if why.startswith("not supported") else "error", "reason": why}
        why, t["grad_check"] = check_grads([x[g].transpose(1, 2) for g in ("dq", "dk", "dv")], self.g32, self.dt)
        return {"verdict": "fail", "reason": why} if why else None

    def kernel_call(self, fn, h, outputs):
        """One checked call, its outputs NaN first: None, or why it failed."""
        torch = self.env.torch
        for o in outputs:
            o.fill_(float("nan"))
        rc = fn(h, torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        if rc == 1:
            return "not supported: the kernel returned ATTN_UNSUPPORTED (its reason is on stderr)"
        return None if rc == 0 else f"the call returned {rc}"

    def kernel_fn(self, h, t):
        lib, stream, errors = self.env.shim.lib, self.env.torch.cuda.current_stream().cuda_stream, []
        calls = {"fwd": [lib.attn_shim_fwd], "bwd": [lib.attn_shim_bwd],
                 "fwd_bwd": [lib.attn_shim_fwd, lib.attn_shim_bwd]}[self.env.a.pass_]

        def fn():
            for call in calls:
                rc = call(h, stream)
                if rc:
                    errors.append(rc)
        t["_errors"] = errors
        return fn

    # -- torch's backends --
    def peer(self, name):
        """(test, fn to time or None) for PyTorch's backend `name`."""
        env, t = self.env, self.test(name)
        torch, F = env.torch, env.F
        backend = getattr(env.SDPBackend, PEERS[name])
        leaves = [x.detach().requires_grad_() for x in (self.q, self.k, self.v)]
        q, k, v = (x.transpose(1, 2) for x in leaves)

        def fwd():
            with env.sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        try:
            out = fwd()
            torch.cuda.synchronize()
        except Exception as e:  # the backend refuses this case
            return dict(t, verdict="not_supported", reason=f"{PEERS[name]}: {str(e).splitlines()[0][:300]}"), None
        why, t["o_check"] = check_fwd(out, self.o32, self.dt)
        if why:
            return dict(t, verdict="fail", reason=why), None
        if not self.grads:
            return t, fwd
        dout = torch.empty_like(out).copy_(self.do.transpose(1, 2))  # dO laid out as O

        def bwd(out=out):
            return torch.autograd.grad(out, leaves, dout, retain_graph=True)

        def fwd_bwd():
            return torch.autograd.grad(fwd(), leaves, dout)
        fn = bwd if env.a.pass_ == "bwd" else fwd_bwd
        try:
            grads = fn()
            torch.cuda.synchronize()
        except Exception as e:  # the backend refuses this case's backward
            why = f"{PEERS[name]} backward: {str(e).splitlines()[0][:300]}"
            return dict(t, verdict="not_supported", reason=why), None
        why, t["grad_check"] = check_grads([g.transpose(1, 2) for g in grads], self.g32, self.dt)
        return (dict(t, verdict="fail", reason=why), None) if why else (t, fn)


class Env:
    """What every shape shares: the arguments, torch, the shim and its kernels, the flush
    buffer, the clock, the problems to free."""

    def __init__(self, a, torch, np, shim, kernels):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.a, self.torch, self.np, self.shim, self.kernels = a, torch, np, shim, kernels
        self.F, self.SDPBackend, self.sdpa_kernel = F, SDPBackend, sdpa_kernel
        self.flush = peers.L2Flush(torch)
        self.clock = peers.nvml_clock()
        self.hold = not a.no_hold and hasattr(torch.cuda, "_sleep")
        self.keep = []

    def release(self):
        for h, _ in self.keep:
            self.shim.lib.attn_shim_problem_free(h)
        self.keep = []


def time_shape(env, case):
    """The tests of one shape: every implementation checked, the correct ones timed together."""
    from attn.cudnn_vs_torch import hold_cycles
    run = Run(env, case)
    impls = [run.kernel(n, env.kernels[n]) for n in env.a.kernels] + [run.peer(n) for n in env.a.peers]
    timed = [(t, fn) for t, fn in impls if fn]
    flush = env.flush
    if timed and env.hold:
        flush = env.flush.holding(max(hold_cycles(fn, env.torch, env.clock) for _, fn in timed))
    timings = peers.measure_interleaved([fn for _, fn in timed], env.torch, env.np, flush, env.clock) if timed else []
    for (t, _), timing in zip(timed, timings):
        errors = t.pop("_errors", [])
        if errors:
            t.update(verdict="error", reason=f"{len(errors)} timed calls failed (return value {errors[0]})")
            continue
        t.update(kernel_timing=timing, tflops=t["flops"] / (timing["median_ms"] * 1e-3) * 1e-12, verdict="measured",
                 reason="; ".join(t[c] for c in ("o_check", "grad_check") if c in t))
    env.release()
    tests = [t for t, _ in impls]
    for t in tests:
        cell = f"{t['tflops']:.1f} TFLOP/s ({t['kernel_timing']['samples']} samples)" if "tflops" in t else \
            f"{t['verdict']}: {t.get('reason', '')}"
        print(f"{t['test']}: {cell}", flush=True)
    return tests


def load_kernels(a):
    """The shim and {name: kernel pointer}; exits 2 when either cannot be had."""
    shim_path = a.shim or os.path.join(a.build_dir, "tools", "libattn_kernel_shim.so")
    if not os.path.exists(shim_path):
        print(f"{PROG}: --shim {shim_path}: not found: build it (cmake --build {a.build_dir} --target "
              f"attn_kernel_shim) or pass --build-dir / --shim", file=sys.stderr)
        sys.exit(BAD_ARGS)
    try:
        shim = Shim(shim_path)
    except (OSError, AttributeError) as e:
        print(f"{PROG}: --shim {shim_path}: cannot load: {e}", file=sys.stderr)
        sys.exit(BAD_ARGS)
    kernels = {}
    for n in a.kernels:
        k, err = shim.find(n, a.plugin)
        if not k:
            print(f"{PROG}: --kernels: {err}", file=sys.stderr)
            sys.exit(BAD_ARGS)
        kernels[n] = k
    return shim, kernels


def run_doc(env, shapes_path, cases, tests):
    from attn.cudnn_vs_torch import torch_cudnn_library
    a, torch, shim = env.a, env.torch, env.shim
    props = torch.cuda.get_device_properties(0)
    ours = shim.cudnn_library() if shim else (None, "no kernel of ours ran")
    now = datetime.datetime.now(datetime.timezone.utc)
    return now, {
        "schema": 1,
        "run": {"commit": peers.run_commit(), "dirty": None, "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "gpu": {"name": props.name, "sms": props.multi_processor_count},
                "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
                "cudnn_version": torch.backends.cudnn.version(), "peers": True,
                "side_by_side": {"pass": a.pass_, "kernels": a.kernels, "peers": a.peers,
                                 "shapes_file": os.path.relpath(shapes_path, ROOT), "shapes": [label(c) for c in cases],
                                 "hold": env.hold, "deterministic": a.deterministic, "plugin": a.plugin,
                                 "abi_version": shim.abi_version if shim else None,
                                 "cudnn_library_torch": torch_cudnn_library(),
                                 "cudnn_library_ours": ours[0] or f"none: {ours[1]}",
                                 "cudnn_version_ours": ours[1] if ours[0] else None}},
        "tests": tests}


def main(argv=None):
    a = parse_args(argv)
    shapes_path, seqlens = default_shapes(a)
    cases = selected(with_seqlens(peers.read_shapes(shapes_path, PROG, a.shapes_tool, a.build_dir), seqlens), a.k)
    if not cases:
        print(f"{PROG}: -k: no shape of {shapes_path} matches '{a.k}'", file=sys.stderr)
        return BAD_ARGS
    have = peers.torch_on_gpu()
    if not have:
        return SKIP
    np, torch = have
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference
    torch.cuda.init()  # torch's CUDA runtime and libraries first; the shim's cuDNN is then PyTorch's
    shim, kernels = load_kernels(a) if a.kernels else (None, {})
    env = Env(a, torch, np, shim, kernels)
    tests = []
    with torch.cuda.stream(torch.cuda.Stream()):
        for case in cases:
            try:
                tests += time_shape(env, case)
            except RuntimeError as e:  # a CUDA error or out of memory: this shape's, reported
                env.release()
                why = str(e).splitlines()[0][:300]
                print(f"{label(case)}: error: {why}", flush=True)
                tests += [dict(test_record(a.pass_, n, case), verdict="error", reason=why) for n in a.kernels + a.peers]
            torch.cuda.empty_cache()  # the next shape's sizes differ
    now, doc = run_doc(env, shapes_path, cases, tests)
    doc["targets"] = judge_targets(doc, a.target)
    md = markdown(doc)
    print()
    print(md)
    slug, _ = peers.peaks_for(doc["run"]["gpu"]["name"])
    paths = write_outputs(doc, md, a.results_dir, slug, f"{now:%Y-%m-%d}-{doc['run']['commit']}-sidebyside-{a.pass_}",
                          a.out)
    print(f"results: {paths[0]}, {paths[1]} ({len(tests)} tests)")
    return MISSED if any(not t["met"] for t in doc["targets"]) else 0


if __name__ == "__main__":
    sys.exit(main())
