#!/usr/bin/env python3
"""Times the harness's cuDNN baseline beside PyTorch's cuDNN SDPA backend on every shape of
the benchmark matrix, and says where they differ by more than 5 %.

    scripts/cudnn_vs_torch.py [--build-dir build] [--shapes shapes/benchmark.txt] [-k PATTERN]
                              [--torch-cudnn] [--no-hold] [--tolerance-pct 5] [--out TABLE.md]

The harness side: `attn_cudnn_probe --time` per shape (a process each), which plans the
shape as attn_benchmark does (autotuned unless ATTN_CUDNN_AUTOTUNE=0), checks the output by
the verdict rule and times it with the benchmarks' rules (cold L2, stream held, clock check,
median of >= 10 samples). The torch side, in this process afterwards: the same shapes and
layout (BSHD in memory, batch = tokens / S, heads = hidden / D) under
sdpa_kernel(SDPBackend.CUDNN_ATTENTION), checked against float32, timed by scripts/peers.py's
measure() (the same rules); by default with the stream held by torch.cuda._sleep after each
L2 flush, so that Python's launch overhead stays out as the harness's hold kernel keeps it
out (--no-hold: peers.py's timing as it is).

--torch-cudnn points the harness at the libcudnn PyTorch loaded (ATTN_CUDNN_LIB, its folder
and pip's nvidia-*/lib folders first on LD_LIBRARY_PATH), so that both sides run one cuDNN;
otherwise the harness loads its own (as the benchmarks do) and a version mismatch is
printed.

Prints a Markdown table (shape, harness ms, torch ms, ratio = harness / torch, within
+-5 % or not). Exit status: the number of shapes outside +-5 %, a shape where either side
has no time counted as outside (capped at 125); 77 without PyTorch, numpy or a GPU; 2 when
the probe is not built.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

from attn import ROOT, peers  # read_shapes, measure, nvml_clock: the timing the peers table uses

SKIP = 77


def label(case):
    dt, d, mask, s, tokens, hidden = case
    return f"{dt}/d{d}/{mask}/s{s}"


def run_probe(probe, case, tolerance, env, timeout):
    """The harness's cuDNN baseline on one shape: (result dict, None) or (None, reason)."""
    dt, d, mask, s, tokens, hidden = case
    cmd = [probe, "--time", "--dtype", dt, "--head-dim", str(d), "--mask", mask, "--seqlen", str(s),
           "--tokens", str(tokens), "--hidden", str(hidden), "--tolerance", tolerance]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"attn_cudnn_probe timed out after {timeout} s"
    out = p.stdout + p.stderr
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            try:
                return json.loads(line[len("RESULT "):]), None
            except ValueError as e:
                return None, f"unreadable RESULT line ({e})"
    lines = [x for x in out.splitlines() if x.strip()]
    last = lines[-1] if lines else "(no output)"
    what = {SKIP: "not available"}.get(p.returncode, f"exit {p.returncode}")
    return None, f"{what}: {last[:300]}"


def torch_cudnn_library():
    """The libcudnn file this process has loaded (PyTorch's), or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if re.search(r"/libcudnn\.so(\.\d+)*$", path):
                    return path
    except OSError:
        pass
    return None


def library_dirs(lib):
    """Where the libraries PyTorch's libcudnn loads next live: its folder, and with pip's
    nvidia-* wheels every nvidia/*/lib folder (cuBLASLt, NVRTC, ...)."""
    dirs = [os.path.dirname(lib)]
    m = re.match(r"(.*/nvidia)/[^/]+/lib/", lib)
    if m:
        dirs += sorted(glob.glob(os.path.join(m.group(1), "*", "lib")))
    return list(dict.fromkeys(dirs))


def hold_cycles(fn, torch, clock):
    """Clocks to spin: twice the longest host time to enqueue one call (plus 50 us), at the
    GPU's maximum SM clock (NVML; 2 GHz when unknown)."""
    torch.cuda.synchronize()
    worst = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        worst = max(worst, time.perf_counter() - t0)
        torch.cuda.synchronize()
    hz = (clock.max_mhz * 1e6) if clock else 2e9
    return (2 * worst + 50e-6) * hz


