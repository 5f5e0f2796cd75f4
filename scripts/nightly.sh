#!/usr/bin/env bash
# The nightly GPU job: configure, build, run the correctness suite (with the features'
# full cross product, the long sequences, the library kernels' matrix and the harness's own
# GPU checks), then the benchmarks (label benchmark: the forward's and the backward's, whose
# tests also carry the label benchmark_bwd), compare with the previous results of this GPU,
# write the report (a table per pass: forward, backward, forward + backward; the peer tables
# too).
#   scripts/nightly.sh [ctest filters for the benchmarks, e.g. -L simple, or -LE benchmark_bwd
#                       for the forward's alone]
# Raw output (CI artifacts, never committed), under $ATTN_ARTIFACTS (default <build>/artifacts):
#   correctness.junit.xml, correctness.log, fuzz.log, benchmark.junit.xml, benchmark.log,
#   <date>-<commit>.full.json (the collector's whole document), report/ (report.md and plots)
# Committed results (results/README.md, retention), at most 300 KB per run:
#   results/<gpu>/benchmarks/<date>-<commit>.json[.gz]  the run's results, compact (gzip over 150 KB)
#   results/<gpu>/nightly/<date>-<commit>-{report.md,compare.md,correctness.summary.txt,
#                                          roofline.png,speedup.png,peers-<kernel>.md}
#   results/INDEX.md                                     regenerated
# and the plots of this GPU's earlier nightlies are removed (scripts/report.py draws them again).
# verdict.md (in the artifacts; on the run's page through $GITHUB_STEP_SUMMARY when set): the
# counts, the regressions and the exit status.
# Exit non-zero on any correctness failure, fuzzing finding, benchmark failure or regression against the
# previous results (scripts/compare.py, threshold ATTN_NIGHTLY_THRESHOLD percent, default 2).
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "usage: $0 [ctest filters for the benchmarks...]"
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
source "$(dirname "$0")/env.sh"
build=${ATTN_BUILD_DIR:-$ATTN_ROOT/build-nightly}
results=$ATTN_ROOT/results
art=${ATTN_ARTIFACTS:-$build/artifacts}
py() { python3 "$ATTN_ROOT/scripts/$1.py" "${@:2}"; }
# The Python kernels (python/README.md) run beside the built-ins where torch is installed:
# ATTN_PYTHON_KERNELS (default python/kernels/nightly.txt; empty: none).
pyk=${ATTN_PYTHON_KERNELS-$ATTN_ROOT/python/kernels/nightly.txt}
python3 -c "import torch" 2>/dev/null || pyk=""
echo "== configure and build in $build${pyk:+ (Python kernels: $pyk)}"
attn_configure_build "$build" "-DATTN_PYTHON_KERNELS=$pyk" || exit 2
mkdir -p "$art"
stamp=$(mktemp)
echo "== correctness, the version-2 features' full cross product (label features_full), long sequences (label long), the library kernels' matrix (label library_matrix), the harness's own GPU checks (label harness: its device memory, and the benchmarks' timer)"
ctest --test-dir "$build" -L "^(correctness|features_full|long|library_matrix|harness)$" -j "${ATTN_JOBS_TESTS:-8}" \
      --output-junit "$art/correctness.junit.xml" >"$art/correctness.log" 2>&1
corr=$?
py summary "$art/correctness.junit.xml" | tee "$art/correctness.summary.txt"
echo "== fuzz: ${ATTN_FUZZ_RUNS:-1000000} executions per parser (scripts/fuzz.sh; exit 77: no clang, not a failure)"
"$ATTN_ROOT/scripts/fuzz.sh" --build "$build" --runs "${ATTN_FUZZ_RUNS:-1000000}" --jobs "${ATTN_JOBS_TESTS:-8}" \
  2>&1 | tee "$art/fuzz.log"
fuzz=${PIPESTATUS[0]}
echo "== benchmarks (forward and backward: label benchmark)"
ctest --test-dir "$build" -L benchmark --output-junit "$art/benchmark.junit.xml" "$@" \
      >"$art/benchmark.log" 2>&1
bench=$?
new=$(find "$results" -path '*/benchmarks/20*.json' -newer "$stamp" | sort | tail -1)
rm -f "$stamp"
if [ -z "$new" ]; then
  echo "nightly: the benchmark run wrote no results file (no GPU? see $art/benchmark.log)"
  exit 3
