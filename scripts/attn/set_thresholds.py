#!/usr/bin/env python3
"""Sets a kernel's benchmark minimums in a GPU's thresholds file from measured runs.

    scripts/set_thresholds.py RUN... --kernel simple [--margin 0.85] [--only REGEX] [--thresholds-dir thresholds]
    scripts/set_thresholds.py RUN... --kernel simple --margins thresholds/margins.txt

Each RUN is a results file (results/<gpu>/benchmarks/<date>-<commit>.json) or a folder of one run's
per-test fragments (an interrupted run's). For every benchmark of that kernel it writes one
class section [<kernel> <dtype> d<D> <workload> <S>-<S>] (workload full or causal for the dense
matrix, S = S_q = S_k; decode, varlen or window for version 2's, S the longest sequence's
keys, and decode's sections add q<S_q>); a backward benchmark's section names its pass after
the kernel, [<kernel> bwd ...] or [<kernel> fwd_bwd ...] (the forward's has no pass word), so
that a backward is never judged by the forward's minimums. Each section's minimum for each figure (speedup vs the cuBLAS reference, dense matrix only; vs
cuDNN where it ran; roofline efficiency) is

    margin x lowest measured x (lowest / highest)

over the runs: the margin absorbs noise within a run, and the run-to-run spread seen for
that figure widens it further (a figure that moved 30 % between runs gets a minimum 30 %
lower). The benchmark fails only when confidently below a minimum (its confidence interval
entirely under it); a kernel 2x slower still fails wherever the spread stays under ~40 %. The
kernel's earlier sections of the passes the runs measured are replaced (a run of the backward
alone leaves the forward's sections as they were, and the reverse); the [gpu] and [peaks]
sections (from attn_calibrate) and other kernels' sections are kept. With --only,
only the benchmarks whose test name matches REGEX are (re)written, and the kernel's other
sections stay as they were (after a change that only touches some shapes, such as a kernel's
short-sequence path); an earlier comment of the kernel's that no longer precedes any of its
sections goes, and the other kernels' comments stay with their sections.

--margins FILE takes the margins from FILE (thresholds/margins.txt: what each kernel's
sections are made with, on every GPU) instead of --margin and --only: its lines for the
kernel (else its '*' line), in order, each one pass of the above, a line without a regex
writing every section the runs measured and a line with one only the tests it matches
(a line whose tests the runs did not measure is skipped, said on stdout).
"""
import argparse
import datetime
import math
import os
import re
import sys
import textwrap

from attn import ROOT, store
from attn.schema import BAD_INPUT, PASSES, fail, load_fragment, load_results, test_pass, workload

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


# A valid measurement reaches at most this fraction of the roofline (attn_benchmark's
# FLOOR_MARGIN_PCT: the peaks are measured, and a read-mostly kernel can pass the copy's
# bandwidth); the minimum written for it is at most 1, what the loader accepts.
MAX_ROOFLINE = 1.25


def check_figure(run, t, key, value):
    """Exits with one line when a measured figure gives no minimum the loader accepts (a
    finite number > 0; a roofline fraction that attn_benchmark calls a valid measurement)."""
    if not (math.isfinite(value) and value > 0) or (key == "min_roofline" and value > MAX_ROOFLINE):
        want = f"a fraction in (0, {MAX_ROOFLINE:g}]" if key == "min_roofline" else "a finite number > 0"
        fail(PROG, run, f"{t['test']}: '{FIGURE_FIELDS[key]}' is {value:g}, expected {want} (for {key})")


def class_seqlen(t):
    """The length a class's range covers: S for the dense matrix, else the longest
    sequence's keys (attn_benchmark's rule)."""
    return t["seqlen_q"] if workload(t) in DENSE else t["seqlen_k"]


def section_pass(header):
    """The pass of a section "[<kernel> [<pass>] <dtype> ...]": the word after the kernel, fwd
    where there is none (harness/thresholds.c reads it the same way)."""
    words = header.split()
    return words[1] if len(words) > 1 and words[1] in PASSES else "fwd"


def comment_passes(block):
    """The passes a comment block of this script names ("... set_thresholds.py for passes
    bwd,fwd_bwd ..."; one without names the forward's)."""
    text = " ".join(line.lstrip(";").strip() for line in block)
    m = re.search(r"generated by set_thresholds\.py for passes ([\w,]+)", text)
    return set(m.group(1).split(",")) if m else {"fwd"}


