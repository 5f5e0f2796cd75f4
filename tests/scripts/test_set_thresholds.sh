#!/usr/bin/env bash
# scripts/set_thresholds.py on two synthetic runs: minimum = margin x lowest x (lowest/highest);
# the [gpu]/[peaks] part and other kernels' sections are kept; re-running replaces, not appends;
# the backward's passes get their own sections (the pass word after the kernel), and a run of
# one pass replaces that pass's sections only.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script=$here/../../scripts/set_thresholds.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
base_ini() {
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
}
base_ini
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
# a roofline fraction past 1 that attn_benchmark calls valid (a read-mostly kernel against the
# copy's bandwidth) gives a minimum, at most 1: 0.8 x 1.1 = 0.88; 0.9 x 1.25 = 1.125 -> 1
roof() {  # roof <efficiency> <margin> <minimum wanted>
  python3 - "$here/run_a.json" "$dir/roof.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = d["tests"][0]; d["tests"] = [t]
t.update(kernel="r", test=t["test"].replace("/k/", "/r/"), roofline_efficiency=float(sys.argv[3]))
json.dump(d, open(sys.argv[2], "w"))
PY
  python3 "$script" "$dir/roof.json" --kernel r --margin "$2" --thresholds-dir "$dir" >/dev/null || fail "roofline $1 refused"
  grep -A3 '^\[r fp16 d64 full 4-4\]' "$f" | grep -q "^min_roofline = $3\$" || fail "roofline $1: minimum not $3"
}
roof 1.1 0.8 0.88
roof 1.25 0.9 1
refuse d0 't["head_dim"] = 0' bad_d0.json "'head_dim' is "
refuse seqlen 't["seqlen_q"] = t["seqlen_k"] = 2**31' bad_seqlen.json "'seqlen_q' is "
long=my_hopper_plugin_v3_long_kernel_name
refuse long 'for x in d["tests"]: x["kernel"] = "'$long'"' test_gpu_1.ini "section [$long " $long
refuse kernel_name 'pass' "--kernel 'a]b'" "expected 1 to 63 characters" 'a]b'
# the passes (run_passes.json: the forward, backward and forward + backward of one shape, and a
# backward alone): one section each, the forward's without a pass word
base_ini
python3 "$script" "$here/run_passes.json" --kernel k --margin 0.8 --thresholds-dir "$dir" >/dev/null
sec() {  # sec <section> <key> <value>: the section has that line
  awk -v s="[$1]" '$0 == s {on = 1; next} /^\[/ {on = 0} on' "$f" | grep -qx "$2 = $3" || fail "[$1] $2 = $3"
}
sec "k fp16 d64 full 4-4" min_speedup_reference 72
sec "k fp16 d64 full 4-4" min_speedup_cudnn 1.6
sec "k bwd fp16 d64 full 4-4" min_speedup_reference 24
sec "k bwd fp16 d64 full 4-4" min_speedup_cudnn 1.2
sec "k bwd fp16 d64 full 4-4" min_roofline 0.24
sec "k fwd_bwd fp16 d64 full 4-4" min_speedup_reference 20
sec "k fwd_bwd fp16 d64 full 4-4" min_roofline 0.28
sec "k bwd bf16 d128 causal 512-512" min_roofline 0.2
grep -A3 '^\[k bwd bf16 d128 causal 512-512\]' "$f" | grep -q cudnn && fail "a backward cuDNN minimum without cuDNN"
sec "k bwd fp16 d64 full 1024-1024" min_speedup_reference 24
[ "$(grep -c '^\[k ' "$f")" = 5 ] || fail "not one section per pass and class"
grep -q '^; k: generated by set_thresholds.py for passes fwd,bwd,fwd_bwd from run_passes.json' "$f" ||
  fail "the comment does not name the passes"
