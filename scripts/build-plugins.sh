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
#
# The plugin is built for this machine's architecture (on an arm64 node, an
# arm64 plugin), unless the first argument names another target:
#   --target=aarch64-unknown-linux-gnu
# builds it with the pinned cross toolchain (scripts/cross-toolchain.sh) into
# target/cross/aarch64-unknown-linux-gnu/slurm-plugins/<major.minor>/. The
# SPANK headers are the same on every architecture, so the same header
# sources serve both.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cross=
case ${1:-} in
  --target=*) cross=${1#--target=}; shift
    case $cross in *[!a-z0-9_-]*|"") echo "build-plugins: bad target '$cross'" >&2; exit 2;; esac;;
esac
if [ -n "$cross" ]; then
  out_root=$REPO/target/cross/$cross/slurm-plugins
  # cargo, its target dir and the strip that reads this target's ELF, all in the builder.
  run() { "$REPO/scripts/cross-toolchain.sh" run "$@"; }
  target_flag=(--target "$cross"); release_dir=$cross/release; strip_tool=${cross%%-*}-linux-gnu-strip
  cargo_root=$REPO/target/cross
else
  out_root=$REPO/target/slurm-plugins
  run() { "$@"; }
  target_flag=(); release_dir=release; strip_tool='strip'
  cargo_root=$REPO/target
fi
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
  # Only the slurm/ directory of that root: clang keeps the build machine's
  # libc headers. A copy, not a link: the cross builder sees this checkout only.
  inc=$cargo_root/slurm-headers/$mm
  rm -rf "$inc"; mkdir -p "$inc"; cp -RLp "$slurm_inc" "$inc/slurm"
  # One target dir for every Slurm and both kinds of bindings, so the
  # plugin's other crates are built once per architecture; slurm-spank's
  # build script notices neither a header change nor the kind of bindings,
  # so it is cleaned (and its bindings made afresh) for each.
  target=$cargo_root/plugin-build
  run env -C / CARGO_TARGET_DIR="$target" cargo clean --release --quiet -p slurm-spank "${target_flag[@]}" \
     --manifest-path "$REPO/spank-plugin/Cargo.toml" 2>/dev/null || true
  if [ $((16#$hex)) -ge $((16#170b00)) ]; then
    bindings=generated
    # Run cargo outside the checkout, so .cargo/config.toml's
    # SKIP_SLURM_BINDINGS (needed below 23.11) does not apply: slurm-spank
    # then runs bindgen on this Slurm's <slurm/spank.h>.
    run env -C / -u SKIP_SLURM_BINDINGS SLURM_INCLUDE_DIR="$inc" BINDGEN_EXTRA_CLANG_ARGS="-I$inc" \
       CARGO_TARGET_DIR="$target" cargo build --release --quiet "${target_flag[@]}" \
       --manifest-path "$REPO/spank-plugin/Cargo.toml"
  else
    # Slurm < 23.11 lacks spank_prepend_task_argv, which generated bindings
    # would call: use slurm-spank's bundled bindings (same SPANK ABI) and stamp.
    bindings=bundled
    run env -C "$REPO" SKIP_SLURM_BINDINGS=1 SLURM_INCLUDE_DIR="$inc" \
       CARGO_TARGET_DIR="$target" cargo build --release --quiet "${target_flag[@]}" -p spank_imex
  fi
  dest=$out_root/$mm
  mkdir -p "$dest"
  install -m 0755 "$target/$release_dir/libspank_imex.so" "$dest/libspank_imex.so.tmp"
  run "$strip_tool" --strip-unneeded "$dest/libspank_imex.so.tmp"
  mv "$dest/libspank_imex.so.tmp" "$dest/libspank_imex.so"
  echo "$full" > "$dest/slurm-version"
  echo "$bindings" > "$dest/bindings"
  echo "$mm $full $bindings $dest/libspank_imex.so"
done
