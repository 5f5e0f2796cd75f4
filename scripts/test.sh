#!/usr/bin/env bash
# The project's tests: build, then every test (host unit tests; GPU suites run on a GPU and
# are reported skipped, with the reason, on a machine without one). CI runs this.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "usage: $0 [ctest arguments...]"
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
source "$(dirname "$0")/env.sh"
build=${ATTN_BUILD_DIR:-$ATTN_ROOT/build}
echo "== configure and build in $build"
attn_configure_build "$build"
status=0
ctest --test-dir "$build" -j "$ATTN_JOBS" --output-on-failure --output-junit "$build/junit-all.xml" \
      "$@" >"$build/ctest-all.log" 2>&1 || status=$?
grep -E "^[0-9]+% tests passed|Total Test time" "$build/ctest-all.log" || true
python3 "$ATTN_ROOT/scripts/summary.py" "$build/junit-all.xml"
[ $status = 0 ] || { grep -B2 -A30 "Failed" "$build/ctest-all.log" | head -200; }
exit $status
