#!/usr/bin/env bash
# scripts/set_thresholds.py on two synthetic runs: minimum = margin x lowest x (lowest/highest);
# the [gpu]/[peaks] part and other kernels' sections are kept; re-running replaces, not appends.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script=$here/../../scripts/set_thresholds.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/test_gpu_1.ini" <<'INI'
[gpu]
name = Test GPU 1
[peaks]
fp16_tflops = 700
bf16_tflops = 700
bandwidth_gbs = 3000
[other * * * 1-8]
min_speedup_reference = 1
min_roofline = 0.1
INI
fail() { echo "FAIL: $*"; cat "$dir/test_gpu_1.ini"; exit 1; }
for i in 1 2; do
  python3 "$script" "$here/run_a.json" "$here/run_b.json" --kernel k --margin 0.8 --thresholds-dir "$dir" >/dev/null
done
f=$dir/test_gpu_1.ini
# s4: speedups 100 and 80 -> 0.8 x 80 x 80/100 = 51.2; cuDNN 2 and 2 -> 1.6; roofline 0.5 -> 0.4
grep -A3 '^\[k fp16 d64 full 4-4\]' "$f" | grep -q '^min_speedup_reference = 51.2$' || fail "spread-widened minimum"
grep -A3 '^\[k fp16 d64 full 4-4\]' "$f" | grep -q '^min_speedup_cudnn = 1.6$' || fail "cuDNN minimum"
grep -A3 '^\[k fp16 d64 full 4-4\]' "$f" | grep -q '^min_roofline = 0.4$' || fail "roofline minimum"
# s512 (one run, no cuDNN): 0.8 x 1 = 0.8, no cuDNN minimum
grep -A2 '^\[k bf16 d128 causal 512-512\]' "$f" | grep -q '^min_speedup_reference = 0.8$' || fail "single-run minimum"
grep -A3 '^\[k bf16 d128 causal 512-512\]' "$f" | grep -q cudnn && fail "cuDNN minimum without cuDNN"
# a version-2 workload (run_b only): no reference minimum, decode's class names its queries
grep -A2 '^\[k fp16 d128 decode 8192-8192 q16\]' "$f" | grep -q '^min_speedup_cudnn = 2.4$' || fail "decode cuDNN minimum"
grep -A2 '^\[k fp16 d128 decode 8192-8192 q16\]' "$f" | grep -q '^min_roofline = 0.48$' || fail "decode roofline minimum"
grep -A2 '^\[k fp16 d128 decode 8192-8192 q16\]' "$f" | grep -q reference && fail "a reference minimum for a workload"
[ "$(grep -c '^\[k ' "$f")" = 3 ] || fail "sections appended twice"
grep -q '^\[other \* \* \* 1-8\]' "$f" && grep -q '^fp16_tflops = 700' "$f" || fail "kept parts lost"
# --only: run_a alone rewrites only s4 (0.8 x 100 = 80); s512 (0.8, from both runs) is kept
python3 "$script" "$here/run_a.json" --kernel k --margin 0.8 --only '/s4$' --thresholds-dir "$dir" >/dev/null
grep -A1 '^\[k fp16 d64 full 4-4\]' "$f" | grep -q '^min_speedup_reference = 80$' || fail "--only did not rewrite s4"
grep -A2 '^\[k bf16 d128 causal 512-512\]' "$f" | grep -q '^min_speedup_reference = 0.8$' || fail "--only lost s512"
[ "$(grep -c '^\[k ' "$f")" = 3 ] || fail "--only duplicated a section"
[ "$(grep -c '^; k: generated' "$f")" = 2 ] || fail "--only should add its comment line and keep the first"
python3 "$script" "$here/run_a.json" --kernel k --margin 0.8 --only '/s4$' --thresholds-dir "$dir" >/dev/null
[ "$(grep -c '^; k: generated' "$f")" = 2 ] || fail "the same --only twice should replace its comment line"
echo "ok: set_thresholds"
