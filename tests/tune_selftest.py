#!/usr/bin/env python3
"""attn_tune's selftest: the tuner on broken_tunable (kernels/broken/broken.cu), whose
tunable `variant` picks 0 none (the default), 1 wrong and faster, 2 a fault, 3 right and
twice as slow. Passes iff variants 1 and 2 are rejected by correctness (2 in its own child:
the tuner goes on), 0 and 3 pass, no class takes 1 or 2, and the tuned file written holds no
broken_tunable line (the default, the fastest correct variant, is kept everywhere).
Exit 0 pass, 1 fail, 77 no GPU (attn_tune's skip)."""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tune", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--tolerance", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    cmd = [a.tune, "--kernel", "broken_tunable", "--plugin", a.plugin, "--dtypes", "fp16", "--head-dims", "64",
           "--masks", "full,causal", "--seqlens", "256", "--tokens", "1024", "--hidden", "256",
           "--tolerance", a.tolerance, "--results-dir", os.path.join(a.out, "results"), "--tuned-dir", a.out,
           "--work-dir", os.path.join(a.out, "work"), "--case-timeout", "60"]
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout, r.stderr, sep="", flush=True)
    if r.returncode == 77:
        return 77
    problems = []
    if r.returncode != 0:
        problems.append(f"attn_tune exited {r.returncode}")
    docs = sorted(glob.glob(os.path.join(a.out, "results", "*", "tune", "*-broken_tunable*.json")))
    if not docs:
        problems.append("no results file")
    else:
        doc = json.load(open(docs[-1]))
        verdicts = {c["config"]["variant"]: c for c in doc["groups"][0]["configs"]}
        for v, want in ((0, "passed"), (1, "correctness"), (2, "correctness"), (3, "passed")):
            got = verdicts[v]["verdict"]
            if got != want:
                problems.append(f"variant {v}: verdict {got}, expected {want} ({verdicts[v].get('detail', '')})")
        for c in doc["classes"]:
            w = c.get("winner", {}).get("variant")
            if w in (1, 2):
                problems.append(f"class {c['mask']} S={c['seqlen']}: the winner is variant {w}")
            if c.get("accepted"):
                problems.append(f"class {c['mask']} S={c['seqlen']}: variant {w} accepted over the default")
            if "winner" not in c:
                problems.append(f"class {c['mask']} S={c['seqlen']}: no search ({c.get('error', '')})")
    tuned = glob.glob(os.path.join(a.out, "*.tuned.txt"))
    if not tuned:
        problems.append("no tuned file")
    else:
        lines = open(tuned[0]).read().splitlines()
        if not any(l.startswith("gpu ") for l in lines):
            problems.append("the tuned file has no 'gpu' line")
        if any(l.startswith("broken_tunable ") for l in lines):
            problems.append("the tuned file takes a configuration of broken_tunable")
    for p in problems:
        print("FAILED:", p)
    print("tune selftest:", "FAILED" if problems else "passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
