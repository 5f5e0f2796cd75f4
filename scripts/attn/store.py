"""The committed results tree: its layout, the compact form of its JSON, its index, its
retention rule and the SQLite history built from it (results/README.md says why).

    results/<gpu>/<kind>/<date>-<commit>[-<what>].<ext>

A run's files share <date>-<commit>; a folder <date>-<commit>-interrupted/ under benchmarks/
holds the per-test fragments of a run stopped before its collect step."""
import gzip
import json
import os
import re
import sqlite3
import subprocess

from attn.schema import test_pass

KINDS = {
    "benchmarks": "benchmark runs: the results JSON (compact), comparison tables",
    "correctness": "correctness runs: summaries of the JUnit files (scripts/summary.py), timings",
    "peers": "PyTorch SDPA backends timed like the harness (scripts/peers.py), peer tables",
    "tune": "autotuner runs (attn_tune, compact) and their tables (scripts/tune_table.py)",
    "sanitize": "compute-sanitizer runs: summaries, and a log when it is the only evidence",
    "profile": "profiles: ncu_profile.py's JSON, instruction-mix tables (not ncu's raw output)",
    "selftest": "selftest kill matrices and kill-row summaries",
    "nightly": "scripts/nightly.sh: report, compare table, correctness summary, plots",
    "dev": "kernel development measurements that NOTES.md cites (A/B tables, dev-test tables)",
}
NAME = re.compile(r"^(?P<date>\d{4}-\d\d-\d\d)(?:-(?P<commit>[0-9a-f]{7,40}))?(?P<what>-[^.]*)?\.(?P<ext>.+)$")
# the retention rule (results/README.md): what may be committed, and how big
ALLOWED_EXT = ("json", "gz", "md", "txt", "png", "log")
MAX_BYTES = {"png": 150_000, "log": 20_000, "txt": 100_000, "md": 100_000, "json": 300_000, "gz": 150_000}
GZIP_OVER = 150_000  # a compact results document larger than this is committed as .json.gz
MAX_BYTES_KIND = {"tune": 600_000}  # a tune run's every trial, compacted
NIGHTLY_MAX_BYTES = 300_000  # what one nightly run adds: its results JSON and its nightly/ files
TIMING_KEEP = ("median_ms", "min_ms", "ci_lo_ms", "ci_hi_ms", "samples", "noisy", "rsd")
TRIAL_KEEP = ("median_ms", "ci_lo_ms", "ci_hi_ms")
INDEX = "INDEX.md"


def parse_name(rel):
    """A path under results/ as {gpu, kind, date, commit, what, ext, run}; None when it does not
    follow the layout (README.md and INDEX.md at the top are not runs)."""
    parts = rel.split("/")
    if len(parts) < 3 or parts[1] not in KINDS:
        return None
    top = parts[2]
    m = NAME.match(top) if len(parts) == 3 else re.match(
        r"^(?P<date>\d{4}-\d\d-\d\d)-(?P<commit>[0-9a-f]{7,40})(?P<what>-interrupted)$", top)
    if not m:
        return None
    d = m.groupdict()
    return {"gpu": parts[0], "kind": parts[1], "date": d["date"], "commit": d.get("commit"),
            "what": (d.get("what") or "").lstrip("-"), "ext": d.get("ext") or "json",
            "run": d["date"] + (f"-{d['commit']}" if d.get("commit") else ""),
            "path": "/".join(parts[:3])}  # an interrupted run's folder stands for its fragments


def results_files(root, untracked=False):
    """The files under the results folder `root` that git tracks (with `untracked`, those it
    would add too), as paths relative to it, sorted; every file when `root` is not in a git
    work tree. A benchmark run's new, uncompacted file is not committed yet: not checked."""
    try:
        args = ["git", "-C", root, "ls-files", "-z", "--cached"] + (["--others", "--exclude-standard"] if untracked else [])
        p = subprocess.run(args + ["."], capture_output=True, timeout=60)
        if p.returncode == 0:
            return sorted({f for f in p.stdout.decode().split("\0") if f and os.path.exists(os.path.join(root, f))})
    except (OSError, subprocess.TimeoutExpired):
        pass
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        out += [os.path.relpath(os.path.join(dirpath, f), root) for f in files]
    return sorted(p.replace(os.sep, "/") for p in out)


