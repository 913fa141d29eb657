#!/bin/bash
# Runs a command with the Slurm that scripts/slurm-prefix.sh built mounted
# at /opt/slurm, where it was built to live, in a private mount namespace:
#   tests/e2e/in-prefix.sh TREE command...
# /opt/slurm, /usr/local and /etc/sysctl.d are overlays whose writes (what
# install.sh puts there) vanish when the command ends, so neither the cached
# build nor this machine keeps anything from a run.
set -euo pipefail
tree=${1:?usage: in-prefix.sh TREE command...}; shift
[ -x "$tree/sbin/slurmctld" ] || { echo "in-prefix: $tree holds no Slurm (scripts/slurm-prefix.sh)" >&2; exit 1; }
mkdir -p /opt/slurm /etc/sysctl.d /usr/local
work=$(mktemp -d /var/tmp/slurm-imex-prefix.XXXXXX)
trap 'rm -rf "$work"' EXIT
unshare --mount --propagation private -- /bin/bash -c '
  set -e
  work=$1 tree=$2; shift 2
  overlay() { mkdir -p "$work/$2/upper" "$work/$2/work"
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$work/$2/upper,workdir=$work/$2/work" "$3"; }
  overlay "$tree" opt /opt/slurm
  overlay /usr/local usr-local /usr/local
  overlay /etc/sysctl.d sysctl /etc/sysctl.d
  "$@"' in-prefix "$work" "$tree" "$@"
