#!/bin/bash
# Writes one .deb per Slurm version a plugin was built for
# (scripts/build-plugins.sh), into target/debian/:
#   slurm-imex_<version>+slurm<major.minor>_<arch>.deb
# for this machine's architecture, or for another one named:
#   scripts/package.sh                 # this machine's (amd64 here, arm64 on Grace)
#   scripts/package.sh --arch=arm64    # from an amd64 machine: the binaries of
#                                      # scripts/cross-build.sh and the plugins of
#                                      # build-plugins.sh --target=aarch64-unknown-linux-gnu,
#                                      # packaged in the cross builder (its dpkg-shlibdeps
#                                      # knows arm64's libc)
# Built with cargo-deb (installed from crates.io when missing), from the
# [package.metadata.deb] variants in cli/Cargo.toml. The plugin goes into
# Debian's PluginDirs in the architecture's multiarch directory
# (dpkg-architecture -qDEB_HOST_MULTIARCH): package.sh stages it in
# target/deb-plugin/<multiarch>/{slurm-wlm,slurm}/ and each variant's assets
# take it from there.
# SLURM_IMEX_FAST_PACKAGES=1 (what the tests set: tests/e2e/versions.sh)
# compresses fast (cargo deb --fast): the same files in a larger .deb, 5 s
# each instead of 25 s on 2 cores; a release is packaged without it.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
native=$(dpkg --print-architecture)
arch=$native
case ${1:-} in --arch=*) arch=${1#--arch=};; "") ;; *) echo "usage: package.sh [--arch=ARCH]" >&2; exit 2;; esac
if ! command -v cargo-deb >/dev/null; then
  echo "package: installing cargo-deb" >&2
  cargo install --quiet --locked cargo-deb
fi
command -v dpkg-architecture >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null
}
multiarch=$(dpkg-architecture -a"$arch" -qDEB_HOST_MULTIARCH 2>/dev/null) ||
  { echo "package: dpkg-architecture knows no architecture '$arch'" >&2; exit 2; }
version=$(cargo metadata --no-deps --format-version 1 |
  sed -n 's/.*"name":"slurm-imex-cli","version":"\([^"]*\)".*/\1/p')
[ -n "$version" ] || { echo "package: cannot read the workspace version" >&2; exit 1; }
# Man pages from the clap definitions (slurm-imex man), compressed as Debian
# wants: the same on every architecture, so this machine's CLI writes them.
cargo build --release --quiet -p slurm-imex-cli
rm -rf target/man
target/release/slurm-imex man target/man
gzip -9n target/man/*
if [ "$arch" = "$native" ]; then
  cargo build --release --quiet -p slurm-imex-hooks -p slurm-imex-cli
  plugin_root=target/slurm-plugins
  # cargo-deb, as it is, on this machine.
  cargo_deb() { cargo deb "$@"; }
else
  rust_target=$(dpkg-architecture -a"$arch" -qDEB_HOST_GNU_CPU 2>/dev/null)-unknown-linux-gnu
  for b in slurm-imex slurm-imex-prolog slurm-imex-epilog slurm-imex-watch; do
    [ -x "target/cross/$rust_target/release/$b" ] ||
      { echo "package: target/cross/$rust_target/release/$b missing: run scripts/cross-build.sh $rust_target" >&2; exit 1; }
  done
  plugin_root=target/cross/$rust_target/slurm-plugins
  # This machine's cargo-deb binary, run in the cross builder (a Debian 12
  # like this one), with the target's strip and dpkg-shlibdeps.
  mkdir -p target/cross/tools
  install -m 0755 "$(command -v cargo-deb)" target/cross/tools/cargo-deb
  cargo_deb() {
    scripts/cross-toolchain.sh run env -C "$REPO" CARGO_TARGET_DIR="$REPO/target/cross" \
      "$REPO/target/cross/tools/cargo-deb" --target "$rust_target" "$@"
  }
fi
# A native package's changelog is changelog.gz (cargo-deb would name it .Debian.gz).
gzip -9nc packaging/debian/changelog > target/debian-changelog.gz
shopt -s nullglob
plugins=("$plugin_root"/*/libspank_imex.so)
[ ${#plugins[@]} -gt 0 ] || { echo "package: no $arch plugin built in $plugin_root: run scripts/build-plugins.sh first" >&2; exit 1; }
# cargo-deb empties target/debian whenever it runs, so every package is
# built in a directory of its own and moved there at the end.
staging=target/debian-staging
rm -rf "$staging"
# A Slurm with no Debian-family package of its own (23.02) has no variant:
# the release tarball serves it.
packaged=()
for plugin in "${plugins[@]}"; do
  mm=$(basename "$(dirname "$plugin")")
  variant=slurm${mm/./-}
  if ! grep -q "^\[package.metadata.deb.variants.$variant\]" cli/Cargo.toml; then
    echo "package: no package for Slurm $mm (no [package.metadata.deb.variants.$variant]: the release tarball serves it)" >&2
    continue
  fi
  rm -rf target/deb-plugin
  for d in slurm-wlm slurm; do
    mkdir -p "target/deb-plugin/$multiarch/$d"
    cp "$plugin" "target/deb-plugin/$multiarch/$d/spank_imex.so"
  done
  cargo_deb --quiet -p slurm-imex-cli --no-build ${SLURM_IMEX_FAST_PACKAGES:+--fast} --variant "$variant" \
    --deb-version "${version}+slurm${mm}" -o "$staging/$mm/" >/dev/null
  packaged+=("$mm")
done
rm -rf target/deb-plugin
mkdir -p target/debian
rm -f target/debian/slurm-imex_*_"$arch".deb
for mm in "${packaged[@]}"; do
  deb=target/debian/slurm-imex_${version}+slurm${mm}_$arch.deb
  mv "$staging/$mm/slurm-imex_${version}+slurm${mm}_$arch.deb" "$deb"
  echo "$deb $(stat -c %s "$deb")"
done
rm -rf "$staging"