# --- compaction ---------------------------------------------------------------------------------
def _round(x, digits=6):
    if isinstance(x, float):
        return float(f"{x:.{digits}g}")
    if isinstance(x, dict):
        if "median_ms" in x:  # a timing: the figures the scripts read
            x = {k: x[k] for k in TIMING_KEEP if k in x}
        return {k: _round(v, digits) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v, digits) for v in x]
    return x


def _compact_test(t):
    for b in (t.get("baselines") or {}).values():
        if isinstance(b, dict):
            b.pop("heuristics", None)  # cuDNN's heuristics story and the library's file:
            b.pop("library", None)     # in the raw JSON (a CI artifact)
    for launch in ((t.get("launches") or {}).get("each") or []):
        launch.pop("name", None)  # the mangled kernel name
    m = t.get("measurement")
    if isinstance(m, dict) and m.get("valid") is True:
        t["measurement"] = {"valid": True}
    return t


def compact(doc):
    """The committed form of a results, peers, profile or tune document: numbers to 6 significant
    digits, timings reduced to the figures the scripts read, a tune search's trials to their
    median and CI; compact(compact(d)) == compact(d)."""
    if isinstance(doc, dict) and isinstance(doc.get("tests"), list):
        doc = dict(doc, tests=[_compact_test(dict(t)) if isinstance(t, dict) else t for t in doc["tests"]])
    if isinstance(doc, dict) and doc.get("kind") == "tune":
        for c in doc.get("classes") or []:
            for trial in ((c.get("search") or {}).get("trials") or []):
                if isinstance(trial.get("timing"), dict):
                    trial["timing"] = {k: trial["timing"][k] for k in TRIAL_KEEP if k in trial["timing"]}
    return _round(doc)


def dumps(doc):
    return json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n"


def is_compact(text):
    try:
        return dumps(compact(json.loads(text))) == text
    except ValueError:
        return False


def read_text(path):
    """A committed JSON file's text, a .json.gz decompressed."""
    with open(path, "rb") as f:
        data = f.read()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode()


def write_compact(path, doc, gzip_over=None):
    """Writes `doc` in its committed form to `path` (a .json), or to `path`.gz (gzip, the .json
    removed) when its compact text is over `gzip_over` bytes; returns the path written."""
    text = dumps(compact(doc))
    out = path + ".gz" if gzip_over is not None and len(text) > gzip_over else path
    data = gzip.compress(text.encode(), mtime=0) if out.endswith(".gz") else text.encode()
    with open(out + ".tmp", "wb") as f:
        f.write(data)
    os.replace(out + ".tmp", out)
    if out != path and os.path.exists(path):
        os.remove(path)
    return out


# --- retention ----------------------------------------------------------------------------------
def retention_problems(root, files=None, untracked=False):
    """The committed files under `root` (results/) that break the retention rule, as
    ["<path>: <why>"]."""
    problems = []
    for rel in files if files is not None else results_files(root, untracked):
        if rel in ("README.md", INDEX):
            continue
        info = parse_name(rel)
        if info is None:
            problems.append(f"{rel}: not results/<gpu>/<kind>/<date>-<commit>[-<what>].<ext> "
                            f"(kinds: {', '.join(KINDS)})")
            continue
        ext = info["ext"].rsplit(".", 1)[-1]
        path = os.path.join(root, rel)
        size = os.path.getsize(path)
        if info["ext"].endswith("junit.xml") or ext not in ALLOWED_EXT:
            problems.append(f"{rel}: .{info['ext']} is a raw artefact: a CI artifact, not committed")
        elif size > MAX_BYTES_KIND.get(info["kind"], MAX_BYTES[ext]):
            problems.append(f"{rel}: {size} bytes, over the {MAX_BYTES_KIND.get(info['kind'], MAX_BYTES[ext])} "
                            f"the rule allows a .{ext} in {info['kind']}/")
        elif ext in ("json", "gz"):
            try:
                ok = is_compact(read_text(path))
            except (OSError, EOFError, UnicodeDecodeError):
                ok = False
            if not ok:
                problems.append(f"{rel}: not compact (scripts/results.py compact {rel})")
    return problems


