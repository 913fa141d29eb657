#!/bin/bash
# Builds (or reuses) SchedMD's Slurm from the upstream tarball into a prefix,
# the way AWS ParallelCluster and most hand-built sites install it:
#   ./configure --prefix=/opt/slurm --sysconfdir=/opt/slurm/etc; make; make install
# (plus --enable-multiple-slurmd, below).
# The tarball is the upstream orig tarball in Debian's source pool
# (apt-get source --download-only slurm-wlm/trixie). Prints the path of a
# cached tree laid out as that prefix (bin, sbin, lib/slurm, include/slurm,
# etc), to be mounted at /opt/slurm: Slurm compiles its prefix in.
#
#   scripts/slurm-prefix.sh            # 24.11 from trixie, prefix /opt/slurm
#
# Cached under $SLURM_IMEX_PREFIX_CACHE (default /var/cache/slurm-imex/prefix):
# a stamp naming the tarball is written last, so an interrupted build is
# never used. About 7 minutes on 2 cores the first time, 0 s after.
set -euo pipefail
suite=trixie
prefix=/opt/slurm
cache=${SLURM_IMEX_PREFIX_CACHE:-/var/cache/slurm-imex/prefix}
tree=$cache/$suite
stamp=$tree/.slurm-imex-prefix-complete
log=$cache/$suite.build.log

# --enable-multiple-slurmd, as Debian builds its packages: the test cluster
# runs every slurmd on one host beside one munged, and without it slurmd
# refuses a step's job credential that another node of the same host
# already decoded ("_verify_signature: failed decode", munged: "Replayed
# credential"). It changes nothing else the tests touch.
configure_flags="--prefix=$prefix --sysconfdir=$prefix/etc --disable-debug --enable-multiple-slurmd"
if [ -f "$stamp" ] && [ "$(sed -n 2p "$stamp")" = "$configure_flags" ]; then echo "$tree"; exit 0; fi
export DEBIAN_FRONTEND=noninteractive
# What configure needs for the plugins the tests use (munge auth, cons_tres).
for pkg in libmunge-dev gcc make python3 pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need="${need:-} $pkg"
done
if [ -n "${need:-}" ]; then
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

mkdir -p "$cache/src"
tarball=$(ls "$cache"/src/slurm-wlm_*.orig.tar.* 2>/dev/null | head -1 || true)
if [ -z "$tarball" ]; then
  # The mirror apt already uses on this machine, with a deb-src line for
  # the suite, in a private apt state so the machine's own is untouched.
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || { echo "slurm-prefix: no Debian mirror found in /etc/apt" >&2; exit 1; }
  apt_state=$cache/apt
  mkdir -p "$apt_state/lists/partial"
  echo "deb-src $mirror $suite main" > "$apt_state/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$apt_state/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
            -o "Dir::State::Lists=$apt_state/lists" -o "APT::Get::AllowUnauthenticated=false")
  apt-get "${apt_opts[@]}" update -qq >/dev/null
  # The .dsc may be refused by this older apt; the orig tarball is all we need.
  (cd "$cache/src" && apt-get "${apt_opts[@]}" source --download-only -qq "slurm-wlm/$suite" >/dev/null 2>&1) || true
  tarball=$(ls "$cache"/src/slurm-wlm_*.orig.tar.* 2>/dev/null | head -1 || true)
  [ -n "$tarball" ] || { echo "slurm-prefix: apt-get source slurm-wlm/$suite fetched no orig tarball" >&2; exit 1; }
fi

build=$cache/build
rm -rf "$build" "$tree"
mkdir -p "$build"
tar -xf "$tarball" -C "$build"
src=$(find "$build" -mindepth 1 -maxdepth 1 -type d | head -1)
start=$SECONDS
echo "slurm-prefix: building $(basename "$tarball") into $prefix (log: $log)" >&2
if ! (cd "$src" && ./configure $configure_flags && make -j"$(nproc)" && make install DESTDIR="$build/dest") > "$log" 2>&1; then
  echo "slurm-prefix: the build failed; last lines of $log:" >&2
  tail -5 "$log" >&2
  exit 1
fi
mv "$build/dest$prefix" "$tree"
rm -rf "$build"
mkdir -p "$tree/etc"
printf '%s\n%s\n' "$(basename "$tarball")" "$configure_flags" > "$stamp"
echo "slurm-prefix: built in $((SECONDS - start)) s ($(du -sh "$tree" | cut -f1))" >&2
echo "$tree"
