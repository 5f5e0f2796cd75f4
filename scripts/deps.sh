#!/usr/bin/env bash
# Unpacks the Debian -dev packages the harness links (static archives only) into .deps/,
# for a GPU machine that reaches no package registry: run it where apt-get works, then
# copy .deps/ along (the .pc files point at this checkout's absolute path).
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "usage: $0"
  sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
[ $# -eq 0 ] || { echo "deps.sh: unknown argument '$1' (it takes none; --help)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$root/.deps
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkgs=(check libsubunit-dev libinih-dev libjansson-dev)
(cd "$tmp" && apt-get download "${pkgs[@]}" >/dev/null 2>&1) ||
  { apt-get update -qq && (cd "$tmp" && apt-get download "${pkgs[@]}" >/dev/null); }
mkdir -p "$prefix"
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$prefix"; done
find "$prefix/usr/lib" -name '*.so*' -delete # link the archives, never a shared library
for pc in "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
  sed -i "s|^prefix=.*|prefix=$prefix/usr|" "$pc"
done
echo "unpacked ${pkgs[*]} into $prefix"
