#!/bin/bash
# Writes one RPM per Slurm version a plugin was built for
# (scripts/build-plugins.sh), for RHEL-family sites, into target/rpm/:
#   slurm-imex-<version>-1.slurm<major.minor>.<arch>.rpm
# from packaging/rpm/slurm-imex.spec, with Debian's rpmbuild (apt: rpm).
#   scripts/package-rpm.sh [TRIPLE]    # default: this machine's (rustc -vV)
# The binaries come from target/TRIPLE/release or target/cross/TRIPLE/release
# (scripts/cross-build.sh; target/release for this
# machine's own triple), the plugins from target/slurm-plugins: every
# libspank_imex.so there whose ELF machine is TRIPLE's architecture, so
# x86_64 and aarch64 plugins can sit side by side in any layout. Nothing is
# compiled here; a missing or wrong-architecture binary is refused.
# SLURM_IMEX_FAST_PACKAGES=1 (what the tests set) compresses the payload fast
# (gzip -1): the same files in a larger RPM; a release is packaged without it.
# RPM_VERSION, RPM_OUT and RPM_ONLY (one major.minor) serve the tests'
# upgrade from an older slurm-imex.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
die() { echo "package-rpm: $*" >&2; exit 1; }
host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')
triple=${1:-$host}
[ -n "$triple" ] || die "give the target triple (rustc is not here to say this machine's)"
arch=${triple%%-*}
case $arch in
  x86_64) machine="X86-64";;
  aarch64) machine="AArch64";;
  *) die "no RPM architecture for $triple (x86_64 and aarch64 are built)";;
esac
command -v rpmbuild >/dev/null || die "rpmbuild is missing: apt-get install rpm"
version=$(cargo metadata --no-deps --format-version 1 |
  sed -n 's/.*"name":"slurm-imex-cli","version":"\([^"]*\)".*/\1/p')
[ -n "$version" ] || die "cannot read the workspace version"
version=${RPM_VERSION:-$version}
out=${RPM_OUT:-target/rpm}

# ELF machine of a file, as readelf names it ("Advanced Micro Devices X86-64", "AArch64").
elf_machine() { readelf -h "$1" 2>/dev/null | sed -n 's/^ *Machine: *//p'; }
is_arch() { [[ $(elf_machine "$1") == *"$machine" ]]; }

bindir=target/$triple/release
# scripts/cross-build.sh puts another architecture's build under target/cross/.
[ -x "$bindir/slurm-imex-prolog" ] || [ ! -x "target/cross/$triple/release/slurm-imex-prolog" ] || bindir=target/cross/$triple/release
[ -x "$bindir/slurm-imex-prolog" ] || [ "$triple" != "$host" ] || bindir=target/release
for b in slurm-imex-prolog slurm-imex-epilog slurm-imex-watch slurm-imex; do
  [ -x "$bindir/$b" ] || die "no $bindir/$b: build it first (cargo build --release${1:+ --target $triple})"
  is_arch "$bindir/$b" || die "$bindir/$b is $(elf_machine "$bindir/$b"), not $arch"
done
# Man pages come from the clap definitions; any runnable slurm-imex prints them.
runner=target/release/slurm-imex; [ -x "$runner" ] || runner=$bindir/slurm-imex
# The target's strip: this machine's for its own architecture, else
# <arch>-linux-gnu-strip (Debian: binutils-aarch64-linux-gnu).
strip_tool='strip'
[ "$arch" = "$(uname -m)" ] || strip_tool=$arch-linux-gnu-strip
command -v "$strip_tool" >/dev/null || die "$strip_tool is missing (apt-get install binutils-$arch-linux-gnu)"

