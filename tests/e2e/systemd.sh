# shellcheck shell=bash
# The systemd phase (E2E_PHASE=systemd, E2E_SYSTEMD_ROOTFS): each node is a
# Debian 12 container booted by systemd-nspawn with systemd 252 as PID 1,
# and [imex.daemon] manager = "systemd" drives NVIDIA's unit shape through
# the real systemctl.

# systemctl inside node N.
node_systemctl() { local n=$1; shift; in_node "$n" systemctl "$@"; }

# Who listens on TCP port P in node N's network namespace ("" when nobody).
listener() { nsenter --net="/run/netns/imex-n$1" ss -Htln "sport = :$2" 2>/dev/null; }

test_systemd_starts_the_unit_on_the_job_config_and_stops_it() {
  local id i port main
  expect_eq "$(node_systemctl 1 is-system-running 2>&1)" running "n1's systemd is up, nothing failed"
  expect_eq "$(node_systemctl 1 is-active nvidia-imex 2>&1)" inactive "the unit is not started at boot (drop-in: the idle nodes_config is empty)"
  # doctor on a booted node reads the unit through the real systemctl.
  expect_contains "$(cli 1 doctor 2>&1)" "PASS  systemd         nvidia-imex.service starts the daemon with -c /run/slurm-imex/nvidia-imex.cfg, no start limit" \
    "doctor: the unit runs the per-job config, start limit off"
  id=$(submit -N2 --imex "srun -N2 true
$STARTED_MARKER
$HOLD_UNTIL_RELEASED") || { fail "sbatch failed"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  port=$((33792 + id % 16384))
  for i in 1 2; do
    expect_eq "$(node_systemctl "$i" is-active nvidia-imex)" active "n$i: the unit is active while the job runs"
    main=$(node_systemctl "$i" show -p MainPID --value nvidia-imex)
    expect_contains "$(in_node "$i" cat "/proc/$main/cmdline" | tr '\0' ' ')" "nvidia-imex -c /run/slurm-imex/nvidia-imex.cfg" \
      "n$i: the unit's main process runs on the per-job config"
    [ -n "$(listener "$i" "$port")" ] || fail "n$i: nothing listens on the job's SERVER_PORT $port"
  done
  release "$id"
  expect_eq "$(wait_done "$id")" COMPLETED "job $id"
  for i in 1 2; do
    wait_node_free "n$i"
    expect_eq "$(node_systemctl "$i" is-active nvidia-imex)" inactive "n$i: the unit is inactive after the epilog"
    expect_eq "$(listener "$i" "$port")" "" "n$i: the job's SERVER_PORT $port is closed"
    expect_idle "$i"
  done
}

test_systemd_unit_that_fails_to_start_is_a_node_fault() {
  local id i reason
  echo "MODE=exit" > "$C/nodes/n2/run-imex/fake-fault"
  id=$(submit -N3 --imex "srun -N3 true") || { fail "sbatch failed"; return; }
  wait_until 20 "n2 to drain" node_is_drained n2
  case "$(node_state n2)" in drain*) ;; *) fail "n2 not drained: $(node_state n2)";; esac
  reason=$(node_reason n2)
  echo "    n2 drained: $reason"
  expect_contains "$(node_systemctl 2 is-failed nvidia-imex)" failed "systemd has n2's unit failed"
  expect_contains "$(in_node 2 journalctl -u nvidia-imex --no-pager 2>&1)" "nvidia-imex.service" "journalctl -u nvidia-imex has the unit's story"
  # The prolog's line went to the node's own journald (the prolog logs there).
  expect_contains "$(in_node 2 journalctl --no-pager -o cat 2>&1 | grep 'could not start')" \
    "(journalctl -u nvidia-imex says why)" "the prolog's line names journalctl -u nvidia-imex"
  scancel "$id"
  rm -f "$C/nodes/n2/run-imex/fake-fault"
  node_systemctl 2 reset-failed nvidia-imex
  for i in 1 3; do
    wait_node_free "n$i"
    case "$(node_state "n$i")" in drain*|down*) fail "healthy n$i drained: $(node_reason "n$i")";; esac
    expect_idle "$i"
  done
  reset_nodes
}

# A burst of short --imex jobs on one node, each a restart and a stop of
# the unit by the real systemctl. The shipped drop-in turns systemd's start
# limit off: back-to-back restarts of the running unit (a rack-wide domain
# whose members change) are refused after the 5th in 10 s otherwise.
test_systemd_runs_a_burst_of_short_imex_jobs() {
  local ids=() id i t0=$SECONDS
  expect_eq "$(node_systemctl 1 show -p StartLimitIntervalUSec --value nvidia-imex)" 0 "the drop-in turns the start limit off"
  for i in 1 2 3 4 5 6 7 8; do
    id=$(submit -N1 -w n1 --imex "true") || { fail "sbatch failed"; return; }
    ids+=("$id")
  done
  for id in "${ids[@]}"; do expect_eq "$(wait_done "$id" 60)" COMPLETED "job $id of the burst"; done
  echo "    8 --imex jobs on n1 in $((SECONDS - t0)) s"
  case "$(node_state n1)" in drain*|down*) fail "n1 drained: $(node_reason n1)";; esac
  wait_node_free n1; expect_idle 1
}

# manager = "systemd": the watcher restarts a unit whose main process was
# killed, names systemd's cause, and the job completes.
test_systemd_restarts_a_killed_daemon_and_names_the_signal() {
  local id main t0
  id=$(submit -N3 --imex "srun -N3 true
$STARTED_MARKER
$HOLD_UNTIL_RELEASED
srun -N3 true") || { fail "sbatch failed"; return; }
  wait_started "$id" || { fail "job $id never started"; return; }
  main=$(node_systemctl 2 show -p MainPID --value nvidia-imex)
  [ "${main:-0}" -gt 1 ] || { fail "n2's unit has no main process"; return; }
  t0=$SECONDS
  in_node 2 kill -9 "$main"
  wait_until 25 "n2's unit to be active again on a new main process" eval \
    '[ "$(node_systemctl 2 is-active nvidia-imex)" = active ] && [ "$(node_systemctl 2 show -p MainPID --value nvidia-imex)" != "$main" ]'
  echo "    figure: n2's unit active again $((SECONDS - t0)) s after SIGKILL of its main process"
  release "$id"
  expect_eq "$(wait_done "$id" 60)" COMPLETED "job $id"
  wait_node_free n2
  case "$(node_state n2)" in drain*|down*) fail "n2 drained: $(node_reason n2)";; esac
  expect_contains "$(cli 2 show "$id")" "IMEX daemon died at " "n2's record names the death"
  expect_contains "$(cli 2 show "$id")" "killed by signal 9" "systemd's cause is named"
  expect_contains "$(cli 2 show "$id")" "IMEX daemon restarted at " "n2's record names the restart"
  expect_idle 2
}
