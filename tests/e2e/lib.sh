# shellcheck shell=bash
# Assertions and Slurm helpers for the end-to-end tests.

PASSED=0
FAILED=0
FAILED_NAMES=()
CURRENT_TEST=""
CURRENT_OK=1

fail() { echo "    FAIL: $*"; CURRENT_OK=0; }
expect_eq() { # actual expected what
  if [ "$1" != "$2" ]; then fail "$3: expected [$2], got [$1]"; fi
}
expect_contains() { # haystack needle what
  case "$1" in *"$2"*) ;; *) fail "$3: [$2] not found in: $(echo "$1" | head -c 600)";; esac
}
expect_not_contains() {
  case "$1" in *"$2"*) fail "$3: [$2] unexpectedly found in: $(echo "$1" | head -c 600)";; esac
}

run_test() {
  CURRENT_TEST=$1
  CURRENT_OK=1
  echo "--- $1"
  reset_nodes
  local start=$SECONDS
  if ! declare -F "$1" >/dev/null; then
    fail "no such test function: $1"
  else
    "$1"
  fi
  if [ "$CURRENT_OK" = 1 ]; then
    PASSED=$((PASSED + 1)); echo "    ok ($((SECONDS - start)) s)"
  else
    FAILED=$((FAILED + 1)); FAILED_NAMES+=("$1"); echo "    FAILED ($((SECONDS - start)) s)"
    dump_cluster_state
  fi
}

# After a failed test, what the next phase would overwrite: the nodes' and
# jobs' states and the daemons' last log lines (up to 4 nodes).
dump_cluster_state() {
  local i log
  echo "    -- sinfo:"; sinfo -N -h -o '%N %T %E' 2>&1 | sed 's/^/       /'
  echo "    -- jobs:"; scontrol show job -o 2>&1 | cut -c1-400 | tail -5 | sed 's/^/       /'
  for log in "$C/log/slurmctld.log" $(for i in $(seq 1 $(( E2E_NODES < 4 ? E2E_NODES : 4 ))); do echo "$C/log/slurmd-n$i.log"; done); do
    echo "    -- tail $log:"; tail -n 25 "$log" 2>&1 | cut -c1-300 | sed 's/^/       /'
  done
}

job_field() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
job_state() { job_field "$1" JobState; }

# Wait until the job reaches one of the given states; prints the state.
wait_job() { # id timeout_s state...
  local id=$1 t=$2; shift 2
  local s i
  for i in $(seq 1 $((t * 10))); do
    s=$(job_state "$id")
    for want in "$@"; do [ "$s" = "$want" ] && { echo "$s"; return 0; }; done
    sleep 0.1
  done
  echo "${s:-UNKNOWN}"
  return 1
}
wait_done() { wait_job "$1" "${2:-60}" COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY BOOT_FAIL DEADLINE PREEMPTED; }

node_state() { sinfo -h -N -n "$1" -o %T | head -1; }
node_reason() { scontrol show node "$1" | sed -n 's/.*Reason=\(.*\)/\1/p' | head -1; }

# Wait until no job holds the node and its epilog is over.
wait_node_free() { # node timeout
  local i s
  for i in $(seq 1 $(( ${2:-30} * 10 ))); do
    s=$(node_state "$1")
    case "$s" in idle|drained|down|"drained*"|"down*") return 0;; esac
    sleep 0.1
  done
  return 1
}

reset_nodes() {
  local i
  # A job an earlier failing test left holding its nodes would stall this one.
  squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null
  # The config as cluster_install rendered it, and no rack map.
  cp -p "$C/imex.toml.pristine" "$C/etc-slurm/imex.toml"
  rm -f "$C/etc-slurm/imex-racks.toml"
  for i in $(seq 1 "$E2E_NODES"); do
    rm -f "$C/nodes/n$i/run-imex/fake-fault" "$C/nodes/n$i/clique"
    write_scenario "$i"
    case "$(node_state "n$i")" in
      drain*|down*|fail*) scontrol update nodename="n$i" state=resume 2>/dev/null || true;;
    esac
  done
  for i in $(seq 1 "$E2E_NODES"); do wait_node_free "n$i" 30 || echo "    (n$i not free: $(node_state "n$i"))"; done
}

# What a job's own failure must leave: every node free, none drained, idle.
expect_nodes_up_and_idle() {
  local i
  for i in $(seq 1 "$E2E_NODES"); do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "n$i was drained: $(node_reason "n$i")";; esac
    expect_idle "$i"
  done
}

# The idle contract of the epilog on node N.
expect_idle() {
  local n=$1 d=$C/nodes/n$1
  expect_eq "$(cat "$d/etc-imex/nodes_config.cfg")" "" "n$n nodes_config.cfg empty after the job"
  [ -e "$d/run-slurm-imex/domain.owner" ] && fail "n$n still has a domain owner: $(cat "$d/run-slurm-imex/domain.owner")"
  [ -e "$d/run-slurm-imex/nvidia-imex.cfg" ] && fail "n$n still has the per-job daemon config"
  [ -e "$d/run-slurm-imex/nvidia-imex.pid" ] && fail "n$n still has a daemon pid file"
  [ -n "$(ls -A "$d/run-slurm-imex/jobs" 2>/dev/null)" ] && fail "n$n still has job records: $(ls "$d/run-slurm-imex/jobs")"
  [ -n "$(ls -A "$d/run-slurm-imex/gpu-jobs" 2>/dev/null)" ] && fail "n$n still has GPU start snapshots: $(ls "$d/run-slurm-imex/gpu-jobs")"
  in_node "$n" "$C/bin/nvidia-imex-ctl" -c /etc/nvidia-imex/config.cfg -q >/dev/null 2>&1 && fail "n$n: an IMEX daemon still answers"
  return 0
}

channel_for() { echo $(( 1 + $1 % 2047 )); }

# The admin CLI on node N (its own database, config, fake hardware).
cli() { local n=$1; shift; in_node "$n" "$C/bin/slurm-imex" --config "$C/etc-slurm/imex.toml" "$@"; }
json_count() { grep -o "$1" | wc -l; }
