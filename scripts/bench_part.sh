#!/usr/bin/env bash
# The CTest arguments that select part K of N of the benchmarks in build directory DIR: every
# N-th of the tests `ctest -L benchmark [filters]` lists (in its order; scripts/test_part.sh),
# with benchmark/prepare (which starts a run) only in part 1 and benchmark/collect (which writes
# the results file) only in part N, so that parts 1 .. N run in order make one run
# (scripts/nightly.sh, ATTN_NIGHTLY_BENCH_PART). One argument a line; none for 1/1. Exit 2 on a
# bad K/N, a part with no test, or a test name CTest's -R cannot take as it is.
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
sel=$("$(dirname "$0")/test_part.sh" "$build" "$part" --drop '^benchmark/(prepare|collect)$' -L benchmark "$@") || exit 2
[ -z "$sel" ] && exit 0 # 1/1: everything
printf '%s\n' "$sel"
k=${part%/*} n=${part#*/}
[ "$k" -gt 1 ] && printf '%s\n' -FS bench_run # no reset of the run the earlier parts began
[ "$k" -lt "$n" ] && printf '%s\n' -FC bench_run # no results file before the last part
exit 0