# the same run again writes the same file (the sections read back as written)
cp "$f" "$dir/passes.ini"
python3 "$script" "$here/run_passes.json" --kernel k --margin 0.8 --thresholds-dir "$dir" >/dev/null
cmp -s "$f" "$dir/passes.ini" || fail "a second run changed the file: $(diff "$dir/passes.ini" "$f")"
# a backward alone (its speedups halved) rewrites the backward's sections only
python3 - "$here/run_passes.json" "$dir/bwd_only.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["tests"] = [t for t in d["tests"] if t["pass"] == "bwd"]
for t in d["tests"]:
    t["baselines"]["reference"]["speedup"] /= 2
json.dump(d, open(sys.argv[2], "w"))
PY
python3 "$script" "$dir/bwd_only.json" --kernel k --margin 0.8 --thresholds-dir "$dir" >/dev/null
sec "k bwd fp16 d64 full 4-4" min_speedup_reference 12
sec "k fp16 d64 full 4-4" min_speedup_reference 72
sec "k fwd_bwd fp16 d64 full 4-4" min_speedup_reference 20
[ "$(grep -c '^\[k ' "$f")" = 5 ] || fail "the backward's run lost or duplicated a section"
[ "$(grep -c '^; k: generated' "$f")" = 2 ] || fail "the backward's run should keep the first comment and add its own"
grep -q '^; k: generated by set_thresholds.py for passes bwd from bwd_only.json' "$f" || fail "the backward's comment"
# a forward alone (run_a.json, no "pass": a results file from before the backward) rewrites
# the forward's sections and keeps the backward's and their comment
python3 "$script" "$here/run_a.json" --kernel k --margin 0.8 --thresholds-dir "$dir" >/dev/null
sec "k fp16 d64 full 4-4" min_speedup_reference 80
sec "k bf16 d128 causal 512-512" min_speedup_reference 0.8
sec "k bwd fp16 d64 full 4-4" min_speedup_reference 12
sec "k fwd_bwd fp16 d64 full 4-4" min_speedup_reference 20
[ "$(grep -c '^\[k ' "$f")" = 6 ] || fail "the forward's run lost or duplicated a section"
grep -q 'for passes bwd from' "$f" && grep -q 'for passes fwd,bwd,fwd_bwd from' "$f" ||
  fail "the forward's run removed a comment on the backward's sections"
# --only rewriting every section an earlier comment of k was on: that comment goes (it would
# describe sections it no longer precedes), and another kernel's comment after k's last
# rewritten section stays with its own sections
base_ini
cat >> "$dir/test_gpu_1.ini" <<'INI'

; k: generated by set_thresholds.py from old.json on 2026-01-01, margin 0.8
[k fp16 d64 full 4-4]
min_speedup_reference = 1

; j: generated by set_thresholds.py from other.json on 2026-01-01, margin 0.8
; why: a hand-written note on j's sections
[j fp16 d64 full 4-4]
min_speedup_reference = 2
INI
python3 "$script" "$here/run_a.json" --kernel k --margin 0.8 --only '/s4$' --thresholds-dir "$dir" >/dev/null
grep -q 'from old.json' "$f" && fail "k's comment on no section of k stayed"
grep -B2 '^\[j fp16 d64 full 4-4\]' "$f" | head -1 | grep -q '^; j: generated by set_thresholds.py from other.json' ||
  fail "j's comment lost or moved"
grep -q '^; why: a hand-written note' "$f" || fail "a hand-written comment lost"
sec "j fp16 d64 full 4-4" min_speedup_reference 2
sec "k fp16 d64 full 4-4" min_speedup_reference 80
# --margins: the kernel's lines in order, a line with a regex rewriting its tests only
# (s4 at 0.5: 0.5 x 80 x 80 / 100 = 32, s512 kept at 0.8 from the first line); a line whose
# regex the runs did not measure is skipped; a kernel without a line takes the '*' line's
base_ini
cat > "$dir/margins.txt" <<'TXT'
# kernel margin [tests regex]
k 0.8
k 0.5 /s4$  # the shortest
k 0.6 /s999$
j 0.1
* 0.7
TXT
out=$(python3 "$script" "$here/run_a.json" "$here/run_b.json" --kernel k --margins "$dir/margins.txt" \
      --thresholds-dir "$dir") || fail "--margins: exit $?"
