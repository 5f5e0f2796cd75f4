#!/usr/bin/env bash
# For `git bisect run`: builds the commit under test in its own build directory and says
# good (0), bad (1), skip (125) or abort (>= 128, which stops the bisect) from the harness's
# own tests. Run a copy from outside the tree, so that every commit is judged by this version:
#
#   cp scripts/bisect.sh /tmp/bisect.sh
#   git bisect run /tmp/bisect.sh correctness [ctest filters...]     e.g. -R 'simple/bf16'
#   git bisect run /tmp/bisect.sh perf <benchmark test name> --baseline <results.json> [--slower 1.1]
#
# perf takes any benchmark by its name, the backward's too: benchmark/bwd/<kernel>/<dtype>/d<D>/
# <mask>/s<S> (or benchmark/fwd_bwd/...) bisects a backward regression against the baseline's
# record of that same test, which must be the backward's ("pass": "bwd"; a record without a
# pass is a forward's), and only a result of that pass counts.
#
# Only GPU tests count: fixtures (benchmark/prepare, benchmark/collect) and host-only tests
# (label unit) pass without a GPU and say nothing about the kernels.
# correctness: 1 when a selected GPU test fails, 0 when none fails and at least one passed.
# perf: 1 when the test's 95 % confidence interval lies entirely above `slower` x the
#   baseline's median, 0 when entirely at or under it, 125 when it straddles the limit.
# 125 (skip, never good or bad) when the commit does not configure or build, the filters
#   select no GPU test at this commit, or no selected GPU test ran (all skipped: no GPU?).
# 129 (abort) with one line on a bad argument: an unknown mode or option, an option without
#   its value, a filter that is not a regular expression, --slower not a number above 0, a
#   baseline that is not a readable results file, has no timing for the test, or records it
#   under another pass than its name says.
# ATTN_BISECT_BUILD sets the build directory (default <repo>/build-bisect).
set -uo pipefail
self=${BASH_SOURCE[0]}
usage="usage: bisect.sh correctness [ctest filters...] | bisect.sh perf <test> --baseline <results.json> [--slower F]"
abort() { echo "bisect: $*: aborting the bisect" >&2; exit 129; }
commit() { git rev-parse --short HEAD 2>/dev/null || echo "HEAD"; }
skip() { echo "bisect: $(commit): $*: skip"; exit 125; }
command -v python3 >/dev/null || abort "python3 is not on PATH"

mode=${1:-}
[ $# -gt 0 ] && shift
case $mode in
  correctness|perf) ;;
  -h|--help)
    echo "$usage"
    sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$self"
    # under `git bisect run` a 0 would mark the commit good
    [ -e "$(git rev-parse --git-path BISECT_START 2>/dev/null)" ] && exit 129
    exit 0 ;;
  "") abort "no mode given ($usage)" ;;
  *) abort "unknown mode '$mode' ($usage)" ;;
esac

# ctest ignores a word it does not know and an option without its value: catch both here.
check_filters() {
  while [ $# -gt 0 ]; do
    case $1 in
      -R|-E|-L|-LE|-I|-FA|-FS|-FC|-C|-j|--tests-regex|--exclude-regex|--label-regex|--label-exclude|\
      --fixture-exclude-any|--fixture-exclude-setup|--fixture-exclude-cleanup|--build-config|--parallel|\
      --timeout|--repeat|--resource-spec-file|--tests-information)
        [ $# -ge 2 ] || abort "ctest option $1 needs a value"
        shift 2 ;;
      -*) shift ;;
      *) abort "'$1' is not a ctest filter (a test name goes after -R)" ;;
    esac
  done
}

# A benchmark's pass by its name and a record's by its "pass" (absent: fwd), as
# scripts/attn/schema.py says; spelled out here because a copy of this script judges old
# commits, whose tree may have no such module.
pass_py=$(cat <<'PY'
def name_pass(name):
    parts = name.split("/")
    return parts[1] if len(parts) == 7 and parts[1] in ("bwd", "fwd_bwd") else "fwd"
def record_pass(t):
    return t.get("pass") or "fwd"
PY
)

