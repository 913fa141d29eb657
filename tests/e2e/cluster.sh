# shellcheck shell=bash
# A real local multi-node Slurm for slurm-imex (docs/test-cluster.md):
# slurmctld on the host, one slurmd per test node, each node in its own
# network, mount and UTS namespace with its own IP (10.77.0.1N on a bridge
# made here) and hostname (nN). Per-node bind mounts give each node its own
# /etc/nvidia-imex, /run/nvidia-imex, /run/slurm-imex, /var/lib/slurm-imex,
# /dev/nvidia-caps-imex-channels and fake hardware files (/run/fakehw).
# Plugin, prolog and epilog come from the build (E2E_INSTALL=target, the
# plugin from $E2E_PLUGIN) or from the installed Debian package
# (E2E_INSTALL=package), or from the release tarball by its install.sh
# into a Slurm built into a prefix (E2E_INSTALL=prefix, run inside
# tests/e2e/in-prefix.sh: /opt/slurm, slurm.conf in /opt/slurm/etc; or, with
# E2E_SLURM_PREFIX=/usr E2E_SLURM_SYSCONFDIR=/etc/slurm, slurm.spec's layout
# laid over /), every Slurm program from there; or from the RPM
# (E2E_INSTALL=rpm, scripts/package-rpm.sh) installed with rpm into a Slurm
# built in slurm.spec's layout and laid over / (tests/e2e/in-prefix.sh
# --root): the plugin in /usr/lib64/slurm, the prolog and epilog in
# /usr/sbin, imex.toml in /etc/slurm, as on a RHEL-family node. Configs are
# rendered from conf-examples/.
# E2E_SWITCH=1 turns on Slurm's own switch/nvidia_imex; E2E_TOPOLOGY=conf or
# yaml describes two racks (blocks) of two nodes with topology/block.
# E2E_CONTAINERS=1 gives each node its own enroot and pyxis runtime paths.
# E2E_SYSTEMD_ROOTFS=DIR boots each node instead: systemd-nspawn --boot of
# that Debian 12 root filesystem (scripts/slurm-rootfs.sh bookworm systemd)
# in the node's network namespace, systemd 252 as its PID 1, slurmd as its
# slurmd.service and nvidia-imex.service in NVIDIA's shape (Type=forking,
# the fake daemon) with our drop-in; imex.toml says manager = "systemd".
# Everything started here runs in the phase's cgroup (reap.sh), and
# cluster_down stops it all: the daemons gracefully by PID, then whatever
# else the cgroup holds.

E2E_NODES=${E2E_NODES:-3}
E2E_GPUS=${E2E_GPUS:-4}
# On a disk file system, not tmpfs: the tests count tmpfs mounts on the
# channel directory, and the nodes' own channel directories live under here.
C=${SLURM_IMEX_E2E_DIR:-/var/tmp/slurm-imex-e2e}
E2E_INSTALL=${E2E_INSTALL:-target}
E2E_SWITCH=${E2E_SWITCH:-0}
E2E_TOPOLOGY=${E2E_TOPOLOGY:-}
# Debian's Slurm's PluginDir on this machine's (or rootfs's) architecture:
# where its own plugins are (aarch64-linux-gnu in the arm64 rootfs).
PLUGIN_DIR=$(dpkg-query -L slurm-wlm-basic-plugins 2>/dev/null | grep '/slurm-wlm/[^/]*\.so$' | sed -n 1p)
PLUGIN_DIR=${PLUGIN_DIR%/*}
PLUGIN_DIR=${PLUGIN_DIR:-/usr/lib/$(uname -m)-linux-gnu/slurm-wlm}
REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
source "$(dirname "${BASH_SOURCE[0]}")/wait.sh"
source "$(dirname "${BASH_SOURCE[0]}")/reap.sh"
BR=imexbr0
NET=10.77.0
CHANNEL_MAJOR=507
TEST_USER=imexuser
export SLURM_CONF=$C/etc-slurm/slurm.conf
SLURM_PREFIX=${E2E_SLURM_PREFIX:-/opt/slurm}
SLURM_SYSCONFDIR=${E2E_SLURM_SYSCONFDIR:-$SLURM_PREFIX/etc}
# The RPM's layout is slurm.spec's: Slurm in /usr, its config in /etc/slurm.
if [ "$E2E_INSTALL" = rpm ]; then SLURM_PREFIX=/usr SLURM_SYSCONFDIR=/etc/slurm; fi
# Where slurm-imex's install put imex.toml: the sysconfdir ($C/etc-slurm bound there).
installs_in_sysconfdir() { [ "$E2E_INSTALL" = prefix ] || [ "$E2E_INSTALL" = rpm ]; }
if installs_in_sysconfdir; then
  # $C/etc-slurm is bound on the sysconfdir (cluster_install), where this
  # Slurm was built to look; its programs come first on PATH.
  export SLURM_CONF=$SLURM_SYSCONFDIR/slurm.conf
  export PATH=$SLURM_PREFIX/bin:$SLURM_PREFIX/sbin:$PATH
fi

node_ip() { echo "$NET.$((10 + $1))"; }
# The process whose namespaces are node N's: its slurmd, or the init of its
# booted container (E2E_SYSTEMD_ROOTFS).
slurmd_pid() { if [ -n "${E2E_SYSTEMD_ROOTFS:-}" ]; then cat "$C/run/node-n$1.pid"; else cat "$C/run/slurmd-n$1.pid"; fi; }
# Run a command inside node N's namespaces (net, mount, UTS).
# A booted node (E2E_SYSTEMD_ROOTFS) is entered whole, pid namespace too:
# its systemd answers systemctl only from a peer in its own pid namespace.
in_node() {
  local n=$1; shift
  if [ -n "${E2E_SYSTEMD_ROOTFS:-}" ]; then nsenter -t "$(slurmd_pid "$n")" -a -r -w -- "$@"
  else nsenter -t "$(slurmd_pid "$n")" -n -m -u -r -w -- "$@"; fi
}
as_user() { runuser -u "$TEST_USER" -- env SLURM_CONF="$SLURM_CONF" "$@"; }

# E2E_INSTALL=prefix: the documented procedure for a Slurm in a prefix.
# The release tarball (scripts/release.sh) is unpacked and its install.sh
# run against /opt/slurm, with $C/etc-slurm bound on /opt/slurm/etc; what
# it printed is kept in $C/install.out for the plugstack and slurm.conf lines.
# install.sh runs as on the node an admin installs (admin_install_sh), never
# on this machine: $C/admin/host-reserved-before is this machine's port
# reservation before it ran (prefix-install.sh checks it is unchanged).
prefix_install() {
  local tarball
  local tarballs=("$REPO"/target/release-tarball/slurm-imex-*-"$(uname -m)"-linux.tar.gz)
  [ ${#tarballs[@]} = 1 ] && [ -f "${tarballs[0]}" ] ||
    { echo "cluster_install: want one release tarball in target/release-tarball, found: ${tarballs[*]} (run scripts/release.sh)" >&2; return 1; }
  tarball=${tarballs[0]}
  [ -x "$SLURM_PREFIX/sbin/slurmctld" ] || { echo "cluster_install: no Slurm in $SLURM_PREFIX (run inside tests/e2e/in-prefix.sh)" >&2; return 1; }
  umount "$SLURM_SYSCONFDIR" 2>/dev/null || true
  mount --bind "$C/etc-slurm" "$SLURM_SYSCONFDIR"
  mkdir -p "$C/release"
  tar -xzf "$tarball" -C "$C/release"
  admin_node_fresh || { echo "cluster_install: cannot make the admin node for install.sh" >&2; return 1; }
  cat /proc/sys/net/ipv4/ip_local_reserved_ports > "$C/admin/host-reserved-before"
  admin_install_sh "$C"/release/slurm-imex-*/install.sh --slurm-prefix "$SLURM_PREFIX" > "$C/install.out" 2>&1 ||
    { echo "cluster_install: install.sh failed:" >&2; cat "$C/install.out" >&2; return 1; }
  ln -s /usr/local/sbin/slurm-imex-prolog /usr/local/sbin/slurm-imex-epilog /usr/local/sbin/slurm-imex-watch /usr/local/bin/slurm-imex "$C/bin/"
}

