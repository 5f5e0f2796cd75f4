#!/usr/bin/env python3
"""Summarizes a CTest JUnit file: counts, why tests were skipped, which checks failed, and
which GPUs ran the tests (the "GPU <n>: ..." line each correctness test prints).

    scripts/summary.py build/junit-correctness.xml [--require-gpu] [--by-kernel] [--known-candidates]
    scripts/summary.py PART.xml... --merged OUT.xml   (a run's parts: one summary, one file)

--known-candidates prints, for python/kernels/known_deviations.txt, a commented-out entry per
failed case of a plugin's test (label plugin; the checks it failed), to be reviewed, given its
cause and uncommented (a crash or a hang is never one: the child's verdict, not a check's).

--by-kernel adds a Markdown table: a row per kernel, a column per label (the test name's first
part; sanitize/<tool> for the sanitizers, backward/features, backward/packed and
backward/contract for the backward's own, benchmark/bwd and benchmark/fwd_bwd for the
backward's benchmarks), each cell its cases "passed / not supported /
failed" (a test without CASE lines counts as one case).

When no test ran on a GPU (every one skipped, or only host-side tests and fixtures), the last
line says so in capitals; with --require-gpu (GPU CI runners) that is a failure: exit status 3.
"""
import argparse
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

from attn.schema import CASE_LINE, CASE_WORDS, junit_cases, load_junit, split_name

CHECK_FAILED = re.compile(r"check '(\w+)' failed\n(?:  shape:.*\n)?(?:  seed:.*\n)?(.*)")
SKIP_REASON = re.compile(r"^(SKIPPED: .*|NOT SUPPORTED.*)$", re.M)
GPU_LINE = re.compile(r"^(GPU \d+: .*)$", re.M)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="summary.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("junit", nargs="+", help="CTest JUnit files (ctest --output-junit): several are one run's parts")
    ap.add_argument("--merged", metavar="OUT", help="also write them as one JUnit file, whole or not at all")
    ap.add_argument("--require-gpu", action="store_true", help="exit 3 when no test ran on a GPU")
    ap.add_argument("--by-kernel", action="store_true", help="a table of cases per kernel and label")
    ap.add_argument("--known-candidates", action="store_true",
                    help="commented-out known-deviation entries for the plugins' failed cases")
    args = ap.parse_args(argv)
    path = ", ".join(args.junit)
    root = load_all(args.junit, args.merged)
    passed, failed, skipped = [], [], []
    skip_reasons = collections.Counter()
    check_failures = collections.Counter()
    gpus = collections.Counter()
    gpu_tests = 0  # tests that ran (not skipped) and named the GPU they ran on
    for tc in root.iter("testcase"):
        name = tc.get("name")
        out = tc.findtext("system-out") or ""
        for gpu in set(GPU_LINE.findall(out)):
            gpus[gpu] += 1
        ran = tc.find("skipped") is None and tc.get("status") not in ("notrun", "disabled")
        gpu_tests += bool(ran and GPU_LINE.search(out))
        if tc.find("failure") is not None or tc.get("status") == "fail":
            checks = CHECK_FAILED.findall(out)
            for check, _ in checks:
                check_failures[check] += 1
            detail = "; ".join(f"{c}: {d.strip()}" for c, d in checks)
            if not detail:  # crashed, timed out, or a harness error: show its last line
                lines = [l for l in out.strip().splitlines() if l.strip()]
                detail = lines[-1] if lines else "(no output: crashed or timed out)"
            failed.append((name, detail))
        elif tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled"):
            m = SKIP_REASON.search(out)
            skip_reasons[m.group(1) if m else "(no reason printed)"] += 1
            skipped.append(name)
        else:
            passed.append(name)
    total = len(passed) + len(failed) + len(skipped)
    print(f"summary of {path}: {total} tests: {len(passed)} passed, {len(failed)} failed, "
          f"{len(skipped)} skipped")
    cases, failed_cases = junit_cases(root)
    if cases:
        print(f"  cases in them: {sum(cases.values())}: " + ", ".join(f"{cases[w]} {w}" for w in
              ("passed", "failed", "not supported", "skipped", "not run")) +
              (f"; {cases['known deviation']} known deviations of kernels not ours (they pass their tests)"
               if cases["known deviation"] else ""))
        for name in failed_cases[:50]:
            print(f"    failed case: {name}")
    for gpu, n in sorted(gpus.items()):
        print(f"  ran on {gpu}: {n} tests")
    for reason, n in skip_reasons.most_common():
        print(f"  skipped ({n}): {reason}")
    if failed:
        print("  failed tests:")
        for name, detail in failed:
            print(f"    {name}: {detail[:300]}")
        if check_failures:
            print("  failures per check: " +
                  ", ".join(f"{c} {n}" for c, n in check_failures.most_common()))
    if args.by_kernel:
        by_kernel_table(root)
    if args.known_candidates:
        known_candidates(root)
    if not gpu_tests:
        print(f"NO GPU TEST RAN: none of the {total} tests ran on a GPU (skipped, or host-side only): "
              "these results say nothing about the kernels" +
              (" (--require-gpu: failing)" if args.require_gpu else "; ATTN_REQUIRE_GPU=1 makes this a failure"))
        return 3 if args.require_gpu else 0
    return 0


