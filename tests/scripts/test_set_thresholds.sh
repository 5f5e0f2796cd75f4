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
# what the loader (harness/thresholds.c) would reject is refused, nothing written: exit 2 and
# one line naming the file and the field (NaN, a negative or zero speedup, a head_dim of 0, a
# header longer than inih's 49 characters)
refuse() {  # refuse <name> <python edit of test t> <file named> <field named> [--kernel K]
  local name=$1 edit=$2 file=$3 want=$4 kernel=${5:-k} bad=$dir/bad_$1.json out rc=0
  python3 - "$here/run_a.json" "$bad" "$edit" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = d["tests"][0]; exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
  cp "$f" "$dir/before.ini"
  out=$(python3 "$script" "$bad" --kernel "$kernel" --margin 0.8 --thresholds-dir "$dir" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "$name: exit $rc, expected 2 ($out)"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "$name: not one line: $out"
  case $out in "set_thresholds: "*"$file: "*"$want"*) ;; *) fail "$name: '$out' lacks '$file: ... $want'";; esac
  cmp -s "$f" "$dir/before.ini" || fail "$name: the thresholds file changed"
}
refuse nan 't["baselines"]["reference"]["speedup"] = float("nan")' bad_nan.json "'baselines.reference.speedup' is "
refuse inf 't["roofline_efficiency"] = float("inf")' bad_inf.json "'roofline_efficiency' is "
refuse negative 't["baselines"]["reference"]["speedup"] = -3.0' bad_negative.json "'baselines.reference.speedup' is "
refuse zero 't["baselines"]["cudnn"]["speedup"] = 0.0' bad_zero.json "'baselines.cudnn.speedup' is 0"
refuse roofline 't["roofline_efficiency"] = 1.5' bad_roofline.json "'roofline_efficiency' is 1.5"
refuse d0 't["head_dim"] = 0' bad_d0.json "'head_dim' is "
refuse seqlen 't["seqlen_q"] = t["seqlen_k"] = 2**31' bad_seqlen.json "'seqlen_q' is "
long=my_hopper_plugin_v3_long_kernel_name
refuse long 'for x in d["tests"]: x["kernel"] = "'$long'"' test_gpu_1.ini "section [$long " $long
refuse kernel_name 'pass' "--kernel 'a]b'" "expected 1 to 63 characters" 'a]b'
echo "ok: set_thresholds"
