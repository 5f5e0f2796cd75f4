#!/usr/bin/env bash
# The dependency graph of ARCHITECTURE.md, checked where it is written down in code: every
# `#include "..."` of a layer's sources and every attn_* target in a layer's
# target_link_libraries must point at the layer itself or at a layer below it. Headers are
# found by name among the layers' files; a name found nowhere (a generated file) is not judged.
#
#   tests/test_layers.sh ROOT
#
# First checks itself on a small tree with one upward include and one upward link (both must
# be reported), then checks ROOT. Exit 0: every line points down; 1: a line points up (each
# printed as "path:line: ..."); 2: bad arguments.
set -u

# layer -> the layers it may use (its own included)
declare -A ALLOWED=(
  [abi]="abi"
  [reference]="abi reference"
  [harness]="abi reference harness"
  [baselines]="abi baselines"
  [kernels]="abi baselines kernels"
  [suites]="abi reference harness baselines kernels suites"
  [tools]="abi reference harness baselines kernels tools"
  [fuzz]="abi reference harness baselines kernels tools fuzz"
  [python]="abi kernels python"
)

allowed() { # <layer> <used layer>
  case " ${ALLOWED[$1]} " in *" $2 "*) return 0 ;; esac
  return 1
}

# Prints one line per upward include or link under root $1; returns 1 when there is any.
check_tree() {
  local root=$1 bad=0 includes=0 links=0
  local -A header_layers=() target_layer=()
  local layer f line name cand l ok text tgt
  for layer in "${!ALLOWED[@]}"; do
    [ -d "$root/$layer" ] || continue
    while IFS= read -r f; do
      name=${f#"$root/"}
      header_layers[$name]=$layer
    done < <(find "$root/$layer" -type f \( -name '*.h' -o -name '*.cuh' -o -name '*.def' \))
    while IFS= read -r f; do # add_library(attn_x ...): which layer defines each target
      while IFS= read -r tgt; do target_layer[$tgt]=$layer; done \
        < <(grep -o 'add_library( *attn_[a-z0-9_]*' "$f" | sed 's/.*(\s*//')
    done < <(find "$root/$layer" -type f \( -name CMakeLists.txt -o -name '*.cmake' \))
  done
  for layer in "${!ALLOWED[@]}"; do
    [ -d "$root/$layer" ] || continue
    while IFS= read -r f; do
      while IFS=: read -r line name; do
        includes=$((includes + 1))
        ok=1 l=""
        for cand in "${!header_layers[@]}"; do
          [[ $cand == "$name" || $cand == */"$name" ]] || continue
          l=${header_layers[$cand]}
          if allowed "$layer" "$l"; then ok=1; break; fi
          ok=0
        done
        if [ "$ok" = 0 ]; then
          echo "${f#"$root/"}:$line: includes \"$name\" from $l/; $layer/ may include only from: ${ALLOWED[$layer]}"
          bad=1
        fi
      done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
               sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
    done < <(find "$root/$layer" -type f \( -name '*.c' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh' \
                                           -o -name '*.def' -o -name '*.in' \))
    while IFS= read -r f; do
      # target_link_libraries(...) calls, one per line, with the line they start on
      text=$(awk '/target_link_libraries\(/ {on = 1; start = NR; buf = ""}
                  on {buf = buf " " $0} on && /\)/ {print start ":" buf; on = 0}' "$f")
      while IFS=: read -r line tgt; do
        [ -n "$line" ] || continue
        for tgt in $(grep -o 'attn_[a-z0-9_]*' <<<"$tgt" | tail -n +2); do
          links=$((links + 1))
          l=${target_layer[$tgt]:-}
          if [ -n "$l" ] && ! allowed "$layer" "$l"; then
            echo "${f#"$root/"}:$line: links $tgt from $l/; $layer/ may use only: ${ALLOWED[$layer]}"
            bad=1
          fi
        done
      done <<<"$text"
    done < <(find "$root/$layer" -type f \( -name CMakeLists.txt -o -name '*.cmake' \))
  done
  CHECKED="$includes include lines, $links link names"
  return $bad
}

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 ROOT (the source tree)" >&2
  exit 2
fi

# The check must be able to fail: a harness source including a kernel header, and the
# baselines linking the harness, must both be reported.
fixture=$(mktemp -d) || exit 2
trap 'rm -rf "$fixture"' EXIT
mkdir -p "$fixture/harness" "$fixture/kernels" "$fixture/baselines" "$fixture/abi"
printf '#include "attn_abi.h"\n#include "registry.h"\n' >"$fixture/harness/up.c"
: >"$fixture/kernels/registry.h"
: >"$fixture/abi/attn_abi.h"
printf 'add_library(attn_harness STATIC up.c)\n' >"$fixture/harness/CMakeLists.txt"
printf 'add_library(attn_baselines STATIC x.c)\ntarget_link_libraries(attn_baselines PUBLIC\n  attn_harness)\n' \
  >"$fixture/baselines/CMakeLists.txt"
out=$(check_tree "$fixture")
if [ $? -ne 1 ] || ! grep -q '^harness/up.c:2: includes "registry.h" from kernels/' <<<"$out" ||
   ! grep -q '^baselines/CMakeLists.txt:2: links attn_harness from harness/' <<<"$out" ||
   [ "$(wc -l <<<"$out")" -ne 2 ]; then
  echo "test_layers.sh: the self-check on a tree with two upward lines did not report exactly them:" >&2
  echo "$out" >&2
  exit 1
fi

check_tree "$1"
rc=$?
if [ $rc -eq 0 ]; then
  echo "layers: $CHECKED checked in $1; every one points down (ARCHITECTURE.md)"
fi
exit $rc