# The node install.sh runs on (E2E_INSTALL=prefix). install.sh changes the
# system beyond its files (packaging/maintainer-lib.sh): it writes
# /etc/sysctl.d/90-slurm-imex.conf and adds the IMEX port span to the live
# net.ipv4.ip_local_reserved_ports of the network namespace it runs in. Run
# here as it is, both would land on this machine, which is the harness and
# no node. So every install.sh of a phase runs in one network namespace of
# its own ($E2E_ADMIN_NETNS, named in reap.sh; kept for the phase: what one
# run reserved, the next releases) with $C/admin/sysctl.d (this machine's
# /etc/sysctl.d as the phase began: the site's own files) bound on
# /etc/sysctl.d. Once the
# cluster is up the namespace is on its network ($ADMIN_IP), so install.sh
# asks the controller (scontrol show config, munge's socket in /run) as on
# a live cluster. The RPM's scriptlets get a private /run as well (e2e_rpm:
# %postun removes /run/slurm-imex); install.sh writes nothing there.
ADMIN_IP=$NET.9
admin_install_sh() { # install.sh [args...]
  admin_net || { echo "admin_install_sh: cannot make the network namespace $E2E_ADMIN_NETNS" >&2; return 1; }
  nsenter --net="/run/netns/$E2E_ADMIN_NETNS" -- unshare --mount --propagation private -- \
    /bin/sh -c 'mount --bind "$1" /etc/sysctl.d && shift && exec "$@"' admin-install-sh "$C/admin/sysctl.d" "$@"
}

# A new admin node: a fresh network namespace (nothing reserved yet) and
# /etc/sysctl.d as this machine's.
admin_node_fresh() {
  e2e_admin_net_down
  rm -rf "$C/admin"
  mkdir -p "$C/admin/sysctl.d"
  cp -a /etc/sysctl.d/. "$C/admin/sysctl.d/" || return 1
  admin_net
}

# The admin node's namespace (made when missing), and its link to the
# cluster's bridge once the bridge exists (cluster_up makes it).
admin_net() {
  if [ "$(stat -f -c %T "/run/netns/$E2E_ADMIN_NETNS" 2>/dev/null)" != nsfs ]; then
    rm -f "/run/netns/$E2E_ADMIN_NETNS"
    ip netns add "$E2E_ADMIN_NETNS" && ip -n "$E2E_ADMIN_NETNS" link set lo up || return 1
  fi
  ip link show "$BR" >/dev/null 2>&1 || return 0
  if ! ip -n "$E2E_ADMIN_NETNS" link show va0 >/dev/null 2>&1; then
    ip link del vha0 2>/dev/null
    ip link add vha0 type veth peer name va0 &&
      ip link set va0 netns "$E2E_ADMIN_NETNS" &&
      ip -n "$E2E_ADMIN_NETNS" addr add "$ADMIN_IP/24" dev va0 &&
      ip -n "$E2E_ADMIN_NETNS" link set va0 up || return 1
  fi
  ip link set vha0 master "$BR" && ip link set vha0 up
}

# The admin node's live reserved ports, as install.sh left them.
admin_reserved_ports() { nsenter --net="/run/netns/$E2E_ADMIN_NETNS" cat /proc/sys/net/ipv4/ip_local_reserved_ports; }

