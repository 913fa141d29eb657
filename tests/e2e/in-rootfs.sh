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
  root=$1 repo=$2 pivot=$3; shift 3
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  if [ "$pivot" = 1 ]; then
    # A container-style /dev: a tmpfs holding the host'"'"'s basic nodes,
    # its own devpts, shm and mqueue, and a /dev/log for binds to land on.
    mount -t tmpfs -o mode=0755,nosuid tmpfs "$root/dev"
    for n in null zero full random urandom tty fuse; do
      [ -e "/dev/$n" ] || continue
      touch "$root/dev/$n"; mount --bind "/dev/$n" "$root/dev/$n"
    done
    mkdir "$root/dev/pts" "$root/dev/shm" "$root/dev/mqueue"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
    ln -s pts/ptmx "$root/dev/ptmx"
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
    mount -t mqueue mqueue "$root/dev/mqueue"
    touch "$root/dev/log"
    ln -s /proc/self/fd "$root/dev/fd"
    for i in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${i%%:*}" "$root/dev/${i#*:}"; done
  else
    mount --rbind /dev "$root/dev"
  fi
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
  env=(/usr/bin/env -i -C "$repo" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
  if [ "$pivot" = 1 ]; then
    mkdir -p "$root/.in-rootfs-old"
    cd "$root"
    pivot_root . .in-rootfs-old
    cd /
    umount -l /.in-rootfs-old
    exec "${env[@]}" "$@"
  fi
  cd "$repo"
  exec chroot "$root" "${env[@]}" "$@"' in-rootfs "$root" "$REPO" "${IN_ROOTFS_PIVOT:-0}" "$@"
