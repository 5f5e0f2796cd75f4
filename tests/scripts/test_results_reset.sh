#!/usr/bin/env bash
# attn_results --reset DIR deletes only what a benchmark run wrote there (fragments named after
# their test, baseline timings in DIR/baselines/), and refuses a folder it did not make.
set -euo pipefail
bin=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; ls -laR "$d"; exit 1; }
frag='{"test": "benchmark/k/fp16/d64/full/s4"}'
# a folder that is not a run's: refused (exit 2, one line), nothing deleted
mkdir -p "$d/mine/baselines"
echo '{}' > "$d/mine/package.json"
echo "$frag" > "$d/mine/benchmark.k.fp16.d64.full.s4.json"
rc=0; out=$("$bin" --reset "$d/mine" 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "a foreign folder: exit $rc ($out)"
case $out in "attn_results: $d/mine: not a fragments folder"*) ;; *) fail "message: $out";; esac
[ -e "$d/mine/package.json" ] && [ -e "$d/mine/benchmark.k.fp16.d64.full.s4.json" ] || fail "deleted in a refused folder"
# a new folder: made, with its marker; a run's files go, anything else stays
"$bin" --reset "$d/run" >/dev/null
[ -e "$d/run/.attn_results" ] || fail "no marker"
mkdir -p "$d/run/baselines"
echo "$frag" > "$d/run/benchmark.k.fp16.d64.full.s4.json"
echo '{"test": "benchmark/other"}' > "$d/run/benchmark.k.fp16.d64.full.s8.json"   # content not its name
echo '{}' > "$d/run/notes.json"
echo '{}' > "$d/run/baselines/fp16-d64-full-s4-t8-h2-pci00001b00.json"
echo '{}' > "$d/run/baselines/keep.json"
"$bin" --reset "$d/run" | grep -q cleared || fail "second reset"
[ ! -e "$d/run/benchmark.k.fp16.d64.full.s4.json" ] || fail "fragment kept"
[ ! -e "$d/run/baselines/fp16-d64-full-s4-t8-h2-pci00001b00.json" ] || fail "baseline kept"
for f in benchmark.k.fp16.d64.full.s8.json notes.json baselines/keep.json; do
  [ -e "$d/run/$f" ] || fail "deleted $f, which no run wrote"
done
# a folder of only a run's files, from before the marker: adopted and cleared
mkdir -p "$d/old/baselines"
echo "$frag" > "$d/old/benchmark.k.fp16.d64.full.s4.json"
"$bin" --reset "$d/old" >/dev/null || fail "an earlier run's folder refused"
[ ! -e "$d/old/benchmark.k.fp16.d64.full.s4.json" ] || fail "an earlier run's fragment kept"
"$bin" --help | grep -q "^usage: " || fail "--help"
echo "ok: reset"
