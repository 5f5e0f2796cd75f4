"""The committed results tree (results/README.md): its index, its retention rule, compaction,
and a queryable history.

    scripts/results.py index [--check]       # write results/INDEX.md (--check: exit 1 if stale)
    scripts/results.py check                 # exit 1 listing the files that break the retention rule
    scripts/results.py compact [--gzip] FILE...   # rewrite results JSON files in their committed form
    scripts/results.py merge [--gzip] OUT PART...  # one run's parts (a run split over several
                                             # device commands) into one committed file
    scripts/results.py db [--db PATH]        # build the SQLite history (default build/results.sqlite)
    scripts/results.py history TEST [--gpu G] [--db PATH]   # one benchmark across commits
    scripts/results.py latest [--db PATH]    # the latest run of each kind per GPU
    scripts/results.py previous NEW FILE...  # the run NEW is compared with (scripts/nightly.sh)

The database is built from the tree, never committed (.gitignore); `sqlite3 build/results.sqlite`
answers other questions (tables files, runs, tests; view latest)."""
import argparse
import json
import os
import sys

from attn import ROOT, store
from attn.schema import BadInput, _parse_json, fail, load_results, results_or_none

PROG = "results"


def cmd_index(a):
    text = store.index_markdown(a.results, a.thresholds, a.untracked)
    path = os.path.join(a.results, store.INDEX)
    old = open(path).read() if os.path.exists(path) else None
    if a.check:
        if old != text:
            print(f"{PROG}: {path} is out of date: run scripts/results.py index", file=sys.stderr)
            return 1
        print(f"{PROG}: {path} is up to date")
        return 0
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    print(f"{PROG}: wrote {path}")
    return 0


def cmd_check(a):
    problems = store.retention_problems(a.results, untracked=a.untracked)
    for p in problems:
        print(f"{PROG}: results/{p}", file=sys.stderr)
    if not problems:
        print(f"{PROG}: every file under {a.results} follows the layout and the retention rule")
    return 1 if problems else 0


def cmd_compact(a):
    for path in a.files:
        try:
            doc = _parse_json(path)
        except BadInput as e:
            fail(PROG, path, e)
        out = store.write_compact(path, doc, store.GZIP_OVER if a.gzip else None)
        print(f"{PROG}: {out}: {os.path.getsize(out)} bytes")
    return 0


# What every part of one run must share: its code, its machine and its libraries.
SAME_RUN = ("commit", "dirty", "gpu.name", "driver_version", "runtime_version", "cudnn_version", "cublas_version")


def _field(run, dotted):
    for k in dotted.split("."):
        run = run.get(k) if isinstance(run, dict) else None
    return run


def cmd_merge(a):
    """The parts' tests in one document (the run block of the first part, its date the
    earliest), compact, to OUT; refuses parts of different runs, a test in two parts and an
    existing OUT, naming the file and the field or test."""
    if os.path.exists(a.out) or os.path.exists(a.out + ".gz"):
        fail(PROG, a.out, "exists: a results file is never replaced")
    docs = [(path, load_results(path, PROG, run=["commit", "date", "gpu.name"], test=["test"])) for path in a.parts]
    first_path, merged = docs[0]
    merged = dict(merged, tests=[])
    seen = {}
    for path, doc in docs:
        for key in SAME_RUN:
            mine, theirs = _field(doc["run"], key), _field(merged["run"], key)
            if mine != theirs:
                fail(PROG, path, f"run.{key} is {json.dumps(mine)}, {first_path} has {json.dumps(theirs)}: "
                     "not parts of one run")
        for t in doc["tests"]:
            if t["test"] in seen:
                fail(PROG, path, f"{t['test']} is in {seen[t['test']]} too: parts of one run never repeat a test")
            seen[t["test"]] = path
            merged["tests"].append(t)
    merged["run"] = dict(merged["run"], date=min(doc["run"]["date"] for _, doc in docs))
    out = store.write_compact(a.out, merged, store.GZIP_OVER if a.gzip else None)
    print(f"{PROG}: {out}: {len(merged['tests'])} tests from {len(docs)} parts, {os.path.getsize(out)} bytes")
    return 0


def _timed(doc):
    return {t["test"] for t in doc["tests"] if t.get("kernel_timing")}


def cmd_previous(a):
    """Of the earlier runs among FILE..., the one timing the most of NEW's timed tests (the
    latest of those): a partial run (one kernel, one test) committed after a whole one must not
    become the reference a regression is judged against. Prints its path and how many tests it
    shares; nothing when no earlier run shares one. Damaged files are passed over."""
    need = {"run": ["date"], "test": ["test"]}
    new = load_results(a.new, PROG, **need)
    names, best = _timed(new), None
    for path in a.files:
        if os.path.abspath(path) == os.path.abspath(a.new):
            continue
        doc = results_or_none(path, **need)
        if doc is None or doc["run"]["date"] >= new["run"]["date"]:
            continue
        key = (len(names & _timed(doc)), doc["run"]["date"])
        if key[0] and (best is None or key > best[0]):
            best = (key, path)
    if best:
        print(best[1])
        print(f"{PROG}: {best[1]} times {best[0][0]} of the {len(names)} timed tests of {a.new}", file=sys.stderr)
    return 0


