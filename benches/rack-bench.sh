#!/bin/bash
# Rack scale: one NVL72 rack is 18 trays. Brings up an 18-node namespaced
# Slurm (tests/e2e/cluster.sh, fake nvidia-imex with real TCP between the
# nodes), runs real `sbatch --imex` jobs on 4, 8 and 18 nodes, and reads
# from each node's job record (written by the prolog):
#   prolog_ms  the whole prolog's wall time on that node;
#   waited_ms  daemon start to domain UP (readiness latency).
# Prints p50/p95/max per job size over every node of every job.
# RACKS=2: 36 nodes in two racks of 18 (a topology.conf beside slurm.conf,
# which the prolog reads; Slurm 22.05 itself has no topology/block), and jobs
# of 18 nodes (one rack) and 36 (both: one IMEX domain per rack).
# RACKS=2 ONE_DOMAIN=1: the same 36 nodes with no racks known (no topology
# file, one clique), so the 36-node job is one domain: what splitting costs
# beside the extra nodes themselves.
# Usage: [RACKS=1|2] [ONE_DOMAIN=1] benches/rack-bench.sh [jobs per size]   (default 5).
# Root, release build.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$REPO/target/release}
JOBS=${1:-5}
RACKS=${RACKS:-1}
case $RACKS in 1) SIZES="4 8 18";; 2) SIZES="18 36";; *) echo "RACKS is 1 or 2" >&2; exit 2;; esac
E2E_NODES=$((18 * RACKS))
# Each rack's fake GPUs report their own NVLink clique (tests/e2e/cluster.sh).
ONE_DOMAIN=${ONE_DOMAIN:-0}
[ "$RACKS" = 2 ] && [ "$ONE_DOMAIN" != 1 ] && E2E_RACK_SIZE=18
E2E_PLUGIN=${E2E_PLUGIN:-$REPO/target/slurm-plugins/22.05/libspank_imex.so}
source "$REPO/tests/e2e/cluster.sh"

pct() { # p50/p95/max of numbers on stdin
  sort -n | awk '{a[NR]=$1} END {if (NR == 0) {print "no samples"; exit} printf "p50 %5d  p95 %5d  max %5d  (n=%d)", a[int((NR+1)/2)], a[int(NR*0.95+0.999)], a[NR], NR}'
}

[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }
cluster_down >/dev/null 2>&1 || true
cluster_install "$BIN" || exit 1
start=$SECONDS
cluster_up || { cluster_down; exit 1; }
trap 'cluster_down >/dev/null 2>&1' EXIT
if [ "$RACKS" = 2 ] && [ "$ONE_DOMAIN" != 1 ]; then
  printf 'BlockName=rack1 Nodes=n[1-18]\nBlockName=rack2 Nodes=n[19-36]\n' > "$C/etc-slurm/topology.conf"
fi
echo "slurm-imex rack benchmark: $RACKS rack(s)$([ "$ONE_DOMAIN" = 1 ] && echo ", one domain"), $E2E_NODES namespaced nodes up in $((SECONDS - start)) s, $(sinfo -V), $(nproc) cores, $JOBS jobs per size"

job_is_queued() { squeue -h -j "$1" 2>/dev/null | grep . >/dev/null; }
node_is_idle() { [ "$(sinfo -h -N -n "$1" -o %T | sed -n 1p)" = idle ]; }

failed=0
for size in $SIZES; do
  : > "$C/out/prolog-$size"; : > "$C/out/ready-$size"
  for _ in $(seq 1 "$JOBS"); do
    script=$(mktemp "$C/out/rack.XXXXXX.sh")
    printf '#!/bin/bash\nsrun -N%d true && touch %s/out/started-$SLURM_JOB_ID\nfor i in $(seq 1 600); do [ -e %s/out/release-$SLURM_JOB_ID ] && break; sleep 0.1; done\n' \
      "$size" "$C" "$C" > "$script"
    chmod 755 "$script"
    id=$(as_user sbatch --parsable --imex -N"$size" -o "$C/out/%j.out" -e "$C/out/%j.err" "$script") || { failed=$((failed + 1)); continue; }
    if ! poll_until 60 test -e "$C/out/started-$id"; then
      echo "job $id ($size nodes) never started: $(cat "$C/out/$id.err" 2>/dev/null | sed -n 1,2p)"; failed=$((failed + 1))
    else
      for rec in "$C"/nodes/n*/run-slurm-imex/jobs/"$id".json; do
        sed -n 's/.*"prolog_ms": \([0-9]*\).*/\1/p' "$rec" >> "$C/out/prolog-$size"
        sed -n 's/.*"waited_ms": \([0-9]*\).*/\1/p' "$rec" >> "$C/out/ready-$size"
      done
    fi
    touch "$C/out/release-$id"
    wait_until 60 "job $id to leave the queue" not job_is_queued "$id"
    for i in $(seq 1 "$E2E_NODES"); do wait_until 10 "n$i to be idle after job $id" node_is_idle "n$i"; done
  done
  echo "--imex on $size nodes: prolog wall ms    $(pct < "$C/out/prolog-$size")"
  echo "--imex on $size nodes: readiness ms      $(pct < "$C/out/ready-$size")"
done
echo "jobs that failed to start: $failed"
[ "$failed" = 0 ]
