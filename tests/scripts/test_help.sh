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
mkdir -p "$work/stubs"
for c in apt-get apt dpkg cmake ctest make ninja nvcc nvidia-smi compute-sanitizer ncu nsys; do
  printf '#!/bin/sh\necho "ran %s before handling its arguments" >&2\nexit 97\n' "$c" >"$work/stubs/$c"
  chmod +x "$work/stubs/$c"
done
export PATH="$work/stubs:$PATH" ATTN_BUILD_DIR="$work/build" ATTN_ARTIFACTS="$work/artifacts"

# <id> <what> <command...>: --help and -h each exit 0 with the usage on stdout and nothing
# on stderr, writing nothing; a program (what "program:...") also refuses --no-such-option.
# Failures go to $work/<id>.fail, one line each.
check() {
  local id=$1 what=$2 flag out err rc
  shift 2
  local dir=$work/$id
  mkdir -p "$dir/cwd"
  for flag in --help -h; do
    rc=0
    (cd "$dir/cwd" && timeout 10 "$@" "$flag" >"$dir/out" 2>"$dir/err") || rc=$?
    out=$(head -1 "$dir/out")
    err=$(head -3 "$dir/err" | tr '\n' ' ')
    if [ $rc -ne 0 ] || [ "${out#usage: }" = "$out" ] || [ -n "$err" ]; then
      echo "FAIL: ${what#program:} $flag: exit $rc, stdout '${out:0:80}', stderr '${err:0:200}'" >>"$work/$id.fail"
    fi
  done
  [ -z "$(ls -A "$dir/cwd")" ] || echo "FAIL: ${what#program:} --help wrote $(ls -A "$dir/cwd" | head -3 | tr '\n' ' ')" >>"$work/$id.fail"
  [ "${what#program:}" != "$what" ] || return 0
  rc=0
  (cd "$dir/cwd" && timeout 10 "$@" --no-such-option >/dev/null 2>"$dir/err") || rc=$?
  if [ $rc -eq 0 ] || ! grep -q -- "--no-such-option" "$dir/err"; then
    echo "FAIL: ${what#program:} --no-such-option: exit $rc, stderr '$(head -c 200 "$dir/err" | tr '\n' ' ')'" >>"$work/$id.fail"
  fi
}

# every check in the background, a few at a time (the programs and Python take ~0.1 s to start)
jobs_max=$(( $(nproc) * 2 ))
id=0 n=0 s=0
run() {
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
  id=$((id + 1))
  check "$id" "$@" &
}
while read -r p; do
  [ -n "$p" ] || continue
  if [ -x "$p" ]; then run "program:$(basename "$p")" "$p"; else echo "FAIL: $p: not built" >>"$work/0.fail"; fi
  n=$((n + 1))
done <"$programs"
[ $n -ge 10 ] || echo "FAIL: only $n programs in $programs" >>"$work/0.fail"
for f in "$src"/scripts/*.sh "$src"/.ci/*; do run "${f#"$src"/}" bash "$f"; s=$((s + 1)); done
for f in "$src"/scripts/*.py; do run "${f#"$src"/}" python3 "$f"; s=$((s + 1)); done
wait
if cat "$work"/*.fail 2>/dev/null; then
  echo "$(cat "$work"/*.fail | wc -l) failures"
  exit 1
fi
echo "HELP-OK: $n programs and $s scripts"
