#!/usr/bin/env bash
# One compute-sanitizer run of the correctness suite's `launch` check (CTest's sanitize/*
# tests call this): any report fails the test.
#   scripts/sanitize.sh <memcheck|racecheck|synccheck|initcheck> <attn_correctness> [args...]
# The launch check runs no reference (no cuBLAS): every CUDA kernel in the process is the
# kernel under test's or the harness's own input generator, so nothing needs filtering and
# a plugin is checked exactly as a built-in kernel is.
# Exit 0 clean, 1 reports or a failure, 2 bad arguments, 77 no GPU or no compute-sanitizer.
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "usage: $0 <memcheck|racecheck|synccheck|initcheck> <attn_correctness> [args...]"
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
case ${1:-} in
  memcheck|racecheck|synccheck|initcheck) ;;
  *) echo "sanitize: expected a tool (memcheck, racecheck, synccheck or initcheck), got '${1:-}'" >&2; exit 2 ;;
esac
[ $# -ge 2 ] || { echo "sanitize: expected the attn_correctness command after '$1'" >&2; exit 2; }
tool=$1
shift
san=${ATTN_COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$san" ] || { echo "SKIPPED: compute-sanitizer not found (set ATTN_COMPUTE_SANITIZER)"; exit 77; }
# the suite's own GPU check, with no check selected: exits 77 without a GPU
probe=$(CK_RUN_CASE=none "$@" 2>&1)
[ $? -eq 77 ] && { echo "$probe" | tail -1; exit 77; }
# the harness's buffers by cudaMalloc, not from its pool (harness/device_memory.h): the tool
# then sees each as an allocation of its own
ATTN_DEVICE_POOL=0 "$san" --tool "$tool" --error-exitcode 86 "$@"
rc=$?
case $rc in
  0) echo "sanitize: $tool clean"; exit 0 ;;
  86) echo "sanitize: $tool reported errors (above)"; exit 1 ;;
  77) exit 77 ;;
  *) echo "sanitize: exit $rc"; exit 1 ;;
esac
