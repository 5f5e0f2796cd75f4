#!/usr/bin/env bash
# attn_correctness --shard K/N: the N shards of a case list hold each of its cases exactly
# once (the sharded features/packed tests run the same cases as one unsharded test would),
# and a malformed --shard is refused. Usage: test_shards.sh ATTN_CORRECTNESS TOLERANCE_INI
set -euo pipefail
bin=$1 tol=$2
args=(--name shards --kernel simple --dtype fp16,bf16 --head-dim 64,128,192x128 --mask full,causal
      --shapes 1x1,17x17,1x239,127x512,16x2000 --batch 2 --heads 8 --heads-k 8,2,1
      --window=-1:-1,16:0,3:5 --softcap 0,30 --pairwise --tolerance "$tol" --list)
all=$("$bin" "${args[@]}" | sort)
for n in 1 3 4 7; do
  parts=$(for ((k = 0; k < n; k++)); do "$bin" "${args[@]}" --shard "$k/$n"; done | sort)
  [ "$parts" = "$all" ] || { echo "FAIL: the $n shards' cases differ from the unsharded list"; exit 1; }
done
[ -n "$all" ] || { echo "FAIL: no cases listed"; exit 1; }
for bad in 4/4 -1/4 1/0 2 1/4x; do
  if "$bin" "${args[@]}" --shard "$bad" >/dev/null 2>&1; then echo "FAIL: --shard $bad accepted"; exit 1; fi
done
echo "ok: $(echo "$all" | wc -l) cases, shards 1, 3, 4, 7 partition them"
