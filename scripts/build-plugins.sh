#!/bin/bash
# Builds spank_imex.so once per Slurm version, each stamped from (and, for
# Slurm >= 23.11, with SPANK bindings generated from) that Slurm's own
# headers. Arguments name where each Slurm's headers come from:
#   host        this machine's /usr/include (Debian 12: Slurm 22.05)
#   ROOTFS      a root filesystem with libslurm-dev (scripts/slurm-rootfs.sh)
#   prefix=DIR  a Slurm built into a prefix (DIR/include/slurm), such as
#               /opt/slurm: for a Slurm version the release has no plugin for
# Output: target/slurm-plugins/<major.minor>/{libspank_imex.so,slurm-version}
# and one line per plugin: "<major.minor> <full version> <bindings> <path>".
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
out_root=$REPO/target/slurm-plugins
[ $# -gt 0 ] || set -- host

header_number() { sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\).*/\1/p' "$1"; }

for source in "$@"; do
  case $source in
    host) slurm_inc=/usr/include/slurm;;
    prefix=/*) slurm_inc=${source#prefix=}/include/slurm;;
    *) slurm_inc=$(cd "$source" && pwd)/usr/include/slurm;;
  esac
  header=$slurm_inc/slurm_version.h
  [ -f "$header" ] || { echo "build-plugins: $header missing: install libslurm-dev there (or Slurm's headers in the prefix)" >&2; exit 1; }
  hex=$(header_number "$header")
  [ -n "$hex" ] || { echo "build-plugins: no SLURM_VERSION_NUMBER in $header" >&2; exit 1; }
  major=$((16#${hex:0:2})); minor=$((16#${hex:2:2})); micro=$((16#${hex:4:2}))
  mm=$(printf '%d.%02d' "$major" "$minor")
  full=$(printf '%d.%02d.%d' "$major" "$minor" "$micro")
  # Only the slurm/ directory of that root: clang keeps this machine's libc headers.
  inc=$REPO/target/slurm-headers/$mm
  mkdir -p "$inc"; ln -sfn "$slurm_inc" "$inc/slurm"
  if [ $((16#$hex)) -ge $((16#170b00)) ]; then
    bindings=generated
    # Run cargo outside the checkout, so .cargo/config.toml's
    # SKIP_SLURM_BINDINGS (needed below 23.11) does not apply: slurm-spank
    # then runs bindgen on this Slurm's <slurm/spank.h>. One target dir for
    # every such Slurm, so the plugin's other crates are built once; but
    # slurm-spank's build script does not notice a header change, so it is
    # cleaned (and its bindings generated afresh) for each.
    target=$REPO/target/plugin-build/generated
    (cd / && CARGO_TARGET_DIR="$target" cargo clean --release --quiet -p slurm-spank \
       --manifest-path "$REPO/spank-plugin/Cargo.toml" 2>/dev/null || true)
    (cd / && env -u SKIP_SLURM_BINDINGS SLURM_INCLUDE_DIR="$inc" BINDGEN_EXTRA_CLANG_ARGS="-I$inc" \
       CARGO_TARGET_DIR="$target" cargo build --release --quiet --manifest-path "$REPO/spank-plugin/Cargo.toml")
  else
    # Slurm < 23.11 lacks spank_prepend_task_argv, which generated bindings
    # would call: use slurm-spank's bundled bindings (same SPANK ABI) and stamp.
    bindings=bundled
    target=$REPO/target/plugin-build/bundled
    (cd "$REPO" && SKIP_SLURM_BINDINGS=1 SLURM_INCLUDE_DIR="$inc" \
       CARGO_TARGET_DIR="$target" cargo build --release --quiet -p spank_imex)
  fi
  dest=$out_root/$mm
  mkdir -p "$dest"
  install -m 0755 "$target/release/libspank_imex.so" "$dest/libspank_imex.so.tmp"
  strip --strip-unneeded "$dest/libspank_imex.so.tmp"
  mv "$dest/libspank_imex.so.tmp" "$dest/libspank_imex.so"
  echo "$full" > "$dest/slurm-version"
  echo "$bindings" > "$dest/bindings"
  echo "$mm $full $bindings $dest/libspank_imex.so"
done
