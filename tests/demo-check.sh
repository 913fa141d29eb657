#!/bin/bash
# The README's first command as a user runs it: `bash scripts/demo.sh`, in
# full, and what its output must show: the `sbatch -N3 --imex` job
# COMPLETED, and in each of its 3 nodes' tasks the job's private channel:
# exactly one device in /dev/nvidia-caps-imex-channels, channel<N> for the
# job's SLURM_IMEX_CHANNEL=N, a character device owned by the job's user at
# mode 0600 (crw-------). tests/run-all.sh runs it; it needs what the demo
# needs (root, Debian 12) and the cluster's ports, so no other cluster may
# run beside it.
#   bash tests/demo-check.sh     # "demo: ok ..." or one FAIL line per miss; exit 1
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mkdir -p target
log=target/demo.log
start=$SECONDS
bash scripts/demo.sh 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
wall=$((SECONDS - start))
misses=()
miss() { misses+=("$*"); }

[ "$rc" = 0 ] || miss "scripts/demo.sh exited $rc"
job_line=$(sed -n 's/^job \([0-9][0-9]*\) on \([^ ]*\) as \([^ ]*\)$/\1 \2 \3/p' "$log" | sed -n 1p)
read -r job nodelist user <<<"$job_line"
[ -n "${user:-}" ] || miss "no 'job N on NODES as USER' line from the job"
grep -qx "job ${job:-?}: COMPLETED" "$log" || miss "no 'job ${job:-N}: COMPLETED' line"

# One node's task line: "  nK: SLURM_IMEX_CHANNEL=N NVIDIA_IMEX_CHANNELS=N; <ls -l entries, ';'-joined>".
check_node() { # node
  local line channel entries
  line=$(grep "^  $1: SLURM_IMEX_CHANNEL=" "$log" | sed -n 1p)
  [ -n "$line" ] || { miss "$1: no task line (the job's step did not run there)"; return; }
  channel=$(sed -n 's/.*SLURM_IMEX_CHANNEL=\([0-9][0-9]*\) .*/\1/p' <<<"$line")
  [ -n "$channel" ] || { miss "$1: SLURM_IMEX_CHANNEL is not a channel number: $line"; return; }
  entries=${line#*; }
  local re="^crw------- +[0-9]+ +${user:-?} +[^ ]+ +[0-9]+, +$channel .* channel$channel\$"
  [[ $entries != *";"* ]] || { miss "$1: more than the job's channel is visible: $entries"; return; }
  [[ $entries =~ $re ]] || { miss "$1: want channel$channel, a character device of user '${user:-?}' at mode 0600; got: $entries"; return; }
  echo "demo-check: $1 shows channel$channel, crw------- ${user}"
}
for node in n1 n2 n3; do check_node "$node"; done

if [ ${#misses[@]} -gt 0 ]; then
  printf 'demo-check: FAIL: %s\n' "${misses[@]}"
  echo "demo-check: the demo does not show what the README promises (exit $rc, $wall s; its output: $log)"
  exit 1
fi
echo "demo-check: ok: job $job on $nodelist COMPLETED, each node's task sees only its private channel (demo exit 0, $wall s)"
