# shellcheck shell=bash
# What one e2e phase started, and making sure none of it outlives the phase
# (docs/test-cluster.md, "Nothing outlives its phase").
# The record is a cgroup: run.sh moves itself into $E2E_CGROUP/phase before
# the cluster starts, so every process of the phase (slurmctld, slurmd,
# slurmstepd, munged, the fake nvidia-imex daemons, node_exporter, a test's
# background job, a booted node's systemd in its own $E2E_CGROUP/nN) is in
# that subtree, wherever it runs (host, root filesystem, prefix) and
# whatever it became (a daemon that forked or re-executed itself). Reaping
# kills every process in the subtree but the caller, naming each, then
# checks that no listener is left on the cluster's ports.
# Used by cluster.sh (cluster_down) and by versions.sh after every phase,
# which also checks that the phase left this machine's port reservation as
# it was (e2e_host_unchanged).

# The ports a phase listens on in the host's network namespace:
# slurmctld, slurmd, node_exporter (fleet.sh), nvidia-imex's default
# SERVER_PORT and IMEX_CMD_PORT (conf-examples/nvidia-imex-config.cfg).
E2E_HOST_PORTS=${E2E_HOST_PORTS:-6817 6818 19117 50000 50005}

# The phase's cgroup: the unified hierarchy's when it is the only one
# (cgroup v2), else the v1 pids hierarchy's (no Slurm plugin or systemd here
# moves a process out of it). Empty when neither exists.
e2e_cgroup_root() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo /sys/fs/cgroup/slurm-imex-e2e
  elif [ -d /sys/fs/cgroup/pids ]; then echo /sys/fs/cgroup/pids/slurm-imex-e2e
  fi
}
E2E_CGROUP=${E2E_CGROUP:-$(e2e_cgroup_root)}

# Move the calling shell (and so all it starts from now on) into the phase's cgroup.
e2e_cgroup_join() {
  [ -n "$E2E_CGROUP" ] || { echo "e2e: no cgroup hierarchy under /sys/fs/cgroup to record the phase's processes in" >&2; return 1; }
  mkdir -p "$E2E_CGROUP/phase" && echo "$BASHPID" > "$E2E_CGROUP/phase/cgroup.procs" ||
    { echo "e2e: cannot join $E2E_CGROUP/phase (root, and a writable cgroup hierarchy, are needed)" >&2; return 1; }
}

# The pids in the phase's cgroups, but the calling shell's; into the array
# named by $1. Builtins only: a forked reader would list itself.
e2e_cgroup_pids() { # array-name
  local -n out=$1
  local f p
  out=()
  [ -n "$E2E_CGROUP" ] && [ -d "$E2E_CGROUP" ] || return 0
  local -a files
  shopt -s globstar nullglob
  files=("$E2E_CGROUP"/**/cgroup.procs)
  shopt -u globstar nullglob
  for f in "${files[@]}"; do
    while read -r p; do
      [ "$p" = $$ ] || [ "$p" = "$BASHPID" ] || e2e_is_zombie "$p" || out+=("$p")
    done 2>/dev/null < "$f"
  done
}

# A process that has exited and waits for its parent (it holds nothing).
e2e_is_zombie() {
  local key value
  while read -r key value; do
    [ "$key" = State: ] && { [[ $value == Z* ]]; return; }
  done 2>/dev/null < "/proc/$1/status"
  return 1
}

