#!/bin/bash
# What the domain watcher (slurm-imex-watch) costs a node while an --imex
# job runs (issue 34). Needs root and a release build. Brings up the e2e
# cluster (tests/e2e/cluster.sh), runs the real prolog on 3 namespaced nodes
# with an --imex job's environment (each starts its watcher), lets the
# domain run for SECONDS, reads each watcher's CPU from /proc (its own and
# its waited-for children's: every nvidia-imex-ctl it ran), then the epilog.
# Prints CPU per node per hour of job, at [imex.watch] interval = 2s (the
# default) and at 500ms.
# Usage: benches/watch-bench.sh [seconds]   (default 60)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$REPO/target/release}
SECS=${1:-60}
E2E_NODES=3
source "$REPO/tests/e2e/cluster.sh"

hook_on() { # node job hook: a hook on node N with a 3-node --imex job's environment
  in_node "$1" env -i SLURM_JOB_ID="$2" SLURMD_NODENAME="n$1" SLURM_JOB_NODELIST='n[1-3]' SLURM_JOB_UID=0 SPANK_IMEX=1 "$3"
}
# utime + stime + cutime + cstime of a pid, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$1/stat"; }

[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }
cluster_down >/dev/null 2>&1 || true
cluster_install "$BIN" || exit 1
cluster_up || { cluster_down; exit 1; }
trap 'cluster_down >/dev/null 2>&1' EXIT
hz=$(getconf CLK_TCK)
echo "slurm-imex domain watcher benchmark — $(date -u +%FT%TZ), $(nproc) cores, ${SECS} s per interval"

job=81000
for interval in 2s 500ms; do
  sed -i "s/^interval = .*/interval = \"$interval\"/" "$C/etc-slurm/imex.toml"
  job=$((job + 1))
  for n in 1 2 3; do hook_on "$n" "$job" "$C/bin/slurm-imex-prolog" >/dev/null 2>&1 & done
  wait
  pids=()
  for n in 1 2 3; do pids+=("$(sed -n 's/^\([0-9]*\) .*/\1/p' "$C/nodes/n$n/run-slurm-imex/watch.pid")"); done
  declare -A before
  for p in "${pids[@]}"; do before[$p]=$(cpu_ticks "$p"); done
  sleep "$SECS"
  line="interval $interval:"
  for p in "${pids[@]}"; do
    used=$(( $(cpu_ticks "$p") - before[$p] ))
    line+=" $(awk -v t="$used" -v hz="$hz" -v s="$SECS" 'BEGIN { printf "%.2f", t / hz * 3600 / s }') CPU s/h"
  done
  echo "$line (per node, n1 n2 n3; $hz ticks/s, so ±$(awk -v hz="$hz" -v s="$SECS" 'BEGIN { printf "%.2f", 3600 / hz / s }') CPU s/h)"
  for n in 1 2 3; do hook_on "$n" "$job" "$C/bin/slurm-imex-epilog" >/dev/null 2>&1 & done
  wait
done
