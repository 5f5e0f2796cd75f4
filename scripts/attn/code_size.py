#!/usr/bin/env python3
"""Functions and files over the size limits of the harness's own code (ARCHITECTURE.md):
a C or CUDA function in harness/, suites/, tools/, baselines/ or reference/ at most
--max-function lines (its signature to its closing brace), a file at most --max-file lines.
Kernels are exempt (a kernel's main loop is one function by design).

  scripts/code_size.py [--max-function 80] [--max-file 800] [ROOT]

Prints one line per function or file over its limit ("path:line: name: N lines") and exits
1 when there is any, 0 when there is none, 2 on bad arguments."""
import argparse
import os
import re
import sys

from attn import ROOT

FOLDERS = ("harness", "suites", "tools", "baselines", "reference")
SOURCES = (".c", ".cu", ".h", ".cuh")

# A function definition starts at a line beginning with a type at column 0 and ends at the
# '}' at column 0 that closes it; prototypes end in ';' before any '{'.
_START = re.compile(r"^(?!static_assert)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(")


def functions(lines):
    """(name, first line, line count) of each top-level function definition."""
    out, i = [], 0
    while i < len(lines):
        m = _START.match(lines[i])
        if not m or lines[i].rstrip().endswith(";") or m.group(1) in ("if", "for", "while", "switch"):
            i += 1
            continue
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j == len(lines) or "{" not in lines[j]:
            i = j + 1
            continue
        k = j
        while k < len(lines) and not lines[k].startswith("}"):
            k += 1
        out.append((m.group(1), i + 1, k - i + 1))
        i = k + 1
    return out


def over_limits(root, max_function, max_file):
    found = []
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for f in sorted(files):
                if not f.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().split("\n")
                if len(lines) - 1 > max_file:
                    found.append(f"{rel}:1: file: {len(lines) - 1} lines (limit {max_file})")
                for name, line, n in functions(lines):
                    if n > max_function:
                        found.append(f"{rel}:{line}: {name}: {n} lines (limit {max_function})")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-file", type=int, default=800)
    ap.add_argument("root", nargs="?", default=ROOT)
    a = ap.parse_args()
    if a.max_function < 1 or a.max_file < 1:
        ap.error("limits must be positive")
    found = over_limits(a.root, a.max_function, a.max_file)
    for line in found:
        print(line)
    print(f"{len(found)} over the limits" if found else "every function and file within the limits")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
