#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention backends on the benchmark matrix, the way
the harness times kernels, and writes the harness's results schema.

    scripts/peers.py [--shapes shapes/benchmark.txt] [--build-dir build] [--results-dir results] [-k PATTERN]
                     [--passes fwd,bwd,fwd_bwd] [--shapes-bwd shapes/benchmark_bwd.txt]

Backends: FLASH_ATTENTION (FlashAttention-2), CUDNN_ATTENTION, EFFICIENT_ATTENTION, MATH,
recorded as kernels torch_flash, torch_cudnn, torch_efficient, torch_math. Inputs are
random normal in the BSHD layout (as the harness's benchmarks), each output is checked
against a float32 computation before timing. Timing: warm-up, then cold samples (the L2
flushed before each as the harness's timer does: L2Flush), CUDA events, samples taken while
the SM clock (NVML) is under 75 % of its maximum dropped, at least 10 samples and 0.5 s, then
stop at a relative standard deviation under 0.5 % or after 1 s; median, minimum and a 95 %
bootstrap confidence interval of the median. Writes results/<gpu>/peers/<date>-<commit>-peers.json
(never replacing a file). Exit 77 where PyTorch or a GPU is missing.

--passes (default fwd) adds the backward on the backward's matrix (--shapes-bwd): "bwd" times
torch.autograd.grad of the backend's output (dQ, dK, dV; the backend's own backward), "fwd_bwd"
the forward and that backward together, each checked against a float32 computation first
(max|dX - dX_fp32| / max|dX_fp32| per gradient). Tests peers/bwd/<backend>/... and
peers/fwd_bwd/<backend>/... with "pass" (the harness's names and schema), their FLOPs 2.5x and
3.5x the forward's (the harness's convention), their minimum bytes 8 and 12 tensors of Q's
size (the backward reads Q, K, V, O, dO and writes dQ, dK, dV) against the forward's 4.
"""
import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
import time
import zlib

from attn import ROOT
from attn.schema import PASSES, fail, load_shapes

PROG = "peers"
SKIP = 77
BACKENDS = [("torch_flash", "FLASH_ATTENTION"), ("torch_cudnn", "CUDNN_ATTENTION"),
            ("torch_efficient", "EFFICIENT_ATTENTION"), ("torch_math", "MATH")]
# per pass: FLOPs as a multiple of the forward's, minimum bytes in tensors of Q's size
PASS_WORK = {"fwd": (1.0, 4), "bwd": (2.5, 8), "fwd_bwd": (3.5, 12)}
# the bound an output must meet before it is timed: max|O - O_fp32|, a gradient's max|dX - dX_fp32|
# relative to max|dX_fp32| (check)
O_TOLERANCE = {"fp16": 0.02, "bf16": 0.05}


def read_shapes(path, prog="peers", tool=None, build_dir=None, json_text=None):
    """The benchmark matrix (dtype, head dim, mask, S = S_q = S_k, tokens, hidden) of a shapes
    file, as attn_shapes --json parses it (attn.schema.load_shapes)."""
    doc = load_shapes(path, prog, tool, build_dir, json_text)
    if doc["tokens"] is None or doc["hidden"] is None:
        fail(prog, path, "the benchmark matrix needs its 'tokens' and 'hidden' lines")
    axes = doc["axes"]
    for d in axes["head_dim"]:
        if not str(d).isdigit():  # DxDV: the shim and the peers take one head dim
            fail(prog, path, f"head_dim {d}: these tools time one head dim for Q, K and V; DxDV is not supported")
    return [(dt, int(d), m, s["seqlen_q"], doc["tokens"], doc["hidden"])
            for dt in axes["dtype"] for d in axes["head_dim"] for m in axes["mask"] for s in doc["shapes"]]


def bootstrap_ci(x, np, reps=1000):
    rng = np.random.default_rng(0x5EED)
    med = np.median(rng.choice(x, size=(reps, len(x)), replace=True), axis=1)
    return float(np.percentile(med, 2.5)), float(np.percentile(med, 97.5))


class L2Flush:
    """The L2 flush before each sample, as the harness's timer does it (harness/bench_gpu.h,
    attn_timer_flush): a buffer twice the L2's size written, then read back, so that the L2 holds
    none of the call's data and only clean lines (dirty ones are written back during the
    timed call: about 10 us on an H100). With `cycles`, a spin of that many GPU clocks
    follows, so that the GPU is still busy while Python records the start event and enqueues
    the call (launch overhead out of the interval, as the harness's hold kernel does); the
    spin ends before the start event, so it is never timed."""

    def __init__(self, torch, cycles=0, buf=None):
        if buf is None:
            l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
            buf = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
        self.torch, self.cycles, self.buf = torch, int(cycles), buf

    def holding(self, cycles):
        """This flush (the same buffer) with a spin of `cycles` clocks after it."""
        return L2Flush(self.torch, cycles, self.buf)

    def __call__(self, value):
        self.buf.fill_(value)
        self.buf.amax()  # the read back
        if self.cycles:
            self.torch.cuda._sleep(self.cycles)


def measure(fn, torch, np, flush, clock):
    """fn's GPU time by the rules of this module's docstring: measure_interleaved of fn alone."""
    return measure_interleaved([fn], torch, np, flush, clock)[0]


def measure_interleaved(fns, torch, np, flush, clock):
    """Each function of fns timed by the rules of this module's docstring, one sample of each
    in turn (round-robin, the first of each round rotating), so that what drifts on a shared
    GPU (clocks, a neighbour's load) falls on all of them alike; each stops by its own rule,
    its 1 s limit counted over its own samples. Their timings, in the order of fns."""
    for fn in fns:
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    start_ev, stop_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    series = [{"ms": [], "dropped": 0, "clocks": [], "spent_s": 0.0, "noisy": False, "done": False} for _ in fns]
    rnd = 0
    while not all(s["done"] for s in series):
        for i in [(rnd + j) % len(fns) for j in range(len(fns))]:
            s = series[i]
            if s["done"]:
                continue
            t0 = time.monotonic()
            ms = s["ms"]
            flush(len(ms) & 0xFF)
            start_ev.record()
            fns[i]()
            stop_ev.record()
            stop_ev.synchronize()
            mhz = clock() if clock else None
            if mhz is not None and mhz < 0.75 * clock.max_mhz:
                s["dropped"] += 1
            else:
                ms.append(start_ev.elapsed_time(stop_ev))
                if mhz is not None:
                    s["clocks"].append(mhz)
            x = np.array(ms)
            s["spent_s"] += time.monotonic() - t0
            if len(x) >= 10 and x.sum() * 1e-3 >= 0.5 and x.std(ddof=1) / x.mean() < 0.005:
                s["done"] = True
            elif s["spent_s"] > 1.0 and len(x) >= 1:
                s["noisy"] = s["done"] = True
        rnd += 1
    return [_timing(s, np) for s in series]


def _timing(s, np):
    x = np.array(s["ms"])
    lo, hi = bootstrap_ci(x, np)
    return {"median_ms": float(np.median(x)), "min_ms": float(x.min()), "ci_lo_ms": lo, "ci_hi_ms": hi,
            "samples": len(x), "dropped_for_clock": s["dropped"], "noisy": s["noisy"],
            "rsd": float(x.std(ddof=1) / x.mean()) if len(x) > 1 else 0.0,
            "mean_sm_clock_mhz": float(np.mean(s["clocks"])) if s["clocks"] else None,
            "gpu_time_s": float(x.sum() * 1e-3)}


def nvml_clock():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0))

        def clock():
            return pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        clock.max_mhz = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
        return clock
    except Exception:  # NVML is optional: without it no sample is dropped for clocks
        return None


def torch_on_gpu():
    """(numpy, torch) when both import (with torch.nn.attention's backends) and PyTorch sees a
    CUDA GPU; else None, the SKIPPED line printed (the caller exits 77)."""
    try:
        import numpy as np
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401  (PyTorch >= 2.3)
    except ImportError as e:
        print(f"SKIPPED: PyTorch not found ({e})")
        return None
    if not torch.cuda.is_available():
        print("SKIPPED: PyTorch sees no CUDA GPU")
        return None
    return np, torch


def run_commit():
    """The commit a run records: $ATTN_COMMIT, else the tree's short HEAD, else "unknown"."""
    return os.environ.get("ATTN_COMMIT") or subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"


def peaks_for(gpu_name):
    slug = "_".join(re.findall(r"[a-z0-9]+", gpu_name.lower()))
    path = os.path.join(ROOT, "thresholds", slug + ".ini")
    peaks = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                m = re.match(r"\s*(fp16_tflops|bf16_tflops|bandwidth_gbs)\s*=\s*([0-9.]+)", line)
                if m:
                    peaks[m.group(1)] = float(m.group(2))
    return slug, peaks


def case_inputs(env, case, grad):
    """Q, K, V (BSHD in memory, (B, H, S, D) views, as FlashAttention's benchmarks lay them out)
    and dO, from the case's own seed: the forward's Q, K, V do not depend on the pass."""
    torch = env["torch"]
    dt, d, mask, s, tokens, hidden = case
    b, h = max(1, tokens // s), hidden // d
    dtype = torch.float16 if dt == "fp16" else torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{dt}/{d}/{mask}/{s}".encode()))
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)
                   for _ in range(4))
    if grad:  # leaves of their own (the views' strides kept) for torch.autograd.grad
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    return q, k, v, do


def reference(env, q, k, v, do, causal, pass_):
    """The float32 computation a backend's result is checked against: O, or (dQ, dK, dV)."""
    torch, F = env["torch"], env["F"]
    qf, kf, vf = (x.detach().float().requires_grad_(pass_ != "fwd") for x in (q, k, v))
    with torch.set_grad_enabled(pass_ != "fwd"):
        out = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
        return out.detach() if pass_ == "fwd" else torch.autograd.grad(out, (qf, kf, vf), do.float())


def pass_fn(env, backend, q, k, v, do, causal, pass_):
    """What is timed: the backend's forward; its backward (torch.autograd.grad of one forward's
    output, the graph kept); or both. Returns (fn, what fn's result is checked as)."""
    torch, F = env["torch"], env["F"]

    def fwd():
        with env["sdpa_kernel"](getattr(env["SDPBackend"], backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if pass_ == "fwd":
        return fwd
    if pass_ == "fwd_bwd":
        return lambda: torch.autograd.grad(fwd(), (q, k, v), do)
    out = fwd()
    return lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)


def check(result, ref, dt, pass_):
    """(error, bound): the forward's max|O - O_fp32|; a gradient's max|dX - dX_fp32| relative to
    max|dX_fp32|, the worst of dQ, dK, dV."""
    tol = O_TOLERANCE[dt]
    if pass_ == "fwd":
        return (result.float() - ref).abs().max().item(), tol
    return max(((g.float() - r).abs().max() / r.abs().max().clamp_min(1e-6)).item()
               for g, r in zip(result, ref)), tol


def time_case(env, case, pass_, pattern):
    """Every backend on one case of one pass: a test record each (measured, fail or not_supported)."""
    torch = env["torch"]
    dt, d, mask, s, tokens, hidden = case
    b, h = max(1, tokens // s), hidden // d
    causal = mask == "causal"
    tests = [{"test": f"peers/{'' if pass_ == 'fwd' else pass_ + '/'}{name}/{dt}/d{d}/{mask}/s{s}", "pass": pass_,
              "kernel": name, "dtype": dt, "head_dim": d, "causal": causal, "seqlen_q": s, "seqlen_k": s,
              "batch": b, "heads": h} for name, _ in BACKENDS]
    tests = [t for t in tests if not pattern or re.search(pattern, t["test"])]
    if not tests:
        return []
    q, k, v, do = case_inputs(env, case, pass_ != "fwd")
    try:
        ref = reference(env, q, k, v, do, causal, pass_)
    except Exception as e:  # out of memory: nothing to check the backends against
        torch.cuda.empty_cache()
        reason = f"the float32 reference failed: {str(e).splitlines()[0][:300]}"
        print(f"{dt}/d{d}/{mask}/s{s} {pass_}: skipped: {reason}")
        return [dict(t, verdict="skipped", reason=reason) for t in tests]
    times, tensors = PASS_WORK[pass_]
    flops = times * 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    nbytes = tensors * b * s * h * d * 2.0
    what = "O" if pass_ == "fwd" else "dX"
    backends = dict(BACKENDS)
    for t in tests:
        test, backend = t["test"], backends[t["kernel"]]
        try:
            run = pass_fn(env, backend, q, k, v, do, causal, pass_)
            err, tol = check(run(), ref, dt, pass_)
            torch.cuda.synchronize()
        except Exception as e:  # the backend refuses this case (or runs out of memory)
            torch.cuda.empty_cache()
            t.update(verdict="not_supported", reason=f"{backend}: {str(e).splitlines()[0][:300]}")
            print(f"{test}: not supported: {t['reason']}")
            continue
        if not math.isfinite(err) or err > tol:
            t.update(verdict="fail", reason=f"max|{what} - fp32 reference| = {err:.3g} > {tol}")
            print(f"{test}: wrong output: {t['reason']}")
            continue
        timing = measure(run, torch, env["np"], env["flush"], env["clock"])
        sec = timing["median_ms"] * 1e-3
        t.update(kernel_timing=timing, flops=flops, bytes=nbytes, tflops=flops / sec * 1e-12,
                 gbs=nbytes / sec * 1e-9, verdict="measured", reason=f"max|{what} - fp32 reference| = {err:.3g}")
        peaks = env["peaks"]
        peak = peaks.get(f"{dt}_tflops")
        if peak and "bandwidth_gbs" in peaks:
            floor = max(flops / (peak * 1e12), nbytes / (peaks["bandwidth_gbs"] * 1e9))
            t["roofline_efficiency"] = floor / sec
        print(f"{test}: {timing['median_ms']:.4f} ms [{timing['ci_lo_ms']:.4f}, {timing['ci_hi_ms']:.4f}] "
              f"{t['tflops']:.1f} TFLOP/s ({timing['samples']} samples)")
        del run
    return tests


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--shapes", default=os.path.join(ROOT, "shapes", "benchmark.txt"))
    ap.add_argument("--shapes-tool", help="attn_shapes (default $ATTN_SHAPES_TOOL, else BUILD_DIR/tools/attn_shapes)")
    ap.add_argument("--build-dir", default=os.environ.get("ATTN_BUILD_DIR") or os.path.join(ROOT, "build"))
    ap.add_argument("--results-dir", default=os.path.join(ROOT, "results"))
    ap.add_argument("-k", default="", help="only tests whose name matches this regular expression")
    ap.add_argument("--passes", default="fwd", help="fwd, bwd, fwd_bwd, comma-separated (default: fwd)")
    ap.add_argument("--shapes-bwd", default=os.path.join(ROOT, "shapes", "benchmark_bwd.txt"),
                    help="the backward's matrix, for the passes bwd and fwd_bwd")
    a = ap.parse_args()
    passes = [p for p in a.passes.split(",") if p]
    if not passes or any(p not in PASSES for p in passes):
        fail(PROG, "--passes", f"'{a.passes}': expected a comma-separated list of {', '.join(PASSES)}")
    cases = [(p, read_shapes(a.shapes if p == "fwd" else a.shapes_bwd, PROG, a.shapes_tool, a.build_dir))
             for p in PASSES if p in passes]
    have = torch_on_gpu()
    if not have:
        return SKIP
    np, torch = have
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    props = torch.cuda.get_device_properties(0)
    slug, peaks = peaks_for(props.name)
    flush = L2Flush(torch)
    clock = nvml_clock()
    env = {"torch": torch, "F": F, "np": np, "SDPBackend": SDPBackend, "sdpa_kernel": sdpa_kernel,
           "flush": flush, "clock": clock, "peaks": peaks}
    tests = []
    for pass_, pass_cases in cases:
        for case in pass_cases:
            tests += time_case(env, case, pass_, a.k)
    commit = run_commit()
    now = datetime.datetime.now(datetime.timezone.utc)
    doc = {"schema": 1, "run": {"commit": commit, "dirty": None, "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                "gpu": {"name": props.name, "sms": props.multi_processor_count},
                                "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
                                "cudnn_version": torch.backends.cudnn.version(), "peers": True},
           "tests": tests}
    outdir = os.path.join(a.results_dir, slug, "peers")
    os.makedirs(outdir, exist_ok=True)
    stem = f"{now:%Y-%m-%d}-{commit}-peers"
    tmp = os.path.join(outdir, f".{stem}.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    for i in range(1, 1000):  # a hard link never replaces an existing file
        path = os.path.join(outdir, stem + (f"-{i}" if i > 1 else "") + ".json")
        try:
            os.link(tmp, path)
            break
        except FileExistsError:
            continue
    os.unlink(tmp)
    print(f"results: {path} ({len(tests)} tests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
