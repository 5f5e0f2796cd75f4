#!/usr/bin/env python3
"""Compares two benchmark results files, test by test, with their confidence intervals.

    scripts/compare.py A.json B.json [--threshold PERCENT (default 1)] [--by time|cudnn]
                       [--allow-different-gpus]

B against A (A is the reference run): SLOWER when B's whole confidence interval of the
median lies above A's by more than the threshold, FASTER when below by more, otherwise SAME
(the difference is within noise or the threshold). --by time (default) compares the kernel's
times: right for two runs on one machine (git bisect). --by cudnn compares each test's time
relative to the cuDNN baseline timed on the same GPU in the same run (its speedup's CI),
which a slower or faster machine moves far less: two H200s ran unchanged code 2-5 % apart, and
the ratios at most 3.7 % (results/nvidia_h200/benchmarks/2026-11-28-c44e40d-nightly.md). A test
without that ratio in both files, or whose two runs timed different cuDNN versions, is compared
by time, its row marked so. Exit status: the number of SLOWER tests
(capped at 100); 2 for bad input. Results from different GPUs are refused unless told.
A file with backward benchmarks (benchmark/bwd/..., benchmark/fwd_bwd/...) gets a table per
pass, forward first, and the counts per pass: a backward is only ever compared with the same
backward (results written before the backward have none: every test a forward's).
"""
import argparse
import math
import sys

from attn.schema import BAD_INPUT, PASS_TITLES, by_pass, fail, load_results, split_name

BOUNDS = ("ci_lo_ms", "median_ms", "ci_hi_ms")


def load(path):
    doc = load_results(path, "compare", run=["gpu.name", "commit"],
                       when={"kernel_timing": ["test", "kernel_timing.median_ms", "kernel_timing.ci_lo_ms",
                                               "kernel_timing.ci_hi_ms"]})
    timed = {t["test"]: t for t in doc["tests"] if t.get("kernel_timing")}
    # a NaN bound fails every comparison, so the verdict would fall through to SAME
    for name, t in timed.items():
        for key in BOUNDS:
            v = t["kernel_timing"][key]
            if not (math.isfinite(v) and v > 0):
                fail("compare", path, f"{name}: 'kernel_timing.{key}' is {v:g}, expected a finite time > 0")
    return doc, timed


def relative_time(t):
    """The test's time / the cuDNN baseline's in its run (from the speedup and its CI) in the
    shape of a kernel_timing; None when the record has no cuDNN speedup with a CI."""
    c = (t.get("baselines") or {}).get("cudnn") or {}
    ci = c.get("speedup_ci")
    if not c.get("available") or not isinstance(ci, list) or len(ci) != 2 or "speedup" not in c:
        return None
    lo, mid, hi = ci[0], c["speedup"], ci[1]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (lo, mid, hi)):
        return None
    return {"ci_lo_ms": 1 / hi, "median_ms": 1 / mid, "ci_hi_ms": 1 / lo}


def compare_one(x, y, thr, name):
    """B's timing `y` against A's `x`: prints the row, returns SLOWER, FASTER or SAME."""
    if y["ci_lo_ms"] > x["ci_hi_ms"] * (1 + thr):
        verdict = "SLOWER"
    elif y["ci_hi_ms"] < x["ci_lo_ms"] * (1 - thr):
        verdict = "FASTER"
    else:
        verdict = "SAME"
    print(f"| {name} | {x['median_ms']:.4f} [{x['ci_lo_ms']:.4f}, {x['ci_hi_ms']:.4f}] | "
          f"{y['median_ms']:.4f} [{y['ci_lo_ms']:.4f}, {y['ci_hi_ms']:.4f}] | "
          f"{y['median_ms'] / x['median_ms']:.3f} | {verdict} |")
    return verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--threshold", type=float, default=1.0, help="percent (default 1)")
    ap.add_argument("--by", choices=("time", "cudnn"), default="time",
                    help="the kernel's times (default), or its times relative to the same run's cuDNN")
    ap.add_argument("--allow-different-gpus", action="store_true")
    a = ap.parse_args()
    if not (math.isfinite(a.threshold) and 0 <= a.threshold < 100):
        print(f"compare: --threshold {a.threshold:g}: expected a finite percent in [0, 100)", file=sys.stderr)
        return BAD_INPUT
    da, ta = load(a.a)
    db, tb = load(a.b)
    ga, gb = da["run"]["gpu"]["name"], db["run"]["gpu"]["name"]
    if ga != gb and not a.allow_different_gpus:
        print(f"compare: {a.a} is from {ga}, {a.b} from {gb}: refusing "
              "(--allow-different-gpus to compare anyway)", file=sys.stderr)
        return 2
    thr = a.threshold / 100.0
    print(f"A: {a.a} ({ga}, commit {da['run']['commit']})\nB: {a.b} ({gb}, commit {db['run']['commit']})")
    # the test name carries the pass (the schema checks that it agrees with the record's)
    groups = by_pass(sorted(set(ta) & set(tb)), lambda name: split_name(name)[0]) or [("fwd", [])]
    counts, per_pass = {"SAME": 0, "FASTER": 0, "SLOWER": 0}, []
    for pass_, names in groups:
        mine = {"SAME": 0, "FASTER": 0, "SLOWER": 0}
        print(f"\n### {PASS_TITLES[pass_]} ({pass_})\n" if len(groups) > 1 else "")
        unit = "ms" if a.by == "time" else "time / cuDNN's"
        print(f"| test | A {unit} [95% CI] | B {unit} [95% CI] | B/A | verdict |")
        print("| --- | ---: | ---: | ---: | --- |")
        for name in names:
            x, y = ta[name]["kernel_timing"], tb[name]["kernel_timing"]
            label = name
            if a.by == "cudnn":
                rx, ry = relative_time(ta[name]), relative_time(tb[name])
                vx, vy = (t["baselines"]["cudnn"].get("version") if r else None for t, r in ((ta[name], rx), (tb[name], ry)))
                if rx and ry and vx == vy:
                    x, y = rx, ry
                else:  # another cuDNN moves every kernel's ratio: the times then
                    label += f" (ms: cuDNN {vx} -> {vy})" if rx and ry else " (ms: no cuDNN ratio)"
            verdict = compare_one(x, y, thr, label)
            mine[verdict] += 1
            counts[verdict] += 1
        per_pass.append(f"{pass_}: {mine['SAME']} same, {mine['FASTER']} faster, {mine['SLOWER']} slower")
    only = sorted(set(ta) ^ set(tb))
    print(f"\n{counts['SAME']} same, {counts['FASTER']} faster, {counts['SLOWER']} slower "
          f"(threshold {a.threshold:g} %{'' if a.by == 'time' else ', by the ratio to cuDNN'}); {len(only)} tests in only one file"
          + (f" ({'; '.join(per_pass)})" if len(per_pass) > 1 else ""))
    return min(counts["SLOWER"], 100)


if __name__ == "__main__":
    sys.exit(main())
