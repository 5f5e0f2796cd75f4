#!/usr/bin/env bash
# For `git bisect run`: builds the commit under test in its own build directory and says
# good (0), bad (1), skip (125) or abort (>= 128) from the harness's own tests.
#
#   git bisect run scripts/bisect.sh correctness [ctest filters...]     e.g. -R 'simple/bf16'
#   git bisect run scripts/bisect.sh perf <benchmark test name> --baseline <results.json> [--slower 1.1]
#
# correctness: 0 when the chosen tests pass, 1 when any fails.
# perf: 0 when the test's median is not above `slower` x the baseline's median (its 95 %
#   confidence interval entirely at or under that limit), 1 when confidently above it, 125
#   when the interval straddles the limit (the measurement cannot decide).
# Either: 125 when the commit does not build; >= 128 (aborting the bisect, never "good")
#   when no test was selected, every selected test was skipped (no GPU?), or the baseline
#   has no figure for the test. ATTN_BISECT_BUILD sets the build directory
#   (default <repo>/build-bisect).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mode=${1:-}
shift || true
top=$(git rev-parse --show-toplevel 2>/dev/null) || { echo "bisect: not in a git work tree" >&2; exit 200; }
build=${ATTN_BISECT_BUILD:-$top/build-bisect}
abort() { echo "bisect: $*: aborting the bisect" >&2; exit 129; }

case $mode in
  correctness|perf) ;;
  *) echo "usage: bisect.sh correctness [ctest filters] | perf <test> --baseline <results.json> [--slower F]" >&2
     exit 200 ;;
esac

# The commit's own set-up when it has one (the harness's scripts/env.sh), then build.
if [ -f "$top/scripts/env.sh" ]; then
  (source "$top/scripts/env.sh" >/dev/null) || abort "the build dependencies are missing"
  source "$top/scripts/env.sh" >/dev/null
fi
mkdir -p "$build"
if ! { cmake -S "$top" -B "$build" && cmake --build "$build" -j "$(nproc)"; } >"$build/bisect-build.log" 2>&1; then
  echo "bisect: $(git rev-parse --short HEAD) does not build (see $build/bisect-build.log): skip"
  exit 125
fi

if [ "$mode" = correctness ]; then
  ctest --test-dir "$build" --output-junit "$build/bisect-junit.xml" "$@" >"$build/bisect-ctest.log" 2>&1
  read -r total failed skipped < <(python3 - "$build/bisect-junit.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
except (OSError, ET.ParseError):
    cases = []
failed = sum(1 for c in cases if c.find("failure") is not None or c.get("status") == "fail")
skipped = sum(1 for c in cases if c.find("skipped") is not None or c.get("status") in ("notrun", "disabled"))
print(len(cases), failed, skipped)
PY
)
  [ "$total" -gt 0 ] || abort "no test matched: $*"
  if [ "$failed" -gt 0 ]; then
    echo "bisect: $(git rev-parse --short HEAD): $failed of $total tests failed: bad"
    exit 1
  fi
  [ "$skipped" -lt "$total" ] || abort "every selected test was skipped (no GPU?)"
  echo "bisect: $(git rev-parse --short HEAD): $((total - skipped)) tests passed: good"
  exit 0
fi

# perf
name=${1:-}
shift || true
baseline="" slower=1.1
while [ $# -gt 0 ]; do
  case $1 in
    --baseline) baseline=$2; shift 2 ;;
    --slower) slower=$2; shift 2 ;;
    *) echo "bisect: unknown argument '$1'" >&2; exit 200 ;;
  esac
done
[ -n "$name" ] && [ -f "$baseline" ] || { echo "bisect: perf needs <test> and --baseline <results.json>" >&2; exit 200; }
fragment="$build/benchmark-fragments/$(echo "$name" | tr / .).json"
rm -f "$fragment"
# -FC: no collect step, so a bisect leaves no results files behind
ctest --test-dir "$build" -R "^${name}\$" -FC bench_run >"$build/bisect-ctest.log" 2>&1
python3 - "$baseline" "$fragment" "$name" "$slower" <<'PY'
import gzip, json, sys
baseline, fragment, name, factor = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
with open(baseline, "rb") as f:
    data = f.read()  # a committed results file over 150 KB is gzip-compressed (results/README.md)
base = {t["test"]: t for t in json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)["tests"]}.get(name)
if not base or "kernel_timing" not in base:
    print(f"bisect: {baseline} has no timing for {name}: aborting", file=sys.stderr); sys.exit(130)
try:
    new = json.load(open(fragment))
except OSError:
    print(f"bisect: {name} left no result (not run, no GPU?): aborting", file=sys.stderr); sys.exit(131)
if "kernel_timing" not in new:
    print(f"bisect: {name}: {new.get('verdict')}: {new.get('reason')}: skip"); sys.exit(125)
limit = factor * base["kernel_timing"]["median_ms"]
t = new["kernel_timing"]
print(f"bisect: {name}: {t['median_ms']:.4f} ms [{t['ci_lo_ms']:.4f}, {t['ci_hi_ms']:.4f}], "
      f"limit {limit:.4f} ms ({factor} x baseline {base['kernel_timing']['median_ms']:.4f})")
sys.exit(1 if t["ci_lo_ms"] > limit else 0 if t["ci_hi_ms"] <= limit else 125)
PY