# --- index --------------------------------------------------------------------------------------
def _run_date(root, info):
    """A JSON file's recorded run date (orders runs of one day), else ''."""
    if info["ext"] not in ("json", "json.gz") or info["what"] == "interrupted":
        return ""
    try:
        run = json.loads(read_text(os.path.join(root, info["path"]))).get("run")
        return run.get("date", "") if isinstance(run, dict) else ""
    except (OSError, ValueError, AttributeError, EOFError):
        return ""


def runs(root, files=None):
    """{(gpu, kind): [run, ...]} oldest first; a run is {run, date, commit, run_date, files}."""
    by = {}
    for rel in files if files is not None else results_files(root):
        info = parse_name(rel)
        if info is None:
            continue
        key = (info["gpu"], info["kind"])
        run = by.setdefault(key, {}).setdefault(info["run"], {
            "run": info["run"], "date": info["date"], "commit": info["commit"], "run_date": "", "files": []})
        if info["path"] not in run["files"]:
            run["files"].append(info["path"])
            run["run_date"] = max(run["run_date"], _run_date(root, info))
    # a text-only run takes the run date its commit has elsewhere on this GPU (same day)
    dated = {(g, r["run"]): r["run_date"] for (g, _), rs in by.items() for r in rs.values() if r["run_date"]}
    out = {}
    for key, rs in sorted(by.items()):
        for r in rs.values():
            r["run_date"] = r["run_date"] or dated.get((key[0], r["run"]), "")
        out[key] = sorted(rs.values(), key=lambda r: (r["date"], r["run_date"], r["run"]))
    return out


GENERATED = re.compile(r"^; (\S+): generated by set_thresholds\.py")
# a run as a header names it: a results file (name or path) or an interrupted run's folder
SOURCE = re.compile(r"(?<![\w/.-])((?:results/)?[\w./-]+?\.json|\d{4}-\d\d-\d\d-[0-9a-f]{7}-interrupted)\b")


def threshold_sources(thresholds_dir):
    """{file: [(kernel, header text, [source names])]}: the runs each set_thresholds.py header
    names (its comment block, wrapped lines included), and attn_tune's search file."""
    out = {}
    for name in sorted(os.listdir(thresholds_dir)):
        path = os.path.join(thresholds_dir, name)
        entries, block = [], None
        with open(path) as f:
            lines = f.read().splitlines()
        for line in lines + [""]:
            m = GENERATED.match(line)
            if m:
                block = [m.group(1), [line]]
                entries.append(block)
            elif block is not None and line.startswith(";"):
                block[1].append(line)
            else:
                block = None
            tuned = re.match(r"^# (\S+)'s search: (results/\S+?)\.?$", line)
            if tuned:
                entries.append([tuned.group(1), [line]])
        if entries:
            out[name] = [(k, " ".join(l.lstrip(";# ").strip() for l in text),
                          sorted(set(SOURCE.findall(" ".join(text))))) for k, text in entries]
    return out


def _resolve(source, files):
    """A source as a thresholds header names it (a file name, a folder, or a path) → its path
    under results/, or None."""
    if source.startswith("results/"):
        rel = source[len("results/"):]
        return rel if any(f == rel or f.startswith(rel + "/") for f in files) else None
    for f in files:
        parts = f.split("/")
        if parts[-1] in (source, source + ".gz"):
            return f
        if len(parts) > 3 and parts[2] == source:
            return "/".join(parts[:3])
    return None


