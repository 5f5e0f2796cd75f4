#!/usr/bin/env python3
"""Writes a CTest resource spec file for this host's GPUs (from nvidia-smi), so that
`ctest --resource-spec-file FILE -j N` spreads GPU tests over all GPUs: a correctness test
takes one slot of a GPU, a benchmark all of one GPU's slots.

    scripts/resource_spec.py [--slots 8] [-o build/resources.json]
"""
import argparse
import json
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--slots", type=int, default=8, help="slots per GPU (the build's ATTN_GPU_SLOTS)")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"resource_spec: nvidia-smi failed ({e}): no GPUs to describe", file=sys.stderr)
        return 77
    ids = [line.strip() for line in out.splitlines() if line.strip()]
    spec = {"version": {"major": 1, "minor": 0},
            "local": [{"gpus": [{"id": i, "slots": a.slots} for i in ids]}]}
    text = json.dumps(spec, indent=1) + "\n"
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
        print(f"resource_spec: {len(ids)} GPUs x {a.slots} slots -> {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
