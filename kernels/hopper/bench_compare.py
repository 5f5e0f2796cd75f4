#!/usr/bin/env python3
"""Side-by-side table of hopper dev-test benchmark runs (variants.sh's bench.log: "=== NAME round
R" before each `--bench-only` output): per config the median TFLOP/s of each variant over its
rounds and its ratio to BASE's, then the geometric mean of the ratios per head dim and mask.

    kernels/hopper/bench_compare.py bench.log BASE
"""
import collections
import re
import statistics
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    path, base = sys.argv[1], sys.argv[2]
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    order, cur = [], None
    with open(path) as f:
        for line in f:
            m = re.match(r"=== (\S+) round \d+", line)
            if m:
                cur = m.group(1)
                if cur not in order:
                    order.append(cur)
                continue
            m = re.match(r"(\d+)\s+(fp16|bf16)\s+(full|causal)\s+(\d+)\s+\d+\s+[\d.]+\s+([\d.]+)\s*$", line)
            if m and cur:
                runs[cur][m.groups()[:4]].append(float(m.group(5)))
    if base not in runs:
        sys.exit(f"bench_compare: {path}: no timings of '{base}' (variants: {', '.join(order) or 'none'})")
    print("| d dtype mask S | " + " | ".join(order) + " |")
    print("|---|" + "---:|" * len(order))
    ratios = collections.defaultdict(list)
    for key, values in runs[base].items():
        b = statistics.median(values)
        cells = []
        for v in order:
            if key not in runs[v]:
                cells.append("n/a")
                continue
            x = statistics.median(runs[v][key])
            cells.append(f"{x:.3g}" if v == base else f"{x:.3g} ({x / b:.2f})")
            if v != base:
                ratios[(v, key[0], key[2])].append(x / b)
        print(f"| {' '.join(key)} | " + " | ".join(cells) + " |")
    print()
    for (v, d, mask), r in sorted(ratios.items()):
        print(f"{v}: d{d} {mask}: geomean {statistics.geometric_mean(r):.3f} x {base} "
              f"({min(r):.2f}-{max(r):.2f}, {len(r)} configs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