def index_markdown(root, thresholds_dir, untracked=False):
    """results/INDEX.md: per GPU the latest run of each kind (and how many there are), and per
    thresholds file the runs each kernel's minimums came from."""
    files = [f for f in results_files(root, untracked) if f not in ("README.md", INDEX)]
    by = runs(root, files)
    out = ["# Results index", "",
           "Generated by `scripts/results.py index` from the tree (do not edit; the unit test",
           "`unit/scripts/results_index` fails when it is out of date). Layout and retention: `README.md`.", ""]
    for gpu in sorted({g for g, _ in by}):
        out += [f"## {gpu}", "", "| kind | runs | latest run | its files |", "| --- | ---: | --- | --- |"]
        for kind in KINDS:
            rs = by.get((gpu, kind))
            if rs:
                last = rs[-1]
                links = ", ".join(f"[{p.split('/')[-1]}]({p})" for p in last["files"])
                out.append(f"| {kind} | {len(rs)} | {last['run']} | {links} |")
        out.append("")
    out += ["## Thresholds and the runs they came from", ""]
    for name, entries in threshold_sources(thresholds_dir).items():
        out += [f"### thresholds/{name}", "", "| kernel | runs | header |", "| --- | --- | --- |"]
        for kernel, text, sources in entries:
            found = {}
            for s in sources:
                p = _resolve(s, files)
                found.setdefault(p or s, (s.split("/")[-1], p))
            links = ", ".join(f"[{s}]({p})" if p else f"{s} (not in results/)" for s, p in found.values())
            out.append(f"| {kernel} | {links or 'none named'} | {text[:200].replace('|', chr(92) + '|')} |")
        out.append("")
    return "\n".join(out)


# --- history: an SQLite database built from the tree ------------------------------------------
SCHEMA_SQL = """
CREATE TABLE files (path TEXT PRIMARY KEY, gpu TEXT, kind TEXT, run TEXT, date TEXT, commit_ TEXT,
                    what TEXT, ext TEXT, bytes INTEGER);
CREATE TABLE runs (id INTEGER PRIMARY KEY, path TEXT UNIQUE, gpu TEXT, kind TEXT, run TEXT,
                   date TEXT, commit_ TEXT, what TEXT, run_date TEXT, gpu_name TEXT, dirty INTEGER);
CREATE TABLE tests (run_id INTEGER REFERENCES runs(id), test TEXT, kernel TEXT, pass TEXT, dtype TEXT,
                    head_dim INTEGER, workload TEXT, seqlen_q INTEGER, seqlen_k INTEGER,
                    median_ms REAL, ci_lo_ms REAL, ci_hi_ms REAL, tflops REAL, gbs REAL,
                    roofline_efficiency REAL, speedup_reference REAL, speedup_cudnn REAL, verdict TEXT);
CREATE INDEX tests_by_name ON tests(test);
CREATE VIEW latest AS
  SELECT f.gpu, f.kind, f.run, f.date, f.commit_ FROM files f
  WHERE f.run = (SELECT g.run FROM files g WHERE g.gpu = f.gpu AND g.kind = f.kind
                 ORDER BY g.date DESC, (SELECT MAX(r.run_date) FROM runs r WHERE r.run = g.run AND r.gpu = g.gpu) DESC,
                          g.run DESC LIMIT 1)
  GROUP BY f.gpu, f.kind;
"""


