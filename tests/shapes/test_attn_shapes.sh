#!/bin/bash
# attn_shapes (tools/shapes.c) as the scripts and CMake call it: the JSON of a shapes file,
# the check names of each group against harness/checks.def read here on its own,
# and exit status 2 with one line for a malformed file or bad arguments.
#   test_attn_shapes.sh <attn_shapes> <source dir>
set -u
tool=$1 src=$2
here=$src/tests/shapes
fail() { echo "FAIL: $*"; exit 1; }

# --json: the documented keys, values and cases in order
"$tool" --json "$here/good.txt" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert sorted(d) == ["axes", "batch", "cases", "file", "heads", "hidden", "sequences", "shapes", "tokens"], sorted(d)
assert list(d["axes"]) == sys.argv[1].split(), list(d["axes"])  # every axis of axes.def, in its order
assert {k: v for k, v in d["axes"].items() if v} == {"dtype": ["fp16"], "head_dim": ["64"], "mask": ["full"]}, d["axes"]
assert (d["batch"], d["heads"], d["tokens"], d["hidden"]) == (2, 3, None, None)
assert d["shapes"] == [{"name": "s4", "seqlen_q": 4, "seqlen_k": 4}, {"name": "s17", "seqlen_q": 17, "seqlen_k": 17},
                       {"name": "q3k5", "seqlen_q": 3, "seqlen_k": 5}], d["shapes"]
assert d["sequences"] == []
assert [c["shape"] for c in d["cases"]] == ["s4", "s17", "q3k5"]
assert d["cases"][2] == {"dtype": "fp16", "head_dim": "64", "mask": "full", "shape": "q3k5", "seqlen_q": 3, "seqlen_k": 5}
' "$(sed -n 's/^ATTN_AXIS(\([a-z_]*\),.*/\1/p' "$src/harness/axes.def")" || fail "--json good.txt"
"$tool" --json "$src/shapes/packed.txt" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["cases"] == [] and d["shapes"] == [] and len(d["sequences"]) == 6, d
assert d["sequences"][0] == "1x239+0x17+128x128+17x0+1x1+300x300", d["sequences"][0]
assert d["axes"]["head_dim"][2] == "192x128" and d["axes"]["page_size"] == ["0", "1", "16", "64", "256"]
' || fail "--json packed.txt"

# --checks GROUP and --checks-json against the table
for group in correctness contract launch packed; do
  want=$(sed -n "s/^ATTN_CHECK(\([a-z_]*\), $group,.*/\1/p" "$src/harness/checks.def" | paste -sd, -)
  [ -n "$want" ] || fail "no check of group $group in checks.def"
  got=$("$tool" --checks $group) || fail "--checks $group: exit $?"
  [ "$got" = "$want" ] || fail "--checks $group: '$got', expected '$want'"
done
want=$(grep -c '^ATTN_CHECK(' "$src/harness/checks.def")
"$tool" --checks-json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert len(d) == int(sys.argv[1]) and all(sorted(c) == ["group", "name", "summary"] for c in d), d
assert d[0] == {"name": "accuracy", "group": "correctness",
                "summary": "normal random inputs, LSE not requested (lse = NULL honoured)"}, d[0]
' "$want" || fail "--checks-json"

# errors: exit 2, one line naming the file and line, or the argument
expect_error() { # <expected stderr> <args...>
  local want=$1; shift
  local out rc
  out=$("$tool" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2"
  [[ "$out" == "$want"* ]] || fail "$*: '$out', expected '$want'"
}
expect_error "attn_shapes: $here/bad_window.txt:6: window: expected L:R" --json "$here/bad_window.txt"
expect_error "attn_shapes: $here/nothing.txt: shapes file not found" --cmake P "$here/nothing.txt"
expect_error "attn_shapes: --checks: no check in group 'nightly'" --checks nightly
expect_error "attn_shapes: --cmake: PREFIX: expected letters, digits and '_', got 'A B'" --cmake "A B" "$here/good.txt"
expect_error "attn_shapes: expected --cmake, --json, --checks, --checks-json, --tuned or --help, got '--list'" --list
expect_error "attn_shapes: expected an option"
"$tool" --help | grep -q "^usage: attn_shapes" || fail "--help"
echo "attn_shapes: all checks passed"
