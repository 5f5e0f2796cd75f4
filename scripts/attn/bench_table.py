#!/usr/bin/env python3
"""Prints a benchmark results file as a Markdown table (one row per test), then where the
run's wall time went: each phase of attn_benchmark summed over the tests ("phases_s"). A run
with backward benchmarks gets a table per pass (forward, backward, forward + backward), each
test's TFLOP/s counted by its own pass's FLOPs (the record's "flops").

    scripts/bench_table.py results/<gpu>/benchmarks/<date>-<commit>.json
"""
import argparse
import sys

from attn.schema import PASS_TITLES, by_pass, load_results


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench_table.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("results", help="a benchmark results file")
    path = ap.parse_args(argv).results
    doc = load_results(path, "bench_table", run=["gpu.name", "commit", "dirty", "date", "cudnn_version"],
                       test=["test", "verdict"], when={"kernel_timing": ["kernel_timing.median_ms"]})
    run = doc["run"]
    print(f"{run['gpu']['name']}, commit {run['commit']}{' (dirty)' if run['dirty'] else ''}, "
          f"{run['date']}, cuDNN {run['cudnn_version']}\n")
    groups = by_pass(doc["tests"])
    for i, (pass_, tests) in enumerate(groups):
        if len(groups) > 1:
            print(("\n" if i else "") + f"### {PASS_TITLES[pass_]} ({pass_})\n")
        print_table(tests)
    print("\n" + verdict_counts(doc["tests"]) + "".join(
        f"; {pass_}: {verdict_counts(tests)}" for pass_, tests in groups if len(groups) > 1))
    print_phases(doc["tests"])
    return 0


def verdict_counts(tests):
    counts = {}
    for t in tests:
        counts[t["verdict"]] = counts.get(t["verdict"], 0) + 1
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


def print_table(tests):
    print("| test | kernel ms | TFLOP/s | speedup vs reference | speedup vs cuDNN | roofline | verdict |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for t in tests:
        kt = t.get("kernel_timing")
        base = t.get("baselines", {})
        ref = base.get("reference", {}).get("speedup")
        cud = base.get("cudnn", {})
        cud = cud.get("speedup") if cud.get("available") else None
        roof = t.get("roofline_efficiency")
        print(f"| {t['test']} | {fmt(kt and kt['median_ms'], '.4f')} | {fmt(t.get('tflops'), '.1f')} | "
              f"{fmt(ref, '.2f')} | {fmt(cud, '.3f')} | {fmt(roof and 100 * roof, '.1f')}% | {t['verdict']} |")


def print_phases(tests):
    """Wall seconds per phase over the run, and the slowest tests, from the tests that
    recorded them (results written before phases_s existed have none)."""
    timed = [t for t in tests if t.get("phases_s")]
    if not timed:
        return
    totals = {}
    for t in timed:
        for phase, s in t["phases_s"].items():
            totals[phase] = totals.get(phase, 0.0) + s
    whole = sum(totals.values())
    print(f"\nwall time by phase over {len(timed)} tests ({whole:.1f} s in all):\n")
    print("| phase | seconds | share |")
    print("| --- | ---: | ---: |")
    for phase, s in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {phase} | {s:.1f} | {100 * s / whole:.0f}% |")
    print("\nslowest tests: " + ", ".join(
        f"{t['test']} {sum(t['phases_s'].values()):.1f} s"
        for t in sorted(timed, key=lambda t: -sum(t["phases_s"].values()))[:5]))


if __name__ == "__main__":
    sys.exit(main())
