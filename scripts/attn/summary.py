#!/usr/bin/env python3
"""Summarizes a CTest JUnit file: counts, why tests were skipped, which checks failed, and
which GPUs ran the tests (the "GPU <n>: ..." line each correctness test prints).

    scripts/summary.py build/junit-correctness.xml
"""
import argparse
import collections
import re
import sys

from attn.schema import junit_cases, load_junit

CHECK_FAILED = re.compile(r"check '(\w+)' failed\n(?:  shape:.*\n)?(?:  seed:.*\n)?(.*)")
SKIP_REASON = re.compile(r"^(SKIPPED: .*|NOT SUPPORTED.*)$", re.M)
GPU_LINE = re.compile(r"^(GPU \d+: .*)$", re.M)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="summary.py", description=__doc__.strip().splitlines()[0])
    ap.add_argument("junit", help="a CTest JUnit file (ctest --output-junit)")
    path = ap.parse_args(argv).junit
    root = load_junit(path, "summary")
    passed, failed, skipped = [], [], []
    skip_reasons = collections.Counter()
    check_failures = collections.Counter()
    gpus = collections.Counter()
    for tc in root.iter("testcase"):
        name = tc.get("name")
        out = tc.findtext("system-out") or ""
        for gpu in set(GPU_LINE.findall(out)):
            gpus[gpu] += 1
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
              ("passed", "failed", "not supported", "skipped", "not run")))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
