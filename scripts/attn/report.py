#!/usr/bin/env python3
"""Writes a run's report: Markdown with a summary and a table, and two plots.

    scripts/report.py RESULTS.json [--previous OLD.json] [--junit CORRECTNESS.xml]
                      [--peers PEERS.json] [--history DB] --out DIR

DIR/report.md: correctness counts (from the JUnit file), benchmark verdicts, and per test
the kernel's time, TFLOP/s, speedups, roofline efficiency, verdict and its ratio to the
previous run; a run with backward benchmarks has a table per pass (forward, backward,
forward + backward), and its plots and trend keep each pass's points apart. DIR/roofline.png: every benchmark point against the GPU's two ceilings
(peak FLOP/s and arithmetic intensity x bandwidth). DIR/speedup.png: speedup against S
per (dtype, head dim, mask), vs the cuBLAS reference and vs cuDNN. The plots need
matplotlib; without it the report says so and has the table only. With --history (the SQLite
database `scripts/results.py db` builds from the committed results): a trend table of each
(kernel, pass, dtype, head dim, workload)'s longest sequence across the earlier runs on this GPU, and
DIR/trend.png, the same as a plot.
"""
import argparse
import collections
import os
import sys

from attn import store
from attn.schema import PASS_TITLES, by_pass, junit_cases, load_junit, load_results, test_pass, workload

PROG = "report"
# the fields a measured test's row and plots read (results/README.md)
MEASURED = ["kernel", "dtype", "head_dim", "causal", "seqlen_q", "flops", "bytes", "tflops",
            "kernel_timing.median_ms"]


def junit_counts(root):
    counts = collections.Counter()
    failed = []
    for c in root.iter("testcase"):
        if c.find("failure") is not None or c.get("status") == "fail":
            counts["failed"] += 1
            failed.append(c.get("name"))
        elif c.find("skipped") is not None or c.get("status") in ("notrun", "disabled"):
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, failed


TREND_RUNS = 8  # the trend shows this many runs, the newest last


def trend_tests(doc):
    """One test per (kernel, pass, dtype, head dim, workload): its longest sequence."""
    best = {}
    for t in doc["tests"]:
        if t.get("kernel_timing"):
            key = (t["kernel"], test_pass(t), t["dtype"], t["head_dim"], workload(t))
            if key not in best or t["seqlen_q"] > best[key]["seqlen_q"]:
                best[key] = t
    return [best[k] for k in sorted(best)]


def save_png(fig, path):
    """A plot in at most 128 colours where Pillow is there (matplotlib needs it): in full colour, a
    nightly's ~400 points and its legend passed the 150 KB a committed PNG may have."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72)
    try:
        from PIL import Image
        buf.seek(0)
        img = Image.open(buf).convert("RGB").quantize(colors=128)
        buf = io.BytesIO()
        img.save(buf, format="PNG", optimize=True)
    except ImportError:
        pass
    with open(path + ".tmp", "wb") as f:
        f.write(buf.getvalue())
    os.replace(path + ".tmp", path)


def trends(doc, db, out):
    """The trend table's lines (each chosen test's median across the runs in the history
    database on this GPU) and trend.png; [] when the database has no earlier run."""
    gpu = doc["run"]["gpu"]["name"]
    rows = {}
    for t in trend_tests(doc):
        hist = [h for h in store.test_history(db, t["test"], gpu_name=gpu) if h[0] and h[0] < doc["run"]["date"]]
        rows[t["test"]] = [(h[0], h[1], h[3]) for h in hist if h[3]][-(TREND_RUNS - 1):] + [
            (doc["run"]["date"], doc["run"]["commit"], t["kernel_timing"]["median_ms"])]
    if not any(len(r) > 1 for r in rows.values()):
        return []
    lines = [f"**Trend** (median ms, the last {TREND_RUNS} runs on {gpu} in the history; this run last):", "",
             "| test | runs (commit: ms) |", "| --- | --- |"]
    for name, pts in rows.items():
        lines.append(f"| {name} | " + ", ".join(f"{c}: {ms:.4g}" for _, c, ms in pts) + " |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(9, 5))
        for name, pts in rows.items():
            if len(pts) > 1:
                ax.plot(range(len(pts)), [ms / pts[-1][2] for _, _, ms in pts], marker=".", lw=0.8, label=name)
        ax.set_xlabel(f"run (the last {TREND_RUNS}, this one last)")
        ax.set_ylabel("median time / this run's")
        ax.legend(fontsize=5, ncol=2)
        fig.tight_layout()
        save_png(fig, os.path.join(out, "trend.png"))
        plt.close(fig)
        lines += ["", "![trend](trend.png)"]
    except ImportError:
        pass
    return lines + [""]


def pass_word(t):
    """" bwd" or " fwd_bwd" after a label; nothing for the forward (as the test names)."""
    return "" if test_pass(t) == "fwd" else f" {test_pass(t)}"


def kernel_pass(t):
    """The plots' colour key: the kernel, and its pass unless the forward."""
    return f"{t['kernel']}{pass_word(t)}"