def cmd_db(a):
    os.makedirs(os.path.dirname(os.path.abspath(a.db)), exist_ok=True)
    n_files, n_runs, n_tests = store.build_history(a.results, a.db, untracked=True)
    print(f"{PROG}: {a.db}: {n_files} files, {n_runs} runs with tests, {n_tests} test records")
    return 0


def _need_db(a):
    if not os.path.exists(a.db):
        cmd_db(a)


def cmd_history(a):
    _need_db(a)
    rows = store.test_history(a.db, a.test, a.gpu, a.kind)
    if not rows:
        print(f"{PROG}: no record of {a.test} in {a.db}", file=sys.stderr)
        return 1
    print("| run date | commit | ms (95 % CI) | TFLOP/s | vs cuDNN | verdict | file |\n|---|---|---|---|---|---|---|")
    for d, c, path, med, lo, hi, tf, cud, v in rows:
        ms = f"{med:.4g} ({lo:.4g}-{hi:.4g})" if med is not None and lo is not None else (f"{med:.4g}" if med else "")
        print(f"| {d} | {c} | {ms} | {'' if tf is None else f'{tf:.1f}'} | {'' if cud is None else f'{cud:.3f}'} "
              f"| {v} | {path} |")
    return 0


def cmd_latest(a):
    _need_db(a)
    print("| gpu | kind | latest run |\n|---|---|---|")
    for gpu, kind, run, _, _ in store.latest_runs(a.db):
        print(f"| {gpu} | {kind} | {run} |")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="results.py", description=__doc__.strip().splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.strip().splitlines()[2:]))
    ap.add_argument("--results", default=os.path.join(ROOT, "results"), help="the results folder (default: the tree's)")
    ap.add_argument("--thresholds", default=os.path.join(ROOT, "thresholds"), help="the thresholds folder")
    ap.add_argument("--untracked", action="store_true",
                    help="index and check also the files git does not track yet (a new run before its commit)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("index", help="write results/INDEX.md")
    p.add_argument("--check", action="store_true", help="exit 1 when INDEX.md is not what index would write")
    p.set_defaults(fn=cmd_index)
    sub.add_parser("check", help="check the layout and the retention rule").set_defaults(fn=cmd_check)
    p = sub.add_parser("compact", help="rewrite JSON files in their committed (compact) form")
    p.add_argument("--gzip", action="store_true",
                   help=f"write FILE.gz instead when the compact text is over {store.GZIP_OVER} bytes")
    p.add_argument("files", nargs="+")
    p.set_defaults(fn=cmd_compact)
    p = sub.add_parser("merge", help="one run's parts into one committed file")
    p.add_argument("--gzip", action="store_true", help=f"write OUT.gz instead when over {store.GZIP_OVER} bytes")
    p.add_argument("out", help="the file to write, e.g. results/<gpu>/benchmarks/<date>-<commit>.json")
    p.add_argument("parts", nargs="+", help="the parts' results files")
    p.set_defaults(fn=cmd_merge)
    p = sub.add_parser("previous", help="the earlier run a new one is compared with")
    p.add_argument("new", help="the new run's results file")
    p.add_argument("files", nargs="*", help="the candidates (the GPU's benchmarks folder's results files)")
    p.set_defaults(fn=cmd_previous)
    db_default = os.environ.get("ATTN_RESULTS_DB", os.path.join(ROOT, "build", "results.sqlite"))
    for name, fn, hlp in (("db", cmd_db, "build the SQLite history"),
                          ("history", cmd_history, "one benchmark test across commits"),
                          ("latest", cmd_latest, "the latest run of each kind per GPU")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("--db", default=db_default, help="the database ($ATTN_RESULTS_DB, default build/results.sqlite)")
        if name == "history":
            p.add_argument("test", help="a benchmark test name, e.g. benchmark/flash2/fp16/d128/full/s2048")
            p.add_argument("--gpu", help="a GPU folder, e.g. nvidia_h100_80gb_hbm3")
            p.add_argument("--kind", default="benchmarks", help="benchmarks (default) or peers")
        if name != "db":
            p.add_argument("--rebuild", action="store_true", help="rebuild the database first")
        p.set_defaults(fn=fn)
    a = ap.parse_args(argv)
    if getattr(a, "rebuild", False):
        cmd_db(a)
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
