#!/usr/bin/env python3
"""The harness tests itself: every broken kernel of the fixture plugin must be rejected by
at least one correctness check somewhere in the selftest matrix, and every correct kernel
(the built-ins and the plugin's controls: CONTROLS) must pass all of it.

    scripts/selftest.py --correctness BIN --lister BIN --plugin LIB --builtins a,b
        --shapes shapes/selftest.txt [--features shapes/features.txt] [--head-dims shapes/head_dims.txt]
        [--packed shapes/packed.txt] --tolerance FILE [--out DIR] [--jobs 8] [--kernels a,b] [--shard K/N]

The matrix: shapes/selftest.txt, one attn_correctness process per (dtype, head dim, mask),
and with --features the version-2 features matrix (shapes/features.txt), one process per
kernel running the rows of its pairwise covering array with the correctness checks, as the
features/<kernel> tests do, with --head-dims the head dims beyond those (shapes/head_dims.txt), its
pairwise rows with the correctness checks as head_dims/<kernel> runs them, and with --packed the packed batches (shapes/packed.txt: varlen,
paged, seqused_k), their pairwise rows with the checks 'packed' and 'inputs_unchanged', as
packed/<kernel> does. A kernel without a feature reports those cases not supported, without a
launch. The backward (ABI version 5): the same matrix and the features' pairwise rows again
with the backward's checks (groups backward and bwd_contract), the head dims' rows and the packed
batches with bwd_accuracy (the packed ones also bwd_inputs_unchanged), as the backward/<kernel> tests do; a kernel without bwd
has those cases not supported.

Python never parses a shapes file: attn_shapes --json FILE gives each matrix, and
attn_shapes --checks-json the check table, the one source of the check names.

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

from attn.schema import SHAPES_TOOL_ENV, fail, load_checks, load_shapes

PROG = "selftest"

# the check names come from the check table (attn_shapes --checks-json): the correctness
# group's, then the kernel contract's (stream_order, graph_capture, interleaved and concurrent
# catch the broken kernels whose numbers are right: own stream, host sync, allocation in fwd, a
# shape cached across calls, a workspace shared by every call), then the packed batches' own
# ('packed': only a packed case runs it, and a packed case runs only it and inputs_unchanged)
CONTRACT_GROUPS = ("correctness", "contract")
# the backward's checks and its contract, on the same matrix (backward/<dtype>/d<D>/<mask>) and
# the features' pairwise rows: a kernel without bwd has those cases not supported, unlaunched
BACKWARD_GROUPS = ("backward", "bwd_contract")


def check_names(table, groups):
    return [c["name"] for c in table if c["group"] in groups]


# a timeout fixture, a speed fixture, a resources fixture, a race only racecheck sees
# (sanitize/racecheck), a benchmark cheat (the benchmark's invalid-measurement verdict)
NOT_A_CORRECTNESS_BUG = {"broken_hang", "broken_slow_2x", "broken_smem_too_big", "broken_race",
                         "broken_timing_cheat"}
# correctness bugs that only problems far larger than this matrix's show (batch x heads over
# 65535, a tensor over 2^31 elements, dense or packed and paged): the correctness suite's large
# rows catch them
NEEDS_LARGE_ROWS = {"broken_grid_y", "broken_int32_offsets", "broken_packed_int32_offsets"}
# a bug on a path chosen from a length past this matrix's: the long suite (shapes/long.txt) catches it
NEEDS_LONG_ROWS = {"broken_long_split_lost"}
CONTROLS = {"broken_none", "broken_v2_none", "broken_bwd_none", "broken_cluster_none"}
# the autotuner's fixture: its fwd is the control; its bugs sit behind its tunables, which
# attn_tune's selftest (tests/tune_selftest.py) must reject
TUNER_FIXTURES = {"broken_tunable"}
# fixtures that prove one check: SURVIVED unless that check caught them, whatever else did
# (the inputs fixtures' outputs are right, up to rounding: only inputs_unchanged is there to see them)
MUST_BE_CAUGHT_BY = {"broken_q_scaled_in_place": "inputs_unchanged", "broken_k_scaled_and_back": "inputs_unchanged",
                     "broken_block_table_sanitized": "inputs_unchanged",
                     "broken_bwd_o_cleared": "bwd_inputs_unchanged", "broken_bwd_scale_ignored": "bwd_scale",
                     "broken_shared_workspace": "concurrent", "broken_bwd_shared_row_sums": "bwd_concurrent",
                     "broken_rows_in_vectors": "unaligned", "broken_bwd_grad_rows_in_vectors": "bwd_unaligned",
                     "broken_zero_stride_default": "broadcast", "broken_grid_barrier": "busy_sms",
                     "broken_state_left": "state_unchanged", "broken_bwd_pool_left_current": "bwd_state_unchanged",
                     "broken_call_in_globals": "threads", "broken_bwd_call_in_globals": "bwd_threads"}


def broken_verdict(kernel, counts, n_failed):
    """A broken kernel's verdict and whether the selftest passes it: caught by some check, by its
    own where MUST_BE_CAUGHT_BY names one."""
    check = MUST_BE_CAUGHT_BY.get(kernel)
    if check and not counts.get(check):
        return f"SURVIVED: {check} did not catch it", False
    return ("caught", True) if n_failed else ("SURVIVED: no check caught it", False)

# the axes each group of the selftest splits or lists itself; every other axis of the file
# (harness/axes.def) goes to attn_correctness as --<key with '-' for '_'>
GROUP_AXES = ("dtype", "head_dim", "mask")


def arg(value):
    """One axis value of attn_shapes --json as attn_correctness takes it: a window [l, r] as l:r."""
    if isinstance(value, list):
        return ":".join(arg(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def common_args(doc):
    """The version-2 axes the file gives, its shapes, batch and heads, as attn_correctness options:
    each shape as QxK (seqlen S as SxS, then the shape lines), each sequences line as one packed
    batch "QxK+QxK+..."."""
    args = []
    for key, values in doc["axes"].items():
        if key not in GROUP_AXES and values:
            args += ["--" + key.replace("_", "-"), ",".join(arg(v) for v in values)]
    shapes = [f"{s['seqlen_q']}x{s['seqlen_k']}" for s in doc["shapes"]] + list(doc["sequences"])
    return args + ["--shapes", ",".join(shapes), "--batch", arg(doc["batch"]), "--heads", arg(doc["heads"])]


def read_shapes(doc, checks):
    """The selftest matrix as groups (name, case prefix, checks, arguments): one
    attn_correctness process per (dtype, head dim, mask), its cases the shapes."""
    rest, axes = common_args(doc), doc["axes"]
    return [(f"{dt}/d{arg(d)}/{m}", "", checks, ["--dtype", dt, "--head-dim", arg(d), "--mask", m] + rest)
            for dt in axes["dtype"] for d in axes["head_dim"] for m in axes["mask"]]


def read_features(doc, checks):
    """The features matrix as one group: the rows of the pairwise covering array of every
    axis (--pairwise), with the correctness checks, as the features/<kernel> tests run it."""
    axes = doc["axes"]
    return ("features", "features/", checks,
            ["--pairwise", "--dtype", ",".join(axes["dtype"]), "--head-dim", ",".join(arg(d) for d in axes["head_dim"]),
             "--mask", ",".join(axes["mask"])] + common_args(doc))


def read_head_dims(doc, checks, backward=False):
    """The head dims matrix as one group: its pairwise rows (as read_features), as
    head_dims/<kernel> runs them, or (backward) as backward/head_dims/<kernel> does."""
    what = "backward/head_dims" if backward else "head_dims"
    return (what, what + "/", checks, read_features(doc, [])[3])


def read_packed(doc):
    """The packed batches as one group: the pairwise rows of their axes, check 'packed'."""
    name, prefix, _, args = read_features(doc, [])
    return ("packed", "packed/", ["packed"], args)


def read_packed_backward(doc):
    """The packed batches' backward, as backward/packed/<kernel> runs it (a paged one has no
    backward: not supported): the gradients of sequences that must not see each other."""
    name, prefix, _, args = read_features(doc, [])
    return ("backward/packed", "backward/packed/", ["bwd_accuracy", "bwd_inputs_unchanged"], args)


def select_kernels(kernels, only, shard=None):
    """The (kernel, plugin) pairs --kernels names (all without it), then of those the i-th with
    i % N == K for --shard K/N; a name the selftest does not run is an error, not an empty verdict."""
    if only:
        names = only.split(",")
        unknown = sorted(set(names) - {k for k, _ in kernels})
        if unknown:
            fail(PROG, "--kernels", f"not a built-in or a broken kernel of the selftest: {', '.join(unknown)}")
        kernels = [(k, p) for k, p in kernels if k in names]
    if shard:
        m = re.fullmatch(r"(\d+)/(\d+)", shard)
        if not m or not 0 <= int(m[1]) < int(m[2]):
            fail(PROG, "--shard", f"'{shard}' is not K/N with 0 <= K < N")
        kernels = kernels[int(m[1])::int(m[2])]
    return kernels


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
            failed = [c for c in failed_what.split(",") if c in a.all_checks] or ["crash_or_timeout"]
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
    ap.add_argument("--head-dims", help="the head dims beyond the other matrices' (shapes/head_dims.txt), run pairwise")
    ap.add_argument("--packed", help="the packed batches (shapes/packed.txt), run pairwise")
    ap.add_argument("--builtins", default="")
    ap.add_argument("--kernels", help="only these of the built-ins and the plugin's kernels (comma-separated): "
                    "re-run one fixture; the verdict covers only them")
    ap.add_argument("--shard", help="K/N: of those kernels the i-th with i %% N == K (a selftest split over N runs, "
                    "each its own verdict)")
    ap.add_argument("--out", default=".")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per group of cases")
    ap.add_argument("--shapes-tool", help="attn_shapes, which parses the shapes files and prints the check table "
                    f"(default ${SHAPES_TOOL_ENV}, else <build>/tools/attn_shapes beside --correctness's build)")
    ap.add_argument("--build-dir", help="the build folder holding tools/attn_shapes")
    a = ap.parse_args()
    build = a.build_dir or os.path.dirname(os.path.dirname(os.path.abspath(a.correctness)))
    table = load_checks(PROG, a.shapes_tool, build)
    correctness = check_names(table, ("correctness",))
    a.all_checks = check_names(table, CONTRACT_GROUPS + ("packed",))
    shapes = lambda path: load_shapes(path, PROG, a.shapes_tool, build)  # noqa: E731
    backward = check_names(table, BACKWARD_GROUPS)
    a.all_checks += backward
    groups = read_shapes(shapes(a.shapes), check_names(table, CONTRACT_GROUPS)) + (
        [read_features(shapes(a.features), correctness)] if a.features else []) + (
        [read_head_dims(shapes(a.head_dims), correctness)] if a.head_dims else []) + (
        [read_packed(shapes(a.packed))] if a.packed else []) + [
        ("backward/" + what, "backward/", backward, args) for what, _, _, args in read_shapes(shapes(a.shapes), [])] + (
        [("backward/features", "backward/features/", check_names(table, ("backward",)),
          read_features(shapes(a.features), [])[3])] if a.features else []) + (
        [read_head_dims(shapes(a.head_dims), ["bwd_accuracy"], backward=True)] if a.head_dims else []) + (
        [read_packed_backward(shapes(a.packed))] if a.packed else [])
    listed = subprocess.run([a.lister, a.plugin], capture_output=True, text=True)
    if listed.returncode:
        sys.exit(f"selftest: {listed.stderr.strip()}")
    elsewhere = NOT_A_CORRECTNESS_BUG | NEEDS_LARGE_ROWS | NEEDS_LONG_ROWS | TUNER_FIXTURES
    broken = [k for k in listed.stdout.split() if k not in elsewhere]
    correct = [k for k in a.builtins.split(",") if k] + [k for k in broken if k in CONTROLS]
    kernels = [(k, None) for k in a.builtins.split(",") if k] + [(k, a.plugin) for k in broken]
    kernels = select_kernels(kernels, a.kernels, a.shard)

    jobs = [(k, p, g) for k, p in kernels for g in groups]
    probe = run_group(a, *jobs[0])  # no GPU: every group would only say so
    if probe[1] == 77 and "SKIPPED" in probe[2]:
        print(probe[2].strip().splitlines()[-1])
        return 77
    results = {}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for i, ((k, _, _), (cases, _, _)) in enumerate(zip(jobs, pool.map(lambda j: run_group(a, *j), jobs))):
            results.setdefault(k, []).extend(cases)
            if (i + 1) % len(groups) == 0:  # its last group: a run stopped early still shows how far it got
                print(f"selftest: {k}: {sum(1 for _, f in results[k] if f)}/{len(results[k])} cases failed "
                      f"({i + 1}/{len(jobs)} groups done)", flush=True)
    columns = a.all_checks + ["crash_or_timeout"]
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
            verdict, caught = broken_verdict(k, counts, n_failed)
            ok &= caught
        matrix[k] = {"cases": len(rs), "cases_failed": n_failed, "checks": counts, "verdict": verdict,
                     "failed_tests": [n for n, f in rs if f]}
        lines.append(f"| {k} | {n_failed}/{len(rs)} | " + " | ".join(str(counts[c]) for c in columns) + f" | {verdict} |")
    silent = [c for c in a.all_checks if not any(matrix[k]["checks"][c] for k in matrix if k in broken and k not in CONTROLS)]
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