def _test_row(run_id, t):
    kt = t.get("kernel_timing") or {}
    b = t.get("baselines") or {}
    ref, cud = b.get("reference") or {}, b.get("cudnn") or {}
    wl = t.get("workload") or ("causal" if t.get("causal") else "full")
    # a record without a pass (written before the backward) is the forward's
    return (run_id, t.get("test"), t.get("kernel"), test_pass(t), t.get("dtype"), t.get("head_dim"), wl, t.get("seqlen_q"),
            t.get("seqlen_k"), kt.get("median_ms"), kt.get("ci_lo_ms"), kt.get("ci_hi_ms"), t.get("tflops"),
            t.get("gbs"), t.get("roofline_efficiency"), ref.get("speedup"), cud.get("speedup"), t.get("verdict"))


def build_history(root, db_path, untracked=True):
    """Writes the SQLite database `db_path` (replaced whole) from the results tree at `root`:
    every file (files), every results document with tests (runs, tests), the latest run of each
    kind per GPU (the view latest). Returns (files, runs, tests) counts."""
    tmp = db_path + ".tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    con = sqlite3.connect(tmp)
    con.executescript(SCHEMA_SQL)
    n_runs = n_tests = 0
    files = [f for f in results_files(root, untracked) if f not in ("README.md", INDEX)]
    for rel in files:
        info = parse_name(rel)
        if info is None:
            continue
        con.execute("INSERT INTO files VALUES (?,?,?,?,?,?,?,?,?)", (rel, info["gpu"], info["kind"], info["run"],
                    info["date"], info["commit"], info["what"], info["ext"], os.path.getsize(os.path.join(root, rel))))
        if info["ext"] not in ("json", "json.gz") or info["kind"] not in ("benchmarks", "peers"):
            continue
        try:
            doc = json.loads(read_text(os.path.join(root, rel)))
        except (OSError, ValueError, EOFError):
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("tests"), list):
            continue  # a fragment of an interrupted run, or not a results document
        run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
        gpu = run.get("gpu") if isinstance(run.get("gpu"), dict) else {}
        cur = con.execute("INSERT INTO runs (path, gpu, kind, run, date, commit_, what, run_date, gpu_name, dirty) "
                          "VALUES (?,?,?,?,?,?,?,?,?,?)", (rel, info["gpu"], info["kind"], info["run"], info["date"],
                                                           info["commit"], info["what"], run.get("date"),
                                                           gpu.get("name"), run.get("dirty")))
        rows = [_test_row(cur.lastrowid, t) for t in doc["tests"] if isinstance(t, dict)]
        con.executemany("INSERT INTO tests VALUES (" + ",".join("?" * 18) + ")", rows)
        n_runs, n_tests = n_runs + 1, n_tests + len(rows)
    con.commit()
    con.close()
    os.replace(tmp, db_path)
    return len(files), n_runs, n_tests


def test_history(db_path, test, gpu=None, kind="benchmarks", gpu_name=None):
    """One test across commits, oldest first: [(run_date, commit, path, median_ms, ci_lo, ci_hi,
    tflops, speedup_cudnn, verdict)]; on one GPU folder (`gpu`) or device name (`gpu_name`)."""
    con = sqlite3.connect(db_path)
    try:
        q = ("SELECT r.run_date, r.commit_, r.path, t.median_ms, t.ci_lo_ms, t.ci_hi_ms, t.tflops, "
             "t.speedup_cudnn, t.verdict FROM tests t JOIN runs r ON t.run_id = r.id WHERE t.test = ? AND r.kind = ?"
             + (" AND r.gpu = ?" if gpu else "") + (" AND r.gpu_name = ?" if gpu_name else "")
             + " ORDER BY r.run_date, r.path")
        return con.execute(q, (test, kind) + tuple(x for x in (gpu, gpu_name) if x)).fetchall()
    finally:
        con.close()


def latest_runs(db_path):
    """The latest run of each kind per GPU: [(gpu, kind, run, date, commit)]."""
    con = sqlite3.connect(db_path)
    try:
        return con.execute("SELECT gpu, kind, run, date, commit_ FROM latest ORDER BY gpu, kind").fetchall()
    finally:
        con.close()
