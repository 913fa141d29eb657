#!/bin/bash
# Writes one .deb per Slurm version a plugin was built for
# (scripts/build-plugins.sh), into target/debian/:
#   slurm-imex_<version>+slurm<major.minor>_amd64.deb
# Built with cargo-deb (installed from crates.io when missing), from the
# [package.metadata.deb] variants in cli/Cargo.toml.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
if ! command -v cargo-deb >/dev/null; then
  echo "package: installing cargo-deb" >&2
  cargo install --quiet --locked cargo-deb
fi
command -v dpkg-shlibdeps >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null
}
version=$(cargo metadata --no-deps --format-version 1 |
  sed -n 's/.*"name":"slurm-imex-cli","version":"\([^"]*\)".*/\1/p')
[ -n "$version" ] || { echo "package: cannot read the workspace version" >&2; exit 1; }
cargo build --release --quiet -p slurm-imex-hooks -p slurm-imex-cli
# A native package's changelog is changelog.gz (cargo-deb would name it .Debian.gz).
gzip -9nc packaging/debian/changelog > target/debian-changelog.gz
# Man pages from the clap definitions (slurm-imex man), compressed as Debian wants.
rm -rf target/man
target/release/slurm-imex man target/man
gzip -9n target/man/*
shopt -s nullglob
plugins=(target/slurm-plugins/*/libspank_imex.so)
[ ${#plugins[@]} -gt 0 ] || { echo "package: no plugin built: run scripts/build-plugins.sh first" >&2; exit 1; }
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
  cargo deb --quiet -p slurm-imex-cli --no-build --variant "$variant" \
    --deb-version "${version}+slurm${mm}" -o "$staging/$mm/" >/dev/null
  packaged+=("$mm")
done
mkdir -p target/debian
rm -f target/debian/slurm-imex_*.deb
for mm in "${packaged[@]}"; do
  deb=target/debian/slurm-imex_${version}+slurm${mm}_amd64.deb
  mv "$staging/$mm/slurm-imex_${version}+slurm${mm}_amd64.deb" "$deb"
  echo "$deb $(stat -c %s "$deb")"
done
rm -rf "$staging"