def keep_lines(lines, kernel, only, rewritten, passes, mine):
    """The thresholds file's lines that stay: all but the kernel's sections of `passes` (with
    --only: but the sections rewritten now) and this script's comments on them."""
    kept, skipping, i = [], False, 0
    squeeze = lambda text: re.sub(r"[\s;]", "", text)  # wrapping moves only spaces and ';'
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*\[([^\]]*)\]", line)
        if m:
            words = m.group(1).split()
            skipping = bool(words) and words[0] == kernel and (
                f"[{m.group(1)}]" in rewritten if only else section_pass(m.group(1)) in passes)
        elif GENERATED.match(line):
            skipping = False  # a comment on the sections after it: the skipped section ended
        # this script's comment (continuation lines start ";   "): without --only the kernel's
        # on these passes go, with --only the one an earlier run of the same --only wrote
        if line.startswith(f"; {kernel}: generated by set_thresholds.py"):
            n = 1
            while i + n < len(lines) and lines[i + n].startswith(";   "):
                n += 1
            block = lines[i:i + n]
            if squeeze("".join(block)).startswith(squeeze(mine)) if only else comment_passes(block) <= set(passes):
                i += n
                continue
        if not skipping:
            kept.append(line)
        i += 1
    while kept and not kept[-1].strip():
        kept.pop()
    return drop_orphan_comments(kept, kernel)


GENERATED = re.compile(r"; (\S+): generated by set_thresholds\.py")


def drop_orphan_comments(lines, kernel):
    """Without the kernel's comments that no longer precede a section of it (--only rewrote
    every section an earlier run's comment was on), and the blank lines before them. A comment
    is its first line and the ";   " lines after it; other comment lines (a hand-written "why")
    may stand between it and its sections."""
    out, i = [], 0
    while i < len(lines):
        m = GENERATED.match(lines[i])
        if m and m.group(1) == kernel:
            n = 1
            while i + n < len(lines) and lines[i + n].startswith(";   "):
                n += 1
            j = i + n  # the next section, past blank lines and other comment lines
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(";")) and not GENERATED.match(lines[j]):
                j += 1
            nxt = re.match(r"\s*\[(\S+)", lines[j]) if j < len(lines) else None
            if not nxt or nxt.group(1) != kernel:
                while out and not out[-1].strip():
                    out.pop()
                i += n
                if out and i < len(lines):
                    out.append("\n")
                while i < len(lines) and not lines[i].strip():
                    i += 1
                continue
        out.append(lines[i])
        i += 1
    return out


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
        elif os.path.isfile(run) and not store.is_compact(store.read_text(run)):
            notes.append(f"{run} is not compact: scripts/results.py compact {run} before committing it")
    return notes


def write_sections(run_paths, kernel, margin, only, thresholds_dir):
    """Writes the kernel's sections from the runs (those of the tests matching `only`, when
    given) with this margin: (sections written, the thresholds file), (0, None) when the runs
    measured none of them."""
    runs, meta, source = [], None, {}
    for r in run_paths:
        if os.path.isdir(r):
            tests = [load_fragment(os.path.join(r, f), PROG, **NEEDED) for f in sorted(os.listdir(r))
                     if f.endswith(".json")]
        else:
            doc = load_results(r, PROG, run=["gpu.name"], **NEEDED)
            tests, meta = doc["tests"], meta or doc["run"]
        runs.append({t["test"]: t for t in tests if t["kernel"] == kernel and "baselines" in t
                     and (not only or re.search(only, t["test"]))})
        source[id(runs[-1])] = r
    if meta is None:
        sys.exit("set_thresholds: give at least one results file (for the GPU's name)")
    gpu = meta["gpu"]["name"]
    path = os.path.join(thresholds_dir, slug(gpu) + ".ini")
    if not os.path.exists(path):
        sys.exit(f"set_thresholds: {path} does not exist: run attn_calibrate --write on this GPU first")
    def figures(t):
        f = {"min_roofline": t["roofline_efficiency"]}
        # the forward's dense matrix always has the cuBLAS baseline; a backward where it ran
        if workload(t) in DENSE and (test_pass(t) == "fwd" or "reference" in t["baselines"]):
            f["min_speedup_reference"] = t["baselines"]["reference"]["speedup"]
        if t["baselines"]["cudnn"].get("available"):
            f["min_speedup_cudnn"] = t["baselines"]["cudnn"]["speedup"]
        return f

    sections = []
    order = lambda t: (PASSES.index(test_pass(t)), t["dtype"], t["head_dim"], workload(t) not in DENSE,  # noqa: E731
                       workload(t), class_seqlen(t), t["seqlen_q"])
    names = sorted({n for r in runs for n in r}, key=lambda n: next(order(r[n]) for r in runs if n in r))
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
        pass_word = "" if test_pass(t) == "fwd" else f" {test_pass(t)}"
        header = (f"{kernel}{pass_word} {t['dtype']} d{t['head_dim']} {workload(t)} "
                  f"{class_seqlen(t)}-{class_seqlen(t)}{q}")
        if len(header) > MAX_SECTION:
            fail(PROG, path, f"section [{header}] for {name}: {len(header)} characters, the loader (inih) "
                 f"reads at most {MAX_SECTION}: use a shorter --kernel name")
        lines = [f"[{header}]"]
        for key in ("min_speedup_reference", "min_speedup_cudnn", "min_roofline"):
            vals = [f[key] for f in seen if key in f]
            if len(vals) == len(seen):  # cuDNN's minimum only where it ran every time
                lo, hi = min(vals), max(vals)
                minimum = margin * lo * lo / hi
                text = f"{min(minimum, 1.0) if key == 'min_roofline' else minimum:.4g}"
                if not float(text) > 0:  # underflow: the loader rejects 0
                    fail(PROG, path, f"[{header}] {key}: the minimum {text} from {lo:g} and {hi:g} is not > 0")
                lines.append(f"{key} = {text}")
        sections.append("\n".join(lines))
    if not sections:
        return 0, None
    # keep everything but this kernel's sections of the passes measured (and the comment lines
    # this script wrote on them); with --only, everything but the sections rewritten now
    passes = [p for p in PASSES if any(test_pass(t) == p for r in runs for t in r.values())]
    rewritten = {sec.splitlines()[0].strip() for sec in sections}
    mine = (f"; {kernel}: generated by set_thresholds.py" + (f" for passes {','.join(passes)}" if passes != ["fwd"] else "")
            + (f" (tests matching '{only}')" if only else ""))
    with open(path) as f:
        kept = keep_lines(f.readlines(), kernel, only, rewritten, passes, mine)
    header = (mine + f" from {', '.join(os.path.basename(r.rstrip('/')) for r in run_paths)} "
              f"on {datetime.date.today()}, margin {margin}")
    # inih reads lines of at most 200 characters: wrapped at 100 (a longer --only pattern is split)
    header = "\n".join(textwrap.wrap(header, 100, subsequent_indent=";   ", break_on_hyphens=False)) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(kept).rstrip("\n") + "\n\n" + header + "\n\n".join(sections) + "\n")
    os.replace(tmp, path)
    return len(sections), path


