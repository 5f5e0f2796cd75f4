#!/usr/bin/env python3
"""Prints a benchmark results file as a Markdown table (one row per test).

    scripts/bench_table.py results/<gpu>/<date>-<commit>.json
"""
import json
import sys


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def main(path):
    with open(path) as f:
        doc = json.load(f)
    run = doc["run"]
    print(f"{run['gpu']['name']}, commit {run['commit']}{' (dirty)' if run['dirty'] else ''}, "
          f"{run['date']}, cuDNN {run['cudnn_version']}\n")
    print("| test | kernel ms | TFLOP/s | speedup vs reference | speedup vs cuDNN | roofline | verdict |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for t in doc["tests"]:
        kt = t.get("kernel_timing")
        base = t.get("baselines", {})
        ref = base.get("reference", {}).get("speedup")
        cud = base.get("cudnn", {})
        cud = cud.get("speedup") if cud.get("available") else None
        roof = t.get("roofline_efficiency")
        print(f"| {t['test']} | {fmt(kt and kt['median_ms'], '.4f')} | {fmt(t.get('tflops'), '.1f')} | "
              f"{fmt(ref, '.2f')} | {fmt(cud, '.3f')} | {fmt(roof and 100 * roof, '.1f')}% | {t['verdict']} |")
    counts = {}
    for t in doc["tests"]:
        counts[t["verdict"]] = counts.get(t["verdict"], 0) + 1
    print("\n" + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    main(sys.argv[1])
