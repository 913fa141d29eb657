#!/bin/bash
# The README's first command as a user runs it: `bash scripts/demo.sh`, in
# full, and what its output must show: the `sbatch -N3 --imex` job
# COMPLETED, and in each of its 3 nodes' tasks the job's private channel:
# exactly one device in /dev/nvidia-caps-imex-channels, channel<N> for the
# job's SLURM_IMEX_CHANNEL=N, a character device owned by the job's user at
# mode 0600 (crw-------); and a job without --imex sees none.
# tests/run-all.sh runs it; it needs what the demo needs (root, Debian 12)
# and the cluster's ports, so no other cluster may run beside it.
#   bash tests/demo-check.sh               # run the demo and check it; exit 1 on a miss
#   bash tests/demo-check.sh --log FILE    # check a demo's saved output (exit status 0 assumed)
#   bash tests/demo-check.sh --self-test   # the checks on a good output and on each way to break it
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# Every way LOG falls short of the README's promise, one line each, on stdout.
demo_misses() { # log rc
  local log=$1 rc=$2 job_line job user node plain
  [ "$rc" = 0 ] || echo "scripts/demo.sh exited $rc"
  job_line=$(sed -n 's/^job \([0-9][0-9]*\) on \([^ ]*\) as \([^ ]*\)$/\1 \2 \3/p' "$log" | sed -n 1p)
  read -r job _ user <<<"$job_line"
  [ -n "${user:-}" ] || echo "no 'job N on NODES as USER' line from the job"
  [ "${user:-}" != root ] || echo "the job ran as root, not as a user: a private channel proves nothing"
  grep -qx "job ${job:-?}: COMPLETED" "$log" || echo "no 'job ${job:-N}: COMPLETED' line"
  for node in n1 n2 n3; do node_misses "$log" "$node" "${user:-?}"; done
  # One job, one channel: the same on every node.
  local channels
  channels=$(sed -n 's/^  n[0-9]*: SLURM_IMEX_CHANNEL=\([0-9]*\) .*/\1/p' "$log" | sort -u | paste -sd ' ' -)
  [[ $channels != *" "* ]] || echo "the job's nodes hold different channels: $channels"
  # A job without --imex: its listing (up to the next blank line) holds no channel.
  plain=$(sed -n '/^and a job without --imex sees an empty channel directory:$/,/^$/p' "$log")
  [ -n "$plain" ] || echo "no listing from the job without --imex"
  [[ $plain != *channel[0-9]* ]] || echo "a job without --imex sees a channel: ${plain//$'\n'/ | }"
}

