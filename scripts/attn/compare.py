#!/usr/bin/env python3
"""Compares two benchmark results files, test by test, with their confidence intervals.

    scripts/compare.py A.json B.json [--threshold PERCENT (default 1)] [--allow-different-gpus]

B against A (A is the reference run): SLOWER when B's whole confidence interval of the
median lies above A's by more than the threshold, FASTER when below by more, otherwise SAME
(the difference is within noise or the threshold). Exit status: the number of SLOWER tests
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
        print("| test | A ms [95% CI] | B ms [95% CI] | B/A | verdict |")
        print("| --- | ---: | ---: | ---: | --- |")
        for name in names:
            verdict = compare_one(ta[name]["kernel_timing"], tb[name]["kernel_timing"], thr, name)
            mine[verdict] += 1
            counts[verdict] += 1
        per_pass.append(f"{pass_}: {mine['SAME']} same, {mine['FASTER']} faster, {mine['SLOWER']} slower")
    only = sorted(set(ta) ^ set(tb))
    print(f"\n{counts['SAME']} same, {counts['FASTER']} faster, {counts['SLOWER']} slower "
          f"(threshold {a.threshold:g} %); {len(only)} tests in only one file"
          + (f" ({'; '.join(per_pass)})" if len(per_pass) > 1 else ""))
    return min(counts["SLOWER"], 100)


if __name__ == "__main__":
    sys.exit(main())
