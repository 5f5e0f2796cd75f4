#!/usr/bin/env bash
# The main job: set up, build, run the correctness suite on this machine's GPU, summarize.
#   scripts/run-correctness.sh [ctest arguments...]     e.g. -R 'simple/bf16' or -L d128
# Environment: ATTN_BUILD_DIR (default build/), ATTN_PLUGINS (;-separated plugin paths),
# ATTN_PYTHON_KERNELS (Python kernels, python/README.md),
# ATTN_CMAKE_ARGS (more configure arguments), ATTN_JOBS (build jobs), ATTN_JOBS_TESTS
# (parallel tests, default 8), ATTN_JUNIT (JUnit file; default in the build dir),
# ATTN_REQUIRE_GPU=1 (GPU CI runners: fail when no test ran on a GPU; without it the last line
# only says so).
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "usage: $0 [ctest arguments...]"
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
source "$(dirname "$0")/env.sh"
build=${ATTN_BUILD_DIR:-$ATTN_ROOT/build}
junit=${ATTN_JUNIT:-$build/junit-correctness.xml}
echo "== configure and build in $build"
attn_configure_build "$build" ${ATTN_PLUGINS:+-DATTN_PLUGINS="$ATTN_PLUGINS"} \
  ${ATTN_PYTHON_KERNELS:+-DATTN_PYTHON_KERNELS="$ATTN_PYTHON_KERNELS"} ${ATTN_CMAKE_ARGS:-}
echo "== ctest -L correctness"
status=0
start=$(date +%s)
ctest --test-dir "$build" -L correctness -j "${ATTN_JOBS_TESTS:-8}" --output-junit "$junit" \
      "$@" >"$build/ctest-correctness.log" 2>&1 || status=$?
echo "== wall time $(( $(date +%s) - start )) s; log $build/ctest-correctness.log; JUnit $junit"
require=()
[ "${ATTN_REQUIRE_GPU:-0}" = 1 ] && require=(--require-gpu)
python3 "$ATTN_ROOT/scripts/summary.py" "$junit" "${require[@]}" || status=$?
exit $status
