# shellcheck shell=bash
# The test runner and the Slurm, node and job helpers of the end-to-end
# tests (assertions: assert.sh).

source "$(dirname "${BASH_SOURCE[0]}")/assert.sh"

# One test: reset_nodes first, and a dump of the cluster when it fails,
# unless the phase's cluster is down already (CLUSTER_IS_DOWN=1, run.sh).
run_test() {
  # shellcheck disable=SC2034 # the test a failed assertion belongs to, for the runner
  CURRENT_TEST=$1
  CURRENT_OK=1
  echo "--- $1"
  [ "${CLUSTER_IS_DOWN:-0}" = 1 ] || reset_nodes
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
    [ "${CLUSTER_IS_DOWN:-0}" = 1 ] || dump_cluster_state
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

job_field() { scontrol show job -o "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | sed -n 1p; }
job_state() { job_field "$1" JobState; }

# Wait until the job reaches one of the given states; prints the state it
# was last seen in and returns 1 when it never got there (callers assert it).
wait_job() { # id timeout_s state...
  local id=$1 t=$2; shift 2
  poll_until "$t" job_state_is "$id" "$@"
  local rc=$?
  local s; s=$(job_state "$id")
  echo "${s:-UNKNOWN}"
  return $rc
}
job_state_is() { # id state...
  local s want; s=$(job_state "$1"); shift
  for want in "$@"; do [ "$s" = "$want" ] && return 0; done
  return 1
}
wait_done() { wait_job "$1" "${2:-60}" COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY BOOT_FAIL DEADLINE PREEMPTED; }

node_state() { sinfo -h -N -n "$1" -o %T | sed -n 1p; }
node_reason() { scontrol show node "$1" | sed -n 's/.*Reason=\(.*\)/\1/p' | sed -n 1p; }

node_is_free() { case "$(node_state "$1")" in idle|drained|down|"drained*"|"down*") return 0;; esac; return 1; }
node_is_drained() { case "$(node_state "$1")" in drain*) return 0;; esac; return 1; }
# Wait until no job holds the node and its epilog is over (quietly: callers
# then assert the node's state).
wait_node_free() { poll_until "${2:-30}" node_is_free "$1"; }

reset_nodes() {
  local i
  # A job an earlier failing test left holding its nodes would stall this one.
  squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null
  # The config as cluster_install rendered it, and no rack map.
  cp -p "$C/imex.toml.pristine" "$C/etc-slurm/imex.toml"
  rm -f "$C/etc-slurm/imex-racks.toml"
  for i in $(seq 1 "$E2E_NODES"); do
    # and no standing (whether slurm-imex drained the node) of an earlier test
    rm -f "$C/nodes/n$i/run-imex/fake-fault" "$C/nodes/n$i/clique" "$C/nodes/n$i/run-slurm-imex/node-metrics.json"
    write_scenario "$i"
    case "$(node_state "n$i")" in
      drain*|down*|fail*) scontrol update nodename="n$i" state=resume 2>/dev/null || true;;
    esac
  done
  for i in $(seq 1 "$E2E_NODES"); do wait_until 30 "n$i to be free before the test (it is $(node_state "n$i"))" node_is_free "n$i"; done
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

# Jobs as the test user. The script every test task runs prints one line of
# facts (cluster.sh).
# shellcheck disable=SC2034 # read by the feature files run.sh sources after this one
REPORT=$C/bin/imex-report
submit() { # extra sbatch args..., last arg is the script body
  local body=${*: -1}
  local args=("${@:1:$#-1}")
  local script; script=$(mktemp "$C/out/job.XXXXXX.sh")
  printf '#!/bin/bash\n%s\n' "$body" > "$script"
  chmod 755 "$script"
  as_user sbatch --parsable -o "$C/out/%j.out" -e "$C/out/%j.err" "${args[@]}" "$script"
}
# A job script line that holds the job until the test calls release.
# shellcheck disable=SC2034 # read by the feature files run.sh sources after this one
HOLD_UNTIL_RELEASED='for i in $(seq 1 600); do [ -e '"$C"'/out/release-$SLURM_JOB_ID ] && break; sleep 0.1; done'
release() { touch "$C/out/release-$1"; }
# Slurm marks a job RUNNING at allocation while prologs may still run on
# other nodes; a step (srun) starts only once every prolog is done. Test jobs
# touch this marker after their first step.
# shellcheck disable=SC2034 # read by the feature files run.sh sources after this one
STARTED_MARKER='touch '"$C"'/out/started-$SLURM_JOB_ID'
# Quiet: every caller fails the test in its own words.
wait_started() { poll_until 30 test -e "$C/out/started-$1"; }
