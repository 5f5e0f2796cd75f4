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
# previous results (scripts/compare.py --by cudnn: each test's time relative to the cuDNN baseline
# of its own run, which a different machine moves far less than the times; threshold
# ATTN_NIGHTLY_THRESHOLD percent, default 5: unchanged code on two H200s moved the ratios up to
# 3.7 % and the times up to 6.5 %: results/nvidia_h200/benchmarks/2026-11-28-c44e40d-nightly.md).
# Several GPUs (nvidia-smi lists more than one; ATTN_NIGHTLY_GPUS=1 keeps to one): a CTest resource
# spec (scripts/resource_spec.py) spreads the correctness tests over them (one slot of 8 each,
# -j 8 per GPU) and runs the benchmarks one per GPU at once (-DATTN_BENCHMARKS_SPREAD=ON: each
# takes a whole GPU, none waits for RUN_SERIAL).
# In steps, for a machine held in slices shorter than the whole job (each command under a time
# limit; the same machine, build and $ATTN_ARTIFACTS throughout): ATTN_NIGHTLY_STEPS (default
# "correctness fuzz benchmarks report") names the steps this invocation runs;
# ATTN_NIGHTLY_CORR_PART=K/N the correctness tests' part K of N (every N-th test; part 1 starts
# the nightly, part N merges the parts' JUnit files into correctness.junit.xml), and
# ATTN_NIGHTLY_BENCH_PART=K/N the benchmarks' (part 1 starts the run, part N collects it).
# Run 1/N .. N/N in order, and the benchmarks' last part and the report in one invocation,
# since the results file is untracked until committed. Each step leaves its exit status in
# $ATTN_ARTIFACTS/<step>.rc (the worst of its parts); the report reads them, and a step that
# never ran counts as failed.
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
steps=" ${ATTN_NIGHTLY_STEPS:-correctness fuzz benchmarks report} "
for s in $steps; do
  case $s in correctness|fuzz|benchmarks|report) ;;
    *) echo "nightly: ATTN_NIGHTLY_STEPS: unknown step '$s' (correctness fuzz benchmarks report)" >&2; exit 2 ;;
  esac
