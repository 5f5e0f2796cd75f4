#!/usr/bin/env bash
# attn_correctness's cases as it builds them: the labels --list prints come from each case's
# fields as stored (not from the text parsed), so this golden list fails when an axis value
# is parsed, stored or labelled wrong (a causal case run as full, a window's causal rule, DV).
# Usage: test_case_list.sh ATTN_CORRECTNESS TOLERANCE_INI GOLDEN
set -euo pipefail
bin=$1 tol=$2 golden=$3
got=$("$bin" --name cases --kernel simple --dtype bf16 --head-dim 64,192x128 --mask full,causal --heads-k 8,1 \
      --window=-1:-1,16:4 --softcap 0,30 --page-size 0,16 --shapes 17,3x5+0x7 --batch 2 --heads 8 \
      --tolerance "$tol" --list)
if [ "$got" != "$(cat "$golden")" ]; then
  echo "FAIL: the case list differs from $golden:"; diff <(echo "$got") "$golden" | head -20; exit 1
fi
echo "ok: $(echo "$got" | wc -l) cases as expected"
