#!/bin/bash
# What one big --imex job's prologs cost slurmctld (issue #18), on a private
# slurmctld with 4,608 nodes: 256 NVL72 racks of 18 trays, each node's NVLink
# clique published in its Extra, no slurmd. The 1,152 prologs of one job over
# 64 racks run $PAR at a time (as slurmd starts them, all in the same second
# on a real cluster), once with the prolog of OLD_REV (which read every
# node of the job from slurmctld) and once with this build's (which reads
# the rack map beside imex.toml). Reports, for each:
#   - wall time of the 1,152 prologs;
#   - slurmctld CPU seconds (utime + stime of its process, from /proc);
#   - the RPCs slurmctld counted (sdiag, reset before);
#   - the latency of an unrelated client (`sinfo`, every 100 ms) meanwhile,
#     beside its latency on the idle controller.
# The domain itself never forms here (the daemon is /bin/false): only the
# prolog's own controller traffic is measured.
# Usage: benches/ctld-bench.sh   (root; builds OLD_REV's prolog once, cached)
#   OLD_PROLOG=/path/slurm-imex-prolog  use that build instead of OLD_REV's
#   OLD_REV=<commit>  (default 622d052, the last prolog that asked slurmctld)
#   RACKS=256 JOB_RACKS=64 PAR=64   the cluster, the job, the parallelism
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
source "$REPO/tests/e2e/wait.sh"
BIN=${BIN:-$REPO/target/release}
RACKS=${RACKS:-256}
JOB_RACKS=${JOB_RACKS:-64}
PAR=${PAR:-64}
OLD_REV=${OLD_REV:-622d052147e3536960552aca8aecbbb2c4e2f147}
D=${CTLD_BENCH_DIR:-/var/tmp/slurm-imex-ctld-bench}
UUID=dc6e40c4-d722-4357-9ba6-5291dd461278
[ "$(id -u)" = 0 ] || { echo "ctld-bench: must run as root" >&2; exit 1; }
command -v slurmctld >/dev/null || { echo "ctld-bench: no slurmctld (bash scripts/install-deps.sh)" >&2; exit 1; }

# The prolog of OLD_REV, built once in a git worktree and cached by commit.
old_prolog() {
  [ -n "${OLD_PROLOG:-}" ] && { echo "$OLD_PROLOG"; return; }
  local cache=/var/cache/slurm-imex/old-prolog/$OLD_REV
  if [ ! -x "$cache/slurm-imex-prolog" ]; then
    echo "ctld-bench: building the prolog of $(git -C "$REPO" log -1 --format='%h (%s)' "$OLD_REV" | cut -c1-70)" >&2
    rm -rf "$cache.worktree"; git -C "$REPO" worktree prune
    git -C "$REPO" worktree add --detach -f "$cache.worktree" "$OLD_REV" >/dev/null 2>&1 || return 1
    (cd "$cache.worktree" && cargo build --release --quiet -p slurm-imex-hooks --bin slurm-imex-prolog) >&2 || return 1
    mkdir -p "$cache"; cp "$cache.worktree/target/release/slurm-imex-prolog" "$cache/"
    git -C "$REPO" worktree remove --force "$cache.worktree"
  fi
  echo "$cache/slurm-imex-prolog"
}

rack() { printf 'gb-r%03d' "$1"; }

