#!/bin/sh
# Stands in for attn_shapes in the scripts' unit tests: prints the fixture JSON for
# --checks-json and for --json <shapes/NAME.txt> (tests/scripts/shapes_NAME.json).
here=$(dirname "$0")
case "$1" in
  --checks-json) cat "$here/checks.json" ;;
  --json) name=$(basename "$2" .txt); [ -f "$here/shapes_$name.json" ] || { echo "attn_shapes: $2: no fixture" >&2; exit 2; }
          cat "$here/shapes_$name.json" ;;
  *) echo "usage: attn_shapes --json FILE | --checks-json" >&2; exit 2 ;;
esac
