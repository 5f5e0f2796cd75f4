#!/usr/bin/env bash
# scripts/bisect.sh (or the script given as $1) on a throwaway repository whose "GPU tests"
# skip (77) unless FAKE_GPU is set, directly and under `git bisect run`: good, bad, skip (a
# commit that does not build, a straddling timing, no GPU: never good), and abort (>= 128,
# one line, no traceback) on every bad argument.
set -euo pipefail
script=${1:-$(cd "$(dirname "$0")/.." && pwd)/scripts/bisect.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/repo" "$work/files"
cd "$work/repo"
git init -q . && git config user.email t@example.com && git config user.name t
# The harness's shape: a GPU correctness test, a benchmark between a setup fixture that
# passes without a GPU, and a host-only unit test that passes too. No compiler: "building"
# checks the syntax of check.sh.
cat > CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.20)
project(t NONE)
enable_testing()
add_custom_target(syntax ALL COMMAND sh -n ${CMAKE_SOURCE_DIR}/check.sh)
set(fragments ${CMAKE_BINARY_DIR}/benchmark-fragments)
add_test(NAME correctness/check COMMAND sh ${CMAKE_SOURCE_DIR}/check.sh)
add_test(NAME benchmark/prepare COMMAND ${CMAKE_COMMAND} -E make_directory ${fragments})
add_test(NAME benchmark/k COMMAND sh ${CMAKE_SOURCE_DIR}/bench.sh timing.json ${fragments}/benchmark.k.json)
add_test(NAME benchmark/bwd/k/fp16/d64/full/s4
         COMMAND sh ${CMAKE_SOURCE_DIR}/bench.sh bwd_timing.json ${fragments}/benchmark.bwd.k.fp16.d64.full.s4.json)
add_test(NAME unit/host COMMAND ${CMAKE_COMMAND} -E true)
set_tests_properties(correctness/check PROPERTIES LABELS "correctness;gpu" SKIP_RETURN_CODE 77)
set_tests_properties(benchmark/prepare PROPERTIES LABELS benchmark FIXTURES_SETUP bench_run)
set_tests_properties(benchmark/k benchmark/bwd/k/fp16/d64/full/s4 PROPERTIES LABELS "benchmark;gpu"
                     SKIP_RETURN_CODE 77 FIXTURES_REQUIRED bench_run)
set_tests_properties(unit/host PROPERTIES LABELS unit)
CM
echo '[ -n "${FAKE_GPU:-}" ] || exit 77; cp "$(dirname "$0")/$1" "$2"' > bench.sh
# A forward benchmark (timing.json) and a backward one (bwd_timing.json, "pass": "bwd", slower
# from c2 on while the forward slows down at c5: a bisect of each finds its own commit).
commit() { # <message> <exit status of the check, or a syntax error> <ci_lo> <ci_hi> <bwd ci_lo> <bwd ci_hi>
  printf '[ -n "${FAKE_GPU:-}" ] || exit 77\nexit %s\n' "$2" > check.sh
  printf '{"kernel_timing": {"median_ms": %s, "ci_lo_ms": %s, "ci_hi_ms": %s}}\n' "$3" "$3" "$4" > timing.json
  printf '{"pass": "bwd", "kernel_timing": {"median_ms": %s, "ci_lo_ms": %s, "ci_hi_ms": %s}}\n' "$5" "$5" "$6" \
    > bwd_timing.json
  git add -A; git commit -qm "$1"; git rev-parse HEAD
}
c1=$(commit good1 '0' 0.95 1.0 1.9 2.0)
c2=$(commit good2 '0 # 2' 0.96 1.01 3.0 3.1)
c3=$(commit nobuild '0 )' 0.95 1.0 3.0 3.1)
c4=$(commit good4 '0 # 4' 0.97 1.02 3.0 3.1)
c5=$(commit bad5 '1' 1.5 1.6 3.0 3.1)
c6=$(commit bad6 '1 # 6' 1.5 1.7 3.0 3.1)
c7=$(commit straddle '0 # 7' 1.0 1.2 3.0 3.1)

files=$work/files
echo '{"tests": [{"test": "benchmark/k", "kernel_timing": {"median_ms": 1.0}}]}' > "$files/base.json"
echo '{"tests": [{"test": "benchmark/other", "kernel_timing": {"median_ms": 1.0}}]}' > "$files/other.json"
echo '{"tests": [{"test": "benchmark/k", "verdict": "skip"}]}' > "$files/notiming.json"
head -c 256 /bin/sh > "$files/binary.json"
printf '\037\213garbage' > "$files/badgz.json"
echo 'not json' > "$files/text.json"
gzip -c "$files/base.json" > "$files/base.json.gz"
bwd=benchmark/bwd/k/fp16/d64/full/s4
echo '{"tests": [{"test": "benchmark/k", "kernel_timing": {"median_ms": 1.0}},
  {"test": "'$bwd'", "pass": "bwd", "kernel_timing": {"median_ms": 2.0}}]}' > "$files/bwd_base.json"
