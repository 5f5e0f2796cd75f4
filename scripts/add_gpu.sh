#!/usr/bin/env bash
# A new GPU's thresholds file (README, "Adding a GPU"), made on that GPU in one command:
#   scripts/add_gpu.sh [--build DIR] [--kernels K1,K2] [--no-tune] [--setup-only] [--time-limit S]
#                      [--cmake ARG]... [-- CTEST ARGS...]
# 1. configures and builds DIR (default build-gpu; --cmake passes one argument to cmake, e.g.
#    --cmake -DCMAKE_CUDA_ARCHITECTURES=90a);
# 2. thresholds/<gpu>.ini with its [gpu] and [peaks] (attn_calibrate --write), where missing;
# 3. flash2's tuned configurations, thresholds/<gpu>.tuned.txt (tune/flash2 in DIR-tune, built
#    with -DATTN_TUNE_SPACE=ON), where missing and flash2 is benchmarked; then DIR configured
#    again, so that flash2 benchmarks what ships on this GPU (--no-tune: no tuning);
#    --setup-only stops here (where a machine is held for less than the build and the run
#    together: the same command without it then rebuilds nothing and keeps the peaks);
# 4. the benchmarks (ctest -L benchmark: the forward's and the backward's; only those of
#    --kernels when given; CTEST ARGS added, e.g. -LE benchmark_bwd), one at a time: with no
#    minimums yet each is measured, checked and recorded, and skipped; any failure stops here;
# 5. scripts/set_thresholds.py --margins thresholds/margins.txt for every kernel the run
#    measured (the margins the H100's file was made with);
# 6. the run's results file compact (gzip over 150 KB) and results/INDEX.md, then prints what
#    to commit.
# A kernel's sections come from the run that measured it, the other kernels' stay: where one
# run of every kernel (an H100: about 40 minutes) is longer than a machine is held, run it
# kernel by kernel (--kernels hopper, then --kernels flash2, ...). --time-limit S stops the
# benchmarks after S seconds (where a command may run less than a kernel's run takes): the tests
# that finished are collected into a part, the command for the rest is printed, and no minimums
# are written (join the parts with scripts/results.py merge, then set_thresholds.py on it).
# Exit 0 done, 1 a step failed, 2 bad arguments, 3 a part written (--time-limit), 77 no GPU.
set -uo pipefail
usage() {
  echo "usage: $0 [--build DIR] [--kernels K1,K2] [--no-tune] [--setup-only] [--time-limit S] [--cmake ARG]... [-- CTEST ARGS...]"
}
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  usage
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu kernels="" tune=1 setup_only=0 tuned="" limit="" cmake_args=() ctest_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --build|--kernels|--cmake|--time-limit)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "add_gpu: $1 needs a value" >&2; usage >&2; exit 2; }
      case $1 in
        --build) build=$2 ;; --kernels) kernels=$2 ;; --cmake) cmake_args+=("$2") ;; --time-limit) limit=$2 ;;
      esac
      shift 2 ;;
    --no-tune) tune=0; shift ;;
    --setup-only) setup_only=1; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "add_gpu: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ -n "$kernels" ] && ! [[ $kernels =~ ^[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*$ ]]; then
  echo "add_gpu: --kernels '$kernels': expected kernel names separated by commas" >&2
  exit 2
fi
if [ -n "$limit" ] && ! [[ $limit =~ ^[1-9][0-9]*$ ]]; then
  echo "add_gpu: --time-limit '$limit': expected a whole number of seconds above 0" >&2
  exit 2
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -n "$gpu" ] || { echo "SKIPPED: no GPU here (nvidia-smi names none)"; exit 77; }
source "$root/scripts/env.sh"
py() { python3 "$root/scripts/$1.py" "${@:2}"; }
slug=$(python3 -c "import sys; sys.path.insert(0, sys.argv[1]); from attn.set_thresholds import slug; print(slug(sys.argv[2]))" \
       "$root/scripts" "$gpu") || exit 1
ini=$root/thresholds/$slug.ini
echo "== $gpu: $ini"

echo "== configure and build $build"
attn_configure_build "$build" "${cmake_args[@]}" || exit 1

if [ -f "$ini" ]; then
  echo "== $ini exists: its peaks are kept"
else
  echo "== the peaks: attn_calibrate --write $root/thresholds"
  "$build/tools/attn_calibrate" --write "$root/thresholds" || { echo "add_gpu: attn_calibrate failed" >&2; exit 1; }
  [ -f "$ini" ] || { echo "add_gpu: attn_calibrate wrote no $ini (the GPU's name and the file's differ?)" >&2; exit 1; }