fi
dir=$(dirname "$new")
run=$(basename "$new" .json)
nightly="$(dirname "$dir")/nightly"
cp "$new" "$art/$run.full.json"
# the previous run: the latest earlier results file (by its run date) sharing tests with this
# one; a new results file that is not a good one stops the nightly here (one line, exit 2)
prev=$(python3 - "$ATTN_ROOT/scripts" "$new" "$dir"/20*.json "$dir"/20*.json.gz <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from attn.schema import load_results, results_or_none
need = {"run": ["date"], "test": ["test"]}
new = load_results(sys.argv[2], "nightly", **need)
names = {t["test"] for t in new["tests"]}
best = None
for path in sys.argv[3:]:
    if path == sys.argv[2]:
        continue
    doc = results_or_none(path, **need)
    if doc is None:
        continue  # a damaged file: not a benchmark run
    if doc["run"]["date"] < new["run"]["date"] and names & {t["test"] for t in doc["tests"]}:
        if best is None or doc["run"]["date"] > best[0]:
            best = (doc["run"]["date"], path)
print(best[1] if best else "")
PY
) || exit 2
regressions=0
mkdir -p "$art/report"
if [ -n "$prev" ]; then
  echo "== compare with $(basename "$prev")"
  py compare "$prev" "$new" --threshold "${ATTN_NIGHTLY_THRESHOLD:-2}" >"$art/report/compare.md"
  regressions=$?
  tail -1 "$art/report/compare.md"
fi
py results db --db "$build/results.sqlite" >/dev/null
py report "$new" ${prev:+--previous "$prev"} --junit "$art/correctness.junit.xml" \
   --history "$build/results.sqlite" --out "$art/report" || exit 2
# the built-in kernels beside the Python kernels of the same run (the same timer, one run)
peers=$(ls "$build"/python/libattn_py_*.so 2>/dev/null | sed 's|.*/libattn_py_||; s|\.so$||' | paste -sd, -)
if [ -n "$peers" ]; then
  for k in hopper flash2; do
    py peer_table "$new" "$new" --kernel "$k" --backends "$peers" >"$art/report/peers-$k.md" 2>&1 ||
      echo "nightly: no peer table for $k ($art/report/peers-$k.md)"
  done
fi
echo "== committed results (results/README.md): compact (gzip over 150 KB), at most 300 KB"
py results compact --gzip "$new" >/dev/null || exit 2
[ -f "$new.gz" ] && new=$new.gz
mkdir -p "$nightly"
rm -f "$nightly"/*.png  # retention: only the latest nightly's plots are kept
for f in report.md compare.md roofline.png speedup.png peers-hopper.md peers-flash2.md; do
  [ -f "$art/report/$f" ] && cp "$art/report/$f" "$nightly/$run-$f"
done
cp "$art/correctness.summary.txt" "$nightly/$run-correctness.summary.txt"
sed -i "s/(roofline.png)/($run-roofline.png)/; s/(speedup.png)/($run-speedup.png)/" "$nightly/$run-report.md"
py results --untracked index >/dev/null
added=$(du -cb "$new" "$nightly/$run"-* | tail -1 | cut -f1)
echo "nightly: $added bytes of committed results for this run"
status=0
[ $corr -eq 0 ] && { [ $fuzz -eq 0 ] || [ $fuzz -eq 77 ]; } && [ $bench -eq 0 ] && [ $regressions -eq 0 ] || status=1
{
  echo "## Nightly $run: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
  echo
  echo "- correctness: exit $corr; $(head -1 "$art/correctness.summary.txt" | sed 's/^summary of [^:]*: //')"
  echo "- fuzz: exit $fuzz; $(grep -c '^fuzz .* executions' "$art/fuzz.log") parsers fuzzed (fuzz.log)"
  echo "- benchmarks: exit $bench; regressions against $([ -n "$prev" ] && basename "$prev" || echo "no earlier run"): $regressions"
  echo "- committed results: $added bytes (the rule: at most 300000)"
  echo
  cat "$art/report/report.md"
} >"$art/verdict.md"
[ -n "${GITHUB_STEP_SUMMARY:-}" ] && cat "$art/verdict.md" >>"$GITHUB_STEP_SUMMARY"
[ "$added" -le 300000 ] || { echo "nightly: over the 300 KB a nightly may add (results/README.md)"; status=1; }
echo "nightly: correctness exit $corr, fuzz exit $fuzz, benchmarks exit $bench, $regressions regression(s); report $nightly/$run-report.md"
exit $status
