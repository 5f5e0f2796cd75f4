#!/usr/bin/env bash
# attn_results --collect on a run whose fragment is bad in one way (CASE): exit 1 with one
# line naming the fragment's file and the field (or jansson's line), and no results file
# written. Prints that line, then "written=<results files> exit=<status>".
#   test_bad_fragment.sh ATTN_RESULTS CASE
set -uo pipefail
bin=$1
case_name=$2
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/frags" "$d/results"
cp "$here"/fragments/*.json "$d/frags/"
f=$d/frags/benchmark.k.fp16.d64.full.s4.json
case $case_name in
  nan) sed -i 's/"tflops": 1.0/"tflops": NaN/' "$f" ;;
  inf) sed -i 's/"tflops": 1.0/"tflops": 1e999/' "$f" ;;
  huge_integer) sed -i 's/"head_dim": 64/"head_dim": 99999999999999999999/' "$f" ;;
  negative) sed -i 's/"tflops": 1.0/"tflops": -1.0/' "$f" ;;
  negative_nested) sed -i 's/"speedup": 2.0/"speedup": -2.0/' "$f" ;;
  overflow) sed -i 's/"head_dim": 64/"head_dim": 4294967360/' "$f" ;;
  zero_median) sed -i 's/"median_ms": 1.0/"median_ms": 0/' "$f" ;;
  wrong_type) sed -i 's/"median_ms": 1.0/"median_ms": "1.0"/' "$f" ;;
  wrong_type_bool) sed -i 's/"causal": false/"causal": 0/' "$f" ;;
  missing_test) sed -i '/"test":/d' "$f" ;;
  not_object) echo '[1, 2]' >"$f" ;;
  duplicate_key) sed -i 's/"tflops": 1.0/"tflops": 1.0, "tflops": 9.0/' "$f" ;;
  truncated) head -c 200 "$here/fragments/benchmark.k.fp16.d64.full.s4.json" >"$f" ;;
  empty) : >"$f" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
ATTN_COMMIT=test "$bin" --collect "$d/frags" --results-dir "$d/results" --source-dir "$d" 2>&1
rc=$?
echo "written=$(find "$d/results" -type f | wc -l) exit=$rc"
