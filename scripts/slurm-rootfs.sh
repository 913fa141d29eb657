#!/bin/bash
# Makes (or reuses) a root filesystem holding another Debian suite's own
# Slurm packages, in which the end-to-end suite runs its namespaced cluster
# (docs/test-cluster.md). Prints the rootfs path.
#
#   scripts/slurm-rootfs.sh trixie     # Slurm 24.11 (Debian 13)
#   scripts/slurm-rootfs.sh sid        # Slurm 26.05 (Debian unstable)
#   scripts/slurm-rootfs.sh bookworm systemd
#                                      # Slurm 22.05 with systemd 252 as an init,
#                                      # for nodes booted by systemd-nspawn
#   scripts/slurm-rootfs.sh --arch=arm64 trixie
#                                      # Debian 13's arm64 Slurm 24.11: its
#                                      # programs run under qemu-user
#                                      # (scripts/cross-toolchain.sh binfmt)
#
# The rootfs is cached under $SLURM_IMEX_ROOTFS_CACHE (default
# /var/cache/slurm-imex/rootfs): a machine that keeps it skips debootstrap.
# A rootfs is used only once debootstrap finished (a stamp file says so), so
# an interrupted run never leaves a half-made one in use.
set -euo pipefail
arch=
case ${1:-} in --arch=*) arch=${1#--arch=}; shift;; esac
suite=${1:?usage: slurm-rootfs.sh [--arch=ARCH] SUITE [systemd]}
flavor=${2:-}
case "$suite" in *[!a-z0-9-]*|"") echo "slurm-rootfs: bad suite name '$suite'" >&2; exit 2;; esac
cache=${SLURM_IMEX_ROOTFS_CACHE:-/var/cache/slurm-imex/rootfs}
packages=slurmd,slurmctld,slurm-client,munge,libslurm-dev,iproute2,procps,util-linux,passwd,ca-certificates
case "$flavor" in
  "") root=$cache/$suite;;
  systemd) root=$cache/$suite-systemd; packages=$packages,systemd,systemd-sysv,dbus;;
  *) echo "slurm-rootfs: unknown flavor '$flavor' (systemd)" >&2; exit 2;;
esac
# Another architecture than this machine's: its own root, and debootstrap
# runs its packages' scripts under qemu-user (binfmt_misc, registered here).
debootstrap_arch=()
case "$arch" in
  ""|"$(dpkg --print-architecture)") ;;
  *[!a-z0-9]*) echo "slurm-rootfs: bad architecture '$arch'" >&2; exit 2;;
  *) root=$root-$arch; debootstrap_arch=(--arch="$arch"); packages=$packages,file
     "$(dirname "$0")/cross-toolchain.sh" binfmt;;
esac
stamp=$root/.slurm-imex-rootfs-complete

# One maker at a time per root (the background build queue may ask for it
# too: scripts/slurm-builds.sh); the second finds it made.
mkdir -p "$cache"
exec 9>"$root.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$packages" ]; then
  echo "$root"; exit 0
fi
command -v debootstrap >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}
# The Debian mirror apt already uses on this machine (deb822 or one-line format).
mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || { echo "slurm-rootfs: no Debian mirror found in /etc/apt" >&2; exit 1; }

mkdir -p "$cache"
rm -rf "$root.tmp"
start=$SECONDS
if ! debootstrap "${debootstrap_arch[@]}" --variant=minbase --include="$packages" "$suite" "$root.tmp" "$mirror" \
     > "$root.debootstrap.log" 2>&1; then
  echo "slurm-rootfs: debootstrap $suite failed; last lines of $root.debootstrap.log:" >&2
  tail -5 "$root.debootstrap.log" >&2
  exit 1
fi
# The packages' services are never started in a chroot; our tests run their own daemons.
rm -f "$root.tmp"/var/cache/apt/archives/*.deb
echo "$packages" > "$root.tmp/.slurm-imex-rootfs-complete"
rm -rf "$root"
mv "$root.tmp" "$root"
echo "slurm-rootfs: $suite${arch:+ $arch} made in $((SECONDS - start)) s" >&2
echo "$root"
