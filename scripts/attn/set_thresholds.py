#!/usr/bin/env python3
"""Sets a kernel's benchmark minimums in a GPU's thresholds file from measured runs.

    scripts/set_thresholds.py RUN... --kernel simple [--margin 0.85] [--only REGEX] [--thresholds-dir thresholds]

Each RUN is a results file (results/<gpu>/benchmarks/<date>-<commit>.json) or a folder of one run's
per-test fragments (an interrupted run's). For every benchmark of that kernel it writes one
class section [<kernel> <dtype> d<D> <workload> <S>-<S>] (workload full or causal for the dense
matrix, S = S_q = S_k; decode, varlen or window for version 2's, S the longest sequence's
keys, and decode's sections add q<S_q>) whose minimum for each figure (speedup vs the cuBLAS reference, dense matrix only; vs
cuDNN where it ran; roofline efficiency) is

    margin x lowest measured x (lowest / highest)

over the runs: the margin absorbs noise within a run, and the run-to-run spread seen for
that figure widens it further (a figure that moved 30 % between runs gets a minimum 30 %
lower). The benchmark fails only when confidently below a minimum (its confidence interval
entirely under it); a kernel 2x slower still fails wherever the spread stays under ~40 %. The kernel's earlier sections in the file are replaced; the [gpu]
and [peaks] sections (from attn_calibrate) and other kernels' sections are kept. With --only,
only the benchmarks whose test name matches REGEX are (re)written, and the kernel's other
sections stay as they were (after a change that only touches some shapes, such as a kernel's
short-sequence path).
"""
import argparse
import datetime
import math
import os
import re
import sys
import textwrap

from attn import ROOT, store
from attn.schema import BAD_INPUT, fail, load_fragment, load_results, workload

PROG = "set_thresholds"
# what a test's section is made of: its class, and the figures of a test that has baselines
NEEDED = {"test": ["test", "kernel"],
          "when": {"baselines": ["dtype", "head_dim", "causal", "seqlen_q", "seqlen_k", "roofline_efficiency",
                                 "baselines.cudnn"]}}
DENSE = ("full", "causal")  # the workloads with the cuBLAS baseline (version 2's have none)
# what harness/thresholds.c can read back: inih keeps a section name's first 49 characters
# (INI_MAX_SECTION 50, so a longer header matches the wrong class) and lines of at most 200;
# parse_class reads the kernel into 63 characters and the numbers as C ints
MAX_SECTION, MAX_KERNEL, INT_MAX = 49, 63, 2**31 - 1
FIGURE_FIELDS = {"min_speedup_reference": "baselines.reference.speedup",
                 "min_speedup_cudnn": "baselines.cudnn.speedup", "min_roofline": "roofline_efficiency"}


def check_class(run, t):
    """Exits with one line when a test's class cannot be a section the loader reads back."""
    for field in ("head_dim", "seqlen_q", "seqlen_k"):
        if not 1 <= t[field] <= INT_MAX:
            fail(PROG, run, f"{t['test']}: '{field}' is {t[field]}, expected 1 to {INT_MAX} (a thresholds class range)")
    if t["dtype"] not in ("fp16", "bf16"):
        fail(PROG, run, f"{t['test']}: 'dtype' is '{t['dtype']}', expected fp16 or bf16")


def check_figure(run, t, key, value):
    """Exits with one line when a measured figure gives no minimum the loader accepts (a
    finite number > 0; a roofline fraction at most 1)."""
    if not (math.isfinite(value) and value > 0) or (key == "min_roofline" and value > 1):
        want = "a fraction in (0, 1]" if key == "min_roofline" else "a finite number > 0"
        fail(PROG, run, f"{t['test']}: '{FIGURE_FIELDS[key]}' is {value:g}, expected {want} (for {key})")


def class_seqlen(t):
    """The length a class's range covers: S for the dense matrix, else the longest
    sequence's keys (attn_benchmark's rule)."""
    return t["seqlen_q"] if workload(t) in DENSE else t["seqlen_k"]


def slug(name):
    return "_".join(re.findall(r"[a-z0-9]+", name.lower()))