# E2E_INSTALL=rpm: the RPM of this Slurm's major.minor (E2E_RPM, else
# target/rpm's), installed as a RHEL-family admin installs it, with
# $C/etc-slurm bound on /etc/slurm first so that its imex.toml lands there.
# What `rpm -V` said right after is kept in $C/rpm-verify.out, the RPM's
# file list in $C/rpm-files (rpm-install.sh's tests).
rpm_install() {
  local rpm out
  rpm=$(rpm_for_this_slurm) || return 1
  [ -x /usr/sbin/slurmctld ] && [ -d /usr/lib64/slurm ] ||
    { echo "cluster_install: E2E_INSTALL=rpm needs a Slurm in slurm.spec's layout laid over / (tests/e2e/in-prefix.sh --root)" >&2; return 1; }
  mount --bind "$C/etc-slurm" /etc/slurm
  # --nodeps: this Slurm is a source build, not the `slurm` RPM the package
  # requires, and rpm's database here holds no glibc or bash either
  # (tests/packaging/rpm.sh checks the dependencies beside stand-ins).
  out=$(e2e_rpm -i --nodeps "$rpm") || { echo "cluster_install: rpm -i $rpm failed: $out" >&2; return 1; }
  printf '%s\n' "$out" > "$C/rpm-install.out"
  { e2e_rpm -V --nodeps slurm-imex; echo "rc=$?"; } > "$C/rpm-verify.out"
  e2e_rpm -ql slurm-imex > "$C/rpm-files"
  local f
  for f in /usr/sbin/slurm-imex-prolog /usr/sbin/slurm-imex-epilog /usr/sbin/slurm-imex-watch /usr/bin/slurm-imex /usr/lib64/slurm/spank_imex.so; do
    grep -qx "$f" "$C/rpm-files" || { echo "cluster_install: the RPM installed no $f" >&2; return 1; }
  done
  ln -s /usr/sbin/slurm-imex-prolog /usr/sbin/slurm-imex-epilog /usr/sbin/slurm-imex-watch /usr/bin/slurm-imex "$C/bin/"
}

# The RPM for this Slurm's major.minor: E2E_RPM, else target/rpm's.
rpm_for_this_slurm() {
  local mm rpm=${E2E_RPM:-}
  mm=$(slurmctld -V | awk '{print $2}'); mm=${mm%.*}
  [ -n "$rpm" ] || rpm=$(ls "$REPO"/target/rpm/slurm-imex-*-1.slurm"$mm.$(uname -m)".rpm 2>/dev/null | sed -n 1p)
  [ -f "$rpm" ] || { echo "cluster_install: no RPM for Slurm $mm (set E2E_RPM, or run scripts/package-rpm.sh)" >&2; return 1; }
  echo "$rpm"
}

# rpm as the admin runs it, its database where RHEL keeps it (in
# in-prefix.sh's /var/lib overlay; Debian's rpm would use ~/.rpmdb).
# Here "/" is PID 1's root, so the scriptlets take this for the running
# node: they run in a network namespace of their own (the live port
# reservation they change is that namespace's, never this machine's) and on
# a private /run (%postun removes /run/slurm-imex, the nodes' mount point
# here). Prints what rpm printed but Debian's warning against using rpm.
e2e_rpm() {
  local out rc
  out=$(unshare --mount --net --propagation private -- \
    sh -c 'mount -t tmpfs tmpfs /run && exec "$@"' e2e-rpm rpm --dbpath /var/lib/rpm "$@" 2>&1)
  rc=$?
  [ -z "$out" ] || grep -v -e 'use Alien instead' -e 'assuming you know what you are doing' <<<"$out"
  return $rc
}

# The imex.toml the test config is rendered from: the one install.sh put
# beside slurm.conf (prefix), the one the RPM put in /etc/slurm (rpm), the
# installed package's conffile (package: in the upgrade phase that is the
# previous release's, which knows no newer key), else the shipped example.
imex_toml_source() {
  case $E2E_INSTALL in
    prefix|rpm) echo "$C/etc-slurm/imex.toml";;
    package) echo /etc/slurm/imex.toml;;
    *) echo "$REPO/conf-examples/imex.toml";;
  esac
}