def time_torch(cases, a, results):
    """PyTorch's cuDNN backend on each case, into results[label]['torch'] (or 'torch_why')."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    flush_l2 = peers.L2Flush(torch)
    clock = peers.nvml_clock()
    can_hold = not a.no_hold and hasattr(torch.cuda, "_sleep")
    if not a.no_hold and not can_hold:
        print("note: torch.cuda._sleep not found: torch is timed without holding the stream (launch "
              "overhead included)")
    for case in cases:
        dt, d, mask, s, tokens, hidden = case
        r = results[label(case)]
        b, h = max(1, tokens // s), hidden // d
        dtype = torch.float16 if dt == "fp16" else torch.bfloat16
        causal = mask == "causal"
        gen = torch.Generator(device="cuda").manual_seed(0x5EED + s * 7 + d)
        # BSHD in memory, (B, H, S, D) views: the harness's benchmark layout
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dtype, generator=gen).transpose(1, 2)
                   for _ in range(3))

        def run(q=q, k=k, v=v, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        try:
            out = run()
            torch.cuda.synchronize()
        except Exception as e:  # the backend refuses this case
            r["torch_why"] = f"not supported: {str(e).splitlines()[0][:200]}"
            continue
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        err = (out.float() - ref).abs().max().item()
        del ref, out
        tol = 0.02 if dt == "fp16" else 0.05
        if not err <= tol:  # NaN too
            r["torch_why"] = f"wrong output: max|O - fp32 reference| = {err:.3g} > {tol}"
            continue
        flush = flush_l2.holding(hold_cycles(run, torch, clock)) if can_hold else flush_l2
        r["torch"] = peers.measure(run, torch, np, flush, clock)
        t = r["torch"]
        print(f"torch   {label(case)}: {t['median_ms']:.4f} ms [{t['ci_lo_ms']:.4f}, {t['ci_hi_ms']:.4f}] "
              f"({t['samples']} samples{', noisy' if t['noisy'] else ''})", flush=True)
        del q, k, v
    return torch


def table(cases, results, pct):
    rows = ["| shape | harness ms | torch ms | ratio | within ±%g %% | notes |" % pct,
            "| --- | ---: | ---: | ---: | --- | --- |"]
    outside = 0
    for case in cases:
        r = results[label(case)]
        hs, ts = r.get("harness"), r.get("torch")
        hms = f"{hs['median_ms']:.4f}" if hs else "n/a"
        tms = f"{ts['median_ms']:.4f}" if ts else "n/a"
        notes = []
        if hs:
            notes.append(f"{hs.get('kind', '?')}, {hs.get('engine', '?')}"
                         + (f" ({hs.get('configs_built')}/{hs.get('configs_tried')} built)" if hs.get("tuned") else ""))
        else:
            notes.append(f"harness: {r.get('harness_why', '?')}")
        if not ts:
            notes.append(f"torch: {r.get('torch_why', 'not run')}")
        if hs and ts:
            ratio = hs["median_ms"] / ts["median_ms"]
            ok = abs(ratio - 1) <= pct / 100
            rat, within = f"{ratio:.3f}", "yes" if ok else "**no**"
            if (hs.get("noisy") or ts.get("noisy")):
                notes.append("noisy")
        else:
            rat, within, ok = "n/a", "**no** (no time)", False
        outside += not ok
        b, h = max(1, case[4] // case[3]), case[5] // case[1]
        note = "; ".join(notes).replace("|", "\\|")
        rows.append(f"| {label(case)} (b{b} h{h}) | {hms} | {tms} | {rat} | {within} | {note} |")
    return "\n".join(rows), outside


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--build-dir", default=os.environ.get("ATTN_BUILD_DIR") or os.path.join(ROOT, "build"))
    ap.add_argument("--probe", help="attn_cudnn_probe (default: BUILD_DIR/tools/attn_cudnn_probe)")
    ap.add_argument("--shapes", default=os.path.join(ROOT, "shapes", "benchmark.txt"))
    ap.add_argument("--shapes-tool", help="attn_shapes (default $ATTN_SHAPES_TOOL, else BUILD_DIR/tools/attn_shapes)")
    ap.add_argument("--tolerance", default=os.path.join(ROOT, "thresholds", "tolerance.ini"),
                    help="the verdict rule's factors the probe checks cuDNN's output with")
    ap.add_argument("-k", default="", help="only shapes whose label (fp16/d64/causal/s512) matches this regex")
    ap.add_argument("--torch-cudnn", action="store_true",
                    help="the harness loads the libcudnn PyTorch loaded (ATTN_CUDNN_LIB)")
    ap.add_argument("--no-hold", action="store_true", help="torch timed exactly as scripts/peers.py times it")
    ap.add_argument("--tolerance-pct", type=float, default=5.0)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per probe run")
    ap.add_argument("--out", help="also write the table to this file")
    a = ap.parse_args()

    probe = a.probe or os.path.join(a.build_dir, "tools", "attn_cudnn_probe")
    if not os.access(probe, os.X_OK):
        print(f"cudnn_vs_torch: {probe} not found: build the harness first (cmake --build {a.build_dir}) "
              f"or pass --probe / --build-dir", file=sys.stderr)
        return 2
    cases = [c for c in peers.read_shapes(a.shapes, "cudnn_vs_torch", a.shapes_tool, a.build_dir) if re.search(a.k, label(c))]
    if not cases:
        print(f"cudnn_vs_torch: no shape of {a.shapes} matches -k '{a.k}'", file=sys.stderr)
        return 2
    found = peers.torch_on_gpu()  # numpy for peers.measure's statistics, torch, a GPU
    if not found:
        return SKIP
    torch = found[1]
    torch_cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    torch_lib = torch_cudnn_library()
    env = dict(os.environ)
    if a.torch_cudnn:
        if not torch_lib:
            print("cudnn_vs_torch: --torch-cudnn: cannot find the libcudnn PyTorch loaded in /proc/self/maps",
                  file=sys.stderr)
            return 2
        env["ATTN_CUDNN_LIB"] = torch_lib
        env["LD_LIBRARY_PATH"] = ":".join(library_dirs(torch_lib) + [x for x in [env.get("LD_LIBRARY_PATH")] if x])
        print(f"harness: ATTN_CUDNN_LIB={torch_lib}, LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}")
    print(f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch_cudnn} ({torch_lib or 'path unknown'})")

    # 1. the harness, one process per shape (before this process allocates on the GPU)
    results = {label(c): {} for c in cases}
    harness_versions = set()
    for case in cases:
        r = results[label(case)]
        res, why = run_probe(probe, case, a.tolerance, env, a.timeout)
        if res:
            r["harness"] = res
            harness_versions.add((res.get("version"), res.get("library")))
            print(f"harness {label(case)}: {res['median_ms']:.4f} ms [{res['ci_lo_ms']:.4f}, {res['ci_hi_ms']:.4f}] "
                  f"{res.get('kind')}, {res.get('engine')}", flush=True)
        else:
            r["harness_why"] = why
            print(f"harness {label(case)}: {why}", flush=True)
    for version, lib in sorted(harness_versions, key=str):
        print(f"harness cuDNN {version} ({lib})")
        if torch_cudnn and version and int(version) != int(torch_cudnn):
            print(f"note: the harness runs cuDNN {version}, PyTorch {torch_cudnn}: the ratio mixes library versions "
                  f"(--torch-cudnn runs the harness on PyTorch's)")

    # 2. PyTorch's cuDNN backend, in this process
    time_torch(cases, a, results)

    text, outside = table(cases, results, a.tolerance_pct)
    print()
    print(text)
    print(f"\n{outside} of {len(cases)} shapes outside ±{a.tolerance_pct:g} % (ratio = harness ms / torch ms)")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return min(outside, 125)


if __name__ == "__main__":
    sys.exit(main())
