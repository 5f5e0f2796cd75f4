#!/usr/bin/env bash
# scripts/bench_part.sh on this build's benchmark list: for 2 and 3 parts, with and without a
# filter, the parts together list every benchmark once, benchmark/prepare only in part 1 and
# benchmark/collect only in the last; a bad K/N exits 2. scripts/test_part.sh on the nightly's
# correctness labels: 2 and 3 parts list every test once; a part selecting none exits 2.
#   tests/scripts/test_bench_part.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
fail() { echo "FAIL: $*"; exit 1; }
listed() { ctest --test-dir "$build" -N -L benchmark "$@" | sed -n 's/^ *Test *#[0-9]*: //p'; }
for filter in "" "-LE benchmark_bwd"; do
  all=$(listed $filter | sort)
  [ "$(printf '%s\n' "$all" | grep -c .)" -gt 4 ] || fail "too few benchmarks listed ($filter)"
  for n in 2 3; do
    union=""
    for k in $(seq 1 "$n"); do
      mapfile -t sel < <("$src/scripts/bench_part.sh" "$build" "$k/$n" $filter)
      [ ${#sel[@]} -ge 2 ] || fail "part $k/$n ($filter): no selection"
      part=$(listed $filter "${sel[@]}")
      has() { printf '%s\n' "$part" | grep -qx "benchmark/$1"; }
      if [ "$k" -eq 1 ]; then has prepare || fail "part 1/$n lacks benchmark/prepare"; else ! has prepare || fail "part $k/$n runs benchmark/prepare"; fi
      if [ "$k" -eq "$n" ]; then has collect || fail "part $n/$n lacks benchmark/collect"; else ! has collect || fail "part $k/$n runs benchmark/collect"; fi
      union+=$(printf '%s\n' "$part" | grep -Ev '^benchmark/(prepare|collect)$')$'\n'
    done
    dups=$(printf '%s' "$union" | grep . | sort | uniq -d | head -3)
    [ -z "$dups" ] || fail "$n parts ($filter) list some twice: $dups"
    [ "$(printf '%s' "$union" | grep . | sort)" = "$(printf '%s\n' "$all" | grep -Ev '^benchmark/(prepare|collect)$')" ] ||
      fail "$n parts ($filter) do not cover the list"
    echo "$n parts ($filter): $(printf '%s\n' "$all" | grep -c .) tests, each once"
  done
done
# the nightly's correctness step in parts (scripts/test_part.sh): every test once
labels=(-L "^(correctness|features_full|long|library_matrix|harness)$")
all=$(ctest --test-dir "$build" -N "${labels[@]}" | sed -n 's/^ *Test *#[0-9]*: //p' | sort)
[ "$(printf '%s\n' "$all" | grep -c .)" -gt 4 ] || fail "too few correctness tests listed"
for n in 2 3; do
  union=""
  for k in $(seq 1 "$n"); do
    mapfile -t sel < <("$src/scripts/test_part.sh" "$build" "$k/$n" "${labels[@]}")
    [ ${#sel[@]} -eq 2 ] || fail "correctness part $k/$n: no selection"
    union+=$(ctest --test-dir "$build" -N "${labels[@]}" "${sel[@]}" | sed -n 's/^ *Test *#[0-9]*: //p')$'\n'
  done
  [ "$(printf '%s' "$union" | grep . | sort)" = "$all" ] || fail "$n correctness parts do not list every test once"
  echo "$n correctness parts: $(printf '%s\n' "$all" | grep -c .) tests, each once"
done
[ -z "$("$src/scripts/test_part.sh" "$build" 1/1 "${labels[@]}")" ] || fail "test_part 1/1 selects"
"$src/scripts/test_part.sh" "$build" 1/2 -L no_such_label >/dev/null 2>&1
[ $? -eq 2 ] || fail "an empty part did not exit 2"
for bad in 0/2 3/2 x 1; do
  "$src/scripts/bench_part.sh" "$build" "$bad" >/dev/null 2>&1
  [ $? -eq 2 ] || fail "'$bad' did not exit 2"
done
[ -z "$("$src/scripts/bench_part.sh" "$build" 1/1)" ] || fail "1/1 selects"
echo "bench_part: every check passed"
