#!/bin/bash
# Builds (or reuses) one Slurm release from SchedMD's sources, laid out the
# way a site installs it, for the end-to-end tests and for plugin builds:
#
#   scripts/slurm-prefix.sh [RELEASE] [--layout prefix|rhel]
#
# RELEASE is a release in ../shared/vendor/slurm (23.02, 23.11, 24.05,
# 25.05, 25.11, or the full version), whose checksum is checked against
# ../shared/vendor/SHA256SUMS.
#   --layout prefix  ./configure --prefix=/opt/slurm --sysconfdir=/opt/slurm/etc,
#                    as AWS ParallelCluster and most hand-built sites do; the
#                    tree printed is that prefix, to be mounted at /opt/slurm
#                    (tests/e2e/in-prefix.sh): Slurm compiles its prefix in.
#   --layout rhel    what slurm.spec's %configure gives SchedMD's RPMs: prefix
#                    /usr, libdir /usr/lib64, sysconfdir /etc/slurm; the tree
#                    printed is a root holding usr/ and etc/slurm, to be laid
#                    over / (tests/e2e/in-prefix.sh --root).
# Both add --enable-multiple-slurmd (below) and leave out what no test uses
# (debug info, slurmrestd, X11), and compile with -O1 and no -g: the build
# takes about half the CPU time of Slurm's default -g -O2.
#
# Cached per release and layout under $SLURM_IMEX_PREFIX_CACHE (default
# /var/cache/slurm-imex/prefix): a stamp naming the tarball and the flags is
# written last, so an interrupted build is never used. 2.5 to 3.5 minutes on
# 2 cores the first time, 0 s after. Exit 3 when the release's source
# snapshot is not on this machine (the caller shows the phase as skipped).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
vendor=${SLURM_IMEX_VENDOR:-$REPO/../shared/vendor}
cache=${SLURM_IMEX_PREFIX_CACHE:-/var/cache/slurm-imex/prefix}
release='' layout=prefix
while [ $# -gt 0 ]; do
  case $1 in
    --layout) layout=${2:?--layout needs prefix or rhel}; shift 2;;
    [0-9]*) release=$1; shift;;
    *) echo "slurm-prefix: unknown argument '$1' (RELEASE [--layout prefix|rhel])" >&2; exit 2;;
  esac
done
[ -n "$release" ] || { echo "slurm-prefix: name a release (RELEASE [--layout prefix|rhel]), such as 25.11" >&2; exit 2; }

# --enable-multiple-slurmd, as Debian builds its packages (slurm.spec's
# `--with multiple_slurmd`): the test cluster runs every slurmd on one host
# beside one munged, and without it slurmd refuses a step's job credential
# that another node of the same host already decoded ("_verify_signature:
# failed decode", munged: "Replayed credential"). It changes nothing else
# the tests touch. --with-json and --with-yaml make configure fail rather
# than leave out the serializers: slurmctld 25.05+ reads topology.yaml
# through serializer/yaml and exits at start without serializer/json
# ("fatal: serializer_required: could not find plugin for application/json").
common="--disable-debug --enable-multiple-slurmd --disable-slurmrestd --disable-x11 --with-json --with-yaml"
# -O0, as Slurm's own --disable-optimizations: these builds exist for the
# tests, which prove behaviour, never Slurm's speed, and a fresh CI machine
# compiles five of them (on 2 cores, src/common of 25.05: 27 s at -O1,
# 17 s at -O0).
cflags="-O0 -pipe"
# Lua (liblua5.3-dev, found by configure through pkg-config) for
# job_submit/lua, which runs slurm-imex's job_submit.lua (the shared-node
# tests); the stamp names it so a build made without it is rebuilt.
with_lua=lua5.3
case $layout in
  prefix) configure_flags="--prefix=/opt/slurm --sysconfdir=/opt/slurm/etc $common";;
  rhel) configure_flags="--prefix=/usr --exec-prefix=/usr --bindir=/usr/bin --sbindir=/usr/sbin \
--sysconfdir=/etc/slurm --datadir=/usr/share --includedir=/usr/include --libdir=/usr/lib64 \
--libexecdir=/usr/libexec --localstatedir=/var --sharedstatedir=/var/lib --mandir=/usr/share/man \
--infodir=/usr/share/info --with-systemdsystemunitdir=/usr/lib/systemd/system --enable-pkgconfig $common";;
  *) echo "slurm-prefix: --layout is prefix or rhel, not '$layout'" >&2; exit 2;;