sed 's/"pass": "bwd"/"pass": "fwd"/' "$files/bwd_base.json" > "$files/bwd_as_fwd.json"
sed 's/"pass": "bwd", //' "$files/bwd_base.json" > "$files/bwd_no_pass.json"

fail() { echo "FAIL: $*"; exit 1; }
expect() { # <expected exit test> <description> <command...>
  local want=$1 what=$2; shift 2
  set +e; "$@" >"$work/out.log" 2>&1; local rc=$?; set -e
  eval "[ $rc $want ]" || { cat "$work/out.log"; fail "$what: exit $rc, expected $want"; }
  echo "ok: $what (exit $rc): $(tail -n1 "$work/out.log")"
}
export ATTN_BISECT_BUILD="$work/build-bisect"
unset FAKE_GPU
gpu=(env FAKE_GPU=1 "$script")
nogpu=(env -u FAKE_GPU "$script")
perf=(perf benchmark/k --baseline "$files/base.json")
git checkout -q "$c3"; expect "-eq 125" "a commit that does not build is skipped" "${gpu[@]}" correctness -R check
git checkout -q "$c4"; expect "-eq 0" "a passing commit is good" "${gpu[@]}" correctness -R check
git checkout -q "$c5"; expect "-eq 1" "a failing commit is bad" "${gpu[@]}" correctness -R check
git checkout -q "$c4"; expect "-eq 0" "a timing under the limit is good" "${gpu[@]}" "${perf[@]}" --slower 1.1
git checkout -q "$c4"; expect "-eq 0" "a gzip-compressed baseline is read" "${gpu[@]}" perf benchmark/k --baseline "$files/base.json.gz"
git checkout -q "$c5"; expect "-eq 1" "a timing above the limit is bad" "${gpu[@]}" "${perf[@]}"
git checkout -q "$c7"; expect "-eq 125" "a timing straddling the limit is skipped" "${gpu[@]}" "${perf[@]}"
git checkout -q "$c3"; expect "-eq 125" "perf skips a commit that does not build" "${gpu[@]}" "${perf[@]}"
# the backward's benchmark by its name, against the baseline's backward record
bperf=(perf "$bwd" --baseline "$files/bwd_base.json")
git checkout -q "$c1"; expect "-eq 0" "a backward under the limit is good" "${gpu[@]}" "${bperf[@]}"
git checkout -q "$c4"; expect "-eq 1" "a backward above the limit is bad (its forward is good)" "${gpu[@]}" "${bperf[@]}"
git checkout -q "$c4"; expect "-eq 0" "the forward of the same commit is good" "${gpu[@]}" perf benchmark/k --baseline "$files/bwd_base.json"
# a result that is not the backward's (a harness that dropped the pass) is not counted
sed -i 's/"pass": "bwd", //' bwd_timing.json
expect "-eq 125" "a backward's result recorded as a forward's is skipped" "${gpu[@]}" "${bperf[@]}"
grep -q "is a fwd benchmark's, the name says bwd" "$work/out.log" || fail "the skip does not say why"
git checkout -q -- bwd_timing.json
# No GPU: the fixture and the unit test pass, the GPU tests skip: never good (here), never
# bad (the no-GPU bisects below cross the bad commits).
git checkout -q "$c4"
expect "-eq 125" "no GPU, a fixture that passes is not good" "${nogpu[@]}" correctness -R benchmark/k
expect "-eq 125" "no GPU, a unit test that passes is not good" "${nogpu[@]}" correctness -R 'check|host'
expect "-eq 125" "no GPU, perf is skipped" "${nogpu[@]}" "${perf[@]}"
expect "-eq 125" "only unit tests selected is skipped" "${gpu[@]}" correctness -L unit
expect "-eq 125" "only a fixture selected is skipped" "${gpu[@]}" correctness -R prepare
expect "-eq 125" "no test selected is skipped" "${gpu[@]}" correctness -R '^nothing$'

