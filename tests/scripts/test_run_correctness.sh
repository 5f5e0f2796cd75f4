#!/usr/bin/env bash
# scripts/run-correctness.sh where no GPU test ran (ctest stubbed to write a JUnit file of
# skipped tests): the last line says so; ATTN_REQUIRE_GPU=1 makes it fail. With a JUnit file
# of tests that ran on a GPU, neither.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/scripts" "$dir/bin" "$dir/build"
cp "$root/scripts/run-correctness.sh" "$dir/scripts/"
cp -r "$root/scripts/summary.py" "$root/scripts/attn" "$dir/scripts/"
# env.sh stand-in: no configure or build
printf 'ATTN_ROOT=%s\nattn_configure_build() { :; }\n' "$dir" > "$dir/scripts/env.sh"
cat > "$dir/bin/ctest" <<'SH'
#!/bin/sh
touch "$(dirname "$0")/../ctest-ran"
while [ $# -gt 0 ]; do [ "$1" = --output-junit ] && cp "$FAKE_JUNIT" "$2"; shift; done
SH
chmod +x "$dir/bin/ctest"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run <junit> [env...]: prints the last line, then the exit status
  local junit=$1 rc=0 out; shift
  out=$(env PATH="$dir/bin:$PATH" FAKE_JUNIT="$junit" ATTN_BUILD_DIR="$dir/build" "$@" \
        bash "$dir/scripts/run-correctness.sh" 2>&1) || rc=$?
  printf '%s\nexit=%s\n' "$(printf '%s\n' "$out" | tail -1)" "$rc"
}
out=$(run "$here/junit_no_gpu.xml")
case $out in "NO GPU TEST RAN: "*"exit=0") ;; *) fail "no GPU, not required: $out";; esac
out=$(run "$here/junit_no_gpu.xml" ATTN_REQUIRE_GPU=1)
case $out in "NO GPU TEST RAN: "*"exit=3") ;; *) fail "no GPU, ATTN_REQUIRE_GPU=1: $out";; esac
out=$(run "$here/junit.xml" ATTN_REQUIRE_GPU=1)
case $out in *"NO GPU"*|*"exit=3") fail "tests ran on a GPU: $out";; esac
# --help: usage, exit 0, and nothing run (the stubbed ctest leaves a mark)
rm -f "$dir/ctest-ran"
out=$(env PATH="$dir/bin:$PATH" ATTN_BUILD_DIR="$dir/build" bash "$dir/scripts/run-correctness.sh" --help 2>&1) ||
  fail "--help: exit $?: $out"
case $out in "usage: "*"ATTN_REQUIRE_GPU"*) ;; *) fail "--help: $out";; esac
[ ! -e "$dir/ctest-ran" ] || fail "--help ran ctest"
echo "ok: run-correctness"