# Copy the built artifacts and render every config from conf-examples.
cluster_install() {
  local bin=$1 i
  rm -rf "$C"
  mkdir -p "$C"/{bin,lib,etc-slurm,state,run,log,out,spool}
  for f in nvidia-imex nvidia-imex-ctl fake-gpu-job; do cp "$bin/$f" "$C/bin/"; done
  if [ "$E2E_INSTALL" = package ]; then
    # What dpkg installed; the tests call them through $C/bin as well.
    ln -s /usr/sbin/slurm-imex-prolog /usr/sbin/slurm-imex-epilog /usr/sbin/slurm-imex-watch /usr/bin/slurm-imex "$C/bin/"
    [ -f "$PLUGIN_DIR/spank_imex.so" ] || { echo "cluster_install: the package's $PLUGIN_DIR/spank_imex.so is missing" >&2; return 1; }
  elif [ "$E2E_INSTALL" = prefix ]; then
    prefix_install || return 1
  elif [ "$E2E_INSTALL" = rpm ]; then
    rpm_install || return 1
  else
    for f in slurm-imex-prolog slurm-imex-epilog slurm-imex-watch slurm-imex; do cp "$bin/$f" "$C/bin/"; done
    cp "${E2E_PLUGIN:-$bin/libspank_imex.so}" "$C/bin/spank_imex.so"
  fi
  # What every test task reports, one line: hostname, step, channel env,
  # the channel directory's entries and devices, and how many tmpfs are
  # mounted on it in the task's mount namespace.
  cat > "$C/bin/imex-report" <<'REPORT'
#!/bin/bash
d=/dev/nvidia-caps-imex-channels
tmpfs=$(awk -v d="$d" '$5 == d { for (i = 7; i <= NF; i++) if ($i == "-") print $(i + 1) }' /proc/self/mountinfo | grep -c '^tmpfs$')
# The batch step has no SLURM_STEP_ID before 26.05, and a negative one since.
step=${SLURM_STEP_ID:-batch}; case $step in ''|*[!0-9]*) step=batch;; esac
echo "NODE=$(hostname) STEP=$step CH=${SLURM_IMEX_CHANNEL:-none} NV=${NVIDIA_IMEX_CHANNELS:-none} LS=[$(ls -A $d | tr '\n' ' ')] STAT=[$(stat -c '%F:%Hr:%Lr:%U:%a' $d/* 2>/dev/null | tr '\n' ' ')] TMPFS=$tmpfs DOM=${SLURM_IMEX_DOMAIN:-none} DOMN=${SLURM_IMEX_DOMAIN_NODES:-none}"
REPORT
  chmod 755 "$C/bin/imex-report"
  # The fake NVML under the real library's name, loaded by the production path.
  cp "$bin/libnvidia_ml.so" "$C/lib/libnvidia-ml.so.1"
  chmod 755 "$C" "$C/bin" "$C/lib" "$C/etc-slurm"
  chmod 1777 "$C/out"

  if [ "$E2E_INSTALL" = package ]; then
    # The one line README.Debian tells the admin to write: the plugin by
    # name, found in Slurm's PluginDir where the package put it.
    echo "required spank_imex.so config=$C/etc-slurm/imex.toml" > "$C/etc-slurm/plugstack.conf"
  elif [ "$E2E_INSTALL" = prefix ]; then
    # The line install.sh printed, as printed (Slurm's default PlugStackConfig).
    grep '^required .*spank_imex.so' "$C/install.out" > "$C/etc-slurm/plugstack.conf" ||
      { echo "cluster_install: install.sh printed no plugstack line" >&2; return 1; }
  elif [ "$E2E_INSTALL" = rpm ]; then
    # docs/install.md's line for the RPM: its plugin and its config, by the
    # paths it installed them at (Slurm's default PlugStackConfig).
    echo "required $(grep '/spank_imex\.so$' "$C/rpm-files") config=$(grep '/imex\.toml$' "$C/rpm-files")" > "$C/etc-slurm/plugstack.conf"
  else
    # The example names the plugin by name (found in PluginDir): the build
    # tree's is named by its path instead.
    sed -e "s#^required [^ ]*spank_imex.so#required $C/bin/spank_imex.so#" \
        -e "s#config=/etc/slurm/imex.toml#config=$C/etc-slurm/imex.toml#" \
        "$REPO/conf-examples/plugstack.conf" > "$C/etc-slurm/plugstack.conf"
  fi

  sed -e "s#^manager = .*#manager = \"process\"#" \
      -e "s#^binary = .*#binary = \"$C/bin/nvidia-imex\"#" \
      -e "s#^ctl = .*#ctl = \"$C/bin/nvidia-imex-ctl\"#" \
      -e "s#^proc_devices = .*#proc_devices = \"/run/fakehw/proc-devices\"#" \
      -e "s#^ready_timeout = .*#ready_timeout = \"${E2E_READY_TIMEOUT:-4s}\"#" \
      -e "s#^source = .*#source = \"map\"#" \
      -e "s#^map_file = .*#map_file = \"$C/etc-slurm/imex-addresses.toml\"#" \
      -e "s#^kmsg = .*#kmsg = \"/run/fakehw/kmsg\"#" \
      -e "s#^nvml_library = .*#nvml_library = \"$C/lib/libnvidia-ml.so.1\"#" \
      -e "s#^pci_devices = .*#pci_devices = \"/run/fakehw/pci\"#" \
      -e "s#^expected_gpus = .*#expected_gpus = $E2E_GPUS#" \
      -e "s#^set_drain_reason = .*#set_drain_reason = true#" \
      -e "s#^textfile_dir = .*#textfile_dir = \"/run/fakehw/textfile\"#" \
      "$(imex_toml_source)" > "$C/etc-slurm/imex.toml.new"
  # A slower machine's gate cap (the arm64 phase under qemu: E2E_GATE_TIMEOUT),
  # which scales every NVML check's budget (docs/gpu-health.md, "Time budgets").
  [ -z "${E2E_GATE_TIMEOUT:-}" ] ||
    sed -i "s#^gate_timeout = .*#gate_timeout = \"$E2E_GATE_TIMEOUT\"#" "$C/etc-slurm/imex.toml.new"
  mv "$C/etc-slurm/imex.toml.new" "$C/etc-slurm/imex.toml"
  if [ -n "${E2E_SYSTEMD_ROOTFS:-}" ]; then
    # The programs where NVIDIA's package puts them (bound there in each node).
    sed -i -e 's#^manager = .*#manager = "systemd"#' -e 's#^binary = .*#binary = "/usr/bin/nvidia-imex"#' \
        -e 's#^ctl = .*#ctl = "/usr/bin/nvidia-imex-ctl"#' "$C/etc-slurm/imex.toml"
  fi
  for key in "manager = \"$([ -n "${E2E_SYSTEMD_ROOTFS:-}" ] && echo systemd || echo process)\"" 'proc_devices = "/run/fakehw' 'source = "map"'; do
    grep -qF "$key" "$C/etc-slurm/imex.toml" || { echo "cluster_install: imex.toml override '$key' did not apply" >&2; return 1; }
  done
  # What reset_nodes puts back before each test.
  cp -p "$C/etc-slurm/imex.toml" "$C/imex.toml.pristine"

  : > "$C/etc-slurm/imex-addresses.toml"
  for i in $(seq 1 "$E2E_NODES"); do echo "n$i = \"$(node_ip "$i")\"" >> "$C/etc-slurm/imex-addresses.toml"; done

  local host; host=$(hostname -s)
  {
    cat <<CONF
ClusterName=imextest
SlurmctldHost=$host($NET.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$C/state
SlurmdSpoolDir=$C/spool/%n
SlurmctldPidFile=$C/run/slurmctld.pid
SlurmdPidFile=$([ -n "${E2E_SYSTEMD_ROOTFS:-}" ] && echo /run/slurmd.pid || echo "$C/run/slurmd-%n.pid")
SlurmctldLogFile=$C/log/slurmctld.log
SlurmdLogFile=$C/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$(if [ -n "${E2E_ACCOUNTING:-}" ]; then
  printf '%s\n' AccountingStorageType=accounting_storage/slurmdbd AccountingStorageHost=127.0.0.1
else echo AccountingStorageType=accounting_storage/none; fi)
JobCompType=jobcomp/none
MpiDefault=none
$(switch_lines)
$(topology_lines)
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Job ids wrap within the 2047 IMEX channels, as [imex] domain = "rack"
# with slurm-imex's channels requires (imex::rack_channels).
MaxJobId=2047
MailProg=/bin/true
# bf_interval=1: with accounting_storage/none, slurmctld 23.11 and 24.05
# (SchedMD's 23.11.11 and 24.05.8) log "Association database appears down"
# at start (at debug level: ctld_assoc_mgr_init passes errno to
# assoc_mgr_init as the connection's status), keep no association list, and
# their main scheduler then refuses every job ("sched: JobId=N has invalid
# account"); backfill, which does not ask, starts it after up to bf_interval
# (30 s by default). A site with slurmdbd never sees it.
SchedulerParameters=sched_interval=1,bf_interval=1
CONF
    # A prefix (or slurm.spec's) Slurm finds plugstack.conf beside slurm.conf by default.
    installs_in_sysconfdir || echo "PlugStackConfig=$C/etc-slurm/plugstack.conf"
    for i in $(seq 1 "$E2E_NODES"); do
      echo "NodeName=n$i NodeAddr=$(node_ip "$i") CPUs=2 RealMemory=1000 State=UNKNOWN"
    done
    # The shipped fragment, with this cluster's paths and nodes.
    local prolog_dir=$C/bin/
    [ "$E2E_INSTALL" = package ] && prolog_dir=/usr/sbin/
    # The RPM's prolog and epilog, where it put them.
    [ "$E2E_INSTALL" = rpm ] && prolog_dir=$(dirname "$(grep '/slurm-imex-prolog$' "$C/rpm-files")")/
    if [ "$E2E_INSTALL" = prefix ]; then
      # The lines install.sh printed (but the periodic health check, which
      # would drain and resume nodes under the tests), and the partition.
      grep -E '^(PrologFlags|Prolog|Epilog)=' "$C/install.out"
      sed -e "s#Nodes=[^ ]*#Nodes=n[1-$E2E_NODES]#" "$REPO/conf-examples/slurm.conf.fragment" | grep '^PartitionName='
    else
      sed -e "s#/usr/sbin/slurm-imex-#${prolog_dir}slurm-imex-#" -e "s#Nodes=[^ ]*#Nodes=n[1-$E2E_NODES]#" \
        "$REPO/conf-examples/slurm.conf.fragment" | grep -v '^#'
    fi
    # A partition that lets two jobs share a node (the busy-node test).
    echo "PartitionName=shared Nodes=n[1-$E2E_NODES] OverSubscribe=NO MaxTime=INFINITE State=UP"
  } > "$C/etc-slurm/slurm.conf"

  for i in $(seq 1 "$E2E_NODES"); do
    local d=$C/nodes/n$i
    mkdir -p "$d"/{etc-imex,run-imex,run-slurm-imex,var-lib,dev-channels,hw/textfile}
    sed -e "s#^LOG_FILE_NAME=.*#LOG_FILE_NAME=/run/nvidia-imex/nvidia-imex.log#" \
      "$REPO/conf-examples/nvidia-imex-config.cfg" > "$d/etc-imex/config.cfg"
    : > "$d/etc-imex/nodes_config.cfg"
    printf 'Character devices:\n  1 mem\n195 nvidia\n195 nvidiactl\n%d nvidia-caps-imex-channels\n\nBlock devices:\n  7 loop\n' \
      "$CHANNEL_MAJOR" > "$d/hw/proc-devices"
    : > "$d/hw/kmsg"
    # The fake driver's state: accounting mode, and the processes a job's
    # fake-gpu-job ran (any user may run one, as any may use /dev/nvidia*).
    install -d -m 755 "$d/hw/nvml-driver" && install -d -m 1777 "$d/hw/nvml-driver/procs"
    write_scenario "$i"
    local g
    for g in $(seq 0 $((E2E_GPUS - 1))); do
      mkdir -p "$d/hw/pci/0000:$(printf %02x $((0x1a + g))):00.0"
      echo 0x10de > "$d/hw/pci/0000:$(printf %02x $((0x1a + g))):00.0/vendor"
      echo 0x030200 > "$d/hw/pci/0000:$(printf %02x $((0x1a + g))):00.0/class"
    done
    # A channel node that must never be visible inside a job (the driver's channel0).
    mknod "$d/dev-channels/channel0" c "$CHANNEL_MAJOR" 0 2>/dev/null || touch "$d/dev-channels/channel0"
    chmod 666 "$d/dev-channels/channel0"
  done
  write_topology
  id "$TEST_USER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$TEST_USER"
}

