#!/bin/bash
# Puts the container stack a GB200 site runs (NVIDIA's enroot 4.1.2 and
# pyxis 0.24.0) into a Slurm root filesystem made by scripts/slurm-rootfs.sh,
# for the end-to-end "containers" phase (tests/e2e/containers.sh). Test
# tooling only: nothing here ships.
#   tests/e2e/containers-build.sh ROOTFS
# - enroot's runtime needs from Debian (jq, parallel, squashfs-tools, zstd,
#   curl) and busybox-static for the test image go into the rootfs by apt;
# - enroot and pyxis are built here from the source snapshots in
#   $SLURM_IMEX_VENDOR (default: ../shared/vendor beside the checkout; no
#   package registry carries them), checksums verified; pyxis against the
#   rootfs's own <slurm/spank.h>, as it must match that Slurm's major.minor;
# - both are installed under the rootfs's /usr/local (enroot then reads its
#   configuration from /usr/local/etc/enroot; pyxis is
#   /usr/local/lib/slurm/spank_pyxis.so).
# A stamp in the rootfs names what was installed; a rerun with the same
# stamp does nothing. Exit 3 (and one line) when the snapshots are missing.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
root=$(cd "${1:?usage: containers-build.sh ROOTFS}" && pwd)
vendor=${SLURM_IMEX_VENDOR:-$REPO/../shared/vendor}
enroot=enroot-4.1.2 pyxis=pyxis-0.24.0
deps=(musl-1.2.5 makeself-2.4.5 linux-headers-4.19.88-1)
runtime_packages=(jq parallel squashfs-tools zstd curl busybox-static)
header=$root/usr/include/slurm/slurm_version.h
slurm=$(sed -n 's/^#define SLURM_VERSION_NUMBER \(0x[0-9a-fA-F]*\).*/\1/p' "$header")
[ -n "$slurm" ] || { echo "containers-build: no SLURM_VERSION_NUMBER in $header (install libslurm-dev there)" >&2; exit 1; }
stamp=$root/usr/local/.slurm-imex-containers
want="$enroot $pyxis slurm-$slurm ${runtime_packages[*]}"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
if [ ! -f "$vendor/SHA256SUMS" ]; then
  echo "containers-build: no source snapshots at $vendor (set SLURM_IMEX_VENDOR to the folder holding $enroot.tar.gz and $pyxis.tar.gz)" >&2
  exit 3
fi
(cd "$vendor" && grep -E " ($enroot|$pyxis|${deps[0]}|${deps[1]}|${deps[2]})\.tar\.gz\$" SHA256SUMS | sha256sum --quiet -c -) \
  || { echo "containers-build: checksums in $vendor/SHA256SUMS do not match" >&2; exit 1; }

start=$SECONDS
echo "containers-build: apt-get install ${runtime_packages[*]} in $root" >&2
"$REPO/tests/e2e/in-rootfs.sh" "$root" env DEBIAN_FRONTEND=noninteractive sh -c \
  'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null' apt "${runtime_packages[@]}"
rm -f "$root"/var/cache/apt/archives/*.deb

build=$(mktemp -d /var/tmp/slurm-imex-containers.XXXXXX)
trap 'rm -rf "$build"' EXIT
tar xzf "$vendor/$enroot.tar.gz" -C "$build"
# enroot's git submodules are not in its archive: its deps/ come from the
# three snapshots beside it.
rmdir "$build/$enroot/deps/musl" "$build/$enroot/deps/makeself" "$build/$enroot/deps/linux-headers"
for d in "${deps[@]}"; do tar xzf "$vendor/$d.tar.gz" -C "$build/$enroot/deps"; done
make -C "$build/$enroot" -j"$(nproc)" >"$build/enroot.log" 2>&1 \
  || { tail -20 "$build/enroot.log" >&2; echo "containers-build: enroot build failed" >&2; exit 1; }
make -C "$build/$enroot" install prefix=/usr/local DESTDIR="$root" >>"$build/enroot.log" 2>&1

tar xzf "$vendor/$pyxis.tar.gz" -C "$build"
# Only the rootfs's slurm/ headers: the compiler keeps this machine's libc.
mkdir -p "$build/include"; ln -s "$root/usr/include/slurm" "$build/include/slurm"
CPPFLAGS="-I$build/include" make -C "$build/$pyxis" >"$build/pyxis.log" 2>&1 \
  || { tail -20 "$build/pyxis.log" >&2; echo "containers-build: pyxis build failed" >&2; exit 1; }
make -C "$build/$pyxis" install prefix=/usr/local DESTDIR="$root" >>"$build/pyxis.log" 2>&1
echo "$want" > "$stamp"
echo "containers-build: $enroot and $pyxis (for Slurm $slurm) in $root in $((SECONDS - start)) s" >&2