# The plugins of this architecture, one per Slurm major.minor: the
# directory's name, or its slurm-version file, says which.
declare -A plugins=()
while IFS= read -r so; do
  is_arch "$so" || continue
  mm=$(basename "$(dirname "$so")")
  [[ $mm =~ ^[0-9]+\.[0-9]+$ ]] || mm=$(sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p' "$(dirname "$so")/slurm-version" 2>/dev/null)
  [[ $mm =~ ^[0-9]+\.[0-9]+$ ]] || { echo "package-rpm: $so: cannot tell its Slurm (no <major.minor> directory or slurm-version): skipped" >&2; continue; }
  [ -n "${plugins[$mm]:-}" ] || plugins[$mm]=$so
done < <(find target/slurm-plugins "target/cross/$triple/slurm-plugins" -name libspank_imex.so 2>/dev/null | sort)
[ ${#plugins[@]} -gt 0 ] || die "no $arch plugin under target/slurm-plugins: run scripts/build-plugins.sh first"

work=target/rpm-build/$arch
rm -rf "$work"; mkdir -p "$work"/{stage/bin,stage/plugin,stage/man,SOURCES,RPMS,BUILD,tmp}
stage=$REPO/$work/stage
for b in slurm-imex-prolog slurm-imex-epilog slurm-imex-watch slurm-imex; do
  install -m 0755 "$bindir/$b" "$stage/bin/$b"
  "$strip_tool" --strip-unneeded "$stage/bin/$b"
done
"$runner" man "$stage/man" >/dev/null
gzip -9n "$stage"/man/*
cp -r conf-examples docs README.md "$stage/"
cp packaging/maintainer-lib.sh "$work/SOURCES/"
# The spec, with its %changelog: packaging/debian/changelog's entries, in rpm's form.
dpkg-parsechangelog -l packaging/debian/changelog --all -S Version >/dev/null 2>&1 ||
  die "dpkg-parsechangelog is missing: apt-get install dpkg-dev"
{
  cat packaging/rpm/slurm-imex.spec
  echo "%changelog"
  n=$(dpkg-parsechangelog -l packaging/debian/changelog --count 1000 -S Version | wc -l)
  for i in $(seq 0 $((n - 1))); do
    v=$(dpkg-parsechangelog -l packaging/debian/changelog --offset "$i" --count 1 -S Version)
    d=$(dpkg-parsechangelog -l packaging/debian/changelog --offset "$i" --count 1 -S Date)
    m=$(dpkg-parsechangelog -l packaging/debian/changelog --offset "$i" --count 1 -S Maintainer)
    # The newest entry is this package's version-release (rpm checks it).
    [ "$i" = 0 ] && v=$version-1.slurm@MM@ || v=$v-1
    echo "* $(LC_ALL=C date -u -d "$d" '+%a %b %d %Y') $m - $v"
    dpkg-parsechangelog -l packaging/debian/changelog --offset "$i" --count 1 -S Changes |
      sed -n '/^ *\*/,$p' | sed -e 's/^ *\* /- /' -e 's/^ \{4,\}/  /' -e 's/%/%%/g'
    echo
  done
} > "$work/slurm-imex.spec.in"

mkdir -p "$out"
rm -f "$out"/slurm-imex-*."$arch".rpm
for mm in $(printf '%s\n' "${!plugins[@]}" | sort -V); do
  [ -z "${RPM_ONLY:-}" ] || [ "$mm" = "$RPM_ONLY" ] || continue
  next=${mm%.*}.$(printf '%02d' $((10#${mm#*.} + 1)))
  install -m 0755 "${plugins[$mm]}" "$stage/plugin/spank_imex.so"
  "$strip_tool" --strip-unneeded "$stage/plugin/spank_imex.so"
  sed "s/@MM@/$mm/" "$work/slurm-imex.spec.in" > "$work/slurm-imex.spec"
  rpmbuild -bb --quiet --target "$arch" \
    --define "_topdir $REPO/$work" --define "_tmppath $REPO/$work/tmp" \
    --define "stage $stage" --define "pkgversion $version" \
    --define "slurm_mm $mm" --define "slurm_next $next" \
    --define "_build_id_links none" ${SLURM_IMEX_FAST_PACKAGES:+--define "_binary_payload w1.gzdio"} \
    "$work/slurm-imex.spec" >"$work/rpmbuild-$mm.log" 2>&1 ||
    { cat "$work/rpmbuild-$mm.log" >&2; die "rpmbuild failed for Slurm $mm"; }
  rpm=$(find "$work/RPMS" -name "slurm-imex-$version-1.slurm$mm.$arch.rpm")
  [ -n "$rpm" ] || die "rpmbuild wrote no slurm-imex-$version-1.slurm$mm.$arch.rpm"
  mv "$rpm" "$out/"
  echo "$out/${rpm##*/} $(stat -c %s "$out/${rpm##*/}")"
done
rm -rf "$work"
