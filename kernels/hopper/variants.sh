#!/bin/bash
# Builds hopper's dev test once per variant (compile-time switches), checks each variant's
# correctness, then times them all side by side, ROUNDS times in turn, and prints the median
# TFLOP/s of each config beside the first variant's (bench_compare.py). On the GPU machine:
#
#   kernels/hopper/variants.sh OUT_DIR "def=" "c2=-DHOPPER_D64_THREE_FROM=1073741824" "wb=-DHOPPER_WAIT_BOUNDARY=1"
#
# OUT_DIR gets four files: build.log, tests.log (each variant's correctness run), bench.log and
# compare.md; the binaries go to $TMPDIR (default /tmp). ROUNDS (default 2) and NVCC_ARCH
# (default sm_90a) from the environment. Exit 1 if a variant fails to build or any of its
# correctness cases fails (the timing still runs for those that built).
set -u
out=$1; shift
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR NAME=FLAGS [NAME=FLAGS ...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
kernels=$(dirname "$here")
bin=$(mktemp -d "${TMPDIR:-/tmp}/hopper-variants.XXXXXX")
mkdir -p "$out"
rounds=${ROUNDS:-2}
names=()
for v in "$@"; do
    name=${v%%=*}; flags=${v#*=}
    [ -n "$name" ] && [ "$name" != "$v" ] || { echo "variants: '$v' is not NAME=FLAGS" >&2; exit 2; }
    names+=("$name")
    # shellcheck disable=SC2086  # the flags are words
    nvcc -std=c++17 -O3 -arch=${NVCC_ARCH:-sm_90a} -lineinfo -I"$kernels" $flags -o "$bin/hd_$name" \
        "$here/dev_test.cu" "$here/hopper.cu" > "$bin/build-$name.log" 2>&1 &
done
wait
status=0
: > "$out/build.log"
: > "$out/tests.log"
for name in "${names[@]}"; do
    { echo "=== $name"; cat "$bin/build-$name.log"; } >> "$out/build.log"
    if [ ! -x "$bin/hd_$name" ]; then
        echo "variant $name: build failed (build.log)"; status=1; continue
    fi
    echo "=== $name" >> "$out/tests.log"
    timeout 300 "$bin/hd_$name" > "$bin/tests-$name.log" 2>&1
    rc=$?
    cat "$bin/tests-$name.log" >> "$out/tests.log"
    echo "variant $name: correctness rc=$rc: $(grep -E 'cases passed' "$bin/tests-$name.log")"
    [ $rc -eq 0 ] || status=1
done
: > "$out/bench.log"
for r in $(seq 1 "$rounds"); do
    for name in "${names[@]}"; do
        [ -x "$bin/hd_$name" ] || continue
        echo "=== $name round $r" >> "$out/bench.log"
        timeout 120 "$bin/hd_$name" --bench-only >> "$out/bench.log" 2>&1
    done
done
python3 "$here/bench_compare.py" "$out/bench.log" "${names[0]}" | tee "$out/compare.md"
echo "binaries (for ncu: hd_NAME --only d:dtype:mask:S): $bin"
exit $status