fi

benched() { [ -z "$kernels" ] || [[ ",$kernels," == *",$1,"* ]]; }
if [ $tune = 1 ] && benched flash2 && [ ! -f "$root/thresholds/$slug.tuned.txt" ]; then
  echo "== flash2's tuned configurations (tune/flash2 in $build-tune; --no-tune skips it)"
  attn_configure_build "$build-tune" "${cmake_args[@]}" -DATTN_TUNE_SPACE=ON || exit 1
  ctest --test-dir "$build-tune" -R '^tune/flash2$' --output-on-failure || { echo "add_gpu: tuning failed" >&2; exit 1; }
  tuned="thresholds/$slug.tuned.txt results/$slug/tune/ "
  echo "== configure $build again (it reads $slug.tuned.txt)"
  attn_configure_build "$build" "${cmake_args[@]}" || exit 1
fi

if [ $setup_only = 1 ]; then
  echo "add_gpu: set up ($build built, ${ini#$root/}${tuned:+, $tuned}); the same command without --setup-only runs the benchmarks"
  exit 0
fi

filter=()
[ -n "$kernels" ] && filter=(-R "^benchmark/((bwd|fwd_bwd)/)?(${kernels//,/|})/")
echo "== benchmarks: ctest -L benchmark ${filter[*]} ${ctest_args[*]}"
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
${limit:+timeout "$limit"} ctest --test-dir "$build" -L benchmark "${filter[@]}" "${ctest_args[@]}" \
  --output-junit "$build/add_gpu.junit.xml"
rc=$?
if [ -n "$limit" ] && [ $rc -eq 124 ]; then
  echo "== --time-limit $limit s reached: the tests that finished collected into a part"
  ctest --test-dir "$build" -R '^benchmark/collect$' >/dev/null
  part=$(find "$root/results" -path "*/benchmarks/20*.json" -newer "$stamp" | sort | tail -1)
  [ -n "$part" ] || { echo "add_gpu: no test finished within $limit s: no part written" >&2; exit 1; }
  ctest --test-dir "$build" -N -L benchmark "${filter[@]}" "${ctest_args[@]}" >"$build/add_gpu.selected.txt"
  python3 - "$root/scripts" "$part" "$build/add_gpu.selected.txt" <<'PY' || exit 1
import re, sys
sys.path.insert(0, sys.argv[1])
from attn.schema import load_results
done = {t["test"] for t in load_results(sys.argv[2], "add_gpu", test=["test"])["tests"]}
selected = re.findall(r"Test +#\d+: (\S+)", open(sys.argv[3]).read())
rest = [t for t in selected if t not in done and t not in ("benchmark/prepare", "benchmark/collect")]
print(f"add_gpu: part {sys.argv[2]} ({len(done)} tests); {len(rest)} not run. The rest, in the same build:")
print("  scripts/add_gpu.sh <the same options> -- -R '^(" + "|".join(re.escape(t) for t in rest) + ")$'")
PY
  echo "add_gpu: no minimums written: join the parts (scripts/results.py merge OUT PART...), then"
  echo "  scripts/set_thresholds.py OUT --kernel K --margins thresholds/margins.txt"
  exit 3
fi
run=$(find "$root/results" -path "*/benchmarks/20*.json" -newer "$stamp" | sort | tail -1)
if [ $rc -ne 0 ]; then
  echo "add_gpu: a benchmark failed or did not run (above; $build/add_gpu.junit.xml): no minimums written" >&2
  [ -n "$run" ] && echo "add_gpu: its results: $run" >&2
  exit 1
fi
[ -n "$run" ] || { echo "add_gpu: the run wrote no results file (benchmark/collect?)" >&2; exit 1; }
echo "== results: $run"

measured=$(python3 - "$root/scripts" "$run" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from attn.schema import load_results
doc = load_results(sys.argv[2], "add_gpu", test=["test", "kernel"])
print(" ".join(sorted({t["kernel"] for t in doc["tests"] if "baselines" in t})))
PY
) || exit 1
[ -n "$measured" ] || { echo "add_gpu: $run holds no measured benchmark" >&2; exit 1; }
for k in $measured; do
  echo "== minimums of $k"
  py set_thresholds "$run" --kernel "$k" --margins "$root/thresholds/margins.txt" || exit 1
done
py results compact --gzip "$run" || exit 1
[ -f "$run.gz" ] && run=$run.gz
py results index >/dev/null || exit 1
echo "add_gpu: done for $measured. Commit:"
echo "  git add ${ini#$root/} $tuned${run#$root/} results/INDEX.md"
