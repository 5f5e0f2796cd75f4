#!/usr/bin/env python3
"""The autotuner's results (results/<gpu>/tune/<date>-<commit>-<kernel>.json, written by
attn_tune) as Markdown: the gate table per (dtype, head dim), then one row per shape class
with the default, the search's best, both timed interleaved on the class's benchmark shape
(medians and 95 % CIs), the speedup and whether the best was accepted.

    scripts/tune_table.py results/nvidia_h100_80gb_hbm3/tune/2026-11-23-82b665d-flash2.json.gz

Exit 2 with one line on stderr for a file that is missing or not a tune results file."""
import argparse
import sys

from attn.schema import load_tune

PROG = "tune_table"


def short(cfg, names):
    return " ".join(f"{n}={cfg[n]}" for n in names if n in cfg)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="tune_table.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("tune", help="a tune results file (results/<gpu>/tune/*.json)")
    doc = load_tune(ap.parse_args(argv).tune, PROG)
    names = [t["name"] for t in doc["tunables"]]
    groups, classes = doc["groups"], doc["classes"]
    run = doc.get("run", {})
    print(f"# {doc['kernel']} tuned on {run.get('gpu', '?')} (commit {run.get('commit', '?')}, "
          f"{run.get('date', '?')}; search {doc.get('search_s', 0):.0f} s)\n")
    gates = sorted({g for grp in groups for g in grp["gates"]})
    print("| dtype | head dim | " + " | ".join(gates) + " |")
    print("|---|---|" + "---|" * len(gates))
    for grp in groups:
        print(f"| {grp['dtype']} | {grp['head_dim']} | " + " | ".join(str(grp["gates"].get(g, 0)) for g in gates) + " |")
    print("\n| class | default | best | default ms (CI) | best ms (CI) | speedup | taken |")
    print("|---|---|---|---|---|---|---|")
    for c in classes:
        cls = f"{c['dtype']} d{c['head_dim']} {c['mask']} S={c['seqlen']} ({c['lo']}-{c['hi']})"
        if c.get("untunable"):
            print(f"| {cls} | no tunable path | | | | | |")
            continue
        if "winner" not in c:
            print(f"| {cls} | error: {c.get('error', '?')} | | | | | |")
            continue
        conf = c.get("confirmation")
        if c["winner"] == c["default"] or not conf:
            print(f"| {cls} | {short(c['default'], names)} | (the default) | | | 1 | default |")
            continue
        d, w = conf["default"], conf["winner"]
        print(f"| {cls} | {short(c['default'], names)} | {short(c['winner'], names)} | "
              f"{d['median_ms']:.4g} ({d['ci_lo_ms']:.4g}-{d['ci_hi_ms']:.4g}) | "
              f"{w['median_ms']:.4g} ({w['ci_lo_ms']:.4g}-{w['ci_hi_ms']:.4g}) | {conf['speedup']:.3f} | "
              f"{'**tuned**' if c.get('accepted') else 'default'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