# Bad arguments abort (>= 128) with one line; under git bisect run (those marked *) the
# bisect stops, marking nothing.
bad_args=(
  ""
  "bogus"
  "correctness simple/bf16"
  "correctness -R"
  "*correctness -R ("
  "perf"
  "perf --baseline $files/base.json"
  "perf benchmark/k"
  "perf benchmark/k --baseline"
  "perf benchmark/k --baseline $files/missing.json"
  "perf benchmark/k --baseline $files"
  "*perf benchmark/k --baseline $files/binary.json"
  "perf benchmark/k --baseline $files/badgz.json"
  "perf benchmark/k --baseline $files/text.json"
  "*perf benchmark/k --baseline $files/other.json"
  "perf benchmark/k --baseline $files/notiming.json"
  "*perf benchmark/k --baseline $files/base.json --slower abc"
  "*perf benchmark/k --baseline $files/base.json --slower"
  "perf benchmark/k --baseline $files/base.json --slower 0"
  "perf benchmark/k --baseline $files/base.json --slower -1"
  "perf benchmark/k --baseline $files/base.json --slower nan"
  "perf benchmark/k --baseline $files/base.json --slower inf"
  "perf benchmark/k --slower --baseline $files/base.json"
  "perf benchmark/k --baseline $files/base.json --bogus"
  "*perf $bwd --baseline $files/bwd_as_fwd.json"
  "perf $bwd --baseline $files/bwd_no_pass.json"
  "perf $bwd --baseline $files/base.json"
)
marks() { git bisect log | grep -cE '^# (good|bad|skip):' || true; }
in_bisect=0
for args in "${bad_args[@]}"; do
  read -ra argv <<<"${args#\*}"
  expect "-ge 128" "'${args#\*}' aborts" "${gpu[@]}" "${argv[@]}"
  [ "$(wc -l <"$work/out.log")" -eq 1 ] || { cat "$work/out.log"; fail "'$args': not one line"; }
  ! grep -qE 'Traceback|unbound variable|line [0-9]+:' "$work/out.log" || fail "'$args': $(cat "$work/out.log")"
  [ "${args:0:1}" = "*" ] || continue
  in_bisect=$((in_bisect + 1))
  git bisect start "$c6" "$c1" >/dev/null
  set +e; FAKE_GPU=1 git bisect run "$script" "${argv[@]}" >"$work/run.log" 2>&1; rc=$?; set -e
  [ $rc -ne 0 ] && grep -q "exit code 129" "$work/run.log" ||
    { cat "$work/run.log"; fail "'$args': git bisect run did not stop (exit $rc)"; }
  [ "$(marks)" -eq 2 ] || { git bisect log; fail "'$args': git bisect run marked a commit"; }
  git bisect reset >/dev/null 2>&1
done
echo "ok: git bisect run stops, marking nothing, on $in_bisect of the bad argument lists"
# --help prints the usage (0), but under git bisect run a 0 would mark the commit good.
expect "-eq 0" "--help" "$script" --help
grep -q "git bisect run" "$work/out.log" || { cat "$work/out.log"; fail "--help does not print the usage"; }
git bisect start "$c6" "$c1" >/dev/null
set +e; git bisect run "$script" --help >"$work/run.log" 2>&1; rc=$?; set -e
[ $rc -ne 0 ] && grep -q "exit code 129" "$work/run.log" && [ "$(marks)" -eq 2 ] ||
  { cat "$work/run.log"; fail "--help under git bisect run marked a commit"; }
git bisect reset >/dev/null 2>&1
echo "ok: --help under git bisect run stops the bisect (exit $rc)"

bisect_run() { # <FAKE_GPU value or empty> <bisect.sh arguments...>
  local fake=$1; shift
  git bisect start "$c6" "$c1" >/dev/null
  set +e; env ${fake:+FAKE_GPU=$fake} git bisect run "$script" "$@" >"$work/run.log" 2>&1; rc=$?; set -e
}
for mode in correctness perf; do
  args=(correctness -R check); [ $mode = correctness ] || args=("${perf[@]}")
  bisect_run 1 "${args[@]}"
  [ $rc -eq 0 ] && grep -q "^$c5 is the first bad commit" "$work/run.log" ||
    { cat "$work/run.log"; fail "$mode: git bisect run did not name ${c5:0:7} (exit $rc)"; }
  # with this history the bisect lands on the commit that does not build: it must skip it
  git bisect log | grep -q "skip: \[$c3\]" || { git bisect log; fail "$mode: the bisect did not skip ${c3:0:7}"; }
  git bisect reset >/dev/null 2>&1
  echo "ok: $mode: git bisect run names the first bad commit ${c5:0:7} and skips ${c3:0:7}"
done
# the backward's regression (c2), not the forward's (c5)
bisect_run 1 perf "$bwd" --baseline "$files/bwd_base.json"
[ $rc -eq 0 ] && grep -q "^$c2 is the first bad commit" "$work/run.log" ||
  { cat "$work/run.log"; fail "perf $bwd: git bisect run did not name ${c2:0:7} (exit $rc)"; }
git bisect reset >/dev/null 2>&1
echo "ok: perf $bwd: git bisect run names the backward's first bad commit ${c2:0:7}"
# No GPU: every commit is skipped, none marked good or bad, no first bad commit named.
for sel in "correctness -R benchmark/k" "${perf[*]}"; do
  read -ra argv <<<"$sel"
  bisect_run "" "${argv[@]}"
  ! grep -q "is the first bad commit" "$work/run.log" && [ "$(marks)" -gt 2 ] &&
    [ "$(git bisect log | grep -cE '^# (good|bad):')" -eq 2 ] ||
    { cat "$work/run.log"; git bisect log; fail "no GPU, '$sel': git bisect run marked a commit good or bad"; }
  git bisect reset >/dev/null 2>&1
  echo "ok: no GPU, '$sel': git bisect run only skips (exit $rc)"
done
