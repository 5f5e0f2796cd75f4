# Sourced by the other scripts: makes the C dependencies findable (pkg-config), installing
# the missing Debian packages when run as root, else using .deps/ (scripts/deps.sh).
# Then attn_configure_build <build dir> [cmake args...] configures and builds (logs beside it).
if [ "${BASH_SOURCE[0]}" = "$0" ] && { [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; }; then # run, not sourced
  echo "usage: source scripts/env.sh (from bash)"
  sed -n '1,/^if /{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
fi
ATTN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ATTN_DEB_PACKAGES="pkg-config check libsubunit-dev libinih-dev libjansson-dev"
ATTN_PC_MODULES="check inih jansson"
if [ -d "$ATTN_ROOT/.deps/usr/lib/x86_64-linux-gnu/pkgconfig" ]; then
  export PKG_CONFIG_PATH="$ATTN_ROOT/.deps/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
attn_have_deps() {
  command -v pkg-config >/dev/null && pkg-config --exists $ATTN_PC_MODULES
}
if ! attn_have_deps; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing Debian packages: $ATTN_DEB_PACKAGES"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $ATTN_DEB_PACKAGES >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $ATTN_DEB_PACKAGES >/dev/null; }
  fi
  if ! attn_have_deps; then
    echo "error: pkg-config cannot find: $ATTN_PC_MODULES." >&2
    echo "  Install them (as root: apt-get install $ATTN_DEB_PACKAGES), or on a machine" >&2
    echo "  without a package registry unpack them elsewhere with scripts/deps.sh and copy .deps/." >&2
    exit 1
  fi
fi
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
ATTN_JOBS=${ATTN_JOBS:-$(nproc)}
attn_configure_build() { # <build dir> [cmake args...]
  local dir=$1; shift
  cmake -S "$ATTN_ROOT" -B "$dir" "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; echo "error: configure failed" >&2; return 1; }
  cmake --build "$dir" -j "$ATTN_JOBS" >"$dir.build.log" 2>&1 ||
    { tail -50 "$dir.build.log"; echo "error: build failed ($dir.build.log)" >&2; return 1; }
}