# Slurm's own IMEX channel plugin (24.05+). imex_dev_major lets it run
# without the NVIDIA driver, as Slurm's own testsuite does.
switch_lines() {
  if [ "$E2E_SWITCH" = 1 ]; then
    printf 'SwitchType=switch/nvidia_imex\nSwitchParameters=imex_dev_major=%d\n' "$CHANNEL_MAJOR"
  else
    echo "SwitchType=switch/none"
  fi
}

# Two racks of two nodes as topology/block sees them: topology.conf needs
# TopologyPlugin in slurm.conf; topology.yaml (25.05+) names its plugin itself.
topology_lines() {
  [ "$E2E_TOPOLOGY" = conf ] && echo "TopologyPlugin=topology/block"
  return 0
}
# 23.11's topology/block knows BlockLevels (level 1: a pair of blocks), not
# BlockSizes, which 24.05 brought; an unknown key is fatal to slurmctld.
block_sizes_line() {
  local version; version=$(slurmctld -V | awk '{print $2}')
  case $version in
    23.11.*) echo 'BlockLevels=0-1';;
    *) echo 'BlockSizes=2,4';;
  esac
}
write_topology() {
  rm -f "$C/etc-slurm/topology.conf" "$C/etc-slurm/topology.yaml"
  case "$E2E_TOPOLOGY" in
    conf) printf 'BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n[3-4]\n%s\n' "$(block_sizes_line)" > "$C/etc-slurm/topology.conf";;
    yaml) printf -- '- topology: racks\n  cluster_default: true\n  block:\n    block_sizes:\n      - 2\n      - 4\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n      - block: b2\n        nodes: n[3-4]\n' > "$C/etc-slurm/topology.yaml";;
  esac
}