def plots(doc, peers, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
    except ImportError:
        return "plots skipped: matplotlib is not installed"
    tests = [t for t in doc["tests"] if t.get("kernel_timing") and t.get("peaks")]
    if not tests:
        return "plots skipped: no measured benchmark"
    peak_f = max(t["peaks"]["tflops"] for t in tests)
    bw = tests[0]["peaks"]["gbs"]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ai = [10 ** (x / 20) for x in range(-20, 101)]  # 0.1 .. 1e5 FLOP/byte
    ax.plot(ai, [min(peak_f, a * bw * 1e-3) for a in ai], "k-", lw=1.5, label=f"roofline ({peak_f:.0f} TFLOP/s, {bw:.0f} GB/s)")
    # colour: the kernel (and pass); marker: the workload (as the speedup plot)
    points = tests + [p for p in (peers or []) if p.get("kernel_timing")]
    colour = {k: f"C{i % 10}" for i, k in enumerate(sorted({kernel_pass(t) for t in points}))}
    shape = {w: "osD^v<>ph*"[i % 10] for i, w in enumerate(sorted({workload(t) for t in points}))}
    for t in points:
        ax.scatter([t["flops"] / t["bytes"]], [t["tflops"]], s=14, color=colour[kernel_pass(t)], marker=shape[workload(t)])
    ax.legend(handles=ax.get_legend_handles_labels()[0] +
              [Line2D([], [], color=c, marker="o", ls="", label=k) for k, c in colour.items()] +
              [Line2D([], [], color="gray", marker=m, ls="", label=w) for w, m in shape.items()], fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, minimum bytes)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{doc['run']['gpu']['name']}, commit {doc['run']['commit']}")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_png(fig, os.path.join(out, "roofline.png"))
    plt.close(fig)

    series = collections.defaultdict(list)
    for t in tests:
        if workload(t) not in ("full", "causal"):  # the speedup plot's x axis is S = S_q = S_k
            continue
        b, who, cfg = t["baselines"], kernel_pass(t), f"{t['dtype']} d{t['head_dim']} {workload(t)}"
        if "reference" in b:  # a backward's record may lack it (the forward's dense matrix never does)
            series[(who, cfg, "reference")].append((t["seqlen_q"], b["reference"]["speedup"]))
        if b["cudnn"].get("available"):
            series[(who, cfg, "cuDNN")].append((t["seqlen_q"], b["cudnn"]["speedup"]))
    # colour: the kernel (and pass); marker: dtype and head dim; dashed: causal. A legend entry
    # per series grew past the plot with four kernels' 32 series.
    kernels = sorted({k for k, _, _ in series})
    colour = {k: f"C{i % 10}" for i, k in enumerate(kernels)}
    marker = {st: "osD^v<>ph*"[i % 10] for i, st in enumerate(sorted({cfg.rsplit(" ", 1)[0] for _, cfg, _ in series}))}
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharex=True)
    for ax, base in zip(axes, ("reference", "cuDNN")):
        for (kernel, cfg, b), pts in sorted(series.items()):
            if b != base:
                continue
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colour[kernel], lw=0.9,
                    ls="--" if cfg.endswith(" causal") else "-", marker=marker[cfg.rsplit(" ", 1)[0]], ms=3)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("S (seqlen_q = seqlen_k)")
        ax.set_ylabel(f"speedup vs {base}")
        ax.grid(True, which="both", alpha=0.3)
    keys = ([Line2D([], [], color=colour[k], lw=2, label=k) for k in kernels] +
            [Line2D([], [], color="gray", marker=m, ls="", label=st) for st, m in marker.items()] +
            [Line2D([], [], color="gray", ls=ls, label=w) for w, ls in (("full", "-"), ("causal", "--"))])
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    fig.legend(handles=keys, loc="center right", fontsize=7)
    save_png(fig, os.path.join(out, "speedup.png"))
    plt.close(fig)
    return None


