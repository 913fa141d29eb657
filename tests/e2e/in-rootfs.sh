#!/bin/bash
# Runs a command inside a root filesystem made by scripts/slurm-rootfs.sh,
# in a private mount namespace (docs/test-cluster.md):
# the rootfs bound on itself (so "/" is a mount point), /proc, /sys and /dev
# from the host, private tmpfs on /tmp and /run, the host's /etc/hosts (as a
# container runtime gives one), and this checkout at the same path. Nothing
# mounted here outlives the command.
# Without the host's /etc/hosts the host's own name does not resolve in the
# rootfs: munged then signs credentials with a null origin, and Slurm 24.11+
# falls back to resolving the submit host's name for every reply to salloc
# and srun, retrying getaddrinfo for 10 s each time (steps that end 60 s
# late, a controller that stalls).
#   tests/e2e/in-rootfs.sh ROOTFS COMMAND [ARGS...]
set -euo pipefail
root=$(cd "${1:?usage: in-rootfs.sh ROOTFS COMMAND...}" && pwd); shift
[ $# -gt 0 ] || { echo "in-rootfs: no command" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/../.." && pwd)
exec unshare --mount --propagation private -- /bin/bash -c '
  set -e
  root=$1 repo=$2; shift 2
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
  mount -t tmpfs -o mode=0755 tmpfs "$root/run"
  # The host'"'"'s /etc/hosts, plus its own name if that file lacks it (the
  # host may resolve it some other way: DNS, nss-myhostname).
  cat /etc/hosts > "$root/run/hosts" 2>/dev/null || true
  host=$(hostname)
  grep -qE "[[:space:]]$host([[:space:]]|\$)" "$root/run/hosts" || echo "127.0.1.1 $host" >> "$root/run/hosts"
  [ -e "$root/etc/hosts" ] || : > "$root/etc/hosts"
  mount --bind "$root/run/hosts" "$root/etc/hosts"
  mkdir -p "$root$repo"
  mount --bind "$repo" "$root$repo"
  cd "$repo"
  exec chroot "$root" /usr/bin/env -i -C "$repo" PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    "$@"' in-rootfs "$root" "$REPO" "$@"
