#!/usr/bin/env bash
# Fuzzing the parsers of the files a user writes (fuzz/; README, Fuzzing): each libFuzzer
# target from its committed corpus fuzz/corpus/<target>/ (read only: what the fuzzer adds goes
# to a scratch folder), AddressSanitizer and UBSan reports fatal, leaks detected.
#
#   scripts/fuzz.sh [--build DIR] [--runs N | --time S] [--jobs J] [TARGET...]
#
# --runs N: N executions per target (the nightly: 1000000, the default); --time S: S seconds per
# target (CTest's fuzz/<target>: 5); --jobs J: J targets at a time (default 1). TARGET: one of
# fuzz/targets.cmake's (default: all). --build: the build directory (default $ATTN_BUILD_DIR,
# else <repo>/build). Inputs are at most 8192 bytes (a longer seed is cut).
# Prints a line per target: its executions, seconds and executions per second. A finding (a
# crash, a leak, a sanitizer report, a broken invariant of the target): the report (the
# target's log, in <build>/fuzz/logs/), the input that caused it (<build>/fuzz/artifacts/) and
# how to keep it as a unit test (a file in fuzz/corpus/<target>/, replayed by unit/fuzz/<target>).
# Exit 0: no finding; 1: a finding, or a target not built; 2: bad arguments; 77: the targets
# are not built (no clang that links libFuzzer: the reason is printed).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: scripts/fuzz.sh [--build DIR] [--runs N | --time S] [--jobs J] [TARGET...]"
bad() { echo "fuzz.sh: $*" >&2; echo "$usage" >&2; exit 2; }
build=${ATTN_BUILD_DIR:-$root/build}
limit=(-runs=1000000)
jobs=1
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) echo "$usage"; sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    --build) [ $# -ge 2 ] || bad "--build needs a directory"; build=$2; shift 2 ;;
    --runs|--time|--jobs)
      [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]{0,9}$ ]] || bad "$1 needs a positive integer"
      case $1 in
        --runs) limit=(-runs="$2") ;;
        --time) limit=(-max_total_time="$2") ;;
        --jobs) jobs=$2 ;;
      esac
      shift 2 ;;
    -*) bad "unknown option $1" ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=$(sed -n 's/^set(ATTN_FUZZ_TARGETS \(.*\))$/\1/p' "$root/fuzz/targets.cmake")
for t in "${targets[@]}"; do
  [[ " $all " == *" $t "* ]] || bad "unknown target '$t' (the targets: $all)"
done
[ ${#targets[@]} -gt 0 ] || read -ra targets <<<"$all"
skipped=$build/fuzz/libfuzzer-skipped.txt
if [ -f "$skipped" ]; then
  echo "SKIPPED: the fuzz targets are not built: $(cat "$skipped")"
  exit 77
fi
bin=$build/fuzz/libfuzzer
mkdir -p "$build/fuzz/logs" || exit 1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# One target; its lines go to <log>.summary, its exit status is the finding's (0: none).
fuzz_one() {
  local t=$1 exe=$bin/fuzz_$1 log=$build/fuzz/logs/$1.log art=$build/fuzz/artifacts/$1
  local work start end rc execs seeds corpus f
  if [ ! -x "$exe" ]; then
    echo "fuzz $t: $exe is not built (configure and build $build first)"
    return 1
  fi
  work=$(mktemp -d) || return 1
  rm -rf "$art" && mkdir -p "$art" # this run's findings only
  start=$(date +%s.%N)
  # -close_fd_mask=3: the target's own output goes (attn_results prints per input); libFuzzer's
  # and the sanitizers' reports stay. Exit codes: 1 for a finding (libFuzzer's 77 is CTest's skip).
  "$exe" "${limit[@]}" -max_len=8192 -error_exitcode=1 -timeout_exitcode=1 -timeout=10 -rss_limit_mb=2048 \
    -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$art/" "$work" "$root/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  rm -rf "$work"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  seeds=$(sed -n 's/.*INITED .*corp: \([0-9]*\)\/.*/\1/p' "$log" | tail -1)
  corpus=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' "$log" | tail -1)
  awk -v t="$t" -v n="${execs:-0}" -v s0="$start" -v s1="$end" -v a="${seeds:-?}" -v b="${corpus:-?}" \
      'BEGIN { s = s1 - s0; printf "fuzz %s: %d executions in %.1f s, %.0f/s; corpus %s inputs, %s after\n", t, n, s, (s > 0 ? n / s : 0), a, b }'
  [ $rc -eq 0 ] && return 0
  echo "fuzz $t: FINDING (exit $rc); the report ($log):"
  grep -v '^#[0-9]' "$log" | tail -40 | sed 's/^/  /'
  for f in "$art"/*; do
    [ -f "$f" ] || continue
    echo "  input: $f; reproduce: $exe $f"
    echo "  keep it as a unit test: cp $f $root/fuzz/corpus/$t/<what it is> (unit/fuzz/$t replays it)"
  done
  return 1
}

pids=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$t" >"$build/fuzz/logs/$t.summary" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$build/fuzz/logs/${targets[$i]}.summary"
done
exit $status
