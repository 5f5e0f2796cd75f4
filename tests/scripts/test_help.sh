#!/usr/bin/env bash
# --help (and -h) on every program the build makes and on every script (scripts/*.sh,
# scripts/*.py, .ci/*): exit 0, the usage on stdout (its first line "usage: ..."), nothing on
# stderr, and nothing done first: no file written in the folder it runs in, and none of the
# commands a script runs (cmake, ctest, apt-get, nvidia-smi, ...) started (stubs on PATH report
# it). A program also refuses an unknown option: a non-zero exit and a line on stderr naming it.
#   test_help.sh SOURCE_DIR PROGRAMS_FILE     (PROGRAMS_FILE: one program's path a line, the
#                                              list tests/CMakeLists.txt collects)
set -uo pipefail
src=$1
programs=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/stubs" "$work/cwd"
for c in apt-get apt dpkg cmake ctest make ninja nvcc nvidia-smi compute-sanitizer ncu nsys; do
  printf '#!/bin/sh\necho "ran %s before handling its arguments" >&2\nexit 97\n' "$c" >"$work/stubs/$c"
  chmod +x "$work/stubs/$c"
done
export PATH="$work/stubs:$PATH" ATTN_BUILD_DIR="$work/build" ATTN_ARTIFACTS="$work/artifacts"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# <what> <command...>: --help and -h each exit 0 with the usage on stdout and nothing on stderr
check_help() {
  local what=$1 flag out err rc
  shift
  for flag in --help -h; do
    rc=0
    (cd "$work/cwd" && timeout 10 "$@" "$flag" >"$work/out" 2>"$work/err") || rc=$?
    out=$(head -1 "$work/out")
    err=$(head -3 "$work/err")
    if [ $rc -ne 0 ] || [ "${out#usage: }" = "$out" ] || [ -n "$err" ]; then
      fail "$what $flag: exit $rc, stdout '${out:0:80}', stderr '${err:0:200}'"
    fi
  done
  if [ -n "$(ls -A "$work/cwd")" ]; then
    fail "$what --help wrote $(ls -A "$work/cwd" | head -3 | tr '\n' ' ')"
    rm -rf "${work:?}/cwd" && mkdir "$work/cwd"
  fi
}

# <program>: an unknown option is refused, naming it
check_bad_option() {
  local rc=0
  (cd "$work/cwd" && timeout 10 "$1" --no-such-option >/dev/null 2>"$work/err") || rc=$?
  if [ $rc -eq 0 ] || ! grep -q -- "--no-such-option" "$work/err"; then
    fail "$(basename "$1") --no-such-option: exit $rc, stderr '$(head -c 200 "$work/err")'"
  fi
}

n=0
while read -r p; do
  [ -n "$p" ] || continue
  [ -x "$p" ] || { fail "$p: not built"; continue; }
  check_help "$(basename "$p")" "$p"
  check_bad_option "$p"
  n=$((n + 1))
done <"$programs"
[ $n -ge 10 ] || fail "only $n programs in $programs"
s=0
for f in "$src"/scripts/*.sh "$src"/.ci/*; do
  check_help "${f#"$src"/}" bash "$f"
  s=$((s + 1))
done
for f in "$src"/scripts/*.py; do
  check_help "${f#"$src"/}" python3 "$f"
  s=$((s + 1))
done
[ $failures -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "HELP-OK: $n programs and $s scripts"
