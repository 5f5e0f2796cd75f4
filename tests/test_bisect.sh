#!/usr/bin/env bash
# scripts/bisect.sh under `git bisect run`, on a throwaway repository with a GPU-free test:
# it must name the first bad commit, skip (125) a commit that does not build, and abort
# (>= 128) when every selected test is skipped or none matches.
set -euo pipefail
script=$(cd "$(dirname "$0")/.." && pwd)/scripts/bisect.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q . && git config user.email t@example.com && git config user.name t
cat > CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.20)
project(t C)
enable_testing()
add_executable(t t.c)
add_test(NAME check COMMAND t)
add_executable(gpu gpu.c)
add_test(NAME gpu COMMAND gpu)
set_tests_properties(gpu PROPERTIES SKIP_RETURN_CODE 77)
CM
echo 'int main(void) { return 77; } /* stands for a GPU test on a machine without one */' > gpu.c
commit() { echo "$2" > t.c; git add -A; git commit -qm "$1"; git rev-parse HEAD; }
c1=$(commit good1 'int main(void) { return 0; }')
c2=$(commit good2 'int main(void) { return 0; } /* 2 */')
c3=$(commit nobuild 'int main(void) { return 0 }')
c4=$(commit good4 'int main(void) { return 0; } /* 4 */')
c5=$(commit bad5 'int main(void) { return 1; }')
c6=$(commit bad6 'int main(void) { return 1; } /* 6 */')

fail() { echo "FAIL: $*"; exit 1; }
expect() { # <expected exit test> <description> <command...>
  local want=$1 what=$2; shift 2
  set +e; "$@" >"$work/out.log" 2>&1; local rc=$?; set -e
  eval "[ $rc $want ]" || { cat "$work/out.log"; fail "$what: exit $rc, expected $want"; }
  echo "ok: $what (exit $rc)"
}
export ATTN_BISECT_BUILD="$work/build-bisect"
git checkout -q "$c3"; expect "-eq 125" "a commit that does not build is skipped" "$script" correctness -R '^check$'
git checkout -q "$c4"; expect "-eq 0" "a passing commit is good" "$script" correctness -R '^check$'
git checkout -q "$c5"; expect "-eq 1" "a failing commit is bad" "$script" correctness -R '^check$'
git checkout -q "$c4"; expect "-ge 128" "every test skipped aborts" "$script" correctness -R '^gpu$'
git checkout -q "$c4"; expect "-ge 128" "no test selected aborts" "$script" correctness -R '^nothing$'

git checkout -q "$c6"
git bisect start "$c6" "$c1" >/dev/null
git bisect run "$script" correctness -R '^check$' > bisect.log 2>&1 || { cat bisect.log; fail "git bisect run failed"; }
grep -q "^$c5 is the first bad commit" bisect.log || { cat bisect.log; fail "bisect did not name $c5"; }
echo "ok: git bisect run names the first bad commit ${c5:0:7}"
# with this history the bisect lands on the commit that does not build: it must skip it
git bisect log | grep -q "skip: \[$c3\]" || { git bisect log; fail "the bisect did not skip ${c3:0:7}"; }
echo "ok: the bisect skipped ${c3:0:7}, which does not build"
git bisect reset >/dev/null 2>&1