setup_controller() {
  rm -rf "$D"; mkdir -p "$D"/{state,run,log,old,new}; chmod 755 "$D" "$D"/old "$D"/new
  local host r; host=$(hostname -s)
  {
    cat <<CONF
ClusterName=ctldbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=6917
SlurmdPort=6918
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$D/state
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmctldDebug=error
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SelectType=select/cons_tres
SchedulerType=sched/builtin
MaxJobId=2047
CONF
    for r in $(seq 1 "$RACKS"); do
      echo "NodeName=$(rack "$r")-[01-18] NodeAddr=127.0.$((r / 250)).$((r % 250)) CPUs=4 RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=gb Nodes=ALL Default=YES State=UP"
  } > "$D/slurm.conf"
  export SLURM_CONF=$D/slurm.conf
  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! { [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
    runuser -u munge -- /usr/sbin/munged --force
  fi
  slurmctld -f "$D/slurm.conf" -c || return 1
  poll_until 10 scontrol ping >/dev/null 2>&1 || { echo "ctld-bench: slurmctld never answered scontrol ping" >&2; return 1; }
  for r in $(seq 1 "$RACKS"); do
    scontrol update NodeName="$(rack "$r")-[01-18]" Extra="{\"nvlink_clique\":\"$UUID.$r\"}" || return 1
  done
}

# Everything a prolog needs but a daemon, for the config in DIR.
write_node_files() { # dir extra-imex-lines
  local d=$1
  printf 'Character devices:\n507 nvidia-caps-imex-channels\n' > "$d/proc-devices"
  printf 'IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\n' > "$d/config.cfg"
  cat > "$d/imex.toml" <<TOML
[node]
state_dir = "$d/state"
[imex]
proc_devices = "$d/proc-devices"
channels = "plugin"
ready_timeout = "100ms"
$2
[imex.daemon]
manager = "process"
binary = "/bin/false"
ctl = "/bin/false"
base_config = "$d/config.cfg"
nodes_config = "$d/nodes_config.cfg"
job_config = "$d/job.cfg"
[imex.addresses]
source = "hostname"
[slurm]
config = "$D/slurm.conf"
topology = "none"
[health]
enabled = false
scontrol = "$(command -v scontrol)"
TOML
  chmod 644 "$d"/*
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$(cat "$D/run/slurmctld.pid")/stat"; }
hook_rpcs() { sdiag | awk '/by message type/{f=1} /by user/{f=0} f && /REQUEST_(NODE|PARTITION)_INFO/ {for(i=1;i<=NF;i++) if($i ~ /^count:/){sub("count:","",$i); s+=$i}} END {print s+0}'; }
# sinfo's latency in ms, every 100 ms, until FILE appears.
probe_until() { # file out
  while [ ! -e "$1" ]; do
    local t0; t0=$(date +%s%N); sinfo -h -o %D >/dev/null 2>&1; echo $(( ($(date +%s%N) - t0) / 1000000 )) >> "$2"
    sleep 0.1
  done
}
stats() { sort -n "$1" | awk '{a[NR]=$1} END {if (NR) printf "%d ms p50, %d ms max (n=%d)", a[int((NR+1)/2)], a[NR], NR; else printf "-"}'; }

# The job's prologs, PAR at a time; prints a report row.
burst() { # label prolog config-dir
  local label=$1 prolog=$2 cfg=$3/imex.toml nodelist job_nodes t0 c0 wall cpu
  nodelist="gb-r[001-$(printf %03d "$JOB_RACKS")]-[01-18]"
  job_nodes=$(for r in $(seq 1 "$JOB_RACKS"); do for n in $(seq -w 1 18); do echo "$(rack "$r")-$n"; done; done)
  rm -f "$D/done" "$D/lat"
  sdiag -r >/dev/null
  probe_until "$D/done" "$D/lat" & local probe=$!
  c0=$(cpu_ticks); t0=$(date +%s%N)
  xargs -P "$PAR" -I{} env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF="$D/slurm.conf" SLURM_JOB_ID=4242 \
    SLURMD_NODENAME={} SLURM_JOB_NODELIST="$nodelist" SPANK_IMEX=1 SLURM_IMEX_CONFIG="$cfg" "$prolog" \
    <<<"$job_nodes" >/dev/null 2>"$D/$label.err"
  wall=$(( ($(date +%s%N) - t0) / 1000000 ))
  cpu=$(awk -v t=$(( $(cpu_ticks) - c0 )) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}')
  touch "$D/done"; wait "$probe"
  printf '| %-30s | %8d ms | %7s s | %9s | %s |\n' "$label" "$wall" "$cpu" "$(hook_rpcs)" "$(stats "$D/lat")"
}

main() {
  local old; old=$(old_prolog) || { echo "ctld-bench: cannot build the prolog of $OLD_REV" >&2; exit 1; }
  setup_controller || { echo "ctld-bench: slurmctld did not start; see $D/log" >&2; exit 1; }
  trap 'kill "$(cat "$D/run/slurmctld.pid" 2>/dev/null)" 2>/dev/null' EXIT
  write_node_files "$D/old" ""
  write_node_files "$D/new" "rack_map = \"$D/new/imex-racks.toml\""
  # The rack map, written once off the job path from this controller.
  local c0 t0; c0=$(cpu_ticks); t0=$(date +%s%N)
  "$BIN/slurm-imex" --config "$D/new/imex.toml" topology --map -o "$D/new/imex-racks.toml" || exit 1
  local map_ms=$(( ($(date +%s%N) - t0) / 1000000 )) map_cpu
  map_cpu=$(awk -v t=$(( $(cpu_ticks) - c0 )) -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}')
  : > "$D/idle"; for _ in $(seq 1 20); do
    t0=$(date +%s%N); sinfo -h -o %D >/dev/null; echo $(( ($(date +%s%N) - t0) / 1000000 )) >> "$D/idle"; sleep 0.1
  done
  echo "ctld-bench: slurmctld $(slurmctld -V | awk '{print $2}') with $((RACKS * 18)) nodes ($RACKS racks of 18, cliques in Extra), no slurmd;"
  echo "one $((JOB_RACKS * 18))-node --imex job's prologs, $PAR at a time, on $(nproc) cores; sinfo on the idle controller: $(stats "$D/idle")"
  echo
  echo "| prolog                         | wall        | ctld CPU  | node/part RPCs | sinfo during the prologs |"
  echo "|--------------------------------|-------------|-----------|----------------|--------------------------|"
  burst "before ($(git -C "$REPO" rev-parse --short "$OLD_REV" 2>/dev/null || echo OLD_PROLOG))" "$old" "$D/old"
  burst "after (this build)" "$BIN/slurm-imex-prolog" "$D/new"
  echo
  echo "slurm-imex topology --map, once off the job path: $map_ms ms, slurmctld CPU $map_cpu s, $(grep -c '^\[\[rack\]\]' "$D/new/imex-racks.toml") racks"
  # Every prolog stopped at the daemon (/bin/false), not before: the racks were learned.
  local f; for f in "$D"/*.err; do
    echo "$(basename "$f" .err): $(grep -c . "$f") prologs, $(grep -c 'nvidia-imex on' "$f") of them got as far as starting the daemon (/bin/false)"
  done
}
main "$@"