# A healthy fake-NVML scenario for node N: E2E_GPUS GB200s with serials
# unique to the node, under driver E2E_DRIVER (580.95.05). Extra TOML per
# GPU index may be given as "index:key = value" arguments (e.g.
# "1:remap_pending = true"); a "fabric = …" one replaces the healthy fabric.
write_scenario() {
  local n=$1; shift
  local f=$C/nodes/n$n/hw/nvml.toml g extra fabric
  {
    echo "driver_version = \"${E2E_DRIVER:-580.95.05}\""
    for g in $(seq 0 $((E2E_GPUS - 1))); do
      printf '[[gpu]]\nuuid = "GPU-%02d%02d0000-aaaa-bbbb-cccc-dddddddddddd"\nserial = "16509240%02d%03d"\n' "$n" "$g" "$n" "$g"
      printf 'pci_bus_id = "00000000:%02X:00.0"\nenergy_mj = 1000000\npower_mw = 600000\nremap_correctable = 0\n' $((0x1a + g))
      # Accounting mode off, as after every boot: the prolog turns it on.
      printf 'nvlinks = 18\naccounting = false\ntemperature = 40\n'
      fabric=$(printf 'fabric = { state = "completed", clique_id = %d, cluster_uuid = "%s" }' "$(clique_of "$n")" "$CLUSTER_UUID")
      for extra in "$@"; do
        case "$extra" in "$g:fabric ="*) fabric=${extra#*:};; esac
      done
      echo "$fabric"
      for extra in "$@"; do
        case "$extra" in "$g:fabric ="*) ;; "$g:"*) echo "${extra#*:}";; esac
      done
    done
  } > "$f.tmp" && mv "$f.tmp" "$f"
}

# The NVLink clique id node N's GPUs report: the file nodes/nN/clique when a
# test writes one, else its rack's when there are racks (of E2E_RACK_SIZE
# nodes; 2 in the topology phase), else 1.
CLUSTER_UUID=dc6e40c4-d722-4357-9ba6-5291dd461278
clique_of() {
  local size=${E2E_RACK_SIZE:-2}
  if [ -s "$C/nodes/n$1/clique" ]; then cat "$C/nodes/n$1/clique"
  elif [ -n "${E2E_TOPOLOGY:-}${E2E_RACK_SIZE:-}" ]; then echo $(( ($1 - 1) / size + 1 ))
  else echo 1; fi
}

# Append a kernel log record to node N's fake /dev/kmsg, as the kernel
# writes a device's records: the header, the message, then continuation
# lines that start with a space (tests/data/samples/kmsg-h100-records.txt).
# The record's sequence number counts records, never continuation lines.
kmsg_append() { # node line
  local f=$C/nodes/n$1/hw/kmsg pci
  local seq=$(( $(grep -c -v '^ ' "$f" || true) + 100 ))
  pci=$(printf '%s' "$2" | sed -n 's/.*(PCI:\([0-9a-fA-F:]*\)).*/\1/p')
  printf '3,%d,%d,-;%s\n SUBSYSTEM=pci\n DEVICE=+pci:%s.0\n' "$seq" $((seq * 1000)) "$2" "${pci:-0000:00:00}" >> "$f"
}

