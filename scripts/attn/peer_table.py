#!/usr/bin/env python3
"""Puts a kernel's benchmark results beside its peers' as a Markdown table, one row per shape:
our TFLOP/s, each peer's, our speedup over each (their median time / ours), and our roofline
efficiency. Peers: PyTorch's SDPA backends timed by scripts/peers.py (the default --backends),
or any kernels of a benchmark run, e.g. the Python kernels the bridge ran in the same run
(--backends sdpa_flash,sdpa_cudnn,flex with the run's own results file as PEERS.json). Then
checks the built-in kernel's targets: the forward at S >= 512 at least 1.0x the first backend
(PyTorch's FlashAttention-2 backend), at S <= 32 at least 2x the best backend and 60 % of the
roofline; the backward at S >= 1024 at least 1.0x the first backend (the forward + backward
has no target). Exit status = number of missed targets (--check), else 0.

A table per pass that OURS measured (forward, backward, forward + backward; --pass picks one),
each row against the peers' results of the same pass and shape only (scripts/peers.py --passes
times PyTorch's backward too; results without a "pass" are the forward's).

    scripts/peer_table.py OURS.json PEERS.json [PEERS-2.json ...] [--kernel flash2]
                          [--backends a,b,...] [--pass fwd|bwd|fwd_bwd] [--check]
"""
import argparse
import sys

from attn.schema import PASS_TITLES, PASSES, by_pass, load_results, shape_key, workload

BACKENDS = ["torch_flash", "torch_cudnn", "torch_efficient", "torch_math"]
# per pass: (S from which our kernel must be at least 1.0x the first backend, S up to which it
# must be 2x the best backend and at 60 % of the roofline); None: no such target
TARGETS = {"fwd": (512, 32), "bwd": (1024, None), "fwd_bwd": (None, None)}


def median_ms(t):
    kt = t.get("kernel_timing")
    return kt["median_ms"] if kt else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("peers", nargs="+")
    ap.add_argument("--kernel", default="flash2")
    ap.add_argument("--backends", default=",".join(BACKENDS),
                    help="the peer kernels, by the name their results carry (default: %(default)s)")
    ap.add_argument("--pass", dest="pass_", choices=PASSES, help="only this pass's table (default: every pass measured)")
    ap.add_argument("--check", action="store_true", help="exit status = number of missed targets")
    a = ap.parse_args()
    backends = [b for b in a.backends.split(",") if b]
    if not backends:
        sys.exit("peer_table: --backends names no kernel")

    # a timed test's shape and TFLOP/s (a table row, or a backend's cell of one)
    timed = {"kernel_timing": ["dtype", "head_dim", "causal", "seqlen_q", "seqlen_k", "tflops",
                               "kernel_timing.median_ms"]}

    def load(path, run):
        return load_results(path, "peer_table", run=run, test=["kernel"], when=timed)

    ours_doc = load(a.ours, ["gpu.name", "commit", "date"])
    # the dense matrix only: peers time S_q = S_k problems (version 2's workloads have no peer here)
    ours = {shape_key(t): t for t in ours_doc["tests"]
            if t["kernel"] == a.kernel and median_ms(t) and workload(t) in ("full", "causal")
            and (not a.pass_ or shape_key(t)[0] == a.pass_)}
    if not ours:
        sys.exit(f"peer_table: {a.ours}: no timed tests of kernel '{a.kernel}'"
                 + (f" of pass {a.pass_}" if a.pass_ else ""))
    peers = {}
    for path in a.peers:
        doc = load(path, ["gpu.name"])
        if doc["run"]["gpu"]["name"] != ours_doc["run"]["gpu"]["name"]:
            sys.exit(f"peer_table: {path} is from {doc['run']['gpu']['name']}, "
                     f"{a.ours} from {ours_doc['run']['gpu']['name']}")
        for t in doc["tests"]:
            if median_ms(t):
                peers[(t["kernel"],) + shape_key(t)] = t

    run = ours_doc["run"]
    print(f"{a.kernel} at {run['commit']} on {run['gpu']['name']}, {run['date']}; "
          f"peers: {', '.join(a.peers)}")
    groups = by_pass(sorted(ours), lambda key: key[0])
    missed = []
    for pass_, keys in groups:
        print(f"\n### {PASS_TITLES[pass_]} ({pass_})\n" if len(groups) > 1 else "")
        missed += pass_table(a.kernel, backends, [ours[k] for k in keys], peers)
    print(f"\ntargets: {len(missed)} missed")
    for m in missed:
        print(f"  missed: {m}")
    return len(missed) if a.check else 0


def pass_table(kernel, backends, tests, peers):
    """Prints one pass's table: our tests (of one pass, sorted) against the peers' of the same
    key; returns the targets they missed."""
    short = [b[6:] if b.startswith("torch_") else b for b in backends]
    head = ["shape", f"{kernel} TFLOP/s"] + [f"{b} TFLOP/s" for b in short] + \
           [f"x {b}" for b in short] + ["x best", "roofline"]
    print("| " + " | ".join(head) + " |")
    print("| --- |" + " ---: |" * (len(head) - 1))
    missed = []
    for t in tests:
        key = shape_key(t)
        ms = median_ms(t)
        tf, ratio = [], []
        for b in backends:
            p = peers.get((b,) + key)
            tf.append(f"{p['tflops']:.1f}" if p else "n/a")
            ratio.append(median_ms(p) / ms if p else None)
        measured = [r for r in ratio if r is not None]
        best = min(measured) if measured else None  # against the fastest backend
        roof = t.get("roofline_efficiency")
        s = key[4]
        name = f"{key[1]} d{key[2]} {key[3]} s{s}" + (f"/{key[5]}" if key[5] != s else "")
        cells = [name, f"{t['tflops']:.1f}"] + tf + [f"{r:.2f}" if r else "n/a" for r in ratio] + \
                [f"{best:.2f}" if best else "n/a", f"{roof * 100:.1f}%" if roof is not None else "n/a"]
        print("| " + " | ".join(cells) + " |")
        long_from, short_to = TARGETS[key[0]]
        name = name + ("" if key[0] == "fwd" else f" {key[0]}")
        if long_from is not None and s >= long_from:
            if ratio[0] is None or ratio[0] < 1.0:
                missed.append(f"{name}: {ratio[0] and round(ratio[0], 3)}x {backends[0]} (target 1.0x)")
        elif short_to is not None and s <= short_to:
            if best is None or best < 2.0:
                missed.append(f"{name}: {best and round(best, 3)}x the best backend (target 2x)")
            if roof is None or roof < 0.60:
                missed.append(f"{name}: roofline {roof}")
    return missed


if __name__ == "__main__":
    sys.exit(main())