MARGINS_LINE = re.compile(r"(\S+)\s+(\S+)(?:\s+(\S+))?")


def read_margins(path, kernel):
    """The (margin, tests regex or None, "FILE:LINE") of a margins file's lines for the kernel,
    else of its '*' line; a line that is not '<kernel or *> <margin in (0, 1)> [<regex>]'
    stops the script with the file and line."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        fail(PROG, path, f"cannot read: {e.strerror or e}")
    mine, star = [], []
    for no, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{no}"
        m = MARGINS_LINE.fullmatch(line)
        if not m:
            fail(PROG, where, f"'{line}': expected '<kernel or *> <margin> [<tests regex>]'")
        name, margin, regex = m.groups()
        try:
            value = float(margin)
        except ValueError:
            value = float("nan")
        if not 0 < value < 1:
            fail(PROG, where, f"margin '{margin}': expected a number in (0, 1)")
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as e:
                fail(PROG, where, f"tests regex '{regex}': {e}")
        (mine if name == kernel else star if name == "*" else []).append((value, regex, where))
    if not mine and not star:
        fail(PROG, path, f"no line for kernel '{kernel}' and no '*' line")
    return mine or star


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--margin", type=float, help="default 0.85")
    ap.add_argument("--only", help="regular expression: rewrite only these tests' sections, keep the kernel's others")
    ap.add_argument("--margins", help="FILE (thresholds/margins.txt): the kernel's margins and tests from it, "
                    "instead of --margin and --only")
    ap.add_argument("--thresholds-dir", default=os.path.join(ROOT, "thresholds"))
    a = ap.parse_args()
    if a.margins is not None and (a.margin is not None or a.only is not None):
        print("set_thresholds: --margins takes the place of --margin and --only: give one or the others",
              file=sys.stderr)
        sys.exit(BAD_INPUT)
    if a.margin is None:
        a.margin = 0.85
    if not 0 < a.margin < 1:
        print("set_thresholds: --margin must be in (0, 1)", file=sys.stderr)
        sys.exit(BAD_INPUT)
    if not re.fullmatch(r"[^\s\[\];#=]{1,%d}" % MAX_KERNEL, a.kernel):
        print(f"set_thresholds: --kernel '{a.kernel}': expected 1 to {MAX_KERNEL} characters, no space, "
              "'[', ']', ';', '#' or '='", file=sys.stderr)
        sys.exit(BAD_INPUT)
    todo = [(a.margin, a.only, None)] if a.margins is None else read_margins(a.margins, a.kernel)
    written = 0
    for margin, only, where in todo:
        n, path = write_sections(a.runs, a.kernel, margin, only, a.thresholds_dir)
        if n:
            print(f"set_thresholds: {n} sections for {a.kernel} in {path}" + (f" ({where})" if where else ""))
        elif where:
            print(f"set_thresholds: {where}: no measured benchmark of kernel '{a.kernel}' matches: skipped")
        written += n
    if not written:
        sys.exit(f"set_thresholds: no measured benchmark of kernel '{a.kernel}' in {' '.join(a.runs)}")
    for note in source_notes(a.runs):
        print(f"set_thresholds: note: {note}")


if __name__ == "__main__":
    main()