# One node's task line: "  nK: SLURM_IMEX_CHANNEL=N NVIDIA_IMEX_CHANNELS=N; <ls -l entries, ';'-joined>".
node_misses() { # log node user
  local line channel entries re lines
  lines=$(grep -c "^  $2: SLURM_IMEX_CHANNEL=" "$1")
  [ "$lines" != 0 ] || { echo "$2: no task line (the job's step did not run there)"; return; }
  [ "$lines" = 1 ] || { echo "$2: $lines task lines, want the one task per node"; return; }
  line=$(grep "^  $2: SLURM_IMEX_CHANNEL=" "$1")
  channel=$(sed -n 's/.*SLURM_IMEX_CHANNEL=\([0-9][0-9]*\) NVIDIA_IMEX_CHANNELS=\1;.*/\1/p' <<<"$line")
  [ -n "$channel" ] || { echo "$2: SLURM_IMEX_CHANNEL and NVIDIA_IMEX_CHANNELS are not one channel number: $line"; return; }
  entries=${line#*; }
  re="^crw------- +[0-9]+ +$3 +[^ ]+ +[0-9]+, +$channel .* channel$channel\$"
  [[ $entries != *";"* ]] || { echo "$2: more than the job's channel is visible: $entries"; return; }
  [[ $entries =~ $re ]] || echo "$2: want channel$channel, a character device of user '$3' at mode 0600; got: $entries"
}

# What the demo printed when it kept its promise (the lines the checks read).
good_demo_output() {
  cat <<'OUT'
job 1: COMPLETED
job 1 on n[1-3] as imexuser
  n3: SLURM_IMEX_CHANNEL=2 NVIDIA_IMEX_CHANNELS=2; crw------- 1 imexuser imexuser 507, 2 Nov 27 05:45 channel2
  n2: SLURM_IMEX_CHANNEL=2 NVIDIA_IMEX_CHANNELS=2; crw------- 1 imexuser imexuser 507, 2 Nov 27 05:45 channel2
  n1: SLURM_IMEX_CHANNEL=2 NVIDIA_IMEX_CHANNELS=2; crw------- 1 imexuser imexuser 507, 2 Nov 27 05:45 channel2
and a job without --imex sees an empty channel directory:
total 0
drwxr-xr-x 2 root root   40 Nov 27 05:45 .
drwxr-xr-x 7 root root 2220 Nov 27 05:45 ..

OUT
}

# The good output passes; each way of breaking the promise is caught.
self_test() {
  local dir bad=0 sed_script out n=0
  dir=$(mktemp -d); trap 'rm -rf "$dir"' RETURN
  good_demo_output > "$dir/good"
  out=$(demo_misses "$dir/good" 0)
  [ -z "$out" ] || { echo "demo-check self-test: the good output fails: $out"; bad=1; }
  [ -n "$(demo_misses "$dir/good" 3)" ] || { echo "demo-check self-test: exit 3 not caught"; bad=1; }
  while IFS= read -r sed_script; do
    n=$((n + 1))
    sed "$sed_script" "$dir/good" > "$dir/bad"
    [ -n "$(demo_misses "$dir/bad" 0)" ] || { echo "demo-check self-test: not caught: sed '$sed_script'"; bad=1; }
  done <<'BREAKS'
s/^job 1: COMPLETED/job 1: FAILED/
/^  n2: /d
s/^\(  n1: .*\)crw-------/\1crw-rw-rw-/
s/^\(  n3: .*\) 1 imexuser imexuser/\1 1 root root/
s/^\(  n1: .*channel2\)$/\1;crw-rw-rw- 1 root root 507, 0 Nov 27 05:45 channel0/
s/^\(  n2: .*\)channel2$/\1channel7/
s/^total 0$/crw-rw-rw- 1 root root 507, 0 Nov 27 05:45 channel0/
s/^job 1 on n\[1-3\] as imexuser$/job 1 on n[1-3] as root/
s/^\(  n3: SLURM_IMEX_CHANNEL=\)2 NVIDIA_IMEX_CHANNELS=2; \(.*\) 507, 2 \(.*\)channel2$/\17 NVIDIA_IMEX_CHANNELS=7; \2 507, 7 \3channel7/
s/^\(  n1: .*\)NVIDIA_IMEX_CHANNELS=2;/\1NVIDIA_IMEX_CHANNELS=;/
/^  n1: /p
BREAKS
  [ $bad = 0 ] && echo "demo-check self-test: the good output passes; exit 3 and $n broken outputs are caught"
  return $bad
}

report() { # log rc wall
  local misses
  misses=$(demo_misses "$1" "$2")
  if [ -n "$misses" ]; then
    sed 's/^/demo-check: FAIL: /' <<<"$misses"
    echo "demo-check: the demo does not show what the README promises (exit $2, $3 s; its output: $1)"
    return 1
  fi
  echo "demo-check: ok: the --imex job COMPLETED and each of its nodes' tasks sees only its private channel, owned by its user, mode 0600 (demo exit 0, $3 s)"
}

case ${1:-} in
  --self-test) self_test; exit;;
  --log) [ -f "${2:-}" ] || { echo "demo-check: --log needs a file" >&2; exit 2; }
    report "$2" 0 "?"; exit;;
  "") ;;
  *) echo "demo-check: unknown argument $1 (--log FILE, --self-test)" >&2; exit 2;;
esac
mkdir -p target
start=$SECONDS
# Bounded: a demo that hangs (a drained node, a job that never ends) fails
# the check instead of holding CI; the next cluster stops what it left.
timeout --kill-after=30 1800 bash scripts/demo.sh 2>&1 | tee target/demo.log
rc=${PIPESTATUS[0]}
report target/demo.log "$rc" "$((SECONDS - start))"
