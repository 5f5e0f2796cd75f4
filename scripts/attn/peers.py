#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention backends on the benchmark matrix, the way
the harness times kernels, and writes the harness's results schema.

    scripts/peers.py [--shapes shapes/benchmark.txt] [--build-dir build] [--results-dir results] [-k PATTERN]

Backends: FLASH_ATTENTION (FlashAttention-2), CUDNN_ATTENTION, EFFICIENT_ATTENTION, MATH,
recorded as kernels torch_flash, torch_cudnn, torch_efficient, torch_math. Inputs are
random normal in the BSHD layout (as the harness's benchmarks), each output is checked
against a float32 computation before timing. Timing: warm-up, then cold samples (the L2
flushed before each by writing twice its size), CUDA events, samples taken while the SM
clock (NVML) is under 75 % of its maximum dropped, at least 10 samples and 0.5 s, then stop
at a relative standard deviation under 0.5 % or after 1 s; median, minimum and a 95 %
bootstrap confidence interval of the median. Writes results/<gpu>/peers/<date>-<commit>-peers.json
(never replacing a file). Exit 77 where PyTorch or a GPU is missing.
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
from attn.schema import fail, load_shapes

PROG = "peers"
SKIP = 77
BACKENDS = [("torch_flash", "FLASH_ATTENTION"), ("torch_cudnn", "CUDNN_ATTENTION"),
            ("torch_efficient", "EFFICIENT_ATTENTION"), ("torch_math", "MATH")]
# the bound on max|O - float32 O| an output must meet before it is timed
O_TOLERANCE = {"fp16": 0.02, "bf16": 0.05}


def read_shapes(path, prog="peers", tool=None, build_dir=None, json_text=None):
    """The benchmark matrix (dtype, head dim, mask, S = S_q = S_k, tokens, hidden) of a shapes
    file, as attn_shapes --json parses it (attn.schema.load_shapes)."""
    doc = load_shapes(path, prog, tool, build_dir, json_text)
    if doc["tokens"] is None or doc["hidden"] is None:
        fail(prog, path, "the benchmark matrix needs its 'tokens' and 'hidden' lines")
    axes = doc["axes"]
    return [(dt, int(d), m, s["seqlen_q"], doc["tokens"], doc["hidden"])
            for dt in axes["dtype"] for d in axes["head_dim"] for m in axes["mask"] for s in doc["shapes"]]


def bootstrap_ci(x, np, reps=1000):
    rng = np.random.default_rng(0x5EED)
    med = np.median(rng.choice(x, size=(reps, len(x)), replace=True), axis=1)
    return float(np.percentile(med, 2.5)), float(np.percentile(med, 97.5))


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
            flush.fill_(len(ms) & 0xFF)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--shapes", default=os.path.join(ROOT, "shapes", "benchmark.txt"))
    ap.add_argument("--shapes-tool", help="attn_shapes (default $ATTN_SHAPES_TOOL, else BUILD_DIR/tools/attn_shapes)")
    ap.add_argument("--build-dir", default=os.environ.get("ATTN_BUILD_DIR") or os.path.join(ROOT, "build"))
    ap.add_argument("--results-dir", default=os.path.join(ROOT, "results"))
    ap.add_argument("-k", default="", help="only tests whose name matches this regular expression")
    a = ap.parse_args()
    cases = read_shapes(a.shapes, PROG, a.shapes_tool, a.build_dir)
    have = torch_on_gpu()
    if not have:
        return SKIP
    np, torch = have
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    props = torch.cuda.get_device_properties(0)
    slug, peaks = peaks_for(props.name)
    flush = torch.empty(2 * getattr(props, "L2_cache_size", 64 << 20), dtype=torch.uint8, device="cuda")
    clock = nvml_clock()
    tests = []
    for dt, d, mask, s, tokens, hidden in cases:
        b, h = max(1, tokens // s), hidden // d
        dtype = torch.float16 if dt == "fp16" else torch.bfloat16
        gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{dt}/{d}/{mask}/{s}".encode()))
        # BSHD in memory, (B, H, S, D) views, as FlashAttention's benchmarks lay them out
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)
                   for _ in range(3))
        causal = mask == "causal"
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        nbytes = 4.0 * b * s * h * d * 2
        for name, backend in BACKENDS:
            test = f"peers/{name}/{dt}/d{d}/{mask}/s{s}"
            if a.k and not re.search(a.k, test):
                continue
            t = {"test": test, "kernel": name, "dtype": dt, "head_dim": d, "causal": causal,
                 "seqlen_q": s, "seqlen_k": s, "batch": b, "heads": h}

            def run(q=q, k=k, v=v, backend=backend, causal=causal):
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            try:
                out = run()
                torch.cuda.synchronize()
            except Exception as e:  # the backend refuses this case
                t.update(verdict="not_supported", reason=f"{backend}: {str(e).splitlines()[0][:300]}")
                tests.append(t)
                print(f"{test}: not supported: {t['reason']}")
                continue
            err = (out.float() - ref).abs().max().item()
            tol = O_TOLERANCE[dt]
            if not math.isfinite(err) or err > tol:
                t.update(verdict="fail", reason=f"max|O - fp32 reference| = {err:.3g} > {tol}")
                tests.append(t)
                print(f"{test}: wrong output: {t['reason']}")
                continue
            timing = measure(run, torch, np, flush, clock)
            sec = timing["median_ms"] * 1e-3
            t.update(kernel_timing=timing, flops=flops, bytes=nbytes, tflops=flops / sec * 1e-12,
                     gbs=nbytes / sec * 1e-9, verdict="measured", reason=f"max|O - fp32 reference| = {err:.3g}")
            peak = peaks.get(f"{dt}_tflops")
            if peak and "bandwidth_gbs" in peaks:
                floor = max(flops / (peak * 1e12), nbytes / (peaks["bandwidth_gbs"] * 1e9))
                t["roofline_efficiency"] = floor / sec
            tests.append(t)
            print(f"{test}: {timing['median_ms']:.4f} ms [{timing['ci_lo_ms']:.4f}, {timing['ci_hi_ms']:.4f}] "
                  f"{t['tflops']:.1f} TFLOP/s ({timing['samples']} samples)")
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
