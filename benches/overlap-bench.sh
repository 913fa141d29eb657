#!/bin/bash
# The GPU health gate runs beside the IMEX domain start (issue #7): an
# --imex GPU job's prolog should take about max(gate, domain), not their
# sum. On one namespaced node with a slow NVML (nvmlInit takes
# GATE_MS, as without persistence mode) and a slow-starting daemon (READY
# after DOMAIN_MS), prints the median prolog wall time of:
#   gate alone    a GPU job without --imex;
#   domain alone  an --imex job with [health] enabled = false;
#   both          an --imex GPU job: the figure that matters.
# OLD_PROLOG=/path/to/slurm-imex-prolog (with OLD_EPILOG beside it) also
# times an older build on "both".
# Usage: benches/overlap-bench.sh [rounds]   (default 5). Root, release build.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${BIN:-$REPO/target/release}
ROUNDS=${1:-5}
GATE_MS=${GATE_MS:-1500}
DOMAIN_MS=${DOMAIN_MS:-1500}
E2E_NODES=2
E2E_PLUGIN=${E2E_PLUGIN:-$REPO/target/slurm-plugins/22.05/libspank_imex.so}
source "$REPO/tests/e2e/cluster.sh"

median() { sort -n | awk '{a[NR]=$1} END {printf "%d ms (min %d, max %d, n=%d)", a[int((NR+1)/2)], a[1], a[NR], NR}'; }
[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 1; }
cluster_down >/dev/null 2>&1 || true
cluster_install "$BIN" || exit 1
cluster_up || { cluster_down; exit 1; }
trap 'cluster_down >/dev/null 2>&1' EXIT
sed 's/^enabled = true/enabled = false/' "$C/etc-slurm/imex.toml" > "$C/etc-slurm/imex-nohealth.toml"
write_scenario 1
sed -i "1a init_delay_ms = $GATE_MS" "$C/nodes/n1/hw/nvml.toml"
printf 'MODE=slow-start\nDELAY_MS=%d\n' "$DOMAIN_MS" > "$C/nodes/n1/run-imex/fake-fault"
echo "slurm-imex prolog overlap benchmark: nvmlInit $GATE_MS ms, daemon READY after $DOMAIN_MS ms, $ROUNDS rounds, $(nproc) cores"

time_pair() { # label prolog imex(0/1) config [epilog]
  local label=$1 prolog=$2 imex=$3 config=$4 epilog=${5:-$BIN/slurm-imex-epilog} job t0 rc
  : > "$C/out/overlap"
  for _ in $(seq 1 "$ROUNDS"); do
    job=$((800000 + RANDOM))
    local env=(env -i "SLURM_JOB_ID=$job" SLURMD_NODENAME=n1 SLURM_JOB_NODELIST=n1 SLURM_JOB_GPUS=0 "SLURM_IMEX_CONFIG=$config")
    [ "$imex" = 1 ] && env+=(SPANK_IMEX=1)
    t0=$(date +%s%N)
    in_node 1 "${env[@]}" "$prolog" >/dev/null 2>&1; rc=$?
    echo $(( ($(date +%s%N) - t0) / 1000000 )) >> "$C/out/overlap"
    [ "$rc" = 0 ] || echo "  ($label: prolog exited $rc)"
    in_node 1 "${env[@]}" "$epilog" >/dev/null 2>&1
  done
  printf '%-28s %s\n' "$label" "$(median < "$C/out/overlap")"
}
time_pair "gate alone" "$BIN/slurm-imex-prolog" 0 "$C/etc-slurm/imex.toml"
time_pair "domain alone" "$BIN/slurm-imex-prolog" 1 "$C/etc-slurm/imex-nohealth.toml"
time_pair "both (this build)" "$BIN/slurm-imex-prolog" 1 "$C/etc-slurm/imex.toml"
if [ -n "${OLD_PROLOG:-}" ]; then
  time_pair "both (OLD_PROLOG)" "$OLD_PROLOG" 1 "$C/etc-slurm/imex.toml" "${OLD_EPILOG:-$(dirname "$OLD_PROLOG")/slurm-imex-epilog}"
fi
