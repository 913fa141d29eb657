#!/bin/bash
# Runs a command with a Slurm that scripts/slurm-prefix.sh built mounted where
# it was built to live, in a private mount namespace:
#   tests/e2e/in-prefix.sh TREE command...         # TREE at /opt/slurm
#   tests/e2e/in-prefix.sh --root TREE command...  # TREE (slurm.spec's layout:
#                                                  # usr/, etc/slurm) laid over /
# Every mount is an overlay whose writes (what install.sh or rpm puts there)
# vanish when the command ends, so neither the cached build nor this machine
# keeps anything from a run. With --root, the build's /usr (bin, sbin, lib64)
# sits over this machine's, so its scontrol, slurmd and slurmctld are the
# ones on PATH, and /etc/slurm is its sysconfdir; /var/lib is an overlay too,
# so what an RPM makes there (/var/lib/slurm-imex, rpm's database in
# /var/lib/rpm: E2E_INSTALL=rpm) never reaches this machine's. A live kernel
# setting is no file: install.sh and rpm's scriptlets run in a network
# namespace of their own (cluster.sh: admin_install_sh, e2e_rpm).
set -euo pipefail
root=0
[ "${1:-}" = --root ] && { root=1; shift; }
tree=${1:?usage: in-prefix.sh [--root] TREE command...}; shift
sbin=$tree/sbin; [ "$root" = 1 ] && sbin=$tree/usr/sbin
[ -x "$sbin/slurmctld" ] || { echo "in-prefix: $tree holds no Slurm (scripts/slurm-prefix.sh)" >&2; exit 1; }
mkdir -p /opt/slurm /etc/sysctl.d /usr/local /etc/slurm
work=$(mktemp -d /var/tmp/slurm-imex-prefix.XXXXXX)
trap 'rm -rf "$work"' EXIT
unshare --mount --propagation private -- /bin/bash -c '
  set -e
  work=$1 tree=$2 root=$3; shift 3
  overlay() { mkdir -p "$work/$2/upper" "$work/$2/work"
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$work/$2/upper,workdir=$work/$2/work" "$3"; }
  if [ "$root" = 1 ]; then
    overlay "$tree/usr:/usr" usr /usr
    overlay "$tree/etc/slurm" etc-slurm /etc/slurm
    overlay /var/lib var-lib /var/lib
  else
    overlay "$tree" opt /opt/slurm
    overlay /usr/local usr-local /usr/local
  fi
  overlay /etc/sysctl.d sysctl /etc/sysctl.d
  "$@"' in-prefix "$work" "$tree" "$root" "$@"
