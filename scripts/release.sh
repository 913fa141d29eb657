#!/bin/bash
# Writes the release tarball for sites whose Slurm is not Debian's (a prefix
# build such as /opt/slurm, SchedMD's RPMs, Base Command Manager):
#   target/release-tarball/slurm-imex-<version>-x86_64-linux.tar.gz
# holding the node binaries, one plugin per Slurm major.minor built by
# scripts/build-plugins.sh (plugins/<major.minor>/spank_imex.so with the
# version it was stamped for), conf-examples, docs, README and install.sh.
# Nobody rebuilds anything for a Slurm we ship a plugin for:
#   tar xf slurm-imex-*.tar.gz && cd slurm-imex-* && ./install.sh --slurm-prefix /opt/slurm
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
version=$(cargo metadata --no-deps --format-version 1 |
  sed -n 's/.*"name":"slurm-imex-cli","version":"\([^"]*\)".*/\1/p')
[ -n "$version" ] || { echo "release: cannot read the workspace version" >&2; exit 1; }
cargo build --release --quiet -p slurm-imex-hooks -p slurm-imex-cli
shopt -s nullglob
plugins=(target/slurm-plugins/*/libspank_imex.so)
[ ${#plugins[@]} -gt 0 ] || { echo "release: no plugin built: run scripts/build-plugins.sh first" >&2; exit 1; }
name=slurm-imex-$version-x86_64-linux
stage=target/release-stage/$name
rm -rf target/release-stage
mkdir -p "$stage"/{bin,plugins,share/man}
for b in slurm-imex-prolog slurm-imex-epilog slurm-imex; do
  install -m 0755 "target/release/$b" "$stage/bin/$b"
  strip --strip-unneeded "$stage/bin/$b"
done
for plugin in "${plugins[@]}"; do
  mm=$(basename "$(dirname "$plugin")")
  mkdir -p "$stage/plugins/$mm"
  install -m 0644 "$plugin" "$stage/plugins/$mm/spank_imex.so"
  cp "$(dirname "$plugin")/slurm-version" "$stage/plugins/$mm/slurm-version"
done
target/release/slurm-imex man "$stage/share/man"
cp -r conf-examples docs "$stage/"
cp README.md "$stage/"
install -m 0755 scripts/install.sh "$stage/install.sh"
echo "$version" > "$stage/VERSION"
# Only this version's tarball is left there (the e2e harness installs it).
rm -rf target/release-tarball
mkdir -p target/release-tarball
out=target/release-tarball/$name.tar.gz
# Owned by root, dates from the commit: the same tree gives the same bytes.
stamp=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$stamp" \
  -C target/release-stage -czf "$out.tmp" "$name"
mv "$out.tmp" "$out"
rm -rf target/release-stage
echo "$out $(stat -c %s "$out")"