done
want() { [[ $steps == *" $1 "* ]]; }
part_of() { # <variable> <value>: "K N", or exit 2 naming the variable
  if ! [[ $2 =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] || [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ]; then
    echo "nightly: $1 '$2': expected K/N with 1 <= K <= N" >&2
    exit 2
  fi
  echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}
read -r k n < <(part_of ATTN_NIGHTLY_BENCH_PART "${ATTN_NIGHTLY_BENCH_PART:-1/1}") && [ -n "${n:-}" ] || exit 2
read -r ck cn < <(part_of ATTN_NIGHTLY_CORR_PART "${ATTN_NIGHTLY_CORR_PART:-1/1}") && [ -n "${cn:-}" ] || exit 2
gpus=${ATTN_NIGHTLY_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
[[ $gpus =~ ^[0-9]+$ ]] || { echo "nightly: ATTN_NIGHTLY_GPUS '$gpus': expected a count" >&2; exit 2; }
spec=() jobs_tests=${ATTN_JOBS_TESTS:-8} jobs_bench=1 spread=OFF
mkdir -p "$build" "$art"
if [ "$gpus" -gt 1 ]; then
  py resource_spec -o "$build/resources.json" || exit 2
  spec=(--resource-spec-file "$build/resources.json")
  jobs_tests=${ATTN_JOBS_TESTS:-$((8 * gpus))} jobs_bench=$gpus spread=ON
fi
echo "== configure and build in $build${pyk:+ (Python kernels: $pyk)}, $gpus GPU(s); steps:$steps(correctness part $ck/$cn, benchmarks part $k/$n)"
attn_configure_build "$build" "-DATTN_PYTHON_KERNELS=$pyk" "-DATTN_BENCHMARKS_SPREAD=$spread" || exit 2
rc_of() { cat "$art/$1.rc" 2>/dev/null || echo "not run"; } # a step's exit status, from whichever invocation ran it
if want correctness; then # the nightly's first step: the statuses of an earlier nightly's go
  [ "$ck" -eq 1 ] && rm -f "$art/correctness.rc" "$art/correctness.junit.xml" "$art"/correctness-*of*.junit.xml \
                           "$art/fuzz.rc" "$art/benchmarks.rc" "$art/benchmarks.stamp"
  echo "== correctness (part $ck of $cn), the version-2 features' full cross product (label features_full), long sequences (label long), the library kernels' matrix (label library_matrix), the harness's own GPU checks (label harness: its device memory, and the benchmarks' timer)"
  labels=(-L "^(correctness|features_full|long|library_matrix|harness)$")
  sel=() suffix=""
  if [ "$cn" -gt 1 ]; then # every cn-th test
    mapfile -t sel < <("$ATTN_ROOT/scripts/test_part.sh" "$build" "$ck/$cn" "${labels[@]}") && [ ${#sel[@]} -gt 0 ] || exit 2
    suffix="-${ck}of$cn"
  fi
  ctest --test-dir "$build" "${labels[@]}" "${sel[@]}" "${spec[@]}" -j "$jobs_tests" \
        --output-junit "$art/correctness$suffix.junit.xml" >"$art/correctness$suffix.log" 2>&1
  rc=$?
  prev_rc=$(cat "$art/correctness.rc" 2>/dev/null || echo 0)
  echo $((rc > prev_rc ? rc : prev_rc)) >"$art/correctness.rc"
  if [ "$ck" -eq "$cn" ]; then # the parts as one file (a part missing: the merge fails, and so does the step)
    parts=("$art/correctness.junit.xml")
    [ "$cn" -gt 1 ] && parts=($(for i in $(seq 1 "$cn"); do echo "$art/correctness-${i}of$cn.junit.xml"; done))
    merged=()
    [ "$cn" -gt 1 ] && merged=(--merged "$art/correctness.junit.xml")
    py summary "${parts[@]}" "${merged[@]}" | tee "$art/correctness.summary.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || echo 1 >"$art/correctness.rc"
  else
    echo "nightly: correctness part $ck/$cn exit $rc; next: ATTN_NIGHTLY_CORR_PART=$((ck + 1))/$cn"
  fi
fi
if want fuzz; then
  echo "== fuzz: ${ATTN_FUZZ_RUNS:-1000000} executions per parser (scripts/fuzz.sh; exit 77: no clang, not a failure)"
  "$ATTN_ROOT/scripts/fuzz.sh" --build "$build" --runs "${ATTN_FUZZ_RUNS:-1000000}" --jobs "${ATTN_JOBS_TESTS:-8}" \
    2>&1 | tee "$art/fuzz.log"
  echo "${PIPESTATUS[0]}" >"$art/fuzz.rc"
fi
if want benchmarks; then
  echo "== benchmarks (forward and backward: label benchmark), part $k of $n"
  sel=() suffix=""
  if [ "$n" -gt 1 ]; then # every n-th benchmark; part 1 starts the run, part n collects it
    mapfile -t sel < <("$ATTN_ROOT/scripts/bench_part.sh" "$build" "$k/$n" "$@") && [ ${#sel[@]} -gt 0 ] || exit 2
    suffix="-${k}of$n"
  fi
  [ "$k" -eq 1 ] && { touch "$art/benchmarks.stamp"; rm -f "$art/benchmarks.rc"; }
  ctest --test-dir "$build" -L benchmark "${spec[@]}" -j "$jobs_bench" --output-junit "$art/benchmark$suffix.junit.xml" \
        "$@" "${sel[@]}" >"$art/benchmark$suffix.log" 2>&1
  rc=$?
  prev_rc=$(cat "$art/benchmarks.rc" 2>/dev/null || echo 0)
  echo $((rc > prev_rc ? rc : prev_rc)) >"$art/benchmarks.rc"
  [ "$k" -lt "$n" ] && echo "nightly: benchmarks part $k/$n exit $rc; next: ATTN_NIGHTLY_BENCH_PART=$((k + 1))/$n"
fi
want report || { echo "nightly: steps$steps done (correctness $(rc_of correctness), fuzz $(rc_of fuzz), benchmarks $(rc_of benchmarks))"; exit 0; }
new=$([ -f "$art/benchmarks.stamp" ] && find "$results" -path '*/benchmarks/20*.json' -newer "$art/benchmarks.stamp" | sort | tail -1)
if [ -z "$new" ]; then
  echo "nightly: the benchmark run wrote no results file (no GPU, the benchmarks step not run or not finished? see $art/benchmark*.log)"
  exit 3
fi
dir=$(dirname "$new")
run=$(basename "$new" .json)
nightly="$(dirname "$dir")/nightly"
cp "$new" "$art/$run.full.json"
# the previous run: the earlier results file of this GPU timing the most of this run's tests
# (the latest of those); a new results file that is not a good one stops the nightly here
prev=$(py results previous "$new" "$dir"/20*.json "$dir"/20*.json.gz) || exit 2
regressions=0
mkdir -p "$art/report"
if [ -n "$prev" ]; then
  echo "== compare with $(basename "$prev")"
  py compare "$prev" "$new" --by cudnn --threshold "${ATTN_NIGHTLY_THRESHOLD:-5}" >"$art/report/compare.md"
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
corr=$(rc_of correctness) fuzz=$(rc_of fuzz) bench=$(rc_of benchmarks)
[ "$corr" = 0 ] && { [ "$fuzz" = 0 ] || [ "$fuzz" = 77 ]; } && [ "$bench" = 0 ] && [ $regressions -eq 0 ] || status=1
[ "$added" -le 300000 ] || { echo "nightly: over the 300 KB a nightly may add (results/README.md)"; status=1; }
{
  echo "## Nightly $run: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
  echo
  echo "- correctness: exit $corr; $(head -1 "$art/correctness.summary.txt" 2>/dev/null | sed 's/^summary of [^:]*: //')"
  echo "- fuzz: exit $fuzz; $(grep -c '^fuzz .* executions' "$art/fuzz.log" 2>/dev/null) parsers fuzzed (fuzz.log)$([ "$fuzz" = 77 ] && echo "; NOT RUN: $(grep -m1 '^SKIPPED' "$art/fuzz.log" | cut -c1-200)")"
  echo "- benchmarks: exit $bench; regressions against $([ -n "$prev" ] && basename "$prev" || echo "no earlier run"): $regressions$([ -n "$prev" ] && echo " ($(tail -1 "$art/report/compare.md"))")"
  echo "- committed results: $added bytes (the rule: at most 300000)$([ "$added" -le 300000 ] || echo ": OVER")"
  echo
  cat "$art/report/report.md"
} >"$art/verdict.md"
[ -n "${GITHUB_STEP_SUMMARY:-}" ] && cat "$art/verdict.md" >>"$GITHUB_STEP_SUMMARY"
echo "nightly: correctness exit $corr, fuzz exit $fuzz, benchmarks exit $bench, $regressions regression(s); report $nightly/$run-report.md"
exit $status
