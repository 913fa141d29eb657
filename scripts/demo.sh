#!/bin/bash
# The slurm-imex demo: a local 3-node Slurm 22.05 cluster (each node in its
# own network, mount and UTS namespace) with fake IMEX daemons, one
# `sbatch -N3 --imex` job, and what the job and the nodes saw. Root, Debian 12.
# Runs again over whatever an earlier run left (a cluster, namespaces, a
# munged of ours); what it cannot work around it says in one line, exit 1.
# tests/demo-check.sh runs it and checks what it shows.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
die() { echo "demo: $*" >&2; exit 1; }

# What the demo needs of this machine, each said in one line when missing.
preflight() {
  [ "$(id -u)" = 0 ] ||
    die "run it as root (it makes network namespaces, bind mounts and a test user): sudo bash scripts/demo.sh"
  if [ ! -r /etc/debian_version ] || ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
    local this; this=$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"') || this=""
    die "it needs a Debian-family system (apt-get, dpkg; made on Debian 12), and this is ${this:-not one}"
  fi
  command -v cargo >/dev/null ||
    die "cargo is not on PATH: install Rust (rustup), or, under sudo (whose secure_path drops ~/.cargo/bin), run: sudo env PATH=\"\$PATH\" bash scripts/demo.sh"
}

# No stranger on the ports the cluster's daemons take in this machine's
# network namespace: a listener that is not an earlier run's (in the e2e
# cgroup, tests/e2e/reap.sh) is named, never killed, and the demo stops.
ports_are_free() {
  local port pid who
  # shellcheck disable=SC2086 # E2E_HOST_PORTS is a list of port numbers
  while read -r port pid; do
    [ -n "$port" ] || continue
    if [ -n "$pid" ] && grep -F "/${E2E_CGROUP##*/}/" "/proc/$pid/cgroup" >/dev/null 2>&1; then
      continue # an earlier run's daemon: cluster_down stops it
    fi
    who="a process ss cannot name"
    [ -z "$pid" ] || who=$(e2e_describe_pid "$pid")
    die "port $port is taken by $who: stop it (a site's slurmctld, slurmd or nvidia-imex?) and run the demo again"
  done < <(e2e_listeners $E2E_HOST_PORTS)
}

# One line before each step that takes more than a few seconds.
step() { echo "demo: $*" >&2; }

preflight
# Before anything is installed or stopped (install-deps.sh disables the
# packages' own slurmctld, slurmd and munge): a stranger on our ports.
source tests/e2e/wait.sh
source tests/e2e/reap.sh
ports_are_free
# Only what the demo uses: Slurm 22.05, munge and the build's needs (the
# tests install the rest: scripts/install-deps.sh test).
bash scripts/install-deps.sh demo
# Only what the demo runs: the prolog, epilog, watcher and CLI, the plugin,
# and the fake IMEX daemons and NVML, in a debug build (it builds in less
# than half the time of a release build; the packages are release builds).
step "building slurm-imex (debug: the hooks, the CLI, the plugin and the fakes; about 2 min on 2 cores the first time)..."
cargo build --quiet -p slurm-imex-hooks -p slurm-imex-cli -p spank_imex -p fake-imex -p fake-nvml
E2E_NODES=3
source tests/e2e/cluster.sh
# What an earlier run left: its cluster, namespaces, munged and processes.
cluster_down >/dev/null 2>&1 || true
trap 'cluster_down >/dev/null 2>&1 || true' EXIT
step "starting a 3-node Slurm 22.05 (slurmctld, and a slurmd per node in its own namespaces)..."
cluster_install "$REPO/target/debug"
cluster_up
job_state_of() { scontrol show job -o "$1" | grep -o 'JobState=[A-Z]*' | cut -d= -f2; }
job_is_in() { # id state...
  local s want; s=$(job_state_of "$1"); shift
  for want in "$@"; do [ "$s" = "$want" ] && return 0; done
  return 1
}
sinfo

cat > "$C/out/demo-job.sh" <<'JOB'
#!/bin/bash
#SBATCH -N3 --imex
echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST as $(id -un)"
srun -N3 --ntasks-per-node=1 bash -c 'echo "  $(hostname): SLURM_IMEX_CHANNEL=$SLURM_IMEX_CHANNEL NVIDIA_IMEX_CHANNELS=$NVIDIA_IMEX_CHANNELS; $(ls -l /dev/nvidia-caps-imex-channels | tail -n +2 | paste -s -d\; -)"'
echo "nodes_config.cfg on $(hostname):"; sed 's/^/  /' /etc/nvidia-imex/nodes_config.cfg
echo "IMEX domain as nvidia-imex-ctl -N shows it:"
DEMO_BIN/nvidia-imex-ctl -c /run/slurm-imex/nvidia-imex.cfg -N | sed -n '/^Nodes:/,$p' | sed 's/^/  /'
JOB
sed -i "s#DEMO_BIN#$C/bin#" "$C/out/demo-job.sh"
chmod 755 "$C/out/demo-job.sh"
echo "\$ sbatch $C/out/demo-job.sh   (as $TEST_USER)"
id=$(as_user sbatch --parsable -o "$C/out/demo-%j.out" "$C/out/demo-job.sh")
step "job $id: its prologs form the IMEX domain on its 3 nodes, then its step runs..."
job_has_ended() { ! job_is_in "$1" PENDING CONFIGURING RUNNING COMPLETING SUSPENDED ""; }
wait_until 60 "job $id to end" job_has_ended "$id"
state=$(job_state_of "$id")
echo "job $id: $state"
cat "$C/out/demo-$id.out"
[ "$state" = COMPLETED ] || die "job $id ended $state, not COMPLETED: its output is above; the nodes' logs are in $C/log"
echo "after the job, the epilog restored idle: nodes_config.cfg on n1 has $(wc -l < "$C/nodes/n1/etc-imex/nodes_config.cfg") lines"
echo "and a job without --imex sees an empty channel directory:"
as_user srun -N1 --immediate=60 ls -la /dev/nvidia-caps-imex-channels

# GPU health: an application XID during a job, then the history an admin reviews.
echo
echo "\$ sbatch -N1 -w n1 (a job during which GPU 1 logs XID 13)"
hid=$(as_user sbatch --parsable -N1 -w n1 -o "$C/out/demo-%j.out" --wrap "touch $C/out/demo-started-\$SLURM_JOB_ID; sleep 1")
wait_until 30 "job $hid to start its script" test -e "$C/out/demo-started-$hid"
kmsg_append 1 "NVRM: Xid (PCI:0000:1b:00): 13, pid=4242, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address"
cli_demo() { nsenter -t "$(slurmd_pid 1)" -n -m -u -- "$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" "$@"; }
# Its epilog writes the job's row last.
job_is_recorded() { cli_demo --json history --job "$1" 2>/dev/null | grep "\"job_id\": $1" >/dev/null; }
wait_until 60 "job $hid's row in n1's job database" job_is_recorded "$hid"
echo; echo "\$ slurm-imex history            (on n1)"; cli_demo history
echo; echo "\$ slurm-imex show $hid           (on n1)"; cli_demo show "$hid"
echo; echo "\$ slurm-imex gpus               (on n1)"; cli_demo gpus
echo; echo "\$ slurm-imex check              (on n1)"; cli_demo check || true
