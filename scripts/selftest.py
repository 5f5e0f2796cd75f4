#!/usr/bin/env python3
"""The harness tests itself: every broken kernel of the fixture plugin must be rejected by
at least one correctness check somewhere in the selftest matrix, and every correct kernel
(the built-ins and the plugin's control, broken_none) must pass all of it.

    scripts/selftest.py --correctness BIN --lister BIN --plugin LIB --builtins a,b
        --shapes shapes/selftest.txt --tolerance FILE [--out DIR] [--jobs 8]

Prints the kill matrix (broken kernel x check: in how many shapes that check failed) and
writes it to DIR/selftest-kill-matrix.{json,md}. Exit 0 when every broken kernel is caught
and every correct kernel is clean, 1 otherwise, 77 without a GPU.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

# the correctness checks, then the kernel contract's (stream_order, graph_capture and
# interleaved catch the broken kernels whose numbers are right: own stream, host sync,
# allocation in fwd, a shape cached across calls)
CHECKS = ["accuracy", "large_inputs", "unwritten", "guard_bands", "determinism", "scale", "layouts", "lse",
          "stream_order", "graph_capture", "interleaved"]
# a timeout fixture, a speed fixture, a resources fixture, a race only racecheck sees
# (sanitize/racecheck), a benchmark cheat (the benchmark's invalid-measurement verdict)
NOT_A_CORRECTNESS_BUG = {"broken_hang", "broken_slow_2x", "broken_smem_too_big", "broken_race",
                         "broken_timing_cheat"}
# correctness bugs that only problems far larger than this matrix's show (batch x heads over
# 65535, a tensor over 2^31 elements): the correctness suite's large rows catch them
NEEDS_LARGE_ROWS = {"broken_grid_y", "broken_int32_offsets"}
CONTROLS = {"broken_none"}


def read_shapes(path):
    """The matrix as groups (dtype, head_dim, mask, shapes "QxK,...", batch, heads): one
    attn_correctness process each, its cases the shapes."""
    axes, shapes = {}, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            w = line.split("#")[0].split()
            if not w:
                continue
            if w[0] == "shape":
                shapes.append(f"{w[1]}x{w[2]}")
            elif w[0] in ("dtype", "head_dim", "mask", "batch", "heads", "seqlen"):
                axes[w[0]] = w[1:]
            else:
                sys.exit(f"{path}:{n}: unexpected '{w[0]}'")
    shapes = [f"{s}x{s}" for s in axes.get("seqlen", [])] + shapes
    return [(dt, d, m, ",".join(shapes), axes["batch"][0], axes["heads"][0])
            for dt in axes["dtype"] for d in axes["head_dim"] for m in axes["mask"]]


CASE_LINE = re.compile(r"^CASE (\S+) (passed|FAILED|NOT_SUPPORTED|SKIPPED|NOT_RUN)(?: (\S+))?", re.M)


def run_group(a, kernel, plugin, group):
    """One group's cases: [(case name, failed checks)] and the process's output."""
    dt, d, m, shapes, batch, heads = group
    name = f"selftest/{kernel}/{dt}/d{d}/{m}"
    cmd = [a.correctness, "--name", name, "--kernel", kernel, "--dtype", dt, "--head-dim", d, "--mask", m,
           "--shapes", shapes, "--batch", batch, "--heads", heads,
           "--tolerance", a.tolerance, "--checks", ",".join(CHECKS)] + (["--plugin", plugin] if plugin else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                           env=dict(os.environ, CK_FORK="no"))
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired:
        out, rc = "timed out", -1
    cases = []
    for label, verdict, what in CASE_LINE.findall(out):
        failed = []
        if verdict == "FAILED":
            failed = [c for c in what.split(",") if c in CHECKS] or ["crash_or_timeout"]
        elif verdict == "NOT_RUN":
            failed = ["crash_or_timeout"]
        cases.append((f"{name}/{label.split('/')[-1]}", failed))
    if rc not in (0, 77) and not any(f for _, f in cases):
        cases.append((name, ["crash_or_timeout"]))
    return cases, rc, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    for opt in ("--correctness", "--lister", "--plugin", "--shapes", "--tolerance"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--builtins", default="")
    ap.add_argument("--out", default=".")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per group of cases")
    a = ap.parse_args()
    groups = read_shapes(a.shapes)
    listed = subprocess.run([a.lister, a.plugin], capture_output=True, text=True)
    if listed.returncode:
        sys.exit(f"selftest: {listed.stderr.strip()}")
    broken = [k for k in listed.stdout.split() if k not in NOT_A_CORRECTNESS_BUG | NEEDS_LARGE_ROWS]
    correct = [k for k in a.builtins.split(",") if k] + [k for k in broken if k in CONTROLS]
    kernels = [(k, None) for k in a.builtins.split(",") if k] + [(k, a.plugin) for k in broken]

    jobs = [(k, p, g) for k, p in kernels for g in groups]
    probe = run_group(a, *jobs[0])  # no GPU: every group would only say so
    if probe[1] == 77 and "SKIPPED" in probe[2]:
        print(probe[2].strip().splitlines()[-1])
        return 77
    results = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for (k, _, _), (cases, _, _) in zip(jobs, pool.map(lambda j: run_group(a, *j), jobs)):
            results.setdefault(k, []).extend(cases)
    columns = CHECKS + ["crash_or_timeout"]
    matrix, ok = {}, True
    lines = ["| kernel | cases failed | " + " | ".join(columns) + " | verdict |",
             "| --- | ---: | " + " | ".join("---:" for _ in columns) + " | --- |"]
    for k, _ in kernels:
        rs = results[k]
        counts = {c: sum(c in f for _, f in rs) for c in columns}
        n_failed = sum(1 for _, f in rs if f)
        if k in correct:
            verdict = "clean (correct kernel)" if n_failed == 0 else "FALSE ALARM: a correct kernel failed"
            ok &= n_failed == 0
        else:
            verdict = "caught" if n_failed else "SURVIVED: no check caught it"
            ok &= n_failed > 0
        matrix[k] = {"cases": len(rs), "cases_failed": n_failed, "checks": counts, "verdict": verdict,
                     "failed_tests": [n for n, f in rs if f]}
        lines.append(f"| {k} | {n_failed}/{len(rs)} | " + " | ".join(str(counts[c]) for c in columns) + f" | {verdict} |")
    silent = [c for c in CHECKS if not any(matrix[k]["checks"][c] for k in broken if k not in CONTROLS)]
    table = "\n".join(lines)
    print(table)
    print(f"\nchecks that caught nothing: {', '.join(silent) or 'none'}")
    print("selftest: " + ("PASSED: every broken kernel caught, every correct kernel clean" if ok else "FAILED"))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "selftest-kill-matrix.json.tmp"), "w") as f:
        json.dump({"matrix": matrix, "checks_that_caught_nothing": silent, "passed": ok}, f, indent=1)
    os.replace(os.path.join(a.out, "selftest-kill-matrix.json.tmp"), os.path.join(a.out, "selftest-kill-matrix.json"))
    with open(os.path.join(a.out, "selftest-kill-matrix.md.tmp"), "w") as f:
        f.write(table + f"\n\nchecks that caught nothing: {', '.join(silent) or 'none'}\n")
    os.replace(os.path.join(a.out, "selftest-kill-matrix.md.tmp"), os.path.join(a.out, "selftest-kill-matrix.md"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
