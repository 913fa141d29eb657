#!/bin/bash
# Builds the workspace for another architecture with the pinned cross
# toolchain (scripts/cross-toolchain.sh), from an x86_64 machine:
#
#   scripts/cross-build.sh [TARGET]     # default aarch64-unknown-linux-gnu
#
# Output, in cargo's own layout for a --target build, under target/cross so
# that the builder's rustc never shares fingerprints with this machine's:
#   target/cross/TARGET/release/{slurm-imex,slurm-imex-prolog,slurm-imex-epilog,slurm-imex-watch}
#   target/cross/TARGET/release/{nvidia-imex,nvidia-imex-ctl,libnvidia_ml.so}
#     (the fake IMEX and fake NVML, so the tests run on that architecture)
#   target/cross/TARGET/release/libspank_imex.so (bundled bindings, stamped
#     22.05: scripts/build-plugins.sh --target=TARGET builds each release's)
# (not the bad-input suite or the fake Prometheus: they run on this machine only)
# On an arm64 machine none of this is needed: cargo build --release builds
# arm64 artifacts (docs/install.md, "Building on your own machine").
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
target=${1:-aarch64-unknown-linux-gnu}
case $target in *[!a-z0-9_-]*|"") echo "cross-build: bad target '$target'" >&2; exit 2;; esac
start=$SECONDS
"$REPO/scripts/cross-toolchain.sh" run env -C "$REPO" CARGO_TARGET_DIR="$REPO/target/cross" \
  cargo build --release --locked --quiet --target "$target" --workspace --exclude bad-input --exclude fake-prometheus
echo "cross-build: $target in $((SECONDS - start)) s: $REPO/target/cross/$target/release" >&2
