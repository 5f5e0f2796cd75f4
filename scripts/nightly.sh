#!/usr/bin/env bash
# The nightly GPU job: configure, build, run the correctness suite (with the features'
# full cross product and the long sequences), then the benchmarks,
# compare with the previous results of this GPU, write the report.
#   scripts/nightly.sh [ctest filters for the benchmarks, e.g. -L simple]
# Writes (besides results/<gpu>/<date>-<commit>.json from the benchmark run):
#   results/<gpu>/<date>-<commit>-nightly/{report.md,roofline.png,speedup.png,
#   correctness.junit.xml,benchmark.junit.xml,compare.md}
# Exit non-zero on any correctness failure, benchmark failure or regression against the
# previous results (scripts/compare.py, threshold ATTN_NIGHTLY_THRESHOLD percent, default 2).
set -uo pipefail
source "$(dirname "$0")/env.sh"
build=${ATTN_BUILD_DIR:-$ATTN_ROOT/build-nightly}
results=$ATTN_ROOT/results
echo "== configure and build in $build"
attn_configure_build "$build" || exit 2
stamp=$(mktemp)
echo "== correctness, the version-2 features' full cross product (label features_full), long sequences (label long)"
ctest --test-dir "$build" -L "^(correctness|features_full|long)$" -j "${ATTN_JOBS_TESTS:-8}" \
      --output-junit "$build/nightly-correctness.xml" >"$build/nightly-correctness.log" 2>&1
corr=$?
python3 "$ATTN_ROOT/scripts/summary.py" "$build/nightly-correctness.xml"
echo "== benchmarks"
ctest --test-dir "$build" -L benchmark --output-junit "$build/nightly-benchmark.xml" "$@" \
      >"$build/nightly-benchmark.log" 2>&1
bench=$?
new=$(find "$results" -name '*.json' -newer "$stamp" ! -name '*-peers*' ! -path '*/tune/*' -path '*/20*' | sort | tail -1)
rm -f "$stamp"
if [ -z "$new" ]; then
  echo "nightly: the benchmark run wrote no results file (no GPU? see $build/nightly-benchmark.log)"
  exit 3
fi
dir=$(dirname "$new")
out="${new%.json}-nightly"
mkdir -p "$out"
cp "$build/nightly-correctness.xml" "$out/correctness.junit.xml"
cp "$build/nightly-benchmark.xml" "$out/benchmark.junit.xml"
# the previous run: the latest earlier results file (by its run date) sharing tests with this
# one; a new results file that is not a good one stops the nightly here (one line, exit 2)
prev=$(python3 - "$ATTN_ROOT/scripts" "$new" "$dir"/20*.json <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from results_schema import load_results, results_or_none
need = {"run": ["date"], "test": ["test"]}
new = load_results(sys.argv[2], "nightly", **need)
names = {t["test"] for t in new["tests"]}
best = None
for path in sys.argv[3:]:
    if path == sys.argv[2] or "-peers" in path:
        continue
    doc = results_or_none(path, **need)
    if doc is None:
        continue  # a profile, a kill matrix, a damaged file: not a benchmark run
    if doc["run"]["date"] < new["run"]["date"] and names & {t["test"] for t in doc["tests"]}:
        if best is None or doc["run"]["date"] > best[0]:
            best = (doc["run"]["date"], path)
print(best[1] if best else "")
PY
) || exit 2
regressions=0
if [ -n "$prev" ]; then
  echo "== compare with $(basename "$prev")"
  python3 "$ATTN_ROOT/scripts/compare.py" "$prev" "$new" --threshold "${ATTN_NIGHTLY_THRESHOLD:-2}" >"$out/compare.md"
  regressions=$?
  tail -1 "$out/compare.md"
fi
python3 "$ATTN_ROOT/scripts/report.py" "$new" ${prev:+--previous "$prev"} --junit "$out/correctness.junit.xml" --out "$out"
echo "nightly: correctness exit $corr, benchmarks exit $bench, $regressions regression(s); report $out/report.md"
[ $corr -eq 0 ] && [ $bench -eq 0 ] && [ $regressions -eq 0 ]