# The baseline's median for test $1 (stdout), or one line and 129.
baseline_py=$(cat <<'PY'
import gzip, json, math, sys, zlib
path, name, factor = sys.argv[1:4]
def fail(msg):
    print(f"bisect: {' '.join(str(msg).split())}: aborting the bisect", file=sys.stderr)
    sys.exit(129)
def main():
    try:
        f = float(factor)
    except ValueError:
        fail(f"--slower {factor!r} is not a number")
    if not (math.isfinite(f) and f > 0):
        fail(f"--slower {factor} is not a finite number above 0")
    try:
        with open(path, "rb") as fh:
            data = fh.read()  # a committed results file over 150 KB is gzip-compressed
        doc = json.loads((gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8"))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as e:
        fail(f"--baseline {path} is not a results file ({type(e).__name__}: {e})")
    tests = doc.get("tests") if isinstance(doc, dict) else None
    if not isinstance(tests, list):
        fail(f"--baseline {path} has no \"tests\" list")
    base = next((t for t in tests if isinstance(t, dict) and t.get("test") == name), None)
    if base is None:
        fail(f"--baseline {path} has no test {name}")
    if record_pass(base) != name_pass(name):
        fail(f"--baseline {path}: {name} is recorded as a {record_pass(base)} benchmark, its name says {name_pass(name)}")
    try:
        median = float(base["kernel_timing"]["median_ms"])
    except (KeyError, TypeError, ValueError):
        fail(f"--baseline {path}: {name} has no kernel_timing.median_ms")
    if not (math.isfinite(median) and median > 0):
        fail(f"--baseline {path}: {name}: kernel_timing.median_ms {median} is not above 0")
    print(repr(median))
try:
    main()
except SystemExit:
    raise
except Exception as e:
    fail(f"--baseline {path}: {type(e).__name__}: {e}")
PY
)
baseline_median() {
  python3 -c "$pass_py
$baseline_py" "$baseline" "$1" "$slower"
}

# Arguments first: a bad one aborts before anything is built.
if [ "$mode" = correctness ]; then
  check_filters "$@"
else
  name=${1:-}
  [ $# -gt 0 ] && shift
  case $name in ''|-*) abort "perf needs a benchmark test name first ($usage)" ;; esac
  baseline="" slower=1.1
  while [ $# -gt 0 ]; do
    case $1 in
      --baseline|--slower)
        [ $# -ge 2 ] && [ -n "$2" ] || abort "$1 needs a value"
        if [ "$1" = --baseline ]; then baseline=$2; else slower=$2; fi
        shift 2 ;;
      *) abort "unknown perf argument '$1' ($usage)" ;;
    esac
  done
  [ -n "$baseline" ] || abort "perf needs --baseline <results.json>"
  [ -f "$baseline" ] && [ -r "$baseline" ] || abort "--baseline $baseline is not a readable file"
  base_ms=$(baseline_median "$name") || exit 129
fi

top=$(git rev-parse --show-toplevel 2>/dev/null) || abort "not in a git work tree"
build=${ATTN_BISECT_BUILD:-$top/build-bisect}
mkdir -p "$build" 2>/dev/null || abort "cannot create the build directory $build"
log=$build/bisect-build.log
: >"$log"
# The commit's own set-up when it has one (the harness's scripts/env.sh), then configure.
if [ -f "$top/scripts/env.sh" ]; then
  (source "$top/scripts/env.sh") >>"$log" 2>&1 ||
    abort "$top/scripts/env.sh failed, the build dependencies are missing (see $log)"
  source "$top/scripts/env.sh" >>"$log" 2>&1
fi
cmake -S "$top" -B "$build" >>"$log" 2>&1 || skip "does not configure (see $log)"

# ctest's own view of the filters: how many tests they select and how many of those count
# (not a fixture, not labelled unit); given a JUnit file too, how those that count fared.
tests_py=$(cat <<'PY'
import json, sys, xml.etree.ElementTree as ET
def counts(test):
    props = {p["name"]: p.get("value") for p in test.get("properties", [])}
    fixture = {"FIXTURES_SETUP", "FIXTURES_CLEANUP"} & props.keys()
    return not fixture and "unit" not in (props.get("LABELS") or [])
try:
    tests = json.load(open(sys.argv[1]))["tests"]
    counted = {t["name"] for t in tests if counts(t)}
    if len(sys.argv) == 2:
        print(len(tests), len(counted))
        sys.exit(0)
    try:
        cases = list(ET.parse(sys.argv[2]).getroot().iter("testcase"))
    except (OSError, ET.ParseError):
        cases = []
    mine = [c for c in cases if c.get("name") in counted]
    failed = [c.get("name") for c in mine if c.find("failure") is not None or c.get("status") == "fail"]
    passed = [c for c in mine if c.get("status") == "run" and c.find("failure") is None
              and c.find("skipped") is None]
    print(len(failed), len(passed), failed[0] if failed else "-")
except SystemExit:
    raise
except Exception:
    sys.exit(3)
PY
)
select_tests() {
  local err=$build/bisect-select.err
  ctest --test-dir "$build" --show-only=json-v1 "$@" >"$build/bisect-tests.json" 2>"$err"
  local rc=$?
  # ctest reports a bad regular expression (on either stream) and goes on without it
  if grep -q RegularExpression "$err" "$build/bisect-tests.json"; then
    abort "ctest filters '$*': $(grep -h -m1 RegularExpression "$err" "$build/bisect-tests.json")"
  fi
  [ $rc -eq 0 ] || skip "ctest cannot list the tests: $(head -n1 "$err")"
  read -r selected counted < <(python3 -c "$tests_py" "$build/bisect-tests.json")
  [ -n "${counted:-}" ] || skip "cannot read ctest's test list $build/bisect-tests.json"
}
build_commit() {
  cmake --build "$build" -j "$(nproc)" >>"$log" 2>&1 || skip "does not build (see $log)"
}

if [ "$mode" = correctness ]; then
  select_tests "$@"
  [ "$selected" -gt 0 ] || skip "no test matches '$*' at this commit"
  [ "$counted" -gt 0 ] || skip "'$*' selects only fixtures and unit tests ($selected), which need no GPU"
  build_commit
  junit=$build/bisect-junit.xml
  rm -f "$junit"
  ctest --test-dir "$build" --output-junit "$junit" "$@" >"$build/bisect-ctest.log" 2>&1
  read -r failed passed first < <(python3 -c "$tests_py" "$build/bisect-tests.json" "$junit" || echo "0 0 -")
  if [ "$failed" -gt 0 ]; then
    echo "bisect: $(commit): $failed of $counted GPU tests failed (first: $first): bad"
    exit 1
  fi
  [ "$passed" -gt 0 ] ||
    skip "none of the $counted selected GPU tests ran (skipped: no GPU?; see $build/bisect-ctest.log)"
  echo "bisect: $(commit): $passed of $counted GPU tests passed$([ "$passed" -eq "$counted" ] ||
    echo ", $((counted - passed)) did not run"): good"
  exit 0
fi

# perf
regex="^$(printf '%s' "$name" | sed 's/[][\\.*^$+?(){}|]/\\&/g')\$"
select_tests -R "$regex"
[ "$counted" -gt 0 ] || skip "no benchmark test $name at this commit"
build_commit
fragment="$build/benchmark-fragments/$(echo "$name" | tr / .).json"
rm -f "$fragment"
# -FC: no collect step, so a bisect leaves no results files behind
ctest --test-dir "$build" -R "$regex" -FC bench_run >"$build/bisect-ctest.log" 2>&1
verdict_py=$(cat <<'PY'
import json, math, sys
fragment, name, base_ms, factor, commit = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def say(msg, verdict, rc):
    print(f"bisect: {commit}: {name}: {' '.join(str(msg).split())}: {verdict}")
    sys.exit(rc)
def main():
    try:
        with open(fragment) as f:
            new = json.load(f)
    except OSError:
        say("left no result (not run: no GPU?)", "skip", 125)
    except ValueError as e:
        say(f"its result {fragment} is not JSON ({e})", "skip", 125)
    if isinstance(new, dict) and record_pass(new) != name_pass(name):
        say(f"its result {fragment} is a {record_pass(new)} benchmark's, the name says {name_pass(name)}",
            "skip", 125)
    t = new.get("kernel_timing") if isinstance(new, dict) else None
    if not isinstance(t, dict):
        say(f"no timing ({new.get('verdict') if isinstance(new, dict) else new}: "
            f"{new.get('reason') if isinstance(new, dict) else ''})", "skip", 125)
    try:
        med, lo, hi = (float(t[k]) for k in ("median_ms", "ci_lo_ms", "ci_hi_ms"))
    except (KeyError, TypeError, ValueError):
        say("its kernel_timing lacks median_ms, ci_lo_ms or ci_hi_ms", "skip", 125)
    if not all(map(math.isfinite, (med, lo, hi))) or lo > hi:
        say(f"its timing is not a finite interval ({lo}, {hi})", "skip", 125)
    limit = factor * base_ms
    rc = 1 if lo > limit else 0 if hi <= limit else 125
    say(f"{med:.4f} ms [{lo:.4f}, {hi:.4f}], limit {limit:.4f} ms ({factor} x baseline {base_ms:.4f})",
        {0: "good", 1: "bad", 125: "the interval straddles the limit, skip"}[rc], rc)
try:
    main()
except SystemExit:
    raise
except Exception as e:
    say(f"{type(e).__name__}: {e}", "skip", 125)
PY
)
python3 -c "$pass_py
$verdict_py" "$fragment" "$name" "$base_ms" "$slower" "$(commit)"
rc=$?
case $rc in 0|1|125) exit $rc ;; *) abort "the timing comparison failed (exit $rc)" ;; esac
