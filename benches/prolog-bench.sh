#!/bin/bash
# Prolog/epilog timing report for slurm-imex (issue #2). Needs root and a
# release build. Brings up the e2e cluster (tests/e2e/cluster.sh) and runs
# the real prolog/epilog binaries inside the node namespaces, with the fake
# nvidia-imex doing real TCP peer connections. Prints:
#   1. prolog wall time for a job without --imex (the cost every job pays);
#   2. --imex prolog wall time on 3 nodes (daemon start to domain UP);
#   3. latency from the moment a node's daemon first reads the domain UP
#      (fake daemon event, ms clock) to that node's prolog returning — the
#      cost of our readiness polling;
#   4. epilog wall time for an --imex job.
# Usage: benches/prolog-bench.sh [rounds]   (default 10)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$REPO/target/release}
ROUNDS=${1:-10}
E2E_NODES=3
source "$REPO/tests/e2e/cluster.sh"

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
stats() { # prints min/median/p90/max of numbers on stdin
  sort -n | awk '{a[NR]=$1} END {printf "min %s  median %s  p90 %s  max %s  (n=%d)", a[1], a[int((NR+1)/2)], a[int(NR*0.9+0.999)], a[NR], NR}'
}
hook_on() { # node job nodelist hook: run a hook on node N with an --imex job's environment
  in_node "$1" env -i SLURM_JOB_ID="$2" SLURMD_NODENAME="n$1" SLURM_JOB_NODELIST="$3" SLURM_JOB_UID=0 SPANK_IMEX=1 "$4"
}

[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }
cluster_down >/dev/null 2>&1 || true
cluster_install "$BIN" || exit 1
cluster_up || { cluster_down; exit 1; }
trap 'cluster_down >/dev/null 2>&1' EXIT

echo "slurm-imex prolog/epilog benchmark — $(date -u +%FT%TZ), $(nproc) cores, $ROUNDS rounds"

# 1. No --imex: what every job pays, 200 runs each, with the GPU health gate
#    off (a CPU job, [health] enabled = false) and on (4 fake GPUs).
sed 's/^enabled = true/enabled = false/' "$C/etc-slurm/imex.toml" > "$C/etc-slurm/imex-nohealth.toml"
N=200
per_run() { # config -> microseconds per prolog run, harness included
  local t0 t1 i
  t0=$(date +%s%N)
  for i in $(seq 1 $N); do
    in_node 1 env -i SLURM_IMEX_CONFIG="$1" SLURM_JOB_ID=$i SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1 \
      "$C/bin/slurm-imex-prolog" 2>/dev/null || echo "prolog failed" >&2
  done
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / N / 1000 ))
}
cpu=$(per_run "$C/etc-slurm/imex-nohealth.toml")
gpu=$(per_run "$C/etc-slurm/imex.toml")
t0=$(date +%s%N)
for i in $(seq 1 $N); do in_node 1 env -i /bin/true; done
base=$(( ($(date +%s%N) - t0) / N / 1000 ))
echo "1. prolog, job without --imex (us per run; /bin/true in the same nsenter harness: ${base} us):"
echo "   CPU job (health gate off): ${cpu} us incl. harness -> prolog's own share $(( cpu - base )) us"
echo "   GPU job (gate on $E2E_GPUS fake GPUs): ${gpu} us incl. harness -> prolog's own share $(( gpu - base )) us"

# 2-4. --imex on 3 nodes, concurrently as Slurm runs them.
: > /tmp/bench.wall; : > /tmp/bench.lat; : > /tmp/bench.epi
for r in $(seq 1 "$ROUNDS"); do
  job=$((70000 + r))
  for n in 1 2 3; do : > "$C/nodes/n$n/run-imex/fake-events"; done
  start=$(now_ms)
  for n in 1 2 3; do
    ( hook_on "$n" "$job" 'n[1-3]' "$C/bin/slurm-imex-prolog" 2>/dev/null; echo "$? $(now_ms)" > "$C/run/bench-n$n" ) &
  done
  wait
  ends=(); ok=1
  for n in 1 2 3; do read -r rc end < "$C/run/bench-n$n"; [ "$rc" = 0 ] || ok=0; ends+=("$end"); done
  [ $ok = 1 ] || { echo "round $r: a prolog failed" >&2; continue; }
  # Each prolog waits for its own node's view of the domain: compare its exit
  # with the moment that node's daemon first saw the domain UP.
  n=0
  for e in "${ends[@]}"; do
    n=$((n + 1))
    up=$(awk '$2=="domain-up" {print $1; exit}' "$C/nodes/n$n/run-imex/fake-events")
    [ -n "$up" ] && echo $(( e - up )) >> /tmp/bench.lat
  done
  last_end=$(printf '%s\n' "${ends[@]}" | sort -n | tail -1)
  echo $(( last_end - start )) >> /tmp/bench.wall
  e0=$(now_ms)
  for n in 1 2 3; do
    ( hook_on "$n" "$job" 'n[1-3]' "$C/bin/slurm-imex-epilog" 2>/dev/null || echo "epilog failed" >&2; echo $(( $(now_ms) - e0 )) >> /tmp/bench.epi ) &
  done
  wait
done
echo "2. --imex prolog on 3 nodes, start to last prolog returning (ms): $(stats < /tmp/bench.wall)"
echo "3. node's daemon sees domain UP -> that node's prolog returns (ms): $(stats < /tmp/bench.lat)"
echo "4. --imex epilog per node (ms): $(stats < /tmp/bench.epi)"