def table(tests, prev):
    """The Markdown table of one pass's tests; `prev` the previous run's tests by name."""
    lines = ["| test | ms | TFLOP/s | vs reference | vs cuDNN | roofline | verdict | vs previous |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for t in tests:
        kt = t.get("kernel_timing")
        if not kt:
            lines.append(f"| {t['test']} | | | | | | {t['verdict']}: {t.get('reason', '')[:80]} | |")
            continue
        b = t["baselines"]
        cud = f"{b['cudnn']['speedup']:.3f}" if b["cudnn"].get("available") else "n/a"
        p = prev.get(t["test"], {}).get("kernel_timing")
        vs = f"{kt['median_ms'] / p['median_ms']:.3f}x" if p else ""
        ref = f"{b['reference']['speedup']:.2f}" if "reference" in b else "n/a"
        lines.append(f"| {t['test']} | {kt['median_ms']:.4f} | {t['tflops']:.1f} | {ref} | "
                     f"{cud} | {100 * t['roofline_efficiency']:.1f}% | {t['verdict']} | {vs} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--previous")
    ap.add_argument("--junit")
    ap.add_argument("--peers")
    ap.add_argument("--history", help="the SQLite history (scripts/results.py db): a trend section")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    # every input is checked before anything is written
    doc = load_results(a.results, PROG, run=["gpu.name", "commit", "date"], test=["test", "verdict"],
                       when={"kernel_timing": MEASURED + ["roofline_efficiency", "baselines.cudnn.available"],
                             "peaks": ["peaks.tflops", "peaks.gbs"]})
    prev = {t["test"]: t for t in load_results(a.previous, PROG, test=["test"], when={
        "kernel_timing": ["kernel_timing.median_ms"]})["tests"]} if a.previous else {}
    peers = load_results(a.peers, PROG, when={"kernel_timing": MEASURED})["tests"] if a.peers else None
    junit = load_junit(a.junit, PROG) if a.junit else None
    os.makedirs(a.out, exist_ok=True)
    run = doc["run"]
    lines = [f"# Report: {run['gpu']['name']}, commit {run['commit']}{' (dirty)' if run.get('dirty') else ''}, {run['date']}", ""]
    if junit is not None:
        counts, failed = junit_counts(junit)
        cases, failed_cases = junit_cases(junit)
        lines.append(f"**Correctness:** {counts['passed']} tests passed, {counts['failed']} failed, "
                     f"{counts['skipped']} skipped; their cases: {cases['passed']} passed, {cases['failed']} failed, "
                     f"{cases['known deviation']} known deviations of kernels not ours, "
                     f"{cases['not supported']} not supported, {cases['skipped']} skipped, {cases['not run']} not run.")
        lines += [f"- failed: `{n}`" for n in failed[:50]]
        lines += [f"- failed case: `{n}`" for n in failed_cases[:50]]
    groups = by_pass(sorted(doc["tests"], key=lambda t: t["test"])) or [("fwd", [])]
    verdicts = lambda tests: ", ".join(f"{n} {v}" for v, n in sorted(collections.Counter(  # noqa: E731
        t["verdict"] for t in tests).items()))
    lines.append("**Benchmarks:** " + verdicts(doc["tests"])
                 + "".join(f"; {p}: {verdicts(tests)}" for p, tests in groups if len(groups) > 1)
                 + (f"; compared with {os.path.basename(a.previous)}" if a.previous else "") + ".")
    note = plots(doc, peers, a.out)
    lines += ["", note if note else "![roofline](roofline.png)\n\n![speedup](speedup.png)", ""]
    if a.history:
        lines += trends(doc, a.history, a.out)
    for i, (pass_, tests) in enumerate(groups):
        if len(groups) > 1:
            lines += ([""] if i else []) + [f"### {PASS_TITLES[pass_]} ({pass_})", ""]
        lines += table(tests, prev)
    path = os.path.join(a.out, "report.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)
    print(f"report: {path}" + (f" ({note})" if note else ", roofline.png, speedup.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
