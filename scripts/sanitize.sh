#!/usr/bin/env bash
# One compute-sanitizer run of the correctness suite's `accuracy` check (CTest's sanitize/*
# tests call this): any report fails the test.
#   scripts/sanitize.sh <memcheck|racecheck|synccheck|initcheck> <kernel filter> <attn_correctness> [args...]
# The filter (a substring of the CUDA kernel's name, e.g. flash2_fwd_kernel) keeps the
# checking on the kernel under test, not on the reference's cuBLAS kernels.
# Exit 0 clean, 1 reports or a failure, 77 no GPU or no compute-sanitizer.
set -uo pipefail
tool=$1 filter=$2
shift 2
san=${ATTN_COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$san" ] || { echo "SKIPPED: compute-sanitizer not found (set ATTN_COMPUTE_SANITIZER)"; exit 77; }
# the suite's own GPU check, with no check selected: exits 77 without a GPU
probe=$(CK_RUN_CASE=none "$@" 2>&1)
[ $? -eq 77 ] && { echo "$probe" | tail -1; exit 77; }
CK_RUN_CASE=accuracy "$san" --tool "$tool" --error-exitcode 86 --kernel-name "kns=$filter" "$@"
rc=$?
case $rc in
  0) echo "sanitize: $tool clean"; exit 0 ;;
  86) echo "sanitize: $tool reported errors (above)"; exit 1 ;;
  77) exit 77 ;;
  *) echo "sanitize: exit $rc"; exit 1 ;;
esac