esac

# The source tarball of the release: the vendored snapshot, its checksum
# checked.
tarball_of() {
  local file; file=$(cd "$vendor/slurm" 2>/dev/null && ls slurm-"$release"*.tar.xz 2>/dev/null | sed -n 1p || true)
  if [ -z "$file" ]; then
    echo "slurm-prefix: no source snapshot of Slurm $release in $vendor/slurm (set SLURM_IMEX_VENDOR)" >&2
    exit 3
  fi
  (cd "$vendor" && grep " slurm/$file\$" SHA256SUMS | sha256sum -c --quiet -) >&2 ||
    { echo "slurm-prefix: $vendor/slurm/$file does not match its SHA256SUMS line" >&2; exit 1; }
  echo "$vendor/slurm/$file"
}

tarball=$(tarball_of)
name=$(basename "$tarball"); version=$(sed -n 's/^slurm-\([0-9][0-9.]*[0-9]\).*/\1/p' <<<"$name")
tree=$cache/$version-$layout
stamp=$tree/.slurm-imex-prefix-complete
log=$cache/$version-$layout.build.log
recipe="$configure_flags CFLAGS=$cflags with $with_lua"
if [ -f "$stamp" ] && [ "$(sed -n 2p "$stamp")" = "$recipe" ]; then echo "$tree"; exit 0; fi

export DEBIAN_FRONTEND=noninteractive
# What configure needs for the plugins the tests use (munge auth, cons_tres,
# the JSON and YAML serializers, job_submit/lua).
need=
for pkg in libmunge-dev libjson-c-dev libyaml-dev liblua5.3-dev gcc make python3 pkg-config xz-utils; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"
done
# shellcheck disable=SC2086 # $need: package names, split on purpose
[ -z "$need" ] || apt-get install -y -qq --no-install-recommends $need >/dev/null

build=$cache/build-$version-$layout
rm -rf "$build" "$tree"
mkdir -p "$build"
tar -xf "$tarball" -C "$build"
src=$(find "$build" -mindepth 1 -maxdepth 1 -type d | sed -n 1p)
start=$SECONDS
echo "slurm-prefix: building $name ($layout layout; log: $log)" >&2
# shellcheck disable=SC2086 # $configure_flags: configure options, split on purpose
if ! (cd "$src" && CFLAGS="$cflags" ./configure $configure_flags && make -j"$(( $(nproc) + 1 ))" &&
      make install DESTDIR="$build/dest") > "$log" 2>&1; then
  echo "slurm-prefix: the build failed; last lines of $log:" >&2
  tail -5 "$log" >&2
  exit 1
fi
# configure leaves a plugin out quietly when its library is missing.
if [ -z "$(find "$build/dest" -name job_submit_lua.so)" ]; then
  echo "slurm-prefix: the build has no job_submit_lua.so (configure did not find $with_lua; see $log)" >&2
  exit 1
fi
case $layout in
  prefix) mv "$build/dest/opt/slurm" "$tree"; mkdir -p "$tree/etc";;
  rhel) mv "$build/dest" "$tree"; mkdir -p "$tree/etc/slurm";;
esac
rm -rf "$build"
printf '%s\n%s\n' "$name" "$recipe" > "$stamp"
echo "slurm-prefix: built Slurm $version in $((SECONDS - start)) s ($(du -sh "$tree" | cut -f1))" >&2
echo "$tree"