# "pid N (command line)" of a process, or "pid N (gone)".
e2e_describe_pid() {
  local -a argv=()
  mapfile -d '' argv 2>/dev/null < "/proc/$1/cmdline" || { echo "pid $1 (gone)"; return; }
  [ ${#argv[@]} -gt 0 ] || { local comm; read -r comm 2>/dev/null < "/proc/$1/comm"; argv=("[$comm]"); }
  local line="${argv[*]}"
  line=${line%"${line##*[! ]}"}   # (slurmscriptd pads its title with spaces)
  echo "pid $1 (${line:0:160})"
}

# Kill every process left in the phase's cgroups, SIGTERM and then SIGKILL,
# naming each on stderr as "WHO: left running: pid N (cmd)". Returns 1 when
# something was left (0: nothing was), 2 when something could not be killed.
e2e_reap() { # who
  local who=$1 p sig
  local -a pids
  e2e_cgroup_pids pids
  [ ${#pids[@]} -gt 0 ] || { e2e_cgroup_prune; return 0; }
  for p in "${pids[@]}"; do echo "$who: left running: $(e2e_describe_pid "$p"); killing it" >&2; done
  for sig in TERM KILL; do
    for p in "${pids[@]}"; do kill -s "$sig" "$p" 2>/dev/null; done
    poll_until 5 e2e_cgroup_empty && { e2e_cgroup_prune; return 1; }
    e2e_cgroup_pids pids
  done
  for p in "${pids[@]}"; do echo "$who: could not kill $(e2e_describe_pid "$p") (state $(awk '/^State/ {print $2}' "/proc/$p/status" 2>/dev/null))" >&2; done
  return 2
}
e2e_cgroup_empty() { local -a left; e2e_cgroup_pids left; [ ${#left[@]} = 0 ]; }
# Remove the phase's emptied cgroups (a booted node's systemd makes its own below nN).
e2e_cgroup_prune() {
  [ -n "$E2E_CGROUP" ] && [ -d "$E2E_CGROUP" ] || return 0
  find "$E2E_CGROUP" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null
  return 0
}

# The listeners on PORTS in the current network namespace, one "port pid"
# line each (pid empty when ss cannot tell).
e2e_listeners() { # port...
  local want=" $* " line port pid
  ss -ltnpH 2>/dev/null | while read -r line; do
    port=$(awk '{print $4}' <<<"$line"); port=${port##*:}
    [[ "$want" == *" $port "* ]] || [ "$want" = "  " ] || continue
    pid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' <<<"$line" | sed -n 1p)
    echo "$port $pid"
  done
}

# No listener on the cluster's ports: one that is (a daemon of no phase's
# cgroup, such as a run of an older harness) is named and killed. With
# "in NETNS-PATH", any listener in that namespace counts. Returns 1 when
# something listened.
e2e_ports_free() { # who [netns-path]
  local who=$1 ns=${2:-} port pid found=0 where="the host's network namespace"
  local -a enter=() ports
  read -ra ports <<<"$E2E_HOST_PORTS"
  if [ -n "$ns" ]; then enter=(nsenter --net="$ns" --); ports=(); where=${ns##*/}; fi
  while read -r port pid; do
    [ -n "$port" ] || continue
    found=1
    echo "$who: port $port in $where is still in use by ${pid:+$(e2e_describe_pid "$pid")}; killing it" >&2
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  done < <("${enter[@]}" bash -c "$(declare -f e2e_listeners); e2e_listeners ${ports[*]}")
  [ $found = 0 ] && return 0
  poll_until 5 e2e_no_listeners "${enter[@]}" "${ports[@]}" ||
    echo "$who: port(s) in $where still in use after kill -9: $("${enter[@]}" ss -ltnpH | tr '\n' ' ')" >&2
  return 1
}
e2e_no_listeners() { # [nsenter ... --] port...
  local -a enter=()
  if [ "${1:-}" = nsenter ]; then enter=("$1" "$2" "$3"); shift 3; fi
  [ -z "$("${enter[@]}" bash -c "$(declare -f e2e_listeners); e2e_listeners $*")" ]
}

# The cluster's network: every node's namespace (once nothing listens in
# it) and the bridge; with a namespace, its veth pair goes too. Returns 1
# when something still listened in a node's namespace. (A phase run in
# its own mount namespace, in-prefix.sh's, leaves only the empty file the
# namespace was bound on here: nothing to enter.)
e2e_net_down() { # who
  local who=$1 ns rc=0
  for ns in /run/netns/imex-n*; do
    [ -e "$ns" ] || continue
    if [ "$(stat -f -c %T "$ns" 2>/dev/null)" = nsfs ]; then e2e_ports_free "$who" "$ns" || rc=1; fi
    ip netns del "${ns##*/}" 2>/dev/null || rm -f "$ns"
  done
  ip link del imexbr0 2>/dev/null
  return $rc
}

# The network namespace install.sh runs in (E2E_INSTALL=prefix: cluster.sh's
# admin_install_sh), and its link to the bridge. Nothing listens in it.
E2E_ADMIN_NETNS=imex-admin
e2e_admin_net_down() {
  ip netns del "$E2E_ADMIN_NETNS" 2>/dev/null || rm -f "/run/netns/$E2E_ADMIN_NETNS"
  ip link del vha0 2>/dev/null
  return 0
}

# All of the above, after a phase: 0 when the phase left nothing behind,
# else 1, with one line on stderr for each thing it left.
e2e_teardown() { # who
  local rc=0
  e2e_reap "$1" || rc=1
  e2e_net_down "$1" || rc=1
  e2e_admin_net_down
  e2e_ports_free "$1" || rc=1
  return $rc
}

# What installing slurm-imex changes on a machine beyond its files
# (packaging/maintainer-lib.sh), as this machine has it: the live reserved
# ports of the host's network namespace and /etc/sysctl.d/90-slurm-imex.conf
# (its checksum, or "absent"). One line, "PORTS|FILE"; a phase must leave both
# as it found them: an install (install.sh, a package's scripts) belongs in a
# node's namespaces or a root filesystem, never on the machine running the tests.
E2E_HOST_SYSCTL_FILE=/etc/sysctl.d/90-slurm-imex.conf
e2e_host_state() {
  local ports file=absent
  ports=$(cat /proc/sys/net/ipv4/ip_local_reserved_ports 2>/dev/null)
  [ ! -e "$E2E_HOST_SYSCTL_FILE" ] || file=$(cksum < "$E2E_HOST_SYSCTL_FILE" | cut -d' ' -f1)
  printf '%s|%s\n' "$ports" "$file"
}

# Compare this machine with BEFORE (e2e_host_state's line): each change is
# one line on stderr, "WHO: changed this machine's ...", and is undone where
# it can be (the live value put back, a file the phase made removed).
# Returns 1 when anything changed.
e2e_host_unchanged() { # who before
  local who=$1 ports=${2%%|*} file=${2#*|} now rc=0
  now=$(e2e_host_state)
  if [ "${now%%|*}" != "$ports" ]; then
    echo "$who: changed this machine's net.ipv4.ip_local_reserved_ports from '$ports' to '${now%%|*}'; putting it back" >&2
    printf '%s\n' "$ports" > /proc/sys/net/ipv4/ip_local_reserved_ports ||
      echo "$who: could not put net.ipv4.ip_local_reserved_ports back to '$ports'" >&2
    rc=1
  fi
  if [ "${now#*|}" != "$file" ]; then
    if [ "$file" = absent ]; then
      echo "$who: left $E2E_HOST_SYSCTL_FILE on this machine ($(grep -v '^#' "$E2E_HOST_SYSCTL_FILE" | paste -sd ' ')); removing it" >&2
      rm -f "$E2E_HOST_SYSCTL_FILE"
    else
      echo "$who: changed or removed this machine's $E2E_HOST_SYSCTL_FILE (it was there before the phase; left as it is now)" >&2
    fi
    rc=1
  fi
  return $rc
}
