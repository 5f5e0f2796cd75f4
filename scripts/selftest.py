#!/usr/bin/env python3
"""The harness tests itself: every broken kernel of the fixture plugin must be rejected by
at least one correctness check somewhere in the selftest matrix, and every correct kernel
(the built-ins and the plugin's controls, broken_none and broken_v2_none) must pass all of it.

    scripts/selftest.py --correctness BIN --lister BIN --plugin LIB --builtins a,b
        --shapes shapes/selftest.txt [--features shapes/features.txt]
        [--packed shapes/packed.txt] --tolerance FILE [--out DIR] [--jobs 8]

The matrix: shapes/selftest.txt, one attn_correctness process per (dtype, head dim, mask),
and with --features the version-2 features matrix (shapes/features.txt), one process per
kernel running the rows of its pairwise covering array with the correctness checks, as the
features/<kernel> tests do, and with --packed the packed batches (shapes/packed.txt: varlen,
paged, seqused_k), their pairwise rows with the check 'packed', as packed/<kernel> does. A
kernel without a feature reports those cases not supported, without a launch.

Prints the kill matrix (kernel x check: in how many cases that check failed) and
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
CORRECTNESS_CHECKS = ["accuracy", "large_inputs", "unwritten", "guard_bands", "determinism", "scale", "layouts",
                      "lse"]
CHECKS = CORRECTNESS_CHECKS + ["stream_order", "graph_capture", "interleaved"]
# the kill matrix's columns: every check, and the packed batches' own ('packed': only a packed
# case runs it, and a packed case runs only it)
ALL_CHECKS = CHECKS + ["packed"]
# a timeout fixture, a speed fixture, a resources fixture, a race only racecheck sees
# (sanitize/racecheck), a benchmark cheat (the benchmark's invalid-measurement verdict)
NOT_A_CORRECTNESS_BUG = {"broken_hang", "broken_slow_2x", "broken_smem_too_big", "broken_race",
                         "broken_timing_cheat"}
# correctness bugs that only problems far larger than this matrix's show (batch x heads over
# 65535, a tensor over 2^31 elements): the correctness suite's large rows catch them
NEEDS_LARGE_ROWS = {"broken_grid_y", "broken_int32_offsets"}
# a bug on a path chosen from a length past this matrix's: the long suite (shapes/long.txt) catches it
NEEDS_LONG_ROWS = {"broken_long_split_lost"}
CONTROLS = {"broken_none", "broken_v2_none"}
# the autotuner's fixture: its fwd is the control; its bugs sit behind its tunables, which
# attn_tune's selftest (tests/tune_selftest.py) must reject
TUNER_FIXTURES = {"broken_tunable"}

# a shapes file's keys that list values (batch and heads take one); the version-2 axes as
# attn_correctness takes them
LIST_KEYS = ("dtype", "head_dim", "mask", "seqlen", "heads_k", "window", "softcap", "page_size")
V2_OPTIONS = {"heads_k": "--heads-k", "window": "--window", "softcap": "--softcap", "page_size": "--page-size"}


def read_matrix(path):
    """A shapes file (correctness.txt's format, head dims D or DxDV) as its axes {key: [values]}
    and its shapes ["QxK", ...]: each seqlen S as SxS, then the shape lines, then each
    sequences line as one packed batch "QxK+QxK+..."."""
    axes, shapes = {}, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            w = line.split("#")[0].split()
            if not w:
                continue
            if w[0] == "shape":
                shapes.append(f"{w[1]}x{w[2]}")
            elif w[0] == "sequences":
                shapes.append("+".join(w[1:]))
            elif w[0] in LIST_KEYS + ("batch", "heads"):
                axes[w[0]] = w[1:]
            else:
                sys.exit(f"{path}:{n}: unexpected '{w[0]}'")
    return axes, [f"{s}x{s}" for s in axes.get("seqlen", [])] + shapes


def common_args(axes, shapes):
    """The version-2 axes the file gives, its shapes, batch and heads, as attn_correctness options."""
    args = []
    for key, opt in V2_OPTIONS.items():
        if key in axes:
            args += [opt, ",".join(axes[key])]
    return args + ["--shapes", ",".join(shapes), "--batch", axes["batch"][0], "--heads", axes["heads"][0]]


def read_shapes(path):
    """The selftest matrix as groups (name, case prefix, checks, arguments): one
    attn_correctness process per (dtype, head dim, mask), its cases the shapes."""
    axes, shapes = read_matrix(path)
    rest = common_args(axes, shapes)
    return [(f"{dt}/d{d}/{m}", "", CHECKS, ["--dtype", dt, "--head-dim", d, "--mask", m] + rest)
            for dt in axes["dtype"] for d in axes["head_dim"] for m in axes["mask"]]


def read_features(path):
    """The features matrix as one group: the rows of the pairwise covering array of every
    axis (--pairwise), with the correctness checks, as the features/<kernel> tests run it."""
    axes, shapes = read_matrix(path)
    return ("features", "features/", CORRECTNESS_CHECKS,
            ["--pairwise", "--dtype", ",".join(axes["dtype"]), "--head-dim", ",".join(axes["head_dim"]),
             "--mask", ",".join(axes["mask"])] + common_args(axes, shapes))


def read_packed(path):
    """The packed batches as one group: the pairwise rows of their axes, check 'packed'."""
    name, prefix, _, args = read_features(path)
    return ("packed", "packed/", ["packed"], args)


CASE_LINE = re.compile(r"^CASE (\S+) (passed|FAILED|NOT_SUPPORTED|SKIPPED|NOT_RUN)(?: (\S+))?", re.M)


def run_group(a, kernel, plugin, group):
    """One group's cases: [(case name, failed checks)] and the process's output."""
    what, prefix, checks, args = group
    name = f"selftest/{kernel}/{what}"
    cmd = [a.correctness, "--name", name, "--kernel", kernel] + args + [
           "--tolerance", a.tolerance, "--checks", ",".join(checks)] + (["--plugin", plugin] if plugin else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                           env=dict(os.environ, CK_FORK="no"))
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired:
        out, rc = "timed out", -1
    cases = []
    for label, verdict, failed_what in CASE_LINE.findall(out):
        failed = []
        if verdict == "FAILED":
            failed = [c for c in failed_what.split(",") if c in ALL_CHECKS] or ["crash_or_timeout"]
        elif verdict == "NOT_RUN":
            failed = ["crash_or_timeout"]
        # selftest/<kernel>/<dtype>/d<D>/<mask>/<shape>, or selftest/<kernel>/features/<label>
        cases.append((f"selftest/{kernel}/{prefix}{label}", failed))
    if rc not in (0, 77) and not any(f for _, f in cases):
        cases.append((name, ["crash_or_timeout"]))
    return cases, rc, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    for opt in ("--correctness", "--lister", "--plugin", "--shapes", "--tolerance"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--features", help="the version-2 features matrix (shapes/features.txt), run pairwise")
    ap.add_argument("--packed", help="the packed batches (shapes/packed.txt), run pairwise")
    ap.add_argument("--builtins", default="")
    ap.add_argument("--out", default=".")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per group of cases")
    a = ap.parse_args()
    groups = read_shapes(a.shapes) + ([read_features(a.features)] if a.features else []) + (
        [read_packed(a.packed)] if a.packed else [])
    listed = subprocess.run([a.lister, a.plugin], capture_output=True, text=True)
    if listed.returncode:
        sys.exit(f"selftest: {listed.stderr.strip()}")
    elsewhere = NOT_A_CORRECTNESS_BUG | NEEDS_LARGE_ROWS | NEEDS_LONG_ROWS | TUNER_FIXTURES
    broken = [k for k in listed.stdout.split() if k not in elsewhere]
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
    columns = ALL_CHECKS + ["crash_or_timeout"]
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
    silent = [c for c in ALL_CHECKS if not any(matrix[k]["checks"][c] for k in broken if k not in CONTROLS)]
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