# What cluster_up watches, one line: each node's state as slurmctld sees
# it ("n1=idle n2=unknown* ..."), or that slurmctld does not answer.
cluster_snapshot() {
  local out
  if out=$(timeout 15 sinfo -h -N -o '%N=%T' 2>&1); then sort -u <<<"$out" | paste -sd ' '
  else echo "slurmctld does not answer (sinfo: ${out##*$'\n'})"; fi
}
# Every node idle in a snapshot.
snapshot_all_idle() { [ "$(tr ' ' '\n' <<<"$1" | grep -c '=idle$')" = "$E2E_NODES" ]; }
slurmctld_lives() { local pid; pid=$(cat "$C/run/slurmctld.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }

# Wait until every node is idle while the cluster makes progress: gives up
# when the node states have not changed for E2E_UP_STALL seconds (120), after
# E2E_UP_TIMEOUT seconds in all (300), or at once when slurmctld has exited,
# and then says what it saw last and when that was.
wait_cluster_idle() {
  local limit=${E2E_UP_TIMEOUT:-300} stall=${E2E_UP_STALL:-120}
  local start=$SECONDS changed=$SECONDS seen="" now why="" gone=0
  while :; do
    now=$(cluster_snapshot)
    if [ "$now" != "$seen" ]; then
      seen=$now; changed=$SECONDS
      echo "cluster_up: +$((SECONDS - start)) s: $seen" >&2
    fi
    snapshot_all_idle "$now" && return 0
    # (its pid file appears once it has daemonized; then it must live)
    if [ -f "$C/run/slurmctld.pid" ] && ! slurmctld_lives; then gone=$((gone + 1)); else gone=0; fi
    if [ $gone -ge 2 ]; then why="slurmctld exited"
    elif (( SECONDS - start >= limit )); then why="the limit of $limit s (E2E_UP_TIMEOUT)"
    elif (( SECONDS - changed >= stall )); then why="no change for $stall s (E2E_UP_STALL)"
    fi
    [ -n "$why" ] && break
    sleep 1
  done
  echo "cluster_up: gave up waiting for the $E2E_NODES nodes to be idle after $((SECONDS - start)) s: $why; last seen, $((SECONDS - changed)) s before: $seen (see $C/log)" >&2
  local log
  for log in "$C/log/slurmctld.log" "$C"/log/slurmd-n*.log; do
    [ -f "$log" ] && { echo "  -- last lines of $log:"; tail -n 3 "$log" | cut -c1-300 | sed 's/^/     /'; } >&2
  done
  return 1
}

cluster_up() {
  local i
  # Everything from here on is the phase's (reap.sh).
  e2e_cgroup_join || return 1
  # Leftovers of an interrupted run would make every step below fail: an
  # old network, or a stranger on the controller's or the IMEX ports.
  e2e_net_down "cluster_up (before it starts)" || true
  e2e_ports_free "cluster_up (before it starts)" || true
  for i in $(seq 1 "$E2E_NODES"); do ip link del "vh$i" 2>/dev/null || true; done
  ip link add "$BR" type bridge
  ip addr add "$NET.1/24" dev "$BR"
  ip link set "$BR" up
  for i in $(seq 1 "$E2E_NODES"); do
    ip netns add "imex-n$i"
    ip link add "vh$i" type veth peer name "vn$i"
    ip link set "vn$i" netns "imex-n$i"
    ip link set "vh$i" master "$BR"
    ip link set "vh$i" up
    ip -n "imex-n$i" addr add "$(node_ip "$i")/24" dev "vn$i"
    ip -n "imex-n$i" link set "vn$i" up
    ip -n "imex-n$i" link set lo up
    # As on a production node (conf-examples/sysctl.d): the per-job IMEX
    # ports must never be handed out as ephemeral ports.
    nsenter --net="/run/netns/imex-n$i" sysctl -qw net.ipv4.ip_local_reserved_ports=33792-50175
  done
  # Host mount points for the per-node bind mounts.
  mkdir -p /etc/nvidia-imex /run/nvidia-imex /run/slurm-imex /var/lib/slurm-imex \
           /dev/nvidia-caps-imex-channels /run/fakehw /etc/slurm

  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! { [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
    runuser -u munge -- /usr/sbin/munged --force
    cp /run/munge/munged.pid "$C/run/munged.started-by-us"
  fi
  # Every node's name and the controller's address resolve on every node
  # and in the controller, as a site's DNS or hosts file makes them, so the
  # cluster never asks this machine's resolver. A Slurm client (scontrol in a
  # prolog) must not wait 5 s for a resolver a node namespace cannot reach,
  # and slurmctld and slurmd 24.11 to 25.11 look up the name of each
  # connection's peer and local address (conmgr, getnameinfo): where the
  # resolver drops one query in some 50 to 100, as this machine's does, a
  # client RPC waits the resolver's 5 s timeout. That was 3 to 5 s of every
  # test on those releases; with the controller's address here, none.
  { cat /etc/hosts 2>/dev/null
    echo "$NET.1 $(hostname -s)"
    for i in $(seq 1 "$E2E_NODES"); do echo "$(node_ip "$i") n$i"; done; } > "$C/etc-hosts"
  chmod 644 "$C/etc-hosts"
  # (accounting.sh: MariaDB and slurmdbd, before the controller registers)
  if [ -n "${E2E_ACCOUNTING:-}" ]; then accounting_up || return 1; fi
  unshare --mount --propagation private -- /bin/sh -c "
    mount --bind '$C/etc-hosts' /etc/hosts
    exec slurmctld -f '$SLURM_CONF' -c"
  for i in $(seq 1 "$E2E_NODES"); do
    local d=$C/nodes/n$i
    mkdir -p "$C/spool/n$i"
    if [ -n "${E2E_SYSTEMD_ROOTFS:-}" ]; then boot_node "$i" || return 1; continue; fi
    nsenter --net="/run/netns/imex-n$i" -- unshare --mount --uts --propagation private -- /bin/sh -c "
      set -e
      $(installs_in_sysconfdir || echo "mount --bind '$C/etc-slurm' /etc/slurm")
      mount --bind '$d/etc-imex' /etc/nvidia-imex
      mount --bind '$d/run-imex' /run/nvidia-imex
      mount --bind '$d/run-slurm-imex' /run/slurm-imex
      mount --bind '$d/var-lib' /var/lib/slurm-imex
      mount --bind '$d/dev-channels' /dev/nvidia-caps-imex-channels
      mount --bind '$d/hw' /run/fakehw
      mount --bind '$C/etc-hosts' /etc/hosts
      $(container_binds "$d")
      hostname n$i
      exec slurmd -f '$SLURM_CONF'"
  done
  wait_cluster_idle
}

# NVIDIA's unit as its package installs it (Type=forking; the daemon forks
# with DAEMONIZE=1), and the shipped drop-in that starts it on the per-job
# config. Written once per cluster, bound into every booted node.
write_systemd_units() {
  mkdir -p "$C/systemd/nvidia-imex.service.d"
  cat > "$C/systemd/nvidia-imex.service" <<'UNIT'
[Unit]
Description=NVIDIA IMEX service (the shape docs/imex.md records; the fake daemon)

[Service]
Type=forking
TimeoutStartSec=infinity
ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg
Restart=on-failure
RestartSec=1s

[Install]
WantedBy=multi-user.target
UNIT
  cp "$REPO/conf-examples/nvidia-imex.service.d/slurm-imex.conf" "$C/systemd/nvidia-imex.service.d/"
  # The node's own users plus the test user, with the host's uid: a task's
  # channel is owned by that uid, and `stat` in the node names it.
  { cat "$E2E_SYSTEMD_ROOTFS/etc/passwd"; getent passwd "$TEST_USER"; } > "$C/systemd/passwd"
  { cat "$E2E_SYSTEMD_ROOTFS/etc/group"; getent group "$TEST_USER"; } > "$C/systemd/group"
  chmod -R go-w "$C/systemd"
}

# Boot node N: systemd-nspawn of E2E_SYSTEMD_ROOTFS (a throwaway overlay on
# it) in the node's network namespace, with the node's files bound where
# a real node has them. Its slurmd.service starts slurmd; munge comes from
# the host's munged (its socket directory), so the node's own munge.service
# is masked, as is slurmctld.service (the controller runs on the host).
# The child of nspawn PID that runs systemd, in $init (the caller's local).
systemd_child_of() {
  local c
  init=$(for c in $(pgrep -P "$1"); do [ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ] && echo "$c"; done | sed -n 1p)
  [ -n "$init" ]
}

# Records the container's init (host pid) for in_node.
boot_node() { # n
  local n=$1 d=$C/nodes/n$1 pid init i
  [ -f "$C/systemd/nvidia-imex.service" ] || write_systemd_units
  echo "n$n" > "$d/hostname"
  # Its own cgroup in the host's name=systemd and unified hierarchies (and
  # every v1 controller but memory, which this machine's sandbox manages).
  # Started from the root ones (no systemd on this host gives it a scope),
  # every container's systemd would make the same /system.slice/... cgroups:
  # each sees the others' daemons there as pid 0 ("Failed to dump process
  # list: Input/output error"), loses a Type=forking daemon's main PID, and
  # `systemctl stop` leaves the daemon running.
  local h cgs=()
  for h in /sys/fs/cgroup/*/; do
    case $h in */memory/) continue;; esac
    mkdir -p "${h}slurm-imex-e2e/n$n" 2>/dev/null && cgs+=("${h}slurm-imex-e2e/n$n")
  done
  setsid sh -c 'p=$1; shift; for g in $p; do echo $$ > "$g/cgroup.procs"; done; exec "$@"' boot "${cgs[*]}" systemd-nspawn --boot --register=no --keep-unit --quiet -D "$E2E_SYSTEMD_ROOTFS" --volatile=overlay \
    --network-namespace-path="/run/netns/imex-n$n" --hostname="n$n" \
    --bind="$C" --bind="$C/etc-slurm:/etc/slurm" --bind-ro="$d/hostname:/etc/hostname" \
    --bind-ro="$C/etc-hosts:/etc/hosts" --bind=/run/munge \
    --bind-ro="$C/systemd/passwd:/etc/passwd" --bind-ro="$C/systemd/group:/etc/group" \
    --bind="$d/etc-imex:/etc/nvidia-imex" --bind="$d/run-imex:/run/nvidia-imex" \
    --bind="$d/run-slurm-imex:/run/slurm-imex" --bind="$d/var-lib:/var/lib/slurm-imex" \
    --bind="$d/dev-channels:/dev/nvidia-caps-imex-channels" --bind="$d/hw:/run/fakehw" \
    --bind-ro="$C/bin/nvidia-imex:/usr/bin/nvidia-imex" --bind-ro="$C/bin/nvidia-imex-ctl:/usr/bin/nvidia-imex-ctl" \
    --bind-ro="$C/systemd/nvidia-imex.service:/etc/systemd/system/nvidia-imex.service" \
    --bind-ro="$C/systemd/nvidia-imex.service.d:/etc/systemd/system/nvidia-imex.service.d" \
    --bind-ro=/dev/null:/etc/systemd/system/munge.service \
    --bind-ro=/dev/null:/etc/systemd/system/slurmctld.service \
    > "$C/log/nspawn-n$n.log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$C/run/nspawn-n$n.pid"
  # nspawn forks twice; the container's init is the child that runs systemd.
  wait_until 60 "n$n's systemd to start (boot_node; see $C/log/nspawn-n$n.log)" systemd_child_of "$pid" || return 1
  echo "$init" > "$C/run/node-n$n.pid"
}

# Power the booted nodes off (SIGRTMIN+4 to their systemd) and wait.
halt_nodes() {
  local f pid i
  for f in "$C"/run/node-n*.pid; do [ -f "$f" ] && kill -s RTMIN+4 "$(cat "$f")" 2>/dev/null; done
  for f in "$C"/run/nspawn-n*.pid; do
    pid=$(cat "$f" 2>/dev/null) || continue
    poll_until 15 not kill -0 "$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
  rm -f "$C"/run/node-n*.pid
  local h
  for h in /sys/fs/cgroup/*/slurm-imex-e2e; do
    [ -d "$h" ] && find "$h" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

# E2E_CONTAINERS=1: each node its own enroot and pyxis runtime directories
# (the nodes share the rootfs's /run); the mount command lines for cluster_up.
container_binds() { # node-dir
  [ "${E2E_CONTAINERS:-0}" = 1 ] || return 0
  mkdir -p "$1/run-enroot" "$1/run-pyxis" /run/enroot /run/pyxis
  chmod 1777 "$1/run-enroot"
  echo "mount --bind '$1/run-enroot' /run/enroot; mount --bind '$1/run-pyxis' /run/pyxis"
}

# Stop what cluster_up started: the daemons by PID (slurmctld saves its
# state, a booted node powers off), then whatever is left in the phase's
# cgroup (reap.sh: a daemon that re-executed itself, a slurmstepd, a test's
# background process), each named; then the network, and no listener may be
# left on the cluster's ports. Returns 1 when an IMEX daemon outlived the
# jobs, or something could not be killed.
cluster_down() {
  local f pid leftovers=0
  # (only a live controller is asked: with none, squeue spends a minute
  # retrying the address a previous run's slurm.conf names)
  if slurmctld_lives; then
    timeout 30 squeue -h -o %i 2>/dev/null | xargs -r timeout 30 scancel 2>/dev/null || true
  fi
  halt_nodes
  for f in "$C"/run/slurmd-*.pid "$C/run/slurmctld.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  for f in "$C"/run/slurmd-*.pid "$C/run/slurmctld.pid"; do
    # (slurmd removes its pid file as it exits)
    pid=$(cat "$f" 2>/dev/null) || continue
    poll_until 10 not kill -0 "$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
  done
  if [ -n "${E2E_ACCOUNTING:-}" ]; then accounting_down; fi
  for f in "$C"/nodes/*/run-slurm-imex/nvidia-imex.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      echo "cluster_down: nvidia-imex pid $pid was still running ($f); killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
      leftovers=1
    fi
  done
  if pid=$(cat "$C/run/munged.started-by-us" 2>/dev/null); then
    kill "$pid" 2>/dev/null && poll_until 5 not kill -0 "$pid" 2>/dev/null
    rm -f "$C/run/munged.started-by-us"
  fi
  e2e_reap cluster_down
  [ $? = 2 ] && leftovers=1
  e2e_net_down cluster_down || true
  e2e_admin_net_down
  e2e_ports_free cluster_down || true
  return $leftovers
}