def load_all(paths, merged):
    """The JUnit files' root, or their suites under one <testsuites> (the parts of a run in
    slices: scripts/nightly.sh); with `merged`, that document written there (a temporary file
    renamed: whole or not at all)."""
    roots = [load_junit(p, "summary") for p in paths]
    if len(roots) == 1 and not merged:
        return roots[0]
    root = ET.Element("testsuites")
    for r in roots:
        root.extend(list(r) if r.tag == "testsuites" else [r])
    if merged:
        tmp = f"{merged}.tmp{os.getpid()}"
        ET.ElementTree(root).write(tmp, encoding="UTF-8", xml_declaration=True)
        os.replace(tmp, merged)
    return root


def label_and_kernel(name):
    """A test's label (sanitize/<tool> and backward/<features, packed or contract>: two parts;
    backward/<kernel>/<dtype>/d<D>: backward; else the first part, a benchmark's with its pass)
    and its kernel; None for a name without a kernel (benchmark/prepare)."""
    pass_, parts = split_name(name or "")
    n = 2 if parts[0] == "sanitize" or (parts[0] == "backward" and parts[1:2] in (["features"], ["packed"], ["contract"])) else 1
    if len(parts) <= n:
        return None
    return "/".join(parts[:n]) + ("" if pass_ == "fwd" else f"/{pass_}"), parts[n]


CASE_FAILED_CHECKS = re.compile(r"^CASE (\S+) FAILED ([a-z_]+(?:,[a-z_]+)*) \(", re.M)


def known_candidates(root):
    """A commented-out known-deviations entry per failed case of a plugin's test."""
    seen = set()
    print("\n# candidates for python/kernels/known_deviations.txt: review each, give its cause, uncomment")
    for tc in root.iter("testcase"):
        labels = {p.get("value") for p in tc.iter("property") if p.get("name") == "cmake_labels"}
        named = label_and_kernel(tc.get("name"))
        if not named or not any("plugin" in (v or "").split(";") for v in labels):
            continue
        for case, checks in CASE_FAILED_CHECKS.findall(tc.findtext("system-out") or ""):
            if (named[1], case, checks) not in seen:
                seen.add((named[1], case, checks))
                print(f"# {named[1]} {case} {checks} <why> (seen in {tc.get('name')})")


def by_kernel_table(root):
    """Cases per kernel and label: passed / not supported / failed."""
    cells = collections.defaultdict(collections.Counter)
    labels, kernels = [], []
    for tc in root.iter("testcase"):
        named = label_and_kernel(tc.get("name"))
        if not named:
            continue
        label, kernel = named
        labels += [label] if label not in labels else []
        kernels += [kernel] if kernel not in kernels else []
        verdicts = [CASE_WORDS[v] for _, v in CASE_LINE.findall(tc.findtext("system-out") or "")]
        if not verdicts:  # a test without cases: its own outcome
            skipped = tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled")
            failed = tc.find("failure") is not None or tc.get("status") == "fail"
            verdicts = ["failed" if failed else "not supported" if skipped else "passed"]
        cells[(kernel, label)].update(verdicts)
    print("\n| kernel | " + " | ".join(labels) + " |")
    print("| --- |" + " --- |" * len(labels))
    for k in kernels:
        row = []
        for label in labels:
            c = cells.get((k, label))
            known = f" (+{c['known deviation']} known)" if c and c['known deviation'] else ""
            row.append(f"{c['passed']} / {c['not supported'] + c['skipped']} / {c['failed'] + c['not run']}{known}"
                       if c else "")
        print(f"| {k} | " + " | ".join(row) + " |")
    print("\ncells: cases passed / not supported (or skipped) / failed (or not run)")


if __name__ == "__main__":
    sys.exit(main())