def source_notes(runs):
    """The retention rule (results/README.md) for the runs a thresholds file names: each is
    committed under results/<gpu>/<kind>/ in its compact form, so that results/INDEX.md links
    the header's file names to them."""
    results = os.path.join(ROOT, "results")
    notes = []
    for run in runs:
        rel = os.path.relpath(os.path.abspath(run.rstrip("/")), results).replace(os.sep, "/")
        if rel.startswith("..") or store.parse_name(rel) is None:
            notes.append(f"{run} is not in results/<gpu>/<kind>/: commit it there (compact) so that "
                         "results/INDEX.md names the run these minimums came from")
        elif os.path.isfile(run) and not store.is_compact(open(run).read()):
            notes.append(f"{run} is not compact: scripts/results.py compact {run} before committing it")
    return notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--margin", type=float, default=0.85)
    ap.add_argument("--only", help="regular expression: rewrite only these tests' sections, keep the kernel's others")
    ap.add_argument("--thresholds-dir", default=os.path.join(ROOT, "thresholds"))
    a = ap.parse_args()
    if not 0 < a.margin < 1:
        print("set_thresholds: --margin must be in (0, 1)", file=sys.stderr)
        sys.exit(BAD_INPUT)
    if not re.fullmatch(r"[^\s\[\];#=]{1,%d}" % MAX_KERNEL, a.kernel):
        print(f"set_thresholds: --kernel '{a.kernel}': expected 1 to {MAX_KERNEL} characters, no space, "
              "'[', ']', ';', '#' or '='", file=sys.stderr)
        sys.exit(BAD_INPUT)
    runs, meta, source = [], None, {}
    for r in a.runs:
        if os.path.isdir(r):
            tests = [load_fragment(os.path.join(r, f), PROG, **NEEDED) for f in sorted(os.listdir(r))
                     if f.endswith(".json")]
        else:
            doc = load_results(r, PROG, run=["gpu.name"], **NEEDED)
            tests, meta = doc["tests"], meta or doc["run"]
        runs.append({t["test"]: t for t in tests if t["kernel"] == a.kernel and "baselines" in t
                     and (not a.only or re.search(a.only, t["test"]))})
        source[id(runs[-1])] = r
    if meta is None:
        sys.exit("set_thresholds: give at least one results file (for the GPU's name)")
    gpu = meta["gpu"]["name"]
    path = os.path.join(a.thresholds_dir, slug(gpu) + ".ini")
    if not os.path.exists(path):
        sys.exit(f"set_thresholds: {path} does not exist: run attn_calibrate --write on this GPU first")
    def figures(t):
        f = {"min_roofline": t["roofline_efficiency"]}
        if workload(t) in DENSE:
            f["min_speedup_reference"] = t["baselines"]["reference"]["speedup"]
        if t["baselines"]["cudnn"].get("available"):
            f["min_speedup_cudnn"] = t["baselines"]["cudnn"]["speedup"]
        return f

    sections = []
    names = sorted({n for r in runs for n in r},
                   key=lambda n: next((r[n]["dtype"], r[n]["head_dim"], workload(r[n]) not in DENSE, workload(r[n]),
                                       class_seqlen(r[n]), r[n]["seqlen_q"]) for r in runs if n in r))
    for name in names:
        seen = []
        for r in runs:
            if name in r:
                check_class(source[id(r)], r[name])
                seen.append(figures(r[name]))
                for key, value in seen[-1].items():
                    check_figure(source[id(r)], r[name], key, value)
        t = next(r[name] for r in runs if name in r)
        # decode's classes also name the query count (q1 and q16 against the same cache differ)
        q = f" q{t['seqlen_q']}" if workload(t) == "decode" else ""
        header = f"{a.kernel} {t['dtype']} d{t['head_dim']} {workload(t)} {class_seqlen(t)}-{class_seqlen(t)}{q}"
        if len(header) > MAX_SECTION:
            fail(PROG, path, f"section [{header}] for {name}: {len(header)} characters, the loader (inih) "
                 f"reads at most {MAX_SECTION}: use a shorter --kernel name")
        lines = [f"[{header}]"]
        for key in ("min_speedup_reference", "min_speedup_cudnn", "min_roofline"):
            vals = [f[key] for f in seen if key in f]
            if len(vals) == len(seen):  # cuDNN's minimum only where it ran every time
                lo, hi = min(vals), max(vals)
                text = f"{a.margin * lo * lo / hi:.4g}"
                if not float(text) > 0:  # underflow: the loader rejects 0
                    fail(PROG, path, f"[{header}] {key}: the minimum {text} from {lo:g} and {hi:g} is not > 0")
                lines.append(f"{key} = {text}")
        sections.append("\n".join(lines))
    if not sections:
        sys.exit(f"set_thresholds: no measured benchmark of kernel '{a.kernel}' in {' '.join(a.runs)}")
    # keep everything but this kernel's sections (and the comment line this script wrote);
    # with --only, everything but the sections rewritten now
    rewritten = {sec.splitlines()[0].strip() for sec in sections}
    kept, skipping = [], False
    mine = f"; {a.kernel}: generated by set_thresholds.py" + (f" (tests matching '{a.only}')" if a.only else "")
    squeeze = lambda text: re.sub(r"[\s;]", "", text)  # wrapping moves only spaces and ';'
    with open(path) as f:
        lines = f.readlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*\[([^\]]*)\]", line)
        if m:
            skipping = m.group(1).split()[0] == a.kernel and (not a.only or f"[{m.group(1)}]" in rewritten)
        # this script's comment (continuation lines start ";   "): without --only all of the
        # kernel's go, with --only the one an earlier run of the same --only wrote
        if line.startswith(f"; {a.kernel}: generated by set_thresholds.py"):
            n = 1
            while i + n < len(lines) and lines[i + n].startswith(";   "):
                n += 1
            if squeeze("".join(lines[i:i + n])).startswith(squeeze(mine)):
                i += n
                continue
        if not skipping:
            kept.append(line)
        i += 1
    while kept and not kept[-1].strip():
        kept.pop()
    header = (mine + f" from {', '.join(os.path.basename(r.rstrip('/')) for r in a.runs)} "
              f"on {datetime.date.today()}, margin {a.margin}")
    # inih reads lines of at most 200 characters: wrapped at 100 (a longer --only pattern is split)
    header = "\n".join(textwrap.wrap(header, 100, subsequent_indent=";   ", break_on_hyphens=False)) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(kept) + "\n\n" + header + "\n\n".join(sections) + "\n")
    os.replace(tmp, path)
    print(f"set_thresholds: {len(sections)} sections for {a.kernel} in {path}")
    for note in source_notes(a.runs):
        print(f"set_thresholds: note: {note}")


if __name__ == "__main__":
    main()
