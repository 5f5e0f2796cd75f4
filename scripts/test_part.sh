#!/usr/bin/env bash
# The CTest arguments that select part K of N of the tests `ctest -N [filters]` lists in build
# directory DIR: every N-th of them, in CTest's order, less those whose names match --drop ERE.
# One argument a line ("-R" and its expression); none for 1/1. Exit 2 on a bad K/N, a part with
# no test, or a test name CTest's -R cannot take as it is. The nightly's correctness and
# benchmarks in slices (scripts/nightly.sh; scripts/bench_part.sh adds the benchmarks' fixtures).
#   scripts/test_part.sh DIR K/N [--drop ERE] [ctest filters...]
set -uo pipefail
usage="usage: $0 DIR K/N [--drop ERE] [ctest filters...]"
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "$usage"
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
build=$1 part=$2 drop='^$'
shift 2
if [ "${1:-}" = --drop ]; then
  [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
  drop=$2
  shift 2
fi
if ! [[ $part =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] || [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ]; then
  echo "test_part: '$part': expected K/N with 1 <= K <= N" >&2
  exit 2
fi
k=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]}
[ "$n" -eq 1 ] && exit 0
names=$(ctest --test-dir "$build" -N "$@" | sed -n 's/^ *Test *#[0-9]*: //p' | grep -Ev -- "$drop" |
        awk -v k="$k" -v n="$n" '(NR - k) % n == 0')
[ -n "$names" ] || { echo "test_part: part $k/$n of the tests ctest -N $* lists in $build selects none" >&2; exit 2; }
if printf '%s\n' "$names" | grep -qv '^[A-Za-z0-9_./-]*$'; then
  echo "test_part: a test name outside [A-Za-z0-9_./-], which -R would misread" >&2
  exit 2
fi
echo -R
echo "^($(printf '%s\n' "$names" | sed 's/[.]/[.]/g' | paste -sd'|'))\$"