sec "k fp16 d64 full 4-4" min_speedup_reference 32
sec "k bf16 d128 causal 512-512" min_speedup_reference 0.8
sec "k fp16 d128 decode 8192-8192 q16" min_roofline 0.48
case $out in *"margins.txt:4: no measured benchmark of kernel 'k' matches: skipped"*) ;;
  *) fail "--margins: the unmatched line not reported skipped: $out";; esac
python3 "$script" "$here/run_a.json" --kernel k2 --margins "$dir/margins.txt" --thresholds-dir "$dir" >/dev/null 2>&1 &&
  fail "--margins: a run without kernel k2 wrote sections"
sed 's/"kernel": "k"/"kernel": "k2"/g' "$here/run_a.json" > "$dir/run_k2.json"
python3 "$script" "$dir/run_k2.json" --kernel k2 --margins "$dir/margins.txt" --thresholds-dir "$dir" >/dev/null ||
  fail "--margins: the '*' line"
sec "k2 fp16 d64 full 4-4" min_speedup_reference 70
# a margins file the script cannot use: exit 2, one line naming the file and line, nothing written
bad_margins() {  # bad_margins <name> <file's text> <expected part of the message> [extra args]
  local rc=0 out
  printf '%s\n' "$2" > "$dir/bad_$1.txt"
  cp "$f" "$dir/before.ini"
  out=$(python3 "$script" "$here/run_a.json" --kernel k --margins "$dir/bad_$1.txt" ${4:-} --thresholds-dir "$dir" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "margins $1: exit $rc, expected 2 ($out)"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "margins $1: not one line: $out"
  case $out in "set_thresholds: "*"$3"*) ;; *) fail "margins $1: '$out' lacks '$3'";; esac
  cmp -s "$f" "$dir/before.ini" || fail "margins $1: the thresholds file changed"
}
bad_margins over_one $'k 0.8\nk 1.5' "bad_over_one.txt:2: margin '1.5': expected a number in (0, 1)"
bad_margins not_number 'k x' "bad_not_number.txt:1: margin 'x'"
bad_margins regex 'k 0.8 /s(4$' "bad_regex.txt:1: tests regex '/s(4\$'"
bad_margins fields 'k 0.8 a b' "bad_fields.txt:1: 'k 0.8 a b': expected"
bad_margins no_line 'j 0.8' "bad_no_line.txt: no line for kernel 'k'"
bad_margins both 'k 0.8' "--margins takes the place of --margin" "--margin 0.8"
# a committed run over 150 KB is gzip-compressed (.json.gz): read as the .json
gzip -c "$here/run_a.json" > "$dir/run_a.json.gz"
python3 "$script" "$dir/run_a.json.gz" --kernel k --margin 0.8 --thresholds-dir "$dir" >/dev/null ||
  fail "a .json.gz run"
sec "k fp16 d64 full 4-4" min_speedup_reference 80
# and a committed one (results/<gpu>/benchmarks/*.json.gz) is compact: no note on it
python3 -c "import glob, sys; sys.path.insert(0, '$here/../../scripts')
from attn.set_thresholds import source_notes
runs = sorted(glob.glob('$here/../../results/*/benchmarks/*.json.gz'))
assert runs and source_notes(runs[-1:]) == [], runs[-1:]" || fail "a committed .json.gz run"
# the project's margins file has a line for every built-in kernel
for k in simple flash2 cudnn hopper; do
  grep -Eq "^$k +0\.[0-9]+" "$here/../../thresholds/margins.txt" || fail "thresholds/margins.txt: no line for $k"
done
python3 -c "import sys; sys.path.insert(0, '$here/../../scripts')
from attn.set_thresholds import read_margins
for k in ('simple', 'flash2', 'cudnn', 'hopper', 'a_plugin'):
    assert read_margins('$here/../../thresholds/margins.txt', k), k" || fail "thresholds/margins.txt does not read"
echo "ok: set_thresholds"
