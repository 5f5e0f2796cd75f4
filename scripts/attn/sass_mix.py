#!/usr/bin/env python3
"""The instruction mix of one or more kernels from Nsight Compute's source page, side by side.

    ncu --set full --import-source yes -o run ...        (one launch of the kernel)
    ncu -i run.ncu-rep --page source --csv --print-source sass > run.csv
    scripts/sass_mix.py LABEL=run.csv [LABEL=other.csv ...] [--top 20] [--sites 10]

Prints Markdown: per opcode (the mnemonic before its first '.'), the executed warp instructions
in millions and the share of warp-stall samples taken at that opcode, for each file; the
--top opcodes by their average share of the instructions. Then, per file, the --sites
instructions with the most stall samples and their three largest stall reasons. This is how
two kernels' overheads compare (a spinning wait loop, descriptor arithmetic, a reduction
chain) where their speed-of-light figures look alike. Exit 2 on a file that is not such an
export, naming it.
"""
import argparse
import collections
import csv
import sys

SOURCE, EXECUTED, SAMPLES = "Source", "Instructions Executed", "Warp Stall Sampling (All Samples)"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def load(path):
    """[(address, instruction, executed, samples, {stall reason: samples})] of one export."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        sys.exit(f"sass_mix: {path}: {e.strerror}")
    head = next((i for i, r in enumerate(rows[:5]) if SOURCE in r and EXECUTED in r), None)
    if head is None:
        print(f"sass_mix: {path}: not an Nsight Compute source export (no '{SOURCE}' and '{EXECUTED}' "
              "columns: ncu -i X.ncu-rep --page source --csv --print-source sass)", file=sys.stderr)
        sys.exit(2)
    names = rows[head]
    col = {n: i for i, n in enumerate(names)}
    stalls = [n for n in names if n.startswith("stall_") and "Not Issued" not in n]
    out = []
    for r in rows[head + 1:]:
        if len(r) < len(names) or not r[col[SOURCE]].strip():
            continue
        out.append((r[col.get("Address", 0)], r[col[SOURCE]].strip(), number(r[col[EXECUTED]]),
                    number(r[col[SAMPLES]]) if SAMPLES in col else 0.0,
                    {s[len("stall_"):]: number(r[col[s]]) for s in stalls}))
    if not out:
        print(f"sass_mix: {path}: no instructions in the export", file=sys.stderr)
        sys.exit(2)
    return out


def opcode(instruction):
    words = instruction.split()
    word = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return word.split(".")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("files", nargs="+", metavar="LABEL=FILE.csv")
    ap.add_argument("--top", type=int, default=20, help="opcodes in the table (default 20)")
    ap.add_argument("--sites", type=int, default=10, help="hottest instructions per file (default 10)")
    a = ap.parse_args()
    runs = []
    for arg in a.files:
        label, _, path = arg.rpartition("=")
        rows = load(path)
        ops, samples = collections.Counter(), collections.Counter()
        for _, ins, ex, smp, _ in rows:
            ops[opcode(ins)] += ex
            samples[opcode(ins)] += smp
        runs.append((label or path, rows, ops, samples, sum(ops.values()), sum(samples.values()) or 1.0))
    share = collections.Counter()
    for _, _, ops, _, total, _ in runs:
        for o, n in ops.items():
            share[o] += n / total if total else 0.0
    print("| opcode | " + " | ".join(r[0] for r in runs) + " |")
    print("|---|" + "---:|" * len(runs))
    print("| all (M) | " + " | ".join(f"{r[4] / 1e6:.1f}" for r in runs) + " |")
    for o, _ in share.most_common(a.top):
        print(f"| {o} | " + " | ".join(f"{r[2][o] / 1e6:.1f} ({100 * r[3][o] / r[5]:.0f} %)" for r in runs) + " |")
    print("\nexecuted warp instructions in millions (share of the stall samples at that opcode)")
    for label, rows, _, _, _, tot in runs:
        print(f"\n{label}: hottest instructions (share of stall samples; top reasons)")
        for addr, ins, _, smp, why in sorted(rows, key=lambda r: -r[3])[:a.sites]:
            top = sorted(why.items(), key=lambda kv: -kv[1])[:3]
            reasons = ", ".join(f"{k} {int(v)}" for k, v in top if v > 0)
            print(f"- {addr[-5:]} {100 * smp / tot:5.2f} % `{ins[:60]}` {reasons}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
