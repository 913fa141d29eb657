#!/bin/bash
# Writes the release tarball for sites whose Slurm is not Debian's (a prefix
# build such as /opt/slurm, SchedMD's RPMs, Base Command Manager):
#   target/release-tarball/slurm-imex-<version>-<cpu>-linux.tar.gz
# for this machine's CPU (x86_64, or aarch64 on a Grace node), or another:
#   scripts/release.sh --target=aarch64-unknown-linux-gnu
# from the binaries of scripts/cross-build.sh and the plugins of
# scripts/build-plugins.sh --target=aarch64-unknown-linux-gnu. The tarball
# holds the node binaries, one plugin per Slurm major.minor built by
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
# The man pages are the same on every CPU: this machine's CLI writes them.
cargo build --release --quiet -p slurm-imex-hooks -p slurm-imex-cli
cpu=$(uname -m)
bin_dir=target/release plugin_root=target/slurm-plugins strip_tool=strip
case ${1:-} in
  --target=*) rust_target=${1#--target=}
    case $rust_target in *[!a-z0-9_-]*|"") echo "release: bad target '$rust_target'" >&2; exit 2;; esac
    cpu=${rust_target%%-*}
    bin_dir=target/cross/$rust_target/release plugin_root=target/cross/$rust_target/slurm-plugins
    # The target's strip, in the cross builder.
    strip_tool="scripts/cross-toolchain.sh run $cpu-linux-gnu-strip";;
  "") ;;
  *) echo "usage: release.sh [--target=TRIPLE]" >&2; exit 2;;
esac
shopt -s nullglob
plugins=("$plugin_root"/*/libspank_imex.so)
[ ${#plugins[@]} -gt 0 ] || { echo "release: no plugin built in $plugin_root: run scripts/build-plugins.sh first" >&2; exit 1; }
name=slurm-imex-$version-$cpu-linux
stage=target/release-stage/$name
rm -rf "target/release-stage/$name"
mkdir -p "$stage"/{bin,plugins,share/man}
for b in slurm-imex-prolog slurm-imex-epilog slurm-imex-watch slurm-imex; do
  [ -f "$bin_dir/$b" ] || { echo "release: $bin_dir/$b missing (cargo build --release, or scripts/cross-build.sh)" >&2; exit 1; }
  install -m 0755 "$bin_dir/$b" "$stage/bin/$b"
  $strip_tool --strip-unneeded "$REPO/$stage/bin/$b"
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
echo "$cpu" > "$stage/CPU"
# Only this version's tarball for this CPU is left there (the e2e harness
# installs it).
mkdir -p target/release-tarball
rm -f target/release-tarball/slurm-imex-*-"$cpu"-linux.tar.gz
out=target/release-tarball/$name.tar.gz
# Owned by root, dates from the commit: the same tree gives the same bytes.
stamp=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$stamp" \
  -C target/release-stage -czf "$out.tmp" "$name"
mv "$out.tmp" "$out"
rm -rf "target/release-stage/$name"
echo "$out $(stat -c %s "$out")"
