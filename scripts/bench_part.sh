#!/usr/bin/env bash
# The CTest arguments that select part K of N of the benchmarks in build directory DIR: every
# N-th of the tests `ctest -L benchmark [filters]` lists (in its order), with benchmark/prepare
# (which starts a run) only in part 1 and benchmark/collect (which writes the results file) only
# in part N, so that parts 1 .. N run in order make one run (scripts/nightly.sh,
# ATTN_NIGHTLY_BENCH_PART). One argument a line; none for 1/1. Exit 2 on a bad K/N, a part
# with no test, or a test name CTest's -R cannot take as it is.
#   scripts/bench_part.sh DIR K/N [ctest filters...]
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "usage: $0 DIR K/N [ctest filters...]"
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
[ $# -ge 2 ] || { echo "usage: $0 DIR K/N [ctest filters...]" >&2; exit 2; }
build=$1 part=$2
shift 2
if ! [[ $part =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] || [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ]; then
  echo "bench_part: '$part': expected K/N with 1 <= K <= N" >&2
  exit 2
fi
k=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]}
[ "$n" -eq 1 ] && exit 0
names=$(ctest --test-dir "$build" -N -L benchmark "$@" | sed -n 's/^ *Test *#[0-9]*: //p' |
        grep -Ev '^benchmark/(prepare|collect)$' | awk -v k="$k" -v n="$n" '(NR - k) % n == 0')
[ -n "$names" ] || { echo "bench_part: part $k/$n of the benchmarks in $build selects no test" >&2; exit 2; }
if printf '%s\n' "$names" | grep -qv '^[A-Za-z0-9_./-]*$'; then
  echo "bench_part: a benchmark name outside [A-Za-z0-9_./-], which -R would misread" >&2
  exit 2
fi
echo -R
echo "^($(printf '%s\n' "$names" | sed 's/[.]/[.]/g' | paste -sd'|'))\$"
[ "$k" -gt 1 ] && printf '%s\n' -FS bench_run # no reset of the run the earlier parts began
[ "$k" -lt "$n" ] && printf '%s\n' -FC bench_run # no results file before the last part
exit 0
